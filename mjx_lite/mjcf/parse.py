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
  - Skins (<asset><skin>, <deformable><skin>) are compiled by mjcf/skin.py (visual only); <visual>/<custom> are kept
    aside for reference.
  - Values are typed per `schema.py`. Default arrays (built-in or from a class) are shared, read-only numpy
    arrays: copy before modifying in place.
"""

from __future__ import annotations

import math
import os
import re

import numpy as np

from mjx_lite.mjcf import flexcomp as _flexcomp
from mjx_lite.mjcf import flexcomp_mesh as _flexcomp_mesh
from mjx_lite.mjcf import inertia as _m
from mjx_lite.mjcf import plugins, xml
from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.inertia import EPS, normalize, quat_mul, z2quat
from mjx_lite.mjcf.spec import Attr, Element, MJCFError, MJCFUnsupportedError, did_you_mean

# ---------------------------------------------------------------------------------------------------------
# structure

_NI = "not supported by mjx_lite"
# refused elements with more to say than _NI
_WHY = {"composite": "not supported: MuJoCo 4.0 removed it and refuses it too (its migration: <flexcomp dim='1'>)"}
_BODY_CHILDREN = {"inertial", "joint", "freejoint", "geom", "site", "camera", "light", "body", "frame", "replicate",
                  "attach", "flexcomp", "plugin"}
_BODY_UNSUPPORTED = {"composite", "skin", "flex"}
CHILDREN: dict[str, set[str]] = {
    "mujoco": {"compiler", "extension", "option", "size", "statistic", "visual", "default", "asset", "deformable",
               "worldbody", "contact", "equality", "tendon", "actuator", "sensor", "keyframe", "custom"},
    "compiler": {"lengthrange"},
    "option": {"flag"},
    "visual": set(sc.VISUAL_CHILDREN),
    "default": set(sc.DEFAULT_CHILDREN) | {"default"},
    "worldbody": _BODY_CHILDREN,  # joints and inertial: MuJoCo's "World body cannot have ..." errors (tree())
    "body": _BODY_CHILDREN,
    "frame": _BODY_CHILDREN,
    "replicate": _BODY_CHILDREN,
    "asset": {"mesh", "hfield", "texture", "material", "skin", "model"},
    "material": {"layer"},
    "skin": {"bone"},
    "deformable": {"skin", "flex"},
    "deformable/flex": {"contact", "edge", "elasticity"},
    "contact": {"pair", "exclude"},
    "equality": {"connect", "weld", "joint", "tendon", "flex"},
    "tendon": {"spatial", "fixed"},
    "spatial": {"site", "geom", "pulley"},
    "fixed": {"joint"},
    "actuator": set(sc.ACTUATOR_TAGS),
    "sensor": set(sc.SENSOR_TAGS),
    "keyframe": {"key"},
    "custom": {"numeric", "text", "tuple"},
    "tuple": {"element"},
    **{p + "/plugin": {"config"} for p in ("worldbody", "body", "frame", "replicate")},  # (mjcf/plugins.py)
    "actuator/plugin": {"config"},
    "sensor/plugin": {"config"},
}  # fmt: skip
UNSUPPORTED: dict[str, set[str]] = {
    "mujoco": set(),
    "deformable/flex": {"plugin"},
    "worldbody": _BODY_UNSUPPORTED,
    "body": _BODY_UNSUPPORTED,
    "frame": _BODY_UNSUPPORTED,
    "replicate": _BODY_UNSUPPORTED,
    "equality": {"flexvert", "flexstrain"},
}
# children that may appear at most once in their parent (MuJoCo's schema: "unique element ... found N times")
UNIQUE: dict[str, set[str]] = {
    "compiler": {"lengthrange"},
    "option": {"flag"},
    "visual": set(sc.VISUAL_CHILDREN),
    "default": set(sc.DEFAULT_CHILDREN) | set(sc.ACTUATOR_TAGS),
    "body": {"inertial"},
    "flex": {"contact", "edge", "elasticity"},
    "frame": {"inertial"},
    "replicate": {"inertial"},
}
ORIENTED = {"body", "frame", "inertial", "geom", "site", "camera"}
# MuJoCo normalises these quaternions before resolving an orientation alternative (not after): the quaternion of an
# alternative stays as computed (Element.raw_quat; attrs.quat leaves it as is)
RAW_ALTERNATIVE = {"body", "geom", "inertial"}
SECTION_ORDER = ("compiler", "extension", "option", "size", "statistic", "visual", "default", "asset", "deformable",
                 "worldbody", "contact", "equality", "tendon", "actuator", "sensor", "keyframe", "custom")  # fmt: skip
ALWAYS = ("compiler", "option", "size", "statistic", "worldbody")


def _check_unique(raw) -> None:
    """MuJoCo's schema: some children may appear at most once per parent element."""
    unique = UNIQUE.get(raw.tag)
    if not unique:
        return
    seen: dict[str, int] = {}
    for k in raw.children:
        if k.tag in unique:
            seen[k.tag] = seen.get(k.tag, 0) + 1
    for tag, n in seen.items():
        if n > 1:
            raise MJCFError(f"unique element '{tag}' found {n} times", raw.file, raw.line, raw.tag)


def _schema_only(raw, parent: str) -> None:
    """Check an element MuJoCo validates but does not read: attribute names and child elements only."""
    key = sc.key_of(parent, raw.tag)
    schema = sc.SCHEMA.get(key, {})
    for name in raw.attrib:
        if name not in schema:
            raise _unknown_attribute(raw, name, schema)
    allowed = CHILDREN.get(key, ())
    for k in raw.children:
        if k.tag not in allowed and raw.tag + "/" + k.tag not in sc.SCHEMA:
            if k.tag in UNSUPPORTED.get(key, ()):
                raise MJCFUnsupportedError(f"<{k.tag}> (in <{raw.tag}>) is {_WHY.get(k.tag, _NI)}", k.file, k.line,
                                           k.tag)
            raise _unknown_element(k, raw.tag, key)
        _schema_only(k, raw.tag)


def _take_plugin(raw, extension: Element | None) -> tuple:
    """(raw without its <plugin> child, (plugin name, attribute values) of that child or None, whether that child
    makes an instance of its own (no `instance` attribute: MuJoCo's implicit instance)) for a <geom> or <mesh>
    (mjcf/plugins.py sdf_use); at most one plugin child."""
    kids = [k for k in raw.children if k.tag == "plugin"]
    if not kids:
        return raw, None, False
    if len(kids) > 1:
        raise MJCFError(f"unique element 'plugin' found {len(kids)} times", raw.file, raw.line, raw.tag)
    rest = [k for k in raw.children if k.tag != "plugin"]
    sdf = plugins.sdf_use(kids[0], raw.tag, extension, _written)
    return _Raw(raw.tag, raw.attrib, rest, raw.file, raw.line), sdf, kids[0].attrib.get("instance") is None


def _no_children(raw) -> None:
    if raw.children:
        c = raw.children[0]
        raise MJCFError(f"unknown element (in <{raw.tag}>)", c.file, c.line, c.tag)


class _Raw:
    """An XML element after include expansion."""

    __slots__ = ("tag", "attrib", "children", "file", "line")

    def __init__(self, tag, attrib, children, file, line):
        self.tag, self.attrib, self.children, self.file, self.line = tag, attrib, children, file, line


# ---------------------------------------------------------------------------------------------------------
# loading and includes (MuJoCo's rules: mjcf/xml.py reads the syntax; includes as in MuJoCo's IncludeXML)


class _Loader:
    """Reads the model file and its includes. An <include file=...> is replaced by the children of the included
    file's root element (whatever its tag); the file is looked up in `assets`, then relative to the top-level
    model's directory, then relative to the including file's directory. A file may be included only once (MuJoCo:
    "already included"), which also rules out recursion; an include must be empty, name a file, and the file must
    be well-formed with at least one element under its root. Other attributes of <include> are ignored, as in
    MuJoCo."""

    def __init__(self, assets: dict[str, bytes] | None, top_dir: str | None):
        self.assets = assets or {}
        self.top_dir = top_dir
        self.included: set[str] = set()

    def load(self, data: bytes | str, file: str, directory: str | None) -> _Raw:
        return self.convert_root(xml.parse(data, file), file, directory)

    def convert_root(self, root: xml.Node, file: str, directory: str | None) -> _Raw:
        if root.tag != "mujoco":
            raise MJCFError("top-level element must be <mujoco>", file, root.line, root.tag)
        return self._convert(root, file, directory)

    def _convert(self, el: xml.Node, file: str, directory: str | None) -> _Raw:
        kids = []
        for c in el.children:
            if c.tag == "include":
                kids.extend(self._include(c, file, directory))
            else:
                kids.append(self._convert(c, file, directory))
        return _Raw(el.tag, el.attrib, kids, file, el.line)

    def _find(self, name: str, directory: str | None) -> tuple[bytes | str | None, str, str | None]:
        """(content or None, path, its directory) of an included file."""
        if name in self.assets:
            return self.assets[name], name, directory
        candidates = [name] if os.path.isabs(name) else [os.path.join(d, name) for d in (self.top_dir, directory)
                                                        if d is not None]  # fmt: skip
        for p in candidates:
            if os.path.isfile(p):
                with open(p, "rb") as f:
                    return f.read(), p, os.path.dirname(os.path.abspath(p))
        base = os.path.basename(name)
        if base in self.assets:
            return self.assets[base], base, directory
        return None, name, directory

    def _include(self, el: xml.Node, file: str, directory: str | None) -> list[_Raw]:
        line = el.line
        if el.has_content:
            raise MJCFError("<include> cannot have children", file, line, "include")
        name = el.attrib.get("file")
        if name is None:
            raise MJCFError("required attribute missing", file, line, "include", "file")
        data, path, newdir = self._find(name, directory)
        if data is None:
            raise MJCFError(f"included file '{name}' not found", file, line, "include", "file")
        key = os.path.normpath(os.path.abspath(path)) if os.path.isfile(path) else "asset:" + path
        if key in self.included:
            raise MJCFError(f"file '{name}' already included", file, line, "include", "file")
        self.included.add(key)
        if not data:
            raise MJCFError(f"included file '{name}' is empty", file, line, "include", "file")
        root = xml.parse(data, path)
        if not root.children:
            raise MJCFError(f"included file '{name}' has no elements under its root", file, line, "include", "file")
        return self._convert(root, path, newdir).children


# ---------------------------------------------------------------------------------------------------------
# typed values


def _bad(msg, raw, attr):
    return MJCFError(msg, raw.file, raw.line, raw.tag, attr)


def _unknown_attribute(raw, name, schema) -> MJCFError:
    return _bad("unknown attribute" + did_you_mean(name, schema), raw, name)


def _unknown_element(k, parent_tag: str, key: str) -> MJCFError:
    """An unknown child <k> of <parent_tag> (schema key `key`), naming the closest allowed elements."""
    allowed = set(CHILDREN.get(key, ())) | {s.split("/", 1)[1] for s in sc.SCHEMA if s.startswith(parent_tag + "/")}
    return MJCFError(f"unknown element (in <{parent_tag}>)" + did_you_mean(k.tag, sorted(allowed)), k.file, k.line,
                     k.tag)  # fmt: skip


# Numbers are read as MuJoCo reads them (C strtod / strtol in the C locale): tokens separated by ASCII whitespace;
# reals in decimal or hexadecimal notation, inf/infinity/nan (any case); integers in decimal only, within int32;
# a finite real that overflows the attribute's C type (double, or float for the attributes MuJoCo stores in
# single precision, schema.F32) is "too large"; an empty (or all-whitespace) value means the attribute is absent.
_C_WS = re.compile(r"[ \t\n\v\f\r]+")
_REAL = re.compile(
    r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    r"|(?i:inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?))"
)
_INT = re.compile(r"[+-]?[0-9]+")
_INT32 = (-(2**31), 2**31 - 1)
_F32_MAX = float(np.finfo(np.float32).max)
_ABSENT = object()  # an attribute written with no value at all (MuJoCo treats it as not written)
# the integers MuJoCo's reader reads one by one (ReadAttrInt): an empty value is an error there
_EMPTY_IS_ERROR = {("size", "nconmax"), ("size", "nstack"), ("size", "njmax"), ("mesh", "maxhullvert"),
                   ("default/mesh", "maxhullvert"), ("skin", "group"), ("freejoint", "group"), ("numeric", "size"),
                   ("sensor/contact", "num"), ("sensor/user", "dim"), ("visual/headlight", "active")}  # fmt: skip


def _tokens(text: str) -> list[str]:
    return [t for t in _C_WS.split(text) if t]


def _real(tok: str, f32: bool, raw: _Raw, name: str) -> float:
    if _REAL.fullmatch(tok) is None:
        raise _bad(f"bad format: '{tok}' is not a number", raw, name)
    low = tok.lstrip("+-").lower()
    if low.startswith("nan"):
        return math.nan
    if low.startswith("0x"):
        try:
            v = float.fromhex(tok)
        except OverflowError:
            v = math.inf
    else:
        v = float(tok)
    if math.isinf(v) and not low.startswith("inf") or f32 and math.isfinite(v) and _rounds_to_f32_inf(v):
        raise _bad(f"number is too large: '{tok}' overflows a {'float' if f32 else 'double'}", raw, name)
    return v


def _rounds_to_f32_inf(v: float) -> bool:
    with np.errstate(over="ignore"):
        return abs(v) > _F32_MAX and bool(np.isinf(np.float32(v)))


def _int(tok: str, raw: _Raw, name: str) -> int:
    if _INT.fullmatch(tok) is None:
        raise _bad(f"bad format: '{tok}' is not an integer", raw, name)
    v = int(tok)
    if not _INT32[0] <= v <= _INT32[1]:
        raise _bad(f"number is too large: '{tok}' does not fit a 32-bit integer", raw, name)
    return v


def _convert(text: str, a: Attr, raw: _Raw, name: str, inherited=None, pad: bool = True, key: str = ""):
    """Parse one attribute's text per its Attr; `inherited` (else the built-in default) fills the tail of
    non-exact vectors when `pad`. Returns _ABSENT for a numeric attribute written with no value."""
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
    parts = _tokens(text)
    if kind == "int" and a.keywords and len(parts) == 1:  # an int that may be written as a keyword (its index)
        v = a.keywords.index(parts[0]) if parts[0] in a.keywords else _int(parts[0], raw, name)
        if not 0 <= v < len(a.keywords):
            raise _bad(f"invalid keyword '{text}' (expected {', '.join(a.keywords)} or 0 to {len(a.keywords) - 1})",
                       raw, name)  # fmt: skip
        return v
    if not parts:
        if (key, name) in _EMPTY_IS_ERROR:
            raise _bad("problem reading attribute", raw, name)
        return _ABSENT
    if kind == "real":
        f32 = (key, name) in sc.F32
        vals = [_real(p, f32, raw, name) for p in parts]
    else:
        vals = [_int(p, raw, name) for p in parts]
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
            if key == "mujoco" and (name == "xmlns" or ":" in name):  # namespace declarations on the root
                continue
            if key in ("frame", "replicate"):  # MuJoCo does not check the attributes of these; it reads its own
                continue
            raise _unknown_attribute(raw, name, schema)
        v = _convert(text, a, raw, name, None if inherited is None else inherited.get(name), pad, key)
        if v is _ABSENT:
            continue
        out[name] = v
        if key in _WORD_KEYS:
            words = sc.WORDS.get((key, name))
            if words is not None:
                for wd in text.split():
                    if wd not in words:
                        raise _bad(f"invalid keyword '{wd}' (expected words of {', '.join(words)})", raw, name)
    if key in ("light", "default/light") and "type" in raw.attrib and "directional" in raw.attrib:
        raise _bad("at most one of 'directional', 'type' can be specified", raw, "directional")
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


def _frame2quat(x, y, z) -> list[float]:
    """mjuu_frame2quat: quaternion of the frame with axes x, y, z (the matrix's columns), normalised."""
    mat = (x, y, z)  # mat[c][r]
    if mat[0][0] + mat[1][1] + mat[2][2] > 0:
        q0 = 0.5 * _m.sqrt(1 + mat[0][0] + mat[1][1] + mat[2][2])
        q = [q0, 0.25 * (mat[1][2] - mat[2][1]) / q0, 0.25 * (mat[2][0] - mat[0][2]) / q0,
             0.25 * (mat[0][1] - mat[1][0]) / q0]  # fmt: skip
    elif mat[0][0] > mat[1][1] and mat[0][0] > mat[2][2]:
        q1 = 0.5 * _m.sqrt(1 + mat[0][0] - mat[1][1] - mat[2][2])
        q = [0.25 * (mat[1][2] - mat[2][1]) / q1, q1, 0.25 * (mat[1][0] + mat[0][1]) / q1,
             0.25 * (mat[2][0] + mat[0][2]) / q1]  # fmt: skip
    elif mat[1][1] > mat[2][2]:
        q2 = 0.5 * _m.sqrt(1 - mat[0][0] + mat[1][1] - mat[2][2])
        q = [0.25 * (mat[2][0] - mat[0][2]) / q2, 0.25 * (mat[1][0] + mat[0][1]) / q2, q2,
             0.25 * (mat[2][1] + mat[1][2]) / q2]  # fmt: skip
    else:
        q3 = 0.5 * _m.sqrt(1 - mat[0][0] - mat[1][1] + mat[2][2])
        q = [0.25 * (mat[0][1] - mat[1][0]) / q3, 0.25 * (mat[2][0] + mat[0][2]) / q3,
             0.25 * (mat[2][1] + mat[1][2]) / q3, q3]  # fmt: skip
    _m._normvec(q)
    return q


def _unit(v, what, raw, attr) -> list[float]:
    """mjuu_normvec, with MuJoCo's "<what> too small" error when the returned norm is below mjEPS."""
    out = [float(x) for x in v]
    if _m._normvec(out) < EPS:
        raise _bad(f"error '{what} too small' in frame alternative", raw, attr)
    return out


def orientation_to_quat(kind: str, v, degree: bool, eulerseq: str, raw: _Raw) -> np.ndarray:
    """Quaternion of one MJCF orientation specifier (quat | axisangle | euler | xyaxes | zaxis), computed as MuJoCo's
    ResolveOrientation does, operation by operation (huge or degenerate values give MuJoCo's answer); a `quat` is
    normalised as the compiler does and an all-zero one is an error."""
    v = [float(x) for x in np.asarray(v, dtype=np.float64).reshape(-1)]
    if kind == "quat":
        if not any(v):
            raise _bad("zero quaternion is not allowed", raw, kind)
        return normalize(np.array(v))[0]
    if kind == "axisangle":
        ang = v[3] / 180.0 * math.pi if degree else v[3]
        axis = _unit(v[:3], "axisangle", raw, kind)
        ang2 = ang / 2
        return np.array([_m.cos(ang2), _m.sin(ang2) * axis[0], _m.sin(ang2) * axis[1], _m.sin(ang2) * axis[2]])
    if kind == "euler":
        quat = [1.0, 0.0, 0.0, 0.0]
        for i, ch in enumerate(eulerseq):
            e = v[i] / 180.0 * math.pi if degree else v[i]
            qrot = [_m.cos(e / 2), 0.0, 0.0, 0.0]
            qrot[1 + "xyz".index(ch.lower())] = _m.sin(e / 2)
            quat = _m._mulquat(quat, qrot) if ch.islower() else _m._mulquat(qrot, quat)
        return np.array(quat)
    if kind == "xyaxes":
        x = _unit(v[:3], "xaxis", raw, kind)
        y = v[3:6]
        d = x[0] * y[0] + x[1] * y[1] + x[2] * y[2]
        y = _unit([y[0] - x[0] * d, y[1] - x[1] * d, y[2] - x[2] * d], "yaxis", raw, kind)
        z = _unit([x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]],
                  "cross(xaxis, yaxis)", raw, kind)  # fmt: skip
        return np.array(_frame2quat(x, y, z))
    if kind == "zaxis":
        return z2quat(np.array(_unit(v, "zaxis", raw, kind)))
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
            cls = sec.attrib.get("class", "main") or "main"  # MuJoCo: an empty name is the main class here
            extra = set(sec.attrib) - {"class"}
            if extra:
                raise _bad("unknown attribute", sec, sorted(extra)[0])
            if cls != "main":
                raise _bad(f"top-level default class 'main' cannot be renamed ('{cls}')", sec, "class")
            self.elements.append(self._fill(sec, main))

    def _add(self, raw: _Raw, parent: _Class) -> Element:
        extra = set(raw.attrib) - {"class"}
        if extra:
            raise _bad("unknown attribute", raw, sorted(extra)[0])
        name = raw.attrib.get("class")
        if not name:
            raise MJCFError("empty class name", raw.file, raw.line, "default", "class")
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
        """The class's own elements first, then its nested classes (which inherit all of them), as MuJoCo."""
        _check_unique(raw)
        kids = []
        for k in raw.children:
            tag = k.tag
            if tag == "default":
                continue
            key = sc.DEFAULT_CHILDREN.get(tag)
            if key is None:
                raise MJCFError("unknown element in <default>" + did_you_mean(tag, sc.DEFAULT_CHILDREN), k.file,
                                k.line, tag)  # fmt: skip
            if tag in sc.ACTUATOR_TAGS:
                _no_children(k)
                w = _written(k, key, required=False, pad=False)
                el = Element(tag, w, [], k.file, k.line, set(w))
                c.actuators.append(el)
                kids.append(el)
                continue
            w = _written(k, key, {**_BUILTIN[key], **c.values[tag]}, required=False)
            present = [n for n in sc.ORIENT_ATTRS if n in k.attrib]  # MuJoCo counts written ones, even empty
            if len(present) > 1:
                raise _bad(f"multiple orientation specifiers ({', '.join(present)})", k, present[1])
            orient = [n for n in present if n in w]
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
        kids += [self._add(k, c) for k in raw.children if k.tag == "default"]
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
        self.frame_names: set[str] = set()
        self._replicates: dict[int, dict] = {}  # id(raw <replicate>) -> its record (compose.replicate)
        self.flexes: list[dict] = []  # flex records of the <flexcomp>s, in document order (mjcf/flexcomp.py)
        self.extension: Element | None = None  # the <extension> declarations (mjcf/plugins.py)
        self._world_pending: list[Element] = []  # rod twist bodies, added to the world after the current world child
        self.mesh_files: tuple = ("", None, "", False)  # (model dir, assets, meshdir, strippath) for mesh flexcomps

    # -- generic element ----------------------------------------------------------------------------------
    def element(self, raw: _Raw, parent: str, childclass: str | None, frame=None) -> Element:
        tag = raw.tag
        key = sc.key_of(parent, tag)
        dtag = sc.DEFAULT_FOR.get(key)
        cls = None
        if parent == "actuator" and (tag in sc.ACTUATOR_TAGS or tag == "plugin"):
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
        raw_quat = False
        if tag in ORIENTED:
            present = [n for n in sc.ORIENT_ATTRS if n in raw.attrib]  # MuJoCo counts written ones, even empty
            if len(present) > 1:
                raise _bad(f"multiple orientation specifiers ({', '.join(present)})", raw, present[1])
            orient = [n for n in present if n in w]
            spec = None
            if orient:
                spec = (orient[0], w[orient[0]], raw)
            elif cls is not None and dtag in cls.orient:
                spec = cls.orient[dtag]
            for n in sc.ORIENT_ATTRS:
                w.pop(n, None)
            ft = w.get("fromto", attrs.get("fromto"))
            if tag in ("geom", "site") and ft is not None and not math.isnan(float(np.asarray(ft).reshape(-1)[0])):
                spec = None  # MuJoCo: fromto decides the orientation; an alternative is not even resolved
            if spec is not None:
                kind, v, src = spec
                attrs["quat"] = orientation_to_quat(kind, v, self.degree, self.eulerseq, src)
                explicit.add("quat")
                raw_quat = kind != "quat" and tag in RAW_ALTERNATIVE
        attrs.update(w)
        explicit.update(w)
        el = Element(tag, attrs, [], raw.file, raw.line, explicit, raw_quat=raw_quat)
        if frame is not None:
            _apply_frame(el, frame)
        return el

    def actuator(self, raw: _Raw, key) -> Element:
        w = _written(raw, key, pad=False)
        cname = w.get("class", "main")
        cls = self.defaults.get(cname, raw, "class")
        return Element(raw.tag, w, [], raw.file, raw.line, set(w), list(cls.actuators))

    def check_children(self, raw: _Raw, key: str):
        _check_unique(raw)
        allowed = CHILDREN.get(key, ())
        unsupported = UNSUPPORTED.get(key, ())
        for k in raw.children:
            if k.tag not in allowed and raw.tag + "/" + k.tag not in sc.SCHEMA:
                if k.tag in unsupported:
                    raise MJCFUnsupportedError(f"<{k.tag}> (in <{raw.tag}>) is {_WHY.get(k.tag, _NI)}", k.file, k.line,
                                           k.tag)
                raise _unknown_element(k, raw.tag, key)

    # -- section with plain children ----------------------------------------------------------------------
    def section(self, raw: _Raw, parent: str) -> Element:
        """A non-tree section/element and its descendants (no frames, no childclass)."""
        raw, plugin, implicit = _take_plugin(raw, self.extension) if raw.tag == "mesh" else (raw, None, False)
        self.check_children(raw, sc.key_of(parent, raw.tag))
        el = self.element(raw, parent, None)
        if parent in ("actuator", "sensor") and raw.tag == "plugin":  # an actuator or sensor plugin: its <config>
            el.attrs["plugin"] = plugins.element_config(raw, parent, self.extension, _written)
            return el
        if plugin is not None:
            el.attrs["plugin"] = plugin
            el.attrs["plugin_implicit"] = implicit  # (counted among MuJoCo's plugin instances: plugins.instance_ids)
        for k in raw.children:
            el.children.append(self.section(k, raw.tag))
        return el

    # -- kinematic tree -----------------------------------------------------------------------------------
    def tree(self, raw: _Raw, out: Element, childclass: str | None, frame):
        """Add the children of body/worldbody/frame `raw` to `out` (frames folded)."""
        key = raw.tag
        self.check_children(raw, key)
        world = out.tag == "worldbody"
        for k in [*raw.children, None]:
            if world and self._world_pending:  # rod twist bodies follow the world child that made them
                out.children.extend(self._world_pending)
                self._world_pending.clear()
            if k is None:
                break
            tag = k.tag
            if tag in ("joint", "freejoint", "inertial"):
                if world:
                    what = "inertia" if tag == "inertial" else "joints"
                    raise MJCFError(f"World body cannot have {what}", k.file, k.line, tag)
                if raw.tag == "replicate":
                    raise MJCFError(f"{tag} cannot be a direct child of replicate", k.file, k.line, tag)
            if tag == "frame":
                f = self.element(k, key, childclass, None)
                cc = f.attrs.get("childclass") or childclass
                if f.attrs.get("childclass") is not None:
                    self.defaults.get(f.attrs["childclass"], k, "childclass")
                fr = (np.asarray(f.attrs["pos"], dtype=float), normalize(np.asarray(f.attrs["quat"], dtype=float))[0])
                if frame is not None:
                    fr = (frame[0] + _qrot(frame[1], fr[0]), quat_mul(frame[1], fr[1]))
                n0 = len(out.children)
                self.tree(k, out, cc, fr)
                name = f.attrs.get("name")
                if name:  # <attach frame=...> finds the frame's contents by its name
                    self.frame_names.add(name)
                    for el in out.children[n0:]:
                        el.frames = (name,) + el.frames
            elif tag == "attach":
                if k.children:
                    c = k.children[0]
                    raise MJCFError("unknown element (in <attach>)", c.file, c.line, c.tag)
                a = self.element(k, key, None, None)
                if a.attrs.get("body") is not None and a.attrs.get("frame") is not None:
                    raise _bad("at most one of 'body', 'frame' can be specified", k, "frame")
                # resolved by mjcf/compose.py: the pose of the enclosing frames, the replicate suffix and copy
                a.attrs.update(_frame=frame, _suffix="", _reps=[])
                out.children.append(a)
            elif tag == "replicate":
                self.replicate(k, key, out, childclass, frame)
            elif tag == "flexcomp":
                self.flexcomp(k, key, out, childclass, frame)
            elif tag == "plugin":  # a passive-force plugin of the body (mjcf/plugins.py)
                if raw.tag != "replicate":  # (MuJoCo's <replicate> drops a <plugin> child unread)
                    out.children.append(plugins.body_use(k, key, out, self.extension, _written))
            elif tag == "body":
                b = self.element(k, key, childclass, frame)
                cc = b.attrs.get("childclass") or childclass
                if b.attrs.get("childclass") is not None:
                    self.defaults.get(b.attrs["childclass"], k, "childclass")
                self.tree(k, b, cc, None)
                out.children.append(b)
            else:
                k, plugin, implicit = _take_plugin(k, self.extension) if tag == "geom" else (k, None, False)
                if k.children:
                    c = k.children[0]
                    if c.tag in UNSUPPORTED.get(tag, ()):
                        raise MJCFUnsupportedError(f"<{c.tag}> (in <{tag}>) is {_WHY.get(c.tag, _NI)}", c.file, c.line,
                                               c.tag)
                    raise MJCFError(f"unknown element (in <{tag}>)", c.file, c.line, c.tag)
                el = self.element(k, key, childclass, frame)
                if plugin is not None:
                    el.attrs["plugin"] = plugin
                    el.attrs["plugin_implicit"] = implicit
                out.children.append(el)

    def flexcomp(self, raw: _Raw, key: str, out: Element, childclass: str | None, frame):
        """<flexcomp>: its vertex bodies become children of `out` here (document order), its flex record is kept
        for the compiler (mjcf/flexcomp.py)."""
        if key in ("frame", "replicate") or frame is not None:
            raise MJCFUnsupportedError(f"<flexcomp> inside a <frame> or <replicate> is {_NI}", raw.file,
                                       raw.line, "flexcomp")  # fmt: skip

        def add_body(name, pos, mass, inertia, axes=("1 0 0", "0 1 0", "0 0 1")):
            def txt(v):
                return " ".join(repr(float(x)) for x in np.atleast_1d(v))

            kids = [_Raw("inertial", {"pos": "0 0 0", "mass": txt(mass), "diaginertia": txt([inertia] * 3)}, [],
                         raw.file, raw.line)]  # fmt: skip
            for axis in axes:
                kids.append(_Raw("joint", {"type": "slide", "pos": "0 0 0", "axis": axis}, [], raw.file, raw.line))
            braw = _Raw("body", {"name": name, "pos": txt(pos)}, kids, raw.file, raw.line)
            b = self.element(braw, sc.key_of(key, "body"), childclass, None)
            self.tree(braw, b, childclass, None)
            out.children.append(b)

        def add_twist_body(name, inertia):
            def txt(v):
                return " ".join(repr(float(x)) for x in np.atleast_1d(v))

            kids = [_Raw("inertial", {"pos": "0 0 0", "mass": "1e-09", "diaginertia": txt([inertia] * 3)}, [],
                         raw.file, raw.line),
                    _Raw("joint", {"name": name, "type": "hinge", "pos": "0 0 0", "axis": "1 0 0"}, [], raw.file,
                         raw.line)]  # fmt: skip
            braw = _Raw("body", {"name": name, "pos": "0 0 0"}, kids, raw.file, raw.line)
            b = self.element(braw, sc.key_of("worldbody", "body"), None, None)
            self.tree(braw, b, None, None)
            self._world_pending.append(b)

        def orient(kind, v, src):
            return orientation_to_quat(kind, v, self.degree, self.eulerseq, src)

        def read_bytes(file, src):  # a type="mesh" or "gmsh" flexcomp's file, found as a <mesh file> is
            model_dir, assets, meshdir, strippath = self.mesh_files
            return _flexcomp_mesh.read_file(file, model_dir or "", meshdir, assets, strippath, src)

        self.flexes.append(_flexcomp.expand(raw, out, _written, orient, add_body, add_twist_body, read_bytes))

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
        suffixes = [r.attrs["sep"] + str(i).zfill(digits) for i in range(count)]
        rec = self._replicates.get(id(raw))
        first = rec is None
        if first:  # (a replicate inside another one is expanded once per outer copy: one record)
            rec = {"suffixes": suffixes, "names": {}, "where": raw}
        pos, quat = np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0])
        for i in range(count):
            fr = (pos, quat) if frame is None else (frame[0] + _qrot(frame[1], pos), quat_mul(frame[1], quat))
            n0 = len(out.children)
            self.tree(raw, out, childclass, fr)
            if i == 0 and first:  # the names of the template (before this level's suffix), for compose.replicate
                for el in out.children[n0:]:
                    _template_names(el, rec["names"])
            for el in out.children[n0:]:
                _rename(el, suffixes[i], rec, i)
            pos = pos + _qrot(quat, off)
            quat = quat_mul(quat, rq)
        if first:
            self._replicates[id(raw)] = rec  # inner replicates are recorded first


_NAME_TYPES = {"body": "body", "joint": "joint", "freejoint": "joint", "geom": "geom", "site": "site",
               "camera": "camera", "light": "light"}  # fmt: skip


def _template_names(el: Element, names: dict[str, set[str]]) -> None:
    t = _NAME_TYPES.get(el.tag)
    if t and el.attrs.get("name"):
        names.setdefault(t, set()).add(el.attrs["name"])
    for c in el.children:
        _template_names(c, names)


def _rename(el: Element, suffix: str, rec: dict | None = None, index: int = 0):
    """Names of a replicate's copy: suffixed. An <attach> in it records the replicate, the copy and the suffix
    (innermost first): compose.py names what it brings and decides what the first copy alone brings."""
    if el.tag == "attach":
        el.attrs["_suffix"] += suffix
        el.attrs["_reps"] = el.attrs["_reps"] + [(rec, index, suffix)]
        return
    if el.attrs.get("name"):
        el.attrs["name"] = el.attrs["name"] + suffix
    el.frames = tuple(f + suffix for f in el.frames)
    for c in el.children:
        _rename(c, suffix, rec, index)


def _apply_frame(el: Element, frame):
    """Express `el` (a child of a <frame>) in the enclosing body's coordinates."""
    fpos, fquat = frame
    a = el.attrs
    if el.tag == "body" and "_local" not in a:
        # MuJoCo copies a body's own pose (before its frame) into an unset inertial frame (the compiler reads it)
        a["_local"] = (np.asarray(a["pos"], dtype=float).copy(), np.asarray(a["quat"], dtype=float).copy())
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
        a["quat"] = np.array(_m._mulquat(list(fquat), [float(x) for x in a["quat"]]))  # normalises, as MuJoCo's
        el.explicit.add("quat")
        el.raw_quat = False
    ft = a.get("fromto")
    if ft is not None:
        a["fromto"] = np.concatenate([fpos + _qrot(fquat, ft[:3]), fpos + _qrot(fquat, ft[3:])])


# ---------------------------------------------------------------------------------------------------------
# top level


def _merge_into(dst: Element, src: Element):
    dst.attrs.update({k: src.attrs[k] for k in src.explicit})
    dst.explicit |= src.explicit


def _build(root: _Raw, assets: dict | None = None, model_dir: str | None = None) -> Element:
    """The spec tree of an include-expanded <mujoco> raw tree; `assets` and `model_dir` locate the files read while
    building it (the meshes of <flexcomp type="mesh">)."""
    if root.tag != "mujoco":
        raise MJCFError("top-level element must be <mujoco>", root.file, root.line, root.tag)
    top_attrs = dict(_BUILTIN["mujoco"])
    top_w = _written(root, "mujoco")
    top_attrs.update(top_w)
    out = Element("mujoco", top_attrs, [], root.file, root.line, set(top_w))

    by_tag: dict[str, list[_Raw]] = {}
    for k in root.children:
        if k.tag in ("body", "frame", "replicate"):  # MuJoCo's schema accepts these here; its reader ignores them
            _schema_only(k, "worldbody")
            continue
        if k.tag not in CHILDREN["mujoco"]:
            if k.tag in UNSUPPORTED["mujoco"]:
                raise MJCFUnsupportedError(f"<{k.tag}> is {_NI}", k.file, k.line, k.tag)
            raise _unknown_element(k, "mujoco", "mujoco")
        by_tag.setdefault(k.tag, []).append(k)

    # compiler settings first: they govern orientation conversion
    comp = Element("compiler", dict(_BUILTIN["compiler"]), [], root.file, root.line, set())
    lr = None
    for raw in by_tag.get("compiler", []):
        _check_unique(raw)
        for k in raw.children:
            if k.tag != "lengthrange":
                raise MJCFError("unknown element (in <compiler>)", k.file, k.line, k.tag)
            _no_children(k)
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
    b.mesh_files = (model_dir or "", assets, comp.attrs.get("meshdir") or comp.attrs.get("assetdir") or "",
                    bool(comp.attrs.get("strippath")))  # fmt: skip
    b.extension = plugins.declarations(by_tag.get("extension", []), _written)

    sections: dict[str, Element] = {"compiler": comp}
    if "extension" in by_tag:
        sections["extension"] = b.extension
    for tag in SECTION_ORDER:
        raws = by_tag.get(tag, [])
        if tag in ("compiler", "extension"):
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
                    raise _bad("World body cannot have attributes", raw, sorted(raw.attrib)[0])
                b.tree(raw, wb, None, None)
            wb.attrs["_frames"] = b.frame_names  # named frames (for <attach frame=...>)
            wb.attrs["_replicates"] = list(b._replicates.values())  # for compose.replicate
            wb.attrs["_flexes"] = b.flexes  # flex records of the <flexcomp>s (mjcf/flex.py compiles them)
            sections[tag] = wb
            continue
        if tag == "option":
            opt = Element("option", dict(_BUILTIN["option"]), [], root.file, root.line, set())
            flag = Element("flag", dict(_BUILTIN["option/flag"]), [], root.file, root.line, set())
            for i, raw in enumerate(raws):
                _check_unique(raw)
                for k in raw.children:
                    if k.tag != "flag":
                        raise MJCFError("unknown element (in <option>)", k.file, k.line, k.tag)
                    _no_children(k)
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
    _reader_checks(out)
    return out


_MEMORY = re.compile(r"\+?([0-9]+)([KMGTPEkmgtpe]?)")


def _reader_checks(root: Element) -> None:
    """Value checks of MuJoCo's XML reader on <size>, <statistic> and <visual>."""
    for sec in root.children:
        if sec.tag == "size":
            for name in ("nconmax", "njmax", "nstack") + tuple(n for n in sec.attrs if n.startswith("nuser_")):
                v = sec.attrs.get(name)
                if v is not None and v < -1:
                    raise MJCFError(f"{name} must be >= -1", sec.file, sec.line, "size", name)
            mem = sec.attrs.get("memory")
            if "memory" in sec.explicit and mem.strip() != "-1":
                m = _MEMORY.fullmatch(mem.strip())
                shift = 10 * "KMGTPE".index(m.group(2).upper()) + 10 if m and m.group(2) else 0
                if m is None or int(m.group(1)) << shift >= 2**64:
                    raise MJCFError("unsigned integer with an optional suffix {K,M,G,T,P,E} is expected in "
                                    "attribute 'memory' (or the size specified is too big)", sec.file, sec.line,
                                    "size", "memory")  # fmt: skip
        elif sec.tag == "statistic":
            extent = sec.attrs.get("extent")
            if extent is not None and not math.isnan(extent) and extent <= 0:
                raise MJCFError("extent must be strictly positive", sec.file, sec.line, "statistic", "extent")
        elif sec.tag == "visual":
            realtime, znear = 1.0, 0.01
            for c in sec.children:
                if c.tag == "global":
                    realtime = c.attrs["realtime"] if c.attrs.get("realtime") is not None else realtime
                    if realtime <= 0:
                        raise MJCFError("realtime must be greater than 0", c.file, c.line, "global", "realtime")
                elif c.tag == "map":
                    znear = c.attrs["znear"] if c.attrs.get("znear") is not None else znear
                    if znear <= 0:
                        raise MJCFError("znear must be strictly positive", c.file, c.line, "map", "znear")
