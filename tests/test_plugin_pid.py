"""The `mujoco.pid` actuator plugin (pipeline/plugin_pid.py) against MuJoCo 4.0 in float64: compiled fields (the
plugin instance tables, also mixed with SDF instances, declared and implicit), MuJoCo's load and init errors, mj_forward
at random states (before and after time 0, where the slew limit starts), 100-step trajectories for every integrator,
gradients vs central differences, vmap, float32."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import oracle

FWD_ATOL = 1e-12  # one mj_forward, float64 round-off (forces O(10))
TRAJ_ATOL = 1e-10  # 100 steps, float64 round-off accumulated over the trajectory (states O(1))
GRAD_RTOL = 1e-6  # reverse-mode gradient vs central differences (relative step 1e-5, float64; smooth branch)
VMAP_TOL = 1e-12  # vmapped rollouts vs unbatched ones
F32_ATOL = 1e-3  # float32 forward vs float64 MuJoCo (forces O(10))


def _cfg(**kw) -> str:
    return "".join(f'<config key="{k}" value="{v}"/>' for k, v in kw.items())


# MuJoCo's example (model/plugin/actuator/pid.xml): four sliders under P, PD, PID and PID with a clamped integral
EXAMPLE = f"""<mujoco>
  <extension><plugin plugin="mujoco.pid">
    <instance name="pid1">{_cfg(kp=4)}</instance>
    <instance name="pid2">{_cfg(kp=4, kd=0.4)}</instance>
    <instance name="pid3">{_cfg(kp=4, ki=4, kd=0.4)}</instance>
    <instance name="pid4">{_cfg(kp=4, ki=4, kd=0.4, imax=0.5)}</instance>
  </plugin></extension>
  <worldbody>
    <geom type="plane" pos="0 0 -0.1" size="0 0 100"/>
    <body pos="-0.06 0 0"><joint name="j1" type="slide" axis="0 0 1"/><geom size="0.01"/></body>
    <body pos="-0.02 0 0"><joint name="j2" type="slide" axis="0 0 1"/><geom size="0.01"/></body>
    <body pos="0.02 0 0"><joint name="j3" type="slide" axis="0 0 1"/><geom size="0.01"/></body>
    <body pos="0.06 0 0"><joint name="j4" type="slide" axis="0 0 1"/><geom size="0.01"/></body>
  </worldbody>
  <actuator>
    <plugin joint="j1" plugin="mujoco.pid" instance="pid1" ctrlrange="0 0.15"/>
    <plugin joint="j2" plugin="mujoco.pid" instance="pid2" ctrlrange="0 0.15"/>
    <plugin joint="j3" plugin="mujoco.pid" instance="pid3" ctrlrange="0 0.15" actdim="1"/>
    <plugin joint="j4" plugin="mujoco.pid" instance="pid4" ctrlrange="0 0.15" actdim="1"/>
  </actuator>
</mujoco>"""

# every state layout: integral + slew with imax, a ctrl clamp and a force clamp (hinge of a two-link arm); a
# filterexact setpoint read early (actearly) under a PD; an integrator setpoint with actrange, its own config
# (implicit instance) and an integral; a motor beside it on the same joint; an actuator sensor on each
ARM = f"""<mujoco>
  <option timestep="0.01" integrator="{{integrator}}"/>
  <extension><plugin plugin="mujoco.pid">
    <instance name="a">{_cfg(kp=20, ki=5, kd=2, imax=0.3, slewmax=2)}</instance>
    <instance name="b">{_cfg(kp=10, kd=1)}</instance>
  </plugin></extension>
  <worldbody>
    <body><joint name="j1" axis="0 1 0" damping="0.1"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size=".05"/>
      <body pos="0.3 0 0"><joint name="j2" axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0.3 0 0" size=".05"/>
      </body>
    </body>
    <body pos="1 0 0"><joint name="j3" type="slide" axis="1 0 0"/><geom size=".1"/></body>
  </worldbody>
  <actuator>
    <plugin name="a" joint="j1" instance="a" actdim="2" ctrlrange="-0.5 0.5" forcerange="-5 5"/>
    <plugin name="b" joint="j2" instance="b" dyntype="filterexact" dynprm="0.05" actdim="1" actearly="true"/>
    <plugin name="c" joint="j3" plugin="mujoco.pid" dyntype="integrator" actdim="2" actrange="-1 1">
      {_cfg(kp=3, ki=1)}</plugin>
    <motor joint="j3" gear="0.5"/>
  </actuator>
  <sensor><actuatorfrc actuator="a"/><actuatorfrc actuator="b"/><actuatorfrc actuator="c"/></sensor>
</mujoco>"""

# plugin instance numbering with SDF plugins: declared instances first (an unused SDF one too), then the implicit ones
# of meshes, actuators and geoms
MIXED = f"""<mujoco>
  <extension>
    <plugin plugin="mujoco.sdf.torus"><instance name="tor">{_cfg(radius1=0.3, radius2=0.1)}</instance>
      <instance name="unused"/></plugin>
    <plugin plugin="mujoco.pid"><instance name="p1">{_cfg(kp=2, slewmax=3)}</instance>
      <instance name="p0">{_cfg(kp=1)}</instance></plugin>
    <plugin plugin="mujoco.sdf.bowl"/>
  </extension>
  <asset>
    <mesh name="m1"><plugin instance="tor"/></mesh>
    <mesh name="m2"><plugin plugin="mujoco.sdf.bowl"/></mesh>
  </asset>
  <worldbody>
    <body><joint name="j" type="slide"/><geom size=".1"/>
      <geom type="sdf" mesh="m2" contype="0" conaffinity="0" mass="0"><plugin plugin="mujoco.sdf.bowl"/></geom></body>
    <body pos="2 0 0"><joint name="j2" type="slide"/><geom size=".1"/></body>
  </worldbody>
  <actuator>
    <plugin joint="j" instance="p0"/>
    <plugin joint="j2" plugin="mujoco.pid" actdim="1">{_cfg(kp=3, ki=1)}</plugin>
    <plugin joint="j2" instance="p1" actdim="1"/>
  </actuator>
</mujoco>"""

INTEGRATORS = ("Euler", "implicitfast", "implicit", "RK4")


@pytest.fixture(scope="module")
def arm():
    """(our Model, MuJoCo's) of ARM per integrator."""
    out = {}
    for integ in INTEGRATORS:
        xml = ARM.format(integrator=integ)
        out[integ] = (mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml))
    return out


@pytest.mark.parametrize("name", ["EXAMPLE", "ARM", "MIXED"])
def test_compiled_fields(name):
    xml = {"EXAMPLE": EXAMPLE, "ARM": ARM.format(integrator="Euler"), "MIXED": MIXED}[name]
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    # (SDF meshes: our marching-cubes case table picks other triangles over the same vertices, README "SDF geoms")
    assert oracle.compare_models(m, mjm, skip_prefixes=("mesh_face",) if name == "MIXED" else ()) == []
    for k in ("nplugin", "npluginstate", "plugin", "plugin_stateadr", "plugin_statenum", "actuator_plugin",
              "sensor_plugin", "actuator_actnum", "na"):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(m, k)), np.asarray(getattr(mjm, k)), err_msg=k)
    assert m.nplugin > 0 and (m.actuator_plugin >= 0).any()


def _load_error(xml: str) -> MJCFError:
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError) as info:
        mjl.load_mjcf_string(xml)
    assert not isinstance(info.value, MJCFUnsupportedError)
    return info.value


def _one(config: str, attrs: str = "", inst: bool = True) -> str:
    use = '<plugin joint="j" instance="p" {a}/>' if inst else '<plugin joint="j" plugin="mujoco.pid" {a}>{c}</plugin>'
    decl = f'<instance name="p">{config}</instance>' if inst else ""
    return (f'<mujoco><extension><plugin plugin="mujoco.pid">{decl}</plugin></extension><worldbody><body>'
            '<joint name="j" type="slide"/><geom size=".1"/></body></worldbody><actuator>'
            + use.format(a=attrs, c=config) + "</actuator></mujoco>")  # fmt: skip


ERRORS = {  # MuJoCo's compile errors and its plugin init errors (a load error there)
    "actdim_missing": (_one(_cfg(kp=1, ki=1)), "expected 1"),
    "actdim_extra": (_one(_cfg(kp=1), 'actdim="1"'), "expected 0"),
    "actdim_slew_and_integral": (_one(_cfg(kp=1, ki=1, slewmax=1), 'actdim="1"'), "expected 2"),
    "actdim_with_filter": (_one(_cfg(kp=1, ki=1), 'actdim="1" dyntype="filter"'), "expected 2"),
    "actdim_implicit": (_one(_cfg(kp=1, slewmax=1), inst=False), "expected 1"),
    "negative_imax": (_one(_cfg(kp=1, ki=1, imax=-1), 'actdim="1"'), "negative imax"),
    "negative_slewmax": (_one(_cfg(kp=1, slewmax=-1), 'actdim="1"'), "slewmax must be non-negative"),
    "unknown_key": (_one(_cfg(kp=1, foo=1)), "unrecognized attribute 'plugin:foo'"),
    "unknown_key_implicit": (_one(_cfg(kp=1, foo=1), inst=False), "unrecognized attribute 'plugin:foo'"),
    "unused_instance": (_one(_cfg(kp=1)).replace('<plugin joint="j" instance="p" />', ""), "actuator not found"),
    "refsite": (_one(_cfg(kp=1), 'refsite="x"'), "refsite"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_load_errors(name):
    xml, what = ERRORS[name]
    err = _load_error(xml)
    assert what in str(err)


def test_valid_layouts_load_as_mujoco():
    """What MuJoCo accepts beside the errors: ki with imax, slewmax, integrator dynamics, an empty kp (0), config
    children beside an instance (MuJoCo ignores them, unknown keys too: the instance's kp acts), values read as C's
    strtod reads them."""
    beside = _one(_cfg(kp=1)).replace('<plugin joint="j" instance="p" />',
                                      f'<plugin joint="j" instance="p">{_cfg(kp=2, zz=3)}</plugin>')  # fmt: skip
    for xml in (_one(_cfg(kp=1, ki=2, imax=1), 'actdim="1"'), _one(_cfg(kp=1, ki=1, slewmax=1), 'actdim="2"'),
                _one(_cfg(kp=1), 'dyntype="integrator"'), _one('<config key="kp" value=""/>'), beside,
                _one(_cfg(kp="1.5abc", kd=" 2")), _one(_cfg(kp="abc"))):  # (C's strtod: 1.5, 2, 0)  # fmt: skip
        m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
        assert oracle.compare_models(m, mjm) == []
        mjd = mujoco.MjData(mjm)
        mjd.ctrl[:] = 0.7
        mujoco.mj_forward(mjm, mjd)
        d = mjl.forward(m, mjl.make_data(m).replace(ctrl=jp.array([0.7])))
        np.testing.assert_allclose(np.asarray(d.actuator_force), mjd.actuator_force, atol=FWD_ATOL, rtol=0)
        np.testing.assert_allclose(np.asarray(d.act_dot), mjd.act_dot, atol=FWD_ATOL, rtol=0)


def test_touch_grid_is_not_an_actuator():
    xml = ('<mujoco><extension><plugin plugin="mujoco.sensor.touch_grid"/></extension><worldbody><body>'
           '<joint name="j"/><geom size=".1"/></body></worldbody><actuator>'
           '<plugin joint="j" plugin="mujoco.sensor.touch_grid"/></actuator></mujoco>')  # fmt: skip
    assert "does not support actuators" in str(_load_error(xml))


@pytest.mark.parametrize("time", [0.0, 0.7])
def test_forward(arm, time):
    """mj_forward at random states, controls (beyond ctrlrange too) and activations: the slew limit applies once
    time > 0."""
    m, mjm = arm["Euler"]
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(1)
    for _ in range(3):
        oracle.random_state(mjm, mjd, rng)
        mjd.xfrc_applied[:] = 0
        mjd.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
        mjd.act[:] = rng.uniform(-0.5, 0.5, mjm.na)
        mjd.time = time
        mujoco.mj_forward(mjm, mjd)
        d = mjl.forward(m, oracle.data_from_mujoco(m, mjm, mjd))
        for k in ("actuator_force", "act_dot", "qfrc_actuator", "qacc", "sensordata"):
            np.testing.assert_allclose(np.asarray(getattr(d, k)), getattr(mjd, k), atol=FWD_ATOL, rtol=0, err_msg=k)


def _trajectory(m, mjm, steps=100, seed=0):
    mjd = mujoco.MjData(mjm)
    d = mjl.make_data(m)
    rng = np.random.default_rng(seed)
    worst = 0.0
    for t in range(steps):
        if t % 10 == 0:
            mjd.ctrl[:] = rng.uniform(-0.6, 0.6, mjm.nu)
            d = d.replace(ctrl=jp.asarray(mjd.ctrl))
        mujoco.mj_step(mjm, mjd)
        d = mjl.step(m, d)
        for k in ("qpos", "qvel", "act", "actuator_force"):
            worst = max(worst, float(np.max(np.abs(np.asarray(getattr(d, k)) - getattr(mjd, k)), initial=0.0)))
    return worst, mjd


# slow: "implicit" integrates the plugin's forces and states as "implicitfast" does (default), and RK4 evaluates the
# same plugin forward at its stages (RK4 itself has its own default tests); Euler and implicitfast stay default
@pytest.mark.parametrize("integrator", [pytest.param(i, marks=pytest.mark.slow) if i in ("implicit", "RK4") else i
                                        for i in INTEGRATORS])  # fmt: skip
def test_trajectory(arm, integrator):
    m, mjm = arm[integrator]
    worst, mjd = _trajectory(m, mjm)
    assert worst < TRAJ_ATOL
    assert np.any(np.abs(mjd.actuator_force[0]) == 5)  # the force clamp was reached (the test exercises it)


# slow: MuJoCo's example (P, PD, PID, PID with imax) runs the plugin code of ARM's trajectories (integral, slew, imax,
# filter and integrator dynamics); its actdim-1 integral layout's forward and act_dot are in
# test_valid_layouts_load_as_mujoco
@pytest.mark.slow
def test_example_trajectory():
    m, mjm = mjl.load_mjcf_string(EXAMPLE), mujoco.MjModel.from_xml_string(EXAMPLE)
    worst, _ = _trajectory(m, mjm)
    assert worst < TRAJ_ATOL


def _rollout(m, kp, ctrl, steps=30):
    """Final qpos of j1 after `steps` steps from rest with pid 'a''s kp set to `kp` and constant controls."""
    mm = m.replace(actuator_pluginprm=m.actuator_pluginprm.at[0, 0].set(kp))
    d0 = mjl.make_data(mm).replace(ctrl=ctrl)
    d = jax.lax.scan(lambda d, _: (mjl.step(mm, d), None), d0, None, length=steps)[0]
    return d.qpos[0] + d.qpos[2]


@pytest.mark.slow  # CI time: 25 s on a quiet 2-core CPU; touch_grid's gradient test stays in CI
def test_gradients_and_vmap(arm):
    """d qpos / d kp and d qpos / d ctrl (rollout through integral, slew and filter states) vs central differences;
    vmap over kp equals unbatched calls."""
    m = arm["Euler"][0]
    ctrl = jp.array([0.2, -0.3, 0.4, 0.1])  # inside ctrlrange, below the force clamp at first
    g, fd = oracle.grad_and_central_difference(lambda kp: _rollout(m, kp, ctrl), 20.0, 20.0 * 1e-5)
    assert g != 0 and np.isfinite(g)
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL)
    g, fd = oracle.grad_and_central_difference(lambda u: _rollout(m, 20.0, ctrl.at[1].set(u)), -0.3, 1e-6)
    assert g != 0
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL)
    kps = jp.array([10.0, 20.0])
    f = jax.jit(lambda kp: _rollout(m, kp, ctrl))
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(f))(kps)), [float(f(k)) for k in kps], rtol=VMAP_TOL,
                               atol=VMAP_TOL)  # fmt: skip


def test_float32(arm):
    m, mjm = arm["Euler"]
    mjd = mujoco.MjData(mjm)
    mjd.ctrl[:] = [0.3, -0.2, 0.5, 0.1]
    mjd.qvel[:] = [0.5, -0.3, 0.2]
    mujoco.mj_forward(mjm, mjd)
    d32 = oracle.cast_floats(mjl.make_data(m).replace(qvel=np.array(mjd.qvel), ctrl=np.array(mjd.ctrl)), jp.float32)
    d32 = jax.jit(mjl.forward)(oracle.cast_floats(m, jp.float32), d32)
    assert d32.actuator_force.dtype == jp.float32
    np.testing.assert_allclose(np.asarray(d32.actuator_force), mjd.actuator_force, atol=F32_ATOL)
