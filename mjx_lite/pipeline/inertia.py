"""Joint-space inertia: composite rigid bodies (mj_crb), L'DL factorisation (mj_factorM), solves and products.

Layouts of qM (chosen statically by `m.config.mass_matrix`, "auto": from the model size, see `is_sparse`; use
full_m / solve_m / mul_m, which hide it):
  dense  (nv <= SPARSE_NV): qM (nv, nv) full symmetric.
  sparse (nv >  SPARSE_NV): qM (nM,) tree-structured rows: row i holds (i, i), (i, parent(i)),
         (i, parent(parent(i))), ... at support.tables(m).madr[i] onwards (MuJoCo's classic dof_Madr layout).
qLD (nM,) holds the factor's tree entries (D on the diagonal, L[i, j] != 0 only for dof ancestors j of i) in either
layout, stored in elimination order (`_factor_layout`: level by level from the leaves, each level's D entries then
its L entries): the factorisation writes it without a permutation (under vmap a permuting gather comes out
index-major and costs a transposing copy into Data) and the solves read each level's L entries as one slice;
qLDiagInv (nv,) in dof order. qLD is this library's own layout (MuJoCo's differs); use solve_m.
The factorisation is MuJoCo's M = L' D L (L unit lower triangular, eliminated from the leaves of the dof tree
up), scheduled by dof-tree depth: all dofs of one depth are eliminated at once.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import linalg, math
from mjx_lite.config import linalg as config_linalg
from mjx_lite.data import count_warning
from mjx_lite.pipeline import support
from mjx_lite.types import MINVAL, Data, JointType, Model, TrnType, Warning, qm_shape, sparse_mass_matrix

take, put = support.take, support.put

_HI = jax.lax.Precision.HIGHEST


def is_sparse(m: Model) -> bool:
    """Static choice of the qM / qLD layout (`types.sparse_mass_matrix`)."""
    return sparse_mass_matrix(m)


def crb(m: Model, d: Data) -> Data:
    """Composite rigid-body inertias crb (nbody, 10) and the joint-space inertia qM (+ armature) (mj_crb)."""
    t = support.tables(m)
    crb_ = support.subtree_sum(m, d.cinert, include_world=False)
    if m.nv == 0:
        return d.replace(crb=crb_, qM=jp.zeros(qm_shape(m), d.cinert.dtype))
    buf = math.inert_mul_c(take(crb_, np.asarray(m.dof_bodyid)), d.cdof)  # (nv, 6)
    if not is_sparse(m):
        return d.replace(crb=crb_, qM=_dense_qm(m, d, buf))
    vals = jp.sum(take(buf, t.m_rows) * take(d.cdof, t.m_cols), axis=-1)  # (nM,)
    vals = support.put_add(vals, t.madr, _dof_armature(m))
    if np.any(_tendon_armed(m)):
        J = d.ten_J
        vals = vals + jp.einsum("t,tk,tk->k", _tendon_armature(m), J[:, t.m_rows], J[:, t.m_cols])
    return d.replace(crb=crb_, qM=vals)


def _tendon_armed(m: Model) -> np.ndarray:
    """(ntendon,) static bool: tendons with armature (theirs or their actuators')."""
    return np.asarray(m.tendon_armed) if m.tendon_armed is not None else np.zeros(m.ntendon, bool)


def _tendon_armature(m: Model) -> jax.Array:
    """(ntendon,) tendon_armature + gear^2 armature of the tendon's actuators. Tendon armature adds J' diag(a) J
    to qM on the tree entries only (MuJoCo keeps qM's dof-tree sparsity and drops couplings between dofs on
    different branches)."""
    a = m.tendon_armature
    act = np.nonzero(np.asarray(m.actuator_trntype) == TrnType.TENDON)[0]
    if act.size:
        ten = np.asarray(m.actuator_trnid)[act, 0]
        a = a.at[ten].add(m.actuator_gear[np.asarray(m.actuator_outadr)[act], 0] ** 2 * m.actuator_armature[act])
    return a


def _dof_armature(m: Model) -> jax.Array:
    """(nv,) dof_armature plus the actuator armature of joint transmissions (MuJoCo 4: gear[0]^2 * armature on
    each dof of the joint)."""
    jdof, jgain = _joint_actuator_armature(m)
    return support.put_add(m.dof_armature, jdof, jgain) if jdof.size else m.dof_armature


def _dense_qm(m: Model, d: Data, buf: jax.Array) -> jax.Array:
    """Dense qM (nv, nv) without gathers: G = buf cdof' (one small product, buf[i] = I_crb(body(i)) cdof[i]) holds
    M[i, j] = cdof[j] . I_crb(body(i)) cdof[i] wherever j is an ancestor-or-self of i in the dof tree (plus the
    tendon armature's J' diag(a) J); a static mask keeps those entries, the transpose fills the upper triangle;
    dof armature on the diagonal."""
    t = support.tables(m)
    lower = support.memo(m, "inertia_lower_mask", lambda m: t.dof_anc | np.eye(m.nv, dtype=bool))
    g = jp.tensordot(buf, d.cdof, axes=(1, 1), precision=_HI)  # (nv, nv)
    if np.any(_tendon_armed(m)):
        J = d.ten_J
        g = g + jp.einsum("t,ti,tj->ij", _tendon_armature(m), J, J, precision=_HI)
    low = jp.where(lower, g, 0.0)
    return low + low.T + jp.diag(_dof_armature(m) - jp.diagonal(g))


def joint_armature_dofs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (actuator ids (k,), dof ids (k,)): one pair per dof of each joint-transmission actuator's joint (all
    of a ball's 3 or a free joint's 6 dofs, as MuJoCo 4.0's mj_actuatorArmature per dof)."""
    trn = np.asarray(m.actuator_trntype)
    acts, dofs = [], []
    for i in np.nonzero((trn == TrnType.JOINT) | (trn == TrnType.JOINTINPARENT))[0]:
        j = int(np.asarray(m.actuator_trnid)[i, 0])
        nd = JointType(int(np.asarray(m.jnt_type)[j])).dof_width()
        acts += [int(i)] * nd
        dofs += list(int(np.asarray(m.jnt_dofadr)[j]) + np.arange(nd))
    return np.asarray(acts, np.int64), np.asarray(dofs, np.int64)


def _joint_actuator_armature(m: Model) -> tuple[np.ndarray, jax.Array]:
    """(dof ids (k,), gear[0]^2 * armature (k,)) of actuators with a joint transmission, on every dof of the
    joint."""
    sel, dof = joint_armature_dofs(m)
    if sel.size == 0:
        return np.zeros(0, np.int64), jp.zeros(0)
    return dof, m.actuator_gear[np.asarray(m.actuator_outadr)[sel], 0] ** 2 * m.actuator_armature[sel]


# ---- factorisation ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _SparseLevel:
    diag: np.ndarray  # (nK,) diagonal addresses of the level's dofs
    tgt: np.ndarray  # (nT,) address of M(i, j) updated
    src1: np.ndarray  # (nT,) address of M(k, i)
    src2: np.ndarray  # (nT,) address of M(k, j)
    off: np.ndarray  # (nO,) addresses of the strict-lower entries M(k, i) of the level's rows
    orow: np.ndarray  # (nO,) k
    ocol: np.ndarray  # (nO,) i
    tk: np.ndarray  # (nT,) position of k (whose pivot divides) among the level's dofs
    ok: np.ndarray  # (nO,) position of k among the level's dofs


def _sparse_plan(m: Model) -> tuple:
    t = support.tables(m)
    madr = t.madr
    rowlen = np.bincount(t.m_rows, minlength=m.nv)
    levels = []
    for dofs in t.dof_levels:
        tgt, src1, src2, off, orow, ocol, tk, ok = ([] for _ in range(8))
        for pk, k in enumerate(dofs):
            row = t.m_cols[madr[k] : madr[k] + rowlen[k]]  # k, parent(k), ...
            for p in range(1, row.size):
                i = row[p]
                off.append(madr[k] + p)
                orow.append(k)
                ocol.append(i)
                ok.append(pk)
                for q in range(p, row.size):
                    tgt.append(madr[i] + (q - p))
                    src1.append(madr[k] + p)
                    src2.append(madr[k] + q)
                    tk.append(pk)
        a = lambda x: np.asarray(x, np.int64)  # noqa: E731
        levels.append(_SparseLevel(a(madr[dofs]), a(tgt), a(src1), a(src2), a(off), a(orow), a(ocol), a(tk),
                                   a(ok)))  # fmt: skip
    return tuple(levels)


@dataclasses.dataclass(frozen=True)
class _FactorLayout:
    pos: np.ndarray  # (nM,) position in qLD of the entry at each tree (madr-layout) address
    diag: np.ndarray  # (nv,) position in qLD of D[i]
    off: tuple  # per `_sparse_plan` level: (start, stop) of its L entries in qLD (contiguous), None without any


def _factor_layout(m: Model) -> _FactorLayout:
    """qLD's elimination order: for each level of `_sparse_plan` from the leaves, its D entries (lv.diag's order),
    then its L entries (lv.off's order), as `_factor_tree` produces them."""

    def build(m: Model) -> _FactorLayout:
        plan = support.memo(m, "inertia_sparse", _sparse_plan)
        addr, off, n = [], [None] * len(plan), 0
        for k in reversed(range(len(plan))):
            lv = plan[k]
            addr.append(lv.diag)
            n += lv.diag.size
            if lv.off.size:
                addr.append(lv.off)
                off[k] = (n, n + lv.off.size)
                n += lv.off.size
        pos = np.empty(n, np.int64)
        pos[np.concatenate(addr)] = np.arange(n)
        assert n == support.tables(m).m_rows.size  # every entry once
        return _FactorLayout(pos, pos[support.tables(m).madr], tuple(off))

    return support.memo(m, "inertia_factor_layout", build)


def _dense_addr(m: Model) -> np.ndarray:
    """(nM,) flat index into the dense (nv, nv) qM of each tree-sparse entry (row i, ancestor column j)."""
    t = support.tables(m)
    return support.memo(m, "inertia_dense_addr", lambda m: np.asarray(t.m_rows * m.nv + t.m_cols, np.int64))


def _dense_gather(m: Model, symmetric: bool) -> np.ndarray:
    """(nv * nv,) address in a tree-sparse (nM,) vector of each dense entry, nM (an appended zero) off the tree;
    symmetric: both triangles, else the lower triangle and the diagonal only."""

    def build(m: Model) -> np.ndarray:
        t = support.tables(m)
        idx = np.full((m.nv, m.nv), t.m_rows.size, np.int64)
        idx[t.m_rows, t.m_cols] = np.arange(t.m_rows.size)
        if symmetric:
            idx[t.m_cols, t.m_rows] = np.arange(t.m_rows.size)
        return idx.reshape(-1)

    return support.memo(m, f"inertia_dense_gather_{symmetric}", build)


def _to_dense(m: Model, vals: jax.Array, symmetric: bool) -> jax.Array:
    """Dense (nv, nv) matrix of tree-sparse entries vals (nM,), by one gather (no scatter)."""
    padded = jp.concatenate([vals, jp.zeros((1,), vals.dtype)])
    return take(padded, _dense_gather(m, symmetric)).reshape(m.nv, m.nv)


def _factor_tree(m: Model, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """L'DL of tree-sparse entries a (nM,) (support.tables(m).madr layout) -> (factor (nM,) in `_factor_layout`'s
    elimination order, D (nv,), clamped ()).

    Dofs are eliminated one depth level at a time, leaves first: gathers and one scatter-add per level (the
    update of the ancestors' entries), so the cost follows the tree's sparsity (no dense rank updates). A level's
    own rows are final once it is eliminated (later levels update only their ancestors), so their values (D, and
    L = row / D) are concatenated in elimination order: that is the factor. A pivot below MINVAL is set to MINVAL,
    as MuJoCo's mj_factorI; `clamped` (bool) tells whether any was.
    """
    plan = support.memo(m, "inertia_sparse", _sparse_plan)
    clamped = jp.zeros((), bool)
    vals = []  # final entries in elimination order
    for lv in reversed(plan):
        dk = take(a, lv.diag)
        clamped = clamped | jp.any(dk < MINVAL)
        dk = jp.where(dk < MINVAL, MINVAL, dk)
        vals.append(dk)
        if lv.off.size:
            a = support.put_add(a, lv.tgt, -take(a, lv.src1) * take(a, lv.src2) / take(dk, lv.tk))
            vals.append(take(a, lv.off) / take(dk, lv.ok))
    qld = jp.concatenate(vals)
    return qld, take(qld, _factor_layout(m).diag), clamped


def _factor_dense(m: Model, a: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
    """`_factor_tree`'s result from a dense symmetric (nv, nv) matrix a, by one Cholesky factorisation.

    Reversing the dof order turns MuJoCo's M = L'DL (L unit lower-triangular, leaves eliminated first) into the
    usual Cholesky: with R the reversal, R a R = V' V (V upper-triangular), so a = U U' with U = R V' R upper-
    triangular, D = diag(U)^2 and L[k, i] = U[i, k] / U[k, k]. On a tree no entry fills in, so L is zero off the
    tree and its tree entries equal `_factor_tree`'s to round-off. With `Config.linalg` "own" (`mjx_lite.linalg`)
    a pivot below MINVAL is set to MINVAL and the factorisation goes on with it, as `_factor_tree` (`clamped`);
    with "library" (JAX's Cholesky) it is set to MINVAL in D only, and a matrix that is not positive definite gives
    NaN in L (the step's qacc check then resets the environment).
    """
    if config_linalg(m.config) == "library":
        u = jax.lax.linalg.cholesky(a[::-1, ::-1], symmetrize_input=False)[::-1, ::-1]
        s = jp.diagonal(u)
        dk = s * s
        clamped = jp.any(~(dk >= MINVAL))  # NaN too
    else:
        v, piv = linalg.cholesky_pivots(a[::-1, ::-1], MINVAL)
        u = v.T[::-1, ::-1]
        s = jp.diagonal(u)
        dk = piv[::-1]
        clamped = jp.any(~(dk >= MINVAL))  # NaN too
    dk = jp.where(dk < MINVAL, MINVAL, dk)
    lt = u / s[None, :]  # lt[i, k] = L[k, i]
    qld = take(jp.concatenate([dk, lt.reshape(-1)]), _factor_dense_gather(m))
    return qld, dk, clamped


def _factor_dense_gather(m: Model) -> np.ndarray:
    """(nM,) for each qLD position (elimination order): its index in concat([D (nv,), L' (nv * nv,)])."""

    def build(m: Model) -> np.ndarray:
        t = support.tables(m)
        r, c = t.m_rows, t.m_cols
        g = np.empty(r.size, np.int64)
        g[_factor_layout(m).pos] = np.where(r == c, r, m.nv + c * m.nv + r)
        return g

    return support.memo(m, "inertia_factor_dense_gather", build)


def _solve_dense(m: Model, qld: jax.Array, inv: jax.Array, x: jax.Array) -> jax.Array:
    """`_solve_tree` by two triangular solves with the dense unit L gathered from qld (one gather)."""
    lower = take(jp.concatenate([qld, jp.zeros((1,), qld.dtype), jp.ones((1,), qld.dtype)]), _unit_l_gather(m))
    lower = lower.reshape(m.nv, m.nv)
    y = x.reshape(m.nv, -1)
    if config_linalg(m.config) == "library":
        y = jax.lax.linalg.triangular_solve(lower, y, left_side=True, lower=True, transpose_a=True,
                                            unit_diagonal=True)  # fmt: skip
        y = y * inv[:, None]
        y = jax.lax.linalg.triangular_solve(lower, y, left_side=True, lower=True, unit_diagonal=True)
    else:
        y = linalg.solve_triangular(lower, y, lower=True, transpose=True, unit_diagonal=True)
        y = y * inv[:, None]
        y = linalg.solve_triangular(lower, y, lower=True, unit_diagonal=True)
    return y.reshape(x.shape)


def _unit_l_gather(m: Model) -> np.ndarray:
    """(nv * nv,) for each dense entry of the unit L: its qLD position, nM (a zero) off the tree, nM + 1 (a one) on
    the diagonal."""

    def build(m: Model) -> np.ndarray:
        addr = _dense_gather(m, symmetric=False).reshape(m.nv, m.nv)  # tree address, nM off the tree
        n = support.tables(m).m_rows.size
        idx = np.append(_factor_layout(m).pos, n)[addr]
        np.fill_diagonal(idx, n + 1)
        return idx.reshape(-1)

    return support.memo(m, "inertia_unit_l_gather", build)


def _dense_factorization(m: Model) -> bool:
    """Static: factor and solve with dense Cholesky / triangular solves (`Config.mass_factorization`)."""
    return m.config.mass_factorization == "dense"


def _level_l(qld: jax.Array, span: tuple[int, int]) -> jax.Array:
    """The L entries of one elimination level: a contiguous slice of qLD (`_FactorLayout.off`)."""
    return jax.lax.slice_in_dim(qld, span[0], span[1], axis=0)


def _solve_tree(m: Model, qld: jax.Array, inv: jax.Array, x: jax.Array) -> jax.Array:
    """x <- (L'DL)^-1 x for a tree-sparse factor qld (nM,) and inv = 1/D (nv,); x (nv,) or (nv, k)."""
    plan = support.memo(m, "inertia_sparse", _sparse_plan)
    spans = _factor_layout(m).off
    exp = (slice(None),) + (None,) * (x.ndim - 1)
    for lv, span in zip(reversed(plan), reversed(spans)):  # x <- inv(L') x
        if span is not None:
            x = support.put_add(x, lv.ocol, -_level_l(qld, span)[exp] * take(x, lv.orow))
    x = x * inv.reshape((m.nv,) + (1,) * (x.ndim - 1))
    for lv, span in zip(plan, spans):  # x <- inv(L) x
        if span is not None:
            x = support.put_add(x, lv.orow, -_level_l(qld, span)[exp] * take(x, lv.ocol))
    return x


def _factor(m: Model, d: Data, shift: jax.Array | None = None) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(qLD (nM,), D (nv,), clamped ()) of qM + diag(shift) (shift (nv,) or None), either qM layout, with the
    model's factorisation (`Config.mass_factorization`)."""
    if _dense_factorization(m):
        a = full_m(m, d)
        return _factor_dense(m, a if shift is None else a + jp.diag(shift))
    a = d.qM if is_sparse(m) else take(d.qM.reshape(m.nv * m.nv), _dense_addr(m))  # the nM tree entries
    if shift is not None:
        a = support.put_add(a, support.tables(m).madr, shift)
    return _factor_tree(m, a)


def factor_m(m: Model, d: Data) -> Data:
    """qLD, qLDiagInv: M = L' D L factorisation of qM (mj_factorM).

    A pivot D below MINVAL (a singular or indefinite mass matrix, e.g. after setting masses to zero or negative
    with `m.replace`) is clamped to MINVAL and counted in warning_number[INERTIA], once per factorisation, as
    MuJoCo.
    """
    if m.nv == 0:
        return d.replace(qLD=jp.zeros((0,), d.qM.dtype), qLDiagInv=jp.zeros((0,), d.qM.dtype))
    qld, diag, clamped = _factor(m, d)
    wn = count_warning(d.warning_number, Warning.INERTIA, clamped)
    return d.replace(qLD=qld, qLDiagInv=1.0 / diag, warning_number=wn)


# ---- solves and products ------------------------------------------------------------------------------------


def solve_m(m: Model, d: Data, x: jax.Array) -> jax.Array:
    """M^-1 x using the factorisation in d (mj_solveM). x: (nv,) or (nv, k)."""
    return solve_factored(m, d.qLD, d.qLDiagInv, x)


def solve_factored(m: Model, qLD: jax.Array, qLDiagInv: jax.Array, x: jax.Array) -> jax.Array:  # noqa: N803
    """M^-1 x from the factor arrays themselves (qLD (nM,), qLDiagInv (nv,) = 1/D). x: (nv,) or (nv, k)."""
    if m.nv == 0:
        return x
    if _dense_factorization(m):
        return _solve_dense(m, qLD, qLDiagInv, x)
    return _solve_tree(m, qLD, qLDiagInv, x)


def solve_shifted(m: Model, d: Data, shift: jax.Array, x: jax.Array) -> jax.Array:
    """(M + diag(shift))^-1 x, shift (nv,), by a fresh L'DL factorisation of the shifted qM (mj_factorI + solve).

    Used by Euler's implicit damping (qH = M + h B). Follows the tree sparsity like factor_m.
    """
    if m.nv == 0:
        return x
    qld, diag, _ = _factor(m, d, shift)
    return solve_factored(m, qld, 1.0 / diag, x)


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
    return _to_dense(m, d.qM, symmetric=True)
