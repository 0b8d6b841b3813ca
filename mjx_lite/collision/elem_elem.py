"""Closed-form distance and penetration of two flex elements (edges, triangles, tetrahedra): the exact result of
MuJoCo's GJK/EPA on two elements thickened by their radii (mjc_ConvexElem), without its iterations.

Two convex polytopes A (dim1 + 1 vertices) and B (dim2 + 1 vertices), their cores; the radii are added after
(a ball's support adds r in every direction, so the thickened shapes have the cores' normal and their distance less
r1 + r2):
  - Intersection and penetration by separating axes: the Minkowski difference A - B is a polytope whose facet
    normals are A's facet normals (u = the outward normal: A's maximum along u is that facet), B's (u = minus its
    outward normal) and the cross products of an edge of each (both signs). The overlap along a unit u,
    max(A.u) - min(B.u), is at least the penetration depth for every u and equals it at the best facet, so the
    smallest overlap over these axes is the depth (A and B are apart when it is negative). A triangle's facets are
    its two sides and, for the flat case (two elements in one plane: a degenerate Minkowski difference), the
    in-plane outward normals of its edges; an edge against a triangle has the in-plane normals of the edge too.
    Axes of zero length (parallel edges) are left out; the overlap along any other unit vector, however rounded,
    bounds the depth from above and proves separation when negative, so rounding cannot make a false contact.
  - Distance of separated cores: the nearest of the feature pairs that can hold the nearest points: a vertex of
    one against a face of the other (its projection inside the face) and every pair of edges (clamped segment
    nearest points).
  - Points: separated, the nearest points a, b (normal (b - a) / |b - a|); intersecting, by the depth's axis u:
    a facet of A (B's deepest vertex b, a = b + depth u), a facet of B (A's deepest vertex a, b = a - depth u), an
    edge pair (their nearest points). Normal from A to B; `collide` returns what flex_flex writes into a contact.
Ties (parallel edges or faces: a segment or face of nearest points) take the first candidate; MuJoCo's EPA takes
some point of the same set.

`separated` is a cheap first test (an element's facets only, written elementwise on (3, n) points, no small matrix
products or gathers, which XLA runs slowly on the CPU under vmap) that leaves most candidate pairs out before `collide`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import safe_norm

__all__ = ["EDGES", "collide", "core", "separated"]

EDGES = {1: ((0, 1),), 2: ((0, 1), (1, 2), (2, 0)), 3: ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))}
# faces (a tetrahedron's: the face opposite vertex i is i-th) and the vertex off each face (a triangle: none)
FACES = {1: (), 2: ((0, 1, 2),), 3: ((1, 2, 3), (0, 2, 3), (0, 1, 3), (0, 1, 2))}
OPPOSITE = {1: (), 2: (None,), 3: (0, 1, 2, 3)}


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b):
    return jp.stack([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]])


def _norm(a):
    """|a| (...,) of a (3, ...), with a zero gradient at 0."""
    sq = _dot(a, a)
    pos = sq > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, sq, 1.0)), 0.0)


def _unit(w, tiny):
    """(w / |w|, |w| > tiny) (w unchanged where short)."""
    n = _norm(w)
    ok = n > tiny
    return w / jp.where(ok, n, 1.0), ok


def _facets(dim, x, other, tiny):
    """[(outward normal, ok)] of the facets of the element x (list of dim + 1 points): a triangle's both sides and
    its edges' in-plane outward normals, a tetrahedron's faces, an edge's normals in the plane of `other` (a
    triangle, else None: none), both signs."""
    out = []
    if dim == 1 and other is not None:
        u, k = _unit(_cross(_cross(other[1] - other[0], other[2] - other[0]), x[1] - x[0]), tiny)
        out += [(u, k), (-u, k)]
    if dim == 2:
        nrm = _cross(x[1] - x[0], x[2] - x[0])
        u, k = _unit(nrm, tiny)
        out += [(u, k), (-u, k)]
        for i, j in EDGES[2]:
            w = _cross(x[j] - x[i], nrm)
            w = jp.where(_dot(x[3 - i - j] - x[i], w) > 0, -w, w)  # away from the third vertex
            out.append(_unit(w, tiny))
    if dim == 3:
        for (i, j, k), o in zip(FACES[3], OPPOSITE[3]):
            w = _cross(x[j] - x[i], x[k] - x[i])
            w = jp.where(_dot(x[o] - x[i], w) > 0, -w, w)
            out.append(_unit(w, tiny))
    return out


def separated(dim1: int, dim2: int, x1: jax.Array, x2: jax.Array, gap) -> jax.Array:
    """(n,) bool: a facet of either element (`_facets`: a triangle's sides and in-plane edge normals, an edge's
    normals in the triangle's plane) separates the elements x1 (n, dim1 + 1, 3) and x2 (n, dim2 + 1, 3) (dims 1 and
    2) by more than `gap`: a cheap test (a tenth of `collide`'s work) that such a pair is no contact."""
    v1 = list(jp.moveaxis(x1, 0, -1))
    v2 = list(jp.moveaxis(x2, 0, -1))
    tiny = jp.finfo(x1.dtype).tiny ** 0.5
    out = jp.zeros(x1.shape[0], bool)
    for va, vb, dim, other in ((v1, v2, dim1, v2 if dim2 == 2 else None), (v2, v1, dim2, v1 if dim1 == 2 else None)):
        for u, ok in _facets(dim, va, other, tiny):
            lo = jp.min(jp.stack([_dot(p, u) for p in vb]), axis=0)
            hi = jp.max(jp.stack([_dot(p, u) for p in va]), axis=0)
            out = out | (ok & (lo - hi > gap))
    return out


# ---- the collider: features stacked along array axes, vmapped over the pairs (unrolled into elementwise operations
# on (3, n) points as `separated` is, the triangle pairs ran ~1.5x as fast on the CPU but compiled 8x as long, and
# two tetrahedra's 36 edge pairs for minutes)

_SEDGES = {k: np.array(v) for k, v in EDGES.items()}
_SFACES = {1: np.zeros((0, 3), int), 2: np.array(FACES[2]), 3: np.array(FACES[3])}
_SOPP = {1: np.zeros(0, int), 2: np.array([-1]), 3: np.array(OPPOSITE[3])}


def _s_dot(a, b):
    return jp.sum(a * b, axis=-1)


def _s_unit(w, tiny):
    """(w / |w|, |w| > tiny) (w unchanged where short)."""
    n = safe_norm(w, keepdims=True)
    ok = n[..., 0] > tiny
    return w / jp.where(n > tiny, n, 1.0), ok


def _s_segments(p1, q1, p2, q2):
    """Nearest points (a, b) (..., 3) of the segments p1q1 and p2q2 (broadcast; parallel: s = 0's)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, f = _s_dot(d1, d1), _s_dot(d2, d2), _s_dot(d2, r)
    c, b = _s_dot(d1, r), _s_dot(d1, d2)
    den = a * e - b * b
    tiny = jp.finfo(den.dtype).eps * a * e
    s = jp.where(den > tiny, jp.clip((b * f - c * e) / jp.where(den > tiny, den, 1.0), 0.0, 1.0), 0.0)
    e_s, a_s = jp.where(e > 0, e, 1.0), jp.where(a > 0, a, 1.0)
    t = (b * s + f) / e_s
    s = jp.where(t < 0, jp.clip(-c / a_s, 0.0, 1.0), jp.where(t > 1, jp.clip((b - c) / a_s, 0.0, 1.0), s))
    t = jp.clip(t, 0.0, 1.0)
    return p1 + s[..., None] * d1, p2 + t[..., None] * d2


def _s_vertex_face(p, tri):
    """(distance, nearest face point) of points p (n, 3) to the faces tri (m, 3, 3), (n, m): the projection onto the
    face's plane where it lies inside the face, else inf."""
    v0, v1, v2 = tri[:, 0], tri[:, 1], tri[:, 2]
    nrm = jp.cross(v1 - v0, v2 - v0)  # (m, 3)
    nn = _s_dot(nrm, nrm)
    nn_s = jp.where(nn > 0, nn, 1.0)
    h = _s_dot(p[:, None] - v0[None], nrm[None]) / nn_s  # (n, m) in units of |nrm|
    q = p[:, None] - h[..., None] * nrm[None]  # projections (n, m, 3)
    inside = nn > 0
    for a, b in ((v0, v1), (v1, v2), (v2, v0)):
        inside = inside & (_s_dot(jp.cross(b - a, q - a[None]), nrm[None]) >= 0)
    dist = jp.abs(h) * jp.sqrt(nn_s)
    return jp.where(inside, dist, jp.inf), q


def _s_facets(dim, x, other=None):
    """(normals (f, 3), ok (f,)) of the facets of the element x (dim + 1, 3), outward; a triangle's both sides and
    its edges' in-plane outward normals; an edge's normals in the plane of `other` (a triangle), both signs."""
    dt = x.dtype
    tiny = jp.finfo(dt).tiny ** 0.5
    out, ok = [], []
    if dim == 1 and other is not None:
        n2 = jp.cross(other[1] - other[0], other[2] - other[0])
        w = jp.cross(n2, x[1] - x[0])
        u, k = _s_unit(w, tiny)
        out += [u, -u]
        ok += [k, k]
    if dim == 2:
        nrm = jp.cross(x[1] - x[0], x[2] - x[0])
        u, k = _s_unit(nrm, tiny)
        out += [u, -u]
        ok += [k, k]
        for i, j in _SEDGES[2]:
            o = 3 - i - j  # the third vertex
            w = jp.cross(x[j] - x[i], nrm)
            w = jp.where(_s_dot(x[o] - x[i], w) > 0, -w, w)
            u, k = _s_unit(w, tiny)
            out.append(u)
            ok.append(k)
    if dim == 3:
        for f, o in zip(_SFACES[3], _SOPP[3]):
            w = jp.cross(x[f[1]] - x[f[0]], x[f[2]] - x[f[0]])
            w = jp.where(_s_dot(x[o] - x[f[0]], w) > 0, -w, w)
            u, k = _s_unit(w, tiny)
            out.append(u)
            ok.append(k)
    if not out:
        return jp.zeros((0, 3), dt), jp.zeros(0, bool)
    return jp.stack(out), jp.stack(ok)


def core(dim1: int, dim2: int, x1: jax.Array, x2: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(signed core distance (): |b - a| apart, minus the penetration depth when the cores intersect, a (3,) on A,
    b (3,) on B, normal (3,) from A to B) of the elements x1 (dim1 + 1, 3) and x2 (dim2 + 1, 3)."""
    dt = x1.dtype
    tiny = jp.finfo(dt).tiny ** 0.5
    E1, E2 = _SEDGES[dim1], _SEDGES[dim2]
    # every edge pair's nearest points (the separated candidates and the edge-edge axes' points)
    ea, eb = _s_segments(x1[E1[:, 0]][:, None], x1[E1[:, 1]][:, None], x2[E2[:, 0]][None], x2[E2[:, 1]][None])
    ea, eb = ea.reshape(-1, 3), eb.reshape(-1, 3)
    # separating axes: A's facets, B's facets (negated), edge crosses (both signs)
    fa, oka = _s_facets(dim1, x1, x2 if dim2 == 2 else None)
    fb, okb = _s_facets(dim2, x2, x1 if dim1 == 2 else None)
    d1 = (x1[E1[:, 1]] - x1[E1[:, 0]])[:, None]
    d2 = (x2[E2[:, 1]] - x2[E2[:, 0]])[None]
    w = jp.cross(d1, d2).reshape(-1, 3)
    lens = (safe_norm(d1) * safe_norm(d2)).reshape(-1)
    uc, okc = _s_unit(w, tiny)
    okc = okc & (safe_norm(w) > 16 * jp.finfo(dt).eps * lens)
    axes = jp.concatenate([fa, -fb, uc, -uc])
    ok = jp.concatenate([oka, okb, okc, okc])
    na, nb, nc = fa.shape[0], fb.shape[0], uc.shape[0]
    p1, p2 = x1 @ axes.T, x2 @ axes.T  # (nv, naxes)
    overlap = jp.where(ok, jp.max(p1, axis=0) - jp.min(p2, axis=0), jp.inf)
    i = jp.argmin(overlap)
    depth = overlap[i]
    u = axes[i]
    # intersecting: the points of the depth's axis
    bdeep = x2[jp.argmin(p2[:, i])]
    adeep = x1[jp.argmax(p1[:, i])]
    ic = jp.clip(i - na - nb, 0, 2 * nc - 1) % jp.maximum(nc, 1)
    pa = jp.where(i < na, bdeep + depth * u, jp.where(i < na + nb, adeep, ea[ic]))
    pb = jp.where(i < na, bdeep, jp.where(i < na + nb, adeep - depth * u, eb[ic]))
    # separated: the nearest feature pair
    da, db, dd = [ea], [eb], [safe_norm(eb - ea)]
    if dim2 >= 2:
        dist, q = _s_vertex_face(x1, x2[_SFACES[dim2]])
        da.append(jp.repeat(x1, len(_SFACES[dim2]), axis=0))
        db.append(q.reshape(-1, 3))
        dd.append(dist.reshape(-1))
    if dim1 >= 2:
        dist, q = _s_vertex_face(x2, x1[_SFACES[dim1]])
        db.append(jp.repeat(x2, len(_SFACES[dim1]), axis=0))
        da.append(q.reshape(-1, 3))
        dd.append(dist.reshape(-1))
    da, db, dd = jp.concatenate(da), jp.concatenate(db), jp.concatenate(dd)
    j = jp.argmin(dd)
    sa, sb = da[j], db[j]
    sn, sok = _s_unit(sb - sa, tiny)
    inter = depth > 0
    a, b = jp.where(inter, pa, sa), jp.where(inter, pb, sb)
    n = jp.where(inter | ~sok, u, sn)
    return jp.where(inter, -depth, dd[j]), a, b, n


def collide(dim1: int, dim2: int, x1: jax.Array, x2: jax.Array, r1, r2) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist (n,), pos (n, 3), normal (n, 3)) of the elements x1 (n, dim1 + 1, 3), x2 (n, dim2 + 1, 3) thickened by
    r1, r2: MuJoCo's contact of each pair (dist between the thickened surfaces, pos midway between them, normal from
    element 1 to element 2)."""
    dist, a, b, n = jax.vmap(lambda p, q: core(dim1, dim2, p, q))(x1, x2)
    pos = 0.5 * (a + b) + 0.5 * (r1 - r2) * n
    return dist - r1 - r2, pos, n
