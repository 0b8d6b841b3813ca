"""Integrators against MuJoCo (float64): mj_integratePos, activation integration, mj_Euler (with and without
implicit damping), mj_implicit (implicit / implicitfast), and the per-environment divergence reset."""

import collections
import copy
import re

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import data, io, types
from mjx_lite.pipeline import integrate
from tests import oracle

RTOL = 1e-10  # float64 round-off of one step
ATOL = 1e-10
SOLVE_RTOL = 1e-9  # dense Cholesky/LU vs MuJoCo's sparse LDL: round-off amplified by cond(M)

XML = """
<mujoco>
  <option timestep="0.01"><flag constraint="disable"/></option>
  <worldbody>
    <body name="f" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .2 .3" mass="2"/>
      <body pos=".3 0 0">
        <joint name="ball" type="ball" damping=".3"/>
        <geom type="capsule" size=".05 .2" pos=".2 0 0" quat="1 0 1 0"/>
        <body pos=".4 0 0">
          <joint name="hinge" type="hinge" axis="0 1 0" damping=".7"/>
          <geom type="sphere" size=".1" pos=".1 0 0"/>
          <body pos=".2 0 0">
            <joint name="slide" type="slide" axis="1 0 0" damping="2"/>
            <geom type="sphere" size=".05"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t" damping="0.4"><joint joint="hinge" coef="1"/><joint joint="slide" coef="-.3"/></fixed>
  </tendon>
  <actuator>
    <general joint="hinge" dyntype="filterexact" dynprm="0.05" gainprm="2" actlimited="true" actrange="-.4 .4"/>
    <general joint="slide" dyntype="filter" dynprm="0.2" gainprm="1.5"/>
    <general joint="hinge" dyntype="integrator" gainprm="1" actlimited="true" actrange="-.2 .3"/>
    <velocity joint="slide" kv="3"/>
    <position joint="hinge" kp="5" kv="0.5"/>
    <motor joint="slide" damping="0.6"/>
    <general tendon="t" gaintype="affine" gainprm="1 0 0.8" biastype="affine" biasprm="0 -1 -0.6"/>
  </actuator>
</mujoco>
"""


def _models():
    chain = mujoco.MjModel.from_xml_string(XML)
    chain.dof_dampingpoly[6:] = [[0.3, 0.2], [0.1, 0.4], [0.5, 0.05], [0.2, 0.1], [0.4, 0.3]]  # no XML attribute in 4.0
    out = {"chain": chain}
    for name in ("cartpole.xml", "quadruped.xml"):
        spec = mujoco.MjSpec.from_file(f"{oracle.DM_SUITE}/{name}")
        spec.option.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
        out[name.split("/")[-1][:-4]] = spec.compile()
    return out


MODELS = _models()


@pytest.fixture(scope="module", params=sorted(MODELS))
def case(request):
    mjm = MODELS[request.param]
    return request.param, mjm, oracle.model_from_mujoco(mjm)


def _forwarded(mjm, seed):
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(seed))
    mjd.act[:] = np.random.default_rng(seed + 100).uniform(-1, 1, mjm.na)  # some outside actrange
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _assert_state(name, got, mjd):
    for f in ("qpos", "qvel", "act", "time", "qacc_warmstart"):
        np.testing.assert_allclose(
            np.asarray(getattr(got, f)), getattr(mjd, f), rtol=RTOL, atol=ATOL, err_msg=f"{name}.{f}"
        )


def test_integrate_pos(case):
    name, mjm, m = case
    rng = np.random.default_rng(0)
    qpos = np.array(mjm.qpos0)
    mujoco.mj_integratePos(mjm, qpos, rng.normal(size=mjm.nv), 1.0)
    qvel = rng.normal(size=mjm.nv) * 3
    fn = jax.jit(integrate.integrate_pos, static_argnums=())
    for h in (0.01, 0.7):
        want = qpos.copy()
        mujoco.mj_integratePos(mjm, want, qvel, h)
        got = fn(m, jp.asarray(qpos), jp.asarray(qvel), jp.asarray(h))
        np.testing.assert_allclose(np.asarray(got), want, rtol=RTOL, atol=ATOL, err_msg=name)


def test_integrate_pos_zero_velocity_gradient():
    """d qpos_next / d qvel is finite and correct at qvel = 0 (the sinc form of the quaternion exponential)."""
    mjm = MODELS["chain"]
    m = oracle.model_from_mujoco(mjm)
    qpos = jp.asarray(mjm.qpos0)
    h = 0.1
    # one program (eagerly, op by op, every operation compiled a program of its own)
    jac = jax.jit(jax.jacfwd(lambda v: integrate.integrate_pos(m, qpos, v, jp.asarray(h))))(np.zeros(mjm.nv))
    eps = 1e-6
    fd = np.zeros((mjm.nq, mjm.nv))
    for j in range(mjm.nv):
        e = np.zeros(mjm.nv)
        e[j] = eps
        plus, minus = np.array(mjm.qpos0), np.array(mjm.qpos0)
        mujoco.mj_integratePos(mjm, plus, e, h)
        mujoco.mj_integratePos(mjm, minus, -e, h)
        fd[:, j] = (plus - minus) / (2 * eps)
    np.testing.assert_allclose(np.asarray(jac), fd, atol=1e-8)  # central differences: O(eps^2) truncation


@pytest.mark.parametrize("eulerdamp", [True, False])
def test_euler_matches_mujoco(case, eulerdamp):
    name, mjm, m = case
    if not eulerdamp:
        mjm = copy.copy(MODELS[name])
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EULERDAMP
        m = oracle.model_from_mujoco(mjm)
    fn = jax.jit(integrate.euler)
    for seed in range(2):
        mjd = _forwarded(mjm, seed)
        d = oracle.data_from_mujoco(m, mjm, mjd)
        got = fn(m, d)
        mujoco.mj_Euler(mjm, mjd)
        _assert_state(name, got, mjd)


def test_euler_damping_dense_factorization_matches_mujoco():
    """Euler's implicit damping (solve_shifted) with Config(mass_factorization="dense")."""
    mjm = MODELS["chain"]
    m = mjl.configure(oracle.model_from_mujoco(mjm), mass_factorization="dense")
    fn = jax.jit(integrate.euler)
    for seed in range(2):
        mjd = _forwarded(mjm, seed)
        got = fn(m, oracle.data_from_mujoco(m, mjm, mjd))
        mujoco.mj_Euler(mjm, mjd)
        _assert_state("chain", got, mjd)


@pytest.mark.parametrize("integrator", ["implicit", "implicitfast"])
def test_implicit_matches_mujoco(integrator):
    mjm = copy.copy(MODELS["chain"])
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    m = oracle.model_from_mujoco(mjm)
    fn = jax.jit(integrate.implicit)
    for seed in range(2):
        mjd = _forwarded(mjm, seed)
        d = oracle.data_from_mujoco(m, mjm, mjd)
        got = fn(m, d)
        mujoco.mj_implicit(mjm, mjd)
        for f in ("qpos", "qvel", "act", "time"):
            np.testing.assert_allclose(
                np.asarray(getattr(got, f)), getattr(mjd, f), rtol=SOLVE_RTOL, atol=SOLVE_RTOL, err_msg=f
            )


# ---- divergence --------------------------------------------------------------------------------------------


def test_check_resets_only_bad_environments():
    mjm = MODELS["chain"]
    m = oracle.model_from_mujoco(mjm)
    d0 = io.make_data(m)
    rng = np.random.default_rng(0)
    batch = 4
    qpos = np.tile(np.asarray(mjm.qpos0), (batch, 1)) + 0.01 * rng.normal(size=(batch, mjm.nq))
    qvel = rng.normal(size=(batch, mjm.nv))
    qpos[1, 2] = np.nan  # env 1: bad qpos
    qvel[2, 0] = 2e10  # env 2: bad qvel
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d0)
    db = db.replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel), time=jp.full(batch, 1.5))

    @jax.jit
    @jax.vmap
    def check(d):
        return integrate.check_vel(m, integrate.check_pos(m, d))

    out = check(db)
    wn = np.asarray(out.warning_number)
    assert wn[:, types.Warning.BADQPOS].tolist() == [0, 1, 0, 0]
    assert wn[:, types.Warning.BADQVEL].tolist() == [0, 0, 1, 0]
    for i in (1, 2):
        np.testing.assert_array_equal(np.asarray(out.qpos[i]), mjm.qpos0)
        np.testing.assert_array_equal(np.asarray(out.qvel[i]), 0.0)
        assert float(out.time[i]) == 0.0
    for i in (0, 3):
        np.testing.assert_array_equal(np.asarray(out.qpos[i]), qpos[i])
        np.testing.assert_array_equal(np.asarray(out.qvel[i]), qvel[i])
        assert float(out.time[i]) == 1.5


# a mocap body, an inactive equality, a delayed actuator and sensor (Data.history) and a plastic spring
# (Data.plastic): every kind of field whose reset value is not zero (data.reset_values), contacts for the -1 ids
RESET_XML = """<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
  <body name="a" pos="0 0 .5"><freejoint/><geom type="sphere" size=".1"/>
    <body pos=".2 0 0"><joint name="h" axis="0 1 0" stiffness="3" springyield="8"/><geom type="capsule" size=".03"
      fromto="0 0 0 .2 0 0"/></body></body>
  <body name="target" mocap="true" pos=".3 .2 1" quat=".7 0 .7 0"/></worldbody>
<equality><connect body1="a" body2="target" anchor="0 0 0" active="false"/></equality>
<actuator><motor name="m" joint="h" nsample="3" delay="0.01"/></actuator>
<sensor><jointpos joint="h" nsample="2" delay="0.005"/></sensor></mujoco>"""


@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_reset_state_is_make_data_in_every_field(dtype):
    """The per-environment reset (check_pos_vel, reset_where) gives a bad environment make_data's value in every
    field (its dtype kept, warning counters counted), and leaves a good one's every field as it was."""
    mjm = mujoco.MjModel.from_xml_string(RESET_XML)
    m = oracle.model_from_mujoco(mjm)
    assert m.nmocap and m.nhistory and m.nplastic and m.neq
    # on the host (numpy leaves: building and indexing them compiles nothing), floats of `dtype`
    ref = jax.tree.map(lambda x: np.asarray(x, dtype) if jp.issubdtype(x.dtype, jp.floating) else np.asarray(x),
                       io.make_data(m))  # fmt: skip
    # every field of both environments 7 (True), env 0's qpos NaN
    d = jax.tree.map(lambda x: np.full((2,) + x.shape, 7, x.dtype), ref)
    d.qpos[0, 0] = np.nan
    d = d.replace(warning_number=np.zeros_like(d.warning_number))
    out = jax.jit(jax.vmap(lambda d: integrate.check_pos_vel(m, d)))(d)
    out2 = jax.jit(jax.vmap(lambda d, bad: integrate.reset_where(m, d, bad, types.Warning.BADQACC)))(
        d, np.asarray([True, False]))
    for got, warning in ((out, types.Warning.BADQPOS), (out2, types.Warning.BADQACC)):
        got = jax.tree.map(np.asarray, got)
        for (path, a), r, b in zip(jax.tree_util.tree_leaves_with_path(got), jax.tree.leaves(ref),
                                   jax.tree.leaves(d), strict=True):  # fmt: skip
            name = jax.tree_util.keystr(path)
            assert a.dtype == b.dtype, name
            np.testing.assert_array_equal(a[1], b[1], err_msg=name)
            if "warning_number" not in name:
                np.testing.assert_array_equal(a[0], r, err_msg=name)
        assert np.asarray(got.warning_number)[:, warning].tolist() == [1, 0]


def test_mujoco_bad_threshold():
    """Our divergence rule agrees with mju_isBad on the boundary values."""
    for x in (1e10, 1.0000001e10, -1.0000001e10, np.nan, np.inf, -np.inf, 0.0):
        assert bool(integrate._is_bad(jp.asarray([x]))) == bool(mujoco.mju_isBad(x)), x


def test_divergence_flags_and_counts_follow_mju_isbad():
    """check_pos_vel's one test over [qpos, qvel] and its one padded count, per environment: BADQPOS where a qpos
    value is bad by mju_isBad, else BADQVEL where a qvel value is (not both: MuJoCo's reset zeroes qvel), the reset
    where either is; every pair of boundary values (0, +-1e10, just above, +-inf, NaN) in qpos and qvel, counters
    incremented from nonzero values. bad_acc likewise on qacc."""
    mjm = MODELS["chain"]
    m = oracle.model_from_mujoco(mjm)
    values = [0.0, 1e10, -1e10, 1.0000001e10, -1.0000001e10, np.inf, -np.inf, np.nan]
    pairs = [(a, b) for a in values for b in values]
    n, rng = len(pairs), np.random.default_rng(1)
    ref = jax.tree.map(np.asarray, io.make_data(m))
    qpos = np.tile(np.asarray(mjm.qpos0), (n, 1)) + 0.01 * rng.normal(size=(n, mjm.nq))
    qvel = rng.normal(size=(n, mjm.nv))
    qpos[np.arange(n), rng.integers(0, mjm.nq, n)] = [a for a, _ in pairs]
    qvel[np.arange(n), rng.integers(0, mjm.nv, n)] = [b for _, b in pairs]
    wn0 = rng.integers(0, 5, (n, types.NWARNING)).astype(np.int32)
    d = jax.tree.map(lambda x: np.stack([x] * n), ref).replace(qpos=qpos, qvel=qvel, warning_number=wn0,
                                                              time=np.full(n, 1.5))  # fmt: skip

    @jax.jit
    @jax.vmap
    def check(d):
        return integrate.check_pos_vel(m, d), integrate.bad_acc(m, d.replace(qacc=d.qpos[: m.nv]))

    out, acc = jax.tree.map(np.asarray, check(d))
    bad_pos = np.array([any(mujoco.mju_isBad(x) for x in q) for q in qpos])
    bad_vel = np.array([any(mujoco.mju_isBad(x) for x in v) for v in qvel])
    want = wn0.copy()
    want[:, types.Warning.BADQPOS] += bad_pos
    want[:, types.Warning.BADQVEL] += ~bad_pos & bad_vel
    np.testing.assert_array_equal(out.warning_number, want)
    assert bad_pos.any() and (~bad_pos & bad_vel).any() and (~bad_pos & ~bad_vel).any()
    reset = bad_pos | bad_vel
    np.testing.assert_array_equal(out.qpos[reset], np.broadcast_to(ref.qpos, (reset.sum(), mjm.nq)))
    np.testing.assert_array_equal(out.qvel[reset], 0.0)
    np.testing.assert_array_equal(out.time, np.where(reset, 0.0, 1.5))
    np.testing.assert_array_equal(out.qpos[~reset], qpos[~reset])
    np.testing.assert_array_equal(out.qvel[~reset], qvel[~reset])
    np.testing.assert_array_equal(acc, [any(mujoco.mju_isBad(x) for x in q[: mjm.nv]) for q in qpos])


def test_warning_counts_equal_the_scatter():
    """data.count_warning (a padded one-hot row) and count_warnings (consecutive warnings in one row) add what the
    scatter `counts.at[w].add(n)` adds, for every warning, bool and integer increments, under vmap."""
    rng, POS = np.random.default_rng(2), int(types.Warning.BADQPOS)  # BADQPOS, BADQVEL: adjacent
    counts = rng.integers(0, 9, (5, types.NWARNING)).astype(np.int32)
    flags, ints = rng.random((types.NWARNING, 5)) < 0.5, rng.integers(0, 4, (types.NWARNING, 5)).astype(np.int32)

    @jax.jit
    @jax.vmap
    def counted(c, f, k):
        one = [data.count_warning(c, w, f[w]) for w in types.Warning] + [data.count_warning(c, w, k[w])
                                                                          for w in types.Warning]  # fmt: skip
        many = [data.count_warnings(c, 0, list(k)), data.count_warnings(c, POS, (f[POS], f[POS + 1]))]
        return one, many

    one, many = jax.tree.map(np.asarray, counted(counts, flags.T, ints.T))
    for w in types.Warning:
        np.testing.assert_array_equal(one[w], counts + np.eye(types.NWARNING, dtype=np.int32)[w] * flags[w][:, None])
        np.testing.assert_array_equal(one[types.NWARNING + w], counts + np.eye(types.NWARNING, dtype=np.int32)[w]
                                      * ints[w][:, None])  # fmt: skip
    np.testing.assert_array_equal(many[0], counts + ints.T)
    pair = counts.copy()
    pair[:, POS : POS + 2] += flags[POS : POS + 2].T
    np.testing.assert_array_equal(many[1], pair)


def test_autoreset_disabled_only_counts():
    mjm = MODELS["chain"]
    m = oracle.model_from_mujoco(mjm)
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | types.DisableBit.AUTORESET))
    d = io.make_data(m)
    d = d.replace(qpos=d.qpos.at[0].set(jp.nan))
    out = integrate.check_pos(m, d)
    assert int(out.warning_number[types.Warning.BADQPOS]) == 1
    assert np.isnan(np.asarray(out.qpos[0]))


# ---- RK4 ---------------------------------------------------------------------------------------------------

RK4_RTOL = 1e-12  # float64: one RK4 step is four forward passes; round-off only (no algorithmic residual)

SPIN_XML = """
<mujoco>
  <option timestep="0.05" integrator="RK4"><flag constraint="disable"/></option>
  <worldbody>
    <body pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .3 .5" mass="2"/>
      <geom type="sphere" size=".1" pos=".3 .1 0"/>
    </body>
    <body pos="1 0 1">
      <joint type="ball" damping=".1"/>
      <geom type="box" size=".1 .3 .5" mass="2" pos=".2 0 .1"/>
      <body pos=".4 0 0">
        <joint type="ball"/>
        <geom type="capsule" size=".05 .2" pos=".2 0 0" quat="1 0 1 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _rk4_models():
    chain = copy.copy(MODELS["chain"])
    chain.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    return {"chain": chain, "spin": mujoco.MjModel.from_xml_string(SPIN_XML)}


RK4_MODELS = _rk4_models()


@pytest.fixture(scope="module", params=["chain", pytest.param("spin", marks=pytest.mark.slow)])
def rk4_case(request):
    mjm = RK4_MODELS[request.param]
    return request.param, mjm, oracle.model_from_mujoco(mjm), jax.jit(integrate.rk4)


def test_rk4_matches_mujoco(rk4_case):
    """One RK4 step (mj_RungeKutta) from a forwarded state: ball/free rotations (Lie-group stages), act, time."""
    name, mjm, m, fn = rk4_case
    for seed in range(2):
        mjd = _forwarded(mjm, seed)
        mjd.qvel[:] *= 4.0  # fast rotations: the Lie-group terms are large
        mujoco.mj_forward(mjm, mjd)
        got = fn(m, oracle.data_from_mujoco(m, mjm, mjd))
        mujoco.mj_RungeKutta(mjm, mjd, 4)
        for f in ("qpos", "qvel", "act", "time", "qacc_warmstart"):
            want = getattr(mjd, f)
            atol = RK4_RTOL * max(1.0, np.abs(want).max(initial=0.0))
            np.testing.assert_allclose(
                np.asarray(getattr(got, f)), want, rtol=RK4_RTOL, atol=atol, err_msg=f"{name}.{f}"
            )


# ---- RK4 inside step: forward and the four stages as one loop ----------------------------------------------

RK4_SENSOR_XML = """
<mujoco>
  <option timestep="0.01" integrator="RK4"/>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body name="b" pos="0 0 .105">
      <freejoint/>
      <geom type="box" size=".1 .08 .1" mass="1"/>
      <site name="s" type="box" pos="0 0 -.1" size=".12 .1 .03"/>
      <body pos=".1 0 0">
        <joint name="h" type="hinge" axis="0 1 0" range="-40 40" damping=".2"/>
        <geom type="capsule" size=".03 .1" fromto="0 0 0 .2 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor name="m" joint="h" gear="2"/></actuator>
  <sensor>
    <jointpos joint="h"/><framepos objtype="site" objname="s"/>
    <velocimeter site="s"/><jointvel joint="h"/><subtreelinvel body="b"/>
    <accelerometer site="s"/><touch site="s"/><actuatorfrc actuator="m"/>
  </sensor>
</mujoco>
"""
RK4_STEP_RTOL = 1e-9  # float64, 10 steps with contacts and a joint limit: solver round-off carried over the steps


@pytest.mark.slow  # a full RK4 step with contacts and sensors: ~160 s to compile under load 12
@pytest.mark.parametrize("rk4_loop", ["merged", "split"])
def test_rk4_step_with_sensors_matches_mujoco(rk4_loop):
    """`step` with RK4, forward and the stages as one loop (`integrate.rk4_forward`, Config.rk4_loop "merged") or
    two: the state after each of 10 mj_steps (box resting on and sliding over the plane, hinge against its limit)
    and the sensors (position, velocity and acceleration stages: those of the step's first stage, as mj_step
    leaves them)."""
    mjm = mujoco.MjModel.from_xml_string(RK4_SENSOR_XML)
    m = mjl.configure(oracle.model_from_mujoco(mjm), rk4_loop=rk4_loop)
    assert integrate.rk4_merged(m) == (rk4_loop == "merged")
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = [0.3, -0.1, 0.0, 0.5, 1.0, -0.4, 2.0]
    mjd.ctrl[:] = 0.7
    mujoco.mj_forward(mjm, mjd)
    d = oracle.data_from_mujoco(m, mjm, mjd)
    step = jax.jit(mjl.step)
    for t in range(10):
        d = step(m, d)
        mujoco.mj_step(mjm, mjd)
        for f in ("qpos", "qvel", "qacc_warmstart", "sensordata", "time"):
            want = getattr(mjd, f)
            np.testing.assert_allclose(np.asarray(getattr(d, f)), want, rtol=RK4_STEP_RTOL,
                                       atol=RK4_STEP_RTOL * max(1.0, np.abs(want).max()), err_msg=f"{f}, step {t}")
    assert mjd.ncon > 0 and float(mjd.sensordata[14]) > 0  # the case has contacts and the touch sensor reads them


@pytest.mark.slow  # a gradient through RK4 steps with contacts: minutes to compile on the 2-core machine
def test_rk4_step_gradient_matches_finite_differences():
    """Reverse mode through `step`'s merged RK4 loop (the sensor stages under `lax.cond`, the implicit solver
    gradient in every stage) against centred differences of the same float64 rollout (5 steps, in contact)."""
    mjm = mujoco.MjModel.from_xml_string(RK4_SENSOR_XML)
    m = mjl.configure(oracle.model_from_mujoco(mjm), rk4_loop="merged")
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    d0 = oracle.data_from_mujoco(m, mjm, mjd)

    def loss(qvel, ctrl):
        def body(d, _):
            return mjl.step(m, d), None

        d, _ = jax.lax.scan(body, d0.replace(qvel=qvel, ctrl=ctrl), None, length=5)
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2) + jp.sum(d.sensordata**2)

    qvel = jp.asarray([0.3, -0.1, 0.0, 0.5, 1.0, -0.4, 2.0])
    ctrl = jp.asarray([0.7])
    g_qvel, g_ctrl = jax.jit(jax.grad(loss, argnums=(0, 1)))(qvel, ctrl)
    f = jax.jit(loss)
    eps = 1e-6
    for j in (0, 2, 6):
        e = jp.zeros(m.nv).at[j].set(eps)
        fd = (f(qvel + e, ctrl) - f(qvel - e, ctrl)) / (2 * eps)
        np.testing.assert_allclose(float(g_qvel[j]), float(fd), rtol=1e-5, atol=1e-7)
    fd = (f(qvel, ctrl + eps) - f(qvel, ctrl - eps)) / (2 * eps)
    np.testing.assert_allclose(float(g_ctrl[0]), float(fd), rtol=1e-5, atol=1e-7)


def test_rk4_loop_config_selects_the_merged_step():
    """Config.rk4_loop: validated; "merged" selects the one-loop step for RK4 models only, and not with
    exact_reset (which keeps the two passes); "auto" is the default (the split step, differentiated through the
    merged one)."""
    with pytest.raises(ValueError, match="rk4_loop"):
        mjl.Config(rk4_loop="fused")
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(RK4_SENSOR_XML))
    assert m.config.rk4_loop == "auto" and not integrate.rk4_merged(m) and integrate.rk4_merged(m, derivatives=True)
    assert not integrate.rk4_merged(mjl.configure(m, rk4_loop="split"), derivatives=True)
    assert integrate.rk4_merged(mjl.configure(m, rk4_loop="merged"))
    assert not integrate.rk4_merged(mjl.configure(m, rk4_loop="merged", exact_reset=True))
    euler = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(RK4_SENSOR_XML.replace('integrator="RK4"', "")))
    assert not integrate.rk4_merged(mjl.configure(euler, rk4_loop="merged"))


def _optimised_ops(compiled) -> collections.Counter:
    """The operations of a compiled program's optimised HLO by opcode, parameters left out."""
    ops = re.findall(r" = \S+ ([a-z\-]+)\(", compiled.as_text())
    return collections.Counter(op for op in ops if op != "parameter")


def test_rk4_loop_auto_compiles_the_split_step_when_not_differentiated():
    """Config.rk4_loop "auto" (the default) around a step that is not differentiated: the jitted step compiles to
    the split step's operations (XLA's optimised HLO, opcode for opcode, fusions included; only the parameters of
    some computations differ: the custom_jvp's call is inlined) and computes the same Data bitwise."""
    base = mjl.load_mjcf_string(RK4_LIMIT_XML)
    d0 = mjl.make_data(base).replace(qpos=jp.asarray([0.36]), qvel=jp.asarray([1.5]))
    ops, out = {}, {}
    for loop in ("split", "auto"):
        m = mjl.configure(base, rk4_loop=loop)
        compiled = jax.jit(lambda d, m=m: mjl.step(m, d)).lower(d0).compile()
        ops[loop], out[loop] = _optimised_ops(compiled), compiled(d0)
    assert ops["auto"] == ops["split"] and ops["split"]["fusion"] > 0
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(y), np.asarray(x)), out["split"], out["auto"])


# A pendulum against its joint limit (a constraint row: the solver's implicit gradient in every RK4 stage) with a
# motor and a sensor (stage 1's sensors run under the merged loop's lax.cond).
RK4_LIMIT_XML = """<mujoco>
  <option timestep="0.01" integrator="RK4"/>
  <worldbody>
    <body pos="0 0 1"><joint name="h" type="hinge" axis="0 1 0" range="-20 20" damping=".3"/>
      <geom type="capsule" size=".04" fromto="0 0 0 .3 0 -.1"/></body>
  </worldbody>
  <actuator><motor joint="h" gear="3"/></actuator>
  <sensor><jointpos joint="h"/></sensor>
</mujoco>"""
# Reverse mode through the split step's values and the merged step's (rk4_loop "auto") against the split step's own
# gradient: the same arithmetic in another order (the stage loop of four instead of one forward pass and a loop of
# three), float64 round-off on gradients of order 1-10.
RK4_GRAD_ROUNDOFF = 1e-12


@pytest.mark.slow  # CI time: 39 s on a quiet 2-core CPU (two RK4 gradients compile)
def test_rk4_loop_auto_is_split_values_and_merged_derivatives():
    """Config.rk4_loop "auto": `step` returns the split step's values bitwise, and `jax.grad` of a 3-step rollout
    (with respect to qvel, ctrl and a model float) goes through the merged loop (its jaxpr holds one forward pass's
    scan over four stages) and equals the split step's gradient to round-off."""
    base = mjl.load_mjcf_string(RK4_LIMIT_XML)
    split, auto = mjl.configure(base, rk4_loop="split"), mjl.configure(base, rk4_loop="auto")
    assert integrate.rk4_merged(auto, derivatives=True) and not integrate.rk4_merged(auto)
    assert not integrate.rk4_merged(split, derivatives=True)
    d0 = mjl.make_data(base).replace(qpos=jp.asarray([0.36]), qvel=jp.asarray([1.5]))  # past the limit (20 deg)
    step = jax.jit(mjl.step)
    a, b = step(split, d0), step(auto, d0)
    assert int(a.nefc) == 1
    jax.tree.map(lambda x, y: np.testing.assert_array_equal(np.asarray(y), np.asarray(x)), a, b)

    def loss(m, qvel, ctrl, damping):
        d = d0.replace(qvel=qvel, ctrl=ctrl)
        m = m.replace(dof_damping=damping)
        for _ in range(3):
            d = mjl.step(m, d)
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2) + jp.sum(d.sensordata**2)

    args = (d0.qvel, jp.asarray([0.4]), base.dof_damping)
    grad = jax.jit(jax.grad(loss, argnums=(1, 2, 3)))
    ga, gb = grad(split, *args), grad(auto, *args)
    for x, y in zip(ga, gb):
        assert np.all(np.isfinite(x)) and np.abs(x).max() > 0
        np.testing.assert_allclose(y, x, rtol=0, atol=RK4_GRAD_ROUNDOFF * max(1.0, float(np.abs(x).max())))
    # the merged loop under grad: one scan of length 4 per step in the differentiated program, none of length 3
    text = str(jax.make_jaxpr(jax.grad(loss, argnums=1))(auto, *args))
    assert "length=4" in text and "length=3" not in text


def _scan_loss(m, d0, steps):
    """A rollout of `steps` steps over a control sequence (steps, nu) with `lax.scan` from d0 (closed over, not
    differentiated: the scan's carry starts without a tangent, as in a user's trajectory loss)."""

    def loss(ctrl):
        def body(d, u):
            return mjl.step(m, d.replace(ctrl=u)), None

        d, _ = jax.lax.scan(body, d0, ctrl)
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2) + jp.sum(d.sensordata**2)

    return loss


def test_rk4_loop_auto_traces_the_merged_step_once_under_a_scan(monkeypatch):
    """Config.rk4_loop "auto" under `jax.grad` of a `lax.scan` rollout: JAX's fixpoint over the carries' tangents
    runs the custom_jvp rule twice (the Data's tangents zero, then all of them); the rule gives every float leaf of
    the Data a tangent and jits the merged step, so the second round reuses the first's trace: the merged step is
    traced once (it was twice, and its linearisation ran twice: the 50-step ant's trace 10.6 -> 4.6 CPU-s)."""
    from mjx_lite.pipeline import step as step_mod  # noqa: PLC0415

    calls = []
    merged = step_mod._step_merged

    def counted(m, d):
        calls.append(1)
        return merged(m, d)

    monkeypatch.setattr(step_mod, "_step_merged", counted)
    m = mjl.load_mjcf_string(RK4_LIMIT_XML)
    d0 = mjl.make_data(m).replace(qpos=jp.asarray([0.36]), qvel=jp.asarray([1.5]))
    ctrl = jp.full((3, m.nu), 0.4)
    text = str(jax.make_jaxpr(jax.grad(_scan_loss(m, d0, 3)))(ctrl))
    assert len(calls) == 1 and "length=4" in text


@pytest.mark.slow  # CI time: ~40 s on a quiet 2-core CPU (two RK4 gradients and two jvps compile)
def test_rk4_loop_auto_scan_gradient_and_ctrl_jvp_equal_the_split_step():
    """Config.rk4_loop "auto" against "split" where the rule's zero tangents for the Data matter: `jax.grad` of a
    `lax.scan` rollout from an undifferentiated Data, and a forward-mode `jax.jvp` of one step with respect to ctrl
    alone (the other leaves' tangents zeros in the rule; forward mode through the solver needs `gradients`
    "unrolled"), each equal to round-off."""
    base = mjl.load_mjcf_string(RK4_LIMIT_XML)
    split, auto = mjl.configure(base, rk4_loop="split"), mjl.configure(base, rk4_loop="auto")
    d0 = mjl.make_data(base).replace(qpos=jp.asarray([0.36]), qvel=jp.asarray([1.5]))  # past the limit (20 deg)
    ctrl = jp.asarray([[0.4], [-0.2], [0.3]])
    g = {k: np.asarray(jax.jit(jax.grad(_scan_loss(mm, d0, 3)))(ctrl)) for k, mm in (("split", split), ("auto", auto))}
    assert np.all(np.isfinite(g["split"])) and np.abs(g["split"]).max() > 0
    scale = max(1.0, float(np.abs(g["split"]).max()))
    np.testing.assert_allclose(g["auto"], g["split"], rtol=0, atol=RK4_GRAD_ROUNDOFF * scale)

    def one(mm):
        def f(u):
            d = mjl.step(mm, d0.replace(ctrl=u))
            return d.qpos, d.qvel, d.sensordata

        return jax.jit(lambda u, t: jax.jvp(f, (u,), (t,)))(jp.asarray([0.4]), jp.asarray([1.0]))[1]

    ts, ta = (one(mjl.configure(mm, gradients="unrolled")) for mm in (split, auto))
    assert np.abs(ts[1]).max() > 0  # qvel's (the sensor reads the step's starting qpos: its tangent is zero)
    for x, y in zip(ts, ta):
        assert np.all(np.isfinite(x))
        np.testing.assert_allclose(y, x, rtol=0, atol=RK4_GRAD_ROUNDOFF * max(1.0, float(np.abs(x).max())))
