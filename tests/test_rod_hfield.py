"""Elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with twist joints) against height fields, against MuJoCo 4.0 in
float64: the rod's edges collide with the field's prisms as a rope's (collision/flex_hfield.py: a capsule per edge,
one contact per prism within the margin), and their rows carry the rod's lever-arm coupling into the twist joints
and the edge's rotation (pipeline/rod_contact.py). Compiled fields, contacts, rows and qacc at MuJoCo's own states
(after a step from a random state), the distances of contacts apart against brute force, a trajectory, a gradient."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.models import flex
from tests import oracle
from tests.test_flex_geom import CURVED_ROWS_RTOL, GJK_QACC_ATOL, GJK_ROWS_ATOL, _compare
from tests.test_flex_hfield import CCD_CONVERGED, HF_ATOL, _check_exact_when_apart

# A 4-edge rod (condim 6, elliptic or pyramidal cone) dropped across the bumpy, tilted terrain of
# tests/test_flex_hfield.py (mjx_lite.models.flex's 6 x 7 field); MuJoCo run to convergence (CCD_CONVERGED).
ROD = f"""
<mujoco>
  <option timestep="0.001" cone="{{cone}}" tolerance="1e-15" iterations="200" ls_iterations="50"/>
  <asset><hfield name="terrain" nrow="6" ncol="7" size=".4 .3 .04 .05" elevation="{flex._TERRAIN}"/></asset>
  <worldbody>
    <geom type="hfield" hfield="terrain" pos=".01 -.02 0" euler="4 -3 10" condim="6" friction="0.8 0.02 0.01"/>
    <flexcomp name="r" type="grid" dim="1" count="5 1 1" spacing="0.1 0.1 0.1" radius="0.01" mass="0.5"
              pos="0 0.05 0.09" euler="0 0 20">
      <elasticity young="1e6" damping="0.01"/>
      <contact condim="6" selfcollide="none"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""
# MuJoCo collides each edge's capsule with a prism by GJK; ours is the exact segment-prism distance
# (hfield._capsule_prism). Contacts, rows and qacc: tests/test_flex_hfield.py's tolerances for the same collider
# (HF_ATOL; GJK rows and qacc). Measured (/tmp/flex38d/probe_hf2.py, both cones, 4 states: the first touch (step
# 150), resting (400), random states stepped once): dist 9.5e-14, pos 2.2e-8, frame 2.1e-6 (MuJoCo's GJK normals of
# contacts apart; 5e-13 at rest), efc_J 1.5e-5 at |J| ~ 1 (the normal's error times the lever arm over the edge
# length in the twist columns), efc_aref 2.2e-4 at |aref| 174, qacc 6e-4 at |qacc| 151 (all within rtol 1e-5 plus
# the named atol).
TOLS = {"qacc_atol": GJK_QACC_ATOL, "contact_atol": HF_ATOL, "fwd_rtol": CURVED_ROWS_RTOL, "fwd_atol": GJK_ROWS_ATOL}
# 100 steps from a resting contact state: MuJoCo's GJK normals' ~1e-6 through the solver (test_flex_hfield's)
TRAJ_ATOL = 1e-6


class _Models(dict):
    """(mjx_lite, mujoco) models by cone, loaded on first use."""

    def __missing__(self, cone):
        xml = ROD.format(cone=cone)
        mjm = mujoco.MjModel.from_xml_string(xml)
        for k, v in CCD_CONVERGED.items():
            setattr(mjm.opt, k, v)
        self[cone] = mjx_lite.load_mjcf_string(xml), mjm
        return self[cone]


@pytest.fixture(scope="module")
def models():
    return _Models()


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


def _mj_state(mjm, steps, seed=None):
    """MuJoCo's own state after `steps` steps of the drop; seed: then a random perturbation (2 mm, 0.1/s) and one
    more step (the rod's reference frames in plastic set); forwarded."""
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    if seed is not None:
        rng = np.random.default_rng(seed)
        mjd.qpos[:] += 0.002 * rng.standard_normal(mjm.nq)
        mjd.qvel[:] = 0.1 * rng.standard_normal(mjm.nv)
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def test_compiled_model_matches_mujoco(models):
    m, mjm = models["elliptic"]
    assert oracle.compare_models(m, mujoco.MjModel.from_xml_string(ROD.format(cone="elliptic"))) == []
    assert m.nplastic == mjm.nplastic > 0


# All slow: one forward program of a rod and a height field compiles in ~24 s of CPU at the tests' optimisation level
# (fwd_position alone ~14 s; a rope on the same field ~17 s; measured /tmp/flex38d/time_fwd.py). The default
# selection keeps each part against MuJoCo: the rod rows of element contacts (tests/test_flex_rod_contact.py) and
# flex elements against this field (tests/test_flex_hfield.py); here their combination. States: a random state
# stepped once at the first touch (contacts apart and penetrating, the rod frames set), the resting state.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("cone", "steps", "seed"),
    [("elliptic", 150, 1), ("elliptic", 400, None), ("pyramidal", 150, 1), ("pyramidal", 300, 2)],
)
def test_contacts_rows_and_qacc_match_mujoco(fwd, models, cone, steps, seed):
    """Every edge-prism contact (element contacts, one per prism), the rows with the twist coupling, and qacc of
    mj_forward; our contacts apart equal their brute-force distance to the prisms to round-off."""
    m, mjm = models[cone]
    mjd = _mj_state(mjm, steps, seed)
    dist = mjd.contact.dist[: mjd.ncon]
    assert mjd.ncon >= 3 and np.all(mjd.contact.geom[: mjd.ncon, 0] == 0)
    assert np.all(mjd.contact.vert[: mjd.ncon, 1] == -1)  # (element contacts only: no vertex-field contacts)
    d = fwd(m, oracle.data_with_state(m, mjm, mjd))
    _compare(m, mjm, mjd, d, **TOLS)
    if np.any(dist > 0):
        _check_exact_when_apart(m, mjm, mjd, d)
    twist = [mjm.jnt_dofadr[j] for j in range(mjm.njnt) if "_twist" in mjm.joint(j).name]
    assert np.abs(mjd.efc_J.reshape(mjd.nefc, mjm.nv)[:, twist]).max() > 1e-3  # the twist coupling is exercised


@pytest.mark.slow
def test_trajectory_matches_mujoco(models):
    """100 steps from MuJoCo's state at rest on the field (step 300): qpos, qvel and the rod frames in plastic."""
    m, mjm = models["pyramidal"]
    mjd = _mj_state(mjm, 300)
    oracle.check_steps(m, mjm, mjd, oracle.data_with_state(m, mjm, mjd), 100, ("qpos", "qvel", "plastic"), TRAJ_ATOL)
    assert mjd.ncon > 3


@pytest.mark.slow
def test_rollout_gradient_matches_central_differences(models):
    """d(mean vertex height after 20 steps)/d(the field's friction scale) from the first touch: finite, equal to
    central differences, batched equal to unbatched (oracle.check_rollout_grad)."""
    m, mjm = models["pyramidal"]
    d0 = oracle.data_with_state(m, mjm, _mj_state(mjm, 150, 1))
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_friction=m.geom_friction * k), 1.0)
