"""Issue 39: MuJoCo 4.0's Newton stopping rules. Besides the improvement and gradient tests, Newton stops when the
Newton decrement 0.5 scale grad' H^-1 grad at the new point (H its Hessian, scale 1 / trace(M)) is below
opt.tolerance, and it takes zero iterations when the starting point's gradient test passes and either the duality gap
0.5 scale grad' M^-1 grad or the Newton decrement is below it. solver_niter is MuJoCo's (float64) at a sweep of
tolerances on tests/test_solver_trace.py's model (warmstart disabled) and on a contact scene of a few bodies in
mid-simulation, warm-started from MuJoCo's qacc_warmstart (islands disabled: the whole-system solve; per island:
tests/test_island_solve.py).
"""

import jax
import jax.numpy as jp
import mujoco
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from mjx_lite.solver.solve import solve
from tests import oracle
from tests import test_solver_trace as trace

TOLERANCES = (1e-2, 1e-6, 1e-10)
QACC_TOL = 1e-9  # qacc at the stopping iteration, relative to max(1, |qacc|)

SCENE = """
<mujoco>
  <option solver="Newton" iterations="100" ls_iterations="50" jacobian="dense" cone="{cone}" timestep="0.005">
    <flag island="disable"/>
  </option>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos="0 0 .3">
      <freejoint/>
      <geom type="box" size=".1 .08 .05" mass="1"/>
    </body>
    <body pos=".05 .02 .5" euler="10 20 30">
      <freejoint/>
      <geom type="box" size=".05 .05 .05" mass="0.3"/>
    </body>
    <body pos=".4 0 .2">
      <freejoint/>
      <geom type="sphere" size=".08" mass="0.5" condim="{condim}"/>
    </body>
  </worldbody>
</mujoco>
"""
STEPS = (60, 150)  # simulated steps before the tested states: falling into contact, then resting / sliding
# warm starts near the solution: MuJoCo's solved qacc scaled by 1 + WARM_PERTURB (zero-iteration exits at some
# tolerances, one iteration at others)
WARM_PERTURB = (1e-6, 1e-4)


def _scene_states(mjm):
    """[(qpos, qvel, qacc_warmstart)] of MuJoCo's simulation after each of STEPS steps (its own warm start), then
    the same states warm-started near MuJoCo's solution."""
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:6] = [0.5, 0.2, 0, 0, 0, 1.0]
    out = []
    for n in range(max(STEPS) + 1):
        if n in STEPS:
            out.append((mjd.qpos.copy(), mjd.qvel.copy(), mjd.qacc_warmstart.copy()))
        mujoco.mj_step(mjm, mjd)
    for (qpos, qvel, warm), perturb in zip(list(out), WARM_PERTURB, strict=True):
        qacc = _mujoco(mjm, (qpos, qvel, warm), 1e-10).qacc
        out.append((qpos, qvel, qacc * (1 + perturb)))
    return out


def _trace_states(mjm):
    out = []
    for seed in range(2):
        mjd = mujoco.MjData(mjm)
        trace._state(mjm, mjd, seed)
        out.append((mjd.qpos.copy(), mjd.qvel.copy(), mjd.qacc_warmstart.copy()))
    return out


# "trace": slow (CI time: its own prepare and solve compiles); the stopping rules (decrement, improvement, gradient)
# are the same code on the contact scenes, which stay by default ("pyramidal" on every path, "elliptic"), and the
# trace model's Newton iterates and statistics against MuJoCo's stay by default in tests/test_solver_trace.py's
# test_iterations_match_mujoco[Newton-xla] and [Newton-fused]
@pytest.fixture(scope="module", params=[pytest.param("trace", marks=pytest.mark.slow), "pyramidal", "elliptic"])
def case(request):
    """(name, MuJoCo model, our XLA model, our fused model, [(state, prepared Data)], jitted solve)."""
    if request.param == "trace":
        mjm = mujoco.MjModel.from_xml_string(trace.XML.format(solver="Newton"))
        states = _trace_states(mjm)
    else:
        condim = 3 if request.param == "pyramidal" else 4
        mjm = mujoco.MjModel.from_xml_string(SCENE.format(cone=request.param, condim=condim))
        states = _scene_states(mjm)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    mf = mjl.configure(m, kernels="fused")
    prep = jax.jit(trace._prepare)
    prepared = []
    for qpos, qvel, warm in states:
        d = mjl.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel), qacc_warmstart=jp.asarray(warm))
        prepared.append(((qpos, qvel, warm), prep(m, d)))
    return request.param, mjm, m, mf, prepared, jax.jit(solve)


def _mujoco(mjm, state, tol):
    mjm.opt.tolerance = tol
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:], mjd.qacc_warmstart[:] = state
    mujoco.mj_forward(mjm, mjd)
    return mjd


def test_scene_has_contacts(case):
    """The contact scene's tested states have contacts (the constraint Hessian enters the decrement)."""
    name, mjm, _, _, prepared, _ = case
    for state, _ in prepared:
        mjd = _mujoco(mjm, state, 1e-8)
        assert mjd.nefc >= 6, (name, mjd.nefc)


@pytest.mark.parametrize("path", ["xla", "fused", "tiled"])
def test_niter_matches_mujoco(case, path, monkeypatch):
    """solver_niter and qacc are MuJoCo's at each tolerance of TOLERANCES, on the XLA path, the fused kernel and the
    dof-tiled fused kernel (`Launch.dof_tile`, kernels/primal_tiled.py; Pallas interpret mode; elliptic cones are
    not fused)."""
    name, mjm, m, mf, prepared, jsolve = case
    if path != "xla" and name == "elliptic":
        pytest.skip("elliptic cones run the XLA solver")
    if path == "tiled":
        monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout, dof_tile=2,
                                                                          interpret=True))  # fmt: skip
        jsolve = jax.jit(lambda m, d: solve(m, d))  # a trace of its own (the patch is read at trace time)
    m = m if path == "xla" else mf
    niters = []
    for i, (state, d) in enumerate(prepared):
        for tol in TOLERANCES:
            mjd = _mujoco(mjm, state, tol)
            ours = jsolve(trace._with_tol(m, tol), d)
            what = f"{name} {path} state {i} tolerance {tol:g}"
            n = int(mjd.solver_niter[0])
            niters.append(n)
            assert int(ours.solver_niter) == n, (what, int(ours.solver_niter), n)
            oracle.close(ours.qacc, mjd.qacc, QACC_TOL, what)
    assert len(set(niters)) > 1, niters  # the sweep moves the stopping iteration
    if name != "trace":
        assert 0 in niters, niters  # the zero-iteration exit is exercised
