"""Support maps of the convex geoms (MuJoCo's support functions for mjc_ccd, engine_collision_convex.c).

The colliders of `general.py` see a geom through its support map: the point of its core shape farthest along a
direction. Spheres and capsules enter as their core (a point, a segment) plus a radius (`radius`), so their pairs
are exact up to the iteration tolerance; meshes use their vertices (the support of the vertex set is that of its
hull). Besides the map itself (`support`), the normal refinement of curved pairs (`refine.py`) needs its
derivative (`support_jacobian`) and the shape of the support set (`support_feature`: a point or a segment).
`gtype` is a static int (one collider per type) or traced (the general collider serves several types).
Shapes: d, points (3,); mat (3, 3); a GeomInfo as in `types.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.polytope import first_max
from mjx_lite.collision.types import GeomInfo, GType, Mat3, Points, Scalar, Vec3
from mjx_lite.math import safe_norm
from mjx_lite.types import GeomType


def _support_local(gtype: int, size: Vec3, vert: Points | None, d: Vec3) -> Vec3:
    """Support point (core shape) of a geom in its own frame for local direction d (3,)."""
    if gtype == GeomType.SPHERE:
        return jp.zeros_like(d)
    if gtype == GeomType.CAPSULE:
        return jp.zeros_like(d).at[2].set(jp.where(d[2] >= 0, size[1], -size[1]))
    if gtype == GeomType.ELLIPSOID:
        sd = size * d
        return size * sd / jp.maximum(safe_norm(sd), 1e-30)
    if gtype == GeomType.CYLINDER:
        rxy = safe_norm(d[:2])
        scale = jp.where(rxy > 1e-15, size[0] / jp.where(rxy > 1e-15, rxy, 1.0), 0.0)
        return jp.stack([d[0] * scale, d[1] * scale, jp.where(d[2] >= 0, size[1], -size[1])])
    if gtype == GeomType.BOX:
        return jp.where(d >= 0, size, -size)
    if gtype == GeomType.MESH:  # the dot products written out: XLA on CPU runs vert @ d under vmap ~2x slower; the
        # first maximum by two plain reductions (`first_max`: argmax's index, 3-6x faster under vmap on XLA:CPU)
        return vert[first_max(vert[:, 0] * d[0] + vert[:, 1] * d[1] + vert[:, 2] * d[2])]
    raise NotImplementedError(f"convex collider: geom type {gtype}")


def radius(gtype: GType, size: Vec3) -> Scalar:
    """Core radius: sphere and capsule radius, else 0. `gtype` may be static or traced."""
    if isinstance(gtype, int):
        if gtype in (GeomType.SPHERE, GeomType.CAPSULE):
            return size[0]
        return jp.zeros((), size.dtype)
    return jp.where((gtype == GeomType.SPHERE) | (gtype == GeomType.CAPSULE), size[0], 0.0)


_CONVEX_TYPES = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX)


class TracedType:
    """A traced geom type (value: () int) with the static tuple of the types it may take (`choices`, e.g. those of
    one side of a collision group): the support maps build branches for those types only, not for every convex
    type. Compares like its value (`gtype == GeomType.BOX` is a traced bool)."""

    __slots__ = ("value", "choices")

    def __init__(self, value: jax.Array, choices: tuple[int, ...]):
        self.value, self.choices = value, tuple(int(t) for t in choices)

    def __eq__(self, other):  # noqa: D105 - a traced comparison, as the value's
        return self.value == other

    def __ne__(self, other):  # noqa: D105
        return self.value != other

    __hash__ = None


def typed(value: jax.Array | None, choices) -> GType | None:
    """The geom type of a traced value that takes one of `choices` (None: any type): the static int where there is
    one choice, a `TracedType` where there are several, the value itself without choices."""
    if value is None or choices is None:
        return value
    choices = tuple(sorted({int(t) for t in choices}))
    return choices[0] if len(choices) == 1 else TracedType(value, choices)


def traced(value: jax.Array | None, choices) -> GType | None:
    """`typed`, but a `TracedType` even where there is one choice: the support maps branch over `choices` only, and
    the type stays traced wherever a collider treats traced types apart from static ones (`refine._frame_kinks`,
    `refine.small_mesh`, `general.collide`'s iteration counts), so that its values are those of the raw traced type's
    (the `general` group's, whose types are any)."""
    if value is None or choices is None:
        return value
    return TracedType(value, tuple(sorted({int(t) for t in choices})))


def choices(gtype: GType) -> tuple[int, ...]:
    """The types a traced `gtype` may take: its `TracedType.choices`, else every type."""
    return gtype.choices if isinstance(gtype, TracedType) else (*_CONVEX_TYPES, GeomType.MESH)


def support(gtype: GType, g: GeomInfo, d: Vec3) -> Vec3:
    """World support point (core shape) of geom g in direction d; `gtype` static int or traced (any type, or one of
    a `TracedType`'s choices)."""
    local = g.mat.T @ d
    if isinstance(gtype, int):
        p = _support_local(gtype, g.size, g.vert, local)
    else:
        types = [t for t in _CONVEX_TYPES if t in choices(gtype)]
        cands = [_support_local(t, g.size, None, local) for t in types]
        if g.vert is not None and GeomType.MESH in choices(gtype):
            cands.append(_support_local(GeomType.MESH, g.size, g.vert, local))
            types.append(GeomType.MESH)
        p = jp.select([gtype == t for t in types], cands, cands[0])
    return g.pos + g.mat @ p


CURVED = (GeomType.ELLIPSOID, GeomType.CYLINDER)  # core shapes whose support map has a nonzero derivative


def support_jacobian(gtype: GType, g: GeomInfo, d: Vec3) -> Mat3:
    """Derivative (3, 3) of the world support point `support(gtype, g, d)` w.r.t. the direction d (a.e.): the
    ellipsoid's D (I - s s^T / |s|^2) D / |s| with s = D d, D = diag(size) (its radii of curvature at the support
    point), the cylinder side's r (I - u u^T) / |d_xy| in the xy plane (u = d_xy / |d_xy|; 0 at the cap's centre),
    0 for the piecewise constant supports (point, segment, box, mesh). `gtype` static or traced."""
    dt = d.dtype
    local = g.mat.T @ d

    def ellipsoid():
        size = g.size
        sd = size * local
        nsd = jp.maximum(safe_norm(sd), 1e-30)
        q = size * sd  # D^2 d
        return (jp.diag(size * size) - q[:, None] * q[None, :] / (nsd * nsd)) / nsd

    def cylinder():
        rxy = safe_norm(local[:2])
        ok = rxy > 1e-6 * g.size[0]
        u = local[:2] / jp.where(ok, rxy, 1.0)
        j2 = g.size[0] / jp.where(ok, rxy, 1.0) * (jp.eye(2, dtype=dt) - u[:, None] * u[None, :])
        return jp.zeros((3, 3), dt).at[:2, :2].set(jp.where(ok, j2, 0.0))

    if isinstance(gtype, int):
        jl = ellipsoid() if gtype == GeomType.ELLIPSOID else cylinder() if gtype == GeomType.CYLINDER else None
        if jl is None:
            return jp.zeros((3, 3), dt)
    else:
        jl = jp.zeros((3, 3), dt)
        for t, fn in ((GeomType.CYLINDER, cylinder), (GeomType.ELLIPSOID, ellipsoid)):
            if t in choices(gtype):
                jl = jp.where(gtype == t, fn(), jl)
    return g.mat @ jl @ g.mat.T


_KINK_COS = 1e-3  # a direction this close to a support map's kink (|cos| below it) is taken to lie on it


def support_feature(gtype: GType, g: GeomInfo, d: Vec3) -> tuple[Scalar, Vec3, Vec3, Scalar]:
    """The shape of geom g's core support set along the unit direction d (within _KINK_COS of a kink): (unique ():
    one point, as a sphere's centre and an ellipsoid's always, a capsule's segment where d is not across its axis, a
    cylinder off its side lines and cap faces, a box off its faces and edges; never taken for a mesh; centre (3,),
    half-axis (3,) and segment (): a segment, as a capsule's axis across d, a cylinder's side line, a box edge).
    `gtype` static or traced."""
    dt = d.dtype
    local = g.mat.T @ d
    big = jp.abs(local) > _KINK_COS
    sign = jp.where(local >= 0, 1.0, -1.0).astype(dt)
    rxy = safe_norm(local[:2])
    radial = g.size[0] * local[:2] / jp.maximum(rxy, 1e-30)
    zero, yes, no, origin = jp.zeros((), dt), jp.ones((), bool), jp.zeros((), bool), jp.zeros(3, dt)
    axis = jp.stack([zero, zero, g.size[1]])
    k = jp.argmax(~big)  # a box edge: exactly one local component across it
    edge = jp.arange(3) == k
    # per type: (unique, local centre, local half-axis, segment)
    kinds = {
        GeomType.SPHERE: (yes, origin, origin, no),
        GeomType.ELLIPSOID: (yes, origin, origin, no),
        GeomType.CAPSULE: (big[2], origin, axis, ~big[2]),
        GeomType.CYLINDER: (big[2] & (big[0] | big[1]), jp.stack([radial[0], radial[1], zero]), axis,
                            ~big[2] & (rxy > _KINK_COS)),  # fmt: skip
        GeomType.BOX: (jp.all(big), jp.where(edge, 0.0, sign * g.size), jp.where(edge, g.size, 0.0),
                       jp.sum(~big) == 1),  # fmt: skip
    }
    default = (no, origin, origin, no)  # a mesh
    if isinstance(gtype, int):
        unique, c, h, seg = kinds.get(gtype, default)
    elif not any(t in choices(gtype) for t in kinds):  # a traced mesh (`traced`): the default, as for a static one
        unique, c, h, seg = default
    else:
        kinds = {t: v for t, v in kinds.items() if t in choices(gtype)}
        conds = [gtype == t for t in kinds]
        unique, c, h, seg = (jp.select(conds, [v[i] for v in kinds.values()], default[i]) for i in range(4))
    return unique, g.pos + g.mat @ c, g.mat @ h, seg
