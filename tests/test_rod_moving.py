"""Contacts of elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with twist joints) carried by a moving body, against
MuJoCo 4.0 in float64: the rod pinned to an arm on a hinge, or to a free body, draped over a capsule and a box. The
contact rows of the rod side move with the axis point and the rod's rotation and turn with the rod's rotation alone,
not the carrier's (pipeline/rod_contact.py; the rows with the carrier's rotation, as for any flex, differ from
MuJoCo's by up to 1.0 in the hinge column). Compiled fields, contacts, rows and qacc after a step from random states
(both efc_J layouts, both cones), a trajectory, a gradient."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from tests import oracle
from tests.test_flex_geom import _compare

# A 4-edge rod pinned (vertex 0) to an arm on a hinge (or to a free body), its other vertices sliding under the arm;
# a capsule (condim 6) and a box (condim 4) under it, the plane below. The rod does not collide with its carrier.
ROD = """
<mujoco>
  <option timestep="0.001" cone="{cone}" tolerance="1e-15" iterations="200" ls_iterations="50" {jac}/>
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <geom type="capsule" size="0.03 0.2" pos="0.2 0 0.1" euler="90 0 0" condim="6" friction="0.8 0.02 0.01"/>
    <geom type="box" size="0.03 0.2 0.02" pos="0.35 0 0.118" euler="0 0 5" condim="4"/>
    <body name="arm" pos="0 0 0.138">
      {joint}
      <geom type="sphere" size="0.02" contype="0" conaffinity="0" mass="0.3"/>
      <flexcomp name="r" type="grid" dim="1" count="5 1 1" spacing="0.1 0.1 0.1" radius="0.01" mass="0.5"
                pos="0.2 0 0">
        <elasticity young="1e6" damping="0.01"/>
        <contact condim="6" selfcollide="none" contype="1" conaffinity="2"/>
        <pin id="0"/>
      </flexcomp>
    </body>
  </worldbody>
</mujoco>
"""
HINGE = '<joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>'
# contacts: the same collision formulas (edge-capsule, edge-box) on the same vertex positions
CONTACT_ATOL = 1e-12
# efc_J, efc_pos, efc_R, efc_aref at one state: measured efc_J 6.4e-14, efc_aref 1.1e-12 at |aref| 557
# (/tmp/flex38d/moving.py, 3 random states)
FWD_RTOL, FWD_ATOL = 1e-9, 1e-9
# qacc: measured 7e-8 at |qacc| 650 (tests/test_flex_rod_contact.py's QACC_ATOL: the Newton solution's stopping point
# with condim-6 rows whose R reaches 5e7, amplified by the twist dofs' polar inertia ~1e-6)
QACC_ATOL = 1e-5
TRAJ_ATOL = 1e-9  # qpos / qvel / plastic after 100 steps


def rod(cone="elliptic", joint=HINGE, jac=""):
    return ROD.format(cone=cone, joint=joint, jac=jac)


class _Models(dict):
    """(mjx_lite, mujoco) models by (cone, joint, jac), loaded on first use."""

    def __missing__(self, key):
        xml = rod(*key)
        self[key] = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
        return self[key]


@pytest.fixture(scope="module")
def models():
    return _Models()


def _mj_state(mjm, steps, seed):
    """MuJoCo's state after `steps` steps, then a random perturbation (2 mm, 0.1/s; the carrier's first dof at 1/s)
    and one more step (the rod frames in plastic set); forwarded."""
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    rng = np.random.default_rng(seed)
    mjd.qpos[:] += 0.002 * rng.standard_normal(mjm.nq)
    mjd.qvel[:] = 0.1 * rng.standard_normal(mjm.nv)
    mjd.qvel[mjm.jnt_dofadr[0] + (3 if mjm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE else 0)] = 1.0
    mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def test_compiled_model_matches_mujoco(models):
    m, mjm = models["elliptic", HINGE, ""]
    assert oracle.compare_models(m, mjm) == []
    assert m.nplastic == mjm.nplastic > 0


# slow: a forward program of the rod compiles in ~15 s of CPU at the tests' optimisation level (measured
# /tmp/flex38d/time_fwd.py for the rod on a plane); tests/test_flex_rod_contact.py's default test keeps the rod rows
# against MuJoCo in the default selection (a static carrier: the same code with the carrier's rotation zero)
@pytest.mark.slow
@pytest.mark.parametrize(("key", "steps", "seed"), [
    (("elliptic", HINGE, ""), 100, 1), (("elliptic", HINGE, ""), 200, 2), (("pyramidal", HINGE, ""), 50, 3),
    (("elliptic", HINGE, 'jacobian="sparse"'), 100, 1), (("elliptic", "<freejoint/>", ""), 100, 4),
])  # fmt: skip
def test_contacts_rows_and_qacc_match_mujoco(models, key, steps, seed):
    """Every contact (edge-capsule, edge-box), the rows (the hinge or free joint's columns: the carrier's rotation
    left out of the rod side) and qacc of mj_forward, with the carrier turning at 1 rad/s."""
    m, mjm = models[key]
    mjd = _mj_state(mjm, steps, seed)
    assert mjd.ncon >= 1
    d = jax.jit(mjx_lite.forward)(m, oracle.data_with_state(m, mjm, mjd))
    _compare(m, mjm, mjd, d, QACC_ATOL, CONTACT_ATOL, FWD_RTOL, FWD_ATOL)


@pytest.mark.slow
def test_trajectory_matches_mujoco(models):
    """100 steps of the rod on the swinging arm from a random state: qpos, qvel and the rod frames in plastic."""
    m, mjm = models["pyramidal", HINGE, ""]
    mjd = _mj_state(mjm, 100, 1)
    oracle.check_steps(m, mjm, mjd, oracle.data_with_state(m, mjm, mjd), 100, ("qpos", "qvel", "plastic"), TRAJ_ATOL)
    assert mjd.ncon > 0


@pytest.mark.slow
def test_rollout_gradient_matches_central_differences(models):
    """d(mean vertex height after 20 steps)/d(friction scale of every geom): finite, equal to central differences,
    batched equal to unbatched (oracle.check_rollout_grad)."""
    m, mjm = models["pyramidal", HINGE, ""]
    d0 = oracle.data_with_state(m, mjm, _mj_state(mjm, 100, 1))
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_friction=m.geom_friction * k), 1.0)
