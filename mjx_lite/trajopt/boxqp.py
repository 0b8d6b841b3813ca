"""A small box-constrained QP by projected Newton (Bertsekas 1982), as iLQR's backward pass needs it for control
bounds (Tassa, Mansard and Todorov 2014):

    minimise 0.5 x' H x + g' x   subject to   lo <= x <= hi   (elementwise; -inf / +inf: unbounded)

H (n, n) symmetric positive definite, n small (the number of actuators). Each of a fixed number of iterations
(`iterations`, static: no while_loop) finds the clamped set (at a bound with the gradient pushing outwards), takes
the Newton step on the free variables and a projected Armijo line search over several step sizes evaluated at once.
The answer also carries the Cholesky factor of the free block (ones on the clamped diagonal), from which iLQR's
feedback gains are solved (clamped controls get no feedback).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import jax.scipy.linalg as jsl

from mjx_lite import linalg

__all__ = ["box_qp", "spd_factor", "spd_solve"]

STEPS = (1.0, 0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125)  # the line search's step sizes, tried at once
ARMIJO = 0.1  # sufficient decrease: the step must achieve this fraction of the linear model's decrease
DEFAULT_ITERATIONS = 8  # projected Newton converges in a few iterations for n of a few actuators


def spd_factor(a: jax.Array, library: bool) -> jax.Array:
    """Cholesky factor of a (n, n) (lower with `library`, upper from `mjx_lite.linalg` otherwise); NaN entries or a
    non-positive diagonal where a is not positive definite (see `factor_ok`)."""
    return jsl.cho_factor(a, lower=True)[0] if library else linalg.cholesky_upper(a)


def spd_solve(c: jax.Array, b: jax.Array, library: bool) -> jax.Array:
    """x with a x = b for c = spd_factor(a); b (n,) or (n, k)."""
    return jsl.cho_solve((c, True), b) if library else linalg.cho_solve_upper(c, b)


def factor_ok(c: jax.Array) -> jax.Array:
    """() bool: the factorisation succeeded (finite, positive diagonal)."""
    return jp.all(jp.isfinite(c)) & jp.all(jp.diagonal(c) > 0)


def _free_block(H: jax.Array, free: jax.Array) -> jax.Array:
    """H's free rows and columns, ones on the clamped diagonal: positive definite when H is."""
    both = free[:, None] & free[None, :]
    return jp.where(both, H, 0.0) + jp.diag(jp.where(free, 0.0, 1.0).astype(H.dtype))


def box_qp(H: jax.Array, g: jax.Array, lo: jax.Array, hi: jax.Array, x0: jax.Array | None = None, *,
           iterations: int = DEFAULT_ITERATIONS, library: bool = False):  # fmt: skip
    """Solve min 0.5 x'Hx + g'x s.t. lo <= x <= hi by projected Newton.

    Args:
      H: (n, n) symmetric positive definite; g: (n,); lo, hi: (n,) bounds (may be infinite; lo <= hi).
      x0: (n,) warm start (clipped into the box; default 0 clipped).
      iterations: projected Newton iterations (static).
      library: use JAX's LAPACK Cholesky (see `Config.linalg`) rather than `mjx_lite.linalg`'s.

    Returns:
      (x (n,), free (n,) bool: the variables not clamped at the solution, chol: `spd_factor` of H's free block
      with ones on the clamped diagonal).
    """
    dtype = H.dtype
    x = jp.clip(jp.zeros_like(g) if x0 is None else x0, lo, hi)
    steps = jp.asarray(STEPS, dtype)

    def value(x):
        return 0.5 * x @ H @ x + g @ x

    def iteration(x, _):
        grad = g + H @ x
        clamped = ((x <= lo) & (grad > 0)) | ((x >= hi) & (grad < 0))
        free = ~clamped
        chol = spd_factor(_free_block(H, free), library)
        dx = -spd_solve(chol, jp.where(free, grad, 0.0), library)
        dx = jp.where(free & jp.isfinite(dx), dx, 0.0)
        cand = jp.clip(x[None] + steps[:, None] * dx[None], lo, hi)  # (S, n): every step size at once
        f0 = value(x)
        fs = jax.vmap(value)(cand)
        armijo = fs - f0 <= ARMIJO * (cand - x[None]) @ grad
        ok = armijo & (fs < f0)
        first = jp.argmax(ok)  # the largest step that decreases enough
        return jp.where(jp.any(ok), cand[first], x), None

    x, _ = jax.lax.scan(iteration, x, None, length=iterations)
    grad = g + H @ x
    free = ~(((x <= lo) & (grad > 0)) | ((x >= hi) & (grad < 0)))
    return x, free, spd_factor(_free_block(H, free), library)
