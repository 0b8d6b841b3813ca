"""Contact buckets (`Config.contact_buckets`, mjx_lite/pipeline/buckets.py): the constraint rows and the solver on a
bucket of the live contacts give the full padded step's results (float64 round-off), under jit, vmap (one bucket per
batch: its largest need) and grad, and MuJoCo's."""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import buckets
from mjx_lite.types import ConstraintState, ConstraintType

# The bucketed and the full step solve the same problem with the same rows in the same order; only the reductions
# over the dead rows differ (sums of exact zeros in another grouping): float64 round-off on values of order 10-100.
ROUNDOFF = 1e-11
# Newton converged on both sides (tolerance 1e-12), as tests/test_capacity.py compares with MuJoCo.
NEWTON_TOL = 1e-7

# One pair group with many slots (eight spheres on the plane: plane_sphere, 8 slots), condims 1, 3, 4 and 6 in it (the
# bucket's slots have the model's largest condim, the full layout's each its own), a box (4 slots), sphere pairs
# (28 slots, none live), a limited hinge (a limit row before the contacts). Spheres 0, 2, 4, 6 and the box touch the
# plane (8 live contacts); the others are high up.
XML = """<mujoco>
  <option timestep="0.005" cone="{cone}" solver="{solver}" iterations="100" tolerance="1e-12" ls_iterations="50"
          {extra}/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    {spheres}
    <body pos="0 -1 .098"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="0 2 .5"><joint type="hinge" axis="1 0 0" range="-.1 .1" limited="true"/>
      <geom type="capsule" size=".05 .2" condim="1" contype="0" conaffinity="0"/></body>
  </worldbody>
</mujoco>"""


def _xml(cone: str = "pyramidal", solver: str = "Newton", extra: str = "", nsphere: int = 8) -> str:
    """The model above with `extra` option attributes (integrator, noslip) and nsphere spheres (even ones down)."""
    spheres = []
    for i in range(nsphere):
        z = 0.099 if i % 2 == 0 else 1.0 + i
        cd = (1, 3, 4, 6)[i % 4]
        spheres.append(f'<body pos="{0.3 * i} 0 {z}"><freejoint/><geom type="sphere" size=".1" condim="{cd}"/></body>')
    return XML.format(cone=cone, solver=solver, extra=extra, spheres="\n".join(spheres))


def _states(m: mjl.Model, n: int, seed: int = 0) -> list:
    """n states with random velocities (the contacts of the initial pose)."""
    rng = np.random.default_rng(seed)
    d = mjl.make_data(m)
    return [d.replace(qvel=0.1 * rng.standard_normal(m.nv), qacc_warmstart=0.1 * rng.standard_normal(m.nv))
            for _ in range(n)]  # fmt: skip


STEP = jax.jit(mjl.step)
# the vmapped step: the bucketed model's (one program per model: test_settings_step_equals_full's fixture and
# test_vmap_batch_max_and_fallback share the default setting's), compared with the full model's STEP lane by lane
VSTEP = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
CAPS = (3, 10)  # 8 live contacts: the bucket of 10; the 3 bucket never holds them; the full step is the fallback


def _models(cone: str, solver: str):
    m = mjl.load_mjcf_string(_xml(cone, solver))
    return m, mjl.configure(m, contact_buckets=CAPS)


@pytest.fixture(  # slow for CI time: elliptic-cg (its fixture and tests: ~40 s of 2-core time; elliptic cones stay in
    # CI through test_settings_step_equals_full[pgs-elliptic], CG's primal loop is Newton's);
    # pyramidal-newton (~18 CPU-s): the bucket's rows and solve (buckets.py runs the model's solver on them, whichever
    # it is) stay in CI through test_settings_step_equals_full[pgs-elliptic] and
    # test_vmap_batch_max_and_fallback (PGS), Newton's solver through the full step's tests (tests/test_forward.py)
    scope="module", params=[pytest.param(("pyramidal", "Newton"), marks=pytest.mark.slow),
                            pytest.param(("elliptic", "CG"), marks=pytest.mark.slow)],
    ids=["pyramidal-newton", "elliptic-cg"],
)
def stepped(request):
    """(m, mb, states, full steps, bucket steps) of one solver and cone, on the four-sphere model of SETTINGS (CI time:
    its steps compile in about half the eight-sphere model's time; the same pair groups, condims and bucket code)."""
    m, mb = _small(*request.param, "", caps=SMALL_CAPS)
    ds = _states(m, 2)
    return m, mb, ds, [STEP(m, d) for d in ds], [STEP(mb, d) for d in ds]


def _state_choices(m, d, tol):
    """The efc_state values each row of d may hold, (nefc, 5) bool over ConstraintState: d's own, and on a row whose
    force lies within tol (scaled by the row's force) of a boundary of MuJoCo's dualState rule, the state across it.

    After PGS and noslip a sliding contact's force lies on its cone (noslip projects it there): mu N - |T| is 0 to a
    few ulp, and SATISFIED or CONE is decided by the round-off of the last bits of efc_force, which the bucketed and
    the full step (and MuJoCo) share only to ROUNDOFF. Rows: friction loss (LINEARPOS | QUADRATIC | LINEARNEG at
    f = -/+ frictionloss), limits and pyramidal / frictionless contacts (SATISFIED | QUADRATIC at f = 0), elliptic
    cones in U = (f_n / mu, f_j / friction_j) (SATISFIED | CONE at mu N = |T|, CONE | QUADRATIC at N + mu |T| = 0)."""
    S, Q, LN, LP, C = (int(s) for s in (ConstraintState.SATISFIED, ConstraintState.QUADRATIC,
                                        ConstraintState.LINEARNEG, ConstraintState.LINEARPOS,
                                        ConstraintState.CONE))  # fmt: skip
    state, f = np.asarray(d.efc_state), np.asarray(d.efc_force)
    typ, cid, floss = np.asarray(d.efc_type), np.asarray(d.efc_id), np.asarray(d.efc_frictionloss)
    ok = np.zeros((state.shape[0], 5), bool)
    ok[np.arange(state.shape[0]), state] = True
    near = lambda x, scale: abs(x) <= tol * max(1.0, scale)  # noqa: E731
    friction = np.asarray(d.contact.friction)
    adr = np.asarray(d.contact.efc_address)
    for i in np.flatnonzero(np.asarray(d.efc_mask)):
        t = ConstraintType(typ[i])
        if t == ConstraintType.EQUALITY:
            continue
        if t in (ConstraintType.FRICTION_DOF, ConstraintType.FRICTION_TENDON):
            for edge, other in ((-floss[i], LP), (floss[i], LN)):
                if near(f[i] - edge, abs(f[i])):
                    ok[i, [other, Q]] = True
        elif t != ConstraintType.CONTACT_ELLIPTIC:
            if near(f[i], 0.0):
                ok[i, [S, Q]] = True
        else:  # the contact's rows from its first (MuJoCo: mu = friction[0] / sqrt(impratio))
            c = cid[i]
            a0, dim = adr[c], int(np.asarray(d.contact.dim)[c])
            mu = friction[c, 0] / np.sqrt(float(m.opt.impratio))
            fc = f[a0 : a0 + dim]
            n, tn = fc[0] / mu, np.linalg.norm(fc[1:] / friction[c, : dim - 1])
            scale = float(np.abs(fc).max())
            if near(mu * n - tn, scale):
                ok[i, [S, C]] = True
            if near(n + mu * tn, scale):
                ok[i, [C, Q]] = True
    return ok


def _check_states(m, a, state, tol):
    """efc_state `state` (nefc,) against a's on a's live rows: equal, but on a cone or force boundary within tol
    (`_state_choices`) either side's state."""
    ok = _state_choices(m, a, tol)
    live = np.flatnonzero(np.asarray(a.efc_mask))
    bad = [int(i) for i in live if not ok[i, state[i]]]
    assert not bad, ("efc_state", bad, np.asarray(a.efc_state)[bad], state[bad])


def _check_states_mujoco(m, a, md, tol=ROUNDOFF) -> int:
    """a's contact rows' efc_state against MuJoCo's md (the same step): equal but on ties (`_state_choices`); MuJoCo's
    contact of each live slot: the same geoms, the nearest point (the box's four corners). Returns a's tie rows."""
    choices = _state_choices(m, a, tol)
    live = np.flatnonzero(np.asarray(a.contact.efc_address) >= 0)
    assert len(live) == md.ncon
    for s in live:
        same = [c for c in range(md.ncon) if tuple(md.contact[c].geom) == tuple(a.contact.geom[s])]
        c = min(same, key=lambda c, s=s: np.linalg.norm(md.contact[c].pos - a.contact.pos[s]))
        row, theirs = int(a.contact.efc_address[s]), int(md.efc_state[md.contact[c].efc_address])
        assert choices[row, theirs], (s, int(a.efc_state[row]), theirs)
    return int(np.sum(choices.sum(axis=1) > 1))


def _check_equal(m, a, b, tol=ROUNDOFF):
    """The bucketed step b against the full step a: every field the user reads, live efc rows and contacts."""
    for f in ("qpos", "qvel", "qacc", "qfrc_constraint", "act", "sensordata"):
        np.testing.assert_allclose(getattr(b, f), getattr(a, f), rtol=0, atol=tol, err_msg=f)
    assert int(b.nefc) == int(a.nefc) and int(b.ncon) == int(a.ncon)
    assert int(b.solver_niter) == int(a.solver_niter)
    np.testing.assert_array_equal(b.efc_mask, a.efc_mask)
    live = np.asarray(a.efc_mask)
    for f in ("efc_type", "efc_id"):
        np.testing.assert_array_equal(np.asarray(getattr(b, f))[live], np.asarray(getattr(a, f))[live], err_msg=f)
    _check_states(m, a, np.asarray(b.efc_state), tol)
    for f in ("efc_J", "efc_pos", "efc_margin", "efc_diagA", "efc_R", "efc_D", "efc_vel", "efc_aref", "efc_b",
              "efc_force"):  # fmt: skip
        x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        assert y.shape == x.shape, f
        np.testing.assert_allclose(y[live], x[live], rtol=0, atol=tol, err_msg=f)
        np.testing.assert_allclose(y[~live], x[~live], rtol=0, atol=0, err_msg=f + " (dead rows)")
    for f in ("dist", "pos", "frame", "dim", "geom", "efc_address", "active"):
        np.testing.assert_array_equal(getattr(b.contact, f), getattr(a.contact, f), err_msg="contact." + f)


def test_config_validation():
    assert mjl.Config(contact_buckets=[8, 32]).contact_buckets == (8, 32)
    for bad in ("yes", (), (0,), (8, -1), (True,), 8):
        with pytest.raises(ValueError, match="contact_buckets"):
            mjl.Config(contact_buckets=bad)
    m = mjl.load_mjcf_string(_xml())
    assert buckets.capacities(m) == ()  # default: off
    assert buckets.capacities(mjl.configure(m, contact_buckets=(3, 10, 10, 500))) == (3, 10)  # below nconmax only
    assert buckets.capacities(mjl.configure(m, contact_buckets="auto")) == tuple(
        c for c in buckets.AUTO_BUCKETS if c <= buckets.AUTO_MAX_SHARE * m.nconmax
    )
    mb = m.replace(config=m.config.replace(contact_buckets=(4,)))  # not a layout field: Data keeps its shapes
    assert mb.nconmax == m.nconmax and mb.njmax == m.njmax


def test_auto_keeps_buckets_that_halve_the_slots():
    """"auto" drops a capacity above AUTO_MAX_SHARE of the slots (a compiled branch and a gather / scatter per stage
    for too few rows saved): dm_control's walker (14 slots) runs no bucket, the cheetah (54) only the one of 8."""
    import dm_control.suite  # noqa: PLC0415 - a test dependency, imported on use

    suite = os.path.dirname(dm_control.suite.__file__)
    walker = mjl.configure(mjl.load_mjcf(os.path.join(suite, "walker.xml")), contact_buckets="auto")
    cheetah = mjl.configure(mjl.load_mjcf(os.path.join(suite, "cheetah.xml")), contact_buckets="auto")
    assert (walker.nconmax, cheetah.nconmax) == (14, 54)
    assert buckets.capacities(walker) == () and not buckets.enabled(walker)
    assert buckets.capacities(cheetah) == (8,)
    assert buckets.capacities(mjl.configure(cheetah, contact_buckets=(8, 32))) == (8, 32)  # explicit: all kept


def test_step_equals_full(stepped):
    m, _, _, full, bucketed = stepped
    for a, b in zip(full, bucketed):
        assert int(buckets.need(m, a)) == 6  # the bucket of 8 ran (6 <= 8 < nconmax)
        jax.tree.map(lambda x, y: None if x.shape == y.shape else pytest.fail("shape"), a, b)
        _check_equal(m, a, b)


# slow (CI time, ~11 s: the bucketed forward compiles on its own): the bucketed step is the full step to round-off
# (test_step_equals_full, test_settings_step_equals_full), and the full step is MuJoCo's (tests/test_forward.py,
# tests/test_constraint_forward.py)
@pytest.mark.slow
def test_matches_mujoco(stepped):
    """The bucketed forward pass against MuJoCo's mj_forward (qacc, contact forces) on the same state."""
    m, mb, ds, _, _ = stepped
    cone, solver = ("pyramidal", "Newton") if m.opt.cone == 0 else ("elliptic", "CG")
    mm = mujoco.MjModel.from_xml_string(_xml(cone, solver, nsphere=4))
    md = mujoco.MjData(mm)
    d = ds[0]
    md.qpos[:], md.qvel[:], md.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
    mujoco.mj_forward(mm, md)
    ours = jax.jit(mjl.forward)(mb, d)
    scale = max(1.0, np.abs(md.qacc).max())
    np.testing.assert_allclose(ours.qacc, md.qacc, rtol=0, atol=NEWTON_TOL * scale)
    assert int(ours.nefc) == md.nefc and int(ours.ncon) == md.ncon
    np.testing.assert_allclose(np.sort(np.asarray(ours.efc_force)[np.asarray(ours.efc_mask)]), np.sort(md.efc_force),
                               rtol=0, atol=NEWTON_TOL * max(1.0, np.abs(md.efc_force).max()))  # fmt: skip


@pytest.fixture(scope="module")
def pyramidal():
    return _models("pyramidal", "Newton")


VMAP_CAPS = (3, 7)  # the four-sphere model (6 live contacts at rest): the bucket of 7; 8 live: the full step


def _stack(ds):
    """The states ds stacked on a new leading axis, on the host (CI time: an eager jp.stack compiled per leaf shape)."""
    return jax.tree.map(lambda *x: np.stack(x), *jax.device_get(ds))


def _lane(b, i: int):
    """Lane i of the batched Data b, on the host (CI time: eager device indexing compiled per leaf shape)."""
    return jax.tree.map(lambda x: x[i], jax.device_get(b))


def test_vmap_batch_max_and_fallback(stepped_default):
    """Under vmap the batch's largest need picks the bucket: a batch whose states all fit runs the bucket of 7; a
    batch with one state of 8 live contacts (two more spheres dropped on the plane) runs the full step for all. (The
    four-sphere model of SETTINGS' default setting, PGS and elliptic cones: CI time, the vmapped
    bucketed step and the full step are the programs of test_settings_step_equals_full; each environment's full step
    is the unbatched STEP.)"""
    m, mb = stepped_default
    assert buckets.capacities(mb) == VMAP_CAPS, (buckets.capacities(mb), m.nconmax)
    ds = _states(m, NSTATES, seed=1)
    low = ds[2].qpos.at[7 * 1 + 2].set(0.099)  # sphere 1 down: 7 live
    lower = low.at[7 * 3 + 2].set(0.099)  # and 3: 8 live, above every bucket
    for last, want in ((low, 7), (lower, 8)):
        lanes = [*ds[:2], ds[2].replace(qpos=last)]
        a, b = [STEP(m, d) for d in lanes], VSTEP(mb, _stack(lanes))
        # the step's contacts are those of its start state
        assert max(int(buckets.need(m, x)) for x in a) == want
        for i in range(NSTATES):
            _check_equal(m, a[i], _lane(b, i))


@pytest.mark.slow  # 28 min under a load of 17 on 2 cores (the vmapped gradient of each bucket's branch compiles)
def test_grad_equals_full(pyramidal):
    """Reverse mode through a 2-step rollout (the second warm-started by the first; the solver's implicit gradient
    inside the bucket's branch) under vmap: the full step's gradient."""
    m, mb = pyramidal
    d0 = _states(m, 1, seed=2)[0]

    def loss(mm, qvel):
        d = d0.replace(qvel=qvel)
        for _ in range(2):
            d = mjl.step(mm, d)
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2)

    grad = jax.jit(jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0)))
    qv = d0.qvel[None] + 0.05 * jp.asarray(np.random.default_rng(3).standard_normal((2, m.nv)))
    ga, gb = grad(m, qv), grad(mb, qv)
    assert np.all(np.isfinite(ga))
    np.testing.assert_allclose(gb, ga, rtol=0, atol=ROUNDOFF * max(1.0, float(np.abs(ga).max())))


NOSLIP_SETTING = ("elliptic", "PGS", 'noslip_iterations="4" integrator="implicitfast"')
# The other solvers, noslip and integrators on a smaller model (four spheres: 0 and 2 on the plane, and the box: 6 live
# contacts; the bucket of 8 runs): (cone, solver, option attributes).
SETTINGS = {
    # CI time (~16 s): PGS stays in CI through pgs-elliptic (the bucket's rows and PGS solve)
    "pgs-pyramidal": pytest.param(("pyramidal", "PGS", ""), marks=pytest.mark.slow),
    # the default setting: PGS and elliptic cones (CI time: one pair of step compiles)
    "pgs-elliptic": ("elliptic", "PGS", ""),
    # slow (CI time: its vmapped bucketed step and full step compile in 56 CPU-s, pgs-elliptic's in ~44 at load 10):
    # noslip runs inside the solve stage on whatever rows the bucket gathered (buckets.py calls the model's solver),
    # so pgs-elliptic covers the bucket's rows, gather and scatter by default, and noslip and implicitfast have their
    # own default oracles (tests/test_noslip.py, the integrator tests)
    "pgs-elliptic-noslip-implicitfast": pytest.param(NOSLIP_SETTING, marks=pytest.mark.slow),
    # CI time (2-core CPU, quiet): 15 s and 44 s of setup
    "newton-pyramidal-noslip": pytest.param(("pyramidal", "Newton", 'noslip_iterations="4"'), marks=pytest.mark.slow),
    # CI time (~26 CPU-s): the rows and the solve on the bucket stay in CI through pgs-elliptic and
    # test_vmap_batch_max_and_fallback (PGS), CG's solver through the full step's tests
    "cg-pyramidal-implicitfast": pytest.param(("pyramidal", "CG", 'integrator="implicitfast"'),
                                              marks=pytest.mark.slow),
    "newton-elliptic-rk4": pytest.param(("elliptic", "Newton", 'integrator="RK4"'), marks=pytest.mark.slow),
}
# one bucket for the slow `stepped` fixture (CI time: each bucket compiles its own rows and solve in the step); the
# settings run the buckets of test_vmap_batch_max_and_fallback (VMAP_CAPS: choosing among several buckets, the largest
# need of a batch and the fallback are that test's), vmapped: the default setting's programs are that test's
SMALL_CAPS = (8,)
NSTATES = 3  # the settings' states, one batch (test_vmap_batch_max_and_fallback's batch size: the same programs)


def _small(cone: str, solver: str, extra: str, caps=VMAP_CAPS):
    m = mjl.load_mjcf_string(_xml(cone, solver, extra, nsphere=4))
    mb = mjl.configure(m, contact_buckets=caps)
    assert buckets.capacities(mb) == caps, (buckets.capacities(mb), m.nconmax)
    return m, mb


@pytest.fixture(scope="module")
def stepped_default():
    """(m, mb) of the default setting (pgs-elliptic), VMAP_CAPS."""
    return _small(*SETTINGS["pgs-elliptic"])


@pytest.fixture(scope="module", params=list(SETTINGS.values()), ids=list(SETTINGS))
def stepped_small(request):
    """(m, full steps, bucket steps) of one setting: two steps from each of NSTATES states (the second warm-started),
    the full ones state by state (STEP), the bucketed ones vmapped over the states (one batch, VSTEP); per state and
    step, [state 0 step 1, state 0 step 2, state 1 step 1, ...]."""
    if request.param == SETTINGS["pgs-elliptic"]:
        m, mb = request.getfixturevalue("stepped_default")
    else:
        m, mb = _small(*request.param)
    ds = _states(m, NSTATES, seed=4)
    b = VSTEP(mb, _stack(ds))
    b2 = VSTEP(mb, b)
    full, bucketed = [], []
    for i, d in enumerate(ds):
        a = STEP(m, d)
        full += [a, STEP(m, a)]
        bucketed += [_lane(x, i) for x in (b, b2)]
    return m, full, bucketed


def test_settings_step_equals_full(stepped_small):
    """PGS (pyramidal and elliptic), CG, noslip sweeps (after Newton and PGS), implicitfast and RK4 (each stage's
    rows and solve in the bucket): the bucketed step is the full step to round-off."""
    m, full, bucketed = stepped_small
    for a, b in zip(full, bucketed):
        # the bucket of 7 ran, not the bucket of 3 (RK4's Data holds its last stage's contacts: 5 or 6 live)
        assert VMAP_CAPS[0] < int(buckets.need(m, a)) <= VMAP_CAPS[1]
        _check_equal(m, a, b)


def test_settings_states_match_mujoco(stepped_small, request):
    """The full step's efc_state (contact rows) is MuJoCo's mj_step's on the same states (first and warm-started
    second step), but on round-off ties of the state rule (`_state_choices`). (RK4 skipped: the step's Data holds its
    last stage's rows.)"""
    m, full, _ = stepped_small
    cone, solver, extra = request.node.callspec.params["stepped_small"]
    if "RK4" in extra:
        pytest.skip("RK4: the step's efc rows are its last stage's, MuJoCo's its first")
    mm = mujoco.MjModel.from_xml_string(_xml(cone, solver, extra, nsphere=4))
    for k, d in enumerate(_states(m, NSTATES, seed=4)):
        md = mujoco.MjData(mm)
        md.qpos[:], md.qvel[:], md.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
        for j in range(2):
            mujoco.mj_step(mm, md)
            _check_states_mujoco(m, jax.device_get(full[2 * k + j]), md)


@pytest.mark.slow  # CI time: 38 s on a quiet 2-core CPU (the transition's derivative pass compiles per bucket)
def test_transition_equals_full():
    """`derivatives.transition` (the step run once, then the linearised step: its rows and solve at the step's
    solution) on a bucketed model: the full model's A (B is empty: no actuator)."""
    m, mb = _small("pyramidal", "Newton", "", caps=SMALL_CAPS)
    d = _states(m, 1, seed=5)[0]
    (a, b, _, _), (ab, bb, _, _) = (mjl.derivatives.transition(mm, d, sensors=False) for mm in (m, mb))
    a, ab = np.asarray(a), np.asarray(ab)
    assert np.all(np.isfinite(a)) and np.shape(bb) == np.shape(b) == (a.shape[0], 0)  # the model has no actuator
    np.testing.assert_allclose(ab, a, rtol=0, atol=ROUNDOFF * max(1.0, float(np.abs(a).max())))


def _quadruped_path() -> str:
    import dm_control.suite  # noqa: PLC0415 - a test dependency, imported on use

    return os.path.join(os.path.dirname(dm_control.suite.__file__), "quadruped.xml")


@pytest.mark.slow  # 370 s under a load of 9 on 2 cores (the quadruped's full and bucketed steps compile)
def test_quadruped_equals_full():
    """dm_control's quadruped (four wall planes, its height field under the floor: 455 slots, 1246 rows) from states
    of a rollout with random controls (4-8 live contacts, once it has landed: it starts 0.57 m up and has no contact
    before ~0.2 s): the buckets' step equals the full step."""
    m = mjl.load_mjcf(_quadruped_path())
    mb = mjl.configure(m, contact_buckets="auto")
    rng = np.random.default_rng(1)
    d = mjl.make_data(m)
    checked = 0
    for i in range(120):
        d = STEP(m, d.replace(ctrl=rng.uniform(-1, 1, m.nu)))
        if i % 20 == 19 and i >= 59:
            a, b = STEP(m, d), STEP(mb, d)
            assert 0 < int(buckets.need(m, a)) <= buckets.capacities(mb)[-1]
            _check_equal(m, a, b, tol=ROUNDOFF * max(1.0, float(np.abs(a.qacc).max())))
            checked += 1
    assert checked == 4


def test_data_shapes_unchanged():
    """Buckets are not a layout: make_data gives the same shapes with them on (and step returns them, above)."""
    m = mjl.load_mjcf_string(_xml())
    a, b = mjl.make_data(m), mjl.make_data(mjl.configure(m, contact_buckets=(4,)))
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.shape(x), np.shape(y)), a, b)


@pytest.mark.slow  # 44 s wall, 45 CPU-s (load 2, cache off): the vmapped PGS step compiles for both models
def test_vmap_pgs_elliptic_noslip_cone_ties():
    """PGS, elliptic cones, noslip and implicitfast under vmap (the bucket of 7): the sliding box's contacts end on
    their cone (noslip's projection), where efc_state (SATISFIED or CONE) is the round-off of mu N - |T| ~ 1e-14:
    the bucketed step's states are the full step's but on such ties (`_check_states`), and so are MuJoCo's mj_step
    states on the same states (it reports CONE on some of the ties where the full step reports SATISFIED)."""
    m = mjl.load_mjcf_string(_xml(*NOSLIP_SETTING, nsphere=4))
    mb = mjl.configure(m, contact_buckets=VMAP_CAPS)
    ds = _states(m, 3, seed=1)
    ds[2] = ds[2].replace(qpos=ds[2].qpos.at[7 * 1 + 2].set(0.099))  # sphere 1 down: 7 live, the bucket of 7
    vstep = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
    batch = jax.tree.map(lambda *x: jp.stack(x), *ds)
    a, b = jax.device_get((vstep(m, batch), vstep(mb, batch)))
    mm = mujoco.MjModel.from_xml_string(_xml(*NOSLIP_SETTING, nsphere=4))
    ties = 0
    for i, d in enumerate(ds):
        ai, bi = jax.tree.map(lambda x, i=i: x[i], a), jax.tree.map(lambda x, i=i: x[i], b)
        assert int(buckets.need(m, ai)) <= VMAP_CAPS[1]
        _check_equal(m, ai, bi)
        md = mujoco.MjData(mm)
        md.qpos[:], md.qvel[:], md.qacc_warmstart[:] = d.qpos, d.qvel, d.qacc_warmstart
        mujoco.mj_step(mm, md)
        ties += _check_states_mujoco(m, ai, md)
    assert ties > 0  # the ties this test is about occur
