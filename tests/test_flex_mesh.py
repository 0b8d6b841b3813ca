"""<flexcomp type="mesh" file=...> against MuJoCo 4.0: ropes (dim 1: an edge of each triangle), surfaces (dim 2: the
triangles) and soft bodies (dim 3: tetrahedra from `origin` to each outward triangle) from OBJ and STL files written
here; every compiled field (tests/oracle.compare_models) and mj_forward (float64, 1e-9); the errors MuJoCo gives."""

import struct

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import oracle
from tests.test_flex_types import _forward_both, _state

NOCON = '<contact contype="0" conaffinity="0"/>'

# an octahedron (outward windings) with an unused vertex (7) and a repeat of vertex 1 (8), which MuJoCo merges
OCT_V = [(0.1, 0, 0), (-0.1, 0, 0), (0, 0.1, 0), (0, -0.1, 0), (0, 0, 0.1), (0, 0, -0.1), (5, 5, 5), (0.1, 0, 0)]
OCT_F = [(1, 3, 5), (3, 2, 5), (2, 4, 5), (4, 8, 5), (3, 1, 6), (2, 3, 6), (4, 2, 6), (1, 4, 6)]


def _obj(verts, faces) -> str:
    return "".join(f"v {x} {y} {z}\n" for x, y, z in verts) + "".join(
        "f " + " ".join(str(i) for i in f) + "\n" for f in faces)  # fmt: skip


def _grid_obj(n=4, h=0.06) -> str:
    """An n x n grid of quads (the reader triangulates them), slightly wavy in z."""
    verts = [(h * i, h * j, 0.004 * ((i + j) % 2)) for i in range(n) for j in range(n)]
    faces = [(i * n + j + 1, (i + 1) * n + j + 1, (i + 1) * n + j + 2, i * n + j + 2)
             for i in range(n - 1) for j in range(n - 1)]  # fmt: skip
    return _obj(verts, faces)


def _tris(verts, faces):
    return [[verts[i - 1] for i in f] for f in faces]


def _stl_binary(tris) -> bytes:
    out = b"mjx_lite test".ljust(80, b" ") + struct.pack("<I", len(tris))
    for t in tris:
        out += struct.pack("<12fH", 0, 0, 0, *np.asarray(t, float).reshape(-1), 0)
    return out


# a rope as degenerate triangles (i, i + 1, i + 1), as MuJoCo reads a dim 1 mesh
ROPE_V = [(0.05 * i, 0.01 * (i % 2), 0) for i in range(5)]
ROPE_F = [(i + 1, i + 2, i + 2) for i in range(4)]

# GMSH (ASCII): tetrahedra in format 4.1 (node tags from 11, an unused node), a 2.2 surface (float32 coordinates, one
# element with tags), a 4.1 rope (MuJoCo 4.0 refuses 1-D GMSH meshes)
GMSH41_TETS = """$MeshFormat
4.1 0 8
$EndMeshFormat
$Nodes
1 6 11 6
3 1 0 6
11
12
13
14
15
16
0 0 0
.1 0 0
0 .1 0
0 0 .1
.1 .1 .1
9 9 9
$EndNodes
$Elements
1 2 1 2
3 1 4 2
1 11 12 13 14
2 12 13 14 15
$EndElements
"""
GMSH22_SURFACE = """$MeshFormat
2.2 0 8
$EndMeshFormat
$Nodes
5
1 0 0 0
2 .1 0 0
3 0 .1 0
4 .1 .1 .02
5 7 7 7
$EndNodes
$Elements
2
1 2 2 0 1 1 2 3
2 2 0 2 3 4
$EndElements
"""
GMSH41_ROPE = """$MeshFormat
4.1 0 8
$EndMeshFormat
$Nodes
1 4 1 4
1 1 0 4
1
2
3
4
0 0 0
.05 0 .01
.1 0 0
.15 .01 0
$EndNodes
$Elements
1 3 1 3
1 1 1 3
1 1 2
2 2 3
3 3 4
$EndElements
"""

def _gmsh41_binary(points, elements, mintag: int, dim: int = 3, etype: int = 4) -> bytes:
    """A little-endian binary GMSH 4.1 file: one node block, one element block."""
    out = b"$MeshFormat\n4.1 1 8\n" + struct.pack("<i", 1) + b"\n$EndMeshFormat\n$Nodes\n"
    n = len(points)
    out += struct.pack("<QQQQiiiQ", 1, n, mintag, mintag + n - 1, dim, 1, 0, n)
    out += struct.pack(f"<{n}Q", *range(mintag, mintag + n)) + np.asarray(points, "<f8").tobytes()
    out += b"\n$EndNodes\n$Elements\n" + struct.pack("<QQQQiiiQ", 1, len(elements), 1, len(elements), dim, 1, etype,
                                                        len(elements))  # fmt: skip
    for i, e in enumerate(elements):
        out += struct.pack(f"<{len(e) + 1}Q", i + 1, *e)
    return out + b"\n$EndElements\n"


BIN_PTS = [(0, 0, 0), (0.1, 0, 0), (0, 0.1, 0), (0, 0, 0.1), (0.1, 0.1, 0.1), (0.12, -0.03, 0.05)]
BIN_TETS = [(3, 4, 5, 6), (4, 5, 6, 7), (3, 4, 6, 8)]

FILES = {
    "oct.obj": _obj(OCT_V, OCT_F),
    "grid.obj": _grid_obj(),
    "oct.stl": _stl_binary(_tris(OCT_V, OCT_F)),
    "rope.obj": _obj(ROPE_V, ROPE_F),
    "oct.ply": "ply\n",  # (a format MuJoCo has no decoder for)
    "tets41.msh": GMSH41_TETS,
    "surface22.msh": GMSH22_SURFACE,
    "rope41.msh": GMSH41_ROPE,
    "binary41.msh": _gmsh41_binary(BIN_PTS, BIN_TETS, mintag=3),
    "binary22.msh": GMSH22_SURFACE.replace("2.2 0 8", "2.2 1 8"),
    "v3.msh": GMSH41_TETS.replace("4.1 0 8", "3.0 0 8"),
    "bad.msh": "hello\n",
    "nonodes.msh": GMSH41_TETS[: GMSH41_TETS.index("$Nodes")] + GMSH41_TETS[GMSH41_TETS.index("$Elements") :],
    "twoblocks.msh": GMSH41_TETS.replace("1 6 11 6\n3 1 0 6", "2 6 11 6\n3 1 0 6"),
}


@pytest.fixture(scope="module")
def meshdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("flexmesh")
    for name, data in FILES.items():
        (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(d)


def _scene(meshdir: str, flexcomp: str, plane: bool = False, euler: str = "10 20 30") -> str:
    floor = '<geom type="plane" size="1 1 .1"/>' if plane else ""
    return (f'<mujoco><compiler meshdir="{meshdir}"/><option timestep="0.002"/><worldbody>{floor}'
            f'<body name="b" pos=".1 .2 .5" euler="{euler}">{flexcomp}</body></worldbody></mujoco>')  # fmt: skip


def _fc(attrs: str, kids: str = NOCON) -> str:
    return f'<flexcomp name="f" type="mesh" {attrs} mass=".3" radius=".005">{kids}</flexcomp>'


COMPILE = {
    "rope": _fc('file="rope.obj" dim="1" pos="0 .1 0"', NOCON + '<edge stiffness="20" damping=".1"/><pin id="0"/>'),
    "oct_edges": _fc('file="oct.obj" dim="1"', NOCON + '<edge equality="true"/>'),  # (vertices 5, 6 unused)
    "oct_surface": _fc('file="oct.obj" dim="2" scale="1 2 1" quat="1 .2 0 .1"', NOCON + '<edge equality="true"/>'),
    "oct_solid": _fc('file="oct.obj" dim="3" origin=".01 .02 .03" scale="1 2 1" euler="0 0 30"',
                     NOCON + '<elasticity young="1e4" poisson=".3" damping=".01"/><pin id="2"/>'),
    # an origin outside the octahedron: only the triangles facing away from it make tetrahedra
    "oct_solid_offcentre": _fc('file="oct.obj" dim="3" origin="0 0 -.3"', NOCON + '<elasticity young="1e4"/>'),
    "grid_quads": _fc('file="grid.obj" dim="2" pos="-.1 -.1 0"',
                      NOCON + '<elasticity young="3e3" poisson=".2" thickness=".01" elastic2d="stretch"/>'),
    "stl_binary": _fc('file="oct.stl" dim="2"', NOCON + '<edge equality="true"/><pin id="0 3"/>'),
    "gmsh41_tets": _fc('file="tets41.msh" dim="3" scale="1 2 1"', NOCON + '<elasticity young="1e4" poisson=".3"/>')
    .replace('type="mesh"', 'type="gmsh"'),
    "gmsh22_surface": _fc('file="surface22.msh" dim="2"', NOCON + '<edge equality="true"/><pin id="0"/>')
    .replace('type="mesh"', 'type="gmsh"'),
    "gmsh41_binary": _fc('file="binary41.msh" dim="3"', NOCON + '<elasticity young="1e4" poisson=".2"/>').replace(
        'type="mesh"', 'type="gmsh"'
    ),
    "gmsh_obj": _fc('file="oct.obj" dim="2"', NOCON + '<edge equality="true"/>').replace('type="mesh"', 'type="gmsh"'),
    "stl_solid": _fc('file="oct.stl" dim="3" origin="0 0 0"', NOCON + '<elasticity young="1e4" poisson=".2"/>'),
}  # fmt: skip

_DROP = '<contact selfcollide="none"/>'
FORWARD = {
    "rope": (COMPILE["rope"], False),
    "oct_solid": (COMPILE["oct_solid"], False),
    "gmsh41_tets": (COMPILE["gmsh41_tets"], False),
    "grid_on_plane": (_fc('file="grid.obj" dim="2" pos="-.1 -.1 -.49"', _DROP + '<edge equality="true"/>'), True),
    "oct_solid_on_plane": (_fc('file="oct.stl" dim="3" origin="0 0 0" pos="0 0 -.395"',
                               _DROP + '<elasticity young="5e3" poisson=".3" damping=".002"/>'), True),
}  # fmt: skip


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


@pytest.mark.parametrize("name", list(COMPILE))
def test_compiled_model_matches_mujoco(meshdir, name):
    xml = _scene(meshdir, COMPILE[name])
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert m.nflex == 1 and m.nflexvert == mjm.nflexvert and m.nflexelem == mjm.nflexelem > 0
    np.testing.assert_array_equal(np.asarray(m.flex_elem), mjm.flex_elem)
    np.testing.assert_array_equal(np.asarray(m.flex_vertbodyid), mjm.flex_vertbodyid)
    assert oracle.compare_models(m, mjm) == []


def test_mesh_from_assets_and_model_dir(meshdir, tmp_path):
    """The file is found as a <mesh file> is: in the assets dict, or relative to the model file's directory."""
    fc = COMPILE["oct_surface"]
    xml = _scene("", fc).replace('<compiler meshdir=""/>', "")
    assets = {"oct.obj": FILES["oct.obj"].encode()}
    m, mjm = mjx_lite.load_mjcf_string(xml, assets=assets), mujoco.MjModel.from_xml_string(xml, assets)
    assert oracle.compare_models(m, mjm) == []
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "oct.obj").write_text(FILES["oct.obj"])
    (tmp_path / "scene.xml").write_text(_scene("sub", fc))
    m, mjm = mjx_lite.load_mjcf(str(tmp_path / "scene.xml")), mujoco.MjModel.from_xml_path(str(tmp_path / "scene.xml"))
    assert oracle.compare_models(m, mjm) == []


# slow: a flex read from a file runs the runtime of any flex (its points, elements and fields stay default in
# test_compiled_model_matches_mujoco); rope and oct_solid_on_plane (dim 3, elasticity, plane contacts) stay default;
# oct_solid and gmsh41_tets (dim-3 elasticity: oct_solid_on_plane), grid_on_plane (a dim-2 cloth with edge equalities
# on a plane: tests/test_flex.py::test_forward_matches_mujoco[drop])
_FWD_SLOW = ("oct_solid", "gmsh41_tets", "grid_on_plane")


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in _FWD_SLOW else k for k in FORWARD])
def test_forward_matches_mujoco(meshdir, fwd, name):
    flexcomp, plane = FORWARD[name]
    xml = _scene(meshdir, flexcomp, plane, euler="5 3 0" if plane else "10 20 30")
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert oracle.compare_models(m, mjm) == []
    for seed in range(2):
        fields = ("flexvert_xpos", "flexedge_length", "qfrc_spring", "qfrc_damper", "qfrc_passive", "qacc_smooth",
                  "qacc", "qfrc_constraint")  # fmt: skip
        d, mjd = _forward_both(fwd, m, mjm, *_state(mjm, plane, seed), fields)
        assert int(np.asarray(d.contact.active).sum()) == mjd.ncon
        assert mjd.ncon > 0 if plane else mjd.ncon == 0


@pytest.mark.parametrize("attrs,match", [
    ('file="oct.obj" dim="3"', "origin must be specified"),
    ('dim="2"', "File is required"),
    ('file="missing.obj" dim="2"', "missing.obj"),
    ('file="oct.msh" dim="2"', "legacy MSH"),
    ('file="oct.ply" dim="2"', "no decoder"),
    ('file="rope.obj" dim="3" origin="0 0 0"', "element"),  # (flat: no tetrahedron of positive volume)
])  # fmt: skip
def test_errors_as_in_mujoco(meshdir, attrs, match):
    xml = _scene(meshdir, _fc(attrs))
    with pytest.raises(ValueError, match=match):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=match):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.parametrize("attrs,match", [
    ('file="tets41.msh" dim="2"', "dim does not match"),
    ('file="rope41.msh" dim="1"', "1D meshes are not supported"),
    ('file="v3.msh" dim="3"', "versions 4.1 and 2.2"),
    ('file="oct.obj" dim="3"', "dim does not match"),
    ('file="bad.msh" dim="3"', "no decoder"),  # (no $MeshFormat header)
    ('file="nonodes.msh" dim="3"', "Nodes"),
    ('file="twoblocks.msh" dim="3"', "single block"),  # (MuJoCo 4.0 reads an OBJ as a surface here)
])  # fmt: skip
def test_gmsh_errors_as_in_mujoco(meshdir, attrs, match):
    xml = _scene(meshdir, _fc(attrs).replace('type="mesh"', 'type="gmsh"'))
    with pytest.raises(ValueError, match=match):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=match):
        mjx_lite.load_mjcf_string(xml)


def test_binary_gmsh22_is_refused_by_name(meshdir):
    xml = _scene(meshdir, _fc('file="binary22.msh" dim="2"').replace('type="mesh"', 'type="gmsh"'))
    with pytest.raises(MJCFUnsupportedError, match="binary GMSH 2.2"):
        mjx_lite.load_mjcf_string(xml)
