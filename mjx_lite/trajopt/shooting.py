"""Single shooting with a gradient optimiser (optax): the controls are the decision variables, the gradient of the
total cost comes from reverse-mode autodiff through the rollout (implicit solver gradients; randomly smoothed
through contact when `m.config.contact_gradients == "smooth"`)."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import optax

from mjx_lite.trajopt import common
from mjx_lite.types import Data, Model

__all__ = ["shooting"]

# the default optimiser (optimizers are compared by value for jit's cache: optax.adam(1e-2) created twice is one
# compilation, see common.StaticArg)
DEFAULT_OPTIMIZER = optax.adam(1e-2)


def shooting(m: Model, d0: Data, cost: common.Cost, horizon: int, optimizer: optax.GradientTransformation | None = None,
             iterations: int = 100, *, ctrl_init: jax.Array | None = None,
             terminal_cost: common.TerminalCost | None = None) -> common.Result:  # fmt: skip
    """Minimise J(ctrl) (see `trajopt.common`) by gradient steps of `optimizer` on the controls.

    Args:
      m, d0: model and start state (its qpos, qvel, act, applied forces).
      cost: cost(d, ctrl, t) -> () running cost; terminal_cost: terminal_cost(d) -> () (optional).
      horizon: T, the number of controls (static: one compilation per horizon).
      optimizer: an optax transformation (default `optax.adam(1e-2)`); after each update the controls are clipped
        into the actuators' ctrlrange (projected gradient).
      iterations: number of gradient steps (static).
      ctrl_init: (T, nu) initial controls (default zeros, clipped into range).

    Returns:
      `Result` with the lowest-cost controls seen, their rollout and cost, and the cost curve (iterations + 1,):
      costs[k] is the cost after k updates. Non-finite gradient entries are replaced by zero.
      jit-compiled once per (model structure, cost, horizon, optimizer, iterations); vmap over `d0` works.
    """
    iterations = common.check_iterations(iterations)
    u0 = common.check_horizon(m, horizon, ctrl_init, d0.qpos.dtype)
    opt = DEFAULT_OPTIMIZER if optimizer is None else optimizer
    if not isinstance(opt, optax.GradientTransformation):
        raise TypeError(f"shooting: optimizer must be an optax.GradientTransformation, not {type(opt).__name__}")
    return _shooting(m, d0, u0, cost, terminal_cost, common.StaticArg(opt), iterations)


@functools.partial(jax.jit, static_argnames=("cost", "terminal_cost", "optimizer", "iterations"))
def _shooting(m, d0, u0, cost, terminal_cost, optimizer, iterations):
    optimizer = optimizer.obj
    lo, hi = common.ctrl_bounds(m, u0.dtype)

    def total(u):
        J, _, traj = common.simulate(m, d0, u, cost, terminal_cost)
        return J, traj

    value_and_grad = jax.value_and_grad(total, has_aux=True)

    # iterations + 1 passes of one compiled body (the rollout is traced once): pass i evaluates the iterate after i
    # updates; the last pass only evaluates
    def iteration(carry, i):
        u, state, best = carry
        (c, traj), g = value_and_grad(u)
        g = jp.where(jp.isfinite(g), g, 0.0)
        better = c < best[1]
        best = jax.tree.map(lambda new, old: jp.where(better, new, old), (u, c, traj), best)
        updates, new_state = optimizer.update(g, state, u)
        new_u = jp.clip(optax.apply_updates(u, updates), lo, hi)
        last = i == iterations
        u = jp.where(last, u, new_u)
        state = jax.tree.map(lambda new, old: jp.where(last, old, new), new_state, state)
        return (u, state, best), c

    traj0 = jax.eval_shape(lambda: total(u0)[1])
    best0 = (u0, jp.asarray(jp.inf, u0.dtype), jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), traj0))
    (_, _, (best_u, best_c, best_traj)), costs = jax.lax.scan(iteration, (u0, optimizer.init(u0), best0),
                                                              jp.arange(iterations + 1))  # fmt: skip
    return common.Result(ctrl=best_u, states=best_traj, cost=best_c, costs=costs)
