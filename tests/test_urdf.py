"""URDF models against MuJoCo's URDF reader: compiled fields (every mjModel field, as the MJCF compiler tests),
forward passes in float64, MuJoCo's errors and warnings. The robots are written here (with generated STL/OBJ
meshes); they cover each URDF element and the <mujoco> extension."""

from __future__ import annotations

import os
import struct
import warnings

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFWarning
from tests import oracle
from tests.oracle import compare_models

FWD_TOL = 1e-7  # forward pass vs MuJoCo, relative to each field's scale (float64)
QACC_TOL = 1e-6  # constrained accelerations (mimic equality, limits, friction loss): solver tolerance 1e-12

_TET = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
_TET_FACES = [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)]
# a wedge (triangular prism) for the OBJ mesh: 6 vertices, quads split into triangles
_WEDGE = [(0, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 2), (1, 0, 2), (0, 1, 2)]
_WEDGE_FACES = [(0, 2, 1), (3, 4, 5), (0, 1, 4), (0, 4, 3), (1, 2, 5), (1, 5, 4), (2, 0, 3), (2, 3, 5)]


def _write_stl(path: str, verts, faces) -> None:
    with open(path, "wb") as f:
        f.write(b"\0" * 80 + struct.pack("<I", len(faces)))
        for tri in faces:
            f.write(struct.pack("<3f", 0, 0, 0))
            for i in tri:
                f.write(struct.pack("<3f", *verts[i]))
            f.write(b"\0\0")


def _write_obj(path: str, verts, faces) -> None:
    with open(path, "w") as f:
        f.writelines(f"v {x} {y} {z}\n" for x, y, z in verts)
        f.writelines(f"f {a + 1} {b + 1} {c + 1}\n" for a, b, c in faces)


# every URDF element MuJoCo reads: joint types, limits, efforts, dynamics, mimic, inertial frames with off-diagonal
# inertias, a link without <inertial>, box/cylinder/sphere/capsule/mesh (STL and OBJ, scaled, one file at two
# scales) collision and visual geometry, global and inline materials, and the <mujoco> extension
ARM = """<?xml version="1.0"?>
<robot name="arm">
  <mujoco>
    <compiler discardvisual="false" balanceinertia="true" meshdir="meshes"/>
    <option timestep="0.005" tolerance="1e-12" iterations="200"><flag contact="disable"/></option>
    <size memory="1M"/>
  </mujoco>
  <material name="blue"><color rgba="0 0 0.8 1"/></material>
  <material name="textured"><texture filename="wood.png"/></material>
  <link name="base">
    <inertial><origin xyz="0 0 0.05" rpy="0.1 -0.2 0.3"/><mass value="3"/>
      <inertia ixx="0.02" ixy="0.001" ixz="-0.002" iyy="0.03" iyz="0.0005" izz="0.04"/></inertial>
    <visual><geometry><box size="0.2 0.2 0.1"/></geometry><material name="blue"/></visual>
    <collision name="base_box"><origin xyz="0 0 0.05"/><geometry><box size="0.2 0.2 0.1"/></geometry></collision>
  </link>
  <link name="upper">
    <inertial><origin xyz="0 0 0.15"/><mass value="1.5"/>
      <inertia ixx="0.012" ixy="0" ixz="0" iyy="0.012" iyz="0" izz="0.002"/></inertial>
    <collision><origin xyz="0 0 0.15"/><geometry><cylinder radius="0.04" length="0.3"/></geometry></collision>
    <visual><origin xyz="0 0 0.1" rpy="0 0 1.2"/><geometry><mesh filename="package://arm/meshes/tet.stl"
      scale="0.1 0.1 0.2"/></geometry><material name="red"><color rgba="0.9 0.1 0.1 1"/></material></visual>
  </link>
  <link name="lower">
    <collision><origin xyz="0 0 0.12" rpy="0.2 0 0"/><geometry><capsule radius="0.03" length="0.2"/></geometry>
    </collision>
    <collision><origin xyz="0 0.02 0.25"/><geometry><sphere radius="0.04"/></geometry></collision>
    <visual><geometry><sphere radius="0.05"/></geometry><material name="textured"/></visual>
  </link>
  <link name="wrist">
    <inertial><origin xyz="0.01 0 0.02" rpy="0 0.4 0"/><mass value="0.4"/>
      <inertia ixx="0.0004" ixy="0.00002" ixz="0" iyy="0.0005" iyz="0" izz="0.0003"/></inertial>
    <collision><geometry><mesh filename="wedge.obj" scale="0.05 0.05 0.03"/></geometry></collision>
    <collision><origin xyz="0 0 0.04" rpy="0 0 0.7"/><geometry><mesh filename="tet.stl" scale="0.04 0.04 0.04"/>
    </geometry></collision>
    <collision><origin xyz="0.02 0 0.05"/><geometry><mesh filename="tet.stl" scale="0.03 0.03 0.03"/></geometry>
    </collision>
  </link>
  <link name="tool">
    <inertial><origin xyz="0 0 0.03"/><mass value="0.2"/>
      <inertia ixx="0.0002" ixy="0" ixz="0" iyy="0.0002" iyz="0" izz="0.0001"/></inertial>
    <visual><geometry><cylinder radius="0.02" length="0.06"/></geometry><material name="blue"/></visual>
  </link>
  <link name="finger_l">
    <inertial><mass value="0.05"/><inertia ixx="0.00001" ixy="0" ixz="0" iyy="0.00001" iyz="0" izz="0.00003"/>
    </inertial>
    <collision><origin xyz="0 0 0.02"/><geometry><box size="0.01 0.02 0.04"/></geometry></collision>
  </link>
  <link name="finger_r">
    <inertial><mass value="0.05"/><inertia ixx="0.00001" ixy="0" ixz="0" iyy="0.00001" iyz="0" izz="0.00001"/>
    </inertial>
    <collision><origin xyz="0 0 0.02"/><geometry><box size="0.01 0.02 0.04"/></geometry></collision>
  </link>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper"/><origin xyz="0 0 0.1"/>
    <axis xyz="0 0 1"/><limit lower="-2" upper="2" effort="30" velocity="3"/>
    <dynamics damping="0.5" friction="0.1"/></joint>
  <joint name="elbow" type="continuous"><parent link="upper"/><child link="lower"/>
    <origin xyz="0 0 0.3" rpy="0 0.3 0"/><axis xyz="0 1 0"/><limit effort="-12"/><dynamics damping="0.2"/></joint>
  <joint name="wrist_joint" type="revolute"><parent link="lower"/><child link="wrist"/>
    <origin xyz="0 0 0.3" rpy="0.1 0.2 -0.3"/><axis xyz="0 1 1"/><limit lower="-1" upper="1.5"/></joint>
  <joint name="tool_mount" type="fixed"><parent link="wrist"/><child link="tool"/>
    <origin xyz="0 0 0.06" rpy="0 0 1.5707963"/></joint>
  <joint name="finger_l_joint" type="prismatic"><parent link="tool"/><child link="finger_l"/>
    <origin xyz="-0.02 0 0.06"/><axis xyz="1 0 0"/><limit lower="-0.03" upper="0" effort="5"/>
    <dynamics friction="0.01"/></joint>
  <joint name="finger_r_joint" type="prismatic"><parent link="tool"/><child link="finger_r"/>
    <origin xyz="0.02 0 0.06"/><axis xyz="-1 0 0"/><limit lower="-0.03" upper="0" effort="5"/>
    <mimic joint="finger_l_joint" multiplier="0.8" offset="0.002"/></joint>
  <transmission name="ignored"><type>SimpleTransmission</type></transmission>
  <gazebo reference="base"/>
</robot>
"""

# floating, planar and spherical joints; a "world" link; the same robot with URDF's default compiler settings
MOBILE = """<robot name="mobile">
  <mujoco><compiler fusestatic="{fuse}"/><option><flag contact="disable"/></option></mujoco>
  <link name="world"><collision><origin xyz="0 0 -0.05"/><geometry><box size="4 4 0.1"/></geometry></collision>
  </link>
  <link name="chassis">
    <inertial><origin xyz="0.02 0 0"/><mass value="4"/>
      <inertia ixx="0.05" ixy="0.002" ixz="0" iyy="0.08" iyz="0" izz="0.1"/></inertial>
    <collision><geometry><box size="0.4 0.3 0.1"/></geometry></collision>
  </link>
  <link name="mast"><collision><origin xyz="0 0 0.1"/><geometry><cylinder radius="0.02" length="0.2"/></geometry>
  </collision></link>
  <link name="head">
    <inertial><mass value="0.3"/><inertia ixx="0.001" ixy="0" ixz="0" iyy="0.001" iyz="0" izz="0.001"/></inertial>
    <collision><geometry><sphere radius="0.05"/></geometry></collision>
  </link>
  <link name="puck">
    <inertial><mass value="0.5"/><inertia ixx="0.002" ixy="0" ixz="0" iyy="0.002" iyz="0" izz="0.003"/></inertial>
    <collision><geometry><cylinder radius="0.1" length="0.02"/></geometry></collision>
  </link>
  <link name="sensor_plate"><visual><geometry><box size="0.05 0.05 0.01"/></geometry></visual></link>
  <joint name="float" type="floating"><parent link="world"/><child link="chassis"/>
    <origin xyz="0 0 0.5" rpy="0 0 0.3"/><dynamics damping="0.05"/></joint>
  <joint name="mast_mount" type="fixed"><parent link="chassis"/><child link="mast"/><origin xyz="0.1 0 0.05"/></joint>
  <joint name="neck" type="spherical"><parent link="mast"/><child link="head"/><origin xyz="0 0 0.2"/>
    <limit lower="0" upper="0.8"/><dynamics damping="0.01"/></joint>
  <joint name="slide" type="planar"><parent link="world"/><child link="puck"/><origin xyz="1 0 0.01"/>
    <axis xyz="0 0 1"/><dynamics damping="0.1" friction="0.02"/><limit lower="-0.5" upper="0.5" effort="2"/></joint>
  <joint name="plate_mount" type="fixed"><parent link="head"/><child link="sensor_plate"/>
    <origin xyz="0 0 0.05"/></joint>
</robot>
"""


@pytest.fixture(scope="module")
def robot_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("urdf")
    os.makedirs(d / "meshes")
    _write_stl(str(d / "meshes" / "tet.stl"), _TET, _TET_FACES)
    _write_obj(str(d / "meshes" / "wedge.obj"), _WEDGE, _WEDGE_FACES)
    (d / "arm.urdf").write_text(ARM)
    # package:// paths only resolve with strippath (the mesh is looked up in meshdir by its file name)
    (d / "arm_strip.urdf").write_text(ARM.replace('meshdir="meshes"', 'meshdir="meshes" strippath="true"'))
    (d / "arm_default.urdf").write_text(ARM.replace('discardvisual="false" ', "").replace(
        'meshdir="meshes"', 'meshdir="meshes" strippath="true"'))  # fmt: skip
    (d / "mobile.urdf").write_text(MOBILE.format(fuse="true"))
    (d / "mobile_nofuse.urdf").write_text(MOBILE.format(fuse="false"))
    return d


def _load_both(path: str):
    mjm = mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFWarning)
        ours = mjx_lite.load_mjcf(path)
    return ours, mjm


@pytest.mark.parametrize("name", ["arm_strip", "arm_default", "mobile", "mobile_nofuse"])
def test_compile_matches_mujoco(robot_dir, name):
    ours, mjm = _load_both(str(robot_dir / f"{name}.urdf"))
    errs = compare_models(ours, mjm)
    assert not errs, "\n".join(errs)


def test_arm_contents(robot_dir):
    """What the reader builds, beyond agreeing with MuJoCo: the pieces each URDF element becomes."""
    m, mjm = _load_both(str(robot_dir / "arm_strip.urdf"))
    names = m.names
    assert names["body"] == ("world", "upper", "lower", "wrist", "finger_l", "finger_r")  # base and tool fused
    assert names["joint"] == ("shoulder", "elbow", "wrist_joint", "finger_l_joint", "finger_r_joint")
    assert names["mesh"] == ("tet", "wedge", "tet1", "tet2")  # one mesh per (file, scale)
    assert m.neq == 1 and np.allclose(np.asarray(m.eq_data)[0, :5], [0.002, 0.8, 0, 0, 0])
    assert list(np.asarray(m.jnt_limited)) == [True, False, True, True, True]
    assert np.allclose(np.asarray(m.jnt_actfrcrange)[:2], [[-30, 30], [-12, 12]])
    assert np.allclose(np.asarray(m.dof_frictionloss)[[0, 3]], [0.1, 0.01])
    visual = np.asarray(m.geom_contype) == 0
    assert visual.sum() == 4 and np.all(np.asarray(m.geom_group)[visual] == 1)
    assert m.opt.timestep == 0.005 and mjm.opt.timestep == 0.005


@pytest.fixture(scope="module")
def forward():
    return jax.jit(mjx_lite.forward)


# slow: mobile_nofuse (the same mobile robot unfused: its compile stays default in test_compile_matches_mujoco, its
# forward is the runtime of [mobile])
@pytest.mark.parametrize("name", ["arm_strip", "mobile", pytest.param("mobile_nofuse", marks=pytest.mark.slow)])
def test_forward_matches_mujoco(robot_dir, forward, name):
    m, mjm = _load_both(str(robot_dir / f"{name}.urdf"))
    mjm.opt.tolerance, mjm.opt.iterations = 1e-12, 200
    m = m.replace(opt=m.opt.replace(tolerance=1e-12, iterations=200))
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    for _ in range(3):
        oracle.random_state(mjm, mjd, rng)
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, oracle.data_with_state(m, mjm, mjd).replace(time=mjd.time))
        for f in ("xpos", "xquat", "xipos", "ximat", "geom_xpos", "geom_xmat", "subtree_com", "cinert", "cdof",
                  "qfrc_bias", "qfrc_passive", "qacc_smooth"):  # fmt: skip
            want = np.asarray(getattr(mjd, f))
            oracle.close(np.asarray(getattr(d, f)).reshape(want.shape), want, FWD_TOL, f"{name}: {f}")
        oracle.close(d.qM if d.qM.ndim == 2 else _full_m(mjm, mjd), _full_m(mjm, mjd), FWD_TOL, f"{name}: qM")
        oracle.close(d.qacc, mjd.qacc, QACC_TOL, f"{name}: qacc")
        oracle.close(d.qfrc_constraint, mjd.qfrc_constraint, QACC_TOL, f"{name}: qfrc_constraint")


def _full_m(mjm, mjd):
    out = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, mjd, out)
    return out


# slow: the mimic's joint equality row (qfrc_constraint, qacc) is checked against MuJoCo by
# test_forward_matches_mujoco[arm_strip], its eq_data by test_compile_matches_mujoco and test_arm_contents
@pytest.mark.slow
def test_mimic_equality_holds(robot_dir):
    """The mimic joint follows its leader (offset + multiplier * leader) over a short simulation."""
    m, _ = _load_both(str(robot_dir / "arm_strip.urdf"))
    d = mjx_lite.make_data(m)
    qpos = np.asarray(d.qpos).copy()
    qpos[3] = -0.02
    d = d.replace(qpos=jax.numpy.asarray(qpos))
    step = jax.jit(mjx_lite.step)
    for _ in range(200):
        d = step(m, d)
    q = np.asarray(d.qpos)
    assert abs(q[4] - (0.002 + 0.8 * q[3])) < 1e-3


def test_load_model_and_string(robot_dir):
    """`load_model` takes MJCF or URDF; URDF text loads with `load_mjcf_string` (meshes from `assets`)."""
    path = str(robot_dir / "mobile.urdf")
    a = mjx_lite.load_model(path)
    b = mjx_lite.load_mjcf_string(open(path).read())
    assert a.names == b.names and np.array_equal(np.asarray(a.body_pos), np.asarray(b.body_pos))
    arm = open(robot_dir / "arm_strip.urdf").read().replace('meshdir="meshes" ', "")
    assets = {n: open(robot_dir / "meshes" / n, "rb").read() for n in ("tet.stl", "wedge.obj")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFWarning)
        c = mjx_lite.load_mjcf_string(arm, assets=assets)
    assert c.nmesh == 4 and c.nbody == 6


def test_mujoco_testdata_urdf():
    """The URDF shipped with the mujoco package (a single link)."""
    path = os.path.join(os.path.dirname(mujoco.__file__), "testdata", "model.urdf")
    ours, mjm = _load_both(path)
    assert not compare_models(ours, mjm)


# ----------------------------------------------------------------------------------------------------------
# small URDFs: MuJoCo's decisions (checked against MuJoCo at test time), its errors and warnings

_IN = '<inertial><mass value="1"/><inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'


def _link(n: str, extra: str = "") -> str:
    return f'<link name="{n}">{_IN}{extra}</link>'


def _joint(n: str, t: str, p: str, c: str, extra: str = "") -> str:
    return f'<joint name="{n}" type="{t}"><parent link="{p}"/><child link="{c}"/>{extra}</joint>'


def _pair(extra: str, t: str = "revolute") -> str:
    return _link("a") + _link("b") + _joint("j", t, "a", "b", extra)


def _chain(follower: str, leader_type: str = "revolute", follower_type: str = "revolute") -> str:
    return (_link("a") + _link("b") + _link("c") + _joint("j", leader_type, "a", "b")
            + _joint("k", follower_type, "b", "c", follower))  # fmt: skip


_SPHERE = '<collision><geometry><sphere radius="0.1"/></geometry></collision>'

ACCEPTED = {
    "world_link": '<link name="world">' + _IN + _SPHERE + "</link>" + _link("a") + _joint("j", "revolute", "world",
                                                                                           "a"),  # fmt: skip
    "world_child_fixed": _link("a") + '<link name="world"/>' + _joint("j", "fixed", "a", "world",
                                                                      '<origin xyz="1 0 0"/>'),  # fmt: skip
    "two_roots": _link("a") + _link("b") + _link("c") + _joint("j", "revolute", "a", "b"),
    "fixed_chain": _link("a") + _link("b") + _link("c") + _joint("j", "fixed", "a", "b", '<origin xyz="1 0 0" '
                   'rpy="0 0 1"/>') + _joint("k", "revolute", "b", "c", '<origin xyz="0 1 0"/>'),  # fmt: skip
    "limit_lower_only": _pair('<limit lower="-1"/>'),
    "limit_reversed": _pair('<limit lower="1" upper="-1"/>'),
    "limit_continuous": _pair('<limit lower="-1" upper="1" effort="-4"/>', "continuous"),
    "limit_nan": _pair('<limit lower="nan" upper="1"/>'),
    "effort_empty": _pair('<limit lower="-1" upper="1" effort=""/>'),
    "axis_not_unit": _pair('<axis xyz="0 0 2"/>'),
    "origin_empty": _pair('<origin xyz="" rpy=" "/>'),
    "numbers": _pair('<origin xyz="0x1p-1 +2 .5e1" rpy="1e-3 -0 3"/>'),
    "mimic_defaults": _chain('<mimic joint="j"/>'),
    "mimic_forward_reference": (_link("a") + _link("b") + _link("c") + _joint("k", "revolute", "b", "c",
                                '<mimic joint="j" multiplier="3" offset="-1"/>') + _joint("j", "prismatic", "a",
                                                                                          "b")),  # fmt: skip
    "mimic_on_fixed": _chain('<mimic joint="j"/>', follower_type="fixed"),
    "repeated_joint_name": _link("a") + _link("b") + _link("c") + _joint("j", "revolute", "a", "b")
    + _joint("j", "revolute", "b", "c"),
    "material_rules": ('<material name="red"><color rgba="1 0 0 1"/></material><material name="red"><color '
                       'rgba="0 1 0 1"/></material><material name="tex"><texture filename="x.png"/></material>'
                       '<link name="a"><collision name="c0"><geometry><sphere radius=".1"/></geometry></collision>'
                       '<visual><geometry><sphere radius=".1"/></geometry><material name="red"/></visual>'
                       '<collision name="c1"><geometry><sphere radius=".1"/></geometry></collision><visual>'
                       '<geometry><sphere radius=".2"/></geometry><material name="tex"/></visual><collision>'
                       '<geometry><sphere radius=".1"/></geometry></collision><visual><geometry><sphere '
                       'radius=".2"/></geometry><material name="in"><color rgba="0 1 0 .5"/></material></visual>'
                       '<collision><geometry><box size="1 2 3"/><sphere radius="3"/></geometry></collision>'
                       '</link><link name="b"><collision><geometry><sphere radius=".1"/></geometry></collision>'
                       '<visual><geometry><sphere radius=".2"/></geometry><material name="in"/></visual></link>'
                       + _joint("j", "floating", "a", "b")
                       + '<mujoco><compiler discardvisual="false"/></mujoco>'),  # fmt: skip
    "extension_late_and_degree": _pair('<origin rpy="0 0 90"/><limit lower="-1" upper="1"/>')
    + '<mujoco><compiler angle="degree" eulerseq="zyx" inertiafromgeom="true" fusestatic="false"/></mujoco>',
    "extension_option_size": _pair("") + '<mujoco><option timestep="0.01" gravity="0 0 -1" integrator="RK4"><flag '
    'contact="disable"/></option><size nconmax="10" njmax="20" memory="1M"/><compiler><lengthrange mode="all"/>'
    "</compiler></mujoco>",
    "empty_robot": "",
}

# accepted with a warning (MuJoCo prints one too)
WARNED = {
    "equal_limits": (_pair('<limit lower="0.5" upper="0.5"/>'), "equal lower and upper limits"),
    "mimic_unknown_joint": (_chain('<mimic joint="zz"/>'), "mimic requires revolute"),
    "mimic_of_floating": (_chain('<mimic joint="j"/>', leader_type="floating"), "mimic requires revolute"),
    "mimic_on_planar": (_chain('<mimic joint="j"/>', follower_type="planar"), "mimic requires revolute"),
    "duplicate_geom_name": ('<link name="a"><collision name="g"><geometry><sphere radius=".1"/></geometry>'
                            '</collision><collision name="g"><geometry><sphere radius=".1"/></geometry></collision>'
                            "</link>", "duplicate name 'g'"),  # fmt: skip
    "extension_typo": (_pair("") + '<mujoco><compiler anglee="degree"/></mujoco>', "'anglee'"),
    "extension_other_section": (_pair("") + '<mujoco><default><joint damping="5"/></default></mujoco>',
                                "<default>"),  # fmt: skip
}

# refused: (body, words of our message); MuJoCo refuses each too (checked)
REFUSED = {
    "repeated_origin": (_pair('<origin xyz="1 0 0"/><origin xyz="2 0 0"/>'), "repeated element: 'origin'"),
    "repeated_inertial": ('<link name="a">' + _IN + _IN + "</link>", "repeated element: 'inertial'"),
    "repeated_mimic": (_chain('<mimic joint="j"/><mimic joint="j"/>'), "repeated element: 'mimic'"),
    "repeated_extension": (_pair("") + "<mujoco/><mujoco/>", "repeated element: 'mujoco'"),
    "repeated_shape": ('<link name="a"><collision><geometry><sphere radius="1"/><sphere radius="2"/></geometry>'
                       "</collision></link>", "repeated element: 'sphere'"),  # fmt: skip
    "no_geometry": ('<link name="a"><collision></collision></link>', "missing element: 'geometry'"),
    "no_shape": ('<link name="a"><collision><geometry/></collision></link>', "geometry specification not found"),
    "no_mass": ('<link name="a"><inertial><inertia ixx="1" ixy="0" ixz="0" iyy="1" iyz="0" izz="1"/></inertial>'
                "</link>", "missing element: 'mass'"),  # fmt: skip
    "partial_inertia": ('<link name="a"><inertial><mass value="1"/><inertia ixx="1" iyy="1" izz="1"/></inertial>'
                        "</link>", "'ixy'"),  # fmt: skip
    "singular_inertia": ('<link name="a"/><link name="b"><inertial><mass value="1"/><inertia ixx="1" ixy="0" '
                         'ixz="0" iyy="0" iyz="0" izz="0"/></inertial></link>' + _joint("j", "revolute", "a", "b"),
                         "positive eigenvalues"),  # fmt: skip
    "massless_moving": ('<link name="a"/><link name="b"/>' + _joint("j", "revolute", "a", "b"), "mjMINVAL"),
    "joint_type": (_pair("", "hinge"), "invalid joint type"),
    "joint_no_name": (_link("a") + _link("b") + '<joint type="revolute"><parent link="a"/><child link="b"/>'
                      "</joint>", "'name'"),  # fmt: skip
    "joint_no_parent": (_link("a") + _link("b") + '<joint name="j" type="revolute"><child link="b"/></joint>',
                        "missing element: 'parent'"),  # fmt: skip
    "missing_link": (_link("a") + _joint("j", "revolute", "a", "c"), "parent or child missing"),
    "two_parents": (_link("a") + _link("b") + _link("c") + _joint("j", "revolute", "a", "c")
                    + _joint("k", "revolute", "b", "c"), "multiple parents"),  # fmt: skip
    "cycle": (_link("a") + _link("b") + _joint("j", "revolute", "a", "b") + _joint("k", "revolute", "b", "a"),
              "URDF body not found"),  # fmt: skip
    "repeated_link": (_link("a") + _link("a"), "repeated URDF name"),
    "link_no_name": ("<link>" + _IN + "</link>", "'name'"),
    "moving_world": (_link("a") + '<link name="world"/>' + _joint("j", "revolute", "a", "world"),
                     "joint found in world body"),  # fmt: skip
    "axis_zero": (_pair('<axis xyz="0 0 0"/>'), "axis too small"),
    "axis_short": (_pair('<axis xyz="1 0"/>'), "expected 3 values, got 2"),
    "axis_empty": (_pair('<axis xyz=""/>'), "required attribute missing"),
    "bad_number": (_pair('<origin xyz="1 x 3"/>'), "bad format"),
    "too_large": (_pair('<origin xyz="1e400 0 0"/>'), "too large"),
    "box_short": ('<link name="a"><collision><geometry><box size="1 2"/></geometry></collision></link>',
                  "expected 3 values"),  # fmt: skip
    "sphere_negative": ('<link name="a"><collision><geometry><sphere radius="-1"/></geometry></collision></link>',
                        "must be positive"),  # fmt: skip
    "rgba_short": ('<material name="m"><color rgba="1 0 0"/></material><link name="a"/>', "expected 4 values"),
    "mimic_no_joint": (_chain("<mimic/>"), "'joint'"),
    "mimic_self": (_pair('<mimic joint="j"/>'), "repeated in equality constraint"),
    "spherical_lower": (_pair('<limit lower="-1" upper="1"/>', "spherical"), r"range\[0\] should be 0"),
    "extension_bad_keyword": (_pair("") + '<mujoco><option integrator="foo"/></mujoco>', "invalid keyword"),
    "extension_bad_number": (_pair("") + '<mujoco><option timestep="x"/></mujoco>', "bad format"),
    "autolimits_false": (_pair('<limit lower="-1" upper="1"/>') + '<mujoco><compiler autolimits="false"/></mujoco>',
                         "autolimits"),  # fmt: skip
    "mesh_package_path": ('<link name="a"><collision><geometry><mesh filename="package://p/tet.stl"/></geometry>'
                          "</collision></link>", "could not open"),  # fmt: skip
}


def _write(tmp_path, body: str, name: str = "model") -> str:
    path = tmp_path / f"{name}.urdf"
    path.write_text(f'<?xml version="1.0"?>\n<robot name="p">\n{body}\n</robot>\n')
    return str(path)


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted_like_mujoco(tmp_path, name):
    path = _write(tmp_path, ACCEPTED[name])
    with warnings.catch_warnings():
        warnings.simplefilter("error", MJCFWarning)  # these load without a warning
        ours = mjx_lite.load_mjcf(path)
    errs = compare_models(ours, mujoco.MjModel.from_xml_path(path))
    assert not errs, "\n".join(errs)


@pytest.mark.parametrize("name", sorted(WARNED))
def test_warned_like_mujoco(tmp_path, name):
    body, words = WARNED[name]
    path = _write(tmp_path, body)
    with pytest.warns(MJCFWarning, match=words):
        ours = mjx_lite.load_mjcf(path)
    errs = compare_models(ours, mujoco.MjModel.from_xml_path(path))
    assert not errs, "\n".join(errs)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_like_mujoco(tmp_path, name):
    body, words = REFUSED[name]
    path = _write(tmp_path, body)
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFWarning)
        with pytest.raises(MJCFError, match=words) as e:
            mjx_lite.load_mjcf(path)
    assert str(e.value).startswith(f"{path}:"), str(e.value)  # file and line first
    assert e.value.line is not None and e.value.line >= 2


def test_error_names_line_and_element(tmp_path):
    body = _link("a") + _link("b") + '\n<joint name="j" type="revolute">\n<parent link="a"/><child link="b"/>\n' \
        '<origin xyz="1 2"/>\n</joint>'
    path = _write(tmp_path, body)
    with pytest.raises(MJCFError) as e:
        mjx_lite.load_mjcf(path)
    assert (e.value.line, e.value.element, e.value.attribute) == (6, "origin", "xyz")
