"""MPPI (model-predictive path integral, Williams et al. 2016) over spline-parameterised controls.

Each iteration rolls out `samples` noisy copies of the nominal spline knots in parallel (vmap), weights them by
exp(-(J - min J) / (temperature * std J)) and moves the nominal knots to the weighted mean (`trajopt.sampling` holds
the shared machinery: knots, interpolation, noise schedule). Sample 0 is the nominal itself (no noise), so the cost
curve is the nominal's cost and the nominal never gets worse unnoticed: the returned controls are the lowest-cost
sample seen. With the default knots (one per step, zero-order) the knots are the controls themselves.
"""

from __future__ import annotations

import jax

from mjx_lite.trajopt import common, sampling
from mjx_lite.types import Data, Model

__all__ = ["mppi"]


def mppi(m: Model, d0: Data, cost: common.Cost, horizon: int, samples: int = 64, rng: jax.Array | None = None,
         iterations: int = 10, *, noise_std=0.2, temperature: float = 0.3, ctrl_init: jax.Array | None = None,
         terminal_cost: common.TerminalCost | None = None, knots: int | None = None, interpolation: str = "zero",
         noise_decay: float = 1.0) -> common.Result:  # fmt: skip
    """Minimise J(ctrl) (see `trajopt.common`) by MPPI.

    Args:
      m, d0: model and start state.
      cost: cost(d, ctrl, t) -> () running cost; terminal_cost: terminal_cost(d) -> () (optional).
      horizon: T (static); samples: rollouts per iteration (static, >= 2); iterations: static.
      rng: a `jax.random` key (default PRNGKey(0)).
      noise_std: standard deviation of the knots' noise at iteration 0, as a fraction of each actuator's half
        control range (of 1 for actuators without a range); a scalar or (nu,). noise_decay: its factor per
        iteration (1: constant).
      temperature: softmin temperature relative to the standard deviation of the sample costs.
      ctrl_init: (T, nu) initial controls (the knots start at their least-squares fit).
      knots: K spline knots (static, default T); interpolation: "zero", "linear" or "cubic" (`trajopt.splines`).

    Returns:
      `Result` with the best controls seen, their rollout and cost, and the cost curve (iterations + 1,) of the
      nominal controls. jit-compiled once per (model structure, cost, horizon, samples, iterations, knots,
      interpolation).
    """
    return sampling.sample(m, d0, cost, horizon, samples, rng, iterations, method="mppi", knots=knots,
                           interpolation=interpolation, noise_std=noise_std, noise_decay=noise_decay,
                           temperature=temperature, ctrl_init=ctrl_init, terminal_cost=terminal_cost,
                           name="mppi")  # fmt: skip
