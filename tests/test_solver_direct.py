"""The exact solve of small constraint problems (`mjx_lite.solver.direct`, `Config.direct_solve_rows`) against
MuJoCo's Newton run to convergence, float64: every kind of scalar row it takes (a slide limit, a hinge limit with
friction loss, a joint equality, a frictionless contact, limits on two trees: two islands), with the rows active
and inactive, solvers Newton and CG; its gradients against the iterative solver's and central differences; the
cartpole's rollout against the iterative path; float32.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import constraint
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver import common, direct
from tests import oracle

# The exact optimum against MuJoCo's Newton converged to tolerance 1e-15: round-off amplified by conditioning
# (relative to the field's scale max(1, max|x|)); tighter than the iterative solvers' 1e-7 (test_constraint_forward)
EXACT_TOL = 1e-10
# the direct and the iterative path of the same rollout (Newton at tolerance 1e-10 per step, 100 steps)
ROLLOUT_TOL = 1e-8
# implicit gradients of the two paths (both at the optimum: the same linear solve up to the iterate's error)
GRAD_TOL = 1e-6
FD_RTOL = 1e-5  # central differences, step 1e-6, float64
F32_TOL = 1e-4  # float32 forward against float64 (relative to the field's scale)

_OPTION = '<option solver="{solver}" iterations="200" ls_iterations="50" tolerance="1e-15" jacobian="dense"/>'

MODELS = {
    # one inequality row (the cartpole's rail)
    "slide_limit": """<mujoco>{option}<worldbody>
      <body pos="0 0 1"><joint name="s" type="slide" axis="1 0 0" range="-.5 .5" damping=".1"/>
        <geom type="box" size=".2 .1 .1" mass="1" contype="0" conaffinity="0"/>
        <body><joint name="h" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 .6" size=".03" mass=".2" contype="0" conaffinity="0"/></body>
      </body></worldbody>
      <actuator><motor joint="s" gear="5"/></actuator></mujoco>""",
    # friction loss (three pieces) and a limit on one hinge: 6 candidates, coupled through M
    "friction_limit": """<mujoco>{option}<worldbody>
      <body pos="0 0 1"><joint name="a" type="hinge" axis="0 1 0" range="-.3 .3" frictionloss="1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -.4" size=".04" mass="1" contype="0" conaffinity="0"/>
        <body pos="0 0 -.4"><joint name="b" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -.4" size=".04" mass=".5" contype="0" conaffinity="0"/></body>
      </body></worldbody></mujoco>""",
    # a joint equality (always quadratic) and a friction-loss row
    "equality_friction": """<mujoco>{option}<worldbody>
      <body pos="0 0 1"><joint name="a" type="hinge" axis="0 1 0" frictionloss="1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -.4" size=".04" mass="1" contype="0" conaffinity="0"/>
        <body pos="0 0 -.4"><joint name="b" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -.4" size=".04" mass=".5" contype="0" conaffinity="0"/></body>
      </body></worldbody>
      <equality><joint joint1="a" joint2="b" polycoef=".1 .5 0 0 0"/></equality></mujoco>""",
    # a frictionless contact (condim 1: one inequality row, a padding row when apart)
    "frictionless_contact": """<mujoco>{option}<worldbody>
      <geom type="plane" size="2 2 .1" condim="1"/>
      <body pos="0 0 .1"><joint type="slide" axis="0 0 1"/><joint type="slide" axis="1 0 0"/>
        <geom type="sphere" size=".1" mass="1" condim="1"/></body></worldbody></mujoco>""",
    # two trees, one limit each: two islands (MuJoCo solves them apart; the exact solve at once)
    "two_islands": """<mujoco>{option}<worldbody>
      <body pos="0 0 1"><joint name="s1" type="slide" axis="1 0 0" range="-.2 .2"/>
        <geom type="box" size=".1 .1 .1" mass="1" contype="0" conaffinity="0"/></body>
      <body pos="1 0 1"><joint name="h2" type="hinge" axis="0 1 0" range="-.4 .4"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".04" mass=".7" contype="0" conaffinity="0"/></body>
      </worldbody></mujoco>""",
}
ROWS = {"slide_limit": 1, "friction_limit": 2, "equality_friction": 2, "frictionless_contact": 1, "two_islands": 2}
STATES = 12  # random states per model and solver (rows pushed past their limits in about half)


def _mujoco(name: str, solver: str) -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(MODELS[name].format(option=_OPTION.format(solver=solver)))


def _state(mjm, mjd, rng):
    """Joints near and past their limits (or the sphere in and above the floor), random velocities (fast or slow)
    and controls."""
    for j in range(mjm.njnt):
        adr = mjm.jnt_qposadr[j]
        lim = mjm.jnt_range[j, 1] if mjm.jnt_limited[j] else 0.05
        mjd.qpos[adr] = rng.choice([-1.0, 1.0]) * lim * rng.uniform(0.8, 1.15)
    if mjm.neq:  # the joint equality b = c0 + c1 a nearly holds
        mjd.qpos[1] = mjm.eq_data[0, 0] + mjm.eq_data[0, 1] * mjd.qpos[0] + 1e-3 * rng.normal()
    if mjm.ngeom and mjm.geom_type[0] == mujoco.mjtGeom.mjGEOM_PLANE:
        mjd.qpos[0] = rng.uniform(-0.01, 0.01)
    mjd.qvel[:] = rng.normal(size=mjm.nv) * rng.choice([1e-3, 2.0])  # slow: friction loss in its quadratic piece
    mjd.ctrl[:] = rng.uniform(-1, 1, size=mjm.nu)


_forward = jax.jit(fwd.forward)


def _states(kind, d) -> np.ndarray:
    """(nefc,) the ConstraintState of each row's force (padding rows 0)."""
    f, fl, live = np.asarray(d.efc_force), np.asarray(d.efc_frictionloss), np.asarray(d.efc_mask)
    S = mujoco.mjtConstraintState
    quad, sat = int(S.mjCNSTRSTATE_QUADRATIC), int(S.mjCNSTRSTATE_SATISFIED)
    fric = np.where(f == -fl, int(S.mjCNSTRSTATE_LINEARPOS), np.where(f == fl, int(S.mjCNSTRSTATE_LINEARNEG), quad))
    st = np.where(kind == common.EQUALITY, quad, np.where(kind == common.FRICTION, fric, np.where(f > 0, quad, sat)))
    return np.where(live, st, 0)


# CG takes the very exact solve that Newton does (solver/solve.py: `exact` for either solver), a second program of the
# same code: slow; every model's Newton case keeps the direct path in the default selection
@pytest.mark.parametrize("solver", ["Newton", pytest.param("CG", marks=pytest.mark.slow)])
@pytest.mark.parametrize("name", list(MODELS))
def test_direct_solve_matches_mujoco(name, solver):
    """Our forward (the model's solver: Newton or CG) against MuJoCo's Newton converged (the unique optimum)."""
    m = oracle.model_from_mujoco(_mujoco(name, solver))
    mjm = _mujoco(name, "Newton")
    layout = constraint.plan(m).layout
    assert layout.nefc == ROWS[name] and direct.applies(layout, m.config.direct_solve_rows)
    rng = np.random.default_rng(0)
    seen = [set() for _ in range(layout.nefc)]  # each row's states over the tested states
    for _ in range(STATES):
        mjd = mujoco.MjData(mjm)
        _state(mjm, mjd, rng)
        mujoco.mj_forward(mjm, mjd)
        assert mjd.solver_niter[0] < mjm.opt.iterations
        d = _forward(m, oracle.data_with_state(m, mjm, mjd))
        oracle.close(d.qacc, mjd.qacc, EXACT_TOL, f"{name} qacc")
        oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, EXACT_TOL, f"{name} qfrc_constraint")
        if mjd.nefc:
            rm, ro = oracle.match_rows(mjd, mjm, d)
            oracle.close(np.asarray(d.efc_force)[ro], mjd.efc_force[rm], EXACT_TOL, f"{name} efc_force")
        # efc_state: the piece of each row's force (MuJoCo's own efc_state after Newton can be an earlier iterate's:
        # a limit row SATISFIED with force 0.33, a friction row LINEARNEG with a force inside its quadratic zone)
        np.testing.assert_array_equal(np.asarray(d.efc_state), _states(layout.kind, d))
        for r, st in enumerate(np.asarray(d.efc_state)):
            seen[r].add(int(st))
        assert int(d.solver_niter) == int(np.any(np.asarray(d.efc_force) != 0))
    # every piece of every row was tested (equality_friction: the equality drives joint a hard, its friction row
    # stays in its two linear pieces; friction_limit has the quadratic one)
    pieces = {common.EQUALITY: 1, common.INEQUALITY: 2, common.FRICTION: 3 if name != "equality_friction" else 2}
    assert [len(x) for x in seen] == [pieces[int(k)] for k in layout.kind], seen


@pytest.fixture(scope="module")
def cartpole():
    return mjl.load_mjcf("cartpole")


def _rollout(m, d, n):
    def body(d, _):
        d = mjl.step(m, d)
        return d, (d.qpos, d.efc_force)

    return jax.lax.scan(body, d, None, length=n)[1]


# slow (CI time, ~5 worker-s: two compiled rollouts): the direct path's forward is MuJoCo's by default in
# test_direct_solve_matches_mujoco (each model: slide_limit is the cartpole's rail), the iterative path's in
# tests/test_constraint_forward.py, so both paths stay tied to the same oracle
@pytest.mark.slow
def test_cartpole_rollout_equals_iterative(cartpole_euler):
    """The cartpole driven into its rail limit (Euler, 100 steps): the direct and the iterative path agree. (Euler,
    CI time: RK4's four forward passes per step make each compiled rollout four times the program; the direct solve
    is the same code under either integrator.)"""
    cartpole = cartpole_euler
    iterative = mjl.configure(cartpole, direct_solve_rows=0)
    d0 = mjl.make_data(cartpole).replace(qvel=np.asarray([4.0, 1.0]), ctrl=np.asarray([1.0]))
    run = jax.jit(_rollout, static_argnums=2)
    q1, f1 = run(cartpole, d0, 100)
    q0, f0 = run(iterative, d0, 100)
    assert np.max(np.asarray(f1)) > 0  # the limit was hit
    oracle.close(q1, q0, ROLLOUT_TOL)
    oracle.close(f1, f0, ROLLOUT_TOL)


def _final(m, v):
    """The cart's and the pole's final positions summed, 40 steps from cart velocity v; and the largest constraint
    force of the rollout (> 0: the limit is hit)."""
    d0 = mjl.make_data(m).replace(qvel=jp.asarray([v, 0.5]), ctrl=jp.asarray([0.8]))
    q, f = _rollout(m, d0, 40)
    return q[-1, 0] + q[-1, 1], jp.max(f)


@pytest.fixture(scope="module")
def final_vg():
    """((value, largest force), d/dv) of `_final`, one jitted function (the configuration is part of its cache key)."""
    return jax.jit(jax.value_and_grad(_final, argnums=1, has_aux=True))


@pytest.fixture(scope="module")
def cartpole_euler(cartpole):
    """The cartpole with Euler's integrator: the gradient tests' rollouts (CI time: RK4's four forward passes per
    step make the differentiated scan four times the program; the direct solve and its implicit gradient are the
    same code under either integrator)."""
    return cartpole.replace(opt=cartpole.opt.replace(integrator=int(mjl.IntegratorType.EULER)))


def test_gradient_of_one_forward_matches_central_differences():
    """The cheap default oracle of the direct path's implicit gradient: d(w . qacc)/d qvel of one forward pass of
    the slide_limit model pushed past its limit (the row active: its aref depends on qvel) and of friction_limit
    (friction loss and a limit) equals central differences of the values of the same compiled function."""
    for name in ("slide_limit", "friction_limit"):
        mjm = _mujoco(name, "Newton")
        m = oracle.model_from_mujoco(mjm)
        assert direct.applies(constraint.plan(m).layout, m.config.direct_solve_rows)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[0] = 1.1 * mjm.jnt_range[0, 1]  # past the upper limit
        mjd.qvel[:] = (0.3, -0.2)
        d0 = oracle.data_with_state(m, mjm, mjd)
        w = np.asarray([1.0, 0.7])

        def loss(qvel, m=m, d0=d0, w=w):
            d = fwd.forward(m, d0.replace(qvel=qvel))
            return jp.dot(d.qacc, w), jp.max(jp.abs(d.efc_force))

        vg = jax.jit(jax.value_and_grad(loss, has_aux=True))
        v, h = np.asarray(mjd.qvel), 1e-6
        (_, fmax), g = vg(v)
        assert float(fmax) > 0, name  # the limit row pushes
        e = np.eye(2) * h
        fd = [(float(vg(v + e[i])[0][0]) - float(vg(v - e[i])[0][0])) / (2 * h) for i in range(2)]
        assert np.all(np.isfinite(np.asarray(g))) and np.any(np.asarray(g) != 0)
        np.testing.assert_allclose(np.asarray(g), fd, rtol=FD_RTOL, atol=FD_RTOL, err_msg=name)


# slow (CI time, ~8 worker-s: the differentiated 40-step rollout): the direct path's implicit gradient against
# central differences stays by default in test_gradient_of_one_forward_matches_central_differences (one forward pass
# of slide_limit, the cartpole's rail, and of friction_limit, with the rows active)
@pytest.mark.slow
def test_gradients(cartpole_euler, final_vg):
    """d(final cart position)/d(initial cart velocity) through a limit hit: the direct path's implicit gradient
    equals central differences (of the values of the same compiled function)."""
    cartpole = cartpole_euler
    v, h = np.float64(3.0), 1e-6
    (_, fmax), g = final_vg(cartpole, v)
    assert float(fmax) > 0  # the limit was hit
    fd = (float(final_vg(cartpole, v + h)[0][0]) - float(final_vg(cartpole, v - h)[0][0])) / (2 * h)
    assert np.isfinite(float(g)) and float(g) != 0
    np.testing.assert_allclose(float(g), fd, rtol=FD_RTOL)


# slow (CI time: a second compile of the differentiated rollout); the direct path's implicit gradient against
# central differences stays by default in test_gradient_of_one_forward_matches_central_differences
@pytest.mark.slow
def test_gradients_unrolled_equals_implicit(cartpole_euler, final_vg):
    """With gradients="unrolled" (through the exact solve's formulas) the gradient of test_gradients equals the
    implicit one."""
    cartpole = cartpole_euler
    unrolled = mjl.configure(cartpole, gradients="unrolled")
    v = np.float64(3.0)
    out = {k: final_vg(mm, v) for k, mm in (("direct", cartpole), ("unrolled", unrolled))}
    g = {k: float(o[1]) for k, o in out.items()}
    assert float(out["direct"][0][1]) > 0  # the limit was hit
    assert np.isfinite(g["direct"]) and g["direct"] != 0
    np.testing.assert_allclose(g["unrolled"], g["direct"], rtol=GRAD_TOL)


@pytest.mark.slow  # a third gradient program; test_gradient_of_one_forward_... checks the direct path's by differences
def test_gradients_equal_iterative(cartpole_euler, final_vg):
    """The direct path's implicit gradient equals the iterative path's (both at the optimum)."""
    cartpole = cartpole_euler
    iterative = mjl.configure(cartpole, direct_solve_rows=0)
    v = np.float64(3.0)
    np.testing.assert_allclose(float(final_vg(cartpole, v)[1]), float(final_vg(iterative, v)[1]), rtol=GRAD_TOL)


def test_float32():
    """The friction-loss + limit model in float32: the direct solve agrees with float64 MuJoCo to F32_TOL."""
    mjm = _mujoco("friction_limit", "Newton")
    rng = np.random.default_rng(1)
    for _ in range(4):
        mjd = mujoco.MjData(mjm)
        _state(mjm, mjd, rng)
        mujoco.mj_forward(mjm, mjd)
        d = oracle.float32_forward(oracle.model_from_mujoco(mjm), mjd.qpos, mjd.qvel)
        assert d.qacc.dtype == jp.float32
        oracle.close(d.qacc, mjd.qacc, F32_TOL)


def test_small_spd_solve():
    """The unrolled L D L' solve of `solve_direct` against numpy, n = 1..4, a batch of systems."""
    rng = np.random.default_rng(0)
    for n in range(1, 5):
        B = rng.normal(size=(3, n, n))
        K = B @ np.swapaxes(B, 1, 2) + 0.1 * np.eye(n)
        r = rng.normal(size=(3, n))
        x = np.asarray(direct._spd_solve_small(jp.asarray(K), jp.asarray(r)))
        np.testing.assert_allclose(x, np.linalg.solve(K, r[..., None])[..., 0], rtol=1e-10, atol=1e-12)


def test_config_bounds():
    with pytest.raises(ValueError, match="direct_solve_rows"):
        mjl.Config(direct_solve_rows=5)
    with pytest.raises(ValueError, match="direct_solve_rows"):
        mjl.Config(direct_solve_rows=-1)
