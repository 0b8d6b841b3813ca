"""Sensors that read contacts: touch (mjSENS_TOUCH) and contact (mjSENS_CONTACT), as MuJoCo 4.0 computes them.

Both work on the padded `d.contact` rows (`contact.active` marks MuJoCo's `d->contact[0:ncon]`) with masks, no
Python loop over contacts; contact forces come from `contact_force.contact_force` (mj_contactForce: pyramidal edge
forces are converted to normal and friction forces).

touch(site): the sum of the normal forces of the contacts that involve a geom of the site's body, have a positive
normal force, and whose ray, cast from the contact point along the contact normal (flipped when the site's body is
the contact's second body), hits the site volume (mju_rayGeom: a contact point inside the site always counts).

contact: a contact matches when its geoms/bodies/subtrees match the sensor's objects (geom1/body1/subtree1/site
and geom2/body2/subtree2; a site matches contacts whose point lies inside the site volume) in either order; the
normal is flipped when the objects match in the reverse order. `num` slots are filled in MuJoCo's contact order
(reduce none), by smallest distance (mindist) or largest force (maxforce), with fields found (number of
matches), force, torque (contact frame; z negated when flipped), dist, pos, normal, tangent (negated when
flipped), linvel, angvel (velocity of the second object relative to the first at the contact point, in the
contact frame, z negated when flipped). netforce writes one slot (zeros when nothing matches): the total force
and torque in the world frame about the force-weighted centroid of the matched contact points, normal (1, 0, 0),
tangent (0, 1, 0). Slots without a contact are zero. The sensor cutoff is ignored, as in MuJoCo.

MuJoCo's contact order (which `none` and ties of mindist/maxforce depend on) is rebuilt from static and traced
keys: body pair signature (lower body, higher body), explicit pairs before dynamic ones, then pair id (explicit) or
geom ids (dynamic), then the contact's index within its pair (collider order).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.collision import flex as flexcol
from mjx_lite.math import safe_norm
from mjx_lite.pipeline import contact_force
from mjx_lite.types import MINVAL, Data, GeomType, Model, ObjType

# contact sensor data fields (mjtConDataField) and their sizes
CONDATA_SIZE = (1, 3, 3, 1, 3, 3, 3, 3, 3)
FOUND, FORCE, TORQUE, DIST, POS, NORMAL, TANGENT, LINVEL, ANGVEL = range(9)
REDUCE_NONE, REDUCE_MINDIST, REDUCE_MAXFORCE, REDUCE_NETFORCE = range(4)


# ---- geometry: point in volume, ray hits volume --------------------------------------------------------------


def inside_site(m: Model, d: Data, point: jax.Array, sites: np.ndarray) -> jax.Array:
    """True where `point` (k, 3) is strictly inside the site's shape (mju_insideGeom), (k,) bool.

    `sites` (k,) static site ids (one per point).
    """
    pos, mat = d.site_xpos[sites], d.site_xmat[sites]
    p = jp.einsum("kji,kj->ki", mat, point - pos)
    size = m.site_size[sites]
    stype = np.asarray(m.site_type)[sites]
    sq = p * p
    inside_sphere = jp.sum(sq, -1) < size[:, 0] ** 2
    zc = jp.clip(p[:, 2], -size[:, 1], size[:, 1])
    inside_capsule = sq[:, 0] + sq[:, 1] + (p[:, 2] - zc) ** 2 < size[:, 0] ** 2
    safe = jp.where(size > 0, size, 1.0)
    inside_ellipsoid = jp.sum(sq / (safe * safe), -1) < 1.0
    inside_cylinder = (sq[:, 0] + sq[:, 1] < size[:, 0] ** 2) & (jp.abs(p[:, 2]) < size[:, 1])
    inside_box = jp.all(jp.abs(p) < size, axis=-1)
    res = jp.zeros(p.shape[:1], bool)
    for t, v in (
        (GeomType.SPHERE, inside_sphere),
        (GeomType.CAPSULE, inside_capsule),
        (GeomType.ELLIPSOID, inside_ellipsoid),
        (GeomType.CYLINDER, inside_cylinder),
        (GeomType.BOX, inside_box),
    ):
        res = jp.where(jp.asarray(stype == t), v, res)
    return res


def _quad_roots(a, b, c):
    """Roots of a x^2 + 2 b x + c = 0 as MuJoCo's ray_quad: (x0, x1), both -1 when det < MINVAL."""
    det = b * b - a * c
    ok = det >= MINVAL
    sq = jp.sqrt(jp.where(ok, det, 1.0))
    sa = jp.where(ok, a, 1.0)
    x0 = jp.where(ok, (-b - sq) / sa, -1.0)
    x1 = jp.where(ok, (-b + sq) / sa, -1.0)
    return x0, x1


def _quad_first(a, b, c):
    """MuJoCo's ray_quad result: the smallest non-negative root, or -1."""
    x0, x1 = _quad_roots(a, b, c)
    return jp.where(x0 >= 0, x0, jp.where(x1 >= 0, x1, -1.0))


def _dot3(a: jax.Array, b: jax.Array) -> jax.Array:
    """Dot product over the last axis (3), broadcast, as explicit multiply-adds: under vmap XLA:CPU turns a
    reduction or dot_general over an axis of 3 into a library call that costs far more than the arithmetic."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def _sphere_hit(dif: jax.Array, vec: jax.Array, r2) -> jax.Array:
    a = _dot3(vec, vec)
    b = _dot3(vec, dif)
    c = _dot3(dif, dif) - r2
    return _quad_first(a, b, c) >= 0


def _mat_t_vec(mat: jax.Array, v: jax.Array) -> jax.Array:
    """mat^T v for (..., 3, 3) and (..., 3) (broadcast), by `_dot3` with the columns of mat."""
    return jp.stack([_dot3(mat[..., :, i], v) for i in range(3)], axis=-1)


def ray_hits(gtype: int, pos: jax.Array, mat: jax.Array, size: jax.Array, pnt: jax.Array, vec: jax.Array):
    """Whether rays pnt + x vec, x >= 0, hit a primitive (mju_rayGeom(...) >= 0), (...,) bool.

    gtype: static geom type (sphere, capsule, ellipsoid, cylinder, box); pos (..., 3), mat (..., 3, 3), size
    (..., 3) the shapes' poses and pnt, vec (..., 3) the rays, broadcast against each other (e.g. one shape
    (3,), (3, 3), (3,) against k rays (k, 3), or k shapes (k, 1, 3) against (k, n, 3) rays). Follows MuJoCo's
    per-type tests (bounding sphere, caps and sides with their boundaries included, mjMINVAL thresholds) so that
    hit/miss agree with the oracle.
    """
    dif = pnt - pos
    lp = _mat_t_vec(mat, dif)  # (..., 3) = mat^T (pnt - pos)
    lv = _mat_t_vec(mat, vec)
    if gtype == GeomType.SPHERE:
        return _sphere_hit(dif, vec, size[..., 0] * size[..., 0])
    if gtype == GeomType.ELLIPSOID:
        s = 1.0 / (size * size)
        a = _dot3(s * lv, lv)
        b = _dot3(s * lv, lp)
        c = _dot3(s * lp, lp) - 1.0
        return _quad_first(a, b, c) >= 0
    r, h = size[..., 0], size[..., 1]
    x, y, z = lp[..., 0], lp[..., 1], lp[..., 2]
    vx, vy, vz = lv[..., 0], lv[..., 1], lv[..., 2]
    if gtype == GeomType.CAPSULE:
        bound = _sphere_hit(dif, vec, (r + h) ** 2)
        a = vx * vx + vy * vy
        b = vx * x + vy * y
        c = x * x + y * y - r * r
        sol = _quad_first(a, b, c)
        hit = (sol >= 0) & (jp.abs(z + sol * vz) <= h)
        a3 = _dot3(lv, lv)
        for side in (1.0, -1.0):
            dz = z - side * h
            x0, x1 = _quad_roots(a3, b + vz * dz, x * x + y * y + dz * dz - r * r)
            for t in (x0, x1):
                zt = z + t * vz
                hit = hit | ((t >= 0) & (zt >= h if side > 0 else zt <= -h))
        return bound & hit
    if gtype == GeomType.CYLINDER:
        bound = _sphere_hit(dif, vec, r * r + h * h)
        okz = jp.abs(vz) > MINVAL
        svz = jp.where(okz, vz, 1.0)
        hit = jp.zeros(jp.broadcast_shapes(z.shape, r.shape), bool)
        for side in (-1.0, 1.0):
            sol = (side * h - z) / svz
            p0 = x + sol * vx
            p1 = y + sol * vy
            hit = hit | (okz & (sol >= 0) & (p0 * p0 + p1 * p1 <= r * r))
        a = vx * vx + vy * vy
        b = vx * x + vy * y
        c = x * x + y * y - r * r
        sol = _quad_first(a, b, c)
        hit = hit | ((sol >= 0) & (jp.abs(z + sol * vz) <= h))
        return bound & hit
    if gtype == GeomType.BOX:
        bound = _sphere_hit(dif, vec, _dot3(size, size))
        hit = jp.zeros(jp.broadcast_shapes(z.shape, r.shape), bool)
        for i, (j, k) in enumerate(((1, 2), (0, 2), (0, 1))):
            ok = jp.abs(lv[..., i]) > MINVAL
            sv = jp.where(ok, lv[..., i], 1.0)
            for side in (-1.0, 1.0):
                sol = (side * size[..., i] - lp[..., i]) / sv
                pj = lp[..., j] + sol * lv[..., j]
                pk = lp[..., k] + sol * lv[..., k]
                hit = hit | (ok & (sol >= 0) & (jp.abs(pj) <= size[..., j]) & (jp.abs(pk) <= size[..., k]))
        return bound & hit
    raise NotImplementedError(f"ray test against geom type {GeomType(gtype).name} is not supported")


# ---- shared contact quantities -------------------------------------------------------------------------------


def _contact_bodies(m: Model, d: Data) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """(geom1, geom2, body1, body2) of every contact row, (nconmax,) int."""
    g1, g2 = d.contact.geom[:, 0], d.contact.geom[:, 1]
    b1, b2 = flexcol.contact_bodies(m, d.contact)
    return g1, g2, b1, b2


class Shared:
    """Contact quantities shared by the contact sensors of one stage, computed once, on first use."""

    def __init__(self, m: Model, d: Data):
        self.m, self.d = m, d
        self._forces: jax.Array | None = None
        self._rank: jax.Array | None = None

    @property
    def forces(self) -> jax.Array:
        """(nconmax, 6) contact-frame force/torque of every contact (mj_contactForce)."""
        if self._forces is None:
            self._forces = contact_force.contact_force(self.m, self.d)
        return self._forces

    @property
    def rank(self) -> jax.Array:
        """(nconmax,) position of every contact row in MuJoCo's contact order (see contact_rank)."""
        if self._rank is None:
            self._rank = contact_rank(self.m, self.d)
        return self._rank


def _slot_layout(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (explicit pair id or -1, index of the row within its pair) of every contact row, (nconmax,)."""
    pairs, subs = [], []
    for g in driver.pair_table(m).groups:
        pid = g.pair if g.capacity == len(g.pair) else np.full(g.capacity, -1)
        pairs.append(np.repeat(np.asarray(pid, np.int64), g.ncon))
        subs.append(np.tile(np.arange(g.ncon), g.capacity))
    if not pairs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(pairs), np.concatenate(subs)


def _explicit_pair_of(m: Model, g1: jax.Array, g2: jax.Array) -> jax.Array:
    """Explicit pair id of contact rows (k,) from their geoms (-1: a dynamic pair); an explicit pair replaces the
    dynamic pair of its two geoms, so the geoms name it (the first of duplicate pairs)."""
    if m.npair == 0:
        return jp.full(g1.shape, -1, jp.int32)
    p1, p2 = jp.asarray(np.asarray(m.pair_geom1), jp.int32), jp.asarray(np.asarray(m.pair_geom2), jp.int32)
    hit = ((g1[:, None] == p1) & (g2[:, None] == p2)) | ((g1[:, None] == p2) & (g2[:, None] == p1))
    return jp.where(jp.any(hit, axis=1), jp.argmax(hit, axis=1), -1).astype(jp.int32)


def contact_rank(m: Model, d: Data) -> jax.Array:
    """Position of every contact row in MuJoCo's `d->contact` order (inactive rows last), (nconmax,) int32.

    MuJoCo walks body pairs by signature (lower body id, higher body id); the explicit pairs of a signature come
    before its dynamic pairs (explicit pairs are sorted by signature at compile time), dynamic pairs of one body
    pair are ordered by their geom ids, and the contacts of one geom pair keep the collider's order.
    """
    n = m.nconmax
    g1, g2, b1, b2 = _contact_bodies(m, d)
    if driver.capped(m):  # rows of any group in any slot: the pair id from the geoms, a pair's rows in layout order
        pair, sub = _explicit_pair_of(m, g1, g2), jp.zeros((n,), jp.int32)
    else:
        pair, sub = (jp.asarray(x, jp.int32) for x in _slot_layout(m))
    explicit = pair >= 0
    lo, hi = jp.minimum(b1, b2), jp.maximum(b1, b2)
    ka = jp.where(explicit, pair, g1)
    kb = jp.where(explicit, 0, g2)
    inactive = ~d.contact.active
    keys = (jp.arange(n, dtype=jp.int32), sub, kb, ka, (~explicit).astype(jp.int32), hi, lo,
            inactive.astype(jp.int32))  # fmt: skip
    order = jp.lexsort(keys)
    return jp.zeros((n,), jp.int32).at[order].set(jp.arange(n, dtype=jp.int32))


def _point_velocity(m: Model, d: Data, body: jax.Array, point: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Angular and linear velocity (k, 3) of bodies (k,) (traced ids) at global points (k, 3)."""
    root = jp.asarray(np.asarray(m.body_rootid), jp.int32)[body]
    v = d.cvel[body]
    ang = v[:, :3]
    lin = v[:, 3:] - jp.cross(point - d.subtree_com[root], ang)
    return ang, lin


# ---- touch ---------------------------------------------------------------------------------------------------


def row_bodies(m: Model) -> np.ndarray:
    """Static (nconmax, nbody) bool: the bodies a contact row can involve. A row of an untrimmed pair group holds
    its own pair (its two geoms' bodies); a row of a trimmed or compacted group any pair of its group; with a capped
    capacity (`driver.capped`) and for flex rows, any body."""
    n, gb = m.nconmax, np.asarray(m.geom_bodyid)
    out = np.ones((n, m.nbody), bool)
    if driver.capped(m):
        return out
    row = 0
    for g in driver.pair_table(m).groups:
        b1, b2 = gb[np.asarray(g.geom1)], gb[np.asarray(g.geom2)]
        blk = np.zeros((g.nrows, m.nbody), bool)
        if g.static_slots:  # slot i: pair i, its ncon rows adjacent
            slot = np.arange(g.nrows) // g.ncon
            blk[np.arange(g.nrows), b1[slot]] = True
            blk[np.arange(g.nrows), b2[slot]] = True
        else:
            blk[:, np.unique(np.concatenate([b1, b2]))] = True
        out[row : row + g.nrows] = blk
        row += g.nrows
    return out  # rows past the pair table's (flex contacts) stay all True


def _touch_rows(m: Model, sites: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Static (k, K) contact rows that can involve each site's body (padded with row 0) and their validity mask,
    K the largest count (at least 1)."""
    rb = row_bodies(m)
    lists = [np.nonzero(rb[:, b])[0] for b in np.asarray(m.site_bodyid)[sites]]
    width = max([1] + [len(x) for x in lists])
    idx, valid = np.zeros((len(lists), width), np.int32), np.zeros((len(lists), width), bool)
    for i, x in enumerate(lists):
        idx[i, : len(x)], valid[i, : len(x)] = x, True
    return idx, valid


def _touch_buckets(m: Model, sites: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """Static groups of touch sensors (indices into `sites`) sharing a site shape and a candidate row count of the
    same power of two: one vectorised test each, padded to its own widest sensor (bounded waste, few traces)."""
    _, valid = _touch_rows(m, sites)
    count = np.maximum(valid.sum(1), 1)
    key = np.asarray(m.site_type)[sites] * 64 + np.ceil(np.log2(count)).astype(int)
    return [(int(np.asarray(m.site_type)[sites][key == k][0]), np.nonzero(key == k)[0]) for k in np.unique(key)]


def touch(m: Model, d: Data, sites: np.ndarray, shared: Shared | None = None) -> jax.Array:
    """Touch sensor values (k,) for static site ids (k,).

    Vectorised tests over (sensors, contact rows that can involve their body): the rows come from the static pair
    layout (`row_bodies`), so a sensor reads the few rows of its body's pairs, not every padded contact row; sensors
    are grouped by site shape and row count (`_touch_buckets`).
    """
    shared = shared or Shared(m, d)
    dtype = d.qpos.dtype
    sites = np.asarray(sites, int)
    if m.nconmax == 0 or len(sites) == 0:
        return jp.zeros((len(sites),), dtype)
    con = d.contact
    _, _, b1, b2 = _contact_bodies(m, d)
    fn = shared.forces[:, 0]
    # one gather of every row quantity a sensor reads, channels first: point (3), normal (3), the normal force where
    # the row counts (active, force > 0; else 0, which adds nothing) and the two bodies (exact as floats): one gather
    # instead of three, along the last axis (under vmap XLA:CPU gathers (channels, rows) data ~2x faster than (rows,
    # channels) data; values bit-equal to the three gathers')
    fcount = jp.where(con.active & (fn > 0), fn, 0.0)
    rowt = jp.concatenate([con.pos.T, con.frame[:, 0].T, fcount[None], jp.stack([b1, b2]).astype(fn.dtype)])  # (9, n)
    idx, valid = _touch_rows(m, sites)
    sbody = np.asarray(m.site_bodyid)[sites]
    parts, order = [], []
    for t, sel in _touch_buckets(m, sites):
        width = max(1, int(valid[sel].sum(1).max()))
        rows, ok, s = idx[sel, :width], valid[sel, :width], sites[sel]  # (j, K), (j, K), (j,)
        f = rowt[:, rows]  # (9, j, K)
        body = jp.asarray(sbody[sel], fn.dtype)[:, None]
        on1, on2 = f[7] == body, f[8] == body
        use = jp.asarray(ok) & (on1 | on2)
        normal = jp.stack([f[3], f[4], f[5]], -1)
        ray = jp.where(on2[..., None], -normal, normal)
        hit = ray_hits(t, d.site_xpos[s][:, None], d.site_xmat[s][:, None], m.site_size[s][:, None],
                       jp.stack([f[0], f[1], f[2]], -1), ray)  # fmt: skip
        parts.append(jp.sum(jp.where(use & hit, f[6], 0.0), axis=1))
        order.append(sel)
    inv = np.argsort(np.concatenate(order))
    return jp.concatenate(parts)[inv].astype(dtype)


# ---- contact sensor ------------------------------------------------------------------------------------------


def _subtree_mask(m: Model, root: int) -> np.ndarray:
    """(nbody,) bool: body is `root` or one of its descendants."""
    parent = np.asarray(m.body_parentid)
    inside = np.zeros(m.nbody, bool)
    inside[root] = True
    for b in range(root + 1, m.nbody):  # parents have smaller ids
        inside[b] = inside[parent[b]]
    return inside


def _object_match(m: Model, objtype: int, objid: int, body: jax.Array, geom: jax.Array) -> jax.Array | None:
    """Contact side matches the sensor object (checkMatch), (nconmax,) bool; None: always matches."""
    if objtype in (ObjType.UNKNOWN, ObjType.SITE):
        return None
    if objtype == ObjType.GEOM:
        return geom == objid
    if objtype == ObjType.BODY:
        return body == objid
    if objtype == ObjType.XBODY:
        return jp.asarray(_subtree_mask(m, objid))[body]
    raise ValueError(f"contact sensor: invalid object type {objtype}")


def _match(m: Model, d: Data, i: int) -> tuple[jax.Array, jax.Array]:
    """(match, flip) of every contact row for contact sensor i (matchContact), (nconmax,) bool each."""
    t1, id1 = int(m.sensor_objtype[i]), int(m.sensor_objid[i])
    t2, id2 = int(m.sensor_reftype[i]), int(m.sensor_refid[i])
    con = d.contact
    n = m.nconmax
    false = jp.zeros((n,), bool)
    if t1 == ObjType.UNKNOWN and t2 == ObjType.UNKNOWN:
        return con.active, false
    g1, g2, b1, b2 = _contact_bodies(m, d)
    true = jp.ones((n,), bool)
    m11 = _object_match(m, t1, id1, b1, g1)
    m12 = _object_match(m, t1, id1, b2, g2)
    m21 = _object_match(m, t2, id2, b1, g1)
    m22 = _object_match(m, t2, id2, b2, g2)
    m11, m12, m21, m22 = (true if x is None else x for x in (m11, m12, m21, m22))
    match = con.active & (m11 | m12) & (m21 | m22)
    if t1 == ObjType.SITE:
        match = match & inside_site(m, d, con.pos, np.full(n, id1))
    if t1 != ObjType.UNKNOWN and t2 != ObjType.UNKNOWN:
        regular, reverse = m11 & m22, m12 & m21
        return match & (regular | reverse), reverse & ~regular
    if t1 != ObjType.UNKNOWN:
        return match, ~m11
    return match, ~m22


def _netforce(d: Data, forces: jax.Array, match: jax.Array, flip: jax.Array, mask: int, dtype) -> list[jax.Array]:
    con = d.contact
    w = jp.where(flip[:, None], -forces, forces)
    w = jp.where(match[:, None], w, 0.0)
    weight = safe_norm(w[:, :3], axis=-1)
    total = jp.sum(weight)
    point = jp.sum(weight[:, None] * con.pos, 0) / jp.maximum(total, MINVAL)
    fw = jp.einsum("cji,cj->ci", con.frame, w[:, :3])
    tw = jp.einsum("cji,cj->ci", con.frame, w[:, 3:])
    force = jp.sum(fw, 0)
    torque = jp.sum(tw + jp.cross(con.pos - point, fw), 0)
    nmatch = jp.sum(match).astype(dtype)
    vals = {FOUND: nmatch[None], FORCE: force, TORQUE: torque, DIST: jp.zeros((1,), dtype), POS: point,
            NORMAL: jp.asarray([1.0, 0.0, 0.0], dtype), TANGENT: jp.asarray([0.0, 1.0, 0.0], dtype)}  # fmt: skip
    out = []
    for f in range(len(CONDATA_SIZE)):
        if mask & (1 << f):
            if f not in vals:
                raise NotImplementedError("contact sensor: netforce reduction with linvel/angvel")
            out.append(vals[f].astype(dtype))
    return out


def contact_sensor(m: Model, d: Data, i: int, shared: Shared | None = None) -> jax.Array:
    """Values (sensor_dim[i],) of contact sensor i."""
    shared = shared or Shared(m, d)
    dtype = d.qpos.dtype
    mask, reduce, num = (int(x) for x in np.asarray(m.sensor_intprm)[i, :3])
    dim = int(np.asarray(m.sensor_dim)[i])
    size = sum(s for f, s in enumerate(CONDATA_SIZE) if mask & (1 << f))
    n = m.nconmax
    if n == 0:
        match = jp.zeros((0,), bool)
    else:
        match, flip = _match(m, d, i)
    if reduce == REDUCE_NETFORCE:
        if n == 0:
            return jp.zeros((dim,), dtype)
        slot = jp.concatenate(_netforce(d, shared.forces, match, flip, mask, dtype))
        slot = jp.where(jp.any(match), slot, 0.0)  # no matching contact: all zero
        return jp.concatenate([slot, jp.zeros((dim - size,), dtype)])
    if n == 0:
        return jp.zeros((dim,), dtype)
    con = d.contact
    rank = shared.rank
    if reduce == REDUCE_NONE:
        order = jp.lexsort((rank, ~match))
    elif reduce == REDUCE_MINDIST:
        order = jp.lexsort((rank, jp.where(match, con.dist, 0.0), ~match))
    elif reduce == REDUCE_MAXFORCE:
        f = shared.forces[:, :3]
        order = jp.lexsort((rank, jp.where(match, -jp.sum(f * f, -1), 0.0), ~match))
    else:
        raise NotImplementedError(f"contact sensor: reduce mode {reduce} is not supported")
    k = min(num, n)
    sel = order[:k]
    nmatch = jp.sum(match)
    valid = jp.arange(k) < nmatch
    fl = flip[sel]
    zsign = jp.where(fl, -1.0, 1.0).astype(dtype)
    zflip = jp.stack([jp.ones_like(zsign), jp.ones_like(zsign), zsign], -1)
    fields = []
    for f in range(len(CONDATA_SIZE)):
        if not mask & (1 << f):
            continue
        if f == FOUND:
            v = jp.broadcast_to(nmatch.astype(dtype), (k, 1))
        elif f in (FORCE, TORQUE):
            cf = shared.forces[sel]
            v = (cf[:, :3] if f == FORCE else cf[:, 3:]) * zflip
        elif f == DIST:
            v = con.dist[sel][:, None]
        elif f == POS:
            v = con.pos[sel]
        elif f in (NORMAL, TANGENT):
            v = con.frame[sel, 0 if f == NORMAL else 1] * jp.where(fl, -1.0, 1.0)[:, None]
        else:  # LINVEL, ANGVEL: second object relative to the first, at the contact point, contact frame
            _, _, b1, b2 = _contact_bodies(m, d)
            p = con.pos[sel]
            a1, l1 = _point_velocity(m, d, b1[sel], p)
            a2, l2 = _point_velocity(m, d, b2[sel], p)
            rel = (l2 - l1) if f == LINVEL else (a2 - a1)
            v = jp.einsum("kij,kj->ki", con.frame[sel], rel) * zflip
        fields.append(v.astype(dtype))
    slots = jp.where(valid[:, None], jp.concatenate(fields, axis=1), 0.0)
    out = slots.reshape(-1)
    return jp.concatenate([out, jp.zeros((dim - k * size,), dtype)])
