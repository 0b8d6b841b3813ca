"""insidesite with enclosed="true" (pipeline/sensor_inside.py): the directed Hausdorff distance of an object from a
site, against MuJoCo 4.0 (float64) and against an independent maximisation over support directions.

MuJoCo computes the value iteratively (bounded by opt.ccd_iterations and ccd_tolerance) and its value never exceeds
the exact one; run to convergence (CONVERGED) it equals the exact value for the pairs of ENCLOSED_XML, while on
cylinder sites, for box objects in sphere, box or capsule sites, capsules in box sites and meshes in capsule sites it
can stop below it (measured: up to 2.3e-2 in 1-12% of random poses, /tmp/ref38/enc_sweep.py), which the
test_exact_value_bounds_mujoco cases check as a bound.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from scipy.optimize import minimize

import mjx_lite as mjl
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError

TOL = 1e-9  # float64: a handful of products and a square root per point
CONVERGED = 'ccd_iterations="2000" ccd_tolerance="1e-14"'  # MuJoCo's iteration run to convergence

# one free body (a sphere, a capsule and a mesh geom, a sphere site; a child body with a sphere geom) falling
# through sphere, box, capsule and ellipsoid sites, and one with an ellipsoid and a cylinder (in the sphere site):
# every object kind, and the (site, shape) pairs whose MuJoCo iteration converges
ENCLOSED_XML = f"""
<mujoco>
  <option {CONVERGED} timestep="0.005"/>
  <asset><mesh name="m" vertex="-.05 -.04 -.03  .06 -.05 -.04  -.05 .05 -.02  .04 .06 -.05  0 0 .07"/></asset>
  <worldbody>
    <site name="ball" type="sphere" size=".45" pos=".01 .02 .5"/>
    <site name="crate" type="box" size=".35 .3 .4" pos="0 .05 .45" euler="10 20 30"/>
    <site name="pill" type="capsule" size=".25 .2" pos=".02 0 .5" euler="-20 10 5"/>
    <site name="egg" type="ellipsoid" size=".3 .4 .5" pos="0 .03 .45" euler="15 -10 40"/>
    <body name="b" pos=".03 .02 1" euler="5 40 70">
      <freejoint/>
      <geom name="sph" type="sphere" size=".08" pos=".05 0 0"/>
      <geom name="cap" type="capsule" size=".04 .06" pos="-.05 .02 0" euler="30 0 0"/>
      <geom name="msh" type="mesh" mesh="m" pos="0 -.06 .03"/>
      <site name="tag" type="sphere" size=".03" pos="0 0 .1"/>
      <body name="c" pos="0 .1 0"><joint axis="1 0 0" damping=".01"/><geom type="sphere" size=".03"/></body>
    </body>
    <body name="d" pos="-.2 -.1 1" euler="20 30 40">
      <freejoint/>
      <geom name="ell" type="ellipsoid" size=".09 .05 .07" contype="0" conaffinity="0"/>
      <geom name="cyl" type="cylinder" size=".04 .07" pos=".03 0 .05" euler="0 40 0" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <sensor>
    <insidesite site="ball" objtype="geom" objname="sph" enclosed="true"/>
    <insidesite site="ball" objtype="geom" objname="cap" enclosed="true"/>
    <insidesite site="ball" objtype="geom" objname="msh" enclosed="true"/>
    <insidesite site="ball" objtype="body" objname="b" enclosed="true"/>
    <insidesite site="ball" objtype="xbody" objname="b" enclosed="true" cutoff=".05"/>
    <insidesite site="crate" objtype="geom" objname="sph" enclosed="true"/>
    <insidesite site="crate" objtype="geom" objname="msh" enclosed="true"/>
    <insidesite site="crate" objtype="site" objname="tag" enclosed="true"/>
    <insidesite site="pill" objtype="geom" objname="sph" enclosed="true"/>
    <insidesite site="pill" objtype="geom" objname="cap" enclosed="true"/>
    <insidesite site="egg" objtype="geom" objname="sph" enclosed="true"/>
    <insidesite site="egg" objtype="body" objname="b" enclosed="true"/>
    <insidesite site="ball" objtype="geom" objname="ell" enclosed="true"/>
    <insidesite site="ball" objtype="geom" objname="cyl" enclosed="true"/>
    <insidesite site="ball" objtype="body" objname="d" enclosed="true"/>
    <insidesite site="ball" objtype="geom" objname="sph"/>
  </sensor>
</mujoco>"""


@pytest.fixture(scope="module")
def enclosed_model():
    m = mjl.load_mjcf_string(ENCLOSED_XML)
    mjm = mujoco.MjModel.from_xml_string(ENCLOSED_XML)
    return m, mjm, jax.jit(mjl.forward), jax.jit(mjl.step)


def test_compiled_fields(enclosed_model):
    """sensor_intprm (enclosed flag) and sensor_datatype (real: signed values) as MuJoCo's."""
    m, mjm, _, _ = enclosed_model
    for f in ("sensor_intprm", "sensor_datatype", "sensor_objtype", "sensor_objid", "sensor_refid", "sensor_dim"):
        np.testing.assert_array_equal(np.asarray(getattr(m, f)), getattr(mjm, f), err_msg=f)


def test_forward_poses(enclosed_model):
    """sensordata after forward on random poses (inside, protruding and outside) == mj_forward's."""
    m, mjm, fwd, _ = enclosed_model
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    signs = set()
    for _ in range(6):
        q = mjm.qpos0.copy()
        q[:3] += rng.normal(size=3) * 0.1
        q[2] -= rng.uniform(0.0, 0.5)  # from protruding above the sites to deep inside
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        q[7] = rng.normal()
        q[8:11] += rng.normal(size=3) * 0.1
        q[10] -= rng.uniform(0.0, 0.5)
        quat = rng.normal(size=4)
        q[11:15] = quat / np.linalg.norm(quat)
        mjd.qpos[:] = q
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(q)))
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=TOL)
        signs |= set(np.sign(mjd.sensordata[:-1]).tolist())
    assert signs == {-1.0, 1.0}  # both enclosed and protruding objects were compared


def test_trajectory(enclosed_model):
    """60 steps of the body falling through the sites: sensordata and qpos each step == mj_step's."""
    m, mjm, _, stp = enclosed_model
    mjd = mujoco.MjData(mjm)
    d = mjl.make_data(m)
    values = []
    for _ in range(60):
        mujoco.mj_step(mjm, mjd)
        d = stp(m, d)
        np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, rtol=0, atol=1e-9)
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=TOL)
        values.append(mjd.sensordata.copy())
    values = np.array(values)
    assert values[0, 0] > 0 > values[-1, 0]  # the sphere fell into the ball site
    assert np.any(values[:, 4] == 0.05)  # the cutoff clipped the xbody's value


def test_gradients_match_central_differences(enclosed_model):
    """d sensordata / d (the two free bodies' positions) by jax.jacfwd == central differences (every site and
    object kind, the ellipsoid's root finding included), at a pose with both protruding and enclosed objects."""
    m, mjm, fwd, _ = enclosed_model
    q0 = np.asarray(mjl.make_data(m).qpos).copy()
    q0[2] -= 0.3
    q0[10] -= 0.3
    cols = np.array([0, 1, 2, 8, 9, 10])  # translations of the two free joints

    def values(x):
        return fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(q0).at[cols].set(x))).sensordata

    x0 = jp.asarray(q0[cols])
    jac = np.asarray(jax.jit(jax.jacfwd(values))(x0))
    assert np.all(np.isfinite(jac)) and np.abs(jac).max() > 0.5
    eps = 1e-6
    for j in range(len(cols)):
        e = np.zeros(len(cols))
        e[j] = eps
        fd = (np.asarray(values(x0 + e)) - np.asarray(values(x0 - e))) / (2 * eps)
        np.testing.assert_allclose(jac[:, j], fd, rtol=0, atol=1e-7, err_msg=f"coordinate {cols[j]}")


# ------------------------------------------------------------------------------------------------------------------
# the pairs where MuJoCo's iteration can stop below the exact value

_SUPPORT = {  # support functions h(n) of the local shapes (size s), n (3,)
    "sphere": lambda s, n: s[0] * np.linalg.norm(n),
    "capsule": lambda s, n: s[0] * np.linalg.norm(n) + s[1] * abs(n[2]),
    "cylinder": lambda s, n: s[0] * np.hypot(n[0], n[1]) + s[1] * abs(n[2]),
    "box": lambda s, n: np.abs(n) @ s[:3],
}
_TYPES = {2: "sphere", 3: "capsule", 5: "cylinder", 6: "box"}


def _hausdorff(shape, site) -> float:
    """max over unit n of h_object(n) - h_site(n) (the directed Hausdorff distance of two convex shapes, by their
    support functions): the best of 2000 random directions, refined by Nelder-Mead from the 12 best."""

    def h(shape, n):
        t, s, pos, mat = shape
        return n @ pos + _SUPPORT[_TYPES[t]](s, mat.T @ n)

    def f(x):
        n = x / np.linalg.norm(x)
        return -(h(shape, n) - h(site, n))

    rng = np.random.default_rng(1)
    starts = rng.normal(size=(2000, 3))
    best = np.argsort([f(x) for x in starts])[:12]
    opts = {"xatol": 1e-12, "fatol": 1e-15, "maxiter": 4000}
    return max(-minimize(f, starts[i], method="Nelder-Mead", options=opts).fun for i in best)


@pytest.mark.parametrize("site,obj", [("cylinder", "box"), ("cylinder", "sphere"), ("capsule", "box"),
                                      ("box", "box"), ("box", "capsule")])  # fmt: skip
def test_exact_value_bounds_mujoco(site, obj):
    """Our value == the support-function maximisation (independent of the point-core argument), and MuJoCo's
    converged value never exceeds it (it is a lower bound that can stop short)."""
    size = {"cylinder": ".25 .2", "box": ".3 .2 .25", "capsule": ".2 .15", "sphere": ".08"}
    osize = {"box": ".1 .05 .08", "sphere": ".08", "capsule": ".05 .1"}[obj]
    xml = f"""<mujoco><option {CONVERGED}/><worldbody>
      <site name="s" type="{site}" size="{size[site]}" pos=".01 .02 .03" euler="10 20 30"/>
      <body pos=".03 .02 .05"><freejoint/><geom name="g" type="{obj}" size="{osize}"/></body></worldbody>
      <sensor><insidesite site="s" objtype="geom" objname="g" enclosed="true"/></sensor></mujoco>"""
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    fwd = jax.jit(mjl.forward)
    rng = np.random.default_rng(2)
    for _ in range(4):
        q = mjm.qpos0.copy()
        q[:3] += rng.normal(size=3) * 0.1
        quat = rng.normal(size=4)
        q[3:7] = quat / np.linalg.norm(quat)
        mjd.qpos[:] = q
        mujoco.mj_forward(mjm, mjd)
        ours = float(fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(q))).sensordata[0])
        geom = (mjm.geom_type[0], mjm.geom_size[0], mjd.geom_xpos[0], mjd.geom_xmat[0].reshape(3, 3))
        st = (mjm.site_type[0], mjm.site_size[0], mjd.site_xpos[0], mjd.site_xmat[0].reshape(3, 3))
        assert abs(ours - _hausdorff(geom, st)) < 1e-8  # Nelder-Mead's accuracy
        assert mjd.sensordata[0] <= ours + 1e-12


# ------------------------------------------------------------------------------------------------------------------
# load-time errors and refusals

_ERR_XML = """<mujoco><worldbody><site name="s" size=".3"/><site name="bx" type="box" size=".3 .3 .3"/>
  <camera name="cam"/>
  <body name="b"><freejoint/>{geoms}<site name="t" size=".01"/><body name="e"><joint/><geom size=".01"/></body></body>
  </worldbody><sensor><insidesite site="{site}" objtype="{ot}" objname="{on}" enclosed="true"/></sensor></mujoco>"""


@pytest.mark.parametrize("ot,on,geoms,match", [
    ("camera", "cam", '<geom size=".1"/>', "camera is not supported"),
    ("body", "b", '<inertial pos="0 0 0" mass="1" diaginertia=".01 .01 .01"/>', "must have at least one geom"),
])  # fmt: skip
def test_mujoco_errors(ot, on, geoms, match):
    """MuJoCo's own compile errors (not refusals) for enclosed insidesite."""
    xml = _ERR_XML.format(site="s", ot=ot, on=on, geoms=geoms)
    with pytest.raises(ValueError, match=match):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=match) as err:
        mjl.load_mjcf_string(xml)
    assert not isinstance(err.value, MJCFUnsupportedError)


@pytest.mark.parametrize("ot,on,geoms", [("geom", "g", '<geom name="g" type="cylinder" size=".1 .1"/>'),
                                         ("xbody", "b", '<geom type="ellipsoid" size=".1 .1 .2"/>')])  # fmt: skip
def test_curved_objects_refused(ot, on, geoms):
    """Ellipsoid and cylinder objects (or geoms of the body) in a site that is not a sphere: MuJoCo loads them,
    mjx_lite refuses them by name."""
    xml = _ERR_XML.format(site="bx", ot=ot, on=on, geoms=geoms)
    mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFUnsupportedError, match="enclosed") as err:
        mjl.load_mjcf_string(xml)
    assert err.value.attribute == "enclosed"
