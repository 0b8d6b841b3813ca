"""Octree SDFs of meshes (sdf geoms without a plugin) and mesh-SDF pairs against MuJoCo C 4.0 in float64.

The octree (mjcf/sdf_octree.py) is compared field by field with MuJoCo's compiled one, the mesh BVH that the mesh-SDF
collider walks (collision/mesh_bvh.py) node for node with MuJoCo's, and the contacts of octree SDFs against the
primitives, another octree, an SDF plugin and meshes (collision/sdf.py, sdf_octree.py, sdf_mesh_pair.py) one for one
with MuJoCo's: same iterations from the same starting points.
"""

import os

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver  # noqa: E402
from tests.oracle import data_from_mujoco  # noqa: E402

ATOL_OCT_COEFF = 1e-14  # corner distances: MuJoCo's arithmetic on the same float64 vertices (seen: 0 to 5e-16)
ATOL_OCT_AABB = 1e-15  # cell boxes: the same repeated midpoints (seen: 0 to 4.4e-16, the mesh frame's round-off)
# contacts: the same descents; the octree gradient outside the root cell is a forward difference (step 1e-8) and the
# interior one is piecewise (per leaf), so round-off of the frame transforms can move a point across a leaf face
# (measured: 7.9e-11 for a sphere on a cube octree after 10 iterations, 3.3e-14 for mesh-SDF pairs)
ATOL_CONTACT = 1e-8
ATOL_QACC = 1e-7  # relative to max |qacc| (seen: 6e-11 of 1220)
# MuJoCo's examples: 20 descent iterations with forward-difference gradients (points outside a root cell) amplify the
# 5e-16 round-off of the octree coefficients (cow on cow: 1.6e-8 after 700 steps)
ATOL_CONTACT_EXAMPLE = 1e-6
# and qacc through cow.xml's stiff contacts (solimp width 1e-4: a 1.6e-8 distance moves the impedance by ~1e-4
# relative): seen 4.9e-7 relative to max |qacc| (4.2e-5 of 85.5); mesh.xml and mug.xml 7e-13 and 8e-12
ATOL_QACC_EXAMPLE = 1e-5

# an irregular hexahedron (no two faces with equal centres) and a wedge with a 60-degree ridge (the corners above it
# are equally close to two faces whose normals disagree on the sign: MuJoCo 4.0's pseudo-normal decides)
HEX = ('vertex="-1 -1 -1 1.1 -0.9 -1 0.9 1 -1.1 -1 1.2 -0.9 -1.1 -1 1 1 -1.1 0.9 1.05 1 1 -0.9 0.95 1.1" '
       'face="0 2 1 0 3 2 4 5 6 4 6 7 0 1 5 0 5 4 2 3 7 2 7 6 1 2 6 1 6 5 0 4 7 0 7 3"')  # fmt: skip
WEDGE = ('vertex="-1 -1 -1 1 -1 -1 1 1 -1 -1 1 -1 -1 -1 1 -1 1 1" '
         'face="0 2 1 0 3 2 0 1 4 3 5 2 1 2 5 1 5 4 0 4 5 0 5 3"')  # fmt: skip
TORUS = """<plugin plugin="mujoco.sdf.torus"><instance name="torus">
  <config key="radius1" value="0.1"/><config key="radius2" value="0.04"/></instance></plugin>"""


def _scene(only_touching: bool, full: bool = True) -> str:
    """The octree scene. only_touching: contype/conaffinity bits keep only the six pairs that touch (the octree hex
    against the sphere, capsule, octree wedge, free torus and hex mesh; the wedge mesh against the static torus), so
    that six SDF pair groups compile, not the 24 groups of every type pair; otherwise every pair is a candidate.
    full=False (with only_touching) leaves out the capsule and the free torus: four SDF pair groups, one per code path
    of the octree (an octree as geom2 against a primitive, octree against octree, a mesh against an octree, a mesh
    against a plugin SDF)."""

    def bits(ct, ca):
        return f' contype="{ct}" conaffinity="{ca}"' if only_touching else ""

    capsule = f'<body pos=".14 -.05 .25" euler="40 70 30"><freejoint/><geom type="capsule" size=".03 .05"{bits(0, 1)}/>'
    torus = f'<body pos=".15 .15 .2" euler="80 10 5"><freejoint/><geom type="sdf" mesh="torus"{bits(0, 1)}>'
    capsule, torus = (capsule + "</body>", torus + '<plugin instance="torus"/></geom></body>') if full else ("", "")

    plane = "" if only_touching else '<geom type="plane" size="2 2 .1"/>'
    return f"""<mujoco>
  <extension>{TORUS}</extension>
  <option sdf_iterations="3" sdf_initpoints="6"/>
  <asset><mesh name="hex" {HEX} scale=".1 .1 .1"/><mesh name="wedge" {WEDGE} scale=".1 .08 .06"/>
    <mesh name="torus"><plugin instance="torus"/></mesh></asset>
  <worldbody>
    {plane}
    <body pos="0 0 .2" euler="5 10 15"><geom type="sdf" mesh="hex"{bits(1, 0)}/></body>
    <body pos=".03 .02 .36" euler="10 20 30"><freejoint/><geom type="sphere" size=".06"{bits(0, 1)}/></body>
    {capsule}
    <body pos="-.12 .12 .23" euler="20 10 5"><freejoint/><geom type="sdf" mesh="wedge"{bits(0, 1)}/></body>
    {torus}
    <body pos="-.12 -.14 .25" euler="10 20 30"><freejoint/><geom type="mesh" mesh="hex"{bits(0, 1)}/></body>
    <body pos=".6 0 .3"><geom type="sdf" mesh="torus"{bits(2, 0)}><plugin instance="torus"/></geom></body>
    <body pos=".64 .03 .37" euler="10 20 30"><freejoint/><geom type="mesh" mesh="wedge"{bits(0, 2)}/></body>
  </worldbody>
</mujoco>"""


SCENE = _scene(True, full=False)


def _load(xml):
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    # the torus plugin's mass and inertia come from our marching-cubes faces (test_sdf.RTOL_FACES): MuJoCo is given
    # ours, so that qacc compares the contacts and the solver, not the triangulation
    mjm.body_mass[:] = np.asarray(m.body_mass)
    mjm.body_inertia[:] = np.asarray(m.body_inertia)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_setConst(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return m, mjm, mjd, data_from_mujoco(m, mjm, mjd)


@pytest.fixture(scope="module")
def scene():
    return _load(SCENE)


@pytest.fixture(scope="module")
def forward():
    return jax.jit(mjl.forward)


def test_octree_fields(scene):
    """mesh_octadr/octnum and the octree cells (children, depths, boxes) and corner coefficients as MuJoCo's."""
    m, mjm, _, _ = scene
    for k in ("mesh_octadr", "mesh_octnum", "oct_child", "oct_depth"):
        np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mjm, k), err_msg=k)
    assert mjm.noct > 1000 and (mjm.mesh_octadr >= 0).sum() == 2  # hex and wedge; the plugin's mesh has none
    np.testing.assert_allclose(np.asarray(m.oct_aabb), mjm.oct_aabb, rtol=0, atol=ATOL_OCT_AABB)
    np.testing.assert_allclose(np.asarray(m.oct_coeff), mjm.oct_coeff, rtol=0, atol=ATOL_OCT_COEFF)


def test_mesh_bvh(scene):
    """The BVHs of the meshes of mesh geoms (walked by the mesh-SDF collider) are MuJoCo's, node for node."""
    m, mjm, _, _ = scene
    checked = 0
    for i in range(mjm.nmesh):
        a, n = int(m.mesh_sdfbvhadr[i]), int(m.mesh_sdfbvhnum[i])
        if a < 0:
            continue
        b, nb = mjm.mesh_bvhadr[i], mjm.mesh_bvhnum[i]
        assert n == nb
        np.testing.assert_array_equal(np.asarray(m.sdfbvh_child)[a : a + n], mjm.bvh_child[b : b + nb])
        np.testing.assert_array_equal(np.asarray(m.sdfbvh_nodeid)[a : a + n], mjm.bvh_nodeid[b : b + nb])
        np.testing.assert_allclose(np.asarray(m.sdfbvh_aabb)[a : a + n], mjm.bvh_aabb[b : b + nb], rtol=0,
                                   atol=ATOL_OCT_AABB)  # fmt: skip
        checked += 1
    assert checked == 2


def _compare_contacts(m, mjd, d, atol=ATOL_CONTACT):
    """Contacts one for one per geom pair (MuJoCo's pair order, starting points in order); {pair: count}."""
    c = driver.active_contacts(m, d)
    assert len(c["dist"]) == mjd.ncon
    ours, theirs = {}, {}
    for k in range(mjd.ncon):
        ours.setdefault(tuple(int(g) for g in c["geom"][k]), []).append(k)
        theirs.setdefault(tuple(int(g) for g in mjd.contact[k].geom), []).append(k)
    assert ours.keys() == theirs.keys()
    for key in theirs:
        assert len(ours[key]) == len(theirs[key]), key
        for a, b in zip(ours[key], theirs[key]):
            con = mjd.contact[b]
            np.testing.assert_allclose(c["dist"][a], con.dist, rtol=0, atol=atol, err_msg=str(key))
            np.testing.assert_allclose(c["pos"][a], con.pos, rtol=0, atol=atol, err_msg=str(key))
            np.testing.assert_allclose(c["frame"][a][0], con.frame[:3], rtol=0, atol=atol, err_msg=str(key))
    return {k: len(v) for k, v in theirs.items()}


# The default selection's scene (SCENE) has one SDF pair group per octree code path: the sphere against the octree hex
# (an octree as geom2 of sdf.py), the octree wedge against it (an octree as geom1 and geom2), the hex mesh against it
# (sdf_mesh_pair.py on an octree) and the wedge mesh against the torus plugin (sdf_mesh_pair.py on a plugin). The
# capsule against the octree and the octree against the free torus plugin are the same sdf.py code with the capsule's
# and the plugin's fields, which tests/test_sdf.py::test_contacts_step_for_step checks against MuJoCo by default
# (capsule and torus plugin as geom1 and geom2): they run in the slow "touching" scene (six groups, ~1.5x the
# program). "all": every pair a candidate, 24 pair groups (16 of them SDF), ~4x the default scene's collision program.
@pytest.mark.parametrize(
    "variant",
    # "default" is slow too (CI time: 38 worker-s, four SDF pair groups); the default selection keeps the octree's
    # compiled fields (test_octree_fields, test_mesh_bvh) and test_sdf.py::test_forward_qacc (SDF contacts vs MuJoCo)
    [pytest.param("default", marks=pytest.mark.slow), pytest.param("touching", marks=pytest.mark.slow),
     pytest.param("all", marks=pytest.mark.slow)],
)
def test_contacts_and_qacc(scene, forward, variant):
    """Contacts of the octree SDF against a sphere, a capsule, another octree, a torus plugin and a mesh, and of
    meshes against a plugin SDF, as MuJoCo's; qacc with them."""
    m, _, mjd, d = scene if variant == "default" else _load(_scene(variant == "touching"))
    d = forward(m, d)
    counts = _compare_contacts(m, mjd, d)
    gtype = np.asarray(m.geom_type)
    kinds = {(int(gtype[a]), int(gtype[b])) for a, b in counts}
    want = {(2, 8), (8, 8), (7, 8)} | (set() if variant == "default" else {(3, 8)})
    assert want <= kinds, kinds  # every pair type of the scene touches
    assert sum(v for (a, b), v in counts.items() if gtype[a] == 7) >= 2  # mesh-SDF contacts on both meshes
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=0, atol=ATOL_QACC * max(1.0, np.abs(mjd.qacc).max()))


ATOL_GRAD_FD = 1e-6  # grad vs central differences (eps 1e-7) of a sum of contact distances


_GRAD = f"""<mujoco><option sdf_iterations="3" sdf_initpoints="6"/>
  <asset><mesh name="hex" {HEX} scale=".1 .1 .1"/></asset>
  <worldbody>
    <body pos="0 0 .2" euler="5 10 15"><geom type="sdf" mesh="hex"/></body>
    <body pos=".03 .02 .36" euler="10 20 30"><freejoint/><geom type="sphere" size=".06"/></body>
  </worldbody></mujoco>"""


# slow (CI budget): the octree SDF's contacts and qacc stay in the default test_contacts_and_qacc; SDF gradients vs
# central differences stay by default in test_sdf.py's test_gradients_match_central_differences
@pytest.mark.slow
def test_gradient_matches_central_differences():
    """d(sum of contact distances)/d(sphere position) through the octree field: finite and equal to central
    differences (the field is trilinear per leaf: smooth where no point crosses a leaf face). One sphere-octree pair:
    the reverse-mode program of one SDF group is what is compiled."""
    m = mjl.load_mjcf_string(_GRAD)
    mjm = mujoco.MjModel.from_xml_string(_GRAD)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 0
    d = data_from_mujoco(m, mjm, mjd)

    def f(x):
        dd = d.replace(geom_xpos=d.geom_xpos.at[1].add(x))
        c = driver.collision(m, dd).contact
        return jp.sum(jp.where(c.active, c.dist, 0.0))

    # one compiled program: the values at x +- eps come from value_and_grad's too (a jit(f) beside it compiled the
    # forward program a second time)
    vg = jax.jit(jax.value_and_grad(f))
    g = np.asarray(vg(jp.zeros(3))[1])
    eps = 1e-7
    fd = np.array([(float(vg(eps * e)[0]) - float(vg(-eps * e)[0])) / (2 * eps) for e in np.eye(3)])
    # the contact distance moves with the sphere (after 3 iterations the descent's point is not the deepest one, so
    # the derivative is small: seen 0.015)
    assert np.all(np.isfinite(g)) and np.abs(fd).max() > 1e-3
    np.testing.assert_allclose(g, fd, rtol=0, atol=ATOL_GRAD_FD)


EXAMPLES = "/tmp/mjmodels/model/plugin/sdf"


@pytest.mark.slow
@pytest.mark.parametrize("name,steps", [("mesh", 800), ("mug", 400), ("cow", 700)])
def test_examples(name, steps):
    """MuJoCo's SDF examples with meshes: the octree fields, and contacts and qacc after MuJoCo's own steps."""
    path = os.path.join(EXAMPLES, name + ".xml")
    if not os.path.exists(path):
        pytest.skip("MuJoCo's example models are not here")
    m, mjm = mjl.load_mjcf(path), mujoco.MjModel.from_xml_path(path)
    for k in ("mesh_octadr", "mesh_octnum", "oct_child", "oct_depth"):
        np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mjm, k), err_msg=k)
    np.testing.assert_allclose(np.asarray(m.oct_coeff), mjm.oct_coeff, rtol=0, atol=ATOL_OCT_COEFF)
    # the torus plugin's mass and inertia come from our marching-cubes faces (test_sdf.RTOL_FACES): MuJoCo is given
    # ours, so that qacc compares the contacts and the solver, not the triangulation
    mjm.body_mass[:] = np.asarray(m.body_mass)
    mjm.body_inertia[:] = np.asarray(m.body_inertia)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_setConst(mjm, mjd)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 0
    d = jax.jit(mjl.forward)(m, data_from_mujoco(m, mjm, mjd))
    _compare_contacts(m, mjd, d, ATOL_CONTACT_EXAMPLE)
    scale = max(1.0, np.abs(mjd.qacc).max())
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=0, atol=ATOL_QACC_EXAMPLE * scale)
