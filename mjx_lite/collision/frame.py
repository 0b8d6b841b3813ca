"""Contact frames as MuJoCo builds them (mju_makeFrame)."""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.math import safe_normalize


def make_frame(normal: jax.Array, tangent: jax.Array) -> jax.Array:
    """(..., 3) normal and tangent hint -> (..., 3, 3) frame with rows (normal, tangent1, tangent2).

    Where the hint has norm < 0.5 it is replaced by (0, 1, 0), or (0, 0, 1) when |normal_y| >= 0.5; the hint is
    then made orthogonal to the normal and normalised ((1, 0, 0) if that leaves nothing, as mju_normalize3), and
    tangent2 = normal x tangent1.
    """
    n, _ = safe_normalize(normal)
    hint_ok = jp.sum(tangent * tangent, axis=-1, keepdims=True) >= 0.25
    ey = jp.zeros_like(n).at[..., 1].set(1.0)
    ez = jp.zeros_like(n).at[..., 2].set(1.0)
    default = jp.where(jp.abs(n[..., 1:2]) < 0.5, ey, ez)
    t = jp.where(hint_ok, tangent, default)
    t = t - n * jp.sum(n * t, axis=-1, keepdims=True)
    t, tn = safe_normalize(t)
    ex = jp.zeros_like(n).at[..., 0].set(1.0)
    t = jp.where(tn[..., None] < 1e-15, ex, t)  # hint parallel to the normal: (1, 0, 0) as mju_normalize3
    b = jp.cross(n, t)
    return jp.stack([n, t, b], axis=-2)
