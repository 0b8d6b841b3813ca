"""Orientation (so3) actuators (MuJoCo 4's geodesic servo on a ball joint or a site with a refsite) against MuJoCo
4.0 in float64: compiled fields (nout, per-output gear/acc0/length0, dampratio, input charts, classes, the
integrator variant), MuJoCo's load-time errors, mj_forward at random states and controls (expmap and quat inputs,
clamped and unclamped), qDeriv, 100-step trajectories, gradients vs central differences (also at zero rotation,
where the exponential and logarithm maps need their series) and float32."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import derivative, forward
from tests import oracle

FWD_ATOL = 1e-11  # one mj_forward, float64 round-off (relative to each field's scale)
QDERIV_ATOL = 1e-11  # d(qfrc_passive + qfrc_actuator)/d qvel vs MuJoCo's qDeriv (implicitfast), float64
TRAJ_ATOL = 1e-9  # 100 steps, float64 round-off accumulated over the trajectory (states O(1))
GRAD_RTOL = 1e-5  # reverse-mode gradient vs central differences (step 1e-6, float64)
F32_ATOL = 2e-3  # float32 forward vs float64 MuJoCo (forces O(10))

WORLD = """<worldbody>
  <body name="b" pos="0 0 1" quat="0.8 0.3 0.1 0.2">
    <joint name="ball" type="ball" damping="0.1"/>
    <geom type="capsule" fromto="0 0 0 0.3 0.1 -0.5" size="0.05"/>
    <site name="s" pos="0.1 0 0" quat="0.7 0.2 -0.3 0.1"/>
    <body name="c" pos="0.3 0.1 -0.5">
      <joint name="hinge" axis="0 1 0"/>
      <geom type="box" size="0.05 0.1 0.2"/>
      <site name="s3" pos="0 0.1 0" quat="0.5 0.5 0.5 0.5"/>
    </body>
  </body>
  <site name="r" quat="0.9 0.1 0.2 0.3"/>
  <body name="f" pos="1 0 1"><freejoint/><geom size="0.1 0.2 0.3" type="box"/><site name="s2" quat="0.6 0 0.8 0"/>
  </body>
</worldbody>"""

# every kind: expmap on a ball joint with dampratio, the integrator variant (3 act states, actearly, actrange)
# spelled as <general>, quat input on a site pair with a norm clamp and ctrlrange, two sites on one chain (shared
# dofs cleared), a free body's site against a world site with a clamp; single-output actuators interleaved
ACTUATORS = """<actuator>
  <orientation name="a0" joint="ball" kp="3" dampratio="1"/>
  <motor name="m" joint="hinge"/>
  <general name="a1" joint="ball" gaintype="so3" biastype="so3" gainprm="2" biasprm="0.5 -2 -0.3"
           dyntype="integrator" actearly="true" actrange="-1 1"/>
  <orientation name="a2" site="s" refsite="r" kp="2" kv="0.1" input="quat" forcerange="0 0.7" ctrlrange="-1 1"/>
  <orientation name="a3" site="s3" refsite="s" kp="4" dampratio="0.5"/>
  <position name="p" joint="hinge" kp="5" dampratio="1"/>
  <orientation name="a4" site="s2" refsite="r" kp="2" kv="0.3" forcerange="0 0.5"/>
</actuator>
<sensor><actuatorpos actuator="a0"/><actuatorvel actuator="a2"/><actuatorfrc actuator="a1"/>
  <actuatorfrc actuator="m"/><actuatorpos actuator="p"/><actuatorfrc actuator="a4"/></sensor>"""


def _xml(integrator="Euler", body=ACTUATORS, clamp=True):
    if not clamp:
        body = body.replace(' forcerange="0 0.7"', "").replace(' forcerange="0 0.5"', "")
    option = f'<option integrator="{integrator}"><flag constraint="disable"/></option>'
    return f"<mujoco>{option}{WORLD}{body}</mujoco>"


def _state(mjm, mjd, rng, zero=False):
    """A random state (quaternions unit) and controls beyond the ranges (the clamps act); `zero`: qpos0, no
    velocity, identity targets (every geodesic error 0)."""
    mujoco.mj_resetData(mjm, mjd)
    if zero:
        return
    mujoco.mj_integratePos(mjm, mjd.qpos, rng.normal(size=mjm.nv) * 1.5, 1.0)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.ctrl[:] = rng.normal(size=mjm.nu) * 2.0
    mjd.act[:] = rng.normal(size=mjm.na)


@pytest.fixture(scope="module")
def models():
    xml = _xml()
    return mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(forward.forward)


def test_compiled_fields(models):
    m, mjm = models
    assert (m.nu, m.nactuator, m.nout, m.na) == (mjm.nu, mjm.nactuator, mjm.nout, mjm.na) == (18, 7, 17, 3)
    assert oracle.compare_models(m, mjm) == []
    np.testing.assert_array_equal(mjl.make_data(m).ctrl, mujoco.MjData(mjm).ctrl)  # quat inputs reset to identity


CLASSES = {
    "classes": '<default><orientation kp="5" kv="0.2"/><default class="c"><orientation input="quat" '
    'dampratio="0.3"/></default></default><actuator><orientation joint="ball"/>'
    '<orientation site="s2" refsite="r" class="c" kp="7"/><orientation joint="ball" class="c" input="expmap"/>'
    "</actuator>",
    "general": '<actuator><general joint="ball" gaintype="so3" biastype="so3" gainprm="3" biasprm="0.1 -3 -1" '
    'input="quat" ctrlrange="-2 2"/><general site="s3" refsite="r" gaintype="so3" biastype="so3" gainprm="1" '
    'biasprm="0 -1 0.5" dyntype="integrator" actdim="3"/></actuator>',
    "damping_armature": '<actuator><general joint="ball" gaintype="so3" biastype="so3" biasprm="0 -1" damping="0.3" '
    'armature="0.1"/></actuator>',  # MuJoCo stores them and applies neither to an so3 transmission
    "input_tokens": '<actuator><orientation joint="ball" input="vel"/><orientation site="s" refsite="r" input="pos"/>'
    "</actuator>",  # MuJoCo's reader: the input bits pos and vel read as the expmap and quat charts
    "sensors": '<actuator><orientation name="o" site="s" refsite="s3"/></actuator><sensor><actuatorpos actuator="o"/>'
    '<actuatorvel actuator="o"/><actuatorfrc actuator="o"/></sensor>',
}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_compile_variants(name):
    xml = _xml(body=CLASSES[name])
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert (m.nu, m.nactuator, m.nout, m.na) == (mjm.nu, mjm.nactuator, mjm.nout, mjm.na)
    assert oracle.compare_models(m, mjm) == []


ERRORS = {
    "hinge": ('<orientation joint="hinge"/>', "joint"),
    "no_refsite": ('<orientation site="s"/>', "refsite"),
    "forcerange": ('<orientation joint="ball" forcerange="-1 1"/>', "forcerange"),
    "quat_integrator": ('<general joint="ball" gaintype="so3" biastype="so3" gainprm="1" biasprm="0 -1" '
                        'dyntype="integrator" input="quat"/>', "input"),
    "mixed": ('<general joint="ball" gaintype="so3" biastype="affine"/>', "gaintype"),
    "kp": ('<general joint="ball" gaintype="so3" biastype="so3" gainprm="2" biasprm="0 -1"/>', "gainprm"),
    "dyntype": ('<general joint="ball" gaintype="so3" biastype="so3" dyntype="filter"/>', "dyntype"),
    "chart": ('<orientation joint="ball" input="pos vel"/>', "input"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_load_errors(name):
    """MuJoCo's so3 checks: both refuse the model, ours naming the attribute."""
    body, attribute = ERRORS[name]
    oracle.assert_both_refuse(_xml(body=f"<actuator>{body}</actuator>"), attribute)


FIELDS = ("actuator_length", "actuator_velocity", "actuator_force", "qfrc_actuator", "act_dot", "qacc", "sensordata")


def test_forward(models, fwd):
    """mj_forward at random states and controls (clamps active) and at zero rotation."""
    m, mjm = models
    mjd, rng = mujoco.MjData(mjm), np.random.default_rng(0)
    for k in range(4):
        _state(mjm, mjd, rng, zero=k == 0)
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, oracle.data_with_state(m, mjm, mjd))
        for f in FIELDS:
            oracle.close(getattr(d, f), getattr(mjd, f), FWD_ATOL, f"state {k}: {f}")
        moment = np.zeros((mjm.nout, mjm.nv))
        mujoco.mju_sparse2dense(moment, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
        oracle.close(d.actuator_moment, moment, FWD_ATOL, f"state {k}: actuator_moment")


@pytest.mark.slow
def test_qderiv():
    """The implicit integrators' d force / d qvel (unclamped: MuJoCo's test of a clamped force's norm against the
    bound is decided by rounding, see pipeline/derivative.py) vs MuJoCo's qDeriv after mj_step (implicitfast)."""
    xml = _xml("implicitfast", clamp=False)
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd, rng = mujoco.MjData(mjm), np.random.default_rng(1)
    qd = jax.jit(lambda d: derivative.qderiv(m, forward.forward(m, d), bias=False))
    for _ in range(2):
        _state(mjm, mjd, rng)
        d = oracle.data_with_state(m, mjm, mjd)
        mujoco.mj_step(mjm, mjd)
        theirs = np.zeros((mjm.nv, mjm.nv))
        for i in range(mjm.nv):
            adr = mjm.D_rowadr[i] + np.arange(mjm.D_rownnz[i])
            theirs[i, mjm.D_colind[adr]] = mjd.qDeriv[adr]
        oracle.close(qd(d), theirs, QDERIV_ATOL, "qDeriv")


@pytest.mark.parametrize("integrator, clamp", [("Euler", True), ("RK4", True), ("implicitfast", False),
                                               ("implicit", False)])
@pytest.mark.slow
def test_trajectory(integrator, clamp):
    """100 steps from a random state with random controls against mj_step: qpos, qvel, act, actuator_force."""
    xml = _xml(integrator, clamp=clamp)
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    _state(mjm, mjd, np.random.default_rng(2))
    mjd.qvel[:] *= 0.3
    d = oracle.data_with_state(m, mjm, mjd)

    def body(d, _):
        d = mjl.step(m, d)
        return d, (d.qpos, d.qvel, d.act, d.actuator_force)

    ours = jax.jit(lambda d: jax.lax.scan(body, d, None, length=100)[1])(d)
    theirs = {k: [] for k in ("qpos", "qvel", "act", "actuator_force")}
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
        for k in theirs:
            theirs[k].append(getattr(mjd, k).copy())
    assert np.abs(theirs["act"][-1]).max() > 0.1, "the integrator's setpoint should move"
    for name, a in zip(theirs, ours):
        oracle.close(a, np.asarray(theirs[name]), TRAJ_ATOL, name)


def _loss(m, d, steps=10):
    def run(ctrl, kp):
        mm = m.replace(actuator_gainprm=m.actuator_gainprm.at[:, 0].set(kp),
                       actuator_biasprm=m.actuator_biasprm.at[:, 1].set(-kp))  # fmt: skip
        dd = jax.lax.scan(lambda d, _: (mjl.step(mm, d), None), d.replace(ctrl=ctrl), None, length=steps)[0]
        return jp.sum(jp.sin(dd.qpos)) + jp.sum(dd.qvel**2) + jp.sum(dd.actuator_force)

    return run


@pytest.mark.slow
@pytest.mark.parametrize("zero", [False, True])
def test_gradient(models, zero):
    """d loss / d (ctrl, kp) of a 10-step rollout: finite and equal to central differences, also from zero rotation
    with identity targets (the series branches of the exponential and logarithm maps)."""
    m, mjm = models
    mjd = mujoco.MjData(mjm)
    _state(mjm, mjd, np.random.default_rng(3), zero=zero)
    if not zero:
        mjd.ctrl[:] *= 0.3  # unclamped controls: central differences across a ctrlrange kink would not agree
    d = oracle.data_with_state(m, mjm, mjd)
    f = _loss(m, d)
    ctrl, kp = jp.asarray(mjd.ctrl), m.actuator_gainprm[:, 0]
    g_ctrl, g_kp = jax.jit(jax.grad(f, argnums=(0, 1)))(ctrl, kp)
    assert np.all(np.isfinite(g_ctrl)) and np.all(np.isfinite(g_kp))
    fj, h = jax.jit(f), 1e-6
    so3 = np.nonzero(np.asarray(m.actuator_gaintype) == 4)[0]
    for i in (0, 4, 7, 12):  # expmap, integrator, quat (qw), site pair controls
        e = jp.zeros_like(ctrl).at[i].set(h)
        fd = (float(fj(ctrl + e, kp)) - float(fj(ctrl - e, kp))) / (2 * h)
        np.testing.assert_allclose(float(g_ctrl[i]), fd, rtol=GRAD_RTOL, atol=1e-8, err_msg=f"ctrl {i}")
    for i in so3[:3]:
        e = jp.zeros_like(kp).at[i].set(h)
        fd = (float(fj(ctrl, kp + e)) - float(fj(ctrl, kp - e))) / (2 * h)
        np.testing.assert_allclose(float(g_kp[i]), fd, rtol=GRAD_RTOL, atol=1e-8, err_msg=f"kp {i}")


@pytest.mark.slow
def test_float32(models):
    """The forward pass in float32 (the exponential and logarithm maps' thresholds included) against float64."""
    _, mjm = models
    mjd = mujoco.MjData(mjm)
    _state(mjm, mjd, np.random.default_rng(4))
    mujoco.mj_forward(mjm, mjd)
    with jax.enable_x64(False):
        m = mjl.load_mjcf_string(_xml())
        d = mjl.make_data(m)
        d = d.replace(qpos=jp.asarray(mjd.qpos, jp.float32), qvel=jp.asarray(mjd.qvel, jp.float32),
                      ctrl=jp.asarray(mjd.ctrl, jp.float32), act=jp.asarray(mjd.act, jp.float32))  # fmt: skip
        d = jax.jit(forward.forward)(m, d)
        assert d.actuator_force.dtype == jp.float32
        for f in ("actuator_length", "actuator_force", "qfrc_actuator"):
            oracle.close(np.asarray(getattr(d, f), np.float64), getattr(mjd, f), F32_ATOL, f)
