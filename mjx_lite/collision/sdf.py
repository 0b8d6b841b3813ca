"""SDF collisions (MuJoCo's mjc_SDF): an SDF geom against a sphere, capsule, ellipsoid, cylinder, box or another SDF.

MuJoCo finds contacts between two signed distance fields A (geom2, the SDF) and B (geom1) by local optimisation
from `opt.sdf_initpoints` starting points, the Halton points (bases 2, 3, 5) of the intersection of the two geoms'
bounding boxes (geom_aabb) in geom1's frame. From each, in geom2's frame:
  1. `opt.sdf_iterations` steps of gradient descent on A + B + |max(A, B)| (small where both are negative);
  2. one step on max(A, B) (the intersection), whose value is the contact distance;
  3. a contact if that distance is <= 0 and the point is new (not within 1e-15 of an earlier contact), with normal
     -normalize(normalize(grad A) - normalize(grad B)) (the midsurface A = B; from geom1 into geom2) and position
     the point moved by -dist/2 along the normal.
Each descent step is MuJoCo's: gradient g at x, then backtracking from alpha = 2 halving (15 candidates,
x - alpha g, alpha down to 6.1e-5) to the first with f - f0 <= -0.1 alpha |g|^2 (or the last); the descent stops
when a step did not improve f (x and f back to the step's start: what MuJoCo 4.0 does, measured against it; the
source of its main branch reads as if x stayed at the worse point) or the gradient is not finite (distance MAXVAL).
Here the 15 candidates of a step are evaluated at once and the first accepted one picked (the same point as
MuJoCo's loop), and the iterations are a `lax.scan` with a stop flag: fixed shapes, bounded loops, one row per
starting point (the pair's `sdf_initpoints` contact rows; rows that are not contacts hold NOCONTACT).

The distances and gradients of the primitive geoms are MuJoCo's (`geomDistance`/`geomGradient`: the box inside
uses a field that turns linearly from radial to the face normals, the ellipsoid a first-order distance); SDF
plugins are `sdf_plugins`. A plane against an SDF is not this collider: MuJoCo collides it with the SDF's
marching-cubes mesh as with a mesh (primitive.plane_mesh).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import sdf_octree, sdf_plugins
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo, Vec3
from mjx_lite.types import MINVAL, GeomType

MAXVAL = 1e10  # mjMAXVAL
OCTREE = "octree"  # geom_sdf of an sdf geom without a plugin: (OCTREE, (oct address, cell count, depth))
_C, _RHO, _AMIN = 0.1, 0.5, 1e-4  # MuJoCo's line search: target decrease, step reduction, smallest step
_NSTEP = 15  # candidate steps 2 * 0.5^k, k = 1..15: MuJoCo's loop stops at the first alpha <= 1e-4 (k = 15)
_ALPHA = 2.0 * _RHO ** np.arange(1, _NSTEP + 1)
_ACCEPT_ANY = _ALPHA <= _AMIN  # the last candidate is taken whatever its value


def halton(index: int, base: int) -> float:
    """MuJoCo's mju_Halton (radical inverse of index in base)."""
    n0, b = index, float(base)
    f, hn = 1.0 / b, 0.0
    while n0 > 0:
        n1 = n0 // base
        hn += f * (n0 - n1 * base)
        f /= b
        n0 = n1
    return hn


@functools.cache
def halton_points(n: int) -> np.ndarray:
    """(n, 3) Halton points of indices 0..n-1 in bases 2, 3, 5 (host constants)."""
    return np.array([[halton(j, 2), halton(j, 3), halton(j, 5)] for j in range(n)], float).reshape(n, 3)


# ---- distances and gradients of one geom at one point of its frame ------------------------------------------


def _div(a, b):
    """a / b with a finite derivative where b == 0 (value inf/nan as in C)."""
    return a / b


def _norm(v):
    s = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    pos = s > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, s, 1.0)), 0.0)


def _normalize(v):
    """MuJoCo's mju_normalize3: v / |v|, or (1, 0, 0) below MINVAL; returns (unit, norm)."""
    n = _norm(v)
    small = n < MINVAL
    inv = 1.0 / jp.where(small, 1.0, n)
    return jp.where(small, jp.array([1.0, 0.0, 0.0], v.dtype), v * inv), n


def _radial_field(a, x, size):
    field = -size / a
    field, _ = _normalize(field)
    return jp.where(x < 0, -field, field)


def _box_distance(x, size):
    a = jp.abs(x) - size
    outside = jp.any(a >= 0)
    b = jp.maximum(a, 0.0)
    d_out = _norm(b) + jp.minimum(jp.max(a), 0.0)
    a_in = jp.where(outside, -1.0, a)  # (keeps the inside branch finite where it is not taken)
    f = _radial_field(a_in, x, size)
    t = -a_in / jp.abs(f)
    d_in = -jp.min(t) * _norm(f)
    return jp.where(outside, d_out, d_in)


def _box_gradient(x, size):
    a = jp.abs(x) - size
    k = jp.where(a[0] > a[1], 0, 1)
    ak = jp.where(k == 0, a[0], a[1])
    al = jp.where(a[2] > ak, a[2], ak)
    inside = al < 0
    a_in = jp.where(inside, a, -1.0)
    radial = _radial_field(a_in, x, size)
    b = jp.maximum(a, 0.0)
    c = _norm(b)
    c = jp.where(c > 0, c, 1.0)
    sgn = jp.where(x > 0, 1.0, jp.where(x < 0, -1.0, jp.nan))  # x / |x| (nan at 0, never taken where a > 0)
    out = jp.where(a > 0, b / c * sgn, 0.0)
    return jp.where(inside, radial, out)


def _capsule_vec(x, size):
    return jp.stack([x[0], x[1], x[2] - jp.clip(x[2], -size[1], size[1])])


def _ellipsoid(x, size):
    a = x / size
    b = a / size
    return a, b, _norm(a), _norm(b)


def geom_distance(gtype: int, sdf, x: Vec3, size: Vec3):
    """MuJoCo's geomDistance of a geom of static type gtype (sdf: (plugin name, attributes) for an SDF) at x (3,)
    in its frame."""
    if gtype == GeomType.PLANE:
        return x[2]
    if gtype == GeomType.SPHERE:
        return _norm(x) - size[0]
    if gtype == GeomType.BOX:
        return _box_distance(x, size)
    if gtype == GeomType.CAPSULE:
        return _norm(_capsule_vec(x, size)) - size[0]
    if gtype == GeomType.ELLIPSOID:
        _, _, k0, k1 = _ellipsoid(x, size)
        return k0 * (k0 - 1.0) / jp.where(k1 > 0, k1, 1.0)
    if gtype == GeomType.CYLINDER:
        a0 = jp.sqrt(x[0] * x[0] + x[1] * x[1] + 0.0) - size[0]
        a1 = jp.abs(x[2]) - size[1]
        b0, b1 = jp.maximum(a0, 0.0), jp.maximum(a1, 0.0)
        s = b0 * b0 + b1 * b1
        return jp.minimum(jp.maximum(a0, a1), 0.0) + jp.where(s > 0, jp.sqrt(jp.where(s > 0, s, 1.0)), 0.0)
    if gtype == GeomType.SDF:
        if sdf[0] == OCTREE:
            return sdf_octree.distance(x, sdf[1])
        return sdf_plugins.DISTANCE[sdf[0]](x, sdf[1])
    raise NotImplementedError(f"sdf collision: geom type {gtype}")


def geom_gradient(gtype: int, sdf, x: Vec3, size: Vec3):
    """MuJoCo's geomGradient (3,) (see `geom_distance`)."""
    dt = x.dtype
    if gtype == GeomType.PLANE:
        return jp.array([0.0, 0.0, 1.0], dt)
    if gtype == GeomType.SPHERE:
        c = _norm(x)
        return x * (1.0 / c)
    if gtype == GeomType.BOX:
        return _box_gradient(x, size)
    if gtype == GeomType.CAPSULE:
        a = _capsule_vec(x, size)
        return a / _norm(a)
    if gtype == GeomType.ELLIPSOID:
        a, b, k0, k1 = _ellipsoid(x, size)
        inv0, inv1 = 1.0 / k0, 1.0 / k1
        gk0 = b * inv0
        gk1 = b * inv1 / (size * size)
        df0 = (2.0 * k0 - 1.0) * inv1
        df1 = k0 * (k0 - 1.0) * inv1 * inv1
        g, _ = _normalize(gk0 * df0 - gk1 * df1)
        return g
    if gtype == GeomType.CYLINDER:
        c = _norm(jp.stack([x[0], x[1], 0.0 * x[2]]))
        e = jp.abs(x[2])
        a0, a1 = c - size[0], e - size[1]
        grada = jp.stack([x[0] / jp.maximum(c, 1.0 / MAXVAL), x[1] / jp.maximum(c, 1.0 / MAXVAL),
                          x[2] / jp.maximum(e, 1.0 / MAXVAL)])  # fmt: skip
        j0 = a0 > a1
        aj = jp.where(j0, a0, a1)
        inside = jp.where(j0, jp.stack([grada[0], grada[1], 0.0 * x[2]]), jp.stack([0.0 * x[0], 0.0 * x[1], grada[2]]))
        b0, b1 = jp.maximum(a0, 0.0), jp.maximum(a1, 0.0)
        bnorm = jp.maximum(_norm(jp.stack([b0, b1, 0.0 * b0])), 1.0 / MAXVAL)
        out = jp.stack([grada[0] * b0 / bnorm, grada[1] * b0 / bnorm, grada[2] * b1 / bnorm])
        return jp.where(aj < 0, inside, out)
    if gtype == GeomType.SDF:
        if sdf[0] == OCTREE:
            return sdf_octree.gradient(x, sdf[1])
        return sdf_plugins.gradient(sdf[0], sdf[1], x)
    raise NotImplementedError(f"sdf collision: geom type {gtype}")


# ---- the pair's combined fields -----------------------------------------------------------------------------


class _Pair:
    """The two fields of one pair in geom2's frame: A (geom2, an SDF) at x, B (geom1) at y = R21 x + p21."""

    def __init__(self, type1, sdf1, sdf2, size1, size2, rot21, off21):
        self.type1, self.sdf1, self.sdf2 = type1, sdf1, sdf2
        self.size1, self.size2, self.rot21, self.off21 = size1, size2, rot21, off21

    def ab(self, x):
        y = self.rot21 @ x + self.off21
        return geom_distance(GeomType.SDF, self.sdf2, x, self.size2), geom_distance(
            self.type1, self.sdf1, y, self.size1
        )

    def grads(self, x):
        y = self.rot21 @ x + self.off21
        g1 = geom_gradient(GeomType.SDF, self.sdf2, x, self.size2)
        g2 = self.rot21.T @ geom_gradient(self.type1, self.sdf1, y, self.size1)
        return g1, g2

    def collision(self, x):
        a, b = self.ab(x)
        return a + b + jp.abs(jp.maximum(a, b))

    def collision_grad(self, x):
        a, b = self.ab(x)
        g1, g2 = self.grads(x)
        return g1 + g2 + jp.where(a > b, g1, g2) * jp.where(jp.maximum(a, b) > 0, 1.0, -1.0)

    def intersection(self, x):
        a, b = self.ab(x)
        return jp.maximum(a, b)

    def intersection_grad(self, x):
        a, b = self.ab(x)
        g1, g2 = self.grads(x)
        return jp.where(a > b, g1, g2)

    def midsurface_grad(self, x):
        g1, g2 = self.grads(x)
        g1, _ = _normalize(g1)
        g2, _ = _normalize(g2)
        g, _ = _normalize(g1 - g2)
        return g


def step_gradient(x, f, grad, niter: int):
    """MuJoCo's stepGradient: `niter` backtracking gradient-descent steps on f from x (3,). Returns (x, dist)."""
    alpha = jp.asarray(_ALPHA, x.dtype)
    accept_any = jp.asarray(_ACCEPT_ANY)

    def body(carry, _):
        x, dist, done = carry
        g = grad(x)
        bad = jp.any(~jp.isfinite(g) | (jp.abs(g) > MAXVAL))
        g = jp.where(bad, 0.0, g)
        dist0 = f(x)
        wolfe = -_C * 2.0 * (g[0] * g[0] + g[1] * g[1] + g[2] * g[2]) * (alpha / 2.0)
        xs = x[None, :] + (-alpha)[:, None] * g[None, :]  # (15, 3)
        ds = jax.vmap(f)(xs)
        ok = accept_any | ~(ds - dist0 > wolfe)
        k = jp.argmax(ok)
        x1, d1 = xs[k], ds[k]
        worse = dist0 < d1  # no improvement: back to x0 (its distance) and stop
        run = ~done & ~bad & ~worse
        stop = done | bad | worse
        x = jp.where(run, x1, x)
        dist = jp.where(done, dist, jp.where(bad, MAXVAL, jp.where(worse, dist0, d1)))
        return (x, dist, stop), None

    init = (x, jp.asarray(MAXVAL, x.dtype), jp.asarray(False))
    (x, dist, _), _ = jax.lax.scan(body, init, None, length=niter)
    return x, dist


def _corners(aabb):
    """(8, 3) corners of a box (centre, half sizes) (6,) in MuJoCo's order (bit 0: x, 1: y, 2: z)."""
    s = np.array([[1 if i & 1 else -1, 1 if i & 2 else -1, 1 if i & 4 else -1] for i in range(8)], float)
    return aabb[:3][None, :] + s * aabb[3:][None, :]


def sdf_collide(
    g1: GeomInfo, g2: GeomInfo, aabb1, aabb2, *, type1: int, sdf1, sdf2, initpoints: int, iterations: int
) -> Contacts:
    """Contacts (initpoints rows) of geom1 (type `type1`; sdf1: its plugin if an SDF) and geom2 (an SDF, plugin
    sdf2), from their world poses and bounding boxes aabb1, aabb2 (6,) (geom_aabb). See the module docstring."""
    r1, r2 = g1.mat, g2.mat
    rot21 = r1.T @ r2  # geom2's frame -> geom1's
    off21 = r1.T @ (g2.pos - g1.pos)
    rot12 = r2.T @ r1
    off12 = r2.T @ (g1.pos - g2.pos)
    c1 = _corners(aabb1)
    c2 = _corners(aabb2) @ rot21.T + off21
    lo = jp.maximum(jp.min(c1, axis=0), jp.min(c2, axis=0))
    hi = jp.minimum(jp.max(c1, axis=0), jp.max(c2, axis=0))
    overlap = jp.all(hi >= lo)
    pair = _Pair(type1, sdf1, sdf2, g1.size, g2.size, rot21, off21)
    h = jp.asarray(halton_points(initpoints), g1.pos.dtype)

    def one(hp):
        x = lo + (hi - lo) * hp  # geom1's frame
        x = rot12 @ x + off12  # geom2's frame
        x, _ = step_gradient(x, pair.collision, pair.collision_grad, iterations)
        x, dist = step_gradient(x, pair.intersection, pair.intersection_grad, 1)
        g = pair.midsurface_grad(x)
        nrm, glen = _normalize(g)
        return x, dist, -nrm, glen

    xs, dist, nl, glen = jax.vmap(one)(h)
    valid = overlap & (dist <= 0) & (glen >= MINVAL)
    # MuJoCo skips a point within MINVAL of an earlier contact's
    d2 = jp.sum((xs[:, None, :] - xs[None, :, :]) ** 2, axis=-1)
    close = (d2 < MINVAL * MINVAL) & jp.tril(jp.ones((initpoints, initpoints), bool), -1)
    known = jp.any(close & valid[None, :], axis=1)
    valid = valid & ~known
    normal = nl @ r2.T
    pos = xs @ r2.T + g2.pos + (0.5 * dist)[:, None] * normal  # (MuJoCo 4.0's contacts: +dist/2 along the normal)
    dist = jp.where(valid, dist, NOCONTACT)
    pos = jp.where(valid[:, None], pos, 0.0)
    normal = jp.where(valid[:, None], normal, jp.array([0.0, 0.0, 1.0], normal.dtype))
    return Contacts(dist, pos, normal, jp.zeros_like(pos))


def bind(fn, m):
    """The collider fn (`collider`, `sdf_mesh_pair.collider`) with the octree tables of its octree SDFs and its mesh's
    vertices taken from model m (traced)."""
    kw = dict(fn.keywords)
    for k in ("sdf1", "sdf2"):
        if kw.get(k) is not None and kw[k][0] == OCTREE:
            kw[k] = (OCTREE, sdf_octree.tables(m, *kw[k][1]))
    if "mesh" in kw:  # mesh-SDF pairs (sdf_mesh_pair.py): the mesh's vertices
        adr, nv = kw.pop("mesh")
        kw["vert"] = m.mesh_vert[adr : adr + nv]
        adr, nb = kw.pop("bvh")
        kw["bvh_aabb"] = m.sdfbvh_aabb[adr : adr + nb]
    return functools.partial(fn.func, *fn.args, **kw)


def collider(m, type1: int, sdf1, sdf2) -> tuple:
    """(collider f(info1, info2, aabb1, aabb2) -> Contacts, contacts per pair) for a group of pairs sharing geom1's
    type and plugin (sdf1) and geom2's plugin (sdf2), bound to the model's sdf options (static)."""
    n = max(1, int(m.opt.sdf_initpoints))
    fn = functools.partial(sdf_collide, type1=type1, sdf1=sdf1, sdf2=sdf2, initpoints=n,
                           iterations=int(m.opt.sdf_iterations))  # fmt: skip
    return fn, n
