"""A differential MJCF fuzzer: mutants of the reference models, loaded by MuJoCo (the oracle) and by mjx_lite.

A case is a seed: `make_case(seed, bases)` picks a reference model and one mutation kind from the seed alone, so a
case is reproduced by its seed (and the list of base models). `Runner.run` writes the mutant next to the original
(in a shadow directory of symlinks to the model's directory, so includes, meshes and textures resolve as for the
original; the reference files are used in place, never copied or modified), loads it with
`mujoco.MjModel.from_xml_path` and with `mjx_lite.load_mjcf`, and classifies the pair:

  both_reject       MuJoCo and mjx_lite reject it (ours: an MJCFError, which names file and line)
  equal             both accept it and every compiled field agrees (`compare`: tests.oracle.compare_models with
                    its tolerances, and the documented exceptions listed there)
  allowed_reject    MuJoCo accepts, we reject with MJCFUnsupportedError (a documented unsupported feature) or a
                    message on the commented allow-list ALLOWED_REJECTS
  false_accept      MuJoCo rejects, we accept                                                        -> failure
  false_reject      MuJoCo accepts, we reject for another reason                                     -> failure
  mismatch          both accept, compiled fields differ                                              -> failure
  crash             we raise anything but an MJCFError                                               -> failure
  hang              our load exceeds the per-case timeout (SIGALRM)                                  -> failure

MuJoCo's asset cache is switched off while a Runner is open (it skips checks of files it loaded before). MuJoCo
runs in this process: a case that crashed MuJoCo itself would end the run (none has).

Mutation kinds (KINDS): structural (delete, duplicate, move an element, unknown elements), values (random valid
values from the schema, extreme values, wrong arity, non-numeric, empty, keywords), names and references
(duplicate names, dangling references), files (missing files, bad includes, degenerate meshes), and the XML
itself (broken syntax, DOCTYPE entities).
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import os
import random
import re
import signal
import tempfile

import jax
import mujoco
import numpy as np
from lxml import etree

import mjx_lite
from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import oracle

KINDS = (
    "delete_element", "duplicate_element", "move_element", "unknown_element", "unknown_attribute", "random_value",
    "extreme_value", "wrong_arity", "non_numeric", "empty_value", "keyword", "duplicate_name", "dangling_reference",
    "missing_file", "bad_include", "degenerate_mesh", "broken_xml", "xml_entity",
)  # fmt: skip
FAILURES = ("false_accept", "false_reject", "mismatch", "crash", "hang")
OUTCOMES = ("both_reject", "equal", "allowed_reject") + FAILURES

# Rejections of models MuJoCo accepts that are deliberate (each with its reason). A rejection through
# MJCFUnsupportedError (an unsupported MuJoCo feature, named in the message) is always allowed.
ALLOWED_REJECTS: tuple[tuple[str, str], ...] = (
    # float32 Models: a value MuJoCo stores in double precision but that overflows float32 cannot be represented
    # in a float32 Model; we refuse it at load instead of simulating with inf (docs/mjcf.md). (Only with
    # jax_enable_x64 off; the test suite runs in float64, so this entry is for completeness.)
    (r"does not fit the Model's float32", "float32 Model overflow (deliberate)"),
)

# Values for the value mutations
EXTREME = ("1e400", "-1e400", "1e308", "1.7976931348623159e308", "3.5e38", "-3.5e38", "1e300", "1e20", "-1e20",
           "1e-320", "1e-15", "1e-5", "0", "-0", "inf", "-inf", "nan", "-1", "2147483647", "2147483648",
           "-2147483649", "4294967296", "99999999999999999999")  # fmt: skip
NON_NUMERIC = ("abc", "1,2,3", "0x10", "0x1p3", "1e", "--1", "1_0", "1 2 x", ".", "+.5", "5.", "1.0f", "1e+",
               "\u00a01", "\u0663", "nan(7)", "INF", "infinity", "0b1", "1..2", "true", "#1", "1/2")  # fmt: skip
BAD_KEYWORDS = ("", " ", "Hinge", "BOX", "true ", " false", "auto1", "none", "0", "1", "yes", "TRUE", "sphere box")
UNKNOWN_TAGS = ("fuzz", "joint", "geom", "body", "site", "inertial", "freejoint", "motor", "key", "default",
                "mesh", "texture", "material", "worldbody", "option", "flag", "compiler", "include", "frame",
                "camera", "light", "pair", "exclude", "connect", "weld", "fixed", "spatial", "plugin", "composite",
                "flexcomp", "replicate", "attach", "skin", "general", "position", "jointpos", "touch")  # fmt: skip
UNKNOWN_ATTRS = ("fuzz", "pos", "size", "type", "kp", "joint", "class", "name", "mass", "range", "limited",
                 "gear", "file", "childclass", "mocap", "material", "rgba", "condim", "axis", "ctrlrange", "site",
                 "fromto", "xmlns", "quat", "euler")  # fmt: skip
REF_ATTRS = ("joint", "joint1", "joint2", "body", "body1", "body2", "site", "site1", "site2", "geom", "geom1",
             "geom2", "tendon", "tendon1", "tendon2", "mesh", "hfield", "material", "texture", "class",
             "childclass", "target", "actuator", "objname", "refname", "cranksite", "slidersite", "refsite",
             "jointinparent", "sidesite", "camera")  # fmt: skip
DEGENERATE_VERTS = {
    "three_points": "0 0 0 1 0 0 0 1 0",
    "coplanar": "0 0 0 1 0 0 0 1 0 1 1 0",
    "collinear": "0 0 0 1 0 0 2 0 0 3 0 0",
    "duplicates": "0 0 0 0 0 0 0 0 0 0 0 0",
    "tiny": "0 0 0 1e-12 0 0 0 1e-12 0 0 0 1e-12",
    "huge": "0 0 0 1e20 0 0 0 1e20 0 0 0 1e20",
    "tetra": "0 0 0 1 0 0 0 1 0 0 0 1",
    "cube": "-1 -1 -1 1 -1 -1 -1 1 -1 1 1 -1 -1 -1 1 1 -1 1 -1 1 1 1 1 1",
    "nan": "0 0 0 1 0 0 0 1 0 0 0 nan",
    "not_multiple_of_3": "0 0 0 1 0 0 0 1 0 0 0",
    "two_points": "0 0 0 1 1 1",
}
DEGENERATE_EXTRA = ("", "", ' face="0 1 2"', ' face="0 1 7"', ' face="0 1"', ' scale="0 0 0"', ' scale="-1 1 1"',
                    ' maxhullvert="4"', ' maxhullvert="3"', ' inertia="shell"', ' inertia="exact"',
                    ' refquat="0 0 0 0"', ' smoothnormal="true"')  # fmt: skip


@dataclasses.dataclass
class Case:
    seed: int
    base: str  # the reference model the mutant is made from
    kind: str
    what: str  # the mutation, in words
    xml: bytes  # the mutant's main file
    files: dict[str, bytes] = dataclasses.field(default_factory=dict)  # extra files written beside it

    def title(self) -> str:
        return f"seed {self.seed}: {self.kind} of {os.path.relpath(self.base, oracle.SITE_PACKAGES)}: {self.what}"


@dataclasses.dataclass
class Result:
    case: Case
    outcome: str
    detail: str = ""


# ----------------------------------------------------------------------------------------------------------
# mutations (on an lxml tree of the main file; the text-level ones on its bytes)


def _elements(root) -> list:
    return [e for e in root.iter() if isinstance(e.tag, str) and e is not root]


def _schema_key(e) -> str | None:
    parent = e.getparent()
    ptag = parent.tag if parent is not None and isinstance(parent.tag, str) else ""
    if ptag == "default":
        key = "default/" + e.tag
        return key if key in sc.SCHEMA else None
    key = sc.key_of(ptag, e.tag)
    if ptag == "visual":
        key = "visual/" + e.tag
    return key if key in sc.SCHEMA else None


# Sizes of arrays that MuJoCo (and we) allocate while compiling: an extreme value makes both try to allocate
# gigabytes (a 2147483647-wide texture, 2**31 keyframes, a huge replicate), which on a shared test machine is not
# a test but an outage. Value mutations leave these alone; their range checks have regression tests instead.
HUGE_ALLOCATION = {("texture", "width"), ("texture", "height"), ("texture", "nchannel"), ("hfield", "nrow"),
                   ("hfield", "ncol"), ("size", "nkey"), ("replicate", "count"), ("numeric", "size"),
                   ("mesh", "params"), ("default/texture", "width"), ("default/texture", "height"),
                   ("default/texture", "nchannel")}  # fmt: skip


def _numeric_attrs(e) -> list[tuple[str, object]]:
    key = _schema_key(e)
    if key is None:
        return []
    return [(n, a) for n, a in sc.SCHEMA[key].items() if a.kind in ("real", "int") and (key, n) not in HUGE_ALLOCATION]


def _count(a) -> int:
    c = a.count
    if c == -1:
        return 3
    if isinstance(c, tuple):
        return c[1]
    return int(c)


def _random_number(rng: random.Random, kind: str) -> str:
    if kind == "int":
        return str(rng.choice((-1, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7)))
    r = rng.random()
    if r < 0.3:
        v = rng.uniform(-2, 2)
    elif r < 0.6:
        v = rng.uniform(0.001, 1.0)
    elif r < 0.8:
        v = rng.choice((0.0, 1.0, 0.5, 0.1, 2.0, -1.0))
    else:
        v = 10 ** rng.uniform(-6, 6) * rng.choice((1, -1))
    return repr(round(v, 6))


def _random_value(rng: random.Random, a) -> str:
    if a.kind in ("real", "int"):
        return " ".join(_random_number(rng, a.kind) for _ in range(rng.randint(1, _count(a)) if a.count != 1 else 1))
    if a.kind == "keyword":
        return rng.choice(a.keywords)
    if a.kind == "bool":
        return rng.choice(("true", "false"))
    if a.kind == "auto_bool":
        return rng.choice(("true", "false", "auto"))
    return rng.choice(("", "a", "fuzz", "world", "main"))


def _names(root) -> list[str]:
    return sorted({e.get("name") for e in _elements(root) if e.get("name")} | {"world"})


def mutate(rng: random.Random, kind: str, root, text: bytes, base: str) -> tuple[str, bytes, dict[str, bytes]]:
    """Apply one mutation of `kind`; returns (what, new main-file bytes, extra files)."""
    els = _elements(root)
    files: dict[str, bytes] = {}

    def pick(filter_=None):
        cands = [e for e in els if filter_ is None or filter_(e)]
        return rng.choice(cands) if cands else None

    def out() -> bytes:
        return etree.tostring(root)

    def where(e) -> str:
        return f"<{e.tag}> line {e.sourceline}"

    if kind == "delete_element":
        e = pick()
        e.getparent().remove(e)
        return f"deleted {where(e)}", out(), files
    if kind == "duplicate_element":
        e = pick()
        e.addnext(copy.deepcopy(e))
        return f"duplicated {where(e)}", out(), files
    if kind == "move_element":
        e = pick()
        target = pick(lambda t: t is not e and e not in t.iterancestors())
        if target is None:
            return "no move", text, files
        e.getparent().remove(e)
        target.append(e)
        return f"moved {where(e)} into <{target.tag}>", out(), files
    if kind == "unknown_element":
        parent = pick() if rng.random() < 0.9 else root
        tag = rng.choice(UNKNOWN_TAGS)
        child = etree.SubElement(parent, tag)
        if rng.random() < 0.5:
            child.set(*rng.choice((("name", "fz"), ("size", ".1"), ("type", "hinge"), ("file", "x.xml"))))
        return f"added <{tag}> to <{parent.tag}>", out(), files
    if kind == "unknown_attribute":
        e = pick() if rng.random() < 0.9 else root
        name = rng.choice(UNKNOWN_ATTRS)
        e.set(name, rng.choice(("1", ".1 .2 .3", "a", "true", "")))
        return f"set {name}={e.get(name)!r} on {where(e)}", out(), files
    if kind in ("random_value", "extreme_value", "wrong_arity", "non_numeric"):
        e = pick(lambda t: bool(_numeric_attrs(t)) or kind == "random_value" and _schema_key(t) is not None)
        if e is None:
            return "no numeric attribute", text, files
        key = _schema_key(e)
        attrs = _numeric_attrs(e) if kind != "random_value" else [
            (n, a) for n, a in sc.SCHEMA[key].items() if (key, n) not in HUGE_ALLOCATION]
        if not attrs:
            return "no attribute", text, files
        name, a = rng.choice(attrs)
        if kind == "random_value":
            v = _random_value(rng, a)
        elif kind == "extreme_value":
            n = _count(a) if a.count != -1 else rng.randint(1, 4)
            vals = [_random_number(rng, a.kind) if a.kind == "real" else "1" for _ in range(n)]
            vals[rng.randrange(n)] = rng.choice(EXTREME)
            if rng.random() < 0.3:
                vals = [rng.choice(EXTREME)] * n
            v = " ".join(vals)
        elif kind == "wrong_arity":
            n = _count(a)
            n = max(0, n + rng.choice((-2, -1, 1, 2)))
            v = " ".join(_random_number(rng, a.kind) for _ in range(n))
        else:
            n = _count(a)
            vals = [_random_number(rng, a.kind) for _ in range(n)]
            vals[rng.randrange(n)] = rng.choice(NON_NUMERIC)
            v = " ".join(vals)
        e.set(name, v)
        return f"set {name}={v!r} on {where(e)}", out(), files
    if kind == "empty_value":
        e = pick(lambda t: bool(t.attrib))
        if e is None:
            return "no attribute", text, files
        name = rng.choice(sorted(e.attrib))
        v = rng.choice(("", " ", "\t\n"))
        e.set(name, v)
        return f"emptied {name} on {where(e)}", out(), files
    if kind == "keyword":
        def has_kw(t):
            key = _schema_key(t)
            return key is not None and any(a.kind in ("keyword", "bool", "auto_bool") for a in sc.SCHEMA[key].values())

        e = pick(has_kw)
        if e is None:
            return "no keyword", text, files
        key = _schema_key(e)
        name = rng.choice([n for n, a in sc.SCHEMA[key].items() if a.kind in ("keyword", "bool", "auto_bool")])
        v = rng.choice(BAD_KEYWORDS) if rng.random() < 0.6 else _random_value(rng, sc.SCHEMA[key][name])
        e.set(name, v)
        return f"set {name}={v!r} on {where(e)}", out(), files
    if kind == "duplicate_name":
        named = [t for t in els if t.get("name")]
        if len(named) < 1:
            return "no names", text, files
        src = rng.choice(named)
        same = [t for t in els if t.tag == src.tag and t is not src]
        e = rng.choice(same) if same and rng.random() < 0.8 else pick()
        e.set("name", src.get("name"))
        return f"named {where(e)} '{src.get('name')}' like {where(src)}", out(), files
    if kind == "dangling_reference":
        e = pick(lambda t: any(t.get(r) is not None for r in REF_ATTRS))
        if e is None:
            e = pick()
            name = rng.choice(REF_ATTRS)
        else:
            name = rng.choice([r for r in REF_ATTRS if e.get(r) is not None])
        v = rng.choice(["nonexistent", ""] + _names(root))
        e.set(name, v)
        return f"set {name}={v!r} on {where(e)}", out(), files
    if kind == "missing_file":
        e = pick(lambda t: t.get("file") is not None)
        if e is None:
            asset = root.find("asset")
            if asset is None:
                asset = etree.SubElement(root, "asset")
            e = etree.SubElement(asset, rng.choice(("mesh", "texture", "hfield")), name="fz_missing")
            if e.tag == "hfield":
                e.set("size", "1 1 1 1")
            elif e.tag == "texture":
                e.set("type", "2d")
        e.set("file", rng.choice(("missing_fuzz.stl", "missing_fuzz.png", "missing/dir/x.obj", "")))
        return f"file={e.get('file')!r} on <{e.tag}>", out(), files
    if kind == "bad_include":
        parent = pick(lambda t: t.tag in ("worldbody", "body", "asset", "default", "actuator"))
        parent = root if parent is None else parent
        inc = etree.SubElement(parent, "include")
        variant = rng.choice(("missing", "self", "twice", "empty_root", "malformed", "children", "unknown_attr",
                              "valid", "empty_file", "other_root"))  # fmt: skip
        name = "__fuzz_inc.xml"
        frag = {"worldbody": '<geom size=".1" pos="0 0 5"/>', "body": '<geom size=".05"/>',
                "asset": '<material name="fz_mat"/>', "default": '<default class="fz_cls"><geom size=".2"/></default>',
                "actuator": "", "mujoco": '<option timestep="0.005"/>'}.get(parent.tag, "")  # fmt: skip
        if variant == "missing":
            inc.set("file", "__fuzz_missing.xml")
        elif variant == "self":
            inc.set("file", os.path.basename(_MUTANT))
        elif variant in ("twice", "valid", "unknown_attr", "children"):
            inc.set("file", name)
            files[name] = f"<mujoco>{frag or '<!-- -->'}</mujoco>".encode()
            if variant == "twice":
                inc.addnext(copy.deepcopy(inc))
            if variant == "unknown_attr":
                inc.set("fuzz", "1")
            if variant == "children":
                etree.SubElement(inc, "geom")
        elif variant == "empty_root":
            inc.set("file", name)
            files[name] = b"<mujoco></mujoco>"
        elif variant == "empty_file":
            inc.set("file", name)
            files[name] = b""
        elif variant == "malformed":
            inc.set("file", name)
            files[name] = f"<mujoco>{frag}".encode()
        else:
            inc.set("file", name)
            files[name] = f"<whatever>{frag}</whatever>".encode()
        return f"include ({variant}) in <{parent.tag}>", out(), files
    if kind == "degenerate_mesh":
        verts_name = rng.choice(sorted(DEGENERATE_VERTS))
        extra = rng.choice(DEGENERATE_EXTRA)
        asset = root.find("asset")
        if asset is None:
            asset = etree.Element("asset")
            root.insert(0, asset)
        mesh = etree.fromstring(f'<mesh name="fz_mesh" vertex="{DEGENERATE_VERTS[verts_name]}"{extra}/>')
        asset.append(mesh)
        body = pick(lambda t: t.tag in ("body", "worldbody"))
        if body is None:
            body = root.find("worldbody")
            if body is None:
                body = etree.SubElement(root, "worldbody")
        gtype = rng.choice(("mesh", "mesh", "mesh", "box", "sphere"))
        etree.SubElement(body, "geom", type=gtype, mesh="fz_mesh")
        return f"mesh {verts_name}{extra} as {gtype} geom in <{body.tag}>", out(), files
    if kind == "broken_xml":
        return _broken(rng, text)
    if kind == "xml_entity":
        secret = "__fuzz_secret.txt"
        files[secret] = b"3 4 5"
        ent = rng.choice((f'<!ENTITY x SYSTEM "{secret}">', '<!ENTITY x "0.25">', f'<!ENTITY x SYSTEM "file:///{secret}">'))
        doc = f"<!DOCTYPE mujoco [{ent}]>".encode()
        e = pick(lambda t: t.get("pos") is not None or t.get("size") is not None)
        e = pick() if e is None else e
        attr = "pos" if e.get("pos") is not None else "size"
        e.set(attr, "&x;")
        body = out().replace(b"&amp;x;", b"&x;")
        return f"DOCTYPE {ent} used in {attr} of {where(e)}", doc + body, files
    raise ValueError(kind)


def _broken(rng: random.Random, text: bytes) -> tuple[str, bytes, dict]:
    n = len(text)
    i = rng.randrange(n)
    variant = rng.choice(("truncate", "drop_gt", "drop_quote", "amp", "lt", "nul", "bad_byte", "stray_close",
                          "dup_attr", "comment_dd", "pi", "trailing", "second_root", "ctrl",
                          "rename_close"))  # fmt: skip
    if variant == "truncate":
        return f"truncated at {i}", text[:i], {}
    if variant in ("drop_gt", "drop_quote"):
        ch = b">" if variant == "drop_gt" else b'"'
        idx = [m.start() for m in re.finditer(re.escape(ch), text)]
        j = rng.choice(idx) if idx else i
        return f"removed {ch!r} at {j}", text[:j] + text[j + 1 :], {}
    # insert at a tag boundary (after a '>')
    idx = [m.end() for m in re.finditer(rb">", text)]
    j = rng.choice(idx) if idx else i
    ins = {
        "amp": b"a & b", "lt": b"<", "nul": b"\x00", "bad_byte": b"\xff\xfe", "stray_close": b"</fuzz>",
        "comment_dd": b"<!-- a -- b -->", "pi": b"<?fuzz x?>", "ctrl": b"\x01", "second_root": b"",
        "trailing": b"", "dup_attr": b"", "rename_close": b"",
    }[variant]  # fmt: skip
    if variant == "trailing":
        return "text after the root", text + rng.choice((b"junk", b"<extra/>", b"<mujoco/>", b"</x>")), {}
    if variant == "second_root":
        return "element before the root", b"<fuzz/>" + text, {}
    if variant == "dup_attr":
        m = list(re.finditer(rb"<(\w+) (\w+)=\"([^\"]*)\"", text))
        if not m:
            return "no attribute", text, {}
        k = rng.choice(m)
        return f"repeated attribute {k.group(2)!r}", text[: k.end()] + b" " + k.group(2) + b'="1"' + text[k.end() :], {}
    if variant == "rename_close":
        m = list(re.finditer(rb"</(\w+)>", text))
        if not m:
            return "no closing tag", text, {}
        k = rng.choice(m)
        return f"closing tag </{k.group(1)!r}> renamed", text[: k.start()] + b"</fuzzx>" + text[k.end() :], {}
    return f"inserted {ins!r} at {j}", text[:j] + ins + text[j:], {}


# ----------------------------------------------------------------------------------------------------------
# cases

# Reference models the fuzzer mutates (used in place). FAST: small models that compile in ~0.1 s (no wrapping
# tendon, whose qpos0 constants need an XLA compilation per new tendon layout); ALL adds the larger ones and the
# tendon/actuator models (the long run).
_FAST_MJX = ("convex.xml", "pendula.xml", "quadratic_frictionloss.xml", "ray.xml", "sensor/model.xml",
             "tendon/fixed.xml", "tendon/no_tendon.xml", "actuator/general_dyntype.xml")  # fmt: skip
_FAST_DM = ("acrobot", "cartpole", "finger", "hopper", "pendulum", "reacher", "swimmer", "walker", "lqr")
_MORE_MJX = ("humanoid/humanoid.xml", "actuator/arm21.xml", "actuator/tendon_force_clamp.xml", "sensor/sensor.xml",
             "tendon/armature.xml", "tendon/fixed_site.xml", "tendon/site.xml", "tendon/pulley_site.xml")  # fmt: skip
_MORE_DM = ("cheetah", "humanoid", "point_mass", "ball_in_cup", "fish", "quadruped", "humanoid_CMU")
FAST_BASES = [os.path.join(oracle.MJX_TEST_DATA, f) for f in _FAST_MJX] + [
    os.path.join(oracle.DM_SUITE, f + ".xml") for f in _FAST_DM]
ALL_BASES = FAST_BASES + [os.path.join(oracle.MJX_TEST_DATA, f) for f in _MORE_MJX] + [
    os.path.join(oracle.DM_SUITE, f + ".xml") for f in _MORE_DM]


_MUTANT = "__fuzz_mutant.xml"


def make_case(seed: int, bases: list[str]) -> Case:
    rng = random.Random(seed)
    base = rng.choice(bases)
    kind = rng.choice(KINDS)
    with open(base, "rb") as f:
        text = f.read()
    root = etree.fromstring(text, etree.XMLParser(remove_comments=True, resolve_entities=False))
    what, xml, files = mutate(rng, kind, root, text, base)
    return Case(seed, base, kind, what, xml, files)


class _DeadlineError(Exception):
    pass


@contextlib.contextmanager
def _deadline(seconds: float):
    def handler(signum, frame):
        raise _DeadlineError()

    old = signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


class Runner:
    """Runs cases; one shadow directory (symlinks to the model directory's entries) per reference directory."""

    def __init__(self, timeout: float = 60.0):
        self.timeout = timeout
        self.tmp = tempfile.TemporaryDirectory(prefix="mjcf_fuzz_")
        self.shadows: dict[str, str] = {}
        # MuJoCo's asset cache skips the checks of a file it loaded before (e.g. "repeated vertex specification"
        # for a mesh with a file): off, so that a case's outcome does not depend on the cases before it
        self._cache_capacity = mujoco.mj_getCacheCapacity(mujoco.mj_getCache())
        mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), 0)

    def close(self):
        mujoco.mj_setCacheCapacity(mujoco.mj_getCache(), self._cache_capacity)
        self.tmp.cleanup()

    def shadow(self, directory: str) -> str:
        if directory not in self.shadows:
            d = os.path.join(self.tmp.name, hashlib.sha1(directory.encode()).hexdigest()[:12])
            os.makedirs(d)
            for entry in os.listdir(directory):
                os.symlink(os.path.join(directory, entry), os.path.join(d, entry))
            self.shadows[directory] = d
        return self.shadows[directory]

    def run(self, case: Case) -> Result:
        d = self.shadow(os.path.dirname(case.base))
        written = [(os.path.join(d, _MUTANT), case.xml)] + [(os.path.join(d, k), v) for k, v in case.files.items()]
        try:
            for p, data in written:
                with open(p, "wb") as f:
                    f.write(data)
            return self._classify(case, written[0][0])
        finally:
            for p, _ in written:
                if os.path.exists(p):
                    os.remove(p)

    def _classify(self, case: Case, path: str) -> Result:
        try:
            mjm = mujoco.MjModel.from_xml_path(path)
            mj_error = None
        except Exception as e:  # noqa: BLE001 - any MuJoCo failure is a rejection
            mjm, mj_error = None, str(e)
        try:
            with _deadline(self.timeout):
                ours = mjx_lite.load_mjcf(path)
            our_error = None
        except _DeadlineError:
            return Result(case, "hang", f"no answer within {self.timeout:g} s")
        except MJCFError as e:
            ours, our_error = None, e
        except Exception as e:  # noqa: BLE001 - anything but an MJCFError is a crash
            return Result(case, "crash", f"{type(e).__name__}: {e}")
        if mjm is None and ours is None:
            return Result(case, "both_reject", f"MuJoCo: {_short(mj_error)} | ours: {_short(str(our_error))}")
        if mjm is None:
            return Result(case, "false_accept", f"MuJoCo: {_short(mj_error)}")
        if ours is None:
            if isinstance(our_error, MJCFUnsupportedError):
                return Result(case, "allowed_reject", f"unsupported: {_short(str(our_error))}")
            for pattern, reason in ALLOWED_REJECTS:
                if re.search(pattern, str(our_error)):
                    return Result(case, "allowed_reject", f"{reason}: {_short(str(our_error))}")
            return Result(case, "false_reject", f"ours: {_short(str(our_error))}")
        try:
            errs = compare(ours, mjm)
        except Exception as e:  # noqa: BLE001 - a comparison that cannot be made is a mismatch
            errs = [f"comparison failed: {type(e).__name__}: {e}"]
        if errs:
            return Result(case, "mismatch", "; ".join(errs[:4]))
        return Result(case, "equal")


# Fields computed from the inverse of the joint-space inertia at qpos0 (and the length-range simulation). Where
# that inertia is singular or nearly so (a mutant with redundant joints, masses near mjMINVAL, masses 1e100 apart)
# both compilers return round-off-determined values (MuJoCo clamps pivots below mjMINVAL in its own elimination
# order), so these fields are not compared for such models; everything else is.
# (dof_M0 too: it cancels terms between masses 1e100 apart, or of size extent^2)
INVERSE_INERTIA_FIELDS = ("actuator_acc0", "body_invweight0", "dof_invweight0", "tendon_invweight0",
                          "actuator_biasprm", "actuator_lengthrange", "jnt_stiffness", "dof_damping",
                          "dof_M0")  # fmt: skip
ILL_CONDITIONED = 1e10  # condition number of M(qpos0) beyond which its inverse is round-off
# Bodies placed this far from the origin (an extreme_value mutant's pos="2147483648 ..."): the joint-space inertia
# about the subtree centres of mass cancels terms of size extent^2, round-off too.
FAR = 1e6
TINY_INERTIA = 1e-10  # smallest eigenvalue of M(qpos0) below which MuJoCo's mjMINVAL pivot clamping matters


def ill_conditioned(mjm: mujoco.MjModel) -> bool:
    """Whether MuJoCo's joint-space inertia at qpos0 is (nearly) singular."""
    if not mjm.nv:
        return False
    if not all(np.all(np.isfinite(getattr(mjm, f))) for f in INVERSE_INERTIA_FIELDS):
        return True  # inf/nan model values (e.g. a written inf): results depend on the order of operations
    d = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, d)
    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, d, full)
    if not np.all(np.isfinite(full)) or np.abs(full).max(initial=0.0) > 1e150:  # (its square overflows)
        return True
    try:
        with np.errstate(all="ignore"):
            eig = np.linalg.eigvalsh(0.5 * (full + full.T))
    except np.linalg.LinAlgError:  # entries 1e300 apart
        return True
    return bool(eig[0] < TINY_INERTIA or eig[-1] > ILL_CONDITIONED * max(eig[0], 1e-300))


def _hull_faces(m, i: int) -> list[tuple[int, int, int]]:
    """Mesh i's triangles, each rotated to start at its smallest vertex id (orientation kept), sorted."""
    adr, num = int(m.mesh_faceadr[i]), int(m.mesh_facenum[i])
    out = []
    for f in np.asarray(m.mesh_face)[adr : adr + num]:
        k = int(np.argmin(f))
        out.append(tuple(int(x) for x in np.roll(f, -k)))
    return sorted(out)


def _free_frame(moments: np.ndarray) -> bool:
    """Two principal moments coincide: the principal frame is free within their plane (oracle.EIG_GAP)."""
    m = np.sort(np.asarray(moments, float))
    return bool(np.min(np.diff(m)) <= oracle.EIG_GAP * max(1.0, float(m[-1])))


def _mesh_moments(m, i: int) -> np.ndarray:
    """Second moments (3,) of mesh i's volume about its (principal) frame, from its vertices and faces (sum over
    the tetrahedra spanned with the origin; only used to tell equal principal moments apart)."""
    v = np.asarray(m.mesh_vert, float)[int(m.mesh_vertadr[i]) : int(m.mesh_vertadr[i] + m.mesh_vertnum[i])]
    f = np.asarray(m.mesh_face)[int(m.mesh_faceadr[i]) : int(m.mesh_faceadr[i] + m.mesh_facenum[i])]
    a, b, c = v[f[:, 0]], v[f[:, 1]], v[f[:, 2]]
    det = np.einsum("ij,ij->i", a, np.cross(b, c))
    sq = a * a + b * b + c * c + a * b + b * c + c * a
    second = (det[:, None] * sq).sum(0) / 60.0  # integral of x^2, y^2, z^2
    return np.array([second[1] + second[2], second[0] + second[2], second[0] + second[1]])


# A model MuJoCo accepts with nan/inf in a pose (it warns "XML contains a 'NaN'" and compiles): the qpos0 constants
# and statistics computed from such poses depend on where the NaN/inf meets which operation, so they are not compared
# (the poses themselves are, NaN matching NaN).
POSE_FIELDS = ("body_pos", "body_quat", "body_ipos", "body_iquat", "jnt_pos", "jnt_axis", "geom_pos", "geom_quat",
               "site_pos", "site_quat", "cam_pos", "cam_quat", "light_pos", "light_dir", "geom_size")  # fmt: skip
QPOS0_FIELDS = INVERSE_INERTIA_FIELDS + ("stat.", "cam_pos0", "cam_poscom0", "cam_mat0", "light_pos0",
                                         "light_poscom0", "light_dir0", "tendon_length0", "actuator_length0",
                                         "body_subtreemass", "dof_length", "tendon_lengthspring")  # fmt: skip


# fields that follow from a mesh's principal frame (its vertices are stored in it; fitted primitives are sized in it)
# (and what the body's inertia takes from a primitive fitted in that frame: body frame, moments, everything after)
MESH_FRAME_FIELDS = ("mesh_quat", "mesh_vert", "mesh_pos", "geom_quat", "geom_pos", "geom_size", "geom_aabb",
                     "geom_rbound", "geom_sameframe", "body_ipos", "body_iquat", "body_inertia", "body_sameframe",
                     "body_invweight0", "stat.", "cam_poscom0", "light_poscom0", "dof_invweight0", "dof_M0",
                     "actuator_acc0", "tendon_invweight0", "actuator_biasprm", "actuator_lengthrange", "dof_length",
                     "body_simple", "dof_simplenum")  # fmt: skip


def compare(ours, mjm) -> list[str]:
    """tests.oracle.compare_models, with five documented exceptions: M^-1-derived fields (INVERSE_INERTIA_FIELDS)
    of ill-conditioned models or models extending beyond FAR; qpos0 constants of models with nan/inf poses
    (QPOS0_FIELDS); the fields that follow from the principal frame of a
    mesh with two equal principal moments (MESH_FRAME_FIELDS: the frame is free about the symmetry axis and MuJoCo's
    choice is round-off); the faces of meshes given without
    faces, which MuJoCo takes from its qhull run
    (same oriented triangles; facet order and first vertex differ from scipy's qhull), compared as sets; and the
    inertia-relative sameframe codes of geoms/sites on bodies whose principal frame is free (two equal moments:
    compare_models exempts body_iquat there too, and the codes follow from it)."""
    skip = INVERSE_INERTIA_FIELDS if ill_conditioned(mjm) else ()
    if not float(mjm.stat.extent) < FAR:
        skip = INVERSE_INERTIA_FIELDS
    if not all(np.all(np.isfinite(getattr(mjm, f))) for f in POSE_FIELDS):
        skip = skip + QPOS0_FIELDS
    if any(_free_frame(_mesh_moments(mjm, i)) for i in range(mjm.nmesh)):
        skip = skip + MESH_FRAME_FIELDS  # a symmetric mesh: its principal frame is free (see _free_frame)
    errs = oracle.compare_models(ours, mjm, skip + ("mesh_face", "geom_sameframe", "site_sameframe"))
    for kind in ("geom", "site"):
        a, b = np.asarray(getattr(ours, kind + "_sameframe")), getattr(mjm, kind + "_sameframe")
        if a.shape != b.shape:
            continue  # reported with the sizes
        for i in np.nonzero(a != b)[0]:
            if not _free_frame(mjm.body_inertia[getattr(mjm, kind + "_bodyid")[i]]):
                errs.append(f"{kind}_sameframe[{i}]: ours {a[i]} mj {b[i]}")
    if not np.array_equal(np.asarray(ours.mesh_face), mjm.mesh_face):
        for i in range(mjm.nmesh):
            if _hull_faces(ours, i) != _hull_faces(mjm, i):
                errs.append(f"mesh {i}: faces differ")
    return errs


def _short(msg: str | None, n: int = 160) -> str:
    msg = (msg or "").replace("\n", " | ")
    return msg if len(msg) <= n else msg[: n - 3] + "..."


def counts(results: list[Result]) -> dict[str, dict[str, int]]:
    """{mutation kind: {outcome: count}} (plus a 'total' row)."""
    table: dict[str, dict[str, int]] = {k: dict.fromkeys(OUTCOMES, 0) for k in KINDS + ("total",)}
    for r in results:
        table[r.case.kind][r.outcome] += 1
        table["total"][r.outcome] += 1
    return table


def format_counts(table: dict[str, dict[str, int]]) -> str:
    head = f"{'kind':20s}" + "".join(f"{o:>15s}" for o in OUTCOMES)
    rows = [head] + [f"{k:20s}" + "".join(f"{v[o]:15d}" for o in OUTCOMES) for k, v in table.items()]
    return "\n".join(rows)


def clear_caches() -> None:
    """Drop JAX's compiled functions (the long run compiles the qpos0 stages of thousands of distinct models)."""
    jax.clear_caches()
