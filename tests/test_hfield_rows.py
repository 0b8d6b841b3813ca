"""Constraint rows of height-field contacts mixed with other condims (pipeline/constraint.py): contact blocks are
built per condim and put back in slot order; with a contact or constraint capacity below the slots (`<size
nconmax/njmax>`, `Config.nconmax/njmax`) the deepest contacts are kept in slots of the model's largest condim (a
condim-1 contact there makes one frictionless row) and an overflow is counted per environment. Oracle: mj_forward in
float64."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import types  # noqa: E402
from mjx_lite.pipeline import constraint  # noqa: E402
from tests import oracle  # noqa: E402

# Newton run to convergence on both sides (as tests/test_capacity.py): accelerations and forces to this relative to
# their scale
NEWTON_TOL = 1e-7
# closed-form sphere/capsule-prism distances (hfield.py) against MuJoCo's converged GJK/EPA on the prisms
GEOM_TOL = 1e-6

# a bumpy 5 x 5 field; two spheres (condim 3 and 6) and a condim-1 capsule settle on it: height-field slots of three
# condims, interleaved in the slot order (the sphere group holds both spheres), with the sphere-capsule pairs between
XML = """<mujoco>
  <size nconmax="{nconmax}" njmax="{njmax}"/>
  <option solver="Newton" iterations="100" tolerance="1e-12" ls_iterations="50" jacobian="dense" timestep="0.005"/>
  <asset><hfield name="h" nrow="5" ncol="5" size=".5 .5 .05 .1"
    elevation="0 .2 .4 .2 0  .2 .5 .7 .5 .2  .3 .6 1 .6 .3  .2 .5 .7 .5 .2  0 .2 .4 .2 0"/></asset>
  <worldbody>
    <geom name="field" type="hfield" hfield="h" condim="1"/>
    <body name="a" pos=".12 .05 .4"><freejoint/><geom name="a" type="sphere" size=".06" condim="3"/></body>
    <body name="b" pos="-.25 .2 .4"><freejoint/><geom name="b" type="sphere" size=".07" condim="6"
      friction="1 .01 .002"/></body>
    <body name="c" pos=".2 -.22 .4"><freejoint/>
      <geom name="c" type="capsule" size=".03 .1" euler="0 90 20" condim="1"/></body>
  </worldbody>
</mujoco>"""


def _xml(nconmax=-1, njmax=-1):
    return XML.format(nconmax=nconmax, njmax=njmax)


def _settled(xml, steps=150):
    """MuJoCo's model and data after the bodies fell onto the field (several prisms under each), forwarded."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


@pytest.fixture(scope="module")
def settled():
    mjm, mjd = _settled(_xml())
    return mjm, mjd, mjl.load_mjcf_string(_xml())


def test_mixed_condim_rows_match_mujoco(settled):
    mjm, mjd, m = settled
    p = constraint.plan(m)
    dims = p.con_dim
    assert set(dims.tolist()) == {1, 3, 6}
    # the slot order alternates condims, so the per-condim blocks are put back by several runs of slices
    assert np.count_nonzero(np.diff(dims) != 0) >= 2
    geom = mjd.contact.geom[: mjd.ncon]
    assert mjd.ncon >= 4 and {int(g) for g in geom[:, 1]} >= {1, 2, 3}  # every body on the field
    d = jax.jit(mjl.forward)(m, oracle.data_with_state(m, mjm, mjd))
    assert int(d.ncon) == mjd.ncon and int(d.nefc) == mjd.nefc
    rm, ro = oracle.match_rows(mjd, mjm, d)
    nv = mjm.nv
    oracle.close(np.asarray(d.efc_J)[ro], mjd.efc_J[: mjd.nefc * nv].reshape(-1, nv)[rm], GEOM_TOL, "efc_J")
    oracle.close(np.asarray(d.efc_pos)[ro], mjd.efc_pos[rm], GEOM_TOL, "efc_pos")
    oracle.close(np.asarray(d.efc_aref)[ro], mjd.efc_aref[rm], GEOM_TOL, "efc_aref")
    oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], NEWTON_TOL, "efc_force")
    oracle.close(d.qacc, mjd.qacc, NEWTON_TOL, "qacc")
    # each live contact's efc_address points at its own rows (type and id of the slot)
    live = np.asarray(constraint.contact_live(m, d.contact))
    adr = np.asarray(d.contact.efc_address)
    assert np.all(adr[~live] == -1) and np.all(adr[live] >= 0)
    np.testing.assert_array_equal(np.asarray(d.efc_id)[adr[live]], np.nonzero(live)[0])


# slow (CI budget): the height field's overflow flag stays in test_collision_hfield's
# test_overflow_flag_when_geom_outgrows_window, capacities below the slot count in test_capacity.py
@pytest.mark.slow
def test_capacity_below_slots_keeps_mujoco_results_and_flags_overflow(settled):
    """A contact cap between the active contacts and the slots: MuJoCo's results, nothing flagged; a cap below the
    active contacts: the deepest kept and the step flagged in that environment only (vmapped: one environment in
    contact, one lifted clear)."""
    mjm, mjd, _ = settled
    n = mjd.ncon
    ok = mjl.load_mjcf_string(_xml(nconmax=n + 2))
    small = mjl.load_mjcf_string(_xml(nconmax=n - 2))
    assert ok.njmax < constraint.plan(mjl.load_mjcf_string(_xml())).nefc
    d = jax.jit(mjl.forward)(ok, oracle.data_with_state(ok, mjm, mjd))
    assert np.asarray(d.warning_number)[types.Warning.CONTACTFULL] == 0
    oracle.close(d.qacc, mjd.qacc, NEWTON_TOL, "qacc")
    rm, ro = oracle.match_rows(mjd, mjm, d)
    oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], NEWTON_TOL, "efc_force")

    d0 = oracle.data_with_state(small, mjm, mjd)
    lifted = d0.replace(qpos=d0.qpos.at[jp.asarray(mjm.jnt_qposadr + 2)].add(1.0))
    db = jax.tree.map(lambda a, b: jp.stack([a, b]), d0, lifted)
    out = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(small, db)
    w = np.asarray(out.warning_number)
    np.testing.assert_array_equal(w[:, types.Warning.CONTACTFULL], [1, 0])
    np.testing.assert_array_equal(np.asarray(out.ncon), [n - 2, 0])
    kept = np.sort(np.asarray(out.contact.dist)[0][np.asarray(out.contact.active)[0]])
    np.testing.assert_allclose(kept, np.sort(mjd.contact.dist[:n])[: n - 2], atol=GEOM_TOL)
    assert np.all(np.isfinite(np.asarray(out.qacc)))


# CI time (41 of this file's 69 CPU-s: the reverse pass through 3 Newton steps): the height-field collider's gradient
# stays in the default selection (test_collision_hfield::test_gradient_of_deepest_distance_is_finite), and so do
# gradients through contact rows against central differences (test_constraint_forward, test_forward)
@pytest.mark.slow
def test_rollout_gradient_matches_central_differences(settled):
    """d/d(initial qvel) of a 3-step rollout through the mixed-condim height-field rows (float64)."""
    mjm, mjd, m = settled
    d0 = oracle.data_with_state(m, mjm, mjd)

    def final_z(v):
        def body(d, _):
            return mjl.step(m, d), None

        d = jax.lax.scan(body, d0.replace(qvel=d0.qvel.at[0].add(v)), None, length=3)[0]
        return jp.sum(d.qpos[jp.asarray(mjm.jnt_qposadr + 2)]) + d.qpos[0]

    g, fd = oracle.grad_and_central_difference(final_z, 0.0, 1e-5)
    assert np.isfinite(g)
    np.testing.assert_allclose(g, fd, rtol=oracle.GRAD_FD_RTOL, atol=1e-9)
