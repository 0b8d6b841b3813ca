"""Nearest points of two segments (shared by the capsule and box colliders)."""

from __future__ import annotations

import jax.numpy as jp

from mjx_lite.collision.types import Scalar, Vec3
from mjx_lite.math import safe_div


def segments_closest(pos1: Vec3, axis1: Vec3, pos2: Vec3, axis2: Vec3) -> tuple[Scalar, Scalar, Scalar]:
    """Clamped parameters (x1, x2) in [-1, 1] of the nearest points pos1 + x1*axis1, pos2 + x2*axis2 of two
    non-parallel segments (MuJoCo's capsule-capsule clamping order)."""
    dif = pos1 - pos2
    ma = jp.dot(axis1, axis1)
    mb = -jp.dot(axis1, axis2)
    mc = jp.dot(axis2, axis2)
    u = -jp.dot(axis1, dif)
    v = jp.dot(axis2, dif)
    det = ma * mc - mb * mb
    x1 = safe_div(mc * u - mb * v, det)
    x2 = safe_div(ma * v - mb * u, det)
    mc_s = jp.where(mc > 0, mc, 1.0)
    ma_s = jp.where(ma > 0, ma, 1.0)
    x2 = jp.where(x1 > 1, (v - mb) / mc_s, jp.where(x1 < -1, (v + mb) / mc_s, x2))
    x1 = jp.clip(x1, -1, 1)
    x1 = jp.where(x2 > 1, jp.clip((u - mb) / ma_s, -1, 1), jp.where(x2 < -1, jp.clip((u + mb) / ma_s, -1, 1), x1))
    x2 = jp.clip(x2, -1, 1)
    return x1, x2, det
