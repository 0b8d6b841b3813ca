"""Plastic springs (MuJoCo 4.0 `springyield`): spring references in `Data.plastic` and their return mapping.

A joint or tendon with springyield y > 0 (layout: `mjcf/plastic.py`, `Model.jnt_plasticadr` /
`tendon_plasticadr`) has its spring reference in `Data.plastic` instead of `qpos_spring` / `tendon_lengthspring`.
After each step (`update`, called by the integrators on the new qpos; not by `forward`), ideal elasto-plasticity
moves the reference so that the spring displacement is at most y:
- slide / hinge: r <- q - sign(q - r) y where |q - r| > y;
- ball: with u = subQuat(q, r) (q = r exp(u)), r <- q exp(-y u / |u|) where |u| > y;
- tendon dead band [lo, hi] at length L: r <- shifted by L - (hi + y) where L > hi + y (a band [0, hi] with
  hi > 0 keeps lo = 0: a slack tendon stretches only its upper bound), by L - (lo - y) where L < lo - y.
  L is the length at the new qpos to first order: ten_length + ten_J dq with dq the step's displacement in
  velocity space (MuJoCo 4.0, probed: not the exact length at the new qpos).
Nothing moves when springs are disabled (DisableBit.SPRING). A yield of 0 set at run time on a plastic joint is
full plastic slip (r follows q). The update is piecewise smooth: its derivative is that of the branch taken.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.data import plastic_source
from mjx_lite.pipeline import passive_rod
from mjx_lite.types import Data, DisableBit, JointType, Model


def _joints(m: Model, kind) -> np.ndarray:
    jtype, adr = np.asarray(m.jnt_type), np.asarray(m.jnt_plasticadr)
    return np.nonzero((adr >= 0) & np.isin(jtype, kind))[0]


def references(m: Model, d: Data) -> tuple[jax.Array, jax.Array]:
    """The springs' references: qpos_spring (nq,) and tendon_lengthspring (ntendon, 2) with the plastic joints'
    and tendons' entries taken from d.plastic (scattered back where `data.plastic_source` gathers them from)."""
    qs, ls = m.qpos_spring, m.tendon_lengthspring
    src = plastic_source(m.jnt_type, m.jnt_qposadr, m.jnt_plasticadr, m.tendon_plasticadr, m.nq, m.nplastic)
    if len(src) == 0:
        return qs, ls
    flat = jp.concatenate([qs, ls.reshape(-1).astype(qs.dtype)]).at[src].set(d.plastic[: len(src)].astype(qs.dtype))
    return flat[: m.nq], flat[m.nq :].reshape(ls.shape).astype(ls.dtype)


def update(m: Model, d: Data, qpos: jax.Array, dq: jax.Array) -> jax.Array:
    """Data.plastic after a step from d (forward's results at the step's start: ten_length, ten_J) to qpos, with
    dq (nv,) the displacement qpos - d.qpos in velocity space (h times the integrated velocity), (nplastic,)."""
    plastic = passive_rod.update_plastic(m, d, d.plastic)  # elastic rods: reference frames and twists
    if m.nplastic == 0 or m.opt.disableflags & DisableBit.SPRING:
        return plastic
    qadr, padr = np.asarray(m.jnt_qposadr), np.asarray(m.jnt_plasticadr)
    lin = _joints(m, (JointType.SLIDE, JointType.HINGE))
    if lin.size:
        q, r, y = qpos[qadr[lin]], plastic[padr[lin]], m.jnt_springyield[lin]
        x = q - r
        plastic = plastic.at[padr[lin]].set(jp.where(jp.abs(x) > y, q - jp.sign(x) * y, r))
    ball = _joints(m, (JointType.BALL,))
    if ball.size:
        pi = padr[ball][:, None] + np.arange(4)
        q, r, y = mjm.quat_normalize(qpos[qadr[ball][:, None] + np.arange(4)]), plastic[pi], m.jnt_springyield[ball]
        u = mjm.quat_sub(q, r)
        axis, angle = mjm.safe_normalize(u)
        moved = mjm.quat_mul(q, mjm.axis_angle_to_quat(axis, -y))
        plastic = plastic.at[pi].set(jp.where((angle > y)[:, None], moved, r))
    tadr = np.asarray(m.tendon_plasticadr)
    ten = np.nonzero(tadr >= 0)[0]
    if ten.size:
        pi = tadr[ten][:, None] + np.arange(2)
        band, y = plastic[pi], m.tendon_springyield[ten]
        lo, hi = band[:, 0], band[:, 1]
        length = d.ten_length[ten] + jp.sum(d.ten_J[ten] * dq, axis=-1)  # elementwise: no matmul precision
        up = length - (hi + y)  # > 0: yields in tension
        down = length - (lo - y)  # < 0: yields in compression
        slack = (lo == 0) & (hi > 0)
        shift = jp.where(up > 0, up, jp.where(down < 0, down, 0.0))
        new_lo = jp.where((up > 0) & slack, lo, lo + shift)
        plastic = plastic.at[pi].set(jp.stack([new_lo, hi + shift], axis=-1))
    return plastic
