"""SDF geoms (MuJoCo's sdf plugins) against MuJoCo C 4.0 in float64.

MuJoCo's SDF contacts come from a local optimiser (collision/sdf.py); mjx_lite runs the same iterations from the
same starting points with the same step rule, so contacts are compared one for one (same count, same order) at
round-off tolerance for every `sdf_iterations`, not only converged. Known limit (not in these models): the first
starting point is the low corner of the two bounding boxes' overlap; where it lies on a box geom's surface (a box
smaller than the SDF's bounding box along an axis) the box's distance gradient there is decided by 1e-17 rounding of
the frame transforms, and that one contact may differ; the box here is larger than the torus's bounding box.
"""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver, sdf_plugins  # noqa: E402
from mjx_lite.mjcf import sdf_mesh  # noqa: E402
from mjx_lite.mjcf.spec import MJCFUnsupportedError  # noqa: E402
from tests.oracle import data_from_mujoco  # noqa: E402

ATOL_CONTACT = 1e-12  # same iterations, same arithmetic: float64 round-off of the frame transforms (seen: 7e-15)
# plugins whose gradient is MuJoCo's forward difference with step 1e-8 (bowl, bolt, nut, gear): a 1e-16 difference in
# a distance (the frame transforms' round-off) changes that gradient by ~1e-8, and the descent amplifies it (measured
# on the sphere in the bowl: 1.4e-9 after 1 iteration, 3.4e-6 on the normal after 3)
ATOL_CONTACT_FD = 1e-4
ATOL_MODEL = 1e-10  # compiled fields from the same marching-cubes mesh (seen: 1e-14 on inertias)
ATOL_QACC = 1e-7  # forward with the same contacts: solver round-off on qacc of order 10-100

TORUS = """<plugin plugin="mujoco.sdf.torus"><instance name="torus">
  <config key="radius1" value="0.35"/><config key="radius2" value="0.15"/></instance></plugin>"""
BOWL = """<plugin plugin="mujoco.sdf.bowl"><instance name="bowl">
  <config key="height" value="0.4"/><config key="radius" value="1.0"/><config key="thickness" value="0.02"/>
  </instance></plugin>"""


def _scene(iterations: int, initpoints: int) -> str:
    """A tilted torus touched by a sphere, capsule, ellipsoid, cylinder, a second torus and a large (static) box below
    it; a sphere in a bowl, on the plane."""
    return f"""<mujoco>
  <extension>{TORUS}{BOWL}</extension>
  <asset><mesh name="torus"><plugin instance="torus"/></mesh><mesh name="bowl"><plugin instance="bowl"/></mesh></asset>
  <option sdf_iterations="{iterations}" sdf_initpoints="{initpoints}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .09"><geom type="box" size=".8 .8 .1"/></body>
    <body pos="0 0 .3" euler="10 20 0"><freejoint/><geom type="sdf" mesh="torus"><plugin instance="torus"/></geom>
    </body>
    <body pos=".3 .05 .4" euler="0 30 10"><freejoint/><geom type="sphere" size=".1"/></body>
    <body pos="-.3 .1 .45" euler="20 0 10"><freejoint/><geom type="capsule" size=".06 .1"/></body>
    <body pos="0 .38 .45" euler="0 10 40"><freejoint/><geom type="ellipsoid" size=".1 .07 .05"/></body>
    <body pos="0 -.38 .45" euler="30 0 10"><freejoint/><geom type="cylinder" size=".07 .06"/></body>
    <body pos=".5 0 .7" euler="70 10 0"><freejoint/><geom type="sdf" mesh="torus"><plugin instance="torus"/></geom>
    </body>
    <body pos="3 0 1" euler="5 0 0"><geom type="sdf" mesh="bowl"><plugin instance="bowl"/></geom></body>
    <body pos="3.1 0 .15"><freejoint/><geom type="sphere" size=".15"/></body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def collide():
    return jax.jit(driver.collision)


def _both(xml: str):
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    return m, mjm, mjd, data_from_mujoco(m, mjm, mjd)


def _compare_contacts(m, mjd, d):
    fd = {i for i, g in enumerate(m.geom_sdf) if g is not None and g[0] != "mujoco.sdf.torus"}
    c = driver.active_contacts(m, d)
    n = mjd.ncon
    assert len(c["dist"]) == n
    # the same contacts in the same order: geom pairs in MuJoCo's pair order, starting points in Halton order
    ours = {}
    for k in range(n):
        ours.setdefault(tuple(int(g) for g in c["geom"][k]), []).append(k)
    theirs = {}
    for k in range(n):
        theirs.setdefault(tuple(int(g) for g in mjd.contact[k].geom), []).append(k)
    assert ours.keys() == theirs.keys()
    for key in theirs:
        assert len(ours[key]) == len(theirs[key]), key
        tol = ATOL_CONTACT_FD if fd & set(key) else ATOL_CONTACT
        for a, b in zip(ours[key], theirs[key]):
            con = mjd.contact[b]
            np.testing.assert_allclose(c["dist"][a], con.dist, rtol=0, atol=tol, err_msg=str(key))
            np.testing.assert_allclose(c["pos"][a], con.pos, rtol=0, atol=tol, err_msg=str(key))
            np.testing.assert_allclose(c["frame"][a][0], con.frame[:3], rtol=0, atol=tol, err_msg=str(key))
    return {k: len(v) for k, v in theirs.items()}


@pytest.mark.parametrize(
    "iterations", [3, pytest.param(1, marks=pytest.mark.slow), pytest.param(10, marks=pytest.mark.slow)]
)
def test_contacts_step_for_step(collide, iterations):
    m, mjm, mjd, d = _both(_scene(iterations, 12))
    counts = _compare_contacts(m, mjd, collide(m, d))
    gtype = np.asarray(m.geom_type)
    kinds = {(int(gtype[a]), int(gtype[b])) for a, b in counts}
    if iterations == 10:  # every pair type of the scene touches (the test is not vacuous)
        assert {(2, 8), (3, 8), (4, 8), (5, 8), (6, 8), (8, 8)} <= kinds, kinds
        assert (9, 8) in counts  # the sphere in the bowl


def test_model_fields(collide):
    m, mjm, _, _ = _both(_scene(10, 12))
    for f in ("body_mass", "body_inertia", "body_ipos", "body_iquat", "geom_aabb", "geom_rbound", "geom_size",
              "geom_pos", "geom_quat", "mesh_vert"):  # fmt: skip
        np.testing.assert_allclose(np.asarray(getattr(m, f)), getattr(mjm, f), atol=ATOL_MODEL, err_msg=f)
    np.testing.assert_array_equal(np.asarray(m.mesh_face), mjm.mesh_face)
    np.testing.assert_array_equal(np.asarray(m.geom_dataid), mjm.geom_dataid)
    assert m.opt.sdf_iterations == 10 and m.opt.sdf_initpoints == 12


@pytest.mark.parametrize("name,attr", [
    ("mujoco.sdf.bolt", ("0.26",)), ("mujoco.sdf.nut", ("0.26",)),
    ("mujoco.sdf.gear", ("0", "2.8", "25", "0.2", "-1")),
])  # fmt: skip
def test_plugin_meshes(name, attr):
    """The other plugins' distance functions, through MuJoCo's marching-cubes mesh of them (vertex for vertex)."""
    names = sdf_plugins.ATTRIBUTES[name][0]
    cfg = "".join(f'<config key="{k}" value="{v}"/>' for k, v in zip(names, attr))
    xml = f"""<mujoco><extension><plugin plugin="{name}"><instance name="p">{cfg}</instance></plugin></extension>
      <asset><mesh name="p"><plugin instance="p"/></mesh></asset>
      <worldbody><body><geom type="sdf" mesh="p"><plugin instance="p"/></geom></body></worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    vert, face = sdf_mesh.plugin_mesh(name, tuple(float(a) for a in attr))
    np.testing.assert_array_equal(vert, mjm.mesh_vert)
    np.testing.assert_array_equal(face, mjm.mesh_face)


def test_forward_qacc():
    xml = f"""<mujoco><extension>{TORUS}</extension>
      <asset><mesh name="torus"><plugin instance="torus"/></mesh></asset>
      <option sdf_iterations="5" sdf_initpoints="8"/>
      <worldbody><geom type="plane" size="5 5 .1"/>
        <body pos="0 0 .12" euler="10 20 0"><freejoint/><geom type="sdf" mesh="torus"><plugin instance="torus"/></geom>
        </body>
        <body pos=".35 .05 .2"><freejoint/><geom type="sphere" size=".1"/></body>
      </worldbody></mujoco>"""
    m, mjm, mjd, d = _both(xml)
    d = jax.jit(mjl.forward)(m, d)
    _compare_contacts(m, mjd, d)
    assert mjd.ncon > 3
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, atol=ATOL_QACC * max(1.0, np.abs(mjd.qacc).max()))


def test_gradients_finite(collide):
    """d(contact dist)/d(position of the sphere) is finite (bounded loops, guarded divisions)."""
    m, _, _, d = _both(_scene(3, 12))

    def f(x):
        dd = d.replace(geom_xpos=d.geom_xpos.at[4].add(x))
        c = collide(m, dd).contact
        return jp.sum(jp.where(c.active, c.dist, 0.0))

    g = jax.grad(f)(jp.zeros(3))
    assert np.all(np.isfinite(np.asarray(g)))
    assert np.any(np.asarray(g) != 0)


def test_refusals():
    bad = """<mujoco><extension><plugin plugin="acme.sdf.widget"><instance name="w"/></plugin></extension>
      <worldbody/></mujoco>"""
    with pytest.raises(MJCFUnsupportedError, match="acme.sdf.widget"):
        mjl.load_mjcf_string(bad)
    bad2 = """<mujoco><worldbody><body><geom type="sdf" mesh="m"><plugin plugin="acme.sdf.widget"/></geom></body>
      </worldbody></mujoco>"""
    with pytest.raises(MJCFUnsupportedError, match="acme.sdf.widget"):
        mjl.load_mjcf_string(bad2)
