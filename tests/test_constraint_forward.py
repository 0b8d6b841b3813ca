"""End-to-end oracle tests of forward dynamics with constraints (collision -> make_constraint -> solve) against
mj_forward, trajectories against mj_step, gradients through contact rollouts, and the solver's JAX properties.

The constraint problem has a unique optimum (M > 0, R > 0), so every solver must reach MuJoCo's Newton
solution (run to convergence): qacc, qfrc_constraint, efc_force (matched row by row, order independent).
"""

import copy
import functools
import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver import solve
from tests import oracle

# Newton converges quadratically: both sides are at the optimum to round-off amplified by conditioning
# (relative to the field's scale max(1, max|x|)).
NEWTON_TOL = 1e-7
# CG and PGS are first order: a cost resolved to eps resolves its minimiser to ~sqrt(eps), amplified by
# conditioning (same bound as tests/test_solver.py).
FIRST_ORDER_TOL = 1e-5
# Our PGS against MuJoCo's PGS with the same options (float64): the same sweeps up to the order of sums; observed
# <= 4.8e-15 relative on SMALL_XML after up to 1643 sweeps (tolerance 1e-15, both cones)
PGS_TOL = 1e-12
# Trajectories: per-step differences of 1e-12 grow through contact events; a few steps stay tight.
TRAJ_TOL = 1e-8
# 1000 steps of a falling humanoid (contacts made and broken): measured agreement ~1e-12
LONG_TRAJ_TOL = 1e-7
# Central finite differences in float64 with step 1e-6: truncation O(h^2) plus round-off O(eps/h).
FD_RTOL = 1e-5
# Implicit vs unrolled gradients at a Newton optimum converged to tolerance 1e-10 (quadratic convergence:
# the unrolled derivative converges with the iterates).
IMPLICIT_TOL = 1e-6
# The same solver iterations traced as a while_loop (implicit mode) and as a scan (unrolled): round-off only.
ROUNDOFF_TOL = 1e-10


# ---------------------------------------------------------------------------------------------------------
# pipeline


def _forward_impl(m, d):
    return fwd.forward(m, d)


forward = jax.jit(_forward_impl)
_solve = jax.jit(solve.solve)


def _step_impl(m, d):
    return mjl.step(m, d)


def rollout(m, d, n):
    """n steps; returns the stacked qpos (n, nq) and the final Data."""

    def body(d, _):
        d = _step_impl(m, d)
        return d, d.qpos

    d, qpos = jax.lax.scan(body, d, None, length=n)
    return qpos, d


# ---------------------------------------------------------------------------------------------------------
# models

def _reference_state(mjm, mjd, rng):
    """qpos near qpos0 (roots lowered so feet touch the floor), random velocities."""
    mjd.qpos[:] = mjm.qpos0
    mujoco.mj_integratePos(mjm, mjd.qpos, rng.normal(size=mjm.nv) * 0.1, 1.0)
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.5


def _spec(path):
    spec = oracle.without_unsupported(mujoco.MjSpec.from_file(path))
    spec.option.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    return spec


def _humanoid(solver="Newton", cone="pyramidal", passive=True):
    """The mjx test humanoid (MjModel). passive=False: no joint damping/springs and no actuators (rollouts on
    the partial pipeline, which has no passive or actuator forces)."""
    spec = _spec(os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml"))
    spec.option.solver = getattr(mujoco.mjtSolver, f"mjSOL_{solver.upper()}")
    spec.option.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    # the file asks for 1 iteration / 4 line-search steps: results would depend on each solver's exact path
    spec.option.iterations, spec.option.ls_iterations, spec.option.tolerance = 100, 50, 1e-10
    if not passive:
        for a in list(spec.actuators):
            spec.delete(a)
    mjm = spec.compile()
    if not passive:
        mjm.dof_damping[:] = 0.0
        mjm.jnt_stiffness[:] = 0.0
    return mjm


REFERENCE = {
    "humanoid": lambda: _humanoid(),
    "finger": lambda: _spec(os.path.join(oracle.DM_SUITE, "finger.xml")).compile(),
    "pendula": lambda: _spec(os.path.join(oracle.MJX_TEST_DATA, "pendula.xml")).compile(),
    "walker": lambda: _spec(os.path.join(oracle.DM_SUITE, "walker.xml")).compile(),
    "humanoid_elliptic_cg": lambda: _humanoid("CG", "elliptic"),
}


def _converged_newton(mjm):
    """A copy of mjm whose solver is Newton run to convergence (the unique optimum)."""
    ref = copy.copy(mjm)
    ref.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    ref.opt.iterations = 200
    ref.opt.tolerance = 1e-12
    ref.opt.ls_iterations = 50
    return ref


def _our_opts(mjm):
    """First-order solvers get enough iterations and a tiny tolerance to reach the optimum."""
    if mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON:
        return dict(iterations=100)
    iters = 4000  # first-order solvers: enough sweeps to reach the optimum (they stop earlier at tol)
    return dict(iterations=iters, tolerance=jp.asarray(1e-15))


def _tol(mjm):
    return NEWTON_TOL if mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON else FIRST_ORDER_TOL


def check_forward(mjm, m, state_fn, seeds=(0, 1), min_nefc=1):
    """Our forward (solver of m) vs MuJoCo's converged Newton at random states from state_fn."""
    ref = _converged_newton(mjm)
    tol = _tol(mjm)
    for seed in seeds:
        mjd = mujoco.MjData(ref)
        state_fn(ref, mjd, np.random.default_rng(seed))
        mujoco.mj_forward(ref, mjd)
        assert mjd.nefc >= min_nefc and mjd.solver_niter[0] < ref.opt.iterations
        d = forward(m, oracle.data_with_state(m, ref, mjd))
        assert int(d.nefc) == mjd.nefc
        assert int(d.ncon) == mjd.ncon
        oracle.close(d.qacc, mjd.qacc, tol, "qacc")
        oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, tol, "qfrc_constraint")
        rm, ro = oracle.match_rows(mjd, ref, d)
        oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], tol, "efc_force")
        dead = ~np.asarray(d.efc_mask)
        assert np.all(np.asarray(d.efc_force)[dead] == 0), "padded rows carry force"
        if mjm.opt.solver == mujoco.mjtSolver.mjSOL_PGS:
            _check_pgs_counts(mjm, m, mjd, d)


def _check_pgs_counts(mjm, m, mjd_ref, d):
    """Our PGS stops each island after MuJoCo's PGS's number of sweeps with the same options (iterations,
    tolerance) from the same state and zero warm start, and at its forces. solver_niter is the largest island's
    count; MuJoCo's solver_niter[0] is island 0's only (SMALL_XML at tolerance 1e-15: island 0 stops after 22 and 11
    sweeps, the weld's island after 1570 and 1643, ours and MuJoCo's)."""
    pgs = copy.copy(mjm)
    pgs.opt.iterations = int(m.opt.iterations)
    pgs.opt.tolerance = float(m.opt.tolerance)
    mjd = mujoco.MjData(pgs)
    for f in ("qpos", "qvel", "ctrl", "act", "qfrc_applied", "xfrc_applied"):
        getattr(mjd, f)[:] = getattr(mjd_ref, f)
    mujoco.mj_forward(pgs, mjd)
    n = max(1, int(mjd.nisland))
    if mjd.nisland:  # (islands disabled, or none: the whole system's count only)
        np.testing.assert_array_equal(np.asarray(d.solver_niter_island)[:n], mjd.solver_niter[:n])
    assert int(d.solver_niter) == int(np.max(mjd.solver_niter[:n])) < pgs.opt.iterations
    rm, ro = oracle.match_rows(mjd, pgs, d)
    oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], PGS_TOL, "efc_force (MuJoCo's PGS)")


# ---------------------------------------------------------------------------------------------------------
# forward vs mj_forward

# PGS-elliptic slow too (CI time): PGS's iterates and forces on SMALL_XML (elliptic rows end to end) stay by default
# against MuJoCo's PGS in test_pgs's test_iterates_match_mujoco[pyramidal-...] and (the elliptic sweeps, on MuJoCo's
# own problem) test_sweeps_match_mujoco_on_its_problem, its stopping test in test_pgs's
# test_niter_matches_mujoco_at_default_tolerance[pyramidal], its per-island sweep counts in test_island_solve's
# test_islands_converged[pyramidal-PGS]
DEFAULT_MATRIX = [("Newton", "pyramidal")]
SLOW_MATRIX = [("PGS", "elliptic"), ("Newton", "elliptic"), ("CG", "pyramidal"), ("CG", "elliptic"),
               ("PGS", "pyramidal")]  # fmt: skip


@pytest.mark.parametrize(
    "solver,cone", DEFAULT_MATRIX + [pytest.param(*c, marks=pytest.mark.slow) for c in SLOW_MATRIX]
)
def test_small_model_forward(solver, cone):
    """Box/sphere/capsule/box with condim 1, 3, 4, 6 on a plane, limit, frictionloss, connect, weld, joint eq."""
    mjm = oracle.small_model(solver, cone)
    m = oracle.model_from_mujoco(mjm)
    m = m.replace(opt=m.opt.replace(**_our_opts(mjm)))
    check_forward(mjm, m, oracle.small_state, min_nefc=20)


@pytest.fixture(scope="module")
def small_newton():
    mjm = oracle.small_model("Newton", "pyramidal")
    m = oracle.model_from_mujoco(mjm)
    return mjm, m


def test_pgs_reports_its_dual_forces(small_newton):
    """PGS's efc_force is its own dual iterate in both gradient modes, as MuJoCo reports it: the implicit mode's
    force law re-evaluated at qacc would carry qacc's residual error times D J (1e-5 relative on this model after
    PGS stops at tolerance 1e-15, where the dual iterate is within 4e-7 of the optimum)."""
    mjm_newton, m_newton = small_newton
    mjm = oracle.small_model("PGS", "pyramidal")
    m = oracle.model_from_mujoco(mjm)
    m = m.replace(opt=m.opt.replace(iterations=50))  # stopped well before convergence: the two forces differ most
    mjd = mujoco.MjData(mjm)
    oracle.small_state(mjm, mjd, np.random.default_rng(1))
    # the constraint rows do not depend on the solver: the Newton model's forward (test_small_model_forward
    # [Newton-pyramidal]'s compile) builds them, and only the PGS solve compiles, once per mode (CI time)
    f0 = forward(m_newton, oracle.data_with_state(m_newton, mjm_newton, mjd))
    out = {}
    for mode in ("unrolled", "implicit"):
        out[mode] = _solve(mjl.configure(m, gradients=mode), f0)
    du, di = out["unrolled"], out["implicit"]
    assert int(di.solver_niter) == int(du.solver_niter) == 50
    oracle.close(di.efc_force, du.efc_force, ROUNDOFF_TOL, "efc_force")
    oracle.close(di.qacc, du.qacc, ROUNDOFF_TOL, "qacc")


@pytest.mark.parametrize(
    "name",
    # all slow (CI time): Newton's forward against MuJoCo's stays by default on SMALL_XML (test_small_model_forward
    # [Newton-pyramidal]; the humanoid's forward with its contacts: test_pgs's test_humanoid_50_iterations, slow too)
    [
        pytest.param(n, marks=pytest.mark.slow)
        for n in ("humanoid", "finger", "pendula", "walker", "humanoid_elliptic_cg")
    ],
)
def test_reference_model_forward(name):
    mjm = REFERENCE[name]()
    m = oracle.model_from_mujoco(mjm)
    m = m.replace(opt=m.opt.replace(**_our_opts(mjm)))
    check_forward(mjm, m, _reference_state, min_nefc=0)


# ---------------------------------------------------------------------------------------------------------
# inverse dynamics


def test_padded_rows_inert(small_newton):
    """Dead rows (inactive contacts/limits) have zero J, force and aref, and R = 1: they change nothing."""
    mjm, m = small_newton
    mjd = mujoco.MjData(mjm)
    oracle.small_state(mjm, mjd, np.random.default_rng(3))
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    dead = ~np.asarray(d.efc_mask)
    assert dead.any()
    for name in ("efc_J", "efc_force", "efc_aref", "efc_pos"):
        assert np.all(np.asarray(getattr(d, name))[dead] == 0), name
    assert np.all(np.asarray(d.efc_R)[dead] == 1)


# ---------------------------------------------------------------------------------------------------------
# trajectories

BOX_XML = """
<mujoco>
  <option timestep="0.002" solver="{solver}" cone="{cone}" jacobian="dense" iterations="100" tolerance="1e-10"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .13"><freejoint/><geom type="box" size=".1 .1 .1" condim="{condim}"/></body>
  </worldbody>
</mujoco>
"""


@functools.partial(jax.jit, static_argnums=2)
def _rollout(m, d, n):
    return rollout(m, d, n)


def _mj_rollout(mjm, mjd, n):
    out = []
    for _ in range(n):
        mujoco.mj_step(mjm, mjd)
        out.append(mjd.qpos.copy())
    return np.array(out)


def test_box_on_plane_trajectory():
    """A tilted, spinning box dropped on the plane: mj_step for the first steps, then at rest for 1000 steps."""
    mjm = mujoco.MjModel.from_xml_string(BOX_XML.format(solver="Newton", cone="pyramidal", condim=3))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[3:7] = np.array([1.0, 0.05, -0.03, 0.02]) / np.linalg.norm([1.0, 0.05, -0.03, 0.02])
    mjd.qvel[:] = [0.2, -0.1, 0.0, 0.5, 0.3, -1.0]
    d0 = oracle.data_with_state(m, mjm, mjd)
    n_cmp = 60  # the box lands at step ~50: contact onset included
    theirs = _mj_rollout(mjm, _copy_data(mjm, mjd), n_cmp)
    qpos, d = _rollout(m, d0, 1000)  # one program: its first n_cmp steps are the compared ones
    qpos = np.asarray(qpos)
    oracle.close(qpos[:n_cmp], theirs, TRAJ_TOL, "qpos")
    z = qpos[:, 2]
    assert np.all(np.isfinite(np.asarray(qpos)))
    assert z.min() > 0.1 - 0.01, "box sank through the floor"
    np.testing.assert_allclose(z[-1], 0.1, atol=2e-3)  # resting, with the soft contact's small penetration
    assert np.abs(np.asarray(d.qvel)).max() < 1e-3, "box not at rest"
    assert int(d.ncon) == 4


def _copy_data(mjm, mjd):
    out = mujoco.MjData(mjm)
    out.qpos[:] = mjd.qpos
    out.qvel[:] = mjd.qvel
    return out


# both slow (CI time): a contact trajectory against mj_step stays by default in test_box_on_plane_trajectory (and
# test_small_model_forward[Newton-pyramidal]'s forward with contacts against mj_forward)
@pytest.mark.parametrize(
    "n_steps", [pytest.param(10, marks=pytest.mark.slow), pytest.param(1000, marks=pytest.mark.slow)]
)
def test_humanoid_falling(n_steps):
    """The humanoid dropped from its initial pose: mj_step for 10 steps; 1000 steps stay finite, above ground."""
    mjm = _humanoid()
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.1
    d0 = oracle.data_with_state(m, mjm, mjd)
    if n_steps <= 10:
        theirs = _mj_rollout(mjm, _copy_data(mjm, mjd), n_steps)
        qpos, _ = _rollout(m, d0, n_steps)
        oracle.close(qpos, theirs, TRAJ_TOL, "qpos")
        return
    qpos, d = _rollout(m, d0, n_steps)
    assert np.all(np.isfinite(np.asarray(qpos)))
    ref = _copy_data(mjm, mjd)
    for _ in range(n_steps):
        mujoco.mj_step(mjm, ref)
    # only the feet collide in this model (the rest falls through the floor, in MuJoCo too): the 1000-step
    # trajectory follows MuJoCo's, and the colliding geoms stay above the floor
    oracle.close(d.xpos, ref.xpos, LONG_TRAJ_TOL, "xpos after 1000 steps")
    feet = np.nonzero(mjm.geom_contype[1:])[0] + 1
    geom_z = np.asarray(d.geom_xpos)[feet, 2]
    assert np.all(geom_z > 0.0), "a colliding geom sank below the floor"
    assert int(d.ncon) > 0


# ---------------------------------------------------------------------------------------------------------
# gradients


def _final_loss(m, d0, n):
    def loss(qvel0):
        qpos, _ = rollout(m, d0.replace(qvel=qvel0), n)
        return jp.sum(qpos[-1, :3] * jp.array([1.0, 0.5, 2.0], qpos.dtype))

    return loss


# All slow (CI time): gradients through contact rows stay in the default selection against central differences
# in test_island_solve's test_islands_gradient and test_noslip's test_gradients[implicit-pyramidal] (a whole step),
# and the implicit gradient through pyramidal friction rows (Newton) in test_implicit_gradient_matches_unrolled
# [pyramidal].
GRAD_SLOW = [("Newton", "pyramidal"), ("Newton", "elliptic"), ("CG", "pyramidal"), ("CG", "elliptic"),
             ("PGS", "pyramidal"), ("PGS", "elliptic")]  # fmt: skip


@pytest.mark.parametrize("solver,cone", [pytest.param(*c, marks=pytest.mark.slow) for c in GRAD_SLOW])
def test_grad_through_contact_rollout_finite(solver, cone):
    """jax.grad through 50 steps of a box sliding and tumbling on the plane (contacts all along)."""
    mjm = mujoco.MjModel.from_xml_string(BOX_XML.format(solver=solver, cone=cone, condim=3))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] = 0.0995
    d0 = oracle.data_with_state(m, mjm, mjd)
    g = jax.jit(jax.grad(_final_loss(m, d0, 50)))(jp.array([1.0, 0.3, 0.0, 0.5, -0.4, 2.0]))
    assert np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0)


SOFT_XML = """
<mujoco>
  <option timestep="0.005" solver="Newton" cone="elliptic" jacobian="dense" iterations="50" tolerance="1e-14"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" condim="1" solref="0.05 0.5"/>
    <body pos="0 0 .098"><freejoint/><geom type="sphere" size=".1" condim="1" solref="0.05 0.5"/></body>
  </worldbody>
</mujoco>
"""


# both slow (CI time: the differentiated 30-step rollout compiles for 7 s): implicit gradients through contact rows
# against central differences stay by default in test_island_solve's test_islands_gradient (Newton, per island) and
# through a whole step with contacts in test_noslip's test_gradients[implicit-pyramidal]; implicit == unrolled with
# friction rows in test_implicit_gradient_matches_unrolled[pyramidal]
@pytest.mark.parametrize("implicit", [pytest.param(False, marks=pytest.mark.slow),
                                      pytest.param(True, marks=pytest.mark.slow)])
def test_grad_matches_finite_differences_soft_contact(implicit):
    """A sphere bouncing in a soft frictionless contact (active throughout): grad == central differences, both
    through the unrolled solver iterations and with implicit differentiation at the optimum."""
    mjm = mujoco.MjModel.from_xml_string(SOFT_XML)
    m = oracle.model_from_mujoco(mjm)
    m = mjl.configure(m, gradients="implicit" if implicit else "unrolled")
    d0 = oracle.data_with_state(m, mjm, mujoco.MjData(mjm))
    vg = jax.jit(jax.value_and_grad(_final_loss(m, d0, 30)))  # the differences from its values: one program
    v0 = np.array([0.3, -0.2, 0.05, 0.0, 0.0, 0.0])
    g = np.asarray(vg(v0)[1])
    h = 1e-6
    e = np.eye(6) * h
    fd = np.array([(float(vg(v0 + e[i])[0]) - float(vg(v0 - e[i])[0])) / (2 * h) for i in range(3)])
    np.testing.assert_allclose(g[:3], fd, rtol=FD_RTOL, atol=FD_RTOL)


@pytest.mark.parametrize("cone", ["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def test_implicit_gradient_matches_unrolled(cone):
    """d qacc / d qfrc_applied with contacts and friction: implicit (one Hessian solve) == unrolled Newton."""
    mjm = mujoco.MjModel.from_xml_string(BOX_XML.format(solver="Newton", cone=cone, condim=4))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] = 0.0995
    mjd.qpos[3:7] = np.array([1.0, 0.02, -0.01, 0.0]) / np.linalg.norm([1.0, 0.02, -0.01, 0.0])
    mjd.qvel[:] = [0.3, -0.2, 0.0, 0.1, 0.2, 0.5]
    d0 = oracle.data_with_state(m, mjm, mjd)
    w = jp.arange(1.0, 7.0)

    def loss(m, f):
        return jp.dot(_forward_impl(m, d0.replace(qfrc_applied=f)).qacc, w)

    f0 = jp.array([1.0, 0.5, -2.0, 0.1, 0.0, 0.2])
    grad = jax.jit(jax.grad(loss, argnums=1))  # one function: the configuration is part of the cache key
    g_unroll = np.asarray(grad(mjl.configure(m, gradients="unrolled"), f0))
    g_impl = np.asarray(grad(mjl.configure(m, gradients="implicit"), f0))
    assert np.all(np.isfinite(g_impl))
    oracle.close(g_impl, g_unroll, IMPLICIT_TOL, "d qacc / d qfrc_applied")
