"""Flex kinematics and edge forces (mj_flex, the flex-edge parts of mj_passive and mj_fwdVelocity).

Stages and helpers (m.nflex == 0: nothing is traced):
  flex(m, d)           -> d with flexvert_xpos (nflexvert, 3): body pose applied to the vertex offset flex_vert;
                          flexedge_length (nflexedge,): |x2 - x1|; flexedge_J (nflexedge, nv) dense: the edge
                          direction u = (x2 - x1)/length times (jacp(x2, body2) - jacp(x1, body1)), zero for the
                          edges of a flex whose edges make no force (no edge equality, stiffness or damping; as
                          MuJoCo skips them) and for rigid flexes (MuJoCo leaves their lengths 0 too)
  flex_velocity(m, d)  -> d with flexedge_velocity = flexedge_J qvel (nflexedge,)
  edge_spring(m, d)    -> (nv,) sum over non-rigid edges of J' k (length0 - length)   (qfrc_spring part)
  edge_damper(m, d)    -> (nv,) sum over non-rigid edges of -J' b (J qvel)            (qfrc_damper part)
  edge_rows(m, d, eq)  -> per-edge constraint data of the <equality><flex> constraints `eq` (pipeline/constraint)

Interpolated flexes (flex_interp != 0): vertex positions from their nodes, no edge lengths or Jacobians (as MuJoCo),
cell elasticity in elastic_spring / elastic_damper (mjx_lite/pipeline/flex_interp.py).

Edge stiffness is MuJoCo's for dim 1 (the compiler refuses it for dim 2 as MuJoCo does); edge damping and the edge
equality act on every dim. Vertex positions, lengths and Jacobians are smooth away from zero-length edges
(`math.safe_norm`), so `jax.grad` goes through them.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite._struct import static_memo
from mjx_lite.pipeline import flex_interp, support
from mjx_lite.types import Data, Model

__all__ = ["edge_damper", "edge_flex", "edge_rows", "edge_spring", "edge_vertices", "elastic_damper", "elastic_spring",
           "equality_edges", "flex", "flex_velocity"]


def edge_flex(m: Model) -> np.ndarray:
    """Static (nflexedge,) flex id of every edge."""
    return static_memo(m, "flex_edgeflex", lambda m: np.repeat(np.arange(m.nflex), np.asarray(m.flex_edgenum)))


def edge_vertices(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static global vertex ids (v1, v2), each (nflexedge,), of every edge."""

    def build(m):
        adr = np.asarray(m.flex_vertadr)[edge_flex(m)]
        e = np.asarray(m.flex_edge).reshape(-1, 2)
        return adr + e[:, 0], adr + e[:, 1]

    return static_memo(m, "flex_edgevert", build)


def _edge_active(m: Model) -> jax.Array:
    """(nflexedge,) traced bool: the edge's flex computes edge Jacobians (MuJoCo's skipjacobian is false)."""
    f = edge_flex(m)
    eq = jp.asarray(np.asarray(m.flex_edgeequality)[f] == 1)
    return eq | (m.flex_edgedamping[f] != 0) | (m.flex_edgestiffness[f] != 0) | (m.flex_damping[f] != 0)


def flex(m: Model, d: Data) -> Data:
    """Flex vertex positions, edge lengths and edge Jacobians (mj_flex, non-interpolated flexes)."""
    if m.nflex == 0:
        return d
    vb = np.maximum(np.asarray(m.flex_vertbodyid), 0)  # (-1 on interpolated flexes' vertices: set from nodes)
    xpos = d.xpos[vb] + jp.einsum("nij,nj->ni", d.xmat[vb], m.flex_vert)
    xpos = flex_interp.vertex_xpos(m, d, xpos)
    if m.nflexedge == 0:
        return d.replace(flexvert_xpos=xpos)
    v1, v2 = edge_vertices(m)
    p1, p2 = xpos[v1], xpos[v2]
    vec = p2 - p1
    length = math.safe_norm(vec)
    unit = vec / jp.where(length > 0, length, 1.0)[:, None]
    jac1, _ = support.jac_batch(m, d, p1, vb[v1])
    jac2, _ = support.jac_batch(m, d, p2, vb[v2])
    J = jp.einsum("ni,niv->nv", unit, jac2 - jac1)
    # rigid and interpolated flexes: no edge lengths or Jacobians (MuJoCo's mj_flex skips them)
    rigid = jp.asarray((np.asarray(m.flex_rigid) | (np.asarray(m.flex_interp) != 0))[edge_flex(m)])
    J = jp.where((_edge_active(m) & ~rigid)[:, None], J, 0.0)
    length = jp.where(rigid, 0.0, length)
    return d.replace(flexvert_xpos=xpos, flexedge_length=length, flexedge_J=J)


def flex_velocity(m: Model, d: Data) -> Data:
    """flexedge_velocity = flexedge_J qvel (part of mj_fwdVelocity)."""
    if m.nflexedge == 0:
        return d
    return d.replace(flexedge_velocity=d.flexedge_J @ d.qvel)


def _force_edges(m: Model) -> jax.Array:
    """(nflexedge,) bool: edges that carry spring/damper forces (non-rigid edges of non-rigid flexes)."""
    return jp.asarray(~np.asarray(m.flexedge_rigid, bool) & ~np.asarray(m.flex_rigid, bool)[edge_flex(m)])


def edge_spring(m: Model, d: Data) -> jax.Array:
    """qfrc_spring part of the flex edges (nv,): J' stiffness (length0 - length) over non-rigid edges."""
    f = edge_flex(m)
    frc = m.flex_edgestiffness[f] * (m.flexedge_length0 - d.flexedge_length)
    return jp.where(_force_edges(m), frc, 0.0) @ d.flexedge_J


def edge_damper(m: Model, d: Data) -> jax.Array:
    """qfrc_damper part of the flex edges (nv,): -J' damping (J qvel) over non-rigid edges (J qvel from d.qvel, so
    the implicit integrators' velocity derivative sees it)."""
    f = edge_flex(m)
    frc = -m.flex_edgedamping[f] * (d.flexedge_J @ d.qvel)
    return jp.where(_force_edges(m), frc, 0.0) @ d.flexedge_J


def equality_edges(m: Model, eq_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Static rows of <equality><flex> constraints: (edge ids, owning equality ids), one row per non-rigid edge of
    each constraint's flex, in constraint then edge order (mj_instantiateEquality)."""
    edges, owners = [], []
    rigid = np.asarray(m.flexedge_rigid, bool)
    for i in eq_ids:
        f = int(np.asarray(m.eq_obj1id)[i])
        adr, num = int(np.asarray(m.flex_edgeadr)[f]), int(np.asarray(m.flex_edgenum)[f])
        for e in range(adr, adr + num):
            if not rigid[e]:
                edges.append(e)
                owners.append(int(i))
    return np.asarray(edges, np.int64), np.asarray(owners, np.int64)


def edge_rows(m: Model, d: Data, edges: np.ndarray) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(J (n, nv), pos (n,), diagA (n,)) of flex edge equality rows: J = flexedge_J, pos = length - length0,
    diagA = flexedge_invweight0."""
    return d.flexedge_J[edges], d.flexedge_length[edges] - m.flexedge_length0[edges], m.flexedge_invweight0[edges]



# ---------------------------------------------------------------------------------------------------------------
# flex elasticity (mj_springdamper's flex part: stretch of dim 2 / dim 3 elements, bending of dim 2 flexes)

_ELEM_EDGES = {2: ((1, 2), (2, 0), (0, 1)), 3: ((0, 1), (1, 2), (2, 0), (2, 3), (0, 3), (1, 3))}
_STRIDE = {2: 21, 3: 24}


def _stretch_groups(m: Model) -> list[tuple]:
    """Static per element dimension (2, 3) with stiffness: (global vertex ids (n, dim + 1), global edge ids (n, ne),
    flex ids (n,), flex_stiffness index of the full (ne, ne) metric (n, ne, ne))."""

    def build(m):
        out = []
        dims = np.asarray(m.flex_dim)
        for dim in (2, 3):
            ne = len(_ELEM_EDGES[dim])
            iu = np.triu_indices(ne)
            tri = np.zeros((ne, ne), np.int64)
            tri[iu] = np.arange(len(iu[0]))
            tri = np.triu(tri) + np.triu(tri, 1).T
            verts, edges, flexes, kidx = [], [], [], []
            for f in range(m.nflex):
                sadr = int(np.asarray(m.flex_stiffnessadr)[f])
                if dims[f] != dim or sadr < 0 or np.asarray(m.flex_rigid)[f] or np.asarray(m.flex_interp)[f]:
                    continue
                n = int(np.asarray(m.flex_elemnum)[f])
                el = np.asarray(m.flex_elem)[int(np.asarray(m.flex_elemdataadr)[f]):][: n * (dim + 1)]
                ee = np.asarray(m.flex_elemedge)[int(np.asarray(m.flex_elemedgeadr)[f]):][: n * ne]
                verts.append(el.reshape(n, dim + 1) + int(np.asarray(m.flex_vertadr)[f]))
                edges.append(ee.reshape(n, ne) + int(np.asarray(m.flex_edgeadr)[f]))
                flexes.append(np.full(n, f))
                kidx.append(sadr + _STRIDE[dim] * np.arange(n)[:, None, None] + tri[None])
            if verts:
                out.append((dim, np.concatenate(verts), np.concatenate(edges), np.concatenate(flexes),
                            np.concatenate(kidx)))  # fmt: skip
        return out

    return static_memo(m, "flex_stretch_groups", build)


def _slider_vertices(m: Model) -> np.ndarray:
    """Static (nflexvert,) bool: the vertex's body is MuJoCo's simple slider body (body_simple 2: a flexcomp vertex
    body with three slide joints on a static parent), whose three dofs take xmat' f of a force f at the vertex (as
    mj_flexPassiveStretch does for such bodies)."""
    vb = np.asarray(m.flex_vertbodyid)
    return (np.asarray(m.body_simple)[vb] == 2) & (np.asarray(m.body_dofnum)[vb] == 3)


def _vertex_qfrc(m: Model, d: Data, frc: jax.Array) -> jax.Array:
    """(nv,) generalized force of world forces frc (nflexvert, 3) applied at the flex vertices (mj_applyFT): xmat' f
    into the three dofs of a slider vertex body, J' f through the point Jacobian for the others."""
    vb = np.asarray(m.flex_vertbodyid)
    fast = _slider_vertices(m)
    qfrc = jp.zeros(m.nv, frc.dtype)
    if fast.any():
        b = vb[fast]
        loc = jp.einsum("nji,nj->ni", d.xmat[b], frc[fast])
        qfrc = qfrc.at[np.asarray(m.body_dofadr)[b][:, None] + np.arange(3)].add(loc)
    if (~fast).any():
        jacp, _ = support.jac_batch(m, d, d.flexvert_xpos[~fast], vb[~fast])
        qfrc = qfrc + jp.einsum("ni,niv->v", frc[~fast], jacp)
    return qfrc


def _stretch_forces(m: Model, d: Data, damper: bool) -> jax.Array:
    """(nflexvert, 3) world forces at the vertices of the stretch term: per element, s = K elongation and the force
    -s_e (x_a - x_b) on the first vertex a of edge e, +s_e (x_a - x_b) on the second; spring elongation l^2 - l0^2,
    damper elongation (l^2 - (l - v dt)^2) damping / dt (Rayleigh damping, Kharevych et al.)."""
    frc = jp.zeros((m.nflexvert, 3), d.flexvert_xpos.dtype)
    x = d.flexvert_xpos
    length = d.flexedge_length
    dt = m.opt.timestep
    for dim, verts, edges, flexes, kidx in _stretch_groups(m):
        K = m.flex_stiffness[kidx]
        ln = length[edges]
        if damper:
            vel = (d.flexedge_J @ d.qvel)[edges]
            kD = jp.where(dt > 0, m.flex_damping[flexes] / jp.where(dt > 0, dt, 1.0), 0.0)
            prev = ln - vel * dt
            elong = (ln * ln - prev * prev) * kD[:, None]
        else:
            l0 = m.flexedge_length0[edges]
            elong = ln * ln - l0 * l0
        s = jp.einsum("nab,na->nb", K, elong)
        pa = np.asarray([a for a, _ in _ELEM_EDGES[dim]])
        pb = np.asarray([b for _, b in _ELEM_EDGES[dim]])
        g = x[verts[:, pa]] - x[verts[:, pb]]
        f = s[:, :, None] * g
        frc = frc.at[verts[:, pa]].add(-f).at[verts[:, pb]].add(f)
    return frc


def _bend_edges(m: Model) -> tuple:
    """Static interior edges of bending flexes: (global vertex ids (n, 4): edge (sorted), flap, flex_bending
    row start (n,), flex ids (n,))."""

    def build(m):
        quads, rows, flexes = [], [], []
        for f in range(m.nflex):
            badr = int(np.asarray(m.flex_bendingadr)[f])
            if np.asarray(m.flex_dim)[f] != 2 or badr < 0 or np.asarray(m.flex_rigid)[f]:
                continue
            eadr, num = int(np.asarray(m.flex_edgeadr)[f]), int(np.asarray(m.flex_edgenum)[f])
            vadr = int(np.asarray(m.flex_vertadr)[f])
            for e in range(num):
                flap = np.asarray(m.flex_edgeflap)[eadr + e]
                if flap[1] < 0:
                    continue
                quads.append(np.concatenate([np.asarray(m.flex_edge)[eadr + e], flap]) + vadr)
                rows.append(badr + 17 * e)
                flexes.append(f)
        return (np.asarray(quads, np.int64).reshape(-1, 4), np.asarray(rows, np.int64),
                np.asarray(flexes, np.int64))  # fmt: skip

    return static_memo(m, "flex_bend_edges", build)


def _vertex_vel(m: Model, d: Data) -> jax.Array:
    """(nflexvert, 3) world velocities of the flex vertices: xmat qvel of a slider vertex body's three dofs, the
    point Jacobian times qvel for the others (zero on a static body)."""
    vb = np.asarray(m.flex_vertbodyid)
    fast = _slider_vertices(m)
    vel = jp.zeros((m.nflexvert, 3), d.qvel.dtype)
    if fast.any():
        b = vb[fast]
        q = d.qvel[np.asarray(m.body_dofadr)[b][:, None] + np.arange(3)]
        vel = vel.at[np.nonzero(fast)[0]].set(jp.einsum("nij,nj->ni", d.xmat[b], q))
    if (~fast).any():
        jacp, _ = support.jac_batch(m, d, d.flexvert_xpos[~fast], vb[~fast])
        vel = vel.at[np.nonzero(~fast)[0]].set(jacp @ d.qvel)
    return vel


def _bend_forces(m: Model, d: Data, damper: bool) -> jax.Array:
    """(nflexvert, 3) world forces of the discrete bending energy (dim 2): per interior edge with vertices
    x0..x3 (edge, flap) -(sum_j b[i, j] x_j + b16 c_i) with c the curved-reference directions (spring) or
    -damping sum_j b[i, j] v_j with v the vertices' world velocities (damper), on every vertex (pinned ones act on
    their body, as MuJoCo 4.0 does)."""
    quads, rows, flexes = _bend_edges(m)
    frc = jp.zeros((m.nflexvert, 3), d.flexvert_xpos.dtype)
    if not len(rows):
        return frc
    B = m.flex_bending[rows[:, None] + np.arange(16)].reshape(-1, 4, 4)
    if damper:
        vel = _vertex_vel(m, d)
        out = -m.flex_damping[flexes][:, None, None] * jp.einsum("nij,njx->nix", B, vel[quads])
    else:
        x = d.flexvert_xpos[quads]
        ed = x[:, 1:] - x[:, :1]
        c1, c2, c3 = jp.cross(ed[:, 1], ed[:, 2]), jp.cross(ed[:, 2], ed[:, 0]), jp.cross(ed[:, 0], ed[:, 1])
        c = jp.stack([-(c1 + c2 + c3), c1, c2, c3], axis=1)
        out = -(jp.einsum("nij,njx->nix", B, x) + m.flex_bending[rows + 16][:, None, None] * c)
    return frc.at[quads].add(out)


def _has_elastic(m: Model) -> bool:
    return bool(_stretch_groups(m)) or bool(len(_bend_edges(m)[1]))


def elastic_spring(m: Model, d: Data) -> jax.Array:
    """qfrc_spring part of flex elasticity (nv,): stretch (flex_stiffness) and bending (flex_bending) forces, and the
    cell elasticity of interpolated flexes (flex_interp.elastic_qfrc)."""
    out = flex_interp.elastic_qfrc(m, d, False)
    if not _has_elastic(m):
        return out
    return out + _vertex_qfrc(m, d, _stretch_forces(m, d, False) + _bend_forces(m, d, False))


def elastic_damper(m: Model, d: Data) -> jax.Array:
    """qfrc_damper part of flex elasticity (nv,): Rayleigh damping of stretch and bending (flex_damping), and the
    cell damping of interpolated flexes."""
    out = flex_interp.elastic_qfrc(m, d, True)
    if not _has_elastic(m):
        return out
    return out + _vertex_qfrc(m, d, _stretch_forces(m, d, True) + _bend_forces(m, d, True))
