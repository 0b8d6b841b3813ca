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
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.config import quaternion_ops
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


class _QuatOps(NamedTuple):
    """The quaternion functions of one `Config.quaternion_ops` formulation (same values to round-off)."""

    mul: Callable  # (..., 4), (..., 4) -> (..., 4)
    rotate: Callable  # v (..., 3), q (..., 4) -> (..., 3)
    to_mat: Callable  # (..., 4) -> (..., 3, 3)


_QUAT_OPS = {
    "einsum": _QuatOps(math.quat_mul_c, math.rotate_c, math.quat_to_mat_c),
    "elementwise": _QuatOps(math.quat_mul, math.rotate, math.quat_to_mat),
}


def _quat_ops(m: Model) -> _QuatOps:
    return _QUAT_OPS[quaternion_ops(m.config)]


def _mat_vec(mat: jax.Array, v: jax.Array) -> jax.Array:
    return jp.einsum("...ij,...j->...i", mat, v, precision=jax.lax.Precision.HIGHEST)


def _compose(ops: _QuatOps, a: jax.Array, b: jax.Array) -> jax.Array:
    """Rigid transform composition a o b of poses (..., 7) = [pos, quat]."""
    return jp.concatenate([a[..., :3] + ops.rotate(b[..., :3], a[..., 3:]), ops.mul(a[..., 3:], b[..., 3:])], axis=-1)


def _local_to_global(ops, xpos, xquat, xmat, body, pos, quat, sameframe=None, xipos=None, ximat=None):
    """World frame of objects given in their body's frame (mj_local2Global).

    sameframe (static mjtSameFrame codes, optional): 1 body frame, 2 inertial frame, 3 body orientation,
    4 inertial orientation; MuJoCo then copies those frames (ignoring round-off-sized local offsets).
    """
    take = support.take
    xb, mb = take(xpos, body), take(xmat, body)
    gpos = xb + _mat_vec(mb, pos)
    gmat = ops.to_mat(ops.mul(take(xquat, body), quat))
    if sameframe is None:
        return gpos, gmat
    sf = np.asarray(sameframe)
    if np.any(sf == 1):
        gpos = jp.where(jp.asarray(sf == 1)[:, None], xb, gpos)
    if np.any((sf == 1) | (sf == 3)):
        gmat = jp.where(jp.asarray((sf == 1) | (sf == 3))[:, None, None], mb, gmat)
    if np.any(sf == 2):
        gpos = jp.where(jp.asarray(sf == 2)[:, None], take(xipos, body), gpos)
    if np.any((sf == 2) | (sf == 4)):
        gmat = jp.where(jp.asarray((sf == 2) | (sf == 4))[:, None, None], take(ximat, body), gmat)
    return gpos, gmat


def _joint_transforms(m: Model, d: Data, jnt: np.ndarray, ops: _QuatOps) -> jax.Array:
    """Poses (n, 7) of regular joints, in the frame that precedes each joint."""
    take = support.take
    jtype = np.asarray(m.jnt_type)[jnt]
    qadr = np.asarray(m.jnt_qposadr)[jnt]
    dtype = d.qpos.dtype
    axis, jpos = take(m.jnt_axis, jnt), take(m.jnt_pos, jnt)
    dq = take(d.qpos, qadr) - take(m.qpos0, qadr)
    quat = jp.zeros((jnt.size, 4), dtype).at[:, 0].set(1.0)
    if np.any(jtype == JointType.HINGE):
        quat = jp.where(jp.asarray(jtype == JointType.HINGE)[:, None], math.axis_angle_to_quat(axis, dq), quat)
    if np.any(jtype == JointType.BALL):
        ball = math.quat_normalize(take(d.qpos, np.minimum(qadr[:, None] + np.arange(4), m.nq - 1)))
        quat = jp.where(jp.asarray(jtype == JointType.BALL)[:, None], ball, quat)
    pos = jpos - ops.rotate(jpos, quat)  # rotation about the joint anchor
    if np.any(jtype == JointType.SLIDE):
        pos = jp.where(jp.asarray(jtype == JointType.SLIDE)[:, None], axis * dq[:, None], pos)
    return jp.concatenate([pos, quat], axis=-1)


def _body_frames(m: Model, d: Data):
    """xpos, xquat, xmat (nbody, ...) and xanchor, xaxis (njnt, 3).

    Each body's transform relative to its parent (body offset, then its joints in order) does not depend on the
    parent's pose, so it is computed for all bodies at once; only the composition with the parent runs level by
    level.
    """
    take, put = support.take, support.put
    plan = support.memo(m, "kinematics", _plan)
    ops = _quat_ops(m)
    dtype = d.qpos.dtype
    nb = m.nbody
    # body offsets (model or mocap), poses [pos, quat] relative to the parent; the compiler keeps MuJoCo's
    # unnormalised quaternions (orientation alternatives), normalised here as mju_normalize4 (zero -> identity)
    local = jp.concatenate([m.body_pos, math.quat_normalize(m.body_quat)], axis=-1)
    if m.nmocap:
        mb = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
        mid = np.asarray(m.body_mocapid)[mb]
        mocap = jp.concatenate([take(d.mocap_pos, mid), math.quat_normalize(take(d.mocap_quat, mid))], axis=-1)
        local = put(local, mb, mocap)
    # regular joints: accumulate per body, slot by slot; remember the frame before each joint
    pre = jp.zeros((m.njnt, 7), dtype)
    if plan.reg_jnt.size:
        jposes = _joint_transforms(m, d, plan.reg_jnt, ops)
        slot_of = np.full(m.njnt, -1)
        slot_of[plan.reg_jnt] = np.arange(plan.reg_jnt.size)
        for bodies, jnt in plan.slots:
            cur = take(local, bodies)
            pre = put(pre, jnt, cur)
            local = put(local, bodies, _compose(ops, cur, take(jposes, slot_of[jnt])))
    # free joints: world pose straight from qpos
    if plan.free_body.size:
        fq = take(d.qpos, np.asarray(m.jnt_qposadr)[plan.free_jnt][:, None] + np.arange(7))
        local = put(local, plan.free_body, fq)
    # compose with parents, level by level
    reparent = plan.free_body.size and np.any(np.asarray(m.body_parentid)[plan.free_body] > 0)
    is_free = np.zeros(nb, bool)
    is_free[plan.free_body] = True

    def step(parent, child):
        g = _compose(ops, parent, child)
        return jp.concatenate([g[:, :3], math.quat_normalize(g[:, 3:])], axis=-1)

    if reparent:  # a free joint below another body: its pose is a world pose
        local = jp.concatenate([local, jp.asarray(is_free, dtype)[:, None]], axis=-1)

        def step(parent, child):  # noqa: F811
            g = _compose(ops, parent, child[:, :7])
            g = jp.where(child[:, 7:] > 0, child[:, :7], g)
            return jp.concatenate([g[:, :3], math.quat_normalize(g[:, 3:]), child[:, 7:]], axis=-1)

    world = jp.concatenate([jp.zeros((1, 3), dtype), jp.ones((1, 1), dtype), jp.zeros((1, 3 + reparent), dtype)], 1)
    x = support.level_scan(m, support.put(local, np.array([0]), world), step)[:, :7]
    xpos, xquat = x[:, :3], x[:, 3:]
    xmat = ops.to_mat(xquat)
    # joint anchors and axes in the world frame
    xanchor = jp.zeros((m.njnt, 3), dtype)
    xaxis = jp.zeros((m.njnt, 3), dtype)
    if plan.reg_jnt.size:
        j = plan.reg_jnt
        parent = np.asarray(m.body_parentid)[np.asarray(m.jnt_bodyid)[j]]
        w = _compose(ops, take(x, parent), take(pre, j))
        xaxis = put(xaxis, j, ops.rotate(take(m.jnt_axis, j), w[:, 3:]))
        xanchor = put(xanchor, j, w[:, :3] + ops.rotate(take(m.jnt_pos, j), w[:, 3:]))
    if plan.free_body.size:
        xanchor = put(xanchor, plan.free_jnt, take(local, plan.free_body)[:, :3])
        xaxis = put(xaxis, plan.free_jnt, jp.asarray([0.0, 0.0, 1.0], dtype))
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
    pos, mat = _local_to_global(_quat_ops(m), xpos, xquat, xmat, body, m.cam_pos, m.cam_quat)
    needs_com = np.any((mode == 2) | ((mode == 4) & (target >= 0)))
    com = subtree_com_fn() if needs_com else None
    track = (mode == 1) | (mode == 2)
    if np.any(track):
        mat0 = jp.reshape(m.cam_mat0, (m.ncam, 3, 3))
        xb = support.take(xpos, body)
        base = xb if com is None else jp.where(jp.asarray(mode == 1)[:, None], xb, support.take(com, body))
        off = jp.where(jp.asarray(mode == 1)[:, None], m.cam_pos0, m.cam_poscom0)
        pos = jp.where(jp.asarray(track)[:, None], base + off, pos)
        mat = jp.where(jp.asarray(track)[:, None, None], mat0, mat)
    aim = ((mode == 3) | (mode == 4)) & (target >= 0)
    if np.any(aim):
        tgt = np.maximum(target, 0)
        xt = support.take(xpos, tgt)
        look = xt if com is None else jp.where(jp.asarray(mode == 3)[:, None], xt, support.take(com, tgt))
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
    l2g = functools.partial(_local_to_global, _quat_ops(m), xpos, xquat, xmat)
    xipos, ximat = l2g(np.arange(m.nbody), m.body_ipos, m.body_iquat, m.body_sameframe)
    xipos, ximat = (
        support.put(xipos, np.array([0]), 0.0),
        support.put(ximat, np.array([0]), jp.eye(3, dtype=xpos.dtype)),
    )
    gb, sb = np.asarray(m.geom_bodyid), np.asarray(m.site_bodyid)
    geom_xpos, geom_xmat = l2g(gb, m.geom_pos, m.geom_quat, m.geom_sameframe, xipos, ximat)
    site_xpos, site_xmat = l2g(sb, m.site_pos, m.site_quat, m.site_sameframe, xipos, ximat)
    cam_xpos, cam_xmat = _cameras(m, xpos, xquat, xmat, lambda: _subtree_com(m, xipos))
    return d.replace(
        xpos=xpos, xquat=xquat, xmat=xmat, xipos=xipos, ximat=ximat, xanchor=xanchor, xaxis=xaxis,
        geom_xpos=geom_xpos, geom_xmat=geom_xmat, site_xpos=site_xpos, site_xmat=site_xmat,
        cam_xpos=cam_xpos, cam_xmat=cam_xmat,
    )  # fmt: skip


# ---- com_pos ------------------------------------------------------------------------------------------------


def _inert_com(inertia, ximat, offset, mass):
    """Spatial inertia 10-vectors about a com point (mju_inertCom): (..., 3), (..., 3, 3), (..., 3), (...)."""
    rot = jp.einsum("...ij,...j,...kj->...ik", ximat, inertia, ximat, precision=jax.lax.Precision.HIGHEST)
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
    offset = d.xipos - support.take(subtree_com, rootid)
    cinert = _inert_com(m.body_inertia, d.ximat, offset, m.body_mass)
    cinert = support.put(cinert, np.array([0]), 0.0)
    if m.nv == 0:
        return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=jp.zeros((0, 6), d.xpos.dtype))
    dof_body = np.asarray(m.dof_bodyid)
    dof_jnt = np.asarray(m.dof_jntid)
    # per-dof axis: joint axis (hinge, slide), body-frame axis (ball, free rotation), world axis (free translation)
    cols = jp.swapaxes(d.xmat, 1, 2).reshape(m.nbody * 3, 3)
    body_axis = support.take(cols, dof_body * 3 + t.dof_axis)  # column dof_axis of the body's xmat
    world_axis = jp.asarray(np.eye(3)[t.dof_axis], d.xpos.dtype)
    kind = t.dof_kind
    jaxis = support.take(d.xaxis, dof_jnt)
    axis = jp.where(jp.asarray(kind == 2)[:, None], body_axis, world_axis)
    axis = jp.where(jp.asarray(kind <= 1)[:, None], jaxis, axis)
    off = support.take(subtree_com, rootid[dof_body]) - support.take(d.xanchor, dof_jnt)
    rotational = jp.asarray((kind == 0) | (kind == 2))[:, None]
    ang = jp.where(rotational, axis, 0.0)
    lin = jp.where(rotational, math.cross_c(axis, off), axis)
    cdof = jp.concatenate([ang, lin], axis=-1)
    return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=cdof)
