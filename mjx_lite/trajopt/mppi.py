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
        J, _, traj = common.simulate(m, d0, u, cost, terminal_cost)
        return J, traj

    # iterations + 1 passes of one compiled body (the batched rollout is traced once); the last pass only evaluates
    def iteration(carry, xs):
        u, best = carry
        key, i = xs
        eps = jax.random.normal(key, (samples,) + u.shape, dtype) * sigma
        eps = eps.at[0].set(0.0)
        cand = jp.clip(u[None] + eps, lo, hi)
        costs, trajs = jax.vmap(total)(cand)
        finite = jp.isfinite(costs)
        costs = jp.where(finite, costs, jp.inf)
        j = jp.argmin(costs)
        better = costs[j] < best[1]
        pick = (cand[j], costs[j], jax.tree.map(lambda x: x[j], trajs))
        best = jax.tree.map(lambda new, old: jp.where(better, new, old), pick, best)
        spread = jp.std(jp.where(finite, costs, costs[j]))
        logits = -(costs - costs[j]) / (temperature * jp.maximum(spread, jp.finfo(dtype).tiny ** 0.5))
        w = jax.nn.softmax(jp.where(finite, logits, -jp.inf))
        new_u = jp.clip(jp.tensordot(w, cand, axes=1), lo, hi)
        u = jp.where(i == iterations, u, new_u)
        return (u, best), costs[0]

    keys = jax.random.split(rng, iterations + 1)
    traj0 = jax.eval_shape(lambda: total(u0)[1])
    best0 = (u0, jp.asarray(jp.inf, dtype), jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), traj0))
    (_, (best_u, best_c, best_traj)), curve = jax.lax.scan(iteration, (u0, best0),
                                                           (keys, jp.arange(iterations + 1)))  # fmt: skip
    return common.Result(ctrl=best_u, states=best_traj, cost=best_c, costs=curve)
