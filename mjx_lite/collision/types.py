"""Small containers shared by the colliders, and the shape aliases of their signatures."""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jp

from mjx_lite import types as _types
from mjx_lite.types import Model

# Shape aliases of the colliders' signatures: each stands for a jax.Array of the shape in its comment (for one pair:
# the driver vmaps the colliders over a group); the docstrings name the sizes (n, K, V vertices, T triangles, E edges,
# F face planes, P polygon vertices).
Scalar = jax.Array  # ()
Vec3 = jax.Array  # (3,)
Mat3 = jax.Array  # (3, 3)
Points = jax.Array  # (n, 3): points, vertices, normals or directions
Values = jax.Array  # (n,): one float per point, triangle, edge or face plane
Mask = jax.Array  # (n,) bool
Ids = jax.Array  # int32 indices: triangles (T, 3), edges (E, 4), face planes (F, K), a polygon (P,), one id ()
GType = int | jax.Array  # a geom type: a static int (one collider per type pair) or a traced () int (`general`)
SupportFn = Callable[[Vec3], tuple[Vec3, Vec3]]  # d -> (geom1's support point along d, geom2's along -d)
Distance = tuple[Scalar, Vec3, Vec3]  # (dist, pos, normal from geom1 to geom2) of one pair


class GeomInfo(NamedTuple):
    """One geom's world pose and shape, as a collider sees it (one pair; the driver vmaps over a group).

    Per pair:
    pos: (3,) world position; mat: (3, 3) world rotation (columns are the geom's axes); size: (3,).
    vert: (nvert, 3) mesh vertices in the geom frame (its hull's, padded by repetition), or None.
    gtype: () int geom type, given to the general convex collider (which serves several types), else None.
    face: (ntri, 3) int32 hull triangles of a mesh (local vertex ids into `vert`, outward), or None.
    edge: (nedge, 4) int32 hull edges of a mesh: its two vertex ids (its polygons' sides, each once) and the two hull
      triangles (rows of `face`) that meet there, padded by repeating the first, or None.
    triplane: (ntri,) int32 the face plane (row of `faceplane`) of each hull triangle, or None.
    mesh: () int32 the row of the mesh tables below (their leading axis), or None: the tables are the pair's own.
    Mesh tables, read a few rows at a time (the driver does not copy them per pair: `TABLES`); each has a leading
    axis over the meshes of the group's side when `mesh` is given:
    facepoly: (ntri, P) int32, for each hull triangle its polygon's vertex ids in MuJoCo's face order (clockwise
      about the outward normal), padded with the first; facepolynum: (ntri,) int32 their counts.
    faceplane: (nplane, K) int32 the hull triangles (rows of `face`) of each face plane: one row per polygon, each
      row padded by repeating its first triangle, rows padded by repeating the first row; or None (every triangle
      its own plane).
    vertplane: (nvert, Dp) int32 the face planes at each vertex; vertedge: (nvert, De, 3) int32 the triangle edges
      at each vertex (other end, the two triangles at the edge); both padded by repeating their first entry
      (`hull.vertex_tables`), or None.
    Use `polytope`'s accessors (`face_polygon`, `FacePlanes`, `vertex_planes`, `vertex_edges`).
    facenormal: (ntri, 3) unit normals of the hull triangles in the geom frame, and edgekink: (nedge, 3, 3) per hull
      edge its unit direction and the unit normals of its two triangles (`edge`'s), in the geom frame: the kinks of
      the mesh's support function (`refine.mesh_kink_tables`), computed once per mesh of a side rather than per pair;
      or None (computed per pair from `vert`).
    """

    pos: jax.Array
    mat: jax.Array
    size: jax.Array
    vert: jax.Array | None = None
    gtype: jax.Array | None = None
    face: jax.Array | None = None
    facepoly: jax.Array | None = None
    facepolynum: jax.Array | None = None
    edge: jax.Array | None = None
    faceplane: jax.Array | None = None
    vertplane: jax.Array | None = None
    vertedge: jax.Array | None = None
    triplane: jax.Array | None = None
    mesh: jax.Array | None = None
    facenormal: jax.Array | None = None
    edgekink: jax.Array | None = None


# GeomInfo's per-mesh tables
TABLES = ("facepoly", "facepolynum", "faceplane", "vertplane", "vertedge", "facenormal", "edgekink")


def info_axes(g: GeomInfo) -> GeomInfo:
    """vmap in_axes of a group's GeomInfo: per-pair fields along axis 0; the mesh tables, when indexed by `mesh`,
    shared (None)."""
    shared = g.mesh is not None
    return GeomInfo(*[None if shared and name in TABLES else 0 for name in GeomInfo._fields])


class Contacts(NamedTuple):
    """A fixed number `k` of candidate contacts of one geom pair.

    dist: (k,) signed distance; rows that are not contacts hold `NOCONTACT` (large, finite);
    pos: (k, 3) contact point (midpoint between the two surfaces);
    normal: (k, 3) unit normal pointing from geom1 to geom2;
    tangent: (k, 3) first tangent hint, or zeros (then the frame is MuJoCo's default, see frame.make_frame).
    """

    dist: jax.Array
    pos: jax.Array
    normal: jax.Array
    tangent: jax.Array


# dist of candidate rows that are not contacts (finite, so gradients and arithmetic stay NaN-free)
NOCONTACT = 1e6


def adhesive_dim(m: Model, dim: jax.Array, dist: jax.Array, includemargin: jax.Array, adhesion: jax.Array
                 ) -> jax.Array:  # fmt: skip
    """(n,) contact dims with MuJoCo's rule for adhesive contacts (mj_setContact): a contact with nonzero adhesion
    in the gap band (dist >= includemargin) stays a constraint row but has no surface contact, so it is normal-only
    (dim 1). Unchanged when the model has no adhesion (static `m.flg_adhesion`)."""
    if not m.flg_adhesion:
        return dim
    return jp.where((adhesion != 0) & (dist >= includemargin), 1, dim).astype(jp.int32)


def mix_params(side1: tuple, side2: tuple) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(friction (n, 5), solref (n, 2), solimp (n, 5)) of contacts between two sides (mj_contactParam), each side
    (priority (n,) static, solmix (n,), solref (n, 2), solimp (n, 5), friction (n, 3)): the higher priority's values,
    else solref / solimp mixed by solmix (the smaller solref where either is direct) and the larger friction."""
    p1, s1, r1, i1, f1 = side1
    p2, s2, r2, i2, f2 = side2
    hi1, hi2 = jp.asarray(p1 > p2), jp.asarray(p1 < p2)
    same = ~(hi1 | hi2)
    big1, big2 = s1 >= _types.MINVAL, s2 >= _types.MINVAL
    mix = jp.where(big1 & big2, s1 / jp.where(big1 & big2, s1 + s2, 1.0),
                   jp.where(~big1 & ~big2, 0.5, jp.where(~big1, 0.0, 1.0)))  # fmt: skip
    mix = jp.where(hi1, 1.0, jp.where(hi2, 0.0, mix))
    both_std = (r1[:, :1] > 0) & (r2[:, :1] > 0)
    solref = jp.where(both_std | ~same[:, None], mix[:, None] * r1 + (1 - mix[:, None]) * r2, jp.minimum(r1, r2))
    solimp = mix[:, None] * i1 + (1 - mix[:, None]) * i2
    fr = jp.where(same[:, None], jp.maximum(f1, f2), jp.where(hi1[:, None], f1, f2))
    return jp.stack([fr[:, 0], fr[:, 0], fr[:, 1], fr[:, 2], fr[:, 2]], axis=-1), solref, solimp
