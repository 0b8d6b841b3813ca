"""Multi-point contact manifolds (MuJoCo 4's multiccd, engine_collision_gjk.c): clipping and reduction to 4 points.

Used by the face manifolds of `polyhedral.py` (box-mesh, mesh-mesh) and `cylinder.py` (cylinder and capsule pairs):
  * `face_manifold`: MuJoCo's own face-face points: geom2's face polygon clipped by the planes through geom1's face
    edges (`clipped_face`, Sutherland-Hodgman in MuJoCo's vertex orders, as polygonClip), reduced to 4 by MuJoCo's
    local search (`polygon_quad`, polygonQuad);
  * `clip_to_face`: the generic clipper of an incident face or segment by a reference face's side planes (an edge on
    a face; the cylinder pairs' faces), with `reduce_quad` (largest-area quadrilaterals);
  * `manifold_contacts`: the contact rows, or the single GJK/EPA contact where no manifold applies.
The tolerances FACE_COS and EDGE_SIN were probed on MuJoCo 4.0 (by bisection on tilted faces and edges).
Shapes: points (K, 3) with masks (K,); normals (3,); polygons as vertex ids (P,) with a count ().
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.polytope import compact, compact_index, pad_rows
from mjx_lite.collision.types import NOCONTACT, Contacts, Ids, Mask, Points, Scalar, Values, Vec3
from mjx_lite.math import dot3, safe_norm

FACE_COS = 0.996  # face-face manifold: n1 . n2 < -0.996, about 5.13 degrees (MuJoCo 4.0, probed by bisection)
EDGE_SIN = 0.0888  # edge-face manifold: |edge . n| < 0.0888, about 5.1 degrees (MuJoCo 4.0, probed)


def _ordered(w: Points, mask: Mask, normal: Vec3) -> tuple[Ids, Mask]:
    """Vertex indices of a face (mask) in counter-clockwise order about `normal`, masked ones last; (V,), (V,)."""
    order = jp.argsort(_angles(w, mask, normal)[3])
    return order, mask[order]


def clip_to_face(wr: Points, rmask: Mask, nr: Vec3, r0: Vec3, wi: Points, imask: Mask, ni: Vec3, margin: Scalar,
                 inc_poly: bool | Scalar = True, cdir: Vec3 | None = None) -> tuple[Points, Mask, Values]:
    """Clip the incident face (vertices wi[imask], plane normal ni) against the reference face (wr[rmask], outward
    normal nr through r0). Points on the incident face inside the reference prism: incident vertices, reference
    vertices projected onto the incident plane and edge-edge crossings. `inc_poly` False: the incident feature is a
    segment (its first two masked vertices; no reference vertex lies on it). `cdir` (default nr): the direction of
    the reference side planes and of the projections. Returns (points (K, 3), valid (K,), depth (K,)): with I
    incident and R reference rows K = I + R + I min(4, R), or K = I + I min(4, R) where inc_poly is a static False
    (the projected reference vertices, never valid then, are left out: the duplicate test is quadratic in K)."""
    cdir = nr if cdir is None else cdir
    dt = wr.dtype
    ro, rok = _ordered(wr, rmask, nr)
    io, iok = _ordered(wi, imask, ni)
    nrm, nin = jp.sum(rmask), jp.sum(imask)
    k = jp.arange(wr.shape[0])
    rnext = ro[jp.where(k + 1 < nrm, k + 1, 0)]
    ki = jp.arange(wi.shape[0])
    inext = io[jp.where(ki + 1 < nin, ki + 1, 0)]
    ra, rb = wr[ro], wr[rnext]  # reference edges (counter-clockwise about nr)
    ia, ib = wi[io], wi[inext]  # incident edges (counter-clockwise about ni)
    scale = jp.max(jp.abs(wr[ro] - r0)) + jp.max(jp.abs(wi[io] - r0))
    tol = 1e-9 * scale

    def inside_ref(p):  # (..., 3) -> inside every reference side plane (counter-clockwise: inside is left)
        side = dot3(jp.cross(cdir, rb - ra), p[..., None, :] - ra)
        return jp.all((side >= -tol) | ~rok, axis=-1)

    def inside_inc(p):
        side = dot3(jp.cross(ni, ib - ia), p[..., None, :] - ia)
        return jp.all((side >= -tol) | ~iok, axis=-1)

    # (a) incident vertices
    pa = wi[io]
    va = iok & inside_ref(pa)
    # (b) reference vertices projected along nr onto the incident plane (none on a segment: a static False
    # inc_poly leaves their rows out, so the duplicate test below is O(1) rather than quadratic in the face's rows)
    seg_only = inc_poly is False
    if not seg_only:
        den = jp.dot(ni, cdir)
        den = jp.where(jp.abs(den) > 1e-12, den, 1.0)
        i0 = wi[io[0]]
        pb = wr[ro] + cdir * ((wr[ro] - i0) @ ni / -den)[:, None]
        vb = rok & inside_inc(pb) & inc_poly
    # (c) incident edges crossing reference side planes (both within their segments)
    ea = ia[:, None, :]
    eb = ib[:, None, :]
    pn = jp.cross(cdir, rb - ra)[None, :, :]  # (1, R, 3) side-plane normals
    da = dot3(pn, ea - ra[None])
    db = dot3(pn, eb - ra[None])
    cross = (da * db < 0) & iok[:, None] & rok[None, :]
    t = da / jp.where(cross, da - db, 1.0)
    pc = ea + t[..., None] * (eb - ea)  # (I, R, 3)
    # the crossing must lie on the reference edge segment (between its end planes)
    edge = rb - ra
    s = dot3(pc - ra[None], edge[None]) / jp.maximum(dot3(edge, edge), 1e-30)[None]
    vc = cross & (s >= -1e-9) & (s <= 1 + 1e-9)
    # an incident edge crosses the boundary of the convex reference polygon at most twice (4 counting a crossing
    # through a reference vertex once per edge at it): keep each incident edge's first 4 crossings, in reference
    # edge order, so that the duplicate test below compares O(V) points, not O(V^2)
    nr_edges = pc.shape[1]
    keep = min(4, nr_edges)
    _, first = jax.lax.top_k(jp.where(vc, -jp.arange(nr_edges), -nr_edges - 1), keep)  # (I, keep)
    pc = jp.take_along_axis(pc, first[..., None], axis=1)
    vc = jp.take_along_axis(vc, first, axis=1)
    pts = jp.concatenate([pa] + ([] if seg_only else [pb]) + [pc.reshape(-1, 3)], axis=0)
    ok = jp.concatenate([va] + ([] if seg_only else [vb]) + [vc.reshape(-1)])
    depth = (pts - r0) @ nr
    ok = ok & (depth <= margin)
    # drop near-duplicates (a vertex on an edge is found twice)
    dpp = pts[:, None, :] - pts[None, :, :]
    d2 = dot3(dpp, dpp)
    earlier = jp.tril(jp.ones((pts.shape[0],) * 2, bool), -1)
    dupe = jp.any(earlier & ok[None, :] & (d2 < (1e-9 * scale) ** 2 + 1e-30), axis=1)
    ok = ok & ~dupe
    return pts.astype(dt), ok, depth


def _angles(pts: Points, ok: Mask, nr: Vec3) -> tuple[Points, Vec3, Vec3, Values]:
    """Angles of the valid points of a planar set about their centroid, in the plane normal to nr (counter-clockwise
    about nr, from the first valid point; inf where not valid). Returns (pts - centroid (K, 3), in-plane axes u, v
    (3,), angles (K,))."""
    center = jp.sum(jp.where(ok[:, None], pts, 0.0), axis=0) / jp.maximum(jp.sum(ok), 1)
    rel = pts - center
    u = rel[jp.argmax(ok)]
    u = u - nr * jp.dot(u, nr)
    u = u / jp.maximum(safe_norm(u), 1e-30)
    v = jp.cross(nr, u)
    return rel, u, v, jp.where(ok, jp.arctan2(rel @ v, rel @ u), jp.inf)


def reduce_quad(pts: Points, ok: Mask, nr: Vec3) -> tuple[Ids, Mask]:
    """At most 4 valid points: all if <= 4, else the largest of the quadrilaterals (i, i + n/4, i + n/2, i + 3n/4)
    over the n valid points in angular order (MuJoCo's polygonQuad is a tie-sensitive local search)."""
    k = pts.shape[0]
    cnt = jp.sum(ok)
    rel, u, v, ang = _angles(pts, ok, nr)
    order = jp.argsort(ang)
    i = jp.arange(k)[:, None]
    step = (jp.arange(4)[None, :] * jp.maximum(cnt, 1) + 2) // 4  # rounded quarter steps
    sel = order[(i + step) % jp.maximum(cnt, 1)]  # (k, 4)
    q = rel[sel]
    xy = jp.stack([q @ u, q @ v], -1)
    x, y = xy[..., 0], xy[..., 1]
    area = 0.5 * jp.sum(x * jp.roll(y, -1, axis=-1) - y * jp.roll(x, -1, axis=-1), axis=-1)
    best = sel[jp.argmax(jp.where(i[:, 0] < cnt, area, -jp.inf))]
    many = cnt > 4
    idx = jp.where(many, best, order[:4])
    valid = jp.where(many, True, ok[order[:4]])
    return idx, valid


_HALFSPACE_TOL = 1e-15  # mjMINVAL: a point is inside a clipping plane when its signed distance exceeds -1e-15


def _clip_polygon(clip: Points, nclip: Scalar, poly: Points, npoly: Scalar, n: Vec3, size: int,
                  active: Scalar | bool = True) -> tuple[Points, Scalar]:
    """Sutherland-Hodgman as MuJoCo's polygonClip: the polygon poly (first npoly of (Kp, 3), in order) clipped by
    the planes through each edge of the clipping face clip (first nclip of (Kc, 3), clockwise about its outward
    normal n), one edge after the other, in their order. Each polygon edge PQ contributes its crossing with the
    plane (where exactly one end is inside) and then Q (where Q is inside). Returns the clipped polygon's points in
    MuJoCo's order (size, 3) and their count (at most size; 0 where not `active`).

    The clipping runs in a `lax.while_loop` over the nclip edges of the `active` lanes only (under vmap: as many
    edges as the widest active face; none where no pair is face to face), on `lax.stop_gradient` values, and labels
    each point with the two lines it lies on (a polygon vertex; a polygon edge and a clipping plane; two clipping
    planes). The values are the loop's (MuJoCo's arithmetic); derivatives come from the points rebuilt from their
    labels (`_rebuild`), exact where the polygon is planar."""
    kc, kp = clip.shape[0], poly.shape[0]
    nxt_c = jp.where(jp.arange(kc) + 1 < nclip, jp.arange(kc) + 1, 0)
    pn_all = jp.cross(clip[nxt_c] - clip, n)  # (Kc, 3) plane normals (pointing inside)
    pd_all = dot3(pn_all, clip)
    c0, pn0, pd0 = (jax.lax.stop_gradient(x) for x in (clip, pn_all, pd_all))
    idx = jp.arange(size)
    buf = pad_rows(jax.lax.stop_gradient(poly), size, jax.lax.stop_gradient(poly[0]))[:size]
    # labels (kind, i, j): 0 polygon vertex i; 1 polygon edge i (vertex i to the next) on plane j; 2 planes i and j.
    # carrier of the edge from each point to the next: polygon edge k (k < Kp) or clipping plane k - Kp
    zeros = jp.zeros(size, jp.int32)
    lab = jp.stack([zeros, jp.minimum(idx, kp - 1), zeros], -1)
    carrier = idx.astype(jp.int32)

    def body(carry):
        e, buf, lab, carrier, cnt = carry
        a, pn, pd = c0[e], pn0[e], pd0[e]
        nxt = jp.where(idx + 1 < cnt, idx + 1, 0)
        q = buf[nxt]
        in1 = dot3(buf - a, pn) > -_HALFSPACE_TOL
        in2 = dot3(q - a, pn) > -_HALFSPACE_TOL
        live = idx < cnt
        den = dot3(q - buf, pn)
        ok_den = den != 0
        t = (pd - dot3(buf, pn)) / jp.where(ok_den, den, 1.0)
        cross = live & (in1 != in2) & ok_den & (t >= 0) & (t <= 1)
        on_poly = carrier < kp
        xlab = jp.stack([jp.where(on_poly, 1, 2), jp.where(on_poly, carrier, carrier - kp), jp.full(size, e)], -1)
        xcar = jp.where(in1, kp + e, carrier)  # leaving the half plane: the next edge runs along the plane
        pts = jp.stack([buf + t[:, None] * (q - buf), q], 1).reshape(2 * size, 3)
        labs = jp.stack([xlab, lab[nxt]], 1).reshape(2 * size, 3)
        cars = jp.stack([xcar, carrier[nxt]], 1).reshape(2 * size)
        src, newcnt = compact_index(jp.stack([cross, live & in2], 1).reshape(2 * size), size)
        return e + 1, pts[src], labs[src], cars[src], newcnt

    trips = jp.where(active, nclip, 0)
    init = (jp.zeros((), jp.int32), buf, lab, carrier, jp.asarray(npoly, jp.int32))
    _, buf, lab, _, cnt = jax.lax.while_loop(lambda c: c[0] < trips, body, init)
    x, ok = _rebuild(lab, poly, npoly, pn_all, pd_all)
    out = jp.where(ok[:, None], buf + (x - jax.lax.stop_gradient(x)), buf)  # the loop's values, the labels' slopes
    return out, jp.where(active, cnt, 0)


def _rebuild(lab: Ids, poly: Points, npoly: Scalar, pn: Points, pd: Values) -> tuple[Points, Mask]:
    """Clipped points (K, 3) from their labels (K, 3) (see `_clip_polygon`) and the polygon poly (first npoly of
    (Kp, 3)) and clipping planes pn . x = pd ((Kc, 3), (Kc,)): a vertex; a polygon edge's crossing with a plane; two
    planes' crossing with the polygon's plane (through its first vertex, normal by Newell's formula). Also whether
    each is well defined (not parallel)."""
    kind, i, j = lab[:, 0], lab[:, 1], lab[:, 2]
    kp, kc = poly.shape[0], pn.shape[0]
    iv = jp.clip(i, 0, kp - 1)
    a = poly[iv]
    b = poly[jp.where(iv + 1 < npoly, iv + 1, 0)]
    jc = jp.clip(j, 0, kc - 1)
    den = dot3(pn[jc], b - a)
    ok1 = jp.abs(den) > 1e-12 * safe_norm(pn[jc]) * safe_norm(b - a)
    t = (pd[jc] - dot3(pn[jc], a)) / jp.where(ok1, den, 1.0)
    x1 = a + t[:, None] * (b - a)
    nxt = jp.where(jp.arange(kp) + 1 < npoly, jp.arange(kp) + 1, 0)
    nq = jp.sum(jp.where((jp.arange(kp) < npoly)[:, None], jp.cross(poly, poly[nxt]), 0.0), axis=0)
    r1, r2 = pn[jp.clip(i, 0, kc - 1)], pn[jc]
    d1, d2, d3 = pd[jp.clip(i, 0, kc - 1)], pd[jc], jp.dot(nq, poly[0])
    c23, c31, c12 = jp.cross(r2, nq), jp.cross(nq, r1), jp.cross(r1, r2)
    det = dot3(r1, c23)
    ok2 = jp.abs(det) > 1e-12 * safe_norm(r1) * safe_norm(r2) * safe_norm(nq)
    x2 = (d1[:, None] * c23 + d2[:, None] * c31 + d3 * c12) / jp.where(ok2, det, 1.0)[:, None]
    x = jp.where((kind == 0)[:, None], a, jp.where((kind == 1)[:, None], x1, x2))
    return x, (kind == 0) | ((kind == 1) & ok1) | ((kind == 2) & ok2)


# polygonQuad accepts a move only if the area grows by more than rounding: MuJoCo's strict `>` in exact arithmetic.
# Ties are common (a pointer moved onto its neighbour, parallel chords of a regular polygon); in floating point
# MuJoCo's own outcome there depends on rounding (fused multiply-adds, summation order), which no other build shares.
QUAD_GAIN = 1 + 1e-12


def polygon_quad(pts: Points, cnt: Scalar, steps: int) -> Ids:
    """MuJoCo's polygonQuad: 4 of the cnt points pts (K, 3) of a convex polygon, by its local search. Pointers
    (a, b, c, d) start at (0, 1, 2, 3); for each a in turn, d advances while the area 0.5 |(c - a) x (d - b)| grows,
    after each advance c and then b advance while it grows. Run as a state machine of `steps` trials (each one area
    evaluation), a `lax.while_loop` that stops when the search ends (it returns indices: no derivative passes
    through it), and not run at all for cnt <= 4; returns the kept indices (4,) in MuJoCo's order."""
    n = jp.maximum(cnt, 1)

    def nxt(i):
        return jp.where(i + 1 < n, i + 1, 0)

    def area(q):
        p = pts[q]
        return 0.5 * safe_norm(jp.cross(p[2] - p[0], p[3] - p[1]))

    res0 = jp.arange(4)

    def trial(carry):
        a, b, c, d, m, res, phase, it = carry
        q = jp.stack([
            jp.stack([a, b, c, nxt(d)]),  # phase 0: advance d
            jp.stack([a, b, nxt(c), d]),  # phase 1: advance c
            jp.stack([a, nxt(b), c, d]),  # phase 2: advance b
        ])[phase]  # fmt: skip
        mn = area(q)
        run = a < cnt
        better = run & (mn > m * QUAD_GAIN)
        # rejected in phase 0: this a is done (MuJoCo then moves b, c, d off a if they sit on it), next a
        finish = run & ~better & (phase == 0)
        b2 = jp.where(b == a, nxt(b), b)
        c2 = jp.where((b == a) & (c == b2), nxt(c), c)
        d2 = jp.where((b == a) & (c == b2) & (d == c2), nxt(d), d)
        b_new = jp.where(better, q[1], jp.where(finish, b2, b))
        c_new = jp.where(better, q[2], jp.where(finish, c2, c))
        d_new = jp.where(better, q[3], jp.where(finish, d2, d))
        # better: d -> c, c and b go on; rejected: c -> b, b -> d, d -> the next a's d
        phase_new = jp.where(better, jp.where(phase == 0, 1, phase), jp.where(phase == 1, 2, 0))
        return (a + finish, b_new, c_new, d_new, jp.where(better, mn, m), jp.where(better, q, res), phase_new,
                it + 1)  # fmt: skip

    pts = jax.lax.stop_gradient(pts)
    a0 = jp.where(cnt > 4, 0, cnt).astype(jp.int32)
    init = (a0, jp.ones((), jp.int32), jp.full((), 2, jp.int32), jp.full((), 3, jp.int32), area(res0), res0,
            jp.zeros((), jp.int32), jp.zeros((), jp.int32))  # fmt: skip
    out = jax.lax.while_loop(lambda c: (c[0] < cnt) & (c[7] < steps), trial, init)
    return out[5]


def clipped_face(w1: Points, w2: Points, poly1: Ids, npoly1: Scalar, poly2: Ids, npoly2: Scalar, n1: Vec3,
                 margin: Scalar, active: Scalar | bool = True) -> tuple[Points, Scalar]:
    """geom2's face polygon (vertex ids poly2, npoly2 of w2) clipped by geom1's face (poly1, npoly1 of w1; outward
    normal n1), its points beyond the margin from geom1's face plane dropped: (points in MuJoCo's order (K, 3), count
    ()), K = P1 + P2 + 1; none where not `active` (the pair is not face to face: the clip is not run)."""
    size = poly1.shape[0] + poly2.shape[0] + 1
    clipped, cnt = _clip_polygon(w1[poly1], npoly1, w2[poly2], npoly2, n1, size, active)
    near = (jp.arange(size) < cnt) & ((clipped - w1[poly1[0]]) @ n1 <= margin)
    return compact(clipped, near, size)


def face_manifold(w1: Points, w2: Points, poly1: Ids, npoly1: Scalar, poly2: Ids, npoly2: Scalar, n1: Vec3,
                  margin: Scalar, active: Scalar | bool = True) -> tuple[Points, Mask]:
    """MuJoCo's face-face points: the clipped face (`clipped_face`, same arguments), 4 kept by polygonQuad where more
    remain, else all but exact repeats; none where not `active`. Returns (points on geom2's face (4, 3), valid (4,)).
    The callers move them onto geom1's face plane and take their depths to geom2's (in their own expressions: moving
    those few lines here would reorder the summation of their gradients, 1 ulp off the earlier build's)."""
    pts, cnt = clipped_face(w1, w2, poly1, npoly1, poly2, npoly2, n1, margin, active)
    quad = polygon_quad(pts, cnt, 6 * pts.shape[0] + 8)
    first = pts[:4]
    same = jp.all(jp.abs(first[:, None] - first[None]) < _HALFSPACE_TOL, -1) & jp.tril(jp.ones((4, 4), bool), -1)
    few_ok = (jp.arange(4) < cnt) & ~jp.any(same, axis=1)
    many = cnt > 4
    return jp.where(many, pts[quad], first), jp.where(many, True, few_ok)


def manifold_contacts(pts: Points, depth: Values, idx: Ids, valid: Mask, nr: Vec3, edge2: Scalar, feature: Scalar,
                      dist0: Scalar, pos0: Vec3, n: Vec3, dt: np.dtype) -> Contacts:
    """Contact rows of a reduced manifold: the kept points idx (k,) of pts (m, 3) / depth (m,), at the midpoint
    between the surfaces, normal -nr (nr when geom2 supplies the clipped feature, edge2); where no manifold
    applies (feature False, or no valid point) the single GJK/EPA contact (dist0, pos0, n) in row 0."""
    k = idx.shape[0]
    d = depth[idx]
    p = pts[idx] - 0.5 * d[:, None] * nr
    mnormal = jp.where(edge2, nr, -nr)
    use = feature & jp.any(valid)
    single_d = jp.full(k, NOCONTACT, dt).at[0].set(dist0)
    dist = jp.where(use, jp.where(valid, d, NOCONTACT), single_d)
    pos = jp.where(use, p, jp.broadcast_to(pos0, (k, 3)))
    nrm = jp.broadcast_to(jp.where(use, mnormal, n), (k, 3))
    return Contacts(dist.astype(dt), pos.astype(dt), nrm.astype(dt), jp.zeros((k, 3), dt))
