"""Host-side polytope tables of boxes and meshes (numpy, from the Model's integer fields; built once per group).

A box is a fixed polyhedron (`BOX_CORNERS`, `BOX_TRIS`, `BOX_EDGES`, its faces in MuJoCo's corner order). A mesh
collides through its convex hull (mjModel's mesh_hullface / mesh_hulledge / mesh_polyvert, from the compiler's
mjcf/mesh.py): the driver pads each table to a group's largest mesh and gives them to the colliders in GeomInfo:
  * `hull_face_table`: hull triangles (GeomInfo.face);
  * `hull_face_polygons`: per triangle, its polygon in MuJoCo's face order (GeomInfo.facepoly, facepolynum), the
    faces that MuJoCo's multiccd clips (polygonClip; at most MAX_POLYVERT vertices, mjMAX_POLYVERT);
  * `hull_face_planes`: triangles grouped by face plane (GeomInfo.faceplane);
  * `hull_edge_table`: hull edges with the two triangles at each (GeomInfo.edge).
No JAX here: everything is static (a function of the Model's static part).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

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


def hull_face_table(m: Model) -> np.ndarray:
    """(nmesh, maxtri, 3) int32 hull triangles of every mesh (local vertex ids), padded by repeating the first."""
    num = np.maximum(np.asarray(m.mesh_hullfacenum), 1)
    adr = np.asarray(m.mesh_hullfaceadr)
    faces = np.asarray(m.mesh_hullface).reshape(-1, 3)
    if faces.shape[0] == 0:
        return np.zeros((len(num), 1, 3), np.int32)
    nmax = int(num.max())
    idx = adr[:, None] + np.where(np.arange(nmax)[None, :] < num[:, None], np.arange(nmax)[None, :], 0)
    return faces[np.minimum(idx, faces.shape[0] - 1)].astype(np.int32)


def _polygon_cycles(m: Model, i: int) -> list[np.ndarray]:
    """Mesh i's polygons as vertex-id cycles (mesh_polyvert, in the compiler's order)."""
    adr, num = int(m.mesh_polyadr[i]), int(m.mesh_polynum[i])
    vert, vadr, vnum = np.asarray(m.mesh_polyvert), m.mesh_polyvertadr, m.mesh_polyvertnum
    return [vert[int(vadr[j]) : int(vadr[j]) + int(vnum[j])] for j in range(adr, adr + num)]


def _mesh_polygons(m: Model) -> list[list[np.ndarray]]:
    """Each mesh's polygons as vertex-id cycles in MuJoCo's face order (its polygon reversed, at most MAX_POLYVERT)."""
    return [[c[::-1][:MAX_POLYVERT] for c in _polygon_cycles(m, i)] for i in range(len(np.asarray(m.mesh_vertnum)))]


def _triangle_polygon(m: Model, tris: np.ndarray, polys: list[list[np.ndarray]]) -> np.ndarray:
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


def hull_face_polygons(m: Model) -> tuple[np.ndarray, np.ndarray]:
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


def hull_face_planes(m: Model) -> np.ndarray:
    """(nmesh, maxplane, K) int32: for each mesh, its hull triangles (rows of `hull_face_table`) grouped by face
    plane: one row per polygon (the triangles it holds) and one per triangle that no polygon holds, each row padded
    by repeating its first triangle, rows padded by repeating the first row. The separating axes and the manifold's
    face choices range over planes (one triangle each, the largest: `plane_rep`) instead of every triangle. From
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


def hull_edge_table(m: Model) -> np.ndarray:
    """(nmesh, maxedge, 4) int32 hull edges of every mesh: local vertex ids (each edge once; its polygons' sides,
    so that triangulation diagonals of flat faces are left out; the hull's triangle edges where it has no polygons)
    and the two hull triangles (rows of `hull_face_table`) that meet there; padded by repeating the first."""
    tris = hull_face_table(m)
    edges = []
    for i in range(len(np.asarray(m.mesh_vertnum))):
        found = set()
        for cyc in _polygon_cycles(m, i):
            cyc = cyc.tolist()
            found.update((min(u, v), max(u, v)) for u, v in zip(cyc, cyc[1:] + cyc[:1]))
        if not found:
            ea, en = int(m.mesh_hulledgeadr[i]), int(m.mesh_hulledgenum[i])
            found = {tuple(e) for e in np.asarray(m.mesh_hulledge)[ea : ea + en].tolist()}
        ntri = max(int(np.asarray(m.mesh_hullfacenum)[i]), 1)
        edges.append(edge_faces(tris[i, :ntri], sorted(found) or [(0, 0)]).tolist())
    if not edges:
        return np.zeros((0, 1, 4), np.int32)
    width = max(len(e) for e in edges)
    return np.array([e + [e[0]] * (width - len(e)) for e in edges], np.int32).reshape(len(edges), width, 4)
