"""Tendon lengths, Jacobians and wrap paths (mj_tendon), plus point-Jacobian helpers used by the force stages.

Fixed tendons are linear in qpos. Spatial tendons are chains of sites with optional sphere/cylinder wrapping
(with an optional side site) and pulleys (which divide the length of what follows). The wrap path is a fixed
set of candidate points per tendon, masked by whether wrapping happens, so all shapes are static; the output
`wrap_obj`/`wrap_xpos` are filled in MuJoCo's order and padded with zeros.

All static decisions come from the integer tables (`wrap_type`, `wrap_objid`, `tendon_adr`, `tendon_num`);
the side-site id (`wrap_prm` of a geom wrap) and pulley divisors are read from the traced `wrap_prm`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.types import MINVAL, Data, Model, WrapType

# ----------------------------------------------------------------------------------------------------------
# Jacobian helpers (vectorised over points; see `point_jac`)


def body_dof_mask(m: Model) -> np.ndarray:
    """Static (nbody, nv) bool: dof i moves body b (dof i's body is b or an ancestor of b)."""
    parent = np.asarray(m.body_parentid)
    anc = np.zeros((m.nbody, m.nbody), bool)
    for b in range(m.nbody):
        a = b
        while True:
            anc[b, a] = True
            if a == 0:
                break
            a = parent[a]
    if m.nv == 0:
        return np.zeros((m.nbody, 0), bool)
    return anc[:, np.asarray(m.dof_bodyid)]


def point_jac(m: Model, d: Data, points: jax.Array, bodies: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Translational and rotational Jacobians of world points attached to bodies (as mj_jac).

    points: (k, 3) traced; bodies: (k,) static int. Returns (jacp, jacr), each (k, 3, nv).
    """
    bodies = np.asarray(bodies, np.int32)
    mask = jp.asarray(body_dof_mask(m)[bodies], points.dtype)  # (k, nv)
    root = np.asarray(m.body_rootid)[bodies]
    offset = points - d.subtree_com[root]  # (k, 3)
    cang = d.cdof[:, :3]  # (nv, 3)
    clin = d.cdof[:, 3:]
    jp_ = clin[None] + jp.cross(cang[None], offset[:, None, :])  # (k, nv, 3)
    jacp = jp.swapaxes(jp_ * mask[..., None], 1, 2)
    jacr = jp.swapaxes(jp.broadcast_to(cang[None], jp_.shape) * mask[..., None], 1, 2)
    return jacp, jacr


def apply_ft(
    m: Model, d: Data, force: jax.Array, torque: jax.Array, points: jax.Array, bodies: np.ndarray
) -> jax.Array:
    """Generalised force of world forces/torques applied at points on bodies (sum of mj_applyFT), (nv,).

    force, torque, points: (k, 3); bodies: (k,) static int.
    """
    if m.nv == 0 or len(bodies) == 0:
        return jp.zeros((m.nv,), d.qpos.dtype)
    bodies = np.asarray(bodies, np.int32)
    mask = jp.asarray(body_dof_mask(m)[bodies], force.dtype)  # (k, nv)
    root = np.asarray(m.body_rootid)[bodies]
    offset = points - d.subtree_com[root]
    spatial = jp.concatenate([torque + jp.cross(offset, force), force], axis=-1)  # (k, 6) about subtree com
    return jp.einsum("ki,kj,ij->i", mask, spatial, d.cdof)


# ----------------------------------------------------------------------------------------------------------
# wrapping geometry (mju_wrap), for one segment; vmapped over segments


def _sqrt0(x):
    """sqrt(max(x, 0)) with a finite gradient at and below 0."""
    pos = x > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, x, 1.0)), 0.0)


def _normalize_mj(v):
    """mju_normalize: unit vector, or e0 when the norm is below MINVAL. Returns (unit, norm)."""
    n = mjm.safe_norm(v)
    small = n < MINVAL
    e0 = jp.zeros_like(v).at[0].set(1.0)
    return jp.where(small, e0, v / jp.where(small, 1.0, n)), n


def _angle2(p0n, p1n):
    """Angle in [0, pi] between 2D unit vectors: MuJoCo's acos value with a smooth (atan2) gradient."""
    dot = jp.dot(p0n, p1n)
    cr = p0n[0] * p1n[1] - p0n[1] * p1n[0]
    val = jp.arccos(jp.clip(dot, -1.0, 1.0))
    sm = jp.arctan2(mjm.safe_norm(jp.stack([cr, jp.zeros_like(cr)])), dot)
    return jax.lax.stop_gradient(val) + sm - jax.lax.stop_gradient(sm)


def _is_intersect(p1, p2, p3, p4):
    """Do 2D segments p1-p2 and p3-p4 intersect."""
    det = (p4[1] - p3[1]) * (p2[0] - p1[0]) - (p4[0] - p3[0]) * (p2[1] - p1[1])
    ok = jp.abs(det) >= MINVAL
    sdet = jp.where(ok, det, 1.0)
    a = ((p4[0] - p3[0]) * (p1[1] - p3[1]) - (p4[1] - p3[1]) * (p1[0] - p3[0])) / sdet
    b = ((p2[0] - p1[0]) * (p1[1] - p3[1]) - (p2[1] - p1[1]) * (p1[0] - p3[0])) / sdet
    return ok & (a >= 0) & (a <= 1) & (b >= 0) & (b <= 1)


def _wrap_circle(d, sd, has_side, rad):
    """2D circle wrap. Returns (wlen (<0: no wrap), pnt (4,))."""
    d0, d1 = d[:2], d[2:]
    sqlen0 = jp.dot(d0, d0)
    sqlen1 = jp.dot(d1, d1)
    sqrad = rad * rad
    dif = d1 - d0
    dd = jp.dot(dif, dif)
    nowrap = (sqlen0 < sqrad) | (sqlen1 < sqrad) | (rad < MINVAL) | (dd < MINVAL)
    a = jp.clip(-jp.dot(dif, d0) / jp.where(dd < MINVAL, 1.0, dd), 0.0, 1.0)
    tmp = a * dif + d0
    nowrap = nowrap | ((jp.dot(tmp, tmp) > sqrad) & (~has_side | (jp.dot(sd, tmp) >= 0)))

    s0 = _sqrt0(sqlen0 - sqrad)
    s1 = _sqrt0(sqlen1 - sqrad)
    l0 = jp.where(sqlen0 < MINVAL, 1.0, sqlen0)
    l1 = jp.where(sqlen1 < MINVAL, 1.0, sqlen1)
    sols, goods = [], []
    for sgn in (1.0, -1.0):
        a0 = jp.stack([(d0[0] * sqrad + sgn * rad * d0[1] * s0) / l0, (d0[1] * sqrad - sgn * rad * d0[0] * s0) / l0])
        a1 = jp.stack([(d1[0] * sqrad - sgn * rad * d1[1] * s1) / l1, (d1[1] * sqrad + sgn * rad * d1[0] * s1) / l1])
        mid, _ = _normalize_mj(a0 + a1)
        good_side = jp.dot(mid, sd)
        diff = a0 - a1
        good = jp.where(has_side, good_side, -jp.dot(diff, diff))
        good = jp.where(_is_intersect(d0, a0, d1, a1), -10000.0, good)
        sols.append((a0, a1))
        goods.append(good)
    pick0 = goods[0] > goods[1]
    p0 = jp.where(pick0, sols[0][0], sols[1][0])
    p1 = jp.where(pick0, sols[0][1], sols[1][1])
    nowrap = nowrap | _is_intersect(d0, p0, d1, p1)

    # arc length (length_circle)
    p0n, _ = _normalize_mj(p0)
    p1n, _ = _normalize_mj(p1)
    angle = _angle2(p0n, p1n)
    cross = p0[1] * p1[0] - p0[0] * p1[1]
    ind = ~pick0  # solution index 1
    flip = ((cross > 0) & ind) | ((cross < 0) & ~ind)
    angle = jp.where(flip, 2 * jp.pi - angle, angle)
    wlen = jp.where(nowrap, -1.0, rad * angle)
    return wlen, jp.concatenate([p0, p1])


def _wrap_inside(d, rad):
    """2D inside wrap (side site inside the circle). Returns (wlen (0 wrap, -1 none), pnt (4,))."""
    maxiter, zinit, tol = 20, 1 - 1e-7, 1e-6
    d0, d1 = d[:2], d[2:]
    len0 = mjm.safe_norm(d0)
    len1 = mjm.safe_norm(d1)
    dif = d1 - d0
    dd = jp.dot(dif, dif)
    nowrap = (len0 <= rad) | (len1 <= rad) | (rad < MINVAL) | (len0 < MINVAL) | (len1 < MINVAL)
    a = -jp.dot(dif, d0) / jp.where(dd > MINVAL, dd, 1.0)
    tmp = d0 + a * dif
    nowrap = nowrap | ((dd > MINVAL) & (a > 0) & (a < 1) & (mjm.safe_norm(tmp) <= rad))

    # default: normalised average
    avg, _ = _normalize_mj(0.5 * (d0 + d1))
    default = jp.concatenate([avg * rad, avg * rad])

    sl0 = jp.where(len0 < MINVAL, 1.0, len0)
    sl1 = jp.where(len1 < MINVAL, 1.0, len1)
    A = jp.where(nowrap, 0.5, rad / sl0)  # sanitised where no wrap (keeps gradients finite)
    B = jp.where(nowrap, 0.5, rad / sl1)
    cosg = (len0 * len0 + len1 * len1 - dd) / (2 * sl0 * sl1)
    nowrap = nowrap | (cosg < -1 + MINVAL)
    use_default = cosg > 1 - MINVAL
    G = jp.arccos(jp.clip(cosg, -1 + MINVAL, 1 - MINVAL))

    def asin(x):  # mju_asin (clamped), finite gradient at |x| >= 1
        x = jp.clip(x, -1.0, 1.0)
        ok = jp.abs(x) < 1
        return jp.where(ok, jp.arcsin(jp.where(ok, x, 0.0)), jp.sign(x) * jp.pi / 2)

    def fun(z):
        return asin(A * z) + asin(B * z) - 2 * asin(z) + G

    z = jp.asarray(zinit, d.dtype)
    f = fun(z)
    use_default = use_default | (f > 0)
    done = use_default  # stop iterating
    converged = jp.abs(f) <= tol
    nsteps = jp.zeros((), jp.int32)

    def dsqrt(x):
        return jp.maximum(MINVAL, _sqrt0(x))

    def body(_, carry):
        z, f, use_default, done, converged, nsteps = carry
        active = ~done & ~converged
        df = A / dsqrt(1 - z * z * A * A) + B / dsqrt(1 - z * z * B * B) - 2 / dsqrt(1 - z * z)
        bad_df = df > -MINVAL
        z1 = z - f / jp.where(bad_df, -1.0, df)
        bad_dir = z1 > z
        fail = active & (bad_df | bad_dir)
        use_default = use_default | fail
        done = done | fail
        step = active & ~fail
        nsteps = nsteps + step.astype(jp.int32)
        z = jp.where(step, z1, z)
        f = jp.where(step, fun(z), f)
        pos = step & (f > tol)
        use_default = use_default | pos
        done = done | pos
        converged = converged | (step & (jp.abs(f) <= tol))
        return z, f, use_default, done, converged, nsteps

    # fixed trip count (reverse-differentiable); finished iterations are no-ops
    z, f, use_default, done, converged, nsteps = jax.lax.fori_loop(
        0, maxiter, body, (z, f, use_default, done, converged, nsteps)
    )
    use_default = use_default | (nsteps >= maxiter)

    ccw = d0[0] * d1[1] - d0[1] * d1[0] > 0
    vec = jp.where(ccw, d0, d1)
    ang = jp.where(ccw, asin(z) - asin(A * z), asin(z) - asin(B * z))
    vec, _ = _normalize_mj(vec)
    c, s = jp.cos(ang), jp.sin(ang)
    pt = rad * jp.stack([c * vec[0] - s * vec[1], s * vec[0] + c * vec[1]])
    pnt = jp.where(use_default, default, jp.concatenate([pt, pt]))
    wlen = jp.where(nowrap, -1.0, 0.0)
    return wlen, pnt


def wrap(x0, x1, xpos, xmat, rad, is_sphere, side, has_side):
    """mju_wrap for one segment: site points x0, x1 around a sphere/cylinder geom (world frame).

    Returns (wlen, t0, t1): wlen < 0 means no wrap; t0, t1 the tangent points in world coordinates.
    `is_sphere`, `has_side` are boolean scalars (traced or not).
    """
    p0 = xmat.T @ (x0 - xpos)
    p1 = xmat.T @ (x1 - xpos)
    tooclose = (mjm.safe_norm(p0) < MINVAL) | (mjm.safe_norm(p1) < MINVAL)

    # sphere: 2D frame in the plane (0, p0, p1)
    ax0, _ = _normalize_mj(p0)
    normal, nrm = _normalize_mj(jp.cross(p0, p1))
    absax = jp.abs(ax0)
    i1 = (absax[1] > absax[0]) & (absax[1] > absax[2])
    i2 = (absax[2] > absax[0]) & (absax[2] > absax[1])
    alt = jp.where(i2, jp.array([1.0, 1.0, 0.0]), jp.where(i1, jp.array([1.0, 0.0, 1.0]), jp.array([0.0, 1.0, 1.0])))
    alt_normal, _ = _normalize_mj(jp.cross(ax0, alt.astype(ax0.dtype)))
    normal = jp.where(nrm < MINVAL, alt_normal, normal)
    ax1, _ = _normalize_mj(jp.cross(normal, ax0))
    eye = jp.eye(3, dtype=p0.dtype)
    a0 = jp.where(is_sphere, ax0, eye[0])
    a1 = jp.where(is_sphere, ax1, eye[1])

    dvec = jp.stack([jp.dot(p0, a0), jp.dot(p0, a1), jp.dot(p1, a0), jp.dot(p1, a1)])
    s = xmat.T @ (side - xpos)
    sd = jp.stack([jp.dot(s, a0), jp.dot(s, a1)])
    sd, _ = _normalize_mj(sd)
    sd = sd * rad
    inside = has_side & (mjm.safe_norm(s) < rad)

    wl_c, pnt_c = _wrap_circle(dvec, sd, has_side, rad)
    wl_i, pnt_i = _wrap_inside(dvec, rad)
    wlen = jp.where(inside, wl_i, wl_c)
    pnt = jp.where(inside, pnt_i, pnt_c)
    wlen = jp.where(tooclose, -1.0, wlen)

    r0 = a0 * pnt[0] + a1 * pnt[1]
    r1 = a0 * pnt[2] + a1 * pnt[3]
    # cylinder: heights along z proportional to the path length
    L0 = mjm.safe_norm(p0[:2] - r0[:2])
    L1 = mjm.safe_norm(p1[:2] - r1[:2])
    wl = jp.maximum(wlen, 0.0)
    tot = L0 + wl + L1
    tot = jp.where(tot > 0, tot, 1.0)
    z0 = p0[2] + (p1[2] - p0[2]) * L0 / tot
    z1 = p0[2] + (p1[2] - p0[2]) * (L0 + wl) / tot
    height = jp.abs(z1 - z0)
    wlen_cyl = _sqrt0(wl * wl + height * height)
    r0 = jp.where(is_sphere, r0, r0.at[2].set(z0))
    r1 = jp.where(is_sphere, r1, r1.at[2].set(z1))
    wlen = jp.where(is_sphere | (wlen < 0), wlen, wlen_cyl)
    return wlen, xmat @ r0 + xpos, xmat @ r1 + xpos


# ----------------------------------------------------------------------------------------------------------
# static tendon tables


def _spatial_layout(m: Model):
    """Parse spatial tendons into segments and candidate wrap points (host numpy, static)."""
    wtype = np.asarray(m.wrap_type)
    wobj = np.asarray(m.wrap_objid)
    segs = []  # dict per segment
    points = []  # candidate path points in MuJoCo order: (tendon, kind, seg or wrap index)
    for t in range(m.ntendon):
        adr, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
        if num == 0 or wtype[adr] == WrapType.JOINT:
            continue
        pulley = -1
        j = 0
        while j < num - 1:
            t0, t1 = wtype[adr + j], wtype[adr + j + 1]
            if t0 == WrapType.PULLEY or t1 == WrapType.PULLEY:
                if t0 == WrapType.PULLEY:
                    pulley = adr + j
                    points.append((t, "pulley", adr + j))
                j += 1
                continue
            seg = dict(tendon=t, site0=int(wobj[adr + j]), pulley=pulley, geom=-1, sidewrap=-1, sphere=True)
            if t1 in (WrapType.SPHERE, WrapType.CYLINDER):
                seg.update(geom=int(wobj[adr + j + 1]), sidewrap=adr + j + 1, sphere=t1 == WrapType.SPHERE)
                seg["site1"] = int(wobj[adr + j + 2])
                j += 2
            else:
                seg["site1"] = int(wobj[adr + j + 1])
                j += 1
            k = len(segs)
            segs.append(seg)
            points.append((t, "site0", k))
            if seg["geom"] >= 0:
                points.append((t, "tan0", k))
                points.append((t, "tan1", k))
            if j == num - 1 or wtype[adr + j + 1] == WrapType.PULLEY:
                points.append((t, "site1", k))
    return segs, points


# ----------------------------------------------------------------------------------------------------------
# stage


def tendon(m: Model, d: Data) -> Data:
    """Tendon lengths and Jacobians, wrap paths (mj_tendon).

    Outputs: ten_length (ntendon,), ten_J (ntendon, nv), ten_wrapadr/ten_wrapnum (ntendon,) int32,
    wrap_obj (nwrap, 2) int32 and wrap_xpos (nwrap, 6): the first sum(ten_wrapnum) path points (in MuJoCo's
    flat layout of 2*nwrap points) with object ids (-1 site, -2 pulley, geom id for tangent points).
    """
    dtype = d.qpos.dtype
    nt, nv = m.ntendon, m.nv
    if nt == 0:
        return d
    wtype = np.asarray(m.wrap_type)
    wobj = np.asarray(m.wrap_objid)
    length = jp.zeros((nt,), dtype)
    J = jp.zeros((nt, nv), dtype)

    # fixed tendons
    fixed_w = [
        w
        for t in range(nt)
        if m.tendon_num[t] > 0 and wtype[m.tendon_adr[t]] == WrapType.JOINT
        for w in range(m.tendon_adr[t], m.tendon_adr[t] + m.tendon_num[t])
    ]
    if fixed_w:
        fw = np.array(fixed_w)
        ften = np.searchsorted(np.asarray(m.tendon_adr), fw, side="right") - 1
        jnt = wobj[fw]
        coef = m.wrap_prm[fw]
        length = length.at[ften].add(coef * d.qpos[np.asarray(m.jnt_qposadr)[jnt]])
        J = J.at[ften, np.asarray(m.jnt_dofadr)[jnt]].add(coef)

    segs, pts = _spatial_layout(m)
    npts_cap = 2 * m.nwrap
    wrap_obj = jp.zeros((npts_cap,), jp.int32)
    wrap_xpos = jp.zeros((npts_cap, 3), dtype)
    wrapnum = jp.zeros((nt,), jp.int32)

    if segs:
        site_body = np.asarray(m.site_bodyid)
        geom_body = np.asarray(m.geom_bodyid)
        s0 = np.array([s["site0"] for s in segs])
        s1 = np.array([s["site1"] for s in segs])
        g = np.array([max(s["geom"], 0) for s in segs])
        has_geom = np.array([s["geom"] >= 0 for s in segs])
        sphere = np.array([s["sphere"] for s in segs])
        ten = np.array([s["tendon"] for s in segs])
        x0 = d.site_xpos[s0]
        x1 = d.site_xpos[s1]
        divisor = jp.ones((len(segs),), dtype)
        pul = np.array([s["pulley"] for s in segs])
        if (pul >= 0).any():
            divisor = jp.where(jp.asarray(pul >= 0), m.wrap_prm[np.maximum(pul, 0)], divisor)

        if has_geom.any():
            sidew = np.array([max(s["sidewrap"], 0) for s in segs])
            sideid = jp.round(m.wrap_prm[sidew]).astype(jp.int32)
            has_side = (sideid >= 0) & jp.asarray(has_geom)
            side = d.site_xpos[jp.clip(sideid, 0, max(m.nsite - 1, 0))] if m.nsite else x0
            wlen, t0, t1 = jax.vmap(wrap)(
                x0, x1, d.geom_xpos[g], d.geom_xmat[g], m.geom_size[g, 0], jp.asarray(sphere), side, has_side
            )
            wrapped = (wlen >= 0) & jp.asarray(has_geom)
        else:
            wlen = jp.full((len(segs),), -1.0, dtype)
            t0, t1 = x0, x1
            wrapped = jp.zeros((len(segs),), bool)

        # lengths
        d01 = mjm.safe_norm(x1 - x0)
        dw = mjm.safe_norm(t0 - x0) + jp.maximum(wlen, 0.0) + mjm.safe_norm(x1 - t1)
        seglen = jp.where(wrapped, dw, d01) / divisor
        length = length + jax.ops.segment_sum(seglen, ten, num_segments=nt)

        # Jacobians: straight (x0 -> x1) or wrapped (x0 -> t0, t1 -> x1)
        b0 = site_body[s0]
        b1 = site_body[s1]
        bg = geom_body[g]
        pts_all = jp.concatenate([x0, x1, t0, t1])
        bod_all = np.concatenate([b0, b1, bg, bg])
        jacp, _ = point_jac(m, d, pts_all, bod_all)
        n = len(segs)
        jx0, jx1, jt0, jt1 = jacp[:n], jacp[n : 2 * n], jacp[2 * n : 3 * n], jacp[3 * n :]

        def seg_row(pa, pb, ja, jb, differ):
            u, _ = mjm.safe_normalize(pb - pa)
            row = jp.einsum("sk,skv->sv", u, jb - ja)
            return row * jp.asarray(differ, dtype)[:, None]

        row_s = seg_row(x0, x1, jx0, jx1, b0 != b1)
        row_w = seg_row(x0, t0, jx0, jt0, b0 != bg) + seg_row(t1, x1, jt1, jx1, bg != b1)
        rows = jp.where(wrapped[:, None], row_w, row_s) / divisor[:, None]
        J = J + jax.ops.segment_sum(rows, ten, num_segments=nt)

    # wrap path points (fixed layout, traced presence)
    if pts:
        pos_list, obj_list, pres_list, ten_list = [], [], [], []
        for t, kind, k in pts:
            ten_list.append(t)
            if kind == "pulley":
                pos_list.append(jp.zeros((3,), dtype))
                obj_list.append(jp.asarray(-2, jp.int32))
                pres_list.append(jp.asarray(True))
            elif kind == "site0":
                pos_list.append(x0[k])
                obj_list.append(jp.asarray(-1, jp.int32))
                pres_list.append(jp.asarray(True))
            elif kind == "site1":
                pos_list.append(x1[k])
                obj_list.append(jp.asarray(-1, jp.int32))
                pres_list.append(jp.asarray(True))
            else:
                pos_list.append(t0[k] if kind == "tan0" else t1[k])
                obj_list.append(jp.asarray(segs[k]["geom"], jp.int32))
                pres_list.append(wrapped[k])
        ppos = jp.stack(pos_list)
        pobj = jp.stack(obj_list)
        pres = jp.stack(pres_list)
        pten = np.array(ten_list)
        slot = jp.cumsum(pres.astype(jp.int32)) - 1
        slot = jp.where(pres, slot, npts_cap)  # absent -> dropped
        wrap_xpos = wrap_xpos.at[slot].set(ppos, mode="drop")
        wrap_obj = wrap_obj.at[slot].set(pobj, mode="drop")
        wrapnum = jax.ops.segment_sum(pres.astype(jp.int32), pten, num_segments=nt)
    wrapadr = jp.cumsum(wrapnum) - wrapnum

    return d.replace(
        ten_length=length,
        ten_J=J,
        ten_wrapadr=wrapadr.astype(jp.int32),
        ten_wrapnum=wrapnum.astype(jp.int32),
        wrap_obj=wrap_obj.reshape(m.nwrap, 2),
        wrap_xpos=wrap_xpos.reshape(m.nwrap, 6),
    )
