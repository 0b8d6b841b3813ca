"""dm_control's humanoid acceleration-stage sensors (accelerometer, 6 force, 6 torque, 18 touch) against
mj_forward in a contact state (after 50 MuJoCo steps: both feet on the floor), float64.

Not slow: our sensor_acc alone, on a Data filled from MuJoCo's (kinematics, qacc and the contacts placed in the rows
of our static pair layout with MuJoCo's constraint forces), so touch's bounded reduction (each sensor reads only the
contact rows its body's pairs can fill) and the shared contact forces of cfrc_ext are checked against the oracle
without compiling the whole pipeline. Slow: the same sensors end to end through mjx_lite.forward.
"""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, sensor, sensor_contact
from tests import oracle

PATH = os.path.join(oracle.DM_SUITE, "humanoid.xml")
# sensors from MuJoCo's own forces and state: float64 round-off through the rne pass and a few products (values up
# to ~100 N)
SENSOR_ATOL = 1e-9
SENSOR_RTOL = 1e-9
# end to end: both solvers converged to tolerance 1e-12 (forces of O(100) N)
FORWARD_ATOL = 1e-7
ACC_TYPES = (mujoco.mjtSensor.mjSENS_ACCELEROMETER, mujoco.mjtSensor.mjSENS_FORCE, mujoco.mjtSensor.mjSENS_TORQUE,
             mujoco.mjtSensor.mjSENS_TOUCH)  # fmt: skip


def _tight(xml: str) -> str:
    return xml.replace('<option timestep=".005"/>', '<option timestep=".005" tolerance="1e-12" ls_iterations="50"/>')


@pytest.fixture(scope="module")
def humanoid():
    xml = _tight(open(PATH).read())
    assert "tolerance" in xml
    m = mjx_lite.load_mjcf_string(xml, model_dir=oracle.DM_SUITE)
    assets = {f: open(os.path.join(oracle.DM_SUITE, f), "rb").read()
              for f in ("./common/skybox.xml", "./common/visual.xml", "./common/materials.xml")}  # fmt: skip
    mjm = mujoco.MjModel.from_xml_string(xml, assets)
    mjd = mujoco.MjData(mjm)
    for _ in range(50):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd, m


def _with_mujoco_contacts(m, mjm, mjd):
    """Our Data from MuJoCo's, its contacts written into the rows of our pair layout and their efc forces into our
    constraint rows."""
    d = oracle.data_from_mujoco(m, mjm, mjd)
    plan = constraint.plan(m)
    assert not driver.capped(m) and mjm.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    con = {k: np.array(getattr(d.contact, k)) for k in ("dist", "pos", "frame", "friction", "dim", "geom", "active")}
    efc_force, efc_mask = np.zeros(m.njmax), np.zeros(m.njmax, bool)
    start, seen = {}, {}
    row = 0
    for g in driver.pair_table(m).groups:
        assert g.capacity == len(g.pair)  # untrimmed: slot i holds pair i
        for i, (a, b) in enumerate(zip(g.geom1, g.geom2)):
            start[(int(a), int(b))] = (row + i * g.ncon, g.ncon)
        row += g.nrows
    for c in mjd.contact[: mjd.ncon]:
        key = (int(c.geom[0]), int(c.geom[1]))
        first, ncon = start[key]
        j = seen.get(key, 0)
        assert j < ncon
        seen[key] = j + 1
        r = first + j
        con["dist"][r], con["pos"][r], con["frame"][r] = c.dist, c.pos, c.frame.reshape(3, 3)
        con["friction"][r], con["dim"][r], con["geom"][r], con["active"][r] = c.friction, c.dim, c.geom, True
        nrow = int(plan.con_rows[r])
        assert nrow == 2 * (c.dim - 1)
        efc_force[plan.con_adr[r] : plan.con_adr[r] + nrow] = mjd.efc_force[c.efc_address : c.efc_address + nrow]
        efc_mask[plan.con_adr[r]] = True
    contact = d.contact.replace(**{k: jp.asarray(v) for k, v in con.items()})
    return d.replace(contact=contact, efc_force=jp.asarray(efc_force), efc_mask=jp.asarray(efc_mask))


def _compare(mjm, mjd, got, atol, rtol):
    touching = 0
    for i in np.nonzero(np.isin(mjm.sensor_type, ACC_TYPES))[0]:
        adr, dim = mjm.sensor_adr[i], mjm.sensor_dim[i]
        want = mjd.sensordata[adr : adr + dim]
        np.testing.assert_allclose(got[adr : adr + dim], want, rtol=rtol, atol=atol,
                                   err_msg=f"sensor {i} {mujoco.mjtSensor(mjm.sensor_type[i]).name}")  # fmt: skip
        touching += int(mjm.sensor_type[i] == mujoco.mjtSensor.mjSENS_TOUCH and want[0] > 1.0)
    assert touching >= 2  # both feet press on the floor: the comparison covers touch values that are not zero


def test_acc_sensors_match_mujoco(humanoid):
    mjm, mjd, m = humanoid
    assert mjd.ncon >= 4
    d = _with_mujoco_contacts(m, mjm, mjd)
    out = jax.jit(sensor.sensor_acc)(m, d)
    _compare(mjm, mjd, np.asarray(out.sensordata), SENSOR_ATOL, SENSOR_RTOL)
    np.testing.assert_allclose(np.asarray(out.cfrc_ext), mjd.cfrc_ext, rtol=SENSOR_RTOL, atol=SENSOR_ATOL)
    # each touch sensor reads far fewer rows than the padded contacts (the point of the bounded reduction)
    sites = mjm.sensor_objid[mjm.sensor_type == mujoco.mjtSensor.mjSENS_TOUCH]
    _, valid = sensor_contact._touch_rows(m, sites)
    assert valid.sum() < 0.2 * len(sites) * m.nconmax


@pytest.mark.slow  # one compile of the humanoid's whole forward pass in float64 (~60 s on 2 loaded cores)
def test_acc_sensors_end_to_end(humanoid):
    mjm, mjd, m = humanoid
    d = mjx_lite.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
    d = jax.jit(mjx_lite.forward)(m, d)
    assert int(d.ncon) == mjd.ncon
    _compare(mjm, mjd, np.asarray(d.sensordata), FORWARD_ATOL, 0.0)
