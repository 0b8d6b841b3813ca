"""Compiler pass for <tendon>: fixed and spatial tendons and their wrap paths (mjModel tendon_* and wrap_*).

Length-dependent constants (tendon_length0, tendon_invweight0, the "-1 = from length0" springlength) need
kinematics at qpos0 and are filled by `actuation.finalize_sections` (called by `derived.set_const`).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf.attrs import (
    autolimits,
    error,
    get,
    register_all,
    resolve_limited,
    section_children,
    vec,
)
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.spec import Element
from mjx_lite.mjcf.texture import material_id
from mjx_lite.types import GeomType, WrapType

_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)


def _check_spatial_path(t: Element, path: list[Element], ids: list[int]) -> None:
    """MuJoCo's rules for a spatial path (mjCTendon::Compile): no consecutive pulleys and none last; a site needs
    a neighbour that is not a pulley and is not repeated by the next site; a wrapping geom sits between sites."""
    n = len(path)
    tags = [c.tag for c in path]
    for i, c in enumerate(path):
        if tags[i] == "pulley":
            if i > 0 and tags[i - 1] == "pulley":
                raise error(c, f"consecutive pulleys (pos {i})")
            if i == n - 1:
                raise error(c, "path ends with pulley")
        elif tags[i] == "site":
            if (i == 0 or tags[i - 1] == "pulley") and (i == n - 1 or tags[i + 1] == "pulley"):
                raise error(c, f"site {i} needs a neighbor that is not a pulley")
            if i < n - 1 and tags[i + 1] == "site" and ids[i] == ids[i + 1]:
                raise error(path[i + 1], f"site {i} is repeated", "site")
        elif i == 0 or i == n - 1 or tags[i - 1] != "site" or tags[i + 1] != "site":
            raise error(c, f"geom at pos {i} not bracketed by sites")


def body_treeid(ctx: CompileContext) -> np.ndarray:
    """body_treeid of the compiled tree."""
    return np.asarray(ctx.arrays["body_treeid"])


# ---------------------------------------------------------------------------------------------------- compile


def compile_tendon(root: Element, ctx: CompileContext) -> None:
    """Tendons and wraps -> ctx.arrays (tendon_*, wrap_*), ctx.sizes (ntendon, nwrap)."""
    tendons = section_children(root, "tendon")
    for t in tendons:
        if t.tag not in ("fixed", "spatial"):
            raise error(t, f"unknown tendon type <{t.tag}>")
    register_all(ctx, "tendon", tendons)
    al = autolimits(ctx)
    nt = len(tendons)
    treeid_body = body_treeid(ctx)
    jnt_bodyid = np.asarray(ctx.arrays.get("jnt_bodyid", np.zeros(0, np.int32)))
    geom_bodyid = np.asarray(ctx.arrays.get("geom_bodyid", np.zeros(0, np.int32)))
    site_bodyid = np.asarray(ctx.arrays.get("site_bodyid", np.zeros(0, np.int32)))
    geom_type = np.asarray(ctx.arrays.get("geom_type", np.zeros(0, np.int32)))

    a: dict[str, list] = {k: [] for k in _TENDON_FIELDS}
    wtype: list[int] = []
    wobj: list[int] = []
    wprm: list[float] = []
    for t in tendons:
        adr = len(wtype)
        trees: dict[int, None] = {}  # ordered set: trees in order of first appearance along the path
        has_geom = False
        if t.tag == "fixed":
            path = [c for c in t.children if c.tag == "joint"]
            for c in t.children:
                if c.tag != "joint":
                    raise error(c, "only <joint> elements are allowed in a fixed tendon")
            if not path:
                raise error(t, "fixed tendon has no joints")
            seen: set[int] = set()
            for k, c in enumerate(path):
                jid = ctx.id_of("joint", get(c, "joint", ""), c, "joint")
                if jid in seen:
                    raise error(c, f"joint {k} is repeated", "joint")
                seen.add(jid)
                if int(ctx.arrays["jnt_type"][jid]) not in (2, 3):
                    raise error(c, f"joint '{get(c, 'joint')}' in a fixed tendon must be slide or hinge", "joint")
                coef = get(c, "coef")
                if coef is None:
                    raise error(c, "missing required attribute", "coef")
                wtype.append(WrapType.JOINT)
                wobj.append(jid)
                wprm.append(float(coef))
                trees[int(treeid_body[jnt_bodyid[jid]])] = None
        else:
            path = t.children
            if len(path) < 2:
                raise error(t, "spatial path must contain at least two objects")
            if not float(get(t, "width", 0.003)) > 0:
                raise error(t, "tendon must have positive width", "width")
            ids = []
            for c in path:
                if c.tag == "site":
                    sid = ctx.id_of("site", get(c, "site", ""), c, "site")
                    ids.append(sid)
                    wtype.append(WrapType.SITE)
                    wobj.append(sid)
                    wprm.append(0.0)
                    trees[int(treeid_body[site_bodyid[sid]])] = None
                elif c.tag == "geom":
                    gid = ctx.id_of("geom", get(c, "geom", ""), c, "geom")
                    ids.append(gid)
                    gt = int(geom_type[gid])
                    if gt == GeomType.SPHERE:
                        wt = WrapType.SPHERE
                    elif gt == GeomType.CYLINDER:
                        wt = WrapType.CYLINDER
                    else:
                        raise error(c, "wrapping geom is not sphere or cylinder", "geom")
                    side = get(c, "sidesite")
                    sidesite = ctx.id_of("site", side, c, "sidesite") if side else -1
                    wtype.append(wt)
                    wobj.append(gid)
                    wprm.append(float(sidesite))
                    trees[int(treeid_body[geom_bodyid[gid]])] = None
                    has_geom = True
                elif c.tag == "pulley":
                    div = get(c, "divisor")
                    if div is None or not div > 0:
                        raise error(c, "pulley divisor must be positive", "divisor")
                    ids.append(-1)
                    wtype.append(WrapType.PULLEY)
                    wobj.append(-1)
                    wprm.append(float(div))
                else:
                    raise error(c, f"<{c.tag}> is not allowed in a spatial tendon")
            _check_spatial_path(t, path, ids)
        tree_list = [t for t in trees if t >= 0]
        a["tendon_adr"].append(adr)
        a["tendon_num"].append(len(wtype) - adr)
        a["tendon_type"].append(0 if t.tag == "fixed" else 1)
        a["tendon_group"].append(int(get(t, "group", 0)))
        al = autolimits(ctx, t)
        limited = resolve_limited(t, "limited", "range", al, "tendon")
        rng = vec(t, "range", 2, (0.0, 0.0))
        if limited and not rng[0] < rng[1]:
            raise error(t, "invalid limits: range[0] must be smaller than range[1]", "range")
        a["tendon_limited"].append(limited)
        a["tendon_range"].append(rng)
        afl = resolve_limited(t, "actuatorfrclimited", "actuatorfrcrange", al, "tendon")
        afr = vec(t, "actuatorfrcrange", 2, (0.0, 0.0))
        if afl and not afr[0] < afr[1]:
            raise error(t, "invalid actuatorfrcrange", "actuatorfrcrange")
        a["tendon_actfrclimited"].append(afl)
        a["tendon_actfrcrange"].append(afr)
        a["tendon_solref_lim"].append(vec(t, "solreflimit", 2, _SOLREF))
        a["tendon_solimp_lim"].append(vec(t, "solimplimit", 5, _SOLIMP))
        a["tendon_solref_fri"].append(vec(t, "solreffriction", 2, _SOLREF))
        a["tendon_solimp_fri"].append(vec(t, "solimpfriction", 5, _SOLIMP))
        a["tendon_margin"].append(float(get(t, "margin", 0.0)))
        a["tendon_frictionloss"].append(float(get(t, "frictionloss", 0.0)))
        stiff = vec(t, "stiffness", 3, (0.0, 0.0, 0.0))
        damp = vec(t, "damping", 3, (0.0, 0.0, 0.0))
        a["tendon_stiffness"].append(stiff[0])
        a["tendon_stiffnesspoly"].append(stiff[1:])
        a["tendon_damping"].append(damp[0])
        a["tendon_dampingpoly"].append(damp[1:])
        if float(get(t, "springyield", 0.0)) < 0:
            raise error(t, "springyield cannot be negative in tendon", "springyield")
        a["tendon_springyield"].append(float(get(t, "springyield", 0.0)))
        arm = float(get(t, "armature", 0.0))
        if arm < 0:
            raise error(t, "tendon armature cannot be negative", "armature")
        if arm > 0 and has_geom:
            raise error(t, "geom wrapping not supported by tendon armature", "armature")
        a["tendon_armature"].append(arm)
        sl = get(t, "springlength")
        sl = np.array((-1.0, -1.0) if sl is None else np.atleast_1d(sl), dtype=np.float64)
        if sl.size == 1:
            sl = np.array([sl[0], sl[0]])
        if sl[0] > sl[1]:
            raise error(t, "springlength[0] must not exceed springlength[1]", "springlength")
        a["tendon_lengthspring"].append(sl)
        material_id(ctx, t, what="tendon")
        a["tendon_width"].append(float(get(t, "width", 0.003)))
        a["tendon_treenum"].append(len(tree_list))
        a["tendon_treeid"].append((tree_list + [-1, -1])[:2])
        a["tendon_actuatorid"].append(-1)
        a["tendon_length0"].append(0.0)
        a["tendon_invweight0"].append(0.0)

    shapes = {"tendon_range": (2,), "tendon_actfrcrange": (2,), "tendon_solref_lim": (2,), "tendon_solimp_lim": (5,),
              "tendon_solref_fri": (2,), "tendon_solimp_fri": (5,), "tendon_stiffnesspoly": (2,),
              "tendon_dampingpoly": (2,), "tendon_lengthspring": (2,), "tendon_treeid": (2,)}  # fmt: skip
    for k, (dtype) in _TENDON_FIELDS.items():
        ctx.arrays[k] = np.array(a[k], dtype=dtype).reshape((nt,) + shapes.get(k, ()))
    ctx.arrays["wrap_type"] = np.array(wtype, np.int32)
    ctx.arrays["wrap_objid"] = np.array(wobj, np.int32)
    ctx.arrays["wrap_prm"] = np.array(wprm, np.float64)
    ctx.sizes["ntendon"] = nt
    ctx.sizes["nwrap"] = len(wtype)


_TENDON_FIELDS = {
    "tendon_adr": np.int32, "tendon_num": np.int32, "tendon_type": np.int32, "tendon_group": np.int32,
    "tendon_limited": bool, "tendon_range": np.float64, "tendon_actfrclimited": bool,
    "tendon_actfrcrange": np.float64, "tendon_solref_lim": np.float64, "tendon_solimp_lim": np.float64,
    "tendon_solref_fri": np.float64, "tendon_solimp_fri": np.float64, "tendon_margin": np.float64,
    "tendon_frictionloss": np.float64, "tendon_stiffness": np.float64, "tendon_stiffnesspoly": np.float64,
    "tendon_damping": np.float64, "tendon_dampingpoly": np.float64, "tendon_springyield": np.float64,
    "tendon_armature": np.float64, "tendon_lengthspring": np.float64, "tendon_width": np.float64,
    "tendon_treenum": np.int32, "tendon_treeid": np.int32, "tendon_actuatorid": np.int32,
    "tendon_length0": np.float64, "tendon_invweight0": np.float64,
}  # fmt: skip
