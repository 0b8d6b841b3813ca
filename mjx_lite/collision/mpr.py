"""Minkowski Portal Refinement: MuJoCo's convex collisions with `<flag nativeccd="disable"/>` (libccd's MPR).

With its native CCD disabled, MuJoCo 4.0 sends the pairs of `mjc_Convex` (sphere-ellipsoid, sphere-mesh,
capsule-ellipsoid, capsule-cylinder, capsule-mesh, ellipsoid/cylinder against ellipsoid, cylinder, box and mesh,
box-mesh, mesh-mesh) to libccd's MPR penetration (`ccdMPRPenetration`), whose contact is its own (the portal's
face nearest the origin when the refinement stops, not the converged penetration): a tilted cylinder on a box gets
a normal tens of degrees off the face normal. This module runs the same algorithm (written from its description:
portal discovery from the centres' difference, portal refinement, penetration search bounded by
`opt.ccd_iterations`, stop at `opt.ccd_tolerance`, libccd's zero tests at DBL_EPSILON) with the same support maps
(MuJoCo's `mjccd_support`: the full shapes, spheres and capsules included, inflated by half the detection margin
each), then fixes the normal of spheres, capsules, ellipsoids and cylinders as `mjc_fixNormal` does, and, with
multiccd enabled (and neither geom a sphere or an ellipsoid), looks for up to four more contacts by rotating the
two geoms by -+1e-3 rad about the first contact's tangents (MuJoCo's multi-CCD perturbation), keeping those
farther than 1e-3 x the smaller bounding radius from the contacts kept before, at the first contact's depth.

Meshes enter with all their vertices in MuJoCo's order (`mesh_vert`), whose first maximum is MuJoCo's exhaustive
search's (meshes of fewer than 10 vertices; larger ones MuJoCo climbs its hull graph, which finds the same point but
for exact ties). Where MPR's decisions (the stop at ccd_tolerance, ties among support points) are within round-off
of flipping, MuJoCo's own contact jumps (by ~1e-5 on the depth) under a 1e-11 shift of the pose, and a different
summation (XLA's vectorised code under vmap) can land on the other side: those contacts are not reproduced. Between
two polytopes (box-mesh, mesh-mesh) the ties are systematic and the load refuses the pairs (compile.py
`_check_nativeccd`).

Loops are `lax.scan`s of static length with done masks (portal discovery and refinement: `PORTAL_ITERATIONS`
trips, which libccd leaves unbounded; the penetration search: libccd's ccd_iterations + 1 expansions); every
division and normalisation is guarded, so values and derivatives stay finite. Shapes: directions, points (3,);
a portal is (4, 3) Minkowski points with their (4, 3) points on geom1 and geom2.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.polytope import first_max
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo, Scalar, Vec3
from mjx_lite.math import quat_to_mat
from mjx_lite.types import MINVAL, GeomType  # MINVAL: mjMINVAL

G = GeomType
PORTAL_ITERATIONS = 64  # trips of portal discovery and of portal refinement (unbounded in libccd; 3-10 in practice)
MULTI_NCON = 5  # the first contact and four perturbed ones (mj_maxContact with libccd and multiccd)
PERTURBATION = 1e-3  # rotation (rad) of the multi-CCD perturbations
RELATIVE_TOLERANCE = 1e-3  # distinct contacts: farther apart than this times the smaller bounding radius

# mjc_Convex's pairs in MuJoCo 4.0's mjCOLLISIONFUNC table (type1 <= type2): the pairs that go through MPR
CONVEX_PAIRS = frozenset({
    (G.SPHERE, G.ELLIPSOID), (G.SPHERE, G.MESH), (G.CAPSULE, G.ELLIPSOID), (G.CAPSULE, G.CYLINDER),
    (G.CAPSULE, G.MESH), (G.ELLIPSOID, G.ELLIPSOID), (G.ELLIPSOID, G.CYLINDER), (G.ELLIPSOID, G.BOX),
    (G.ELLIPSOID, G.MESH), (G.CYLINDER, G.CYLINDER), (G.CYLINDER, G.BOX), (G.CYLINDER, G.MESH), (G.BOX, G.MESH),
    (G.MESH, G.MESH),
})  # fmt: skip


def ncon(type1: int, type2: int, multiccd: bool) -> int:
    """Contacts per pair: 1, or MULTI_NCON with multiccd where neither geom is a sphere or an ellipsoid."""
    single = {G.SPHERE, G.ELLIPSOID} & {type1, type2}
    return MULTI_NCON if multiccd and not single else 1


# ------------------------------------------------------------------------------------------------------------------
# libccd's scalar tests and helpers


def _eps(dt) -> float:
    return float(np.finfo(dt).eps)  # CCD_EPS: DBL_EPSILON (libccd in double precision)


def _is_zero(x: Scalar) -> Scalar:
    return jp.abs(x) < _eps(x.dtype)


def _eq(a: Scalar, b: Scalar) -> Scalar:
    ab = jp.abs(a - b)
    eps = _eps(ab.dtype)
    return (ab < eps) | (ab < eps * jp.maximum(jp.abs(a), jp.abs(b)))


def _is_origin(v: Vec3) -> Scalar:
    return jp.all(_is_zero(v))


def _normalize(v: Vec3) -> Vec3:
    """v / |v| (ccdVec3Normalize); 0 where v is 0 (libccd: NaN)."""
    n2 = _dot(v, v)
    ok = n2 > 0
    return v * jp.where(ok, 1.0 / jp.sqrt(jp.where(ok, n2, 1.0)), 0.0)


def _normalize_mj(v: Vec3) -> Vec3:
    """mju_normalize3: v / |v|, (1, 0, 0) where |v| < mjMINVAL."""
    n = jp.sqrt(_dot(v, v))
    ok = n >= MINVAL
    return jp.where(ok, v / jp.where(ok, n, 1.0), jp.array([1.0, 0.0, 0.0], v.dtype))


def _dot(a: Vec3, b: Vec3) -> Scalar:
    """a . b summed in libccd's order (ccdVec3Dot), so that near-ties compare as MuJoCo's do."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a: Vec3, b: Vec3) -> Vec3:
    """a x b (ccdVec3Cross)."""
    return jp.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _sqrt(x: Scalar) -> Scalar:
    ok = x > 0
    return jp.where(ok, jp.sqrt(jp.where(ok, x, 1.0)), 0.0)


# ------------------------------------------------------------------------------------------------------------------
# support maps (mjccd_support)


def support(gtype: int, g: GeomInfo, d: Vec3, half_margin: Scalar) -> Vec3:
    """World support point of geom g (static type) along the unit direction d (3,), inflated by half_margin."""
    size, dt = g.size, d.dtype
    local = _mat_t_vec(g.mat, d)
    zero = jp.zeros((), dt)
    if gtype == G.SPHERE:
        p = local * size[0]
    elif gtype == G.CAPSULE:
        p = local * size[0] + jp.stack([zero, zero, jp.sign(local[2]) * size[1]])
    elif gtype == G.ELLIPSOID:
        p = _normalize_mj(local * size) * size
    elif gtype == G.CYLINDER:
        r2 = local[0] * local[0] + local[1] * local[1]
        ok = r2 > MINVAL * MINVAL
        r = jp.sqrt(jp.where(ok, r2, 1.0))
        xy = jp.where(ok, local[:2] / r * size[0], 0.0)
        p = jp.stack([xy[0], xy[1], jp.sign(local[2]) * size[1]])
    elif gtype == G.BOX:
        p = jp.sign(local) * size
    elif gtype == G.MESH:
        v = g.vert.astype(dt)
        p = v[first_max(v[:, 0] * local[0] + v[:, 1] * local[1] + v[:, 2] * local[2])]
    else:
        raise NotImplementedError(f"MPR: geom type {gtype}")
    return _mat_vec(g.mat, p + local * half_margin) + g.pos


def _mat_t_vec(mat: jax.Array, v: Vec3) -> Vec3:
    """mat.T @ v summed in MuJoCo's order (mju_mulMatTVec3), so near-ties of support values break alike."""
    return mat[0] * v[0] + mat[1] * v[1] + mat[2] * v[2]


def _mat_vec(mat: jax.Array, v: Vec3) -> Vec3:
    """mat @ v summed in MuJoCo's order (mju_mulMatVec3)."""
    return mat[:, 0] * v[0] + mat[:, 1] * v[1] + mat[:, 2] * v[2]


def mesh_vert(m, gids: jax.Array, group_gids: np.ndarray) -> jax.Array:
    """(n, N, 3) the vertices of the mesh geoms gids (n,) in MuJoCo's order (mesh_vert: a support map's first
    maximum is MuJoCo's exhaustive search's), padded by repeating the first vertex to the most vertices N of the
    meshes of `group_gids` (numpy: every geom this side of the group may take)."""
    dataid = np.asarray(m.geom_dataid)
    mids = np.unique(dataid[np.asarray(group_gids)])
    mids = mids[mids >= 0]
    adr, num = np.asarray(m.mesh_vertadr), np.asarray(m.mesh_vertnum)
    width = int(num[mids].max())
    rows = np.zeros((m.nmesh, width), np.int32)
    for i in mids:
        rows[i] = adr[i]
        rows[i, : num[i]] = adr[i] + np.arange(num[i])
    return m.mesh_vert[jp.asarray(rows)[jp.maximum(jp.asarray(dataid)[gids], 0)]]


# ------------------------------------------------------------------------------------------------------------------
# MPR (ccdMPRPenetration)


def _portal_dir(v: jax.Array) -> Vec3:
    return _normalize(_cross(v[2] - v[1], v[3] - v[1]))


def _reach_tolerance(v: jax.Array, v4: Vec3, d: Vec3, tol: Scalar) -> Scalar:
    dv4 = _dot(v4, d)
    gap = jp.minimum(jp.minimum(dv4 - _dot(v[1], d), dv4 - _dot(v[2], d)), dv4 - _dot(v[3], d))
    return _eq(gap, tol) | (gap < tol)


def _expand_slot(v: jax.Array, v4: Vec3) -> jax.Array:
    """The portal vertex (1, 2 or 3) that v4 replaces (expandPortal)."""
    c = _cross(v4, v[0])
    slot_pos = jp.where(_dot(v[2], c) > 0, 1, 3)
    slot_neg = jp.where(_dot(v[3], c) > 0, 2, 1)
    return jp.where(_dot(v[1], c) > 0, slot_pos, slot_neg)


def _set(portal: tuple, slot, pt: tuple, do) -> tuple:
    """portal (v, a, b) (4, 3) each with row `slot` replaced by the support point pt (v, a, b) where `do`."""
    mask = (jp.arange(4) == slot)[:, None] & do
    return tuple(jp.where(mask, p[None], x) for x, p in zip(portal, pt))


def _seg_dist2(x0: Vec3, b: Vec3) -> tuple[Scalar, Vec3]:
    """Squared distance of the origin to the segment x0-b and its nearest point (libccd's point-segment test)."""
    d = b - x0
    dd = _dot(d, d)
    t = -_dot(x0, d) / jp.where(dd > 0, dd, 1.0)
    w = jp.where((t < 0) | _is_zero(t), x0, jp.where((t > 1) | _eq(t, jp.ones_like(t)), b, x0 + d * t))
    return _dot(w, w), w


def _tri_dist2(x0: Vec3, b: Vec3, c: Vec3) -> tuple[Scalar, Vec3]:
    """Squared distance of the origin to the triangle x0, b, c and its nearest point (ccdVec3PointTriDist2)."""
    d1, d2 = b - x0, c - x0
    v, w, r = _dot(d1, d1), _dot(d2, d2), _dot(d1, d2)
    p, q = _dot(x0, d1), _dot(x0, d2)
    det = w * v - r * r
    flat = _is_zero(det)
    s = jp.where(flat, -1.0, (q * r - w * p) / jp.where(flat, 1.0, det))
    t = jp.where(flat, -1.0, (-s * r - q) / jp.where(w > 0, w, 1.0))
    one = jp.ones_like(s)
    inside = ((_is_zero(s) | (s > 0)) & (_eq(s, one) | (s < 1)) & (_is_zero(t) | (t > 0)) & (_eq(t, one) | (t < 1))
              & (_eq(t + s, one) | (t + s < 1)))  # fmt: skip
    w_in = x0 + d1 * s + d2 * t
    e1, w1 = _seg_dist2(x0, b)
    e2, w2 = _seg_dist2(x0, c)
    e3, w3 = _seg_dist2(b, c)
    w12 = jp.where(e2 < e1, w2, w1)
    e12 = jp.minimum(e1, e2)
    w_out = jp.where(e3 < e12, w3, w12)
    wit = jp.where(inside, w_in, w_out)
    return _dot(wit, wit), wit


def _find_pos(portal: tuple) -> Vec3:
    """The contact position from the final portal's barycentric coordinates of the origin (findPos)."""
    v, a, b = portal
    d = _portal_dir(v)
    bc = jp.stack([_dot(_cross(v[1], v[2]), v[3]), _dot(_cross(v[3], v[2]), v[0]),
                   _dot(_cross(v[0], v[1]), v[3]), _dot(_cross(v[2], v[1]), v[0])])  # fmt: skip
    s = bc[0] + bc[1] + bc[2] + bc[3]
    alt = jp.stack([jp.zeros_like(s), _dot(_cross(v[2], v[3]), d), _dot(_cross(v[3], v[1]), d),
                    _dot(_cross(v[1], v[2]), d)])  # fmt: skip
    use_alt = _is_zero(s) | (s < 0)
    bc = jp.where(use_alt, alt, bc)
    s = jp.where(use_alt, alt[1] + alt[2] + alt[3], s)
    inv = 1.0 / jp.where(s != 0, s, 1.0)
    p1 = (a[0] * bc[0] + a[1] * bc[1] + a[2] * bc[2] + a[3] * bc[3]) * inv
    p2 = (b[0] * bc[0] + b[1] * bc[1] + b[2] * bc[2] + b[3] * bc[3]) * inv
    return 0.5 * (p1 + p2)


def penetration(sup, c1: Vec3, c2: Vec3, tol: Scalar, max_iterations: int) -> tuple[Scalar, Scalar, Vec3, Vec3]:
    """libccd's MPR penetration of two convex shapes. sup(d) -> (v, a, b): support points along the unit d (a on
    shape 1 along d, b on shape 2 along -d, v = a - b); c1, c2 (3,): interior points (the geoms' positions).
    Returns (found () bool, depth (), dir (3,), pos (3,)) as ccdMPRPenetration (found: returned 0 with a nonzero
    direction, as MuJoCo's wrapper keeps it)."""
    dt = c1.dtype
    v0 = c1 - c2
    eps = _eps(dt)
    v0 = jp.where(_is_origin(v0), v0 + jp.array([10 * eps, 0.0, 0.0], dt), v0)
    zero3 = jp.zeros(3, dt)
    # portal discovery: v1 towards the origin
    d = _normalize(-v0)
    p1 = sup(d)
    dot = _dot(p1[0], d)
    miss = _is_zero(dot) | (dot < 0)
    d = _cross(v0, p1[0])
    on_line = _is_zero(_dot(d, d))
    touch = on_line & _is_origin(p1[0])  # origin on v1: depth 0, no direction (MuJoCo: no contact)
    segment = ~miss & on_line & ~touch  # origin on the segment v0-v1
    d = _normalize(d)
    p2 = sup(d)
    dot = _dot(p2[0], d)
    miss2 = _is_zero(dot) | (dot < 0)
    d = _normalize(_cross(p1[0] - v0, p2[0] - v0))
    swap = _dot(d, v0) > 0
    seg_v, seg_a, seg_b = p1  # the support towards the origin (findPenetrSegment's, before any swap)
    p1, p2 = (tuple(jp.where(swap, y, x) for x, y in zip(p1, p2)), tuple(jp.where(swap, x, y) for x, y in zip(p1, p2)))
    d = jp.where(swap, -d, d)
    portal = tuple(jp.stack([x0, x1, x2, zero3]) for x0, x1, x2 in zip((v0, c1, c2), p1, p2))

    def discover(carry, _):
        portal, d, state = carry  # state 0: searching, 1: portal found, -1: origin outside
        v = portal[0]
        p3 = sup(d)
        dot = _dot(p3[0], d)
        out = _is_zero(dot) | (dot < 0)
        e1 = _dot(_cross(v[1], p3[0]), v[0])
        c1 = (e1 < 0) & ~_is_zero(e1)
        e2 = _dot(_cross(p3[0], v[2]), v[0])
        c2 = ~c1 & (e2 < 0) & ~_is_zero(e2)
        run = state == 0
        new = _set(portal, jp.where(c1, 2, jp.where(c2, 1, 3)), p3, run & ~out)
        nv = new[0]
        nd = _normalize(_cross(nv[1] - nv[0], nv[2] - nv[0]))
        state = jp.where(run, jp.where(out, -1, jp.where(c1 | c2, 0, 1)), state)
        return (new, jp.where(run, nd, d), state), None

    state0 = jp.where(miss | on_line | miss2, -1, 0)
    (portal, _, state), _ = jax.lax.scan(discover, (portal, d, state0), None, length=PORTAL_ITERATIONS)
    found = state == 1

    def refine(carry, _):
        portal, state = carry  # 0: refining, 1: origin inside the portal, -1: outside
        v = portal[0]
        d = _portal_dir(v)
        e = _dot(d, v[1])
        inside = _is_zero(e) | (e > 0)
        p4 = sup(d)
        dot4 = _dot(p4[0], d)
        out = ~(_is_zero(dot4) | (dot4 > 0)) | _reach_tolerance(v, p4[0], d, tol)
        run = state == 0
        new = _set(portal, _expand_slot(v, p4[0]), p4, run & ~inside & ~out)
        state = jp.where(run, jp.where(inside, 1, jp.where(out, -1, 0)), state)
        return (new, state), None

    (portal, state), _ = jax.lax.scan(refine, (portal, jp.where(found, 0, -1)), None, length=PORTAL_ITERATIONS)
    found = state == 1

    def expand(carry, _):
        portal, it, done = carry
        v = portal[0]
        d = _portal_dir(v)
        p4 = sup(d)
        stop = _reach_tolerance(v, p4[0], d, tol) | (it > max_iterations)
        go = ~done & ~stop
        return (_set(portal, _expand_slot(v, p4[0]), p4, go), it + go.astype(it.dtype), done | stop), None

    init = (portal, jp.zeros((), jp.int32), ~found)
    (portal, _, _), _ = jax.lax.scan(expand, init, None, length=max_iterations + 2)
    v = portal[0]
    depth2, wit = _tri_dist2(v[1], v[2], v[3])
    depth = _sqrt(depth2)
    dir_pen = jp.where(_is_zero(depth), 0.0, _normalize(wit))
    pos_pen = _find_pos(portal)
    # origin on the segment v0-v1 (findPenetrSegment)
    depth = jp.where(segment, _sqrt(_dot(seg_v, seg_v)), depth)
    dir_ = jp.where(segment, _normalize(seg_v), dir_pen)
    pos = jp.where(segment, 0.5 * (seg_a + seg_b), pos_pen)
    ok = (found | segment) & ~_is_origin(dir_)
    return ok, depth, dir_, pos


# ------------------------------------------------------------------------------------------------------------------
# normal fix (mjc_fixNormal)


def _ellipsoid_inside(nrm: Vec3, pos: Vec3, size: Vec3) -> tuple[Scalar, Vec3]:
    """The normal at the point where the ray pos + x nrm leaves the ellipsoid, iterated (mjc_ellipsoidInside)."""
    s2inv = 1.0 / (size * size)
    c = jp.sum(pos * pos * s2inv) - 1
    nrm = _normalize_mj(nrm)

    def body(carry, _):
        nrm, it, done, ok = carry
        a = jp.sum(nrm * nrm * s2inv)
        b = jp.sum(pos * nrm * s2inv)
        det = b * b - a * c
        bad = (det < MINVAL) | (a < MINVAL)
        x = (-b + _sqrt(det)) / jp.where(bad, 1.0, a)
        bad = bad | (x < 0)
        new = _normalize_mj((pos + x * nrm) * s2inv)
        change = jp.sqrt(jp.sum((nrm - new) ** 2))
        run = ~done
        ok = jp.where(run & bad, it > 0, ok)
        nrm = jp.where(run & ~bad, new, nrm)
        done = done | bad | (change < 1e-6)
        return (nrm, it + 1, done, ok), None

    (nrm, _, _, ok), _ = jax.lax.scan(body, (nrm, 0, c > 0, c <= 0), None, length=30)
    return ok, nrm


def _ellipsoid_outside(pos: Vec3, size: Vec3) -> Vec3:
    """The ellipsoid's normal for a point outside it, by a Newton iteration on its multiplier (mjc_ellipsoidOutside)."""
    s2 = size * size
    ps2 = pos * pos * s2

    def body(carry, _):
        la, done = carry
        r = 1.0 / (s2 + la)
        val = jp.sum(ps2 * r * r) - 1
        deriv = -2 * jp.sum(ps2 * r * r * r)
        delta = -val / jp.where(deriv > -MINVAL, -1.0, deriv)
        stop = (val < 1e-6) | (deriv > -MINVAL) | (delta < 1e-6)
        return (jp.where(done | stop, la, la + delta), done | stop), None

    (la, _), _ = jax.lax.scan(body, (jp.zeros((), pos.dtype), jp.zeros((), bool)), None, length=30)
    return pos / (s2 + la)


def _geom_normal(gtype: int, g: GeomInfo, pos: Vec3, normal: Vec3) -> tuple[Scalar, Vec3]:
    """(processed (), world normal (3,)) of geom g at the contact point pos (mjc_fixNormal's per-geom part)."""
    p = _mat_t_vec(g.mat, pos - g.pos)
    nrm = _mat_t_vec(g.mat, normal)
    size = g.size
    yes = jp.ones((), bool)
    if gtype == G.SPHERE:
        done, nrm = yes, p
    elif gtype == G.CAPSULE:
        z = jp.where(p[2] < -size[1], p[2] + size[1], jp.where(p[2] > size[1], p[2] - size[1], 0.0))
        done, nrm = yes, jp.stack([p[0], p[1], z])
    elif gtype == G.ELLIPSOID:
        valid = jp.all(size >= MINVAL)
        safe = jp.where(valid, size, 1.0)
        inner = jp.sum(p * p / (safe * safe)) <= 1
        ok_in, n_in = _ellipsoid_inside(nrm, p, safe)
        n_out = _ellipsoid_outside(p, safe)
        done = valid & jp.where(inner, ok_in, True)
        nrm = jp.where(inner, n_in, n_out)
    elif gtype == G.CYLINDER:
        flat = jp.abs(size[1] - jp.abs(p[2]))
        rxy = jp.sqrt(p[0] * p[0] + p[1] * p[1])
        round_ = jp.abs(size[0] - rxy)
        done = ~(jp.abs(p[2]) > 0.95 * size[1]) & ~(flat < 0.25 * round_)
        nrm = jp.stack([p[0], p[1], jp.zeros_like(p[0])])
    else:
        return jp.zeros((), bool), normal
    return done, jp.where(done, _mat_vec(g.mat, _normalize_mj(nrm)), normal)


def fix_normal(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, pos: Vec3, normal: Vec3) -> Vec3:
    """MPR's normal replaced by the surface normals of spheres, capsules, ellipsoids and cylinders at the contact
    point (mjc_fixNormal): the average where both geoms give one."""
    ok1, n1 = _geom_normal(t1, g1, pos, normal)
    ok2, n2 = _geom_normal(t2, g2, pos, -normal)
    both = _normalize_mj(n1 - n2)
    return jp.where(ok1 & ok2, both, jp.where(ok1, n1, jp.where(ok2, -n2, normal)))


# ------------------------------------------------------------------------------------------------------------------
# the collider (mjc_Convex with libccd)


def _rbound(gtype: int, g: GeomInfo) -> Scalar:
    """The geom's bounding radius (geom_rbound) from its shape."""
    s = g.size
    if gtype == G.SPHERE:
        return s[0]
    if gtype == G.CAPSULE:
        return s[0] + s[1]
    if gtype == G.ELLIPSOID:
        return jp.max(s)
    if gtype == G.CYLINDER:
        return jp.sqrt(s[0] * s[0] + s[1] * s[1])
    if gtype == G.BOX:
        return jp.sqrt(jp.sum(s * s))
    return jp.sqrt(jp.max(jp.sum(g.vert * g.vert, axis=-1))).astype(s.dtype)


def _contact(t1, t2, g1: GeomInfo, g2: GeomInfo, margin: Scalar, tol: Scalar, iterations: int):
    """One MPR contact of the (possibly perturbed) geoms: (found, dist, pos, normal) before the normal fix."""
    half = 0.5 * margin

    def sup(d):
        a = support(t1, g1, d, half)
        b = support(t2, g2, -d, half)
        return a - b, a, b

    found, depth, d, pos = penetration(sup, g1.pos, g2.pos, tol, iterations)
    return found, margin - depth, pos, d


def _perturbed(g: GeomInfo, origin: Vec3, rot: jax.Array) -> GeomInfo:
    """g rotated by rot (3, 3) about the point origin (mju_rotateFrame)."""
    rel = origin - g.pos
    return g._replace(mat=rot @ g.mat, pos=g.pos - (rot @ rel - rel))


def mpr(g1: GeomInfo, g2: GeomInfo, margin: Scalar, tol: Scalar, *, types: tuple[int, int], multiccd: bool,
        iterations: int) -> Contacts:  # fmt: skip
    """MuJoCo's mjc_Convex with nativeccd disabled for one pair of static types `types`: MPR's contact with the fixed
    normal, then (multiccd, no sphere or ellipsoid) up to four perturbed contacts. margin: the detection distance
    (margin + gap); tol: opt.ccd_tolerance; iterations: opt.ccd_iterations. Contacts of `ncon(*types, multiccd)`
    rows (rows that are not contacts: NOCONTACT)."""
    t1, t2 = types
    dt = g1.pos.dtype
    tol = jp.asarray(tol, dt)
    k = ncon(t1, t2, multiccd)
    if k == 1:
        found, dist, pos, normal = _contact(t1, t2, g1, g2, margin, tol, iterations)
        normal = fix_normal(t1, t2, g1, g2, pos, normal)
        return Contacts(jp.where(found, dist, NOCONTACT)[None], pos[None], normal[None], jp.zeros((1, 3), dt))
    # the first contact and the four perturbed ones in one scan (one traced MPR): trip 0 unperturbed, trips 1-4
    # rotate geom1 by -+PERTURBATION about the first contact's tangents (frame rows 1, 1, 2, 2), geom2 inversely
    half = 0.5 * PERTURBATION
    sign = jp.array([0.0, -1.0, 1.0, -1.0, 1.0], dt)
    row = jp.array([1, 1, 1, 2, 2])

    def trip(carry, i):
        pos0, normal0 = carry
        axis = make_frame(normal0, jp.zeros(3, dt))[row[i]]
        quat = jp.concatenate([jp.full((1,), np.cos(half), dt), axis * (np.sin(half) * sign[i])])
        rot = jp.where(i == 0, jp.eye(3, dtype=dt), quat_to_mat(quat))
        q1, q2 = _perturbed(g1, pos0, rot), _perturbed(g2, pos0, rot.T)
        f, dist, p, n = _contact(t1, t2, q1, q2, margin, tol, iterations)
        n = fix_normal(t1, t2, g1, g2, p, n)
        first = i == 0
        return (jp.where(first, p, pos0), jp.where(first, n, normal0)), (f, dist, p, n)

    zero3 = jp.zeros(3, dt)
    _, (fs, ds, ps, ns) = jax.lax.scan(trip, (zero3, jp.array([0.0, 0.0, 1.0], dt)), jp.arange(MULTI_NCON))
    tolerance = RELATIVE_TOLERANCE * jp.minimum(_rbound(t1, g1), _rbound(t2, g2))
    kept = [fs[0]]
    for i in range(1, MULTI_NCON):  # kept where found and farther than `tolerance` from every contact kept before
        far = jp.stack([~kept[j] | (_dot(ps[i] - ps[j], ps[i] - ps[j]) > tolerance * tolerance) for j in range(i)])
        kept.append(fs[0] & fs[i] & jp.all(far))
    dists = jp.where(jp.stack(kept), ds[0], NOCONTACT)  # at the first contact's depth
    return Contacts(dists, ps, ns, jp.zeros((MULTI_NCON, 3), dt))


def collider(type1: int, type2: int, multiccd: bool, iterations: int):
    """(collider, contacts per pair) of a pair routed to MPR; the collider is called (g1, g2, margin, tol)."""
    fn = functools.partial(mpr, types=(type1, type2), multiccd=multiccd, iterations=iterations)
    return fn, ncon(type1, type2, multiccd)
