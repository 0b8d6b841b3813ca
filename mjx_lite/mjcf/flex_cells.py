"""Cut-cell quadrature of trilinear interpolated flexes (MuJoCo 4.0's finite-cell integration, probed).

MuJoCo 4.0 integrates the cell stiffness and lumps the node masses of a volumetric interpolated flex over the mesh's
volume, not over the whole cell: with the indicator w(x) = 1 inside the mesh, ALPHA outside,

    K_c = integral over cell c of w B' C B,
    mass_cn = max(integral over c of w phi_n, MASS_FLOOR * integral over c of phi_n)

(node n's mass summed over the cells that are not empty, then scaled to the flexcomp's mass), a cell without mesh
volume being empty: no stiffness, no mass, and the nodes of empty cells only pinned. Matched to round-off against
`mujoco` 4.0 on tetrahedra, tetrahedral meshes and closed surface meshes (tests/test_flex_interp.py).

The mesh volume: a dim 3 flex's tetrahedra; a dim 2 flex's closed, consistently oriented surface, as the signed
tetrahedra from the box center to its triangles (their signed sum is the volume's indicator). The integrals are exact:
each tetrahedron is clipped to the cells it meets and the moments x^a y^b z^c (a, b, c <= 2, cell-local coordinates)
of the pieces are integrated by a collapsed (Duffy) Gauss rule; per cell they become weights at the 3 x 3 x 3
Gauss-Legendre points of the cell that integrate every polynomial of degree <= 2 per axis exactly, which covers the
trilinear masses (degree 1) and stiffness (degree 2). Everything here is host numpy, at compile time.
"""

from __future__ import annotations

import numpy as np

__all__ = ["ALPHA", "MASS_FLOOR", "cell_weights", "closed_surface"]

ALPHA = 1e-6  # the weight of the cell outside the mesh (finite-cell method's fictitious-domain factor)
MASS_FLOOR = 0.02  # a node's mass from a cell is at least this fraction of its full-cell integral
EMPTY_VOL = 1e-12  # a cell whose mesh volume is below this fraction of its own is empty

_GL3 = np.polynomial.legendre.leggauss(3)
GAUSS_X = 0.5 + 0.5 * _GL3[0]  # 3 Gauss-Legendre points on [0, 1]
GAUSS_W = 0.5 * _GL3[1]


def _duffy_rule(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(points (n^3, 3) barycentric-free coordinates in the unit tetrahedron, weights) of the collapsed Gauss rule,
    exact for polynomials of total degree <= 2n - 3."""
    x, w = np.polynomial.legendre.leggauss(n)
    x, w = 0.5 + 0.5 * x, 0.5 * w
    a, b, c = np.meshgrid(x, x, x, indexing="ij")
    wa, wb, wc = np.meshgrid(w, w, w, indexing="ij")
    pts = np.stack([a, b * (1 - a), c * (1 - a) * (1 - b)], axis=-1).reshape(-1, 3)
    wts = (wa * wb * wc * (1 - a) ** 2 * (1 - b)).reshape(-1)
    return pts, wts


_TET_PTS, _TET_WTS = _duffy_rule(5)  # degree 6 monomials (2 per axis) exactly


def closed_surface(elem: np.ndarray) -> bool:
    """Every edge of the triangles elem (n, 3) is shared by exactly two of them, traversed in opposite directions."""
    directed: dict[tuple[int, int], int] = {}
    for tri in np.asarray(elem).reshape(-1, 3):
        for a, b in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])):
            key = (int(a), int(b))
            if key in directed:
                return False
            directed[key] = 1
    return all((b, a) in directed for a, b in directed)


def _split(tet: np.ndarray, axis: int, value: float, keep_below: bool) -> list[np.ndarray]:
    """The part of tetrahedron tet (4, 3) on one side of the plane x[axis] = value, as tetrahedra."""
    s = tet[:, axis] - value
    if not keep_below:
        s = -s
    inside = s <= 0
    k = int(inside.sum())
    if k == 4:
        return [tet]
    if k == 0:
        return []

    def cut(i, j):
        return tet[i] + s[i] / (s[i] - s[j]) * (tet[j] - tet[i])

    ins = list(np.nonzero(inside)[0])
    out = list(np.nonzero(~inside)[0])
    if k == 1:
        i = ins[0]
        return [np.array([tet[i], cut(i, out[0]), cut(i, out[1]), cut(i, out[2])])]
    if k == 3:  # the tetrahedron less its corner at o: a prism (i, j, l) - (cut(i, o), cut(j, o), cut(l, o))
        o = out[0]
        i, j, l = ins
        a, b, c = cut(i, o), cut(j, o), cut(l, o)
        return [np.array([tet[i], tet[j], tet[l], a]), np.array([tet[j], tet[l], a, b]), np.array([tet[l], a, b, c])]
    i, j = ins  # k == 2: a prism (i, cut(i, o0), cut(i, o1)) - (j, cut(j, o0), cut(j, o1))
    o0, o1 = out
    a, b, c, d = cut(i, o0), cut(i, o1), cut(j, o0), cut(j, o1)
    return [np.array([tet[i], a, b, tet[j]]), np.array([a, b, tet[j], c]), np.array([b, tet[j], c, d])]


def _clip(tet: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> list[np.ndarray]:
    pieces = [tet]
    for axis in range(3):
        for value, below in ((hi[axis], True), (lo[axis], False)):
            if np.all(tet[:, axis] <= value) if below else np.all(tet[:, axis] >= value):
                continue
            pieces = [q for p in pieces for q in _split(p, axis, value, below)]
    return pieces


def _moments(pieces: list[np.ndarray], sign: float, lo: np.ndarray, size: np.ndarray) -> np.ndarray:
    """(3, 3, 3) integrals of x^a y^b z^c (cell-local coordinates in [0, 1]) over the pieces, times sign."""
    if not pieces:
        return np.zeros((3, 3, 3))
    X = np.asarray(pieces)  # (p, 4, 3)
    E = X[:, 1:] - X[:, :1]  # (p, 3, 3) edge rows
    vol = np.abs(np.linalg.det(E))
    pts = X[:, None, 0] + np.einsum("qk,pkj->pqj", _TET_PTS, E)  # (p, q, 3)
    loc = (pts - lo) / size
    w = vol[:, None] * _TET_WTS[None]
    pw = loc[..., None] ** np.arange(3)  # (p, q, 3 axes, 3 powers)
    return sign * np.einsum("pq,pqa,pqb,pqc->abc", w, pw[:, :, 0], pw[:, :, 1], pw[:, :, 2]) / np.prod(size)


def cell_weights(point: np.ndarray, elem: np.ndarray, dim: int, cellnum) -> tuple[np.ndarray, np.ndarray]:
    """(weights (ncell, 3, 3, 3) at the cells' Gauss points (GAUSS_X per axis, x-major cells) that integrate the
    indicator of the mesh volume times any polynomial of degree <= 2 per axis, as a fraction of the cell's volume;
    empty (ncell,) bool: cells without mesh volume). point (n, 3) in the frame of the grid, elem the tetrahedra
    (dim 3) or the closed surface's triangles (dim 2)."""
    point = np.asarray(point, float)
    lo, hi = point.min(axis=0), point.max(axis=0)
    c = np.asarray(cellnum, np.int64)
    size = (hi - lo) / c
    elem = np.asarray(elem, np.int64).reshape(-1, dim + 1)
    if dim == 3:
        tets, signs = point[elem], np.ones(len(elem))
    else:
        ref = 0.5 * (lo + hi)
        tets = np.concatenate([np.broadcast_to(ref, (len(elem), 1, 3)), point[elem]], axis=1)
        signs = np.sign(np.linalg.det(tets[:, 1:] - tets[:, :1]))
        if (signs * np.abs(np.linalg.det(tets[:, 1:] - tets[:, :1]))).sum() < 0:
            signs = -signs  # (an inward-oriented surface)
    moments = np.zeros((*c, 3, 3, 3))
    for tet, sgn in zip(tets, signs):
        if sgn == 0:
            continue
        c0 = np.clip(np.floor((tet.min(axis=0) - lo) / size).astype(np.int64), 0, c - 1)
        c1 = np.clip(np.floor((tet.max(axis=0) - lo) / size).astype(np.int64), 0, c - 1)
        for i in range(c0[0], c1[0] + 1):
            for j in range(c0[1], c1[1] + 1):
                for k in range(c0[2], c1[2] + 1):
                    clo = lo + np.array([i, j, k]) * size
                    pieces = [tet] if (c0 == c1).all() else _clip(tet, clo, clo + size)
                    moments[i, j, k] += _moments(pieces, sgn, clo, size)
    moments = moments.reshape(-1, 3, 3, 3)
    empty = moments[:, 0, 0, 0] <= EMPTY_VOL
    vinv = np.linalg.inv(GAUSS_X[None, :] ** np.arange(3)[:, None])  # solves sum_j x_j^a w_j = m_a
    weights = np.einsum("ja,kb,lc,nabc->njkl", vinv, vinv, vinv, moments)
    return weights, empty


def _full_weights() -> np.ndarray:
    return GAUSS_W[:, None, None] * GAUSS_W[None, :, None] * GAUSS_W[None, None, :]


def _shape(order: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(values (27, 8), parametric gradients (27, 8, 3)) of the trilinear shape functions (node x-major) at the
    cell's Gauss points (x-major)."""
    s = GAUSS_X
    p = np.stack([1 - s, s], axis=1)  # (3 points, 2 nodes)
    dp = np.tile(np.array([-1.0, 1.0]), (3, 1))
    val = np.einsum("ia,jb,kc->ijkabc", p, p, p).reshape(27, 8)
    gx = np.einsum("ia,jb,kc->ijkabc", dp, p, p).reshape(27, 8)
    gy = np.einsum("ia,jb,kc->ijkabc", p, dp, p).reshape(27, 8)
    gz = np.einsum("ia,jb,kc->ijkabc", p, p, dp).reshape(27, 8)
    return val, np.stack([gx, gy, gz], axis=-1)


def node_masses(weights: np.ndarray, empty: np.ndarray) -> np.ndarray:
    """(ncell, 8) mass of each cell's nodes (x-major), in units of the cell volume: the integral of the shape
    function over the mesh (ALPHA outside it), at least MASS_FLOOR of its full-cell integral; zero in empty cells."""
    val, _ = _shape()
    full = _full_weights().reshape(-1) @ val  # (8,) = 1/8 each
    inside = weights.reshape(len(weights), -1) @ val
    out = np.maximum(inside + ALPHA * (full - inside), MASS_FLOOR * full)
    return np.where(empty[:, None], 0.0, out)


def cell_stiffness(weights: np.ndarray, empty: np.ndarray, size, young: float, poisson: float) -> np.ndarray:
    """(ncell, 24, 24) linear-elastic stiffness of each trilinear cell of size (3,) integrated with the cell's
    weights (ALPHA outside the mesh), dof 3 n + axis for node n in x-major order; zero in empty cells."""
    size = np.asarray(size, float)
    lam = young * poisson / ((1 + poisson) * (1 - 2 * poisson))
    mu = young / (2 * (1 + poisson))
    _, grad = _shape()
    g = grad / size  # (27, 8, 3) physical gradients
    B = np.zeros((27, 6, 24))
    for n in range(8):
        B[:, 0, 3 * n], B[:, 1, 3 * n + 1], B[:, 2, 3 * n + 2] = g[:, n, 0], g[:, n, 1], g[:, n, 2]
        B[:, 3, 3 * n], B[:, 3, 3 * n + 1] = g[:, n, 1], g[:, n, 0]
        B[:, 4, 3 * n + 1], B[:, 4, 3 * n + 2] = g[:, n, 2], g[:, n, 1]
        B[:, 5, 3 * n], B[:, 5, 3 * n + 2] = g[:, n, 2], g[:, n, 0]
    C = np.zeros((6, 6))
    C[:3, :3] = lam
    C[np.arange(3), np.arange(3)] += 2 * mu
    C[3:, 3:] = mu * np.eye(3)
    w = weights.reshape(len(weights), -1)
    w = (w + ALPHA * (_full_weights().reshape(-1) - w)) * np.prod(size)
    K = np.einsum("cq,qia,ij,qjb->cab", w, B, C, B)
    return np.where(empty[:, None, None], 0.0, K)
