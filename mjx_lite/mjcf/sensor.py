"""Compiler pass for <sensor>: every non-rendering MuJoCo 4.0 sensor (mjModel sensor_*, nsensordata).

History buffers (nsample > 0; delay, interp, interval) are compiled as MuJoCo's (sensor_history, sensor_historyadr
after the actuators' buffers, nhistory; pipeline/history.py runs them). Plugin sensors: MuJoCo's touch_grid
(`_plugin_sensor`; others are refused by the reader, mjcf/plugins.py). Camera rangefinders: objtype camera,
dim = data size x width x height. User sensors: values from `Config.sensor_user` (pipeline/sensor_user.py).
Tactile sensors: dim = 3 x the mesh's vertices, their taxel tangents in `sensor_tangent` (`_tactile_tangents`); a
height field that can touch the sensor's body and colliding flexes are
refused (`_tactile_contacts`).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf import mesh as mesh_mod
from mjx_lite.mjcf import mesh_builtin, plugins
from mjx_lite.mjcf.attrs import error, get, register_all, section_children, unsupported, vec
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.spec import Element
from mjx_lite.types import DataType, GeomType, JointType, ObjType, SensorType, Stage

R, P, A, Q = DataType.REAL, DataType.POSITIVE, DataType.AXIS, DataType.QUATERNION
POS, VEL, ACC = Stage.POS, Stage.VEL, Stage.ACC

# tag -> (type, datatype, needstage, dim, object attribute kind)
_TABLE = {
    "touch": (SensorType.TOUCH, P, ACC, 1, "site"),
    "accelerometer": (SensorType.ACCELEROMETER, R, ACC, 3, "site"),
    "velocimeter": (SensorType.VELOCIMETER, R, VEL, 3, "site"),
    "gyro": (SensorType.GYRO, R, VEL, 3, "site"),
    "force": (SensorType.FORCE, R, ACC, 3, "site"),
    "torque": (SensorType.TORQUE, R, ACC, 3, "site"),
    "magnetometer": (SensorType.MAGNETOMETER, R, POS, 3, "site"),
    "rangefinder": (SensorType.RANGEFINDER, R, POS, None, "site"),
    "camprojection": (SensorType.CAMPROJECTION, R, POS, 2, "site"),
    "jointpos": (SensorType.JOINTPOS, R, POS, 1, "joint"),
    "jointvel": (SensorType.JOINTVEL, R, VEL, 1, "joint"),
    "tendonpos": (SensorType.TENDONPOS, R, POS, 1, "tendon"),
    "tendonvel": (SensorType.TENDONVEL, R, VEL, 1, "tendon"),
    "actuatorpos": (SensorType.ACTUATORPOS, R, POS, 1, "actuator"),
    "actuatorvel": (SensorType.ACTUATORVEL, R, VEL, 1, "actuator"),
    "actuatorfrc": (SensorType.ACTUATORFRC, R, ACC, 1, "actuator"),
    "jointactuatorfrc": (SensorType.JOINTACTFRC, R, ACC, 1, "joint"),
    "tendonactuatorfrc": (SensorType.TENDONACTFRC, R, ACC, 1, "tendon"),
    "ballquat": (SensorType.BALLQUAT, Q, POS, 4, "joint"),
    "ballangvel": (SensorType.BALLANGVEL, R, VEL, 3, "joint"),
    "jointlimitpos": (SensorType.JOINTLIMITPOS, R, POS, 1, "joint"),
    "jointlimitvel": (SensorType.JOINTLIMITVEL, R, VEL, 1, "joint"),
    "jointlimitfrc": (SensorType.JOINTLIMITFRC, R, ACC, 1, "joint"),
    "tendonlimitpos": (SensorType.TENDONLIMITPOS, R, POS, 1, "tendon"),
    "tendonlimitvel": (SensorType.TENDONLIMITVEL, R, VEL, 1, "tendon"),
    "tendonlimitfrc": (SensorType.TENDONLIMITFRC, R, ACC, 1, "tendon"),
    "framepos": (SensorType.FRAMEPOS, R, POS, 3, "frame"),
    "framequat": (SensorType.FRAMEQUAT, Q, POS, 4, "frame"),
    "framexaxis": (SensorType.FRAMEXAXIS, A, POS, 3, "frame"),
    "frameyaxis": (SensorType.FRAMEYAXIS, A, POS, 3, "frame"),
    "framezaxis": (SensorType.FRAMEZAXIS, A, POS, 3, "frame"),
    "framelinvel": (SensorType.FRAMELINVEL, R, VEL, 3, "frame"),
    "frameangvel": (SensorType.FRAMEANGVEL, R, VEL, 3, "frame"),
    "framelinacc": (SensorType.FRAMELINACC, R, ACC, 3, "frame_noref"),
    "frameangacc": (SensorType.FRAMEANGACC, R, ACC, 3, "frame_noref"),
    "subtreecom": (SensorType.SUBTREECOM, R, POS, 3, "body"),
    "subtreelinvel": (SensorType.SUBTREELINVEL, R, VEL, 3, "body"),
    "subtreeangmom": (SensorType.SUBTREEANGMOM, R, VEL, 3, "body"),
    "insidesite": (SensorType.INSIDESITE, P, POS, 1, "inside"),
    "distance": (SensorType.GEOMDIST, R, POS, 1, "geompair"),
    "normal": (SensorType.GEOMNORMAL, A, POS, 3, "geompair"),
    "fromto": (SensorType.GEOMFROMTO, R, POS, 6, "geompair"),
    "contact": (SensorType.CONTACT, R, None, None, "contact"),
    "e_potential": (SensorType.E_POTENTIAL, R, POS, 1, None),
    "e_kinetic": (SensorType.E_KINETIC, R, POS, 1, None),
    "clock": (SensorType.CLOCK, R, POS, 1, None),
    "user": (SensorType.USER, None, None, None, "user"),
    "tactile": (SensorType.TACTILE, R, VEL, None, "tactile"),  # MuJoCo 4.0: vel stage
    "plugin": (SensorType.PLUGIN, R, ACC, None, "plugin"),  # mujoco.sensor.touch_grid (mjcf/plugins.py)
}
UNSUPPORTED: tuple[str, ...] = ()


_OBJTYPE = {"body": ObjType.BODY, "xbody": ObjType.XBODY, "geom": ObjType.GEOM, "site": ObjType.SITE,
            "camera": ObjType.CAMERA}  # fmt: skip
_OBJ_KEY = {ObjType.BODY: "body", ObjType.XBODY: "body", ObjType.GEOM: "geom", ObjType.SITE: "site",
            ObjType.CAMERA: "camera", ObjType.JOINT: "joint", ObjType.TENDON: "tendon",
            ObjType.ACTUATOR: "actuator"}  # fmt: skip
# user sensors may reference any named object type
_USER_OBJTYPE = {**_OBJTYPE, "joint": ObjType.JOINT, "tendon": ObjType.TENDON, "actuator": ObjType.ACTUATOR}
_RANGEFINDER_DATA = (("dist", 1), ("dir", 3), ("origin", 3), ("point", 3), ("normal", 3), ("depth", 1))
_CONTACT_DATA = (("found", 1), ("force", 3), ("torque", 3), ("dist", 1), ("pos", 3), ("normal", 3), ("tangent", 3),
                 ("linvel", 3), ("angvel", 3))  # fmt: skip
_REDUCE = {"none": 0, "mindist": 1, "maxforce": 2, "netforce": 3}
_DATATYPE = {"real": R, "positive": P, "axis": A, "quaternion": Q}
_STAGE = {"pos": POS, "vel": VEL, "acc": ACC}


def _words(el: Element, name: str, default: str) -> list[str]:
    v = el.attrs.get(name)
    if v is None:
        return default.split()
    if isinstance(v, (list, tuple, np.ndarray)):
        return [str(x) for x in v]
    return str(v).split()


def _bits(el: Element, name: str, table, default: str) -> tuple[int, int]:
    """Bit mask and total size of a canonical-order keyword list (rangefinder/contact `data`)."""
    words = _words(el, name, default)
    keys = [k for k, _ in table]
    mask, size, last = 0, 0, -1
    for w in words:
        if w not in keys:
            raise error(el, f"invalid keyword '{w}' (expected {', '.join(keys)})", name)
        k = keys.index(w)
        if k <= last:
            raise error(el, f"data attributes must be in order: {', '.join(keys)}", name)
        last = k
        mask |= 1 << k
        size += table[k][1]
    return mask, size


def _obj(ctx: CompileContext, el: Element, kind: str, name_attr: str) -> int:
    name = get(el, name_attr)
    if name is None:
        raise error(el, "missing required attribute", name_attr)
    return ctx.id_of(kind, name, el, name_attr)


def _frame_obj(ctx, el, type_attr, name_attr, required=True) -> tuple[int, int]:
    t, n = get(el, type_attr), get(el, name_attr)
    if t is None and n is None and not required:
        return ObjType.UNKNOWN, -1
    if t is None or n is None:
        raise error(el, f"{type_attr} and {name_attr} must be given together", type_attr if t is None else name_attr)
    if t not in _OBJTYPE:
        raise error(el, f"invalid keyword '{t}' (expected {', '.join(_OBJTYPE)})", type_attr)
    ot = _OBJTYPE[t]
    return ot, ctx.id_of(_OBJ_KEY[ot], n, el, name_attr)


def _geomdist_types(ctx: CompileContext, s: Element, sides) -> None:
    """MuJoCo's error for a geom distance sensor that reaches a height field (directly or through a body)."""
    gtype = np.asarray(ctx.arrays.get("geom_type", np.zeros(0, np.int32)))
    gbody = np.asarray(ctx.arrays.get("geom_bodyid", np.zeros(0, np.int32)))
    for otype, oid, gattr, battr in sides:
        geoms = np.nonzero(gbody == oid)[0] if otype == ObjType.BODY else [oid]
        for g in geoms:
            if int(gtype[g]) == GeomType.HFIELD:
                raise error(s, "height fields are not supported in geom distance sensors",
                            battr if otype == ObjType.BODY else gattr)


def compile_sensor(root: Element, ctx: CompileContext) -> None:
    """Sensors -> ctx.arrays (sensor_*), ctx.sizes (nsensor, nsensordata)."""
    sensors = section_children(root, "sensor")
    register_all(ctx, "sensor", sensors)
    n = len(sensors)
    cols = {k: np.zeros(n, np.int32) for k in ("sensor_type", "sensor_datatype", "sensor_needstage", "sensor_objtype",
                                               "sensor_objid", "sensor_reftype", "sensor_refid", "sensor_dim",
                                               "sensor_adr", "sensor_historyadr")}  # fmt: skip
    intprm = np.zeros((n, 3), np.int32)
    history = np.zeros((n, 2), np.int32)
    noise, cutoff, delay = np.zeros(n), np.zeros(n), np.zeros(n)
    interval = np.zeros((n, 2))
    jnt_type = np.asarray(ctx.arrays.get("jnt_type", np.zeros(0, np.int32)))
    adr = 0
    tangents = []  # (sensordata address, taxels, (taxels, 2, 3) tangents) of the tactile sensors
    plugincfg: list = [None] * n  # (plugin name, parameters) of plugin sensors (Model.sensor_plugincfg)
    nhistory = int(ctx.sizes.get("nhistory", 0))  # the actuators' buffers come first
    for i, s in enumerate(sensors):
        if s.tag in UNSUPPORTED:
            raise unsupported(s, f"<{s.tag}> sensors are not supported by mjx_lite")
        if s.tag not in _TABLE:
            raise error(s, f"unknown sensor type <{s.tag}>")
        stype, dtype, stage, dim, kind = _TABLE[s.tag]
        objtype, objid, reftype, refid = ObjType.UNKNOWN, -1, ObjType.UNKNOWN, -1
        if kind in ("site", "joint", "tendon", "actuator", "body"):
            objtype = {"site": ObjType.SITE, "joint": ObjType.JOINT, "tendon": ObjType.TENDON,
                       "actuator": ObjType.ACTUATOR, "body": ObjType.BODY}[kind]  # fmt: skip
            if s.tag == "rangefinder" and get(s, "camera") is not None and get(s, "site") is not None:
                raise error(s, "at most one of 'site', 'camera' can be specified", "camera")
            if s.tag == "rangefinder" and get(s, "camera") is not None:  # one ray per pixel (row-major)
                objtype, objid = ObjType.CAMERA, _obj(ctx, s, "camera", "camera")
            else:
                objid = _obj(ctx, s, kind, kind)
        if s.tag == "rangefinder":
            mask, dim = _bits(s, "data", _RANGEFINDER_DATA, "dist")
            intprm[i, 0] = mask
            if objtype == ObjType.CAMERA:
                res = np.asarray(ctx.arrays["cam_resolution"])[objid]
                if np.any(res <= 0):
                    raise error(s, "rangefinder camera sensor requires positive camera resolution", "camera")
                dim *= int(res[0]) * int(res[1])
        elif s.tag == "camprojection":
            reftype, refid = ObjType.CAMERA, _obj(ctx, s, "camera", "camera")
            if np.any(np.asarray(ctx.arrays["cam_resolution"])[refid] <= 0):
                raise error(s, "camprojection sensor requires a camera with positive resolution", "camera")
        elif s.tag in ("actuatorpos", "actuatorvel", "actuatorfrc"):
            dim = int(np.asarray(ctx.arrays["actuator_outnum"])[objid])  # one value per force output (so3: 3)
        elif s.tag in ("ballquat", "ballangvel") and jnt_type[objid] != JointType.BALL:
            raise error(s, "joint must be a ball joint", "joint")
        elif s.tag in ("jointpos", "jointvel", "jointlimitpos", "jointlimitvel", "jointlimitfrc",
                       "jointactuatorfrc") and jnt_type[objid] not in (JointType.HINGE, JointType.SLIDE):  # fmt: skip
            raise error(s, "joint must be a slide or hinge joint", "joint")
        if kind in ("frame", "frame_noref"):
            objtype, objid = _frame_obj(ctx, s, "objtype", "objname")
            if kind == "frame":
                reftype, refid = _frame_obj(ctx, s, "reftype", "refname", required=False)
        elif kind == "inside":
            objtype, objid = _frame_obj(ctx, s, "objtype", "objname")
            reftype, refid = ObjType.SITE, _obj(ctx, s, "site", "site")
            if get(s, "enclosed", False):  # the directed Hausdorff distance (pipeline/sensor_inside.py)
                _enclosed_check(ctx, s, objtype, objid, refid)
                dtype, intprm[i, 0] = R, 1
        elif kind == "geompair":
            objtype, objid = _one_of(ctx, s, (("geom1", ObjType.GEOM, "geom"), ("body1", ObjType.BODY, "body")), True)
            reftype, refid = _one_of(ctx, s, (("geom2", ObjType.GEOM, "geom"), ("body2", ObjType.BODY, "body")), True)
            _geomdist_types(ctx, s, ((objtype, objid, "geom1", "body1"), (reftype, refid, "geom2", "body2")))
        elif kind == "contact":
            objtype, objid = _one_of(ctx, s, (("geom1", ObjType.GEOM, "geom"), ("body1", ObjType.BODY, "body"),
                                              ("subtree1", ObjType.XBODY, "body"), ("site", ObjType.SITE, "site")),
                                     False)  # fmt: skip
            reftype, refid = _one_of(ctx, s, (("geom2", ObjType.GEOM, "geom"), ("body2", ObjType.BODY, "body"),
                                              ("subtree2", ObjType.XBODY, "body")), False)  # fmt: skip
            if objtype == ObjType.SITE and reftype != ObjType.UNKNOWN:
                raise error(s, "a contact sensor with a site cannot have a second object", "site")
            mask, size = _bits(s, "data", _CONTACT_DATA, "found")
            red = get(s, "reduce", "none")
            if red not in _REDUCE:
                raise error(s, f"invalid keyword '{red}' (expected {', '.join(_REDUCE)})", "reduce")
            num = int(get(s, "num", 1))
            if num <= 0:
                raise error(s, "num must be positive", "num")
            if red == "netforce" and mask & (0b11 << 7):
                raise unsupported(s, "contact sensors with reduce='netforce' and linvel/angvel data are not "
                                  "supported by mjx_lite", "data")  # fmt: skip
            intprm[i] = (mask, _REDUCE[red], num)
            dim = num * size
            needs_force = mask & 0b110 or red in ("maxforce", "netforce")
            stage = ACC if needs_force else VEL if mask & (0b11 << 7) else POS
        elif kind == "tactile":
            objtype, objid = ObjType.MESH, _obj(ctx, s, "mesh", "mesh")
            reftype, refid = ObjType.GEOM, _obj(ctx, s, "geom", "geom")
            dim = 3 * int(np.asarray(ctx.arrays["mesh_vertnum"])[objid])
            _tactile_contacts(ctx, s, refid, root)
            tangents.append((adr, dim // 3, _tactile_tangents(ctx, s, objid)))
        elif kind == "plugin":
            objtype, objid, reftype, refid, dim, plugincfg[i] = _plugin_sensor(ctx, s)
        elif kind == "user":
            dt = get(s, "datatype", "real")
            st = get(s, "needstage", "acc")
            if dt not in _DATATYPE:
                raise error(s, f"invalid keyword '{dt}'", "datatype")
            if st not in _STAGE:
                raise error(s, f"invalid keyword '{st}'", "needstage")
            dtype, stage = _DATATYPE[dt], _STAGE[st]
            dim = get(s, "dim")
            if dim is None or int(dim) <= 0:
                raise error(s, "user sensors need a positive dim", "dim")
            dim = int(dim)
            t, nm = get(s, "objtype"), get(s, "objname")
            if t is not None or nm is not None:
                if t is None or nm is None:
                    raise error(s, "objtype and objname must be given together", "objtype")
                if t not in _USER_OBJTYPE:
                    raise unsupported(s, f"objtype '{t}' is not supported by mjx_lite", "objtype")
                objtype = _USER_OBJTYPE[t]
                objid = ctx.id_of(_OBJ_KEY[objtype], nm, s, "objname")
        nsample, delay[i] = int(get(s, "nsample", 0)), float(get(s, "delay", 0.0))
        if nsample > 1 << 24:
            raise error(s, f"at most 2^24 samples in sensor history buffer, got {nsample}", "nsample")
        if delay[i] > 0 and nsample <= 0:
            raise error(s, "setting delay > 0 without a history buffer", "delay")
        c = float(get(s, "cutoff", 0.0))
        if c < 0:
            raise error(s, "negative cutoff", "cutoff")
        if c > 0 and (dtype == Q or (dtype == A and s.tag != "normal")):  # normal: the distance bound
            raise error(s, "cutoff applied to axis or quaternion datatype in sensor", "cutoff")
        nz = float(get(s, "noise", 0.0))
        if nz < 0:
            raise error(s, "negative noise", "noise")
        cols["sensor_type"][i] = stype
        cols["sensor_datatype"][i] = dtype
        cols["sensor_needstage"][i] = stage
        cols["sensor_objtype"][i] = objtype
        cols["sensor_objid"][i] = objid
        cols["sensor_reftype"][i] = reftype
        cols["sensor_refid"][i] = refid
        cols["sensor_dim"][i] = dim
        cols["sensor_adr"][i] = adr
        interp = get(s, "interp", "zoh")
        if interp not in ("zoh", "linear", "cubic"):
            raise error(s, f"invalid keyword '{interp}' (expected zoh, linear or cubic)", "interp")
        history[i] = (nsample, ("zoh", "linear", "cubic").index(interp))  # (nsample, interp; MuJoCo keeps nsample < 0)
        # ring buffer after the actuators' (pipeline/history.py): [tick, cursor, times (n), values (n * dim)]
        cols["sensor_historyadr"][i] = nhistory if nsample > 0 else -1
        nhistory += 2 + nsample * (1 + dim) if nsample > 0 else 0
        adr += dim
        noise[i], cutoff[i] = nz, c
        interval[i] = vec(s, "interval", 2, (0.0, 0.0))
        if interval[i, 0] < 0:
            raise error(s, "negative interval", "interval")
        if interval[i, 1] > 0:
            raise error(s, "positive phase", "interval")
        if interval[i, 0] > 0 and interval[i, 1] <= -interval[i, 0]:
            raise error(s, "phase must be greater than -period", "interval")
    ctx.arrays.update(cols)
    tangent = np.zeros((adr, 3))
    for a, ntaxel, t in tangents:
        tangent[a + ntaxel : a + 2 * ntaxel], tangent[a + 2 * ntaxel : a + 3 * ntaxel] = t[:, 0], t[:, 1]
    ctx.arrays["sensor_plugincfg"] = tuple(plugincfg) if any(c is not None for c in plugincfg) else ()
    ctx.arrays.update(sensor_intprm=intprm, sensor_history=history, sensor_noise=noise, sensor_cutoff=cutoff,
                      sensor_delay=delay, sensor_interval=interval, sensor_tangent=tangent)  # fmt: skip
    ctx.sizes["nsensor"] = n
    ctx.sizes["nsensordata"] = adr
    ctx.sizes["nhistory"] = nhistory


# enclosed insidesite: shapes whose core is a finite point set (pipeline/sensor_inside.py computes them), and the
# other compact convex shapes (MuJoCo's; mjx_lite refuses them)
_ENCLOSED_OBJECTS = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.BOX, GeomType.MESH)
_ENCLOSED_CURVED = (GeomType.ELLIPSOID, GeomType.CYLINDER)


def _enclosed_check(ctx: CompileContext, s: Element, objtype: int, objid: int, site: int) -> None:
    """MuJoCo's errors for an enclosed insidesite sensor (no camera, a body with geoms, compact convex shapes), and
    mjx_lite's refusal of the shapes it does not compute (ellipsoids and cylinders in a site that is not a sphere)."""
    if objtype == ObjType.CAMERA:
        raise error(s, "camera is not supported in enclosed insidesite sensor", "objtype")
    site_type = int(np.asarray(ctx.arrays["site_type"])[site])
    if objtype in (ObjType.GEOM, ObjType.SITE):
        shapes = [(objtype, objid)]
    else:  # a body's own geoms, or (xbody) those of its subtree
        parent, gbody = np.asarray(ctx.arrays["body_parentid"]), np.asarray(ctx.arrays["geom_bodyid"])
        bodies = {objid}
        if objtype == ObjType.XBODY:
            bodies |= {b for b in range(1, len(parent)) if any(a == objid for a in _ancestors(parent, b))}
        shapes = [(ObjType.GEOM, g) for g in range(len(gbody)) if int(gbody[g]) in bodies]
        if not shapes:
            raise error(s, f"body '{get(s, 'objname')}' in enclosed insidesite sensor must have at least one geom",
                        "objname")  # fmt: skip
    for kind, i in shapes:
        t = int(np.asarray(ctx.arrays["geom_type" if kind == ObjType.GEOM else "site_type"])[i])
        if t not in _ENCLOSED_OBJECTS + _ENCLOSED_CURVED:
            raise error(s, f"{'geom' if kind == ObjType.GEOM else 'site'} {i} in enclosed insidesite sensor must "
                        "be a compact convex shape", "objname")  # fmt: skip
        if t in _ENCLOSED_CURVED and site_type != GeomType.SPHERE:
            raise unsupported(s, f"insidesite enclosed='true' of an {GeomType(t).name.lower()} (the object, or a "
                              "geom of the body) in a site that is not a sphere is not supported by mjx_lite (spheres, "
                              "capsules, boxes and meshes are, and ellipsoids and cylinders in sphere sites)",
                              "enclosed")  # fmt: skip


def _plugin_sensor(ctx: CompileContext, s: Element) -> tuple:
    """(objtype, objid, reftype, refid, dim, (plugin name, parameters)) of a <plugin> sensor (the reader resolved its
    plugin and configuration: mjcf/plugins.py element_config); the only sensor plugin is mujoco.sensor.touch_grid,
    on a site, with nchannel x size[0] x size[1] values (pipeline/plugin_touch_grid.py)."""
    use = s.attrs["plugin"]
    name = use["plugin"]
    for t, n in (("objtype", "objname"), ("reftype", "refname")):
        if get(s, t) is not None and get(s, n) is None:
            raise error(s, f"{t} is specified but {n} is not", t)
        if get(s, t) is None and get(s, n) is not None:
            raise error(s, f"{n} is specified but {t} is not", n)
    objtype, objid = ObjType.UNKNOWN, -1
    if get(s, "objtype") is not None:
        if get(s, "objtype") not in _OBJTYPE:
            raise unsupported(s, f"objtype '{get(s, 'objtype')}' of a plugin sensor is not supported by mjx_lite",
                              "objtype")  # fmt: skip
        objtype, objid = _frame_obj(ctx, s, "objtype", "objname")
    reftype, refid = _frame_obj(ctx, s, "reftype", "refname", required=False)
    params = plugins.touch_grid_parameters(s, use["instance"] or name, use["config"])
    if objtype != ObjType.SITE:
        raise error(s, "Touch Grid sensor must be attached to a site (MuJoCo: plugin->init failed)", "objtype")
    return objtype, objid, reftype, refid, params[0] * params[1] * params[2], (name, params)


def _ancestors(parent: np.ndarray, b: int) -> list[int]:
    out = []
    while b > 0:
        b = int(parent[b])
        out.append(b)
    return out


def _one_of(ctx, s: Element, options, required: bool) -> tuple[int, int]:
    given = [(a, t, k) for a, t, k in options if get(s, a) is not None]
    if len(given) > 1:
        raise error(s, f"at most one of {', '.join(a for a, _, _ in options)} can be specified", given[1][0])
    if not given:
        if required:
            raise error(s, f"one of {', '.join(a for a, _, _ in options)} must be specified")
        return ObjType.UNKNOWN, -1
    a, t, k = given[0]
    return t, _obj(ctx, s, k, a)


def _tactile_tangents(ctx: CompileContext, s: Element, mesh: int) -> np.ndarray:
    """(nvert, 2, 3) tangents of a tactile sensor's mesh in the mesh's principal frame, as MuJoCo's mesh_normal holds
    them (float32) when the mesh has a frame of 3 normals per vertex (the builtins wedge and plate): the builtin's
    frames rotated by refquat, divided by the scale (covectors), normalised in float32, rotated into the principal
    frame. Zeros for a mesh of `vertex` data (MuJoCo computes one normal per vertex: no slip channels); meshes
    with file or user normals are refused (their normal count decides MuJoCo's output and is not reproduced)."""
    el = ctx.elements["mesh"][mesh]
    asset = ctx.mesh_assets[mesh]
    nvert = int(np.asarray(ctx.arrays["mesh_vertnum"])[mesh])
    frames = mesh_builtin.builtin_frames(str(el.attrs["builtin"]), el.attrs["params"]) if el.attrs.get(
        "builtin") not in (None, "none") else None  # fmt: skip
    if frames is None:
        if el.attrs.get("file") is not None or el.attrs.get("normal") is not None:
            raise unsupported(s, "tactile sensors on meshes with file or user normals are not supported by mjx_lite "
                              "(builtin wedge/plate meshes and vertex meshes are)", "mesh")  # fmt: skip
        return np.zeros((nvert, 2, 3))
    if len(frames) != nvert:
        raise unsupported(s, "tactile sensor on a builtin mesh whose vertices were merged", "mesh")
    n = frames.reshape(-1, 3)  # float32, 3 per vertex
    refquat = np.asarray(el.attrs.get("refquat", (1.0, 0.0, 0.0, 0.0)), float).reshape(4)
    if np.any(refquat != (1.0, 0.0, 0.0, 0.0)):
        q = [float(x) for x in refquat]
        mesh_mod._normvec(q)
        n = (n.astype(np.float64) @ mesh_mod._quat_to_mat(q)).astype(np.float32)  # R^T n per row
    scale = np.asarray(asset.scale, float).reshape(3)
    if np.any(scale != 1):
        n = (n.astype(np.float64) / scale).astype(np.float32)
    length = n[:, 0] * n[:, 0] + n[:, 1] * n[:, 1] + n[:, 2] * n[:, 2]  # float32 arithmetic, as MuJoCo
    ok = length > np.float32(1e-15)
    scl = np.float32(1) / np.sqrt(np.where(ok, length, np.float32(1)))
    n = np.where(ok[:, None], n * scl[:, None], np.array([0, 0, 1], np.float32))
    q = np.asarray(asset.quat, float)
    n = (n.astype(np.float64) @ mesh_mod._quat_to_mat(q)).astype(np.float32)  # principal frame: R(q)^T n
    return n.reshape(nvert, 3, 3)[:, 1:].astype(np.float64)


def _tactile_contacts(ctx: CompileContext, s: Element, geom: int, root: Element) -> None:
    """Refuse what MuJoCo's tactile sensor cannot evaluate or reads out of bounds: a height field that can touch the
    sensor's body (MuJoCo raises "sdf collisions not available" at run time) and flexes that collide (a flex contact
    has no geom, which MuJoCo's sensor indexes)."""
    a = ctx.arrays
    gtype, gbody = np.asarray(a["geom_type"]), np.asarray(a["geom_bodyid"])
    weld = np.asarray(a["body_weldid"])
    own = weld[gbody] == weld[gbody[geom]]
    ct, ca = np.asarray(a["geom_contype"]), np.asarray(a["geom_conaffinity"])
    hf = np.nonzero(gtype == GeomType.HFIELD)[0]
    paired = set()  # geoms of explicit <pair>s with a geom on the sensor's weld body (the contact pass runs later)
    for p in (c for c in section_children(root, "contact") if c.tag == "pair"):
        g1, g2 = (ctx.ids.get("geom", {}).get(get(p, k)) for k in ("geom1", "geom2"))
        if g1 is not None and g2 is not None:
            paired |= {g2} if own[g1] else set()
            paired |= {g1} if own[g2] else set()
    for g in hf:
        if np.any(own & (((ct & ca[g]) | (ca & ct[g])) != 0)) or own[g] or g in paired:
            raise unsupported(s, "tactile sensor whose body can touch a height field (MuJoCo has no height-field "
                              "distance for it)", "geom")  # fmt: skip
    if int(ctx.sizes.get("nflex", 0)) and np.any(np.asarray(a.get("flex_contype", 0)) | np.asarray(
            a.get("flex_conaffinity", 0))):  # fmt: skip
        raise unsupported(s, "tactile sensors in a model with colliding flexes (MuJoCo reads the geom of a flex "
                          "contact, which it lacks)", "geom")  # fmt: skip
