"""Analytic colliders for primitive geoms (plane, sphere, capsule, ellipsoid, cylinder, box; a plane and a mesh).

Each collider handles ONE pair, `f(g1: GeomInfo, g2: GeomInfo, margin: ()) -> Contacts` with a fixed number of
rows (the driver vmaps it over a group); type(g1) <= type(g2) as in MuJoCo's collision table. Rows that are
not contacts carry dist = NOCONTACT; the driver also masks rows with dist > margin, except for the colliders
marked `margin_tested` (MuJoCo's own inclusion test, e.g. cdist <= margin + r for spheres). The contact sets follow
MuJoCo's colliders (counts, midpoint positions, normals from geom1 to geom2, capsule-axis tangents for
plane-capsule). Geometry follows MuJoCo's computation chapter; see the tests for the oracle comparison.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import polytope
from mjx_lite.collision.hull import BOX_CORNERS
from mjx_lite.collision.segment import segments_closest as _segments_closest
from mjx_lite.collision.types import NOCONTACT, Contacts, Distance, GeomInfo, Mask, Mat3, Points, Scalar, Values, Vec3
from mjx_lite.math import dot3, outer3, pick, safe_norm, safe_normalize
from mjx_lite.types import MINVAL, GeomType


def _contacts(dist: Values, pos: Points, normal: Points, tangent: Points | None = None, valid: Mask | None = None
              ) -> Contacts:
    dist, pos, normal = jp.atleast_1d(dist), jp.atleast_2d(pos), jp.atleast_2d(normal)
    if tangent is None:
        tangent = jp.zeros_like(normal)
    if valid is not None:
        dist = jp.where(valid, dist, NOCONTACT)
    return Contacts(dist, pos, normal, jp.atleast_2d(tangent))


def _stack(cs: list[Contacts]) -> Contacts:
    return Contacts(*(jp.concatenate([getattr(c, f) for c in cs], axis=0) for f in Contacts._fields))


def _compact(c: Contacts, valid: jax.Array, k: int) -> Contacts:
    """The first `k` valid rows of `c` (in order), padded with invalid rows: fixed-shape compaction."""
    rank = jp.cumsum(valid) - 1
    sel = (valid[None, :] & (rank[None, :] == jp.arange(k)[:, None])).astype(c.pos.dtype)  # (k, n)
    ok = jp.any(sel > 0, axis=1)
    dist = jp.where(ok, sel @ jp.where(valid, c.dist, 0.0), NOCONTACT)
    return Contacts(dist, sel @ c.pos, sel @ c.normal, sel @ c.tangent)


def _unit_or(v: Vec3, fallback: Vec3) -> Vec3:
    """normalize(v), or `fallback` where |v| < MINVAL (NaN-free)."""
    n = safe_norm(v, keepdims=True)
    small = n < MINVAL
    return jp.where(small, fallback, v / jp.where(small, 1.0, n))


# ---- plane ------------------------------------------------------------------------------------------------


def _plane_sphere_raw(ppos: Vec3, pnormal: Vec3, spos: Vec3, r: Scalar, margin: Scalar
                      ) -> tuple[Scalar, Vec3, Mask]:
    """(dist, pos, is a contact): MuJoCo's test is on the centre's distance, cdist <= margin + r, not on
    dist = cdist - r <= margin (the two round differently at a tie)."""
    cdist = jp.dot(spos - ppos, pnormal)
    dist = cdist - r
    pos = spos - pnormal * (r + 0.5 * dist)
    return dist, pos, cdist <= margin + r


def plane_sphere(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    n = g1.mat[:, 2]
    dist, pos, ok = _plane_sphere_raw(g1.pos, n, g2.pos, g2.size[0], margin)
    return _contacts(dist, pos, n, valid=ok)


def plane_capsule(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Two sphere-plane contacts at the capsule's segment ends; tangent hint = capsule axis."""
    n = g1.mat[:, 2]
    axis = g2.mat[:, 2]
    seg = axis * g2.size[1]
    cs = []
    for s in (1.0, -1.0):
        dist, pos, ok = _plane_sphere_raw(g1.pos, n, g2.pos + s * seg, g2.size[0], margin)
        cs.append(_contacts(dist, pos, n, axis, valid=ok))
    return _stack(cs)


def plane_ellipsoid(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """One contact at the ellipsoid's support point in direction -normal."""
    n = g1.mat[:, 2]
    local = g2.mat.T @ (-n)
    s = g2.size
    sd = s * local
    p_local = (sd * (1.0 / jp.maximum(safe_norm(sd), MINVAL))) * s  # MuJoCo's rounding: normalise, then scale
    sup = g2.pos + g2.mat @ p_local
    dist = jp.dot(sup - g1.pos, n)
    return _contacts(dist, sup - 0.5 * dist * n, n)


def plane_cylinder(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Up to 4 contacts: nearest rim point of the near cap, same rim point of the far cap, and two points
    at +-120 degrees on the near cap (mjc_PlaneCylinder)."""
    n = g1.mat[:, 2]
    axis = g2.mat[:, 2]
    r, h = g2.size[0], g2.size[1]
    prjaxis = jp.dot(n, axis)
    flip = prjaxis > 0
    axis = jp.where(flip, -axis, axis)
    prjaxis = jp.where(flip, -prjaxis, prjaxis)
    dist0 = jp.dot(g2.pos - g1.pos, n)
    vec = axis * prjaxis - n
    lsq = jp.dot(vec, vec)
    ok = lsq >= MINVAL * MINVAL
    vec = jp.where(ok, vec * r / jp.sqrt(jp.where(ok, lsq, 1.0)), g2.mat[:, 0] * r)
    prjvec = jp.dot(vec, n)
    axis = axis * h
    prjaxis = prjaxis * h
    d1 = dist0 + prjaxis + prjvec
    d2 = dist0 - prjaxis + prjvec
    d3 = dist0 + prjaxis - 0.5 * prjvec
    first = d1 <= margin
    vec1, _ = safe_normalize(jp.cross(vec, axis))
    vec1 = vec1 * r * jp.sqrt(3.0) / 2
    p1 = g2.pos + vec + axis - 0.5 * d1 * n
    p2 = g2.pos + vec - axis - 0.5 * d2 * n
    p3 = g2.pos + vec1 + axis - 0.5 * vec - 0.5 * d3 * n
    p4 = g2.pos - vec1 + axis - 0.5 * vec - 0.5 * d3 * n
    dist = jp.stack([d1, d2, d3, d3])
    valid = jp.stack([first, first & (d2 <= margin), first & (d3 <= margin), first & (d3 <= margin)])
    return _contacts(dist, jp.stack([p1, p2, p3, p4]), jp.broadcast_to(n, (4, 3)), valid=valid)


def plane_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """The first 4 corners (MuJoCo's corner order) below the box centre's level within margin of the plane."""
    n = g1.mat[:, 2]
    dist0 = jp.dot(g2.pos - g1.pos, n)
    corners = (jp.asarray(BOX_CORNERS, g2.pos.dtype) * g2.size) @ g2.mat.T  # (8, 3) world offsets
    ldist = corners @ n
    dist = dist0 + ldist
    valid = (dist <= margin) & (ldist <= 0)
    pos = g2.pos + corners - 0.5 * dist[:, None] * n
    c = _contacts(dist, pos, jp.broadcast_to(n, (8, 3)))
    return _compact(c, valid, 4)


# the support vertex and up to 3 more corners of the incident hull polygon (MuJoCo 4.0's plane-mesh collider)
PLANE_MESH_NCON = 4


def _area4(p: Points, a: Scalar, b: Scalar, c: Scalar, d: Scalar) -> Scalar:
    """Area of the quadrilateral p[a] p[b] p[c] p[d] (half the norm of its diagonals' cross product)."""
    return 0.5 * safe_norm(jp.cross(p[a] - p[c], p[b] - p[d]))


def _quad_of_polygon(p: Points, n: Scalar, a: Scalar) -> jax.Array:
    """The (4,) positions in a convex polygon p (P, 3) of n corners (n <= P) of the 4 corners MuJoCo keeps, corner
    a first: start from a and the next three, then push d, c and b forward in turn while the quadrilateral's area
    grows (pushing d again after b stops). Integer output; p carries no derivative here. Bounded: every accepted
    push grows the area, so at most P pushes per pointer and 3 P + 3 trials in all."""
    p = jax.lax.stop_gradient(p)
    nn = jp.maximum(n, 1)
    first = jp.stack([a, a + 1, a + 2, a + 3]) % nn

    def body(state):
        b, c, d, m, phase, trips = state  # phase 0: push d, 1: push c, 2: push b, 3: done
        nb, nc, nd = jp.where(phase == 2, (b + 1) % nn, b), jp.where(phase == 1, (c + 1) % nn, c), \
            jp.where(phase == 0, (d + 1) % nn, d)
        area = _area4(p, a, nb, nc, nd)
        up = area > m
        b, c, d = jp.where(up, nb, b), jp.where(up, nc, c), jp.where(up, nd, d)
        m = jp.where(up, area, m)
        # after a push of d: push c; c keeps going while it grows, then b; b while it grows, then d again
        phase = jp.where(phase == 0, jp.where(up, 1, 3), jp.where(up, phase, jp.where(phase == 1, 2, 0)))
        return b, c, d, m, phase, trips + 1

    limit = 3 * p.shape[0] + 3
    init = (first[1], first[2], first[3], _area4(p, first[0], first[1], first[2], first[3]),
            jp.where(n > 4, 0, 3), jp.zeros((), jp.int32))  # fmt: skip
    b, c, d, _, _, _ = jax.lax.while_loop(lambda s: (s[4] < 3) & (s[5] < limit), body, init)
    return jp.stack([first[0], b, c, d])


def plane_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Up to 4 contacts (MuJoCo 4.0's plane-mesh collider): the support vertex in direction -normal (ranked in the
    mesh frame, first of ties), then, of the hull polygons at that vertex, the one whose normal is most opposed to
    the plane's (first of ties), reduced to 4 of its corners by `_quad_of_polygon` with the support vertex first;
    corners above the mesh's centre along the plane normal are skipped (the driver drops those beyond margin).
    Without polygon tables: the support vertex alone. Where the support vertex ties (a face exactly parallel to
    the plane), MuJoCo's hull search may start from another corner of the face: the same count and depths, possibly
    other corners of it."""
    n = g1.mat[:, 2]
    ln = g2.mat.T @ n
    k = polytope.first_max(dot3(g2.vert, -ln[None]))
    world = g2.pos + outer3(g2.vert, g2.mat)  # (V, 3)
    dist = dot3(world - g1.pos, n)
    d0 = dist[k]
    p0 = world[k] - 0.5 * d0 * n
    if g2.facepoly is None or g2.vertplane is None:
        pad = jp.full((PLANE_MESH_NCON - 1,), NOCONTACT, dist.dtype)
        d = jp.concatenate([d0[None], pad])
        return Contacts(d, jp.broadcast_to(p0, (PLANE_MESH_NCON, 3)), jp.broadcast_to(n, (PLANE_MESH_NCON, 3)),
                        jp.zeros((PLANE_MESH_NCON, 3), p0.dtype))  # fmt: skip
    planes = polytope.FacePlanes(GeomType.MESH, g2, g2.face)
    nl, _, area = polytope.triangle_normals(g2.vert, g2.face)
    rep = planes.reps(area)  # (F,) a triangle of each plane
    at_k = polytope.vertex_planes(GeomType.MESH, g2, k)  # (Dp,) planes at the support vertex
    best = at_k[polytope.first_min(dot3(nl[rep[at_k]], ln[None]))]
    poly, count = polytope.face_polygon(GeomType.MESH, g2, rep[best])  # (P,), ()
    j = jp.arange(poly.shape[0])
    poly = poly[jp.where(j < count, count - 1 - j, j)]  # MuJoCo's mesh_polyvert order: the reverse of the tables'
    a = polytope.first_max((poly == k) & (j < count))
    quad = _quad_of_polygon(g2.vert[poly], count, a)  # (4,) positions in poly
    ids = poly[quad]
    live = (jp.arange(4) < jp.minimum(count, 4)) & (jp.arange(4) > 0)
    live = live & (dot3(world[ids] - g2.pos, n[None]) <= 0.0)  # MuJoCo skips corners above the mesh's centre
    d = jp.where(live, dist[ids], NOCONTACT).at[0].set(d0)
    pos = (world[ids] - 0.5 * dist[ids][:, None] * n).at[0].set(p0)
    return Contacts(d, pos, jp.broadcast_to(n, (PLANE_MESH_NCON, 3)), jp.zeros((PLANE_MESH_NCON, 3), pos.dtype))



# ---- spheres and capsules -----------------------------------------------------------------------------------


def _sphere_sphere_raw(p1: Vec3, r1: Scalar, p2: Vec3, r2: Scalar, z1: Vec3, z2: Vec3, margin: Scalar
                       ) -> tuple[Scalar, Vec3, Vec3, Mask]:
    """(dist, pos, normal, is a contact) of two spheres; coincident centres use cross(z1, z2), else (1, 0, 0).
    MuJoCo's test is on the squared centre distance, |p2 - p1|^2 <= (margin + r1 + r2)^2 (not dist <= margin)."""
    dif = p2 - p1
    cdist = safe_norm(dif)
    dist = cdist - r1 - r2
    ex = jp.zeros_like(p1).at[0].set(1.0)
    alt = _unit_or(jp.cross(z1, z2), ex)
    normal = _unit_or(dif, alt)
    pos = p1 + normal * (r1 + 0.5 * dist)
    bound = margin + r1 + r2
    return dist, pos, normal, jp.dot(dif, dif) <= bound * bound


def _sphere_contact(raw: tuple) -> Contacts:
    dist, pos, normal, ok = raw
    return _contacts(dist, pos, normal, valid=ok)


def sphere_sphere(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    z1, z2 = g1.mat[:, 2], g2.mat[:, 2]
    return _sphere_contact(_sphere_sphere_raw(g1.pos, g1.size[0], g2.pos, g2.size[0], z1, z2, margin))


def sphere_capsule(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    axis = g2.mat[:, 2]
    x = jp.clip(jp.dot(axis, g1.pos - g2.pos), -g2.size[1], g2.size[1])
    p = g2.pos + axis * x
    return _sphere_contact(_sphere_sphere_raw(g1.pos, g1.size[0], p, g2.size[0], g1.mat[:, 2], axis, margin))


def sphere_cylinder(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Side (sphere-sphere with the axis point), cap (plane-sphere) or rim (sphere-point) contact."""
    r, h = g2.size[0], g2.size[1]
    axis = g2.mat[:, 2]
    vec = g1.pos - g2.pos
    x = jp.dot(axis, vec)
    a_proj = axis * x
    p_proj = vec - a_proj
    pps = jp.dot(p_proj, p_proj)
    side = jp.abs(x) < h
    cap = pps < r * r
    both = side & cap
    cap_first = (h - jp.abs(x)) < (r - jp.sqrt(jp.maximum(pps, 0.0)))
    side = side & ~(both & cap_first)
    cap = cap & ~(both & ~cap_first)
    z1 = g1.mat[:, 2]
    # side
    ds, ps, ns, oks = _sphere_sphere_raw(g1.pos, g1.size[0], a_proj + g2.pos, r, z1, axis, margin)
    # cap
    capn = jp.where(x > 0, axis, -axis)
    pos_cap = g2.pos + capn * h
    dc, pc, okc = _plane_sphere_raw(pos_cap, capn, g1.pos, g1.size[0], margin)
    nc = -capn
    # rim
    rim = g2.pos + p_proj * r / jp.sqrt(jp.where(pps > 0, pps, 1.0)) + axis * jp.where(x > 0, h, -h)
    dr, pr, nr, okr = _sphere_sphere_raw(g1.pos, g1.size[0], rim, 0.0, z1, axis, margin)
    dist = jp.where(side, ds, jp.where(cap, dc, dr))
    pos = jp.where(side, ps, jp.where(cap, pc, pr))
    normal = jp.where(side, ns, jp.where(cap, nc, nr))
    return _contacts(dist, pos, normal, valid=jp.where(side, oks, jp.where(cap, okc, okr)))


def capsule_capsule(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Nearest points of the segments; exactly parallel axes give 2 contacts (ends of the overlap)."""
    r1, r2 = g1.size[0], g2.size[0]
    z1, z2 = g1.mat[:, 2], g2.mat[:, 2]
    axis1, axis2 = z1 * g1.size[1], z2 * g2.size[1]
    x1, x2, det = _segments_closest(g1.pos, axis1, g2.pos, axis2)
    general = _sphere_contact(_sphere_sphere_raw(g1.pos + axis1 * x1, r1, g2.pos + axis2 * x2, r2, z1, z2, margin))
    # parallel axes: two contacts at the ends of the overlap of the segments (MuJoCo 4); without overlap both
    # collapse onto the nearest pair of segment ends
    dif = g1.pos - g2.pos
    ma, mb, mc = jp.dot(axis1, axis1), -jp.dot(axis1, axis2), jp.dot(axis2, axis2)
    u, v = -jp.dot(axis1, dif), jp.dot(axis2, dif)
    mc_s, ma_s = jp.where(mc > 0, mc, 1.0), jp.where(ma > 0, ma, 1.0)
    xa, xb = (u - mb) / ma_s, (u + mb) / ma_s  # segment-1 parameters of segment 2's ends
    cands = []
    for x1 in (jp.clip(jp.minimum(xa, xb), -1, 1), jp.clip(jp.maximum(xa, xb), -1, 1)):
        x2 = jp.clip((v - mb * x1) / mc_s, -1, 1)
        cands.append(_sphere_sphere_raw(g1.pos + axis1 * x1, r1, g2.pos + axis2 * x2, r2, z1, z2, margin))
    par = Contacts(
        jp.stack([jp.where(c[3], c[0], NOCONTACT) for c in cands]),
        jp.stack([c[1] for c in cands]),
        jp.stack([c[2] for c in cands]),
        jp.zeros((2, 3), g1.pos.dtype),
    )
    gen2 = _stack([general, _contacts(NOCONTACT, g1.pos, z1)])
    is_par = jp.abs(det) < MINVAL
    return Contacts(*(jp.where(is_par, p, q) for p, q in zip(par, gen2)))


# ---- boxes --------------------------------------------------------------------------------------------------


def _sphere_box_raw(p1: Vec3, r1: Scalar, p2: Vec3, mat2: Mat3, size2: Vec3) -> Distance:
    center = mat2.T @ (p1 - p2)
    clamped = jp.clip(center, -size2, size2)
    tmp = clamped - center
    d = safe_norm(tmp)
    inside = d <= MINVAL
    # outside: nearest surface point
    t = tmp / jp.where(inside, 1.0, d)
    deepest = center + t * r1
    pos_out = 0.5 * (clamped + deepest)
    n_out = mat2 @ t
    # inside: the nearest face
    faces = jp.stack([jp.abs(-size2[0] - center[0]), jp.abs(size2[0] - center[0]),
                      jp.abs(-size2[1] - center[1]), jp.abs(size2[1] - center[1]),
                      jp.abs(-size2[2] - center[2]), jp.abs(size2[2] - center[2])])  # fmt: skip
    k = jp.argmin(faces)
    closest = faces[k]
    nearest = jax.nn.one_hot(k // 2, 3, dtype=p1.dtype) * jp.where(k % 2 == 1, -1.0, 1.0)
    pos_in = center + nearest * (r1 - closest) / 2
    n_in = mat2 @ nearest
    dist = jp.where(inside, -closest, d) - r1
    pos = p2 + mat2 @ jp.where(inside, pos_in, pos_out)
    normal = jp.where(inside, n_in, n_out)
    return dist, pos, normal


def sphere_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    return _contacts(*_sphere_box_raw(g1.pos, g1.size[0], g2.pos, g2.mat, g2.size))


_EDGES = [(j, i) for j in range(3) for i in range(8) if not i & (1 << j)]  # (axis, corner) of the 12 edges
_EDGE_AXIS = np.array([j for j, _ in _EDGES], np.int32)  # (12,)
_EDGE_CORNER = np.array([i for _, i in _EDGES], np.int32)  # (12,)


def _edge_segment(c: Vec3, j: int, s: Vec3, pos: Vec3, half: Vec3, mc: Scalar
                  ) -> tuple[Scalar, Scalar, Scalar, jax.Array, Scalar]:
    """Nearest points of box edge c + t*s[j]*e_j and capsule segment pos + x*half, clamped in the order of
    MuJoCo's capsule-box (edge parameter first); j, the edge's axis, may be traced. Returns (edge param, segment
    param, squared distance, edge clamp code (0 low end, 1 interior, 2 high end; a re-clamp that lands inside keeps
    the earlier code), ok)."""
    dif = c - pos
    ma = s[j] * s[j]
    mb = -s[j] * half[j]
    u = -s[j] * dif[j]
    v = jp.dot(half, dif)
    det = ma * mc - mb * mb
    ok = jp.abs(det) >= MINVAL
    idet = 1.0 / jp.where(ok, det, 1.0)
    ma_s, mc_s = jp.where(ma > 0, ma, 1.0), jp.where(mc > 0, mc, 1.0)
    x1 = (mc * u - mb * v) * idet
    x2 = (ma * v - mb * u) * idet
    s1 = jp.where(x1 > 1, 2, jp.where(x1 < -1, 0, 1))
    x2 = jp.where(x1 > 1, (v - mb) / mc_s, jp.where(x1 < -1, (v + mb) / mc_s, x2))
    x1 = jp.clip(x1, -1, 1)
    hi2, lo2 = x2 > 1, x2 < -1
    x1r = jp.where(hi2, (u - mb) / ma_s, (u + mb) / ma_s)
    s1 = jp.where(hi2 | lo2, jp.where(x1r > 1, 2, jp.where(x1r < -1, 0, s1)), s1)
    x1 = jp.where(hi2 | lo2, jp.clip(x1r, -1, 1), x1)
    x2 = jp.clip(x2, -1, 1)
    e = jax.nn.one_hot(j, 3, dtype=pos.dtype) * s[j]
    dd = jp.sum((dif - half * x2 + e * x1) ** 2)
    return x1, x2, dd, s1, ok


def capsule_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Up to 2 contacts (mjc_CapsuleBox): sphere-box at the point of the capsule segment nearest to the box
    (segment ends against the faces, segment against the 12 edges), and, where the segment runs along the box
    (the nearest box feature is a corner, an edge crossed by the segment or a face under a segment end),
    sphere-box at a second segment point: the farthest one, moving away from the first along the segment,
    that still lies over the box (bounded by the box's extent along the relevant axes)."""
    dt = g1.pos.dtype
    s = g2.size
    pos = g2.mat.T @ (g1.pos - g2.pos)  # capsule centre in the box frame
    axis = g2.mat.T @ g1.mat[:, 2]
    half = axis * g1.size[1]
    mc = g1.size[1] * g1.size[1]
    axisdir = (half[0] > 0).astype(jp.int32) + 2 * (half[1] > 0) + 4 * (half[2] > 0)
    big = jp.full((), jp.inf, dt)
    best_d, best_x, best_box = big, jp.zeros((), dt), jp.zeros((), dt)
    cltype, clface, clcorner, cledge = jp.int32(-4), jp.int32(-1), jp.int32(0), jp.int32(0)
    # the segment ends against the faces (ends outside the slab of at most one axis)
    for e in (-1, 1):
        p = pos + e * half
        out = (p < -s) | (p > s)
        nout = jp.sum(out)
        face = jp.where(nout > 0, 2 - jp.argmax(out[::-1]), -1)  # the last clamped axis
        dd = jp.sum((jp.clip(p, -s, s) - p) ** 2)
        better = (nout <= 1) & (dd < best_d)
        best_d = jp.where(better, dd, best_d)
        best_x = jp.where(better, float(e), best_x)
        cltype = jp.where(better, -2 + e, cltype)
        clface = jp.where(better, face, clface)
    # the segment against the 12 edges: their nearest points in one vectorised call (a traced edge axis), then
    # MuJoCo's edge-by-edge choice (a later edge wins only by more than MINVAL) on their (12,) results (traced one
    # by one, the 12 edges made 16.8k fused operations of this collider, now 9.3k; its XLA compile is unchanged)
    corner = jp.asarray(BOX_CORNERS[_EDGE_CORNER], dt) * s  # (12, 3)
    corner = jp.where(jp.arange(3) == _EDGE_AXIS[:, None], 0.0, corner)  # the edge's own axis at 0
    edges = jax.vmap(_edge_segment, in_axes=(0, 0, None, None, None, None))(corner, jp.asarray(_EDGE_AXIS), s, pos,
                                                                             half, mc)  # fmt: skip
    for k, (j, i) in enumerate(_EDGES):
        x1, x2, dd, s1, ok = (x[k] for x in edges)
        better = ok & (dd < best_d - MINVAL)
        best_d = jp.where(better, dd, best_d)
        best_x = jp.where(better, x2, best_x)
        best_box = jp.where(better, x1, best_box)
        cltype = jp.where(better, s1 * 3, cltype)  # only the edge code s1 matters below
        clcorner = jp.where(better, i + (1 << j) * (s1 // 2), clcorner)
        cledge = jp.where(better, j, cledge)
    ahalf = jp.abs(half)

    def extent(k, scale):  # scale * size[k] / |half[k]|, inf where the segment is perpendicular to axis k
        h = pick(ahalf, k)
        return jp.where(h > 0, scale * pick(s, k) / jp.where(h > 0, h, 1.0), big)

    # (a) nearest box point is a corner
    c1 = jp.bitwise_xor(axisdir, clcorner)
    flip = (c1 == 3) | (c1 == 5) | (c1 == 6)
    mul = jp.where(flip, -1.0, 1.0)
    de = jp.where(flip, 1 + best_x, 1 - best_x)
    dp = jp.where(flip, 1 - best_x, 1 + best_x)
    cc = jp.where(flip, 7 - c1, c1)
    ax = jp.where(cc == 1, 0, jp.where(cc == 2, 1, 2))
    along_edge = pick(axis, ax) ** 2 > 0.5
    sp_edge = jp.minimum(de, extent(ax, 2.0)) * mul
    sp_face = -mul * jp.minimum(dp, jp.minimum(extent((ax + 1) % 3, 2.0), extent((ax + 2) % 3, 2.0)))
    sec_a = jp.where(along_edge, sp_edge, sp_face)
    has_a = (cltype >= 0) & (cltype // 3 != 1) & (c1 != 0) & (c1 != 7)
    # (b) nearest box point is inside an edge
    cb = jp.bitwise_and(jp.bitwise_xor(axisdir, clcorner), 7 - jp.left_shift(1, cledge))
    a1, a2 = (cledge + 1) % 3, (cledge + 2) % 3
    a1 = jp.where(jp.abs(pick(axis, a1)) > jp.abs(pick(axis, a2)), a2, a1)
    a2 = 3 - cledge - a1
    bit2 = jp.bitwise_and(cb, jp.left_shift(1, a2)) != 0
    mul_b = jp.where(bit2, 1.0, -1.0)
    sp = jp.minimum(jp.where(bit2, 1 - best_x, 1 + best_x), extent(a2, 2.0))
    same = (jp.bitwise_and(axisdir, jp.left_shift(1, cledge)) != 0) == bit2
    sp = jp.minimum(sp, extent(cledge, jp.where(same, 1 - best_box, 1 + best_box)))
    sec_b = sp * mul_b
    has_b = (cltype >= 0) & (cltype // 3 == 1) & ((cb == 1) | (cb == 2) | (cb == 4))
    # (c) a segment end is nearest to a face: walk back along the segment until leaving the face's slab sides
    mul_c = jp.where(cltype == -3, 1.0, -1.0)
    tmp = pos - mul_c * half
    sp = jp.full((), 2.0, dt)
    for k in range(3):
        hk = half[k]
        hk_s = jp.where(hk != 0, hk, 1.0)
        for bound in (s[k], -s[k]):
            e1 = (bound - tmp[k]) / hk_s * mul_c
            use = (clface != k) & (hk != 0) & (e1 > 0) & (e1 < sp)
            sp = jp.where(use, e1, sp)
    sec_c = sp * mul_c
    has_c = (cltype < 0) & (cltype != -4) & (clface != -1)
    second = jp.where(has_a, sec_a, jp.where(has_b, sec_b, sec_c))
    has2 = has_a | has_b | has_c
    r1 = g1.size[0]
    p1 = g2.pos + g2.mat @ (pos + half * best_x)
    c_1 = _contacts(*_sphere_box_raw(p1, r1, g2.pos, g2.mat, g2.size), valid=cltype != -4)
    p2 = g2.pos + g2.mat @ (pos + half * (second + best_x))
    c_2 = _contacts(*_sphere_box_raw(p2, r1, g2.pos, g2.mat, g2.size), valid=has2)
    return _stack([c_1, c_2])


# colliders whose rows already carry MuJoCo's own inclusion test (NOCONTACT where it fails): the driver keeps their
# rows as they are instead of testing dist <= margin again, so ties at the margin are decided as MuJoCo decides them
for _fn in (plane_sphere, plane_capsule, sphere_sphere, sphere_capsule, sphere_cylinder, capsule_capsule):
    _fn.margin_tested = True
