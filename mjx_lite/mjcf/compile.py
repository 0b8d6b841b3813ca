"""Compile the spec tree (`parse.py`'s output) into a `Model` matching MuJoCo's mjModel field by field.

Passes (see `context.py`): options and compiler settings, assets (meshes, hfields), the kinematic tree
(bodies, joints/dofs, geoms, sites, cameras, lights, inertia), the sections owned by the per-section modules
(tendons, equality, actuators, sensors, contact pairs/excludes), keyframes, then the constants that need
kinematics at qpos0 (`derived.py`), then `io.build_model`.

Tree order is MuJoCo's: bodies depth-first in XML order, each body's joints/geoms/sites/cameras/lights
contiguous and in XML order. Everything here is host numpy.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import jax
import numpy as np

from mjx_lite import io, models, types
from mjx_lite.collision import mesh_bvh
from mjx_lite.config import Config
from mjx_lite.mjcf import (
    actuation,
    contact,
    derived,
    equality,
    flex,
    fuse,
    hfield,
    plastic,
    plugins,
    sdf_octree,
    sensor,
    skin,
    tendon,
    texture,
    visual,
)
from mjx_lite.mjcf import attrs as at
from mjx_lite.mjcf import inertia as inr
from mjx_lite.mjcf import mesh as mesh_mod
from mjx_lite.mjcf.context import CompileContext, fill_missing, names
from mjx_lite.mjcf.document import parse_file, parse_string
from mjx_lite.mjcf.settings import compiler_settings
from mjx_lite.mjcf.spec import Element, MJCFError
from mjx_lite.types import MINVAL, EqType, GeomType, SensorType, TrnType, WrapType

EPS = inr.EPS
_GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")
_JOINT_TYPES = ("free", "ball", "slide", "hinge")
_CAM_MODES = ("fixed", "track", "trackcom", "targetbody", "targetbodycom")
_LIGHT_TYPES = ("spot", "directional", "point", "image")
_INTEGRATORS = ("Euler", "RK4", "implicit", "implicitfast", "discrete")
_CONES = ("pyramidal", "elliptic")
_JACOBIANS = ("dense", "sparse", "auto")
_SOLVERS = ("PGS", "CG", "Newton")
_DISABLE_BITS = (
    "constraint", "equality", "frictionloss", "limit", "contact", "spring", "damper", "gravity", "clampctrl",
    "warmstart", "filterparent", "actuation", "refsafe", "sensor", "midphase", "eulerdamp", "autoreset",
    "nativeccd", "island", "multiccd",
)  # fmt: skip
_ENABLE_BITS = ("override", "energy", "fwdinv", "invdiscrete", "sleep", "diagexact", "ipc", "speculative")
# enable flags whose MuJoCo feature mjx_lite does not implement
_REFUSED_ENABLE = {  # (sleep: refused by `_check_sleep` with flexes, or an active tendon equality)
    "speculative": "speculative contacts before impact, by conservative advancement; MuJoCo 4.0's documentation calls "
    "them a new feature whose behavior may still change",
}
# MuJoCo's default. mjx_lite's convex colliders give the converged contact whatever opt.ccd_iterations says; MuJoCo's
# GJK/EPA stops after ccd_iterations. At 35 MuJoCo's curved-pair normals are within 3e-2 of the converged ones, at 20
# within 5e-2, at 10 components are up to 1.3 apart (/tmp/ref38/ccd_ours.py): below the default the loader refuses a
# model where MuJoCo would run GJK/EPA (`_check_ccd_iterations`).
_CCD_ITERATIONS = 35
# the per-section passes (in order) and the array prefixes they own
SECTIONS = (
    (tendon.compile_tendon, ("tendon_", "wrap_")),
    (equality.compile_equality, ("eq_",)),
    (actuation.compile_actuator, ("actuator_",)),
    (sensor.compile_sensor, ("sensor_",)),
    (contact.compile_contact, ("pair_", "exclude_")),
    (skin.compile_skins, ("skin_",)),
)
SECTION_SIZES = ("nu", "nactuator", "nout", "nhistory", "na", "ntendon", "nwrap", "neq", "nsensor", "nsensordata",
                 "npair", "nexclude", "nskin", "nskinvert", "nskintexvert", "nskinface", "nskinbone", "nskinbonevert")
# MuJoCo's default colours: geoms and sites (mjs_defaultGeom/Site), lights (mjs_defaultLight)
_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
_LIGHT_DEFAULTS = {"ambient": (0, 0, 0), "diffuse": (0.7, 0.7, 0.7), "specular": (0.3, 0.3, 0.3),
                   "attenuation": (1, 0, 0)}  # fmt: skip
_LIGHT_SCALARS = {"intensity": 0.0, "range": 10.0, "bulbradius": 0.02, "softness": 0.2}  # (PBR renderers' terms)
# sameframe codes
SF_NONE, SF_BODY, SF_INERTIA, SF_BODYROT, SF_INERTIAROT = 0, 1, 2, 3, 4


# ----------------------------------------------------------------------------------------------------------
# compiler settings, options, statistic


def option_settings(root: Element) -> dict[str, Any]:
    """mjOption fields from <option> and <option><flag>."""
    opt: dict[str, Any] = {
        "timestep": 0.002, "impratio": 1.0, "tolerance": 1e-8, "ls_tolerance": 0.01, "noslip_tolerance": 1e-6,
        "ccd_tolerance": 1e-6, "sleep_tolerance": 1e-3, "gravity": np.array([0, 0, -9.81]), "wind": np.zeros(3),
        "magnetic": np.array([0, -0.5, 0]), "density": 0.0, "viscosity": 0.0, "o_margin": 0.0,
        "o_solref": np.array([0.02, 1.0]), "o_solimp": np.array([0.9, 0.95, 0.001, 0.5, 2.0]),
        "o_friction": np.array([1, 1, 0.005, 0.0001, 0.0001]), "integrator": 0, "cone": 0, "jacobian": 2,
        "solver": 2, "iterations": 100, "ls_iterations": 50, "noslip_iterations": 0, "ccd_iterations": 35,
        "sdf_initpoints": 40, "sdf_iterations": 10, "disableflags": 0, "enableflags": 0, "disableactuator": 0,
    }  # fmt: skip
    sizes = {"gravity": 3, "wind": 3, "magnetic": 3, "o_solref": 2, "o_solimp": 5, "o_friction": 5}
    for c in at.sections(root, "option"):
        for k, v in c.attrs.items():
            if v is None or k not in opt and k != "actuatorgroupdisable":
                continue
            if k in sizes:
                opt[k] = at.vec(c, k, sizes[k], opt[k])
            elif k == "integrator":
                opt[k] = at.keyword(c, k, _INTEGRATORS, "Euler")
                if opt[k] == 4:
                    raise at.unsupported(c, "integrator='discrete' is not supported", k)
            elif k == "cone":
                opt[k] = at.keyword(c, k, _CONES, "pyramidal")
            elif k == "jacobian":
                opt[k] = at.keyword(c, k, _JACOBIANS, "auto")
            elif k == "solver":
                opt[k] = at.keyword(c, k, _SOLVERS, "Newton")
            elif k in ("iterations", "ls_iterations", "noslip_iterations", "ccd_iterations", "sdf_initpoints",
                       "sdf_iterations"):
                opt[k] = int(v)  # ccd_iterations below the default: `_check_ccd_iterations`
            elif k in opt:
                opt[k] = float(v)
        groups = c.attrs.get("actuatorgroupdisable")
        if groups is not None:
            bits = 0
            for g in np.atleast_1d(np.asarray(groups, int)):
                if not 0 <= g <= 30:
                    raise at.error(c, "actuator group must be between 0 and 30", "actuatorgroupdisable")
                bits |= 1 << int(g)
            opt["disableactuator"] = bits
        for f in c.find("flag"):
            for k, v in f.attrs.items():
                if v is None:
                    continue
                on = str(v).lower() == "enable"
                if k in _REFUSED_ENABLE and on:
                    raise at.unsupported(f, f"{k}='enable' ({_REFUSED_ENABLE[k]}) is not supported", k)
                if k in _DISABLE_BITS:
                    bit = 1 << _DISABLE_BITS.index(k)
                    opt["disableflags"] = (opt["disableflags"] & ~bit) | (0 if on else bit)
                elif k in _ENABLE_BITS:
                    bit = 1 << _ENABLE_BITS.index(k)
                    opt["enableflags"] = (opt["enableflags"] & ~bit) | (bit if on else 0)
    ipc = 1 << _ENABLE_BITS.index("ipc")
    if opt["enableflags"] & ipc and opt["integrator"] != _INTEGRATORS.index("discrete"):
        where = at.sections(root, "option")[-1]
        raise at.error(where, "flag ipc requires integrator='discrete'", "integrator")
    return opt


def statistic_overrides(root: Element) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for c in at.sections(root, "statistic"):
        for k in ("meaninertia", "meanmass", "meansize", "extent"):  # mjuu_defined: NaN = not given
            if c.attrs.get(k) is not None and not math.isnan(float(c.attrs[k])):
                out[k] = float(c.attrs[k])
        if c.attrs.get("center") is not None and not math.isnan(float(np.asarray(c.attrs["center"]).reshape(-1)[0])):
            out["center"] = at.vec(c, "center", 3, (0, 0, 0))
    return out


# ----------------------------------------------------------------------------------------------------------
# names


# ----------------------------------------------------------------------------------------------------------
# assets


def _meshes_needing_hull(root: Element) -> set[str]:
    """Names of the meshes MuJoCo builds a hull for because a collision geom uses them (mjCModel's SetNeedHull: a
    type="mesh" geom with contype or conaffinity non-zero, or named in a contact pair)."""
    geoms, pairs = [], set()

    def walk(e: Element) -> None:
        for c in e.children:
            if c.tag == "default":
                continue
            if c.tag == "geom":
                geoms.append(c)
            elif c.tag == "pair":
                pairs.update(n for n in (at.get(c, "geom1"), at.get(c, "geom2")) if n)
            walk(c)

    walk(root)
    return {at.get(g, "mesh") for g in geoms
            if at.get(g, "type") in ("mesh", "sdf") and at.get(g, "mesh")
            and (int(at.get(g, "contype", 1)) or int(at.get(g, "conaffinity", 1)) or at.get(g, "name") in pairs)}


def _compile_octrees(root: Element, ctx: CompileContext, elements: list, loaded: list) -> None:
    """mesh_octadr/octnum and oct_*: MuJoCo's octree SDF (sdf_octree.py) of each mesh that a type="sdf" geom names
    (mjsMesh.needsdf), except an SDF plugin's mesh."""
    found = {"sdf": set(), "mesh": set()}  # the meshes that sdf geoms and mesh geoms name

    def walk(e: Element) -> None:
        for c in e.children:
            if c.tag == "default":
                continue
            if c.tag == "geom" and at.get(c, "type") in found and at.get(c, "mesh"):
                found[at.get(c, "type")].add(at.get(c, "mesh"))
            walk(c)

    walk(root)
    names, meshgeoms = found["sdf"], (found["mesh"] if found["sdf"] else set())  # (every sdf geom names a mesh)
    badr, bnum, bparts, btotal = [], [], [], 0
    for asset in loaded:
        if asset.name in meshgeoms:
            b = mesh_bvh.exact_bvh(np.asarray(asset.vert, float), np.asarray(asset.face, np.int64))
            badr.append(btotal)
            bnum.append(len(b["nodeid"]))
            btotal += len(b["nodeid"])
            bparts.append(b)
        else:
            badr.append(-1)
            bnum.append(0)
    ctx.arrays["mesh_sdfbvhadr"] = np.array(badr, np.int32)
    ctx.arrays["mesh_sdfbvhnum"] = np.array(bnum, np.int32)
    ctx.arrays["sdfbvh_aabb"] = np.concatenate([b["aabb"] for b in bparts]) if bparts else np.zeros((0, 6))
    ctx.arrays["sdfbvh_child"] = (np.concatenate([b["child"] for b in bparts]) if bparts
                                  else np.zeros((0, 2), np.int32))  # fmt: skip
    ctx.arrays["sdfbvh_nodeid"] = (np.concatenate([b["nodeid"] for b in bparts]) if bparts
                                   else np.zeros(0, np.int32))  # fmt: skip
    adr, num, parts = [], [], []
    total = 0
    for el, asset in zip(elements, loaded):
        if asset.name in names and el.attrs.get("plugin") is None:
            tab = sdf_octree.octree_arrays(np.asarray(asset.vert, float), np.asarray(asset.face), asset.aamm)
            n = len(tab["oct_depth"])
            adr.append(total)
            num.append(n)
            total += n
            parts.append(tab)
        else:
            adr.append(-1)
            num.append(0)
    A = ctx.arrays
    A["mesh_octadr"] = np.array(adr, np.int32)
    A["mesh_octnum"] = np.array(num, np.int32)
    for k, shape in (("oct_aabb", (0, 6)), ("oct_child", (0, 8)), ("oct_coeff", (0, 8)), ("oct_depth", (0,))):
        A[k] = np.concatenate([t[k] for t in parts]) if parts else np.zeros(shape, np.int32 if k in (
            "oct_child", "oct_depth") else float)  # fmt: skip


def _compile_assets(root: Element, ctx: CompileContext) -> None:
    """Textures and materials (checked, texture.py), meshes and hfields (mesh.py / hfield.py)."""
    ctx.ids.setdefault("mesh", {})
    ctx.ids.setdefault("hfield", {})
    assets = [c for a in at.sections(root, "asset") for c in a.children]
    texture.compile_textures_materials(root, ctx)
    meshes = [el for el in assets if el.tag == "mesh"]
    hfields = [el for el in assets if el.tag == "hfield"]
    ctx.sizes.update(nmesh=0, nmeshvert=0, nmeshface=0, nhfield=0, nhfielddata=0)
    fill_missing(ctx, ("mesh_",), {"nmesh": 0, "nmeshvert": 0, "nmeshface": 0})
    fill_missing(ctx, ("hfield_",), {"nhfield": 0, "nhfielddata": 0})
    if meshes:
        loaded = []
        need_hull = _meshes_needing_hull(root)
        for el in meshes:
            cs = at.compiler(ctx, el)  # (an attached model's mesh: its directory and meshdir)
            meshdir = cs.get("meshdir") or cs.get("assetdir") or ""
            asset = mesh_mod.load_mesh(el, cs.get("_model_dir", ctx.model_dir) or "", meshdir, ctx.assets,
                                       bool(cs.get("strippath")), need_hull)  # fmt: skip
            if not asset.name:
                raise at.error(el, "empty name in mesh", "name")
            if asset.name in ctx.ids["mesh"]:
                raise at.error(el, f"repeated name '{asset.name}' in mesh", "name")
            ctx.ids["mesh"][asset.name] = len(loaded)
            ctx.elements.setdefault("mesh", []).append(el)
            loaded.append(asset)
        arrays, sizes = mesh_mod.mesh_arrays(loaded)
        ctx.arrays.update(arrays)
        ctx.sizes.update(sizes)
        ctx.mesh_assets = loaded
        _compile_octrees(root, ctx, meshes, loaded)
    else:
        _compile_octrees(root, ctx, [], [])
    if hfields:
        hfield.compile_hfields(root, ctx)


# ----------------------------------------------------------------------------------------------------------
# kinematic tree


@dataclasses.dataclass
class _Body:
    el: Element
    parent: int
    pos: np.ndarray
    quat: np.ndarray
    joints: list
    geoms: list
    sites: list
    cams: list
    lights: list
    inertial: Element | None
    mass: float = 0.0
    inertia: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(3))
    ipos: np.ndarray | None = None
    iquat: np.ndarray | None = None
    mocap: bool = False
    gvals: list = dataclasses.field(default_factory=list)  # [(geom Element, compiled values)]
    svals: list = dataclasses.field(default_factory=list)  # [(site Element, compiled values)]


def _collect_bodies(root: Element, ctx: CompileContext) -> list[_Body]:
    """Bodies in MuJoCo order (world first, then depth-first in XML order)."""
    worlds = at.sections(root, "worldbody")
    wel = worlds[0] if worlds else Element("worldbody", {}, [], ctx.file, 0)
    world_children = [c for w in worlds for c in w.children]
    wel = Element(wel.tag, dict(wel.attrs), world_children, wel.file, wel.line)
    bodies: list[_Body] = []

    def visit(el: Element, parent: int) -> None:
        bid = len(bodies)
        is_world = bid == 0
        joints = at.frame_children(el, ("joint", "freejoint"))  # none in the world body (the parser's check)
        inertials = at.frame_children(el, ("inertial",))  # several only through frames: MuJoCo reads the last
        b = _Body(
            el=el, parent=parent,
            pos=at.vec(el, "pos", 3, (0, 0, 0)), quat=at.quat(el),  # (a world pose only from URDF)
            joints=joints, geoms=at.frame_children(el, ("geom",)), sites=at.frame_children(el, ("site",)),
            cams=[(c, None) for c in at.frame_children(el, ("camera",))],
            lights=[(c, None) for c in at.frame_children(el, ("light",))],
            inertial=inertials[-1] if inertials else None, mocap=not is_world and bool(at.get(el, "mocap", False)),
        )  # fmt: skip
        bodies.append(b)
        if not is_world:
            at.register(ctx, "body", el, bid)
        for c in at.frame_children(el, ("body",)):
            visit(c, bid)

    ctx.ids["body"] = {"world": 0}
    ctx.elements["body"] = [wel]
    visit(wel, -1)
    return bodies


def _joint_values(el: Element, ctx: CompileContext) -> dict[str, Any]:
    """Compiled values of one <joint>/<freejoint> (mjCJoint::Compile)."""
    free_el = el.tag == "freejoint"
    jtype = 0 if free_el else at.keyword(el, "type", _JOINT_TYPES, "hinge")
    if free_el and at.bool_auto(at.get(el, "align", "auto")) == "true":
        raise at.unsupported(el, "free joint alignment (align='true') is not supported", "align")

    def g(name, default):  # a <freejoint> takes MuJoCo's built-in joint defaults for everything else
        return default if free_el else at.get(el, name, default)

    cmp = at.compiler(ctx, el)
    degree = cmp["degree"]
    autolimits = bool(cmp["autolimits"])
    rng = np.array([0.0, 0.0]) if free_el else at.vec(el, "range", 2, (0, 0))
    afr = np.array([0.0, 0.0]) if free_el else at.vec(el, "actuatorfrcrange", 2, (0, 0))

    def resolve_limited(flag: str, r: np.ndarray, attr: str) -> bool:
        flag = at.bool_auto(flag)
        if flag == "auto":
            if not autolimits and not (r[0] == 0 and r[1] == 0):
                raise at.error(el, f"joint has `{attr}range` but not `{attr}limited`; set the autolimits='true' "
                               f"compiler option, specify `{attr}limited` explicitly, or remove the range",
                           attr + "range")  # fmt: skip
            return bool(r[0] < r[1])
        return flag == "true"

    if jtype == 0:
        limited = False
        if not free_el and at.bool_auto(at.get(el, "limited", "auto")) == "true":
            raise at.error(el, "limits should not be defined in free joint", "limited")
    else:
        limited = resolve_limited(g("limited", "auto"), rng, "")
    if limited:
        if rng[0] >= rng[1] and jtype != 1:
            raise at.error(el, "range[0] should be smaller than range[1] in joint", "range")
        if rng[0] and jtype == 1:
            raise at.error(el, "range[0] should be 0 in ball joint", "range")
        if degree and jtype in (1, 3):
            rng = rng * (math.pi / 180.0)
    if jtype in (0, 1):
        actfrclimited = False
    else:
        actfrclimited = resolve_limited(g("actuatorfrclimited", "auto"), afr, "actuatorfrc")
        if actfrclimited and afr[0] >= afr[1]:
            raise at.error(el, "actfrcrange[0] should be smaller than actfrcrange[1] in joint", "actuatorfrcrange")
    if jtype in (0, 1):
        axis = np.array([0.0, 0.0, 1.0])
    else:
        axis, n = inr.normalize(at.vec(el, "axis", 3, (0, 0, 1)))
        if n < EPS:
            raise at.error(el, "axis too small in joint", "axis")
    pos = np.zeros(3) if jtype == 0 else at.vec(el, "pos", 3, (0, 0, 0))
    ref = float(g("ref", 0.0))
    springref = float(g("springref", 0.0))
    springyield = float(g("springyield", 0.0))
    if springyield < 0:
        raise at.error(el, "springyield cannot be negative in joint", "springyield")
    if springyield > 0 and jtype == 0:
        raise at.error(el, "springyield should not be defined in free joint", "springyield")
    if degree and jtype == 3:
        ref *= math.pi / 180.0
        springref *= math.pi / 180.0
    if degree and jtype in (1, 3):
        springyield *= math.pi / 180.0
    stiff = np.zeros(3) if free_el else at.vec(el, "stiffness", 3, (0, 0, 0))
    damp = np.zeros(3) if free_el else at.vec(el, "damping", 3, (0, 0, 0))
    sd = np.zeros(2) if free_el else at.vec(el, "springdamper", 2, (0, 0))
    if (sd[0] or sd[1]) and (sd[0] <= 0 or sd[1] <= 0):
        raise at.error(el, "when defined, springdamper values must be positive in joint", "springdamper")
    solref = (0.02, 1.0)
    solimp = (0.9, 0.95, 0.001, 0.5, 2.0)
    armature = float(g("armature", 0.0))  # MuJoCo accepts negative values (no check)
    frictionloss = float(g("frictionloss", 0.0))
    return dict(
        type=jtype, group=int(at.get(el, "group", 0)), limited=limited, actfrclimited=actfrclimited,
        actgravcomp=bool(g("actuatorgravcomp", False)), pos=pos, axis=axis, range=rng, actfrcrange=afr,
        ref=ref, springref=springref, springyield=springyield, stiffness=stiff[0], stiffnesspoly=stiff[1:3],
        damping=damp[0], dampingpoly=damp[1:3], springdamper=sd,
        solref=np.array(solref) if free_el else at.vec(el, "solreflimit", 2, solref),
        solimp=np.array(solimp) if free_el else at.vec(el, "solimplimit", 5, solimp),
        solreffriction=np.array(solref) if free_el else at.vec(el, "solreffriction", 2, solref),
        solimpfriction=np.array(solimp) if free_el else at.vec(el, "solimpfriction", 5, solimp),
        margin=float(g("margin", 0.0)), armature=armature, frictionloss=frictionloss,
    )  # fmt: skip


def _has_fromto(el: Element) -> bool:
    """fromto is in use when written and its first value is a number (MuJoCo's mjuu_defined: NaN = unset)."""
    ft = el.attrs.get("fromto")
    return ft is not None and not math.isnan(float(np.asarray(ft).reshape(-1)[0]))


def _fromto(el: Element, gtype: int, size: np.ndarray, pos: np.ndarray, what: str):
    """Apply `fromto` (capsule/cylinder/box/ellipsoid): returns (size, pos, quat)."""
    ft = np.asarray(el.attrs["fromto"], float)
    if gtype not in (3, 4, 5, 6):
        raise at.error(el, f"fromto requires capsule, cylinder, box or ellipsoid in {what}", "fromto")
    if np.any(pos != 0):
        raise at.error(el, f"both pos and fromto defined in {what}", "fromto")
    vec, n = inr.normalize(ft[0:3] - ft[3:6])
    size = size.copy()
    size[1] = n / 2
    if size[1] < EPS:
        raise at.error(el, f"fromto points too close in {what}", "fromto")
    if gtype in (4, 6):
        size[2] = size[1]
        size[1] = size[0]
    return size, (ft[0:3] + ft[3:6]) / 2, inr.z2quat(vec)


def _check_size(el: Element, gtype: int, size: np.ndarray, what: str) -> None:
    if gtype == 0:
        if size[2] <= 0:
            raise at.error(el, "plane size(3) must be positive", "size")
        return
    for i in range(inr.GEOM_NSIZE[gtype] if gtype < len(inr.GEOM_NSIZE) else 0):
        if not size[i] > 0:
            raise at.error(el, f"size {i} must be positive in {what} (a {_GEOM_TYPES[gtype]} needs "
                           f"{inr.GEOM_NSIZE[gtype]} positive size values)", "size")  # fmt: skip


def _geom_values(el: Element, ctx: CompileContext, body: _Body, bid: int, weldid: int, infer: bool):
    """Compiled values of one <geom> (mjCGeom::Compile)."""
    gtype = at.keyword(el, "type", _GEOM_TYPES, "sphere")
    sdf = _sdf_plugin(el, ctx) if gtype == 8 else None
    condim = int(at.get(el, "condim", 3))
    if condim not in (1, 3, 4, 6):
        raise at.error(el, "invalid condim in geom (must be 1, 3, 4 or 6)", "condim")
    size = at.vec(el, "size", 3, (0, 0, 0))
    pos = at.vec(el, "pos", 3, (0, 0, 0))
    quat = at.quat(el)
    mesh_id = hfield_id = -1
    meshname = at.get(el, "mesh")
    hfname = at.get(el, "hfield")
    if gtype in (7, 8) and not meshname:
        raise at.error(el, f"{_GEOM_TYPES[gtype]} geom must have a mesh attribute", "mesh")
    if gtype == 1 and not hfname:
        raise at.error(el, "hfield geom must have an hfield attribute", "hfield")
    if meshname:
        mesh_id = ctx.id_of("mesh", meshname, el, "mesh")
    if hfname:
        if gtype != 1:
            raise at.error(el, "hfield attribute requires type='hfield'", "hfield")
        hfield_id = ctx.id_of("hfield", hfname, el, "hfield")
    mat = at.get(el, "material")
    if not mat and mesh_id >= 0:  # a geom without a material takes its mesh's (MuJoCo: must exist)
        mat = at.get(ctx.elements["mesh"][mesh_id], "material")
    matid = texture.material_id(ctx, el, name=mat or "")
    if gtype == 0 and weldid != 0:
        raise at.error(el, "plane only allowed in static bodies", "type")
    shell = bool(at.get(el, "shellinertia", False))
    if _has_fromto(el):
        if mesh_id >= 0:
            raise at.error(el, "fromto cannot be used with mesh geom", "fromto")
        size, pos, quat = _fromto(el, gtype, size, pos, "geom")
    mesh = None
    if mesh_id >= 0:
        mesh = ctx.mesh_assets[mesh_id]
        if gtype not in (7, 8):
            size, offset = mesh_mod.fit_geom(mesh, gtype, float(at.get(el, "fitscale", 1.0)),
                                             bool(ctx.compiler.get("fitaabb")))  # fmt: skip
            pos, quat = mesh_mod.mesh_geom_frame(pos, quat, mesh, offset)
            mesh_id = -1
            mesh = None
        else:
            if shell:
                raise at.error(el, "for mesh geoms, inertia should be specified in the mesh asset", "shellinertia")
            pos, quat = mesh_mod.mesh_geom_frame(pos, quat, mesh)
    _check_size(el, gtype, size, "geom")
    if gtype == 8 and sdf is None:
        sdf = _sdf_octree(el, ctx, mesh_id)
    if gtype == 1:
        hs = np.asarray(ctx.arrays["hfield_size"][hfield_id], float)
        size = np.array([hs[0], hs[1], 0.25 * hs[2] + 0.5 * hs[3]])
        aamm = np.array([-hs[0], -hs[1], -hs[3], hs[0], hs[1], hs[2]])
        rbound = inr.sqrt(hs[0] ** 2 + hs[1] ** 2 + max(hs[2] ** 2, hs[3] ** 2))
    elif gtype in (7, 8):
        aamm = np.asarray(mesh.aamm, float)
        size = np.maximum(np.abs(aamm[:3]), np.abs(aamm[3:]))
        rbound = float(np.linalg.norm(size))
    else:
        rbound = _rbound(gtype, size)
        aamm = _aamm(gtype, size)
    if np.any(np.isnan(size)):
        raise at.error(el, "nan size in geom", "size")
    aabb = np.concatenate([(aamm[3:] + aamm[:3]) / 2, (aamm[3:] - aamm[:3]) / 2])
    # mass and inertia
    mass = 0.0
    ginertia = np.zeros(3)
    if infer:
        density = float(at.get(el, "density", 1000.0))
        gmass = el.attrs.get("mass")
        if gmass is not None and math.isnan(float(gmass)):
            gmass = None  # mjuu_defined: a NaN mass is an unset one
        volume = float(mesh.volume) if gtype in (7, 8) else inr.geom_volume(gtype, size, shell)
        if gmass is not None:
            gmass = float(gmass)
            if gmass == 0:
                mass, density = 0.0, 0.0
            elif volume > EPS:
                mass = gmass
                density = gmass / volume
                ginertia = _geom_inertia(gtype, size, mass, shell, mesh)
            if gmass < 0:
                raise at.error(el, "mass, inertia or density are negative in geom", "mass")
        elif density != 0:
            mass = density * volume
            ginertia = _geom_inertia(gtype, size, mass, shell, mesh)
        if mass < 0 or np.any(ginertia < 0) or density < 0:
            raise at.error(el, "mass, inertia or density are negative in geom", "density")
    fluid = np.zeros(12)
    if at.keyword(el, "fluidshape", ("none", "ellipsoid"), "none") == 1:
        fluid = inr.fluid_coefs(gtype, size, 1.0, at.vec(el, "fluidcoef", 5, (0.5, 0.25, 1.5, 1.0, 1.0)))
    return dict(
        type=gtype, contype=int(at.get(el, "contype", 1)), conaffinity=int(at.get(el, "conaffinity", 1)),
        condim=condim, group=int(at.get(el, "group", 0)), priority=int(at.get(el, "priority", 0)),
        dataid=mesh_id if gtype in (7, 8) else hfield_id, sdf=sdf, size=size, pos=pos, quat=quat, aabb=aabb,
        rbound=rbound,
        friction=at.vec(el, "friction", 3, (1, 0.005, 0.0001)), solmix=float(at.get(el, "solmix", 1.0)),
        solref=at.vec(el, "solref", 2, (0.02, 1.0)), solimp=at.vec(el, "solimp", 5, (0.9, 0.95, 0.001, 0.5, 2.0)),
        margin=float(at.get(el, "margin", 0.0)), gap=float(at.get(el, "gap", 0.0)), fluid=fluid,
        surfacevel=at.vec(el, "surfacevel", 6, (0,) * 6), adhesion=float(at.get(el, "adhesion", 0.0)),
        mass=mass, inertia=ginertia, matid=matid, rgba=at.vec(el, "rgba", 4, _DEFAULT_RGBA),
    )  # fmt: skip


def _compile_plugins(root: Element, ctx: CompileContext) -> None:
    """MuJoCo's plugin instances (plugin, plugin_stateadr, plugin_statenum; actuator_plugin, sensor_plugin): the
    declared instances, then the implicit ones (a <plugin plugin=...> with its own config) of meshes, actuators,
    sensors and geoms (mjcf/plugins.py). Raises MuJoCo's init errors: a pid instance no actuator uses, a touch_grid
    instance's configuration (also unused)."""
    ext = next(iter(at.sections(root, "extension")), None)
    explicit = plugins.explicit_instances(ext)
    ids = {inst: i for i, (_, inst, _) in enumerate(explicit)}
    names = [name for name, _, _ in explicit]

    def instance_of(use_name: str, inst: str | None) -> int:
        if inst is not None:
            return ids[inst]
        names.append(use_name)
        return len(names) - 1

    for el in ctx.elements.get("mesh", []):
        if el.attrs.get("plugin_implicit"):
            instance_of(el.attrs["plugin"][0], None)
    acts = ctx.elements.get("actuator", [])
    act_plugin = [instance_of(el.attrs["plugin"]["plugin"], el.attrs["plugin"]["instance"]) if el.tag == "plugin"
                  else -1 for el in acts]  # fmt: skip
    sens = ctx.elements.get("sensor", [])
    sens_plugin = [instance_of(el.attrs["plugin"]["plugin"], el.attrs["plugin"]["instance"]) if el.tag == "plugin"
                   else -1 for el in sens]  # fmt: skip
    for el in ctx.elements.get("geom", []):
        if el.attrs.get("plugin_implicit"):
            instance_of(el.attrs["plugin"][0], None)
    for i, (name, inst, config) in enumerate(explicit):
        if name == "mujoco.sensor.touch_grid":  # (MuJoCo runs its init, config checks, for every instance)
            plugins.touch_grid_parameters(ext, inst, config)
        if name == "mujoco.pid" and i not in act_plugin:
            raise MJCFError(f"plugin instance '{inst}' of mujoco.pid: actuator not found for plugin instance {i} "
                            "(MuJoCo: plugin->init failed)", ext.file, ext.line, "extension")  # fmt: skip
    n = len(names)
    ctx.arrays["plugin"] = np.array([plugins.SLOT[name] for name in names], np.int32)
    ctx.arrays["plugin_stateadr"] = np.zeros(n, np.int32)
    ctx.arrays["plugin_statenum"] = np.zeros(n, np.int32)
    ctx.arrays["actuator_plugin"] = np.array(act_plugin, np.int32).reshape(len(acts))
    ctx.arrays["sensor_plugin"] = np.array(sens_plugin, np.int32).reshape(len(sens))


def _sdf_plugin(el: Element, ctx: CompileContext) -> tuple:
    """(plugin name, attribute values) of an sdf geom's <plugin> (resolved by the reader: mjcf/plugins.py sdf_use)."""
    return el.attrs.get("plugin")


def _sdf_octree(el: Element, ctx: CompileContext, mesh_id: int) -> tuple:
    """geom_sdf of an sdf geom without a plugin: its mesh's octree (collision/sdf.py's OCTREE config)."""
    A = ctx.arrays
    adr, num = int(A["mesh_octadr"][mesh_id]), int(A["mesh_octnum"][mesh_id])
    if adr < 0:  # (SHOULD NOT OCCUR: every mesh an sdf geom names has one, but an SDF plugin's mesh)
        raise at.unsupported(el, "an sdf geom without a <plugin> on an SDF plugin's mesh is not supported", "mesh")
    return (sdf_octree.OCTREE, (adr, num, int(A["oct_depth"][adr : adr + num].max())))


def _geom_inertia(gtype, size, mass, shell, mesh):
    if gtype in (7, 8):
        return inr.box_inertia(mesh.boxsz, mass)
    return inr.geom_inertia(gtype, size, mass, shell)


def _rbound(gtype: int, s: np.ndarray) -> float:
    if gtype == 2:
        return float(s[0])
    if gtype == 3:
        return float(s[0] + s[1])
    if gtype == 5:
        return inr.sqrt(s[0] ** 2 + s[1] ** 2)
    if gtype == 4:
        return float(max(s[0], s[1], s[2]))
    if gtype == 6:
        return inr.sqrt(s[0] ** 2 + s[1] ** 2 + s[2] ** 2)
    return 0.0


def _aamm(gtype: int, s: np.ndarray) -> np.ndarray:
    if gtype == 2:
        h = np.full(3, s[0])
    elif gtype == 3:
        h = np.array([s[0], s[0], s[0] + s[1]])
    elif gtype == 5:
        h = np.array([s[0], s[0], s[1]])
    elif gtype == 0:
        big = 1e10  # mjMAXVAL
        return np.array([-big, -big, -big, big, big, 0.0])
    else:
        h = np.asarray(s[:3], float)
    return np.concatenate([-h, h])


def _site_values(el: Element, ctx: CompileContext) -> dict[str, Any]:
    stype = at.keyword(el, "type", _GEOM_TYPES, "sphere")
    meshname = at.get(el, "mesh")
    if meshname:
        ctx.id_of("mesh", meshname, el, "mesh")
    if stype in (0, 1, 7):  # (MuJoCo accepts an sdf site: sites do not collide)
        raise at.error(el, "meshes, hfields and planes not allowed in site", "type")
    matid = texture.material_id(ctx, el)
    size = at.vec(el, "size", 3, (0.005, 0.005, 0.005))
    pos = at.vec(el, "pos", 3, (0, 0, 0))
    quat = at.quat(el)
    if _has_fromto(el):
        size, pos, quat = _fromto(el, stype, size, pos, "site")
    _check_size(el, stype, size, "site")
    return dict(type=stype, group=int(at.get(el, "group", 0)), size=size, pos=pos, quat=quat, matid=matid,
                rgba=at.vec(el, "rgba", 4, _DEFAULT_RGBA))


def _sameframe(pos, quat, ipos=None, iquat=None) -> int:
    def null_vec(v):
        return bool(np.all(np.abs(v) < 1e-6))

    def same_quat(a, b):
        return bool(np.all(np.abs(a - b) < 1e-6) or np.all(np.abs(a + b) < 1e-6))

    unit = np.array([1.0, 0, 0, 0])
    if null_vec(pos) and same_quat(quat, unit):
        return SF_BODY
    if same_quat(quat, unit):
        return SF_BODYROT
    if ipos is None:
        return SF_NONE
    if bool(np.all(np.abs(pos - ipos) < 1e-6)) and same_quat(quat, iquat):
        return SF_INERTIA
    if same_quat(quat, iquat):
        return SF_INERTIAROT
    return SF_NONE


def _body_inertia(b: _Body, bid: int, geoms: list[dict], gels: list[Element], ctx: CompileContext) -> None:
    """Inertial frame, mass and principal inertia of body `b` (mjCBody::Compile)."""
    cmp = at.compiler(ctx, b.el)
    ifg = cmp["inertiafromgeom"]
    lo, hi = cmp["inertiagrouprange"]
    if b.inertial is not None:
        iel = b.inertial
        if iel.attrs.get("pos") is None:
            raise at.error(iel, "inertial requires pos", "pos")
        if iel.attrs.get("mass") is None:
            raise at.error(iel, "inertial requires mass", "mass")
        b.ipos = at.vec(iel, "pos", 3, (0, 0, 0))
        b.iquat = at.quat(iel)
        b.mass = float(iel.attrs["mass"])  # a negative mass is raised to boundmass below (MuJoCo's order)
        full = iel.attrs.get("fullinertia")
        if full is not None and math.isnan(float(np.asarray(full).reshape(-1)[0])):
            full = None  # mjuu_defined
        diag = iel.attrs.get("diaginertia")
        if full is not None:
            if "quat" in iel.explicit or any(a in iel.explicit for a in ("axisangle", "xyaxes", "zaxis", "euler")):
                raise at.error(iel, "fullinertia and inertial orientation cannot both be specified", "fullinertia")
            if diag is not None:
                raise at.error(iel, "fullinertia and diagonal inertia cannot both be specified", "fullinertia")
            res = inr.principal_inertia(np.asarray(full, float))
            if res is None:
                raise at.error(iel, "inertia must have positive eigenvalues", "fullinertia")
            b.inertia, b.iquat = res
        elif diag is not None:
            b.inertia = np.asarray(diag, float).copy()
        else:
            b.inertia = np.zeros(3)
    if bid > 0 and (ifg == "true" or (b.ipos is None and ifg == "auto")):
        sel = [g for g in geoms if lo <= g["group"] <= hi and g["mass"] > EPS]  # MuJoCo skips tiny masses
        if len(sel) == 1:
            g = sel[0]
            b.ipos, b.iquat, b.mass, b.inertia = g["pos"].copy(), g["quat"].copy(), g["mass"], g["inertia"].copy()
        elif len(sel) > 1:
            mass = sum(g["mass"] for g in sel)
            if mass < EPS:
                raise at.error(b.el, "body mass is too small, cannot compute center of mass")
            mass, com, res = inr.combine_inertia(
                [g["mass"] for g in sel], [g["pos"] for g in sel], [g["quat"] for g in sel], [g["inertia"] for g in sel]
            )
            if res is None:
                raise at.error(b.el, "inertia of the geoms has a negative eigenvalue")
            b.mass, b.ipos = mass, com
            b.inertia, b.iquat = res
    if b.ipos is None:  # no inertial information: MuJoCo copies the body frame (its own pose, before any <frame>)
        local = b.el.attrs.get("_local")
        if local is None or bid == 0:
            b.ipos, b.iquat = b.pos.copy(), b.quat.copy()
        else:
            b.ipos, b.iquat = np.array(local[0], float), inr.normalize(np.asarray(local[1], float))[0]
    if bid > 0:
        b.mass = max(b.mass, float(cmp["boundmass"]))
        b.inertia = np.maximum(b.inertia, float(cmp["boundinertia"]))
        where = b.inertial if b.inertial is not None else b.el
        if b.mass < 0 or np.any(b.inertia < 0):
            raise at.error(where, "mass and inertia cannot be negative", "mass" if b.mass < 0 else "diaginertia")
        i = b.inertia
        if i[0] + i[1] < i[2] or i[0] + i[2] < i[1] or i[1] + i[2] < i[0]:
            if cmp["balanceinertia"]:
                b.inertia = np.full(3, i.sum() / 3.0)
            else:
                raise at.error(where, "inertia must satisfy A + B >= C; use 'balanceinertia' to fix", "diaginertia")


def _body_values(bodies: list[_Body], ctx: CompileContext) -> None:
    """Per-body compile before any fusing (mjCBody::Compile): geom and site values, inertia, visual geoms dropped."""
    weldid = np.zeros(len(bodies), np.int32)
    for bid, b in enumerate(bodies):
        par = b.parent
        weldid[bid] = 0 if bid == 0 else (bid if b.joints or b.mocap else weldid[par])
        if b.mocap and (b.joints or par != 0):
            raise at.error(b.el, f"mocap body '{at.get(b.el, 'name', '')}' is not a fixed child of world", "mocap")
        cmp = at.compiler(ctx, b.el)
        infer_ok = bid > 0 and (b.inertial is None or cmp["inertiafromgeom"] == "true")
        lo, hi = cmp["inertiagrouprange"]
        gvals = []
        for el in b.geoms:
            grp = int(at.get(el, "group", 0))
            gvals.append(_geom_values(el, ctx, b, bid, int(weldid[bid]), infer_ok and lo <= grp <= hi))
        _body_inertia(b, bid, gvals, b.geoms, ctx)
        if ctx.compiler["discardvisual"]:  # visual geoms still count for inertia, then they are dropped
            keep = [i for i, g in enumerate(gvals) if g["contype"] or g["conaffinity"]]
            b.geoms = [b.geoms[i] for i in keep]
            gvals = [gvals[i] for i in keep]
        b.gvals = list(zip(b.geoms, gvals))
        b.svals = [(el, _site_values(el, ctx)) for el in b.sites]


def _compile_tree(root: Element, ctx: CompileContext) -> list[_Body]:
    bodies = _collect_bodies(root, ctx)
    _body_values(bodies, ctx)
    if ctx.compiler["fusestatic"]:
        bodies = fuse.fuse_static(bodies, root)
        ctx.ids["body"] = {"world": 0}
        ctx.elements["body"] = ctx.elements["body"][:1]
        for bid, b in enumerate(bodies[1:], start=1):
            at.register(ctx, "body", b.el, bid)
    nbody = len(bodies)
    A: dict[str, Any] = {}
    # per-object accumulators
    jnt, geo, sit, cam, lgt = [], [], [], [], []
    body_jntadr, body_jntnum, body_dofadr, body_dofnum = [], [], [], []
    body_geomadr, body_geomnum = [], []
    weldid = np.zeros(nbody, np.int32)
    rootid = np.zeros(nbody, np.int32)
    mocapid = np.full(nbody, -1, np.int32)
    nmocap = 0
    dof_bodyid, dof_jntid, dof_parentid = [], [], []
    lastdof = np.full(nbody, -1)
    for bid, b in enumerate(bodies):
        par = b.parent
        weldid[bid] = 0 if bid == 0 else (bid if b.joints or b.mocap else weldid[par])
        rootid[bid] = bid if bid == 0 or par == 0 else rootid[par]
        if b.mocap:
            mocapid[bid] = nmocap
            nmocap += 1
        # joints
        jvals = [_joint_values(el, ctx) for el in b.joints]
        nfree = sum(j["type"] == 0 for j in jvals)
        if nfree > 1 or (nfree == 1 and len(jvals) > 1):
            raise at.error(b.el, "free joint can only appear by itself")
        if nfree and par != 0:
            raise at.error(b.joints[0], "free joint can only be used on top level")
        hasball = False
        for j in jvals:
            if j["type"] in (1, 3) and hasball:
                raise at.error(b.el, "ball followed by rotation in body")
            hasball |= j["type"] == 1
        ndof = sum(types.JointType(j["type"]).dof_width() for j in jvals)
        if ndof > 6:
            raise at.error(b.el, "more than 6 dofs in body")
        body_jntadr.append(len(jnt) if jvals else -1)
        body_jntnum.append(len(jvals))
        body_dofadr.append(len(dof_bodyid) if ndof else -1)
        body_dofnum.append(ndof)
        last = lastdof[par] if par >= 0 else -1
        for el, j in zip(b.joints, jvals):
            jid = len(jnt)
            at.register(ctx, "joint", el, jid)
            j["bodyid"] = bid
            j["dofadr"] = len(dof_bodyid)
            jnt.append(j)
            for _ in range(types.JointType(j["type"]).dof_width()):
                dof_parentid.append(last)
                last = len(dof_bodyid)
                dof_bodyid.append(bid)
                dof_jntid.append(jid)
        lastdof[bid] = last
        # geoms, sites, cameras, lights (fused ones last, in the parent's frame)
        body_geomadr.append(len(geo) if b.gvals else -1)
        body_geomnum.append(len(b.gvals))
        for el, g in b.gvals:
            at.register(ctx, "geom", el, len(geo))
            g["bodyid"] = bid
            geo.append(g)
        for el, s in b.svals:
            s["bodyid"] = bid
            at.register(ctx, "site", el, len(sit))
            sit.append(s)
        for el, fr in b.cams:
            at.register(ctx, "camera", el, len(cam))
            cam.append((bid, el, fr))
        for el, fr in b.lights:
            at.register(ctx, "light", el, len(lgt))
            lgt.append((bid, el, fr))
    _check_mass_inertia(bodies)

    # ---- bodies
    A["body_parentid"] = np.array([max(b.parent, 0) for b in bodies], np.int32)
    A["body_rootid"] = rootid
    A["body_weldid"] = weldid
    A["body_mocapid"] = mocapid
    A["body_jntnum"] = np.array(body_jntnum, np.int32)
    A["body_jntadr"] = np.array(body_jntadr, np.int32)
    A["body_dofnum"] = np.array(body_dofnum, np.int32)
    A["body_dofadr"] = np.array(body_dofadr, np.int32)
    A["body_geomnum"] = np.array(body_geomnum, np.int32)
    A["body_geomadr"] = np.array(body_geomadr, np.int32)
    A["body_pos"] = np.array([b.pos for b in bodies]).reshape(nbody, 3)
    A["body_quat"] = np.array([b.quat for b in bodies]).reshape(nbody, 4)
    A["body_ipos"] = np.array([b.ipos for b in bodies]).reshape(nbody, 3)
    A["body_iquat"] = np.array([b.iquat for b in bodies]).reshape(nbody, 4)
    A["body_mass"] = np.array([b.mass for b in bodies], float)
    A["body_inertia"] = np.array([b.inertia for b in bodies]).reshape(nbody, 3)
    A["body_gravcomp"] = np.array([0.0] + [float(at.get(b.el, "gravcomp", 0.0)) for b in bodies[1:]])
    ct = np.zeros(nbody, np.int32)
    ca = np.zeros(nbody, np.int32)
    mg = np.zeros(nbody)
    for g in geo:
        ct[g["bodyid"]] |= g["contype"]
        ca[g["bodyid"]] |= g["conaffinity"]
        inflate = g["margin"] + g["gap"]  # MuJoCo 4.0: margin + gap, mjMAX (a NaN wins)
        mg[g["bodyid"]] = mg[g["bodyid"]] if mg[g["bodyid"]] > inflate else inflate
    A["body_contype"], A["body_conaffinity"], A["body_margin"] = ct, ca, mg
    sameframe = np.array([_sameframe(b.ipos, b.iquat) for b in bodies], np.uint8)
    world_offset = sameframe[0] != SF_BODY  # (a URDF can move the world's inertial frame: then it is not simple)
    sameframe[0] = SF_BODY
    A["body_sameframe"] = sameframe

    # ---- joints and dofs
    njnt, nv = len(jnt), len(dof_bodyid)
    qposadr, nq = [], 0
    for j in jnt:
        qposadr.append(nq)
        nq += types.JointType(j["type"]).qpos_width()
    qpos0 = np.zeros(nq)
    qpos_spring = np.zeros(nq)
    for j, adr in zip(jnt, qposadr):
        t = j["type"]
        if t == 0:
            b = bodies[j["bodyid"]]
            qpos0[adr : adr + 3] = b.pos
            qpos0[adr + 3 : adr + 7] = b.quat
            qpos_spring[adr : adr + 7] = qpos0[adr : adr + 7]
        elif t == 1:
            qpos0[adr : adr + 4] = qpos_spring[adr : adr + 4] = (1, 0, 0, 0)
        else:
            qpos0[adr] = j["ref"]
            qpos_spring[adr] = j["springref"]
    A["qpos0"], A["qpos_spring"] = qpos0, qpos_spring

    def jarr(key, shape, dtype=float):
        return np.array([j[key] for j in jnt], dtype).reshape((njnt,) + shape)

    A["jnt_type"] = jarr("type", (), np.int32)
    A["jnt_qposadr"] = np.array(qposadr, np.int32)
    A["jnt_dofadr"] = jarr("dofadr", (), np.int32)
    A["jnt_bodyid"] = jarr("bodyid", (), np.int32)
    A["jnt_group"] = jarr("group", (), np.int32)
    A["jnt_limited"] = jarr("limited", (), bool)
    A["jnt_actfrclimited"] = jarr("actfrclimited", (), bool)
    A["jnt_actgravcomp"] = jarr("actgravcomp", (), bool)
    A["jnt_pos"] = jarr("pos", (3,))
    A["jnt_axis"] = jarr("axis", (3,))
    A["jnt_stiffness"] = jarr("stiffness", ())
    A["jnt_stiffnesspoly"] = jarr("stiffnesspoly", (2,))
    A["jnt_springyield"] = jarr("springyield", ())
    A["jnt_range"] = jarr("range", (2,))
    A["jnt_actfrcrange"] = jarr("actfrcrange", (2,))
    A["jnt_solref"] = jarr("solref", (2,))
    A["jnt_solimp"] = jarr("solimp", (5,))
    A["jnt_margin"] = jarr("margin", ())
    A["jnt_actuatorid"] = np.full(njnt, -1, np.int32)
    dj = np.array(dof_jntid, np.int32)

    def darr(key, shape):
        return np.array([jnt[i][key] for i in dj], float).reshape((nv,) + shape)

    A["dof_bodyid"] = np.array(dof_bodyid, np.int32)
    A["dof_jntid"] = dj
    A["dof_parentid"] = np.array(dof_parentid, np.int32)
    A["dof_solref"] = darr("solreffriction", (2,))
    A["dof_solimp"] = darr("solimpfriction", (5,))
    A["dof_frictionloss"] = darr("frictionloss", ())
    A["dof_armature"] = darr("armature", ())
    A["dof_damping"] = darr("damping", ())
    A["dof_dampingpoly"] = darr("dampingpoly", (2,))
    ctx.joint_springdamper = np.array([j["springdamper"] for j in jnt]).reshape(njnt, 2)

    # ---- simple bodies (CopyTree)
    simple = np.zeros(nbody, np.uint8)
    dofnum = A["body_dofnum"]
    for bid, b in enumerate(bodies):
        p = max(b.parent, 0)
        simple[bid] = sameframe[bid] == SF_BODY and (
            rootid[bid] == bid or (A["body_parentid"][p] == 0 and dofnum[p] == 0)
        )
        if bid > 0 and at.get(b.el, "simple", "auto") == "false":  # user override
            simple[bid] = 0
        if bid > 0 and p > 0:
            simple[p] = 0
        rot = False
        for j in (jnt[k] for k in range(body_jntadr[bid], body_jntadr[bid] + body_jntnum[bid])):
            aligned = int(np.sum(np.abs(j["axis"]) > EPS)) == 1
            if rot or np.any(np.abs(j["pos"]) >= 1e-6) or (j["type"] in (2, 3) and not aligned):
                simple[bid] = 0
            rot |= j["type"] in (1, 3)
        if bid == 0 and world_offset:
            simple[bid] = 0
        if simple[bid] and dofnum[bid]:
            slides = all(jnt[k]["type"] == 2 for k in range(body_jntadr[bid], body_jntadr[bid] + body_jntnum[bid]))
            simple[bid] = 2 if slides else 1
    A["body_simple"] = simple

    # ---- trees, mass matrix addresses
    dpar = A["dof_parentid"]
    dof_treeid = np.zeros(nv, np.int32)
    ntree = 0
    for i in range(nv):
        if dpar[i] == -1:
            ntree += 1
        dof_treeid[i] = ntree - 1
    A["dof_treeid"] = dof_treeid
    body_treeid = np.full(nbody, -1, np.int32)
    for i in range(nbody):
        w = weldid[i]
        if dofnum[w]:
            body_treeid[i] = dof_treeid[A["body_dofadr"][w]]
    A["body_treeid"] = body_treeid
    for i in range(1, nbody):  # a non-default sleep policy only on the first body of a tree
        if at.get(bodies[i].el, "sleep", "auto") != "auto" and (body_treeid[i] == -1
                                                                or body_treeid[i] == body_treeid[i - 1]):
            raise at.error(bodies[i].el, "sleep policy only allowed for movable root bodies", "sleep")
    tree_bodyadr = np.zeros(ntree, np.int32)
    tree_bodynum = np.zeros(ntree, np.int32)
    cur = -1
    for i in range(1, nbody):
        t = body_treeid[i]
        if t != -1:
            if t > cur:
                cur += 1
                tree_bodyadr[cur] = i
            tree_bodynum[cur] += 1
    tree_dofadr = np.zeros(ntree, np.int32)
    tree_dofnum = np.zeros(ntree, np.int32)
    cur = -1
    for i in range(nv):
        if dof_treeid[i] > cur:
            cur += 1
            tree_dofadr[cur] = i
        tree_dofnum[cur] += 1
    A.update(tree_bodyadr=tree_bodyadr, tree_bodynum=tree_bodynum, tree_dofadr=tree_dofadr, tree_dofnum=tree_dofnum)
    madr = np.zeros(nv, np.int32)
    nM = 0
    for i in range(nv):
        madr[i] = nM
        j = i
        while j >= 0:
            nM += 1
            j = dpar[j]
    A["dof_Madr"] = madr

    # ---- geoms
    ngeom = len(geo)

    def garr(key, shape, dtype=float):
        return np.array([g[key] for g in geo], dtype).reshape((ngeom,) + shape)

    for key, shape, dt in (("type", (), np.int32), ("contype", (), np.int32), ("conaffinity", (), np.int32),
                           ("condim", (), np.int32), ("bodyid", (), np.int32), ("dataid", (), np.int32),
                           ("group", (), np.int32), ("priority", (), np.int32), ("size", (3,), float),
                           ("aabb", (6,), float), ("pos", (3,), float), ("quat", (4,), float),
                           ("friction", (3,), float), ("solmix", (), float), ("solref", (2,), float),
                           ("solimp", (5,), float), ("margin", (), float), ("gap", (), float),
                           ("fluid", (12,), float), ("rbound", (), float), ("surfacevel", (6,), float),
                           ("adhesion", (), float), ("matid", (), np.int32), ("rgba", (4,), float)):  # fmt: skip
        A["geom_" + key] = garr(key, shape, dt)
    A["geom_sdf"] = tuple(g["sdf"] for g in geo)  # (plugin name, attribute values) of sdf geoms, else None
    A["geom_sameframe"] = np.array(
        [_sameframe(g["pos"], g["quat"], bodies[g["bodyid"]].ipos, bodies[g["bodyid"]].iquat) for g in geo], np.uint8
    ).reshape(ngeom)

    # ---- sites
    nsite = len(sit)
    A["site_type"] = np.array([s["type"] for s in sit], np.int32).reshape(nsite)
    A["site_bodyid"] = np.array([s["bodyid"] for s in sit], np.int32).reshape(nsite)
    A["site_dataid"] = np.full(nsite, -1, np.int32)
    A["site_group"] = np.array([s["group"] for s in sit], np.int32).reshape(nsite)
    A["site_matid"] = np.array([s["matid"] for s in sit], np.int32).reshape(nsite)
    A["site_rgba"] = np.array([s["rgba"] for s in sit], float).reshape(nsite, 4)
    A["site_size"] = np.array([s["size"] for s in sit], float).reshape(nsite, 3)
    A["site_pos"] = np.array([s["pos"] for s in sit], float).reshape(nsite, 3)
    A["site_quat"] = np.array([s["quat"] for s in sit], float).reshape(nsite, 4)
    A["site_sameframe"] = np.array(
        [_sameframe(s["pos"], s["quat"], bodies[s["bodyid"]].ipos, bodies[s["bodyid"]].iquat) for s in sit], np.uint8
    ).reshape(nsite)

    # ---- cameras and lights
    _compile_cameras(cam, ctx, A, float(visual.visual_settings(root)["map"]["znear"]))
    _compile_lights(lgt, ctx, A)

    ctx.arrays.update(A)
    ctx.sizes.update(nq=nq, nv=nv, nbody=nbody, njnt=njnt, ngeom=ngeom, nsite=nsite, ncam=len(cam),
                     nlight=len(lgt), nmocap=nmocap, ntree=ntree, nM=nM)  # fmt: skip
    return bodies


def _check_mass_inertia(bodies: list[_Body]) -> None:
    """Moving bodies need mass and inertia >= mjMINVAL (themselves or through a static descendant)."""
    children: dict[int, list[int]] = {}
    for i, b in enumerate(bodies):
        if i > 0:
            children.setdefault(b.parent, []).append(i)

    def ok(i: int) -> bool:
        b = bodies[i]
        if b.mass >= MINVAL and np.all(b.inertia >= MINVAL):
            return True
        return any(ok(c) for c in children.get(i, []) if not bodies[c].joints)

    for i, b in enumerate(bodies[1:], start=1):
        if b.joints and not ok(i):
            raise at.error(b.el, "mass and inertia of moving bodies must be larger than mjMINVAL "
                             f"(body '{at.get(b.el, 'name', '') or i}')")  # fmt: skip


def _mode_target(el: Element, ctx: CompileContext) -> tuple[int, int]:
    """Tracking mode and target body id (-1: none) of a camera or light."""
    tname = at.get(el, "target")
    tid = ctx.id_of("body", tname, el, "target") if tname else -1
    return at.keyword(el, "mode", _CAM_MODES, "fixed"), tid


def _compile_cameras(cams: list, ctx: CompileContext, A: dict, znear: float) -> None:
    """cam_*; cam_intrinsic and cam_sensorsize are MuJoCo's float32 values (mjCCamera: focal lengths and principal
    point in length units, from their pixel values where given; without a sensor size, znear as the focal lengths)."""
    n = len(cams)
    bodyid, mode, target, pos, quat, fovy = [], [], [], [], [], []
    resolution, sensorsize, intrinsics, projection = [], [], [], []
    f32 = np.float32
    for bid, el, fr in cams:
        bodyid.append(bid)
        m, tid = _mode_target(el, ctx)
        mode.append(m)
        target.append(tid)
        projection.append(at.keyword(el, "projection", ("perspective", "orthographic"), "perspective"))
        p, q = at.vec(el, "pos", 3, (0, 0, 0)), at.quat(el)
        if fr is not None:  # fused into the parent body
            p, q = fuse.change_frame(p, q, fr[0], fr[1])
        pos.append(p)
        quat.append(q)
        fv = float(at.get(el, "fovy", 45.0))
        if fv >= 180:
            raise at.error(el, "fovy too large in camera", "fovy")
        ss = at.vec(el, "sensorsize", 2, (0, 0))
        res = at.vec(el, "resolution", 2, (1, 1))
        intrinsic = any(np.any(at.vec(el, k, 2, (0, 0))) for k in ("focal", "focalpixel", "principal",
                                                                      "principalpixel"))  # fmt: skip
        has_sensorsize = ss[0] > 0 and ss[1] > 0
        if intrinsic and not has_sensorsize:
            raise at.error(el, "focal/principal require sensorsize in camera", "sensorsize")
        if has_sensorsize and (res[0] <= 0 or res[1] <= 0):
            raise at.error(el, "sensorsize requires positive resolution in camera", "resolution")
        ssf = f32(ss)  # MuJoCo keeps the sensor size, intrinsics and pixel density in float32
        intr = np.zeros(4, f32)
        if has_sensorsize:
            density = np.array([f32(res[0]) / ssf[0], f32(res[1]) / ssf[1]], f32)
            fpix, flen = f32(at.vec(el, "focalpixel", 2, (0, 0))), f32(at.vec(el, "focal", 2, (0, 0)))
            ppix, plen = f32(at.vec(el, "principalpixel", 2, (0, 0))), f32(at.vec(el, "principal", 2, (0, 0)))
            for k in range(2):  # pixel values override length values
                intr[k] = fpix[k] / density[k] if fpix[k] else flen[k]
                intr[2 + k] = ppix[k] / density[k] if ppix[k] else plen[k]
            fv = float(np.arctan2(ssf[1] / f32(2), intr[1])) * 360.0 / math.pi  # float atan2, as MuJoCo
        else:
            intr[:2] = f32(znear)
        fovy.append(fv)
        resolution.append(res)
        sensorsize.append(ssf)
        intrinsics.append(intr)
    A["cam_bodyid"] = np.array(bodyid, np.int32).reshape(n)
    A["cam_mode"] = np.array(mode, np.int32).reshape(n)
    A["cam_projection"] = np.array(projection, np.int32).reshape(n)
    A["cam_targetbodyid"] = np.array(target, np.int32).reshape(n)
    A["cam_pos"] = np.array(pos, float).reshape(n, 3)
    A["cam_quat"] = np.array(quat, float).reshape(n, 4)
    A["cam_fovy"] = np.array(fovy, float).reshape(n)
    A["cam_resolution"] = np.array(resolution, np.int32).reshape(n, 2)
    A["cam_sensorsize"] = np.array(sensorsize, float).reshape(n, 2)
    A["cam_intrinsic"] = np.array(intrinsics, float).reshape(n, 4)
    for k, s in (("cam_pos0", (3,)), ("cam_poscom0", (3,)), ("cam_mat0", (9,))):
        A[k] = np.zeros((n,) + s)


def _compile_lights(lights: list, ctx: CompileContext, A: dict) -> None:
    n = len(lights)
    bodyid, mode, target, ltype, pos, ldir, texid = [], [], [], [], [], [], []
    colour = {k: [] for k in ("ambient", "diffuse", "specular", "attenuation")}
    for bid, el, fr in lights:
        bodyid.append(bid)
        m, tid = _mode_target(el, ctx)
        mode.append(m)
        target.append(tid)
        t = at.keyword(el, "type", _LIGHT_TYPES, "spot")
        if bool(at.get(el, "directional", False)):
            t = 1
        ltype.append(t)
        p, d = at.vec(el, "pos", 3, (0, 0, 0)), at.vec(el, "dir", 3, (0, 0, -1))
        if fr is not None:  # fused into the parent body: position moved, direction rotated
            p = fuse.change_frame(p, (1.0, 0, 0, 0), fr[0], fr[1])[0]
            d = inr.quat_to_mat(np.asarray(fr[1], float)) @ d
        pos.append(p)
        d, nrm = inr.normalize(d)
        if nrm < EPS:
            raise at.error(el, "zero direction in light", "dir")
        ldir.append(d)
        texid.append(texture.texture_id(ctx, el))
        softness = float(at.get(el, "softness", 0.2))
        if softness < 0 or softness > 1:
            raise at.error(el, "light softness must be in [0, 1]", "softness")
        for k, v in colour.items():
            v.append(at.vec(el, k, 3, _LIGHT_DEFAULTS[k]))
    A["light_bodyid"] = np.array(bodyid, np.int32).reshape(n)
    A["light_mode"] = np.array(mode, np.int32).reshape(n)
    A["light_targetbodyid"] = np.array(target, np.int32).reshape(n)
    A["light_type"] = np.array(ltype, np.int32).reshape(n)
    A["light_pos"] = np.array(pos, float).reshape(n, 3)
    A["light_dir"] = np.array(ldir, float).reshape(n, 3)
    for k, v in colour.items():
        A["light_" + k] = np.array(v, float).reshape(n, 3)
    A["light_cutoff"] = np.array([float(at.get(el, "cutoff", 45.0)) for _, el, _ in lights], float).reshape(n)
    A["light_exponent"] = np.array([float(at.get(el, "exponent", 10.0)) for _, el, _ in lights], float).reshape(n)
    A["light_active"] = np.array([bool(at.get(el, "active", True)) for _, el, _ in lights], bool).reshape(n)
    A["light_castshadow"] = np.array([bool(at.get(el, "castshadow", True)) for _, el, _ in lights],
                                     bool).reshape(n)
    A["light_texid"] = np.array(texid, np.int32).reshape(n)
    for k, default in _LIGHT_SCALARS.items():
        A["light_" + k] = np.array([float(at.get(el, k, default)) for _, el, _ in lights], float).reshape(n)
    for k in ("light_pos0", "light_poscom0", "light_dir0"):
        A[k] = np.zeros((n, 3))


# ----------------------------------------------------------------------------------------------------------
# sections owned by other modules; empty arrays for the missing ones


def _compile_sections(root: Element, ctx: CompileContext) -> None:
    """Run the per-section passes (tendons, equality, actuators, sensors, contact pairs/excludes)."""
    for compile_section, _ in SECTIONS:
        compile_section(root, ctx)
    for k in SECTION_SIZES:
        ctx.sizes.setdefault(k, 0)
    for _, prefixes in SECTIONS:
        fill_missing(ctx, prefixes, {})


_POLICY = {"auto": 0, "never": 3, "allowed": 4, "init": 5}  # mjtSleepPolicy of the body attribute
AUTO, AUTO_NEVER, AUTO_ALLOWED, NEVER, ALLOWED, INIT = range(6)


def _wrap_tree(A: dict, j: int) -> int:
    """Tree of the object of tendon wrap j (a joint's, a site's or a geom's body; -1 for pulleys and static ones)."""
    t, obj = int(A["wrap_type"][j]), int(A["wrap_objid"][j])
    body = {WrapType.JOINT: "jnt_bodyid", WrapType.SITE: "site_bodyid", WrapType.SPHERE: "geom_bodyid",
            WrapType.CYLINDER: "geom_bodyid"}.get(t)  # fmt: skip
    return -1 if body is None else int(A["body_treeid"][A[body][obj]])


def _flex_has_elasticity(A: dict, f: int) -> bool:
    """Whether flex f has elastic passive forces: a nonzero entry in its flex_stiffness or flex_bending block (MuJoCo
    4.0 leaves the trees of such a flex "auto" (allowed), as those of a flex with edge equality; probed: young alone on
    a 2-D flex without elastic2d, damping alone or dim-1 edge stiffness alone make them never)."""
    for adr_key, key in (("flex_stiffnessadr", "flex_stiffness"), ("flex_bendingadr", "flex_bending")):
        adr, vals = np.asarray(A.get(adr_key, [])).reshape(-1), np.asarray(A.get(key, [])).reshape(-1)
        if f >= len(adr) or adr[f] < 0:
            continue
        later = adr[adr > adr[f]]
        end = int(later.min()) if len(later) else len(vals)
        if np.any(vals[int(adr[f]) : end] != 0):
            return True
    return False


def _sleep_policy(root: Element, ctx: CompileContext) -> np.ndarray:
    """tree_sleep_policy (mjtSleepPolicy) as MuJoCo's compiler sets it: the root body's sleep attribute; "auto"
    becomes never for a tree an actuator moves (through a joint, site, body or tendon), a tree on a tendon that spans
    more than two trees or two trees with stiffness, damping or an actuator, and a tree of a flex with neither edge
    equality nor elasticity (`_flex_has_elasticity`); allowed otherwise. A user's allowed/init on a tree such a
    tendon connects is an error (as MuJoCo's)."""
    A = ctx.arrays
    roots = [ctx.elements["body"][int(b)] for b in np.asarray(A["tree_bodyadr"])]
    policy = np.array([_POLICY[at.get(el, "sleep", "auto")] for el in roots], np.int32).reshape(-1)
    body_tree = np.asarray(A["body_treeid"])

    def never(t):
        if t >= 0 and policy[t] == AUTO:
            policy[t] = AUTO_NEVER

    tadr, tnum = np.asarray(A["tendon_adr"]).reshape(-1), np.asarray(A["tendon_num"]).reshape(-1)
    for ttype, tid in zip(np.asarray(A.get("actuator_trntype", [])), np.asarray(A.get("actuator_trnid", []))):
        tid = [int(x) for x in np.atleast_1d(tid)] + [-1]
        if ttype in (TrnType.JOINT, TrnType.JOINTINPARENT):
            never(body_tree[A["jnt_bodyid"][tid[0]]])
        elif ttype == TrnType.SO3:
            never(body_tree[A["site_bodyid"][tid[0]] if tid[1] >= 0 else A["jnt_bodyid"][tid[0]]])
        elif ttype in (TrnType.SITE, TrnType.SLIDERCRANK):
            never(body_tree[A["site_bodyid"][tid[0]]])
        elif ttype == TrnType.BODY:
            never(body_tree[tid[0]])
        elif ttype == TrnType.TENDON:
            for j in range(tadr[tid[0]], tadr[tid[0]] + tnum[tid[0]]):
                never(_wrap_tree(A, j))
    treenum = np.asarray(A["tendon_treenum"]).reshape(-1)
    for i in range(len(treenum)):
        if treenum[i] < 2:
            continue
        quiet = all(
            not np.any(np.asarray(A[k]).reshape(len(treenum), -1)[i])
            for k in ("tendon_stiffness", "tendon_stiffnesspoly", "tendon_damping", "tendon_dampingpoly")
        )
        if treenum[i] == 2 and quiet and int(np.asarray(A["tendon_actuatorid"]).reshape(-1)[i]) == -1:
            continue
        for t in {_wrap_tree(A, j) for j in range(tadr[i], tadr[i] + tnum[i])} - {-1}:
            if policy[t] in (ALLOWED, INIT):
                el = ctx.elements["body"][int(A["tree_bodyadr"][t])]
                raise at.error(el, f"tree {t} connected to tendon {i} which spans more than 2 trees or has stiffness, "
                               "damping or an actuator: sleeping not allowed", "sleep")  # fmt: skip
            never(t)
    for f in range(int(ctx.sizes.get("nflex", 0) or len(np.asarray(A.get("flex_dim", []))))):
        rigid = bool(np.asarray(A.get("flex_rigid", np.zeros(f + 1, bool))).reshape(-1)[f])  # rigid: never (probed)
        if not rigid and (int(np.asarray(A["flex_edgeequality"]).reshape(-1)[f]) or _flex_has_elasticity(A, f)):
            continue
        if int(np.asarray(A["flex_interp"]).reshape(-1)[f]):
            adr, num, ids = A["flex_nodeadr"], A["flex_nodenum"], A["flex_nodebodyid"]
        else:
            adr, num, ids = A["flex_vertadr"], A["flex_vertnum"], A["flex_vertbodyid"]
        a, n = int(np.asarray(adr).reshape(-1)[f]), int(np.asarray(num).reshape(-1)[f])
        for b in np.asarray(ids).reshape(-1)[a : a + n]:
            never(body_tree[int(b)])
    return np.where(policy == AUTO, AUTO_ALLOWED, policy).astype(np.int32)


def _check_sleep(root: Element, ctx: CompileContext) -> None:
    """tree_sleep_policy, and the sleep flag (sleeping islands, pipeline/sleep.py): where a tree may fall asleep,
    refused by name for what the sleep stage does not implement (flexes); with the flag, a tendon equality active
    at load is refused whatever the policies (MuJoCo 4.0 errs on it at the first forward pass)."""
    A = ctx.arrays
    A["tree_sleep_policy"] = _sleep_policy(root, ctx)
    if not ctx.option["enableflags"] & (1 << _ENABLE_BITS.index("sleep")):
        return
    policy = A["tree_sleep_policy"]
    f = [f for c in at.sections(root, "option") for f in c.find("flag") if f.attrs.get("sleep") is not None][-1]
    tendon_eq = (np.asarray(A.get("eq_type", [])) == EqType.TENDON) & np.asarray(A.get("eq_active0", []), bool)
    if np.any(tendon_eq):  # (whatever the policies: MuJoCo's mj_wakeEquality errs on every active one)
        raise at.unsupported(f, f"sleep='enable' (sleeping islands) with an active tendon equality constraint "
                                f"(equality {int(np.argmax(tendon_eq))}): MuJoCo 4.0 stops at the first forward pass "
                                f"('tendon equality does not yet support sleeping'); tendon equalities inactive at "
                                f"load are supported", "sleep")  # fmt: skip
    sleepy = np.isin(policy, (AUTO_ALLOWED, ALLOWED, INIT))
    if not np.any(sleepy):
        return
    t = int(np.argmax(sleepy))
    where = f"the tree of body {int(A['tree_bodyadr'][t])} may fall asleep"

    def refuse(what: str):
        raise at.unsupported(f, f"sleep='enable' (sleeping islands) is not supported with {what} ({where})", "sleep")

    if len(np.asarray(A.get("flex_dim", []))):
        refuse("flexes")


def _ccd_pair(t1: int, t2: int) -> bool:
    """Whether MuJoCo 4.0 collides geom types t1, t2 by GJK/EPA, bounded by opt.ccd_iterations (mjc_Convex,
    mjc_ConvexHField in its mjCOLLISIONFUNC table); the other pairs have closed-form colliders (mjc_PlaneConvex reads
    one support point)."""
    G = GeomType
    a, b = sorted((int(t1), int(t2)))
    if a == G.PLANE:
        return False
    if a == G.HFIELD:
        return b != G.HFIELD
    if b == G.SDF:  # MuJoCo's SDF collider (gradient descent), not GJK/EPA
        return False
    if a == G.SPHERE:
        return b in (G.ELLIPSOID, G.MESH)
    if a == G.CAPSULE:
        return b in (G.ELLIPSOID, G.CYLINDER, G.MESH)
    if a == G.BOX:
        return b == G.MESH
    return True  # ellipsoid, cylinder, mesh against ellipsoid, cylinder, box, mesh


def _colliding_pair(ctx: CompileContext, pred) -> str | None:
    """The first geom pair of the compiled model whose types satisfy pred(t1, t2) and that may collide (an explicit
    <pair>, or geoms whose collision bits match on two bodies not both welded to the world, whatever their distance
    and parents), in words; None when there is none."""
    A = ctx.arrays
    gtype = np.asarray(A.get("geom_type", np.zeros(0, np.int32)))
    contype = np.asarray(A.get("geom_contype", np.zeros(len(gtype), np.int64)))
    conaff = np.asarray(A.get("geom_conaffinity", np.zeros(len(gtype), np.int64)))
    gbody = np.asarray(A.get("geom_bodyid", np.zeros(len(gtype), np.int32)))
    weld = np.asarray(A.get("body_weldid", np.zeros(len(gtype), np.int32)))[gbody]  # 0: static
    for g1, g2 in zip(np.asarray(A.get("pair_geom1", [])), np.asarray(A.get("pair_geom2", []))):  # explicit pairs
        if pred(gtype[g1], gtype[g2]):
            return f"the <pair> of geoms {int(g1)} and {int(g2)}"
    ids = np.nonzero((contype != 0) | (conaff != 0))[0]
    for i in ids:
        others = ids[ids > i]
        ok = ((contype[i] & conaff[others]) | (contype[others] & conaff[i])) != 0
        ok &= (gbody[others] != gbody[i]) & ((weld[others] != 0) | (weld[i] != 0))  # MuJoCo never collides these
        for j in others[ok]:
            if pred(gtype[i], gtype[j]):
                return f"geoms {int(i)} and {int(j)} ({GeomType(int(gtype[i])).name.lower()}-" \
                       f"{GeomType(int(gtype[j])).name.lower()}) may collide"  # fmt: skip
    return None


def _ccd_user(ctx: CompileContext, mpr: bool = False) -> str | None:
    """What in the compiled model would make MuJoCo run GJK/EPA (conservatively: geom pairs by type and collision
    bits, `_colliding_pair`; every flex, geom distance and enclosed insidesite sensor), in words; None when nothing
    would (then opt.ccd_iterations has no effect in MuJoCo). mpr=True (nativeccd disabled): the convex pairs,
    flexes and geom distances go to libccd's MPR instead, which mjx_lite runs with the same ccd_iterations
    (collision/mpr.py); only the enclosed insidesite sensors still run GJK."""
    A = ctx.arrays
    why = None if mpr else _colliding_pair(ctx, _ccd_pair)
    if why is not None:
        return why
    if not mpr and ctx.sizes.get("nflex", 0):
        return "the model has flexes"
    stype = np.asarray(A.get("sensor_type", np.zeros(0, np.int32)))
    intprm = np.asarray(A.get("sensor_intprm", np.zeros((len(stype), 3), np.int32)))
    if not mpr and np.isin(stype, (SensorType.GEOMDIST, SensorType.GEOMNORMAL, SensorType.GEOMFROMTO)).any():
        return "geom distance sensors"
    if ((stype == SensorType.INSIDESITE) & (intprm[:, 0] != 0)).any():
        return "enclosed insidesite sensors"
    return None


def _nativeccd_disabled(ctx: CompileContext) -> bool:
    return bool(ctx.option["disableflags"] & (1 << _DISABLE_BITS.index("nativeccd")))


def _mpr_polytopes(t1: int, t2: int) -> bool:
    a, b = sorted((int(t1), int(t2)))
    return b == GeomType.MESH and a in (GeomType.BOX, GeomType.MESH)


def _mpr_hfield(t1: int, t2: int) -> bool:
    a, b = sorted((int(t1), int(t2)))
    return a == GeomType.HFIELD and b not in (GeomType.PLANE, GeomType.HFIELD, GeomType.SDF)


def _check_nativeccd(root: Element, ctx: CompileContext) -> None:
    """nativeccd disabled: MuJoCo runs libccd's MPR (collision/mpr.py) on its convex pairs. Refused where mjx_lite
    does not reproduce MuJoCo's MPR contacts: box-mesh and mesh-mesh pairs (two polytopes: MPR's search directions
    meet face normals, where the support points tie and MuJoCo's choice among them is decided by round-off, measured
    to change 3-4 of 40 random overlaps by up to 0.4 in the normal), height fields (MPR per prism: not
    implemented), flexes and geom distance sensors (MPR with the distance as margin: not implemented)."""
    if not _nativeccd_disabled(ctx):
        return
    flags = [f for c in at.sections(root, "option") for f in c.find("flag") if f.attrs.get("nativeccd") is not None]
    f = flags[-1] if flags else at.sections(root, "option")[-1]

    def refuse(what: str, why: str):
        raise at.unsupported(f, f"nativeccd='disable' (libccd's MPR collision) is not supported for {what}: {why}",
                             "nativeccd")  # fmt: skip

    why = _colliding_pair(ctx, _mpr_polytopes)
    if why is not None:
        refuse(f"box-mesh and mesh-mesh pairs ({why})", "between two polytopes MPR's support points tie and MuJoCo "
               "breaks the ties by round-off, so its contacts cannot be reproduced")  # fmt: skip
    why = _colliding_pair(ctx, _mpr_hfield)
    if why is not None:
        refuse(f"height fields ({why})", "MPR against the field's prisms is not implemented")
    if ctx.sizes.get("nflex", 0):
        refuse("flexes", "MPR of flex elements is not implemented")
    stype = np.asarray(ctx.arrays.get("sensor_type", np.zeros(0, np.int32)))
    if np.isin(stype, (SensorType.GEOMDIST, SensorType.GEOMNORMAL, SensorType.GEOMFROMTO)).any():
        refuse("geom distance sensors", "MuJoCo then measures distances by MPR, which is not implemented for them")


def _check_ccd_iterations(root: Element, ctx: CompileContext) -> None:
    """ccd_iterations below MuJoCo's default: refused where MuJoCo would run GJK/EPA (`_ccd_user`), whose contacts
    then stop far from the converged ones that mjx_lite's colliders give; accepted where it has no effect."""
    if ctx.option["ccd_iterations"] >= _CCD_ITERATIONS:
        return
    why = _ccd_user(ctx, mpr=_nativeccd_disabled(ctx))
    if why is None:
        return
    c = [c for c in at.sections(root, "option") if c.attrs.get("ccd_iterations") is not None][-1]
    raise at.unsupported(c, f"ccd_iterations below MuJoCo's default of {_CCD_ITERATIONS} is not supported where "
                         f"MuJoCo runs GJK/EPA ({why}): its contacts then stop far from convergence (curved pairs "
                         "at 10: normal components up to 1.3 apart) and mjx_lite's colliders give the converged "
                         "contact", "ccd_iterations")  # fmt: skip


_NUSER = {"body": "body", "joint": "jnt", "geom": "geom", "site": "site", "camera": "cam", "tendon": "tendon",
          "actuator": "actuator", "sensor": "sensor"}  # fmt: skip


def _check_user_sizes(root: Element, ctx: CompileContext) -> None:
    """<size nuser_X="n"> (n >= 0) bounds the user data of every object of that type (MuJoCo: "user has more
    values than nuser_X")."""
    size = {k: v for s in at.sections(root, "size") for k, v in s.attrs.items() if k.startswith("nuser_")}
    for objtype, short in _NUSER.items():
        n = size.get("nuser_" + short)
        if n is None or n < 0:
            continue
        for el in ctx.elements.get(objtype, []):
            if el is None:
                continue
            user = el.attrs.get("user")
            for d in reversed(el.defaults):  # actuators: the innermost class's user data, unless written
                user = d.attrs.get("user") if user is None else user
            if user is not None and np.size(user) > n:
                raise at.error(el, f"user has more values than nuser_{short} in {objtype}", "user")


def _finalize_simple(ctx: CompileContext) -> None:
    """Demote bodies touched by tendons with armature; dof_simplenum (FinalizeSimple)."""
    A = ctx.arrays
    simple = A["body_simple"]
    tarm = np.asarray(A.get("tendon_armature", np.zeros(0)), float)
    for i in range(len(tarm)):
        if tarm[i] == 0:
            continue
        adr, num = int(A["tendon_adr"][i]), int(A["tendon_num"][i])
        for j in range(adr, adr + num):
            t, obj = int(A["wrap_type"][j]), int(A["wrap_objid"][j])
            if t == 1:  # joint (fixed tendon)
                simple[A["jnt_bodyid"][obj]] = 0
            elif t == 3:
                simple[A["site_bodyid"][obj]] = 0
            elif t in (4, 5):
                simple[A["geom_bodyid"][obj]] = 0
    nv = ctx.sizes["nv"]
    sn = np.zeros(nv, np.int32)
    count = 0
    for i in range(nv - 1, -1, -1):
        count = count + 1 if simple[A["dof_bodyid"][i]] else 0
        sn[i] = count
    A["dof_simplenum"] = sn


# ----------------------------------------------------------------------------------------------------------
# keyframes


_QPOS_WIDTH = {"free": (7, 6), "ball": (4, 3)}


def _key_values(k: Element, name: str, default: np.ndarray, ctx: CompileContext) -> np.ndarray:
    """One array of a keyframe written in another model than the compiled one (<attach>, `Element.keysource`): the
    values of the joints, actuators and mocap bodies of that model that are in this one go to their places; the
    rest is `default`. A short array is completed from the default (whole blocks for mocap poses), a long one is
    an error, as for any keyframe."""
    A = ctx.arrays
    out = np.array(default, float).copy()
    v = k.attrs.get(name)
    if v is None:
        return out
    v = np.atleast_1d(np.asarray(v, float))
    if name in ("qpos", "qvel"):
        els = k.keysource["joints"]
        ids = {id(e): i for i, e in enumerate(ctx.elements["joint"])}
        col = 0 if name == "qpos" else 1

        def width(e, i):
            t = "free" if e.tag == "freejoint" else str(e.attrs.get("type") or "hinge")
            return _QPOS_WIDTH.get(t, (1, 1))[col]

        def adr(i):
            return int(A["jnt_qposadr" if name == "qpos" else "jnt_dofadr"][i])
    elif name in ("act", "ctrl"):
        els = k.keysource["actuators"]
        ids = {id(e): i for i, e in enumerate(ctx.elements["actuator"])}

        def width(e, i):
            if name == "ctrl":
                return 1
            return int(A["actuator_actnum"][i]) if i is not None else actuation.actnum(e)

        def adr(i):
            return i if name == "ctrl" else int(A["actuator_actadr"][i])
    else:
        els = k.keysource["mocap"]
        ids = {id(e): i for i, e in enumerate(ctx.elements["body"])}
        n = 3 if name == "mpos" else 4

        def width(e, i):
            return n

        def adr(i):
            return n * int(A["body_mocapid"][i])

    widths = [width(e, ids.get(id(e))) for e in els]
    if v.size > sum(widths):
        raise at.error(k, f"keyframe has invalid {name} size, got {v.size}, expected at most {sum(widths)}", name)
    block = {"mpos": 3, "mquat": 4}.get(name, 1)
    m = v.size - v.size % block
    pos = 0
    for e, w in zip(els, widths):
        if pos >= m:
            break
        n = min(w, m - pos)
        i = ids.get(id(e))
        if i is not None:
            a = adr(i)
            out[a : a + n] = v[pos : pos + n]
        pos += w
    return out


def _compile_keys(root: Element, ctx: CompileContext) -> None:
    A, S = ctx.arrays, ctx.sizes
    nq, nv, na, nu, nmocap = S["nq"], S["nv"], S["na"], S["nu"], S["nmocap"]
    keys = [k for s in at.sections(root, "keyframe") for k in s.children if k.tag == "key"]
    nkey_size = max([int(at.get(s, "nkey", 0)) for s in at.sections(root, "size")] + [0])
    mocap_bodies = np.argsort(np.where(A["body_mocapid"] >= 0, A["body_mocapid"], 1 << 30))[:nmocap]
    mpos0 = A["body_pos"][mocap_bodies].reshape(-1)
    mquat0 = A["body_quat"][mocap_bodies].reshape(-1)
    rows = {k: [] for k in ("time", "qpos", "qvel", "act", "ctrl", "mpos", "mquat")}
    ctx.ids["key"] = {}
    ctx.elements["key"] = []
    for i, k in enumerate(keys):
        at.register(ctx, "key", k, i)

        def take(name, n, default, k=k, block=1):
            """MuJoCo 4: a short array is completed from the default (whole blocks of `block` values: a partial
            mocap position/quaternion is dropped); a long one is an error."""
            out = np.array(default, float).copy()
            v = k.attrs.get(name)
            if v is None:
                return out
            v = np.atleast_1d(np.asarray(v, float))
            if v.size > n:
                raise at.error(k, f"keyframe has invalid {name} size, got {v.size}, expected at most {n}", name)
            m = v.size - v.size % block
            out[:m] = v[:m]
            return out

        if k.keysource is not None:  # a keyframe of a composed model: laid out over the model it was written in
            rows["time"].append(float(at.get(k, "time", 0.0)))
            for name, default in (("qpos", A["qpos0"]), ("qvel", np.zeros(nv)), ("act", np.zeros(na)),
                                  ("ctrl", np.zeros(nu)), ("mpos", mpos0), ("mquat", mquat0)):  # fmt: skip
                rows[name].append(_key_values(k, name, default, ctx))
            continue
        rows["time"].append(float(at.get(k, "time", 0.0)))
        rows["qpos"].append(take("qpos", nq, A["qpos0"]))
        rows["qvel"].append(take("qvel", nv, np.zeros(nv)))
        rows["act"].append(take("act", na, np.zeros(na)))
        rows["ctrl"].append(take("ctrl", nu, np.zeros(nu)))
        rows["mpos"].append(take("mpos", 3 * nmocap, mpos0, block=3))
        rows["mquat"].append(take("mquat", 4 * nmocap, mquat0, block=4))
    for _ in range(len(keys), nkey_size):
        for name, v in (("time", 0.0), ("qpos", A["qpos0"]), ("qvel", np.zeros(nv)), ("act", np.zeros(na)),
                        ("ctrl", np.zeros(nu)), ("mpos", mpos0), ("mquat", mquat0)):  # fmt: skip
            rows[name].append(np.array(v, float).copy() if name != "time" else v)
        ctx.elements["key"].append(None)  # type: ignore[arg-type]
    nkey = len(rows["time"])
    for row in rows["qpos"]:
        for j in range(S["njnt"]):
            t = A["jnt_type"][j]
            if t in (0, 1):
                a = A["jnt_qposadr"][j] + (3 if t == 0 else 0)
                n = np.linalg.norm(row[a : a + 4])
                row[a : a + 4] = row[a : a + 4] / n if n > MINVAL else (1, 0, 0, 0)
    for row in rows["mquat"]:  # mjuu_normvec: a quaternion of squared norm below mjEPS is left as written
        for j in range(nmocap):
            row[4 * j : 4 * j + 4] = inr.normalize(row[4 * j : 4 * j + 4])[0]
    A["key_time"] = np.array(rows["time"], float).reshape(nkey)
    for name, n in (("qpos", nq), ("qvel", nv), ("act", na), ("ctrl", nu), ("mpos", 3 * nmocap),
                    ("mquat", 4 * nmocap)):  # fmt: skip
        A["key_" + name] = np.array(rows[name], float).reshape(nkey, n)
    S["nkey"] = nkey


# ----------------------------------------------------------------------------------------------------------
# driver


def compile_model(root: Element, *, model_dir: str | None = None, assets: dict | None = None,
                  config: Config | None = None, source: types.ModelSource | None = None) -> types.Model:
    """Compile a parsed MJCF tree (root <mujoco> Element) into a `Model`.

    model_dir: directory of the main model file (mesh/hfield/texture paths are relative to it)
    assets:    optional {file name: bytes} used instead of the file system for asset files
    config:    the model's trace-time configuration (`mjx_lite.Config`; default Config())
    source:    what the tree was parsed from (`Model.source`, for interop.mujoco_model); load_mjcf sets it
    """
    with np.errstate(all="ignore"):  # NaN/inf propagate as in MuJoCo's C arithmetic (nan/inf values are legal)
        return _compile_model(root, model_dir, assets, config, source)


def _compile_model(root: Element, model_dir: str | None, assets: dict | None, config: Config | None,
                   source: types.ModelSource | None) -> types.Model:  # fmt: skip
    float32 = not jax.config.jax_enable_x64  # the Model's float dtype (io.build_model)
    if float32:
        _check_float32_values(root)
    ctx = CompileContext(compiler=compiler_settings(root), option=option_settings(root), file=root.file,
                         model_dir=model_dir, assets=dict(assets or {}))  # fmt: skip
    _compile_assets(root, ctx)
    _compile_tree(root, ctx)
    flex.compile_flex(root, ctx)
    _compile_sections(root, ctx)
    _compile_plugins(root, ctx)
    _check_nativeccd(root, ctx)
    _check_ccd_iterations(root, ctx)
    _check_sleep(root, ctx)
    _check_user_sizes(root, ctx)
    _finalize_simple(ctx)
    _compile_keys(root, ctx)
    if ctx.compiler["settotalmass"] > 0:
        set_total_mass(ctx, float(ctx.compiler["settotalmass"]))
    stat = derived.set_const(ctx)
    plastic.compile_plastic(ctx)  # after set_const: tendon_lengthspring resolved
    stat.update(statistic_overrides(root))
    fill_missing(ctx, tuple(f.name for f in dataclasses.fields(types.Model)), {})  # anything still missing
    sizes = {k: int(ctx.sizes.get(k, 0)) for k in types.SIZE_FIELDS}
    for name in ("nconmax", "njmax"):  # <size nconmax njmax>: caps on the padded capacities (-1: not given)
        given = [int(v) for sec in at.sections(root, "size") if (v := sec.attrs.get(name)) is not None]
        sizes[name] = given[-1] if given else -1
    if float32:
        _check_float32_arrays(ctx, stat)
    return io.build_model(ctx.arrays, sizes, ctx.option, stat, names(ctx), config=config,
                          vis=visual.visual_settings(root), source=source)  # fmt: skip


# A float32 Model (jax_enable_x64 off) cannot hold a finite value beyond float32's range: MuJoCo compiles in
# float64 and would keep it, a float32 Model would silently hold inf. Refused at load instead (docs/mjcf.md).
_F32_MAX = float(np.finfo(np.float32).max)


def _overflows_f32(v) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return np.isfinite(a) & (np.abs(a) > _F32_MAX) & np.isinf(a.astype(np.float32))


def _check_float32_values(root: Element) -> None:
    """Every real attribute value must fit the float32 Model (MJCFError naming file, line, element, attribute)."""
    stack = [root]
    while stack:
        el = stack.pop()
        stack.extend(el.children)
        stack.extend(el.defaults)
        for name, v in el.attrs.items():
            if isinstance(v, (bool, str)) or v is None:
                continue
            if isinstance(v, (float, np.ndarray)) and np.any(_overflows_f32(v)):
                bad = np.asarray(v, dtype=np.float64).reshape(-1)[np.argmax(_overflows_f32(v).reshape(-1))]
                raise at.error(el, f"value {bad:g} does not fit the Model's float32 (|x| <= {_F32_MAX:.4g}); "
                                   "enable float64 (jax_enable_x64) to load it", name)  # fmt: skip


def _check_float32_arrays(ctx: CompileContext, stat: dict) -> None:
    """Compiled values (e.g. a mass from a huge density) must fit the float32 Model too."""
    items = list(ctx.arrays.items()) + [("stat." + k, v) for k, v in stat.items()]
    items += [("opt." + k, v) for k, v in ctx.option.items() if not isinstance(v, (int, np.integer))]
    for name, v in items:
        if name in ("geom_sdf", "sensor_plugincfg"):  # (plugin name, values) per geom / sensor: host-side
            continue
        a = np.asarray(v)
        if a.dtype.kind != "f" or not a.size:
            continue
        bad = _overflows_f32(a)
        if np.any(bad):
            i = np.unravel_index(int(np.argmax(bad)), a.shape) if a.ndim else ()
            raise MJCFError(f"compiled field {name}{list(i) if i else ''} = {float(a[i]):g} does not fit the Model's "
                            "float32; enable float64 (jax_enable_x64) to load this model", ctx.file)  # fmt: skip


def set_total_mass(ctx: CompileContext, total: float) -> None:
    """Scale body masses and inertias so that the moving mass totals `total` (mj_setTotalmass)."""
    mass = ctx.arrays["body_mass"]
    scale = max(MINVAL, total / max(MINVAL, float(mass[1:].sum())))  # mj_setTotalmass: avoids zeros
    ctx.arrays["body_mass"] = mass * scale
    ctx.arrays["body_inertia"] = ctx.arrays["body_inertia"] * scale


# ----------------------------------------------------------------------------------------------------------
# public entry points


def load_mjcf(path: str | os.PathLike, assets: dict | None = None, config: Config | None = None) -> types.Model:
    """Load and compile an MJCF (or URDF) file. Asset files are resolved relative to the file's directory.

    `path` may also name a bundled model (`mjx_lite.models.names()`, e.g. "cartpole") when no such file exists.
    `config`: the model's trace-time configuration (`mjx_lite.Config`).
    """
    path = models.resolve(path)
    with np.errstate(all="ignore"):  # NaN/inf values are legal MJCF (MuJoCo's C arithmetic propagates them)
        root = parse_file(path, assets)
    full = os.path.abspath(os.fspath(path))
    with open(full, "rb") as f:  # (parse_file has read it: it exists)
        source = types.ModelSource(f.read(), path=full, model_dir=os.path.dirname(full), assets=assets)
    return compile_model(root, model_dir=os.path.dirname(full), assets=assets, config=config, source=source)


def load_model(path: str | os.PathLike, assets: dict | None = None, config: Config | None = None) -> types.Model:
    """Load and compile a model file, MJCF or URDF (`load_mjcf` reads both: a root <robot> element is URDF)."""
    return load_mjcf(path, assets, config)


def load_mjcf_string(xml: str | bytes, assets: dict | None = None, model_dir: str | None = None,
                     config: Config | None = None) -> types.Model:
    """Compile MJCF (or URDF) text; `assets` maps file names (meshes, includes, ...) to bytes."""

    with np.errstate(all="ignore"):
        root = parse_string(xml, assets, model_dir)
    source = types.ModelSource(xml, model_dir=None if model_dir is None else os.path.abspath(model_dir),
                               assets=assets)  # fmt: skip
    return compile_model(root, model_dir=model_dir, assets=assets, config=config, source=source)
