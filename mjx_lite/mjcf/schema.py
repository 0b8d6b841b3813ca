"""MJCF schema: for every supported element, attribute -> `Attr` (kind, count, MuJoCo's built-in default).

Attribute names are those MuJoCo 4.0's XML parser accepts (`mujoco.mj_printSchema`); defaults are MuJoCo's
built-in ones (the XML reference / `mjs_default*`).

Keys of `SCHEMA`: the element tag, or "parent/tag" where the same tag means different things in different
places (looked up first):  "equality/joint", "equality/tendon", "spatial/site", "spatial/geom",
"spatial/pulley", "fixed/joint", "sensor/contact", "sensor/fromto", "sensor/distance", "sensor/normal",
"tuple/element", "material/layer", "compiler/lengthrange", "option/flag".  `lookup(parent, tag)` does the
lookup.  `mjx_lite/mjcf/schema_actuation.py` may define its own `SCHEMA` (same format); it is merged over this
one at import (its entries win).

Typed values (what `parse.py` puts in `Element.attrs`):
  real/int:   count 1 -> float/int; count n or (lo, hi) or -1 -> np.ndarray (float64 / int64)
              (lo, hi) is MuJoCo's "non-exact" reading: fewer values than hi are accepted and the missing
              trailing values keep the inherited ones (class default, then built-in), so the array has length
              hi whenever the default has length hi (e.g. geom friction="0.5" -> [0.5, 0.005, 0.0001]).
              Exception: actuator elements (in <actuator> and in <default>) keep exactly the values written
              (no padding), since their defaults are resolved later by `actuation.py` (see spec.Element).
              MuJoCo quirk kept: a single springlength value is duplicated ("0.5" -> [0.5, 0.5]).
  string:     str;  keyword: str (one of `keywords`);  bool: Python bool;
  auto_bool:  'false' | 'true' | 'auto' (str).
Attributes whose default is None are unset unless written (check `Element.explicit`).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf import plugins, schema_actuation
from mjx_lite.mjcf.spec import Attr


def _arr(v, dtype=float):
    if v is None:
        return None
    a = np.array(v, dtype=dtype)
    a.flags.writeable = False
    return a


def R(default=None, n=1):
    """A real attribute; n: 1, exact count, (lo, hi) or -1."""
    if n != 1 and default is not None:
        default = _arr(default)
    elif default is not None:
        default = float(default)
    return Attr("real", n, default)


def I(default=None, n=1):  # noqa: E743
    """An integer attribute."""
    if n != 1 and default is not None:
        default = _arr(default, np.int64)
    elif default is not None:
        default = int(default)
    return Attr("int", n, default)


def S(default=None):
    return Attr("string", 1, default)


def K(default, *keywords):
    return Attr("keyword", 1, default, tuple(keywords))


def B(default):
    return Attr("bool", 1, default)


def AB(default="auto"):
    return Attr("auto_bool", 1, default)


# ---------------------------------------------------------------------------------------------------------
# shared pieces

SOLREF = (0.02, 1.0)
SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
ZERO3 = (0.0, 0.0, 0.0)
ORIENT = {
    "quat": R((1, 0, 0, 0), 4),
    "axisangle": R(None, 4),
    "xyaxes": R(None, 6),
    "zaxis": R(None, 3),
    "euler": R(None, 3),
}
INTERP = K("zoh", "zoh", "linear", "cubic")
ORIENT_ATTRS = ("quat", "axisangle", "xyaxes", "zaxis", "euler")
GEOM_TYPES = ("plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf")

_MJCF_TOP = {"model": S("MuJoCo Model")}

_COMPILER = {
    "alignfree": B(False),
    "angle": K("degree", "degree", "radian"),
    "assetdir": S(),
    "autolimits": B(True),
    "balanceinertia": B(False),
    "boundinertia": R(0),
    "boundmass": R(0),
    "conflict": K("warning", "warning", "merge", "error"),
    "coordinate": K("local", "local"),  # MuJoCo 4.0 rejects "global"
    "discardvisual": B(False),
    "eulerseq": S("xyz"),
    "fitaabb": B(False),
    "fusestatic": B(False),
    "inertiafromgeom": AB("auto"),
    "inertiagrouprange": I((0, 5), 2),
    "meshdir": S(),
    "passthrough": K("none", "none", "textures"),
    "savecanonical": B(True),
    "savecompiled": B(True),
    "saveinertial": B(False),
    "settotalmass": R(-1),
    "strippath": B(False),
    "texturedir": S(),
    "usethread": B(True),
}

_LENGTHRANGE = {
    "accel": R(20),
    "interval": R(2),
    "inttotal": R(10),
    "maxforce": R(0),
    "mode": K("muscle", "none", "muscle", "muscleuser", "all"),
    "timeconst": R(1),
    "timestep": R(0.01),
    "tolrange": R(0.05),
    "useexisting": B(True),
    "uselimit": B(False),
}

_OPTION = {
    "actuatorgroupdisable": I(None, -1),
    "ccd_iterations": I(35),
    "ccd_tolerance": R(1e-6),
    "cone": K("pyramidal", "pyramidal", "elliptic"),
    "density": R(0),
    "gravity": R((0, 0, -9.81), 3),
    "impratio": R(1),
    "integrator": K("Euler", "Euler", "RK4", "implicit", "implicitfast", "discrete"),
    "iterations": I(100),
    "jacobian": K("auto", "dense", "sparse", "auto"),
    "ls_iterations": I(50),
    "ls_tolerance": R(0.01),
    "magnetic": R((0, -0.5, 0), 3),
    "noslip_iterations": I(0),
    "noslip_tolerance": R(1e-6),
    "o_friction": R((1, 1, 0.005, 0.0001, 0.0001), (1, 5)),
    "o_margin": R(0),
    "o_solimp": R(SOLIMP, (1, 5)),
    "o_solref": R(SOLREF, (1, 2)),
    "sdf_initpoints": I(40),
    "sdf_iterations": I(10),
    "sleep_tolerance": R(1e-3),
    "solver": K("Newton", "PGS", "CG", "Newton"),
    "timestep": R(0.002),
    "tolerance": R(1e-8),
    "viscosity": R(0),
    "wind": R(ZERO3, 3),
}

# flags that are on by default (disable bits) and off by default (enable bits)
FLAGS_ENABLED = (
    "constraint", "equality", "frictionloss", "limit", "contact", "spring", "damper", "gravity", "clampctrl",
    "warmstart", "filterparent", "actuation", "refsafe", "sensor", "midphase", "eulerdamp", "autoreset",
    "nativeccd", "island", "multiccd",
)  # fmt: skip
FLAGS_DISABLED = ("override", "energy", "fwdinv", "invdiscrete", "sleep", "diagexact", "ipc", "speculative")
_FLAG = {f: K("enable", "enable", "disable") for f in FLAGS_ENABLED}
_FLAG.update({f: K("disable", "enable", "disable") for f in FLAGS_DISABLED})

_SIZE = {
    "memory": S("-1"),
    "nconmax": I(-1),
    "njmax": I(-1),
    "nkey": I(0),
    "nstack": I(-1),
    "nuserdata": I(0),
    **{f"nuser_{k}": I(-1) for k in ("actuator", "body", "cam", "geom", "jnt", "sensor", "site", "tendon")},
}

_STATISTIC = {
    "center": R(None, 3),
    "extent": R(None),
    "meaninertia": R(None),
    "meanmass": R(None),
    "meansize": R(None),
}

# ---------------------------------------------------------------------------------------------------------
# kinematic tree

_BODY = {
    "name": S(),
    "childclass": S(),
    "pos": R(ZERO3, 3),
    **ORIENT,
    "mocap": B(False),
    "gravcomp": R(0),
    "user": R(None, -1),
    "fuse": K("auto", "false", "auto"),
    "simple": K("auto", "false", "auto"),
    "sleep": K("auto", "auto", "never", "allowed", "init"),
}

_FRAME = {"name": S(), "childclass": S(), "pos": R(ZERO3, 3), **ORIENT}

_INERTIAL = {
    "pos": R(None, 3),
    **ORIENT,
    "mass": R(None),
    "diaginertia": R(None, 3),
    "fullinertia": R(None, 6),
}

_JOINT = {
    "name": S(),
    "class": S(),
    "type": K("hinge", "free", "ball", "slide", "hinge"),
    "group": I(0),
    "pos": R(ZERO3, 3),
    "axis": R((0, 0, 1), 3),
    "springdamper": R((0, 0), 2),
    "limited": AB(),
    "actuatorfrclimited": AB(),
    "solreflimit": R(SOLREF, (1, 2)),
    "solimplimit": R(SOLIMP, (1, 5)),
    "solreffriction": R(SOLREF, (1, 2)),
    "solimpfriction": R(SOLIMP, (1, 5)),
    "stiffness": R(ZERO3, (1, 3)),
    "range": R((0, 0), 2),
    "actuatorfrcrange": R((0, 0), 2),
    "actuatorgravcomp": B(False),
    "margin": R(0),
    "ref": R(0),
    "springref": R(0),
    "armature": R(0),
    "damping": R(ZERO3, (1, 3)),
    "frictionloss": R(0),
    "user": R(None, -1),
    "springyield": R(0),
}

_FREEJOINT = {"name": S(), "group": I(0), "align": AB("auto")}

_GEOM = {
    "name": S(),
    "class": S(),
    "type": K("sphere", *GEOM_TYPES),
    "contype": I(1),
    "conaffinity": I(1),
    "condim": I(3),
    "group": I(0),
    "priority": I(0),
    "size": R(ZERO3, (1, 3)),
    "material": S(),
    "rgba": R((0.5, 0.5, 0.5, 1), 4),
    "friction": R((1, 0.005, 0.0001), (1, 3)),
    "mass": R(None),
    "density": R(1000),
    "shellinertia": B(False),
    "solmix": R(1),
    "solref": R(SOLREF, (1, 2)),
    "solimp": R(SOLIMP, (1, 5)),
    "margin": R(0),
    "gap": R(0),
    "fromto": R(None, 6),
    "pos": R(ZERO3, 3),
    **ORIENT,
    "hfield": S(),
    "mesh": S(),
    "fitscale": R(1),
    "user": R(None, -1),
    "fluidshape": K("none", "none", "ellipsoid"),
    "fluidcoef": R((0.5, 0.25, 1.5, 1.0, 1.0), (1, 5)),
    "adhesion": R(0),
    "castshadow": B(True),
    "surfacevel": R((0,) * 6, (1, 6)),
}

_SITE = {
    "name": S(),
    "class": S(),
    "type": K("sphere", *GEOM_TYPES),
    "group": I(0),
    "material": S(),
    "rgba": R((0.5, 0.5, 0.5, 1), 4),
    "size": R((0.005, 0.005, 0.005), (1, 3)),
    "fromto": R(None, 6),
    "pos": R(ZERO3, 3),
    **ORIENT,
    "mesh": S(),
    "user": R(None, -1),
}

CAM_MODES = ("fixed", "track", "trackcom", "targetbody", "targetbodycom")
_CAMERA = {
    "name": S(),
    "class": S(),
    "mode": K("fixed", *CAM_MODES),
    "target": S(),
    "projection": K("perspective", "perspective", "orthographic"),
    "fovy": R(45),
    "ipd": R(0.068),
    "resolution": I((1, 1), 2),
    "output": S("rgb"),  # words of WORDS["output"]
    "focal": R((0, 0), 2),
    "focalpixel": R((0, 0), 2),
    "principal": R((0, 0), 2),
    "principalpixel": R((0, 0), 2),
    "sensorsize": R((0, 0), 2),
    "pos": R(ZERO3, 3),
    **ORIENT,
    "user": R(None, -1),
}

_LIGHT = {
    "name": S(),
    "class": S(),
    "mode": K("fixed", *CAM_MODES),
    "target": S(),
    "type": K("spot", "spot", "directional", "point", "image"),
    "directional": B(False),
    "castshadow": B(True),
    "active": B(True),
    "pos": R(ZERO3, 3),
    "dir": R((0, 0, -1), 3),
    "attenuation": R((1, 0, 0), 3),
    "cutoff": R(45),
    "exponent": R(10),
    "ambient": R(ZERO3, 3),
    "diffuse": R((0.7, 0.7, 0.7), 3),
    "specular": R((0.3, 0.3, 0.3), 3),
    "bulbradius": R(0.02),
    "intensity": R(0),
    "range": R(10),
    "softness": R(0.2),
    "texture": S(),
}

# ---------------------------------------------------------------------------------------------------------
# assets

_MESH = {
    "name": S(),
    "class": S(),
    "content_type": S(),
    "file": S(),
    "vertex": R(None, -1),
    "normal": R(None, -1),
    "texcoord": R(None, -1),
    "face": I(None, -1),
    "refpos": R(ZERO3, 3),
    "refquat": R((1, 0, 0, 0), 4),
    "scale": R((1, 1, 1), 3),
    "smoothnormal": B(False),
    "maxhullvert": I(-1),
    "inertia": K("legacy", "convex", "exact", "legacy", "shell"),
    "builtin": S(),
    "params": R(None, -1),
    "material": S(),
}

_HFIELD = {
    "name": S(),
    "content_type": S(),
    "file": S(),
    "nrow": I(0),
    "ncol": I(0),
    "size": R(None, 4),
    "elevation": R(None, -1),
}

_TEXTURE = {
    "name": S(),
    "class": S(),
    "type": K("cube", "2d", "cube", "skybox"),
    "builtin": K("none", "none", "gradient", "checker", "flat"),
    "colorspace": K("auto", "auto", "linear", "sRGB"),
    "content_type": S(),
    "file": S(),
    **{f"file{s}": S() for s in ("back", "down", "front", "left", "right", "up")},
    "gridsize": I((1, 1), 2),
    "gridlayout": S(),
    "embed": K("auto", "false", "true", "auto"),
    "hflip": B(False),
    "vflip": B(False),
    "mark": K("none", "none", "edge", "cross", "random"),
    "markrgb": R(ZERO3, 3),
    "nchannel": I(3),
    "random": R(0.01),
    "rgb1": R((0.8, 0.8, 0.8), 3),
    "rgb2": R((0.5, 0.5, 0.5), 3),
    "width": I(0),
    "height": I(0),
}

_MATERIAL = {
    "name": S(),
    "class": S(),
    "texture": S(),
    "texrepeat": R((1, 1), 2),
    "texuniform": B(False),
    "emission": R(0),
    "specular": R(0.5),
    "shininess": R(0.5),
    "reflectance": R(0),
    "metallic": R(-1),
    "roughness": R(-1),
    "rgba": R((1, 1, 1, 1), 4),
}

_LAYER = {"role": S(), "texture": S()}

# skins (<asset> or <deformable>): visual only, compiled by mjcf/skin.py
_SKIN = {
    "name": S(),
    "file": S(),
    "material": S(),
    "rgba": R((0.5, 0.5, 0.5, 1), 4),
    "inflate": R(0),
    "group": I(0),
    "vertex": R(None, -1),
    "texcoord": R(None, -1),
    "face": I(None, -1),
}
_BONE = {"body": S(), "bindpos": R(None, 3), "bindquat": R(None, 4), "vertid": I(None, -1), "vertweight": R(None, -1)}

# ---------------------------------------------------------------------------------------------------------
# contact, equality, tendon

_PAIR = {
    "name": S(),
    "class": S(),
    "geom1": S(),
    "geom2": S(),
    "condim": I(3),
    "friction": R((1, 1, 0.005, 0.0001, 0.0001), (1, 5)),
    "solref": R(SOLREF, (1, 2)),
    "solreffriction": R((0, 0), (1, 2)),
    "solimp": R(SOLIMP, (1, 5)),
    "margin": R(0),
    "gap": R(0),
    "adhesion": R(0),
}

_EXCLUDE = {"name": S(), "body1": S(), "body2": S()}

_EQ_COMMON = {"name": S(), "class": S(), "active": B(True), "solref": R(SOLREF, (1, 2)), "solimp": R(SOLIMP, (1, 5))}
_CONNECT = {**_EQ_COMMON, "body1": S(), "body2": S(), "anchor": R(ZERO3, 3), "site1": S(), "site2": S()}
_WELD = {
    **_EQ_COMMON,
    "body1": S(),
    "body2": S(),
    "anchor": R(ZERO3, 3),
    "relpose": R((0, 1, 0, 0, 0, 0, 0), 7),
    "torquescale": R(1),
    "site1": S(),
    "site2": S(),
}
_EQ_JOINT = {**_EQ_COMMON, "joint1": S(), "joint2": S(), "polycoef": R((0, 1, 0, 0, 0), (1, 5))}
_EQ_TENDON = {**_EQ_COMMON, "tendon1": S(), "tendon2": S(), "polycoef": R((0, 1, 0, 0, 0), (1, 5))}
_EQ_FLEX = {**_EQ_COMMON, "flex": S()}

# <flexcomp> and its children (MuJoCo 4.0's schema; what mjx_lite builds from them: mjcf/flexcomp.py)
_FLEXCOMP = {
    "name": S(), "type": K("grid", "grid", "box", "cylinder", "ellipsoid", "square", "disc", "circle", "mesh", "gmsh",
                           "direct"),
    "group": I(0), "dim": I(2), "dof": K("full", "full", "radial", "trilinear", "quadratic", "2d"),
    "count": I((10, 10, 10), (1, 3)), "cellcount": I(None, (1, 3)), "spacing": R((0.02, 0.02, 0.02), (1, 3)),
    "radius": R(0.005), "rigid": B(False), "mass": R(1.0), "inertiabox": R(0.005), "scale": R((1, 1, 1), (1, 3)),
    "file": S(), "mesh": S(), "point": R(None, -1), "element": I(None, -1), "texcoord": R(None, -1), "material": S(),
    "rgba": R((0.5, 0.5, 0.5, 1), 4), "flatskin": B(False), "pos": R(ZERO3, 3), "quat": R((1, 0, 0, 0), 4),
    "axisangle": R(None, 4), "xyaxes": R(None, 6), "zaxis": R(None, 3), "euler": R(None, 3), "origin": R(None, 3),
}  # fmt: skip
_FLEXCOMP_EDGE = {"equality": K("false", "false", "true", "vert", "strain"), "solref": R(SOLREF, (1, 2)),
                  "solimp": R(SOLIMP, (1, 5)), "stiffness": R(0.0), "damping": R(0.0)}  # fmt: skip
_FLEXCOMP_ELASTICITY = {"young": R(0.0), "poisson": R(0.0), "damping": R(0.0), "thickness": R(-1.0),
                        "elastic2d": K("none", "none", "bend", "stretch", "both"), "section": S(),
                        "sectionsize": R(None, -1), "shear": R(None, -1), "yield": R(None, -1)}  # fmt: skip
_FLEXCOMP_CONTACT = {
    "contype": I(1), "conaffinity": I(1), "condim": I(3), "priority": I(0), "friction": R((1, 0.005, 0.0001), (1, 3)),
    "solmix": R(1.0), "solref": R(SOLREF, (1, 2)), "solimp": R(SOLIMP, (1, 5)), "margin": R(0.0), "gap": R(0.0),
    "selfcollide": K("auto", "none", "narrow", "bvh", "sap", "auto"), "activelayers": I(1),
    "passive": B(False),
}  # fmt: skip
_FLEXCOMP_PIN = {"id": I(None, -1), "range": I(None, -1), "grid": I(None, -1), "gridrange": I(None, -1)}
# <deformable><flex> (vertices on given bodies) and its children (the flexcomp's edge without equality)
_FLEX = {
    "name": S(), "group": I(0), "dim": I(2), "radius": R(0.005), "material": S(), "rgba": R((0.5, 0.5, 0.5, 1), 4),
    "flatskin": B(False), "body": S(), "vertex": R(None, -1), "element": I(None, -1), "texcoord": R(None, -1),
    "elemtexcoord": I(None, -1), "node": S(), "nodecoord": R(None, -1), "cellcount": I(None, (1, 3)),
    "dof": K("full", "full", "radial", "trilinear", "quadratic", "2d"),
}  # fmt: skip
_FLEX_EDGE = {"stiffness": R(0.0), "damping": R(0.0)}

_TENDON_COMMON = {
    "name": S(),
    "class": S(),
    "group": I(0),
    "limited": AB(),
    "actuatorfrclimited": AB(),
    "range": R((0, 0), 2),
    "actuatorfrcrange": R((0, 0), 2),
    "solreflimit": R(SOLREF, (1, 2)),
    "solimplimit": R(SOLIMP, (1, 5)),
    "solreffriction": R(SOLREF, (1, 2)),
    "solimpfriction": R(SOLIMP, (1, 5)),
    "frictionloss": R(0),
    "springlength": R((-1, -1), (1, 2)),
    "margin": R(0),
    "stiffness": R(ZERO3, (1, 3)),
    "damping": R(ZERO3, (1, 3)),
    "armature": R(0),
    "user": R(None, -1),
    "springyield": R(0),
}
_SPATIAL = {**_TENDON_COMMON, "width": R(0.003), "material": S(), "rgba": R((0.5, 0.5, 0.5, 1), 4)}
_FIXED = dict(_TENDON_COMMON)

# ---------------------------------------------------------------------------------------------------------
# actuators (the parser types only what is written; `actuation.py` resolves defaults, see spec.Element)

ACTUATOR_TAGS = ("general", "motor", "position", "velocity", "intvelocity", "damper", "cylinder", "muscle", "adhesion",
                 "pid", "dcmotor", "orientation")
_ACT_COMMON = {
    "name": S(),
    "class": S(),
    "group": I(0),
    "ctrllimited": AB(),
    "forcelimited": AB(),
    "ctrlrange": R((0, 0), 2),
    "forcerange": R((0, 0), 2),
    "lengthrange": R((0, 0), 2),
    "gear": R((1, 0, 0, 0, 0, 0), (1, 6)),
    "cranklength": R(0),
    "joint": S(),
    "jointinparent": S(),
    "tendon": S(),
    "cranksite": S(),
    "slidersite": S(),
    "site": S(),
    "refsite": S(),
    "user": R(None, -1),
    "armature": R(0),
    "damping": R(ZERO3, (1, 3)),
    "delay": R(0),
    "interp": INTERP,
    "nsample": I(0),
}
_ACT_ACT = {"actlimited": AB(), "actrange": R((0, 0), 2)}
_GENERAL = {
    **_ACT_COMMON,
    **_ACT_ACT,
    "body": S(),
    "actdim": I(-1),
    "actearly": B(False),
    "inheritrange": R(0),
    "dyntype": K("none", "none", "integrator", "filter", "filterexact", "pid", "dcmotor", "muscle", "user"),
    "gaintype": K("fixed", "fixed", "affine", "muscle", "dcmotor", "pid", "so3", "user"),
    "biastype": K("none", "none", "affine", "muscle", "dcmotor", "so3", "user"),
    "dynprm": R((1, 0, 0, 0, 0, 0, 0, 0, 0, 0), (1, 10)),
    "gainprm": R((1, 0, 0, 0, 0, 0, 0, 0, 0, 0), (1, 10)),
    "biasprm": R((0,) * 10, (1, 10)),
    "ffrange": R((0, 0), 2),
    "velrange": R((0, 0), 2),
    "input": S(),
}
_MOTOR = dict(_ACT_COMMON)
_POSITION = {**_ACT_COMMON, "kp": R(1), "kv": R(0), "dampratio": R(0), "timeconst": R(0), "inheritrange": R(0)}
_VELOCITY = {**_ACT_COMMON, "kv": R(1)}
_INTVELOCITY = {**_ACT_COMMON, **_ACT_ACT, "kp": R(1), "kv": R(0), "dampratio": R(0), "inheritrange": R(0)}
_DAMPER = {k: v for k, v in _ACT_COMMON.items() if k != "ctrllimited"} | {"kv": R(1)}
_CYLINDER = {**_ACT_COMMON, "timeconst": R(1), "area": R(1), "diameter": R(-1), "bias": R(ZERO3, 3)}
_MUSCLE = {
    **{k: v for k, v in _ACT_COMMON.items() if k not in ("site", "refsite")},
    "timeconst": R((0.01, 0.04), 2),
    "tausmooth": R(0),
    "range": R((0.75, 1.05), 2),
    "force": R(-1),
    "scale": R(200),
    "lmin": R(0.5),
    "lmax": R(1.6),
    "vmax": R(1.5),
    "fpmax": R(1.3),
    "fvmax": R(1.2),
}
# orientation servos: MuJoCo's attribute table (no ctrllimited, no gear; a ball joint or a site with a refsite)
_ORIENTATION = {
    **{k: _ACT_COMMON[k] for k in ("name", "class", "group", "nsample", "interp", "delay", "ctrlrange", "user",
                                   "forcelimited", "forcerange", "joint", "site", "refsite")},
    "kp": R(1),
    "kv": R(0),
    "dampratio": R(0),
    "input": S(),
}
_PID = {
    **{k: v for k, v in _ACT_COMMON.items()},
    "posrange": R((0, 0), 2),
    "velrange": R((0, 0), 2),
    "ffrange": R((0, 0), 2),
    "inheritrange": R(0),
    "kp": R(1),
    "kv": R(0),
    "dampratio": R(0),
    "ki": R(0),
    "imax": R(0),
    "slewmax": R(0),
    "input": S(),
}
_DCMOTOR = {
    **{k: v for k, v in _ACT_COMMON.items() if k not in ("forcelimited", "forcerange")},
    "motorconst": R(None, (1, 2)),
    "resistance": R(None),
    "nominal": R(None, (1, 3)),
    "saturation": R(None, (1, 3)),
    "inductance": R(None, (1, 2)),
    "cogging": R(None, (1, 3)),
    "controller": R(None, (1, 6)),
    "thermal": R(None, (1, 6)),
    "lugre": R(None, (1, 5)),
    "input": S(),
}
_ADHESION = {
    "name": S(),
    "class": S(),
    "group": I(0),
    "forcelimited": AB(),
    "ctrlrange": R((0, 0), 2),
    "forcerange": R((0, 0), 2),
    "body": S(),
    "gain": R(1),
    "user": R(None, -1),
    "delay": R(0),
    "interp": INTERP,
    "nsample": I(0),
}

# ---------------------------------------------------------------------------------------------------------
# sensors

_SENS_COMMON = {
    "name": S(),
    "noise": R(0),
    "cutoff": R(0),
    "user": R(None, -1),
    "delay": R(0),
    "interp": INTERP,
    "interval": R((0, 0), (1, 2)),
    "nsample": I(0),
}
OBJTYPES = ("body", "xbody", "geom", "site", "camera")
_FRAME_OBJ = {"objtype": K(None, *OBJTYPES), "objname": S(), "reftype": K(None, *OBJTYPES), "refname": S()}
_SITE_SENSORS = ("touch", "accelerometer", "velocimeter", "gyro", "force", "torque", "magnetometer")
_JOINT_SENSORS = (
    "jointpos", "jointvel", "jointactuatorfrc", "ballquat", "ballangvel", "jointlimitpos", "jointlimitvel",
    "jointlimitfrc",
)  # fmt: skip
_TENDON_SENSORS = ("tendonpos", "tendonvel", "tendonactuatorfrc", "tendonlimitpos", "tendonlimitvel", "tendonlimitfrc")
_ACTUATOR_SENSORS = ("actuatorpos", "actuatorvel", "actuatorfrc")
_FRAME_SENSORS = ("framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis", "framelinvel", "frameangvel")
_FRAME_ACC_SENSORS = ("framelinacc", "frameangacc")
_SUBTREE_SENSORS = ("subtreecom", "subtreelinvel", "subtreeangmom")
_GEOMDIST_SENSORS = ("distance", "normal", "fromto")
_GEOMDIST = {"body1": S(), "body2": S(), "geom1": S(), "geom2": S()}

SENSOR_TAGS = (
    _SITE_SENSORS + ("camprojection", "rangefinder") + _JOINT_SENSORS + _TENDON_SENSORS + _ACTUATOR_SENSORS
    + _FRAME_SENSORS + _FRAME_ACC_SENSORS + _SUBTREE_SENSORS + ("insidesite",) + _GEOMDIST_SENSORS
    + ("contact", "e_potential", "e_kinetic", "clock")
)  # fmt: skip

_SENSORS: dict[str, dict] = {}
for _t in _SITE_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "site": S()}
_SENSORS["camprojection"] = {**_SENS_COMMON, "site": S(), "camera": S()}
_SENSORS["rangefinder"] = {**_SENS_COMMON, "site": S(), "camera": S(), "data": S("dist")}  # WORDS
for _t in _JOINT_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "joint": S()}
for _t in _TENDON_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "tendon": S()}
for _t in _ACTUATOR_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "actuator": S()}
for _t in _FRAME_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, **_FRAME_OBJ}
for _t in _FRAME_ACC_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "objtype": K(None, *OBJTYPES), "objname": S()}
for _t in _SUBTREE_SENSORS:
    _SENSORS[_t] = {**_SENS_COMMON, "body": S()}
_SENSORS["insidesite"] = {
    **_SENS_COMMON,
    "site": S(),
    "objtype": K(None, *OBJTYPES),
    "objname": S(),
    "enclosed": B(False),
}
for _t in _GEOMDIST_SENSORS:
    _SENSORS["sensor/" + _t] = {**_SENS_COMMON, **_GEOMDIST}
_SENSORS["sensor/contact"] = {
    **_SENS_COMMON,
    **_GEOMDIST,
    "site": S(),
    "subtree1": S(),
    "subtree2": S(),
    "num": I(1),
    "data": S("found"),  # words of WORDS["sensor/contact"]
    "reduce": K("none", "none", "mindist", "maxforce", "netforce"),
}
for _t in ("e_potential", "e_kinetic", "clock"):
    _SENSORS[_t] = dict(_SENS_COMMON)

# ---------------------------------------------------------------------------------------------------------
# keyframe, custom, visual

_KEY = {
    "name": S(),
    "time": R(0),
    "qpos": R(None, -1),
    "qvel": R(None, -1),
    "act": R(None, -1),
    "ctrl": R(None, -1),
    "mpos": R(None, -1),
    "mquat": R(None, -1),
    "plastic": R(None, -1),
}

_NUMERIC = {"name": S(), "size": I(-1), "data": R(None, -1)}
_TEXT = {"name": S(), "data": S()}
_TUPLE = {"name": S()}
_TUPLE_ELEMENT = {"objtype": S(), "objname": S(), "prm": R(0)}

# <visual> is kept aside (the compiler ignores it) but typed as MuJoCo reads it (mjVisual: floats and ints)
_VIS_INT = ("cameraid", "offwidth", "offheight", "shadowsize", "offsamples", "numslices", "numstacks", "numquads",
            "active")  # fmt: skip
_VIS_BOOL = ("orthographic", "ellipsoidinertia", "bvactive")
_VIS_COUNT = {"headlight": 3, "rgba": 4}
VISUAL_CHILDREN = {
    "global": "azimuth bvactive cameraid elevation ellipsoidinertia fovy glow ipd linewidth offheight offwidth "
    "orthographic realtime",
    "quality": "numquads numslices numstacks offsamples shadowsize",
    "headlight": "active ambient diffuse specular",
    "map": "actuatortendon alpha fogend fogstart force haze shadowclip shadowscale stiffness stiffnessrot "
    "torque zfar znear",
    "scale": "actuatorlength actuatorwidth camera com connect constraint contactheight contactwidth forcewidth "
    "framelength framewidth frustum jointlength jointwidth light selectpoint slidercrank",
    "rgba": "actuator actuatornegative actuatorpositive bv bvactive camera com connect constraint contactforce "
    "contactfriction contactgap contactpoint contacttorque crankbroken fog force frustum haze inertia joint "
    "light rangefinder selectpoint slidercrank",
}


def _visual_attr(child: str, name: str) -> Attr:
    if child == "global" and name in _VIS_BOOL:
        return B(None)
    if child == "headlight" and name == "active":  # MuJoCo 4.0: an int 0..2 or false/true/auto (= 0/1/2)
        return Attr("int", 1, None, ("false", "true", "auto"))
    if name in _VIS_INT and not (child == "rgba" and name == "active"):
        return I(None)
    return R(None, _VIS_COUNT.get(child, 1))


_VISUAL = {"visual/" + k: {a: _visual_attr(k, a) for a in v.split()} for k, v in VISUAL_CHILDREN.items()}

# ---------------------------------------------------------------------------------------------------------

SCHEMA: dict[str, dict[str, Attr]] = {
    "mujoco": _MJCF_TOP,
    "compiler": _COMPILER,
    "compiler/lengthrange": _LENGTHRANGE,
    "option": _OPTION,
    "option/flag": _FLAG,
    "size": _SIZE,
    "statistic": _STATISTIC,
    "visual": {},
    **_VISUAL,
    "default": {"class": S()},
    "worldbody": {},
    "body": _BODY,
    "frame": _FRAME,
    "replicate": {"count": I(None), "offset": R(ZERO3, 3), "euler": R(ZERO3, 3), "sep": S("")},
    "inertial": _INERTIAL,
    "joint": _JOINT,
    "freejoint": _FREEJOINT,
    "geom": _GEOM,
    "site": _SITE,
    "camera": _CAMERA,
    "light": _LIGHT,
    "include": {"file": S()},
    "attach": {"model": S(), "body": S(), "frame": S(), "prefix": S()},
    "asset": {},
    "deformable": {},
    "model": {"name": S(), "file": S(), "content_type": S()},
    "mesh": _MESH,
    "hfield": _HFIELD,
    "texture": _TEXTURE,
    "material": _MATERIAL,
    "material/layer": _LAYER,
    "skin": _SKIN,
    "skin/bone": _BONE,
    "flexcomp": _FLEXCOMP,
    "flexcomp/edge": _FLEXCOMP_EDGE,
    "flexcomp/elasticity": _FLEXCOMP_ELASTICITY,
    "flexcomp/contact": _FLEXCOMP_CONTACT,
    "flexcomp/pin": _FLEXCOMP_PIN,
    "deformable/flex": _FLEX,
    "flex/edge": _FLEX_EDGE,
    "flex/elasticity": _FLEXCOMP_ELASTICITY,
    "flex/contact": _FLEXCOMP_CONTACT,
    "contact": {},
    "pair": _PAIR,
    "exclude": _EXCLUDE,
    "equality": {},
    "connect": _CONNECT,
    "weld": _WELD,
    "equality/joint": _EQ_JOINT,
    "equality/tendon": _EQ_TENDON,
    "equality/flex": _EQ_FLEX,
    "tendon": {},
    "spatial": _SPATIAL,
    "fixed": _FIXED,
    "spatial/site": {"site": S()},
    "spatial/geom": {"geom": S(), "sidesite": S()},
    "spatial/pulley": {"divisor": R(None)},
    "fixed/joint": {"joint": S(), "coef": R(None)},
    "actuator": {},
    "general": _GENERAL,
    "motor": _MOTOR,
    "position": _POSITION,
    "velocity": _VELOCITY,
    "intvelocity": _INTVELOCITY,
    "damper": _DAMPER,
    "cylinder": _CYLINDER,
    "muscle": _MUSCLE,
    "adhesion": _ADHESION,
    "pid": _PID,
    "dcmotor": _DCMOTOR,
    "orientation": _ORIENTATION,
    # an actuator plugin (mjcf/plugins.py): the common attributes (no refsite) and the activation ones
    "actuator/plugin": {**{k: v for k, v in _ACT_COMMON.items() if k != "refsite"}, **_ACT_ACT, "actdim": I(-1),
                        "actearly": B(False), "dyntype": _GENERAL["dyntype"], "dynprm": _GENERAL["dynprm"],
                        "plugin": S(), "instance": S()},  # fmt: skip
    "sensor": {},
    # a sensor plugin (mjcf/plugins.py)
    "sensor/plugin": {"name": S(), "plugin": S(), "instance": S(), "cutoff": R(0), "objtype": S(), "objname": S(),
                      "reftype": S(), "refname": S(), "user": R(None, -1)},  # fmt: skip
    **_SENSORS,
    "keyframe": {},
    "key": _KEY,
    "custom": {},
    "numeric": _NUMERIC,
    "text": _TEXT,
    "tuple": _TUPLE,
    "tuple/element": _TUPLE_ELEMENT,
    **plugins.SCHEMA,
}

# refined schemas of the section passes win
_REFINED: dict[str, dict[str, Attr]] = dict(schema_actuation.SCHEMA)
SCHEMA.update(_REFINED)

# string attributes holding a space-separated list of keywords: (schema key, attribute) -> allowed words
WORDS = {
    ("camera", "output"): ("rgb", "depth", "distance", "normal", "segmentation"),
    ("rangefinder", "data"): ("dist", "dir", "origin", "point", "normal", "depth"),
    ("sensor/contact", "data"): ("found", "force", "torque", "dist", "pos", "normal", "tangent", "linvel", "angvel"),
}

# attributes MuJoCo requires (MJCFError "required attribute missing" when absent; not checked in <default>)
REQUIRED: dict[str, tuple[str, ...]] = {
    "replicate": ("count",),
    "skin/bone": ("body", "bindpos", "bindquat", "vertid", "vertweight"),
    "attach": ("prefix",),
    "model": ("file",),
    "inertial": ("pos", "mass"),
    "hfield": ("size",),
    "exclude": ("body1", "body2"),
    "equality/joint": ("joint1",),
    "equality/tendon": ("tendon1",),
    "equality/flex": ("flex",),
    "spatial/site": ("site",),
    "spatial/geom": ("geom",),
    "spatial/pulley": ("divisor",),
    "fixed/joint": ("joint", "coef"),
    "numeric": ("name",),
    "text": ("name",),
    "tuple": ("name",),
    "tuple/element": ("objtype", "objname"),
    "camprojection": ("site", "camera"),
    "insidesite": ("site", "objtype", "objname"),
    **{t: ("site",) for t in _SITE_SENSORS},
    **{t: ("joint",) for t in _JOINT_SENSORS},
    **{t: ("tendon",) for t in _TENDON_SENSORS},
    **{t: ("actuator",) for t in _ACTUATOR_SENSORS},
    **{t: ("objtype", "objname") for t in _FRAME_SENSORS + _FRAME_ACC_SENSORS},
    **{t: ("body",) for t in _SUBTREE_SENSORS},
    **plugins.REQUIRED,
}
# at least one group of attributes must be fully present
ONE_OF: dict[str, tuple[tuple[str, ...], ...]] = {
    "connect": (("site1", "site2"), ("body1", "anchor")),
    "weld": (("site1", "site2"), ("body1",)),
    "rangefinder": (("site",), ("camera",)),
    **{"sensor/" + t: (("geom1",), ("body1",)) for t in _GEOMDIST_SENSORS},
}
ONE_OF_2 = {"sensor/" + t: (("geom2",), ("body2",)) for t in _GEOMDIST_SENSORS}

# <default> children: tag -> its schema key "default/<tag>" (the element's schema minus what MuJoCo does not
# accept in a default class: names, references to other objects, file data)
_NOT_IN_DEFAULT = ("name", "class", "target")
_REFS = ("joint", "jointinparent", "tendon", "site", "cranksite", "slidersite", "refsite", "lengthrange")
_DEFAULT_BASE = {
    "mesh": ("mesh", ("builtin", "content_type", "face", "file", "material", "normal", "params", "refpos", "refquat",
                      "smoothnormal", "texcoord", "vertex")),
    "texture": ("texture", ("content_type", "file", "fileback", "filedown", "filefront", "fileleft", "fileright",
                            "fileup")),
    "material": ("material", ()),
    "joint": ("joint", ()),
    "geom": ("geom", ()),
    "site": ("site", ()),
    "camera": ("camera", ()),
    "light": ("light", ("texture",)),
    "pair": ("pair", ("geom1", "geom2")),
    "equality": ("connect", ("body1", "body2", "anchor", "site1", "site2")),
    "tendon": ("spatial", ()),
    "general": ("general", _REFS + ("body",)),
    "muscle": ("muscle", _REFS + ("tausmooth",)),
    "adhesion": ("adhesion", ("body",)),
    **{t: (t, _REFS) for t in ("motor", "position", "velocity", "intvelocity", "damper", "cylinder", "pid", "dcmotor",
                               "orientation")},
}  # fmt: skip
DEFAULT_CHILDREN: dict[str, str] = {}
for _t, (_base, _excl) in _DEFAULT_BASE.items():
    if "default/" + _t not in _REFINED:
        SCHEMA["default/" + _t] = {k: v for k, v in SCHEMA[_base].items() if k not in _NOT_IN_DEFAULT + _excl}
    DEFAULT_CHILDREN[_t] = "default/" + _t
# <default> child tag -> the element schema key it mirrors
DEFAULT_BASE = {t: b for t, (b, _) in _DEFAULT_BASE.items()}
# element schema key -> the <default> child tag whose values it takes
DEFAULT_FOR = {
    "mesh": "mesh",
    "texture": "texture",
    "material": "material",
    "joint": "joint",
    "geom": "geom",
    "site": "site",
    "camera": "camera",
    "light": "light",
    "pair": "pair",
    "connect": "equality",
    "weld": "equality",
    "equality/joint": "equality",
    "equality/tendon": "equality",
    "equality/flex": "equality",
    "spatial": "tendon",
    "fixed": "tendon",
}

# Real attributes MuJoCo reads in single precision (C float; mjsGeom.rgba, mjsMaterial, light colours, camera
# intrinsics, mesh/skin/hfield data, mjVisual): a finite value beyond float32's range is "number is too large".
_F32_ATTRS = {
    "geom": ("rgba",), "site": ("rgba",), "spatial": ("rgba",), "skin": ("rgba", "inflate", "vertex", "texcoord"),
    "skin/bone": ("bindpos", "bindquat", "vertweight"),
    "material": ("texrepeat", "emission", "specular", "shininess", "reflectance", "metallic", "roughness", "rgba"),
    "camera": ("focal", "focalpixel", "principal", "principalpixel", "sensorsize"),
    "light": ("bulbradius", "intensity", "range", "attenuation", "cutoff", "softness", "exponent", "ambient",
              "diffuse", "specular"),
    "mesh": ("vertex", "normal", "texcoord"), "hfield": ("elevation",),
}  # fmt: skip
F32: set[tuple[str, str]] = {(k, a) for k, names in _F32_ATTRS.items() for a in names}
F32 |= {(k, a) for k, sch in SCHEMA.items() if k.startswith("visual/") for a, t in sch.items() if t.kind == "real"}
F32 |= {("default/" + k, a) for k, a in set(F32) if "default/" + k in SCHEMA}
F32 |= {("default/tendon", "rgba")}

# parent/tag keys (see module docstring)
_QUALIFIED = {k for k in SCHEMA if "/" in k}


def key_of(parent: str, tag: str) -> str:
    """Schema key for `tag` inside `parent` ("parent/tag" when such an entry exists, else `tag`)."""
    q = parent + "/" + tag
    return q if q in _QUALIFIED else tag


def lookup(parent: str, tag: str) -> dict[str, Attr] | None:
    """The schema of `tag` inside `parent`, or None if unknown."""
    return SCHEMA.get(key_of(parent, tag))
