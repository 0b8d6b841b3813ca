"""Capacities from the model: MuJoCo's `<size nconmax njmax>` (or `Config.nconmax/njmax`) cap the padded contact and
constraint arrays; overflow is counted in `d.warning_number`; with enough capacity the results are MuJoCo's.
Also the one-row joint/tendon limits (`Model.jnt_limit_onerow`), which size njmax as MJX does.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import types
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint
from tests import oracle

# Newton run to convergence on both sides (as tests/test_constraint_forward.py): qacc, forces and the contact
# sensors built from them agree to this relative to their scale.
NEWTON_TOL = 1e-7
# Contact geometry (distances, points, normals) is closed-form for these primitive pairs: float64 round-off.
GEOM_TOL = 1e-9

# a box (4 contacts), a condim-6 capsule (2) and a condim-1 sphere through an explicit pair (1) pressed into the
# floor, a sphere in the air: 7 active contacts of a pair table of 15 rows; contact sensors report in MuJoCo's order
XML = """<mujoco>
  <size nconmax="{nconmax}" njmax="{njmax}"/>
  <option cone="{cone}" impratio="{impratio}" solver="Newton" iterations="100" tolerance="1e-12" ls_iterations="50"
          jacobian="dense"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="box" pos="0 0 .095"><freejoint/><geom name="box" type="box" size=".1 .1 .1"/>
      <site name="sole" type="box" size=".12 .12 .02" pos="0 0 -.1"/></body>
    <body name="rod" pos=".5 0 .046"><freejoint/>
      <geom name="rod" type="capsule" size=".05 .2" euler="0 90 0" condim="6"/></body>
    <body name="ball" pos="-.5 .3 .097"><freejoint/><geom name="ball" type="sphere" size=".1" condim="1"/></body>
    <body name="far" pos="1 1 1"><freejoint/><geom name="far" type="sphere" size=".05"/></body>
  </worldbody>
  <contact><pair geom1="ball" geom2="floor" condim="3" friction=".7 .7 .01 .001 .001"/></contact>
  <sensor>
    <touch site="sole"/>
    <contact geom1="floor" data="found force dist pos normal" num="8"/>
  </sensor>
</mujoco>"""
NACTIVE = 7  # active contacts of XML at its initial positions


def _xml(nconmax=-1, njmax=-1, cone="pyramidal"):
    return XML.format(nconmax=nconmax, njmax=njmax, cone=cone, impratio=1 if cone == "pyramidal" else 3)


def _mujoco(xml, seed=0):
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = 0.1 * np.random.default_rng(seed).normal(size=mjm.nv)
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


forward = jax.jit(mjl.forward)


def _warnings(d):
    w = np.asarray(d.warning_number)
    return int(w[..., types.Warning.CONTACTFULL].sum()), int(w[..., types.Warning.CNSTRFULL].sum())


# ---------------------------------------------------------------------------------------------------------
# configuration: where the caps come from


def test_caps_from_size_config_and_errors():
    raw = mjl.load_mjcf_string(_xml())
    full = driver.pair_table(raw).nconmax
    assert (raw.size_nconmax, raw.size_njmax) == (-1, -1) and raw.nconmax == full == 15 and not driver.capped(raw)
    m = mjl.load_mjcf_string(_xml(nconmax=8))
    assert (m.size_nconmax, m.size_njmax) == (8, -1) and m.nconmax == 8 and driver.capped(m)
    # every capped slot has the largest condim's rows (6: 10 pyramid edges)
    assert m.njmax == 8 * 10 == constraint.plan(m).nefc
    # configure keeps the model's cap while changing other fields; -1 lifts it; n sets another
    assert mjl.configure(m, gradients="unrolled").nconmax == 8
    assert mjl.configure(m, nconmax=-1).nconmax == full
    assert mjl.configure(raw, nconmax=5).nconmax == 5
    # a cap above what the pair table produces changes nothing
    big = mjl.load_mjcf_string(_xml(nconmax=100, njmax=1000))
    assert (big.nconmax, big.njmax) == (raw.nconmax, raw.njmax) and not driver.capped(big)
    # njmax: contact slots are cut until the rows fit (10 rows each here)
    assert mjl.load_mjcf_string(_xml(njmax=75)).nconmax == 7
    # the warning an overflow counts: CONTACTFULL where nconmax set the cap, CNSTRFULL where njmax did
    # (test_small_capacity_overflows_and_flags counts them through the pipeline, the CNSTRFULL case slow)
    assert driver._cap_warning(m) == types.Warning.CONTACTFULL
    cut = mjl.load_mjcf_string(_xml(njmax=30))
    assert cut.nconmax == 3 and driver._cap_warning(cut) == types.Warning.CNSTRFULL
    # the capacity decides Data's shapes: m.replace(config=...) cannot change it
    with pytest.raises(ValueError, match="configure"):
        m.replace(config=m.config.replace(nconmax=4))
    for bad in (-2, 1.5, True):
        with pytest.raises(ValueError, match="Config.nconmax"):
            mjl.Config(nconmax=bad)
    with pytest.raises(ValueError, match="Config.njmax"):
        mjl.Config(njmax=-3)
    limited = """<mujoco><size njmax="1"/><worldbody><body><joint type="slide" range="0 1"/>
      <joint type="hinge" range="-1 1"/><geom size=".1"/></body></worldbody></mujoco>"""
    with pytest.raises(ValueError, match="njmax=1 is below the model's 2"):
        mjl.load_mjcf_string(limited)


# ---------------------------------------------------------------------------------------------------------
# enough capacity: MuJoCo's results


@pytest.mark.parametrize(
    "cone,nconmax,njmax",
    [
        ("pyramidal", 8, -1),
        pytest.param("pyramidal", -1, 70, marks=pytest.mark.slow),
        pytest.param("elliptic", 8, -1, marks=pytest.mark.slow),
    ],
)
def test_capped_layout_matches_mujoco(cone, nconmax, njmax):
    """Caps below the pair table's rows but above the active contacts: contacts, rows, forces and the contact sensors
    (which read the contacts in MuJoCo's order through the capped layout) are MuJoCo's, and nothing is flagged."""
    xml = _xml(nconmax, njmax, cone)
    m = mjl.load_mjcf_string(xml)
    assert driver.capped(m) and m.nconmax >= NACTIVE
    mjm, mjd = _mujoco(xml)
    assert mjd.ncon == NACTIVE
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    assert _warnings(d) == (0, 0)
    assert int(d.ncon) == mjd.ncon and int(d.nefc) == mjd.nefc
    oracle.close(d.qacc, mjd.qacc, NEWTON_TOL, "qacc")
    oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, NEWTON_TOL, "qfrc_constraint")
    rm, ro = oracle.match_rows(mjd, mjm, d)
    oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], NEWTON_TOL, "efc_force")
    act = np.asarray(d.contact.active)
    np.testing.assert_allclose(np.sort(np.asarray(d.contact.dist)[act]), np.sort(mjd.contact.dist), atol=GEOM_TOL)
    oracle.close(d.sensordata, mjd.sensordata, NEWTON_TOL, "sensordata")


# ---------------------------------------------------------------------------------------------------------
# too little capacity: flagged per environment, the deepest contacts kept


# the njmax cap's case is slow (CI time: a program of its own that differs from the first one's in the warning index
# alone); test_caps_from_size_config_and_errors checks that index (driver._cap_warning) by default
@pytest.mark.parametrize(
    "nconmax,njmax,flag", [(3, -1, "contact"), pytest.param(-1, 30, "constraint", marks=pytest.mark.slow)]
)
def test_small_capacity_overflows_and_flags(nconmax, njmax, flag):
    xml = _xml(nconmax, njmax)
    m = mjl.load_mjcf_string(xml)
    assert m.nconmax == 3
    mjm, mjd = _mujoco(xml)
    d0 = oracle.data_with_state(m, mjm, mjd)
    lifted = d0.replace(qpos=d0.qpos.at[jp.asarray(mjm.jnt_qposadr[:3] + 2)].add(1.0))  # nothing touches
    db = jax.tree.map(lambda a, b: jp.stack([a, b]), d0, lifted)
    d = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(m, db)
    w = np.asarray(d.warning_number)
    which, other = (types.Warning.CONTACTFULL, types.Warning.CNSTRFULL)[:: 1 if flag == "contact" else -1]
    np.testing.assert_array_equal(w[:, which], [1, 0])
    np.testing.assert_array_equal(w[:, other], [0, 0])
    np.testing.assert_array_equal(np.asarray(d.ncon), [3, 0])
    # the kept contacts are the deepest of MuJoCo's (which has room for all 7)
    dist = np.asarray(d.contact.dist)[0][np.asarray(d.contact.active)[0]]
    np.testing.assert_allclose(np.sort(dist), np.sort(mjd.contact.dist)[:3], atol=GEOM_TOL)
    assert np.all(np.isfinite(np.asarray(d.qacc)))


def test_cap_of_zero_flags_every_contact():
    m = mjl.load_mjcf_string(_xml(nconmax=0))
    assert m.nconmax == 0 and driver.pair_table(m).nconmax > 0
    mjm, mjd = _mujoco(_xml())
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    assert int(d.ncon) == 0 and _warnings(d) == (1, 0)


# ---------------------------------------------------------------------------------------------------------
# one row per limit where only one side can be active

LIMITS_XML = """<mujoco>
  <option solver="Newton" iterations="100" tolerance="1e-12" ls_iterations="50" jacobian="dense"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="a"><joint name="hinge" type="hinge" axis="0 1 0" range="-30 30" margin=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
      <body name="b" pos=".3 0 0"><joint name="narrow" type="slide" axis="1 0 0" range="0 .05" margin=".04"/>
        <geom type="sphere" size=".05"/></body></body>
    <body name="c" pos="0 1 0"><joint name="slide" type="slide" axis="0 0 1" range="-.2 .3"/>
      <geom type="sphere" size=".05"/></body>
  </worldbody>
  <tendon><fixed name="t" limited="true" range="-.4 .4" margin=".05"><joint joint="hinge" coef="1"/>
    <joint joint="slide" coef="1"/></fixed></tendon>
</mujoco>"""


def test_one_row_limits_match_mujoco_and_flag_both_sides():
    mjm = mujoco.MjModel.from_xml_string(LIMITS_XML)
    m = mjl.load_mjcf_string(LIMITS_XML)
    np.testing.assert_array_equal(m.jnt_limit_onerow, [True, False, True])  # .05 < 2 x .04: two rows
    np.testing.assert_array_equal(m.tendon_limit_onerow, [True])
    p = constraint.plan(m)
    assert p.nefc == 1 + 2 + 1 + 1  # hinge, narrow slide (both sides), slide, tendon
    # the hinge within its margin of either limit, the slide past either limit, the narrow slide within both
    # margins or one, the tendon (hinge + slide) past either limit
    for qpos in ([0.48, 0.02, -0.21], [-0.45, 0.03, 0.31], [0.2, 0.02, 0.25], [-0.3, 0.045, -0.15]):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = qpos
        mjd.qvel[:] = [0.3, -0.2, 0.1]
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, oracle.data_with_state(m, mjm, mjd))
        assert int(d.nefc) == mjd.nefc and _warnings(d) == (0, 0)
        rm, ro = oracle.match_rows(mjd, mjm, d)
        Jm = mjd.efc_J[: mjd.nefc * mjm.nv].reshape(mjd.nefc, mjm.nv)
        np.testing.assert_allclose(np.asarray(d.efc_J)[ro], Jm[rm], atol=GEOM_TOL)
        for name in ("efc_pos", "efc_aref", "efc_R"):
            oracle.close(np.asarray(getattr(d, name))[ro], getattr(mjd, name)[rm], GEOM_TOL, name)
        oracle.close(d.qacc, mjd.qacc, NEWTON_TOL, "qacc")
    # a margin widened at run time (a traced float) past half the hinge's range: both sides active, one row
    # left out and counted (no retrace: the row layout is static)
    wide = m.replace(jnt_margin=m.jnt_margin.at[0].set(1.0))
    d = forward(wide, mjl.make_data(wide))
    assert _warnings(d) == (0, 1)
