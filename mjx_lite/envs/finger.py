"""`finger_spin`, `finger_turn_easy`, `finger_turn_hard` on dm_control's `finger.xml` (dm_control.suite.finger).

Observation: position (4: proximal and distal joint sensors, tip relative to the spinner's hinge, x and z),
velocity (3: proximal, distal, hinge joint-velocity sensors), log(1 + touch) of the two touch sensors (2); turn
adds the target relative to the hinge (x, z: 2) and the signed distance from the tip to the target's surface (1):
9 (spin) or 12 (turn). Control period 0.02 s (2 physics steps of 10 ms).
Reward: spin: 1 while the hinge velocity <= -15 rad/s, else 0; turn: 1 while the tip is inside the target
(distance <= target radius), else 0. Spin sets the hinge damping to 0.03 (dm_control's episode setup); turn sets
the target radius (0.07 easy, 0.03 hard) in the model's site_size. Starts with joints drawn as dm_control
(limited uniform in range, the spinner's hinge U(-pi, pi)), the first of `CANDIDATES` draws without a contact;
turn draws the target on the circle of radius (cap1 radius + half length) around the hinge at an angle U(-pi, pi),
in `info["target"]` (x, z; dm_control moves the target site of the model instead).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.types import Data, Model

__all__ = ["CANDIDATES", "TARGET_RADII", "Finger"]

SPIN_VELOCITY = 15.0
SPIN_DAMPING = 0.03
TARGET_RADII = {"easy": 0.07, "hard": 0.03}
CANDIDATES = 4  # initial poses drawn at reset (the first without contact is kept)
_XZ = np.array([0, 2])


class Finger(suite.SuiteEnv):
    """Spin the body (`target_radius=None`) or turn its tip into a target of `target_radius` (see the module
    docstring)."""

    def __init__(self, target_radius: float | None = None, model: Model | None = None):
        m = suite.load("finger") if model is None else model
        self._turn = target_radius is not None
        self._hinge_dof = names.qvel_slice(m, "hinge").start
        self._target_site = names.site_id(m, "target")
        if self._turn:
            m = m.replace(site_size=m.site_size.at[self._target_site, 0].set(float(target_radius)))
        else:
            m = m.replace(dof_damping=m.dof_damping.at[self._hinge_dof].set(SPIN_DAMPING))
        super().__init__(m, n_frames=2)
        s = {n: names.sensor_slice(m, n) for n in ("proximal", "distal", "proximal_velocity", "distal_velocity",
                                                     "hinge_velocity", "tip", "spinner", "touchtop", "touchbottom")}
        self._s = s
        self._hinge_jnt = names.joint_id(m, "hinge")
        self._cap = names.geom_id(m, "cap1")

    def _sensor(self, d: Data, *keys: str) -> jax.Array:
        return jp.concatenate([d.sensordata[self._s[k]] for k in keys])

    def _tip(self, d: Data) -> jax.Array:
        return d.sensordata[self._s["tip"]][_XZ] - d.sensordata[self._s["spinner"]][_XZ]

    def _target(self, d: Data, info: dict | None) -> jax.Array:
        target = d.site_xpos[self._target_site, _XZ] if not info else info["target"]
        return target - d.sensordata[self._s["spinner"]][_XZ]

    def _dist(self, d: Data, info: dict | None) -> jax.Array:
        gap = self._target(d, info) - self._tip(d)
        return jp.sqrt(jp.sum(gap**2) + 1e-30) - self.model.site_size[self._target_site, 0]

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        parts = [self._sensor(d, "proximal", "distal"), self._tip(d),
                 self._sensor(d, "proximal_velocity", "distal_velocity", "hinge_velocity"),
                 jp.log1p(self._sensor(d, "touchtop", "touchbottom"))]  # fmt: skip
        if self._turn:
            parts += [self._target(d, info), self._dist(d, info)[None]]
        return jp.concatenate(parts)

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        f = d.qpos.dtype
        if self._turn:
            dist = self._dist(d, info)
            return (dist <= 0).astype(f), {"distance": dist}
        velocity = d.sensordata[self._s["hinge_velocity"]][0]
        return (velocity <= -SPIN_VELOCITY).astype(f), {"hinge_velocity": velocity}

    def reset(self, rng: jax.Array) -> State:
        m, f = self.model, self.float_dtype()
        k1, k2 = jax.random.split(rng)

        def draw(key):
            return suite.random_joints(m, m.qpos0, key), jp.zeros(m.nv, f), ()

        data, _ = suite.collision_free(self, draw, k1, CANDIDATES)
        if not self._turn:
            return self.start(data)
        angle = jax.random.uniform(k2, (), f, -jp.pi, jp.pi)
        hinge = data.xanchor[self._hinge_jnt, _XZ]
        radius = jp.sum(m.geom_size[self._cap])
        return self.start(data, {"target": hinge + radius * jp.stack([jp.sin(angle), jp.cos(angle)])})
