"""iLQR (the deterministic iLQG of Tassa, Erez and Todorov 2012) on the exact transition Jacobians.

Each iteration linearises the dynamics along the current trajectory with `derivatives.transition` (tangent-space
states, vmapped over the horizon), expands the running and terminal costs to second order (autodiff through
`forward`; the Hessians made positive semi-definite by taking the absolute values of their eigenvalues, the
gradients exact), runs the Riccati backward pass with Levenberg-Marquardt regularisation mu on Q_uu, the control
bounds by a box-QP per step (projected Newton, `trajopt.boxqp`; clamped controls get no feedback, Tassa, Mansard
and Todorov 2014), and a forward pass with feedback u = clip(u_nom + alpha k + K dx) for all the line search's step
sizes alpha at once (one batched rollout). The lowest-cost trajectory is kept when it lowers the cost; mu follows
Tassa's schedule (`regularization_update`: shrinks after a success, grows ever faster after failures). The
iteration count is static; once the relative improvement of an accepted step falls below `tolerance` (or mu reaches
its limit without a descent) the remaining iterations are skipped (`lax.cond`) and `Result.report` says why.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import derivatives, linalg
from mjx_lite.config import linalg as config_linalg
from mjx_lite.trajopt import boxqp, common
from mjx_lite.types import Data, Model

__all__ = ["ilqr", "regularization_update"]

DEFAULT_ALPHAS = (1.0, 0.5, 0.25, 0.1, 0.03, 0.01)
MU_MIN = 1e-8  # regularisation floor (relative to Q_uu's diagonal, see backward)
MU_MAX = 1e8  # a mu this large means no descent direction was found
MU_FACTOR = 2.0  # Tassa's delta_0: the base factor of the schedule
DEFAULT_TOLERANCE = 1e-6  # relative cost improvement below which an accepted step ends the iterations
DEFAULT_RETRIES = 0  # backward pass and line search repeated with a raised mu within an iteration (see `ilqr`); 0 by
# default: with 4, the slow closed-loop acrobot test (one iteration per control step, tuned on Tassa's loop) failed


def regularization_update(mu, delta, accepted, *, factor: float = MU_FACTOR, mu_min: float = MU_MIN,
                          mu_max: float = MU_MAX):  # fmt: skip
    """Tassa's regularisation schedule (Tassa, Erez and Todorov 2012, section II.F): (mu, delta) -> (mu', delta').

    After an accepted step delta = min(delta / factor, 1 / factor) and mu shrinks by delta (to mu_min at least);
    after a rejected one delta = max(delta * factor, factor) and mu grows by delta, from mu_min at least: repeated
    failures raise mu ever faster, repeated successes lower it ever faster. mu is kept in [mu_min, mu_max].
    Scalars or arrays (elementwise); accepted: bool.
    """
    down = jp.minimum(delta / factor, 1.0 / factor)
    up = jp.maximum(delta * factor, factor)
    delta = jp.where(accepted, down, up)
    mu = jp.where(accepted, mu * delta, jp.maximum(mu, mu_min) * delta)
    return jp.clip(mu, mu_min, mu_max), delta


def ilqr(m: Model, d0: Data, cost: common.Cost, horizon: int, iterations: int = 20, *,
         ctrl_init: jax.Array | None = None, terminal_cost: common.TerminalCost | None = None,
         regularization: float = 1e-6, alphas: tuple[float, ...] = DEFAULT_ALPHAS,
         tolerance: float = DEFAULT_TOLERANCE, retries: int = DEFAULT_RETRIES,
         qp_iterations: int = boxqp.DEFAULT_ITERATIONS) -> common.Result:  # fmt: skip
    """Minimise J(ctrl) (see `trajopt.common`) with iLQR.

    Args:
      m, d0: model and start state.
      cost: cost(d, ctrl, t) -> () running cost; terminal_cost: terminal_cost(d) -> () (optional). Both are
        expanded to second order by autodiff through `forward` (reverse-over-reverse where the model has
        constraints and the implicit solver gradient, which has no forward mode).
      horizon: T (static); iterations: number of iLQR iterations (static).
      ctrl_init: (T, nu) initial controls (default zeros clipped into range).
      regularization: initial mu: Q_uu + mu * mean|diag Q_uu| * I at each step.
      alphas: the line-search step sizes tried in parallel each iteration (one batched rollout; only their
        number is static).
      tolerance: stop when an accepted step lowers the cost by less than this fraction of it.
      retries: when no step size lowers the cost (or the backward pass fails), the backward pass and the line
        search are repeated within the same iteration with mu raised by the schedule, up to this many times; the
        expansion (the Jacobians, the costs' derivatives) is reused, so an iteration is one expansion. 0 (the
        default): each rejection ends its iteration (Tassa's loop). A schedule that had lowered mu to its floor
        otherwise spends several whole iterations climbing back (measured on the acrobot's open-loop swing-up: 7 of
        30; retries=4 folds 6 of them). In a receding horizon (one iteration per control step) retries change the
        closed loop and its time per step.
      qp_iterations: projected Newton iterations of the per-step box-QP (static).

    Returns:
      `Result`: controls, their rollout, total cost, the cost curve (iterations + 1,; after a stop the cost stays
        flat), the feedback gains K (T, nu, 2nv+na) and the convergence `Report` (iterations run, reason, final mu,
        accepted step sizes, the mu of each iteration's last backward pass). jit-compiled once per (model structure,
        cost, horizon, iterations, len(alphas)); vmap over `d0` works.
    """
    iterations = common.check_iterations(iterations)
    u0 = common.check_horizon(m, horizon, ctrl_init, d0.qpos.dtype)
    alphas = tuple(float(a) for a in alphas)
    if not alphas or any(not np.isfinite(a) or a <= 0 for a in alphas):
        raise ValueError(f"ilqr: alphas must be positive step sizes, not {alphas!r}")
    if not np.isfinite(regularization) or regularization < 0:
        raise ValueError(f"ilqr: regularization must be a non-negative number, not {regularization!r}")
    if not np.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"ilqr: tolerance must be a non-negative number, not {tolerance!r}")
    qp_iterations = common.check_iterations(qp_iterations, "qp_iterations")
    dtype = u0.dtype
    if isinstance(retries, bool) or not isinstance(retries, (int, np.integer)) or retries < 0:
        raise ValueError(f"ilqr: retries must be a non-negative int, not {retries!r}")
    return _ilqr(m, d0, u0, jp.asarray(regularization, dtype), jp.asarray(alphas, dtype), jp.asarray(tolerance, dtype),
                 jp.asarray(retries, jp.int32), cost, terminal_cost, iterations, qp_iterations)  # fmt: skip


def _grad_hessian(m: Model, f, z, state_only: bool = False):
    """(gradient, Hessian) of a scalar function f at z from one trace of f: forward-over-reverse where the model's
    forward pass supports forward mode or f runs none (state_only), else reverse-over-reverse (the implicit solver
    gradient is reverse-only)."""
    g = jax.grad(f)

    def twice(z):
        gz = g(z)
        return gz, gz

    forward_ok = state_only or m.njmax == 0 or m.config.gradients == "unrolled"  # forward's solver decides
    H, grad = (jax.jacfwd if forward_ok else jax.jacrev)(twice, has_aux=True)(z)
    return grad, H


def _psd(H: jax.Array, library: bool) -> jax.Array:
    """|H|: symmetric H (..., n, n) with its eigenvalues replaced by their absolute values (the saddle-free Newton
    metric of Dauphin et al. 2014). Concave parts of a cost (1 - cos(angle) near the bottom of a swing) would make
    Q_uu indefinite; clipping their curvature to 0 leaves the quadratic model flat there (measured on the cartpole
    swing-up: 330 after 30 iterations, not upright), |H| keeps its magnitude (upright after 10 iterations). The
    gradient is exact, so accepted steps descend on the true cost. library: JAX's batched eigh (see
    `Config.linalg`), else one eigh per matrix (`mjx_lite.linalg.unbatched`)."""
    H = 0.5 * (H + jp.swapaxes(H, -1, -2))
    if library:
        w, v = jp.linalg.eigh(H)
    else:  # one LAPACK call per matrix, also under a user's vmap: an unbatched call never waits on the thread pool
        eigh = linalg.unbatched(jp.linalg.eigh)
        for _ in range(H.ndim - 2):
            eigh = jax.vmap(eigh)
        w, v = eigh(H)
    return jp.einsum("...ij,...j,...kj->...ik", v, jp.abs(w), v)


def _perturb(m: Model, d: Data, dx: jax.Array) -> Data:
    nv, na = m.nv, m.na
    dq, dv, da = dx[:nv], dx[nv : 2 * nv], dx[2 * nv : 2 * nv + na]
    return d.replace(qpos=derivatives.integrate_pos(m, d.qpos, dq, 1.0), qvel=d.qvel + dv, act=d.act + da)


def _state_diff(m: Model, qpos0, qvel0, act0, d: Data) -> jax.Array:
    """Tangent-space difference (2nv+na,) of the state of d from (qpos0, qvel0, act0)."""
    return jp.concatenate([derivatives.differentiate_pos(m, qpos0, d.qpos), d.qvel - qvel0, d.act - act0])


@functools.partial(jax.jit, static_argnames=("cost", "terminal_cost", "iterations", "qp_iterations"))
def _ilqr(m, d0, u0, mu0, alpha_arr, tolerance, retries, cost, terminal_cost, iterations, qp_iterations):
    dtype = u0.dtype
    nv, na, nu = m.nv, m.na, m.nu
    nx = 2 * nv + na
    T = u0.shape[0]
    lo, hi = common.ctrl_bounds(m, dtype)
    steps = jp.arange(T)
    library = config_linalg(m.config) == "library"
    # costs of the state alone (common.reads_only_state) are evaluated and expanded without a forward pass
    state_only = common.reads_only_state(cost, d0, u0[0], steps[0])
    terminal_only = terminal_cost is not None and common.reads_only_state(terminal_cost, d0)

    def run(u_nom, traj_nom, k, K, alpha):
        """Forward pass with feedback; (total, u, states (qpos, qvel, act, time, warmstart) with T+1 rows)."""

        def body(d, xs):
            un, kt, Kt, qn, vn, an, t = xs
            dx = _state_diff(m, qn, vn, an, d)
            u = jp.clip(un + alpha * kt + Kt @ dx, lo, hi)
            d_in = d.replace(ctrl=u)
            d_next = derivatives.step(m, d_in)
            c = common.check_scalar(cost(common.cost_data(m, d_in, d_next, state_only), u, t), "cost").astype(dtype)
            return d_next, (c, u, (d_in.qpos, d_in.qvel, d_in.act, d_in.time, d_in.qacc_warmstart))

        qn, vn, an = traj_nom[0][:-1], traj_nom[1][:-1], traj_nom[2][:-1]
        d_last, (cs, u, states) = jax.lax.scan(body, d0, (u_nom, k, K, qn, vn, an, steps))
        total = jp.sum(cs)
        if terminal_cost is not None:
            df = common.forward_for(m, d_last.replace(ctrl=u[-1]), terminal_only)
            total = total + common.check_scalar(terminal_cost(df), "terminal_cost").astype(dtype)
        last = (d_last.qpos, d_last.qvel, d_last.act, d_last.time, d_last.qacc_warmstart)
        states = jax.tree.map(lambda a, b: jp.concatenate([a, b[None]]), states, last)
        return total, u, states

    def expand(u, traj):
        """Dynamics Jacobians and cost expansions along a trajectory."""
        qpos, qvel, act, time, warm = traj

        def at(t):
            return d0.replace(qpos=qpos[t], qvel=qvel[t], act=act[t], time=time[t], qacc_warmstart=warm[t])

        def per_step(t, ut):
            d = at(t).replace(ctrl=ut)
            A, B, _, _ = derivatives.transition(m, d, sensors=False)

            def running(z):
                dd = _perturb(m, d, z[:nx]).replace(ctrl=ut + z[nx:])
                return cost(common.forward_for(m, dd, state_only), ut + z[nx:], t).astype(dtype)

            g, H = _grad_hessian(m, running, jp.zeros((nx + nu,), dtype), state_only)
            return A, B, g, H

        A, B, g, H = jax.vmap(per_step)(steps, u)
        H = _psd(H, library)
        if terminal_cost is None:
            Vx, Vxx = jp.zeros((nx,), dtype), jp.zeros((nx, nx), dtype)
        else:
            dT = at(T).replace(ctrl=u[-1])

            def terminal(dx):
                return terminal_cost(common.forward_for(m, _perturb(m, dT, dx), terminal_only)).astype(dtype)

            Vx, Vxx = _grad_hessian(m, terminal, jp.zeros((nx,), dtype), terminal_only)
            Vxx = _psd(Vxx, library)
        return A, B, g, H, Vx, Vxx

    def backward(A, B, g, H, Vx, Vxx, u, mu):
        eye = jp.eye(nu, dtype=dtype)
        tiny = jp.finfo(dtype).tiny ** 0.5

        def body(carry, xs):
            Vx, Vxx = carry
            At, Bt, gt, Ht, ut = xs
            lx, lu = gt[:nx], gt[nx:]
            lxx, luu, lux = Ht[:nx, :nx], Ht[nx:, nx:], Ht[nx:, :nx]
            Qx = lx + At.T @ Vx
            Qu = lu + Bt.T @ Vx
            Qxx = lxx + At.T @ Vxx @ At
            Quu = luu + Bt.T @ Vxx @ Bt
            Qux = lux + Bt.T @ Vxx @ At
            Quu = 0.5 * (Quu + Quu.T)
            # mu relative to the curvature's scale at this step (costs of any unit get the same schedule)
            Qr = Quu + (mu * (jp.mean(jp.abs(jp.diagonal(Quu))) + tiny)) * eye
            ok = boxqp.factor_ok(boxqp.spd_factor(Qr, library))  # then every free block is positive definite too
            # the feedforward step k: the box-QP on the controls' bounds shifted by the nominal controls
            k, free, cf = boxqp.box_qp(Qr, Qu, lo - ut, hi - ut, iterations=qp_iterations, library=library)
            K = jp.where(free[:, None], -boxqp.spd_solve(cf, jp.where(free[:, None], Qux, 0.0), library), 0.0)
            # the quadratic model's change of the cost along the step alpha k: alpha dv[0] + alpha^2 dv[1]
            dv = jp.stack([k @ Qu, 0.5 * k @ Quu @ k])
            Vx = Qx + K.T @ Quu @ k + K.T @ Qu + Qux.T @ k
            Vxx = Qxx + K.T @ Quu @ K + K.T @ Qux + Qux.T @ K
            Vxx = 0.5 * (Vxx + Vxx.T)
            return (Vx, Vxx), (k, K, ok, dv)

        _, (k, K, ok, dv) = jax.lax.scan(body, (Vx, Vxx), (A, B, g, H, u), reverse=True)
        good = jp.all(ok) & jp.all(jp.isfinite(k)) & jp.all(jp.isfinite(K))
        return jp.where(good, k, 0.0), jp.where(good, K, 0.0), good, jp.sum(dv, axis=0)

    zeros_k = jp.zeros((T, nu), dtype)
    zeros_K = jp.zeros((T, nu, nx), dtype)
    line_search = jax.vmap(run, in_axes=(None, None, None, None, 0))  # the rollout is traced once, batched
    zero = jp.zeros((), dtype)

    # One scan of iterations + 1 passes, each a line search (a batched rollout) then, unless it was the last pass
    # or the iterations stopped, the expansion and backward pass at the new nominal: the rollout, the transition
    # Jacobians and the backward pass are each traced (and compiled) once. Pass 0's "line search" is the
    # feedback-free forward pass of u0 (k = 0, K = 0: every step size gives the same rollout), always accepted: the
    # initial trajectory. Its nominal must still be a valid state: an all-zero quaternion would make dx, and 0 * dx,
    # NaN (free and ball joints).
    dummy = (jp.broadcast_to(d0.qpos, (T + 1, m.nq)), jp.broadcast_to(d0.qvel, (T + 1, nv)),
             jp.broadcast_to(d0.act, (T + 1, na)), jp.broadcast_to(d0.time, (T + 1,)),
             jp.broadcast_to(d0.qacc_warmstart, (T + 1, nv)))  # fmt: skip

    def search(state, first):
        """The line search with the step (k, K) of the last backward pass: (state, (accepted step size, accepted,
        the reduction the quadratic model predicted for it))."""
        u, traj, J, mu, delta, K_prev, _, k, K, (good, dv), expansion = state
        raw, us, trajs = line_search(u, traj, k, K, alpha_arr)
        totals = jp.where(jp.isfinite(raw), raw, jp.inf)
        best = jp.where(first, 0, jp.argmin(totals))
        accept = first | (good & (totals[best] < J))
        pick = lambda new, old: jp.where(accept, new[best], old)  # noqa: E731
        u = pick(us, u)
        traj = jax.tree.map(pick, trajs, traj)
        J_new = jp.where(first, raw[0], jp.where(accept, totals[best], J))
        K_prev = jp.where(accept, K, K_prev)
        mu_new, delta_new = regularization_update(mu, delta, accept)
        converged = ~first & accept & (J - J_new <= tolerance * jp.abs(J))
        stuck = ~first & ~accept & (mu >= MU_MAX)
        reason = jp.where(converged, 1, jp.where(stuck, 2, 0)).astype(jp.int32)
        mu, delta = jp.where(first, mu, mu_new), jp.where(first, delta, delta_new)
        step_size = jp.where(accept & ~first, alpha_arr[best], zero)
        # the reduction the quadratic model predicted at the accepted step size (Tassa's Delta V(alpha))
        expected = jp.where(accept & ~first, -(step_size * dv[0] + step_size**2 * dv[1]), zero)
        return (u, traj, J_new, mu, delta, K_prev, reason, k, K, (good, dv), expansion), (step_size, accept, expected)

    def improve(state):
        """The expansion along the nominal and the backward pass with the current mu: the next step (k, K)."""
        u, traj, J, mu, delta, K_prev, reason, _, _, _, _ = state
        expansion = expand(u, traj)
        k, K, good, dv = backward(*expansion, u, mu)
        return (u, traj, J, mu, delta, K_prev, reason, k, K, (good, dv), expansion)

    def rebackward(state):
        """The backward pass again with the (raised) current mu on the stored expansion: a new step (k, K)."""
        u, traj, J, mu, delta, K_prev, reason, _, _, _, expansion = state
        k, K, good, dv = backward(*expansion, u, mu)
        return (u, traj, J, mu, delta, K_prev, reason, k, K, (good, dv), expansion)

    def one_pass(carry, i):
        state, count = carry
        done = state[6] != 0  # an earlier iteration stopped: the rest are skipped
        first = i == 0

        def attempt(c):
            # a line search; after a rejected one (the schedule has raised mu) first a new backward pass
            state, tries, _, _, _, _ = c
            state = jax.lax.cond(tries > 0, rebackward, lambda s: s, state)
            mu_used = state[3]
            state, (step_size, accept, expected) = search(state, first)
            return state, tries + 1, step_size, mu_used, accept, expected

        def again(c):
            state, tries, _, _, accept, _ = c
            retry = ~first & ~accept & (state[6] == 0) & (tries <= retries)
            return ~done & ((tries == 0) | retry)

        state, _, step_size, mu_used, _, expected = jax.lax.while_loop(
            again, attempt, (state, jp.zeros((), jp.int32), zero, state[3], jp.zeros((), bool), zero))
        count = count + jp.where(done | first, 0, 1)
        state = jax.lax.cond((state[6] == 0) & (i < iterations), improve, lambda s: s, state)
        return (state, count), (state[2], step_size, mu_used, expected)

    no_expansion = (jp.zeros((T, nx, nx), dtype), jp.zeros((T, nx, nu), dtype), jp.zeros((T, nx + nu), dtype),
                    jp.zeros((T, nx + nu, nx + nu), dtype), jp.zeros((nx,), dtype), jp.zeros((nx, nx), dtype))
    init = (u0, dummy, jp.asarray(jp.inf, dtype), mu0, jp.ones((), dtype), zeros_K, jp.zeros((), jp.int32), zeros_k,
            zeros_K, (jp.ones((), bool), jp.zeros((2,), dtype)), no_expansion)  # fmt: skip
    ((u, traj, J, mu, _, K, reason, _, _, _, _), count), (costs, steps_taken, mus, expected) = jax.lax.scan(
        one_pass, (init, jp.zeros((), jp.int32)), jp.arange(iterations + 1))
    steps_taken, mus, expected = steps_taken[1:], mus[1:], expected[1:]
    qpos, qvel, act, time, _ = traj
    states = common.Trajectory(qpos=qpos, qvel=qvel, act=act, time=time)
    report = common.Report(iterations=count, reason=reason, regularization=mu, step_sizes=steps_taken,
                           regularizations=mus, expected_reductions=expected)  # fmt: skip
    return common.Result(ctrl=u, states=states, cost=J, costs=costs, gains=K, report=report)
