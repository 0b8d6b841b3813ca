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
        return common.simulate(m, d0, u, cost, terminal_cost)[0]

    value_and_grad = jax.value_and_grad(total)

    def iteration(carry, _):
        u, state, best_u, best_c = carry
        c, g = value_and_grad(u)
        g = jp.where(jp.isfinite(g), g, 0.0)
        better = c < best_c
        best_u = jp.where(better, u, best_u)
        best_c = jp.where(better, c, best_c)
        updates, state = optimizer.update(g, state, u)
        u = jp.clip(optax.apply_updates(u, updates), lo, hi)
        return (u, state, best_u, best_c), c

    init = (u0, optimizer.init(u0), u0, jp.asarray(jp.inf, u0.dtype))
    (u, _, best_u, best_c), costs = jax.lax.scan(iteration, init, None, length=iterations)
    c_last = total(u)
    better = c_last < best_c
    best_u = jp.where(better, u, best_u)
    costs = jp.concatenate([costs, c_last[None]])
    total_cost, _, traj = common.simulate(m, d0, best_u, cost, terminal_cost)
    return common.Result(ctrl=best_u, states=traj, cost=total_cost, costs=costs)
