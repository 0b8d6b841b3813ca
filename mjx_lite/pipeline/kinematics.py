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
class _Slot:
    sub: np.ndarray  # (n,) indices into the level's body list
    jnt: np.ndarray  # (n,) joint ids
    qadr: np.ndarray  # (n,) qpos addresses
    types: frozenset  # joint types present


@dataclasses.dataclass(frozen=True)
class _Level:
    bodies: np.ndarray  # (nB,)
    parents: np.ndarray  # (nB,)
    mocap_sub: np.ndarray  # indices into bodies of mocap bodies
    mocap_id: np.ndarray  # their mocap ids
    free_sub: np.ndarray  # indices into bodies of bodies with a (single) free joint
    free_jnt: np.ndarray
    free_qadr: np.ndarray
    slots: tuple  # tuple of _Slot (regular joints: hinge, slide, ball)


def _plan(m: Model) -> tuple:
    t = support.tables(m)
    jntadr = np.asarray(m.body_jntadr)
    jntnum = np.asarray(m.body_jntnum)
    jtype = np.asarray(m.jnt_type)
    qposadr = np.asarray(m.jnt_qposadr)
    mocapid = np.asarray(m.body_mocapid)
    levels = []
    for bodies, parents in t.body_levels:
        is_free = np.array([jntnum[b] == 1 and jtype[jntadr[b]] == JointType.FREE for b in bodies], bool)
        if bodies.size and np.any([jtype[j] == JointType.FREE for b in bodies[~is_free]
                                   for j in range(jntadr[b], jntadr[b] + jntnum[b])]):  # fmt: skip
            raise ValueError("a free joint must be the only joint of its body")
        is_mocap = mocapid[bodies] >= 0
        free_sub = np.nonzero(is_free)[0]
        slots = []
        reg = ~is_free
        for s in range(int(jntnum[bodies[reg]].max(initial=0))):
            sub = np.nonzero(reg & (jntnum[bodies] > s))[0]
            jnt = jntadr[bodies[sub]] + s
            slots.append(_Slot(sub, jnt, qposadr[jnt], frozenset(int(x) for x in jtype[jnt])))
        levels.append(
            _Level(
                bodies=bodies, parents=parents, mocap_sub=np.nonzero(is_mocap)[0],
                mocap_id=mocapid[bodies[is_mocap]], free_sub=free_sub, free_jnt=jntadr[bodies[free_sub]],
                free_qadr=qposadr[jntadr[bodies[free_sub]]], slots=tuple(slots),
            )  # fmt: skip
        )
    return tuple(levels)


# ---- kinematics ---------------------------------------------------------------------------------------------


def _mat_vec(mat: jax.Array, v: jax.Array) -> jax.Array:
    return jp.einsum("...ij,...j->...i", mat, v)


def _local_to_global(xpos, xquat, xmat, body, pos, quat):
    """World frame of objects given in their body's frame (mj_local2Global)."""
    gpos = xpos[body] + _mat_vec(xmat[body], pos)
    gmat = math.quat_to_mat(math.quat_mul(xquat[body], quat))
    return gpos, gmat


def _body_frames(m: Model, d: Data):
    """xpos, xquat, xmat (nbody, ...) and xanchor, xaxis (njnt, 3), level by level."""
    dtype = d.qpos.dtype
    nb = m.nbody
    xpos = jp.zeros((nb, 3), dtype)
    xquat = jp.zeros((nb, 4), dtype).at[:, 0].set(1.0)
    xmat = jp.broadcast_to(jp.eye(3, dtype=dtype), (nb, 3, 3))
    xanchor = jp.zeros((m.njnt, 3), dtype)
    xaxis = jp.zeros((m.njnt, 3), dtype)
    qpos, qpos0 = d.qpos, m.qpos0
    for lv in support.memo(m, "kinematics", _plan):
        b = lv.bodies
        lpos = m.body_pos[b]
        lquat = m.body_quat[b]
        if lv.mocap_sub.size:
            lpos = lpos.at[lv.mocap_sub].set(d.mocap_pos[lv.mocap_id])
            lquat = lquat.at[lv.mocap_sub].set(math.quat_normalize(d.mocap_quat[lv.mocap_id]))
        pos = xpos[lv.parents] + _mat_vec(xmat[lv.parents], lpos)
        quat = math.quat_mul(xquat[lv.parents], lquat)
        for s in lv.slots:
            p, q = pos[s.sub], quat[s.sub]
            jaxis, jpos = m.jnt_axis[s.jnt], m.jnt_pos[s.jnt]
            axis = math.rotate(jaxis, q)
            anchor = math.rotate(jpos, q) + p
            new_p, new_q = p, q
            rot_types = s.types & {JointType.HINGE, JointType.BALL}
            if JointType.SLIDE in s.types:
                is_slide = jp.asarray(np.asarray(m.jnt_type)[s.jnt] == JointType.SLIDE)[:, None]
                dq = (qpos[s.qadr] - qpos0[s.qadr])[:, None]
                new_p = jp.where(is_slide, p + axis * dq, p)
            if rot_types:
                qloc = None
                if JointType.HINGE in s.types:
                    qloc = math.axis_angle_to_quat(jaxis, qpos[s.qadr] - qpos0[s.qadr])
                if JointType.BALL in s.types:
                    idx = np.minimum(s.qadr[:, None] + np.arange(4), m.nq - 1)
                    ball = math.quat_normalize(qpos[idx])
                    if qloc is None:
                        qloc = ball
                    else:
                        is_ball = jp.asarray(np.asarray(m.jnt_type)[s.jnt] == JointType.BALL)[:, None]
                        qloc = jp.where(is_ball, ball, qloc)
                rq = math.quat_mul(q, qloc)
                rp = anchor - math.rotate(jpos, rq)
                if JointType.SLIDE in s.types:
                    is_rot = ~is_slide
                    new_q = jp.where(is_rot, rq, q)
                    new_p = jp.where(is_rot, rp, new_p)
                else:
                    new_p, new_q = rp, rq
            pos = pos.at[s.sub].set(new_p)
            quat = quat.at[s.sub].set(new_q)
            xanchor = xanchor.at[s.jnt].set(anchor)
            xaxis = xaxis.at[s.jnt].set(axis)
        if lv.free_sub.size:
            fq = qpos[lv.free_qadr[:, None] + np.arange(7)]
            pos = pos.at[lv.free_sub].set(fq[:, :3])
            quat = quat.at[lv.free_sub].set(fq[:, 3:])
            xanchor = xanchor.at[lv.free_jnt].set(fq[:, :3])
            xaxis = xaxis.at[lv.free_jnt].set(jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dtype), (lv.free_jnt.size, 3)))
        quat = math.quat_normalize(quat)
        xpos = xpos.at[b].set(pos)
        xquat = xquat.at[b].set(quat)
        xmat = xmat.at[b].set(math.quat_to_mat(quat))
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
        x, _ = math.safe_normalize(jp.cross(up, z))
        y, _ = math.safe_normalize(jp.cross(z, x))
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
    lin = jp.where(rotational, jp.cross(axis, off), axis)
    cdof = jp.concatenate([ang, lin], axis=-1)
    return d.replace(subtree_com=subtree_com, cinert=cinert, cdof=cdof)
