"""`manipulator_bring_ball` on dm_control's `manipulator.xml` with the ball and its target only
(dm_control.suite.manipulator.bring_ball, fully observable).

Observation (44): sin and cos of the 8 arm and hand joints (interleaved: 16), their velocities (8), log(1 + touch)
of the 5 touch sensors (5), the 2-D pose (x, z, qw, qy) of the hand, of the ball and of the target (12), the
ball's joint velocities (x, z, y: 3). Control period 0.01 s (10 physics steps of 1 ms).
Reward: tolerance(|ball site - target site|, bounds=(0, 0.01), margin=0.02) (gaussian).
Starts as dm_control draws it: arm joints uniform in their ranges (the unlimited root U(-pi, pi)), the finger at
the thumb's angle, the target at x U(-0.4, 0.4), z U(0.1, 0.4), angle U(-pi, pi) (in `info["target"]`:
x, z, angle; dm_control moves the target body of the model instead), the ball in the hand (probability 0.1), at
the target (0.1) or at x U(-0.5, 0.5), z U(0, 0.7), angle U(0, 2 pi) moving at x velocity U(-5, 5) (0.8); the
first of `CANDIDATES` draws without a contact (dm_control redraws until none). No termination.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.pipeline.kinematics import kinematics
from mjx_lite.types import Data, Model

__all__ = ["ARM_JOINTS", "CANDIDATES", "ManipulatorBring", "bring_ball_model"]

ARM_JOINTS = ("arm_root", "arm_shoulder", "arm_elbow", "arm_wrist", "finger", "fingertip", "thumb", "thumbtip")
TOUCH_SENSORS = ("palm_touch", "finger_touch", "thumb_touch", "fingertip_touch", "thumbtip_touch")
CLOSE = 0.01  # m
P_IN_HAND, P_IN_TARGET = 0.1, 0.1
CANDIDATES = 8  # initial states drawn at reset (the first without contact is kept)
_UNUSED_PROPS = ("cup", "peg", "target_peg", "slot")  # dm_control's make_model(use_peg=False, insert=False)


def bring_ball_model() -> Model:
    """dm_control's manipulator with the ball and its target (the peg, slot and cup bodies removed)."""

    def edit(root: ET.Element) -> None:
        for parent in root.iter():
            for child in list(parent):
                if child.tag == "body" and child.get("name") in _UNUSED_PROPS:
                    parent.remove(child)

    return suite.load_string("manipulator", edit)


class ManipulatorBring(suite.SuiteEnv):
    """Bring the ball to the target (see the module docstring)."""

    def __init__(self, model: Model | None = None):
        super().__init__(bring_ball_model() if model is None else model, n_frames=10)
        m = self.model
        self._arm_q = np.array([names.qpos_slice(m, j).start for j in ARM_JOINTS])
        self._arm_v = np.array([names.qvel_slice(m, j).start for j in ARM_JOINTS])
        self._arm_jnt = np.array([names.joint_id(m, j) for j in ARM_JOINTS])
        self._obj_q = np.array([names.qpos_slice(m, j).start for j in ("ball_x", "ball_z", "ball_y")])
        self._obj_v = np.array([names.qvel_slice(m, j).start for j in ("ball_x", "ball_z", "ball_y")])
        self._finger, self._thumb = names.qpos_slice(m, "finger").start, names.qpos_slice(m, "thumb").start
        self._touch = np.array([names.sensor_slice(m, s).start for s in TOUCH_SENSORS])
        self._hand, self._ball = names.body_id(m, "hand"), names.body_id(m, "ball")
        self._target_body = names.body_id(m, "target_ball")
        self._ball_site, self._target_site = names.site_id(m, "ball"), names.site_id(m, "target_ball")
        self._grasp = names.site_id(m, "grasp")

    def _pose(self, d: Data, body: int) -> jax.Array:
        return jp.concatenate([d.xpos[body, np.array([0, 2])], d.xquat[body, np.array([0, 2])]])

    def _target(self, d: Data, info: dict | None) -> tuple[jax.Array, jax.Array]:
        """(2-D pose (4,), target site position (3,)) of the episode's target."""
        if not info:
            return self._pose(d, self._target_body), d.site_xpos[self._target_site]
        x, z, angle = info["target"]
        c, s = jp.cos(angle), jp.sin(angle)
        rot = jp.stack([jp.stack([c, 0 * c, s]), jp.stack([0 * c, 1 + 0 * c, 0 * c]), jp.stack([-s, 0 * c, c])])
        origin = jp.stack([x, self.model.body_pos[self._target_body, 1], z])
        site = origin + rot @ self.model.site_pos[self._target_site]
        return jp.stack([x, z, jp.cos(angle / 2), jp.sin(angle / 2)]), site

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        q = d.qpos[self._arm_q]
        return jp.concatenate([
            jp.stack([jp.sin(q), jp.cos(q)], axis=-1).ravel(), d.qvel[self._arm_v], jp.log1p(d.sensordata[self._touch]),
            self._pose(d, self._hand), self._pose(d, self._ball), d.qvel[self._obj_v], self._target(d, info)[0],
        ])  # fmt: skip

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        gap = d.site_xpos[self._ball_site] - self._target(d, info)[1]
        dist = jp.sqrt(jp.sum(gap**2) + 1e-30)
        return tolerance(dist, bounds=(0.0, CLOSE), margin=2 * CLOSE), {"distance": dist}

    def _draw(self, key: jax.Array):
        m, f = self.model, self.float_dtype()
        k = jax.random.split(key, 8)
        rng = m.jnt_range[self._arm_jnt]
        limited = jp.asarray(np.asarray(m.jnt_limited, bool)[self._arm_jnt])
        lo, hi = jp.where(limited, rng[:, 0], -jp.pi), jp.where(limited, rng[:, 1], jp.pi)
        qpos = m.qpos0.at[self._arm_q].set(jax.random.uniform(k[0], (len(ARM_JOINTS),), f, lo, hi))
        qpos = qpos.at[self._finger].set(qpos[self._thumb])
        target = jp.stack([jax.random.uniform(k[1], (), f, -0.4, 0.4), jax.random.uniform(k[2], (), f, 0.1, 0.4),
                           jax.random.uniform(k[3], (), f, -jp.pi, jp.pi)])  # fmt: skip
        # the ball: in the hand, at the target, or anywhere with a random x velocity
        hand = kinematics(m, mjx_lite.make_data(m).replace(qpos=qpos))
        grasp = hand.site_xpos[self._grasp]
        direction = hand.site_xmat[self._grasp][np.array([0, 2]), 0]  # xx, zx
        in_hand = jp.stack([grasp[0], grasp[2], jp.pi - jp.arctan2(direction[1], direction[0])])
        anywhere = jp.stack([jax.random.uniform(k[4], (), f, -0.5, 0.5), jax.random.uniform(k[5], (), f, 0.0, 0.7),
                             jax.random.uniform(k[6], (), f, 0.0, 2 * jp.pi)])  # fmt: skip
        u = jax.random.uniform(k[7], (), f)
        kind = jp.where(u < P_IN_HAND, 0, jp.where(u < P_IN_HAND + P_IN_TARGET, 1, 2))
        obj = jp.where(kind == 0, in_hand, jp.where(kind == 1, target, anywhere))
        qvel = jp.zeros(m.nv, f).at[self._obj_v[0]].set(
            jp.where(kind == 2, jax.random.uniform(jax.random.fold_in(key, 1), (), f, -5.0, 5.0), 0.0))
        return qpos.at[self._obj_q].set(obj), qvel, target

    def reset(self, rng: jax.Array) -> State:
        data, target = suite.collision_free(self, self._draw, rng, CANDIDATES)
        return self.start(data, {"target": target})
