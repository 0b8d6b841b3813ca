"""`quadruped_run`: run forward (along the torso's heading) with the bundled four-legged `quadruped` model.

Observation (26): joint angles (8), joint velocities (8), torso velocity in the torso frame (3, velocimeter),
torso angular velocity (3, gyro), torso up axis in the world frame (3), torso height (1). Control period 0.02 s
(4 physics steps). Contacts: feet (spheres) and torso (box) with the floor.
Reward (in [0, 1]): upright * move with
  upright = tolerance(torso_up_z, bounds=(1, inf), margin=2, sigmoid="linear", value_at_margin=0) = (1 + up_z) / 2
  move    = tolerance(forward_velocity, bounds=(3, inf), margin=3, sigmoid="linear", value_at_margin=0.5)
            (forward velocity from the velocimeter, in the torso frame)
Starts standing with a random heading and U(-0.1, 0.1) rad joint noise; no termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["QuadrupedRun"]

RUN_SPEED = 3.0  # m/s


class QuadrupedRun(Env):
    """Run forward without flipping over (see the module docstring)."""

    def __init__(self, model: Model | None = None, n_frames: int = 4):
        super().__init__(mjx_lite.load_mjcf("quadruped") if model is None else model, n_frames=n_frames)
        m = self.model
        self._torso = names.body_id(m, "torso")
        self._vel = names.sensor_slice(m, "torso_vel")
        self._gyro = names.sensor_slice(m, "torso_gyro")
        self._up = names.sensor_slice(m, "torso_up")
        self._root_q = names.qpos_slice(m, "root")
        self._root_v = names.qvel_slice(m, "root")

    def _obs(self, d: Data) -> jax.Array:
        s = d.sensordata
        joints_q = d.qpos[self._root_q.stop:]
        joints_v = d.qvel[self._root_v.stop:]
        height = d.xpos[self._torso, 2:3]
        return jp.concatenate([joints_q, joints_v, s[self._vel], s[self._gyro], s[self._up], height])

    def _terms(self, d: Data) -> dict:
        up_z = d.sensordata[self._up][2]
        upright = tolerance(up_z, bounds=(1.0, jp.inf), margin=2.0, sigmoid="linear", value_at_margin=0.0)
        speed = d.sensordata[self._vel][0]
        move = tolerance(speed, bounds=(RUN_SPEED, jp.inf), margin=RUN_SPEED, sigmoid="linear", value_at_margin=0.5)
        return {"upright": upright, "move": move, "speed": speed}

    def reset(self, rng: jax.Array) -> State:
        m = self.model
        f = self.float_dtype()
        k1, k2 = jax.random.split(rng)
        yaw = jax.random.uniform(k1, (), f, -jp.pi, jp.pi)
        quat = jp.stack([jp.cos(yaw / 2), jp.zeros((), f), jp.zeros((), f), jp.sin(yaw / 2)])
        qpos = m.qpos0.at[self._root_q.start + 3 : self._root_q.start + 7].set(quat)
        njq = m.nq - self._root_q.stop
        qpos = qpos.at[self._root_q.stop :].add(jax.random.uniform(k2, (njq,), f, -0.1, 0.1))
        data = self.init_data(qpos=qpos)
        zero = jp.zeros((), f)
        metrics = {k: jp.zeros((), f) for k in ("upright", "move", "speed")}
        return State(data, self._obs(data), zero, zero, metrics=metrics, info={})

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        terms = self._terms(data)
        reward = terms["upright"] * terms["move"]
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics=terms)
