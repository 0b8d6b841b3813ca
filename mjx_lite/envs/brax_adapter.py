"""Brax's environment interface for mjx_lite tasks, so that Brax's trainers (`brax.training.agents.ppo`, `sac`)
train them unchanged. Needs `brax` (optional: `pip install "mjx_lite[brax]"`).

    from brax.training.agents.ppo import train as brax_ppo
    from mjx_lite import envs
    from mjx_lite.envs import brax_adapter

    env = brax_adapter.to_brax(envs.make("cartpole_balance"))        # a brax.envs.Env
    make_inference_fn, params, metrics = brax_ppo.train(environment=env, num_timesteps=1_000_000,
                                                        episode_length=1000, num_envs=256, batch_size=256, ...)
    # domain randomisation through Brax's wrapper, with our randomize(model, rng) -> model hook:
    brax_ppo.train(environment=env, randomization_fn=brax_adapter.randomization_fn(env.env.randomizer()), ...)

The adapter holds our `envs.Env` (`.env`) and its Model as `.sys` (Brax's name: its domain-randomisation wrapper
swaps `.sys` per environment, which reaches our step through `Env.with_model`). A Brax `State` carries our Data as
`pipeline_state` and our `obs`, `reward`, `done`, `metrics`, `info` (the task's per-episode values, e.g. a target,
plus what Brax's wrappers add). Episodes, action repeat and auto-reset are Brax's (`brax.envs.training.wrap`):
Brax's auto-reset returns an environment to the first state it was reset to, where our `wrap_for_training` draws a
fresh one.

Brax 0.14's trainers call `jax.device_put_replicated`, which JAX 0.10 removed: `install_jax_shims()` adds a
stand-in (`device_put_replicated` below: the value stacked once per device, on the default device) where JAX lacks
it; call it before Brax's `train` on such a JAX (it changes the `jax` module, so it is never done on import).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.envs.base import Env, State
from mjx_lite.types import Model

__all__ = ["device_put_replicated", "install_jax_shims", "randomization_fn", "to_brax"]


def _brax_base():
    try:
        from brax.envs import base  # noqa: PLC0415 (optional dependency)
    except ImportError as e:
        raise ImportError('the Brax adapter needs brax: pip install "mjx_lite[brax]" (or pip install brax)') from e
    return base


@functools.cache
def _adapter_class(base):
    class BraxEnv(base.Env):
        """An mjx_lite `envs.Env` as a `brax.envs.Env` (see mjx_lite.envs.brax_adapter)."""

        def __init__(self, env: Env):
            if not isinstance(env, Env):
                raise TypeError(f"to_brax needs an mjx_lite envs.Env, not {type(env).__name__}")
            self._env = env
            self.sys = env.model

        @property
        def env(self) -> Env:
            """The mjx_lite environment."""
            return self._env

        @property
        def observation_size(self) -> int:
            return self._env.observation_size

        @property
        def action_size(self) -> int:
            return self._env.action_size

        @property
        def backend(self) -> str:
            return "mjx_lite"

        @property
        def dt(self) -> float:
            return self._env.dt

        def _current(self) -> Env:
            return self._env if self.sys is self._env.model else self._env.with_model(self.sys)

        def reset(self, rng: jax.Array):
            s = self._current().reset(rng)
            return base.State(pipeline_state=s.data, obs=s.obs, reward=s.reward, done=s.done, metrics=s.metrics,
                              info=dict(s.info))  # fmt: skip

        def step(self, state, action: jax.Array):
            ours = State(state.pipeline_state, state.obs, state.reward, state.done, state.metrics, state.info)
            s = self._current().step(ours, action)
            # keep what Brax's wrappers put into metrics and info (a task's step may return only its own keys)
            return state.replace(pipeline_state=s.data, obs=s.obs, reward=s.reward, done=s.done,
                                 metrics={**state.metrics, **s.metrics}, info={**state.info, **s.info})  # fmt: skip

    return BraxEnv


def to_brax(env: Env):
    """`env` as a `brax.envs.Env` (see the module docstring); ImportError naming the extra without brax."""
    return _adapter_class(_brax_base())(env)


def randomization_fn(randomize: Callable[[Model, jax.Array], Model]):
    """Our domain randomisation hook `randomize(model, rng) -> model` (e.g. `env.randomizer()`) as Brax's
    `randomization_fn(sys, rng) -> (batched sys, in_axes)` (rng: one key per environment): the fields that differ
    between environments get a leading axis (in_axes 0), the others stay shared (None)."""

    def fn(sys: Model, rng: jax.Array):
        batched = jax.vmap(randomize, in_axes=(None, 0))(sys, rng)
        leaves, treedef = jax.tree.flatten(batched)
        axes, shared = [], []
        for x in leaves:
            host = np.asarray(x)
            same = bool(np.all(host == host[:1]))
            axes.append(None if same else 0)
            shared.append(x[0] if same else x)
        return jax.tree.unflatten(treedef, shared), jax.tree.unflatten(treedef, axes)

    return fn


def device_put_replicated(x, devices):
    """Stand-in for the removed `jax.device_put_replicated`: every leaf of `x` stacked len(devices) times (a leading
    device axis), placed on the default device."""
    return jax.tree.map(lambda a: jax.device_put(jp.stack([jp.asarray(a)] * len(devices))), x)


def install_jax_shims() -> bool:
    """Set `jax.device_put_replicated` to the stand-in where this JAX has none (Brax 0.14's trainers call it);
    True if it was added."""
    try:
        jax.device_put_replicated  # noqa: B018 (raises AttributeError on JAX >= 0.10)
        return False
    except AttributeError:
        jax.device_put_replicated = device_put_replicated
        return True
