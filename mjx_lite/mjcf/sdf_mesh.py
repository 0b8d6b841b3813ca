"""The mesh MuJoCo generates for an SDF plugin's <mesh> (mjCMesh::LoadSDF): marching cubes on a sampled grid.

MuJoCo samples the plugin's distance on a grid over its bounding box (about 300 cells along the sum of the three
half sizes), stores it in float32 and runs the MarchingCubeCpp library (A. Paris, MIT licence): one vertex per grid
edge with a sign change (linear interpolation in float32, in the library's emission order), triangles from its
case table. The vertices are then mapped back to the bounding box (float64, stored float32). The collision hull,
volume, inertia and bounding box of the SDF geom all come from this mesh, so it is rebuilt here vertex for vertex.
Vectorised over the grid (numpy); host side only.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.collision import sdf_plugins

# MarchingCubeCpp's case table (https://github.com/aparis69/MarchingCubeCpp, commit 0e980cc, MIT licence,
# Copyright (c) 2020 Axel Paris): for each of the 256 inside/outside configurations of a cube's corners, the number
# of triangles in the low 4 bits, then 4 bits per triangle corner naming one of the cube's 12 edges.
_TRIS = np.array([
    0, 33793, 36945, 159668546, 18961, 144771090, 5851666, 595283255635, 20913, 67640146, 193993474, 655980856339,
    88782242, 736732689667, 797430812739, 194554754, 26657, 104867330, 136709522, 298069416227, 109224258,
    8877909667, 318136408323, 1567994331701604, 189884450, 350847647843, 559958167731, 3256298596865604,
    447393122899, 651646838401572, 2538311371089956, 737032694307, 29329, 43484162, 91358498, 374810899075,
    158485010, 178117478419, 88675058979, 433581536604804, 158486962, 649105605635, 4866906995, 3220959471609924,
    649165714851, 3184943915608436, 570691368417972, 595804498035, 124295042, 431498018963, 508238522371, 91518530,
    318240155763, 291789778348404, 1830001131721892, 375363605923, 777781811075, 1136111028516116, 3097834205243396,
    508001629971, 2663607373704004, 680242583802939237, 333380770766129845, 179746658, 42545, 138437538, 93365810,
    713842853011, 73602098, 69575510115, 23964357683, 868078761575828, 28681778, 713778574611, 250912709379,
    2323825233181284, 302080811955, 3184439127991172, 1694042660682596, 796909779811, 176306722, 150327278147,
    619854856867, 1005252473234484, 211025400963, 36712706, 360743481544788, 150627258963, 117482600995,
    1024968212107700, 2535169275963444, 4734473194086550421, 628107696687956, 9399128243, 5198438490361643573,
    194220594, 104474994, 566996932387, 427920028243, 2014821863433780, 492093858627, 147361150235284,
    2005882975110676, 9671606099636618005, 777701008947, 3185463219618820, 482784926917540, 2900953068249785909,
    1754182023747364, 4274848857537943333, 13198752741767688709, 2015093490989156, 591272318771, 2659758091419812,
    1531044293118596, 298306479155, 408509245114388, 210504348563, 9248164405801223541, 91321106, 2660352816454484,
    680170263324308757, 8333659837799955077, 482966828984116, 4274926723105633605, 3184439197724820, 192104450,
    15217, 45937, 129205250, 129208402, 529245952323, 169097138, 770695537027, 382310500883, 2838550742137652,
    122763026, 277045793139, 81608128403, 1991870397907988, 362778151475, 2059003085103236, 2132572377842852,
    655681091891, 58419234, 239280858627, 529092143139, 1568257451898804, 447235128115, 679678845236084,
    2167161349491220, 1554184567314086709, 165479003923, 1428768988226596, 977710670185060, 10550024711307499077,
    1305410032576132, 11779770265620358997, 333446212255967269, 978168444447012, 162736434, 35596216627,
    138295313843, 891861543990356, 692616541075, 3151866750863876, 100103641866564, 6572336607016932133,
    215036012883, 726936420696196, 52433666, 82160664963, 2588613720361524, 5802089162353039525, 214799000387,
    144876322, 668013605731, 110616894681956, 1601657732871812, 430945547955, 3156382366321172, 7644494644932993285,
    3928124806469601813, 3155990846772900, 339991010498708, 10743689387941597493, 5103845475, 105070898,
    3928064910068824213, 156265010, 1305138421793636, 27185, 195459938, 567044449971, 382447549283, 2175279159592324,
    443529919251, 195059004769796, 2165424908404116, 1554158691063110021, 504228368803, 1436350466655236,
    27584723588724, 1900945754488837749, 122971970, 443829749251, 302601798803, 108558722, 724700725875,
    43570095105972, 2295263717447940, 2860446751369014181, 2165106202149444, 69275726195, 2860543885641537797,
    2165106320445780, 2280890014640004, 11820349930268368933, 8721082628082003989, 127050770, 503707084675,
    122834978, 2538193642857604, 10129, 801441490467, 2923200302876740, 1443359556281892, 2901063790822564949,
    2728339631923524, 7103874718248233397, 12775311047932294245, 95520290, 2623783208098404, 1900908618382410757,
    137742672547, 2323440239468964, 362478212387, 727199575803140, 73425410, 34337, 163101314, 668566030659,
    801204361987, 73030562, 591509145619, 162574594, 100608342969108, 5553, 724147968595, 1436604830452292,
    176259090, 42001, 143955266, 2385, 18433, 0,
], dtype=np.uint64)  # fmt: skip

GRID_CELLS = 300.0  # MuJoCo's grid budget along aabb[3] + aabb[4] + aabb[5]


def grid_shape(box: np.ndarray) -> tuple[int, int, int]:
    """(nx, ny, nz) MuJoCo's sample counts for a bounding box (centre, half sizes) (6,)."""
    total = box[3] + box[4] + box[5]
    return tuple(int(np.floor(GRID_CELLS / total * box[3 + i])) + 1 for i in range(3))


def _edge_vertices(field: np.ndarray, axis: int):
    """The sign-changing grid edges along `axis` of field (nz, ny, nx) float32: their lower corners (k, 3) as (x, y,
    z) ints and the float32 vertex (k, 3) in grid units (MarchingCubeCpp's mc_internalComputeEdge)."""
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
# (x, y): MarchingCubeCpp emits each edge from one cube in a fixed slot (0-11) of its cube's emission order
_SLOTS = {0: (3, 0, 2, 1), 1: (7, 4, 6, 5), 2: (11, 8, 10, 9)}


def marching_cubes(field: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MarchingCubeCpp's marching_cube on field (nz, ny, nx) float32 (value of grid point (i, j, k) at [k, j, i]):
    vertices (nv, 3) float32 in grid units and triangles (nt, 3) int64, both in the library's order."""
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
    code = _TRIS[cfg]
    ntri = (code & np.uint64(0xF)).astype(np.int64)
    shifts = np.uint64(4) + np.uint64(4) * np.arange(15, dtype=np.uint64)
    which = ((code[:, None] >> shifts[None, :]) & np.uint64(0xF)).astype(np.int64)  # (M, 15)
    corners = np.take_along_axis(edges, which, axis=1)
    keep = np.arange(15)[None, :] < 3 * ntri[:, None]
    face = corners[keep].reshape(-1, 3)
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
