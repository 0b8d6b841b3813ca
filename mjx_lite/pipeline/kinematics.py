"""Forward kinematics (mj_kinematics, mj_camlight) and com-frame quantities (mj_comPos).

kinematics(m, d): xpos (nbody, 3), xquat (nbody, 4), xmat (nbody, 3, 3), xipos, ximat, xanchor (njnt, 3),
  xaxis (njnt, 3), geom_xpos/xmat, site_xpos/xmat, cam_xpos/xmat.
  Quaternions in qpos (free, ball) and mocap_quat are normalised where they are used, as MuJoCo 4 does;
  `d.qpos` and `d.mocap_quat` themselves are left unchanged (mj_kinematics no longer writes them).
  Cameras: all modes (fixed, track, trackcom, targetbody, targetbodycom). The com-based modes need
  subtree_com, which kinematics computes itself (the same sweep as com_pos) only when such a camera exists.
com_pos(m, d): subtree_com (nbody, 3), cinert (nbody, 10), cdof (nv, 6).

Bodies are processed level by level (tree depth), joints of one level slot by slot (the k-th joint of every
body of the level at once), so the traced graph grows with depth and joints-per-body, not with body count.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.pipeline import support
from mjx_lite.types import MINVAL, Data, JointType, Model

# ---- static plan --------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Plan:
    slots: tuple  # per joint slot s: (bodies having > s regular joints, their s-th joint ids)
    reg_jnt: np.ndarray  # regular (hinge, slide, ball) joint ids
    free_body: np.ndarray  # bodies whose single joint is free
    free_jnt: np.ndarray
    levels: tuple  # per depth: (bodies, parents, is_free (nB,) bool or None)


def _plan(m: Model) -> _Plan:
    t = support.tables(m)
    jntadr = np.asarray(m.body_jntadr)
    jntnum = np.asarray(m.body_jntnum)
    jtype = np.asarray(m.jnt_type)
    nb = m.nbody
    is_free = np.array([jntnum[b] == 1 and jtype[jntadr[b]] == JointType.FREE for b in range(nb)], bool)
    reg_body = ~is_free
    for b in np.nonzero(reg_body)[0]:
        if np.any(jtype[jntadr[b] : jntadr[b] + jntnum[b]] == JointType.FREE):
            raise ValueError(f"body {b}: a free joint must be the only joint of its body")
    slots = []
    for s in range(int(jntnum[reg_body].max(initial=0))):
        bodies = np.nonzero(reg_body & (jntnum > s))[0]
        slots.append((bodies, jntadr[bodies] + s))
    reg_jnt = np.nonzero(jtype != JointType.FREE)[0]
    free_body = np.nonzero(is_free)[0]
    levels = tuple((b, p, is_free[b] if is_free[b].any() else None) for b, p in t.body_levels)
    return _Plan(tuple(slots), reg_jnt, free_body, jntadr[free_body], levels)


# ---- kinematics ---------------------------------------------------------------------------------------------


def _mat_vec(mat: jax.Array, v: jax.Array) -> jax.Array:
    return jp.einsum("...ij,...j->...i", mat, v)


def _compose(p1, q1, p2, q2):
    """Rigid transform composition (p1, q1) o (p2, q2)."""
    return p1 + math.rotate_c(p2, q1), math.quat_mul_c(q1, q2)


def _local_to_global(xpos, xquat, xmat, body, pos, quat):
    """World frame of objects given in their body's frame (mj_local2Global)."""
    gpos = xpos[body] + _mat_vec(xmat[body], pos)
    gmat = math.quat_to_mat_c(math.quat_mul_c(xquat[body], quat))
    return gpos, gmat


def _joint_transforms(m: Model, d: Data, jnt: np.ndarray):
    """Transforms (pos (n, 3), quat (n, 4)) of regular joints, in the frame that precedes each joint."""
    jtype = np.asarray(m.jnt_type)[jnt]
    qadr = np.asarray(m.jnt_qposadr)[jnt]
    dtype = d.qpos.dtype
    axis, jpos = m.jnt_axis[jnt], m.jnt_pos[jnt]
    dq = d.qpos[qadr] - m.qpos0[qadr]
    quat = jp.zeros((jnt.size, 4), dtype).at[:, 0].set(1.0)
    if np.any(jtype == JointType.HINGE):
        quat = jp.where(jp.asarray(jtype == JointType.HINGE)[:, None], math.axis_angle_to_quat(axis, dq), quat)
    if np.any(jtype == JointType.BALL):
        ball = math.quat_normalize(d.qpos[np.minimum(qadr[:, None] + np.arange(4), m.nq - 1)])
        quat = jp.where(jp.asarray(jtype == JointType.BALL)[:, None], ball, quat)
    pos = jpos - math.rotate_c(jpos, quat)  # rotation about the joint anchor
    if np.any(jtype == JointType.SLIDE):
        pos = jp.where(jp.asarray(jtype == JointType.SLIDE)[:, None], axis * dq[:, None], pos)
    return pos, quat


def _body_frames(m: Model, d: Data):
    """xpos, xquat, xmat (nbody, ...) and xanchor, xaxis (njnt, 3).

    Each body's transform relative to its parent (body offset, then its joints in order) does not depend on the
    parent's pose, so it is computed for all bodies at once; only the composition with the parent runs level by
    level.
    """
    plan = support.memo(m, "kinematics", _plan)
    dtype = d.qpos.dtype
    nb = m.nbody
    # body offsets (model or mocap)
    lpos, lquat = m.body_pos, m.body_quat
    if m.nmocap:
        mb = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
        mid = np.asarray(m.body_mocapid)[mb]
        lpos = lpos.at[mb].set(d.mocap_pos[mid])
        lquat = lquat.at[mb].set(math.quat_normalize(d.mocap_quat[mid]))
    # regular joints: accumulate per body, slot by slot; remember the frame before each joint
    pre_pos = jp.zeros((m.njnt, 3), dtype)
    pre_quat = jp.zeros((m.njnt, 4), dtype)
    if plan.reg_jnt.size:
        jpos_all, jquat_all = _joint_transforms(m, d, plan.reg_jnt)
        slot_of = np.full(m.njnt, -1)
        slot_of[plan.reg_jnt] = np.arange(plan.reg_jnt.size)
        for bodies, jnt in plan.slots:
            pre_pos = pre_pos.at[jnt].set(lpos[bodies])
            pre_quat = pre_quat.at[jnt].set(lquat[bodies])
            p, q = _compose(lpos[bodies], lquat[bodies], jpos_all[slot_of[jnt]], jquat_all[slot_of[jnt]])
            lpos = lpos.at[bodies].set(p)
            lquat = lquat.at[bodies].set(q)
    # free joints: world pose straight from qpos
    if plan.free_body.size:
        fq = d.qpos[np.asarray(m.jnt_qposadr)[plan.free_jnt][:, None] + np.arange(7)]
        lpos = lpos.at[plan.free_body].set(fq[:, :3])
        lquat = lquat.at[plan.free_body].set(fq[:, 3:])
    # compose with parents, level by level
    xpos = jp.zeros((nb, 3), dtype)
    xquat = jp.zeros((nb, 4), dtype).at[:, 0].set(1.0)
    for bodies, parents, is_free in plan.levels:
        p, q = _compose(xpos[parents], xquat[parents], lpos[bodies], lquat[bodies])
        if is_free is not None:
            f = jp.asarray(is_free)[:, None]
            p = jp.where(f, lpos[bodies], p)
            q = jp.where(f, lquat[bodies], q)
        xpos = xpos.at[bodies].set(p)
        xquat = xquat.at[bodies].set(math.quat_normalize(q))
    xmat = math.quat_to_mat_c(xquat)
    # joint anchors and axes in the world frame
    xanchor = jp.zeros((m.njnt, 3), dtype)
    xaxis = jp.zeros((m.njnt, 3), dtype)
    if plan.reg_jnt.size:
        j = plan.reg_jnt
        parent = np.asarray(m.body_parentid)[np.asarray(m.jnt_bodyid)[j]]
        wp, wq = _compose(xpos[parent], xquat[parent], pre_pos[j], pre_quat[j])
        xaxis = xaxis.at[j].set(math.rotate_c(m.jnt_axis[j], wq))
        xanchor = xanchor.at[j].set(wp + math.rotate_c(m.jnt_pos[j], wq))
    if plan.free_body.size:
        xanchor = xanchor.at[plan.free_jnt].set(lpos[plan.free_body])
        xaxis = xaxis.at[plan.free_jnt].set(jp.asarray([0.0, 0.0, 1.0], dtype))
    return xpos, xquat, xmat, xanchor, xaxis


def _subtree_com(m: Model, xipos: jax.Array) -> jax.Array:
    """Subtree centres of mass (nbody, 3), as mj_comPos (subtree mass from body_mass)."""
    mass = m.body_mass
    msum = support.subtree_sum(m, mass)
    wsum = support.subtree_sum(m, xipos * mass[:, None])
    small = msum < MINVAL
    return jp.where(small[:, None], xipos, wsum / jp.where(small, 1.0, msum)[:, None])


def _cameras(m: Model, xpos, xquat, xmat, subtree_com_fn):
    """cam_xpos (ncam, 3), cam_xmat (ncam, 3, 3) for all camera modes (mj_camlight)."""
    dtype = xpos.dtype
    if m.ncam == 0:
        return jp.zeros((0, 3), dtype), jp.zeros((0, 3, 3), dtype)
    body = np.asarray(m.cam_bodyid)
    mode = np.asarray(m.cam_mode)
    target = np.asarray(m.cam_targetbodyid)
    pos, mat = _local_to_global(xpos, xquat, xmat, body, m.cam_pos, m.cam_quat)
    needs_com = np.any((mode == 2) | ((mode == 4) & (target >= 0)))
    com = subtree_com_fn() if needs_com else None
    track = (mode == 1) | (mode == 2)
    if np.any(track):
        mat0 = jp.reshape(m.cam_mat0, (m.ncam, 3, 3))
        base = xpos[body] if com is None else jp.where(jp.asarray(mode == 1)[:, None], xpos[body], com[body])
        off = jp.where(jp.asarray(mode == 1)[:, None], m.cam_pos0, m.cam_poscom0)
        pos = jp.where(jp.asarray(track)[:, None], base + off, pos)
        mat = jp.where(jp.asarray(track)[:, None, None], mat0, mat)
    aim = ((mode == 3) | (mode == 4)) & (target >= 0)
    if np.any(aim):
        tgt = np.maximum(target, 0)
        look = xpos[tgt] if com is None else jp.where(jp.asarray(mode == 3)[:, None], xpos[tgt], com[tgt])
        z, _ = math.safe_normalize(pos - look)
        up = jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dtype), z.shape)
        x, _ = math.safe_normalize(math.cross_c(up, z))
        y, _ = math.safe_normalize(math.cross_c(z, x))
        amat = jp.stack([x, y, z], axis=-1)  # columns
        mat = jp.where(jp.asarray(aim)[:, None, None], amat, mat)
    return pos, mat


def kinematics(m: Model, d: Data) -> Data:
    """Forward kinematics (mj_kinematics + mj_camlight cameras). See the module docstring for outputs."""
    xpos, xquat, xmat, xanchor, xaxis = _body_frames(m, d)
    xipos, ximat = _local_to_global(xpos, xquat, xmat, np.arange(m.nbody), m.body_ipos, m.body_iquat)
    gb = np.asarray(m.geom_bodyid)
    geom_xpos, geom_xmat = _local_to_global(xpos, xquat, xmat, gb, m.geom_pos, m.geom_quat)
    sb = np.asarray(m.site_bodyid)
    site_xpos, site_xmat = _local_to_global(xpos, xquat, xmat, sb, m.site_pos, m.site_quat)
    cam_xpos, cam_xmat = _cameras(m, xpos, xquat, xmat, lambda: _subtree_com(m, xipos))
    return d.replace(
        xpos=xpos, xquat=xquat, xmat=xmat, xipos=xipos, ximat=ximat, xanchor=xanchor, xaxis=xaxis,
        geom_xpos=geom_xpos, geom_xmat=geom_xmat, site_xpos=site_xpos, site_xmat=site_xmat,
        cam_xpos=cam_xpos, cam_xmat=cam_xmat,
    )  # fmt: skip


# ---- com_pos ------------------------------------------------------------------------------------------------


def _inert_com(inertia, ximat, offset, mass):
    """Spatial inertia 10-vectors about a com point (mju_inertCom): (..., 3), (..., 3, 3), (..., 3), (...)."""
    rot = jp.einsum("...ij,...j,...kj->...ik", ximat, inertia, ximat)
    dd = jp.sum(offset * offset, axis=-1)
    eye = jp.eye(3, dtype=offset.dtype)
    full = rot + mass[..., None, None] * (dd[..., None, None] * eye - offset[..., :, None] * offset[..., None, :])
    return jp.concatenate(
        [full[..., 0, 0:1], full[..., 1, 1:2], full[..., 2, 2:3], full[..., 0, 1:2], full[..., 0, 2:3],
         full[..., 1, 2:3], mass[..., None] * offset, mass[..., None]], axis=-1)  # fmt: skip


def com_pos(m: Model, d: Data) -> Data:
    """subtree_com (nbody, 3), cinert (nbody, 10), cdof (nv, 6) (mj_comPos). Needs kinematics."""
    t = support.tables(m)
    subtree_com = _subtree_com(m, d.xipos)
    rootid = np.asarray(m.body_rootid)
    offset = d.xipos - subtree_com[rootid]
    cinert = _inert_com(m.body_inertia, d.ximat, offset, m.body_mass)
    cinert = cinert.at[0].set(0.0)
    if m.nv == 0:
        return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=jp.zeros((0, 6), d.xpos.dtype))
    dof_body = np.asarray(m.dof_bodyid)
    dof_jnt = np.asarray(m.dof_jntid)
    # per-dof axis: joint axis (hinge, slide), body-frame axis (ball, free rotation), world axis (free translation)
    body_axis = d.xmat[dof_body][np.arange(m.nv), :, t.dof_axis]  # column dof_axis of the body's xmat
    world_axis = jp.asarray(np.eye(3)[t.dof_axis], d.xpos.dtype)
    kind = t.dof_kind
    axis = jp.where(jp.asarray(kind <= 1)[:, None], d.xaxis[dof_jnt], jp.where(jp.asarray(kind == 2)[:, None], body_axis,
                                                                              world_axis))  # fmt: skip
    off = subtree_com[rootid[dof_body]] - d.xanchor[dof_jnt]
    rotational = jp.asarray((kind == 0) | (kind == 2))[:, None]
    ang = jp.where(rotational, axis, 0.0)
    lin = jp.where(rotational, math.cross_c(axis, off), axis)
    cdof = jp.concatenate([ang, lin], axis=-1)
    return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=cdof)
