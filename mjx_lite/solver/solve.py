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

from collections.abc import Callable

import jax
import jax.numpy as jp
import jax.scipy.sparse.linalg as jssl
import numpy as np

from mjx_lite import linalg
from mjx_lite.config import Config, matmul_precision
from mjx_lite.config import linalg as config_linalg
from mjx_lite.config import solver_batch as config_solver_batch
from mjx_lite.pipeline import constraint, inertia, kernels
from mjx_lite.solver import common, direct, island, noslip, pgs, pgs_order, primal
from mjx_lite.types import MINVAL, Data, DisableBit, Model, SolverType


def _optimality(layout: common.Layout, prob: common.Problem, qacc: jax.Array) -> jax.Array:
    """(nv,) g = M (qacc - qacc_smooth) - J' f(J qacc - aref): zero at the optimum."""
    _, ev, _, Ma = common.primal_cost(layout, prob, qacc)
    return Ma - common.p_jt_mul(prob, ev.force)


def bwd_cg_rtol(dtype) -> float:
    """Relative residual at which the matrix-free backward solve stops: eps^0.75 of the dtype (1.8e-12 in float64,
    6.4e-6 in float32): well below the error of the forward solution it differentiates."""
    return float(jp.finfo(dtype).eps) ** 0.75


def bwd_cg_maxiter(nv: int) -> int:
    """Bound on the matrix-free backward solve's iterations (it stops at bwd_cg_rtol, usually after tens)."""
    return max(100, 2 * nv)


def _zero_cotangent(x: jax.Array):
    """The zero cotangent of an input: float0 for integer arrays (PGS's block order keys), zeros otherwise."""
    if jp.issubdtype(x.dtype, jp.integer) or jp.issubdtype(x.dtype, jp.bool_):
        return np.zeros(x.shape, jax.dtypes.float0)
    return jp.zeros_like(x)


def _implicit(layout: common.Layout, run: Callable, config: Config, minv_of: Callable | None = None):
    """Wrap run(prob, start, consts) -> (qacc, jar, stats) with the implicit-function VJP at the returned qacc.

    jar = J qacc - aref is differentiated as that function of the problem and of qacc; the start (the solver's
    initial point) gets a zero cotangent. minv_of(consts) -> (x -> M^-1 x): given, the backward solve with H is
    matrix-free conjugate gradients preconditioned by M^-1; None: H is formed and Cholesky-factorised.
    config: the model's; its matmul_precision also holds in the backward pass (traced outside the forward's
    context).
    """

    @jax.custom_vjp
    def f(prob, start, consts):
        return run(prob, start, consts)

    def f_fwd(prob, start, consts):
        out = run(prob, start, consts)
        return out, (prob, out[0], consts, start)  # the start's cotangent is zero (only its shapes are read)

    def f_bwd(res, cts):
        with matmul_precision(config):
            prob, qacc, consts, start = res
            abar = cts[0] + common.p_jt_mul(prob, cts[1])  # jar's cotangent reaches qacc through J
            _, ev, _, _ = common.primal_cost(layout, prob, qacc)
            if minv_of is None:
                H = common.full_m(layout, prob) + common.constraint_hessian(layout, prob, ev)
                w = linalg.spd_solve(H, abar, library=config_linalg(config) == "library", mindiag=MINVAL)
            else:
                w, _ = jssl.cg(lambda v: common.hess_mul(layout, prob, ev, v), abar, M=minv_of(consts),
                               tol=bwd_cg_rtol(abar.dtype), maxiter=bwd_cg_maxiter(abar.shape[0]))  # fmt: skip

            def g_and_jar(p):
                return _optimality(layout, p, qacc), common.p_j_mul(p, qacc) - p.aref

            _, vjp = jax.vjp(g_and_jar, prob)
            (pbar,) = vjp((-w, cts[1]))
            return pbar, jax.tree.map(_zero_cotangent, start), jax.tree.map(_zero_cotangent, consts)

    f.defvjp(f_fwd, f_bwd)
    return f


def _value_with_derivative_of(value: jax.Array, formula: Callable, *args) -> jax.Array:
    """`value` as the primal and the derivative of `formula(*args)` as its tangent (value's own tangent is dropped).

    For quantities a solver kernel already computed (value, any shape) whose derivative is that of a closed formula
    of its inputs: the formula is evaluated only in the tangent program, never in the primal one.
    """

    @jax.custom_jvp
    def f(value, *args):
        del args
        return value

    @f.defjvp
    def f_jvp(primals, tangents):
        _, dvalue = jax.jvp(formula, primals[1:], tangents[1:])
        return primals[0], dvalue

    return f(value, *args)


def _constraint_qfrc(prob: common.Problem, force: jax.Array, jtf: jax.Array) -> jax.Array:
    """qfrc_constraint = J' force (nv,): the value is `jtf`, the solver's own J' force at its final iterate (no
    further pass over J); the derivative is that of J' force (with force's own derivative)."""
    return _value_with_derivative_of(jtf, common.p_jt_mul, prob, force)


def _smooth_jar(prob: common.Problem, value: jax.Array) -> jax.Array:
    """efc_b = J qacc_smooth - aref (nefc,): the value is `value` (computed by the fused solver kernel), the
    derivative that of the formula."""
    return _value_with_derivative_of(value, lambda p: common.p_j_mul(p, p.qacc_smooth) - p.aref, prob)


def _force_law(layout: common.Layout, prob: common.Problem, jar: jax.Array, force: jax.Array) -> jax.Array:
    """efc_force (nefc,): the value is the solver's `force`, the derivative that of the force law at jar
    (common.eval_constraints), which is evaluated only in the tangent program."""
    return _value_with_derivative_of(force, lambda p, x: common.eval_constraints(layout, p, x).force, prob, jar)


def solve(m: Model, d: Data) -> Data:
    """mj_fwdConstraint: constraint forces and the constrained acceleration."""
    plan = constraint.plan(m)
    prob = constraint.problem(m, d)
    layout = plan.layout
    opt = m.opt

    def minv(x):
        return inertia.solve_m(m, d, x)

    fused = kernels.primal_fused(m, layout, prob.J_colind is not None)
    fused_pgs = kernels.pgs_fused(m, layout, prob.J_colind is not None)  # PGS as one kernel (kernels/pgs.py)
    warm = not (opt.disableflags & DisableBit.WARMSTART)
    # a few scalar rows (Config.direct_solve_rows): Newton's and CG's optimum exactly, without iterations
    # (solver/direct.py; no start, no islands: the whole system's optimum is every island's)
    exact = (not fused and opt.solver != SolverType.PGS and int(opt.iterations) > 0
             and direct.applies(layout, m.config.direct_solve_rows))  # fmt: skip
    # the start: qacc_smooth (where Ma = 0), or the warm start when its cost is lower (MuJoCo's rule); the fused
    # kernel chooses it itself from qacc_warmstart (and returns efc_b and efc_state: no XLA before or after it)
    # (two matrix-vector products: one product with the two columns stacked ran slower on XLA:CPU, 4.0 against
    # 2 x 1.3 ms for the humanoid at batch 4096)
    if fused:
        start, jar_smooth = ((d.qacc_warmstart,) if warm else ()), None
    elif exact:
        start, jar_smooth = None, common.p_j_mul(prob, prob.qacc_smooth) - prob.aref
    elif opt.solver == SolverType.PGS:
        # PGS starts from the force law at qacc_warmstart (zeroed by the solver when its dual cost is positive) and
        # sweeps its blocks in a shuffle of MuJoCo's efc order (integer keys: no cotangent)
        start = {"qacc_warmstart": d.qacc_warmstart if warm else None,
                 "block_key": pgs_order.block_keys(m, d, plan)}  # fmt: skip
        jar_smooth = None if fused_pgs else common.p_j_mul(prob, prob.qacc_smooth) - prob.aref
    else:
        start, jar_smooth = common.solver_start(layout, prob, d.qacc_warmstart if warm else None)
    iters = dict(iterations=int(opt.iterations))
    if opt.solver != SolverType.PGS:
        iters.update(ls_iterations=int(opt.ls_iterations))
    # every solver scales its stopping tests by the trace of the current mass matrix (MuJoCo 4.0), not meaninertia
    consts = dict(tolerance=opt.tolerance)
    if opt.solver != SolverType.PGS:
        consts.update(ls_tolerance=opt.ls_tolerance)

    # MuJoCo 4.0 solves each constraint island on its own unless <flag island="disable"/>: the islands of this
    # problem (integers: no cotangent) ride in `consts`; the fused kernels solve the whole system. With one tree
    # there is at most one island, holding every dof: the whole-system solve is that island's (same trace scale,
    # same iterates), without the island search and the segment sums (humanoid, CPU, batch 64: 13.6k vs 16.4k
    # steps/s with them)
    per_island = not (opt.disableflags & DisableBit.ISLAND) and not (fused or fused_pgs)
    islands_on, one_island = per_island and m.ntree > 1, per_island and m.ntree == 1
    if islands_on and (not exact or opt.noslip_iterations > 0):  # the exact solve needs none; noslip may
        isl = island.find(prob, m.dof_treeid, m.ntree)
    if islands_on and not exact:
        consts.update(dof_island=isl.dof_island, efc_island=isl.efc_island)

    implicit = m.config.gradients == "implicit"
    library = config_linalg(m.config) == "library"
    refill = config_solver_batch(m.config) == "refill"

    def run(prob, start, consts, minv, factors):
        """(qacc, jar = J qacc - aref, (force, J' force, niter, improvement, gradient, ends)) with the model's
        solver; ends: the fused kernel's (efc_b, efc_state), or None on the XLA path. factors: (qLD, qLDiagInv),
        M^-1's factors (read by the fused CG kernel)."""
        kw = {**iters, **consts, "early_exit": implicit}
        islands = (kw.pop("dof_island"), kw.pop("efc_island"), m.ntree) if "dof_island" in kw else None
        ends = None
        if fused:  # Newton / CG, its start and the rows' states as one fused kernel (Config.kernels; kernels/primal.py)
            qacc, jar, force, jtf, niter, improvement, gradient, efc_b, state = kernels.solve_primal(
                m, layout, prob, start[0] if start else None, factors, {**kw, "library": library})

            ends = (efc_b, state)
        elif fused_pgs:  # PGS's start, sweeps and end as one fused kernel (kernels/pgs.py)
            force, qacc, jar, jtf, niter, improvement, efc_b = kernels.solve_pgs(
                m, layout, prob, start["qacc_warmstart"], start["block_key"], factors, kw)
            gradient = jp.zeros_like(improvement)
            ends = (efc_b, None)
        elif exact:
            jar_s = common.p_j_mul(prob, prob.qacc_smooth) - prob.aref
            qacc, jar, ev, jtf, niter, improvement, gradient = direct.solve_direct(layout, prob, minv, jar_s)
            force = ev.force
        elif opt.solver == SolverType.PGS:
            if start["qacc_warmstart"] is None:
                force0 = jp.zeros_like(prob.D)
            else:
                force0 = common.eval_constraints(layout, prob, common.p_j_mul(prob, start["qacc_warmstart"])
                                                 - prob.aref).force  # fmt: skip
            force, qacc, niter, improvement = pgs.solve_pgs(layout, prob, force0, minv=minv, refill=refill,
                                                            block_key=start["block_key"], islands=islands,
                                                            **kw)  # fmt: skip
            jar = common.p_j_mul(prob, qacc) - prob.aref
            jtf = common.p_jt_mul(prob, force)
            gradient = jp.zeros_like(improvement)
        else:
            solver = primal.solve_cg if opt.solver == SolverType.CG else primal.solve_newton
            extra = {"minv": minv} if opt.solver == SolverType.CG else {"library": library}
            qacc, jar, ev, jtf, niter, improvement, gradient = solver(layout, prob, start, **extra, **kw, refill=refill,
                                                                      islands=islands)  # fmt: skip
            force = ev.force
        stats = (force, jtf, niter, jp.asarray(improvement, qacc.dtype), jp.asarray(gradient, qacc.dtype), ends)
        return qacc, jar, stats

    if implicit:
        # no closure over traced values inside custom_vjp: M^-1 from d's L'DL factors, passed in `consts`
        # (tree-structured: O(nM) per solve, no dense Cholesky of M)
        def minv_of(consts):
            return lambda x: inertia.solve_factored(m, consts["qLD"], consts["qLDiagInv"], x)

        def run_closed(prob, start, consts):
            minv_c = minv_of(consts)
            factors = (consts["qLD"], consts["qLDiagInv"])
            consts = {k: v for k, v in consts.items() if k not in ("qLD", "qLDiagInv")}
            return run(prob, start, consts, minv_c, factors)

        consts.update(qLD=d.qLD, qLDiagInv=d.qLDiagInv)
        matrix_free = prob.J_colind is not None and opt.solver == SolverType.CG
        f = _implicit(layout, run_closed, m.config, minv_of if matrix_free else None)
        qacc, jar, (force, jtf, niter, improvement, gradient, ends) = f(prob, start, consts)
        # value: the solver's own forces (PGS: its dual iterate, which near a stiff optimum is far more accurate
        # than the force law re-evaluated at qacc, whose error is D J times qacc's; primal solvers: the same
        # numbers); derivative: the force law at qacc, through the implicit qacc
        force = _force_law(layout, prob, jar, force)
        if not fused:  # the rows' states (the fused kernel returned them)
            ev = common.eval_constraints(layout, prob, jar)
    else:
        qacc, jar, (force, jtf, niter, improvement, gradient, ends) = run(prob, start, consts, minv,
                                                                         (d.qLD, d.qLDiagInv))  # fmt: skip
        if not fused:
            ev = common.eval_constraints(layout, prob, jar)
    if fused:  # efc_b's derivative is that of J qacc_smooth - aref (the solver's custom_vjp drops the kernel's)
        efc_b, state = _smooth_jar(prob, ends[0]), ends[1]
    elif opt.solver == SolverType.PGS:  # MuJoCo's PGS leaves the dual state of its forces (dualState)
        efc_b = _smooth_jar(prob, ends[0]) if fused_pgs else jar_smooth
        state = noslip.dual_state(layout.kind, layout.cones, force, prob.frictionloss, prob.mask, prob.cone_mu,
                                  prob.cone_friction)  # fmt: skip
    else:
        efc_b, state = jar_smooth, ev.state
    niter_island = jp.zeros((m.ntree,), jp.int32)
    if one_island:
        niter_island = jp.reshape(niter, (1,)).astype(jp.int32)
    if niter.ndim:  # per island (the last entry: dofs of no island): the most iterations of any island, its stats
        niter_island = niter[: m.ntree].astype(jp.int32)
        top = jp.argmax(niter)
        niter, improvement, gradient = niter[top], improvement[top], gradient[top]
    d = d.replace(
        qacc=qacc,
        solver_niter_island=niter_island,
        efc_force=force,
        efc_state=state,
        efc_b=efc_b,
        qfrc_constraint=_constraint_qfrc(prob, force, jtf),
        solver_niter=niter.astype(jp.int32),
        solver_improvement=jp.asarray(improvement, qacc.dtype),
        solver_gradient=jp.asarray(gradient, qacc.dtype),
    )
    if opt.noslip_iterations <= 0:
        return d
    sweep_islands = None  # noslip per island as the main solver (one tree: its live rows are the one island)
    if islands_on:
        sweep_islands = (isl.dof_island, isl.efc_island, m.ntree)
    elif one_island:
        sweep_islands = (jp.zeros((m.nv,), jp.int32), jp.where(prob.mask, 0, -1).astype(jp.int32), 1)
    return noslip.apply(m, d, plan, prob, sweep_islands)
