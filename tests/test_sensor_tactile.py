"""Tactile sensors (`<tactile geom=... mesh=...>`) against MuJoCo 4.0 in float64.

Compiled fields (type, stage, objects, dim = 3 x vertices, and the taxel tangents `sensor_tangent` against MuJoCo's
mesh_normal frames of the builtin wedge and plate meshes, with refquat and non-uniform scale). Values: on Data filled
from MuJoCo's mj_forward (its contacts included), a pad and a fingertip pressed into primitives of every type with a
distance function (plane, sphere, capsule, ellipsoid, cylinder, box, inside and outside) in several poses and
velocities, cutoffs included; end to end through mjx_lite.forward (our collisions) on a pad pressed onto a ball.
jit/vmap, gradients against central differences; load-time refusals."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import sensor, sensor_tactile
from mjx_lite.types import ObjType, SensorType, Stage
from tests import oracle

ATOL = 1e-12  # depths and slip speeds: a few float64 products from the same kinematics (MuJoCo's, copied)
FORWARD_ATOL = 1e-9  # end to end: our kinematics and collisions against MuJoCo's, float64 round-off
FD_RTOL = 1e-6  # gradient against central differences (h = 1e-7, float64)
STEP_ATOL = 1e-8  # ten steps of our trajectory against mj_step (contact solver to its tolerance)

XML = """
<mujoco>
  <asset>
    <mesh name="plate" builtin="plate" params="6 5" scale=".2 .3 .1"/>
    <mesh name="wedge" builtin="wedge" params="7 6 70 50 .3" scale=".15 .13 .14" refquat="1 .1 .2 .05"/>
    <mesh name="tet" vertex="0 0 0  .1 0 0  0 .1 0  0 0 .1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="pad" pos="0 0 .3">
      <freejoint/>
      <geom name="padbox" type="box" size=".2 .3 .1"/>
      <geom name="taxels" type="mesh" mesh="plate" contype="0" conaffinity="0" mass="0"/>
      <geom name="tetgeom" type="mesh" mesh="tet" contype="0" conaffinity="0" mass="0" pos="0 0 -.12"/>
    </body>
    <body name="ball" pos=".05 .02 .1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".08"/>
    </body>
    <body name="finger" pos=".8 0 .3">
      <freejoint/>
      <geom type="sphere" size=".15"/>
      <geom name="tip" type="mesh" mesh="wedge" contype="0" conaffinity="0" mass="0"/>
    </body>
    <body name="obst" pos=".8 0 .1">
      <joint type="slide" axis="1 0 0"/>
      <geom type="box" size=".1 .1 .05"/>
      <geom type="capsule" size=".03 .1" pos=".1 0 .05" euler="0 90 0"/>
      <geom type="cylinder" size=".05 .03" pos="-.1 .05 .05"/>
      <geom type="ellipsoid" size=".05 .04 .03" pos="0 -.1 .06"/>
    </body>
  </worldbody>
  <sensor>
    <tactile geom="taxels" mesh="plate"/>
    <tactile geom="tip" mesh="wedge" cutoff=".5"/>
    <tactile geom="tetgeom" mesh="tet"/>
  </sensor>
</mujoco>"""


def _states(mjm, n, seed=0):
    """n (qpos, qvel): the pad pressed onto the ball and the fingertip into the obstacles deeper and deeper."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        q = mjm.qpos0.copy()
        q[0:3] = (0.03 * rng.normal(), 0.03 * rng.normal(), 0.27 - 0.012 * k)
        q[3:7] = (1, 0.05 * rng.normal(), 0.05 * rng.normal(), 0.3 * rng.normal())
        q[3:7] /= np.linalg.norm(q[3:7])
        q[14:17] = (0.8 + 0.04 * rng.normal(), 0.04 * rng.normal(), 0.28 - 0.025 * k)
        q[17:21] = (1, 0.2 * rng.normal(), 0.2 * rng.normal(), 0.2 * rng.normal())
        q[17:21] /= np.linalg.norm(q[17:21])
        q[21] = 0.05 * rng.normal()
        out.append((q, rng.normal(0, 1.0, mjm.nv)))
    return out


def _mujoco(mjm, q, v):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = q, v
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _data_from_mujoco(m, mjm, mjd):
    """Our Data with MuJoCo's fields and its contacts (geoms, active rows)."""
    d = oracle.data_from_mujoco(m, mjm, mjd)
    assert mjd.ncon <= m.nconmax
    geom = np.full((m.nconmax, 2), -1, np.int32)
    geom[: mjd.ncon] = mjd.contact.geom[: mjd.ncon]
    active = np.arange(m.nconmax) < mjd.ncon
    return d.replace(contact=d.contact.replace(geom=geom, active=active))


@pytest.fixture(scope="module")
def models():
    return mujoco.MjModel.from_xml_string(XML), mjl.load_mjcf_string(XML)


@pytest.fixture(scope="module")
def sensor_vel():
    return jax.jit(sensor.sensor_vel)


def test_compiled_fields(models):
    mjm, m = models
    for f in ("sensor_type", "sensor_needstage", "sensor_datatype", "sensor_objtype", "sensor_objid", "sensor_reftype",
              "sensor_refid", "sensor_dim", "sensor_adr"):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(m, f)), getattr(mjm, f), err_msg=f)
    np.testing.assert_array_equal(np.asarray(m.sensor_cutoff), mjm.sensor_cutoff)
    assert set(np.asarray(m.sensor_type).tolist()) == {SensorType.TACTILE}
    assert set(np.asarray(m.sensor_needstage).tolist()) == {Stage.VEL}
    assert set(np.asarray(m.sensor_objtype).tolist()) == {ObjType.MESH}
    want = oracle.sensor_tangent_from_mujoco(mjm)
    assert np.count_nonzero(want[:, :]) > 0 and not np.any(want[-3 * 4 :])  # the tet has no frames
    np.testing.assert_array_equal(np.asarray(m.sensor_tangent), want)  # MuJoCo's float32 values, bit for bit


@pytest.mark.parametrize("k", range(5))
def test_on_mujoco_data(models, sensor_vel, k):
    """Every tactile value (depth, two slip speeds per taxel, cutoff) on MuJoCo's kinematics and contacts."""
    mjm, m = models
    q, v = _states(mjm, 5)[k]
    mjd = _mujoco(mjm, q, v)
    d = _data_from_mujoco(m, mjm, mjd).replace(sensordata=jp.full(m.nsensordata, 7.0))
    got = np.asarray(sensor_vel(m, d).sensordata)
    want = mjd.sensordata
    n0, n1 = mjm.mesh_vertnum[mjm.sensor_objid[0]], mjm.mesh_vertnum[mjm.sensor_objid[1]]
    assert np.count_nonzero(want[:n0]) > 0 and np.count_nonzero(want[3 * n0 : 3 * n0 + n1]) > 0  # both in contact
    assert np.any(want[3 * n0 : 3 * (n0 + n1)] == 0.5)  # the fingertip's cutoff clips
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_every_distance_function(models):
    """The poses above reach each primitive type with taxels inside it (so each distance function is compared)."""
    mjm, m = models
    tip = int(mjm.sensor_refid[1])
    seen = set()
    for q, v in _states(mjm, 5):
        mjd = _mujoco(mjm, q, v)
        n = int(mjm.mesh_vertnum[mjm.sensor_objid[1]])
        vert = np.asarray(m.mesh_vert)[m.mesh_vertadr[mjm.sensor_objid[1]] :][:n]
        xpos = vert @ mjd.geom_xmat[tip].reshape(3, 3).T + mjd.geom_xpos[tip]
        for g in sensor_tactile.candidates(m, int(mjm.body_weldid[mjm.geom_bodyid[tip]])):
            lpos = (xpos - mjd.geom_xpos[g]) @ mjd.geom_xmat[g].reshape(3, 3)
            dist = sensor_tactile.geom_distance(int(mjm.geom_type[g]), jp.asarray(lpos), jp.asarray(mjm.geom_size[g]))
            if np.any(np.asarray(dist) < 0) and g in mjd.contact.geom[: mjd.ncon]:
                seen.add(int(mjm.geom_type[g]))
    assert seen >= {mujoco.mjtGeom.mjGEOM_BOX, mujoco.mjtGeom.mjGEOM_CAPSULE, mujoco.mjtGeom.mjGEOM_CYLINDER,
                    mujoco.mjtGeom.mjGEOM_ELLIPSOID}, seen  # fmt: skip


def test_box_inside_distance():
    """Inside a box the distance follows MuJoCo's radial-to-normal field (not the nearest face): taxels deep in a
    box at random places, against MuJoCo's tactile depths."""
    xml = """<mujoco><asset><mesh name="p" builtin="plate" params="2 2" scale=".01 .01 .01"/></asset>
      <worldbody><geom name="b" type="box" size=".3 .2 .1"/>
        <body name="s" pos="{x} {y} {z}" euler="{a} {b} {c}"><freejoint/><geom type="sphere" size=".02"/>
          <geom name="t" type="mesh" mesh="p" contype="0" conaffinity="0" mass="0"/></body></worldbody>
      <sensor><tactile geom="t" mesh="p"/></sensor></mujoco>"""
    rng = np.random.default_rng(3)
    for _ in range(4):
        x, y, z = rng.uniform(-1, 1, 3) * (0.25, 0.15, 0.05)
        a, b, c = rng.uniform(-90, 90, 3)
        mjm = mujoco.MjModel.from_xml_string(xml.format(x=x, y=y, z=z, a=a, b=b, c=c))
        mjd = _mujoco(mjm, mjm.qpos0, np.zeros(mjm.nv))
        vert = mjm.mesh_vert.astype(float) @ mjd.geom_xmat[2].reshape(3, 3).T + mjd.geom_xpos[2]
        ours = sensor_tactile.geom_distance(mujoco.mjtGeom.mjGEOM_BOX, jp.asarray(vert), jp.asarray(mjm.geom_size[0]))
        assert np.all(mjd.sensordata[:4] > 0)
        np.testing.assert_allclose(-np.asarray(ours), mjd.sensordata[:4], rtol=0, atol=ATOL)


PAD_XML = """
<mujoco>
  <asset><mesh name="plate" builtin="plate" params="6 5" scale=".2 .3 .1"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="pad" pos="0 0 .3">
      <freejoint/>
      <geom name="padbox" type="box" size=".2 .3 .1"/>
      <geom name="taxels" type="mesh" mesh="plate" contype="0" conaffinity="0" mass="0"/>
    </body>
    <body name="ball" pos=".05 .02 .1">
      <freejoint/>
      <geom name="ball" type="sphere" size=".08"/>
    </body>
  </worldbody>
  <sensor><tactile geom="taxels" mesh="plate" cutoff="2"/></sensor>
</mujoco>"""


def test_forward_end_to_end():
    """Through mjx_lite.forward (our kinematics and collisions): a pad pressed onto a ball, three poses."""
    mjm, m = mujoco.MjModel.from_xml_string(PAD_XML), mjl.load_mjcf_string(PAD_XML)
    fwd = jax.jit(mjl.forward)
    rng = np.random.default_rng(5)
    for k in range(3):
        q = mjm.qpos0.copy()
        q[0:3] = (0.03 * rng.normal(), 0.03 * rng.normal(), 0.27 - 0.012 * k)
        q[3:7] = (1, 0.05 * rng.normal(), 0.05 * rng.normal(), 0.3 * rng.normal())
        q[3:7] /= np.linalg.norm(q[3:7])
        v = rng.normal(0, 1.0, mjm.nv)
        mjd = _mujoco(mjm, q, v)
        d = fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(q), qvel=jp.asarray(v)))
        assert mjd.sensordata.any()
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=FORWARD_ATOL)


def test_vmap_and_grad(models, sensor_vel):
    """vmap over states equals the single runs; the depth's derivative in the ball's position equals central
    differences (taxels inside the ball: the depth is smooth there)."""
    mjm, m = models
    ds = [_data_from_mujoco(m, mjm, _mujoco(mjm, q, v)) for q, v in _states(mjm, 2)]
    batched = jax.vmap(sensor_vel, in_axes=(None, 0))(m, jax.tree_util.tree_map(lambda *x: jp.stack(x), *ds))
    for j, d in enumerate(ds):
        np.testing.assert_allclose(np.asarray(batched.sensordata[j]), np.asarray(sensor_vel(m, d).sensordata),
                                   rtol=0, atol=ATOL)  # fmt: skip
    d = ds[1]
    n = int(mjm.mesh_vertnum[mjm.sensor_objid[0]])
    ball = int(mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, "ball"))

    def total_depth(p):
        return jp.sum(sensor_tactile.tactile(m, d.replace(geom_xpos=d.geom_xpos.at[ball].set(p)), 0)[:n])

    # one compiled program: the central differences' values come from value_and_grad's too
    vg = jax.jit(jax.value_and_grad(total_depth))
    p0 = np.asarray(d.geom_xpos[ball])
    g = np.asarray(vg(jp.asarray(p0))[1])
    h = 1e-7
    fd = np.array([(float(vg(jp.asarray(p0 + h * e))[0]) - float(vg(jp.asarray(p0 - h * e))[0])) / (2 * h)
                   for e in np.eye(3)])  # fmt: skip
    assert np.all(np.isfinite(g)) and abs(g[2]) > 0
    np.testing.assert_allclose(g, fd, rtol=FD_RTOL, atol=FD_RTOL)


_HFIELD = """<mujoco><asset><mesh name="p" builtin="plate" params="2 2"/>
  <hfield name="h" nrow="3" ncol="3" size="1 1 .1 .1"/></asset>
  <worldbody><geom type="hfield" hfield="h"/><body pos="0 0 1"><freejoint/><geom type="sphere" size=".1"/>
  <geom name="t" type="mesh" mesh="p" contype="0" conaffinity="0" mass="0"/></body></worldbody>
  <sensor><tactile geom="t" mesh="p"/></sensor></mujoco>"""


def test_refusals():
    """What MuJoCo cannot evaluate near a tactile sensor (a height field: it raises when one touches the pad) is
    refused at load, naming the attribute; MuJoCo loads the same model."""
    mujoco.MjModel.from_xml_string(_HFIELD)
    with pytest.raises(mjl.MJCFUnsupportedError, match="height field") as err:
        mjl.load_mjcf_string(_HFIELD)
    assert err.value.attribute == "geom"
    xml = _HFIELD.replace('<geom type="hfield" hfield="h"/>', '<geom type="hfield" hfield="h" contype="2" '
                          'conaffinity="2"/>')  # fmt: skip
    m = mjl.load_mjcf_string(xml)  # cannot touch the pad: accepted
    assert m.nsensordata == 12
    paired = xml.replace('<geom type="hfield"', '<geom name="hf" type="hfield"').replace(
        '<geom type="sphere" size=".1"/>', '<geom name="s" type="sphere" size=".1"/>').replace(
        "</worldbody>", '</worldbody><contact><pair geom1="hf" geom2="s"/></contact>')  # fmt: skip
    mujoco.MjModel.from_xml_string(paired)
    with pytest.raises(mjl.MJCFUnsupportedError, match="height field"):  # an explicit pair reaches it
        mjl.load_mjcf_string(paired)


def test_schema_as_mujoco():
    """MuJoCo's tactile sensor has no noise attribute; geom and mesh are required."""
    bad = XML.replace('<tactile geom="tip" mesh="wedge" cutoff=".5"/>', '<tactile geom="tip" mesh="wedge" noise="1"/>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(bad)
    with pytest.raises(mjl.MJCFError, match="noise"):
        mjl.load_mjcf_string(bad)
    missing = XML.replace('<tactile geom="tip" mesh="wedge" cutoff=".5"/>', '<tactile geom="tip"/>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(missing)
    with pytest.raises(mjl.MJCFError, match="mesh"):
        mjl.load_mjcf_string(missing)


def test_mesh_geoms_contribute_nothing(sensor_vel):
    """A mesh geom pressed into the pad has no distance field (MuJoCo builds an SDF octree only for sdf geoms): the
    sensor reads zero where MuJoCo does, while the contact itself exists."""
    xml = PAD_XML.replace('<geom name="ball" type="sphere" size=".08"/>',
                          '<geom name="ball" type="mesh" mesh="tet"/>').replace(
        "<asset>", '<asset><mesh name="tet" vertex="-.1 -.1 0  .1 -.1 0  0 .1 0  0 0 .2"/>')  # fmt: skip
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    q = mjm.qpos0.copy()
    q[2] = 0.1 + 0.2 + 0.1 - 0.02  # the tet's apex 2 cm into the pad
    mjd = _mujoco(mjm, q, np.ones(mjm.nv))
    assert mjd.ncon > 0 and not mjd.sensordata.any()
    d = _data_from_mujoco(m, mjm, mjd)
    np.testing.assert_array_equal(np.asarray(jax.jit(sensor.sensor_vel)(m, d).sensordata), mjd.sensordata)


def test_flex_refused():
    """A tactile sensor in a model with a colliding flex is refused (MuJoCo's sensor reads the geom of every contact,
    which a flex contact lacks); MuJoCo loads the model."""
    flex = ('<body name="cloth" pos="1 0 1"><flexcomp name="c" type="grid" count="3 3 1" spacing=".1 .1 .1" '
            'dim="2" mass=".1" radius=".005"><contact contype="1" conaffinity="1" selfcollide="none"/></flexcomp>'
            "</body>")  # fmt: skip
    xml = PAD_XML.replace("</worldbody>", flex + "</worldbody>")
    mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjl.MJCFUnsupportedError, match="tactile sensors in a model with colliding flexes"):
        mjl.load_mjcf_string(xml)


def test_delayed_through_step():
    """A tactile sensor with a history buffer and a delay (nsample, delay, interp): ten steps of a pad sliding on a
    ball against mj_step, sensordata at every step."""
    xml = PAD_XML.replace('cutoff="2"/>', 'cutoff="2" nsample="4" delay=".004" interp="linear"/>')
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    q = mjm.qpos0.copy()
    q[2] = 0.1 + 0.08 + 0.1 - 0.01
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = q
    mjd.qvel[:3] = (0.3, -0.2, 0)
    d = mjl.make_data(m).replace(qpos=jp.asarray(q), qvel=jp.asarray(mjd.qvel))
    step = jax.jit(mjl.step)
    nonzero = 0
    for _ in range(10):
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
        nonzero += bool(mjd.sensordata.any())
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=STEP_ATOL)
    assert nonzero >= 5
