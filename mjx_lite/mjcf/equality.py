"""Compiler pass for <equality>: connect, weld, joint and tendon constraints (mjModel eq_*).

eq_data (12 numbers a constraint, MuJoCo 4.0 layout):
  connect (bodies): [0:3] anchor in body1's frame, [3:6] the same point in body2's frame at qpos0, [10] = 1
  connect (sites):  all zero (the sites are the anchors)
  weld (bodies):    [0:3] anchor in body2's frame, [3:6] position and [6:10] quaternion of body2's anchor frame
                    relative to body1 (relpose; computed at qpos0 when its quaternion is zero, then [11] = 1),
                    [10] torquescale
  weld (sites):     [0:3] = (0, 1, 0) (MuJoCo's default data), [10] torquescale
  joint / tendon:   [0:5] polycoef, [10] = 1
The qpos0 frames are the compiled body_pos/body_quat chain (every joint is at its reference at qpos0).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf.attrs import error, get, register_all, section_children, unsupported, vec
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.flex import records as flex_records
from mjx_lite.mjcf.inertia import quat_mul, rot_vec
from mjx_lite.mjcf.spec import Element
from mjx_lite.types import NEQDATA, EqType, ObjType

_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_DEFAULT_DATA = np.array([0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0], np.float64)


# ------------------------------------------------------------------------------------------ numpy frame algebra


def quat_conj(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


def quat_rot(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate v by unit quaternion q."""
    return rot_vec(v, q)


def body_frames0(ctx: CompileContext) -> tuple[np.ndarray, np.ndarray]:
    """World positions (nbody, 3) and quaternions (nbody, 4) of all bodies at qpos0."""
    parent = np.asarray(ctx.arrays["body_parentid"])
    pos = np.asarray(ctx.arrays["body_pos"], np.float64)
    quat = np.asarray(ctx.arrays["body_quat"], np.float64)
    n = parent.size
    xpos = np.zeros((n, 3))
    xquat = np.zeros((n, 4))
    xquat[0] = (1, 0, 0, 0)
    for b in range(1, n):
        p = parent[b]
        xpos[b] = xpos[p] + quat_rot(xquat[p], pos[b])
        q = quat_mul(xquat[p], quat[b])
        xquat[b] = q / np.linalg.norm(q)
    return xpos, xquat


# ---------------------------------------------------------------------------------------------------- compile


def _flexcomp_equalities(root: Element) -> list[Element]:
    """The <equality><flex> each <flexcomp><edge equality="true"> adds (unnamed, after the <equality> section's
    constraints wherever the sections stand in the file: MuJoCo 4.0 appends them when it compiles the flexcomps)."""
    out = []
    for r in flex_records(root):
        if r["equality"] == 1:
            attrs = {"flex": r["name"], "active": True, "name": None, "class": None,
                     "solref": r["eq_solref"] if r["eq_solref"] is not None else np.array(_SOLREF),
                     "solimp": r["eq_solimp"] if r["eq_solimp"] is not None else np.array(_SOLIMP)}  # fmt: skip
            out.append(Element("flex", attrs, [], r["file"], r["line"], {"flex"}))
    return out


def _distinct(e: Element, i: int, id1: int, id2: int, name: str, attr: str) -> None:
    """MuJoCo refuses an equality constraint between an object and itself."""
    if id1 == id2:
        raise error(e, f"element '{name}' is repeated in equality constraint {i}", attr)


def compile_equality(root: Element, ctx: CompileContext) -> None:
    """Equality constraints -> ctx.arrays (eq_*), ctx.sizes['neq']."""
    eqs = section_children(root, "equality") + _flexcomp_equalities(root)
    register_all(ctx, "equality", eqs)
    n = len(eqs)
    eq_type = np.zeros(n, np.int32)
    obj1 = np.zeros(n, np.int32)
    obj2 = np.zeros(n, np.int32)
    objtype = np.zeros(n, np.int32)
    active = np.zeros(n, bool)
    solref = np.zeros((n, 2))
    solimp = np.zeros((n, 5))
    data = np.zeros((n, NEQDATA))
    frames = None
    for i, e in enumerate(eqs):
        data[i] = _DEFAULT_DATA
        active[i] = bool(get(e, "active", True))
        solref[i] = vec(e, "solref", 2, _SOLREF)
        solimp[i] = vec(e, "solimp", 5, _SOLIMP)
        if e.tag in ("connect", "weld"):
            eq_type[i] = EqType.CONNECT if e.tag == "connect" else EqType.WELD
            s1, s2 = get(e, "site1"), get(e, "site2")
            b1, b2 = get(e, "body1"), get(e, "body2")
            if s1 is not None or s2 is not None:
                if b1 is not None or b2 is not None or "anchor" in e.explicit or "relpose" in e.explicit:
                    raise error(e, "either site1/site2 or body1/body2/anchor/relpose can be given, not both")
                if s1 is None or s2 is None:
                    raise error(e, "site semantics needs both site1 and site2", "site1" if s1 is None else "site2")
                objtype[i] = ObjType.SITE
                obj1[i] = ctx.id_of("site", s1, e, "site1")
                obj2[i] = ctx.id_of("site", s2, e, "site2")
                _distinct(e, i, obj1[i], obj2[i], s1, "site2")
                if e.tag == "connect":
                    data[i] = 0.0
                else:
                    data[i, 10] = float(get(e, "torquescale", 1.0))
                continue
            if b1 is None:
                raise error(e, "body1 (or site1/site2) is required", "body1")
            objtype[i] = ObjType.BODY
            obj1[i] = ctx.id_of("body", b1, e, "body1")
            obj2[i] = ctx.id_of("body", b2, e, "body2") if b2 is not None else 0
            _distinct(e, i, obj1[i], obj2[i], b1, "body2")
            has_anchor = "anchor" in e.explicit and get(e, "anchor") is not None
            if e.tag == "connect" and not has_anchor:
                raise error(e, "connect with body1 requires anchor", "anchor")
            anchor = vec(e, "anchor", 3, (0, 0, 0)) if has_anchor else np.zeros(3)
            data[i, 0:3] = anchor
            if frames is None:
                frames = body_frames0(ctx)
            xpos, xquat = frames
            p1, q1, p2, q2 = xpos[obj1[i]], xquat[obj1[i]], xpos[obj2[i]], xquat[obj2[i]]
            if e.tag == "connect":
                world = p1 + quat_rot(q1, anchor)
                data[i, 3:6] = quat_rot(quat_conj(q2), world - p2)
            else:
                relpose = vec(e, "relpose", 7, (0, 1, 0, 0, 0, 0, 0))
                data[i, 10] = float(get(e, "torquescale", 1.0))
                if np.all(relpose[3:7] == 0):
                    world = p2 + quat_rot(q2, anchor)
                    data[i, 3:6] = quat_rot(quat_conj(q1), world - p1)
                    data[i, 6:10] = quat_mul(quat_conj(q1), q2)
                    data[i, 11] = 1.0
                else:
                    data[i, 3:6] = relpose[0:3]
                    data[i, 6:10] = relpose[3:7] / np.linalg.norm(relpose[3:7])
        elif e.tag in ("joint", "tendon"):
            kind = e.tag
            eq_type[i] = EqType.JOINT if kind == "joint" else EqType.TENDON
            objtype[i] = ObjType.UNKNOWN
            n1, n2 = get(e, kind + "1"), get(e, kind + "2")
            if n1 is None:
                raise error(e, "missing required attribute", kind + "1")
            obj1[i] = ctx.id_of(kind, n1, e, kind + "1")
            obj2[i] = ctx.id_of(kind, n2, e, kind + "2") if n2 is not None else -1
            _distinct(e, i, obj1[i], obj2[i], n1, kind + "2")
            poly = get(e, "polycoef")
            if poly is not None and np.atleast_1d(poly).size > 5:
                raise error(e, f"polycoef takes at most 5 values, got {np.atleast_1d(poly).size}", "polycoef")
            data[i, 0:5] = vec(e, "polycoef", 5, (0, 1, 0, 0, 0))
        elif e.tag == "flex":  # one row per non-rigid edge of the flex (pipeline/constraint.py)
            eq_type[i] = EqType.FLEX
            objtype[i] = ObjType.UNKNOWN
            name = get(e, "flex")
            if name is None:
                raise error(e, "missing required attribute", "flex")
            obj1[i] = ctx.id_of("flex", name, e, "flex")
            obj2[i] = -1
        elif e.tag in ("flexvert", "flexstrain"):
            raise unsupported(e, f"<{e.tag}> flex equality constraints are not supported by mjx_lite")
        elif e.tag == "distance":
            raise error(e, "distance equality constraints were removed in MuJoCo 2.2.2")
        else:
            raise error(e, f"unknown equality type <{e.tag}>")
    ctx.arrays.update(
        eq_type=eq_type, eq_obj1id=obj1, eq_obj2id=obj2, eq_objtype=objtype, eq_active0=active,
        eq_solref=solref, eq_solimp=solimp, eq_data=data,
    )  # fmt: skip
    ctx.sizes["neq"] = n
