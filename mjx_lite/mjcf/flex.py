"""Compiler pass for flexes (the records `mjcf/flexcomp.py` makes from <flexcomp> and <deformable><flex>): mjModel's
flex_* arrays.

`compile_flex(root, ctx)` (after the kinematic tree, before the sections: <equality><flex> names flexes) fills
nflex, nflexvert, nflexedge, nflexelem, nflexelemdata and the flex_* / flexedge_rigid arrays of types.Model as
MuJoCo's mjCFlex::Compile and mjCModel do:
  - edges: for each element in order, its local edges (dim 1: (0, 1); dim 2: (1, 2), (2, 0), (0, 1)) as
    (min, max) vertex pairs, each new pair appended at its first occurrence;
  - flexedge_rigid: both vertices on bodies welded together (same body_weldid);
  - flex_centered: every vertex offset zero (MuJoCo recomputes it from the offsets);
  - flex_rigid: every vertex on one body (a rigid flex: collision geometry moving with that body; MuJoCo gives it
    no edge lengths, forces or self-collisions);
  - flex_edgeequality: 1 for a flexcomp's <edge equality='true'> or a flex an <equality><flex> names;
  - flex_group, flex_matid, flex_rgba (float32 values): the flex's appearance, for the renderer.
`constants(ctx, st)` (from derived.set_const, with the qpos0 kinematics) fills flexedge_length0 and
flexedge_invweight0 (mj_setConst) and returns, per body, the longest flex edge at it (setStat's body sizes).
Flex contacts: flex vertices against planes welded to the world, the elements of every flex against the convex
geoms and height fields (collision/flex.py), against each other (self-collisions) and against another flex's
(collision/flex_flex.py) are implemented, elastic rods' contacts with planes, spheres, capsules and boxes included
(pipeline/rod_contact.py); flexes that can collide otherwise (SDFs, flex-flex pairs of very large flexes or of
elastic rods, rods with height fields, ellipsoids, cylinders, meshes or carried by a moving body) are refused
(`_check_contacts`, `_check_rod_contacts`, `_check_self`, `_check_flex_pairs`).
"""

from __future__ import annotations

import numpy as np

from mjx_lite import math
from mjx_lite.mjcf import flex_cells, texture
from mjx_lite.mjcf import flexcomp as _flexcomp
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.inertia import frame_accum, rot_vec
from mjx_lite.mjcf.spec import Element, MJCFError, MJCFUnsupportedError
from mjx_lite.pipeline import flex_interp
from mjx_lite.types import FLEX_MAX_ELEM_PAIRS

_RGBA = (0.5, 0.5, 0.5, 1.0)  # flex rgba default
_LOCAL_EDGES = {1: ((0, 1),), 2: ((1, 2), (2, 0), (0, 1)), 3: ((0, 1), (1, 2), (2, 0), (2, 3), (0, 3), (1, 3))}
# the two faces (element-local vertices) whose normals span the strain basis of each element edge (MuJoCo's stencils)
_FACES = {2: ((1, 2), (2, 0), (0, 1)), 3: ((2, 1, 0), (0, 1, 3), (1, 2, 3), (2, 0, 3))}
_EDGE_FACES = {2: ((1, 2), (2, 0), (0, 1)), 3: ((2, 3), (1, 3), (2, 1), (1, 0), (0, 2), (0, 3))}
STIFFNESS_STRIDE = {2: 21, 3: 24}  # flex_stiffness values per element (the upper triangle of the edge metric first)
BENDING_STRIDE = 17


def records(root: Element) -> list[dict]:
    """Flex records in MuJoCo's order: the <deformable><flex>s (the reader's deformable section comes before the
    world body), then the <flexcomp>s in document order."""
    out = [_flexcomp.deformable(c) for sec in root.children if sec.tag == "deformable" for c in sec.children
           if c.tag == "flex"]  # fmt: skip
    wb = [c for c in root.children if c.tag == "worldbody"]
    return out + (list(wb[0].attrs.get("_flexes") or []) if wb else [])


def compile_flex(root: Element, ctx: CompileContext) -> None:
    """Flex records -> ctx.arrays (flex_*, flexedge_rigid), ctx.sizes, ctx.ids['flex']."""
    recs = records(root)
    # flexes an <equality><flex> names (MuJoCo sets flex_edgeequality from the equality constraints)
    eqflex = {c.attrs.get("flex") for sec in root.children if sec.tag == "equality" for c in sec.children
              if c.tag == "flex"}  # fmt: skip
    A = ctx.arrays
    ctx.ids["flex"] = {}
    ctx.elements["flex"] = []
    arr: dict[str, list] = {k: [] for k in ("dim", "vertadr", "vertnum", "edgeadr", "edgenum", "elemadr", "elemnum",
                                            "elemdataadr", "edgestiffness", "edgedamping", "edgeequality",
                                            "contype", "conaffinity", "radius", "centered", "condim", "priority",
                                            "selfcollide", "friction", "solmix", "solref", "solimp", "margin",
                                            "gap")}  # fmt: skip
    vertbodyid, vert, edges, elems, erigid, layers = [], [], [], [], [], []
    nodeadr, nodebodyid, nodes, vert0, cellnum, interps = [], [], [], [], [], []
    elemedge, elemedgeadr, stiff, stiffadr, bend, bendadr, flaps, twistdof = [], [], [], [], [], [], [], []
    bodies = ctx.ids.get("body", {})
    weld = np.asarray(A["body_weldid"])
    for f, r in enumerate(recs):
        el = Element("flexcomp", {"name": r["name"]}, [], r["file"], r["line"])
        if r["name"] and r["name"] in ctx.ids["flex"]:
            raise MJCFError(f"repeated name '{r['name']}' in flex", r["file"], r["line"], "flexcomp", "name")
        if r["name"]:
            ctx.ids["flex"][r["name"]] = f
        ctx.elements["flex"].append(el)
        dim = r["dim"]
        ids = []
        interp = int(r.get("interp", 0))
        for b in r["nodebody"] if interp else r["vertbody"]:
            if b != "world" and b not in bodies:
                raise MJCFError(f"unknown body '{b}' in flex", r["file"], r["line"], "flexcomp")
            ids.append(0 if b == "world" else bodies[b])
        if r["parent"] is not None:  # a flexcomp's vertex bodies (a plain <flex>'s bodies are the user's: no check)
            _check_vertex_bodies(ctx, r, ids)
        _check_contacts(ctx, r)
        elem = np.array(r["elem"], np.int64).reshape(-1, dim + 1)
        nvert = len(np.asarray(r["vert"]).reshape(-1, 3))
        if interp:  # (vertices on no body; at qpos0 where the parent puts the points)
            nodeadr.append(len(nodebodyid))
            nodebodyid += ids
            nodes.append(np.asarray(r["node"], float).reshape(-1, 3))
            vert0.append(np.asarray(r["vert0"], float).reshape(-1, 3))
            cellnum.append(r["cellnum"])
            parent = 0 if r["parent"] == "world" else bodies[r["parent"]]
            point = _vertxpos0(A, [parent] * nvert, np.asarray(r["vert"], float).reshape(-1, 3))
            ids = [-1] * nvert
        else:
            nodeadr.append(len(nodebodyid))
            vert0.append(np.zeros((nvert, 3)))  # (set by `constants` from the qpos0 positions)
            cellnum.append([1, 1, 1])
            point = _vertxpos0(A, ids, np.asarray(r["vert"], float).reshape(-1, 3))
        interps.append(interp)
        if dim == 3:  # tetrahedra reordered so that their faces point outwards (mjCFlex::Compile)
            x = point[elem]
            flip = np.einsum("ni,ni->n", np.cross(x[:, 1] - x[:, 0], x[:, 2] - x[:, 0]), x[:, 3] - x[:, 0]) > 0
            elem[flip, 1], elem[flip, 2] = elem[flip, 2].copy(), elem[flip, 1].copy()
        local: dict[tuple[int, int], int] = {}
        fedges = []
        for e in elem:
            for a, b in _LOCAL_EDGES[dim]:
                pair = (int(min(e[a], e[b])), int(max(e[a], e[b])))
                if pair not in local:
                    local[pair] = len(fedges)
                    fedges.append(pair)
                elemedge.append(local[pair])
        elemedgeadr.append(len(elemedge) - len(elem) * len(_LOCAL_EDGES[dim]))
        k, b, flap = _elasticity(ctx, r, point, elem, fedges)
        tdof = np.full(len(fedges), -1, np.int32)  # rods: the twist joint's dof of each edge (element e is edge e)
        if dim == 1 and len(b) and r.get("twist"):
            jid, dofadr = ctx.ids.get("joint", {}), np.asarray(A["jnt_dofadr"])
            for e, (a, c) in enumerate(elem):
                tdof[local[(int(min(a, c)), int(max(a, c)))]] = dofadr[jid[r["twist"][e]]]
        twistdof.append(tdof)
        stiffadr.append(sum(len(x) for x in stiff) if len(k) else -1)
        bendadr.append(sum(len(x) for x in bend) if len(b) else -1)
        stiff.append(k)
        bend.append(b)
        flaps.append(flap)
        arr["dim"].append(dim)
        arr["vertadr"].append(len(vertbodyid))
        arr["vertnum"].append(len(ids))
        arr["edgeadr"].append(len(edges))
        arr["edgenum"].append(len(fedges))
        arr["elemadr"].append(sum(arr["elemnum"]))
        arr["elemnum"].append(len(elem))
        arr["elemdataadr"].append(len(elems))
        if _rigid(r) and (r["edgestiffness"] or r["edgedamping"] or r["damping"]):
            raise MJCFError("a rigid flex (every vertex on one body) with edge stiffness or damping: MuJoCo 4.0 fails "
                            "to compile it (engine error: flexedge_J_rownnz too small)", r["file"], r["line"],
                            "flexcomp")  # fmt: skip
        arr["edgestiffness"].append(r["edgestiffness"])
        arr["edgedamping"].append(r["edgedamping"])
        arr["edgeequality"].append(1 if r["equality"] == 1 or (r["name"] and r["name"] in eqflex) else r["equality"])
        if arr["edgeequality"][-1] and dim != 1 and r["elastic2d"] != 1 and r["young"] > 0:
            raise MJCFError("flex constraints and elasticity (young) cannot both be present", r["file"], r["line"],
                            "flexcomp")  # fmt: skip
        arr["contype"].append(r["contype"])
        arr["conaffinity"].append(r["conaffinity"])
        arr["radius"].append(r["radius"])
        arr["centered"].append(r["centered"] if interp else not np.any(np.asarray(r["vert"], float)))
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
        layers.append(_elem_layers(elem))
        erigid += [False if interp else bool(weld[ids[a]] == weld[ids[b]]) for a, b in fedges]
    _check_flex_pairs(recs)
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
    A["flex_group"] = np.asarray([r["group"] for r in recs], i32).reshape(n)
    matid = [texture.material_id(ctx, Element("flex", {}, [], r["file"], r["line"]), what=f"flex {f}",
                                 name=r.get("material") or "") for f, r in enumerate(recs)]  # fmt: skip
    A["flex_matid"] = np.repeat(np.asarray(matid, i32).reshape(n), arr["elemnum"]).astype(i32)  # (per element)
    rgba = np.asarray([r.get("rgba", _RGBA) for r in recs], np.float32)  # (MuJoCo keeps rgba in float32)
    A["flex_rgba"] = rgba.astype(float).reshape(n, 4)
    # rigid: every vertex on one body (MuJoCo's vertbody of size 1, a rigid flexcomp, or the same body repeated)
    A["flex_rigid"] = np.asarray([_rigid(r) for r in recs], bool).reshape(n)
    A["flex_interp"] = np.asarray(interps, i32).reshape(n)
    A["flex_nodeadr"] = np.asarray(nodeadr, i32).reshape(n)
    A["flex_nodenum"] = np.diff(np.append(A["flex_nodeadr"], len(nodebodyid))).astype(i32)
    A["flex_nodebodyid"] = np.asarray(nodebodyid, i32)
    A["flex_node"] = np.concatenate([np.zeros((0, 3))] + nodes).reshape(-1, 3)
    A["flex_cellnum"] = np.asarray(cellnum, i32).reshape(n, 3)
    A["flex_vert0"] = np.concatenate([np.zeros((0, 3))] + vert0).reshape(-1, 3)
    A["flex_elemlayer"] = np.concatenate([np.zeros(0, i32)] + layers).astype(i32)
    A["flex_activelayers"] = np.asarray([r["activelayers"] for r in recs], i32).reshape(n)
    A["flex_damping"] = np.asarray([r["damping"] for r in recs], float).reshape(n)
    A["flex_elemedge"] = np.asarray(elemedge, i32)
    A["flex_elemedgeadr"] = np.asarray(elemedgeadr, i32).reshape(n)
    A["flex_stiffness"] = np.concatenate([np.zeros(0)] + stiff)
    A["flex_stiffnessadr"] = np.asarray(stiffadr, i32).reshape(n)
    A["flex_bending"] = np.concatenate([np.zeros(0)] + bend)
    A["flex_bendingadr"] = np.asarray(bendadr, i32).reshape(n)
    A["flexedge_twistdof"] = np.concatenate([np.zeros(0, np.int32)] + twistdof).astype(np.int32)
    A["flex_edgeflap"] = np.concatenate([np.zeros((0, 2), i32)] + flaps).astype(i32)
    A["flex_vertbodyid"] = np.asarray(vertbodyid, i32)
    A["flex_vert"] = np.concatenate(vert).reshape(-1, 3) if vert else np.zeros((0, 3))
    A["flex_edge"] = np.asarray(edges, i32).reshape(-1, 2)
    A["flex_elem"] = np.asarray(elems, i32)
    A["flexedge_rigid"] = np.asarray(erigid, bool)
    A["flexedge_length0"] = np.zeros(len(edges))
    A["flexedge_invweight0"] = np.zeros(len(edges))
    ctx.sizes.update(nflex=n, nflexvert=len(vertbodyid), nflexedge=len(edges), nflexelem=int(sum(arr["elemnum"])),
                     nflexelemdata=len(elems), nflexelemedge=len(elemedge), nflexstiffness=len(A["flex_stiffness"]),
                     nflexbending=len(A["flex_bending"]), nflexnode=len(nodebodyid))  # fmt: skip


def _vertxpos0(A: dict, ids: list[int], vert: np.ndarray) -> np.ndarray:
    """(nvert, 3) the world positions of a flex's vertices in the model's reference configuration (the bodies' frames
    composed from body_pos / body_quat, then the vertex offsets), as mjCFlex::Compile computes the elastic constants
    (in the world frame: the same up to round-off as in any other, which matters for the vanishing ones)."""
    parent, bpos, bquat = (np.asarray(A[k]) for k in ("body_parentid", "body_pos", "body_quat"))
    xpos, xquat = np.zeros((len(parent), 3)), np.tile([1.0, 0.0, 0.0, 0.0], (len(parent), 1))
    for b in range(1, len(parent)):  # (parents come first)
        xpos[b], xquat[b] = frame_accum(xpos[parent[b]], xquat[parent[b]], bpos[b], bquat[b])
    return np.array([xpos[b] + rot_vec(v, xquat[b]) for b, v in zip(ids, vert)]).reshape(-1, 3)


def _rigid(r: dict) -> bool:
    """A rigid flex: every vertex on one body (MuJoCo's flex_rigid)."""
    return len(set(r["vertbody"])) == 1


def _elasticity(ctx: CompileContext, r: dict, point: np.ndarray, elem: np.ndarray, fedges: list) -> tuple:
    """(flex_stiffness part, flex_bending part, flex_edgeflap part) of one flex from its <elasticity>, as
    mjCFlex::Compile (MuJoCo 4.0's elastic constants), from the vertex positions `point` (nvert, 3) in the world
    frame (_vertxpos0):
      - stretch (dim 3; dim 2 with elastic2d 'stretch' or 'both'): per element, with volume (area) V, thickness t
        (1 for dim 3), shear modulus mu = E / (2 (1 + nu)) and lambda = E nu / ((1 + nu)(1 - 2 nu)) (dim 3) or the
        plane-stress E nu / (1 - nu^2) (dim 2), and per edge e the symmetric strain basis B_e (the symmetrized outer
        product of the normals of the two faces that do not contain the edge, scaled by the element volume):
        K[e1, e2] = V t (mu tr(B_e1 B_e2) + lambda / 2 tr(B_e1) tr(B_e2)), stored as its upper triangle;
      - bending (dim 2 with elastic2d 'bend' or 'both'): per interior edge (v0 < v1) with opposite vertices v2, v3,
        the cotangent-weight matrix c c' cos(theta) D / (A1 + A2) (plate rigidity D = E t^3 / (12 (1 - nu^2))) and the
        curved-reference coefficient (zero on a flat reference; `_bending`).
    A flex without young > 0 gets no stiffness (address -1) and edge flaps of -1."""
    dim, young, nu, t, e2d = r["dim"], r["young"], r["poisson"], r["thickness"], r["elastic2d"]
    where = (r["file"], r["line"], "flexcomp")
    nedge = len(fedges)
    flaps = np.full((nedge, 2), -1)
    if dim == 1:
        return np.zeros(0), _rod(ctx, r, point, elem), flaps
    if e2d:
        if t <= 0:
            raise MJCFError("2d elasticity requires positive thickness", *where, "thickness")
        if nu < 0 or nu >= 0.5:
            raise MJCFError("Poisson ratio must be in [0, 0.5)", *where, "poisson")
        if dim != 2:
            raise MJCFError("2d elasticity requires 2d flex", *where, "elastic2d")
    if young <= 0:
        return np.zeros(0), np.zeros(0), flaps
    if nu < 0 or nu >= 0.5:
        raise MJCFError("Poisson ratio must be in [0, 0.5)", *where, "poisson")
    if r.get("interp"):
        if ctx.option["integrator"] in (2, 3):
            raise MJCFError("flex elasticity is no longer integrated implicitly under integrator='implicit' (MuJoCo "
                            "4.0: use Euler or RK4)", *where)  # fmt: skip
        return _interp_stiffness(r, point, elem), np.zeros(0), flaps
    stride = STIFFNESS_STRIDE[dim]
    stiff = np.zeros(stride * len(elem))
    mu = young / (2 * (1 + nu))
    if dim == 3 or (e2d >= 2 and t > 0):
        lam = young * nu / ((1 + nu) * (1 - 2 * nu)) if dim == 3 else young * nu / (1 - nu * nu)
        thick = 1.0 if dim == 3 else t
        iu = np.triu_indices(len(_LOCAL_EDGES[dim]))
        for i, el in enumerate(elem):
            B, vol = _strain_basis(point[el], dim)
            tr = np.trace(B, axis1=1, axis2=2)
            K = abs(vol) * thick * (mu * np.einsum("aij,bji->ab", B, B) + 0.5 * lam * np.outer(tr, tr))
            stiff[stride * i : stride * i + len(iu[0])] = K[iu]
    bend = np.zeros(0)
    if dim == 2 and e2d in (1, 3):
        quads = _flaps(elem, nedge)
        flaps = quads[:, 2:].copy()
        D = young * t**3 / (12 * (1 - nu * nu))
        bend = np.zeros(BENDING_STRIDE * nedge)
        for e, q in enumerate(quads):
            if q[3] < 0:
                continue
            bend[BENDING_STRIDE * e : BENDING_STRIDE * (e + 1)] = _bending(point, np.r_[sorted(q[:2]), q[2:]], D)
    if ctx.option["integrator"] in (2, 3) and (np.any(stiff != 0) or bend.size):
        raise MJCFError("flex elasticity is no longer integrated implicitly under integrator='implicit' (MuJoCo 4.0: "
                        "use Euler or RK4)", *where)  # fmt: skip
    return stiff, bend, flaps


ROD_STRIDE = 10  # per rod hinge in flex_bending: va, vv, vb, -1, k_bend, 0, 0, twist dof of edge (vv, vb), k_twist, 0


def _interp_stiffness(r: dict, point: np.ndarray, elem: np.ndarray) -> np.ndarray:
    """flex_stiffness of an interpolated flex with young > 0: per cell (x-major), minus its (3 npc, 3 npc)
    linear-elastic stiffness in the frame of the flexcomp's parent (the grid's axes), as MuJoCo 4.0 stores it:
    trilinear cells integrated over the mesh volume (mjcf/flex_cells.py: cut cells, empty cells zero); quadratic ones
    over the whole cell (flex_interp.cell_stiffness; the flexcomp refuses quadratic meshes that do not fill their
    box)."""
    order, cellnum = int(r["interp"]), np.asarray(r["cellnum"], float)
    vert = np.asarray(r["vert"], float).reshape(-1, 3)
    ext = vert.max(axis=0) - vert.min(axis=0)
    if r.get("cells") is not None:
        return -flex_cells.cell_stiffness(*r["cells"], ext / cellnum, r["young"], r["poisson"]).reshape(-1)
    K = -flex_interp.cell_stiffness(order, ext / cellnum, r["young"], r["poisson"])
    return np.tile(K.reshape(-1), int(np.prod(cellnum)))


def _rod(ctx: CompileContext, r: dict, point: np.ndarray, elem: np.ndarray) -> np.ndarray:
    """flex_bending part of a 1D flex with young > 0 (a discrete elastic rod, MuJoCo 4.0 layout, probed): the hinge
    count, then ROD_STRIDE values per interior vertex vv of the chain (va, vv, vb): bending stiffness
    k = E I / (l0 + l1), I = pi r^4 / 4 (circle section), torsional stiffness k_t = G J / (l0 + l1), J = pi r^4 / 2,
    G = shear or E / (2 (1 + nu)), and the dof of the twist joint of the outgoing edge (vv, vb) (the incoming edge's
    is the previous hinge's, or this one's minus 1 at the first hinge). Straight references only (a grid rod)."""
    where = (r["file"], r["line"], "flexcomp")
    young, nu, rad = r["young"], r["poisson"], r["radius"]
    if young <= 0 or len(elem) < 2 or _rigid(r):  # (a rigid rod bends nowhere: MuJoCo gives it no hinges)
        return np.zeros(0)
    if nu < 0 or nu >= 0.5:
        raise MJCFError("Poisson ratio must be in [0, 0.5)", *where, "poisson")
    if ctx.option["integrator"] in (2, 3):
        raise MJCFError("1D rod elasticity is not supported by integrator='implicit' or 'implicitfast' (MuJoCo 4.0: "
                        "use Euler or RK4)", *where)  # fmt: skip
    chain = np.asarray(elem).reshape(-1, 2)
    if np.any(chain[1:, 0] != chain[:-1, 1]):
        raise MJCFUnsupportedError("an elastic 1D flex that is not a single open chain", *where)
    G = r["shear"] if r["shear"] > 0 else young / (2 * (1 + nu))
    inertia, polar = np.pi * rad**4 / 4, np.pi * rad**4 / 2
    jid = ctx.ids.get("joint", {})
    dofadr = np.asarray(ctx.arrays["jnt_dofadr"])
    out = [float(len(chain) - 1)]
    for h in range(len(chain) - 1):
        va, vv, vb = int(chain[h, 0]), int(chain[h, 1]), int(chain[h + 1, 1])
        lsum = np.linalg.norm(point[vv] - point[va]) + np.linalg.norm(point[vb] - point[vv])
        if lsum < 1e-15:
            raise MJCFError("zero-length edge in an elastic rod", *where)
        dof = int(dofadr[jid[r["twist"][h + 1]]])
        out += [va, vv, vb, -1, young * inertia / lsum, 0.0, 0.0, dof, G * polar / lsum, 0.0]
    return np.asarray(out, float)


def _strain_basis(x: np.ndarray, dim: int) -> tuple[np.ndarray, float]:
    """Per element edge the strain basis (nedge, 3, 3) of the element with vertices x ((dim + 1), 3), and its
    signed volume (dim 3) or area (dim 2)."""
    if dim == 2:
        vol = 0.5 * np.linalg.norm(np.cross(x[1] - x[0], x[2] - x[0]))
        out = []
        for fl, fr in _EDGE_FACES[2]:
            el = x[_FACES[2][fl][0]] - x[_FACES[2][fl][1]]
            er = x[_FACES[2][fr][1]] - x[_FACES[2][fr][0]]
            n = np.cross(er, el)
            n = n / np.linalg.norm(n)
            bl, br = np.cross(n, el), np.cross(er, n)
            out.append((np.outer(bl, br) + np.outer(br, bl)) / (8 * vol * vol))
        return np.asarray(out), vol
    vol = np.cross(x[1] - x[0], x[2] - x[0]) @ (x[3] - x[0]) / 6
    normals = [np.cross(x[f[1]] - x[f[0]], x[f[2]] - x[f[0]]) for f in _FACES[3]]
    out = [(np.outer(normals[a], normals[b]) + np.outer(normals[b], normals[a])) / (72 * vol * vol)
           for a, b in _EDGE_FACES[3]]  # fmt: skip
    return np.asarray(out), vol


def _flaps(elem: np.ndarray, nedge: int) -> np.ndarray:
    """(nedge, 4) per edge: its two vertices in the order of the first triangle that has it, the vertex of that
    triangle opposite it, the opposite vertex of the second triangle (-1 on a boundary)."""
    quads = np.full((nedge, 4), -1)
    seen: dict[tuple[int, int], int] = {}
    for tri in elem:
        for a, b in _LOCAL_EDGES[2]:
            pair = (int(min(tri[a], tri[b])), int(max(tri[a], tri[b])))
            opp = int(tri[(b + 1) % 3])
            if pair not in seen:
                seen[pair] = len(seen)
                quads[seen[pair]] = (tri[a], tri[b], opp, -1)
            else:
                quads[seen[pair], 3] = opp
    return quads


def _bending(x: np.ndarray, q: np.ndarray, D: float) -> np.ndarray:
    """17 bending values of the interior edge with flap q = (v0, v1, v2, v3): Wardetzky's cotangent operator
    c c' cos(theta) k, k = D / (A1 + A2), then the curved-reference coefficient of the cubic term (the force adds it
    times the gradient of the flap's triple product [x1 - x0, x2 - x0, x3 - x0]): -triple k (cot a01 + cot a03)
    (cot a02 + cot a04) / (4 A1 A2), the weights of the two flap vertices over the triangles' areas, as MuJoCo 4.0
    (its changelog: the "cotangent weight and length scale" of the curved-reference term fixed; probed on random
    folded flaps to 1e-15 relative, tests/test_flex_types.py)."""

    def cot(a, b, c):
        e1, e2 = x[b] - x[a], x[c] - x[a]
        return (e1 @ e2) / np.linalg.norm(np.cross(e1, e2))

    def area(a, b, c):
        return 0.5 * np.linalg.norm(np.cross(x[b] - x[a], x[c] - x[a]))

    v0, v1, v2, v3 = (int(i) for i in q)
    a01, a02, a03, a04 = cot(v0, v1, v2), cot(v0, v3, v1), cot(v1, v2, v0), cot(v1, v0, v3)
    c = np.array([a03 + a04, a01 + a02, -(a01 + a03), -(a02 + a04)])
    A1, A2 = area(v0, v1, v2), area(v1, v0, v3)
    k = D / (A1 + A2)
    e0, e1, e2, e3, e4 = x[v1] - x[v0], x[v2] - x[v0], x[v3] - x[v0], x[v2] - x[v1], x[v3] - x[v1]
    t0, t1 = -(a03 * e1 + a01 * e3), -(a04 * e2 + a02 * e4)
    sqr = e0 @ e0
    cos_theta = -(t0 @ t1) / sqr
    out = np.zeros(BENDING_STRIDE)
    out[:16] = (np.outer(c, c) * cos_theta * k).reshape(-1)
    out[16] = -(np.cross(e0, e1) @ e2) * k * (a01 + a03) * (a02 + a04) / (4 * A1 * A2)
    return out


def _check_vertex_bodies(ctx: CompileContext, r: dict, ids: list[int]) -> None:
    """MuJoCo 4.0: a flexcomp's vertex body (one the flexcomp made, not the parent of its pinned points) cannot have
    joint damping (e.g. from a default class; flex forces come from edges). The bodies of a plain `<flex body=...>`
    are the user's own and may (probed: MuJoCo 4.0 loads them)."""
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
_ELEM_GEOMS = (1, 2, 3, 4, 5, 6, 7)  # hfield, sphere, capsule, ellipsoid, cylinder, box, mesh: collided with elements
_ROD_GEOMS = (0, 1, 2, 3, 4, 5, 6, 7)  # planes, height fields, convex geoms: rod contacts (pipeline/rod_contact.py)


def _elem_layers(elem: np.ndarray) -> np.ndarray:
    """(nelem,) flex_elemlayer (mjCFlex's): 0 for dim 1 and 2; for tetrahedra 0 where one of its faces is on the
    surface (no other tetrahedron has it), else 1 + the least layer of the tetrahedra sharing a face with it."""
    n, k = elem.shape
    layer = np.zeros(n, np.int32)
    if k < 4:
        return layer
    owners: dict[tuple, list[int]] = {}
    for e, v in enumerate(elem):
        for i in range(4):
            owners.setdefault(tuple(sorted(np.delete(v, i).tolist())), []).append(e)
    border = np.zeros(n, bool)
    nbrs: list[list[int]] = [[] for _ in range(n)]
    for es in owners.values():
        if len(es) == 1:
            border[es[0]] = True
        else:
            for a in es:
                nbrs[a] += [b for b in es if b != a]
    layer[:] = n + 1
    layer[border] = 0
    frontier = list(np.nonzero(border)[0])
    while frontier:  # breadth first from the surface
        nxt = []
        for a in frontier:
            for b in nbrs[a]:
                if layer[b] > layer[a] + 1:
                    layer[b] = layer[a] + 1
                    nxt.append(b)
        frontier = nxt
    return layer


def _check_self(r: dict, where: tuple) -> None:
    """Flex self-collisions mjx_lite implements (collision/flex_flex.py): every selfcollide mode (MuJoCo 4.0's make
    the same contacts) of dim 1, 2 and 3 flexes with at most types.FLEX_MAX_ELEM_PAIRS element pairs. Refused: a
    larger flex (the dense candidate table), an elastic rod (its twist joints)."""
    nelem = len(r["elem"]) // (r["dim"] + 1)
    if nelem * (nelem - 1) // 2 > FLEX_MAX_ELEM_PAIRS:  # (elements of every layer: a bound for tetrahedra)
        raise MJCFUnsupportedError(f"flex self-collisions of a flex with {nelem} elements are not supported by "
                                   f"mjx_lite (more than {FLEX_MAX_ELEM_PAIRS} candidate element pairs): flex "
                                   f"'{r['name']}'; set selfcollide='none' or contype/conaffinity that do not match "
                                   "each other", *where)  # fmt: skip
    if r.get("interp"):
        raise MJCFUnsupportedError(f"self-collisions of an interpolated flex (dof='trilinear' / 'quadratic') are not "
                                   f"supported by mjx_lite: flex '{r['name']}'; set selfcollide='none'", *where)
    if r.get("twist"):
        raise MJCFUnsupportedError(f"self-collisions of an elastic rod are not supported by mjx_lite: rod "
                                   f"'{r['name']}'; set selfcollide='none'", *where)  # fmt: skip


def _check_flex_pairs(recs: list[dict]) -> None:
    """Contacts between two flexes whose contype/conaffinity match (collision/flex_flex.py): refused for more than
    types.FLEX_MAX_ELEM_PAIRS element pairs (the dense candidate table) and for elastic rods (their twist joints);
    interpolated flexes take part (their contacts capped as MuJoCo's, collision/flex_cap.py)."""
    for i, a in enumerate(recs):
        for b in recs[i + 1 :]:
            if not (a["contype"] & b["conaffinity"] or b["contype"] & a["conaffinity"]):
                continue
            where = (b["file"], b["line"], "flexcomp", "contact")
            na, nb = len(a["elem"]) // (a["dim"] + 1), len(b["elem"]) // (b["dim"] + 1)
            if na * nb > FLEX_MAX_ELEM_PAIRS:
                raise MJCFUnsupportedError(f"contacts between flexes '{a['name']}' and '{b['name']}' ({na} x {nb} "
                                           f"element pairs, more than {FLEX_MAX_ELEM_PAIRS}) are not supported by "
                                           "mjx_lite; set contype/conaffinity that do not match", *where)  # fmt: skip
            for r in (a, b):
                if r.get("twist"):
                    raise MJCFUnsupportedError(f"contacts of an elastic rod are not supported by mjx_lite: rod "
                                               f"'{r['name']}' can collide with flex '{(b if r is a else a)['name']}'; "
                                               "set contype/conaffinity that do not match", *where)  # fmt: skip


def _check_rod_contacts(ctx: CompileContext, r: dict, hits: np.ndarray, where: tuple) -> None:
    """Elastic-rod contacts mjx_lite implements (pipeline/rod_contact.py): with planes and the convex geoms
    (spheres, capsules, ellipsoids, cylinders, boxes, meshes) and height fields (checked against MuJoCo 4.0:
    tests/test_flex_rod_contact.py, tests/test_rod_hfield.py), where the rod's vertices move by their own slide
    joints under one body or are pinned to it, that body static or moving (tests/test_rod_moving.py). Refused
    (never made by a <flexcomp>): vertices carried by several bodies (their rotations may differ)."""
    A = ctx.arrays
    gtype = np.asarray(A["geom_type"])
    for g in hits:
        t = int(gtype[g])
        if t not in _ROD_GEOMS:
            raise MJCFUnsupportedError(f"contacts of an elastic rod with {_GEOM_NAMES[t]} geoms are not supported by "
                                       f"mjx_lite (planes, height fields and convex geoms are): rod '{r['name']}' can "
                                       f"collide with geom {int(g)}; set the flexcomp's <contact contype/conaffinity> "
                                       "to exclude it", *where)  # fmt: skip
    parent = np.asarray(A["body_parentid"])
    bodies = ctx.ids.get("body", {})
    jb, jt = np.asarray(A["jnt_bodyid"]), np.asarray(A["jnt_type"])
    carriers = set()
    for name in r["vertbody"]:
        b = 0 if name == "world" else bodies[name]
        own = jt[jb == b] if len(jb) else jt[:0]
        # a vertex body of slide joints only: carried by its parent; any other: the body itself (a pinned vertex)
        carriers.add(int(parent[b]) if len(own) and np.all(own == 2) else b)
    if len(carriers) > 1:
        raise MJCFUnsupportedError(f"contacts of an elastic rod whose vertices are carried by more than one body are "
                                   f"not supported by mjx_lite: rod '{r['name']}'; set the flexcomp's <contact "
                                   "contype/conaffinity> to exclude every geom", *where)  # fmt: skip


def _check_contacts(ctx: CompileContext, r: dict) -> None:
    """Flex contacts mjx_lite implements: flex vertices against planes (static bodies only, as MuJoCo's planes) and
    the elements of every flex (edges, triangles, tetrahedra) against height fields, spheres, capsules, ellipsoids,
    cylinders, boxes and meshes (collision/flex.py), and self-collisions (`_check_self`). Refused: contacts with SDF
    geoms that the contype/conaffinity filter lets through."""
    ct, ca = r["contype"], r["conaffinity"]
    where = (r["file"], r["line"], "flexcomp", "contact")
    if (ct & ca) and r["selfcollide"] != "none" and not _rigid(r):  # (rigid: MuJoCo skips them)
        _check_self(r, where)
    A = ctx.arrays
    gt, ga = np.asarray(A["geom_contype"]), np.asarray(A["geom_conaffinity"])
    gtype = np.asarray(A["geom_type"])
    hits = np.nonzero((ct & ga) | (gt & ca))[0]
    if r.get("twist") and len(hits):
        _check_rod_contacts(ctx, r, hits, where)
    for g in hits:
        t = int(gtype[g])
        if t == 0 or t in _ELEM_GEOMS:
            continue
        raise MJCFUnsupportedError(f"flex contacts with {_GEOM_NAMES[t]} geoms are not supported by mjx_lite (planes, "
                                   f"height fields and convex geoms: spheres, capsules, ellipsoids, cylinders, boxes, "
                                   f"meshes): flex '{r['name']}' can collide with geom {int(g)}; set the flexcomp's "
                                   "<contact contype/conaffinity> to exclude it", *where)  # fmt: skip


def constants(ctx: CompileContext, st) -> np.ndarray:
    """flexedge_length0 / flexedge_invweight0 at qpos0 (mj_setConst); returns (nbody,) the longest flex edge at each
    body (setStat adds it to the body sizes). `st`: derived.ConstState (qpos0 kinematics, M^-1)."""
    A, S = ctx.arrays, ctx.sizes
    nbody = S["nbody"]
    size = np.zeros(nbody)
    if not S.get("nflex"):
        A["flex_rodframe0"] = np.zeros((0, 6))
        A["flex_node0"] = np.zeros((0, 3))
        return size
    xpos0 = flexvert_xpos0(ctx, st)
    vb = np.asarray(A["flex_vertbodyid"])
    simple = np.asarray(A["body_simple"])
    mass = np.asarray(A["body_mass"], float)
    length0 = np.zeros(S["nflexedge"])
    invw = np.zeros(S["nflexedge"])
    for f in range(S["nflex"]):
        if A["flex_interp"][f]:  # (no edge lengths or Jacobians: zeros, as MuJoCo's; each node body's size at least
            # its greatest distance to another node body, as setStat)
            nadr, nnum = int(A["flex_nodeadr"][f]), int(A["flex_nodenum"][f])
            nb = np.asarray(A["flex_nodebodyid"])[nadr : nadr + nnum]
            x = st.xpos[nb]
            dist = np.sqrt(np.sum((x[:, None] - x[None]) ** 2, axis=-1)).max(axis=1)
            for b, r in zip(nb, dist):
                size[b] = max(size[b], float(r))
            continue
        vadr, eadr = int(A["flex_vertadr"][f]), int(A["flex_edgeadr"][f])
        # MuJoCo's skipjacobian (mj_flex): edge Jacobians only with edge equality, edge stiffness / damping or
        # elasticity damping (not with elasticity stiffness alone)
        edge_jac = bool(A["flex_edgestiffness"][f] or A["flex_edgedamping"][f] or A["flex_edgeequality"][f] == 1
                        or A["flex_damping"][f])  # fmt: skip
        for e in range(eadr, eadr + int(A["flex_edgenum"][f])):
            v1, v2 = vadr + int(A["flex_edge"][e, 0]), vadr + int(A["flex_edge"][e, 1])
            vec = xpos0[v2] - xpos0[v1]
            length0[e] = float(np.sqrt(vec @ vec))
            b1, b2 = int(vb[v1]), int(vb[v2])
            if A["flexedge_rigid"][e]:
                invw[e] = 0.0
            elif simple[b1] == 2 and simple[b2] == 2:
                invw[e] = (1 / mass[b1] + 1 / mass[b2]) / 2
            elif not edge_jac:
                invw[e] = 0.0  # (no edge Jacobian: flexedge_J is zero)
            else:
                u = vec / length0[e] if length0[e] >= 1e-15 else np.zeros(3)  # (mju_normalize3 of a tiny vector)
                j = u @ (st.point_jac(xpos0[v2], b2)[0] - st.point_jac(xpos0[v1], b1)[0])
                invw[e] = float(j @ st.minv @ j)
            size[b1] = max(size[b1], length0[e])
            size[b2] = max(size[b2], length0[e])
    A["flexedge_length0"] = length0
    A["flexedge_invweight0"] = invw
    _vert0(A, S["nflex"], xpos0)
    A["flex_node0"] = _node0(A, S["nflex"], st)
    A["flex_rodframe0"] = _rod_frames0(A, S["nflex"], xpos0)
    return size


def _node0(A: dict, nflex: int, st) -> np.ndarray:
    """(nflexnode, 3) flex_node0, the elastic reference of interpolated flexes' nodes as MuJoCo 4.0 keeps it
    (probed): R0' x with x the nodes' world positions at qpos0 and R0 the rotation (flex_interp.mat_to_rot_np) of the
    deformation gradient at the center of the flex's first cell there, so that the corotational displacement
    R' x - x0 vanishes at rest."""
    nb = np.asarray(A["flex_nodebodyid"], np.int64)
    x = st.xpos[nb] + np.einsum("nij,nj->ni", st.xmat[nb], np.asarray(A["flex_node"]).reshape(-1, 3))
    out = x.copy()
    for f in np.nonzero(np.asarray(A["flex_interp"]))[0]:
        order = abs(int(A["flex_interp"][f]))
        nadr, nnum = int(A["flex_nodeadr"][f]), int(A["flex_nodenum"][f])
        _, idx = flex_interp.cell_nodes(np.full((1, 3), 0.5) / np.asarray(A["flex_cellnum"][f]),
                                        A["flex_cellnum"][f], order)  # fmt: skip
        F = np.einsum("nr,nk->rk", x[nadr + idx[0]], flex_interp._center_gradients(order))
        R = np.asarray(math.quat_to_mat(flex_interp.mat_to_rot_np(F)))
        out[nadr : nadr + nnum] = x[nadr : nadr + nnum] @ R
    return out


def _vert0(A: dict, nflex: int, xpos0: np.ndarray) -> None:
    """flex_vert0 of the flexes that are not interpolated (MuJoCo's, from the bounding box of their elements at
    qpos0): (x - center) / (hi - lo) + 0.5 per axis, 0.5 on a flat axis (extent / 2 <= 1e-15); an interpolated
    flex's came from its flexcomp (its parametric coordinates)."""
    out = np.asarray(A["flex_vert0"], float).reshape(-1, 3).copy()
    for f in range(nflex):
        if A["flex_interp"][f] or not int(A["flex_elemnum"][f]):
            continue
        vadr, vnum, dim = int(A["flex_vertadr"][f]), int(A["flex_vertnum"][f]), int(A["flex_dim"][f])
        eadr = int(A["flex_elemdataadr"][f])
        used = np.asarray(A["flex_elem"])[eadr : eadr + int(A["flex_elemnum"][f]) * (dim + 1)]
        pts = xpos0[vadr + used]
        lo, hi = pts.min(axis=0), pts.max(axis=0)
        half = (hi - lo) / 2
        x = xpos0[vadr : vadr + vnum]
        ok = half > 1e-15
        out[vadr : vadr + vnum] = np.where(ok, (x - (lo + hi) / 2) / np.where(ok, 2 * half, 1.0) + 0.5, 0.5)
    A["flex_vert0"] = out


def _rod_frames0(A: dict, nflex: int, xpos0: np.ndarray) -> np.ndarray:
    """(nflex, 6): for a rod (edges with twist joints), the reference frame (t, u) of its first edge at qpos0: the
    unit tangent t and u = the y axis made orthogonal to t (the z axis where |t_y| >= 0.5), as MuJoCo 4.0 restarts
    the rod's frames from (probed); zeros for other flexes."""
    out = np.zeros((nflex, 6))
    tdof = np.asarray(A["flexedge_twistdof"])
    for f in range(nflex):
        eadr, vadr = int(A["flex_edgeadr"][f]), int(A["flex_vertadr"][f])
        if int(A["flex_dim"][f]) != 1 or not int(A["flex_edgenum"][f]) or tdof[eadr] < 0:
            continue
        eladr = int(A["flex_elemdataadr"][f])
        a, b = int(A["flex_elem"][eladr]), int(A["flex_elem"][eladr + 1])
        t = xpos0[vadr + b] - xpos0[vadr + a]
        t = t / np.linalg.norm(t)
        u = np.array([0.0, 1.0, 0.0]) if abs(t[1]) < 0.5 else np.array([0.0, 0.0, 1.0])
        u = u - (u @ t) * t
        out[f] = np.concatenate([t, u / np.linalg.norm(u)])
    return out


def flexvert_xpos0(ctx: CompileContext, st) -> np.ndarray:
    """(nflexvert, 3) world positions of the flex vertices at qpos0."""
    A = ctx.arrays
    vb = np.asarray(A["flex_vertbodyid"])
    off = np.asarray(A["flex_vert"], float).reshape(-1, 3)
    out = st.xpos[vb] + np.einsum("nij,nj->ni", st.xmat[vb], off)
    for f in np.nonzero(np.asarray(A["flex_interp"]))[0]:  # (vertices interpolated from the nodes)
        order = int(A["flex_interp"][f])
        nadr, nnum = int(A["flex_nodeadr"][f]), int(A["flex_nodenum"][f])
        nb = np.asarray(A["flex_nodebodyid"])[nadr : nadr + nnum]
        nx = st.xpos[nb] + np.einsum("nij,nj->ni", st.xmat[nb], np.asarray(A["flex_node"])[nadr : nadr + nnum])
        vadr, vnum = int(A["flex_vertadr"][f]), int(A["flex_vertnum"][f])
        local, idx = flex_interp.cell_nodes(np.asarray(A["flex_vert0"])[vadr : vadr + vnum], A["flex_cellnum"][f],
                                            order)  # fmt: skip
        out[vadr : vadr + vnum] = np.einsum("nj,njx->nx", flex_interp.basis(local, order), nx[idx])
    return out
