"""pid and dcmotor actuators (MuJoCo 4's multi-input actuators) and actuator delays (nsample/delay/interp control
history) against MuJoCo 4.0 in float64: compiled fields (shortcuts, classes, <general> spelling, nominal-point motor
constants), MuJoCo's load-time errors, trajectories under each integrator (qpos, qvel, act, actuator_force and
the history buffers every step) and gradients of a rollout."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from tests import oracle

TRAJ_ATOL = 1e-9  # float64 round-off accumulated over the trajectory (states O(1))
IMPLICIT_ATOL = 1e-8  # implicit integrators: LU vs MuJoCo's factorisation, amplified over the trajectory
GRAD_RTOL = 1e-6  # reverse-mode gradient against central differences (step 1e-6, float64)
STEPS = 200

WORLD = """<worldbody>
  <body pos="0 0 1"><joint name="j" type="hinge" axis="0 1 0" damping="0.05"/>
    <geom type="capsule" size="0.05" fromto="0 0 0 0.3 0 0" mass="1"/>
    <body pos="0.3 0 0"><joint name="s" type="slide" axis="1 0 0" range="-.2 .3" limited="false"/>
      <geom type="sphere" size="0.06" mass="0.5"/></body></body>
  <body pos="1 0 1"><joint name="b" type="ball" damping="0.1"/>
    <geom type="box" size="0.1 0.05 0.02" pos="0.1 0 0" mass="0.3"/></body>
  <body pos="2 0 1"><joint name="k" type="hinge" axis="0 0 1"/>
    <geom type="box" size="0.2 0.05 0.02" pos="0.2 0 0" mass="0.4"/></body>
</worldbody>"""

# every state and input kind: pid with integral (anti-windup), slew limit and [pos vel ff] inputs with their own
# ranges, pid with dampratio, pid on a ball joint (setpoint on the circle); dcmotors with current (inductance),
# thermal resistance change, LuGre friction, cogging, the on-board controller with integral and slew states,
# saturation, and a stateless voltage-driven motor
ACTUATORS = """<actuator>
  <pid joint="j" kp="20" kv="1" ki="5" imax="0.3" slewmax="3" input="pos vel ff" velrange="-1 1" ffrange="-.5 .5"/>
  <pid joint="s" kp="30" dampratio="0.7"/>
  <pid joint="b" kp="3" ki="1" slewmax="2" gear="0 0 1"/>
  <dcmotor joint="k" motorconst="0.05 0.06" resistance="2" inductance="0.01" thermal="10 5 0 0.004 25 20"
           lugre="100 2 0.05 0.08 0.1" cogging="0.01 4 0.3"/>
  <dcmotor joint="j" motorconst="0.05" resistance="2" inductance="0.01" input="pos vel"
           controller="2 0.5 0.1 5 1 12"/>
  <dcmotor joint="s" motorconst="0.2" resistance="1" input="pos vel ff" controller="20 0 1" saturation="0.5"/>
  <dcmotor joint="k" motorconst="0.1" resistance="3"/>
</actuator>"""


def _xml(integrator="Euler", body=ACTUATORS, timestep=0.002):
    # no constraints (the stage under test is actuation; a smaller traced graph keeps these tests cheap)
    option = f'<option timestep="{timestep}" integrator="{integrator}"><flag constraint="disable"/></option>'
    return f"<mujoco>{option}{WORLD}{body}</mujoco>"


def _ctrls(nu, steps, seed=0):
    rng = np.random.default_rng(seed)
    return np.cumsum(rng.normal(0, 0.05, (steps, nu)), 0) + rng.normal(0, 0.5, nu)


@pytest.fixture(scope="module")
def rollout():
    """jit-compiled rollout shared by the tests: (m, d, ctrls) -> stacked (qpos, qvel, act, actuator_force)."""

    def run(m, d, ctrls):
        def body(d, u):
            d = mjl.step(m, d.replace(ctrl=u))
            return d, (d.qpos, d.qvel, d.act, d.actuator_force)

        return jax.lax.scan(body, d, ctrls)[1]

    return jax.jit(run)


def _mujoco_rollout(mjm, ctrls):
    mjd = mujoco.MjData(mjm)
    out = {k: [] for k in ("qpos", "qvel", "act", "actuator_force")}
    for u in ctrls:
        mjd.ctrl[:] = u
        mujoco.mj_step(mjm, mjd)
        for k in out:
            out[k].append(getattr(mjd, k).copy())
    return [np.asarray(out[k]) for k in ("qpos", "qvel", "act", "actuator_force")]


def _check_trajectory(xml, rollout, atol):
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjl.load_mjcf_string(xml)
    ctrls = _ctrls(mjm.nu, STEPS)
    theirs = _mujoco_rollout(mjm, ctrls)
    ours = rollout(m, mjl.make_data(m), jp.asarray(ctrls))
    assert np.abs(theirs[2]).max() > 0.1, "the activation states should move"
    for name, a, b in zip(("qpos", "qvel", "act", "actuator_force"), ours, theirs):
        np.testing.assert_allclose(np.asarray(a), b, atol=atol, rtol=0, err_msg=name)


def test_compiled_fields():
    xml = _xml()
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert (m.nu, m.nactuator, m.na) == (mjm.nu, mjm.nactuator, mjm.na)
    assert m.nu > m.nactuator  # multi-input control blocks
    assert oracle.compare_models(m, mjm) == []


@pytest.mark.parametrize("integrator", ["Euler", pytest.param("implicitfast", marks=pytest.mark.slow),
                                        pytest.param("RK4", marks=pytest.mark.slow),
                                        pytest.param("implicit", marks=pytest.mark.slow)])  # fmt: skip
def test_trajectory(rollout, integrator):
    _check_trajectory(_xml(integrator), rollout, TRAJ_ATOL if integrator in ("Euler", "RK4") else IMPLICIT_ATOL)


CLASSES = {
    "pid_classes": '<default><pid kp="5" ki="1" imax="3"/><default class="c"><pid kv="2" slewmax="4"/></default>'
    '</default><actuator><pid joint="j"/><pid joint="s" class="c" kp="7"/>'
    '<pid joint="j" class="c" dampratio="1" ki="0"/></actuator>',
    "dcmotor_classes": '<default><dcmotor motorconst="0.1" resistance="3"/><default class="c">'
    '<dcmotor inductance="0.01" thermal="1 2"/></default></default><actuator><dcmotor joint="j"/>'
    '<dcmotor joint="s" class="c" resistance="5"/><dcmotor joint="j" class="c" input="pos vel" controller="1 2 3"/>'
    "</actuator>",
    "dcmotor_nominal": '<actuator><dcmotor joint="j" nominal="12 0.5 100"/>'
    '<dcmotor joint="s" nominal="12 0.5 100" damping="0.01"/><dcmotor joint="j" nominal="24 0 100" resistance="1"'
    ' damping="0.1"/><dcmotor joint="j" motorconst="0.1" resistance="1" saturation="0 3 200"/></actuator>',
    "pid_ranges": '<actuator><pid joint="s" kp="10" inheritrange="1"/><pid joint="j" posrange="-1 1" '
    'velrange="-2 2" ffrange="-1 0" input="pos vel ff"/></actuator>',
    "general_pid": '<actuator><general joint="j" dyntype="pid" gaintype="pid" biastype="affine" gainprm="1" '
    'dynprm="2 3" biasprm="0 -5 -1" input="pos vel"/></actuator>',
    "general_dcmotor": '<actuator><general joint="j" dyntype="dcmotor" gaintype="dcmotor" biastype="dcmotor" '
    'gainprm="2 0.1" dynprm="0.01" actearly="true"/></actuator>',
    "dcmotor_no_input": '<actuator><dcmotor joint="j" motorconst="0.1" resistance="1" input="none" '
    'cogging="0.1 3 0"/></actuator>',
}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_compile_variants(name):
    xml = _xml(body=CLASSES[name])
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert (m.nu, m.nactuator, m.na) == (mjm.nu, mjm.nactuator, mjm.na)
    assert oracle.compare_models(m, mjm) == []


BAD = {
    "pid_integral_without_pos": ('<pid joint="j" ki="1" input="vel"/>', "input"),
    "pid_input_order": ('<pid joint="j" input="vel pos"/>', "input"),
    "pid_input_voltage": ('<pid joint="j" input="voltage"/>', "input"),
    "pid_kv_and_dampratio": ('<pid joint="j" kv="1" dampratio="1"/>', "dampratio"),
    "general_pid_bias": ('<general joint="j" gaintype="pid"/>', "biastype"),
    "dcmotor_no_resistance": ('<dcmotor joint="j" motorconst="0.1"/>', "resistance"),
    "dcmotor_no_motorconst": ('<dcmotor joint="j" resistance="1"/>', "motorconst"),
    "dcmotor_controller_no_motorconst": ('<dcmotor joint="j" resistance="1" input="pos"/>', "motorconst"),
    "dcmotor_integral_without_pos": ('<dcmotor joint="j" motorconst="1" resistance="1" input="vel" '
                                     'controller="0 1"/>', "controller"),
    "delay_without_buffer": ('<motor joint="j" delay="0.01"/>', "delay"),
    "history_without_input": ('<dcmotor joint="j" motorconst="1" resistance="1" input="none" nsample="2"/>',
                              "nsample"),
    "history_too_long": ('<motor joint="j" nsample="16777217"/>', "nsample"),  # at most 2^24 (fuzzed: 2^31 - 1)
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_errors_match_mujoco(name):
    body, attribute = BAD[name]
    oracle.assert_both_refuse(_xml(body=f"<actuator>{body}</actuator>"), attribute)


@pytest.mark.parametrize("steps", [1, pytest.param(40, marks=pytest.mark.slow)])
def test_gradient_matches_central_differences(steps):
    """d(state after `steps` steps)/d(controls, kp, motor constants) along a random direction, projected on a random
    vector, from a state with every actuator state active (MuJoCo's after 50 steps): finite, and equal to central
    differences of our own rollout."""
    xml = _xml()
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    for u in _ctrls(mjm.nu, 50, seed=3):
        mjd.ctrl[:] = u
        mujoco.mj_step(mjm, mjd)
    assert np.all(mjd.act != 0)
    m0 = mjl.load_mjcf_string(xml)
    d0 = mjl.make_data(m0).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), act=jp.asarray(mjd.act))
    # the directions built on the host (eagerly, every update compiled a program of its own)
    ctrls = np.asarray(_ctrls(m0.nu, steps, seed=1))
    rng = np.random.default_rng(2)
    dctrl = rng.normal(size=ctrls.shape)
    dbias = np.zeros(np.shape(m0.actuator_biasprm))
    dbias[:, 1] = rng.normal(size=m0.nactuator)
    dgain = np.zeros(np.shape(m0.actuator_gainprm))
    dgain[3:, 1] = 0.01 * rng.normal(size=m0.nactuator - 3)
    w = rng.normal(size=m0.nq + m0.nv + m0.na)

    def loss(eps):
        m = m0.replace(actuator_biasprm=m0.actuator_biasprm + eps * dbias,
                       actuator_gainprm=m0.actuator_gainprm + eps * dgain)  # fmt: skip

        def body(d, u):
            return mjl.step(m, d.replace(ctrl=u)), None

        d = jax.lax.scan(body, d0, ctrls + eps * dctrl)[0]
        return jp.concatenate([d.qpos, d.qvel, d.act]) @ w

    # the central differences from the values of the gradient's own program (one compile)
    value_and_grad = jax.jit(jax.value_and_grad(loss))
    grad = float(value_and_grad(np.float64(0.0))[1])
    h = 1e-6
    central = (float(value_and_grad(np.float64(h))[0]) - float(value_and_grad(np.float64(-h))[0])) / (2 * h)
    assert np.isfinite(grad) and abs(grad) > 1e-3
    np.testing.assert_allclose(grad, central, rtol=GRAD_RTOL)


# delayed controls: zero-order hold, linear and cubic reads, multi-input blocks (pid, dcmotor), a buffer without a
# delay, a negative delay (MuJoCo reads the buffer ahead of time: the newest sample), a clamped delayed control
DELAYED = """<actuator>
  <motor joint="j" delay="0.007" nsample="6" interp="linear" ctrlrange="-1 1"/>
  <position joint="s" kp="30" kv="1" delay="0.004" nsample="4" interp="cubic"/>
  <pid joint="k" kp="5" ki="2" slewmax="5" input="pos vel" delay="0.006" nsample="5"/>
  <dcmotor joint="j" motorconst="0.05" resistance="2" inductance="0.01" input="pos vel" controller="2 0.5 0.1"
           delay="0.002" nsample="3"/>
  <general joint="k" dyntype="filter" dynprm="0.05" nsample="3"/>
  <motor joint="s" delay="-0.01" nsample="2"/>
</actuator>"""


@pytest.mark.parametrize("integrator", ["Euler", pytest.param("RK4", marks=pytest.mark.slow),
                                        pytest.param("implicitfast", marks=pytest.mark.slow)])  # fmt: skip
def test_delayed_controls(integrator):
    xml = _xml(integrator, DELAYED)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    assert (m.nhistory, m.nu) == (mjm.nhistory, mjm.nu)
    assert oracle.compare_models(m, mjm) == []
    d0, mjd = mjl.make_data(m), mujoco.MjData(mjm)
    np.testing.assert_array_equal(np.asarray(d0.history), mjd.history)
    ctrls = _ctrls(mjm.nu, STEPS)
    ref = []
    for u in ctrls:
        mjd.ctrl[:] = u
        mujoco.mj_step(mjm, mjd)
        ref.append(np.concatenate([mjd.qpos, mjd.qvel, mjd.act, mjd.actuator_force, mjd.history]))

    def run(d, ctrls):
        def body(d, u):
            d = mjl.step(m, d.replace(ctrl=u))
            return d, jp.concatenate([d.qpos, d.qvel, d.act, d.actuator_force, d.history])

        return jax.lax.scan(body, d, ctrls)[1]

    ours = np.asarray(jax.jit(run)(d0, jp.asarray(ctrls)))
    atol = TRAJ_ATOL if integrator != "implicitfast" else IMPLICIT_ATOL
    np.testing.assert_allclose(ours, np.asarray(ref), atol=atol, rtol=0)


F32_ATOL = 1e-4  # float32 rollout of 100 steps vs float64 MuJoCo (states O(10))


@pytest.mark.slow
def test_delayed_controls_float32():
    """In float32 the accumulated time misses the sample times by round-off: reads and inserts still find them
    (without a tolerance, zero-order-hold reads slipped by one sample: errors of 0.7)."""
    xml = _xml("Euler", DELAYED)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    mjd = mujoco.MjData(mjm)
    ctrls = _ctrls(mjm.nu, 100)
    ref = []
    for u in ctrls:
        mjd.ctrl[:] = u
        mujoco.mj_step(mjm, mjd)
        ref.append(np.concatenate([mjd.qpos, mjd.qvel, mjd.act]))

    m32, d32 = oracle.cast_floats(m, jp.float32), oracle.cast_floats(mjl.make_data(m), jp.float32)

    def run(d, ctrls):
        def body(d, u):
            d = mjl.step(m32, d.replace(ctrl=u))
            return d, jp.concatenate([d.qpos, d.qvel, d.act])

        return jax.lax.scan(body, d, ctrls)[1]

    ours = jax.jit(run)(d32, np.asarray(ctrls, np.float32))
    assert ours.dtype == jp.float32
    np.testing.assert_allclose(np.asarray(ours), np.asarray(ref), atol=F32_ATOL, rtol=0)
