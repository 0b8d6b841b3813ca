"""`walker_stand`, `walker_walk`, `walker_run` on dm_control's `walker.xml` (dm_control.suite.walker).

Observation (24): the x-x and x-z entries of every body's orientation (xmat[1:, 0, 0], xmat[1:, 0, 2],
interleaved: 14), torso height (1), qvel (9). Control period 0.025 s (10 physics steps of 2.5 ms).
Reward: stand = (3 standing + upright) / 4 with standing = tolerance(torso height, bounds=(1.2, inf),
margin=0.6), upright = (1 + torso z-z) / 2; walk and run multiply by (5 move + 1) / 6, move =
tolerance(torso subtree linear velocity x, bounds=(speed, inf), margin=speed / 2, linear, value_at_margin=0.5),
speed 1 (walk) or 8 (run) m/s. Starts with joints drawn as dm_control (limited uniform in range, the unlimited
root hinge U(-pi, pi)), at rest; no termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["SPEEDS", "Walker"]

STAND_HEIGHT = 1.2
SPEEDS = {"stand": 0.0, "walk": 1.0, "run": 8.0}


class Walker(suite.SuiteEnv):
    """The planar walker: stand (`move_speed=0`), walk (1 m/s) or run (8 m/s) (see the module docstring)."""

    def __init__(self, move_speed: float = 0.0, model: Model | None = None):
        super().__init__(suite.load("walker") if model is None else model, n_frames=10)
        m = self.model
        self._move_speed = float(move_speed)
        self._torso = names.body_id(m, "torso")
        self._speed = names.sensor_slice(m, "torso_subtreelinvel").start

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        orient = jp.stack([d.xmat[1:, 0, 0], d.xmat[1:, 0, 2]], axis=-1).ravel()
        return jp.concatenate([orient, d.xpos[self._torso, 2:3], d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        height = d.xpos[self._torso, 2]
        standing = tolerance(height, bounds=(STAND_HEIGHT, float("inf")), margin=STAND_HEIGHT / 2)
        upright = (1.0 + d.xmat[self._torso, 2, 2]) / 2.0
        stand = (3.0 * standing + upright) / 4.0
        speed = d.sensordata[self._speed]
        metrics = {"standing": standing, "upright": upright, "speed": speed}
        if self._move_speed == 0:
            return stand, metrics
        move = tolerance(speed, bounds=(self._move_speed, float("inf")), margin=self._move_speed / 2,
                         value_at_margin=0.5, sigmoid="linear")  # fmt: skip
        return stand * (5.0 * move + 1.0) / 6.0, metrics

    def reset(self, rng: jax.Array) -> State:
        data = self.init_data(qpos=suite.random_joints(self.model, self.model.qpos0, rng))
        zero = jp.zeros((), self.float_dtype())
        _, metrics = self.reward(data)
        return State(data, self.observation(data), zero, zero, metrics=metrics)
