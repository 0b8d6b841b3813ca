"""User sensors (`<sensor><user>`) against MuJoCo 4.0 in float64: without a callback they read zero (layout and
addresses as MuJoCo's); with `Config.sensor_user` they read what a Python `mjcb_sensor` set on MuJoCo's side computes
from the same fields at the same stage (vel: subtree velocities, acc: cacc after rne_postconstraint), cutoffs
applied; jit, vmap and grad go through the callback."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.types import SensorType, Stage

RTOL = 1e-9  # float64 round-off through the forward pass
ATOL = 1e-9
FD_RTOL = 1e-6  # gradient against central differences (h = 1e-6, float64)

XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="a" pos="0 0 .6" euler="10 20 30">
      <freejoint/>
      <geom type="box" size=".1 .15 .05"/>
      <site name="sa" pos=".05 0 0"/>
      <body name="b" pos=".2 0 0">
        <joint name="hinge" axis="0 1 0" damping=".1"/>
        <geom type="capsule" size=".04 .1" euler="0 90 0"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <jointpos joint="hinge"/>
    <user name="u_pos" dim="2" needstage="pos" cutoff=".4" objtype="body" objname="a"/>
    <accelerometer site="sa"/>
    <user name="u_vel" dim="3" needstage="vel" datatype="real"/>
    <user name="u_acc" dim="1" datatype="positive" cutoff="3"/>
    <user name="u_acc3" dim="3"/>
    <framepos objtype="body" objname="b"/>
  </sensor>
</mujoco>"""


def _value(i: int, xpos, subtree_linvel, cacc, qvel):
    """What user sensor i reads, from MuJoCo's or our fields (numpy or jax arrays): the same formula on both sides."""
    if i == 1:  # pos: body a's position scaled (clipped by the cutoff)
        return 3 * xpos[1, :2]
    if i == 3:  # vel: body a's subtree linear velocity (needs subtree_vel)
        return subtree_linvel[1]
    if i == 4:  # acc: |linear com-based acceleration of body b| (needs rne_postconstraint), positive with cutoff
        return (cacc[2, 3:] ** 2).sum(keepdims=True) ** 0.5
    return cacc[1, :3] + qvel[6]


def _ours(m, d, i):
    return _value(i, d.xpos, d.subtree_linvel, d.cacc, d.qvel)


def _mujoco_callback(m, d, stage):
    for i in range(m.nsensor):
        if m.sensor_type[i] == mujoco.mjtSensor.mjSENS_USER and m.sensor_needstage[i] == stage:
            adr, dim = m.sensor_adr[i], m.sensor_dim[i]
            d.sensordata[adr : adr + dim] = _value(i, d.xpos, d.subtree_linvel, d.cacc, d.qvel)


def _states(mjm, n, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        q = mjm.qpos0.copy()
        q[:3] += rng.normal(0, 0.1, 3)
        q[3:7] = q[3:7] + rng.normal(0, 0.2, 4)
        q[3:7] /= np.linalg.norm(q[3:7])
        q[7] = rng.normal(0, 0.5)
        out.append((q, rng.normal(0, 1.0, mjm.nv)))
    return out


def _mujoco_sensordata(mjm, qpos, qvel, callback):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    old = mujoco.get_mjcb_sensor()
    mujoco.set_mjcb_sensor(callback)
    try:
        mujoco.mj_forward(mjm, mjd)
    finally:
        mujoco.set_mjcb_sensor(old)
    return mjd.sensordata.copy()


@pytest.fixture(scope="module")
def models():
    mjm = mujoco.MjModel.from_xml_string(XML)
    plain = mjl.load_mjcf_string(XML)
    hooked = mjl.configure(plain, sensor_user=_ours)
    return mjm, plain, hooked


@pytest.fixture(scope="module")
def forward():
    return jax.jit(mjl.forward)


def _ours_sensordata(m, forward, qpos, qvel):
    d = mjl.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel))
    return np.asarray(forward(m, d).sensordata)


def test_layout(models):
    """Sensor fields of the user sensors compile as MuJoCo's (type, stage, datatype, object, dim, address)."""
    mjm, m, _ = models
    for f in ("sensor_type", "sensor_needstage", "sensor_datatype", "sensor_objtype", "sensor_objid", "sensor_dim",
              "sensor_adr"):  # fmt: skip
        np.testing.assert_array_equal(np.asarray(getattr(m, f)), np.asarray(getattr(mjm, f)), err_msg=f)
    np.testing.assert_allclose(np.asarray(m.sensor_cutoff), mjm.sensor_cutoff)
    assert m.nsensordata == mjm.nsensordata
    user = np.asarray(m.sensor_type) == SensorType.USER
    assert sorted(set(np.asarray(m.sensor_needstage)[user].tolist())) == [Stage.POS, Stage.VEL, Stage.ACC]


@pytest.mark.parametrize("k", range(3))
def test_no_callback_zeros(models, forward, k):
    """Without a callback every user slot is zero and the other sensors are MuJoCo's (mjcb_sensor unset)."""
    mjm, m, _ = models
    qpos, qvel = _states(mjm, 3)[k]
    want = _mujoco_sensordata(mjm, qpos, qvel, None)
    got = _ours_sensordata(m, forward, qpos, qvel)
    user = np.concatenate([np.arange(a, a + n) for a, n, t in zip(mjm.sensor_adr, mjm.sensor_dim, mjm.sensor_type)
                           if t == mujoco.mjtSensor.mjSENS_USER])  # fmt: skip
    assert np.all(want[user] == 0) and np.all(got[user] == 0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("k", range(3))
def test_callback_matches_mjcb_sensor(models, forward, k):
    """Config.sensor_user against the same function set as MuJoCo's mjcb_sensor: every slot, cutoffs included."""
    mjm, _, m = models
    qpos, qvel = _states(mjm, 3, seed=1)[k]
    want = _mujoco_sensordata(mjm, qpos, qvel, _mujoco_callback)
    got = _ours_sensordata(m, forward, qpos, qvel)
    assert np.any(want != _mujoco_sensordata(mjm, qpos, qvel, None))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_cutoff_clips(models, forward):
    """A state where the pos sensor's cutoff (0.4) clips both components: ours clips as MuJoCo."""
    mjm, _, m = models
    qpos, qvel = _states(mjm, 1, seed=2)[0]
    qpos[:2] = (0.5, -0.5)
    want = _mujoco_sensordata(mjm, qpos, qvel, _mujoco_callback)
    got = _ours_sensordata(m, forward, qpos, qvel)
    adr = int(mjm.sensor_adr[1])
    np.testing.assert_array_equal(want[adr : adr + 2], [0.4, -0.4])
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_vmap_and_grad(models, forward):
    """vmap over states equals the single runs; the vel user sensor's derivative in qvel equals central
    differences. One compiled program: value_and_grad vmapped over the two states and the 2 nv central-difference
    states; the single runs from the module's jit(forward) (the program of the tests above)."""
    mjm, _, m = models
    states = _states(mjm, 2, seed=3)
    d0 = mjl.make_data(m)
    q, v = states[0]
    adr = int(mjm.sensor_adr[3])
    h = 1e-6
    dv = h * np.eye(mjm.nv)
    qs = np.stack([s[0] for s in states] + [q] * (2 * mjm.nv))
    vs = np.concatenate([np.stack([s[1] for s in states]), v + dv, v - dv])

    def vel_sensor(qpos, qvel):
        sensordata = mjl.forward(m, d0.replace(qpos=qpos, qvel=qvel)).sensordata
        return sensordata[adr], sensordata

    (vals, batched), grads = jax.jit(jax.vmap(jax.value_and_grad(vel_sensor, argnums=1, has_aux=True)))(
        jp.asarray(qs), jp.asarray(vs)
    )
    for j, (qj, vj) in enumerate(states):
        np.testing.assert_allclose(np.asarray(batched[j]), _ours_sensordata(m, forward, qj, vj), rtol=RTOL, atol=ATOL)
    g = np.asarray(grads[0])
    vals = np.asarray(vals)
    fd = (vals[2 : 2 + mjm.nv] - vals[2 + mjm.nv :]) / (2 * h)
    assert np.all(np.isfinite(g)) and np.any(g != 0)
    np.testing.assert_allclose(g, fd, rtol=FD_RTOL, atol=FD_RTOL)


def test_bad_shape_raises(models):
    """A callback returning the wrong size is an error naming the sensor."""
    _, m, _ = models
    bad = mjl.configure(m, sensor_user=lambda m, d, i: jp.zeros(7))
    with pytest.raises(ValueError, match="user sensor 1"):
        mjl.forward(bad, mjl.make_data(bad))


def test_config_rejects_non_callable():
    with pytest.raises(TypeError, match="sensor_user"):
        mjl.Config(sensor_user=3)


def test_schema_as_mujoco():
    """MuJoCo's user sensor has no history buffer: nsample is refused by both."""
    xml = XML.replace('<user name="u_acc3" dim="3"/>', '<user name="u_acc3" dim="3" nsample="2"/>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjl.MJCFError, match="nsample"):
        mjl.load_mjcf_string(xml)
