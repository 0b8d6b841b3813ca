"""MuJoCo 4.0's PGS (solver/pgs.py, the dual method) as one fused kernel: for a block of environments, from the
warm start to the last sweep, in one launch.

Per environment, inside the kernel (every value a lane vector; the environments of a block sweep their own,
shuffled, block orders in step):
  the dual problem: M^-1 J' by the tree L'DL solve of kernels/factor.py (qLD, qLDiagInv of the step's factorisation),
          AR = J M^-1 J' + diag(R) (nefc x nefc, scratch), b = J qacc_smooth - aref (efc_b);
  the start: the force law at qacc_warmstart (kernels/primal.py's `row_law` and `cone_law`), zero where its dual cost
          is positive (MuJoCo's rule), or zero without the warm start;
  each sweep (solver/pgs.py's `solve_pgs` on the whole system): Nesterov's extrapolation projected onto the constraint
          set (`pgs.project_ellipsoid` for the elliptic cones), the PCG32 Fisher-Yates shuffle of the live blocks
          (`pgs.pcg32_next`; each lane its own generator and order, swapped with per-lane gathers and scatters,
          `IO.load_at` / `IO.write_at`), then every live block in that order: its residual AR f + b and rows of AR
          gathered at the lane's rows, and `pgs.block_update` (the XLA path's function: the scalar row's 1-D
          minimum and constraint, the elliptic contact's normal or ray update and QCQP) -- the elliptic part only
          when some lane of the block visits an elliptic contact; then the restart test and the stopping test;
  the end: qacc = qacc_smooth + M^-1 J' f, jar = J qacc - aref, J' f.
The sweep loop runs while any lane of the block is not done, bounded by opt.iterations; a lane that is done keeps
its values (the XLA solver's rule), so solver_niter is per environment. The block order's start (MuJoCo's efc order
of the live blocks, `pgs.initial_order` of `pgs_order.block_keys`: a sort) is computed by XLA before the kernel, as
the rows' dual states (`noslip.dual_state`) after it.

The fused path solves the whole system, as MuJoCo with `<flag island="disable"/>` (the XLA path solves each island
on its own by default). Derivatives: under `Config.gradients="implicit"` the solver's custom_vjp (the optimality
condition at the returned qacc, solver/solve.py) wraps the kernel; under "unrolled" the kernel's custom_jvp runs
the XLA PGS (kernels/launch.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import inertia, support
from mjx_lite.pipeline.kernels import factor, launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.pipeline.kernels.primal import _any, _loop, _problem, cone_law, row_law, trace_scale
from mjx_lite.solver import common, pgs
from mjx_lite.types import Model, SolverType

__all__ = ["fusable", "solve"]


def fusable(m: Model, layout: common.Layout, sparse_j: bool) -> bool:
    """Static: the model's solver is PGS with the dense efc_J and the tree factorisation (whose solve gives M^-1 J'
    in the kernel)."""
    if int(m.opt.solver) != int(SolverType.PGS) or sparse_j:
        return False
    return m.nv > 0 and layout.nefc > 0 and factor.fusable(m)


def _tables(m: Model, layout: common.Layout) -> dict:
    """Static int32 tables: the rows' kinds, each block's first row, dim and first row's kind (`pgs.block_rows`),
    each elliptic contact's first row, qM's diagonal (tree-sparse qM) and the factor's tables."""
    rows, dims = pgs.block_rows(layout)
    kind = np.asarray(layout.kind)
    tab = {"kind": kind, "blk_row": rows[:, 0], "blk_dim": dims, "blk_kind": kind[rows[:, 0]]}
    for g, r in enumerate(layout.cones):
        tab[f"cone{g}"] = np.asarray(r)[:, 0]
    if layout.mass is not None:
        tab.update(tm_diag=layout.mass.diag)
    tab.update(factor.plan(m))
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def _body(m: Model, layout: common.Layout, iterations: int, warm: bool):
    nv, nefc = m.nv, layout.nefc
    kinds = set(np.asarray(layout.kind).tolist())
    has = (common.INEQUALITY in kinds, common.FRICTION in kinds, common.EQUALITY in kinds)
    rows_s, _ = pgs.block_rows(layout)
    nb, dmax = rows_s.shape
    nfr = dmax - 1
    dims = pgs.dims_present(layout)
    cones = [(g, int(np.shape(r)[1]), int(np.shape(r)[0])) for g, r in enumerate(layout.cones)]

    def body(io):
        zero = io.lanes(0.0)
        valid = io.valid()
        tol = io.read("tolerance", 0)
        scale = trace_scale(io, nv, layout.mass is not None)

        def J(r, i):
            return io.read("J", r * nv + i)

        def dot(a, b, n):
            return _loop(0, n, lambda i, s: s + a(i) * b(i), zero)

        def fl_of(r):
            return io.read("frictionloss", r) if has[1] else zero

        # ---- the dual problem: _MJ = (M^-1 J')' row by row, _AR = J M^-1 J' + diag(R), efc_b = J qacc_smooth - aref
        def minv_row(r):
            _loop(0, nv, lambda i: io.write("_v", i, J(r, i)))
            factor.solve_in(io, m, "_v", lambda p: io.read("qLD", p), lambda k: io.read("qLDiagInv", k))
            _loop(0, nv, lambda i: io.write("_MJ", r * nv + i, io.load("_v", i)))

        _loop(0, nefc, minv_row)

        def ar_row(r):
            def entry(s):
                v = dot(lambda i: J(r, i), lambda i: io.load("_MJ", s * nv + i), nv)
                io.write("_AR", r * nefc + s, v + where(s == r, io.read("R", r), 0.0, io.dtype))

            _loop(0, nefc, entry)
            io.write("efc_b", r, dot(lambda i: J(r, i), lambda i: io.read("qacc_smooth", i), nv) - io.read("aref", r))

        _loop(0, nefc, ar_row)

        # ---- the start: the force law at the warm start (masked rows zero), zero when its dual cost is positive
        if warm:
            _loop(0, nefc, lambda r: io.write("jar", r, dot(lambda i: J(r, i), lambda i: io.read("qacc_warmstart", i),
                                                            nv) - io.read("aref", r)))  # fmt: skip

            def row_force(r):
                x = io.load("jar", r)
                f = row_law(x, io.read("D", r), io.table("kind", r), lambda: (fl_of(r), io.read("R", r)), has, zero)[1]
                io.write("force", r, where(io.read("mask", r) > 0.5, f, 0.0))

            _loop(0, nefc, row_force)
            for g, dim, k in cones:

                def cone_force(c, g=g, dim=dim):
                    r0 = io.table(f"cone{g}", c)
                    x = [io.load("jar", r0 + i) for i in range(dim)]
                    D = [io.read("D", r0 + i) for i in range(dim)]
                    fric = [io.read(f"cone_fric{g}", c * (dim - 1) + i) for i in range(dim - 1)]
                    force = cone_law(x, D, io.read(f"cone_mu{g}", c), fric)[1]
                    live = io.read("mask", r0) > 0.5
                    for i in range(dim):
                        io.write("force", r0 + i, where(live, force[i], 0.0))

                _loop(0, k, cone_force)

            def dual(r, s):
                f = io.load("force", r)
                af = dot(lambda t: io.load("_AR", r * nefc + t), lambda t: io.load("force", t), nefc)
                return s + f * (0.5 * af + io.load("efc_b", r))

            cold = _loop(0, nefc, dual, zero) > 0
            _loop(0, nefc, lambda r: io.write("force", r, where(cold, 0.0, io.load("force", r))))
        else:
            _loop(0, nefc, lambda r: io.write("force", r, zero))
        _loop(0, nefc, lambda r: (io.write("_fprev", r, io.load("force", r))))
        _loop(0, nb, lambda b: io.write("_order", b, io.read("order0", b)))
        n_live = io.lanes(io.read("n_live", 0)).astype(jp.int32)

        # ---- the projection onto the constraint set (pgs.project), in place in _fmom
        def project():
            def row(r):
                v, kind = io.load("_fmom", r), io.table("kind", r)
                if has[1]:
                    fl = fl_of(r)
                    v = where(kind == common.FRICTION, jp.clip(v, -fl, fl), v)
                if has[0]:
                    v = where(kind == common.INEQUALITY, jp.maximum(v, 0.0), v)
                io.write("_fmom", r, v)

            _loop(0, nefc, row)
            for g, dim, k in cones:

                def cone(c, g=g, dim=dim):
                    r0 = io.table(f"cone{g}", c)
                    n = io.load("_fmom", r0)
                    fr = [io.lanes(io.read(f"cone_fric{g}", c * (dim - 1) + i)) for i in range(dim - 1)]
                    t = pgs.project_ellipsoid([io.load("_fmom", r0 + 1 + i) for i in range(dim - 1)], n, fr,
                                              [f > 0 for f in fr], True)  # fmt: skip
                    for i, v in enumerate([n] + t):
                        io.write("_fmom", r0 + i, where(n < 0, 0.0, v))

                _loop(0, k, cone)

        # ---- the shuffle of each lane's live blocks (pgs.shuffle: Fisher-Yates, PCG32)
        def shuffle(active, state):
            def step(t, state):
                i = n_live - 1 - t
                run = active & (i >= 1)
                new_state, r = pgs.pcg32_next(state)
                j = (r % jp.maximum(i + 1, 1).astype(jp.uint32)).astype(jp.int32)
                ii = jp.maximum(i, 0)
                oi, oj = io.load_at("_order", ii), io.load_at("_order", j)
                io.write_at("_order", ii, where(run, oj, oi))
                io.write_at("_order", j, where(run, oi, io.load_at("_order", j)))
                return tuple(where(run, a, b) for a, b in zip(new_state, state))

            return _loop(0, nb - 1, step, state) if nb > 1 else state

        # ---- one block of the sweep (pgs.block_update at the lane's block)
        def update(bi, improvement, active):
            blk = io.load("_order", bi).astype(jp.int32)
            run = active & (bi < n_live)
            r0 = io.table_at("blk_row", blk)
            kind0 = io.table_at("blk_kind", blk)
            fric = [io.gather("blk_fric", blk * nfr + i) for i in range(nfr)]
            vm = [run | ~run] + [f > 0 for f in fric]
            adim = 1
            for f in fric:
                adim = adim + where(f > 0, 1, 0)
            ell = adim > 1
            rows = [jp.minimum(r0 + i, nefc - 1) for i in range(dmax)]
            fl0 = io.gather("frictionloss", r0) if has[1] else zero

            def residual(n):
                """AR f + b at the block's first n rows (0 at rows it does not have)."""
                def acc(s, a):
                    f = io.load("force", s)
                    return tuple(a[i] + io.load_at("_AR", rows[i] * nefc + s) * f for i in range(n))

                res = _loop(0, nefc, acc, (zero,) * n)
                return [where(vm[i], res[i] + io.load_at("efc_b", rows[i]), 0.0) for i in range(n)]

            def block(n):
                """(new force (dmax), cost change) from the block's first n rows (n = 1: scalar blocks only)."""
                res = residual(n)
                old = [where(vm[i], io.load_at("force", rows[i]), 0.0) for i in range(n)]
                A = [[where(vm[i] & vm[j], io.load_at("_AR", rows[i] * nefc + rows[j]), 0.0) for j in range(n)]
                     for i in range(n)]  # fmt: skip
                new, change = pgs.block_update(res, old, A, vm[:n], kind0, fl0, ell, fric[: n - 1], adim, dims)
                return tuple(new) + (zero,) * (dmax - n), change

            if nfr:
                out = jax.lax.cond(_any(run & ell), lambda: block(dmax), lambda: block(1))
            else:
                out = block(1)
            new, change = out
            for i in range(dmax):
                cur = io.load_at("force", rows[i])
                io.write_at("force", rows[i], where(run & vm[i], new[i], cur))
            return improvement - where(run, change, 0.0)

        # ---- the sweeps
        def sweep(c):
            it, done, k, hi, lo, niter, improvement = c
            active = ~done
            beta = where(it > 0, (k - 1.0) / (k + 2.0), 0.0)
            mom = (beta > 0) & active

            def extrapolate(r):
                f, fp = io.load("force", r), io.load("_fprev", r)
                io.write("_fmom", r, f + beta * (f - fp))
                io.write("_fprev", r, where(active, f, fp))

            _loop(0, nefc, extrapolate)
            project()

            def momentum(r):
                f = where(mom, io.load("_fmom", r), io.load("force", r))
                io.write("force", r, f)
                io.write("_fmom", r, f)

            _loop(0, nefc, momentum)
            hi, lo = shuffle(active, (hi, lo))
            imp = _loop(0, nb, lambda bi, acc: update(bi, acc, active), zero) * scale

            def restart_dot(r, s):
                f, fm, fp = io.load("force", r), io.load("_fmom", r), io.load("_fprev", r)
                return s + (f - fm) * (fm - fp)

            restart = (it > 0) & (_loop(0, nefc, restart_dot, zero) < 0)
            k = where(active, where(restart, 0.0, k + 1.0), k)
            return (it + 1, done | (active & (imp < tol)), k, hi, lo, niter + where(active, 1.0, 0.0, io.dtype),
                    where(active, imp, improvement))  # fmt: skip

        done0 = zero > 0 if valid is None else ~valid
        seed = pgs.pcg32_seed()
        c = (np.int32(0), done0, zero, jp.broadcast_to(seed[0], (io.block,)), jp.broadcast_to(seed[1], (io.block,)),
             zero, zero)  # fmt: skip
        if iterations:
            c = jax.lax.while_loop(lambda c: (c[0] < iterations) & _any(~c[1]), sweep, c)
        io.write("stats", 0, c[5])
        io.write("stats", 1, c[6])

        # ---- the end: qacc = qacc_smooth + M^-1 J' f, jar = J qacc - aref, J' f
        def dof(i):
            io.write("qacc", i, io.read("qacc_smooth", i) + dot(lambda r: io.load("_MJ", r * nv + i),
                                                                 lambda r: io.load("force", r), nefc))  # fmt: skip
            io.write("jtf", i, dot(lambda r: J(r, i), lambda r: io.load("force", r), nefc))

        _loop(0, nv, dof)
        _loop(0, nefc, lambda r: io.write("jar", r, dot(lambda i: J(r, i), lambda i: io.load("qacc", i), nv)
                                          - io.read("aref", r)))  # fmt: skip

    return body


def kernel(m: Model, layout: common.Layout, p: common.Problem, kw: dict, warm: bool) -> tuple[launch.Kernel, dict]:
    """PGS as a `launch.Kernel` (one environment's shapes) and its problem inputs (qLD, qLDiagInv, the block order's
    start and qacc_warmstart are added by `solve`). kw: iterations (static), tolerance, early_exit (the twin's)."""
    nv, nefc = m.nv, layout.nefc
    rows_s, _ = pgs.block_rows(layout)
    nb, dmax = rows_s.shape
    kinds = set(np.asarray(layout.kind).tolist())
    x = dict(J=p.J, D=p.D, R=p.R, mask=p.mask, qacc_smooth=p.qacc_smooth, M=p.M, aref=p.aref)
    if common.FRICTION in kinds:
        x.update(frictionloss=p.frictionloss)
    for g in range(len(layout.cones)):
        x.update({f"cone_mu{g}": p.cone_mu[g], f"cone_fric{g}": p.cone_friction[g]})
    if dmax > 1:
        x.update(blk_fric=pgs.block_friction(layout, p.cone_friction, p.D.dtype))
    x.update(tolerance=kw["tolerance"])
    iterations = int(kw["iterations"])

    def xla(x):
        prob = _problem(x)
        minv = lambda v: inertia.solve_factored(m, x["qLD"], x["qLDiagInv"], v)  # noqa: E731
        if warm:
            force0 = common.eval_constraints(layout, prob, common.p_j_mul(prob, x["qacc_warmstart"]) - prob.aref).force
        else:
            force0 = jp.zeros_like(prob.D)
        order = (x["order0"].astype(jp.int32), x["n_live"][0].astype(jp.int32))
        force, qacc, niter, improvement = pgs.solve_pgs(layout, prob, force0, iterations=iterations,
                                                        tolerance=x["tolerance"], minv=minv,
                                                        early_exit=kw["early_exit"], order=order)  # fmt: skip
        stats = jp.stack([niter.astype(qacc.dtype), jp.asarray(improvement, qacc.dtype)])
        return {"qacc": qacc, "force": force, "efc_b": common.p_j_mul(prob, prob.qacc_smooth) - prob.aref,
                "jar": common.p_j_mul(prob, qacc) - prob.aref, "jtf": common.p_jt_mul(prob, force), "stats": stats}

    inputs = {n: tuple(jp.shape(v)) for n, v in x.items()}
    inputs.update(qLD=(support.tables(m).m_rows.size,), qLDiagInv=(nv,), order0=(nb,), n_live=(1,))
    if warm:
        inputs.update(qacc_warmstart=(nv,))
    outputs = {"qacc": (nv,), "force": (nefc,), "efc_b": (nefc,), "jar": (nefc,), "jtf": (nv,), "stats": (2,),
               "_MJ": (nefc * nv,), "_AR": (nefc * nefc,), "_v": (nv,), "_fprev": (nefc,), "_fmom": (nefc,),
               "_order": (nb,)}  # fmt: skip
    k = launch.Kernel("solve_pgs", inputs, outputs, _tables(m, layout), _body(m, layout, iterations, warm), xla)
    return k, x


def solve(m: Model, layout: common.Layout, p: common.Problem, qacc_warmstart: jax.Array | None, block_key: tuple,
          factors: tuple, kw: dict, how: launch.Launch):  # fmt: skip
    """MuJoCo 4.0's PGS on the whole system (the caller checks `fusable`) as one fused kernel.

    qacc_warmstart: (nv,) (the start: the force law there, unless its dual cost is positive) or None (a cold start);
    block_key: `pgs_order.block_keys` (MuJoCo's efc order of the blocks); factors: (qLD, qLDiagInv) of M; kw:
    iterations, tolerance, early_exit. Returns (efc_force (nefc,), qacc (nv,), jar (nefc,), J' force (nv,), niter ()
    int32, improvement (), efc_b = J qacc_smooth - aref (nefc,)).
    """
    warm = qacc_warmstart is not None
    k, x = kernel(m, layout, p, kw, warm)
    dtype = p.qacc_smooth.dtype
    order0, n_live = pgs.initial_order(layout, p.mask, block_key)
    x.update(qLD=factors[0], qLDiagInv=factors[1], order0=order0, n_live=jp.reshape(n_live, (1,)))
    if warm:
        x.update(qacc_warmstart=qacc_warmstart)
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    stats = out["stats"]
    niter = jax.lax.stop_gradient(stats[0]).astype(jp.int32)
    return out["force"], out["qacc"], out["jar"], out["jtf"], niter, stats[1], out["efc_b"]
