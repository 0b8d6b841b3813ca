"""Cart-pole tasks on the bundled `cartpole` model: `cartpole_balance`, `cartpole_swingup` and their sparse
variants `cartpole_balance_sparse`, `cartpole_swingup_sparse` (dm_control.suite.cartpole's rewards).

Observation (5): cart position, cos and sin of the pole angle (0 = upright), cart velocity, pole angular velocity.
Reward (in [0, 1]), the product of
  upright        = (cos(angle) + 1) / 2
  centered       = (1 + tolerance(cart_position, margin=2)) / 2
  small_control  = (4 + tolerance(action, margin=1, value_at_margin=0, sigmoid="quadratic")) / 5
  small_velocity = (1 + tolerance(angular_velocity, margin=5)) / 2
Sparse: 1 while |cart position| <= 0.25 m and cos(angle) >= 0.995, else 0.
No termination (episodes end by truncation). Balance starts near upright (cart in U(-0.1, 0.1) m, pole in
U(-0.034, 0.034) rad), swing-up hanging down (pole at pi + 0.01 N(0, 1)); velocities 0.01 N(0, 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["CartPole"]


class CartPole(Env):
    """Balance (`swing_up=False`) or swing up and balance (`swing_up=True`) the pole (see the module docstring).

    Args:
      swing_up: start hanging down instead of near upright.
      sparse: dm_control's sparse reward (the indicator of the cart within 0.25 m and the pole within
        acos(0.995) of upright) instead of the smooth one.
      model: a replacement model with the same joint and actuator names (default: bundled `cartpole`).
    """

    def __init__(self, swing_up: bool = False, model: Model | None = None, sparse: bool = False):
        super().__init__(mjx_lite.load_mjcf("cartpole") if model is None else model, n_frames=1)
        self._swing_up = bool(swing_up)
        self._sparse = bool(sparse)
        m = self.model
        self._x = names.qpos_slice(m, "slider").start
        self._th = names.qpos_slice(m, "hinge").start
        self._xv = names.qvel_slice(m, "slider").start
        self._thv = names.qvel_slice(m, "hinge").start

    def _obs(self, d: Data) -> jax.Array:
        th = d.qpos[self._th]
        return jp.stack([d.qpos[self._x], jp.cos(th), jp.sin(th), d.qvel[self._xv], d.qvel[self._thv]])

    def _reward(self, d: Data, action: jax.Array) -> tuple[jax.Array, dict]:
        upright = (jp.cos(d.qpos[self._th]) + 1.0) / 2.0
        centered = (1.0 + tolerance(d.qpos[self._x], margin=2.0)) / 2.0
        if self._sparse:
            inside = tolerance(d.qpos[self._x], bounds=(-0.25, 0.25)) * tolerance(jp.cos(d.qpos[self._th]),
                                                                                   bounds=(0.995, 1.0))
            return inside, {"upright": upright, "centered": centered}
        control = (4.0 + tolerance(action, margin=1.0, value_at_margin=0.0, sigmoid="quadratic").mean()) / 5.0
        velocity = (1.0 + tolerance(d.qvel[self._thv], margin=5.0)) / 2.0
        return upright * centered * control * velocity, {"upright": upright, "centered": centered}

    def _initial_qpos_qvel(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
        m = self.model
        k1, k2, k3 = jax.random.split(rng, 3)
        f = self.float_dtype()
        if self._swing_up:
            x = 0.01 * jax.random.normal(k1, (), f)
            th = jp.pi + 0.01 * jax.random.normal(k2, (), f)
        else:
            x = jax.random.uniform(k1, (), f, -0.1, 0.1)
            th = jax.random.uniform(k2, (), f, -0.034, 0.034)
        qpos = m.qpos0.at[self._x].set(x).at[self._th].set(th)
        return qpos, 0.01 * jax.random.normal(k3, (m.nv,), f)

    def reset(self, rng: jax.Array) -> State:
        f = self.float_dtype()
        qpos, qvel = self._initial_qpos_qvel(rng)
        data = self.init_data(qpos=qpos, qvel=qvel)
        zero = jp.zeros((), f)
        return State(data, self._obs(data), zero, zero, metrics={"upright": zero, "centered": zero}, info={})

    def step(self, state: State, action: jax.Array) -> State:
        action = jp.clip(self.check_action(action), -1.0, 1.0)
        data = self.physics_step(state.data, action)
        reward, metrics = self._reward(data, action)
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data), reward=reward, done=done, metrics=metrics)
