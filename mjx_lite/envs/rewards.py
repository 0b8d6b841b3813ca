"""`tolerance`: smooth bounded rewards in the style of the DeepMind Control Suite, in JAX.

`tolerance(x, bounds=(lo, hi), margin, sigmoid, value_at_margin)` is 1 inside [lo, hi] and falls off outside
with the chosen shape: at distance `margin` from the nearest bound it equals `value_at_margin`. With
`margin=0` it is the indicator of the interval. Same arguments and meaning as `dm_control.utils.rewards.tolerance`
(own JAX implementation); each sigmoid maps a distance d >= 0 (in units of `margin`) to (0, 1] with value 1 at
d = 0 and `value_at_margin` at d = 1:

| sigmoid      | value(d)                                   | reaches 0 |
|--------------|--------------------------------------------|-----------|
| gaussian     | exp(-(d s)^2 / 2)                          | never     |
| hyperbolic   | 1 / cosh(d s)                              | never     |
| long_tail    | 1 / ((d s)^2 + 1)                          | never     |
| reciprocal   | 1 / (d s + 1)                              | never     |
| cosine       | (1 + cos(pi d s)) / 2 for d s < 1          | at d s = 1 |
| linear       | 1 - d s for d s < 1                        | at d s = 1 |
| quadratic    | 1 - (d s)^2 for d s < 1                    | at d s = 1 |
| tanh_squared | 1 - tanh(d s)^2                            | never     |

with the scale s chosen so that value(1) = value_at_margin. It is differentiable everywhere (the distance is
zeroed inside the bounds before the sigmoid, so infinite bounds give finite gradients).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp

__all__ = ["SIGMOIDS", "tolerance"]

SIGMOIDS = ("gaussian", "hyperbolic", "long_tail", "reciprocal", "cosine", "linear", "quadratic", "tanh_squared")
_REACH_ZERO = ("cosine", "linear", "quadratic")  # these accept value_at_margin == 0


def _scale(sigmoid: str, v: float) -> float:
    """Scale s with sigmoid(1 * s) == v."""
    if sigmoid == "gaussian":
        return math.sqrt(-2.0 * math.log(v))
    if sigmoid == "hyperbolic":
        return math.acosh(1.0 / v)
    if sigmoid == "long_tail":
        return math.sqrt(1.0 / v - 1.0)
    if sigmoid == "reciprocal":
        return 1.0 / v - 1.0
    if sigmoid == "cosine":
        return math.acos(2.0 * v - 1.0) / math.pi
    if sigmoid == "linear":
        return 1.0 - v
    if sigmoid == "quadratic":
        return math.sqrt(1.0 - v)
    return math.atanh(math.sqrt(1.0 - v))  # tanh_squared


def _sigmoid(sigmoid: str, d: jax.Array, s: float) -> jax.Array:
    x = d * s
    if sigmoid == "gaussian":
        return jp.exp(-0.5 * x * x)
    if sigmoid == "hyperbolic":
        return 1.0 / jp.cosh(x)
    if sigmoid == "long_tail":
        return 1.0 / (x * x + 1.0)
    if sigmoid == "reciprocal":
        return 1.0 / (x + 1.0)
    if sigmoid == "cosine":
        xc = jp.minimum(x, 1.0)
        return jp.where(x < 1.0, 0.5 * (1.0 + jp.cos(jp.pi * xc)), 0.0)
    if sigmoid == "linear":
        return jp.where(x < 1.0, 1.0 - x, 0.0)
    if sigmoid == "quadratic":
        xc = jp.minimum(x, 1.0)
        return jp.where(x < 1.0, 1.0 - xc * xc, 0.0)
    return 1.0 - jp.tanh(x) ** 2  # tanh_squared


def tolerance(
    x: jax.Array,
    bounds: tuple[float, float] = (0.0, 0.0),
    margin: float = 0.0,
    sigmoid: str = "gaussian",
    value_at_margin: float = 0.1,
) -> jax.Array:
    """1 where lo <= x <= hi, decaying outside to `value_at_margin` at distance `margin` (elementwise).

    Args:
      x: array of any shape (float).
      bounds: (lo, hi), lo <= hi; either may be +-inf. Host numbers.
      margin: >= 0; 0 gives the indicator of [lo, hi].
      sigmoid: one of `SIGMOIDS` (see the module docstring).
      value_at_margin: in (0, 1) ([0, 1) for cosine, linear, quadratic).

    Returns: array like `x`, values in [0, 1].
    """
    lo, hi = (float(b) for b in bounds)
    margin = float(margin)
    if lo > hi:
        raise ValueError(f"tolerance: lower bound {lo} > upper bound {hi}")
    if margin < 0 or math.isnan(margin):
        raise ValueError(f"tolerance: margin must be >= 0, not {margin}")
    if sigmoid not in SIGMOIDS:
        raise ValueError(f"tolerance: unknown sigmoid {sigmoid!r}; one of {SIGMOIDS}")
    v = float(value_at_margin)
    vmin_ok = v >= 0 if sigmoid in _REACH_ZERO else v > 0
    if margin > 0 and not (vmin_ok and v < 1):
        rng = "[0, 1)" if sigmoid in _REACH_ZERO else "(0, 1)"
        raise ValueError(f"tolerance: value_at_margin for sigmoid {sigmoid!r} must be in {rng}, not {v}")
    x = jp.asarray(x)
    if not jp.issubdtype(x.dtype, jp.floating):
        x = x.astype(jp.result_type(float))
    in_bounds = (x >= lo) & (x <= hi)
    if margin == 0:
        return jp.where(in_bounds, 1.0, 0.0).astype(x.dtype)
    dist = jp.where(x < lo, lo - x, x - hi)
    dist = jp.where(in_bounds, 0.0, dist) / margin  # zero inside: no inf reaches the sigmoid or its gradient
    return jp.where(in_bounds, 1.0, _sigmoid(sigmoid, dist, _scale(sigmoid, v))).astype(x.dtype)
