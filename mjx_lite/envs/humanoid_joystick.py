"""`humanoid_joystick`: walk the bundled `humanoid` at a commanded forward speed and yaw rate (MuJoCo Playground's
humanoid joystick tasks, in the DeepMind Control Suite's bounded-reward style).

Observation (51): `humanoid_bundled_stand`'s 49 (joint angles, head height, torso up axis, com velocity, joint
velocities, torso velocity, gyro) and the command (2). Control period 0.02 s (4 x 5 ms).
Command c = (forward speed, yaw rate): U(-0.2, 1.0) m/s and U(-0.5, 0.5) rad/s, both zero with probability 0.1,
drawn at reset and redrawn every `resample_steps` (250: 5 s) control steps; in `info["command"]` (with
`info["command_rng"]`, `info["command_steps"]`).
Reward (in [0, 1]): small_control * standing * upright * (2 lin + yaw) / 3 with standing, upright, small_control
as `humanoid_bundled_stand` and, for the centre-of-mass velocity v in the heading frame (world velocity turned by
minus the torso's yaw: v_x forward, v_y to the left) and the world-frame yaw rate w_z of the torso,
  lin = exp(-((c_0 - v_x)^2 + v_y^2) / 0.25),  yaw = exp(-(c_1 - w_z)^2 / 0.25).
Terminates when the head drops below 0.8 m (fallen) or the physics diverged. Starts as `humanoid_bundled_stand`
(standing, U(-0.05, 0.05) rad on the joints). Domain randomisation (`randomizer()`): friction 0.8-1.2, body
masses 0.9-1.1, joint damping 0.8-1.2, motor gear 0.9-1.1.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import commands
from mjx_lite.envs.base import DEFAULT_RANDOMIZE, State, diverged
from mjx_lite.envs.humanoid import _FALLEN_HEIGHT, HumanoidStand
from mjx_lite.types import Data, Model

__all__ = ["HumanoidJoystick"]

COMMAND_RANGES = ((-0.2, 1.0), (-0.5, 0.5))  # forward speed (m/s), yaw rate (rad/s)
ZERO_PROB = 0.1
RESAMPLE_STEPS = 250  # control steps between command draws (5 s)
SIGMA_LIN = 0.25  # (m/s)^2
SIGMA_YAW = 0.25  # (rad/s)^2


def heading_velocity(xmat: jax.Array, v: jax.Array) -> jax.Array:
    """(2,) the world-frame velocity `v` (3,) in the heading frame of the rotation `xmat` (3, 3): turned about z by
    minus the yaw of the body's x axis (NaN-safe when that axis is vertical)."""
    fx, fy = xmat[0, 0], xmat[1, 0]
    n = jp.sqrt(fx**2 + fy**2 + 1e-12)
    c, s = fx / n, fy / n
    return jp.stack([c * v[0] + s * v[1], -s * v[0] + c * v[1]])


class HumanoidJoystick(HumanoidStand):
    """Walk at a commanded forward speed and yaw rate (see the module docstring)."""

    RANDOMIZE = {**DEFAULT_RANDOMIZE, "actuator_gear": (0.9, 1.1)}

    def __init__(self, model: Model | None = None, n_frames: int = 4, resample_steps: int = RESAMPLE_STEPS):
        super().__init__(model, n_frames=n_frames)
        if int(resample_steps) < 1:
            raise ValueError(f"humanoid_joystick: resample_steps must be >= 1, not {resample_steps}")
        self._resample = int(resample_steps)
        self._torso = names.body_id(self.model, "torso")

    def _joystick_terms(self, d: Data, action: jax.Array, info: dict) -> dict:
        t = self._terms(d, action)
        xmat = d.xmat[self._torso]
        v = heading_velocity(xmat, d.sensordata[self._com_vel])
        wz = (xmat @ d.sensordata[self._gyro])[2]
        cmd = info["command"]
        lin = commands.tracking((cmd[0] - v[0]) ** 2 + v[1] ** 2, SIGMA_LIN)
        yaw = commands.tracking((cmd[1] - wz) ** 2, SIGMA_YAW)
        return {**{k: t[k] for k in ("standing", "upright", "small_control", "head_height")}, "lin": lin, "yaw": yaw,
                "forward": v[0], "yaw_rate": wz}  # fmt: skip

    @staticmethod
    def reward(t: dict) -> jax.Array:
        """The reward from the terms of `_joystick_terms` (the formula of the module docstring)."""
        return t["small_control"] * t["standing"] * t["upright"] * (2.0 * t["lin"] + t["yaw"]) / 3.0

    def reset(self, rng: jax.Array) -> State:
        k_stand, k_cmd = jax.random.split(rng)
        s = super().reset(k_stand)
        f = self.float_dtype()
        info = commands.initial(k_cmd, COMMAND_RANGES, ZERO_PROB, f)
        keys = ("standing", "upright", "small_control", "head_height", "lin", "yaw", "forward", "yaw_rate")
        return s.replace(obs=jp.concatenate([s.obs, info["command"]]), metrics={k: jp.zeros((), f) for k in keys},
                         info=info)  # fmt: skip

    def step(self, state: State, action: jax.Array) -> State:
        action = jp.clip(self.check_action(action), -1.0, 1.0)
        data = self.physics_step(state.data, action)
        t = self._joystick_terms(data, action, state.info)
        reward = self.reward(t)
        done = ((t["head_height"] < _FALLEN_HEIGHT) | diverged(state.data, data)).astype(reward.dtype)
        info = commands.advance(state.info, COMMAND_RANGES, ZERO_PROB, self._resample)
        obs = jp.concatenate([self._obs(data), info["command"]])
        return state.replace(data=data, obs=obs, reward=reward, done=done, metrics=t, info=info)
