"""The constraint solver's primal iterations as one fused kernel: Newton or nonlinear CG (solver/primal.py) for a
block of environments, from the start to the last iteration, in one launch.

Per environment and iteration, inside the kernel (every value a lane vector, the loops over rows and dofs
uniform across the block):
  Newton: the Hessian H = M + J' diag(h) J from the rows' curvature h at the current point (its upper triangle,
          M's entries from qM dense or tree-sparse), its Cholesky factor in place (up-looking, row by row, a pivot
          below MINVAL clamped to MINVAL as `linalg.cholesky_upper`), the search direction -H^-1 grad by the two
          triangular solves and its Newton decrement (a stopping test) -- at the start and after each step, for
          the next iteration;
  CG:     the preconditioned gradient M^-1 grad by the tree L'DL solve of kernels/factor.py (qLD, qLDiagInv of the
          step's factorisation), Hager-Zhang's direction update with MuJoCo 4.0's lower bound (solver/primal.py's
          `_beta_hz`; the old gradient kept in `_gold`);
  both:   the exact line search (safeguarded Newton with bracketing) along the direction: J s and M s once, then per
          line-search iteration one pass over the padded rows (the cost's first and second derivative); the step
          moves qacc, jar = J qacc - aref and Ma = M (qacc - qacc_smooth); one pass over the rows evaluates the
          force and curvature at the new point, J' force and the gradient; the improvement and gradient tests.
The iteration counts are the model's (opt.iterations, opt.ls_iterations). The loops run while any lane of the
block is not done, bounded by those counts; a lane that is done keeps its values (the XLA solver's rule, so
solver_niter is the same per environment), and a lane that has converged takes no further line-search steps.

The formulas are solver/primal.py's and solver/common.py's (eval_constraints, line_search) written per lane; only
summation orders differ (round-off). Inputs: J (nefc, nv) dense, D, mask, R and frictionloss (friction-loss rows
only), qacc_smooth, M (qM's layout), the start (qacc0, jar0, Ma0), the tolerances, and for CG qLD,
qLDiagInv. Outputs: qacc, jar, force, J' force, and (niter, improvement, gradient).

Elliptic cones (solver/common.py's `_cone_eval`, `cone_law` here): each contact's rows (consecutive, normal first)
are evaluated together, a loop over the contacts of each cone dimension (static) after the pass over the scalar
rows: its cost, force and state in every evaluation, its dim x dim constraint-space Hessian Hc (kept in `_ch` for
Newton, whose Hessian is then J' (H_s J) with H_s J in `_HJ`: h_r J_r on the scalar rows, Hc times the contact's
rows on the cones'), and Js_c' Hc Js_c in the line search's second derivative. Inputs then add each group's mu and
tangential frictions (Problem.cone_mu, cone_friction).

PGS (a dual method) has its own kernel, kernels/pgs.py. Not fused (the XLA solver runs): the sparse efc_J layout,
and CG with `Config.mass_factorization="dense"`. Derivatives: the kernel's custom_jvp runs the XLA
solver (kernels/launch.py): exact in `Config.gradients="unrolled"`; under "implicit" the solver's own custom_vjp
(solver/solve.py) differentiates the optimality condition at the returned qacc, whatever computed it.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import inertia, support
from mjx_lite.pipeline.kernels import factor, launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.solver import common
from mjx_lite.solver import primal as xla_primal
from mjx_lite.types import MINVAL, ConstraintState, Model, SolverType

__all__ = ["fusable", "solve"]


def fusable(m: Model, layout: common.Layout, sparse_j: bool) -> bool:
    """Static: the model's solver has a fused kernel (Newton or CG, any cone, dense efc_J; CG with the tree
    factorisation, whose solve the kernel runs)."""
    solver = int(m.opt.solver)
    if solver not in (int(SolverType.NEWTON), int(SolverType.CG)) or sparse_j:
        return False
    if m.nv == 0 or layout.nefc == 0:
        return False
    return solver == int(SolverType.NEWTON) or factor.fusable(m)


# the rows' ConstraintState values, as the kernel's floats
SATISFIED, QUADRATIC = float(ConstraintState.SATISFIED), float(ConstraintState.QUADRATIC)
LINEARNEG, LINEARPOS = float(ConstraintState.LINEARNEG), float(ConstraintState.LINEARPOS)


def row_law(x, D, kind, friction, has: tuple, zero) -> tuple:
    """(cost, force = -ds/djar, curvature, ConstraintState as a float) of rows at jar x, before the rows' mask
    (solver/common.py's eval_constraints), elementwise: lane vectors (this kernel) or (E, NEP) tiles
    (primal_tiled.py). kind: the rows' ConstraintType codes; friction: () -> (frictionloss, R), read only when
    friction rows exist; has: (inequality, friction, equality) rows exist; zero: zeros of x's shape."""
    has_iq, has_fr, has_eq = has
    quad = 0.5 * D * x * x
    lin = -D * x
    cost, force, h, state = zero, zero, zero, zero
    if has_iq:
        act = x < 0
        iq = kind == common.INEQUALITY
        cost = where(iq, where(act, quad, 0.0), cost)
        force = where(iq, where(act, lin, 0.0), force)
        h = where(iq, where(act, D, 0.0), h)
        state = where(iq, where(act, QUADRATIC, SATISFIED, x.dtype), state)
    if has_fr:
        fl, R = friction()
        Rf = R * fl
        pos, neg = x >= Rf, x <= -Rf
        fr = kind == common.FRICTION
        cost = where(fr, where(pos, fl * x - 0.5 * Rf * fl, where(neg, -fl * x - 0.5 * Rf * fl, quad)), cost)
        force = where(fr, where(pos, -fl, where(neg, fl, lin)), force)
        h = where(fr, where(pos | neg, 0.0, D), h)
        state = where(fr, where(pos, LINEARPOS, where(neg, LINEARNEG, QUADRATIC, x.dtype)), state)
    if has_eq:
        eq = kind == common.EQUALITY
        cost, force, h = where(eq, quad, cost), where(eq, lin, force), where(eq, D, h)
        state = where(eq, QUADRATIC, state)
    return cost, force, h, state


CONE = float(ConstraintState.CONE)


def cone_law(x: list, D: list, mu, fric: list) -> tuple:
    """(cost, force (dim,), Hessian (dim, dim) in constraint space, ConstraintState as a float) of elliptic contacts
    at jar x (solver/common.py's `_cone_eval`), before the contacts' mask, elementwise over the contacts: x, D lists
    of dim arrays (the cone's rows, normal first: lane vectors of this kernel, or (E, K) tiles of primal_tiled.py),
    mu the regularised cone coefficient, fric the dim - 1 tangential friction coefficients (arrays of x's shape).
    Zones (U = (mu x_n, f_1 x_1, ...), N = U_0, T = |U_t|): top (N >= mu T) zero; bottom (mu N + T <= 0) the rows'
    quadratics; middle 0.5 Dm (N - mu T)^2, Dm = D_n / (mu^2 (1 + mu^2))."""
    n = len(x)
    s = [mu] + list(fric)
    U = [x[i] * s[i] for i in range(n)]
    N = U[0]
    T2 = U[1] * U[1]
    for i in range(2, n):
        T2 = T2 + U[i] * U[i]
    t_pos = T2 > 0
    T = where(t_pos, jp.sqrt(where(t_pos, T2, 1.0)), 0.0)
    top = (N >= mu * T) | (~t_pos & (N >= 0))
    bottom = ~top & ((mu * N + T <= 0) | (~t_pos & (N < 0)))
    middle = ~top & ~bottom
    # bottom zone: every row quadratic
    cost_b = D[0] * x[0] * x[0]
    for i in range(1, n):
        cost_b = cost_b + D[i] * x[i] * x[i]
    cost_b = 0.5 * cost_b
    # middle zone
    Dm = D[0] / (mu * mu * (1.0 + mu * mu))
    g = N - mu * T
    tsafe = where(t_pos, T, 1.0)
    e = [None] + [U[i] / tsafe for i in range(1, n)]  # the unit tangent in U space
    grad = [1.0] + [-mu * e[i] for i in range(1, n)]  # dg/dU
    cost_m = 0.5 * Dm * g * g
    dmg = Dm * g
    cost = where(bottom, cost_b, where(middle, cost_m, 0.0))
    force = [where(bottom, -D[i] * x[i], where(middle, -dmg * grad[i] * s[i], 0.0)) for i in range(n)]
    c = mu / tsafe
    hess = [[None] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            hg = 0.0 if i == 0 or j == 0 else -c * ((1.0 if i == j else 0.0) - e[i] * e[j])  # d2g/dU2
            hm = s[i] * (Dm * (grad[i] * grad[j] + g * hg)) * s[j]
            hb = D[i] if i == j else 0.0
            hess[i][j] = hess[j][i] = where(bottom, hb, where(middle, hm, 0.0))
    state = where(bottom, QUADRATIC, where(middle, CONE, SATISFIED, x[0].dtype))
    return cost, force, hess, state


def _tables(m: Model, layout: common.Layout, cg: bool) -> dict:
    """Static int32 tables: the rows' kinds, qM's tree entries (tree-sparse qM) and, for CG, the factor's."""

    # built at trace time from the layout itself (cheap; the factor's tables are memoised by factor.plan)
    tab = {"kind": np.asarray(layout.kind, np.int32)}
    for g, rows in enumerate(layout.cones):  # each elliptic contact's first row (its rows are consecutive)
        tab[f"cone{g}"] = np.asarray(rows)[:, 0]
    if layout.mass is not None:
        tm = layout.mass
        tab.update(tm_diag=tm.diag, tm_off=tm.off, tm_row=tm.row, tm_col=tm.col)
    if cg:
        tab.update(factor.plan(m))
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def _loop(lo, hi, fn, init=None):
    """fori_loop over [lo, hi) of fn(i, carry) -> carry (fn(i) -> None without a carry)."""
    if init is None:
        jax.lax.fori_loop(np.int32(lo) if isinstance(lo, int) else lo, np.int32(hi) if isinstance(hi, int) else hi,
                          lambda i, c: (fn(i), c)[1], np.int32(0))  # fmt: skip
        return None
    return jax.lax.fori_loop(np.int32(lo) if isinstance(lo, int) else lo, np.int32(hi) if isinstance(hi, int) else hi,
                             fn, init)  # fmt: skip


def _any(flags) -> jax.Array:
    """Scalar: any lane of the bool lane vector is set (a max reduction, as Triton lowers it)."""
    return jp.max(where(flags, 1, 0).astype(jp.int32)) > 0


def trace_scale(io, nv: int, tree_m: bool):
    """MuJoCo 4.0's scale of the solvers' stopping tests (lanes): 1 / trace(M) of each environment's mass matrix,
    input "M" dense (nv * nv) or tree-sparse (tree_m: its diagonal at table "tm_diag")."""
    zero = io.lanes(0.0)
    if tree_m:
        trace = _loop(0, nv, lambda i, s: s + io.read("M", io.table("tm_diag", i)), zero)
    else:
        trace = _loop(0, nv, lambda i, s: s + io.read("M", i * (nv + 1)), zero)
    return 1.0 / jp.maximum(MINVAL, trace)


def _body(m: Model, layout: common.Layout, cg: bool, iterations: int, ls_iterations: int, warm: bool):
    nv, nefc = m.nv, layout.nefc
    kinds = set(np.asarray(layout.kind).tolist())
    has_eq, has_fr, has_iq = common.EQUALITY in kinds, common.FRICTION in kinds, common.INEQUALITY in kinds
    tree_m = layout.mass
    # the elliptic cones: (group, dim, count, offset of the group's Hessians in _ch)
    cones, off = [], 0
    for g, rows in enumerate(layout.cones):
        k, dim = np.shape(rows)
        cones.append((g, int(dim), int(k), off))
        off += int(k) * int(dim) * int(dim)

    def body(io):
        zero = io.lanes(0.0)
        tol = io.read("tolerance", 0)
        gtol = tol * io.read("ls_tolerance", 0)
        valid = io.valid()

        def J(r, i):
            return io.read("J", r * nv + i)

        def dot(a, b, n):
            return _loop(0, n, lambda i, s: s + a(i) * b(i), zero)

        scale = trace_scale(io, nv, tree_m is not None)

        # ---- the rows' cost: value, force = -ds/djar, curvature (solver/common.py's eval_constraints) --------
        def row_eval(r, x, with_state=False):
            """(cost, force, curvature) of row r at jar x (lanes), and its ConstraintState (as a float) when
            with_state."""
            kind = io.table("kind", r)
            D = io.read("D", r)
            cost, force, h, state = row_law(x, D, kind, lambda: (io.read("frictionloss", r), io.read("R", r)),
                                            (has_iq, has_fr, has_eq), zero)  # fmt: skip
            live = io.read("mask", r) > 0.5
            out = where(live, cost, 0.0), where(live, force, 0.0), where(live, h, 0.0)
            return out + (where(live, state, 0.0),) if with_state else out

        def cone_eval(g, dim, c, x_of):
            """(first row, cost, force (dim,), Hessian (dim, dim), ConstraintState) of elliptic contact c of group
            g at jar x_of(row), masked by its first row's liveness (the state unmasked)."""
            r0 = io.table(f"cone{g}", c)
            x = [io.lanes(x_of(r0 + i)) for i in range(dim)]
            D = [io.read("D", r0 + i) for i in range(dim)]
            fric = [io.read(f"cone_fric{g}", c * (dim - 1) + i) for i in range(dim - 1)]
            cost, force, hess, state = cone_law(x, D, io.read(f"cone_mu{g}", c), fric)
            live = io.read("mask", r0) > 0.5
            return (r0, where(live, cost, 0.0), [where(live, f, 0.0) for f in force],
                    [[where(live, v, 0.0) for v in hr] for hr in hess], state)  # fmt: skip

        def cone_loop(fn, init):
            """fn(g, dim, c, off, carry) -> carry over every elliptic contact (off: its group's _ch offset)."""
            for g, dim, k, off in cones:
                init = _loop(0, k, lambda c, acc, g=g, dim=dim, off=off: fn(g, dim, c, off, acc), init)
            return init

        # ---- M x, M's entries ------------------------------------------------------------------------------
        def mul_m(src, dst):
            """dst <- M src (outputs of nv)."""
            if tree_m is None:
                _loop(0, nv, lambda i: io.write(dst, i, dot(lambda j: io.read("M", i * nv + j), lambda j:
                                                            io.load(src, j), nv)))  # fmt: skip
                return
            _loop(0, nv, lambda i: io.write(dst, i, io.read("M", io.table("tm_diag", i)) * io.load(src, i)))
            if tree_m.off.size:

                def off(e):
                    row, col = io.table("tm_row", e), io.table("tm_col", e)
                    v = io.read("M", io.table("tm_off", e))
                    io.write(dst, row, io.load(dst, row) + v * io.load(src, col))
                    io.write(dst, col, io.load(dst, col) + v * io.load(src, row))

                _loop(0, int(tree_m.off.size), off)

        # ---- evaluation at the carried point: force, curvature, J' force, gradient, cost ----------------------
        def evaluate():
            """force, _h (nefc) at jar; jtf, _grad (nv); returns the total cost (lanes)."""

            def row(r, c):
                cr, f, h = row_eval(r, io.load("jar", r))
                io.write("force", r, f)
                io.write("_h", r, h)
                return c + cr

            rows = _loop(0, nefc, row, zero)

            def cone(g, dim, c, off, acc):
                r0, cost, force, hess, _ = cone_eval(g, dim, c, lambda r: io.load("jar", r))
                for i in range(dim):
                    io.write("force", r0 + i, force[i])
                if not cg:  # Newton's Hessian reads the cones' constraint-space Hessians
                    for i in range(dim):
                        for j in range(dim):
                            io.write("_ch", off + (c * dim + i) * dim + j, hess[i][j])
                return acc + cost

            rows = cone_loop(cone, rows)

            def grad(i):
                jtf = dot(lambda r: J(r, i), lambda r: io.load("force", r), nefc)
                io.write("jtf", i, jtf)
                io.write("_grad", i, io.load("_Ma", i) - jtf)

            _loop(0, nv, grad)
            smooth = dot(lambda i: io.load("qacc", i) - io.read("qacc_smooth", i), lambda i: io.load("_Ma", i), nv)
            return 0.5 * smooth + rows

        def gnorm():
            """(scaled gradient norm, its test's tolerance): the XLA solver's `_gradient_test`, max(tolerance, the
            rounding floor GRAD_FLOOR eps scale (|M a| + |J' f|))."""
            g = scale * jp.sqrt(dot(lambda i: io.load("_grad", i), lambda i: io.load("_grad", i), nv))
            ma = jp.sqrt(dot(lambda i: io.load("_Ma", i), lambda i: io.load("_Ma", i), nv))
            jtf = jp.sqrt(dot(lambda i: io.load("jtf", i), lambda i: io.load("jtf", i), nv))
            floor = xla_primal.GRAD_FLOOR * jp.finfo(g.dtype).eps * scale * (ma + jtf)
            return g, jp.maximum(tol, floor)

        # ---- Newton's direction: H = M + J' diag(h) J, Cholesky, two triangular solves ------------------------
        def hessian():
            if cones:  # _HJ = H_s J (nefc, nv): h_r J_r on scalar rows, then each cone's block times its rows
                _loop(0, nefc, lambda r: _loop(0, nv, lambda j: io.write("_HJ", r * nv + j,
                                                                         io.load("_h", r) * J(r, j))))  # fmt: skip

                def cone(g, dim, c, off, acc):
                    r0 = io.table(f"cone{g}", c)

                    def col(j):
                        for p in range(dim):
                            v = io.load("_ch", off + (c * dim + p) * dim) * J(r0, j)
                            for q in range(1, dim):
                                v = v + io.load("_ch", off + (c * dim + p) * dim + q) * J(r0 + q, j)
                            io.write("_HJ", (r0 + p) * nv + j, v)

                    _loop(0, nv, col)
                    return acc

                cone_loop(cone, np.int32(0))

            def entry(i, j):
                """H(i, j), j >= i."""
                if cones:
                    v = dot(lambda r: J(r, i), lambda r: io.load("_HJ", r * nv + j), nefc)
                else:
                    v = dot(lambda r: io.load("_h", r) * J(r, i), lambda r: J(r, j), nefc)
                if tree_m is None:
                    return io.read("M", i * nv + j) + v
                return v

            _loop(0, nv, lambda i: _loop(i, nv, lambda j: io.write("_H", i * nv + j, entry(i, j))))
            if tree_m is not None:
                _loop(0, nv, lambda i: io.write("_H", i * (nv + 1), io.load("_H", i * (nv + 1))
                                                + io.read("M", io.table("tm_diag", i))))  # fmt: skip
                if tree_m.off.size:

                    def off(e):  # tree entries (row, col), col an ancestor of row: col < row
                        k = io.table("tm_col", e) * nv + io.table("tm_row", e)
                        io.write("_H", k, io.load("_H", k) + io.read("M", io.table("tm_off", e)))

                    _loop(0, int(tree_m.off.size), off)

        def cholesky():
            """_H's upper triangle <- U with H = U' U (linalg.cholesky_upper: row j of U is H's row j minus the
            rows above, over the square root of its pivot, clamped below MINVAL)."""

            def rowj(j):
                def reduced(mcol):
                    return io.load("_H", j * nv + mcol) - dot(lambda k: io.load("_H", k * nv + j),
                                                               lambda k: io.load("_H", k * nv + mcol), j)  # fmt: skip

                p = reduced(j)
                d = jp.sqrt(where(p < MINVAL, MINVAL, p))
                io.write("_H", j * (nv + 1), d)
                _loop(j + 1, nv, lambda mcol: io.write("_H", j * nv + mcol, reduced(mcol) / d))

            _loop(0, nv, rowj)

        def newton_direction():
            """_search <- -(U' U)^-1 grad."""

            def fwd(i):  # U' y = grad
                s = dot(lambda k: io.load("_H", k * nv + i), lambda k: io.load("_search", k), i)
                io.write("_search", i, (io.load("_grad", i) - s) / io.load("_H", i * (nv + 1)))

            def back(r):  # U x = y, from the last row
                i = nv - 1 - r
                s = _loop(i + 1, nv, lambda k, c: c + io.load("_H", i * nv + k) * io.load("_search", k), zero)
                io.write("_search", i, (io.load("_search", i) - s) / io.load("_H", i * (nv + 1)))

            _loop(0, nv, fwd)
            _loop(0, nv, back)
            _loop(0, nv, lambda i: io.write("_search", i, -io.load("_search", i)))

        # ---- CG's preconditioned gradient ----------------------------------------------------------------------
        def minv_grad(dst):
            """dst <- M^-1 grad (the tree L'DL solve of d's factor)."""
            _loop(0, nv, lambda i: io.write(dst, i, io.load("_grad", i)))
            factor.solve_in(io, m, dst, lambda p: io.read("qLD", p), lambda k: io.read("qLDiagInv", k))

        # ---- the exact line search along _search (common.line_search) -----------------------------------------
        def line_search(skip):
            """alpha (lanes; 0 where the direction does not descend); _Js = J s, _Ms = M s. skip: lanes that
            are done (their line search takes no step)."""
            _loop(0, nefc, lambda r: io.write("_Js", r, dot(lambda i: J(r, i), lambda i: io.load("_search", i), nv)))
            mul_m("_search", "_Ms")
            s_ms = dot(lambda i: io.load("_search", i), lambda i: io.load("_Ms", i), nv)
            g0 = dot(lambda i: io.load("_search", i), lambda i: io.load("_Ma", i), nv)
            snorm = jp.sqrt(jp.maximum(dot(lambda i: io.load("_search", i), lambda i: io.load("_search", i), nv), 0))
            ltol = gtol * snorm / scale

            def derivs(alpha):
                def row(r, c):
                    js = io.load("_Js", r)
                    _, f, h = row_eval(r, io.load("jar", r) + alpha * js)
                    return c[0] + js * f, c[1] + h * js * js

                jf, q = _loop(0, nefc, row, (zero, zero))

                def cone(g, dim, c, off, acc):
                    r0 = io.table(f"cone{g}", c)
                    js = [io.load("_Js", r0 + i) for i in range(dim)]
                    _, _, f, h, _ = cone_eval(g, dim, c, lambda r: io.load("jar", r) + alpha * io.load("_Js", r))
                    jf, q = acc
                    for i in range(dim):
                        jf = jf + js[i] * f[i]
                        hv = h[i][0] * js[0]
                        for j in range(1, dim):
                            hv = hv + h[i][j] * js[j]
                        q = q + js[i] * hv
                    return jf, q

                jf, q = cone_loop(cone, (jf, q))
                return g0 + alpha * s_ms - jf, s_ms + q

            d1, d2 = derivs(zero)
            descent = d1 < 0
            alpha0 = where(descent, -d1 / where(d2 > 0, d2, 1.0), 0.0)

            def step(c):
                it, alpha, lo, hi, done = c
                d1, d2 = derivs(alpha)
                return (it + 1, *common.line_search_update(alpha, lo, hi, done, d1, d2, ltol))

            init = (np.int32(0), alpha0, zero, io.lanes(jp.inf), ~descent | skip)
            if ls_iterations:
                out = jax.lax.while_loop(lambda c: (c[0] < ls_iterations) & _any(~c[4]), step, init)
                alpha0 = out[1]
            return where(descent, alpha0, 0.0)

        # ---- the start (common.solver_start): qacc_smooth, or the warm start when its cost is lower -------------
        def row_costs(src):
            rows = _loop(0, nefc, lambda r, c: c + row_eval(r, io.load(src, r))[0], zero)
            return cone_loop(lambda g, dim, c, off, acc: acc + cone_eval(g, dim, c, lambda r: io.load(src, r))[1],
                             rows)  # fmt: skip

        _loop(0, nefc, lambda r: io.write("efc_b", r, dot(lambda i: J(r, i), lambda i: io.read("qacc_smooth", i), nv)
                                          - io.read("aref", r)))  # fmt: skip
        ws = zero > 0  # the lanes that start at the warm start
        if warm:  # jar, _Ma and (scratch) _search = qacc_ws - qacc_smooth at the warm start, then the choice
            _loop(0, nefc, lambda r: io.write("jar", r, dot(lambda i: J(r, i), lambda i: io.read("qacc_warmstart", i),
                                                            nv) - io.read("aref", r)))  # fmt: skip
            _loop(0, nv, lambda i: io.write("_search", i, io.read("qacc_warmstart", i) - io.read("qacc_smooth", i)))
            mul_m("_search", "_Ma")
            c_ws = 0.5 * dot(lambda i: io.load("_search", i), lambda i: io.load("_Ma", i), nv) + row_costs("jar")
            ws = c_ws < row_costs("efc_b")  # the smooth start's M-term is zero (Ma = 0)

        def start_dof(i):
            io.write("qacc", i, where(ws, io.read("qacc_warmstart", i), io.read("qacc_smooth", i)) if warm
                     else io.read("qacc_smooth", i))  # fmt: skip
            io.write("_Ma", i, where(ws, io.load("_Ma", i), 0.0) if warm else zero)

        _loop(0, nv, start_dof)
        _loop(0, nefc, lambda r: io.write("jar", r, where(ws, io.load("jar", r), io.load("efc_b", r)) if warm
                                          else io.load("efc_b", r)))  # fmt: skip

        # ---- the solver -------------------------------------------------------------------------------------
        cost0 = evaluate()
        g0, g0tol = gnorm()
        def newton_step():
            """_search <- -H^-1 grad at the carried point; returns its Newton decrement 0.5 scale grad' H^-1 grad
            (lanes, clamped at 0)."""
            hessian()
            cholesky()
            newton_direction()
            gs = dot(lambda i: io.load("_grad", i), lambda i: io.load("_search", i), nv)
            return jp.maximum(-0.5 * scale * gs, 0.0)

        if cg:
            minv_grad("_mgrad")
            _loop(0, nv, lambda i: io.write("_search", i, -io.load("_mgrad", i)))
            # MuJoCo 4.0's certificate alone: the duality gap 0.5 scale grad' M^-1 grad (solver/primal.py's start)
            gap = 0.5 * scale * dot(lambda i: io.load("_grad", i), lambda i: io.load("_mgrad", i), nv)
            done0 = gap < tol
        else:  # the gradient test and the decrement (at most MuJoCo's duality gap): solver/primal.py's start
            done0 = (g0 < g0tol) & (newton_step() < tol)
        if valid is not None:
            done0 = done0 | ~valid

        def iteration(c):
            it, done, cost, niter, improvement, grad_norm = c
            if cg:  # the gradient before the step, for Hager-Zhang's y = grad - grad_old
                _loop(0, nv, lambda i: io.write("_gold", i, io.load("_grad", i)))
            alpha = line_search(done)

            def move(name, delta, i):
                v = io.load(name, i)
                io.write(name, i, where(done, v, v + alpha * io.load(delta, i)))

            _loop(0, nv, lambda i: (move("qacc", "_search", i), move("_Ma", "_Ms", i)))
            _loop(0, nefc, lambda r: move("jar", "_Js", r))
            cost_n = evaluate()
            gn, gtol_n = gnorm()
            if cg:
                minv_grad("_mg2")

                def y(i):
                    return io.load("_grad", i) - io.load("_gold", i)

                def load(name):
                    return lambda i: io.load(name, i)

                dy = dot(load("_search"), y, nv)
                ok = dy >= MINVAL
                dy_s = where(ok, dy, 1.0)
                y_my = dot(y, lambda i: io.load("_mg2", i) - io.load("_mgrad", i), nv)
                beta = (dot(y, load("_mg2"), nv) - 2.0 * (y_my / dy_s) * dot(load("_search"), load("_grad"), nv)) / dy_s
                dnorm = jp.sqrt(dot(load("_search"), load("_search"), nv))
                g_norm = jp.sqrt(dot(load("_grad"), load("_grad"), nv))
                eta = -1.0 / jp.maximum(MINVAL, dnorm * jp.minimum(xla_primal.HZ_ETA, g_norm))
                beta = where(ok, jp.maximum(eta, beta), 0.0)

                def direction(i):
                    s, mg = io.load("_search", i), io.load("_mg2", i)
                    io.write("_search", i, where(done, s, -mg + beta * s))
                    io.write("_mgrad", i, where(done, io.load("_mgrad", i), mg))

                _loop(0, nv, direction)
            imp = scale * (cost - cost_n)
            conv = (imp < tol) | (gn < gtol_n)
            if not cg:  # the next direction from the Hessian at the new point (done lanes: their point's, unchanged)
                conv = conv | (newton_step() < tol)
            return (it + 1, done | conv, where(done, cost, cost_n), niter + where(done, 0.0, 1.0, io.dtype),
                    where(done, improvement, imp), where(done, grad_norm, gn))  # fmt: skip

        c = (np.int32(0), done0, cost0, zero, zero, g0)
        if iterations:
            c = jax.lax.while_loop(lambda c: (c[0] < iterations) & _any(~c[1]), iteration, c)
        io.write("stats", 0, c[3])
        io.write("stats", 1, c[4])
        io.write("stats", 2, c[5])
        # ---- the end: the rows' states at the returned jar (Data.efc_state) --------------------------------------
        _loop(0, nefc, lambda r: io.write("state", r, row_eval(r, io.load("jar", r), with_state=True)[3]))

        def cone_state(g, dim, c, off, acc):
            r0, _, _, _, state = cone_eval(g, dim, c, lambda r: io.load("jar", r))
            for i in range(dim):
                io.write("state", r0 + i, where(io.read("mask", r0 + i) > 0.5, state, 0.0))
            return acc

        cone_loop(cone_state, np.int32(0))

    return body


def _problem(x: dict) -> common.Problem:
    """The solver's Problem from the kernel's inputs (the twin's view)."""
    zeros = jp.zeros_like(x["D"])
    ng = sum(1 for n in x if n.startswith("cone_mu"))
    return common.Problem(J=x["J"], D=x["D"], R=x.get("R", zeros + 1.0), aref=x["aref"],
                          frictionloss=x.get("frictionloss", zeros), mask=x["mask"] > 0.5,
                          cone_mu=tuple(x[f"cone_mu{g}"] for g in range(ng)),
                          cone_friction=tuple(x[f"cone_fric{g}"] for g in range(ng)), qacc_smooth=x["qacc_smooth"],
                          M=x["M"])  # fmt: skip


def kernel(m: Model, layout: common.Layout, p: common.Problem, cg: bool, kw: dict,
           warm: bool) -> tuple[launch.Kernel, dict]:  # fmt: skip
    """The solver as a `launch.Kernel` (one environment's shapes) and its problem inputs (qacc_warmstart and, for
    CG, qLD and qLDiagInv are added by `solve`).

    kw: the XLA solver's keywords (iterations, ls_iterations: static; tolerance, ls_tolerance;
    early_exit; library for Newton); warm: the start is chosen between qacc_smooth and the input qacc_warmstart
    (MuJoCo's warm start), else qacc_smooth."""
    nv, nefc = m.nv, layout.nefc
    kinds = set(np.asarray(layout.kind).tolist())
    x = dict(J=p.J, D=p.D, mask=p.mask, qacc_smooth=p.qacc_smooth, M=p.M, aref=p.aref)
    if common.FRICTION in kinds:
        x.update(R=p.R, frictionloss=p.frictionloss)
    for g in range(len(layout.cones)):  # elliptic contacts: mu (k,), the tangential frictions (k, dim - 1)
        x.update({f"cone_mu{g}": p.cone_mu[g], f"cone_fric{g}": p.cone_friction[g]})
    x.update(tolerance=kw["tolerance"], ls_tolerance=kw["ls_tolerance"])
    iterations, ls_iterations = int(kw["iterations"]), int(kw["ls_iterations"])
    consts = ("tolerance", "ls_tolerance")

    def xla(x):
        prob = _problem(x)
        kw2 = dict(iterations=iterations, ls_iterations=ls_iterations, early_exit=kw["early_exit"],
                   **{n: x[n] for n in consts})  # fmt: skip
        start, jar_smooth = common.solver_start(layout, prob, x["qacc_warmstart"] if warm else None)
        if cg:
            minv = lambda v: inertia.solve_factored(m, x["qLD"], x["qLDiagInv"], v)  # noqa: E731
            out = xla_primal.solve_cg(layout, prob, start, minv=minv, **kw2)
        else:
            out = xla_primal.solve_newton(layout, prob, start, library=kw["library"], **kw2)
        qacc, jar, ev, jtf, niter, improvement, gradient = out
        stats = jp.stack([niter.astype(qacc.dtype), jp.asarray(improvement, qacc.dtype),
                          jp.asarray(gradient, qacc.dtype)])  # fmt: skip
        state = common.eval_constraints(layout, prob, jar).state.astype(qacc.dtype)
        return {"qacc": qacc, "jar": jar, "force": ev.force, "jtf": jtf, "stats": stats, "efc_b": jar_smooth,
                "state": state}  # fmt: skip

    inputs = {n: tuple(jp.shape(v)) for n, v in x.items()}
    if warm:
        inputs.update(qacc_warmstart=(nv,))
    if cg:
        inputs.update(qLD=(support.tables(m).m_rows.size,), qLDiagInv=(nv,))
    outputs = {"qacc": (nv,), "jar": (nefc,), "force": (nefc,), "jtf": (nv,), "stats": (3,), "efc_b": (nefc,),
               "state": (nefc,), "_Ma": (nv,),
               "_grad": (nv,), "_h": (nefc,), "_search": (nv,), "_Js": (nefc,), "_Ms": (nv,)}  # fmt: skip
    if cg:
        outputs.update(_mgrad=(nv,), _mg2=(nv,), _gold=(nv,))
    else:
        outputs.update(_H=(nv * nv,))
        if layout.cones:  # the cones' constraint-space Hessians, H_s J
            outputs.update(_ch=(sum(int(np.size(r)) * int(np.shape(r)[1]) for r in layout.cones),), _HJ=(nefc * nv,))
    name = "solve_cg" if cg else "solve_newton"
    k = launch.Kernel(name, inputs, outputs, _tables(m, layout, cg),
                      _body(m, layout, cg, iterations, ls_iterations, warm), xla)  # fmt: skip
    return k, x


def solve(m: Model, layout: common.Layout, p: common.Problem, qacc_warmstart: jax.Array | None, factors: tuple,
          kw: dict, how: launch.Launch):  # fmt: skip
    """The primal solver of `m` (Newton or CG; the caller checks `fusable`) as one fused kernel, its start and the
    rows' final states included.

    qacc_warmstart: (nv,), the start when its cost is lower than qacc_smooth's (common.solver_start), or None (the
    warmstart flag disabled: qacc_smooth); factors: (qLD, qLDiagInv) of M (read by CG's preconditioner); kw: the
    XLA solver's keywords (see `kernel`). Returns (qacc (nv,), jar (nefc,), force (nefc,), J' force (nv,), niter ()
    int32, improvement (), gradient (), efc_b = J qacc_smooth - aref (nefc,), efc_state (nefc,) int32), as
    solver/primal.py's solvers (force for their ConstraintEval) and solver/solve.py.
    """
    cg = int(m.opt.solver) == int(SolverType.CG)
    warm = qacc_warmstart is not None
    k, x = kernel(m, layout, p, cg, kw, warm)
    dtype = p.qacc_smooth.dtype
    if warm:
        x.update(qacc_warmstart=qacc_warmstart)
    if cg:
        x.update(qLD=factors[0], qLDiagInv=factors[1])
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    stats = out["stats"]
    niter = jax.lax.stop_gradient(stats[0]).astype(jp.int32)
    state = jax.lax.stop_gradient(out["state"]).astype(jp.int32)
    return out["qacc"], out["jar"], out["force"], out["jtf"], niter, stats[1], stats[2], out["efc_b"], state
