"""Model composition (<asset><model>, <attach>) against MuJoCo 4.0: compiled fields of composed models (a gripper
on an arm, two copies with different prefixes, attachments in frames, replicates and included files, nested and
URDF children, self-attachment), each attached model's own compiler settings, keyframes, the <option>/<size>
conflict policies, a forward pass of the composed arm, and MuJoCo's errors."""

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
QACC_TOL = 1e-6  # constrained accelerations: solver tolerance 1e-12


def _write_stl(path, verts, faces) -> None:
    with open(path, "wb") as f:
        f.write(b"\0" * 80 + struct.pack("<I", len(faces)))
        for tri in faces:
            f.write(struct.pack("<3f", 0, 0, 0))
            for i in tri:
                f.write(struct.pack("<3f", *verts[i]))
            f.write(b"\0\0")


# the child: its own compiler settings (radians, a mesh directory), defaults, assets, tendon, equality, contact
# exclude and pair, actuators (one on the tendon), sensors, custom data and a keyframe; one body stays behind
GRIPPER = """<mujoco model="gripper">
  <compiler angle="radian" meshdir="assets" autolimits="true"/>
  <option timestep="0.001"/>
  <default>
    <default class="finger"><geom type="box" size=".01 .01 .04" rgba=".2 .8 .2 1"/>
      <joint type="slide" axis="1 0 0" range="0 .04" damping="1"/></default>
  </default>
  <asset>
    <material name="steel" rgba=".6 .6 .7 1"/>
    <mesh name="tip" file="tet.stl" scale=".02 .02 .03"/>
  </asset>
  <worldbody>
    <body name="palm" pos="0 0 .05">
      <inertial pos="0 0 .01" mass=".3" diaginertia="3e-4 2e-4 1e-4"/>
      <geom type="box" size=".04 .03 .01" material="steel"/>
      <site name="grip" pos="0 0 .05"/>
      <camera name="palm_cam" pos="0 0 .02" euler="0 3.1 0"/>
      <body name="left" childclass="finger" pos="-.03 0 .05">
        <joint name="lj"/>
        <geom/><geom type="mesh" mesh="tip" pos="0 0 .04"/>
      </body>
      <body name="right" childclass="finger" pos=".03 0 .05">
        <joint name="rj" axis="-1 0 0"/>
        <geom name="rgeom"/>
      </body>
      <body name="wristcam" pos="0 .04 0" quat="1 1 0 0"><geom size=".01" contype="0" conaffinity="0"/></body>
    </body>
    <body name="stand" pos="1 0 0"><joint name="stand_slide" type="slide"/><geom size=".05"/></body>
  </worldbody>
  <tendon><fixed name="split"><joint joint="lj" coef=".5"/><joint joint="rj" coef=".5"/></fixed>
    <fixed name="outside"><joint joint="lj" coef="1"/><joint joint="stand_slide" coef="1"/></fixed></tendon>
  <equality><joint joint1="lj" joint2="rj"/><joint joint1="lj" joint2="stand_slide"/></equality>
  <contact><exclude body1="left" body2="right"/><pair geom1="rgeom" geom2="rgeom"/></contact>
  <actuator><position name="close" tendon="split" kp="100" ctrlrange="0 .04"/>
    <motor name="push" tendon="outside"/><velocity name="lv" joint="lj" kv="2"/></actuator>
  <sensor><tendonpos name="opening" tendon="split"/><framepos name="grip_pos" objtype="site" objname="grip"/>
    <actuatorfrc name="close_frc" actuator="close"/><actuatorfrc name="push_frc" actuator="push"/>
    <subtreecom name="palm_com" body="palm"/><clock name="t"/></sensor>
  <custom><numeric name="gain" data="1 2"/><tuple name="parts"><element objtype="body" objname="left"/>
    </tuple></custom>
  <keyframe><key name="open" qpos=".04 .03 .5" ctrl=".04 1 .2" time="2"/></keyframe>
</mujoco>
"""

ARM = """<mujoco model="arm">
  <option tolerance="1e-12" iterations="200"><flag contact="disable"/></option>
  <asset>
    <model name="gripper" file="gripper.xml"/>
    <material name="steel" rgba=".1 .1 .1 1"/>
  </asset>
  <default><geom rgba=".5 .5 .9 1"/><joint damping=".5"/></default>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="link1" pos="0 0 .1">
      <joint name="shoulder" axis="0 0 1" range="-90 90"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" material="steel"/>
      <body name="link2" pos=".3 0 0">
        <joint name="elbow" axis="0 1 0" ref="10"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/>
        <frame pos=".3 0 0" euler="0 90 0">
          <attach model="gripper" body="palm" prefix="g/"/>
        </frame>
        <body name="after" pos="0 .1 0"><geom size=".02"/></body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder"/><motor joint="elbow"/></actuator>
  <sensor><jointpos joint="elbow"/></sensor>
  <keyframe><key name="home" qpos=".1 .2"/></keyframe>
</mujoco>
"""

# scenes around the child, each one feature; {m} is the <asset><model> line
SCENES = {
    "two_copies": """<mujoco>{m}<worldbody>
      <body name="base"><joint/><geom size=".1"/>
        <attach model="gripper" body="palm" prefix="left_"/>
        <frame pos=".5 0 0"><attach model="gripper" body="palm" prefix="right_"/></frame></body>
    </worldbody></mujoco>""",
    "whole_model_in_world": """<mujoco>{m}<worldbody><attach model="gripper" prefix="all-"/></worldbody>
      <keyframe><key name="p" qpos="0 0 .3"/></keyframe></mujoco>""",
    "replicate": """<mujoco>{m}<worldbody>
      <replicate count="3" offset="0 .3 0" euler="0 0 30"><attach model="gripper" body="palm" prefix="r"/>
      </replicate></worldbody></mujoco>""",
    "nested_frames": """<mujoco>{m}<worldbody><frame name="f1" pos="1 0 0" euler="0 0 45">
      <body name="holder" pos="0 0 1"><frame pos="0 0 .1" quat="0 1 0 0">
        <attach model="gripper" body="left" prefix="x"/></frame></body></frame></worldbody></mujoco>""",
    "frame_attach": """<mujoco>{m}<worldbody><body name="b"><joint/><geom size=".1"/>
      <attach model="frames" frame="rack" prefix="fr."/></body></worldbody></mujoco>""",
    "nested_model": """<mujoco>{m}<asset><model name="holder" file="holder.xml"/></asset><worldbody>
      <body name="cart"><joint type="slide"/><geom size=".1"/><frame pos="0 1 0"><attach model="holder"
      body="arm" prefix="h1:"/></frame></body></worldbody><keyframe><key name="k" qpos=".3 .4"/></keyframe>
      </mujoco>""",
    "keys_over_composed_layout": """<mujoco>{m}<worldbody><attach model="gripper" body="right" prefix="c-"/>
      <body name="b"><joint name="pj"/><geom size=".1"/></body></worldbody>
      <keyframe><key name="p" qpos=".7"/></keyframe></mujoco>""",
    "include": """<mujoco>{m}<worldbody><body name="b"><joint/><geom size=".1"/><include file="attach_inc.xml"/>
      </body></worldbody></mujoco>""",
    "urdf_child": """<mujoco><asset><model name="bot" file="bot.urdf"/></asset><worldbody>
      <body name="cart" pos="0 0 1"><joint type="slide"/><geom size=".1"/><attach model="bot" prefix="bot_"/></body>
      </worldbody></mujoco>""",
    "self_attach": """<mujoco><worldbody><body name="p" pos="0 0 1"><joint name="pj"/><geom size=".1"/>
      <body name="q"><joint name="qj"/><geom size=".05"/></body></body>
      <body name="z" pos="3 0 0"><attach body="p" prefix="copy-"/></body></worldbody>
      <sensor><jointpos joint="pj"/><jointpos name="qpos" joint="qj"/></sensor>
      <keyframe><key qpos=".5 .2"/></keyframe></mujoco>""",
    "model_named_by_child": """<mujoco><asset><model file="gripper.xml"/></asset><worldbody>
      <attach model="gripper" body="right" prefix="r"/></worldbody></mujoco>""",
}

FRAMES = """<mujoco model="frames"><worldbody><body name="shelf" pos="0 0 1">
  <frame name="rack" pos=".1 0 0" euler="0 0 30"><body name="a"><joint/><geom size=".05"/></body>
    <geom name="board" type="box" size=".1 .1 .01"/><site name="mark"/></frame>
  <body name="other"><joint/><geom size=".05"/></body></body></worldbody>
  <sensor><framepos objtype="site" objname="mark"/></sensor></mujoco>
"""

HOLDER = """<mujoco model="holder"><compiler angle="radian"/><asset><model name="gripper" file="gripper.xml"/></asset>
  <worldbody><body name="arm"><joint name="swing" range="-1 1"/><geom type="capsule" size=".02 .1"/>
  <attach model="gripper" body="palm" prefix="grip-"/></body></worldbody>
  <keyframe><key name="bent" qpos=".5 .01 .02"/></keyframe></mujoco>
"""

INCLUDED = """<mujoco><frame pos="0 0 .2"><attach model="gripper" body="palm" prefix="inc_"/></frame></mujoco>"""

BOT = """<robot name="bot"><link name="base"><inertial><mass value="1"/><inertia ixx=".01" ixy="0" ixz="0" iyy=".01"
  iyz="0" izz=".01"/></inertial><collision><geometry><box size=".2 .2 .1"/></geometry></collision></link>
  <link name="arm"><inertial><origin xyz="0 0 .1" rpy="0 .2 0"/><mass value=".5"/><inertia ixx=".002" ixy="0"
  ixz="0" iyy=".002" iyz="0" izz=".001"/></inertial></link>
  <joint name="hinge" type="revolute"><parent link="base"/><child link="arm"/><origin xyz="0 0 .05"/>
  <axis xyz="0 1 0"/><limit lower="-1" upper="1" effort="3"/></joint></robot>
"""

# the child's compiler settings govern its own elements: (child compiler, parent compiler, child body)
_BODY = '<body name="b"><joint name="h" range="-1 1" ref=".5" springref=".25"/><geom size=".1"/></body>'
_LIGHT = '<body name="b"><joint/><inertial pos="0 0 0" mass="0.1" diaginertia=".01 .01 .01"/></body>'
COMPILER = {
    "angle_radian": ('angle="radian"', "", _BODY),
    "angle_parent_radian": ("", 'angle="radian"', _BODY),
    "eulerseq": ('angle="radian" eulerseq="XYZ"', "", '<body name="b" euler="1 2 3"><joint/><geom size=".1"/>'
                 "</body>"),  # fmt: skip
    "autolimits_parent": ("", 'autolimits="false"', _BODY),
    "bounds": ('boundmass="2" boundinertia="3"', "", _LIGHT),
    "bounds_parent": ("", 'boundmass="2" boundinertia="3"', _LIGHT),
    "inertiafromgeom": ('inertiafromgeom="true"', "", '<body name="b"><joint/><inertial pos="0 0 0" mass="5" '
                        'diaginertia="1 1 1"/><geom size=".1"/></body>'),  # fmt: skip
    "inertiagrouprange": ('inertiagrouprange="1 2"', "", '<body name="b"><joint/><geom size=".1"/><geom size=".1" '
                          'group="1" pos="1 0 0"/></body>'),  # fmt: skip
    "balanceinertia": ('balanceinertia="true"', "", '<body name="b"><joint/><inertial pos="0 0 0" mass="1" '
                       'diaginertia="1 1 3"/></body>'),  # fmt: skip
    "fitaabb": ('fitaabb="true" meshdir="assets"', "", '<body name="b"><joint/><geom type="box" mesh="m"/></body>'),
    "discardvisual_child": ('discardvisual="true"', "", '<body name="b"><joint/><geom size=".1"/><geom size=".2" '
                            'contype="0" conaffinity="0"/></body>'),  # fmt: skip
    "fusestatic_child": ('fusestatic="true"', "", '<body name="b"><joint/><geom size=".1"/><body name="c">'
                         '<geom size=".1"/></body></body>'),  # fmt: skip
    "settotalmass_child": ('settotalmass="10"', "", '<body name="b"><joint/><geom size=".1"/></body>'),
}

CONFLICT = {
    "warning": ('<compiler conflict="warning"/>', '<option timestep="0.005" iterations="7"><flag gravity="disable"/>'
                '</option><size memory="5M"/>', "keeping parent value"),  # fmt: skip
    "error": ('<compiler conflict="error"/>', '<option gravity="0 0 -1"/>', "keeping parent value"),
    "merge": ('<compiler conflict="merge"/><option timestep="0.01" iterations="3"/>', '<option timestep="0.005" '
              'iterations="7" integrator="RK4" cone="elliptic"><flag gravity="disable"/></option><size memory="5M"/>',
              "taking the minimum"),  # fmt: skip
}


@pytest.fixture(scope="module")
def scene_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("compose")
    os.makedirs(d / "assets")
    tet = [(0.0, 0.0, 0.0), (1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0)]
    _write_stl(str(d / "assets" / "tet.stl"), tet, [(0, 2, 1), (0, 1, 3), (0, 3, 2), (1, 2, 3)])
    for name, text in (("gripper.xml", GRIPPER), ("arm.xml", ARM), ("frames.xml", FRAMES), ("holder.xml", HOLDER),
                       ("attach_inc.xml", INCLUDED), ("bot.urdf", BOT)):  # fmt: skip
        (d / name).write_text(text)
    m = '<asset><model name="gripper" file="gripper.xml"/><model name="frames" file="frames.xml"/></asset>'
    for name, text in SCENES.items():
        (d / f"{name}.xml").write_text(text.format(m=m))
    for name, (child, parent, body) in COMPILER.items():
        mesh = '<asset><mesh name="m" file="tet.stl" scale=".2 .1 .3"/></asset>' if "mesh=" in body else ""
        (d / f"cc_{name}_child.xml").write_text(f"<mujoco><compiler {child}/>{mesh}<worldbody>{body}</worldbody>"
                                                "</mujoco>")  # fmt: skip
        (d / f"cc_{name}.xml").write_text(f'<mujoco><compiler {parent}/><asset><model name="c" file="cc_{name}'
                                          '_child.xml"/></asset><worldbody><attach model="c" prefix="c-"/>'
                                          "</worldbody></mujoco>")  # fmt: skip
    for name, (ptop, ctop, _) in CONFLICT.items():
        (d / f"cf_{name}_child.xml").write_text(f"<mujoco>{ctop}<worldbody>{_LIGHT}</worldbody></mujoco>")
        (d / f"cf_{name}.xml").write_text(f'<mujoco>{ptop}<asset><model name="c" file="cf_{name}_child.xml"/>'
                                          '</asset><worldbody><attach model="c" prefix="c-"/></worldbody></mujoco>')
    return d


def _check(path: str):
    mjm = mujoco.MjModel.from_xml_path(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFWarning)
        ours = mjx_lite.load_mjcf(path)
    errs = compare_models(ours, mjm)
    assert not errs, "\n".join(errs)
    return ours, mjm


def test_gripper_on_arm(scene_dir):
    ours, mjm = _check(str(scene_dir / "arm.xml"))
    assert ours.names["body"] == ("world", "link1", "link2", "g/palm", "g/left", "g/right", "g/wristcam", "after")
    assert ours.names["tendon"] == ("g/split",) and ours.names["actuator"][2:] == ("g/close", "g/lv")
    assert ours.names["sensor"] == ("", "g/opening", "g/grip_pos", "g/close_frc", "g/palm_com", "g/t")
    assert ours.names["key"] == ("home", "g/open") and ours.neq == 1 and ours.nexclude == 1 and ours.npair == 1
    assert ours.names["mesh"] == ("g/tip",) and ours.names["material"] == ("steel", "g/steel")


@pytest.mark.parametrize("name", sorted(SCENES))
def test_scene_matches_mujoco(scene_dir, name):
    _check(str(scene_dir / f"{name}.xml"))


@pytest.mark.parametrize("name", sorted(COMPILER))
def test_child_compiler_settings(scene_dir, name):
    _check(str(scene_dir / f"cc_{name}.xml"))


@pytest.mark.parametrize("name", sorted(CONFLICT))
def test_conflict_policy(scene_dir, name):
    path = str(scene_dir / f"cf_{name}.xml")
    with pytest.warns(MJCFWarning, match=CONFLICT[name][2]):
        mjx_lite.load_mjcf(path)
    _check(path)


def test_merge_conflict_error(scene_dir):
    (scene_dir / "cf_bad_child.xml").write_text(f'<mujoco><option gravity="0 0 -1"/><worldbody>{_LIGHT}</worldbody>'
                                                "</mujoco>")  # fmt: skip
    path = scene_dir / "cf_bad.xml"
    path.write_text('<mujoco><compiler conflict="merge"/><option gravity="0 0 -2"/><asset><model name="c" '
                    'file="cf_bad_child.xml"/></asset><worldbody><attach model="c" prefix="c-"/></worldbody></mujoco>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_path(str(path))
    with pytest.raises(MJCFError, match="gravity: parent has 0 0 -2, child has 0 0 -1"):
        mjx_lite.load_mjcf(str(path))


def test_forward_composed_arm(scene_dir):
    m, mjm = _check(str(scene_dir / "arm.xml"))
    forward = jax.jit(mjx_lite.forward)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(1)
    for _ in range(2):
        oracle.random_state(mjm, mjd, rng)
        mujoco.mj_forward(mjm, mjd)
        d = forward(m, oracle.data_with_state(m, mjm, mjd).replace(time=mjd.time))
        for f in ("xpos", "xquat", "geom_xpos", "site_xpos", "cam_xpos", "subtree_com", "ten_length", "qfrc_bias",
                  "qfrc_passive", "actuator_force", "qfrc_actuator", "qacc_smooth", "sensordata"):  # fmt: skip
            want = np.asarray(getattr(mjd, f))
            oracle.close(np.asarray(getattr(d, f)).reshape(want.shape), want, FWD_TOL, f)
        oracle.close(d.qacc, mjd.qacc, QACC_TOL, "qacc")


def test_keyframes(scene_dir):
    """Each keyframe keeps its values for the joints and actuators of the model it was written in."""
    m, mjm = _check(str(scene_dir / "arm.xml"))
    kq, kc = np.asarray(m.key_qpos), np.asarray(m.key_ctrl)
    assert np.allclose(kq[0], [0.1, 0.2, 0.0, 0.0]) and np.allclose(kq[1], [0, np.radians(10), 0.04, 0.03])
    assert np.allclose(kc[1], [0, 0, 0.04, 0.2]) and float(m.key_time[1]) == 2.0


# ----------------------------------------------------------------------------------------------------------
# errors, each checked against MuJoCo's decision

_M = '<asset><model name="gripper" file="gripper.xml"/></asset>'
BAD = {
    "unknown_model": (f'<mujoco>{_M}<worldbody><attach model="nope" body="palm" prefix="a"/></worldbody></mujoco>',
                      "could not find model 'nope'"),  # fmt: skip
    "unknown_body": (f'<mujoco>{_M}<worldbody><attach model="gripper" body="nope" prefix="a"/></worldbody></mujoco>',
                     "could not find body 'nope' in model asset 'gripper'"),  # fmt: skip
    "unknown_frame": (f'<mujoco>{_M}<worldbody><attach model="gripper" frame="nope" prefix="a"/></worldbody>'
                      "</mujoco>", "could not find frame 'nope'"),  # fmt: skip
    "no_prefix": (f'<mujoco>{_M}<worldbody><attach model="gripper" body="palm"/></worldbody></mujoco>', "'prefix'"),
    "body_and_frame": (f'<mujoco>{_M}<worldbody><attach model="gripper" body="palm" frame="f" prefix="a"/>'
                       "</worldbody></mujoco>", "at most one of 'body', 'frame'"),  # fmt: skip
    "same_prefix_twice": (f'<mujoco>{_M}<worldbody><attach model="gripper" body="palm" prefix="a"/><attach '
                          'model="gripper" body="palm" prefix="a"/></worldbody></mujoco>',
                          "element palm already exists with prefix a"),  # fmt: skip
    "nested_keys_twice": (f'<mujoco>{_M}<asset><model name="holder" file="holder.xml"/></asset><worldbody>'
                          '<attach model="holder" body="arm" prefix="h1:"/><attach model="holder" body="arm" '
                          'prefix="h2:"/></worldbody></mujoco>', "repeated name 'grip-open' in key"),
    "missing_file": ('<mujoco><asset><model name="x" file="nowhere.xml"/></asset></mujoco>', "nowhere.xml"),
    "attach_child_element": (f'<mujoco>{_M}<worldbody><attach model="gripper" body="palm" prefix="a"><geom/>'
                             "</attach></worldbody></mujoco>", "unknown element"),  # fmt: skip
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_refused_like_mujoco(scene_dir, name):
    text, words = BAD[name]
    path = scene_dir / f"bad_{name}.xml"
    path.write_text(text)
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_path(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MJCFWarning)
        with pytest.raises(MJCFError, match=words) as e:
            mjx_lite.load_mjcf(str(path))
    assert e.value.file in (str(path), str(scene_dir / "gripper.xml")) and e.value.line is not None


def test_model_without_file(scene_dir):
    """(MuJoCo 4.0 fails with "unknown exception" and its later loads in the same process can hang: not called.)"""
    path = scene_dir / "bad_model_without_file.xml"
    path.write_text('<mujoco><asset><model name="x"/></asset></mujoco>')
    with pytest.raises(MJCFError, match="required attribute missing") as e:
        mjx_lite.load_mjcf(str(path))
    assert (e.value.element, e.value.attribute) == ("model", "file")


def test_cycle_is_an_error(scene_dir):
    """A model that attaches itself through its assets (MuJoCo loops; refused here, naming the <model>)."""
    (scene_dir / "loop_a.xml").write_text('<mujoco><asset><model name="b" file="loop_b.xml"/></asset></mujoco>')
    (scene_dir / "loop_b.xml").write_text('<mujoco><asset><model name="a" file="loop_a.xml"/></asset></mujoco>')
    with pytest.raises(MJCFError, match="cycle"):
        mjx_lite.load_mjcf(str(scene_dir / "loop_a.xml"))
