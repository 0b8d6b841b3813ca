"""Newton's constraint solver as one fused kernel whose work inside an environment is spread over the threads of a
program: `Launch(dof_tile=E)`, E environments per program, every per-environment quantity a tile.

kernels/primal.py runs one environment per thread (lanes = environments) and does each environment's O(rows nv^2)
work serially in that thread; on a GPU that left the solver latency-bound (docs/kernels.md, Status). Here a program
holds E environments as tiles that Triton distributes over its threads: dof vectors (E, NVP), row vectors (E, NEP),
J (E, NEP, NVP) and the Hessian (E, NVP, NVP), NVP and NEP the powers of two >= nv and nefc (Triton's tensor
sizes; the padding is zero: padded rows are masked off, padded dofs have zero J columns and M entries and are
never pivots). Per Newton iteration:
  Hessian:   H = M + J' diag(h) J: with one environment per program (dof_tile=1) and tiles of at least 16, one
             matrix product (tl.dot, `Launch.hessian`); else sum_r h_r J_r J_r' as nefc rank-1 updates of the
             (E, NVP, NVP) tile (row r of J read from the block by a dynamic slice, h_r taken out of the row vector
             by a masked sum);
  Cholesky:  nv right-looking steps over the whole tile: row k of the reduced matrix (a masked sum), its pivot
             clamped below MINVAL as `linalg.cholesky_upper`, row k of U = row / sqrt(pivot), then the trailing
             block minus u u' (Triton has no dynamic indexing of a value: rows and entries are selected with
             where(iota == k) and a sum);
  solves:    U' y = grad by nv column steps, U x = y by nv row steps (the same selections);
  rows:      the cost, force and curvature of all rows at once ((E, NEP) elementwise), J s and J' f as tile
             products with a reduction over the dof or row axis, M s over the dense (E, NVP, NVP) M;
  cones:     elliptic contacts per cone dimension as (E, KP) tiles, row i of each contact selected from a row
             vector by a masked sum against its first row (a table), kernels/primal.py's `cone_law` elementwise,
             forces and states spread back to the rows; the Hessian adds Jc' Hc Jc per contact (a loop over the
             contacts: dim rank-1 updates of J's rows read by a dynamic slice), the line search Js_c' Hc Js_c.
The line search, the stopping tests, the start (the warm start's choice) and the rows' final states are
kernels/primal.py's (solver/primal.py's and solver/common.py's formulas), vectorised over rows and dofs: only
summation orders differ (round-off). The loops over iterations are `while` loops that run while an environment
of the program is not done, bounded by opt.iterations / opt.ls_iterations; an environment that is done keeps
its values.

Work per thread (an estimate, not a measurement; 4 warps = 128 threads, E = 1, the MJX humanoid: nv = 27, nefc = 53,
so NVP = 32, NEP = 64), per Newton iteration: the Hessian's tl.dot is 32 x 64 x 32 multiply-adds, 512 per thread
(rank-1 instead: nefc steps of 8 multiply-adds and a 64-wide masked sum per thread); the Cholesky and the two solves
3 nv steps of ~10-20 elementwise operations per thread and 2-3 block-wide reductions each; J s, J' f: 16 products
per thread and a reduction; each line-search step 64 rows' formulas spread over the threads. kernels/primal.py does
per thread (its environment), serially: nefc nv (nv + 1) / 2 ~ 20k multiply-adds and ~60k global loads for the
Hessian, nv^3 / 6 ~ 3k for the Cholesky. The tiled kernel trades that for ~200 reductions (barriers) per iteration;
which wins on a GPU is to be measured (benchmarks/gpu_ab.py's "fused, tiled solver" variants).

Inputs are kernels/primal.py's (its XLA twin is this kernel's: derivatives and the unrolled gradients are
unchanged); the launcher (`_launch`, `launch.Kernel.launcher`) pads them into tiles, makes a tree-sparse qM dense
and pads the batch to whole programs (padded environments: zero problems, done at the start). Newton only: CG
(its tree L'DL preconditioner) keeps kernels/primal.py.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import primal as lane_primal
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.solver import common
from mjx_lite.solver import primal as xla_primal
from mjx_lite.types import MINVAL, Model, SolverType

__all__ = ["fusable", "solve"]

# the row inputs (E, NEP) and dof inputs (E, NVP) of the tiles, in the kernel's argument order
_ROWS = ("D", "mask", "aref", "R", "frictionloss")
_DOFS = ("qacc_smooth", "qacc_warmstart")


def _hessian_dot(eb: int, nep: int, nvp: int, hessian: str) -> bool:
    """Newton's Hessian J' diag(h) J as one matrix product per environment (`launch.Launch.hessian`)."""
    fits = eb == 1 and nep >= 16 and nvp >= 16
    if hessian == "dot" and not fits:
        raise ValueError(f"Launch.hessian='dot' needs dof_tile=1 and 16 x 16 tiles, got {eb}, {nep}, {nvp}")
    return fits and hessian in ("dot", "auto")


def fusable(m: Model, layout: common.Layout, sparse_j: bool) -> bool:
    """Static: kernels/primal.py's solver kernel applies and the solver is Newton (CG keeps the lane kernel)."""
    return lane_primal.fusable(m, layout, sparse_j) and int(m.opt.solver) == int(SolverType.NEWTON)


def _pow2(n: int) -> int:
    return int(pl.next_power_of_2(max(1, n)))


def _any(flags) -> jax.Array:
    """Scalar: any environment of the program is set (bool (E,))."""
    return jp.max(where(flags, 1, 0).astype(jp.int32)) > 0


def _loop(lo: int, hi: int, fn, init):
    return jax.lax.fori_loop(np.int32(lo), np.int32(hi), fn, init)


def _body(nv: int, nefc: int, kinds: set, iterations: int, ls_iterations: int, warm: bool, names: tuple,
          hessian_mode: str, cones: tuple = ()):  # fmt: skip
    """The kernel body over refs (inputs in `names` order, then kind, then the outputs). cones: (count, dim) of each
    group of elliptic contacts (inputs cone{g}: first rows (KP,), cone_mu{g} (E, KP), cone_fric{g} (E, F, KP))."""
    has_eq, has_fr, has_iq = common.EQUALITY in kinds, common.FRICTION in kinds, common.INEQUALITY in kinds

    def body(*refs):
        ins = dict(zip(names, refs[: len(names)]))
        kind_ref = refs[len(names)]
        o_qacc, o_jtf, o_jar, o_force, o_efcb, o_state, o_stats = refs[len(names) + 1 :]
        J_ref = ins["J"]
        eb, nep, nvp = J_ref.shape
        dt = J_ref.dtype
        cv = jax.lax.broadcasted_iota(jp.int32, (1, nvp), 1)  # dof index of a dof vector's entries
        ri = jax.lax.broadcasted_iota(jp.int32, (1, nvp, 1), 1)  # row index of a matrix tile's entries
        kind = kind_ref[...][None, :]  # (1, NEP)
        D, mask = ins["D"][...], ins["mask"][...] > 0.5
        aref = ins["aref"][...]
        qs = ins["qacc_smooth"][...]
        M = ins["M"][...]  # (E, NVP, NVP) dense
        consts = ins["consts"][...]  # (E, 4): tolerance, ls_tolerance, (unused), (unused)

        def col(a, k):  # entry k of the last axis, (E, ...)
            return jp.sum(where(jax.lax.broadcasted_iota(jp.int32, a.shape, a.ndim - 1) == k, a, 0.0), axis=-1)

        tol, gtol = col(consts, 0), col(consts, 0) * col(consts, 1)
        # MuJoCo 4.0's scale of the stopping tests: 1 / trace(M) of each environment's mass matrix (E,)
        diag = ri == cv[:, None, :]  # (1, NVP, NVP)
        scale = 1.0 / jp.maximum(MINVAL, jp.sum(jp.sum(where(diag, M, 0.0), axis=2), axis=1))

        def vdot(a, b):  # (E,)
            return jp.sum(a * b, axis=-1)

        def jmul(x):  # J x: (E, NEP)
            return jp.sum(J_ref[...] * x[:, None, :], axis=2)

        def jtmul(f):  # J' f: (E, NVP)
            return jp.sum(J_ref[...] * f[:, :, None], axis=1)

        def mmul(x):  # M x: (E, NVP)
            return jp.sum(M * x[:, None, :], axis=2)

        # the elliptic contacts of group g: sel[g][i] (1, NEP, KP) selects row i of each contact (padded contacts
        # select nothing: their first row is -NEP), a row vector's entries at those rows are (E, KP)
        rows_iota = jax.lax.broadcasted_iota(jp.int32, (1, nep, 1), 1)
        sel = [[rows_iota == ins[f"cone{g}"][...][None, None, :] + i for i in range(dim)]
               for g, (_, dim) in enumerate(cones)]  # fmt: skip

        def comp(v, s):  # (E, NEP) -> (E, KP): the entries at the selected rows
            return jp.sum(where(s, v[:, :, None], 0.0), axis=1)

        def spread(v, s):  # (E, KP) -> (E, NEP): the contacts' values at their selected rows, 0 elsewhere
            return jp.sum(where(s, v[:, None, :], 0.0), axis=2)

        maskf = where(mask, 1.0, 0.0, dt)

        def cone_eval(x):
            """The elliptic contacts at jar x (E, NEP): (cost per row (on each contact's first row), force, state
            (on its rows, before the rows' mask), Hessians: per group the dim x dim nested lists of (E, KP))."""
            cost, force, state, hess = jp.zeros_like(x), jp.zeros_like(x), jp.zeros_like(x), []
            for g, (_, dim) in enumerate(cones):
                sg = sel[g]
                fr = ins[f"cone_fric{g}"]
                c, f, h, st = lane_primal.cone_law([comp(x, sg[i]) for i in range(dim)],
                                                   [comp(D, sg[i]) for i in range(dim)], ins[f"cone_mu{g}"][...],
                                                   [fr[:, i, :] for i in range(dim - 1)])  # fmt: skip
                live = comp(maskf, sg[0]) > 0.5
                cost = cost + spread(where(live, c, 0.0), sg[0])
                for i in range(dim):
                    force = force + spread(where(live, f[i], 0.0), sg[i])
                    state = state + spread(st, sg[i])
                hess.append([[where(live, v, 0.0) for v in hr] for hr in h])
            return cost, force, state, hess

        def row_eval(x, with_state=False):
            """(cost, force, curvature) of all rows at jar x (E, NEP) (solver/common.py's eval_constraints), and
            the ConstraintState (a float) when with_state; with elliptic contacts, the curvature is (the scalar rows'
            (E, NEP), the cones' Hessians (`cone_eval`))."""
            cost, force, h, state = lane_primal.row_law(
                x, D, kind, lambda: (ins["frictionloss"][...], ins["R"][...]), (has_iq, has_fr, has_eq),
                jp.zeros_like(x))  # fmt: skip
            if cones:
                c_cost, c_force, c_state, c_hess = cone_eval(x)
                cost, force, state = cost + c_cost, force + c_force, state + c_state
            out = where(mask, cost, 0.0), where(mask, force, 0.0), where(mask, h, 0.0)
            if cones:
                out = out[:2] + ((out[2], c_hess),)
            return out + (where(mask, state, 0.0),) if with_state else out

        def evaluate(qacc, Ma, jar):
            """(cost (E,), force, h (E, NEP), jtf, grad (E, NVP)) at the point."""
            cr, force, h = row_eval(jar)
            jtf = jtmul(force)
            cost = 0.5 * vdot(qacc - qs, Ma) + jp.sum(cr, axis=1)
            return cost, force, h, jtf, Ma - jtf

        def gnorm(grad, Ma, jtf):
            """kernels/primal.py's gnorm: (scaled gradient norm, the gradient test's tolerance), (E,) each."""
            g = scale * jp.sqrt(vdot(grad, grad))
            terms = jp.sqrt(vdot(Ma, Ma)) + jp.sqrt(vdot(jtf, jtf))
            floor = xla_primal.GRAD_FLOOR * jp.finfo(dt).eps * scale * terms
            return g, jp.maximum(tol, floor)

        # ---- Newton's direction ---------------------------------------------------------------------------------
        def hessian(h):
            """M + J' diag(h) J (E, NVP, NVP): one (NVP, NEP) x (NEP, NVP) product (`Launch.hessian`), or nefc rank-1
            updates; with elliptic contacts (h = (rows' curvature, cones' Hessians)), plus Jc' Hc Jc per contact."""
            if not cones:
                return _hessian_rows(h)
            h, c_hess = h
            H = _hessian_rows(h)
            for g, (k, dim) in enumerate(cones):
                r0s = ins[f"cone{g}"][...]
                hg = c_hess[g]
                kp_iota = jax.lax.broadcasted_iota(jp.int32, (1, r0s.shape[0]), 1)

                def contact(c, H, r0s=r0s, hg=hg, dim=dim, kp_iota=kp_iota):
                    r0 = jp.sum(where(kp_iota[0] == c, r0s, 0))
                    Jc = [J_ref[:, pl.ds(r0 + i, 1), :][:, 0, :] for i in range(dim)]  # (E, NVP) each
                    sc = kp_iota == c
                    hc = [[jp.sum(where(sc, hg[i][j], 0.0), axis=1)[:, None] for j in range(dim)] for i in range(dim)]
                    for i in range(dim):
                        w = hc[i][0] * Jc[0]
                        for j in range(1, dim):
                            w = w + hc[i][j] * Jc[j]
                        H = H + Jc[i][:, :, None] * w[:, None, :]
                    return H

                H = _loop(0, k, contact, H)
            return H

        def _hessian_rows(h):
            if _hessian_dot(eb, nep, nvp, hessian_mode):
                J2 = J_ref[0]  # (NEP, NVP): the program's one environment
                hJ = J2 * jp.sum(h, axis=0)[:, None]
                H = jax.lax.dot_general(hJ, J2, (((0,), (0,)), ((), ())), precision=jax.lax.Precision.HIGHEST,
                                        preferred_element_type=dt)  # fmt: skip
                return M + H[None]

            def row(r, H):
                jr = J_ref[:, pl.ds(r, 1), :][:, 0, :]  # (E, NVP)
                a = jr * col(h, r)[:, None]  # h_r J_r, (E, NVP)
                return H + a[:, :, None] * jr[:, None, :]

            return _loop(0, nefc, row, M)

        def cholesky(A):
            """U (rows k of the tile, upper) with A = U' U: nv right-looking steps, pivots below MINVAL clamped."""

            def step(k, A):
                rowk = jp.sum(where(ri == k, A, 0.0), axis=1)  # (E, NVP)
                p = col(rowk, k)
                d = jp.sqrt(where(p < MINVAL, MINVAL, p))
                u = where(cv > k, rowk / d[:, None], 0.0)
                urow = where(cv == k, d[:, None], u)
                return where(ri == k, urow[:, None, :], A - u[:, :, None] * u[:, None, :])

            return _loop(0, nv, step, A)

        def direction(U, grad):
            """-(U' U)^-1 grad (E, NVP)."""

            def fwd(k, s):  # U' y = grad: s holds y below k and the reduced right-hand side from k on
                rowk = jp.sum(where(ri == k, U, 0.0), axis=1)
                yk = col(s, k) / col(rowk, k)
                return where(cv == k, yk[:, None], s - where(cv > k, rowk * yk[:, None], 0.0))

            def back(t, s):  # U x = y, from the last row
                i = nv - 1 - t
                rowi = jp.sum(where(ri == i, U, 0.0), axis=1)
                xi = (col(s, i) - jp.sum(where(cv > i, rowi * s, 0.0), axis=1)) / col(rowi, i)
                return where(cv == i, xi[:, None], s)

            return -_loop(0, nv, back, _loop(0, nv, fwd, grad))

        # ---- the exact line search (common.line_search) ----------------------------------------------------------
        def line_search(search, Ma, jar, skip):
            """(alpha (E,), 0 where the direction does not descend; J s; M s)."""
            Js, Ms = jmul(search), mmul(search)
            s_ms, g0 = vdot(search, Ms), vdot(search, Ma)
            ltol = gtol * jp.sqrt(jp.maximum(vdot(search, search), 0.0)) / scale

            js_c = [[comp(Js, s) for s in sg] for sg in sel]

            def derivs(alpha):
                _, f, h = row_eval(jar + alpha[:, None] * Js)
                if not cones:
                    return g0 + alpha * s_ms - jp.sum(Js * f, axis=1), s_ms + jp.sum(h * Js * Js, axis=1)
                h, c_hess = h
                q = jp.sum(h * Js * Js, axis=1)
                for js, hg in zip(js_c, c_hess):  # Js_c' Hc Js_c per contact
                    dim = len(js)
                    for i in range(dim):
                        hv = hg[i][0] * js[0]
                        for j in range(1, dim):
                            hv = hv + hg[i][j] * js[j]
                        q = q + jp.sum(js[i] * hv, axis=1)
                return g0 + alpha * s_ms - jp.sum(Js * f, axis=1), s_ms + q

            d1, d2 = derivs(jp.zeros_like(g0))
            descent = d1 < 0
            alpha0 = where(descent, -d1 / where(d2 > 0, d2, 1.0), 0.0)

            def step(c):
                it, alpha, lo, hi, done = c
                d1, d2 = derivs(alpha)
                return (it + 1, *common.line_search_update(alpha, lo, hi, done, d1, d2, ltol))

            if ls_iterations:
                init = (np.int32(0), alpha0, jp.zeros_like(g0), jp.full_like(g0, jp.inf), ~descent | skip)
                alpha0 = jax.lax.while_loop(lambda c: (c[0] < ls_iterations) & _any(~c[4]), step, init)[1]
            return where(descent, alpha0, 0.0), Js, Ms

        # ---- the start (common.solver_start) ---------------------------------------------------------------------
        efc_b = jmul(qs) - aref
        qacc, Ma, jar = qs, jp.zeros_like(qs), efc_b
        if warm:
            qw = ins["qacc_warmstart"][...]
            jar_w = jmul(qw) - aref
            Ma_w = mmul(qw - qs)
            c_ws = 0.5 * vdot(qw - qs, Ma_w) + jp.sum(row_eval(jar_w)[0], axis=1)
            ws = (c_ws < jp.sum(row_eval(efc_b)[0], axis=1))[:, None]
            qacc, Ma, jar = where(ws, qw, qs), where(ws, Ma_w, 0.0), where(ws, jar_w, efc_b)

        # ---- the solver ------------------------------------------------------------------------------------------
        cost, force, h, jtf, grad = evaluate(qacc, Ma, jar)
        g0, g0tol = gnorm(grad, Ma, jtf)
        zero = jp.zeros_like(g0)

        def newton_step(h, grad):
            """(-H^-1 grad at the point whose curvature is h, its Newton decrement 0.5 scale grad' H^-1 grad (E,),
            clamped at 0): kernels/primal.py's newton_step, for the next iteration and a stopping test."""
            search = direction(cholesky(hessian(h)), grad)
            return search, jp.maximum(-0.5 * scale * vdot(grad, search), 0.0)

        def iteration(c):
            it, done, cost, niter, improvement, grad_norm, qacc, Ma, jar, force, h, jtf, grad, search = c
            alpha, Js, Ms = line_search(search, Ma, jar, done)
            a, keep = alpha[:, None], done[:, None]
            qacc = where(keep, qacc, qacc + a * search)
            Ma = where(keep, Ma, Ma + a * Ms)
            jar = where(keep, jar, jar + a * Js)
            cost_n, force, h, jtf, grad = evaluate(qacc, Ma, jar)
            gn, gtol_n = gnorm(grad, Ma, jtf)
            imp = scale * (cost - cost_n)
            # the next direction from the Hessian at the new point (done environments: their point's, unchanged)
            search, dec = newton_step(h, grad)
            conv = (imp < tol) | (gn < gtol_n) | (dec < tol)
            return (it + 1, done | conv, where(done, cost, cost_n), niter + where(done, 0.0, 1.0, dt),
                    where(done, improvement, imp), where(done, grad_norm, gn), qacc, Ma, jar, force, h, jtf,
                    grad, search)  # fmt: skip

        # the start is done on the gradient test and the decrement (at most MuJoCo's duality gap): solver/primal.py
        search0, dec0 = newton_step(h, grad)
        c = (np.int32(0), (g0 < g0tol) & (dec0 < tol), cost, zero, zero, g0, qacc, Ma, jar, force, h, jtf, grad,
             search0)  # fmt: skip
        if iterations:
            c = jax.lax.while_loop(lambda c: (c[0] < iterations) & _any(~c[1]), iteration, c)
        _, _, _, niter, improvement, grad_norm, qacc, _, jar, force, _, jtf, _, _ = c
        o_qacc[...] = qacc
        o_jtf[...] = jtf
        o_jar[...] = jar
        o_force[...] = force
        o_efcb[...] = efc_b
        o_state[...] = row_eval(jar, with_state=True)[3]
        c4 = jax.lax.broadcasted_iota(jp.int32, (1, 4), 1)
        o_stats[...] = where(c4 == 0, niter[:, None], where(c4 == 1, improvement[:, None],
                                                            where(c4 == 2, grad_norm[:, None], 0.0)))  # fmt: skip

    return body


def _launcher(m: Model, layout: common.Layout, iterations: int, ls_iterations: int, warm: bool):
    """`launch.Kernel.launcher`: one pallas_call over (E, NEP, NVP) tiles, `launch.dof_tile` environments each."""
    nv, nefc = m.nv, layout.nefc
    nvp, nep = _pow2(nv), _pow2(nefc)
    kinds = set(np.asarray(layout.kind).tolist())
    kind = np.full(nep, -1, np.int32)
    kind[:nefc] = np.asarray(layout.kind, np.int32)

    def run(kernel: launch.Kernel, env: dict, nenv: int | None, how: launch.Launch, x: dict) -> dict:
        e = 1 if nenv is None else nenv
        eb = min(int(how.dof_tile), _pow2(e))
        ep = -(-e // eb) * eb  # whole programs
        dtype = jp.result_type(*x.values())

        def per_env(n, shape):  # (ep, *shape): broadcast a shared input, pad the batch with zeros
            v = jp.asarray(x[n], dtype)
            v = v.reshape((e,) + shape) if env[n] else jp.broadcast_to(v.reshape(shape), (e,) + shape)
            return jp.pad(v, [(0, ep - e)] + [(0, 0)] * len(shape))

        def padded(v, shape):  # zero padding of the trailing axes to `shape`
            return jp.pad(v, [(0, 0)] + [(0, t - s) for s, t in zip(v.shape[1:], shape)])

        args, names = [], []
        args.append(padded(per_env("J", (nefc, nv)), (nep, nvp)))
        names.append("J")
        if layout.mass is None:
            Md = per_env("M", (nv, nv))
        else:
            qm = per_env("M", (int(np.prod(kernel.inputs["M"])),))
            qm = jp.concatenate([qm, jp.zeros((ep, 1), dtype)], axis=1)  # TreeMass.dense's zero entry
            Md = qm[:, layout.mass.dense].reshape(ep, nv, nv)
        args.append(padded(Md, (nvp, nvp)))
        names.append("M")
        for n in _ROWS:
            if n in kernel.inputs:
                args.append(padded(per_env(n, (nefc,)), (nep,)))
                names.append(n)
        for n in _DOFS:
            if n in kernel.inputs:
                args.append(padded(per_env(n, (nv,)), (nvp,)))
                names.append(n)
        cones = []
        for g, rows in enumerate(layout.cones):  # elliptic contacts: first rows, mu (padding 1), frictions
            k, dim = np.shape(rows)
            kp, fp = _pow2(k), _pow2(dim - 1)
            r0 = np.full(kp, -nep, np.int32)
            r0[:k] = np.asarray(rows)[:, 0]
            mu = jp.pad(per_env(f"cone_mu{g}", (k,)), ((0, 0), (0, kp - k)), constant_values=1.0)
            fric = jp.swapaxes(per_env(f"cone_fric{g}", (k, dim - 1)), 1, 2)  # (ep, dim - 1, k)
            args += [jp.asarray(r0), mu, jp.pad(fric, ((0, 0), (0, fp - dim + 1), (0, kp - k)))]
            names += [f"cone{g}", f"cone_mu{g}", f"cone_fric{g}"]
            cones.append((int(k), int(dim)))
        consts = [per_env(n, ()) for n in ("tolerance", "ls_tolerance")]
        args.append(jp.stack(consts + [jp.zeros_like(consts[0])] * 2, axis=1))  # (ep, 4)
        names.append("consts")
        args.append(jp.asarray(kind))

        def spec(a):
            if a.ndim == 1:  # the kind table, shared
                return pl.BlockSpec(a.shape, lambda i: (0,))
            return pl.BlockSpec((eb,) + a.shape[1:], lambda i, nd=a.ndim: (i,) + (0,) * (nd - 1))

        out_shape = [jax.ShapeDtypeStruct((ep, w), dtype) for w in (nvp, nvp, nep, nep, nep, nep, 4)]
        out_specs = [pl.BlockSpec((eb, s.shape[1]), lambda i: (i, 0)) for s in out_shape]
        body = _body(nv, nefc, kinds, iterations, ls_iterations, warm, tuple(names), how.hessian, tuple(cones))

        res = pl.pallas_call(
            body, out_shape=out_shape, grid=(ep // eb,), in_specs=[spec(a) for a in args], out_specs=out_specs,
            compiler_params=plt.CompilerParams(num_warps=how.num_warps, num_stages=1),
            interpret=how.interpret, name=kernel.name,
        )(*args)  # fmt: skip
        qacc, jtf, jar, force, efc_b, state, stats = res
        out = dict(qacc=qacc[:e, :nv], jtf=jtf[:e, :nv], jar=jar[:e, :nefc], force=force[:e, :nefc],
                   efc_b=efc_b[:e, :nefc], state=state[:e, :nefc], stats=stats[:e, :3])  # fmt: skip
        if nenv is None:
            out = {n: v[0] for n, v in out.items()}
        return out

    return run


def solve(m: Model, layout: common.Layout, p: common.Problem, qacc_warmstart: jax.Array | None, kw: dict,
          how: launch.Launch):  # fmt: skip
    """kernels/primal.py's `solve` for Newton (the caller checks `fusable`) on dof tiles, `how.dof_tile`
    environments per program; the same inputs, outputs and XLA twin (derivatives)."""
    warm = qacc_warmstart is not None
    k, x = lane_primal.kernel(m, layout, p, False, kw, warm)
    iterations, ls_iterations = int(kw["iterations"]), int(kw["ls_iterations"])
    outputs = {n: s for n, s in k.outputs.items() if not n.startswith("_")}
    k = dataclasses.replace(k, name="solve_newton_tiled", outputs=outputs, tables={}, body=None,
                            launcher=_launcher(m, layout, iterations, ls_iterations, warm))  # fmt: skip
    if warm:
        x.update(qacc_warmstart=qacc_warmstart)
    dtype = p.qacc_smooth.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    stats = out["stats"]
    niter = jax.lax.stop_gradient(stats[0]).astype(jp.int32)
    state = jax.lax.stop_gradient(out["state"]).astype(jp.int32)
    return out["qacc"], out["jar"], out["force"], out["jtf"], niter, stats[1], stats[2], out["efc_b"], state
