"""The constraint rows (mj_makeConstraint + mj_makeImpedance, pipeline/constraint.py) as one fused kernel: connect,
weld, joint, tendon and flex edge equalities, dof and tendon friction loss, slide/hinge, ball and tendon limits and
pyramidal, elliptic (or frictionless) contacts, with the dense efc_J layout.

Outputs (per environment): efc_J (nefc, nv) dense, efc_pos, efc_margin, efc_frictionloss, efc_diagA, efc_R,
efc_vel, efc_aref (masked as make_constraint masks them), the rows' liveness (efc_mask as 0/1) and whether a
one-row limit had both sides active (Warning.CNSTRFULL). efc_type, efc_id (static), efc_D = 1/R, nefc and
contact.efc_address are formed from those by `constraint.fill` as on the XLA path.
Inputs: qpos, qvel, cdof, subtree_com (with connect/weld: xpos, xmat, xquat, site poses, cvel, cdof_dot; with tendon
rows: ten_J, ten_length; with flex edge equalities: flexedge_J, flexedge_length), the contact slots' fields (pos, frame,
dist, includemargin, friction, solref, solimp, active, dim; solreffriction with elliptic cones) and eq_active (per
environment); the Model floats the rows read (ranges, margins, solref/solimp, invweight0, eq_data, qpos0, opt.timestep,
opt.impratio), shared by the block unless vmapped.

The row plan (constraint.plan) is static: one loop per block of rows over its tables (joint equalities; friction
dofs; limited joints, a second loop for the upper rows of two-row limits; contact slots; contact rows), each
writing its rows' Jacobian and raw quantities (pos, margin, diagA, solref, solimp, the impedance distance,
liveness, J qvel), then one pass over all rows computes the impedance, R, aref and the masks (constraint._assemble's
tail). A contact slot's two bodies are static (`slot_bodies`: the pair table's geoms when no group is trimmed or
compacted and no capacity cap or flex contact exists; otherwise the XLA rows run), so the slot loop writes its point
Jacobian J6 (6 x nv) as an inner loop over the dofs with the bodies' dof masks as a table: column j =
[cdof_lin + cdof_ang x (pt - root com); cdof_ang] of body 2 minus that of body 1. A contact row is its frame
direction (normal +- mu_k direction k: frame row k, linear, for k < 3, else frame row k - 3, rotational; the
normal alone for a frictionless row; elliptic: frame direction q alone for the slot's row q) dotted with its slot's
J6. An elliptic contact's friction rows (q > 0) have pos = margin = 0, no stiffness term (K = 0), diagA scaled by
(f_0 / f_q)^2 / impratio and the contact's solreffriction where it is set. The formulas are constraint.py's written
per lane; fields equal the XLA path's to round-off.

Connect and weld rows: per equality, the two points (body pose and anchor, or the site's pose; a weld's rotation error
from the bodies' or sites' quaternions, eq_data's relative pose and torquescale), then one loop over the dofs writes the
point Jacobians' difference (translational rows; a weld's rotational rows T (jr1 - jr2)) and sums their time
derivatives' product with qvel (the Jdot qvel bias subtracted from aref, from cvel and cdof_dot: `prepare` runs com_vel
(XLA) before the kernel, as constraint._assemble does). Tendon rows copy ten_J rows (the tendon stage's, an input) times
their coefficients, a flex edge equality its edge's flexedge_J row (the flex stage's, XLA, an input) with pos = length -
length0 and diagA = flexedge_invweight0; ball limits use the joint quaternion's rotation angle (shortest way) against
the range's maximum, J = -axis at the ball's dofs.

Not fused (the XLA rows run): the sparse efc_J layout, the exact diagonal (diagexact), surface velocities, adhesive
contacts, contact slots whose bodies are traced. Derivatives go through the XLA twin (kernels/launch.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, support, velocity
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MAXIMP, MINIMP, MINVAL, ConstraintType, Data, DisableBit, EnableBit, Model, ObjType

__all__ = ["OUTPUTS", "assemble", "fusable", "kernel", "make_constraint", "slot_bodies"]

# the kernel's outputs: Data's efc_* fields (masked as make_constraint masks them) and the rows' liveness
OUTPUTS = ("J", "pos", "margin", "frictionloss", "diagA", "R", "vel", "aref", "active")


slot_bodies = driver.slot_bodies  # static (body1, body2) of every contact slot, or None


def fusable(m: Model) -> bool:
    """Static: every row of the model's plan is of a kind the kernel builds (see the module docstring)."""
    p = constraint.plan(m)
    if p.nefc == 0 or p.sparse or m.flg_surfacevel or m.flg_adhesion or m.nv == 0:
        return False
    if m.opt.enableflags & EnableBit.DIAGEXACT:  # the exact diagonal needs M^-1 J^T of every row: XLA
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
    # connect and weld equalities: the two objects' bodies (a site's body), site flags and ids, root bodies
    root = np.asarray(m.body_rootid)
    site_body = np.asarray(m.site_bodyid)
    has_site = False
    for pre, ids in (("cn_", p.connect), ("wd_", p.weld)):
        if not len(ids):
            continue
        cols = dict(id=ids)
        for k, obj in ((1, m.eq_obj1id), (2, m.eq_obj2id)):
            o = np.asarray(obj)[ids]
            s = np.asarray(m.eq_objtype)[ids] == ObjType.SITE
            has_site = has_site or bool(s.any())
            b = np.where(s, site_body[np.where(s, o, 0)] if s.any() else 0, np.maximum(o, 0))
            cols.update({f"b{k}": b, f"s{k}": s, f"o{k}": np.where(s, o, 0), f"r{k}": root[b]})
        tab.update({pre + n: v for n, v in cols.items()})
    if len(p.connect) or len(p.weld):
        kind = support.tables(m).dof_kind
        tab.update(dof_quat=kind == 2, dof_body=np.asarray(m.dof_bodyid))
        if "body_dof_mask" not in tab:
            tab["body_dof_mask"] = support.body_dof_mask(m).reshape(-1)
    # joint equalities
    e = p.joint_eq
    if len(e):
        o1 = np.asarray(m.eq_obj1id)[e]
        o2 = np.asarray(m.eq_obj2id)[e]
        o2c = np.maximum(o2, 0)
        tab.update(jeq_id=e, jeq_q1=qadr[o1], jeq_q2=qadr[o2c], jeq_d1=dadr[o1], jeq_d2=dadr[o2c],
                   jeq_has2=(o2 >= 0))  # fmt: skip
    te = p.tendon_eq
    if len(te):
        o1 = np.asarray(m.eq_obj1id)[te]
        o2 = np.asarray(m.eq_obj2id)[te]
        tab.update(teq_id=te, teq_t1=o1, teq_t2=np.maximum(o2, 0), teq_has2=(o2 >= 0))
    if len(p.flex_eq_edge):
        tab.update(fe_edge=p.flex_eq_edge, fe_id=p.flex_eq_owner)
    if len(p.fric_dof):
        tab.update(fric_dof=p.fric_dof)
    if len(p.fric_ten):
        tab.update(fric_ten=p.fric_ten)
    if len(p.lim_ball):
        tab.update(lb_jnt=p.lim_ball, lb_q=qadr[p.lim_ball], lb_d=dadr[p.lim_ball])
    t = p.lim_ten
    if len(t):
        one_t = np.asarray(p.lim_ten_one, bool)
        first_t = p.adr["lim_ten"] + np.concatenate([[0], np.cumsum(2 - one_t.astype(np.int64))[:-1]]).astype(np.int64)
        tab.update(lt_ten=t, lt_one=one_t, lt_row=first_t)
        two_t = np.nonzero(~one_t)[0]
        if len(two_t):
            tab.update(lt2_ten=t[two_t], lt2_row=first_t[two_t] + 1)
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
    ncon = len(p.con_dim)
    ncrow = int(np.sum(p.con_rows)) if ncon else 0
    if ncon:
        b1, b2 = slot_bodies(m)
        root = np.asarray(m.body_rootid)
        tab.update(body_dof_mask=support.body_dof_mask(m).reshape(-1), c_b1=b1, c_b2=b2, c_root1=root[b1],
                   c_root2=root[b2], c_dim=p.con_dim)  # fmt: skip
        # per contact row: its slot, its index q in the slot, its direction k (pyramidal: row pair (q // 2) is
        # normal +- mu_k direction k, k = q // 2 + 1; frictionless rows: k = 0, the normal alone; elliptic: k = q,
        # frame direction q alone)
        slot = np.repeat(np.arange(ncon), p.con_rows)
        q = np.arange(ncrow) - np.repeat(p.con_adr - p.adr["contact"], p.con_rows)
        fl = p.con_dim[slot] == 1
        k = q if p.elliptic else np.where(fl, 0, q // 2 + 1)
        sign = np.where(fl, 0, np.where(q % 2 == 0, 1, -1))
        tab.update(cr_slot=slot, cr_q=q, cr_k=k, cr_sign=sign, cr_fl=fl)
    kz = np.zeros(p.nefc, bool)
    kz[p.adr["fric_dof"] : p.adr["fric_dof"] + len(p.fric_dof)] = True
    kz[p.adr["fric_ten"] : p.adr["fric_ten"] + len(p.fric_ten)] = True
    if p.elliptic and ncon:  # an elliptic contact's friction rows have no stiffness term
        kz[p.adr["contact"] + np.nonzero(q > 0)[0]] = True
    tab["row_kz"] = kz
    info.update(connect=len(p.connect), weld=len(p.weld), eq_site=has_site,
                quat_dofs=bool(np.any(support.tables(m).dof_kind == 2)), tendon_eq=len(te),
                flex_eq=len(p.flex_eq_edge), fric_ten=len(p.fric_ten),
                ball=len(p.lim_ball), lim_ten=len(t), lim_ten2=len(tab.get("lt2_ten", ())))
    info.update(joint_eq=len(e), fric=len(p.fric_dof), lim=len(j), lim2=len(tab.get("lim2_obj", ())), ncon=ncon,
                ncrow=ncrow, nefc=p.nefc, elliptic=bool(p.elliptic))  # fmt: skip
    tables = {n: np.asarray(v, np.int32).reshape(-1) for n, v in tab.items()}
    return tables, info


def _plan(m: Model) -> tuple[dict, dict]:
    return support.memo(m, "kernels_rows_plan", _rows_plan)


def static_type_id(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """efc_type, efc_id (nefc,) of the rows the kernel builds (constraint.py's, in its row order)."""
    p = constraint.plan(m)
    typ = np.zeros(p.nefc, np.int32)
    ids = np.zeros(p.nefc, np.int32)
    for name, per in (("connect", 3), ("weld", 6)):
        e = getattr(p, name)
        a = p.adr[name]
        typ[a : a + per * len(e)], ids[a : a + per * len(e)] = ConstraintType.EQUALITY, np.repeat(e, per)
    a = p.adr["joint_eq"]
    typ[a : a + len(p.joint_eq)], ids[a : a + len(p.joint_eq)] = ConstraintType.EQUALITY, p.joint_eq
    a = p.adr["tendon_eq"]
    typ[a : a + len(p.tendon_eq)], ids[a : a + len(p.tendon_eq)] = ConstraintType.EQUALITY, p.tendon_eq
    a = p.adr["flex_eq"]
    typ[a : a + len(p.flex_eq_edge)], ids[a : a + len(p.flex_eq_edge)] = ConstraintType.EQUALITY, p.flex_eq_owner
    a = p.adr["fric_dof"]
    typ[a : a + len(p.fric_dof)], ids[a : a + len(p.fric_dof)] = ConstraintType.FRICTION_DOF, p.fric_dof
    a = p.adr["fric_ten"]
    typ[a : a + len(p.fric_ten)], ids[a : a + len(p.fric_ten)] = ConstraintType.FRICTION_TENDON, p.fric_ten
    for name, objs, one, ctype in (("lim_jnt", p.lim_jnt, p.lim_jnt_one, ConstraintType.LIMIT_JOINT),
                                   ("lim_ten", p.lim_ten, p.lim_ten_one, ConstraintType.LIMIT_TENDON)):  # fmt: skip
        a = p.adr[name]
        per = np.repeat(np.arange(len(objs)), 2)[np.stack([np.ones(len(objs), bool), ~np.asarray(one, bool)],
                                                          1).ravel()]  # fmt: skip
        typ[a : a + len(per)], ids[a : a + len(per)] = ctype, np.asarray(objs)[per]
    a = p.adr["lim_ball"]
    typ[a : a + len(p.lim_ball)], ids[a : a + len(p.lim_ball)] = ConstraintType.LIMIT_JOINT, p.lim_ball
    cone = ConstraintType.CONTACT_ELLIPTIC if p.elliptic else ConstraintType.CONTACT_PYRAMIDAL
    for s in range(len(p.con_dim)):
        r = slice(p.con_adr[s], p.con_adr[s] + p.con_rows[s])
        typ[r] = ConstraintType.CONTACT_FRICTIONLESS if p.con_dim[s] == 1 else cone
        ids[r] = s
    return typ, ids


def _inputs(m: Model, d: Data, info: dict) -> dict:
    """The kernel's inputs (one environment): the Data and Model floats its blocks read."""
    x = dict(qvel=d.qvel)
    if info["joint_eq"] or info["lim"] or info["ball"]:
        x["qpos"] = d.qpos
    x["timestep"] = jp.reshape(m.opt.timestep, (1,))
    if info["joint_eq"] or info["connect"] or info["weld"] or info["tendon_eq"] or info["flex_eq"]:
        x.update(eq_active=d.eq_active, eq_data=m.eq_data, eq_solref=m.eq_solref, eq_solimp=m.eq_solimp)
    if info["joint_eq"]:
        x["qpos0"] = m.qpos0
    if info["connect"] or info["weld"]:  # cvel, cdof_dot: com_vel ran before the kernel (`prepare`)
        x.update(xpos=d.xpos, xmat=d.xmat, cdof=d.cdof, subtree_com=d.subtree_com, cvel=d.cvel, cdof_dot=d.cdof_dot,
                 body_invweight0=m.body_invweight0)  # fmt: skip
        if info["weld"]:
            x["xquat"] = d.xquat
        if info["eq_site"]:
            x.update(site_xpos=d.site_xpos, site_xmat=d.site_xmat)
    if info["joint_eq"] or info["fric"] or info["lim"] or info["ball"]:
        x["dof_invweight0"] = m.dof_invweight0
    if info["tendon_eq"] or info["fric_ten"] or info["lim_ten"]:
        x.update(ten_J=d.ten_J, tendon_invweight0=m.tendon_invweight0)
    if info["tendon_eq"] or info["lim_ten"]:
        x["ten_length"] = d.ten_length
    if info["tendon_eq"]:
        x["tendon_length0"] = m.tendon_length0
    if info["flex_eq"]:  # flexedge_J, flexedge_length: the flex stage's (XLA, before the kernel)
        x.update(flexedge_J=d.flexedge_J, flexedge_length=d.flexedge_length, flexedge_length0=m.flexedge_length0,
                 flexedge_invweight0=m.flexedge_invweight0)  # fmt: skip
    if info["fric_ten"]:
        x.update(tendon_frictionloss=m.tendon_frictionloss, tendon_solref_fri=m.tendon_solref_fri,
                 tendon_solimp_fri=m.tendon_solimp_fri)  # fmt: skip
    if info["lim_ten"]:
        x.update(tendon_range=m.tendon_range, tendon_margin=m.tendon_margin, tendon_solref_lim=m.tendon_solref_lim,
                 tendon_solimp_lim=m.tendon_solimp_lim)  # fmt: skip
    if info["fric"]:
        x.update(dof_frictionloss=m.dof_frictionloss, dof_solref=m.dof_solref, dof_solimp=m.dof_solimp)
    if info["lim"] or info["ball"]:
        x.update(jnt_range=m.jnt_range, jnt_margin=m.jnt_margin, jnt_solref=m.jnt_solref, jnt_solimp=m.jnt_solimp)
    if info["ncon"]:
        c = d.contact
        x.update(cdof=d.cdof, subtree_com=d.subtree_com, con_pos=c.pos, con_frame=c.frame, con_dist=c.dist,
                 con_margin=c.includemargin, con_friction=c.friction, con_solref=c.solref, con_solimp=c.solimp,
                 con_active=c.active, con_dim=c.dim, body_invweight0=m.body_invweight0,
                 impratio=jp.reshape(m.opt.impratio, (1,)))  # fmt: skip
        if info["elliptic"]:
            x["con_solreffriction"] = c.solreffriction
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
    x = where(wide, jp.minimum(r / where(wide, width, 1.0), 1.0), 1.0)
    a = 1.0 / mid ** (power - 1.0)
    b = 1.0 / (1.0 - mid) ** (power - 1.0)
    y_lo = a * jp.maximum(x, 0.0) ** power
    y_hi = 1.0 - b * jp.maximum(1.0 - x, 0.0) ** power
    y = where(x <= mid, y_lo, y_hi)
    y = where(x >= 1.0, 1.0, y)
    return dmin + y * (dmax - dmin), dmax


def _cross(a, b):
    """a x b of two 3-tuples (lane vectors or scalars)."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _quat_mul(a, b):
    """Hamilton product of two 4-tuples (math.quat_mul)."""
    return (a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
            a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
            a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
            a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0])  # fmt: skip


def _mat_to_quat(r):
    """math.mat_to_quat of a 9-tuple (row-major rotation matrix), per lane: the same branches, selected."""
    tr = r[0] + r[4] + r[8]

    def branch(d, i, j, k):  # the branch whose largest component is d (0: w, else axis i = d - 1)
        if d == 0:
            s = jp.sqrt(jp.maximum(tr + 1.0, 1e-30)) * 2.0
            return (0.25 * s, (r[7] - r[5]) / s, (r[2] - r[6]) / s, (r[3] - r[1]) / s)
        s = jp.sqrt(jp.maximum(1.0 + r[4 * i] - r[4 * j] - r[4 * k], 1e-30)) * 2.0
        q = [None] * 4
        q[0] = (r[3 * k + j] - r[3 * j + k]) / s
        q[1 + i] = 0.25 * s
        q[1 + j] = (r[3 * i + j] + r[3 * j + i]) / s
        q[1 + k] = (r[3 * i + k] + r[3 * k + i]) / s
        return tuple(q)

    qw, qx, qy, qz = branch(0, 0, 0, 0), branch(1, 0, 1, 2), branch(2, 1, 2, 0), branch(3, 2, 0, 1)
    use_w = tr > 0
    use_x = (r[0] > r[4]) & (r[0] > r[8])
    use_y = r[4] > r[8]
    q = tuple(where(use_w, qw[c], where(use_x, qx[c], where(use_y, qy[c], qz[c]))) for c in range(4))
    return launch.unit_quat(q)


def _body(m: Model, info: dict):
    nv, nefc = m.nv, info["nefc"]
    refsafe = not (m.opt.disableflags & DisableBit.REFSAFE)
    neq_data = int(jp.shape(m.eq_data)[-1]) if m.neq else 0
    adr = constraint.plan(m).adr
    elliptic = info["elliptic"]
    has_bias = bool(info["connect"] or info["weld"])

    def body(io):
        tab = io.table

        def flag(b):
            """A static-per-block condition (a table entry's test) as a lane vector: select's operands then
            have one shape (Triton's select does not broadcast a scalar condition against a scalar operand)."""
            return io.lanes(jp.asarray(b).astype(io.dtype)) > 0.5

        def row(r, pos, margin, fl, diag, solref, solimp, imp_r, live, vel, bias=0.0):
            """Row r's raw quantities (masked and completed by `finish`); bias: the Jdot qvel term of aref."""
            for name, v in (("pos", pos), ("margin", margin), ("frictionloss", fl), ("diagA", diag), ("vel", vel),
                            ("_imp_r", imp_r), ("_live", where(live, 1.0, 0.0, io.dtype))) + (
                                (("_bias", bias),) if has_bias else ()):  # fmt: skip
                io.write(name, r, v)
            io.write_vec("_solref", r, tuple(solref))
            io.write_vec("_solimp", r, tuple(solimp))

        def unit_row(r, dof, sign, live):
            """J row r = sign e_dof (masked)."""
            io.write_vec("J", r, [where(live & (dof == j), sign, 0.0, io.dtype) for j in range(nv)])

        # ---- connect and weld equalities: the Jacobians of the two points (body 1's minus body 2's) and their
        # time derivatives' product with qvel (the bias), dof by dof ---------------------------------------------
        def point_eq(i, weld):
            pre = "wd_" if weld else "cn_"
            eid = tab(pre + "id", i)
            b1, b2 = tab(pre + "b1", i), tab(pre + "b2", i)
            data = [io.read("eq_data", eid * neq_data + k) for k in range(11 if weld else 6)]
            # eq_data: connect [0:3] anchor on body 1, [3:6] on body 2; weld [0:3] on body 2, [3:6] on body 1
            anchors = ((data[3:6], data[0:3]) if weld else (data[0:3], data[3:6]))

            def point(k, b):
                xp, xm = io.read_vec("xpos", b, 3), io.read_vec("xmat", b, 9)
                a = anchors[k - 1]
                pt = tuple(xp[r] + (xm[3 * r] * a[0] + xm[3 * r + 1] * a[1] + xm[3 * r + 2] * a[2]) for r in range(3))
                rot = xm
                if info["eq_site"]:
                    site = flag(tab(pre + f"s{k}", i) == 1)
                    o = tab(pre + f"o{k}", i)
                    sp, sm = io.read_vec("site_xpos", o, 3), io.read_vec("site_xmat", o, 9)
                    pt = tuple(where(site, sp[r], pt[r]) for r in range(3))
                    rot = tuple(where(site, sm[r], xm[r]) for r in range(9))
                com = io.read_vec("subtree_com", tab(pre + f"r{k}", i), 3)
                off = tuple(pt[r] - com[r] for r in range(3))
                cv = io.read_vec("cvel", b, 6)
                pvel = tuple(cv[3 + r] - c for r, c in enumerate(_cross(off, cv[:3])))  # the point's velocity
                return pt, rot, off, pvel

            p1, rot1, off1, pvel1 = point(1, b1)
            p2, rot2, off2, pvel2 = point(2, b2)
            live = io.lanes(io.read("eq_active", eid)) > 0.5
            dpos = tuple(p1[r] - p2[r] for r in range(3))
            # weld: rotation error e = ts imag(q2^-1 q1 rq), T = 0.5 ts (pw I - [pv]x) R2' (constraint._weld_geometry)
            if weld:
                quats = []
                for k, b, rot in ((1, b1, rot1), (2, b2, rot2)):
                    q = io.read_vec("xquat", b, 4)
                    if info["eq_site"]:
                        sq = _mat_to_quat(rot)
                        site = flag(tab(pre + f"s{k}", i) == 1)
                        q = tuple(where(site, sq[c], q[c]) for c in range(4))
                    quats.append(q)
                q1, q2 = quats
                ts = data[10]
                rq = tuple(data[6:10])
                if info["eq_site"]:  # a weld of sites: the identity (constraint._weld_geometry)
                    site = flag(tab(pre + "s1", i) == 1)
                    rq = tuple(where(site, 1.0 if c == 0 else 0.0, rq[c], io.dtype) for c in range(4))
                pq = _quat_mul((q2[0], -q2[1], -q2[2], -q2[3]), _quat_mul(q1, rq))
                pw, pv = pq[0], pq[1:]
                e = tuple(ts * c for c in pv)
                A = ((pw, pv[2], -pv[1]), (-pv[2], pw, pv[0]), (pv[1], -pv[0], pw))  # pw I - [pv]x
                T = tuple(tuple(0.5 * ts * _dot(A[a], rot2[3 * c : 3 * c + 3]) for c in range(3)) for a in range(3))
                sq = _dot(dpos, dpos) + _dot(e, e)
            else:
                sq = _dot(dpos, dpos)
            rnorm = where(sq <= 0.0, 0.0, jp.sqrt(where(sq <= 0.0, 1.0, sq)))
            r0 = adr["weld"] + 6 * i if weld else adr["connect"] + 3 * i
            zero = io.lanes(0.0)

            def dof(j, carry):
                # carry: J qvel of the translational rows, bias_t, w1, w2, (jrd1 - jrd2) qvel (3 each)
                vt, bt, w1, w2, wd = carry[0:3], carry[3:6], carry[6:9], carry[9:12], carry[12:15]
                cd = io.read_vec("cdof", j, 6)
                cdd = io.read_vec("cdof_dot", j, 6)
                w, v = cd[:3], cd[3:]
                if info["quat_dofs"]:  # ball/free rotation: cdof_dot with the dof's own body's velocity (mj_jacDot)
                    cb = io.read_vec("cvel", tab("dof_body", j), 6)
                    own = _cross(cb[:3], w) + tuple(a + b for a, b in zip(_cross(cb[:3], v), _cross(cb[3:], w)))
                    quat = flag(tab("dof_quat", j) == 1)
                    cdd = tuple(where(quat, own[c], cdd[c]) for c in range(6))
                ad, ld = cdd[:3], cdd[3:]
                qj = io.read("qvel", j)
                jt, jdt, jr = [], [], []
                for b, off, pvel in ((b1, off1, pvel1), (b2, off2, pvel2)):
                    mk = flag(tab("body_dof_mask", b * nv + j) == 1)
                    lin = tuple(v[c] + x for c, x in enumerate(_cross(w, off)))
                    jd = tuple(ld[c] + x + y for c, (x, y) in enumerate(zip(_cross(ad, off), _cross(w, pvel))))
                    jt.append(tuple(where(mk, c, 0.0) for c in lin))
                    jdt.append(tuple(where(mk, c, 0.0) for c in jd))
                    jr.append((tuple(where(mk, c, 0.0) for c in w), tuple(where(mk, c, 0.0) for c in ad)))
                jtr = tuple(jt[0][c] - jt[1][c] for c in range(3))
                for c in range(3):
                    io.write("J", (r0 + c) * nv + j, where(live, jtr[c], 0.0))
                vt = tuple(vt[c] + jtr[c] * qj for c in range(3))
                bt = tuple(bt[c] + (jdt[0][c] - jdt[1][c]) * qj for c in range(3))
                if weld:
                    dw = tuple(jr[0][0][c] - jr[1][0][c] for c in range(3))
                    for a in range(3):
                        io.write("J", (r0 + 3 + a) * nv + j, where(live, _dot(T[a], dw), 0.0))
                    w1 = tuple(w1[c] + jr[0][0][c] * qj for c in range(3))
                    w2 = tuple(w2[c] + jr[1][0][c] * qj for c in range(3))
                    wd = tuple(wd[c] + (jr[0][1][c] - jr[1][1][c]) * qj for c in range(3))
                return tuple(io.lanes(x) for x in vt + bt + w1 + w2 + wd)

            acc = _loop(0, nv, dof, (zero,) * 15)
            vt, bt, w1, w2, wd = acc[0:3], acc[3:6], acc[6:9], acc[9:12], acc[12:15]
            solref, solimp = io.read_vec("eq_solref", eid, 2), io.read_vec("eq_solimp", eid, 5)
            iw = [io.read("body_invweight0", 2 * b1 + c) + io.read("body_invweight0", 2 * b2 + c) for c in range(2)]
            for c in range(3):
                row(r0 + c, dpos[c], 0.0, 0.0, iw[0], solref, solimp, rnorm, live, vt[c], bt[c])
            if weld:
                wrel = tuple(w1[c] - w2[c] for c in range(3))
                wl = tuple(_dot(rot2[c::3], wrel) for c in range(3))  # R2' wrel
                inner = tuple(wd[c] - x for c, x in enumerate(_cross(w2, wrel)))
                wdot = tuple(_dot(rot2[c::3], inner) for c in range(3))
                ww = _dot(wl, wl)
                cr = _cross(wdot, pv)
                for a in range(3):
                    bias = ts * (0.5 * (pw * wdot[a] + cr[a]) - 0.25 * ww * pv[a])
                    row(r0 + 3 + a, e[a], 0.0, 0.0, iw[1], solref, solimp, rnorm, live, _dot(T[a], wrel), bias)

        _loop(0, info["connect"], lambda i: point_eq(i, False))
        _loop(0, info["weld"], lambda i: point_eq(i, True))

        # ---- joint equalities ------------------------------------------------------------------------------
        def poly_eq(eid, has2, dx1, dx2):
            """(pos, w2) of a polynomial coupling (joint or tendon equality; constraint._poly_rows): pos = dx1 -
            poly(dx2) (dx1 - c0 without a second object), w2 = poly'(dx2) (0 without one); dx: value - reference."""
            c = [io.read("eq_data", eid * neq_data + k) for k in range(5)]
            dif = where(has2, dx2, 0.0)
            poly = c[0] + dif * (c[1] + dif * (c[2] + dif * (c[3] + dif * c[4])))
            dpoly = c[1] + dif * (2 * c[2] + dif * (3 * c[3] + dif * 4 * c[4]))
            return dx1 - where(has2, poly, c[0]), where(has2, dpoly, 0.0)

        def joint_eq(i):
            eid, d1, d2 = tab("jeq_id", i), tab("jeq_d1", i), tab("jeq_d2", i)
            has2 = flag(tab("jeq_has2", i) == 1)
            q1, q2 = tab("jeq_q1", i), tab("jeq_q2", i)
            pos, w2 = poly_eq(eid, has2, io.read("qpos", q1) - io.read("qpos0", q1),
                              io.read("qpos", q2) - io.read("qpos0", q2))  # fmt: skip
            live = io.lanes(io.read("eq_active", eid)) > 0.5
            r = adr["joint_eq"] + i
            io.write_vec("J", r, [where(live, where(flag(d1 == j), 1.0, 0.0, io.dtype) - where(flag(d2 == j), w2, 0.0),
                                           0.0) for j in range(nv)])  # fmt: skip
            diag = io.read("dof_invweight0", d1) + where(has2, io.read("dof_invweight0", d2), 0.0)
            vel = io.read("qvel", d1) - w2 * io.read("qvel", d2)
            row(r, pos, 0.0, 0.0, diag, io.read_vec("eq_solref", eid, 2), io.read_vec("eq_solimp", eid, 5),
                jp.abs(pos), live, vel)  # fmt: skip

        _loop(0, info["joint_eq"], joint_eq)

        # ---- rows of tendons (and flex edges): J = c1 src[t1] (+ c2 src[t2]), J qvel alongside; src: ten_J
        # (flexedge_J)
        def ten_row(r, t1, c1, live, t2=None, c2=None, src="ten_J"):
            def dof(j, vel):
                val = c1 * io.read(src, t1 * nv + j)
                if t2 is not None:
                    val = val + c2 * io.read(src, t2 * nv + j)
                val = where(live, val, 0.0)
                io.write("J", r * nv + j, val)
                return io.lanes(vel + val * io.read("qvel", j))

            return _loop(0, nv, dof, io.lanes(0.0))

        def tendon_eq(i):  # constraint._poly_rows on tendon lengths
            eid, t1, t2 = tab("teq_id", i), tab("teq_t1", i), tab("teq_t2", i)
            has2 = flag(tab("teq_has2", i) == 1)
            pos, w2 = poly_eq(eid, has2, io.read("ten_length", t1) - io.read("tendon_length0", t1),
                              io.read("ten_length", t2) - io.read("tendon_length0", t2))  # fmt: skip
            live = io.lanes(io.read("eq_active", eid)) > 0.5
            r = adr["tendon_eq"] + i
            vel = ten_row(r, t1, 1.0, live, t2, -w2)
            diag = io.read("tendon_invweight0", t1) + where(has2, io.read("tendon_invweight0", t2), 0.0)
            row(r, pos, 0.0, 0.0, diag, io.read_vec("eq_solref", eid, 2), io.read_vec("eq_solimp", eid, 5),
                jp.abs(pos), live, vel)  # fmt: skip

        _loop(0, info["tendon_eq"], tendon_eq)

        # ---- flex edge equalities: J = flexedge_J[edge], pos = length - length0 (constraint._flex_eq_rows)
        def flex_eq(i):
            e, eid = tab("fe_edge", i), tab("fe_id", i)
            live = io.lanes(io.read("eq_active", eid)) > 0.5
            r = adr["flex_eq"] + i
            vel = ten_row(r, e, 1.0, live, src="flexedge_J")
            pos = io.read("flexedge_length", e) - io.read("flexedge_length0", e)
            row(r, pos, 0.0, 0.0, io.read("flexedge_invweight0", e), io.read_vec("eq_solref", eid, 2),
                io.read_vec("eq_solimp", eid, 5), jp.abs(pos), live, vel)  # fmt: skip

        _loop(0, info["flex_eq"], flex_eq)

        # ---- dof friction loss -----------------------------------------------------------------------------
        def friction(i):
            dof = tab("fric_dof", i)
            r = adr["fric_dof"] + i
            live = io.lanes(1.0) > 0.5
            unit_row(r, dof, 1.0, live)
            row(r, 0.0, 0.0, io.read("dof_frictionloss", dof), io.read("dof_invweight0", dof),
                io.read_vec("dof_solref", dof, 2), io.read_vec("dof_solimp", dof, 5), 0.0, live, io.read("qvel", dof))

        _loop(0, info["fric"], friction)

        def friction_ten(i):
            t = tab("fric_ten", i)
            r = adr["fric_ten"] + i
            live = io.lanes(1.0) > 0.5
            vel = ten_row(r, t, 1.0, live)
            row(r, 0.0, 0.0, io.read("tendon_frictionloss", t), io.read("tendon_invweight0", t),
                io.read_vec("tendon_solref_fri", t, 2), io.read_vec("tendon_solimp_fri", t, 5), 0.0, live, vel)

        _loop(0, info["fric_ten"], friction_ten)

        # ---- slide/hinge limits: the first (lower, or the nearer side of a one-row limit) rows, then the upper
        def limit(i, over):
            jid, dof, r = tab("lim_jnt", i), tab("lim_d", i), tab("lim_row", i)
            one = tab("lim_one", i) == 1
            x = io.read("qpos", tab("lim_q", i))
            lo, hi = x - io.read("jnt_range", 2 * jid), io.read("jnt_range", 2 * jid + 1) - x
            mg = io.read("jnt_margin", jid)
            upper = one & (lo > hi)
            over = over | (one & (lo < mg) & (hi < mg))
            dist = where(upper, hi, lo)
            sign = where(upper, -1.0, 1.0, io.dtype)
            live = dist < mg
            unit_row(r, dof, sign, live)
            row(r, dist, mg, 0.0, io.read("dof_invweight0", dof), io.read_vec("jnt_solref", jid, 2),
                io.read_vec("jnt_solimp", jid, 5), jp.abs(dist - mg), live, sign * io.read("qvel", dof))
            return over

        over = _loop(0, info["lim"], limit, io.lanes(0.0) > 0.5)

        def limit_upper(i):
            jid, dof, r = tab("lim2_jnt", i), tab("lim2_d", i), tab("lim2_row", i)
            x = io.read("qpos", tab("lim2_q", i))
            dist = io.read("jnt_range", 2 * jid + 1) - x
            mg = io.read("jnt_margin", jid)
            live = dist < mg
            unit_row(r, dof, -1.0, live)
            row(r, dist, mg, 0.0, io.read("dof_invweight0", dof), io.read_vec("jnt_solref", jid, 2),
                io.read_vec("jnt_solimp", jid, 5), jp.abs(dist - mg), live, -io.read("qvel", dof))

        _loop(0, info["lim2"], limit_upper)

        # ---- ball limits: the rotation angle of the joint's quaternion (shortest way) against the range's max
        def ball(i):
            jid, dof = tab("lb_jnt", i), tab("lb_d", i)
            qa = tab("lb_q", i)
            q = launch.unit_quat(tuple(io.read("qpos", qa + k) for k in range(4)))
            sq = _dot(q[1:], q[1:])
            zero = sq <= 0.0
            n = where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))
            small = n <= 1e-15
            axis = tuple(c / where(small, 1.0, n) for c in q[1:])
            angle = 2.0 * jp.arctan2(n, q[0])
            flip = angle > jp.pi
            angle = where(flip, 2 * jp.pi - angle, angle)
            axis = tuple(where(flip, -c, c) for c in axis)
            rmax = jp.maximum(io.read("jnt_range", 2 * jid), io.read("jnt_range", 2 * jid + 1))
            dist = rmax - angle
            mg = io.read("jnt_margin", jid)
            live = dist < mg
            r = adr["lim_ball"] + i
            io.write_vec("J", r, [where(live, sum(where(flag(dof + k == j), -axis[k], 0.0) for k in range(3)), 0.0)
                                  for j in range(nv)])  # fmt: skip
            vel = -_dot(axis, tuple(io.read("qvel", dof + k) for k in range(3)))
            row(r, dist, mg, 0.0, io.read("dof_invweight0", dof), io.read_vec("jnt_solref", jid, 2),
                io.read_vec("jnt_solimp", jid, 5), jp.abs(dist - mg), live, vel)

        _loop(0, info["ball"], ball)

        # ---- tendon limits: as the joints' (one-row limits: the nearer side), J = +-ten_J
        def limit_ten(i, over):
            t, r = tab("lt_ten", i), tab("lt_row", i)
            one = tab("lt_one", i) == 1
            x = io.read("ten_length", t)
            lo, hi = x - io.read("tendon_range", 2 * t), io.read("tendon_range", 2 * t + 1) - x
            mg = io.read("tendon_margin", t)
            upper = one & (lo > hi)
            over = over | (one & (lo < mg) & (hi < mg))
            dist = where(upper, hi, lo)
            sign = where(upper, -1.0, 1.0, io.dtype)
            live = dist < mg
            vel = ten_row(r, t, sign, live)
            row(r, dist, mg, 0.0, io.read("tendon_invweight0", t), io.read_vec("tendon_solref_lim", t, 2),
                io.read_vec("tendon_solimp_lim", t, 5), jp.abs(dist - mg), live, vel)
            return over

        over = _loop(0, info["lim_ten"], limit_ten, over)

        def limit_ten_upper(i):
            t, r = tab("lt2_ten", i), tab("lt2_row", i)
            dist = io.read("tendon_range", 2 * t + 1) - io.read("ten_length", t)
            mg = io.read("tendon_margin", t)
            live = dist < mg
            vel = ten_row(r, t, -1.0, live)
            row(r, dist, mg, 0.0, io.read("tendon_invweight0", t), io.read_vec("tendon_solref_lim", t, 2),
                io.read_vec("tendon_solimp_lim", t, 5), jp.abs(dist - mg), live, vel)

        _loop(0, info["lim_ten2"], limit_ten_upper)
        io.write("over", 0, where(over, 1.0, 0.0, io.dtype))

        # ---- contacts: each slot's J6 = [lin; ang] Jacobian of body 2 minus body 1 at its point, then its rows
        def jac6(s):
            b1, b2 = tab("c_b1", s), tab("c_b2", s)
            pt = io.read_vec("con_pos", s, 3)
            com1 = io.read_vec("subtree_com", tab("c_root1", s), 3)
            com2 = io.read_vec("subtree_com", tab("c_root2", s), 3)
            o1 = tuple(pt[k] - com1[k] for k in range(3))
            o2 = tuple(pt[k] - com2[k] for k in range(3))

            def dof(j):
                cd = io.read_vec("cdof", j, 6)  # [ang; lin]
                w, v = cd[:3], cd[3:]

                def comps(o, mk):
                    lin = (v[0] + w[1] * o[2] - w[2] * o[1], v[1] + w[2] * o[0] - w[0] * o[2],
                           v[2] + w[0] * o[1] - w[1] * o[0])  # fmt: skip
                    return [where(mk, c, 0.0) for c in lin + tuple(w)]

                c1 = comps(o1, flag(tab("body_dof_mask", b1 * nv + j) == 1))
                c2 = comps(o2, flag(tab("body_dof_mask", b2 * nv + j) == 1))
                io.write_vec("_j6", s * nv + j, tuple(c2[c] - c1[c] for c in range(6)))

            _loop(0, nv, dof)

        _loop(0, info["ncon"], jac6)

        def contact_row(i):
            s, q, k, sign = tab("cr_slot", i), tab("cr_q", i), tab("cr_k", i), tab("cr_sign", i)
            fl = flag(tab("cr_fl", i) == 1)
            r = adr["contact"] + i
            dist, mg = io.read("con_dist", s), io.read("con_margin", s)
            adim = io.read("con_dim", s)
            live = (io.read("con_active", s) > 0.5) & (dist < mg)
            live = io.lanes(live) > 0.5
            if elliptic:  # rows beyond the slot's actual condim are dead
                live = live & (fl | (q < adim))
                # the row's direction: frame row k (linear) for k < 3, frame row k - 3 (rotational) beyond
                d = io.read_vec("con_frame", 3 * s + where(k < 3, k, k - 3), 3)
                lin_k = flag(k < 3)
                coef = tuple(where(lin_k, d[c], 0.0) for c in range(3)) + tuple(where(lin_k, 0.0, d[c])
                                                                              for c in range(3))  # fmt: skip
            else:
                live = live & (fl | (q < 2 * (adim - 1)))
                # the row's direction: normal +- mu_k (frame row k (linear), or frame row k - 3 (rotational))
                km = jp.maximum(k, 1)
                fidx = where(km < 3, km, km - 3)
                d = io.read_vec("con_frame", 3 * s + fidx, 3)
                mu = sign * io.read("con_friction", 5 * s + km - 1)
                lin_k, ang_k = flag((k >= 1) & (k < 3)), flag(k >= 3)
                normal = io.read_vec("con_frame", 3 * s, 3)
                coef = tuple(normal[c] + where(lin_k, mu * d[c], 0.0) for c in range(3))
                coef += tuple(where(ang_k, mu * d[c], 0.0) for c in range(3))

            def dof(j, vel):
                j6 = io.load_vec("_j6", s * nv + j, 6)
                val = coef[0] * j6[0]
                for c in range(1, 6):
                    val = val + coef[c] * j6[c]
                io.write("J", r * nv + j, where(live, val, 0.0))
                return io.lanes(vel + val * io.read("qvel", j))

            vel = _loop(0, nv, dof, io.lanes(0.0))
            diag = io.read("body_invweight0", 2 * tab("c_b1", s)) + io.read("body_invweight0", 2 * tab("c_b2", s))
            f0 = io.read("con_friction", 5 * s)
            solref = io.read_vec("con_solref", s, 2)
            if elliptic:  # friction row q: diagA (f_0 / f_q)^2 / impratio, pos and margin 0, solreffriction if set
                normal_row = flag(q == 0)
                fq = io.read("con_friction", 5 * s + jp.maximum(q, 1) - 1)
                diag = where(normal_row, diag, diag * ((f0 / fq) ** 2 / io.read("impratio", 0)))
                sfr = io.read_vec("con_solreffriction", s, 2)
                use_fr = flag((sfr[0] != 0) | (sfr[1] != 0)) & ~normal_row
                solref = tuple(where(use_fr, sfr[c], solref[c]) for c in range(2))
                pos, margin = where(normal_row, dist, 0.0), where(normal_row, mg, 0.0)
            else:
                f0sq = f0 * f0
                diag = where(fl, diag, diag * (2.0 * f0sq * (1.0 + f0sq) / io.read("impratio", 0)))
                pos, margin = dist, mg
            row(r, pos, margin, 0.0, diag, solref, io.read_vec("con_solimp", s, 5), jp.abs(dist - mg), live, vel)

        _loop(0, info["ncrow"], contact_row)

        # ---- every row: impedance, R, aref, masks (constraint._assemble's tail) --------------------------------
        h = io.read("timestep", 0)

        def finish(r):
            live = io.load("_live", r) > 0.5
            solimp = io.load_vec("_solimp", r, 5)
            s0, s1 = io.load_vec("_solref", r, 2)
            imp, dmax = _impedance(solimp, io.load("_imp_r", r))
            tc = jp.maximum(s0, 2.0 * h) if refsafe else s0
            direct = s0 <= 0
            tc = where(direct, 1.0, tc)
            K = where(direct, -s0 / (dmax * dmax), 1.0 / (dmax * dmax * tc * tc * s1 * s1))
            K = where(flag(tab("row_kz", r) == 1), 0.0, K)
            B = where(direct, -s1 / dmax, 2.0 / (dmax * tc))
            diag = io.load("diagA", r)
            R = jp.maximum((1.0 - imp) / imp * diag, MINVAL)
            vel = where(live, io.load("vel", r), 0.0)
            pos, margin = io.load("pos", r), io.load("margin", r)
            aref = -B * vel - K * imp * (pos - margin)
            if has_bias:  # connect and weld rows: Jdot qvel
                aref = aref - io.load("_bias", r)
            for name, v, dead in (("pos", pos, 0.0), ("margin", margin, 0.0),
                                  ("frictionloss", io.load("frictionloss", r), 0.0), ("diagA", diag, 0.0),
                                  ("R", R, 1.0), ("vel", vel, 0.0), ("aref", aref, 0.0),
                                  ("active", 1.0, 0.0)):  # fmt: skip
                io.write(name, r, where(live, v, dead, io.dtype))

        _loop(0, nefc, finish)

    return body


def _twin(m: Model, d: Data, geoms) -> callable:
    """The XLA twin: constraint.py's rows at the kernel's inputs."""

    def xla(x):
        ox = {"timestep": x["timestep"][0], **({"impratio": x["impratio"][0]} if "impratio" in x else {})}
        opt = launch.detach(m.opt, ox)
        mf = {k: x[k] for k in ("eq_data", "eq_solref", "eq_solimp", "qpos0", "dof_invweight0", "dof_frictionloss",
                                "dof_solref", "dof_solimp", "jnt_range", "jnt_margin", "jnt_solref", "jnt_solimp",
                                "body_invweight0", "tendon_invweight0", "tendon_length0", "tendon_frictionloss",
                                "tendon_solref_fri", "tendon_solimp_fri", "tendon_range", "tendon_margin",
                                "tendon_solref_lim", "tendon_solimp_lim", "flexedge_length0", "flexedge_invweight0")
              if k in x}  # fmt: skip
        m2 = launch.detach(m, dict(mf, opt=opt))
        df = {k: x[k] for k in ("qpos", "qvel", "cdof", "subtree_com", "eq_active", "xpos", "xmat", "xquat", "cvel",
                                "cdof_dot", "site_xpos", "site_xmat", "ten_J", "ten_length", "flexedge_J",
                                "flexedge_length") if k in x}  # fmt: skip
        if "eq_active" in df:
            df["eq_active"] = df["eq_active"] > 0.5
        d2 = launch.detach(d, df)
        if "con_pos" in x:
            sfr = {"solreffriction": x["con_solreffriction"]} if "con_solreffriction" in x else {}
            c = launch.detach(d.contact, dict(pos=x["con_pos"], frame=x["con_frame"], dist=x["con_dist"],
                                  includemargin=x["con_margin"], friction=x["con_friction"], solref=x["con_solref"],
                                  solimp=x["con_solimp"], active=x["con_active"] > 0.5,
                                  dim=jp.round(x["con_dim"]).astype(jp.int32),
                                  geom=jp.asarray(np.stack(geoms, axis=1), jp.int32),
                                  **sfr))  # fmt: skip
            d2 = d2.replace(contact=c)
        _, r = constraint.assemble(m2, d2, com_vel=False)
        act = r["active"]
        f = r["fields"]
        dt = x["qvel"].dtype

        def mask(v, dead=0.0):
            return where(act, v, dead).astype(dt)

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
    outputs.update(J=(nefc * m.nv,), over=(1,), _imp_r=(nefc,), _live=(nefc,), _solref=(nefc, 2),
                   _solimp=(nefc, 5),
                   _j6=(max(info["ncon"], 1) * m.nv * 6,))  # fmt: skip
    if info["connect"] or info["weld"]:  # their rows' Jdot qvel (the scratch exists only where used)
        outputs["_bias"] = (nefc,)
    geoms = driver.slot_geoms(m) if info["ncon"] else None
    k = launch.Kernel("constraint_rows", {n: tuple(jp.shape(v)) for n, v in x.items()}, outputs, tables,
                      _body(m, info), _twin(m, d, geoms))  # fmt: skip
    return k, x


def make_constraint(m: Model, d: Data, how: launch.Launch) -> Data:
    """constraint.make_constraint with the rows built by the kernel (the caller checks `fusable`)."""
    d = prepare(m, d)
    k, x = kernel(m, d)
    return assemble(m, d, k, x, how)


def prepare(m: Model, d: Data) -> Data:
    """d with what the kernel reads beyond the earlier stages' fields: cvel and cdof_dot (com_vel, XLA) where
    connect or weld rows need Jdot qvel (make_constraint runs before fwd_velocity), as the XLA rows compute them."""
    p = constraint.plan(m)
    if len(p.connect) or len(p.weld):
        d = velocity.com_vel(m, d)
    return d


def assemble(m: Model, d: Data, k: launch.Kernel, x: dict, how: launch.Launch) -> Data:
    """Data with the rows of kernel `k` (this module's outputs: `kernel`'s, or kernels/rows_tiled.py's launcher of
    them) at inputs `x`: efc_type / efc_id static, the rest by `constraint.fill` as on the XLA path."""
    dtype = d.qpos.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    nefc = constraint.plan(m).nefc
    typ, ids = static_type_id(m)
    active = out["active"] > 0.5
    r = dict(fields=dict(type=typ, id=ids, pos=out["pos"], margin=out["margin"], frictionloss=out["frictionloss"]),
             active=active, J=out["J"].reshape(nefc, m.nv), cols=jp.zeros((nefc, 0), jp.int32), diag=out["diagA"],
             R=out["R"], vel=out["vel"], aref=out["aref"], lim_over=out["over"][0] > 0.5)  # fmt: skip
    return constraint.fill(m, d, r)
