"""Spline-parameterised controls, as MuJoCo MPC's sampling planners use them: K knots (K, nu) spread evenly over the
horizon's T control steps, interpolated to the (T, nu) controls by

- "zero": zero-order hold (each step takes the value of the last knot at or before it),
- "linear": piecewise linear between neighbouring knots,
- "cubic": cubic Hermite between neighbouring knots with slopes from the 4 nearest knots (the derivative of their
  interpolating cubic), so a cubic polynomial sampled at the knots is reproduced exactly.

Knot k sits at step tau_k = k (T - 1) / (K - 1) (K = 1: a constant). Every interpolation is linear in the knots:
`matrix(T, K, kind)` (T, K), built once in numpy at trace time, and `interpolate(knots, T, kind)` = matrix @ knots.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

__all__ = ["KINDS", "fit", "interpolate", "knot_times", "matrix"]

KINDS = ("zero", "linear", "cubic")


def check(horizon: int, knots: int, kind: str) -> None:
    if kind not in KINDS:
        raise ValueError(f"splines: interpolation must be one of {KINDS}, not {kind!r}")
    if isinstance(knots, bool) or not isinstance(knots, (int, np.integer)) or not 1 <= knots <= horizon:
        raise ValueError(f"splines: knots must be an int in [1, horizon = {horizon}], not {knots!r}")


def knot_times(horizon: int, knots: int) -> np.ndarray:
    """(K,) the steps (fractional) where the knots sit."""
    if knots == 1:
        return np.zeros(1)
    return np.arange(knots) * (horizon - 1) / (knots - 1)


def _slopes(tau: np.ndarray) -> np.ndarray:
    """(K, K) D with D @ values = the slope at each knot of the cubic (lower degree for K < 4) through the 4 nearest
    knots (a window shifted inwards at the ends): exact for polynomials of degree <= min(K - 1, 3)."""
    K = len(tau)
    n = min(K, 4)
    D = np.zeros((K, K))
    for k in range(K):
        lo = min(max(k - n // 2 + (1 if n == 4 else 0), 0), K - n)
        idx = np.arange(lo, lo + n)
        x = tau[idx]
        for j, i in enumerate(idx):  # d/dt of the Lagrange basis polynomial l_i at tau[k]
            others = np.delete(x, j)
            denom = np.prod(x[j] - others)
            total = 0.0
            for a in range(len(others)):
                rest = np.delete(others, a)
                total += np.prod(tau[k] - rest)
            D[k, i] = total / denom
    return D


@functools.lru_cache(maxsize=64)
def _matrix(horizon: int, knots: int, kind: str) -> np.ndarray:
    tau = knot_times(horizon, knots)
    t = np.arange(horizon, dtype=float)
    M = np.zeros((horizon, knots))
    if knots == 1:
        M[:, 0] = 1.0
        return M
    h = tau[1] - tau[0]
    seg = np.minimum(np.floor(t / h + 1e-9).astype(int), knots - 2)  # the interval [tau_seg, tau_seg+1] of step t
    s = (t - tau[seg]) / h  # position in the interval, [0, 1]
    rows = np.arange(horizon)
    if kind == "zero":
        at_end = np.isclose(s, 1.0)
        M[rows, np.where(at_end, seg + 1, seg)] = 1.0
    elif kind == "linear":
        M[rows, seg] += 1.0 - s
        M[rows, seg + 1] += s
    else:
        D = _slopes(tau)
        h00, h10 = 2 * s**3 - 3 * s**2 + 1, s**3 - 2 * s**2 + s
        h01, h11 = -2 * s**3 + 3 * s**2, s**3 - s**2
        M[rows, seg] += h00
        M[rows, seg + 1] += h01
        M += (h10 * h)[:, None] * D[seg] + (h11 * h)[:, None] * D[seg + 1]
    return M


def matrix(horizon: int, knots: int, kind: str) -> np.ndarray:
    """(T, K) the interpolation matrix: controls = matrix @ knot values."""
    check(horizon, knots, kind)
    return _matrix(int(horizon), int(knots), kind).copy()


def interpolate(values: jax.Array, horizon: int, kind: str) -> jax.Array:
    """(T, nu) controls from knot values (K, nu)."""
    M = jp.asarray(matrix(horizon, values.shape[0], kind), values.dtype)
    return M @ values


def fit(ctrl: jax.Array, knots: int, kind: str) -> jax.Array:
    """(K, nu) the knot values whose interpolation is closest (least squares) to controls (T, nu)."""
    M = matrix(ctrl.shape[0], knots, kind)
    P = jp.asarray(np.linalg.pinv(M), ctrl.dtype)
    return P @ ctrl

