"""The mesh MuJoCo generates for an SDF plugin's <mesh> (mjCMesh::LoadSDF): marching cubes on a sampled grid.

MuJoCo samples the plugin's distance on a grid over its bounding box (about 300 cells along the sum of the three
half sizes), stores it in float32 and runs a marching-cubes library: one vertex per grid edge with a sign change
(linear interpolation in float32, in the library's emission order), triangles from a case table. The vertices are
then mapped back to the bounding box (float64, stored float32). The collision hull, volume, inertia and bounding box
of the SDF geom all come from this mesh. The vertices here are MuJoCo's, bit for bit; the case table is generated
by our own code (_case_table) and differs from MuJoCo's in its choice of triangles, so mesh_face and the quantities
integrated over the faces (volume, mass, inertia) differ slightly from MuJoCo's.
Vectorised over the grid (numpy); host side only.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.collision import sdf_plugins

# The cube's corners are j = x + 2y + 4z (x, y, z in {0, 1}); its 12 edges in the column order of marching_cubes'
# `edges`: x-edges at (y, z) = (0, 0), (1, 0), (0, 1), (1, 1), then the y-edges at (x, z), then the z-edges at (x, y).
_CUBE_EDGES = ((0, 1), (2, 3), (4, 5), (6, 7), (0, 2), (1, 3), (4, 6), (5, 7), (0, 4), (1, 5), (2, 6), (3, 7))


def _cube_faces() -> list[list[int]]:
    """The cube's 6 faces as cycles of 4 corners, counter-clockwise seen from outside the cube."""
    faces = []
    for axis in range(3):
        for side in (0, 1):
            corners = [j for j in range(8) if (j >> axis) & 1 == side]
            pos = {j: np.array([j & 1, (j >> 1) & 1, (j >> 2) & 1], float) - 0.5 for j in corners}
            normal = np.zeros(3)
            normal[axis] = 1.0 if side else -1.0
            u = pos[corners[0]]
            v = np.cross(normal, u)
            angle = [np.arctan2(pos[j] @ v, pos[j] @ u) for j in corners]
            faces.append([corners[i] for i in np.argsort(angle)])
    return faces


def _case_loops(config: int, faces: list[list[int]]) -> list[list[int]]:
    """The isosurface polygons of a cube with corner j inside (distance < 0) where bit j of config is set: loops of
    edge indices, each starting at its lowest edge, ordered by that edge.

    On each face, walking its corners counter-clockwise from outside the cube, an edge going from an outside to an
    inside corner is joined to the next edge going from an inside to an outside corner: the segment cuts off the
    inside corners between them. A face with 4 crossings (inside corners diagonal) so gets two segments, each
    separating one inside corner (the fixed rule for the ambiguous face; it depends on the face's own corners only,
    so the neighbouring cube makes the same choice and the mesh stays closed). Every crossing edge lies on two faces
    and begins one segment and ends another, so the segments close into loops; their order puts the outside corners
    on the side of the right-handed normal (outward normal toward positive distance, as MuJoCo's faces)."""
    inside = [(config >> j) & 1 == 1 for j in range(8)]
    edge_of = {frozenset(e): k for k, e in enumerate(_CUBE_EDGES)}
    nxt = {}
    for cyc in faces:
        for i in range(4):
            if inside[cyc[i]] or not inside[cyc[(i + 1) % 4]]:
                continue
            k = next(k for k in ((i + d) % 4 for d in (1, 2, 3)) if inside[cyc[k]] and not inside[cyc[(k + 1) % 4]])
            nxt[edge_of[frozenset((cyc[i], cyc[(i + 1) % 4]))]] = edge_of[frozenset((cyc[k], cyc[(k + 1) % 4]))]
    loops, seen = [], set()
    for start in sorted(nxt):
        if start in seen:
            continue
        loop = [start]
        while nxt[loop[-1]] != start:
            loop.append(nxt[loop[-1]])
        seen.update(loop)
        loops.append(loop)
    return loops


def _case_table() -> np.ndarray:
    """(256, 15) int64: for each corner configuration, its triangles as edge indices (3 per triangle, -1 padded):
    each loop of _case_loops triangulated as a fan from its first edge. Generated here (MuJoCo's marching-cubes
    library uses a fixed published table; ours has the same loops but different triangles where a loop has more
    than 3 edges, so mesh_face differs from MuJoCo's while mesh_vert is the same)."""
    faces = _cube_faces()
    table = np.full((256, 15), -1, np.int64)
    for config in range(256):
        tris = [(lp[0], lp[i], lp[i + 1]) for lp in _case_loops(config, faces) for i in range(1, len(lp) - 1)]
        table[config, : 3 * len(tris)] = np.array(tris, np.int64).reshape(-1)
    return table


_TRIS = _case_table()  # built once at import (256 small loop walks)

GRID_CELLS = 300.0  # MuJoCo's grid budget along aabb[3] + aabb[4] + aabb[5]


def grid_shape(box: np.ndarray) -> tuple[int, int, int]:
    """(nx, ny, nz) MuJoCo's sample counts for a bounding box (centre, half sizes) (6,)."""
    total = box[3] + box[4] + box[5]
    return tuple(int(np.floor(GRID_CELLS / total * box[3 + i])) + 1 for i in range(3))


def _edge_vertices(field: np.ndarray, axis: int):
    """The sign-changing grid edges along `axis` of field (nz, ny, nx) float32: their lower corners (k, 3) as (x, y,
    z) ints and the float32 vertex (k, 3) in grid units (as MuJoCo's marching-cubes library)."""
    sl_a = [slice(None)] * 3
    sl_b = [slice(None)] * 3
    ax = 2 - axis  # field axes are (z, y, x)
    sl_a[ax] = slice(0, -1)
    sl_b[ax] = slice(1, None)
    va, vb = field[tuple(sl_a)], field[tuple(sl_b)]
    change = (va < 0) != (vb < 0)
    kz, ky, kx = np.nonzero(change)
    a, b = va[change], vb[change]
    v = np.stack([kx, ky, kz], axis=-1).astype(np.float32)
    v[:, axis] = v[:, axis] + (a / (a - b)).astype(np.float32)
    return np.stack([kx, ky, kz], axis=-1), v


# per axis: (slot when both other coordinates are >= 1, slot when both are 0, slot when only the first other is 0,
# slot when only the second is 0); the "other" coordinates of an x-edge are (y, z), of a y-edge (x, z), of a z-edge
# (x, y): MuJoCo's marching-cubes library emits each edge from one cube in a fixed slot (0-11) of that cube's
# emission order
_SLOTS = {0: (3, 0, 2, 1), 1: (7, 4, 6, 5), 2: (11, 8, 10, 9)}


def marching_cubes(field: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Marching cubes on field (nz, ny, nx) float32 (value of grid point (i, j, k) at [k, j, i]): vertices (nv, 3)
    float32 in grid units in MuJoCo's order and triangles (nt, 3) int64 (our case table, cube by cube)."""
    nz, ny, nx = field.shape
    keys, verts, ids = [], [], []
    for axis in range(3):
        corner, v = _edge_vertices(field, axis)
        others = [i for i in range(3) if i != axis]
        o1, o2 = corner[:, others[0]], corner[:, others[1]]
        both, none, only1, only2 = _SLOTS[axis]
        owner = corner.copy()
        owner[:, others[0]] = np.maximum(o1 - 1, 0)
        owner[:, others[1]] = np.maximum(o2 - 1, 0)
        slot = np.where((o1 >= 1) & (o2 >= 1), both, np.where((o1 == 0) & (o2 == 0), none,
                                                              np.where(o1 == 0, only1, only2)))  # fmt: skip
        cube = (owner[:, 2] * (ny - 1) + owner[:, 1]) * (nx - 1) + owner[:, 0]
        keys.append(cube.astype(np.int64) * 12 + slot)
        verts.append(v)
        ids.append((axis, corner))
    order = np.argsort(np.concatenate(keys), kind="stable")
    vert = np.concatenate(verts)[order]
    vid = np.empty(len(order), np.int64)
    vid[order] = np.arange(len(order))
    # vertex id of each edge: grids (nz, ny, nx) per axis (edges past the end unused)
    grids, start = [], 0
    for _axis, corner in ids:
        g = np.full((nz, ny, nx), -1, np.int64)
        g[corner[:, 2], corner[:, 1], corner[:, 0]] = vid[start : start + len(corner)]
        start += len(corner)
        grids.append(g)
    # active cubes in (z, y, x) order and their configurations
    c = [
        field[z0 : z0 + nz - 1, y0 : y0 + ny - 1, x0 : x0 + nx - 1] < 0
        for z0 in (0, 1)
        for y0 in (0, 1)
        for x0 in (0, 1)
    ]  # corner j = x + 2y + 4z
    config = sum(ci.astype(np.int64) << j for j, ci in enumerate(c))
    kz, ky, kx = np.nonzero((config != 0) & (config != 255))
    cfg = config[kz, ky, kx]
    gx, gy, gz = grids
    edges = np.stack([
        gx[kz, ky, kx], gx[kz, ky + 1, kx], gx[kz + 1, ky, kx], gx[kz + 1, ky + 1, kx],
        gy[kz, ky, kx], gy[kz, ky, kx + 1], gy[kz + 1, ky, kx], gy[kz + 1, ky, kx + 1],
        gz[kz, ky, kx], gz[kz, ky, kx + 1], gz[kz, ky + 1, kx], gz[kz, ky + 1, kx + 1],
    ], axis=-1)  # fmt: skip
    which = _TRIS[cfg]  # (M, 15) edge indices, -1 past the case's triangles
    corners = np.take_along_axis(edges, np.maximum(which, 0), axis=1)
    face = corners[which >= 0].reshape(-1, 3)
    if np.any(face < 0):
        raise ValueError("marching cubes: a triangle references an edge without a vertex")
    return vert, face


def plugin_mesh(name: str, attr) -> tuple[np.ndarray, np.ndarray]:
    """The float32 vertices (nv, 3) and triangles (nt, 3) MuJoCo generates for an SDF plugin instance (its name and
    attribute values, defaults filled in)."""
    box = sdf_plugins.aabb(name, attr)
    nx, ny, nz = grid_shape(box)
    lo = box[:3] - box[3:]
    xs = lo[0] + 2 * box[3] * np.arange(nx) / (nx - 1)
    ys = lo[1] + 2 * box[4] * np.arange(ny) / (ny - 1)
    zs = lo[2] + 2 * box[5] * np.arange(nz) / (nz - 1)
    pz, py, px = np.meshgrid(zs, ys, xs, indexing="ij")
    pts = np.stack([px, py, pz], axis=-1)
    field = sdf_plugins.DISTANCE[name](pts, attr, np).astype(np.float32)
    vert, face = marching_cubes(field)
    v = vert.astype(np.float64)
    out = np.empty_like(v)
    for i, n in enumerate((nx, ny, nz)):
        out[:, i] = 2 * box[3 + i] * v[:, i] / (n - 1) + box[i] - box[3 + i]
    return out.astype(np.float32), face
