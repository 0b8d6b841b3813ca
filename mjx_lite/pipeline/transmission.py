"""Actuator transmissions (mj_transmission): actuator_length (nout,), dense actuator_moment (nout, nv).

Actuators are grouped by (static) transmission type and each group is computed vectorised, then scattered
into the outputs (one row per force output, at actuator_outadr). Supported: joint and jointinparent (slide, hinge,
ball, free), slidercrank, tendon, site (with and without refsite), body (adhesion: average contact-normal
Jacobian over the body's contacts) and so3 (orientation servos: 3 rows, see `_so3`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.pipeline import constraint
from mjx_lite.pipeline.tendon import point_jac
from mjx_lite.types import ConeType, Data, JointType, Model, TrnType


def _quat2vel(q: jax.Array) -> jax.Array:
    """mju_quat2Vel(q, dt=1): rotation vector of a unit quaternion, angle wrapped to (-pi, pi]."""
    axis, s = mjm.safe_normalize(q[..., 1:])
    angle = 2.0 * jp.arctan2(s, q[..., 0])
    angle = jp.where(angle > jp.pi, angle - 2 * jp.pi, angle)
    return axis * angle[..., None]


def _common_dof_chain(m: Model, s0: int, s1: int) -> np.ndarray:
    """Static (nv,) bool: dofs on the ancestral chain of the deepest dof common to two sites' bodies."""
    parent = np.asarray(m.dof_parentid)
    b0 = int(m.body_weldid[m.site_bodyid[s0]])
    b1 = int(m.body_weldid[m.site_bodyid[s1]])
    d0 = int(m.body_dofadr[b0] + m.body_dofnum[b0] - 1)
    d1 = int(m.body_dofadr[b1] + m.body_dofnum[b1] - 1)
    mask = np.zeros(m.nv, bool)
    if m.body_dofnum[b0] == 0 or m.body_dofnum[b1] == 0 or d0 < 0 or d1 < 0:
        return mask
    while d0 != d1:
        if d0 < d1:
            d1 = int(parent[d1])
        else:
            d0 = int(parent[d0])
        if d0 == -1 or d1 == -1:
            return mask
    da = d0
    while da >= 0:
        mask[da] = True
        da = int(parent[da])
    return mask


def _body_moment(m: Model, d: Data, body: int) -> jax.Array:
    """Adhesion moment of a body transmission: minus the mean contact-normal Jacobian, (nv,)."""
    dtype = d.qpos.dtype
    con = d.contact
    nc = con.dist.shape[0]
    if nc == 0 or m.nv == 0:
        return jp.zeros((m.nv,), dtype)
    gb = jp.asarray(np.asarray(m.geom_bodyid), jp.int32)
    g1, g2 = con.geom[:, 0], con.geom[:, 1]
    b1 = gb[jp.clip(g1, 0, m.ngeom - 1)]
    b2 = gb[jp.clip(g2, 0, m.ngeom - 1)]
    relevant = con.active & (g1 >= 0) & (g2 >= 0) & ((b1 == body) | (b2 == body))
    has_rows = con.efc_address >= 0  # not excluded (in the margin-gap band: no constraint rows)
    incl = relevant & has_rows
    excl = relevant & ~has_rows
    counter = jp.sum(relevant.astype(dtype))

    # included contacts: weights on their efc rows (normal row, or the average of the pyramid edges)
    nj = d.efc_J.shape[0]
    moment = jp.zeros((m.nv,), dtype)
    if nj:
        npyr = jp.maximum(con.dim - 1, 1)
        single = (con.dim == 1) | (m.opt.cone == ConeType.ELLIPTIC)
        kmax = 2 * 5  # condim <= 6: at most 10 pyramid edges
        k = jp.arange(kmax)
        nrow = jp.where(single, 1, 2 * npyr)
        w = jp.where(single, 1.0, 0.5 / npyr).astype(dtype)
        rows = con.efc_address[:, None] + k[None, :]
        valid = incl[:, None] & (k[None, :] < nrow[:, None])
        rows = jp.where(valid, rows, nj)
        efc_w = (
            jp.zeros((nj,), dtype)
            .at[rows.reshape(-1)]
            .add(jp.broadcast_to(w[:, None], rows.shape).reshape(-1), mode="drop")
        )
        moment = constraint.jt_mul(m, d, efc_w)  # efc_J' w in either efc_J layout

    # excluded contacts: normal projection of the Jacobian difference at the contact point
    # (body 2 minus body 1), computed against every body with masks since geom ids are traced.
    allb = np.arange(m.nbody)
    pts = jp.repeat(con.pos, m.nbody, axis=0)
    jacp, _ = point_jac(m, d, pts, np.tile(allb, nc))
    jacp = jacp.reshape(nc, m.nbody, 3, m.nv)
    sel1 = jax.nn.one_hot(b1, m.nbody, dtype=dtype)
    sel2 = jax.nn.one_hot(b2, m.nbody, dtype=dtype)
    jdif = jp.einsum("cb,cbkv->ckv", sel2 - sel1, jacp)
    proj = jp.einsum("ck,ckv->cv", con.frame[:, 0, :], jdif)
    moment = moment + jp.sum(proj * excl[:, None].astype(dtype), axis=0)
    return jp.where(counter > 0, -moment / jp.where(counter > 0, counter, 1.0), 0.0)


def _so3(m: Model, d: Data, ids: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Lengths (n, 3) and moment rows (n, 3, nv) of so3 transmissions `ids` (static), as MuJoCo 4's mjTRN_SO3:
    on a ball joint the rotation vector of its (normalised) quaternion and the identity on its dofs; on a site
    with a refsite the rotation vector of q_ref^-1 q_site (the sites' world quaternions, xquat * site_quat), and
    the rows of the site frame's axes projected on the relative rotational Jacobian (the
    columns of the dofs both sites share cleared). Gear is not applied."""
    trnid = np.asarray(m.actuator_trnid)[ids]
    dtype = d.qpos.dtype
    lengths = jp.zeros((len(ids), 3), dtype)
    rows = jp.zeros((len(ids), 3, m.nv), dtype)
    ball = np.nonzero(trnid[:, 1] < 0)[0]
    if len(ball):
        j = trnid[ball, 0]
        quat = mjm.quat_normalize(d.qpos[np.asarray(m.jnt_qposadr)[j][:, None] + np.arange(4)])
        lengths = lengths.at[ball].set(mjm.quat_to_rotvec(quat))
        eye = np.zeros((len(ball), 3, m.nv))
        for n, dof in enumerate(np.asarray(m.jnt_dofadr)[j]):
            eye[n, np.arange(3), dof + np.arange(3)] = 1.0
        rows = rows.at[ball].set(jp.asarray(eye, dtype))
    site = np.nonzero(trnid[:, 1] >= 0)[0]
    if len(site):
        s0, s1 = trnid[site, 0], trnid[site, 1]
        body = np.asarray(m.site_bodyid)
        q0 = mjm.quat_mul(d.xquat[body[s0]], m.site_quat[s0])
        q1 = mjm.quat_mul(d.xquat[body[s1]], m.site_quat[s1])
        lengths = lengths.at[site].set(mjm.quat_to_rotvec(mjm.quat_mul(mjm.quat_conj(q1), q0)))
        keep = jp.asarray(~np.stack([_common_dof_chain(m, int(x), int(y)) for x, y in zip(s0, s1)]), dtype)
        _, jacr = point_jac(m, d, d.site_xpos[s0], body[s0])
        _, rjacr = point_jac(m, d, d.site_xpos[s1], body[s1])
        jr = (jacr - rjacr) * keep[:, None, :]
        rows = rows.at[site].set(jp.einsum("nik,niv->nkv", d.site_xmat[s0], jr))
    return lengths, rows


def transmission(m: Model, d: Data) -> Data:
    """Actuator lengths and moments (mj_transmission): actuator_length (nout,), actuator_moment (nout, nv)."""
    nu, nv = m.nactuator, m.nv
    if nu == 0:
        return d
    dtype = d.qpos.dtype
    length = jp.zeros((nu,), dtype)
    moment = jp.zeros((nu, nv), dtype)
    trntype = np.asarray(m.actuator_trntype)
    trnid = np.asarray(m.actuator_trnid)
    outadr = np.asarray(m.actuator_outadr)
    multi = m.nout != nu  # some actuator has several outputs (so3): per-actuator rows below, scattered at the end
    gear = m.actuator_gear[outadr] if multi else m.actuator_gear
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    dadr = np.asarray(m.jnt_dofadr)

    # joint / jointinparent
    isjnt = (trntype == TrnType.JOINT) | (trntype == TrnType.JOINTINPARENT)
    jid = np.where(isjnt, trnid[:, 0], 0)
    jt = jtype[jid] if m.njnt else np.full(nu, -1)  # a model without joints (tendon or site actuators only)
    scalar = np.nonzero(isjnt & np.isin(jt, [JointType.SLIDE, JointType.HINGE]))[0]
    if len(scalar):
        j = jid[scalar]
        g0 = gear[scalar, 0]
        length = length.at[scalar].set(d.qpos[qadr[j]] * g0)
        moment = moment.at[scalar, dadr[j]].set(g0)
    ball = np.nonzero(isjnt & (jt == JointType.BALL))[0]
    if len(ball):
        j = jid[ball]
        quat = mjm.quat_normalize(d.qpos[qadr[j][:, None] + np.arange(4)])
        axis = _quat2vel(quat)
        inparent = jp.asarray(trntype[ball] == TrnType.JOINTINPARENT)[:, None]
        gaxis = jp.where(inparent, mjm.rotate(gear[ball, :3], mjm.quat_conj(quat)), gear[ball, :3])
        length = length.at[ball].set(jp.sum(axis * gaxis, -1))
        moment = moment.at[ball[:, None], dadr[j][:, None] + np.arange(3)].set(gaxis)
    free = np.nonzero(isjnt & (jt == JointType.FREE))[0]
    if len(free):
        j = jid[free]
        quat = mjm.quat_normalize(d.qpos[qadr[j][:, None] + 3 + np.arange(4)])
        inparent = jp.asarray(trntype[free] == TrnType.JOINTINPARENT)[:, None]
        gaxis = jp.where(inparent, mjm.rotate(gear[free, 3:], mjm.quat_conj(quat)), gear[free, 3:])
        length = length.at[free].set(0.0)
        cols = dadr[j][:, None] + np.arange(6)
        moment = moment.at[free[:, None], cols].set(jp.concatenate([gear[free, :3], gaxis], -1))

    # tendon
    ten = np.nonzero(trntype == TrnType.TENDON)[0]
    if len(ten):
        t = trnid[ten, 0]
        g0 = gear[ten, 0]
        length = length.at[ten].set(d.ten_length[t] * g0)
        moment = moment.at[ten].set(d.ten_J[t] * g0[:, None])

    # slider-crank
    sc = np.nonzero(trntype == TrnType.SLIDERCRANK)[0]
    if len(sc):
        crank = trnid[sc, 0]
        slider = trnid[sc, 1]
        rod = m.actuator_cranklength[sc]
        axis = d.site_xmat[slider][:, :, 2]
        vec = d.site_xpos[crank] - d.site_xpos[slider]
        av = jp.sum(vec * axis, -1)
        det = av * av + rod * rod - jp.sum(vec * vec, -1)
        ok = det > 0
        sdet = jp.sqrt(jp.where(ok, det, 1.0))
        ln = jp.where(ok, av - sdet, av)
        fac = (1 - av / sdet)[:, None]
        dldv = jp.where(ok[:, None], axis * fac + vec / sdet[:, None], axis)
        dlda = jp.where(ok[:, None], vec * fac, vec)
        site_body = np.asarray(m.site_bodyid)
        pts = jp.concatenate([d.site_xpos[slider], d.site_xpos[crank]])
        jacp, jacr = point_jac(m, d, pts, np.concatenate([site_body[slider], site_body[crank]]))
        n = len(sc)
        jac_s, jacr_s, jac_c = jacp[:n], jacr[:n], jacp[n:]
        jac_a = jp.cross(jp.swapaxes(jacr_s, 1, 2), axis[:, None, :])  # (n, nv, 3): d axis / d qvel
        mom = jp.einsum("nk,nvk->nv", dlda, jac_a) + jp.einsum("nk,nkv->nv", dldv, jac_c - jac_s)
        g0 = gear[sc, 0]
        length = length.at[sc].set(ln * g0)
        moment = moment.at[sc].set(mom * g0[:, None])

    # site
    site = np.nonzero(trntype == TrnType.SITE)[0]
    if len(site):
        sid = trnid[site, 0]
        ref = trnid[site, 1]
        site_body = np.asarray(m.site_bodyid)
        jacp, jacr = point_jac(m, d, d.site_xpos[sid], site_body[sid])
        xmat = d.site_xmat[sid]
        noref = np.nonzero(ref == -1)[0]
        if len(noref):
            w_t = jp.einsum("nij,nj->ni", xmat[noref], gear[site[noref], :3])
            w_r = jp.einsum("nij,nj->ni", xmat[noref], gear[site[noref], 3:])
            mom = jp.einsum("nk,nkv->nv", w_t, jacp[noref]) + jp.einsum("nk,nkv->nv", w_r, jacr[noref])
            length = length.at[site[noref]].set(0.0)
            moment = moment.at[site[noref]].set(mom)
        withref = np.nonzero(ref != -1)[0]
        if len(withref):
            a = site[withref]
            s0, s1 = sid[withref], ref[withref]
            keep = jp.asarray(~np.stack([_common_dof_chain(m, int(x), int(y)) for x, y in zip(s0, s1)]), dtype)
            rjacp, rjacr = point_jac(m, d, d.site_xpos[s1], site_body[s1])
            rmat = d.site_xmat[s1]
            # translation
            vec = jp.einsum("nji,nj->ni", rmat, d.site_xpos[s0] - d.site_xpos[s1])
            ln = jp.sum(vec * gear[a, :3], -1)
            jt = (jacp[withref] - rjacp) * keep[:, None, :]
            w_t = jp.einsum("nij,nj->ni", rmat, gear[a, :3])
            mom = jp.einsum("nk,nkv->nv", w_t, jt)
            # rotation
            q0 = mjm.quat_mul(d.xquat[site_body[s0]], m.site_quat[s0])
            q1 = mjm.quat_mul(d.xquat[site_body[s1]], m.site_quat[s1])
            rvec = mjm.quat_sub(q0, q1)
            ln = ln + jp.sum(rvec * gear[a, 3:], -1)
            jr = (jacr[withref] - rjacr) * keep[:, None, :]
            w_r = jp.einsum("nij,nj->ni", rmat, gear[a, 3:])
            mom = mom + jp.einsum("nk,nkv->nv", w_r, jr)
            length = length.at[a].set(ln)
            moment = moment.at[a].set(mom)

    # body (adhesion)
    for i in np.nonzero(trntype == TrnType.BODY)[0]:
        length = length.at[i].set(0.0)
        moment = moment.at[i].set(_body_moment(m, d, int(trnid[i, 0])))

    so3 = np.nonzero(trntype == TrnType.SO3)[0]
    if multi or len(so3):
        single = np.nonzero(trntype != TrnType.SO3)[0]
        length = jp.zeros((m.nout,), dtype).at[outadr[single]].set(length[single])
        moment = jp.zeros((m.nout, nv), dtype).at[outadr[single]].set(moment[single])
        if len(so3):
            lens, rows = _so3(m, d, so3)
            out = (outadr[so3][:, None] + np.arange(3)).reshape(-1)
            length = length.at[out].set(lens.reshape(-1))
            moment = moment.at[out].set(rows.reshape(-1, nv))
    return d.replace(actuator_length=length, actuator_moment=moment)
