"""Mesh-SDF collisions (MuJoCo's mjc_MeshSDF): the faces of a mesh geom (geom1) against an SDF geom's field (geom2).

MuJoCo walks the mesh's bounding volume hierarchy (collision/mesh_bvh.py) with a stack (a node's second child is
visited before its first), in the SDF's frame:
  - a node is entered, and a leaf's face processed, only when the SDF's distance at the node box's centre is below
    the box's half diagonal;
  - a face is kept only when a sphere test passes (MuJoCo's triangleIntersect: with d the SDF at the centroid and
    h = -d / 10, if |h| < 0.1 whether d is below the triangle's circumradius, else whether the SDF at the centre of
    the sphere through the three corners and the centroid moved by -h along the face normal is below its radius);
  - from `sdf_initpoints` starting points per face (the barycentric Halton points (bases 2 and 3, indices 1..n,
    folded into the triangle)), `sdf_iterations` Frank-Wolfe steps on the SDF over the triangle (the corner with the
    smallest projection on the gradient, step 2 / (k + 2)); the end point is a candidate if the SDF there is < 0;
  - the first mjMAXCONPAIR (50) candidates in that order are the contacts, except a point within mjMINVAL of an
    earlier contact's or with a vanishing SDF gradient: distance the SDF value, normal the negated unit gradient
    (into the SDF), position the point moved by +dist/2 along the normal (MuJoCo 4.0, measured).
Here every face and starting point is computed at once (fixed shapes: nface x initpoints Frank-Wolfe runs, vmapped),
the box tests of all BVH nodes too; a face counts when its leaf and all its ancestors pass, and the first 50 valid
candidates in MuJoCo's visiting order are gathered (`jnp.nonzero` with a static size). The mesh's vertices and BVH
boxes are the Model's (traced; the BVH is compiled with the mesh: mjcf/compile.py, collision/mesh_bvh.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.sdf import MINVAL, _normalize, geom_distance, geom_gradient, halton
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo
from mjx_lite.types import GeomType

MAXCONPAIR = 50  # mjMAXCONPAIR


@functools.cache
def _barycentric(n: int) -> np.ndarray:
    """(n, 3) MuJoCo's starting points in a triangle: Halton (2, 3) of indices 1..n, folded where u + v > 1."""
    out = []
    for sp in range(n):
        u, v = halton(sp + 1, 2), halton(sp + 1, 3)
        if u + v > 1:
            u, v = 1 - u, 1 - v
        out.append((1 - u - v, u, v))
    return np.array(out, float).reshape(n, 3)


class _Plan:
    """Host tables of one mesh's BVH (child (nnode, 2), nodeid (nnode,), the Model's sdfbvh_*): its faces (nface, 3)
    (local vertex ids) in MuJoCo's visiting order and per face the nodes to pass (its leaf and ancestors, padded with
    the leaf) (nface, depth)."""

    def __init__(self, child: np.ndarray, nodeid: np.ndarray, face: np.ndarray):
        parent = np.full(len(child), -1, np.int64)
        for k, (a, b) in enumerate(child.tolist()):
            for c in (a, b):
                if c >= 0:
                    parent[c] = k
        order, stack = [], [0] if len(child) else []
        while stack:  # MuJoCo's stack: children pushed first then second, popped second first
            k = stack.pop()
            if nodeid[k] != -1:
                order.append(k)
                continue
            stack.extend(c for c in child[k].tolist() if c != -1)
        paths = []
        for leaf in order:
            path, k = [], leaf
            while k >= 0:
                path.append(k)
                k = parent[k]
            paths.append(path)
        depth = max(len(p) for p in paths)
        self.path = np.array([p + [p[0]] * (depth - len(p)) for p in paths], np.int32)
        self.face = face[nodeid[np.asarray(order, np.int64)]]


def _triangle_ok(t, dist):
    """MuJoCo's triangleIntersect for a triangle t (3, 3) in the SDF's frame (dist: the SDF)."""
    e0, e1 = t[1] - t[0], t[2] - t[0]
    normal, _ = _normalize(jp.cross(e0, e1))
    p = t[0] * (1.0 / 3.0) + t[1] * (1.0 / 3.0) + t[2] * (1.0 / 3.0)
    dc = dist(p)
    h = -dc / 10.0
    a = jp.linalg.norm(t[0] - t[1])
    b = jp.linalg.norm(t[1] - t[2])
    c = jp.linalg.norm(t[2] - t[0])
    s = (a + b + c) / 2.0
    area = jp.sqrt(jp.maximum(s * (s - a) * (s - b) * (s - c), 0.0))
    flat_ok = dc < (a * b * c) / (4.0 * jp.maximum(area, MINVAL))
    p4 = p - h * normal
    v = t - p4[None, :]
    cr = jp.stack([jp.cross(v[1], v[2]), jp.cross(v[2], v[0]), jp.cross(v[0], v[1])])
    centre = cr[0] * (v[0] @ v[0]) + cr[1] * (v[1] @ v[1]) + cr[2] * (v[2] @ v[2])
    denom = 2.0 * (v[0] @ cr[0])
    degenerate = jp.abs(denom) < MINVAL
    centre = centre / jp.where(degenerate, 1.0, denom)
    r = jp.sqrt(centre @ centre)
    sphere_ok = dist(centre + p4) < r
    deg_ok = dc < jp.linalg.norm(e0)
    return jp.where(jp.abs(h) < 0.1, flat_ok, jp.where(degenerate, deg_ok, sphere_ok))


def mesh_sdf_collide(g1: GeomInfo, g2: GeomInfo, aabb1, aabb2, *, plan: _Plan, sdf2, vert, bvh_aabb, initpoints: int,
                     iterations: int) -> Contacts:  # fmt: skip
    """MAXCONPAIR contact rows of mesh geom1 (local vertices `vert` (nv, 3), its BVH's boxes bvh_aabb (nnode, 6) and
    `plan`) against SDF geom2 (configuration sdf2). See the module docstring. (aabb1, aabb2: unused, the SDF
    colliders' signature.)"""
    del aabb1, aabb2
    dt = g1.pos.dtype
    r1, r2 = g1.mat, g2.mat
    rot = r2.T @ r1  # mesh frame -> SDF frame
    off = r2.T @ (g1.pos - g2.pos)

    def dist(x):
        return geom_distance(GeomType.SDF, sdf2, x, g2.size)

    def grad(x):
        return geom_gradient(GeomType.SDF, sdf2, x, g2.size)

    # boxes of the BVH nodes (mesh frame): the SDF at their centres against their half diagonals
    box = bvh_aabb
    centres = box[:, :3] @ rot.T + off
    node_ok = jax.vmap(dist)(centres) < jp.linalg.norm(box[:, 3:], axis=1)
    tri = (vert @ rot.T + off)[jp.asarray(plan.face)]  # (nface, 3, 3) in visiting order
    face_ok = jp.all(node_ok[jp.asarray(plan.path)], axis=1) & jax.vmap(lambda t: _triangle_ok(t, dist))(tri)

    bary = jp.asarray(_barycentric(initpoints), dt)  # (ns, 3)

    def frank_wolfe(t, b):
        x = b[0] * t[0] + b[1] * t[1] + b[2] * t[2]

        def body(x, k):
            g = grad(x)
            f = t @ g
            s = t[jp.argmin(f)]
            return x + (s - x) * (2.0 / (k + 2.0)), None

        x, _ = jax.lax.scan(body, x, jp.arange(iterations, dtype=dt))
        return x, dist(x)

    xs, depth = jax.vmap(lambda t: jax.vmap(lambda b: frank_wolfe(t, b))(bary))(tri)  # (nface, ns, ...)
    valid = (face_ok[:, None] & (depth < 0)).reshape(-1)
    (idx,) = jp.nonzero(valid, size=MAXCONPAIR, fill_value=0)
    taken = jp.arange(MAXCONPAIR) < jp.sum(valid)
    x = xs.reshape(-1, 3)[idx]
    d = depth.reshape(-1)[idx]
    g = jax.vmap(grad)(x)
    nrm, glen = jax.vmap(_normalize)(g)
    ok = taken & (glen >= MINVAL)
    d2 = jp.sum((x[:, None, :] - x[None, :, :]) ** 2, axis=-1)
    close = (d2 < MINVAL * MINVAL) & jp.tril(jp.ones((MAXCONPAIR, MAXCONPAIR), bool), -1)
    ok = ok & ~jp.any(close & ok[None, :], axis=1)
    normal = -nrm @ r2.T
    pos = x @ r2.T + g2.pos + (0.5 * d)[:, None] * normal
    d = jp.where(ok, d, NOCONTACT)
    pos = jp.where(ok[:, None], pos, 0.0)
    normal = jp.where(ok[:, None], normal, jp.array([0.0, 0.0, 1.0], dt))
    return Contacts(d, pos, normal, jp.zeros_like(pos))


def collider(m, mesh: int, sdf2) -> tuple:
    """(collider f(info1, info2, aabb1, aabb2) -> Contacts, MAXCONPAIR) for the pairs of mesh `mesh` (geom1) and SDF
    configuration sdf2 (geom2); `collision/sdf.bind` adds the model's tables."""
    adr, nv = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
    fadr, nf = int(m.mesh_faceadr[mesh]), int(m.mesh_facenum[mesh])
    badr, nb = int(m.mesh_sdfbvhadr[mesh]), int(m.mesh_sdfbvhnum[mesh])
    face = np.asarray(m.mesh_face)[fadr : fadr + nf].astype(np.int64)
    plan = _Plan(np.asarray(m.sdfbvh_child)[badr : badr + nb], np.asarray(m.sdfbvh_nodeid)[badr : badr + nb], face)
    fn = functools.partial(mesh_sdf_collide, plan=plan, sdf2=sdf2, mesh=(adr, nv), bvh=(badr, nb),
                           initpoints=max(1, int(m.opt.sdf_initpoints)),
                           iterations=int(m.opt.sdf_iterations))  # fmt: skip
    return fn, MAXCONPAIR
