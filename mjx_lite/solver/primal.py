"""Primal solvers: Newton (default) and nonlinear conjugate gradient (Polak-Ribiere-plus).

Both minimise the convex primal cost of `common.py` with an exact line search, for a static number of
iterations (`opt.iterations`, line search `opt.ls_iterations`) inside `lax.scan`, so `jax.grad` goes through
them; once the improvement or the gradient falls under `opt.tolerance` the remaining iterations are no-ops
(`jp.where`). Convergence is measured as MuJoCo does, scaled by 1 / (meaninertia * max(1, nv)).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem


def _scale(meaninertia, nv):
    return 1.0 / (meaninertia * max(1, nv))


def _gradient(p: Problem, ev: common.ConstraintEval, Ma):
    return Ma - p.J.T @ ev.force


def solve_newton(layout: Layout, p: Problem, qacc0, *, iterations: int, ls_iterations: int, tolerance,
                 ls_tolerance, meaninertia):  # fmt: skip
    """Newton's method on the primal problem. Returns (qacc, ConstraintEval at qacc, niter, improvement, grad)."""
    nv = p.M.shape[0]
    scale = _scale(meaninertia, nv)

    def step(carry, _):
        qacc, cost, done, niter = carry
        _, ev, _, Ma = common.primal_cost(layout, p, qacc)
        grad = _gradient(p, ev, Ma)
        H = p.M + common.constraint_hessian(layout, p, ev)
        L = jax.scipy.linalg.cho_factor(H, lower=True)
        search = -jax.scipy.linalg.cho_solve(L, grad)
        alpha = common.line_search(layout, p, qacc, search, Ma, ls_iterations, tolerance * ls_tolerance, scale)
        qacc_new = qacc + alpha * search
        cost_new, ev_new, _, Ma_new = common.primal_cost(layout, p, qacc_new)
        grad_new = _gradient(p, ev_new, Ma_new)
        improvement = scale * (cost - cost_new)
        gnorm = scale * jp.sqrt(jp.sum(grad_new * grad_new))
        conv = (improvement < tolerance) | (gnorm < tolerance)
        qacc_out = jp.where(done, qacc, qacc_new)
        return (qacc_out, jp.where(done, cost, cost_new), done | conv, niter + jp.where(done, 0, 1)), (
            jp.where(done, 0.0, improvement),
            jp.where(done, 0.0, gnorm),
        )

    cost0, ev0, _, Ma0 = common.primal_cost(layout, p, qacc0)
    g0 = scale * jp.sqrt(jp.sum(_gradient(p, ev0, Ma0) ** 2))
    init = (qacc0, cost0, g0 < tolerance, jp.zeros((), jp.int32))
    (qacc, _, _, niter), (impr, gn) = jax.lax.scan(step, init, None, length=iterations)
    _, ev, _, _ = common.primal_cost(layout, p, qacc)
    last = jp.maximum(niter - 1, 0)
    return qacc, ev, niter, impr[last] if iterations else 0.0, gn[last] if iterations else g0


def solve_cg(layout: Layout, p: Problem, qacc0, *, iterations: int, ls_iterations: int, tolerance,
             ls_tolerance, meaninertia, minv):  # fmt: skip
    """Nonlinear CG (Polak-Ribiere-plus, preconditioned by M^-1 via `minv(x)`)."""
    nv = p.M.shape[0]
    scale = _scale(meaninertia, nv)
    cost0, ev0, _, Ma0 = common.primal_cost(layout, p, qacc0)
    grad0 = _gradient(p, ev0, Ma0)
    mgrad0 = minv(grad0)

    def step(carry, _):
        qacc, cost, grad, mgrad, search, done, niter = carry
        Ma = p.M @ (qacc - p.qacc_smooth)
        alpha = common.line_search(layout, p, qacc, search, Ma, ls_iterations, tolerance * ls_tolerance, scale)
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

        out = (keep(qacc, qacc_new), keep(cost, cost_new), keep(grad, grad_new), keep(mgrad, mgrad_new),
               keep(search, search_new), done | conv, niter + jp.where(done, 0, 1))  # fmt: skip
        return out, (keep(0.0, improvement), keep(0.0, gnorm))

    g0 = scale * jp.sqrt(jp.sum(grad0 * grad0))
    init = (qacc0, cost0, grad0, mgrad0, -mgrad0, g0 < tolerance, jp.zeros((), jp.int32))
    (qacc, _, _, _, _, _, niter), (impr, gn) = jax.lax.scan(step, init, None, length=iterations)
    _, ev, _, _ = common.primal_cost(layout, p, qacc)
    last = jp.maximum(niter - 1, 0)
    return qacc, ev, niter, impr[last] if iterations else 0.0, gn[last] if iterations else g0
