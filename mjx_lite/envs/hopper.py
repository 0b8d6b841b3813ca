"""`hopper`: hop forward with the bundled planar one-legged `hopper` model.

Observation (11): qpos without the forward position (torso height, torso pitch, hip, knee, ankle: 5) and qvel (6,
velocities clipped to +-10). Control period 0.02 s (4 physics steps of 5 ms).
Reward (in [0, 1]): standing * (1 + 4 hopping) / 5 with
  standing = tolerance(torso_height, bounds=(0.9, 2), margin=0.3)             (torso centre, standing is 1.16 m)
  hopping  = tolerance(forward_velocity, bounds=(2, inf), margin=2, sigmoid="linear", value_at_margin=0)
             (centre-of-mass velocity: 0 at rest, rising linearly to 1 at 2 m/s)
Terminates when the hopper falls (torso centre below 0.7 m or pitch beyond 1 rad).
Starts at the model's pose (foot 4 cm above the floor) with U(-0.005, 0.005) noise on qpos and qvel.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["Hopper"]

HOP_SPEED = 2.0  # m/s for full hopping reward
_FALL_HEIGHT = 0.7  # m, torso centre
_FALL_PITCH = 1.0  # rad


class Hopper(Env):
    """Hop forward without falling (see the module docstring)."""

    def __init__(self, model: Model | None = None, n_frames: int = 4):
        super().__init__(mjx_lite.load_mjcf("hopper") if model is None else model, n_frames=n_frames)
        m = self.model
        self._torso = names.body_id(m, "torso")
        self._pitch = names.qpos_slice(m, "rooty").start
        self._com_vel = names.sensor_slice(m, "com_vel")

    def _obs(self, d: Data) -> jax.Array:
        return jp.concatenate([d.qpos[1:], jp.clip(d.qvel, -10.0, 10.0)])

    def _terms(self, d: Data) -> dict:
        height = d.xpos[self._torso, 2]
        standing = tolerance(height, bounds=(0.9, 2.0), margin=0.3)
        speed = d.sensordata[self._com_vel][0]
        hopping = tolerance(speed, bounds=(HOP_SPEED, jp.inf), margin=HOP_SPEED, sigmoid="linear",
                            value_at_margin=0.0)  # fmt: skip
        return {"standing": standing, "hopping": hopping, "height": height, "speed": speed}

    def _fallen(self, d: Data) -> jax.Array:
        return (d.xpos[self._torso, 2] < _FALL_HEIGHT) | (jp.abs(d.qpos[self._pitch]) > _FALL_PITCH)

    def _initial_qpos_qvel(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
        m = self.model
        f = self.float_dtype()
        k1, k2 = jax.random.split(rng)
        qpos = m.qpos0 + jax.random.uniform(k1, (m.nq,), f, -0.005, 0.005)
        return qpos, jax.random.uniform(k2, (m.nv,), f, -0.005, 0.005)

    def _reward(self, d: Data) -> tuple[jax.Array, dict]:
        terms = self._terms(d)
        return terms["standing"] * (1.0 + 4.0 * terms["hopping"]) / 5.0, terms

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        qpos, qvel = self._initial_qpos_qvel(rng)
        data = self.init_data(qpos=qpos, qvel=qvel)
        zero = jp.zeros((), f)
        metrics = {k: jp.zeros((), f) for k in ("standing", "hopping", "height", "speed")}
        return State(data, self._obs(data), zero, zero, metrics=metrics, info={})

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        reward, terms = self._reward(data)
        done = (self._fallen(data) | diverged(state.data, data)).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics=terms)
