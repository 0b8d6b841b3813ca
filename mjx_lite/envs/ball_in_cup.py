"""`ball_in_cup_catch` on dm_control's `ball_in_cup.xml` (dm_control.suite.ball_in_cup.catch).

Observation (8): qpos (cup x, z, ball x, z), qvel. Control period 0.02 s (10 physics steps of 2 ms).
Reward: 1 when the ball is inside the cup (|target - ball| < target size - ball radius in x and z), else 0.
Starts with the ball at x U(-0.2, 0.2), z U(0.2, 0.5) m, at rest; dm_control redraws until nothing touches: here
the first of `CANDIDATES` draws without an active contact is kept (the last draw when all touch).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.types import Data, Model

__all__ = ["CANDIDATES", "BallInCup"]

CANDIDATES = 4  # initial ball positions drawn at reset (the first without contact is kept)


class BallInCup(suite.SuiteEnv):
    """Swing the ball into the cup (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(suite.load("ball_in_cup") if model is None else model, n_frames=10)
        m = self.model
        self._bx, self._bz = names.qpos_slice(m, "ball_x").start, names.qpos_slice(m, "ball_z").start
        self._target, self._ball_body = names.site_id(m, "target"), names.body_id(m, "ball")
        self._ball_geom = names.geom_id(m, "ball")

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos, d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        m = self.model
        gap = jp.abs(d.site_xpos[self._target, jp.asarray([0, 2])] - d.xpos[self._ball_body, jp.asarray([0, 2])])
        room = m.site_size[self._target, jp.asarray([0, 2])] - m.geom_size[self._ball_geom, 0]
        inside = jp.all(gap < room).astype(d.qpos.dtype)
        return inside, {"in_target": inside}

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        k1, k2 = jax.random.split(rng)
        x = jax.random.uniform(k1, (CANDIDATES,), f, -0.2, 0.2)
        z = jax.random.uniform(k2, (CANDIDATES,), f, 0.2, 0.5)
        qpos = jax.vmap(lambda x, z: self.model.qpos0.at[self._bx].set(x).at[self._bz].set(z))(x, z)
        touching = jax.vmap(lambda q: jp.any(self.position_data(q).contact.active))(qpos)  # MuJoCo's ncon > 0
        pick = jp.where(jp.any(~touching), jp.argmin(touching), CANDIDATES - 1)
        data = self.init_data(qpos=qpos[pick])
        zero = jp.zeros((), f)
        return State(data, self.observation(data), zero, zero, metrics={"in_target": zero})
