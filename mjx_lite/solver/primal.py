"""Primal solvers: Newton (default) and nonlinear conjugate gradient (Polak-Ribiere-plus).

Both minimise the convex primal cost of `common.py` with an exact line search, for at most `opt.iterations`
iterations (line search: `opt.ls_iterations`). Convergence is measured as MuJoCo does, scaled by
1 / (meaninertia * max(1, nv)): improvement or gradient under `opt.tolerance`. With `early_exit=False` the
loops are `lax.scan`s of static length (reverse-differentiable; converged iterations are no-ops); with
`early_exit=True` they are bounded `lax.while_loop`s that stop at convergence (see `solver.solve`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp

from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem


def _scale(meaninertia: jax.Array, nv: int) -> jax.Array:
    """() MuJoCo's cost scale 1 / (meaninertia * nv) of the improvement and gradient tests."""
    return 1.0 / (meaninertia * max(1, nv))


def _gradient(p: Problem, ev: common.ConstraintEval, Ma: jax.Array) -> jax.Array:
    """(nv,) gradient of the primal cost: M (qacc - qacc_smooth) - J' force."""
    return Ma - ev.force @ p.J


def solve_newton(layout: Layout, p: Problem, qacc0: jax.Array, *, iterations: int, ls_iterations: int,
                 tolerance: jax.Array, ls_tolerance: jax.Array, meaninertia: jax.Array, early_exit: bool = False):
    """Newton's method on the primal problem from qacc0 (nv,).

    Returns (qacc (nv,), ConstraintEval at qacc, niter () int, improvement (), gradient ()).
    """  # fmt: skip
    nv = p.M.shape[0]
    scale = _scale(meaninertia, nv)
    dt = qacc0.dtype

    def body(c):
        qacc, cost, done = c["qacc"], c["cost"], c["done"]
        _, ev, _, Ma = common.primal_cost(layout, p, qacc)
        grad = _gradient(p, ev, Ma)
        H = p.M + common.constraint_hessian(layout, p, ev)
        L = jax.scipy.linalg.cho_factor(H, lower=True)
        search = -jax.scipy.linalg.cho_solve(L, grad)
        alpha = common.line_search(layout, p, qacc, search, Ma, ls_iterations, tolerance * ls_tolerance, scale,
                                   early_exit)  # fmt: skip
        qacc_new = qacc + alpha * search
        cost_new, ev_new, _, Ma_new = common.primal_cost(layout, p, qacc_new)
        grad_new = _gradient(p, ev_new, Ma_new)
        improvement = scale * (cost - cost_new)
        gnorm = scale * jp.sqrt(jp.sum(grad_new * grad_new))
        conv = (improvement < tolerance) | (gnorm < tolerance)
        return {"qacc": jp.where(done, qacc, qacc_new), "cost": jp.where(done, cost, cost_new),
                "done": done | conv, "niter": c["niter"] + jp.where(done, 0, 1),
                "improvement": jp.where(done, c["improvement"], improvement),
                "gradient": jp.where(done, c["gradient"], gnorm)}  # fmt: skip

    cost0, ev0, _, Ma0 = common.primal_cost(layout, p, qacc0)
    g0 = scale * jp.sqrt(jp.sum(_gradient(p, ev0, Ma0) ** 2))
    init = {"qacc": qacc0, "cost": cost0, "done": g0 < tolerance, "niter": jp.zeros((), jp.int32),
            "improvement": jp.zeros((), dt), "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit)
    _, ev, _, _ = common.primal_cost(layout, p, out["qacc"])
    return out["qacc"], ev, out["niter"], out["improvement"], out["gradient"]


def solve_cg(layout: Layout, p: Problem, qacc0: jax.Array, *, iterations: int, ls_iterations: int,
             tolerance: jax.Array, ls_tolerance: jax.Array, meaninertia: jax.Array,
             minv: Callable[[jax.Array], jax.Array], early_exit: bool = False):  # fmt: skip
    """Nonlinear CG (Polak-Ribiere-plus, preconditioned by M^-1 via `minv(x)`, x (nv,)) from qacc0 (nv,).

    Returns (qacc (nv,), ConstraintEval at qacc, niter () int, improvement (), gradient ()).
    """
    nv = p.M.shape[0]
    scale = _scale(meaninertia, nv)
    dt = qacc0.dtype
    cost0, ev0, _, Ma0 = common.primal_cost(layout, p, qacc0)
    grad0 = _gradient(p, ev0, Ma0)
    mgrad0 = minv(grad0)

    def body(c):
        qacc, cost, grad, mgrad, search, done = c["qacc"], c["cost"], c["grad"], c["mgrad"], c["search"], c["done"]
        Ma = p.M @ (qacc - p.qacc_smooth)
        alpha = common.line_search(layout, p, qacc, search, Ma, ls_iterations, tolerance * ls_tolerance, scale,
                                   early_exit)  # fmt: skip
        qacc_new = qacc + alpha * search
        cost_new, ev_new, _, Ma_new = common.primal_cost(layout, p, qacc_new)
        grad_new = _gradient(p, ev_new, Ma_new)
        mgrad_new = minv(grad_new)
        denom = jp.dot(grad, mgrad)
        beta = jp.dot(grad_new, mgrad_new - mgrad) / jp.where(denom > 0, denom, 1.0)
        beta = jp.maximum(beta, 0.0)
        search_new = -mgrad_new + beta * search
        improvement = scale * (cost - cost_new)
        gnorm = scale * jp.sqrt(jp.sum(grad_new * grad_new))
        conv = (improvement < tolerance) | (gnorm < tolerance)

        def keep(old, new):
            return jp.where(done, old, new)

        return {"qacc": keep(qacc, qacc_new), "cost": keep(cost, cost_new), "grad": keep(grad, grad_new),
                "mgrad": keep(mgrad, mgrad_new), "search": keep(search, search_new), "done": done | conv,
                "niter": c["niter"] + jp.where(done, 0, 1), "improvement": keep(c["improvement"], improvement),
                "gradient": keep(c["gradient"], gnorm)}  # fmt: skip

    g0 = scale * jp.sqrt(jp.sum(grad0 * grad0))
    init = {"qacc": qacc0, "cost": cost0, "grad": grad0, "mgrad": mgrad0, "search": -mgrad0, "done": g0 < tolerance,
            "niter": jp.zeros((), jp.int32), "improvement": jp.zeros((), dt), "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit)
    _, ev, _, _ = common.primal_cost(layout, p, out["qacc"])
    return out["qacc"], ev, out["niter"], out["improvement"], out["gradient"]
