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
from mjx_lite.pipeline import support
from mjx_lite.types import Data, Model

__all__ = ["edge_damper", "edge_flex", "edge_rows", "edge_spring", "edge_vertices", "equality_edges", "flex",
           "flex_velocity"]


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
    vb = np.asarray(m.flex_vertbodyid)
    xpos = d.xpos[vb] + jp.einsum("nij,nj->ni", d.xmat[vb], m.flex_vert)
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
    rigid = jp.asarray(np.asarray(m.flex_rigid)[edge_flex(m)])
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

