"""Tactile sensors (`<tactile geom=... mesh=...>`, MuJoCo 4.0's mjSENS_TACTILE, computed at the vel stage).

The sensor's taxels are the vertices of its mesh placed in its geom's frame. It reads the geoms in contact with the
sensor geom's weld body: every active contact with one side on that body names the geom on its other side (each geom
once). For each taxel and each such geom the taxel's signed distance to the geom is evaluated in the geom's frame
with the geom's distance function (plane, sphere, capsule, ellipsoid, cylinder, box: MuJoCo's primitive SDFs; mesh
geoms have no distance field without an SDF octree and contribute nothing, as in MuJoCo). Where a taxel is inside
(distance < 0; the sensor's own geom is skipped):
  channel 0 (pressure): the largest penetration depth -distance over the geoms,
  channels 1, 2 (slip): the sum over the geoms of |v_rel . t1|, |v_rel . t2|, v_rel the linear velocity at the
    taxel of the weld body minus that of the other geom's body, in the sensor geom's frame, t1, t2 the vertex's
    tangents (`Model.sensor_tangent`: the builtin wedge/plate meshes' per-vertex frames as MuJoCo's mesh_normal
    holds them, in the mesh's principal frame, which is the mesh geom's frame); zero for meshes without them.
sensordata holds the channels one after the other: [depth (nvert), slip 1 (nvert), slip 2 (nvert)].

Height fields and colliding flexes near a tactile sensor are refused at load (mjcf/sensor.py): MuJoCo has no
height-field distance and a flex contact has no geom. The candidate geoms are static (those the collision pair
table can bring in contact with the weld body); whether each is in contact is traced.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.math import safe_norm
from mjx_lite.types import Data, GeomType, Model

G = GeomType
_SDF_TYPES = (G.PLANE, G.SPHERE, G.CAPSULE, G.ELLIPSOID, G.CYLINDER, G.BOX)


def candidates(m: Model, weld: int) -> np.ndarray:
    """Static ids of the geoms that can be in contact with a geom of weld body `weld` and have a distance function
    (the other side of every dynamic or explicit pair with one side on the weld body)."""
    g1, g2 = driver.dynamic_pairs(m)
    if m.npair:
        g1 = np.concatenate([g1, np.asarray(m.pair_geom1)])
        g2 = np.concatenate([g2, np.asarray(m.pair_geom2)])
    w = np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)]
    other = np.concatenate([g2[w[g1] == weld], g1[w[g2] == weld]]).astype(int)
    other = np.unique(other)
    return other[np.isin(np.asarray(m.geom_type)[other], _SDF_TYPES)]


def _candidates(m: Model, weld: int, geom: int) -> np.ndarray:
    """`candidates` without the sensor's own geom (MuJoCo skips it)."""
    c = candidates(m, weld)
    return c[c != geom]


def geom_distance(gtype: int, x: jax.Array, size: jax.Array) -> jax.Array:
    """Signed distance (...,) of points x (..., 3) in a geom's frame to a primitive of type `gtype` and sizes size
    (..., 3) (MuJoCo's geom SDFs: exact outside; inside a box, the distance along a field turning from radial to the
    face normals)."""
    if gtype == G.PLANE:
        return x[..., 2]
    if gtype == G.SPHERE:
        return safe_norm(x) - size[..., 0]
    if gtype == G.CAPSULE:
        z = x[..., 2] - jp.clip(x[..., 2], -size[..., 1], size[..., 1])
        return safe_norm(jp.stack([x[..., 0], x[..., 1], z], -1)) - size[..., 0]
    if gtype == G.ELLIPSOID:
        a = x / size
        k0, k1 = safe_norm(a), safe_norm(a / size)
        return jp.where(k1 > 0, k0 * (k0 - 1.0) / jp.where(k1 > 0, k1, 1.0), 0.0)  # centre: no depth (MuJoCo: NaN)
    if gtype == G.CYLINDER:
        a = jp.stack([safe_norm(x[..., :2]) - size[..., 0], jp.abs(x[..., 2]) - size[..., 1]], -1)
        return jp.minimum(jp.max(a, -1), 0.0) + safe_norm(jp.maximum(a, 0.0))
    if gtype == G.BOX:
        a = jp.abs(x) - size
        outside = jp.any(a >= 0, -1)
        d_out = safe_norm(jp.maximum(a, 0.0)) + jp.minimum(jp.max(a, -1), 0.0)
        # inside (every a < 0): the field -size/a normalised, signs of x; distance -min(-a/|field_i|) |field|
        a_in = jp.where(outside[..., None], -1.0, a)
        field = -size / a_in
        field = field / safe_norm(field, keepdims=True)
        field = jp.where(x < 0, -field, field)
        t = -a_in / jp.abs(field)
        d_in = -jp.min(t, -1) * safe_norm(field)
        return jp.where(outside, d_out, d_in)
    raise ValueError(f"tactile: no distance function for geom type {gtype}")


def tactile(m: Model, d: Data, i: int) -> jax.Array:
    """Values (3 nvert,) of tactile sensor `i` (static id): depth, slip 1, slip 2 per taxel."""
    dtype = d.sensordata.dtype
    mesh, geom = int(np.asarray(m.sensor_objid)[i]), int(np.asarray(m.sensor_refid)[i])
    adr = int(np.asarray(m.sensor_adr)[i])
    nvert, vadr = int(np.asarray(m.mesh_vertnum)[mesh]), int(np.asarray(m.mesh_vertadr)[mesh])
    weld = int(np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)[geom]])
    cand = _candidates(m, weld, geom)
    if cand.size == 0 or m.nconmax == 0:
        return jp.zeros((3 * nvert,), dtype)

    # which candidates are in contact with the weld body (each counted once, as MuJoCo's list of geoms)
    c = d.contact
    gid = jp.clip(c.geom, 0, m.ngeom - 1)  # (nconmax, 2); flex sides (-1) are refused at load
    wid = jp.asarray(np.asarray(m.body_weldid)[np.asarray(m.geom_bodyid)])[gid]
    on = c.active & (c.geom[:, 0] >= 0) & (c.geom[:, 1] >= 0)
    hit = (on & (wid[:, 0] == weld))[:, None] & (c.geom[:, 1][:, None] == jp.asarray(cand)[None, :])
    hit |= (on & (wid[:, 1] == weld))[:, None] & (c.geom[:, 0][:, None] == jp.asarray(cand)[None, :])
    touching = jp.any(hit, axis=0)  # (ncand,)

    # taxels in the world frame and the weld body's velocity there
    vert = m.mesh_vert[vadr : vadr + nvert].astype(dtype)
    xpos = d.geom_xpos[geom] + vert @ d.geom_xmat[geom].T  # (nvert, 3)
    com = d.subtree_com[int(np.asarray(m.body_rootid)[weld])]
    w = d.cvel[weld]
    v_taxel = w[3:] - jp.cross(xpos - com, w[:3])  # (nvert, 3)
    tangent = m.sensor_tangent[adr + nvert : adr + 3 * nvert].reshape(2, nvert, 3).astype(dtype)

    depth = jp.zeros((nvert,), dtype)
    slip = jp.zeros((2, nvert), dtype)
    gtypes = np.asarray(m.geom_type)[cand]
    for t in np.unique(gtypes):
        sel = np.nonzero(gtypes == t)[0]
        g = cand[sel]
        body = np.asarray(m.geom_bodyid)[g]
        gpos, gmat = d.geom_xpos[g], d.geom_xmat[g]  # (k, 3), (k, 3, 3)
        lpos = jp.einsum("kji,nkj->nki", gmat, xpos[:, None, :] - gpos[None])  # (nvert, k, 3)
        dist = geom_distance(int(t), lpos, m.geom_size[g][None])  # (nvert, k)
        inside = touching[sel][None, :] & (jp.minimum(dist, 0.0) < 0)
        depth = jp.maximum(depth, jp.max(jp.where(inside, -dist, 0.0), axis=1))
        cv = d.cvel[body]  # (k, 6)
        gcom = d.subtree_com[np.asarray(m.body_rootid)[body]]
        v_other = cv[None, :, 3:] - jp.cross(xpos[:, None, :] - gcom[None], cv[None, :, :3])  # (nvert, k, 3)
        rel = (v_taxel[:, None, :] - v_other) @ d.geom_xmat[geom]  # in the sensor geom's frame: R^T v per row
        proj = jp.abs(jp.einsum("nkj,cnj->cnk", rel, tangent))  # (2, nvert, k)
        slip = slip + jp.sum(jp.where(inside[None], proj, 0.0), axis=2)
    return jp.concatenate([depth, slip.reshape(-1)])
