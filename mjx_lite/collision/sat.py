"""Separating axes: exact penetration of polytope pairs and of a point or segment into a mesh hull.

The depth of two convex shapes is the least overlap of their projections over all directions, attained at a facet
normal of their Minkowski difference: a face normal of either, or the cross product of an edge of each that makes
a face of the difference (a Gauss-map test on the faces at the two edges prunes the others, so each edge pair
costs O(1)). Minimising over these candidates is exact: EPA's answer without its tolerance (MuJoCo runs EPA;
`general.collide` takes the separating axes where they are cheaper, `sat_cost` within the model's
`m.config.sat_budget`, and GJK only where the pair is apart within the margin).
  * `polytope_sat`: box/mesh pairs (tables from `sat_tables`);
  * `segment_sat`: a sphere's centre or a capsule's core segment into a mesh hull.
Shapes: normals and points (3,); tables as `sat_tables`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.hull import BOX_CORNERS, BOX_EDGES, BOX_TRIS
from mjx_lite.collision.polytope import FacePlanes, triangle_normals
from mjx_lite.collision.segment import segments_closest
from mjx_lite.collision.types import GeomInfo, GType, Ids, Points, Scalar, Vec3
from mjx_lite.math import dot3, outer3, safe_norm
from mjx_lite.types import GeomType

# a box or mesh for the separating axes: local vertices (V, 3), triangles (T, 3), edges with their two triangles
# (E, 4), its face planes
SatTables = tuple[Points, Ids, Ids, FacePlanes]


def sat_tables(gtype: GType, g: GeomInfo) -> SatTables | None:
    """A box or mesh as `SatTables` for the separating axes (static type; the mesh with its hull tables), or None."""
    if gtype == GeomType.BOX:
        corners = jp.asarray(BOX_CORNERS, g.pos.dtype) * g.size
        tris = jp.asarray(BOX_TRIS)
        return corners, tris, jp.asarray(BOX_EDGES), FacePlanes(gtype, g, tris)
    if gtype == GeomType.MESH and g.vert is not None and g.face is not None and g.edge is not None:
        return g.vert, g.face, g.edge, FacePlanes(gtype, g, g.face)
    return None


def sat_cost(s1: SatTables, s2: SatTables) -> int:
    """The static cost of `polytope_sat` for two polytopes, E1 E2 + (F1 + F2) (V1 + V2) (edge pairs, face planes
    against vertices), which `general.collide` compares with the model's `m.config.sat_budget` (default 200,000):
    e.g. two 20-vertex dodecahedra (30 edges, 12 face planes) cost 900 + 24 * 40 = 1,860."""
    (v1, _, e1, f1), (v2, _, e2, f2) = s1, s2
    return e1.shape[0] * e2.shape[0] + (f1.count + f2.count) * (v1.shape[0] + v2.shape[0])


def polytope_sat(g1: GeomInfo, s1: SatTables, g2: GeomInfo, s2: SatTables) -> tuple[Scalar, Vec3, Vec3]:
    """Penetration of two convex polytopes by separating axes: (depth (), normal (3,) from geom1 to geom2, contact
    point (3,), the midpoint of the two surfaces' deepest points).

    The depth is min over unit directions u of h1(u) + h2(-u) (support functions), attained at a facet normal of
    the Minkowski difference: an outward face normal of geom1, an inward one of geom2, or +-(edge1 x edge2). Every
    direction bounds the depth from above, so the minimum over these candidates is exact (EPA's answer without
    its tolerance). Among equal depths, faces win over edge pairs; an edge pair is a candidate only where it makes
    a face of the Minkowski difference (a Gauss-map test on the faces at the two edges), so each costs O(1), not a
    projection of every vertex."""
    dt = g1.pos.dtype
    # world vertices relative to geom1 (less cancellation in float32)
    w1 = outer3(s1[0], g1.mat)
    w2 = (g2.pos - g1.pos) + outer3(s2[0], g2.mat)
    scale = jp.maximum(jp.max(jp.abs(w1)), jp.max(jp.abs(w2 - (g2.pos - g1.pos))))
    big = jp.asarray(1e6, dt) * (1 + scale)
    eps = jp.asarray(1e-12 if dt == jp.float64 else 1e-6, dt) * scale

    def normals(w, tris, mat):  # in the geom frame (model data: once under a vmap over states), then rotated
        a, b, c = w[tris[:, 0]], w[tris[:, 1]], w[tris[:, 2]]
        n = jp.cross(b - a, c - a)
        nn = safe_norm(n, axis=-1, keepdims=True)
        ok = nn[:, 0] > 1e-12 * jp.max(jp.abs(w)) ** 2
        n = n / jp.where(ok[:, None], nn, 1.0)
        out = dot3(n, jp.mean(w, 0) - a) > 0  # pointing inward (padded rows keep the centroid inside)
        return outer3(jp.where(out[:, None], -n, n), mat), ok, nn[:, 0]

    nt1, ok1, area1 = normals(s1[0], s1[1], g1.mat)
    nt2, ok2, area2 = normals(s2[0], s2[1], g2.mat)
    # face axes: n = outward normal of geom1 / inward normal of geom2, one per face plane; a hull's support along
    # its own face normal is that face's plane offset
    p1, p2 = s1[3].reps(area1), s2[3].reps(area2)
    pn1, pn2 = nt1[p1], nt2[p2]  # (F1, 3), (F2, 3)
    key1 = dot3(pn1, w1[s1[1][p1, 0]]) - jp.min(outer3(pn1, w2), -1)  # (F1,)
    key2 = dot3(pn2, w2[s2[1][p2, 0]]) - jp.min(outer3(pn2, w1), -1)  # (F2,)
    key1 = jp.where(ok1[p1], key1, big)
    key2 = jp.where(ok2[p2], key2, big)
    # edge axes u = e1 x e2 for the edge pairs that make a face of the Minkowski difference: on the Gauss map, the
    # arc between geom1's two face normals at its edge crosses the arc between geom2's two (negated). Then the
    # edges are the support features along u and the overlap is u . (a1 - a2), with u oriented out of geom1
    ed1, ed2 = s1[2], s2[2]
    a1, b1 = w1[ed1[:, 0]], w1[ed1[:, 1]]
    a2, b2 = w2[ed2[:, 0]], w2[ed2[:, 1]]
    fa, fb = nt1[ed1[:, 2]], nt1[ed1[:, 3]]  # (E1, 3) outward normals of geom1 at its edges
    fc, fd = -nt2[ed2[:, 2]], -nt2[ed2[:, 3]]  # (E2, 3) negated outward normals of geom2
    na, nb = jp.cross(fa, fb), jp.cross(fc, fd)
    arc1 = dot3(na, na) > 1e-12  # a triangulation diagonal of a flat face has no arc
    arc2 = dot3(nb, nb) > 1e-12
    c_a, d_a = outer3(na, fc), outer3(na, fd)  # (E1, E2): geom2's arc ends against geom1's great circle
    a_b, b_b = outer3(fa, nb), outer3(fb, nb)  # (E1, E2): geom1's arc ends against geom2's great circle
    mink = (c_a * d_a < 0) & (a_b * b_b < 0) & (c_a * b_b > 0) & arc1[:, None] & arc2[None, :]  # (E1, E2)
    e1, e2 = b1 - a1, b2 - a2
    # per pair u = e1 x e2 and its overlap u . (a1 - a2) / |u|, oriented out of geom1 (u . (fa + fb) > 0), as
    # (E1, E2) arrays: |u|^2 from the components, the two dot products as triple products ((e1 x e2) . r =
    # (r x e1) . e2) of all edge pairs at once, never an (E1, E2, 3) array (slow on CPU)
    uu = sum((e1[:, i, None] * e2[None, :, j] - e1[:, j, None] * e2[None, :, i]) ** 2
             for i, j in ((1, 2), (2, 0), (0, 1)))  # fmt: skip
    oku = mink & (uu > 1e-6 * dot3(e1, e1)[:, None] * dot3(e2, e2)[None, :])
    orient = outer3(jp.cross(fa + fb, e1), e2)
    over = outer3(jp.cross(a1, e1), e2) - outer3(e1, jp.cross(e2, a2))  # (e1 x e2) . (a1 - a2)
    keye = jp.where(orient < 0, -over, over) * jax.lax.rsqrt(jp.where(oku, uu, 1.0)) + eps
    keye = jp.where(oku, keye, big).reshape(-1)
    keys = jp.concatenate([key1, key2, keye])
    k = jp.argmin(keys)
    nf1, nf2, ne = key1.shape[0], key2.shape[0], keye.shape[0]
    # the winner's normal and depth (overlap along it)
    kf1 = jp.minimum(k, nf1 - 1)
    kf2 = jp.clip(k - nf1, 0, nf2 - 1)
    ke = jp.clip(k - nf1 - nf2, 0, ne - 1)
    ie, je = ke // e2.shape[0], ke % e2.shape[0]
    ue = jp.cross(e1[ie], e2[je])
    ue = ue * jax.lax.rsqrt(jp.maximum(dot3(ue, ue), 1e-30))
    ue = jp.where(dot3(ue, fa[ie] + fb[ie]) < 0, -ue, ue)
    # a winning face plane: the best of its triangles (a polygon of float32 vertices is planar only to rounding,
    # so its triangles' normals differ slightly; the minimum over all of them is the exact one)
    def refine(nt, ok, tris, wa, wb):  # candidate normals (K, 3) out of wa: the one of least overlap
        cand = nt[tris]
        key = jp.max(outer3(cand, wa), -1) - jp.min(outer3(cand, wb), -1)
        return cand[jp.argmin(jp.where(ok[tris], key, big))]

    best1 = refine(nt1, ok1, s1[3].triangles(kf1), w1, w2)
    best2 = refine(nt2, ok2, s2[3].triangles(kf2), w2, w1)
    n = jp.select([k < nf1, k < nf1 + nf2], [best1, -best2], ue)
    h1 = jp.max(dot3(w1, n))
    l2 = jp.min(dot3(w2, n))
    depth = h1 - l2
    # contact point: geom2's deepest vertex (geom1's face), geom1's (geom2's face), or the edges' closest points
    pf1 = w2[jp.argmin(dot3(w2, n))] + 0.5 * depth * n
    pf2 = w1[jp.argmax(dot3(w1, n))] - 0.5 * depth * n
    d1, d2, r = e1[ie], e2[je], a1[ie] - a2[je]
    aa, bb, cc = jp.dot(d1, d1), jp.dot(d1, d2), jp.dot(d2, d2)
    dd, ee = jp.dot(d1, r), jp.dot(d2, r)
    den = aa * cc - bb * bb
    den_ok = den > 1e-12 * aa * cc
    sa = jp.clip(jp.where(den_ok, (bb * ee - cc * dd) / jp.where(den_ok, den, 1.0), 0.5), 0.0, 1.0)
    sb = jp.clip((bb * sa + ee) / jp.where(cc > 0, cc, 1.0), 0.0, 1.0)
    pe = 0.5 * (a1[ie] + sa * d1 + a2[je] + sb * d2)
    pos = jp.select([k < nf1, k < nf1 + nf2], [pf1, pf2], pe)
    return depth, n, g1.pos + pos


def segment_sat(t1: int, g1: GeomInfo, g2: GeomInfo) -> tuple[Scalar, Vec3, Vec3]:
    """Penetration of a sphere's centre or a capsule's core segment (geom1, type t1) into a mesh's hull (geom2) by
    separating axes, as `polytope_sat`: (depth (), normal (3,) from geom1 to geom2, the midpoint of the two deepest
    points (3,)). The candidate axes are the hull's face normals and, for a segment, edge x d for each hull edge whose
    Gauss arc (between its two faces' normals) crosses the segment's great circle (the normals across its direction d):
    O(F + E). Worked in the mesh's frame, where the faces, edges and arcs are model data (computed once under a vmap
    over states): per state, a dot product per face and a cross product per edge."""
    half = g1.size[1] if t1 == GeomType.CAPSULE else 0.0
    c = g2.mat.T @ (g1.pos - g2.pos)  # the segment in the mesh's frame
    axis = g2.mat.T @ g1.mat[:, 2] * half
    a, b = c - axis, c + axis
    d = b - a
    w, tris = g2.vert, g2.face
    nt, off, area = triangle_normals(w, tris)
    pl = FacePlanes(GeomType.MESH, g2, tris).reps(area)  # one (the largest) triangle per face plane
    pn, po = nt[pl], off[pl]
    scale = jp.max(jp.abs(w)) + safe_norm(d)
    big = jp.asarray(1e6, d.dtype) * (1 + scale)
    key_f = jp.where(area[pl] > 0, po - jp.minimum(dot3(pn, a[None]), dot3(pn, b[None])), big)  # (F,) overlaps
    if t1 != GeomType.CAPSULE:  # a point: the least deep face plane
        f = jp.argmin(key_f)
        nf = g2.mat @ pn[f]
        return key_f[f], -nf, g1.pos + 0.5 * key_f[f] * nf
    edge = g2.edge
    v0, ev = w[edge[:, 0]], w[edge[:, 1]] - w[edge[:, 0]]
    fa, fb = nt[edge[:, 2]], nt[edge[:, 3]]
    arc = dot3(jp.cross(fa, fb), jp.cross(fa, fb)) > 1e-12  # a flat face's triangulation diagonal has none
    u = jp.cross(ev, d)
    uu = dot3(u, u)
    ok = arc & (dot3(fa, d[None]) * dot3(fb, d[None]) < 0) & (uu > 1e-12 * dot3(ev, ev) * jp.dot(d, d))
    u = u * jax.lax.rsqrt(jp.where(ok, uu, 1.0))[:, None]
    u = jp.where((dot3(u, fa + fb) < 0)[:, None], -u, u)  # out of the hull
    key_e = jp.where(ok, dot3(u, v0 - a), big)  # (E,) overlap along edge x d (u . a = u . b)
    keys = jp.concatenate([key_f, key_e])
    k = jp.argmin(keys)
    nf = key_f.shape[0]
    kf, ke = jp.minimum(k, nf - 1), jp.clip(k - nf, 0, key_e.shape[0] - 1)
    on_face = k < nf
    un = jp.where(on_face, pn[kf], u[ke])
    depth = keys[k]
    # deepest points: the segment's lowest end along the face normal (its middle where both are), or the nearest
    # points of the segment and the edge
    ua, ub = jp.dot(un, a), jp.dot(un, b)
    tie = jp.abs(ua - ub) <= 1e-9 * scale
    xs = jp.where(tie, 0.5 * (a + b), jp.where(ua < ub, a, b))
    p_face = xs + 0.5 * depth * un
    x1, x2, _ = segments_closest(0.5 * (a + b), 0.5 * d, v0[ke] + 0.5 * ev[ke], 0.5 * ev[ke])
    p_edge = 0.5 * (0.5 * (a + b) + x1 * 0.5 * d + v0[ke] + (x2 + 1) * 0.5 * ev[ke])
    return depth, -(g2.mat @ un), g2.pos + g2.mat @ jp.where(on_face, p_face, p_edge)
