"""The fused smooth pass (kernels/smooth.py: the velocity pass with the joints' passive forces, actuator_velocity,
mj_fwdActuation of stateless fixed/affine actuators and fwd_acceleration in one kernel) and the velocity pass's
transmission of tendon actuators (kernels/transmission.py) against the XLA path and MuJoCo, in float64 (Pallas'
interpret mode on the CPU).

The kernel alone runs on the XLA path's position stages (one jitted function per case, shared by the tests: CI
time): every output equals the XLA stages' to round-off and MuJoCo's mj_forward to its tolerance; Model floats
vmapped per environment (domain randomisation) become per-environment inputs; the Triton lowering for "cuda" in
float32 and float64. TENDON (fixed and spatial tendon actuators beside joint ones): the velocity pass's lengths,
moments and velocities equal the XLA stages' and MuJoCo's, `forward_pos_vel` runs no XLA transmission. The slow
selection adds the whole fused step (resets under both `qacc_reset` modes), the tendon model's fused forward
against mj_forward, and the gradients.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline import transmission as xla_transmission
from mjx_lite.pipeline.kernels import launch, smooth, velocity
from mjx_lite.types import Warning
from tests import oracle
from tests.kernel_checks import rel, twin_tracers
from tests.test_kernels_precision import gpu_triton_modules, triton_modules

# fused and XLA fields differ by float64 round-off only (summation orders, the solve's): relative to max(1, max |f|)
ROUNDOFF = 1e-12
# against MuJoCo C (float64; the position stages computed independently)
MUJOCO_TOL = 1e-10
# derivatives run through the XLA twins on both paths; they differ by the primal's round-off
GRAD_TOL = 1e-10

# a slide, two hinges and a ball (springs, dampers, a spring reference), no contacts; every actuator kind the kernel
# covers: a clamped motor, a force-limited position servo (affine bias), a velocity servo, an affine gain and bias on
# a jointinparent transmission, a motor with a negative gear, a motor in a disabled group, a motor on the ball
# (jointinparent: the transmission is the smooth pass's, kernels/transmission.py); applied forces and Cartesian
# wrenches (xfrc) on every body
SMOOTH = """
<mujoco>
  <option actuatorgroupdisable="3"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="s" type="slide" axis="1 0 0" stiffness="3" damping=".5" springref=".1"/>
      <geom type="box" size=".1 .1 .1" mass="1" contype="0" conaffinity="0"/>
      <body pos="0 0 -0.3">
        <joint name="h1" type="hinge" axis="0 1 0" damping="0.2" armature="0.01"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" contype="0" conaffinity="0"/>
        <body pos="0 0 -0.3">
          <joint name="h2" type="hinge" axis="1 0 0" stiffness="1"/>
          <geom type="sphere" size="0.05" contype="0" conaffinity="0"/>
          <body pos="0 0.1 -0.1">
            <joint name="b" type="ball" stiffness="0.5" damping="0.1" armature="0.005"/>
            <geom type="box" pos="0.05 0 -0.1" size=".05 .04 .06" mass="0.5" contype="0" conaffinity="0"/>
          </body>
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
    <motor jointinparent="b" gear="0.3 -0.2 0.5 0 0 0"/>
  </actuator>
</mujoco>
"""
FIELDS = ("actuator_length", "actuator_moment", "cvel", "cdof_dot", "qfrc_bias", "qfrc_spring", "qfrc_damper",
          "qfrc_passive", "actuator_velocity", "actuator_force", "qfrc_actuator", "qfrc_smooth",
          "qacc_smooth")  # fmt: skip
# vmapped Model floats (domain randomisation): the kernel's shared inputs become per-environment ones
RANDOMISED = ("actuator_gainprm", "actuator_biasprm", "actuator_ctrlrange", "actuator_forcerange", "actuator_gear",
              "dof_damping", "jnt_stiffness", "qpos_spring")  # fmt: skip
NENV = 3


def _xla(m, d):
    """The XLA stages the kernel replaces (the transmission again: the vmapped Models' gears), on d after the position
    stages."""
    d = xla_transmission.transmission(m, d)
    return fwd.fwd_acceleration(m, fwd.fwd_actuation(m, fwd.fwd_velocity(m, d)))


def _fused(m, d):
    """The smooth pass on d after the XLA position stages, the transmission's fields zeroed first (the kernel
    computes them)."""
    d = d.replace(actuator_length=jp.zeros_like(d.actuator_length), actuator_moment=jp.zeros_like(d.actuator_moment))
    return smooth.smooth_pass(m, d, kernels.launch_of(m))


def _fields(d):
    return {n: getattr(d, n) for n in FIELDS + ("warning_number",)}


_position = jax.jit(jax.vmap(fwd.fwd_position, in_axes=(None, 0)))
_run_xla = jax.jit(jax.vmap(lambda m, d: _fields(_xla(m, d)), in_axes=(None, 0)))
_run_fused = jax.jit(jax.vmap(lambda m, d: _fields(_fused(m, d)), in_axes=(None, 0)))


def _per_model(fn, m, leaves, ds):
    """fn's fields for each Model of m with the RANDOMISED `leaves` (a vmap over them) at each of its states `ds` (a
    vmap inside)."""

    def run(leaves, ds):
        return jax.vmap(lambda lv, d: jax.vmap(lambda d: _fields(fn(m.replace(**lv), d)))(d))(leaves, ds)

    return jax.jit(run)(leaves, ds)


def _states(mjm, m, n, rng):
    """n MuJoCo states (mj_forward) and the batch of our Data after the XLA position stages; the last one with a NaN
    control (BADCTRL: every control taken as zero)."""
    mjds, ds = [], []
    for i in range(n):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = rng.normal(size=mjm.nq) * 0.5
        mjd.qpos[-4:] /= np.linalg.norm(mjd.qpos[-4:])  # the ball's quaternion
        mjd.qvel[:] = rng.normal(size=mjm.nv)
        mjd.ctrl[:] = rng.normal(size=mjm.nu) * 2.0  # beyond the motor's ctrlrange at times
        mjd.qfrc_applied[:] = rng.normal(size=mjm.nv)
        mjd.xfrc_applied[1:] = rng.normal(size=(mjm.nbody - 1, 6))
        if i == n - 1:
            mjd.ctrl[2] = np.nan
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy(), ctrl=mjd.ctrl.copy(),
                                           qfrc_applied=mjd.qfrc_applied.copy(),
                                           xfrc_applied=mjd.xfrc_applied.copy()))  # fmt: skip
    batch = jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)  # host numpy: no eager jp.stack
    return mjds, _position(mjl.configure(m, kernels="xla"), batch)


@pytest.fixture(scope="module")
def case():
    """MuJoCo's model and states, our Model (fused), the batch after the position stages, fused and XLA values."""
    mjm = mujoco.MjModel.from_xml_string(SMOOTH)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="fused")
    mjds, batch = _states(mjm, m, NENV, np.random.default_rng(0))
    return mjm, mjds, m, batch, _run_fused(m, batch), _run_xla(mjl.configure(m, kernels="xla"), batch)


def test_fusable(case):
    """The model is one the smooth pass covers (and the separate kernels' conditions agree)."""
    _, _, m, _, _, _ = case
    assert kernels.smooth_fused(m) and kernels.actuation_fused(m) and kernels.transmission_deferred(m)
    assert not kernels.smooth_fused(mjl.configure(m, kernels="xla"))


def test_values_equal_xla(case):
    """Every output equals the XLA stages' to round-off; BADCTRL is counted exactly as the XLA stage counts it."""
    _, _, _, _, got, want = case
    for f in FIELDS:
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    np.testing.assert_array_equal(got["warning_number"], want["warning_number"])
    assert int(got["warning_number"][-1, Warning.BADCTRL]) == 1 and int(got["warning_number"][0].sum()) == 0


def test_values_equal_mujoco(case):
    """Actuator lengths and moments, velocities, bias, passive, actuator and smooth forces and qacc_smooth: MuJoCo's
    mj_forward's."""
    mjm, mjds, _, _, got, _ = case
    for i, mjd in enumerate(mjds):
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
        ref = dict(actuator_length=mjd.actuator_length, actuator_moment=moment, cvel=mjd.cvel, cdof_dot=mjd.cdof_dot,
                   qfrc_bias=mjd.qfrc_bias, qfrc_spring=mjd.qfrc_spring,
                   qfrc_damper=mjd.qfrc_damper, qfrc_passive=mjd.qfrc_passive,
                   actuator_velocity=mjd.actuator_velocity, actuator_force=mjd.actuator_force,
                   qfrc_actuator=mjd.qfrc_actuator, qfrc_smooth=mjd.qfrc_smooth,
                   qacc_smooth=mjd.qacc_smooth)  # fmt: skip
        for f, want in ref.items():
            assert rel(got[f][i], want) <= MUJOCO_TOL, (i, f, rel(got[f][i], want))
        assert int(got["warning_number"][i, Warning.BADCTRL]) == mjd.warning[mujoco.mjtWarning.mjWARN_BADCTRL].number


@pytest.fixture(scope="module")
def models_case(case):
    """2 Models (the RANDOMISED floats scaled per Model) x the batch's environments, fused and XLA values."""
    _, _, m, batch, _, _ = case
    rng = np.random.default_rng(1)
    leaves = {n: np.stack([np.asarray(getattr(m, n)) * rng.uniform(0.5, 1.5) for _ in range(2)]) for n in RANDOMISED}
    ds = jax.tree.map(lambda x: np.stack([np.asarray(x)] * 2), batch)
    return _per_model(_fused, m, leaves, ds), _per_model(_xla, mjl.configure(m, kernels="xla"), leaves, ds)


def test_vmapped_models_equal_xla(models_case):
    """Model floats vmapped with the environments (domain randomisation: per-environment kernel inputs): equal to
    the XLA stages' to round-off, and the two Models differ."""
    got, want = models_case
    for f in FIELDS:
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    assert rel(got["actuator_force"][0], got["actuator_force"][1]) > 1e-3  # (the draws matter)


def test_step_program_and_twins(case, monkeypatch):
    """The fused step runs the smooth pass in place of the velocity pass, the actuation and the acceleration kernels
    (a traced step, not compiled), and its XLA twin reads no traced array of the step it closes over."""
    _, _, m, batch, _, _ = case
    d = jax.tree.map(lambda x: np.asarray(x)[0], batch)
    seen = twin_tracers(monkeypatch, m, d)
    assert "smooth_pass" in seen and not {"velocity_pass", "actuation", "fwd_acceleration"} & set(seen), sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}


@pytest.mark.parametrize("dtype", [jp.float32, jp.float64])
def test_triton_lowering(case, dtype):
    """The smooth pass lowers to one Triton kernel for "cuda" (compiled as on a GPU), float32 and float64."""
    _, _, m, batch, _, _ = case
    cast = lambda t: jax.tree.map(lambda x: x.astype(dtype) if jp.issubdtype(x.dtype, jp.floating) else x, t)  # noqa: E731
    m32, d32 = cast(m), cast(batch)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
        mods = triton_modules(jax.vmap(_fused, in_axes=(None, 0)), m32, d32)
    assert set(mods) == {"smooth_pass"}, sorted(mods)
    assert ("f32" if dtype == jp.float32 else "f64") in mods["smooth_pass"]


# ---- slow: whole steps, gradients ------------------------------------------------------------------------------


def _with_bad(ds):
    """The batch with a huge applied force in environment 0 (BADQACC: reset)."""
    f = np.asarray(ds.qfrc_applied).copy()
    f[0] = 1e30
    return ds.replace(qfrc_applied=f)


@pytest.mark.slow  # CI time: the fused step's interpret-mode compilation (~60 CPU-s per reset mode)
@pytest.mark.parametrize("reset", ["all", "state"])
def test_step_equals_xla(case, reset):
    """An Euler step of the fused path (the smooth pass inside) equals the XLA path's, every field, with an
    environment whose qacc diverges (BADQACC: reset, under both `qacc_reset` modes: the acceleration stages' fields
    are reset as on the XLA path although the smooth pass computed them with the velocity stage; one step: a second
    one would recompute them from the reset state)."""
    _, _, m, batch, _, _ = case
    m = m.replace(opt=m.opt.replace(integrator=int(mjl.IntegratorType.EULER)))
    m = mjl.configure(m, qacc_reset=reset)
    ds = _with_bad(jax.tree.map(lambda x: np.asarray(x), batch))

    def roll(m, d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=1)[0]

    roll = jax.jit(jax.vmap(roll, in_axes=(None, 0)))
    got, want = roll(m, ds), roll(mjl.configure(m, kernels="xla"), ds)
    assert int(got.warning_number[0, Warning.BADQACC]) >= 1
    for (path, a), b in zip(jax.tree_util.tree_leaves_with_path(want), jax.tree.leaves(got)):
        if jp.issubdtype(a.dtype, jp.floating):  # (the NaN control stays in ctrl on both paths)
            np.testing.assert_array_equal(np.isnan(b), np.isnan(a), err_msg=jax.tree_util.keystr(path))
            a, b = np.nan_to_num(np.asarray(a)), np.nan_to_num(np.asarray(b))
            assert rel(b, a) <= ROUNDOFF, (jax.tree_util.keystr(path), rel(b, a))
        else:
            np.testing.assert_array_equal(b, a, err_msg=jax.tree_util.keystr(path))


@pytest.mark.slow  # CI time: the fused forward's interpret-mode compilation
def test_tendon_forward_equals_mujoco(tendon_case):
    """The tendon model's fused forward pass (transmission in the velocity pass, the actuation kernel beside it)
    against mj_forward: actuator fields, qfrc_actuator, qacc_smooth and qacc."""
    mjm, mjds, m, batch, _, _ = tendon_case
    got = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(m, batch)
    for i, mjd in enumerate(mjds):
        for f in ("actuator_length", "actuator_velocity", "actuator_force", "qfrc_actuator", "qfrc_passive",
                  "qacc_smooth", "qacc"):  # fmt: skip
            assert rel(getattr(got, f)[i], getattr(mjd, f)) <= MUJOCO_TOL, (i, f)


@pytest.mark.slow  # CI time: the kernel's gradient rule (the XLA twins) on both paths
def test_gradients_equal_xla(case):
    """Derivatives of the forward pass (the smooth pass inside) with respect to ctrl, qpos, qvel, qfrc_applied and
    the actuators' and joints' Model floats are the XLA path's."""
    _, _, m, batch, _, _ = case
    names = RANDOMISED + ("body_mass",)

    def grads(m, d):
        def loss(leaves, ctrl, qpos, qvel, qfrc_applied):
            state = d.replace(ctrl=ctrl, qpos=qpos, qvel=qvel, qfrc_applied=qfrc_applied)
            out = mjl.forward(m.replace(**leaves), state)
            return jp.sum(jp.sin(out.qacc_smooth)) + jp.sum(out.actuator_force**2) + jp.sum(out.qfrc_bias**2) + jp.sum(
                jp.cos(out.actuator_length))

        leaves = {n: jp.asarray(getattr(m, n)) for n in names}
        g = jax.grad(loss, argnums=(0, 1, 2, 3, 4))(leaves, d.ctrl, d.qpos, d.qvel, d.qfrc_applied)
        return dict(ctrl=g[1], qpos=g[2], qvel=g[3], qfrc_applied=g[4], **g[0])

    ds = jax.tree.map(lambda x: np.asarray(x)[:2], batch)  # (no NaN control)
    run = jax.jit(jax.vmap(grads, in_axes=(None, 0)))
    got, want = run(m, ds), run(mjl.configure(m, kernels="xla"), ds)
    for n in want:
        a, b = np.asarray(got[n]), np.asarray(want[n])
        assert np.all(np.isfinite(a)), n
        np.testing.assert_allclose(a, b, rtol=GRAD_TOL, atol=GRAD_TOL * max(1.0, np.abs(b).max()), err_msg=n)


# ---- tendon actuators: the transmission in the velocity pass's kernel ---------------------------------------------

# a fixed tendon (two hinges; a spring with a dead band, damped) and a spatial one (two sites; a spring, damped) with
# a clamped motor (actuator damping on its tendon) and a position servo, beside a slide motor, a hinge velocity servo
# and two motors on a free joint (joint and jointinparent): the tree pass cannot compute the transmission (the tendon
# stage runs after it), the velocity pass does, and the tendons' passive forces (kernels/passive.py); the tendons'
# polynomial coefficients (no MJCF attribute in MuJoCo 4.0) are set on the compiled model (TENDON_POLY)
TENDON = """
<mujoco>
  <worldbody>
    <site name="anchor" pos="0 0.05 1.2"/>
    <body pos="0 0 1">
      <joint name="s" type="slide" axis="1 0 0" damping=".5"/>
      <geom type="box" size=".1 .1 .1" mass="1" contype="0" conaffinity="0"/>
      <body pos="0 0 -0.3">
        <joint name="h1" type="hinge" axis="0 1 0" damping="0.2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03" contype="0" conaffinity="0"/>
        <site name="tip" pos="0 0 -0.3"/>
        <body pos="0 0 -0.3">
          <joint name="h2" type="hinge" axis="1 0 0" stiffness="1"/>
          <geom type="sphere" size="0.05" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
    <body pos="1 0 1">
      <joint name="fr" type="free"/>
      <geom type="box" size=".1 .2 .05" mass="2" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="f" stiffness="2" springlength="-0.1 0.1" damping="0.4">
      <joint joint="h1" coef="1"/><joint joint="h2" coef="-0.5"/>
    </fixed>
    <spatial name="sp" damping="0.3" stiffness="3" springlength="0.2"><site site="anchor"/><site site="tip"/></spatial>
  </tendon>
  <actuator>
    <motor tendon="f" gear="2" ctrllimited="true" ctrlrange="-1 1" damping="0.3"/>
    <position tendon="sp" kp="10"/>
    <motor joint="s" gear="3"/>
    <velocity joint="h2" kv="1"/>
    <motor joint="fr" gear="1 -0.5 0.3 0.2 0.4 -0.6"/>
    <motor jointinparent="fr" gear="0.5 0.1 0 -0.3 0.2 0.7"/>
  </actuator>
</mujoco>
"""
TENDON_POLY = dict(tendon_stiffnesspoly=[[0.5, -0.4], [0.3, 0.2]], tendon_dampingpoly=[[0.2, 0.1], [0.05, 0.3]],
                   actuator_dampingpoly=[[0.1, 0.2]] + [[0.0, 0.0]] * 5)  # fmt: skip
TENDON_FIELDS = ("actuator_length", "actuator_moment", "actuator_velocity", "ten_velocity", "cvel", "cdof_dot",
                 "qfrc_bias", "qfrc_spring", "qfrc_damper", "qfrc_passive")  # fmt: skip


def _velocity_pass(m, d):
    """The fused velocity pass on d after the XLA position stages, its transmission's fields zeroed first (the
    kernel computes them)."""
    d = d.replace(actuator_length=jp.zeros_like(d.actuator_length), actuator_moment=jp.zeros_like(d.actuator_moment))
    out = velocity.velocity_pass(m, d, kernels.launch_of(m))[0]
    return {n: getattr(out, n) for n in TENDON_FIELDS}


_run_velocity = jax.jit(jax.vmap(_velocity_pass, in_axes=(None, 0)))
_run_velocity_xla = jax.jit(jax.vmap(lambda m, d: {n: getattr(fwd.fwd_velocity(m, d), n) for n in TENDON_FIELDS},
                                     in_axes=(None, 0)))  # fmt: skip


@pytest.fixture(scope="module")
def tendon_case():
    """MuJoCo's tendon model and states, our Model (fused), the batch after the XLA position stages (transmission
    included), the fused velocity pass's and the XLA velocity stage's fields."""
    mjm = mujoco.MjModel.from_xml_string(TENDON)
    for n, v in TENDON_POLY.items():
        getattr(mjm, n)[:] = v
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="fused")
    rng = np.random.default_rng(2)
    mjds, ds = [], []
    for _ in range(NENV):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = rng.normal(size=mjm.nq) * 0.5
        mjd.qpos[-4:] /= np.linalg.norm(mjd.qpos[-4:])  # the free joint's quaternion
        mjd.qvel[:] = rng.normal(size=mjm.nv)
        mjd.ctrl[:] = rng.normal(size=mjm.nu) * 2.0
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
        ds.append(mjl.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy(), ctrl=mjd.ctrl.copy()))
    batch = _position(mjl.configure(m, kernels="xla"), jax.tree.map(lambda *x: np.stack(x), *ds))
    return mjm, mjds, m, batch, _run_velocity(m, batch), _run_velocity_xla(mjl.configure(m, kernels="xla"), batch)


def test_tendon_transmission_equals_xla_and_mujoco(tendon_case):
    """The velocity pass's actuator lengths, moments and velocities, tendon velocities, cvel, qfrc_bias and the passive
    forces (the tendons' springs in and out of their dead bands, dampers, the actuator damping on a tendon) equal the
    XLA stages' (transmission, fwd_velocity) to round-off and MuJoCo's to its tolerance; the model is one whose
    transmission the velocity pass computes (not the tree pass), the actuation kernel beside it, and the smooth pass
    covers it."""
    mjm, mjds, m, batch, got, want = tendon_case
    assert kernels.transmission_deferred(m) and kernels.actuation_fused(m) and kernels.smooth_fused(m)
    assert velocity.passive_fusable(m)
    for f in ("qfrc_spring", "qfrc_damper"):  # (every term contributes)
        assert np.all(np.any(np.asarray(got[f]) != 0, axis=1)), f
    for f in TENDON_FIELDS:
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    for f in ("actuator_length", "actuator_moment"):  # (the XLA position stage's transmission)
        assert rel(got[f], getattr(batch, f)) <= ROUNDOFF, f
    for i, mjd in enumerate(mjds):
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
        ref = dict(actuator_length=mjd.actuator_length, actuator_moment=moment, actuator_velocity=mjd.actuator_velocity,
                   ten_velocity=mjd.ten_velocity, cvel=mjd.cvel, cdof_dot=mjd.cdof_dot,
                   qfrc_bias=mjd.qfrc_bias, qfrc_spring=mjd.qfrc_spring, qfrc_damper=mjd.qfrc_damper,
                   qfrc_passive=mjd.qfrc_passive)  # fmt: skip
        for f, r in ref.items():
            assert rel(got[f][i], r) <= MUJOCO_TOL, (i, f, rel(got[f][i], r))


def test_tendon_forward_defers_transmission(tendon_case, monkeypatch):
    """`forward_pos_vel` of the fused path runs no XLA transmission (the velocity pass's kernel computes it) and the
    velocity pass's twin reads no traced array it closes over; the XLA path runs the transmission (traced, not
    compiled)."""
    _, _, m, batch, _, _ = tendon_case
    calls = []
    original = xla_transmission.transmission

    def transmission(m, d):  # (run_unless skips a stage by its name)
        calls.append(1)
        return original(m, d)

    monkeypatch.setattr(xla_transmission, "transmission", transmission)
    d = jax.tree.map(lambda x: np.asarray(x)[0], batch)
    jax.make_jaxpr(fwd.forward_pos_vel)(m, d)
    assert not calls
    seen = twin_tracers(monkeypatch, m, d, fn=lambda m, d: fwd.forward_pos_vel(m, d))
    assert "velocity_pass" in seen, sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}
    calls.clear()
    jax.make_jaxpr(fwd.forward_pos_vel)(mjl.configure(m, kernels="xla"), d)
    assert calls


# ---- tendons' passive forces in the smooth pass (kernels/passive.py) ---------------------------------------------


@pytest.fixture(scope="module")
def tendon_smooth(tendon_case):
    """The smooth pass (fused) and the XLA stages it replaces on the tendon model's batch."""
    _, _, m, batch, _, _ = tendon_case
    return _run_fused(m, batch), _run_xla(mjl.configure(m, kernels="xla"), batch)


def test_tendon_smooth_pass_equals_xla_and_mujoco(tendon_case, tendon_smooth):
    """With the tendons' springs and dampers in the kernel, the smooth pass covers the tendon model: every output
    equals the XLA stages' to round-off, and the passive, actuator and smooth forces and qacc_smooth MuJoCo's."""
    _, mjds, _, _, _, _ = tendon_case
    got, want = tendon_smooth
    for f in FIELDS:
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    for i, mjd in enumerate(mjds):
        for f in ("qfrc_passive", "actuator_force", "qfrc_actuator", "qfrc_smooth", "qacc_smooth"):
            assert rel(got[f][i], getattr(mjd, f)) <= MUJOCO_TOL, (i, f, rel(got[f][i], getattr(mjd, f)))


@pytest.mark.parametrize("dtype", [pytest.param(jp.float32, marks=pytest.mark.slow), jp.float64])  # (CI time)
def test_tendon_smooth_pass_lowers_to_triton(tendon_case, dtype):
    """The smooth pass with the tendons' passive forces lowers to one Triton kernel for "cuda", float32 and float64."""
    _, _, m, batch, _, _ = tendon_case
    mods = gpu_triton_modules(jax.vmap(_fused, in_axes=(None, 0)), dtype, m, batch)
    assert set(mods) == {"smooth_pass"}, sorted(mods)
    assert ("f32" if dtype == jp.float32 else "f64") in mods["smooth_pass"]


TENDON_PASSIVE_PARAMS = ("tendon_stiffness", "tendon_stiffnesspoly", "tendon_lengthspring", "tendon_damping",
                         "tendon_dampingpoly", "actuator_damping", "actuator_dampingpoly", "actuator_gear")  # fmt: skip


def test_tendon_passive_gradients_equal_xla(tendon_case):
    """Reverse mode through the velocity pass with the tendons' passive forces w.r.t. qpos, qvel, ten_length, ten_J
    and every tendon and actuator float the kernel reads: the XLA path's derivatives (its twin's)."""
    _, _, m, batch, _, _ = tendon_case
    d = jax.tree.map(lambda x: np.asarray(x)[0], batch)

    def grads(m, d):
        def loss(params, qvel, ten_length, ten_J):
            out = fwd.fwd_velocity(m.replace(**params), d.replace(qvel=qvel, ten_length=ten_length, ten_J=ten_J))
            return sum(jp.sum(jp.sin(getattr(out, f))) for f in ("qfrc_spring", "qfrc_damper", "qfrc_passive"))

        params = {n: jp.asarray(getattr(m, n)) for n in TENDON_PASSIVE_PARAMS}
        return jax.grad(loss, argnums=(0, 1, 2, 3))(params, d.qvel, d.ten_length, d.ten_J)

    got = jax.jit(grads)(m, d)
    want = jax.jit(grads)(mjl.configure(m, kernels="xla"), d)
    for (path, b), a in zip(jax.tree_util.tree_leaves_with_path(want), jax.tree.leaves(got)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.all(np.isfinite(a)) and np.any(b), jax.tree_util.keystr(path)
        np.testing.assert_allclose(a, b, rtol=GRAD_TOL, atol=GRAD_TOL * max(1.0, np.abs(b).max()),
                                   err_msg=jax.tree_util.keystr(path))  # fmt: skip
