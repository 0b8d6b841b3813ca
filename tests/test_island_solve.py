"""Issue 39: per-island solving. MuJoCo 4.0 (islands on by default) solves each constraint island on its own: Newton,
CG and PGS each stop an island by its own tolerance test, scaled by 1 / the trace of the island's block of M, with
the island's own line search (PGS: its own block order, generator, momentum). We do the same in one fixed-shape
loop of segment sums (`solver.primal`, `solver.pgs`, islands from `solver.island.find`).

Against MuJoCo 4.0 (float64) on a scene of several islands (a box with a sphere on it, a capsule, a light sphere, a
hinge chain with friction loss and limits, a free body in the air: no island), two states batched under `vmap`
(the second lifts the capsule off the floor: one island fewer): qacc and efc_force at round-off and each island's
iteration count equal to MuJoCo's solver_niter[island], at tolerances 1e-8 and 1e-3 and at an iteration cap of 3.
An implicit gradient through the per-island Newton solve equals central differences.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver.solve import solve
from tests import oracle

# float64: the same iterations as MuJoCo up to the order of sums (observed <= 4e-15 relative in qacc); PGS's forces
# are its dual iterates, compared at the same scale
QACC_TOL = 1e-10  # relative to max(1, |qacc|)
FORCE_TOL = 1e-9  # relative to max(1, |efc_force|)
GRAD_RTOL = 1e-6  # implicit gradient vs central differences (step FD_EPS, solver tolerance 1e-14)
FD_EPS = 1e-6

# the last body a light sphere (its own island; CI time: an ellipsoid there added convex-collider groups against every
# geom type, the stages' compile 9.9 -> 5.4 CPU-s). Collision bits (CI time: fewer pair types to compile): the box and
# the sphere on it collide with each other and the floor, the capsule and the light sphere with the floor only (they
# touch nothing else in the tested states: MuJoCo's results are bitwise those without the bits)
XML = """
<mujoco>
  <option solver="{solver}" tolerance="1e-8" iterations="{iterations}" jacobian="dense" cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="9 9 .1" contype="1" conaffinity="2"/>
    <body pos="0 0 .095"><freejoint/><geom type="box" size=".1 .1 .1" contype="6" conaffinity="5"/></body>
    <body pos="0.02 0 .29"><freejoint/><geom type="sphere" size=".1" mass="3" contype="6" conaffinity="5"/></body>
    <body pos="1 0 .09"><freejoint/><geom type="capsule" size=".1 .2" euler="0 90 10" contype="2" conaffinity="1"/>
    </body>
    <body pos="-1 0 .6">
      <joint type="hinge" axis="0 1 0" range="-30 30" frictionloss=".1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
      <body pos=".3 0 0"><joint type="hinge" axis="0 1 0" range="-10 10"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/></body>
    </body>
    <body pos="-2 -2 2"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body pos="3 0 .09"><freejoint/><geom type="sphere" size=".1" mass="0.2" contype="2" conaffinity="1"/></body>
  </worldbody>
</mujoco>
"""
TOLERANCES = (1e-8, 1e-3)
CAPPED = 3  # the iteration cap of the capped cases (below every island's count at tolerance 1e-8)


def _states(mjm):
    """Two states: bodies sunk into the floor and each other, the chain past its limit (state 0) or not (1), random
    velocities and warm starts; state 1's capsule is lifted clear of the floor (no island)."""
    out = []
    rng = np.random.default_rng(0)
    for i in range(2):
        mjd = mujoco.MjData(mjm)
        for b in (1, 2, 3, 6):
            a = mjm.jnt_qposadr[mjm.body_jntadr[b]]
            mjd.qpos[a + 2] -= 0.004 + 0.004 * rng.random()
        hinge = mjm.jnt_qposadr[mjm.body_jntadr[4]]
        mjd.qpos[hinge : hinge + 2] = (0.55, -0.2) if i == 0 else (0.0, 0.0)
        if i == 1:
            mjd.qpos[mjm.jnt_qposadr[mjm.body_jntadr[3]] + 2] += 0.1
        mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
        mjd.qacc_warmstart[:] = rng.normal(size=mjm.nv)
        out.append(mjd)
    return out


def _solve(m, d):
    d = fwd.forward_pos_vel(m, d)
    return solve(m, fwd.fwd_acceleration(m, fwd.fwd_actuation(m, d)))


# The stages before the solver compiled once per cone (the solver, its iteration cap and the tolerance do not reach
# them: CI time, the scene's colliders compile once), the solve once per static model (solver, cone, cap)
_jprepare = jax.jit(jax.vmap(lambda m, d: fwd.fwd_acceleration(m, fwd.fwd_actuation(m, fwd.forward_pos_vel(m, d))),
                             in_axes=(None, 0)))  # fmt: skip
_jsolve_only = jax.jit(jax.vmap(solve, in_axes=(None, 0)))


def _jsolve(m, batch):
    """vmap(_solve) of a batch: the stages before the solver with m's cone, flags and rows (its solver options set
    to one value, so that every solver's model shares that compile), then m's solve."""
    base = m.replace(opt=m.opt.replace(solver=int(mjl.SolverType.NEWTON), iterations=100))
    return _jsolve_only(m, _jprepare(base, batch))


def _case(solver, cone, iterations):
    mjm = mujoco.MjModel.from_xml_string(XML.format(solver=solver, cone=cone, iterations=iterations))
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    mjds = _states(mjm)
    ds = [mjl.make_data(m).replace(qpos=jp.asarray(x.qpos), qvel=jp.asarray(x.qvel),
                                   qacc_warmstart=jp.asarray(x.qacc_warmstart)) for x in mjds]  # fmt: skip
    return mjm, m, mjds, jax.tree.map(lambda *x: np.stack(x), *ds)


def _with_tol(m, tol):
    return m.replace(opt=m.opt.replace(tolerance=jp.asarray(tol, m.opt.tolerance.dtype)))


def _compare(mjm, m, mjds, batch, tol, what):
    mjm.opt.tolerance = tol
    out = jax.tree.map(np.asarray, _jsolve(_with_tol(m, tol), batch))  # read on the host (no eager slices)
    nislands = set()
    for i, mjd in enumerate(mjds):
        mujoco.mj_forward(mjm, mjd)  # (mj_forward leaves qacc_warmstart as set)
        d = jax.tree.map(lambda x, i=i: x[i], out)
        msg = f"{what} tolerance {tol:g} state {i}"
        n = mjd.nisland
        nislands.add(n)
        assert n >= 3, msg
        np.testing.assert_array_equal(np.asarray(d.solver_niter_island)[:n], mjd.solver_niter[:n], err_msg=msg)
        assert np.all(np.asarray(d.solver_niter_island)[n:] == 0), msg
        assert int(d.solver_niter) == int(np.max(mjd.solver_niter[:n])), msg
        oracle.close(d.qacc, mjd.qacc, QACC_TOL, msg)
        r, c = oracle.match_rows(mjd, mjm, d)
        oracle.close(np.asarray(d.efc_force)[c], mjd.efc_force[r], FORCE_TOL, msg)
    assert len(nislands) == 2, nislands  # the batch's environments have different islands


@pytest.mark.parametrize("solver", ["Newton", "CG", "PGS"])
@pytest.mark.parametrize("cone", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_islands_converged(solver, cone):
    """Each island's iteration count, qacc and efc_force are MuJoCo's at tolerances 1e-8 and 1e-3."""
    mjm, m, mjds, batch = _case(solver, cone, 100)
    for tol in TOLERANCES:
        _compare(mjm, m, mjds, batch, tol, f"{solver} {cone}")


# not slow: Newton capped (CG and PGS per island are crossed, not slow, by test_islands_converged; capped: slow)
@pytest.mark.parametrize("solver", ["Newton", pytest.param("CG", marks=pytest.mark.slow),
                                    pytest.param("PGS", marks=pytest.mark.slow)])
def test_islands_capped(solver):
    """At an iteration cap of 3, every island stops at the cap (or before, as MuJoCo's) with MuJoCo's iterate."""
    mjm, m, mjds, batch = _case(solver, "pyramidal", CAPPED)
    _compare(mjm, m, mjds, batch, 1e-8, f"{solver} capped at {CAPPED}")


# slow (CI time, ~15 s: its own compile): a multi-tree model's whole-system CG solve with islands disabled (MuJoCo's
# iterations and qacc, no per-island counts) stays in CI through tests/test_solver_trace.py's
# test_iterations_match_mujoco[CG-xla] (two trees, <flag island="disable"/>)
@pytest.mark.slow
def test_islands_disabled_whole_system():
    """<flag island="disable"/>: one solve of the whole system (no per-island counts), MuJoCo's iterations."""
    mjm = mujoco.MjModel.from_xml_string(XML.format(solver="CG", cone="pyramidal", iterations=100))
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ISLAND
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    mjds = _states(mjm)
    ds = [mjl.make_data(m).replace(qpos=jp.asarray(x.qpos), qvel=jp.asarray(x.qvel),
                                   qacc_warmstart=jp.asarray(x.qacc_warmstart)) for x in mjds]  # fmt: skip
    out = _jsolve(m, jax.tree.map(lambda *x: np.stack(x), *ds))
    for i, mjd in enumerate(mjds):
        mujoco.mj_forward(mjm, mjd)
        assert mjd.nisland == 0
        assert int(out.solver_niter[i]) == mjd.solver_niter[0], i
        assert np.all(np.asarray(out.solver_niter_island[i]) == 0)
        oracle.close(out.qacc[i], mjd.qacc, QACC_TOL, f"state {i}")


def test_islands_gradient():
    """d sum(w * qacc) / d qvel through the per-island Newton solve (implicit rule): central differences."""
    mjm = mujoco.MjModel.from_xml_string(XML.format(solver="Newton", cone="pyramidal", iterations=100))
    m = _with_tol(mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla"), 1e-14)
    mjds = _states(mjm)
    ds = [mjl.make_data(m).replace(qpos=jp.asarray(x.qpos), qvel=jp.asarray(x.qvel)) for x in mjds]
    # the position stages (collision included: qvel does not reach them) by `_jprepare`, compiled once with
    # test_islands_converged's; the loss runs the velocity stages, the rows' velocity terms and the solve on them
    # (forward_vel_acc: mj_forwardSkip from the position stage), so the gradient's program has no colliders (CI time)
    d0 = jax.tree.map(lambda x: jp.asarray(np.asarray(x)[0]), _jprepare(m, jax.tree.map(lambda *x: np.stack(x), *ds)))
    w = jp.asarray(np.random.default_rng(1).normal(size=m.nv))

    def loss(qvel):
        return jp.dot(w, fwd.forward_vel_acc(m, d0.replace(qvel=qvel)).qacc)

    # one compile (CI time): the differences take the values of the same program
    vg = jax.jit(jax.value_and_grad(loss))
    g = np.asarray(vg(d0.qvel)[1])
    assert np.all(np.isfinite(g))
    qv = np.asarray(d0.qvel)

    def jl(k, h):
        q = qv.copy()
        q[k] += h
        return float(vg(jp.asarray(q))[0])

    fd = np.array([(jl(k, FD_EPS) - jl(k, -FD_EPS)) / (2 * FD_EPS) for k in range(m.nv)])
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL, atol=GRAD_RTOL * np.max(np.abs(fd)))


ONE_TREE = """
<mujoco>
  <option solver="{solver}" tolerance="1e-8" jacobian="dense"/>
  <worldbody>
    <geom type="plane" size="9 9 .1"/>
    <body pos="0 0 .095"><freejoint/><geom type="box" size=".1 .1 .1"/>
      <body pos=".2 0 0"><joint type="hinge" axis="0 1 0" range="-20 20"/><geom type="sphere" size=".08"/></body>
    </body>
  </worldbody>
</mujoco>
"""


# CG and PGS: slow (CI time: a solve compile each); the one-tree shortcut (no island search) is the same code for
# every solver ([Newton] stays by default), and CG's and PGS's per-island solves stay by default in
# test_islands_converged[pyramidal-CG] and [pyramidal-PGS]
@pytest.mark.parametrize("solver", ["Newton", pytest.param("CG", marks=pytest.mark.slow),
                                    pytest.param("PGS", marks=pytest.mark.slow)])
def test_one_tree_is_one_island(solver):
    """One tree: at most one island, every dof in it; the whole-system solve (no island search) is that island's:
    qacc and MuJoCo's solver_niter[0] (islands on) equal ours and solver_niter_island[0]."""
    mjm = mujoco.MjModel.from_xml_string(ONE_TREE.format(solver=solver))
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    assert m.ntree == 1
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] -= 0.005
    mjd.qvel[:] = np.random.default_rng(1).normal(size=mjm.nv) * 0.3
    mujoco.mj_forward(mjm, mjd)
    assert mjd.nisland == 1 and mjd.ncon > 0
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
    d = jax.tree.map(lambda x: np.asarray(x)[0], _jsolve(m, jax.tree.map(lambda x: np.asarray(x)[None], d)))
    assert int(d.solver_niter_island[0]) == int(mjd.solver_niter[0]) == int(d.solver_niter) > 0
    oracle.close(d.qacc, mjd.qacc, QACC_TOL, solver)
