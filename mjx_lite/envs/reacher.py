"""`reacher`: bring the fingertip of a two-link planar arm (bundled `reacher` model) to a random target.

Observation (8): cos and sin of both joint angles (4), fingertip-to-target vector in the plane (2), joint
velocities (2). Control period 0.02 s (2 physics steps).
Reward: tolerance(distance, bounds=(0, 0.025), margin=0.1) (gaussian; 0.025 m = target + fingertip radii): 1 when
touching, 0.1 at 0.1 m beyond. The target (a mocap body, so it is in `Data.mocap_pos`) is drawn at a radius
U(0.05, 0.20) m and a uniform angle; the arm starts at uniform random joint angles (elbow within its limits).
No termination.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["Reacher"]

_RADII = 0.025  # target radius + fingertip radius (m)


class Reacher(Env):
    """Reach a random target with the fingertip (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(mjx_lite.load_mjcf("reacher") if model is None else model, n_frames=2)
        m = self.model
        self._finger = names.site_id(m, "fingertip")
        self._target = names.site_id(m, "target")
        self._target_body = names.body_id(m, "target")
        self._shoulder = names.qpos_slice(m, "shoulder").start
        self._elbow = names.qpos_slice(m, "elbow").start

    def _to_target(self, d: Data) -> jax.Array:
        return d.site_xpos[self._target, :2] - d.site_xpos[self._finger, :2]

    def _obs(self, d: Data) -> jax.Array:
        q = d.qpos
        return jp.concatenate([jp.cos(q), jp.sin(q), self._to_target(d), d.qvel])

    def _reward(self, d: Data) -> tuple[jax.Array, jax.Array]:
        dist = jp.sqrt(jp.sum(self._to_target(d) ** 2) + 1e-12)
        return tolerance(dist, bounds=(0.0, _RADII), margin=0.1), dist

    def reset(self, rng: jax.Array) -> State:
        m = self.model
        f = self.float_dtype()
        k1, k2, k3, k4 = jax.random.split(rng, 4)
        lo, hi = m.jnt_range[names.joint_id(m, "elbow")]
        qpos = m.qpos0.at[self._shoulder].set(jax.random.uniform(k1, (), f, -jp.pi, jp.pi))
        qpos = qpos.at[self._elbow].set(jax.random.uniform(k2, (), f, lo, hi))
        radius = jax.random.uniform(k3, (), f, 0.05, 0.20)
        angle = jax.random.uniform(k4, (), f, 0.0, 2 * jp.pi)
        z = m.body_pos[self._target_body, 2]
        target = jp.stack([radius * jp.cos(angle), radius * jp.sin(angle), z])[None]
        data = self.init_data(qpos=qpos, mocap_pos=target)
        zero = jp.zeros((), f)
        return State(data, self._obs(data), zero, zero, metrics={"distance": self._reward(data)[1]}, info={})

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        reward, dist = self._reward(data)
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics={"distance": dist})
