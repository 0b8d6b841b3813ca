"""What every MJCF attribute the loader parses does in mjx_lite: the audit behind "nothing silently ignored".

`EFFECTS[key][attribute]` for every element key of `schema.SCHEMA` (the `default/...` keys take their element's)
and every attribute it lists is one of:

  Model(fields)       compiled into these Model fields (`opt.x` / `stat.x` for mjOption / mjStatistic), which the
                      runtime (pipeline, collision, solver, sensors, renderer) reads: it changes the simulation or
                      the rendering as in MuJoCo;
  Compiler(what)      read by the compiler to build other fields (frames, units, inertia, defaults, references);
  Refused(when)       the loader raises MJCFUnsupportedError naming it when it is set so that MuJoCo would simulate
                      something mjx_lite does not (`value`: one such setting, used by the tests);
  NoEffect(why)       no effect on mjx_lite's outputs, and none on MuJoCo's simulation either (names, visual-only
                      settings, compiler bookkeeping, user data) or only through a feature that is refused elsewhere.

tests/test_mjcf_effects.py checks the table against the schema (an attribute missing here is parsed-but-unaudited
and fails the test), that every Model field named exists and is read by the runtime, that every refusal is raised,
and, for the NoEffect entries that name a `probe`, that MuJoCo's own trajectory does not change with the setting.
"""

from __future__ import annotations

import dataclasses

from mjx_lite.mjcf import plugins
from mjx_lite.mjcf import schema as sc


@dataclasses.dataclass(frozen=True)
class Model:
    fields: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Compiler:
    what: str


@dataclasses.dataclass(frozen=True)
class Refused:
    when: str
    value: str  # an attribute value the loader refuses (as written in MJCF)
    also: str = ""  # other attributes MuJoCo requires with that value (the refusal may name one of them)


@dataclasses.dataclass(frozen=True)
class NoEffect:
    why: str
    probe: str | None = None  # a value whose (non-)effect on MuJoCo's trajectory the tests check


def model(*fields: str) -> Model:
    return Model(tuple(fields))


NAME = NoEffect("a name (ids are by position; names are kept in Model.names)")
CLASS = Compiler("default class of the element")
USER = NoEffect("user data: MuJoCo stores it for the user and never reads it")
GROUP = NoEffect("visualisation group (mjvOption's group filters), not read by the simulation")
ORIENT = {k: Compiler("orientation of the element's frame (converted to a quaternion)")
          for k in ("quat", "axisangle", "xyaxes", "zaxis", "euler")}  # fmt: skip
RGBA = NoEffect("colour: visual only")
MATERIAL = Compiler("material reference (geom_matid / site_matid: visual only)")
_SOL = "solver parameters of the constraint rows"

_COMPILER = {
    "alignfree": Refused("alignfree='true' (free joints aligned to the inertia frame)", "true"),
    "angle": Compiler("unit of angles (degree/radian)"),
    "assetdir": Compiler("directory of asset files"),
    "autolimits": Compiler("limited='auto' resolution from ranges"),
    "balanceinertia": Compiler("inertia correction"),
    "boundinertia": Compiler("lower bound of body inertia"),
    "boundmass": Compiler("lower bound of body mass"),
    "conflict": Compiler("name-conflict policy of model attachment (mjcf/compose.py)"),
    "coordinate": NoEffect("MuJoCo 4.0 accepts only 'local', the one convention"),
    "discardvisual": Compiler("drops visual-only geoms (contype = conaffinity = 0) as MuJoCo does"),
    "eulerseq": Compiler("sequence of euler angles"),
    "fitaabb": Compiler("primitive geoms fitted to meshes by their bounding box"),
    "fusestatic": Compiler("static bodies fused into their parents (mjcf/fuse.py)"),
    "inertiafromgeom": Compiler("body inertia from its geoms"),
    "inertiagrouprange": Compiler("geom groups that contribute inertia"),
    "meshdir": Compiler("directory of mesh files"),
    "passthrough": NoEffect("texture pass-through of the model editor (visual)"),
    "savecanonical": NoEffect("how MuJoCo saves XML; never read when loading"),
    "savecompiled": NoEffect("how MuJoCo saves XML; never read when loading"),
    "saveinertial": NoEffect("how MuJoCo saves XML; never read when loading"),
    "settotalmass": Compiler("rescales body masses and inertias"),
    "strippath": Compiler("asset file names without their directories"),
    "texturedir": Compiler("directory of texture files"),
    "usethread": NoEffect("threads of MuJoCo's own compiler: the compiled model is the same"),
}

_LENGTHRANGE = {k: Compiler("actuator lengthrange computation (mj_setLengthRange): actuator_lengthrange")
                for k in ("accel", "interval", "inttotal", "maxforce", "mode", "timeconst", "timestep", "tolrange",
                          "useexisting", "uselimit")}  # fmt: skip

_OPTION = {
    "actuatorgroupdisable": model("opt.disableactuator"),
    "ccd_iterations": Refused("below MuJoCo's default of 35 in a model where MuJoCo runs GJK/EPA (convex pairs that"
                              " may collide, height fields, flexes, geom distance and enclosed insidesite sensors),"
                              " which stops after ccd_iterations; mjx_lite's colliders give the converged contact "
                              "at any setting: on curved pairs within 3e-2 of MuJoCo's normal components at 35, up "
                              "to 1.3 apart at 10. Without such pairs it has no effect in MuJoCo and loads; with "
                              "nativeccd disabled it bounds libccd's MPR, which mjx_lite runs with the same bound "
                              "(collision/mpr.py), so only enclosed insidesite sensors are refused", "10"),
    "ccd_tolerance": model("opt.ccd_tolerance"),
    "cone": model("opt.cone"),
    "density": model("opt.density"),
    "gravity": model("opt.gravity"),
    "impratio": model("opt.impratio"),
    "integrator": model("opt.integrator"),
    "iterations": model("opt.iterations"),
    "jacobian": NoEffect("dense or sparse storage of MuJoCo's Jacobians: the same results to round-off "
                         "(mjx_lite's layout is Config.efc_jacobian)", probe="sparse"),
    "ls_iterations": model("opt.ls_iterations"),
    "ls_tolerance": model("opt.ls_tolerance"),
    "magnetic": model("opt.magnetic"),
    "noslip_iterations": model("opt.noslip_iterations"),
    "noslip_tolerance": model("opt.noslip_tolerance"),
    "o_friction": model("opt.o_friction"),
    "o_margin": model("opt.o_margin"),
    "o_solimp": model("opt.o_solimp"),
    "o_solref": model("opt.o_solref"),
    "sdf_initpoints": model("opt.sdf_initpoints"),
    "sdf_iterations": model("opt.sdf_iterations"),
    "sleep_tolerance": model("opt.sleep_tolerance"),
    "solver": model("opt.solver"),
    "timestep": model("opt.timestep"),
    "tolerance": model("opt.tolerance"),
    "viscosity": model("opt.viscosity"),
    "wind": model("opt.wind"),
}

_FLAG_ON = model("opt.disableflags")
_FLAG = {
    **{f: _FLAG_ON for f in ("constraint", "equality", "frictionloss", "limit", "contact", "spring", "damper",
                             "gravity", "clampctrl", "warmstart", "filterparent", "actuation", "refsafe", "sensor",
                             "eulerdamp", "autoreset", "multiccd")},  # fmt: skip
    "midphase": NoEffect("MuJoCo's bounding-volume tree of multi-geom bodies: a conservative filter before the same "
                         "pairwise tests (only exact ties at the margin can differ)", probe="disable"),
    "island": _FLAG_ON,  # per-island solving (Newton, CG, PGS on the XLA path; see solver/island.py)
    "nativeccd": _FLAG_ON,  # disabled: libccd's MPR (collision/mpr.py; refusals: compile.py `_check_nativeccd`)
    "override": model("opt.enableflags"),
    "energy": model("opt.enableflags"),
    "fwdinv": model("opt.enableflags"),
    "invdiscrete": model("opt.enableflags"),
    "sleep": model("opt.enableflags"),  # sleeping islands (pipeline/sleep.py; refusals: compile.py `_check_sleep`)
    "diagexact": model("opt.enableflags"),
    "ipc": NoEffect("requires integrator='discrete', which is refused"),
    "speculative": Refused("enabled (speculative contacts; 'a new feature whose behavior may still change' in MuJoCo "
                           "4.0's documentation)", "enable"),
}

_SIZE = {
    "memory": NoEffect("MuJoCo's arena size: memory only"),
    "nconmax": model("nconmax"),  # caps the padded contacts (io.build_model, Config.nconmax)
    "njmax": model("njmax"),  # caps the padded constraint rows
    "nkey": Compiler("number of keyframes (extra keyframes hold qpos0)"),
    "nstack": NoEffect("MuJoCo's stack size: memory only"),
    "nuserdata": NoEffect("size of mjData.userdata, scratch space for the user"),
    **{f"nuser_{k}": NoEffect("length of the user data arrays") for k in
       ("actuator", "body", "cam", "geom", "jnt", "sensor", "site", "tendon")},
}

_STATISTIC = {
    "center": NoEffect("visualisation: the scene's centre (camera and light placement)"),
    "extent": NoEffect("visualisation: the scene's size (camera and light placement, scales)"),
    "meaninertia": model("stat.meaninertia"),
    "meanmass": NoEffect("visualisation scales"),
    "meansize": NoEffect("visualisation scales"),
}

_VISUAL = NoEffect("mjVisual: kept in Model.vis for the renderer and interop, no effect on the simulation")

_BODY = {
    "name": NAME, "childclass": CLASS, "pos": model("body_pos"), **ORIENT,
    "mocap": model("body_mocapid"), "gravcomp": model("body_gravcomp"), "user": USER,
    "fuse": Compiler("per-body opt-out of fusestatic (mjcf/fuse.py)"),
    "simple": NoEffect("MuJoCo's shortcut flags for simple bodies (body_simple): the same results"),
    "sleep": model("tree_sleep_policy"),
}  # fmt: skip
_FRAME = {"name": NAME, "childclass": CLASS, "pos": Compiler("frame offset of its children"), **{
    k: Compiler("frame rotation of its children") for k in ORIENT}}
_REPLICATE = {"count": Compiler("number of copies"), "offset": Compiler("offset between copies"),
              "euler": Compiler("rotation between copies"), "sep": Compiler("name suffix separator")}
_INERTIAL = {"pos": model("body_ipos"), **{k: model("body_iquat") for k in ORIENT}, "mass": model("body_mass"),
             "diaginertia": model("body_inertia"), "fullinertia": model("body_inertia", "body_iquat")}

_JOINT = {
    "name": NAME, "class": CLASS, "type": model("jnt_type"), "group": GROUP, "pos": model("jnt_pos"),
    "axis": model("jnt_axis"), "springdamper": Compiler("stiffness and damping from a time constant and ratio"),
    "limited": model("jnt_limited"), "actuatorfrclimited": model("jnt_actfrclimited"),
    "solreflimit": model("jnt_solref"), "solimplimit": model("jnt_solimp"), "solreffriction": model("dof_solref"),
    "solimpfriction": model("dof_solimp"), "stiffness": model("jnt_stiffness", "jnt_stiffnesspoly"),
    "range": model("jnt_range"), "actuatorfrcrange": model("jnt_actfrcrange"),
    "actuatorgravcomp": model("jnt_actgravcomp"), "margin": model("jnt_margin"), "ref": model("qpos0"),
    "springref": model("qpos_spring"), "armature": model("dof_armature"),
    "damping": model("dof_damping", "dof_dampingpoly"), "frictionloss": model("dof_frictionloss"), "user": USER,
    "springyield": model("jnt_springyield", "jnt_plasticadr"),
}  # fmt: skip
_FREEJOINT = {"name": NAME, "group": GROUP, "align": Refused("'true' (free joint aligned to the inertia frame)",
                                                             "true")}

_GEOM = {
    "name": NAME, "class": CLASS, "type": model("geom_type"), "contype": model("geom_contype"),
    "conaffinity": model("geom_conaffinity"), "condim": model("geom_condim"), "group": GROUP,
    "priority": model("geom_priority"), "size": model("geom_size"), "material": MATERIAL,
    "rgba": model("geom_rgba"), "friction": model("geom_friction"), "mass": Compiler("body mass and inertia"),
    "density": Compiler("body mass and inertia"), "shellinertia": Compiler("body inertia (shell or solid)"),
    "solmix": model("geom_solmix"), "solref": model("geom_solref"), "solimp": model("geom_solimp"),
    "margin": model("geom_margin"), "gap": model("geom_gap"), "fromto": Compiler("geom size, position, rotation"),
    "pos": model("geom_pos"), **{k: model("geom_quat") for k in ORIENT}, "hfield": model("geom_dataid"),
    "mesh": model("geom_dataid"), "fitscale": Compiler("size of a primitive fitted to a mesh"), "user": USER,
    "fluidshape": model("geom_fluid"), "fluidcoef": model("geom_fluid"),
    "adhesion": model("geom_adhesion"),
    "castshadow": NoEffect("rendering: shadows of MuJoCo's OpenGL renderer"),
    "surfacevel": model("geom_surfacevel"),
}  # fmt: skip

_SITE = {"name": NAME, "class": CLASS, "type": model("site_type"), "group": GROUP, "material": MATERIAL,
         "rgba": RGBA, "size": model("site_size"), "fromto": Compiler("site size, position, rotation"),
         "pos": model("site_pos"), **{k: model("site_quat") for k in ORIENT}, "mesh": Compiler("site fitted to a "
         "mesh"), "user": USER}  # fmt: skip

_CAMERA = {
    "name": NAME, "class": CLASS, "mode": model("cam_mode"), "target": model("cam_targetbodyid"),
    "projection": model("cam_projection"),  # camera rangefinders (mjx_lite.render draws perspective cameras)
    "fovy": model("cam_fovy"), "ipd": NoEffect("stereo rendering"), "resolution": model("cam_resolution"),
    "output": NoEffect("which images a camera renders"), "focal": model("cam_intrinsic", "cam_fovy"),
    "focalpixel": model("cam_intrinsic", "cam_fovy"),
    "principal": model("cam_intrinsic"), "principalpixel": model("cam_intrinsic"),  # camera rangefinders
    "sensorsize": model("cam_sensorsize", "cam_fovy"),
    "pos": model("cam_pos"), **{k: model("cam_quat") for k in ORIENT}, "user": USER,
}  # fmt: skip
_LIGHT_VISUAL = ("directional", "castshadow", "active", "attenuation", "cutoff", "exponent", "ambient", "diffuse",
                 "specular", "bulbradius", "intensity", "range", "softness", "texture")
_LIGHT = {"name": NAME, "class": CLASS, "mode": model("light_mode"), "target": model("light_targetbodyid"),
          "type": model("light_type"), "pos": model("light_pos"), "dir": model("light_dir"),
          **{k: NoEffect("lighting: visual only") for k in _LIGHT_VISUAL}}  # fmt: skip

_ASSET = NoEffect("visual asset data (textures, materials): rendering only")
# skins (mjcf/skin.py): compiled as MuJoCo compiles them; render/skin.py computes their vertices (not drawn yet)
_SKIN = {
    "name": NAME, "file": Compiler("skin data from a .skn file"), "material": MATERIAL,
    "rgba": NoEffect("skin colour: the renderer does not draw skins yet"), "inflate": model("skin_inflate"),
    "group": GROUP, "vertex": model("skin_vert"), "texcoord": NoEffect("texture coordinates: skins are not drawn yet"),
    "face": model("skin_face"),
}  # fmt: skip
_BONE = {"body": model("skin_bonebodyid"), "bindpos": model("skin_bonebindpos"),
         "bindquat": model("skin_bonebindquat"), "vertid": model("skin_bonevertid"),
         "vertweight": model("skin_bonevertweight")}  # fmt: skip
_MESH = {
    "name": NAME, "class": CLASS, "content_type": Compiler("file format"), "file": Compiler("mesh data"),
    "vertex": Compiler("mesh data"), "normal": NoEffect("rendering normals"), "texcoord": NoEffect("texture coords"),
    "face": Compiler("mesh data"), "refpos": Compiler("mesh frame"), "refquat": Compiler("mesh frame"),
    "scale": Compiler("mesh data"), "smoothnormal": NoEffect("rendering normals"),
    "maxhullvert": Compiler("convex hull used by collision"), "inertia": Compiler("mesh inertia"),
    "builtin": Compiler("mesh data (builtin meshes; the procedural flex ones are refused)"),
    "params": Compiler("mesh data (builtin meshes)"),
    "material": MATERIAL,
}  # fmt: skip
_HFIELD = {"name": NAME, "content_type": Compiler("file format"), "file": Compiler("height data"),
           "nrow": Compiler("height data"), "ncol": Compiler("height data"), "size": model("hfield_size"),
           "elevation": Compiler("height data")}  # fmt: skip

_PAIR = {
    "name": NAME, "class": CLASS, "geom1": model("pair_geom1"), "geom2": model("pair_geom2"),
    "condim": model("pair_dim"), "friction": model("pair_friction"), "solref": model("pair_solref"),
    "solreffriction": model("pair_solreffriction"), "solimp": model("pair_solimp"), "margin": model("pair_margin"),
    "gap": model("pair_gap"), "adhesion": model("pair_adhesion"),
}  # fmt: skip
_EXCLUDE = {"name": NAME, "body1": model("exclude_signature"), "body2": model("exclude_signature")}

_EQ = {"name": NAME, "class": CLASS, "active": model("eq_active0"), "solref": model("eq_solref"),
       "solimp": model("eq_solimp")}  # fmt: skip
_CONNECT = {**_EQ, "body1": model("eq_obj1id"), "body2": model("eq_obj2id"), "anchor": model("eq_data"),
            "site1": model("eq_obj1id"), "site2": model("eq_obj2id")}
_WELD = {**_CONNECT, "relpose": model("eq_data"), "torquescale": model("eq_data")}
_EQ_JOINT = {**_EQ, "joint1": model("eq_obj1id"), "joint2": model("eq_obj2id"), "polycoef": model("eq_data")}
_EQ_TENDON = {**_EQ, "tendon1": model("eq_obj1id"), "tendon2": model("eq_obj2id"), "polycoef": model("eq_data")}

_TENDON = {
    "name": NAME, "class": CLASS, "group": GROUP, "limited": model("tendon_limited"),
    "actuatorfrclimited": model("tendon_actfrclimited"), "range": model("tendon_range"),
    "actuatorfrcrange": model("tendon_actfrcrange"), "solreflimit": model("tendon_solref_lim"),
    "solimplimit": model("tendon_solimp_lim"), "solreffriction": model("tendon_solref_fri"),
    "solimpfriction": model("tendon_solimp_fri"), "frictionloss": model("tendon_frictionloss"),
    "springlength": model("tendon_lengthspring"), "margin": model("tendon_margin"),
    "stiffness": model("tendon_stiffness", "tendon_stiffnesspoly"),
    "damping": model("tendon_damping", "tendon_dampingpoly"), "armature": model("tendon_armature"), "user": USER,
    "springyield": model("tendon_springyield", "tendon_plasticadr"),
}  # fmt: skip
_SPATIAL = {**_TENDON, "width": NoEffect("rendering width of the tendon"), "material": MATERIAL, "rgba": RGBA}

_TRN = model("actuator_trnid", "actuator_trntype")
_ACT = {
    "name": NAME, "class": CLASS, "group": model("actuator_group"), "ctrllimited": model("actuator_ctrllimited"),
    "forcelimited": model("actuator_forcelimited"), "ctrlrange": model("actuator_ctrlrange"),
    "forcerange": model("actuator_forcerange"), "lengthrange": model("actuator_lengthrange"),
    "gear": model("actuator_gear"), "cranklength": model("actuator_cranklength"), "joint": _TRN,
    "jointinparent": _TRN, "tendon": _TRN, "cranksite": _TRN, "slidersite": _TRN, "site": _TRN, "refsite": _TRN,
    "user": USER, "armature": model("actuator_armature"), "damping": model("actuator_damping", "actuator_dampingpoly"),
    "delay": model("actuator_delay"), "interp": model("actuator_history"), "nsample": model("actuator_history"),
    "actlimited": model("actuator_actlimited"), "actrange": model("actuator_actrange"),
    "body": _TRN, "actdim": model("actuator_actnum"), "actearly": model("actuator_actearly"),
    "inheritrange": Compiler("control range from the target joint's or tendon's range"),
    "dyntype": model("actuator_dyntype"), "gaintype": model("actuator_gaintype"),
    "biastype": model("actuator_biastype"), "dynprm": model("actuator_dynprm"), "gainprm": model("actuator_gainprm"),
    "biasprm": model("actuator_biasprm"),
    "ffrange": NoEffect("MuJoCo 4.0 compiles no field from it (no effect on its trajectory)", probe="-0.1 0.1"),
    "velrange": NoEffect("MuJoCo 4.0 compiles no field from it (no effect on its trajectory)", probe="-0.1 0.1"),
    "input": NoEffect("input signature of the control (actuator_ctrlspec): metadata", probe="vel"),
}  # fmt: skip
_SHORTCUT = Compiler("gain, bias and dynamics parameters of the shortcut (actuator_gainprm/biasprm/dynprm)")
_SHORTCUT_ATTRS = ("kp", "kv", "dampratio", "timeconst", "area", "diameter", "bias", "tausmooth", "range", "force",
                   "scale", "lmin", "lmax", "vmax", "fpmax", "fvmax", "gain")
# pid and dcmotor (MuJoCo 4's control blocks): every parameter is a shortcut, `input` selects the controls they read
_BLOCK_TAGS = ("pid", "dcmotor")
_CHART = Compiler("input chart of an orientation servo: expmap (3 controls) or quat (4): actuator_ctrlspec/ctrlnum")
_ACTUATORS = {tag: {a: _CHART if a == "input" and tag == "orientation" else
                    Compiler("the controls the block reads (multi-input control)") if a == "input" and tag in
                    _BLOCK_TAGS else _ACT[a] if a in _ACT else _SHORTCUT if a in _SHORTCUT_ATTRS or tag in _BLOCK_TAGS
                    else None for a in sc.SCHEMA[tag]}
              for tag in sc.ACTUATOR_TAGS}  # fmt: skip

_SENSOR = {
    "name": NAME,
    "noise": NoEffect("MuJoCo stores sensor_noise for the user and adds no noise (no effect on sensordata)",
                      probe="0.5"),
    "cutoff": model("sensor_cutoff"), "user": USER,
    "delay": model("sensor_delay"),
    "interp": model("sensor_history"),
    "interval": model("sensor_interval"),
    "nsample": model("sensor_history"),
}  # fmt: skip
_SOBJ = model("sensor_objid", "sensor_objtype")
_SREF = model("sensor_refid", "sensor_reftype")

_KEY = {"name": NAME, **{k: NoEffect("keyframes are states for resets (mj_resetDataKeyframe), not read by the "
                                     "simulation") for k in ("time", "qpos", "qvel", "act", "ctrl", "mpos", "mquat",
                                                             "plastic")}}  # fmt: skip
_CUSTOM = NoEffect("custom numeric/text/tuple data: stored for the user, never read by MuJoCo's simulation")


# elements refused as a whole (the loader raises MJCFUnsupportedError naming them): their attributes are moot
REFUSED_ELEMENTS: dict[str, str] = {}
# plugins (mjcf/plugins.py): a declared or used plugin is one mjx_lite builds in, or refused by name
_PLUGIN = Compiler("which plugin (instance) and its configuration: a plugin mjx_lite builds in (mjcf/plugins.py "
                   "BUILTIN), else refused by name, or MuJoCo's error")  # fmt: skip
_PLUGINS = {k: {a: _PLUGIN for a in sch} for k, sch in plugins.SCHEMA.items()}


def _table() -> dict[str, dict]:
    t: dict[str, dict] = {
        "mujoco": {"model": NoEffect("the model's name")},
        "compiler": _COMPILER,
        "compiler/lengthrange": _LENGTHRANGE,
        "option": _OPTION,
        "option/flag": _FLAG,
        "size": _SIZE,
        "statistic": _STATISTIC,
        "visual": {},
        **{k: {a: _VISUAL for a in sch} for k, sch in sc.SCHEMA.items() if k.startswith("visual/")},
        "default": {"class": CLASS},
        "worldbody": {},
        "body": _BODY,
        "frame": _FRAME,
        "replicate": _REPLICATE,
        "inertial": _INERTIAL,
        "joint": _JOINT,
        "freejoint": _FREEJOINT,
        "geom": _GEOM,
        "site": _SITE,
        "camera": _CAMERA,
        "light": _LIGHT,
        "include": {"file": Compiler("the included file")},
        "attach": {a: Compiler("model composition (mjcf/compose.py)") for a in sc.SCHEMA["attach"]},
        "model": {a: Compiler("a model asset for <attach> (mjcf/compose.py)") for a in sc.SCHEMA["model"]},
        "asset": {},
        "mesh": _MESH,
        "hfield": _HFIELD,
        "texture": {a: _ASSET for a in sc.SCHEMA["texture"]},
        "material": {a: NAME if a == "name" else CLASS if a == "class" else _ASSET for a in sc.SCHEMA["material"]},
        "material/layer": {a: _ASSET for a in sc.SCHEMA["material/layer"]},
        "deformable": {},
        "skin": _SKIN,
        "skin/bone": _BONE,
        "contact": {},
        "pair": _PAIR,
        "exclude": _EXCLUDE,
        "equality": {},
        "connect": _CONNECT,
        "weld": _WELD,
        "equality/joint": _EQ_JOINT,
        "equality/tendon": _EQ_TENDON,
        "tendon": {},
        "spatial": _SPATIAL,
        "fixed": _TENDON,
        "spatial/site": {"site": model("wrap_objid", "wrap_type")},
        "spatial/geom": {"geom": model("wrap_objid", "wrap_type"), "sidesite": model("wrap_prm")},
        "spatial/pulley": {"divisor": model("wrap_prm")},
        "fixed/joint": {"joint": model("wrap_objid"), "coef": model("wrap_prm")},
        "actuator": {},
        **_ACTUATORS,
        "sensor": {},
        "keyframe": {},
        "key": _KEY,
        "custom": {},
        "numeric": {a: _CUSTOM for a in sc.SCHEMA["numeric"]},
        "text": {a: _CUSTOM for a in sc.SCHEMA["text"]},
        "tuple": {a: _CUSTOM for a in sc.SCHEMA["tuple"]},
        "tuple/element": {a: _CUSTOM for a in sc.SCHEMA["tuple/element"]},
        **_PLUGINS,
    }
    # sensors: the common attributes, then what each kind names
    objects = {"site": _SOBJ, "joint": _SOBJ, "tendon": _SOBJ, "actuator": _SOBJ, "body": _SOBJ, "objtype": _SOBJ,
               "objname": _SOBJ, "reftype": _SREF, "refname": _SREF, "camera": _SREF, "body1": _SOBJ,
               "geom1": _SOBJ, "body2": _SREF, "geom2": _SREF, "subtree1": _SOBJ, "subtree2": _SREF,
               "data": model("sensor_intprm", "sensor_dim"), "num": model("sensor_intprm", "sensor_dim"),
               "reduce": model("sensor_intprm"), "datatype": model("sensor_datatype"),
               "needstage": model("sensor_needstage"), "dim": model("sensor_dim"),
               "enclosed": model("sensor_intprm", "sensor_datatype")}  # fmt: skip
    objects.update(mesh=_SOBJ, geom=_SREF)  # tactile: the mesh of the taxels, the geom whose frame places them
    for key in sc.SENSOR_TAGS + ("sensor/user", "sensor/tactile", "sensor/distance", "sensor/normal", "sensor/fromto",
                                 "sensor/contact"):
        if key not in sc.SCHEMA:
            continue
        t[key] = {a: _SENSOR[a] if a in _SENSOR else objects[a] for a in sc.SCHEMA[key]}
    t["rangefinder"]["camera"] = model("sensor_objid", "sensor_objtype", "sensor_dim")
    # actuator and sensor plugins (mjcf/plugins.py): the element's attributes as other actuators' and sensors'; which
    # plugin (instance) they use
    t["actuator/plugin"] = {a: _ACT.get(a, _PLUGIN) for a in sc.SCHEMA["actuator/plugin"]}
    t["sensor/plugin"] = {a: _SENSOR.get(a, objects.get(a, _PLUGIN)) for a in sc.SCHEMA["sensor/plugin"]}
    # flexes (mjcf/flexcomp.py builds the bodies, joints and flex_* fields, or refuses a feature by name)
    visual = {"group": GROUP, "rgba": NoEffect("flex colour: visual only"), "material": MATERIAL,
              "texcoord": NoEffect("texture coordinates: visual only"),
              "flatskin": NoEffect("skin shading: visual only")}  # fmt: skip
    for key in [k for k in sc.SCHEMA if k.startswith(("flexcomp", "flex/")) or k == "deformable/flex"]:
        t[key] = {a: visual[a] if key in ("flexcomp", "deformable/flex") and a in visual else NAME if a == "name"
                  else Compiler(f"<{key}> {a}: what mjcf/flexcomp.py builds (flex_*, vertex bodies and joints) or "
                                "refuses by name") for a in sc.SCHEMA[key]}  # fmt: skip
    for key in ("flexcomp/elasticity", "flex/elasticity"):  # dim 2 / 3 elasticity; rods, yield: refused by name
        if key not in sc.SCHEMA:
            continue
        el = t[key]
        el.update({a: model("flex_stiffness", "flex_bending") for a in ("young", "poisson", "thickness", "elastic2d")
                   if a in el})  # fmt: skip
        if "damping" in el:
            el["damping"] = model("flex_damping")
    if "equality/flex" in sc.SCHEMA:
        t["equality/flex"] = {**{a: v for a, v in _EQ.items() if a in sc.SCHEMA["equality/flex"]},
                              "flex": model("eq_obj1id")}  # fmt: skip
    for key, what in REFUSED_ELEMENTS.items():
        t[key] = {a: NoEffect(f"the element is refused ({what})") for a in sc.SCHEMA[key]}
    return t


EFFECTS: dict[str, dict] = _table()


def effect(key: str, attribute: str):
    """The audited effect of `attribute` of schema key `key` (a `default/<tag>` key takes its element's)."""
    if key.startswith("default/"):
        key = sc.DEFAULT_BASE[key.split("/", 1)[1]]
    return EFFECTS[key][attribute]
