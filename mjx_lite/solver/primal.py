"""Primal solvers: Newton (default) and nonlinear conjugate gradient (Polak-Ribiere-plus).

Both minimise the convex primal cost of `common.py` with an exact line search, for at most `opt.iterations`
iterations (line search: `opt.ls_iterations`). Convergence is measured as MuJoCo 4.0 does, scaled by 1 / trace(M)
of the current mass matrix (MuJoCo 3.x: 1 / (meaninertia * nv)): improvement or gradient under `opt.tolerance`, the
gradient test's tolerance raised to the precision the gradient is computed at (`_gradient_test`: in float32
MuJoCo's default 1e-8 is below the rounding error of M a - J' f, so every step took one more iteration that changed
nothing). Newton also stops, as MuJoCo 3.11+, on the Newton decrement 0.5 scale grad' H^-1 grad at the new point (the
next step is solved at the end of each iteration), and takes zero iterations when the start passes the gradient test
and its decrement (at most MuJoCo's duality-gap certificate 0.5 scale grad' M^-1 grad, as H >= M) is below
tolerance. Not (yet) MuJoCo's: islands (MuJoCo solves each constraint island on its own, scaled by the island's
trace), and for CG the zero-iteration exit on the duality gap alone (MuJoCo's; ours: the gradient test). With
`early_exit=False` the loops are `lax.scan`s of static length (reverse-differentiable; converged iterations are
no-ops); with `early_exit=True` they are bounded `lax.while_loop`s that stop at convergence (see `solver.solve`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp

from mjx_lite import linalg
from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem
from mjx_lite.types import MINVAL


def _scale(layout: Layout, p: Problem) -> jax.Array:
    """() MuJoCo 4.0's cost scale 1 / trace(M) of the improvement and gradient tests (the current mass matrix's,
    per environment; `opt.tolerance` is thereby relative to the mean dof inertia times nv)."""
    return 1.0 / jp.maximum(MINVAL, jax.lax.stop_gradient(common.trace_m(layout, p)))


def _gradient(p: Problem, ev: common.ConstraintEval, Ma: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(gradient of the primal cost M (qacc - qacc_smooth) - J' force (nv,), J' force (nv,))."""
    jtf = common.p_jt_mul(p, ev.force)
    return Ma - jtf, jtf


# The gradient M a - J' f is a difference of two vectors that cancel at the solution: its rounding error is about
# eps (|M a| + |J' f|). After a converged Newton step the scaled gradient sits at 1-2x that (median over 3200
# float32 states of dm_control's cheetah and our ant) while an unconverged one is 1e5-1e7x it; a test below
# GRAD_FLOOR x the rounding error separates the two. In float64 the floor is far below MuJoCo's tolerances.
GRAD_FLOOR = 32.0


def _gradient_test(grad: jax.Array, Ma: jax.Array, jtf: jax.Array, scale: jax.Array,
                   tolerance: jax.Array) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """(scaled gradient norm (), converged ()): norm below max(tolerance, the gradient's rounding floor)."""
    def norm(v):
        return jp.sqrt(jp.sum(v * v))

    gnorm = scale * norm(grad)
    floor = GRAD_FLOOR * jp.finfo(grad.dtype).eps * scale * jax.lax.stop_gradient(norm(Ma) + norm(jtf))
    return gnorm, gnorm < jp.maximum(tolerance, floor)


def _keep(done: jax.Array, old, new):
    """The carry `old` where done, else `new` (pytrees of equal structure)."""
    return jax.tree.map(lambda o, n: jp.where(done, o, n), old, new)


def solve_newton(layout: Layout, p: Problem, start: tuple, *, iterations: int, ls_iterations: int,
                 tolerance: jax.Array, ls_tolerance: jax.Array, early_exit: bool = False,
                 library: bool = False, refill: bool = False):
    """Newton's method on the primal problem from start = (qacc0 (nv,), jar0 = J qacc0 - aref (nefc,),
    Ma0 = M (qacc0 - qacc_smooth) (nv,)).

    Each iteration: Hessian and gradient at the carried point, Cholesky, exact line search; the step updates qacc,
    jar and Ma (one product with J and one with M, in the line search) and the gradient takes one J' f.
    library: factorise with JAX's Cholesky (LAPACK / cuSOLVER) instead of `mjx_lite.linalg`'s (`Config.linalg`).
    refill: with early_exit, the loop refills under vmap (`common.iterate`, `Config.solver_batch`).
    Returns (qacc (nv,), jar (nefc,), ConstraintEval at qacc, J' force at qacc (nv,), niter () int,
    improvement (), gradient ()).
    """  # fmt: skip
    scale = _scale(layout, p)
    qacc0, jar0, Ma0 = start
    dt = qacc0.dtype

    def newton_step(ev, grad):
        """(search = -H^-1 grad (nv,), decrement 0.5 scale grad' H^-1 grad ()), H the Hessian at ev."""
        H = common.full_m(layout, p) + common.constraint_hessian(layout, p, ev)
        # a pivot below MINVAL is set to MINVAL, as MuJoCo's mju_cholFactor(H, nv, mjMINVAL)
        search = -linalg.spd_solve(H, grad, library=library, mindiag=MINVAL)
        return search, jp.maximum(0.0, -0.5 * scale * jp.dot(grad, search))

    def body(c):
        x, done = c["x"], c["done"]
        search = x["search"]
        alpha, Js, Ms = common.line_search(layout, p, search, x["Ma"], x["jar"], ls_iterations,
                                           tolerance * ls_tolerance, scale, early_exit)  # fmt: skip
        qacc, jar, Ma = x["qacc"] + alpha * search, x["jar"] + alpha * Js, x["Ma"] + alpha * Ms
        cost, ev = common.evaluate(layout, p, qacc, jar, Ma)
        grad, jtf = _gradient(p, ev, Ma)
        improvement = scale * (x["cost"] - cost)
        gnorm, gconv = _gradient_test(grad, Ma, jtf, scale, tolerance)
        # the next step, from the Hessian at the new point: its Newton decrement is the third stopping test
        search_n, decrement = newton_step(ev, grad)
        conv = (improvement < tolerance) | gconv | (decrement < tolerance)
        new = {"x": {"qacc": qacc, "jar": jar, "Ma": Ma, "cost": cost, "ev": ev, "grad": grad, "jtf": jtf,
                     "search": search_n},
               "improvement": improvement, "gradient": gnorm}  # fmt: skip
        old = {k: c[k] for k in new}
        return {**_keep(done, old, new), "done": done | conv, "niter": c["niter"] + jp.where(done, 0, 1)}

    cost0, ev0 = common.evaluate(layout, p, qacc0, jar0, Ma0)
    grad0, jtf0 = _gradient(p, ev0, Ma0)
    g0, g0conv = _gradient_test(grad0, Ma0, jtf0, scale, tolerance)
    search0, decrement0 = newton_step(ev0, grad0)
    # zero iterations: the gradient test and the Newton decrement (which is at most the duality gap
    # 0.5 scale grad' M^-1 grad, as H >= M: MuJoCo's certificate-or-decrement exit is this one test)
    init = {"x": {"qacc": qacc0, "jar": jar0, "Ma": Ma0, "cost": cost0, "ev": ev0, "grad": grad0, "jtf": jtf0,
                  "search": search0},
            "done": g0conv & (decrement0 < tolerance), "niter": jp.zeros((), jp.int32),
            "improvement": jp.zeros((), dt), "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    x = out["x"]
    return x["qacc"], x["jar"], x["ev"], x["jtf"], out["niter"], out["improvement"], out["gradient"]


def solve_cg(layout: Layout, p: Problem, start: tuple, *, iterations: int, ls_iterations: int,
             tolerance: jax.Array, ls_tolerance: jax.Array,
             minv: Callable[[jax.Array], jax.Array], early_exit: bool = False, refill: bool = False):  # fmt: skip
    """Nonlinear CG (Polak-Ribiere-plus, preconditioned by M^-1 via `minv(x)`, x (nv,)) from start = (qacc0 (nv,),
    jar0 (nefc,), Ma0 (nv,)) (see `solve_newton`).

    Returns (qacc (nv,), jar (nefc,), ConstraintEval at qacc, J' force at qacc (nv,), niter () int,
    improvement (), gradient ()).
    """
    scale = _scale(layout, p)
    qacc0, jar0, Ma0 = start
    dt = qacc0.dtype
    cost0, ev0 = common.evaluate(layout, p, qacc0, jar0, Ma0)
    grad0, jtf0 = _gradient(p, ev0, Ma0)
    mgrad0 = minv(grad0)

    def body(c):
        x, done = c["x"], c["done"]
        alpha, Js, Ms = common.line_search(layout, p, x["search"], x["Ma"], x["jar"], ls_iterations,
                                           tolerance * ls_tolerance, scale, early_exit)  # fmt: skip
        qacc, jar, Ma = x["qacc"] + alpha * x["search"], x["jar"] + alpha * Js, x["Ma"] + alpha * Ms
        cost, ev = common.evaluate(layout, p, qacc, jar, Ma)
        grad, jtf = _gradient(p, ev, Ma)
        mgrad = minv(grad)
        denom = jp.dot(x["grad"], x["mgrad"])
        beta = jp.dot(grad, mgrad - x["mgrad"]) / jp.where(denom > 0, denom, 1.0)
        beta = jp.maximum(beta, 0.0)
        search = -mgrad + beta * x["search"]
        improvement = scale * (x["cost"] - cost)
        gnorm, gconv = _gradient_test(grad, Ma, jtf, scale, tolerance)
        conv = (improvement < tolerance) | gconv
        new = {"x": {"qacc": qacc, "jar": jar, "Ma": Ma, "cost": cost, "ev": ev, "grad": grad, "jtf": jtf,
                     "mgrad": mgrad, "search": search},
               "improvement": improvement, "gradient": gnorm}  # fmt: skip
        old = {k: c[k] for k in new}
        return {**_keep(done, old, new), "done": done | conv, "niter": c["niter"] + jp.where(done, 0, 1)}

    g0, g0conv = _gradient_test(grad0, Ma0, jtf0, scale, tolerance)
    init = {"x": {"qacc": qacc0, "jar": jar0, "Ma": Ma0, "cost": cost0, "ev": ev0, "grad": grad0, "jtf": jtf0,
                  "mgrad": mgrad0, "search": -mgrad0},
            "done": g0conv, "niter": jp.zeros((), jp.int32), "improvement": jp.zeros((), dt),
            "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    x = out["x"]
    return x["qacc"], x["jar"], x["ev"], x["jtf"], out["niter"], out["improvement"], out["gradient"]
