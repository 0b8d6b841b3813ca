"""Height fields occluded by a plane: pairs that need no contact slots while nothing sinks through the plane.

MuJoCo's planes collide as half-spaces (infinite), so a geom that touches a height field lying wholly below a plane
(dm_control's quadruped: its terrain 1 cm under the floor) first sinks through that plane. When a static height
field's solid (its bounding box: the grid's x, y extent, from -base up to its highest sample) lies at depth
delta > 0 below a static plane, a geom g can touch the field only where g's lowest point along the plane's normal is
within margin + gap - delta of the plane:

    dist(field, g) >= s_min(g) + delta,   s_min(g) = n . (x_g - p0) - h_g(n)   (h_g: g's support function)

since the plane separates the two sets by that much along n. So the dynamic (field, g) pairs of a geom g that also
collides with the plane (`Config.hfield_occlusion`, default True) get no contact slots; every step checks, for each
such pair, whether g could touch the field (s_min(g) + delta <= margin + gap of the pair) with the current
positions and the current height-field samples (a field raised later is seen), and a step where one could counts
`d.warning_number[Warning.CONTACTFULL]` (per environment under vmap): the pair's contacts, which MuJoCo would
make, are left out, never silently. The static choice comes from the compile-time poses and samples
(`Model.geom_occluder0`, `snapshot`), like the windows' sizes (`Model.geom_reach0`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import GeomType, Model

__all__ = ["overflow", "pairs", "snapshot"]

_PLANE, _HFIELD = int(GeomType.PLANE), int(GeomType.HFIELD)


def _quat_mat(q: np.ndarray) -> np.ndarray:
    """(n, 3, 3) rotation matrices of unit quaternions q (n, 4), (w, x, y, z)."""
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    w, x, y, z = q[:, 0], q[:, 1], q[:, 2], q[:, 3]
    return np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                     np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                     np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], 1)  # fmt: skip


def _box_corners(half: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """(8, 3) corners of the box [-hx, hx] x [-hy, hy] x [lo, hi]."""
    xs, ys, zs = (-half[0], half[0]), (-half[1], half[1]), (lo, hi)
    return np.array([[x, y, z] for x in xs for y in ys for z in zs], np.float64)


def snapshot(arrays) -> np.ndarray:
    """(ngeom,) int32 host array: for each height-field geom of the world body, the plane geom of the world body
    that its solid lies wholly below (the deepest such plane), else -1; -1 for every other geom. From the
    compile-time poses, sizes and samples in `arrays` (named as mjModel's fields)."""
    gtype = np.asarray(arrays["geom_type"]).reshape(-1)
    out = np.full(gtype.shape[0], -1, np.int32)
    body = np.asarray(arrays["geom_bodyid"]).reshape(-1)
    fields = np.nonzero((gtype == _HFIELD) & (body == 0))[0]
    planes = np.nonzero((gtype == _PLANE) & (body == 0))[0]
    if not len(fields) or not len(planes):
        return out
    pos = np.asarray(arrays["geom_pos"], np.float64).reshape(-1, 3)
    mat = _quat_mat(np.asarray(arrays["geom_quat"], np.float64).reshape(-1, 4))
    hsize = np.asarray(arrays["hfield_size"], np.float64).reshape(-1, 4)
    data = np.asarray(arrays["hfield_data"], np.float64).reshape(-1)
    adr = np.asarray(arrays["hfield_adr"]).reshape(-1)
    nrow, ncol = np.asarray(arrays["hfield_nrow"]).reshape(-1), np.asarray(arrays["hfield_ncol"]).reshape(-1)
    dataid = np.asarray(arrays["geom_dataid"]).reshape(-1)
    for h in fields:
        k = int(dataid[h])
        top = float(np.max(data[adr[k] : adr[k] + nrow[k] * ncol[k]], initial=0.0)) * hsize[k, 2]
        corners = pos[h] + _box_corners(hsize[k, :2], -hsize[k, 3], top) @ mat[h].T  # (8, 3) world
        depth = [-float(np.max((corners - pos[p]) @ mat[p][:, 2])) for p in planes]
        best = int(np.argmax(depth))
        if depth[best] > 0:
            out[h] = int(planes[best])
    return out


def pairs(m: Model, a: np.ndarray, b: np.ndarray, p: np.ndarray) -> np.ndarray:
    """(n,) bool over candidate pairs (a, b, explicit pair id or -1), type(a) <= type(b): the dynamic pairs of an
    occluded height field (`Model.geom_occluder0`) and a geom that is itself a candidate of the occluding plane
    (those need no slots while `overflow` stays False). All False unless `m.config.hfield_occlusion`."""
    out = np.zeros(len(a), bool)
    occ = np.asarray(m.geom_occluder0)
    if not m.config.hfield_occlusion or not len(a) or not np.any(occ >= 0):
        return out
    lo, hi = np.minimum(a, b), np.maximum(a, b)
    n = int(m.ngeom)
    have = set((lo * n + hi).tolist())  # every candidate pair (dynamic or explicit)
    plane = occ[a]
    cand = (plane >= 0) & (p < 0)
    for i in np.nonzero(cand)[0]:
        q, g = int(plane[i]), int(b[i])
        out[i] = min(q, g) * n + max(q, g) in have
    return out


def _below(m: Model, gtype: np.ndarray, g: np.ndarray, xmat: jax.Array, n: jax.Array) -> jax.Array:
    """(k,) how far geoms g (k,) of static types gtype (k,) reach below their centres along unit directions n (k, 3):
    max over g's points x of -n . (x - x_g) (the support function of -n), frames xmat (k, 3, 3). Exact for the
    primitives, the local bounding box (`geom_aabb`) for a mesh (a bound above the true value: the check then
    flags earlier)."""
    size = m.geom_size[g]
    u = jp.einsum("kji,kj->ki", xmat, n)  # n in the geom's frame
    au = jp.abs(u)
    r, h = size[:, 0], size[:, 1]
    axial = au[:, 2]
    radial = jp.sqrt(jp.maximum(1 - axial**2, 0.0))
    sphere = r
    capsule = r + h * axial
    ellipsoid = jp.sqrt(jp.sum((size * u) ** 2, axis=-1))
    cylinder = r * radial + h * axial
    box = jp.sum(size * au, axis=-1)
    aabb = m.geom_aabb[g]  # (k, 6): local centre, half sizes
    mesh = jp.sum(aabb[:, 3:] * au, axis=-1) - jp.sum(aabb[:, :3] * u, axis=-1)
    out = mesh
    for t, v in ((GeomType.SPHERE, sphere), (GeomType.CAPSULE, capsule), (GeomType.ELLIPSOID, ellipsoid),
                 (GeomType.CYLINDER, cylinder), (GeomType.BOX, box)):  # fmt: skip
        out = jp.where(jp.asarray(gtype == int(t)), v, out)
    return out


def overflow(m: Model, d, fields: np.ndarray, geoms: np.ndarray) -> jax.Array:
    """() bool: whether any occluded pair (height-field geoms `fields`, geoms `geoms`, (k,) static) could touch
    now: the geom's lowest point along its field's occluding plane's normal is within the pair's detection
    distance (margin + gap) of the field's solid (current poses and samples; see the module docstring)."""
    if not len(fields):
        return jp.zeros((), bool)
    planes = np.asarray(m.geom_occluder0)[fields]
    dataid = np.asarray(m.geom_dataid)
    depth = {}
    for h in np.unique(fields).tolist():  # each field's depth below its plane (from the current samples)
        k = int(dataid[h])
        nrow, ncol, adr = int(m.hfield_nrow[k]), int(m.hfield_ncol[k]), int(m.hfield_adr[k])
        hs = m.hfield_size[k]
        top = jp.max(m.hfield_data[adr : adr + nrow * ncol]) * hs[2]
        sx, sy = jp.array([-1.0, 1.0]) * hs[0], jp.array([-1.0, 1.0]) * hs[1]
        sz = jp.stack([-hs[3], top])
        local = jp.stack(jp.meshgrid(sx, sy, sz, indexing="ij"), -1).reshape(8, 3)
        q = int(np.asarray(m.geom_occluder0)[h])
        corners = d.geom_xpos[h] + local @ d.geom_xmat[h].T
        depth[h] = -jp.max((corners - d.geom_xpos[q]) @ d.geom_xmat[q][:, 2])
    delta = jp.stack([depth[int(h)] for h in fields])
    normal = d.geom_xmat[planes][:, :, 2]  # (k, 3)
    gpos, gmat = d.geom_xpos[geoms], d.geom_xmat[geoms]
    height = jp.sum((gpos - d.geom_xpos[planes]) * normal, axis=-1)
    s_min = height - _below(m, np.asarray(m.geom_type)[geoms], geoms, gmat, normal)
    detect = m.geom_margin[fields] + m.geom_margin[geoms] + m.geom_gap[fields] + m.geom_gap[geoms]
    slack = 1e-3 * m.geom_rbound[geoms]  # round-off: flag a little early, never late
    return jax.lax.stop_gradient(jp.any(s_min + delta <= detect + slack))
