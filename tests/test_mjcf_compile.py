"""The MJCF compiler against MuJoCo's: every Model field that mjModel also has, on the reference models and on
small hand-written models exercising one feature each; plus compile-time errors for bad input."""

from __future__ import annotations

import dataclasses
import functools
import os

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite import types
from mjx_lite.mjcf.spec import MJCFError
from tests import oracle
from tests.oracle import ATOL, RTOL, compare_models

# ----------------------------------------------------------------------------------------------------------
# reference models


@functools.cache
def _mj_sizes(path: str) -> tuple[int, bool] | None:
    """(nbody, has spatial tendons) of MuJoCo's compiled model, or None when MuJoCo rejects the file."""
    try:
        m = mujoco.MjModel.from_xml_path(path)
    except Exception:  # noqa: BLE001 - the oracle rejects some shipped models (e.g. arm26, constraints)
        return None
    return m.nbody, bool(m.nwrap and np.any(m.wrap_type != mujoco.mjtWrap.mjWRAP_JOINT))


def _mujoco_compiles(path: str) -> bool:
    return _mj_sizes(path) is not None


@functools.cache
def _reference_models() -> list[str]:
    return [p for p in oracle.reference_models() if _mujoco_compiles(p)]


def _model_id(p: str) -> str:
    return os.path.relpath(p, oracle.SITE_PACKAGES)


def _is_slow(path: str) -> bool:
    """Big models, and models whose spatial tendons make the compiler jit the tendon stage (slow XLA build)."""
    nbody, spatial = _mj_sizes(path)
    return nbody > 40 or spatial


def _params():
    out = []
    for p in _reference_models():
        marks = [pytest.mark.slow] if _is_slow(p) else []
        out.append(pytest.param(p, id=_model_id(p), marks=marks))
    return out


@pytest.mark.parametrize("path", _params())
def test_reference_model(path):
    ours, mjm, spec = oracle.load_supported(path)
    errs = compare_models(ours, mjm) + oracle.compare_textures_with_spec(ours, spec)
    assert not errs, "\n".join(errs)


# ----------------------------------------------------------------------------------------------------------
# hand-written models: one feature each, MuJoCo as the oracle


def check_xml(xml: str) -> types.Model:
    mjm = mujoco.MjModel.from_xml_string(xml)
    ours = mjx_lite.load_mjcf_string(xml)
    errs = compare_models(ours, mjm) + oracle.compare_textures_with_spec(ours, mujoco.MjSpec.from_string(xml))
    assert not errs, "\n".join(errs)
    return ours


FEATURES = {
    "defaults_childclass": """
<mujoco>
  <default>
    <geom type="capsule" size=".05" rgba="1 0 0 1" friction=".7"/>
    <joint damping=".3" armature=".01"/>
    <default class="big"><geom size=".1 .2" density="500"/><joint stiffness="2" frictionloss=".1"/></default>
  </default>
  <worldbody>
    <body pos="0 0 1" childclass="big">
      <joint axis="1 0 0"/>
      <geom fromto="0 0 0 0 0 -.4"/>
      <body pos="0 0 -.4"><joint class="main" axis="0 1 0"/><geom class="main" fromto="0 0 0 .3 0 0"/></body>
    </body>
  </worldbody>
</mujoco>""",
    "frames": """
<mujoco>
  <worldbody>
    <frame pos="0 0 1" euler="0 0 90">
      <body name="a" pos=".1 0 0" euler="10 20 30">
        <joint type="hinge" axis="1 0 0" pos=".05 0 0"/>
        <frame pos="0 .1 0" quat="0 1 0 0"><geom type="box" size=".1 .05 .02"/><site name="s" pos=".01 0 0"/></frame>
        <geom type="sphere" size=".03" pos="0 0 .1"/>
      </body>
    </frame>
  </worldbody>
</mujoco>""",
    "fromto_shapes": """
<mujoco>
  <worldbody>
    <body><freejoint/>
      <geom type="capsule" fromto="0 0 0 .1 .2 .3" size=".02"/>
      <geom type="cylinder" fromto="0 0 0 0 0 -.3" size=".03"/>
      <geom type="box" fromto="-.1 0 0 .1 0 0" size=".02"/>
      <geom type="ellipsoid" fromto="0 0 .1 0 0 .3" size=".04"/>
      <site type="capsule" fromto="0 0 0 0 .1 0" size=".01"/>
    </body>
  </worldbody>
</mujoco>""",
    "inertia_from_geom_false": """
<mujoco>
  <compiler inertiafromgeom="false"/>
  <worldbody>
    <body><joint type="slide"/><inertial pos=".1 0 0" mass="2" diaginertia=".1 .2 .25"/><geom size=".1"/></body>
  </worldbody>
</mujoco>""",
    "inertia_from_geom_true": """
<mujoco>
  <compiler inertiafromgeom="true"/>
  <worldbody>
    <body><joint type="ball"/><inertial pos=".1 0 0" mass="2" diaginertia=".1 .2 .25"/>
      <geom type="box" size=".1 .2 .3" pos=".1 .1 0" euler="10 20 30"/><geom size=".05" pos="-.2 0 0" mass="3"/>
    </body>
  </worldbody>
</mujoco>""",
    "fullinertia_bounds": """
<mujoco>
  <compiler boundmass=".5" boundinertia=".01" balanceinertia="true"/>
  <worldbody>
    <body><joint/><inertial pos="0 0 0" mass="1" fullinertia=".3 .2 .25 .01 .02 .03"/></body>
    <body pos="1 0 0"><joint/><inertial pos="0 0 0" mass=".1" diaginertia=".001 .001 .5"/></body>
    <body pos="2 0 0"><joint type="slide"/><geom size=".01" mass=".001"/></body>
  </worldbody>
</mujoco>""",
    "autolimits_degree": """
<mujoco>
  <compiler angle="degree" eulerseq="zyx"/>
  <worldbody>
    <body euler="10 20 30"><joint range="-30 60" ref="10" springref="5"/><joint type="slide" range="-.1 .2"/>
      <geom size=".1"/>
      <body><joint type="ball" range="0 45"/><geom size=".1"/></body>
    </body>
  </worldbody>
</mujoco>""",
    "radian": """
<mujoco>
  <compiler angle="radian" autolimits="false"/>
  <worldbody>
    <body axisangle="0 0 1 .5"><joint range="-1 1" limited="true" ref=".2"/><geom size=".1"/></body>
    <body><joint range="-1 1" limited="false"/><geom size=".1"/></body>
  </worldbody>
</mujoco>""",
    "settotalmass": """
<mujoco>
  <compiler settotalmass="7"/>
  <worldbody>
    <body><joint/><geom size=".1"/><body pos="0 0 .3"><joint/><geom type="box" size=".1 .1 .2"/></body></body>
  </worldbody>
</mujoco>""",
    "shellinertia_groups": """
<mujoco>
  <compiler inertiagrouprange="0 2"/>
  <worldbody>
    <body><freejoint/>
      <geom type="sphere" size=".1" shellinertia="true"/>
      <geom type="box" size=".1 .2 .3" shellinertia="true" pos=".3 0 0"/>
      <geom type="capsule" size=".05 .1" shellinertia="true" pos="0 .3 0"/>
      <geom type="cylinder" size=".05 .1" shellinertia="true" pos="0 0 .3"/>
      <geom type="ellipsoid" size=".05 .1 .2" shellinertia="true" pos="0 .3 .3"/>
      <geom type="box" size="1 1 1" group="3"/>
    </body>
  </worldbody>
</mujoco>""",
    "fluid": """
<mujoco>
  <option density="1.2" viscosity=".001" wind="1 0 0"/>
  <worldbody>
    <body><freejoint/>
      <geom type="ellipsoid" size=".1 .2 .3" fluidshape="ellipsoid" fluidcoef=".4 .2 1.4 .9 .8"/>
      <geom type="capsule" size=".05 .1" fluidshape="ellipsoid" pos=".3 0 0"/>
      <geom type="cylinder" size=".05 .1" fluidshape="ellipsoid" pos="0 .3 0"/>
      <geom type="sphere" size=".05" fluidshape="ellipsoid" pos="0 0 .3"/>
      <geom type="box" size=".05 .1 .02" fluidshape="ellipsoid" pos="0 0 -.3"/>
    </body>
  </worldbody>
</mujoco>""",
    "mocap_keyframes": """
<mujoco>
  <size nkey="5"/>
  <worldbody>
    <body name="m" mocap="true" pos="1 2 3" quat="0 1 0 0"><geom size=".1" contype="0" conaffinity="0"/></body>
    <body name="f" pos="0 0 1"><freejoint/><geom size=".1"/></body>
    <body name="b"><joint type="ball"/><joint type="slide" axis="0 1 0"/><geom size=".1"/></body>
  </worldbody>
  <keyframe>
    <key name="k0" time="1" qpos="1 2 3 2 0 0 0 1 1 0 0 .5"/>
    <key name="k1" qvel="0 0 0 0 0 0 1 2 3 4" mpos="0 0 0" mquat="2 0 0 0"/>
    <key/>
  </keyframe>
</mujoco>""",
    "cameras_lights": """
<mujoco>
  <worldbody>
    <light name="l0" pos="0 0 3" dir="0 1 -1"/>
    <light mode="targetbody" target="b" directional="true"/>
    <camera name="c0" pos="1 1 1" xyaxes="1 0 0 0 1 1" fovy="60"/>
    <body name="b" pos="0 0 1"><joint/><geom size=".1"/>
      <camera mode="trackcom" pos="0 -1 0" quat="1 1 0 0"/>
      <camera mode="targetbodycom" target="b"/>
      <light mode="track" pos="0 0 1"/>
    </body>
  </worldbody>
</mujoco>""",
    "options_flags_statistic": """
<mujoco>
  <option timestep=".005" integrator="implicitfast" cone="elliptic" solver="CG" iterations="20" impratio="2"
          gravity="0 0 -1" o_margin=".01" o_solref=".03 1.1" jacobian="dense" actuatorgroupdisable="1 3">
    <flag contact="disable" energy="enable" warmstart="disable"/>
  </option>
  <statistic meansize=".3" center="1 2 3"/>
  <worldbody><body><joint/><geom size=".1"/></body></worldbody>
</mujoco>""",
    "joint_params": """
<mujoco>
  <worldbody>
    <body><joint type="hinge" stiffness="3 1 2" damping="2 .5 .1" armature=".1"
                 frictionloss=".2" solreflimit=".05 1" solimplimit=".8 .9 .01 .4 3" solreffriction=".04 2"
                 solimpfriction=".7 .8 .002 .6 2" margin=".01" actuatorfrcrange="-1 1" actuatorgravcomp="true"
                 group="2" range="-10 10"/>
      <joint type="slide" springdamper=".2 .7" axis="1 1 0"/>
      <geom size=".1" pos=".1 0 0"/>
    </body>
  </worldbody>
</mujoco>""",
    "geom_params_sameframe": """
<mujoco>
  <worldbody>
    <geom type="plane" size="0 0 1"/>
    <geom type="plane" size="3 2 .1" pos="0 0 -1"/>
    <body pos="0 0 1" gravcomp=".5"><joint type="slide"/><joint type="slide" axis="0 1 0"/>
      <geom size=".1" friction=".5 .01 .001" solmix=".5" priority="1" condim="4" contype="2" conaffinity="3"
            margin=".02" gap=".01" solref=".01 .5" solimp=".8 .9 .01 .5 2" group="1"/>
      <geom type="box" size=".1 .1 .1" pos=".2 0 0" contype="0" conaffinity="0"/>
      <site name="s" type="box" size=".1 .2 .3" pos=".1 0 0" quat="1 0 0 1"/>
    </body>
    <body pos="1 0 0"><joint/><geom type="box" size=".1 .2 .3" pos=".1 .1 .1" quat="1 1 0 0"/>
      <geom type="box" size=".1 .2 .3" pos=".1 .1 .1" quat="1 1 0 0"/></body>
  </worldbody>
</mujoco>""",
    "discardvisual": """
<mujoco>
  <compiler discardvisual="true"/>
  <worldbody>
    <geom name="vis0" size=".2" contype="0" conaffinity="0"/>
    <body><joint/><geom size=".1"/><geom type="box" size=".3 .3 .3" contype="0" conaffinity="0" pos="1 0 0"/>
      <geom size=".05" pos="0 1 0"/></body>
  </worldbody>
</mujoco>""",
    # MuJoCo's ngravcomp counts bodies with gravcomp > 0: negative values alone leave the model without it
    "gravcomp_negative_only": """
<mujoco>
  <worldbody><body gravcomp="-1"><freejoint/><geom size=".1"/></body></worldbody>
</mujoco>""",
    "tree_static_bodies": """
<mujoco>
  <worldbody>
    <body name="static"><geom size=".1"/><body><geom size=".1"/></body></body>
    <body><joint/><geom size=".1"/>
      <body name="welded" pos=".2 0 0"><geom size=".1"/><body><joint/><geom size=".1"/></body></body>
      <body><joint type="ball"/><geom size=".1" pos=".1 0 0"/></body>
    </body>
    <body><freejoint/><geom size=".1"/><body pos=".1 0 0"><joint type="slide"/><geom size=".1"/></body></body>
  </worldbody>
</mujoco>""",
    # static bodies fused into their parents: poses of geoms, sites, cameras, lights and child bodies; inertia
    # accumulated (not into the world); bodies named by other elements, mocap bodies and bodies carrying a
    # force/torque sensor's site stay
    "fusestatic": """
<mujoco><compiler fusestatic="true"/>
  <worldbody>
    <body name="s0" pos="0 0 1" euler="10 20 30"><geom size=".1"/><site name="st" pos=".1 0 0"/>
      <camera name="c0" pos="0 .2 0" euler="0 10 0"/><light name="l0" pos="0 0 1" dir="0 1 -1"/>
      <body name="a" pos="1 0 0"><joint axis="0 1 0"/><geom size=".1" pos=".1 0 0"/>
        <body name="s1" pos="0 0 .3" euler="0 0 45"><geom type="box" size=".1 .2 .3"/><camera pos="0 0 .1"/>
          <light pos=".1 0 0" dir="1 0 0"/>
          <body name="s2" pos=".2 0 0"><inertial pos=".1 0 0" mass="2" diaginertia=".1 .2 .25"/>
            <body name="b" pos="0 0 .2"><joint/><geom size=".05"/></body></body></body>
        <body name="s3" pos="0 0 -.3"><geom size=".05"/><site name="ft" pos="0 0 .1"/></body>
        <body name="keep" pos="0 .3 0"><geom size=".05"/></body>
        <body name="target" pos=".1 .3 0"><geom size=".05"/></body>
        <body name="ex" pos=".1 .3 .2"><geom size=".05"/></body>
      </body>
    </body>
    <body name="m" mocap="true"><geom size=".1" contype="0" conaffinity="0"/></body>
    <body pos="2 0 0"><geom size=".1"/><body pos="0 0 .1"><geom size=".1"/></body></body>
    <camera mode="targetbody" target="target"/>
  </worldbody>
  <contact><exclude body1="ex" body2="a"/></contact>
  <sensor><subtreecom body="keep"/><force site="ft"/></sensor>
</mujoco>""",
    # <replicate> copies the elements outside the tree that refer only to its template (or the world), names and
    # references suffixed, and sensors that refer to nothing (MuJoCo's loop copies earlier copies too)
    "replicate_references": """
<mujoco>
  <worldbody>
    <replicate count="2" offset="1 0 0"><body name="b"><joint name="j"/><geom name="g" size=".1"/><site name="s"/>
      </body></replicate>
    <body name="other"><joint name="oj"/><geom size=".1"/></body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>
  <equality><joint joint1="j"/></equality>
  <contact><exclude body1="b" body2="world"/><pair geom1="g" geom2="g"/></contact>
  <actuator><motor name="m" joint="j"/><motor name="mt" tendon="t"/></actuator>
  <sensor><jointpos name="jp" joint="j"/><clock name="c"/><actuatorfrc actuator="mt"/><framepos objtype="site"
    objname="s"/><jointpos joint="oj"/></sensor>
  <custom><tuple name="tp"><element objtype="body" objname="b"/></tuple><numeric name="n" data="1"/></custom>
</mujoco>""",
    # ... and those that refer to the template and to other objects too (those references unchanged: MuJoCo's
    # model/replicate/tendon.xml), except equalities, which MuJoCo then drops
    "replicate_mixed_references": """
<mujoco><worldbody>
  <body name="out" pos="0 0 2"><freejoint/><geom name="og" size=".1"/><site name="os"/></body>
  <replicate count="3" offset="1 0 0">
    <body name="t" pos="0 0 1"><freejoint/><geom name="tg" size=".1"/><site name="ts"/></body></replicate>
  </worldbody>
  <tendon><spatial name="sp" range="0 2"><site site="ts"/><geom geom="og" sidesite="os"/><site site="os"/></spatial>
  </tendon>
  <equality><connect body1="t" body2="out" anchor="0 0 0"/></equality>
  <contact><pair geom1="tg" geom2="og"/><exclude body1="t" body2="out"/></contact>
  <sensor><framepos objtype="site" objname="ts" reftype="site" refname="os"/><tendonpos tendon="sp"/></sensor>
</mujoco>""",
    "replicate_nested_references": """
<mujoco><worldbody><replicate count="2" offset="1 0 0"><replicate count="2" offset="0 1 0" sep="_">
  <body name="b"><joint name="j"/><geom name="g" size=".1"/></body></replicate></replicate></worldbody>
  <sensor><jointpos name="jp" joint="j"/><clock name="c"/></sensor></mujoco>""",
    # a body without inertial information inside a <frame>: MuJoCo copies its own pose (before the frame) into
    # its inertial frame
    "frame_massless_body": """
<mujoco><worldbody><frame pos="1 0 0" euler="0 0 45"><body pos="0 0 1" euler="10 0 0"><frame pos="0 2 0">
  <body pos="0 0 3"/></frame><body><joint/><geom size=".1"/></body></body></frame></worldbody></mujoco>""",
}


@pytest.mark.parametrize("name", sorted(FEATURES))
def test_feature(name):
    check_xml(FEATURES[name])


# ----------------------------------------------------------------------------------------------------------
# bad input: MJCFError naming element, attribute and line


BAD = {
    "undefined_mesh": ('<mujoco><worldbody><body><geom type="mesh" mesh="nope"/></body></worldbody></mujoco>',
                       "geom", "mesh"),
    "undefined_material": ('<mujoco><worldbody><geom size=".1" material="nope"/></worldbody></mujoco>',
                           "geom", "material"),
    "undefined_target": ('<mujoco><worldbody><camera mode="targetbody" target="nope"/></worldbody></mujoco>',
                         "camera", "target"),
    "bad_size_capsule": ('<mujoco><worldbody><body><geom type="capsule" size=".1"/></body></worldbody></mujoco>',
                         "geom", "size"),
    "bad_size_box": ('<mujoco><worldbody><geom type="box" size=".1 .2"/></worldbody></mujoco>', "geom", "size"),
    "negative_mass": ('<mujoco><worldbody><body><joint/><geom size=".1" mass="-1"/></body></worldbody></mujoco>',
                      "geom", "mass"),
    # MuJoCo raises a negative mass to boundmass (0), then refuses a moving body without mass
    "negative_inertial_mass": ('<mujoco><worldbody><body><joint/><inertial pos="0 0 0" mass="-1" '
                               'diaginertia="1 1 1"/></body></worldbody></mujoco>', "body", None),
    "range_without_limited": ('<mujoco><compiler autolimits="false"/><worldbody><body><joint range="0 1"/>'
                              '<geom size=".1"/></body></worldbody></mujoco>', "joint", "range"),
    "bad_range": ('<mujoco><worldbody><body><joint range="1 0" limited="true"/><geom size=".1"/></body>'
                  "</worldbody></mujoco>", "joint", "range"),
    "repeated_name": ('<mujoco><worldbody><body name="a"><joint/><geom size=".1"/></body><body name="a">'
                      '<joint/><geom size=".1"/></body></worldbody></mujoco>', "body", "name"),
    "bad_keyframe": ('<mujoco><worldbody><body><joint/><geom size=".1"/></body></worldbody><keyframe>'
                     '<key qpos="1 2"/></keyframe></mujoco>', "key", "qpos"),
    "fromto_sphere": ('<mujoco><worldbody><geom type="sphere" size=".1" fromto="0 0 0 1 1 1"/></worldbody></mujoco>',
                      "geom", "fromto"),
    "bad_condim": ('<mujoco><worldbody><geom size=".1" condim="2"/></worldbody></mujoco>', "geom", "condim"),
    "zero_axis": ('<mujoco><worldbody><body><joint axis="0 0 0"/><geom size=".1"/></body></worldbody></mujoco>',
                  "joint", "axis"),
    "plane_in_moving_body": ('<mujoco><worldbody><body><joint/><geom type="plane" size="1 1 1"/><geom size=".1"/>'
                             "</body></worldbody></mujoco>", "geom", "type"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input(name):
    xml, tag, attribute = BAD[name]
    with pytest.raises(ValueError):  # the oracle rejects it too
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError) as e:
        mjx_lite.load_mjcf_string(xml)
    assert e.value.element == tag, str(e.value)
    assert e.value.attribute == attribute, str(e.value)
    assert e.value.line is not None and e.value.line >= 1, str(e.value)


def test_moving_body_without_mass():
    xml = '<mujoco><worldbody><body name="b"><joint/></body></worldbody></mujoco>'
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="mass and inertia"):
        mjx_lite.load_mjcf_string(xml)


def test_float_change_does_not_retrace():
    """Model floats are traced: a changed mass reuses the compiled function."""
    m = mjx_lite.load_mjcf_string(FEATURES["settotalmass"])
    calls = []

    @jax.jit
    def f(m):
        calls.append(1)
        return m.body_mass.sum()

    f(m)
    f(m.replace(body_mass=m.body_mass * 2))
    assert len(calls) == 1


def test_qpos0_state_matches_pipeline():
    """derived.ConstState (numpy kinematics at qpos0) agrees with the JAX pipeline (kinematics, com_pos, crb)."""
    from mjx_lite.mjcf import derived
    from mjx_lite.mjcf.context import CompileContext
    from mjx_lite.pipeline import inertia, kinematics

    xml = """
<mujoco>
  <worldbody>
    <body name="m" mocap="true" pos="1 2 3"><geom size=".1" contype="0" conaffinity="0"/></body>
    <body pos="0 0 1" euler="10 20 30"><freejoint/><geom type="box" size=".1 .2 .3" pos=".1 0 0"/>
      <body pos=".2 0 0" euler="0 30 0"><joint type="ball" pos=".05 0 0"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".05"/>
        <body pos=".3 0 0"><joint axis="0 1 1" ref="20"/><joint type="slide" axis="1 0 0" ref=".1"/>
          <geom size=".05" pos=".1 .1 0"/><site name="s" pos="0 .1 0"/></body>
      </body>
    </body>
  </worldbody>
</mujoco>"""
    m = mjx_lite.load_mjcf_string(xml)
    skip = {"opt", "stat", "vis", "source", "names", "nconmax", "njmax", *types.SIZE_FIELDS}
    arrays = {f.name: np.asarray(getattr(m, f.name)) for f in dataclasses.fields(types.Model) if f.name not in skip}
    ctx = CompileContext(compiler={}, option={}, arrays=arrays, sizes={k: getattr(m, k) for k in types.SIZE_FIELDS})
    st = derived.ConstState(ctx)

    @jax.jit
    def run(m, d):
        d = kinematics.com_pos(m, kinematics.kinematics(m, d))
        return inertia.crb(m, d), None

    d, _ = run(m, mjx_lite.make_data(m))
    for name in ("xpos", "xmat", "xipos", "ximat", "xanchor", "geom_xpos", "geom_xmat", "site_xpos", "subtree_com",
                 "cdof"):  # fmt: skip
        np.testing.assert_allclose(getattr(st, name), np.asarray(getattr(d, name)), rtol=RTOL, atol=ATOL, err_msg=name)
    np.testing.assert_allclose(st.mfull, np.asarray(inertia.full_m(m, d)), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(st.minv @ st.mfull, np.eye(m.nv), atol=1e-9)


def test_libccd_collision_refusals_at_load_time():
    """nativeccd="disable" selects libccd's MPR (collision/mpr.py). The pairs whose MPR contacts mjx_lite does not
    reproduce (box-mesh, mesh-mesh: round-off breaks MuJoCo's support ties) are refused by name, with the flag's
    line; a model without them loads."""
    mesh = '<asset><mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset>'
    bodies = '<body><freejoint/><geom type="mesh" mesh="m"/></body><body><freejoint/><geom type="{}" {}/></body>'
    xml = ('<mujoco><option>\n<flag nativeccd="disable"/></option>' + mesh + "<worldbody>" + bodies
           + "</worldbody></mujoco>")  # fmt: skip
    with pytest.raises(NotImplementedError, match="nativeccd.*box-mesh and mesh-mesh") as e:
        mjx_lite.load_mjcf_string(xml.format("mesh", 'mesh="m"'))
    assert "<string>:2" in str(e.value)
    m = mjx_lite.load_mjcf_string(xml.format("cylinder", 'size=".1 .1"'))
    assert m.opt.disableflags & mjx_lite.types.DisableBit.NATIVECCD
    mjx_lite.load_mjcf_string(xml.format("mesh", 'mesh="m"').replace("disable", "enable"))
