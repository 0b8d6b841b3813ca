"""Triangle soups (meshes and height fields) and their bounding-volume hierarchies.

Host side (`build_soups`, once per Model static part through `static_memo`): every mesh and every height field
the renderer draws becomes a triangle soup (faces index a concatenated vertex array), and each soup gets a binary
BVH over its triangles (median split of triangle centroids along the longest axis, leaves of at most `LEAF`
triangles). Only the topology is static: the node boxes are refitted from the traced vertices at every call
(`refit`), so vertex positions (mesh_vert, hfield_data) can be traced, vmapped or randomised.

Device side (`traverse`): one ray against one soup, a depth-first, near-child-first walk with a fixed-size stack,
pruned by the nearest hit found so far. Its cost grows with the log of the triangle count plus the leaves near
the ray, not with all triangles. The walk (a `while_loop`) only finds which triangle is hit; the renderer then
recomputes that triangle's hit distance from the traced vertices, so depth stays differentiable.

Height fields are drawn as MuJoCo draws them: two triangles per grid cell (top surface), four side walls and a
bottom face at -size[3].
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import ray_shapes as shapes

__all__ = ["LEAF", "Soups", "build_soups", "refit", "soup_vertices", "traverse"]

LEAF = 8  # triangles per BVH leaf: a leaf visit tests this many triangles at once
# triangles are widened by this much (barycentric) so that a ray through an edge two triangles share hits one of them
# (without it, round-off lets some such rays through both: specks of what lies behind a cloth or a mesh)
EDGE_EPS = 1e-9


@dataclasses.dataclass(frozen=True)
class Soups:
    """Static tables of all triangle soups (host numpy).

    kind: (nsoup,) 0 = mesh, 1 = height field; dataid: (nsoup,) mesh or hfield id
    vertadr: (nsoup,) first vertex of each soup in the concatenated vertex array; nvert total vertices
    face: (nface, 3) global vertex ids
    root: (nsoup,) root node of each soup's BVH
    node_child: (nnode, 2) children (-1 for leaves); node_tri: (nnode, LEAF) face ids of a leaf (-1 pad)
    levels: internal node ids grouped by depth, deepest last (refit order is reversed)
    stack: stack size enough for every soup's depth
    """

    kind: np.ndarray
    dataid: np.ndarray
    vertadr: np.ndarray
    nvert: int
    face: np.ndarray
    root: np.ndarray
    node_child: np.ndarray
    node_tri: np.ndarray
    levels: tuple
    stack: int
    max_iter: int


def _hfield_topology(nrow: int, ncol: int) -> np.ndarray:
    """Faces of a height field soup; vertices: nrow*ncol top, then nrow*ncol bottom copies (see soup_vertices)."""
    idx = np.arange(nrow * ncol).reshape(nrow, ncol)
    a, b = idx[:-1, :-1].ravel(), idx[:-1, 1:].ravel()
    c, e = idx[1:, :-1].ravel(), idx[1:, 1:].ravel()
    top = np.concatenate([np.stack([a, b, e], 1), np.stack([a, e, c], 1)])
    bot = nrow * ncol
    walls = []
    for edge in (idx[0, :], idx[-1, :], idx[:, 0], idx[:, -1]):
        p, q = edge[:-1], edge[1:]
        walls.append(np.stack([p, q, q + bot], 1))
        walls.append(np.stack([p, q + bot, p + bot], 1))
    corners = [idx[0, 0], idx[0, -1], idx[-1, -1], idx[-1, 0]]
    bottom = np.array([[corners[0] + bot, corners[1] + bot, corners[2] + bot],
                       [corners[0] + bot, corners[2] + bot, corners[3] + bot]])  # fmt: skip
    return np.concatenate([top] + walls + [bottom]).astype(np.int64)


def soup_vertices(m, soups: Soups) -> jax.Array:
    """Concatenated soup vertices (nvert, 3) in each geom's local frame, from the traced model arrays."""
    parts = []
    for kind, i in zip(soups.kind, soups.dataid):
        if kind == 0:
            a, n = int(m.mesh_vertadr[i]), int(m.mesh_vertnum[i])
            parts.append(jp.asarray(m.mesh_vert)[a : a + n])
        else:
            nrow, ncol = int(m.hfield_nrow[i]), int(m.hfield_ncol[i])
            a = int(m.hfield_adr[i])
            size = m.hfield_size[i]
            z = jp.asarray(m.hfield_data)[a : a + nrow * ncol] * size[2]
            xs = (2.0 * np.arange(ncol) / max(ncol - 1, 1) - 1.0)
            ys = (2.0 * np.arange(nrow) / max(nrow - 1, 1) - 1.0)
            gx, gy = np.meshgrid(xs, ys)
            x = jp.asarray(gx.ravel(), z.dtype) * size[0]
            y = jp.asarray(gy.ravel(), z.dtype) * size[1]
            top = jp.stack([x, y, z], -1)
            bottom = jp.stack([x, y, jp.broadcast_to(-size[3], z.shape)], -1)
            parts.append(jp.concatenate([top, bottom]))
    if not parts:
        return jp.zeros((0, 3))
    return jp.concatenate(parts)


def _build_tree(vert: np.ndarray, face: np.ndarray, first_node: int):
    """BVH of one soup: (child (n, 2), tri (n, LEAF), depth (n,)) with node ids from first_node."""
    cent = vert[face].mean(axis=1)
    child, tri, depth = [], [], []

    def node(ids: np.ndarray, level: int) -> int:
        k = len(child)
        child.append([-1, -1])
        tri.append([-1] * LEAF)
        depth.append(level)
        if len(ids) <= LEAF:
            tri[k][: len(ids)] = ids.tolist()
            return k
        c = cent[ids]
        axis = int(np.argmax(c.max(0) - c.min(0)))
        order = ids[np.argsort(c[:, axis], kind="stable")]
        half = len(order) // 2
        left = node(order[:half], level + 1)
        right = node(order[half:], level + 1)
        child[k] = [left + first_node, right + first_node]
        return k

    if len(face) == 0:
        raise ValueError("render: a mesh or height field with no triangles cannot be drawn")
    node(np.arange(len(face)), 0)
    return np.array(child, np.int64), np.array(tri, np.int64), np.array(depth, np.int64)


def build_soups(m, mesh_ids: list[int], hfield_ids: list[int], mesh_vert: np.ndarray,
                hfield_data: np.ndarray) -> Soups:  # fmt: skip
    """Soups and BVHs of the given meshes and height fields. `mesh_vert`/`hfield_data` are host copies of the
    model's vertex arrays, used only to choose the tree topology (boxes are refitted from traced values)."""
    kinds, dataids, vertadr, faces, roots, childs, tris, depths = [], [], [], [], [], [], [], []
    nvert = 0
    nnode = 0
    nface = 0
    for kind, ids in ((0, mesh_ids), (1, hfield_ids)):
        for i in ids:
            if kind == 0:
                a, n = int(m.mesh_vertadr[i]), int(m.mesh_vertnum[i])
                v = mesh_vert[a : a + n]
                fa, fn = int(m.mesh_faceadr[i]), int(m.mesh_facenum[i])
                f = np.asarray(m.mesh_face)[fa : fa + fn].astype(np.int64)
            else:
                nrow, ncol = int(m.hfield_nrow[i]), int(m.hfield_ncol[i])
                a = int(m.hfield_adr[i])
                gx, gy = np.meshgrid(np.linspace(-1, 1, ncol), np.linspace(-1, 1, nrow))
                z = hfield_data[a : a + nrow * ncol]
                top = np.stack([gx.ravel(), gy.ravel(), z], -1)
                v = np.concatenate([top, top * [1, 1, 0] - [0, 0, 1]])
                f = _hfield_topology(nrow, ncol)
            child, tri, depth = _build_tree(v, f, nnode)
            kinds.append(kind)
            dataids.append(i)
            vertadr.append(nvert)
            faces.append(f + nvert)
            roots.append(nnode)
            childs.append(child)
            tris.append(np.where(tri >= 0, tri + nface, -1))
            depths.append(depth)
            nvert += len(v)
            nnode += len(child)
            nface += len(f)
    if not kinds:
        e = np.zeros((0,), np.int64)
        return Soups(e, e, e, 0, np.zeros((0, 3), np.int64), e, np.zeros((0, 2), np.int64),
                     np.zeros((0, LEAF), np.int64), (), 1, 1)  # fmt: skip
    child = np.concatenate(childs)
    depth = np.concatenate(depths)
    levels = tuple(np.nonzero((depth == k) & (child[:, 0] >= 0))[0] for k in range(int(depth.max()) + 1))
    sizes = [len(c) for c in childs]
    return Soups(
        kind=np.array(kinds), dataid=np.array(dataids), vertadr=np.array(vertadr), nvert=nvert,
        face=np.concatenate(faces), root=np.array(roots), node_child=child, node_tri=np.concatenate(tris),
        levels=levels, stack=int(depth.max()) + 2, max_iter=2 * max(sizes) + 2,
    )  # fmt: skip


def refit(soups: Soups, vert: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Node boxes (lo, hi): (nnode, 3) each, from the traced soup vertices (leaves first, then levels upward)."""
    tri = soups.node_tri
    valid = jp.asarray(tri >= 0)
    corners = vert[jp.asarray(soups.face)[jp.asarray(np.maximum(tri, 0))]]  # (nnode, LEAF, 3, 3)
    big = jp.asarray(jp.finfo(vert.dtype).max, vert.dtype)
    lo = jp.min(jp.where(valid[..., None, None], corners, big), axis=(1, 2))
    hi = jp.max(jp.where(valid[..., None, None], corners, -big), axis=(1, 2))
    child = soups.node_child
    for ids in reversed(soups.levels):
        if len(ids) == 0:
            continue
        left, right = child[ids, 0], child[ids, 1]
        lo = lo.at[ids].set(jp.minimum(lo[left], lo[right]))
        hi = hi.at[ids].set(jp.maximum(hi[left], hi[right]))
    return lo, hi


def _box_entry(o, inv_d, lo, hi, tmin):
    """Entry parameter of the ray into the box [lo, hi] (inf when missed)."""
    ta, tb = (lo - o) * inv_d, (hi - o) * inv_d
    t0 = jp.max(jp.minimum(ta, tb), -1)
    t1 = jp.min(jp.maximum(ta, tb), -1)
    return jp.where((t1 >= jp.maximum(t0, tmin)), jp.maximum(t0, tmin), jp.inf)


def traverse(soups: Soups, lo, hi, vert, o, d, root, tmin, tmax):
    """Nearest triangle hit by one ray (local frame) in the soup rooted at `root`: (t, face id or -1).

    Not differentiable (a while_loop); callers stop gradients and recompute the winner's distance.
    """
    child = jp.asarray(soups.node_child, jp.int32)
    node_tri = jp.asarray(soups.node_tri, jp.int32)
    face = jp.asarray(soups.face, jp.int32)
    root = jp.asarray(root, jp.int32)
    inv_d = 1.0 / jp.where(jp.abs(d) < 1e-12, jp.where(d < 0, -1e-12, 1e-12), d)
    S = soups.stack
    t_root = _box_entry(o, inv_d, lo[root], hi[root], tmin)
    stack = jp.zeros((S,), jp.int32).at[0].set(root)
    stack_t = jp.full((S,), jp.inf, o.dtype).at[0].set(t_root)
    sp = jp.where(t_root < tmax, 1, 0)

    def cond(c):
        _, _, sp, _, _, it = c
        return (sp > 0) & (it < soups.max_iter)

    def body(c):
        stack, stack_t, sp, best, best_f, it = c
        top = sp - 1
        node = stack[top]
        entry = stack_t[top]
        sp = top
        live = entry < best
        kids = child[node]
        leaf = kids[0] < 0
        # leaf: test its triangles
        tris = node_tri[node]
        fv = vert[face[jp.maximum(tris, 0)]]  # (LEAF, 3, 3)
        tt, _ = shapes.triangle(o, d, fv[:, 0], fv[:, 1], fv[:, 2], EDGE_EPS)
        tt = jp.where((tris >= 0) & (tt >= tmin) & (tt <= tmax), tt, jp.inf)
        k = jp.argmin(tt)
        take = live & leaf & (tt[k] < best)
        best = jp.where(take, tt[k], best)
        best_f = jp.where(take, tris[k], best_f)
        # internal: push the children that the ray enters before the best hit, nearer one on top
        kc = jp.maximum(kids, 0)
        ta = _box_entry(o, inv_d, lo[kc[0]], hi[kc[0]], tmin)
        tb = _box_entry(o, inv_d, lo[kc[1]], hi[kc[1]], tmin)
        near_first = ta <= tb
        far_n, near_n = jp.where(near_first, kc[1], kc[0]), jp.where(near_first, kc[0], kc[1])
        far_t, near_t = jp.where(near_first, tb, ta), jp.where(near_first, ta, tb)
        inner = live & ~leaf
        for n, t in ((far_n, far_t), (near_n, near_t)):
            push = inner & (t < best)
            slot = jp.minimum(sp, S - 1)
            stack = stack.at[slot].set(jp.where(push, n, stack[slot]))
            stack_t = stack_t.at[slot].set(jp.where(push, t, stack_t[slot]))
            sp = sp + push.astype(sp.dtype)
        return stack, stack_t, sp, best, best_f, it + 1

    init = (stack, stack_t, sp, jp.asarray(tmax, o.dtype), jp.asarray(-1, jp.int32), jp.asarray(0, jp.int32))
    _, _, _, best, best_f, _ = jax.lax.while_loop(cond, body, init)
    return best, best_f
