"""`hopper_stand` and `hopper_hop` on dm_control's `hopper.xml` (dm_control.suite.hopper).

Observation (15): qpos without the root x (6), qvel (7), log(1 + touch) of the toe and heel touch sensors (2).
Control period 0.02 s (4 physics steps of 5 ms).
Reward: standing = tolerance(torso - foot height (xipos z), bounds=(0.6, 2)) (margin 0); stand: standing *
(4 + mean tolerance(ctrl, margin=1, value_at_margin=0, quadratic)) / 5; hop: standing * tolerance(torso subtree
linear velocity x, bounds=(2, inf), margin=1, linear, value_at_margin=0.5). Starts with joints drawn as dm_control
(limited uniform in range, the unlimited root hinge U(-pi, pi)), at rest; no termination.
(The bundled hopper's task, with its own reward and termination, is `hopper`, envs.hopper.)
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["SuiteHopper"]

STAND_HEIGHT = 0.6
HOP_SPEED = 2.0


class SuiteHopper(suite.SuiteEnv):
    """Stand (`hopping=False`) or hop forward (`hopping=True`) (see the module docstring)."""

    def __init__(self, hopping: bool = False, model: Model | None = None):
        super().__init__(suite.load("hopper") if model is None else model, n_frames=4)
        m = self.model
        self._hopping = bool(hopping)
        self._torso, self._foot = names.body_id(m, "torso"), names.body_id(m, "foot")
        self._speed = names.sensor_slice(m, "torso_subtreelinvel").start
        self._touch = [names.sensor_slice(m, s).start for s in ("touch_toe", "touch_heel")]

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos[1:], d.qvel, jp.log1p(d.sensordata[jp.asarray(self._touch)])])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        height = d.xipos[self._torso, 2] - d.xipos[self._foot, 2]
        standing = tolerance(height, bounds=(STAND_HEIGHT, 2.0))
        speed = d.sensordata[self._speed]
        metrics = {"standing": standing, "speed": speed}
        if self._hopping:
            hopping = tolerance(speed, bounds=(HOP_SPEED, float("inf")), margin=HOP_SPEED / 2, value_at_margin=0.5,
                                sigmoid="linear")  # fmt: skip
            return standing * hopping, metrics
        control = tolerance(d.ctrl, margin=1.0, value_at_margin=0.0, sigmoid="quadratic").mean()
        return standing * (control + 4.0) / 5.0, metrics

    def reset(self, rng: jax.Array) -> State:
        return self.start(self.init_data(qpos=suite.random_joints(self.model, self.model.qpos0, rng)))
