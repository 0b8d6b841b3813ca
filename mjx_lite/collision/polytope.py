"""Traced geometry of polytopes (boxes and mesh hulls): triangle normals, face planes, faces toward a direction.

Shared by the separating axes (`sat.py`), the normal refinement (`refine.py`) and the face manifolds
(`polyhedral.py`, `cylinder.py`). Normals are computed in the geom frame, where they are model data (under a vmap
over states, once), and rotated. The integer tables come from `hull.py` (GeomInfo.face, faceplane, facepoly).
Shapes: w (V, 3) vertices; tris (T, 3) int32 triangles; planes (F, K) int32 triangles per face plane; mat (3, 3).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.hull import BOX_CORNERS, BOX_TRIS, BOX_VEDGE, BOX_VPLANE, box_planes, box_tri_polygons
from mjx_lite.collision.types import GeomInfo, Ids, Mask, Mat3, Points, Scalar, Values, Vec3
from mjx_lite.math import dot3, outer3, safe_norm
from mjx_lite.types import GeomType

FACE_ALIGNED = 1e-6  # 1 - cos: triangles are coplanar (one polygon face)


def first_max(x: Values) -> Scalar:
    """`jp.argmax(x)` of a 1-D x (n,) (the first maximum's index, () int32) by two plain reductions: the maximum,
    then the least index holding it. The same index as argmax (a NaN-free x), at a fraction of the cost under vmap on
    XLA:CPU, whose argmax is one reduction over (value, index) pairs (measured: an 803-vertex hull's support, 64
    lanes: 3-6x faster). Where x holds a NaN: the last index (argmax: the first NaN's)."""
    n = x.shape[0]
    i = jp.min(jp.where(x == jp.max(x), jp.arange(n, dtype=jp.int32), n))
    return jp.minimum(i, n - 1)


def first_min(x: Values) -> Scalar:
    """`jp.argmin(x)` of a 1-D x (n,), as `first_max`."""
    n = x.shape[0]
    i = jp.min(jp.where(x == jp.min(x), jp.arange(n, dtype=jp.int32), n))
    return jp.minimum(i, n - 1)


def top_indices(x: Values, k: int) -> Ids:
    """`jax.lax.top_k(x, k)[1]` of a 1-D x (n,) with no NaN: the indices (k,) int32 of the k largest, largest first,
    ties in ascending index. float32 (and narrower): top_k itself (XLA:CPU's TopK kernel); float64, whose top_k
    XLA:CPU lowers to a sort: k passes of `first_max` over the entries not yet taken, the same indices in the same
    order (measured on an 842-vertex hull, k 4, 256 lanes, one process: float64 12 vs 160-210 ms; float32 top_k
    0.8-1.0 ms, the passes 4.4-7.2)."""
    if x.dtype != jp.float64:
        return jax.lax.top_k(x, k)[1]
    n = x.shape[0]
    ids = jp.arange(n, dtype=jp.int32)
    taken = jp.zeros(n, bool)
    out = []
    for _ in range(min(k, n)):
        best = jp.max(jp.where(taken, -jp.inf, x))
        i = jp.minimum(jp.min(jp.where(~taken & (x == best), ids, n)), n - 1)
        out.append(i)
        taken = taken | (ids == i)
    return jp.stack(out)


def triangle_normals(w: Points, tris: Ids) -> tuple[Points, Values, Values]:
    """Unit outward normals (T, 3) of the triangles, the plane offsets (T,) and twice the areas (T,)."""
    a, b, c = w[tris[:, 0]], w[tris[:, 1]], w[tris[:, 2]]
    nt = jp.cross(b - a, c - a)
    nn = safe_norm(nt, keepdims=True)
    nt = jp.where(nn > 1e-30, nt / jp.where(nn > 1e-30, nn, 1.0), 0.0)
    return nt, dot3(nt, a), nn[:, 0]


class FacePlanes:
    """The face planes of a box or mesh (static type `gtype`, GeomInfo g, triangles tris (T, 3)): a mesh polygon or
    a box face is one plane; without plane tables every triangle is its own. Reads the mesh tables a row at a time
    (GeomInfo.mesh), so nothing of size planes x triangles is built per pair."""

    def __init__(self, gtype: int, g: GeomInfo, tris: Ids):
        self.gtype, self.g, self.ntri = gtype, g, tris.shape[0]

    @property
    def count(self) -> int:
        """F, the (static) number of planes (rows of padding included)."""
        if self.gtype == GeomType.BOX:
            return 6
        return self.ntri if self.g.faceplane is None else self.g.faceplane.shape[-2]

    def triangles(self, f: Scalar) -> Ids:
        """The triangles of plane f, (K,) int32 padded by repeating the first."""
        g = self.g
        if self.gtype == GeomType.BOX:
            return jp.asarray(box_planes())[f]
        if g.faceplane is None:
            return f[None]
        return g.faceplane[f] if g.mesh is None else g.faceplane[g.mesh, f]

    def reps(self, area: Values) -> Ids:
        """One triangle per plane, the one of largest area (twice the areas `area` (T,); a sliver's normal is
        rounding; ties: the lowest id), (F,) int32. With a per-triangle plane id (GeomInfo.triplane) by segment
        maxima, O(T); planes of another mesh's padding take plane 0's."""
        g = self.g
        if self.gtype != GeomType.BOX and g.triplane is not None:
            f, t = self.count, self.ntri
            best = jax.ops.segment_max(area, g.triplane, num_segments=f)
            ids = jp.where(area >= best[g.triplane], jp.arange(t), t)
            rep = jax.ops.segment_min(ids, g.triplane, num_segments=f)
            return jp.where(rep < t, rep, rep[0]).astype(jp.int32)
        if self.gtype == GeomType.BOX:
            planes = jp.asarray(box_planes())
        elif g.faceplane is None:
            return jp.arange(self.ntri, dtype=jp.int32)
        else:
            planes = g.faceplane if g.mesh is None else g.faceplane[g.mesh]
        return jp.take_along_axis(planes, jp.argmax(area[planes], axis=1)[:, None], axis=1)[:, 0]


def _row(g: GeomInfo, table: jax.Array, i: Scalar) -> jax.Array:
    """Row i of a mesh table of g (its own, or its mesh's row of the group's: GeomInfo.mesh)."""
    return table[i] if g.mesh is None else table[g.mesh, i]


def vertex_planes(gtype: int, g: GeomInfo, v: Scalar) -> Ids:
    """The face planes at vertex v of a box or mesh, (Dp,) int32 (`hull.vertex_tables`)."""
    return jp.asarray(BOX_VPLANE)[v] if gtype == GeomType.BOX else _row(g, g.vertplane, v)


def vertex_edges(gtype: int, g: GeomInfo, v: Scalar) -> Ids:
    """The triangle edges at vertex v of a box or mesh: (De, 3) int32 rows (other end, the two triangles at it)."""
    return jp.asarray(BOX_VEDGE)[v] if gtype == GeomType.BOX else _row(g, g.vertedge, v)


def local_polyhedron(gtype: int, g: GeomInfo) -> tuple[Points, Ids]:
    """Vertices in the geom frame (V, 3) and triangles (T, 3) of a box or a mesh (its convex hull)."""
    if gtype == GeomType.BOX:
        return jp.asarray(BOX_CORNERS, g.pos.dtype) * g.size, jp.asarray(BOX_TRIS)
    return g.vert, g.face


def polyhedron(gtype: int, g: GeomInfo) -> tuple[Points, Ids]:
    """World vertices (V, 3) and triangles (T, 3) of a box or a mesh (its convex hull)."""
    local, tris = local_polyhedron(gtype, g)
    return g.pos + outer3(local, g.mat), tris


def hull_normals(gtype: int, g: GeomInfo) -> tuple[Points, Values, Values]:
    """`triangle_normals` of a box's or mesh's world hull, computed in the geom frame and rotated: the frame part
    depends on the model alone, so under a vmap over states it runs once, not per state (the cross products and
    norms of every triangle cost more than the rotation). (T, 3), (T,), (T,)."""
    local, tris = local_polyhedron(gtype, g)
    nl, off, area = triangle_normals(local, tris)
    nt = outer3(nl, g.mat)
    return nt, off + dot3(nt, g.pos[None]), area


def face_toward(w: Points, tris: Ids, nl: Points, mat: Mat3, direction: Vec3) -> tuple[Vec3, Vec3, Mask, Ids]:
    """The face of a polyhedron (world vertices w (V, 3), triangles tris (T, 3) with unit normals nl (T, 3) in the
    geom frame, rotation mat (3, 3)) whose outward normal is nearest the world `direction`, chosen in the geom frame
    (the triangles' normals are model data there: no per-state rotation of every normal).

    Returns (world unit normal (3,), a point of the face (3,), vertex mask (V,), triangle index ()): the mask marks
    the corners of every triangle coplanar with the best one (a scatter over corners, O(T + V))."""
    t = first_max(dot3(nl, (mat.T @ direction)[None]))
    coplanar = dot3(nl, nl[t][None]) > 1 - FACE_ALIGNED
    nv = w.shape[0]
    corner = jp.where(jp.repeat(coplanar, 3), tris.reshape(-1), nv)  # corners of coplanar triangles; others dropped
    return mat @ nl[t], w[tris[t, 0]], jp.zeros(nv + 1, bool).at[corner].set(True)[:nv], t


def face_rows(gtype: int, g: GeomInfo, nvert: int) -> int:
    """Static bound on the vertices of one face of a box (4) or mesh (twice its widest polygon, at least 8, at most
    its vertex count; every vertex where it has no polygon table)."""
    if gtype == GeomType.BOX:
        return 4
    if g.facepoly is not None:
        return min(nvert, max(2 * g.facepoly.shape[-1], 8))
    return nvert


_ONE_HOT_MAX = 32  # `compact` by a one-hot product up to this output size, by a binary search above it


def compact(pts: Points, ok: Mask, size: int) -> tuple[Points, Scalar]:
    """The rows of pts (K, 3) where ok (K,), in order, in the first rows of a (size, 3) array (zeros after them,
    rows beyond size dropped); returns it and their count (int32). Small outputs by a one-hot product (cheaper than
    a scatter under vmap on CPU); larger ones gather row j from the first position where the running count of ok
    reaches j + 1 (a binary search: O(size log K), where the one-hot product is O(size K); a 144-gon's clip in
    `manifold._clip_polygon` runs 70x faster so)."""
    if size <= _ONE_HOT_MAX:
        rank = jp.cumsum(ok) - 1
        sel = ok[None, :] & (rank[None, :] == jp.arange(size)[:, None])
        return sel.astype(pts.dtype) @ pts, jp.minimum(jp.sum(ok), size).astype(jp.int32)
    src, n = compact_index(ok, size)
    return jp.where((jp.arange(size) < n)[:, None], pts[src], 0.0), n


def compact_index(ok: Mask, size: int) -> tuple[Ids, Scalar]:
    """The positions of the first `size` True entries of ok (K,), in order, (size,) int32 (rows beyond their count:
    any valid position), and their count (at most size): the gather index of `compact`."""
    count = jp.cumsum(ok.astype(jp.int32))
    src = jp.searchsorted(count, jp.arange(1, size + 1, dtype=jp.int32), side="left")
    return jp.minimum(src, ok.shape[0] - 1), jp.minimum(count[-1], size)


def face_vertices(w: Points, mask: Mask, rows: int) -> tuple[Points, Mask]:
    """A face's vertices (mask (V,) of w (V, 3)) compacted to the first rows of a (rows, 3) array, with their mask
    (rows,)."""
    wc, cnt = compact(w, mask, rows)
    return wc, jp.arange(rows) < cnt


def face_polygon(gtype: int, g: GeomInfo, t: Scalar) -> tuple[Ids, Scalar] | tuple[None, None]:
    """The face polygon of hull triangle t in MuJoCo's order: ((P,) vertex ids, () count), or (None, None) for a
    mesh without polygon tables."""
    if gtype == GeomType.BOX:
        p, c = box_tri_polygons()
        return jp.asarray(p)[t], jp.asarray(c)[t]
    if g.facepoly is None:
        return None, None
    return _row(g, g.facepoly, t), _row(g, g.facepolynum, t)


def pad_rows(x: jax.Array, n: int, fill: jax.Array | float | bool) -> jax.Array:
    """x (K, ...) padded to n rows with `fill` (a row, or a value broadcast to one); unchanged where K >= n."""
    extra = n - x.shape[0]
    return x if extra <= 0 else jp.concatenate([x, jp.broadcast_to(fill, (extra,) + x.shape[1:])])
