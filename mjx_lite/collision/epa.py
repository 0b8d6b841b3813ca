"""EPA: the penetration of two convex shapes from an enclosing simplex (MuJoCo's epa in engine_collision_gjk.c).

From GJK's tetrahedron enclosing the origin (`complete_simplex` builds one around a segment or triangle that the
origin lies on, as MuJoCo's polytope2/polytope3), the polytope (fixed capacity: 4 + iterations vertices) is
expanded toward its face nearest the origin: the faces seen from the new support point are removed and the
horizon edges are connected to it. Fixed iterations (a scan; converged iterations are no-ops). `sup(d)` returns
the support points (geom1 along d, geom2 along -d).
Shapes: w, wa (4, 3) tetrahedron (Minkowski difference, geom1's points); normal and witness points (3,).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.polytope import triangle_normals
from mjx_lite.collision.types import Mask, Points, Scalar, SupportFn, Vec3
from mjx_lite.math import dot3

EPA_ITERATIONS = 40
# pairs with a curved shape (ellipsoid, cylinder): EPA only brings the normal into reach of `refine_normal`'s Newton
# steps, which make it exact (EPA's cost grows with the square of its iterations: 16 cost 0.3 of 40's)
EPA_ITERATIONS_CURVED = 16


def _witness(nrm: Vec3, depth: Scalar, tri: Points, tria: Points) -> tuple[Vec3, Vec3]:
    """Witness points (on geom1, geom2) of the origin's projection onto a polytope face."""
    p = nrm * depth
    v0, v1 = tri[1] - tri[0], tri[2] - tri[0]
    v2 = p - tri[0]
    d00, d01, d11 = jp.dot(v0, v0), jp.dot(v0, v1), jp.dot(v1, v1)
    d20, d21 = jp.dot(v2, v0), jp.dot(v2, v1)
    den = d00 * d11 - d01 * d01
    den = jp.where(jp.abs(den) > 1e-30, den, 1.0)
    lv = (d11 * d20 - d01 * d21) / den
    lw = (d00 * d21 - d01 * d20) / den
    lam = jp.stack([1 - lv - lw, lv, lw])
    wit_a = lam @ tria
    return wit_a, wit_a - lam @ tri


def epa(sup: SupportFn, w: Points, wa: Points, tol: Scalar, iterations: int = EPA_ITERATIONS
        ) -> tuple[Scalar, Vec3, Vec3, Vec3]:
    """EPA from an enclosing tetrahedron: (depth, normal (3,), witness a (3,), witness b (3,)).

    The nearest face's distance is a lower bound of the depth that must not decrease; an iteration that
    would decrease it (rounding on sliver faces) ends the expansion and the last sound answer is kept."""
    dt = w.dtype
    nv = 4 + iterations
    nf = 4 + 2 * iterations
    # orient the tetrahedron so that faces are counter-clockwise seen from outside
    vol = jp.dot(jp.cross(w[1] - w[0], w[2] - w[0]), w[3] - w[0])
    swap = vol > 0
    w = jp.where(swap, w[jp.array([1, 0, 2, 3])], w)
    wa = jp.where(swap, wa[jp.array([1, 0, 2, 3])], wa)
    verts = jp.zeros((nv, 3), dt).at[:4].set(w)
    vera = jp.zeros((nv, 3), dt).at[:4].set(wa)
    tet = jp.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], jp.int32)
    faces = jp.zeros((nf, 3), jp.int32).at[:4].set(tet)
    fvalid = jp.arange(nf) < 4
    zero3 = jp.zeros(3, dt)
    result = (jp.asarray(-jp.inf, dt), zero3, zero3, zero3)

    def body(carry, it):
        verts, vera, faces, fvalid, done, result = carry
        n, dist, area = triangle_normals(verts, faces)  # (nf, 3), (nf,), (nf,)
        live = fvalid & (area > 1e-30)
        f = jp.argmin(jp.where(live, dist, jp.inf))
        nrm, fd = n[f], dist[f]
        sound = fd >= result[0] - tol
        take = ~done & sound
        wit_a, wit_b = _witness(nrm, fd, verts[faces[f]], vera[faces[f]])
        result = tuple(jp.where(take, x, y) for x, y in zip((fd, nrm, wit_a, wit_b), result))
        a, b = sup(nrm)
        p = a - b
        converged = jp.dot(p, nrm) - fd <= tol
        new = 4 + it
        verts2 = verts.at[new].set(p)
        vera2 = vera.at[new].set(a)
        # faces seen from p
        vis = fvalid & (dot3(n, p - verts[faces[:, 0]]) > tol)
        vis = vis | (jp.arange(nf) == f)
        e0 = faces.reshape(-1)  # edge k of face i: (faces[i,k], faces[i,(k+1)%3])
        e1 = jp.roll(faces, -1, axis=1).reshape(-1)
        evis = jp.repeat(vis, 3)
        # horizon: a visible face's edge whose twin (reversed edge) is in no visible face; the visible directed
        # edges are marked in a (nv, nv) table, O(nv^2 + nf) rather than comparing all edge pairs
        seen = jp.zeros((nv, nv), jp.int32).at[e0, e1].add(evis.astype(jp.int32))
        horizon = evis & (seen[e1, e0] == 0)
        fvalid2 = fvalid & ~vis
        free = ~fvalid2
        rank_h = jp.cumsum(horizon) - 1
        rank_f = jp.cumsum(free) - 1
        # the r-th horizon edge fills the r-th free face slot (slot index nf = dropped)
        slots = jp.arange(nf, dtype=jp.int32)
        slot_of_rank = jp.full(nf, nf, jp.int32).at[jp.where(free, rank_f, nf)].set(slots, mode="drop")
        target = jp.where(horizon, slot_of_rank[jp.clip(rank_h, 0, nf - 1)], nf)
        target = jp.where(rank_h < nf, target, nf)
        newf = jp.stack([e0, e1, jp.full(3 * nf, new, jp.int32)], axis=-1)
        faces2 = faces.at[target].set(newf, mode="drop")
        got = jp.zeros(nf, bool).at[target].set(True, mode="drop")
        fvalid2 = fvalid2 | got
        overflow = jp.sum(horizon) > jp.sum(free)
        stop = done | ~sound | converged | overflow
        out = (
            jp.where(stop, verts, verts2), jp.where(stop, vera, vera2), jp.where(stop, faces, faces2),
            jp.where(stop, fvalid, fvalid2), stop, result,
        )  # fmt: skip
        return out, None

    carry = (verts, vera, faces, fvalid, jp.zeros((), bool), result)
    (verts, vera, faces, fvalid, done, result), _ = jax.lax.scan(body, carry, jp.arange(iterations))
    # the final polytope (if the loop ran out of iterations while sound)
    n, dist, area = triangle_normals(verts, faces)
    f = jp.argmin(jp.where(fvalid & (area > 1e-30), dist, jp.inf))
    final = (dist[f], n[f]) + _witness(n[f], dist[f], verts[faces[f]], vera[faces[f]])
    use_final = ~done & (dist[f] >= result[0] - tol)
    return tuple(jp.where(use_final, x, y) for x, y in zip(final, result))


def complete_simplex(sup: SupportFn, w: Points, wa: Points, mask: Mask) -> tuple[Points, Points, Scalar]:
    """A tetrahedron (4, 3) (and its geom1 points (4, 3)) around a GJK segment or triangle that the origin (nearly)
    lies on, for EPA: the segment gets the support point along a direction perpendicular to it, the triangle the
    support point along its normal on the origin's side (as MuJoCo starts EPA from a 2- or 3-simplex). Also
    returns whether the tetrahedron has volume."""
    dt = w.dtype
    order = jp.argsort(~mask, stable=True)  # active vertices first
    p, pa = w[order], wa[order]
    k = jp.sum(mask)
    e = p[1] - p[0]
    axis = jp.eye(3, dtype=dt)[jp.argmin(jp.abs(e))]
    a2, b2 = sup(jp.cross(e, axis))
    c = jp.where(k >= 3, p[2], a2 - b2)
    ca = jp.where(k >= 3, pa[2], a2)
    nrm = jp.cross(e, c - p[0])
    side = jp.where(jp.dot(nrm, -p[0]) >= 0, 1.0, -1.0).astype(dt)
    a3, b3 = sup(side * nrm)
    tet = jp.stack([p[0], p[1], c, a3 - b3])
    teta = jp.stack([pa[0], pa[1], ca, a3])
    vol = jp.abs(jp.dot(jp.cross(tet[1] - tet[0], tet[2] - tet[0]), tet[3] - tet[0]))
    size = jp.max(jp.abs(tet - tet[0]))
    return tet, teta, vol > 1e-9 * size**3
