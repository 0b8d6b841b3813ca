"""EPA: the penetration of two convex shapes from an enclosing simplex (MuJoCo's epa in engine_collision_gjk.c).

From GJK's tetrahedron enclosing the origin (`complete_simplex` builds one around a segment or triangle that the
origin lies on, as MuJoCo's polytope2/polytope3), the polytope (fixed capacity: 4 + iterations vertices) is
expanded toward its face nearest the origin: the faces seen from the new support point are removed and the
horizon edges are connected to it. Fixed iterations (a scan; converged iterations are no-ops). `sup(d)` returns
the support points (geom1 along d, geom2 along -d).
Shapes: w, wa (4, 3) tetrahedron (Minkowski difference, geom1's points); normal and witness points (3,).
"""

from __future__ import annotations

import contextlib
import contextvars

import jax
import jax.numpy as jp

from mjx_lite.collision.polytope import first_min, triangle_normals
from mjx_lite.collision.types import Mask, Points, Scalar, SupportFn, Vec3
from mjx_lite.math import dot3

EPA_ITERATIONS = 40
# pairs with a curved shape (ellipsoid, cylinder): EPA only brings the normal into reach of `refine_normal`'s Newton
# steps, which make it exact (EPA's cost grows with the square of its iterations: 16 cost 0.3 of 40's)
EPA_ITERATIONS_CURVED = 16

# set while the driver traces a forward-only loop body (`driver._near_only`: its derivatives come from a separate
# dense call): `epa` then stops at the last live iteration (a `lax.while_loop`) instead of scanning them all
_FORWARD_ONLY = contextvars.ContextVar("epa_forward_only", default=False)


@contextlib.contextmanager
def forward_only():
    """Trace-time context: `epa` calls traced inside it are never differentiated, so they may stop early (a
    `lax.while_loop` while some lane under `vmap` is live; the same values as the full scan, whose converged
    iterations are no-ops)."""
    token = _FORWARD_ONLY.set(True)
    try:
        yield
    finally:
        _FORWARD_ONLY.reset(token)


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


def _start(w: Points, wa: Points, dirs: Points, iterations: int):
    """EPA's initial polytope from a tetrahedron (w, wa (4, 3); dirs (4, 3) the support directions of its points):
    (verts, vera, vdir) (4 + iterations, 3), faces (4 + 2 iterations, 3), face mask; faces counter-clockwise seen
    from outside."""
    dt = w.dtype
    nv, nf = 4 + iterations, 4 + 2 * iterations
    vol = jp.dot(jp.cross(w[1] - w[0], w[2] - w[0]), w[3] - w[0])
    order = jp.where(vol > 0, jp.array([1, 0, 2, 3]), jp.arange(4))
    verts = jp.zeros((nv, 3), dt).at[:4].set(w[order])
    vera = jp.zeros((nv, 3), dt).at[:4].set(wa[order])
    vdir = jp.zeros((nv, 3), dt).at[:4].set(dirs[order])
    tet = jp.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], jp.int32)
    faces = jp.zeros((nf, 3), jp.int32).at[:4].set(tet)
    return verts, vera, vdir, faces, jp.arange(nf) < 4


def _expand(sup: SupportFn, tol: Scalar, state: tuple, it: Scalar) -> tuple:
    """One EPA iteration on state (verts, vera, vdir, faces, fvalid, done, best): the face nearest the origin, kept
    in best = (distance, normal, witness a, witness b, its vertex ids (3,)) when sound (its distance must not fall
    below the best one's, else rounding on sliver faces: the expansion ends); the support point along its normal
    added as vertex 4 + it, the faces it sees removed and its horizon edges joined to it."""
    verts, vera, vdir, faces, fvalid, done, best = state
    nv, nf = verts.shape[0], faces.shape[0]
    n, dist, area = triangle_normals(verts, faces)  # (nf, 3), (nf,), (nf,)
    live = fvalid & (area > 1e-30)
    f = first_min(jp.where(live, dist, jp.inf))
    nrm, fd = n[f], dist[f]
    sound = fd >= best[0] - tol
    take = ~done & sound
    wit_a, wit_b = _witness(nrm, fd, verts[faces[f]], vera[faces[f]])
    best = tuple(jp.where(take, x, y) for x, y in zip((fd, nrm, wit_a, wit_b, faces[f]), best))
    a, b = sup(nrm)
    p = a - b
    converged = jp.dot(p, nrm) - fd <= tol
    new = 4 + it
    verts2, vera2, vdir2 = verts.at[new].set(p), vera.at[new].set(a), vdir.at[new].set(nrm)
    # faces seen from p
    vis = fvalid & (dot3(n, p - verts[faces[:, 0]]) > tol)
    vis = vis | (jp.arange(nf) == f)
    e0 = faces.reshape(-1)  # edge k of face i: (faces[i,k], faces[i,(k+1)%3])
    e1 = jp.roll(faces, -1, axis=1).reshape(-1)
    evis = jp.repeat(vis, 3)
    # horizon: a visible face's edge whose twin (reversed edge) is in no visible face; the visible directed edges
    # are marked in a (nv, nv) table, O(nv^2 + nf) rather than comparing all edge pairs
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
    new_state = (verts2, vera2, vdir2, faces2, fvalid2)
    kept = tuple(jp.where(stop, x, y) for x, y in zip((verts, vera, vdir, faces, fvalid), new_state))
    return kept + (stop, best)


def _final(state: tuple, tol: Scalar) -> tuple:
    """EPA's answer from its last state: the nearest face of the final polytope where the loop ran out of
    iterations while sound, else the best face kept. (distance, normal, witness a, witness b, vertex ids (3,))."""
    verts, vera, _, faces, fvalid, done, best = state
    n, dist, area = triangle_normals(verts, faces)
    f = first_min(jp.where(fvalid & (area > 1e-30), dist, jp.inf))
    final = (dist[f], n[f]) + _witness(n[f], dist[f], verts[faces[f]], vera[faces[f]]) + (faces[f],)
    use_final = ~done & (dist[f] >= best[0] - tol)
    return tuple(jp.where(use_final, x, y) for x, y in zip(final, best))


def _no_face(dt) -> tuple:
    zero3 = jp.zeros(3, dt)
    return jp.asarray(-jp.inf, dt), zero3, zero3, zero3, jp.zeros(3, jp.int32)


def epa(sup: SupportFn, w: Points, wa: Points, tol: Scalar, iterations: int = EPA_ITERATIONS,
        limit: Scalar | None = None) -> tuple[Scalar, Vec3, Vec3, Vec3]:
    """EPA from an enclosing tetrahedron: (depth, normal (3,), witness a (3,), witness b (3,)), a fixed scan of
    `iterations` (converged iterations are no-ops; derivatives go through every iteration).

    The nearest face's distance is a lower bound of the depth that must not decrease; an iteration that
    would decrease it (rounding on sliver faces) ends the expansion and the last sound answer is kept.
    limit: () int, traced per pair (at most `iterations`): the iterations from `limit` on are no-ops, so that the
    answer is that of a scan of `limit` iterations (the polytope's capacity, 4 + `iterations` vertices, only adds
    unused slots): pairs of different iteration counts share one compiled EPA (`general.general_mixed`).
    Inside `forward_only` (a loop body that is never differentiated) it is a `lax.while_loop` that stops at the first
    iteration where the expansion is done or at the limit, with the same values as the scan (whose later iterations
    are no-ops): under `vmap` it runs while any lane is live, not always `iterations` trips."""
    state = _start(w, wa, jp.zeros_like(w), iterations) + (jp.zeros((), bool), _no_face(w.dtype))
    if _FORWARD_ONLY.get():  # not differentiated: stop once done or at the pair's own count (same values)
        stop_at = iterations if limit is None else jp.minimum(limit, iterations)

        def live(c):
            return ~c[0][5] & (c[1] < stop_at)

        def step(c):
            return _expand(sup, tol, c[0], c[1]), c[1] + 1

        state, _ = jax.lax.while_loop(live, step, (state, jp.zeros((), jp.int32)))
        return _final(state, tol)[:4]

    def body(s, it):
        new = _expand(sup, tol, s, it)
        if limit is not None:  # beyond the pair's own count: the state is kept as it is (not marked done)
            new = jax.tree_util.tree_map(lambda x, y: jp.where(it < limit, x, y), new, s)
        return new, None

    state, _ = jax.lax.scan(body, state, jp.arange(iterations))
    return _final(state, tol)[:4]


def epa_polytopes(sup: SupportFn, w: Points, wa: Points, dirs: Points, tol: Scalar, skip: Scalar,
                  iterations: int = EPA_ITERATIONS) -> tuple[Scalar, Vec3, Vec3, Vec3]:
    """EPA for two polytopes, as `epa`, but only until it converges and not at all where `skip` (() bool): a
    `lax.while_loop` (under vmap it runs while any lane runs) that sees the geometry through `lax.stop_gradient`
    and records each polytope vertex's support direction (dirs (4, 3): the tetrahedron's). The answer's face is
    then rebuilt from live support points along its three recorded directions: a polytope's support point is
    piecewise constant in the direction, so the depth, normal and witnesses and their derivatives are exact (almost
    everywhere) and no derivative passes through the loop."""
    dt = w.dtype

    def sup_fixed(d):
        return jax.tree_util.tree_map(jax.lax.stop_gradient, sup(d))

    w, wa, dirs = (jax.lax.stop_gradient(x) for x in (w, wa, dirs))
    state = _start(w, wa, dirs, iterations) + (jp.asarray(skip), _no_face(dt))

    def body(c):
        state, it = c
        return _expand(sup_fixed, tol, state, it), it + 1

    state, _ = jax.lax.while_loop(lambda c: ~c[0][5] & (c[1] < iterations), body, (state, jp.zeros((), jp.int32)))
    face = _final(state, tol)[4]
    a, b = jax.vmap(sup)(jax.lax.stop_gradient(state[2][face]))  # live support points of the answer's face
    tri = a - b
    n, dist, _ = triangle_normals(tri, jp.arange(3, dtype=jp.int32)[None])
    wit_a, wit_b = _witness(n[0], dist[0], tri, a)
    return dist[0], n[0], wit_a, wit_b


def complete_simplex(sup: SupportFn, w: Points, wa: Points, mask: Mask, dirs: Points | None = None) -> tuple:
    """A tetrahedron (4, 3) (and its geom1 points (4, 3)) around a GJK segment or triangle that the origin (nearly)
    lies on, for EPA: the segment gets the support point along a direction perpendicular to it, the triangle the
    support point along its normal on the origin's side (as MuJoCo starts EPA from a 2- or 3-simplex). Also
    returns whether the tetrahedron has volume, and, given the simplex's support directions dirs (4, 3), the
    tetrahedron's (4, 3)."""
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
    if dirs is None:
        return tet, teta, vol > 1e-9 * size**3
    d = dirs[order]
    tdir = jp.stack([d[0], d[1], jp.where(k >= 3, d[2], jp.cross(e, axis)), side * nrm])
    return tet, teta, vol > 1e-9 * size**3, tdir
