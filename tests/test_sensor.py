"""Sensors against MuJoCo (float64), on Data filled from MuJoCo's MjData (independent of our other stages)
and, when the pipeline stages exist, end to end through mjx_lite.forward."""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import io, types
from mjx_lite.pipeline import sensor
from tests import oracle

RTOL = 1e-9  # float64 round-off through a handful of products
ATOL = 1e-9


# A model of our own covering what sensor.xml lacks: reference frames of every object type, insidesite on
# every site shape, energy, tendon actuator force, limit sensors, positive-datatype cutoff, camprojection through a
# camera with a sensor size and focal lengths (sensor.xml's cameras use fovy).
EXTRA_XML = """
<mujoco>
  <option><flag energy="enable" constraint="disable"/></option>
  <worldbody>
    <site name="w_sphere" type="sphere" size="0.6" pos="0.2 0 0.9"/>
    <site name="w_capsule" type="capsule" size="0.3 0.4" pos="0 0.3 1"/>
    <site name="w_ellipsoid" type="ellipsoid" size="0.3 0.5 0.7" pos="0.1 0 1"/>
    <site name="w_cylinder" type="cylinder" size="0.5 0.3" pos="0 0 1.1"/>
    <site name="w_box" type="box" size="0.4 0.5 0.6" pos="0.1 0.1 1"/>
    <body name="a" pos="0 0 1" quat="0.9 0.1 0.3 0.2">
      <joint name="ja" type="ball" stiffness="3" damping=".1"/>
      <geom name="ga" type="capsule" size=".1 .3" pos=".1 0 0" quat="1 0 1 0" mass="2"/>
      <site name="sa" pos=".2 .1 0" quat="0.7 0.7 0 0"/>
      <camera name="ca" pos="0 .1 .2" xyaxes="0 -1 0 0 0 1"/>
      <body name="b" pos=".3 0 0">
        <joint name="jb" type="hinge" axis="0 1 1" stiffness="2" range="-1 1" limited="true" springref=".2"/>
        <geom name="gb" type="box" size=".1 .2 .05" pos="0 .1 0"/>
        <site name="sb" pos="0 .2 .1"/>
        <body name="c" pos="0 .3 0">
          <joint name="jc" type="slide" axis="1 0 0" stiffness="5"/>
          <geom name="gc" type="sphere" size=".1" pos=".05 0 0"/>
          <site name="sc" pos=".1 0 0"/>
        </body>
      </body>
    </body>
    <camera name="ci" pos="0 -2 1" xyaxes="1 0 0 0 .3 1" resolution="640 480" sensorsize="0.0036 0.0027"
            focal="0.003 0.0031" principalpixel="300 250"/>
    <body name="f" pos="1 0 0">
      <freejoint name="jf"/>
      <geom type="ellipsoid" size=".1 .2 .3"/>
      <site name="sf" pos="0 .1 0"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t0" stiffness="4" springlength="0.1 0.2" limited="true" range="-1 1">
      <joint joint="jb" coef="1"/><joint joint="jc" coef="-.5"/>
    </fixed>
  </tendon>
  <actuator>
    <motor name="m0" tendon="t0" gear="2"/>
    <motor name="m1" tendon="t0" gear="-1"/>
    <position name="m2" joint="jc" kp="10"/>
  </actuator>
  <sensor>
    <framepos objtype="xbody" objname="b" reftype="camera" refname="ca"/>
    <framepos objtype="body" objname="c" reftype="geom" refname="ga"/>
    <framepos objtype="geom" objname="gb" reftype="site" refname="sf"/>
    <framepos objtype="camera" objname="ca" reftype="body" refname="f"/>
    <framexaxis objtype="body" objname="b" reftype="xbody" refname="c"/>
    <frameyaxis objtype="geom" objname="gc"/>
    <framezaxis objtype="camera" objname="ca" reftype="site" refname="sb"/>
    <framequat objtype="body" objname="a" reftype="site" refname="sc"/>
    <framequat objtype="geom" objname="gb" reftype="camera" refname="ca"/>
    <framequat objtype="camera" objname="ca"/>
    <framelinvel objtype="body" objname="c" reftype="xbody" refname="f"/>
    <frameangvel objtype="geom" objname="gb" reftype="camera" refname="ca"/>
    <framelinvel objtype="xbody" objname="f"/>
    <framelinacc objtype="body" objname="c"/>
    <frameangacc objtype="geom" objname="gb"/>
    <framelinacc objtype="xbody" objname="f"/>
    <subtreecom body="a"/>
    <subtreelinvel body="a"/>
    <subtreeangmom body="f"/>
    <accelerometer site="sc"/>
    <velocimeter site="sf"/>
    <gyro site="sb" cutoff="0.5"/>
    <magnetometer site="sa"/>
    <force site="sb"/>
    <torque site="sc"/>
    <force site="sf"/>
    <torque site="sf"/>
    <jointpos joint="jb" cutoff="0.1"/>
    <ballquat joint="ja"/>
    <ballangvel joint="ja"/>
    <tendonpos tendon="t0"/>
    <tendonvel tendon="t0"/>
    <actuatorpos actuator="m0"/>
    <actuatorvel actuator="m1"/>
    <actuatorfrc actuator="m2"/>
    <jointactuatorfrc joint="jc"/>
    <tendonactuatorfrc tendon="t0"/>
    <jointlimitpos joint="jb"/>
    <jointlimitvel joint="jb"/>
    <jointlimitfrc joint="jb"/>
    <tendonlimitpos tendon="t0"/>
    <tendonlimitvel tendon="t0"/>
    <tendonlimitfrc tendon="t0"/>
    <e_potential/>
    <e_kinetic cutoff="0.05"/>
    <clock/>
    <insidesite objtype="site" objname="sb" site="w_sphere"/>
    <insidesite objtype="body" objname="b" site="w_capsule"/>
    <insidesite objtype="xbody" objname="c" site="w_ellipsoid"/>
    <insidesite objtype="geom" objname="ga" site="w_cylinder"/>
    <insidesite objtype="camera" objname="ca" site="w_box"/>
    <insidesite objtype="site" objname="sf" site="w_box"/>
    <camprojection site="sc" camera="ci"/>
    <camprojection site="sf" camera="ca" cutoff="300"/>
  </sensor>
</mujoco>
"""


# ---- helpers ------------------------------------------------------------------------------------------------


def sensor_models():
    s = oracle.without_unsupported(mujoco.MjSpec.from_file(os.path.join(oracle.MJX_TEST_DATA, "sensor", "sensor.xml")))
    s.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    m1 = s.compile()
    m2 = mujoco.MjModel.from_xml_string(EXTRA_XML)
    return {"mjx_sensor": m1, "extra": m2}


MODELS = sensor_models()


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    mjm = MODELS[request.param]
    m = oracle.model_from_mujoco(mjm)
    fns = {
        stage: jax.jit(lambda m, d, s=stage: sensor._compute_stage(m, d, s))
        for stage in (types.Stage.POS, types.Stage.VEL, types.Stage.ACC)
    }
    return request.param, mjm, m, fns


# ---- tests -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_sensors_match_mujoco(case, seed):
    """sensordata after mj_forward == our sensors computed from MuJoCo's intermediate Data, per stage."""
    name, mjm, m, fns = case
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(seed))
    mujoco.mj_forward(mjm, mjd)
    mujoco.mj_rnePostConstraint(mjm, mjd)
    mujoco.mj_subtreeVel(mjm, mjd)
    d = oracle.data_from_mujoco(m, mjm, mjd).replace(sensordata=jp.zeros(mjm.nsensordata))
    for stage in (types.Stage.POS, types.Stage.VEL, types.Stage.ACC):
        d = fns[stage](m, d)
    got = np.asarray(d.sensordata)
    for i in range(mjm.nsensor):
        adr, dim = mjm.sensor_adr[i], mjm.sensor_dim[i]
        np.testing.assert_allclose(
            got[adr : adr + dim], mjd.sensordata[adr : adr + dim], rtol=RTOL, atol=ATOL,
            err_msg=f"{name}: sensor {i} type {mujoco.mjtSensor(mjm.sensor_type[i]).name}",
        )  # fmt: skip


def test_cutoff_is_active(case):
    """The cutoff branch really clips something in these states (otherwise the test above proves little)."""
    name, mjm, m, fns = case
    clipped = 0
    for seed in range(2):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, np.random.default_rng(seed))
        mujoco.mj_forward(mjm, mjd)
        for i in np.nonzero(mjm.sensor_cutoff > 0)[0]:
            adr, dim = mjm.sensor_adr[i], mjm.sensor_dim[i]
            clipped += int(np.any(np.isclose(np.abs(mjd.sensordata[adr : adr + dim]), mjm.sensor_cutoff[i])))
    assert clipped > 0, name


def test_energy_matches_mujoco():
    mjm = MODELS["extra"]
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(3))
    mujoco.mj_forward(mjm, mjd)
    d = oracle.data_from_mujoco(m, mjm, mjd)
    np.testing.assert_allclose(float(sensor.energy_pos(m, d)), mjd.energy[0], rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(float(sensor.energy_vel(m, d)), mjd.energy[1], rtol=RTOL, atol=ATOL)


def test_insidesite_has_both_outcomes():
    """At least one insidesite sensor reads 1 and one reads 0 over a few states (a meaningful comparison)."""
    mjm = MODELS["extra"]
    ids = np.nonzero(mjm.sensor_type == mujoco.mjtSensor.mjSENS_INSIDESITE)[0]
    seen = set()
    for seed in range(4):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, np.random.default_rng(seed))
        mujoco.mj_forward(mjm, mjd)
        seen |= {float(mjd.sensordata[mjm.sensor_adr[i]]) for i in ids}
    assert seen == {0.0, 1.0}


def test_disabled_sensors_leave_sensordata():
    mjm = MODELS["extra"]
    m = oracle.model_from_mujoco(mjm)
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | types.DisableBit.SENSOR))
    d = io.make_data(m).replace(sensordata=jp.full(mjm.nsensordata, 7.0))
    for fn in (sensor.sensor_pos, sensor.sensor_vel, sensor.sensor_acc):
        d = fn(m, d)
    np.testing.assert_array_equal(np.asarray(d.sensordata), 7.0)


def test_unsupported_sensor_raises():
    xml = """<mujoco><worldbody><camera name="c" pos="0 0 3"/><body><joint/><geom size=".1"/><site name="s"/></body>
             </worldbody><sensor><user dim="1" needstage="pos"/></sensor></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = oracle.model_from_mujoco(mjm)
    # a plugin sensor without the configuration mjx_lite's loader compiles (Model.sensor_plugincfg)
    m = m.replace(sensor_type=np.full(1, types.SensorType.PLUGIN, np.int32))
    with pytest.raises(NotImplementedError, match="plugin"):
        sensor.sensor_pos(m, io.make_data(m))
