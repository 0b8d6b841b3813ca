"""Sensor history buffers (MuJoCo 4's sensor nsample / delay / interp / interval): compiled fields, the buffers of
mj_resetData, sensordata and Data.history over 100 steps against MuJoCo, and MuJoCo's load errors."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from tests import oracle

STEPS = 100
TRAJ_ATOL = 1e-9  # 100 float64 steps (round-off grows with the steps)

# position, velocity and acceleration-stage sensors with history only, delays read with zero-order hold, linear
# and cubic interpolation, an interval sensor (with a phase) held between ticks, an interval sensor with a delay,
# a negative delay (no read: MuJoCo computes it), a delayed actuator before them (buffers follow the actuators')
SENSORS = """<sensor>
  <jointpos joint="j" nsample="3"/>
  <jointvel joint="j" nsample="4" delay="0.02"/>
  <framepos objtype="site" objname="tip" nsample="5" delay="0.015" interp="linear"/>
  <accelerometer site="tip" nsample="6" delay="0.025" interp="cubic" cutoff="20"/>
  <jointpos joint="k" nsample="2" interval="0.03 -0.01"/>
  <framequat objtype="body" objname="b2" nsample="3" interval="0.02" delay="0.01"/>
  <jointvel joint="k" nsample="2" delay="-0.01"/>
  <actuatorfrc actuator="m" nsample="3" delay="0.01"/>
</sensor>"""


# the not-slow case: scalar position and velocity stage sensors with one buffer size (a smaller program to compile)
SMALL = """<sensor>
  <jointpos joint="j" nsample="4"/>
  <jointvel joint="j" nsample="4" delay="0.012"/>
  <jointpos joint="k" nsample="4" delay="0.007" interp="linear"/>
  <jointpos joint="k" nsample="4" interval="0.03 -0.01"/>
</sensor>"""


def _xml(integrator: str, sensors: str = SENSORS) -> str:
    return f"""<mujoco><option timestep="0.005" integrator="{integrator}"/><worldbody>
<body name="b1" pos="0 0 1"><joint name="j" axis="0 1 0" damping=".05"/>
<geom type="capsule" size=".05" fromto="0 0 0 .3 0 0"/>
<body name="b2" pos=".3 0 0"><joint name="k" axis="0 1 0"/><geom type="capsule" size=".04" fromto="0 0 0 .3 0 0"/>
<site name="tip" pos=".3 0 0"/></body></body></worldbody>
<actuator><motor name="m" joint="j" nsample="3" delay="0.01"/><motor joint="k" gear="2"/></actuator>
{sensors}</mujoco>"""


def _rollout(mjm, steps):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0.4, -0.3]
    ctrls = np.sin(np.arange(steps)[:, None] * np.array([[0.21, 0.13]]))
    out = []
    for u in ctrls:
        mjd.ctrl[:] = u
        mujoco.mj_step(mjm, mjd)
        out.append(np.concatenate([mjd.sensordata, mjd.history, mjd.qpos]))
    return ctrls, np.asarray(out)


# RK4: delayed sensors sample the step's start state (not the last stage's kinematics, whose site positions differ)
SMALL_RK4 = SMALL.replace("</sensor>", '<framepos objtype="site" objname="tip" nsample="3" delay="0.01"/></sensor>')


@pytest.mark.parametrize("integrator, sensors", [
    ("Euler", SMALL), ("RK4", SMALL_RK4), pytest.param("Euler", SENSORS, marks=pytest.mark.slow),
    pytest.param("implicitfast", SENSORS, marks=pytest.mark.slow), pytest.param("RK4", SENSORS, marks=pytest.mark.slow)
])  # fmt: skip
def test_sensor_history_trajectory(integrator, sensors):
    xml = _xml(integrator, sensors)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    assert m.nhistory == mjm.nhistory > 0
    assert oracle.compare_models(m, mjm) == []
    d0 = mjl.make_data(m)
    np.testing.assert_array_equal(np.asarray(d0.history), mujoco.MjData(mjm).history)
    ctrls, ref = _rollout(mjm, STEPS)

    def run(d, ctrls):
        def body(d, u):
            d = mjl.step(m, d.replace(ctrl=u))
            return d, jp.concatenate([d.sensordata, d.history, d.qpos])

        return jax.lax.scan(body, d, ctrls)[1]

    ours = np.asarray(jax.jit(run)(d0.replace(qpos=jp.asarray([0.4, -0.3])), jp.asarray(ctrls)))
    np.testing.assert_allclose(ours, ref, atol=TRAJ_ATOL, rtol=0)
    # the delayed sensors differ from their present values (the test would not see a missing delay otherwise)
    assert np.abs(ref[:, 1] - np.gradient(ref[:, 0]) / 0.005).max() > 1e-3


@pytest.mark.parametrize("sensor, message", [
    ('<jointpos joint="j" delay="0.01"/>', "setting delay > 0 without a history buffer"),
    ('<jointpos joint="j" nsample="2" interp="spline"/>', "invalid keyword:? 'spline'"),
    ('<jointpos joint="j" nsample="16777217"/>', r"at most 2\^24 samples in sensor history buffer, got 16777217"),
])  # fmt: skip
def test_sensor_history_errors(sensor, message):
    xml = _xml("Euler").replace(SENSORS, f"<sensor>{sensor}</sensor>")
    with pytest.raises(ValueError, match=message):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjl.MJCFError, match=message):
        mjl.load_mjcf_string(xml)


@pytest.mark.parametrize("timestep, interval", [("0.005", "0.03 -0.01"), ("0.001", "0.013 -0.011"),
                                                ("0.0021", "0.07 0"), ("0.01", "0.25 -0.15"), ("0.005", "0.003 0"),
                                                ("0.005", "0.002 -0.001"), ("0.01", "0.004 -0.002"),
                                                ("0.005", "0.007 0")])  # fmt: skip
def test_interval_buffers_of_reset(timestep, interval):
    """The initial sample times of interval sensors: ticks before time 0 rounded up to the timestep grid, decimal
    round-off (-0.01 - 3 * 0.03) counting as on the grid, at least a timestep apart (periods shorter than the
    timestep), as MuJoCo 4.0's mj_resetData."""
    xml = _xml("Euler", SMALL).replace('timestep="0.005"', f'timestep="{timestep}"').replace("0.03 -0.01", interval)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    np.testing.assert_array_equal(np.asarray(mjl.make_data(m).history), mujoco.MjData(mjm).history)


@pytest.mark.slow  # CI time: a trajectory compile of its own; the buffers of reset are checked above
def test_interval_shorter_than_timestep_trajectory():
    """Interval sensors whose period is shorter than the timestep (and one with a phase) sample on every step:
    sensordata and the buffers over 60 steps as mj_step's."""
    sensors = SMALL.replace("0.03 -0.01", "0.003 0").replace(
        '<jointpos joint="k" nsample="4" delay="0.007" interp="linear"/>', '<jointvel joint="k" nsample="5" '
        'interval="0.002 -0.001"/>')  # fmt: skip
    xml = _xml("Euler", sensors)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    ctrls, ref = _rollout(mjm, 60)

    def body(d, u):
        d = mjl.step(m, d.replace(ctrl=u))
        return d, jp.concatenate([d.sensordata, d.history, d.qpos])

    d0 = mjl.make_data(m).replace(qpos=jp.asarray([0.4, -0.3]))
    ours = np.asarray(jax.jit(lambda d, c: jax.lax.scan(body, d, c)[1])(d0, jp.asarray(ctrls)))
    np.testing.assert_allclose(ours, ref, atol=TRAJ_ATOL, rtol=0)
