"""Exact solve of small constraint problems (a few scalar rows, no elliptic cones) by enumerating the rows' pieces.

The primal cost of `common.py`, 0.5 (a - a0)' M (a - a0) + s(J a - aref), is piecewise quadratic when no row is an
elliptic cone: each row's cost is one of a few pieces, quadratic (equality; inequality where jar < 0; friction loss
where |jar| < R f), zero (inequality where jar >= 0) or linear (friction loss beyond R f: force -f or +f). For one
choice of piece per row the minimiser is a linear solve in constraint space: with A = J M^-1 J' (nefc, nefc) and
b = J a0 - aref (jar at a0), the forces of the quadratic rows Q solve

    (R_Q + A_QQ) f_Q = -(b_Q + A_QL f_L)        (f_L: the fixed forces of the other rows: 0, -f or +f)

and then a = a0 + M^-1 J' f, jar = b + A f, cost = 0.5 f' A f + s(jar). The cost's pieces join with continuous
first derivatives, so the optimum a* (unique: M > 0, R > 0) is the stationary point of the piece it lies in, i.e.
the minimiser computed for that choice of pieces; and no candidate's true cost is below the optimum's. The smallest
true cost over every choice (1 for an equality row, 2 for an inequality row, 3 for a friction-loss row: at most 3^n
candidates, a static table) is therefore exactly a*, with no iterations and no tolerance: what Newton, CG and PGS
converge to. For one or two rows this is a handful of fused operations against the iterative solvers' loops (the
cartpole's rail limit, the planners' rollouts: `solver.solve` takes this path by the row count, statically,
`Config.direct_solve_rows`).

Padding rows (mask False) keep force 0 in every candidate.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem
from mjx_lite.types import MINVAL

# piece codes of a row in a candidate
QUAD, ZERO, LIN_POS, LIN_NEG = 0, 1, 2, 3
_PIECES = {common.EQUALITY: (QUAD,), common.INEQUALITY: (QUAD, ZERO), common.FRICTION: (QUAD, LIN_POS, LIN_NEG)}


def applies(layout: Layout, max_rows: int) -> bool:
    """Whether `solve_direct` handles this layout (static): 1 <= nefc <= max_rows scalar rows, no elliptic cone."""
    return 1 <= layout.nefc <= max_rows and not layout.cones and all(int(k) in _PIECES for k in layout.kind)


def candidates(kind: np.ndarray) -> np.ndarray:
    """(C, nefc) int: every choice of one piece per row (the rows' kinds `kind` (nefc,)), C = prod of the counts."""
    return np.array(list(itertools.product(*(_PIECES[int(k)] for k in kind))), np.int32).reshape(-1, kind.shape[0])


def _spd_solve_small(K: jax.Array, r: jax.Array) -> jax.Array:
    """K^-1 r for (..., n, n) symmetric positive definite K, r (..., n): an unrolled L D L' elimination (n static and
    small), so a batch of tiny systems is a few fused elementwise operations. Pivots are clamped to MINVAL."""
    n = K.shape[-1]
    L = [[None] * n for _ in range(n)]
    dinv = [None] * n
    for j in range(n):
        piv = K[..., j, j] - sum(L[j][k] * L[j][k] * dinv[k] for k in range(j))
        dinv[j] = 1.0 / jp.maximum(piv, MINVAL)
        for i in range(j + 1, n):
            # L[i][j] holds the unscaled product (L_ij * D_j); divide by D_j where used
            L[i][j] = K[..., i, j] - sum(L[i][k] * L[j][k] * dinv[k] for k in range(j))
    y = [None] * n  # L y = r (unit-lower L: L_ij = L[i][j] * dinv[j])
    for i in range(n):
        y[i] = r[..., i] - sum(L[i][k] * dinv[k] * y[k] for k in range(i))
    x = [None] * n  # D L' x = y
    for i in reversed(range(n)):
        x[i] = y[i] * dinv[i] - sum(L[k][i] * dinv[i] * x[k] for k in range(i + 1, n))
    return jp.stack(x, axis=-1)


def solve_direct(layout: Layout, p: Problem, minv: Callable[[jax.Array], jax.Array], jar_smooth: jax.Array):
    """The exact optimum of a small problem (`applies`; module docstring).

    Args:
      layout, p: the problem; minv(x) -> M^-1 x for x (nv, k); jar_smooth: J qacc_smooth - aref (nefc,).

    Returns (qacc (nv,), jar (nefc,), ConstraintEval at qacc, J' force (nv,), niter (), improvement (), gradient ()),
    as `primal.solve_newton`: niter 1 when a force is nonzero (one exact solve), else 0 (qacc_smooth is the
    optimum); improvement: the cost's decrease from qacc_smooth, gradient: the optimality residual
    |M (qacc - qacc_smooth) - J' force| (round-off), both scaled by 1 / trace(M) as the iterative solvers' statistics.
    """
    nv = common.nv_of(p)
    dt = p.qacc_smooth.dtype
    Jd = common.j_dense(p.J, p.J_colind, nv)  # (n, nv)
    MinvJt = minv(Jd.T)  # (nv, n)
    A = Jd @ MinvJt
    A = 0.5 * (A + A.T)
    n = A.shape[0]
    pieces = jp.asarray(candidates(layout.kind))  # (C, n)
    quad = (pieces == QUAD) & p.mask  # padding rows: fixed at force 0
    fixed = jp.where(pieces == LIN_POS, -p.frictionloss, jp.where(pieces == LIN_NEG, p.frictionloss, 0.0))
    fixed = jp.where(quad | ~p.mask, 0.0, fixed).astype(dt)  # (C, n)
    eye = jp.eye(n, dtype=dt)
    both = quad[:, :, None] & quad[:, None, :]
    K = jp.where(both, A + jp.diag(p.R), eye)  # (C, n, n): the quadratic rows' system, identity elsewhere
    rhs = jp.where(quad, -(jar_smooth + fixed @ A), fixed)
    f = _spd_solve_small(K, rhs)  # (C, n)
    x = jar_smooth + f @ A  # jar of each candidate

    def true_cost(f_c, x_c):
        return 0.5 * jp.dot(f_c, A @ f_c) + common.eval_constraints(layout, p, x_c).cost

    cost = jax.vmap(true_cost)(f, x)
    best = jp.argmin(jp.where(jp.isfinite(cost), cost, jp.inf))
    f_best = f[best]
    qacc = p.qacc_smooth + MinvJt @ f_best
    jar = common.p_j_mul(p, qacc) - p.aref
    ev = common.eval_constraints(layout, p, jar)
    jtf = common.p_jt_mul(p, ev.force)
    sg = jax.lax.stop_gradient  # statistics: no derivative (and none of a norm at 0)
    scale = 1.0 / jp.maximum(MINVAL, sg(common.trace_m(layout, p)))
    improvement = scale * sg(common.eval_constraints(layout, p, jar_smooth).cost - cost[best])
    gradient = sg(scale * jp.sqrt(jp.sum((Jd.T @ f_best - jtf) ** 2)))
    niter = jp.any(ev.force != 0).astype(jp.int32)
    return qacc, jar, ev, jtf, niter, improvement.astype(dt), gradient.astype(dt)
