"""The acceleration sensors' stage (mj_sensorAcc) as one fused kernel: mj_rnePostConstraint (cacc, cfrc_int,
cfrc_ext, with the contact forces' wrenches) and the accelerometer, force, torque, frame linear and angular
acceleration sensors, for a block of environments.

Outputs (per environment): cacc, cfrc_int, cfrc_ext (nbody, 6) and sensordata: the covered sensors' values after
their cutoff, its other elements copied from the input. Inputs: qvel, qacc (nv,), cdof, cdof_dot (nv, 6), cinert
(nbody, 10), cvel, xfrc_applied (nbody, 6), subtree_com, xipos (nbody, 3); the contacts' frame, pos, dim (and
friction for pyramidal cones, adhesion with adhesive contacts), efc_force and efc_mask; the connect and weld wrenches
(`contact_force.equality_wrenches`, XLA) where the model has those rows; the sensors' object frames (site, geom,
body, camera poses) they read and sensordata; the Model's opt.gravity and sensor_cutoff (shared by the block unless
vmapped).

The body, in order (the formulas are contact_force.py's, rne.rne_postconstraint's and sensor.py's written per lane):
  - the contact wrenches: one loop per contact dimension over its slots (static tables: the slot's first row, its
    two bodies and their roots; the slots' bodies are static: `driver.slot_bodies`): the contact-frame force
    (mj_contactForce: pyramidal edge forces summed and differenced, zero beyond the contact's dim and where its
    first row is not live, minus the adhesion), rotated to the world, added at the contact point to body 2 and
    subtracted from body 1 about their roots' subtree com;
  - cfrc_ext = xfrc_applied moved to the com frame + (contact wrenches + equality wrenches), zero at the world;
  - cacc: bodies parents first, cacc(parent) + the body's dofs' cdof_dot qvel + cdof qacc, from the world's
    [0, -gravity];
  - cfrc_int: cinert cacc + cvel x* (cinert cvel) - cfrc_ext (zero at the world), summed leaves up into the world;
  - the sensors, one loop per (type, object type) over their members: the object's acceleration (its body's cacc
    and cvel moved to the object's point, with the Coriolis term; rotated into the object's frame for the
    accelerometer), or the body's cfrc_int moved to the site and rotated into it (force, torque); then the cutoff.
The sensors of other types in the stage stay XLA (`sensor._compute_stage`, reading the kernel's cacc, cfrc_int,
cfrc_ext and sensordata). Derivatives go through the XLA twin (launch.call's custom_jvp: the stage's XLA code on the
kernel's inputs).

Fused when the stage runs mj_rnePostConstraint (a sensor of the stage needs it), the model has dofs and no flexes,
and the contact slots' bodies are static (no trimmed or compacted pair group, no capacity cap).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, contact_force, rne, sensor, sensor_contact, support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.pipeline.kernels.velocity import _cross, _force_cross, _inert_mul
from mjx_lite.types import ConeType, Data, DataType, DisableBit, Model, ObjType, SensorType, Stage

__all__ = ["COVERED", "fusable", "sensor_acc"]

S = SensorType
COVERED = (S.ACCELEROMETER, S.FORCE, S.TORQUE, S.FRAMELINACC, S.FRAMEANGACC)
# an object type's frame: (position field, orientation field) of Data
_FRAMES = {ObjType.XBODY: ("xpos", "xmat"), ObjType.BODY: ("xipos", "ximat"), ObjType.GEOM: ("geom_xpos", "geom_xmat"),
           ObjType.SITE: ("site_xpos", "site_xmat"), ObjType.CAMERA: ("cam_xpos", "cam_xmat")}  # fmt: skip
_CON = ("frame", "pos", "dim", "friction", "adhesion")  # contact fields the kernel may read (as "con_" inputs)


def _contacts(m: Model) -> bool:
    """Static: the model has contact rows whose forces enter cfrc_ext."""
    return bool(not m.opt.disableflags & DisableBit.CONSTRAINT and m.njmax and m.nconmax
                and len(constraint.plan(m).con_dim))  # fmt: skip


def fusable(m: Model) -> bool:
    """Static: the stage runs mj_rnePostConstraint and the kernel covers its contacts (see the module docstring)."""
    if not m.nv or m.nflex or not sensor._needs(m, Stage.ACC, sensor._NEED_RNEPOST):
        return False
    return not _contacts(m) or driver.slot_bodies(m) is not None


def _covered(m: Model) -> np.ndarray:
    """Static ids of the stage's sensors the kernel computes."""
    st = np.asarray(m.sensor_type)
    return np.nonzero((np.asarray(m.sensor_needstage) == Stage.ACC) & np.isin(st, np.asarray(COVERED, int)))[0]


def _plan(m: Model) -> dict:
    """Static plan: int32 tables, the contact groups (dim, rows per slot, slot count), the sensor groups (type,
    object type, count) and the covered sensors' ids and sensordata indices."""
    root = np.asarray(m.body_rootid)
    tab = dict(body_parentid=m.body_parentid, body_dofadr=m.body_dofadr, body_dofnum=m.body_dofnum, body_rootid=root)
    cgroups = []
    if _contacts(m):
        p = constraint.plan(m)
        b1, b2 = driver.slot_bodies(m)
        for dim in sorted(set(p.con_dim.tolist())):
            slots = np.nonzero(p.con_dim == dim)[0]
            g = len(cgroups)
            tab.update({f"c{g}_slot": slots, f"c{g}_adr": p.con_adr[slots], f"c{g}_b1": b1[slots],
                        f"c{g}_b2": b2[slots], f"c{g}_r1": root[b1[slots]], f"c{g}_r2": root[b2[slots]]})  # fmt: skip
            cgroups.append((int(dim), int(p.con_rows[slots][0]), len(slots)))
    ids = _covered(m)
    st, ot, oid = np.asarray(m.sensor_type), np.asarray(m.sensor_objtype), np.asarray(m.sensor_objid)
    dim, adr = np.asarray(m.sensor_dim), np.asarray(m.sensor_adr)
    sgroups = {}
    for i in ids:
        objtype = ObjType.SITE if st[i] in (S.ACCELEROMETER, S.FORCE, S.TORQUE) else int(ot[i])
        sgroups.setdefault((int(st[i]), int(objtype)), []).append((int(i), int(adr[i])))
    sg = []
    for n, ((t, objtype), mem) in enumerate(sgroups.items()):
        i = np.asarray([a for a, _ in mem])
        body = sensor.object_body(m, objtype, oid[i])
        tab.update({f"s{n}_obj": oid[i], f"s{n}_body": body, f"s{n}_root": root[body], f"s{n}_sid": i,
                    f"s{n}_adr": np.asarray([b for _, b in mem]),
                    f"s{n}_dt": np.asarray(m.sensor_datatype)[i]})  # fmt: skip
        sg.append((t, objtype, len(i)))
    idx = np.concatenate([adr[i] + np.arange(dim[i]) for i in ids]) if len(ids) else np.zeros(0, int)
    keep = np.setdiff1d(np.arange(m.nsensordata), idx) if len(ids) else np.zeros(0, int)
    tab["keep"] = keep
    tables = {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}
    return dict(tables=tables, cgroups=cgroups, sgroups=sg, ids=ids, keep=len(keep))


def _inputs(m: Model, d: Data, plan: dict) -> dict:
    """The kernel's inputs (flat), see the module docstring."""
    x = {n: getattr(d, n) for n in ("qvel", "qacc", "cdof", "cdof_dot", "cinert", "cvel", "xfrc_applied",
                                    "subtree_com", "xipos")}  # fmt: skip
    if not m.opt.disableflags & DisableBit.GRAVITY:
        x["gravity"] = m.opt.gravity
    if plan["cgroups"]:
        x.update(efc_force=d.efc_force, efc_mask=d.efc_mask, con_frame=d.contact.frame, con_pos=d.contact.pos,
                 con_dim=d.contact.dim)  # fmt: skip
        if any(dim > 1 for dim, _, _ in plan["cgroups"]) and m.opt.cone != ConeType.ELLIPTIC:
            x["con_friction"] = d.contact.friction
        if m.flg_adhesion:
            x["con_adhesion"] = d.contact.adhesion
    eq = contact_force.equality_wrenches(m, d)
    if eq is not None:
        x["cfrc_eq"] = eq
    for t, objtype, _ in plan["sgroups"]:
        pos, mat = _FRAMES[objtype]
        x[pos] = getattr(d, pos)
        if t in (S.ACCELEROMETER, S.FORCE, S.TORQUE):
            x[mat] = getattr(d, mat)
    if len(plan["ids"]):
        x.update(sensor_cutoff=m.sensor_cutoff, sensordata=d.sensordata)
    return {n: jp.reshape(v, (-1,)) for n, v in x.items()}


def _body(m: Model, plan: dict):
    nbody = m.nbody
    elliptic = m.opt.cone == ConeType.ELLIPTIC
    p = constraint.plan(m)
    has_con = bool(plan["cgroups"])
    adhesion = has_con and bool(m.flg_adhesion)
    has_eq = not m.opt.disableflags & DisableBit.CONSTRAINT and m.njmax and (len(p.connect) or len(p.weld))
    gravity = not m.opt.disableflags & DisableBit.GRAVITY

    def body(io):
        tab, read, rv, out, put = io.table, io.read, io.read_vec, io.load_vec, io.write_vec

        def lanes(v):
            return tuple(io.lanes(c) for c in v)

        def sub(a, b):
            return tuple(a[k] - b[k] for k in range(len(a)))

        def add(a, b):
            return tuple(a[k] + b[k] for k in range(len(a)))

        zero6 = (0.0,) * 6
        # contact wrenches into _con (com-based [torque, force]); the world's entry is never read
        if has_con:
            _loop(0, nbody, lambda b: put("_con", b, lanes(zero6)))
        for g, (dim, nrow, count) in enumerate(plan["cgroups"]):

            def contact(k, g=g, dim=dim, nrow=nrow):
                s, adr = tab(f"c{g}_slot", k), tab(f"c{g}_adr", k)
                f = [read("efc_force", adr + r) for r in range(nrow)]
                if dim == 1 or elliptic:
                    frc = f
                else:
                    frc = [f[0]]
                    for r in range(1, nrow):
                        frc[0] = frc[0] + f[r]
                    for j in range(dim - 1):
                        frc.append(read("con_friction", 5 * s + j) * (f[2 * j] - f[2 * j + 1]))
                cdim = read("con_dim", s)
                frc = [where(j < cdim, c, 0.0, io.dtype) for j, c in enumerate(frc)]
                if adhesion:
                    frc[0] = frc[0] - read("con_adhesion", s)
                live = read("efc_mask", adr) > 0.5
                frc = [where(live, c, 0.0, io.dtype) for c in frc] + [0.0] * (6 - len(frc))
                fr = rv("con_frame", s, 9)
                fw = tuple(fr[i] * frc[0] + fr[3 + i] * frc[1] + fr[6 + i] * frc[2] for i in range(3))
                if len(frc) > 3 and dim > 3:
                    tw = tuple(fr[i] * frc[3] + fr[3 + i] * frc[4] + fr[6 + i] * frc[5] for i in range(3))
                else:
                    tw = (0.0, 0.0, 0.0)
                pos = rv("con_pos", s, 3)
                for side, sign in ((2, 1.0), (1, -1.0)):
                    b = tab(f"c{g}_b{side}", k)
                    com = rv("subtree_com", tab(f"c{g}_r{side}", k), 3)
                    t = sub(tw, _cross(sub(com, pos), fw))
                    w = tuple(sign * c for c in t + fw)
                    put("_con", b, lanes(add(out("_con", b, 6), w)))

            _loop(0, count, contact)

        # cfrc_ext: xfrc_applied in the com frame + the constraint wrenches
        put("cfrc_ext", 0, lanes(zero6))

        def ext(b):
            x = rv("xfrc_applied", b, 6)
            com, xi = rv("subtree_com", tab("body_rootid", b), 3), rv("xipos", b, 3)
            w = sub(x[3:], _cross(sub(com, xi), x[:3])) + x[:3]
            c = out("_con", b, 6) if has_con else None
            if has_eq:
                e = rv("cfrc_eq", b, 6)
                c = e if c is None else add(c, e)
            put("cfrc_ext", b, lanes(w if c is None else add(w, c)))

        _loop(1, nbody, ext)

        # cacc, parents first
        g = rv("gravity", 0, 3) if gravity else (0.0, 0.0, 0.0)
        put("cacc", 0, lanes((0.0, 0.0, 0.0) + tuple(-c for c in g)))

        def acc(b):
            def dof(i, s):
                cd, dd = rv("cdof", i, 6), rv("cdof_dot", i, 6)
                v, a = read("qvel", i), read("qacc", i)
                return lanes(tuple(s[k] + (dd[k] * v + cd[k] * a) for k in range(6)))

            da = tab("body_dofadr", b)
            loc = jax.lax.fori_loop(da, da + tab("body_dofnum", b), dof, lanes(zero6))
            put("cacc", b, lanes(add(out("cacc", tab("body_parentid", b), 6), loc)))

        _loop(1, nbody, acc)

        # cfrc_int, then leaves up into the world
        put("cfrc_int", 0, lanes(zero6))

        def force(b):
            c, a, v = rv("cinert", b, 10), out("cacc", b, 6), rv("cvel", b, 6)
            f = add(_inert_mul(c, a), _force_cross(v, _inert_mul(c, v)))
            put("cfrc_int", b, lanes(sub(f, out("cfrc_ext", b, 6))))

        _loop(1, nbody, force)

        def push(k):
            b = nbody - 1 - k
            par = tab("body_parentid", b)
            put("cfrc_int", par, lanes(add(out("cfrc_int", par, 6), out("cfrc_int", b, 6))))

        _loop(0, nbody - 1, push)

        # the sensors (into sensordata; its other elements copied)
        _loop(0, plan["keep"], lambda k: io.write("sensordata", tab("keep", k), read("sensordata", tab("keep", k))))
        for n, (t, objtype, count) in enumerate(plan["sgroups"]):
            pname, mname = _FRAMES[objtype]

            def one(k, n=n, t=t, pname=pname, mname=mname):
                obj, bd = tab(f"s{n}_obj", k), tab(f"s{n}_body", k)
                pos = rv(pname, obj, 3)
                com = rv("subtree_com", tab(f"s{n}_root", k), 3)
                if t in (S.FORCE, S.TORQUE):
                    frc = out("cfrc_int", bd, 6)
                    v = sub(frc[:3], _cross(sub(pos, com), frc[3:])) + frc[3:]
                else:
                    cv, ca = rv("cvel", bd, 6), out("cacc", bd, 6)
                    r = sub(pos, com)
                    vl = sub(cv[3:], _cross(r, cv[:3]))
                    al = sub(ca[3:], _cross(r, ca[:3]))
                    v = ca[:3] + add(al, _cross(cv[:3], vl))
                if t in (S.ACCELEROMETER, S.FORCE, S.TORQUE):  # R' v, both halves
                    mt = rv(mname, obj, 9)
                    v = tuple(mt[i] * v[h] + mt[3 + i] * v[h + 1] + mt[6 + i] * v[h + 2]
                              for h in (0, 3) for i in range(3))  # fmt: skip
                v = v[3:] if t in (S.ACCELEROMETER, S.FORCE, S.FRAMELINACC) else v[:3]
                cut, dt = read("sensor_cutoff", tab(f"s{n}_sid", k)), tab(f"s{n}_dt", k)
                on = cut > 0
                real, positive = on & (dt == int(DataType.REAL)), on & (dt == int(DataType.POSITIVE))
                v = tuple(where(real, jp.minimum(jp.maximum(c, -cut), cut), c, io.dtype) for c in v)
                v = tuple(where(positive, jp.minimum(cut, c), c, io.dtype) for c in v)
                base = tab(f"s{n}_adr", k)
                for j in range(3):
                    io.write("sensordata", base + j, v[j])

            _loop(0, count, one)

    return body


def _twin(m: Model, d: Data, plan: dict):
    """The XLA twin: contact_force's wrenches, rne.rne_postconstraint and the covered sensors' values (with their
    cutoff) on Model/Data whose other traced fields are zeros (launch.detach)."""
    geoms = driver.slot_geoms(m) if plan["cgroups"] else None

    def xla(x):
        def field(obj, n, name=None):
            return x[name or n].reshape(jp.shape(getattr(obj, n)))

        m2 = launch.detach(m, {})
        opt = m2.opt.replace(gravity=x["gravity"]) if "gravity" in x else m2.opt
        m2 = m2.replace(opt=opt, **({"sensor_cutoff": x["sensor_cutoff"]} if "sensor_cutoff" in x else {}))
        names = ("qvel", "qacc", "cdof", "cdof_dot", "cinert", "cvel", "xfrc_applied", "subtree_com", "xipos")
        keep = {n: field(d, n) for n in names}
        keep.update({n: field(d, n) for n in x if n in ("xpos", "xmat", "ximat", "geom_xpos", "geom_xmat",
                                                        "site_xpos", "site_xmat", "cam_xpos", "cam_xmat")})  # fmt: skip
        d2 = launch.detach(d, keep)
        if plan["cgroups"]:
            con = {n: field(d.contact, n, "con_" + n) for n in _CON if "con_" + n in x}
            con["dim"] = jp.round(con["dim"]).astype(d.contact.dim.dtype)
            con["geom"] = jp.asarray(np.stack(geoms, axis=1), d.contact.geom.dtype)
            d2 = d2.replace(contact=d2.contact.replace(**con), efc_force=x["efc_force"],
                            efc_mask=x["efc_mask"] > 0.5)  # fmt: skip
            cfrc = contact_force.contact_wrenches(m2, d2)
        else:
            cfrc = jp.zeros((m.nbody, 6), x["qvel"].dtype)
        if "cfrc_eq" in x:
            cfrc = cfrc + x["cfrc_eq"].reshape(m.nbody, 6)
        d2 = rne.rne_postconstraint(m2, d2, cfrc)
        res = {"cacc": d2.cacc, "cfrc_int": d2.cfrc_int, "cfrc_ext": d2.cfrc_ext}
        if len(plan["ids"]):
            idx, vals = sensor._values(m2, d2, plan["ids"])
            res["sensordata"] = x["sensordata"].at[idx].set(vals.astype(x["sensordata"].dtype))
        return res

    return xla


def sensor_acc(m: Model, d: Data, how: launch.Launch) -> Data:
    """mj_sensorAcc with mj_rnePostConstraint and the covered sensors as one fused kernel (the caller checks
    `fusable`); the stage's other sensors by its XLA code on the kernel's sensordata."""
    plan = support.memo(m, "kernels_sensor_acc_plan", _plan)
    x = _inputs(m, d, plan)
    outputs = {"cacc": (m.nbody, 6), "cfrc_int": (m.nbody, 6), "cfrc_ext": (m.nbody, 6)}
    if len(plan["ids"]):
        outputs["sensordata"] = (m.nsensordata,)
    if plan["cgroups"]:
        outputs["_con"] = (m.nbody, 6)
    k = launch.Kernel("sensor_acc", {n: tuple(v.shape) for n, v in x.items()}, outputs, plan["tables"],
                      _body(m, plan), _twin(m, d, plan))  # fmt: skip
    dtype = d.qpos.dtype
    out = launch.call(k, {n: v.astype(dtype) for n, v in x.items()}, how)
    d = d.replace(**{n: out[n].astype(getattr(d, n).dtype) for n in ("cacc", "cfrc_int", "cfrc_ext")})
    done = None
    if len(plan["ids"]):
        d = d.replace(sensordata=out["sensordata"].astype(d.sensordata.dtype))
        done = plan["ids"]
    return sensor._compute_stage(m, d, Stage.ACC, sensor_contact.Shared(m, d), done)
