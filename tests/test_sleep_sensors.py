"""Sensors with history buffers on a tree that falls asleep (`<flag sleep="enable"/>`), against MuJoCo 4.0 in float64.

mj_advance records the step's sensor values into the buffers first and only then runs mj_sleep, whose
recomputation (qvel = 0 for the trees that fell asleep) reads those buffers: an interval sensor that ticked at that
step is not due any more and reads the sample it just recorded (the velocities before the sleep, not zero); a
delayed one reads a buffer that holds the new sample (with linear interpolation and a delay under a timestep, the
read falls between the previous sample and the new one).
"""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl

SENSOR_ATOL = 1e-10  # float64; the values are velocities of order 1e-2 (MuJoCo's own step-to-step noise ~1e-15)
STATE_ATOL = 1e-10

# a damped pendulum released at 45 degrees falls asleep at step 69 (sleep_tolerance .05), which is a tick of the
# .03 s interval sensor (ticks at multiples of .03 s: 0.69 is one); a velocimeter read .005 s back with linear
# interpolation; a plain jointvel (recomputed to zero at the sleep step)
PENDULUM = """
<mujoco>
  <option timestep="0.01" sleep_tolerance=".05" integrator="{integrator}"><flag sleep="enable"/></option>
  <worldbody>
    <body pos="0 0 1"><joint name="h" axis="0 1 0" damping=".3"/>
      <geom type="capsule" fromto="0 0 0 .2 0 -.2" size=".03"/><site name="s" pos=".2 0 -.2"/></body>
  </worldbody>
  <sensor>
    <jointvel joint="h" nsample="3" interval=".03"/>
    <velocimeter site="s" nsample="3" delay=".005" interp="linear"/>
    <jointvel joint="h"/>
  </sensor>
</mujoco>"""


# slow (a step compile each): the other integrators run mj_advance's history and mj_sleep the same way (RK4: its
# pendulum falls asleep at the same tick first, then sleeps for single steps, woken by its last stage's poses)
_SLOW = [pytest.param(i, marks=pytest.mark.slow) for i in ("implicitfast", "RK4")]


@pytest.mark.parametrize("integrator", ["Euler", *_SLOW])
def test_history_sensors_at_fall_asleep(integrator):
    """Every step's sensordata and history buffers equal MuJoCo's through the step the pendulum falls asleep (an
    interval tick, where the interval sensor keeps the pre-sleep velocity) and 20 steps after it (Euler: asleep, its
    later ticks sampling the sleeping tree's zero velocity)."""
    xml = PENDULUM.format(integrator=integrator)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    mjd, d = mujoco.MjData(mjm), mjl.make_data(m)
    step = jax.jit(mjl.step)
    slept_at = None
    for k in range(90):
        t0, was_awake = mjd.time, mjd.tree_asleep[0] < 0
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
        np.testing.assert_array_equal(np.asarray(d.tree_asleep), mjd.tree_asleep, err_msg=f"step {k}")
        np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, rtol=0, atol=STATE_ATOL, err_msg=f"step {k}")
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=SENSOR_ATOL,
                                   err_msg=f"step {k}: sensordata")  # fmt: skip
        np.testing.assert_allclose(np.asarray(d.history), mjd.history, rtol=0, atol=SENSOR_ATOL,
                                   err_msg=f"step {k}: history")  # fmt: skip
        if was_awake and mjd.tree_asleep[0] >= 0 and slept_at is None:  # (the first time)
            slept_at = k
            ticked = abs(mjd.history[mjm.sensor_historyadr[0]] - t0) < 1e-12
            held = mjd.sensordata[0]
    # the case covered: the fall-asleep step is a tick and the interval sensor holds a nonzero velocity
    assert slept_at is not None and slept_at < 70 and ticked
    assert abs(held) > 1e-3
