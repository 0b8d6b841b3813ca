"""Plastic springs (MuJoCo 4.0 `springyield` of joints and tendons): compiled fields, keyframes, Data.plastic of
mj_resetData, 100-step trajectories (qpos, qvel, plastic, qfrc_spring, energy) against mj_step with Euler and RK4
(RK4 and implicitfast slow), the state through interop, gradients against central differences, MuJoCo's load errors."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from tests import oracle

STEPS = 100
TRAJ_ATOL = 1e-9  # 100 float64 steps (round-off grows with the steps)
FD_RTOL = 1e-6  # gradient vs central differences (step 1e-6, float64) away from a yield switch

# a hinge (degrees), a slide and a ball joint with plastic springs, an elastic hinge, a fixed tendon with a
# dead band, a slack spatial tendon ("0 L": yields in tension at its upper bound only); gravity and initial
# velocities drive every reference past its yield in both directions. No collisions (CI time: the chain's capsule,
# box and sphere colliders; its links never touched, MuJoCo's trajectory is bitwise the same)
XML = """<mujoco><option timestep="0.005" integrator="{integrator}"><flag energy="enable"/></option>
<default><geom contype="0" conaffinity="0"/></default>
<worldbody><site name="anchor" pos="0 0 1.6"/>
<body name="a" pos="0 0 1"><joint name="h" axis="0 1 0" stiffness="3" springyield="8" springref="10" damping=".02"/>
  <geom type="capsule" size=".04" fromto="0 0 0 .3 0 0"/>
  <body name="b" pos=".3 0 0"><joint name="s" type="slide" axis="1 0 0" stiffness="40" springyield=".02"/>
    <geom type="box" size=".05 .05 .05"/>
    <body name="c" pos=".1 0 0"><joint name="ball" type="ball" stiffness=".5" springyield="12"/>
      <geom type="capsule" size=".03" fromto="0 0 0 0 0 -.25"/><site name="tip" pos="0 0 -.25"/>
      <body name="d" pos="0 0 -.25"><joint name="e" axis="1 0 0" stiffness="2"/>
        <geom type="sphere" size=".04" pos="0 .1 0"/></body></body></body></body></worldbody>
<tendon><fixed name="fx" stiffness="5" springlength="-.05 .05" springyield=".03"><joint joint="h" coef="1"/>
  <joint joint="e" coef="-.5"/></fixed>
  <spatial name="sp" stiffness="60" springlength="0 .95" springyield=".02"><site site="anchor"/><site site="tip"/>
  </spatial></tendon>
<keyframe><key qpos=".1 .01 1 0 0 0 .2" plastic=".05 .01 .9 .1 0 0"/></keyframe></mujoco>"""

QVEL0 = np.array([3.0, 0.8, 4.0, -3.0, 2.0, 5.0])


def _reference(mjm, steps=STEPS):
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = QVEL0
    out = []
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
        out.append(np.concatenate([mjd.qpos, mjd.qvel, mjd.plastic, mjd.qfrc_spring, mjd.energy]))
    return np.asarray(out)


def _ours(m, steps=STEPS):
    def body(d, _):
        d = mjl.step(m, d)
        return d, jp.concatenate([d.qpos, d.qvel, d.plastic, d.qfrc_spring, d.energy])

    d0 = mjl.make_data(m).replace(qvel=jp.asarray(QVEL0))
    return np.asarray(jax.jit(lambda d: jax.lax.scan(body, d, None, length=steps)[1])(d0))


@pytest.fixture(scope="module", params=["Euler", "RK4"])
def case(request):
    jax.config.update("jax_enable_x64", True)
    xml = XML.format(integrator=request.param)
    return mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)


def test_compiled_fields_and_reset_state(case):
    mjm, m = case
    assert oracle.compare_models(m, mjm) == []
    assert (m.nplastic, m.jnt_plasticadr.tolist(), m.tendon_plasticadr.tolist()) == (10, [0, 1, 2, -1], [6, 8])
    np.testing.assert_allclose(np.asarray(mjl.make_data(m).plastic), mujoco.MjData(mjm).plastic, atol=1e-15)
    np.testing.assert_allclose(np.asarray(m.key_plastic), mjm.key_plastic, atol=1e-15)


@pytest.mark.parametrize("integrator", ["Euler", pytest.param("RK4", marks=pytest.mark.slow)])  # CI time
def test_trajectory_matches_mujoco(integrator):
    """Every reference yields (hinge, slide and ball both ways, the fixed tendon's band shifted, the slack spatial
    tendon's upper bound moved): the whole trajectory, Data.plastic and the spring forces as mj_step's."""
    jax.config.update("jax_enable_x64", True)
    xml = XML.format(integrator=integrator)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    ref, ours = _reference(mjm), _ours(m)
    plastic = ref[:, mjm.nq + mjm.nv : mjm.nq + mjm.nv + mjm.nplastic]
    moved = np.abs(plastic[-1] - mujoco.MjData(mjm).plastic) > 1e-3
    assert moved[[0, 1, 6, 7, 9]].all() and moved[2:6].any(), moved  # each joint and tendon has yielded
    assert plastic[-1, 8] == 0.0  # the slack tendon's lower bound stays at 0
    np.testing.assert_allclose(ours, ref, atol=TRAJ_ATOL)


def test_state_through_interop(case):
    mjm, m = case
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    d = mjl.interop.from_mujoco(m, mjd)
    np.testing.assert_array_equal(np.asarray(d.plastic), mjd.plastic)
    back = mjl.interop.to_mujoco(m, d.replace(plastic=d.plastic + 0.25), mjm, forward=False)
    np.testing.assert_allclose(back.plastic, mjd.plastic + 0.25)


def test_load_errors_as_mujoco():
    for xml in (
        '<mujoco><worldbody><body><joint type="free" springyield="1"/><geom size=".1"/></body></worldbody></mujoco>',
        '<mujoco><worldbody><body><joint springyield="-1"/><geom size=".1"/></body></worldbody></mujoco>',
        '<mujoco><worldbody><body><joint springyield="1"/><geom size=".1"/></body></worldbody>'
        '<keyframe><key plastic="1 2"/></keyframe></mujoco>',
    ):
        with pytest.raises(ValueError):
            mujoco.MjModel.from_xml_string(xml)
        with pytest.raises(mjl.MJCFError):
            mjl.load_mjcf_string(xml)


@pytest.mark.slow
def test_implicitfast_trajectory_matches_mujoco():
    jax.config.update("jax_enable_x64", True)
    xml = XML.format(integrator="implicitfast")
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    np.testing.assert_allclose(_ours(m), _reference(mjm), atol=TRAJ_ATOL)


@pytest.mark.slow
def test_gradient_matches_central_differences():
    """d (final qpos + plastic) / d (initial qvel) over 30 Euler steps, through yielding references: equal to
    central differences of the same function (no yield switch within the FD step at this state)."""
    jax.config.update("jax_enable_x64", True)
    m = mjl.load_mjcf_string(XML.format(integrator="Euler"))
    d0 = mjl.make_data(m)

    def loss(v):
        d = jax.lax.fori_loop(0, 30, lambda _, d: mjl.step(m, d), d0.replace(qvel=v))
        return jp.sum(d.qpos * jp.arange(1, m.nq + 1)) + jp.sum(d.plastic * jp.arange(1, m.nplastic + 1))

    v = jp.asarray(QVEL0)
    grad = np.asarray(jax.jit(jax.grad(loss))(v))
    f = jax.jit(loss)
    h = 1e-6
    fd = np.array([(f(v.at[i].add(h)) - f(v.at[i].add(-h))) / (2 * h) for i in range(m.nv)])
    assert np.all(np.isfinite(grad)) and np.any(grad != 0)
    np.testing.assert_allclose(grad, fd, rtol=FD_RTOL, atol=FD_RTOL)
