"""`humanoid_bundled_stand`: keep the bundled `humanoid` standing upright and still. (dm_control's humanoid tasks on
its own model are `humanoid_stand`, `humanoid_walk`, `humanoid_run`, envs.suite_humanoid; this task was
registered as `humanoid_stand` before.)

Observation (49): joint angles (18), head height (1), torso up axis (3), centre-of-mass velocity (3), joint
velocities (18), torso velocity in the torso frame (3), torso angular velocity (3). Control period 0.02 s (4
physics steps). Contacts: feet (boxes), legs, pelvis, torso, head and hands with the floor.
Reward (in [0, 1]): small_control * standing * upright * (5 dont_move + 1) / 6 with
  standing      = tolerance(head_height, bounds=(1.4, inf), margin=0.35)
  upright       = tolerance(torso_up_z, bounds=(0.9, inf), margin=1.9, sigmoid="linear", value_at_margin=0)
  small_control = (4 + mean(tolerance(action, margin=1, value_at_margin=0, sigmoid="quadratic"))) / 5
  dont_move     = mean(tolerance(com_velocity_xy, margin=2))
Starts standing (the model's pose, feet 1 cm above the floor) with U(-0.05, 0.05) rad joint noise.
Terminates when the head drops below 0.8 m (fallen).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["HumanoidStand"]

STAND_HEIGHT = 1.4  # m, head centre
_FALLEN_HEIGHT = 0.8  # m


class HumanoidStand(Env):
    """Stand up straight and still (see the module docstring)."""

    def __init__(self, model: Model | None = None, n_frames: int = 4):
        super().__init__(mjx_lite.load_mjcf("humanoid") if model is None else model, n_frames=n_frames)
        m = self.model
        self._head = names.site_id(m, "head")
        self._vel = names.sensor_slice(m, "torso_vel")
        self._gyro = names.sensor_slice(m, "torso_gyro")
        self._up = names.sensor_slice(m, "torso_up")
        self._com_vel = names.sensor_slice(m, "com_vel")
        self._root_q = names.qpos_slice(m, "root")
        self._root_v = names.qvel_slice(m, "root")

    def _obs(self, d: Data) -> jax.Array:
        s = d.sensordata
        return jp.concatenate([
            d.qpos[self._root_q.stop:], d.site_xpos[self._head, 2:3], s[self._up], s[self._com_vel],
            d.qvel[self._root_v.stop:], s[self._vel], s[self._gyro],
        ])  # fmt: skip

    def _terms(self, d: Data, action: jax.Array) -> dict:
        head = d.site_xpos[self._head, 2]
        standing = tolerance(head, bounds=(STAND_HEIGHT, jp.inf), margin=STAND_HEIGHT / 4)
        upright = tolerance(d.sensordata[self._up][2], bounds=(0.9, jp.inf), margin=1.9, sigmoid="linear",
                            value_at_margin=0.0)  # fmt: skip
        control = tolerance(action, margin=1.0, value_at_margin=0.0, sigmoid="quadratic").mean()
        small_control = (4.0 + control) / 5.0
        dont_move = tolerance(d.sensordata[self._com_vel][:2], margin=2.0).mean()
        return {"standing": standing, "upright": upright, "small_control": small_control, "dont_move": dont_move,
                "head_height": head}  # fmt: skip

    def reset(self, rng: jax.Array) -> State:
        m = self.model
        f = self.float_dtype()
        njq = m.nq - self._root_q.stop
        joints = m.qpos0[self._root_q.stop :] + jax.random.uniform(rng, (njq,), f, -0.05, 0.05)
        joints = jp.clip(joints, m.jnt_range[1:, 0], m.jnt_range[1:, 1])  # every other joint is a limited hinge
        qpos = m.qpos0.at[self._root_q.stop :].set(joints)
        data = self.init_data(qpos=qpos)
        zero = jp.zeros((), f)
        metrics = {k: jp.zeros((), f) for k in ("standing", "upright", "small_control", "dont_move", "head_height")}
        return State(data, self._obs(data), zero, zero, metrics=metrics, info={})

    def step(self, state: State, action: jax.Array) -> State:
        action = jp.clip(self.check_action(action), -1.0, 1.0)
        data = self.physics_step(state.data, action)
        t = self._terms(data, action)
        reward = t["small_control"] * t["standing"] * t["upright"] * (5.0 * t["dont_move"] + 1.0) / 6.0
        done = ((t["head_height"] < _FALLEN_HEIGHT) | diverged(state.data, data)).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics=t)
