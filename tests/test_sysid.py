"""sysid: parameters recovered from trajectories logged by MuJoCo C with perturbed parameters; bad input gives clear
errors. Slow: masses, damping and actuator gains of a 2-link arm (noise-free and with sensor noise), and friction
from a box sliding and tumbling on the floor (contacts in the data)."""

import jax

jax.config.update("jax_enable_x64", True)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import sysid  # noqa: E402

PENDULUM = """
<mujoco>
  <option timestep="0.01" integrator="Euler"/>
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-2 2" ctrllimited="true"/></actuator>
  <sensor><jointpos joint="hinge"/></sensor>
</mujoco>
"""
# The logs come from MuJoCo C and the fit runs our simulator: both agree to ~1e-15 per step on this model, so a
# noise-free fit recovers the parameters to round-off; 1e-6 leaves room for the LM stopping point.
NOISE_FREE_RTOL = 1e-6


def record(mjm, seed, T, qpos0=None, qvel0=None, ctrl_scale=1.0):
    """A log of T steps of mj_step with smooth random controls (a random walk, clipped into ctrlrange)."""
    rng = np.random.default_rng(seed)
    d = mujoco.MjData(mjm)
    if qpos0 is not None:
        d.qpos[:] = qpos0
    if qvel0 is not None:
        d.qvel[:] = qvel0
    u = np.cumsum(rng.normal(size=(T, mjm.nu)) * 0.3 * ctrl_scale, axis=0)
    if mjm.nu:
        u = np.clip(u, mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1])
    log = {"qpos": [], "qvel": [], "ctrl": [], "sensordata": []}
    for t in range(T):
        log["qpos"].append(d.qpos.copy())
        log["qvel"].append(d.qvel.copy())
        d.ctrl[:] = u[t]
        log["ctrl"].append(u[t].copy())
        mujoco.mj_step(mjm, d)
        log["sensordata"].append(d.sensordata.copy())
    log["qpos"].append(d.qpos.copy())
    log["qvel"].append(d.qvel.copy())
    return {k: np.asarray(v) for k, v in log.items()}


def test_pendulum_mass_recovered():
    """The pole's mass, 30 % heavier in MuJoCo C than in our model, is recovered from two 1.5 s logs."""
    mjm = mujoco.MjModel.from_xml_string(PENDULUM)
    mjm.body_mass[1] *= 1.3
    rng = np.random.default_rng(0)
    logs = [record(mjm, s, 150, qpos0=rng.uniform(-1, 1, 1)) for s in range(2)]
    m = mjl.load_mjcf_string(PENDULUM)
    fit = sysid.fit(m, logs, params=("body_mass", 1), window=10, iterations=12)
    assert isinstance(fit.model, mjl.Model)
    got = float(fit.model.body_mass[1])
    assert abs(got - mjm.body_mass[1]) < NOISE_FREE_RTOL * mjm.body_mass[1], fit.report()
    assert fit.params == {"body_mass[1]": got} and fit.initial == {"body_mass[1]": 1.0}
    assert fit.loss.shape == (13,) and fit.loss[-1] < 1e-9 * fit.loss[0]  # measured 3.6e-11 after 12 iterations
    assert fit.windows == 30
    text = fit.report()
    assert "body_mass[1]" in text and "+30.00%" in text
    # the other fields are untouched
    np.testing.assert_array_equal(np.asarray(fit.model.dof_damping), np.asarray(m.dof_damping))


def test_bad_input_gives_clear_errors():
    m = mjl.load_mjcf_string(PENDULUM)
    mjm = mujoco.MjModel.from_xml_string(PENDULUM)
    log = record(mjm, 0, 30)
    with pytest.raises(ValueError, match="'body_massx' is not a field"):
        sysid.fit(m, log, params="body_massx")
    with pytest.raises(ValueError, match="'jnt_type' is not a float Model field"):
        sysid.fit(m, log, params="jnt_type")
    with pytest.raises(ValueError, match="'nv' is not a float Model field"):
        sysid.fit(m, log, params="nv")
    with pytest.raises(ValueError, match="does not select"):
        sysid.fit(m, log, params=("body_mass", 7))
    with pytest.raises(ValueError, match="listed twice"):
        sysid.fit(m, log, params=[("body_mass", 1), "body_mass"])
    short = dict(log, qvel=log["qvel"][:-1])
    with pytest.raises(ValueError, match=r"logs\[0\]\['qvel'\] has shape \(30, 1\), expected \(31, 1\)"):
        sysid.fit(m, short, params="body_mass")
    with pytest.raises(ValueError, match=r"logs\[1\]\['sensordata'\]"):
        sysid.fit(m, [log, dict(log, sensordata=log["sensordata"][:, :0])], params="body_mass")
    with pytest.raises(ValueError, match="unknown entries"):
        sysid.fit(m, dict(log, qacc=log["qvel"]), params="body_mass")
    with pytest.raises(ValueError, match="no 'ctrl'"):
        sysid.fit(m, {k: v for k, v in log.items() if k != "ctrl"}, params="body_mass")
    with pytest.raises(ValueError, match="no log has a full window"):
        sysid.fit(m, log, params="body_mass", window=50)
    with pytest.raises(ValueError, match="hold_starts must be None or a non-negative int"):
        sysid.fit(m, log, params="body_mass", hold_starts=-1)
    with pytest.raises(ValueError, match="outside their bounds"):
        sysid.fit(m, log, params="dof_damping", bounds={"dof_damping": (1.0, 2.0)})
    with pytest.raises(ValueError, match="non-finite"):
        sysid.fit(m, dict(log, qpos=np.where(np.arange(31)[:, None] == 3, np.nan, log["qpos"])), params="body_mass")


# ---- slow: several parameters, noise, contacts ----------------------------------------------------------------

ARM = """
<mujoco>
  <option timestep="0.01" integrator="implicitfast"/>
  <default><joint type="hinge" axis="0 1 0"/><geom type="capsule" size="0.03" contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="upper" pos="0 0 1">
      <joint name="shoulder" damping="0.2"/>
      <geom fromto="0 0 0 0.3 0 0" mass="1"/>
      <body name="lower" pos="0.3 0 0">
        <joint name="elbow" damping="0.1"/>
        <geom fromto="0 0 0 0.25 0 0" mass="0.5"/>
        <site name="tip" pos="0.25 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="shoulder" joint="shoulder" gear="1" ctrlrange="-6 6" ctrllimited="true"/>
    <motor name="elbow" joint="elbow" gear="1" ctrlrange="-3 3" ctrllimited="true"/>
  </actuator>
  <sensor><framepos objtype="site" objname="tip"/></sensor>
</mujoco>
"""
ARM_PARAMS = (("body_mass", [1, 2]), "dof_damping", ("actuator_gainprm", (slice(None), 0)))
ARM_TRUE = {"body_mass": [1.3, 0.35], "dof_damping": [0.26, 0.07], "actuator_gainprm": [0.8, 1.2]}


def arm_logs(n, T=200, noise=0.0, seed=0):
    mjm = mujoco.MjModel.from_xml_string(ARM)
    mjm.body_mass[1:] = ARM_TRUE["body_mass"]
    mjm.dof_damping[:] = ARM_TRUE["dof_damping"]
    mjm.actuator_gainprm[:, 0] = ARM_TRUE["actuator_gainprm"]
    rng = np.random.default_rng(seed)
    logs = []
    for s in range(n):
        log = record(mjm, seed * 100 + s, T, qpos0=rng.uniform(-1, 1, 2), ctrl_scale=3.0)
        if noise:
            for k in ("qpos", "qvel", "sensordata"):
                log[k] = log[k] + noise * rng.normal(size=log[k].shape)
        logs.append(log)
    return logs


def _arm_errors(fit):
    want = np.concatenate([ARM_TRUE[k] for k in ("body_mass", "dof_damping", "actuator_gainprm")])
    got = np.asarray(list(fit.params.values()))
    return np.abs(got - want) / np.abs(want)


@pytest.mark.slow
def test_arm_masses_damping_gains_recovered():
    """Two masses (+30 %, -30 %), two dampings (+30 %, -30 %) and two actuator gains (-20 %, +20 %): noise-free to
    1e-6; with 1e-3 noise on positions, velocities and sensors (fitted window starts) to 5 %."""
    m = mjl.load_mjcf_string(ARM)
    fit = sysid.fit(m, arm_logs(3), params=ARM_PARAMS, window=10, iterations=20)
    assert np.all(_arm_errors(fit) < NOISE_FREE_RTOL), fit.report()
    noisy = sysid.fit(m, arm_logs(3, noise=1e-3), params=ARM_PARAMS, window=10, iterations=20,
                      noise={"qpos": 1e-3, "qvel": 1e-3, "sensordata": 1e-3})  # fmt: skip
    assert np.all(_arm_errors(noisy) < 0.05), noisy.report()


TUMBLE = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="0.1"/>
    <body name="box" pos="0 0 .3">
      <freejoint/>
      <geom name="box" type="box" size=".1 .06 .04" mass="1" friction="0.5"/>
    </body>
  </worldbody>
</mujoco>
"""


THROWS = ([2.0, 0.5, 0, 3, -2, 5], [-1.5, 1.0, 0, -4, 1, 2])  # qvel0 of the two throws
LANDING = slice(40, 51)  # the states of the window (steps 40-50 of the first throw) in which the box lands


@pytest.mark.slow  # CI time: test_pendulum_mass_recovered covers sysid in the default selection
def test_held_starts_recover_friction_from_a_landing():
    """One 10-step window of the tumbling box, the one in which it lands (the residual of friction 0.5 there is
    300, against 3e-27 at the true 0.8). Fitting the window start and the friction together from the first
    iteration (hold_starts=0, the joint fit) moves the start by ~2 m/s and rad/s to absorb the friction error, into
    other contact phases, and stalls at a wrong friction (measured 1.04, loss 9.1); holding the start at the log
    until the friction-only step has converged (the default) recovers 0.8 exactly in 4 iterations."""
    mjm = mujoco.MjModel.from_xml_string(TUMBLE)
    mjm.geom_friction[1, 0] = 0.8
    full = record(mjm, 0, LANDING.stop, qvel0=THROWS[0])
    log = {k: full[k][LANDING] for k in ("qpos", "qvel")} | {"ctrl": full["ctrl"][LANDING][:-1]}
    m = mjl.load_mjcf_string(TUMBLE)
    params = ("geom_friction", (1, 0))
    held = sysid.fit(m, log, params=params, window=10, iterations=8)
    joint = sysid.fit(m, log, params=params, window=10, iterations=8, hold_starts=0)  # same compilation
    assert held.loss[0] == pytest.approx(300.2, rel=1e-3)  # measured 300.202
    assert abs(held.params["geom_friction[1, 0]"] - 0.8) < NOISE_FREE_RTOL * 0.8, held.report()
    assert held.loss[-1] < 1e-20, held.report()  # measured 3.4e-27
    assert abs(joint.params["geom_friction[1, 0]"] - 0.8) > 0.1 and joint.loss[-1] > 1.0, joint.report()


@pytest.mark.slow
def test_friction_from_a_tumbling_box():
    """A box thrown onto the floor slides and tumbles (the contact friction is the larger of the two geoms', the
    box's): its sliding friction, 0.8 in MuJoCo C, is recovered from 0.5 to 1e-3 (noise-free)."""
    mjm = mujoco.MjModel.from_xml_string(TUMBLE)
    mjm.geom_friction[1, 0] = 0.8
    logs = [record(mjm, s, 200, qvel0=v) for s, v in enumerate(THROWS)]
    m = mjl.load_mjcf_string(TUMBLE)
    fit = sysid.fit(m, logs, params=("geom_friction", (1, 0)), window=10, iterations=15)
    assert abs(fit.params["geom_friction[1, 0]"] - 0.8) < 1e-3 * 0.8, fit.report()


@pytest.mark.slow
def test_option_field_with_an_optax_optimizer():
    """An option (gravity, 9.0 in MuJoCo C against our 9.81) fitted by Adam instead of Levenberg-Marquardt."""
    import optax  # noqa: PLC0415

    mjm = mujoco.MjModel.from_xml_string(PENDULUM)
    mjm.opt.gravity[2] = -9.0
    rng = np.random.default_rng(1)
    logs = [record(mjm, s, 100, qpos0=rng.uniform(-1, 1, 1)) for s in range(2)]
    m = mjl.load_mjcf_string(PENDULUM)
    # decaying 10x per 300 steps (10x per 100 left the step too small to close the last 0.012 m/s^2 in 300)
    adam = optax.adam(optax.exponential_decay(0.01, transition_steps=300, decay_rate=0.1))
    fit = sysid.fit(m, logs, params=("opt.gravity", 2), window=10, iterations=300, optimizer=adam)
    assert abs(fit.params["opt.gravity[2]"] + 9.0) < 0.01, fit.report()
    assert fit.loss[-1] < 1e-3 * fit.loss[0]
    assert float(fit.model.opt.gravity[2]) == pytest.approx(fit.params["opt.gravity[2]"])
