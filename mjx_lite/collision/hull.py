"""Host-side polytope tables of boxes and meshes (numpy, from the Model's integer fields; built once per Model).

A box is a fixed polyhedron (`BOX_CORNERS`, `BOX_TRIS`, `BOX_EDGES`, its faces in MuJoCo's corner order). A mesh
collides through its convex hull (mjModel's mesh_hullface / mesh_hulledge / mesh_polyvert, from the compiler's
mjcf/mesh.py). `mesh_tables(m)` gives every table the colliders need, indexed by HULL vertex (a mesh's hull
vertices in ascending vertex id), so that a collider's cost and memory follow the hull's size, never the raw mesh's
(the Robotiq gripper's 17,120-vertex STL has an 803-vertex hull); the driver pads each table to a group's largest
mesh and gives them to the colliders in GeomInfo:
  * `vert`: the hull vertices' rows of mesh_vert (GeomInfo.vert);
  * `face`: hull triangles (GeomInfo.face);
  * `poly`, `polynum`: per triangle, its polygon in MuJoCo's face order (GeomInfo.facepoly, facepolynum), the
    faces that MuJoCo's multiccd clips (polygonClip; at most MAX_POLYVERT vertices, mjMAX_POLYVERT); a triangle
    that no polygon holds (a vertex inside a merged patch of near-coplanar triangles) is its own polygon;
  * `plane`: triangles grouped by face plane (GeomInfo.faceplane);
  * `edge`: hull edges with the two triangles at each (GeomInfo.edge).
No JAX here: everything is static (a function of the Model's static part).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterable

import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.types import Model

# mjMAX_POLYVERT (engine_collision_gjk.h): MuJoCo's multiccd reads at most this many vertices of a polygon
MAX_POLYVERT = 150


def edge_faces(tris: np.ndarray, edges: Iterable[tuple[int, int]]) -> np.ndarray:
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


# box as a polyhedron: corners (bit i of the corner index -> sign of axis i) and 12 outward triangles
BOX_CORNERS = np.array([[(-1.0, 1.0)[(i >> k) & 1] for k in range(3)] for i in range(8)])
BOX_TRIS = np.array(
    [[0, 4, 6], [0, 6, 2], [1, 3, 7], [1, 7, 5], [0, 1, 5], [0, 5, 4],
     [2, 6, 7], [2, 7, 3], [0, 2, 3], [0, 3, 1], [4, 5, 7], [4, 7, 6]], np.int32,
)  # fmt: skip
BOX_EDGES = edge_faces(
    BOX_TRIS, [(i, i | 1 << k) for k in range(3) for i in range(8) if not i >> k & 1]
)  # the 12 box edges (corner bits x, y, z) with their two triangles
# MuJoCo's box faces (+x, -x, +y, -y, +z, -z) as corner ids in its face order (clockwise about the outward normal)
_BOX_FACE_SIGNS = [
    [(1, 1, 1), (1, 1, -1), (1, -1, -1), (1, -1, 1)], [(-1, 1, -1), (-1, 1, 1), (-1, -1, 1), (-1, -1, -1)],
    [(-1, 1, -1), (1, 1, -1), (1, 1, 1), (-1, 1, 1)], [(-1, -1, 1), (1, -1, 1), (1, -1, -1), (-1, -1, -1)],
    [(-1, 1, 1), (1, 1, 1), (1, -1, 1), (-1, -1, 1)], [(1, 1, -1), (-1, 1, -1), (-1, -1, -1), (1, -1, -1)],
]
_BOX_FACES = np.array([[(x > 0) + 2 * (y > 0) + 4 * (z > 0) for x, y, z in f] for f in _BOX_FACE_SIGNS], np.int32)


def box_tri_polygons() -> tuple[np.ndarray, np.ndarray]:
    """(12, 4) corner ids of each box triangle's face in MuJoCo's order, and (12,) counts (4)."""
    c = BOX_CORNERS[BOX_TRIS]
    nrm = np.cross(c[:, 1] - c[:, 0], c[:, 2] - c[:, 0])
    face_n = np.array([[1, 0, 0], [-1, 0, 0], [0, 1, 0], [0, -1, 0], [0, 0, 1], [0, 0, -1]], float)
    return _BOX_FACES[np.argmax(nrm @ face_n.T, axis=1)], np.full(len(BOX_TRIS), 4, np.int32)


def box_planes() -> np.ndarray:
    """(6, 2) the two box triangles of each face."""
    faces = [tuple(f) for f in box_tri_polygons()[0].tolist()]
    return np.array([[t for t, f in enumerate(faces) if f == face] for face in dict.fromkeys(faces)], np.int32)


def _rows(x: np.ndarray, n: int) -> np.ndarray:
    """x (k, ...) cut or padded to n rows by repeating its first row."""
    x = np.asarray(x)
    return np.concatenate([x, np.repeat(x[:1], n - len(x), axis=0)]) if len(x) < n else x[:n]


def _pad(rows: list[np.ndarray], width: int) -> np.ndarray:
    """Rows (k_i, ...) each cut or padded to `width` (`_rows`) and stacked: (len(rows), width, ...) int32."""
    return np.stack([_rows(r, width) for r in rows]).astype(np.int32)


def vertex_tables(tris: np.ndarray, planes: list, nvert: int) -> tuple[np.ndarray, np.ndarray]:
    """Per vertex of a triangulated convex polytope (triangles tris (T, 3), triangles per face plane `planes`):
    the face planes at it, (V, Dp) int32 ascending, and the triangle edges at it, (V, De, 3) int32 rows (other end,
    the two triangles at the edge) in ascending other end; rows padded by repeating their first entry (a vertex on
    no triangle: plane 0, edge (0, 0, 0)). Static bounds of the features at a vertex, so that the face manifolds
    look at a vertex's few planes and edges, never at every plane or vertex of the hull."""
    tri_plane = {t: p for p, rows in enumerate(planes) for t in rows}
    vp: list[set] = [set() for _ in range(nvert)]
    at: dict = {}
    for t, (a, b, c) in enumerate(np.asarray(tris).tolist()):
        for v in (a, b, c):
            vp[v].add(tri_plane.get(t, 0))
        for u, v in ((a, b), (b, c), (a, c)):
            at.setdefault((min(u, v), max(u, v)), []).append(t)
    ve: list[list] = [[] for _ in range(nvert)]
    for (u, v), ts in at.items():
        ta, tb = ts[0], ts[1] if len(ts) > 1 else ts[0]
        ve[u].append((v, ta, tb))
        ve[v].append((u, ta, tb))
    vplane = [sorted(p) or [0] for p in vp]
    vedge = [sorted(e) or [(0, 0, 0)] for e in ve]
    return _pad(vplane, max(map(len, vplane))), _pad(vedge, max(map(len, vedge)))


BOX_VPLANE, BOX_VEDGE = vertex_tables(BOX_TRIS, box_planes().tolist(), 8)  # (8, 3), (8, 5, 3)


@dataclasses.dataclass(frozen=True)
class MeshHull:
    """One mesh's convex hull for the colliders, its vertices numbered 0..H-1 (hull vertices in ascending mesh
    vertex id, so every order-dependent choice, e.g. the lowest id among ties, is the mesh's own).

    vert: (H,) int32 rows of m.mesh_vert; face: (T, 3) int32 outward hull triangles; poly: per polygon its vertex
    cycle in MuJoCo's face order (clockwise about the outward normal, at most MAX_POLYVERT); tri_poly: (T,) int32
    the polygon of each triangle (the smallest holding its three vertices; a triangle that none holds gets a polygon
    of its own, its corners reversed); plane: per face plane, the triangles it holds (one plane per polygon);
    edge: (E, 4) int32 hull edges (polygon sides, each once; the triangles' edges where the mesh has no polygons)
    with the two triangles at each; vplane (H, Dp), vedge (H, De, 3): `vertex_tables`."""

    vert: np.ndarray
    face: np.ndarray
    poly: tuple[np.ndarray, ...]
    tri_poly: np.ndarray
    plane: tuple[tuple[int, ...], ...]
    edge: np.ndarray
    vplane: np.ndarray
    vedge: np.ndarray


def _polygon_cycles(m: Model, i: int) -> list[np.ndarray]:
    """Mesh i's polygons as vertex-id cycles (mesh_polyvert, in the compiler's order)."""
    adr, num = int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
    vert, vadr, vnum = np.asarray(m.mesh_polyvert), m.mesh_polyvertadr, m.mesh_polyvertnum
    return [vert[int(vadr[j]) : int(vadr[j]) + int(vnum[j])] for j in range(adr, adr + num)]


def _mesh_hull(m: Model, i: int) -> MeshHull:
    """`MeshHull` of mesh i (local vertex ids of the Model's tables renumbered to hull vertices)."""
    vadr, vnum = int(m.mesh_vertadr[i]), int(m.mesh_vertnum[i])
    fadr, fnum = int(m.mesh_hullfaceadr[i]), int(m.mesh_hullfacenum[i])
    tris = np.asarray(m.mesh_hullface, np.int64).reshape(-1, 3)[fadr : fadr + fnum]
    cycles = _polygon_cycles(m, i)
    if fnum == 0:  # no hull (not collided): its vertices as they are, one degenerate triangle
        ids = np.arange(max(vnum, 1))
        tris = np.zeros((1, 3), np.int64)
        cycles = []
    else:
        hadr, hnum = int(m.mesh_hullvertadr[i]), int(m.mesh_hullvertnum[i])
        used = [np.asarray(m.mesh_hullvert)[hadr : hadr + hnum], tris.reshape(-1)] + cycles
        ids = np.unique(np.concatenate(used).astype(np.int64))
    lut = np.full(max(vnum, 1), -1, np.int64)
    lut[ids] = np.arange(len(ids))
    face = lut[tris]
    # polygons in MuJoCo's face order (reversed), cut at MAX_POLYVERT, renumbered
    polys = [lut[c[::-1][:MAX_POLYVERT]] for c in cycles]
    at: dict[int, set[int]] = {}  # hull vertex -> the polygons holding it
    for j, c in enumerate(polys):
        for v in c.tolist():
            at.setdefault(v, set()).add(j)
    tri_poly = np.empty(len(face), np.int32)
    for t, (a, b, c) in enumerate(face.tolist()):
        hold = at.get(a, set()) & at.get(b, set()) & at.get(c, set())
        if hold:
            tri_poly[t] = min(hold, key=lambda j: (len(polys[j]), j))
        else:  # its own polygon, clockwise about its outward normal
            tri_poly[t] = len(polys)
            polys.append(np.array([c, b, a], np.int64))
    planes: dict[int, list[int]] = {}
    for t, j in enumerate(tri_poly.tolist()):
        planes.setdefault(j, []).append(t)
    found = set()
    for c in cycles:
        c = lut[c].tolist()
        found.update((min(u, v), max(u, v)) for u, v in zip(c, c[1:] + c[:1]))
    if not found:
        ea, en = int(m.mesh_hulledgeadr[i]), int(m.mesh_hulledgenum[i])
        found = {tuple(e) for e in lut[np.asarray(m.mesh_hulledge, np.int64).reshape(-1, 2)[ea : ea + en]].tolist()}
    edge = edge_faces(face, sorted(found) or [(0, 0)])
    plane = tuple(tuple(r) for r in planes.values())
    vplane, vedge = vertex_tables(face, plane, len(ids))
    i32 = functools.partial(np.asarray, dtype=np.int32)
    return MeshHull(i32(vadr + ids), i32(face), tuple(i32(p) for p in polys), tri_poly, plane, edge, vplane, vedge)


def _box_hull() -> MeshHull:
    """A box as a `MeshHull` (`BOX_CORNERS`, `BOX_TRIS`, `BOX_EDGES`, its faces in MuJoCo's corner order, the face
    planes of `box_planes`): the tables through which a box joins a mesh group's side (`group_tables(box=True)`), so
    that box-mesh pairs run the mesh-mesh collider's program. Its `vert` rows are placeholders: a box's vertices are
    its size times `BOX_CORNERS`, computed per pair (`geom_fields`)."""
    poly, _ = box_tri_polygons()
    faces = {tuple(f): None for f in poly.tolist()}  # MuJoCo's faces, in order of their first triangle
    order = list(faces)
    tri_poly = np.array([order.index(tuple(f)) for f in poly.tolist()], np.int32)
    plane = tuple(tuple(int(t) for t in r) for r in box_planes())
    i32 = functools.partial(np.asarray, dtype=np.int32)
    return MeshHull(np.zeros(8, np.int32), i32(BOX_TRIS), tuple(i32(f) for f in order), tri_poly, plane,
                    i32(BOX_EDGES), BOX_VPLANE, BOX_VEDGE)  # fmt: skip


BOX_HULL = _box_hull()


def mesh_hull(m: Model, i: int) -> MeshHull:
    """Mesh i's `MeshHull`, built once per Model static part, when first asked for: only the meshes that collide are
    ever built (the Franka Panda's 12 of its 67 meshes; the others are visual: building them all took 1.6 s of its
    first trace)."""
    return static_memo(m, f"collision.mesh_hull.{int(i)}", lambda m: _mesh_hull(m, int(i)))


def mesh_hulls(m: Model) -> tuple[MeshHull, ...]:
    """Every mesh's `MeshHull` (`mesh_hull`; the colliders ask for those of their meshes only)."""
    return tuple(mesh_hull(m, i) for i in range(m.nmesh))


def hull_size(m: Model, i: int) -> int:
    """The size of mesh i's hull as a collider's padded tables see it: the larger of its vertex and triangle counts."""
    h = mesh_hull(m, i)
    return max(len(h.vert), len(h.face))


PER_PAIR = ("vert", "face", "edge", "triplane")  # `geom_fields`' per-pair rows (the others: per mesh, or the row id)


def geom_fields(m: Model, mid, mids: np.ndarray, box: tuple | None = None, deferred: bool = False) -> dict:
    """The mesh fields of a vectorised GeomInfo for the geoms of mesh ids `mid` (n,) (numpy or traced) on a collision
    group's side that may take the meshes `mids` (numpy): per-pair rows vert (n, H, 3), face (n, T, 3), edge
    (n, E, 4), triplane (n, T) and mesh (n,) (the mesh's row in the side's tables), and the side's shared tables
    facepoly, facepolynum, faceplane, vertplane, vertedge (`group_tables`). box: (is a box (n,) bool, size (n, 3)) where
    the side also takes boxes, as 8-vertex hulls (`BOX_HULL`, mesh id m.nmesh in `mid`): their vertices are
    size * BOX_CORNERS (padded by repeating the first), the other tables the box's.
    deferred=True (no box): the per-pair rows (`PER_PAIR`) are not gathered: they come as the tables they are read
    from, indexed by mesh id (vert (nmesh, H, 3), face (nmesh, T, 3), edge (nmesh, E, 4), triplane (nmesh, T)), under
    the key "deferred", for the caller to gather the rows of the few pairs it runs at a time (`driver._near_only`);
    a large hull's rows copied for every candidate pair were megabytes per environment."""
    t = group_tables(m, mids, box=box is not None)
    shared = dict(facepoly="poly", facepolynum="polynum", faceplane="plane", vertplane="vplane", vertedge="vedge")
    if deferred:
        if box is not None:
            raise ValueError("geom_fields: deferred rows with boxes (their vertices are per pair)")
        tables = dict(vert=m.mesh_vert[jp.asarray(t["vert"])], face=jp.asarray(t["face"]),
                      edge=jp.asarray(t["edge"]), triplane=jp.asarray(t["triplane"]))  # fmt: skip
        return dict(mesh=jp.asarray(t["row"])[mid], deferred=tables, **{k: jp.asarray(t[v]) for k, v in shared.items()})
    vert = m.mesh_vert[jp.asarray(t["vert"])[mid]]
    if box is not None:
        is_box, size = box
        corners = jp.asarray(_rows(BOX_CORNERS, t["vert"].shape[1]), vert.dtype)  # (H, 3)
        vert = jp.where(is_box[:, None, None], corners[None] * size[:, None, :].astype(vert.dtype), vert)
    return dict(vert=vert, face=jp.asarray(t["face"])[mid],
                edge=jp.asarray(t["edge"])[mid], triplane=jp.asarray(t["triplane"])[mid],
                mesh=jp.asarray(t["row"])[mid], **{k: jp.asarray(t[v]) for k, v in shared.items()})  # fmt: skip


def group_tables(m: Model, mids: np.ndarray, box: bool = False) -> dict[str, np.ndarray]:
    """The hull tables of the meshes `mids` (one side of a collision group), each padded (by repetition) to the
    largest of those meshes. Per-pair tables, indexed by mesh id (rows of meshes not in mids: mids[0]'s):
    vert (nmesh, H) rows of mesh_vert, face (nmesh, T, 3), edge (nmesh, E, 4), triplane (nmesh, T) each triangle's
    face plane, row (nmesh,) the mesh's row in the side's tables. The side's tables (one row per mesh of mids, in
    ascending id; read a few entries at a time, never copied per pair): poly (M, T, P) each triangle's polygon padded
    with its first vertex, polynum (M, T), plane (M, F, K) each plane's triangles padded with its first (planes
    padded with the first row), vplane (M, H, Dp), vedge (M, H, De, 3). box=True: the side also takes boxes, as the
    mesh of id nmesh (`BOX_HULL`: one more row of every table, the last of the side's; its vert rows placeholders)."""
    mids = np.unique(np.asarray(mids))
    side = [int(i) for i in mids if 0 <= i < m.nmesh]
    if box:
        side.append(m.nmesh)
    key = f"collision.group_tables.{tuple(side)}"
    return static_memo(m, key, lambda m: _group_tables(m, side))


def _group_tables(m: Model, side: list[int]) -> dict[str, np.ndarray]:
    """`group_tables` of the side's mesh ids (ascending; m.nmesh: the box)."""

    def get(i: int) -> MeshHull:
        return BOX_HULL if i == m.nmesh else mesh_hull(m, i)

    nhull = m.nmesh + (1 if m.nmesh in side else 0)
    sel = [get(i) for i in side]
    rows = [sel[side.index(i)] if i in side else sel[0] for i in range(nhull)]
    nv = max(len(h.vert) for h in sel)
    nt = max(len(h.face) for h in sel)
    width = max(max((len(p) for p in h.poly), default=3) for h in sel)
    k = max(max(len(r) for r in h.plane) for h in sel)
    nplane = max(len(h.plane) for h in sel)
    dp = max(h.vplane.shape[1] for h in sel)
    de = max(h.vedge.shape[1] for h in sel)

    def tri_plane(h):
        out = np.zeros(len(h.face), np.int32)
        for f, r in enumerate(h.plane):
            out[list(r)] = f
        return out

    return {
        "vert": _pad([h.vert for h in rows], nv),
        "face": _pad([h.face for h in rows], nt),
        "edge": _pad([h.edge for h in rows], max(len(h.edge) for h in sel)),
        "triplane": _pad([tri_plane(h) for h in rows], nt),
        "row": np.array([side.index(i) if i in side else 0 for i in range(nhull)], np.int32),
        "poly": np.stack([_rows(_pad([h.poly[j] for j in h.tri_poly], width), nt) for h in sel]),
        "polynum": _pad([[len(h.poly[j]) for j in h.tri_poly] for h in sel], nt),
        "plane": np.stack([_rows(_pad([np.asarray(r) for r in h.plane], k), nplane) for h in sel]),
        "vplane": _pad([_pad(list(h.vplane), dp) for h in sel], nv),
        "vedge": _pad([_pad(list(h.vedge), de) for h in sel], nv),
    }
