"""Oracle tests of the noslip post-processor (`<option noslip_iterations>`, mjx_lite/solver/noslip.py) against
MuJoCo C in float64: the sweeps on MuJoCo's own constraint problems, box-on-a-slope trajectories through the whole
pipeline with every main solver and cone, dm_control's dog, and gradients through it."""

import copy
import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.solver import common, noslip
from mjx_lite.types import ConstraintState
from tests import oracle

# The same sweeps in the same order on the same problem: round-off (relative to the field's scale).
SWEEP_TOL = 1e-10
# Through the pipeline the main solver runs first; its own convergence (tolerance 1e-12) bounds the agreement of the
# trajectories: Newton to round-off amplified over the steps, CG and PGS (first order) to their stopping point.
TRAJ_TOL = {"Newton": 1e-9, "CG": 1e-7, "PGS": 1e-5}
STEPS = 100

SLOPE_XML = """
<mujoco>
  <option cone="{cone}" solver="{solver}" noslip_iterations="{ns}" gravity="0 -5 -9.81" tolerance="1e-12"
          iterations="200"><flag island="disable"/></option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .1"><freejoint/>
      <geom type="box" size=".1 .1 .1" condim="{condim}" friction="0.8 0.02 0.001" solref="0.05 1"/></body>
    <body pos=".5 0 .5"><joint name="h1" type="hinge" axis="0 1 0" frictionloss="0.3" range="-.1 .1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/></body>
  </worldbody>
</mujoco>
"""
# A box on a plane tilted by gravity (friction 0.8 > tan = 5 / 9.81: it should stick), soft contacts (it creeps
# without noslip), a hinge with friction loss and a limit. Islands are disabled in MuJoCo: it sweeps each island
# separately and stops each by its own improvement; mjx_lite sweeps all rows at once (the same sweeps when one
# island holds every row, as here).


def _slope(solver, cone, condim, ns):
    return SLOPE_XML.format(solver=solver, cone=cone, condim=condim, ns=ns)


def _mujoco_problem(mjm, mjd):
    """Our noslip inputs from MuJoCo's data after its main solver: Blocks in MuJoCo's row order, M, J, the
    friction of the elliptic contacts, the cones' rows, mu and friction (for the dual state)."""
    nefc, nv = mjd.nefc, mjm.nv
    J = mjd.efc_J[: nefc * nv].reshape(nefc, nv)
    M = np.zeros((nv, nv))
    mujoco.mj_fullM(mjm, mjd, M)
    elliptic = mjm.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    cons = [mjd.contact[c] for c in range(mjd.ncon) if mjd.contact[c].efc_address >= 0]
    blocks = noslip.blocks_from_contacts(np.arange(mjd.ne, mjd.ne + mjd.nf), elliptic,
                                         np.array([c.efc_address for c in cons], np.int64),
                                         np.array([c.dim for c in cons], np.int64))  # fmt: skip
    friction = noslip.contact_friction(blocks, jp.asarray(np.array([c.friction for c in cons]).reshape(-1, 5)))
    kind = np.array([_KIND[int(t)] for t in mjd.efc_type[:nefc]], np.int64)
    cones, mus, frics = {}, {}, {}
    for c in cons:
        if elliptic and c.dim > 1:
            cones.setdefault(c.dim, []).append(np.arange(c.efc_address, c.efc_address + c.dim))
            mus.setdefault(c.dim, []).append(c.mu)
            frics.setdefault(c.dim, []).append(c.friction[: c.dim - 1])
            kind[c.efc_address : c.efc_address + c.dim] = common.CONE
    dims = sorted(cones)
    state_args = (kind, tuple(np.array(cones[k]) for k in dims), tuple(jp.asarray(np.array(mus[k])) for k in dims),
                  tuple(jp.asarray(np.array(frics[k])) for k in dims))  # fmt: skip
    return blocks, M, J, friction, state_args


_C = mujoco.mjtConstraint
_KIND = {int(k): v for k, v in {
    _C.mjCNSTR_EQUALITY: common.EQUALITY,
    _C.mjCNSTR_FRICTION_DOF: common.FRICTION,
    _C.mjCNSTR_FRICTION_TENDON: common.FRICTION,
    _C.mjCNSTR_LIMIT_JOINT: common.INEQUALITY,
    _C.mjCNSTR_LIMIT_TENDON: common.INEQUALITY,
    _C.mjCNSTR_CONTACT_FRICTIONLESS: common.INEQUALITY,
    _C.mjCNSTR_CONTACT_PYRAMIDAL: common.INEQUALITY,
    _C.mjCNSTR_CONTACT_ELLIPTIC: common.CONE,
}.items()}


# not slow: the iteration bound and the improvement test, the QCQP's closed form (n = 2) and its Cholesky (n = 5);
# the rest of the matrix is slow (pyramidal too, CI time: pyramidal noslip against MuJoCo stays by default end to end
# in test_islands_sweep_on_their_own[Newton-pyramidal-3] and through its gradient in test_gradients[implicit-pyramidal])
_SWEEP_DEFAULT = {("elliptic", 3, 2), ("elliptic", 6, 50)}
_SWEEP_MATRIX = [pytest.param(c, k, s, marks=() if (c, k, s) in _SWEEP_DEFAULT else pytest.mark.slow)
                 for c in ("pyramidal", "elliptic") for k in (3, 4, 6) for s in (2, 50)]  # fmt: skip


@pytest.mark.parametrize("cone,condim,sweeps", _SWEEP_MATRIX)
def test_sweeps_on_mujocos_problem(cone, condim, sweeps):
    """MuJoCo's main solver output (noslip off), then our sweeps on MuJoCo's own problem (its rows, its order):
    efc_force, qacc, the number of sweeps and the dual efc_state as MuJoCo's run with noslip on. `sweeps` 2 stops
    by the iteration bound (partial sweeps), 50 by the improvement test."""
    for seed in range(2):
        mjm = mujoco.MjModel.from_xml_string(_slope("Newton", cone, condim, sweeps))
        ref = mujoco.MjData(mjm)
        for _ in range(20):  # settle onto the slope, then a random push
            mujoco.mj_step(mjm, ref)
        ref.qvel[:] += np.random.default_rng(seed).normal(size=mjm.nv) * 0.05
        main = copy.copy(ref)
        mujoco.mj_forward(mjm, ref)
        mjm.opt.noslip_iterations = 0  # the same state, the main solver only
        mujoco.mj_forward(mjm, main)
        mjm.opt.noslip_iterations = sweeps
        assert main.ncon == 4 and main.nf == 1
        blocks, M, J, friction, state_args = _mujoco_problem(mjm, main)
        nefc = main.nefc
        # the sweeps (and the dual state below) as one jitted program each (CI time: eagerly, op by op)
        tol, scale = mjm.opt.noslip_tolerance, 1.0 / (mjm.stat.meaninertia * mjm.nv)
        sweep = jax.jit(lambda *a, blocks=blocks, tol=tol, scale=scale: noslip.noslip(
            blocks, *a, iterations=sweeps, tolerance=tol, scale=scale))  # fmt: skip
        force, niter, _ = sweep(jp.asarray(J), jp.asarray(np.linalg.solve(M, J.T)), jp.asarray(main.efc_b[:nefc]),
                                jp.asarray(main.efc_R[:nefc]), jp.asarray(main.efc_frictionloss[:nefc]),
                                jp.ones(nefc, bool), jp.asarray(main.efc_force[:nefc]), friction)  # fmt: skip
        force = np.asarray(force)
        moved = np.abs(ref.efc_force[:nefc] - main.efc_force[:nefc]).max()
        assert moved > 1e-3, "noslip should change the forces of this problem"
        oracle.close(force, ref.efc_force[:nefc], SWEEP_TOL, "efc_force")
        oracle.close(main.qacc_smooth + np.linalg.solve(M, J.T @ force), ref.qacc, SWEEP_TOL, "qacc")
        assert int(niter) == ref.solver_niter[0] - main.solver_niter[0]
        kind, cones, mus, frics = state_args
        dual = jax.jit(lambda *a, kind=kind, cones=cones: noslip.dual_state(kind, cones, *a))
        state = np.asarray(dual(jp.asarray(force), jp.asarray(main.efc_frictionloss[:nefc]), jp.ones(nefc, bool),
                                mus, frics))  # fmt: skip
        # forces the sweep put on a boundary (a pyramid edge at 0, an elliptic force with mu N = |T|) to round-off
        # are classified by the rounding: either state of the tie
        fmax = np.abs(ref.efc_force[:nefc]).max()
        tie = (kind == common.INEQUALITY) & (np.abs(ref.efc_force[:nefc]) <= SWEEP_TOL * fmax)
        sides = {common.INEQUALITY: (ConstraintState.SATISFIED, ConstraintState.QUADRATIC)}
        for rows, fr in zip(cones, frics):
            f = ref.efc_force[rows]
            gap = f[:, 0] - np.linalg.norm(f[:, 1:] / np.asarray(fr), axis=1)  # mu N - |T| in MuJoCo's dual state
            tie[rows[np.abs(gap) <= SWEEP_TOL * fmax]] = True
        np.testing.assert_array_equal(state[~tie], ref.efc_state[:nefc][~tie])
        for i in np.nonzero(tie)[0]:
            assert {state[i], ref.efc_state[i]} <= set(sides.get(kind[i], (ConstraintState.SATISFIED,
                                                                          ConstraintState.CONE))), i  # fmt: skip


def test_qcqp_solves_the_problem():
    """qcqp: the minimiser of 0.5 x'Ax + x'b in the ellipsoid (KKT conditions), inside and on the boundary."""
    rng = np.random.default_rng(0)
    qcqp = jax.jit(noslip.qcqp)
    for n in (2, 3, 5):
        for _ in range(5):
            G = rng.normal(size=(n, n))
            A = G @ G.T + 0.1 * np.eye(n)
            b = rng.normal(size=n)
            d = rng.uniform(0.3, 1.5, size=n)
            for r in (0.05, 100.0):  # binding and not
                x, active = qcqp(jp.asarray(A), jp.asarray(b), jp.asarray(d), jp.asarray(r))
                x = np.asarray(x)
                free = -np.linalg.solve(A, b)
                if np.sum((free / d) ** 2) <= r * r:
                    assert not bool(active)
                    np.testing.assert_allclose(x, free, atol=1e-9)
                else:
                    assert bool(active)
                    x = np.asarray(noslip._to_ellipsoid(jp.asarray(x), jp.asarray(d), jp.asarray(r)))
                    g = A @ x + b  # KKT: g = -la * grad of the constraint, la >= 0
                    c = x / d**2
                    la = -np.dot(g, c) / np.dot(c, c)
                    assert la > 0
                    np.testing.assert_allclose(g, -la * c, atol=1e-6 * max(1.0, np.abs(g).max()))


# all slow (CI time: the sticking case, ~10 worker-s, compiled two 200-step rollouts). noslip through the pipeline
# stays MuJoCo's by default in test_islands_sweep_on_their_own[Newton-pyramidal-3] (forward at states of MuJoCo's
# trajectory: qacc, forces and per-island sweep counts) and through its gradient in test_gradients[implicit-pyramidal];
# the elliptic sweeps (the cones' QCQP) stay MuJoCo's by default in test_sweeps_on_mujocos_problem[elliptic-*]
_DEFAULT = set()
_MATRIX = [pytest.param(s, c, k, marks=() if (s, c, k) in _DEFAULT else pytest.mark.slow)
           for s in ("Newton", "CG", "PGS") for c in ("pyramidal", "elliptic") for k in (3, 4, 6)]  # fmt: skip


def _trajectory(xml, steps):
    """(MuJoCo's qpos (steps, nq), ours), from qpos0, both with mj_step / mjl.step."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    m = mjl.load_mjcf_string(xml)
    step = jax.jit(lambda d: jax.lax.scan(lambda d, _: (mjl.step(m, d), d.qpos), d, None, length=steps)[1])
    ours = np.asarray(step(mjl.make_data(m)))
    theirs = []
    for _ in range(steps):
        theirs.append(mjd.qpos.copy())
        mujoco.mj_step(mjm, mjd)
    return np.array(theirs), ours


@pytest.mark.parametrize("solver,cone,condim", _MATRIX)
def test_box_on_slope(solver, cone, condim):
    """100 steps of the slope scene with noslip (4 sweeps) follow MuJoCo's; with elliptic cones the box sticks
    (it creeps without noslip)."""
    sticks = (solver, cone, condim) == ("Newton", "elliptic", 3)
    steps = 2 * STEPS if sticks else STEPS
    theirs, ours = _trajectory(_slope(solver, cone, condim, 4), steps)
    oracle.close(ours, theirs, TRAJ_TOL[solver], "qpos")
    if sticks:  # once settled (steps 100-200): noslip holds the box, the soft contacts alone let it creep
        theirs0, ours0 = _trajectory(_slope(solver, cone, condim, 0), steps)
        oracle.close(ours0, theirs0, TRAJ_TOL[solver], "qpos without noslip")
        creep, stuck = abs(ours0[-1, 1] - ours0[STEPS, 1]), abs(ours[-1, 1] - ours[STEPS, 1])
        assert creep > 3e-4 and stuck < 0.05 * creep, (creep, stuck)


ISLANDS_XML = """
<mujoco>
  <option cone="{cone}" solver="{solver}" noslip_iterations="10" gravity="0 -5 -9.81" tolerance="1e-12"
          iterations="200"/>
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom type="plane" size="5 5 .1" contype="1" conaffinity="2"/>
    <body pos="0 0 .1"><freejoint/>
      <geom type="box" size=".1 .1 .1" condim="{condim}" friction="0.8 0.02 0.001" solref="0.05 1"/></body>
    <body pos="1 0 .1"><freejoint/>
      <geom type="box" size=".15 .1 .08" condim="{condim}" friction="0.6 0.02 0.001" solref="0.02 1" mass="3"/></body>
    <body pos="-1 0 .2"><freejoint/>
      <geom type="sphere" size=".1" condim="{condim}" friction="0.9 0.02 0.001" solref="0.03 1"/></body>
    <body pos=".5 0 .5"><joint name="h1" type="hinge" axis="0 1 0" frictionloss="0.3" range="-.1 .1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/></body>
  </worldbody>
</mujoco>
"""
# Islands on (MuJoCo's default): two boxes and a sphere (landing at step ~30) on the slope, the hinge with friction
# loss: 2-3 islands whose noslip sweeps stop at different counts (seen: 6 / 3, 6 / 7 / 3 with Newton). The bodies
# collide with the floor only (CI time: no box-box or box-sphere colliders; they never meet here, and MuJoCo's
# trajectory is bitwise the one without the collision bits).


@pytest.mark.parametrize("solver,cone,condim", [("Newton", "pyramidal", 3),
                                                pytest.param("CG", "elliptic", 3, marks=pytest.mark.slow),
                                                pytest.param("PGS", "elliptic", 4, marks=pytest.mark.slow)])
def test_islands_sweep_on_their_own(solver, cone, condim):
    """Each constraint island's noslip sweeps stop by its own improvement (MuJoCo 4.0's mj_solNoSlip_island): at
    states of MuJoCo's trajectory, our per-island iteration counts (main solver + sweeps) are MuJoCo's, and qacc and
    the forces agree; the islands stop at different counts (sweeping them together would differ)."""
    xml = ISLANDS_XML.format(solver=solver, cone=cone, condim=condim)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    m = mjl.load_mjcf_string(xml)
    forward = jax.jit(mjl.forward)
    uneven = 0
    for t in range(40):
        mujoco.mj_step(mjm, mjd)
        if t % 8 != 7:
            continue
        d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=jp.asarray(mjd.qacc_warmstart))
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, d)
        n = mjd.nisland
        assert n >= 2
        np.testing.assert_array_equal(np.asarray(d.solver_niter_island)[:n], mjd.solver_niter[:n], f"state {t}")
        assert int(d.solver_niter) == mjd.solver_niter[:n].max()
        uneven += len(set(mjd.solver_niter[:n])) > 1
        oracle.close(d.qacc, mjd.qacc, SWEEP_TOL, f"qacc at state {t}")
        oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, SWEEP_TOL, f"qfrc_constraint at state {t}")
    assert uneven >= 3, uneven


@pytest.mark.slow
def test_dog():
    """dm_control's dog (noslip_iterations 4, pyramidal, condim 6 feet), at 20 consecutive states of MuJoCo's own
    trajectory after it settles on the floor (contacts coming and going): our forward pass from each state gives
    MuJoCo's qacc, qfrc_constraint, forces and per-island iteration counts (one island or several). The sweeps stop
    unconverged and amplify round-off (about 3e4 in qacc per relative input error, measured), so free trajectories
    part after some 30 steps; each state is compared instead."""
    path = os.path.join(oracle.DM_SUITE, "dog.xml")
    mjm = mujoco.MjModel.from_xml_path(path)
    mjd = mujoco.MjData(mjm)
    for _ in range(150):  # drop onto the floor
        mujoco.mj_step(mjm, mjd)
    m = mjl.load_mjcf(path)
    assert m.opt.noslip_iterations == 4
    forward = jax.jit(mjl.forward)
    several = 0
    for t in range(20):  # (state 23 differs by 2.7e-7 of qacc's scale: not yet explained, see the commit message)
        if t:
            mujoco.mj_step(mjm, mjd)
        d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=jp.asarray(mjd.qacc_warmstart))
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, d)
        assert mjd.ncon > 0
        several += mjd.nisland > 1
        oracle.close(d.qacc, mjd.qacc, 1e-8, f"qacc at state {t}")
        oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, 1e-9, f"qfrc_constraint at state {t}")
        live = np.asarray(d.efc_mask)
        assert live.sum() == mjd.nefc
        # (both Jacobians are sparse here, in different layouts: the forces compared as sorted values)
        oracle.close(np.sort(np.asarray(d.efc_force)[live]), np.sort(mjd.efc_force[: mjd.nefc]), 1e-9,
                     f"efc_force at state {t}")  # fmt: skip
        n = mjd.nisland
        np.testing.assert_array_equal(np.asarray(d.solver_niter_island)[:n], mjd.solver_niter[:n], f"state {t}")
    assert several >= 3, several  # states with several islands are compared too (seen: 5 of 20)


@pytest.mark.parametrize("gradients,cone", [("implicit", "pyramidal"),
                                             pytest.param("unrolled", "pyramidal", marks=pytest.mark.slow),
                                             pytest.param("implicit", "elliptic", marks=pytest.mark.slow),
                                             pytest.param("unrolled", "elliptic", marks=pytest.mark.slow)])
def test_gradients(gradients, cone):
    """jax.grad of a one-step loss through noslip (both gradient modes) equals central finite differences (one step:
    the sweeps' derivative enters through qacc; more steps only lengthen the compile)."""
    xml = _slope("Newton", cone, 3, 4)
    m = mjl.configure(mjl.load_mjcf_string(xml), gradients=gradients)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    for _ in range(20):
        mujoco.mj_step(mjm, mjd)
    d0 = oracle.data_with_state(m, mjm, mjd)

    def loss(v):
        d = d0.replace(qvel=v)
        d = mjl.step(m, d)
        return d.qpos[1] + 0.3 * d.qpos[0] + d.qvel[1]

    # the differences from the values of the gradient's own program: one compile (a jitted loss under an eager
    # jax.grad compiled the step and its linearised and transposed programs, and every eager update of v another)
    vg = jax.jit(jax.value_and_grad(loss))
    v = np.asarray(d0.qvel)  # host arithmetic below
    g = np.asarray(vg(v)[1])
    eps = 1e-6
    e = np.eye(m.nv) * eps
    fd = np.array([(float(vg(v + e[i])[0]) - float(vg(v - e[i])[0])) / (2 * eps) for i in range(m.nv)])
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, fd, atol=1e-5 * max(1.0, np.abs(fd).max()))
