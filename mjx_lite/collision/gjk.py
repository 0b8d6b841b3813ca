"""GJK: the distance of two convex shapes from their support maps (MuJoCo's gjk in engine_collision_gjk.c).

A simplex of at most 4 Minkowski-difference points w = a - b (a on geom1, b on geom2); each iteration adds the
support point along -v (v: the simplex's point nearest the origin) and reduces the simplex to the sub-simplex
nearest the origin (`nearest_on_simplex`: all 15 sub-simplices in closed form, as MuJoCo's signed-volume
subdistance). It ends when the origin is enclosed (penetration: EPA takes over, `epa.py`) or the gap is below
the tolerance. `gjk` runs a fixed GJK_ITERATIONS scan (converged iterations are no-ops, so values and gradients are
the converged answer's); `gjk_polytopes` is the early-exit form for polytope pairs, whose derivatives come from
support points rebuilt outside the loop. `sup(d)` returns the support points (geom1 along d, geom2 along -d).
Shapes: w, wa (4, 3) simplex points (Minkowski difference, geom1's); mask, lam (4,); v (3,).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.polytope import first_min
from mjx_lite.collision.types import Mask, Points, Scalar, SupportFn, Values, Vec3
from mjx_lite.math import dot3

GJK_ITERATIONS = 40
# GJK's result: (simplex w (4, 3), its geom1 points wa (4, 3), mask (4,), nearest point v (3,), barycentric weights
# lam (4,), whether the simplex encloses the origin ())
Simplex = tuple[Points, Points, Mask, Vec3, Values, Scalar]
_PAIRS = np.array(list(itertools.combinations(range(4), 2)), np.int32)  # (6, 2)
_TRIPLES = np.array(list(itertools.combinations(range(4), 3)), np.int32)  # (4, 3)
# one-hot maps from each subset's barycentric coordinates to the 4 simplex slots, in _SUBSETS order
_ONEHOT = [np.eye(4)[s] for s in (np.arange(4)[:, None], _PAIRS, _TRIPLES, np.arange(4)[None])]


def _nearest_on_simplex(w: Points, mask: Mask) -> tuple[Vec3, Values, Mask]:
    """Nearest point to the origin of conv(w[mask]): (point (3,), barycentric (4,), support mask (4,)).

    Every non-empty subset (4 points, 6 segments, 4 triangles, the tetrahedron) is solved in closed form, all
    subsets of a size at once (segments by projection, triangles and the tetrahedron by signed areas and
    volumes, which are better conditioned in float32 than the normal equations); the nearest point
    among those with non-negative barycentric coordinates and a non-degenerate hull wins (the first on ties).
    """
    dt = w.dtype
    scale = jp.maximum(jp.max(dot3(w, w)), 1e-30)
    # segments
    a, b = w[_PAIRS[:, 0]], w[_PAIRS[:, 1]]
    e = b - a
    g = dot3(e, e)
    ok2 = mask[_PAIRS[:, 0]] & mask[_PAIRS[:, 1]] & (g > 1e-12 * scale)
    mu2 = -dot3(e, a) / jp.where(ok2, g, 1.0)
    lam2 = jp.stack([1 - mu2, mu2], -1)
    # triangles: barycentric coordinates of the origin's projection onto the plane, from signed areas (the first
    # vertex's as the remainder, so that they sum to 1 and a valid point lies on the triangle)
    a, b, c = (w[_TRIPLES[:, k]] for k in range(3))
    n = jp.cross(b - a, c - a)
    nn = dot3(n, n)  # = det of the edges' Gram matrix
    ok3 = mask[_TRIPLES[:, 0]] & mask[_TRIPLES[:, 1]] & mask[_TRIPLES[:, 2]] & (nn > 1e-12 * scale**2)
    mu = jp.stack([dot3(n, jp.cross(c - a, a)), dot3(n, jp.cross(a, b - a))], -1)
    mu = mu / jp.where(ok3, nn, 1.0)[:, None]
    lam3 = jp.stack([1 - (mu[:, 0] + mu[:, 1]), mu[:, 0], mu[:, 1]], -1)
    # tetrahedron: barycentric coordinates of the origin from signed volumes
    a, b, c, d = w
    vol = jp.dot(b - a, jp.cross(c - a, d - a))  # its square is the det of the edges' Gram matrix
    ok4 = jp.all(mask) & (vol * vol > 1e-12 * scale**3)
    sub = jp.stack([-jp.dot(a, jp.cross(c - a, d - a)), -jp.dot(b - a, jp.cross(a, d - a)),
                    -jp.dot(b - a, jp.cross(c - a, a))]) / jp.where(ok4, vol, 1.0)  # fmt: skip
    lam4 = jp.concatenate([1 - jp.sum(sub, keepdims=True), sub])[None]
    lams = [jp.ones((4, 1), dt), lam2, lam3, lam4]
    oks = [mask, ok2 & (mu2 >= 0) & (mu2 <= 1), ok3 & (lam3[:, 0] >= 0) & (mu[:, 0] >= 0) & (mu[:, 1] >= 0),
            (ok4 & jp.all(lam4 >= 0))[None]]
    lam = jp.concatenate([sum(l[:, k, None] * jp.asarray(h[:, k], dt) for k in range(h.shape[1]))
                           for l, h in zip(lams, _ONEHOT)])  # (15, 4): each subset's weights scattered to its slots
    ok = jp.concatenate(oks)
    v = lam @ w  # (15, 3)
    k = first_min(jp.where(ok, dot3(v, v), jp.inf))
    found = jp.any(ok)
    best_l = jp.where(found, lam[k], 0.0)
    return jp.where(found, v[k], 0.0), best_l, best_l > 0


def gjk_step(sup: SupportFn, w: Points, mask: Mask, v: Vec3, tol: Scalar
             ) -> tuple[Scalar, Scalar, Vec3, Points, Mask, Vec3, Values]:
    """One GJK iteration from simplex (w (4, 3), mask (4,)) and nearest point v: the support point along -v put in
    the first free slot, the simplex reduced to the sub-simplex nearest the origin. Returns (converged (), slot (),
    geom1's support point (3,), the grown simplex (4, 3), its kept mask (4,), new nearest point (3,), its
    barycentric weights (4,))."""
    a, b = sup(-v)
    p = a - b
    vv = jp.sum(v * v)
    converged = (vv - jp.dot(v, p) <= tol * tol) | (vv <= tol * tol)
    converged = converged | jp.any(mask & jp.all(w == p, axis=1))  # no progress: p is already in the simplex
    slot = jp.argmin(mask)
    w2 = w.at[slot].set(p)
    v2, lam2, keep = _nearest_on_simplex(w2, mask.at[slot].set(True))
    # no progress: the nearest point must get strictly nearer (in float32 a pose can add and drop the same support
    # point for ever, its gap v . (v - p) just above tol^2)
    converged = converged | (jp.any(mask) & (jp.dot(v2, v2) >= vv))
    return converged, slot, a, w2, keep, v2, lam2


def gjk(sup: SupportFn, v0: Vec3, tol: Scalar) -> Simplex:
    """GJK on the Minkowski difference: returns (w, wa, mask, v, lam, inside)."""
    dt = v0.dtype
    w = jp.zeros((4, 3), dt)
    wa = jp.zeros((4, 3), dt)
    mask = jp.zeros(4, bool)
    lam = jp.zeros(4, dt)

    def body(carry, _):
        w, wa, mask, v, lam, done = carry
        converged, slot, a, w2, keep, v2, lam2 = gjk_step(sup, w, mask, v, tol)
        wa2 = wa.at[slot].set(a)
        stop = done | converged
        out = (
            jp.where(stop, w, w2), jp.where(stop, wa, wa2), jp.where(stop, mask, keep),
            jp.where(stop, v, v2), jp.where(stop, lam, lam2), stop | (jp.sum(keep) == 4),
        )  # fmt: skip
        return out, None

    carry = (w, wa, mask, v0, lam, jp.zeros((), bool))
    (w, wa, mask, v, lam, _), _ = jax.lax.scan(body, carry, None, length=GJK_ITERATIONS)
    inside = jp.sum(mask) == 4
    return w, wa, mask, v, lam, inside


def gjk_polytopes(sup: SupportFn, v0: Vec3, tol: Scalar, skip: Scalar) -> tuple[Simplex, Points]:
    """GJK for two polytopes, as `gjk`, but run only where needed and only until it converges: a `lax.while_loop`
    bounded by GJK_ITERATIONS whose lanes start finished where `skip` (() bool; under vmap the loop runs while any
    lane runs). The loop sees the geometry through `lax.stop_gradient` and records each simplex vertex's search
    direction; the simplex is then rebuilt from live support points along those fixed directions. A polytope's
    support point is piecewise constant in the direction, so derivatives through the rebuilt simplex are exact
    (almost everywhere) and none pass through the loop. Returns (w, wa, mask, v, lam, inside) as `gjk`, and the
    simplex's support directions (4, 3)."""
    dt = v0.dtype
    v0 = jax.lax.stop_gradient(v0)

    def sup_fixed(d):
        return jax.tree_util.tree_map(jax.lax.stop_gradient, sup(d))

    def body(carry):
        w, dirs, mask, v, it, _ = carry
        c, slot, _, w2, keep, v2, _ = gjk_step(sup_fixed, w, mask, v, tol)
        dirs2 = dirs.at[slot].set(-v)
        return (jp.where(c, w, w2), jp.where(c, dirs, dirs2), jp.where(c, mask, keep), jp.where(c, v, v2), it + 1,
                c | (jp.sum(keep) == 4))  # fmt: skip

    init = (jp.zeros((4, 3), dt), jp.zeros((4, 3), dt), jp.zeros(4, bool), v0, jp.zeros((), jp.int32), skip)
    _, dirs, mask, _, _, _ = jax.lax.while_loop(lambda c: ~c[5] & (c[4] < GJK_ITERATIONS), body, init)
    dirs = jax.lax.stop_gradient(dirs)
    wa, wb = jax.vmap(sup)(dirs)  # live support points along the recorded directions
    w = wa - wb
    v, lam, _ = _nearest_on_simplex(w, mask)
    return (w, wa, mask, v, lam, jp.sum(mask) == 4), dirs
