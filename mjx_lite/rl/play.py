"""Watch a policy: roll out a trained policy deterministically and render it (`python -m mjx_lite play FILE`,
`python -m mjx_lite train TASK --video out.mp4`).

    make_policy, params, meta = play.load_policy("ppo_cartpole_balance.msgpack")   # clear errors on a bad file
    env = play.env_of(meta)                                                         # the task it was trained on
    play.render_policy(env, make_policy(params, deterministic=True), "out.mp4", steps=500)

A control step is `action_repeat` (from the file's training settings) calls of `env.step` with one action; an
episode that ends (termination or divergence) is reset in place with the next key, and the video goes on.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import envs, models, render
from mjx_lite.envs.base import Env
from mjx_lite.render import record
from mjx_lite.rl import ppo

__all__ = ["env_of", "load_policy", "render_policy", "rollout"]


def load_policy(path: str | os.PathLike) -> tuple[Callable, dict, dict]:
    """(make_policy, params, meta) of a file written by `ppo.save` (`train` writes one).

    Raises FileNotFoundError naming the path for a missing file, ValueError for a file that is not a parameter
    file (unreadable, another format, no task recorded in it)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such policy file (`python -m mjx_lite train TASK --out FILE` writes one)")
    make_policy, params, meta = ppo.load(path)
    if not isinstance(meta, dict) or not isinstance(meta.get("env"), str):
        raise ValueError(f"{path}: the file names no task (its metadata has no 'env'); it was not written by train")
    return make_policy, params, meta


def env_of(meta: dict, model: str | None = None) -> Env:
    """The environment a policy file was trained on: its task, on its `--model` (or `model`, when given).

    Raises ValueError naming the task when it is not registered (a task registered by the training script must
    be registered again before playing) or the model does not fit it."""
    task = meta["env"]
    if task not in envs.names():
        raise ValueError(f"the policy was trained on task {task!r}, which is not registered here "
                         f"(registered: {', '.join(envs.names())}); register it with envs.register first")  # fmt: skip
    model = model if model is not None else meta.get("model")
    if model is None:
        return envs.make(task)
    try:
        return envs.make(task, model=mjx_lite.load_mjcf(models.resolve(model)))
    except (KeyError, IndexError) as e:
        raise ValueError(f"model {model} does not fit the task {task}: {e}") from e


def rollout(env: Env, policy: Callable, per_frame: int, action_repeat: int = 1) -> Callable:
    """`advance((state, key, ret, episodes)) -> same` (jitted): `per_frame` control steps of the deterministic
    `policy(obs) -> action`, summing rewards in `ret` and counting ended episodes (each reset with a fresh key)."""

    def control_step(_, carry):
        state, key, ret, episodes = carry
        action = policy(state.obs)
        done = jp.zeros((), bool)
        for _ in range(action_repeat):
            state = env.step(state, action)
            ret = ret + state.reward
            done = done | (state.done > 0)
        key, k = jax.random.split(key)
        state = jax.lax.cond(done, lambda: env.reset(k), lambda: state)
        return state, key, ret, episodes + done.astype(episodes.dtype)

    return jax.jit(lambda carry: jax.lax.fori_loop(0, per_frame, control_step, carry))


def render_policy(env: Env, policy: Callable, path: str, steps: int = 500, fps: float = 30.0, height: int = 240,
                  width: int = 320, camera: int | str = -1, seed: int = 0, action_repeat: int = 1,
                  echo: Callable = print) -> dict:  # fmt: skip
    """Roll out `policy(obs) -> action` for `steps` control steps from `env.reset(PRNGKey(seed))` and write the
    frames to `path` (.mp4, .gif, .png). Returns {"return": summed reward, "episodes_ended": n, "frames": n,
    "written": what was written}. Raises ValueError for a camera the model lacks or an unsupported format."""
    render.require_writer(path)
    r = render.Renderer(env.model, height, width)
    r.camera_id(camera)
    plan = record.frame_plan(env.dt * action_repeat, fps, steps)
    echo(f"{env.name}: control step {plan.dt:.6g} s at {fps:g} fps: {plan.describe('control steps')}")
    key, k0 = jax.random.split(jax.random.PRNGKey(seed))
    state = env.reset(k0)
    f = state.reward.dtype
    carry = (state, key, jp.zeros((), f), jp.zeros((), jp.int32))
    advance = rollout(env, policy, plan.per_frame, action_repeat)
    frames, (_, _, ret, episodes) = record.record(r, advance, carry, plan.nframes, camera,
                                                  data_of=lambda c: c[0].data, desc=f"play {env.name}")  # fmt: skip
    written = record.write(path, frames, plan, unit="control steps", echo=echo)
    out = {"return": float(ret), "episodes_ended": int(episodes), "frames": len(frames), "written": written}
    ended = f", {out['episodes_ended']} episode(s) ended and were reset" if out["episodes_ended"] else ""
    echo(f"return over {plan.nframes * plan.per_frame} control steps: {out['return']:.1f}{ended}")
    return out
