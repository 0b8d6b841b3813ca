"""MPPI (model-predictive path integral, Williams et al. 2016): the gradient-free sampling baseline.

Each iteration rolls out `samples` noisy copies of the nominal controls in parallel (vmap), weights them by
exp(-(J - min J) / (temperature * std J)) and moves the nominal controls to the weighted mean. Sample 0 is the
nominal itself (no noise), so the cost curve is the nominal's cost and the nominal never gets worse unnoticed:
the returned controls are the lowest-cost sample seen.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.trajopt import common
from mjx_lite.types import Data, Model

__all__ = ["mppi"]


def mppi(m: Model, d0: Data, cost: common.Cost, horizon: int, samples: int = 64, rng: jax.Array | None = None,
         iterations: int = 10, *, noise_std: float = 0.2, temperature: float = 0.3,
         ctrl_init: jax.Array | None = None,
         terminal_cost: common.TerminalCost | None = None) -> common.Result:  # fmt: skip
    """Minimise J(ctrl) (see `trajopt.common`) by MPPI.

    Args:
      m, d0: model and start state.
      cost: cost(d, ctrl, t) -> () running cost; terminal_cost: terminal_cost(d) -> () (optional).
      horizon: T (static); samples: rollouts per iteration (static, >= 2); iterations: static.
      rng: a `jax.random` key (default PRNGKey(0)).
      noise_std: standard deviation of the control noise, as a fraction of each actuator's half control range
        (of 1 for actuators without a range); a scalar or (nu,).
      temperature: softmin temperature relative to the standard deviation of the sample costs.
      ctrl_init: (T, nu) initial controls.

    Returns:
      `Result` with the best controls seen, their rollout and cost, and the cost curve (iterations + 1,) of the
      nominal controls. jit-compiled once per (model structure, cost, horizon, samples, iterations).
    """
    iterations = common.check_iterations(iterations)
    if isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 2:
        raise ValueError(f"mppi: samples must be an int >= 2, not {samples!r}")
    u0 = common.check_horizon(m, horizon, ctrl_init, d0.qpos.dtype)
    if not np.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"mppi: temperature must be positive, not {temperature!r}")
    rng = jax.random.PRNGKey(0) if rng is None else rng
    std = jp.broadcast_to(jp.asarray(noise_std, u0.dtype), (m.nu,))
    return _mppi(m, d0, u0, rng, std, jp.asarray(temperature, u0.dtype), cost, terminal_cost, int(samples),
                 iterations)  # fmt: skip


@functools.partial(jax.jit, static_argnames=("cost", "terminal_cost", "samples", "iterations"))
def _mppi(m, d0, u0, rng, std, temperature, cost, terminal_cost, samples, iterations):
    dtype = u0.dtype
    lo, hi = common.ctrl_bounds(m, dtype)
    half = jp.where(jp.isfinite(hi - lo), 0.5 * (hi - lo), 1.0)
    sigma = std * half

    def total(u):
        return common.simulate(m, d0, u, cost, terminal_cost)[0]

    def iteration(carry, key):
        u, best_u, best_c = carry
        eps = jax.random.normal(key, (samples,) + u.shape, dtype) * sigma
        eps = eps.at[0].set(0.0)
        cand = jp.clip(u[None] + eps, lo, hi)
        costs = jax.vmap(total)(cand)
        costs = jp.where(jp.isfinite(costs), costs, jp.inf)
        i = jp.argmin(costs)
        better = costs[i] < best_c
        best_u = jp.where(better, cand[i], best_u)
        best_c = jp.where(better, costs[i], best_c)
        finite = jp.isfinite(costs)
        spread = jp.std(jp.where(finite, costs, costs[i]))
        logits = -(costs - costs[i]) / (temperature * jp.maximum(spread, jp.finfo(dtype).tiny ** 0.5))
        w = jax.nn.softmax(jp.where(finite, logits, -jp.inf))
        u = jp.clip(jp.tensordot(w, cand, axes=1), lo, hi)
        return (u, best_u, best_c), costs[0]

    keys = jax.random.split(rng, iterations)
    init = (u0, u0, jp.asarray(jp.inf, dtype))
    (u, best_u, best_c), curve = jax.lax.scan(iteration, init, keys)
    c_last = total(u)
    best_u = jp.where(c_last < best_c, u, best_u)
    curve = jp.concatenate([curve, c_last[None]])
    J, _, traj = common.simulate(m, d0, best_u, cost, terminal_cost)
    return common.Result(ctrl=best_u, states=traj, cost=J, costs=curve)
