"""Joint-space inertia: composite rigid bodies (mj_crb), L'DL factorisation (mj_factorM), solves and products.

Layouts (chosen statically from the model size, see `is_sparse`; use full_m / solve_m / mul_m, which hide it):
  dense  (nv <= SPARSE_NV): qM (nv, nv) full symmetric; qLD (nv, nv) with D on the diagonal and L in the strict
         lower triangle (L[i, j] != 0 only for dof ancestors j of i); qLDiagInv (nv,).
  sparse (nv >  SPARSE_NV): qM, qLD (nM,) tree-structured rows: row i holds (i, i), (i, parent(i)),
         (i, parent(parent(i))), ... at support.tables(m).madr[i] onwards (MuJoCo's classic dof_Madr layout);
         qLD holds D at the diagonal addresses and L elsewhere; qLDiagInv (nv,).
The factorisation is MuJoCo's M = L' D L (L unit lower triangular, eliminated from the leaves of the dof tree
up), scheduled by dof-tree depth: all dofs of one depth are eliminated at once.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.pipeline import support
from mjx_lite.types import MINVAL, Data, JointType, Model, TrnType

take, put = support.take, support.put

SPARSE_NV = 60  # models with more dofs use the tree-structured (sparse) layout
_HI = jax.lax.Precision.HIGHEST


def is_sparse(m: Model) -> bool:
    """Static choice of the qM / qLD layout."""
    return m.nv > SPARSE_NV


def qm_shape(m: Model) -> tuple:
    """Shape of Data.qM and Data.qLD for this model."""
    if is_sparse(m):
        return (int(support.tables(m).m_rows.size),)
    return (m.nv, m.nv)


def crb(m: Model, d: Data) -> Data:
    """Composite rigid-body inertias crb (nbody, 10) and the joint-space inertia qM (+ armature) (mj_crb)."""
    t = support.tables(m)
    crb_ = support.subtree_sum(m, d.cinert, include_world=False)
    if m.nv == 0:
        return d.replace(crb=crb_, qM=jp.zeros(qm_shape(m), d.cinert.dtype))
    buf = math.inert_mul_c(take(crb_, np.asarray(m.dof_bodyid)), d.cdof)  # (nv, 6)
    vals = jp.sum(take(buf, t.m_rows) * take(d.cdof, t.m_cols), axis=-1)  # (nM,)
    vals = support.put_add(vals, t.madr, m.dof_armature)
    # actuator armature (MuJoCo 4): gear^2 * armature on the dof of a slide/hinge joint transmission
    jdof, jgain = _joint_actuator_armature(m)
    if jdof.size:
        vals = support.put_add(vals, t.madr[jdof], jgain)
    tendon_armed = np.asarray(m.tendon_armed) if m.tendon_armed is not None else np.zeros(m.ntendon, bool)
    if is_sparse(m):
        if np.any(tendon_armed):
            raise NotImplementedError(
                "tendon armature (tendon_armature or armature of a tendon actuator) with the sparse inertia layout "
                f"(nv > {SPARSE_NV}) is not supported: it couples dofs outside the kinematic tree"
            )
        qm = vals
    else:
        qm = jp.zeros((m.nv, m.nv), vals.dtype).at[t.m_cols, t.m_rows].set(vals).at[t.m_rows, t.m_cols].set(vals)
        if np.any(tendon_armed):
            # tendon armature: J' diag(a) J, a = tendon_armature + sum over tendon actuators of gear^2 armature
            a = m.tendon_armature
            trn = np.asarray(m.actuator_trntype)
            act = np.nonzero(trn == TrnType.TENDON)[0]
            if act.size:
                ten = np.asarray(m.actuator_trnid)[act, 0]
                gain = m.actuator_gear[act, 0] ** 2 * m.actuator_armature[act]
                a = a.at[ten].add(gain)
            J = d.ten_J
            qm = qm + (J.T * a[None, :]) @ J
    return d.replace(crb=crb_, qM=qm)


def _joint_actuator_armature(m: Model) -> tuple[np.ndarray, jax.Array]:
    """(dof ids (k,), gear^2 * armature (k,)) of actuators with a slide/hinge joint transmission."""
    trn = np.asarray(m.actuator_trntype)
    sel = np.nonzero((trn == TrnType.JOINT) | (trn == TrnType.JOINTINPARENT))[0]
    if sel.size == 0:
        return np.zeros(0, np.int64), jp.zeros(0)
    jnt = np.asarray(m.actuator_trnid)[sel, 0]
    jt = np.asarray(m.jnt_type)[jnt]
    keep = (jt == JointType.SLIDE) | (jt == JointType.HINGE)
    sel, jnt = sel[keep], jnt[keep]
    dof = np.asarray(m.jnt_dofadr)[jnt]
    return dof, m.actuator_gear[sel, 0] ** 2 * m.actuator_armature[sel]


# ---- factorisation ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _SparseLevel:
    diag: np.ndarray  # (nK,) diagonal addresses of the level's dofs
    tgt: np.ndarray  # (nT,) address of M(i, j) updated
    src1: np.ndarray  # (nT,) address of M(k, i)
    src2: np.ndarray  # (nT,) address of M(k, j)
    tdiag: np.ndarray  # (nT,) address of M(k, k)
    off: np.ndarray  # (nO,) addresses of the strict-lower entries M(k, i) of the level's rows
    odiag: np.ndarray  # (nO,) M(k, k) address for each
    orow: np.ndarray  # (nO,) k
    ocol: np.ndarray  # (nO,) i


def _sparse_plan(m: Model) -> tuple:
    t = support.tables(m)
    madr = t.madr
    rowlen = np.bincount(t.m_rows, minlength=m.nv)
    levels = []
    for dofs in t.dof_levels:
        tgt, src1, src2, tdiag, off, odiag, orow, ocol = ([] for _ in range(8))
        for k in dofs:
            row = t.m_cols[madr[k] : madr[k] + rowlen[k]]  # k, parent(k), ...
            for p in range(1, row.size):
                i = row[p]
                off.append(madr[k] + p)
                odiag.append(madr[k])
                orow.append(k)
                ocol.append(i)
                for q in range(p, row.size):
                    tgt.append(madr[i] + (q - p))
                    src1.append(madr[k] + p)
                    src2.append(madr[k] + q)
                    tdiag.append(madr[k])
        a = lambda x: np.asarray(x, np.int64)  # noqa: E731
        levels.append(_SparseLevel(a(madr[dofs]), a(tgt), a(src1), a(src2), a(tdiag), a(off), a(odiag), a(orow),
                                   a(ocol)))  # fmt: skip
    return tuple(levels)


def factor_m(m: Model, d: Data) -> Data:
    """qLD, qLDiagInv: M = L' D L factorisation of qM (mj_factorM); D below MINVAL is clamped as MuJoCo."""
    t = support.tables(m)
    if m.nv == 0:
        return d.replace(qLD=d.qM, qLDiagInv=jp.zeros((0,), d.qM.dtype))
    if is_sparse(m):
        a = d.qM
        for lv in reversed(support.memo(m, "inertia_sparse", _sparse_plan)):
            dk = take(a, lv.diag)
            a = put(a, lv.diag, jp.where(dk < MINVAL, MINVAL, dk))
            if lv.tgt.size:
                a = support.put_add(a, lv.tgt, -take(a, lv.src1) * take(a, lv.src2) / take(a, lv.tdiag))
                a = put(a, lv.off, take(a, lv.off) / take(a, lv.odiag))
        diag = take(a, t.madr)
        return d.replace(qLD=a, qLDiagInv=1.0 / diag)
    a = d.qM
    nv = m.nv
    qld = jp.zeros_like(a)
    for dofs in reversed(t.dof_levels):
        dk = take(a.reshape(nv * nv), dofs * (nv + 1))
        dk = jp.where(dk < MINVAL, MINVAL, dk)
        anc = t.dof_anc[dofs]  # (nK, nv)
        r = jp.where(jp.asarray(anc), take(a, dofs), 0.0)
        lk = r / dk[:, None]
        if anc.any():
            a = a - jp.matmul(r.T, lk, precision=_HI)
        onehot = np.eye(nv)[dofs]
        qld = put(qld, dofs, lk + jp.asarray(onehot, a.dtype) * dk[:, None])
    diag = jp.diagonal(qld)
    return d.replace(qLD=qld, qLDiagInv=1.0 / diag)


# ---- solves and products ------------------------------------------------------------------------------------


def solve_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
    """M^-1 x using the factorisation in d (mj_solveM). x: (nv,) or (nv, k)."""
    t = support.tables(m)
    if m.nv == 0:
        return x
    inv = d.qLDiagInv.reshape((m.nv,) + (1,) * (x.ndim - 1))
    if is_sparse(m):
        plan = support.memo(m, "inertia_sparse", _sparse_plan)
        qld = d.qLD
        exp = (slice(None),) + (None,) * (x.ndim - 1)
        for lv in reversed(plan):  # x <- inv(L') x
            if lv.off.size:
                x = support.put_add(x, lv.ocol, -take(qld, lv.off)[exp] * take(x, lv.orow))
        x = x * inv
        for lv in plan:  # x <- inv(L) x
            if lv.off.size:
                x = support.put_add(x, lv.orow, -take(qld, lv.off)[exp] * take(x, lv.ocol))
        return x
    qld = d.qLD
    lrows = [(dofs, jp.where(jp.asarray(t.dof_anc[dofs]), take(qld, dofs), 0.0)) for dofs in t.dof_levels]
    for dofs, lk in reversed(lrows):
        if t.dof_anc[dofs].any():
            x = x - jp.tensordot(lk, take(x, dofs), axes=(0, 0), precision=_HI)
    x = x * inv
    for dofs, lk in lrows:
        if t.dof_anc[dofs].any():
            x = support.put_add(x, dofs, -jp.tensordot(lk, x, axes=(1, 0), precision=_HI))
    return x


def mul_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
    """M x (mj_mulM). x: (nv,) or (nv, k)."""
    if m.nv == 0:
        return x
    if not is_sparse(m):
        return jp.tensordot(d.qM, x, axes=(1, 0), precision=_HI)
    t = support.tables(m)
    exp = (slice(None),) + (None,) * (x.ndim - 1)
    off = t.m_rows != t.m_cols
    y = take(d.qM, t.madr)[exp] * x
    vals = take(d.qM, np.nonzero(off)[0])[exp]
    r, c = t.m_rows[off], t.m_cols[off]
    y = support.put_add(y, r, vals * take(x, c))
    y = support.put_add(y, c, vals * take(x, r))
    return y


def full_m(m: Model, d: Data) -> jax.Array:
    """Dense (nv, nv) joint-space inertia (mj_fullM)."""
    if not is_sparse(m):
        return d.qM
    t = support.tables(m)
    return jp.zeros((m.nv, m.nv), d.qM.dtype).at[t.m_cols, t.m_rows].set(d.qM).at[t.m_rows, t.m_cols].set(d.qM)
