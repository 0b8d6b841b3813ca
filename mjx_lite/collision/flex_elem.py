"""Geom-element colliders of flex contacts (MuJoCo 4.0's mj_collideGeomElem for dim 1 and 2 flexes): one geom
against one flex element (an edge: a capsule of the flex radius; a triangle: a triangle thickened by the radius).

Each collider handles ONE (geom, element) pair and returns `ELEM_NCON[(geom type, dim)]` candidate rows
(dist, pos, normal from the geom to the element, ok); rows that are not contacts have ok False. The sets follow
MuJoCo's raw primitives:
  dim 1 (the element is the capsule from vertex 1 to vertex 0, its axis along v0 - v1): sphere-capsule (1 row),
    capsule-capsule (2: the parallel case), capsule-box (2, the box second, so the normal is reversed);
  dim 2: sphere-triangle (1: the nearest point of the triangle to the centre), capsule-triangle (5: the two segment
    ends as spheres against the triangle, then each triangle vertex against the segment interior), box-triangle
    (11: each triangle vertex inside the box slab region against the box face of least penetration, then each box
    corner as a point against the triangle).
`barycentric(p, x)` gives the weights of the element's vertices at the point of the element nearest to p (MuJoCo 4.0
distributes an element contact to its vertices with them).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import general, primitive
from mjx_lite.collision.types import NOCONTACT, GeomInfo, Mask, Mat3, Points, Scalar, Values, Vec3
from mjx_lite.math import dot3, safe_norm
from mjx_lite.types import MINVAL, GeomType

__all__ = ["ELEM_NCON", "barycentric", "collide"]

ELEM_NCON = {(GeomType.SPHERE, 1): 1, (GeomType.CAPSULE, 1): 2, (GeomType.BOX, 1): 2,
             (GeomType.SPHERE, 2): 1, (GeomType.CAPSULE, 2): 5, (GeomType.BOX, 2): 11}  # fmt: skip
# the geoms that meet an element through the general convex collider (MuJoCo's mjc_ConvexElem): one row
CONVEX = {1: (GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.MESH),
          2: (GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.MESH),
          3: (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX, GeomType.MESH)}
ELEM_NCON.update({(t, dim): 1 for dim, ts in CONVEX.items() for t in ts})
# an element's hull for the convex collider: triangles (both sides of a cloth triangle; a tetrahedron's four faces)
# and edges with two of their triangles (the hull tables of a mesh, `GeomInfo`)
_ELEM_FACE = {2: np.array([[0, 1, 2], [0, 2, 1]], np.int32),
              3: np.array([[0, 1, 2], [0, 3, 1], [0, 2, 3], [1, 3, 2]], np.int32)}
_ELEM_EDGE = {2: np.array([[0, 1, 0, 1], [1, 2, 0, 1], [2, 0, 0, 1]], np.int32),
              3: np.array([[0, 1, 0, 1], [0, 2, 0, 2], [0, 3, 1, 2], [1, 2, 0, 3], [1, 3, 1, 3], [2, 3, 2, 3]],
                          np.int32)}  # fmt: skip

Rows = tuple[Values, Points, Points, Mask]  # (dist (K,), pos (K, 3), normal (K, 3), ok (K,))


def _normalize(v: Vec3) -> tuple[Vec3, Scalar]:
    """mju_normalize3: (v / |v|, |v|), (1, 0, 0) where |v| < MINVAL (finite gradients)."""
    n = safe_norm(v)
    small = n < MINVAL
    ex = jp.zeros_like(v).at[0].set(1.0)
    return jp.where(small, ex, v / jp.where(small, 1.0, n)), n


def _seg2(p: jax.Array, u: jax.Array, v: jax.Array) -> tuple[jax.Array, Scalar]:
    """Nearest point to p (2,) on the 2-D segment (u, v), and its distance."""
    uv, up = v - u, p - u
    a = jp.dot(uv, up) / jp.maximum(MINVAL, jp.dot(uv, uv))
    res = jp.where(a <= 0, u, jp.where(a >= 1, v, u + a * uv))
    return res, safe_norm(res - p)


def _area_sign(p1, p2, p3) -> Scalar:
    return jp.sign((p1[0] - p3[0]) * (p2[1] - p3[1]) - (p2[0] - p3[0]) * (p1[1] - p3[1]))


def sphere_triangle(s: Vec3, rs: Scalar, t1: Vec3, t2: Vec3, t3: Vec3, rt: Scalar, margin: Scalar) -> Rows:
    """One row: sphere (centre s, radius rs) against the triangle (t1, t2, t3) of radius rt (mjraw_SphereTriangle:
    the nearest triangle point found in the triangle's plane, 2-D edge tests outside it)."""
    rbound = margin + rs + rt
    S, A, B = s - t1, t2 - t1, t3 - t1
    N, _ = _normalize(jp.cross(A, B))
    dst_s = jp.dot(N, S)
    ok = jp.abs(dst_s) <= rbound
    P = S - dst_s * N
    V1, len_a = _normalize(A)
    V2, _ = _normalize(jp.cross(N, A))
    z = jp.zeros((), s.dtype)
    o = jp.stack([z, z])
    a = jp.stack([len_a, z])
    b = jp.stack([jp.dot(V1, B), jp.dot(V2, B)])
    p = jp.stack([jp.dot(V1, P), jp.dot(V2, P)])
    s1, s2, s3 = _area_sign(p, o, a), _area_sign(p, a, b), _area_sign(p, b, o)
    inside = (s1 == s2) & (s2 == s3)
    (x0, d0), (x1, d1), (x2, d2) = _seg2(p, o, a), _seg2(p, a, b), _seg2(p, b, o)
    best = jp.where((d0 < d1) & (d0 < d2), x0, jp.where(d1 < d2, x1, x2))
    X = jp.where(inside, P, V1 * best[0] + V2 * best[1])
    nrm, dst = _normalize(X - S)
    ok = ok & (dst <= rbound)
    dist = dst - rs - rt
    pos = s + nrm * (rs + 0.5 * dist)
    return dist[None], pos[None], nrm[None], ok[None]


def box_triangle(pos: Vec3, mat: Mat3, size: Vec3, t: Points, rt: Scalar, margin: Scalar) -> Rows:
    """11 rows (mjraw_BoxTriangle): the 3 triangle vertices t (3, 3) against the box face of least penetration
    (where inside the box grown by margin + rt), then the 8 box corners as points against the triangle."""
    local = (t - pos) @ mat  # (3, 3) vertices in the box frame
    vals = jp.abs(local) - size
    ax = jp.argmax(vals, axis=1)  # the first of equal maxima, as MuJoCo's strict '>' scan
    onehot = jax.nn.one_hot(ax, 3, dtype=t.dtype)
    maxval = jp.sum(vals * onehot, axis=1)
    ok = ~(maxval - rt > margin) & jp.all(jp.abs(local) <= size + margin + rt, axis=1)
    sgn = jp.where(jp.sum(local * onehot, axis=1) > 0, 1.0, -1.0)
    normal = (onehot * sgn[:, None]) @ mat.T
    dist = maxval - rt
    vpos = t - normal * (rt + 0.5 * dist)[:, None]
    corners = np.array([[1 if i & 1 else -1, 1 if i & 2 else -1, 1 if i & 4 else -1] for i in range(8)], float)
    cw = pos + (jp.asarray(corners, t.dtype) * size) @ mat.T  # (8, 3)
    cd, cp, cn, cok = jax.vmap(lambda c: sphere_triangle(c, 0.0, t[0], t[1], t[2], rt, margin))(cw)
    return (jp.concatenate([dist, cd[:, 0]]), jp.concatenate([vpos, cp[:, 0]]), jp.concatenate([normal, cn[:, 0]]),
            jp.concatenate([ok, cok[:, 0]]))  # fmt: skip


def capsule_triangle(pos: Vec3, mat: Mat3, size: Vec3, t: Points, rt: Scalar, margin: Scalar) -> Rows:
    """5 rows (mjraw_CapsuleTriangle): the capsule's segment ends as spheres against the triangle, then each
    triangle vertex against the segment interior (parameter strictly inside (MINVAL, 1 - MINVAL))."""
    radius, half = size[0], size[1]
    axis = mat[:, 2]
    p1, p2 = pos - axis * half, pos + axis * half
    e1 = sphere_triangle(p1, radius, t[0], t[1], t[2], rt, margin)
    e2 = sphere_triangle(p2, radius, t[0], t[1], t[2], rt, margin)
    ab = p2 - p1
    tt = dot3(t - p1, ab) / jp.maximum(4 * half * half, MINVAL)  # (3,)
    closest = p1 + tt[:, None] * ab
    vec, dst = jax.vmap(_normalize)(t - closest)
    ok = (tt > MINVAL) & (tt < 1 - MINVAL) & ~(dst > radius + rt + margin)
    dist = dst - radius - rt
    vpos = 0.5 * (closest + t + vec * (radius - rt))
    return tuple(jp.concatenate([a, b, c]) for a, b, c in zip(e1, e2, (dist, vpos, vec, ok)))


def _edge_capsule(x: Points, radius: Scalar) -> GeomInfo:
    """The capsule of a dim-1 element (mj_makeCapsule): centre the midpoint, axis along x[0] - x[1], half length
    |x[0] - x[1]| / 2, radius the flex radius. Only the axis (z column) of the frame is read by the colliders."""
    z, length = _normalize(x[0] - x[1])
    zz = jp.where(length < MINVAL, jp.asarray([0.0, 0.0, 1.0], x.dtype), z)  # mju_quatZ2Vec: no rotation
    helper = jp.where(jp.abs(zz[0]) < 0.9, jp.asarray([1.0, 0.0, 0.0], x.dtype), jp.asarray([0.0, 1.0, 0.0], x.dtype))
    xa, _ = _normalize(helper - zz * jp.dot(helper, zz))
    mat = jp.stack([xa, jp.cross(zz, xa), zz], axis=1)
    size = jp.stack([radius, 0.5 * length, jp.zeros_like(radius)])
    return GeomInfo(pos=0.5 * (x[0] + x[1]), mat=mat, size=size)


def _cylinder_normal(geom: GeomInfo, pos: Vec3, normal: Vec3) -> Vec3:
    """mjc_fixNormal of a cylinder geom (MuJoCo 4.0 applies it to cloth contacts found by GJK/EPA): the radial
    direction at the contact point where it lies within 95% of the half height and is at least 4x nearer the round
    wall than the flat one, else `normal` unchanged."""
    p = geom.mat.T @ (pos - geom.pos)
    flat = jp.abs(geom.size[1] - jp.abs(p[2]))
    rnd = jp.abs(geom.size[0] - safe_norm(p[:2]))
    radial, _ = _normalize(geom.mat @ jp.stack([p[0], p[1], jp.zeros_like(p[0])]))
    use = (jp.abs(p[2]) <= 0.95 * geom.size[1]) & ~(flat < 0.25 * rnd)
    return jp.where(use, radial, normal)


def convex(gtype: int, dim: int, geom: GeomInfo, x: Points, radius: Scalar, margin: Scalar) -> Rows:
    """One row (MuJoCo 4.0's mjc_ConvexElem): the geom (type gtype; a mesh with its hull tables, as the collision
    driver's GeomInfo) against the element x (dim + 1, 3) of flex radius `radius` by the general convex collider
    (`general.collide`: GJK/EPA, exact separating axes for a rope edge in a mesh, the normal of curved pairs refined).
    A rope edge enters as a capsule, a triangle or tetrahedron as a small mesh (its vertices about their mean, its
    faces and edges as kinks of the refinement) thickened by the radius. A contact where dist < margin (MuJoCo grows
    both shapes by margin / 2 and takes penetrations only). Cloth (dim 2) normals against a cylinder get MuJoCo's
    radial fix (`_cylinder_normal`; its fix of ellipsoid normals is the converged normal itself)."""
    dt = x.dtype
    if dim == 1:
        te, elem, extra = GeomType.CAPSULE, _edge_capsule(x, radius), jp.zeros((), dt)
    else:
        c = jp.mean(x, axis=0)
        elem = GeomInfo(pos=c, mat=jp.eye(3, dtype=dt), size=jp.zeros(3, dt), vert=x - c,
                        face=jp.asarray(_ELEM_FACE[dim]), edge=jp.asarray(_ELEM_EDGE[dim]))  # fmt: skip
        te, extra = GeomType.MESH, radius
    # n: from the element to the geom; the early exits of polytope pairs see the core's margin (grown by the radius)
    dist, pos, n = general.collide(te, gtype, elem, geom, margin + extra, sat_budget=0)
    dist = dist - extra
    pos = pos + 0.5 * extra * n
    normal = -n
    if dim == 2 and gtype == GeomType.CYLINDER:
        normal = _cylinder_normal(geom, pos, normal)
    return dist[None], pos[None], normal[None], (dist < margin)[None]


def collide(gtype: int, dim: int, geom: GeomInfo, x: Points, radius: Scalar, margin: Scalar) -> Rows:
    """The ELEM_NCON[(gtype, dim)] rows of the geom (pos, mat, size; a mesh's hull tables) against the element with
    vertices x (dim + 1, 3) and flex radius `radius`; margin: detection distance (margin + gap). Normals from geom to
    element."""
    gpos, gmat, gsize = geom.pos, geom.mat, geom.size
    if dim == 1:
        cap = _edge_capsule(x, radius)
        if gtype == GeomType.SPHERE:
            c = primitive.sphere_capsule(geom, cap, margin)
            return c.dist, c.pos, c.normal, c.dist < NOCONTACT
        if gtype == GeomType.CAPSULE:
            c = primitive.capsule_capsule(geom, cap, margin)
            return c.dist, c.pos, c.normal, c.dist < NOCONTACT
        if gtype == GeomType.BOX:
            c = primitive.capsule_box(cap, geom, margin)
            return c.dist, c.pos, -c.normal, c.dist <= margin
    elif dim == 2:
        if gtype == GeomType.SPHERE:
            return sphere_triangle(gpos, gsize[0], x[0], x[1], x[2], radius, margin)
        if gtype == GeomType.CAPSULE:
            return capsule_triangle(gpos, gmat, gsize, x, radius, margin)
        if gtype == GeomType.BOX:
            return box_triangle(gpos, gmat, gsize, x, radius, margin)
    if gtype in CONVEX.get(dim, ()):
        return convex(gtype, dim, geom, x, radius, margin)
    raise NotImplementedError(f"flex contacts of {GeomType(gtype).name} geoms with dim {dim} flexes")


def barycentric(p: Vec3, x: Points) -> jax.Array:
    """(dim + 1,) weights of the vertices x (dim + 1, 3) of an edge, triangle or tetrahedron at its point nearest to p
    (a tetrahedron: p's own coordinates inside it, else those of the nearest point of its nearest face)."""
    if x.shape[0] == 4:
        return _barycentric_tet(p, x)
    if x.shape[0] == 2:
        e = x[1] - x[0]
        t = jp.clip(jp.dot(p - x[0], e) / jp.maximum(jp.dot(e, e), MINVAL), 0.0, 1.0)
        return jp.stack([1.0 - t, t])
    a, b, c = x[0], x[1], x[2]
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = jp.dot(ab, ap), jp.dot(ac, ap)
    bp = p - b
    d3, d4 = jp.dot(ab, bp), jp.dot(ac, bp)
    cp = p - c
    d5, d6 = jp.dot(ab, cp), jp.dot(ac, cp)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2

    def div(u, w):
        return u / jp.where(jp.abs(w) < MINVAL, MINVAL, w)

    one, zero = jp.ones_like(d1), jp.zeros_like(d1)
    t_ab, t_ac, t_bc = div(d1, d1 - d3), div(d2, d2 - d6), div(d4 - d3, (d4 - d3) + (d5 - d6))
    den = va + vb + vc
    v_in, w_in = div(vb, den), div(vc, den)
    cases = [  # (condition, weights), the first that holds (Voronoi regions of the vertices, edges, the face)
        ((d1 <= 0) & (d2 <= 0), (one, zero, zero)),
        ((d3 >= 0) & (d4 <= d3), (zero, one, zero)),
        ((vc <= 0) & (d1 >= 0) & (d3 <= 0), (1 - t_ab, t_ab, zero)),
        ((d6 >= 0) & (d5 <= d6), (zero, zero, one)),
        ((vb <= 0) & (d2 >= 0) & (d6 <= 0), (1 - t_ac, zero, t_ac)),
        ((va <= 0) & (d4 - d3 >= 0) & (d5 - d6 >= 0), (zero, 1 - t_bc, t_bc)),
    ]
    w = jp.stack([1 - v_in - w_in, v_in, w_in])
    for cond, ws in reversed(cases):
        w = jp.where(cond, jp.stack(ws), w)
    return w


def _barycentric_tet(p: Vec3, x: Points) -> jax.Array:
    """(4,) weights of the tetrahedron x (4, 3) at its point nearest to p (`barycentric`)."""
    t = jp.stack([x[1] - x[0], x[2] - x[0], x[3] - x[0]], axis=1)
    det = jp.linalg.det(t)
    ok = jp.abs(det) > MINVAL * jp.maximum(jp.max(jp.abs(t)) ** 3, MINVAL)
    lam = jp.linalg.solve(jp.where(ok, t, jp.eye(3, dtype=x.dtype)), p - x[0])
    inside = ok & jp.all(lam >= 0) & (jp.sum(lam) <= 1)
    faces = _ELEM_FACE[3]
    fw = jax.vmap(lambda f: barycentric(p, x[f]))(jp.asarray(faces))  # (4, 3)
    near = jp.einsum("fk,fkj->fj", fw, x[faces])  # (4, 3) the nearest point of each face
    k = jp.argmin(dot3(near - p, near - p))
    w = jp.zeros(4, x.dtype).at[jp.asarray(faces)[k]].add(fw[k])
    return jp.where(inside, jp.concatenate([1 - jp.sum(lam, keepdims=True), lam]), w)
