"""`pendulum_swingup_shaped` on the bundled `pendulum` model (torque limited to 2 N m: it must swing to get up).

Observation (3): cos and sin of the angle from upright, angular velocity. Control period 0.02 s (2 physics steps).
Reward: upright = tolerance(cos(angle from upright), bounds=(cos 30deg, 1), margin=1 + cos 30deg,
sigmoid="linear", value_at_margin=0): 1 within 30 degrees of upright, falling linearly to 0 hanging down.
Starts at a uniform random angle at rest; no termination. (dm_control's sparse task on its own model is
`pendulum_swingup`, envs.suite_pendulum; this task was registered under that name before.)
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["PendulumSwingup"]

_COS_BOUND = math.cos(math.radians(30.0))


class PendulumSwingup(Env):
    """Swing the pendulum up and hold it (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(mjx_lite.load_mjcf("pendulum") if model is None else model, n_frames=2)
        self._q = names.qpos_slice(self.model, "hinge").start
        self._v = names.qvel_slice(self.model, "hinge").start

    def _obs(self, d: Data) -> jax.Array:
        up = d.qpos[self._q] - jp.pi  # angle from upright (the model's 0 hangs down)
        return jp.stack([jp.cos(up), jp.sin(up), d.qvel[self._v]])

    def _reward(self, d: Data) -> jax.Array:
        cos_up = -jp.cos(d.qpos[self._q])
        return tolerance(cos_up, bounds=(_COS_BOUND, 1.0), margin=1.0 + _COS_BOUND, sigmoid="linear",
                         value_at_margin=0.0)  # fmt: skip

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        angle = jax.random.uniform(rng, (), f, -jp.pi, jp.pi)
        data = self.init_data(qpos=self.model.qpos0.at[self._q].set(angle))
        zero = jp.zeros((), f)
        return State(data, self._obs(data), zero, zero, metrics={"upright": zero}, info={})

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        reward = self._reward(data)
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics={"upright": reward})
