"""Primal solvers: Newton (default) and nonlinear conjugate gradient (Hager-Zhang's direction update, MuJoCo 4.0's).

Both minimise the convex primal cost of `common.py` with an exact line search, for at most `opt.iterations`
iterations (line search: `opt.ls_iterations`). Convergence is measured as MuJoCo 4.0 does, scaled by 1 / trace(M)
of the current mass matrix (MuJoCo 3.x: 1 / (meaninertia * nv)): improvement or gradient under `opt.tolerance`, the
gradient test's tolerance raised to the precision the gradient is computed at (`_gradient_test`: in float32
MuJoCo's default 1e-8 is below the rounding error of M a - J' f, so every step took one more iteration that changed
nothing). Newton also stops, as MuJoCo 3.11+, on the Newton decrement 0.5 scale grad' H^-1 grad at the new point (the
next step is solved at the end of each iteration), and takes zero iterations when the start passes the gradient test
and its decrement (at most MuJoCo's duality-gap certificate 0.5 scale grad' M^-1 grad, as H >= M) is below
tolerance. CG takes zero iterations, as MuJoCo 4.0, on the duality gap alone (0.5 scale grad' M^-1 grad below
tolerance: a certificate of the start's cost, with no gradient test).

Constraint islands (`islands=`, MuJoCo 4.0's default): each island is solved on its own, as MuJoCo's per-island
solves: every reduction of the iteration (costs, the line search's derivatives, the stopping quantities, CG's beta,
the trace scale) is a segment sum over the islands' dofs and rows (`common.Segments`), alpha is one per island,
and an island that has converged keeps its values while the others iterate; no loop over islands (fixed shapes).
With `early_exit=False` the loops are `lax.scan`s of static length (reverse-differentiable; converged iterations are
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


def _scale(layout: Layout, p: Problem, seg=common.Whole) -> jax.Array:
    """MuJoCo 4.0's cost scale 1 / trace(M) of the improvement and gradient tests (the current mass matrix's, per
    environment; `opt.tolerance` is thereby relative to the mean dof inertia times nv): () for the whole system, or
    (n,) per island (`common.Segments`: 1 / the trace of the island's block of M)."""
    if seg.n is None:
        tr = common.trace_m(layout, p)
    else:
        diag = jp.diagonal(p.M) if layout.mass is None else p.M[layout.mass.diag]
        tr = seg.sum_dof(diag)
    return 1.0 / jp.maximum(MINVAL, jax.lax.stop_gradient(tr))


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
                   tolerance: jax.Array, seg=common.Whole) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """(scaled gradient norm, converged) (() each, or (n,) per island): norm below max(tolerance, the gradient's
    rounding floor)."""
    def norm(v):
        return jp.sqrt(seg.sum_dof(v * v))

    gnorm = scale * norm(grad)
    floor = GRAD_FLOOR * jp.finfo(grad.dtype).eps * scale * jax.lax.stop_gradient(norm(Ma) + norm(jtf))
    return gnorm, gnorm < jp.maximum(tolerance, floor)


def _keep(done: jax.Array, old, new):
    """The carry `old` where done, else `new` (pytrees of equal structure)."""
    return jax.tree.map(lambda o, n: jp.where(done, o, n), old, new)


def _segments(islands, nv: int, nefc: int):
    """(seg, free): `common.Whole` and None, or per island `common.Segments` over the islands' ids and one more
    segment (the last, always done) for the dofs no live row touches and for the padding rows; free: (n,) bool, that
    last segment. islands: None, or (dof_island (nv,), efc_island (nefc,), ntree) (ids -1: no island)."""
    if islands is None:
        return common.Whole, None
    dof_island, efc_island, ntree = islands
    n = int(ntree) + 1
    seg = common.Segments(dof=jp.where(dof_island < 0, ntree, dof_island).astype(jp.int32),
                          efc=jp.where(efc_island < 0, ntree, efc_island).astype(jp.int32), n=n)  # fmt: skip
    return seg, jp.arange(n) == ntree


def _island_start(start: tuple, p: Problem, islands) -> tuple:
    """MuJoCo with islands: dofs of no island start (and stay) at qacc_smooth, where Ma = 0 (M is block-diagonal
    over trees, and such a dof's tree has no live row)."""
    if islands is None:
        return start
    qacc0, jar0, Ma0 = start
    free = islands[0] < 0
    return jp.where(free, p.qacc_smooth, qacc0), jar0, jp.where(free, 0.0, Ma0)


def _keep_seg(seg, idone: jax.Array, old: dict, new: dict, where: dict) -> dict:
    """Per island: each entry of `old` where its island is done, else `new`; where[k] says what indexes entry k:
    "dof" (nv,), "efc" (nefc,) or "seg" (n,) (Whole: one scalar done for all)."""
    if seg.n is None:
        return _keep(idone, old, new)
    mask = {"dof": seg.at_dof(idone), "efc": seg.at_efc(idone), "seg": idone}
    return {k: jp.where(mask[where[k]], old[k], new[k]) for k in new}


def _finish(seg, free, out: dict):
    """(niter, improvement, gradient): scalars for the whole system; per island: niter (n,) with the last segment's
    (no island) count 0, and the stats of each island."""
    if seg.n is None:
        return out["niter"], out["improvement"], out["gradient"]
    return jp.where(free, 0, out["niter"]), out["improvement"], out["gradient"]


def solve_newton(layout: Layout, p: Problem, start: tuple, *, iterations: int, ls_iterations: int,
                 tolerance: jax.Array, ls_tolerance: jax.Array, early_exit: bool = False,
                 library: bool = False, refill: bool = False, islands=None):
    """Newton's method on the primal problem from start = (qacc0 (nv,), jar0 = J qacc0 - aref (nefc,),
    Ma0 = M (qacc0 - qacc_smooth) (nv,)).

    Each iteration: Hessian and gradient at the carried point, Cholesky, exact line search; the step updates qacc,
    jar and Ma (one product with J and one with M, in the line search) and the gradient takes one J' f.
    library: factorise with JAX's Cholesky (LAPACK / cuSOLVER) instead of `mjx_lite.linalg`'s (`Config.linalg`).
    refill: with early_exit, the loop refills under vmap (`common.iterate`, `Config.solver_batch`).
    islands: None (the whole system at once), or (dof_island (nv,), efc_island (nefc,), ntree) (`island.find`):
    each island takes its own line search, scale and stopping tests, as MuJoCo 4.0's per-island solves (the Hessian
    is block-diagonal over islands: one factorisation serves all); a converged island stops moving while the others
    continue; the loop ends when every island is done or at `iterations`.
    Returns (qacc (nv,), jar (nefc,), ConstraintEval at qacc, J' force at qacc (nv,), niter, improvement,
    gradient): () each, or per island (ntree + 1,) (the last entry: no island, niter 0).
    """  # fmt: skip
    seg, free = _segments(islands, p.qacc_smooth.shape[0], p.mask.shape[0])
    scale = _scale(layout, p, seg)
    qacc0, jar0, Ma0 = _island_start(start, p, islands)
    dt = qacc0.dtype
    shape = () if seg.n is None else (seg.n,)

    def newton_step(ev, grad):
        """(search = -H^-1 grad (nv,), decrement 0.5 scale grad' H^-1 grad), H the Hessian at ev."""
        with jax.named_scope("hessian"):
            H = common.full_m(layout, p) + common.constraint_hessian(layout, p, ev)
        # a pivot below MINVAL is set to MINVAL, as MuJoCo's mju_cholFactor(H, nv, mjMINVAL)
        with jax.named_scope("cholesky"):
            search = -linalg.spd_solve(H, grad, library=library, mindiag=MINVAL)
        return search, jp.maximum(0.0, -0.5 * scale * seg.dot_dof(grad, search))

    where = {"qacc": "dof", "jar": "efc", "Ma": "dof", "cost": "seg", "grad": "dof", "jtf": "dof", "search": "dof",
             "improvement": "seg", "gradient": "seg"}  # fmt: skip

    def body(c):
        idone = c["idone"]
        search = c["search"]
        alpha, Js, Ms = common.line_search(layout, p, search, c["Ma"], c["jar"], ls_iterations,
                                           tolerance * ls_tolerance, scale, early_exit, seg,
                                           None if seg.n is None else idone)  # fmt: skip
        qacc = c["qacc"] + seg.at_dof(alpha) * search
        jar, Ma = c["jar"] + seg.at_efc(alpha) * Js, c["Ma"] + seg.at_dof(alpha) * Ms
        ev = common.eval_constraints(layout, p, jar)
        cost = seg.cost(ev, qacc, p.qacc_smooth, Ma)
        grad, jtf = _gradient(p, ev, Ma)
        improvement = scale * (c["cost"] - cost)
        gnorm, gconv = _gradient_test(grad, Ma, jtf, scale, tolerance, seg)
        # the next step, from the Hessian at the new point: its Newton decrement is the third stopping test
        search_n, decrement = newton_step(ev, grad)
        conv = (improvement < tolerance) | gconv | (decrement < tolerance)
        new = {"qacc": qacc, "jar": jar, "Ma": Ma, "cost": cost, "grad": grad, "jtf": jtf, "search": search_n,
               "improvement": improvement, "gradient": gnorm}  # fmt: skip
        idone_n = idone | conv
        return {**_keep_seg(seg, idone, {k: c[k] for k in new}, new, where), "idone": idone_n,
                "done": jp.all(idone_n), "niter": c["niter"] + jp.where(idone, 0, 1)}

    ev0 = common.eval_constraints(layout, p, jar0)
    cost0 = seg.cost(ev0, qacc0, p.qacc_smooth, Ma0)
    grad0, jtf0 = _gradient(p, ev0, Ma0)
    g0, g0conv = _gradient_test(grad0, Ma0, jtf0, scale, tolerance, seg)
    search0, decrement0 = newton_step(ev0, grad0)
    # zero iterations: the gradient test and the Newton decrement (which is at most the duality gap
    # 0.5 scale grad' M^-1 grad, as H >= M: MuJoCo's certificate-or-decrement exit is this one test)
    idone0 = g0conv & (decrement0 < tolerance)
    if free is not None:
        idone0 = idone0 | free
    init = {"qacc": qacc0, "jar": jar0, "Ma": Ma0, "cost": cost0, "grad": grad0, "jtf": jtf0, "search": search0,
            "idone": idone0, "done": jp.all(idone0), "niter": jp.zeros(shape, jp.int32),
            "improvement": jp.zeros(shape, dt), "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    ev = common.eval_constraints(layout, p, out["jar"])
    return (out["qacc"], out["jar"], ev, out["jtf"]) + _finish(seg, free, out)


HZ_ETA = 0.01  # Hager-Zhang's truncation constant (eta)


def _beta_hz(seg, search, grad_old, mgrad_old, grad, mgrad):
    """Hager-Zhang's conjugate-direction coefficient (MuJoCo 4.0's CG; per island with `common.Segments`):
    y = grad - grad_old, beta = (y' M^-1 grad - 2 (y' M^-1 y / d' y) d' grad) / d' y, d the last search direction,
    bounded below by -1 / (|d| min(eta, |grad|)); 0 (steepest descent) when d' y < MINVAL. With exact line searches
    it is Polak-Ribiere's, but it may be negative where Polak-Ribiere-plus clamps to 0 (and the iterates part)."""
    y, my = grad - grad_old, mgrad - mgrad_old
    dy = seg.dot_dof(search, y)
    ok = dy >= MINVAL
    dy_s = jp.where(ok, dy, 1.0)
    beta = (seg.dot_dof(y, mgrad) - 2.0 * (seg.dot_dof(y, my) / dy_s) * seg.dot_dof(search, grad)) / dy_s
    dnorm = jp.sqrt(seg.dot_dof(search, search))
    gnorm = jp.sqrt(seg.dot_dof(grad, grad))
    eta = -1.0 / jp.maximum(MINVAL, dnorm * jp.minimum(HZ_ETA, gnorm))
    return jp.where(ok, jp.maximum(eta, beta), 0.0)


def solve_cg(layout: Layout, p: Problem, start: tuple, *, iterations: int, ls_iterations: int,
             tolerance: jax.Array, ls_tolerance: jax.Array,
             minv: Callable[[jax.Array], jax.Array], early_exit: bool = False, refill: bool = False,
             islands=None):  # fmt: skip
    """Nonlinear CG (Hager-Zhang's direction update, `_beta_hz`, preconditioned by M^-1 via `minv(x)`, x (nv,))
    from start = (qacc0 (nv,), jar0 (nefc,), Ma0 (nv,)) (see `solve_newton`; islands: per island, each its own beta
    too, as there).

    Returns (qacc (nv,), jar (nefc,), ConstraintEval at qacc, J' force at qacc (nv,), niter, improvement,
    gradient) (() each, or per island (ntree + 1,)).
    """
    seg, free = _segments(islands, p.qacc_smooth.shape[0], p.mask.shape[0])
    scale = _scale(layout, p, seg)
    qacc0, jar0, Ma0 = _island_start(start, p, islands)
    dt = qacc0.dtype
    shape = () if seg.n is None else (seg.n,)
    ev0 = common.eval_constraints(layout, p, jar0)
    cost0 = seg.cost(ev0, qacc0, p.qacc_smooth, Ma0)
    grad0, jtf0 = _gradient(p, ev0, Ma0)
    mgrad0 = minv(grad0)
    where = {"qacc": "dof", "jar": "efc", "Ma": "dof", "cost": "seg", "grad": "dof", "jtf": "dof", "mgrad": "dof",
             "search": "dof", "improvement": "seg", "gradient": "seg"}  # fmt: skip

    def body(c):
        idone = c["idone"]
        alpha, Js, Ms = common.line_search(layout, p, c["search"], c["Ma"], c["jar"], ls_iterations,
                                           tolerance * ls_tolerance, scale, early_exit, seg,
                                           None if seg.n is None else idone)  # fmt: skip
        qacc = c["qacc"] + seg.at_dof(alpha) * c["search"]
        jar, Ma = c["jar"] + seg.at_efc(alpha) * Js, c["Ma"] + seg.at_dof(alpha) * Ms
        ev = common.eval_constraints(layout, p, jar)
        cost = seg.cost(ev, qacc, p.qacc_smooth, Ma)
        grad, jtf = _gradient(p, ev, Ma)
        mgrad = minv(grad)
        beta = _beta_hz(seg, c["search"], c["grad"], c["mgrad"], grad, mgrad)
        search = -mgrad + seg.at_dof(beta) * c["search"]
        improvement = scale * (c["cost"] - cost)
        gnorm, gconv = _gradient_test(grad, Ma, jtf, scale, tolerance, seg)
        conv = (improvement < tolerance) | gconv
        new = {"qacc": qacc, "jar": jar, "Ma": Ma, "cost": cost, "grad": grad, "jtf": jtf, "mgrad": mgrad,
               "search": search, "improvement": improvement, "gradient": gnorm}  # fmt: skip
        idone_n = idone | conv
        return {**_keep_seg(seg, idone, {k: c[k] for k in new}, new, where), "idone": idone_n,
                "done": jp.all(idone_n), "niter": c["niter"] + jp.where(idone, 0, 1)}

    g0, _ = _gradient_test(grad0, Ma0, jtf0, scale, tolerance, seg)
    # zero iterations on MuJoCo 4.0's certificate alone (CG; Newton also needs the gradient test): the duality gap
    # 0.5 scale grad' M^-1 grad bounds the start's cost suboptimality
    idone0 = 0.5 * scale * seg.dot_dof(grad0, mgrad0) < tolerance
    idone0 = idone0 if free is None else idone0 | free
    init = {"qacc": qacc0, "jar": jar0, "Ma": Ma0, "cost": cost0, "grad": grad0, "jtf": jtf0, "mgrad": mgrad0,
            "search": -mgrad0, "idone": idone0, "done": jp.all(idone0), "niter": jp.zeros(shape, jp.int32),
            "improvement": jp.zeros(shape, dt), "gradient": g0}  # fmt: skip
    out = common.iterate(body, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    ev = common.eval_constraints(layout, p, out["jar"])
    return (out["qacc"], out["jar"], ev, out["jtf"]) + _finish(seg, free, out)
