"""MuJoCo plugins (`<extension><plugin>`, and `<plugin>` children of elements): a registry of the plugins that ship
with MuJoCo and that mjx_lite implements as built-in features under MuJoCo's names.

PLUGINS maps a MuJoCo plugin name to its handler (what the compiler needs to know about it: its kind, its
attribute names and defaults). A name that is not registered (a third-party plugin, or a MuJoCo plugin mjx_lite does
not implement) is refused at load time, naming it. Registered now: MuJoCo's SDF plugins (mujoco.sdf.torus, bowl,
bolt, nut, gear; `collision/sdf_plugins.py`).

Reading: `read_extension` turns `<extension>` into {instance name: PluginRef}; `read_ref` turns an element's
`<plugin plugin=... | instance=...>` child (with optional `<config key value>` children) into a PluginRef;
`resolve` gives the plugin name and the attribute values (defaults filled in, as the plugin's sdf_attribute).
"""

from __future__ import annotations

import dataclasses

from mjx_lite.collision import sdf_plugins
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError


@dataclasses.dataclass(frozen=True)
class Handler:
    """A plugin mjx_lite implements. kind: 'sdf' (a signed distance field for sdf geoms and their meshes);
    attributes/defaults: the plugin's attribute names and default values, in the plugin's order."""

    kind: str
    attributes: tuple[str, ...]
    defaults: tuple[float, ...]


PLUGINS: dict[str, Handler] = {
    name: Handler("sdf", names, defaults) for name, (names, defaults) in sdf_plugins.ATTRIBUTES.items()
}


@dataclasses.dataclass(frozen=True)
class PluginRef:
    """A reference to a plugin: by name with its own config, or by instance name. config: ((key, value), ...)."""

    plugin: str | None
    instance: str | None
    config: tuple[tuple[str, str], ...]
    file: str | None = None
    line: int | None = None


def _refuse(name: str, raw) -> MJCFUnsupportedError:
    return MJCFUnsupportedError(f"plugin '{name}' is not supported by mjx_lite (implemented: "
                                f"{', '.join(sorted(PLUGINS))})", raw.file, raw.line, "plugin", "plugin")  # fmt: skip


def _config(raw) -> tuple[tuple[str, str], ...]:
    out = []
    for c in raw.children:
        if c.tag != "config":
            raise MJCFError(f"unknown element (in <{raw.tag}>)", c.file, c.line, c.tag)
        for k in c.attrib:
            if k not in ("key", "value"):
                raise MJCFError(f"unrecognized attribute: '{k}'", c.file, c.line, "config", k)
        out.append((c.attrib.get("key", ""), c.attrib.get("value", "")))
    return tuple(out)


def read_ref(raw) -> PluginRef:
    """An element's `<plugin>` child (raw XML element) as a PluginRef; unknown plugin names are refused."""
    for k in raw.attrib:
        if k not in ("plugin", "instance"):
            raise MJCFError(f"unrecognized attribute: '{k}'", raw.file, raw.line, "plugin", k)
    name = raw.attrib.get("plugin") or None
    inst = raw.attrib.get("instance") or None
    if name is not None and name not in PLUGINS:
        raise _refuse(name, raw)
    return PluginRef(name, inst, _config(raw), raw.file, raw.line)


def read_extension(raw) -> dict[str, PluginRef]:
    """`<extension>` (raw XML element): {instance name: PluginRef} of its plugin instances."""
    out: dict[str, PluginRef] = {}
    for p in raw.children:
        if p.tag != "plugin":
            raise MJCFError("unknown element (in <extension>)", p.file, p.line, p.tag)
        for k in p.attrib:
            if k != "plugin":
                raise MJCFError(f"unrecognized attribute: '{k}'", p.file, p.line, "plugin", k)
        name = p.attrib.get("plugin", "")
        if name not in PLUGINS:
            raise _refuse(name, p)
        for inst in p.children:
            if inst.tag != "instance":
                raise MJCFError("unknown element (in <plugin>)", inst.file, inst.line, inst.tag)
            iname = inst.attrib.get("name", "")
            if iname in out:
                raise MJCFError(f"repeated plugin instance name '{iname}'", inst.file, inst.line, "instance", "name")
            out[iname] = PluginRef(name, iname, _config(inst), inst.file, inst.line)
    return out


def resolve(ref: PluginRef, instances: dict[str, PluginRef], file=None, line=None) -> tuple[str, tuple[float, ...]]:
    """(plugin name, attribute values) of a reference: MuJoCo's config strings read as numbers, defaults filled in
    for missing or empty ones; a config key the plugin does not have is an error."""
    if ref.instance is not None:
        if ref.instance not in instances:
            raise MJCFError(f"unknown plugin instance '{ref.instance}'", ref.file or file, ref.line or line,
                            "plugin", "instance")  # fmt: skip
        inst = instances[ref.instance]
        if ref.plugin is not None and ref.plugin != inst.plugin:
            raise MJCFError(f"plugin '{ref.plugin}' does not match the instance's '{inst.plugin}'", ref.file,
                            ref.line, "plugin", "plugin")  # fmt: skip
        ref = inst
    if ref.plugin is None:
        raise MJCFError("neither 'plugin' nor 'instance' is specified", ref.file or file, ref.line or line, "plugin")
    h = PLUGINS[ref.plugin]
    cfg = dict(ref.config)
    for k in cfg:
        if k not in h.attributes:
            raise MJCFError(f"unrecognized attribute 'plugin:{k}' for plugin '{ref.plugin}'", ref.file, ref.line,
                            "config", "key")  # fmt: skip
    vals = []
    for n, dflt in zip(h.attributes, h.defaults):
        v = cfg.get(n, "")
        if v.strip() == "":
            vals.append(float(dflt))
            continue
        try:
            vals.append(float(v.split()[0]))
        except ValueError:
            raise MJCFError(f"invalid attribute value for '{n}'", ref.file, ref.line, "config", "value") from None
    return ref.plugin, tuple(vals)
