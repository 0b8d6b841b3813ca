"""`wrap_for_training`: a batch of environments with episodes, action repeat, auto-reset and randomisation.

    train_env = envs.wrap_for_training(env, episode_length=1000, action_repeat=1)
    state = train_env.reset(jax.random.split(key, num_envs))     # every leaf has a leading num_envs axis
    state = train_env.step(state, actions)                         # actions: (num_envs, action_size)

Per step and per environment (vmapped over the batch):
  * `action_repeat` calls of `env.step` with the same action; the rewards are summed (stopping at the first
    `done`). An episode lasts `episode_length` environment steps, i.e. `episode_length // action_repeat` calls
    of `train_env.step`.
  * An episode ends (`done = 1`) by termination (the task's own `done`), by truncation at the time limit
    (`info["truncation"] = 1`, told apart from termination: a truncated episode's last state is not terminal
    and PPO bootstraps its value), by divergence (the physics reset the environment, `warning_number` grew:
    `info["diverged"] = 1`) or by a non-finite action (`info["nan_action"] = 1`; the environment is stepped with
    a zero action instead). A diverged or NaN-action step gets reward 0.
  * Finished environments are reset, in the same step, to a fresh initial state drawn from their own key
    (`info["rng"]`, advanced every step); the others are untouched. The reset runs only when some environment
    is done (one `lax.cond` over the batch). The observation the episode ended with is `info["final_obs"]`.
  * `info["episode_metrics"]` sums, over the current episode, the reward ("return"), the number of environment
    steps ("length") and each of the task's `metrics`; where `info["episode_done"]` is 1 they hold the totals of
    the episode that just ended (they restart at the next step). `info["steps"]` counts the current episode's
    environment steps.

Domain randomisation: `randomize(model, rng) -> model` (e.g. `envs.scale_randomizer(...)`) is vmapped over
`num_envs` keys once, when wrapping; the fields it changed get a leading `num_envs` axis in `train_env.model`,
the others stay shared. Every step vmaps over that batched model, with no retrace: `TrainingEnv` is a pytree
whose leaves are the model's arrays, so a re-randomised `TrainingEnv` passed to a jitted function reuses its
compilation. `train_env.jit_reset` / `train_env.jit_step` are jitted versions shared by every TrainingEnv of the same
environment and settings (compiled once per shape, whichever wrapper instance calls them).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.types import Model

__all__ = ["WRAPPER_INFO", "TrainingEnv", "wrap_for_training"]

# keys the training wrapper adds to `State.info` (an env's own info must not use them)
WRAPPER_INFO = ("rng", "steps", "truncation", "diverged", "nan_action", "episode_metrics", "episode_done",
                "final_obs")  # fmt: skip


def _raw_keys(rng: jax.Array) -> jax.Array:
    """A batch of keys as raw uint32 key data (B, 2): accepts `jax.random.split(key, B)` of either key style."""
    rng = jp.asarray(rng) if not isinstance(rng, jax.Array) else rng
    if jax.dtypes.issubdtype(rng.dtype, jax.dtypes.prng_key):
        rng = jax.random.key_data(rng)
    if rng.ndim != 2 or rng.dtype != jp.uint32:
        raise ValueError(
            "reset needs one PRNG key per environment, e.g. jax.random.split(key, num_envs): shape (num_envs, 2) "
            f"uint32 or (num_envs,) typed keys; got shape {rng.shape} dtype {rng.dtype}"
        )
    return rng


def _select(mask: jax.Array, a, b):
    """Per environment: leaves of `a` where mask (B,) else of `b`."""

    def pick(x, y):
        m = mask.reshape(mask.shape + (1,) * (x.ndim - mask.ndim))
        return jp.where(m, x, y)

    return jax.tree.map(pick, a, b)


def _split_info(info: dict) -> tuple[dict, dict]:
    env_info = {k: v for k, v in info.items() if k not in WRAPPER_INFO}
    return env_info, {k: v for k, v in info.items() if k in WRAPPER_INFO}


@jax.tree_util.register_pytree_node_class
class TrainingEnv:
    """A batched, auto-resetting view of an `Env` (see the module docstring). Build with `wrap_for_training`."""

    def __init__(self, env: Env, episode_length: int, action_repeat: int, model: Model, axes: tuple,
                 randomize: Callable | None, num_envs: int | None):  # fmt: skip
        self._env = env
        self._episode_length = episode_length
        self._action_repeat = action_repeat
        self._model = model
        self._axes = axes
        self._randomize = randomize
        self._num_envs = num_envs

    # pytree: the model's arrays are the leaves; everything else is static
    def tree_flatten(self):
        aux = (self._env, self._episode_length, self._action_repeat, self._axes, self._randomize, self._num_envs)
        return (self._model,), aux

    @classmethod
    def tree_unflatten(cls, aux, children):
        env, episode_length, action_repeat, axes, randomize, num_envs = aux
        return cls(env, episode_length, action_repeat, children[0], axes, randomize, num_envs)

    # ---- properties ----------------------------------------------------------------------------------------
    @property
    def env(self) -> Env:
        """The wrapped single environment."""
        return self._env

    unwrapped = env

    @property
    def model(self) -> Model:
        """The model: randomised fields carry a leading `num_envs` axis, the others are shared."""
        return self._model

    @property
    def num_envs(self) -> int | None:
        """The batch size fixed by domain randomisation (None without: any batch size works)."""
        return self._num_envs

    @property
    def episode_length(self) -> int:
        return self._episode_length

    @property
    def action_repeat(self) -> int:
        return self._action_repeat

    @property
    def observation_size(self) -> int:
        return self._env.observation_size

    @property
    def action_size(self) -> int:
        return self._env.action_size

    @property
    def dt(self) -> float:
        """Time between two calls of `step`: action_repeat * env.dt."""
        return self._env.dt * self._action_repeat

    def randomized_fields(self) -> list[str]:
        """Paths of the model leaves that differ between environments (e.g. ['body_mass', 'opt.gravity'])."""
        paths = jax.tree_util.tree_flatten_with_path(self._model)[0]
        return [_path_str(p) for (p, _), ax in zip(paths, self._axes) if ax == 0]

    def env_model(self, i: int) -> Model:
        """The model of environment `i` (unbatched)."""
        leaves, treedef = jax.tree.flatten(self._model)
        return jax.tree.unflatten(treedef, [x[i] if ax == 0 else x for x, ax in zip(leaves, self._axes)])

    # ---- batched map over environments ---------------------------------------------------------------------
    def _vmap(self, fn: Callable, *args):
        """vmap `fn(env_i, *args_i)` over the batch, env_i simulating its own model."""
        model_axes = jax.tree.unflatten(jax.tree.structure(self._model), list(self._axes))
        env = self._env

        def one(m, *a):
            return fn(env.with_model(m), *a)

        return jax.vmap(one, in_axes=(model_axes,) + (0,) * len(args))(self._model, *args)

    def _check_batch(self, n: int, what: str) -> None:
        if self._num_envs is not None and n != self._num_envs:
            raise ValueError(
                f"{what} has a batch of {n} environments but this training env was randomised for num_envs="
                f"{self._num_envs}"
            )

    # ---- reset / step ---------------------------------------------------------------------------------------
    def jit_reset(self, rng: jax.Array) -> State:
        """`reset`, jitted (one compilation per environment, settings and batch size; see the module docstring)."""
        return _jit_reset(self, rng)

    def jit_step(self, state: State, action: jax.Array) -> State:
        """`step`, jitted (shared like `jit_reset`); actions are cast to the observation dtype first (a weakly
        typed array, e.g. from `jp.full(shape, 0.5)`, would otherwise compile a second time)."""
        action = jp.asarray(action)
        if jp.issubdtype(action.dtype, jp.floating):
            action = jp.asarray(action, dtype=state.obs.dtype)
        return _jit_step(self, state, action)

    def reset(self, rng: jax.Array) -> State:
        """Fresh states for a batch of environments, one PRNG key each: rng (num_envs, 2) -> State (batched)."""
        keys = _raw_keys(rng)
        self._check_batch(keys.shape[0], "reset's rng")
        split = jax.vmap(jax.random.split)(keys)  # (B, 2, 2)
        reset_keys, carry_keys = split[:, 0], split[:, 1]
        state = self._vmap(lambda env, k: env.reset(k), reset_keys)
        clash = sorted(set(state.info) & set(WRAPPER_INFO))
        if clash:
            raise ValueError(f"{self._env.name}: State.info keys {clash} are reserved by the training wrapper")
        f = state.reward.dtype
        b = keys.shape[0]
        zero = jp.zeros((b,), f)
        episode = {"return": zero, "length": zero, **{k: jp.zeros((b,), f) for k in state.metrics}}
        info = {
            **state.info, "rng": carry_keys, "steps": jp.zeros((b,), jp.int32), "truncation": zero,
            "diverged": zero, "nan_action": zero, "episode_metrics": episode, "episode_done": zero,
            "final_obs": state.obs,
        }  # fmt: skip
        return state.replace(done=zero, reward=zero, info=info)

    def _env_step(self, env: Env, state: State, action: jax.Array) -> tuple[State, jax.Array]:
        """One environment: `action_repeat` steps; returns the state (summed reward) and whether it diverged."""
        first = env.step(state, action)
        div = diverged(state.data, first.data)
        if self._action_repeat == 1:
            return first, div

        def body(carry, _):
            s, total, dv = carry
            nxt = env.step(s, action)
            stop = (s.done > 0) | dv
            dv = dv | (~stop & diverged(s.data, nxt.data))
            total = total + jp.where(stop, 0.0, nxt.reward)
            return (jax.tree.map(lambda a, b: jp.where(stop, a, b), s, nxt), total, dv), None

        (s, total, div), _ = jax.lax.scan(body, (first, first.reward, div), None, length=self._action_repeat - 1)
        return s.replace(reward=total), div

    def step(self, state: State, action: jax.Array) -> State:
        """Advance every environment by one control step (`action_repeat` env steps): action (B, action_size)."""
        b = state.done.shape[0] if state.done.ndim == 1 else None
        action = jp.asarray(action)
        if b is None:
            raise ValueError(f"step needs a batched State (from train_env.reset), got done of shape {state.done.shape}")
        if action.shape != (b, self.action_size):
            raise ValueError(
                f"{self._env.name}: actions must have shape (num_envs, action_size) = ({b}, {self.action_size}), "
                f"got {action.shape}"
            )
        if not jp.issubdtype(action.dtype, jp.floating):
            raise TypeError(f"{self._env.name}: actions must be floats, got dtype {action.dtype}")
        self._check_batch(b, "state")
        f = state.reward.dtype
        env_info, winfo = _split_info(state.info)
        nan = ~jp.all(jp.isfinite(action), axis=-1)
        action = jp.where(nan[:, None], 0.0, action)

        inner = state.replace(info=env_info)
        nstate, div = self._vmap(self._env_step, inner, action)
        if jax.tree.structure(nstate.info) != jax.tree.structure(env_info) or set(nstate.metrics) != set(
            winfo["episode_metrics"]
        ) - {"return", "length"}:
            raise ValueError(
                f"{self._env.name}: step must return State.info and State.metrics with the same keys as reset "
                f"(reset: info {sorted(env_info)}, metrics {sorted(state.metrics)}; step: info {sorted(nstate.info)}, "
                f"metrics {sorted(nstate.metrics)})"
            )
        bad = div | nan
        reward = jp.where(bad, 0.0, nstate.reward).astype(f)
        terminated = (nstate.done > 0) | bad
        steps = winfo["steps"] + self._action_repeat
        truncation = (steps >= self._episode_length) & ~terminated
        done = terminated | truncation

        # per-episode sums; they restart after an episode that ended at the previous step
        prev_done = winfo["episode_done"] > 0
        per_step = {"return": reward, "length": jp.full((b,), self._action_repeat, f), **nstate.metrics}
        episode = {k: jp.where(prev_done, 0.0, v) + per_step[k].astype(f) for k, v in winfo["episode_metrics"].items()}

        # auto-reset of finished environments, each from its own key
        split = jax.vmap(jax.random.split)(winfo["rng"])
        carry_keys, reset_keys = split[:, 0], split[:, 1]
        cur = (nstate.data, nstate.obs, nstate.info)

        def do_reset(_):
            fresh = self._vmap(lambda env, k: env.reset(k), reset_keys)
            return _select(done, (fresh.data, fresh.obs, fresh.info), cur)

        data, obs, new_env_info = jax.lax.cond(jp.any(done), do_reset, lambda _: cur, None)
        info = {
            **new_env_info, "rng": carry_keys, "steps": jp.where(done, 0, steps).astype(jp.int32),
            "truncation": truncation.astype(f), "diverged": div.astype(f), "nan_action": nan.astype(f),
            "episode_metrics": episode, "episode_done": done.astype(f), "final_obs": nstate.obs,
        }  # fmt: skip
        return State(data=data, obs=obs, reward=reward, done=done.astype(f), metrics=nstate.metrics, info=info)


_jit_reset = jax.jit(lambda train_env, rng: train_env.reset(rng))
_jit_step = jax.jit(lambda train_env, state, action: train_env.step(state, action))


def _path_str(path) -> str:
    parts = []
    for k in path:
        name = getattr(k, "name", None) or getattr(k, "key", None)
        parts.append(str(name) if name is not None else str(k))
    return ".".join(parts)


def wrap_for_training(
    env: Env,
    episode_length: int = 1000,
    action_repeat: int = 1,
    randomize: Callable[[Model, jax.Array], Model] | None = None,
    num_envs: int | None = None,
    rng: jax.Array | None = None,
) -> TrainingEnv:
    """A batched training view of `env` (see the module docstring).

    Args:
      env: the environment.
      episode_length: environment steps per episode before truncation.
      action_repeat: environment steps per `step` call (same action, summed reward).
      randomize: optional `randomize(model, rng) -> model` for domain randomisation (float fields only).
      num_envs: the batch size; required with `randomize` (one model per environment).
      rng: key for the randomisation (default `jax.random.PRNGKey(0)`).
    """
    if not isinstance(env, Env):
        raise TypeError(f"wrap_for_training needs an envs.Env, not {type(env).__name__}")
    if int(episode_length) < 1 or int(action_repeat) < 1:
        raise ValueError(f"episode_length and action_repeat must be >= 1, got {episode_length}, {action_repeat}")
    model = env.model
    leaves, treedef = jax.tree.flatten(model)
    axes: tuple = (None,) * len(leaves)
    if randomize is not None:
        if num_envs is None or int(num_envs) < 1:
            raise ValueError("wrap_for_training: domain randomisation needs num_envs (one model per environment)")
        num_envs = int(num_envs)
        keys = jax.random.split(jax.random.PRNGKey(0) if rng is None else rng, num_envs)
        batched = jax.vmap(randomize, in_axes=(None, 0))(model, keys)
        if not isinstance(batched, Model) or jax.tree.structure(batched) != treedef:
            raise ValueError(
                "randomize(model, rng) must return a Model with the same static structure (change float fields "
                "with model.replace(...); integer tables, sizes and options cannot be randomised)"
            )
        new_leaves, ax = [], []
        for x0, xb in zip(leaves, jax.tree.leaves(batched)):
            host = np.asarray(xb)
            if np.all(host == host[:1]):  # the same in every environment: keep one shared copy
                new_leaves.append(xb[0])
                ax.append(None)
            else:
                new_leaves.append(xb)
                ax.append(0)
            del x0
        model = jax.tree.unflatten(treedef, new_leaves)
        axes = tuple(ax)
    elif num_envs is not None:
        num_envs = None  # without randomisation any batch size works
    return TrainingEnv(env, int(episode_length), int(action_repeat), model, axes, randomize, num_envs)
