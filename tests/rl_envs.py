"""A tiny environment for the RL tests (a user subclass of envs.Env): a block on a rail, pushed to a target.

One slide joint, Euler, no constraints: the physics compiles in seconds, so wrapper and PPO tests stay fast.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import envs, names

SLIDER_XML = """
<mujoco model="slider">
  <option timestep="0.02" integrator="Euler"/>
  <worldbody>
    <body name="block">
      <joint name="x" type="slide" axis="1 0 0" damping="0.5"/>
      <geom name="block" type="box" size="0.1 0.1 0.1" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor name="push" joint="x" gear="5" ctrlrange="-1 1" ctrllimited="true"/></actuator>
  <sensor><jointpos name="pos" joint="x"/><jointvel name="vel" joint="x"/></sensor>
</mujoco>
"""

TARGET = 0.3
LIMIT = 1.0  # |x| beyond this terminates the episode


class Slider(envs.Env):
    """Move the block to x = TARGET; reward tolerance(x - TARGET, (-0.05, 0.05), margin 0.5); ends past |x| = 1."""

    def __init__(self):
        super().__init__(mjx_lite.load_mjcf_string(SLIDER_XML), n_frames=2)
        self._pos = names.sensor_slice(self.model, "pos")
        self._vel = names.sensor_slice(self.model, "vel")

    def _obs(self, d):
        x = d.sensordata[self._pos][0]
        return jp.stack([x, d.sensordata[self._vel][0], TARGET - x])

    def reset(self, rng):
        f = self.float_dtype()
        x = jax.random.uniform(rng, (1,), f, -0.2, 0.2)
        data = self.init_data(qpos=x)
        zero = jp.zeros((), f)
        return envs.State(data, self._obs(data), zero, zero, metrics={"x": data.qpos[0]}, info={"hits": zero})

    def step(self, state, action):
        data = self.physics_step(state.data, action)
        x = data.qpos[0]
        reward = envs.tolerance(x - TARGET, bounds=(-0.05, 0.05), margin=0.5)
        done = (jp.abs(x) > LIMIT) | envs.diverged(state.data, data)
        hits = state.info["hits"] + (jp.abs(x - TARGET) < 0.05)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done.astype(reward.dtype),
                             metrics={"x": x}, info={"hits": hits})
