"""Tendon lengths, Jacobians and wrap paths (mj_tendon), plus point-Jacobian helpers used by the force stages.

Fixed tendons are linear in qpos. Spatial tendons are chains of sites with optional sphere/cylinder wrapping
(with an optional side site) and pulleys (which divide the length of what follows). The wrap path is a fixed
set of candidate points per tendon, masked by whether wrapping happens, so all shapes are static; the output
`wrap_obj`/`wrap_xpos` are filled in MuJoCo's order and padded with zeros.

Compile time does not grow with the number of tendons or wrap elements: a static plan (`_plan`, host numpy,
memoised per model structure) splits the tendons into element *kinds*, each evaluated by one vectorised
computation over all of its instances:
  fixed-tendon terms   (joint coef) -> one gather of qpos, one segment_sum, one static scatter into ten_J;
  straight segments    (site -> site, and the unwrapped fallback of geom segments) -> batched norms;
  geom-wrap segments   (site -> sphere/cylinder -> site, side site or not) -> one `jax.vmap(wrap)`, whose
                       inside-wrap Newton solve is a `fori_loop` with a static trip count;
  pulleys              -> a static per-segment divisor index.
Point Jacobians come from one `support.jac_batch` call over all segment end/tangent points; per-segment rows are
summed into tendons with `segment_sum`; the wrap path is one gather from a static candidate-point table, a
cumsum of the traced presence mask (tangent points exist only when wrapping happens) and one scatter.

All static decisions come from the integer tables (`wrap_type`, `wrap_objid`, `tendon_adr`, `tendon_num`);
the side-site id (`wrap_prm` of a geom wrap) and pulley divisors are read from the traced `wrap_prm`, so
"side site or not" is a traced per-instance flag of the geom-wrap kind, not a separate kind.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.pipeline import support
from mjx_lite.types import MINVAL, Data, Model, WrapType

# ----------------------------------------------------------------------------------------------------------
# Jacobian helpers (vectorised over points; thin wrappers on pipeline.support, kept for the force stages)


def body_dof_mask(m: Model) -> np.ndarray:
    """Static (nbody, nv) bool: dof i moves body b (dof i's body is b or an ancestor of b). See support."""
    return support.body_dof_mask(m)


def point_jac(m: Model, d: Data, points: jax.Array, bodies: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Translational and rotational Jacobians of world points attached to bodies (as mj_jac).

    points: (k, 3) traced; bodies: (k,) int. Returns (jacp, jacr), each (k, 3, nv) (`support.jac_batch`).
    """
    return support.jac_batch(m, d, points, np.asarray(bodies, np.int32))


def apply_ft(
    m: Model, d: Data, force: jax.Array, torque: jax.Array, points: jax.Array, bodies: np.ndarray
) -> jax.Array:
    """Generalised force of world forces/torques applied at points on bodies (sum of mj_applyFT), (nv,).

    force, torque, points: (k, 3); bodies: (k,) static int.
    """
    if m.nv == 0 or len(bodies) == 0:
        return jp.zeros((m.nv,), d.qpos.dtype)
    bodies = np.asarray(bodies, np.int32)
    mask = jp.asarray(support.body_dof_mask(m)[bodies], force.dtype)  # (k, nv)
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

    def candidate(sgn):  # the two tangent-point solutions, traced once and vmapped over sgn = +1, -1
        a0 = jp.stack([(d0[0] * sqrad + sgn * rad * d0[1] * s0) / l0, (d0[1] * sqrad - sgn * rad * d0[0] * s0) / l0])
        a1 = jp.stack([(d1[0] * sqrad - sgn * rad * d1[1] * s1) / l1, (d1[1] * sqrad + sgn * rad * d1[0] * s1) / l1])
        mid, _ = _normalize_mj(a0 + a1)
        good_side = jp.dot(mid, sd)
        diff = a0 - a1
        good = jp.where(has_side, good_side, -jp.dot(diff, diff))
        good = jp.where(_is_intersect(d0, a0, d1, a1), -10000.0, good)
        return a0, a1, good

    a0s, a1s, goods = jax.vmap(candidate)(jp.array([1.0, -1.0], d.dtype))
    pick0 = goods[0] > goods[1]
    p0 = jp.where(pick0, a0s[0], a0s[1])
    p1 = jp.where(pick0, a1s[0], a1s[1])
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
# static plan (host numpy, memoised per model structure)


@dataclasses.dataclass(frozen=True)
class TendonPlan:
    """Static index tables of the tendon stage (numpy): n_f fixed-tendon joint terms, n_s spatial segments
    (site0 -> [geom ->] site1; the first n_g have a wrap geom), n_p candidate wrap-path points."""

    # fixed tendons, one entry per joint term
    f_ten: np.ndarray  # (n_f,) tendon id (sorted)
    f_wrap: np.ndarray  # (n_f,) wrap id: coef = wrap_prm[f_wrap]
    f_qadr: np.ndarray  # (n_f,) qpos address of the joint
    f_flat: np.ndarray  # (n_f,) flat index tendon * nv + dof into ten_J
    # spatial segments, geom-wrap segments first
    n_g: int
    s_ten: np.ndarray  # (n_s,) tendon id
    s_site: np.ndarray  # (2, n_s) end sites
    s_body: np.ndarray  # (2, n_s) bodies of the end sites
    s_pulley: np.ndarray  # (n_s,) wrap id of the pulley dividing the segment, -1 for none
    g_geom: np.ndarray  # (n_g,) wrap geom id
    g_body: np.ndarray  # (n_g,) its body
    g_sphere: np.ndarray  # (n_g,) bool: sphere (else cylinder)
    g_wrap: np.ndarray  # (n_g,) wrap id of the geom element (its wrap_prm is the side-site id, -1 none)
    # candidate wrap-path points, in MuJoCo's order
    p_src: np.ndarray  # (n_p,) row of [x0 (n_s); x1 (n_s); t0 (n_g); t1 (n_g); zero (pulley)]
    p_obj: np.ndarray  # (n_p,) int32: -1 site, -2 pulley, geom id for tangent points
    p_cond: np.ndarray  # (n_p,) 0: always present; k + 1: present iff geom segment k wraps
    p_ten: np.ndarray  # (n_p,) tendon id


def _build_plan(m: Model) -> TendonPlan:
    wtype, wobj = np.asarray(m.wrap_type), np.asarray(m.wrap_objid)
    f_ten, f_wrap = [], []
    segs = []  # (tendon, site0, site1, pulley wrap id, geom id or -1, geom wrap id, sphere)
    points = []  # (tendon, kind, segment or wrap index)
    for t in range(m.ntendon):
        adr, num = int(m.tendon_adr[t]), int(m.tendon_num[t])
        if num == 0:
            continue
        if wtype[adr] == WrapType.JOINT:
            f_ten += [t] * num
            f_wrap += list(range(adr, adr + num))
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
            k = len(segs)
            if t1 in (WrapType.SPHERE, WrapType.CYLINDER):
                segs.append((t, wobj[adr + j], wobj[adr + j + 2], pulley, wobj[adr + j + 1], adr + j + 1,
                             t1 == WrapType.SPHERE))  # fmt: skip
                points += [(t, "site0", k), (t, "tan0", k), (t, "tan1", k)]
                j += 2
            else:
                segs.append((t, wobj[adr + j], wobj[adr + j + 1], pulley, -1, -1, True))
                points.append((t, "site0", k))
                j += 1
            if j == num - 1 or wtype[adr + j + 1] == WrapType.PULLEY:
                points.append((t, "site1", k))

    # geom-wrap segments first: pos[k] = position of segment k in the plan
    order = [k for k, s in enumerate(segs) if s[4] >= 0] + [k for k, s in enumerate(segs) if s[4] < 0]
    pos = np.empty(len(segs), np.int64)
    pos[order] = np.arange(len(segs))
    n_s, n_g = len(segs), sum(s[4] >= 0 for s in segs)
    seg = [segs[k] for k in order]

    def col(i, dt=np.int64):
        return np.array([s[i] for s in seg], dt).reshape(len(seg))

    site_body, geom_body = np.asarray(m.site_bodyid), np.asarray(m.geom_bodyid)
    s_site = np.stack([col(1), col(2)]) if n_s else np.zeros((2, 0), np.int64)
    g_geom = col(4)[:n_g]
    src = {"site0": lambda k: pos[k], "site1": lambda k: n_s + pos[k], "tan0": lambda k: 2 * n_s + pos[k],
           "tan1": lambda k: 2 * n_s + n_g + pos[k], "pulley": lambda k: 2 * n_s + 2 * n_g}  # fmt: skip

    def obj(kind, k):
        return -2 if kind == "pulley" else (int(segs[k][4]) if kind in ("tan0", "tan1") else -1)

    f_wrap = np.array(f_wrap, np.int64)
    jnt = wobj[f_wrap]
    return TendonPlan(
        f_ten=np.array(f_ten, np.int64), f_wrap=f_wrap, f_qadr=np.asarray(m.jnt_qposadr)[jnt].astype(np.int64),
        f_flat=np.array(f_ten, np.int64) * m.nv + np.asarray(m.jnt_dofadr)[jnt].astype(np.int64),
        n_g=int(n_g), s_ten=col(0), s_site=s_site, s_body=site_body[s_site], s_pulley=col(3),
        g_geom=g_geom, g_body=geom_body[g_geom], g_sphere=col(6, bool)[:n_g], g_wrap=col(5)[:n_g],
        p_src=np.array([src[kind](k) for _, kind, k in points], np.int64),
        p_obj=np.array([obj(kind, k) for _, kind, k in points], np.int32),
        p_cond=np.array([pos[k] + 1 if kind in ("tan0", "tan1") else 0 for _, kind, k in points], np.int64),
        p_ten=np.array([t for t, _, _ in points], np.int64),
    )  # fmt: skip


def plan(m: Model) -> TendonPlan:
    """The static tendon plan of `m` (memoised per model structure)."""
    return support.memo(m, "tendon_plan", _build_plan)


def _seg_rows(pa, pb, ja, jb, differ):
    """Jacobian rows d|pb - pa| / dq of straight pieces: (k, 3) points, (k, 3, nv) Jacobians, (k,) static mask.

    Coincident points take the direction (1, 0, 0), as MuJoCo's mju_normalize3."""
    dif = pb - pa
    n = mjm.safe_norm(dif, keepdims=True)
    small = n < MINVAL
    u = jp.where(small, jp.asarray([1.0, 0.0, 0.0], dif.dtype), dif / jp.where(small, 1.0, n))
    return jp.einsum("sk,skv->sv", u, jb - ja) * jp.asarray(differ, pa.dtype)[:, None]


# ----------------------------------------------------------------------------------------------------------
# stage


def tendon(m: Model, d: Data) -> Data:
    """Tendon lengths and Jacobians, wrap paths (mj_tendon).

    Outputs: ten_length (ntendon,), ten_J (ntendon, nv), ten_wrapadr/ten_wrapnum (ntendon,) int32,
    wrap_obj (nwrap, 2) int32 and wrap_xpos (nwrap, 6): the first sum(ten_wrapnum) path points (in MuJoCo's
    flat layout of 2*nwrap points) with object ids (-1 site, -2 pulley, geom id for tangent points).
    The traced graph depends on which element kinds occur, not on how many tendons or wraps there are.
    """
    dtype = d.qpos.dtype
    nt, nv = m.ntendon, m.nv
    if nt == 0:
        return d
    P = plan(m)
    npts_cap = 2 * m.nwrap
    length = jp.zeros((nt,), dtype)
    J = jp.zeros((nt, nv), dtype)

    # fixed tendons: length = sum coef * qpos, ten_J = static scatter of the coefficients
    if P.f_ten.size:
        coef = support.take(m.wrap_prm, P.f_wrap).astype(dtype)
        length = jax.ops.segment_sum(coef * support.take(d.qpos, P.f_qadr), P.f_ten, nt, indices_are_sorted=True)
        if nv:
            J = support.put_add(jp.zeros((nt * nv,), dtype), P.f_flat, coef).reshape(nt, nv)

    n_s, n_g = P.s_ten.size, P.n_g
    if n_s == 0:
        z = jp.zeros((nt,), jp.int32)
        return d.replace(
            ten_length=length, ten_J=J, ten_wrapadr=z, ten_wrapnum=z,
            wrap_obj=jp.zeros((m.nwrap, 2), jp.int32), wrap_xpos=jp.zeros((m.nwrap, 6), dtype),
        )  # fmt: skip

    # spatial segments: straight pieces for all, one vmapped wrap over the geom-wrap segments
    x = support.take(d.site_xpos, P.s_site)  # (2, n_s, 3)
    x0, x1 = x[0], x[1]
    b0, b1 = P.s_body
    seglen = mjm.safe_norm(x1 - x0)
    if n_g:
        gx0, gx1 = x0[:n_g], x1[:n_g]
        sideid = jp.round(support.take(m.wrap_prm, P.g_wrap)).astype(jp.int32)
        side = d.site_xpos[jp.clip(sideid, 0, m.nsite - 1)]
        gsize = support.take(m.geom_size, P.g_geom)[:, 0]
        wlen, t0, t1 = jax.vmap(wrap)(
            gx0, gx1, support.take(d.geom_xpos, P.g_geom), support.take(d.geom_xmat, P.g_geom), gsize,
            jp.asarray(P.g_sphere), side, sideid >= 0,
        )  # fmt: skip
        wrapped = wlen >= 0
        dw = mjm.safe_norm(t0 - gx0) + jp.maximum(wlen, 0.0) + mjm.safe_norm(gx1 - t1)
        seglen = jp.concatenate([jp.where(wrapped, dw, seglen[:n_g]), seglen[n_g:]])
    divisor = None
    if (P.s_pulley >= 0).any():
        pdiv = support.take(m.wrap_prm, np.maximum(P.s_pulley, 0)).astype(dtype)
        divisor = jp.where(jp.asarray(P.s_pulley >= 0), pdiv, 1.0)
        seglen = seglen / divisor
    length = length + jax.ops.segment_sum(seglen, P.s_ten, nt)

    # Jacobians: one batched point-Jacobian call over all end and tangent points
    if nv:
        pts = jp.concatenate([x0, x1] + ([t0, t1] if n_g else []))
        bodies = np.concatenate([b0, b1] + ([P.g_body, P.g_body] if n_g else []))
        jacp, _ = support.jac_batch(m, d, pts, bodies)
        jx0, jx1 = jacp[:n_s], jacp[n_s : 2 * n_s]
        rows = _seg_rows(x0, x1, jx0, jx1, b0 != b1)
        if n_g:
            jt0, jt1 = jacp[2 * n_s : 2 * n_s + n_g], jacp[2 * n_s + n_g :]
            gb0, gb1 = b0[:n_g], b1[:n_g]
            row_w = _seg_rows(gx0, t0, jx0[:n_g], jt0, gb0 != P.g_body) + _seg_rows(
                t1, gx1, jt1, jx1[:n_g], P.g_body != gb1
            )
            rows = jp.concatenate([jp.where(wrapped[:, None], row_w, rows[:n_g]), rows[n_g:]])
        if divisor is not None:
            rows = rows / divisor[:, None]
        J = J + jax.ops.segment_sum(rows, P.s_ten, nt)

    # wrap path: one gather from the candidate table, compaction of the present points by a cumsum + scatter
    ppos = support.take(jp.concatenate([x0, x1] + ([t0, t1] if n_g else []) + [jp.zeros((1, 3), dtype)]), P.p_src)
    wrap_xpos = jp.zeros((npts_cap, 3), dtype)
    wrap_obj = jp.zeros((npts_cap,), jp.int32)
    if n_g:
        pres = support.take(jp.concatenate([jp.ones((1,), jp.int32), wrapped.astype(jp.int32)]), P.p_cond)
        slot = jp.where(pres > 0, jp.cumsum(pres) - 1, npts_cap)  # absent -> dropped
        wrap_xpos = wrap_xpos.at[slot].set(ppos, mode="drop")
        wrap_obj = wrap_obj.at[slot].set(jp.asarray(P.p_obj), mode="drop")
        wrapnum = jax.ops.segment_sum(pres, P.p_ten, nt)
    else:  # every candidate point is present: static layout
        n_p = P.p_src.size
        wrap_xpos = support.put(wrap_xpos, np.arange(n_p), ppos)
        wrap_obj = jp.asarray(np.concatenate([P.p_obj, np.zeros(npts_cap - n_p, np.int32)]))
        wrapnum = jp.asarray(np.bincount(P.p_ten, minlength=nt).astype(np.int32))
    wrapadr = jp.cumsum(wrapnum) - wrapnum

    return d.replace(
        ten_length=length,
        ten_J=J,
        ten_wrapadr=wrapadr.astype(jp.int32),
        ten_wrapnum=wrapnum.astype(jp.int32),
        wrap_obj=wrap_obj.reshape(m.nwrap, 2),
        wrap_xpos=wrap_xpos.reshape(m.nwrap, 6),
    )
