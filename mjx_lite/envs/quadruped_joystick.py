"""`quadruped_joystick` and `quadruped_getup` on the bundled `quadruped` model (MuJoCo Playground's locomotion
tasks, in the DeepMind Control Suite's bounded-reward style: every step's reward is in [0, 1]).

`quadruped_joystick`: follow a velocity command c = (vx, vy, yaw rate).
  Observation (37): `quadruped_run`'s 26 (joint angles and velocities, torso velocity in the torso frame, gyro,
  torso up axis, torso height), the command (3), the previous action (8). Control period 0.02 s (4 x 5 ms).
  Command: vx U(-0.6, 1.0) m/s, vy U(-0.3, 0.3) m/s, yaw rate U(-1, 1) rad/s, all zero with probability 0.1; drawn
  at reset and redrawn every `resample_steps` (250: 5 s) control steps; in `info["command"]` (with
  `info["command_rng"]`, `info["command_steps"]`, and the previous action in `info["last_action"]`).
  Reward: upright * (0.6 lin + 0.4 yaw) * (1 - 0.2 (1 - smooth)), with (v: velocimeter, w: gyro, torso frame)
    upright = (1 + up_z) / 2
    lin     = exp(-|c_xy - v_xy|^2 / 0.25),  yaw = exp(-(c_yaw - w_z)^2 / 0.25)
    smooth  = exp(-(0.5 mean((a - a_prev)^2) + v_z^2))   (the action-rate and vertical-velocity penalties,
              taking at most 20% off)
  Terminates when the torso is upside down (up_z < 0) or the physics diverged. Starts as `quadruped_run`
  (standing, random heading, joints U(-0.1, 0.1) rad).

`quadruped_getup`: stand up from a fall.
  Observation (26): `quadruped_run`'s. Control period 0.02 s.
  Reward: upright * height * posture with
    upright = tolerance(up_z, bounds=(0.9, inf), margin=1.9, sigmoid="linear", value_at_margin=0)
    height  = tolerance(torso z, bounds=(0.4, inf), margin=0.4, sigmoid="linear", value_at_margin=0)
    posture = tolerance(|q_joints - q_stand| / sqrt(8), margin=1) (gaussian; rms joint error from the standing
              pose, the model's qpos0: 0.1 at 1 rad)
  Starts fallen: the torso at 0.8 m with a uniformly random orientation and the joints uniform in their ranges, at
  rest, dropped (the first ~0.4 s of the episode is the fall). No termination (but divergence).

Domain randomisation (`randomizer()`, both tasks): friction 0.8-1.2, body masses 0.9-1.1, joint damping 0.8-1.2,
motor gear 0.9-1.1.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.envs import commands
from mjx_lite.envs.base import DEFAULT_RANDOMIZE, State, diverged
from mjx_lite.envs.quadruped import QuadrupedRun
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["QuadrupedGetup", "QuadrupedJoystick"]

COMMAND_RANGES = ((-0.6, 1.0), (-0.3, 0.3), (-1.0, 1.0))  # vx, vy (m/s), yaw rate (rad/s)
ZERO_PROB = 0.1  # probability of a zero (stand still) command
RESAMPLE_STEPS = 250  # control steps between command draws (5 s)
SIGMA_LIN = 0.25  # (m/s)^2
SIGMA_YAW = 0.25  # (rad/s)^2
LIN_WEIGHT = 0.6  # share of the planar-velocity term in the tracking reward (the rest: yaw rate)
ACTION_RATE_COST = 0.5
VZ_COST = 1.0  # per (m/s)^2
PENALTY_WEIGHT = 0.2  # the most the penalties take off the reward
STAND_HEIGHT = 0.4  # m, torso centre (standing at qpos0 it settles at ~0.44 m)
POSTURE_MARGIN = 1.0  # rad, rms joint error where posture = 0.1
DROP_HEIGHT = 0.8  # m, torso centre at a getup reset (above the longest reach, 0.74 m, of a foot)
# domain randomisation (`randomizer()`): the defaults and the motors' strength, as Playground's locomotion tasks
RANDOMIZE = {**DEFAULT_RANDOMIZE, "actuator_gear": (0.9, 1.1)}


class QuadrupedJoystick(QuadrupedRun):
    """Track a planar velocity and yaw-rate command (see the module docstring).

    Args:
      model: the model (default the bundled `quadruped`).
      n_frames: physics steps per control step.
      resample_steps: control steps between command draws.
    """

    RANDOMIZE = RANDOMIZE

    def __init__(self, model: Model | None = None, n_frames: int = 4, resample_steps: int = RESAMPLE_STEPS):
        super().__init__(model, n_frames=n_frames)
        if int(resample_steps) < 1:
            raise ValueError(f"quadruped_joystick: resample_steps must be >= 1, not {resample_steps}")
        self._resample = int(resample_steps)

    def _joystick_obs(self, d: Data, info: dict) -> jax.Array:
        return jp.concatenate([self._obs(d), info["command"], info["last_action"]])

    def _joystick_terms(self, d: Data, action: jax.Array, info: dict) -> dict:
        s = d.sensordata
        v, w, up_z = s[self._vel], s[self._gyro], s[self._up][2]
        cmd = info["command"]
        lin = commands.tracking(jp.sum((cmd[:2] - v[:2]) ** 2), SIGMA_LIN)
        yaw = commands.tracking((cmd[2] - w[2]) ** 2, SIGMA_YAW)
        rate = jp.mean((action - info["last_action"]) ** 2)
        smooth = jp.exp(-(ACTION_RATE_COST * rate + VZ_COST * v[2] ** 2))
        upright = (1.0 + up_z) / 2.0
        return {"upright": upright, "lin": lin, "yaw": yaw, "smooth": smooth, "up_z": up_z}

    @staticmethod
    def reward(t: dict) -> jax.Array:
        """The reward from the terms of `_joystick_terms` (the formula of the module docstring)."""
        return t["upright"] * (LIN_WEIGHT * t["lin"] + (1 - LIN_WEIGHT) * t["yaw"]) * (
            1.0 - PENALTY_WEIGHT * (1.0 - t["smooth"]))

    def reset(self, rng: jax.Array) -> State:
        k_run, k_cmd = jax.random.split(rng)
        s = super().reset(k_run)
        f = self.float_dtype()
        info = {**commands.initial(k_cmd, COMMAND_RANGES, ZERO_PROB, f), "last_action": jp.zeros(self.action_size, f)}
        metrics = {k: jp.zeros((), f) for k in ("upright", "lin", "yaw", "smooth", "up_z")}
        return s.replace(obs=self._joystick_obs(s.data, info), metrics=metrics, info=info)

    def step(self, state: State, action: jax.Array) -> State:
        action = jp.clip(self.check_action(action), -1.0, 1.0)
        data = self.physics_step(state.data, action)
        t = self._joystick_terms(data, action, state.info)
        reward = self.reward(t)
        done = ((t["up_z"] < 0.0) | diverged(state.data, data)).astype(reward.dtype)
        info = commands.advance(state.info, COMMAND_RANGES, ZERO_PROB, self._resample)
        info = {**info, "last_action": action.astype(reward.dtype)}
        return state.replace(data=data, obs=self._joystick_obs(data, info), reward=reward, done=done, metrics=t,
                             info=info)  # fmt: skip


class QuadrupedGetup(QuadrupedRun):
    """Get up from a random fallen pose and stand (see the module docstring)."""

    RANDOMIZE = RANDOMIZE

    def _getup_terms(self, d: Data) -> dict:
        m = self.model
        up_z = d.sensordata[self._up][2]
        z = d.xpos[self._torso, 2]
        err = d.qpos[self._root_q.stop :] - m.qpos0[self._root_q.stop :]
        rms = jp.sqrt(jp.mean(err**2) + 1e-12)
        upright = tolerance(up_z, bounds=(0.9, jp.inf), margin=1.9, sigmoid="linear", value_at_margin=0.0)
        height = tolerance(z, bounds=(STAND_HEIGHT, jp.inf), margin=STAND_HEIGHT, sigmoid="linear",
                           value_at_margin=0.0)  # fmt: skip
        posture = tolerance(rms, margin=POSTURE_MARGIN)
        return {"upright": upright, "height": height, "posture": posture, "torso_z": z}

    def initial_qpos(self, rng: jax.Array) -> jax.Array:
        """(nq,) a fallen start: the torso at DROP_HEIGHT with a uniformly random orientation, joints uniform in
        their ranges (the pose `reset` starts from, at rest)."""
        m = self.model
        f = self.float_dtype()
        k1, k2 = jax.random.split(rng)
        quat = jax.random.normal(k1, (4,), f)
        quat = quat / jp.sqrt(jp.maximum(jp.sum(quat**2), 1e-12))  # uniform on the rotations
        lo, hi = m.jnt_range[1:, 0], m.jnt_range[1:, 1]  # every joint after the root is a limited hinge
        joints = jax.random.uniform(k2, lo.shape, f, lo, hi)
        r = self._root_q.start
        return m.qpos0.at[r + 2].set(DROP_HEIGHT).at[r + 3 : r + 7].set(quat).at[self._root_q.stop :].set(joints)

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        data = self.init_data(qpos=self.initial_qpos(rng))
        zero = jp.zeros((), f)
        return State(data, self._obs(data), zero, zero, metrics=self._getup_terms(data), info={})

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        t = self._getup_terms(data)
        reward = t["upright"] * t["height"] * t["posture"]
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics=t)
