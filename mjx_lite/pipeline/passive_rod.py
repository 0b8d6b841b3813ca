"""Passive forces of discrete elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with `<elasticity young>`).

A rod's hinges (interior vertices vv with neighbours va, vb; layout in `mjcf/flex.py` ROD_STRIDE) carry
  - bending: energy k |kb|^2 with the curvature binormal kb = 2 e0 x e1 / (|e0| |e1| + e0 . e1), e0 = x_v - x_a,
    e1 = x_b - x_v (Bergou et al. 2008; straight reference, kb0 = 0);
  - twist: energy k_t m^2 with m = theta_out - theta_in + R, theta the twist joints' angles of the two edges and R
    the reference twist, whose position gradient is -kb / (2 |e0|) at x_a and kb / (2 |e1|) at x_b (-(sum) at x_v).
The reference twist R is zero on a rod whose state in Data.plastic is unset (zeros: after make_data / reset, as in
MuJoCo, where the reference frames restart from a twist-free transport along the rod); MuJoCo's step then carries
time-parallel reference frames and unwrapped twists in Data.plastic. That update is not implemented here:
`check_steppable` refuses to step such a model, so forces are exact at the states forward is given (the probed
MuJoCo 4.0 mj_forward after reset) and nothing is silently approximated.
Bending damping: -J' (damping 2k n n') J v with n = kb / |kb| (the rate of |kb|; isotropic at a straight hinge).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite._struct import static_memo
from mjx_lite.pipeline.flex import _vertex_qfrc, _vertex_vel
from mjx_lite.types import Model

ROD_STRIDE = 10
MINVAL = 1e-15


def hinges(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static rod hinges (from static fields only): global vertex ids (n, 3) (va, vv, vb), flex_bending row starts
    (n,), flex ids (n,), twist dofs of the incoming and outgoing edges (n, 2). A rod is a dim 1 flex with bending
    data (young > 0) whose edges have twist joints (flexedge_twistdof)."""

    def build(m):
        verts, rows, flexes, dofs = [], [], [], []
        tdof = np.asarray(m.flexedge_twistdof)
        for f in range(m.nflex):
            badr = int(np.asarray(m.flex_bendingadr)[f])
            eadr, ne = int(np.asarray(m.flex_edgeadr)[f]), int(np.asarray(m.flex_edgenum)[f])
            if np.asarray(m.flex_dim)[f] != 1 or badr < 0 or ne < 2 or np.any(tdof[eadr : eadr + ne] < 0):
                continue
            vadr, eladr = int(np.asarray(m.flex_vertadr)[f]), int(np.asarray(m.flex_elemdataadr)[f])
            chain = np.asarray(m.flex_elem)[eladr : eladr + 2 * ne].reshape(ne, 2).astype(np.int64)
            edge = np.asarray(m.flex_edge)[eadr : eadr + ne]
            edof = [int(tdof[eadr + int(np.nonzero((edge.min(1) == min(a, b)) & (edge.max(1) == max(a, b)))[0][0])])
                    for a, b in chain]  # fmt: skip
            for h in range(ne - 1):
                verts.append(np.array([chain[h, 0], chain[h, 1], chain[h + 1, 1]]) + vadr)
                rows.append(badr + 1 + ROD_STRIDE * h)
                flexes.append(f)
                dofs.append((edof[h], edof[h + 1]))
        return (np.asarray(verts, np.int64).reshape(-1, 3), np.asarray(rows, np.int64),
                np.asarray(flexes, np.int64), np.asarray(dofs, np.int64).reshape(-1, 2))  # fmt: skip

    return static_memo(m, "flex_rod_hinges", build)


def has_rods(m: Model) -> bool:
    return bool(m.nflex) and bool(len(hinges(m)[1]))


def check_steppable(m: Model) -> None:
    """Raise for a model with elastic rods: their per-step reference-frame update (Data.plastic) is missing."""
    if has_rods(m):
        raise NotImplementedError("stepping a model with elastic 1D flex rods (MuJoCo 4.0 carries their "
                                  "time-parallel reference frames and twists in mjData.plastic from step to step) "
                                  "is not supported by mjx_lite yet; forward() computes their passive forces at "
                                  "the reset reference state")  # fmt: skip


def _skew(v: jax.Array) -> jax.Array:
    """(n, 3, 3) cross-product matrices of v (n, 3): skew(v) w = v x w."""
    z = jp.zeros_like(v[:, 0])
    return jp.stack([jp.stack([z, -v[:, 2], v[:, 1]], -1), jp.stack([v[:, 2], z, -v[:, 0]], -1),
                     jp.stack([-v[:, 1], v[:, 0], z], -1)], axis=1)  # fmt: skip


def _kb(x: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:
    """Curvature binormals of hinges x (n, 3, 3): kb (n, 3), the Jacobian blocks A0 = dkb/de0, A1 = dkb/de1 (n, 3,
    3), |e0|, |e1| (n,). NaN-safe: a degenerate hinge (zero edge or folded back) gets kb = 0 and no force."""
    e0, e1 = x[:, 1] - x[:, 0], x[:, 2] - x[:, 1]
    l0, l1 = mjm.safe_norm(e0), mjm.safe_norm(e1)
    den = l0 * l1 + jp.sum(e0 * e1, -1)
    ok = (l0 >= MINVAL) & (l1 >= MINVAL) & (den >= MINVAL)
    inv = jp.where(ok, 1.0 / jp.where(ok, den, 1.0), 0.0)
    kb = 2.0 * inv[:, None] * jp.cross(e0, e1)
    g0 = (l1 / jp.where(ok, l0, 1.0))[:, None] * e0 + e1
    g1 = (l0 / jp.where(ok, l1, 1.0))[:, None] * e1 + e0
    A0 = inv[:, None, None] * (-2.0 * _skew(e1) - kb[:, :, None] * g0[:, None, :])
    A1 = inv[:, None, None] * (2.0 * _skew(e0) - kb[:, :, None] * g1[:, None, :])
    return kb, A0, A1, jp.where(ok, l0, 1.0), jp.where(ok, l1, 1.0)


def _to_vertices(A0: jax.Array, A1: jax.Array, g: jax.Array) -> jax.Array:
    """J' g for kb-space vectors g (n, 3): (n, 3 vertices, 3), J = [-A0, A0 - A1, A1]."""
    a, b = jp.einsum("nij,ni->nj", A0, g), jp.einsum("nij,ni->nj", A1, g)
    return jp.stack([-a, a - b, b], axis=1)


def _twist(m: Model, d, s: jax.Array, ga: jax.Array, gb: jax.Array, dofs: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """Forces of a twist term with dE/dm = s (n,): (vertex forces (n, 3, 3), qfrc of the twist dofs (nv,))."""
    fv = -s[:, None, None] * jp.stack([ga, -(ga + gb), gb], axis=1)
    qfrc = jp.zeros(m.nv, s.dtype).at[dofs[:, 1]].add(-s).at[dofs[:, 0]].add(s)
    return fv, qfrc


def rod_spring(m: Model, d) -> jax.Array:
    """qfrc_spring part of the rods (nv,): bending and twist (reference twist 0, see the module docstring)."""
    verts, rows, _, dofs = hinges(m)
    x = d.flexvert_xpos[verts]
    kb, A0, A1, l0, l1 = _kb(x)
    k, kt = m.flex_bending[rows + 4], m.flex_bending[rows + 8]
    theta = d.qpos[np.asarray(m.jnt_qposadr)[np.asarray(m.dof_jntid)[dofs]]]  # the twist hinges' angles
    ga, gb = -kb / (2.0 * l0[:, None]), kb / (2.0 * l1[:, None])  # gradient of the reference twist
    fv, qfrc = _twist(m, d, 2.0 * kt * (theta[:, 1] - theta[:, 0]), ga, gb, dofs)
    fv = fv - _to_vertices(A0, A1, 2.0 * k[:, None] * kb)
    frc = jp.zeros((m.nflexvert, 3), x.dtype).at[verts].add(fv)
    return qfrc + _vertex_qfrc(m, d, frc)


def rod_damper(m: Model, d) -> jax.Array:
    """qfrc_damper part of the rods (nv,): Rayleigh damping (flex_damping times the stiffness) of the rate of |kb|
    (bending) and of the twist rate mdot = thetadot_out - thetadot_in + grad(R) . v."""
    verts, rows, flexes, dofs = hinges(m)
    x = d.flexvert_xpos[verts]
    kb, A0, A1, l0, l1 = _kb(x)
    c = m.flex_damping[flexes]
    k, kt = m.flex_bending[rows + 4], m.flex_bending[rows + 8]
    v = _vertex_vel(m, d)[verts]
    kbdot = jp.einsum("nij,nj->ni", A0, v[:, 1] - v[:, 0]) + jp.einsum("nij,nj->ni", A1, v[:, 2] - v[:, 1])
    n, r = mjm.safe_normalize(kb)
    along = jp.where((r >= MINVAL)[:, None], n * jp.sum(n * kbdot, -1, keepdims=True), kbdot)
    ga, gb = -kb / (2.0 * l0[:, None]), kb / (2.0 * l1[:, None])
    dth = d.qvel[dofs]
    mdot = dth[:, 1] - dth[:, 0] + jp.sum(ga * v[:, 0] - (ga + gb) * v[:, 1] + gb * v[:, 2], -1)
    fv, qfrc = _twist(m, d, 2.0 * kt * c * mdot, ga, gb, dofs)
    fv = fv - _to_vertices(A0, A1, 2.0 * (k * c)[:, None] * along)
    frc = jp.zeros((m.nflexvert, 3), x.dtype).at[verts].add(fv)
    return qfrc + _vertex_qfrc(m, d, frc)
