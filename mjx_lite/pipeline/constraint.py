"""Constraint rows (mj_makeConstraint + mj_makeImpedance): equality, friction loss, limits and contacts.

The rows live in fixed, padded arrays (`m.njmax = efc_capacity(m, m.nconmax)`), laid out statically:

    equality (connect 3, weld 6, joint 1, tendon 1 rows each) | friction loss (dofs, then tendons, that were
    compiled with frictionloss > 0) | limits (slide/hinge joints: 2 rows, lower and upper; ball joints: 1;
    tendons: 2) | contacts (one block per contact slot of the collision driver: pyramidal 2(dim-1) rows, or 1
    when dim = 1; elliptic dim rows)

A row is live (`efc_mask`) when its constraint is active: an enabled equality, a limit or contact within its
margin. Dead rows have zero Jacobian, zero force and R = 1 (D = 1), so they never affect the solution.

The Jacobian's layout is static (`types.sparse_efc_jacobian`, `Config.efc_jacobian`): dense efc_J (njmax, nv), or
sparse rows of fixed width w = `types.efc_row_width(m)`: values efc_J (njmax, w) at columns efc_J_colind (njmax,
w). Sparse rows are built without ever forming a dense row: contacts from the two bodies' dof chains (columns
traced, since the bodies of a slot are), joint rows as +-1 at their dof, and the few rows computed densely
(connect, weld, tendon rows) gathered at their static columns. `j_mul` / `jt_mul` / `efc_j_dense` below work in
both layouts.

Impedance, stiffness and damping follow the computation chapter ("Solver parameters"): imp = d(r) from
solimp (dmin, dmax, width, midpoint, power) at r = |pos - margin| (the norm of the whole block for connect
and weld); K = 1/(dmax^2 tc^2 dr^2) and B = 2/(dmax tc) for solref = (tc, dr) > 0 (tc >= 2 timestep unless
refsafe is disabled), K = -solref[0]/dmax^2 and B = -solref[1]/dmax for the direct (negative) form;
R = (1 - imp)/imp * diagA with diagA from the invweight0 constants (the diagexact flag: the exact diagonal,
`_exact_diag`); aref = -B vel - K imp (pos - margin), where
connect and weld rows also subtract the Jacobian-derivative term Jdot qvel (as MuJoCo 4 does).
Contact friction rows: elliptic cones scale R and diagA of friction row i by (f_0/f_i)^2 / impratio and use
pos = 0, K = 0 (and solreffriction when given); pyramidal edges J_n +- f_i J_i use
diagA = diag_n 2 f_0^2 (1 + f_0^2) / impratio (as measured on MuJoCo 4.0). The regularised cone coefficient is
mu = f_0 / sqrt(impratio).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math, types
from mjx_lite._struct import static_memo
from mjx_lite.collision import driver
from mjx_lite.collision import flex as flexcol
from mjx_lite.data import count_warning
from mjx_lite.pipeline import flex, inertia, rod_contact, support, velocity
from mjx_lite.solver import common as solver_common
from mjx_lite.types import (
    MAXIMP,
    MINIMP,
    MINVAL,
    ConeType,
    ConstraintType,
    Data,
    DisableBit,
    EnableBit,
    EqType,
    JointType,
    Model,
    ObjType,
    Warning,
)

# ---------------------------------------------------------------------------------------------------------
# static plan


@dataclasses.dataclass(frozen=True, eq=False)
class Plan:
    """Static row layout. Every `*_adr` is the first row of its block; ids are static numpy arrays."""

    nefc: int
    layout: solver_common.Layout
    connect: np.ndarray
    weld: np.ndarray
    joint_eq: np.ndarray
    tendon_eq: np.ndarray
    flex_eq_edge: np.ndarray  # one row per (non-rigid) edge of each <equality><flex>: the edge ...
    flex_eq_owner: np.ndarray  # ... and its equality constraint (pipeline/flex.equality_edges)
    fric_dof: np.ndarray
    fric_ten: np.ndarray
    lim_jnt: np.ndarray
    lim_ball: np.ndarray
    lim_ten: np.ndarray
    lim_jnt_one: np.ndarray  # (len(lim_jnt),) bool: one row (the nearer side) instead of two (Model.jnt_limit_onerow)
    lim_ten_one: np.ndarray  # (len(lim_ten),) bool (Model.tendon_limit_onerow)
    con_dim: np.ndarray  # (nconmax,) static condim of each contact slot (an upper bound when trimmed)
    con_rows: np.ndarray  # (nconmax,) rows of each slot
    con_adr: np.ndarray  # (nconmax,) first row of each slot
    adr: dict  # block name -> first row
    elliptic: bool
    sparse: bool  # efc_J layout: fixed-width sparse rows (see the module docstring)
    width: int  # sparse row width w (0 when dense)


def _flag(m: Model, bit) -> bool:
    return bool(m.opt.disableflags & bit)


def _slot_condim(m: Model, nconmax: int) -> np.ndarray:
    """Static condim of each contact slot, following the collision driver's row layout. Below the pair table's rows
    (a capacity cap, `driver.collision` keeps the deepest rows of all groups) every slot has the largest condim."""
    if nconmax == 0:
        return np.zeros(0, np.int64)
    raw = driver.contact_capacity(m)
    if nconmax < raw:
        return np.full(nconmax, int(_slot_condim(m, raw).max()), np.int64)
    out = []
    prio = np.asarray(m.geom_priority)
    cd = np.asarray(m.geom_condim)
    for g in driver.pair_table(m).groups:
        if g.pair[0] >= 0:
            dims = np.asarray(m.pair_dim)[g.pair]
        else:
            p1, p2 = prio[g.geom1], prio[g.geom2]
            c1, c2 = cd[g.geom1], cd[g.geom2]
            dims = np.where(p1 == p2, np.maximum(c1, c2), np.where(p1 > p2, c1, c2))
        if g.capacity < len(g.geom1):
            dims = np.full(g.capacity, dims.max())
        out.append(np.repeat(dims, g.ncon))
    out.append(flexcol.slot_condim(m))
    dims = np.concatenate(out).astype(np.int64)
    assert dims.shape[0] == nconmax, (dims.shape, nconmax)
    return dims


def plan(m: Model, nconmax: int | None = None) -> Plan:
    """The static row plan of `m` (built once per Model static part; `nconmax` defaults to m.nconmax)."""
    nconmax = m.nconmax if nconmax is None else nconmax
    return static_memo(m, f"constraint_plan_{nconmax}", lambda m: _build_plan(m, nconmax))


def _build_plan(m: Model, nconmax: int) -> Plan:
    off = _flag(m, DisableBit.CONSTRAINT)
    eq_on = not off and not _flag(m, DisableBit.EQUALITY)
    fr_on = not off and not _flag(m, DisableBit.FRICTIONLOSS)
    lim_on = not off and not _flag(m, DisableBit.LIMIT)
    con_on = not off and not _flag(m, DisableBit.CONTACT)
    eq_type = np.asarray(m.eq_type)
    empty = np.zeros(0, np.int64)

    def eqs(t):
        return np.nonzero(eq_type == t)[0] if eq_on else empty

    for t in np.unique(eq_type):
        if t not in (EqType.CONNECT, EqType.WELD, EqType.JOINT, EqType.TENDON, EqType.FLEX):
            raise NotImplementedError(f"equality constraint type {EqType(t).name} is not supported")
    connect, weld, joint_eq, tendon_eq = eqs(EqType.CONNECT), eqs(EqType.WELD), eqs(EqType.JOINT), eqs(EqType.TENDON)
    flex_eq_edge, flex_eq_owner = flex.equality_edges(m, eqs(EqType.FLEX))
    fric_dof = np.nonzero(np.asarray(m.dof_frictional))[0] if fr_on else empty
    fric_ten = np.nonzero(np.asarray(m.tendon_frictional))[0] if fr_on else empty
    jt = np.asarray(m.jnt_type)
    lim = np.asarray(m.jnt_limited, bool) if lim_on else np.zeros(m.njnt, bool)
    lim_jnt = np.nonzero(lim & ((jt == JointType.SLIDE) | (jt == JointType.HINGE)))[0]
    lim_ball = np.nonzero(lim & (jt == JointType.BALL))[0]
    lim_ten = np.nonzero(np.asarray(m.tendon_limited, bool))[0] if lim_on else empty
    lim_jnt_one = _onerow(m.jnt_limit_onerow, m.njnt)[lim_jnt]
    lim_ten_one = _onerow(m.tendon_limit_onerow, m.ntendon)[lim_ten]
    elliptic = m.opt.cone == ConeType.ELLIPTIC
    con_dim = _slot_condim(m, nconmax) if con_on else np.zeros(0, np.int64)
    if elliptic:
        con_rows = con_dim.copy()
    else:
        con_rows = np.where(con_dim == 1, 1, 2 * (con_dim - 1))

    sizes = [("connect", 3 * len(connect)), ("weld", 6 * len(weld)), ("joint_eq", len(joint_eq)),
             ("tendon_eq", len(tendon_eq)), ("flex_eq", len(flex_eq_edge)), ("fric_dof", len(fric_dof)),
             ("fric_ten", len(fric_ten)),
             ("lim_jnt", int(np.sum(2 - lim_jnt_one))), ("lim_ball", len(lim_ball)),
             ("lim_ten", int(np.sum(2 - lim_ten_one))),
             ("contact", int(con_rows.sum()))]  # fmt: skip
    adr, row = {}, 0
    for name, n in sizes:
        adr[name] = row
        row += n
    nefc = row
    con_adr = adr["contact"] + np.concatenate([[0], np.cumsum(con_rows)[:-1]]).astype(np.int64)
    con_adr = con_adr[: len(con_rows)]

    kind = np.full(nefc, solver_common.INEQUALITY, np.int64)
    kind[: adr["fric_dof"]] = solver_common.EQUALITY
    kind[adr["fric_dof"] : adr["lim_jnt"]] = solver_common.FRICTION
    cones = []
    if elliptic and len(con_dim):
        for dim in sorted(set(con_dim.tolist()) - {1}):
            slots = np.nonzero(con_dim == dim)[0]
            rows = con_adr[slots, None] + np.arange(dim)[None, :]
            kind[rows.reshape(-1)] = solver_common.CONE
            cones.append(rows)
    unit_col = np.full(nefc, -1, np.int64)  # rows with J = +-e_dof (see Layout.unit_col)
    dadr = np.asarray(m.jnt_dofadr)
    unit_col[adr["fric_dof"] : adr["fric_dof"] + len(fric_dof)] = fric_dof
    lim_rows = np.repeat(np.arange(len(lim_jnt)), 2)[np.stack([np.ones(len(lim_jnt), bool), ~lim_jnt_one], 1).ravel()]
    unit_col[adr["lim_jnt"] : adr["lim_jnt"] + lim_rows.size] = dadr[lim_jnt][lim_rows]  # rows as `_two_sided`
    layout = solver_common.Layout(kind=kind, cones=tuple(cones), mass=_tree_mass(m), unit_col=unit_col)
    sparse = types.sparse_efc_jacobian(m)
    return Plan(nefc=nefc, layout=layout, connect=connect, weld=weld, joint_eq=joint_eq, tendon_eq=tendon_eq,
                flex_eq_edge=flex_eq_edge, flex_eq_owner=flex_eq_owner,
                fric_dof=fric_dof, fric_ten=fric_ten, lim_jnt=lim_jnt, lim_ball=lim_ball, lim_ten=lim_ten,
                lim_jnt_one=lim_jnt_one, lim_ten_one=lim_ten_one,
                con_dim=con_dim, con_rows=con_rows, con_adr=con_adr, adr=adr, elliptic=elliptic, sparse=sparse,
                width=types.efc_row_width(m) if sparse else 0)  # fmt: skip


def _onerow(flags: np.ndarray | None, n: int) -> np.ndarray:
    """Static (n,) bool of Model.jnt_limit_onerow / tendon_limit_onerow (all False when not set: two rows)."""
    return np.zeros(n, bool) if flags is None else np.asarray(flags, bool).reshape(n)


def _tree_mass(m: Model) -> solver_common.TreeMass | None:
    """The solver's view of a tree-sparse qM (None when qM is dense)."""
    if not types.sparse_mass_matrix(m):
        return None
    t = support.tables(m)
    off = np.nonzero(t.m_rows != t.m_cols)[0]
    return solver_common.TreeMass(nv=m.nv, diag=np.asarray(t.madr, np.int64), off=off, row=t.m_rows[off],
                                  col=t.m_cols[off])  # fmt: skip


def efc_capacity(m: Model, nconmax: int) -> int:
    """Static number of constraint rows (Data.efc_* are padded to this)."""
    return plan(m, nconmax).nefc


# ---------------------------------------------------------------------------------------------------------
# rows


@dataclasses.dataclass
class _Rows:
    """Rows of one block (n rows): everything make_impedance needs."""

    J: jax.Array  # (n, nv)
    pos: jax.Array  # (n,)
    margin: jax.Array  # (n,)
    frictionloss: jax.Array  # (n,)
    diag: jax.Array  # (n,) diagA
    solref: jax.Array  # (n, 2)
    solimp: jax.Array  # (n, 5)
    imp_r: jax.Array  # (n,) the distance the impedance is evaluated at
    bias: jax.Array  # (n,) Jdot qvel term subtracted from aref
    active: jax.Array  # (n,) bool
    type: np.ndarray | jax.Array  # (n,)
    id: np.ndarray | jax.Array  # (n,)
    k_zero: np.ndarray | jax.Array  # (n,) bool: stiffness term off (elliptic friction rows)
    r_scale: jax.Array  # (n,) multiplies R and diagA (elliptic friction rows); 1 otherwise
    imp_from: np.ndarray | None = None  # rows whose impedance/R comes from another row (block-local index)
    cols: np.ndarray | jax.Array | None = None  # (n, wb) columns of sparse rows J (n, wb); None: J is dense (n, nv)
    vel_add: jax.Array | None = None  # (n,) added to J qvel in efc_vel (contact surface velocity); None: zero
    adh: jax.Array | None = None  # (n,) adhesion share of the row: R adh is added to aref (adhesion); None: zero
    coef: jax.Array | None = None  # contact rows: (k, r, ncomp) each contact's rows in its [lin; ang] Jacobian's basis
    slots: np.ndarray | None = None  # contact rows: (k,) the contact slots of the block


def _static_sparse(J: jax.Array, supports: list[np.ndarray]) -> tuple[jax.Array, np.ndarray]:
    """Sparse rows (values (n, wb), columns (n, wb)) of dense rows J (n, nv) at their static supports (one array
    of distinct columns per row; padding: value 0 at column 0)."""
    n = len(supports)
    wb = max([1] + [len(c) for c in supports])
    cols = np.zeros((n, wb), np.int64)
    valid = np.zeros((n, wb), bool)
    for i, c in enumerate(supports):
        cols[i, : len(c)] = c
        valid[i, : len(c)] = True
    vals = jp.take_along_axis(J, jp.asarray(cols), axis=1)
    return jp.where(jp.asarray(valid), vals, 0.0), cols


def _union(*arrays) -> np.ndarray:
    return np.unique(np.concatenate([np.zeros(0, np.int64)] + [np.asarray(a, np.int64) for a in arrays]))


def _two_bodies_support(m: Model, b1: np.ndarray, b2: np.ndarray, rows: int) -> list[np.ndarray]:
    """Static supports of `rows` rows per (b1, b2) pair: the dofs moving either body."""
    chains = types.body_chain_dofs(m)
    return [u for u in (_union(chains[i], chains[j]) for i, j in zip(b1, b2)) for _ in range(rows)]


def _rep(x, k):
    return jp.repeat(x, k, axis=0)


def _bodies_points(m: Model, d: Data, eq_ids: np.ndarray, which: int, local: jax.Array):
    """World points and body ids of the equality objects (body + local offset, or site)."""
    objtype = np.asarray(m.eq_objtype)[eq_ids]
    objid = np.asarray(m.eq_obj1id if which == 1 else m.eq_obj2id)[eq_ids]
    is_site = objtype == ObjType.SITE
    site_body = np.asarray(m.site_bodyid)
    site_of = site_body[np.where(is_site, objid, 0)] if np.any(is_site) else np.zeros_like(objid)
    body = np.where(is_site, site_of, np.maximum(objid, 0))
    body_pt = d.xpos[body] + jp.einsum("nij,nj->ni", d.xmat[body], local)
    if np.any(is_site):
        site_pt = d.site_xpos[np.maximum(objid, 0)]
        pt = jp.where(jp.asarray(is_site)[:, None], site_pt, body_pt)
    else:
        pt = body_pt
    return body, pt, is_site


def _connect_rows(m: Model, d: Data, ids: np.ndarray, sparse: bool) -> _Rows:
    data = m.eq_data[ids]
    b1, p1, _ = _bodies_points(m, d, ids, 1, data[:, 0:3])
    b2, p2, _ = _bodies_points(m, d, ids, 2, data[:, 3:6])
    jp1, _ = support.jac_batch(m, d, p1, b1)
    jp2, _ = support.jac_batch(m, d, p2, b2)
    J = (jp1 - jp2).reshape(-1, m.nv)
    cols = None
    if sparse:
        J, cols = _static_sparse(J, _two_bodies_support(m, b1, b2, 3))
    jd1, _ = support.jac_dot_batch(m, d, p1, b1)
    jd2, _ = support.jac_dot_batch(m, d, p2, b2)
    bias = ((jd1 - jd2) @ d.qvel).reshape(-1)
    pos = (p1 - p2).reshape(-1)
    r = math.safe_norm(p1 - p2)
    iw = m.body_invweight0
    diag = _rep(iw[b1, 0] + iw[b2, 0], 3)
    n = len(ids)
    return _Rows(J=J, pos=pos, margin=jp.zeros_like(pos), frictionloss=jp.zeros_like(pos), diag=diag,
                 solref=_rep(m.eq_solref[ids], 3), solimp=_rep(m.eq_solimp[ids], 3), imp_r=_rep(r, 3), bias=bias,
                 active=_rep(d.eq_active[ids], 3), type=np.full(3 * n, ConstraintType.EQUALITY),
                 id=np.repeat(ids, 3), k_zero=np.zeros(3 * n, bool), r_scale=jp.ones_like(pos), cols=cols)  # fmt: skip


def _quat_of(m: Model, d: Data, body, objid, is_site):
    q = d.xquat[body]
    if np.any(is_site):
        sq = math.mat_to_quat(d.site_xmat[np.maximum(objid, 0)])
        q = jp.where(jp.asarray(is_site)[:, None], sq, q)
    return q


def _weld_geometry(m: Model, d: Data, ids: np.ndarray) -> dict:
    """Anchors, bodies, relative quaternion p and the rotational map T (de/dt = T (w1 - w2)) of weld rows."""
    data = m.eq_data[ids]
    # eq_data: [0:3] anchor on body2, [3:6] the same point in body1's frame, [6:10] relative quat, [10] torquescale
    b1, p1, s1 = _bodies_points(m, d, ids, 1, data[:, 3:6])
    b2, p2, s2 = _bodies_points(m, d, ids, 2, data[:, 0:3])
    o1 = np.asarray(m.eq_obj1id)[ids]
    o2 = np.asarray(m.eq_obj2id)[ids]
    q1 = _quat_of(m, d, b1, o1, s1)
    q2 = _quat_of(m, d, b2, o2, s2)
    ts = data[:, 10]
    # rotation error e = ts * imag(q2^-1 q1 rq); de/dt = 0.5 ts (p_w I - [p_v]x) R2' (w1 - w2). rq: the relative
    # pose's quaternion eq_data[6:10], the identity for a weld of sites (MuJoCo stores zeros there and aligns the
    # sites' frames)
    rq = data[:, 6:10]
    if np.any(s1):
        rq = jp.where(jp.asarray(s1)[:, None], jp.asarray([1.0, 0.0, 0.0, 0.0], rq.dtype), rq)
    p = math.quat_mul(math.quat_conj(q2), math.quat_mul(q1, rq))
    pw, pv = p[:, 0], p[:, 1:]
    eye = jp.eye(3, dtype=p.dtype)
    # [pv]x as a matrix ([pv]x v = pv x v): column i is pv x e_i
    pvx = jp.swapaxes(jp.cross(pv[:, None, :], eye[None, :, :]), 1, 2)
    R2 = d.xmat[b2]
    if np.any(s2):
        R2 = jp.where(jp.asarray(s2)[:, None, None], d.site_xmat[np.maximum(o2, 0)], R2)
    T = 0.5 * ts[:, None, None] * jp.einsum("nij,nkj->nik", pw[:, None, None] * eye - pvx, R2)
    return dict(b1=b1, b2=b2, p1=p1, p2=p2, p=p, ts=ts, R2=R2, T=T)


def _weld_rows(m: Model, d: Data, ids: np.ndarray, sparse: bool) -> _Rows:
    g = _weld_geometry(m, d, ids)
    b1, b2, p1, p2, p, ts, R2, T = (g[k] for k in ("b1", "b2", "p1", "p2", "p", "ts", "R2", "T"))
    pw, pv = p[:, 0], p[:, 1:]
    e = pv * ts[:, None]
    jp1, jr1 = support.jac_batch(m, d, p1, b1)
    jp2, jr2 = support.jac_batch(m, d, p2, b2)
    jd1, jrd1 = support.jac_dot_batch(m, d, p1, b1)
    jd2, jrd2 = support.jac_dot_batch(m, d, p2, b2)
    Jr = jp.einsum("nij,njv->niv", T, jr1 - jr2)
    Jt = jp1 - jp2
    J = jp.concatenate([Jt, Jr], axis=1).reshape(-1, m.nv)
    cols = None
    if sparse:
        J, cols = _static_sparse(J, _two_bodies_support(m, b1, b2, 6))
    bias_t = (jd1 - jd2) @ d.qvel
    # bias = d2e/dt2 along the zero-acceleration path: with w = R2'(w1 - w2) (w_i world angular velocities),
    # dp/dt = 0.5 [0, w] p, so d2p/dt2 = 0.5 [0, dw/dt] p - 0.25 |w|^2 p, dw/dt = R2'(dw1 - dw2 - w2 x (w1 - w2))
    w1, w2 = jr1 @ d.qvel, jr2 @ d.qvel
    wrel = w1 - w2
    w = jp.einsum("nji,nj->ni", R2, wrel)
    wdot = jp.einsum("nji,nj->ni", R2, (jrd1 - jrd2) @ d.qvel - jp.cross(w2, wrel))
    bias_r = ts[:, None] * (0.5 * (pw[:, None] * wdot + jp.cross(wdot, pv))
                            - 0.25 * jp.sum(w * w, axis=1, keepdims=True) * pv)  # fmt: skip
    bias = jp.concatenate([bias_t, bias_r], axis=1).reshape(-1)
    posv = jp.concatenate([p1 - p2, e], axis=1)
    r = math.safe_norm(posv)
    iw = m.body_invweight0
    diag = jp.concatenate([jp.broadcast_to((iw[b1, 0] + iw[b2, 0])[:, None], (len(ids), 3)),
                           jp.broadcast_to((iw[b1, 1] + iw[b2, 1])[:, None], (len(ids), 3))], axis=1)  # fmt: skip
    n = len(ids)
    pos = posv.reshape(-1)
    return _Rows(J=J, pos=pos, margin=jp.zeros_like(pos), frictionloss=jp.zeros_like(pos), diag=diag.reshape(-1),
                 solref=_rep(m.eq_solref[ids], 6), solimp=_rep(m.eq_solimp[ids], 6), imp_r=_rep(r, 6), bias=bias,
                 active=_rep(d.eq_active[ids], 6), type=np.full(6 * n, ConstraintType.EQUALITY),
                 id=np.repeat(ids, 6), k_zero=np.zeros(6 * n, bool), r_scale=jp.ones_like(pos), cols=cols)  # fmt: skip


def _flex_eq_rows(m: Model, d: Data, edges: np.ndarray, owner: np.ndarray, sparse: bool) -> _Rows:
    """<equality><flex>: one row per non-rigid edge, J = flexedge_J, pos = length - length0, diagA from
    flexedge_invweight0 (mjEQ_FLEX in mj_instantiateEquality)."""
    J, pos, diag = flex.edge_rows(m, d, edges)
    cols = None
    if sparse:
        v1, v2 = flex.edge_vertices(m)
        vb = np.asarray(m.flex_vertbodyid)
        J, cols = _static_sparse(J, _two_bodies_support(m, vb[v1[edges]], vb[v2[edges]], 1))
    n = len(edges)
    return _Rows(J=J, pos=pos, margin=jp.zeros_like(pos), frictionloss=jp.zeros_like(pos), diag=diag,
                 solref=m.eq_solref[owner], solimp=m.eq_solimp[owner], imp_r=jp.abs(pos), bias=jp.zeros_like(pos),
                 active=d.eq_active[owner], type=np.full(n, ConstraintType.EQUALITY), id=owner,
                 k_zero=np.zeros(n, bool), r_scale=jp.ones_like(pos), cols=cols)  # fmt: skip


def _poly_rows(m: Model, d: Data, ids: np.ndarray, tendon: bool, sparse: bool) -> _Rows:
    o1 = np.asarray(m.eq_obj1id)[ids]
    o2 = np.asarray(m.eq_obj2id)[ids]
    has2 = o2 >= 0
    o2c = np.maximum(o2, 0)
    c = m.eq_data[ids, 0:5]
    nv = m.nv
    if tendon:
        x1, x2 = d.ten_length[o1], d.ten_length[o2c]
        r1, r2 = m.tendon_length0[o1], m.tendon_length0[o2c]
        J1, J2 = d.ten_J[o1], d.ten_J[o2c]
        w1, w2 = m.tendon_invweight0[o1], m.tendon_invweight0[o2c]
    else:
        qadr = np.asarray(m.jnt_qposadr)
        dadr = np.asarray(m.jnt_dofadr)
        x1, x2 = d.qpos[qadr[o1]], d.qpos[qadr[o2c]]
        r1, r2 = m.qpos0[qadr[o1]], m.qpos0[qadr[o2c]]
        if not sparse:
            eye = jp.eye(nv, dtype=d.qpos.dtype)
            J1, J2 = eye[dadr[o1]], eye[dadr[o2c]]
        w1, w2 = m.dof_invweight0[dadr[o1]], m.dof_invweight0[dadr[o2c]]
    has2j = jp.asarray(has2)
    dif = jp.where(has2j, x2 - r2, 0.0)
    poly = c[:, 0] + dif * (c[:, 1] + dif * (c[:, 2] + dif * (c[:, 3] + dif * c[:, 4])))
    dpoly = c[:, 1] + dif * (2 * c[:, 2] + dif * (3 * c[:, 3] + dif * 4 * c[:, 4]))
    pos = x1 - r1 - jp.where(has2j, poly, c[:, 0])
    cols = None
    if sparse and not tendon:  # +1 at the first joint's dof, -dpoly at the second's
        J = jp.stack([jp.ones_like(dpoly), jp.where(has2j, -dpoly, 0.0)], axis=1)
        cols = np.stack([dadr[o1], np.where(has2, dadr[o2c], 0)], axis=1).astype(np.int64)
    else:
        J = J1 - jp.where(has2j[:, None], dpoly[:, None] * J2, 0.0)
        if sparse:
            tdofs = types.tendon_dofs(m)
            J, cols = _static_sparse(J, [_union(tdofs[a], tdofs[b] if h else []) for a, b, h in zip(o1, o2c, has2)])
    diag = w1 + jp.where(has2j, w2, 0.0)
    n = len(ids)
    return _Rows(J=J, pos=pos, margin=jp.zeros_like(pos), frictionloss=jp.zeros_like(pos), diag=diag,
                 solref=m.eq_solref[ids], solimp=m.eq_solimp[ids], imp_r=jp.abs(pos), bias=jp.zeros_like(pos),
                 active=d.eq_active[ids], type=np.full(n, ConstraintType.EQUALITY), id=ids,
                 k_zero=np.zeros(n, bool), r_scale=jp.ones_like(pos), cols=cols)  # fmt: skip


def _friction_rows(m: Model, d: Data, dofs: np.ndarray, tendons: np.ndarray, sparse: bool) -> list[_Rows]:
    out = []
    dt = d.qpos.dtype
    if len(dofs):
        n = len(dofs)
        J, cols = (jp.ones((n, 1), dt), dofs[:, None]) if sparse else (jp.eye(m.nv, dtype=dt)[dofs], None)
        z = jp.zeros(n, dt)
        out.append(_Rows(J=J, pos=z, margin=z, frictionloss=m.dof_frictionloss[dofs], diag=m.dof_invweight0[dofs],
                         solref=m.dof_solref[dofs], solimp=m.dof_solimp[dofs], imp_r=z, bias=z,
                         active=jp.ones(n, bool), type=np.full(n, ConstraintType.FRICTION_DOF), id=dofs,
                         k_zero=np.ones(n, bool), r_scale=jp.ones(n, dt), cols=cols))  # fmt: skip
    if len(tendons):
        n = len(tendons)
        z = jp.zeros(n, dt)
        J, cols = d.ten_J[tendons], None
        if sparse:
            J, cols = _static_sparse(J, [types.tendon_dofs(m)[t] for t in tendons])
        out.append(_Rows(J=J, cols=cols, pos=z, margin=z, frictionloss=m.tendon_frictionloss[tendons],
                         diag=m.tendon_invweight0[tendons], solref=m.tendon_solref_fri[tendons],
                         solimp=m.tendon_solimp_fri[tendons], imp_r=z, bias=z, active=jp.ones(n, bool),
                         type=np.full(n, ConstraintType.FRICTION_TENDON), id=tendons, k_zero=np.ones(n, bool),
                         r_scale=jp.ones(n, dt)))  # fmt: skip
    return out


def _two_sided(x, rng, Jrow, margin, diag, solref, solimp, ctype, ids, one, cols=None) -> tuple[_Rows, jax.Array]:
    """Limit rows, per object (n,): the lower (x - lo, +J) and upper (hi - x, -J) rows, or where `one` (static (n,)
    bool: the range is at least twice the margin, so at most one side can be active) only the nearer side's.
    Jrow (n, nv) dense, or sparse values (n, wb) at columns cols (n, wb). Returns the rows and whether an object of
    one row had both sides active (a row left out: Warning.CNSTRFULL)."""
    n = x.shape[0]
    dt = x.dtype
    lo, hi = x - rng[:, 0], rng[:, 1] - x
    near_lo = lo <= hi
    both = jp.any(jp.asarray(one) & (lo < margin) & (hi < margin))
    first = jp.where(jp.asarray(one) & ~near_lo, hi, lo)  # one-row objects: the nearer side
    sign = jp.where(jp.asarray(one) & ~near_lo, -1.0, 1.0).astype(dt)[:, None]
    dist = jp.stack([first, hi], axis=1).reshape(-1)
    keep = np.stack([np.ones(n, bool), ~np.asarray(one, bool)], axis=1).reshape(-1)  # drop the unused second rows
    rows = np.nonzero(keep)[0]
    k = len(rows)
    per = np.repeat(np.arange(n), 2)[rows]  # object of each kept row
    cols = None if cols is None else np.asarray(cols)[per]
    # row r is +-Jrow[per[r]]: a sign per row times a static selection of Jrow (a constant for joints)
    row_sign = jp.where(jp.asarray(rows % 2 == 0), support.take(sign[:, 0], per), -1.0)
    J = row_sign[:, None] * (Jrow[per] if isinstance(Jrow, np.ndarray) else support.take(Jrow, per))
    dist, mg = dist[rows], margin[per]
    out = _Rows(J=J, pos=dist, margin=mg, frictionloss=jp.zeros_like(dist), diag=diag[per], solref=solref[per],
                solimp=solimp[per], imp_r=jp.abs(dist - mg), bias=jp.zeros_like(dist), active=dist < mg,
                type=np.full(k, ctype), id=np.asarray(ids)[per], k_zero=np.zeros(k, bool), r_scale=jp.ones_like(dist),
                cols=cols)  # fmt: skip
    return out, both


def _limit_rows(m: Model, d: Data, p: Plan) -> tuple[list[_Rows], jax.Array]:
    """Joint, ball and tendon limit rows, and whether a one-row limit had both sides active (see `_two_sided`)."""
    out = []
    over = jp.zeros((), bool)
    dt = d.qpos.dtype
    qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    if len(p.lim_jnt):
        j = p.lim_jnt
        if p.sparse:
            Jrow, cols = np.ones((len(j), 1), dt), dadr[j][:, None].astype(np.int64)
        else:
            Jrow, cols = np.eye(m.nv, dtype=dt)[dadr[j]], None
        rows, o = _two_sided(d.qpos[qadr[j]], m.jnt_range[j], Jrow, m.jnt_margin[j], m.dof_invweight0[dadr[j]],
                             m.jnt_solref[j], m.jnt_solimp[j], ConstraintType.LIMIT_JOINT, j, p.lim_jnt_one, cols)
        out.append(rows)
        over = over | o
    if len(p.lim_ball):
        j = p.lim_ball
        n = len(j)
        q = d.qpos[qadr[j][:, None] + np.arange(4)[None, :]]
        axis, angle = math.quat_to_axis_angle(math.quat_normalize(q))
        # shortest rotation: angle in [0, pi]
        flip = angle > jp.pi
        angle = jp.where(flip, 2 * jp.pi - angle, angle)
        axis = jp.where(flip[:, None], -axis, axis)
        rmax = jp.maximum(m.jnt_range[j, 0], m.jnt_range[j, 1])
        dist = rmax - angle
        ball_cols = (dadr[j][:, None] + np.arange(3)[None, :]).astype(np.int64)
        if p.sparse:
            J, cols = -axis, ball_cols
        else:
            J, cols = jp.zeros((n, m.nv), dt).at[jp.arange(n)[:, None], ball_cols].set(-axis), None
        mg = m.jnt_margin[j]
        out.append(_Rows(J=J, pos=dist, margin=mg, frictionloss=jp.zeros_like(dist),
                         diag=m.dof_invweight0[dadr[j]], solref=m.jnt_solref[j], solimp=m.jnt_solimp[j],
                         imp_r=jp.abs(dist - mg), bias=jp.zeros_like(dist), active=dist < mg,
                         type=np.full(n, ConstraintType.LIMIT_JOINT), id=j, k_zero=np.zeros(n, bool),
                         r_scale=jp.ones_like(dist), cols=cols))  # fmt: skip
    if len(p.lim_ten):
        t = p.lim_ten
        Jrow, cols = d.ten_J[t], None
        if p.sparse:
            Jrow, cols = _static_sparse(Jrow, [types.tendon_dofs(m)[i] for i in t])
        rows, o = _two_sided(d.ten_length[t], m.tendon_range[t], Jrow, m.tendon_margin[t], m.tendon_invweight0[t],
                             m.tendon_solref_lim[t], m.tendon_solimp_lim[t], ConstraintType.LIMIT_TENDON, t,
                             p.lim_ten_one, cols)  # fmt: skip
        out.append(rows)
        over = over | o
    return out, over


CHAIN_SPARSE_FACTOR = 4  # "auto": build contact rows from the bodies' dof chains when 2 * chain * factor <= nv


def _body_chain(m: Model) -> np.ndarray:
    """Static (nbody, L): the dofs that move each body (its own and its ancestors'), padded with nv."""

    def build(m: Model) -> np.ndarray:
        mask = support.body_dof_mask(m)
        width = max(1, int(mask.sum(axis=1).max(initial=0)))
        out = np.full((m.nbody, width), m.nv, np.int32)
        for b in range(m.nbody):
            idx = np.nonzero(mask[b])[0]
            out[b, : idx.size] = idx
        return out

    return support.memo(m, "constraint_body_chain", build)


def _chain_sparse(m: Model) -> bool:
    """Static (`m.config.contact_jacobian`): build contact rows by scattering chain values (large scenes of short
    chains) or densely."""
    mode = m.config.contact_jacobian
    return mode == "chain" or (mode == "auto" and 2 * _body_chain(m).shape[1] * CHAIN_SPARSE_FACTOR <= m.nv)


def _dense_jacobian_components(m: Model, d: Data, pt: jax.Array, b1: jax.Array, b2: jax.Array,
                               ncomp: int, pt1: jax.Array | None = None) -> list[jax.Array]:  # fmt: skip
    """The ncomp rows of body 2's minus body 1's [lin; ang] Jacobian at the points pt (k, 3) (body 1's at pt1 where
    given), each (k, nv).

    Written per component with broadcasts (no einsum cross product and no (k, 3, nv) gather), so that XLA fuses
    them into the rows that use them in the layout those rows want: a (k, nv) array per component.
    """
    cdof = d.cdof
    ang = [cdof[None, :, i] for i in range(3)]  # (1, nv) each
    lin = [cdof[None, :, 3 + i] for i in range(3)]

    def comps(b, pt):
        mk = support._mask(m, b, cdof.dtype)  # (k, nv): the dofs that move body b (as support.jac)
        o = pt - support._root_com(m, d, b)  # (k, 3)
        o = [o[:, i, None] for i in range(3)]
        out = [(lin[i] + ang[(i + 1) % 3] * o[(i + 2) % 3] - ang[(i + 2) % 3] * o[(i + 1) % 3]) * mk
               for i in range(3)]  # fmt: skip
        return out + [ang[i] * mk for i in range(3)] if ncomp == 6 else out

    return [a - b for a, b in zip(comps(b2, pt), comps(b1, pt if pt1 is None else pt1))]


def _contact_jacobian(m: Model, d: Data, pt: jax.Array, b1: jax.Array, b2: jax.Array, sparse: bool = False,
                      ncomp: int = 6, pt1: jax.Array | None = None):  # fmt: skip
    """Jacobian difference (body 2 minus body 1) at the contact points pt (k, 3), as [lin; ang] rows; pt1 (k, 3):
    body 1's at these points instead (the rod rows' edge velocity, pipeline/rod_contact.py).

    ncomp (static): 6, or 3 when the rows have no rotational part (condim <= 3): then only the linear Jacobian is
    formed and coef is (k, r, 3).
    Returns rows_of: coef (k, r, ncomp) -> (k, r, nv), each contact's rows = coef @ J6. Dense: J6 (k, 6, nv) is
    materialised once and combined by broadcast sums (a batched small matmul per contact is a slow loop on XLA
    CPU). Chain-sparse (`_chain_sparse`): J6 is evaluated only on the <= 2L dofs that move either body and the
    rows are scatter-added into zeros, so the work follows the chains, not nv. sparse (the sparse efc_J layout):
    rows_of returns the chain values themselves, (values (k, r, 2L), columns (k, r, 2L)): body 2's chain then
    body 1's (a dof moving both appears twice; its values add).
    """
    if not sparse and not _chain_sparse(m):
        jj = _dense_jacobian_components(m, d, pt, b1, b2, ncomp, pt1)
        return lambda coef: sum(coef[:, :, c, None] * jj[c][:, None, :] for c in range(ncomp))
    chain = jp.asarray(_body_chain(m))
    cdof = jp.concatenate([d.cdof, jp.zeros((1, 6), d.cdof.dtype)])  # row nv: padding
    rootcom = d.subtree_com[jp.asarray(np.asarray(m.body_rootid), jp.int32)]

    def chain_values(b, pt):  # (k, L, 6): [lin; ang] Jacobian columns of body b at its chain dofs
        c = cdof[chain[b]]
        ang = c[..., :3]
        off = jp.broadcast_to((pt - rootcom[b])[:, None, :], ang.shape)
        return jp.concatenate([c[..., 3:] + math.cross_c(ang, off), ang], axis=-1)

    vals = jp.concatenate([chain_values(b2, pt), -chain_values(b1, pt if pt1 is None else pt1)], axis=1)[..., :ncomp]
    idx = jp.concatenate([chain[b2], chain[b1]], axis=1)  # (k, 2L)
    k = pt.shape[0]
    if sparse:
        cols = jp.where(idx == m.nv, 0, idx)  # padding: column 0 (its value is 0)

        def sparse_rows_of(coef):
            v = sum(coef[:, :, None, c] * vals[:, None, :, c] for c in range(ncomp))  # (k, r, 2L)
            return v, jp.broadcast_to(cols[:, None, :], v.shape)

        return sparse_rows_of

    def rows_of(coef):
        r = coef.shape[1]
        v = sum(coef[:, :, None, c] * vals[:, None, :, c] for c in range(ncomp))  # (k, r, 2L)
        out = jp.zeros((k, r, m.nv + 1), v.dtype)
        out = out.at[jp.arange(k)[:, None, None], jp.arange(r)[None, :, None], idx[:, None, :]].add(v)
        return out[..., : m.nv]

    return rows_of

def _weighted_jacobian(m: Model, d: Data, pt: jax.Array, b1: jax.Array, b2: jax.Array, w2: jax.Array,
                       sparse: bool = False, ncomp: int = 6):  # fmt: skip
    """rows_of (see _contact_jacobian) of sum_j w2[:, j] J(b2[:, j]) - J(b1) at pt: b2, w2 (k, W) with rows of
    weights summing to 1 (flex element contacts; W = 1 otherwise), so the sum is that of W two-body differences
    (a flex self-collision: b1 the world, side 0's element bodies among b2 with negative weights, summing to 0)."""
    if b2.shape[1] == 1:
        return _contact_jacobian(m, d, pt, b1, b2[:, 0], sparse, ncomp)
    parts = [_contact_jacobian(m, d, pt, b1, b2[:, j], sparse, ncomp) for j in range(b2.shape[1])]

    def rows_of(coef):
        outs = [f(coef * w2[:, j, None, None]) for j, f in enumerate(parts)]
        if isinstance(outs[0], tuple):  # sparse: each part is body 2's chain then body 1's (L columns each)
            L = outs[0][0].shape[-1] // 2  # the W body-2 chains side by side, then body 1's chain once (summed)
            vals = [o[0][..., :L] for o in outs] + [sum(o[0][..., L:] for o in outs)]
            cols = [o[1][..., :L] for o in outs] + [outs[0][1][..., L:]]
            return jp.concatenate(vals, axis=-1), jp.concatenate(cols, axis=-1)  # (repeated columns add)
        return sum(outs)

    return rows_of


def _sparse_rows(rows_of, coef, n):
    """(values, columns) of contact rows_of(coef) reshaped to n rows per contact (see _contact_jacobian)."""
    out = rows_of(coef)
    if isinstance(out, tuple):
        v, c = out
        return v.reshape(-1, v.shape[-1]), c.reshape(-1, c.shape[-1])
    return out.reshape(-1, out.shape[-1]), None


def _slot_bodies(m: Model) -> tuple[np.ndarray, np.ndarray] | None:
    """Static (body1, body2) (nconmax,) of every contact slot where its geoms are static (`driver.slot_bodies`) and
    every side is one geom's body (no flex contacts), else None. A contact's Jacobian then uses constant dof masks
    and root-com gathers with constant indices instead of gathers by the traced geom ids (XLA:CPU recomputed those
    gathers for every element of the row assembly's fusion)."""

    def build(m: Model):
        return driver.slot_bodies(m) if flexcol._side_widths(m) == (1, 0) else None

    return static_memo(m, "constraint_slot_bodies", build)


def _contact_rows(m: Model, d: Data, p: Plan) -> list[_Rows]:
    """One _Rows per static contact dimension present."""
    out = []
    con = d.contact
    dt = d.qpos.dtype
    impratio = m.opt.impratio
    cb1, cb2, cw2 = flexcol.contact_body_weights(m, d, con)  # flex element sides: several weighted bodies
    cdw = flexcol.diag_weights(m, con, cw2)
    static = _slot_bodies(m)  # every slot's two bodies known at trace time: no gathers by traced body ids
    rods = rod_contact.terms(m, d, con) if rod_contact.has_contacts(m) else None
    for dim in sorted(set(p.con_dim.tolist())):
        slots = np.nonzero(p.con_dim == dim)[0]
        k = len(slots)

        def at(x, slots=slots):  # x[slots] by static slices (see `_permute`)
            return _permute(x, slots)

        g = at(con.geom)
        b1, b2, w2 = at(cb1), at(cb2), at(cw2)
        if static is not None:  # (k,) and (k, 1) numpy ids: constant masks and gathers with constant indices
            b1, b2 = static[0][slots], static[1][slots][:, None]
        pt = at(con.pos)
        frame = at(con.frame)
        if dim <= 3:  # normal and tangents only: the rows see the linear Jacobian alone
            rows_of = _weighted_jacobian(m, d, pt, b1, b2, w2, p.sparse, ncomp=3)
            frame6 = frame  # (k, 3, 3): rows of the contact frame
        else:
            rows_of = _weighted_jacobian(m, d, pt, b1, b2, w2, p.sparse)
            zero3 = jp.zeros_like(frame)
            frame6 = jp.concatenate([jp.concatenate([frame, zero3], axis=2), jp.concatenate([zero3, frame], axis=2)],
                                    axis=1)  # (k, 6, 6) block-diagonal contact frame  # fmt: skip
        if rods is not None:  # elastic rods: the element's rotation (bending and twist) moves the contact point
            ba, bb, xa, xb, *rest = (at(x) for x in rods)
            edge_rows_of = _contact_jacobian(m, d, xb, ba, bb, p.sparse, ncomp=3, pt1=xa)  # v_b - v_a at the vertices
            carrier_rows_of = (_contact_jacobian(m, d, pt, jp.zeros_like(ba), ba, p.sparse)
                               if types.rods_on_moving_body(m) else None)  # fmt: skip
            rows_of = rod_contact.add_rows(m, rows_of, edge_rows_of, *rest, p.sparse, carrier_rows_of)

        fr = at(con.friction)  # (k, 5)
        cs = _surface_vel(m, d, g, pt, frame) if m.flg_surfacevel else None  # (k, 6) in the contact frame
        live = at(contact_live(m, con))
        # rows beyond a slot's actual condim (broadphase-trimmed groups, adhesive contacts in the gap band) are dead
        adim = at(con.dim)
        adh = at(con.adhesion) if m.flg_adhesion else None  # (k,)
        # normal-only contacts in a wider slot: adhesive ones in the gap band, condim-1 contacts in the slots of a
        # capped or trimmed layout (which have their group's or the model's largest condim)
        single = (adim == 1) if (m.flg_adhesion or _shared_slots(m)) and dim > 1 else None
        dist = at(con.dist)
        mg = at(con.includemargin)
        iw = m.body_invweight0
        diag_n = iw[b1, 0] + jp.sum(at(cdw) * iw[b2, 0], axis=1)  # (self-collisions: side 0 weighs < 0)
        solref = at(con.solref)
        solimp = at(con.solimp)
        sfr = at(con.solreffriction)
        if dim == 1:
            coef = frame6[:, :1]
            J, cols = _sparse_rows(rows_of, coef, 1)
            ctype = ConstraintType.CONTACT_FRICTIONLESS
            out.append(_Rows(J=J, cols=cols, pos=dist, margin=mg, frictionloss=jp.zeros(k, dt), diag=diag_n,
                             solref=solref, solimp=solimp, imp_r=jp.abs(dist - mg), bias=jp.zeros(k, dt), active=live,
                             type=np.full(k, ctype), id=slots, k_zero=np.zeros(k, bool),
                             r_scale=jp.ones(k, dt), vel_add=None if cs is None else cs[:, 0], adh=adh, coef=coef,
                             slots=slots))  # fmt: skip
            continue
        if p.elliptic:
            n = dim
            coef = frame6[:, :dim]
            J, cols = _sparse_rows(rows_of, coef, n)
            f0 = fr[:, :1]
            fi = fr[:, : n - 1]
            scale = jp.concatenate([jp.ones((k, 1), dt), (f0 / fi) ** 2 / impratio], axis=1)
            row_live = live[:, None] & (jp.arange(n)[None, :] < adim[:, None])
            pos = jp.concatenate([dist[:, None], jp.zeros((k, n - 1), dt)], axis=1)
            margin = jp.concatenate([mg[:, None], jp.zeros((k, n - 1), dt)], axis=1)
            use_fr = jp.any(sfr != 0, axis=1)
            sref = jp.where(use_fr[:, None], sfr, solref)
            solref_rows = jp.concatenate([solref[:, None, :], jp.broadcast_to(sref[:, None, :], (k, n - 1, 2))],
                                         axis=1)  # fmt: skip
            k_zero = np.zeros((k, n), bool)
            k_zero[:, 1:] = True
            ctype = np.full((k, n), ConstraintType.CONTACT_ELLIPTIC)
            vel_add = None if cs is None else cs[:, :n]
            if single is not None:  # a normal-only contact's row is frictionless
                ctype = jp.where(single[:, None], ConstraintType.CONTACT_FRICTIONLESS, jp.asarray(ctype))
            if adh is not None:  # the normal row pulls
                adh = jp.concatenate([adh[:, None], jp.zeros((k, n - 1), dt)], axis=1)
        else:
            n = 2 * (dim - 1)
            fi = fr[:, : dim - 1]  # (k, dim-1)
            cn = frame6[:, :1]  # (k, 1, 6 or 3): normal
            cd = frame6[:, 1:dim] * fi[:, :, None]  # (k, dim-1, 6 or 3): mu_i * tangent/spin/roll direction i
            f0sq = fr[:, 0] * fr[:, 0]
            scale = jp.broadcast_to((2.0 * f0sq * (1.0 + f0sq) / impratio)[:, None], (k, n))
            nrow = 2 * (adim - 1)
            if single is not None:  # normal-only contacts: one frictionless row, the normal (as condim 1)
                cd = jp.where(single[:, None, None], 0.0, cd)
                scale = jp.where(single[:, None], 1.0, scale)
                nrow = jp.where(single, 1, nrow)
            coef = jp.stack([cn + cd, cn - cd], axis=2).reshape(k, n, -1)
            J, cols = _sparse_rows(rows_of, coef, n)
            row_live = live[:, None] & (jp.arange(n)[None, :] < nrow[:, None])
            pos = jp.broadcast_to(dist[:, None], (k, n))
            margin = jp.broadcast_to(mg[:, None], (k, n))
            solref_rows = jp.broadcast_to(solref[:, None, :], (k, n, 2))
            k_zero = np.zeros((k, n), bool)
            ctype = np.full((k, n), ConstraintType.CONTACT_PYRAMIDAL)
            # row pair i: normal +- mu_i direction i; the surface velocity has no normal part: +- mu_i cs_i
            vel_add = None if cs is None else (jp.stack([fi * cs[:, 1:dim], -fi * cs[:, 1:dim]], axis=2)
                                               .reshape(k, n))  # fmt: skip
            if single is not None:  # the adhesion is shared equally by the edges
                ctype = jp.where(single[:, None], ConstraintType.CONTACT_FRICTIONLESS, jp.asarray(ctype))
                if adh is not None:
                    adh = jp.broadcast_to((adh / jp.maximum(nrow, 1))[:, None], (k, n))
                if vel_add is not None:
                    vel_add = jp.where(single[:, None], 0.0, vel_add)
        out.append(_Rows(J=J, cols=cols, pos=pos.reshape(-1), margin=margin.reshape(-1),
                         frictionloss=jp.zeros(k * n, dt), diag=_rep(diag_n, n), solref=solref_rows.reshape(-1, 2),
                         solimp=_rep(solimp, n),
                         imp_r=_rep(jp.abs(dist - mg), n), bias=jp.zeros(k * n, dt), active=row_live.reshape(-1),
                         type=ctype.reshape(-1), id=np.repeat(slots, n), k_zero=k_zero.reshape(-1),
                         r_scale=scale.reshape(-1), vel_add=None if vel_add is None else vel_add.reshape(-1),
                         adh=None if adh is None else adh.reshape(-1), coef=coef, slots=slots))  # fmt: skip
    return out


def _shared_slots(m: Model) -> bool:
    """Static: a contact of condim 1 can land in a slot of a larger static condim (`_slot_condim`): the slots of a
    capacity cap (`driver.capped`: all of the model's largest condim) or of a broadphase-trimmed group (its
    largest), where the model has condim-1 and wider contacts. Such a contact makes one frictionless row."""

    def build(m: Model) -> bool:
        if m.nconmax == 0:
            return False
        raw = _slot_condim(m, driver.contact_capacity(m))
        if raw.size == 0 or raw.min() > 1 or raw.max() == 1:
            return False
        if driver.capped(m):
            return True
        prio, cd = np.asarray(m.geom_priority), np.asarray(m.geom_condim)
        for g in driver.pair_table(m).groups:
            if g.capacity < len(g.geom1):
                if g.pair[0] >= 0:
                    dims = np.asarray(m.pair_dim)[g.pair]
                else:
                    p1, p2, c1, c2 = prio[g.geom1], prio[g.geom2], cd[g.geom1], cd[g.geom2]
                    dims = np.where(p1 == p2, np.maximum(c1, c2), np.where(p1 > p2, c1, c2))
                if dims.min() == 1 < dims.max():
                    return True
        return False

    return bool(static_memo(m, "constraint_shared_slots", build))


def _surface_vel(m: Model, d: Data, g: jax.Array, pt: jax.Array, frame: jax.Array) -> jax.Array:
    """(k, 6) relative surface velocity (geom 2's minus geom 1's) of k contacts in their contact frame (normal,
    tangents, spin, rolls), with the normal and rolling parts zeroed (mj_addSurfaceVel): each geom's
    geom_surfacevel (linear, angular; geom frame) rotated to the world, plus angular x (contact point - geom
    centre). g (k, 2) geom ids, pt (k, 3) contact points, frame (k, 3, 3) contact frames (rows)."""
    sv = jp.where((g >= 0)[..., None], m.geom_surfacevel[jp.maximum(g, 0)], 0.0)  # (k, 2, 6); flex sides: none
    g = jp.maximum(g, 0)
    rot = d.geom_xmat[g]  # (k, 2, 3, 3)
    lin = jp.einsum("kgij,kgj->kgi", rot, sv[..., :3])
    ang = jp.einsum("kgij,kgj->kgi", rot, sv[..., 3:])
    lin = lin + jp.cross(ang, pt[:, None, :] - d.geom_xpos[g])
    svel, sang = lin[:, 1] - lin[:, 0], ang[:, 1] - ang[:, 0]
    cs = jp.concatenate([jp.einsum("kij,kj->ki", frame, svel), jp.einsum("kij,kj->ki", frame, sang)], axis=1)
    return cs * jp.asarray([0.0, 1.0, 1.0, 1.0, 0.0, 0.0], cs.dtype)


def adhesion_on(m: Model) -> bool:
    """Static: the model's contacts can be adhesive (`m.flg_adhesion`) and contacts are made (MuJoCo's mj_adhesion
    returns early otherwise)."""
    return m.flg_adhesion and m.nconmax > 0 and m.nv > 0 and not _flag(m, DisableBit.CONTACT) and not _flag(
        m, DisableBit.CONSTRAINT)


def adhesion_force(m: Model, d: Data) -> jax.Array:
    """qfrc_adhesion (nv,) (mj_adhesion): every detected contact with nonzero adhesion pulls its geoms together along
    its normal with a constant force of that size, in contact and in the gap band alike: -adhesion J_n' with J_n the
    normal row of the contact's Jacobian (body 2 minus body 1 at the contact point)."""
    if not adhesion_on(m):
        return jp.zeros((m.nv,), d.qpos.dtype)
    con = d.contact
    b1, b2, w2 = flexcol.contact_body_weights(m, d, con)
    rows_of = _weighted_jacobian(m, d, con.pos, b1, b2, w2, ncomp=3)
    if rod_contact.has_contacts(m):
        ba, bb, xa, xb, *rest = rod_contact.terms(m, d, con)
        carrier = _contact_jacobian(m, d, con.pos, jp.zeros_like(ba), ba) if types.rods_on_moving_body(m) else None
        rows_of = rod_contact.add_rows(m, rows_of, _contact_jacobian(m, d, xb, ba, bb, ncomp=3, pt1=xa), *rest, False,
                                       carrier)  # fmt: skip
    pull = jp.where(con.active, -con.adhesion, 0.0)
    return jp.sum(rows_of(con.frame[:, :1] * pull[:, None, None])[:, 0], axis=0)


def contact_live(m: Model, con: types.Contact) -> jax.Array:
    """(nconmax,) bool: contacts that make constraint rows: detected and within their includemargin, or adhesive
    (nonzero adhesion: rows in the gap band too, mj_setContact's exclude rule)."""
    live = con.dist < con.includemargin
    if m.flg_adhesion:
        live = live | (con.adhesion != 0)
    return con.active & live


def _impedance(solimp, r):
    """d(r) of the computation chapter; solimp (n, 5), r = |pos - margin| (n,)."""
    dmin = jp.clip(solimp[:, 0], MINIMP, MAXIMP)
    dmax = jp.clip(solimp[:, 1], MINIMP, MAXIMP)
    width = jp.maximum(solimp[:, 2], 0.0)
    mid = jp.clip(solimp[:, 3], MINIMP, MAXIMP)
    power = jp.maximum(solimp[:, 4], 1.0)
    x = r / jp.where(width > MINVAL, width, 1.0)
    x = jp.where(width > MINVAL, jp.minimum(x, 1.0), 1.0)
    x_safe_lo = jp.maximum(x, 0.0)
    a = 1.0 / mid ** (power - 1.0)
    b = 1.0 / (1.0 - mid) ** (power - 1.0)
    y_lo = a * x_safe_lo**power
    y_hi = 1.0 - b * jp.maximum(1.0 - x, 0.0) ** power
    y = jp.where(x <= mid, y_lo, y_hi)
    y = jp.where(x >= 1.0, 1.0, y)
    return dmin + y * (dmax - dmin), dmax


def make_constraint(m: Model, d: Data) -> Data:
    """Fill the padded efc_* arrays (mj_makeConstraint, mj_makeImpedance, mj_projectConstraint-free parts)."""
    p = plan(m)
    if p.nefc == 0:
        return d.replace(nefc=jp.zeros((), jp.int32))
    d, r = _assemble(m, d, p)
    return fill(m, d, r)


def held_contacts_supported(m: Model) -> bool:
    """Static: `make_constraint_held` applies (contact rows, the dense efc_J layout, one body per contact side, no
    diagexact flag, no body transmission reading efc_J, no fused rows kernel)."""
    p = plan(m)
    if not len(p.con_dim) or p.sparse or m.opt.enableflags & EnableBit.DIAGEXACT:
        return False
    if np.any(np.asarray(m.actuator_trntype) == types.TrnType.BODY) or rod_contact.has_contacts(m):
        return False
    return flexcol.elem_width(m) == 1


def make_constraint_held(m: Model, d: Data) -> Data:
    """`make_constraint` whose contact rows of efc_J carry no derivative (`held_contacts_supported(m)`): their
    derivative enters through products instead (`contact_products`), never as a (rows, nv) tangent or cotangent.
    The values are make_constraint's; efc_vel = J qvel keeps its full derivative (dJ qvel by product). For a
    derivative pass whose every other use of efc_J adds the products' derivative (`derivatives._constraint_at`)."""
    p = plan(m)
    d, r = _assemble(m, d, p, held=True)
    return fill(m, d, r)


def _tangent(x: jax.Array) -> jax.Array:
    """x's derivative with the value 0 (exactly): x - stop_gradient(x)."""
    return x - jax.lax.stop_gradient(x)


def contact_products(m: Model, d: Data):
    """(jx, jtf): the contact rows' products with their efc_J at the state of d, for the derivative pass of
    `make_constraint_held` (`held_contacts_supported(m)`): jx(x) (nefc,) = efc_J x on the contact rows (0 on the
    others), jtf(f) (nv,) = efc_J' f over the contact rows, both differentiable in the state of d (the contacts'
    points, frames, frictions, cdof, subtree_com) without forming a (rows, nv) array: each contact's relative
    [lin; ang] velocity (6,) of its two bodies at its point, and each contact's wrench mapped to the dofs."""
    p = plan(m)
    con = d.contact
    dt = d.qpos.dtype
    b1, b2, _ = flexcol.contact_body_weights(m, d, con)
    b2 = b2[:, 0]
    cang, clin = d.cdof[:, :3], d.cdof[:, 3:]
    mk1, mk2 = support._mask(m, b1, dt), support._mask(m, b2, dt)  # (nconmax, nv)
    o1 = con.pos - support._root_com(m, d, b1)
    o2 = con.pos - support._root_com(m, d, b2)
    blocks = _contact_rows(m, d, p)
    pre = p.adr["contact"]
    order = np.concatenate([(p.con_adr[b.slots][:, None] + np.arange(b.coef.shape[1])[None, :]).reshape(-1)
                            for b in blocks])  # fmt: skip
    inv = np.empty_like(order)
    inv[order - pre] = np.arange(order.shape[0])

    def jx(x):
        def point_vel(mk, o):  # (nconmax, 6) [lin; ang]
            xm = mk * x[None, :]
            ang, lin = xm @ cang, xm @ clin
            return jp.concatenate([lin + jp.cross(ang, o), ang], axis=1)

        v = point_vel(mk2, o2) - point_vel(mk1, o1)
        rows = []
        for b in blocks:
            vb = _permute(v, b.slots)[:, : b.coef.shape[2]]
            rows.append(jp.where(b.active, jp.einsum("krc,kc->kr", b.coef, vb).reshape(-1), 0.0))
        out = _assemble_rows(rows, inv)
        return jp.concatenate([jp.zeros((pre,), out.dtype), out])

    def jtf(f):
        fc = _permute(f[pre:], order - pre)
        out, at = jp.zeros((m.nv,), f.dtype), 0
        for b in blocks:
            k, r, nc = b.coef.shape
            fb = jp.where(b.active, fc[at : at + k * r], 0.0).reshape(k, r)
            at += k * r
            w = jp.einsum("krc,kr->kc", b.coef, fb)  # (k, nc): each contact's wrench [force; torque]
            wl = w[:, :3]
            wa = w[:, 3:] if nc == 6 else 0.0

            def dofs(mk, o, wl=wl, wa=wa):  # (k, nv): the wrench at the point on the dofs that move the body
                return mk * (wl @ clin.T + (jp.cross(o, wl) + wa) @ cang.T)

            sl = lambda x, s=b.slots: _permute(x, s)  # noqa: E731
            out = out + jp.sum(dofs(sl(mk2), sl(o2)) - dofs(sl(mk1), sl(o1)), axis=0)
        return out

    return jx, jtf


def assemble(m: Model, d: Data, com_vel: bool = True) -> tuple[Data, dict]:
    """Every row of `plan(m)` at the state of d (see `_assemble`); the XLA twin of the fused rows kernel, which
    passes com_vel=False: its cvel and cdof_dot are inputs (d's), computed before the kernel."""
    return _assemble(m, d, plan(m), com_vel)


def fill(m: Model, d: Data, r: dict) -> Data:
    """Data's efc_* fields (and nefc, contact.efc_address, the CNSTRFULL warning) from the row quantities `r`
    (`_assemble`'s dict: fields type/id/pos/margin/frictionloss, active, J, cols, diag, R, vel, aref, lim_over)."""
    p = plan(m)
    f, active = r["fields"], r["active"]
    dt = d.qpos.dtype
    if len(p.con_dim):  # contact.efc_address: first row of each contact with rows (-1: none, e.g. in the gap band)
        con = d.contact
        live = contact_live(m, con)
        d = d.replace(contact=con.replace(efc_address=jp.where(live, jp.asarray(p.con_adr, jp.int32), -1)))
    return d.replace(
        warning_number=count_warning(d.warning_number, Warning.CNSTRFULL, r["lim_over"]),
        nefc=jp.sum(active).astype(jp.int32),
        efc_type=jp.asarray(f["type"], jp.int32),
        efc_id=jp.asarray(f["id"], jp.int32),
        efc_mask=active,
        efc_J=r["J"].astype(dt),
        efc_J_colind=r["cols"],
        efc_pos=jp.where(active, f["pos"], 0.0),
        efc_margin=jp.where(active, f["margin"], 0.0),
        efc_frictionloss=jp.where(active, f["frictionloss"], 0.0),
        efc_diagA=jp.where(active, r["diag"], 0.0),
        efc_D=1.0 / r["R"],
        efc_R=r["R"],
        efc_vel=r["vel"],
        efc_aref=r["aref"],
    )


def efc_kbip(m: Model, d: Data) -> jax.Array:
    """MuJoCo's efc_KBIP (njmax, 4): stiffness K, damping B, impedance I of every row at the state of d (after
    collision; zero on inactive rows; the impedance derivative P is not computed: 0). Recomputed on request from
    the same rows make_constraint builds rather than stored in Data (aref, R and D carry what the solver needs)."""
    p = plan(m)
    if p.nefc == 0:
        return jp.zeros((0, 4), d.qpos.dtype)
    _, r = _assemble(m, d, p)
    KBIP = jp.stack([r["K"], r["B"], r["imp"], jp.zeros_like(r["K"])], axis=1)
    return jp.where(r["active"][:, None], KBIP, 0.0)


def _assemble(m: Model, d: Data, p: Plan, com_vel: bool = True, held: bool = False) -> tuple[Data, dict]:
    """Every row of plan p at the state of d, in the plan's order, with its impedance and reference acceleration.
    Returns d (with cvel/cdof_dot where connect/weld rows need them, unless com_vel is False: d's are used) and a
    dict of the row quantities. held: the contact rows' J without derivative (`make_constraint_held`)."""
    blocks: list[_Rows] = []
    if (len(p.connect) or len(p.weld)) and com_vel:
        # the Jdot qvel term of connect/weld rows needs cvel/cdof_dot, which the pipeline computes only later
        # (fwd_velocity): compute them here from the current qvel (make_constraint runs in fwd_position)
        d = velocity.com_vel(m, d)
    if len(p.connect):
        blocks.append(_connect_rows(m, d, p.connect, p.sparse))
    if len(p.weld):
        blocks.append(_weld_rows(m, d, p.weld, p.sparse))
    if len(p.joint_eq):
        blocks.append(_poly_rows(m, d, p.joint_eq, tendon=False, sparse=p.sparse))
    if len(p.tendon_eq):
        blocks.append(_poly_rows(m, d, p.tendon_eq, tendon=True, sparse=p.sparse))
    if len(p.flex_eq_edge):
        blocks.append(_flex_eq_rows(m, d, p.flex_eq_edge, p.flex_eq_owner, p.sparse))
    blocks += _friction_rows(m, d, p.fric_dof, p.fric_ten, p.sparse)
    lim_blocks, lim_over = _limit_rows(m, d, p)
    blocks += lim_blocks
    if len(p.con_dim):
        con_blocks = _contact_rows(m, d, p)
        if held:
            con_blocks = [dataclasses.replace(b, J=jax.lax.stop_gradient(b.J)) for b in con_blocks]
    else:
        con_blocks = []

    # contact blocks are grouped by dim; scatter them to their slots' static rows
    rows_order = []
    if con_blocks:
        for dim in sorted(set(p.con_dim.tolist())):
            slots = np.nonzero(p.con_dim == dim)[0]
            rows_order.append((p.con_adr[slots][:, None] + np.arange(p.con_rows[slots][0])[None, :]).reshape(-1))
    pre = p.adr["contact"]
    allb = [_in_layout(m, p, b) for b in blocks + con_blocks]
    inv = None
    if con_blocks:
        perm = np.concatenate([np.arange(pre)] + rows_order)
        if not np.array_equal(perm, np.arange(perm.shape[0])):  # several contact dims: slot order
            inv = np.empty_like(perm)
            inv[perm] = np.arange(perm.shape[0])
    # each block's rows masked by its own active flags and multiplied by qvel before assembly, so that every
    # (n, nv) array is written once, in its final row order (one concatenate of static slices of the blocks)
    Jb, velb = [], []
    for b in allb:
        J = b.J
        if not (isinstance(b.active, np.ndarray) and b.active.all()):
            J = jp.where(jp.asarray(b.active)[:, None], J, 0.0)
        Jb.append(J)
        velb.append(j_mul(J, jp.asarray(b.cols, jp.int32) if p.sparse else None, d.qvel))
    fields = {}
    for name in ("cols", "pos", "margin", "frictionloss", "diag", "solref", "solimp", "imp_r", "bias",
                 "active", "type", "id", "k_zero", "r_scale"):  # fmt: skip
        fields[name] = jp.asarray(_assemble_rows([getattr(b, name) for b in allb], inv))
    fields["J"] = _assemble_rows(Jb, inv)
    for name, on in (("vel_add", m.flg_surfacevel), ("adh", m.flg_adhesion)):
        if on:
            fields[name] = _assemble_rows([getattr(b, name) if getattr(b, name) is not None
                                           else jp.zeros(b.pos.shape[0], b.pos.dtype) for b in allb], inv)  # fmt: skip
    f = fields
    imp, dmax = _impedance(f["solimp"], f["imp_r"])
    solref = f["solref"]
    if not (m.opt.disableflags & DisableBit.REFSAFE):
        tc = jp.maximum(solref[:, 0], 2.0 * m.opt.timestep)
    else:
        tc = solref[:, 0]
    direct = solref[:, 0] <= 0
    tc_safe = jp.where(direct, 1.0, tc)
    dr = solref[:, 1]
    K = jp.where(direct, -solref[:, 0] / (dmax * dmax), 1.0 / (dmax * dmax * tc_safe * tc_safe * dr * dr))
    B = jp.where(direct, -solref[:, 1] / dmax, 2.0 / (dmax * tc_safe))
    K = jp.where(jp.asarray(f["k_zero"]), 0.0, K)
    diag = f["diag"] * f["r_scale"]
    if m.opt.enableflags & EnableBit.DIAGEXACT:
        if all(isinstance(b.type, np.ndarray) for b in allb):
            ctype = np.concatenate([b.type for b in allb])
            ctype = ctype if inv is None else ctype[inv]
        else:  # traced types (normal-only adhesive contacts in wider slots)
            ctype = f["type"]
        diag = _exact_diag(m, d, p, f, ctype)
    R = jp.maximum((1.0 - imp) / imp * diag, MINVAL)
    active = jp.asarray(f["active"])
    J = f["J"]  # inactive rows already zero (per block above)
    cols = jp.asarray(f["cols"], jp.int32)
    vel = _assemble_rows(velb, inv)
    if held:  # the contact rows' dJ qvel
        vel = vel + _tangent(contact_products(m, d)[0](jax.lax.stop_gradient(d.qvel)))
    if "vel_add" in f:  # surface velocities of contacting geoms (conveyors)
        vel = vel + jp.where(active, f["vel_add"], 0.0)
    pos = f["pos"]
    aref = -B * vel - K * imp * (pos - f["margin"]) - f["bias"]
    if "adh" in f:  # adhesive contacts: the cone translated down the normal by the adhesion (computation chapter)
        aref = aref + R * f["adh"]
    R = jp.where(active, R, 1.0)
    aref = jp.where(active, aref, 0.0)
    return d, dict(fields=f, active=active, J=J, cols=cols, diag=diag, R=R, vel=vel, aref=aref, K=K, B=B, imp=imp,
                   lim_over=lim_over)  # fmt: skip


MAX_RUNS = 64  # a static row permutation of at most this many contiguous runs is applied as slices, else a gather


def _runs(inv: np.ndarray) -> list[tuple[int, int]]:
    """The contiguous runs [(start, stop)] of source rows that make up the static row indices inv (x[inv])."""
    cut = np.nonzero(np.diff(inv) != 1)[0] + 1
    starts = np.concatenate([[0], cut])
    stops = np.concatenate([cut, [inv.shape[0]]])
    return [(int(inv[a]), int(inv[a]) + int(b - a)) for a, b in zip(starts, stops)]


def _permute(x, inv: np.ndarray | None):
    """x[inv] for static row indices inv (None: x). Host arrays are indexed; traced ones are concatenated from
    static slices when inv is a few contiguous runs (the contact blocks of each condim put back in slot order, the
    slots of one condim): XLA:CPU runs a gather with constant indices element by element, which cost the
    quadruped's step (2454 rows of 28 columns in 46 runs) more than its solver's iterations."""
    return x if inv is None else _assemble_rows([x], inv)


def _assemble_rows(parts: list, inv: np.ndarray | None):
    """jp.concatenate(parts)[inv] (see `_permute`) without materialising the concatenation: the contiguous runs of
    inv are cut at the parts' boundaries and taken as static slices of the parts, concatenated once. parts: arrays
    with a common trailing shape; host (numpy) parts stay on the host when all are."""
    if all(isinstance(x, np.ndarray) for x in parts):
        x = np.concatenate(parts, axis=0)
        return x if inv is None else x[inv]
    parts = [jp.asarray(x) for x in parts]
    if inv is None:
        return parts[0] if len(parts) == 1 else jp.concatenate(parts, axis=0)
    runs = _runs(inv)
    if len(runs) > MAX_RUNS:
        return jp.concatenate(parts, axis=0)[inv]
    ends = np.cumsum([x.shape[0] for x in parts])
    starts = ends - np.array([x.shape[0] for x in parts])
    pieces = []
    for a, b in runs:
        while a < b:
            i = int(np.searchsorted(ends, a, side="right"))  # the part holding row a
            stop = min(b, int(ends[i]))
            pieces.append(parts[i][a - int(starts[i]) : stop - int(starts[i])])
            a = stop
    return pieces[0] if len(pieces) == 1 else jp.concatenate(pieces, axis=0)


def _exact_diag(m: Model, d: Data, p: Plan, f: dict, ctype: np.ndarray) -> jax.Array:
    """The diagexact flag's diagA (n,) (mj_projectConstraint): the exact diagonal J_i M^-1 J_i^T of every row in
    place of the invweight0 approximation. Contact rows take their first row's, scaled as mj_makeImpedance derives
    a contact's R from its first row's: elliptic friction row i by (f_0/f_i)^2 / impratio (`r_scale`), every
    pyramidal edge by 2 f_0^2 / impratio. f: `_assemble`'s row fields; ctype (n,) row types (static, or traced
    where adhesive contacts in the gap band make a pyramidal slot one frictionless row)."""
    n = ctype.shape[0]
    Jd = solver_common.j_dense(f["J"], jp.asarray(f["cols"], jp.int32) if p.sparse else None, m.nv)
    exact = jp.sum(Jd * inertia.solve_m(m, d, Jd.T).T, axis=1)
    first, slot = np.arange(n), np.zeros(n, np.int64)
    for s, (adr, rows) in enumerate(zip(p.con_adr, p.con_rows)):
        first[adr : adr + rows] = adr
        slot[adr : adr + rows] = s
    pyramid = ctype == ConstraintType.CONTACT_PYRAMIDAL
    scale = f["r_scale"]
    if not isinstance(pyramid, np.ndarray) or pyramid.any():
        f0 = d.contact.friction[slot, 0]
        scale = jp.where(pyramid, 2.0 * f0 * f0 / m.opt.impratio, scale)
    return exact[first] * scale


def _in_layout(m: Model, p: Plan, b: _Rows) -> _Rows:
    """Block b with J in the model's efc_J layout: dense (n, nv) and cols (n, 0), or sparse values and columns
    padded to the row width p.width."""
    n = b.J.shape[0]
    if not p.sparse:
        J = b.J if b.cols is None else solver_common.j_dense(b.J, jp.asarray(b.cols), m.nv)
        return dataclasses.replace(b, J=J, cols=np.zeros((n, 0), np.int32))
    assert b.cols is not None, "sparse layout: every block of rows must come with its columns"
    pad = p.width - b.J.shape[1]
    assert pad >= 0, (b.J.shape, p.width)
    J = jp.pad(b.J, ((0, 0), (0, pad)))
    cols = b.cols
    cols = np.pad(cols, ((0, 0), (0, pad))) if isinstance(cols, np.ndarray) else jp.pad(cols, ((0, 0), (0, pad)))
    return dataclasses.replace(b, J=J, cols=cols)


def j_mul(J: jax.Array, colind: jax.Array | None, x: jax.Array) -> jax.Array:
    """efc_J x (njmax,) for x (nv,) in either layout (colind None or (njmax, 0): dense)."""
    if colind is not None and colind.shape[1] == 0:
        colind = None
    return solver_common.j_mul(J, colind, x)


def _colind(d: Data) -> jax.Array | None:
    """d.efc_J_colind in the sparse layout, None in the dense one (its colind is (njmax, 0)); read from the
    arrays' shapes, so that Data whose rows were set by hand (tests copying MuJoCo's) need no plan."""
    return d.efc_J_colind if d.efc_J_colind.shape[-1] else None


def jt_mul(m: Model, d: Data, f: jax.Array) -> jax.Array:
    """efc_J' f (nv,) for f (njmax,) in either layout."""
    return solver_common.jt_mul(d.efc_J, _colind(d), f, m.nv)


def efc_j_dense(m: Model, d: Data) -> jax.Array:
    """The dense (njmax, nv) constraint Jacobian in either layout (sparse rows scattered; a copy)."""
    return solver_common.j_dense(d.efc_J, _colind(d), m.nv)


def problem(m: Model, d: Data) -> solver_common.Problem:
    """The solver's view of the rows made by make_constraint (M: d.qM in its layout, see `Layout.mass`)."""
    p = plan(m)
    mus, frics = [], []
    for dim in sorted(set(p.con_dim.tolist()) - {1}) if p.elliptic else []:
        slots = np.nonzero(p.con_dim == dim)[0]
        fr = d.contact.friction[slots]
        adim = d.contact.dim[slots]
        fi = fr[:, : dim - 1]
        fi = jp.where(jp.arange(dim - 1)[None, :] < (adim[:, None] - 1), fi, 0.0)
        mus.append(fr[:, 0] / jp.sqrt(m.opt.impratio))
        frics.append(fi)
    return solver_common.Problem(J=d.efc_J, D=d.efc_D, R=d.efc_R, aref=d.efc_aref, frictionloss=d.efc_frictionloss,
                                 mask=d.efc_mask, cone_mu=tuple(mus), cone_friction=tuple(frics),
                                 qacc_smooth=d.qacc_smooth, M=d.qM,
                                 J_colind=d.efc_J_colind if p.sparse else None)  # fmt: skip
