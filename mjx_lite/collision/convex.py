"""General convex collisions: GJK (distance) and EPA (penetration) on support functions, fixed iterations.

`general` serves every pair without a collider of its own (`driver.collider_for`): ellipsoids against every geom
but planes and height fields, and with multiccd disabled box-mesh, mesh-mesh and the cylinder pairs, so no convex
pair is refused. The geom types are traced per pair, so all
general pairs of a model form one group (two: those with a curved shape and no mesh, `general_curved`, and the
others, `general` or `general_plain`): GJK/EPA is compiled once or twice per model, not once per type pair.
Spheres and capsules enter as their core (point, segment) plus a radius, which makes those pairs exact up to
the iteration tolerance. Meshes use their vertices (the support of the vertex set is that of its hull).

Algorithm (one pair, fixed shapes, no data-dependent Python control flow):
  GJK: simplex of <= 4 Minkowski-difference points w = a - b (a on geom1, b on geom2); each iteration adds
       the support point in direction -v and replaces the simplex by the face of the new simplex nearest the
       origin (all 15 sub-simplices are evaluated, the nearest with non-negative barycentric coordinates
       wins). Ends when the origin is enclosed (penetration) or the gap is below tolerance.
  EPA: from the enclosing tetrahedron, the polytope (fixed capacity EPA_ITERATIONS vertices) is expanded
       toward the face nearest the origin: the faces seen from the new support point are removed and the
       horizon edges are connected to it.
  Curved pairs (an ellipsoid or a cylinder): GJK/EPA's normal is refined by Newton's method on the Minkowski
       difference's support function (`_refine_normal`), which GJK/EPA's tolerance on its value leaves only
       square-root accurate (float32: up to 0.3 rad before, 2e-4 after); EPA then runs EPA_ITERATIONS_CURVED.
Converged iterations become no-ops, so forward values and gradients are those of the converged answer.
One contact per pair (MuJoCo with the multiccd flag disabled; MuJoCo's multi-point face manifolds for
general convex pairs are not reproduced).
"""

from __future__ import annotations

import itertools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.segment import segments_closest
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo
from mjx_lite.math import dot3, outer3, safe_norm, safe_normalize
from mjx_lite.types import GeomType

GENERAL_NCON = 1
PLANE_MESH_NCON = 3  # support vertex + up to 2 hull neighbours (MuJoCo maxplanemesh)
_PLANE_MESH_TOL = 0.3  # extra plane-mesh contacts at least this times rbound from the first (tolplanemesh)
GJK_ITERATIONS = 40
EPA_ITERATIONS = 40
# pairs with a curved shape (ellipsoid, cylinder): EPA only brings the normal into reach of `_refine_normal`'s Newton
# steps, which make it exact (EPA's cost grows with the square of its iterations: 16 cost 0.3 of 40's)
EPA_ITERATIONS_CURVED = 16

# ---- support functions (world frame), core shapes: sphere -> point, capsule -> segment ------------------


def _support_local(gtype: int, size, vert, d):
    """Support point (core shape) of a geom in its own frame for local direction d (3,)."""
    if gtype == GeomType.SPHERE:
        return jp.zeros_like(d)
    if gtype == GeomType.CAPSULE:
        return jp.zeros_like(d).at[2].set(jp.where(d[2] >= 0, size[1], -size[1]))
    if gtype == GeomType.ELLIPSOID:
        sd = size * d
        return size * sd / jp.maximum(safe_norm(sd), 1e-30)
    if gtype == GeomType.CYLINDER:
        rxy = safe_norm(d[:2])
        scale = jp.where(rxy > 1e-15, size[0] / jp.where(rxy > 1e-15, rxy, 1.0), 0.0)
        return jp.stack([d[0] * scale, d[1] * scale, jp.where(d[2] >= 0, size[1], -size[1])])
    if gtype == GeomType.BOX:
        return jp.where(d >= 0, size, -size)
    if gtype == GeomType.MESH:  # the dot products written out: XLA on CPU runs vert @ d under vmap ~2x slower
        return vert[jp.argmax(vert[:, 0] * d[0] + vert[:, 1] * d[1] + vert[:, 2] * d[2])]
    raise NotImplementedError(f"convex collider: geom type {gtype}")


def _radius(gtype, size):
    """Core radius: sphere and capsule radius, else 0. `gtype` may be static or traced."""
    if isinstance(gtype, int):
        if gtype in (GeomType.SPHERE, GeomType.CAPSULE):
            return size[0]
        return jp.zeros((), size.dtype)
    return jp.where((gtype == GeomType.SPHERE) | (gtype == GeomType.CAPSULE), size[0], 0.0)


_CONVEX_TYPES = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX)


def _support(gtype, g: GeomInfo, d):
    """World support point (core shape) of geom g in direction d; `gtype` static int or traced (any type)."""
    local = g.mat.T @ d
    if isinstance(gtype, int):
        p = _support_local(gtype, g.size, g.vert, local)
    else:
        cands = [_support_local(t, g.size, None, local) for t in _CONVEX_TYPES]
        types = list(_CONVEX_TYPES)
        if g.vert is not None:
            cands.append(_support_local(GeomType.MESH, g.size, g.vert, local))
            types.append(GeomType.MESH)
        p = jp.select([gtype == t for t in types], cands, cands[0])
    return g.pos + g.mat @ p


CURVED = (GeomType.ELLIPSOID, GeomType.CYLINDER)  # core shapes whose support map has a nonzero derivative


def _support_jacobian(gtype, g: GeomInfo, d):
    """Derivative (3, 3) of the world support point `_support(gtype, g, d)` w.r.t. the direction d (a.e.): the
    ellipsoid's D (I - s s^T / |s|^2) D / |s| with s = D d, D = diag(size) (its radii of curvature at the support
    point), the cylinder side's r (I - u u^T) / |d_xy| in the xy plane (u = d_xy / |d_xy|; 0 at the cap's centre),
    0 for the piecewise constant supports (point, segment, box, mesh). `gtype` static or traced."""
    dt = d.dtype
    local = g.mat.T @ d

    def ellipsoid():
        size = g.size
        sd = size * local
        nsd = jp.maximum(safe_norm(sd), 1e-30)
        q = size * sd  # D^2 d
        return (jp.diag(size * size) - q[:, None] * q[None, :] / (nsd * nsd)) / nsd

    def cylinder():
        rxy = safe_norm(local[:2])
        ok = rxy > 1e-6 * g.size[0]
        u = local[:2] / jp.where(ok, rxy, 1.0)
        j2 = g.size[0] / jp.where(ok, rxy, 1.0) * (jp.eye(2, dtype=dt) - u[:, None] * u[None, :])
        return jp.zeros((3, 3), dt).at[:2, :2].set(jp.where(ok, j2, 0.0))

    if isinstance(gtype, int):
        jl = ellipsoid() if gtype == GeomType.ELLIPSOID else cylinder() if gtype == GeomType.CYLINDER else None
        if jl is None:
            return jp.zeros((3, 3), dt)
    else:
        jl = jp.where(gtype == GeomType.ELLIPSOID, ellipsoid(), jp.where(gtype == GeomType.CYLINDER, cylinder(), 0.0))
    return g.mat @ jl @ g.mat.T


_KINK_COS = 1e-3  # a direction this close to a support map's kink (|cos| below it) is taken to lie on it


def _support_feature(gtype, g: GeomInfo, d):
    """The shape of geom g's core support set along the unit direction d (within _KINK_COS of a kink): (unique ():
    one point, as a sphere's centre and an ellipsoid's always, a capsule's segment where d is not across its axis, a
    cylinder off its side lines and cap faces, a box off its faces and edges; never taken for a mesh; centre (3,),
    half-axis (3,) and segment (): a segment, as a capsule's axis across d, a cylinder's side line, a box edge).
    `gtype` static or traced."""
    dt = d.dtype
    local = g.mat.T @ d
    big = jp.abs(local) > _KINK_COS
    sign = jp.where(local >= 0, 1.0, -1.0).astype(dt)
    rxy = safe_norm(local[:2])
    radial = g.size[0] * local[:2] / jp.maximum(rxy, 1e-30)
    zero, yes, no, origin = jp.zeros((), dt), jp.ones((), bool), jp.zeros((), bool), jp.zeros(3, dt)
    axis = jp.stack([zero, zero, g.size[1]])
    k = jp.argmax(~big)  # a box edge: exactly one local component across it
    edge = jp.arange(3) == k
    # per type: (unique, local centre, local half-axis, segment)
    kinds = {
        GeomType.SPHERE: (yes, origin, origin, no),
        GeomType.ELLIPSOID: (yes, origin, origin, no),
        GeomType.CAPSULE: (big[2], origin, axis, ~big[2]),
        GeomType.CYLINDER: (big[2] & (big[0] | big[1]), jp.stack([radial[0], radial[1], zero]), axis,
                            ~big[2] & (rxy > _KINK_COS)),  # fmt: skip
        GeomType.BOX: (jp.all(big), jp.where(edge, 0.0, sign * g.size), jp.where(edge, g.size, 0.0),
                       jp.sum(~big) == 1),  # fmt: skip
    }
    default = (no, origin, origin, no)  # a mesh
    if isinstance(gtype, int):
        unique, c, h, seg = kinds.get(gtype, default)
    else:
        conds = [gtype == t for t in kinds]
        unique, c, h, seg = (jp.select(conds, [v[i] for v in kinds.values()], default[i]) for i in range(4))
    return unique, g.pos + g.mat @ c, g.mat @ h, seg


_REFINE_MESH_MAX = 32  # meshes with at most this many hull triangles + edges give their kinks to the refinement


def _small_mesh(gtype, g: GeomInfo) -> bool:
    """Whether g is (statically) a mesh with hull tables of at most _REFINE_MESH_MAX triangles + edges (a height
    field's prism: 8 + 9): its faces and edges are candidates of `_refine_normal`."""
    return (isinstance(gtype, int) and gtype == GeomType.MESH and g.face is not None and g.edge is not None
            and g.face.shape[0] + g.edge.shape[0] <= _REFINE_MESH_MAX)  # fmt: skip


def _mesh_kinks(gtype, g: GeomInfo):
    """For a mesh that is not small (`_small_mesh`), static or traced type with hull tables: (is a mesh (), world
    unit face normals (T, 3), and per edge its unit direction and the unit normals fa, fb of its two faces, stacked
    (3 E, 3), fa . fb (E,) and whether they make a kink (E,) (not a flat face's triangulation diagonal)), from which
    `_refine_normal` picks the kinks near its current normal; None otherwise."""
    if g.face is None or g.edge is None or g.vert is None or _small_mesh(gtype, g):
        return None
    if isinstance(gtype, int) and gtype != GeomType.MESH:
        return None
    is_mesh = jp.asarray(True) if isinstance(gtype, int) else gtype == GeomType.MESH
    w = g.vert  # in the geom frame (model data: once under a vmap over states), rotated at the end
    fn = _triangle_normals(w, g.face)[0]
    e = safe_normalize(w[g.edge[:, 1]] - w[g.edge[:, 0]])[0]
    fa, fb = fn[g.edge[:, 2]], fn[g.edge[:, 3]]
    c12 = dot3(fa, fb)
    return is_mesh, outer3(fn, g.mat), outer3(jp.concatenate([e, fa, fb]), g.mat), c12, 1 - c12 * c12 > 1e-8


_MESH_KINKS = 2  # kink circles per mesh (those of the edges whose Gauss arcs are nearest the normal) per iteration


def _near_kinks(kinks, d):
    """The mesh's kinks nearest the unit direction d along which it supports (`_mesh_kinks`): (the face normal
    nearest d (3,), with whether it is within _REFINE_STEP (); the directions (K, 3) of the _MESH_KINKS edges whose
    Gauss arcs (between their faces' normals fa, fb) pass nearest d, with whether d is within _REFINE_STEP of the
    arc (K,)). d is on an edge's arc where d . e = 0 and d = alpha fa + beta fb with alpha, beta >= 0: as fa and fb
    are normal to e, d . fa - (fa . fb) d . fb >= 0 and the same with fa, fb swapped."""
    is_mesh, fn, efab, c12, arc = kinks
    f = jp.argmax(dot3(fn, d[None]))
    ne = arc.shape[0]
    across, p1, p2 = jp.split(dot3(efab, d[None]), 3)  # (E,) each
    inside = arc & (p1 - c12 * p2 >= -1e-9) & (p2 - c12 * p1 >= -1e-9)
    score = jp.where(inside, jp.abs(across), jp.inf)
    idx = []
    for _ in range(min(_MESH_KINKS, ne)):  # the nearest, one after the other (cheaper than top_k on CPU)
        idx.append(jp.argmin(score))
        score = jp.where(jp.arange(ne) == idx[-1], jp.inf, score)
    idx = jp.stack(idx)
    ok = is_mesh & inside[idx] & (jp.abs(across[idx]) < jp.sin(_REFINE_STEP))
    return fn[f], is_mesh & (jp.dot(fn[f], d) > jp.cos(_REFINE_STEP)), efab[idx], ok


def _frame_kinks(gtype) -> tuple[list[int], list[int]]:
    """The frame axes (ids) along which a geom type's support function has kink circles (n . axis = 0: a box's
    edges, a capsule's or cylinder's side) and those that are corner normals (a box's faces, a cylinder's caps);
    every axis for a traced type. Spheres, ellipsoids and meshes have none (a mesh's kinks are its own edges)."""
    if not isinstance(gtype, int) or gtype == GeomType.BOX:
        return [0, 1, 2], [0, 1, 2]
    if gtype == GeomType.CYLINDER:
        return [2], [2]
    if gtype == GeomType.CAPSULE:
        return [2], []
    return [], []


REFINE_ITERATIONS = 8  # Newton steps on the contact normal of curved pairs (`_refine_normal`)
_REFINE_STEP = 0.25  # longest accepted step (rad)


def _refine_normal(t1, t2, g1: GeomInfo, g2: GeomInfo, n):
    """Newton's method on the contact normal of a pair with a curved core shape (ellipsoid, cylinder).

    The core shapes' signed distance is -min_n h(n) over unit n, h(n) = n . (S1(n) - S2(-n)) the support function of
    their Minkowski difference (for penetrating and separated pairs alike), and GJK/EPA's normal approximates the
    minimiser. GJK/EPA stop on the value of h, which is flat (quadratic) about a smooth minimum, so their normal is
    only as good as the square root of their tolerance (float32: up to 0.3 rad). Each iteration takes the lowest h
    among these candidates (none: the normal stays):
      * a Newton step on the sphere, and half of it: the gradient is the support point's part across n (exact to
        rounding), the Hessian E^T (J1(n) + J2(-n)) E - h I (J the supports' derivatives, `_support_jacobian`; E a
        basis across n), taken where that is positive definite;
      * where h has a kink along a circle n . a = 0 (a capsule's or a cylinder's side along its axis a, a box edge
        along a box axis, a mesh edge; a: the geoms' frame axes that are kink axes (`_frame_kinks`), a small mesh's
        (`_small_mesh`) edge directions, and for a larger mesh the _MESH_KINKS edges whose Gauss arcs pass nearest n
        in this iteration (`_near_kinks`)), n projected onto that circle and a Newton step along it;
      * where h has a corner (a box face, a cylinder cap, a mesh face): n snapped to the nearest corner axis of
        either geom's frame, to a small mesh's face normals, or to a larger mesh's face normal nearest n.
    A candidate must lower h (the full Newton steps: or keep it within rounding); steps are cut to _REFINE_STEP.
    Returns (normal (3,), h (), support points (3,) of geom1 along n and of geom2 along -n). Fixed iterations,
    differentiable."""
    dt = n.dtype
    axes, faces = [jp.zeros((0, 3), dt)], [jp.zeros((0, 3), dt)]  # kink circles' axes and corners' normals (rows)
    for t, g in ((t1, g1), (t2, g2)):
        kink_axes, corner_axes = _frame_kinks(t)
        axes.append(g.mat.T[np.asarray(kink_axes, np.int32)])
        faces.append(g.mat.T[np.asarray(corner_axes, np.int32)])
        if _small_mesh(t, g):  # its face normals (corners) and edge directions (kink circles), rotated
            faces.append(outer3(_triangle_normals(g.vert, g.face)[0], g.mat))
            axes.append(outer3(safe_normalize(g.vert[g.edge[:, 1]] - g.vert[g.edge[:, 0]])[0], g.mat))
    axes, faces = jp.concatenate(axes), jp.concatenate(faces)
    # larger meshes: the kinks nearest the current normal, chosen in each iteration (geom2 supports along -n)
    meshes = [(sign, k) for sign, k in ((1.0, _mesh_kinks(t1, g1)), (-1.0, _mesh_kinks(t2, g2))) if k is not None]

    def evaluate(n):
        a, b = _support(t1, g1, n), _support(t2, g2, -n)
        return a, b, jp.dot(a - b, n)

    def jac(n):
        return _support_jacobian(t1, g1, n) + _support_jacobian(t2, g2, -n)

    def unit(x):
        return safe_normalize(x)[0]

    def newton2(n, sd, h):
        axis = jp.eye(3, dtype=dt)[jp.argmin(jp.abs(n))]
        e1 = unit(jp.cross(n, axis))
        e2 = jp.cross(n, e1)
        jd = jac(n)
        je1, je2 = jd @ e1, jd @ e2
        h11, h22 = jp.dot(e1, je1) - h, jp.dot(e2, je2) - h
        h12 = 0.5 * (jp.dot(e1, je2) + jp.dot(e2, je1))
        det = h11 * h22 - h12 * h12
        scale = jp.maximum(jp.abs(h11) + jp.abs(h22), 1e-30)
        ok = (h11 > 0) & (h22 > 0) & (det > 1e-6 * scale * scale)
        det = jp.where(ok, det, 1.0)
        g1_, g2_ = jp.dot(e1, sd), jp.dot(e2, sd)
        d1, d2 = -(h22 * g1_ - h12 * g2_) / det, -(h11 * g2_ - h12 * g1_) / det
        # the full step and half of it, both cut to _REFINE_STEP (far from the minimum, e.g. after a deep EPA)
        cut = jp.minimum(1.0, _REFINE_STEP / jp.maximum(safe_norm(jp.stack([d1, d2])), 1e-30))
        steps = jp.stack([1.0, 0.5]).astype(dt)[:, None] * cut * (d1 * e1 + d2 * e2)
        return jax.vmap(unit)(n + steps), jp.broadcast_to(ok, (2,))

    def newton_circle(n, a):
        """n onto the circle n . a = 0, then a Newton step along it."""
        npl = unit(n - jp.dot(n, a) * a)
        e = jp.cross(a, npl)
        sa, sb, hp = evaluate(npl)
        d1 = jp.dot(e, sa - sb)
        d2 = jp.dot(e, jac(npl) @ e) - hp
        ok = d2 > 1e-6 * jp.abs(hp) + 1e-30
        th = -d1 / jp.where(ok, d2, 1.0)
        ok = ok & (jp.abs(th) < _REFINE_STEP)
        return jp.where(ok, unit(npl + th * e), npl), jp.abs(jp.dot(n, a)) < _REFINE_STEP

    def step(carry, _):
        n, a, b, h = carry
        n2, ok2 = newton2(n, a - b, h)
        snap = jp.where(dot3(faces, n[None]) >= 0, 1.0, -1.0)[:, None] * faces
        circles, circles_ok, snaps = [axes], [jp.ones(axes.shape[0], bool)], [snap]
        snaps_ok = [dot3(snap, n[None]) > jp.cos(_REFINE_STEP)]
        for sign, kinks in meshes:
            face, face_ok, edges, edges_ok = _near_kinks(kinks, sign * n)
            circles.append(edges)
            circles_ok.append(edges_ok)
            snaps.append(sign * face[None])
            snaps_ok.append(face_ok[None])
        circles = jp.concatenate(circles)
        nc, okc = jax.vmap(newton_circle, in_axes=(None, 0))(n, circles)
        ns = jp.concatenate([n2, nc] + snaps)  # (2 + circles + snaps, 3)
        ok = jp.concatenate([ok2, okc & jp.concatenate(circles_ok)] + snaps_ok)
        sa, sb = jax.vmap(lambda m: evaluate(m)[:2])(ns)
        hs = jp.where(ok, dot3(sa - sb, ns), jp.inf)
        # h is flat about a smooth minimum (or along a kink circle): within its rounding the Newton steps are
        # preferred (the full one first) and accepted (a strict decrease would stop short, at sqrt(rounding /
        # curvature) from the minimiser: 2e-4 - 4e-4 rad in float32)
        tol = 8 * jp.finfo(dt).eps * (safe_norm(a) + safe_norm(b))
        newton = jp.arange(ns.shape[0]) < 2 + circles.shape[0]
        newton = newton.at[1].set(False)  # the half step: only where it lowers h
        near = hs <= jp.min(hs) + tol
        k = jp.argmax(near & newton)
        k = jp.where(jp.any(near & newton), k, jp.argmin(hs))
        take = (hs[k] < h) | (newton[k] & (hs[k] <= h + tol))
        return (jp.where(take, ns[k], n), jp.where(take, sa[k], a), jp.where(take, sb[k], b),
                jp.where(take, hs[k], h)), None  # fmt: skip

    carry = (n,) + evaluate(n)
    (n, a, b, h), _ = jax.lax.scan(step, carry, None, length=REFINE_ITERATIONS)
    return n, h, a, b


# ---- GJK ----------------------------------------------------------------------------------------------------

_PAIRS = np.array(list(itertools.combinations(range(4), 2)), np.int32)  # (6, 2)
_TRIPLES = np.array(list(itertools.combinations(range(4), 3)), np.int32)  # (4, 3)
# one-hot maps from each subset's barycentric coordinates to the 4 simplex slots, in _SUBSETS order
_ONEHOT = [np.eye(4)[s] for s in (np.arange(4)[:, None], _PAIRS, _TRIPLES, np.arange(4)[None])]


def _nearest_on_simplex(w, mask):
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
    k = jp.argmin(jp.where(ok, dot3(v, v), jp.inf))
    found = jp.any(ok)
    best_l = jp.where(found, lam[k], 0.0)
    return jp.where(found, v[k], 0.0), best_l, best_l > 0


def _gjk_step(sup, w, mask, v, tol):
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


def _gjk(sup, v0, tol):
    """GJK on the Minkowski difference: returns (w, wa, mask, v, lam, inside)."""
    dt = v0.dtype
    w = jp.zeros((4, 3), dt)
    wa = jp.zeros((4, 3), dt)
    mask = jp.zeros(4, bool)
    lam = jp.zeros(4, dt)

    def body(carry, _):
        w, wa, mask, v, lam, done = carry
        converged, slot, a, w2, keep, v2, lam2 = _gjk_step(sup, w, mask, v, tol)
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


def _gjk_polytopes(sup, v0, tol, skip):
    """GJK for two polytopes, as `_gjk`, but run only where needed and only until it converges: a `lax.while_loop`
    bounded by GJK_ITERATIONS whose lanes start finished where `skip` (() bool; under vmap the loop runs while any
    lane runs). The loop sees the geometry through `lax.stop_gradient` and records each simplex vertex's search
    direction; the simplex is then rebuilt from live support points along those fixed directions. A polytope's
    support point is piecewise constant in the direction, so derivatives through the rebuilt simplex are exact
    (almost everywhere) and none pass through the loop. Returns (w, wa, mask, v, lam, inside) as `_gjk`."""
    dt = v0.dtype
    v0 = jax.lax.stop_gradient(v0)

    def sup_fixed(d):
        return jax.tree_util.tree_map(jax.lax.stop_gradient, sup(d))

    def body(carry):
        w, dirs, mask, v, it, _ = carry
        c, slot, _, w2, keep, v2, _ = _gjk_step(sup_fixed, w, mask, v, tol)
        dirs2 = dirs.at[slot].set(-v)
        return (jp.where(c, w, w2), jp.where(c, dirs, dirs2), jp.where(c, mask, keep), jp.where(c, v, v2), it + 1,
                c | (jp.sum(keep) == 4))  # fmt: skip

    init = (jp.zeros((4, 3), dt), jp.zeros((4, 3), dt), jp.zeros(4, bool), v0, jp.zeros((), jp.int32), skip)
    _, dirs, mask, _, _, _ = jax.lax.while_loop(lambda c: ~c[5] & (c[4] < GJK_ITERATIONS), body, init)
    dirs = jax.lax.stop_gradient(dirs)
    wa, wb = jax.vmap(sup)(dirs)  # live support points along the recorded directions
    w = wa - wb
    v, lam, _ = _nearest_on_simplex(w, mask)
    return w, wa, mask, v, lam, jp.sum(mask) == 4


# ---- EPA ----------------------------------------------------------------------------------------------------


def _face_geometry(verts, faces):
    a, b, c = verts[faces[:, 0]], verts[faces[:, 1]], verts[faces[:, 2]]
    n = jp.cross(b - a, c - a)
    nn = safe_norm(n, keepdims=True)
    ok = nn[:, 0] > 1e-30
    n = n / jp.where(ok[:, None], nn, 1.0)
    dist = dot3(n, a)
    return n, dist, ok


def _witness(nrm, depth, tri, tria):
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


def _epa(sup, w, wa, tol, iterations: int = EPA_ITERATIONS):
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
        n, dist, ok = _face_geometry(verts, faces)
        live = fvalid & ok
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
    n, dist, ok = _face_geometry(verts, faces)
    f = jp.argmin(jp.where(fvalid & ok, dist, jp.inf))
    final = (dist[f], n[f]) + _witness(n[f], dist[f], verts[faces[f]], vera[faces[f]])
    use_final = ~done & (dist[f] >= result[0] - tol)
    return tuple(jp.where(use_final, x, y) for x, y in zip(final, result))


def _complete_simplex(sup, w, wa, mask):
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


# ---- separating axes (polytope pairs) -------------------------------------------------------------------------

# SAT replaces EPA for box/mesh pairs whose axis test costs at most this many operations per pair,
# E1 E2 + (T1 + T2) (V1 + V2): e.g. two 20-vertex dodecahedra (30 hull edges, 36 triangles) need 3.8k
SAT_BUDGET = 200_000


def _edge_faces(tris: np.ndarray, edges) -> np.ndarray:
    """(E, 4) int32: each edge (u, v) of `edges` with the two triangles of `tris` (T, 3) that hold both ends (the
    first two; a closed hull has exactly two); an edge held by fewer repeats the one it has (or triangle 0)."""
    at: dict = {}  # each (sorted) vertex pair of a triangle -> the triangles holding it, in order
    for t, (a, b, c) in enumerate(np.asarray(tris).tolist()):
        for e in {(min(a, b), max(a, b)), (min(b, c), max(b, c)), (min(a, c), max(a, c))}:
            at.setdefault(e, []).append(t)
    out = []
    for u, v in edges:
        held = at.get((min(u, v), max(u, v))) or [0]
        out.append([u, v, held[0], held[1] if len(held) > 1 else held[0]])
    return np.array(out, np.int32).reshape(-1, 4)


def _sat_tables(gtype, g: GeomInfo):
    """A box or mesh as (local vertices (V, 3), triangles (T, 3), edges (E, 4), one triangle per face plane (F,))
    for SAT, or None."""
    if gtype == GeomType.BOX:
        corners = jp.asarray(_BOX_CORNERS, g.pos.dtype) * g.size
        return corners, jp.asarray(_BOX_TRIS), jp.asarray(_BOX_EDGES), jp.asarray(_box_planes())
    if gtype == GeomType.MESH and g.vert is not None and g.face is not None and g.edge is not None:
        return g.vert, g.face, g.edge, _face_planes(gtype, g, g.face)
    return None


def _sat_cost(s1, s2) -> int:
    (v1, _, e1, f1), (v2, _, e2, f2) = s1, s2
    return e1.shape[0] * e2.shape[0] + (f1.shape[0] + f2.shape[0]) * (v1.shape[0] + v2.shape[0])


def _sat(g1: GeomInfo, s1, g2: GeomInfo, s2):
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
    p1, p2 = _plane_rep(s1[3], area1), _plane_rep(s2[3], area2)
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

    best1 = refine(nt1, ok1, s1[3][kf1], w1, w2)
    best2 = refine(nt2, ok2, s2[3][kf2], w2, w1)
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


def _segment_sat(t1: int, g1: GeomInfo, g2: GeomInfo):
    """Penetration of a sphere's centre or a capsule's core segment (geom1, type t1) into a mesh's hull (geom2) by
    separating axes, as `_sat`: (depth (), normal (3,) from geom1 to geom2, the midpoint of the two deepest points
    (3,)). The candidate axes are the hull's face normals and, for a segment, edge x d for each hull edge whose Gauss
    arc (between its two faces' normals) crosses the segment's great circle (the normals across its direction d):
    O(F + E). Worked in the mesh's frame, where the faces, edges and arcs are model data (computed once under a vmap
    over states): per state, a dot product per face and a cross product per edge."""
    half = g1.size[1] if t1 == GeomType.CAPSULE else 0.0
    c = g2.mat.T @ (g1.pos - g2.pos)  # the segment in the mesh's frame
    axis = g2.mat.T @ g1.mat[:, 2] * half
    a, b = c - axis, c + axis
    d = b - a
    w, tris = g2.vert, g2.face
    nt, off, area = _triangle_normals(w, tris)
    pl = _plane_rep(_face_planes(GeomType.MESH, g2, tris), area)  # one (the largest) triangle per face plane
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


def _collide(t1, t2, g1: GeomInfo, g2: GeomInfo, margin=None, curved: bool | None = None):
    """(dist, pos, normal) of two convex geoms (normal from geom1 to geom2). Polytope pairs within SAT_BUDGET, and
    sphere-mesh and capsule-mesh pairs (the core point or segment, `_segment_sat`), take their penetration from
    separating axes and run GJK only where they are apart by at most `margin` (the detection distance; where it is
    given): farther apart, dist is the separating axes' lower bound on the distance, beyond the margin, with that
    axis and a point between the two bodies (no contact either way). Others run GJK/EPA, and pairs with a curved
    shape (ellipsoid, cylinder) then refine the normal (`_refine_normal`), after a shorter EPA
    (EPA_ITERATIONS_CURVED) where the other shape is no mesh, or a small one (`_small_mesh`; against a larger mesh
    the refinement looks only at the kinks near its current normal, and from a deep EPA_ITERATIONS_CURVED normal it
    can end a few 1e-4 off: EPA_ITERATIONS there). `curved`, for traced types: every pair has a curved shape and no
    mesh (True), no pair has a curved shape (False), or either (None: EPA_ITERATIONS, refined where curved); static
    types decide it themselves."""
    dt = g1.pos.dtype
    if isinstance(t1, int) and isinstance(t2, int):
        has_curved = t1 in CURVED or t2 in CURVED
        big_mesh = any(t == GeomType.MESH and not _small_mesh(t, g) for t, g in ((t1, g1), (t2, g2)))
        curved = None if has_curved and big_mesh else has_curved
    tol = jp.asarray(1e-10 if dt == jp.float64 else 1e-5, dt)
    epa_tol = jp.asarray(1e-9 if dt == jp.float64 else 1e-5, dt)

    def sup(d):
        return _support(t1, g1, d), _support(t2, g2, -d)

    tilt = jp.array([0.5377, 0.3183, 0.7812], dt)
    v0 = g1.pos - g2.pos
    # a generic tilt of the first direction: axis-aligned directions hit flat caps/faces at their centres, from
    # which GJK can stall on the boundary (touching) of an overlapping pair (e.g. coaxial cylinders)
    v0 = v0 + 1e-2 * safe_norm(v0) * tilt
    v0 = jp.where(jp.sum(v0 * v0) > 1e-20, v0, jp.array([1.0, 0.0, 0.0], dt))

    def separated(w, wa, mask, v, lam, inside):  # nearest points
        vn = safe_norm(v)
        return vn, -v / jp.where(vn > 0, vn, 1.0), lam @ wa, lam @ wa - v

    static = isinstance(t1, int) and isinstance(t2, int)
    sat = None  # (depth, normal, point) of the cores by separating axes, where they are exact
    s1, s2 = (_sat_tables(t1, g1), _sat_tables(t2, g2)) if static else (None,) * 2
    if s1 is not None and s2 is not None and _sat_cost(s1, s2) <= SAT_BUDGET:  # polytopes (cheaper than EPA)
        sat = _sat(g1, s1, g2, s2)
    elif static and t1 in (GeomType.SPHERE, GeomType.CAPSULE) and t2 == GeomType.MESH and g2.edge is not None:
        sat = _segment_sat(t1, g1, g2)  # a sphere's centre or a capsule's segment into a hull
    if sat is not None:
        # the separation along the best axis (-depth) bounds the distance from below: GJK only within the margin
        depth, n_pen, p_pen = sat
        r1 = _radius(t1, g1.size)  # 0 for polytopes
        apart = depth <= 0
        skip = ~apart if margin is None else ~apart | (-depth - r1 > margin)
        # GJK starts along the best separating axis (geom2 towards geom1; tilted as v0): fewer iterations than
        # from the centres' difference (500-vertex hull, batch 256: at most 10-11 instead of 12-13)
        gjk = _gjk_polytopes(sup, -n_pen + 1e-2 * tilt, tol, skip)
        vn, n_sep, a_sep, b_sep = separated(*gjk)
        use_gjk = ~skip & ~gjk[5]
        normal = jp.where(use_gjk, n_sep, n_pen)
        pos = jp.where(use_gjk, 0.5 * (a_sep + b_sep), p_pen) + 0.5 * r1 * normal
        return jp.where(use_gjk, vn, -depth) - r1, pos, normal
    w, wa, mask, v, lam, inside = _gjk(sup, v0, tol)
    vn, n_sep, a_sep, b_sep = separated(w, wa, mask, v, lam, inside)
    # the origin within tol of a GJK segment or triangle: touching or penetrating, which EPA tells from a
    # tetrahedron completed around it (in float32, tol = 1e-5 stops GJK on such a face inside deep overlaps)
    tet, teta, tet_ok = _complete_simplex(sup, w, wa, mask)
    near = ~inside & (vn <= tol) & (jp.sum(mask) >= 2) & tet_ok
    # penetrating: EPA (run on a valid tetrahedron in every case; its result is selected only when inside or near)
    dummy = jp.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [-1.0, -1.0, -1.0]], dt)
    safe_w = jp.where(inside, w, jp.where(near, tet, dummy))
    iterations = EPA_ITERATIONS_CURVED if curved else EPA_ITERATIONS
    depth, n_pen, a_pen, b_pen = _epa(sup, safe_w, jp.where(inside, wa, teta), epa_tol, iterations)
    inside = inside | (near & (depth > 0))
    dist = jp.where(inside, -depth, vn)
    normal = jp.where(inside, n_pen, n_sep)
    a = jp.where(inside, a_pen, a_sep)
    b = jp.where(inside, b_pen, b_sep)
    if curved is not False:  # some pairs may have a curved shape
        n_ref, h_ref, a_ref, b_ref = _refine_normal(t1, t2, g1, g2, normal)
        refined = jp.any(n_ref != normal)
        if curved is None:
            refined = refined & ((t1 == CURVED[0]) | (t1 == CURVED[1]) | (t2 == CURVED[0]) | (t2 == CURVED[1]))
        # witness points: the support point of a shape whose support is unique, the other one h along the normal;
        # two crossing segments (capsule, cylinder sides, box edges): their nearest points; else (lines or faces in
        # contact) GJK/EPA's, moved with the normal about their midpoint
        u1, c1, h1, seg1 = _support_feature(t1, g1, n_ref)
        u2, c2, h2, seg2 = _support_feature(t2, g2, -n_ref)
        x1, x2, det = segments_closest(c1, h1, c2, h2)
        crossing = seg1 & seg2 & (det > 1e-6 * dot3(h1, h1) * dot3(h2, h2))
        mid = jp.where(crossing, 0.5 * (c1 + x1 * h1 + c2 + x2 * h2), 0.5 * (a + b))
        a_new = jp.where(u1, a_ref, jp.where(u2, b_ref + h_ref * n_ref, mid + 0.5 * h_ref * n_ref))
        b_new = jp.where(u2, b_ref, a_new - h_ref * n_ref)
        dist = jp.where(refined, -h_ref, dist)
        normal = jp.where(refined, n_ref, normal)
        a = jp.where(refined, a_new, a)
        b = jp.where(refined, b_new, b)
    r1, r2 = _radius(t1, g1.size), _radius(t2, g2.size)
    dist = dist - r1 - r2
    a = a + normal * r1
    b = b - normal * r2
    return dist, 0.5 * (a + b), normal


def general(g1: GeomInfo, g2: GeomInfo, margin, curved: bool | None = None) -> Contacts:
    """One contact from GJK/EPA. The geom types are traced (GeomInfo.gtype), so one compiled collider serves
    every general pair type of a model (`curved`: as `_collide`'s; the driver groups the pairs with a curved shape
    and no mesh (`general_curved`) apart from the others (`general`, or `general_plain` where none is curved))."""
    return _one_contact(*_collide(g1.gtype, g2.gtype, g1, g2, curved=curved))


def _one_contact(dist, pos, normal) -> Contacts:
    """One contact (dist (), pos (3,), normal (3,)) as Contacts of k = 1 (default tangent)."""
    return Contacts(dist[None], pos[None], normal[None], jp.zeros((1, 3), pos.dtype))


def general_curved(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """`general` for pairs that all have a curved shape (ellipsoid, cylinder) and no mesh: shorter EPA, refined
    normal."""
    return general(g1, g2, margin, curved=True)


def general_plain(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """`general` for pairs without a curved shape (box-mesh and mesh-mesh with multiccd disabled): EPA alone."""
    return general(g1, g2, margin, curved=False)


def sphere_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Sphere-mesh: one contact, the sphere's centre against the mesh's hull (MuJoCo runs GJK/EPA; this is their
    converged answer): inside the hull the least deep face plane (exact), outside GJK only within the margin
    (`_collide`, `_segment_sat`)."""
    return _one_contact(*_collide(GeomType.SPHERE, GeomType.MESH, g1, g2, margin))


def plane_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Up to 3 contacts (mjc_PlaneConvex for meshes): the support vertex in direction -normal, then up to 2 of
    its hull-graph neighbours (vertices sharing a hull triangle with it) that lie strictly within margin of the
    plane and at least 0.3 * rbound (rbound = |geom_size| for a mesh) from the first contact point.

    MuJoCo takes the neighbours in the order of its qhull graph, which the Model does not hold: where more than 2
    neighbours qualify we take the lowest vertex ids, so the count always matches but the choice may differ."""
    n = g1.mat[:, 2]
    world = g2.pos + outer3(g2.vert, g2.mat)  # (V, 3)
    dist = dot3(world - g1.pos, n)
    nv = world.shape[0]
    k = jp.argmin(dist)
    onek = jax.nn.one_hot(k, nv, dtype=dist.dtype)
    d0 = onek @ dist
    p0 = onek @ world - 0.5 * d0 * n
    ids = jp.arange(nv)
    if g2.face is None:
        nbr = ids != k
    else:
        in_tri = jp.any(g2.face == k, axis=1)  # (T,)
        corner = jp.where(jp.repeat(in_tri, 3), g2.face.reshape(-1), nv)  # corners of triangles at k; others dropped
        nbr = jp.zeros(nv + 1, bool).at[corner].set(True)[:nv] & (ids != k)
    rbound = safe_norm(g2.size)
    far = dot3(world - p0, world - p0) >= (_PLANE_MESH_TOL * rbound) ** 2
    ok = nbr & (dist < margin) & far
    rank = jp.cumsum(ok) - 1
    sel = (ok[None, :] & (rank[None, :] == jp.arange(PLANE_MESH_NCON - 1)[:, None])).astype(dist.dtype)  # (2, V)
    has = jp.any(sel > 0, axis=1)
    d_extra = sel @ dist
    p_extra = sel @ world - 0.5 * d_extra[:, None] * n
    d = jp.concatenate([d0[None], jp.where(has, d_extra, NOCONTACT)])
    pos = jp.concatenate([p0[None], p_extra])
    return Contacts(d, pos, jp.broadcast_to(n, (PLANE_MESH_NCON, 3)), jp.zeros((PLANE_MESH_NCON, 3), pos.dtype))


# ---- polyhedral pairs (box-mesh, mesh-mesh): face manifolds as MuJoCo 4 with multiccd -----------------------

MULTI_NCON = 4  # contacts per polyhedral pair (MuJoCo reduces larger manifolds to 4)
_MAXPOLY = 12  # clipped-polygon vertices kept before the reduction to 4 (two quads clip to at most 8)
_FACE_ALIGNED = 1e-6  # 1 - cos: triangles are coplanar (one polygon face)
_FACE_COS = 0.996  # face-face manifold: n1 . n2 < -0.996, about 5.13 degrees (MuJoCo 4.0, probed by bisection)
_EDGE_SIN = 0.0888  # edge-face manifold: |edge . n| < 0.0888, about 5.1 degrees (MuJoCo 4.0, probed)
_QUADS = np.array(list(itertools.combinations(range(_MAXPOLY), 4)), np.int32)  # (495, 4)

# box as a polyhedron: corners (bit i of the corner index -> sign of axis i) and 12 outward triangles
_BOX_CORNERS = np.array([[(-1.0, 1.0)[(i >> k) & 1] for k in range(3)] for i in range(8)])
_BOX_TRIS = np.array(
    [[0, 4, 6], [0, 6, 2], [1, 3, 7], [1, 7, 5], [0, 1, 5], [0, 5, 4],
     [2, 6, 7], [2, 7, 3], [0, 2, 3], [0, 3, 1], [4, 5, 7], [4, 7, 6]], np.int32,
)  # fmt: skip
_BOX_EDGES = _edge_faces(
    _BOX_TRIS, [(i, i | 1 << k) for k in range(3) for i in range(8) if not i >> k & 1]
)  # the 12 box edges (corner bits x, y, z) with their two triangles


def hull_face_table(m) -> np.ndarray:
    """(nmesh, maxtri, 3) int32 hull triangles of every mesh (local vertex ids), padded by repeating the first."""
    num = np.maximum(np.asarray(m.mesh_hullfacenum), 1)
    adr = np.asarray(m.mesh_hullfaceadr)
    faces = np.asarray(m.mesh_hullface).reshape(-1, 3)
    if faces.shape[0] == 0:
        return np.zeros((len(num), 1, 3), np.int32)
    nmax = int(num.max())
    idx = adr[:, None] + np.where(np.arange(nmax)[None, :] < num[:, None], np.arange(nmax)[None, :], 0)
    return faces[np.minimum(idx, faces.shape[0] - 1)].astype(np.int32)


# MuJoCo's box faces (+x, -x, +y, -y, +z, -z) as corner ids in its face order (clockwise about the outward normal)
_BOX_FACE_SIGNS = [
    [(1, 1, 1), (1, 1, -1), (1, -1, -1), (1, -1, 1)], [(-1, 1, -1), (-1, 1, 1), (-1, -1, 1), (-1, -1, -1)],
    [(-1, 1, -1), (1, 1, -1), (1, 1, 1), (-1, 1, 1)], [(-1, -1, 1), (1, -1, 1), (1, -1, -1), (-1, -1, -1)],
    [(-1, 1, 1), (1, 1, 1), (1, -1, 1), (-1, -1, 1)], [(1, 1, -1), (-1, 1, -1), (-1, -1, -1), (1, -1, -1)],
]
_BOX_FACES = np.array([[(x > 0) + 2 * (y > 0) + 4 * (z > 0) for x, y, z in f] for f in _BOX_FACE_SIGNS], np.int32)


def _box_tri_polygons():
    """(12, 4) corner ids of each box triangle's face in MuJoCo's order, and (12,) counts (4)."""
    c = _BOX_CORNERS[_BOX_TRIS]
    nrm = np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0])
    face_n = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
    return _BOX_FACES[np.argmax(nrm @ face_n.T, axis=1)], np.full(len(_BOX_TRIS), 4, np.int32)


def _mesh_polygons(m) -> list[list[np.ndarray]]:
    """Each mesh's polygons as vertex-id cycles in MuJoCo's face order (its polygon reversed, at most MAX_POLYVERT)."""
    from mjx_lite.mjcf.mesh import MAX_POLYVERT

    polys = []
    for i in range(len(np.asarray(m.mesh_vertnum))):
        adr, num = int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
        cyc = []
        for j in range(adr, adr + num):
            a, k = int(m.mesh_polyvertadr[j]), int(m.mesh_polyvertnum[j])
            cyc.append(np.asarray(m.mesh_polyvert)[a : a + k][::-1][:MAX_POLYVERT])
        polys.append(cyc)
    return polys


def _triangle_polygon(m, tris, polys) -> np.ndarray:
    """(nmesh, maxtri) int32: per hull triangle, the index of the smallest of its mesh's polygons holding it (-1:
    none, and for padding rows)."""
    out = np.full(tris.shape[:2], -1, np.int32)
    for i, cyc in enumerate(polys):
        sets = [set(c.tolist()) for c in cyc]
        for t in range(max(int(np.asarray(m.mesh_hullfacenum)[i]), 0)):
            tv = set(tris[i, t].tolist())
            hold = [j for j, sv in enumerate(sets) if tv <= sv]
            if hold:
                out[i, t] = min(hold, key=lambda j: len(sets[j]))
    return out


def _box_planes() -> np.ndarray:
    """(6, 2) the two box triangles of each face."""
    faces = [tuple(f) for f in _box_tri_polygons()[0].tolist()]
    return np.array([[t for t, f in enumerate(faces) if f == face] for face in dict.fromkeys(faces)], np.int32)


def _face_planes(gtype: int, g: GeomInfo, tris):
    """The triangles (rows of tris) of each face plane of a box or mesh, (F, K) int32 (see `hull_face_planes`)."""
    if gtype == GeomType.BOX:
        return jp.asarray(_box_planes())
    return jp.arange(tris.shape[0])[:, None] if g.faceplane is None else g.faceplane


def _plane_rep(planes, area):
    """One triangle per face plane: of the plane's triangles planes (F, K), the one of largest area (T,) (a
    sliver's normal is rounding). (F,) int32."""
    return jp.take_along_axis(planes, jp.argmax(area[planes], axis=1)[:, None], axis=1)[:, 0]


def hull_face_polygons(m) -> tuple[np.ndarray, np.ndarray]:
    """For each mesh's hull triangles (as `hull_face_table`): the vertex ids of the mesh polygon holding the
    triangle, in MuJoCo's face order (its polygon reversed, at most MAX_POLYVERT), padded with the first vertex,
    (nmesh, maxtri, P) int32, and their counts (nmesh, maxtri) int32 (0 where no polygon holds the triangle)."""
    tris = hull_face_table(m)
    polys = _mesh_polygons(m)
    which = _triangle_polygon(m, tris, polys)
    width = max([len(c) for cyc in polys for c in cyc] + [3])
    out = np.zeros(tris.shape[:2] + (width,), np.int32)
    cnt = np.zeros(tris.shape[:2], np.int32)
    for (i, t), j in np.ndenumerate(which):
        if j >= 0:
            c = polys[i][j]
            out[i, t, : len(c)] = c
            out[i, t, len(c) :] = c[0]
            cnt[i, t] = len(c)
    return out, cnt


def hull_face_planes(m) -> np.ndarray:
    """(nmesh, maxplane, K) int32: for each mesh, its hull triangles (rows of `hull_face_table`) grouped by face
    plane: one row per polygon (the triangles it holds) and one per triangle that no polygon holds, each row padded
    by repeating its first triangle, rows padded by repeating the first row. The separating axes and the manifold's
    face choices range over planes (one triangle each, the largest: `_plane_rep`) instead of every triangle. From
    the integer tables only (the vertices are traced)."""
    tris = hull_face_table(m)
    which = _triangle_polygon(m, tris, _mesh_polygons(m))
    planes = []
    for i in range(tris.shape[0]):
        rows: dict = {}
        for t in range(max(int(np.asarray(m.mesh_hullfacenum)[i]), 1)):
            j = int(which[i, t])
            rows.setdefault(("t", t) if j < 0 else ("p", j), []).append(t)
        planes.append(list(rows.values()))
    nplane = max(len(p) for p in planes) if planes else 1
    k = max((len(r) for p in planes for r in p), default=1)
    out = np.zeros((len(planes), nplane, k), np.int32)
    for i, p in enumerate(planes):
        for f in range(nplane):
            r = p[f] if f < len(p) else p[0]
            out[i, f] = r + [r[0]] * (k - len(r))
    return out


def hull_edge_table(m) -> np.ndarray:
    """(nmesh, maxedge, 4) int32 hull edges of every mesh: local vertex ids (each edge once; its polygons' sides,
    so that triangulation diagonals of flat faces are left out; the hull's triangle edges where it has no polygons)
    and the two hull triangles (rows of `hull_face_table`) that meet there; padded by repeating the first."""
    tris = hull_face_table(m)
    edges = []
    for i in range(len(np.asarray(m.mesh_vertnum))):
        adr, num = int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
        found = set()
        for j in range(adr, adr + num):
            a, k = int(m.mesh_polyvertadr[j]), int(m.mesh_polyvertnum[j])
            cyc = np.asarray(m.mesh_polyvert)[a : a + k].tolist()
            found.update((min(u, v), max(u, v)) for u, v in zip(cyc, cyc[1:] + cyc[:1]))
        if not found:
            ea, en = int(m.mesh_hulledgeadr[i]), int(m.mesh_hulledgenum[i])
            found = {tuple(e) for e in np.asarray(m.mesh_hulledge)[ea : ea + en].tolist()}
        ntri = max(int(np.asarray(m.mesh_hullfacenum)[i]), 1)
        edges.append(_edge_faces(tris[i, :ntri], sorted(found) or [(0, 0)]).tolist())
    if not edges:
        return np.zeros((0, 1, 4), np.int32)
    width = max(len(e) for e in edges)
    return np.array([e + [e[0]] * (width - len(e)) for e in edges], np.int32).reshape(len(edges), width, 4)


def _local_polyhedron(gtype: int, g: GeomInfo):
    """Vertices in the geom frame (V, 3) and triangles (T, 3) of a box or a mesh (its convex hull)."""
    if gtype == GeomType.BOX:
        return jp.asarray(_BOX_CORNERS, g.pos.dtype) * g.size, jp.asarray(_BOX_TRIS)
    return g.vert, g.face


def _polyhedron(gtype: int, g: GeomInfo):
    """World vertices (V, 3) and triangles (T, 3) of a box or a mesh (its convex hull)."""
    local, tris = _local_polyhedron(gtype, g)
    return g.pos + outer3(local, g.mat), tris


def _hull_normals(gtype: int, g: GeomInfo):
    """`_triangle_normals` of a box's or mesh's world hull, computed in the geom frame and rotated: the frame part
    depends on the model alone, so under a vmap over states it runs once, not per state (the cross products and
    norms of every triangle cost more than the rotation). (T, 3), (T,), (T,)."""
    local, tris = _local_polyhedron(gtype, g)
    nl, off, area = _triangle_normals(local, tris)
    nt = outer3(nl, g.mat)
    return nt, off + dot3(nt, g.pos[None]), area


def _face(w, tris, nl, mat, direction):
    """The face of a polyhedron (world vertices w (V, 3), triangles tris (T, 3) with unit normals nl (T, 3) in the
    geom frame, rotation mat (3, 3)) whose outward normal is nearest the world `direction`, chosen in the geom frame
    (the triangles' normals are model data there: no per-state rotation of every normal).

    Returns (world unit normal (3,), a point of the face (3,), vertex mask (V,), triangle index ()): the mask marks
    the corners of every triangle coplanar with the best one (a scatter over corners, O(T + V))."""
    t = jp.argmax(dot3(nl, (mat.T @ direction)[None]))
    coplanar = dot3(nl, nl[t][None]) > 1 - _FACE_ALIGNED
    nv = w.shape[0]
    corner = jp.where(jp.repeat(coplanar, 3), tris.reshape(-1), nv)  # corners of coplanar triangles; others dropped
    return mat @ nl[t], w[tris[t, 0]], jp.zeros(nv + 1, bool).at[corner].set(True)[:nv], t


def _ordered(w, mask, normal):
    """Vertex indices of a face (mask) in counter-clockwise order about `normal`, masked ones last; (V,), (V,)."""
    order = jp.argsort(_angles(w, mask, normal)[3])
    return order, mask[order]


def _manifold(wr, rmask, nr, r0, wi, imask, ni, margin, inc_poly=True, cdir=None):
    """Clip the incident face (vertices wi[imask], plane normal ni) against the reference face (wr[rmask], outward
    normal nr through r0). Points on the incident face inside the reference prism: incident vertices, reference
    vertices projected onto the incident plane and edge-edge crossings. `inc_poly` False: the incident feature is a
    segment (its first two masked vertices; no reference vertex lies on it). `cdir` (default nr): the direction of
    the reference side planes and of the projections. Returns (points (K, 3), valid (K,), depth (K,))."""
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
    # (b) reference vertices projected along nr onto the incident plane
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
    pts = jp.concatenate([pa, pb, pc.reshape(-1, 3)], axis=0)
    ok = jp.concatenate([va, vb, vc.reshape(-1)])
    depth = (pts - r0) @ nr
    ok = ok & (depth <= margin)
    # drop near-duplicates (a vertex on an edge is found twice)
    dpp = pts[:, None, :] - pts[None, :, :]
    d2 = dot3(dpp, dpp)
    earlier = jp.tril(jp.ones((pts.shape[0],) * 2, bool), -1)
    dupe = jp.any(earlier & ok[None, :] & (d2 < (1e-9 * scale) ** 2 + 1e-30), axis=1)
    ok = ok & ~dupe
    return pts.astype(dt), ok, depth


def _angles(pts, ok, nr):
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


def _reduce4(pts, ok, nr):
    """At most 4 of the valid points: all of them if <= 4, else the largest-area quadrilateral of the first
    _MAXPOLY valid points in counter-clockwise order. Returns (idx (4,), valid (4,))."""
    n = pts.shape[0]
    _, u, v, ang = _angles(pts, ok, nr)
    order = jax.lax.top_k(-ang, min(_MAXPOLY, n))[1]  # ascending angle (ties: lower index first)
    if order.shape[0] < _MAXPOLY:
        order = jp.concatenate([order, jp.full(_MAXPOLY - order.shape[0], order[0])])
    oko = ok[order] & (jp.arange(_MAXPOLY) < jp.sum(ok))
    q = pts[order]
    # area of each candidate quad (vertices in counter-clockwise order), projected on the face plane
    x, y = (q @ u)[_QUADS], (q @ v)[_QUADS]  # (nq, 4)
    area = 0.5 * sum(x[:, i] * y[:, (i + 1) % 4] - y[:, i] * x[:, (i + 1) % 4] for i in range(4))
    okq = oko[_QUADS]
    qok = okq[:, 0] & okq[:, 1] & okq[:, 2] & okq[:, 3]
    best = jp.asarray(_QUADS)[jp.argmax(jp.where(qok, area, -jp.inf))]
    many = jp.sum(ok) > 4
    idx = jp.where(many, order[best], order[:4])
    valid = jp.where(many, True, oko[:4])
    return idx, valid


_HALFSPACE_TOL = 1e-15  # mjMINVAL: a point is inside a clipping plane when its signed distance exceeds -1e-15


def _clip_polygon(clip, nclip, poly, npoly, n, size: int):
    """Sutherland-Hodgman as MuJoCo's polygonClip: the polygon poly (first npoly of (Kp, 3), in order) clipped by
    the planes through each edge of the clipping face clip (first nclip of (Kc, 3), clockwise about its outward
    normal n), one edge after the other, in their order. Each polygon edge PQ contributes its crossing with the
    plane (where exactly one end is inside) and then Q (where Q is inside). Returns the clipped polygon's points in
    MuJoCo's order (size, 3) and their count (at most size)."""
    kc = clip.shape[0]
    buf = _pad_rows(poly, size, poly[0])[:size]
    idx = jp.arange(size)
    nxt_c = jp.where(jp.arange(kc) + 1 < nclip, jp.arange(kc) + 1, 0)
    pn_all = jp.cross(clip[nxt_c] - clip, n)  # (Kc, 3) plane normals (pointing inside)
    pd_all = dot3(pn_all, clip)

    def edge(e, carry):
        buf, cnt = carry
        a, pn, pd = clip[e], pn_all[e], pd_all[e]
        q = buf[jp.where(idx + 1 < cnt, idx + 1, 0)]
        in1 = dot3(buf - a, pn) > -_HALFSPACE_TOL
        in2 = dot3(q - a, pn) > -_HALFSPACE_TOL
        live = idx < cnt
        den = dot3(q - buf, pn)
        ok_den = den != 0
        t = (pd - dot3(buf, pn)) / jp.where(ok_den, den, 1.0)
        cross = live & (in1 != in2) & ok_den & (t >= 0) & (t <= 1)
        pts = jp.stack([buf + t[:, None] * (q - buf), q], 1).reshape(2 * size, 3)
        keep = jp.stack([cross, live & in2], 1).reshape(2 * size)
        new, newcnt = _compact(pts, keep, size)
        on = e < nclip
        return jp.where(on, new, buf), jp.where(on, newcnt, cnt)

    return jax.lax.fori_loop(0, kc, edge, (buf, jp.asarray(npoly, jp.int32)))


def _compact(pts, ok, size: int):
    """The rows of pts (K, 3) where ok (K,), in order, in the first rows of a (size, 3) array (zeros after them,
    rows beyond size dropped); returns it and their count (int32). A one-hot product: cheaper than a scatter under
    vmap on CPU."""
    rank = jp.cumsum(ok) - 1
    sel = ok[None, :] & (rank[None, :] == jp.arange(size)[:, None])
    return sel.astype(pts.dtype) @ pts, jp.minimum(jp.sum(ok), size).astype(jp.int32)


# polygonQuad accepts a move only if the area grows by more than rounding: MuJoCo's strict `>` in exact arithmetic.
# Ties are common (a pointer moved onto its neighbour, parallel chords of a regular polygon); in floating point
# MuJoCo's own outcome there depends on rounding (fused multiply-adds, summation order), which no other build shares.
_QUAD_GAIN = 1 + 1e-12


def _polygon_quad(pts, cnt, steps: int):
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
        better = run & (mn > m * _QUAD_GAIN)
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


def _clipped_face(w1, w2, poly1, npoly1, poly2, npoly2, n1, margin):
    """geom2's face polygon (vertex ids poly2, npoly2 of w2) clipped by geom1's face (poly1, npoly1 of w1; outward
    normal n1), its points beyond the margin from geom1's face plane dropped: (points in MuJoCo's order (K, 3), count
    ()), K = P1 + P2 + 1."""
    size = poly1.shape[0] + poly2.shape[0] + 1
    clipped, cnt = _clip_polygon(w1[poly1], npoly1, w2[poly2], npoly2, n1, size)
    near = (jp.arange(size) < cnt) & ((clipped - w1[poly1[0]]) @ n1 <= margin)
    return _compact(clipped, near, size)


def _face_manifold(w1, w2, poly1, npoly1, poly2, npoly2, n1, margin):
    """MuJoCo's face-face points: the clipped face (`_clipped_face`, same arguments), 4 kept by polygonQuad where more
    remain, else all but exact repeats. Returns (points on geom2's face (4, 3), valid (4,))."""
    pts, cnt = _clipped_face(w1, w2, poly1, npoly1, poly2, npoly2, n1, margin)
    quad = _polygon_quad(pts, cnt, 6 * pts.shape[0] + 8)
    first = pts[:4]
    same = jp.all(jp.abs(first[:, None] - first[None]) < _HALFSPACE_TOL, -1) & jp.tril(jp.ones((4, 4), bool), -1)
    few_ok = (jp.arange(4) < cnt) & ~jp.any(same, axis=1)
    many = cnt > 4
    return jp.where(many, pts[quad], first), jp.where(many, True, few_ok)


def _triangle_normals(w, tris):
    """Unit outward normals (T, 3) of the triangles, the plane offsets (T,) and twice the areas (T,)."""
    a, b, c = w[tris[:, 0]], w[tris[:, 1]], w[tris[:, 2]]
    nt = jp.cross(b - a, c - a)
    nn = safe_norm(nt, keepdims=True)
    nt = jp.where(nn > 1e-30, nt / jp.where(nn > 1e-30, nn, 1.0), 0.0)
    return nt, dot3(nt, a), nn[:, 0]


def _feature(w, tris, pn, po, u, tol):
    """The feature (vertex, edge or face) of a polyhedron supporting direction u, as MuJoCo's EPA reports it.

    Returns (support mask (V,), dim () in {1, 2, 3}, candidate face planes (F,), hull vertex mask (V,)): the
    candidates are the face planes (normals pn (F, 3), offsets po (F,)) through the feature (all faces at a vertex,
    both at an edge, the face itself), i.e. those that hold every support vertex (tested on the first 4 by support
    value: a plane through 3 support vertices of a face is that face's). O(V + F): no (F, V) tables."""
    nv = w.shape[0]
    valid = jp.zeros(nv, bool).at[tris.reshape(-1)].set(True)  # hull vertices (not padding or interior ones)
    s = jp.where(valid, dot3(w, u), -jp.inf)
    sup = valid & (s >= jp.max(s) - tol)
    dim = jp.minimum(jp.sum(sup), 3)
    top = jax.lax.top_k(s, min(4, nv))[1]
    on_plane = jp.abs(outer3(w[top], pn) - po[None, :]) <= tol  # (k, F)
    cand = jp.all(on_plane | ~sup[top][:, None], axis=0)
    return sup, dim, cand, valid


def _edges_at(w, nt, tris, v, tol):
    """Hull edges at vertex v: (other end mask (V,), unit directions (V, 3)). Triangulation diagonals of a flat
    face (both triangles at the edge coplanar) are not edges. Scatters over the triangles' corners, O(V + T)."""
    nv = w.shape[0]
    at_v = jp.any(tris == v, axis=1)  # (T,)
    ends = tris.reshape(-1)  # (3T,) each triangle corner; those of triangles at v other than v are v's neighbours
    nrm = jp.repeat(nt, 3, axis=0)  # (3T, 3)
    live = jp.repeat(at_v, 3) & (ends != v)
    slot = jp.where(live, ends, nv)  # dead corners go to a dropped extra row
    ref = jp.zeros((nv + 1, 3), w.dtype).at[slot].set(nrm)  # the normal of one triangle at edge (v, u)
    bent = live & (dot3(nrm, ref[slot]) < 1 - _FACE_ALIGNED)
    nbr = jp.zeros(nv + 1, bool).at[jp.where(bent, slot, nv)].set(True)[:nv]
    e = w - w[v]
    return nbr, e / jp.maximum(safe_norm(e, axis=-1, keepdims=True), 1e-30)


def _manifold_contacts(pts, depth, idx, valid, nr, edge2, feature, dist0, pos0, n, dt) -> Contacts:
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


def _polyhedral(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Box-mesh / mesh-mesh contacts as MuJoCo 4 with multiccd (probed): from the GJK/EPA normal n, the feature
    of each geom (support vertex, edge or face along +-n) and the faces through it; then
      * face-face: a face of geom1 and one of geom2 with n1 . n2 < -0.996: geom2's face polygon clipped by the
        planes through geom1's face edges (Sutherland-Hodgman in MuJoCo's vertex orders: its box corner table, its
        mesh polygons reversed; `_face_manifold`), points farther than the margin from geom1's face plane dropped,
        more than 4 reduced to 4 by MuJoCo's polygonQuad local search; each point with its own depth to geom2's face
        plane (taken on geom1's face, straight along n1), normal -n2;
      * else edge-face, for the geom with the lower-dimensional feature (geom1 on ties), an edge at its feature with
        |edge . n_face| < 0.0888 for a face through the other geom's feature: the edge clipped by that face's side
        planes, depths to its plane, normal -+ the face normal;
      * else the single GJK/EPA contact.
    A mesh face whose triangle lies in no mesh polygon (no polygon tables) falls back to clipping geom1's face by
    geom2's side planes and the largest-area quadrilateral of more than 4 points.
    Known differences: where several faces/edges qualify MuJoCo takes the first in its own order (box: x, y, z edges
    at a corner; mesh: its polygon list, whose order the compiler does not reproduce, e.g. an STL face whose float32
    triangles fall into two normal bins is two coplanar polygons), we the most (anti-)parallel; MuJoCo's features
    come from its EPA face, so where two EPA normals nearly tie (deep, edge on a face's rim) its feature may differ;
    where a clipped edge keeps only its crossing with a side plane MuJoCo reports that point twice (we once)."""
    dist0, pos0, n = _collide(t1, t2, g1, g2, margin)
    dt = pos0.dtype
    w1, tri1 = _polyhedron(t1, g1)
    w2, tri2 = _polyhedron(t2, g2)
    scale = jp.maximum(jp.max(jp.abs(w1 - g1.pos)), jp.max(jp.abs(w2 - g2.pos)))
    tol = 1e-6 * scale
    nt1, off1, area1 = _hull_normals(t1, g1)
    nt2, off2, area2 = _hull_normals(t2, g2)
    # faces are chosen among face planes (one triangle each): pl (F,) triangle ids, pn (F, 3) normals, po offsets
    pl1, pl2 = _plane_rep(_face_planes(t1, g1, tri1), area1), _plane_rep(_face_planes(t2, g2, tri2), area2)
    pn1, po1, pn2, po2 = nt1[pl1], off1[pl1], nt2[pl2], off2[pl2]
    sup1, dim1, cand1, hull1 = _feature(w1, tri1, pn1, po1, n, tol)
    sup2, dim2, cand2, hull2 = _feature(w2, tri2, pn2, po2, -n, tol)
    # face-face: the most anti-parallel pair of faces through the two features
    dots = outer3(pn1, pn2)
    okff = cand1[:, None] & cand2[None, :] & (dots < -_FACE_COS)
    ij = jp.argmin(jp.where(okff, dots, jp.inf))
    fi, fj = ij // dots.shape[1], ij % dots.shape[1]
    face_face = jp.any(okff)
    # edge-face: edges at the lower-dimensional feature against the faces through the other one
    v1, v2 = jp.argmax(sup1), jp.argmax(sup2)
    nbr1, e1 = _edges_at(w1, nt1, tri1, v1, tol)
    nbr2, e2 = _edges_at(w2, nt2, tri2, v2, tol)
    nbr1 = nbr1 & ((dim1 == 1) | sup1)  # an edge feature: its own edge only
    nbr2 = nbr2 & ((dim2 == 1) | sup2)
    c12 = jp.abs(outer3(e1, pn2))  # (V1, F2)
    ok12 = nbr1[:, None] & cand2[None, :] & (c12 < _EDGE_SIN)
    c21 = jp.abs(outer3(e2, pn1))  # (V2, F1)
    ok21 = nbr2[:, None] & cand1[None, :] & (c21 < _EDGE_SIN)
    try1 = (dim1 < 3) & (dim1 <= dim2)
    edge1 = ~face_face & try1 & jp.any(ok12)
    edge2 = ~face_face & ~try1 & (dim2 < 3) & jp.any(ok21)
    a12 = jp.argmin(jp.where(ok12, c12, jp.inf))
    u1, f2e = a12 // c12.shape[1], a12 % c12.shape[1]
    a21 = jp.argmin(jp.where(ok21, c21, jp.inf))
    u2, f1e = a21 // c21.shape[1], a21 % c21.shape[1]
    # reference face: geom2's (face-face, edge of geom1) or geom1's (edge of geom2); its polygon is every vertex on
    # the plane (a convex hull's plane meets it only there)
    f1 = jp.where(face_face, fi, f1e)
    f2 = jp.where(face_face, fj, f2e)
    n1f, n2f = pn1[f1], pn2[f2]
    m1 = hull1 & (jp.abs(dot3(w1, n1f) - po1[f1]) <= tol)
    m2 = hull2 & (jp.abs(dot3(w2, n2f) - po2[f2]) <= tol)
    # the two faces' vertices, compacted to nv rows (a face has at most its polygon's vertices; the clipper is
    # quadratic in its rows, so it must not see every hull vertex)
    nv = max(_face_rows(t1, g1, w1.shape[0]), _face_rows(t2, g2, w2.shape[0]), 2)
    (w1p, m1p), (w2p, m2p) = _face_vertices(w1, m1, nv), _face_vertices(w2, m2, nv)
    wr = jp.where(edge2, w1p, w2p)
    rmask = jp.where(edge2, m1p, m2p)
    nr = jp.where(edge2, n1f, n2f)
    r0 = jp.where(edge2, w1[tri1[pl1[f1], 0]], w2[tri2[pl2[f2], 0]])
    seg = jp.where(edge1, jp.stack([w1[v1], w1[u1]]), jp.stack([w2[v2], w2[u2]]))
    fp1, fn1 = _face_polygons(t1, g1, tri1)
    fp2, fn2 = _face_polygons(t2, g2, tri2)
    polygons = fp1 is not None and fp2 is not None  # every hull triangle in a polygon (driver._geom_info)
    if polygons:  # face-face comes from the polygons below: the clipper only cuts an edge by a face
        pts, ok, depth = _manifold(wr, rmask, nr, r0, seg, jp.ones(2, bool), -nr, margin, inc_poly=False, cdir=nr)
        # a segment clipped by a convex face has at most 2 points: the first 4 valid are kept
        idx = jax.lax.top_k(jp.where(ok, -jp.arange(ok.shape[0]), -ok.shape[0] - 1), MULTI_NCON)[1]
        valid = ok[idx]
    else:  # face-face too, with a largest-area quadrilateral of more than 4 points
        wi = jp.where(face_face, w1p, _pad_rows(seg, nv, seg[0]))
        imask = jp.where(face_face, m1p, jp.arange(nv) < 2)
        pts, ok, depth = _manifold(
            wr, rmask, nr, r0, wi, imask, jp.where(face_face, n1f, -nr), margin,
            inc_poly=face_face, cdir=jp.where(face_face, -n1f, nr),
        )  # fmt: skip
        idx, valid = _reduce4(pts, ok, nr)
    pts, depth = pts[idx], depth[idx]
    idx = jp.arange(idx.shape[0])
    if polygons:  # face-face: MuJoCo's own points (its polygon orders, clipping and polygonQuad local search)
        ti, tj = pl1[fi], pl2[fj]
        x2, ok2 = _face_manifold(w1, w2, fp1[ti], fn1[ti], fp2[tj], fn2[tj], pn1[fi], margin)
        x1 = x2 - pn1[fi] * ((x2 - w1[fp1[ti, 0]]) @ pn1[fi])[:, None]  # onto geom1's face plane along n1
        pts = jp.where(face_face, x1, pts)
        depth = jp.where(face_face, (x1 - w2[tri2[tj, 0]]) @ pn2[fj], depth)
        valid = jp.where(face_face, ok2, valid)
    return _manifold_contacts(pts, depth, idx, valid, nr, edge2, face_face | edge1 | edge2, dist0, pos0, n, dt)


def _face_rows(gtype: int, g: GeomInfo, nvert: int) -> int:
    """Static bound on the vertices of one face of a box (4) or mesh (twice its widest polygon, at least 8, at most
    its vertex count; every vertex where it has no polygon table)."""
    if gtype == GeomType.BOX:
        return 4
    if g.facepoly is not None:
        return min(nvert, max(2 * g.facepoly.shape[-1], 8))
    return nvert


def _face_vertices(w, mask, rows: int):
    """A face's vertices (mask (V,) of w (V, 3)) compacted to the first rows of a (rows, 3) array, with their mask
    (rows,)."""
    wc, cnt = _compact(w, mask, rows)
    return wc, jp.arange(rows) < cnt


def _face_polygons(gtype: int, g: GeomInfo, tris):
    """Per hull triangle, its face polygon in MuJoCo's order: ((T, P) vertex ids, (T,) counts), or (None, None)."""
    if gtype == GeomType.BOX:
        p, c = _box_tri_polygons()
        return jp.asarray(p), jp.asarray(c)
    if g.facepoly is None:
        return None, None
    return g.facepoly, g.facepolynum


def box_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Box-mesh: face-face manifold (up to 4), edge on face (2), else GJK/EPA (see `_polyhedral`)."""
    return _polyhedral(GeomType.BOX, GeomType.MESH, g1, g2, margin)


def mesh_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Mesh-mesh: face-face manifold (up to 4), edge on face (2), else GJK/EPA (see `_polyhedral`)."""
    return _polyhedral(GeomType.MESH, GeomType.MESH, g1, g2, margin)


# ---- cylinder pairs (cylinder-box, -cylinder, -mesh; capsule-cylinder): MuJoCo 4 multiccd manifolds --------------
#
# MuJoCo 4 approximates a cylinder cap by a regular 16-gon (vertex k at angle 2 pi k / 16 in the geom frame) and its
# side by the axis-parallel segment through the support point. Probing MuJoCo 4.0 gives the rules reproduced here:
#   * face-face (cap or box/mesh face of geom1 against a face of geom2, normals within 1 - cos = 0.004): geom1's face
#     is clipped by the side planes of geom2's face; each clipped point p gets its own depth to geom2's face plane
#     (along geom2's face normal n2, which gives the contact normal -n2, whichever face the GJK/EPA normal is);
#   * edge-face (cylinder side or capsule segment against a face, |axis . face normal| < 0.0888): the segment is
#     clipped by the face's side planes the same way (the face is the reference, whichever geom it belongs to);
#   * points deeper than the detection margin are dropped; more than 4 are reduced to a largest-area quadrilateral.
# Otherwise (edges crossing, curved sides, tilts beyond the tolerances) the single GJK/EPA contact is kept.

CYL_NCON = 4
_CYL_NPOLY = 16  # cap polygon vertices
_CYL_FACE_COS = _FACE_COS  # face-face: n1 . n2 < -0.996 (MuJoCo 4.0, probed)
_CYL_EDGE_SIN = _EDGE_SIN  # edge-face: |edge . n| < 0.0888 (MuJoCo 4.0, probed)
_CYL_ANG = 2 * np.pi * np.arange(_CYL_NPOLY) / _CYL_NPOLY


def _cyl_cap(g: GeomInfo, u):
    """The cap of a cylinder facing direction u: world vertices (16, 3) in MuJoCo's order (clockwise about the
    outward normal, from the geom's x axis), outward normal (3,)."""
    a = g.mat[:, 2]
    s = jp.where(jp.dot(a, u) >= 0, 1.0, -1.0).astype(u.dtype)
    r, h = g.size[0], g.size[1]
    ang = jp.asarray(_CYL_ANG, u.dtype)
    local = jp.stack([r * jp.cos(ang), -s * r * jp.sin(ang), jp.broadcast_to(s * h, ang.shape)], axis=-1)
    return g.pos + local @ g.mat.T, s * a


def _cyl_side(g: GeomInfo, u, radius):
    """Side segment of a cylinder (radius r) or capsule core (radius 0) farthest along u: endpoints (2, 3)."""
    a = g.mat[:, 2]
    rad = u - jp.dot(u, a) * a
    rn = safe_norm(rad)
    rad = jp.where(rn > 1e-12, rad / jp.where(rn > 1e-12, rn, 1.0), 0.0)
    h = g.size[1]
    c = g.pos + radius * rad
    return jp.stack([c - h * a, c + h * a])


def _face_of(gtype: int, g: GeomInfo, u):
    """A face of geom g facing u: (its vertices compacted to a static bound (K, 3) with mask (K,), outward normal
    (3,), a point of the face (3,), every vertex (V, 3), its polygon in MuJoCo's face order (vertex ids of the (V, 3)
    array (P,), count (); 0 where the mesh has no polygon tables))."""
    if gtype == GeomType.CYLINDER:
        w, nrm = _cyl_cap(g, u)
        ids = jp.arange(w.shape[0])
        return w, jp.ones(w.shape[0], bool), nrm, w[0], w, ids, jp.asarray(w.shape[0], jp.int32)
    local, tris = _local_polyhedron(gtype, g)
    w = g.pos + outer3(local, g.mat)
    nrm, p0, mask, t = _face(w, tris, _triangle_normals(local, tris)[0], g.mat, u)
    wc, mc = _face_vertices(w, mask, _face_rows(gtype, g, w.shape[0]))
    fp, fn = _face_polygons(gtype, g, tris)
    if fp is None:
        return wc, mc, nrm, p0, w, jp.zeros(3, jp.int32), jp.zeros((), jp.int32)
    return wc, mc, nrm, p0, w, fp[t], fn[t]


def _pad_rows(x, n, fill):
    extra = n - x.shape[0]
    return x if extra <= 0 else jp.concatenate([x, jp.broadcast_to(fill, (extra,) + x.shape[1:])])


def _reduce_quad(pts, ok, nr):
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


def _cylinder_pair(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    dist0, pos0, n = _collide(t1, t2, g1, g2, margin)
    dt = pos0.dtype
    # geom2's face toward geom1 (every t2 here has faces); geom1's face toward geom2 (not for a capsule)
    w2, m2, n2, p2, v2, poly2, npoly2 = _face_of(t2, g2, -n)
    if t1 == GeomType.CAPSULE:
        w1, m1, n1, p1 = w2, jp.zeros_like(m2), -n2, p2  # placeholders: a capsule has no face
        has_face1 = jp.zeros((), bool)
    else:
        w1, m1, n1, p1, v1, poly1, npoly1 = _face_of(t1, g1, n)
        has_face1 = jp.ones((), bool)
    facing = jp.maximum(jp.dot(n1, n), -jp.dot(n2, n)) > _CYL_FACE_COS  # the contact normal is one of the faces'
    face_face = has_face1 & (jp.dot(n1, n2) < -_CYL_FACE_COS) & facing
    # edge of geom1 (cylinder side / capsule core) on geom2's face
    r1 = g1.size[0]
    if t1 in (GeomType.CYLINDER, GeomType.CAPSULE):
        axis = g1.mat[:, 2]
        if t1 == GeomType.CYLINDER:
            e1 = _cyl_side(g1, -n2, r1)
        else:  # the line along its axis through its support point along n (MuJoCo 4, probed)
            e1 = jp.stack([g1.pos - g1.size[1] * axis, g1.pos + g1.size[1] * axis]) + r1 * (n - jp.dot(n, axis) * axis)
        edge1 = (jp.abs(jp.dot(axis, n2)) < _CYL_EDGE_SIN) & (-jp.dot(n2, n) > _CYL_FACE_COS)
    else:
        e1, edge1 = jp.zeros((2, 3), dt), jp.zeros((), bool)
    # edge of geom2 (cylinder side) on geom1's face
    if t2 == GeomType.CYLINDER:
        e2 = _cyl_side(g2, -n1, g2.size[0])
        edge2 = has_face1 & (jp.abs(jp.dot(g2.mat[:, 2], n1)) < _CYL_EDGE_SIN) & (jp.dot(n1, n) > _CYL_FACE_COS)
    else:
        e2, edge2 = jp.zeros((2, 3), dt), jp.zeros((), bool)
    edge1 = edge1 & ~face_face
    edge2 = edge2 & ~face_face & ~edge1
    # reference: geom2's face, except for an edge of geom2 on geom1's face
    nv = max(w1.shape[0], w2.shape[0])
    w1p, w2p = _pad_rows(w1, nv, w1[0]), _pad_rows(w2, nv, w2[0])
    m1p, m2p = _pad_rows(m1, nv, False), _pad_rows(m2, nv, False)
    emask = jp.arange(nv) < 2
    e1p, e2p = _pad_rows(e1, nv, e1[0]), _pad_rows(e2, nv, e2[0])
    wr = jp.where(edge2, w1p, w2p)
    rmask = jp.where(edge2, m1p, m2p)
    nr = jp.where(edge2, n1, n2)
    r0 = jp.where(edge2, p1, p2)
    wi = jp.where(face_face, w1p, jp.where(edge1, e1p, e2p))
    imask = jp.where(face_face, m1p, emask)
    pts, ok, depth = _manifold(
        wr,
        rmask,
        nr,
        r0,
        wi,
        imask,
        jp.where(face_face, n1, -nr),
        margin,
        inc_poly=face_face,
        cdir=jp.where(face_face, -n1, nr),
    )
    ok = ok & (depth <= margin)
    idx, valid = _reduce_quad(pts, ok, nr)
    pts, depth = pts[idx], depth[idx]
    idx = jp.arange(idx.shape[0])
    if t1 != GeomType.CAPSULE:  # face-face: MuJoCo's own points (as `_polyhedral`), its cap being a 16-gon
        x2, ok2 = _face_manifold(v1, v2, poly1, npoly1, poly2, npoly2, n1, margin)
        x1 = x2 - n1 * ((x2 - v1[poly1[0]]) @ n1)[:, None]  # onto geom1's cap plane along n1
        use = face_face & (npoly2 > 0)
        pts = jp.where(use, x1, pts)
        depth = jp.where(use, (x1 - p2) @ n2, depth)
        valid = jp.where(use, ok2, valid)
    return _manifold_contacts(pts, depth, idx, valid, nr, edge2, face_face | edge1 | edge2, dist0, pos0, n, dt)


def capsule_cylinder(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Capsule-cylinder: 2 contacts for a capsule lying on a cap (within 0.0888 rad), else GJK/EPA."""
    return _cylinder_pair(GeomType.CAPSULE, GeomType.CYLINDER, g1, g2, margin)


def capsule_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Capsule-mesh: 2 contacts for a capsule lying on a mesh face (within 0.0888 rad; MuJoCo 4's multiccd edge-face
    manifold), else GJK/EPA."""
    return _cylinder_pair(GeomType.CAPSULE, GeomType.MESH, g1, g2, margin)


def capsule_mesh_single(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Capsule-mesh with multiccd disabled: the single contact (separating axes, GJK within the margin: `_collide`)."""
    return _one_contact(*_collide(GeomType.CAPSULE, GeomType.MESH, g1, g2, margin))


def cylinder_cylinder(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Cylinder-cylinder: cap-cap manifold (up to 4), side on cap (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.CYLINDER, g1, g2, margin)


def cylinder_box(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Cylinder-box: cap-face manifold (up to 4), side on face (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.BOX, g1, g2, margin)


def cylinder_mesh(g1: GeomInfo, g2: GeomInfo, margin) -> Contacts:
    """Cylinder-mesh: cap-face manifold (up to 4), side on face (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.MESH, g1, g2, margin)
