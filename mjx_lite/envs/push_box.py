"""`push_box`: push a box to a random target on a table with the bundled three-link `pusher` arm (a small
manipulation task in MuJoCo Playground's spirit: reach the object, move it to a sampled goal).

Observation (22): cos and sin of the 3 arm joints (6), arm joint velocities (3), tip xy (2), box xy (2), cos and sin
of the box's yaw (2), box velocities (3: x, y, yaw), tip-to-box xy (2), box-to-target xy (2). Control period 0.02 s
(4 x 5 ms).
Reward (in [0, 1]): (reach + 4 push) / 5 with
  reach = tolerance(|box - tip|_xy, bounds=(0, 0.065), margin=0.2)   (0.065 m: the box's half diagonal + tip radius)
  push  = tolerance(|target - box|_xy, bounds=(0, 0.02), margin=0.3)  (gaussian: 0.1 at the margin)
Reset: the box at radius U(0.2, 0.35) m and angle phi ~ U(-pi, pi) from the shoulder, yaw U(-pi, pi); the target
(a mocap body, so in `Data.mocap_pos`, and in `info["target"]`) at radius U(0.15, 0.4) m and angle phi + U(-pi/2,
pi/2); the arm pointing away from the box (shoulder phi + pi + U(-0.5, 0.5), elbow and wrist U(-0.3, 0.3) rad), at
rest. No termination (but divergence). Domain randomisation (`randomizer()`): body masses 0.8-1.2, joint damping
0.8-1.2, joint frictionloss 0.7-1.3 (the box's table friction), friction 0.8-1.2.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

import mjx_lite
from mjx_lite import names
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["PushBox"]

REACH_RADIUS = 0.065  # m: box half diagonal (0.042) + tip radius (0.02), rounded up
REACH_MARGIN = 0.2
TARGET_RADIUS = 0.02  # m
PUSH_MARGIN = 0.3
BOX_RADII = (0.2, 0.35)
TARGET_RADII = (0.15, 0.4)


class PushBox(Env):
    """Push the box onto the target (see the module docstring)."""

    # the box's table friction is its joints' frictionloss and damping
    RANDOMIZE = {"body_mass": (0.8, 1.2), "dof_damping": (0.8, 1.2), "dof_frictionloss": (0.7, 1.3),
                 "geom_friction": (0.8, 1.2)}  # fmt: skip

    def __init__(self, model: Model | None = None, n_frames: int = 4):
        super().__init__(mjx_lite.load_mjcf("pusher") if model is None else model, n_frames=n_frames)
        m = self.model
        self._tip = names.site_id(m, "tip")
        self._box = names.body_id(m, "box")
        self._target_body = names.body_id(m, "target")
        self._arm_q = [names.qpos_slice(m, j).start for j in ("shoulder", "elbow", "wrist")]
        self._box_q = [names.qpos_slice(m, j).start for j in ("box_x", "box_y", "box_yaw")]
        self._arm_v = [names.qvel_slice(m, j).start for j in ("shoulder", "elbow", "wrist")]
        self._box_v = [names.qvel_slice(m, j).start for j in ("box_x", "box_y", "box_yaw")]

    def _parts(self, d: Data, target: jax.Array) -> dict:
        tip = d.site_xpos[self._tip, :2]
        box = d.xpos[self._box, :2]
        return {"tip": tip, "box": box, "tip_to_box": box - tip, "box_to_target": target - box}

    def _obs(self, d: Data, target: jax.Array) -> jax.Array:
        p = self._parts(d, target)
        q = d.qpos[jp.asarray(self._arm_q)]
        yaw = d.qpos[self._box_q[2]]
        return jp.concatenate([jp.cos(q), jp.sin(q), d.qvel[jp.asarray(self._arm_v)], p["tip"], p["box"],
                               jp.stack([jp.cos(yaw), jp.sin(yaw)]), d.qvel[jp.asarray(self._box_v)],
                               p["tip_to_box"], p["box_to_target"]])  # fmt: skip

    def _terms(self, d: Data, target: jax.Array) -> dict:
        p = self._parts(d, target)
        reach_dist = jp.sqrt(jp.sum(p["tip_to_box"] ** 2) + 1e-12)
        push_dist = jp.sqrt(jp.sum(p["box_to_target"] ** 2) + 1e-12)
        reach = tolerance(reach_dist, bounds=(0.0, REACH_RADIUS), margin=REACH_MARGIN)
        push = tolerance(push_dist, bounds=(0.0, TARGET_RADIUS), margin=PUSH_MARGIN)
        return {"reach": reach, "push": push, "reach_distance": reach_dist, "push_distance": push_dist}

    def initial_state(self, rng: jax.Array) -> tuple[jax.Array, jax.Array]:
        """((nq,) qpos, (2,) target xy): the start `reset` draws (the docstring's distribution), at rest."""
        m = self.model
        f = self.float_dtype()
        k = jax.random.split(rng, 7)
        phi = jax.random.uniform(k[0], (), f, -jp.pi, jp.pi)
        r_box = jax.random.uniform(k[1], (), f, *BOX_RADII)
        yaw = jax.random.uniform(k[2], (), f, -jp.pi, jp.pi)
        r_t = jax.random.uniform(k[3], (), f, *TARGET_RADII)
        phi_t = phi + jax.random.uniform(k[4], (), f, -jp.pi / 2, jp.pi / 2)
        shoulder = phi + jp.pi + jax.random.uniform(k[5], (), f, -0.5, 0.5)
        bend = jax.random.uniform(k[6], (2,), f, -0.3, 0.3)
        box0 = m.body_pos[self._box, :2]  # the slides measure from the box body's model position
        box_q = jp.stack([r_box * jp.cos(phi), r_box * jp.sin(phi)]) - box0
        qpos = m.qpos0.at[jp.asarray(self._arm_q)].set(jp.concatenate([shoulder[None], bend]))
        qpos = qpos.at[jp.asarray(self._box_q)].set(jp.concatenate([box_q, yaw[None]]))
        return qpos, jp.stack([r_t * jp.cos(phi_t), r_t * jp.sin(phi_t)])

    def reset(self, rng: jax.Array) -> State:
        m = self.model
        f = self.float_dtype()
        qpos, target = self.initial_state(rng)
        mocap = jp.concatenate([target, m.body_pos[self._target_body, 2:]])[None]
        data = self.init_data(qpos=qpos, mocap_pos=mocap)
        zero = jp.zeros((), f)
        return State(data, self._obs(data, target), zero, zero, metrics=self._terms(data, target),
                     info={"target": target})  # fmt: skip

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        target = state.info["target"]
        t = self._terms(data, target)
        reward = (t["reach"] + 4.0 * t["push"]) / 5.0
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self._obs(data, target), reward=reward, done=done, metrics=t)
