"""The distance and gradient of a mesh's octree SDF (MuJoCo's oct_distance / oct_gradient), in JAX.

The octree (mjcf/sdf_octree.py) holds, per cell, its box (oct_aabb: centre, half sizes), its 8 children (oct_child,
-1 for a leaf) and the signed distances at its 8 corners (oct_coeff). At a point p in the mesh frame:
  - a point outside the root cell is first projected into it (each coordinate outside moved to 1e-6 inside the
    face), and the distance of that move is added to the field's value there;
  - the leaf containing the (projected) point is found from the root (child slot x + 2y + 4z, each bit set where the
    point's coordinate in the cell, scaled to [0, 1], is >= 0.5): a fixed number of steps, the tree's depth;
  - the value is the trilinear interpolation of the leaf's corner coefficients at the scaled coordinates c:
    sum_j w_j coeff_j with w_j = prod_k (c_k if bit k of j else 1 - c_k), summed in corner order as MuJoCo.
The gradient is MuJoCo 4.0's (measured: its contacts): inside the root the derivative of the interpolation per
unit length (in the scaled coordinates, divided by the leaf's size), outside it forward differences of the distance
with step 1e-8 (float64; in float32 the autodiff derivative of the distance, the step being below float32's
resolution).
All of it is a fixed-shape gather program, vmappable and differentiable in p and in the traced coefficients.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

FD_EPS = 1e-8  # MuJoCo's finite-difference step outside the root cell
_PROJ_EPS = 1e-6  # boxProjection: how far inside the root a projected point lands


class Tables:
    """One mesh's octree: aabb (n, 6) and coeff (n, 8) traced, child (n, 8) host ints, depth (static)."""

    def __init__(self, aabb, child: np.ndarray, coeff, depth: int):
        self.aabb, self.child, self.coeff, self.depth = aabb, child, coeff, int(depth)


def tables(m, adr: int, num: int, depth: int) -> Tables:
    """The octree of cells adr : adr + num of the model's oct_* arrays."""
    return Tables(m.oct_aabb[adr : adr + num], np.asarray(m.oct_child)[adr : adr + num], m.oct_coeff[adr : adr + num],
                  depth)  # fmt: skip


def _project(p, root):
    """MuJoCo's boxProjection: (point moved into the root cell, its distance to the cell (> 0 outside))."""
    r = p - root[:3]
    q = jp.abs(r) - root[3:]
    inside = jp.all(q <= 0)
    out = q >= 0
    s = jp.sum(jp.where(out, q * q, 0.0))
    dist = jp.sqrt(jp.where(s > 0, s, 1.0)) * (s > 0)
    moved = p - jp.where(out, jp.where(r > 0, q + _PROJ_EPS, -(q + _PROJ_EPS)), 0.0)
    return jp.where(inside, p, moved), jp.where(inside, jp.max(q), dist)


def _leaf(p, t: Tables):
    """(leaf index, scaled coordinates (3,)) of the leaf containing p (inside the root)."""
    child = jp.asarray(t.child)

    def coords(node):
        box = t.aabb[node]
        vmin, vmax = box[:3] - box[3:], box[:3] + box[3:]
        return (p - vmin) / (vmax - vmin)

    node = jp.zeros((), jp.int32)
    for _ in range(t.depth):
        c = coords(node)
        b = (c >= 0.5).astype(jp.int32)
        row = child[node]
        nxt = row[b[0] + 2 * b[1] + 4 * b[2]].astype(jp.int32)
        node = jp.where(row[0] < 0, node, nxt)
    return node, coords(node)


def _weights(c):
    """(8,) trilinear weights of the corners at scaled coordinates c (3,)."""
    out = []
    for j in range(8):
        w = c[0] if j & 1 else 1 - c[0]
        w = w * (c[1] if j & 2 else 1 - c[1])
        out.append(w * (c[2] if j & 4 else 1 - c[2]))
    return out


def _dweights(c):
    """(8, 3) derivatives of the weights with respect to the scaled coordinates (MuJoCo's dw)."""
    out = []
    for j in range(8):
        a0, a1, a2 = (c[0] if j & 1 else 1 - c[0]), (c[1] if j & 2 else 1 - c[1]), (c[2] if j & 4 else 1 - c[2])
        s0, s1, s2 = (1.0 if j & 1 else -1.0), (1.0 if j & 2 else -1.0), (1.0 if j & 4 else -1.0)
        out.append((s0 * a1 * a2, a0 * s1 * a2, a0 * a1 * s2))
    return out


def _eval(p, t: Tables):
    """(distance, leaf, scaled coordinates in the leaf, root box distance) at p (3,)."""
    q, box = _project(p, t.aabb[0])
    node, c = _leaf(q, t)
    coeff = t.coeff[node]
    sdf = jp.zeros((), p.dtype)
    for j, w in enumerate(_weights(c)):
        sdf = sdf + w * coeff[j]
    return jp.where(box > 0, sdf + box, sdf), node, c, box


def distance(p, t: Tables):
    """MuJoCo's oct_distance at p (3,) (mesh frame)."""
    return _eval(p, t)[0]


def gradient(p, t: Tables):
    """MuJoCo's oct_gradient (3,) at p (3,) (see the module docstring)."""
    if p.dtype != jp.float64:
        _, node, c, box = _eval(p, t)
        outer = jax.grad(lambda x: distance(x, t))(p)
    else:  # p and the three forward-difference points in one evaluation
        pts = jp.concatenate([p[None, :], p[None, :] + FD_EPS * jp.eye(3, dtype=p.dtype)])
        dist, nodes, cs, boxes = jax.vmap(lambda x: _eval(x, t))(pts)
        node, c, box = nodes[0], cs[0], boxes[0]
        outer = (dist[1:] - dist[0]) / FD_EPS
    coeff = t.coeff[node]
    g = [jp.zeros((), p.dtype)] * 3
    for j, dw in enumerate(_dweights(c)):
        g = [g[k] + dw[k] * coeff[j] for k in range(3)]
    inner = jp.stack(g) / (2.0 * t.aabb[node, 3:])  # per unit length: / (vmax - vmin) of the leaf
    return jp.where(box <= 0, inner, outer)
