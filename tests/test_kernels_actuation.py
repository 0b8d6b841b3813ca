"""The fused actuator stages against the XLA path and MuJoCo: mj_transmission of slide/hinge joint actuators in the
tree pass's kernel (kernels/tree.py) and mj_fwdActuation of stateless fixed/affine actuators as one kernel
(kernels/actuation.py), in float64 (Pallas' interpret mode on the CPU). Values equal the XLA stages' to round-off
and MuJoCo's to its tolerance; derivatives (through the XLA twins) equal the XLA path's.

One jitted function of the values on one small model, shared by the tests (CI time); the gradients' in the slow
selection.
"""

import sys

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import tree
from mjx_lite.types import Warning
from tests import oracle
from tests.kernel_checks import rel, twin_tracers

kernel_actuation = sys.modules["mjx_lite.pipeline.kernels.actuation"]  # (kernels.actuation is the stage's function)

# fused and XLA fields differ by float64 round-off only (qfrc_actuator: the product's summation order): relative to
# max(1, max |field|)
ROUNDOFF = 1e-12
# against MuJoCo C (float64; kinematics and velocities computed independently)
MUJOCO_TOL = 1e-10
# derivatives run through the XLA twins on both paths; they differ by the primal's round-off
GRAD_TOL = 1e-10

# a slide and two hinges; a clamped motor, a force-limited position servo, a velocity servo, a general actuator with
# affine gain and bias on a jointinparent transmission, an unclamped motor with a negative gear, and a motor in a
# disabled actuator group (its force 0); no contacts (the box and the sphere two bodies apart were a sphere-box pair:
# CI time, the fused program compiled the colliders', contact parameters' and rows' kernels in interpret mode for
# fields that no contact changes)
ACTUATORS = """
<mujoco>
  <option actuatorgroupdisable="3"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body pos="0 0 1">
      <joint name="s" type="slide" axis="1 0 0"/>
      <geom type="box" size=".1 .1 .1" mass="1"/>
      <body pos="0 0 -0.3">
        <joint name="h1" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <body pos="0 0 -0.3">
          <joint name="h2" type="hinge" axis="1 0 0"/>
          <geom type="sphere" size="0.05"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="s" gear="5" ctrllimited="true" ctrlrange="-1 1"/>
    <position joint="h1" kp="20" forcelimited="true" forcerange="-3 3"/>
    <velocity joint="h2" kv="2"/>
    <general jointinparent="h1" gear="2" gaintype="affine" gainprm="1 0.2 0.1" biastype="affine"
             biasprm="0.1 -1 -0.3"/>
    <motor joint="h2" gear="-1.5"/>
    <motor joint="s" group="3" gear="0.5"/>
  </actuator>
</mujoco>
"""
FIELDS = ("actuator_length", "actuator_moment", "actuator_velocity", "actuator_force", "qfrc_actuator")


def _stages(m, d):
    return fwd.fwd_actuation(m, fwd.fwd_velocity(m, fwd.fwd_position(m, d)))


def _values(m, d):
    """The fields (FIELDS, warning_number)."""
    out = _stages(m, d)
    return {n: getattr(out, n) for n in FIELDS + ("warning_number",)}


def _grads(m, d):
    """The gradient of a loss of the fields with respect to ctrl, qpos, qvel and the actuators' Model floats."""

    def loss(m, ctrl, qpos, qvel):
        out = _stages(m, d.replace(ctrl=ctrl, qpos=qpos, qvel=qvel))
        return jp.sum(jp.sin(out.qfrc_actuator)) + jp.sum(out.actuator_force**2) + jp.sum(jp.cos(out.actuator_length))

    g = jax.grad(loss, argnums=(0, 1, 2, 3))(m, d.ctrl, d.qpos, d.qvel)
    return dict(ctrl=g[1], qpos=g[2], qvel=g[3], actuator_gear=g[0].actuator_gear,
                actuator_gainprm=g[0].actuator_gainprm, actuator_biasprm=g[0].actuator_biasprm)  # fmt: skip


_run = jax.jit(jax.vmap(_values, in_axes=(None, 0)))
_run_grads = jax.jit(jax.vmap(_grads, in_axes=(None, 0)))


@pytest.fixture(scope="module")
def case():
    """MuJoCo's model, data of each state, our Model, the batch, and the fused path's values."""
    mjm = mujoco.MjModel.from_xml_string(ACTUATORS)
    m = oracle.model_from_mujoco(mjm)
    rng = np.random.default_rng(0)
    mjds, ds = [], []
    for i in range(3):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = rng.normal(size=mjm.nq) * 0.5
        mjd.qvel[:] = rng.normal(size=mjm.nv)
        mjd.ctrl[:] = rng.normal(size=mjm.nu) * 2.0  # beyond the motor's ctrlrange at times
        if i == 2:
            mjd.ctrl[2] = np.nan  # a bad control: all taken as zero, BADCTRL counted
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy(), ctrl=mjd.ctrl.copy()))
    batch = jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)  # host numpy: no eager jp.stack
    return mjm, mjds, m, batch, _run(mjl.configure(m, kernels="fused"), batch)


def test_kernels_run(case):
    """The model is one both kernels cover, and the fused path's program has them (not the XLA stages)."""
    _, _, m, batch, _ = case
    assert tree.transmission_fused(m) and kernel_actuation.fusable(m)
    text = str(_run.trace(mjl.configure(m, kernels="fused"), batch).jaxpr)  # (the fixture's trace, cached)
    for name in ("tree_pass", "actuation"):
        assert f"name={name}" in text, name


def test_values_equal_mujoco(case):
    """Lengths, moments, velocities, forces and qfrc_actuator of the fused path: MuJoCo's; a NaN control makes every
    control zero and counts BADCTRL once, as MuJoCo's mj_fwdActuation."""
    mjm, mjds, _, _, got = case
    for i, mjd in enumerate(mjds):
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
        ref = dict(actuator_length=mjd.actuator_length, actuator_moment=moment, actuator_velocity=mjd.actuator_velocity,
                   actuator_force=mjd.actuator_force, qfrc_actuator=mjd.qfrc_actuator)  # fmt: skip
        for f in FIELDS:
            assert rel(got[f][i], ref[f]) <= MUJOCO_TOL, (i, f, rel(got[f][i], ref[f]))
        bad = int(got["warning_number"][i, Warning.BADCTRL])
        assert bad == (i == 2) == mjd.warning[mujoco.mjtWarning.mjWARN_BADCTRL].number, i


@pytest.mark.slow  # CI time: the XLA path's and the gradients' compilations (~25 CPU-s)
def test_values_and_gradients_equal_xla(case):
    """The fields (the BADCTRL state included) equal the XLA path's to round-off; derivatives with respect to ctrl,
    qpos, qvel, gear, gainprm and biasprm are the XLA path's."""
    _, _, m, batch, got = case
    want = _run(mjl.configure(m, kernels="xla"), batch)
    for f in FIELDS + ("warning_number",):
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    got, want = _run_grads(mjl.configure(m, kernels="fused"), batch), _run_grads(mjl.configure(m, kernels="xla"), batch)
    for n in want:
        a, b = np.asarray(got[n]), np.asarray(want[n])
        assert np.all(np.isfinite(a)) and np.max(np.abs(b)) > 0, n
        np.testing.assert_allclose(a, b, rtol=GRAD_TOL, atol=GRAD_TOL * max(1.0, np.abs(b).max()), err_msg=n)


def test_not_fusable_falls_back():
    """Actuators the kernel does not compute (activation states, a ball joint transmission) leave the stages on XLA."""
    xml = ACTUATORS.replace('<velocity joint="h2" kv="2"/>', '<general joint="h2" dyntype="integrator"/>')
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml))
    assert not kernel_actuation.fusable(m) and tree.transmission_fused(m)
    assert not kernels.actuation_fused(mjl.configure(m, kernels="fused"))
    ball = ACTUATORS.replace('type="hinge" axis="1 0 0"', 'type="ball"').replace(
        '<velocity joint="h2" kv="2"/>', "").replace('<motor joint="h2" gear="-1.5"/>', "")  # fmt: skip
    xml = ball.replace("</actuator>", '<motor joint="h2" gear="1 0 0 0 0 0"/></actuator>')
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml))
    assert not tree.transmission_fused(m)


def test_twins_close_over_no_tracer(case, monkeypatch):
    """The tree pass's and the actuation kernel's XLA twins read no traced array of the step they close over (as
    tests/test_kernels.py::test_twins_close_over_no_tracer for the other kernels): a traced step, not compiled."""
    _, _, m, batch, _ = case
    # (the stages, not the step: the step runs the actuation inside the smooth pass, tests/test_kernels_smooth.py)
    seen = twin_tracers(monkeypatch, m, jax.tree.map(lambda x: np.asarray(x)[0], batch), fn=_stages)
    assert {"tree_pass", "actuation"} <= set(seen), sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}
