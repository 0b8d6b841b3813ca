"""The sparse constraint Jacobian (`Config.efc_jacobian="sparse"`): fixed-width rows with column indices, kept
sparse through the solver.

Against the dense layout (same rows, same solution) and against MuJoCo (rows, forces, accelerations) on a model
with every kind of constraint row, on the 32-body pile variant of tests/test_scene.py and (slow) on the bundled
220-body pile; gradients through the solver (the matrix-free implicit backward pass of CG, the dense-Hessian one
of Newton) against central differences; the configuration's validation and its "auto" choice.
"""

import dataclasses

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import types
from mjx_lite.pipeline import constraint, inverse
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver import common as solver_common
from mjx_lite.solver import primal
from tests import oracle
from tests.test_scene import BUNDLED, SMALL, SMALL_CAPACITY, pile_xml

# Row quantities are closed-form functions of the state: float64 round-off (as tests/test_constraint.py).
ROW_ATOL = 1e-8
# The same problem in two layouts: the products sum the same terms in another order (round-off only).
LAYOUT_TOL = 1e-10
# Newton at a converged optimum vs MuJoCo's converged Newton (as tests/test_constraint_forward.py).
NEWTON_TOL = 1e-7
# First-order solvers run to a tiny tolerance (as tests/test_constraint_forward.py).
FIRST_ORDER_TOL = 1e-5
# qacc is piecewise linear in qfrc_applied (the active set fixed): central differences of a converged Newton
# solve with step FD_STEP are exact up to round-off eps |loss| / FD_STEP ~ 1e-9.
FD_STEP = 1e-4
FD_RTOL = 1e-7
# Implicit gradients at the same optimum (CG stopped at |grad| ~ 1e-7 of its scale, Newton converged): one solve
# with H each (matrix-free CG to relative residual eps^0.75, or Cholesky).
GRAD_LAYOUT_TOL = 1e-9

ROWS_XML = oracle.EVERY_ROW_XML.replace(
    "{option}", '<option jacobian="dense" cone="{cone}" impratio="2" solver="{solver}" iterations="100" '
    'tolerance="1e-12" ls_iterations="50"/>').replace("{g_condim}", "1")

EFC_FIELDS = ("efc_pos", "efc_margin", "efc_diagA", "efc_R", "efc_D", "efc_aref", "efc_frictionloss", "efc_vel",
              "efc_type", "efc_id", "efc_mask")  # fmt: skip


def _state(mjm, seed):
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    mjd.qpos[:] = mjm.qpos0 + rng.normal(size=mjm.nq) * 0.1
    mjd.qpos[mjm.jnt_qposadr[5] + 2] = 0.08 + 0.02 * rng.random()  # box f sinks into the floor
    mjd.qpos[mjm.jnt_qposadr[6] + 2] = 0.09 + 0.02 * rng.random()  # sphere g touches
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mujoco.mj_forward(mjm, mjd)
    return mjd


_rows = oracle.constraint_rows


forward = jax.jit(fwd.forward)


def _layouts(mjm, **config):
    m = oracle.model_from_mujoco(mjm)
    return mjl.configure(m, efc_jacobian="dense", **config), mjl.configure(m, efc_jacobian="sparse", **config)


def _dense_view(m, d):
    return d.replace(efc_J=constraint.efc_j_dense(m, d))


# ---------------------------------------------------------------------------------------------------------
# configuration


def test_config_validates_and_auto_chooses_by_size():
    with pytest.raises(ValueError, match="efc_jacobian"):
        mjl.Config(efc_jacobian="csr")
    big = mjl.load_mjcf_string(pile_xml(**SMALL))  # 32 free bodies: nv 192, rows of 2 x 6 dofs
    assert types.efc_row_width(big) == 12 and types.sparse_efc_jacobian(big)
    d = mjl.make_data(big)
    assert d.efc_J.shape == (big.njmax, 12) and d.efc_J_colind.shape == (big.njmax, 12)
    small = mjl.load_mjcf_string(ROWS_XML.format(cone="pyramidal", solver="Newton", condim=3))
    assert not types.sparse_efc_jacobian(small)  # nv 38 < 4 x 12
    d = mjl.make_data(small)
    assert d.efc_J.shape == (small.njmax, small.nv) and d.efc_J_colind.shape == (small.njmax, 0)
    # PGS needs the dense dual matrix: "auto" picks dense, "sparse" is refused naming the option
    pgs = mjl.load_mjcf_string(pile_xml(**{**SMALL, "solver": "PGS"}))
    assert not types.sparse_efc_jacobian(pgs)
    with pytest.raises(ValueError, match="efc_jacobian='sparse' is not supported by the PGS solver"):
        mjl.configure(pgs, efc_jacobian="sparse")


# ---------------------------------------------------------------------------------------------------------
# rows: every kind, both layouts, MuJoCo


@pytest.mark.parametrize("cone,condim", [("pyramidal", 3), pytest.param("elliptic", 6, marks=pytest.mark.slow)])
def test_rows_match_dense_and_mujoco(cone, condim):
    mjm = mujoco.MjModel.from_xml_string(ROWS_XML.format(cone=cone, condim=condim, solver="Newton"))
    md, ms = _layouts(mjm)
    assert constraint.plan(ms).sparse and not constraint.plan(md).sparse
    w = types.efc_row_width(ms)
    for seed in range(2):
        mjd = _state(mjm, seed)
        d0 = mjl.make_data(ms).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
        ds = _rows(ms, d0)
        dd = _rows(md, mjl.make_data(md).replace(qpos=d0.qpos, qvel=d0.qvel))
        assert ds.efc_J.shape == (ms.njmax, w) and ds.efc_J_colind.shape == (ms.njmax, w)
        np.testing.assert_allclose(np.asarray(constraint.efc_j_dense(ms, ds)), np.asarray(dd.efc_J), atol=ROW_ATOL)
        for name in EFC_FIELDS:
            np.testing.assert_allclose(np.asarray(getattr(ds, name)), np.asarray(getattr(dd, name)), atol=ROW_ATOL,
                                       rtol=1e-9, err_msg=name)  # fmt: skip
        rm, ro = oracle.match_rows(mjd, mjm, _dense_view(ms, ds))
        Jm = mjd.efc_J[: mjd.nefc * mjm.nv].reshape(mjd.nefc, mjm.nv)
        np.testing.assert_allclose(np.asarray(constraint.efc_j_dense(ms, ds))[ro], Jm[rm], atol=ROW_ATOL)
        np.testing.assert_allclose(np.asarray(ds.efc_aref)[ro], mjd.efc_aref[rm], atol=ROW_ATOL, rtol=1e-7)


# both slow (CI time: CG ~12 worker-s, two forward compiles of the every-row model): the sparse rows of every kind stay
# MuJoCo's by default in test_rows_match_dense_and_mujoco[pyramidal-3], the matrix-free CG solve on sparse rows
# against MuJoCo's converged forward (qacc, qfrc_constraint, efc_force) and inverse dynamics on sparse rows in
# test_adhesion_reads_sparse_rows, the sparse vs dense layouts through the solve in
# test_implicit_gradient_matches_finite_differences[CG]
@pytest.mark.parametrize("solver", [pytest.param("CG", marks=pytest.mark.slow),
                                    pytest.param("Newton", marks=pytest.mark.slow)])
def test_forward_matches_dense_and_mujoco(solver):
    """Full forward (solve included) in both layouts, and against MuJoCo's converged Newton."""
    mjm = mujoco.MjModel.from_xml_string(ROWS_XML.format(cone="pyramidal", condim=3, solver=solver))
    md, ms = _layouts(mjm)
    if solver == "CG":  # enough iterations to reach the optimum
        md, ms = (m.replace(opt=m.opt.replace(iterations=4000, tolerance=jp.asarray(1e-15))) for m in (md, ms))
    tol = NEWTON_TOL if solver == "Newton" else FIRST_ORDER_TOL
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mjm.opt.iterations, mjm.opt.tolerance = 200, 1e-12
    mjd = _state(mjm, 0)
    assert mjd.nefc > 20
    ds = forward(ms, oracle.data_with_state(ms, mjm, mjd))
    dd = forward(md, oracle.data_with_state(md, mjm, mjd))
    for name in ("qacc", "qfrc_constraint", "efc_force", "efc_b"):
        oracle.close(getattr(ds, name), getattr(dd, name), LAYOUT_TOL if solver == "Newton" else tol, name)
    assert int(ds.nefc) == mjd.nefc
    oracle.close(ds.qacc, mjd.qacc, tol, "qacc")
    oracle.close(ds.qfrc_constraint, mjd.qfrc_constraint, tol, "qfrc_constraint")
    rm, ro = oracle.match_rows(mjd, mjm, _dense_view(ms, ds))
    oracle.close(np.asarray(ds.efc_force)[ro], mjd.efc_force[rm], tol, "efc_force")
    # inverse dynamics reads the sparse rows too: the force law at qacc gives back the solver's forces
    di = jax.jit(inverse.inv_constraint)(ms, ds)
    oracle.close(di.qfrc_constraint, ds.qfrc_constraint, LAYOUT_TOL, "inverse")
    oracle.close(di.efc_force, ds.efc_force, LAYOUT_TOL, "inverse efc_force")


# adhesion on two free bodies: nv 12 = the sparse row width, so reading sparse values as dense rows would not fail;
# CG run to convergence (the cheap default oracle of the matrix-free CG solve on sparse rows)
ADHESION_XML = """<mujoco><option jacobian="dense" solver="CG" iterations="4000" tolerance="1e-15"
 ls_iterations="50"/><worldbody>
  <geom name="floor" type="plane" size="5 5 0.1" margin="0.05" gap="0.03"/>
  <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.2 0.1 0.1"/></body>
  <body name="ball" pos="1 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="1"/></body></worldbody>
 <actuator><adhesion body="box" ctrlrange="0 1" gain="3"/><adhesion body="ball" ctrlrange="0 1" gain="2"/></actuator>
</mujoco>"""


def test_adhesion_reads_sparse_rows():
    """Adhesion (body transmission) weighs the contacts' efc rows: efc_J' w in the sparse layout, vs MuJoCo. The
    forward pass's CG solve on the sparse rows (matrix-free) against MuJoCo's converged Newton: qacc, qfrc_constraint,
    efc_force; inverse dynamics on the sparse rows gives back the solver's forces."""
    xml = ADHESION_XML
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON  # the reference: MuJoCo's converged Newton
    mjm.opt.iterations, mjm.opt.tolerance = 200, 1e-12
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:7] = [0, 0, 0.08, 0.99, 0.08, 0.05, 0]
    mjd.qpos[3:7] /= np.linalg.norm(mjd.qpos[3:7])
    mjd.qpos[9] = 0.13  # the ball hovers within the floor's margin (a contact without rows)
    mjd.ctrl[:] = [0.7, 0.4]
    mujoco.mj_forward(mjm, mjd)
    m = mjl.load_mjcf_string(xml, config=mjl.Config(efc_jacobian="sparse"))
    assert constraint.plan(m).sparse and m.opt.solver == int(mjl.SolverType.CG)
    out = forward(m, mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), ctrl=jp.asarray(mjd.ctrl)))
    moment = np.zeros((mjm.nout, mjm.nv))
    mujoco.mju_sparse2dense(moment, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
    np.testing.assert_allclose(np.asarray(out.actuator_moment), moment, atol=ROW_ATOL)
    np.testing.assert_allclose(np.asarray(out.qfrc_actuator), mjd.qfrc_actuator, atol=ROW_ATOL)
    assert int(out.nefc) == mjd.nefc >= 8
    oracle.close(out.qacc, mjd.qacc, FIRST_ORDER_TOL, "qacc")
    oracle.close(out.qfrc_constraint, mjd.qfrc_constraint, FIRST_ORDER_TOL, "qfrc_constraint")
    rm, ro = oracle.match_rows(mjd, mjm, _dense_view(m, out))
    oracle.close(np.asarray(out.efc_force)[ro], mjd.efc_force[rm], FIRST_ORDER_TOL, "efc_force")
    di = jax.jit(inverse.inv_constraint)(m, out)
    oracle.close(di.qfrc_constraint, out.qfrc_constraint, LAYOUT_TOL, "inverse")
    oracle.close(di.efc_force, out.efc_force, LAYOUT_TOL, "inverse efc_force")


# ---------------------------------------------------------------------------------------------------------
# the piles


def _mj_pile(xml, steps):
    """MuJoCo's pile after `steps` steps, then forwarded with its Newton solver converged and a dense efc_J."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mjm.opt.jacobian = mujoco.mjtJacobian.mjJAC_DENSE
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mjm.opt.iterations, mjm.opt.tolerance, mjm.opt.ls_iterations = 200, 1e-12, 50
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


@jax.jit
def _solve_both_layouts(m, d):
    """Newton on the sparse problem of d and on the same problem with a dense J (one compile)."""
    p = constraint.plan(m)
    prob = constraint.problem(m, d)
    dense = dataclasses.replace(prob, J=solver_common.j_dense(prob.J, prob.J_colind, m.nv), J_colind=None)
    kw = dict(iterations=100, ls_iterations=50, tolerance=m.opt.tolerance, ls_tolerance=m.opt.ls_tolerance,
              early_exit=True)  # fmt: skip
    start = solver_common.start_at(p.layout, prob, d.qacc_smooth)
    qs, _, evs, *_ = primal.solve_newton(p.layout, prob, start, **kw)
    qd, _, evd, *_ = primal.solve_newton(p.layout, dense, solver_common.start_at(p.layout, dense, d.qacc_smooth),
                                         **kw)  # fmt: skip
    return qs, evs.force, qd, evd.force


def _check_pile(m, mjm, mjd, tol):
    """Our forward (sparse rows) vs MuJoCo's, and Newton on our rows in both layouts."""
    assert constraint.plan(m).sparse
    d = forward(m, oracle.data_with_state(m, mjm, mjd))
    assert int(d.ncon) == mjd.ncon and int(d.nefc) == mjd.nefc and mjd.ncon > 2 * (mjm.nbody - 1)
    assert int(np.asarray(d.warning_number)[types.Warning.CONTACTFULL]) == 0
    oracle.close(d.qacc, mjd.qacc, tol, "qacc")
    oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, tol, "qfrc_constraint")
    rm, ro = oracle.match_rows(mjd, mjm, _dense_view(m, d))
    Jm = mjd.efc_J[: mjd.nefc * mjm.nv].reshape(mjd.nefc, mjm.nv)
    np.testing.assert_allclose(np.asarray(constraint.efc_j_dense(m, d))[ro], Jm[rm], atol=ROW_ATOL)
    oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], tol, "efc_force")
    qs, fs, qd, fd = _solve_both_layouts(m, d)
    oracle.close(qs, qd, LAYOUT_TOL, "qacc sparse vs dense")
    oracle.close(fs, fd, LAYOUT_TOL, "efc_force sparse vs dense")
    oracle.close(qs, mjd.qacc, NEWTON_TOL, "Newton qacc")


@pytest.mark.slow  # CI time: the other sparse-row tests cover the layout
def test_pile_32_matches_dense_and_mujoco():
    """The 32-body pile (tests/test_scene.py's small variant, groups trimmed like the big scene's) after landing."""
    mjm, mjd = _mj_pile(pile_xml(**SMALL), 60)
    m = mjl.load_mjcf_string(pile_xml(**SMALL), config=mjl.Config(**SMALL_CAPACITY))
    m = m.replace(opt=m.opt.replace(iterations=100, tolerance=jp.asarray(1e-12), ls_iterations=50))
    _check_pile(m, mjm, mjd, NEWTON_TOL)


@pytest.mark.slow
def test_bundled_pile_matches_dense_and_mujoco():
    """The bundled 220-body pile (CG) with the upper layer landing: our CG run to convergence vs MuJoCo."""
    with open(BUNDLED) as f:
        xml = f.read()
    mjm, mjd = _mj_pile(xml, 100)
    m = mjl.load_mjcf(BUNDLED)
    m = m.replace(opt=m.opt.replace(iterations=3000, tolerance=jp.asarray(1e-15), ls_iterations=50))
    _check_pile(m, mjm, mjd, FIRST_ORDER_TOL)


# ---------------------------------------------------------------------------------------------------------
# gradients through the solver

BOX_XML = """
<mujoco>
  <option timestep="0.002" solver="{solver}" cone="pyramidal" jacobian="dense" iterations="{iterations}"
          tolerance="1e-15" ls_iterations="50"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .13"><freejoint/><geom type="box" size=".1 .1 .1" condim="3"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("solver", ["CG", pytest.param("Newton", marks=pytest.mark.slow)])
def test_implicit_gradient_matches_finite_differences(solver):
    """d qacc / d qfrc_applied of a tilted box resting on three contact points (sparse rows forced): the implicit
    backward pass (CG: matrix-free conjugate gradients on H; Newton: the dense H assembled from sparse rows)
    equals central differences of the converged solution and the dense layout's gradient."""

    def box(solver):
        mjm = mujoco.MjModel.from_xml_string(BOX_XML.format(solver=solver, iterations=2000 if solver == "CG" else 100))
        return mjm, _layouts(mjm)

    mjm, (_, ms) = box(solver)
    assert constraint.plan(ms).sparse
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] = 0.0995
    mjd.qpos[3:7] = np.array([1.0, 0.002, -0.001, 0.0]) / np.linalg.norm([1.0, 0.002, -0.001, 0.0])
    mjd.qvel[:] = [0.3, -0.2, 0.0, 0.1, 0.2, 0.5]
    w = jp.arange(1.0, 7.0)

    def loss(m, f):
        d0 = oracle.data_with_state(m, mjm, mjd)
        d = fwd.forward(m, d0.replace(qfrc_applied=f))
        return jp.dot(d.qacc, w), d.nefc

    f0 = jp.array([1.0, 0.5, -2.0, 0.1, 0.0, 0.2])
    value_and_grad = jax.jit(jax.value_and_grad(loss, argnums=1, has_aux=True))
    (_, nefc), g = value_and_grad(ms, f0)
    g = np.asarray(g)
    assert np.all(np.isfinite(g)) and int(nefc) >= 12
    # the converged solution map (Newton, dense layout): its implicit gradient, and central differences of it
    # (CG's own stopping point moves by more than the differences resolve)
    dense_newton = box("Newton")[1][0]
    assert not constraint.plan(dense_newton).sparse
    _, g_dense = value_and_grad(dense_newton, f0)
    oracle.close(g, g_dense, GRAD_LAYOUT_TOL, "gradient sparse vs dense layout")

    def value(f):
        return float(value_and_grad(dense_newton, f)[0][0])

    e = np.eye(6) * FD_STEP  # host arithmetic: no eager programs
    fd = [(value(np.asarray(f0) + e[i]) - value(np.asarray(f0) - e[i])) / (2 * FD_STEP) for i in range(6)]
    oracle.close(g, np.array(fd), FD_RTOL, "gradient vs central differences")
