"""Touch and contact sensors against MuJoCo 4.0 (float64), end to end through mjx_lite.forward with our compiler:
pyramidal and elliptic cones, condim 1/3/6, every contact-sensor object kind and reduction, both geom orders,
explicit pairs, sensors that match nothing; plus jit+vmap and a finite touch gradient."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.pipeline import sensor_contact
from mjx_lite.types import GeomType

# The oracle's solver runs to convergence (Newton, tolerance 1e-12): forces agree to the solvers' residual.
FORCE_ATOL = 1e-6  # N, on forces of O(1..100) N: the two converged solvers' residual
FORCE_RTOL = 1e-7
GEOM_ATOL = 1e-9  # contact points, normals, distances, velocities: float64 round-off through kinematics

XML = """
<mujoco>
  <option cone="{cone}" impratio="{impratio}" iterations="100" tolerance="1e-12" ls_iterations="50"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <body name="robot" pos="0 0 .2">
      <freejoint/>
      <geom name="torso" type="box" size=".15 .1 .05" condim="3"/>
      <site name="sole" type="box" size=".16 .11 .02" pos="0 0 -.05"/>
      <site name="corner" type="sphere" size=".04" pos="-.15 .1 -.05"/>
      <site name="side" type="capsule" size=".03 .1" pos="-.15 0 -.05" euler="90 0 0"/>
      <body name="leg" pos=".3 0 0">
        <joint name="knee" type="hinge" axis="0 1 0" range="-60 60"/>
        <geom name="shin" type="capsule" size=".04 .12" pos="0 0 -.1" condim="6"/>
        <site name="foot" type="cylinder" size=".06 .03" pos="0 0 -.22"/>
        <site name="ankle" type="ellipsoid" size=".05 .05 .08" pos="0 0 -.2"/>
      </body>
    </body>
    <body name="ball" pos="-.5 .3 .1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".1" condim="1"/>
      <site name="ball_site" type="sphere" size=".12"/>
    </body>
    <body name="far" pos="1 1 1">
      <freejoint/>
      <geom name="far" type="sphere" size=".05"/>
      <site name="far_site" type="sphere" size=".06"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="ball" geom2="floor" condim="3" friction=".7 .7 .01 .001 .001"/>
    <exclude body1="ball" body2="robot"/>
  </contact>
  <sensor>
    <touch site="sole"/>
    <touch site="corner"/>
    <touch site="side" cutoff="5"/>
    <touch site="foot"/>
    <touch site="ankle"/>
    <touch site="ball_site"/>
    <touch site="far_site"/>
    <contact geom1="floor" geom2="torso" data="found force torque dist pos normal tangent" num="4"/>
    <contact geom1="torso" geom2="floor" data="found force torque dist pos normal tangent" num="4" cutoff="1"/>
    <contact body1="robot" data="found dist pos normal" num="3" reduce="mindist"/>
    <contact subtree1="robot" data="found force torque" num="2" reduce="maxforce"/>
    <contact subtree2="robot" data="found force torque dist" num="7"/>
    <contact site="sole" data="found force pos" num="5"/>
    <contact data="found force torque pos normal tangent" reduce="netforce"/>
    <contact subtree2="robot" data="found force torque pos normal tangent" num="2" reduce="netforce"/>
    <contact body2="leg" body1="world" data="found force torque linvel angvel" num="3"/>
    <contact geom2="ball" data="found linvel angvel" num="2"/>
    <contact geom1="floor" data="found dist pos normal tangent" num="12"/>
    <contact geom1="far" data="found force pos" num="2" reduce="mindist"/>
    <contact geom1="far" data="found force torque pos normal tangent" reduce="netforce"/>
  </sensor>
</mujoco>
"""

CONES = {"pyramidal": XML.format(cone="pyramidal", impratio=1), "elliptic": XML.format(cone="elliptic", impratio=3)}


def _state(mjm: mujoco.MjModel, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """qpos/qvel with the robot and ball pressed into the floor (tilted when seed > 0), the far ball in the air."""
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0.copy()
    qpos[2] = 0.045 + 0.01 * seed  # torso half height .05: a few mm of penetration
    if seed:
        ax = rng.normal(size=3) * np.array([1.0, 1.0, 0.2])
        quat = np.zeros(4)
        mujoco.mju_axisAngle2Quat(quat, ax / np.linalg.norm(ax), 0.1)
        qpos[3:7] = quat
    qpos[7] = 0.2 * seed  # knee
    qpos[8:11] = [-0.5, 0.3, 0.095]
    qvel = 0.3 * rng.normal(size=mjm.nv)
    return qpos, qvel


# pyramidal slow (CI time: ~11 worker-s, its own forward compile): the sensor code reads contact_force's normal and
# friction forces whatever the cone (elliptic stays default); mj_contactForce's pyramidal conversion is compared with
# MuJoCo by default in tests/test_inverse.py::test_contact_force_and_cfrc_ext[pyramidal]
@pytest.fixture(scope="module", params=[pytest.param("pyramidal", marks=pytest.mark.slow), "elliptic"])
def case(request):
    xml = CONES[request.param]
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjx_lite.load_mjcf_string(xml)
    return request.param, mjm, m, jax.jit(mjx_lite.forward)


def _run(mjm, m, fwd, seed):
    qpos, qvel = _state(mjm, seed)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    mujoco.mj_forward(mjm, mjd)
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel)))
    return mjd, d


def test_compiled_sensor_arrays_match_mujoco(case):
    """sensor_type/intprm/dim/adr/needstage/objects of our compiler == MuJoCo's (the runtime trusts them)."""
    _, mjm, m, _ = case
    names = "type datatype needstage objtype objid reftype refid dim adr intprm cutoff"
    for f in ("sensor_" + n for n in names.split()):
        np.testing.assert_array_equal(np.asarray(getattr(m, f)), getattr(mjm, f), err_msg=f)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_sensors_match_mujoco(case, seed):
    name, mjm, m, fwd = case
    mjd, d = _run(mjm, m, fwd, seed)
    assert int(d.ncon) == mjd.ncon
    got = np.asarray(d.sensordata)
    for i in range(mjm.nsensor):
        adr, dim = mjm.sensor_adr[i], mjm.sensor_dim[i]
        want = mjd.sensordata[adr : adr + dim]
        msg = f"{name} seed {seed}: sensor {i} {mujoco.mjtSensor(mjm.sensor_type[i]).name}"
        np.testing.assert_allclose(got[adr : adr + dim], want, rtol=FORCE_RTOL, atol=FORCE_ATOL, err_msg=msg)
        # non-force fields are much tighter: compare where the oracle value is not a force
        if mjm.sensor_type[i] == mujoco.mjtSensor.mjSENS_CONTACT and not mjm.sensor_intprm[i, 0] & 0b110:
            np.testing.assert_allclose(got[adr : adr + dim], want, rtol=0, atol=GEOM_ATOL, err_msg=msg)


def test_cases_are_meaningful(case):
    """Over the states: touches read positive and zero values, flips and the cutoff happen, ties exist."""
    name, mjm, m, fwd = case
    touch = np.nonzero(mjm.sensor_type == mujoco.mjtSensor.mjSENS_TOUCH)[0]
    pos, zero, clipped = 0, 0, 0
    for seed in range(3):
        mjd = _run(mjm, m, fwd, seed)[0]
        vals = mjd.sensordata[mjm.sensor_adr[touch]]
        pos += int(np.sum(vals > 0))
        zero += int(np.sum(vals == 0))
        clipped += int(np.any(vals == 5.0))  # the `side` touch sensor has cutoff 5
        if seed == 0:  # flat torso: four corners at the same depth (mindist ties broken by contact order)
            dists = [c.dist for c in mjd.contact[: mjd.ncon] if 1 in c.geom]
            assert len(dists) >= 4 and np.ptp(dists[:4]) < 1e-12
    assert pos >= 6 and zero >= 3 and clipped >= 1, (pos, zero, clipped)


def test_ray_hits_match_mujoco():
    """The touch sensor's ray test == mju_rayGeom (hit or miss) on random rays, every site shape."""
    rng = np.random.default_rng(0)
    ray_hits = jax.jit(sensor_contact.ray_hits, static_argnums=0)  # (op by op: hundreds of tiny compiles)
    for gtype in (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX):
        size = rng.uniform(0.1, 0.5, 3)
        quat = rng.normal(size=4)
        mat = np.zeros(9)
        mujoco.mju_quat2Mat(mat, quat / np.linalg.norm(quat))
        pos = 0.3 * rng.normal(size=3)
        pnt = pos + 0.6 * rng.normal(size=(400, 3))
        vec = rng.normal(size=(400, 3))
        vec /= np.linalg.norm(vec, axis=1, keepdims=True)
        vec[:40] = mat.reshape(3, 3)[:, rng.integers(0, 3, 40)].T  # rays parallel to the shape's axes
        ours = np.asarray(ray_hits(int(gtype), jp.asarray(pos), jp.asarray(mat.reshape(3, 3)),
                                                  jp.asarray(size), jp.asarray(pnt), jp.asarray(vec)))  # fmt: skip
        ref = np.array([mujoco.mju_rayGeom(pos, mat, size, p, v, int(gtype)) >= 0 for p, v in zip(pnt, vec)])
        np.testing.assert_array_equal(ours, ref, err_msg=GeomType(gtype).name)
        assert 0 < ref.sum() < len(ref)


SMALL_XML = """
<mujoco>
  <option iterations="100" tolerance="1e-12"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 .1"/>
    <body name="foot" pos="0 0 .2">
      <freejoint/>
      <geom name="foot" type="box" size=".1 .06 .04"/>
      <site name="sole" type="box" size=".11 .07 .02" pos="0 0 -.04"/>
    </body>
  </worldbody>
  <sensor>
    <touch site="sole"/>
    <contact geom2="foot" data="found force dist" num="4" reduce="maxforce"/>
  </sensor>
</mujoco>
"""


@pytest.mark.slow  # one compile of vmap(grad(forward)): ~25 s of CPU
def test_jit_vmap_grad():
    """jit(vmap(value_and_grad(touch))) over two states: values == MuJoCo, d touch / d qpos finite and non-zero."""
    mjm = mujoco.MjModel.from_xml_string(SMALL_XML)
    m = mjx_lite.load_mjcf_string(SMALL_XML)
    d0 = mjx_lite.make_data(m)
    rng = np.random.default_rng(3)
    qpos = np.tile(mjm.qpos0, (2, 1))
    qpos[:, 2] = [0.036, 0.037]  # 4 mm and 3 mm into the floor
    qpos[1, 3:7] = [1.0, 0.02, -0.03, 0.0]  # slightly tilted: unequal corner forces
    qpos[1, 3:7] /= np.linalg.norm(qpos[1, 3:7])
    qvel = 0.1 * rng.normal(size=(2, mjm.nv))

    def touch(q, v):
        d = mjx_lite.forward(m, d0.replace(qpos=q, qvel=v))
        return d.sensordata[0], d.sensordata

    (val, sdata), grad = jax.jit(jax.vmap(jax.value_and_grad(touch, has_aux=True)))(jp.asarray(qpos), jp.asarray(qvel))
    for k in range(2):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos[k], qvel[k]
        mujoco.mj_forward(mjm, mjd)
        np.testing.assert_allclose(np.asarray(sdata[k]), mjd.sensordata, rtol=FORCE_RTOL, atol=FORCE_ATOL)
        assert mjd.sensordata[0] > 0
    g = np.asarray(grad)
    assert np.all(np.isfinite(g)) and np.all(np.abs(g[:, 2]) > 0), g  # pressing deeper changes the touch
