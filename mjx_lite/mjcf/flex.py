"""Compiler pass for flexes (the records `mjcf/flexcomp.py` makes from <flexcomp>): mjModel's flex_* arrays.

`compile_flex(root, ctx)` (after the kinematic tree, before the sections: <equality><flex> names flexes) fills
nflex, nflexvert, nflexedge, nflexelem, nflexelemdata and the flex_* / flexedge_rigid arrays of types.Model as
MuJoCo's mjCFlex::Compile and mjCModel do:
  - edges: for each element in order, its local edges (dim 1: (0, 1); dim 2: (1, 2), (2, 0), (0, 1)) as
    (min, max) vertex pairs, each new pair appended at its first occurrence;
  - flexedge_rigid: both vertices on bodies welded together (same body_weldid);
  - flex_centered: every vertex offset zero (no pinned vertex).
`constants(ctx, st)` (from derived.set_const, with the qpos0 kinematics) fills flexedge_length0 and
flexedge_invweight0 (mj_setConst) and returns, per body, the longest flex edge at it (setStat's body sizes).
Flex contacts: only flex vertices against planes welded to the world are implemented (collision/flex.py); flexes
that can collide otherwise (self-collisions, other geom types) are refused (`_check_contacts`).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.spec import Element, MJCFError, MJCFUnsupportedError

_LOCAL_EDGES = {1: ((0, 1),), 2: ((1, 2), (2, 0), (0, 1))}


def records(root: Element) -> list[dict]:
    wb = [c for c in root.children if c.tag == "worldbody"]
    return list(wb[0].attrs.get("_flexes") or []) if wb else []


def compile_flex(root: Element, ctx: CompileContext) -> None:
    """Flex records -> ctx.arrays (flex_*, flexedge_rigid), ctx.sizes, ctx.ids['flex']."""
    recs = records(root)
    A = ctx.arrays
    ctx.ids["flex"] = {}
    ctx.elements["flex"] = []
    arr: dict[str, list] = {k: [] for k in ("dim", "vertadr", "vertnum", "edgeadr", "edgenum", "elemadr", "elemnum",
                                            "elemdataadr", "edgestiffness", "edgedamping", "edgeequality",
                                            "contype", "conaffinity", "radius", "centered", "condim", "priority",
                                            "selfcollide", "friction", "solmix", "solref", "solimp", "margin",
                                            "gap")}  # fmt: skip
    vertbodyid, vert, edges, elems, erigid = [], [], [], [], []
    bodies = ctx.ids.get("body", {})
    weld = np.asarray(A["body_weldid"])
    for f, r in enumerate(recs):
        el = Element("flexcomp", {"name": r["name"]}, [], r["file"], r["line"])
        if r["name"] in ctx.ids["flex"]:
            raise MJCFError(f"repeated name '{r['name']}' in flex", r["file"], r["line"], "flexcomp", "name")
        ctx.ids["flex"][r["name"]] = f
        ctx.elements["flex"].append(el)
        dim = r["dim"]
        ids = []
        for b in r["vertbody"]:
            if b != "world" and b not in bodies:
                raise MJCFError(f"unknown body '{b}' in flex", r["file"], r["line"], "flexcomp")
            ids.append(0 if b == "world" else bodies[b])
        _check_vertex_bodies(ctx, r, ids)
        _check_contacts(ctx, r)
        elem = np.asarray(r["elem"], np.int64).reshape(-1, dim + 1)
        local: dict[tuple[int, int], int] = {}
        fedges = []
        for e in elem:
            for a, b in _LOCAL_EDGES[dim]:
                pair = (int(min(e[a], e[b])), int(max(e[a], e[b])))
                if pair not in local:
                    local[pair] = len(fedges)
                    fedges.append(pair)
        arr["dim"].append(dim)
        arr["vertadr"].append(len(vertbodyid))
        arr["vertnum"].append(len(ids))
        arr["edgeadr"].append(len(edges))
        arr["edgenum"].append(len(fedges))
        arr["elemadr"].append(sum(arr["elemnum"]))
        arr["elemnum"].append(len(elem))
        arr["elemdataadr"].append(len(elems))
        arr["edgestiffness"].append(r["edgestiffness"])
        arr["edgedamping"].append(r["edgedamping"])
        arr["edgeequality"].append(r["equality"])
        arr["contype"].append(r["contype"])
        arr["conaffinity"].append(r["conaffinity"])
        arr["radius"].append(r["radius"])
        arr["centered"].append(bool(r["centered"]))
        arr["selfcollide"].append(_SELF[r["selfcollide"]])
        for k in ("condim", "priority", "friction", "solmix", "solref", "solimp", "margin", "gap"):
            arr[k].append(r[k])
        if r["edgestiffness"] > 0 and dim > 1:
            raise MJCFError("edge stiffness only available for dim=1, please use elasticity plugins", r["file"],
                            r["line"], "flexcomp")  # fmt: skip
        vertbodyid += ids
        vert.append(np.asarray(r["vert"], float).reshape(-1, 3))
        edges += fedges
        elems += elem.reshape(-1).tolist()
        erigid += [bool(weld[ids[a]] == weld[ids[b]]) for a, b in fedges]
    n = len(recs)
    i32 = np.int32
    for k in ("dim", "vertadr", "vertnum", "edgeadr", "edgenum", "elemadr", "elemnum", "elemdataadr", "edgeequality",
              "contype", "conaffinity"):  # fmt: skip
        A["flex_" + k] = np.asarray(arr[k], i32).reshape(n)
    for k in ("condim", "priority", "selfcollide"):
        A["flex_" + k] = np.asarray(arr[k], i32).reshape(n)
    for k in ("edgestiffness", "edgedamping", "radius", "solmix", "margin", "gap"):
        A["flex_" + k] = np.asarray(arr[k], float).reshape(n)
    for k, w in (("friction", 3), ("solref", 2), ("solimp", 5)):
        A["flex_" + k] = np.asarray(arr[k], float).reshape(n, w)
    A["flex_centered"] = np.asarray(arr["centered"], bool).reshape(n)
    A["flex_rigid"] = np.zeros(n, bool)  # (rigid flexcomps are refused)
    A["flex_interp"] = np.zeros(n, i32)
    A["flex_damping"] = np.zeros(n)  # (<elasticity damping> is refused)
    A["flex_vertbodyid"] = np.asarray(vertbodyid, i32)
    A["flex_vert"] = np.concatenate(vert).reshape(-1, 3) if vert else np.zeros((0, 3))
    A["flex_edge"] = np.asarray(edges, i32).reshape(-1, 2)
    A["flex_elem"] = np.asarray(elems, i32)
    A["flexedge_rigid"] = np.asarray(erigid, bool)
    A["flexedge_length0"] = np.zeros(len(edges))
    A["flexedge_invweight0"] = np.zeros(len(edges))
    ctx.sizes.update(nflex=n, nflexvert=len(vertbodyid), nflexedge=len(edges), nflexelem=int(sum(arr["elemnum"])),
                     nflexelemdata=len(elems))  # fmt: skip


def _check_vertex_bodies(ctx: CompileContext, r: dict, ids: list[int]) -> None:
    """MuJoCo: a flex vertex body (one the flexcomp made, not the parent of its pinned points) cannot have joint
    damping (flex forces come from edges)."""
    A = ctx.arrays
    jb = np.asarray(A["jnt_bodyid"])
    damp = np.asarray(A["dof_damping"])
    dadr = np.asarray(A["jnt_dofadr"])
    names = {v: k for k, v in ctx.ids.get("body", {}).items()}
    parent = 0 if r["parent"] == "world" else ctx.ids.get("body", {}).get(r["parent"], -1)
    for b in sorted(set(ids) - {parent}):
        for j in np.nonzero(jb == b)[0]:
            if damp[dadr[j]] != 0:
                raise MJCFError(f"flex vertex/node body '{names.get(b, b)}' cannot have joint damping; use flex "
                                "elasticity or edge damping instead", r["file"], r["line"], "flexcomp")  # fmt: skip


_SELF = {"none": 0, "narrow": 1, "bvh": 2, "sap": 3, "auto": 4}
_GEOM_NAMES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")


def _check_contacts(ctx: CompileContext, r: dict) -> None:
    """Flex contacts mjx_lite implements: flex vertices against planes (static bodies only, as MuJoCo's planes).
    Refused: self-collisions (contype & conaffinity with selfcollide other than 'none'), contacts with any other
    geom type the contype/conaffinity filter lets through, and a flex of more than 50 vertices against a plane
    (MuJoCo keeps a selection of 50 contacts per geom-flex pair)."""
    ct, ca = r["contype"], r["conaffinity"]
    where = (r["file"], r["line"], "flexcomp", "contact")
    if (ct & ca) and r["selfcollide"] != "none":
        raise MJCFUnsupportedError(f"flex self-collisions (selfcollide='{r['selfcollide']}') are not supported by "
                                   f"mjx_lite: flex '{r['name']}' has contype & conaffinity != 0; set selfcollide="
                                   "'none' or contype/conaffinity that do not match each other", *where)  # fmt: skip
    A = ctx.arrays
    gt, ga = np.asarray(A["geom_contype"]), np.asarray(A["geom_conaffinity"])
    gtype = np.asarray(A["geom_type"])
    for g in np.nonzero((ct & ga) | (gt & ca))[0]:
        if gtype[g] != 0:
            raise MJCFUnsupportedError(f"flex contacts with {_GEOM_NAMES[gtype[g]]} geoms are not supported by mjx_lite"
                                       f" (only planes): flex '{r['name']}' can collide with geom {int(g)}; set the "
                                       "flexcomp's <contact contype/conaffinity> to match planes only", *where)
        if len(r["vertbody"]) > 50:
            raise MJCFUnsupportedError(f"flex '{r['name']}' has {len(r['vertbody'])} vertices that can touch plane "
                                       f"geom {int(g)}: MuJoCo keeps a selection of 50 contacts per geom-flex pair, "
                                       "which mjx_lite does not implement (at most 50 vertices)", *where)  # fmt: skip


def constants(ctx: CompileContext, st) -> np.ndarray:
    """flexedge_length0 / flexedge_invweight0 at qpos0 (mj_setConst); returns (nbody,) the longest flex edge at each
    body (setStat adds it to the body sizes). `st`: derived.ConstState (qpos0 kinematics, M^-1)."""
    A, S = ctx.arrays, ctx.sizes
    nbody = S["nbody"]
    size = np.zeros(nbody)
    if not S.get("nflex"):
        return size
    xpos0 = flexvert_xpos0(ctx, st)
    vb = np.asarray(A["flex_vertbodyid"])
    simple = np.asarray(A["body_simple"])
    mass = np.asarray(A["body_mass"], float)
    length0 = np.zeros(S["nflexedge"])
    invw = np.zeros(S["nflexedge"])
    for f in range(S["nflex"]):
        vadr, eadr = int(A["flex_vertadr"][f]), int(A["flex_edgeadr"][f])
        for e in range(eadr, eadr + int(A["flex_edgenum"][f])):
            v1, v2 = vadr + int(A["flex_edge"][e, 0]), vadr + int(A["flex_edge"][e, 1])
            vec = xpos0[v2] - xpos0[v1]
            length0[e] = float(np.sqrt(vec @ vec))
            b1, b2 = int(vb[v1]), int(vb[v2])
            if A["flexedge_rigid"][e]:
                invw[e] = 0.0
            elif simple[b1] == 2 and simple[b2] == 2:
                invw[e] = (1 / mass[b1] + 1 / mass[b2]) / 2
            else:
                u = vec / length0[e] if length0[e] >= 1e-15 else np.zeros(3)  # (mju_normalize3 of a tiny vector)
                j = u @ (st.point_jac(xpos0[v2], b2)[0] - st.point_jac(xpos0[v1], b1)[0])
                invw[e] = float(j @ st.minv @ j)
            size[b1] = max(size[b1], length0[e])
            size[b2] = max(size[b2], length0[e])
    A["flexedge_length0"] = length0
    A["flexedge_invweight0"] = invw
    return size


def flexvert_xpos0(ctx: CompileContext, st) -> np.ndarray:
    """(nflexvert, 3) world positions of the flex vertices at qpos0."""
    A = ctx.arrays
    vb = np.asarray(A["flex_vertbodyid"])
    off = np.asarray(A["flex_vert"], float).reshape(-1, 3)
    return st.xpos[vb] + np.einsum("nij,nj->ni", st.xmat[vb], off)
