"""MuJoCo engine plugins (<extension>): the registry of plugin names and MuJoCo's checks of their declarations and uses.

MJCF:  <extension><plugin plugin="NAME"><instance name="I"><config key="K" value="V"/>...</instance></plugin>
declares plugin NAME and its instances; a body (geom, mesh, actuator, sensor) uses one with a child
<plugin instance="I"/>, or with <plugin plugin="NAME"><config .../></plugin> (an instance of its own).

The registry (one line per plugin to add):
  SHIPPED   every plugin the `mujoco` 4.0 package loads (its libactuator, libsensor and libsdf_plugin libraries),
            name -> capability: "actuator", "sensor", "sdf" (none of them adds passive forces);
  BUILTIN   the plugins mjx_lite simulates, name -> capability: all of SHIPPED: the five SDF plugins (distance
            functions in collision/sdf_plugins.py, their marching-cubes meshes in mjcf/sdf_mesh.py), `mujoco.pid`
            (pipeline/plugin_pid.py) and `mujoco.sensor.touch_grid` (pipeline/plugin_touch_grid.py);
  ATTRIBUTES the configuration keys of the non-SDF BUILTIN plugins; SLOT MuJoCo's registry slot of each shipped
            plugin (mjModel.plugin);
  REMOVED   plugins MuJoCo no longer has (MuJoCo 4.0 refuses them: "plugin ... not found"), name -> reason and the
            migration MuJoCo's changelog gives. The elasticity plugins are all gone: `cable` (MuJoCo 4.0, superseded by
            1-D <flexcomp> with <elasticity>), `solid` and `membrane` (3.2.4, moved into the engine's flex
            elasticity), `shell` (3.3.3, <flexcomp> with elastic2d).
Any other name is a third-party plugin (MuJoCo loads it only when its library is registered): refused, naming it.

What the loader does (as MuJoCo 4.0's XML reader and compiler, tests/test_mjcf_plugins.py, test_plugin_pid.py,
test_plugin_touch_grid.py):
  - `declarations`: the <extension> sections. A REMOVED or third-party name raises MJCFUnsupportedError naming it.
    A declaration without instances has no effect in MuJoCo (nplugin stays 0) and loads. MuJoCo's own errors
    (MJCFError): a repeated instance name, a repeated config key, missing name/key/value. Every declared instance
    is a MuJoCo plugin instance (used or not: `explicit_instances`; compile._compile_plugins numbers them).
  - `body_use`: a <plugin> child of a body (or worldbody, frame; MuJoCo's <replicate> drops it unread) names a
    passive-force plugin: an undeclared instance or plugin name, neither attribute, or a plugin without passive
    forces are MuJoCo's compile errors (every body plugin is one in MuJoCo 4.0, which ships no passive plugin).
  - `element_config`: a <plugin> in <actuator> or <sensor>: MuJoCo's errors, else (name, instance, config) of a
    BUILTIN plugin of that kind (config children beside an instance are ignored, as MuJoCo does).
  - `pid_parameters`, `touch_grid_parameters`: the configuration as each plugin reads it, with its init errors (a
    load error in MuJoCo).
  - `sdf_use`: a <plugin> child of a <geom> or <mesh> names an SDF plugin: MuJoCo's errors for an undeclared
    instance or plugin, neither attribute, a plugin that is not an SDF, or a config key the plugin does not have;
    else (plugin name, attribute values) with the plugin's defaults filled in.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np

from mjx_lite.collision import sdf_plugins
from mjx_lite.mjcf.spec import Attr, Element, MJCFError, MJCFUnsupportedError

SHIPPED: dict[str, str] = {
    "mujoco.pid": "actuator",
    "mujoco.sensor.touch_grid": "sensor",
    "mujoco.sdf.bolt": "sdf",
    "mujoco.sdf.bowl": "sdf",
    "mujoco.sdf.gear": "sdf",
    "mujoco.sdf.nut": "sdf",
    "mujoco.sdf.torus": "sdf",
}
BUILTIN: dict[str, str] = {**{name: "sdf" for name in sdf_plugins.ATTRIBUTES}, "mujoco.pid": "actuator",
                           "mujoco.sensor.touch_grid": "sensor"}  # fmt: skip
# the configuration keys of the non-SDF BUILTIN plugins (MuJoCo's plugin attributes, in its order)
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "mujoco.pid": ("kp", "ki", "kd", "imax", "slewmax"),
    "mujoco.sensor.touch_grid": ("nchannel", "size", "fov", "gamma"),
}
# MuJoCo's plugin slot of each shipped plugin (mjModel.plugin): the order in which the `mujoco` 4.0 Python package
# registers its plugin libraries (probed: actuator, sensor, then the SDF library's plugins alphabetically)
SLOT: dict[str, int] = {"mujoco.pid": 0, "mujoco.sensor.touch_grid": 1, "mujoco.sdf.bolt": 2, "mujoco.sdf.bowl": 3,
                        "mujoco.sdf.gear": 4, "mujoco.sdf.nut": 5, "mujoco.sdf.torus": 6}  # fmt: skip
_CABLE = ("removed in MuJoCo 4.0; its migration: <flexcomp dim='1' type='grid'> with <elasticity young shear> for bend "
          "and twist, <edge equality='true'/> for inextensible edges")  # fmt: skip
REMOVED: dict[str, str] = {
    "mujoco.elasticity.cable": _CABLE,
    "mujoco.elasticity.shell": "removed in MuJoCo 3.3.3; its migration: <flexcomp dim='2'> with <elasticity "
    "elastic2d='bend'>",
    "mujoco.elasticity.solid": "removed in MuJoCo 3.2.4; its migration: <flexcomp dim='3'> with <elasticity young "
    "poisson>",
    "mujoco.elasticity.membrane": "removed in MuJoCo 3.2.4; its migration: <flexcomp dim='2'> with <elasticity "
    "young poisson elastic2d='stretch'>",
}

_S = Attr("string", 1, None)
# the schema of the plugin elements (merged into schema.SCHEMA); the element keys MuJoCo's schema lists
SCHEMA: dict[str, dict[str, Attr]] = {
    "extension": {},
    "extension/plugin": {"plugin": _S},
    "instance": {"name": _S},
    "config": {"key": _S, "value": _S},
    **{
        p + "/plugin": {"plugin": _S, "instance": _S}
        for p in ("worldbody", "body", "frame", "replicate", "geom", "mesh")
    },
}
REQUIRED: dict[str, tuple[str, ...]] = {"extension/plugin": ("plugin",), "instance": ("name",),
                                        "config": ("key", "value")}  # fmt: skip


def _err(raw, msg: str, attr: str | None = None) -> MJCFError:
    return MJCFError(msg, raw.file, raw.line, raw.tag, attr)


def _refuse(raw, msg: str, attr: str | None = None) -> MJCFUnsupportedError:
    return MJCFUnsupportedError(msg, raw.file, raw.line, raw.tag, attr)


def refusal(name: str) -> str | None:
    """Why mjx_lite refuses plugin `name` (None for a BUILTIN one)."""
    if name in BUILTIN:
        return None
    if name in REMOVED:
        return f"plugin '{name}' is not supported: MuJoCo 4.0 refuses it too ({REMOVED[name]})"
    if name in SHIPPED:
        return f"plugin '{name}' (MuJoCo's {SHIPPED[name]} plugin) is not supported by mjx_lite"
    return (f"plugin '{name}' is a third-party plugin (MuJoCo 4.0 ships {', '.join(sorted(SHIPPED))}) and is not "
            "supported by mjx_lite")  # fmt: skip


def _config(raw, written: Callable) -> dict[str, str]:
    """The <config key value> children of `raw` as {key: value} (MuJoCo: "duplicate config key")."""
    out: dict[str, str] = {}
    for c in raw.children:
        if c.tag != "config":
            raise _err(c, f"unknown element (in <{raw.tag}>)")
        if c.children:
            raise _err(c.children[0], "unknown element (in <config>)")
        w = written(c, "config")
        if w["key"] in out:
            raise _err(c, f"duplicate config key: {w['key']}", "key")
        out[w["key"]] = w["value"]
    return out


def declarations(raws: list, written: Callable) -> Element:
    """The merged <extension> sections `raws` (parse._Raw) -> Element("extension") whose children are
    Element("plugin", {"plugin": name}) with Element("instance", {"name": ..., "config": {key: value}}) children.

    written(raw, key) -> the typed attributes of raw (checked against SCHEMA, REQUIRED)."""
    first = raws[0] if raws else None
    out = Element("extension", {}, [], getattr(first, "file", None), getattr(first, "line", None), set())
    names: set[str] = set()
    for sec in raws:
        written(sec, "extension")
        for p in sec.children:
            if p.tag != "plugin":
                raise _err(p, "unknown element (in <extension>)")
            name = written(p, "extension/plugin")["plugin"]
            if name not in SHIPPED and name not in BUILTIN:  # (MuJoCo: "plugin ... not found")
                raise _refuse(p, refusal(name), "plugin")
            decl = Element("plugin", {"plugin": name}, [], p.file, p.line, {"plugin"})
            for i in p.children:
                if i.tag != "instance":
                    raise _err(i, "unknown element (in <plugin>)")
                w = written(i, "instance")
                if w["name"] in names:
                    raise _err(i, f"repeated name '{w['name']}' in plugin", "name")
                names.add(w["name"])
                attrs = {"name": w["name"], "config": _config(i, written)}
                decl.children.append(Element("instance", attrs, [], i.file, i.line, set(attrs)))
            if decl.children and name not in BUILTIN:  # (without instances a declaration does nothing in MuJoCo)
                raise _refuse(p, refusal(name), "plugin")
            out.children.append(decl)
    return out


def find(extension: Element | None, *, instance: str | None = None, plugin: str | None = None) -> str | None:
    """The plugin name of a declared `instance`, or `plugin` when some <extension> declares it; None otherwise."""
    for decl in [] if extension is None else extension.children:
        if instance is not None and any(i.attrs["name"] == instance for i in decl.children):
            return decl.attrs["plugin"]
        if instance is None and decl.attrs["plugin"] == plugin:
            return plugin
    return None


def body_use(raw, key: str, body: Element, extension: Element | None, written: Callable) -> Element:
    """A <plugin> child `raw` (parse._Raw) of a <`key`> (body, worldbody, frame or replicate) in `body` (the
    Element of the body or worldbody it belongs to) -> Element("plugin", {"plugin": name, "instance": name or None,
    "config": {...}}) for a BUILTIN passive plugin.

    Raises MuJoCo 4.0's compile errors for an unknown instance or plugin, neither attribute, or a plugin without
    passive forces (MJCFError), and MJCFUnsupportedError for a plugin mjx_lite does not build in."""
    w = written(raw, key + "/plugin")
    config = _config(raw, written)
    inst, name = w.get("instance"), w.get("plugin")
    where = f"body '{body.attrs.get('name') or ''}'" if body.tag == "body" else "the world body"
    if inst is not None:
        name = find(extension, instance=inst)
        if name is None:
            raise _err(raw, f"unrecognized name '{inst}' for plugin instance ({where})", "instance")
    elif name is not None:
        if find(extension, plugin=name) is None:
            why = f"; MuJoCo 4.0 has no such plugin: {REMOVED[name]}" if name in REMOVED else ""
            raise _err(raw, f"unrecognized plugin '{name}' ({where}: no <extension> declares it{why})", "plugin")
    else:
        raise _err(raw, f"neither 'plugin' nor 'instance' is specified for {where}")
    capability = BUILTIN.get(name, SHIPPED.get(name))
    if capability is not None and capability != "passive":
        raise _err(raw, f"plugin '{name}' does not support passive forces ({where})",
                   "instance" if inst is not None else "plugin")  # fmt: skip
    if name not in BUILTIN:  # (declarations refused it already)
        raise _refuse(raw, refusal(name), "plugin")
    attrs = {"plugin": name, "instance": inst, "config": config}
    return Element("plugin", attrs, [], raw.file, raw.line, set(attrs))


def _declared(raw, inst, name, parent: str, extension: Element | None, where: str):
    """(plugin name, None) of a <plugin> use naming instance `inst` or plugin `name`, or (None, MuJoCo's error) for an
    undeclared instance or plugin or neither given (`where` ends that last message)."""
    if inst is not None:
        name = find(extension, instance=inst)
        if name is None:
            return None, _err(raw, f"unrecognized name '{inst}' for plugin instance (in <{parent}>)", "instance")
    elif name is not None:
        if find(extension, plugin=name) is None:
            return None, _err(raw, f"unrecognized plugin '{name}' (in <{parent}>: no <extension> declares it)",
                              "plugin")  # fmt: skip
    else:
        return None, _err(raw, f"neither 'plugin' nor 'instance' is specified {where}")
    return name, None


def _number(raw, key: str, text: str) -> float:
    try:
        return float(text.split()[0])
    except ValueError:
        raise _err(raw, f"invalid value '{text}' for attribute 'plugin:{key}'", "value") from None


def sdf_use(raw, parent: str, extension: Element | None, written: Callable) -> tuple[str, tuple[float, ...]]:
    """A <plugin> child `raw` (parse._Raw) of a <geom> or <mesh> (`parent`) -> (plugin name, attribute values in
    the plugin's order, sdf_plugins.ATTRIBUTES, its defaults where a key is missing or empty).

    The configuration is the instance's (<plugin instance>) or the element's own <config> children (<plugin
    plugin>). Raises MuJoCo 4.0's errors (MJCFError) for an undeclared instance or plugin, neither attribute, a
    plugin that is not an SDF, or a config key the plugin does not have."""
    w = written(raw, parent + "/plugin")
    config = _config(raw, written)
    inst, name = w.get("instance"), w.get("plugin")
    attr = "instance" if inst is not None else "plugin"
    name, err = _declared(raw, inst, name, parent, extension, f"for {parent}")
    if err is not None:
        raise err
    if inst is not None:
        # the instance among every declaration of its plugin (a model may declare one plugin more than once)
        config = next(i.attrs["config"] for d in extension.children if d.attrs["plugin"] == name
                      for i in d.children if i.attrs["name"] == inst)  # fmt: skip
        if w.get("plugin") not in (None, name):
            raise _err(raw, f"plugin '{w['plugin']}' does not match instance '{inst}' of plugin '{name}'", "plugin")
    capability = BUILTIN.get(name, SHIPPED.get(name))
    if capability is not None and capability != "sdf":
        raise _err(raw, f"plugin '{name}' does not support sign distance fields", attr)
    if name not in BUILTIN:  # (declarations refused it already)
        raise _refuse(raw, refusal(name), attr)
    keys, defaults = sdf_plugins.ATTRIBUTES[name]
    for k in config:
        if k not in keys:
            raise _err(raw, f"unrecognized attribute 'plugin:{k}' for plugin {name}", attr)
    values = tuple(
        _number(raw, k, config[k]) if config.get(k, "").strip() else float(d) for k, d in zip(keys, defaults)
    )
    return name, values


def element_config(raw, parent: str, extension: Element | None, written: Callable) -> dict:
    """A <plugin> element `raw` (parse._Raw) in <actuator> or <sensor> (`parent`) -> {"plugin": name, "instance":
    instance name or None (an instance of its own, MuJoCo's implicit instance), "config": {key: value}}.

    Raises MuJoCo 4.0's errors (MJCFError) for an undeclared instance or plugin, neither attribute, a plugin of
    another kind or a config key the plugin does not have; MJCFUnsupportedError for a
    plugin mjx_lite does not build in."""
    w = written(raw, parent + "/plugin")
    config = _config(raw, written)
    inst = w.get("instance")
    attr = "instance" if inst is not None else "plugin"
    name, err = _declared(raw, inst, w.get("plugin"), parent, extension, f"(in <{parent}>)")
    if err is not None:
        raise err
    if inst is not None:  # (config children beside an instance: MuJoCo 4.0 reads and ignores them)
        config = instance_config(extension, inst)
        if w.get("plugin") not in (None, name):
            raise _err(raw, f"plugin '{w['plugin']}' does not match instance '{inst}' of plugin '{name}'", "plugin")
    capability = BUILTIN.get(name, SHIPPED.get(name))
    if capability is not None and capability != parent:
        raise _err(raw, f"plugin '{name}' does not support {parent}s", attr)
    if name not in BUILTIN:
        raise _refuse(raw, refusal(name) or f"plugin '{name}' in <{parent}> is not supported by mjx_lite", attr)
    for k in config:
        if k not in ATTRIBUTES[name]:
            raise _err(raw, f"unrecognized attribute 'plugin:{k}' for plugin {name}", attr)
    return {"plugin": name, "instance": inst, "config": config}


def instance_config(extension: Element, inst: str) -> dict[str, str]:
    """The {key: value} configuration of declared instance `inst`."""
    return next(i.attrs["config"] for d in extension.children for i in d.children if i.attrs["name"] == inst)


def explicit_instances(extension: Element | None) -> list[tuple[str, str, dict]]:
    """(plugin name, instance name, config) of every declared instance, in declaration order: MuJoCo's first plugin
    instances (used or not); the implicit ones (a <plugin plugin=...> element with its own config) follow, those of
    meshes, then actuators, sensors and geoms (probed on MuJoCo 4.0)."""
    if extension is None:
        return []
    return [(d.attrs["plugin"], i.attrs["name"], i.attrs["config"]) for d in extension.children for i in d.children]


def _optional(config: dict, key: str) -> float | None:
    """A config value as MuJoCo's pid reads it (strtod; None when missing or empty)."""
    text = config.get(key, "")
    return None if text == "" else _strtod(text)[0]


def pid_parameters(el, name: str, config: dict) -> tuple[np.ndarray, bool, bool]:
    """MuJoCo's pid plugin configuration -> ([kp, ki, kd, integral bound imax / ki (inf without imax), slewmax (0
    without)], whether it has an integral state (ki != 0), whether it has a slew state (slewmax given)).

    MuJoCo's init errors (a load error in MuJoCo): negative imax, negative slewmax."""
    kp, ki, kd = (_optional(config, k) or 0.0 for k in ("kp", "ki", "kd"))
    imax, slew = _optional(config, "imax"), _optional(config, "slewmax")
    bound = np.inf
    if imax is not None and ki:
        bound = imax / ki
        if bound < 0:
            raise MJCFError(f"plugin {name}: negative imax (MuJoCo: plugin->init failed)", el.file, el.line, el.tag)
    if slew is not None and slew < 0:
        raise MJCFError(f"plugin {name}: slewmax must be non-negative (MuJoCo: plugin->init failed)", el.file,
                        el.line, el.tag)  # fmt: skip
    return np.array([kp, ki, kd, bound, slew or 0.0]), bool(ki), slew is not None


_STRTOD = re.compile(r"[+-]?(\d+\.?\d*([eE][+-]?\d+)?|\.\d+([eE][+-]?\d+)?|inf(inity)?|nan)", re.IGNORECASE)


def _strtod(text: str) -> tuple[float, bool]:
    """C's strtod of `text` after leading blanks: (value, whether it read the whole text); (0, ...) when it reads
    nothing."""
    t = text.lstrip()
    mt = _STRTOD.match(t)
    if mt is None:
        return 0.0, t == ""
    return float(mt.group(0)), mt.end() == len(t)


def _numbers(text: str) -> list[float]:
    """MuJoCo's touch_grid ReadVector: the text split at every single space, each item read by strtod."""
    return [_strtod(item)[0] for item in text.split(" ")] if text != "" else []


def touch_grid_parameters(el, name: str, config: dict) -> tuple[int, int, int, float, float, float]:
    """MuJoCo's touch_grid configuration -> (nchannel, size x, size y, fov x, fov y (degrees), gamma), with MuJoCo's
    defaults (nchannel 1, gamma 0) and its init errors (a load error in MuJoCo)."""

    def fail(msg: str):
        return MJCFError(f"plugin {name}: {msg} (MuJoCo: plugin->init failed)", el.file, el.line, el.tag)

    gamma_text, nch_text = config.get("gamma", ""), config.get("nchannel", "")
    if not all(_strtod("".join(t.split()))[1] for t in (gamma_text, nch_text)):
        raise fail("Invalid or missing parameters in touch_grid sensor plugin")
    nchannel = int(_strtod(nch_text)[0]) or 1
    if not 1 <= nchannel <= 6:
        raise fail("nchannel must be between 1 and 6")
    size = [int(v) for v in _numbers(config.get("size", ""))]
    if len(size) != 2:
        raise fail("Both horizontal and vertical resolutions must be specified")
    if size[0] <= 0 or size[1] <= 0:
        raise fail("Horizontal and vertical resolutions must be positive")
    fov = _numbers(config.get("fov", ""))
    if len(fov) != 2:
        raise fail("Both horizontal and vertical fields of view must be specified")
    if not 0 < fov[0] <= 180:
        raise fail("`fov[0]` must be a float between (0, 180] degrees")
    if not 0 < fov[1] <= 90:
        raise fail("`fov[1]` must be a float between (0, 90] degrees")
    gamma = _strtod(gamma_text)[0]
    if not 0 <= gamma <= 1:
        raise fail("`gamma` must be a nonnegative float between [0, 1]")
    return nchannel, size[0], size[1], float(fov[0]), float(fov[1]), float(gamma)
