"""MuJoCo 4.0's PGS iterate by iterate: with a small iteration budget our PGS (pgs.py: Nesterov momentum with
gradient restart, the PCG32-shuffled block order of pgs_order.py, the warm start) gives MuJoCo's iterates, not only
its converged solution. Islands are disabled in MuJoCo (or the model has one island): MuJoCo sweeps each island on
its own, we sweep all rows together."""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.solver import common, pgs, solve
from tests import oracle
from tests.test_solver import mujoco_problem

# float64, the same operations as MuJoCo up to the order of sums: observed <= 5e-15 relative (small model, 10
# iterations); the humanoid's 30 iterations accumulate more rounding: observed 3.5e-13
ITER_TOL = 1e-12
HUMANOID_TOL = 1e-11
# float32 solve against MuJoCo's float64 solution after 300 sweeps, relative to max(1, |value|): float32 rounding
F32_TOL = 1e-3
VMAP_TOL = 1e-12  # batched vs unbatched: the same operations
# sweep counts compared (each compiles its own solve: the count is static); 1, 2, 3 and 5 are slow (CI time): the
# 10-sweep solve, default, runs through them (the first sweep from the warm start, the momentum and its restarts)
ITERATIONS = [(10,), pytest.param((1, 2, 3, 5), marks=pytest.mark.slow)]


def _small_xml(cone, iters, tol):
    xml = oracle.SMALL_XML.format(solver="PGS", cone=cone, impratio=1.5 if cone == "elliptic" else 1.0, tol=tol,
                                  iters=iters)  # fmt: skip
    return xml.replace("/>\n  <default>", '><flag island="disable"/></option>\n  <default>', 1)


@jax.jit
def _solve(m, d):
    return solve.solve(m, d)


# the forward pass at one sweep, shared by the tests of each cone (CI time: one compile of the stages before the
# solver per cone); `_solve` then runs the sweep counts compared on its output (iterations reach only the solver)
_forward = jax.jit(mjl.forward)


def _compare(mjm, mjd, f, tol):
    """qacc, efc_force and efc_state (rows matched), solver_niter and the last sweep's improvement against
    MuJoCo's."""
    n = int(mjd.solver_niter[0])
    assert int(f.solver_niter) == n
    oracle.close(f.qacc, mjd.qacc, tol, "qacc")
    r, c = oracle.match_rows(mjd, mjm, f)
    oracle.close(np.asarray(f.efc_force)[c], mjd.efc_force[r], tol, "efc_force")
    # the dual state (dualState); an elliptic force the QCQP put on the cone's boundary is SATISFIED or CONE by
    # a rounding of mu N >= |T|, so those rows are left out
    scalar = mjd.efc_type[r] != mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC
    np.testing.assert_array_equal(np.asarray(f.efc_state)[c][scalar], mjd.efc_state[r][scalar], "efc_state")
    if n <= mujoco.mjNSOLVER:  # MuJoCo keeps the statistics of its first mjNSOLVER sweeps
        oracle.close(f.solver_improvement, mjd.solver[n - 1].improvement, tol, "improvement")


# elliptic: slow (CI time, ~11 worker-s: the forward pass's compile for the elliptic cone); the elliptic sweeps (the
# cones' QCQP blocks with friction, limit and equality rows) stay MuJoCo's by default, iterate for iterate, in
# test_sweeps_match_mujoco_on_its_problem (MuJoCo's own problem, no colliders to compile)
@pytest.mark.parametrize("iterations", ITERATIONS)
@pytest.mark.parametrize("cone", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_iterates_match_mujoco(cone, iterations):
    """SMALL_XML (contacts of condim 1, 3, 4, 6 on boxes, a sphere and a capsule; a limited hinge with friction loss;
    connect, weld and joint equalities), warm-started from MuJoCo's previous step: after 1, 2, 3, 5 and 10 sweeps
    qacc, efc_force and the improvement are MuJoCo's (`iterations`: those of the sweep counts compared here)."""
    mjm = mujoco.MjModel.from_xml_string(_small_xml(cone, 1, 1e-8))
    mjd = mujoco.MjData(mjm)
    oracle.small_state(mjm, mjd, np.random.default_rng(1))
    mujoco.mj_step(mjm, mjd)  # a warm start from the previous step
    m = mjl.load_mjcf_string(_small_xml(cone, 1, 1e-8))
    d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=mjd.qacc_warmstart)
    f0 = _forward(m, d)
    for k in iterations:
        mjm.opt.iterations = k
        mujoco.mj_forward(mjm, mjd)
        assert int(mjd.solver_niter[0]) == k  # unconverged: every sweep ran
        mk = m.replace(opt=m.opt.replace(iterations=k))
        _compare(mjm, mjd, _solve(mk, f0), ITER_TOL)


def test_sweeps_match_mujoco_on_its_problem():
    """The cheap default oracle of the elliptic sweeps: on MuJoCo's own problem (tests/test_solver.py's model, a box
    on the floor with condim-6 elliptic cones, a hinge with friction loss past its limit, connect and joint
    equalities; islands and warm start disabled in MuJoCo: one island, a cold start), our PGS from a zero force
    after 10 sweeps (unconverged) gives MuJoCo's efc_force, qacc and last improvement."""
    m, d, layout, prob = mujoco_problem("elliptic", 6, "PGS", 0, impratio=1.5, iters=10)
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_WARMSTART | mujoco.mjtDisableBit.mjDSBL_ISLAND
    m.opt.tolerance = 1e-8
    mujoco.mj_forward(m, d)  # the same state (the problem does not depend on these options), MuJoCo's 10 sweeps
    assert int(d.solver_niter[0]) == 10 and common.CONE in layout.kind
    assert np.any(layout.kind == common.EQUALITY) and np.any(layout.kind == common.FRICTION)
    assert np.any(layout.kind == common.INEQUALITY)
    tol = jp.asarray(1e-8)
    run = jax.jit(lambda p: pgs.solve_pgs(layout, p, jp.zeros_like(p.D), iterations=10, tolerance=tol,
                                          minv=lambda x: jp.linalg.solve(p.M, x)))  # fmt: skip
    force, qacc, niter, improvement = run(prob)
    assert int(niter) == 10
    oracle.close(force, d.efc_force[: d.nefc], ITER_TOL, "efc_force")
    oracle.close(qacc, d.qacc, ITER_TOL, "qacc")
    oracle.close(improvement, d.solver[9].improvement, ITER_TOL, "improvement")


# elliptic: slow (CI time: a 1000-sweep solve compile of its own); the stopping test is the same code for either cone
# ([pyramidal] stays by default), and the elliptic sweeps are MuJoCo's by default in test_iterates_match_mujoco
@pytest.mark.parametrize("cone", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_niter_matches_mujoco_at_default_tolerance(cone):
    """At MuJoCo's default tolerance (1e-8) our PGS stops after MuJoCo's number of sweeps, at MuJoCo's iterate."""
    m1 = mjl.load_mjcf_string(_small_xml(cone, 1, 1e-8))  # test_iterates_match_mujoco's forward pass (its compile)
    m = m1.replace(opt=m1.opt.replace(iterations=1000))
    mjm = mujoco.MjModel.from_xml_string(_small_xml(cone, 1000, 1e-8))
    for seed in range(2):
        mjd = mujoco.MjData(mjm)
        oracle.small_state(mjm, mjd, np.random.default_rng(seed))
        mujoco.mj_forward(mjm, mjd)
        assert 1 < int(mjd.solver_niter[0]) < 1000
        d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=mjd.qacc_warmstart)
        _compare(mjm, mjd, _solve(m, _forward(m1, d)), ITER_TOL)


# slow (CI time, ~6 worker-s: the humanoid's forward compile): a second, larger model of the same code path; PGS's
# iterates, iteration count and improvement stay MuJoCo's by default on SMALL_XML in test_iterates_match_mujoco and
# test_niter_matches_mujoco_at_default_tolerance[pyramidal] (one island here too: islands disabled there)
@pytest.mark.slow
def test_humanoid_50_iterations_matches_mujoco():
    """Issue 39: the MJX humanoid with solver PGS and 50 iterations (one island: all its rows), on the floor after
    30 steps from random velocities. Before MuJoCo 4.0's algorithm, qacc differed by 4.5e-2 (relative) after our 50
    sweeps against MuJoCo's 30."""
    path = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "humanoid", "humanoid.xml")
    with open(path) as fh:
        xml = fh.read().replace('iterations="1" ls_iterations="4"', 'solver="PGS" iterations="50"', 1)
    assert 'solver="PGS"' in xml
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = np.random.default_rng(0).normal(size=mjm.nv) * 0.5
    for _ in range(30):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.nisland == 1 and mjd.ncon > 4 and 1 < mjd.solver_niter[0] < 50
    m = mjl.load_mjcf_string(xml)
    d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=mjd.qacc_warmstart)
    _compare(mjm, mjd, jax.jit(mjl.forward)(m, d), HUMANOID_TOL)


def _pcg32_reference(n):
    """PCG32 (XSH-RR, 64-bit state) in Python integers: MuJoCo's seed (state 0, increment 1, one draw discarded)."""
    mask = (1 << 64) - 1
    state, out = 0, []
    for i in range(n + 1):
        old = state
        state = (old * 6364136223846793005 + 1) & mask
        xs = (((old >> 18) ^ old) >> 27) & 0xFFFFFFFF
        rot = old >> 59
        if i:
            out.append(((xs >> rot) | (xs << ((-rot) & 31))) & 0xFFFFFFFF)
    return out


def _draws(n):
    def body(s, _):
        s, r = pgs.pcg32_next(s)
        return s, r

    _, r = jax.lax.scan(body, pgs.pcg32_seed(), None, length=n)
    return r


def test_pcg32_integers_without_x64():
    """The generator on uint32 pairs gives PCG32's integers with and without x64."""
    ref = np.asarray(_pcg32_reference(2000), np.uint64)
    np.testing.assert_array_equal(np.asarray(jax.jit(_draws, static_argnums=0)(2000), np.uint64), ref)
    with jax.enable_x64(False):
        np.testing.assert_array_equal(np.asarray(jax.jit(_draws, static_argnums=0)(2000), np.uint64), ref)


def test_float32_and_vmap():
    """float32 reaches MuJoCo's (float64) solution; vmap over two problems (the second one's aref scaled) equals the
    two solves."""
    m, d, layout, prob = mujoco_problem("elliptic", 4, "Newton", 0, iters=200)
    force, qacc = d.efc_force[: d.nefc].copy(), d.qacc.copy()
    probs = [prob, prob.__class__(**{**prob.__dict__, "aref": prob.aref * 1.1})]

    def run(p, iterations=300):
        minv = lambda x: jp.linalg.solve(p.M, x)  # noqa: E731
        tol = jp.asarray(0.0, p.D.dtype)
        f, qacc, n, _ = pgs.solve_pgs(layout, p, jp.zeros_like(p.D), iterations=iterations, tolerance=tol, minv=minv)
        return f, qacc, n

    p32 = jax.tree.map(lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x, prob)
    f, q, _ = jax.jit(run)(p32)
    assert f.dtype == jp.float32
    oracle.close(np.asarray(f, np.float64), force, F32_TOL)
    oracle.close(np.asarray(q, np.float64), qacc, F32_TOL)
    batch = jax.tree.map(lambda *x: np.stack(x), *probs)  # on the host (no eager programs)
    bf, bq, bn = jax.jit(jax.vmap(lambda p: run(p, 20)))(batch)
    run20 = jax.jit(lambda p: run(p, 20))  # one compile for both problems (CI time)
    for i, p in enumerate(probs):
        f, q, n = run20(p)
        oracle.close(bf[i], f, VMAP_TOL)
        oracle.close(bq[i], q, VMAP_TOL)
        assert int(bn[i]) == int(n)
    assert common.CONE in layout.kind
