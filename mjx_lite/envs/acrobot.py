"""`acrobot_swingup` and `acrobot_swingup_sparse` on dm_control's `acrobot.xml` (dm_control.suite.acrobot).

Observation (6): horizontal (x) then vertical (z) components of the upper and lower arms' z axes (xmat[:, 0, 2],
xmat[:, 2, 2]), joint velocities. Control period 0.01 s (1 physics step).
Reward: tolerance(|tip - target|, bounds=(0, target radius), margin=1) (gaussian); sparse: margin 0 (the
indicator of touching the target). Starts with shoulder and elbow U(-pi, pi), at rest; no termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.types import Data, Model

__all__ = ["Acrobot"]


class Acrobot(suite.SuiteEnv):
    """Swing the acrobot's tip up to the target (see the module docstring).

    Args:
      sparse: the indicator reward (dm_control's swingup_sparse) instead of the smooth one.
      model: a replacement model with the same names (default: dm_control's acrobot.xml).
    """

    def __init__(self, sparse: bool = False, model: Model | None = None):
        super().__init__(suite.load("acrobot") if model is None else model, n_frames=1)
        m = self.model
        self._sparse = bool(sparse)
        self._arms = [names.body_id(m, "upper_arm"), names.body_id(m, "lower_arm")]
        self._joints = [names.qpos_slice(m, "shoulder").start, names.qpos_slice(m, "elbow").start]
        self._tip, self._target = names.site_id(m, "tip"), names.site_id(m, "target")

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        xmat = d.xmat[jp.asarray(self._arms)]
        return jp.concatenate([xmat[:, 0, 2], xmat[:, 2, 2], d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        """(reward, metrics) of a Data (see the module docstring)."""
        dist = jp.sqrt(jp.sum((d.site_xpos[self._target] - d.site_xpos[self._tip]) ** 2) + 1e-30)
        radius = self.model.site_size[self._target, 0]
        near = jp.where(dist <= radius, 1.0, 0.0) if self._sparse else suite.within(dist, radius, margin=1.0)
        return near.astype(dist.dtype), {"distance": dist}

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        angles = jax.random.uniform(rng, (2,), f, -jp.pi, jp.pi)
        data = self.init_data(qpos=self.model.qpos0.at[jp.asarray(self._joints)].set(angles))
        zero = jp.zeros((), f)
        return State(data, self.observation(data), zero, zero, metrics={"distance": self.reward(data)[1]["distance"]})

