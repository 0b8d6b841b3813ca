"""MuJoCo engine plugins (mjcf/plugins.py) vs MuJoCo 4.0: what it loads we load with the same compiled model, what it
refuses we refuse with its error, and the plugins it does not have (the removed elasticity plugins, third-party ones)
are refused naming them.

MuJoCo 4.0 ships no passive-force plugin (the elasticity plugins `cable`, `shell`, `solid`, `membrane` are gone, see
mjcf/plugins.REMOVED), so every body <plugin> is an error there, and so it is here."""

from __future__ import annotations

import mujoco
import pytest

from mjx_lite import load_mjcf, load_mjcf_string
from mjx_lite.mjcf import plugins
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests.oracle import compare_models

# a small chain of ball-jointed capsules: the body layout a cable plugin used (MuJoCo 3.x's composite type="cable")
_CHAIN = """<mujoco>
  {ext}
  <worldbody>
    <body name="B0" pos="0 0 1">
      <joint type="ball" damping=".01"/>
      <geom type="capsule" fromto="0 0 0 .1 0 0" size=".01"/>
      {use}
      <body name="B1" pos=".1 0 0">
        <joint type="ball" damping=".01"/>
        <geom type="capsule" fromto="0 0 0 .1 0 0" size=".01"/>
        <body name="B2" pos=".1 0 0">
          <joint type="ball" damping=".01"/>
          <geom type="capsule" fromto="0 0 0 .1 0 0" size=".01"/>
        </body>
      </body>
    </body>
  </worldbody>
</mujoco>"""


def _xml(ext: str = "", use: str = "") -> str:
    return _CHAIN.format(ext=ext, use=use)


def _cable(config: str = '<config key="twist" value="1e7"/><config key="bend" value="4e6"/>') -> str:
    return f'<extension><plugin plugin="mujoco.elasticity.cable"><instance name="c">{config}</instance></plugin>' \
           "</extension>"  # fmt: skip


# models MuJoCo loads: a declaration without instances does nothing there (nplugin 0)
LOADS = {
    "empty_extension": _xml("<extension/>"),
    "two_extensions": _xml('<extension/><extension><plugin plugin="mujoco.pid"/></extension>'),
    "shipped_declarations": _xml("<extension>" + "".join(f'<plugin plugin="{n}"/>' for n in plugins.SHIPPED)
                                 + '<plugin plugin="mujoco.pid"/></extension>'),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(LOADS))
def test_loads_as_mujoco(name):
    """What MuJoCo loads we load, and the compiled model is MuJoCo's (the declarations change nothing)."""
    xml = LOADS[name]
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert mjm.nplugin == 0
    errs = compare_models(load_mjcf_string(xml), mjm)
    assert not errs, errs
    # and the same as without any <extension>
    assert not compare_models(load_mjcf_string(_xml()), mjm)


# models MuJoCo 4.0 refuses because it has no such plugin: we refuse them naming the plugin (MJCFUnsupportedError:
# a third-party plugin loads in MuJoCo once its library is registered; the elasticity plugins loaded in MuJoCo 3.x)
NOT_IN_MUJOCO = {
    "cable_declared": (_xml(_cable()), "mujoco.elasticity.cable"),
    "cable_declared_and_used": (_xml(_cable(), '<plugin instance="c"/>'), "mujoco.elasticity.cable"),
    "cable_vmax": (_xml(_cable('<config key="vmax" value=".05"/>')), "mujoco.elasticity.cable"),
    "cable_no_instance": (_xml('<extension><plugin plugin="mujoco.elasticity.cable"/></extension>'),
                          "mujoco.elasticity.cable"),
    "shell": (_xml('<extension><plugin plugin="mujoco.elasticity.shell"/></extension>'), "mujoco.elasticity.shell"),
    "solid": (_xml('<extension><plugin plugin="mujoco.elasticity.solid"/></extension>'), "mujoco.elasticity.solid"),
    "membrane": (_xml('<extension><plugin plugin="mujoco.elasticity.membrane"/></extension>'),
                 "mujoco.elasticity.membrane"),
    "third_party": (_xml('<extension><plugin plugin="acme.spring"><instance name="s"/></plugin></extension>',
                         '<plugin instance="s"/>'), "acme.spring"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(NOT_IN_MUJOCO))
def test_plugins_mujoco_does_not_have_are_refused_by_name(name):
    xml, plugin = NOT_IN_MUJOCO[name]
    with pytest.raises(ValueError, match=f"plugin {plugin} not found"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFUnsupportedError, match=f"plugin '{plugin}'") as info:
        load_mjcf_string(xml)
    assert info.value.element == "plugin" and info.value.attribute == "plugin"
    if plugin in plugins.REMOVED:  # the message gives MuJoCo's migration
        assert "removed in MuJoCo" in str(info.value) and "flexcomp" in str(info.value)


def test_unused_instances_of_shipped_plugins():
    """Every plugin MuJoCo ships is built in (BUILTIN == SHIPPED): an unused touch_grid instance loads as in MuJoCo
    (which checks its configuration: so do we), an unused pid instance is MuJoCo's init error (no actuator), an SDF
    instance loads in both."""
    assert set(plugins.BUILTIN) == set(plugins.SHIPPED)
    xml = _xml('<extension><plugin plugin="mujoco.sensor.touch_grid"><instance name="t"><config key="nchannel" '
               'value="1"/><config key="size" value="4 4"/><config key="fov" value="30 30"/><config key="gamma" '
               'value="0"/></instance></plugin></extension>')  # fmt: skip
    assert mujoco.MjModel.from_xml_string(xml).nplugin == 1
    assert not compare_models(load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml))
    bad = xml.replace('key="fov" value="30 30"', 'key="fov" value="30 100"')
    with pytest.raises(ValueError, match="fov"):
        mujoco.MjModel.from_xml_string(bad)
    with pytest.raises(MJCFError, match="fov"):
        load_mjcf_string(bad)
    pid = _xml('<extension><plugin plugin="mujoco.pid"><instance name="p"/></plugin></extension>')
    with pytest.raises(ValueError, match="actuator not found"):
        mujoco.MjModel.from_xml_string(pid)
    with pytest.raises(MJCFError, match="actuator not found"):
        load_mjcf_string(pid)
    sdf = _xml('<extension><plugin plugin="mujoco.sdf.torus"><instance name="t"><config key="radius1" value=".3"/>'
               "</instance></plugin></extension>")  # fmt: skip
    assert mujoco.MjModel.from_xml_string(sdf).nplugin == 1
    load_mjcf_string(sdf)


_TORUS = '<extension><plugin plugin="mujoco.sdf.torus"><instance name="t"/></plugin></extension>'
# MuJoCo's own errors (its XML reader and compiler), with the part of its message we repeat and the attribute named
ERRORS = {
    "undeclared_instance": (_xml("", '<plugin instance="nope"/>'), "unrecognized name 'nope' for plugin instance",
                            "instance"),
    "undeclared_cable": (_xml("", '<plugin plugin="mujoco.elasticity.cable"/>'),
                         "unrecognized plugin 'mujoco.elasticity.cable'", "plugin"),
    "undeclared_third_party": (_xml("", '<plugin plugin="acme.x"/>'), "unrecognized plugin 'acme.x'", "plugin"),
    "neither": (_xml('<extension><plugin plugin="mujoco.pid"/></extension>', "<plugin/>"),
                "neither 'plugin' nor 'instance' is specified", None),
    "not_passive_by_name": (_xml('<extension><plugin plugin="mujoco.sdf.torus"/></extension>',
                                 '<plugin plugin="mujoco.sdf.torus"/>'),
                            "plugin 'mujoco.sdf.torus' does not support passive forces", "plugin"),
    "instance_without_name": (_xml('<extension><plugin plugin="mujoco.sdf.torus"><instance/></plugin></extension>'),
                              "required attribute missing", "name"),
    "config_without_value": (_xml('<extension><plugin plugin="mujoco.sdf.torus"><instance name="t">'
                                  '<config key="radius1"/></instance></plugin></extension>'),
                             "required attribute missing", "value"),
    "config_twice": (_xml('<extension><plugin plugin="mujoco.sdf.torus"><instance name="t"><config key="radius1" '
                          'value="1"/><config key="radius1" value="2"/></instance></plugin></extension>'),
                     "duplicate config key: radius1", "key"),
    "repeated_instance": (_xml('<extension><plugin plugin="mujoco.sdf.torus"><instance name="a"/><instance name="a"/>'
                               "</plugin></extension>"), "repeated name 'a' in plugin", "name"),
    "plugin_without_name": (_xml("<extension><plugin/></extension>"), "required attribute missing", "plugin"),
    "unknown_child": (_xml("<extension><foo/></extension>"), "unknown element", None),
    "unknown_attribute": (_xml('<extension><plugin plugin="mujoco.pid" foo="1"/></extension>'), "unknown attribute",
                          "foo"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_mujoco_errors(name):
    xml, what, attribute = ERRORS[name]
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=what) as info:
        load_mjcf_string(xml)
    assert info.value.attribute == attribute, str(info.value)


@pytest.mark.parametrize("where", ["world", "frame"])
def test_body_plugin_in_world_and_frame(where):
    """A <plugin> in the world body or a frame belongs to the enclosing body: the same checks."""
    use = '<plugin plugin="mujoco.sdf.torus"/>'
    body = {"world": use, "frame": f'<body><frame>{use}</frame><geom size=".1"/></body>'}[where]
    xml = f'<mujoco><extension><plugin plugin="mujoco.sdf.torus"/></extension><worldbody>{body}</worldbody></mujoco>'
    with pytest.raises(ValueError, match="does not support passive forces"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="does not support passive forces"):
        load_mjcf_string(xml)


@pytest.mark.parametrize("use", ['<plugin plugin="mujoco.sdf.torus"/>', '<plugin instance="nope"/>', "<plugin/>",
                                 '<plugin plugin="acme.x" foo="1"><config key="k" value="1"/></plugin>'])
def test_replicate_drops_plugin(use):
    """MuJoCo's <replicate> drops a <plugin> child without reading it: the model loads, as without it."""
    rep = f'<body><replicate count="2" offset=".1 0 0">{use}<geom size=".1"/></replicate><geom size=".1"/></body>'
    xml = f"<mujoco><worldbody>{rep}</worldbody></mujoco>"
    plain = xml.replace(use, "")
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert not compare_models(load_mjcf_string(xml), mjm)
    assert not compare_models(load_mjcf_string(plain), mjm)


def test_registry():
    """The registry holds no name twice, and every name MuJoCo 4.0 ships loads there (declared without instances)."""
    assert not set(plugins.SHIPPED) & set(plugins.REMOVED)
    assert set(plugins.BUILTIN) <= set(plugins.SHIPPED)
    for name in plugins.SHIPPED:
        mujoco.MjModel.from_xml_string(_xml(f'<extension><plugin plugin="{name}"/></extension>'))


_HINGE = '<worldbody><body><joint name="j"/><geom size=".1"/><site name="s"/></body></worldbody>'


def test_actuator_plugin_loads():
    """The actuator plugin MuJoCo ships (its PID controller, built in: tests/test_plugin_pid.py), used by instance and
    by name (an implicit instance): the same compiled model as MuJoCo's."""
    xml = ('<mujoco><extension><plugin plugin="mujoco.pid"><instance name="p"><config key="kp" value="1"/></instance>'
           f'</plugin></extension>{_HINGE}<actuator><plugin instance="p" joint="j"/></actuator></mujoco>')  # fmt: skip
    by_name = xml.replace('<plugin instance="p" joint="j"/>', '<plugin instance="p" joint="j"/><plugin '
                          'plugin="mujoco.pid" joint="j"/>')  # fmt: skip
    for x in (xml, by_name):
        assert not compare_models(load_mjcf_string(x), mujoco.MjModel.from_xml_string(x))


_USES = {
    "actuator_undeclared": ('<actuator><plugin plugin="mujoco.pid" joint="j"/></actuator>', "",
                            "unrecognized plugin 'mujoco.pid'", "plugin"),
    "actuator_undeclared_instance": ('<actuator><plugin instance="q" joint="j"/></actuator>', "",
                                     "unrecognized name 'q' for plugin instance", "instance"),
    "actuator_not_an_actuator": ('<actuator><plugin plugin="mujoco.sdf.torus" joint="j"/></actuator>',
                                 '<extension><plugin plugin="mujoco.sdf.torus"/></extension>',
                                 "plugin 'mujoco.sdf.torus' does not support actuators", "plugin"),
    "sensor_undeclared": ('<sensor><plugin plugin="mujoco.sensor.touch_grid"/></sensor>', "",
                          "unrecognized plugin 'mujoco.sensor.touch_grid'", "plugin"),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(_USES))
def test_actuator_and_sensor_plugin_errors(name):
    use, ext, what, attribute = _USES[name]
    xml = f"<mujoco>{ext}{_HINGE}{use}</mujoco>"
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=what) as info:
        load_mjcf_string(xml)
    assert not isinstance(info.value, MJCFUnsupportedError) and info.value.attribute == attribute


@pytest.mark.parametrize("plugin", ["mujoco.pid", "acme.x"])
def test_attached_model_with_extension(tmp_path, plugin):
    """An attached model's <extension> is read like the parent's: declarations of shipped plugins load (as MuJoCo,
    same model), a third-party plugin is refused by name (MuJoCo: not found)."""
    (tmp_path / "child.xml").write_text(f'<mujoco><extension><plugin plugin="{plugin}"/></extension><worldbody>'
                                        '<body name="b"><joint/><geom size=".1"/></body></worldbody></mujoco>')
    parent = tmp_path / "parent.xml"
    parent.write_text('<mujoco><asset><model name="c" file="child.xml"/></asset><worldbody><body name="p">'
                      '<attach model="c" body="b" prefix="c_"/></body></worldbody></mujoco>')  # fmt: skip
    if plugin in plugins.SHIPPED:
        mjm = mujoco.MjModel.from_xml_path(str(parent))
        assert not compare_models(load_mjcf(str(parent)), mjm)
    else:
        with pytest.raises(ValueError, match=f"plugin {plugin} not found"):
            mujoco.MjModel.from_xml_path(str(parent))
        with pytest.raises(MJCFUnsupportedError, match=f"plugin '{plugin}' is a third-party plugin"):
            load_mjcf(str(parent))
