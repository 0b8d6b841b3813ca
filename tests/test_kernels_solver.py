"""The fused constraint solver (kernels/primal.py: Newton and CG iterations as one Pallas kernel) against the XLA
solver (solver/primal.py).

The solver runs alone here (`solver.solve.solve` on Data prepared by the XLA path), so each test compiles one
kernel in Pallas' interpret mode. Rows: a connect and a joint equality, dof friction loss, slide/hinge/ball limits
and pyramidal contacts (a sphere and a capsule on a plane), on random states. ELLIPTIC: elliptic cones of condim 3,
4 and 6 (and a frictionless contact, an explicit pair with solreffriction) on sliding, spinning states (cones in
the middle zone), the solver kernels against the XLA solver and the fused forward against MuJoCo.
"""

import contextlib

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import constraint, kernels
from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline.kernels import launch, primal
from mjx_lite.solver.solve import solve
from mjx_lite.types import ConstraintState, ConstraintType
from tests import oracle, test_solver
from tests import test_constraint_forward as tcf
from tests import test_kernels as tk

# float64: the fused and XLA solvers take the same steps and differ by round-off (summation orders), which the
# iterations carry along (CG's 20-50 iterations amplify it): relative to max(1, max |field|)
SOLVER_TOL = 1e-10
# float32: opt.tolerance (1e-8) is below float32's resolution of the cost, so the stopping tests fire on round-off
# and the two paths may stop one iteration apart (so may the XLA path itself under another compilation): solver_niter
# is not compared. Each path's distance from the float64 solution is: the fused one's within this factor of the XLA
# one's, plus float32 round-off of the solution (relative to max(1, max |field|))
F32_FACTOR = 2.0
F32_EPS_REL = 1e-5
# gradients: both paths differentiate the same rule (implicit: the optimality condition at qacc; unrolled: the XLA
# iterations) at primal values that differ by round-off
GRAD_TOL = 1e-8

ROWS = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="ball" pos="0.4 0 0.09">
      <freejoint/>
      <geom type="sphere" size="0.1"/>
    </body>
    <body name="arm" pos="-0.6 0 0.8">
      <joint name="h0" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" range="-10 60" frictionloss="0.1"/>
        <joint name="s1" type="slide" axis="1 0 0" range="-0.05 0.05"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
        <body name="hand" pos="0.3 0 0">
          <joint name="b" type="ball" range="0 40"/>
          <geom type="sphere" size="0.05" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
    <body name="free2" pos="-0.2 0.5 0.05">
      <freejoint/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.04"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="free2" body2="world" anchor="0 0 0"/>
    <joint joint1="h1" joint2="h0" polycoef="0 0.5 0 0 0"/>
  </equality>
</mujoco>
"""

# elliptic cones (`<option cone="elliptic"/>`): a sphere of condim 3 and one of condim 4, a capsule of condim 6 (two
# contacts) on a frictionless plane, a sphere on a hinge chain touching it through an explicit pair (condim 3, its own
# solreffriction), friction loss and limits. Also read by tests/test_kernels_rows.py.
ELLIPTIC = """
<mujoco>
  <option timestep="0.005" cone="elliptic" impratio="1.5" jacobian="dense"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" condim="1"/>
    <body name="ball" pos="0.4 0 0.08">
      <freejoint/>
      <geom type="sphere" size="0.1" condim="3"/>
    </body>
    <body name="top" pos="0 0.5 0.08">
      <freejoint/>
      <geom type="sphere" size="0.1" condim="4" friction="0.8 0.02 0.001"/>
    </body>
    <body name="cap" pos="-0.3 -0.6 0.02">
      <freejoint/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.04" condim="6" friction="1.2 0.03 0.002"/>
    </body>
    <body name="arm" pos="-0.6 0 0.8">
      <joint name="h0" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" range="-10 60" margin="0.1"/>
        <geom name="hand" type="sphere" pos="0.2 0 -0.76" size="0.05" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <contact>
    <pair geom1="hand" geom2="floor" condim="3" solreffriction="0.03 0.8"/>
  </contact>
</mujoco>
"""


# ELLIPTIC with the capsule at condim 4: cones of condim 3 and 4 only, for the default selection (CI time: the
# solver kernels unroll each cone dimension's law, dim^2 Hessian terms per group, and condim 6's group more than
# doubled the lane Newton kernel's trace, lowering and compile, 27 -> 14 CPU-s, the tiled one 14 -> 10). condim 4
# runs every line of the cone law that condim 6 runs (the dim > 3 tangential terms, a second group's offsets); the
# condim-6 cones stay in the slow selection (test_elliptic_solver_equals_xla[newton-0-elliptic] and the others on
# the `elliptic` fixture).
ELLIPTIC_SMALL = ELLIPTIC.replace('condim="6" friction="1.2 0.03 0.002"', 'condim="4" friction="1.2 0.03 0.002"')
assert ELLIPTIC_SMALL != ELLIPTIC


def sliding_state(mjm, mjd, rng):
    """A state of ELLIPTIC: a pose near qpos0 (the bodies touch the floor; MuJoCo's random inputs) and the free
    bodies sliding and spinning (their cones in the middle zone)."""
    oracle.random_state(mjm, mjd, rng, qpos_scale=0.02)
    for j in np.nonzero(mjm.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]:
        a = mjm.jnt_dofadr[j]
        mjd.qvel[a : a + 2] = rng.uniform(-1.5, 1.5, 2)
        mjd.qvel[a + 3 : a + 6] = rng.uniform(-5.0, 5.0, 3)


def sliding_states(mjm, m, n, seed=0):
    """n `sliding_state`s of ELLIPTIC as a batch of Data (qpos, qvel)."""
    rng = np.random.default_rng(seed)
    ds = []
    for _ in range(n):
        mjd = mujoco.MjData(mjm)
        sliding_state(mjm, mjd, rng)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    # host numpy (CI time: jp.stack would compile one tiny program per Data leaf)
    return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)


FIELDS = ("qacc", "efc_force", "qfrc_constraint", "efc_b")
# solver_improvement and solver_gradient are differences (of costs, of M a and J' f) scaled by 1 / trace(M): their
# round-off is relative to the size of those terms, |qfrc_constraint| max(1, |qacc|) / (meaninertia nv)
STATS = ("solver_improvement", "solver_gradient")


def _with(m, solver, **opt):
    return m.replace(opt=m.opt.replace(solver=int(solver), **opt))


def _prepare(m, d):
    """Every stage before the solver, on the XLA path."""
    d = fwd.forward_pos_vel(m, d)
    return fwd.fwd_acceleration(m, fwd.fwd_actuation(m, d))


_prepared = jax.jit(jax.vmap(_prepare, in_axes=(None, 0)))
_solve = jax.jit(jax.vmap(solve, in_axes=(None, 0)))


def _states(mjm, m, n, seed=0):
    rng = np.random.default_rng(seed)
    ds = []
    for _ in range(n):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    # host numpy (CI time: jp.stack would compile one tiny program per Data leaf)
    return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)


@pytest.fixture(scope="module")
def rows():
    """(Model, prepared batch of 3 states) of the ROWS model, float64, Newton, islands off (the kernels solve the
    whole system: the XLA reference without its per-island solve, MuJoCo 4.0's default, which stops each island on
    its own; one XLA solver program for the fixture and the tests)."""
    mjm = mujoco.MjModel.from_xml_string(ROWS)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    m = _with(m, m.opt.solver, disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)
    ds = _prepared(m, _states(mjm, m, 3))
    assert np.all(np.asarray(ds.efc_mask).sum(axis=1) > 8)  # equality, friction, limit and contact rows live
    # the solver's start: env 1 warm-starts near the solution (its cost is below qacc_smooth's, so the warm start is
    # chosen: fewer iterations), envs 0 and 2 from make_data's zero qacc_warmstart
    sol = _solve(m, ds)
    ds = ds.replace(qacc_warmstart=ds.qacc_warmstart.at[1].set(sol.qacc[1] * (1 + 1e-6)))
    niter = np.asarray(_solve(m, ds).solver_niter)
    assert niter[1] < niter[0] and niter[1] < niter[2], niter
    return m, ds


def _close(got, want, tol, what, m):
    terms = float(np.max(np.abs(want.qfrc_constraint)) * max(1.0, float(np.max(np.abs(want.qacc)))))
    terms = max(1.0, terms / float(m.stat.meaninertia) / m.nv)
    for f in FIELDS + STATS:
        a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        scale = terms if f in STATS else max(1.0, float(np.max(np.abs(b))))
        err = float(np.max(np.abs(a - b))) / scale
        assert err <= tol, f"{what}: {f} differs by {err:.3g} (relative), tolerance {tol}"
    np.testing.assert_array_equal(got.efc_state, want.efc_state, err_msg=what)
    np.testing.assert_array_equal(got.solver_niter, want.solver_niter, err_msg=what)


def _kernel_names(m, d) -> str:
    return str(jax.make_jaxpr(lambda d: solve(m, d))(d))


def _traced(fn, *args):
    """(fn(*args), the text of its jaxpr) for a jitted fn: one trace, lowered and compiled once (CI time: a separate
    make_jaxpr for the kernel's name traced the interpret-mode kernel again, 2-3 CPU-s each)."""
    traced = fn.trace(*args)
    return traced.lower().compile()(*args), str(traced.jaxpr)


@pytest.mark.parametrize("solver,mass", [("newton", "dense"), ("cg", "dense"),
                                         pytest.param("newton", "sparse", marks=pytest.mark.slow),
                                         pytest.param("cg", "sparse", marks=pytest.mark.slow),
                                         pytest.param("newton", "nowarm", marks=pytest.mark.slow)])  # fmt: skip
def test_solver_equals_xla(rows, solver, mass):
    """qacc, forces, efc_b, states, solver_niter and the convergence statistics of the fused solver (its start,
    the warm start where its cost is lower, and the rows' final states included) are the XLA solver's (float64;
    qM dense or tree-sparse; "nowarm": the warmstart flag disabled)."""
    m, ds = rows  # islands disabled: the fused kernels solve the whole system
    m = _with(m, mjl.SolverType.NEWTON if solver == "newton" else mjl.SolverType.CG)
    if mass == "nowarm":
        m = _with(m, m.opt.solver, disableflags=m.opt.disableflags | mjl.DisableBit.WARMSTART)
    if mass == "sparse":
        mjm = mujoco.MjModel.from_xml_string(ROWS)
        m = mjl.configure(m, mass_matrix="sparse")
        ds = _prepared(m, _states(mjm, m, 3))
    mf = mjl.configure(m, kernels="fused")
    got, names = _traced(_solve, mf, ds)
    one = jax.tree.map(lambda x: np.asarray(x)[0], ds)  # host numpy: no eager slicing programs
    assert f"name=solve_{solver}" in names and "pallas_call" not in _kernel_names(m, one)
    _close(got, _solve(m, ds), SOLVER_TOL, f"{solver} {mass}", m)


def test_unfused_configurations_stay_xla(rows):
    """The sparse efc_J layout keeps the XLA solver under kernels='fused' (traced only); elliptic cones run the
    kernel, PGS its own (kernels/pgs.py, tests/test_kernels_pgs.py)."""
    m, _ = rows
    pgs = mjl.configure(_with(m, mjl.SolverType.PGS), kernels="fused")
    names = _kernel_names(pgs, mjl.make_data(pgs))
    assert "solve_pgs" in names and "solve_newton" not in names
    mjm = mujoco.MjModel.from_xml_string(ROWS)
    mjm.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    me = mjl.configure(oracle.model_from_mujoco(mjm), kernels="fused")
    assert "solve_newton" in _kernel_names(me, mjl.make_data(me))
    ms = mjl.configure(m, efc_jacobian="sparse", kernels="fused")
    assert "pallas_call" not in _kernel_names(ms, mjl.make_data(ms))
    assert "pallas_call" in _kernel_names(mjl.configure(m, kernels="fused"), mjl.make_data(m))


# slow (CI time, ~11 s wall at load 10: the unbatched kernel's compile): the kernel's iterates are the XLA solver's
# (test_solver_equals_xla[newton-dense]) and the XLA Newton solver's optimum MuJoCo's (tests/test_solver.py)
@pytest.mark.slow
@pytest.mark.parametrize("seed", [0, 1])
def test_newton_kernel_matches_mujoco(seed):
    """The kernel alone (one environment, no vmap: a launch of one lane) on MuJoCo's own constraint problem
    (tests/test_solver.py: pyramidal condim-4 contacts of a box, friction loss, a limit, equalities) reaches
    MuJoCo's converged optimum (efc_force, qacc) to test_solver's Newton tolerance."""
    mjm, mjd, layout, prob = test_solver.mujoco_problem("pyramidal", 4, "Newton", seed, iters=200)
    m = oracle.model_from_mujoco(mjm)
    assert primal.fusable(m, layout, False) and mjd.ncon > 0
    kw = dict(iterations=100, ls_iterations=50, tolerance=1e-14, ls_tolerance=1e-3, early_exit=True,
              library=False)
    qacc, _, force, *_ = jax.jit(lambda p: primal.solve(m, layout, p, None, (), kw, launch.Launch(interpret=True)))(
        prob)  # fmt: skip
    test_solver._close(np.asarray(force), mjd.efc_force[: mjd.nefc], test_solver.NEWTON_TOL)
    test_solver._close(np.asarray(qacc), mjd.qacc, test_solver.NEWTON_TOL)


def _f32(x):
    return jax.tree.map(lambda v: v.astype(jp.float32) if jp.issubdtype(v.dtype, jp.floating) else v, x)


def _check_float32(m, ds, fields=("qacc", "qfrc_constraint")):
    """In float32, the fused solver's `fields` end as close to the float64 solution as the XLA solver's (within
    F32_FACTOR, plus F32_EPS_REL relative to the field's scale)."""
    want64 = _solve(m, ds)
    m32, ds32 = _f32(m), _f32(ds)
    got, want = _solve(mjl.configure(m32, kernels="fused"), ds32), _solve(m32, ds32)
    assert got.qacc.dtype == jp.float32
    for f in fields:
        ref = np.asarray(getattr(want64, f))
        scale = max(1.0, float(np.max(np.abs(ref))))
        e_fused = float(np.max(np.abs(np.asarray(getattr(got, f), np.float64) - ref))) / scale
        e_xla = float(np.max(np.abs(np.asarray(getattr(want, f), np.float64) - ref))) / scale
        assert e_fused <= F32_FACTOR * e_xla + F32_EPS_REL, (f, e_fused, e_xla)


# slow (CI time: the kernel compiles again in float32); the float64 equality is test_solver_equals_xla
@pytest.mark.slow
@pytest.mark.parametrize("solver", ["newton", "cg"])
def test_solver_float32(rows, solver):
    """float32: the fused solver ends as close to the float64 solution as the XLA solver does."""
    m, ds = rows
    m = _with(m, mjl.SolverType.NEWTON if solver == "newton" else mjl.SolverType.CG,
              disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)  # the kernels: whole system  # fmt: skip
    _check_float32(m, ds)


@pytest.mark.slow
def test_launch_in_blocks(rows):
    """Three environments in blocks of two (the solver loops run while any lane of a block is not done; a lane
    that is done keeps its values), the launcher called through `kernels.primal.solve`."""
    m, ds = rows
    mf = mjl.configure(m, kernels="fused")
    how = launch.Launch(block=2, interpret=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: how)
        got = jax.jit(jax.vmap(solve, in_axes=(None, 0)))(mf, ds)
    _close(got, _solve(m, ds), SOLVER_TOL, "blocks of 2", m)


def _loss(m, d, qvel, aref):
    """A nonlinear function of the solver's outputs (efc_b and efc_force too: the fused path's custom_jvp of each),
    of qacc_smooth and of the rows' aref."""
    d2 = solve(m, d.replace(qacc_smooth=d.qacc_smooth + 0.1 * qvel, efc_aref=aref))
    return (jp.sum(jp.sin(d2.qacc)) + jp.sum(d2.qfrc_constraint**2) * 1e-3 + jp.sum(jp.sin(d2.efc_b)) * 1e-2
            + jp.sum(d2.efc_force**2) * 1e-4)  # fmt: skip


@pytest.mark.parametrize("gradients", ["implicit", pytest.param("unrolled", marks=pytest.mark.slow)])
def test_gradients_equal_xla(rows, gradients):
    """jax.grad through the fused solver is the XLA solver's (implicit: the solver's custom_vjp at the returned
    qacc; unrolled: the kernel's custom_jvp runs the XLA iterations), batched by vmap."""
    m, ds = rows
    m = mjl.configure(m, gradients=gradients)
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
    args = (ds, ds.qvel, ds.efc_aref)
    got, want = grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args)
    tk.assert_grads_equal(got, want, GRAD_TOL)


def _lower_cuda(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_lowers_to_triton(rows, monkeypatch, dtype):
    """Both solver kernels lower to Triton (while loops over the block's lanes, their reductions, masked lanes at a
    batch of 200 = 128 + 72), one in each layout. No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    m, ds = rows
    one = jax.tree.map(lambda x: np.asarray(x)[0], ds)
    batch = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 200), one)  # host numpy: no eager ops
    if dtype == "float32":
        m, batch = _f32(m), _f32(batch)
    # float64: CG in lanes_first only (CI time; both solvers in both layouts in float32's slow case): Newton's kernel
    # lowers in the default selection through test_kernels_precision.py::test_fused_step_has_no_tf32_product (the
    # whole fused step lowered to Triton's IR, lanes_last) and test_kernels.py::test_fused_step_program_size; the two
    # layouts' loads and stores are launch.py's lane I/O, lanes_first's lowered here
    cases = [(mjl.SolverType.CG, "lanes_first")]
    if dtype == "float32":
        cases += [(mjl.SolverType.NEWTON, "lanes_first"), (mjl.SolverType.NEWTON, "lanes_last"),
                  (mjl.SolverType.CG, "lanes_last")]  # fmt: skip
    for solver, layout in cases:
        mf = mjl.configure(_with(m, solver), kernels="fused", kernel_layout=layout)
        text = _lower_cuda(jax.vmap(solve, in_axes=(None, 0)), mf, batch)
        assert text.count("__gpu$xla.gpu.triton") == 1, (solver, layout)


# ---- the dof-tiled Newton kernel (kernels/primal_tiled.py, Launch.dof_tile) ------------------------------------------


@contextlib.contextmanager
def _tiled(dof_tile, interpret=True, hessian="auto"):
    """Within: the fused path launches the tiled solver (`dof_tile` environments per program, `Launch.hessian`)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout, interpret=interpret,
                                                                 dof_tile=dof_tile, hessian=hessian))  # fmt: skip
        yield


# "dot": one environment per program, the Hessian as one matrix product (the ROWS model's tiles are 32 x 32); "rank1":
# two per program over three environments (a padded program), the Hessian as rank-1 updates
# ("rank1", 2, "dense") slow (CI time): rank-1 updates over 2 environments per program (a padded program) stay in CI
# through test_elliptic_solver_equals_xla[newton-rank1]
@pytest.mark.parametrize("hessian,dof_tile,case", [
    ("dot", 1, "dense"), pytest.param("rank1", 2, "dense", marks=pytest.mark.slow),
    pytest.param("rank1", 1, "sparse", marks=pytest.mark.slow),
    pytest.param("dot", 1, "nowarm", marks=pytest.mark.slow),
    pytest.param("dot", 1, "unbatched", marks=pytest.mark.slow)])  # fmt: skip
def test_tiled_solver_equals_xla(rows, hessian, dof_tile, case):
    """The tiled Newton kernel's qacc, forces, efc_b, states, solver_niter and statistics are the XLA solver's
    (float64; qM dense or tree-sparse; the warm start disabled; unbatched launches of one environment)."""
    m, ds = rows
    m = _with(m, m.opt.solver, disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)  # the kernel: whole system
    if case == "nowarm":
        m = _with(m, m.opt.solver, disableflags=m.opt.disableflags | mjl.DisableBit.WARMSTART)
    if case == "sparse":
        mjm = mujoco.MjModel.from_xml_string(ROWS)
        m = mjl.configure(m, mass_matrix="sparse")
        ds = _prepared(m, _states(mjm, m, 3))
    mf = mjl.configure(m, kernels="fused")
    with _tiled(dof_tile, hessian=hessian):
        if case == "unbatched":
            names = _kernel_names(mf, jax.tree.map(lambda x: np.asarray(x)[0], ds))
            one = jax.jit(lambda m, d: solve(m, d))  # a fresh function: jit's cache keys on it, not the launch
            got = [one(mf, jax.tree.map(lambda x, i=i: x[i], ds)) for i in range(3)]
            got = jax.tree.map(lambda *x: jp.stack(x), *got)
        else:  # a fresh function: jit's cache keys on it, not the launch
            got, names = _traced(jax.jit(jax.vmap(solve, in_axes=(None, 0))), mf, ds)
        assert "name=solve_newton_tiled" in names and ("dot_general" in names) == (hessian == "dot"), hessian
    _close(got, _solve(m, ds), SOLVER_TOL, f"tiled {hessian} {dof_tile} {case}", m)


def test_tiled_keeps_cg_on_lanes(rows):
    """CG under dof_tile runs kernels/primal.py's lane kernel (traced only)."""
    m, ds = rows
    mf = mjl.configure(_with(m, mjl.SolverType.CG), kernels="fused")
    with _tiled(1):
        names = _kernel_names(mf, jax.tree.map(lambda x: np.asarray(x)[0], ds))
    assert "solve_cg" in names and "tiled" not in names


@pytest.mark.slow
def test_tiled_gradients_equal_xla(rows):
    """jax.grad through the tiled kernel (implicit and unrolled) is the XLA solver's."""
    m, ds = rows
    args = (ds, ds.qvel, ds.efc_aref)
    for gradients in ("implicit", "unrolled"):
        mg = mjl.configure(m, gradients=gradients)
        grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
        with _tiled(1):
            got = grad(mjl.configure(mg, kernels="fused"), *args)
        tk.assert_grads_equal(got, grad(mg, *args), GRAD_TOL)


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_tiled_lowers_to_triton(rows, dtype):
    """The tiled kernel lowers to Triton with one environment per program (the Hessian's tl.dot) and with four
    (rank-1 updates; 200 environments: whole programs after padding), batched and unbatched, with no weakly typed
    literal branch of a select in the kernel. No GPU needed."""
    m, ds = rows
    one = jax.tree.map(lambda x: np.asarray(x)[0], ds)
    batch = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 200), one)  # host numpy: no eager ops
    if dtype == "float32":
        m, batch, one = _f32(m), _f32(batch), _f32(one)
    mf = mjl.configure(m, kernels="fused")
    batched, unbatched = (jax.vmap(solve, in_axes=(None, 0)), (mf, batch)), (lambda m, d: solve(m, d), (mf, one))
    # one environment per program (tl.dot) unbatched, four (rank-1 updates) batched: each Hessian and each launch
    # once (CI time; all four pairings in float32's slow selection)
    cases = ((1, unbatched), (4, batched)) if dtype == "float64" else ((1, unbatched), (1, batched), (4, unbatched),
                                                                      (4, batched))  # fmt: skip
    for dof_tile, (fn, args) in cases:
        with _tiled(dof_tile, interpret=False):
            text = _lower_cuda(fn, *args)
            assert text.count("__gpu$xla.gpu.triton") == 1 and "solve_newton_tiled" in text, dof_tile
            # Python-number selects go through launch.where (tests/test_kernels.py explains why)
            assert tk._weak_literal_selects(jax.make_jaxpr(fn)(*args).jaxpr) == [], dof_tile


# ---- elliptic cones (ELLIPTIC) ---------------------------------------------------------------------------------------


def _elliptic(xml, dims):
    """(Model, prepared batch of 3 sliding states) of `xml` (ELLIPTIC or ELLIPTIC_SMALL: cones of `dims`), float64,
    Newton, islands off (the kernels solve the whole system)."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    m = _with(m, m.opt.solver, disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)
    ds = _prepared(m, sliding_states(mjm, m, 3))
    layout = constraint.plan(m).layout
    assert [int(np.shape(r)[1]) for r in layout.cones] == dims
    # live cones of each dimension, the pair's, and cones in the middle zone (ConstraintState.CONE) at the solution
    sol = _solve(m, ds)
    live, state = np.asarray(sol.efc_mask), np.asarray(sol.efc_state)
    for rows in layout.cones:
        assert live[:, rows[:, 0]].any(), rows
    assert live[:, constraint.plan(m).con_adr[0]].any()  # the explicit pair (its solreffriction)
    assert (state[live] == int(ConstraintState.CONE)).sum() >= 6
    assert (state[live] == int(ConstraintState.QUADRATIC)).any()
    return m, ds


@pytest.fixture(scope="module")
def elliptic():
    """`_elliptic` of ELLIPTIC: cones of condim 3, 4 and 6."""
    return _elliptic(ELLIPTIC, [3, 4, 6])


@pytest.fixture(scope="module")
def elliptic_small():
    """`_elliptic` of ELLIPTIC_SMALL: cones of condim 3 and 4 (the default selection's)."""
    return _elliptic(ELLIPTIC_SMALL, [3, 4])


# the default selection on ELLIPTIC_SMALL (cones of condim 3 and 4), each kernel once; condim 6 (ELLIPTIC) slow
@pytest.mark.parametrize("solver,tile,model", [
    ("newton", 0, "elliptic_small"), ("newton", "rank1", "elliptic_small"),
    pytest.param("newton", 0, "elliptic", marks=pytest.mark.slow),
    pytest.param("newton", "rank1", "elliptic", marks=pytest.mark.slow),
    pytest.param("cg", 0, "elliptic", marks=pytest.mark.slow),
    pytest.param("newton", "dot", "elliptic", marks=pytest.mark.slow)])  # fmt: skip
def test_elliptic_solver_equals_xla(request, solver, tile, model):
    """Elliptic cones (condim 3, 4 and, in the slow selection, 6; top, middle and bottom zones) in the solver kernels
    (the lane kernel's Newton and CG; the dof-tiled Newton with rank-1 updates over 2 environments per program, or one
    tl.dot per environment): qacc, forces, efc_b, states, solver_niter and the statistics are the XLA solver's
    (float64, vmapped states)."""
    m, ds = request.getfixturevalue(model)
    m = _with(m, mjl.SolverType.NEWTON if solver == "newton" else mjl.SolverType.CG)
    mf = mjl.configure(m, kernels="fused")
    if tile:
        with _tiled(2 if tile == "rank1" else 1, hessian=tile):  # a fresh function: jit's cache keys on it
            got, names = _traced(jax.jit(jax.vmap(solve, in_axes=(None, 0))), mf, ds)
        assert "name=solve_newton_tiled" in names
    else:
        got, names = _traced(_solve, mf, ds)
        assert f"name=solve_{solver}" in names
    _close(got, _solve(m, ds), SOLVER_TOL, f"elliptic {solver} {tile} {model}", m)


@pytest.mark.slow  # CI time (~2 min: every kernel of the forward compiles in interpret mode)
def test_elliptic_forward_matches_mujoco():
    """The fused forward (every kernel: tree pass, colliders, elliptic rows, the Newton kernel with its cones) on
    ELLIPTIC reaches MuJoCo's converged Newton optimum (qacc, qfrc_constraint, efc_force row by row), as
    tests/test_constraint_forward.py checks the XLA path."""
    mjm = mujoco.MjModel.from_xml_string(ELLIPTIC)
    m = oracle.model_from_mujoco(mjm)
    # run to convergence as MuJoCo's reference (tcf._converged_newton): the optimum, not the iterate at 1e-8
    m = mjl.configure(m.replace(opt=m.opt.replace(iterations=100, tolerance=jp.asarray(1e-12))), kernels="fused")
    d = mjl.make_data(m)
    for stage in ("solve_newton", "constraint_rows"):
        assert stage in str(jax.make_jaxpr(fwd.forward)(m, d)), stage
    tcf.check_forward(mjm, m, sliding_state, seeds=(0, 1), min_nefc=10)


@pytest.mark.slow  # CI time (implicit ~110 s, unrolled ~200 s on the loaded 2-core CPU)
@pytest.mark.parametrize("gradients", ["implicit", "unrolled"])
def test_elliptic_gradients_equal_xla(elliptic, gradients):
    """jax.grad through the fused solver with elliptic cones is the XLA solver's (implicit: the solver's custom_vjp
    at the returned qacc; unrolled: the kernel's custom_jvp runs the XLA iterations on the kernel's inputs, the
    cones' mu and frictions among them), batched by vmap."""
    m, ds = elliptic
    m = mjl.configure(m, gradients=gradients)
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
    args = (ds, ds.qvel, ds.efc_aref)
    tk.assert_grads_equal(grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args), GRAD_TOL)


@pytest.mark.slow  # CI time (the kernel compiles again in float32)
def test_elliptic_solver_float32(elliptic):
    """float32 with elliptic cones: the fused Newton solver ends as close to the float64 solution as the XLA
    solver does (test_solver_float32's measure)."""
    m, ds = elliptic
    _check_float32(m, ds)


# ---- noslip (solver/noslip.py) after the fused solvers, and a vmapped Model through the whole fused step


def _close_noslip(got, want, what, m):
    """`_close`, efc_state compared on non-elliptic rows only: noslip's QCQP leaves an elliptic force on its cone's
    boundary, where mu N >= |T| (SATISFIED or CONE) is decided by a rounding (as in tests/test_kernels_pgs.py)."""
    _close(got.replace(efc_state=want.efc_state), want, SOLVER_TOL, what, m)
    scalar = np.asarray(want.efc_type) != int(ConstraintType.CONTACT_ELLIPTIC)
    np.testing.assert_array_equal(np.asarray(got.efc_state)[scalar], np.asarray(want.efc_state)[scalar], what)


@pytest.mark.parametrize("solver,model", [("newton", "rows"), pytest.param("cg", "rows", marks=pytest.mark.slow),
                                          pytest.param("newton", "elliptic", marks=pytest.mark.slow)])  # fmt: skip
def test_noslip_after_solver_kernel_equals_xla(request, solver, model):
    """opt.noslip_iterations > 0 after the fused Newton / CG kernel (which returns efc_force, efc_b and the states
    that noslip reads): qacc, forces, efc_b, states and solver_niter (iterations plus sweeps) are the XLA path's
    (islands disabled: the kernels solve the whole system), and noslip moved the friction forces."""
    m, ds = request.getfixturevalue(model)
    m = _with(m, mjl.SolverType.NEWTON if solver == "newton" else mjl.SolverType.CG,
              disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)  # fmt: skip
    mn = _with(m, m.opt.solver, noslip_iterations=4, noslip_tolerance=1e-9)
    want, base = _solve(mn, ds), _solve(m, ds)
    moved = np.max(np.abs(np.asarray(want.efc_force) - np.asarray(base.efc_force)))
    assert moved > 1e-6 and np.all(np.asarray(want.solver_niter) > np.asarray(base.solver_niter)), moved
    _close_noslip(_solve(mjl.configure(mn, kernels="fused"), ds), want, f"noslip after {solver}, {model}", m)


STEP_FIELDS = ("qpos", "qvel", "qacc", "qacc_warmstart", "efc_force", "qfrc_constraint", "qfrc_passive", "qfrc_bias",
               "xpos", "xquat", "qM", "qLD", "cvel", "efc_J", "efc_aref", "efc_D", "efc_R")  # fmt: skip


@pytest.mark.slow  # CI time (~2 + 3 min each: the whole step's kernels compile in interpret mode)
@pytest.mark.parametrize("solver,tile", [("newton", 2), ("cg", 0)])
def test_step_vmapped_models_equal_xla(solver, tile):
    """One whole fused step of ELLIPTIC (joint damping added) under jax.vmap over 3 Models (tk.RANDOMIZED: friction,
    masses, inertias, damping, friction loss, solref, sizes, ranges, impratio, tolerance) x 3 environments in one
    state, with noslip: the XLA step of each Model (float64). Newton on the tiled kernels (rows and solver tiles of 2
    environments: a padded program), CG on the lane kernels."""
    mjm = mujoco.MjModel.from_xml_string(ELLIPTIC.replace('frictionloss="0.3"', 'frictionloss="0.3" damping="0.4"'))
    m = oracle.model_from_mujoco(mjm)
    m = _with(m, mjl.SolverType.NEWTON if solver == "newton" else mjl.SolverType.CG, noslip_iterations=3,
              disableflags=m.opt.disableflags | mjl.DisableBit.ISLAND)  # fmt: skip
    ms, mf = tk.randomized(m, 3, seed=2), tk.randomized(mjl.configure(m, kernels="fused"), 3, seed=2)
    one = jax.tree.map(lambda x: x[0], sliding_states(mjm, m, 1, seed=4))
    ds = jax.tree.map(lambda x: jp.stack([x] * 3), one)
    how = launch.Launch(interpret=True, dof_tile=tile, rows_tile=tile)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: how)
        names = str(jax.make_jaxpr(jax.vmap(mjl.step))(mf, ds))
        assert all(f"name={k}" in names for k in ("tree_pass", "collide_primitive", "smooth_pass", "euler")), names
        assert ("name=solve_newton_tiled" if solver == "newton" else "name=solve_cg") in names
        got = jax.jit(jax.vmap(mjl.step))(mf, ds)
    want = jax.jit(jax.vmap(mjl.step))(ms, ds)
    assert tk.spread(want.qacc) > 1e-2
    for f in STEP_FIELDS:
        oracle.close(getattr(got, f), getattr(want, f), SOLVER_TOL, f"{f}, {solver}")
    np.testing.assert_array_equal(got.solver_niter, want.solver_niter)
