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
  walls below the boundary profile. Only the cells the ray's projection enters are tested: the cell entered at each
  crossing of a grid line, plus the start cell (nrow + ncol + 1 cells, two triangles each, solved in the cell's
  coordinates), so the work grows with the grid's side, not its area, but it is the same for every ray whatever its
  length: on dm_control's quadruped (201 x 201 grid, 20 rangefinders) they cost about 5 times the rest of a smooth
  step on a CPU (MuJoCo C's own rangefinders double its step there). Surface normals point up.
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


def _hfield(m: Model, hid: int, o: jax.Array, v: jax.Array):
    """Rays (k, n, 3) against the n geoms of one height field (local frames): (x, local normal)."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    h = m.hfield_data[adr : adr + nrow * ncol]
    sx, sy, sz, sb = (m.hfield_size[hid, j] for j in range(4))
    dx, dy = 2.0 * sx / (ncol - 1), 2.0 * sy / (nrow - 1)
    ox, oy, vx, vy = o[..., 0], o[..., 1], v[..., 0], v[..., 1]
    okx, oky = jp.abs(vx) > MINVAL, jp.abs(vy) > MINVAL
    ivx, ivy = 1.0 / jp.where(okx, vx, 1.0), 1.0 / jp.where(oky, vy, 1.0)

    # cells entered: at each crossing of a column line x = i dx - sx, of a row line, and the start cell
    ci = jp.arange(ncol, dtype=o.dtype)
    ti = jp.where(okx[..., None], (ci * dx - sx - ox[..., None]) * ivx[..., None], 0.0)
    col_c = ci.astype(jp.int32) - jp.where(vx < 0, 1, 0)[..., None]
    col_r = jp.floor((oy[..., None] + ti * vy[..., None] + sy) / dy)
    rj = jp.arange(nrow, dtype=o.dtype)
    tj = jp.where(oky[..., None], (rj * dy - sy - oy[..., None]) * ivy[..., None], 0.0)
    row_r = rj.astype(jp.int32) - jp.where(vy < 0, 1, 0)[..., None]
    row_c = jp.floor((ox[..., None] + tj * vx[..., None] + sx) / dx)
    start_c = jp.floor((ox + sx) / dx)[..., None]
    start_r = jp.floor((oy + sy) / dy)[..., None]
    c = jp.concatenate([col_c.astype(o.dtype), row_c, start_c], -1)
    r = jp.concatenate([col_r, row_r.astype(o.dtype), start_r], -1)
    c = jp.clip(c, 0, ncol - 2).astype(jp.int32)
    r = jp.clip(r, 0, nrow - 2).astype(jp.int32)

    # each candidate cell's corner heights (one gather from a (cells, 4) table), then its two triangles solved in
    # cell coordinates (u, w) = grid coordinates minus the cell's corner: triangle A (w <= u) has the corners 00, 10,
    # 11 and the height h00 + u (h10 - h00) + w (h11 - h10); triangle B (u <= w) has 00, 01, 11 and
    # h00 + u (h11 - h01) + w (h01 - h00)
    hh = h.reshape(nrow, ncol) * sz
    table = jp.stack([hh[:-1, :-1], hh[:-1, 1:], hh[1:, :-1], hh[1:, 1:]], -1).reshape(-1, 4)
    corners = table[r * (ncol - 1) + c]
    h00, h10, h01, h11 = (corners[..., j] for j in range(4))
    u0 = ((ox + sx) / dx)[..., None] - c
    w0 = ((oy + sy) / dy)[..., None] - r
    vu, vw, vz, oz = (vx / dx)[..., None], (vy / dy)[..., None], v[..., 2:3], o[..., 2:3]

    def solve(a, b, lower: bool):
        den = vz - vu * a - vw * b
        ok = jp.abs(den) > MINVAL
        t = (h00 + u0 * a + w0 * b - oz) / jp.where(ok, den, 1.0)
        u, w = u0 + t * vu, w0 + t * vw
        tri = (w >= 0) & (u <= 1) & (w <= u) if lower else (u >= 0) & (w <= 1) & (u <= w)
        return jp.where(ok & (t >= 0) & tri, t, jp.inf)

    a = jp.concatenate([h10 - h00, h11 - h01], -1)
    b = jp.concatenate([h11 - h10, h01 - h00], -1)
    half = h00.shape[-1]
    xs = jp.concatenate([solve(a[..., :half], b[..., :half], True), solve(a[..., half:], b[..., half:], False)], -1)
    best = jp.argmin(xs, axis=-1)[..., None]
    ga, gb = jp.take_along_axis(a, best, -1)[..., 0], jp.take_along_axis(b, best, -1)[..., 0]
    xs = jp.min(xs, axis=-1, keepdims=True)
    ns = ray_shapes.unit(jp.stack([-ga / dx, -gb / dy, jp.ones_like(ga)], -1))[..., None, :]

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
