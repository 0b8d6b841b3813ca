"""The position and velocity sensors' stages (mj_sensorPos, mj_sensorVel) as one fused kernel each, for a block of
environments.

Covered sensor types (the others of the stage stay XLA, see below):
  position: jointpos, tendonpos, actuatorpos, ballquat, framepos, framexaxis/yaxis/zaxis, framequat (objects and
            reference frames of body, xbody, geom, site or camera), subtreecom;
  velocity: velocimeter, gyro, jointvel, tendonvel, actuatorvel, ballangvel, framelinvel, frameangvel (with or
            without a reference frame), subtreelinvel, subtreeangmom.

Outputs (per environment): sensordata (nsensordata,), every element: the covered sensors' values after their cutoff,
the others copied from the input; in the velocity stage, when a sensor of the stage needs them (subtree linear
velocity or angular momentum, a user sensor), subtree_linvel and subtree_angmom (nbody, 3) (mj_subtreeVel).
Inputs: sensordata and the Data fields the covered sensors read (qpos, ten_length, actuator_length, object poses
xpos/xquat/xmat/xipos/ximat/geom_xpos/geom_xmat/site_xpos/site_xmat/cam_xpos/cam_xmat, subtree_com; qvel,
ten_velocity, actuator_velocity, cvel), the Model floats they read (sensor_cutoff; body_iquat, geom_quat, site_quat,
cam_quat for frame quaternions; body_mass, body_subtreemass, body_inertia for mj_subtreeVel), shared by the block
unless vmapped.

The body: the uncovered elements copied; element copies (jointpos, tendonpos, actuatorpos, subtreecom, jointvel,
tendonvel, actuatorvel, ballangvel, subtreelinvel, subtreeangmom) one loop per source field over a static table of
(source element, sensor, sensordata element); then one loop per (type, object type, reference type) group over its
members (static tables: the object, its body and root, the reference's, the sensor id and address) computing the
sensor's value per lane (the formulas are sensor.py's `_group_values` and velocity.subtree_vel's written per lane);
every value goes through its sensor's cutoff (REAL: clip to +-cutoff, POSITIVE: min(cutoff, x), where cutoff > 0)
before it is written. mj_subtreeVel: the bodies' com velocities and linear momenta, summed leaves up into the
subtree masses' velocities; the bodies' angular momenta about their own com plus their mass's about the subtree com,
summed leaves up with each child subtree's momentum about its parent's subtree com.

The stage's other sensors (magnetometer, clock, energies, limits, touch, rangefinders, user, ...) run afterwards as
the stage's XLA code on the kernel's sensordata (`sensor._compute_stage`, its done argument), then the history
buffers' reads. Derivatives go through the XLA twin (launch.call's custom_jvp: sensor._values and
velocity.subtree_vel on the kernel's inputs).

Fused when the stage has a covered sensor (sensors not disabled).
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import sensor, support, velocity
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.pipeline.kernels.velocity import _cross
from mjx_lite.types import MINVAL, Data, DataType, DisableBit, Model, ObjType, SensorType, Stage

__all__ = ["COVERED", "fusable", "sensor_stage"]

S = SensorType
# element copies: sensor type -> (source field, elements per sensor (None: sensor_dim), source of the first element)
_COPY = {
    S.JOINTPOS: ("qpos", 1, "jnt_qposadr"),
    S.TENDONPOS: ("ten_length", 1, None),
    S.ACTUATORPOS: ("actuator_length", None, "actuator_outadr"),
    S.SUBTREECOM: ("subtree_com", 3, None),
    S.JOINTVEL: ("qvel", 1, "jnt_dofadr"),
    S.TENDONVEL: ("ten_velocity", 1, None),
    S.ACTUATORVEL: ("actuator_velocity", None, "actuator_outadr"),
    S.BALLANGVEL: ("qvel", 3, "jnt_dofadr"),
    S.SUBTREELINVEL: ("subtree_linvel", 3, None),
    S.SUBTREEANGMOM: ("subtree_angmom", 3, None),
}
_FRAME_POS = (S.FRAMEPOS, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS, S.FRAMEQUAT, S.BALLQUAT)
_FRAME_VEL = (S.VELOCIMETER, S.GYRO, S.FRAMELINVEL, S.FRAMEANGVEL)
COVERED = {
    Stage.POS: (S.JOINTPOS, S.TENDONPOS, S.ACTUATORPOS, S.SUBTREECOM) + _FRAME_POS,
    Stage.VEL: (S.JOINTVEL, S.TENDONVEL, S.ACTUATORVEL, S.BALLANGVEL, S.SUBTREELINVEL, S.SUBTREEANGMOM) + _FRAME_VEL,
}
# an object type's frame: (position field, orientation matrix field, local quaternion field of the Model or None)
_FRAMES = {ObjType.XBODY: ("xpos", "xmat", None), ObjType.BODY: ("xipos", "ximat", "body_iquat"),
           ObjType.GEOM: ("geom_xpos", "geom_xmat", "geom_quat"), ObjType.SITE: ("site_xpos", "site_xmat", "site_quat"),
           ObjType.CAMERA: ("cam_xpos", "cam_xmat", "cam_quat")}  # fmt: skip
_NONE = -1  # no reference frame
_MODEL_FLOATS = ("sensor_cutoff", "body_iquat", "geom_quat", "site_quat", "cam_quat", "body_mass", "body_subtreemass",
                 "body_inertia")  # fmt: skip
_SUBTREE_IN = ("cvel", "xipos", "ximat", "subtree_com")


def _active(m: Model) -> bool:
    return bool(m.nsensor) and not m.opt.disableflags & DisableBit.SENSOR


def _covered(m: Model, stage: int) -> np.ndarray:
    """Static ids of the stage's sensors the kernel computes: covered types; frame sensors of objects (and
    references) with a frame (`_FRAMES`)."""
    if not _active(m):
        return np.zeros(0, int)
    st, ot, rt = np.asarray(m.sensor_type), np.asarray(m.sensor_objtype), np.asarray(m.sensor_reftype)
    rid = np.asarray(m.sensor_refid)
    ok = (np.asarray(m.sensor_needstage) == stage) & np.isin(st, np.asarray(COVERED.get(stage, ()), int))
    frame = np.isin(st, np.asarray((S.FRAMEPOS, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS, S.FRAMEQUAT, S.FRAMELINVEL,
                                    S.FRAMEANGVEL), int))  # fmt: skip
    has_frame = np.isin(ot, np.asarray(list(_FRAMES), int)) & ((rid < 0) | np.isin(rt, np.asarray(list(_FRAMES), int)))
    return np.nonzero(ok & (~frame | has_frame))[0]


def _subtree(m: Model, stage: int) -> bool:
    """Static: the kernel computes mj_subtreeVel (the velocity stage and a sensor of it needs it)."""
    return stage == Stage.VEL and sensor._needs(m, Stage.VEL, sensor._NEED_SUBTREEVEL)


def fusable(m: Model, stage: int) -> bool:
    """Static: the stage has a sensor the kernel computes (see the module docstring)."""
    return len(_covered(m, stage)) > 0


def _cut_mode(m: Model, ids) -> np.ndarray:
    """Static per sensor: 1 REAL, 2 POSITIVE (their cutoff applies where > 0), 0 none (axis, quaternion)."""
    dt = np.asarray(m.sensor_datatype)[np.asarray(ids, int)]
    return np.where(dt == DataType.REAL, 1, np.where(dt == DataType.POSITIVE, 2, 0))


def _plan(m: Model, stage: int) -> dict:
    """Static plan: int32 tables, the copy fields, the frame groups (type, object type, reference type, count),
    the covered ids, the elements kept from the input and the inputs the kernel reads."""
    ids = _covered(m, stage)
    st, ot, oid = np.asarray(m.sensor_type), np.asarray(m.sensor_objtype), np.asarray(m.sensor_objid)
    rt, rid = np.asarray(m.sensor_reftype), np.asarray(m.sensor_refid)
    adr, dim = np.asarray(m.sensor_adr), np.asarray(m.sensor_dim)
    root = np.asarray(m.body_rootid)
    tab, copies, groups, fields, floats = {}, {}, {}, set(), {"sensor_cutoff"}
    written = np.zeros(m.nsensordata, bool)
    for i in ids:
        written[adr[i] : adr[i] + dim[i]] = True
        t = int(st[i])
        if t in _COPY:
            src, n, first = _COPY[t]
            n = int(dim[i]) if n is None else n
            start = int(oid[i]) * n if first is None else int(np.asarray(getattr(m, first))[oid[i]])
            c = copies.setdefault(src, ([], [], []))
            c[0].extend(range(start, start + n))
            c[1].extend([int(i)] * n)
            c[2].extend(range(adr[i], adr[i] + n))
            fields.add(src)
            continue
        ref = int(rt[i]) if rid[i] >= 0 and t in (S.FRAMEPOS, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS, S.FRAMEQUAT,
                                                  S.FRAMELINVEL, S.FRAMEANGVEL) else _NONE  # fmt: skip
        objtype = ObjType.SITE if t in (S.VELOCIMETER, S.GYRO) else ObjType.JOINT if t == S.BALLQUAT else int(ot[i])
        groups.setdefault((t, int(objtype), ref), []).append(int(i))
    for c, (s, sid, dst) in enumerate(copies.values()):
        tab.update({f"c{c}_src": s, f"c{c}_sid": sid, f"c{c}_dst": dst, f"c{c}_mode": _cut_mode(m, sid)})
    gl = []
    for g, ((t, objtype, ref), mem) in enumerate(groups.items()):
        i = np.asarray(mem)
        tab.update({f"g{g}_sid": i, f"g{g}_dst": adr[i], f"g{g}_mode": _cut_mode(m, i)})
        if t == S.BALLQUAT:
            tab[f"g{g}_obj"] = np.asarray(m.jnt_qposadr)[oid[i]]
            fields.add("qpos")
        else:
            tab[f"g{g}_obj"] = oid[i]
            pos, mat, quat = _FRAMES[objtype]
            body = sensor.object_body(m, objtype, oid[i])
            tab.update({f"g{g}_body": body, f"g{g}_root": root[body]})
            if t == S.FRAMEQUAT:
                fields.add("xquat")
                if quat:
                    floats.add(quat)
            else:
                fields.add(pos)
            if t in (S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS, S.VELOCIMETER, S.GYRO):
                fields.add(mat)
            if t in _FRAME_VEL:
                fields.update(("cvel", "subtree_com"))
        if ref != _NONE:
            rpos, rmat, rquat = _FRAMES[ref]
            rbody = sensor.object_body(m, ref, rid[i])
            tab.update({f"g{g}_ref": rid[i], f"g{g}_rbody": rbody, f"g{g}_rroot": root[rbody]})
            if t == S.FRAMEQUAT:
                if rquat:
                    floats.add(rquat)
            else:
                fields.update((rpos, rmat))
        gl.append((t, objtype, ref, len(mem)))
    subtree = _subtree(m, stage)
    if subtree:
        fields.update(_SUBTREE_IN)
        floats.update(("body_mass", "body_subtreemass", "body_inertia"))
        tab.update(body_parentid=m.body_parentid, body_root=root)
    fields.discard("subtree_linvel")
    fields.discard("subtree_angmom")
    keep = np.nonzero(~written)[0]
    if keep.size:
        tab["keep"] = keep
    tables = {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}
    sel = np.nonzero(np.asarray(m.sensor_needstage) == stage)[0] if _active(m) else np.zeros(0, int)
    return dict(tables=tables, copies=list(copies), groups=gl, ids=ids, keep=int(keep.size), subtree=subtree,
                fields=sorted(fields), floats=sorted(floats), rest=len(np.setdiff1d(sel, ids)) > 0)  # fmt: skip


def _quat_mul(a, b):
    """Hamilton product of two quaternions given as 4-tuples of lanes (math.quat_mul's order of terms)."""
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)  # fmt: skip


def _body(m: Model, plan: dict):
    nbody = m.nbody

    def body(io):
        tab, read, rv, out, put = io.table, io.read, io.read_vec, io.load_vec, io.write_vec

        def sub(a, b):
            return tuple(a[k] - b[k] for k in range(len(a)))

        def rot_t(mt, v):  # R' v, R row-major (9,)
            return tuple(mt[i] * v[0] + mt[3 + i] * v[1] + mt[6 + i] * v[2] for i in range(3))

        def emit(sid, mode, dst, v):  # the sensor's cutoff, then sensordata[dst + j] = v[j]
            cut = read("sensor_cutoff", sid)
            on = cut > 0
            real, positive = on & (mode == 1), on & (mode == 2)
            for j, c in enumerate(v):
                c = where(real, jp.minimum(jp.maximum(c, -cut), cut), c, io.dtype)
                c = where(positive, jp.minimum(cut, c), c, io.dtype)
                io.write("sensordata", dst + j, c)

        if plan["keep"]:
            _loop(0, plan["keep"], lambda k: io.write("sensordata", tab("keep", k), read("sensordata", tab("keep", k))))

        if plan["subtree"]:
            # the bodies' com velocities (linear part into _lin) and linear momenta (into subtree_linvel)
            def bodyvel(b):
                cv = rv("cvel", b, 6)
                com, xi = rv("subtree_com", tab("body_root", b), 3), rv("xipos", b, 3)
                lin = sub(cv[3:], _cross(sub(xi, com), cv[:3]))
                put("_lin", b, tuple(io.lanes(c) for c in lin))
                mass = read("body_mass", b)
                put("subtree_linvel", b, tuple(io.lanes(c * mass) for c in lin))

            _loop(0, nbody, bodyvel)

            def linpush(k):
                b = nbody - 1 - k
                par = tab("body_parentid", b)
                a, c = out("subtree_linvel", par, 3), out("subtree_linvel", b, 3)
                put("subtree_linvel", par, tuple(a[j] + c[j] for j in range(3)))

            _loop(0, nbody - 1, linpush)

            def linvel(b):
                mass = jp.maximum(MINVAL, read("body_subtreemass", b))
                put("subtree_linvel", b, tuple(io.lanes(c / mass) for c in out("subtree_linvel", b, 3)))

            _loop(0, nbody, linvel)

            # the angular momenta: each body's about its com and its mass's about its subtree com
            def angmom(b):
                mt, ang, inertia = rv("ximat", b, 9), rv("cvel", b, 6)[:3], rv("body_inertia", b, 3)
                loc = tuple(c * inertia[k] for k, c in enumerate(rot_t(mt, ang)))
                own = tuple(mt[3 * i] * loc[0] + mt[3 * i + 1] * loc[1] + mt[3 * i + 2] * loc[2] for i in range(3))
                mass = read("body_mass", b)
                r = sub(rv("xipos", b, 3), rv("subtree_com", b, 3))
                dv = sub(out("_lin", b, 3), out("subtree_linvel", b, 3))
                mom = _cross(r, tuple(mass * c for c in dv))
                mom = tuple(where(b > 0, c, 0.0, io.dtype) for c in mom)  # (the world's: none)
                put("subtree_angmom", b, tuple(io.lanes(own[k] + mom[k]) for k in range(3)))

            _loop(0, nbody, angmom)

            def angpush(k):  # leaves up: the child's subtree and its momentum about the parent's subtree com
                b = nbody - 1 - k
                par = tab("body_parentid", b)
                dx = sub(rv("subtree_com", b, 3), rv("subtree_com", par, 3))
                smass = read("body_subtreemass", b)
                dv = tuple(smass * c for c in sub(out("subtree_linvel", b, 3), out("subtree_linvel", par, 3)))
                tr, a, c = _cross(dx, dv), out("subtree_angmom", par, 3), out("subtree_angmom", b, 3)
                put("subtree_angmom", par, tuple(io.lanes(a[j] + c[j] + tr[j]) for j in range(3)))

            _loop(0, nbody - 1, angpush)

        for c, src in enumerate(plan["copies"]):
            own = src in ("subtree_linvel", "subtree_angmom")  # the kernel's own outputs

            def copy(k, c=c, src=src, own=own):
                v = out(src, tab(f"c{c}_src", k), 1)[0] if own else read(src, tab(f"c{c}_src", k))
                emit(tab(f"c{c}_sid", k), tab(f"c{c}_mode", k), tab(f"c{c}_dst", k), (v,))

            _loop(0, len(plan["tables"][f"c{c}_src"]), copy)

        for g, (t, objtype, ref, count) in enumerate(plan["groups"]):

            def one(k, g=g, t=t, objtype=objtype, ref=ref):
                obj = tab(f"g{g}_obj", k)
                if t == S.BALLQUAT:
                    v = launch.unit_quat(tuple(read("qpos", obj + j) for j in range(4)))
                elif t == S.FRAMEQUAT:
                    v = _quat(io, objtype, obj, tab(f"g{g}_body", k))
                    if ref != _NONE:
                        q = _quat(io, ref, tab(f"g{g}_ref", k), tab(f"g{g}_rbody", k))
                        v = _quat_mul((q[0], -q[1], -q[2], -q[3]), v)
                elif t in (S.FRAMEPOS, S.FRAMEXAXIS, S.FRAMEYAXIS, S.FRAMEZAXIS):
                    pname, mname, _ = _FRAMES[objtype]
                    if t == S.FRAMEPOS:
                        v = rv(pname, obj, 3)
                    else:
                        a = int(t - S.FRAMEXAXIS)
                        v = tuple(read(mname, 9 * obj + 3 * i + a) for i in range(3))
                    if ref != _NONE:
                        rpname, rmname, _ = _FRAMES[ref]
                        r = tab(f"g{g}_ref", k)
                        if t == S.FRAMEPOS:
                            v = sub(v, rv(rpname, r, 3))
                        v = rot_t(rv(rmname, r, 9), v)
                else:  # velocities
                    pname, mname, _ = _FRAMES[objtype]
                    pos = rv(pname, obj, 3)
                    ang, lin = _velocity(io, tab(f"g{g}_body", k), tab(f"g{g}_root", k), pos)
                    if t in (S.VELOCIMETER, S.GYRO):
                        mt = rv(mname, obj, 9)
                        ang, lin = rot_t(mt, ang), rot_t(mt, lin)
                    elif ref != _NONE:
                        rpname, rmname, _ = _FRAMES[ref]
                        r = tab(f"g{g}_ref", k)
                        rpos = rv(rpname, r, 3)
                        rang, rlin = _velocity(io, tab(f"g{g}_rbody", k), tab(f"g{g}_rroot", k), rpos)
                        extra = _cross(sub(pos, rpos), rang)
                        ang = sub(ang, rang)
                        lin = tuple(c + e for c, e in zip(sub(lin, rlin), extra))
                        rmt = rv(rmname, r, 9)
                        ang, lin = rot_t(rmt, ang), rot_t(rmt, lin)
                    v = lin if t in (S.VELOCIMETER, S.FRAMELINVEL) else ang
                emit(tab(f"g{g}_sid", k), tab(f"g{g}_mode", k), tab(f"g{g}_dst", k), v)

            _loop(0, count, one)

    return body


def _quat(io, objtype: int, obj, bodyid):
    """The global orientation quaternion of an object (sensor.object_quat per lane)."""
    q = io.read_vec("xquat", obj if objtype == ObjType.XBODY else bodyid, 4)
    local = _FRAMES[objtype][2]
    return q if local is None else _quat_mul(q, io.read_vec(local, obj, 4))


def _velocity(io, bodyid, root, pos):
    """The body's com-based velocity moved to the point pos: (angular, linear) (sensor._spatial_at per lane)."""
    cv = io.read_vec("cvel", bodyid, 6)
    com = io.read_vec("subtree_com", root, 3)
    return cv[:3], tuple(cv[3 + i] - c for i, c in enumerate(_cross(tuple(p - q for p, q in zip(pos, com)), cv[:3])))


def _twin(m: Model, d: Data, stage: int, plan: dict):
    """The XLA twin: velocity.subtree_vel (when the kernel computes it) and sensor._values of the covered sensors on
    Model/Data whose other traced fields are zeros (launch.detach), scattered into the input's sensordata."""
    ids = plan["ids"]

    def xla(x):
        def field(obj, n):
            return x[n].reshape(jp.shape(getattr(obj, n)))

        m2 = launch.detach(m, {n: field(m, n) for n in plan["floats"]})
        d2 = launch.detach(d, {n: field(d, n) for n in plan["fields"]})
        res = {}
        if plan["subtree"]:
            d2 = velocity.subtree_vel(m2, d2)
            res.update(subtree_linvel=d2.subtree_linvel, subtree_angmom=d2.subtree_angmom)
        vidx, vals = sensor._values(m2, d2, ids)
        res["sensordata"] = x["sensordata"].at[vidx].set(vals.astype(x["sensordata"].dtype))
        return res

    return xla


def sensor_stage(m: Model, d: Data, stage: int, how: launch.Launch) -> Data:
    """mj_sensorPos (stage POS) or mj_sensorVel (VEL) with the covered sensors as one fused kernel (the caller checks
    `fusable`); the stage's other sensors by its XLA code, then the history buffers' reads."""
    plan = support.memo(m, f"kernels_sensor_{int(stage)}_plan", lambda m: _plan(m, stage))
    x = {n: getattr(d, n) for n in plan["fields"]}
    x.update({n: getattr(m, n) for n in plan["floats"]})
    x["sensordata"] = d.sensordata
    outputs = {"sensordata": (m.nsensordata,)}
    if plan["subtree"]:
        outputs.update(subtree_linvel=(m.nbody, 3), subtree_angmom=(m.nbody, 3), _lin=(m.nbody, 3))
    tables = plan["tables"]
    name = "sensor_pos" if stage == Stage.POS else "sensor_vel"
    k = launch.Kernel(name, {n: tuple(jp.shape(v)) for n, v in x.items()}, outputs, tables, _body(m, plan),
                      _twin(m, d, stage, plan))  # fmt: skip
    dtype = d.qpos.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    d = d.replace(**{n: v.astype(getattr(d, n).dtype) for n, v in out.items()})
    return sensor._compute_stage(m, d, stage, None, plan["ids"])
