"""The fused Pallas kernels (`Config(kernels="fused")`, mjx_lite/pipeline/kernels/) against the XLA path.

On the CPU the kernels run in Pallas' interpret mode (the same kernel body, as XLA operations), in float64. The
fused tree pass (kinematics, com_pos, crb, factor_m), the velocity pass (com_vel, rne) and the solves (M^-1 x,
(M + diag(shift))^-1 x) must give the XLA stages' values to round-off, batched (the
custom_vmap rule: one launch over blocks of environments) and unbatched, in both layouts; derivatives must be the
XLA path's (they go through it); whole steps must agree (they include the fused constraint solver, tested on its
own in tests/test_kernels_solver.py). The kernel must lower to Triton for "cuda" (checked on
the CPU, no GPU needed), and the fused step's lowered program is counted so that its size cannot creep back.
"""

import dataclasses
import functools
import os
import re

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from jax._src.interpreters import partial_eval as pe

import mjx_lite as mjl
from mjx_lite import config as config_mod
from mjx_lite import envs
from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline import integrate, kernels
from mjx_lite.pipeline.kernels import factor, launch, passive, tree, velocity
from mjx_lite.types import DisableBit
from tests import oracle
from tests.kernel_checks import twin_tracers

# fused and XLA fields differ by float64 round-off only (different summation orders, the parent composed before
# the joints): relative to max(1, max |field|)
ROUNDOFF = 1e-12
# a whole step (the solver iterates on both paths' inputs): relative to max(1, max |field|)
STEP_TOL = 1e-9
# derivatives run through the XLA twin on both paths; the cotangents differ by the primal's round-off
GRAD_TOL = 1e-10
# lowered program of the fused humanoid step (float32, batch 8, MJX test_data humanoid, contacts on), counted by
# test_fused_step_program_size: StableHLO operations besides the Triton kernels, constants left out, and the XLA
# path's count of the same step. What the kernels remove is the difference (XLA - fused): it must stay at or above
# FUSED_STEP_SAVED, so that a stage added elsewhere in the step (both counts grow alike) does not fail the test and
# a kernel that loses part of its work does. Recorded: fused 2903, XLA 4185; after the actuator-delay and noslip
# merges fused 3038, XLA 4320 (the same 1282 saved); with the Newton solver's kernel fused 2432, XLA 4320; later
# fused 2460, XLA 4359 (1899 saved); with the constraint rows' kernel (kernels/rows.py) fused 1843, XLA 4359; with
# the primitive colliders' kernel (kernels/collide.py) fused 1563, XLA 4359; later fused 1565, XLA 4372 (2807
# saved); with the passive forces in the velocity pass (kernels/passive.py) fused 1146, XLA 4372; with the
# integrator's update (kernels/advance.py) fused 986, XLA 4372; after the plastic-springs merge fused 989, XLA 4375;
# with the reset's select against scalar zeros (integrate._select_reset) fused 797, XLA 4195; with the solver's
# start (warm-start choice, efc_b) and end (efc_state; efc_force's derivative by a custom_jvp) in its kernel fused 663;
# after the adhesion and orientation-actuator merges fused 664 (the contacts' adhesion, mixed outside the collider
# kernel: +1), XLA 4194 (its rows and passive forces rewritten: -1), 3530 saved; then XLA 4185 with the fused count
# unchanged at 664 (the XLA solver's force law derivative through one custom_jvp instead of ev.force +
# stop_gradient(force - ev.force), and its loop closure-converted for Config.solver_batch), 3521 saved; after the
# elliptic-cone kernels (the contacts' solreffriction a kernel input) and the static row slices of the XLA rows and
# Hessian (constraint._permute, common._row_runs: fewer gathers) fused 669, XLA 4155, 3486 saved; later fused 675,
# XLA 4171; with the contact parameters' kernel (kernels/contact_params.py: mj_contactParam's mixing, the detection
# margins, no per-group slicing of the contacts, no CONTACTFULL count where nothing can overflow) fused 635, XLA 4169;
# then the XLA path's contact rows from each slot's trace-time bodies (no gathers by traced geom ids) XLA 4110: the
# reference shrank, the fused count stayed 635. From here both paths are lowered as a GPU runs them (the "auto"
# fields resolved as off the CPU, config.AUTO_OFF_CPU: qacc_reset "state", elementwise quaternions, library linalg,
# lockstep solver batch; before, this CPU's resolution): fused 532, XLA 5288; then no size-1 environment axis
# broadcast per batched kernel input (launch._batched) and fwd_acceleration as one kernel (kernels/factor.py, in
# place of solve_m: the forces' sum and J'xfrc were ~50 XLA operations): fused 428, XLA 5288, 4860 saved; with the
# joint actuators' transmission in the tree pass (kernels/tree.py) fused 391, and the actuation kernel
# (kernels/actuation.py, one more kernel) fused 370, XLA 5288, 4918 saved; with the kernels' shared (Model) inputs
# unreshaped and the actuation kernel's warning increments (kernels/launch.py, actuation.py) fused 331, 4957 saved;
# with warning_number's counters an elementwise add of a one-hot row instead of a scatter (data.count_warning: three
# more operations per counter on both paths, no scatter) fused 346, XLA 5307, 4961 saved; with the counters' row a
# padded increment (lax.pad), one divergence test over [qpos, qvel] and the reset's zeros as splat constants
# (integrate.py; on both paths) fused 315, XLA 5270: 4955 saved (the XLA path has more counters, so it shrank more).
# 3534 saved before the XLA rows' trace-time bodies, 3496 before the contact parameters' kernel, 3475 with this
# CPU's resolution of the auto fields.
FUSED_STEP_SAVED = 4983  # 648 with the tree pass alone fused
# (kinematics, com_pos, crb); 1282 before the solver's;
# 1888 before the rows'; 2516 before the colliders'; 2807 before the passive forces'; 3226 before the update's;
# 3386 before the reset's select; 3398 before the solver's start and end; 3532 before the adhesion merge; 3530
# before the XLA solver's rewrite; 4860 before the transmission and actuation kernels; 4957 before count_warning;
# 4961 before the padded counts; 4955 before the smooth pass (velocity pass, actuation and fwd_acceleration in one
# kernel); 4964 before the scratch outputs' slices were dropped
# Triton kernels of that step: tree_pass (kinematics, com_pos, crb, factor_m, the motors' transmission),
# collide_primitive (the feet's plane-capsule pairs), constraint_rows (make_constraint's limit and contact rows),
# smooth_pass (kernels/smooth.py: com_vel, rne, passive (the joints' springs and dampers), actuator_velocity, the
# motors' forces and qfrc_actuator, fwd_acceleration's qfrc_smooth with J'xfrc and qacc_smooth; 3 kernels before:
# velocity_pass, actuation, fwd_acceleration), solve_newton (the constraint solver's start, iterations and rows'
# states, kernels/primal.py), advance (Euler's qvel and qpos update) and contact_params (the contacts' parameters and
# detection margins, Model-only: one lane); the MJX humanoid disables eulerdamp, so Euler's solve_shifted kernel is
# not in it
FUSED_STEP_KERNELS = 7
# the tree pass alone, fused, is the kernel and layout operations (free reshapes; slices and transposes of its
# packed lanes_last output), no arithmetic
LAYOUT_OPS = {"stablehlo.reshape", "stablehlo.slice", "stablehlo.transpose", "stablehlo.broadcast_in_dim",
              "stablehlo.concatenate", "stablehlo.convert", "stablehlo.custom_call"}  # fmt: skip
# ... and the INERTIA warning of the fused factorisation: a pivot clamped (compare) counted into warning_number
# (data.count_warning: a padded one-hot row and an add; no scatter), one each
WARNING_OPS = ("stablehlo.compare", "stablehlo.pad", "stablehlo.add")

TREE_FIELDS = tree.KINEMATICS_OUTPUTS + tree.COM_OUTPUTS + tree.CRB_OUTPUTS
FACTOR_FIELDS = ("qLD", "qLDiagInv")
# with the passive forces (kernels/passive.py: in the velocity pass's kernel on the models here without tendons)
VELOCITY_FIELDS = velocity.OUTPUTS + passive.OUTPUTS
SOLVE_FIELDS = ("solve_shifted",)
ACCELERATION_FIELDS = ("qfrc_smooth", "qacc_smooth")
# everything `_stages` returns
STAGE_FIELDS = TREE_FIELDS + FACTOR_FIELDS + VELOCITY_FIELDS + SOLVE_FIELDS + ACCELERATION_FIELDS

# every joint type, a body with three joints, a mocap body, sites, geoms in every sameframe case MuJoCo produces
# here, cameras in all five modes, actuators with armature on their joints; polynomial springs (a spring reference
# on the hinge and slide) and dampers on free, ball, hinge and slide joints, actuator damping on a ball and a hinge
JOINTS = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <camera name="fixed" pos="0 -3 1" xyaxes="1 0 0 0 0.3 1"/>
    <camera name="aim_world" pos="2 2 2" mode="targetbody" target="torso"/>
    <body name="torso" pos="0 0 1.2" quat="0.9 0.1 0.2 0.3">
      <joint type="free" stiffness="3 0.5 0.2" damping="0.4 0.1 0.05"/>
      <geom type="box" size="0.2 0.1 0.1" mass="3"/>
      <geom type="sphere" size="0.05" pos="0.2 0.1 0" quat="0.5 0.5 0.5 0.5"/>
      <site name="s0" pos="0.1 0 0.1"/>
      <camera name="track" pos="0 -2 0.5" mode="track"/>
      <camera name="trackcom" pos="0 -2 0.5" mode="trackcom"/>
      <body name="arm" pos="0.3 0 0">
        <joint name="ball" type="ball" stiffness="2 0.3 0.1" damping="0.3 0.2 0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
        <body name="fore" pos="0.3 0 0">
          <joint name="h1" type="hinge" axis="0 1 0" pos="0.01 0 0" stiffness="4 1 0.5" damping="1 0.2 0.3"
                 springref="0.3"/>
          <joint name="s1" type="slide" axis="1 0 0" stiffness="5" damping="0.5" springref="-0.1"/>
          <joint name="h2" type="hinge" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0.25 0 0" size="0.035" euler="10 20 30"/>
          <site name="tip" pos="0.25 0 0" euler="0 90 0"/>
          <camera name="aimcom" pos="0.1 0 0.2" mode="targetbodycom" target="torso"/>
        </body>
      </body>
      <body name="leg" pos="0 0 -0.2" euler="0 30 0">
        <joint name="slide" type="slide" axis="0 0 1" range="-0.1 0.1"/>
        <joint name="hip" type="hinge" axis="1 0 0"/>
        <geom type="box" size="0.05 0.05 0.2" pos="0 0 -0.2"/>
      </body>
    </body>
    <body name="ball" pos="0.5 0.3 0.4">
      <freejoint/>
      <geom type="sphere" size="0.06" pos="0.01 0.02 0.03"/>
    </body>
    <body name="target" mocap="true" pos="1 1 0.5" quat="0.7 0 0.7 0">
      <geom type="box" size="0.05 0.05 0.05" contype="0" conaffinity="0"/>
      <site name="mocap_site" pos="0 0 0.1"/>
    </body>
    <body name="pendulum" pos="-1 0 1">
      <joint name="ph" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>
      <body pos="0 0 -0.5">
        <joint name="pb" type="ball"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <orientation joint="ball" kp="2" kv="0.1"/>  <!-- 3 force outputs: the gear rows below are at actuator_outadr -->
    <motor joint="h1" gear="2" armature="0.05"/>
    <motor joint="hip" gear="1"/>
    <motor joint="ph" gear="3" armature="0.1"/>
    <motor joint="pb" gear="2" armature="0.07"/>
    <general joint="pb" gear="1.5" damping="0.3 0.2 0.1"/>
    <general joint="h1" gear="-1" damping="0.2"/>
  </actuator>
</mujoco>
"""

MJX_HUMANOID = os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml")
TENDON_ARMATURE = os.path.join(oracle.MJX_TEST_DATA, "tendon", "armature.xml")


def _load(name: str):
    """(mujoco.MjModel, our Model) of a test model."""
    if name == "joints":
        mjm = mujoco.MjModel.from_xml_string(JOINTS)
    elif name == "mjx_humanoid":
        mjm = mujoco.MjModel.from_xml_path(MJX_HUMANOID)
    elif name == "tendon_armature":
        mjm = mujoco.MjModel.from_xml_path(TENDON_ARMATURE)
    else:
        mjm = mujoco.MjModel.from_xml_path(mjl.models.path(name))
    return mjm, oracle.model_from_mujoco(mjm)


def _states(mjm, m, n: int, seed: int = 0):
    """n random states (qpos around qpos0, unit quaternions; moved mocap bodies) stacked into a batched Data (host
    numpy leaves, CI time: an eager stack compiles a small program per leaf shape)."""
    rng = np.random.default_rng(seed)
    fields = {f: [] for f in ("qpos", "qvel", "ctrl", "mocap_pos", "mocap_quat")}
    for _ in range(n):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng)
        mjd.mocap_pos[:] += rng.normal(size=mjd.mocap_pos.shape) * 0.2
        q = rng.normal(size=mjd.mocap_quat.shape)
        mjd.mocap_quat[:] = q / np.linalg.norm(q, axis=-1, keepdims=True)
        for f, v in fields.items():
            v.append(getattr(mjd, f).copy())
    ds = jax.tree.map(lambda x: np.stack([np.asarray(x)] * n), mjl.make_data(m))
    return ds.replace(**{f: np.stack(v) for f, v in fields.items()})


def _field(x, f):
    return x[f] if isinstance(x, dict) else getattr(x, f)


def _assert_close(got, want, fields, tol, what):
    for f in fields:
        a, b = np.asarray(_field(got, f)), np.asarray(_field(want, f))
        assert a.shape == b.shape, (what, f, a.shape, b.shape)
        scale = max(1.0, float(np.max(np.abs(b), initial=0.0)))
        err = float(np.max(np.abs(a - b), initial=0.0)) / scale
        assert err <= tol, f"{what}: {f} differs by {err:.3g} (relative), tolerance {tol}"


def assert_grads_equal(got, want, tol):
    """Every leaf of the fused path's gradients `got` is finite and equals the XLA path's `want` (not all zero)
    within tol, relative to max(1, max |want|)."""
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.all(np.isfinite(a)) and np.max(np.abs(b)) > 0
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol * max(1.0, np.abs(b).max()))


# Model floats drawn per environment: each becomes a per-environment input of the kernels that read it (the launch's
# custom_vmap rule, kernels/launch.py); the static tables stay shared
RANDOMIZED = {"geom_friction": (0.5, 1.5), "body_mass": (0.7, 1.4), "body_inertia": (0.8, 1.25),
              "dof_damping": (0.5, 2.0), "dof_frictionloss": (0.5, 1.5), "geom_solref": (0.8, 1.25),
              "geom_size": (0.95, 1.05), "jnt_range": (0.9, 1.1), "opt.impratio": (0.8, 1.25),
              "opt.tolerance": (0.5, 2.0)}  # fmt: skip


def randomized(m, n, seed=0, ranges=None):
    """n Models drawn from `m` (`envs.scale_randomizer` of RANDOMIZED, or `ranges`): every Model leaf gains a leading
    axis of size n (as `jax.vmap(randomize)` returns them)."""
    rnd = envs.scale_randomizer(RANDOMIZED if ranges is None else ranges)
    return jax.jit(jax.vmap(rnd, in_axes=(None, 0)))(m, jax.random.split(jax.random.PRNGKey(seed), n))


def spread(x) -> float:
    """The largest difference between the environments (axis 0) of a batched field, relative to max(1, max |x|)."""
    x = np.asarray(x)
    return float(np.max(np.ptp(x, axis=0))) / max(1.0, float(np.max(np.abs(x))))


def _xfrc(xipos, subtree_com):
    """Cartesian wrenches on every body (nbody, 6) that vary with the state (numpy or jax arrays)."""
    xp = jp if isinstance(xipos, jax.Array) else np
    return xp.concatenate([xp.cos(xipos), xp.sin(subtree_com)], axis=-1)


def _stages(m, d):
    """Every fused stage once: fwd_position (the tree pass and the factorisation), fwd_velocity (the velocity
    pass), fwd_acceleration (with wrenches on every body and applied forces) and (M + diag(shift))^-1 x for a vector
    x and shift of the state: a dict of their fields.
    Constraints are disabled: the rows kernel (kernels/rows.py) has its own tests (test_kernels_rows.py) and would
    add its interpret-mode compilation to every test here; the whole fused step (test_step_equals_xla) keeps it."""
    m = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | DisableBit.CONSTRAINT))
    d = fwd.fwd_velocity(m, fwd.fwd_position(m, d))
    x = jp.cos(d.qvel) + d.qfrc_bias
    shift = 0.01 + 0.1 * d.qvel**2
    out = {f: getattr(d, f) for f in TREE_FIELDS + FACTOR_FIELDS + VELOCITY_FIELDS + ("warning_number",)}
    out.update(solve_shifted=kernels.solve_shifted(m, d, shift, x))
    acc = fwd.fwd_acceleration(m, d.replace(xfrc_applied=_xfrc(d.xipos, d.subtree_com), qfrc_applied=jp.sin(d.qvel)))
    out.update({f: getattr(acc, f) for f in ACCELERATION_FIELDS})
    return out


# one jitted function each, shared by every test (each model and configuration traces it once)
_position = jax.jit(_stages)
_position_batched = jax.jit(jax.vmap(_stages, in_axes=(None, 0)))


@pytest.fixture(scope="module")
def models():
    cache = {}

    def get(name):
        if name not in cache:
            mjm, m = _load(name)
            cache[name] = (mjm, m, _states(mjm, m, 3))
        return cache[name]

    return get


def _unbatched(ds, i=0):
    """Environment i of a batch, as host numpy arrays (CI time: an eager slice compiles a small program per shape)."""
    return jax.tree.map(lambda x: np.asarray(x)[i], ds)


# ---- configuration ----------------------------------------------------------------------------------------------


def test_config_kernels_is_a_static_value():
    """Validated, part of jit's cache key (two traces), 'auto' resolved by the backend at trace time."""
    with pytest.raises(ValueError, match="kernels"):
        mjl.Config(kernels="triton")
    with pytest.raises(ValueError, match="kernel_layout"):
        mjl.Config(kernel_layout="rows")
    assert mjl.Config().kernels == "auto"
    assert config_mod.kernels(mjl.Config()) == "xla"  # on a GPU too, until the fused path is faster there
    assert config_mod.kernels(mjl.Config(kernels="fused")) == "fused"
    m = mjl.load_mjcf("cartpole")
    assert mjl.configure(m, kernels="fused").config.kernels == "fused"
    traces = []

    @jax.jit
    def pos(m, d):  # (cheap to compile: the values are compared by the tests below)
        traces.append(m.config.kernels)
        return d.qpos * 2.0

    d = mjl.make_data(m)
    pos(mjl.configure(m, kernels="xla"), d)
    pos(mjl.configure(m, kernels="fused"), d)
    pos(mjl.configure(m, kernels="xla"), d)
    assert traces == ["xla", "fused"]


def _done(m, d) -> tuple:
    """The stages `kernels.tree_pass` computed (traced only)."""
    done = []
    jax.eval_shape(lambda d: done.append(kernels.tree_pass(m, d)[1]), d)
    return done[0]


def _velocity_done(m, d) -> tuple:
    """The stages `kernels.velocity_pass` computed (traced only), besides fwd_velocity_extras (computed wherever the
    model has tendons or actuators, kernels/transmission.py)."""
    done = []
    jax.eval_shape(lambda d: done.append(kernels.velocity_pass(m, d)[1]), d)
    assert (done[0][-1:] == ("fwd_velocity_extras",)) == bool(m.ntendon or m.nactuator), done[0]
    return tuple(n for n in done[0] if n != "fwd_velocity_extras")


PASSIVE_XLA = """
<mujoco>
  {option}
  <worldbody>
    <body {body}>
      <joint type="hinge" stiffness="1" damping="0.1" {joint}/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
    </body>
  </worldbody>
</mujoco>
"""
PASSIVE_TENDON = """
<mujoco>
  <worldbody>
    <body>
      <joint name="a" type="hinge"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
    </body>
  </worldbody>
  <tendon><fixed stiffness="1"><joint joint="a" coef="1"/></fixed></tendon>
</mujoco>
"""


def test_stage_list_skips_what_the_kernel_computed():
    m = mjl.load_mjcf("cartpole")
    d = mjl.make_data(m)
    assert _done(mjl.configure(m, kernels="xla"), d) == ()
    mf = mjl.configure(m, kernels="fused")
    assert _done(mf, d) == ("kinematics", "com_pos", "crb", "factor_m", "transmission")
    assert _velocity_done(mf, d) == ("com_vel", "passive", "rne")
    # a tendon's spring is the kernel's (kernels/passive.py); passive forces with terms the kernel does not compute
    # stay XLA: gravity compensation, a medium, a plastic spring; and with springs and dampers both disabled (zeros)
    mt = mjl.configure(oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(PASSIVE_TENDON)), kernels="fused")
    assert _velocity_done(mt, mjl.make_data(mt)) == ("com_vel", "passive", "rne")
    for xml in (PASSIVE_XLA.format(body='gravcomp="0.5"', option="", joint=""),
                PASSIVE_XLA.format(body="", option='<option density="1.2"/>', joint=""),
                PASSIVE_XLA.format(body="", option="", joint='springyield="0.2"'),
                PASSIVE_XLA.format(body="", joint="",
                                   option='<option><flag spring="disable" damper="disable"/></option>')):
        mx = mjl.configure(oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml)), kernels="fused")
        assert _velocity_done(mx, mjl.make_data(mx)) == ("com_vel", "rne"), xml
    md = mjl.configure(oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(PASSIVE_XLA.format(
        body="", joint="", option='<option><flag spring="disable"/></option>'))), kernels="fused")  # fmt: skip
    assert _velocity_done(md, mjl.make_data(md)) == ("com_vel", "passive", "rne")
    # the dense Cholesky factorisation (Config.mass_factorization) stays XLA, and so do the solves
    md = mjl.configure(m, kernels="fused", mass_factorization="dense")
    assert _done(md, d) == ("kinematics", "com_pos", "crb", "transmission")
    assert "pallas_call" not in str(jax.make_jaxpr(lambda d: fwd.fwd_acceleration(md, d))(d))
    assert "name=fwd_acceleration" in str(jax.make_jaxpr(lambda d: fwd.fwd_acceleration(mf, d))(d))


# ---- the tree pass: fused == XLA --------------------------------------------------------------------------------

# not slow: cartpole in the default layout and the model with every joint type in lanes_first (each layout's lane
# I/O and every joint type's code, one fused program each; CI time: cartpole-lanes_first, cartpole-lanes_mixed and
# joints-lanes_last, a second program of the same kernels, are slow; lanes_mixed's lane I/O is
# test_layouts_equal_bitwise's); the rest (interpret mode compiles slowly) in the slow selection
CASES = [("cartpole", "lanes_last"), ("joints", "lanes_first")] + [
    pytest.param(name, layout, marks=pytest.mark.slow)
    for name, layout in [("cartpole", "lanes_first"), ("cartpole", "lanes_mixed"), ("joints", "lanes_last"),
                         ("humanoid", "lanes_last"),
                         ("tendon_armature", "lanes_last"), ("mjx_humanoid", "lanes_last"),
                         ("mjx_humanoid", "lanes_first")]]  # fmt: skip


@pytest.mark.parametrize("name,layout", CASES)
def test_tree_pass_equals_xla(models, name, layout):
    """Every field of kinematics, com_pos, crb (qM in the model's layout) and the factorisation (qLD in the XLA
    path's elimination order, qLDiagInv), of com_vel and rne, and the two solves, for a batch of environments (one
    launch per kernel)."""
    mjm, m, ds = models(name)
    mx = mjl.configure(m, kernels="xla")
    mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
    want, got = _position_batched(mx, ds), _position_batched(mf, ds)
    _assert_close(got, want, STAGE_FIELDS, ROUNDOFF, f"{name} {layout}")
    np.testing.assert_array_equal(got["warning_number"], want["warning_number"])


@pytest.mark.slow
def test_sparse_mass_matrix(models):
    """qM's tree-sparse layout (written entry by entry at its madr addresses) and the actuator armature on it."""
    mjm, m, _ = models("joints")
    mx = mjl.configure(m, kernels="xla", mass_matrix="sparse")
    mf = mjl.configure(m, kernels="fused", mass_matrix="sparse")
    ds = _states(mjm, mx, 3)
    assert ds.qM.shape == (3, tree.support.tables(m).m_rows.size)
    _assert_close(_position_batched(mf, ds), _position_batched(mx, ds), STAGE_FIELDS, ROUNDOFF, "sparse")


def test_clamped_pivot(models):
    """A singular mass matrix (massless cart and pole): pivots below MINVAL are clamped, later rows use the clamped
    pivot, and warning_number[INERTIA] counts the factorisation, as on the XLA path (mj_factorM)."""
    _, m, ds = models("cartpole")
    m = m.replace(body_mass=m.body_mass * 0.0, body_inertia=m.body_inertia * 0.0, dof_armature=m.dof_armature * 0.0)
    want = _position_batched(mjl.configure(m, kernels="xla"), ds)
    got = _position_batched(mjl.configure(m, kernels="fused"), ds)
    assert np.all(np.asarray(want["warning_number"])[:, mjl.Warning.INERTIA] > 0)
    np.testing.assert_array_equal(got["warning_number"], want["warning_number"])
    _assert_close(got, want, STAGE_FIELDS, ROUNDOFF, "clamped")


def test_tendon_armature_leaves_crb_to_xla(models):
    _, m, ds = models("tendon_armature")
    assert not tree.crb_fused(m)
    assert _done(mjl.configure(m, kernels="fused"), _unbatched(ds)) == ("kinematics", "com_pos")


def test_fused_tree_pass_matches_mujoco(models):
    """The fused fields against MuJoCo itself (mj_fwdPosition, mj_fwdVelocity, mj_fwdAcceleration), as the XLA path
    is tested (qLD's layout is this library's own: the factorisation is checked through qacc_smooth's solve). In
    lanes_first: the program of test_tree_pass_equals_xla[joints-lanes_first] (CI time)."""
    mjm, m, ds = models("joints")
    mf = mjl.configure(m, kernels="fused", kernel_layout="lanes_first")
    got = jax.tree.map(np.asarray, _position_batched(mf, ds))
    state = {f: np.asarray(getattr(ds, f)) for f in ("qpos", "qvel", "mocap_pos", "mocap_quat")}
    for i in range(2):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = state["qpos"][i], state["qvel"][i]
        mjd.mocap_pos[:], mjd.mocap_quat[:] = state["mocap_pos"][i], state["mocap_quat"][i]
        mujoco.mj_fwdPosition(mjm, mjd)
        mujoco.mj_fwdVelocity(mjm, mjd)
        want = oracle.data_from_mujoco(m, mjm, mjd)
        _assert_close(_unbatched(got, i), want, TREE_FIELDS + VELOCITY_FIELDS, 1e-9, f"joints env {i} vs MuJoCo")
        mjd.xfrc_applied[:], mjd.qfrc_applied[:] = _xfrc(mjd.xipos, mjd.subtree_com), np.sin(mjd.qvel)
        mjd.qfrc_actuator[:] = ds.qfrc_actuator[i]  # `_stages` runs no actuation
        mujoco.mj_fwdAcceleration(mjm, mjd)
        want = oracle.data_from_mujoco(m, mjm, mjd)
        _assert_close(_unbatched(got, i), want, ACCELERATION_FIELDS, 1e-9, f"joints env {i} vs MuJoCo")


@pytest.mark.slow
def test_several_blocks(models):
    """Five environments in blocks of two (three programs, the last one half full), the launcher called directly."""
    _, m, ds = models("joints")
    ds = jax.tree.map(lambda x: jp.concatenate([x, x[:2] * 1.0]), ds)  # 5 environments
    k, x = tree.kernel(m, _unbatched(ds))
    for layout in ("lanes_last", "lanes_first", "lanes_mixed"):

        def run(qpos, mocap_pos, mocap_quat, layout=layout):
            how = launch.Launch(layout=layout, block=2, interpret=True)
            return launch.call(k, dict(x, qpos=qpos, mocap_pos=mocap_pos, mocap_quat=mocap_quat), how)

        out = jax.jit(jax.vmap(run))(ds.qpos, ds.mocap_pos, ds.mocap_quat)
        want = _position_batched(mjl.configure(m, kernels="xla"), ds)
        _assert_close(out, want, TREE_FIELDS, ROUNDOFF, f"blocks of 2, {layout}")


def _toy_kernel() -> launch.Kernel:
    """A small kernel that uses every lane I/O of launch.IO: read / read_vec of per-environment and shared inputs,
    write / write_vec / load / load_vec of outputs (one read back), write_at / load_at, a scratch output."""

    def body(io):
        a = io.read_vec("a", 0, 3)
        for k in range(3):
            io.write("y", k, a[k] * io.read("s", 0))
        io.write_vec("y", 1, tuple(io.load("y", k) + io.read("b", k) for k in range(3)))
        io.write("_t", 0, io.read("b", 3) - 1.0)
        b = io.read_vec("b", 0, 2)
        io.write_vec("z", 0, (b[0], b[1], io.load("_t", 0), 0.0))
        y = io.load_vec("y", 1, 3)
        io.write_at("z", jp.full((io.block,), 3, jp.int32), y[0] + io.load_at("z", jp.full((io.block,), 2, jp.int32)))

    def xla(x):
        y0 = x["a"] * x["s"][0]
        y1 = y0 + x["b"].reshape(-1)[:3]
        t = x["b"][1, 1] - 1.0
        z = jp.stack([x["b"][0, 0], x["b"][0, 1], t, y1[0] + t])
        return {"y": jp.stack([y0, y1]), "z": z}

    return launch.Kernel("toy", {"a": (3,), "b": (2, 2), "s": (1,)}, {"y": (2, 3), "z": (4,), "_t": (1,)}, {},
                         body, xla)  # fmt: skip


def test_layouts_equal_bitwise():
    """The three layouts (packed lanes_last, lanes_first, lanes_mixed: packed inputs and one output buffer per
    field) give the same outputs bit for bit, the XLA twin's, in blocks of two (5 environments, the last block half
    full); lanes_mixed lowers to one Triton kernel with masked lanes and no slice or transpose of its outputs."""
    k = _toy_kernel()
    rng = np.random.default_rng(0)
    x = {"a": rng.standard_normal((5, 3)), "b": rng.standard_normal((5, 2, 2)), "s": np.array([1.5])}
    want = jax.vmap(k.xla, in_axes=({"a": 0, "b": 0, "s": None},))(x)
    outs = {}
    for layout in config_mod.KERNEL_LAYOUTS:
        how = launch.Launch(layout=layout, block=2, interpret=True)
        run = jax.vmap(lambda a, b, how=how: launch.call(k, {"a": a, "b": b, "s": x["s"]}, how))
        outs[layout] = jax.tree.map(np.asarray, run(x["a"], x["b"]))
        for n in want:
            np.testing.assert_array_equal(outs[layout][n], want[n], f"{n} {layout}")
    for n in want:
        np.testing.assert_array_equal(outs["lanes_mixed"][n], outs["lanes_last"][n])
    how = launch.Launch(layout="lanes_mixed", block=2)
    run = jax.vmap(lambda a, b: launch.call(k, {"a": a, "b": b, "s": x["s"]}, how))
    ops = _op_names(_lower_cuda(run, x["a"].astype(np.float32), x["b"].astype(np.float32)))
    assert ops.count("stablehlo.custom_call") == 1
    assert "stablehlo.slice" not in ops and ops.count("stablehlo.transpose") == 1, ops  # (the inputs' packing)


# slow (CI time, ~5.5 worker-s: a nested-vmap fused program of its own): launch.py's custom_vmap rule folds a vmap over
# Models and one over environments into one environment axis, vmapped Model floats becoming per-environment inputs,
# whatever the kernel: tests/test_kernels_smooth.py::test_vmapped_models_equal_xla keeps the nested vmap (Models x
# environments, a lane kernel) in CI, test_kernels_rows.py::test_vmapped_models_tiled_equal_xla[pyramidal] the row tiles
@pytest.mark.slow
def test_vmap_over_model_and_environments(models):
    """Nested vmap (masses of 2 models x 3 environments): the rule folds both axes into one environment axis; a
    vmapped Model float becomes a per-environment input."""
    _, m, ds = models("cartpole")
    masses = np.stack([np.asarray(m.body_mass), np.asarray(m.body_mass) * 1.5])
    mf = mjl.configure(m, kernels="fused")
    got = jax.jit(jax.vmap(lambda mass: jax.vmap(fwd.fwd_position, in_axes=(None, 0))(mf.replace(body_mass=mass),
                                                                                      ds)))(masses)  # fmt: skip
    # the XLA reference one Model at a time, by test_tree_pass_equals_xla[cartpole-lanes_last]'s compiled program
    # (CI time: no nested-vmap XLA program of its own)
    mx = mjl.configure(m, kernels="xla")
    per_model = [_position_batched(mx.replace(body_mass=mass), ds) for mass in masses]
    want = {f: np.stack([np.asarray(w[f]) for w in per_model]) for f in TREE_FIELDS}
    _assert_close(got, want, TREE_FIELDS, ROUNDOFF, "models x environments")


def test_batched_equals_unbatched(models):
    """One environment (no vmap: a launch with one lane) gives the batch's values (XLA:CPU's vectorised code for
    other shapes may round differently)."""
    _, m, ds = models("cartpole")
    mf = mjl.configure(m, kernels="fused")
    batched = _position_batched(mf, ds)
    for i in range(3):
        _assert_close(_position(mf, _unbatched(ds, i)), _unbatched(batched, i), STAGE_FIELDS, ROUNDOFF, f"env {i}")


# ---- derivatives ------------------------------------------------------------------------------------------------


def _loss(m, qpos, mass, d, scale):
    """A nonlinear function of every fused field (so the cotangents depend on the primal values). Each field is
    divided by its scale (a constant: 1 + its largest magnitude on the XLA path) first: sin of a large value (1/D of
    a light body is ~1e3) would turn the primal's round-off into a cotangent difference of its own."""
    out = _stages(m.replace(body_mass=mass), d.replace(qpos=qpos))
    return sum(jp.sum(jp.sin(out[f] / scale[f])) for f in STAGE_FIELDS)


@pytest.mark.slow  # CI time: the kernels' gradient rule (~36 s in interpret mode); test_step_equals_xla: their values
@pytest.mark.parametrize("name", ["cartpole", "joints"])
def test_gradients_equal_xla(models, name):
    """Reverse mode (w.r.t. qpos and a Model float), forward mode, and vmap of grad through every fused stage (the
    tree pass and the factorisation, the velocity pass, both solves): the XLA path's derivatives."""
    _, m, ds = models(name)
    d = _unbatched(ds)
    t = jp.asarray(np.random.default_rng(1).normal(size=m.nq))
    ref = _position_batched(mjl.configure(m, kernels="xla"), ds)
    scale = {f: 1.0 + float(np.max(np.abs(ref[f]), initial=0.0)) for f in STAGE_FIELDS}
    loss = functools.partial(_loss, scale=scale)

    @jax.jit
    def derivatives(m, d, ds):
        grad = jax.grad(loss, argnums=(1, 2))(m, d.qpos, m.body_mass, d)
        tangent = jax.jvp(lambda q: loss(m, q, m.body_mass, d), (d.qpos,), (t,))[1]
        batched = jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0, None, 0))(m, ds.qpos, m.body_mass, ds)
        return grad, tangent, batched

    got = derivatives(mjl.configure(m, kernels="fused"), d, ds)
    want = derivatives(mjl.configure(m, kernels="xla"), d, ds)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.all(np.isfinite(a))
        np.testing.assert_allclose(a, b, rtol=GRAD_TOL, atol=GRAD_TOL * max(1.0, np.abs(b).max()))


PASSIVE_PARAMS = ("jnt_stiffness", "jnt_stiffnesspoly", "qpos_spring", "dof_damping", "dof_dampingpoly",
                  "actuator_damping", "actuator_dampingpoly", "actuator_gear")  # fmt: skip


@pytest.mark.slow
def test_passive_gradients_equal_xla(models):
    """Reverse mode through the fused passive forces (kernels/passive.py) w.r.t. qpos, qvel and every Model float
    the kernel reads: the XLA path's derivatives (the kernel's inputs carry the Model floats to the twin)."""
    _, m, ds = models("joints")
    d = _unbatched(ds)

    def loss(params, qpos, qvel, m):
        out = _stages(m.replace(**params), d.replace(qpos=qpos, qvel=qvel))
        return sum(jp.sum(jp.sin(out[f] / 10.0)) for f in passive.OUTPUTS)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))
    params = {n: getattr(m, n) for n in PASSIVE_PARAMS}
    got = grad(params, d.qpos, d.qvel, mjl.configure(m, kernels="fused"))
    want = grad(params, d.qpos, d.qvel, mjl.configure(m, kernels="xla"))
    assert_grads_equal(got, want, GRAD_TOL)


# float32 fused and XLA passive forces differ by float32 round-off (relative to max(1, max |field|))
FLOAT32_TOL = 1e-5


@pytest.mark.slow
def test_passive_flags_and_float32(models):
    """The fused passive forces with springs or dampers disabled (zeros, as on the XLA path), and in float32."""
    _, m, ds = models("joints")
    for flag in (DisableBit.SPRING, DisableBit.DAMPER):
        mf = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | flag))
        want = _position_batched(mjl.configure(mf, kernels="xla"), ds)
        got = _position_batched(mjl.configure(mf, kernels="fused"), ds)
        _assert_close(got, want, passive.OUTPUTS, ROUNDOFF, f"disabled {flag!r}")
        zero = "qfrc_spring" if flag == DisableBit.SPRING else "qfrc_damper"
        assert not np.any(np.asarray(got[zero])) and np.any(np.asarray(got["qfrc_passive"]))
    m32, ds32 = _float32(m), _float32(ds)
    want = _position_batched(mjl.configure(m32, kernels="xla"), ds32)
    got = _position_batched(mjl.configure(m32, kernels="fused"), ds32)
    assert got["qfrc_passive"].dtype == jp.float32
    _assert_close(got, want, VELOCITY_FIELDS, FLOAT32_TOL, "float32")


def test_twin_reads_only_the_kernel_inputs(models):
    """custom_jvp's rule differentiates the XLA twin with respect to the kernel's inputs only: every Model or Data
    field the twin reads must be one of them (else its derivative would be silently dropped)."""
    for name in ("joints", "tendon_armature"):
        _, m, ds = models(name)
        d = _unbatched(ds)
        p = tree._plan(m)

        def twin(m, d, x, p=p):
            return tree._xla(m, d, p, x)

        jaxpr = jax.make_jaxpr(twin)(m, d, tree._inputs(m, d, p))
        closed = jax.tree.leaves((m, d))
        used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.out_avals))[1]
        assert not any(used[: len(closed)]), f"{name}: the twin reads Model/Data leaves that are not kernel inputs"
        assert any(used[len(closed) :])
    _, m, ds = models("joints")
    d = _unbatched(ds)
    twins = {"velocity": lambda m, d, x: velocity.kernel(m, d)[0].xla(x),
             "solve_shifted": lambda m, d, x: factor._shifted_kernel(m, d).xla(x),
             "acceleration": lambda m, d, x: factor.acceleration_kernel(m).xla(x)}  # fmt: skip
    acc = ("qfrc_passive", "qfrc_bias", "qfrc_applied", "qfrc_actuator", "xfrc_applied", "xipos", "subtree_com",
           "cdof", "qLD", "qLDiagInv")  # fmt: skip
    inputs = {"velocity": velocity.kernel(m, d)[1], "solve_shifted": dict(qM=d.qM, shift=d.qvel, x=d.qvel),
              "acceleration": {n: getattr(d, n) for n in acc}}  # fmt: skip
    for name, twin in twins.items():
        jaxpr = jax.make_jaxpr(twin)(m, d, inputs[name])
        closed = jax.tree.leaves((m, d))
        used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.out_avals))[1]
        assert not any(used[: len(closed)]), f"{name}: the twin reads Model/Data leaves that are not kernel inputs"
        assert all(used[len(closed) :]), name


# ---- whole steps ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["cartpole", pytest.param("joints", marks=pytest.mark.slow),
                                  pytest.param("humanoid", marks=pytest.mark.slow)])  # fmt: skip
def test_step_equals_xla(models, name):
    """Three steps (contacts, constraints, the integrator) with every fused kernel equal the XLA path's. Cartpole
    runs with the Euler integrator (its joint damping: the fused factorisation and solve of M + h B). Three more
    environments diverge in the first step (a NaN qpos, an infinite qvel, a huge applied force: BADQPOS, BADQVEL,
    BADQACC): both paths count the same warnings (exactly) and reset them to the same state."""
    _, m, ds = models(name)
    if name == "cartpole":
        m = m.replace(opt=m.opt.replace(integrator=int(mjl.IntegratorType.EULER)))
    ds = _with_diverged(ds)

    def roll(m, d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=3)[0]

    roll = jax.jit(jax.vmap(roll, in_axes=(None, 0)))
    want, got = roll(mjl.configure(m, kernels="xla"), ds), roll(mjl.configure(m, kernels="fused"), ds)
    fields = [f.name for f in dataclasses.fields(mjl.Data) if isinstance(getattr(want, f.name), jax.Array)
              and jp.issubdtype(getattr(want, f.name).dtype, jp.floating)]  # fmt: skip
    _assert_close(got, want, fields, STEP_TOL, f"{name}: 3 steps")
    wn = np.asarray(want.warning_number)
    np.testing.assert_array_equal(np.asarray(got.warning_number), wn)
    bad = [mjl.Warning.BADQPOS, mjl.Warning.BADQVEL, mjl.Warning.BADQACC]
    np.testing.assert_array_equal(wn[-3:][:, bad], np.eye(3, dtype=wn.dtype))


def _with_diverged(ds):
    """The batch `ds` (host numpy leaves) and three copies of its first environment that diverge in a step: a NaN in
    qpos, an infinite qvel, an applied force of 1e30 on every dof (qacc beyond mjMAXVAL)."""
    extra = jax.tree.map(lambda x: np.stack([np.asarray(x)[0]] * 3), ds)
    qpos, qvel, qfrc = (np.array(getattr(extra, f)) for f in ("qpos", "qvel", "qfrc_applied"))
    qpos[0, -1], qvel[1, 0], qfrc[2] = np.nan, np.inf, 1e30
    extra = extra.replace(qpos=qpos, qvel=qvel, qfrc_applied=qfrc)
    return jax.tree.map(lambda a, b: np.concatenate([np.asarray(a), b]), ds, extra)


@pytest.mark.slow
def test_step_gradient_equals_xla(models):
    """jax.grad through a whole RK4 step (the solver's implicit gradient included), with respect to the state and the
    Model, is the XLA path's."""
    _, m, ds = models("cartpole")
    d = _unbatched(ds)

    def final(m, qvel):
        d2 = mjl.step(m, d.replace(qvel=qvel))
        return jp.sum(d2.qpos**2) + jp.sum(jp.sin(d2.qvel))

    # with respect to the Model too (a traced jit argument: RK4's merged step differentiated inside its own jit)
    g = jax.jit(jax.grad(final, argnums=(0, 1)))
    a, b = g(mjl.configure(m, kernels="fused"), d.qvel), g(mjl.configure(m, kernels="xla"), d.qvel)
    np.testing.assert_allclose(np.asarray(a[1]), np.asarray(b[1]), rtol=GRAD_TOL, atol=GRAD_TOL)
    assert_grads_equal([a[0].dof_damping, a[0].body_mass], [b[0].dof_damping, b[0].body_mass], GRAD_TOL)


def test_twins_close_over_no_tracer(models, monkeypatch):
    """No kernel's XLA twin (its custom_jvp rule, traced lazily and possibly in a later trace than the call) reads an
    array of the traced step it closes over: every tracer it reads is a kernel input. The twins of the kernels of
    traced (not compiled) fused step of "joints" (every joint type, a mocap body, cameras, plane contacts, Euler with
    implicit damping: kernels/advance.py's euler, Newton). Before: the tree pass's twin read the empty mocap arrays,
    the contact parameters' geom_adhesion."""
    _, m, ds = models("joints")
    seen = twin_tracers(monkeypatch, m, _unbatched(ds))
    assert set(seen) == {"tree_pass", "velocity_pass", "fwd_acceleration", "constraint_rows", "solve_newton",
                         "collide_primitive", "contact_params", "euler"}, sorted(seen)  # fmt: skip
    assert {n: a for n, a in seen.items() if a} == {}


# ---- the integrator's update (kernels/advance.py) ----------------------------------------------------------------


def _advance(m, d):
    """integrate._advance (Euler's and the implicit integrators' update) with a qacc of the state."""
    d = d.replace(qacc=3.0 * jp.sin(d.qvel) - 0.5)
    d = integrate._advance(m, d, d.act_dot, d.qacc)
    return {"qpos": d.qpos, "qvel": d.qvel}


_advance_batched = jax.jit(jax.vmap(_advance, in_axes=(None, 0)))


def test_advance_equals_xla(models):
    """qvel + h qacc and mj_integratePos (every joint type; a free joint at rest: omega = 0) fused == XLA, one
    launch for the batch."""
    _, m, ds = models("joints")
    qvel = np.array(ds.qvel)
    qvel[0, 3:6] = 0.0
    ds = ds.replace(qvel=qvel)
    assert "advance" in str(jax.make_jaxpr(_advance)(mjl.configure(m, kernels="fused"), _unbatched(ds)))
    want = _advance_batched(mjl.configure(m, kernels="xla"), ds)
    got = _advance_batched(mjl.configure(m, kernels="fused"), ds)
    _assert_close(got, want, ("qpos", "qvel"), ROUNDOFF, "advance")


@pytest.mark.slow
def test_advance_float32_and_gradients(models):
    """The fused update in float32, and its derivatives w.r.t. qpos, qvel, qacc and the timestep: the XLA path's."""
    _, m, ds = models("joints")
    m32, ds32 = _float32(m), _float32(ds)
    want = _advance_batched(mjl.configure(m32, kernels="xla"), ds32)
    got = _advance_batched(mjl.configure(m32, kernels="fused"), ds32)
    assert got["qpos"].dtype == jp.float32
    _assert_close(got, want, ("qpos", "qvel"), FLOAT32_TOL, "advance float32")
    d = _unbatched(ds)

    def loss(qpos, qvel, qacc, h, m):
        m = m.replace(opt=m.opt.replace(timestep=h))
        d2 = integrate._advance(m, d.replace(qpos=qpos, qvel=qvel), d.act_dot, qacc)
        return jp.sum(jp.sin(3.0 * d2.qpos)) + jp.sum(jp.cos(d2.qvel))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3)))
    args = (d.qpos, d.qvel, jp.sin(d.qvel), m.opt.timestep)
    assert_grads_equal(grad(*args, mjl.configure(m, kernels="fused")), grad(*args, mjl.configure(m, kernels="xla")),
                       GRAD_TOL)  # fmt: skip


# ---- Triton lowering and the program's size ---------------------------------------------------------------------


def _compiled_kernels(monkeypatch):
    """Trace with the kernels compiled (not interpreted), as on a GPU, so that lowering for "cuda" on this CPU
    produces Triton calls."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))


def _float32(tree_):
    return jax.tree.map(lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x, tree_)


def _float32_host(tree_):
    """`_float32` on the host (numpy leaves; CI time: an eager astype compiles one tiny program per leaf)."""

    def cast(x):
        x = np.asarray(x)
        return x.astype(np.float32) if np.issubdtype(x.dtype, np.floating) else x

    return jax.tree.map(cast, tree_)


def _lower_cuda(fn, *args) -> str:
    return jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


# float32 in the slow selection (test_fused_step_program_size lowers the float32 humanoid step's kernels too)
@pytest.mark.parametrize("dtype", [pytest.param("float32", marks=pytest.mark.slow), "float64"])
def test_lowers_to_triton(models, monkeypatch, dtype):
    """The kernels lower to Triton (Pallas' GPU backend) for both layouts and a batch that is not a multiple of the
    block (masked lanes): tensor shapes, indexing and control flow are Triton's. No GPU needed."""
    _compiled_kernels(monkeypatch)
    _, m, ds = models("joints")
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 70)[:200], ds)  # 200 = 128 + 72 (on the host)
    if dtype == "float32":
        m, batch = _float32_host(m), _float32_host(batch)
    # CI time: in float64 lanes_last lowers solve_shifted alone: the tree pass, velocity pass, fwd_acceleration and
    # advance kernels are lowered in lanes_last (the default layout) by test_fused_step_program_size (the humanoid's
    # whole step, 8 environments: masked lanes), which has no solve_shifted (the humanoid disables eulerdamp);
    # float32 (slow) lowers all of them in both layouts
    for layout in ("lanes_last", "lanes_first"):
        mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
        if layout == "lanes_last" and dtype == "float64":
            shifted = jax.vmap(lambda m, d: kernels.solve_shifted(m, d, 0.01 + d.qvel**2, d.qvel), in_axes=(None, 0))
            assert _lower_cuda(shifted, mf, batch).count("__gpu$xla.gpu.triton") == 1, layout
            continue
        text = _lower_cuda(jax.vmap(_stages, in_axes=(None, 0)), mf, batch)
        # tree, velocity, fwd_acceleration, solve_shifted (`_stages` disables constraints: the rows kernel's lowering is
        # test_kernels_rows.py::test_lowers_to_triton, the whole step's test_fused_step_program_size)
        assert text.count("__gpu$xla.gpu.triton") == 4, layout
        text = _lower_cuda(jax.vmap(_advance, in_axes=(None, 0)), mf, batch)
        assert text.count("__gpu$xla.gpu.triton") == 1, layout


def _op_names(text: str) -> list:
    """StableHLO operations of a lowered program (constants and the return left out)."""
    ops = re.findall(r"^\s*(?:%\S+ = )?\"?(stablehlo\.[a-z_]+)", text, re.MULTILINE)
    return [o for o in ops if o not in ("stablehlo.constant", "stablehlo.return")]


def _ops(text: str) -> int:
    return len(_op_names(text))


@pytest.fixture(scope="module")
def humanoid_gpu_step(models):
    """(float32 Model, batch of 8, `jax.jit(vmap(step)).trace` of the fused Model) of the MJX humanoid's step as a GPU
    runs it: contacts on, the kernels compiled (not interpreted), the "auto" fields resolved as off the CPU
    (config.AUTO_OFF_CPU). Traced once for test_fused_step_program_size (its lowering) and
    test_no_weak_literal_selects_in_kernels (its jaxpr) (CI time)."""
    _, m, ds = models("mjx_humanoid")
    m = _float32_host(m)  # (on the host: no eager programs)
    batch = _float32_host(jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 3)[:8], ds))
    step = jax.vmap(mjl.step, in_axes=(None, 0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
        traced = jax.jit(step).trace(mjl.configure(m, kernels="fused", **config_mod.AUTO_OFF_CPU), batch)
    return m, batch, traced


# slow (CI time, 23 worker-s): a size guard, not an oracle; `benchmarks/fused_program_size.py` prints the same counts,
# and by default test_no_weak_literal_selects_in_kernels reads the same trace's kernels, test_kernels_smooth the step's
@pytest.mark.slow
def test_fused_step_program_size(models, monkeypatch, humanoid_gpu_step):
    """The MJX humanoid's step (float32, batch 8, contacts on) lowered for "cuda": FUSED_STEP_KERNELS Triton kernels
    and the remaining XLA operations, counted before XLA's fusion (fusions are the GPU compiler's, not measurable
    here). The XLA path's count is the reference; the fused count must stay at least FUSED_STEP_SAVED below it;
    the fused tree pass alone lowers to the kernel, layout operations and its warning count."""
    _compiled_kernels(monkeypatch)
    m, batch, fused_step = humanoid_gpu_step
    tree_pass = jax.vmap(lambda m, d: kernels.tree_pass(m, d)[0], in_axes=(None, 0))
    for layout in config_mod.KERNEL_LAYOUTS:
        ops = _op_names(_lower_cuda(tree_pass, mjl.configure(m, kernels="fused", kernel_layout=layout), batch))
        assert ops.count("stablehlo.custom_call") == 1, layout
        assert set(ops) <= LAYOUT_OPS | set(WARNING_OPS), (layout, sorted(set(ops)))
        assert all(ops.count(o) <= 1 for o in WARNING_OPS), (layout, [ops.count(o) for o in WARNING_OPS])
    step = jax.vmap(mjl.step, in_axes=(None, 0))
    auto = config_mod.AUTO_OFF_CPU  # the program a GPU runs: "auto" fields resolved as there, not as on this CPU
    fused = fused_step.lower(lowering_platforms=("cuda",)).as_text()  # (the fixture's trace, with these fields)
    xla = _lower_cuda(step, mjl.configure(m, kernels="xla", **auto), batch)
    n_fused, n_xla = _ops(fused), _ops(xla)
    n_kernels = fused.count("__gpu$xla.gpu.triton")
    print(f"humanoid step, StableHLO operations: fused {n_fused} (+{n_kernels} Triton kernels), XLA {n_xla}")
    assert n_kernels == FUSED_STEP_KERNELS and xla.count("__gpu$xla.gpu.triton") == 0
    assert n_fused < n_xla
    saved = n_xla - n_fused
    assert saved >= FUSED_STEP_SAVED, f"the kernels remove {saved} operations, {FUSED_STEP_SAVED} recorded"


def _weak_literal_selects(jaxpr, lits=frozenset(), inside=False) -> list:
    """select_n operations inside pallas_call kernels whose branch is a 0-d weakly typed literal (or a sub-jaxpr's
    input bound to one): source lines of mjx_lite for each."""
    from jax._src import core as jcore  # noqa: PLC0415
    from jax._src import source_info_util  # noqa: PLC0415

    found = []
    for e in jaxpr.eqns:
        if inside and e.primitive.name == "select_n":
            for a in e.invars[1:]:
                if (isinstance(a, jcore.Literal) or a in lits) and a.aval.shape == () and a.aval.weak_type:
                    found.append(source_info_util.summarize(e.source_info))
        inner_inside = inside or e.primitive.name == "pallas_call"
        for v in e.params.values():
            for sub in v if isinstance(v, (list, tuple)) else [v]:
                sub = sub.jaxpr if isinstance(sub, jcore.ClosedJaxpr) else sub
                if not isinstance(sub, jcore.Jaxpr):
                    continue
                bound = frozenset(i for o, i in zip(e.invars, sub.invars) if isinstance(o, jcore.Literal) or o in lits)
                found += _weak_literal_selects(sub, bound, inner_inside)
    return found


def test_no_weak_literal_selects_in_kernels(models, monkeypatch, humanoid_gpu_step):
    """Kernel code selects between Python numbers through `launch.where`: Pallas' Triton lowering (jax 0.11.2) gives
    a weakly typed literal branch of a 0-d select the predicate's type (i1), which failed the fused path's first GPU
    run ("AssertionError: ('i1', 'f32')") and would truncate an integer branch silently. The check reads the traced
    kernels (no GPU needed): the humanoid's step with contacts, unbatched (this CPU's resolution of the "auto"
    fields) and batched (the GPU's: `humanoid_gpu_step`'s trace, shared with test_fused_step_program_size; CI time)."""
    _compiled_kernels(monkeypatch)
    _, m, ds = models("mjx_humanoid")
    mf = mjl.configure(_float32_host(m), kernels="fused")
    for jaxpr in (jax.make_jaxpr(mjl.step)(mf, _float32_host(_unbatched(ds))).jaxpr, humanoid_gpu_step[2].jaxpr.jaxpr):
        assert "pallas_call" in str(jaxpr)
        assert _weak_literal_selects(jaxpr) == []
