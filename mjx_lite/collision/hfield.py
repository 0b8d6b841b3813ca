"""Height-field collisions: a convex geom against the triangular prisms of a height field (mjc_ConvexHField).

As in MuJoCo, a height field is a grid of cells, each split into two triangles extruded down to the base
(z = -base); geom2 (sphere, capsule, ellipsoid, cylinder, box, mesh) is collided with every prism under its
bounding box with the general GJK/EPA of `convex.py`, which gives the true signed distance to each prism
(MuJoCo 4 does the same: contacts within margin carry their real distance). Spheres take an exact closed-form
point-prism distance instead (`_point_prism`: the same answer as converged GJK/EPA, ~100x cheaper under vmap). Grid conventions: vertex (r, c)
is at x = c*dx - sx, y = r*dy - sy, z = hfield_data[r*ncol + c] * sz with dx = 2 sx/(ncol-1),
dy = 2 sy/(nrow-1); cell (r, c) holds the triangles {(r+1,c), (r,c), (r+1,c+1)} and {(r,c), (r+1,c+1), (r,c+1)}
(the diagonal from (r, c) to (r+1, c+1), MuJoCo's triangulation).

Static sizes (fixed shapes):
  * window: each pair tests a window of `wr x wc` cells (2 prisms each) anchored at the cell under the
    lower corner of geom2's bounding box (in the height-field frame, enlarged by the margin). The window
    size is static per group, derived at table-build time from the concrete model (`window_size`): the
    largest geom_rbound of the group's geoms plus margins, over the cell size, plus one; capped by the grid
    and by `MAX_WINDOW`. If the model's floats are not concrete at build time (table rebuilt under a trace),
    the last window computed for the same static pair structure is reused (so a flag change does not change
    the contact slots), else `DEFAULT_WINDOW`. When geom2's box needs more cells than the window holds (a geom grown
    by domain randomisation, or the cap), the collider reports overflow and the driver increments
    `d.warning_number[Warning.CONTACTFULL]`: nothing is dropped silently.
  * contacts: one per colliding prism, as MuJoCo (up to mjMAXCONPAIR = 50 per pair): each pair has
    min(prisms in the window, 50) contact slots. Beyond 50 colliding prisms MuJoCo keeps the first 50 in its
    grid order, we the 50 deepest.
Normals: GJK/EPA's, as MuJoCo 4 with its native CCD (mjc_fixNormal only runs when nativeccd is disabled,
which is not supported here). The window is a static superset of MuJoCo's sub-grid.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_hash
from mjx_lite.collision import convex
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo
from mjx_lite.types import GeomType

MAXCONPAIR = 50  # contacts kept per (hfield, geom) pair at most: one per colliding prism (MuJoCo's mjMAXCONPAIR)
MAX_WINDOW = 16  # cap on window cells per axis (up to 2 * 16 * 16 prisms per pair)
DEFAULT_WINDOW = 6  # window cells per axis when the model's floats are not concrete at table-build time

_WINDOW_MEMO: dict[int, tuple[int, int]] = {}  # static pair structure -> last window computed from concrete floats
_COLLIDE_TYPES = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX,
                  GeomType.MESH)  # fmt: skip


def _placeholder(g1, g2, margin):  # replaced per group by `group_collider`
    raise RuntimeError("height-field collider used without its group (see hfield.group_collider)")


def collider_for(type2: int):
    """(collider placeholder, contacts per pair) for (hfield, type2); the driver binds the real one per group."""
    if type2 not in _COLLIDE_TYPES:
        raise NotImplementedError(f"collision: height field against geom type {GeomType(type2).name}")
    return _placeholder, MAXCONPAIR


def _concrete(x) -> np.ndarray | None:
    if isinstance(x, jax.core.Tracer):
        return None
    try:
        return np.asarray(x)
    except Exception:  # noqa: BLE001 - anything not convertible counts as not concrete
        return None


def window_size(m, hid: int, geom1: np.ndarray, geom2: np.ndarray) -> tuple[int, int]:
    """Static (rows, cols) of cells tested per pair for hfield `hid` against the geoms `geom2` (host ints)."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    size = _concrete(m.hfield_size)
    vals = [_concrete(x) for x in (m.geom_rbound, m.geom_margin, m.geom_gap)]
    # the window (and so the group's contact slots) must not change when a table is rebuilt under a trace (e.g.
    # after a flag change): remember the last concrete answer per static pair structure
    key = static_hash((m.ngeom, m.geom_type, m.geom_dataid, m.hfield_nrow, m.hfield_ncol, hid, geom1, geom2))
    if size is None or any(v is None for v in vals):
        wr = wc = DEFAULT_WINDOW
        if key in _WINDOW_MEMO:
            return _WINDOW_MEMO[key]
    else:
        rb, mg, gp = vals
        reach = float(np.max(rb[geom2] + mg[geom1] + mg[geom2] + gp[geom1] + gp[geom2]))
        dx = 2 * float(size[hid, 0]) / (ncol - 1)
        dy = 2 * float(size[hid, 1]) / (nrow - 1)
        wc = math.ceil(2 * reach / dx) + 1
        wr = math.ceil(2 * reach / dy) + 1
    wr = max(1, min(wr, MAX_WINDOW, nrow - 1))
    wc = max(1, min(wc, MAX_WINDOW, ncol - 1))
    if size is not None and all(v is not None for v in vals):
        _WINDOW_MEMO[key] = (wr, wc)
    return wr, wc


def _aabb_half(t2: int, g: GeomInfo) -> jax.Array:
    """Half extents (3,) of the box around geom2 in its (local-to-hfield) pose, from support points."""
    r = convex._radius(t2, g.size)
    eye = jp.eye(3, dtype=g.pos.dtype)
    hi = jax.vmap(lambda e: convex._support(t2, g, e))(eye)
    lo = jax.vmap(lambda e: convex._support(t2, g, -e))(eye)
    return 0.5 * (jp.diagonal(hi) - jp.diagonal(lo)) + r, 0.5 * (jp.diagonal(hi) + jp.diagonal(lo))


# the prism's 9 edges (vertex pairs; bottom 0-2, top 3-5) and its 5 faces split into 8 triangles
_PRISM_EDGES = np.array([[0, 1], [1, 2], [2, 0], [3, 4], [4, 5], [5, 3], [0, 3], [1, 4], [2, 5]], np.int32)
_PRISM_TRIS = np.array([[0, 1, 2], [3, 4, 5], [0, 1, 4], [0, 4, 3], [1, 2, 5], [1, 5, 4], [2, 0, 3], [2, 3, 5]],
                       np.int32)  # fmt: skip


def _point_prism(v, p):
    """Signed distance of point p (3,) to the convex prism v (6, 3) (bottom triangle, then the top one above it):
    (dist, nearest point on the prism (3,), outward normal at it (3,)). Exact, no iterations.

    Outside: the nearest of the projections onto the 8 face triangles (where inside the triangle) and of the
    nearest points on the 9 edges; the normal points from it to p. Inside (or on the surface): the face plane
    nearest to p (the minimum translation, as EPA's answer for a point); dist is minus that depth."""
    dt = p.dtype
    # face planes, outward: the bottom, the top, the three vertical sides
    centre = jp.mean(v, axis=0)
    tri = v[_PRISM_TRIS]  # (8, 3, 3)
    n = jp.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])  # (8, 3)
    nn = jp.sum(n * n, axis=-1)
    nn_safe = jp.where(nn > 0, nn, 1.0)
    n_unit = n / jp.sqrt(nn_safe)[:, None]
    n_unit = jp.where((jp.sum(n_unit * (tri[:, 0] - centre), axis=-1) < 0)[:, None], -n_unit, n_unit)
    plane = jp.sum(n_unit * (p - tri[:, 0]), axis=-1)  # (8,) signed distance of p to each face plane
    plane = jp.where(nn > 0, plane, -jp.inf)  # a degenerate (flat) side triangle does not bound the prism
    # outside: nearest point on the faces (projection inside a triangle) and on the edges
    q = p - plane[:, None] * n_unit  # (8, 3) projections onto the face planes
    e1, e2, w = tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0], q - tri[:, 0]
    d11, d12, d22 = jp.sum(e1 * e1, -1), jp.sum(e1 * e2, -1), jp.sum(e2 * e2, -1)
    dw1, dw2 = jp.sum(w * e1, -1), jp.sum(w * e2, -1)
    den = d11 * d22 - d12 * d12
    den = jp.where(den > 0, den, 1.0)
    b1 = (d22 * dw1 - d12 * dw2) / den
    b2 = (d11 * dw2 - d12 * dw1) / den
    in_tri = (b1 >= 0) & (b2 >= 0) & (b1 + b2 <= 1) & (nn > 0)
    a, b = v[_PRISM_EDGES[:, 0]], v[_PRISM_EDGES[:, 1]]  # (9, 3)
    ab = b - a
    ll = jp.sum(ab * ab, axis=-1)
    t = jp.clip(jp.sum((p - a) * ab, axis=-1) / jp.where(ll > 0, ll, 1.0), 0.0, 1.0)
    qe = a + t[:, None] * ab
    cand = jp.concatenate([q, qe])  # (17, 3)
    d2 = jp.sum((p - cand) ** 2, axis=-1)
    d2 = jp.where(jp.concatenate([in_tri, jp.ones(9, bool)]), d2, jp.inf)
    i = jp.argmin(d2)
    q_out = cand[i]
    diff = p - q_out
    dist_out = jp.sqrt(jp.maximum(d2[i], jp.finfo(dt).tiny))
    n_out = diff / dist_out
    # inside: the nearest face plane
    f = jp.argmax(plane)
    depth = plane[f]  # <= 0 inside
    inside = depth <= 0
    dist = jp.where(inside, depth, dist_out)
    normal = jp.where(inside, n_unit[f], n_out)
    near = jp.where(inside, p - depth * n_unit[f], q_out)
    return dist, near, normal


def _sphere_prism(v, g2: GeomInfo):
    """(dist, pos, normal) of prism v (6, 3) (geom1) against the sphere g2, as `convex._collide`."""
    r = g2.size[0]
    dist, near, normal = _point_prism(v, g2.pos)
    return dist - r, 0.5 * (near + g2.pos - r * normal), normal


def group_collider(m, hid: int, type2: int, geom1: np.ndarray, geom2: np.ndarray):
    """The collider of one (hfield `hid`, type2) group and its contacts per pair `ncon`: (f, ncon), with
    f(m, info1, info2, margin) -> (Contacts, overflow).

    ncon = min(prisms in the window, MAXCONPAIR): every colliding prism gives its contact, as in MuJoCo.
    Vectorised over the pairs of the group (info fields (n, ...), margin (n,)); Contacts fields (n, ncon, ...),
    overflow (n,) bool."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    wr, wc = window_size(m, hid, geom1, geom2)
    # prism corner offsets (row, col) of the two triangles of a cell, in MuJoCo's vertex order
    tri = np.array([[[1, 0], [0, 0], [1, 1]], [[0, 0], [1, 1], [0, 1]]], np.int32)  # (2, 3, 2)
    cell_r, cell_c = np.meshgrid(np.arange(wr), np.arange(wc), indexing="ij")
    cell = np.stack([cell_r.reshape(-1), cell_c.reshape(-1)], -1)  # (ncell, 2)
    corner = (cell[:, None, None, :] + tri[None]).reshape(-1, 3, 2)  # (nprism, 3, 2) offsets from window origin
    k = min(corner.shape[0], MAXCONPAIR)

    def one(elev, hsize, g1: GeomInfo, g2: GeomInfo, margin):
        dt = g2.pos.dtype
        sx, sy, sz, base = hsize[0], hsize[1], hsize[2], hsize[3]
        # geom2 in the hfield frame
        pos = g1.mat.T @ (g2.pos - g1.pos)
        mat = g1.mat.T @ g2.mat
        loc = GeomInfo(pos, mat, g2.size, g2.vert, None)
        half, center = _aabb_half(type2, loc)
        lo, hi = center - half - margin, center + half + margin
        dx = 2 * sx / (ncol - 1)
        dy = 2 * sy / (nrow - 1)
        # window origin: the cell under the lower corner, clipped so the window stays inside the grid
        c0f = jp.floor((lo[0] + sx) / dx)
        r0f = jp.floor((lo[1] + sy) / dy)
        c0 = jp.clip(c0f, 0, ncol - 1 - wc).astype(jp.int32)
        r0 = jp.clip(r0f, 0, nrow - 1 - wr).astype(jp.int32)
        # cells needed beyond the window -> overflow
        c1 = jp.minimum(jp.ceil((hi[0] + sx) / dx), ncol - 1)
        r1 = jp.minimum(jp.ceil((hi[1] + sy) / dy), nrow - 1)
        inside = (lo[0] <= sx) & (hi[0] >= -sx) & (lo[1] <= sy) & (hi[1] >= -sy) & (lo[2] <= sz) & (hi[2] >= -base)
        overflow = inside & ((c1 > c0 + wc) | (r1 > r0 + wr))
        rc = jax.lax.stop_gradient(jp.stack([r0, c0]))
        idx = rc[None, None, :] + jp.asarray(corner)  # (nprism, 3, 2)
        z = elev[idx[..., 0], idx[..., 1]] * sz
        x = idx[..., 1].astype(dt) * dx - sx
        y = idx[..., 0].astype(dt) * dy - sy
        top = jp.stack([x, y, z], -1)  # (nprism, 3, 3)
        bottom = jp.stack([x, y, jp.broadcast_to(-base, z.shape).astype(dt)], -1)
        verts = jp.concatenate([bottom, top], axis=1)  # (nprism, 6, 3)

        def prism(v):
            if type2 == GeomType.SPHERE:  # exact point-prism distance (the general GJK/EPA costs ~100x more)
                return _sphere_prism(v, loc)
            eye = jp.eye(3, dtype=dt)
            p_info = GeomInfo(jp.zeros(3, dt), eye, jp.zeros(3, dt), v, None)
            return convex._collide(GeomType.MESH, type2, p_info, loc)

        dist, cpos, normal = jax.vmap(prism)(verts)
        dist = jp.where(inside, dist, NOCONTACT)
        neg, best = jax.lax.top_k(-dist, k)
        d = -neg
        cpos = g1.pos + cpos[best] @ g1.mat.T
        normal = normal[best] @ g1.mat.T
        d = jp.where(d <= margin, d, NOCONTACT)
        return Contacts(d, cpos, normal, jp.zeros((k, 3), dt)), overflow

    def collide(m, info1: GeomInfo, info2: GeomInfo, margin):
        elev = m.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol)
        hsize = m.hfield_size[hid]
        return jax.vmap(one, in_axes=(None, None, 0, 0, 0))(elev, hsize, info1, info2, margin)

    return collide, k
