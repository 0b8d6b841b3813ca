"""The insidesite sensor with enclosed="true": how far an object juts out of a site (MuJoCo 4.0).

The value is the directed Hausdorff distance of the object from the site, max over the object's points p of the
site's signed distance sd(p) (positive outside, negative inside: then its magnitude is the clearance to the site's
boundary); for objtype body (xbody) the maximum over the geoms of the body (of its subtree). Every shape is convex,
so the maximum of the convex sd lies on the object's extreme points, and a shape that is a core inflated by a radius
(sphere: its centre; capsule: its segment) adds the radius to its core's maximum. The objects mjx_lite computes in
every site (sphere, capsule, box, cylinder, ellipsoid) are those whose core is a finite point set: sphere and
capsule (1 and 2 points), box (8 corners) and mesh (its vertices, whose convex hull is the collision shape), as
geoms or sites; in a sphere site also ellipsoids and cylinders (their farthest point from the site's centre). This
is the exact value. MuJoCo 4.0 computes it iteratively (bounded by opt.ccd_iterations and opt.ccd_tolerance) and its
value never exceeds it: run to convergence it equals it on most poses, but it can stop below it (200 random poses
per pair: cylinder sites 9-12% of poses, up to 2.3e-2; box objects in sphere, box and capsule sites 1-9%; capsules
in box sites, meshes in capsule sites 1-5%), and at the default settings more often (tests/test_sensor_inside.py).
Shapes: points (n, 3); one sensor value (1, 1).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import safe_norm
from mjx_lite.types import Data, GeomType, Model, ObjType

_BOX_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)  # (8, 3)
_ELLIPSOID_BISECTIONS = 80  # bisection steps of the ellipsoid's nearest-point equation (then 2 Newton steps)


def enclosed_shapes(
    objtype: int, objid: int, geom_bodyid: np.ndarray, body_parentid: np.ndarray
) -> list[tuple[int, int]]:
    """The (ObjType.GEOM or ObjType.SITE, id) shapes an enclosed insidesite sensor reads: the geom or site itself,
    a body's own geoms (BODY) or those of its subtree (XBODY; parents come before their children)."""
    if objtype in (ObjType.GEOM, ObjType.SITE):
        return [(objtype, objid)]
    bodies = {objid}
    if objtype == ObjType.XBODY:
        for b in range(1, len(body_parentid)):
            if int(body_parentid[b]) in bodies:
                bodies.add(b)
    return [(ObjType.GEOM, int(g)) for g in range(len(geom_bodyid)) if int(geom_bodyid[g]) in bodies]


def _core(m: Model, d: Data, kind: int, i: int) -> tuple[jax.Array, jax.Array]:
    """World points (n, 3) of a shape's core and its radius ()."""
    t, size, pos, mat = _shape(m, d, kind, i)
    zero = jp.zeros((), size.dtype)
    if t == GeomType.SPHERE:
        return pos[None], size[0]
    if t == GeomType.CAPSULE:
        ends = jp.stack([-mat[:, 2], mat[:, 2]]) * size[1]
        return pos + ends, size[0]
    if t == GeomType.BOX:
        local = jp.asarray(_BOX_CORNERS, size.dtype) * size
    elif t == GeomType.MESH:
        mesh = int(np.asarray(m.geom_dataid)[i])
        adr, num = int(np.asarray(m.mesh_vertadr)[mesh]), int(np.asarray(m.mesh_vertnum)[mesh])
        local = m.mesh_vert[adr : adr + num]
    else:  # refused at load (mjcf/sensor.py)
        raise NotImplementedError(f"mjx_lite: enclosed insidesite of a shape of type {GeomType(t).name}")
    return pos + local @ mat.T, zero


def _shape(m: Model, d: Data, kind: int, i: int) -> tuple[int, jax.Array, jax.Array, jax.Array]:
    """(type, size (3,), world position (3,), world rotation (3, 3)) of a geom or site."""
    if kind == ObjType.GEOM:
        return int(np.asarray(m.geom_type)[i]), m.geom_size[i], d.geom_xpos[i], d.geom_xmat[i]
    return int(np.asarray(m.site_type)[i]), m.site_size[i], d.site_xpos[i], d.site_xmat[i]


def _farthest_cylinder(c: jax.Array, size: jax.Array, pos: jax.Array, mat: jax.Array) -> jax.Array:
    """Largest distance () from point c (3,) to a cylinder (radius, half-height; frame pos, mat): to the farther
    point of its two rim circles, sqrt((w . a)^2 + (|w across a| + radius)^2) with w = c - rim centre."""
    axis = mat[:, 2]
    best = []
    for sign in (-1.0, 1.0):
        w = c - (pos + sign * size[1] * axis)
        wa = jp.dot(w, axis)
        best.append(wa * wa + (safe_norm(w - wa * axis) + size[0]) ** 2)
    return jp.sqrt(jp.maximum(best[0], best[1]))


def _farthest_ellipsoid(c: jax.Array, a: jax.Array, pos: jax.Array, mat: jax.Array) -> jax.Array:
    """Largest distance () from point c (3,) to an ellipsoid (semi-axes a (3,); frame pos, mat). In the ellipsoid's
    frame (c at y), the farthest point is p_i = a_i^2 y_i / (t + a_i^2) at the root t < -max a^2 of
    F(t) = sum (a_i y_i / (t + a_i^2))^2 - 1, increasing there from -1 (fixed bisection, then Newton steps); where y
    has no component along the longest axis k the maximum can sit at t = -a_k^2 instead (p_k from the constraint), and
    the axis end points are candidates too: every candidate lies on the ellipsoid, the largest distance wins."""
    y = mat.T @ (c - pos)
    a2 = a * a
    amax2 = jp.max(a2)
    eps = jp.finfo(c.dtype).eps

    def f(t):
        r = a * y / (t + a2)
        return jp.sum(r * r) - 1.0, -2.0 * jp.sum(r * r / (t + a2))

    lo = -2.0 * amax2 - jp.sqrt(amax2) * safe_norm(y) - eps
    hi = -amax2 * (1 + 4 * eps)

    def bisect(c, _):
        lo, hi = c
        mid = 0.5 * (lo + hi)
        neg = f(mid)[0] < 0
        return (jp.where(neg, mid, lo), jp.where(neg, hi, mid)), None

    (lo, hi), _ = jax.lax.scan(bisect, (lo, hi), None, length=_ELLIPSOID_BISECTIONS)
    t = 0.5 * (lo + hi)
    for _ in range(2):  # unclipped (see `_ellipsoid_sd`)
        v, dv = f(t)
        t = t - v / jp.where(dv > 0, dv, 1.0)
    cands = [a2 * y / (t + a2)]
    k = jp.argmax(a2)
    onehot = jax.nn.one_hot(k, 3, dtype=c.dtype)
    gap = a2 - amax2
    pd = jp.where(jp.abs(gap) > eps * amax2, a2 * y / jp.where(jp.abs(gap) > eps * amax2, gap, 1.0), 0.0) * (1 - onehot)
    rest = 1.0 - jp.sum(pd * pd / a2)
    root = jp.where(rest > 0, jp.sqrt(jp.where(rest > 0, rest, 1.0) * amax2), 0.0)  # (finite gradient at 0)
    pk = -jp.where(jp.dot(onehot, y) > 0, 1.0, -1.0) * root
    cands.append(jp.where(rest >= 0, pd + pk * onehot, cands[0]))
    cands += [sg * a[j] * jp.eye(3, dtype=c.dtype)[j] for j in range(3) for sg in (-1.0, 1.0)]
    return jp.max(safe_norm(jp.stack(cands) - y))


def _box_sd(d: jax.Array) -> jax.Array:
    """Signed distance from per-axis excesses d (n, k) = |q| - half sizes: outside part + inside part, (n,)."""
    return safe_norm(jp.maximum(d, 0.0)) + jp.minimum(jp.max(d, axis=-1), 0.0)


def _ellipsoid_sd(q: jax.Array, a: jax.Array) -> jax.Array:
    """Signed distance (n,) of local points q (n, 3) from the ellipsoid with semi-axes a (3,): the nearest boundary
    point x_i = a_i^2 y_i / (t + a_i^2) (y = |q|) at the root t > -min a^2 of F(t) = sum (a_i y_i / (t + a_i^2))^2 - 1,
    decreasing there: fixed bisection, then Newton steps (for the derivatives)."""
    y = jp.abs(q)
    a2 = a * a

    def f(t):
        r = a * y / (t[:, None] + a2)
        return jp.sum(r * r, -1) - 1.0, -2.0 * jp.sum(r * r / (t[:, None] + a2), -1)

    lo = jp.full(y.shape[:1], -jp.min(a2)) * (1 - 4 * jp.finfo(q.dtype).eps)  # F > 0 there (y_min != 0)
    hi = jp.max(a) * safe_norm(y) + jp.max(a2)

    def bisect(c, _):
        lo, hi = c
        mid = 0.5 * (lo + hi)
        pos = f(mid)[0] > 0
        return (jp.where(pos, mid, lo), jp.where(pos, hi, mid)), None

    (lo, hi), _ = jax.lax.scan(bisect, (lo, hi), None, length=_ELLIPSOID_BISECTIONS)
    t = 0.5 * (lo + hi)
    for _ in range(2):  # at the root to rounding: unclipped steps of that size, which carry the derivatives
        v, dv = f(t)
        t = t - v / jp.where(dv < 0, dv, -1.0)
    x = a2 * y / (t[:, None] + a2)
    outside = jp.sum(y * y / a2, -1) > 1.0
    dist = safe_norm(y - x)
    return jp.where(outside, dist, -dist)


def site_sd(m: Model, d: Data, site: int, p: jax.Array) -> jax.Array:
    """Signed distance (n,) of world points p (n, 3) from the site's shape (positive outside)."""
    t, s = int(np.asarray(m.site_type)[site]), m.site_size[site]
    q = (p - d.site_xpos[site]) @ d.site_xmat[site]  # site frame
    if t == GeomType.SPHERE:
        return safe_norm(q) - s[0]
    if t == GeomType.CAPSULE:
        z = jp.clip(q[:, 2], -s[1], s[1])
        return safe_norm(q - jp.stack([jp.zeros_like(z), jp.zeros_like(z), z], -1)) - s[0]
    if t == GeomType.BOX:
        return _box_sd(jp.abs(q) - s)
    if t == GeomType.CYLINDER:
        rho = safe_norm(q[:, :2])
        return _box_sd(jp.stack([rho - s[0], jp.abs(q[:, 2]) - s[1]], -1))
    if t == GeomType.ELLIPSOID:
        return _ellipsoid_sd(q, s)
    raise NotImplementedError(f"mjx_lite: enclosed insidesite in a site of type {GeomType(t).name}")


def enclosed(m: Model, d: Data, sensor: int) -> jax.Array:
    """The value (1, 1) of enclosed insidesite sensor `sensor` (static id): max over the object's shapes of the
    site's signed distance at their core points plus their radius."""
    objtype, objid = int(np.asarray(m.sensor_objtype)[sensor]), int(np.asarray(m.sensor_objid)[sensor])
    site = int(np.asarray(m.sensor_refid)[sensor])
    shapes = enclosed_shapes(objtype, objid, np.asarray(m.geom_bodyid), np.asarray(m.body_parentid))
    values = []
    for kind, i in shapes:
        t, size, pos, mat = _shape(m, d, kind, i)
        if t in (GeomType.CYLINDER, GeomType.ELLIPSOID):  # curved: in a sphere site only (refused at load otherwise)
            if int(np.asarray(m.site_type)[site]) != GeomType.SPHERE:
                raise NotImplementedError("mjx_lite: enclosed insidesite of an ellipsoid or cylinder outside a sphere")
            far = _farthest_cylinder if t == GeomType.CYLINDER else _farthest_ellipsoid
            values.append(far(d.site_xpos[site], size, pos, mat) - m.site_size[site][0])
            continue
        pts, r = _core(m, d, kind, i)
        values.append(jp.max(site_sd(m, d, site, pts)) + r)
    return jp.max(jp.stack(values)).reshape(1, 1)
