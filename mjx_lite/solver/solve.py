"""mj_fwdConstraint: the constraint solvers (opt.solver) Newton and CG on the primal problem, PGS on the dual.

`solve(m, d)` reads the rows made by `pipeline.constraint.make_constraint` and sets qacc, qfrc_constraint,
efc_force, efc_state and the solver diagnostics. Warm start: MuJoCo's rule, start from qacc_warmstart when its
cost is lower than that of qacc_smooth (unless the warmstart flag is disabled).

Gradients, two modes (`m.config.gradients`, see `mjx_lite.Config`; part of the jit cache key):
  "implicit" (default): the solver loops stop at convergence (`lax.while_loop` bounded by opt.iterations /
      opt.ls_iterations, so the cost is that of the iterations actually needed), and reverse-mode
      differentiation does not go through them: qacc* satisfies g(qacc*, problem) = M (qacc* - qacc_smooth)
      - J' f = 0, so the backward pass is one linear solve with the Newton Hessian H = M + J' H_s J (Cholesky)
      and a vector-Jacobian product of g with respect to the problem data: exact at the optimum, independent
      of the path the iterations took. efc_force is the force law evaluated at qacc*. (Forward-mode jvp is not
      available in this mode: use "unrolled".)
  "unrolled": the loops run their full static iteration counts in `lax.scan` (converged iterations are
      no-ops) and `jax.grad` / `jax.jvp` go through every iteration. Slower: every step pays for
      opt.iterations x opt.ls_iterations evaluations.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import jax.scipy.linalg as jsl

from mjx_lite.pipeline import constraint, inertia
from mjx_lite.solver import common, pgs, primal
from mjx_lite.types import Data, DisableBit, Model, SolverType


def _optimality(layout, prob, qacc):
    """g = M (qacc - qacc_smooth) - J' f(J qacc - aref): zero at the optimum."""
    _, ev, _, Ma = common.primal_cost(layout, prob, qacc)
    return Ma - ev.force @ prob.J


def _implicit(layout, run):
    """Wrap run(prob, qacc0, consts) -> (qacc, stats) with the implicit-function VJP at the returned qacc."""

    @jax.custom_vjp
    def f(prob, qacc0, consts):
        return run(prob, qacc0, consts)

    def f_fwd(prob, qacc0, consts):
        out = run(prob, qacc0, consts)
        return out, (prob, out[0], qacc0, consts)

    def f_bwd(res, cts):
        prob, qacc, qacc0, consts = res
        abar = cts[0]
        _, ev, _, _ = common.primal_cost(layout, prob, qacc)
        H = prob.M + common.constraint_hessian(layout, prob, ev)
        w = jsl.cho_solve(jsl.cho_factor(H, lower=True), abar)
        _, vjp = jax.vjp(lambda p: _optimality(layout, p, qacc), prob)
        (pbar,) = vjp(-w)
        return pbar, jp.zeros_like(qacc0), jax.tree.map(jp.zeros_like, consts)

    f.defvjp(f_fwd, f_bwd)
    return f


def solve(m: Model, d: Data) -> Data:
    """mj_fwdConstraint: constraint forces and the constrained acceleration."""
    plan = constraint.plan(m)
    M = inertia.full_m(m, d)
    prob = constraint.problem(m, d, M)
    layout = plan.layout
    opt = m.opt

    def minv(x):
        return inertia.solve_m(m, d, x)

    qacc0 = d.qacc_smooth
    if not (opt.disableflags & DisableBit.WARMSTART):
        c_ws, *_ = common.primal_cost(layout, prob, d.qacc_warmstart)
        c_sm, *_ = common.primal_cost(layout, prob, d.qacc_smooth)
        qacc0 = jp.where(c_ws < c_sm, d.qacc_warmstart, d.qacc_smooth)
    iters = dict(iterations=int(opt.iterations))
    if opt.solver != SolverType.PGS:
        iters.update(ls_iterations=int(opt.ls_iterations))
    consts = dict(tolerance=opt.tolerance, meaninertia=m.stat.meaninertia)
    if opt.solver != SolverType.PGS:
        consts.update(ls_tolerance=opt.ls_tolerance)

    implicit = m.config.gradients == "implicit"

    def run(prob, qacc0, consts, minv):
        """(qacc, (force, niter, improvement, gradient)) with the model's solver."""
        kw = {**iters, **consts, "early_exit": implicit}
        if opt.solver == SolverType.PGS:
            force0 = jp.zeros_like(prob.D)
            force, qacc, niter, improvement = pgs.solve_pgs(layout, prob, force0, minv=minv, **kw)
            gradient = jp.zeros((), qacc.dtype)
        elif opt.solver == SolverType.CG:
            qacc, ev, niter, improvement, gradient = primal.solve_cg(layout, prob, qacc0, minv=minv, **kw)
            force = ev.force
        else:
            qacc, ev, niter, improvement, gradient = primal.solve_newton(layout, prob, qacc0, **kw)
            force = ev.force
        return qacc, (force, niter, jp.asarray(improvement, qacc.dtype), jp.asarray(gradient, qacc.dtype))

    if implicit:
        # no closure over traced values inside custom_vjp: M^-1 from d's L'DL factors, passed in `consts`
        # (tree-structured: O(nM) per solve, no dense Cholesky of M)
        def run_closed(prob, qacc0, consts):
            consts = dict(consts)
            qld, qldinv = consts.pop("qLD"), consts.pop("qLDiagInv")
            return run(prob, qacc0, consts, lambda x: inertia.solve_factored(m, qld, qldinv, x))

        consts.update(qLD=d.qLD, qLDiagInv=d.qLDiagInv)

        qacc, (force, niter, improvement, gradient) = _implicit(layout, run_closed)(prob, qacc0, consts)
        _, ev, _, _ = common.primal_cost(layout, prob, qacc)
        # value: the solver's own forces (PGS: its dual iterate, which near a stiff optimum is far more accurate
        # than the force law re-evaluated at qacc, whose error is D J times qacc's; primal solvers: the same
        # numbers); derivative: the force law at qacc, through the implicit qacc
        force = ev.force + jax.lax.stop_gradient(force - ev.force)
        state = ev.state
    else:
        qacc, (force, niter, improvement, gradient) = run(prob, qacc0, consts, minv)
        _, ev, _, _ = common.primal_cost(layout, prob, qacc)
        state = ev.state
    return d.replace(
        qacc=qacc,
        efc_force=force,
        efc_state=state,
        efc_b=d.efc_J @ d.qacc_smooth - d.efc_aref,
        qfrc_constraint=force @ d.efc_J,
        solver_niter=niter.astype(jp.int32),
        solver_improvement=jp.asarray(improvement, qacc.dtype),
        solver_gradient=jp.asarray(gradient, qacc.dtype),
    )
