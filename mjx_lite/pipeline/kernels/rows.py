"""The constraint rows (mj_makeConstraint + mj_makeImpedance, pipeline/constraint.py) as one fused kernel, for the
common case: joint equalities, dof friction loss, slide/hinge joint limits and pyramidal (or frictionless)
contacts, with the dense efc_J layout.

Outputs (per environment): efc_J (nefc, nv) dense, efc_pos, efc_margin, efc_frictionloss, efc_diagA, efc_R,
efc_vel, efc_aref (masked as make_constraint masks them), the rows' liveness (efc_mask as 0/1) and whether a
one-row limit had both sides active (Warning.CNSTRFULL). efc_type, efc_id (static), efc_D = 1/R, nefc and
contact.efc_address are formed from those by `constraint.fill` as on the XLA path.
Inputs: qpos, qvel, cdof, subtree_com, the contact slots' fields (pos, frame, dist, includemargin, friction,
solref, solimp, active, dim) and eq_active (per environment); the Model floats the rows read (ranges, margins,
solref/solimp, invweight0, eq_data, qpos0, opt.timestep, opt.impratio), shared by the block unless vmapped.

The row plan (constraint.plan) is static: one loop per block of rows over its tables (joint equalities; friction
dofs; limited joints, a second loop for the upper rows of two-row limits; contact slots, one loop per static
condim), each row's impedance, R and aref computed in the iteration that writes the row. A contact slot's two
bodies are static (`slot_bodies`: the pair table's geoms when no group is trimmed or compacted and no capacity cap
or flex contact exists; otherwise the XLA rows run), so the Jacobian of the contact point is an inner loop over
the dofs with the bodies' dof masks as a table: J6 column j = [cdof_lin + cdof_ang x (pt - root com); cdof_ang]
of body 2 minus that of body 1, and each of the slot's rows is its frame direction (normal +- mu_i direction i)
dotted with it. The formulas are constraint.py's written per lane; fields equal the XLA path's to round-off.

Not fused (the XLA rows run): connect and weld (their Jdot qvel bias needs com_vel), tendon equalities, friction
and limits, ball limits, flex rows, elliptic cones, the sparse efc_J layout, surface velocities, contact slots whose
bodies are traced. Derivatives go through the XLA twin (kernels/launch.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.collision import flex as flexcol
from mjx_lite.pipeline import constraint, support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.types import MAXIMP, MINIMP, MINVAL, ConstraintType, Data, DisableBit, Model

__all__ = ["OUTPUTS", "fusable", "kernel", "make_constraint", "slot_bodies"]

# the kernel's outputs: Data's efc_* fields (masked as make_constraint masks them) and the rows' liveness
OUTPUTS = ("J", "pos", "margin", "frictionloss", "diagA", "R", "vel", "aref", "active")


def _slot_geoms(m: Model) -> tuple[np.ndarray, np.ndarray] | None:
    """Static (geom1, geom2) of every contact slot, or None where a slot's geoms are traced (a trimmed or compacted
    group, a capacity cap, flex contacts)."""
    if flexcol.capacity(m) or driver.capped(m):
        return None
    t = driver.pair_table(m)
    g1, g2 = [], []
    for g in t.groups:
        if g.capacity != len(g.geom1) or g.compacted:
            return None
        g1.append(np.repeat(np.asarray(g.geom1), g.ncon))
        g2.append(np.repeat(np.asarray(g.geom2), g.ncon))
    if not g1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(g1).astype(np.int64), np.concatenate(g2).astype(np.int64)


def slot_bodies(m: Model) -> tuple[np.ndarray, np.ndarray] | None:
    """Static (body1, body2) of every contact slot (see `_slot_geoms`), or None."""
    g = _slot_geoms(m)
    if g is None:
        return None
    gb = np.asarray(m.geom_bodyid, np.int64)
    return gb[g[0]], gb[g[1]]


def fusable(m: Model) -> bool:
    """Static: every row of the model's plan is of a kind the kernel builds (see the module docstring)."""
    p = constraint.plan(m)
    if p.nefc == 0 or p.sparse or p.elliptic or m.flg_surfacevel or m.nv == 0:
        return False
    other = (p.connect, p.weld, p.tendon_eq, p.flex_eq_edge, p.fric_ten, p.lim_ball, p.lim_ten)
    if any(len(a) for a in other):
        return False
    if len(p.con_dim):
        b = slot_bodies(m)
        if b is None or len(b[0]) != len(p.con_dim):
            return False
    return True


def _rows_plan(m: Model) -> tuple[dict, dict]:
    """(tables, static row info): the kernel's int32 tables and, per block, the static facts its loops need."""
    p = constraint.plan(m)
    qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    tab, info = {}, {}
    # joint equalities
    e = p.joint_eq
    if len(e):
        o1 = np.asarray(m.eq_obj1id)[e]
        o2 = np.asarray(m.eq_obj2id)[e]
        o2c = np.maximum(o2, 0)
        tab.update(jeq_id=e, jeq_q1=qadr[o1], jeq_q2=qadr[o2c], jeq_d1=dadr[o1], jeq_d2=dadr[o2c],
                   jeq_has2=(o2 >= 0))  # fmt: skip
    if len(p.fric_dof):
        tab.update(fric_dof=p.fric_dof)
    j = p.lim_jnt
    if len(j):
        one = np.asarray(p.lim_jnt_one, bool)
        nrows = 2 - one.astype(np.int64)
        first = p.adr["lim_jnt"] + np.concatenate([[0], np.cumsum(nrows)[:-1]]).astype(np.int64)
        tab.update(lim_jnt=j, lim_q=qadr[j], lim_d=dadr[j], lim_one=one, lim_row=first)
        two = np.nonzero(~one)[0]
        if len(two):
            tab.update(lim2_obj=two, lim2_jnt=j[two], lim2_q=qadr[j][two], lim2_d=dadr[j][two],
                       lim2_row=first[two] + 1)  # fmt: skip
    dims = sorted(set(p.con_dim.tolist())) if len(p.con_dim) else []
    if dims:
        b1, b2 = slot_bodies(m)
        root = np.asarray(m.body_rootid)
        tab["body_dof_mask"] = support.body_dof_mask(m).reshape(-1)
        for dim in dims:
            s = np.nonzero(p.con_dim == dim)[0]
            tab.update({f"c{dim}_slot": s, f"c{dim}_b1": b1[s], f"c{dim}_b2": b2[s], f"c{dim}_root1": root[b1[s]],
                        f"c{dim}_root2": root[b2[s]], f"c{dim}_row": p.con_adr[s]})  # fmt: skip
    info.update(dims=dims, joint_eq=len(e), fric=len(p.fric_dof), lim=len(j),
                lim2=len(tab.get("lim2_obj", ())), ncon=len(p.con_dim))  # fmt: skip
    tables = {n: np.asarray(v, np.int32).reshape(-1) for n, v in tab.items()}
    return tables, info


def _plan(m: Model) -> tuple[dict, dict]:
    return support.memo(m, "kernels_rows_plan", _rows_plan)


def static_type_id(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """efc_type, efc_id (nefc,) of the rows the kernel builds (constraint.py's, in its row order)."""
    p = constraint.plan(m)
    typ = np.zeros(p.nefc, np.int32)
    ids = np.zeros(p.nefc, np.int32)
    a = p.adr["joint_eq"]
    typ[a : a + len(p.joint_eq)], ids[a : a + len(p.joint_eq)] = ConstraintType.EQUALITY, p.joint_eq
    a = p.adr["fric_dof"]
    typ[a : a + len(p.fric_dof)], ids[a : a + len(p.fric_dof)] = ConstraintType.FRICTION_DOF, p.fric_dof
    a = p.adr["lim_jnt"]
    per = np.repeat(np.arange(len(p.lim_jnt)), 2)[np.stack([np.ones(len(p.lim_jnt), bool), ~p.lim_jnt_one], 1).ravel()]
    typ[a : a + len(per)], ids[a : a + len(per)] = ConstraintType.LIMIT_JOINT, p.lim_jnt[per]
    for s in range(len(p.con_dim)):
        r = slice(p.con_adr[s], p.con_adr[s] + p.con_rows[s])
        typ[r] = ConstraintType.CONTACT_FRICTIONLESS if p.con_dim[s] == 1 else ConstraintType.CONTACT_PYRAMIDAL
        ids[r] = s
    return typ, ids


def _inputs(m: Model, d: Data, info: dict) -> dict:
    """The kernel's inputs (one environment): the Data and Model floats its blocks read."""
    x = dict(qvel=d.qvel)
    if info["joint_eq"] or info["lim"]:
        x["qpos"] = d.qpos
    x["timestep"] = jp.reshape(m.opt.timestep, (1,))
    if info["joint_eq"]:
        x.update(eq_active=d.eq_active, eq_data=m.eq_data, eq_solref=m.eq_solref, eq_solimp=m.eq_solimp,
                 qpos0=m.qpos0)  # fmt: skip
    if info["joint_eq"] or info["fric"] or info["lim"]:
        x["dof_invweight0"] = m.dof_invweight0
    if info["fric"]:
        x.update(dof_frictionloss=m.dof_frictionloss, dof_solref=m.dof_solref, dof_solimp=m.dof_solimp)
    if info["lim"]:
        x.update(jnt_range=m.jnt_range, jnt_margin=m.jnt_margin, jnt_solref=m.jnt_solref, jnt_solimp=m.jnt_solimp)
    if info["ncon"]:
        c = d.contact
        x.update(cdof=d.cdof, subtree_com=d.subtree_com, con_pos=c.pos, con_frame=c.frame, con_dist=c.dist,
                 con_margin=c.includemargin, con_friction=c.friction, con_solref=c.solref, con_solimp=c.solimp,
                 con_active=c.active, con_dim=c.dim, body_invweight0=m.body_invweight0,
                 impratio=jp.reshape(m.opt.impratio, (1,)))  # fmt: skip
    return x


def _loop(lo: int, hi: int, fn, init=None):
    """fori_loop over [lo, hi) of fn(i, carry) -> carry (fn(i) -> None without a carry)."""
    if init is None:
        if hi > lo:
            jax.lax.fori_loop(np.int32(lo), np.int32(hi), lambda i, c: (fn(i), c)[1], np.int32(0))
        return None
    if hi <= lo:
        return init
    return jax.lax.fori_loop(np.int32(lo), np.int32(hi), fn, init)


def _impedance(solimp, r):
    """constraint._impedance per row: solimp a 5-tuple (lanes or scalars), r lanes. Returns (imp, dmax)."""
    dmin = jp.clip(solimp[0], MINIMP, MAXIMP)
    dmax = jp.clip(solimp[1], MINIMP, MAXIMP)
    width = jp.maximum(solimp[2], 0.0)
    mid = jp.clip(solimp[3], MINIMP, MAXIMP)
    power = jp.maximum(solimp[4], 1.0)
    wide = width > MINVAL
    x = jp.where(wide, jp.minimum(r / jp.where(wide, width, 1.0), 1.0), 1.0)
    a = 1.0 / mid ** (power - 1.0)
    b = 1.0 / (1.0 - mid) ** (power - 1.0)
    y_lo = a * jp.maximum(x, 0.0) ** power
    y_hi = 1.0 - b * jp.maximum(1.0 - x, 0.0) ** power
    y = jp.where(x <= mid, y_lo, y_hi)
    y = jp.where(x >= 1.0, 1.0, y)
    return dmin + y * (dmax - dmin), dmax


def _body(m: Model, info: dict):
    nv = m.nv
    refsafe = not (m.opt.disableflags & DisableBit.REFSAFE)
    neq_data = int(jp.shape(m.eq_data)[-1]) if m.neq else 0

    def body(io):
        tab = io.table
        h = io.read("timestep", 0)

        def finish(r, pos, margin, fl, diag, solref, solimp, imp_r, active, vel, k_zero=False):
            """Row r's impedance, R, aref and masked fields (constraint._assemble's tail, per lane)."""
            imp, dmax = _impedance(solimp, imp_r)
            s0, s1 = solref
            tc = jp.maximum(s0, 2.0 * h) if refsafe else s0
            direct = s0 <= 0
            tc = jp.where(direct, 1.0, tc)
            if k_zero:
                K = 0.0
            else:
                K = jp.where(direct, -s0 / (dmax * dmax), 1.0 / (dmax * dmax * tc * tc * s1 * s1))
            B = jp.where(direct, -s1 / dmax, 2.0 / (dmax * tc))
            R = jp.maximum((1.0 - imp) / imp * diag, MINVAL)
            vel = jp.where(active, vel, 0.0)
            aref = -B * vel - K * imp * (pos - margin)
            for name, v, dead in (("pos", pos, 0.0), ("margin", margin, 0.0), ("frictionloss", fl, 0.0),
                                  ("diagA", diag, 0.0), ("R", R, 1.0), ("vel", vel, 0.0), ("aref", aref, 0.0),
                                  ("active", 1.0, 0.0)):  # fmt: skip
                io.write(name, r, jp.where(active, v, dead))

        def unit_row(r, dof, sign, active):
            """J row r = sign e_dof (masked)."""
            io.write_vec("J", r, [jp.where(active & (dof == j), sign, 0.0) for j in range(nv)])

        def on(x):
            return io.lanes(x) > 0.5

        adr = constraint.plan(m).adr

        # ---- joint equalities ------------------------------------------------------------------------------
        def joint_eq(i):
            eid, d1, d2 = tab("jeq_id", i), tab("jeq_d1", i), tab("jeq_d2", i)
            has2 = tab("jeq_has2", i) == 1
            q1, q2 = tab("jeq_q1", i), tab("jeq_q2", i)
            x1, r1 = io.read("qpos", q1), io.read("qpos0", q1)
            x2, r2 = io.read("qpos", q2), io.read("qpos0", q2)
            c = [io.read("eq_data", eid * neq_data + k) for k in range(5)]
            dif = jp.where(has2, x2 - r2, 0.0)
            poly = c[0] + dif * (c[1] + dif * (c[2] + dif * (c[3] + dif * c[4])))
            dpoly = c[1] + dif * (2 * c[2] + dif * (3 * c[3] + dif * 4 * c[4]))
            pos = x1 - r1 - jp.where(has2, poly, c[0])
            w2 = jp.where(has2, dpoly, 0.0)
            active = on(io.read("eq_active", eid))
            r = adr["joint_eq"] + i
            io.write_vec("J", r, [jp.where(active, jp.where(d1 == j, 1.0, 0.0) - jp.where(d2 == j, w2, 0.0), 0.0)
                                  for j in range(nv)])  # fmt: skip
            diag = io.read("dof_invweight0", d1) + jp.where(has2, io.read("dof_invweight0", d2), 0.0)
            vel = io.read("qvel", d1) - w2 * io.read("qvel", d2)
            finish(r, pos, 0.0, 0.0, diag, io.read_vec("eq_solref", eid, 2), io.read_vec("eq_solimp", eid, 5),
                   jp.abs(pos), active, vel)  # fmt: skip

        _loop(0, info["joint_eq"], joint_eq)

        # ---- dof friction loss -----------------------------------------------------------------------------
        def friction(i):
            dof = tab("fric_dof", i)
            r = adr["fric_dof"] + i
            active = on(1.0)
            unit_row(r, dof, 1.0, active)
            zero = io.lanes(0.0)
            finish(r, zero, 0.0, io.read("dof_frictionloss", dof), io.read("dof_invweight0", dof),
                   io.read_vec("dof_solref", dof, 2), io.read_vec("dof_solimp", dof, 5), zero, active,
                   io.read("qvel", dof), k_zero=True)  # fmt: skip

        _loop(0, info["fric"], friction)

        # ---- slide/hinge limits: the first (lower, or the nearer side of a one-row limit) rows, then the upper
        def limit(i, over):
            jid, dof, r = tab("lim_jnt", i), tab("lim_d", i), tab("lim_row", i)
            one = tab("lim_one", i) == 1
            x = io.read("qpos", tab("lim_q", i))
            lo, hi = x - io.read("jnt_range", 2 * jid), io.read("jnt_range", 2 * jid + 1) - x
            mg = io.read("jnt_margin", jid)
            upper = one & (lo > hi)
            over = over | (one & (lo < mg) & (hi < mg))
            dist = jp.where(upper, hi, lo)
            sign = jp.where(upper, -1.0, 1.0)
            active = dist < mg
            unit_row(r, dof, sign, active)
            finish(r, dist, mg, 0.0, io.read("dof_invweight0", dof), io.read_vec("jnt_solref", jid, 2),
                   io.read_vec("jnt_solimp", jid, 5), jp.abs(dist - mg), active, sign * io.read("qvel", dof))
            return over

        over = _loop(0, info["lim"], limit, io.lanes(0.0) > 0.5)

        def limit_upper(i):
            jid, dof, r = tab("lim2_jnt", i), tab("lim2_d", i), tab("lim2_row", i)
            x = io.read("qpos", tab("lim2_q", i))
            dist = io.read("jnt_range", 2 * jid + 1) - x
            mg = io.read("jnt_margin", jid)
            active = dist < mg
            unit_row(r, dof, -1.0, active)
            finish(r, dist, mg, 0.0, io.read("dof_invweight0", dof), io.read_vec("jnt_solref", jid, 2),
                   io.read_vec("jnt_solimp", jid, 5), jp.abs(dist - mg), active, -io.read("qvel", dof))

        _loop(0, info["lim2"], limit_upper)
        io.write("over", 0, jp.where(over, 1.0, 0.0))

        # ---- contacts, one loop per static condim ------------------------------------------------------------
        for dim in info["dims"]:
            _loop(0, int(np.sum(constraint.plan(m).con_dim == dim)), _contact(io, m, dim, finish))

    return body


def _contact(io, m: Model, dim: int, finish):
    """The loop body over the slots of condim `dim`: the slot's rows."""
    nv = m.nv
    tab = io.table
    pre = f"c{dim}_"
    n = 1 if dim == 1 else 2 * (dim - 1)
    ang = dim > 3  # rows with a rotational part (torsional / rolling friction)

    def slot(i):
        s, b1, b2, row = tab(pre + "slot", i), tab(pre + "b1", i), tab(pre + "b2", i), tab(pre + "row", i)
        pt = io.read_vec("con_pos", s, 3)
        fr = io.read_vec("con_frame", s, 9)
        dist, mg = io.read("con_dist", s), io.read("con_margin", s)
        live = (io.read("con_active", s) > 0.5) & (dist < mg)
        adim = io.read("con_dim", s)
        fric = io.read_vec("con_friction", s, 5)
        com1 = io.read_vec("subtree_com", tab(pre + "root1", i), 3)
        com2 = io.read_vec("subtree_com", tab(pre + "root2", i), 3)
        o1 = tuple(pt[k] - com1[k] for k in range(3))
        o2 = tuple(pt[k] - com2[k] for k in range(3))
        # each row's coefficients on [lin (3), ang (3)]
        normal = tuple(fr[0:3]) + (0.0, 0.0, 0.0)
        coefs = [normal] if dim == 1 else []
        for k in range(1, dim):
            if k < 3:  # tangent k (linear)
                d = tuple(fr[3 * k : 3 * k + 3]) + (0.0,) * 3
            else:  # spin (k = 3) and rolls: frame row k - 3 of the rotational part
                d = (0.0,) * 3 + tuple(fr[3 * (k - 3) : 3 * (k - 3) + 3])
            mu = fric[k - 1]
            coefs.append(tuple(normal[c] + mu * d[c] for c in range(6)))
            coefs.append(tuple(normal[c] - mu * d[c] for c in range(6)))
        # rows beyond the slot's actual condim are dead (constraint._contact_rows)
        lives = [live] if dim == 1 else [live & (q < 2 * (adim - 1)) for q in range(n)]
        ncomp = 6 if ang else 3

        def dof(j, vel):
            cd = io.read_vec("cdof", j, 6)  # [ang; lin]
            m1 = tab("body_dof_mask", b1 * nv + j) == 1
            m2 = tab("body_dof_mask", b2 * nv + j) == 1

            def comps(o, mk):
                w, v = cd[:3], cd[3:]
                lin = (v[0] + w[1] * o[2] - w[2] * o[1], v[1] + w[2] * o[0] - w[0] * o[2],
                       v[2] + w[0] * o[1] - w[1] * o[0])  # fmt: skip
                return [jp.where(mk, c, 0.0) for c in lin + tuple(w)]

            c1, c2 = comps(o1, m1), comps(o2, m2)
            j6 = [c2[c] - c1[c] for c in range(6)]
            out = []
            for q in range(n):
                val = coefs[q][0] * j6[0]
                for c in range(1, ncomp):
                    val = val + coefs[q][c] * j6[c]
                io.write("J", (row + q) * nv + j, jp.where(lives[q], val, 0.0))
                out.append(vel[q] + val * io.read("qvel", j))
            return tuple(io.lanes(v) for v in out)

        vel = _loop(0, nv, dof, tuple(io.lanes(0.0) for _ in range(n)))
        iw = io.read("body_invweight0", 2 * b1) + io.read("body_invweight0", 2 * b2)
        if dim > 1:
            f0sq = fric[0] * fric[0]
            iw = iw * (2.0 * f0sq * (1.0 + f0sq) / io.read("impratio", 0))
        solref, solimp = io.read_vec("con_solref", s, 2), io.read_vec("con_solimp", s, 5)
        for q in range(n):
            finish(row + q, dist, mg, 0.0, iw, solref, solimp, jp.abs(dist - mg), lives[q], vel[q])

    return slot


def _twin(m: Model, d: Data, geoms) -> callable:
    """The XLA twin: constraint.py's rows at the kernel's inputs."""

    def xla(x):
        opt = m.opt.replace(timestep=x["timestep"][0], **({"impratio": x["impratio"][0]} if "impratio" in x else {}))
        mf = {k: x[k] for k in ("eq_data", "eq_solref", "eq_solimp", "qpos0", "dof_invweight0", "dof_frictionloss",
                                "dof_solref", "dof_solimp", "jnt_range", "jnt_margin", "jnt_solref", "jnt_solimp",
                                "body_invweight0") if k in x}  # fmt: skip
        m2 = m.replace(opt=opt, **mf)
        df = {k: x[k] for k in ("qpos", "qvel", "cdof", "subtree_com", "eq_active") if k in x}
        if "eq_active" in df:
            df["eq_active"] = df["eq_active"] > 0.5
        d2 = d.replace(**df)
        if "con_pos" in x:
            c = d.contact.replace(pos=x["con_pos"], frame=x["con_frame"], dist=x["con_dist"],
                                  includemargin=x["con_margin"], friction=x["con_friction"], solref=x["con_solref"],
                                  solimp=x["con_solimp"], active=x["con_active"] > 0.5,
                                  dim=jp.round(x["con_dim"]).astype(jp.int32),
                                  geom=jp.asarray(np.stack(geoms, axis=1), jp.int32))  # fmt: skip
            d2 = d2.replace(contact=c)
        _, r = constraint.assemble(m2, d2)
        act = r["active"]
        f = r["fields"]
        dt = x["qvel"].dtype

        def mask(v, dead=0.0):
            return jp.where(act, v, dead).astype(dt)

        return {"J": r["J"].reshape(-1).astype(dt), "pos": mask(f["pos"]), "margin": mask(f["margin"]),
                "frictionloss": mask(f["frictionloss"]), "diagA": mask(r["diag"]), "R": r["R"].astype(dt),
                "vel": r["vel"].astype(dt), "aref": r["aref"].astype(dt), "active": act.astype(dt),
                "over": jp.reshape(r["lim_over"], (1,)).astype(dt)}  # fmt: skip

    return xla


def kernel(m: Model, d: Data) -> tuple[launch.Kernel, dict]:
    """The rows as a `launch.Kernel` (one environment's shapes) and its inputs."""
    tables, info = _plan(m)
    x = _inputs(m, d, info)
    nefc = constraint.plan(m).nefc
    outputs = {n: (nefc,) for n in OUTPUTS}
    outputs.update(J=(nefc * m.nv,), over=(1,))
    geoms = _slot_geoms(m) if info["ncon"] else None
    k = launch.Kernel("constraint_rows", {n: tuple(jp.shape(v)) for n, v in x.items()}, outputs, tables,
                      _body(m, info), _twin(m, d, geoms))  # fmt: skip
    return k, x


def make_constraint(m: Model, d: Data, how: launch.Launch) -> Data:
    """constraint.make_constraint with the rows built by the kernel (the caller checks `fusable`)."""
    k, x = kernel(m, d)
    dtype = d.qpos.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    nefc = constraint.plan(m).nefc
    typ, ids = static_type_id(m)
    active = out["active"] > 0.5
    r = dict(fields=dict(type=typ, id=ids, pos=out["pos"], margin=out["margin"], frictionloss=out["frictionloss"]),
             active=active, J=out["J"].reshape(nefc, m.nv), cols=jp.zeros((nefc, 0), jp.int32), diag=out["diagA"],
             R=out["R"], vel=out["vel"], aref=out["aref"], lim_over=out["over"][0] > 0.5)  # fmt: skip
    return constraint.fill(m, d, r)
