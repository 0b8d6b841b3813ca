"""Newton refinement of the contact normal of curved pairs (an ellipsoid or a cylinder: their support map is smooth).

GJK/EPA (`gjk.py`, `epa.py`) stop on the value of the Minkowski difference's support function, which is flat about
a smooth minimum, so the normal they return is only square-root accurate (float32: up to 0.3 rad). `refine_normal`
runs Newton's method on that support function, with the kinks of boxes, capsules, cylinders and meshes as
candidates, and makes the normal exact (float32: 2e-4 rad). MuJoCo has no such step: its GJK/EPA runs to
`opt.ccd_tolerance`; the refined answer is that of MuJoCo run to convergence. Fixed iterations, differentiable.
Shapes: n, points (3,); a GeomInfo as in `types.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.polytope import triangle_normals
from mjx_lite.collision.support import support, support_jacobian
from mjx_lite.collision.types import GeomInfo, GType, Mask, Points, Scalar, Vec3
from mjx_lite.math import dot3, outer3, safe_norm, safe_normalize
from mjx_lite.types import GeomType

REFINE_ITERATIONS = 8  # Newton steps on the contact normal of curved pairs (`refine_normal`)
_REFINE_STEP = 0.25  # longest accepted step (rad)
_REFINE_MESH_MAX = 32  # meshes with at most this many hull triangles + edges give their kinks to the refinement


def small_mesh(gtype: GType, g: GeomInfo) -> bool:
    """Whether g is (statically) a mesh with hull tables of at most _REFINE_MESH_MAX triangles + edges (a height
    field's prism: 8 + 9): its faces and edges are candidates of `refine_normal`."""
    return (isinstance(gtype, int) and gtype == GeomType.MESH and g.face is not None and g.edge is not None
            and g.face.shape[0] + g.edge.shape[0] <= _REFINE_MESH_MAX)  # fmt: skip


def mesh_kink_tables(vert: jax.Array, face: jax.Array, edge: jax.Array) -> dict[str, jax.Array]:
    """The kinks of meshes' support functions in their geom frames, once per mesh (GeomInfo.facenormal, edgekink):
    from hull vertices vert (M, H, 3), triangles face (M, T, 3) and edges edge (M, E, 4) (two vertex ids, two
    triangles), {"facenormal": unit triangle normals (M, T, 3), "edgekink": per edge its unit direction and its two
    triangles' unit normals (M, E, 3, 3)} (the same operations as `_mesh_kinks`' per pair)."""

    def one(w, tris, edges):
        fn = triangle_normals(w, tris)[0]
        e = safe_normalize(w[edges[:, 1]] - w[edges[:, 0]])[0]
        return fn, jp.stack([e, fn[edges[:, 2]], fn[edges[:, 3]]], axis=1)

    fn, ek = jax.vmap(one)(vert, face, edge)
    return {"facenormal": fn, "edgekink": ek}


def _mesh_kinks(gtype: GType, g: GeomInfo) -> tuple | None:
    """For a mesh that is not small (`small_mesh`), static or traced type with hull tables: (is a mesh (), unit face
    normals (T, 3), and per edge its unit direction and the unit normals fa, fb of its two faces, stacked (3 E, 3),
    fa . fb (E,), whether they make a kink (E,) (not a flat face's triangulation diagonal), and the frame they are
    in: None for world (computed here per pair from its vertices), the geom's rotation (3, 3) where they are the
    mesh's rows of the side's tables (GeomInfo.facenormal / edgekink, `mesh_kink_tables`: once per mesh, no per-pair
    rotation)), from which `refine_normal` picks the kinks near its current normal; None otherwise."""
    if g.face is None or g.edge is None or g.vert is None or small_mesh(gtype, g):
        return None
    if isinstance(gtype, int) and gtype != GeomType.MESH:
        return None
    is_mesh = jp.asarray(True) if isinstance(gtype, int) else gtype == GeomType.MESH
    if g.facenormal is not None and g.edgekink is not None and g.mesh is not None:
        # the mesh's own rows of the side's tables (`mesh_kink_tables`), kept in the geom frame: the direction is
        # rotated into it instead of rotating every normal (`_near_kinks`)
        fn, ek = g.facenormal[g.mesh], g.edgekink[g.mesh]
        c12 = dot3(ek[:, 1], ek[:, 2])
        efab = jp.concatenate([ek[:, 0], ek[:, 1], ek[:, 2]])
        return is_mesh, fn, efab, c12, 1 - c12 * c12 > 1e-8, g.mat
    w = g.vert  # in the geom frame (model data: once under a vmap over states), rotated at the end
    fn = triangle_normals(w, g.face)[0]
    e = safe_normalize(w[g.edge[:, 1]] - w[g.edge[:, 0]])[0]
    fa, fb = fn[g.edge[:, 2]], fn[g.edge[:, 3]]
    c12 = dot3(fa, fb)
    return is_mesh, outer3(fn, g.mat), outer3(jp.concatenate([e, fa, fb]), g.mat), c12, 1 - c12 * c12 > 1e-8, None


_MESH_KINKS = 2  # kink circles per mesh (those of the edges whose Gauss arcs are nearest the normal) per iteration


def _near_kinks(kinks: tuple, d: Vec3) -> tuple[Vec3, Scalar, Points, Mask]:
    """The mesh's kinks nearest the unit direction d along which it supports (`_mesh_kinks`): (the face normal
    nearest d (3,), with whether it is within _REFINE_STEP (); the directions (K, 3) of the _MESH_KINKS edges whose
    Gauss arcs (between their faces' normals fa, fb) pass nearest d, with whether d is within _REFINE_STEP of the
    arc (K,)). d is on an edge's arc where d . e = 0 and d = alpha fa + beta fb with alpha, beta >= 0: as fa and fb
    are normal to e, d . fa - (fa . fb) d . fb >= 0 and the same with fa, fb swapped."""
    is_mesh, fn, efab, c12, arc, mat = kinks
    world = d
    if mat is not None:  # the kinks in the geom frame (`mesh_kink_tables`): d into it, the chosen ones out of it
        d = mat.T @ d
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
    face, edges = fn[f], efab[idx]
    if mat is not None:
        face, edges = mat @ face, outer3(edges, mat)
    return face, is_mesh & (jp.dot(face, world) > jp.cos(_REFINE_STEP)), edges, ok


def _frame_kinks(gtype: GType) -> tuple[list[int], list[int]]:
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


def refine_normal(t1: GType, t2: GType, g1: GeomInfo, g2: GeomInfo, n: Vec3) -> tuple[Vec3, Scalar, Vec3, Vec3]:
    """Newton's method on the contact normal of a pair with a curved core shape (ellipsoid, cylinder).

    The core shapes' signed distance is -min_n h(n) over unit n, h(n) = n . (S1(n) - S2(-n)) the support function of
    their Minkowski difference (for penetrating and separated pairs alike), and GJK/EPA's normal approximates the
    minimiser. GJK/EPA stop on the value of h, which is flat (quadratic) about a smooth minimum, so their normal is
    only as good as the square root of their tolerance (float32: up to 0.3 rad). Each iteration takes the lowest h
    among these candidates (none: the normal stays):
      * a Newton step on the sphere, and half of it: the gradient is the support point's part across n (exact to
        rounding), the Hessian E^T (J1(n) + J2(-n)) E - h I (J the supports' derivatives, `support_jacobian`; E a
        basis across n), taken where that is positive definite;
      * where h has a kink along a circle n . a = 0 (a capsule's or a cylinder's side along its axis a, a box edge
        along a box axis, a mesh edge; a: the geoms' frame axes that are kink axes (`_frame_kinks`), a small mesh's
        (`small_mesh`) edge directions, and for a larger mesh the _MESH_KINKS edges whose Gauss arcs pass nearest n
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
        if small_mesh(t, g):  # its face normals (corners) and edge directions (kink circles), rotated
            faces.append(outer3(triangle_normals(g.vert, g.face)[0], g.mat))
            axes.append(outer3(safe_normalize(g.vert[g.edge[:, 1]] - g.vert[g.edge[:, 0]])[0], g.mat))
    axes, faces = jp.concatenate(axes), jp.concatenate(faces)
    # larger meshes: the kinks nearest the current normal, chosen in each iteration (geom2 supports along -n)
    meshes = [(sign, k) for sign, k in ((1.0, _mesh_kinks(t1, g1)), (-1.0, _mesh_kinks(t2, g2))) if k is not None]

    def evaluate(n):
        a, b = support(t1, g1, n), support(t2, g2, -n)
        return a, b, jp.dot(a - b, n)

    def jac(n):
        return support_jacobian(t1, g1, n) + support_jacobian(t2, g2, -n)

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
