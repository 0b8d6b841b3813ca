"""Camera rangefinders (`<rangefinder camera=...>`, `pipeline.ray_camera`) against MuJoCo (float64).

A perspective camera from fovy, one with a sensor size, focal lengths and an off-centre principal point, and an
orthographic camera, on moving bodies over a floor, a sphere, a box and a capsule: compiled fields, sensordata of
mj_forward in random states (every data field), a 100-step trajectory, vmap, gradients of depths.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError
from mjx_lite.pipeline import kinematics, ray, ray_camera
from tests import oracle

SENSOR_TOL = 1e-9  # float64: a few products per ray and one division per hit
TRAJ_TOL = 1e-8  # 100 steps of a smooth contact-free trajectory, sensordata compared at every step
FD_TOL = 1e-6  # central differences (step 1e-6) of smooth depths

XML = """
<mujoco>
  <option timestep="0.005"><flag constraint="disable"/></option>  <!-- no contacts here: cheaper to compile -->
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <geom type="sphere" size=".3" pos=".5 0 .3"/>
    <geom type="box" size=".2 .3 .25" pos="-.5 .3 .25" euler="0 0 20"/>
    <body pos="0 0 1.2">
      <joint name="j0" type="hinge" axis="1 0 0" damping=".3"/>
      <joint name="j1" type="slide" axis="0 1 0" damping=".3"/>
      <geom type="box" size=".1 .2 .1" contype="0" conaffinity="0"/>
      <camera name="persp" pos="0 0 -.2" euler="10 -5 0" resolution="4 3" fovy="70"/>
      <camera name="intr" pos=".1 0 -.2" euler="-75 4 0" resolution="5 4" sensorsize=".01 .008" focal=".006 .0065"
              principal=".004 .0045"/>
    </body>
    <body pos="0 -1.5 1">
      <joint name="j2" type="hinge" axis="0 0 1" damping=".2"/>
      <geom type="capsule" size=".05 .1" pos="0 -.3 0" contype="0" conaffinity="0"/>
      <camera name="ortho" xyaxes="1 0 0 0 .7 .7" resolution="3 2" projection="orthographic" fovy="1.5"/>
    </body>
  </worldbody>
  <sensor>
    <rangefinder camera="persp"/>
    <rangefinder camera="intr" data="dist dir origin point normal depth"/>
    <rangefinder camera="ortho" data="dist dir origin point normal depth"/>
    <rangefinder camera="persp" data="normal depth" cutoff="1.1"/>
  </sensor>
</mujoco>
"""


@pytest.fixture(scope="module")
def setup():
    mjm = mujoco.MjModel.from_xml_string(XML)
    m = mjx_lite.load_mjcf_string(XML)
    return mjm, m


def _state(mjm, seed):
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(seed), qpos_scale=0.3)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def test_compiled_fields_match_mujoco(setup):
    mjm, m = setup
    for k in ("sensor_dim", "sensor_adr", "sensor_objtype", "sensor_objid", "sensor_intprm", "cam_projection",
              "cam_resolution", "cam_bodyid"):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(m, k)), getattr(mjm, k), err_msg=k)
    np.testing.assert_allclose(np.asarray(m.cam_intrinsic), mjm.cam_intrinsic, rtol=0, atol=0)
    np.testing.assert_allclose(np.asarray(m.cam_fovy), mjm.cam_fovy, rtol=1e-12, atol=0)


def test_sensordata_matches_mujoco_in_random_states(setup):
    """Every data field of the three projections, hits and misses, and a cutoff, through a vmapped forward."""
    mjm, m = setup
    states = [_state(mjm, seed) for seed in range(4)]
    qpos = jp.asarray(np.stack([s.qpos for s in states]))
    batch = jax.jit(jax.vmap(lambda q: mjx_lite.forward(m, mjx_lite.make_data(m).replace(qpos=q))))(qpos)
    hits, misses = 0, 0
    for seed, mjd in enumerate(states):
        np.testing.assert_allclose(np.asarray(batch.sensordata[seed]), mjd.sensordata, rtol=0, atol=SENSOR_TOL,
                                   err_msg=str(seed))  # fmt: skip
        dist = mjd.sensordata[mjm.sensor_adr[1] :][: mjm.sensor_dim[1]].reshape(-1, 14)[:, 0]  # "intr", all fields
        hits, misses = hits + np.sum(dist >= 0), misses + np.sum(dist < 0)
    assert hits > 0 and misses > 0, (hits, misses)


@pytest.mark.slow
def test_trajectory_matches_mj_step(setup):
    """100 steps from a random state (damped joints under gravity, no contacts): sensordata at every step."""
    mjm, m = setup
    mjd = _state(mjm, 7)
    mjd.xfrc_applied[:] = 0
    d = mjx_lite.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
    step = jax.jit(mjx_lite.step)
    for t in range(100):
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
        np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, rtol=0, atol=TRAJ_TOL, err_msg=f"step {t}")
        # mj_step leaves the sensors of the state before the step; ours too
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=TRAJ_TOL,
                                   err_msg=f"step {t}")  # fmt: skip


def test_depth_gradients_match_central_differences(setup):
    """d(sum of depths of the perspective camera)/d(qpos) through kinematics and the camera rangefinder: finite and
    equal to central differences (a state where every pixel sees the floor far from an edge)."""
    mjm, m = setup
    adr, dim = int(mjm.sensor_adr[3]), int(mjm.sensor_dim[3])
    cam = int(mjm.sensor_objid[3])

    @jax.jit
    @jax.value_and_grad
    def f(q):
        d = kinematics.kinematics(m, mjx_lite.make_data(m).replace(qpos=q))
        return ray_camera.rangefinder(m, d, np.array([cam]), 1 << ray.DEPTH).sum()

    q0 = np.array([0.05, 1.0, 0.0])  # camera over bare floor
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = q0
    mujoco.mj_forward(mjm, mjd)
    normals = mjd.sensordata[adr : adr + dim].reshape(-1, 4)[:, :3]
    assert np.allclose(normals, [0, 0, 1])  # every pixel on the floor
    grad = np.asarray(f(jp.asarray(q0))[1])
    assert np.all(np.isfinite(grad)) and np.abs(grad[0]) > 0
    h = 1e-6
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd = (float(f(jp.asarray(q0 + e))[0]) - float(f(jp.asarray(q0 - e))[0])) / (2 * h)
        np.testing.assert_allclose(grad[j], fd, rtol=0, atol=FD_TOL, err_msg=f"qpos[{j}]")


@pytest.mark.parametrize(
    "sensor, message",
    [('<rangefinder camera="c" site="s"/>', "at most one of 'site', 'camera'"),
     ('<rangefinder camera="z"/>', "rangefinder camera sensor requires positive camera resolution")],
)  # fmt: skip
def test_errors_match_mujoco(sensor, message):
    xml = f"""<mujoco><worldbody><body><joint/><geom size=".1"/><site name="s"/><camera name="c"/>
      <camera name="z" resolution="0 3"/></body></worldbody><sensor>{sensor}</sensor></mujoco>"""
    with pytest.raises(ValueError, match=message):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=message):
        mjx_lite.load_mjcf_string(xml)
