"""The octree SDF MuJoCo builds for a mesh used by an sdf geom without a plugin (mjCOctree), host side, in numpy.

MuJoCo builds it for every mesh that a `type="sdf"` geom names (mjsMesh.needsdf), down to `octree_maxdepth` (6):
  1. the root cell is the mesh's bounding box (mesh frame, after the mesh's reorientation) scaled by 1.1 about its
     centre; a cell is split in 8 (children in slot order x + 2y + 4z) when a mesh triangle overlaps it (Schwarz and
     Seidel's triangle-box test) and it is above the depth limit; cells are made breadth first, and new cell corners
     get vertex ids in order of first appearance;
  2. the tree is balanced (repeatedly, every leaf whose face neighbour is more than one level finer or coarser than
     it is split) and the corners of a finer leaf that lie on the face or edge of a coarser neighbour are marked
     hanging (dependent on the neighbour's 2 edge or 4 face corners);
  3. each corner gets a coefficient, breadth first from the root: the signed distance of the corner to the mesh (the
     closest triangle found by a traversal of the mesh's bounding volume hierarchy, its sign that of the offset from
     the closest point along the triangle's normal), or for a hanging corner the average of its dependencies'
     coefficients at that moment.
The Model stores per cell (oct_aabb centre and half sizes, oct_child, oct_depth) and the 8 corner coefficients
(oct_coeff); the run-time field (collision/sdf_octree.py) is the trilinear interpolation in the leaf.

Here the cells live on an integer grid (4 * 2^maxdepth units along each axis, so that cell centres and the points
just across a face are grid points) and each axis' cell boundaries are computed once by MuJoCo's repeated
midpoints, so the corner coordinates are MuJoCo's, bit for bit. The neighbour search (MuJoCo climbs to the common
ancestor and descends toward the cell's centre) is the leaf containing the point a quarter of a finest cell across
the face at the cell's centre, found by one vectorised descent. The closest-triangle query is a brute force over
the triangles near each corner (a k-d tree bounds the distance; large triangles by their boxes), with MuJoCo's
point-triangle arithmetic; where equally close triangles (above an edge or a vertex) disagree on the sign, MuJoCo
4.0's corners take that of the angle-weighted pseudo-normal (measured; `_pseudo_sign`).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

MAXDEPTH = 6  # mjsMesh.octree_maxdepth's default (not settable from MJCF)
OCTREE = "octree"  # geom_sdf of an sdf geom without a plugin: (OCTREE, (oct address, cell count, depth)), the
# configuration collision/sdf.py reads (its OCTREE)
_EPS = 1e-14  # mjEPS


# ---- MuJoCo's triangle-box overlap test (boxTriangle) -----------------------------------------------------


def _box_triangle(v: np.ndarray, aamm: np.ndarray) -> np.ndarray:
    """(k,) bool: triangles v (k, 3, 3) overlap boxes aamm (k, 6) (min, max)."""
    lo, hi = aamm[:, :3], aamm[:, 3:]
    out = ~np.any(np.all(v < lo[:, None, :], axis=1) | np.all(v > hi[:, None, :], axis=1), axis=1)
    e = np.stack([v[:, 1] - v[:, 0], v[:, 2] - v[:, 1], v[:, 0] - v[:, 2]], axis=1)  # e[i] = v[i+1] - v[i]
    n = np.stack([e[:, 0, 1] * e[:, 1, 2] - e[:, 0, 2] * e[:, 1, 1], e[:, 0, 2] * e[:, 1, 0] - e[:, 0, 0] * e[:, 1, 2],
                  e[:, 0, 0] * e[:, 1, 1] - e[:, 0, 1] * e[:, 1, 0]], axis=1)  # fmt: skip
    size = hi - lo
    c = np.where(n > 0, size, 0.0)
    c1 = c - v[:, 0]
    c2 = size - c - v[:, 0]

    def dot3(a, b):
        return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]

    nl = dot3(n, lo)
    out &= ~((nl + dot3(n, c1)) * (nl + dot3(n, c2)) > 0)
    for a in range(3):
        b, cc = (a + 1) % 3, (a + 2) % 3
        sign = np.where(n[:, a] >= 0, 1.0, -1.0)
        for i in range(3):
            ne0, ne1 = -e[:, i, cc] * sign, e[:, i, b] * sign
            d = -(ne0 * v[:, i, b] + ne1 * v[:, i, cc]) + np.maximum(0.0, size[:, b] * ne0) \
                + np.maximum(0.0, size[:, cc] * ne1)  # fmt: skip
            out &= ~(ne0 * lo[:, b] + ne1 * lo[:, cc] + d < 0)
    return out


# ---- point-triangle distance (MuJoCo's pointTriDistSqWithUV) ----------------------------------------------


def point_triangle(p: np.ndarray, v0: np.ndarray, v1: np.ndarray, v2: np.ndarray):
    """Squared distance (k,) of points p (k, 3) to triangles (v0, v1, v2) (k, 3) each, and the barycentric (u, v)
    (k,) of the closest point, by Voronoi regions in MuJoCo's order and arithmetic."""

    def dot(a, b):
        return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]

    def sq(a):
        return a[:, 0] * a[:, 0] + a[:, 1] * a[:, 1] + a[:, 2] * a[:, 2]

    ab, ac, ap = v1 - v0, v2 - v0, p - v0
    d1, d2 = dot(ab, ap), dot(ac, ap)
    bp = p - v1
    d3, d4 = dot(ab, bp), dot(ac, bp)
    cp = p - v2
    d5, d6 = dot(ab, cp), dot(ac, cp)
    vc = d1 * d4 - d3 * d2
    vb = d5 * d2 - d1 * d6
    va = d3 * d6 - d5 * d4
    with np.errstate(all="ignore"):
        # regions, first match wins: A, B, AB, C, AC, BC, inside
        rA = (d1 <= 0) & (d2 <= 0)
        rB = (d3 >= 0) & (d4 <= d3)
        rAB = (vc <= 0) & (d1 >= 0) & (d3 <= 0)
        rC = (d6 >= 0) & (d5 <= d6)
        rAC = (vb <= 0) & (d2 >= 0) & (d6 <= 0)
        rBC = (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)
        uab = d1 / (d1 - d3)
        vac = d2 / (d2 - d6)
        wbc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        denom = 1.0 / (va + vb + vc)
        uin, vin = vb * denom, vc * denom
        dAB = sq(p - (v0 + uab[:, None] * ab))
        dAC = sq(p - (v0 + vac[:, None] * ac))
        dBC = sq(p - (v1 + wbc[:, None] * (v2 - v1)))
        cin = np.stack([v0[:, k] + uin * ab[:, k] + vin * ac[:, k] for k in range(3)], axis=1)
        din = sq(p - cin)
    conds = [rA, rB, rAB, rC, rAC, rBC]
    dist = np.select(conds, [sq(ap), sq(bp), dAB, sq(cp), dAC, dBC], din)
    u = np.select(conds, [0.0, 1.0, uab, 0.0, 0.0, 1.0 - wbc], uin)
    v = np.select(conds, [0.0, 0.0, 0.0, 1.0, vac, wbc], vin)
    return dist, u, v


def signed_distance(points: np.ndarray, vert: np.ndarray, face: np.ndarray) -> np.ndarray:
    """(k,) MuJoCo's signed distance (querySignedDistance) of points (k, 3) to the mesh (vert, face): the distance to
    the closest triangle, signed by its normal (`_sign`), or where equally close triangles disagree (the point above
    an edge or a vertex) by their angle-weighted pseudo-normal (`_pseudo_sign`)."""
    k = len(points)
    out = np.zeros(k)
    if k == 0:
        return out
    fv = vert[face]
    cen = fv.mean(axis=1)
    rad = np.sqrt(((fv - cen[:, None, :]) ** 2).sum(-1)).max(axis=1)
    # an upper bound of each point's distance: the nearest of its 8 nearest face centres' triangles
    ctree = cKDTree(cen)
    kk = min(8, len(face))
    _, near = ctree.query(points, k=kk)
    near = near.reshape(k, kk)
    d, _, _ = point_triangle(np.repeat(points, kk, axis=0), fv[near.reshape(-1), 0], fv[near.reshape(-1), 1],
                             fv[near.reshape(-1), 2])  # fmt: skip
    ub = np.sqrt(d.reshape(k, kk).min(axis=1)) * (1 + 1e-9) + 1e-12
    # candidates: triangles whose bounding sphere reaches the bound; the large ones (few) against every point
    tau = 4.0 * np.median(rad)
    small = np.flatnonzero(rad <= tau)
    large = np.flatnonzero(rad > tau)
    stree = cKDTree(cen[small])
    lists = stree.query_ball_point(points, ub + tau)
    cnt = np.fromiter((len(x) for x in lists), np.int64, k)
    qi = np.repeat(np.arange(k), cnt)
    fi = small[np.fromiter((j for x in lists for j in x), np.int64, int(cnt.sum()))]
    keep = np.sqrt(((points[qi] - cen[fi]) ** 2).sum(-1)) <= ub[qi] + rad[fi]
    qs, fs = [qi[keep]], [fi[keep]]
    if len(large):  # the large triangles' boxes against every point
        lo, hi = fv[large].min(axis=1), fv[large].max(axis=1)
        for s in range(0, k, max(1, (1 << 22) // len(large))):
            p = points[s : s + max(1, (1 << 22) // len(large))]
            gap = np.maximum(np.maximum(lo[None] - p[:, None], p[:, None] - hi[None]), 0.0)
            q, f = np.nonzero((gap * gap).sum(-1) <= (ub[s : s + len(p)] ** 2)[:, None])
            qs.append(s + q)
            fs.append(large[f])
    qi, fi = np.concatenate(qs), np.concatenate(fs)
    d, u, v = point_triangle(points[qi], fv[fi, 0], fv[fi, 1], fv[fi, 2])
    sign = _sign(points[qi], fv[fi], u, v, np.sqrt(d))
    o = np.lexsort((d, qi))
    qi, fi, d, sign = qi[o], fi[o], d[o], sign[o]
    first = np.flatnonzero(np.r_[True, qi[1:] != qi[:-1]])
    dmin = d[first][np.searchsorted(qi[first], qi)]
    # near ties (equal up to round-off) whose signs disagree (the point above an edge or a vertex): `_pseudo_sign`
    near = d <= dmin * (1 + 1e-9) + 1e-300
    out = sign[first] * np.sqrt(d[first])
    disagree = np.zeros(k, bool)
    np.logical_or.at(disagree, qi[near], sign[near] != sign[first][np.searchsorted(qi[first], qi[near])])
    for q in np.flatnonzero(disagree).tolist():
        sel = (qi == q) & near
        out[q] = _pseudo_sign(points[q], fv[fi[sel]]) * np.sqrt(dmin[sel][0])
    return out


def _sign(p, tri, u, v, dist):
    """MuJoCo's sign of the distance: + where the offset from the closest point (barycentric u, v) is along the
    triangle's normal by more than 1e-12 |n| dist."""
    v0, v1, v2 = tri[:, 0], tri[:, 1], tri[:, 2]
    e1, e2 = v1 - v0, v2 - v0
    normal = np.stack([e1[:, 1] * e2[:, 2] - e1[:, 2] * e2[:, 1], e1[:, 2] * e2[:, 0] - e1[:, 0] * e2[:, 2],
                       e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0]], axis=1)  # fmt: skip
    closest = np.stack([v0[:, j] + u * (v1[:, j] - v0[:, j]) + v * (v2[:, j] - v0[:, j]) for j in range(3)], axis=1)
    uu = p - closest
    dot = uu[:, 0] * normal[:, 0] + uu[:, 1] * normal[:, 1] + uu[:, 2] * normal[:, 2]
    nlen = np.sqrt(normal[:, 0] * normal[:, 0] + normal[:, 1] * normal[:, 1] + normal[:, 2] * normal[:, 2])
    return np.where(dot > 1e-12 * nlen * dist, 1.0, -1.0)


def _pseudo_sign(p: np.ndarray, tri: np.ndarray) -> float:
    """The sign at p (3,) from triangles tri (k, 3, 3) equally close to it (their closest points shared: an edge or
    a vertex) whose own signs disagree: that of the angle-weighted pseudo-normal (each triangle's unit normal
    weighted by its angle at the shared vertex, equal weights at an edge). MuJoCo 4.0's corner signs there (measured:
    a wedge whose 60-degree ridge's closest-face signs split, 1784 corner coefficients that the first face of the
    BVH's order gets wrong, none with this)."""
    e1, e2 = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]
    nrm = np.cross(e1, e2)
    nrm = nrm / np.linalg.norm(nrm, axis=1, keepdims=True)
    _, u, v = point_triangle(np.repeat(p[None], len(tri), 0), tri[:, 0], tri[:, 1], tri[:, 2])
    closest = tri[0, 0] + u[0] * (tri[0, 1] - tri[0, 0]) + v[0] * (tri[0, 2] - tri[0, 0])
    w = np.ones(len(tri))
    for t in range(len(tri)):
        bary = (1 - u[t] - v[t], u[t], v[t])
        for k in range(3):
            if bary[k] == 1.0:
                a, b = tri[t, (k + 1) % 3] - tri[t, k], tri[t, (k + 2) % 3] - tri[t, k]
                w[t] = np.arccos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1.0, 1.0))
    return 1.0 if (p - closest) @ (w[:, None] * nrm).sum(0) > 0 else -1.0


# ---- the octree ------------------------------------------------------------------------------------------


class Octree:
    """One mesh's octree: node arrays (level (n,), imin (n, 3) integer min corner in finest cells, child (n, 8),
    vertid (n, 8)), vertex integer positions vpos (nvert, 3) and the per-axis coordinate tables coord (3, R + 1)."""

    def __init__(self, aamm: np.ndarray, maxdepth: int = MAXDEPTH):
        self.D = maxdepth
        self.R = 1 << maxdepth  # finest cells per axis
        c = (aamm[:3] + aamm[3:]) / 2
        h = (aamm[3:] - aamm[:3]) / 2
        lo, hi = c - 1.1 * h, c + 1.1 * h
        # coordinate of grid line k (0..R) along each axis: MuJoCo's repeated midpoints
        self.coord = np.zeros((3, self.R + 1))
        for ax in range(3):
            line = np.array([lo[ax], hi[ax]])
            for _ in range(maxdepth):
                mid = (line[1:] + line[:-1]) / 2
                new = np.empty(2 * len(line) - 1)
                new[0::2], new[1::2] = line, mid
                line = new
            self.coord[ax] = line
        self.level = np.zeros(1, np.int64)
        self.imin = np.zeros((1, 3), np.int64)
        self.child = np.full((1, 8), -1, np.int64)
        self.vkeys = np.zeros(0, np.int64)  # sorted keys of the vertices and their ids
        self.vids = np.zeros(0, np.int64)
        self.vpos = np.zeros((0, 3), np.int64)
        self.vertid = self._corner_ids(self.imin, self.level)

    def _corner_ids(self, imin: np.ndarray, level: np.ndarray) -> np.ndarray:
        """(k, 8) vertex ids of the corners of new cells (new vertices numbered in order of first appearance)."""
        s = (1 << (self.D - level))[:, None]
        off = np.array([[i & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], np.int64)
        pos = (imin[:, None, :] + s[:, :, None] * off[None]).reshape(-1, 3)
        r1 = self.R + 1
        key = (pos[:, 0] * r1 + pos[:, 1]) * r1 + pos[:, 2]
        at = np.searchsorted(self.vkeys, key)
        found = (at < len(self.vkeys)) & (self.vkeys[np.minimum(at, len(self.vkeys) - 1)] == key) if len(
            self.vkeys) else np.zeros(len(key), bool)  # fmt: skip
        ids = np.empty(len(key), np.int64)
        ids[found] = self.vids[at[found]]
        new_keys, first, inv = np.unique(key[~found], return_index=True, return_inverse=True)
        rank = np.empty(len(first), np.int64)
        rank[np.argsort(first, kind="stable")] = np.arange(len(first))
        nv = len(self.vpos)
        ids[~found] = nv + rank[inv.reshape(-1)]
        newpos = np.empty((len(first), 3), np.int64)
        newpos[rank] = pos[~found][first]
        self.vpos = np.concatenate([self.vpos, newpos])
        keys = np.concatenate([self.vkeys, new_keys])
        vids = np.concatenate([self.vids, nv + rank])
        o = np.argsort(keys, kind="stable")
        self.vkeys, self.vids = keys[o], vids[o]
        return ids.reshape(-1, 8)

    def subdivide(self, nodes: np.ndarray) -> np.ndarray:
        """Split the leaves `nodes` (in order): (len(nodes) * 8,) the new cells' ids."""
        nodes = np.asarray(nodes, np.int64)
        if not len(nodes):
            return nodes
        lev = np.repeat(self.level[nodes] + 1, 8)
        s = 1 << (self.D - lev)
        off = np.tile(np.array([[i & 1, (i >> 1) & 1, (i >> 2) & 1] for i in range(8)], np.int64), (len(nodes), 1))
        imin = np.repeat(self.imin[nodes], 8, axis=0) + s[:, None] * off
        first = len(self.level)
        ids = first + np.arange(8 * len(nodes))
        self.child[nodes] = ids.reshape(-1, 8)
        self.level = np.concatenate([self.level, lev])
        self.imin = np.concatenate([self.imin, imin])
        self.child = np.concatenate([self.child, np.full((len(ids), 8), -1, np.int64)])
        self.vertid = np.concatenate([self.vertid, self._corner_ids(imin, lev)])
        return ids

    def aamm(self, nodes) -> np.ndarray:
        nodes = np.asarray(nodes, np.int64)
        imin = self.imin[nodes]
        imax = imin + (1 << (self.D - self.level[nodes]))[:, None]
        return np.concatenate([np.stack([self.coord[a][imin[:, a]] for a in range(3)], 1),
                               np.stack([self.coord[a][imax[:, a]] for a in range(3)], 1)], axis=1)  # fmt: skip

    def find_leaf(self, q4: np.ndarray) -> np.ndarray:
        """(k,) the leaf containing the points q4 (k, 3) (in quarter finest-cell units), -1 outside the root; a
        coordinate on a cell centre goes to the lower child (MuJoCo's neighbour descent)."""
        node = np.zeros(len(q4), np.int64)
        out = np.all((q4 >= 0) & (q4 <= 4 * self.R), axis=1)
        for _ in range(self.D + 1):
            inner = self.child[node, 0] >= 0
            s = 1 << (self.D - self.level[node])  # cell size in finest cells
            centre = 4 * self.imin[node] + 2 * s[:, None]
            bits = (q4 > centre).astype(np.int64)
            slot = bits[:, 0] + 2 * bits[:, 1] + 4 * bits[:, 2]
            node = np.where(inner, self.child[node, slot], node)
        return np.where(out, node, -1)

    def neighbours(self, leaves: np.ndarray) -> np.ndarray:
        """(k, 6) FindNeighbor of each leaf in directions 2 * axis + side (side 1: +)."""
        s = 1 << (self.D - self.level[leaves])
        centre = 4 * self.imin[leaves] + 2 * s[:, None]
        out = np.empty((len(leaves), 6), np.int64)
        for d in range(6):
            ax, side = divmod(d, 2)
            q = centre.copy()
            q[:, ax] = 4 * (self.imin[leaves, ax] + s) + 1 if side else 4 * self.imin[leaves, ax] - 1
            out[:, d] = self.find_leaf(q)
        return out

    def leaves(self) -> np.ndarray:
        return np.flatnonzero(self.child[:, 0] < 0)


def build(vert: np.ndarray, face: np.ndarray, aamm: np.ndarray, maxdepth: int = MAXDEPTH) -> Octree:
    """The octree of a mesh (vert (n, 3) float64 in the mesh frame, face (m, 3), aamm (6,) its bounding box)."""
    tree = Octree(aamm, maxdepth)
    tri = vert[face]
    # breadth first: the tasks of one level in node order, each with its parent's overlapping triangles
    tasks = np.array([0], np.int64)
    pair_task, pair_tri = np.zeros(len(face), np.int64), np.arange(len(face))
    for _ in range(maxdepth):
        hit = _box_triangle(tri[pair_tri], tree.aamm(tasks)[pair_task])
        pair_task, pair_tri = pair_task[hit], pair_tri[hit]
        split = np.zeros(len(tasks), bool)
        split[pair_task] = True
        if not split.any():
            break
        slot_of = np.cumsum(split) - 1
        children = tree.subdivide(tasks[split])
        pair_task = (8 * slot_of[pair_task][:, None] + np.arange(8)[None, :]).reshape(-1)
        pair_tri = np.repeat(pair_tri, 8)
        tasks = children
    _balance(tree)
    return tree


def _balance(tree: Octree) -> None:
    """MuJoCo's BalanceOctree: split leaves until face neighbours differ by at most one level."""
    while True:
        leaves = tree.leaves()
        nb = tree.neighbours(leaves)
        lv = tree.level[leaves][:, None]
        nlv = np.where(nb >= 0, tree.level[np.maximum(nb, 0)], -10)
        coarse_me = (nb >= 0) & (nlv > lv + 1)
        coarse_nb = (nb >= 0) & (lv > nlv + 1)
        # in MuJoCo's order: per leaf, per direction: the leaf, then the neighbour
        cand = np.stack([np.broadcast_to(leaves[:, None], nb.shape), nb], axis=-1).reshape(-1)
        todo = cand[np.stack([coarse_me, coarse_nb], axis=-1).reshape(-1)]
        if not len(todo):
            return
        _, first = np.unique(todo, return_index=True)
        todo = todo[np.sort(first)]
        tree.subdivide(todo[tree.child[todo, 0] < 0])


def _hanging(tree: Octree) -> list[list[int]]:
    """MuJoCo's MarkHangingNodes: for each vertex, the vertices it is interpolated from (empty if not hanging)."""
    level, imin, vertid, vpos = tree.level, tree.imin, tree.vertid, tree.vpos
    hang: list[list[int]] = [[] for _ in range(len(vpos))]
    leaves = tree.leaves()
    nb = tree.neighbours(leaves)
    coarser = (nb >= 0) & (tree.level[np.maximum(nb, 0)] < tree.level[leaves][:, None])
    for i, d in np.argwhere(coarser).tolist():
        leaf, n = int(leaves[i]), int(nb[i, d])
        dim, side = divmod(d, 2)
        d1, d2 = (dim + 1) % 3, (dim + 2) % 3
        ns = 1 << (tree.D - int(level[n]))
        nmin = imin[n].tolist()
        nmax = [x + ns for x in nmin]
        for j in range(4):
            v_idx = (side << dim) | ((j & 1) << d1) | (((j >> 1) & 1) << d2)
            hv = int(vertid[leaf, v_idx])
            if hang[hv]:
                continue
            p = vpos[hv].tolist()
            is_min = [p[a] == nmin[a] for a in range(3)]
            is_max = [p[a] == nmax[a] for a in range(3)]
            on = sum(is_min[a] or is_max[a] for a in range(3))
            if on == 2:
                d_mid = next(a for a in range(3) if not is_min[a] and not is_max[a])
                bits = [0, 0, 0]
                bits[(d_mid + 1) % 3] = int(is_max[(d_mid + 1) % 3])
                bits[(d_mid + 2) % 3] = int(is_max[(d_mid + 2) % 3])
                b1 = (bits[2] << 2) | (bits[1] << 1) | bits[0]
                bits[d_mid] = 1
                b2 = (bits[2] << 2) | (bits[1] << 1) | bits[0]
                hang[hv] = [int(vertid[n, b1]), int(vertid[n, b2])]
            elif on == 1:
                d_face = next(a for a in range(3) if is_min[a] or is_max[a])
                deps = []
                for jj in range(4):
                    bits = [0, 0, 0]
                    bits[d_face] = int(is_max[d_face])
                    bits[(d_face + 1) % 3] = jj & 1
                    bits[(d_face + 2) % 3] = (jj >> 1) & 1
                    deps.append(int(vertid[n, (bits[2] << 2) | (bits[1] << 1) | bits[0]]))
                hang[hv] = deps
    return hang


def coefficients(tree: Octree, vert: np.ndarray, face: np.ndarray) -> np.ndarray:
    """(nnode, 8) MuJoCo's oct_coeff: corner signed distances (ComputeSdfCoeffs, without smoothing)."""
    hang = _hanging(tree)
    child, vertid, vpos = tree.child, tree.vertid, tree.vpos
    # breadth-first node order from the root (children in slot order)
    order, frontier = [np.array([0])], np.array([0])
    while True:
        ch = child[frontier].reshape(-1)
        ch = ch[ch >= 0]
        if not len(ch):
            break
        order.append(ch)
        frontier = ch
    corners = vertid[np.concatenate(order)].reshape(-1)
    _, first = np.unique(corners, return_index=True)
    vorder = corners[np.sort(first)]  # vertices in processing order
    plain = np.array([not hang[v] for v in range(len(vpos))])
    pts = np.stack([tree.coord[a][vpos[:, a]] for a in range(3)], axis=1)
    coeff = np.zeros(len(vpos))
    idx = np.flatnonzero(plain)
    coeff[idx] = signed_distance(pts[idx], vert, face)
    done = np.zeros(len(vpos), bool)
    values = coeff.copy()
    coeff[:] = 0.0
    for v in vorder.tolist():
        if plain[v]:
            coeff[v] = values[v]
        else:
            s = 0.0
            for dep in hang[v]:
                s += coeff[dep] if done[dep] else 0.0
            coeff[v] = s / len(hang[v])
        done[v] = True
    return coeff[vertid]


def octree_arrays(vert: np.ndarray, face: np.ndarray, aamm: np.ndarray, maxdepth: int = MAXDEPTH) -> dict:
    """One mesh's oct_aabb (n, 6) (centre, half sizes), oct_child (n, 8), oct_depth (n,), oct_coeff (n, 8)."""
    tree = build(vert, face, aamm, maxdepth)
    box = tree.aamm(np.arange(len(tree.level)))
    aabb = np.concatenate([(box[:, :3] + box[:, 3:]) / 2, (box[:, 3:] - box[:, :3]) / 2], axis=1)
    return {
        "oct_aabb": aabb,
        "oct_child": np.asarray(tree.child, np.int32),
        "oct_depth": np.asarray(tree.level, np.int32),
        "oct_coeff": coefficients(tree, vert, face),
    }
