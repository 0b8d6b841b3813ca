"""The fused PGS solver (kernels/pgs.py: MuJoCo 4.0's PGS sweeps as one Pallas kernel) against the XLA PGS
(solver/pgs.py) with islands disabled (the fused path solves the whole system) and against MuJoCo.

The solver runs alone (`solver.solve.solve` on Data prepared by the XLA path), so each test compiles one kernel in
Pallas' interpret mode. PGS_XML: spheres of condim 1, 3, 4 and 6 on a plane (pyramidal or elliptic cones), a hinge
chain with friction loss and limits (past one), a connect and a joint equality.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from mjx_lite.solver.solve import solve
from mjx_lite.types import ConstraintType
from tests import oracle
from tests import test_kernels as tk
from tests.test_kernels_solver import _check_float32, _prepare, _prepared, _solve  # (the shared compiled stages)

# float64: the two paths run the same block updates (pgs.block_update) on the same shuffled orders; only the sums
# that build A = J M^-1 J' + R, b and the residuals AR f + b differ in order (round-off), which the sweeps carry
# along: relative to max(1, max |field|); observed <= 6e-16 (qacc, efc_force, both cones)
PGS_TOL = 1e-12
# against MuJoCo (float64, island disabled, the same number of sweeps): MuJoCo's iterate (tests/test_pgs.py's
# ITER_TOL: the same operations up to the order of sums); observed <= 1e-15 (qacc), 1.9e-14 (efc_force)
MUJOCO_TOL = 1e-12
# gradients: both paths differentiate the same rule at primal values that differ by round-off
GRAD_TOL = 1e-8
# float32: each path's distance from the float64 solution, the fused one's within this factor of the XLA one's plus
# float32 round-off (relative to max(1, max |field|)); solver_niter may differ (the stopping test on round-off)

PGS_XML = """
<mujoco>
  <option timestep="0.005" solver="PGS" cone="{cone}" impratio="{impratio}" jacobian="dense" iterations="{iters}"
          tolerance="{tol}">
    <flag island="disable"/>
  </option>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" condim="1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="3" friction="0.8 0.02 0.001"/></body>
    <body pos="0.5 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="4" friction="0.7 0.02 0.001"/></body>
    <body pos="1 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="6" friction="0.9 0.03 0.002"/></body>
    <body pos="1.5 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="1"/></body>
    <body name="arm" pos="-0.6 0 0.8">
      <joint name="h0" type="hinge" axis="0 1 0" range="-30 30" frictionloss="0.3"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" contype="0" conaffinity="0"/>
      <body pos="0.3 0 0">
        <joint name="h1" type="hinge" axis="0 1 0" range="-10 60" frictionloss="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="b5" pos="-1 1 0.5"><freejoint/><geom type="sphere" size="0.1" contype="0" conaffinity="0"/></body>
  </worldbody>
  <equality>
    <connect body1="b5" anchor="0 0 0.2"/>
    <joint joint1="h1" joint2="h0" polycoef="0 0.5 0 0 0"/>
  </equality>
</mujoco>
"""


def _xml(cone, iters=40, tol=1e-6):
    return PGS_XML.format(cone=cone, impratio=1.5 if cone == "elliptic" else 1.0, iters=iters, tol=tol)


def _state(mjm, mjd, rng):
    """The spheres sunk into the floor and sliding, spinning; the hinge h0 past its upper limit; b5 off its anchor."""
    mjd.qpos[:] = mjm.qpos0
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
    for b in range(1, 5):
        q, v = mjm.jnt_qposadr[mjm.body_jntadr[b]], mjm.jnt_dofadr[mjm.body_jntadr[b]]
        mjd.qpos[q + 2] = 0.1 - 0.004 - 0.01 * rng.random()
        mjd.qvel[v : v + 2] = rng.uniform(-1.0, 1.0, 2)
        mjd.qvel[v + 3 : v + 6] = rng.uniform(-4.0, 4.0, 3)
    mjd.qpos[mjm.jnt_qposadr[mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_JOINT, "h0")]] = 0.53 + 0.02 * rng.random()
    b5 = mjm.jnt_qposadr[mjm.body_jntadr[mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "b5")]]
    mjd.qpos[b5 : b5 + 3] += rng.normal(size=3) * 0.02


def _batch(mjm, m, n, seed=0):
    rng = np.random.default_rng(seed)
    ds = []
    for _ in range(n):
        mjd = mujoco.MjData(mjm)
        _state(mjm, mjd, rng)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    # host numpy (CI time: jp.stack would compile one tiny program per Data leaf)
    return jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)


def _problem(cone):
    """(Model on the XLA path, prepared batch of 3 states): env 1 warm-starts at its solution, envs 0 and 2 from
    make_data's zero qacc_warmstart (the environments stop after different numbers of sweeps)."""
    mjm = mujoco.MjModel.from_xml_string(_xml(cone, tol=1e-6 if cone == "pyramidal" else 1e-8))
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    ds = _prepared(m, _batch(mjm, m, 3))
    mask = np.asarray(ds.efc_mask)
    assert np.all(mask.sum(axis=1) > 15), mask.sum(axis=1)
    sol = _solve(m, ds)
    ds = ds.replace(qacc_warmstart=ds.qacc_warmstart.at[1].set(sol.qacc[1]))
    return m, ds


@pytest.fixture(scope="module")
def pyramidal():
    return _problem("pyramidal")


@pytest.fixture(scope="module")
def elliptic():
    return _problem("elliptic")


FIELDS = ("qacc", "efc_force", "qfrc_constraint", "efc_b")


def _close(got, want, tol, what):
    for f in FIELDS + ("solver_improvement",):
        a, b = np.asarray(getattr(got, f)), np.asarray(getattr(want, f))
        err = float(np.max(np.abs(a - b))) / max(1.0, float(np.max(np.abs(b))))
        assert err <= tol, f"{what}: {f} differs by {err:.3g} (relative), tolerance {tol}"
    # the rows' dual states (noslip.dual_state of the forces); an elliptic force the QCQP put on the cone's boundary
    # is SATISFIED or CONE by a rounding of mu N >= |T| (as in tests/test_pgs.py), so those rows are left out
    scalar = np.asarray(want.efc_type) != int(ConstraintType.CONTACT_ELLIPTIC)
    np.testing.assert_array_equal(np.asarray(got.efc_state)[scalar], np.asarray(want.efc_state)[scalar], what)
    np.testing.assert_array_equal(got.solver_niter, want.solver_niter, err_msg=what)


def _names(m, d) -> str:
    return str(jax.make_jaxpr(lambda d: solve(m, d))(d))


# pyramidal slow (CI time, ~20 s: the kernel's compile at the default sweeps): elliptic runs every block kind (the
# cones' and the scalar rows': friction loss, limits, equalities, condim-1 contacts) with environments stopping at
# different sweeps; the pyramidal kernel's float64 equality stays in CI through
# test_pgs_kernel_cold_start_and_fixed_sweeps (and, slow, the noslip and gradient tests on the pyramidal fixture)
@pytest.mark.parametrize("cone", [pytest.param("pyramidal", marks=pytest.mark.slow), "elliptic"])
def test_pgs_kernel_equals_xla(request, cone):
    """qacc, efc_force, qfrc_constraint, efc_b, efc_state, solver_niter and the last improvement of the fused PGS are
    the XLA PGS's (islands disabled), per environment under vmap, the environments stopping at different sweeps."""
    m, ds = request.getfixturevalue(cone)
    mf = mjl.configure(m, kernels="fused")
    # one trace of the kernel (CI time: a separate make_jaxpr for its name traced it again): jit's trace, its jaxpr's
    # names, lowered and compiled; the XLA path's solve is the fixture's (compiled), its trace read for pallas_call
    traced = _solve.trace(mf, ds)
    assert "name=solve_pgs" in str(traced.jaxpr) and "pallas_call" not in str(_solve.trace(m, ds).jaxpr)
    want = _solve(m, ds)
    niter = np.asarray(want.solver_niter)
    assert len(set(niter.tolist())) > 1 and np.all(niter < int(m.opt.iterations)), niter
    _close(traced.lower().compile()(mf, ds), want, PGS_TOL, cone)


@pytest.mark.slow
def test_pgs_kernel_tree_sparse_qm():
    """qM in the tree-sparse layout (`Config.mass_matrix="sparse"`: the trace of M from its diagonal entries)."""
    mjm = mujoco.MjModel.from_xml_string(_xml("elliptic", tol=1e-8))
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla", mass_matrix="sparse")
    ds = _prepared(m, _batch(mjm, m, 2, seed=1))
    assert np.asarray(ds.qM).shape[-1] != m.nv  # the tree-sparse layout
    _close(_solve(mjl.configure(m, kernels="fused"), ds), _solve(m, ds), PGS_TOL, "tree-sparse qM")


def test_pgs_kernel_cold_start_and_fixed_sweeps(pyramidal):
    """The warmstart flag disabled (a cold start), and unconverged: every environment runs opt.iterations sweeps."""
    m, ds = pyramidal
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | mjl.DisableBit.WARMSTART, iterations=3))
    want = _solve(m, ds)
    assert np.all(np.asarray(want.solver_niter) == 3)
    _close(_solve(mjl.configure(m, kernels="fused"), ds), want, PGS_TOL, "cold start")


# slow (CI time, ~23 s: the unbatched kernel compiles once per sweep count): the kernel's iterates are the XLA PGS's
# (test_pgs_kernel_equals_xla, test_pgs_kernel_cold_start_and_fixed_sweeps) and the XLA PGS's MuJoCo's
# (tests/test_pgs.py)
@pytest.mark.slow
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_pgs_kernel_matches_mujoco(cone):
    """The fused PGS after 1, 3 and 8 sweeps (warm-started from MuJoCo's previous step, island disabled) gives
    MuJoCo's qacc and efc_force."""
    mjm = mujoco.MjModel.from_xml_string(_xml(cone, tol=0.0))
    mjd = mujoco.MjData(mjm)
    _state(mjm, mjd, np.random.default_rng(3))
    mujoco.mj_step(mjm, mjd)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="fused")
    d = oracle.data_with_state(m, mjm, mjd).replace(qacc_warmstart=jp.asarray(mjd.qacc_warmstart))
    d = jax.jit(_prepare)(m, d)
    run = jax.jit(solve)
    for k in (1, 3, 8):
        mjm.opt.iterations = k
        mujoco.mj_forward(mjm, mjd)
        assert int(mjd.solver_niter[0]) == k and mjd.ncon >= 4
        f = run(m.replace(opt=m.opt.replace(iterations=k)), d)
        assert int(f.solver_niter) == k
        oracle.close(f.qacc, mjd.qacc, MUJOCO_TOL, f"qacc after {k}")
        r, c = oracle.match_rows(mjd, mjm, f)
        oracle.close(np.asarray(f.efc_force)[c], mjd.efc_force[r], MUJOCO_TOL, f"efc_force after {k}")


def test_dispatch(pyramidal):
    """`fusable` picks the kernel for PGS with the tree factorisation (PGS needs the dense efc_J: the sparse layout is
    a configuration error on both paths); `Config.mass_factorization="dense"` keeps the XLA PGS (traced only)."""
    m, ds = pyramidal
    one = jax.tree.map(lambda x: np.asarray(x)[0], ds)
    assert "solve_pgs" in _names(mjl.configure(m, kernels="fused"), one)
    md = mjl.configure(m, kernels="fused", mass_factorization="dense")
    assert "solve_pgs" not in _names(md, mjl.make_data(md))


def _loss(m, d, qvel, aref):
    """A nonlinear function of the solver's outputs, of qacc_smooth and of the rows' aref."""
    d2 = solve(m, d.replace(qacc_smooth=d.qacc_smooth + 0.1 * qvel, efc_aref=aref))
    return (jp.sum(jp.sin(d2.qacc)) + jp.sum(d2.qfrc_constraint**2) * 1e-3 + jp.sum(jp.sin(d2.efc_b)) * 1e-2
            + jp.sum(d2.efc_force**2) * 1e-4)  # fmt: skip


# slow (CI time, ~6 s): the implicit rule (solve.py's `_implicit` at the returned qacc, efc_b's `_smooth_jar`) is
# the same code whichever solver kernel produced the primal: tests/test_kernels_solver.py::
# test_gradients_equal_xla[implicit] keeps it by default (the Newton kernel), the PGS kernel's values are
# test_pgs_kernel_equals_xla's; "unrolled" (the kernel's own custom_jvp) slow as before
@pytest.mark.slow
@pytest.mark.parametrize("gradients", ["implicit", "unrolled"])
def test_gradients_equal_xla(pyramidal, gradients):
    """jax.grad through the fused PGS is the XLA PGS's (implicit: the solver's custom_vjp at the returned qacc;
    unrolled: the kernel's custom_jvp runs the XLA sweeps), batched by vmap."""
    m, ds = pyramidal
    m = mjl.configure(m.replace(opt=m.opt.replace(iterations=8)), gradients=gradients)
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
    args = (ds, ds.qvel, ds.efc_aref)
    got, want = grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args)
    tk.assert_grads_equal(got, want, GRAD_TOL)


# slow (CI time: the kernel compiles again in float32); the float64 equality is test_pgs_kernel_equals_xla
@pytest.mark.slow
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_float32(request, cone):
    """float32: the fused PGS ends as close to the float64 solution as the XLA PGS does (fixed sweeps)."""
    m, ds = request.getfixturevalue(cone)
    _check_float32(m.replace(opt=m.opt.replace(iterations=10)), ds, ("qacc", "efc_force"))


# lanes_last slow (CI time, ~6 s): the two layouts differ in launch.py's lane I/O only, which every other kernel's
# lanes_last lowering runs in the default selection (tests/test_kernels_precision.py: the whole fused step's
# kernels); the PGS kernel's own code (sweeps, gathers, the elliptic blocks) lowers here in lanes_first
@pytest.mark.parametrize("layout", ["lanes_first", pytest.param("lanes_last", marks=pytest.mark.slow)])
def test_lowers_to_triton(elliptic, monkeypatch, layout):
    """The PGS kernel lowers to Triton (the sweep loop over the block's lanes, per-lane gathers and scatters, the
    elliptic blocks' cond, masked lanes at a batch of 200 = 128 + 72), in each layout. No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    m, ds = elliptic
    one = jax.tree.map(lambda x: np.asarray(x)[0], ds)
    batch = jax.tree.map(lambda x: np.stack([x] * 200), one)
    mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
    text = jax.jit(jax.vmap(solve, in_axes=(None, 0))).trace(mf, batch).lower(lowering_platforms=("cuda",))
    assert text.as_text().count("__gpu$xla.gpu.triton") == 1, layout


@pytest.mark.slow
def test_launch_in_blocks(elliptic):
    """Three environments in blocks of two (each lane its own shuffled block order; the sweep loop runs while any lane
    of a block is not done, a lane that is done keeps its values)."""
    m, ds = elliptic
    how = launch.Launch(block=2, interpret=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: how)
        got = jax.jit(jax.vmap(solve, in_axes=(None, 0)))(mjl.configure(m, kernels="fused"), ds)
    _close(got, _solve(m, ds), PGS_TOL, "blocks of 2")


@pytest.mark.slow
def test_step_gradient_equals_xla():
    """jax.grad of a loss of one whole fused step (mjl.step with PGS: the tree, rows, velocity and PGS kernels) with
    respect to qvel is the XLA step's, batched by vmap."""
    mjm = mujoco.MjModel.from_xml_string(_xml("pyramidal", iters=8))
    m = oracle.model_from_mujoco(mjm)
    ds = _batch(mjm, m, 2, seed=5)

    def loss(m, d, qvel):
        d2 = mjl.step(m, d.replace(qvel=qvel))
        return jp.sum(jp.sin(d2.qvel)) + jp.sum(d2.qpos**2)

    def grads(m):
        return jax.jit(jax.vmap(jax.grad(loss, argnums=2), in_axes=(None, 0, 0)))(m, ds, ds.qvel)

    mf = mjl.configure(m, kernels="fused")
    assert "solve_pgs" in str(jax.make_jaxpr(lambda d: mjl.step(mf, d))(jax.tree.map(lambda x: np.asarray(x)[0], ds)))
    tk.assert_grads_equal(grads(mf), grads(m), GRAD_TOL)


# ---- a vmapped Model (domain randomisation, system identification) through the fused path: tk.randomized's Models


def _same_state(mjm, m, n, seed=2):
    """n copies of one state of PGS_XML (raw Data: qpos, qvel), so that the environments differ by their Models only."""
    one = jax.tree.map(lambda x: x[0], _batch(mjm, m, 1, seed=seed))
    return jax.tree.map(lambda x: np.stack([np.asarray(x)] * n), one)  # host numpy: no eager ops


def _damped(iters=8, noslip=0):
    """PGS_XML with joint damping (the velocity pass's passive forces, Euler's implicit damping: the euler kernel)."""
    xml = _xml("pyramidal", iters=iters).replace('frictionloss="0.3"', 'frictionloss="0.3" damping="0.5"')
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = oracle.model_from_mujoco(mjm)
    return mjm, m.replace(opt=m.opt.replace(noslip_iterations=noslip))


_prepare_models = jax.jit(jax.vmap(_prepare))
_solve_prepared = jax.jit(jax.vmap(solve))


def _solve_models(mx, mf, d):
    """Every stage before the solver on the XLA path (Model mx), then the solver with Model mf (the same leaves,
    another configuration), per (Model, environment) pair (the stages before the solver compiled once per mx: CI
    time)."""
    return _solve_prepared(mf, _prepare_models(mx, d))


def test_pgs_kernel_vmapped_models_equal_xla():
    """A vmapped Model (friction, masses, inertias, damping, friction loss, solref, sizes, ranges, impratio and the
    tolerance drawn per environment, as domain randomisation does): the PGS kernel's Model-derived inputs (A's M^-1,
    R, D, the cones' mu and frictions, the per-lane tolerance) are per environment, and its qacc, forces, efc_b,
    states and solver_niter equal the XLA PGS's of each Model (float64), environments in one state differing by their
    Models only."""
    mjm, m = _damped(iters=40)
    m = mjl.configure(m, kernels="xla")
    ms = tk.randomized(m, 3)  # (the same draws from the same leaves and keys, whatever the configuration)
    ds = _same_state(mjm, m, 3)
    want = _solve_models(ms, ms, ds)
    # the fused configuration of the same draws (CI time: no second randomiser program)
    got = _solve_models(ms, jax.vmap(lambda m: mjl.configure(m, kernels="fused"))(ms), ds)
    assert tk.spread(want.qacc) > 1e-2 and tk.spread(want.efc_force) > 1e-2, "the Models make no difference"
    _close(got, want, PGS_TOL, "vmapped Models")


# ---- noslip (solver/noslip.py) after the fused PGS: it reads the kernel's efc_force, efc_b and the factorisation


# slow (CI time, ~11 s): noslip runs after every solver at one call site (solve.py's `noslip.apply`, reading the
# kernel's efc_force, efc_b and solver_niter, which test_pgs_kernel_equals_xla checks for the PGS kernel):
# tests/test_kernels_solver.py::test_noslip_after_solver_kernel_equals_xla[newton-rows] keeps it by default
@pytest.mark.slow
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_noslip_after_pgs_kernel_equals_xla(request, cone):
    """opt.noslip_iterations > 0: the noslip sweeps after the fused PGS give the XLA path's qacc, forces, states and
    solver_niter (main sweeps plus noslip's), and change the PGS result (friction-loss and contact friction rows)."""
    m, ds = request.getfixturevalue(cone)
    mn = m.replace(opt=m.opt.replace(noslip_iterations=4, noslip_tolerance=1e-9))
    want = _solve(mn, ds)
    base = _solve(m, ds)  # (compiled by test_pgs_kernel_equals_xla)
    moved = np.max(np.abs(np.asarray(want.efc_force) - np.asarray(base.efc_force)))
    assert moved > 1e-6 and np.all(np.asarray(want.solver_niter) > np.asarray(base.solver_niter)), moved
    _close(_solve(mjl.configure(mn, kernels="fused"), ds), want, PGS_TOL, f"noslip, {cone}")


# (euler: the damping's solve and the update, kernels/advance.py)
PGS_STAGES = ("tree_pass", "collide_primitive", "constraint_rows", "smooth_pass", "solve_pgs", "euler")


STEP_FIELDS = ("qpos", "qvel", "qacc", "qacc_warmstart", "efc_force", "qfrc_constraint", "qfrc_passive", "qfrc_bias",
               "xpos", "xquat", "qM", "qLD", "cvel", "efc_J", "efc_aref", "efc_D", "efc_R")  # fmt: skip


@pytest.mark.slow  # CI time (the whole step's kernels compile in interpret mode: ~2 + 3 min on the loaded CPU)
@pytest.mark.parametrize("noslip", [0, 4])
def test_step_vmapped_models_equal_xla(noslip):
    """One whole fused step (every stage's kernel: tree, collision, rows, velocity and passive, M^-1, PGS, Euler's
    implicit damping and the update) under jax.vmap over 3 Models (RANDOMIZED) and 3 environments in one state is
    the XLA step of each Model (float64), with and without noslip."""
    mjm, m = _damped(noslip=noslip)
    ms, mf = tk.randomized(m, 3, seed=1), tk.randomized(mjl.configure(m, kernels="fused"), 3, seed=1)
    ds = _same_state(mjm, m, 3)
    names = str(jax.make_jaxpr(jax.vmap(mjl.step))(mf, ds))
    assert all(f"name={k}" in names for k in PGS_STAGES), names.count("pallas_call")
    step = jax.jit(jax.vmap(mjl.step))
    got, want = step(mf, ds), step(ms, ds)
    assert tk.spread(want.qacc) > 1e-2
    for f in STEP_FIELDS:
        oracle.close(getattr(got, f), getattr(want, f), PGS_TOL, f"{f}, noslip={noslip}")
    np.testing.assert_array_equal(got.efc_state, want.efc_state)
    np.testing.assert_array_equal(got.solver_niter, want.solver_niter)


@pytest.mark.slow  # CI time (~2 + 4 min: the gradient of the whole step in interpret mode)
def test_step_gradient_wrt_vmapped_models_equal_xla():
    """System identification under vmap: jax.grad of a loss of one fused step with respect to Model floats (friction,
    masses, inertias, damping, sizes) and qvel, vmapped over 3 Models x their environments, is the XLA step's."""
    mjm, m = _damped()
    ms, mf = tk.randomized(m, 3, seed=1), tk.randomized(mjl.configure(m, kernels="fused"), 3, seed=1)
    ds = _batch(mjm, m, 3, seed=4)
    names = ("geom_friction", "body_mass", "body_inertia", "dof_damping", "geom_size")

    def loss(leaves, m, d):
        d2 = mjl.step(m.replace(**{k: v for k, v in leaves.items() if k != "qvel"}), d.replace(qvel=leaves["qvel"]))
        return jp.sum(jp.sin(d2.qvel)) + jp.sum(d2.qpos**2)

    grad = jax.jit(jax.vmap(jax.grad(loss)))
    leaves = dict({k: getattr(ms, k) for k in names}, qvel=ds.qvel)
    tk.assert_grads_equal(grad(leaves, mf, ds), grad(leaves, ms, ds), GRAD_TOL)
