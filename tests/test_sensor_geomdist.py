"""Geom distance sensors (distance, normal, fromto) against MuJoCo 4.0 (float64): geom and body pairs, flipped type
order, cutoffs (0: penetration only), the analytic colliders (not slow) and the convex distance solver (slow), on
Data filled from MuJoCo's kinematics; gradients against central differences; load-time refusals."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import MJCFError, load_mjcf_string
from mjx_lite.pipeline import sensor
from mjx_lite.types import Stage
from tests import oracle

ANALYTIC_ATOL = 1e-9  # closed-form distances and points: float64 round-off through kinematics
CONVEX_DIST_ATOL = 1e-9  # GJK/EPA distances of the convex pairs (both converge to round-off in these cases)
# witness points of the convex pairs: where the closest feature is a face or an edge (box face against a cylinder
# cap) the points are not unique; MuJoCo's GJK stops within ccd_tolerance (1e-6), ours at convergence
CONVEX_POINT_ATOL = 1e-6
GRAD_RTOL = 1e-6  # analytic gradient vs central differences (h = 1e-6, float64)

_BODIES = """
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="a" pos="0 0 .5"><freejoint/>
      <geom name="sph" type="sphere" size=".1"/>
      <geom name="box" type="box" size=".1 .05 .08" pos=".2 0 0"/>
    </body>
    <body name="b" pos=".1 .05 .75" euler="10 20 30"><freejoint/>
      <geom name="cap" type="capsule" size=".05 .1"/>
      {extra}
    </body>"""

ANALYTIC_XML = f"""
<mujoco>
  <worldbody>{_BODIES.format(extra='<geom name="cap2" type="capsule" size=".03 .05" pos="0 .2 0"/>')}</worldbody>
  <sensor>
    <distance geom1="sph" geom2="cap" cutoff="1"/>
    <normal geom1="cap" geom2="sph" cutoff="1"/>
    <fromto geom1="cap" geom2="box" cutoff="1"/>
    <distance body1="a" body2="b" cutoff="1"/>
    <fromto body1="b" body2="a" cutoff="1"/>
    <normal body1="a" body2="b" cutoff="1"/>
    <fromto geom1="floor" geom2="cap" cutoff="2"/>
    <fromto body1="b" geom2="floor" cutoff="3"/>
    <distance geom1="box" geom2="cap" cutoff=".05"/>
    <distance geom1="box" geom2="sph"/>
    <fromto geom1="sph" geom2="box"/>
  </sensor>
</mujoco>"""

CONVEX_XML = f"""
<mujoco>
  <asset><mesh name="tet" vertex="0 0 0  .2 0 0  0 .2 0  0 0 .2"/></asset>
  <worldbody>{_BODIES.format(extra='''<geom name="ell" type="ellipsoid" size=".1 .07 .05" pos="0 .2 0"/>
      <geom name="cyl" type="cylinder" size=".06 .08" pos=".2 .2 0"/>
      <geom name="bx2" type="box" size=".05 .06 .07" pos=".2 -.2 0"/>
      <geom name="msh" type="mesh" mesh="tet" pos="-.2 0 0"/>''')}</worldbody>
  <sensor>
    <distance body1="a" body2="b" cutoff="1"/>
    <fromto body1="b" body2="a" cutoff="1"/>
    <distance geom1="box" geom2="ell" cutoff="2"/>
    <fromto geom1="cyl" geom2="box" cutoff="2"/>
    <fromto geom1="msh" geom2="sph" cutoff="2"/>
    <fromto geom1="box" geom2="bx2" cutoff="2"/>
    <fromto geom1="ell" geom2="floor" cutoff="2"/>
    <normal geom1="sph" geom2="cyl" cutoff="2"/>
    <distance geom1="msh" geom2="box" cutoff=".02"/>
  </sensor>
</mujoco>"""


def _states(mjm, n, seed=0):
    """qpos of n states: both free bodies moved and turned at random; the last overlaps them (penetration)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        q = mjm.qpos0.copy()
        q[:3] += rng.normal(0, 0.08, 3)
        q[7:10] += rng.normal(0, 0.08, 3)
        for a in (3, 10):
            r = rng.normal(size=4)
            q[a : a + 4] = r / np.linalg.norm(r)
        if k == n - 1:
            q[7:10] = q[:3] + [0.05, 0.0, 0.05]
        out.append(q)
    return out


def _compile(xml):
    m = load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    return m, mjm, jax.jit(lambda m, d: sensor._compute_stage(m, d, Stage.POS))


@pytest.fixture(scope="module")
def analytic():
    return _compile(ANALYTIC_XML)


def _compare(case, nstate, atol_of):
    m, mjm, fn = case
    mjd = mujoco.MjData(mjm)
    seen_inside = seen_cut = False
    for q in _states(mjm, nstate):
        mjd.qpos[:] = q
        mujoco.mj_forward(mjm, mjd)
        d = oracle.data_from_mujoco(m, mjm, mjd).replace(sensordata=jp.zeros(mjm.nsensordata))
        ours = np.asarray(fn(m, d).sensordata)
        for i in range(mjm.nsensor):
            sl = slice(mjm.sensor_adr[i], mjm.sensor_adr[i] + mjm.sensor_dim[i])
            np.testing.assert_allclose(ours[sl], mjd.sensordata[sl], rtol=0, atol=atol_of(mjm, i),
                                       err_msg=f"sensor {i} ({mujoco.mjtSensor(mjm.sensor_type[i]).name})")
            if mjm.sensor_type[i] == mujoco.mjtSensor.mjSENS_GEOMDIST:
                seen_inside |= bool(mjd.sensordata[sl][0] < 0)
                seen_cut |= bool(mjd.sensordata[sl][0] == mjm.sensor_cutoff[i])
    assert seen_inside and seen_cut  # the cases cover penetration and pairs beyond the cutoff


def test_analytic_pairs_match_mujoco(analytic):
    _compare(analytic, 3, lambda mjm, i: ANALYTIC_ATOL)


@pytest.mark.slow
def test_convex_pairs_match_mujoco():
    def atol(mjm, i):
        return CONVEX_POINT_ATOL if mjm.sensor_type[i] != mujoco.mjtSensor.mjSENS_GEOMDIST else CONVEX_DIST_ATOL

    _compare(_compile(CONVEX_XML), 6, atol)


GRAD_XML = """<mujoco><worldbody>
  <body name="a" pos="0 0 .5"><freejoint/>
    <geom type="sphere" size=".1"/><geom type="box" size=".1 .05 .08" pos=".2 0 0"/>
  </body>
  <body name="b" pos=".1 .05 .75" euler="10 20 30"><freejoint/><geom type="capsule" size=".05 .1"/></body>
  </worldbody><sensor><distance body1="a" body2="b" cutoff="1"/></sensor></mujoco>"""


def test_distance_gradient_matches_central_differences():
    m = load_mjcf_string(GRAD_XML)
    mjm = mujoco.MjModel.from_xml_string(GRAD_XML)
    mjd = mujoco.MjData(mjm)
    q0 = _states(mjm, 1, seed=3)[0]
    mjd.qpos[:] = q0
    mujoco.mj_forward(mjm, mjd)
    d0 = oracle.data_from_mujoco(m, mjm, mjd)

    def dist(x):  # the body-body distance as a function of the capsule's position
        d = d0.replace(geom_xpos=d0.geom_xpos.at[2].set(x))
        return sensor._compute_stage(m, d, Stage.POS).sensordata[0]

    # one compiled program (CI time): the values at x and x +- h come from value_and_grad's too
    vg = jax.jit(jax.value_and_grad(dist))
    x = jp.asarray(mjd.geom_xpos[2])
    value, g = vg(x)
    assert abs(float(value) - mjd.sensordata[0]) <= ANALYTIC_ATOL
    g = np.asarray(g)
    h = 1e-6
    fd = np.array([(vg(x + h * e)[0] - vg(x - h * e)[0]) / (2 * h) for e in np.eye(3)])
    assert np.all(np.isfinite(g)) and np.linalg.norm(g) > 0.5
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL, atol=GRAD_RTOL)


def test_height_field_distance_is_an_error_as_in_mujoco():
    xml = """<mujoco><asset><hfield name="h" nrow="3" ncol="3" size="1 1 .1 .1"/></asset><worldbody>
      <geom name="hf" type="hfield" hfield="h"/><body><freejoint/><geom name="s" size=".1"/></body></worldbody>
      <sensor><distance geom1="s" geom2="hf"/></sensor></mujoco>"""
    with pytest.raises(ValueError, match="height fields are not supported in geom distance sensors"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="height fields are not supported in geom distance sensors"):
        load_mjcf_string(xml)
