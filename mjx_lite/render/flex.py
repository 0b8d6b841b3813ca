"""Flexes for the renderer: what MuJoCo's visualiser draws of them by default (the flex skin), from d.flexvert_xpos.

    plan = flex_plan(m, visible)                      # host, static (None: no flex drawn)
    vert = skin_vertices(plan, m, d.flexvert_xpos)    # (nskin, 3) triangle-soup vertices, world frame
    t, flex, prim = cast(plan, m, vert, xpos, o, dirs, tmin, tmax)    # search pass (no gradients)
    t, n = surface(plan, m, vert, xpos, o, dirs, prim, tmin, tmax)    # differentiable hit of that primitive

What is drawn (MuJoCo 4.0's mjv_updateActiveFlex skin, flat-shaded here):
  dim 2  both sides of the cloth: each triangle offset by +radius and by -radius along the smoothed vertex normals
         (the normalised sum of the unit normals of the triangles around the vertex), and the side strips between
         the two layers along the boundary edges (edges of a single triangle);
  dim 3  the boundary triangles (faces of a single tetrahedron), offset by +radius along the smoothed normals of
         the boundary;
  dim 1  one capsule of radius flex_radius per edge (MuJoCo makes no skin of a 1-D flex).
Triangles of all drawn flexes form one soup with a BVH (`bvh.py`) whose topology is fixed once (split on the vertices
at the model's reference pose) and whose boxes are refitted from the traced vertices at every call, so a deforming
cloth stays correct. Edges are tested by brute force (ropes have few edges).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import dot3
from mjx_lite.pipeline import ray_shapes as shapes
from mjx_lite.render import bvh

__all__ = ["FlexPlan", "cast", "flex_plan", "skin_vertices", "surface"]

_MINVAL = 1e-15


@dataclasses.dataclass(frozen=True)
class FlexPlan:
    """Static tables (host numpy) of the flexes drawn.

    skin_vert, skin_sign: (nskin,) global flex vertex and offset sign (+1, -1) of each soup vertex
    normal_face: (nnf, 3) global flex vertex ids of the triangles whose unit normals are summed at their vertices
    face: (nface, 3) soup vertex ids; face_flex: (nface,) flex id
    soups: the soup's BVH (None without triangles)
    edge: (nedge, 2) global flex vertex ids of the drawn 1-D flexes' edges; edge_flex: (nedge,) flex id
    vert_flex: (nflexvert,) flex id of each flex vertex
    """

    skin_vert: np.ndarray
    skin_sign: np.ndarray
    normal_face: np.ndarray
    face: np.ndarray
    face_flex: np.ndarray
    soups: bvh.Soups | None
    edge: np.ndarray
    edge_flex: np.ndarray
    vert_flex: np.ndarray


def _once(rows: list) -> list:
    """The rows (tuples) whose sorted key occurs exactly once, in order."""
    keys = [tuple(sorted(r)) for r in rows]
    count: dict[tuple, int] = {}
    for k in keys:
        count[k] = count.get(k, 0) + 1
    return [r for r, k in zip(rows, keys) if count[k] == 1]


def _reference_vertices(m) -> np.ndarray:
    """Flex vertex positions (nflexvert, 3) with every body at its body_pos / body_quat offset from its parent
    (joints at zero): only to choose the BVH's split topology."""
    parent = np.asarray(m.body_parentid)
    pos, quat = np.asarray(m.body_pos, float), np.asarray(m.body_quat, float)
    xpos, xmat = np.zeros((m.nbody, 3)), np.tile(np.eye(3), (m.nbody, 1, 1))
    for b in range(1, m.nbody):
        w, x, y, z = quat[b] / max(np.linalg.norm(quat[b]), _MINVAL)
        rot = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])  # fmt: skip
        p = parent[b]
        xpos[b] = xpos[p] + xmat[p] @ pos[b]
        xmat[b] = xmat[p] @ rot
    body = np.asarray(m.flex_vertbodyid)
    return xpos[body] + np.einsum("vij,vj->vi", xmat[body], np.asarray(m.flex_vert, float))


def flex_plan(m, visible: np.ndarray) -> FlexPlan | None:
    """The static drawing plan of the flexes marked in `visible` ((nflex,) bool: the caller decides from the flex
    groups shown and the colours); None when none is drawn."""
    if not m.nflex or not np.any(visible):
        return None
    dims = np.asarray(m.flex_dim)
    vadr, eladr = np.asarray(m.flex_vertadr), np.asarray(m.flex_elemdataadr)
    elnum, edadr, ednum = np.asarray(m.flex_elemnum), np.asarray(m.flex_edgeadr), np.asarray(m.flex_edgenum)
    elem_all, edge_all = np.asarray(m.flex_elem), np.asarray(m.flex_edge)
    skin_vert, skin_sign, normal_face, face, face_flex, edge, edge_flex = [], [], [], [], [], [], []
    for f in np.nonzero(visible)[0]:
        dim, a = int(dims[f]), int(vadr[f])
        if dim == 1:
            e = edge_all[edadr[f] : edadr[f] + ednum[f]] + a
            edge += e.tolist()
            edge_flex += [int(f)] * len(e)
            continue
        el = elem_all[eladr[f] : eladr[f] + elnum[f] * (dim + 1)].reshape(-1, dim + 1) + a
        nv = int(np.asarray(m.flex_vertnum)[f])
        base = len(skin_vert)
        if dim == 2:
            normal_face += el.tolist()
            top = {v: base + i for i, v in enumerate(range(a, a + nv))}
            bot = {v: base + nv + i for i, v in enumerate(range(a, a + nv))}
            skin_vert += list(range(a, a + nv)) * 2
            skin_sign += [1.0] * nv + [-1.0] * nv
            tris = [(top[i], top[j], top[k]) for i, j, k in el] + [(bot[i], bot[k], bot[j]) for i, j, k in el]
            rims = _once([(int(t[1]), int(t[2])) for t in el] + [(int(t[2]), int(t[0])) for t in el]
                         + [(int(t[0]), int(t[1])) for t in el])  # fmt: skip
            for i, j in rims:
                tris += [(top[i], top[j], bot[j]), (top[i], bot[j], bot[i])]
        else:
            shell = _once([(t[0], t[1], t[2]) for t in el] + [(t[0], t[2], t[3]) for t in el]
                          + [(t[0], t[3], t[1]) for t in el] + [(t[1], t[3], t[2]) for t in el])  # fmt: skip
            normal_face += [list(s) for s in shell]
            top = {v: base + i for i, v in enumerate(range(a, a + nv))}
            skin_vert += list(range(a, a + nv))
            skin_sign += [1.0] * nv
            tris = [(top[int(i)], top[int(j)], top[int(k)]) for i, j, k in shell]
        face += tris
        face_flex += [int(f)] * len(tris)
    face = np.asarray(face, np.int64).reshape(-1, 3)
    skin_vert = np.asarray(skin_vert, np.int64)
    soups = None
    if len(face):
        ref = _reference_vertices(m)[skin_vert]
        child, tri, depth = bvh._build_tree(ref, face, 0)
        levels = tuple(np.nonzero((depth == k) & (child[:, 0] >= 0))[0] for k in range(int(depth.max()) + 1))
        z = np.zeros(1, np.int64)
        soups = bvh.Soups(kind=z + 2, dataid=z, vertadr=z, nvert=len(skin_vert), face=face, root=z,
                          node_child=child, node_tri=tri, levels=levels, stack=int(depth.max()) + 2,
                          max_iter=2 * len(child) + 2)  # fmt: skip
    vert_flex = np.repeat(np.arange(m.nflex), np.asarray(m.flex_vertnum))
    return FlexPlan(skin_vert=skin_vert, skin_sign=np.asarray(skin_sign, float),
                    normal_face=np.asarray(normal_face, np.int64).reshape(-1, 3), face=face,
                    face_flex=np.asarray(face_flex, np.int64), soups=soups,
                    edge=np.asarray(edge, np.int64).reshape(-1, 2), edge_flex=np.asarray(edge_flex, np.int64),
                    vert_flex=vert_flex)  # fmt: skip


def _unit(v):
    sq = dot3(v, v)
    return v / jp.sqrt(jp.where(sq > _MINVAL * _MINVAL, sq, 1.0))[..., None] * (sq > _MINVAL * _MINVAL)[..., None]


def skin_vertices(plan: FlexPlan, m, xpos: jax.Array) -> jax.Array:
    """Soup vertices (nskin, 3) from the flex vertex positions xpos (nflexvert, 3): each offset by sign * radius
    along its smoothed vertex normal (zero for a vertex in no normal face)."""
    if not len(plan.skin_vert):
        return jp.zeros((0, 3), xpos.dtype)
    nf = plan.normal_face
    a, b, c = xpos[nf[:, 0]], xpos[nf[:, 1]], xpos[nf[:, 2]]
    n = _unit(jp.cross(b - a, c - a))
    acc = jax.ops.segment_sum(jp.concatenate([n, n, n]), np.concatenate([nf[:, 0], nf[:, 1], nf[:, 2]]),
                              num_segments=xpos.shape[0])  # fmt: skip
    normal = _unit(acc)
    radius = jp.asarray(m.flex_radius, xpos.dtype)[plan.vert_flex[plan.skin_vert]]
    off = (jp.asarray(plan.skin_sign, xpos.dtype) * radius)[:, None] * normal[plan.skin_vert]
    return xpos[plan.skin_vert] + off


def _edge_frames(plan: FlexPlan, m, xpos):
    """Capsule of each drawn edge: centre (E, 3), frame (E, 3, 3) (columns: x, y, z = the edge axis), size (E, 3)."""
    a, b = xpos[plan.edge[:, 0]], xpos[plan.edge[:, 1]]
    axis = b - a
    half = 0.5 * jp.sqrt(jp.maximum(dot3(axis, axis), _MINVAL * _MINVAL))
    z = axis / (2.0 * half)[:, None]
    helper = jp.where((jp.abs(z[:, 0]) < 0.9)[:, None], jp.asarray([1.0, 0.0, 0.0], xpos.dtype),
                      jp.asarray([0.0, 1.0, 0.0], xpos.dtype))  # fmt: skip
    x = _unit(jp.cross(helper, z))
    y = jp.cross(z, x)
    radius = jp.asarray(m.flex_radius, xpos.dtype)[plan.edge_flex]
    size = jp.stack([radius, half, jp.zeros_like(half)], -1)
    return 0.5 * (a + b), jp.stack([x, y, z], -1), size


def _local(o, dirs, pos, mat):
    rel = o - pos
    return jp.einsum("...j,...jk->...k", rel, mat), jp.einsum("...j,...jk->...k", dirs, mat)


def cast(plan: FlexPlan, m, vert, xpos, o, dirs, tmin, tmax):
    """Nearest flex primitive along each ray: t (P,) (tmax: none), flex id (P,) (-1: none), prim (P,): a soup
    triangle id, or nface + edge id for a capsule. o (P, 3), dirs (P, 3), tmin / tmax (P,); no gradients."""
    P = dirs.shape[0]
    best_t, best_f, best_p = tmax, jp.full((P,), -1, jp.int32), jp.full((P,), -1, jp.int32)
    if plan.soups is not None:
        lo, hi = bvh.refit(plan.soups, vert)

        def one(o1, d1, a, b):
            return bvh.traverse(plan.soups, lo, hi, vert, o1, d1, 0, a, b)

        t, f = jax.vmap(one)(o, dirs, tmin, tmax)
        hit = (f >= 0) & (t < best_t)
        best_t = jp.where(hit, t, best_t)
        best_f = jp.where(hit, jp.asarray(plan.face_flex, jp.int32)[jp.maximum(f, 0)], best_f)
        best_p = jp.where(hit, f, best_p)
    if len(plan.edge):
        c, mat, size = _edge_frames(plan, m, xpos)
        ol, dl = _local(o[:, None], dirs[:, None], c[None], mat[None])
        t0, t1, n0, n1 = shapes.capsule(ol, dl, size[None])
        t, _ = shapes.first_hit(t0, t1, n0, n1, tmin[:, None], tmax[:, None])
        k = jp.argmin(t, axis=1)
        tk = jp.min(t, axis=1)
        hit = tk < best_t
        best_t = jp.where(hit, tk, best_t)
        best_f = jp.where(hit, jp.asarray(plan.edge_flex, jp.int32)[k], best_f)
        best_p = jp.where(hit, len(plan.face) + k.astype(jp.int32), best_p)
    return best_t, best_f, best_p


def surface(plan: FlexPlan, m, vert, xpos, o, dirs, prim, tmin, tmax):
    """Differentiable hit of the given primitive per ray (prim from `cast`): t (P,) (inf: none), world normal (P, 3)
    (not normalised, either side)."""
    P = dirs.shape[0]
    t = jp.full((P,), jp.inf, dirs.dtype)
    n = jp.zeros((P, 3), dirs.dtype)
    nface = len(plan.face)
    if nface:
        fv = vert[jp.asarray(plan.face)[jp.clip(prim, 0, nface - 1)]]
        tt, nn = shapes.triangle(o, dirs, fv[:, 0], fv[:, 1], fv[:, 2], bvh.EDGE_EPS)
        tri = (prim >= 0) & (prim < nface)
        t = jp.where(tri, tt, t)
        n = jp.where(tri[:, None], nn, n)
    if len(plan.edge):
        c, mat, size = _edge_frames(plan, m, xpos)
        e = jp.clip(prim - nface, 0, len(plan.edge) - 1)
        ol, dl = _local(o, dirs, c[e], mat[e])
        t0, t1, n0, n1 = shapes.capsule(ol, dl, size[e])
        tt, nn = shapes.first_hit(t0, t1, n0, n1, tmin, tmax)
        cap = prim >= nface
        t = jp.where(cap, tt, t)
        n = jp.where(cap[:, None], jp.einsum("pij,pj->pi", mat[e], nn), n)
    return t, n
