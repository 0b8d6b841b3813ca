"""Constraint solvers (opt.solver): Newton and CG on the primal problem, PGS on the dual.

`solve(m, d)` reads the rows made by `pipeline.constraint.make_constraint` and sets qacc, qfrc_constraint,
efc_force, efc_state and the solver diagnostics. Warm start: MuJoCo's rule, start from qacc_warmstart when its
cost is lower than that of qacc_smooth (unless the warmstart flag is disabled).
"""

from __future__ import annotations

import jax.numpy as jp

from mjx_lite.solver import common, pgs, primal
from mjx_lite.types import Data, DisableBit, Model, SolverType


def solve(m: Model, d: Data) -> Data:
    """mj_fwdConstraint: constraint forces and the constrained acceleration."""
    from mjx_lite.pipeline import constraint, inertia

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
    kw = dict(iterations=int(opt.iterations), tolerance=opt.tolerance, meaninertia=m.stat.meaninertia)
    if opt.solver == SolverType.PGS:
        force0 = jp.zeros_like(d.efc_D)
        force, qacc, niter, improvement = pgs.solve_pgs(layout, prob, force0, minv=minv, **kw)
        _, ev, _, _ = common.primal_cost(layout, prob, qacc)
        gradient = jp.zeros((), qacc.dtype)
        state = ev.state
    else:
        kw.update(ls_iterations=int(opt.ls_iterations), ls_tolerance=opt.ls_tolerance)
        if opt.solver == SolverType.CG:
            qacc, ev, niter, improvement, gradient = primal.solve_cg(layout, prob, qacc0, minv=minv, **kw)
        else:
            qacc, ev, niter, improvement, gradient = primal.solve_newton(layout, prob, qacc0, **kw)
        force = ev.force
        state = ev.state
    return d.replace(
        qacc=qacc,
        efc_force=force,
        efc_state=state,
        efc_b=d.efc_J @ d.qacc_smooth - d.efc_aref,
        qfrc_constraint=d.efc_J.T @ force,
        solver_niter=niter.astype(jp.int32),
        solver_improvement=jp.asarray(improvement, qacc.dtype),
        solver_gradient=jp.asarray(gradient, qacc.dtype),
    )
