"""Oracle tests of builtin meshes (`<mesh builtin=... params=...>`, mjx_lite/mjcf/mesh_builtin.py) against MuJoCo 4.0:
the compiled model (mesh_vert/mesh_face, hull and polygon tables, mesh frame, geom size/aabb/rbound, body mass and
inertia) through tests.oracle.compare_models, MuJoCo's parameter errors, and a mesh geom resting on a plane."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.mjcf import mesh_builtin as B  # noqa: E402, N812
from mjx_lite.mjcf.spec import MJCFError  # noqa: E402
from tests import oracle  # noqa: E402

# the forward check: qacc relative to the largest |qacc| and contact distances (plane-mesh contacts are closed form
# over the hull's vertices; both sides hold the same float32 vertices)
QACC_RTOL = 1e-8
DIST_ATOL = 1e-10

# (builtin, params, geom): geom False compiles the mesh without a geom (MuJoCo refuses a flat mesh on a collision geom)
CASES = [
    ("sphere", "0", True), ("sphere", "2", True), ("sphere", "1.7", True), ("hemisphere", "0", True),
    ("hemisphere", "3", True), ("cone", "3 0", True), ("cone", "6 0.4", True), ("cone", "5 1", True),
    ("supersphere", "3 0 0", True), ("supersphere", "8 2.5 0.3", True), ("supertorus", "3 1 1 1", True),
    ("supertorus", "7 0.4 0.5 2", True), ("wedge", "3 4 60 45 0.5", True), ("wedge", "5 2 180 90 0", True),
    ("plate", "3 4", False),
    # the procedural flex meshes (the points of the flexcomp of the same type): volumes and open surfaces on geoms, the
    # flat ones (grid dim 2, square, disc) without a geom
    ("grid", "2 3 2 .11 .1 .17", True), ("grid", "3 3 1 .1 .13 .1 2", False), ("box", "3 4 3 .1 .1 .3 2", True),
    ("box", "3 3 4 .1 .17 .1", True), ("cylinder", "4 3 3 .1 .13 .1 2", True), ("cylinder", "5 5 3 .1 .1 .1 3", True),
    ("ellipsoid", "3 5 3 .1 .1 .17", True), ("ellipsoid", "4 4 3 .1 .1 .1 2", True),
    ("square", "3 4 1 .1 .1 .1", False), ("disc", "5 4 1 .13 .1 .1", False), ("grid", "2.7 3 1 .1 .1 .1 2", False),
]  # fmt: skip
def _xml(attrs: str, geom: bool = True, extra: str = "") -> str:
    g = f"<body pos='0 0 1'><freejoint/><geom type='mesh' mesh='m' {extra}/></body>" if geom else ""
    return (f"<mujoco><asset><mesh name='m' {attrs}/></asset><worldbody><geom type='plane' size='1 1 .1'/>{g}"
            "</worldbody></mujoco>")  # fmt: skip


@pytest.mark.parametrize("builtin, params, geom", CASES, ids=lambda v: str(v).replace(" ", "_"))
def test_builtin_mesh_matches_mujoco(builtin, params, geom):
    """Every compiled field equals MuJoCo's, the vertices exactly (the same float32 generation and processing) and
    the faces (cone and wedge have none of their own: MuJoCo copies the hull's triangles, as we do)."""
    xml = _xml(f"builtin='{builtin}' params='{params}' scale='0.1 0.2 0.15' refpos='0 0 0.01'", geom)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    assert oracle.compare_models(m, mjm) == []
    np.testing.assert_array_equal(np.asarray(m.mesh_vert), mjm.mesh_vert)
    np.testing.assert_array_equal(np.asarray(m.mesh_face), mjm.mesh_face)


def test_generated_counts_follow_the_reference():
    """Vertex/face counts of MuJoCo's XML reference (the icosphere 2 + 10 4^s vertices, 20 4^s faces; the
    supersphere (r - 1) r + 2 and 2 r (r - 1); the supertorus r^2 and 2 r^2; wedge and plate r0 r1 vertices)."""
    for s in range(5):
        v, f, _ = B.make_builtin("sphere", [s])
        assert (len(v), len(f)) == (2 + 10 * 4**s, 20 * 4**s)
        np.testing.assert_allclose(np.linalg.norm(v.astype(float), axis=1), 1, rtol=0, atol=4e-7)
    v, f, _ = B.make_builtin("supersphere", [7, 1, 1])
    assert (len(v), len(f)) == (6 * 7 + 2, 2 * 7 * 6)
    v, f, _ = B.make_builtin("supertorus", [5, 0.5, 1, 1])
    assert (len(v), len(f)) == (25, 50)
    assert B.make_builtin("wedge", [3, 4, 60, 45, 0.5])[0].shape == (12, 3)
    v, f, inertia = B.make_builtin("plate", [3, 4])
    assert (len(v), len(f), inertia) == (12, 2 * 2 * 3, "shell")


# attributes -> MuJoCo's message (both reject; ours names the attribute)
ERRORS = [
    ("builtin='sphere'", "required attribute missing: 'params'"),
    ("builtin='none'", "required attribute missing: 'params'"),
    ("builtin='none' params='1'", "Unsupported mesh type"),
    ("builtin='Sphere' params='1'", "invalid keyword: 'Sphere'"),
    ("builtin='sphere' params='1 2'", "Sphere mesh type requires 1 parameter"),
    ("builtin='sphere' params='5'", "Sphere subdivision cannot be greater than 4"),
    ("builtin='sphere' params='-1'", "Sphere subdivision cannot be negative"),
    ("builtin='hemisphere' params='11'", "Hemisphere resolution cannot be greater than 10"),
    ("builtin='cone' params='2 0.5'", "Cone nvert must be at least 3"),
    ("builtin='cone' params='3 -1'", "Cone radius must be in [0, 1]"),
    ("builtin='supersphere' params='2 1 1'", "Supersphere resolution must be greater than 2"),
    ("builtin='supersphere' params='3 1 -1'", "Supersphere 'n' cannot be negative"),
    ("builtin='supertorus' params='3 1.5 1 1'", "Supertorus radius must be in (0, 1]"),
    ("builtin='supertorus' params='3 .5 1 0'", "Supertorus 't' must be greater than 0"),
    ("builtin='wedge' params='0 4 190 45 2'", "fov[0] must be a float between (0, 180] degrees"),
    ("builtin='wedge' params='3 4 60 91 0.5'", "`fov[1]` must be a float between (0, 90] degrees"),
    ("builtin='wedge' params='3 4 60 45 2'", "`gamma` must be a nonnegative float between [0, 1]"),
    ("builtin='wedge' params='1 1 60 45 0'", "at least 4 vertices required"),
    ("builtin='plate' params='3'", "Plate builtin mesh type requires 2 parameters"),
    ("builtin='grid' params='3 3 .1 .1 .1'", "Grid mesh type requires 6 or 7 parameters (count[3], spacing[3], [dim])"),
    ("builtin='grid' params='0 3 1 .1 .1 .1'", "Grid count must be positive"),
    ("builtin='grid' params='3 3 2 .1 .1 .1 2'", "Grid count must be 1 along dimensions beyond dim"),
    ("builtin='grid' params='3 3 3 .1 .1 .1 4'", "Grid dim must be 2 or 3"),
    ("builtin='grid' params='3 3 1 .1 .1 .1 3'", "Failed to create grid mesh"),
    ("builtin='box' params='3 3 .1 .1 .1'", "Box/cylinder/ellipsoid mesh type requires 6 or 7 parameters"),
    ("builtin='ellipsoid' params='3 3 1 .1 .1 .1'", "Box/cylinder/ellipsoid count must be at least 2"),
    ("builtin='cylinder' params='3 3 1 .1 .1 .1 7'", "Mesh dim must be 2 or 3 for box/cylinder/ellipsoid"),
    ("builtin='square' params='0 3 1 .1 .1 .1'", "Count must be positive"),
    ("builtin='disc' params='3 3 2 .1 .1 .1'", "Square/disc count[2] must be 1"),
    ("builtin='disc' params='3 3 1 .1 .1'", "Square/disc mesh type requires 6 parameters (count[3], spacing[3])"),
    ("builtin='sphere' params='1' vertex='0 0 0 1 0 0 0 1 0 0 0 1'", "at most one of 'builtin', 'vertex'"),
    ("builtin='cone' params='4 0.5' face='0 1 2 0 2 3'", "mesh volume is too small"),  # a cone keeps user faces
    # a collision geom needs the mesh's hull: MuJoCo rejects flat point sets before its other checks
    ("builtin='plate' params='3 4'", "mesh 'm' has coplanar vertices, cannot compute convex hull."),
    ("vertex='0 0 0 1 0 0 0 1 0 1 1 0' face='0 1 2 1 3 2'", "mesh 'm' has coplanar vertices"),
    ("vertex='0 0 0 1 0 0 2 0 0 3 0 0'", "mesh 'm' has collinear vertices"),
    ("vertex='0 0 0 0 0 0 0 0 0 0 0 0'", "mesh 'm' has colocated vertices"),
]


def test_builtin_mesh_errors_match_mujoco():
    for attrs, msg in ERRORS:
        xml = _xml(attrs)
        with pytest.raises(ValueError, match=None) as theirs:
            mujoco.MjModel.from_xml_string(xml)
        assert msg in str(theirs.value), (attrs, str(theirs.value))
        with pytest.raises(MJCFError) as ours:
            mjl.load_mjcf_string(xml)
        assert msg in str(ours.value), (attrs, str(ours.value))
    # parameters are truncated toward zero as MuJoCo casts them; a builtin overrides user faces it generates
    for attrs in ("builtin='sphere' params='-0.5'", "builtin='sphere' params='1' face='0 1 2'",
                  "builtin='plate' params='2 3' inertia='exact'"):  # fmt: skip
        xml = _xml(attrs, geom="plate" not in attrs)
        assert oracle.compare_models(mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)) == [], attrs
    # a flat mesh on a geom that does not collide needs no hull (MuJoCo compiles it: a plate's shell inertia, here
    # with a sphere in the body, as the plate's own inertia is flat: A + B = C, rejected by both in round-off)
    xml = _xml("builtin='plate' params='3 4'", extra="contype='0' conaffinity='0'/><geom size='.1'")
    assert oracle.compare_models(mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)) == []


FORWARD_XML = """
<mujoco>
  <asset>
    <mesh name="ball" builtin="sphere" params="0" scale=".1 .1 .1"/>
    <mesh name="cone" builtin="cone" params="8 0.3" scale=".1 .1 .08"/>
  </asset>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .1"><freejoint/><geom type="mesh" mesh="ball"/></body>
    <body pos=".5 0 .1"><freejoint/><geom type="mesh" mesh="cone" friction="0.8 0.02 0.001"/></body>
  </worldbody>
</mujoco>
"""


def _pressed(mjm: mujoco.MjModel, mjd: mujoco.MjData, qpos: np.ndarray, depth: float) -> np.ndarray:
    """qpos with each free body's z set so that its mesh's lowest vertex is `depth` below the plane z = 0."""
    mjd.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, mjd)
    out = qpos.copy()
    for g in range(1, mjm.ngeom):
        adr, n = mjm.mesh_vertadr[mjm.geom_dataid[g]], mjm.mesh_vertnum[mjm.geom_dataid[g]]
        z = (mjm.mesh_vert[adr : adr + n] @ mjd.geom_xmat[g].reshape(3, 3).T)[:, 2] + mjd.geom_xpos[g, 2]
        out[mjm.jnt_qposadr[mjm.body_jntadr[mjm.geom_bodyid[g]]] + 2] -= z.min() + depth
    return out


@pytest.mark.slow
def test_builtin_mesh_geoms_resting_on_plane():
    """An icosphere and a truncated cone, turned at random and pressed 2 mm into a plane: contacts (distances) and
    qacc against mj_forward. (A face lying flat on the plane is the plane-mesh tie documented in docs/physics.md:
    MuJoCo 4.0 gives more than our 3 contacts there, whatever the mesh's origin.)"""
    mjm, m = mujoco.MjModel.from_xml_string(FORWARD_XML), mjl.load_mjcf_string(FORWARD_XML)
    assert oracle.compare_models(m, mjm) == []
    fwd = jax.jit(mjl.forward)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    for k in range(3):
        qpos = mjm.qpos0.copy()
        for adr in (3, 10):
            q = np.array([1.0, *rng.normal(0, 0.4, 3)])
            qpos[adr : adr + 4] = q / np.linalg.norm(q)
        qpos = _pressed(mjm, mjd, qpos, 0.002)
        mjd.qpos[:] = qpos
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(qpos)))
        ours = mjl.active_contacts(m, d)
        assert mjd.ncon > 0 and len(ours["dist"]) == mjd.ncon, k
        np.testing.assert_allclose(np.sort(ours["dist"]), np.sort(mjd.contact.dist), rtol=0, atol=DIST_ATOL)
        scale = np.abs(mjd.qacc).max()
        np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=0, atol=QACC_RTOL * scale, err_msg=str(k))
