"""Flex elements against height fields (MuJoCo 4.0's mj_collideGeomElem for a height-field geom): every element of
a flex (a rope edge, a cloth triangle, a tetrahedron of the active layers) against the triangular prisms of the
field under it, one contact per prism whose distance to the element grown by the flex radius is below the margin.

MuJoCo 4.0's behaviour, probed (tests/test_flex_hfield.py checks it): the contacts of a (height field, element) pair
are those of the prisms of its sub-grid (the cells under the element's box grown by radius and margin, as the
geoms' `hfield` sub-grid) at a true distance below margin + gap, each with its true signed distance (GJK distance
when apart, the penetration depth when they overlap), the normal from the field to the element and the point midway
between the two surfaces; at most mjMAXCONPAIR = 50 per pair, in grid order. An element with a vertex on the
field's body is skipped, as for the other geoms.

Here a pair is the `hfield.window_collider` of its group (the pairs of one height field and one flex dim): a static
window of prisms anchored under the element's box, the prisms beyond the margin by a lower bound skipped, the others
through the exact collider: a rope edge is a capsule of the flex radius (`hfield._capsule_prism`, exact), a triangle
or tetrahedron a small mesh (`flex_elem`'s tables) against the prism by `general.collide` (GJK/EPA) with the radius
added to the margin, then taken off the distance. The window is sized from the longest edge at qpos0 times
`STRETCH` (an element may stretch that much), the flex radius and the margins (`Model.flex_reach0`,
`Model.geom_reach0`); an element whose box needs more cells than the window holds sets the overflow flag
(`d.warning_number[Warning.CONTACTFULL]`), nothing is dropped silently.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision import flex_elem, hfield
from mjx_lite.collision.general import collide
from mjx_lite.collision.types import NOCONTACT, GeomInfo, Points, Scalar
from mjx_lite.types import DisableBit, GeomType, Model

__all__ = ["STRETCH", "Group", "collide_group", "groups", "pairs"]

STRETCH = 1.5  # an element's extent the window allows for: its longest edge at qpos0 times this


class Group(NamedTuple):
    """One static group of (height-field geom, flex element) pairs: the field `hid`, the flex dim, per pair the geom
    (n,), flex (n,) and element (n,) ids, the window (wr, wc) cells and the contact slots per pair `k`."""

    hid: int
    dim: int
    geom: np.ndarray
    flex: np.ndarray
    elem: np.ndarray
    wr: int
    wc: int
    k: int


def pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (height-field geom ids, flex ids) of the pairs whose contype/conaffinity match, geom-major."""

    def build(m):
        return geom_flex_pairs(m, np.nonzero(np.asarray(m.geom_type) == GeomType.HFIELD)[0].tolist())

    return static_memo(m, "flex_hfield_pairs", build)


def geom_flex_pairs(m: Model, geoms: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """(geom ids, flex ids) of the pairs of `geoms` (in their order) and flexes whose contype/conaffinity match,
    geom-major; none when the model has no flex or contacts are disabled."""
    gs, fs = [], []
    if m.nflex == 0 or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    gct, gca = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
    fct, fca = np.asarray(m.flex_contype), np.asarray(m.flex_conaffinity)
    for g in geoms:
        for f in range(m.nflex):
            if (gct[g] & fca[f]) or (fct[f] & gca[g]):
                gs.append(int(g))
                fs.append(f)
    return np.asarray(gs, np.int64), np.asarray(fs, np.int64)


def _window(m: Model, hid: int, gs: np.ndarray, fs: np.ndarray) -> tuple[int, int]:
    """Static (rows, cols) of cells per pair: the element's box (STRETCH x its flex's longest edge at qpos0, grown by
    the radius and the margins of both sides) over the cell size, plus one; capped as the geoms' windows."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    freach, greach = np.asarray(m.flex_reach0, np.float64), np.asarray(m.geom_reach0, np.float64)
    reach = float(np.max(0.5 * STRETCH * freach[fs, 0] + freach[fs, 1] + greach[gs, 1]))
    dx, dy = (float(v) for v in np.asarray(m.hfield_cell0, np.float64)[hid])
    wc = math.ceil(2 * reach / dx) + 1 if dx > 0 else hfield.MAX_WINDOW
    wr = math.ceil(2 * reach / dy) + 1 if dy > 0 else hfield.MAX_WINDOW
    return max(1, min(wr, hfield.MAX_WINDOW, nrow - 1)), max(1, min(wc, hfield.MAX_WINDOW, ncol - 1))


def groups(m: Model, elem_data, keep_elem) -> tuple[Group, ...]:
    """Static groups of the (height-field geom, element) pairs, one per (height field, flex dim), pair order within
    a group. `elem_data(m, f)` -> (elemnum, dim + 1) local vertex ids; `keep_elem(m, g, f)` -> (elemnum,) bool, the
    elements MuJoCo collides with geom g (none with a vertex on g's body, only the active layers)."""

    def build(m):
        rows: dict[tuple[int, int], list] = {}
        gs, fs = pairs(m)
        for g, f in zip(gs, fs):
            key = (int(np.asarray(m.geom_dataid)[g]), int(m.flex_dim[f]))
            for e in np.nonzero(keep_elem(m, g, f))[0]:
                rows.setdefault(key, []).append((g, f, e))
        out = []
        for (hid, dim), r in sorted(rows.items()):
            g, f, e = (np.asarray(x, np.int64) for x in zip(*r))
            wr, wc = _window(m, hid, g, f)
            _, k = hfield.window_collider(m, hid, _type(dim), wr, wc, _prism(dim))
            out.append(Group(hid, dim, g, f, e, wr, wc, k))
        return tuple(out)

    return static_memo(m, "flex_hfield_groups", build)


def _type(dim: int) -> int:
    """The shape type an element enters the window collider as: a rope edge a capsule, others a mesh."""
    return GeomType.CAPSULE if dim == 1 else GeomType.MESH


def _prism(dim: int):
    """prism(v (6, 3), elem, margin) -> (dist, pos, normal) of one prism (height-field frame) and one element: the
    exact segment-prism distance for a rope edge (its capsule carries the radius), else `general.collide` of the
    prism and the element's core (the radius is in the margin and taken off by `collide_group`)."""
    if dim == 1:
        return lambda v, elem, margin: hfield._capsule_prism(v, elem)

    def prism(v: Points, elem: GeomInfo, margin: Scalar):
        return collide(GeomType.MESH, GeomType.MESH, hfield.prism_info(v), elem, margin, sat_budget=0)

    return prism


def _element(dim: int, x: Points, radius: Scalar) -> GeomInfo:
    """The element with vertices x (dim + 1, 3) as the window collider's shape: the capsule of a rope edge
    (`flex_elem._edge_capsule`), else the core triangle / tetrahedron as a mesh about its vertex mean."""
    if dim == 1:
        return flex_elem._edge_capsule(x, radius)
    dt = x.dtype
    c = jp.mean(x, axis=0)
    return GeomInfo(pos=c, mat=jp.eye(3, dtype=dt), size=jp.zeros(3, dt), vert=x - c,
                    face=jp.asarray(flex_elem._ELEM_FACE[dim]), edge=jp.asarray(flex_elem._ELEM_EDGE[dim]))  # fmt: skip


def collide_group(m: Model, d: types.Data, grp: Group, x: jax.Array, margin: jax.Array
                  ) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array, jax.Array]:  # fmt: skip
    """Contacts of one group: x (n, dim + 1, 3) the element vertices, margin (n,) the detection distance (margin +
    gap). Returns dist (n, k), pos (n, k, 3), normal (n, k, 3) from the field to the element, active (n, k) and the
    overflow flag ()."""
    hid, dim = grp.hid, grp.dim
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    one, k = hfield.window_collider(m, hid, _type(dim), grp.wr, grp.wc, _prism(dim))
    elev = m.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol)
    hsize = m.hfield_size[hid]
    dt = x.dtype

    def pair(pos, mat, xe, r, mg):
        elem = _element(dim, xe, r)
        core = jp.zeros((), dt) if dim == 1 else r  # the radius a mesh element carries in the margin
        c, over = one(elev, hsize, GeomInfo(pos, mat, jp.zeros(3, dt)), elem, mg + core)
        hit = c.dist < NOCONTACT
        dist = jp.where(hit, c.dist - core, NOCONTACT)
        return dist, c.pos - 0.5 * core * c.normal, c.normal, hit, over

    r = m.flex_radius[grp.flex]
    dist, pos, nrm, hit, over = jax.vmap(pair)(d.geom_xpos[grp.geom], d.geom_xmat[grp.geom], x, r, margin)
    return dist, pos, nrm, hit, jp.any(over)
