"""Interpolated flexes (<flexcomp dof="trilinear"|"quadratic">, flex_interp 1 or 2): vertices carried by nodes.

The flex's degrees of freedom are its nodes, a grid of (cellnum * order + 1) nodes per axis (x slowest, z fastest)
over the bounding box of its points: node i sits on body flex_nodebodyid[i] at the offset flex_node[i] in that body's
frame (a node body of its own at its origin, or the flexcomp's parent where the node is pinned). Vertex v has fixed
parametric coordinates flex_vert0[v] in [0, 1]^3 of the box: its cell (floor of coord * cellnum, clipped) and its
coordinates in the cell fix, once at compile time, the (order + 1)^3 nodes that carry it and their tensor-product
Lagrange weights (order 1: 1 - s, s; order 2: 2s^2 - 3s + 1, 4(s - s^2), 2s^2 - s per axis), so that

    flexvert_xpos[v] = sum_j weight[v, j] nodexpos[node[v, j]]                            (MuJoCo's mj_flex)

is linear in the node positions, and a force at a point of the flex (a contact) acts on the node bodies with the
weights of its parametric coordinates (mj_vertBodyWeight: weights below 1e-5 dropped). Everything here is static
numpy (host) but `node_xpos` / `vertex_xpos`, which are traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.types import Data, Model

__all__ = ["BODY_WEIGHT_MIN", "basis", "cell_nodes", "has_interp", "interp_vertices", "node_xpos", "vertex_xpos",
           "vertex_weights"]  # fmt: skip

BODY_WEIGHT_MIN = 1e-5  # node weights below this are left out of a contact's bodies (MuJoCo's mj_vertBodyWeight)


def _phi(s: np.ndarray, i: int, order: int) -> np.ndarray:
    """1-D Lagrange shape function i of `order` at s (MuJoCo's node layout: 0, 1/order, ..., 1)."""
    if order == 1:
        return 1 - s if i == 0 else s
    return (2 * s * s - 3 * s + 1, 4 * (s - s * s), 2 * s * s - s)[i]


def basis(local: np.ndarray, order: int) -> np.ndarray:
    """(n, (order + 1)^3) tensor-product weights at cell-local coordinates local (n, 3), node j = (i0, i1, i2) in
    x-major order (j = (i0 (order + 1) + i1) (order + 1) + i2)."""
    local = np.asarray(local, float).reshape(-1, 3)
    p = [np.stack([_phi(local[:, a], i, order) for i in range(order + 1)], axis=1) for a in range(3)]
    w = p[0][:, :, None, None] * p[1][:, None, :, None] * p[2][:, None, None, :]
    return w.reshape(len(local), -1)


def cell_nodes(coord: np.ndarray, cellnum, order: int) -> tuple[np.ndarray, np.ndarray]:
    """(cell-local coordinates (n, 3), node ids local to the flex (n, (order + 1)^3)) of parametric coordinates
    coord (n, 3) (MuJoCo's mju_cellLookup: the cell floor(coord * cellnum) clipped to the grid)."""
    coord = np.asarray(coord, float).reshape(-1, 3)
    c = np.asarray(cellnum, np.int64).reshape(3)
    cell = np.clip(np.floor(coord * c).astype(np.int64), 0, c - 1)
    local = np.clip(coord * c - cell, 0.0, 1.0)
    ng = c * order + 1
    li = np.arange(order + 1)
    gi = cell[:, 0, None] * order + li  # (n, order + 1)
    gj = cell[:, 1, None] * order + li
    gk = cell[:, 2, None] * order + li
    idx = (gi[:, :, None, None] * ng[1] + gj[:, None, :, None]) * ng[2] + gk[:, None, None, :]
    return local, idx.reshape(len(coord), -1)


def has_interp(m: Model) -> bool:
    """Static: the model has an interpolated flex."""
    return bool(m.nflex) and bool(np.any(np.asarray(m.flex_interp) != 0))


def interp_vertices(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static (vertex ids (n,), global node ids (n, npc), weights (n, npc)) of the vertices of interpolated flexes,
    npc the most nodes per cell (8 trilinear, 27 quadratic; zero weights pad a trilinear flex's rows)."""

    def build(m):
        interp = np.asarray(m.flex_interp)
        npc = max([(abs(int(o)) + 1) ** 3 for o in interp if o] or [1])
        vids, nodes, wts = [np.zeros(0, np.int64)], [np.zeros((0, npc), np.int64)], [np.zeros((0, npc))]
        for f in np.nonzero(interp)[0]:
            order = int(interp[f])
            vadr, vnum = int(m.flex_vertadr[f]), int(m.flex_vertnum[f])
            local, idx = cell_nodes(np.asarray(m.flex_vert0)[vadr : vadr + vnum], np.asarray(m.flex_cellnum)[f],
                                    order)  # fmt: skip
            w = basis(local, order)
            pad = npc - w.shape[1]
            vids.append(np.arange(vadr, vadr + vnum))
            nodes.append(np.pad(idx + int(m.flex_nodeadr[f]), ((0, 0), (0, pad))))
            wts.append(np.pad(w, ((0, 0), (0, pad))))
        return np.concatenate(vids), np.concatenate(nodes), np.concatenate(wts)

    return static_memo(m, "flex_interp_vertices", build)


def node_xpos(m: Model, d: Data) -> jax.Array:
    """(nflexnode, 3) world positions of the flex nodes: body pose applied to the offset flex_node."""
    nb = np.asarray(m.flex_nodebodyid)
    return d.xpos[nb] + jp.einsum("nij,nj->ni", d.xmat[nb], m.flex_node)


def vertex_xpos(m: Model, d: Data, xpos: jax.Array) -> jax.Array:
    """xpos (nflexvert, 3) with the rows of interpolated flexes' vertices set from their nodes."""
    vids, nodes, wts = interp_vertices(m)
    if not len(vids):
        return xpos
    nx = node_xpos(m, d)
    return xpos.at[vids].set(jp.einsum("nj,njx->nx", jp.asarray(wts, xpos.dtype), nx[nodes]))


def vertex_weights(m: Model, f: jax.Array, coord: jax.Array, width: int) -> tuple[jax.Array, jax.Array]:
    """(node bodies (n, width), weights (n, width)) of points of interpolated flexes f (n,) at parametric
    coordinates coord (n, 3): the (order + 1)^3 nodes of the point's cell, weights below BODY_WEIGHT_MIN zeroed
    (MuJoCo's mj_vertBodyWeight; the flexes' cell grids are static, the coordinates traced). Rows of a flex that
    is not interpolated get body 0 and weight 0."""
    interp = np.asarray(m.flex_interp)
    n = coord.shape[0]
    bodies = jp.zeros((n, width), jp.int32)
    wts = jp.zeros((n, width), coord.dtype)
    nb = jp.asarray(np.asarray(m.flex_nodebodyid), jp.int32)
    for fi in np.nonzero(interp)[0]:
        order = int(interp[fi])
        c = np.asarray(m.flex_cellnum)[fi].astype(np.int64)
        cell = jp.clip(jp.floor(coord * c).astype(jp.int32), 0, jp.asarray(c - 1, jp.int32))
        local = jp.clip(coord * c - cell, 0.0, 1.0)
        p = []
        for a in range(3):
            s = local[:, a]
            p.append(jp.stack([1 - s, s] if order == 1 else [2 * s * s - 3 * s + 1, 4 * (s - s * s), 2 * s * s - s],
                              axis=1))  # fmt: skip
        w = (p[0][:, :, None, None] * p[1][:, None, :, None] * p[2][:, None, None, :]).reshape(n, -1)
        ng = c * order + 1
        li = jp.arange(order + 1)
        gi = cell[:, 0, None] * order + li
        gj = cell[:, 1, None] * order + li
        gk = cell[:, 2, None] * order + li
        idx = ((gi[:, :, None, None] * int(ng[1]) + gj[:, None, :, None]) * int(ng[2]) + gk[:, None, None, :])
        idx = idx.reshape(n, -1) + int(m.flex_nodeadr[fi])
        w = jp.where(jp.abs(w) < BODY_WEIGHT_MIN, 0.0, w)
        npc = w.shape[1]
        pad = width - npc
        w = jp.pad(w, ((0, 0), (0, pad)))
        b = jp.pad(nb[idx], ((0, 0), (0, pad)))
        sel = (f == fi)[:, None]
        bodies = jp.where(sel, b, bodies)
        wts = jp.where(sel, w, wts)
    return bodies, wts
