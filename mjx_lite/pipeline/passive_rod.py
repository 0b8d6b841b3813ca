"""Passive forces of discrete elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with `<elasticity young>`).

A rod's hinges (interior vertices vv with neighbours va, vb; layout in `mjcf/flex.py` ROD_STRIDE) carry
  - bending: energy k |kb|^2 with the curvature binormal kb = 2 e0 x e1 / (|e0| |e1| + e0 . e1), e0 = x_v - x_a,
    e1 = x_b - x_v (Bergou et al. 2008; straight reference, kb0 = 0);
  - twist: energy k_t m^2 with m = theta_out - theta_in + R, theta the twist joints' angles of the two edges and R
    the reference twist, whose position gradient is -kb / (2 |e0|) at x_a and kb / (2 |e1|) at x_b (-(sum) at x_v).
The reference twist R comes from the rod's state in Data.plastic (`frames`): per edge a reference frame (t, u)
carried from step to step by time-parallel transport, and per hinge the twist between the frames of its two
edges, unwrapped across steps; an unset state (zeros, after make_data / reset) restarts twist-free (R = 0).
`update_plastic` (called by the integrators through `pipeline/plastic.update`) stores the state at the step's
start, as MuJoCo 4.0 does (probed: the stored tangents are those of the forward that began the step).
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


def rods(m: Model) -> list[tuple[int, np.ndarray, int, int]]:
    """Static per rod: (flex id, global vertex ids of the chain (ne + 1,), Data.plastic address, first hinge)."""

    def build(m):
        verts, _, flexes, _ = hinges(m)
        out = []
        for f in np.unique(flexes):
            hs = np.nonzero(flexes == f)[0]
            chain = np.concatenate([verts[hs, 0], verts[hs[-1:], 1], verts[hs[-1:], 2]])
            out.append((int(f), chain, int(np.asarray(m.flex_plasticadr)[f]), int(hs[0])))
        return out

    return static_memo(m, "flex_rods", build)


def _transport(a: jax.Array, b: jax.Array, v: jax.Array) -> jax.Array:
    """Parallel transport of v (..., 3) from unit tangent a to unit tangent b (the rotation about a x b taking a to
    b; identity when parallel): v cos + (a x b) x v + c (c . v) / (1 + cos), c = a x b."""
    c = jp.cross(a, b)
    co = jp.sum(a * b, -1, keepdims=True)
    den = jp.where(1.0 + co > MINVAL, 1.0 + co, 1.0)
    return v * co + jp.cross(c, v) + c * jp.sum(c * v, -1, keepdims=True) / den


def frames(m: Model, plastic: jax.Array, xpos: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The rods' reference state at vertex positions xpos (nflexvert, 3) from their state in `plastic` (MuJoCo 4.0,
    probed): (new Data.plastic (nplastic,), reference twist R per hinge (nhinge,)). Per rod, with unit edge
    tangents t_e:
      - set state (stored tangent of the first edge nonzero): u_e = transport(t_old_e -> t_e) u_old_e (time-parallel),
        R_h = the signed angle about t_{h+1} from transport(t_h -> t_{h+1}) u_h to u_{h+1}, unwrapped to the branch
        nearest the stored R_h;
      - unset (zeros, after reset): u_0 = transport(t0 -> t_0) u0 from the qpos0 frame (flex_rodframe0), then
        u_{e+1} = transport(t_e -> t_{e+1}) u_e along the rod (twist-free): R = 0, and as a function of xpos the
        time-parallel R from these frames (its gradient is then the classic kb / (2 |e|) terms).
    MuJoCo's twist forces use the exact position gradient of R (checked against mj_forward): take it with jax.vjp.
    The new state stores (t_e, u_e) per edge, then R."""
    verts, _, _, _ = hinges(m)
    R = jp.zeros(len(verts), xpos.dtype)
    for f, chain, padr, h0 in rods(m):
        ne = len(chain) - 1
        x = xpos[chain]
        t, _ = mjm.safe_normalize(x[1:] - x[:-1])
        old = plastic[padr : padr + 6 * ne].reshape(ne, 6).astype(xpos.dtype)
        rold = plastic[padr + 6 * ne : padr + 7 * ne - 1].astype(xpos.dtype)
        fr0 = m.flex_rodframe0[f]

        def spatial(u, tt):
            nxt = _transport(tt[0], tt[1], u)
            return nxt, nxt

        tc = jax.lax.stop_gradient(t)
        u_first = _transport(fr0[:3], tc[0], fr0[3:])
        _, rest = jax.lax.scan(spatial, u_first, (tc[:-1], tc[1:]))
        u_space = jax.lax.stop_gradient(jp.concatenate([u_first[None], rest]))
        isset = jp.sum(old[0, :3] * old[0, :3]) > 0
        t_old = jp.where(isset, old[:, :3], tc)
        u_old = jp.where(isset, old[:, 3:], u_space)
        u = _transport(t_old, t, u_old)
        a = _transport(t[:-1], t[1:], u[:-1])
        ang = jp.arctan2(jp.sum(jp.cross(a, u[1:]) * t[1:], -1), jp.sum(a * u[1:], -1))
        dif = ang - rold
        r = jp.where(isset, rold + jp.arctan2(jp.sin(dif), jp.cos(dif)), ang)
        R = R.at[h0 : h0 + ne - 1].set(r)
        new = jp.concatenate([jp.concatenate([t, u], axis=1).reshape(-1), r])
        plastic = plastic.at[padr : padr + 7 * ne - 1].set(new.astype(plastic.dtype))
    return plastic, R


def update_plastic(m: Model, d, plastic: jax.Array) -> jax.Array:
    """`plastic` with the rods' entries replaced by their state at d (forward at the step's start, see `frames`)."""
    if not has_rods(m):
        return plastic
    new, _ = frames(m, plastic, d.flexvert_xpos)
    idx = np.concatenate([np.arange(padr, padr + 7 * (len(chain) - 1) - 1) for _, chain, padr, _ in rods(m)])
    return plastic.at[idx].set(new[idx])


def has_rods(m: Model) -> bool:
    return bool(m.nflex) and bool(len(hinges(m)[1]))


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


def _reference_twist(m: Model, d) -> tuple[jax.Array, object]:
    """R (nhinge,) at d and the vjp of R with respect to flexvert_xpos (a function of (nhinge,) -> (nflexvert, 3))."""
    R, vjp = jax.vjp(lambda x: frames(m, d.plastic, x)[1], d.flexvert_xpos)
    return R, lambda s: vjp(s)[0]


def _twist_qfrc(m: Model, s: jax.Array, dofs: np.ndarray) -> jax.Array:
    """qfrc of the twist dofs of a twist term with dE/dm = s (nhinge,), m = theta_out - theta_in + R."""
    return jp.zeros(m.nv, s.dtype).at[dofs[:, 1]].add(-s).at[dofs[:, 0]].add(s)


def rod_spring(m: Model, d) -> jax.Array:
    """qfrc_spring part of the rods (nv,): bending k |kb|^2 and twist k_t m^2."""
    verts, rows, _, dofs = hinges(m)
    x = d.flexvert_xpos[verts]
    kb, A0, A1, _, _ = _kb(x)
    k, kt = m.flex_bending[rows + 4], m.flex_bending[rows + 8]
    theta = d.qpos[np.asarray(m.jnt_qposadr)[np.asarray(m.dof_jntid)[dofs]]]  # the twist hinges' angles
    R, vjp = _reference_twist(m, d)
    s = 2.0 * kt * (theta[:, 1] - theta[:, 0] + R)
    frc = jp.zeros((m.nflexvert, 3), x.dtype).at[verts].add(-_to_vertices(A0, A1, 2.0 * k[:, None] * kb))
    return _twist_qfrc(m, s, dofs) + _vertex_qfrc(m, d, frc - vjp(s))


def rod_damper(m: Model, d) -> jax.Array:
    """qfrc_damper part of the rods (nv,): Rayleigh damping (flex_damping times the stiffness) of the rate of |kb|
    (bending) and of the twist rate mdot = thetadot_out - thetadot_in + g . v, g the classic reference-twist
    gradient (-kb / (2 |e0|), +kb / (2 |e1|) at the outer vertices; MuJoCo's damper uses it, its spring the exact
    gradient of the time-parallel R: both checked against mj_forward)."""
    verts, rows, flexes, dofs = hinges(m)
    x = d.flexvert_xpos[verts]
    kb, A0, A1, l0, l1 = _kb(x)
    c = m.flex_damping[flexes]
    k, kt = m.flex_bending[rows + 4], m.flex_bending[rows + 8]
    vel = _vertex_vel(m, d)
    v = vel[verts]
    kbdot = jp.einsum("nij,nj->ni", A0, v[:, 1] - v[:, 0]) + jp.einsum("nij,nj->ni", A1, v[:, 2] - v[:, 1])
    n, r = mjm.safe_normalize(kb)
    along = jp.where((r >= MINVAL)[:, None], n * jp.sum(n * kbdot, -1, keepdims=True), kbdot)
    ga, gb = -kb / (2.0 * l0[:, None]), kb / (2.0 * l1[:, None])  # the classic reference-twist gradient
    g = jp.stack([ga, -(ga + gb), gb], axis=1)
    dth = d.qvel[dofs]
    s = 2.0 * kt * c * (dth[:, 1] - dth[:, 0] + jp.sum(g * v, axis=(1, 2)))
    fv = -_to_vertices(A0, A1, 2.0 * (k * c)[:, None] * along) - s[:, None, None] * g
    frc = jp.zeros((m.nflexvert, 3), x.dtype).at[verts].add(fv)
    return _twist_qfrc(m, s, dofs) + _vertex_qfrc(m, d, frc)
