"""Sensors (mj_sensorPos / mj_sensorVel / mj_sensorAcc) and energy (mj_energyPos / mj_energyVel).

Each stage computes the sensors whose `sensor_needstage` is that stage, grouped by (type, object type,
reference type) and vectorised over the group, then writes them into `sensordata` with one scatter and
applies the cutoff (REAL: clip to +-cutoff; POSITIVE: min(cutoff, x); only where cutoff > 0). Noise is
not applied (MuJoCo's sensor_noise is informational). With the sensor disable flag, sensordata is left
unchanged, as in MuJoCo.

Supported: joint/tendon/actuator/ball sensors, frame sensors (pos, quat, axes, lin/ang vel with reference
frames, lin/ang acc), subtree com/linvel/angmom, accelerometer, velocimeter, gyro, magnetometer, force, torque,
jointactfrc, tendonactfrc, joint/tendon limit pos/vel/frc (read from the constraint rows; zero when there are
none), e_potential, e_kinetic, clock, insidesite, site and camera rangefinders (`ray`, `ray_camera`), geom
distance sensors (distance, normal, fromto: `sensor_geomdist`), and the contact sensors of `sensor_contact`: touch
and contact (every object kind, data field and reduction; its stage is pos, vel or acc depending on the fields, and
its cutoff is ignored, as in MuJoCo), camprojection. A sensor with a history buffer (nsample > 0) reads it
(`history.read_sensors`): with a delay at time - delay, with an interval between ticks; `history_raw` gives the
fresh values integrate inserts after the step. Tactile sensors: `sensor_tactile`. User sensors read
`m.config.sensor_user` (`sensor_user`; zeros without it, as MuJoCo without mjcb_sensor). Plugin sensors: MuJoCo's
touch_grid (`plugin_touch_grid`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import quat_conj, quat_mul, quat_normalize, quat_sub
from mjx_lite.pipeline import (
    contact_force,
    history,
    inertia,
    plastic,
    plugin_touch_grid,
    ray,
    ray_camera,
    rne,
    sensor_contact,
    sensor_geomdist,
    sensor_inside,
    sensor_tactile,
    sensor_user,
    velocity,
)
from mjx_lite.types import (
    MINVAL,
    ConstraintType,
    Data,
    DataType,
    DisableBit,
    JointType,
    Model,
    ObjType,
    SensorType,
    Stage,
    TrnType,
)

S = SensorType

_UNSUPPORTED: dict[int, str] = {}

# sensors that need rne_postconstraint (cacc, cfrc_int); MuJoCo computes it for user sensors too (mjcb_sensor reads it)
_NEED_RNEPOST = (S.ACCELEROMETER, S.FORCE, S.TORQUE, S.FRAMELINACC, S.FRAMEANGACC, S.USER, S.PLUGIN)
_NEED_SUBTREEVEL = (S.SUBTREELINVEL, S.SUBTREEANGMOM, S.USER)
_OWN_GROUP = (S.CONTACT, S.USER, S.TACTILE, S.PLUGIN)  # sensors computed one by one


def object_body(m: Model, objtype: int, ids: np.ndarray) -> np.ndarray:
    """Body id carrying each object (static)."""
    ids = np.asarray(ids, int)
    if objtype in (ObjType.BODY, ObjType.XBODY):
        return ids
    table = {ObjType.GEOM: m.geom_bodyid, ObjType.SITE: m.site_bodyid, ObjType.CAMERA: m.cam_bodyid}
    if objtype not in table:
        raise ValueError(f"sensor: invalid object type {objtype}")
    return np.asarray(table[objtype])[ids]


def object_frame(m: Model, d: Data, objtype: int, ids: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Global position (k, 3) and orientation (k, 3, 3) of objects of one type (get_xpos_xmat)."""
    ids = np.asarray(ids, int)
    if objtype == ObjType.XBODY:
        return d.xpos[ids], d.xmat[ids]
    if objtype == ObjType.BODY:
        return d.xipos[ids], d.ximat[ids]
    if objtype == ObjType.GEOM:
        return d.geom_xpos[ids], d.geom_xmat[ids]
    if objtype == ObjType.SITE:
        return d.site_xpos[ids], d.site_xmat[ids]
    if objtype == ObjType.CAMERA:
        return d.cam_xpos[ids], d.cam_xmat[ids]
    raise ValueError(f"sensor: invalid object type {objtype}")


def object_quat(m: Model, d: Data, objtype: int, ids: np.ndarray) -> jax.Array:
    """Global orientation quaternion (k, 4) of objects of one type (get_xquat)."""
    ids = np.asarray(ids, int)
    if objtype == ObjType.XBODY:
        return d.xquat[ids]
    if objtype == ObjType.BODY:
        return quat_mul(d.xquat[ids], m.body_iquat[ids])
    local = {ObjType.GEOM: m.geom_quat, ObjType.SITE: m.site_quat, ObjType.CAMERA: m.cam_quat}
    if objtype not in local:
        raise ValueError(f"sensor: invalid object type {objtype}")
    return quat_mul(d.xquat[object_body(m, objtype, ids)], local[objtype][ids])


def _spatial_at(m: Model, d: Data, vec6: jax.Array, body: np.ndarray, pos: jax.Array) -> jax.Array:
    """Com-based motion vectors of `body` moved to points `pos` (global frame), (k, 6)."""
    com = d.subtree_com[np.asarray(m.body_rootid)[body]]
    ang, lin = vec6[:, :3], vec6[:, 3:]
    return jp.concatenate([ang, lin - jp.cross(pos - com, ang)], axis=-1)


def _rot_t(mat: jax.Array, v6: jax.Array) -> jax.Array:
    """Rotate both halves of (k, 6) vectors into the frames `mat` (k, 3, 3): R^T v."""
    return jp.concatenate([jp.einsum("kji,kj->ki", mat, v6[:, :3]), jp.einsum("kji,kj->ki", mat, v6[:, 3:])], axis=-1)


def object_velocity(m: Model, d: Data, objtype: int, ids: np.ndarray, local: bool) -> jax.Array:
    """6D velocity (angular, linear) at the objects' frames (mj_objectVelocity), (k, 6)."""
    body = object_body(m, objtype, ids)
    pos, mat = object_frame(m, d, objtype, ids)
    v = _spatial_at(m, d, d.cvel[body], body, pos)
    return _rot_t(mat, v) if local else v


def object_acceleration(m: Model, d: Data, objtype: int, ids: np.ndarray, local: bool) -> jax.Array:
    """6D acceleration at the objects' frames (mj_objectAcceleration), with the Coriolis term, (k, 6)."""
    body = object_body(m, objtype, ids)
    pos, mat = object_frame(m, d, objtype, ids)
    v = _spatial_at(m, d, d.cvel[body], body, pos)
    a = _spatial_at(m, d, d.cacc[body], body, pos)
    a = a.at[:, 3:].add(jp.cross(v[:, :3], v[:, 3:]))
    return _rot_t(mat, a) if local else a


# ---- energy -------------------------------------------------------------------------------------------------


def energy_pos(m: Model, d: Data) -> jax.Array:
    """Potential energy (mj_energyPos): gravity plus joint and tendon springs, ()."""
    dtype = d.qpos.dtype
    e = jp.zeros((), dtype)
    if not (m.opt.disableflags & DisableBit.GRAVITY) and m.nbody > 1:
        e = e - jp.sum(m.body_mass[1:] * (d.xipos[1:] @ m.opt.gravity))
    if m.opt.disableflags & DisableBit.SPRING:
        return e
    qpos_spring, lengthspring = plastic.references(m, d)
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    k = m.jnt_stiffness
    lin = np.nonzero((jtype == JointType.HINGE) | (jtype == JointType.SLIDE))[0]
    if lin.size:
        dq = d.qpos[qadr[lin]] - qpos_spring[qadr[lin]]
        e = e + 0.5 * jp.sum(k[lin] * dq * dq)
    free = np.nonzero(jtype == JointType.FREE)[0]
    if free.size:
        pi = qadr[free][:, None] + np.arange(3)
        dp = d.qpos[pi] - qpos_spring[pi]
        e = e + 0.5 * jp.sum(k[free] * jp.sum(dp * dp, axis=-1))
    rot = np.concatenate([np.nonzero(jtype == JointType.BALL)[0], free]).astype(int)
    if rot.size:
        start = qadr[rot] + np.where(jtype[rot] == JointType.FREE, 3, 0)
        pi = start[:, None] + np.arange(4)
        dr = quat_sub(d.qpos[pi], qpos_spring[pi])
        e = e + 0.5 * jp.sum(k[rot] * jp.sum(dr * dr, axis=-1))
    if m.ntendon:
        length = d.ten_length
        lo, hi = lengthspring[:, 0], lengthspring[:, 1]
        disp = jp.where(length > hi, hi - length, jp.where(length < lo, lo - length, 0.0))
        e = e + 0.5 * jp.sum(m.tendon_stiffness * disp * disp)
    return e


def energy_vel(m: Model, d: Data) -> jax.Array:
    """Kinetic energy 0.5 qvel' M qvel (mj_energyVel), ()."""
    if m.nv == 0:
        return jp.zeros((), d.qvel.dtype)
    return 0.5 * jp.dot(d.qvel, inertia.mul_m(m, d, d.qvel))


# ---- constraint-row lookups (limit sensors) -------------------------------------------------------------


def _efc_lookup(m: Model, d: Data, ctype: int, ids: np.ndarray, values: jax.Array) -> jax.Array:
    """values[j] of the first live efc row of type `ctype` and id ids[k], 0 where none, (k,)."""
    if m.njmax == 0:
        return jp.zeros((len(ids),), d.qpos.dtype)
    match = d.efc_mask[None, :] & (d.efc_type[None, :] == ctype) & (d.efc_id[None, :] == jp.asarray(ids)[:, None])
    first = jp.argmax(match, axis=1)
    return jp.where(jp.any(match, axis=1), values[first], 0.0)


# ---- sensor values by group ------------------------------------------------------------------------------


def _inside_site(m: Model, d: Data, point: jax.Array, sites: np.ndarray) -> jax.Array:
    """1.0 where `point` (k, 3) is inside the site's shape, else 0.0 (mju_insideGeom), (k,)."""
    return sensor_contact.inside_site(m, d, point, sites).astype(d.qpos.dtype)


def _cam_project(m: Model, d: Data, sites: np.ndarray, cams: np.ndarray) -> jax.Array:
    """Pixel coordinates (k, 2) of sites in cameras (cam_project): focal lengths in pixels from the intrinsics and
    sensor size (in float32, as MuJoCo computes them from its float fields), else from fovy; the depth clamped away
    from zero by MINVAL keeping its sign."""
    dtype = d.qpos.dtype
    res = jp.asarray(np.asarray(m.cam_resolution)[cams], dtype)  # (k, 2)
    ss, intr = m.cam_sensorsize[cams], m.cam_intrinsic[cams]
    has_ss = (ss[:, 0] != 0) & (ss[:, 1] != 0)
    f_fov = 0.5 / jp.tan(m.cam_fovy[cams] * np.pi / 360.0) * res[:, 1]
    safe_ss = jp.where(has_ss[:, None], ss, 1.0).astype(jp.float32)
    f_ss = (intr[:, :2].astype(jp.float32) / safe_ss * res.astype(jp.float32)).astype(dtype)
    fx = jp.where(has_ss, f_ss[:, 0], f_fov)
    fy = jp.where(has_ss, f_ss[:, 1], f_fov)
    rel = jp.einsum("kji,kj->ki", d.cam_xmat[cams], d.site_xpos[sites] - d.cam_xpos[cams])
    z = rel[:, 2]
    denom = jp.where(jp.abs(z) < MINVAL, jp.where(z < 0, -MINVAL, MINVAL), z)
    return jp.stack([-fx * rel[:, 0] / denom + 0.5 * res[:, 0], fy * rel[:, 1] / denom + 0.5 * res[:, 1]], axis=-1)


def _outputs(m: Model, act: np.ndarray) -> np.ndarray:
    """(k, outnum) indices of the force outputs of actuators `act`, which share their outnum (one value per
    output: orientation servos have 3)."""
    num = int(np.asarray(m.actuator_outnum)[act[0]]) if len(act) else 1
    return np.asarray(m.actuator_outadr)[act][:, None] + np.arange(num)


def _group_values(
    m: Model,
    d: Data,
    stype: int,
    objtype: int,
    objid: np.ndarray,
    reftype: int,
    refid: np.ndarray,
    shared: sensor_contact.Shared | None = None,
) -> jax.Array:
    """Values (k, dim) of k sensors sharing type, object type and reference type."""
    k = len(objid)
    dtype = d.qpos.dtype
    has_ref = refid[0] >= 0 if k else False
    col = jp.asarray
    if stype == S.MAGNETOMETER:
        return jp.einsum("kji,j->ki", d.site_xmat[objid], m.opt.magnetic)
    if stype == S.CAMPROJECTION:
        return _cam_project(m, d, objid, refid)
    if stype == S.JOINTPOS:
        return d.qpos[np.asarray(m.jnt_qposadr)[objid]][:, None]
    if stype == S.TENDONPOS:
        return d.ten_length[objid][:, None]
    if stype == S.ACTUATORPOS:
        return d.actuator_length[_outputs(m, objid)]
    if stype == S.BALLQUAT:
        adr = np.asarray(m.jnt_qposadr)[objid][:, None] + np.arange(4)
        return quat_normalize(d.qpos[adr])
    if stype in (S.JOINTLIMITPOS, S.TENDONLIMITPOS):
        ctype = ConstraintType.LIMIT_JOINT if stype == S.JOINTLIMITPOS else ConstraintType.LIMIT_TENDON
        return _efc_lookup(m, d, ctype, objid, d.efc_pos - d.efc_margin)[:, None]
    if stype in (S.JOINTLIMITVEL, S.TENDONLIMITVEL):
        ctype = ConstraintType.LIMIT_JOINT if stype == S.JOINTLIMITVEL else ConstraintType.LIMIT_TENDON
        return _efc_lookup(m, d, ctype, objid, d.efc_vel)[:, None]
    if stype in (S.JOINTLIMITFRC, S.TENDONLIMITFRC):
        ctype = ConstraintType.LIMIT_JOINT if stype == S.JOINTLIMITFRC else ConstraintType.LIMIT_TENDON
        return _efc_lookup(m, d, ctype, objid, d.efc_force)[:, None]
    if stype in (S.FRAMEPOS, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS):
        pos, mat = object_frame(m, d, objtype, objid)
        if stype == S.FRAMEPOS:
            v = pos
        else:
            v = mat[:, :, int(stype - S.FRAMEXAXIS)]
        if has_ref:
            rpos, rmat = object_frame(m, d, reftype, refid)
            if stype == S.FRAMEPOS:
                v = v - rpos
            v = jp.einsum("kji,kj->ki", rmat, v)
        return v
    if stype == S.FRAMEQUAT:
        q = object_quat(m, d, objtype, objid)
        if has_ref:
            q = quat_mul(quat_conj(object_quat(m, d, reftype, refid)), q)
        return q
    if stype == S.SUBTREECOM:
        return d.subtree_com[objid]
    if stype == S.CLOCK:
        return jp.broadcast_to(d.time, (k, 1)).astype(dtype)
    if stype == S.E_POTENTIAL:
        return jp.broadcast_to(energy_pos(m, d), (k, 1))
    if stype == S.E_KINETIC:
        return jp.broadcast_to(energy_vel(m, d), (k, 1))
    if stype == S.TOUCH:
        return sensor_contact.touch(m, d, objid, shared)[:, None]
    if stype == S.INSIDESITE:
        pos, _ = object_frame(m, d, objtype, objid)
        return _inside_site(m, d, pos, refid)[:, None]
    # velocity
    if stype in (S.VELOCIMETER, S.GYRO):
        v = object_velocity(m, d, ObjType.SITE, objid, local=True)
        return v[:, 3:] if stype == S.VELOCIMETER else v[:, :3]
    if stype == S.JOINTVEL:
        return d.qvel[np.asarray(m.jnt_dofadr)[objid]][:, None]
    if stype == S.TENDONVEL:
        return d.ten_velocity[objid][:, None]
    if stype == S.ACTUATORVEL:
        return d.actuator_velocity[_outputs(m, objid)]
    if stype == S.BALLANGVEL:
        return d.qvel[np.asarray(m.jnt_dofadr)[objid][:, None] + np.arange(3)]
    if stype in (S.FRAMELINVEL, S.FRAMEANGVEL):
        v = object_velocity(m, d, objtype, objid, local=False)
        if has_ref:
            pos, _ = object_frame(m, d, objtype, objid)
            rpos, rmat = object_frame(m, d, reftype, refid)
            vref = object_velocity(m, d, reftype, refid, local=False)
            rel = v - vref
            rel = rel.at[:, 3:].add(jp.cross(pos - rpos, vref[:, :3]))
            v = _rot_t(rmat, rel)
        return v[:, 3:] if stype == S.FRAMELINVEL else v[:, :3]
    if stype == S.SUBTREELINVEL:
        return d.subtree_linvel[objid]
    if stype == S.SUBTREEANGMOM:
        return d.subtree_angmom[objid]
    # acceleration / force
    if stype == S.ACCELEROMETER:
        return object_acceleration(m, d, ObjType.SITE, objid, local=True)[:, 3:]
    if stype in (S.FORCE, S.TORQUE):
        body = np.asarray(m.site_bodyid)[objid]
        frc = d.cfrc_int[body]
        com = d.subtree_com[np.asarray(m.body_rootid)[body]]
        torque = frc[:, :3] - jp.cross(d.site_xpos[objid] - com, frc[:, 3:])
        v = jp.concatenate([torque, frc[:, 3:]], axis=-1)
        v = _rot_t(d.site_xmat[objid], v)
        return v[:, 3:] if stype == S.FORCE else v[:, :3]
    if stype == S.ACTUATORFRC:
        return d.actuator_force[_outputs(m, objid)]
    if stype == S.JOINTACTFRC:
        return d.qfrc_actuator[np.asarray(m.jnt_dofadr)[objid]][:, None]
    if stype == S.TENDONACTFRC:
        trn = np.asarray(m.actuator_trntype) == TrnType.TENDON
        sel = trn[None, :] & (np.asarray(m.actuator_trnid)[:, 0][None, :] == objid[:, None])  # (k, nactuator)
        sel_out = np.zeros((len(objid), m.nout))
        sel_out[:, np.asarray(m.actuator_outadr)] = sel  # (tendon actuators have one output)
        return (col(sel_out).astype(dtype) @ d.actuator_force)[:, None]
    if stype in (S.FRAMELINACC, S.FRAMEANGACC):
        a = object_acceleration(m, d, objtype, objid, local=False)
        return a[:, 3:] if stype == S.FRAMELINACC else a[:, :3]
    raise NotImplementedError(f"mjx_lite: sensor type {SensorType(stype).name} is not supported")


def _compute_stage(m: Model, d: Data, stage: int, shared: sensor_contact.Shared | None = None,
                   done: np.ndarray | None = None) -> Data:  # fmt: skip
    """Compute and write the sensors of one stage, then apply their cutoff (shared: contact quantities already
    computed for this state, else computed on first use). done: ids of the stage's sensors computed elsewhere (a fused
    kernel, kernels/sensor_posvel.py, kernels/sensor_acc.py) whose values (after cutoff) are in d.sensordata."""
    if m.nsensor == 0 or m.opt.disableflags & DisableBit.SENSOR:
        return d
    needstage = np.asarray(m.sensor_needstage)
    sel = np.nonzero(needstage == stage)[0]
    if sel.size == 0:
        return d
    stypes = np.asarray(m.sensor_type)
    for i in sel:
        t = int(stypes[i])
        if t in _UNSUPPORTED:
            raise NotImplementedError(f"mjx_lite: sensor {i} ({SensorType(t).name.lower()}): {_UNSUPPORTED[t]}")
        if t == S.PLUGIN and (not m.sensor_plugincfg or m.sensor_plugincfg[i] is None):
            raise NotImplementedError(f"mjx_lite: sensor {i} (plugin): no built-in plugin configuration (a Model "
                                      "not compiled by mjx_lite's loader)")  # fmt: skip
    rest = sel if done is None else np.setdiff1d(sel, np.asarray(done, int))
    if rest.size:
        idx, values = _values(m, d, rest, shared)
        d = d.replace(sensordata=d.sensordata.at[idx].set(values))
    return history.read_sensors(m, d, sel)  # delayed sensors (and interval sensors between ticks) from their buffers


def history_raw(m: Model, d: Data) -> jax.Array | None:
    """(nsensordata,) d.sensordata with the sensors that have a history buffer computed afresh from d (what
    mj_advance inserts into a delayed sensor's buffer: mj_computeSensor at the step's start state); None when no
    sensor has a buffer (or sensors are disabled)."""
    ids = history.needs_raw(m)
    if not ids.size or m.opt.disableflags & DisableBit.SENSOR:
        return None
    idx, values = _values(m, d, ids)
    return d.sensordata.at[idx].set(values)


def _values(m: Model, d: Data, sel: np.ndarray, shared: sensor_contact.Shared | None = None
            ) -> tuple[np.ndarray, jax.Array]:
    """(sensordata indices, values after cutoff) of sensors `sel` (static ids), computed from d."""
    stypes = np.asarray(m.sensor_type)
    objtype, objid = np.asarray(m.sensor_objtype), np.asarray(m.sensor_objid)
    reftype, refid = np.asarray(m.sensor_reftype), np.asarray(m.sensor_refid)
    adr, dim = np.asarray(m.sensor_adr), np.asarray(m.sensor_dim)
    groups: dict[tuple, list[int]] = {}
    for i in sel:
        # contact, user, tactile sensors differ in size and options: one group each; rangefinders: one per data mask
        own = int(i) if stypes[i] in _OWN_GROUP or stypes[i] in sensor_geomdist.GEOMDIST_TYPES else -1
        if stypes[i] == S.RANGEFINDER:  # camera rangefinders: one group per data mask and resolution
            res = np.asarray(m.cam_resolution)[objid[i]] if objtype[i] == ObjType.CAMERA else (0, 0)
            own = (int(np.asarray(m.sensor_intprm)[i, 0]), int(res[0]), int(res[1]))
        if stypes[i] in (S.ACTUATORPOS, S.ACTUATORVEL, S.ACTUATORFRC):  # one group per number of outputs
            own = int(dim[i])
        if stypes[i] == S.INSIDESITE and np.asarray(m.sensor_intprm)[i, 0]:  # enclosed: one group each
            own = ("enclosed", int(i))
        key = (int(stypes[i]), int(objtype[i]), int(reftype[i]), bool(refid[i] >= 0), own)
        groups.setdefault(key, []).append(int(i))
    idx, vals = [], []
    shared = shared or sensor_contact.Shared(m, d)  # contact forces and order, once for all contact sensors
    gd_ids = [int(i) for i in sel if stypes[i] in sensor_geomdist.GEOMDIST_TYPES]
    gd = dict(zip(gd_ids, sensor_geomdist.geomdist(m, d, gd_ids))) if gd_ids else {}
    for (t, ot, rt, _, own), members in groups.items():
        mem = np.asarray(members)
        if t == S.CONTACT:
            v = sensor_contact.contact_sensor(m, d, own, shared)[None, :]
        elif t == S.USER:
            v = sensor_user.values(m, d, own)[None, :]
        elif t == S.TACTILE:
            v = sensor_tactile.tactile(m, d, own)[None, :]
        elif t == S.PLUGIN:  # the first sensor of a touch_grid instance (MuJoCo leaves the others' values alone)
            first = int(np.nonzero(np.asarray(m.sensor_plugin) == np.asarray(m.sensor_plugin)[own])[0][0])
            v = plugin_touch_grid.touch_grid(m, d, own, shared.forces)[None, :] if first == own else \
                jp.zeros((1, int(dim[own])), d.sensordata.dtype)  # fmt: skip
        elif t == S.RANGEFINDER and ot == ObjType.CAMERA:
            v = ray_camera.rangefinder(m, d, objid[mem], own[0])
        elif t == S.RANGEFINDER:
            v = ray.rangefinder(m, d, objid[mem], own[0])
        elif t in sensor_geomdist.GEOMDIST_TYPES:
            v = gd[own][None, :]
        elif t == S.INSIDESITE and isinstance(own, tuple):
            v = sensor_inside.enclosed(m, d, own[1])
        else:
            v = _group_values(m, d, t, ot, objid[mem], rt, refid[mem], shared)
        v = jp.asarray(v, d.sensordata.dtype).reshape(len(mem), -1)
        ndim = int(dim[mem[0]])
        if v.shape[1] != ndim:
            raise ValueError(f"sensor type {SensorType(t).name}: got dim {v.shape[1]}, model says {ndim}")
        idx.append(adr[mem][:, None] + np.arange(ndim))
        vals.append(v)
    idx = np.concatenate([i.reshape(-1) for i in idx])
    values = jp.concatenate([v.reshape(-1) for v in vals])
    # cutoff per element
    owner = np.concatenate([np.repeat(np.asarray(g), dim[np.asarray(g)]) for g in groups.values()])
    dtype_el = np.asarray(m.sensor_datatype)[owner]
    cutoff = m.sensor_cutoff[owner]
    # MuJoCo ignores the cutoff of contact sensors (and uses fromto's as a distance bound instead)
    on = (cutoff > 0) & jp.asarray(~np.isin(stypes[owner], (S.CONTACT, S.GEOMFROMTO)))
    real = jp.asarray(dtype_el == DataType.REAL)
    positive = jp.asarray(dtype_el == DataType.POSITIVE)
    values = jp.where(on & real, jp.clip(values, -cutoff, cutoff), values)
    values = jp.where(on & positive, jp.minimum(cutoff, values), values)
    return idx, values


def _needs(m: Model, stage: int, types: tuple) -> bool:
    if m.nsensor == 0 or m.opt.disableflags & DisableBit.SENSOR:
        return False
    st = np.asarray(m.sensor_type)[np.asarray(m.sensor_needstage) == stage]
    return bool(np.isin(st, np.asarray(types, int)).any())


def sensor_pos(m: Model, d: Data) -> Data:
    """Position-dependent sensors (mj_sensorPos)."""
    return _compute_stage(m, d, Stage.POS)


def sensor_vel(m: Model, d: Data) -> Data:
    """Velocity-dependent sensors (mj_sensorVel); computes subtree_linvel/angmom when needed."""
    if _needs(m, Stage.VEL, _NEED_SUBTREEVEL):
        d = velocity.subtree_vel(m, d)
    return _compute_stage(m, d, Stage.VEL)


def sensor_acc(m: Model, d: Data) -> Data:
    """Acceleration/force sensors (mj_sensorAcc); runs rne_postconstraint (cacc, cfrc_*) once, and only when a
    sensor needs it (as MuJoCo); the contact forces are computed once for cfrc_ext and the touch/contact sensors."""
    shared = sensor_contact.Shared(m, d)
    if _needs(m, Stage.ACC, _NEED_RNEPOST):
        forces = shared.forces if m.nconmax else None
        d = rne.rne_postconstraint(m, d, contact_force.cfrc_ext_constraint(m, d, forces))
    return _compute_stage(m, d, Stage.ACC, shared)
