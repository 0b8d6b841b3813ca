"""Points and elements of a <flexcomp type="mesh" file=...> (MuJoCo 4.0's mjCFlexcomp::MakeMesh) and of a
<flexcomp type="gmsh" file=...> (`read_gmsh`: GMSH 4.1, ASCII or binary, and ASCII 2.2), before the flexcomp's
scale and pose; host numpy, checked field by field against `mujoco` in tests/test_flex_mesh.py.

    point, element = mesh_shape(vert, face, dim, origin)   # point (npnt, 3), element (nelem, dim + 1)

The file is read as a mesh asset is (mjcf/mesh.py's STL and OBJ readers: float32 vertices, OBJ polygons
triangulated), with exactly repeated vertices merged (first occurrences kept, in order), as MuJoCo's flexcomp loads
it; no centring, scaling or inertial frame. Then:
  dim 1   an edge (f0, f1) of each triangle (f0, f1, f2) (a rope written as degenerate triangles);
  dim 2   the triangles;
  dim 3   the `origin` first (required), then one tetrahedron (origin, f0, f1, f2) per triangle whose (f0, f1, f2)
          seen from the origin has a positive volume ((f0 - o) x (f1 - o) . (f2 - o) >= mjMINVAL): a star of
          the surface around the origin, no tetrahedralisation.
Points no element uses are dropped afterwards by the caller (as for type="direct").
"""

from __future__ import annotations

import os
import struct

import numpy as np

from mjx_lite.mjcf import mesh as _mesh
from mjx_lite.mjcf.spec import MJCFUnsupportedError

MINVAL = 1e-15  # mjMINVAL


def read_file(file: str, model_dir: str, meshdir: str, assets, strippath: bool, elem) -> bytes:
    """The bytes of a mesh or GMSH file, found as a <mesh file> is (meshdir, the assets, the model's directory)."""
    return _mesh.read_asset_file(file, model_dir, meshdir, assets, strippath, elem)


def read(file: str, read_bytes, elem) -> tuple[np.ndarray, np.ndarray]:
    """(vert float64 (n, 3) (float32 values), face int64 (m, 3)) of the STL or OBJ file `file` (its bytes from
    read_bytes(file)), repeated vertices merged; MJCFError (at `elem`) for legacy MSH files, other formats,
    unreadable files and meshes without faces."""
    ext = os.path.splitext(file)[1].lower()
    if ext == ".msh":
        raise _mesh._err(elem, "legacy MSH files are not supported in flexcomp", "file")
    data = read_bytes(file)
    reader = {".stl": _mesh.read_stl, ".obj": _mesh.read_obj}.get(ext)
    if reader is None:
        raise _mesh._err(elem, f"no decoder found for mesh file '{file}'", "file")
    vert, face = reader(data, True, file, elem)
    if not len(vert) or face is None or not len(face):
        raise _mesh._err(elem, "Vertex and face data required", "file")
    vert, face = _mesh.merge_vertices(vert, face)
    return np.asarray(vert, np.float64).reshape(-1, 3), np.asarray(face, np.int64).reshape(-1, 3)


def mesh_shape(vert: np.ndarray, face: np.ndarray, dim: int, origin) -> tuple[np.ndarray, np.ndarray]:
    """(point (npnt, 3), element (nelem, dim + 1)) of a mesh flexcomp from the mesh's vert (n, 3) and face (m, 3);
    `origin` (3,) is the dim 3 star's centre (point 0)."""
    if dim == 1:
        return vert, face[:, :2].copy()
    if dim == 2:
        return vert, face.copy()
    o = np.asarray(origin, float).reshape(3)
    point = np.concatenate([o[None], vert])
    elem = []
    for f in face + 1:
        e1, e2, e3 = (point[f[k]] - o for k in range(3))
        normal = (e1[1] * e2[2] - e1[2] * e2[1], e1[2] * e2[0] - e1[0] * e2[2], e1[0] * e2[1] - e1[1] * e2[0])
        if normal[0] * e3[0] + normal[1] * e3[1] + normal[2] * e3[2] < MINVAL:
            continue
        elem.append((0, int(f[0]), int(f[1]), int(f[2])))
    return point, np.array(elem, np.int64).reshape(-1, 4)


# ---------------------------------------------------------------------------------------------------------
# GMSH (type="gmsh"): files of format 4.1 (ASCII or binary; one node block, one element block) and ASCII 2.2, as
# MuJoCo 4.0 reads them


class _Tokens:
    """Whitespace-separated numbers of a file section, read one at a time (a C++ stream's >>)."""

    def __init__(self, text: str, err):
        self.tok, self.i, self.err = text.split(), 0, err

    def take(self, kind, msg: str):
        if self.i >= len(self.tok):
            raise self.err(msg)
        t = self.tok[self.i]
        self.i += 1
        try:
            return kind(t)
        except ValueError:
            raise self.err(msg) from None


def _section(text: str, begin: str, end: str, err) -> str:
    b, e = text.find(begin), text.find(end)
    if b < 0:
        raise err(f"GMSH file missing {begin}")
    if e < b + len(begin):
        raise err(f"GMSH file missing {end} after {begin}")
    return text[b + len(begin) : e]


def read_gmsh(data: bytes, file: str, elem) -> tuple[np.ndarray, np.ndarray, int]:
    """(points (n, 3), elements (m, dim + 1), dim) of the GMSH file `file` with bytes `data` (ASCII 4.1 and 2.2,
    binary 4.1; one node block and one element block; 1-D meshes are an error, as in MuJoCo 4.0; 2.2 node
    coordinates are read as float32, as MuJoCo 4.0 does). MJCFError with MuJoCo's messages for malformed files;
    MJCFUnsupportedError for binary 2.2 files."""

    def err(msg):
        return _mesh._err(elem, msg, "file")

    if not data.startswith(b"$MeshFormat"):  # (MuJoCo 4.0 then finds no decoder for the file)
        raise err(f"no decoder found for mesh file '{file}'")
    head = data[11:].split(maxsplit=2)
    try:
        version, binary = float(head[0]), int(head[1])
    except (IndexError, ValueError):
        raise err("Could not read GMSH file header") from None
    if round(100 * version) not in (220, 410):
        raise err("Only GMSH file format versions 4.1 and 2.2 are supported")
    if binary and round(100 * version) == 220:
        raise MJCFUnsupportedError("a binary GMSH 2.2 file in <flexcomp type='gmsh'> is not supported by mjx_lite "
                                   "(ASCII 2.2 and ASCII or binary 4.1 are)", *_mesh._where(elem), "file")  # fmt: skip
    if binary:
        return _binary41(data, err)
    text = data.decode("latin-1")
    nodes = _Tokens(_section(text, "$Nodes", "$EndNodes", err), err)
    elems = _Tokens(_section(text, "$Elements", "$EndElements", err), err)
    if round(100 * version) == 410:
        nblock, nnode, mintag, maxtag = (nodes.take(int, "Error reading Nodes header") for _ in range(4))
        dim, _, _, ninblock = (nodes.take(int, "Error reading Nodes header") for _ in range(4))
        if nblock != 1 or nnode != ninblock:
            raise err("All nodes must be in single block")
        if maxtag != ninblock:
            raise err("Maximum number of nodes must be equal to number of nodes in a block")
        if dim < 1 or dim > 3:
            raise err("Entity must be 1D, 2D or 3D")
        if dim == 1:
            raise err("GMSH decoder: 1D meshes are not supported")
        for i in range(nnode):
            if nodes.take(int, "Error reading node tags") != i + mintag:
                raise err("Node tags must be sequential")
        point = [nodes.take(float, "Error reading node coordinates") for _ in range(3 * nnode)]
        nblock, nel, _, _ = (elems.take(int, "Error reading Elements header") for _ in range(4))
        edim, _, etype, ninblock = (elems.take(int, "Error reading Elements header") for _ in range(4))
        if nblock != 1 or nel != ninblock:
            raise err("All elements must be in single block")
        if edim != dim:
            raise err("Inconsistent dimensionality in Elements")
        if etype != {1: 1, 2: 2, 3: 4}[dim]:
            raise err("Element type inconsistent with dimensionality")
        element = []
        for _ in range(nel):
            elems.take(int, "Error reading Elements")
            element += [elems.take(int, "Error reading Elements") - mintag for _ in range(dim + 1)]
    else:
        nnode = nodes.take(int, "Invalid node header")
        point = []
        for _ in range(nnode):
            nodes.take(int, "Error reading node tags")
            point += [float(np.float32(nodes.take(float, "Error reading node coordinates"))) for _ in range(3)]
        nel = elems.take(int, "Invalid elements header")
        element, dim = [], 0
        for i in range(nel):
            _, etype, ntags = (elems.take(int, "Error reading Elements") for _ in range(3))
            if i == 0:
                dim = {2: 2, 4: 3}.get(etype, 0)
                if not dim:
                    raise err("Invalid number of node tags")
            if ntags > 0:  # (MuJoCo reads two tags, whatever their number)
                elems.take(int, "Error reading Elements"), elems.take(int, "Error reading Elements")
            for _ in range(dim + 1):
                tag = elems.take(int, "Error reading Elements")
                if tag > nnode or tag < 1:
                    raise err("Invalid node tag")
                element.append(tag - 1)
    return np.asarray(point, float).reshape(-1, 3), np.asarray(element, np.int64).reshape(-1, dim + 1), dim


def _binary41(data: bytes, err) -> tuple[np.ndarray, np.ndarray, int]:
    """A binary GMSH 4.1 file (little-endian): per section a 52-byte header (numEntityBlocks, numNodes / numElements,
    min tag, max tag as uint64; entityDim, entityTag, parametric / elementType as int32; the block's count as uint64),
    then node tags (uint64) and coordinates (float64), or per element its tag and dim + 1 node tags (uint64)."""

    def section(begin: bytes, end: bytes) -> bytes:
        b, e = data.find(begin), data.find(end)
        if b < 0:
            raise err(f"GMSH file missing {begin.decode()}")
        if e < b + len(begin) + 1:
            raise err(f"GMSH file missing {end.decode()} after {begin.decode()}")
        return data[b + len(begin) + 1 : e]

    nodes, elems = section(b"$Nodes", b"$EndNodes"), section(b"$Elements", b"$EndElements")
    if len(nodes) < 52:
        raise err("Invalid nodes header")
    nblock, nnode, mintag, _, dim, _, _, ninblock = struct.unpack_from("<QQQQiiiQ", nodes)
    if nblock != 1 or nnode != ninblock:
        raise err("All nodes must be in single block")
    if dim < 1 or dim > 3:
        raise err("Entity must be 1D, 2D or 3D")
    if dim == 1:
        raise err("GMSH decoder: 1D meshes are not supported")
    if len(nodes) < 52 + 32 * nnode:
        raise err("Insufficient byte size of Nodes")
    tags = np.frombuffer(nodes, "<u8", nnode, 52)
    if np.any(tags != mintag + np.arange(nnode, dtype=np.uint64)):
        raise err("Node tags must be sequential")
    point = np.frombuffer(nodes, "<f8", 3 * nnode, 52 + 8 * nnode).astype(float).reshape(-1, 3)
    if len(elems) < 52:
        raise err("Invalid elements header")
    nblock, nel, _, _, edim, _, etype, ninblock = struct.unpack_from("<QQQQiiiQ", elems)
    if nblock != 1 or nel != ninblock:
        raise err("All elements must be in single block")
    if edim != dim:
        raise err("Inconsistent dimensionality in Elements")
    if etype != {2: 2, 3: 4}[dim]:
        raise err("Element type inconsistent with dimensionality")
    if len(elems) < 52 + 8 * (dim + 2) * nel:
        raise err("Insufficient byte size of Elements")
    rows = np.frombuffer(elems, "<u8", (dim + 2) * nel, 52).reshape(nel, dim + 2)
    element = rows[:, 1:].astype(np.int64) - int(mintag)
    return point, element, dim
