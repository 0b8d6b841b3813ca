"""Model, Option, Statistic, Contact and Data pytrees, and MuJoCo's enumerations.

Names and shapes are MuJoCo's (mjModel / mjData), with two layout changes: rotation matrices are
`(..., 3, 3)` rather than `(..., 9)`, and Jacobian-like arrays (`ten_J`, `actuator_moment`) are dense; `efc_J`
is dense (njmax, nv) or, for large scenes, fixed-width sparse rows (`efc_J_colind`, see `sparse_efc_jacobian`).
The static/traced rule (see `_struct.py`): integer and boolean tables, sizes and names are static host numpy;
every float is a traced `jax.Array`, so models can be batched (`vmap`) and differentiated with respect to their
physical parameters without recompiling.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib

import jax
import numpy as np

from mjx_lite._struct import pytree_dataclass, shaped, static_field, static_memo
from mjx_lite.config import LAYOUT_FIELDS, Config

# ----------------------------------------------------------------------------------------------------------
# Enumerations (values identical to MuJoCo's mjt* enums)


class JointType(enum.IntEnum):
    FREE = 0
    BALL = 1
    SLIDE = 2
    HINGE = 3

    def qpos_width(self) -> int:
        return (7, 4, 1, 1)[self]

    def dof_width(self) -> int:
        return (6, 3, 1, 1)[self]


class GeomType(enum.IntEnum):
    PLANE = 0
    HFIELD = 1
    SPHERE = 2
    CAPSULE = 3
    ELLIPSOID = 4
    CYLINDER = 5
    BOX = 6
    MESH = 7
    SDF = 8


class TrnType(enum.IntEnum):
    JOINT = 0
    JOINTINPARENT = 1
    SLIDERCRANK = 2
    TENDON = 3
    SITE = 4
    BODY = 5
    SO3 = 6  # relative orientation (orientation servos): 3 lengths and 3 moment rows


class DynType(enum.IntEnum):
    NONE = 0
    INTEGRATOR = 1
    FILTER = 2
    FILTEREXACT = 3
    MUSCLE = 4
    DCMOTOR = 5
    PID = 6
    USER = 7


class GainType(enum.IntEnum):
    FIXED = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3
    SO3 = 4
    PID = 5
    USER = 6


class BiasType(enum.IntEnum):
    NONE = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3
    SO3 = 4
    USER = 5


class Input(enum.IntEnum):
    """Actuator input bits (mjtInput): which controls make up an actuator's control block (actuator_ctrlspec)."""

    POS = 1
    VEL = 2
    FF = 4
    VOLTAGE = 8
    NONE = 16
    PRESSURE = 32


class ObjType(enum.IntEnum):
    UNKNOWN = 0
    BODY = 1
    XBODY = 2
    JOINT = 3
    DOF = 4
    GEOM = 5
    SITE = 6
    CAMERA = 7
    LIGHT = 8
    FLEX = 9
    MESH = 10
    SKIN = 11
    HFIELD = 12
    TEXTURE = 13
    MATERIAL = 14
    PAIR = 15
    EXCLUDE = 16
    EQUALITY = 17
    TENDON = 18
    ACTUATOR = 19
    SENSOR = 20
    NUMERIC = 21
    TEXT = 22
    TUPLE = 23
    KEY = 24
    PLUGIN = 25


class SensorType(enum.IntEnum):
    TOUCH = 0
    ACCELEROMETER = 1
    VELOCIMETER = 2
    GYRO = 3
    FORCE = 4
    TORQUE = 5
    MAGNETOMETER = 6
    RANGEFINDER = 7
    CAMPROJECTION = 8
    JOINTPOS = 9
    JOINTVEL = 10
    TENDONPOS = 11
    TENDONVEL = 12
    ACTUATORPOS = 13
    ACTUATORVEL = 14
    ACTUATORFRC = 15
    JOINTACTFRC = 16
    TENDONACTFRC = 17
    BALLQUAT = 18
    BALLANGVEL = 19
    JOINTLIMITPOS = 20
    JOINTLIMITVEL = 21
    JOINTLIMITFRC = 22
    TENDONLIMITPOS = 23
    TENDONLIMITVEL = 24
    TENDONLIMITFRC = 25
    FRAMEPOS = 26
    FRAMEQUAT = 27
    FRAMEXAXIS = 28
    FRAMEYAXIS = 29
    FRAMEZAXIS = 30
    FRAMELINVEL = 31
    FRAMEANGVEL = 32
    FRAMELINACC = 33
    FRAMEANGACC = 34
    SUBTREECOM = 35
    SUBTREELINVEL = 36
    SUBTREEANGMOM = 37
    INSIDESITE = 38
    GEOMDIST = 39
    GEOMNORMAL = 40
    GEOMFROMTO = 41
    CONTACT = 42
    E_POTENTIAL = 43
    E_KINETIC = 44
    CLOCK = 45
    TACTILE = 46
    PLUGIN = 47
    USER = 48


class Stage(enum.IntEnum):
    NONE = 0
    POS = 1
    VEL = 2
    ACC = 3


class DataType(enum.IntEnum):
    REAL = 0
    POSITIVE = 1
    AXIS = 2
    QUATERNION = 3


class EqType(enum.IntEnum):
    CONNECT = 0
    WELD = 1
    JOINT = 2
    TENDON = 3
    FLEX = 4
    FLEXVERT = 5
    FLEXSTRAIN = 6
    DISTANCE = 7


class WrapType(enum.IntEnum):
    NONE = 0
    JOINT = 1
    PULLEY = 2
    SITE = 3
    SPHERE = 4
    CYLINDER = 5


class TextureType(enum.IntEnum):
    TWO_D = 0  # mjTEXTURE_2D
    CUBE = 1
    SKYBOX = 2


class Builtin(enum.IntEnum):  # mjtBuiltin: procedural textures
    NONE = 0
    GRADIENT = 1
    CHECKER = 2
    FLAT = 3


class TextureRole(enum.IntEnum):  # mjtTextureRole: the columns of mat_texid
    USER = 0
    RGB = 1
    OCCLUSION = 2
    ROUGHNESS = 3
    METALLIC = 4
    NORMAL = 5
    OPACITY = 6
    EMISSIVE = 7
    RGBA = 8
    ORM = 9


class IntegratorType(enum.IntEnum):
    EULER = 0
    RK4 = 1
    IMPLICIT = 2
    IMPLICITFAST = 3


class ConeType(enum.IntEnum):
    PYRAMIDAL = 0
    ELLIPTIC = 1


class SolverType(enum.IntEnum):
    PGS = 0
    CG = 1
    NEWTON = 2


class ConstraintType(enum.IntEnum):
    EQUALITY = 0
    FRICTION_DOF = 1
    FRICTION_TENDON = 2
    LIMIT_JOINT = 3
    LIMIT_TENDON = 4
    CONTACT_FRICTIONLESS = 5
    CONTACT_PYRAMIDAL = 6
    CONTACT_ELLIPTIC = 7


class ConstraintState(enum.IntEnum):
    SATISFIED = 0
    QUADRATIC = 1
    LINEARNEG = 2
    LINEARPOS = 3
    CONE = 4


class DisableBit(enum.IntFlag):
    CONSTRAINT = 1
    EQUALITY = 2
    FRICTIONLOSS = 4
    LIMIT = 8
    CONTACT = 16
    SPRING = 32
    DAMPER = 64
    GRAVITY = 128
    CLAMPCTRL = 256
    WARMSTART = 512
    FILTERPARENT = 1024
    ACTUATION = 2048
    REFSAFE = 4096
    SENSOR = 8192
    MIDPHASE = 16384
    EULERDAMP = 32768
    AUTORESET = 65536
    NATIVECCD = 131072
    ISLAND = 262144
    MULTICCD = 524288


class EnableBit(enum.IntFlag):
    OVERRIDE = 1
    ENERGY = 2
    FWDINV = 4
    INVDISCRETE = 8
    SLEEP = 16
    DIAGEXACT = 32


class Warning(enum.IntEnum):  # noqa: A001 - MuJoCo's name (mjtWarning)
    INERTIA = 0
    CONTACTFULL = 1
    CNSTRFULL = 2
    BADQPOS = 3
    BADQVEL = 4
    BADQACC = 5
    BADCTRL = 6


NWARNING = 7
SPARSE_NV = 60  # with Config.mass_matrix="auto", models with more dofs store qM / qLD tree-sparse, (nM,)
EFC_SPARSE_FACTOR = 4  # Config.efc_jacobian="auto": sparse rows when nv >= factor * row width (see sparse_efc_jacobian)

# MuJoCo's numerical constants.
MINVAL = 1e-15
MINMU = 1e-5
MINIMP = 0.0001
MAXIMP = 0.9999
NREF = 2
NIMP = 5
NEQDATA = 12
NDYN = 10
NGAIN = 10
NBIAS = 10
NFLUID = 12
NTEXROLE = 10  # mjNTEXROLE: texture roles of a material (mat_texid's columns; mjtTextureRole)

# ----------------------------------------------------------------------------------------------------------
# Model


@pytree_dataclass
class Option:
    """Physics options (mjOption). Floats are traced; integer settings are static."""

    timestep: jax.Array = shaped()
    impratio: jax.Array = shaped()
    tolerance: jax.Array = shaped()
    ls_tolerance: jax.Array = shaped()
    noslip_tolerance: jax.Array = shaped()
    ccd_tolerance: jax.Array = shaped()
    sleep_tolerance: jax.Array = shaped()  # sleeping islands: velocity tolerance [length/time] (pipeline/sleep.py)
    gravity: jax.Array = shaped(3)
    wind: jax.Array = shaped(3)
    magnetic: jax.Array = shaped(3)
    density: jax.Array = shaped()
    viscosity: jax.Array = shaped()
    o_margin: jax.Array = shaped()
    o_solref: jax.Array = shaped(2)
    o_solimp: jax.Array = shaped(5)
    o_friction: jax.Array = shaped(5)
    integrator: int = static_field()
    cone: int = static_field()
    jacobian: int = static_field()
    solver: int = static_field()
    iterations: int = static_field()
    ls_iterations: int = static_field()
    noslip_iterations: int = static_field()
    ccd_iterations: int = static_field()
    disableflags: int = static_field()
    enableflags: int = static_field()
    disableactuator: int = static_field()
    sdf_initpoints: int = static_field(40)  # SDF collisions: starting points (and contacts) per pair
    sdf_iterations: int = static_field(10)  # SDF collisions: gradient-descent iterations from each


@pytree_dataclass
class Statistic:
    """Model statistics (mjStatistic)."""

    meaninertia: jax.Array = shaped()
    meanmass: jax.Array = shaped()
    meansize: jax.Array = shaped()
    extent: jax.Array = shaped()
    center: jax.Array = shaped(3)


@pytree_dataclass
class VisGlobal:
    """<visual><global> (mjVisual.global_): the default free camera. Angles and fovy in degrees.

    orthographic is static (it changes what a camera is): 1 makes MuJoCo's free camera orthographic, which the
    renderer refuses (render.Renderer raises for camera -1).
    """

    fovy: jax.Array = shaped()
    azimuth: jax.Array = shaped()
    elevation: jax.Array = shaped()
    orthographic: int = static_field(0)


@pytree_dataclass
class VisHeadlight:
    """<visual><headlight> (mjVisual.headlight): the light at the camera. `active`: 0 off, 1 on, 2 "auto" (MuJoCo
    4.0's default, which mujoco.Renderer draws as on); static."""

    ambient: jax.Array = shaped(3)
    diffuse: jax.Array = shaped(3)
    specular: jax.Array = shaped(3)
    active: int = static_field(2)


@pytree_dataclass
class VisMap:
    """<visual><map> (mjVisual.map): clipping planes, in units of stat.extent."""

    znear: jax.Array = shaped()
    zfar: jax.Array = shaped()


@pytree_dataclass
class Visual:
    """The parts of mjVisual the renderer uses, with MuJoCo's names: `m.vis.global_.fovy`,
    `m.vis.headlight.ambient`, `m.vis.map.znear`. (The decoration scales and colours of mjVisual.scale / .rgba
    and the OpenGL quality settings are not kept: the renderer draws no decorations.)"""

    global_: VisGlobal
    headlight: VisHeadlight
    map: VisMap  # noqa: A003 - MuJoCo's name (mjVisual.map)


# MuJoCo 4.0's mjVisual defaults of the kept fields (mj_defaultVisual), by group
VISUAL_DEFAULTS = {
    "global_": {"fovy": 45.0, "azimuth": 90.0, "elevation": -45.0, "orthographic": 0},
    "headlight": {"ambient": (0.1, 0.1, 0.1), "diffuse": (0.4, 0.4, 0.4), "specular": (0.5, 0.5, 0.5), "active": 2},
    "map": {"znear": 0.01, "zfar": 50.0},
}
VISUAL_GROUPS = {"global_": VisGlobal, "headlight": VisHeadlight, "map": VisMap}


class ModelSource:
    """The MJCF a Model was compiled from (`Model.source`), for `interop.mujoco_model`.

    xml: the top-level file's bytes as read (includes and asset files are read again from `path`'s directory or
    `model_dir` when MuJoCo compiles it); path: its absolute path (None for a model loaded from a string);
    model_dir: the directory relative asset paths were resolved from; assets: the `assets` dictionary given to
    the loader, as sorted (name, bytes) pairs.

    Immutable. Part of the Model's static part: hashed and compared by one content digest (blake2b of all of the
    above), computed once here, so hashing a Model stays cheap whatever the size of the text.
    """

    __slots__ = ("xml", "path", "model_dir", "assets", "digest")

    def __init__(self, xml: str | bytes, path: str | None = None, model_dir: str | None = None,
                 assets: dict | None = None):  # fmt: skip
        data = xml.encode() if isinstance(xml, str) else bytes(xml)
        items = tuple(sorted((str(k), v.encode() if isinstance(v, str) else bytes(v))
                             for k, v in (assets or {}).items()))  # fmt: skip
        h = hashlib.blake2b(digest_size=16)
        for part in (data, str(path).encode(), str(model_dir).encode()):
            h.update(len(part).to_bytes(8, "little"))
            h.update(part)
        for k, v in items:
            for part in (k.encode(), v):
                h.update(len(part).to_bytes(8, "little"))
                h.update(part)
        for name, value in (("xml", data), ("path", path), ("model_dir", model_dir), ("assets", items),
                            ("digest", h.hexdigest())):  # fmt: skip
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        raise AttributeError("ModelSource is immutable")

    def __reduce__(self):  # pickle / deepcopy through the constructor (attributes cannot be set afterwards)
        return ModelSource, (self.xml, self.path, self.model_dir, dict(self.assets))

    def __hash__(self) -> int:
        return int(self.digest[:16], 16)

    def __eq__(self, other) -> bool:
        return isinstance(other, ModelSource) and other.digest == self.digest

    def __repr__(self) -> str:  # content-identifying (the static part's hash reads it) and short
        return f"ModelSource(path={self.path!r}, digest={self.digest})"


ACT_SLOTS = ("slew", "integral", "temperature", "bristle", "current")


def actuator_slots(dyntype: np.ndarray, dynprm: np.ndarray, gainprm: np.ndarray) -> np.ndarray:
    """(n, 5) int32: the activation slots of each actuator (offset in its act block, -1: absent) in the order
    ACT_SLOTS. dcmotor (MuJoCo's mj_dcmotorSlots): slew (dynprm[7] > 0), integral (gainprm[5] > 0), temperature
    (dynprm[2] > 0), bristle (dynprm[5] > 0), current (dynprm[0] > 0); pid: slew (dynprm[1] > 0), integral
    (gainprm[0] > 0); other actuators: none."""
    dyntype = np.asarray(dyntype).reshape(-1)
    out = np.full((len(dyntype), len(ACT_SLOTS)), -1, np.int32)
    if not len(dyntype):
        return out
    dynprm = np.asarray(dynprm, np.float64).reshape(len(dyntype), -1)
    gainprm = np.asarray(gainprm, np.float64).reshape(len(dyntype), -1)
    for i, t in enumerate(dyntype):
        if t == DynType.DCMOTOR:
            on = (dynprm[i, 7] > 0, gainprm[i, 5] > 0, dynprm[i, 2] > 0, dynprm[i, 5] > 0, dynprm[i, 0] > 0)
        elif t == DynType.PID:
            on = (dynprm[i, 1] > 0, gainprm[i, 0] > 0, False, False, False)
        else:
            continue
        n = 0
        for k, flag in enumerate(on):
            if flag:
                out[i, k] = n
                n += 1
    return out


# Size fields of Model, in order.
SIZE_FIELDS = (
    "nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsite", "ncam", "nlight", "nmesh", "nmeshvert",
    "nmeshface", "nhfield", "nhfielddata", "ntendon", "nwrap", "neq", "nsensor", "nsensordata", "nmocap",
    "nkey", "npair", "nexclude", "ntree", "nM", "nmat", "ntex", "nactuator", "nout", "nhistory", "nplastic",
    "nskin", "nskinvert", "nskintexvert", "nskinface", "nskinbone", "nskinbonevert",
    "nflex", "nflexvert", "nflexedge", "nflexelem", "nflexelemdata", "nflexelemedge", "nflexstiffness",
    "nflexbending", "nflexnode",
)  # fmt: skip


@pytree_dataclass
class Model:
    """A compiled model (mjModel). Build with `mjx_lite.load_mjcf` / `load_mjcf_string`.

    Shapes are declared with each field (`shaped(...)`, `static_field(shape=...)`: names of the static sizes `n*`;
    `field_shape`/`resolve_shape` read them). Rotation matrices are not stored (MuJoCo's quaternion fields are).
    Arrays marked `static_field` are host numpy, every other array is traced.
    """

    # sizes
    nq: int = static_field()
    nv: int = static_field()
    nu: int = static_field()
    na: int = static_field()
    nbody: int = static_field()
    njnt: int = static_field()
    ngeom: int = static_field()
    nsite: int = static_field()
    ncam: int = static_field()
    nlight: int = static_field()
    nmesh: int = static_field()
    nmeshvert: int = static_field()
    nmeshface: int = static_field()
    nhfield: int = static_field()
    nhfielddata: int = static_field()
    ntendon: int = static_field()
    nwrap: int = static_field()
    neq: int = static_field()
    nsensor: int = static_field()
    nsensordata: int = static_field()
    nmocap: int = static_field()
    nkey: int = static_field()
    npair: int = static_field()
    nexclude: int = static_field()
    ntree: int = static_field()
    nM: int = static_field()  # noqa: N815 - MuJoCo's name
    nmat: int = static_field()
    ntex: int = static_field()
    nactuator: int = static_field()  # number of actuators (nu counts their controls: an actuator may have several)
    nout: int = static_field(0)  # number of actuator force outputs (orientation servos have 3; others 1)
    nhistory: int = static_field()  # size of Data.history (delay/history ring buffers of actuators and sensors)
    nplastic: int = static_field(0)  # size of Data.plastic (spring references of joints/tendons with springyield)
    # skins (visual only; mjcf/skin.py, render/skin.py): skins, their vertices, texture coordinates, faces, bones
    # and bone-vertex pairs
    nskin: int = static_field(0)
    nskinvert: int = static_field(0)
    nskintexvert: int = static_field(0)
    nskinface: int = static_field(0)
    nskinbone: int = static_field(0)
    nskinbonevert: int = static_field(0)
    # flexes (<flexcomp>, pipeline/flex.py): flexes, their vertices, edges, elements and element vertex ids
    nflex: int = static_field(0)
    nflexvert: int = static_field(0)
    nflexedge: int = static_field(0)
    nflexelem: int = static_field(0)
    nflexelemdata: int = static_field(0)
    nflexelemedge: int = static_field(0)
    nflexstiffness: int = static_field(0)
    nflexbending: int = static_field(0)
    nflexnode: int = static_field(0)
    # capacities of the padded run-time arrays (contacts, constraint rows); see collision/, pipeline/constraint
    nconmax: int = static_field(0)
    njmax: int = static_field(0)
    # the MJCF's <size nconmax="..." njmax="..."> (MuJoCo's mjModel.nconmax / njmax; -1: not given): caps on the
    # capacities above unless m.config.nconmax / njmax say otherwise (see `requested_capacities`)
    size_nconmax: int = static_field(-1)
    size_njmax: int = static_field(-1)
    # static structure derived from compile-time floats: dofs / tendons that get a friction-loss constraint row
    # (compiled frictionloss > 0; the value itself stays traced, so it can be randomised but not switched on)
    dof_frictional: np.ndarray = static_field(None, shape=("nv",), dtype="bool")
    tendon_frictional: np.ndarray = static_field(None, shape=("ntendon",), dtype="bool")
    # tendons whose compiled armature (own, or of actuators acting through them) is > 0: they add J' a J to qM
    tendon_armed: np.ndarray = static_field(None, shape=("ntendon",), dtype="bool")
    # activation slots of pid and dcmotor actuators: offset in the actuator's act block of each state (-1: absent)
    # in MuJoCo's order ACT_SLOTS (slew, integral, temperature, bristle, current); from the compiled parameters
    # (`actuator_slots`), so which states exist is static while their parameters stay traced
    actuator_actslot: np.ndarray = static_field(None, shape=("nactuator", 5), dtype="int32")
    # engine plugins (mjcf/plugins.py): MuJoCo's plugin instances (the declared ones, then the implicit ones of
    # meshes, actuators, sensors and geoms), each one's slot in MuJoCo's plugin registry and state block (the shipped
    # plugins are stateless: npluginstate 0); the instance of each actuator and sensor (-1: none)
    nplugin: int = static_field(0)
    npluginstate: int = static_field(0)
    plugin: np.ndarray = static_field(None, shape=("nplugin",), dtype="int32")
    plugin_stateadr: np.ndarray = static_field(None, shape=("nplugin",), dtype="int32")
    plugin_statenum: np.ndarray = static_field(None, shape=("nplugin",), dtype="int32")
    actuator_plugin: np.ndarray = static_field(None, shape=("nactuator",), dtype="int32")
    sensor_plugin: np.ndarray = static_field(None, shape=("nsensor",), dtype="int32")
    # not MuJoCo's: the `mujoco.pid` plugin actuators (pipeline/plugin_pid.py): [kp, ki, kd, integral bound (imax / ki;
    # inf: none), slewmax] (traced; zeros for other actuators) and the act offsets of the integral and slew states
    # (static, -1: none; which states exist follows the compiled configuration: ki != 0, slewmax given)
    actuator_pluginprm: jax.Array = shaped("nactuator", 5)
    actuator_pluginslot: np.ndarray = static_field(None, shape=("nactuator", 2), dtype="int32")
    # limited slide/hinge joints and tendons whose compiled range is at least twice their margin: at most one side
    # can be active, so they get one constraint row (the nearer side) instead of two; a run that finds both sides
    # active (e.g. a margin randomised wider) counts it in Warning.CNSTRFULL (pipeline/constraint.py)
    jnt_limit_onerow: np.ndarray = static_field(None, shape=("njnt",), dtype="bool")
    tendon_limit_onerow: np.ndarray = static_field(None, shape=("ntendon",), dtype="bool")
    # bodies with gravcomp > 0 (MuJoCo's ngravcomp, counted at compile time: as in MuJoCo, a model compiled
    # without any skips gravcomp even if body_gravcomp is changed later) and whether the model has a fluid medium
    # (opt.density or opt.viscosity > 0 at compile time: fluid forces are traced only then; set it to True with
    # m.replace(fluid_active=True) to give a model compiled without a medium one later)
    ngravcomp: int = static_field(0)
    fluid_active: bool = static_field(False)
    # whether any geom has a nonzero surface velocity at compile time (MuJoCo's flg_surfacevel): contact rows add
    # the geoms' surface velocities to efc_vel only then (set it with m.replace to give geom_surfacevel later)
    flg_surfacevel: bool = static_field(False)
    # whether any geom or pair has a nonzero adhesion at compile time (MuJoCo's flg_adhesion): contacts carry their
    # adhesion, stay constraint rows in the gap band, pull with qfrc_adhesion and bias efc_aref only then
    flg_adhesion: bool = static_field(False)
    # compile-time values of floats that size static windows (height-field prisms tested per pair): per geom
    # (rbound, margin + gap) and per height field its cell size (dx, dy); host float64, not traced
    geom_reach0: np.ndarray = static_field(None, shape=("ngeom", 2), dtype="float64")
    hfield_cell0: np.ndarray = static_field(None, shape=("nhfield", 2), dtype="float64")
    # per flex (its longest edge at qpos0, radius + margin + gap): sizes the height-field windows of flex elements
    flex_reach0: np.ndarray = static_field(None, shape=("nflex", 2), dtype="float64")
    # per geom: for a height field of the world body, the world plane its compile-time solid lies wholly below, else
    # -1 (collision/occlusion.py: its pairs with the plane's geoms get no contact slots, checked every step)
    geom_occluder0: np.ndarray = static_field(None, shape=("ngeom",), dtype="int32")
    # trace-time configuration (mjx_lite.config.Config): gradient mode, reset semantics, collision grouping
    config: Config = static_field(Config())
    # options and statistics
    opt: Option
    stat: Statistic
    # <visual> settings the renderer uses (mjVisual: free camera, headlight, clipping planes)
    vis: Visual
    # the MJCF the model was compiled from (None for Models not built by load_mjcf / load_mjcf_string); part of
    # the static part, hashed by content digest (see ModelSource); interop.mujoco_model compiles it with MuJoCo
    source: ModelSource | None = static_field(None)
    # names: object type name ("body", "joint", ...) -> tuple of names (empty string where unnamed)
    names: dict = static_field()

    # ---- arrays (generated from mjModel; MuJoCo names) ----
    # actuator
    actuator_acc0: jax.Array = shaped("nout")
    actuator_actadr: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_actearly: np.ndarray = static_field(shape=("nactuator",), dtype="bool")
    actuator_actlimited: np.ndarray = static_field(shape=("nactuator",), dtype="bool")
    actuator_actnum: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_actrange: jax.Array = shaped("nactuator", 2)
    actuator_armature: jax.Array = shaped("nactuator")
    actuator_biasprm: jax.Array = shaped("nactuator", 10)
    actuator_biastype: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_cranklength: jax.Array = shaped("nactuator")
    actuator_ctrladr: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_ctrllimited: np.ndarray = static_field(shape=("nu",), dtype="bool")
    actuator_ctrlnum: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_ctrlrange: jax.Array = shaped("nu", 2)
    actuator_ctrlspec: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_damping: jax.Array = shaped("nactuator")
    actuator_dampingpoly: jax.Array = shaped("nactuator", 2)
    actuator_delay: jax.Array = shaped("nactuator")
    actuator_dynprm: jax.Array = shaped("nactuator", 10)
    actuator_dyntype: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_forcelimited: np.ndarray = static_field(shape=("nactuator",), dtype="bool")
    actuator_forcerange: jax.Array = shaped("nactuator", 2)
    actuator_gainprm: jax.Array = shaped("nactuator", 10)
    actuator_gaintype: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_gear: jax.Array = shaped("nout", 6)
    actuator_group: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_history: np.ndarray = static_field(shape=("nactuator", 2), dtype="int32")
    actuator_historyadr: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_length0: jax.Array = shaped("nout")
    actuator_lengthrange: jax.Array = shaped("nout", 2)
    actuator_outadr: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_outnum: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    actuator_trnid: np.ndarray = static_field(shape=("nactuator", 2), dtype="int32")
    actuator_trntype: np.ndarray = static_field(shape=("nactuator",), dtype="int32")
    # body
    body_conaffinity: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_contype: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_dofadr: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_dofnum: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_geomadr: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_geomnum: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_gravcomp: jax.Array = shaped("nbody")
    body_inertia: jax.Array = shaped("nbody", 3)
    body_invweight0: jax.Array = shaped("nbody", 2)
    body_ipos: jax.Array = shaped("nbody", 3)
    body_iquat: jax.Array = shaped("nbody", 4)
    body_jntadr: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_jntnum: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_margin: jax.Array = shaped("nbody")
    body_mass: jax.Array = shaped("nbody")
    body_mocapid: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_parentid: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_pos: jax.Array = shaped("nbody", 3)
    body_quat: jax.Array = shaped("nbody", 4)
    body_rootid: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_sameframe: np.ndarray = static_field(shape=("nbody",), dtype="uint8")
    body_simple: np.ndarray = static_field(shape=("nbody",), dtype="uint8")
    body_subtreemass: jax.Array = shaped("nbody")
    body_treeid: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    body_weldid: np.ndarray = static_field(shape=("nbody",), dtype="int32")
    # cam
    cam_bodyid: np.ndarray = static_field(shape=("ncam",), dtype="int32")
    cam_fovy: jax.Array = shaped("ncam")
    cam_intrinsic: jax.Array = shaped("ncam", 4)
    cam_mat0: jax.Array = shaped("ncam", 9)
    cam_mode: np.ndarray = static_field(shape=("ncam",), dtype="int32")
    cam_pos: jax.Array = shaped("ncam", 3)
    cam_pos0: jax.Array = shaped("ncam", 3)
    cam_poscom0: jax.Array = shaped("ncam", 3)
    cam_projection: np.ndarray = static_field(shape=("ncam",), dtype="int32")  # 0 perspective, 1 orthographic
    cam_quat: jax.Array = shaped("ncam", 4)
    cam_resolution: np.ndarray = static_field(shape=("ncam", 2), dtype="int32")
    cam_sensorsize: jax.Array = shaped("ncam", 2)
    cam_targetbodyid: np.ndarray = static_field(shape=("ncam",), dtype="int32")
    # dof
    dof_M0: jax.Array = shaped("nv")
    dof_Madr: np.ndarray = static_field(shape=("nv",), dtype="int32")
    dof_armature: jax.Array = shaped("nv")
    dof_bodyid: np.ndarray = static_field(shape=("nv",), dtype="int32")
    dof_damping: jax.Array = shaped("nv")
    dof_dampingpoly: jax.Array = shaped("nv", 2)
    dof_frictionloss: jax.Array = shaped("nv")
    dof_invweight0: jax.Array = shaped("nv")
    dof_jntid: np.ndarray = static_field(shape=("nv",), dtype="int32")
    dof_length: jax.Array = shaped("nv")
    dof_parentid: np.ndarray = static_field(shape=("nv",), dtype="int32")
    dof_simplenum: np.ndarray = static_field(shape=("nv",), dtype="int32")
    dof_solimp: jax.Array = shaped("nv", 5)
    dof_solref: jax.Array = shaped("nv", 2)
    dof_treeid: np.ndarray = static_field(shape=("nv",), dtype="int32")
    # eq
    eq_active0: np.ndarray = static_field(shape=("neq",), dtype="bool")
    eq_data: jax.Array = shaped("neq", 12)
    eq_obj1id: np.ndarray = static_field(shape=("neq",), dtype="int32")
    eq_obj2id: np.ndarray = static_field(shape=("neq",), dtype="int32")
    eq_objtype: np.ndarray = static_field(shape=("neq",), dtype="int32")
    eq_solimp: jax.Array = shaped("neq", 5)
    eq_solref: jax.Array = shaped("neq", 2)
    eq_type: np.ndarray = static_field(shape=("neq",), dtype="int32")
    # exclude
    exclude_signature: np.ndarray = static_field(shape=("nexclude",), dtype="int32")
    # flex (mjModel's flex_* / flexedge_* fields that mjx_lite's flexes use; pipeline/flex.py). Vertex v of flex f
    # is global vertex flex_vertadr[f] + v, attached to body flex_vertbodyid (its offset flex_vert in that body's
    # frame, zero for vertex bodies); flex_edge holds local vertex ids; flex_elem (flat) holds dim + 1 local
    # vertex ids per element from flex_elemdataadr[f]
    flex_conaffinity: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_condim: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_contype: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_friction: jax.Array = shaped("nflex", 3)
    flex_gap: jax.Array = shaped("nflex")
    flex_margin: jax.Array = shaped("nflex")
    flex_priority: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_selfcollide: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_solimp: jax.Array = shaped("nflex", 5)
    flex_solmix: jax.Array = shaped("nflex")
    flex_solref: jax.Array = shaped("nflex", 2)
    flex_centered: np.ndarray = static_field(shape=("nflex",), dtype="bool")
    flex_damping: jax.Array = shaped("nflex")
    flex_dim: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_edge: np.ndarray = static_field(shape=("nflexedge", 2), dtype="int32")
    flex_edgeadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_edgedamping: jax.Array = shaped("nflex")
    flex_edgeequality: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_edgenum: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_edgestiffness: jax.Array = shaped("nflex")
    flex_elem: np.ndarray = static_field(shape=("nflexelemdata",), dtype="int32")
    flex_elemadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_elemdataadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_elemnum: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    # dim 3: each tetrahedron's layer (0 on the surface, then its distance from it across shared faces; 0 for dim 1
    # and 2); the elements below flex_activelayers collide with geoms (MuJoCo's flex BVH holds only those)
    flex_elemlayer: np.ndarray = static_field(shape=("nflexelem",), dtype="int32")
    flex_activelayers: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_interp: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    # interpolated flexes (flex_interp 1 trilinear, 2 quadratic; flex_interp.py): their nodes (from
    # flex_nodeadr[f], flex_nodenum[f] of them) on bodies flex_nodebodyid at offsets flex_node (zero on a node body),
    # the cells per axis flex_cellnum, and each vertex's parametric coordinates flex_vert0 in the flex's bounding box
    # (static: they fix the interpolation weights); flex_vertbodyid is -1 on their vertices, as in MuJoCo
    flex_nodeadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_nodenum: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_nodebodyid: np.ndarray = static_field(shape=("nflexnode",), dtype="int32")
    flex_node: jax.Array = shaped("nflexnode", 3)
    flex_node0: jax.Array = shaped("nflexnode", 3)  # world positions of the nodes at qpos0 (the elastic reference)
    flex_cellnum: np.ndarray = static_field(shape=("nflex", 3), dtype="int32")
    flex_vert0: np.ndarray = static_field(shape=("nflexvert", 3), dtype="float64")
    flex_radius: jax.Array = shaped("nflex")
    # flex appearance (the renderer's; mjModel's names): group, colour (float32 values), and material (-1: none),
    # which MuJoCo 4.0 stores per element (each element of a flex holds its flex's material)
    flex_group: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_matid: np.ndarray = static_field(shape=("nflexelem",), dtype="int32")
    flex_rgba: jax.Array = shaped("nflex", 4)
    flex_rigid: np.ndarray = static_field(shape=("nflex",), dtype="bool")
    flex_vert: jax.Array = shaped("nflexvert", 3)
    flex_vertadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_vertbodyid: np.ndarray = static_field(shape=("nflexvert",), dtype="int32")
    flex_vertnum: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flexedge_invweight0: jax.Array = shaped("nflexedge")
    flexedge_length0: jax.Array = shaped("nflexedge")
    flexedge_rigid: np.ndarray = static_field(shape=("nflexedge",), dtype="bool")
    # flex elasticity (<elasticity>, pipeline/flex.py): element f-local edge ids (dim 2: 3, dim 3: 6 per element,
    # from flex_elemedgeadr[f]); per element the upper triangle of its edge metric (21 values from
    # flex_stiffnessadr[f], stride 21 for dim 2 and 24 for dim 3; -1: no elasticity); per edge of a bending flex
    # (dim 2) the 4 x 4 cotangent matrix and the curved-reference coefficient (17 values from flex_bendingadr[f]) and
    # the two vertices opposite the edge (flex_edgeflap, -1 on a boundary)
    flex_elemedge: np.ndarray = static_field(shape=("nflexelemedge",), dtype="int32")
    flex_elemedgeadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_stiffness: jax.Array = shaped("nflexstiffness")
    flex_stiffnessadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_bending: jax.Array = shaped("nflexbending")
    flex_bendingadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_edgeflap: np.ndarray = static_field(shape=("nflexedge", 2), dtype="int32")
    # elastic rods (dim 1, young > 0): flex_bending holds the hinge count, then 10 values per interior vertex
    # (mjcf/flex.py ROD_STRIDE); their reference frames and twists start at flex_plasticadr in Data.plastic (-1: none)
    flex_plasticadr: np.ndarray = static_field(shape=("nflex",), dtype="int32")
    flex_rodframe0: jax.Array = shaped("nflex", 6)  # rods: first edge's reference frame (t, u) at qpos0
    flexedge_twistdof: np.ndarray = static_field(shape=("nflexedge",), dtype="int32")  # rod twist dof; -1: none
    # geom
    geom_aabb: jax.Array = shaped("ngeom", 6)
    geom_adhesion: jax.Array = shaped("ngeom")
    geom_bodyid: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_conaffinity: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_condim: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_contype: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_dataid: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    # sdf geoms: (plugin name, attribute values) of each geom's SDF plugin (mjcf/plugins.py), None for other geoms;
    # static (the plugin's configuration also makes its mesh); empty for models without SDF geoms
    geom_sdf: tuple = static_field(())
    geom_fluid: jax.Array = shaped("ngeom", 12)
    geom_friction: jax.Array = shaped("ngeom", 3)
    geom_gap: jax.Array = shaped("ngeom")
    geom_group: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_margin: jax.Array = shaped("ngeom")
    geom_matid: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_pos: jax.Array = shaped("ngeom", 3)
    geom_priority: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    geom_quat: jax.Array = shaped("ngeom", 4)
    geom_rbound: jax.Array = shaped("ngeom")
    geom_rgba: jax.Array = shaped("ngeom", 4)
    geom_sameframe: np.ndarray = static_field(shape=("ngeom",), dtype="uint8")
    geom_size: jax.Array = shaped("ngeom", 3)
    geom_solimp: jax.Array = shaped("ngeom", 5)
    geom_solmix: jax.Array = shaped("ngeom")
    geom_solref: jax.Array = shaped("ngeom", 2)
    geom_surfacevel: jax.Array = shaped("ngeom", 6)
    geom_type: np.ndarray = static_field(shape=("ngeom",), dtype="int32")
    # hfield
    hfield_adr: np.ndarray = static_field(shape=("nhfield",), dtype="int32")
    hfield_data: jax.Array = shaped("nhfielddata")
    hfield_ncol: np.ndarray = static_field(shape=("nhfield",), dtype="int32")
    hfield_nrow: np.ndarray = static_field(shape=("nhfield",), dtype="int32")
    hfield_size: jax.Array = shaped("nhfield", 4)
    # jnt
    jnt_actfrclimited: np.ndarray = static_field(shape=("njnt",), dtype="bool")
    jnt_actfrcrange: jax.Array = shaped("njnt", 2)
    jnt_actgravcomp: np.ndarray = static_field(shape=("njnt",), dtype="bool")
    jnt_actuatorid: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    jnt_axis: jax.Array = shaped("njnt", 3)
    jnt_bodyid: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    jnt_dofadr: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    jnt_group: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    jnt_limited: np.ndarray = static_field(shape=("njnt",), dtype="bool")
    jnt_margin: jax.Array = shaped("njnt")
    jnt_plasticadr: np.ndarray = static_field(shape=("njnt",), dtype="int32")  # in Data.plastic; -1: elastic
    jnt_pos: jax.Array = shaped("njnt", 3)
    jnt_qposadr: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    jnt_range: jax.Array = shaped("njnt", 2)
    jnt_solimp: jax.Array = shaped("njnt", 5)
    jnt_solref: jax.Array = shaped("njnt", 2)
    jnt_springyield: jax.Array = shaped("njnt")
    jnt_stiffness: jax.Array = shaped("njnt")
    jnt_stiffnesspoly: jax.Array = shaped("njnt", 2)
    jnt_type: np.ndarray = static_field(shape=("njnt",), dtype="int32")
    # key
    key_act: jax.Array = shaped("nkey", "na")
    key_ctrl: jax.Array = shaped("nkey", "nu")
    key_mpos: jax.Array = shaped("nkey", "nmocap*3")
    key_mquat: jax.Array = shaped("nkey", "nmocap*4")
    key_plastic: jax.Array = shaped("nkey", "nplastic")
    key_qpos: jax.Array = shaped("nkey", "nq")
    key_qvel: jax.Array = shaped("nkey", "nv")
    key_time: jax.Array = shaped("nkey")
    # light (mjModel's light_* fields; the renderer uses the colours, attenuation, cutoff, exponent, active and
    # castshadow; intensity, range, bulbradius, softness and texid are kept as MuJoCo compiles them)
    light_active: np.ndarray = static_field(shape=("nlight",), dtype="bool")
    light_ambient: jax.Array = shaped("nlight", 3)
    light_attenuation: jax.Array = shaped("nlight", 3)
    light_bodyid: np.ndarray = static_field(shape=("nlight",), dtype="int32")
    light_bulbradius: jax.Array = shaped("nlight")
    light_castshadow: np.ndarray = static_field(shape=("nlight",), dtype="bool")
    light_cutoff: jax.Array = shaped("nlight")
    light_diffuse: jax.Array = shaped("nlight", 3)
    light_dir: jax.Array = shaped("nlight", 3)
    light_dir0: jax.Array = shaped("nlight", 3)
    light_exponent: jax.Array = shaped("nlight")
    light_intensity: jax.Array = shaped("nlight")
    light_mode: np.ndarray = static_field(shape=("nlight",), dtype="int32")
    light_pos: jax.Array = shaped("nlight", 3)
    light_pos0: jax.Array = shaped("nlight", 3)
    light_poscom0: jax.Array = shaped("nlight", 3)
    light_range: jax.Array = shaped("nlight")
    light_softness: jax.Array = shaped("nlight")
    light_specular: jax.Array = shaped("nlight", 3)
    light_targetbodyid: np.ndarray = static_field(shape=("nlight",), dtype="int32")
    light_texid: np.ndarray = static_field(shape=("nlight",), dtype="int32")
    light_type: np.ndarray = static_field(shape=("nlight",), dtype="int32")
    # material (mat_texid: texture id per mjtTextureRole, -1 none; `texture=` sets the RGB role; metallic and
    # roughness -1 unless given, as MuJoCo's)
    mat_emission: jax.Array = shaped("nmat")
    mat_metallic: jax.Array = shaped("nmat")
    mat_reflectance: jax.Array = shaped("nmat")
    mat_rgba: jax.Array = shaped("nmat", 4)
    mat_roughness: jax.Array = shaped("nmat")
    mat_shininess: jax.Array = shaped("nmat")
    mat_specular: jax.Array = shaped("nmat")
    mat_texid: np.ndarray = static_field(shape=("nmat", "NTEXROLE"), dtype="int32")
    mat_texrepeat: jax.Array = shaped("nmat", 2)
    mat_texuniform: np.ndarray = static_field(shape=("nmat",), dtype="bool")
    # mesh
    mesh_face: np.ndarray = static_field(shape=("nmeshface", 3), dtype="int32")
    mesh_faceadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_facenum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    # convex hulls (mjcf/mesh.py): local vertex ids (add mesh_vertadr) of each mesh's hull vertices, outward
    # counter-clockwise hull triangles and undirected hull edges; positions come from the traced mesh_vert
    mesh_hulledge: np.ndarray = static_field(shape=("nhulledge", 2), dtype="int32")
    mesh_hulledgeadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_hulledgenum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_hullface: np.ndarray = static_field(shape=("nhullface", 3), dtype="int32")
    mesh_hullfaceadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_hullfacenum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_hullvert: np.ndarray = static_field(shape=("nhullvert",), dtype="int32")
    mesh_hullvertadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_hullvertnum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    # hull polygons (mjcf/mesh.hull_polygons): mesh i's polygons are mesh_polyadr[i] : + mesh_polynum[i]; polygon
    # j's vertex cycle (local ids, counter-clockwise about its outward normal, MuJoCo's start vertex) is
    # mesh_polyvert[mesh_polyvertadr[j] : + mesh_polyvertnum[j]]
    mesh_polyadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_polynum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_polyvert: np.ndarray = static_field(shape=("npolyvert",), dtype="int32")
    mesh_polyvertadr: np.ndarray = static_field(shape=("npoly",), dtype="int32")
    mesh_polyvertnum: np.ndarray = static_field(shape=("npoly",), dtype="int32")
    # octree SDFs (mjcf/sdf_octree.py) of the meshes of sdf geoms without a plugin: mesh i's cells are
    # oct_*[mesh_octadr[i] : + mesh_octnum[i]] (-1 / 0 for other meshes); cell centre and half sizes, children
    # (-1: a leaf), depth and the signed distances at its 8 corners (trilinear in the leaf)
    mesh_octadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_octnum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    oct_aabb: jax.Array = shaped("noct", 6)
    oct_child: np.ndarray = static_field(shape=("noct", 8), dtype="int32")
    oct_coeff: jax.Array = shaped("noct", 8)
    oct_depth: np.ndarray = static_field(shape=("noct",), dtype="int32")
    # BVHs of the meshes of mesh geoms in a model with sdf geoms (collision/mesh_bvh.py: MuJoCo's, node for node; the
    # mesh-SDF collider visits their leaves in MuJoCo's order): mesh i's nodes are sdfbvh_*[mesh_sdfbvhadr[i] : +
    # mesh_sdfbvhnum[i]] (-1 / 0 for other meshes); boxes (centre, half sizes), children (-1: none), leaf faces
    mesh_sdfbvhadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_sdfbvhnum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    sdfbvh_aabb: jax.Array = shaped("nsdfbvh", 6)
    sdfbvh_child: np.ndarray = static_field(shape=("nsdfbvh", 2), dtype="int32")
    sdfbvh_nodeid: np.ndarray = static_field(shape=("nsdfbvh",), dtype="int32")
    mesh_pos: jax.Array = shaped("nmesh", 3)
    mesh_quat: jax.Array = shaped("nmesh", 4)
    mesh_scale: jax.Array = shaped("nmesh", 3)
    mesh_vert: jax.Array = shaped("nmeshvert", 3)
    mesh_vertadr: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    mesh_vertnum: np.ndarray = static_field(shape=("nmesh",), dtype="int32")
    # pair
    pair_adhesion: jax.Array = shaped("npair")
    pair_dim: np.ndarray = static_field(shape=("npair",), dtype="int32")
    pair_friction: jax.Array = shaped("npair", 5)
    pair_gap: jax.Array = shaped("npair")
    pair_geom1: np.ndarray = static_field(shape=("npair",), dtype="int32")
    pair_geom2: np.ndarray = static_field(shape=("npair",), dtype="int32")
    pair_margin: jax.Array = shaped("npair")
    pair_signature: np.ndarray = static_field(shape=("npair",), dtype="int32")
    pair_solimp: jax.Array = shaped("npair", 5)
    pair_solref: jax.Array = shaped("npair", 2)
    pair_solreffriction: jax.Array = shaped("npair", 2)
    # sensor
    sensor_adr: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_cutoff: jax.Array = shaped("nsensor")
    sensor_datatype: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_delay: jax.Array = shaped("nsensor")
    sensor_dim: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_history: np.ndarray = static_field(shape=("nsensor", 2), dtype="int32")
    sensor_historyadr: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_interval: jax.Array = shaped("nsensor", 2)
    sensor_intprm: np.ndarray = static_field(shape=("nsensor", 3), dtype="int32")
    sensor_needstage: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_noise: jax.Array = shaped("nsensor")
    sensor_objid: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_objtype: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_refid: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    sensor_reftype: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    # not MuJoCo's: per sensordata slot, the axis a tactile sensor's slip channel projects on (MuJoCo reads it from
    # mesh_normal, which holds a frame of 3 normals per vertex for the builtin wedge/plate meshes): channel 1 (2) of
    # taxel j of a tactile sensor holds tangent 1 (2) of mesh vertex j in the mesh's principal frame (float32
    # values, as mesh_normal's); zero elsewhere and for meshes without such frames
    sensor_tangent: jax.Array = shaped("nsensordata", 3)
    sensor_type: np.ndarray = static_field(shape=("nsensor",), dtype="int32")
    # not MuJoCo's: (plugin name, parameters) of each plugin sensor, None for others (mjcf/plugins.py; touch_grid:
    # (nchannel, size x, size y, fov x, fov y in degrees, gamma)); static; empty for models without plugin sensors
    sensor_plugincfg: tuple = static_field(())
    # site
    site_bodyid: np.ndarray = static_field(shape=("nsite",), dtype="int32")
    site_dataid: np.ndarray = static_field(shape=("nsite",), dtype="int32")
    site_group: np.ndarray = static_field(shape=("nsite",), dtype="int32")
    site_matid: np.ndarray = static_field(shape=("nsite",), dtype="int32")
    site_pos: jax.Array = shaped("nsite", 3)
    site_quat: jax.Array = shaped("nsite", 4)
    site_rgba: jax.Array = shaped("nsite", 4)
    site_sameframe: np.ndarray = static_field(shape=("nsite",), dtype="uint8")
    site_size: jax.Array = shaped("nsite", 3)
    site_type: np.ndarray = static_field(shape=("nsite",), dtype="int32")
    # skin (visual only: no effect on the physics). MuJoCo's float32 data as float values (traced, so colours and
    # shapes can be randomised); faces and bone vertex ids are local to their skin; skin_texcoordadr -1: none
    skin_boneadr: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_bonebindpos: jax.Array = shaped("nskinbone", 3)
    skin_bonebindquat: jax.Array = shaped("nskinbone", 4)
    skin_bonebodyid: np.ndarray = static_field(shape=("nskinbone",), dtype="int32")
    skin_bonenum: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_bonevertadr: np.ndarray = static_field(shape=("nskinbone",), dtype="int32")
    skin_bonevertid: np.ndarray = static_field(shape=("nskinbonevert",), dtype="int32")
    skin_bonevertnum: np.ndarray = static_field(shape=("nskinbone",), dtype="int32")
    skin_bonevertweight: jax.Array = shaped("nskinbonevert")
    skin_face: np.ndarray = static_field(shape=("nskinface", 3), dtype="int32")
    skin_faceadr: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_facenum: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_group: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_inflate: jax.Array = shaped("nskin")
    skin_matid: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_rgba: jax.Array = shaped("nskin", 4)
    skin_texcoord: jax.Array = shaped("nskintexvert", 2)
    skin_texcoordadr: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_vert: jax.Array = shaped("nskinvert", 3)
    skin_vertadr: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    skin_vertnum: np.ndarray = static_field(shape=("nskin",), dtype="int32")
    # texture: MuJoCo's tex_type (mjtTexture); the procedural description of builtin textures as mjsTexture names
    # it (builtin: mjtBuiltin, 0 for file textures; rgb1, rgb2), from which the renderer draws checkers and
    # gradients. MuJoCo's pixel arrays (tex_data, megabytes per model) are not kept: file textures are not drawn.
    tex_builtin: np.ndarray = static_field(shape=("ntex",), dtype="int32")
    tex_rgb1: jax.Array = shaped("ntex", 3)
    tex_rgb2: jax.Array = shaped("ntex", 3)
    tex_type: np.ndarray = static_field(shape=("ntex",), dtype="int32")
    # tendon
    tendon_actfrclimited: np.ndarray = static_field(shape=("ntendon",), dtype="bool")
    tendon_actfrcrange: jax.Array = shaped("ntendon", 2)
    tendon_actuatorid: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_adr: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_armature: jax.Array = shaped("ntendon")
    tendon_damping: jax.Array = shaped("ntendon")
    tendon_dampingpoly: jax.Array = shaped("ntendon", 2)
    tendon_frictionloss: jax.Array = shaped("ntendon")
    tendon_group: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_invweight0: jax.Array = shaped("ntendon")
    tendon_length0: jax.Array = shaped("ntendon")
    tendon_lengthspring: jax.Array = shaped("ntendon", 2)
    tendon_limited: np.ndarray = static_field(shape=("ntendon",), dtype="bool")
    tendon_margin: jax.Array = shaped("ntendon")
    tendon_num: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_plasticadr: np.ndarray = static_field(shape=("ntendon",), dtype="int32")  # in Data.plastic; -1: elastic
    tendon_range: jax.Array = shaped("ntendon", 2)
    tendon_solimp_fri: jax.Array = shaped("ntendon", 5)
    tendon_solimp_lim: jax.Array = shaped("ntendon", 5)
    tendon_solref_fri: jax.Array = shaped("ntendon", 2)
    tendon_solref_lim: jax.Array = shaped("ntendon", 2)
    tendon_springyield: jax.Array = shaped("ntendon")
    tendon_stiffness: jax.Array = shaped("ntendon")
    tendon_stiffnesspoly: jax.Array = shaped("ntendon", 2)
    tendon_treeid: np.ndarray = static_field(shape=("ntendon", 2), dtype="int32")
    tendon_treenum: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_type: np.ndarray = static_field(shape=("ntendon",), dtype="int32")
    tendon_width: jax.Array = shaped("ntendon")
    # tree
    tree_bodyadr: np.ndarray = static_field(shape=("ntree",), dtype="int32")
    tree_bodynum: np.ndarray = static_field(shape=("ntree",), dtype="int32")
    tree_dofadr: np.ndarray = static_field(shape=("ntree",), dtype="int32")
    tree_dofnum: np.ndarray = static_field(shape=("ntree",), dtype="int32")
    tree_sleep_policy: np.ndarray = static_field(shape=("ntree",), dtype="int32")  # mjtSleepPolicy (pipeline/sleep.py)
    # wrap
    wrap_objid: np.ndarray = static_field(shape=("nwrap",), dtype="int32")
    wrap_prm: jax.Array = shaped("nwrap")
    wrap_type: np.ndarray = static_field(shape=("nwrap",), dtype="int32")
    # qpos0
    qpos0: jax.Array = shaped("nq")
    # qpos
    qpos_spring: jax.Array = shaped("nq")

    def _check_replace(self, changes: dict) -> None:
        if "config" in changes:
            new = changes["config"]
            if not isinstance(new, Config):
                raise TypeError(f"Model.config must be a mjx_lite.Config, not {type(new).__name__}")
            if new.layout() != self.config.layout():
                changed = [f for f, a, b in zip(LAYOUT_FIELDS, new.layout(), self.config.layout()) if a != b]
                raise ValueError(
                    f"Config fields {changed} change the model's contact capacity: use "
                    "`mjx_lite.configure(m, ...)`, which recomputes it, instead of `m.replace(config=...)`"
                )


# ----------------------------------------------------------------------------------------------------------
# Data


def as_arrays(obj, changes: dict) -> dict:
    """`changes` with values given as Python lists, tuples or numbers, or numpy arrays, made jax arrays of the
    replaced field's dtype, so that `d.replace(ctrl=[0.1, 0.2])` works wherever an array does (under `jit` too: a
    list of tracers is stacked). jax arrays (and tracers) pass unchanged."""
    out = changes
    for name, v in changes.items():
        if isinstance(v, (list, tuple, np.ndarray, np.generic, int, float)):
            if out is changes:
                out = dict(changes)
            out[name] = jax.numpy.asarray(v, getattr(getattr(obj, name, None), "dtype", None))
    return out


@pytree_dataclass
class Contact:
    """Padded contact arrays (mjContact), `m.nconmax` rows; `active` marks the real ones."""

    _coerce_replace = as_arrays

    dist: jax.Array = shaped("nconmax")  # signed distance
    pos: jax.Array = shaped("nconmax", 3)  # contact point (midpoint)
    frame: jax.Array = shaped("nconmax", 3, 3)  # rows: normal (geom1 -> geom2), two tangents
    includemargin: jax.Array = shaped("nconmax")  # margin - gap
    friction: jax.Array = shaped("nconmax", 5)
    solref: jax.Array = shaped("nconmax", 2)
    solreffriction: jax.Array = shaped("nconmax", 2)
    solimp: jax.Array = shaped("nconmax", 5)
    dim: jax.Array = shaped("nconmax", dtype="int32")  # condim
    geom: jax.Array = shaped("nconmax", 2, dtype="int32")  # geom ids (-1 on a flex side)
    flex: jax.Array = shaped("nconmax", 2, dtype="int32")  # flex ids (-1 on a geom side)
    vert: jax.Array = shaped("nconmax", 2, dtype="int32")  # flex vertex ids, local to the flex (-1: none)
    elem: jax.Array = shaped("nconmax", 2, dtype="int32")  # flex element ids, local to the flex (-1: none)
    efc_address: jax.Array = shaped("nconmax", dtype="int32")  # first efc row (-1 when inactive)
    adhesion: jax.Array = shaped("nconmax")  # adhesive force along the normal (geoms' sum, priority's, or pair's)
    active: jax.Array = shaped("nconmax", dtype="bool")  # dist < margin and the pair exists


# The state and inputs of Data (MuJoCo's full physics state and the user's inputs): what a step reads that it does
# not compute; everything else is recomputed from these by forward. Copied both ways by `interop`, reset by the
# divergence checks.
STATE_FIELDS = ("time", "qpos", "qvel", "act", "ctrl", "mocap_pos", "mocap_quat", "qacc_warmstart", "qfrc_applied",
                "xfrc_applied", "eq_active", "history", "plastic")  # fmt: skip


@pytree_dataclass
class Data:
    """Simulation state and results (mjData). All fields are traced arrays with declared shapes (see Model).

    `efc_*` arrays are padded to `m.njmax` rows and `contact` to `m.nconmax`; `efc_mask`/`contact.active`
    mark the live rows, `nefc`/`ncon` count them. `warning_number` counts MuJoCo's warnings per environment
    (index by `types.Warning`): contact or constraint overflow, bad qpos/qvel/qacc (divergence, which also
    resets the state as mj_step does), bad ctrl.

    `replace` takes lists, numbers and numpy arrays too (made jax arrays of the field's dtype: `types.as_arrays`).
    """

    _coerce_replace = as_arrays

    # state
    time: jax.Array = shaped()
    qpos: jax.Array = shaped("nq")
    qvel: jax.Array = shaped("nv")
    act: jax.Array = shaped("na")
    history: jax.Array = shaped("nhistory")  # ring buffers of delayed controls and sensors (mjData.history)
    plastic: jax.Array = shaped("nplastic")  # spring references of plastic joints and tendons (mjData.plastic)
    qacc_warmstart: jax.Array = shaped("nv")
    # control
    ctrl: jax.Array = shaped("nu")
    qfrc_applied: jax.Array = shaped("nv")
    xfrc_applied: jax.Array = shaped("nbody", 6)
    eq_active: jax.Array = shaped("neq", dtype="bool")
    mocap_pos: jax.Array = shaped("nmocap", 3)
    mocap_quat: jax.Array = shaped("nmocap", 4)
    # dynamics
    qacc: jax.Array = shaped("nv")
    act_dot: jax.Array = shaped("na")
    # diagnostics
    warning_number: jax.Array = shaped("NWARNING", dtype="int32")
    solver_niter: jax.Array = shaped(dtype="int32")  # the solver's iterations (islands: the most of any island)
    # iterations of each constraint island (MuJoCo's solver_niter[:nisland]; 0 past the last island, and everywhere
    # when islands are disabled or the fused kernel solved the whole system)
    solver_niter_island: jax.Array = shaped("ntree", dtype="int32")
    solver_improvement: jax.Array = shaped()
    # sleeping islands (pipeline/sleep.py): tree_asleep < 0 awake (counting up to -1, ready to sleep), >= 0 asleep (the
    # next tree of its sleeping island's cycle); tree_awake, body_awake (mjtSleepState: -1 static, 0 asleep,
    # 1 awake) and the counts derive from it
    tree_asleep: jax.Array = shaped("ntree", dtype="int32")
    tree_awake: jax.Array = shaped("ntree", dtype="int32")
    body_awake: jax.Array = shaped("nbody", dtype="int32")
    ntree_awake: jax.Array = shaped(dtype="int32")
    nbody_awake: jax.Array = shaped(dtype="int32")
    nv_awake: jax.Array = shaped(dtype="int32")
    solver_gradient: jax.Array = shaped()
    solver_fwdinv: jax.Array = shaped(2)
    energy: jax.Array = shaped(2)  # potential, kinetic
    # position dependent
    xpos: jax.Array = shaped("nbody", 3)
    xquat: jax.Array = shaped("nbody", 4)
    xmat: jax.Array = shaped("nbody", 3, 3)
    xipos: jax.Array = shaped("nbody", 3)
    ximat: jax.Array = shaped("nbody", 3, 3)
    xanchor: jax.Array = shaped("njnt", 3)
    xaxis: jax.Array = shaped("njnt", 3)
    geom_xpos: jax.Array = shaped("ngeom", 3)
    geom_xmat: jax.Array = shaped("ngeom", 3, 3)
    site_xpos: jax.Array = shaped("nsite", 3)
    site_xmat: jax.Array = shaped("nsite", 3, 3)
    cam_xpos: jax.Array = shaped("ncam", 3)
    cam_xmat: jax.Array = shaped("ncam", 3, 3)
    subtree_com: jax.Array = shaped("nbody", 3)
    cdof: jax.Array = shaped("nv", 6)
    cinert: jax.Array = shaped("nbody", 10)
    crb: jax.Array = shaped("nbody", 10)
    flexvert_xpos: jax.Array = shaped("nflexvert", 3)
    flexedge_J: jax.Array = shaped("nflexedge", "nv")  # dense
    flexedge_length: jax.Array = shaped("nflexedge")
    ten_wrapadr: jax.Array = shaped("ntendon", dtype="int32")
    ten_wrapnum: jax.Array = shaped("ntendon", dtype="int32")
    ten_J: jax.Array = shaped("ntendon", "nv")  # dense
    ten_length: jax.Array = shaped("ntendon")
    wrap_obj: jax.Array = shaped("nwrap", 2, dtype="int32")
    wrap_xpos: jax.Array = shaped("nwrap", 6)
    actuator_length: jax.Array = shaped("nout")
    actuator_moment: jax.Array = shaped("nout", "nv")  # dense
    # (nv, nv) dense, or (nM,) tree-sparse (`sparse_mass_matrix`, see pipeline/inertia.py): the "qM" dimension
    qM: jax.Array = shaped("qM")  # noqa: N815
    qLD: jax.Array = shaped("nM")  # L'DL factor of qM: its tree entries in elimination order (use solve_m)  # noqa: N815
    qLDiagInv: jax.Array = shaped("nv")  # noqa: N815
    # collisions and constraints (padded)
    ncon: jax.Array = shaped(dtype="int32")
    contact: Contact
    nefc: jax.Array = shaped(dtype="int32")
    efc_type: jax.Array = shaped("njmax", dtype="int32")  # ConstraintType
    efc_id: jax.Array = shaped("njmax", dtype="int32")
    efc_mask: jax.Array = shaped("njmax", dtype="bool")
    # dense (njmax, nv), or sparse (njmax, w): row i's value k belongs to column efc_J_colind[i, k] (columns may
    # repeat within a row, values add; padding: value 0 at column 0); efc_J_colind is (njmax, 0) when dense
    efc_J: jax.Array = shaped("njmax", "efc_ncol")
    efc_J_colind: jax.Array = shaped("njmax", "efc_w", dtype="int32")
    efc_pos: jax.Array = shaped("njmax")
    efc_margin: jax.Array = shaped("njmax")
    efc_frictionloss: jax.Array = shaped("njmax")
    efc_diagA: jax.Array = shaped("njmax")  # noqa: N815
    efc_D: jax.Array = shaped("njmax")  # noqa: N815
    efc_R: jax.Array = shaped("njmax")  # noqa: N815
    efc_vel: jax.Array = shaped("njmax")
    efc_aref: jax.Array = shaped("njmax")
    efc_b: jax.Array = shaped("njmax")
    efc_force: jax.Array = shaped("njmax")
    efc_state: jax.Array = shaped("njmax", dtype="int32")  # ConstraintState
    # velocity dependent
    actuator_velocity: jax.Array = shaped("nout")
    cvel: jax.Array = shaped("nbody", 6)
    cdof_dot: jax.Array = shaped("nv", 6)
    qfrc_bias: jax.Array = shaped("nv")
    qfrc_spring: jax.Array = shaped("nv")
    qfrc_damper: jax.Array = shaped("nv")
    qfrc_gravcomp: jax.Array = shaped("nv")
    qfrc_fluid: jax.Array = shaped("nv")
    qfrc_adhesion: jax.Array = shaped("nv")  # the adhesive contacts' constant pull along their normals
    qfrc_passive: jax.Array = shaped("nv")
    ten_velocity: jax.Array = shaped("ntendon")
    flexedge_velocity: jax.Array = shaped("nflexedge")
    subtree_linvel: jax.Array = shaped("nbody", 3)
    subtree_angmom: jax.Array = shaped("nbody", 3)
    # acceleration / force dependent
    actuator_force: jax.Array = shaped("nout")
    qfrc_actuator: jax.Array = shaped("nv")
    qfrc_smooth: jax.Array = shaped("nv")
    qacc_smooth: jax.Array = shaped("nv")
    qfrc_constraint: jax.Array = shaped("nv")
    qfrc_inverse: jax.Array = shaped("nv")
    cacc: jax.Array = shaped("nbody", 6)
    cfrc_int: jax.Array = shaped("nbody", 6)
    cfrc_ext: jax.Array = shaped("nbody", 6)
    sensordata: jax.Array = shaped("nsensordata")


# ----------------------------------------------------------------------------------------------------------
# Declared shapes


def field_shape(cls: type, name: str) -> tuple[tuple, str | None]:
    """(declared dims, declared dtype) of field `name` of a pytree class (Model, Data, Contact, Option, ...)."""
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    if "shape" not in f.metadata:
        raise KeyError(f"{cls.__name__}.{name} has no declared shape")
    return f.metadata["shape"], f.metadata.get("dtype")


def shaped_fields(cls: type) -> tuple[str, ...]:
    """Names of the fields of `cls` that declare a shape, in declaration order."""
    return tuple(f.name for f in dataclasses.fields(cls) if "shape" in f.metadata)


def sparse_mass_matrix(m: Model) -> bool:
    """Static layout of qM / qLD (`m.config.mass_matrix`; "auto": tree-sparse when nv > SPARSE_NV)."""
    layout = m.config.mass_matrix
    return layout == "sparse" or (layout == "auto" and m.nv > SPARSE_NV)


def qm_shape(m: Model) -> tuple[int, ...]:
    """Shape of Data.qM and Data.qLD: (nM,) tree-sparse or (nv, nv) dense (see `sparse_mass_matrix`)."""
    return (m.nM,) if sparse_mass_matrix(m) else (m.nv, m.nv)


def body_chain_dofs(m: Model) -> tuple[np.ndarray, ...]:
    """Static: for each body, the dofs that move it (its own and all its ancestors'), ascending."""

    def build(m):
        parent, adr, num = (np.asarray(x) for x in (m.body_parentid, m.body_dofadr, m.body_dofnum))
        out = [np.zeros(0, np.int64)]
        for b in range(1, m.nbody):  # parents precede children
            own = np.arange(adr[b], adr[b] + num[b], dtype=np.int64) if num[b] else np.zeros(0, np.int64)
            out.append(np.sort(np.concatenate([out[parent[b]], own])))
        return tuple(out[: m.nbody])

    return static_memo(m, "types_body_chain_dofs", build)


def tendon_dofs(m: Model) -> tuple[np.ndarray, ...]:
    """Static: for each tendon, the dofs its Jacobian ten_J can be nonzero on (joint wraps' dofs; for spatial
    tendons the dofs moving the bodies of its sites and wrapping geoms), ascending."""

    def build(m):
        chains = body_chain_dofs(m)
        wtype, wobj = np.asarray(m.wrap_type), np.asarray(m.wrap_objid)
        out = []
        for t in range(m.ntendon):
            a, n = int(np.asarray(m.tendon_adr)[t]), int(np.asarray(m.tendon_num)[t])
            dofs = [np.zeros(0, np.int64)]
            for w in range(a, a + n):
                if wtype[w] == WrapType.JOINT:
                    dofs.append(np.asarray([np.asarray(m.jnt_dofadr)[wobj[w]]], np.int64))
                elif wtype[w] == WrapType.SITE:
                    dofs.append(chains[np.asarray(m.site_bodyid)[wobj[w]]])
                elif wtype[w] in (WrapType.SPHERE, WrapType.CYLINDER):
                    dofs.append(chains[np.asarray(m.geom_bodyid)[wobj[w]]])
            out.append(np.unique(np.concatenate(dofs)).astype(np.int64))
        return tuple(out)

    return static_memo(m, "types_tendon_dofs", build)


def efc_row_width(m: Model) -> int:
    """Static width of the sparse efc_J rows: the most columns one constraint row needs (contacts, connect and weld:
    the dof chains of two bodies, 2 x the longest; tendon equalities: two tendons' dofs; at least 1)."""

    def build(m):
        longest = max((len(c) for c in body_chain_dofs(m)), default=0)
        tendon = max((len(t) for t in tendon_dofs(m)), default=0)
        return max(1, (1 + _flex_elem_width(m)) * longest + _rod_extra(m, longest), 2 * tendon)

    return static_memo(m, "types_efc_row_width", build)


def _rod_extra(m: Model, longest: int) -> int:
    """Extra columns of a contact row of an elastic rod that can touch a geom (pipeline/rod_contact.py): its
    element's two vertex bodies' chains and the edge's twist dof (2 longest + 1), else 0."""
    if not m.nflex:
        return 0
    gct, gca = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
    tdof = np.asarray(m.flexedge_twistdof)
    for f in range(m.nflex):
        adr, num = int(np.asarray(m.flex_edgeadr)[f]), int(np.asarray(m.flex_edgenum)[f])
        fct, fca = int(np.asarray(m.flex_contype)[f]), int(np.asarray(m.flex_conaffinity)[f])
        if np.any(tdof[adr : adr + num] >= 0) and np.any((gct & fca) | (fct & gca)):
            return (4 if rods_on_moving_body(m) else 2) * longest + 1
    return 0


def rods_on_moving_body(m: Model) -> bool:
    """Static: some elastic rod's vertices are carried by a moving body (its vertex bodies' parent, or the body its
    pinned vertices are on, is not welded to the world): its contact rows take that body's rotation off the flex
    side (pipeline/rod_contact.py), one more chain per row."""

    def build(m):
        tdof = np.asarray(m.flexedge_twistdof)
        dofnum, parent, weld = (np.asarray(x) for x in (m.body_dofnum, m.body_parentid, m.body_weldid))
        jtype, jbody = np.asarray(m.jnt_type), np.asarray(m.jnt_bodyid)
        vb = np.asarray(m.flex_vertbodyid)
        for f in range(m.nflex):
            adr, num = int(np.asarray(m.flex_edgeadr)[f]), int(np.asarray(m.flex_edgenum)[f])
            if not np.any(tdof[adr : adr + num] >= 0):
                continue
            vadr, vnum = int(np.asarray(m.flex_vertadr)[f]), int(np.asarray(m.flex_vertnum)[f])
            for b in vb[vadr : vadr + vnum]:  # (as mjcf/flex.py: slide-only vertex bodies carried by their parent)
                carrier = parent[b] if dofnum[b] and np.all(jtype[jbody == b] == 2) else b
                if weld[carrier] != 0:
                    return True
        return False

    return static_memo(m, "types_rods_on_moving_body", build)


def _flex_elem_width(m: Model) -> int:
    """Bodies on the flex side of a contact row: dim + 1 where a height field or a convex geom (sphere, capsule,
    ellipsoid, cylinder, box, mesh) can touch the elements of a flex (collision/flex.py: the element's vertex bodies,
    weighted), 2 (dim + 1) where a flex collides with itself or another flex (both sides' vertex bodies), the nodes of
    a cell (8 trilinear, 27 quadratic) where an interpolated flex collides with a geom, else 1."""
    if not m.nflex:
        return 1
    gt = np.asarray(m.geom_type)
    sel = (gt >= GeomType.HFIELD) & (gt <= GeomType.MESH)
    gct, gca = np.asarray(m.geom_contype)[sel], np.asarray(m.geom_conaffinity)[sel]
    out = 1
    pl = gt == GeomType.PLANE
    pct, pca = np.asarray(m.geom_contype)[pl], np.asarray(m.geom_conaffinity)[pl]
    for f in range(m.nflex):
        dim, fct, fca = int(m.flex_dim[f]), int(m.flex_contype[f]), int(m.flex_conaffinity[f])
        if np.any((gct & fca) | (fct & gca)):
            out = max(out, dim + 1)
        interp = abs(int(np.asarray(m.flex_interp)[f]))
        if interp and np.any(np.concatenate([(gct & fca) | (fct & gca), (pct & fca) | (fct & pca)])):
            out = max(out, (interp + 1) ** 3)  # (an interpolated flex: a contact moves the nodes of its cell)
    ct, ca = np.asarray(m.flex_contype), np.asarray(m.flex_conaffinity)
    for f1 in range(m.nflex):  # flex-flex contacts (collision/flex_flex.py): an element on both sides
        for f2 in range(f1, m.nflex):
            if (f1 == f2 and _flex_self_collides(m, f1)) or (f1 != f2 and (ct[f1] & ca[f2] or ct[f2] & ca[f1])):
                side = max(int(m.flex_dim[f1]), int(m.flex_dim[f2])) + 1
                nodes = max(((abs(int(np.asarray(m.flex_interp)[f])) + 1) ** 3 for f in (f1, f2)
                             if int(np.asarray(m.flex_interp)[f])), default=0)  # fmt: skip
                out = max(out, 2 * max(side, nodes))  # (interpolated: the nodes of a cell on each side)
    return out


FLEX_MAX_ELEM_PAIRS = 4_000_000  # element pairs of a flex with itself or another flex beyond which their contacts
# are refused (collision/flex_flex.py's dense table of candidate pairs)


def _flex_self_collides(m: Model, f: int) -> bool:
    """Static: flex f can collide with itself (not rigid, contype & conaffinity, selfcollide != 'none')."""
    return bool(not np.asarray(m.flex_rigid)[f] and int(m.flex_contype[f]) & int(m.flex_conaffinity[f])
                and int(m.flex_selfcollide[f]) != 0)  # fmt: skip


def sparse_efc_jacobian(m: Model) -> bool:
    """Static layout of efc_J (`m.config.efc_jacobian`): "sparse" / "dense", or "auto": sparse when
    nv >= EFC_SPARSE_FACTOR * efc_row_width(m) and the solver is not PGS (whose dual matrix J M^-1 J' is dense).

    Raises ValueError for "sparse" with the PGS solver.
    """
    mode = m.config.efc_jacobian
    pgs = int(m.opt.solver) == int(SolverType.PGS)
    if mode == "sparse" and pgs:
        raise ValueError(
            "Config.efc_jacobian='sparse' is not supported by the PGS solver (its dual matrix J M^-1 J' is dense): "
            "use mjx_lite.configure(m, efc_jacobian='auto') or 'dense', or the CG / Newton solver"
        )
    return mode == "sparse" or (mode == "auto" and not pgs and m.nv >= EFC_SPARSE_FACTOR * efc_row_width(m))


def requested_capacities(m: Model) -> tuple[int, int]:
    """(nconmax, njmax) caps asked for (-1: none): `m.config.nconmax` / `njmax` where not None, else the MJCF's
    `<size nconmax njmax>` (`m.size_nconmax` / `size_njmax`)."""
    c = m.config.nconmax if m.config.nconmax is not None else m.size_nconmax
    j = m.config.njmax if m.config.njmax is not None else m.size_njmax
    return int(c), int(j)


def sizes(m: Model) -> dict[str, int]:
    """The named dimensions of `m` used in declared shapes: SIZE_FIELDS, nconmax, njmax, NWARNING, and the efc_J
    columns: efc_ncol (nv dense, w sparse) and efc_w (0 dense, w sparse)."""
    out = {k: int(getattr(m, k)) for k in SIZE_FIELDS}
    out.update(nconmax=int(m.nconmax), njmax=int(m.njmax), NWARNING=NWARNING, NTEXROLE=NTEXROLE, nplugin=int(m.nplugin))
    w = efc_row_width(m) if sparse_efc_jacobian(m) else 0
    out.update(efc_ncol=w or int(m.nv), efc_w=w)
    return out


def resolve_shape(m: Model, dims: tuple, extra: dict | None = None) -> tuple[int, ...]:
    """Concrete shape of declared `dims` for model `m` ("qM" expands to `qm_shape(m)`; names may be products such
    as "nmocap*3"; `extra` adds named dimensions that are not Model sizes, e.g. hull table lengths)."""
    env = sizes(m)
    env.update(extra or {})
    out: list[int] = []
    for d in dims:
        if isinstance(d, int):
            out.append(d)
        elif d == "qM":
            out.extend(qm_shape(m))
        else:
            v = 1
            for factor in d.split("*"):
                factor = factor.strip()
                v *= int(factor) if factor.isdigit() else env[factor]
            out.append(v)
    return tuple(out)
