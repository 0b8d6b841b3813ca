"""Ray casting against the model's geoms (mj_ray), batched over rays, and the rangefinder sensor.

`ray(m, d, pnt, vec, ...)` intersects k rays `pnt + x vec, x >= 0` with every geom and returns, per ray, the
distance x to the nearest surface (in units of `vec`, -1 when nothing is hit), the geom id (-1) and the outward
unit surface normal at the hit in the world frame (zeros), as MuJoCo's `mj_ray` with its `normal` output.

Geoms are skipped as MuJoCo's ray_eliminate does: those of the ray's `bodyexclude` body, invisible ones (alpha 0 of
the geom's rgba, or of its material's when it has one; traced, so rgba may change without retracing), static ones
(welded to the world) when `flg_static` is false, and those whose group is off in `geomgroup` (None: all groups).

Per geom type, in the geom's local frame:
- plane: one-sided (only rays going against +z hit), bounded by size[0:2] when positive;
- sphere, capsule, ellipsoid, cylinder, box: the first surface crossed at x >= 0 (so a ray starting inside a solid
  hits its far side), normals outward;
- mesh: every triangle of the mesh (`mesh_face`, two-sided), normal from the face's winding; the work per ray is
  the mesh's face count (no acceleration structure: bounded and differentiable, but costly for large meshes);
- height field: the solid made of the base box (size[3] thick, below z = 0), the surface triangles and the side
  walls below the boundary profile. Only the cells the ray's projection enters while it is inside the grid's box and
  between the lowest and the highest height are tested (`_hfield_surface`: the cells entered at each crossing of a
  grid line there, a few grid lines per trip of a bounded loop, without gradients; the nearest hit's triangle is
  then solved again with them), so a rangefinder looking down at terrain costs a few cells, not the grid's side.
  Surface normals point up.
The nearest hit wins; ties go to the lowest geom id, as in MuJoCo. SDF geoms raise NotImplementedError.

Gradients: distances and normals are differentiable with respect to ray origins, directions, geom poses and sizes
away from silhouettes (where the nearest surface switches); every division is guarded.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import ray_shapes
from mjx_lite.types import MINVAL, Data, GeomType, Model, SensorType

_PRIMITIVE = {
    GeomType.SPHERE: ray_shapes.sphere,
    GeomType.CAPSULE: ray_shapes.capsule,
    GeomType.ELLIPSOID: ray_shapes.ellipsoid,
    GeomType.CYLINDER: ray_shapes.cylinder,
    GeomType.BOX: ray_shapes.box,
}

# rangefinder data fields (mjtRayDataType) in their canonical order, with sizes
RAYDATA_SIZE = (1, 3, 3, 3, 3, 1)
DIST, DIR, ORIGIN, POINT, NORMAL, DEPTH = range(6)


def _nonneg(t: jax.Array) -> jax.Array:
    """Hits at x >= 0 kept, others (and NaN) set to inf."""
    return jp.where(t >= 0, t, jp.inf)


def _plane(o, v, size):
    """MuJoCo's one-sided plane: (x, local normal)."""
    ok = v[..., 2] < -MINVAL
    x = -o[..., 2] / jp.where(ok, v[..., 2], -1.0)
    p0 = o[..., 0] + x * v[..., 0]
    p1 = o[..., 1] + x * v[..., 1]
    inside = ((size[..., 0] <= 0) | (jp.abs(p0) <= size[..., 0])) & ((size[..., 1] <= 0) | (jp.abs(p1) <= size[..., 1]))
    x = jp.where(ok & (x >= 0) & inside, x, jp.inf)
    return x, jp.zeros_like(o).at[..., 2].set(1.0)


def _mesh(m: Model, mesh: int, o: jax.Array, v: jax.Array):
    """Rays (k, n, 3) against the n geoms of one mesh (local frames): nearest (x, local normal), (k, n), (k, n, 3).

    Every face, two-sided; the normal is the face's, from its winding (outward for a closed mesh)."""
    f0, fn = int(m.mesh_faceadr[mesh]), int(m.mesh_facenum[mesh])
    face = np.asarray(m.mesh_face)[f0 : f0 + fn] + int(m.mesh_vertadr[mesh])
    tri = m.mesh_vert[face]  # (F, 3, 3)
    x, n = ray_shapes.triangle(o[..., None, :], v[..., None, :], tri[:, 0], tri[:, 1], tri[:, 2])
    x = _nonneg(x)
    i = jp.argmin(x, axis=-1)
    return jp.min(x, axis=-1), ray_shapes.unit(n)[i]


HFIELD_CHUNK = 8  # grid lines of each direction tested per trip of the height-field ray loop


def _hfield_surface(m: Model, hid: int, o: jax.Array, v: jax.Array):
    """Rays (k, n, 3) against the surface triangles of height field `hid` (local frames): (x (k, n), local normal
    (k, n, 3)); inf where no triangle is hit.

    Only the part of the ray where it can meet the surface is searched: t >= 0, inside the grid's x and y range and
    between the lowest and the highest grid height. The cells entered there (at each crossing of a column or a row
    line, one line more on each side, plus the cells under the ray's origin and under that part's start) are the only
    ones whose triangles it can cross. They are tested `HFIELD_CHUNK` lines of each direction per trip of a
    `lax.while_loop`, as many trips as the longest such part needs (one for a rangefinder looking down at terrain that
    is not steep; at most the grid's side over the chunk), on values with their gradients stopped; the nearest hit's
    distance and normal are then recomputed from its triangle outside the loop, so they are differentiable with
    respect to the ray, the pose and the heights as before."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    h = m.hfield_data[adr : adr + nrow * ncol]
    sx, sy, sz = (m.hfield_size[hid, j] for j in range(3))
    dx, dy = 2.0 * sx / (ncol - 1), 2.0 * sy / (nrow - 1)
    hh = h.reshape(nrow, ncol) * sz
    # corner heights of every cell: h00, h10 (next column), h01 (next row), h11
    table = jp.stack([hh[:-1, :-1], hh[:-1, 1:], hh[1:, :-1], hh[1:, 1:]], -1).reshape(-1, 4)

    def hits(o, v, table, r, c):
        """Both triangles of the cells (r, c) (k, n, M) int32: distances (k, n, M) each (inf: missed), A then B.
        Triangle A (w <= u) has the corners 00, 10, 11 and the height h00 + u (h10 - h00) + w (h11 - h10); B
        (u <= w) has 00, 01, 11 and h00 + u (h11 - h01) + w (h01 - h00), in cell coordinates (u, w)."""
        corners = table[r * (ncol - 1) + c]
        h00, h10, h01, h11 = (corners[..., j] for j in range(4))
        u0 = ((o[..., 0] + sx) / dx)[..., None] - c
        w0 = ((o[..., 1] + sy) / dy)[..., None] - r
        vu, vw, vz, oz = (v[..., 0] / dx)[..., None], (v[..., 1] / dy)[..., None], v[..., 2:3], o[..., 2:3]

        def solve(a, b, lower: bool):
            den = vz - vu * a - vw * b
            ok = jp.abs(den) > MINVAL
            t = (h00 + u0 * a + w0 * b - oz) / jp.where(ok, den, 1.0)
            u, w = u0 + t * vu, w0 + t * vw
            tri = (w >= 0) & (u <= 1) & (w <= u) if lower else (u >= 0) & (w <= 1) & (u <= w)
            return jp.where(ok & (t >= 0) & tri, t, jp.inf)

        return solve(h10 - h00, h11 - h10, True), solve(h11 - h01, h01 - h00, False)

    def cell_of(x, y):
        c = jp.clip(jp.floor((x + sx) / dx), 0, ncol - 2).astype(jp.int32)
        r = jp.clip(jp.floor((y + sy) / dy), 0, nrow - 2).astype(jp.int32)
        return r, c

    # the search, without gradients: the nearest (distance, cell, triangle) over the candidate cells
    os_, vs, tab = (jax.lax.stop_gradient(a) for a in (o, v, table))
    dt = o.dtype
    ox, oy, oz = os_[..., 0], os_[..., 1], os_[..., 2]
    vx, vy, vz = vs[..., 0], vs[..., 1], vs[..., 2]
    okx, oky, okz = jp.abs(vx) > MINVAL, jp.abs(vy) > MINVAL, jp.abs(vz) > MINVAL
    ivx, ivy = 1.0 / jp.where(okx, vx, 1.0), 1.0 / jp.where(oky, vy, 1.0)
    # the ray's part that can meet the surface: t >= 0, z between the extreme heights (widened for rounding), x, y in
    # the grid's range
    zlo, zhi = jp.min(tab), jp.max(tab)
    pad = 1e-3 * (zhi - zlo + jp.abs(oz) + 1.0)
    zlo, zhi = zlo - pad, zhi + pad

    def slab(o1, v1, ok, lo, hi):
        iv = 1.0 / jp.where(ok, v1, 1.0)
        ta, tb = (lo - o1) * iv, (hi - o1) * iv
        inside = (o1 >= lo) & (o1 <= hi)
        t0 = jp.where(ok, jp.minimum(ta, tb), jp.where(inside, -jp.inf, jp.inf))
        t1 = jp.where(ok, jp.maximum(ta, tb), jp.where(inside, jp.inf, -jp.inf))
        return t0, t1

    t0, t1 = jp.zeros_like(ox), jp.full_like(ox, jp.inf)
    for o1, v1, ok, lo, hi in ((oz, vz, okz, zlo, zhi), (ox, vx, okx, -sx, sx), (oy, vy, oky, -sy, sy)):
        a, b = slab(o1, v1, ok, lo, hi)
        t0, t1 = jp.maximum(t0, a), jp.minimum(t1, b)
    empty = ~(t0 <= t1)
    t1 = jp.where(empty, t0, t1)
    ta = jp.where(empty, 0.0, t0)
    tb = jp.where(empty | ~jp.isfinite(t1), ta, t1)  # finite (a zero direction: the origin alone)

    def lines(o1, v1, s, step, n):
        """First line index and count (k, n) of the grid lines o1 + t v1 = i step - s crosses for t in [ta, tb],
        one more on each side; zero lines for an empty part."""
        p0, p1 = o1 + ta * v1, o1 + tb * v1
        i0 = jp.clip(jp.floor((jp.minimum(p0, p1) + s) / step) - 1, 0, n - 1)
        i1 = jp.clip(jp.ceil((jp.maximum(p0, p1) + s) / step) + 1, 0, n - 1)
        return i0.astype(jp.int32), jp.where(empty, 0, (i1 - i0 + 1).astype(jp.int32))

    c0, nc = lines(ox, vx, sx, dx, ncol)
    r0, nr = lines(oy, vy, sy, dy, nrow)
    chunk = jp.arange(HFIELD_CHUNK, dtype=jp.int32)

    def best_of(carry, r, c):
        x, cell, lower = carry
        xa, xb = hits(os_, vs, tab, r, c)
        xs = jp.concatenate([xa, xb], -1)
        i = jp.argmin(xs, axis=-1)
        xi = jp.min(xs, axis=-1)
        cells = r * (ncol - 1) + c
        ci = jp.take_along_axis(jp.concatenate([cells, cells], -1), i[..., None], -1)[..., 0]
        better = xi < x
        return jp.where(better, xi, x), jp.where(better, ci, cell), jp.where(better, i < cells.shape[-1], lower)

    # the cells under the origin and under the part's start, then the lines crossed, a chunk per trip
    rs, cs = zip(*(cell_of(ox + t * vx, oy + t * vy) for t in (jp.zeros_like(ta), ta)))
    init = (jp.full_like(ox, jp.inf), jp.zeros(ox.shape, jp.int32), jp.ones(ox.shape, bool))
    init = best_of(init, jp.stack(rs, -1), jp.stack(cs, -1))

    def body(state):
        j, carry = state
        i = c0[..., None] + j * HFIELD_CHUNK + chunk  # column lines x = i dx - sx
        ci = jp.minimum(i, ncol - 1)
        ti = jp.where(okx[..., None], (ci.astype(dt) * dx - sx - ox[..., None]) * ivx[..., None], 0.0)
        col_c = jp.clip(ci - jp.where(vx < 0, 1, 0)[..., None], 0, ncol - 2)
        col_r = cell_of(ox, oy[..., None] + ti * vy[..., None])[0]
        i = r0[..., None] + j * HFIELD_CHUNK + chunk  # row lines y = i dy - sy
        ri = jp.minimum(i, nrow - 1)
        tj = jp.where(oky[..., None], (ri.astype(dt) * dy - sy - oy[..., None]) * ivy[..., None], 0.0)
        row_r = jp.clip(ri - jp.where(vy < 0, 1, 0)[..., None], 0, nrow - 2)
        row_c = cell_of(ox[..., None] + tj * vx[..., None], oy)[1]
        return j + 1, best_of(carry, jp.concatenate([col_r, row_r], -1), jp.concatenate([col_c, row_c], -1))

    trips = (jp.max(jp.maximum(nc, nr)) + HFIELD_CHUNK - 1) // HFIELD_CHUNK
    _, (x, cell, lower) = jax.lax.while_loop(lambda s: s[0] < trips, body, (jp.zeros((), jp.int32), init))
    # the nearest hit again, differentiable: the plane of its triangle
    found = jp.isfinite(x)
    r, c = (cell // (ncol - 1))[..., None], (cell % (ncol - 1))[..., None]
    corners = table[r * (ncol - 1) + c][..., 0, :]
    h00, h10, h01, h11 = (corners[..., j] for j in range(4))
    a = jp.where(lower, h10 - h00, h11 - h01)
    b = jp.where(lower, h11 - h10, h01 - h00)
    u0 = (o[..., 0] + sx) / dx - c[..., 0]
    w0 = (o[..., 1] + sy) / dy - r[..., 0]
    den = v[..., 2] - v[..., 0] / dx * a - v[..., 1] / dy * b
    t = (h00 + u0 * a + w0 * b - o[..., 2]) / jp.where(found & (jp.abs(den) > MINVAL), den, 1.0)
    n = ray_shapes.unit(jp.stack([-a / dx, -b / dy, jp.ones_like(a)], -1))
    return jp.where(found, t, jp.inf), n


def _hfield(m: Model, hid: int, o: jax.Array, v: jax.Array):
    """Rays (k, n, 3) against the n geoms of one height field (local frames): (x, local normal)."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    h = m.hfield_data[adr : adr + nrow * ncol]
    sx, sy, sz, sb = (m.hfield_size[hid, j] for j in range(4))
    dx, dy = 2.0 * sx / (ncol - 1), 2.0 * sy / (nrow - 1)
    x, n = _hfield_surface(m, hid, o, v)
    xs, ns = x[..., None], n[..., None, :]

    # the base box (below z = 0) and the side walls of the top box under the boundary profile
    base_size = jp.stack([sx, sy, 0.5 * sb])
    bo = o.at[..., 2].add(0.5 * sb)
    t0, t1, n0, n1 = ray_shapes.box(bo, v, jp.broadcast_to(base_size, o.shape))
    xbase, nbase = ray_shapes.first_hit(t0, t1, n0, n1, 0.0, jp.inf)
    walls_x, walls_n = [xbase], [nbase]
    for axis, (half, step, n_along, n_other) in enumerate(((sx, dy, nrow, ncol), (sy, dx, ncol, nrow))):
        other = 1 - axis
        s_other = sy if axis == 0 else sx
        ok = jp.abs(v[..., axis]) > MINVAL
        iv = 1.0 / jp.where(ok, v[..., axis], 1.0)
        for side in (-1.0, 1.0):
            t = (side * half - o[..., axis]) * iv
            p = o + t[..., None] * v
            inside = ok & (t >= 0) & (jp.abs(p[..., other]) <= s_other) & (p[..., 2] >= 0) & (p[..., 2] <= sz)
            y = (p[..., other] + s_other) / step
            y0 = jp.clip(jp.floor(y), 0, n_along - 2)
            k0 = y0.astype(jp.int32)
            edge = 0 if side < 0 else n_other - 1
            if axis == 0:  # the wall x = +-sx runs along the rows, at column `edge`
                z0, z1 = h[k0 * ncol + edge], h[(k0 + 1) * ncol + edge]
            else:  # the wall y = +-sy runs along the columns, at row `edge`
                z0, z1 = h[edge * ncol + k0], h[edge * ncol + k0 + 1]
            below = p[..., 2] < sz * (z0 * (y0 + 1 - y) + z1 * (y - y0))
            walls_x.append(jp.where(inside & below, t, jp.inf))
            walls_n.append(jp.zeros_like(o).at[..., axis].set(side))
    xs = jp.concatenate([xs, jp.stack(walls_x, -1)], -1)
    ns = jp.concatenate([ns, jp.stack(walls_n, -2)], -2)
    i = jp.argmin(xs, axis=-1)
    return jp.min(xs, axis=-1), jp.take_along_axis(ns, i[..., None, None], -2)[..., 0, :]


def _keep_static(m: Model, k: int, bodyexclude, geomgroup, flg_static: bool) -> np.ndarray:
    """(k, ngeom) bool: geoms not eliminated by body, group or static exclusion."""
    body = np.asarray(m.geom_bodyid)
    excl = np.broadcast_to(np.asarray(bodyexclude, int), (k,))
    keep = body[None, :] != excl[:, None]
    if not flg_static:
        keep = keep & (np.asarray(m.body_weldid)[body] != 0)[None, :]
    if geomgroup is not None:
        group = np.clip(np.asarray(m.geom_group), 0, 5)
        keep = keep & (np.asarray(geomgroup)[group] != 0)[None, :]
    return keep


def _visible(m: Model) -> jax.Array:
    """(ngeom,) bool: alpha of the geom's rgba (or of its material's, when it has one) is not 0 (traced)."""
    matid = np.asarray(m.geom_matid)
    alpha = m.geom_rgba[:, 3]
    if m.nmat and (matid >= 0).any():
        alpha = jp.where(jp.asarray(matid >= 0), m.mat_rgba[np.maximum(matid, 0), 3], alpha)
    return alpha != 0


def ray(
    m: Model,
    d: Data,
    pnt: jax.Array,
    vec: jax.Array,
    *,
    bodyexclude=-1,
    geomgroup=None,
    flg_static: bool = True,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Intersect rays with the model's geoms (mj_ray).

    pnt, vec: (k, 3) or (3,) ray origins and directions (global frame; vec need not be unit).
    bodyexclude: static int or (k,) ints, the body whose geoms each ray skips (-1: none).
    geomgroup: static sequence of 6 flags (None: every group); flg_static: include geoms welded to the world.
    Returns dist (k,) (-1: no hit), geomid (k,) int32 (-1), normal (k, 3) (zeros) in the global frame;
    a single ray gives shapes (), () and (3,).
    """
    single = jp.ndim(pnt) == 1
    pnt, vec = jp.atleast_2d(pnt), jp.atleast_2d(vec)
    dtype = d.geom_xpos.dtype
    pnt, vec = pnt.astype(dtype), vec.astype(dtype)
    keep = _keep_static(m, pnt.shape[0], bodyexclude, geomgroup, flg_static)
    dist, gid, nrm = _cast(m, d, pnt, vec, keep)
    if single:
        return dist[0], gid[0], nrm[0]
    return dist, gid, nrm


def _cast(m: Model, d: Data, pnt: jax.Array, vec: jax.Array, keep: np.ndarray):
    gtype = np.asarray(m.geom_type)
    dataid = np.asarray(m.geom_dataid)
    if (gtype == GeomType.SDF).any():
        raise NotImplementedError("mjx_lite ray: SDF geoms are not supported")
    cols, xs, ns = [], [], []

    def add(ids: np.ndarray, fn) -> None:
        ids = ids[keep[:, ids].any(axis=0)]  # geoms no ray can see (body, group, static exclusion) cost nothing
        if not ids.size:
            return
        pos, mat = d.geom_xpos[ids], d.geom_xmat[ids]  # (n, 3), (n, 3, 3)
        o = jp.einsum("knj,nji->kni", pnt[:, None, :] - pos[None], mat)
        v = jp.einsum("kj,nji->kni", vec, mat)
        x, n_local = fn(o, v, ids)
        cols.append(ids)
        xs.append(x)
        ns.append(jp.einsum("nij,knj->kni", mat, n_local))

    for t in np.unique(gtype):
        ids = np.nonzero(gtype == t)[0]
        if t == GeomType.PLANE:
            add(ids, lambda o, v, ids: _plane(o, v, m.geom_size[ids][None]))
        elif t in _PRIMITIVE:
            fn = _PRIMITIVE[GeomType(t)]

            def prim(o, v, ids, fn=fn):
                t0, t1, n0, n1 = fn(o, v, jp.broadcast_to(m.geom_size[ids][None], o.shape))
                return ray_shapes.first_hit(t0, t1, n0, n1, 0.0, jp.inf)

            add(ids, prim)
        elif t in (GeomType.MESH, GeomType.HFIELD):
            for data in np.unique(dataid[ids]):
                sub = ids[dataid[ids] == data]
                if t == GeomType.MESH:
                    add(sub, lambda o, v, ids, data=int(data): _mesh(m, data, o, v))
                else:
                    add(sub, lambda o, v, ids, data=int(data): _hfield(m, data, o, v))
        else:
            raise NotImplementedError(f"mjx_lite ray: geom type {GeomType(t).name} is not supported")
    k = pnt.shape[0]
    if not cols:
        return -jp.ones(k, pnt.dtype), -jp.ones(k, jp.int32), jp.zeros((k, 3), pnt.dtype)
    ids = np.concatenate(cols)
    order = np.argsort(ids, kind="stable")  # back to geom id order (ties: lowest id)
    ids = ids[order]
    x = jp.concatenate(xs, -1)[:, order]
    n = jp.concatenate(ns, -2)[:, order]
    x = jp.where(jp.asarray(keep[:, ids]) & _visible(m)[ids][None, :], x, jp.inf)
    best = jp.argmin(x, axis=-1)
    xmin = jp.min(x, axis=-1)
    hit = jp.isfinite(xmin)
    dist = jp.where(hit, xmin, -1.0)
    gid = jp.where(hit, jp.asarray(ids, jp.int32)[best], -1)
    nrm = jp.where(hit[:, None], jp.take_along_axis(n, best[:, None, None], 1)[:, 0], 0.0)
    return dist, gid, nrm


def rangefinder(m: Model, d: Data, sites: np.ndarray, mask: int) -> jax.Array:
    """Site rangefinders with one data mask: values (k, dim) in the canonical field order.

    A ray from each site along its z axis, skipping the site's body. dist: distance or -1; dir: the ray's
    direction (zeros on a miss); origin: the site position; point: the hit point (zeros on a miss); normal: the
    surface normal (zeros); depth: the distance, -1 on a miss.
    """
    sites = np.asarray(sites, int)
    origin = d.site_xpos[sites]
    direction = d.site_xmat[sites][:, :, 2]
    dist, _, normal = ray(m, d, origin, direction, bodyexclude=np.asarray(m.site_bodyid)[sites])
    hit = (dist >= 0)[:, None]
    fields = {
        DIST: dist[:, None],
        DIR: jp.where(hit, direction, 0.0),
        ORIGIN: origin,
        POINT: jp.where(hit, origin + jp.where(hit, dist[:, None], 0.0) * direction, 0.0),
        NORMAL: normal,
        DEPTH: dist[:, None],
    }
    out = [fields[f] for f in range(len(RAYDATA_SIZE)) if mask & (1 << f)]
    if not out:
        raise ValueError(f"sensor type {SensorType.RANGEFINDER.name}: empty data mask")
    return jp.concatenate(out, -1)
