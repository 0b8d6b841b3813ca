"""Velocity commands for the joystick tasks (MuJoCo Playground's locomotion style), kept in `State.info`.

A command is a vector (e.g. forward speed, lateral speed, yaw rate) drawn per episode from uniform ranges, zeroed
with probability `zero_prob` (standing still is a command too), and redrawn every `resample_steps` control steps
from a PRNG key carried in `State.info` (so the draw is reproducible and per environment). `tracking(err_sq,
sigma)` is the exp kernel of the tracking rewards, exp(-err_sq / sigma), in (0, 1].

    info = commands.initial(rng, ranges, zero_prob)       # {"command", "command_rng", "command_steps"}
    info = commands.advance(info, ranges, zero_prob, resample_steps)   # once per control step
"""

from __future__ import annotations

import jax
import jax.numpy as jp

__all__ = ["advance", "initial", "sample", "tracking"]

INFO_KEYS = ("command", "command_rng", "command_steps")


def sample(rng: jax.Array, ranges: tuple[tuple[float, float], ...], zero_prob: float, dtype) -> jax.Array:
    """(len(ranges),) command: each entry U(lo, hi), the whole vector 0 with probability `zero_prob`."""
    k1, k2 = jax.random.split(rng)
    lo = jp.asarray([r[0] for r in ranges], dtype)
    hi = jp.asarray([r[1] for r in ranges], dtype)
    cmd = jax.random.uniform(k1, (len(ranges),), dtype, lo, hi)
    return jp.where(jax.random.uniform(k2, (), dtype) < zero_prob, jp.zeros_like(cmd), cmd)


def initial(rng: jax.Array, ranges, zero_prob: float, dtype) -> dict:
    """The command info of a fresh episode: a command drawn with `rng`, the key for later draws, a step count 0."""
    k_cmd, k_next = jax.random.split(rng)
    return {"command": sample(k_cmd, ranges, zero_prob, dtype), "command_rng": k_next,
            "command_steps": jp.zeros((), jp.int32)}  # fmt: skip


def advance(info: dict, ranges, zero_prob: float, resample_steps: int) -> dict:
    """`info` one control step later: the step count grows; after `resample_steps` steps a new command is drawn
    (from `info["command_rng"]`, which then advances) and the count restarts at 0. Other keys are kept."""
    steps = info["command_steps"] + 1
    redraw = steps >= resample_steps
    k_next, k_cmd = jax.random.split(info["command_rng"])
    cmd = info["command"]
    new = sample(k_cmd, ranges, zero_prob, cmd.dtype)
    return {**info, "command": jp.where(redraw, new, cmd), "command_rng": jp.where(redraw, k_next, info["command_rng"]),
            "command_steps": jp.where(redraw, 0, steps).astype(jp.int32)}  # fmt: skip


def tracking(err_sq: jax.Array, sigma: float) -> jax.Array:
    """exp(-err_sq / sigma): 1 at zero error, e^-1 at a squared error of `sigma`."""
    return jp.exp(-err_sq / sigma)
