"""`reacher_easy` and `reacher_hard` on dm_control's `reacher.xml` (dm_control.suite.reacher).

Observation (6): qpos (shoulder, wrist), fingertip-to-target vector (x, y: target - finger), qvel. Control period
0.02 s (1 physics step). Reward: 1 while the finger touches the target (distance <= target + finger radii,
tolerance margin 0), else 0; the target radius is 0.05 m (easy) or 0.015 m (hard), set in the model's geom_size.
Starts with joints drawn as dm_control (shoulder U(-pi, pi), wrist uniform in its range), at rest; the target at
radius U(0.05, 0.2) m and angle U(0, 2 pi), in `info["target"]` (x, y): dm_control moves the target geom of the
model per episode, here the model stays and observation and reward read the target from `info`.
(The bundled reacher's task is `reacher`, envs.reacher.)
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.types import Data, Model

__all__ = ["TARGET_SIZES", "SuiteReacher"]

TARGET_SIZES = {"easy": 0.05, "hard": 0.015}


class SuiteReacher(suite.SuiteEnv):
    """Touch a random target with the finger (see the module docstring).

    Args:
      target_size: target radius (m): 0.05 easy, 0.015 hard.
      model: a replacement model with the same names (default: dm_control's reacher.xml).
    """

    RANDOMIZE = {"body_mass": (0.9, 1.1), "dof_damping": (0.8, 1.2), "actuator_gear": (0.9, 1.1)}

    def __init__(self, target_size: float = TARGET_SIZES["easy"], model: Model | None = None):
        m = suite.load("reacher") if model is None else model
        self._target, self._finger = names.geom_id(m, "target"), names.geom_id(m, "finger")
        m = m.replace(geom_size=m.geom_size.at[self._target, 0].set(float(target_size)))
        super().__init__(m, n_frames=1)

    def _to_target(self, d: Data, info: dict | None) -> jax.Array:
        target = d.geom_xpos[self._target, :2] if not info else info["target"]
        return target - d.geom_xpos[self._finger, :2]

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos, self._to_target(d, info), d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        dist = jp.sqrt(jp.sum(self._to_target(d, info) ** 2) + 1e-30)
        radii = self.model.geom_size[self._target, 0] + self.model.geom_size[self._finger, 0]
        return jp.where(dist <= radii, 1.0, 0.0).astype(dist.dtype), {"distance": dist}

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        k1, k2, k3 = jax.random.split(rng, 3)
        angle = jax.random.uniform(k2, (), f, 0.0, 2 * jp.pi)
        radius = jax.random.uniform(k3, (), f, 0.05, 0.20)
        target = jp.stack([radius * jp.sin(angle), radius * jp.cos(angle)])
        data = self.init_data(qpos=suite.random_joints(self.model, self.model.qpos0, k1))
        return self.start(data, {"target": target})
