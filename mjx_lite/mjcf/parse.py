"""MJCF XML -> spec tree (`spec.Element`): includes, default classes, orientations, frames, typed values.

Public API:
  parse_file(path, assets=None) -> Element                      root <mujoco>
  parse_string(xml, assets=None, base_dir=None) -> Element

The tree handed to the compiler (see `spec.py`):
  root <mujoco> whose children are the top-level sections, each present exactly once, merged in document order
  when the XML has several (includes often add another <worldbody>/<asset>/...): compiler (with at most one
  <lengthrange> child), option (with exactly one <flag> child), size, statistic, visual, default, asset,
  worldbody, contact, equality, tendon, actuator, sensor, keyframe, custom.  compiler/option/size/statistic/
  worldbody always exist (with built-in defaults when absent from the XML); the others only when written.
  - <include> elements are replaced by the children of the included file's <mujoco>.
  - <frame> elements are gone: their pose (and childclass) is folded into their children (pos, quat, fromto,
    joint axis, light dir), which become children of the enclosing body (or worldbody).
  - Orientation alternatives (axisangle, euler, xyaxes, zaxis) are converted to a unit `quat` (marked explicit);
    the alternative attributes are left None.  Angles of joint ranges etc. are NOT converted.
  - Default classes are applied (except for actuators, see `spec.Element.defaults`); `explicit` lists what the
    XML element or one of its classes wrote.  The <default> section is kept as written (typed, no inheritance)
    for reference.
  - <replicate> is expanded (copies posed like nested frames, names suffixed as MuJoCo does).
  - Skins (<asset><skin>, visual only) and <visual>/<custom> are kept aside for reference; the compiler ignores them.
  - Values are typed per `schema.py`. Default arrays (built-in or from a class) are shared, read-only numpy
    arrays: copy before modifying in place.
"""

from __future__ import annotations

import math
import os

import numpy as np
from lxml import etree

from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.inertia import quat_mul
from mjx_lite.mjcf.spec import Attr, Element, MJCFError

# ---------------------------------------------------------------------------------------------------------
# structure

_NI = "not supported by mjx_lite"
_BODY_CHILDREN = {"inertial", "joint", "freejoint", "geom", "site", "camera", "light", "body", "frame", "replicate"}
_BODY_UNSUPPORTED = {"plugin", "composite", "flexcomp", "attach", "skin", "flex"}
CHILDREN: dict[str, set[str]] = {
    "mujoco": {"compiler", "option", "size", "statistic", "visual", "default", "asset", "worldbody", "contact",
               "equality", "tendon", "actuator", "sensor", "keyframe", "custom"},
    "compiler": {"lengthrange"},
    "option": {"flag"},
    "visual": set(sc.VISUAL_CHILDREN),
    "default": set(sc.DEFAULT_CHILDREN) | {"default"},
    "worldbody": _BODY_CHILDREN - {"inertial", "joint", "freejoint"},
    "body": _BODY_CHILDREN,
    "frame": _BODY_CHILDREN - {"inertial"},
    "replicate": _BODY_CHILDREN - {"inertial"},
    "asset": {"mesh", "hfield", "texture", "material", "skin"},
    "material": {"layer"},
    "skin": {"bone"},
    "contact": {"pair", "exclude"},
    "equality": {"connect", "weld", "joint", "tendon"},
    "tendon": {"spatial", "fixed"},
    "spatial": {"site", "geom", "pulley"},
    "fixed": {"joint"},
    "actuator": set(sc.ACTUATOR_TAGS),
    "sensor": set(sc.SENSOR_TAGS),
    "keyframe": {"key"},
    "custom": {"numeric", "text", "tuple"},
    "tuple": {"element"},
}  # fmt: skip
UNSUPPORTED: dict[str, set[str]] = {
    "mujoco": {"extension", "deformable"},
    "worldbody": _BODY_UNSUPPORTED,
    "body": _BODY_UNSUPPORTED,
    "frame": _BODY_UNSUPPORTED,
    "replicate": _BODY_UNSUPPORTED,
    "asset": {"model"},
    "mesh": {"plugin"},
    "geom": {"plugin"},
    "equality": {"flex", "flexstrain"},
    "actuator": {"orientation", "pid", "dcmotor", "plugin"},
    "sensor": {"tactile", "user", "plugin"},
}
ORIENTED = {"body", "frame", "inertial", "geom", "site", "camera"}
SECTION_ORDER = ("compiler", "option", "size", "statistic", "visual", "default", "asset", "worldbody", "contact",
                 "equality", "tendon", "actuator", "sensor", "keyframe", "custom")  # fmt: skip
ALWAYS = ("compiler", "option", "size", "statistic", "worldbody")


class _Raw:
    """An XML element after include expansion (plain Python, cheaper than lxml for the later passes)."""

    __slots__ = ("tag", "attrib", "children", "file", "line")

    def __init__(self, tag, attrib, children, file, line):
        self.tag, self.attrib, self.children, self.file, self.line = tag, attrib, children, file, line


# ---------------------------------------------------------------------------------------------------------
# loading and includes


def _read_xml(data: bytes, file: str) -> etree._Element:
    # a fresh parser per document: lxml parsers must not be shared between threads
    parser = etree.XMLParser(remove_comments=True, remove_pis=True, resolve_entities=False, huge_tree=True)
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as e:
        line = e.lineno if e.lineno is not None else (e.position[0] if e.position else None)
        raise MJCFError(f"malformed XML: {e.msg}", file, line) from None
    return root


class _Loader:
    def __init__(self, assets: dict[str, bytes] | None, top_dir: str | None):
        self.assets = assets or {}
        self.top_dir = top_dir
        self.stack: list[str] = []

    def load(self, data: bytes, file: str, directory: str | None) -> _Raw:
        root = _read_xml(data, file)
        if root.tag != "mujoco":
            raise MJCFError("top-level element must be <mujoco>", file, root.sourceline, str(root.tag))
        return self._convert(root, file, directory)

    def _convert(self, el, file, directory) -> _Raw:
        kids = []
        for c in el:
            tag = c.tag
            if not isinstance(tag, str):  # comments, entities
                continue
            if tag == "include":
                kids.extend(self._include(c, file, directory))
            else:
                kids.append(self._convert(c, file, directory))
        return _Raw(el.tag, dict(el.attrib), kids, file, el.sourceline)

    def _include(self, el, file, directory) -> list[_Raw]:
        line = el.sourceline
        extra = set(el.attrib) - {"file"}
        if extra:
            raise MJCFError("unknown attribute", file, line, "include", sorted(extra)[0])
        name = el.get("file")
        if not name:
            raise MJCFError("missing file name", file, line, "include", "file")
        if len(el):
            raise MJCFError("<include> cannot have children", file, line, "include")
        data, path, newdir = None, name, directory
        if name in self.assets:
            data = self.assets[name]
        else:
            candidates = [name] if os.path.isabs(name) else []
            for d in (directory, self.top_dir):
                if d is not None and not os.path.isabs(name):
                    candidates.append(os.path.join(d, name))
            for p in candidates:
                if os.path.isfile(p):
                    path, newdir = p, os.path.dirname(os.path.abspath(p))
                    with open(p, "rb") as f:
                        data = f.read()
                    break
            else:
                base = os.path.basename(name)
                if base in self.assets:
                    data = self.assets[base]
        if data is None:
            raise MJCFError(f"included file '{name}' not found", file, line, "include", "file")
        if isinstance(data, str):
            data = data.encode()
        key = os.path.abspath(path) if newdir is not directory else path
        if key in self.stack:
            raise MJCFError(f"recursive include of '{name}'", file, line, "include", "file")
        self.stack.append(key)
        try:
            sub = self.load(data, path, newdir)
        finally:
            self.stack.pop()
        return sub.children


# ---------------------------------------------------------------------------------------------------------
# typed values


def _bad(msg, raw, attr):
    return MJCFError(msg, raw.file, raw.line, raw.tag, attr)


def _convert(text: str, a: Attr, raw: _Raw, name: str, inherited=None, pad: bool = True):
    """Parse one attribute's text per its Attr; `inherited` (else the built-in default) fills the tail of
    non-exact vectors when `pad`."""
    kind = a.kind
    if kind == "string":
        return text
    if kind == "keyword":
        if text not in a.keywords:
            raise _bad(f"invalid keyword '{text}' (expected one of {', '.join(a.keywords)})", raw, name)
        return text
    if kind == "bool":
        if text == "true":
            return True
        if text == "false":
            return False
        raise _bad(f"invalid keyword '{text}' (expected true or false)", raw, name)
    if kind == "auto_bool":
        if text in ("true", "false", "auto"):
            return text
        raise _bad(f"invalid keyword '{text}' (expected false, true or auto)", raw, name)
    parts = text.split()
    try:
        if kind == "real":
            vals = [float(p) for p in parts]
        else:
            vals = [int(p) for p in parts]
    except ValueError:
        what = "a number" if kind == "real" else "an integer"
        raise _bad(f"'{text}' is not {what}", raw, name) from None
    n = len(vals)
    count = a.count
    if count == 1:
        if n != 1:
            raise _bad(f"expected 1 value, got {n}", raw, name)
        return vals[0]
    dtype = np.float64 if kind == "real" else np.int64
    if count == -1:
        return np.array(vals, dtype=dtype)
    if isinstance(count, tuple):
        lo, hi = count
        if n < lo or n > hi:
            raise _bad(f"expected {lo} to {hi} values, got {n}", raw, name)
        if n < hi and pad:
            if name == "springlength" and n == 1:  # MuJoCo: one value means both
                return np.array(vals * 2, dtype=dtype)
            base = inherited if inherited is not None else a.default
            if base is not None and len(base) == hi:
                out = np.array(base, dtype=dtype)
                out[:n] = vals
                return out
        return np.array(vals, dtype=dtype)
    if n != count:
        raise _bad(f"expected {count} values, got {n}", raw, name)
    return np.array(vals, dtype=dtype)


def _written(raw: _Raw, key: str, inherited: dict | None = None, required: bool = True, pad: bool = True) -> dict:
    """Typed attributes written on `raw` (checked against the schema of `key`)."""
    schema = sc.SCHEMA[key]
    out = {}
    for name, text in raw.attrib.items():
        a = schema.get(name)
        if a is None:
            if name.startswith("{"):  # namespaced (xml:base, ...)
                continue
            raise _bad("unknown attribute", raw, name)
        out[name] = _convert(text, a, raw, name, None if inherited is None else inherited.get(name), pad)
        if key in _WORD_KEYS:
            words = sc.WORDS.get((key, name))
            if words is not None:
                for wd in text.split():
                    if wd not in words:
                        raise _bad(f"invalid keyword '{wd}' (expected words of {', '.join(words)})", raw, name)
    if required and key in _CHECKED_KEYS:
        for name in sc.REQUIRED.get(key, ()):
            if name not in out:
                raise _bad("required attribute missing", raw, name)
        for table in (sc.ONE_OF, sc.ONE_OF_2):
            groups = table.get(key)
            if groups and not any(all(n in out for n in g) for g in groups):
                alts = " or ".join("(" + ", ".join(g) + ")" for g in groups)
                raise _bad(f"one of {alts} must be specified", raw, groups[0][0])
    return out


# ---------------------------------------------------------------------------------------------------------
# rotations (host numpy; w, x, y, z)


def _qrot(q, v):
    """Rotate vector v by unit quaternion q."""
    w, x, y, z = q
    u = np.array([x, y, z])
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def _mat2quat(m):
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = [0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s]
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s]
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s]
    q = np.array(q)
    if q[0] < 0:
        q = -q
    return q


_EPS = 1e-10


def _normalize(v, what, raw, attr):
    n = float(np.linalg.norm(v))
    if n < _EPS:
        raise _bad(f"zero-length {what}", raw, attr)
    return np.asarray(v, dtype=np.float64) / n


def orientation_to_quat(kind: str, v, degree: bool, eulerseq: str, raw: _Raw) -> np.ndarray:
    """Unit quaternion of one MJCF orientation specifier (quat | axisangle | euler | xyaxes | zaxis)."""
    scale = math.pi / 180.0 if degree else 1.0
    if kind == "quat":
        return _normalize(v, "quaternion", raw, kind)
    if kind == "axisangle":
        axis = _normalize(v[:3], "axis", raw, kind)
        half = 0.5 * v[3] * scale
        return np.concatenate([[math.cos(half)], math.sin(half) * axis])
    if kind == "euler":
        q = np.array([1.0, 0.0, 0.0, 0.0])
        for i, ch in enumerate(eulerseq):
            half = 0.5 * v[i] * scale
            r = np.zeros(4)
            r[0] = math.cos(half)
            r[1 + "xyz".index(ch.lower())] = math.sin(half)
            q = quat_mul(q, r) if ch.islower() else quat_mul(r, q)
        return q / np.linalg.norm(q)
    if kind == "xyaxes":
        x = _normalize(v[:3], "x axis", raw, kind)
        y = np.asarray(v[3:6], dtype=np.float64)
        y = _normalize(y - x * np.dot(x, y), "y axis (orthogonalised)", raw, kind)
        z = np.cross(x, y)
        return _mat2quat(np.stack([x, y, z], axis=1))
    if kind == "zaxis":
        z = _normalize(v, "z axis", raw, kind)
        axis = np.array([-z[1], z[0], 0.0])  # cross((0,0,1), z)
        s = np.linalg.norm(axis)
        if s < 1e-10:
            return np.array([1.0, 0, 0, 0]) if z[2] > 0 else np.array([0.0, 1, 0, 0])
        ang = math.atan2(s, z[2])
        return np.concatenate([[math.cos(ang / 2)], math.sin(ang / 2) * axis / s])
    raise AssertionError(kind)


# ---------------------------------------------------------------------------------------------------------
# default classes


class _Class:
    __slots__ = ("name", "parent", "values", "explicit", "orient", "actuators", "raw")

    def __init__(self, name, parent, raw):
        self.name, self.parent, self.raw = name, parent, raw
        self.values: dict[str, dict] = {}  # default tag -> attrs written along the chain (no built-ins)
        self.explicit: dict[str, set] = {}  # default tag -> names written along the chain
        self.orient: dict[str, tuple] = {}  # default tag -> (kind, value, raw) orientation along the chain
        self.actuators: list[Element] = []  # actuator default elements, outermost class first


_BUILTIN: dict[str, dict] = {k: {n: a.default for n, a in sch.items()} for k, sch in sc.SCHEMA.items()}
_WORD_KEYS = {k for k, _ in sc.WORDS}
_CHECKED_KEYS = set(sc.REQUIRED) | set(sc.ONE_OF) | set(sc.ONE_OF_2)


class _Defaults:
    def __init__(self, sections: list[_Raw]):
        self.classes: dict[str, _Class] = {}
        main = _Class("main", None, sections[0] if sections else None)
        for dtag in sc.DEFAULT_CHILDREN:
            main.values[dtag] = {}
            main.explicit[dtag] = set()
        self.classes["main"] = main
        self.elements: list[Element] = []
        for sec in sections:
            cls = sec.attrib.get("class", "main")
            extra = set(sec.attrib) - {"class"}
            if extra:
                raise _bad("unknown attribute", sec, sorted(extra)[0])
            if cls != "main":
                raise _bad(f"top-level default class 'main' cannot be renamed ('{cls}')", sec, "class")
            self.elements.append(self._fill(sec, main))

    def _add(self, raw: _Raw, parent: _Class) -> Element:
        name = raw.attrib.get("class")
        if name is None:
            raise MJCFError("nested <default> needs a class name", raw.file, raw.line, "default", "class")
        if name in self.classes:
            raise MJCFError(f"repeated default class name '{name}'", raw.file, raw.line, "default", "class")
        c = _Class(name, parent, raw)
        c.values = dict(parent.values)
        c.explicit = dict(parent.explicit)
        c.orient = dict(parent.orient)
        c.actuators = list(parent.actuators)
        self.classes[name] = c
        return self._fill(raw, c)

    def _fill(self, raw: _Raw, c: _Class) -> Element:
        kids = []
        for k in raw.children:
            tag = k.tag
            if tag == "default":
                kids.append(self._add(k, c))
                continue
            key = sc.DEFAULT_CHILDREN.get(tag)
            if key is None:
                raise MJCFError("unknown element in <default>", k.file, k.line, tag)
            if tag in sc.ACTUATOR_TAGS:
                w = _written(k, key, required=False, pad=False)
                el = Element(tag, w, [], k.file, k.line, set(w))
                c.actuators.append(el)
                kids.append(el)
                continue
            w = _written(k, key, {**_BUILTIN[key], **c.values[tag]}, required=False)
            orient = [n for n in sc.ORIENT_ATTRS if n in w]
            if len(orient) > 1:
                raise _bad(f"multiple orientation specifiers ({', '.join(orient)})", k, orient[1])
            if orient:
                c.orient[tag] = (orient[0], w.pop(orient[0]), k)
            for n in sc.ORIENT_ATTRS:
                w.pop(n, None)
            c.values[tag] = {**c.values[tag], **w}
            c.explicit[tag] = c.explicit[tag] | set(w)
            if tag == "material":  # layers
                for lay in k.children:
                    if lay.tag != "layer":
                        raise MJCFError("unknown element", lay.file, lay.line, lay.tag)
            elif k.children:
                raise MJCFError("unknown element", k.children[0].file, k.children[0].line, k.children[0].tag)
            kids.append(Element(tag, dict(w), [], k.file, k.line, set(w)))
        return Element("default", {"class": c.name}, kids, raw.file, raw.line, {"class"})

    def get(self, name: str, raw: _Raw, attr: str) -> _Class:
        c = self.classes.get(name)
        if c is None:
            raise _bad(f"unknown default class name '{name}'", raw, attr)
        return c


# ---------------------------------------------------------------------------------------------------------
# the builder


# Attributes an element cannot write itself but still takes from its default class (MuJoCo keeps one tendon
# default for spatial and fixed tendons: <default><tendon width=...> sets tendon_width of fixed tendons too).
_DEFAULT_ONLY = {"fixed": ("width", "material", "rgba")}


class _Builder:
    def __init__(self, defaults: _Defaults, degree: bool, eulerseq: str):
        self.defaults = defaults
        self.degree = degree
        self.eulerseq = eulerseq
        self._class_attrs: dict[tuple[str, str], tuple[dict, set]] = {}  # (class, key) -> (attrs, explicit)

    # -- generic element ----------------------------------------------------------------------------------
    def element(self, raw: _Raw, parent: str, childclass: str | None, frame=None) -> Element:
        tag = raw.tag
        key = sc.key_of(parent, tag)
        dtag = sc.DEFAULT_FOR.get(key)
        cls = None
        if tag in sc.ACTUATOR_TAGS and parent == "actuator":
            return self.actuator(raw, key)
        if dtag is not None:
            cname = raw.attrib.get("class")
            if cname is not None:
                cls = self.defaults.get(cname, raw, "class")
            else:
                cls = self.defaults.classes[childclass or "main"]
            cached = self._class_attrs.get((cls.name, key))
            if cached is None:
                base = dict(_BUILTIN[key])
                schema = sc.SCHEMA[key]
                inherit = _DEFAULT_ONLY.get(key, ())
                for n, v in cls.values[dtag].items():
                    if n in schema or n in inherit:
                        base[n] = v
                cached = self._class_attrs[(cls.name, key)] = (base, {n for n in cls.explicit[dtag] if n in schema})
            attrs = dict(cached[0])
            explicit = set(cached[1])
            w = _written(raw, key, attrs)
        else:
            w = _written(raw, key)
            attrs = dict(_BUILTIN[key])
            explicit = set()
        if "class" in w and dtag is None:
            self.defaults.get(w["class"], raw, "class")
        if tag == "geom" and w.get("type", attrs.get("type")) == "sdf":
            raise NotImplementedError(f"{raw.file}:{raw.line}: <geom type='sdf'> is {_NI}")
        if tag in ORIENTED:
            orient = [n for n in sc.ORIENT_ATTRS if n in w]
            if len(orient) > 1:
                raise _bad(f"multiple orientation specifiers ({', '.join(orient)})", raw, orient[1])
            spec = None
            if orient:
                spec = (orient[0], w[orient[0]], raw)
            elif cls is not None and dtag in cls.orient:
                spec = cls.orient[dtag]
            for n in sc.ORIENT_ATTRS:
                w.pop(n, None)
            if spec is not None:
                kind, v, src = spec
                attrs["quat"] = orientation_to_quat(kind, v, self.degree, self.eulerseq, src)
                explicit.add("quat")
        attrs.update(w)
        explicit.update(w)
        el = Element(tag, attrs, [], raw.file, raw.line, explicit)
        if frame is not None:
            _apply_frame(el, frame)
        return el

    def actuator(self, raw: _Raw, key) -> Element:
        w = _written(raw, key, pad=False)
        cname = w.get("class", "main")
        cls = self.defaults.get(cname, raw, "class")
        return Element(raw.tag, w, [], raw.file, raw.line, set(w), list(cls.actuators))

    def check_children(self, raw: _Raw, key: str):
        allowed = CHILDREN.get(key, ())
        unsupported = UNSUPPORTED.get(key, ())
        for k in raw.children:
            if k.tag not in allowed and raw.tag + "/" + k.tag not in sc.SCHEMA:
                if k.tag in unsupported:
                    raise NotImplementedError(f"{k.file}:{k.line}: <{k.tag}> (in <{raw.tag}>) is {_NI}")
                raise MJCFError(f"unknown element (in <{raw.tag}>)", k.file, k.line, k.tag)

    # -- section with plain children ----------------------------------------------------------------------
    def section(self, raw: _Raw, parent: str) -> Element:
        """A non-tree section/element and its descendants (no frames, no childclass)."""
        self.check_children(raw, sc.key_of(parent, raw.tag))
        el = self.element(raw, parent, None)
        for k in raw.children:
            el.children.append(self.section(k, raw.tag))
        return el

    # -- kinematic tree -----------------------------------------------------------------------------------
    def tree(self, raw: _Raw, out: Element, childclass: str | None, frame):
        """Add the children of body/worldbody/frame `raw` to `out` (frames folded)."""
        key = raw.tag
        self.check_children(raw, key)
        for k in raw.children:
            tag = k.tag
            if tag == "frame":
                f = self.element(k, key, childclass, None)
                cc = f.attrs.get("childclass") or childclass
                if f.attrs.get("childclass"):
                    self.defaults.get(cc, k, "childclass")
                fr = (np.asarray(f.attrs["pos"], dtype=float), np.asarray(f.attrs["quat"], dtype=float))
                if frame is not None:
                    fr = (frame[0] + _qrot(frame[1], fr[0]), quat_mul(frame[1], fr[1]))
                self.tree(k, out, cc, fr)
            elif tag == "replicate":
                self.replicate(k, key, out, childclass, frame)
            elif tag == "body":
                b = self.element(k, key, childclass, frame)
                cc = b.attrs.get("childclass") or childclass
                if b.attrs.get("childclass"):
                    self.defaults.get(cc, k, "childclass")
                self.tree(k, b, cc, None)
                out.children.append(b)
            else:
                if k.children:
                    c = k.children[0]
                    if c.tag in UNSUPPORTED.get(tag, ()):
                        raise NotImplementedError(f"{c.file}:{c.line}: <{c.tag}> (in <{tag}>) is {_NI}")
                    raise MJCFError(f"unknown element (in <{tag}>)", c.file, c.line, c.tag)
                out.children.append(self.element(k, key, childclass, frame))

    def replicate(self, raw: _Raw, parent: str, out: Element, childclass: str | None, frame):
        """<replicate count offset euler sep>: `count` copies of the children, copy i posed by the i-th power of
        (offset, euler) (in the enclosing frame), names suffixed with sep + i (zero-padded to len(str(count)))."""
        r = self.element(raw, parent, childclass, None)
        count = r.attrs["count"]
        if count < 1:
            raise _bad("count must be positive", raw, "count")
        off = np.asarray(r.attrs["offset"], dtype=float)
        rq = orientation_to_quat("euler", r.attrs["euler"], self.degree, self.eulerseq, raw)
        digits = len(str(count))
        pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        for i in range(count):
            fr = (pos, quat) if frame is None else (frame[0] + _qrot(frame[1], pos), quat_mul(frame[1], quat))
            n0 = len(out.children)
            self.tree(raw, out, childclass, fr)
            suffix = r.attrs["sep"] + str(i).zfill(digits)
            for el in out.children[n0:]:
                _rename(el, suffix)
            pos = pos + _qrot(quat, off)
            quat = quat_mul(quat, rq)


def _rename(el: Element, suffix: str):
    if el.attrs.get("name"):
        el.attrs["name"] = el.attrs["name"] + suffix
    for c in el.children:
        _rename(c, suffix)


def _apply_frame(el: Element, frame):
    """Express `el` (a child of a <frame>) in the enclosing body's coordinates."""
    fpos, fquat = frame
    a = el.attrs
    if "pos" in a and a["pos"] is not None:
        a["pos"] = fpos + _qrot(fquat, np.asarray(a["pos"], dtype=float))
        el.explicit.add("pos")
    if el.tag == "joint":
        a["axis"] = _qrot(fquat, np.asarray(a["axis"], dtype=float))
        el.explicit.add("axis")
        return
    if el.tag == "light":
        a["dir"] = _qrot(fquat, np.asarray(a["dir"], dtype=float))
        el.explicit.add("dir")
        return
    if "quat" in a and a["quat"] is not None:
        a["quat"] = quat_mul(fquat, np.asarray(a["quat"], dtype=float))
        el.explicit.add("quat")
    ft = a.get("fromto")
    if ft is not None:
        a["fromto"] = np.concatenate([fpos + _qrot(fquat, ft[:3]), fpos + _qrot(fquat, ft[3:])])


# ---------------------------------------------------------------------------------------------------------
# top level


def _merge_into(dst: Element, src: Element):
    dst.attrs.update({k: src.attrs[k] for k in src.explicit})
    dst.explicit |= src.explicit


def _build(root: _Raw) -> Element:
    if root.tag != "mujoco":
        raise MJCFError("top-level element must be <mujoco>", root.file, root.line, root.tag)
    top_attrs = dict(_BUILTIN["mujoco"])
    top_w = _written(root, "mujoco")
    top_attrs.update(top_w)
    out = Element("mujoco", top_attrs, [], root.file, root.line, set(top_w))

    by_tag: dict[str, list[_Raw]] = {}
    for k in root.children:
        if k.tag not in CHILDREN["mujoco"]:
            if k.tag in UNSUPPORTED["mujoco"]:
                raise NotImplementedError(f"{k.file}:{k.line}: <{k.tag}> is {_NI}")
            raise MJCFError("unknown element (in <mujoco>)", k.file, k.line, k.tag)
        by_tag.setdefault(k.tag, []).append(k)

    # compiler settings first: they govern orientation conversion
    comp = Element("compiler", dict(_BUILTIN["compiler"]), [], root.file, root.line, set())
    lr = None
    for raw in by_tag.get("compiler", []):
        for k in raw.children:
            if k.tag != "lengthrange":
                raise MJCFError("unknown element (in <compiler>)", k.file, k.line, k.tag)
        w = _written(raw, "compiler")
        comp.attrs.update(w)
        comp.explicit |= set(w)
        if comp.file == root.file and comp.line == root.line:
            comp.file, comp.line = raw.file, raw.line
        for k in raw.children:
            lw = _written(k, "compiler/lengthrange")
            if lr is None:
                lr = Element("lengthrange", dict(_BUILTIN["compiler/lengthrange"]), [], k.file, k.line, set())
            lr.attrs.update(lw)
            lr.explicit |= set(lw)
    if lr is not None:
        comp.children.append(lr)
    seq = comp.attrs["eulerseq"]
    if len(seq) != 3 or any(ch not in "xyzXYZ" for ch in seq):
        raw = by_tag["compiler"][-1]
        raise _bad(f"eulerseq must be 3 characters of xyzXYZ, got '{seq}'", raw, "eulerseq")

    defaults = _Defaults(by_tag.get("default", []))
    b = _Builder(defaults, comp.attrs["angle"] == "degree", seq)

    sections: dict[str, Element] = {"compiler": comp}
    for tag in SECTION_ORDER:
        raws = by_tag.get(tag, [])
        if tag == "compiler":
            continue
        if tag == "default":
            if raws:
                first = raws[0]
                sections["default"] = Element("default", {"class": "main"}, [], first.file, first.line, set())
                for e in defaults.elements:
                    if e.attrs.get("class") == "main":
                        sections["default"].children.extend(e.children)
                    else:
                        sections["default"].children.append(e)
            continue
        if tag == "worldbody":
            wb = Element("worldbody", {}, [], raws[0].file if raws else root.file, raws[0].line if raws else root.line)
            for raw in raws:
                if raw.attrib:
                    raise _bad("unknown attribute", raw, sorted(raw.attrib)[0])
                b.tree(raw, wb, None, None)
            sections[tag] = wb
            continue
        if tag == "option":
            opt = Element("option", dict(_BUILTIN["option"]), [], root.file, root.line, set())
            flag = Element("flag", dict(_BUILTIN["option/flag"]), [], root.file, root.line, set())
            for i, raw in enumerate(raws):
                for k in raw.children:
                    if k.tag != "flag":
                        raise MJCFError("unknown element (in <option>)", k.file, k.line, k.tag)
                e = b.element(raw, "mujoco", None)
                if i == 0:
                    opt.file, opt.line = raw.file, raw.line
                _merge_into(opt, e)
                for k in raw.children:
                    f = b.element(k, "option", None)
                    flag.file, flag.line = k.file, k.line
                    _merge_into(flag, f)
            opt.children.append(flag)
            sections[tag] = opt
            continue
        if tag == "visual":
            if raws:
                sections[tag] = Element("visual", {}, [], raws[0].file, raws[0].line)
                for raw in raws:
                    if raw.attrib:
                        raise _bad("unknown attribute", raw, sorted(raw.attrib)[0])
                    sections[tag].children.extend(b.section(raw, "mujoco").children)
            continue
        if not raws:
            if tag in ALWAYS:
                sections[tag] = Element(tag, dict(_BUILTIN[tag]), [], root.file, root.line, set())
            continue
        merged = None
        for raw in raws:
            e = b.section(raw, "mujoco")
            if merged is None:
                merged = e
            else:
                _merge_into(merged, e)
                merged.children.extend(e.children)
        sections[tag] = merged
    out.children = [sections[t] for t in SECTION_ORDER if t in sections]
    return out


def parse_string(xml: str | bytes, assets: dict[str, bytes] | None = None, base_dir: str | None = None) -> Element:
    """Parse MJCF text. Includes resolve from `assets` (name -> bytes) first, then relative to `base_dir`."""
    data = xml.encode() if isinstance(xml, str) else xml
    loader = _Loader(assets, base_dir)
    root = loader.load(data, "<string>", base_dir)
    return _build(root)


def parse_file(path: str, assets: dict[str, bytes] | None = None) -> Element:
    """Parse an MJCF file; includes resolve relative to the including file's directory (or from `assets`)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise MJCFError(f"cannot read file: {e.strerror}", path) from None
    d = os.path.dirname(os.path.abspath(path))
    loader = _Loader(assets, d)
    loader.stack.append(os.path.abspath(path))
    root = loader.load(data, path, d)
    return _build(root)
