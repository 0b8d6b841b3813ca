"""The mass matrix's L'DL factorisation and its solves inside fused kernels (mj_factorM, mj_solveM, mj_factorI).

Two uses:
  - `factor_into(io, ...)`: the factorisation as the last part of the tree pass (kernels/tree.py): qM is in the
    kernel's output block, qLD (`inertia._factor_layout`'s elimination order) and qLDiagInv are written beside it.
  - two kernels of their own: `acceleration(m, d)` (fwd_acceleration whole: qfrc_smooth, the Cartesian wrenches'
    J'xfrc included, and qacc_smooth = M^-1 qfrc_smooth from d.qLD / d.qLDiagInv) and `solve_shifted(m, d, shift,
    x)` ((M + diag(shift))^-1 x by a fresh factorisation of the shifted qM and a solve, one kernel: Euler's implicit
    damping).

The arithmetic is `inertia._factor_tree` / `inertia._solve_tree`'s, dof by dof instead of level by level: dofs are
eliminated from the last to the first (every descendant of a dof has a larger index, so a dof's row is final when
it is reached), each pivot D_k below MINVAL clamped to MINVAL as MuJoCo's mj_factorI; for each dof k, the
ancestors' entries M(i, j) -= M(k, i) M(k, j) / D_k (k's "triples"), then row k's entries are divided by D_k.
The solve runs x <- L'^-1 x over the L entries by rows from the last dof to the first, x <- x / D, then
x <- L^-1 x over the same entries in the opposite order. Only the summation order differs from the XLA stages
(round-off). The tables are the model's tree entries in qLD positions, read in loops whose code does not grow
with the model (as kernels/tree.py).

`Config.mass_factorization="dense"` (a dense Cholesky on the XLA path) is not fused: its clamped pivots differ
from the tree elimination's, so those models keep the XLA factorisation and solves.
"""

from __future__ import annotations

import types

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import inertia, support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MINVAL, Data, Model, qm_shape

__all__ = ["ACCELERATION_INPUTS", "acceleration", "acceleration_kernel", "factor_into", "fusable", "plan",
           "shifted_body", "shifted_tables", "solve_in", "solve_shifted"]


def fusable(m: Model) -> bool:
    """Static: the factorisation and the solves have fused kernels for `m` (the tree factorisation, nv > 0)."""
    return m.nv > 0 and m.config.mass_factorization == "tree"


def plan(m: Model) -> dict:
    """Static int32 tables (numpy; empty ones left out), named f_* (see the module docstring):
      f_entry   (nM,) qLD position of each tree entry (madr order: row i, its ancestors j)
      f_diag    (nv,) qLD position of D_k
      f_tstart  (nv + 1,) range of dof k's triples in f_tgt / f_src1 / f_src2 (qLD positions)
      f_ostart  (nv + 1,) range of row k's L entries in f_off (qLD positions), f_orow, f_ocol; rows in increasing
                order, so the solve's first pass walks f_off backwards and its second forwards
    """

    def build(m: Model) -> dict:
        t = support.tables(m)
        pos = inertia._factor_layout(m).pos
        madr, nv = t.madr, m.nv
        rowlen = np.bincount(t.m_rows, minlength=nv)
        tgt, src1, src2, off, orow, ocol = ([] for _ in range(6))
        tstart, ostart = [0], [0]
        for k in range(nv):
            row = t.m_cols[madr[k] : madr[k] + rowlen[k]]  # k, parent(k), ...
            for p in range(1, row.size):
                i = row[p]
                off.append(pos[madr[k] + p])
                orow.append(k)
                ocol.append(i)
                for q in range(p, row.size):
                    tgt.append(pos[madr[i] + (q - p)])
                    src1.append(pos[madr[k] + p])
                    src2.append(pos[madr[k] + q])
            tstart.append(len(tgt))
            ostart.append(len(off))
        tab = dict(f_entry=pos, f_diag=pos[madr], f_tstart=tstart, f_ostart=ostart, f_tgt=tgt, f_src1=src1,
                   f_src2=src2, f_off=off, f_orow=orow, f_ocol=ocol)  # fmt: skip
        return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}

    return support.memo(m, "kernels_factor_plan", build)


def factor_into(io, m: Model, ld: str, inv: str):
    """Factor the tree entries already in output `ld` (qLD positions) in place; 1/D into output `inv` (nv,).
    Returns the lane vector 1.0 where a pivot was clamped, else 0.0."""
    tab = plan(m)
    triples, offs = "f_tgt" in tab, "f_off" in tab

    def eliminate(r, clamped):
        k = m.nv - 1 - r
        dpos = io.table("f_diag", k)
        dk = io.load(ld, dpos)
        small = dk < MINVAL
        clamped = jp.maximum(clamped, where(small, 1.0, 0.0, io.dtype).astype(io.dtype))
        dk = where(small, MINVAL, dk)
        io.write(ld, dpos, dk)
        io.write(inv, k, 1.0 / dk)
        if triples:

            def update(e, c):
                tgt = io.table("f_tgt", e)
                v = io.load(ld, io.table("f_src1", e)) * io.load(ld, io.table("f_src2", e)) / dk
                io.write(ld, tgt, io.load(ld, tgt) - v)
                return c

            jax.lax.fori_loop(io.table("f_tstart", k), io.table("f_tstart", k + 1), update, 0)
        if offs:

            def scale(e, c):
                o = io.table("f_off", e)
                io.write(ld, o, io.load(ld, o) / dk)
                return c

            jax.lax.fori_loop(io.table("f_ostart", k), io.table("f_ostart", k + 1), scale, 0)
        return clamped

    return jax.lax.fori_loop(np.int32(0), np.int32(m.nv), eliminate, io.lanes(0.0))


def solve_in(io, m: Model, y: str, ld, inv):
    """x <- (L'DL)^-1 x in place in output `y` (nv,); ld / inv: functions k -> the lane vector of qLD position k /
    of 1/D_k."""
    tab = plan(m)
    n = tab["f_ostart"][-1] if "f_off" in tab else 0

    def back(r, c):  # x[col] -= L[row, col] x[row], rows from the last
        e = n - 1 - r
        row, col = io.table("f_orow", e), io.table("f_ocol", e)
        io.write(y, col, io.load(y, col) - ld(io.table("f_off", e)) * io.load(y, row))
        return c

    def scale(k, c):
        io.write(y, k, io.load(y, k) * inv(k))
        return c

    def fwd(e, c):  # x[row] -= L[row, col] x[col], rows from the first
        row, col = io.table("f_orow", e), io.table("f_ocol", e)
        io.write(y, row, io.load(y, row) - ld(io.table("f_off", e)) * io.load(y, col))
        return c

    if n:
        jax.lax.fori_loop(np.int32(0), np.int32(n), back, 0)
    jax.lax.fori_loop(np.int32(0), np.int32(m.nv), scale, 0)
    if n:
        jax.lax.fori_loop(np.int32(0), np.int32(n), fwd, 0)


def _copy(io, m: Model, src, dst: str):
    """Output `dst` (nv,) <- src(k) for each dof k."""

    def put(k, c):
        io.write(dst, k, src(k))
        return c

    jax.lax.fori_loop(np.int32(0), np.int32(m.nv), put, 0)


# ---- fwd_acceleration: qfrc_smooth and qacc_smooth in one kernel ---------------------------------------------

_FORCES = ("qfrc_passive", "qfrc_bias", "qfrc_applied", "qfrc_actuator")
ACCELERATION_INPUTS = _FORCES + ("xfrc_applied", "xipos", "subtree_com", "cdof", "qLD", "qLDiagInv")


def acceleration_kernel(m: Model) -> launch.Kernel:
    """qfrc_smooth = passive - bias + applied + actuator + J'xfrc (support.xfrc_accumulate: each body's wrench about
    its root's subtree com, summed leaf to root over the body tree, dotted with each dof's cdof), then
    qacc_smooth = M^-1 qfrc_smooth from d.qLD / d.qLDiagInv."""
    nv, nb, nm = m.nv, m.nbody, support.tables(m).m_rows.size
    tables = dict(plan(m), a_root=np.asarray(m.body_rootid, np.int32), a_parent=np.asarray(m.body_parentid, np.int32),
                  a_dofbody=np.asarray(m.dof_bodyid, np.int32))  # fmt: skip

    def body(io):
        def wrench(b, c):  # (torque + (xipos - subtree_com[root]) x force, force)
            r = io.table("a_root", b)
            o = [io.read("xipos", 3 * b + i) - io.read("subtree_com", 3 * r + i) for i in range(3)]
            f = [io.read("xfrc_applied", 6 * b + i) for i in range(3)]
            cross = (o[1] * f[2] - o[2] * f[1], o[2] * f[0] - o[0] * f[2], o[0] * f[1] - o[1] * f[0])
            for i in range(3):
                io.write("_w", 6 * b + i, io.read("xfrc_applied", 6 * b + 3 + i) + cross[i])
                io.write("_w", 6 * b + 3 + i, f[i])
            return c

        def push(r, c):  # children before parents (a parent's index is below its children's)
            b = nb - 1 - r
            p = io.table("a_parent", b)
            for i in range(6):
                io.write("_w", 6 * p + i, io.load("_w", 6 * p + i) + io.load("_w", 6 * b + i))
            return c

        def dof(j, c):
            b = io.table("a_dofbody", j)
            x = io.read("qfrc_passive", j) - io.read("qfrc_bias", j) + io.read("qfrc_applied", j)
            x = x + io.read("qfrc_actuator", j)
            xfrc = io.read("cdof", 6 * j) * io.load("_w", 6 * b)
            for i in range(1, 6):
                xfrc = xfrc + io.read("cdof", 6 * j + i) * io.load("_w", 6 * b + i)
            io.write("qfrc_smooth", j, x + xfrc)
            io.write("qacc_smooth", j, x + xfrc)
            return c

        jax.lax.fori_loop(np.int32(0), np.int32(nb), wrench, 0)
        jax.lax.fori_loop(np.int32(0), np.int32(nb - 1), push, 0)
        jax.lax.fori_loop(np.int32(0), np.int32(nv), dof, 0)
        solve_in(io, m, "qacc_smooth", lambda p: io.read("qLD", p), lambda k: io.read("qLDiagInv", k))

    def xla(x):
        bodies = types.SimpleNamespace(**{n: x[n] for n in ("xfrc_applied", "xipos", "subtree_com", "cdof")})
        f = x["qfrc_passive"] - x["qfrc_bias"] + x["qfrc_applied"] + x["qfrc_actuator"]
        f = f + support.xfrc_accumulate(m, bodies)
        return {"qfrc_smooth": f, "qacc_smooth": inertia.solve_factored(m, x["qLD"], x["qLDiagInv"], f)}

    inputs = dict({n: (nv,) for n in _FORCES}, xfrc_applied=(nb, 6), xipos=(nb, 3), subtree_com=(nb, 3),
                  cdof=(nv, 6), qLD=(nm,), qLDiagInv=(nv,))  # fmt: skip
    outputs = {"qfrc_smooth": (nv,), "qacc_smooth": (nv,), "_w": (nb, 6)}
    return launch.Kernel("fwd_acceleration", inputs, outputs, tables, body, xla)


def acceleration(m: Model, d: Data, how: launch.Launch) -> tuple:
    """(qfrc_smooth, qacc_smooth) of fwd_acceleration as one fused kernel (the caller checks `fusable(m)`)."""
    dtype = d.qfrc_bias.dtype
    names = ACCELERATION_INPUTS
    out = launch.call(acceleration_kernel(m), {n: getattr(d, n).astype(dtype) for n in names}, how)
    return out["qfrc_smooth"], out["qacc_smooth"]


# ---- (M + diag(shift))^-1 x: factorisation and solve in one kernel ------------------------------------------


def shifted_tables(m: Model) -> dict:
    """Static tables of `shifted_body`: `plan(m)`, s_qm (each tree entry's flat index in qM as the model lays it
    out) and s_madr."""
    t = support.tables(m)
    qm_addr = np.arange(t.m_rows.size) if inertia.is_sparse(m) else t.m_rows * m.nv + t.m_cols
    return dict(plan(m), s_qm=np.asarray(qm_addr, np.int32), s_madr=np.asarray(t.madr, np.int32))


def shifted_body(io, m: Model, shift, x, y: str) -> None:
    """Output `y` (nv,) <- (M + diag(shift))^-1 x in a kernel body: qM (input) into scratch output `_ld` (the tree
    entries, qLD positions), shift(k) added to each diagonal, factorised in place (1/D into scratch output `_inv`
    (nv,)), x(k) copied into `y` and solved in place; shift, x: functions k -> the lane vector of dof k (tables:
    `shifted_tables`)."""
    nv, nm = m.nv, support.tables(m).m_rows.size

    def entry(e, c):
        io.write("_ld", io.table("f_entry", e), io.read("qM", io.table("s_qm", e)))
        return c

    jax.lax.fori_loop(np.int32(0), np.int32(nm), entry, 0)

    def add(k, c):
        p = io.table("f_diag", k)
        io.write("_ld", p, io.load("_ld", p) + shift(k))
        return c

    jax.lax.fori_loop(np.int32(0), np.int32(nv), add, 0)
    factor_into(io, m, "_ld", "_inv")
    _copy(io, m, x, y)
    solve_in(io, m, y, lambda p: io.load("_ld", p), lambda k: io.load("_inv", k))


def _shifted_kernel(m: Model, d: Data) -> launch.Kernel:
    nv, nm = m.nv, support.tables(m).m_rows.size
    tables = shifted_tables(m)

    def body(io):
        shifted_body(io, m, lambda k: io.read("shift", k), lambda k: io.read("x", k), "y")

    def xla(x):
        return {"y": inertia.solve_shifted(m, d.replace(qM=x["qM"]), x["shift"], x["x"])}

    inputs = {"qM": tuple(qm_shape(m)), "shift": (nv,), "x": (nv,)}
    outputs = {"y": (nv,), "_ld": (nm,), "_inv": (nv,)}
    return launch.Kernel("solve_shifted", inputs, outputs, tables, body, xla)


def solve_shifted(m: Model, d: Data, shift: jax.Array, x: jax.Array, how: launch.Launch) -> jax.Array:
    """(M + diag(shift))^-1 x (x, shift (nv,)) by a factorisation of the shifted qM and a solve, one fused kernel (the
    caller checks `fusable(m)`)."""
    k = _shifted_kernel(m, d)
    dtype = x.dtype
    out = launch.call(k, {"qM": d.qM.astype(dtype), "shift": shift.astype(dtype), "x": x}, how)
    return out["y"]
