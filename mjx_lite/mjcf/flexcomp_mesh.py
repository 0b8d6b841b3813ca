"""Points and elements of a <flexcomp type="mesh" file=...> (MuJoCo 4.0's mjCFlexcomp::MakeMesh), before the
flexcomp's scale and pose; host numpy, checked field by field against `mujoco` in tests/test_flex_mesh.py.

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

import numpy as np

from mjx_lite.mjcf import mesh as _mesh

MINVAL = 1e-15  # mjMINVAL


def read(file: str, model_dir: str, meshdir: str, assets, strippath: bool, elem) -> tuple[np.ndarray, np.ndarray]:
    """(vert float64 (n, 3) (float32 values), face int64 (m, 3)) of the STL or OBJ file `file`, repeated vertices
    merged; MJCFError (at `elem`) for legacy MSH files, other formats, unreadable files and meshes without faces."""
    ext = os.path.splitext(file)[1].lower()
    if ext == ".msh":
        raise _mesh._err(elem, "legacy MSH files are not supported in flexcomp", "file")
    data = _mesh.read_asset_file(file, model_dir, meshdir, assets, strippath, elem)
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
