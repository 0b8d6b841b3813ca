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

from mjx_lite import math
from mjx_lite._struct import static_memo
from mjx_lite.pipeline import support
from mjx_lite.types import Data, Model

__all__ = ["BODY_WEIGHT_MIN", "basis", "cell_nodes", "has_interp", "interp_vertices", "node_xpos", "vertex_xpos",
           "vertex_weights"]  # fmt: skip

BODY_WEIGHT_MIN = 0.0  # node weights below this are left out of a contact's bodies: none in MuJoCo 4.0 (probed: it
# keeps weights of 1e-7 in flex-flex rows, where 3.12's mj_vertBodyWeight dropped those below 1e-5)


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


def _dphi(s: np.ndarray, i: int, order: int) -> np.ndarray:
    """d/ds of `_phi`."""
    if order == 1:
        return np.full_like(s, -1.0 if i == 0 else 1.0)
    return (4 * s - 3, 4 * (1 - 2 * s), 4 * s - 1)[i]


def cell_stiffness(order: int, size, young: float, poisson: float) -> np.ndarray:
    """(3 npc, 3 npc) linear-elastic stiffness of one cell of size (3,) (isotropic: Lame lambda, mu from young and
    poisson), dof 3 n + axis for node n in x-major order: the integral of B' C B over the cell, exact by Gauss-Legendre
    quadrature with order + 1 points per axis (the integrand is of degree 2 order per axis)."""
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = young / (2 * (1 + poisson))
    C = np.zeros((6, 6))
    C[:3, :3] = lam
    C[np.arange(3), np.arange(3)] += 2 * mu
    C[3:, 3:] = mu * np.eye(3)
    pts, wts = np.polynomial.legendre.leggauss(order + 1)
    pts, wts = 0.5 + 0.5 * pts, 0.5 * wts
    size = np.asarray(size, float)
    n1 = order + 1
    npc = n1**3
    K = np.zeros((3 * npc, 3 * npc))
    for a in range(n1):
        for b in range(n1):
            for c in range(n1):
                s = np.array([pts[a], pts[b], pts[c]])
                B = np.zeros((6, 3 * npc))
                for n in range(npc):
                    i, j, k = n // (n1 * n1), (n // n1) % n1, n % n1
                    p = [_phi(s[0], i, order), _phi(s[1], j, order), _phi(s[2], k, order)]
                    dp = [_dphi(s[0], i, order), _dphi(s[1], j, order), _dphi(s[2], k, order)]
                    g = np.array([dp[0] * p[1] * p[2], p[0] * dp[1] * p[2], p[0] * p[1] * dp[2]]) / size
                    B[0, 3 * n], B[1, 3 * n + 1], B[2, 3 * n + 2] = g
                    B[3, 3 * n], B[3, 3 * n + 1] = g[1], g[0]
                    B[4, 3 * n + 1], B[4, 3 * n + 2] = g[2], g[1]
                    B[5, 3 * n], B[5, 3 * n + 2] = g[2], g[0]
                K += B.T @ C @ B * (wts[a] * wts[b] * wts[c] * np.prod(size))
    return K


ROT_EPS = 1e-9  # MuJoCo's rotEPS: the rotation extraction stops where its step is smaller
ROT_ITERATIONS = 500  # and after this many steps (mju_mat2Rot)


def _rot_eps(dtype) -> float:
    """The stopping threshold on |omega|: MuJoCo's ROT_EPS in float64; in float32, where round-off keeps |omega|
    near 1e-7 and ROT_EPS is never reached, a few float32 ulps (the rotation is then converged to float32's
    precision; without it every float32 call ran all ROT_ITERATIONS steps)."""
    return ROT_EPS if jp.finfo(dtype).eps < 1e-10 else 64.0 * float(jp.finfo(dtype).eps)


def _rot_step(F: jax.Array, q: jax.Array) -> tuple[jax.Array, jax.Array]:
    """One step of mju_mat2Rot for every row: (the next q (n, 4), |omega| (n,))."""
    R = math.quat_to_mat(q)
    num = jp.sum(jp.cross(jp.swapaxes(R, -1, -2), jp.swapaxes(F, -1, -2)), axis=1)  # sum over columns
    den = jp.abs(jp.sum(R * F, axis=(1, 2))) + 1e-15
    omega = num / den[:, None]
    w = math.safe_norm(omega)
    axis = omega / jp.where(w < 1e-15, 1.0, w)[:, None]
    half = 0.5 * w
    qrot = jp.concatenate([jp.cos(half)[:, None], axis * jp.sin(half)[:, None]], axis=1)
    qn = math.quat_mul(qrot, q)
    nrm = math.safe_norm(qn)
    qn = jp.where((jp.abs(nrm - 1.0) > 1e-15)[:, None], qn / jp.where(nrm < 1e-15, 1.0, nrm)[:, None], qn)
    return qn, w


@jax.custom_jvp
def mat_to_rot(F: jax.Array) -> jax.Array:
    """(n, 4) unit quaternions of the rotational part of F (n, 3, 3), as MuJoCo's mju_mat2Rot (Mueller et al. 2016,
    from the identity): q <- normalize(quat(axis omega, |omega|) q) with omega = sum_c R(q)_c x F_c / (|sum_c R(q)_c .
    F_c| + 1e-15), stopping where |omega| < ROT_EPS or after ROT_ITERATIONS steps.

    The loop is a `while_loop` bounded by ROT_ITERATIONS that stops once every row has (finished rows unchanged:
    each row gets MuJoCo's iterate), so a step costs the iterations the states need (tens), not ROT_ITERATIONS.
    Derivatives are implicit (custom_jvp): at the loop's fixed point omega = 0, i.e. S = R' F is symmetric (R the
    polar rotation of F), and differentiating that gives dR = R [w]x with (tr(S) I - S) w = vee(R' dF - dF' R)."""
    n = F.shape[0]
    eps = _rot_eps(F.dtype)
    q0 = jp.zeros((n, 4), F.dtype).at[:, 0].set(1.0)

    def cond(carry):
        _, done, it = carry
        return (it < ROT_ITERATIONS) & ~jp.all(done)

    def body(carry):
        q, done, it = carry
        qn, w = _rot_step(F, q)
        stop = done | (w < eps)
        return jp.where(stop[:, None], q, qn), stop, it + 1

    q, _, _ = jax.lax.while_loop(cond, body, (q0, jp.zeros(n, bool), jp.zeros((), jp.int32)))
    return q


@mat_to_rot.defjvp
def _mat_to_rot_jvp(primals, tangents):
    (F,), (dF,) = primals, tangents
    q = mat_to_rot(F)
    R = math.quat_to_mat(q)
    S = jp.einsum("nji,njk->nik", R, F)
    S = 0.5 * (S + jp.swapaxes(S, -1, -2))
    A = jp.einsum("nji,njk->nik", R, dF)
    A = A - jp.swapaxes(A, -1, -2)
    b = jp.stack([A[:, 2, 1], A[:, 0, 2], A[:, 1, 0]], axis=1)
    G = jp.trace(S, axis1=1, axis2=2)[:, None, None] * jp.eye(3, dtype=F.dtype) - S
    det = jp.linalg.det(G)
    ok = jp.abs(det) > 1e-12 * (1.0 + jp.sum(S * S, axis=(1, 2))) ** 1.5  # a degenerate F (rank < 2): no turn
    w = jp.linalg.solve(jp.where(ok[:, None, None], G, jp.eye(3, dtype=F.dtype)), b[:, :, None])[:, :, 0]
    w = jp.where(ok[:, None], w, 0.0)
    dq = 0.5 * math.quat_mul(q, jp.concatenate([jp.zeros_like(w[:, :1]), w], axis=1))  # dR = R [w]x: body frame
    return q, dq


def mat_to_rot_np(F: np.ndarray) -> np.ndarray:
    """`mat_to_rot` of one (3, 3) matrix on the host (numpy, the same steps): (4,) quaternion."""
    q = np.array([1.0, 0.0, 0.0, 0.0])
    for _ in range(ROT_ITERATIONS):
        R = np.asarray(math.quat_to_mat(q))
        omega = np.cross(R.T, F.T).sum(axis=0) / (abs(np.sum(R * F)) + 1e-15)
        w = float(np.sqrt(omega @ omega))
        if w < ROT_EPS:
            break
        qrot = np.concatenate([[np.cos(0.5 * w)], omega / w * np.sin(0.5 * w)])
        q = np.asarray(math.quat_mul(qrot, q))
        nrm = float(np.sqrt(q @ q))
        if abs(nrm - 1.0) > 1e-15:
            q = q / nrm
    return q


def _center_gradients(order: int) -> np.ndarray:
    """(npc, 3) parametric gradients of the cell's shape functions at the cell center (mju_defGradient's point)."""
    n1 = order + 1
    s = np.array(0.5)
    out = np.zeros((n1**3, 3))
    for n in range(n1**3):
        i, j, k = n // (n1 * n1), (n // n1) % n1, n % n1
        p = [_phi(s, i, order), _phi(s, j, order), _phi(s, k, order)]
        dp = [_dphi(s, i, order), _dphi(s, j, order), _dphi(s, k, order)]
        out[n] = [dp[0] * p[1] * p[2], p[0] * dp[1] * p[2], p[0] * p[1] * dp[2]]
    return out


def elastic_cells(m: Model) -> list[tuple]:
    """Static groups, one per order, of the cells of interpolated flexes with stiffness (flex_stiffnessadr >= 0):
    (order, global node ids (C, npc), flex_stiffness start of each cell's (3 npc)^2 block (C,), flex ids (C,))."""

    def build(m):
        groups: dict[int, list] = {}
        for f in np.nonzero(np.asarray(m.flex_interp))[0]:
            sadr = int(np.asarray(m.flex_stiffnessadr)[f])
            if sadr < 0:
                continue
            order = abs(int(np.asarray(m.flex_interp)[f]))
            c = np.asarray(m.flex_cellnum)[f].astype(np.int64)
            npc = (order + 1) ** 3
            ncell = int(np.prod(c))
            centers = (np.stack(np.unravel_index(np.arange(ncell), tuple(c)), axis=1) + 0.5) / c
            _, idx = cell_nodes(centers, c, order)
            groups.setdefault(order, []).append((idx + int(m.flex_nodeadr[f]), sadr + (3 * npc) ** 2 *
                                                 np.arange(ncell), np.full(ncell, f)))  # fmt: skip
        return [(o, *(np.concatenate(x) for x in zip(*g))) for o, g in sorted(groups.items())]

    return static_memo(m, "flex_interp_elastic_cells", build)


def elastic_node_forces(m: Model, d: Data, damper: bool) -> jax.Array:
    """(nflexnode, 3) world forces on the nodes of MuJoCo's corotational cell elasticity (mj_flexPassiveInterp):
    per cell, R the rotation of the deformation gradient (in physical units: gradients over the cell's rest size) at
    its center (mat_to_rot), k = the cell's flex_stiffness
    block (minus its stiffness matrix); spring: R k (R' x - x0) with x the nodes' positions and x0 flex_node0;
    damper: flex_damping R k R' v with v the nodes' velocities."""
    nx = node_xpos(m, d)
    out = jp.zeros((m.nflexnode, 3), nx.dtype)
    if damper:
        nb = np.asarray(m.flex_nodebodyid)
        jacp, _ = support.jac_batch(m, d, nx, nb)
        vel = jacp @ d.qvel
    for order, nodes, kadr, flexes in elastic_cells(m):
        npc = nodes.shape[1]
        x = nx[nodes]  # (C, npc, 3)
        n1 = order + 1
        x0 = m.flex_node0[nodes]  # the cell's rest size along the grid's axes: from node (0, 0, 0) to (order, 0, 0)..
        size = jp.stack([math.safe_norm(x0[:, k] - x0[:, 0]) for k in (order * n1 * n1, order * n1, order)], axis=1)
        grad = jp.asarray(_center_gradients(order), x.dtype)[None] / size[:, None, :]  # physical gradients
        F = jp.einsum("cnr,cnk->crk", x, grad)
        R = math.quat_to_mat(mat_to_rot(F))
        K = m.flex_stiffness[kadr[:, None] + np.arange((3 * npc) ** 2)].reshape(-1, 3 * npc, 3 * npc)
        if damper:
            loc = jp.einsum("cji,cnj->cni", R, vel[nodes]).reshape(-1, 3 * npc)
            fl = jp.einsum("cab,cb->ca", K, loc) * m.flex_damping[flexes][:, None]
        else:
            loc = jp.einsum("cji,cnj->cni", R, x) - m.flex_node0[nodes]
            fl = jp.einsum("cab,cb->ca", K, loc.reshape(-1, 3 * npc))
        f = jp.einsum("cij,cnj->cni", R, fl.reshape(-1, npc, 3))
        out = out.at[nodes].add(f)
    return out


def elastic_qfrc(m: Model, d: Data, damper: bool) -> jax.Array:
    """(nv,) generalized forces of `elastic_node_forces`, as mj_flexPassiveInterp applies them: a node at the origin
    of a body with dofs (its flex centered or its offset flex_node zero) puts xmat' f into that body's first three
    dofs alone (not the ancestors'); any other node J' f at its point (mj_applyFT)."""
    if not elastic_cells(m):
        return jp.zeros(m.nv, d.qvel.dtype)
    f = elastic_node_forces(m, d, damper)
    nb = np.asarray(m.flex_nodebodyid)
    flex = np.repeat(np.arange(m.nflex), np.asarray(m.flex_nodenum))
    dofs = np.asarray(m.body_dofnum)[nb] > 0
    fast = jp.asarray(dofs) & (jp.asarray(np.asarray(m.flex_centered)[flex]) | jp.all(m.flex_node == 0, axis=1))
    qfrc = jp.zeros(m.nv, f.dtype)
    if dofs.any():
        b = nb[dofs]
        loc = jp.einsum("nji,nj->ni", d.xmat[b], jp.where(fast[dofs][:, None], f[dofs], 0.0))
        qfrc = qfrc.at[np.asarray(m.body_dofadr)[b][:, None] + np.arange(3)].add(loc)
    jacp, _ = support.jac_batch(m, d, node_xpos(m, d), nb)
    return qfrc + jp.einsum("ni,niv->v", jp.where(fast[:, None], 0.0, f), jacp)
