"""Bad and unusual MJCF input, MuJoCo (4.0) as the oracle: the loader accepts what MuJoCo accepts (with the same
compiled fields) and rejects what MuJoCo rejects, with an MJCFError naming file and line; never another exception.

The defects of issue 21 (loader side) and every bug the differential fuzzer (test_fuzz_mjcf.py) found are kept here
as plain cases; each case is checked against MuJoCo at test time, so the expected decision is MuJoCo's, not ours.
"""

from __future__ import annotations

import sys

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf import xml as mjxml
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import mjcf_fuzz as fz

G = '<geom size=".1"/>'
BODY = '<body name="b"><joint name="j"/><geom size=".1"/></body>'


def W(inner: str, head: str = "", tail: str = "") -> str:  # noqa: N802 - a model around a worldbody
    return f"<mujoco>{head}<worldbody>{inner}</worldbody>{tail}</mujoco>"


# name -> MJCF (or (MJCF, assets)); MuJoCo decides whether it loads
CASES: dict[str, str | tuple[str, dict]] = {
    # integers beyond int32 (MuJoCo: "number is too large"), reals beyond double, hex, empty values
    "int32_contype_rejected": W('<geom size=".1" contype="2147483648"/>'),
    "int32_conaffinity_rejected": W('<geom size=".1" conaffinity="-2147483649"/>'),
    "int32_priority_rejected": W('<geom size=".1" priority="99999999999999999999"/>'),
    "int32_joint_group_rejected": W('<body><joint group="4294967296"/><geom size=".1"/></body>'),
    "int32_site_group_rejected": W('<site group="4294967296"/>'),
    "int32_max_ok": W('<geom size=".1" contype="2147483647" conaffinity="-2147483648"/>'),
    "option_iterations_int32_rejected": W(G, '<option iterations="2147483648"/>'),
    "mass_1e400_rejected": W('<body><joint/><geom size=".1" mass="1e400"/></body>'),
    "double_max_ok": W('<geom size=".1" margin="1.7976931348623157e308"/>'),
    "float_rgba_too_large_rejected": W('<geom size=".1" rgba="3.5e38 1 1 1"/>'),
    "hex_real": W('<geom size="0x1p-3" pos="0x10 0 -0x1.8p1"/>'),
    "hex_int_rejected": W('<geom size=".1" contype="0x10"/>'),
    "int_exponent_rejected": W('<geom size=".1" condim="1e3"/>'),
    "inf_nan_words": W('<body pos="0 0 1"><joint/><geom size=".1" margin="INFINITY" gap="-nan(7)"/></body>'),
    "underscore_rejected": W('<geom size="1_0"/>'),
    "nbsp_rejected": W('<geom size="\u00a0.1"/>'),
    "empty_pos": W('<body pos=""><joint/><geom size=".1" pos="  "/></body>'),
    "empty_keyword_rejected": W('<geom size=".1" type=""/>'),
    "empty_class_rejected": W('<geom size=".1" class=""/>'),
    # XML syntax: what MuJoCo's TinyXML2 tolerates and what it refuses
    "xml_amp_lt_in_value": '<mujoco model="a & b < c">' + f"<worldbody>{G}</worldbody></mujoco>",
    "xml_double_hyphen_comment": f"<mujoco><!-- a -- b --><worldbody>{G}</worldbody></mujoco>",
    "xml_space_before_decl": f'  <?xml version="1.0"?><mujoco><worldbody>{G}</worldbody></mujoco>',
    "xml_elements_after_root": f"<mujoco><worldbody>{G}</worldbody></mujoco><extra/><mujoco/>",
    "xml_attrs_without_space": '<mujoco><worldbody><geom size=".1"pos="0 0 1"/></worldbody></mujoco>',
    "xml_text_after_root_rejected": f"<mujoco><worldbody>{G}</worldbody></mujoco>trailing",
    "xml_pi_in_element_rejected": f"<mujoco><?pi x?><worldbody>{G}</worldbody></mujoco>",
    "xml_repeated_attribute_rejected": '<mujoco><worldbody><geom size=".1" size=".2"/></worldbody></mujoco>',
    "xml_namespace_on_root": f'<mujoco xmlns="u" xmlns:x="v" x:y="1"><worldbody>{G}</worldbody></mujoco>',
    "xml_namespace_on_geom_rejected": '<mujoco xmlns:x="v"><worldbody><geom size=".1" x:y="1"/></worldbody></mujoco>',
    "xml_doctype_internal_entity": '<!DOCTYPE mujoco [<!ENTITY r "0.25">]><mujoco model="&r;">'
    f"<worldbody>{G}</worldbody></mujoco>",
    "xml_doctype_entity_as_number_rejected": '<!DOCTYPE mujoco [<!ENTITY r "0.25">]><mujoco><worldbody>'
    '<geom size="&r;"/></worldbody></mujoco>',
    # defaults
    "default_repeated_element_rejected": W('<geom class="a"/>', '<default><default class="a"><geom size=".1"/>'
                                           '<geom size=".2"/></default></default>'),
    "default_nested_attribute_rejected": W(G, '<default><default class="a" foo="1"/></default>'),
    "default_empty_class_rejected": W(G, '<default><default class=""/></default>'),
    "default_child_attribute_rejected": W(G, '<default><geom size=".1" foo="1"/></default>'),
    "default_child_child_rejected": W(G, '<default><geom size=".1"><joint/></geom></default>'),
    "default_actuator_child_rejected": W(BODY, '<default><motor><touch/></motor></default>'),
    "default_class_before_nested": W('<body><joint/><geom class="a"/></body>',
                                     '<default><default class="a"/><geom size=".3"/></default>'),
    "default_top_class_empty": W("<geom/>", '<default class=""><geom size=".3"/></default>'),
    "flag_twice_rejected": W(G, "<option><flag/><flag/></option>"),
    "flag_children_rejected": W(G, "<option><flag><flag/></flag></option>"),
    "lengthrange_twice_rejected": W(G, "<compiler><lengthrange/><lengthrange/></compiler>"),
    "visual_global_twice_rejected": W(G, "<visual><global/><global/></visual>"),
    "visual_realtime_rejected": W(G, '<visual><global realtime="0"/></visual>'),
    "visual_not_a_number_rejected": W(G, '<visual><map znear="near"/></visual>'),
    "statistic_extent_rejected": W(G, '<statistic extent="-1"/>'),
    "size_nconmax_rejected": W(G, '<size nconmax="-2"/>'),
    "size_memory_rejected": W(G, '<size memory="12Q"/>'),
    "size_memory_ok": W(G, '<size memory="16M"/>'),
    "user_beyond_nuser_rejected": W('<geom size=".1" user="1 2"/>', '<size nuser_geom="1"/>'),
    # world body, frames
    "world_joint_rejected": W("<joint/>" + G),
    "world_frame_joint_rejected": W("<frame><freejoint/></frame>" + G),
    "world_inertial_rejected": W('<inertial pos="0 0 0" mass="1"/>' + G),
    "world_attribute_rejected": '<mujoco><worldbody name="w"><geom size=".1"/></worldbody></mujoco>',
    "replicate_joint_rejected": W('<replicate count="2"><joint/></replicate>' + G),
    "frame_inertial_in_body": W('<body><joint/><frame pos="1 0 0"><inertial pos="0 0 0" mass="1" '
                                'diaginertia=".1 .1 .1"/></frame></body>'),
    "top_level_body_ignored": f'<mujoco><body><geom size=".5"/></body><worldbody>{G}</worldbody></mujoco>',
    "top_level_body_attribute_rejected": f'<mujoco><body foo="1"/><worldbody>{G}</worldbody></mujoco>',
    # masses, inertias, orientations
    "negative_inertial_mass_static": W('<body><inertial pos="0 0 0" mass="-1" diaginertia="1 1 1"/></body>'),
    "negative_inertial_mass_moving_rejected": W('<body><joint/><inertial pos="0 0 0" mass="-1" '
                                                'diaginertia="1 1 1"/></body>'),
    "tiny_density": W('<body><joint/><geom size=".1" density="1e-5"/><geom size=".1" pos="1 0 0" '
                      'density="1e-5"/></body>'),
    "tiny_density_below_mjeps_rejected": W('<body><joint/><geom size=".1" density="1e-30"/></body>'),
    "negative_armature_frictionloss": W('<body><joint armature="-.1" frictionloss="-1"/><geom size=".1"/></body>'),
    "huge_quaternion": W('<body quat="-0.6 0.3 0 1e308"><joint/><geom size=".1"/></body>'),
    "tiny_quaternion": W('<body quat="1e-8 0 0 0"><joint/><geom size=".1"/></body>'),
    "zero_quaternion_rejected": W('<body quat="0 0 0 0"><joint/><geom size=".1"/></body>'),
    "axisangle_too_small_rejected": W('<body axisangle="1e-8 0 0 30"><joint/><geom size=".1"/></body>'),
    "axis_5e-7": W('<body><joint axis="5e-7 0 0"/><geom size=".1"/></body>'),
    "euler_inf": W('<body><joint/><geom size=".1"/><site euler="-40 inf .5"/></body>'),
    "fromto_nan_is_unset": W('<body><joint/><geom size=".1"/><site fromto="nan nan nan nan nan nan"/></body>'),
    "settotalmass_tiny": W('<body><joint/><geom size=".1"/><body pos="0 0 1"><joint/><geom size=".2"/></body>'
                           "</body>", '<compiler settotalmass="1e-15"/>'),
    "settotalmass_massless": W('<body mocap="true"><geom size=".1" mass="0"/></body>',
                               '<compiler settotalmass="2"/>'),
    "springyield_negative_rejected": W('<body><joint springyield="-1"/><geom size=".1"/></body>'),
    "simple_body_repeated_slide_axes": W('<body><joint type="slide"/><joint name="j2" type="slide"/>'
                                         '<geom size=".1"/></body>', tail='<actuator><motor joint="j2"/></actuator>'),
    "combined_inertia_frame": W('<body><joint axis="0 1 0"/><geom type="capsule" size=".05 .5" '
                                'fromto="0 0 0 .5 0 0"/><geom type="mesh" mesh="t"/></body>',
                                '<asset><mesh name="t" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset>'),
    "body_simple_false": W('<body simple="false"><joint type="slide"/><geom size=".1"/></body>'),
    "sleep_policy_rejected": W('<body><joint/><geom size=".1"/><body sleep="allowed"><joint/><geom size=".1"/>'
                               "</body></body>"),
    "sleep_policy_root": W('<body sleep="init"><freejoint/><geom size=".1"/></body>'),
    # keyframes (MuJoCo 4 pads short arrays)
    "key_short_qpos": W('<body><joint ref="10"/><joint type="slide" ref=".5"/><joint type="ball"/>'
                        '<geom size=".1"/></body>', tail='<keyframe><key qpos="1" qvel="2"/></keyframe>'),
    "key_mocap_partial": W('<body mocap="true" pos="1 2 3"><geom size=".1" contype="0" conaffinity="0"/></body>'
                           '<body mocap="true" pos="4 5 6"><geom size=".1" contype="0" conaffinity="0"/></body>',
                           tail='<keyframe><key mpos="7 8 9 10" mquat="0 0 0 1e-7"/></keyframe>'),
    "key_long_qpos_rejected": W(BODY, tail='<keyframe><key qpos="1 2"/></keyframe>'),
    # cameras, lights, sites
    "camera_focal_without_sensorsize_rejected": W('<camera focalpixel="10 10"/>'),
    "light_softness_rejected": W('<light softness="2"/>'),
    "site_unknown_mesh_rejected": W('<site mesh="nope"/>'),
    # tendons
    "spatial_repeated_site_rejected": W('<site name="a"/><body><joint/><geom size=".1"/><site name="s" pos="0 0 1"/>'
                                        '</body>', tail='<tendon><spatial><site site="a"/><site site="a"/>'
                                        '<site site="s"/></spatial></tendon>'),
    "spatial_site_again_later": W('<site name="a"/><body><joint/><geom size=".1"/><site name="s" pos="0 0 1"/>'
                                  '</body>', tail='<tendon><spatial><site site="a"/><site site="s"/>'
                                  '<site site="a"/></spatial></tendon>'),
    "spatial_zero_width_rejected": W('<site name="a"/><body><joint/><geom size=".1"/><site name="s" pos="0 0 1"/>'
                                     '</body>', tail='<tendon><spatial width="0"><site site="a"/><site site="s"/>'
                                     "</spatial></tendon>"),
    "fixed_ball_joint_rejected": W('<body><joint name="j" type="ball"/><geom size=".1"/></body>',
                                   tail='<tendon><fixed><joint joint="j" coef="1"/></fixed></tendon>'),
    "fixed_repeated_joint_rejected": W('<body><joint name="a"/><joint name="b"/><geom size=".1"/></body>',
                                       tail='<tendon><fixed><joint joint="a" coef="1"/><joint joint="b" coef="1"/>'
                                       '<joint joint="a" coef="1"/></fixed></tendon>'),
    "tendon_actfrcrange_rejected": W(BODY, tail='<tendon><fixed actuatorfrclimited="true"><joint joint="j" '
                                     'coef="1"/></fixed></tendon>'),
    "fixed_negative_armature_rejected": W(BODY, tail='<tendon><fixed armature="-1"><joint joint="j" coef="1"/></fixed>'
                                 "</tendon>"),
    "tendon_unknown_material_rejected": W(BODY, tail='<tendon><fixed material="m"><joint joint="j" coef="1"/>'
                                          "</fixed></tendon>"),
    # actuators and sensors
    "actuator_force_range_rejected": W(BODY, tail='<actuator><motor joint="j" forcelimited="true"/></actuator>'),
    "actuator_negative_armature": W(BODY, tail='<actuator><motor joint="j" armature="-1"/></actuator>'),
    "actuator_interp": W(BODY, tail='<actuator><motor joint="j" interp="cubic"/></actuator>'),
    "sensor_interp": W(BODY, tail='<sensor><jointpos joint="j" interp="linear"/></sensor>'),
    "frame_unknown_attribute": W('<body><joint/><geom size=".1"/><frame type="hinge" foo="1" pos="1 0 0">'
                                 '<geom size=".1"/></frame></body>'),
    "fixed_tendon_armature_not_simple": W('<body><joint name="j" type="slide"/><geom size=".1"/></body>',
                                          tail='<tendon><fixed armature=".4"><joint joint="j" coef="1"/></fixed>'
                                          "</tendon>"),
    "freejoint_empty_group_rejected": W('<body><freejoint group=""/><geom size=".1"/></body>'),
    "muscle_negative_keeps_default": W(BODY, tail='<actuator><muscle joint="j" vmax="-1" scale="-2" '
                                       'lengthrange="0 1"/></actuator>'),
    "muscle_general_negative_vmax_rejected": W(BODY, tail='<actuator><general joint="j" gaintype="muscle" '
                                               'gainprm="0.75 1.05 -1 200 0.5 1.6 -1.5 1.3 1.2" lengthrange="0 1"/>'
                                               "</actuator>"),
    "ipc_flag_rejected": W(G, '<option><flag ipc="enable"/></option>'),
    "light_type_and_directional_rejected": W('<light type="point" directional="false"/>'),
    "light_type_from_class": W('<light directional="true"/>', '<default><light type="point"/></default>'),
    "actuator_armature_singular": W('<body><joint name="j" type="slide"/><geom size=".1"/></body>',
                                    tail='<actuator><general joint="j" armature="-4.18879"/></actuator>'),
    # rendering assets
    "material_missing_texture_rejected": W(G, '<asset><material name="m" texture="nope"/></asset>'),
    "texture_builtin_width_rejected": W(G, '<asset><texture name="t" type="2d" builtin="checker" width="0" '
                                        'height="10"/></asset>'),
    "texture_missing_file_rejected": W(G, '<asset><texture name="t" type="2d" file="nope.png"/></asset>'),
    "texture_content_type_rejected": W(G, '<asset><texture name="t" type="2d" file="x.stl"/></asset>'),
    "texture_repeated_name_rejected": W(G, '<asset><texture name="t" builtin="flat" width="4"/>'
                                        '<texture name="t" builtin="flat" width="4"/></asset>'),
    "material_repeated_name_rejected": W(G, '<asset><material name="m"/><material name="m"/></asset>'),
    "material_texture_and_layer_rejected": W(G, '<asset><texture name="t" builtin="flat" width="4"/>'
                                             '<material name="m" texture="t"><layer role="rgb" texture="t"/>'
                                             "</material></asset>"),
    "texture_gridlayout_rejected": W(G, '<asset><texture name="t" builtin="flat" width="4" gridsize="2 3" '
                                     'gridlayout="R"/></asset>'),
    "texture_and_material_ok": W('<geom size=".1" material="m"/>', '<asset><texture name="t" type="2d" '
                                 'builtin="checker" width="8" height="8"/><material name="m" texture="t"/></asset>'),
    # meshes
    "maxhullvert_3_rejected": W('<geom type="mesh" mesh="m"/>', '<asset><mesh name="m" vertex="0 0 0 1 0 0 0 1 0 '
                                '0 0 1" maxhullvert="3"/></asset>'),
    "maxhullvert_negative_rejected": W('<geom type="mesh" mesh="m"/>', '<asset><mesh name="m" vertex="0 0 0 1 0 0 0 '
                                       '1 0 0 0 1" maxhullvert="-2"/></asset>'),
    "mesh_mirrored_inline_faces": W('<geom type="mesh" mesh="m"/>', '<asset><mesh name="m" vertex="0 0 0 1 0 0 0 1 0'
                                    ' 0 0 1" face="0 1 2 0 2 3 0 3 1 1 3 2" scale="-1 1 1"/></asset>'),
    "mesh_mirrored_hull": W('<geom type="mesh" mesh="m"/>', '<asset><mesh name="m" vertex="-1 -1 -1 1 -1 -1 -1 1 -1'
                            ' 1 1 -1 -1 -1 1 1 -1 1 -1 1 1 1 1 1" scale="-1 1 1"/></asset>'),
    # includes
    "include_twice_rejected": ('<mujoco><include file="a.xml"/><include file="a.xml"/></mujoco>',
                               {"a.xml": b'<mujoco><worldbody><geom size=".1"/></worldbody></mujoco>'}),
    "include_unknown_attribute": ('<mujoco><include file="a.xml" foo="bar"/></mujoco>',
                                  {"a.xml": b'<mujoco><worldbody><geom size=".1"/></worldbody></mujoco>'}),
    "include_any_root": ('<mujoco><include file="a.xml"/></mujoco>',
                         {"a.xml": b'<anything><worldbody><geom size=".1"/></worldbody></anything>'}),
    "include_no_elements_rejected": ('<mujoco><include file="a.xml"/></mujoco>', {"a.xml": b"<mujoco/>"}),
    "include_with_comment_child_rejected": ('<mujoco><include file="a.xml"><!-- x --></include></mujoco>',
                                            {"a.xml": b'<mujoco><worldbody><geom size=".1"/></worldbody></mujoco>'}),
}  # fmt: skip


def _load_both(xml: str, assets: dict | None):
    try:
        mjm, mj_error = mujoco.MjModel.from_xml_string(xml, assets or {}), None
    except Exception as e:  # noqa: BLE001 - any MuJoCo failure is a rejection
        mjm, mj_error = None, e
    try:
        ours, our_error = mjx_lite.load_mjcf_string(xml, assets=assets), None
    except MJCFError as e:
        ours, our_error = None, e
    return mjm, mj_error, ours, our_error


@pytest.mark.parametrize("name", sorted(CASES))
def test_like_mujoco(name):
    case = CASES[name]
    xml, assets = case if isinstance(case, tuple) else (case, None)
    mjm, mj_error, ours, our_error = _load_both(xml, assets)
    if mjm is None:
        assert our_error is not None, f"MuJoCo rejects ({mj_error}) but mjx_lite accepts"
        assert our_error.file is not None and our_error.line is not None, str(our_error)
        assert name.endswith("_rejected"), f"MuJoCo rejects a case named as accepted: {mj_error}"
        return
    assert our_error is None, f"MuJoCo accepts, mjx_lite rejects: {our_error}"
    assert not name.endswith("_rejected"), "MuJoCo accepts a case named as rejected"
    errs = fz.compare(ours, mjm)  # oracle.compare_models, with the fuzzer's documented exceptions
    assert not errs, "\n".join(errs)


# ----------------------------------------------------------------------------------------------------------
# the messages and values behind some of the decisions


@pytest.mark.parametrize(
    "body, element, attribute",
    [('<geom size=".1" contype="2147483648"/>', "geom", "contype"),
     ('<geom size=".1" conaffinity="2147483648"/>', "geom", "conaffinity"),
     ('<geom size=".1" priority="2147483648"/>', "geom", "priority"),
     ('<body><joint group="4294967296"/><geom size=".1"/></body>', "joint", "group"),
     ('<site group="4294967296"/>', "site", "group")],
)  # fmt: skip
def test_int32_overflow_names_the_attribute(body, element, attribute):
    with pytest.raises(MJCFError, match="number is too large") as e:
        mjx_lite.load_mjcf_string(f"<mujoco>\n<worldbody>\n{body}</worldbody></mujoco>")
    assert (e.value.line, e.value.element, e.value.attribute) == (3, element, attribute)


def test_option_iterations_beyond_int32_is_refused_at_load():
    with pytest.raises(MJCFError, match="too large") as e:
        mjx_lite.load_mjcf_string(W(G, '<option iterations="2147483648"/>'))
    assert (e.value.element, e.value.attribute) == ("option", "iterations")


@pytest.mark.parametrize("inner, words", [("<joint/>", "World body cannot have joints"),
                                          ("<frame><freejoint/></frame>", "World body cannot have joints"),
                                          ('<inertial pos="0 0 0" mass="1"/>', "World body cannot have inertia")])
def test_world_body_messages(inner, words):
    with pytest.raises(MJCFError, match=words):
        mjx_lite.load_mjcf_string(W(inner + G))


def test_empty_values_mean_unset():
    a = mjx_lite.load_mjcf_string(W('<body pos=""><joint axis=""/><geom size=".1" friction=" "/></body>'))
    b = mjx_lite.load_mjcf_string(W('<body><joint/><geom size=".1"/></body>'))
    for f in ("body_pos", "jnt_axis", "geom_friction"):
        np.testing.assert_array_equal(np.asarray(getattr(a, f)), np.asarray(getattr(b, f)), err_msg=f)


def test_short_keyframes_are_padded():
    m = mjx_lite.load_mjcf_string(CASES["key_short_qpos"])
    np.testing.assert_allclose(np.asarray(m.key_qpos)[0], [1, 0.5, 1, 0, 0, 0])
    np.testing.assert_allclose(np.asarray(m.key_qvel)[0], [2, 0, 0, 0, 0])


def test_discrete_integrator_is_unsupported():
    mujoco.MjModel.from_xml_string(W(G, '<option integrator="discrete"/>'))
    with pytest.raises(MJCFUnsupportedError, match="discrete"):
        mjx_lite.load_mjcf_string(W(G, '<option integrator="discrete"/>'))


def test_unsupported_features_have_one_error_type():
    with pytest.raises(MJCFUnsupportedError) as e:
        mjx_lite.load_mjcf_string(W('<body><freejoint align="true"/><geom size=".1"/></body>'))
    assert isinstance(e.value, MJCFError) and isinstance(e.value, NotImplementedError)
    assert e.value.attribute == "align" and e.value.line == 1


def test_float32_model_refuses_values_beyond_float32():
    """MuJoCo compiles in float64 and keeps size=1e300; a float32 Model would hold inf: refused at load."""
    xml = "<mujoco>\n<worldbody>\n" + '<body><joint/><geom size="1e300"/></body></worldbody></mujoco>'
    mujoco.MjModel.from_xml_string(xml)  # MuJoCo accepts it
    mjx_lite.load_mjcf_string(xml)  # so does a float64 Model
    with jax.enable_x64(False):
        with pytest.raises(MJCFError, match="float32") as e:
            mjx_lite.load_mjcf_string(xml)
        assert (e.value.line, e.value.element, e.value.attribute) == (3, "geom", "size")
        with pytest.raises(MJCFError, match="body_mass"):  # a compiled value: density * volume
            mjx_lite.load_mjcf_string(W('<body><joint/><geom size="1e12" density="1e5"/></body>'))
        m = mjx_lite.load_mjcf_string(W(BODY))
        assert np.asarray(m.body_mass).dtype == np.float32


# ----------------------------------------------------------------------------------------------------------
# XML security: no DTD, no entity expansion, no file access while parsing


class _OpenSpy:
    """Records the files Python opens while active (a process-wide audit hook cannot be removed, so it is
    installed once and switched by `active`)."""

    active = False
    paths: list[str] = []
    installed = False

    @classmethod
    def hook(cls, event, args):
        if cls.active and event == "open":
            cls.paths.append(str(args[0]))

    def __enter__(self):
        _OpenSpy.active = True

    def __exit__(self, *exc):
        _OpenSpy.active = False


@pytest.fixture
def open_spy():
    """Use as `with open_spy: ...`; afterwards open_spy.paths lists the files opened inside."""
    if not _OpenSpy.installed:
        sys.addaudithook(_OpenSpy.hook)
        _OpenSpy.installed = True
    _OpenSpy.paths = []
    yield _OpenSpy()
    _OpenSpy.active = False


def test_doctype_entities_never_read_local_files(tmp_path, open_spy):
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret 0.5")
    xml = (f'<!DOCTYPE mujoco [<!ENTITY s SYSTEM "{secret}"> <!ENTITY u SYSTEM "file://{secret}">]>\n'
           '<mujoco model="&s;">\n<worldbody>\n<geom name="&u;" size=".1">&s;</geom>\n'
           '<site name="&s;"/></worldbody></mujoco>')  # fmt: skip
    with open_spy:
        m = mjx_lite.load_mjcf_string(xml)
    opened = list(open_spy.paths)
    mjm = mujoco.MjModel.from_xml_string(xml)  # MuJoCo keeps the references as written, too
    assert not any("secret" in p for p in opened), opened
    assert m.names["geom"] == ("&u;",) and m.names["site"] == ("&s;",)
    assert mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, 0) == "&u;"
    for names in m.names.values():
        assert not any("top secret" in n for n in names)


def test_entity_in_a_number_is_a_format_error(tmp_path, open_spy):
    secret = tmp_path / "secret.txt"
    secret.write_text("0.5")
    xml = f'<!DOCTYPE m [<!ENTITY s SYSTEM "{secret}">]><mujoco><worldbody><geom size="&s;"/></worldbody></mujoco>'
    with open_spy, pytest.raises(MJCFError, match="not a number"):
        mjx_lite.load_mjcf_string(xml)
    assert not any("secret" in p for p in open_spy.paths)
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)


def test_reader_is_tinyxml2_like():
    """The reader's own rules, one each (the accept/reject decisions are checked against MuJoCo above)."""
    root = mjxml.parse(b'\xef\xbb\xbf <?xml version="1.0"?>\n<!-- -- -->\n<mujoco a="1 &amp; 2 &#65;&#x42; &x;">'
                       b'<b/>text<c d=\'e\'></c></mujoco>tail<more/>', "f")  # fmt: skip
    # an unknown entity: TinyXML2 skips the '&' and leaves the character already in its buffer (MuJoCo: same name)
    assert root.tag == "mujoco" and root.line == 3 and root.attrib["a"] == "1 & 2 AB  x;"
    assert [c.tag for c in root.children] == ["b", "c"] and root.children[1].attrib == {"d": "e"}
    for bad in (b"", b"  ", b"<a>", b"<a></b>", b"<a b=1/>", b'<a b="1" b="2"/>', b"<a><?x?></a>", b"<a/>text"):
        with pytest.raises(MJCFError, match="malformed XML"):
            mjxml.parse(bad, "f")
    assert mjxml.decode(b"<a/>\x00<b>") == "<a/>"
