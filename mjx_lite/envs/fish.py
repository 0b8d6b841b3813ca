"""`fish_swim` on dm_control's `fish.xml` (dm_control.suite.fish.swim): fluid forces (density 5000), no floor.

Observation (24): the 7 tail and fin joint angles, the torso's z-z (upright, 1), the mouth-to-target vector in the
mouth's frame (3), qvel (13). Control period 0.04 s (10 physics steps of 4 ms).
Reward: (7 in_target + (upright + 1) / 2) / 8, in_target = tolerance(|mouth to target|, bounds=(0, mouth + target
radii), margin=2 (mouth + target radii)) (gaussian). Starts with a uniform random orientation (a normalised
N(0, 1)^4 quaternion), the joints U(-0.2, 0.2) rad, at rest; the target at x, y U(-0.4, 0.4), z U(0.1, 0.3), in
`info["target"]` (dm_control moves the target geom of the model instead); no termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.types import Data, Model

__all__ = ["JOINTS", "FishSwim"]

JOINTS = ("tail1", "tail_twist", "tail2", "finright_roll", "finright_pitch", "finleft_roll", "finleft_pitch")


class FishSwim(suite.SuiteEnv):
    """Swim the mouth to a random target (see the module docstring)."""

    RANDOMIZE = {"body_mass": (0.9, 1.1), "dof_damping": (0.8, 1.2), "opt.density": (0.9, 1.1)}

    def __init__(self, model: Model | None = None):
        super().__init__(suite.load("fish") if model is None else model, n_frames=10)
        m = self.model
        self._joints = jp.asarray([names.qpos_slice(m, j).start for j in JOINTS])
        self._root = names.qpos_slice(m, "root").start
        self._torso = names.body_id(m, "torso")
        self._mouth, self._target = names.geom_id(m, "mouth"), names.geom_id(m, "target")

    def _mouth_to_target(self, d: Data, info: dict | None) -> jax.Array:
        target = d.geom_xpos[self._target] if not info else info["target"]
        return (target - d.geom_xpos[self._mouth]) @ d.geom_xmat[self._mouth]

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos[self._joints], d.xmat[self._torso, 2, 2:3], self._mouth_to_target(d, info),
                               d.qvel])  # fmt: skip

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        radii = self.model.geom_size[self._mouth, 0] + self.model.geom_size[self._target, 0]
        dist = jp.sqrt(jp.sum(self._mouth_to_target(d, info) ** 2) + 1e-30)
        in_target = suite.within(dist / radii, 1.0, margin=2.0)  # margin 2 radii, in units of radii
        upright = 0.5 * (d.xmat[self._torso, 2, 2] + 1.0)
        return (7.0 * in_target + upright) / 8.0, {"in_target": in_target, "upright": upright}

    def reset(self, rng: jax.Array) -> State:
        m, f = self.model, self.float_dtype()
        k1, k2, k3 = jax.random.split(rng, 3)
        quat = jax.random.normal(k1, (4,), f)
        qpos = m.qpos0.at[self._root + 3:self._root + 7].set(quat / jp.linalg.norm(quat))
        qpos = qpos.at[self._joints].set(jax.random.uniform(k2, (len(JOINTS),), f, -0.2, 0.2))
        lo, hi = jp.asarray([-0.4, -0.4, 0.1], f), jp.asarray([0.4, 0.4, 0.3], f)
        target = jax.random.uniform(k3, (3,), f, lo, hi)
        return self.start(self.init_data(qpos=qpos), {"target": target})
