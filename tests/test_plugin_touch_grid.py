"""The `mujoco.sensor.touch_grid` sensor plugin (pipeline/plugin_touch_grid.py) against MuJoCo 4.0 in float64:
compiled fields (sensor dims and addresses, the plugin instance tables), MuJoCo's load and init errors, sensordata
at MuJoCo's states (the grid's contacts on either side, the sign rule, every channel, foveal bins, cutoff, an
instance shared by two sensors), 100-step trajectories, the gradient of a taxel sum vs central differences, vmap."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from mjx_lite.pipeline import plugin_touch_grid
from tests import oracle

FWD_ATOL = 1e-10  # sensordata at MuJoCo's state: contact forces O(1) from two converged solvers (tolerance 1e-12)
TRAJ_ATOL = 1e-8  # 100 steps: qpos, qvel and sensordata (contact forces O(1))
GRAD_RTOL = 1e-6  # gradient of a taxel sum vs central differences (relative step 1e-6)
VMAP_TOL = 1e-12
F32_ATOL = 2e-3  # float32 forward vs float64 MuJoCo (taxel forces O(10), float32 constraint solve)


def _cfg(**kw) -> str:
    return "".join(f'<config key="{k}" value="{v}"/>' for k, v in kw.items())


def _grid(name: str, site: str, extra: str = "", **cfg) -> str:
    return (f'<plugin name="{name}" plugin="mujoco.sensor.touch_grid" objtype="site" objname="{site}" {extra}>'
            f"{_cfg(**cfg)}</plugin>")  # fmt: skip


# MuJoCo's test model (test/plugin/sensor/testdata/touch_grid_test.xml): a world site 10 above a box resting on the
# floor sees the floor's contacts (both world-welded bodies: its weld is the world's)
BOX_UNDER_SITE = f"""<mujoco>
  <option gravity="0 0 -10" tolerance="1e-12"/>
  <extension><plugin plugin="mujoco.sensor.touch_grid"/></extension>
  <worldbody>
    <body name="dummy2"><geom name="floor" type="plane" size="1 1 .01"/></body>
    <body name="dummy1"><site name="touch" pos="0 0 10"/></body>
    <body name="box" pos="0 0 .1"><freejoint/><geom type="box" size=".1 .1 .1" mass="0.1"/></body>
  </worldbody>
  <sensor>{_grid("touch", "touch", size="6 2", fov="5.71 5.71", gamma=0, nchannel=3)}</sensor>
</mujoco>"""

# a skid of three capsule/sphere feet under a free body, sites on the body looking down (tilted), a site on the
# floor looking up; every channel, foveal bins, cutoff, a declared instance shared by two sensors; bodies declared in
# an order where the sign rule flips one side and not the other
SKID = f"""<mujoco>
  <option timestep="0.002" tolerance="1e-12"/>
  <extension><plugin plugin="mujoco.sensor.touch_grid">
    <instance name="shared">{_cfg(nchannel=2, size="5 4", fov="80 60")}</instance>
  </plugin></extension>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" friction="0.8 0.02 0.01" condim="6"/>
    <site name="up" pos="0 0 -0.3" quat="0 1 0 0"/>
    <body name="skid" pos="0.02 -0.03 0.09" euler="4 -3 10">
      <freejoint/>
      <geom type="box" size=".2 .1 .02" mass="1"/>
      <geom type="capsule" fromto="-.15 -.08 -.05 .15 -.08 -.05" size=".02" condim="4"/>
      <geom type="sphere" pos=".1 .08 -.05" size=".02"/>
      <geom type="sphere" pos="-.12 .07 -.05" size=".02"/>
      <site name="down" pos="0 0 -0.02"/>
      <site name="tilted" pos="0.05 0 0" euler="15 -10 30"/>
    </body>
    <body name="other" pos="0.5 0.5 0.05"><freejoint/><geom size=".05" mass="0.2"/></body>
  </worldbody>
  <sensor>
    {_grid("g_down", "down", size="8 6", fov="80 70", gamma=0.5, nchannel=6)}
    {_grid("g_tilted", "tilted", 'cutoff="0.5"', size="3 7", fov="170 85", gamma=1, nchannel=3)}
    {_grid("g_up", "up", size="9 9", fov="45 45", nchannel=4)}
    <plugin name="s1" instance="shared" objtype="site" objname="down"/>
    <accelerometer site="down"/>
    <plugin name="s2" instance="shared" objtype="site" objname="tilted"/>
  </sensor>
</mujoco>"""

MODELS = {"BOX_UNDER_SITE": BOX_UNDER_SITE, "SKID": SKID}


@pytest.fixture(scope="module")
def models():
    return {k: (mjl.load_mjcf_string(x), mujoco.MjModel.from_xml_string(x)) for k, x in MODELS.items()}


@pytest.fixture(scope="module")
def fwd():
    """jit(forward), shared: the gradient test's unbatched values reuse test_forward_at_mujoco_states' program."""
    return jax.jit(mjl.forward)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_compiled_fields(models, name):
    m, mjm = models[name]
    assert oracle.compare_models(m, mjm) == []
    for k in ("nplugin", "plugin", "sensor_plugin", "sensor_dim", "sensor_adr", "sensor_type", "sensor_needstage",
              "sensor_objtype", "sensor_objid", "sensor_cutoff", "nsensordata"):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(m, k)), np.asarray(getattr(mjm, k)), err_msg=k)


def test_bin_edges_mujoco_spacing():
    """The edges add the increment repeatedly (MuJoCo's LinSpace), foveate, then scale by fov pi / 180."""
    e = plugin_touch_grid.bin_edges(3, 30.0, 0.0)
    assert e[0] == -np.pi / 6 and e.shape == (4,)
    np.testing.assert_allclose(e, np.linspace(-1, 1, 4) * np.pi / 6, atol=1e-15)
    g = plugin_touch_grid.bin_edges(4, 90.0, 1.0)  # gamma 1: x^5
    np.testing.assert_allclose(g, np.linspace(-1, 1, 5) ** 5 * np.pi / 2, atol=1e-15)


def _states(mjm, steps: int, every: int, seed: int = 0):
    """MuJoCo's states along a trajectory with random pushes (yields its MjData after mj_forward)."""
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    for t in range(steps):
        if t % 20 == 0:
            mjd.qfrc_applied[:] = rng.normal(scale=0.5, size=mjm.nv)
        mujoco.mj_step(mjm, mjd)
        if t % every == every - 1:
            mujoco.mj_forward(mjm, mjd)
            yield mjd


@pytest.mark.parametrize("name", sorted(MODELS))
def test_forward_at_mujoco_states(models, fwd, name):
    m, mjm = models[name]
    seen = np.zeros(mjm.nsensordata, bool)
    for mjd in _states(mjm, 200, 25):
        d = fwd(m, oracle.data_from_mujoco(m, mjm, mjd))
        assert int(np.sum(np.asarray(d.contact.active))) == mjd.ncon
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, atol=FWD_ATOL, rtol=0)
        seen |= mjd.sensordata != 0
    plug = np.asarray(mjm.sensor_type) == mujoco.mjtSensor.mjSENS_PLUGIN
    for i in np.nonzero(plug)[0]:  # every grid saw contacts (the test exercises each), except a shared instance's
        first = np.nonzero(mjm.sensor_plugin == mjm.sensor_plugin[i])[0][0] == i  # second sensor (MuJoCo: unset)
        a, n = mjm.sensor_adr[i], mjm.sensor_dim[i]
        assert seen[a : a + n].any() == first, mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SENSOR, i)


# slow: BOX_UNDER_SITE's grid is checked at MuJoCo's states by test_forward_at_mujoco_states[BOX_UNDER_SITE]; the
# grid inside step (every channel, both sides) by test_trajectory[SKID]
@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k == "BOX_UNDER_SITE" else k
                                  for k in sorted(MODELS)])  # fmt: skip
def test_trajectory(models, name):
    m, mjm = models[name]
    mjd, d = mujoco.MjData(mjm), mjl.make_data(m)
    rng = np.random.default_rng(3)
    worst, touched = 0.0, 0
    for t in range(100):
        if t % 20 == 0:  # pushes of about a tenth of the weight
            mjd.qfrc_applied[:] = rng.normal(scale=0.1, size=mjm.nv) * mjm.body_subtreemass[1] * 10
            d = d.replace(qfrc_applied=jp.asarray(mjd.qfrc_applied))
        mujoco.mj_step(mjm, mjd)
        d = mjl.step(m, d)
        for k in ("qpos", "qvel", "sensordata"):
            worst = max(worst, float(np.max(np.abs(np.asarray(getattr(d, k)) - getattr(mjd, k)))))
        touched += bool(np.any(mjd.sensordata != 0))
    assert worst < TRAJ_ATOL
    assert touched > 50  # the grids saw contacts for most of the trajectory


# (model, body, grid sensor, taxels of its first channel). "SKID" slow (CI time: ~17 worker-s, the vmapped reverse
# pass of its four contact pair groups and five grids): "BOX_UNDER_SITE" (one box on the floor, one grid) checks the
# same gradient through the solver and the plugin, and vmap, by default
GRAD_CASES = [pytest.param(("BOX_UNDER_SITE", "box", "touch", 6 * 2), id="BOX_UNDER_SITE"),
              pytest.param(("SKID", "skid", "g_down", 8 * 6), id="SKID", marks=pytest.mark.slow)]  # fmt: skip


@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradient_and_vmap(models, fwd, case):
    """d(total normal force on a grid)/d(body mass) through the constraint solver vs central differences, and the
    grid vmapped over masses equal to unbatched calls: one compiled program, the gradient and the values vmapped over
    (0.8 mass, mass, mass - h, mass + h); the unbatched values from jit(forward) (the program of
    test_forward_at_mujoco_states)."""
    name, body_name, grid, frame = case
    m, mjm = models[name]
    mjd = next(_states(mjm, 50, 50))
    d0 = oracle.data_from_mujoco(m, mjm, mjd)
    body = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, body_name)
    i = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, grid)
    a = int(mjm.sensor_adr[i])

    def with_mass(mass):
        return m.replace(body_mass=m.body_mass.at[body].set(mass))

    def normal_sum(mass):
        return jp.sum(mjl.forward(with_mass(mass), d0).sensordata[a : a + frame])

    mass = float(mjm.body_mass[body])
    h = 1e-6 * mass
    masses = [0.8 * mass, mass, mass - h, mass + h]
    values, grads = jax.jit(jax.vmap(jax.value_and_grad(normal_sum)))(jp.array(masses))
    g, fd = float(grads[1]), (float(values[3]) - float(values[2])) / (2 * h)
    assert g != 0 and np.isfinite(g)
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL)
    single = [float(jp.sum(fwd(with_mass(x), d0).sensordata[a : a + frame])) for x in masses]
    np.testing.assert_allclose(np.asarray(values), single, rtol=VMAP_TOL, atol=VMAP_TOL)


def _one(sensor: str, ext: str = '<plugin plugin="mujoco.sensor.touch_grid"/>') -> str:
    return (f'<mujoco><extension>{ext}</extension><worldbody><geom type="plane" size="1 1 .1"/><body pos="0 0 .1">'
            '<freejoint/><geom type="box" size=".1 .1 .1"/><site name="s"/></body></worldbody>'
            f"<sensor>{sensor}</sensor></mujoco>")  # fmt: skip


_OK = dict(size="4 3", fov="30 20")
ERRORS = {  # MuJoCo's compile errors and the plugin's init errors (a load error there)
    "nchannel_7": (_grid("t", "s", nchannel=7, **_OK), "nchannel must be between 1 and 6"),
    "nchannel_negative": (_grid("t", "s", nchannel=-1, **_OK), "nchannel must be between 1 and 6"),
    "fov_zero": (_grid("t", "s", size="4 3", fov="0 10"), "`fov[0]` must be a float between (0, 180]"),
    "fov_elevation": (_grid("t", "s", size="4 3", fov="10 100"), "`fov[1]` must be a float between (0, 90]"),
    "fov_one_value": (_grid("t", "s", size="4 3", fov="30"), "Both horizontal and vertical fields of view"),
    "gamma_2": (_grid("t", "s", gamma=2, **_OK), "`gamma` must be a nonnegative float"),
    "gamma_text": (_grid("t", "s", gamma="abc", **_OK), "Invalid or missing parameters"),
    "size_one_value": (_grid("t", "s", size="4", fov="30 20"), "Both horizontal and vertical resolutions"),
    "size_zero": (_grid("t", "s", size="0 3", fov="30 20"), "resolutions must be positive"),
    "unknown_key": (_grid("t", "s", foo=1, **_OK), "unrecognized attribute 'plugin:foo'"),
    "body_object": (_grid("t", "s", **_OK).replace('objtype="site" objname="s"', 'objtype="body" objname="world"'),
                    "must be attached to a site"),
    "no_object": (_grid("t", "s", **_OK).replace('objtype="site" objname="s"', ""), "must be attached to a site"),
    "objtype_without_objname": (_grid("t", "s", **_OK).replace(' objname="s"', ""), "objname is not"),
    "pid_as_sensor": (_grid("t", "s", **_OK).replace("mujoco.sensor.touch_grid", "mujoco.pid"),
                      "does not support sensors"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_load_errors(name):
    sensor, what = ERRORS[name]
    ext = '<plugin plugin="mujoco.pid"/>' if name == "pid_as_sensor" else '<plugin plugin="mujoco.sensor.touch_grid"/>'
    xml = _one(sensor, ext)
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=None) as info:
        mjl.load_mjcf_string(xml)
    assert not isinstance(info.value, MJCFUnsupportedError)
    assert what in str(info.value)


@pytest.mark.parametrize("cfg", [dict(size="4 3", fov="30 20"), dict(size="2.7 3", fov="180 90", nchannel=2.5),
                                 dict(size="1 1", fov="10 10", nchannel=6, gamma="")])  # fmt: skip
def test_defaults_and_truncation_as_mujoco(cfg):
    """MuJoCo's defaults (nchannel 1, gamma 0; empty values too) and its integer reading (2.7 -> 2)."""
    xml = _one(_grid("t", "s", **cfg))
    m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert oracle.compare_models(m, mjm) == []


# slow (CI budget): the plugin's values stay in the float64 test_forward_at_mujoco_states and test_gradient_and_vmap
@pytest.mark.slow
def test_float32(models):
    m, mjm = models["SKID"]
    mjd = next(_states(mjm, 100, 100))
    f32 = lambda x: x.astype(jp.float32) if isinstance(x, jax.Array) and x.dtype == jp.float64 else x  # noqa: E731
    d = jax.tree.map(f32, mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel),
                                                   qfrc_applied=jp.asarray(mjd.qfrc_applied)))  # fmt: skip
    d = jax.jit(mjl.forward)(jax.tree.map(f32, m), d)
    assert d.sensordata.dtype == jp.float32 and np.abs(mjd.sensordata).max() > 1
    np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, atol=F32_ATOL, rtol=0)
