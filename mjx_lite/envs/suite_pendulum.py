"""`pendulum_swingup` on dm_control's `pendulum.xml` (dm_control.suite.pendulum.swingup).

Observation (3): the pole frame's z-z and x-z entries (xmat[pole, 2, 2], xmat[pole, 0, 2]), the hinge velocity.
Control period 0.02 s (1 physics step). Reward: 1 while the pole is within 8 degrees of upright (tolerance(pole
z-z, bounds=(cos 8deg, 1)), margin 0), else 0. Starts at a hinge angle U(-pi, pi), at rest; no termination.
(The bundled pendulum's shaped task is `pendulum_swingup_shaped`, envs.pendulum.)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["SuitePendulum"]

COSINE_BOUND = math.cos(math.radians(8.0))


class SuitePendulum(suite.SuiteEnv):
    """Swing the pole up and keep it within 8 degrees of upright (see the module docstring)."""

    RANDOMIZE = {"body_mass": (0.9, 1.1), "dof_damping": (0.8, 1.2)}

    def __init__(self, model: Model | None = None):
        super().__init__(suite.load("pendulum") if model is None else model, n_frames=1)
        self._pole = names.body_id(self.model, "pole")
        self._hinge = names.qpos_slice(self.model, "hinge").start

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        r = d.xmat[self._pole]
        return jp.stack([r[2, 2], r[0, 2], d.qvel[self._hinge]])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        up = d.xmat[self._pole, 2, 2]
        return tolerance(up, bounds=(COSINE_BOUND, 1.0)), {"upright": up}

    def reset(self, rng: jax.Array) -> State:
        angle = jax.random.uniform(rng, (), self.float_dtype(), -jp.pi, jp.pi)
        return self.start(self.init_data(qpos=self.model.qpos0.at[self._hinge].set(angle)))
