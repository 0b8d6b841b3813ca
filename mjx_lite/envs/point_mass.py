"""`point_mass_easy` on dm_control's `point_mass.xml` (dm_control.suite.point_mass.easy).

Observation (4): qpos (x, y), qvel. Control period 0.02 s (1 physics step); the two actuators drive a tendon each.
Reward: near_target * small_control: near_target = tolerance(|mass - target|, bounds=(0, target size),
margin=target size) (gaussian), small_control = (4 + mean tolerance(ctrl, margin=1, value_at_margin=0,
quadratic)) / 5. Starts at joints drawn as dm_control (limited slides uniform in their range), at rest.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["PointMass"]


class PointMass(suite.SuiteEnv):
    """Move the point mass to the target at the origin with small controls (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(suite.load("point_mass") if model is None else model, n_frames=1)
        self._mass, self._target = names.geom_id(self.model, "pointmass"), names.geom_id(self.model, "target")

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos, d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        dist = jp.sqrt(jp.sum((d.geom_xpos[self._target] - d.geom_xpos[self._mass]) ** 2) + 1e-30)
        size = self.model.geom_size[self._target, 0]
        # tolerance(dist, (0, size), margin=size): the margin is a model float, so scale the distance by it
        near = suite.within(dist / size, 1.0, margin=1.0)
        control = tolerance(d.ctrl, margin=1.0, value_at_margin=0.0, sigmoid="quadratic").mean()
        return near * (control + 4.0) / 5.0, {"distance": dist}

    def reset(self, rng: jax.Array) -> State:
        data = self.init_data(qpos=suite.random_joints(self.model, self.model.qpos0, rng))
        zero = jp.zeros((), self.float_dtype())
        return State(data, self.observation(data), zero, zero, metrics={"distance": self.reward(data)[1]["distance"]})
