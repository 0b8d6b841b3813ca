"""Issue 39: MuJoCo 4.0 scales the Newton and CG stopping tests (improvement, gradient, and the line search's
derivative test) by 1 / trace(M) of the current mass matrix, not by 1 / (stat.meaninertia * nv) as MuJoCo 3.x did.

Probe on the 4.0 binary (the model below, islands enabled and disabled): multiplying `m.stat.meaninertia` by 1000
leaves solver_niter and every `d.solver[i].improvement` bitwise unchanged; with islands enabled the statistics are
those of the island's own trace (a heavy unconstrained free body added to the model scales every improvement by
trace(M) / trace(M_island) against islands disabled). This file tests the monolithic solve (islands disabled):
a hinge arm whose heavy slider is extended far from its qpos0 position, so that trace(M) at the tested states is
over 3x meaninertia * nv (which is trace(M(qpos0))). At a sweep of tolerances (the stopping iteration moves),
each iteration's improvement and gradient are MuJoCo's, on the XLA path and the fused kernel (Pallas interpret
mode), Newton and CG, float64. solver_niter is compared in tests/test_newton_stop.py (Newton's decrement and
zero-iteration exits).
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

# float64, the same iterations as MuJoCo up to the order of sums: the statistics are scaled differences of costs
# (improvement) and of M a - J' f (gradient); their round-off relative to the cost's scale (observed < 1e-11)
STAT_TOL = 1e-9
QACC_TOL = 1e-9  # qacc at the stopping iteration, relative to max(1, |qacc|)
TOLERANCES = (1e-2, 1e-6, 1e-10)
# iterations compared: Newton all of MuJoCo's; CG the first 12 (with Hager-Zhang's direction update, MuJoCo 4.0's,
# in both the XLA solver and the fused kernel; with Polak-Ribiere-plus seed 0's iterates parted at iteration 4)
MAX_K = {"Newton": mujoco.mjNSOLVER, "CG": 12}

XML = """
<mujoco>
  <option solver="{solver}" iterations="100" ls_iterations="50" jacobian="dense" cone="pyramidal">
    <flag island="disable" warmstart="disable"/>
  </option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .6">
      <joint name="h0" type="hinge" axis="0 1 0" range="-20 20" frictionloss="0.05"/>
      <geom type="capsule" fromto="0 0 0 .2 0 0" size=".02" mass="0.05" contype="0" conaffinity="0"/>
      <body name="slider">
        <joint name="s" type="slide" axis="1 0 0" range="0 2"/>
        <geom type="sphere" size=".08" mass="30"/>
      </body>
    </body>
    <body pos=".5 .5 .02">
      <freejoint/>
      <geom type="box" size=".03 .03 .03" mass="0.002"/>
    </body>
  </worldbody>
</mujoco>
"""


def _state(mjm, mjd, seed):
    """The hinge past its limit, the slider far out (its sphere sunk into the floor), the light box sunk too."""
    rng = np.random.default_rng(seed)
    mjd.qpos[:] = mjm.qpos0
    mjd.qpos[0] = np.deg2rad(20) + 0.01 + 0.01 * rng.random()  # hinge past its upper limit
    mjd.qpos[1] = 1.6 + 0.1 * rng.random()
    mjd.qpos[4] = 0.025 - 0.005 * rng.random()
    mjd.qvel[:] = rng.normal(size=mjm.nv)


def _prepare(m, d):
    d = fwd.forward_pos_vel(m, d)
    return fwd.fwd_acceleration(m, fwd.fwd_actuation(m, d))


# the stages before the solver, compiled once for both solvers' models (their solver type, set to one value here,
# does not reach them: CI time)
_jprepare = jax.jit(_prepare)
_jsolve = jax.jit(fwd.fwd_constraint)


@pytest.fixture(scope="module")
def cases():
    """cases(solver) -> (solver name, MuJoCo model, our XLA model, our fused model, prepared Data per seed, jitted
    solve), built once per solver."""
    cache = {}

    def get(solver):
        if solver not in cache:
            mjm = mujoco.MjModel.from_xml_string(XML.format(solver=solver))
            m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
            mf = mjl.configure(m, kernels="fused")
            prepared = []
            for seed in range(2):
                mjd = mujoco.MjData(mjm)
                _state(mjm, mjd, seed)
                d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
                prepared.append((seed, _jprepare(m.replace(opt=m.opt.replace(solver=int(mjl.SolverType.NEWTON))), d)))
            cache[solver] = (solver, mjm, m, mf, prepared, jax.jit(solve))
        return cache[solver]

    return get


def _mujoco(mjm, seed, tol):
    mjm.opt.tolerance = tol
    mjd = mujoco.MjData(mjm)
    _state(mjm, mjd, seed)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _with_tol(m, tol):
    return m.replace(opt=m.opt.replace(tolerance=jp.asarray(tol, m.opt.tolerance.dtype)))


@pytest.mark.parametrize("solver", ["Newton", "CG"])
def test_trace_far_from_meaninertia(cases, solver):
    """The tested states' trace(M) is over 3x meaninertia * nv: the old scale would stop elsewhere."""
    _, mjm, *_ = cases(solver)
    mjd = _mujoco(mjm, 0, 1e-8)
    M = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, mjd, M)
    assert np.trace(M) > 3 * mjm.stat.meaninertia * mjm.nv
    assert mjd.nefc >= 6 and mjd.ncon >= 2


# CG's fused kernel slow (CI time, ~28 s: one interpreted compile per iteration budget): its iterates, statistics and
# solver_niter are the XLA CG's (tests/test_kernels_solver.py::test_solver_equals_xla[cg-dense]), which ["CG-xla"]
# compares with MuJoCo here; the fused Newton kernel stays in CI (["Newton-fused"])
# Newton's fused kernel slow too (CI time): its iterates and statistics are the XLA Newton's by default in
# tests/test_kernels_solver.py::test_solver_equals_xla[newton-dense] (["Newton-xla"] compares those with MuJoCo here),
# and its solver_niter is MuJoCo's by default in tests/test_newton_stop.py::test_niter_matches_mujoco[pyramidal-fused]
# CG-xla's default case compares the first CG_DEFAULT_K iterations (CI time: each budget k compiles its own solve,
# ~0.9 worker-s each; with Polak-Ribiere-plus in place of Hager-Zhang the iterates part at iteration 4); all
# MAX_K["CG"] of them in the slow ["CG-xla-all"]
CG_DEFAULT_K = 6


@pytest.mark.parametrize("solver,path", [("Newton", "xla"), pytest.param("Newton", "fused", marks=pytest.mark.slow),
                                         ("CG", "xla"),
                                         pytest.param("CG", "xla-all", marks=pytest.mark.slow),
                                         pytest.param("CG", "fused", marks=pytest.mark.slow)])  # fmt: skip
def test_iterations_match_mujoco(cases, solver, path):
    """With the iteration budget cut to k, the k-th iteration's improvement and gradient and qacc are MuJoCo's
    (`d.solver[k - 1]`) at each tolerance of TOLERANCES (the tolerance also sets the line search's). Islands are
    disabled: one solve of the whole system, no per-island counts (solver_niter_island all 0). ("xla-all": the XLA
    path over all MAX_K iterations, "xla" CG over its first CG_DEFAULT_K.)"""
    solver, mjm, m, mf, prepared, jsolve = cases(solver)
    model = mf if path == "fused" else m
    max_k = CG_DEFAULT_K if (solver, path) == ("CG", "xla") else MAX_K[solver]
    for seed, d in prepared:
        for tol in TOLERANCES:
            mjd = _mujoco(mjm, seed, tol)
            n = int(mjd.solver_niter[0])
            assert 0 < n <= mujoco.mjNSOLVER
            ref = max(1.0, mjd.solver[0].improvement)  # the statistics' scale: the first (largest) improvement
            for k in range(1, min(n, max_k) + 1):
                ours = jsolve(_with_tol(model.replace(opt=model.opt.replace(iterations=k)), tol), d)
                what = f"{solver} {path} seed {seed} tolerance {tol:g} iteration {k}"
                assert int(ours.solver_niter) == k, what
                assert not np.any(np.asarray(ours.solver_niter_island)), what
                stat = mjd.solver[k - 1]
                assert abs(float(ours.solver_improvement) - stat.improvement) <= STAT_TOL * ref, (
                    what, float(ours.solver_improvement), stat.improvement)  # fmt: skip
                assert abs(float(ours.solver_gradient) - stat.gradient) <= STAT_TOL * ref, (
                    what, float(ours.solver_gradient), stat.gradient)  # fmt: skip
                if k == n:
                    oracle.close(ours.qacc, mjd.qacc, QACC_TOL, what)


GAP_XML = """
<mujoco>
  <option solver="CG" tolerance="1e-6"><flag island="{island}"/></option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .11"><freejoint/><geom type="box" size=".1 .1 .1" mass="1"/></body>
    <body pos=".5 0 .06"><freejoint/><geom type="sphere" size=".05"/></body>
  </worldbody>
</mujoco>
"""


def _settled(island):
    """A box and a sphere settled on the floor by 300 CG steps: the forward pass starts from CG's own warm start."""
    mjm = mujoco.MjModel.from_xml_string(GAP_XML.format(island=island))
    mjd = mujoco.MjData(mjm)
    for _ in range(300):
        mujoco.mj_step(mjm, mjd)
    return mjm, mjd


@pytest.mark.parametrize("island,path", [("enable", "xla"), ("disable", "fused")])
def test_cg_takes_zero_iterations_on_the_duality_gap(island, path):
    """MuJoCo 4.0's CG stops before its first iteration when the duality gap 0.5 scale grad' M^-1 grad is below
    tolerance, with no gradient test (Newton needs both). At the settled box's warm start CG takes 0 iterations
    while Newton from the same start takes 1 (MuJoCo's own counts: the gradient test fails there); our CG (XLA per
    island; fused, whole system) stops there too, with MuJoCo's qacc."""
    mjm, mjd = _settled(island)
    warm = mjd.qacc_warmstart.copy()
    mujoco.mj_forward(mjm, mjd)
    n = max(1, mjd.nisland)
    assert mjd.solver_niter[0] == 0
    newton = mujoco.MjData(mjm)
    mujoco.mj_copyData(newton, mjm, mjd)
    newton.qacc_warmstart[:] = warm
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mujoco.mj_forward(mjm, newton)
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_CG
    assert newton.solver_niter[0] == 1  # the gradient test fails at this start
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels=path)
    d = oracle.data_from_mujoco(m, mjm, mjd).replace(qacc_warmstart=jp.asarray(warm))
    # the stages before the solver on the XLA path with islands on for both params (neither reaches them: one
    # compile of GAP_XML's colliders; CI time: the fused forward compiled every kernel in interpret mode), then the
    # forward pass's solve (fwd_constraint) of `path`: the fused CG kernel (whole system) or the XLA CG per island
    mp = mjl.configure(m, kernels="xla")
    mp = mp.replace(opt=mp.opt.replace(disableflags=mp.opt.disableflags & ~int(mjl.DisableBit.ISLAND)))
    ours = _jsolve(m, _jprepare(mp, d))
    if path == "xla":
        np.testing.assert_array_equal(np.asarray(ours.solver_niter_island)[:n], mjd.solver_niter[:n])
    else:
        assert int(ours.solver_niter) == 0
    oracle.close(ours.qacc, mjd.qacc, QACC_TOL, f"CG {island} {path}")
