"""Passive forces (mj_passive): springs, dampers, gravity compensation, fluid forces and contact adhesion.

MuJoCo 4.0 semantics: polynomial stiffness f(x) = a x + b x^2 + c x^3 (ball/free joints: applied to the
norm of the rotation/translation vector, along its direction), anti-symmetrised polynomial damping
f(v) = a v + b v|v| + c v^3 (per dof / per tendon), tendon springs with a [lower, upper] dead band, actuator
damping (gear^2 f(v) at the joint or tendon target). Disable flags: SPRING zeroes qfrc_spring, DAMPER zeroes
qfrc_damper, both together zero every passive force (as the old PASSIVE flag); GRAVITY disables gravcomp.
Gravity compensation of joints with `jnt_actgravcomp` is routed to qfrc_actuator by `actuation`.
Plastic springs (springyield > 0): the references of those joints and tendons are in `d.plastic` (`plastic`).
Adhesive contacts (geom/pair adhesion) pull along their normals: qfrc_adhesion (`constraint.adhesion_force`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.pipeline import constraint, flex, fluid, passive_rod, plastic, support
from mjx_lite.pipeline.tendon import apply_ft
from mjx_lite.types import Data, DisableBit, JointType, Model, TrnType


def _poly_stiff(x, a, poly):
    """a x + b x^2 + c x^3 (poly = (..., 2) higher-order coefficients)."""
    return a * x + poly[..., 0] * x * x + poly[..., 1] * x * x * x


def _poly_damp(v, a, poly):
    """a v + b v|v| + c v^3."""
    return a * v + poly[..., 0] * v * jp.abs(v) + poly[..., 1] * v * v * v


def _springs(m: Model, d: Data) -> jax.Array:
    dtype = d.qpos.dtype
    qfrc = jp.zeros((m.nv,), dtype)
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    dadr = np.asarray(m.jnt_dofadr)
    k, kp = m.jnt_stiffness, m.jnt_stiffnesspoly
    qpos_spring, lengthspring = plastic.references(m, d)
    scal = np.nonzero((jtype == JointType.SLIDE) | (jtype == JointType.HINGE))[0]
    if len(scal):
        x = d.qpos[qadr[scal]] - qpos_spring[qadr[scal]]
        qfrc = qfrc.at[dadr[scal]].set(-_poly_stiff(x, k[scal], kp[scal]))

    def vec_spring(vec, j):
        n = mjm.safe_norm(vec, keepdims=True)
        f = _poly_stiff(n, k[j][:, None], kp[j][:, None, :])
        return -f * vec / jp.where(n > 0, n, 1.0)

    free = np.nonzero(jtype == JointType.FREE)[0]
    if len(free):
        a = qadr[free][:, None]
        x = d.qpos[a + np.arange(3)] - qpos_spring[a + np.arange(3)]
        qfrc = qfrc.at[dadr[free][:, None] + np.arange(3)].set(vec_spring(x, free))
    rot = np.nonzero((jtype == JointType.FREE) | (jtype == JointType.BALL))[0]
    if len(rot):
        a = (qadr[rot] + np.where(jtype[rot] == JointType.FREE, 3, 0))[:, None] + np.arange(4)
        dif = mjm.quat_sub(mjm.quat_normalize(d.qpos[a]), qpos_spring[a])
        cols = (dadr[rot] + np.where(jtype[rot] == JointType.FREE, 3, 0))[:, None] + np.arange(3)
        qfrc = qfrc.at[cols].set(vec_spring(dif, rot))

    if m.ntendon:
        length = d.ten_length
        lower, upper = lengthspring[:, 0], lengthspring[:, 1]
        x = jp.where(length > upper, length - upper, jp.where(length < lower, length - lower, 0.0))
        frc = -_poly_stiff(x, m.tendon_stiffness, m.tendon_stiffnesspoly)
        qfrc = qfrc + frc @ d.ten_J
    if m.nflexedge:
        qfrc = qfrc + flex.edge_spring(m, d) + flex.elastic_spring(m, d)
        if passive_rod.has_rods(m):
            qfrc = qfrc + passive_rod.rod_spring(m, d)
    return qfrc


def _dampers(m: Model, d: Data) -> jax.Array:
    qfrc = -_poly_damp(d.qvel, m.dof_damping, m.dof_dampingpoly)
    if m.ntendon:
        qfrc = qfrc - _poly_damp(d.ten_velocity, m.tendon_damping, m.tendon_dampingpoly) @ d.ten_J
    if m.nflexedge:
        qfrc = qfrc + flex.edge_damper(m, d) + flex.elastic_damper(m, d)
        if passive_rod.has_rods(m):
            qfrc = qfrc + passive_rod.rod_damper(m, d)
    # actuator damping, reflected to the joint (per dof) or tendon target with gear[0]^2
    trntype = np.asarray(m.actuator_trntype)
    trnid = np.asarray(m.actuator_trnid)
    g2 = m.actuator_gear[np.asarray(m.actuator_outadr), 0] ** 2 if m.nactuator else None
    # all (actuator, dof) pairs of joint transmissions at once: one gather, one scatter-add (the traced graph does
    # not grow with the number of actuators)
    isjnt = (trntype == TrnType.JOINT) | (trntype == TrnType.JOINTINPARENT)
    acts, cols = [], []
    for i in np.nonzero(isjnt)[0]:
        j = int(trnid[i, 0])
        nd = JointType(int(m.jnt_type[j])).dof_width()
        acts += [i] * nd
        cols += list(int(m.jnt_dofadr[j]) + np.arange(nd))
    if acts:
        acts, cols = np.asarray(acts), np.asarray(cols)
        damp, poly = support.take(m.actuator_damping, acts), support.take(m.actuator_dampingpoly, acts)
        f = _poly_damp(support.take(d.qvel, cols), damp, poly)
        qfrc = support.put_add(qfrc, cols, -support.take(g2, acts) * f)
    ten_act = np.nonzero(trntype == TrnType.TENDON)[0]
    if ten_act.size:
        t = trnid[ten_act, 0]
        f = _poly_damp(support.take(d.ten_velocity, t), support.take(m.actuator_damping, ten_act),
                       support.take(m.actuator_dampingpoly, ten_act))  # fmt: skip
        qfrc = qfrc - (support.take(g2, ten_act) * f) @ support.take(d.ten_J, t)
    return qfrc


def gravcomp_on(m: Model) -> bool:
    """Static: `gravcomp_force` computes forces for `m` (gravity on, a body with gravcomp); else they are zero."""
    return not (m.opt.disableflags & DisableBit.GRAVITY) and m.nbody >= 2 and m.ngravcomp > 0


def joint_terms_only(m: Model, tendons: bool = False) -> bool:
    """Static: `passive` computes only joint springs, dof dampers and the actuator damping of joint transmissions
    for `m` (no tendon, flex, plastic springs, gravity compensation, fluid or adhesion terms; springs and dampers
    not both disabled); with `tendons`, tendon springs and dampers and the actuator damping of tendon transmissions
    too."""
    flags = m.opt.disableflags
    off = (flags & DisableBit.SPRING) and (flags & DisableBit.DAMPER)
    return (not off and (tendons or m.ntendon == 0) and m.nflexedge == 0 and m.nplastic == 0
            and not gravcomp_on(m) and not fluid.traced(m) and not constraint.adhesion_on(m))  # fmt: skip


def gravcomp_force(m: Model, d: Data) -> jax.Array:
    """qfrc_gravcomp (nv,): -gravity * mass * gravcomp applied at each body's com (zero if gravity disabled)."""
    dtype = d.qpos.dtype
    # as MuJoCo: nothing to do when the compiled model has no body with gravcomp (m.ngravcomp == 0)
    if not gravcomp_on(m):
        return jp.zeros((m.nv,), dtype)
    bodies = np.arange(1, m.nbody)
    f = -m.opt.gravity[None, :] * (m.body_mass[bodies] * m.body_gravcomp[bodies])[:, None]
    return apply_ft(m, d, f, jp.zeros_like(f), d.xipos[bodies], bodies)


def gravcomp_dof_mask(m: Model, actuated: bool) -> np.ndarray:
    """Static (nv,) bool: dofs whose joint routes gravcomp to actuators (actuated) or to passive forces."""
    mask = np.zeros(m.nv, bool)
    for j in range(m.njnt):
        if bool(m.jnt_actgravcomp[j]) == actuated:
            nd = JointType(int(m.jnt_type[j])).dof_width()
            mask[m.jnt_dofadr[j] : m.jnt_dofadr[j] + nd] = True
    return mask


def passive(m: Model, d: Data) -> Data:
    """Passive forces: qfrc_spring, qfrc_damper, qfrc_gravcomp, qfrc_fluid, qfrc_adhesion, qfrc_passive (each
    (nv,))."""
    dtype = d.qpos.dtype
    zero = jp.zeros((m.nv,), dtype)
    flags = m.opt.disableflags
    if (flags & DisableBit.SPRING) and (flags & DisableBit.DAMPER):
        return d.replace(qfrc_spring=zero, qfrc_damper=zero, qfrc_gravcomp=zero, qfrc_fluid=zero, qfrc_adhesion=zero,
                         qfrc_passive=zero)  # fmt: skip
    spring = zero if flags & DisableBit.SPRING else _springs(m, d)
    damper = zero if flags & DisableBit.DAMPER else _dampers(m, d)
    gravcomp = gravcomp_force(m, d)
    qfluid = fluid.fluid(m, d)
    adhesion = constraint.adhesion_force(m, d)
    total = spring + damper + qfluid + adhesion + gravcomp * jp.asarray(gravcomp_dof_mask(m, False), dtype)
    return d.replace(qfrc_spring=spring, qfrc_damper=damper, qfrc_gravcomp=gravcomp, qfrc_fluid=qfluid,
                     qfrc_adhesion=adhesion, qfrc_passive=total)  # fmt: skip


__all__ = ["passive", "gravcomp_force", "gravcomp_dof_mask", "gravcomp_on", "joint_terms_only"]
