"""<flexcomp> -> vertex bodies and a flex record (MuJoCo 4.0's mjCFlexcomp, the subset mjx_lite simulates).

What is built (as MuJoCo's flexcomp does, checked field by field against `mujoco` in tests/test_flex.py and
tests/test_flex_types.py):
  - points and elements: of the generated types (grid, circle, square, disc, box, cylinder, ellipsoid;
    mjcf/flexcomp_shapes.py), given (type="direct": `point`, `element`) or read from an OBJ / STL file
    (type="mesh") or an ASCII GMSH file (type="gmsh"; mjcf/flexcomp_mesh.py), the given and read ones scaled by
    `scale`; then posed by the flexcomp's pos / orientation in the parent body's frame (a `quat` as written,
    unnormalised, through MuJoCo's rotation formula);
  - pinned points (<pin id range grid gridrange>; grid and gridrange on type="grid" only) stay vertices of the parent
    body (their offset kept in the flex's vertex array); a direct, mesh or gmsh flexcomp drops the points no element
    uses (renumbering the others, after pinning); every other point i becomes a child body "<name>_<i>" at the point,
    with mass mass / npoint, diagonal inertia mass / npoint * 2 inertiabox^2 / 3 and three slide joints (x, y, z)
    that take the enclosing default class (childclass) as any joint written there would; dof="2d": x and y only;
    dof="radial": point 0 always pinned, and one slide joint along the point's direction from the parent's origin;
  - a flex record (the compiler's `mjcf/flex.py` makes the flex_* arrays and, for <edge equality="true">, the
    edge equality constraint from it);
  - <elasticity young poisson damping thickness elastic2d> of dim 2 and 3 flexes go into the record (mjcf/flex.py
    compiles flex_stiffness / flex_bending / flex_damping from them);
  - a dim 1 flexcomp with young > 0 is a discrete elastic rod (circle section of the flex radius, young, poisson,
    shear, damping): with at least two edges, one twist body per edge under the world ("<name>_twist_<e>", the last
    "<name>_twist"; mass 1e-9, inertia m_e r^2 / 2 about every axis with m_e = mass / nedge, a hinge joint of the
    same name), placed after the world child that holds the flexcomp (MuJoCo 4.0's order, probed); mjcf/flex.py
    makes its flex_bending hinges and mjcf/plastic.py its state in Data.plastic.

  - interpolated flexcomps (dof="trilinear" / "quadratic", `_interp`): a grid of node bodies over the points'
    bounding box carries every point (mjx_lite/pipeline/flex_interp.py), cellcount cells per axis, pins on nodes; their
    <elasticity young poisson damping> is MuJoCo's corotational cell stiffness (mjcf/flex.py); trilinear cells cut by
    the mesh (tetrahedra, or a closed surface of dim 2) are integrated over the mesh volume (mjcf/flex_cells.py).

Everything else MuJoCo's flexcomp can do is refused at load with MJCFUnsupportedError naming it: binary GMSH files
(type="gmsh" reads ASCII formats 4.1 and 2.2), box / cylinder / ellipsoid of dim 1 or with a count below 2; of
interpolated flexcomps: shell mode (elastic2d), strain equalities, dim 1, rigid ones, quadratic
ones whose tetrahedra do not fill their bounding box (MuJoCo's cut-cell quadrature), trilinear ones of dim 2 whose
triangles do not close a surface, self-contacts; rods' box sections and clamped ends (both points of
an end edge pinned), <elasticity yield> (plasticity), <edge equality="vert"|"strain">, plugins; and, in
mjcf/flex.py, flex self-collisions, contacts with height fields and SDFs, and contacts of elastic rods.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

import numpy as np

from mjx_lite.mjcf import flex_cells as _cells
from mjx_lite.mjcf import flexcomp_mesh as _mesh
from mjx_lite.mjcf import flexcomp_shapes as _shapes
from mjx_lite.mjcf.spec import Element, MJCFError, MJCFUnsupportedError

MINVAL = 1e-15
_EPS = 1e-14  # MuJoCo's compiler mjEPS
_ORIENT = ("quat", "axisangle", "euler", "xyaxes", "zaxis")
_CHILDREN = ("edge", "elasticity", "contact", "pin", "plugin")


def _refuse(raw, what: str, attr: str | None = None) -> MJCFUnsupportedError:
    return MJCFUnsupportedError(f"{what} is not supported by mjx_lite (flexcomp subset: every type (gmsh: ASCII), "
                                "dim 1-3, dof='full', '2d', 'radial', 'trilinear' and 'quadratic', edge "
                                "stiffness/damping/equality='true', <elasticity> (dim 1: circle section rods, their "
                                "contacts with planes, height fields and convex geoms), contacts with planes, height "
                                "fields and convex geoms)",
                                raw.file, raw.line, raw.tag, attr)  # fmt: skip


def _err(raw, msg: str, attr: str | None = None) -> MJCFError:
    return MJCFError(msg, raw.file, raw.line, raw.tag, attr)


def expand(
    raw,
    parent: Element,
    written: Callable,
    orient: Callable,
    add_body: Callable,
    add_twist_body: Callable,
    read_bytes: Callable | None = None,
) -> dict[str, Any]:
    """Expand the <flexcomp> `raw` (a parse._Raw) inside body `parent` (Element; worldbody for the world).

    written(raw, key) -> typed attributes written on raw (schema key); orient(kind, value, raw) -> unit quaternion;
    add_body(name, pos, mass, inertia) -> None appends a vertex body (with its three slide joints; dof="2d": x and y
    only) to `parent`;
    add_twist_body(name, inertia) -> None adds a rod's twist body (mass 1e-9, a hinge joint of the same name) under the
    world, after the world child that holds the flexcomp; read_bytes(file, raw) -> bytes reads a type="mesh" or
    "gmsh" flexcomp's file (flexcomp_mesh.read_file with the compiler's meshdir and the model's files).
    Returns the flex record (see `mjcf/flex.py`)."""
    w = written(raw, "flexcomp")
    kids: dict[str, list] = {}
    for k in raw.children:
        if k.tag not in _CHILDREN:
            raise MJCFError("unknown element (in <flexcomp>)", k.file, k.line, k.tag)
        if k.children:
            c = k.children[0]
            raise MJCFError(f"unknown element (in <{k.tag}>)", c.file, c.line, c.tag)
        kids.setdefault(k.tag, []).append(k)
    for tag in ("edge", "elasticity", "contact"):
        if len(kids.get(tag, ())) > 1:
            raise _err(raw, f"unique element '{tag}' found {len(kids[tag])} times")
    if "plugin" in kids:
        raise _refuse(kids["plugin"][0], "<plugin> in <flexcomp> (elasticity plugins)")
    name = w.get("name")
    if not name:
        raise _err(raw, "required attribute missing", "name")
    pname = parent.attrs.get("name") if parent.tag == "body" else "world"
    if not pname:
        raise _err(raw, "Parent body must have name")
    ftype = w.get("type", "grid")
    if ftype == "mesh" and int(w.get("dim", 2)) == 3 and "origin" not in w:
        raise _err(raw, "origin must be specified for mesh flexcomps if dim=3", "origin")
    dim = int(w.get("dim", 2))
    if dim < 1 or dim > 3:
        raise _err(raw, "Invalid dim, must be between 1 and 3", "dim")
    if ftype in ("square", "disc"):
        dim = 2  # (MakeSquare)
    dof = w.get("dof", "full")
    if dof not in ("full", "trilinear", "quadratic", "2d", "radial"):
        raise _refuse(raw, f"<flexcomp dof='{dof}'>", "dof")
    if dof == "2d":  # (MuJoCo 4.0: every vertex body slides along its parent's x and y only)
        add_body = functools.partial(add_body, axes=("1 0 0", "0 1 0"))
    if dof == "radial":  # (MuJoCo 4.0: one slide joint along the vertex's direction from the parent's origin)
        add_body = _radial(add_body)
    order = {"trilinear": 1, "quadratic": 2}.get(dof, 0)  # (flex_interp)
    rigid = bool(w.get("rigid", False))
    direct = ftype in ("direct", "mesh", "gmsh")  # (MuJoCo's `direct`: points given, not generated)
    for a in (("mesh",) + (() if order else ("cellcount",)) + (() if ftype in ("mesh", "gmsh") else ("file",))
              + (() if ftype == "direct" else ("point", "element"))):  # fmt: skip
        if a in w:
            raise _refuse(raw, f"<flexcomp {a}=...> (not used by type='{ftype}')", a)
    count = _vec3(w.get("count"), (10, 10, 10))
    spacing = _vec3(w.get("spacing"), (0.02, 0.02, 0.02))
    scale = _vec3(w.get("scale"), (1.0, 1.0, 1.0))
    radius = float(w.get("radius", 0.005))
    mass = float(w.get("mass", 1.0))
    inertiabox = float(w.get("inertiabox", 0.005))

    edge = written(kids["edge"][0], "flexcomp/edge") if "edge" in kids else {}
    elast = written(kids["elasticity"][0], "flexcomp/elasticity") if "elasticity" in kids else {}
    cont = written(kids["contact"][0], "flexcomp/contact") if "contact" in kids else {}
    equality = {"false": 0, "true": 1, "vert": 2, "strain": 3}[edge.get("equality", "false")]
    young, edamp = float(elast.get("young", 0.0)), float(elast.get("damping", 0.0))
    poisson, thickness = float(elast.get("poisson", 0.0)), float(elast.get("thickness", -1.0))
    elastic2d = {"none": 0, "bend": 1, "stretch": 2, "both": 3}[elast.get("elastic2d", "none")]
    if order:
        _check_interp(raw, kids, elastic2d, equality, rigid)
    if dim != 1 and elastic2d != 1 and equality and young > 0:  # (rods: bending with inextensible edges)
        raise _err(raw, "flex constraints and elasticity (young) cannot both be present")
    for a in ("section", "sectionsize", "yield"):
        if a in elast:
            raise _refuse(kids["elasticity"][0], f"<elasticity {a}=...> (box rod sections and plasticity)", a)
    shear = float(np.atleast_1d(elast.get("shear", 0.0))[0])
    if shear < 0:
        raise _err(kids["elasticity"][0], "shear modulus must be non-negative", "shear")
    if dim == 1 and edamp != 0 and young <= 0:
        raise _refuse(kids["elasticity"][0], "<elasticity damping> on a dim=1 flexcomp without young", "damping")
    if equality > 1:
        raise _refuse(kids["edge"][0], f"<edge equality='{edge['equality']}'> (vertex / strain flex constraints)",
                      "equality")  # fmt: skip
    margin = float(cont.get("margin", 0.0))

    # mjCFlexcomp::Make checks, in its order
    if any(c < 1 or (dof == "radial" and dim == 3 and c < 2) for c in count):
        raise _err(raw, "Count too small", "count")
    minspace = 2 * radius + margin
    if not direct and any(s < minspace for s in spacing):
        raise _err(raw, "Spacing must be larger than geometry size", "spacing")
    if any(s < MINVAL for s in scale):
        raise _err(raw, "Scale must be larger than mjMINVAL", "scale")
    if mass < MINVAL or inertiabox < MINVAL:
        raise _err(raw, "Mass and inertiabox must be larger than mjMINVAL", "mass")
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    given = [a for a in _ORIENT if a in raw.attrib]
    if len(given) > 1:
        raise _err(raw, f"multiple orientation specifiers ({', '.join(given)})", given[1])
    if given and given[0] == "quat":  # used as written: MuJoCo neither normalises nor checks it (probed)
        quat = np.asarray(w["quat"], float).reshape(4)
    elif given and given[0] in w:
        quat = orient(given[0], w[given[0]], raw)
    if ftype in ("box", "cylinder", "ellipsoid") and (dim == 1 or min(count) < 2):
        raise _refuse(raw, f"<flexcomp type='{ftype}'> of dim 1 or with a count below 2 (MuJoCo 4.0 makes no "
                      "surface of them: a scrambled chain, or it never returns)", "count")  # fmt: skip
    if ftype in ("mesh", "gmsh"):
        if not w.get("file"):
            raise _err(raw, "File is required", "file")
        if ftype == "mesh":
            point, element = _mesh.mesh_shape(*_mesh.read(w["file"], lambda f: read_bytes(f, raw), raw), dim,
                                              w.get("origin"))  # fmt: skip
        else:  # (MuJoCo 4.0 decodes a gmsh flexcomp's OBJ or STL file as a surface: dim 2)
            if w["file"].lower().endswith(".msh"):
                point, element, gdim = _mesh.read_gmsh(read_bytes(w["file"], raw), w["file"], raw)
            else:
                (point, element), gdim = _mesh.read(w["file"], lambda f: read_bytes(f, raw), raw), 2
            if gdim != dim:
                raise _err(raw, "flexcomp dim does not match GMSH mesh dimensionality", "dim")
    elif direct:
        point = np.asarray(w.get("point", ()), float).reshape(-1)
        element = np.asarray(w.get("element", ()), np.int64).reshape(-1)
    else:
        point, element, dim = _shapes.shape(ftype, dim, count, spacing)
        if not element.size and ftype not in ("box", "cylinder", "ellipsoid"):
            raise _err(raw, "No elements were created in grid", "count")
    pins = kids.get("pin", [])
    pinid, pinrange, pingrid, pingridrange = [], [], [], []
    for p in pins:
        pw = written(p, "flexcomp/pin")
        pinid += [int(x) for x in pw.get("id", ())]
        pinrange += [int(x) for x in pw.get("range", ())]
        pingrid += [int(x) for x in pw.get("grid", ())]
        pingridrange += [int(x) for x in pw.get("gridrange", ())]
    if len(pinrange) % 2:
        raise _err(raw, "Pin range number must be multiple of 2")
    if len(pingrid) % dim:
        raise _err(raw, "Pin grid number must be multiple of dim")
    if len(pingridrange) % (2 * dim):
        raise _err(raw, "Pin grid range number of must be multiple of 2*dim")
    if ftype != "grid" and not order and (pingrid or pingridrange):
        raise _err(raw, "Pin grid(range) can only be used with grid or interpolated")
    if dim == 1 and (pingrid or pingridrange):
        raise _err(raw, "Pin grid(range) cannot be used with dim=1")
    if not np.size(point) or not np.size(element):
        raise _err(raw, "Point and element required")
    if np.size(point) % 3:
        raise _err(raw, "Point size must be a multiple of 3")
    if np.size(element) % (dim + 1):
        raise _err(raw, "Element size must be a multiple of dim+1")
    point = np.asarray(point, float).reshape(-1, 3)
    element = np.asarray(element, np.int64).reshape(-1, dim + 1)
    npnt = len(point)
    for i, e in enumerate(element.reshape(-1)):
        if e < 0 or e >= npnt:
            raise _err(raw, f"element {i} has point id {int(e)}, number of points is {npnt}")
    if direct:
        point = point * np.asarray(scale, float)
    point = np.array([quat_pose(p, w.get("pos"), quat) for p in point]).reshape(npnt, 3)
    if order:
        pins4 = (pinid, pinrange, pingrid, pingridrange)
        rec = _interp(raw, w, name, pname, order, point, element, pins4, add_body, mass, inertiabox)
        return _record(raw, w, name, pname, dim, element, young, poisson, edamp, thickness, elastic2d, radius, edge,
                       cont, margin, equality, shear, [], **rec)

    pinned = np.full(npnt, rigid)  # (MuJoCo reads no pins of a rigid flexcomp: every point is on the parent)
    if rigid:
        pinid, pinrange, pingrid, pingridrange = [], [], [], []
    for i in pinid:
        if i < 0 or i >= npnt:
            raise _err(raw, "pinid out of range")
        pinned[i] = True
    for a, b in zip(pinrange[::2], pinrange[1::2]):
        if a < 0 or a >= npnt or b < 0 or b >= npnt:
            raise _err(raw, "pinrange out of range")
        pinned[a : b + 1] = True

    def grid_id(ijk):
        return ijk[0] * count[1] + ijk[1] if dim == 2 else (ijk[0] * count[1] + ijk[1]) * count[2] + ijk[2]

    for i in range(0, len(pingrid), dim):
        ijk = pingrid[i : i + dim]
        if any(ijk[k] < 0 or ijk[k] >= count[k] for k in range(dim)):
            raise _err(raw, "pingrid out of range")
        pinned[grid_id(ijk)] = True
    for i in range(0, len(pingridrange), 2 * dim):
        r = pingridrange[i : i + 2 * dim]
        if any(r[k] < 0 or r[k] >= count[k % dim] for k in range(2 * dim)):
            raise _err(raw, "pingridrange out of range")
        for ijk in itertools.product(*[range(r[k], r[k + dim] + 1) for k in range(dim)]):
            pinned[grid_id(ijk)] = True
    if dof == "radial":
        pinned[0] = True  # (MuJoCo: a radial flexcomp's first point, its centre, is always on the parent)
    rigid = bool(pinned.all())  # every point pinned: a rigid flex, as rigid='true' (MuJoCo)
    centered = not pinned.any()
    if direct:  # points no element uses are dropped (the others renumbered in order)
        used = np.zeros(npnt, bool)
        used[element.reshape(-1)] = True
        if not used.all():
            element = (np.cumsum(used) - 1)[element]
            point, pinned = point[used], pinned[used]
            npnt = len(point)

    rod = dim == 1 and young > 0 and not rigid  # a discrete elastic rod (mjx_lite/pipeline/passive_rod.py)
    if rod and radius <= 0:
        raise _err(raw, "1D rod elasticity requires a positive radius (circle section)", "radius")
    if rod and dof != "full":  # (MuJoCo 4.0 makes twist joints for dof="full" only, probed)
        raise _refuse(raw, f"an elastic dim=1 <flexcomp dof='{dof}'> (young > 0: MuJoCo 4.0 gives it no twist "
                      "joints, a rod without them, as an elastic 1D <flex>)", "dof")  # fmt: skip
    nedge = npnt - 1
    if rod and nedge >= 2 and ((pinned[0] and pinned[1]) or (nedge >= 3 and pinned[-1] and pinned[-2])):
        raise _refuse(kids.get("pin", [raw])[0], "a clamped end of an elastic rod (both points of its first or last "
                      "edge pinned: the material frame follows the pinning body)", "id")  # fmt: skip
    bodymass = mass / npnt
    bodyinertia = bodymass * (2.0 * inertiabox * inertiabox) / 3.0
    vertbody, vert = [], np.zeros((npnt, 3))
    for i in range(npnt):
        if pinned[i]:
            vertbody.append(pname)
            vert[i] = point[i]
        else:
            bname = f"{name}_{i}"
            add_body(bname, point[i], bodymass, bodyinertia)
            vertbody.append(bname)
    twist = []  # per-edge twist bodies / hinge joints of an open elastic rod (MuJoCo 4.0), created under the world
    if rod and nedge >= 2:
        polar = 0.5 * (mass / nedge) * radius * radius
        twist = [f"{name}_twist_{e}" if e < nedge - 1 else f"{name}_twist" for e in range(nedge)]
        for tname in twist:
            add_twist_body(tname, polar)
    return _record(raw, w, name, pname, dim, element, young, poisson, edamp, thickness, elastic2d, radius, edge, cont,
                   margin, 0 if rigid else equality, shear, twist, vertbody=vertbody, vert=vert, centered=centered,
                   point=point)



def _radial(add_body: Callable) -> Callable:
    """add_body for dof="radial": the vertex body's one slide joint along its position in the parent's frame,
    scaled as mjuu_normvec (unchanged where its squared length is below mjEPS or its length within mjEPS of 1; the
    joint's compile then refuses an axis that short)."""

    def add(name, pos, mass, inertia):
        axis = np.asarray(pos, float).copy()
        n2 = float(axis @ axis)
        if n2 >= _EPS and abs(np.sqrt(n2) - 1) > _EPS:
            axis = axis / np.sqrt(n2)
        add_body(name, pos, mass, inertia, axes=(" ".join(repr(float(x)) for x in axis),))

    return add


def _record(raw, w, name, pname, dim, element, young, poisson, edamp, thickness, elastic2d, radius, edge, cont, margin,
            equality, shear, twist, **extra) -> dict[str, Any]:
    """The flex record (see `mjcf/flex.py`) of an expanded flexcomp; `extra`: vertbody, vert, centered, point and,
    for an interpolated flex, interp, cellnum, nodebody, node, vert0."""
    return {
        "shear": shear, "twist": twist,
        "name": name, "dim": dim, "parent": pname,
        "young": young, "poisson": poisson, "damping": edamp, "thickness": thickness,
        "elastic2d": elastic2d,
        "elem": element.reshape(-1).astype(np.int64), "radius": radius, "group": int(w.get("group", 0)),
        "rgba": _vecn(w.get("rgba"), (0.5, 0.5, 0.5, 1.0)), "material": w.get("material") or "",
        "edgestiffness": float(edge.get("stiffness", 0.0)), "edgedamping": float(edge.get("damping", 0.0)),
        "equality": equality, "eq_solref": edge.get("solref"), "eq_solimp": edge.get("solimp"),
        "contype": int(cont.get("contype", 1)), "conaffinity": int(cont.get("conaffinity", 1)),
        "selfcollide": cont.get("selfcollide", "auto"), "activelayers": int(cont.get("activelayers", 1)),
        "condim": int(cont.get("condim", 3)), "priority": int(cont.get("priority", 0)),
        "friction": _vecn(cont.get("friction"), (1.0, 0.005, 0.0001)), "solmix": float(cont.get("solmix", 1.0)),
        "solref": _vecn(cont.get("solref"), (0.02, 1.0)),
        "solimp": _vecn(cont.get("solimp"), (0.9, 0.95, 0.001, 0.5, 2)),
        "margin": margin, "gap": float(cont.get("gap", 0.0)),
        "file": raw.file, "line": raw.line, "interp": 0, **extra,
    }  # fmt: skip


def _vecn(v, default) -> list:
    out = [float(x) for x in default]
    if v is not None:
        v = np.atleast_1d(v)
        out[: len(v)] = [float(x) for x in v]
    return out


def _vec3(v, default) -> list:
    out = list(default)
    if v is not None:
        v = np.atleast_1d(v)
        out[: len(v)] = [x.item() for x in v]
    return out


def quat_pose(p, pos, quat) -> np.ndarray:
    """mjuu_trnVecPose: pos + quat * p, with MuJoCo's rotation formula p + 2 (q_xyz x (q_w p + q_xyz x p)), which
    does not assume a unit quaternion (a flexcomp's `quat` is used as written: |q| != 1 scales and shears)."""
    pos = np.zeros(3) if pos is None else np.asarray(pos, float)
    v = [float(x) for x in p]
    w, x, y, z = (float(c) for c in quat)
    if v == [0.0, 0.0, 0.0]:
        res = [0.0, 0.0, 0.0]
    elif (w, x, y, z) == (1.0, 0.0, 0.0, 0.0):
        res = v
    else:
        t = (w * v[0] + y * v[2] - z * v[1], w * v[1] + z * v[0] - x * v[2], w * v[2] + x * v[1] - y * v[0])
        res = [v[0] + 2 * (y * t[2] - z * t[1]), v[1] + 2 * (z * t[0] - x * t[2]), v[2] + 2 * (x * t[1] - y * t[0])]
    return np.array([res[0] + pos[0], res[1] + pos[1], res[2] + pos[2]])


def deformable(el: Element) -> dict[str, Any]:
    """The flex record (see `mjcf/flex.py`) of a <deformable><flex> Element `el`: vertex v on body body[v] at its
    local offset vertex[v] (zeros when omitted: the vertices at the bodies' origins), the elements as given (unused
    vertices kept, as MuJoCo keeps them; one body with `vertex` given: a rigid flex, every vertex on that body).
    Refused by name: interpolated flexes (node,
    nodecoord, cellcount, dof), elastic rods (dim 1 with young > 0: MuJoCo 4.0 gives them no twist joints here);
    plugins (parse.py)."""
    a, where = el.attrs, (el.file, el.line, "flex")
    kids = {k.tag: k.attrs for k in el.children}
    for attr in ("node", "nodecoord", "cellcount", "dof"):
        if attr in el.explicit:
            raise MJCFUnsupportedError(f"<flex {attr}=...> (an interpolated flex) is not supported by mjx_lite", *where,
                                       attr)  # fmt: skip
    dim = int(a["dim"])
    if dim < 1 or dim > 3:
        raise MJCFError("Invalid dim, must be between 1 and 3", *where, "dim")
    body = str(a.get("body") or "").split()
    if not body:
        raise MJCFError("required attribute missing: 'body'", *where, "body")
    if a.get("element") is None:
        raise MJCFError("required attribute missing: 'element'", *where, "element")
    elem = np.asarray(a["element"], np.int64).reshape(-1)
    vert = None if a.get("vertex") is None else np.asarray(a["vertex"], float).reshape(-1)
    if vert is not None and vert.size % 3:
        raise MJCFError("vertex data must be a multiple of 3", *where, "vertex")
    nvert = len(body) if vert is None else vert.size // 3
    if len(body) == 1 and vert is not None:  # a rigid flex: every vertex on that body (MuJoCo's vertbody of size 1)
        body = body * nvert
    if len(body) != nvert:
        raise MJCFError("vertbody size must be 1 or nvert", *where, "body")
    if nvert < dim + 1:
        raise MJCFError("not enough vertices", *where, "body")
    if elem.size % (dim + 1):
        raise MJCFError("elem size must be multiple of (dim+1)", *where, "element")
    if np.any(elem < 0) or np.any(elem >= nvert):
        raise MJCFError("elem vertex id out of range", *where, "element")
    edge, elast, cont = kids.get("edge", {}), kids.get("elasticity", {}), kids.get("contact", {})
    young = float(elast.get("young", 0.0))
    for attr in ("section", "sectionsize", "yield"):
        if elast.get(attr) is not None:
            raise MJCFUnsupportedError(f"<elasticity {attr}=...> (box rod sections and plasticity) is not supported by "
                                       "mjx_lite", *where, attr)  # fmt: skip
    if dim == 1 and young > 0:
        raise MJCFUnsupportedError("an elastic 1D <flex> (young > 0: a rod without twist joints; use <flexcomp "
                                   "dim='1'>) is not supported by mjx_lite", *where, "young")  # fmt: skip
    if dim == 1 and float(elast.get("damping", 0.0)) != 0 and young <= 0:
        raise MJCFUnsupportedError("<elasticity damping> on a dim=1 flex without young is not supported by mjx_lite",
                                   *where, "damping")  # fmt: skip
    shear = elast.get("shear")
    return {
        "shear": float(np.atleast_1d(shear)[0]) if shear is not None else 0.0, "twist": [],
        "name": a.get("name") or "", "dim": dim, "vertbody": body, "parent": None,
        "vert": np.zeros((nvert, 3)) if vert is None else vert.reshape(nvert, 3),
        "young": young, "poisson": float(elast.get("poisson", 0.0)), "damping": float(elast.get("damping", 0.0)),
        "thickness": float(elast.get("thickness", -1.0)),
        "elastic2d": {"none": 0, "bend": 1, "stretch": 2, "both": 3}[elast.get("elastic2d") or "none"],
        "elem": elem, "radius": float(a["radius"]), "group": int(a["group"]),
        "rgba": _vecn(a.get("rgba"), (0.5, 0.5, 0.5, 1.0)), "material": a.get("material") or "",
        "edgestiffness": float(edge.get("stiffness", 0.0)), "edgedamping": float(edge.get("damping", 0.0)),
        "equality": 0, "eq_solref": None, "eq_solimp": None,
        "contype": int(cont.get("contype", 1)), "conaffinity": int(cont.get("conaffinity", 1)),
        "selfcollide": cont.get("selfcollide") or "auto", "activelayers": int(cont.get("activelayers", 1)),
        "condim": int(cont.get("condim", 3)), "priority": int(cont.get("priority", 0)),
        "friction": _vecn(cont.get("friction"), (1.0, 0.005, 0.0001)), "solmix": float(cont.get("solmix", 1.0)),
        "solref": _vecn(cont.get("solref"), (0.02, 1.0)),
        "solimp": _vecn(cont.get("solimp"), (0.9, 0.95, 0.001, 0.5, 2)),
        "margin": float(cont.get("margin", 0.0)), "gap": float(cont.get("gap", 0.0)),
        "file": el.file, "line": el.line,
    }  # fmt: skip


def _check_interp(raw, kids: dict, elastic2d: int, equality: int, rigid: bool) -> None:
    """Refuse, by name, what mjx_lite does not simulate of an interpolated (trilinear / quadratic) flexcomp: shell
    mode (elastic2d), strain / edge equalities, rigid ones (and dim 1 in `_interp`, elasticity of cells the tetrahedra
    do not fill in mjcf/flex.py)."""
    if elastic2d:
        raise _refuse(kids["elasticity"][0], "<elasticity elastic2d> on an interpolated flexcomp (shell mode)",
                      "elastic2d")  # fmt: skip
    if equality:
        raise _refuse(kids["edge"][0], "<edge equality> on an interpolated flexcomp (strain constraints)", "equality")
    if rigid:
        raise _refuse(raw, "a rigid interpolated flexcomp", "rigid")


_SIMPSON = (1.0 / 6.0, 2.0 / 3.0)  # quadratic node mass weights: cell end, cell middle (per axis)


def _interp(raw, w: dict, name: str, pname: str, order: int, point: np.ndarray, element: np.ndarray, pins: tuple,
            add_body: Callable, mass: float, inertiabox: float) -> dict[str, Any]:
    """Nodes of an interpolated flexcomp (order 1 trilinear, 2 quadratic), as MuJoCo 4.0 makes them (probed):
    a grid of cellcount * order + 1 nodes per axis (x slowest, z fastest) spanning the bounding box of the posed
    points (in the parent's frame); unpinned node (i, j, k) becomes body "<name>_<i>_<j>_<k>" at its place with three
    slide joints, node weight the integral of its shape function over the mesh volume: trilinear, MuJoCo 4.0's
    cut-cell lumping (mjcf/flex_cells.py; the nodes of cells without volume pinned); quadratic, only where the
    tetrahedra fill the box (else refused), the sum over its cells of Simpson's weights (1/6, 2/3, 1/6 per axis);
    mass = mass * weight / (sum of the unpinned nodes' weights), inertia that mass times 2 inertiabox^2 / 3 about
    each axis;
    pinned nodes (pin id / range: node ids, grid / gridrange: node coordinates) stay on the parent at their place.
    Every point is a vertex of the flex (on no body: flex_vertbodyid -1), with parametric coordinates
    vert0 = (point - lo) / (hi - lo) in the box (0.5 on a flat axis). Returns the record's vertbody, vert, centered,
    point, interp, cellnum, nodebody, node, vert0."""
    pinid, pinrange, pingrid, pingridrange = pins
    npnt = len(point)
    used = np.zeros(npnt, bool)
    used[element.reshape(-1)] = True
    if not used.all():
        raise _refuse(raw, "an interpolated flexcomp with points that no element uses")
    cellnum = [int(c) for c in _vec3(w.get("cellcount"), (1, 1, 1))]
    if any(c < 1 for c in cellnum):
        raise _err(raw, "cellcount must be positive", "cellcount")
    ng = [c * order + 1 for c in cellnum]
    nnode = ng[0] * ng[1] * ng[2]
    lo, hi = point.min(axis=0), point.max(axis=0)
    ext = hi - lo
    if np.any(ext <= MINVAL):  # (a flat box: MuJoCo 4.0 fails to compile it, with this message)
        raise _err(raw, "flex grid rotation R0 is not orthonormal (the points of an interpolated flexcomp span no "
                   "volume)")  # fmt: skip
    if element.shape[1] == 2:
        raise _refuse(raw, "an interpolated flexcomp of dim 1", "dim")
    vert0 = np.where(ext > MINVAL, (point - lo) / np.where(ext > MINVAL, ext, 1.0), 0.5)
    cells = None  # trilinear: (cell weights, empty cells) of the cut-cell quadrature (mjcf/flex_cells.py)
    if order == 1:
        if element.shape[1] == 3 and not _cells.closed_surface(element):
            raise _refuse(raw, "a trilinear flexcomp of dim 2 whose triangles do not close a surface (MuJoCo 4.0's "
                          "volume of an open surface)", "dim")  # fmt: skip
        cells = _cells.cell_weights(point, element, element.shape[1] - 1, cellnum)
    else:
        cell = np.clip(np.floor(vert0 * cellnum).astype(np.int64), 0, np.asarray(cellnum) - 1)
        filled = np.zeros(cellnum, bool)
        filled[cell[:, 0], cell[:, 1], cell[:, 2]] = True
        tet = point[element] if element.shape[1] == 4 else None
        vol = 0.0 if tet is None else np.abs(np.linalg.det(tet[:, 1:] - tet[:, :1])).sum() / 6
        if not filled.all() or tet is None or abs(vol - np.prod(ext)) > 1e-9 * np.prod(ext):
            raise _refuse(raw, "a quadratic interpolated flexcomp whose tetrahedra do not fill their bounding box "
                          "(MuJoCo 4.0's node masses from its cut-cell quadrature)", "dof")  # fmt: skip
    pinned = np.zeros(max(npnt, nnode), bool)
    for i in pinid:
        if i < 0 or i >= len(pinned):
            raise _err(raw, "pinid out of range")
        pinned[i] = True
    for a, b in zip(pinrange[::2], pinrange[1::2]):
        if a < 0 or a >= len(pinned) or b < 0 or b >= len(pinned):
            raise _err(raw, "pinrange out of range")
        pinned[a : b + 1] = True
    if pingrid or pingridrange:
        if len(pingrid) % 3 or len(pingridrange) % 6:
            raise _refuse(raw, "<pin grid / gridrange> of an interpolated flexcomp of dim 2", "grid")
        for i in range(0, len(pingrid), 3):
            ijk = pingrid[i : i + 3]
            if any(ijk[k] < 0 or ijk[k] >= ng[k] for k in range(3)):
                raise _err(raw, "pingrid out of range")
            pinned[(ijk[0] * ng[1] + ijk[1]) * ng[2] + ijk[2]] = True
        for i in range(0, len(pingridrange), 6):
            r = pingridrange[i : i + 6]
            if any(r[k] < 0 or r[k] >= ng[k % 3] for k in range(6)):
                raise _err(raw, "pingridrange out of range")
            for ijk in itertools.product(*[range(r[k], r[k + 3] + 1) for k in range(3)]):
                pinned[(ijk[0] * ng[1] + ijk[1]) * ng[2] + ijk[2]] = True
    pinned = pinned[:nnode]
    if cells is not None:  # nodes of empty cells only are pinned (MuJoCo 4.0)
        node_empty = np.ones(ng, bool)
        for ci, cj, ck in zip(*np.nonzero(~cells[1].reshape(cellnum))):
            node_empty[ci : ci + 2, cj : cj + 2, ck : ck + 2] = False
        pinned |= node_empty.reshape(-1)
    if pinned.all():
        raise _refuse(raw, "an interpolated flexcomp with every node pinned (rigid)", "id")
    weight = np.zeros(nnode)
    pos = np.zeros((nnode, 3))
    for n, (gi, gj, gk) in enumerate(itertools.product(range(ng[0]), range(ng[1]), range(ng[2]))):
        s = [gi / (cellnum[0] * order), gj / (cellnum[1] * order), gk / (cellnum[2] * order)]
        pos[n] = [lo[k] + s[k] * (hi[k] - lo[k]) for k in range(3)]
        wn = 1.0
        for g, nk in zip((gi, gj, gk), ng):
            ncell = 2 if 0 < g < nk - 1 and g % order == 0 else 1
            wn *= (1.0 if order == 1 else _SIMPSON[g % order != 0]) * ncell
        weight[n] = wn
    if cells is not None:  # the integral of each node's shape function over the mesh (mjcf/flex_cells.py)
        weight = np.zeros(ng)
        cm = _cells.node_masses(*cells).reshape(*cellnum, 2, 2, 2)
        for a, b, c in itertools.product(range(2), range(2), range(2)):
            weight[a : a + cellnum[0], b : b + cellnum[1], c : c + cellnum[2]] += cm[..., a, b, c]
        weight = weight.reshape(-1)
    scale = mass / weight[~pinned].sum()
    nodebody, node = [], np.zeros((nnode, 3))
    for n, (gi, gj, gk) in enumerate(itertools.product(range(ng[0]), range(ng[1]), range(ng[2]))):
        if pinned[n]:
            node[n] = pos[n]
            nodebody.append(pname)
            continue
        bname = f"{name}_{gi}_{gj}_{gk}"
        add_body(bname, pos[n], weight[n] * scale, weight[n] * (2.0 * inertiabox * inertiabox) / 3.0 * scale)
        nodebody.append(bname)
    return {"vertbody": [], "vert": point, "centered": not pinned.any(), "point": point, "interp": order,
            "cellnum": cellnum, "nodebody": nodebody, "node": node, "vert0": vert0, "cells": cells}
