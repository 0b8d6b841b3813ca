"""Oracle tests of the constraint solvers on MuJoCo's own constraint problems.

For each model state, MuJoCo (run to convergence: many iterations, tiny tolerance) provides the problem
(J, D, R, aref, frictionloss, cones, M, qacc_smooth) and its solution; our Newton, CG and PGS solve the same
problem and must reach the same unique optimum (efc_force, qacc).
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite.solver import common, pgs, primal
from tests import oracle

# The optimum is unique (M > 0, R > 0), so converged solvers agree whatever path they took.
# Newton solves with Cholesky: agreement to round-off amplified by conditioning (relative to max |value|).
NEWTON_TOL = 1e-6
# CG and PGS stop when the cost stops decreasing in floating point; a cost resolved to eps resolves its
# minimiser only to ~sqrt(eps) ~ 1e-8 relative, amplified by conditioning: 1e-5 relative.
FIRST_ORDER_TOL = 1e-5

_XML = """
<mujoco>
  <option cone="{cone}" impratio="{impratio}" jacobian="dense" iterations="{iters}" ls_iterations="60"
          tolerance="1e-15" solver="{solver}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .095">
      <freejoint/>
      <geom type="box" size=".1 .1 .1" condim="{condim}" friction="0.8 0.02 0.001"/>
    </body>
    <body pos=".5 0 .5">
      <joint name="h1" type="hinge" axis="0 1 0" range="-10 10" frictionloss="0.3" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
      <body pos=".3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="b3" pos="-.5 0 .5">
      <freejoint/>
      <geom type="sphere" size=".1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="b3" anchor="0 0 .2"/>
    <joint joint1="h1" joint2="h2" polycoef="0 1 0 0 0"/>
  </equality>
</mujoco>
"""

KIND = {
    int(mujoco.mjtConstraint.mjCNSTR_EQUALITY): common.EQUALITY,
    int(mujoco.mjtConstraint.mjCNSTR_FRICTION_DOF): common.FRICTION,
    int(mujoco.mjtConstraint.mjCNSTR_FRICTION_TENDON): common.FRICTION,
    int(mujoco.mjtConstraint.mjCNSTR_LIMIT_JOINT): common.INEQUALITY,
    int(mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON): common.INEQUALITY,
    int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS): common.INEQUALITY,
    int(mujoco.mjtConstraint.mjCNSTR_CONTACT_PYRAMIDAL): common.INEQUALITY,
    int(mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC): common.CONE,
}


def mujoco_problem(cone, condim, solver, seed, impratio=1.0, iters=2000):
    m = mujoco.MjModel.from_xml_string(
        _XML.format(cone=cone, condim=condim, solver=solver, impratio=impratio, iters=iters)
    )
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    # tilt and sink the box into the floor, random velocities, push the limited hinge past its limit
    d.qpos[2] = 0.095 - 0.01 * rng.random()
    q = rng.normal(size=4) * 0.05
    q[0] = 1
    d.qpos[3:7] = q / np.linalg.norm(q)
    d.qpos[7] = 0.2 + 0.05 * rng.random()
    d.qvel[:] = rng.normal(size=m.nv) * 0.5
    mujoco.mj_forward(m, d)
    nefc, nv = d.nefc, m.nv
    kind = np.array([KIND[int(t)] for t in d.efc_type[:nefc]], np.int64)
    groups: dict[int, list] = {}
    fric_groups: dict[int, list] = {}
    mu_groups: dict[int, list] = {}
    for c in range(d.ncon):
        con = d.contact[c]
        if kind[con.efc_address] != common.CONE:
            continue
        groups.setdefault(con.dim, []).append(np.arange(con.efc_address, con.efc_address + con.dim))
        fric_groups.setdefault(con.dim, []).append(con.friction[: con.dim - 1])
        mu_groups.setdefault(con.dim, []).append(con.mu)
    dims = sorted(groups)
    layout = common.Layout(kind=kind, cones=tuple(np.array(groups[k]) for k in dims))
    M = np.zeros((nv, nv))
    mujoco.mj_fullM(m, d, M)
    h = oracle.host_array  # (no eager programs)
    prob = common.Problem(
        J=h(d.efc_J[: nefc * nv].reshape(nefc, nv)),
        D=h(d.efc_D[:nefc]),
        R=h(d.efc_R[:nefc]),
        aref=h(d.efc_aref[:nefc]),
        frictionloss=h(d.efc_frictionloss[:nefc]),
        mask=h(np.ones(nefc, bool)),
        cone_mu=tuple(h(np.array(mu_groups[k])) for k in dims),
        cone_friction=tuple(h(np.array(fric_groups[k])) for k in dims),
        qacc_smooth=h(d.qacc_smooth),
        M=h(M),
    )
    return m, d, layout, prob


def _close(ours, theirs, atol):
    scale = max(1.0, float(np.max(np.abs(theirs))))
    np.testing.assert_allclose(ours, theirs, atol=atol * scale, rtol=0)


CASES = [("pyramidal", 1), ("pyramidal", 3), ("pyramidal", 4), ("pyramidal", 6),
         ("elliptic", 1), ("elliptic", 3), ("elliptic", 4), ("elliptic", 6)]  # fmt: skip
# default run: Newton and CG on the elliptic case (their only default elliptic oracle); the full matrix is marked
# slow (CI time). Newton-pyramidal stays by default end to end in test_constraint_forward's test_small_model_forward
# [Newton-pyramidal] (condim 1/3/4/6 against MuJoCo's converged Newton), CG-pyramidal in test_island_solve's
# test_islands_converged[pyramidal-CG], PGS in test_pgs's test_iterates_match_mujoco[pyramidal], its elliptic sweeps
# in test_pgs's test_sweeps_match_mujoco_on_its_problem, and
# test_niter_matches_mujoco_at_default_tolerance[pyramidal] and test_island_solve's test_islands_converged
# [pyramidal-PGS] (converged, per island)
DEFAULT = {("Newton", "elliptic", 6), ("CG", "elliptic", 6)}
MATRIX = [
    pytest.param(solver, cone, condim, marks=() if (solver, cone, condim) in DEFAULT else pytest.mark.slow)
    for solver in ("Newton", "CG", "PGS")
    for cone, condim in CASES
]


@pytest.mark.parametrize("solver,cone,condim", MATRIX)
def test_solver_matches_mujoco(solver, cone, condim):
    impratio = 2.0 if cone == "elliptic" else 1.0
    for seed in range(2):
        # reference: MuJoCo's Newton run to convergence (the optimum is unique, whichever solver reaches it)
        m, d, layout, prob = mujoco_problem(cone, condim, "Newton", seed, impratio=impratio, iters=200)
        assert d.nefc > 0 and d.ncon > 0

        # one jitted program per solve (CI time: run eagerly, the operations outside the solvers' loops compiled one
        # program each; Newton-elliptic-6 21 -> 11 CPU-s)
        @jax.jit
        def run(prob, layout=layout, nefc=d.nefc):
            minv = lambda x: jp.linalg.solve(prob.M, x)  # noqa: E731
            start = common.start_at(layout, prob, prob.qacc_smooth)
            if solver == "Newton":
                qacc, _, ev, *_ = primal.solve_newton(layout, prob, start, iterations=100, ls_iterations=50,
                                                      tolerance=1e-14, ls_tolerance=1e-3)  # fmt: skip
                return ev.force, qacc
            if solver == "CG":
                qacc, _, ev, *_ = primal.solve_cg(layout, prob, start, iterations=2000, ls_iterations=50,
                                                  tolerance=1e-16, ls_tolerance=1e-3, minv=minv)  # fmt: skip
                return ev.force, qacc
            force, qacc, *_ = pgs.solve_pgs(layout, prob, jp.zeros(nefc), iterations=3000, tolerance=1e-18,
                                            minv=minv)  # fmt: skip
            return force, qacc

        force, qacc = run(prob)
        tol = NEWTON_TOL if solver == "Newton" else FIRST_ORDER_TOL
        _close(np.asarray(force), d.efc_force[: d.nefc], tol)
        _close(np.asarray(qacc), d.qacc, tol)



# float32 line search on one quadratic: the first Newton step lands on the minimiser to a few ulps; 1e-5 relative
# leaves room for that and none for a doubling or bisection step away from it (>= 1/8 of alpha)
LS_F32_RTOL = 1e-5


def test_float32_line_search_stops_at_the_minimum():
    """Regression: in float32 the line search's derivative test can be out of reach. At the minimiser of a
    quadratic the Newton step is below alpha's resolution; it used to fail the bracket test, and the fallback
    doubled alpha away from the minimum and bisected back (the MJX humanoid, 1 solver iteration and 4 line-search
    steps, drifted 1e-2 in qvel from float64 in 5 steps). One dof, an inactive row: the cost along s = 1 is
    0.5 a^2 sMs + a g0, minimised at -g0 / sMs, which the first Newton step gives to a rounding."""
    import jax  # noqa: PLC0415

    layout = common.Layout(kind=np.array([common.INEQUALITY]), cones=())
    rng = np.random.default_rng(0)
    n = 2000
    smsv = jp.asarray(10.0 ** rng.uniform(-2, 3, n), jp.float32)
    g0v = jp.asarray(-(10.0 ** rng.uniform(-2, 3, n)), jp.float32)
    one = jp.ones(1, jp.float32)

    def search(sms, g0):
        # inactive row (jar = 0 q + 1 > 0); M = sMs; Ma = g0 with search 1
        p = common.Problem(J=jp.zeros((1, 1), jp.float32), D=one, R=one, aref=-one, frictionloss=0 * one,
                           mask=jp.ones(1, bool), cone_mu=(), cone_friction=(), qacc_smooth=0 * one,
                           M=sms.reshape(1, 1))  # fmt: skip
        alpha, _, _ = common.line_search(layout, p, one, g0.reshape(1), one, 4, jp.float32(1e-12), jp.float32(1.0))
        return alpha

    alpha = np.asarray(jax.jit(jax.vmap(search))(smsv, g0v), np.float64)
    exact = -np.asarray(g0v, np.float64) / np.asarray(smsv, np.float64)
    np.testing.assert_allclose(alpha, exact, rtol=LS_F32_RTOL, atol=0)


def test_hessian_takes_unit_rows_as_a_diagonal():
    """Rows with J = +-e_dof (dof friction loss, slide/hinge limits; `Layout.unit_col`) enter the dense Hessian as
    a diagonal term; the same Hessian as the full J' H_s J product, on the MJX humanoid (limits and contacts, some
    rows inactive) with a random diagonal."""
    import dataclasses  # noqa: PLC0415
    import os  # noqa: PLC0415

    import jax  # noqa: PLC0415

    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite.pipeline import constraint, forward  # noqa: PLC0415

    path = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "humanoid", "humanoid.xml")
    mjm = mujoco.MjModel.from_xml_path(path)
    mjd = mujoco.MjData(mjm)
    for _ in range(40):
        mujoco.mj_step(mjm, mjd)
    mjd.qpos[7::2] = 1.1 * mjm.jnt_range[1::2, 1]  # every other hinge past its upper limit
    m = mjl.load_mjcf(path)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
    layout = constraint.plan(m).layout
    uc = layout.unit_col
    assert np.sum(uc >= 0) > 10 and np.sum(uc < 0) > 10
    hdiag = jp.asarray(np.random.default_rng(0).uniform(0.5, 2.0, d.efc_D.shape))

    @jax.jit
    def hessians(d, hdiag):
        # CI time: the position stages (collision and the rows) and both Hessians in one program, not the whole
        # forward (its solver) and eager op-by-op Hessians
        d = forward.fwd_position(m, d)
        prob = constraint.problem(m, d)
        ev = common.ConstraintEval(cost=0.0, force=0 * hdiag, hdiag=hdiag, cone_hess=(), state=0 * hdiag)
        ours = common.constraint_hessian(layout, prob, ev)
        full = common.constraint_hessian(dataclasses.replace(layout, unit_col=None), prob, ev)
        return d.efc_mask, ours, full

    efc_mask, ours, full = hessians(d, hdiag)
    assert 0 < int(np.sum(np.asarray(efc_mask)[uc >= 0])) < int(np.sum(uc >= 0))  # some limit rows inactive
    np.testing.assert_allclose(np.asarray(ours), np.asarray(full), rtol=1e-14, atol=1e-12)


@pytest.mark.parametrize("nblocks", [2, 2 * common.MAX_ROW_RUNS])
def test_hessian_unit_rows_between_general_rows(nblocks):
    """Unit rows (J = +-e_dof, some zeroed as inactive) between blocks of general rows, as the quadruped's limits
    between its equality and contact rows: the general rows then form several runs, which the dense Hessian sums
    by static slices (up to MAX_ROW_RUNS runs) or gathers (more); both equal the full J' H_s J product."""
    rng = np.random.default_rng(nblocks)
    nv, rows, uc = 7, [], []
    for _ in range(nblocks):
        g = rng.integers(1, 4)
        rows.append(rng.normal(size=(g, nv)))
        uc += [-1] * g
        for _ in range(rng.integers(1, 3)):
            c = int(rng.integers(nv))
            rows.append(np.eye(nv)[c][None] * rng.choice([-1.0, 1.0, 0.0]))
            uc.append(c)
    J = np.concatenate(rows)
    uc = np.array(uc)
    assert len(common._row_runs(np.nonzero(uc < 0)[0])) == nblocks
    n = J.shape[0]
    layout = common.Layout(kind=np.full(n, common.INEQUALITY), cones=(), unit_col=uc)
    one = jp.ones(n)
    prob = common.Problem(J=jp.asarray(J), D=one, R=one, aref=0 * one, frictionloss=0 * one, mask=one > 0,
                          cone_mu=(), cone_friction=(), qacc_smooth=jp.zeros(nv), M=jp.eye(nv))  # fmt: skip
    hdiag = jp.asarray(rng.uniform(0.5, 2.0, n))
    ev = common.ConstraintEval(cost=0.0, force=0 * hdiag, hdiag=hdiag, cone_hess=(), state=0 * hdiag)
    ours = common.constraint_hessian(layout, prob, ev)
    full = (J * np.asarray(hdiag)[:, None]).T @ J
    np.testing.assert_allclose(np.asarray(ours), full, rtol=1e-14, atol=1e-12)


# float32 solution of a converged solve against MuJoCo's float64 one, relative to max(1, |qacc|): observed <= 2.6e-7
NEWTON_F32_TOL = 1e-6


@pytest.mark.parametrize("cone,condim", [("pyramidal", 4), pytest.param("elliptic", 6, marks=pytest.mark.slow)])
def test_float32_newton_stops_at_its_precision(cone, condim):
    """At MuJoCo's default tolerance (1e-8) our float32 Newton takes no more iterations than float64 and reaches
    MuJoCo's solution to float32 precision. Regression: the gradient test could not be met in float32 (after a
    converged step the scaled gradient sits at the rounding error of M a - J' f, above 1e-8), so every solve took
    one more iteration that changed nothing (dm_control's cheetah: 1.85 iterations per step, MuJoCo 0.98)."""
    import jax  # noqa: PLC0415

    for seed in range(2):
        m, d, layout, prob = mujoco_problem(cone, condim, "Newton", seed, impratio=2.0 if cone == "elliptic" else 1.0)
        m.opt.tolerance = 1e-8
        m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_WARMSTART)  # start at qacc_smooth, as ours below
        mujoco.mj_forward(m, d)
        niter = {}
        for dtype in (jp.float64, jp.float32):
            p = jax.tree.map(lambda x, t=dtype: x.astype(t) if jp.issubdtype(x.dtype, jp.floating) else x, prob)
            start = common.start_at(layout, p, p.qacc_smooth)
            solve = jax.jit(lambda p, start, layout=layout, t=dtype: primal.solve_newton(
                layout, p, start, iterations=100, ls_iterations=50, tolerance=t(1e-8), ls_tolerance=t(0.01),
                early_exit=True))  # fmt: skip
            qacc, *_, n, _, _ = solve(p, start)
            niter[dtype] = int(n)
        _close(np.asarray(qacc, np.float64), d.qacc, NEWTON_F32_TOL)
        assert 0 < niter[jp.float32] <= niter[jp.float64], (seed, niter)
