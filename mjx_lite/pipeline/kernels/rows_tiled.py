"""The constraint rows kernel (kernels/rows.py) with each environment's rows and dofs spread over the threads of a
program: `Launch(rows_tile=E)`, E environments per program, every per-row quantity a tile.

kernels/rows.py runs one environment per thread and writes each environment's efc_J serially (an inner loop over the
dofs of every row: O(nefc nv) stores and, for a contact row, 6 loads and 6 multiply-adds per entry, after each slot's
6 x nv point Jacobian); on a GPU that left the kernel latency-bound (docs/kernels.md, Status). Here a program holds E
environments and two row tiles, NUP and NCP the powers of two >= the rows' counts, NVP >= nv:
  unit rows  (joint equalities, dof friction loss, slide/hinge limits: the rows before the contacts):
             row vectors (E, NUP); J (E, NUP, NVP) = a1 e_d1 + a2 e_d2 as two selects against the dof index (d1, d2
             static per row; a1 = +-1 or 1 and a2 = -dpoly of a two-joint equality, masked by liveness);
  contacts:  row vectors (E, NCP); J (E, NCP, NVP) all at once: with the row's direction (a, b) (linear and angular:
             normal +- mu_k frame row k; elliptic: frame row q alone) and cdof_j = [w_j; v_j], row r of the slot's
             J6 dotted with (a, b) is
             (m2 - m1)[r, j] (a . v_j + b . w_j) + w_j . (m2[r, j] (o2 x a) - m1[r, j] (o1 x a)),
             o_i = point - the root com of body i and m_i the body's dof mask (static (NCP, NVP) tables): 12
             multiply-adds per entry, every entry independent;
  ball limits: in the unit tile, J = -axis at the ball's three dofs (selects), the angle from qpos' quaternion;
  tendon rows (equalities, friction, limits) and flex edge equalities (the "ten" tile): the unit tile's formulas
             with J = a1 ten_J[t1] + a2 ten_J[t2] (an edge: flexedge_J[edge], its equality's pos length - length0
             with no polynomial), the rows' two Jacobian rows of [ten_J; flexedge_J] gathered by XLA into an
             (E, 2, NR, NVP) input;
  connect/weld rows (the "pt" tile): the points p_i = x_i + R_i a_i (body pose and anchor, or site pose and zero),
             J from cdof and the bodies' dof masks with the direction (e_k, 0) (translational) or (0, T_k) (a weld's
             rotational rows), the Jdot qvel bias and a weld's angular velocities as reductions over the dof axis
             (dof channels cdof_dot and the cvel of each dof's body join qvel and cdof);
  all:       J qvel as a reduction over the dof axis, then kernels/rows.py's per-row formulas (impedance, R, aref,
             masks) elementwise on the row vectors; the tiles' rows are put back in the plan's order by static
             slices.
The slots' fields are expanded to their rows before the kernel (`_Plan.channels`: per row, the input element it reads;
the launcher packs each tile's channels with one static gather done by XLA, like primal_tiled's padding): the
kernel reads row vectors ("channels") and never gathers. Channels of Model fields (ranges, solref, invweight0, ...)
are shared by the programs unless the Model is vmapped.

Work per program (an estimate, not a measurement; the MJX humanoid: nv = 27, 21 limit rows, 8 condim-3 slots = 32
contact rows; NVP = NUP = NCP = 32, E = 1, 4 warps = 128 threads): the contact J tile is 1024 entries of ~25
operations, 200 per thread, the unit tile ~5 per entry, the row formulas ~150 operations on 64 rows, ~75 per thread;
kernels/rows.py does per thread (its environment), serially, 32 x 27 x (6 loads + 6 multiply-adds + 1 store) for
the contact rows, 8 x 27 x ~30 for the slots' J6, and 21 x 27 stores for the limit rows: ~18k operations, ~9k of
them memory accesses. Which wins on a GPU is to be measured (benchmarks/gpu_ab.py's "fused, tiled rows" variants).

Inputs, outputs and the XLA twin (derivatives) are kernels/rows.py's (`rows.kernel`); only the launcher differs.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from mjx_lite.pipeline import constraint, support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import rows as lane_rows
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MINVAL, Data, DisableBit, Model, ObjType

__all__ = ["make_constraint"]

# per-row outputs of each tile, in the packed output's order (unit rows add "over": a limit with both sides active)
_ROW_OUT = ("pos", "margin", "frictionloss", "diagA", "R", "vel", "aref", "active")
# Data fields among the kernel's inputs: their channels are per environment (Model fields are shared unless vmapped)
_DATA = ("qpos", "qvel", "cdof", "subtree_com", "eq_active", "xpos", "xmat", "xquat", "site_xpos", "site_xmat", "cvel",
         "cdof_dot", "ten_J", "ten_length", "flexedge_J", "flexedge_length", "con_pos", "con_frame", "con_dist",
         "con_margin", "con_friction", "con_solref", "con_solimp", "con_active", "con_dim",
         "con_solreffriction")  # fmt: skip


def _pow2(n: int) -> int:
    return int(pl.next_power_of_2(max(1, n)))


@dataclasses.dataclass(frozen=True)
class _Plan:
    """Static tables of the two tiles. channels: tile -> {channel: {input name: flat index per row (-1: none)}};
    tables: tile -> {name: int32 (rows,) or (rows, NVP)}."""

    nunit: int
    ncrow: int
    channels: dict
    tables: dict
    elliptic: bool = False
    npt: int = 0  # connect and weld rows (the "pt" tile)
    nten: int = 0  # tendon rows: equalities, friction, limits (the "ten" tile)
    ball: bool = False  # ball limits among the unit rows
    rows: dict = dataclasses.field(default_factory=dict)  # tile -> the plan rows of its rows, in order
    weld: bool = False
    eq_site: bool = False
    quat_dofs: bool = False


def _build(m: Model) -> _Plan:
    p = constraint.plan(m)
    nv = m.nv

    def block(name, n):
        return p.adr[name] + np.arange(n, dtype=np.int64)

    unit_rows, unit, unit_tab = _unit_tile(m, p, tendon=False)
    ten_rows, ten, ten_tab = _unit_tile(m, p, tendon=True)
    nunit = len(unit_rows)

    # ---- contact rows: row i of the tile is plan row adr["contact"] + i
    ncon = len(p.con_dim)
    ncrow = int(np.sum(p.con_rows)) if ncon else 0
    con, con_tab = {}, {}
    if ncrow:
        b1, b2 = lane_rows.slot_bodies(m)
        root = np.asarray(m.body_rootid)
        slot = np.repeat(np.arange(ncon), p.con_rows)
        q = np.arange(ncrow) - np.repeat(p.con_adr - p.adr["contact"], p.con_rows)
        fl = p.con_dim[slot] == 1
        if p.elliptic:  # row q: frame direction q alone (linear for q < 3, rotational beyond); frictionless: q = 0
            k = q
            km = np.maximum(q, 1)  # the friction coefficient of row q's diagA
            fidx = np.where(q < 3, q, q - 3)
        else:
            k = np.where(fl, 0, q // 2 + 1)
            km = np.maximum(k, 1)
            fidx = np.where(km < 3, km, km - 3)
        sign = np.where(fl, 0, np.where(q % 2 == 0, 1, -1))

        def by_slot(source, per, off=0):
            return {source: per * slot + off}

        con = {"dist": by_slot("con_dist", 1), "cmg": by_slot("con_margin", 1), "cact": by_slot("con_active", 1),
               "cdim": by_slot("con_dim", 1), "mu": by_slot("con_friction", 5, km - 1),
               "f0": by_slot("con_friction", 5), "bw1": {"body_invweight0": 2 * b1[slot]},
               "bw2": {"body_invweight0": 2 * b2[slot]},
               "impratio": {"impratio": np.zeros(ncrow, np.int64)}}  # fmt: skip
        for c in range(3):
            con[f"pt{c}"] = by_slot("con_pos", 3, c)
            con[f"nrm{c}"] = by_slot("con_frame", 9, c)
            con[f"dir{c}"] = by_slot("con_frame", 9, 3 * fidx + c)
            con[f"o1_{c}"] = {"subtree_com": 3 * root[b1[slot]] + c}
            con[f"o2_{c}"] = {"subtree_com": 3 * root[b2[slot]] + c}
        for c in range(2):
            con[f"sr{c}"] = by_slot("con_solref", 2, c)
        for c in range(5):
            con[f"si{c}"] = by_slot("con_solimp", 5, c)
        if p.elliptic:
            for c in range(2):
                con[f"srf{c}"] = by_slot("con_solreffriction", 2, c)
        nvp = _pow2(nv)
        mask = np.zeros((m.nbody, nvp), np.int64)
        mask[:, :nv] = support.body_dof_mask(m)
        lin = (k < 3) if p.elliptic else ((k >= 1) & (k < 3))
        con_tab = dict(q=q, sign=sign, fl=fl.astype(np.int64), lin=lin.astype(np.int64),
                       ang=(k >= 3).astype(np.int64), m1=mask[b1[slot]], m2=mask[b2[slot]])  # fmt: skip
        if p.elliptic:
            con_tab["kz"] = (q > 0).astype(np.int64)  # an elliptic contact's friction rows: no stiffness term
    # the timestep, for every row of both tiles
    if ncrow:
        con["h"] = {"timestep": np.zeros(ncrow, np.int64)}
    pt, pt_tab, npt, flags = _point_rows(m, p)
    channels = {"pt": pt, "unit": unit, "ten": ten, "con": con}
    tables = {"pt": pt_tab, "unit": unit_tab, "ten": ten_tab, "con": con_tab}
    rows = {"pt": np.concatenate([block("connect", 3 * len(p.connect)), block("weld", 6 * len(p.weld))]),
            "unit": unit_rows, "ten": ten_rows, "con": block("contact", ncrow)}  # fmt: skip
    assert sum(len(v) for v in rows.values()) == p.nefc, "every row of the plan is in a tile"
    return _Plan(nunit=nunit, ncrow=ncrow, channels=channels, tables=tables, elliptic=bool(p.elliptic), npt=npt,
                 nten=len(ten_rows), ball=bool(len(p.lim_ball)), rows=rows, **flags)  # fmt: skip


def _unit_tile(m: Model, p, tendon: bool) -> tuple[np.ndarray, dict, dict]:
    """(plan rows, channels, tables) of the tile of one-object rows: tendon=False, the "unit" tile (joint equalities,
    dof friction, slide/hinge limits, ball limits: J from selects against the dof index, d1/d2 the dofs); tendon=True,
    the "ten" tile (tendon equalities, flex edge equalities, tendon friction, tendon limits: J = a1 src[d1] + a2
    src[d2], d1/d2 rows of src = [ten_J (where the tile has tendon rows); flexedge_J (where it has edge rows)]). Row
    kinds: 0 padding, 1 equality, 2 friction, 3 limit (first row), 4 limit upper, 5 ball limit."""
    qadr, dadr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    neq_data = int(np.shape(m.eq_data)[-1]) if m.neq else 0
    if tendon:
        eqs, frs, lims, lim_one, balls = p.tendon_eq, p.fric_ten, p.lim_ten, p.lim_ten_one, np.zeros(0, np.int64)
        names = ("tendon_eq", "fric_ten", "lim_ten", None)
        xadr = dadr_ = np.arange(max(m.ntendon, 1))
        xsrc, rsrc, iwsrc = "ten_length", "tendon_length0", "tendon_invweight0"
        fl_src, fref, fimp = "tendon_frictionloss", "tendon_solref_fri", "tendon_solimp_fri"
        rng, mgs, lref, limp = "tendon_range", "tendon_margin", "tendon_solref_lim", "tendon_solimp_lim"
    else:
        eqs, frs, lims, lim_one, balls = p.joint_eq, p.fric_dof, p.lim_jnt, p.lim_jnt_one, p.lim_ball
        names = ("joint_eq", "fric_dof", "lim_jnt", "lim_ball")
        xadr, dadr_ = qadr, dadr
        xsrc, rsrc, iwsrc = "qpos", "qpos0", "dof_invweight0"
        fl_src, fref, fimp = "dof_frictionloss", "dof_solref", "dof_solimp"
        rng, mgs, lref, limp = "jnt_range", "jnt_margin", "jnt_solref", "jnt_solimp"
    lim_one = np.asarray(lim_one, bool)

    def block(name, n):
        return p.adr[name] + np.arange(n, dtype=np.int64)

    fe = np.asarray(p.flex_eq_edge if tendon else (), np.int64)  # flex edge equalities join the tendons' tile
    rows = np.concatenate([block(names[0], len(eqs)), block("flex_eq", len(fe)), block(names[1], len(frs)),
                           block(names[2], int(np.sum(2 - lim_one.astype(np.int64))))]
                          + ([block(names[3], len(balls))] if names[3] else []))  # fmt: skip
    n = len(rows)
    if not n:
        return rows, {}, {}

    def idx(k):
        return np.full(k, -1, np.int64)

    def loc(r):
        return np.searchsorted(rows, r)

    ch = {c: idx(n) for c in ("x1", "x2", "r1", "r2", "eqact", "iw1", "iw2", "fl", "rlo", "rhi", "jmg")}
    ch.update({f"c{k}": idx(n) for k in range(5)})
    ch.update({f"q{k}": idx(n) for k in range(4)})
    src = {c: {} for c in ch}
    sr = [{} for _ in range(2)]
    si = [{} for _ in range(5)]
    kind = np.zeros(n, np.int64)
    d1, d2, one = idx(n), idx(n), np.zeros(n, np.int64)

    def put(name, source, r, values):
        a = src[name].setdefault(source, idx(n))
        a[r] = values

    def put_ref(r, source_ref, source_imp, ids):
        for k in range(2):
            sr[k].setdefault(source_ref, idx(n))[r] = 2 * ids + k
        for k in range(5):
            si[k].setdefault(source_imp, idx(n))[r] = 5 * ids + k

    e = np.asarray(eqs, np.int64)
    if len(e):
        r = loc(block(names[0], len(e)))
        o1, o2 = np.asarray(m.eq_obj1id)[e], np.asarray(m.eq_obj2id)[e]
        has2 = o2 >= 0
        o2c = np.maximum(o2, 0)
        kind[r], d1[r], d2[r] = 1, dadr_[o1], np.where(has2, dadr_[o2c], -1)
        put("x1", xsrc, r, xadr[o1])
        put("r1", rsrc, r, xadr[o1])
        put("x2", xsrc, r[has2], xadr[o2c][has2])
        put("r2", rsrc, r[has2], xadr[o2c][has2])
        for k in range(5):
            put(f"c{k}", "eq_data", r, e * neq_data + k)
        put("eqact", "eq_active", r, e)
        put("iw1", iwsrc, r, dadr_[o1])
        put("iw2", iwsrc, r[has2], dadr_[o2c][has2])
        put_ref(r, "eq_solref", "eq_solimp", e)
    if len(fe):  # J = flexedge_J[edge] (its row of the launcher's [ten_J; flexedge_J]), pos = x1 - r1 (c: zero)
        r = loc(block("flex_eq", len(fe)))
        own = np.asarray(p.flex_eq_owner, np.int64)
        # (the tendons' rows precede the edges' where the tile has tendon rows, whose kernel inputs hold ten_J)
        kind[r], d1[r] = 1, (m.ntendon if len(eqs) or len(frs) or len(lims) else 0) + fe
        put("x1", "flexedge_length", r, fe)
        put("r1", "flexedge_length0", r, fe)
        put("eqact", "eq_active", r, own)
        put("iw1", "flexedge_invweight0", r, fe)
        put_ref(r, "eq_solref", "eq_solimp", own)
    f = np.asarray(frs, np.int64)
    if len(f):
        r = loc(block(names[1], len(f)))
        kind[r], d1[r] = 2, f
        put("fl", fl_src, r, f)
        put("iw1", iwsrc, r, f)
        put_ref(r, fref, fimp, f)
    j = np.asarray(lims, np.int64)
    if len(j):
        nrows = 2 - lim_one.astype(np.int64)
        first = loc(p.adr[names[2]] + np.concatenate([[0], np.cumsum(nrows)[:-1]]).astype(np.int64))
        upper = first[~lim_one] + 1
        for rows_, jj, k in ((first, j, 3), (upper, j[~lim_one], 4)):
            kind[rows_], d1[rows_] = k, dadr_[jj]
            put("x1", xsrc, rows_, xadr[jj])
            put("rlo", rng, rows_, 2 * jj)
            put("rhi", rng, rows_, 2 * jj + 1)
            put("jmg", mgs, rows_, jj)
            put("iw1", iwsrc, rows_, dadr_[jj])
            put_ref(rows_, lref, limp, jj)
        one[first] = lim_one
    b = np.asarray(balls, np.int64)
    if len(b):  # ball limits: the joint's quaternion, max(range), J = -axis at its 3 dofs (d1, d1 + 1, d1 + 2)
        r = loc(block(names[3], len(b)))
        kind[r], d1[r] = 5, dadr[b]
        for k in range(4):
            put(f"q{k}", "qpos", r, qadr[b] + k)
        put("rlo", "jnt_range", r, 2 * b)
        put("rhi", "jnt_range", r, 2 * b + 1)
        put("jmg", "jnt_margin", r, b)
        put("iw1", "dof_invweight0", r, dadr[b])
        put_ref(r, "jnt_solref", "jnt_solimp", b)
    assert np.all(kind > 0), "every row of the tile is an equality, friction or limit row"
    chans = {c: src[c] for c in ch if not c.startswith("q") or len(b)} | {f"sr{k}": sr[k] for k in range(2)} | {
        f"si{k}": si[k] for k in range(5)}
    chans["h"] = {"timestep": np.zeros(n, np.int64)}
    return rows, chans, dict(kind=kind, d1=d1, d2=d2, one=one, kz=(kind == 2).astype(np.int64))


def _point_rows(m: Model, p) -> tuple[dict, dict, int, dict]:
    """Channels and tables of the "pt" tile: the rows of connect and weld equalities (3 and 6 per equality, in the
    plan's order). A row reads its equality's two points as position + rotation @ anchor with the object's body pose
    (xpos, xmat) and anchor, or the site's pose (site_xpos, site_xmat) and a zero anchor; the bodies' root coms and
    cvel; eq_data's relative quaternion and torquescale; the bodies' invweight0 (translational or rotational)."""
    ids = np.concatenate([np.asarray(p.connect, np.int64), np.asarray(p.weld, np.int64)])
    n = 3 * len(p.connect) + 6 * len(p.weld)
    if not n:
        return {}, {}, 0, {}
    neq_data = int(np.shape(m.eq_data)[-1])
    weld = np.concatenate([np.zeros(len(p.connect), bool), np.ones(len(p.weld), bool)])
    per = np.where(weld, 6, 3)
    eq = np.repeat(ids, per)  # each row's equality
    wrow = np.repeat(weld, per)
    comp = np.concatenate([np.arange(k) for k in per])
    rot = wrow & (comp >= 3)
    kind = np.where(rot, 3, np.where(wrow, 2, 1))
    comp = comp % 3
    root = np.asarray(m.body_rootid)
    site_body = np.asarray(m.site_bodyid)
    nvp = _pow2(m.nv)
    mask = np.zeros((m.nbody, nvp), np.int64)
    mask[:, : m.nv] = support.body_dof_mask(m)
    ch, tab = {}, dict(kind=kind, comp=comp)
    eq_site = False
    for k, obj in ((1, m.eq_obj1id), (2, m.eq_obj2id)):
        o = np.asarray(obj)[eq]
        site = np.asarray(m.eq_objtype)[eq] == ObjType.SITE
        eq_site = eq_site or bool(site.any())
        b = np.where(site, site_body[np.where(site, o, 0)] if site.any() else 0, np.maximum(o, 0))
        bo = np.nonzero(~site)[0]
        # the anchor: connect [0:3] on object 1, [3:6] on object 2; weld [3:6] on object 1, [0:3] on object 2
        aoff = np.where(wrow, 3 if k == 1 else 0, 0 if k == 1 else 3)
        for c in range(3):
            a = np.full(n, -1, np.int64)
            a[bo] = (eq * neq_data + aoff + c)[bo]
            ch[f"a{k}_{c}"] = {"eq_data": a}
            pos = {"xpos": np.where(site, -1, 3 * b + c)}
            if site.any():
                pos["site_xpos"] = np.where(site, 3 * o + c, -1)
            ch[f"xp{k}_{c}"] = pos
            ch[f"com{k}_{c}"] = {"subtree_com": 3 * root[b] + c}
        for c in range(9):
            rm = {"xmat": np.where(site, -1, 9 * b + c)}
            if site.any():
                rm["site_xmat"] = np.where(site, 9 * o + c, -1)
            ch[f"xm{k}_{c}"] = rm
        for c in range(6):
            ch[f"cv{k}_{c}"] = {"cvel": 6 * b + c}
        if len(p.weld):
            for c in range(4):
                ch[f"q{k}_{c}"] = {"xquat": np.where(wrow, 4 * b + c, -1)}
        ch[f"iw{k}"] = {"body_invweight0": 2 * b + rot}
        tab[f"s{k}"] = site.astype(np.int64)
        tab[f"m{k}"] = mask[b]
    if len(p.weld):
        for c in range(4):
            ch[f"rq{c}"] = {"eq_data": np.where(wrow, eq * neq_data + 6 + c, -1)}
        ch["ts"] = {"eq_data": np.where(wrow, eq * neq_data + 10, -1)}
    ch["eqact"] = {"eq_active": eq}
    for c in range(2):
        ch[f"sr{c}"] = {"eq_solref": 2 * eq + c}
    for c in range(5):
        ch[f"si{c}"] = {"eq_solimp": 5 * eq + c}
    ch["h"] = {"timestep": np.zeros(n, np.int64)}
    kinds = support.tables(m).dof_kind
    dq = np.zeros(nvp, np.int64)
    dq[: m.nv] = kinds == 2
    tab["dq"] = np.broadcast_to(dq, (n, nvp)).copy()
    flags = dict(weld=bool(len(p.weld)), eq_site=eq_site, quat_dofs=bool(np.any(kinds == 2)))
    return ch, tab, n, flags


def _plan(m: Model) -> _Plan:
    return support.memo(m, "kernels_rows_tiled_plan", _build)


def _point_tile(ch, local, table, table2, plan: _Plan, qvel, cdof, cdd, cvb, refsafe: bool, dt):
    """The "pt" tile (connect and weld rows): (J (E, NR, NVP), the row outputs). Row r of equality e, component k:
    with the points p_i = x_i + R_i a_i (body pose and anchor, or site pose and 0), o_i = p_i - com_i and the
    direction (a, b) = (e_k, 0) (translational rows) or (0, T_k) (a weld's rotational rows, T_k row k of
    0.5 ts (pw I - [pv]x) R2'), J[r, j] = m1 (a.v_j + b.w_j + w_j.(o1 x a)) - m2 (a.v_j + b.w_j + w_j.(o2 x a)) and
    the bias (Jdot qvel) sum_j qvel_j (m1 - m2 terms of a.ld_j + ad_j.(o_i x a) + w_j.(pvel_i x a)); a weld's
    rotational bias from w_i = sum_j m_i w_j qvel_j and (jrd1 - jrd2) qvel as constraint._weld_rows."""
    kind, comp = table("kind"), table("comp")
    rot = kind == 3
    pts = []
    for k in (1, 2):
        xp = [ch(f"xp{k}_{c}") for c in range(3)]
        xm = [ch(f"xm{k}_{c}") for c in range(9)]
        a = [ch(f"a{k}_{c}") for c in range(3)]
        pt = [xp[r] + (xm[3 * r] * a[0] + xm[3 * r + 1] * a[1] + xm[3 * r + 2] * a[2]) for r in range(3)]
        off = tuple(pt[r] - ch(f"com{k}_{r}") for r in range(3))
        cv = [ch(f"cv{k}_{c}") for c in range(6)]
        pvel = tuple(cv[3 + r] - c for r, c in enumerate(lane_rows._cross(off, cv[:3])))
        pts.append((pt, xm, off, pvel))
    (p1, _, o1, pv1), (p2, R2, o2, pv2) = pts
    dpos = [p1[r] - p2[r] for r in range(3)]

    def pick(v):  # component `comp` of a 3-vector of row vectors
        return where(comp == 0, v[0], where(comp == 1, v[1], v[2]))

    sq = lane_rows._dot(dpos, dpos)
    zero = jp.zeros_like(dpos[0])
    b = (zero, zero, zero)
    if plan.weld:
        quats = []
        for k in (1, 2):
            q = tuple(ch(f"q{k}_{c}") for c in range(4))
            if plan.eq_site:
                sq_ = lane_rows._mat_to_quat(pts[k - 1][1])
                site = table(f"s{k}") == 1
                q = tuple(where(site, sq_[c], q[c]) for c in range(4))
            quats.append(q)
        q1, q2 = quats
        ts = ch("ts")
        rq = tuple(ch(f"rq{c}") for c in range(4))
        if plan.eq_site:  # a weld of sites: the identity (constraint._weld_geometry)
            rq = tuple(where(table("s1") == 1, 1.0 if c == 0 else 0.0, rq[c], dt) for c in range(4))
        pq = lane_rows._quat_mul((q2[0], -q2[1], -q2[2], -q2[3]), lane_rows._quat_mul(q1, rq))
        pw, pv = pq[0], pq[1:]
        e = tuple(ts * c for c in pv)
        A = ((pw, pv[2], -pv[1]), (-pv[2], pw, pv[0]), (pv[1], -pv[0], pw))  # pw I - [pv]x
        Ak = [pick([A[0][c], A[1][c], A[2][c]]) for c in range(3)]
        Tk = [0.5 * ts * (Ak[0] * R2[3 * c] + Ak[1] * R2[3 * c + 1] + Ak[2] * R2[3 * c + 2]) for c in range(3)]
        b = tuple(where(rot, Tk[c], 0.0) for c in range(3))
        sq = sq + where(kind >= 2, lane_rows._dot(e, e), 0.0)
    a = tuple(where(~rot & (comp == c), 1.0, 0.0, dt) for c in range(3))
    w, v = cdof[:3], cdof[3:]
    m1, m2 = table2("m1"), table2("m2")
    c1, c2 = lane_rows._cross(o1, a), lane_rows._cross(o2, a)
    e3 = [x[:, :, None] for x in (*a, *b, *c1, *c2)]
    s = e3[0] * v[0] + e3[1] * v[1] + e3[2] * v[2] + e3[3] * w[0] + e3[4] * w[1] + e3[5] * w[2]
    t1 = e3[6] * w[0] + e3[7] * w[1] + e3[8] * w[2]
    t2 = e3[9] * w[0] + e3[10] * w[1] + e3[11] * w[2]
    live = (ch("eqact") > 0.5) & (kind > 0)
    J = where(live[:, :, None], (m1 - m2) * s + m1 * t1 - m2 * t2, 0.0)
    # the bias: Jdot with cdof_dot (ball/free rotation dofs: the motion cross product of their body's cvel and cdof)
    ad, ld = cdd[:3], cdd[3:]
    if plan.quat_dofs:
        own = lane_rows._cross(cvb[:3], w) + tuple(x + y for x, y in zip(lane_rows._cross(cvb[:3], v),
                                                                         lane_rows._cross(cvb[3:], w)))  # fmt: skip
        dq = table2("dq") == 1
        ad = [where(dq, own[c], ad[c]) for c in range(3)]
        ld = [where(dq, own[3 + c], ld[c]) for c in range(3)]
    d1, d2 = lane_rows._cross(o1, a), lane_rows._cross(o2, a)
    g1, g2 = lane_rows._cross(pv1, a), lane_rows._cross(pv2, a)
    a3 = [x[:, :, None] for x in a]
    lin = a3[0] * ld[0] + a3[1] * ld[1] + a3[2] * ld[2]
    jd1 = lin + sum(d1[c][:, :, None] * ad[c] + g1[c][:, :, None] * w[c] for c in range(3))
    jd2 = lin + sum(d2[c][:, :, None] * ad[c] + g2[c][:, :, None] * w[c] for c in range(3))
    bias = jp.sum((m1 * jd1 - m2 * jd2) * qvel, axis=2)
    if plan.weld:
        w1 = [jp.sum(m1 * w[c] * qvel, axis=2) for c in range(3)]
        w2 = [jp.sum(m2 * w[c] * qvel, axis=2) for c in range(3)]
        wd = [jp.sum((m1 - m2) * ad[c] * qvel, axis=2) for c in range(3)]
        wrel = [w1[c] - w2[c] for c in range(3)]
        wl = [R2[c] * wrel[0] + R2[3 + c] * wrel[1] + R2[6 + c] * wrel[2] for c in range(3)]  # R2' wrel
        inner = [wd[c] - x for c, x in enumerate(lane_rows._cross(w2, wrel))]
        wdot = [R2[c] * inner[0] + R2[3 + c] * inner[1] + R2[6 + c] * inner[2] for c in range(3)]
        cr = lane_rows._cross(wdot, pv)
        ww = lane_rows._dot(wl, wl)
        br = ts * (0.5 * (pw * pick(wdot) + pick(cr)) - 0.25 * ww * pick(pv))
        bias = where(rot, br, bias)
        pos = where(rot, pick(e), pick(dpos))
    else:
        pos = pick(dpos)
    rn = where(sq <= 0.0, 0.0, jp.sqrt(where(sq <= 0.0, 1.0, sq)))
    local.update(_pos=pos, _margin=zero, _fl=zero, _diag=ch("iw1") + ch("iw2"), _vel=jp.sum(J * qvel, axis=2),
                 _imp_r=rn)  # fmt: skip
    return J, _impedance_tail(ch, live, None, refsafe, dt, bias)


def _impedance_tail(ch, live, kz, refsafe: bool, dt, bias=None):
    """kernels/rows.py's `finish` on row vectors: (pos, margin, frictionloss, diagA, R, vel, aref, active) masked."""
    solimp = tuple(ch(f"si{k}") for k in range(5))
    s0, s1 = ch("sr0"), ch("sr1")
    imp, dmax = lane_rows._impedance(solimp, ch("_imp_r"))
    h = ch("h")
    tc = jp.maximum(s0, 2.0 * h) if refsafe else s0
    direct = s0 <= 0
    tc = where(direct, 1.0, tc)
    K = where(direct, -s0 / (dmax * dmax), 1.0 / (dmax * dmax * tc * tc * s1 * s1))
    if kz is not None:
        K = where(kz, 0.0, K)
    B = where(direct, -s1 / dmax, 2.0 / (dmax * tc))
    diag = ch("_diag")
    R = jp.maximum((1.0 - imp) / imp * diag, MINVAL)
    vel = where(live, ch("_vel"), 0.0)
    pos, margin = ch("_pos"), ch("_margin")
    aref = -B * vel - K * imp * (pos - margin)
    if bias is not None:  # connect and weld rows: Jdot qvel
        aref = aref - bias
    return tuple(where(live, v, dead, dt) for v, dead in ((pos, 0.0), (margin, 0.0), (ch("_fl"), 0.0), (diag, 0.0),
                                                      (R, 1.0), (vel, 0.0), (aref, 0.0), (1.0, 0.0)))  # fmt: skip


def _body(nv: int, plan: _Plan, shared: dict, refsafe: bool, eb: int, nvp: int):
    """The kernel body over refs: per tile (unit, con) its per-environment channels (E, C * NR), shared channels
    (C * NR,), int tables; then the dof channels (E, 7 * NVP): qvel, cdof's 6 components; outputs per tile J (E, NR,
    NVP) and the packed row outputs (E, K * NR)."""
    tiles = [t for t in ("pt", "unit", "ten", "con") if plan.channels[t]]

    def body(*refs):
        it = iter(refs)
        ins = {}
        for t in tiles:
            ins[t] = (next(it) if any(not shared[t][c] for c in plan.channels[t]) else None,
                      next(it) if any(shared[t][c] for c in plan.channels[t]) else None,
                      {n: next(it) for n in plan.tables[t]})  # fmt: skip
            if t == "ten":  # the rows' two tendon Jacobians (E, 2, NR, NVP)
                ins[t] = ins[t] + (next(it),)
        dof_ref = next(it)
        outs = {t: (next(it), next(it)) for t in tiles}
        dt = dof_ref.dtype
        cv = jax.lax.broadcasted_iota(jp.int32, (1, 1, nvp), 2)  # dof index of a J tile's entries
        qvel = dof_ref[:, pl.ds(0, nvp)][:, None, :]  # (E, 1, NVP)
        cdof = [dof_ref[:, pl.ds((1 + c) * nvp, nvp)][:, None, :] for c in range(6)]  # [ang; lin], (E, 1, NVP)
        # with connect/weld rows: cdof_dot, then the cvel of each dof's body (E, 1, NVP) each
        cdd = [dof_ref[:, pl.ds((7 + c) * nvp, nvp)][:, None, :] for c in range(6)] if plan.npt else None
        cvb = [dof_ref[:, pl.ds((13 + c) * nvp, nvp)][:, None, :] for c in range(6)] if plan.npt else None

        def reader(t, nr):
            per, sh = ins[t][:2]
            order = {"per": [c for c in plan.channels[t] if not shared[t][c]],
                     "sh": [c for c in plan.channels[t] if shared[t][c]]}  # fmt: skip
            local = {}

            def ch(name):
                if name in local:
                    return local[name]
                if shared[t][name]:
                    i = order["sh"].index(name)
                    return sh[pl.ds(i * nr, nr)][None, :]
                i = order["per"].index(name)
                return per[:, pl.ds(i * nr, nr)]

            return ch, local

        def table(t, name, nr):
            return ins[t][2][name][pl.ds(0, nr)][None, :]

        def store(t, J, values, nr):
            o_J, o_rows = outs[t]
            o_J[...] = jp.broadcast_to(J, (eb, nr, nvp))
            for i, v in enumerate(values):
                o_rows[:, pl.ds(i * nr, nr)] = jp.broadcast_to(jp.asarray(v, dt), (eb, nr))

        if "pt" in tiles:
            nr = _pow2(plan.npt)
            ch, local = reader("pt", nr)
            store("pt", *_point_tile(ch, local, lambda n: table("pt", n, nr),
                                     lambda n: ins["pt"][2][n][...][None].astype(dt), plan, qvel, cdof, cdd, cvb,
                                     refsafe, dt), nr)  # fmt: skip

        for t in ("unit", "ten"):
            if t not in tiles:
                continue
            nr = _pow2(plan.nunit if t == "unit" else plan.nten)
            ch, local = reader(t, nr)
            kind = table(t, "kind", nr)
            jeq, fric, lim, lim2, ball = kind == 1, kind == 2, kind == 3, kind == 4, kind == 5
            one = table(t, "one", nr) == 1
            # equalities: pos = x1 - r1 - poly(x2 - r2) (the constant c0 alone without a second object)
            has2 = table(t, "d2", nr) >= 0
            c = [ch(f"c{k}") for k in range(5)]
            dif = where(has2, ch("x2") - ch("r2"), 0.0)
            poly = c[0] + dif * (c[1] + dif * (c[2] + dif * (c[3] + dif * c[4])))
            dpoly = c[1] + dif * (2 * c[2] + dif * (3 * c[3] + dif * 4 * c[4]))
            w2 = where(has2, dpoly, 0.0)
            eq_pos = ch("x1") - ch("r1") - where(has2, poly, c[0])
            # limits: the lower side (or a one-row limit's nearer side), the upper side of two-row limits
            x, mg = ch("x1"), ch("jmg")
            lo, hi = x - ch("rlo"), ch("rhi") - x
            upper = lim2 | (lim & one & (lo > hi))
            over = lim & one & (lo < mg) & (hi < mg)
            dist = where(upper, hi, lo)
            sign = where(upper, -1.0, 1.0, dt)
            d1 = table(t, "d1", nr)[:, :, None]
            if t == "unit" and plan.ball:  # ball limits: max(range) - the shortest rotation angle, J = -axis
                q = launch.unit_quat(tuple(ch(f"q{k}") for k in range(4)))
                sq = lane_rows._dot(q[1:], q[1:])
                zero = sq <= 0.0
                nq = where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))
                axis = tuple(c_ / where(nq <= 1e-15, 1.0, nq) for c_ in q[1:])
                angle = 2.0 * jp.arctan2(nq, q[0])
                flip = angle > jp.pi
                angle = where(flip, 2 * jp.pi - angle, angle)
                axis = tuple(where(flip, -c_, c_) for c_ in axis)
                dist = where(ball, jp.maximum(ch("rlo"), ch("rhi")) - angle, dist)
            live = where(jeq, ch("eqact") > 0.5, where(fric, kind > 0, dist < mg))
            live = live & (kind > 0)
            a1 = where(live, where(lim | lim2, sign, 1.0), 0.0)
            a2 = where(live & jeq, -w2, 0.0)
            if t == "unit":
                d2 = table(t, "d2", nr)[:, :, None]
                J = where(cv == d1, a1[:, :, None], 0.0) + where(cv == d2, a2[:, :, None], 0.0)
                if plan.ball:
                    bl = (ball & live)[:, :, None]
                    for k in range(3):
                        J = where(bl & (cv == d1 + k), -axis[k][:, :, None], J)
            else:  # the rows' tendon Jacobians (E, NR, NVP) each
                dense = ins[t][3]
                J = a1[:, :, None] * dense[:, 0] + a2[:, :, None] * dense[:, 1]
            pos = where(jeq, eq_pos, where(fric, 0.0, dist))
            local.update(_pos=pos, _margin=where(lim | lim2 | ball, mg, 0.0), _fl=where(fric, ch("fl"), 0.0),
                         _diag=ch("iw1") + where(has2, ch("iw2"), 0.0), _vel=jp.sum(J * qvel, axis=2),
                         _imp_r=where(jeq, jp.abs(pos), where(fric, 0.0, jp.abs(dist - mg))))  # fmt: skip
            vals = _impedance_tail(ch, live, table(t, "kz", nr) == 1, refsafe, dt)
            store(t, J, vals + (where(over, 1.0, 0.0, dt),), nr)

        if "con" in tiles:
            nr = _pow2(plan.ncrow)
            ch, local = reader("con", nr)
            q = table("con", "q", nr)
            fl = table("con", "fl", nr) == 1
            dist, mg = ch("dist"), ch("cmg")
            live = (ch("cact") > 0.5) & (dist < mg)
            lin, ang = table("con", "lin", nr) == 1, table("con", "ang", nr) == 1
            d = [ch(f"dir{k}") for k in range(3)]
            if plan.elliptic:  # row q: frame direction q; rows beyond the slot's condim: dead
                live = live & (fl | (q.astype(dt) < ch("cdim")))
                a = [where(lin, d[k], 0.0) for k in range(3)]
                b = [where(ang, d[k], 0.0) for k in range(3)]
            else:
                live = live & (fl | (q.astype(dt) < 2.0 * (ch("cdim") - 1.0)))  # rows beyond the slot's condim: dead
                mu = table("con", "sign", nr).astype(dt) * ch("mu")
                a = [ch(f"nrm{k}") + where(lin, mu * d[k], 0.0) for k in range(3)]
                b = [where(ang, mu * d[k], 0.0) for k in range(3)]

            def cross_a(o):  # o x a, o = point - com
                o = [ch(f"pt{k}") - ch(f"{o}{k}") for k in range(3)]
                return (o[1] * a[2] - o[2] * a[1], o[2] * a[0] - o[0] * a[2], o[0] * a[1] - o[1] * a[0])

            c1, c2 = cross_a("o1_"), cross_a("o2_")
            w, v = cdof[:3], cdof[3:]
            e3 = [x[:, :, None] for x in (*a, *b, *c1, *c2)]
            s = e3[0] * v[0] + e3[1] * v[1] + e3[2] * v[2] + e3[3] * w[0] + e3[4] * w[1] + e3[5] * w[2]
            t1 = e3[6] * w[0] + e3[7] * w[1] + e3[8] * w[2]
            t2 = e3[9] * w[0] + e3[10] * w[1] + e3[11] * w[2]
            m1 = ins["con"][2]["m1"][...][None].astype(dt)
            m2 = ins["con"][2]["m2"][...][None].astype(dt)
            J = where(live[:, :, None], (m2 - m1) * s + m2 * t2 - m1 * t1, 0.0)
            diag = ch("bw1") + ch("bw2")
            f0 = ch("f0")
            kz = None
            if plan.elliptic:  # friction row q: diagA (f_0 / f_q)^2 / impratio, pos and margin 0, solreffriction
                normal = q == 0
                diag = where(normal, diag, diag * ((f0 / ch("mu")) ** 2 / ch("impratio")))
                sfr = (ch("srf0"), ch("srf1"))
                use_fr = ((sfr[0] != 0) | (sfr[1] != 0)) & ~normal
                local.update(sr0=where(use_fr, sfr[0], ch("sr0")), sr1=where(use_fr, sfr[1], ch("sr1")))
                pos, margin = where(normal, dist, 0.0), where(normal, mg, 0.0)
                kz = table("con", "kz", nr) == 1
            else:
                f0sq = f0 * f0
                diag = where(fl, diag, diag * (2.0 * f0sq * (1.0 + f0sq) / ch("impratio")))
                pos, margin = dist, mg
            local.update(_pos=pos, _margin=margin, _fl=jp.zeros_like(dist), _vel=jp.sum(J * qvel, axis=2),
                         _diag=diag, _imp_r=jp.abs(dist - mg))  # fmt: skip
            store("con", J, _impedance_tail(ch, live, kz, refsafe, dt), nr)

    return body


def _launcher(m: Model):
    """`launch.Kernel.launcher`: one pallas_call over row tiles, `Launch.rows_tile` environments per program."""
    nv, plan = m.nv, _plan(m)
    nvp = _pow2(nv)
    refsafe = not (m.opt.disableflags & DisableBit.REFSAFE)
    tiles = [t for t in ("pt", "unit", "ten", "con") if plan.channels[t]]
    nrows = {"pt": plan.npt, "unit": plan.nunit, "ten": plan.nten, "con": plan.ncrow}
    # the tiles' rows, concatenated, put back in the plan's order (a few contiguous runs: static slices)
    order = np.concatenate([plan.rows[t] for t in tiles])
    inv = np.argsort(order)
    runs = constraint._runs(inv) if not np.array_equal(inv, np.arange(len(inv))) else None

    def run(kernel: launch.Kernel, env: dict, nenv: int | None, how: launch.Launch, x: dict) -> dict:
        e = 1 if nenv is None else nenv
        eb = min(int(how.rows_tile), _pow2(e))
        ep = -(-e // eb) * eb  # whole programs
        dtype = jp.result_type(*x.values())

        def per_env_flat(n):  # (e, size): a per-environment input, or a shared one broadcast
            v = jp.asarray(x[n], dtype)
            return v.reshape(e, -1) if env[n] else jp.broadcast_to(v.reshape(1, -1), (e, v.size))

        def packed(names, flat_of, index, per_env: bool):
            """One static gather from the inputs `names` (flattened, concatenated, a zero appended): entry k of the
            result is input `index[k][0]`'s element `index[k][1]` (None: the zero). (ep, K) or (K,)."""
            srcs = [flat_of(n) for n in names]
            srcs.append(jp.zeros((e, 1) if per_env else (1,), dtype))
            off = dict(zip(names, np.cumsum([0] + [int(v.shape[-1]) for v in srcs[:-1]]).tolist()))
            zero = int(sum(int(v.shape[-1]) for v in srcs[:-1]))
            ix = np.asarray([zero if k is None else off[k[0]] + int(k[1]) for k in index], np.int64)
            v = jp.take(jp.concatenate(srcs, axis=-1), ix, axis=-1)
            return jp.pad(v, [(0, ep - e), (0, 0)]) if per_env else v

        def is_shared(sources):
            return not any(env[n] or n in _DATA for n in sources)

        args, specs, shared = [], [], {}
        for t in tiles:
            nr = _pow2(nrows[t])
            chans = plan.channels[t]
            shared[t] = {c: is_shared(chans[c]) for c in chans}

            def index(cs, chans=chans, nr=nr):  # (input, element) of every (channel, row), channel-major
                out = []
                for c in cs:
                    for r in range(nr):
                        k = None
                        for n, ix in chans[c].items():
                            # padded rows read nothing, but the timestep and impratio (divisors) their first row's
                            i = ix[r] if r < len(ix) else (ix[0] if c in ("h", "impratio") else -1)
                            if n in x and i >= 0:
                                k = (n, i)
                        out.append(k)
                return out

            per = [c for c in chans if not shared[t][c]]
            sh = [c for c in chans if shared[t][c]]
            if per:
                names = sorted({n for c in per for n in chans[c] if n in x})
                args.append(packed(names, per_env_flat, index(per), True))
                specs.append(pl.BlockSpec((eb, len(per) * nr), lambda i: (i, 0)))
            if sh:
                names = sorted({n for c in sh for n in chans[c] if n in x})
                args.append(packed(names, lambda n: jp.asarray(x[n], dtype).reshape(-1), index(sh), False))
                specs.append(pl.BlockSpec((len(sh) * nr,), lambda i: (0,)))
            for n, tab in plan.tables[t].items():
                tab = np.asarray(tab, np.int32)
                pad = [(0, nr - tab.shape[0])] + [(0, 0)] * (tab.ndim - 1)
                tab = np.pad(tab, pad, constant_values=-1 if n in ("d1", "d2") else 0)
                args.append(jp.asarray(tab))
                specs.append(pl.BlockSpec(tab.shape, lambda i, nd=tab.ndim: (0,) * nd))
            if t == "ten":  # rows d1 and d2 of [ten_J; flexedge_J; 0] of every row (zero where none), (ep, 2, NR, NVP)
                src = [per_env_flat(n).reshape(e, -1, nv) for n, k in (("ten_J", m.ntendon),
                                                                       ("flexedge_J", m.nflexedge)) if n in x and k]
                zero = sum(int(v.shape[1]) for v in src)  # the zero row
                tj = jp.concatenate(src + [jp.zeros((e, 1, nv), dtype)], axis=1)
                ids = []
                for n in ("d1", "d2"):
                    v = np.asarray(plan.tables[t][n], np.int64)
                    v = np.pad(np.where(v < 0, zero, v), (0, nr - len(v)), constant_values=zero)
                    ids.append(v)
                tj = jp.take(tj, jp.asarray(np.stack(ids).reshape(-1)), axis=1).reshape(e, 2, nr, nv)
                tj = jp.pad(tj, [(0, ep - e), (0, 0), (0, 0), (0, nvp - nv)])
                args.append(tj)
                specs.append(pl.BlockSpec((eb, 2, nr, nvp), lambda i: (i, 0, 0, 0)))
        # the dof channels: qvel, then cdof's 6 components ([ang; lin]) of every dof, each padded to NVP
        dofs = [("qvel", j) if j < nv else None for j in range(nvp)]
        for c in range(6):
            dofs += [("cdof", 6 * j + c) if j < nv and "cdof" in x else None for j in range(nvp)]
        names = ["qvel", "cdof"] if "cdof" in x else ["qvel"]
        if plan.npt:  # cdof_dot, and the cvel of each dof's body
            dof_body = np.asarray(m.dof_bodyid)
            for c in range(6):
                dofs += [("cdof_dot", 6 * j + c) if j < nv else None for j in range(nvp)]
            for c in range(6):
                dofs += [("cvel", 6 * int(dof_body[j]) + c) if j < nv else None for j in range(nvp)]
            names += ["cdof_dot", "cvel"]
        args.append(packed(names, per_env_flat, dofs, True))
        specs.append(pl.BlockSpec((eb, len(dofs)), lambda i: (i, 0)))
        out_shape, out_specs = [], []
        for t in tiles:
            nr = _pow2(nrows[t])
            nout = len(_ROW_OUT) + (t in ("unit", "ten"))
            out_shape += [jax.ShapeDtypeStruct((ep, nr, nvp), dtype), jax.ShapeDtypeStruct((ep, nout * nr), dtype)]
            out_specs += [pl.BlockSpec((eb, nr, nvp), lambda i: (i, 0, 0)),
                          pl.BlockSpec((eb, nout * nr), lambda i: (i, 0))]  # fmt: skip
        body = _body(nv, plan, shared, refsafe, eb, nvp)

        res = pl.pallas_call(
            body, out_shape=out_shape, grid=(ep // eb,), in_specs=specs, out_specs=out_specs,
            compiler_params=plt.CompilerParams(num_warps=how.num_warps, num_stages=1),
            interpret=how.interpret, name="constraint_rows_tiled",
        )(*args)  # fmt: skip
        Js, rows_ = [], {n: [] for n in _ROW_OUT}
        over = jp.zeros((e,), dtype)
        for k, t in enumerate(tiles):
            nr, n = _pow2(nrows[t]), nrows[t]
            J, packed = res[2 * k], res[2 * k + 1]
            Js.append(J[:e, :n, :nv])
            for i, name in enumerate(_ROW_OUT):
                rows_[name].append(packed[:e, i * nr : i * nr + n])
            if t in ("unit", "ten"):
                over = jp.maximum(over, jp.max(packed[:e, len(_ROW_OUT) * nr : len(_ROW_OUT) * nr + n], axis=1))
        def in_order(v):  # (e, rows, ...) of the tiles' rows -> the plan's order
            v = jp.concatenate(v, axis=1)
            return v if runs is None else jp.concatenate([v[:, a:b] for a, b in runs], axis=1)

        out = {n: in_order(v) for n, v in rows_.items()}
        out["J"] = in_order(Js).reshape(e, -1)
        out["over"] = over[:, None]
        if nenv is None:
            out = {n: v[0] for n, v in out.items()}
        return out

    return run


def make_constraint(m: Model, d: Data, how: launch.Launch) -> Data:
    """kernels/rows.py's `make_constraint` (the caller checks `rows.fusable`) on row tiles, `how.rows_tile`
    environments per program; the same inputs, outputs and XLA twin (derivatives)."""
    d = lane_rows.prepare(m, d)
    k, x = lane_rows.kernel(m, d)
    outputs = {n: s for n, s in k.outputs.items() if not n.startswith("_")}
    k = dataclasses.replace(k, name="constraint_rows_tiled", outputs=outputs, tables={}, body=None,
                            launcher=_launcher(m))  # fmt: skip
    return lane_rows.assemble(m, d, k, x, how)
