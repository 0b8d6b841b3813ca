"""Trajectory optimisation on the differentiable step: gradient shooting (optax), iLQR on the exact transition
Jacobians (box-QP control bounds, parallel line search, convergence report), predictive sampling and MPPI over
spline-parameterised controls, residual-style cost helpers, and receding-horizon control (MPC) in closed loop
against the simulator or MuJoCo C, timed (`closed_loop`: real-time factor).

    from mjx_lite import trajopt
    res = trajopt.shooting(m, d0, cost, horizon, optimizer=optax.adam(1e-2), iterations=200)
    res = trajopt.ilqr(m, d0, cost, horizon, iterations=20)
    res = trajopt.mppi(m, d0, cost, horizon, samples=64, rng=jax.random.PRNGKey(0))
    res = trajopt.predictive_sampling(m, d0, cost, horizon, samples=256, knots=10, interpolation="cubic")
    res.ctrl (T, nu), res.states.qpos (T+1, nq), res.cost, res.costs (cost curve)
    run = trajopt.closed_loop(m, d0, lambda m, d, u: trajopt.ilqr(m, d, cost, 50, 1, ctrl_init=u), 50, steps=300)
    run.realtime_factor, run.cost, run.result.states.qpos (steps+1, nq)

cost(d, ctrl, t) -> () is the running cost on the Data of the forward pass at x_t (see `trajopt.common`);
terminal_cost(d) -> () is optional. Every planner is jit-compiled once per (model structure, cost function,
horizon, static options) and can be vmapped over start states: `jax.vmap(lambda d: trajopt.ilqr(m, d, ...))(ds)`.
"""

from mjx_lite.trajopt import costs, splines
from mjx_lite.trajopt.boxqp import box_qp
from mjx_lite.trajopt.common import STOP_REASONS, Report, Result, Trajectory, evaluate, planning_model, rollout
from mjx_lite.trajopt.ilqr import ilqr, regularization_update
from mjx_lite.trajopt.mpc import ClosedLoop, MPCResult, closed_loop, mpc
from mjx_lite.trajopt.mppi import mppi
from mjx_lite.trajopt.sampling import predictive_sampling
from mjx_lite.trajopt.shooting import shooting

__all__ = ["ClosedLoop", "MPCResult", "Report", "Result", "STOP_REASONS", "Trajectory", "box_qp", "closed_loop",
           "costs", "evaluate", "ilqr", "mpc", "mppi", "planning_model", "predictive_sampling",
           "regularization_update", "rollout", "shooting", "splines"]
