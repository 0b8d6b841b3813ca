"""Costs in the style of MuJoCo MPC's residuals: a task computes residual vectors r_i (zero at the goal) and the cost
is sum_i w_i n_i(r_i) for norms n_i and weights w_i.

    def cost(d, u, t):
        return costs.weighted([(1.0, costs.quadratic(jp.cos(d.qpos[1]) - 1)),
                               (0.1, costs.smooth_abs(d.qpos[:1], 0.1)),
                               (0.01, costs.quadratic(u))])

Every norm is smooth, NaN-free (also its derivatives at r = 0) and returns a () array.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jp

__all__ = ["quadratic", "smooth_abs", "weighted"]


def quadratic(r: jax.Array) -> jax.Array:
    """0.5 |r|^2 of a residual r (any shape)."""
    r = jp.asarray(r)
    return 0.5 * jp.sum(r * r)


def smooth_abs(r: jax.Array, p: float) -> jax.Array:
    """sqrt(|r|^2 + p^2) - p: quadratic (|r|^2 / 2p) near the goal, linear (|r|) far from it; p > 0."""
    r = jp.asarray(r)
    return jp.sqrt(jp.sum(r * r) + p * p) - p


def weighted(terms: Sequence[tuple[float | jax.Array, jax.Array]]) -> jax.Array:
    """sum of weight * norm over (weight, norm value) pairs, ()."""
    if not terms:
        raise ValueError("costs.weighted: no terms")
    return sum(jp.asarray(w) * jp.asarray(v) for w, v in terms)
