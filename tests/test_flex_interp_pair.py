"""Contacts between two interpolated flexes (dof="trilinear" / "quadratic" on both sides) against MuJoCo 4.0: the
element pairs, dist, pos and normals; the constraint rows (each side's cell nodes at the contact's interpolation
weights, no weight cut-off; diagApprox from both sides' signed node weights) and qacc with MuJoCo's contact points
and frames; a trajectory and a gradient (slow); and MuJoCo's 50-contact cap (collision/flex_cap.py) against a
direct transcription of its selection loop."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.collision import flex_cap
from tests import oracle
from tests import test_flex_self as pairs

# a cube of one cell pinned by its four bottom nodes, and a second one on a rotated body pressed into its top face
XML = """<mujoco><option timestep="0.002" ccd_tolerance="1e-13" ccd_iterations="1000" solver="Newton"
 tolerance="1e-12" iterations="100" jacobian="sparse"/><worldbody>
<flexcomp name="a" type="grid" count="2 2 2" spacing=".1 .1 .1" dim="3" radius=".005" mass="1" dof="{dof}">
  <elasticity young="3e3" poisson="0.2"/><pin id="0 1 2 3"/>
  <contact selfcollide="none" condim="4" priority="1" friction=".7 .01 .001" margin=".002"/></flexcomp>
<body name="holder" pos=".03 .02 .097" euler="4 -3 20">
<flexcomp name="b" type="grid" count="2 2 2" spacing=".1 .1 .1" dim="3" radius=".005" mass="1" dof="{dof}">
  <elasticity young="3e3" poisson="0.2"/><contact selfcollide="none" solref=".03 .8"/></flexcomp></body>
</worldbody></mujoco>"""
TRAJ_ATOL = 1e-6  # flex vertices after 30 steps (MuJoCo's EPA points within ~1e-6 of the converged ones)


# slow: "quadratic" (27 nodes a side, ~17 s wall at load 5); its rows share the code of "trilinear"
@pytest.fixture(scope="module", params=["trilinear", pytest.param("quadratic", marks=pytest.mark.slow)])
def scene(request):
    xml = XML.format(dof=request.param)
    return pairs._load(xml), mujoco.MjModel.from_xml_string(xml)


def test_contacts_rows_and_qacc_match_mujoco(scene):
    """MuJoCo's element pairs, dist, pos, normals and mixed parameters; efc_J, efc_pos, efc_R, efc_aref and qacc with
    MuJoCo's points and frames (FWD tolerances), qacc end to end (EPA tolerance). One compiled program for both."""
    m, mjm = scene
    assert m.nflexnode == mjm.nflexnode > 0
    mjd = pairs._mujoco(mjm)
    theirs = pairs._mj_contacts(mjd)
    assert theirs and {(k[0], k[2]) for k in theirs} == {(0, 1)}
    d0 = mjx_lite.make_data(m)
    d = pairs._forward_or_given(m, d0, d0.contact, False)
    pairs._compare_contacts(pairs._contacts(m, d), theirs)
    pairs._compare_rows(m, mjm, mjd, d, qacc_rtol=pairs.EPA_QACC_RTOL)
    given = pairs._with_mujoco_contacts(m, mjd, d)(m, d).contact
    pairs._compare_rows(m, mjm, mjd, pairs._forward_or_given(m, pairs._state(m, mjd), given, True))


@pytest.mark.slow
def test_trajectory_matches_mujoco(scene):
    """30 steps from the pressed state: flex vertices equal MuJoCo's to TRAJ_ATOL, contacts throughout."""
    m, mjm = scene
    mjd = mujoco.MjData(mjm)

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=30)[0]

    d = roll(mjx_lite.make_data(m))
    ncon = []
    for _ in range(30):
        mujoco.mj_step(mjm, mjd)
        ncon.append(mjd.ncon)
    assert min(ncon) > 0
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, rtol=0, atol=TRAJ_ATOL)


@pytest.mark.slow
def test_grad_matches_central_differences(scene):
    """d(rollout)/d(the contact time constant: flex a's, the higher priority): finite and equal to central
    differences."""
    m, _ = scene
    oracle.check_rollout_grad(
        m, mjx_lite.make_data(m), lambda m, k: m.replace(flex_solref=m.flex_solref.at[0, 0].set(k)), 0.02
    )


def _mujoco_filter(dist, pos, cap):
    """MuJoCo's filterFlexContacts, transcribed loop for loop: the kept rows."""
    n = len(dist)
    if n <= cap:
        return set(range(n))
    selected, min_dist = np.zeros(n, bool), np.full(n, np.inf)
    best = int(np.argmax(-dist))
    nsel = 0
    while nsel < cap and best >= 0:
        selected[best] = True
        nextbest, nextdist = -1, -1.0
        for i in range(n):
            if selected[i]:
                continue
            min_dist[i] = min(min_dist[i], float(np.sum((pos[i] - pos[best]) ** 2)))
            if min_dist[i] > nextdist:
                nextdist, nextbest = min_dist[i], i
        nsel += 1
        best = nextbest
    return set(np.nonzero(selected)[0].tolist())


@pytest.mark.parametrize("n,active", [(120, 90), (120, 40), (30, 30)])
def test_cap_selects_as_mujoco(n, active):
    """flex_cap.spread keeps the rows MuJoCo's selection keeps among the active candidates (random depths and
    points, inactive rows interleaved), all of them at or below the cap."""
    rng = np.random.default_rng(n + active)
    dist, pos = -rng.uniform(0, 0.01, n), rng.uniform(-0.1, 0.1, (n, 3))
    live = np.zeros(n, bool)
    live[rng.permutation(n)[:active]] = True
    kept = np.asarray(jax.jit(flex_cap.spread)(dist, pos, live))
    idx = np.nonzero(live)[0]
    want = {int(idx[i]) for i in _mujoco_filter(dist[idx], pos[idx], flex_cap.MAXCONPAIR)}
    assert set(np.nonzero(kept)[0].tolist()) == want
