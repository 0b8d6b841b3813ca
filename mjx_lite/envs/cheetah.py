"""`cheetah_run` on dm_control's `cheetah.xml` (dm_control.suite.cheetah.run).

Observation (17): qpos without the root x (8), qvel (9). Control period 0.01 s (1 physics step).
Reward: tolerance(torso subtree linear velocity x (the `torso_subtreelinvel` sensor), bounds=(10, inf),
margin=10, linear, value_at_margin=0): the forward speed / 10, capped at 1 (and 0 going backwards).
Starts as dm_control: limited joints uniform in their range, then `SETTLE_STEPS` physics steps with zero control
(the cheetah falls onto its feet); no termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["SETTLE_STEPS", "Cheetah"]

RUN_SPEED = 10.0
SETTLE_STEPS = 200  # dm_control's physics.step(nstep=200) at the start of an episode


class Cheetah(suite.SuiteEnv):
    """Run forward as fast as possible (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(suite.load("cheetah") if model is None else model, n_frames=1)
        m = self.model
        self._speed = names.sensor_slice(m, "torso_subtreelinvel").start

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        return jp.concatenate([d.qpos[1:], d.qvel])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        speed = d.sensordata[self._speed]
        run = tolerance(speed, bounds=(RUN_SPEED, float("inf")), margin=RUN_SPEED, value_at_margin=0.0,
                        sigmoid="linear")  # fmt: skip
        return run, {"speed": speed}

    def reset(self, rng: jax.Array) -> State:
        m = self.model
        data = self.init_data(qpos=suite.random_joints(m, m.qpos0, rng))
        data = jax.lax.fori_loop(0, SETTLE_STEPS, lambda _, d: mjx_lite.step(m, d), data)
        data = data.replace(time=jp.zeros_like(data.time))
        zero = jp.zeros((), self.float_dtype())
        return State(data, self.observation(data), zero, zero, metrics={"speed": zero})
