"""Model composition: `<asset><model name file/>` and `<attach model body|frame prefix/>` (MuJoCo 3.2+), on the
spec tree.

Each attached model is read on its own (MJCF or URDF, its own includes, defaults, compiler settings and nested
attachments), then grafted where the `<attach>` stands (inside a body, frame, replicate or the world body), as
MuJoCo 4.0 does it:

- `body="b"`: body b of the child and its subtree, posed as in the child, in the frame of the `<attach>`;
  `frame="f"`: the contents of the child's frame f (with its pose); neither: everything in the child's world body.
- Every name the child brings is `prefix + name` (+ the replicate suffix when the `<attach>` is in a
  `<replicate>`); unnamed elements stay unnamed.
- All child assets come along (prefixed; files found as in the child: its directory, meshdir, texturedir).
- Elements outside the tree (tendons, actuators, equalities, sensors, contact pairs and excludes, custom tuples)
  come along when everything they refer to does; numerics, texts and keyframes always (keyframes only with the
  first copy of a replicate). Keyframes keep their values for the child's joints, actuators and mocap bodies; the
  rest of each keyframe row is the composed model's default (qpos0, zeros), and the parent's keyframes get the
  child's defaults likewise (`Element.keysource`, placed by the compiler).
- The child's compiler settings stay with its elements (angle units, autolimits, inertia settings, fitaabb, asset
  directories; `Element.compiler`); model-wide ones (fusestatic, discardvisual, settotalmass) are the parent's.
- The child's `<option>` and `<size>` do not change the parent's under `<compiler conflict="warning">` (the
  default; also "error", which MuJoCo 4.0 treats the same): a warning lists the child's values that differ. Under
  "merge", MuJoCo's per-field rules apply (minimum of tolerances and the timestep, maximum of iteration counts and
  sizes, union of flags, an error for other physical options written differently on both sides, otherwise the
  child's value when only the child wrote it). The child's visual, statistic and default sections are not used
  (its elements keep their defaults).
- Without `model`, a body or frame of the model itself is copied (self-attachment): names prefixed, assets shared,
  elements outside the tree that refer only to the copied subtree duplicated, no keyframes.
"""

from __future__ import annotations

import copy
import math
import os
import warnings
from collections.abc import Callable

import numpy as np

from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.parse import SECTION_ORDER, _apply_frame
from mjx_lite.mjcf.spec import Element, MJCFError, MJCFUnsupportedError, MJCFWarning

_TREE_TYPES = {"body": "body", "joint": "joint", "freejoint": "joint", "geom": "geom", "site": "site",
               "camera": "camera", "light": "light"}  # fmt: skip
_ASSET_TYPES = {"mesh": "mesh", "hfield": "hfield", "texture": "texture", "material": "material", "skin": "skin"}
# reference attributes -> object type (sensors' objname/refname and tuples' objname take their objtype's)
_REFS = {
    "body": "body", "body1": "body", "body2": "body", "subtree1": "body", "subtree2": "body", "target": "body",
    "joint": "joint", "joint1": "joint", "joint2": "joint", "jointinparent": "joint",
    "geom": "geom", "geom1": "geom", "geom2": "geom",
    "site": "site", "site1": "site", "site2": "site", "sidesite": "site", "cranksite": "site",
    "slidersite": "site", "refsite": "site",
    "tendon": "tendon", "tendon1": "tendon", "tendon2": "tendon", "actuator": "actuator", "camera": "camera",
    "material": "material", "mesh": "mesh", "hfield": "hfield", "texture": "texture",
}  # fmt: skip
_OBJTYPE = {"body": "body", "xbody": "body", "geom": "geom", "site": "site", "camera": "camera", "joint": "joint",
            "tendon": "tendon", "actuator": "actuator", "light": "light", "mesh": "mesh", "hfield": "hfield",
            "texture": "texture", "material": "material", "sensor": "sensor", "equality": "equality"}  # fmt: skip
_ASSET_REFS = {"material", "mesh", "hfield", "texture"}
# non-tree sections, in the order their dependencies resolve (actuators may name tendons, sensors actuators)
_SECTIONS = ("tendon", "actuator", "equality", "contact", "sensor", "custom")
# <compiler conflict="merge">: per-field rules (MuJoCo's modeling guide, "Attribute merging")
_MIN = {"timestep", "tolerance", "ls_tolerance", "noslip_tolerance", "ccd_tolerance", "sleep_tolerance"}
_MAX = {"iterations", "ls_iterations", "noslip_iterations", "ccd_iterations", "sdf_iterations", "sdf_initpoints",
        "memory", "nkey", "nuserdata"}  # fmt: skip
_ERROR = {"gravity", "wind", "magnetic", "density", "viscosity", "integrator", "cone", "jacobian", "solver",
          "impratio", "o_margin", "o_solref", "o_solimp", "o_friction"}  # fmt: skip


def _err(el: Element, msg: str, attr: str | None = None) -> MJCFError:
    return MJCFError(msg, el.file, el.line, el.tag, attr)


def _section(root: Element, tag: str) -> Element | None:
    return next((s for s in root.children if s.tag == tag), None)


def _walk(el: Element):
    yield el
    for c in el.children:
        yield from _walk(c)


def _layout(root: Element) -> dict[str, list]:
    """The joints, actuators and mocap bodies of a model in its own order (its keyframes' layout)."""
    wb = _section(root, "worldbody")
    joints, mocap = [], []

    def visit(el):
        for c in el.children:
            if c.tag in ("joint", "freejoint"):
                joints.append(c)
        for c in el.children:
            if c.tag == "body":
                if c.attrs.get("mocap"):
                    mocap.append(c)
                visit(c)

    if wb is not None:
        visit(wb)
    acts = [a for s in root.children if s.tag == "actuator" for a in s.children]
    return {"joints": joints, "actuators": acts, "mocap": mocap}


def _keys(root: Element) -> list[Element]:
    return [k for s in root.children if s.tag == "keyframe" for k in s.children]


def has_composition(root: Element) -> bool:
    asset = _section(root, "asset")
    if asset is not None and any(c.tag == "model" for c in asset.children):
        return True
    wb = _section(root, "worldbody")
    return wb is not None and any(e.tag == "attach" for e in _walk(wb))


def resolve(root: Element, load: Callable[[Element], Element], compiler_settings: Callable[[Element], dict],
            directory: str | None) -> None:
    """Replace every <attach> of `root` (a built spec tree) by what it attaches, in document order.

    load(model_el): the spec tree of a <model> asset (composed itself); compiler_settings(tree): its typed compiler
    settings; directory: where the model's own files are (for its assets' compiler settings)."""
    asset = _section(root, "asset")
    models: dict[str, tuple[Element, Element]] = {}
    if asset is not None:
        for m in [c for c in asset.children if c.tag == "model"]:
            child = load(m)
            name = m.attrs.get("name") or child.attrs.get("model") or ""
            if name in models:
                raise _err(m, f"repeated name '{name}' in model", "name")
            models[name] = (m, child)
        asset.children = [c for c in asset.children if c.tag != "model"]
    wb = _section(root, "worldbody")
    placeholders = [] if wb is None else [(e, p) for p in _walk(wb) for e in p.children if e.tag == "attach"]
    if not placeholders:
        return
    policy = _section(root, "compiler").attrs.get("conflict") or "warning"
    for att, parent in placeholders:
        mname = att.attrs.get("model")
        if mname is None:
            _self_attach(root, att, parent)
            continue
        if mname not in models:
            raise _err(att, f"could not find model '{mname}'", "model")
        model_el, child = models[mname]
        child = copy.deepcopy(child)
        cfg = dict(compiler_settings(child))
        cfg["_model_dir"] = os.path.dirname(child.file) if os.path.isfile(child.file) else directory
        if all(i == 0 for _, i, _ in att.attrs["_reps"]):  # (once for the copies of a replicate)
            _merge_globals(root, child, policy, att, mname)
        _graft(root, att, parent, child, mname, cfg)


def _select(att: Element, child: Element, what: str) -> tuple[list[Element], Element | None]:
    """The child's elements an <attach> takes (and the body they come from, None for the world)."""
    wb = _section(child, "worldbody")
    deformable = _section(child, "deformable")
    if wb.attrs.get("_flexes") or (deformable is not None and any(c.tag == "flex" for c in deformable.children)):
        raise MJCFUnsupportedError(f"<attach> of {what}, which has a <flexcomp> or a <deformable><flex>, is not "
                                   "supported by mjx_lite", att.file, att.line, att.tag, "model")  # fmt: skip
    body, frame = att.attrs.get("body"), att.attrs.get("frame")
    if body is not None:
        for e in _walk(wb):
            if e.tag == "body" and e.attrs.get("name") == body:
                return [e], None
        raise _err(att, f"could not find body '{body}' in {what}", "body")
    if frame is not None:
        for owner in _walk(wb):
            items = [c for c in owner.children if frame in c.frames]
            if items:
                return items, owner
        if frame in (wb.attrs.get("_frames") or ()):
            return [], None
        raise _err(att, f"could not find frame '{frame}' in {what}", "frame")
    return [c for c in wb.children if c.tag != "attach"], None


def _names(items: list[Element]) -> dict[str, set[str]]:
    """Names of the tree objects in `items` and their subtrees, by object type."""
    out: dict[str, set[str]] = {t: set() for t in set(_TREE_TYPES.values())}
    for it in items:
        for e in _walk(it):
            t = _TREE_TYPES.get(e.tag)
            if t and e.attrs.get("name"):
                out[t].add(e.attrs["name"])
    return out


def _refs(el: Element):
    """(attribute, object type, name) of every reference `el` and its children make."""
    for e in _walk(el):
        a = e.attrs
        for k, v in a.items():
            if k in _REFS and isinstance(v, str) and v and not (k == "body" and e.tag in _TREE_TYPES):
                yield e, k, _REFS[k], v
        for t, n in (("objtype", "objname"), ("reftype", "refname")):
            if a.get(t) is not None and isinstance(a.get(n), str) and a[n]:
                yield e, n, _OBJTYPE.get(str(a[t]), str(a[t])), a[n]


def _kept(el: Element, known: dict[str, set[str]]) -> bool:
    """Whether every object `el` refers to (assets aside) comes along."""
    for _, _, t, name in _refs(el):
        if t in _ASSET_REFS:
            continue
        if t == "body" and name == "world":
            continue
        if name not in known.get(t, set()):
            return False
    return True


def _rename(el: Element, prefix: str, suffix: str, known: dict[str, set[str]], assets: bool) -> None:
    """Prefix the names of `el` (and its subtree) and of the objects it refers to that come along (asset names:
    the prefix alone, the assets come once)."""
    for e in _walk(el):
        if e.attrs.get("name"):
            e.attrs["name"] = prefix + e.attrs["name"] + suffix
        e.frames = tuple(prefix + f + suffix for f in e.frames)
    for e, attr, t, name in list(_refs(el)):
        if t in _ASSET_REFS:
            if assets:
                e.attrs[attr] = prefix + name
        elif not (t == "body" and name == "world") and name in known.get(t, set()):
            e.attrs[attr] = prefix + name + suffix


def _place(items: list[Element], frame) -> None:
    if frame is None:
        return
    fpos, fquat = frame
    for it in items:
        _apply_frame(it, (np.asarray(fpos, float), np.asarray(fquat, float)))


def _set_compiler(el: Element, cfg: dict) -> None:
    for e in _walk(el):
        if e.compiler is None:
            e.compiler = cfg
        for d in e.defaults:
            if d.compiler is None:
                d.compiler = cfg


def _graft(root: Element, att: Element, parent: Element, child: Element, mname: str, cfg: dict) -> None:
    prefix, suffix = att.attrs["prefix"] or "", att.attrs["_suffix"]
    reps = att.attrs["_reps"]  # enclosing replicates, innermost first: (record, copy index, suffix)
    first = all(i == 0 for _, i, _ in reps)  # MuJoCo attaches once, into the replicate's template
    items, _ = _select(att, child, f"model asset '{mname}'")
    known = _names(items)
    if att.attrs.get("body") is None and att.attrs.get("frame") is None:
        known["body"].add("world")
    own_keys = [k for k in _keys(child) if k.keysource is None]  # (a nested attachment's keys keep their names)
    layout = _layout(child)
    for k in own_keys:
        k.keysource = layout
    # non-tree elements that come along, in dependency order
    carried: dict[str, list[Element]] = {}
    for tag in _SECTIONS:
        for sec in [s for s in child.children if s.tag == tag]:
            for el in sec.children:
                if (tag == "custom" and el.tag in ("numeric", "text")) or _kept(el, known):
                    carried.setdefault(tag, []).append(el)
                    t = {"tendon": "tendon", "actuator": "actuator"}.get(tag)
                    if t and el.attrs.get("name"):
                        known.setdefault(t, set()).add(el.attrs["name"])
    for L, (rec, _, _) in enumerate(reps):  # what the replicates' copies of the template refer to
        if all(i == 0 for _, i, _ in reps[L:]):
            inner = "".join(sx for _, _, sx in reps[:L])
            for t, names in known.items():
                rec["names"].setdefault(t, set()).update(prefix + n + inner for n in names if n != "world")
    assets = [a for s in child.children if s.tag == "asset" for a in s.children if a.tag != "model"]
    if not first:  # the other copies of a replicate: the tree only (replicate() copies the rest)
        carried, assets, own_keys = {}, [], []
    keys = _keys(child) if first else []
    for el in items:
        _rename(el, prefix, suffix, known, assets=True)
        _set_compiler(el, cfg)
    for el in [e for v in carried.values() for e in v] + assets:
        _rename(el, prefix, "", known, assets=True)
        _set_compiler(el, cfg)
    for k in own_keys:  # (keyframe names take the prefix only, as in MuJoCo)
        _rename(k, prefix, "", known, assets=True)
    _check_names(root, items + assets, att, prefix)
    _place(items, att.attrs["_frame"])
    i = parent.children.index(att)
    parent.children[i : i + 1] = items
    for tag, els in carried.items():
        _append(root, tag, els, att)
    if assets:
        _append(root, "asset", assets, att)
    if keys:
        _append(root, "keyframe", keys, att)


def _namespace(el: Element) -> str | None:
    return _TREE_TYPES.get(el.tag) or _ASSET_TYPES.get(el.tag)


def _check_names(root: Element, new: list[Element], att: Element, prefix: str) -> None:
    """MuJoCo's error for an attachment whose (prefixed) names are taken in the parent already."""
    taken: set[tuple[str, str]] = set()
    for sec in root.children:
        if sec.tag in ("worldbody", "asset"):
            for e in _walk(sec):
                if e.tag != "attach" and _namespace(e) and e.attrs.get("name"):
                    taken.add((_namespace(e), e.attrs["name"]))
    for it in new:
        for e in _walk(it):
            name = e.attrs.get("name")
            if name and (_namespace(e), name) in taken:
                plain = name[len(prefix):] if name.startswith(prefix) else name
                raise _err(att, f"cannot attach: element {plain} already exists with prefix {prefix}", "prefix")


def _append(root: Element, tag: str, els: list[Element], where: Element) -> None:
    sec = _section(root, tag)
    if sec is None:
        sec = Element(tag, {}, [], where.file, where.line)
        order = {t: i for i, t in enumerate(SECTION_ORDER)}
        pos = next((i for i, s in enumerate(root.children) if order.get(s.tag, 99) > order[tag]), len(root.children))
        root.children.insert(pos, sec)
    sec.children.extend(els)


def _self_attach(root: Element, att: Element, parent: Element) -> None:
    """<attach> without a model: a copy of a body or frame of this model."""
    if att.attrs.get("body") is None and att.attrs.get("frame") is None:
        raise _err(att, "self-attachment needs a body or a frame", "body")
    items, _ = _select(att, root, "this model")
    if any(e.tag == "attach" for it in items for e in _walk(it)):
        raise MJCFUnsupportedError("a self-<attach> of a part of the model that holds an <attach> is not supported "
                                   "by mjx_lite", att.file, att.line, att.tag)  # fmt: skip
    known = _names(items)
    copies = copy.deepcopy(items)
    prefix, suffix = att.attrs["prefix"] or "", att.attrs["_suffix"]
    carried: dict[str, list[Element]] = {}
    for tag in _SECTIONS:
        for sec in [s for s in root.children if s.tag == tag]:
            for el in sec.children:
                if tag != "custom" and any(True for _ in _refs(el)) and _kept(el, known):
                    carried.setdefault(tag, []).append(copy.deepcopy(el))
                    t = {"tendon": "tendon", "actuator": "actuator"}.get(tag)
                    if t and el.attrs.get("name"):
                        known.setdefault(t, set()).add(el.attrs["name"])
    for el in copies + [e for v in carried.values() for e in v]:
        _rename(el, prefix, suffix, known, assets=False)
    _check_names(root, copies, att, prefix)
    _place(copies, att.attrs["_frame"])
    i = parent.children.index(att)
    parent.children[i : i + 1] = copies
    for tag, els in carried.items():
        _append(root, tag, els, att)


# ---------------------------------------------------------------------------------------------------------
# the child's <option> and <size> against the parent's


def _fmt(v) -> str:
    if isinstance(v, np.ndarray):
        return " ".join(f"{x:g}" for x in v.reshape(-1))
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a, float).reshape(-1), np.asarray(b, float).reshape(-1)
        return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _memory(v) -> float:
    s = str(v).strip()
    if s == "-1":
        return -1
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50, "E": 1 << 60}
    if s and s[-1].upper() in mult:
        return float(s[:-1]) * mult[s[-1].upper()]
    return float(s)


def _merge_globals(root: Element, child: Element, policy: str, att: Element, mname: str) -> None:
    lines: list[str] = []
    for tag in ("option", "size"):
        p, c = _section(root, tag), _section(child, tag)  # (both always present in a built tree)
        pairs = [(p, c, False)]
        if tag == "option":
            pf, cf = p.find("flag"), c.find("flag")
            if cf and pf:
                pairs.append((pf[0], cf[0], True))
        for pe, ce, flags in pairs:
            for name in sorted(ce.explicit):
                cv, pv = ce.attrs.get(name), pe.attrs.get(name)
                if cv is None or _same(cv, pv):
                    continue
                authored = name in pe.explicit
                shown = f"{name}: parent has {_fmt(pv)}{'' if authored else ' (default)'}, child has {_fmt(cv)}"
                if policy != "merge":
                    lines.append(shown + ", keeping parent value")
                    continue
                if flags:
                    on = str(cv).lower() == ("disable" if name in sc.FLAGS_ENABLED else "enable")
                    if on:
                        pe.attrs[name] = cv
                        pe.explicit.add(name)
                        lines.append(f"flag '{name}': added from child")
                    continue
                if name == "actuatorgroupdisable":
                    groups = sorted(set(np.atleast_1d(pv if pv is not None else []).tolist())
                                    | set(np.atleast_1d(cv).tolist()))  # fmt: skip
                    pe.attrs[name] = np.array(groups, np.int64)
                    pe.explicit.add(name)
                    lines.append(f"{name}: union of parent and child")
                elif not authored:
                    pe.attrs[name] = cv
                    pe.explicit.add(name)
                    lines.append(shown + ", adopting child value")
                elif name in _MIN or name in _MAX:
                    key = _memory if name == "memory" else float
                    better = min if name in _MIN else max
                    pe.attrs[name] = better(pv, cv, key=key)
                    lines.append(shown + f", taking the {'minimum' if name in _MIN else 'maximum'}")
                elif name in _ERROR:
                    raise _err(att, f"Attach conflict when attaching '{mname}', policy is 'merge'\n{shown}", "model")
                else:
                    lines.append(shown + ", keeping parent value")
    if lines:
        warnings.warn(f"{att.file}:{att.line}: attach conflict when attaching '{mname}', policy is '{policy}':\n"
                      + "\n".join(lines), MJCFWarning, stacklevel=6)  # fmt: skip


# ---------------------------------------------------------------------------------------------------------
# <replicate>: the elements outside the tree


def replicate(root: Element) -> None:
    """Copies of the elements outside the tree for every <replicate> (innermost first), as MuJoCo makes them: for
    copy i, every tendon, actuator, contact pair/exclude, sensor and custom tuple that refers to objects of the
    replicate's template is copied with those references (and its name) suffixed (its references to other objects
    unchanged), every equality that refers only to the template (or the world) too, and so is every sensor
    that refers to nothing (a clock, an energy: copies of the earlier copies too, 2**count - 1 in all, as MuJoCo's
    loop does); afterwards the elements that refer to the template are removed (an equality between the template and
    another object is thereby dropped, as MuJoCo 4.0 does)."""
    wb = _section(root, "worldbody")
    first: dict[int, Element] = {}  # id(original) -> its first copy (keyframes laid out over the original)
    for rec in (wb.attrs.get("_replicates") or []) if wb is not None else []:
        names = {t: set(v) for t, v in rec["names"].items()}
        for tag in _SECTIONS:
            for sec in [s for s in root.children if s.tag == tag]:
                lst = sec.children

                def hits(el, names=names, every=False):  # references (the world aside) to the template: any/all
                    refs = [n in names.get(t, ()) for _, _, t, n in _refs(el)
                            if t not in _ASSET_REFS and (t, n) != ("body", "world")]  # fmt: skip
                    return bool(refs) and (all(refs) if every else any(refs))

                for n, sfx in enumerate(rec["suffixes"]):
                    for el in list(lst):
                        free = tag == "sensor" and not any(t not in _ASSET_REFS for _, _, t, _ in _refs(el))
                        # an equality between the template and another object is dropped (as MuJoCo's attach);
                        # the others are copied, their references to other objects unchanged
                        if free or hits(el, every=tag == "equality"):
                            c = copy.deepcopy(el)
                            if c.attrs.get("name"):
                                c.attrs["name"] += sfx
                            for e, attr, t, name in list(_refs(c)):
                                if t not in _ASSET_REFS and name in names.get(t, ()):
                                    e.attrs[attr] = name + sfx
                            lst.append(c)
                            if n == 0:
                                first[id(el)] = c
                gone = [el for el in lst if hits(el)]
                sec.children = [el for el in lst if not hits(el)]
                if tag in ("tendon", "actuator"):  # replicated tendons and actuators: part of the template now
                    names.setdefault(tag, set()).update(el.attrs["name"] for el in gone if el.attrs.get("name"))
    if first:
        for k in _keys(root):
            if k.keysource is not None:
                k.keysource = {kind: [_latest(first, e) for e in els] for kind, els in k.keysource.items()}


def _latest(first: dict[int, Element], el: Element) -> Element:
    while id(el) in first:
        el = first[id(el)]
    return el
