"""Mesh assets of the MJCF compiler: STL/OBJ/MSH loading, MuJoCo's mesh processing, convex hulls, mass properties.

API (host numpy; nothing here is traced):

    asset = load_mesh(elem, model_dir, meshdir, assets)     # one <mesh> Element -> MeshAsset
    arrays, sizes = mesh_arrays([asset0, asset1, ...])      # mesh_* arrays and nmesh/nmeshvert/nmeshface
    size, rbound, aabb = mesh_geom_size(asset)              # geom_size/geom_rbound/geom_aabb of a type="mesh" geom
    pos, quat = mesh_geom_frame(geom_pos, geom_quat, asset) # geom frame of a mesh geom (mesh offset applied)
    mass, com, inertia, quat = mesh_geom_inertia(asset, density=..., mass=..., shellinertia=False)
    size, offset = fit_geom(asset, gtype, fitscale, fitaabb)  # primitive geom fitted to a mesh (geom mesh="..")

`MeshAsset` holds the processed mesh exactly as MuJoCo keeps it: vertices in the mesh's inertial (principal)
frame, `pos`/`quat` = that frame relative to the file frame (after refpos/refquat/scale), the volume (or surface
area for inertia="shell"), the principal "unit-density" inertia and the convex hull (scipy.spatial.ConvexHull,
which is qhull with MuJoCo's "Qt" option; `maxhullvert` maps to qhull's TA option as in MuJoCo).

Processing follows MuJoCo 4.0 (mjCMesh):
  - STL (binary; ASCII accepted too, which MuJoCo itself rejects) has its repeated vertices merged (exact float
    equality, first occurrence kept, -0 == +0); OBJ, MSH and inline `vertex` keep their vertices as given.
  - OBJ: only the first group/object with faces is used (tinyobjloader's first shape), polygons are triangulated
    like tinyobjloader (quads across the shorter diagonal, larger polygons by its ear clipping, in float32);
    texture coordinates, normals and materials are ignored.
  - a negative scale determinant flips the winding of file faces; a mesh without faces gets its hull's faces.
  - vertices are float32 (as MuJoCo reads them), processed in float64: refpos/refquat, scale, face-area centroid,
    volume and centre of mass ("legacy": |pyramid volumes|, "exact": signed, "convex": over the hull faces,
    "shell": surface area), inertia, principal axes by MuJoCo's Jacobi iteration (same quaternion, not just an
    equivalent one), then the vertices are moved into that frame.

Model's hull tables (see `mesh_arrays`): for mesh i, its hull vertices are the local vertex ids
`mesh_hullvert[mesh_hullvertadr[i] : + mesh_hullvertnum[i]]` (positions: `mesh_vert[mesh_vertadr[i] + id]`, traced
through `mesh_vert`); hull triangles (outward, counter-clockwise, local vertex ids) are
`mesh_hullface[mesh_hullfaceadr[i] : + mesh_hullfacenum[i]]`, and the hull's undirected edges (local vertex ids,
each once) are `mesh_hulledge[mesh_hulledgeadr[i] : + mesh_hulledgenum[i]]`. A mesh whose hull cannot be built
(flat or degenerate) has num = 0.
"""

from __future__ import annotations

import dataclasses
import math
import os
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.spatial import ConvexHull, QhullError

from mjx_lite.mjcf import inertia as _m
from mjx_lite.mjcf import mesh_builtin as _builtin
from mjx_lite.mjcf import sdf_mesh
from mjx_lite.mjcf.inertia import _normvec, _quat2mat, quat_mul
from mjx_lite.mjcf.inertia import eig3 as _jacobi_eig3
from mjx_lite.mjcf.spec import Element, MJCFError
from mjx_lite.types import MINVAL

MJEPS = 1e-14  # mjEPS
# MuJoCo 4.0's mesh eigen-solver (measured, see eig3): the Jacobi iteration stops once the largest off-diagonal
# is below _EIG_REL max|A|; two eigenvalues are swapped when sorting only if they differ by more than _EIG_EPS max|A|
_EIG_REL = 1e-7
_EIG_EPS = 1e-7
INERTIA_TYPES = ("legacy", "convex", "exact", "shell")
# geom type codes (mjtGeom)
GEOM_PLANE, GEOM_HFIELD, GEOM_SPHERE, GEOM_CAPSULE, GEOM_ELLIPSOID, GEOM_CYLINDER, GEOM_BOX, GEOM_MESH = range(8)


@dataclasses.dataclass
class MeshAsset:
    """A processed mesh.

    name:     mesh name (file name without directory and extension when the element has none)
    vert:     (nvert, 3) float64 vertices in the mesh frame (centre of mass at 0, principal axes)
    face:     (nface, 3) int32 triangles (vertex ids)
    scale:    (3,) the scale attribute
    pos:      (3,) mesh frame origin (centre of mass) in the file frame (after refpos/refquat and scale)
    quat:     (4,) mesh frame orientation relative to the file frame
    inertia_type: 'legacy' | 'convex' | 'exact' | 'shell'
    volume:   volume, or surface area for inertia_type 'shell' (MuJoCo's GetVolumeRef)
    inertia:  (3,) principal inertia per unit density (decreasing), about the centre of mass
    boxsz:    (3,) half-sizes of the box with the same volume-normalised inertia (MuJoCo's boxsz)
    aamm:     (6,) (xmin, ymin, zmin, xmax, ymax, zmax) of the vertices in the mesh frame
    hull_vert: (nh,) int32 vertex ids of the convex hull (empty if it could not be built)
    hull_face: (nhf, 3) int32 outward hull triangles (vertex ids)
    hull_edge: (nhe, 2) int32 undirected hull edges (vertex ids, smaller first)
    poly:     MuJoCo's hull polygons (see `hull_polygons`): a list of int32 vertex-id cycles
    degenerate: MuJoCo's error for a hull it cannot build (colocated/collinear/coplanar vertices), raised when a
              collision geom uses the mesh (`hull_degeneracy`), else None
    """

    name: str
    vert: np.ndarray
    face: np.ndarray
    scale: np.ndarray
    pos: np.ndarray
    quat: np.ndarray
    inertia_type: str
    volume: float
    inertia: np.ndarray
    boxsz: np.ndarray
    aamm: np.ndarray
    hull_vert: np.ndarray
    hull_face: np.ndarray
    hull_edge: np.ndarray
    poly: list = dataclasses.field(default_factory=list)
    degenerate: str | None = None


# ----------------------------------------------------------------------------------------------------------
# small MuJoCo-faithful numerics (double precision, same operation order where it matters)


def eig3(mat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Principal moments (decreasing) and frame quaternion of a mesh's inertia tensor, as MuJoCo 4.0's mesh
    compiler finds them: the Jacobi iteration of `inertia.eig3` with looser tolerances than for body inertias.

    MuJoCo stops as soon as the largest off-diagonal is below 1e-7 max|A| and leaves eigenvalues within 1e-7 max|A|
    unsorted. Measured on compiled meshes: every reference mesh (211, all to 3e-13 in the quaternion), plus boxes
    whose off-diagonal or eigenvalue gap is 0.6e-7 or 1.2e-7 of max|A| (an off-diagonal of 0.6e-7 max|A| but
    1.2e-7 of its own pair's diagonal is not rotated away, so the scale is max|A|). The round-off tolerance of
    body inertias (8 eps max|A|) rotates further on near-degenerate meshes (dog.xml L_7: relative eigenvalue gap
    7e-4 and off-diagonals of 5e-8 max|A| from its float32 vertices; 3e-5 off MuJoCo's frame). An isotropic
    tensor (e.g. a regular dodecahedron) is left unrotated and unsorted, in the mesh's own frame.
    """
    return _jacobi_eig3(mat, off_rtol=_EIG_REL, sort_rtol=_EIG_EPS)


def _quat_to_mat(q) -> np.ndarray:
    return np.array(_quat2mat([float(x) for x in q])).reshape(3, 3)


# ----------------------------------------------------------------------------------------------------------
# file readers: return (vert (n, 3) float32, face (m, 3) int or None)


def _where(elem: Element | None) -> tuple:
    return (None, None, None) if elem is None else (elem.file, elem.line, elem.tag)


def _err(elem: Element | None, msg: str, attribute: str | None = None) -> MJCFError:
    if elem is None:
        return MJCFError(msg)
    return MJCFError(msg, elem.file, elem.line, elem.tag, attribute)


def read_stl(data: bytes, righthand: bool = True, name: str = "", elem: Element | None = None):
    """STL (binary, or ASCII) -> (vert float32 (3*nface, 3) with repeats, face (nface, 3)), windings flipped if
    `righthand` is False. Repeated vertices are merged later by `merge_vertices`."""
    nface = struct.unpack_from("<i", data, 80)[0] if len(data) >= 84 else -1
    if len(data) >= 84 and 1 <= nface and nface * 50 == len(data) - 84:
        rec = np.frombuffer(data, dtype=np.uint8, offset=84).reshape(nface, 50)
        vert = np.ascontiguousarray(rec[:, 12:48]).view("<f4").reshape(nface * 3, 3).astype(np.float32)
    elif data.lstrip()[:5].lower() == b"solid":
        toks = data.decode("ascii", errors="replace").split()
        vals = [toks[i + 1 : i + 4] for i, t in enumerate(toks) if t.lower() == "vertex"]
        if not vals or len(vals) % 3:
            raise _err(elem, f"could not parse ASCII STL file '{name}'")
        vert = np.array(vals, dtype=np.float64).astype(np.float32)
        nface = len(vals) // 3
    else:
        raise _err(elem, f"STL file '{name}' is neither a valid binary STL nor an ASCII STL")
    if not np.all(np.isfinite(vert)):
        raise _err(elem, f"vertex coordinate in STL file '{name}' is not finite")
    if np.any(np.abs(vert) > 2.0**30):
        raise _err(elem, f"vertex in STL file '{name}' exceeds maximum bounds")
    face = np.arange(3 * nface, dtype=np.int64).reshape(nface, 3)
    if not righthand:
        face = face[:, [0, 2, 1]]
    return vert, face


def merge_vertices(vert: np.ndarray, face: np.ndarray | None):
    """Merge exactly repeated (float32) vertices, keeping first occurrences in order (MuJoCo's ProcessVertices)."""
    key = np.ascontiguousarray(vert.astype(np.float32) + np.float32(0.0))  # -0 -> +0
    _, first, inverse = np.unique(key.view(np.dtype((np.void, 12))).reshape(-1), return_index=True,
                                  return_inverse=True)  # fmt: skip
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    newid = rank[inverse.reshape(-1)]
    vert = vert[np.sort(first)]
    if face is not None:
        face = newid[face]
    return vert, face


def _pnpoly(vx, vy, tx, ty) -> bool:
    c = False
    j = 2
    for i in range(3):
        if (vy[i] > ty) != (vy[j] > ty):
            if tx < (vx[j] - vx[i]) * (ty - vy[i]) / (vy[j] - vy[i]) + vx[i]:
                c = not c
        j = i
    return c


def _triangulate(poly: list[int], v: np.ndarray) -> list[tuple[int, int, int]]:
    """Triangulate one OBJ polygon like tinyobjloader (float32 arithmetic)."""
    f32 = np.float32
    n = len(poly)
    if n < 3:
        return []
    if n == 3:
        return [tuple(poly)]
    if n == 4:
        p0, p1, p2, p3 = (v[i] for i in poly)
        e02, e13 = p2 - p0, p3 - p1
        sqr02 = f32(f32(e02[0] * e02[0] + e02[1] * e02[1]) + e02[2] * e02[2])
        sqr13 = f32(f32(e13[0] * e13[0] + e13[1] * e13[1]) + e13[2] * e13[2])
        if sqr02 < sqr13:
            return [(poly[0], poly[1], poly[2]), (poly[0], poly[2], poly[3])]
        return [(poly[0], poly[1], poly[3]), (poly[1], poly[2], poly[3])]
    # choose the two axes of the projection plane from the first corner
    axes = [1, 2]
    eps = np.finfo(np.float32).eps
    for k in range(n):
        a, b, c = v[poly[k % n]], v[poly[(k + 1) % n]], v[poly[(k + 2) % n]]
        e0, e1 = b - a, c - b
        cx = abs(f32(e0[1] * e1[2]) - f32(e0[2] * e1[1]))
        cy = abs(f32(e0[2] * e1[0]) - f32(e0[0] * e1[2]))
        cz = abs(f32(e0[0] * e1[1]) - f32(e0[1] * e1[0]))
        if cx > eps or cy > eps or cz > eps:
            if not (cx > cy and cx > cz):
                axes[0] = 0
                if cz > cx and cz > cy:
                    axes[1] = 1
            break
    tris = []
    remaining = list(poly)
    guess = 0
    iters = n
    prev = n
    while len(remaining) > 3 and iters > 0:
        npoly = len(remaining)
        if guess >= npoly:
            guess -= npoly
        if prev != npoly:
            prev = npoly
            iters = npoly
        else:
            iters -= 1
        ind = [remaining[(guess + k) % npoly] for k in range(3)]
        vx = [v[i][axes[0]] for i in ind]
        vy = [v[i][axes[1]] for i in ind]
        e0x, e0y = vx[1] - vx[0], vy[1] - vy[0]
        e1x, e1y = vx[2] - vx[1], vy[2] - vy[1]
        cross = f32(e0x * e1y) - f32(e0y * e1x)
        area = (f32(vx[0] * vy[1]) - f32(vy[0] * vx[1])) * f32(0.5)
        if f32(cross * area) < 0:
            guess += 1
            continue
        overlap = False
        for other in range(3, npoly):
            o = remaining[(guess + other) % npoly]
            if _pnpoly(vx, vy, v[o][axes[0]], v[o][axes[1]]):
                overlap = True
                break
        if overlap:
            guess += 1
            continue
        tris.append(tuple(ind))
        del remaining[(guess + 1) % npoly]
    if len(remaining) == 3:
        tris.append(tuple(remaining))
    return tris


def read_obj(data: bytes, righthand: bool = True, name: str = "", elem: Element | None = None):
    """OBJ -> (vert float32 (n, 3), face (m, 3) or None): the faces of the first group/object that has faces."""
    verts: list[list[float]] = []
    polys: list[list[int]] = []
    done = False  # first shape closed
    for line in data.decode("utf-8", errors="replace").splitlines():
        tok = line.split()
        if not tok or tok[0].startswith("#"):
            continue
        key = tok[0]
        if key == "v":
            try:
                xyz = [float(t) for t in tok[1:4]]
            except ValueError as e:
                raise _err(elem, f"could not parse vertex '{line.strip()}' in OBJ file '{name}'") from e
            xyz += [0.0] * (3 - len(xyz))
            verts.append(xyz)
        elif key == "f" and not done:
            poly = []
            for t in tok[1:]:
                s = t.split("/")[0]
                try:
                    i = int(s)
                except ValueError as e:
                    raise _err(elem, f"could not parse face '{line.strip()}' in OBJ file '{name}'") from e
                poly.append(i - 1 if i > 0 else len(verts) + i)
            polys.append(poly)
        elif key in ("o", "g") and polys:
            done = True
    vert = np.array(verts, dtype=np.float64).reshape(-1, 3).astype(np.float32)
    if not np.all(np.isfinite(vert)):
        raise _err(elem, f"vertex coordinate in OBJ file '{name}' is not finite")
    if not polys:
        return vert, None
    tris = []
    for p in polys:
        if any(i < 0 or i >= len(vert) for i in p):
            raise _err(elem, f"face index out of range in OBJ file '{name}'")
        tris += _triangulate(p, vert)
    face = np.array(tris, dtype=np.int64).reshape(-1, 3)
    if not righthand:
        face = face[:, [0, 2, 1]]
    return vert, face


def read_msh(data: bytes, righthand: bool = True, name: str = "", elem: Element | None = None):
    """MuJoCo's legacy binary MSH format -> (vert float32, face or None)."""
    if len(data) < 16:
        raise _err(elem, f"missing header in MSH file '{name}'")
    nv, nn, nt, nf = struct.unpack_from("<4i", data, 0)
    if nv < 4 or nf < 0 or nn < 0 or nt < 0 or (nn > 0 and nn != nv) or (nt > 0 and nt != nv):
        raise _err(elem, f"invalid sizes in MSH file '{name}'")
    if len(data) != 16 + 12 * nv + 12 * nn + 8 * nt + 12 * nf:
        raise _err(elem, f"unexpected file size in MSH file '{name}'")
    vert = np.frombuffer(data, "<f4", 3 * nv, 16).reshape(nv, 3).astype(np.float32)
    face = None
    if nf:
        off = 16 + 12 * nv + 12 * nn + 8 * nt
        face = np.frombuffer(data, "<i4", 3 * nf, off).reshape(nf, 3).astype(np.int64)
        if not righthand:
            face = face[:, [0, 2, 1]]
    return vert, face


# ----------------------------------------------------------------------------------------------------------
# convex hull


def convex_hull(vert: np.ndarray, maxhullvert: int = -1):
    """Convex hull -> (hull_vert (nh,), hull_face (nhf, 3) outward, hull_edge (nhe, 2)), int32 vertex ids.

    Repeated points map to their first occurrence. Returns empty arrays if qhull fails (flat/degenerate input).
    """
    empty = (np.zeros(0, np.int32), np.zeros((0, 3), np.int32), np.zeros((0, 2), np.int32))
    vert = np.asarray(vert, np.float64)
    if len(vert) < 4:
        return empty
    # distinct points in their first-occurrence order: qhull's triangulation of coplanar facets depends on the input
    # order, and MuJoCo's graph (whose triangles pick a plane-mesh contact's neighbours) is built in file order
    _, first = np.unique(vert, axis=0, return_index=True)
    first = np.sort(first)
    upts = vert[first]
    opts = "Qt" if maxhullvert < 0 else f"Qt Q9 TA{maxhullvert - 4}"  # MuJoCo's options (Q9: its furthest point)
    try:
        hull = ConvexHull(upts, qhull_options=opts)
    except (QhullError, ValueError):
        return empty
    simp = np.asarray(hull.simplices, np.int64)
    a, b, c = upts[simp[:, 0]], upts[simp[:, 1]], upts[simp[:, 2]]
    flip = np.einsum("ij,ij->i", np.cross(b - a, c - a), hull.equations[:, :3]) < 0
    simp[flip] = simp[flip][:, [1, 0, 2]]
    face = first[simp].astype(np.int32)
    hv = np.unique(face.reshape(-1)).astype(np.int32)
    e = np.sort(np.concatenate([face[:, [0, 1]], face[:, [1, 2]], face[:, [2, 0]]]), axis=1)
    edge = np.unique(e, axis=0).astype(np.int32)
    return hv, face, edge


def hull_degeneracy(vert: np.ndarray, name: str) -> str | None:
    """MuJoCo's check before it builds a mesh's hull (on the float32 vertices as given, in float64): all vertices at
    vertex 0 (within mjMINVAL), all on the line through vertex 0 and the first distinct one, or all on the plane of
    the first triangle those two make with another. Returns its error message, or None for a solid point set."""
    v = np.asarray(vert, np.float64)
    if len(v) < 4:
        return None
    tail = "cannot compute convex hull. Consider using"
    d = v - v[0]
    dist = np.sqrt(d[:, 0] * d[:, 0] + d[:, 1] * d[:, 1] + d[:, 2] * d[:, 2])
    far = np.nonzero(dist[1:] > MINVAL)[0]
    if len(far) == 0:
        return f"mesh '{name}' has colocated vertices, {tail} a small sphere instead"
    i1 = int(far[0]) + 1
    e1, len1 = d[i1], float(dist[i1])
    normal = None
    for i in range(1, len(v)):
        if i == i1 or dist[i] < MINVAL:
            continue
        e2 = d[i]
        c = np.array([e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0]])
        norm = math.sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2])
        if norm > MINVAL * len1 * float(dist[i]):
            normal = c / norm
            break
    if normal is None:
        return f"mesh '{name}' has collinear vertices, {tail} a thin capsule instead"
    h = normal[0] * v[:, 0] + normal[1] * v[:, 1] + normal[2] * v[:, 2]
    if not np.any(np.abs(h - h[0]) > MINVAL * len1):
        return f"mesh '{name}' has coplanar vertices, {tail} a primitive geom type (plane or thin box) instead"
    return None


MAX_POLYVERT = 150  # mjMAX_POLYVERT: MuJoCo's multiccd reads at most this many vertices of a polygon
_POLY_BIN = 0.01  # MuJoCo bins hull triangle normals (azimuth, polar angle) in steps of 0.01 rad into polygons


def _polygon_key(n):
    """The bin of a triangle's unit normal, or None for a degenerate triangle (MuJoCo's polygon map key).
    n: (3,) the triangle's (b - a) x (c - a)."""
    ln = _m.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    if ln < MINVAL:
        return None
    n = n / ln + 0.0

    def cround(x):  # C round(): halves away from zero
        return math.copysign(math.floor(abs(x) + 0.5), x)

    if abs(n[2]) > 1.0 - 1e-7:
        return (0.0, cround(math.pi / _POLY_BIN) if n[2] < 0 else 0.0)
    return (cround(_m.atan2(n[1], n[0]) / _POLY_BIN), cround(_m.acos(n[2]) / _POLY_BIN))


class _Polygon:
    """Boundary of a group of hull triangles with the same normal bin: directed edges, each tagged with its island
    (connected patch); a triangle's edge shared with one already in the group cancels both."""

    def __init__(self, a, b, c):
        self.edges, self.island, self.nisland = [(a, b), (b, c), (c, a)], [0, 0, 0], 1

    def add(self, a, b, c):
        keep, island = [], -1
        for e in ((a, b), (b, c), (c, a)):
            twin = (e[1], e[0])
            if twin not in self.edges:
                keep.append(e)
                continue
            i = self.edges.index(twin)
            isl = self.island[i]
            if island == -1:
                island = isl
            elif isl != island:  # the triangle joins two islands: renumber the higher into the lower
                lo, hi = min(island, isl), max(island, isl)
                self.island = [lo if x == hi else x - 1 if x > hi else x for x in self.island]
                self.nisland -= 1
                island = lo
            del self.edges[i], self.island[i]
        if island == -1:
            island, self.nisland = self.nisland, self.nisland + 1
        self.edges += keep
        self.island += [island] * len(keep)

    def cycles(self) -> list[list[int]]:
        """Each island's boundary walked from its first edge (MuJoCo's vertex order and start vertex)."""
        e, isl = self.edges, self.island
        if len(e) == 3:
            # MuJoCo reads a 3-edge boundary as stored ([e0, e1, e2] starts), right for a single triangle; one left
            # by merged triangles (a fan about an inner vertex) may be stored out of turn, where that reading would
            # wind it clockwise (its qhull facet order, which ours need not share, decides): walked from e0 here
            # (Menagerie's shadow_hand f_distal_pst: MuJoCo's polygon is the walk)
            (a, b), rest = e[0], e[1:]
            return [[a, b, rest[0][1] if rest[0][0] == b else rest[1][1]]]
        out = []
        for i in range(self.nisland):
            first = next((j for j in range(len(e)) if isl[j] == i), None)
            if first is None:
                continue
            path = list(e[first])
            for _ in range(len(e)):
                # the successor edge is searched from the second stored edge on, as MuJoCo does
                k = next((k for k in range(1, len(e)) if isl[k] == i and e[k][0] == path[-1]), None)
                if k is None:
                    break
                if e[k][1] == path[0]:
                    out.append(path)
                    break
                path.append(e[k][1])
        return out


def hull_polygons(vert: np.ndarray, maxhullvert: int = -1) -> list[np.ndarray]:
    """MuJoCo's mesh polygons (mesh_polyvert): the convex hull's triangles merged into planar polygons.

    vert: (n, 3) the mesh's vertices as read (before scale and frame changes, as MuJoCo builds them). qhull ("Qt",
    scipy's bundled qhull, on the vertices in file order) gives the triangles in its facet order; those whose
    normals fall in the same 0.01 rad bin are merged, in that order, and each merged patch's boundary is one
    polygon, counter-clockwise about its outward normal. Returns a list of (k,) int32 vertex-id cycles; empty if
    qhull fails. The vertex cycles and start vertices are MuJoCo's; the order of the polygons is first-seen (MuJoCo
    keeps them in a hash map, whose order is not reproduced)."""
    vert = np.asarray(vert, np.float64)
    if len(vert) < 4:
        return []
    opts = "Qt" if maxhullvert < 0 else f"Qt Q9 TA{maxhullvert - 4}"
    try:
        hull = ConvexHull(vert, qhull_options=opts)
    except (QhullError, ValueError):
        return []
    groups: dict = {}
    # every triangle's cross product at once (np.cross per triangle was most of a large mesh's load time); the
    # same products, elementwise, as one call per triangle
    simp = np.asarray(hull.simplices)
    a, b, c = vert[simp[:, 0]], vert[simp[:, 1]], vert[simp[:, 2]]
    cr = np.cross(b - a, c - a)
    eq = np.asarray(hull.equations)[:, :3]
    flip = (cr[:, 0] * eq[:, 0] + cr[:, 1] * eq[:, 1] + cr[:, 2] * eq[:, 2]) < 0  # qhull's orientation flag
    cr_flip = np.cross(a - b, c - b)  # the swapped triangle's (first two vertices exchanged)
    for s, f, n, nf in zip(simp.tolist(), flip.tolist(), cr, cr_flip):
        if f:  # swap the first two
            s, n = [s[1], s[0], s[2]], nf
        key = _polygon_key(n)
        if key is None:
            continue
        if key in groups:
            groups[key].add(*s)
        else:
            groups[key] = _Polygon(*s)
    return [np.asarray(c, np.int32) for g in groups.values() for c in g.cycles() if len(c) >= 3]


def polygon_tables(polys: list[list[np.ndarray]]) -> dict[str, np.ndarray]:
    """mesh_polynum/polyadr (per mesh) and mesh_polyvertadr/polyvertnum/polyvert (per polygon) from each mesh's
    polygon list."""
    pnum = np.array([len(p) for p in polys], np.int32)
    flat = [c for p in polys for c in p]
    vnum = np.array([len(c) for c in flat], np.int32)
    return {
        "mesh_polynum": pnum,
        "mesh_polyadr": (np.cumsum(pnum) - pnum).astype(np.int32),
        "mesh_polyvertnum": vnum,
        "mesh_polyvertadr": (np.cumsum(vnum) - vnum).astype(np.int32),
        "mesh_polyvert": np.concatenate(flat).astype(np.int32) if flat else np.zeros(0, np.int32),
    }


def hull_tables(mesh_vert: np.ndarray, mesh_vertadr: np.ndarray, mesh_vertnum: np.ndarray) -> dict[str, np.ndarray]:
    """Hull index tables (see the module docstring) computed from compiled mesh arrays (no maxhullvert)."""
    hulls = []
    for adr, num in zip(np.asarray(mesh_vertadr), np.asarray(mesh_vertnum)):
        hulls.append(convex_hull(np.asarray(mesh_vert, np.float64)[int(adr) : int(adr) + int(num)]))
    return _pack_hulls(hulls)


def polygon_tables_from_vert(mesh_vert: np.ndarray, mesh_vertadr: np.ndarray, mesh_vertnum: np.ndarray):
    """Polygon tables (see `polygon_tables`) from compiled mesh vertices (the mesh frame, not the file frame: the
    polygons are the same, their start vertices may differ from MuJoCo's)."""
    v = np.asarray(mesh_vert, np.float64)
    return polygon_tables([hull_polygons(v[int(a) : int(a) + int(n)]) for a, n in zip(mesh_vertadr, mesh_vertnum)])


def _pack_hulls(hulls) -> dict[str, np.ndarray]:
    out = {}
    for k, name, width in ((0, "vert", None), (1, "face", 3), (2, "edge", 2)):
        parts = [h[k] for h in hulls]
        num = np.array([len(p) for p in parts], np.int32)
        out[f"mesh_hull{name}adr"] = (np.cumsum(num) - num).astype(np.int32)
        out[f"mesh_hull{name}num"] = num
        shape = (0,) if width is None else (0, width)
        out[f"mesh_hull{name}"] = np.concatenate(parts).astype(np.int32) if parts else np.zeros(shape, np.int32)
    return out


# ----------------------------------------------------------------------------------------------------------
# processing


def _seqsum(x: np.ndarray) -> np.ndarray:
    """Left-to-right sum over axis 0 (the order of MuJoCo's accumulation loops, so round-off matches)."""
    return np.add.accumulate(x, axis=0)[-1] if len(x) else np.zeros(x.shape[1:])


def _triangles(v: np.ndarray, f: np.ndarray):
    """Per-face (area, unit normal (unnormalised where degenerate, with area 0), center) as MuJoCo's triangle()."""
    v1, v2, v3 = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    center = (v1 + v2 + v3) / 3
    b, c = v2 - v1, v3 - v1
    nrm = np.stack([b[:, 1] * c[:, 2] - b[:, 2] * c[:, 1], b[:, 2] * c[:, 0] - b[:, 0] * c[:, 2],
                    b[:, 0] * c[:, 1] - b[:, 1] * c[:, 0]], axis=1)  # fmt: skip
    ln = np.sqrt(nrm[:, 0] * nrm[:, 0] + nrm[:, 1] * nrm[:, 1] + nrm[:, 2] * nrm[:, 2])
    ok = ln >= MINVAL
    normal = np.where(ok[:, None], nrm / np.where(ok, ln, 1.0)[:, None], nrm)
    area = np.where(ok, 0.5 * ln, 0.0)
    return area, normal, center


def _dot(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1] + a[:, 2] * b[:, 2]


def process_mesh(
    vert: np.ndarray,
    face: np.ndarray | None,
    *,
    name: str = "",
    scale=(1.0, 1.0, 1.0),
    refpos=(0.0, 0.0, 0.0),
    refquat=(1.0, 0.0, 0.0, 0.0),
    inertia: str = "legacy",
    maxhullvert: int = -1,
    elem: Element | None = None,
    faces_flipped: bool = False,
    need_hull: bool = False,
    reorient: bool = True,
) -> MeshAsset:
    """MuJoCo's mesh processing (mjCMesh::Process) of raw float32 vertices and triangles.

    With a left-handed `scale` (negative product) MuJoCo reverses the winding of every triangle (those of the file
    readers already are: `faces_flipped`) and of every hull polygon (first vertex kept). `need_hull`: a collision
    geom uses the mesh (its hull must exist: degenerate vertices are an error, as without faces or inertia convex).
    reorient=False (the marching-cubes mesh of an SDF plugin): MuJoCo keeps the vertices in the file frame (mesh pos 0,
    quat identity) while its volume and principal inertia are computed as usual."""
    if inertia not in INERTIA_TYPES:
        raise _err(elem, f"unknown mesh inertia type '{inertia}'", "inertia")
    if maxhullvert != -1 and maxhullvert < 4:
        raise _err(elem, "maxhullvert must be larger than 3", "maxhullvert")
    vert = np.asarray(vert, np.float32).astype(np.float64).reshape(-1, 3)
    if len(vert) < 4:
        raise _err(elem, "at least 4 vertices required")
    if not np.all(np.isfinite(vert)):
        raise _err(elem, "vertex coordinate is not finite")
    if face is not None:
        face = np.asarray(face, np.int64).reshape(-1, 3)
        if len(face) == 0:
            face = None
        elif face.min() < 0 or face.max() >= len(vert):
            raise _err(elem, "face index does not exist in the vertex array", "face")

    # inconsistent orientation: a directed edge used twice (only an error for inertia="exact")
    if face is not None and inertia == "exact":
        area0, _, _ = _triangles(vert, face)
        good = face[area0 > _m.sqrt(MINVAL)]
        he = np.concatenate([good[:, [0, 1]], good[:, [1, 2]], good[:, [2, 0]]])
        u, cnt = np.unique(he, axis=0, return_counts=True)
        if np.any(cnt > 1):
            a, b = u[np.argmax(cnt > 1)]
            raise _err(elem, f"faces of mesh '{name}' have inconsistent orientation. Please check the faces "
                       f"containing the vertices {a + 1} and {b + 1}.")  # fmt: skip

    # convex hull (of the untransformed vertices, as MuJoCo builds its graph before scaling)
    raw = vert
    hull_vert, hull_face, hull_edge = convex_hull(vert, maxhullvert)
    degenerate = hull_degeneracy(vert, name)
    if degenerate is not None and (face is None or inertia == "convex" or need_hull):  # MuJoCo builds the hull
        raise _err(elem, degenerate)
    if face is None:
        if len(hull_face) == 0:
            raise _err(elem, f"mesh '{name}' has no faces and its convex hull could not be computed")
        face = hull_face.astype(np.int64)
        faces_flipped = False
    righthand = float(np.prod(np.asarray(scale, float))) > 0
    poly = hull_polygons(raw, maxhullvert)
    if not righthand:  # correct the winding order for the mirrored (left-handed) vertices
        hull_face = hull_face[:, [0, 2, 1]]
        poly = [np.concatenate([p[:1], p[1:][::-1]]) for p in poly]
        if not faces_flipped:
            face = face[:, [0, 2, 1]]

    # refpos, refquat, scale
    refpos = np.asarray(refpos, float)
    refquat = [float(x) for x in refquat]
    scale = np.asarray(scale, float)
    if np.any(refpos != 0):
        vert = vert - refpos
    if refquat != [1.0, 0.0, 0.0, 0.0]:
        q = list(refquat)
        _normvec(q)
        vert = vert @ _quat_to_mat(q)  # R^T v for each row
    if np.any(scale != 1):
        vert = vert * scale

    # centroid of faces
    area, normal, center = _triangles(vert, face)
    total_area = float(_seqsum(area))
    if total_area < MINVAL:
        raise _err(elem, f"mesh surface area is too small: {name}")
    facecen = _seqsum(area[:, None] * center) / total_area

    # volume (or area) and centre of mass
    if inertia == "shell":
        w = area
    else:
        if inertia == "convex":
            if len(hull_face) == 0:
                raise _err(elem, f"convex hull of mesh '{name}' could not be computed")
            area, normal, center = _triangles(vert, hull_face.astype(np.int64))
        w = _dot(center - facecen, normal) * area / 3
        if inertia == "legacy":
            w = np.abs(w)
    total = float(_seqsum(w))
    com = _seqsum(w[:, None] * (center * 3.0 / 4.0 + facecen / 4.0))
    if total >= MINVAL:
        com = com / total
    elif inertia == "shell":
        raise _err(elem, f"mesh surface area is too small: {name}")
    elif total < 0:
        raise _err(elem, f"mesh volume is negative (misoriented triangles): {name}")
    else:
        raise _err(elem, f"mesh volume is too small: {name} . Try setting inertia to shell")

    # inertia about the centre of mass
    fi = hull_face.astype(np.int64) if inertia == "convex" else face
    vc = vert - com
    d, e, f = vc[fi[:, 0]], vc[fi[:, 1]], vc[fi[:, 2]]
    a2, nrm2, cen2 = _triangles(vc, fi)
    if inertia == "shell":
        w = a2
        cdiv = 12.0
    else:
        w = _dot(cen2, nrm2) * a2 / 3
        if inertia == "legacy":
            w = np.abs(w)
        cdiv = 20.0
    total_volume = float(_seqsum(w))
    kk = ((0, 0), (1, 1), (2, 2), (0, 1), (0, 2), (1, 2))
    p = []
    for k0, k1 in kk:
        s = (2 * (d[:, k0] * d[:, k1] + e[:, k0] * e[:, k1] + f[:, k0] * f[:, k1])
             + d[:, k0] * e[:, k1] + d[:, k1] * e[:, k0] + d[:, k0] * f[:, k1] + d[:, k1] * f[:, k0]
             + e[:, k0] * f[:, k1] + e[:, k1] * f[:, k0])  # fmt: skip
        p.append(float(_seqsum(w / cdiv * s)))
    full = np.array([
        [p[1] + p[2], -p[3], -p[4]],
        [-p[3], p[0] + p[2], -p[5]],
        [-p[4], -p[5], p[0] + p[1]],
    ])  # fmt: skip
    eigval, quat = eig3(full)
    if eigval[2] <= 0:
        raise _err(elem, f"eigenvalue of mesh inertia must be positive: {name}")
    rtol, atol = 1e-6, 1e-9
    e0, e1, e2 = eigval
    if (e0 + e1 < e2 * (1 - rtol) - atol or e0 + e2 < e1 * (1 - rtol) - atol
            or e1 + e2 < e0 * (1 - rtol) - atol):  # fmt: skip
        raise _err(elem, f"eigenvalues of mesh inertia violate A + B >= C: {name}")
    volume = total_volume
    boxsz = 0.5 * np.sqrt(6 * np.array([e1 + e2 - e0, e0 + e2 - e1, e0 + e1 - e2]) / volume)

    # move into the principal frame
    if not reorient:
        com, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
    r = _quat_to_mat(quat)
    vert = (vert - com) @ r  # R^T (v - com)
    aamm = np.concatenate([vert.min(0), vert.max(0)])
    return MeshAsset(
        name=name, vert=vert, face=face.astype(np.int32), scale=scale.copy(), pos=com, quat=quat,
        inertia_type=inertia, volume=volume, inertia=eigval, boxsz=boxsz, aamm=aamm,
        hull_vert=hull_vert, hull_face=hull_face, hull_edge=hull_edge, poly=poly, degenerate=degenerate,
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# element -> asset


def _attr(elem, key, default=None):
    attrs = elem.attrs if isinstance(elem, Element) else elem
    v = attrs.get(key, default)
    return default if v is None else v


def _numbers(v, dtype) -> np.ndarray:
    if isinstance(v, str):
        v = v.split()
    return np.asarray(v, dtype=dtype).reshape(-1)


def read_asset_file(file: str, model_dir: str, subdir: str, assets: Mapping[str, bytes] | None,
                    strippath: bool = False, elem: Element | None = None) -> bytes:  # fmt: skip
    """Bytes of an asset file: from `assets` (by 'subdir/file', 'file' or the base name), else from disk
    (subdir and file relative to model_dir unless absolute)."""
    if strippath:
        file = os.path.basename(file.replace("\\", "/"))
    path = file if os.path.isabs(file) else os.path.join(subdir or "", file)
    if assets:
        for key in (path, os.path.normpath(path), file, os.path.basename(file)):
            if key in assets:
                data = assets[key]
                return data.encode() if isinstance(data, str) else bytes(data)
    full = path if os.path.isabs(path) else os.path.join(model_dir or "", path)
    try:
        with open(full, "rb") as fh:
            return fh.read()
    except OSError as e:
        raise _err(elem, f"could not open file '{full}': {e.strerror}", "file") from None


def _content_type(file: str, ct: str | None, elem) -> str:
    if ct:
        t = ct.split(";")[0].strip()
        if t in ("model/stl", "model/obj", "model/vnd.mujoco.msh"):
            return t
        raise _err(elem, f"unsupported mesh content type '{ct}'", "content_type")
    ext = os.path.splitext(file)[1].lower()
    table = {".stl": "model/stl", ".obj": "model/obj", ".msh": "model/vnd.mujoco.msh"}
    if ext not in table:
        raise _err(elem, f"unknown or unsupported mesh file: '{file}'", "file")
    return table[ext]


def _builtin_mesh(elem, e: Element | None, file: str):
    """(vert, face, inertia) of a builtin mesh (mesh_builtin.make_builtin) or None without `builtin`; MuJoCo's errors
    (an explicit builtin, even "none", requires params; builtin excludes file and vertex)."""
    kind = _attr(elem, "builtin", None)
    if kind is None:
        return None
    if kind not in _builtin.BUILTINS:
        raise _err(e, f"invalid keyword: '{kind}'", "builtin")
    for other, given in (("file", file), ("vertex", _attr(elem, "vertex", None))):
        if given is not None and len(given):
            raise _err(e, f"Schema violation: at most one of 'builtin', '{other}' can be specified", other)
    params = _attr(elem, "params", None)
    params = None if params is None else _numbers(params, float)
    if params is None or len(params) == 0:
        raise _err(e, "required attribute missing: 'params'", "params")
    try:
        return _builtin.make_builtin(kind, params)
    except _builtin.BuiltinMeshError as exc:
        raise _err(e, str(exc), "params") from None


def load_mesh(
    elem: Element | Mapping[str, Any],
    model_dir: str = "",
    meshdir: str = "",
    assets: Mapping[str, bytes] | None = None,
    strippath: bool = False,
    need_hull: set[str] | bool = False,
) -> MeshAsset:
    """Load and process one <mesh> element (attributes typed by the parser, defaults applied).

    model_dir: directory of the model file (relative meshdir/file are resolved from it)
    meshdir:   <compiler meshdir> (or assetdir)
    assets:    optional {name: bytes} (like MuJoCo's VFS / from_xml_string assets)
    need_hull: True, or a set of mesh names, where a collision geom uses the mesh: MuJoCo then needs its hull and
               rejects colocated/collinear/coplanar vertices (`hull_degeneracy`) before its other checks
    """
    e = elem if isinstance(elem, Element) else None
    file = _attr(elem, "file", "") or ""
    name = _attr(elem, "name", "") or ""
    if not name and file:
        name = os.path.splitext(os.path.basename(file.replace("\\", "/")))[0]
    builtin = _builtin_mesh(elem, e, file)
    plugin = _attr(elem, "plugin", None)  # (plugin name, attribute values), resolved by the compiler
    if plugin is not None:
        return _plugin_mesh(elem, e, name, plugin, need_hull)
    scale = _numbers(_attr(elem, "scale", (1.0, 1.0, 1.0)), float)
    righthand = scale[0] * scale[1] * scale[2] > 0
    uvert = _attr(elem, "vertex", None)
    uface = _attr(elem, "face", None)
    uvert = None if uvert is None or len(_numbers(uvert, float)) == 0 else _numbers(uvert, np.float64)
    uface = None if uface is None or len(_numbers(uface, np.int64)) == 0 else _numbers(uface, np.int64)
    if uvert is not None and len(uvert) % 3:
        raise _err(e, "vertex data must be a multiple of 3", "vertex")
    if uface is not None and len(uface) % 3:
        raise _err(e, "face data must be a multiple of 3", "face")
    unormal = _attr(elem, "normal", None)
    utex = _attr(elem, "texcoord", None)
    if unormal is not None and len(_numbers(unormal, float)) % 3:
        raise _err(e, "normal data must be a multiple of 3", "normal")
    if utex is not None and len(_numbers(utex, float)) % 2:
        raise _err(e, "texcoord must be a multiple of 2", "texcoord")
    if (utex is not None and len(_numbers(utex, float)) and not file and uvert is not None
            and len(_numbers(utex, float)) != 2 * (len(uvert) // 3)):  # fmt: skip
        raise _err(e, "texcoord must be 2*nv if face texcoord indices are not provided in an OBJ file", "texcoord")
    if file:
        ctype = _content_type(file, _attr(elem, "content_type", ""), e)
        data = read_asset_file(file, model_dir, meshdir, assets, strippath, e)
        reader = {"model/stl": read_stl, "model/obj": read_obj, "model/vnd.mujoco.msh": read_msh}[ctype]
        vert, face = reader(data, righthand, file, e)
        flipped = face is not None
        if ctype == "model/stl":
            vert, face = merge_vertices(vert, face)
        if uvert is not None:
            raise _err(e, "repeated vertex specification", "vertex")
        if face is not None and uface is not None:
            raise _err(e, "repeated face specification", "face")
        if face is None and uface is not None:
            face = uface.reshape(-1, 3)
        ntex = 0 if utex is None else len(_numbers(utex, float))
        if ntex and ctype != "model/obj" and ntex != 2 * len(vert):
            raise _err(e, "texcoord must be 2*nv if face texcoord indices are not provided in an OBJ file", "texcoord")
    elif builtin is not None:  # MuJoCo's generated vertices replace the user's; a builtin without faces keeps theirs
        flipped = False
        vert, bface, binertia = builtin
        face = bface if bface is not None else (None if uface is None else uface.reshape(-1, 3))
    else:
        flipped = False
        if uvert is None:
            raise _err(e, "no vertices")
        vert = uvert.astype(np.float32).reshape(-1, 3)
        face = None if uface is None else uface.reshape(-1, 3)
    inertia = str(_attr(elem, "inertia", "legacy"))
    if builtin is not None and builtin[2] is not None:
        inertia = builtin[2]  # the plate forces inertia="shell" whatever the attribute says
    return process_mesh(
        vert, face, name=name, scale=scale,
        refpos=_numbers(_attr(elem, "refpos", (0.0, 0.0, 0.0)), float),
        refquat=_numbers(_attr(elem, "refquat", (1.0, 0.0, 0.0, 0.0)), float),
        inertia=inertia, maxhullvert=int(_attr(elem, "maxhullvert", -1)), elem=e,
        faces_flipped=flipped, need_hull=need_hull if isinstance(need_hull, bool) else name in need_hull,
    )  # fmt: skip


def _plugin_mesh(elem, e, name: str, plugin, need_hull) -> MeshAsset:
    """An SDF plugin's mesh (mjCMesh::LoadSDF): its marching-cubes surface (`sdf_mesh`), kept in the plugin frame."""
    scale = _numbers(_attr(elem, "scale", (1.0, 1.0, 1.0)), float)
    if np.any(scale != 1):
        raise _err(e, f"attribute scale is not compatible with SDFs in mesh '{name}'", "scale")
    vert, face = sdf_mesh.plugin_mesh(*plugin)
    return process_mesh(
        vert, face, name=name, inertia=str(_attr(elem, "inertia", "legacy")),
        maxhullvert=int(_attr(elem, "maxhullvert", -1)), elem=e,
        need_hull=need_hull if isinstance(need_hull, bool) else name in need_hull, reorient=False,
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# Model arrays and geom helpers


def mesh_arrays(meshes: list[MeshAsset]) -> tuple[dict[str, np.ndarray], dict[str, int]]:
    """mjModel mesh arrays (mesh_vertadr/vertnum/faceadr/facenum/vert/face/pos/quat/scale + hull tables) and
    sizes (nmesh, nmeshvert, nmeshface). mesh_vert is rounded to float32 as MuJoCo stores it."""
    nv = np.array([len(m.vert) for m in meshes], np.int32)
    nf = np.array([len(m.face) for m in meshes], np.int32)
    arrays = {
        "mesh_vertadr": (np.cumsum(nv) - nv).astype(np.int32),
        "mesh_vertnum": nv,
        "mesh_faceadr": (np.cumsum(nf) - nf).astype(np.int32),
        "mesh_facenum": nf,
        "mesh_vert": np.concatenate([m.vert for m in meshes] + [np.zeros((0, 3))]).astype(np.float32).astype(float),
        "mesh_face": np.concatenate([m.face for m in meshes] + [np.zeros((0, 3), np.int32)]).astype(np.int32),
        "mesh_pos": np.array([m.pos for m in meshes], float).reshape(-1, 3),
        "mesh_quat": np.array([m.quat for m in meshes], float).reshape(-1, 4),
        "mesh_scale": np.array([m.scale for m in meshes], float).reshape(-1, 3),
    }  # fmt: skip
    arrays.update(_pack_hulls([(m.hull_vert, m.hull_face, m.hull_edge) for m in meshes]))
    arrays.update(polygon_tables([m.poly for m in meshes]))
    sizes = {"nmesh": len(meshes), "nmeshvert": int(nv.sum()), "nmeshface": int(nf.sum())}
    return arrays, sizes


def mesh_geom_size(mesh: MeshAsset) -> tuple[np.ndarray, float, np.ndarray]:
    """(geom_size (3,), geom_rbound, geom_aabb (6,) = centre, half-size) of a type="mesh" geom, in its frame."""
    aamm = mesh.aamm
    size = np.maximum(np.abs(aamm[:3]), np.abs(aamm[3:]))
    rbound = float(np.sqrt(np.sum(size * size)))
    aabb = np.concatenate([(aamm[3:] + aamm[:3]) / 2, (aamm[3:] - aamm[:3]) / 2])
    return size, rbound, aabb


def mesh_geom_frame(pos, quat, mesh: MeshAsset, offset=None) -> tuple[np.ndarray, np.ndarray]:
    """Frame of a geom that uses `mesh`: the geom's own (pos, quat) composed with the mesh frame
    (mesh.pos, mesh.quat), shifted by `offset` (in the mesh frame: the aabb centre returned by `fit_geom` with
    fitaabb)."""
    mpos = mesh.pos if offset is None else mesh.pos + _quat_to_mat(mesh.quat) @ np.asarray(offset, float)
    quat = np.asarray(quat, float)
    gpos = np.asarray(pos, float) + _quat_to_mat(quat) @ mpos
    return gpos, quat_mul(np.asarray(quat, float), np.asarray(mesh.quat, float))


def mesh_geom_inertia(mesh: MeshAsset, density: float | None = None, mass: float | None = None,
                      shellinertia: bool = False):  # fmt: skip
    """Mass properties of a type="mesh" geom, in the geom frame (= mesh frame).

    Returns (mass, com (3,) = 0, inertia (3,) principal, quat (4,) = identity). `mass` (if given) overrides
    `density`. The inertia is that of the mesh's equivalent inertia box (as MuJoCo computes it). MuJoCo
    rejects geom shellinertia for meshes (use the mesh's inertia="shell").
    """
    if shellinertia:
        raise MJCFError("for mesh geoms, inertia should be specified in the mesh asset")
    if mass is not None and mass >= 0:
        density = mass / mesh.volume
    if density is None:
        density = 1000.0
    m = density * mesh.volume
    b2 = mesh.boxsz * mesh.boxsz  # MuJoCo goes through the equivalent inertia box
    inertia = m * np.array([b2[1] + b2[2], b2[0] + b2[2], b2[0] + b2[1]]) / 3
    return m, np.zeros(3), inertia, np.array([1.0, 0.0, 0.0, 0.0])


def fit_geom(mesh: MeshAsset, gtype: int, fitscale: float = 1.0, fitaabb: bool = False):
    """Size of a primitive geom fitted to a mesh (geom with mesh="..." and a primitive type).

    Returns (size (3,), offset (3,)): pass offset to `mesh_geom_frame` (non-zero only with fitaabb)."""
    size = np.zeros(3)
    offset = np.zeros(3)
    if not fitaabb:
        b = mesh.boxsz
        if gtype == GEOM_SPHERE:
            size[0] = (b[0] + b[1] + b[2]) / 3
        elif gtype == GEOM_CAPSULE:
            size[0] = (b[0] + b[1]) / 2
            size[1] = max(0.0, b[2] - size[0] / 2)
        elif gtype == GEOM_CYLINDER:
            size[0] = (b[0] + b[1]) / 2
            size[1] = b[2]
        elif gtype in (GEOM_ELLIPSOID, GEOM_BOX):
            size[:] = b
        else:
            raise MJCFError(f"invalid geom type in fitting mesh {mesh.name}")
    else:  # MuJoCo 4.0: fit the axis-aligned bounding box (in the mesh frame)
        aamm = mesh.aamm
        offset = (aamm[:3] + aamm[3:]) / 2
        half = aamm[3:] - offset
        if gtype == GEOM_SPHERE:
            size[0] = half.max()
        elif gtype == GEOM_CAPSULE:
            size[0] = max(half[0], half[1])
            size[1] = max(0.0, half[2] - size[0])
        elif gtype == GEOM_CYLINDER:
            size[0] = max(half[0], half[1])
            size[1] = half[2]
        elif gtype in (GEOM_ELLIPSOID, GEOM_BOX):
            size[:] = half
        else:
            raise MJCFError(f"invalid fittype in mesh {mesh.name}")
    return size * fitscale, offset
