"""mjx_lite.names: ids match MuJoCo's mj_name2id, slices match the address tables, errors list the names."""

import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite import names

_KINDS = {"body": mujoco.mjtObj.mjOBJ_BODY, "joint": mujoco.mjtObj.mjOBJ_JOINT, "geom": mujoco.mjtObj.mjOBJ_GEOM,
          "site": mujoco.mjtObj.mjOBJ_SITE, "sensor": mujoco.mjtObj.mjOBJ_SENSOR,
          "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR}  # fmt: skip


@pytest.fixture(scope="module")
def humanoid():
    return mjx_lite.load_mjcf("humanoid"), mujoco.MjModel.from_xml_path(mjx_lite.models.path("humanoid"))


def test_ids_match_mujoco(humanoid):
    m, mjm = humanoid
    lookup = {"body": names.body_id, "joint": names.joint_id, "geom": names.geom_id, "site": names.site_id,
              "sensor": names.sensor_id, "actuator": names.actuator_id}  # fmt: skip
    checked = 0
    for kind, obj in _KINDS.items():
        for name in m.names[kind]:
            if name:
                assert lookup[kind](m, name) == mujoco.mj_name2id(mjm, obj, name) == names.name2id(m, kind, name)
                checked += 1
    assert checked > 60  # every named object of the humanoid was compared


def test_slices_match_address_tables(humanoid):
    m, mjm = humanoid
    widths = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}
    for j in range(mjm.njnt):
        name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)
        nq, nv = widths[int(mjm.jnt_type[j])]
        assert names.qpos_slice(m, name) == slice(mjm.jnt_qposadr[j], mjm.jnt_qposadr[j] + nq)
        assert names.qvel_slice(m, name) == slice(mjm.jnt_dofadr[j], mjm.jnt_dofadr[j] + nv)
    assert names.qpos_slice(m, "root") == slice(0, 7) and names.qvel_slice(m, "root") == slice(0, 6)
    for s in range(mjm.nsensor):
        name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SENSOR, s)
        assert names.sensor_slice(m, name) == slice(mjm.sensor_adr[s], mjm.sensor_adr[s] + mjm.sensor_dim[s])


def test_data_helpers_single_and_batched():
    m = mjx_lite.load_mjcf("hopper")
    d = mjx_lite.make_data(m)
    qpos = np.arange(m.nq, dtype=float) * 0.1
    qvel = np.arange(m.nv, dtype=float) * -0.2
    sens = np.arange(m.nsensordata, dtype=float) + 0.5
    d = d.replace(qpos=qpos, qvel=qvel, sensordata=sens)
    np.testing.assert_array_equal(names.joint_qpos(m, d, "knee"), qpos[4:5])
    np.testing.assert_array_equal(names.joint_qvel(m, d, "rooty"), qvel[2:3])
    np.testing.assert_array_equal(names.sensor_data(m, d, "com_vel"), sens[3:6])
    batched = d.replace(qpos=np.stack([qpos, 2 * qpos]), sensordata=np.stack([sens, -sens]))
    np.testing.assert_array_equal(names.joint_qpos(m, batched, "knee"), np.stack([qpos[4:5], 2 * qpos[4:5]]))
    np.testing.assert_array_equal(names.sensor_data(m, batched, "torso_vel"), np.stack([sens[:3], -sens[:3]]))


def test_unknown_names_list_the_known_ones():
    m = mjx_lite.load_mjcf("cartpole")
    with pytest.raises(KeyError, match=r"no joint named 'hinge2'.*'slider', 'hinge'"):
        names.joint_id(m, "hinge2")
    with pytest.raises(KeyError, match="none are named"):  # the cartpole's sensors have no names
        names.sensor_id(m, "pos")
    with pytest.raises(KeyError, match="unknown object kind 'bodies'"):
        names.name2id(m, "bodies", "cart")
    with pytest.raises(KeyError, match="non-empty string"):
        names.body_id(m, "")
    assert names.name2id(m, mjx_lite.ObjType.BODY, "pole") == 2
