"""Skin vertices and normals in world coordinates, as MuJoCo's visualiser computes them (mjv_updateActiveSkin).

    vert, normal = skin.skin_vertices(m, d)          # (nskinvert, 3) each, after mjx_lite.forward / kinematics

Each bone (a body with a bind pose) moves its vertices rigidly: p = R (v - bindpos') + xpos with
R = xquat * conj(bindquat), and a vertex is the weighted sum over its bones (the compiled weights sum to one).
Vertex normals are the normalised sums of the (area-weighted) normals of the faces around them, and a skin with
`inflate` moves its vertices that far along the normals. Differentiable in the body poses and the traced skin data
(skin_vert, skin_bonebindpos, skin_bonebindquat, skin_bonevertweight, skin_inflate); jit and vmap go through.
MuJoCo computes only the skins of visible groups, in float32; this computes every skin in the Model's dtype.

The renderer does not draw skins yet (docs/rendering.md); these positions are what a drawing would use.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.math import quat_conj, quat_mul, quat_to_mat
from mjx_lite.types import MINVAL

__all__ = ["skin_normals", "skin_vertices"]


def _plan(m) -> dict[str, np.ndarray]:
    """Static index tables: per bone-vertex its bone and global vertex id; per face its global vertex ids; per
    vertex its skin."""
    nskin = int(m.nskin)
    bone_skin = np.repeat(np.arange(nskin), np.asarray(m.skin_bonenum))
    vert_skin = np.repeat(np.arange(nskin), np.asarray(m.skin_vertnum))
    face_skin = np.repeat(np.arange(nskin), np.asarray(m.skin_facenum))
    bv_bone = np.repeat(np.arange(int(m.nskinbone)), np.asarray(m.skin_bonevertnum))
    vertadr = np.asarray(m.skin_vertadr)
    bv_vert = np.asarray(m.skin_bonevertid) + vertadr[bone_skin[bv_bone]]
    face = np.asarray(m.skin_face).reshape(-1, 3) + vertadr[face_skin][:, None]
    return dict(bv_bone=bv_bone, bv_vert=bv_vert, face=face, vert_skin=vert_skin)


def skin_vertices(m, d) -> tuple[jax.Array, jax.Array]:
    """(vert (nskinvert, 3), normal (nskinvert, 3)): world positions and unit normals of every skin's vertices
    from the bodies' poses d.xpos / d.xquat (run kinematics or forward first)."""
    n = int(m.nskinvert)
    dtype = d.xpos.dtype
    if n == 0:
        return jp.zeros((0, 3), dtype), jp.zeros((0, 3), dtype)
    p = _plan(m)
    body = np.asarray(m.skin_bonebodyid)
    quat = quat_mul(d.xquat[body], quat_conj(jp.asarray(m.skin_bonebindquat, dtype)))
    rot = quat_to_mat(quat)  # (nbone, 3, 3)
    trans = d.xpos[body] - jp.einsum("bij,bj->bi", rot, jp.asarray(m.skin_bonebindpos, dtype))
    v = jp.asarray(m.skin_vert, dtype)[p["bv_vert"]]
    moved = jp.einsum("kij,kj->ki", rot[p["bv_bone"]], v) + trans[p["bv_bone"]]
    w = jp.asarray(m.skin_bonevertweight, dtype)[:, None]
    vert = jax.ops.segment_sum(w * moved, p["bv_vert"], num_segments=n)
    normal = skin_normals(m, vert)
    inflate = jp.asarray(m.skin_inflate, dtype)[p["vert_skin"]][:, None]
    return vert + inflate * normal, normal


def skin_normals(m, vert: jax.Array) -> jax.Array:
    """(nskinvert, 3) unit vertex normals of skin vertices `vert` (nskinvert, 3): the sum of the (area-weighted)
    normals of the faces around each vertex, divided by max(MINVAL, its length) (0 for a vertex in no face)."""
    f = _plan(m)["face"]
    n = vert.shape[0]
    if f.shape[0]:
        a, b, c = vert[f[:, 0]], vert[f[:, 1]], vert[f[:, 2]]
        nrm = jp.cross(b - a, c - a)
        acc = jax.ops.segment_sum(jp.concatenate([nrm, nrm, nrm]), np.concatenate([f[:, 0], f[:, 1], f[:, 2]]),
                                  num_segments=n)  # fmt: skip
    else:
        acc = jp.zeros_like(vert)
    sq = jp.sum(acc * acc, axis=-1, keepdims=True)
    return acc / jp.sqrt(jp.where(sq > MINVAL * MINVAL, sq, MINVAL * MINVAL))  # max(MINVAL, |n|), NaN-safe
