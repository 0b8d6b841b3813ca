"""Ray / primitive intersections in the geom's local frame (JAX, broadcasting over leading dimensions).

Shared by the renderer (`mjx_lite.render`) and ray casting (`pipeline.ray`, mj_ray and rangefinder sensors).

Every function takes local ray origins `o: (..., 3)`, directions `d: (..., 3)` (not necessarily unit: the ray
parameter `t` is in units of `d`), the geom size `size: (..., 3)` (MuJoCo's geom_size) and returns
`(t0, t1, n0, n1)`: the parameter interval where the ray is inside the solid (`t0 <= t1`; `t0 = inf` on a miss)
and the outward surface normals at entry and exit (local frame, unit). `first_hit` turns an interval into the
first surface crossed at or after `tmin` (the near clipping plane).

All divisions and square roots are guarded so that gradients are finite everywhere (the gradient of a hit
distance is exact away from silhouettes, where the hit switches surface).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.math import dot3

__all__ = ["box", "capsule", "cylinder", "ellipsoid", "first_hit", "plane", "sphere", "triangle", "unit"]

# Directions with |component| below this are treated as parallel to a slab (box faces, cylinder caps, plane).
_PARALLEL = 1e-12


def _inf(x: jax.Array) -> jax.Array:
    return jp.full_like(x, jp.inf)


def _recip(x: jax.Array) -> jax.Array:
    """1/x with |x| >= _PARALLEL (sign kept; +0 counts as positive)."""
    return 1.0 / jp.where(jp.abs(x) < _PARALLEL, jp.where(x < 0, -_PARALLEL, _PARALLEL), x)


def _quadratic(a, b, c):
    """Roots of a t^2 + 2 b t + c = 0 (a > 0): (t0, t1, real)."""
    disc = b * b - a * c
    real = disc > 0
    sq = jp.sqrt(jp.where(real, disc, 1.0))
    ia = 1.0 / jp.where(a > 0, a, 1.0)
    return (-b - sq) * ia, (-b + sq) * ia, real & (a > 0)


def unit(v):
    """v / |v| along the last axis (zero vectors stay zero, gradients finite)."""
    n2 = dot3(v, v)[..., None]
    return v / jp.sqrt(jp.where(n2 > 0, n2, 1.0))


def first_hit(t0, t1, n0, n1, tmin, tmax):
    """The first crossing at or after tmin: entry (t0, n0), else exit (t1, -n1 seen from inside), else inf."""
    use0 = t0 >= tmin
    t = jp.where(use0, t0, t1)
    ok = (t0 <= t1) & (t >= tmin) & (t <= tmax) & jp.isfinite(t)
    n = jp.where(use0[..., None], n0, n1)
    return jp.where(ok, t, jp.inf), n


def sphere(o, d, size):
    r = size[..., 0]
    t0, t1, real = _quadratic(dot3(d, d), dot3(o, d), dot3(o, o) - r * r)
    n0, n1 = unit(o + t0[..., None] * d), unit(o + t1[..., None] * d)  # finite on a miss too (finite gradients)
    return jp.where(real, t0, jp.inf), jp.where(real, t1, -jp.inf), n0, n1


def ellipsoid(o, d, size):
    inv = 1.0 / jp.where(size > 0, size, 1.0)  # other geom types' sizes reach here under a type switch
    os, ds = o * inv, d * inv
    t0, t1, real = _quadratic(dot3(ds, ds), dot3(os, ds), dot3(os, os) - 1.0)
    inv2 = inv * inv
    n0, n1 = unit((o + t0[..., None] * d) * inv2), unit((o + t1[..., None] * d) * inv2)  # finite on a miss too
    return jp.where(real, t0, jp.inf), jp.where(real, t1, -jp.inf), n0, n1


def _slab(o, d, half):
    """Interval of the slab |x| <= half along one axis, and the sign of the entry face's normal."""
    inv = _recip(d)
    ta, tb = (-half - o) * inv, (half - o) * inv
    parallel = jp.abs(d) < _PARALLEL
    inside = jp.abs(o) <= half
    lo = jp.where(parallel, jp.where(inside, -jp.inf, jp.inf), jp.minimum(ta, tb))
    hi = jp.where(parallel, jp.where(inside, jp.inf, -jp.inf), jp.maximum(ta, tb))
    return lo, hi, -jp.sign(jp.where(d == 0, 1.0, d))


def box(o, d, size):
    los, his, sgn = [], [], []
    for k in range(3):
        lo, hi, s = _slab(o[..., k], d[..., k], size[..., k])
        los.append(lo)
        his.append(hi)
        sgn.append(s)
    lo, hi, sg = jp.stack(los, -1), jp.stack(his, -1), jp.stack(sgn, -1)
    t0, t1 = jp.max(lo, -1), jp.min(hi, -1)
    eye = jp.eye(3, dtype=o.dtype)
    n0 = eye[jp.argmax(lo, -1)] * jp.take_along_axis(sg, jp.argmax(lo, -1)[..., None], -1)
    n1 = -eye[jp.argmin(hi, -1)] * jp.take_along_axis(sg, jp.argmin(hi, -1)[..., None], -1)
    return t0, t1, n0, n1


def _tube(o, d, r):
    """Interval inside the infinite cylinder x^2 + y^2 <= r^2 (about z)."""
    oz = o * jp.asarray([1.0, 1.0, 0.0], o.dtype)
    dz = d * jp.asarray([1.0, 1.0, 0.0], d.dtype)
    a, c = dot3(dz, dz), dot3(oz, oz) - r * r
    t0, t1, real = _quadratic(a, dot3(oz, dz), c)
    parallel = a <= _PARALLEL * _PARALLEL
    t0 = jp.where(parallel, jp.where(c <= 0, -jp.inf, jp.inf), jp.where(real, t0, jp.inf))
    t1 = jp.where(parallel, jp.where(c <= 0, jp.inf, -jp.inf), jp.where(real, t1, -jp.inf))
    n0 = unit(oz + jp.where(jp.isfinite(t0), t0, 0.0)[..., None] * dz)
    n1 = unit(oz + jp.where(jp.isfinite(t1), t1, 0.0)[..., None] * dz)
    return t0, t1, n0, n1


def cylinder(o, d, size):
    r, h = size[..., 0], size[..., 1]
    c0, c1, cn0, cn1 = _tube(o, d, r)
    z0, z1, zs = _slab(o[..., 2], d[..., 2], h)
    ez = jp.zeros_like(o).at[..., 2].set(1.0)
    t0 = jp.maximum(c0, z0)
    t1 = jp.minimum(c1, z1)
    n0 = jp.where((c0 >= z0)[..., None], cn0, ez * zs[..., None])
    n1 = jp.where((c1 <= z1)[..., None], cn1, -ez * zs[..., None])
    return t0, t1, n0, n1


def capsule(o, d, size):
    r, h = size[..., 0], size[..., 1]
    parts = [cylinder(o, d, size)]
    for s in (1.0, -1.0):
        ez = jp.asarray([0.0, 0.0, 1.0], o.dtype)
        parts.append(sphere(o - (s * h)[..., None] * ez, d, size))
    t0s = jp.stack([p[0] for p in parts], -1)
    t1s = jp.stack([p[1] for p in parts], -1)
    hit = t0s <= t1s
    t0s = jp.where(hit, t0s, jp.inf)
    t1s = jp.where(hit, t1s, -jp.inf)
    i0, i1 = jp.argmin(t0s, -1), jp.argmax(t1s, -1)
    n0s = jp.stack([p[2] for p in parts], -2)
    n1s = jp.stack([p[3] for p in parts], -2)
    n0 = jp.take_along_axis(n0s, i0[..., None, None], -2)[..., 0, :]
    n1 = jp.take_along_axis(n1s, i1[..., None, None], -2)[..., 0, :]
    del r
    return jp.min(t0s, -1), jp.max(t1s, -1), n0, n1


def plane(o, d, size):
    """The plane z = 0, seen from both sides as MuJoCo draws it; size[0:2] > 0 bounds it to a rectangle."""
    t = -o[..., 2] * _recip(d[..., 2])
    p = o + t[..., None] * d
    sized = size[..., 0] > 0
    inside = (jp.abs(p[..., 0]) <= size[..., 0]) & (jp.abs(p[..., 1]) <= size[..., 1])
    ok = (jp.abs(d[..., 2]) > _PARALLEL) & (inside | ~sized)
    t = jp.where(ok, t, jp.inf)
    n = jp.zeros_like(o).at[..., 2].set(1.0)
    return t, jp.where(ok, t, -jp.inf), n, n


def triangle(o, d, v0, v1, v2, eps: float = 0.0):
    """Two-sided ray / triangle (Moller-Trumbore): (t, unnormalised normal e1 x e2); t = inf on a miss. `eps` widens
    the triangle by that much in barycentric terms (render/bvh.EDGE_EPS closes the round-off cracks
    between triangles that share an edge; 0: the exact test)."""
    e1, e2 = v1 - v0, v2 - v0
    p = jp.cross(d, e2)
    det = dot3(e1, p)
    ok = jp.abs(det) > 1e-30
    inv = 1.0 / jp.where(ok, det, 1.0)
    s = o - v0
    u = dot3(s, p) * inv
    q = jp.cross(s, e1)
    v = dot3(d, q) * inv
    t = dot3(e2, q) * inv
    ok = ok & (u >= -eps) & (v >= -eps) & (u + v <= 1 + eps)
    return jp.where(ok, t, jp.inf), jp.cross(e1, e2)
