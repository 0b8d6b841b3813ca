"""MuJoCo's muscle model: gain (active force-length-velocity), bias (passive force) and activation dynamics.

prm layout (gainprm/biasprm): (range0, range1, force, scale, lmin, lmax, vmax, fpmax, fvmax); dynprm:
(tau_act, tau_deact, smoothing_width). Functions broadcast over actuators.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.types import MINVAL


def _force_scale(prm, acc0):
    force, scale = prm[..., 2], prm[..., 3]
    return jp.where(force < 0, scale / jp.maximum(MINVAL, acc0), force)


def _norm_length(length, lengthrange, prm):
    L0 = (lengthrange[..., 1] - lengthrange[..., 0]) / jp.maximum(MINVAL, prm[..., 1] - prm[..., 0])
    L = prm[..., 0] + (length - lengthrange[..., 0]) / jp.maximum(MINVAL, L0)
    return L, L0


def muscle_gain_length(length, lmin, lmax):
    """Normalised force-length curve (mju_muscleGainLength): piecewise quadratic, peak 1 at length 1."""
    a = 0.5 * (lmin + 1)
    b = 0.5 * (1 + lmax)
    x1 = (length - lmin) / jp.maximum(MINVAL, a - lmin)
    x2 = (1 - length) / jp.maximum(MINVAL, 1 - a)
    x3 = (length - 1) / jp.maximum(MINVAL, b - 1)
    x4 = (lmax - length) / jp.maximum(MINVAL, lmax - b)
    y = jp.where(
        length <= a, 0.5 * x1 * x1,
        jp.where(length <= 1, 1 - 0.5 * x2 * x2, jp.where(length <= b, 1 - 0.5 * x3 * x3, 0.5 * x4 * x4)),
    )  # fmt: skip
    return jp.where((lmin <= length) & (length <= lmax), y, 0.0)


def muscle_gain(length, velocity, lengthrange, acc0, prm) -> jax.Array:
    """Active muscle gain (mju_muscleGain), negative: -force * FL(L) * FV(V)."""
    force = _force_scale(prm, acc0)
    L, L0 = _norm_length(length, lengthrange, prm)
    V = velocity / jp.maximum(MINVAL, L0 * prm[..., 6])
    FL = muscle_gain_length(L, prm[..., 4], prm[..., 5])
    fvmax = prm[..., 8]
    y = fvmax - 1
    FV = jp.where(
        V <= -1, 0.0,
        jp.where(V <= 0, (V + 1) * (V + 1), jp.where(V <= y, fvmax - (y - V) * (y - V) / jp.maximum(MINVAL, y), fvmax)),
    )  # fmt: skip
    return -force * FL * FV


def muscle_bias(length, lengthrange, acc0, prm) -> jax.Array:
    """Passive muscle force (mju_muscleBias), negative: half-quadratic then linear beyond (1+lmax)/2."""
    force = _force_scale(prm, acc0)
    L, _ = _norm_length(length, lengthrange, prm)
    b = 0.5 * (1 + prm[..., 5])
    fpmax = prm[..., 7]
    x1 = (L - 1) / jp.maximum(MINVAL, b - 1)
    x2 = (L - b) / jp.maximum(MINVAL, b - 1)
    return jp.where(L <= 1, 0.0, jp.where(L <= b, -force * fpmax * 0.5 * x1 * x1, -force * fpmax * (0.5 + x2)))


def muscle_dynamics(ctrl, act, prm) -> jax.Array:
    """Activation derivative (mju_muscleDynamics) with Millard et al. (2013) time scales."""
    ctrlclamp = jp.clip(ctrl, 0.0, 1.0)
    actclamp = jp.clip(act, 0.0, 1.0)
    tau_act = prm[..., 0] * (0.5 + 1.5 * actclamp)
    tau_deact = prm[..., 1] / (0.5 + 1.5 * actclamp)
    width = prm[..., 2]
    dctrl = ctrlclamp - act
    hard = jp.where(dctrl > 0, tau_act, tau_deact)
    x = dctrl / jp.where(width < MINVAL, 1.0, width) + 0.5
    sig = jp.where(x <= 0, 0.0, jp.where(x >= 1, 1.0, x * x * x * (3 * x * (2 * x - 5) + 10)))
    smooth = tau_deact + (tau_act - tau_deact) * sig
    tau = jp.where(width < MINVAL, hard, smooth)
    return dctrl / jp.maximum(MINVAL, tau)
