"""Oracle tests of mesh and height-field assets (mjx_lite/mjcf/mesh.py, hfield.py) against MuJoCo 4.0."""

from __future__ import annotations

import glob
import os
import struct
import zlib

import mujoco
import numpy as np
import pytest

from mjx_lite.mjcf import hfield as H  # noqa: N812
from mjx_lite.mjcf import mesh as M  # noqa: N812
from mjx_lite.mjcf.inertia import quat_mul
from mjx_lite.mjcf.spec import Element, MJCFError
from tests import oracle

# ---- tolerances ----
F32_RTOL = 2.0**-23  # MuJoCo stores mesh_vert as float32: one ulp relative to the mesh extent
POS_RTOL = 1e-10  # centre of mass (float64 sums over up to ~15k faces, same order as MuJoCo), relative to extent
MASS_RTOL = 1e-12  # volume/area: float64 round-off, sums in MuJoCo's order
INERTIA_RTOL = 1e-6  # inertia tensor, relative to its largest eigenvalue
# MuJoCo 4.0's mesh Jacobi eigensolver stops with off-diagonal residuals up to 1e-7 of the largest eigenvalue
# (mesh.eig3 follows that rule, test_mesh_eigensolver_tolerances); where the inertia differs in round-off the
# principal axes then agree to about AXIS_RES / relative eigenvalue gap.
AXIS_RES = 1e-7
AXIS_MAX = 1e-3  # above this the axes are ill-defined (near-symmetric meshes): compare rotation invariants only
HFIELD_ATOL = 0.0  # hfield data: same float32 operations as MuJoCo

SITE = oracle.SITE_PACKAGES
MJX = oracle.MJX_TEST_DATA
STL_REF = sorted(glob.glob(os.path.join(MJX, "meshes", "*.stl"))) + sorted(
    glob.glob(os.path.join(MJX, "barkour_v0", "assets", "*.stl"))
)
OBJ_REF = sorted(glob.glob(os.path.join(MJX, "shadow_hand", "assets", "*.obj")))
DOG_REF = sorted(glob.glob(os.path.join(oracle.DM_SUITE, "dog_assets", "*.stl")))
SMALL_REF = [p for p in STL_REF + OBJ_REF if os.path.getsize(p) < 40_000]


# ----------------------------------------------------------------------------------------------------------
# helpers


def _elem(tag: str, **attrs) -> Element:
    return Element(tag=tag, attrs=attrs, children=[], file="test.xml", line=1, explicit=set(attrs))


def _mj_mesh_model(mesh_attrs: str, assets: dict | None = None, geom_attrs: str = 'type="mesh" density="1000"',
                   compiler: str = "") -> mujoco.MjModel:  # fmt: skip
    xml = (
        f"<mujoco>{compiler}<asset><mesh name='m' {mesh_attrs}/></asset><worldbody><body><freejoint/>"
        f"<geom mesh='m' {geom_attrs}/></body></worldbody></mujoco>"
    )
    return mujoco.MjModel.from_xml_string(xml, assets or {})


def _quat_dist(a, b) -> float:
    return float(min(np.abs(np.asarray(a) - b).max(), np.abs(np.asarray(a) + b).max()))


def _tensor(inertia, quat) -> np.ndarray:
    r = M._quat_to_mat(quat)
    return r @ np.diag(inertia) @ r.T


def _axis_tol(a: M.MeshAsset) -> float:
    """Tolerance on the principal axes (quaternion components) given the relative eigenvalue gap."""
    e = a.inertia
    relgap = min(abs(e[0] - e[1]), abs(e[1] - e[2])) / e[0]
    return AXIS_RES / max(relgap, 1e-300)


def _check_mesh(a: M.MeshAsset, m: mujoco.MjModel, same_order: bool = True):
    """Compare our processed mesh (+ a density-1000 mesh geom) with MuJoCo's compiled model (one mesh)."""
    assert a.vert.shape == m.mesh_vert.shape and a.face.shape == m.mesh_face.shape
    extent = float(np.abs(m.mesh_vert).max())
    if same_order:
        np.testing.assert_array_equal(a.face, m.mesh_face)
    np.testing.assert_allclose(a.pos, m.mesh_pos[0], rtol=0, atol=POS_RTOL * extent)
    # principal axes, with a tolerance set by the eigenvalue gap
    axis_tol = _axis_tol(a)
    if axis_tol < AXIS_MAX:
        assert _quat_dist(a.quat, m.mesh_quat[0]) < axis_tol
        vtol = extent * (2 * F32_RTOL + 2 * axis_tol)
        if same_order:
            np.testing.assert_allclose(a.vert, m.mesh_vert, rtol=0, atol=vtol)
        size, rbound, aabb = M.mesh_geom_size(a)
        np.testing.assert_allclose(size, m.geom_size[0], rtol=0, atol=vtol)
        np.testing.assert_allclose(rbound, m.geom_rbound[0], rtol=0, atol=2 * vtol)
        np.testing.assert_allclose(aabb, m.geom_aabb[0], rtol=0, atol=vtol)
    # rotation invariants: distances of the vertices from the centre of mass
    np.testing.assert_allclose(np.sort(np.linalg.norm(a.vert, axis=1)), np.sort(np.linalg.norm(m.mesh_vert, axis=1)),
                               rtol=0, atol=4 * F32_RTOL * extent)  # fmt: skip
    # mass properties of the geom (the body holds just this geom at its origin)
    mass, com, inertia, quat = M.mesh_geom_inertia(a, density=1000.0)
    np.testing.assert_allclose(mass, m.body_mass[1], rtol=MASS_RTOL)
    np.testing.assert_allclose(m.body_ipos[1], a.pos, rtol=0, atol=POS_RTOL * extent)
    ours = _tensor(inertia, quat_mul(a.quat, quat))
    theirs = _tensor(m.body_inertia[1], m.body_iquat[1])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=INERTIA_RTOL * np.abs(m.body_inertia[1]).max())


def _ref_mj(path: str, inertia: str) -> mujoco.MjModel:
    ext = path.rsplit(".", 1)[1]
    scale = "0.001 0.001 0.001" if ext == "obj" else "1 1 1"
    name = "a." + ext
    return _mj_mesh_model(f'file="{name}" scale="{scale}" inertia="{inertia}"', {name: open(path, "rb").read()})


def _ref_ours(path: str, inertia: str) -> M.MeshAsset:
    ext = path.rsplit(".", 1)[1]
    scale = np.full(3, 0.001) if ext == "obj" else np.ones(3)
    name = "a." + ext
    return M.load_mesh(_elem("mesh", file=name, scale=scale, inertia=inertia), assets={name: open(path, "rb").read()})


def _ref_case(path: str, inertia: str):
    return _ref_ours(path, inertia), _ref_mj(path, inertia)


# ----------------------------------------------------------------------------------------------------------
# reference meshes


@pytest.mark.parametrize("path", STL_REF + OBJ_REF, ids=os.path.basename)
def test_reference_mesh_default_inertia(path):
    a, m = _ref_case(path, "legacy")  # MuJoCo 4.0's default mesh inertia
    _check_mesh(a, m)


@pytest.mark.parametrize("inertia", ["exact", "convex", "shell"])
@pytest.mark.parametrize("path", SMALL_REF, ids=os.path.basename)
def test_reference_mesh_inertia_types(path, inertia):
    try:
        m = _ref_mj(path, inertia)
    except ValueError:  # MuJoCo rejects the mesh (e.g. inconsistent orientation for 'exact'): so must we
        with pytest.raises(MJCFError):
            _ref_ours(path, inertia)
        return
    _check_mesh(_ref_ours(path, inertia), m)


@pytest.mark.slow
@pytest.mark.parametrize("inertia", ["legacy", "convex"])
def test_dog_meshes(inertia):
    assert DOG_REF, "dm_control dog assets not found"
    for path in DOG_REF:
        a, m = _ref_case(path, inertia)
        _check_mesh(a, m)


def test_hull_matches_mujoco_graph():
    """Hull vertices equal MuJoCo's convex-hull graph vertices; hull faces are outward and closed."""
    for path in SMALL_REF + [os.path.join(MJX, "barkour_v0", "assets", "foot.stl")]:
        a, m = _ref_case(path, "legacy")
        g = m.mesh_graph
        nv = g[0]
        assert set(g[2 + nv : 2 + 2 * nv].tolist()) == set(a.hull_vert.tolist())
        v = a.vert
        f = a.hull_face
        n = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
        inside = v[a.hull_vert].mean(0)
        assert np.all(np.einsum("ij,ij->i", n, v[f[:, 0]] - inside) > 0)
        # closed: every undirected edge in exactly two faces, Euler characteristic 2
        e = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
        _, cnt = np.unique(e, axis=0, return_counts=True)
        assert np.all(cnt == 2) and len(a.hull_edge) == len(cnt)
        assert len(a.hull_vert) - len(a.hull_edge) + len(f) == 2


def test_maxhullvert_limits_hull():
    path = os.path.join(MJX, "barkour_v0", "assets", "foot.stl")
    data = open(path, "rb").read()
    m = _mj_mesh_model('file="a.stl" maxhullvert="8"', {"a.stl": data})
    a = M.load_mesh(_elem("mesh", file="a.stl", maxhullvert=8), assets={"a.stl": data})
    # same number of hull vertices as MuJoCo (qhull's TA option); the chosen subset may differ between qhull builds
    assert len(a.hull_vert) == m.mesh_graph[0] == 8
    with pytest.raises(MJCFError):
        M.load_mesh(_elem("mesh", file="a.stl", maxhullvert=3), assets={"a.stl": data})


# ----------------------------------------------------------------------------------------------------------
# small meshes written here: binary STL, ASCII STL, OBJ, inline


TETRA_V = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * [1, 2, 3] + [0.3, 0.1, -0.2]
TETRA_F = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]
CUBE_V = np.array([[x, y, z] for x in (0, 1.5) for y in (0, 1) for z in (0, 0.5)]) - [0.2, 0.7, 0.1]
CUBE_Q = [[0, 1, 3, 2], [4, 6, 7, 5], [0, 4, 5, 1], [2, 3, 7, 6], [0, 2, 6, 4], [1, 5, 7, 3]]  # outward quads
CUBE_F = [[q[0], q[1], q[2]] for q in CUBE_Q] + [[q[0], q[2], q[3]] for q in CUBE_Q]


def _stl_binary(v, f) -> bytes:
    out = bytearray(80) + struct.pack("<I", len(f))
    for tri in f:
        out += struct.pack("<3f", 0, 0, 0)
        for i in tri:
            out += struct.pack("<3f", *v[i])
        out += b"\0\0"
    return bytes(out)


def _stl_ascii(v, f) -> bytes:
    s = "solid test\n"
    for tri in f:
        s += " facet normal 0 0 0\n  outer loop\n"
        s += "".join("   vertex {!r} {!r} {!r}\n".format(*map(float, np.float32(v[i]))) for i in tri)
        s += "  endloop\n endfacet\n"
    return (s + "endsolid test\n").encode()


def _obj(v, faces, extra="") -> bytes:
    s = "# test\n" + "".join("v {:.6f} {:.6f} {:.6f}\n".format(*p) for p in v) + extra
    s += "".join("f " + " ".join(str(i + 1) for i in f) + "\n" for f in faces)
    return s.encode()


@pytest.mark.parametrize("inertia", ["legacy", "exact", "convex", "shell"])
@pytest.mark.parametrize("shape", ["tetra", "cube"])
def test_stl_binary_and_ascii(shape, inertia):
    v, f = (TETRA_V, TETRA_F) if shape == "tetra" else (CUBE_V, CUBE_F)
    binary = _stl_binary(v, f)
    m = _mj_mesh_model(f'file="t.stl" inertia="{inertia}"', {"t.stl": binary})
    a = M.load_mesh(_elem("mesh", file="t.stl", inertia=inertia), assets={"t.stl": binary})
    _check_mesh(a, m)
    b = M.load_mesh(_elem("mesh", file="t.stl", inertia=inertia), assets={"t.stl": _stl_ascii(v, f)})
    _check_mesh(b, m)  # MuJoCo reads only binary STL: the ASCII file must give the same mesh


@pytest.mark.parametrize("inertia", ["legacy", "exact", "shell"])
def test_obj_quads_and_inline(inertia):
    data = _obj(CUBE_V, CUBE_Q)
    m = _mj_mesh_model(f'file="c.obj" inertia="{inertia}"', {"c.obj": data})
    a = M.load_mesh(_elem("mesh", file="c.obj", inertia=inertia), assets={"c.obj": data})
    _check_mesh(a, m)
    vert = " ".join(f"{x:.6f}" for x in CUBE_V.reshape(-1))
    face = " ".join(str(i) for i in np.reshape(CUBE_F, -1))
    m = _mj_mesh_model(f'vertex="{vert}" face="{face}" inertia="{inertia}"')
    a = M.load_mesh(_elem("mesh", name="m", vertex=np.array(vert.split(), float), face=np.array(face.split(), int),
                          inertia=inertia))  # fmt: skip
    _check_mesh(a, m)


def test_obj_polygons_groups_and_index_forms():
    n = 6
    ang = np.linspace(0, 2 * np.pi, n, endpoint=False)
    r = np.array([1, 1.3, 0.8, 1.1, 0.9, 1.2])
    top = np.c_[r * np.cos(ang), r * np.sin(ang), np.ones(n)]
    v = np.vstack([top * [1, 1, 0], top])
    faces = [list(range(n))[::-1], list(range(n, 2 * n))] + [[i, (i + 1) % n, n + (i + 1) % n, n + i] for i in range(n)]
    for inertia in ("exact", "legacy"):
        data = _obj(v, faces)
        m = _mj_mesh_model(f'file="p.obj" inertia="{inertia}"', {"p.obj": data})
        a = M.load_mesh(_elem("mesh", file="p.obj", inertia=inertia), assets={"p.obj": data})
        _check_mesh(a, m)  # tinyobjloader's triangulation of the hexagons, face for face
    # only the first group with faces is used; v/vt/vn and negative (relative) indices
    body = "".join("v {:.6f} {:.6f} {:.6f}\nvt 0.5 0.5\nvn 0 0 1\n".format(*p) for p in v)
    g1 = "".join("f " + " ".join(f"{i + 1}/1/{i + 1}" for i in f) + "\n" for f in faces[:4])
    g2 = "".join("f " + " ".join(f"{i - len(v)}//1" for i in f) + "\n" for f in faces[4:])
    data = ("o a\n" + body + g1 + "g b\n" + g2).encode()
    m = _mj_mesh_model('file="g.obj"', {"g.obj": data})
    a = M.load_mesh(_elem("mesh", file="g.obj"), assets={"g.obj": data})
    _check_mesh(a, m)
    data = (body + "o b\n" + g2).encode()
    m = _mj_mesh_model('file="h.obj"', {"h.obj": data})
    a = M.load_mesh(_elem("mesh", file="h.obj"), assets={"h.obj": data})
    _check_mesh(a, m)


def test_scale_refpos_refquat():
    data = _stl_binary(TETRA_V, TETRA_F)
    for attrs in ({"scale": [-1, 2, 0.5]}, {"scale": [0.3, 0.3, -0.3]}, {"refpos": [0.1, -0.2, 0.3]},
                  {"refquat": [0.9, 0.1, -0.3, 0.2], "scale": [1, 2, 3]}):  # fmt: skip
        xml = " ".join(f'{k}="{" ".join(map(str, val))}"' for k, val in attrs.items())
        m = _mj_mesh_model(f'file="t.stl" {xml}', {"t.stl": data})
        a = M.load_mesh(_elem("mesh", file="t.stl", **{k: np.array(val, float) for k, val in attrs.items()}),
                        assets={"t.stl": data})  # fmt: skip
        _check_mesh(a, m)
        np.testing.assert_array_equal(M.mesh_arrays([a])[0]["mesh_scale"][0], m.mesh_scale[0])


def test_inline_vertices_without_faces_use_hull():
    v = np.vstack([TETRA_V, TETRA_V[1:2], [[0.4, 0.5, 0.3]]])  # a repeated vertex and an interior point
    vert = " ".join(repr(float(x)) for x in v.reshape(-1))
    m = _mj_mesh_model(f'vertex="{vert}"')
    a = M.load_mesh(_elem("mesh", name="m", vertex=v.reshape(-1)))
    _check_mesh(a, m, same_order=False)
    np.testing.assert_array_equal(a.vert.shape, m.mesh_vert.shape)  # inline vertices are not merged

    def oriented(f):  # triangles up to cyclic rotation
        return {tuple(np.roll(t, -int(np.argmin(t)))) for t in np.asarray(f).tolist()}

    assert oriented(a.face) == oriented(m.mesh_face)
    np.testing.assert_array_equal(a.face, m.mesh_face)  # each starting at MuJoCo's corner (its qhull orientation swap)


def _thin_box(hy: float, phi: float) -> tuple[np.ndarray, np.ndarray]:
    """float32 corners of a 1 x hy x 0.01 (half-size) box turned by phi about z, with outward triangles."""
    corners = np.array([[sx, sy * hy, sz * 0.01] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)])
    c, s = np.cos(phi), np.sin(phi)
    v = (corners @ np.array([[c, s, 0], [-s, c, 0], [0, 0, 1]])).astype(np.float32)
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    face = np.array([t for a, b, cc, d in quads for t in ((a, b, cc), (a, cc, d))])
    vd = v.astype(float)
    nrm = np.cross(vd[face[:, 1]] - vd[face[:, 0]], vd[face[:, 2]] - vd[face[:, 0]])
    flip = np.einsum("ij,ij->i", nrm, vd[face].mean(1)) < 0
    face[flip] = face[flip][:, [0, 2, 1]]
    return v, face


# thin boxes whose principal frame straddles MuJoCo's mesh eigen-solver tolerances (1e-7 max|A|): an off-diagonal
# of 0.6e-7 max|A| (1.2e-7 of its pair's own diagonal) is left, one of 1.2e-7 max|A| rotated away; eigenvalues
# 0.6e-7 max|A| apart are left unsorted, 1.2e-7 apart sorted
@pytest.mark.parametrize("hy, phi", [(1.001, 6e-5), (1.001, 1.2e-4), (1 - 8e-8, 0.0), (1 - 1.2e-7, 0.0)])
def test_mesh_eigensolver_tolerances(hy, phi):
    v, face = _thin_box(hy, phi)
    vert = " ".join(repr(float(x)) for x in v.reshape(-1))
    m = _mj_mesh_model(f'vertex="{vert}" face="{" ".join(map(str, face.reshape(-1)))}"')
    a = M.load_mesh(_elem("mesh", name="m", vertex=v.reshape(-1).astype(float), face=face.reshape(-1)))
    assert _quat_dist(a.quat, m.mesh_quat[0]) < 1e-12
    _check_mesh(a, m)


def test_mesh_from_disk_with_meshdir(tmp_path):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "cube.obj").write_bytes(_obj(CUBE_V, CUBE_Q))
    xml = tmp_path / "model.xml"
    xml.write_text("<mujoco><compiler meshdir='assets'/><asset><mesh file='cube.obj'/></asset><worldbody><body>"
                   "<freejoint/><geom type='mesh' mesh='cube'/></body></worldbody></mujoco>")  # fmt: skip
    m = mujoco.MjModel.from_xml_path(str(xml))
    a = M.load_mesh(_elem("mesh", file="cube.obj"), model_dir=str(tmp_path), meshdir="assets")
    assert a.name == "cube" == mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_MESH, 0)
    _check_mesh(a, m)
    with pytest.raises(MJCFError, match="could not open"):
        M.load_mesh(_elem("mesh", file="missing.obj"), model_dir=str(tmp_path), meshdir="assets")


def test_errors():
    with pytest.raises(MJCFError, match="inconsistent orientation"):
        bad = [[0, 1, 2], [0, 1, 3], [0, 3, 2], [1, 2, 3]]
        M.load_mesh(_elem("mesh", vertex=TETRA_V.reshape(-1), face=np.reshape(bad, -1), inertia="exact"))
    with pytest.raises(MJCFError, match="at least 4 vertices"):
        M.load_mesh(_elem("mesh", vertex=TETRA_V[:3].reshape(-1)))
    with pytest.raises(MJCFError, match="neither a valid binary STL"):
        M.load_mesh(_elem("mesh", file="x.stl"), assets={"x.stl": b"garbage" * 20})
    with pytest.raises(MJCFError, match="unknown or unsupported mesh file"):
        M.load_mesh(_elem("mesh", file="x.ply"), assets={"x.ply": b""})
    with pytest.raises(MJCFError, match="inertia should be specified in the mesh"):
        a = M.load_mesh(_elem("mesh", vertex=TETRA_V.reshape(-1)))
        M.mesh_geom_inertia(a, 1000.0, shellinertia=True)


# ----------------------------------------------------------------------------------------------------------
# geom helpers


def test_mesh_geom_frame_and_mass():
    data = _stl_binary(TETRA_V, TETRA_F)
    m = _mj_mesh_model('file="t.stl"', {"t.stl": data}, 'type="mesh" mass="2.5" pos="0.1 0.2 0.3" euler="10 20 30"')
    a = M.load_mesh(_elem("mesh", file="t.stl"), assets={"t.stl": data})
    euler_q = quat_mul(quat_mul([np.cos(np.radians(5)), np.sin(np.radians(5)), 0, 0],
                                      [np.cos(np.radians(10)), 0, np.sin(np.radians(10)), 0]),
                          [np.cos(np.radians(15)), 0, 0, np.sin(np.radians(15))])  # fmt: skip
    pos, quat = M.mesh_geom_frame([0.1, 0.2, 0.3], euler_q, a)
    np.testing.assert_allclose(pos, m.geom_pos[0], atol=POS_RTOL * np.abs(TETRA_V).max())
    assert _quat_dist(quat, m.geom_quat[0]) < _axis_tol(a)
    mass, _, inertia, _ = M.mesh_geom_inertia(a, mass=2.5)
    np.testing.assert_allclose(mass, m.body_mass[1], rtol=MASS_RTOL)
    np.testing.assert_allclose(_tensor(inertia, quat), _tensor(m.body_inertia[1], m.body_iquat[1]),
                               atol=INERTIA_RTOL * m.body_inertia[1].max())  # fmt: skip


@pytest.mark.parametrize("fitaabb", [False, True])
@pytest.mark.parametrize("gtype", ["sphere", "capsule", "cylinder", "ellipsoid", "box"])
def test_fit_primitive_to_mesh(gtype, fitaabb):
    data = _stl_binary(CUBE_V, CUBE_F)
    compiler = "<compiler fitaabb='true'/>" if fitaabb else ""
    m = _mj_mesh_model('file="c.stl"', {"c.stl": data}, f'type="{gtype}" fitscale="1.1" pos="0.1 0.2 0.3"', compiler)
    a = M.load_mesh(_elem("mesh", file="c.stl"), assets={"c.stl": data})
    code = {"sphere": M.GEOM_SPHERE, "capsule": M.GEOM_CAPSULE, "cylinder": M.GEOM_CYLINDER,
            "ellipsoid": M.GEOM_ELLIPSOID, "box": M.GEOM_BOX}[gtype]  # fmt: skip
    size, offset = M.fit_geom(a, code, 1.1, fitaabb)
    np.testing.assert_allclose(size, m.geom_size[0], atol=1e-6)  # float32 vertices (fitaabb) / float64 boxsz
    pos, quat = M.mesh_geom_frame([0.1, 0.2, 0.3], [1, 0, 0, 0], a, offset)
    np.testing.assert_allclose(pos, m.geom_pos[0], atol=1e-6)
    assert _quat_dist(quat, m.geom_quat[0]) < _axis_tol(a)


def test_mesh_arrays_two_meshes():
    t = _stl_binary(TETRA_V, TETRA_F)
    c = _obj(CUBE_V, CUBE_Q)
    xml = ("<mujoco><asset><mesh name='t' file='t.stl'/><mesh name='c' file='c.obj'/></asset><worldbody>"
           "<geom type='mesh' mesh='t'/><geom type='mesh' mesh='c'/></worldbody></mujoco>")  # fmt: skip
    m = mujoco.MjModel.from_xml_string(xml, {"t.stl": t, "c.obj": c})
    meshes = [M.load_mesh(_elem("mesh", name="t", file="t.stl"), assets={"t.stl": t}),
              M.load_mesh(_elem("mesh", name="c", file="c.obj"), assets={"c.obj": c})]  # fmt: skip
    arrays, sizes = M.mesh_arrays(meshes)
    for k in ("nmesh", "nmeshvert", "nmeshface"):
        assert sizes[k] == getattr(m, k)
    for k in ("mesh_vertadr", "mesh_vertnum", "mesh_faceadr", "mesh_facenum", "mesh_face"):
        np.testing.assert_array_equal(arrays[k], getattr(m, k))
    np.testing.assert_allclose(arrays["mesh_vert"], m.mesh_vert, atol=2 * F32_RTOL * 2)
    ref = M.hull_tables(m.mesh_vert, m.mesh_vertadr, m.mesh_vertnum)
    for k in ("mesh_hullvertadr", "mesh_hullvertnum", "mesh_hullvert", "mesh_hullfacenum", "mesh_hulledgenum"):
        np.testing.assert_array_equal(arrays[k], ref[k])


def test_model_from_mujoco_gets_hull_tables():
    mjm = mujoco.MjModel.from_xml_path(os.path.join(MJX, "convex.xml"))
    m = oracle.model_from_mujoco(mjm)
    for i in range(mjm.nmesh):
        g = mjm.mesh_graph[mjm.mesh_graphadr[i] :]
        nv = g[0]
        ours = m.mesh_hullvert[m.mesh_hullvertadr[i] : m.mesh_hullvertadr[i] + m.mesh_hullvertnum[i]]
        assert set(ours.tolist()) == set(g[2 + nv : 2 + 2 * nv].tolist())
        assert m.mesh_hullfacenum[i] == g[1]


# ----------------------------------------------------------------------------------------------------------
# height fields


def _png(samples: np.ndarray, color: int, depth: int, palette: np.ndarray | None = None) -> bytes:
    """A PNG writer for the tests (every filter type used, rows cycling through 0..4)."""
    samples = np.asarray(samples)
    h, w = samples.shape[:2]
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    flat = samples.reshape(h, w * channels).astype(np.int64)
    if depth < 8:
        per = 8 // depth
        pad = (-flat.shape[1]) % per
        flat = np.concatenate([flat, np.zeros((h, pad), np.int64)], 1).reshape(h, -1, per)
        rows = np.zeros(flat.shape[:2], np.int64)
        for k in range(per):
            rows |= flat[:, :, k] << (8 - depth * (k + 1))
    elif depth == 8:
        rows = flat
    else:
        rows = np.stack([flat >> 8, flat & 0xFF], -1).reshape(h, -1)
    bpp = max(1, channels * depth // 8)
    raw = bytearray()
    prev = np.zeros(rows.shape[1], np.int64)
    for r in range(h):
        cur = rows[r]
        left = np.concatenate([np.zeros(bpp, np.int64), cur[:-bpp]])
        upleft = np.concatenate([np.zeros(bpp, np.int64), prev[:-bpp]])
        ftype = r % 5
        if ftype == 0:
            out = cur
        elif ftype == 1:
            out = cur - left
        elif ftype == 2:
            out = cur - prev
        elif ftype == 3:
            out = cur - (left + prev) // 2
        else:
            p = left + prev - upleft
            pa, pb, pc = np.abs(p - left), np.abs(p - prev), np.abs(p - upleft)
            out = cur - np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prev, upleft))
        raw += bytes([ftype]) + bytes((out & 0xFF).astype(np.uint8))
        prev = cur

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, 0))
    if palette is not None:
        out += chunk(b"PLTE", np.asarray(palette, np.uint8).tobytes())
    return out + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b"")


def _mj_hfield(attrs: str, assets=None) -> mujoco.MjModel:
    xml = f"<mujoco><asset><hfield name='h' {attrs} size='1 2 0.5 0.1'/></asset><worldbody><geom type='hfield' " \
          "hfield='h'/></worldbody></mujoco>"  # fmt: skip
    return mujoco.MjModel.from_xml_string(xml, assets or {})


def _check_hfield(h: H.HFieldAsset, m: mujoco.MjModel):
    arrays, sizes = H.hfield_arrays([h])
    assert sizes == {"nhfield": m.nhfield, "nhfielddata": m.nhfielddata}
    for k in ("hfield_nrow", "hfield_ncol", "hfield_adr"):
        np.testing.assert_array_equal(arrays[k], getattr(m, k))
    np.testing.assert_array_equal(arrays["hfield_size"], m.hfield_size)
    np.testing.assert_allclose(arrays["hfield_data"], m.hfield_data, rtol=0, atol=HFIELD_ATOL)
    size, rbound, aabb = H.hfield_geom_size(h)
    np.testing.assert_allclose(size, m.geom_size[0], rtol=1e-15)
    np.testing.assert_allclose(rbound, m.geom_rbound[0], rtol=1e-15)
    np.testing.assert_allclose(aabb, m.geom_aabb[0], rtol=1e-15)


SIZE = np.array([1, 2, 0.5, 0.1])


def test_hfield_inline_and_empty():
    m = _mj_hfield('nrow="2" ncol="3" elevation="1 2 3 4 5 7.5"')
    _check_hfield(
        H.load_hfield(_elem("hfield", nrow=2, ncol=3, elevation=np.array([1, 2, 3, 4, 5, 7.5]), size=SIZE)), m
    )
    m = _mj_hfield('nrow="2" ncol="2" elevation="3 3 3 3"')
    _check_hfield(H.load_hfield(_elem("hfield", nrow=2, ncol=2, elevation=np.full(4, 3.0), size=SIZE)), m)
    m = _mj_hfield('nrow="3" ncol="4"')
    _check_hfield(H.load_hfield(_elem("hfield", nrow=3, ncol=4, size=SIZE)), m)
    xml = "<mujoco><asset><hfield name='h' nrow='2' ncol='2' size='1 2 0.1 0.5'/></asset><worldbody>"
    m = mujoco.MjModel.from_xml_string(xml + "<geom type='hfield' hfield='h'/></worldbody></mujoco>")
    _check_hfield(H.load_hfield(_elem("hfield", nrow=2, ncol=2, size=np.array([1, 2, 0.1, 0.5]))), m)
    with pytest.raises(MJCFError):
        H.load_hfield(_elem("hfield", nrow=2, ncol=3, elevation=np.ones(5), size=SIZE))
    with pytest.raises(MJCFError):
        H.load_hfield(_elem("hfield", nrow=2, ncol=3, size=np.array([1, 1, 0, 1])))


@pytest.mark.parametrize(
    "color,depth",
    [(0, 8), (0, 16), (0, 1), (0, 2), (0, 4), (2, 8), (2, 16), (3, 8), (3, 4), (4, 8), (4, 16), (6, 8), (6, 16)],
)
def test_hfield_png(color, depth):
    rng = np.random.default_rng(color * 100 + depth)
    h, w = 7, 9
    channels = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}[color]
    palette = None
    if color == 3:
        palette = rng.integers(0, 256, (2**depth, 3))
    samples = rng.integers(0, 2**depth, (h, w, channels))
    data = _png(samples, color, depth, palette)
    m = _mj_hfield('file="a.png"', {"a.png": data})
    _check_hfield(H.load_hfield(_elem("hfield", file="a.png", size=SIZE), assets={"a.png": data}), m)


def test_hfield_reference_png_and_binary(tmp_path):
    path = os.path.join(MJX, "barkour_v0", "assets", "hfield_240_280.png")
    data = open(path, "rb").read()
    m = _mj_hfield('file="a.png"', {"a.png": data})
    _check_hfield(H.load_hfield(_elem("hfield", file="a.png", size=SIZE), assets={"a.png": data}), m)
    # MuJoCo's custom binary format, from disk
    elev = np.random.default_rng(0).normal(size=(4, 5)).astype(np.float32)
    (tmp_path / "h.bin").write_bytes(struct.pack("<2i", 4, 5) + elev.tobytes())
    (tmp_path / "m.xml").write_text("<mujoco><asset><hfield name='h' file='h.bin' size='1 2 0.5 0.1'/></asset>"
                                    "<worldbody><geom type='hfield' hfield='h'/></worldbody></mujoco>")  # fmt: skip
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "m.xml"))
    _check_hfield(H.load_hfield(_elem("hfield", file="h.bin", size=SIZE), model_dir=str(tmp_path)), m)


def test_hfield_arrays_two():
    a = H.load_hfield(_elem("hfield", name="a", nrow=2, ncol=3, size=SIZE))
    b = H.load_hfield(_elem("hfield", name="b", nrow=3, ncol=2, elevation=np.arange(6.0), size=SIZE))
    xml = ("<mujoco><asset><hfield name='a' nrow='2' ncol='3' size='1 2 0.5 0.1'/><hfield name='b' nrow='3' "
           "ncol='2' elevation='0 1 2 3 4 5' size='1 2 0.5 0.1'/></asset></mujoco>")  # fmt: skip
    m = mujoco.MjModel.from_xml_string(xml)
    arrays, sizes = H.hfield_arrays([a, b])
    assert sizes == {"nhfield": 2, "nhfielddata": m.nhfielddata}
    np.testing.assert_array_equal(arrays["hfield_adr"], m.hfield_adr)
    np.testing.assert_array_equal(arrays["hfield_data"], m.hfield_data)


@pytest.mark.parametrize("maxhullvert", [-1, 8, 12])
def test_hull_polygons_match_mujoco(maxhullvert):
    """mesh_polyvert: the same polygons as MuJoCo's (vertex cycles from the same start vertex; the list order is
    MuJoCo's hash-map order, not compared), on the reference STL meshes (the dodecahedron's float32 pentagons
    straddle normal bins and split into 14 polygons), a scaled one, a random point cloud and with maxhullvert."""
    from mjx_lite.mjcf.compile import load_mjcf_string
    from tests.oracle import mesh_polygons

    cloud = " ".join(f"{x:.5f}" for x in np.random.default_rng(0).normal(size=120) * 0.1)
    hv = "" if maxhullvert < 0 else f' maxhullvert="{maxhullvert}"'
    xml = f"""<mujoco><compiler meshdir="{os.path.join(MJX, "meshes")}"/><asset>
      <mesh name="d" file="dodecahedron.stl"{hv}/><mesh name="c" vertex="{cloud}"{hv}/>
      <mesh name="p" file="pyramid.stl"{hv}/><mesh name="t" file="tetrahedron.stl" scale="2 1 1"{hv}/></asset>
      <worldbody><geom type="mesh" mesh="d"/><geom type="mesh" mesh="c"/><geom type="mesh" mesh="p"/>
      <geom type="mesh" mesh="t"/></worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = load_mjcf_string(xml)
    assert maxhullvert > 0 or mjm.mesh_polynum[0] == 14
    for i in range(mjm.nmesh):
        assert mjm.mesh_polynum[i] > 0
        assert sorted(mesh_polygons(m, i)) == sorted(mesh_polygons(mjm, i)), i


def _fan_tetrahedron(seed: int) -> str:
    """Vertex text of a tetrahedron (randomly turned, vertices shuffled) with an inner vertex raised by 1e-5 of the
    size on each face: each face a fan of 3 triangles in one normal bin, merged back into a triangle polygon."""
    rng = np.random.default_rng(seed)
    t = np.array([[1, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]], float)
    q = rng.normal(size=4)
    rot = np.zeros(9)
    mujoco.mju_quat2Mat(rot, q / np.linalg.norm(q))
    pts = np.concatenate([t, [t[list(f)].mean(0) * (1 + 1e-5) for f in ([0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3])]])
    pts = (pts @ rot.reshape(3, 3).T * 0.1)[rng.permutation(8)]
    return " ".join(f"{x:.9f}" for x in pts.reshape(-1))


def test_hull_polygons_merged_fans_match_mujoco():
    """A polygon merged from a fan of hull triangles about an inner vertex whose boundary is a triangle (Menagerie's
    shadow_hand f_distal_pst has one) is MuJoCo's cycle, counter-clockwise about its outward normal (it was wound
    clockwise on every one of these meshes: its 3 boundary edges were read as stored, not walked)."""
    from mjx_lite.mjcf.compile import load_mjcf_string
    from tests.oracle import mesh_polygons

    for seed in range(6):
        xml = (f'<mujoco><asset><mesh name="f" vertex="{_fan_tetrahedron(seed)}"/></asset><worldbody>'
               '<geom type="mesh" mesh="f"/></worldbody></mujoco>')  # fmt: skip
        mjm, m = mujoco.MjModel.from_xml_string(xml), load_mjcf_string(xml)
        assert mjm.mesh_polynum[0] >= 4
        assert sorted(mesh_polygons(m, 0)) == sorted(mesh_polygons(mjm, 0)), seed
