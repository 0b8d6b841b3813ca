"""Inverse dynamics (mj_inverse), fwdinv, contact forces (mj_contactForce) and constraint wrenches in cfrc_ext
(mj_rnePostConstraint) against MuJoCo, float64."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment

import mjx_lite as mjl
from mjx_lite.pipeline import contact_force, inverse, rne, support
from mjx_lite.pipeline import forward as fwd
from mjx_lite.types import EnableBit
from tests import oracle

# inverse dynamics is closed form: float64 round-off amplified by M's conditioning (relative to scale)
# Newton converges quadratically: forward results are at the optimum to round-off amplified by conditioning
# (relative to the field's scale max(1, max|x|)), as in tests/test_constraint_forward.py
NEWTON_TOL = 1e-7
INV_TOL = 1e-9


def _posvel_impl(m, d):
    """Position and velocity stages (mj_invPosition + mj_invVelocity); partial pipeline: passive from d."""
    return fwd.fwd_velocity(m, fwd.fwd_position(m, d))


forward = jax.jit(fwd.forward)


@jax.jit
def _inverse(m, d):
    return inverse.inverse_acc(m, _posvel_impl(m, d), sensors=False)


@jax.jit
def _fwdinv(m, d):
    return inverse.compare_fwd_inv(m, d)


@jax.jit
def _post(m, d):
    return rne.rne_postconstraint(m, d, contact_force.cfrc_ext_constraint(m, d)), contact_force.contact_force(m, d)


@pytest.fixture(scope="module")
def small():
    mjm = oracle.small_model("Newton", "pyramidal")
    mjm.dof_damping[-1] = 0.3  # a damped dof for invdiscrete (Euler's implicit damping)
    return mjm, oracle.model_from_mujoco(mjm)


def _state(mjm, seed):
    rng = np.random.default_rng(seed)
    mjd = mujoco.MjData(mjm)
    oracle.small_state(mjm, mjd, rng)
    mjd.qfrc_applied[:] = rng.normal(size=mjm.nv)
    mjd.xfrc_applied[1:] = rng.normal(size=(mjm.nbody - 1, 6))
    return mjd, rng


def test_inverse_of_forward_recovers_applied_forces(small):
    """At the forward solution, qfrc_inverse = qfrc_applied + J'xfrc_applied (+ qfrc_actuator)."""
    mjm, m = small
    for seed in range(2):
        mjd, _ = _state(mjm, seed)
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, oracle.data_with_state(m, mjm, mjd))
        assert int(d.nefc) > 20
        di = _inverse(m, d)
        expect = np.asarray(d.qfrc_applied + d.qfrc_actuator + support.xfrc_accumulate(m, d))
        oracle.close(di.qfrc_inverse, expect, NEWTON_TOL, "qfrc_inverse")
        oracle.close(di.qfrc_constraint, d.qfrc_constraint, NEWTON_TOL, "qfrc_constraint")
        np.testing.assert_array_equal(np.asarray(di.qacc), np.asarray(d.qacc))  # qacc is not modified


@pytest.mark.parametrize("invdiscrete", [False, True])
def test_inverse_matches_mujoco(small, invdiscrete):
    """mj_inverse at an arbitrary qacc: qfrc_inverse, qfrc_constraint, efc_force (rows matched)."""
    mjm, m = small
    if invdiscrete:
        mjm.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_INVDISCRETE
        m = m.replace(opt=m.opt.replace(enableflags=m.opt.enableflags | EnableBit.INVDISCRETE))
    try:
        for seed in range(2):
            mjd, rng = _state(mjm, seed)
            mujoco.mj_forward(mjm, mjd)
            mjd.qacc[:] = rng.normal(size=mjm.nv) * 3
            qacc = mjd.qacc.copy()
            mujoco.mj_inverse(mjm, mjd)
            d = oracle.data_with_state(m, mjm, mjd).replace(qacc=jp.asarray(qacc))
            di = _inverse(m, d)
            assert int(di.nefc) == mjd.nefc > 20
            oracle.close(di.qfrc_inverse, mjd.qfrc_inverse, INV_TOL, "qfrc_inverse")
            oracle.close(di.qfrc_constraint, mjd.qfrc_constraint, INV_TOL, "qfrc_constraint")
            rm, ro = oracle.match_rows(mjd, mjm, di)
            oracle.close(np.asarray(di.efc_force)[ro], mjd.efc_force[rm], INV_TOL, "efc_force")
            np.testing.assert_array_equal(np.asarray(di.efc_state)[ro], mjd.efc_state[rm])
    finally:
        mjm.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_INVDISCRETE)


def test_fwdinv(small):
    """solver_fwdinv after forward: both norms vanish at the optimum (as in MuJoCo), and qfrc_inverse matches."""
    mjm, m = small
    mjm.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_FWDINV
    try:
        mjd, _ = _state(mjm, 5)
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, oracle.data_with_state(m, mjm, mjd))
        d = _fwdinv(m, d)
        scale = max(1.0, float(np.abs(mjd.qfrc_constraint).max()))
        fi = np.asarray(d.solver_fwdinv)
        assert np.all(fi < NEWTON_TOL * scale), fi
        assert np.all(mjd.solver_fwdinv < NEWTON_TOL * scale), mjd.solver_fwdinv
    finally:
        mjm.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_FWDINV)


def test_step2_writes_fwdinv(small):
    """mj_step2 runs mj_compareFwdInv when fwdinv is enabled: so does step2 (a stale solver_fwdinv is overwritten),
    and the step agrees with MuJoCo's."""
    mjm, _ = small
    mjm.opt.enableflags |= mujoco.mjtEnableBit.mjENBL_FWDINV
    try:
        m = oracle.model_from_mujoco(mjm)
        mjd, _ = _state(mjm, 6)
        d = oracle.data_with_state(m, mjm, mjd).replace(solver_fwdinv=jp.ones(2))
        mjd.solver_fwdinv[:] = 1.0
        mujoco.mj_step1(mjm, mjd)
        mujoco.mj_step2(mjm, mjd)
        d = jax.jit(lambda m, d: mjl.step2(m, mjl.step1(m, d)))(m, d)
        scale = max(1.0, float(np.abs(mjd.qfrc_constraint).max()))
        assert np.all(mjd.solver_fwdinv < NEWTON_TOL * scale), mjd.solver_fwdinv
        assert np.all(np.asarray(d.solver_fwdinv) < NEWTON_TOL * scale), d.solver_fwdinv
        for f in ("qpos", "qvel"):
            np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=NEWTON_TOL, atol=NEWTON_TOL)
    finally:
        mjm.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_FWDINV)


def _contact_match(mjd, d):
    """Our active contact slots matched to MuJoCo's contacts (same geoms, nearest position)."""
    con = d.contact
    act = np.nonzero(np.asarray(con.active) & (np.asarray(con.dist) < np.asarray(con.includemargin)))[0]
    assert len(act) == mjd.ncon
    geom = np.asarray(d.contact.geom)[act]
    pos = np.asarray(d.contact.pos)[act]
    cost = np.zeros((mjd.ncon, len(act)))
    for i in range(mjd.ncon):
        c = mjd.contact[i]
        same = np.all(np.sort(geom, 1) == np.sort(c.geom), axis=1)
        cost[i] = np.linalg.norm(pos - c.pos, axis=1) + 1e6 * ~same
    r, k = linear_sum_assignment(cost)
    return r, act[k]


# elliptic: slow (CI time: its own forward compile). After mj_contactForce the cfrc_ext path does not depend on the
# cone ([pyramidal] stays by default), and mj_contactForce on elliptic contacts is checked by default through the
# contact sensors in test_sensor_contact's test_sensors_match_mujoco[elliptic-0]
@pytest.mark.parametrize("cone", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_contact_force_and_cfrc_ext(cone):
    """mj_contactForce per contact, and cfrc_ext (contacts, connect, weld) from mj_rnePostConstraint."""
    mjm = oracle.small_model("Newton", cone)
    m = oracle.model_from_mujoco(mjm)
    mjd, _ = _state(mjm, 7)
    mujoco.mj_forward(mjm, mjd)
    mujoco.mj_rnePostConstraint(mjm, mjd)
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    d2, cf = _post(m, d)
    rm, ro = _contact_match(mjd, d)
    scale = max(1.0, float(np.abs(mjd.efc_force[: mjd.nefc]).max()))
    for i, k in zip(rm, ro):
        theirs = np.zeros(6)
        mujoco.mj_contactForce(mjm, mjd, i, theirs)
        oracle.close(np.asarray(cf)[k], theirs, NEWTON_TOL * scale, f"contact {i}")
    oracle.close(d2.cfrc_ext, mjd.cfrc_ext, NEWTON_TOL * scale, "cfrc_ext")


def test_public_inverse_matches_mujoco(small):
    """mjl.inverse (whole pipeline incl. sensors) against mj_inverse."""
    mjm, m = small
    mjd, rng = _state(mjm, 11)
    mujoco.mj_forward(mjm, mjd)
    mjd.qacc[:] = rng.normal(size=mjm.nv)
    qacc = mjd.qacc.copy()
    mujoco.mj_inverse(mjm, mjd)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), qacc=jp.asarray(qacc))
    di = jax.jit(mjl.inverse)(m, d)
    oracle.close(di.qfrc_inverse, mjd.qfrc_inverse, INV_TOL, "qfrc_inverse")


SENSOR_XML = """
<mujoco>
  <option jacobian="dense" iterations="100" tolerance="1e-10" cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="box" pos="0 0 .099">
      <freejoint/><geom type="box" size=".1 .1 .1" friction="0.8 0.02 0.001" condim="4"/>
      <site name="s" pos=".02 .03 .05"/>
      <body name="arm" pos="0 0 .2">
        <joint name="h" type="hinge" axis="0 1 0" range="-.3 .3"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
        <site name="tip" pos=".3 0 0"/>
      </body>
    </body>
    <body name="ball" pos=".6 0 .5"><freejoint/><geom type="sphere" size=".05" contype="0" conaffinity="0"/>
      <site name="b"/></body>
  </worldbody>
  <equality><connect site1="tip" site2="b"/></equality>
  <sensor>
    <accelerometer site="s"/><force site="s"/><torque site="s"/>
    <force site="tip"/><torque site="tip"/><accelerometer site="b"/>
  </sensor>
</mujoco>
"""


@pytest.mark.parametrize("cone", ["pyramidal"])
def test_force_sensors_with_contacts_and_connect(cone):
    """accelerometer, force and torque sensors see contact and connect forces through cfrc_ext (as MuJoCo)."""
    mjm = mujoco.MjModel.from_xml_string(SENSOR_XML.format(cone=cone))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(2)
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 4 and mjd.nefc > 3
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    oracle.close(d.sensordata, mjd.sensordata, NEWTON_TOL, "sensordata")
