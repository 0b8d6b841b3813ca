"""Flex self-collisions (MuJoCo 4.0's flex self-collision loop in mj_collision and mj_collideElems): the elements of
one flex against each other.

MuJoCo 4.0's behaviour, probed with the `mujoco` package (tests/test_flex_self.py checks it):
  - Which flexes: not rigid, contype & conaffinity != 0 (the flex's own bits) and selfcollide != 'none'. The modes
    'narrow' (every pair), 'bvh' (the flex's BVH), 'sap' (sweep and prune) and 'auto' (BVH for dim 3, else SAP)
    make the same contacts (the same pairs, dist, pos and frame to round-off, 1e-14); only their order in
    d.contact and which element is first differ (a pair found with elem = (e2, e1) carries the opposite normal,
    so its constraint is the same). MuJoCo 4.0 has no `flex_internal` (no element-vertex or within-tetrahedron
    contacts).
  - Which pairs: e1 < e2 both active (dim 1 and 2: every element; dim 3: flex_elemlayer < flex_activelayers) and
    no vertex body in common (an element pair sharing a vertex is skipped, and so is one whose vertices sit on the
    same body, e.g. two pinned to the world). The element boxes (vertex box grown by the flex radius) must overlap
    (filterBox with margin 0: a conservative filter, the collider decides).
  - Margin and gap are ignored (0): a contact is a penetration of the two elements thickened by the flex radius,
    dist < 0; includemargin = 0.
  - Colliders: two edges (dim 1): mjraw_CapsuleCapsule of their capsules (1 row, 2 for parallel edges; normal from
    the first edge to the second); triangles and tetrahedra: one contact from GJK/EPA (mjc_ConvexElem, no normal
    fix since no geom is involved): dist = the penetration of the thickened elements, pos the midpoint between
    their surfaces, normal from elem[0] to elem[1].
  - Parameters (mj_contactParam of the flex with itself): condim = flex_condim, friction = flex_friction
    (sliding, sliding, torsional, rolling, rolling), solref = flex_solref, solimp = flex_solimp, solreffriction 0,
    no adhesion; the <option><flag override> values where enabled. Ids: geom (-1, -1), flex (f, f),
    elem (e1, e2), vert (-1, -1).
  - Order: after every geom-geom and geom-flex contact; 'narrow' in (e1, e2) loop order, the others in their
    broadphase's.
  - Jacobian: each side is its element's vertex bodies weighted by the barycentric coordinates of the element point
    nearest to the contact point (as a geom-element contact's flex side); diagApprox sums both sides' weighted
    body_invweight0.

Here each self-colliding flex is one static group: the table of its candidate pairs (every active, non-adjacent
e1 < e2: P = O(nelem^2) entries, e.g. 100k for a 16 x 16 cloth), then per step a broadphase over the whole table by
the element boxes (vectorised, P x 6 comparisons) keeps the first `k` overlapping pairs, k = min(P, max(MIN_PAIRS,
PAIRS_PER_ELEM x active elements)), and one vmapped collider runs on those k (GJK/EPA loops skip the padding rows).
More overlapping pairs than k set the overflow flag (d.warning_number[Warning.CONTACTFULL]); nothing is dropped
silently. A flex with more than types.FLEX_SELF_MAX_PAIRS element pairs is refused at load (mjcf/flex.py).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision import flex_elem, flex_hfield, general, primitive
from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.types import NOCONTACT
from mjx_lite.types import DisableBit, EnableBit, GeomType, Model

__all__ = ["MIN_PAIRS", "PAIRS_PER_ELEM", "Group", "capacity", "contacts", "groups", "self_colliding", "slot_condim"]

PAIRS_PER_ELEM = 8.0  # colliding pairs per active element a step can hold (element boxes overlapping)
MIN_PAIRS = 64  # ... and at least this many per flex
ROWS = {1: 2, 2: 1, 3: 1}  # contact rows per pair: capsule-capsule (2: parallel edges), GJK/EPA (1)


class Group(NamedTuple):
    """The self-collisions of one flex: its id and dim, the candidate pairs e1 (P,), e2 (P,) (local element ids,
    e1 < e2, in MuJoCo's loop order) and the pairs `k` collided per step."""

    flex: int
    dim: int
    e1: np.ndarray
    e2: np.ndarray
    k: int


def self_colliding(m: Model, f: int) -> bool:
    """Static: flex f collides with itself (not rigid, its contype & conaffinity, selfcollide != 'none', contacts
    enabled)."""
    if m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
        return False
    return bool(not np.asarray(m.flex_rigid)[f] and int(m.flex_contype[f]) & int(m.flex_conaffinity[f])
                and int(m.flex_selfcollide[f]) != 0)  # fmt: skip


def candidate_pairs(m: Model, f: int) -> tuple[np.ndarray, np.ndarray]:
    """Static (e1, e2) (P,) each: the active element pairs of flex f with no vertex body in common, e1 < e2."""
    dim, adr, num = int(m.flex_dim[f]), int(m.flex_elemdataadr[f]), int(m.flex_elemnum[f])
    ed = np.asarray(m.flex_elem)[adr : adr + num * (dim + 1)].reshape(num, dim + 1)
    body = np.asarray(m.flex_vertbodyid)[int(m.flex_vertadr[f]) + ed]  # (num, dim + 1)
    active = np.ones(num, bool)
    if dim == 3:
        layer = np.asarray(m.flex_elemlayer)[int(m.flex_elemadr[f]) : int(m.flex_elemadr[f]) + num]
        active = layer < int(m.flex_activelayers[f])
    ids = np.nonzero(active)[0]
    n = len(ids)
    # element-body incidence (n, nbody) as a sparse product: pairs sharing a body have a nonzero overlap
    onehot = np.zeros((n, int(body.max()) + 1 if body.size else 1), np.int32)
    np.put_along_axis(onehot, body[ids], 1, axis=1)
    share = (onehot @ onehot.T) > 0
    i1, i2 = np.triu_indices(n, 1)
    keep = ~share[i1, i2]
    return ids[i1[keep]].astype(np.int64), ids[i2[keep]].astype(np.int64)


def groups(m: Model) -> tuple[Group, ...]:
    """Static groups, one per self-colliding flex with candidate pairs, flex order."""

    def build(m):
        out = []
        for f in range(m.nflex):
            if not self_colliding(m, f):
                continue
            e1, e2 = candidate_pairs(m, f)
            if not len(e1):
                continue
            nact = len(np.unique(np.concatenate([e1, e2])))
            k = min(len(e1), max(MIN_PAIRS, math.ceil(PAIRS_PER_ELEM * nact)))
            out.append(Group(f, int(m.flex_dim[f]), e1, e2, k))
        return tuple(out)

    return static_memo(m, "flex_self_groups", build)


def capacity(m: Model) -> int:
    """Static number of self-collision contact slots (after the flex module's geom-flex slots)."""
    return sum(g.k * ROWS[g.dim] for g in groups(m))


def slot_condim(m: Model) -> np.ndarray:
    """Static condim of every self-collision slot (flex_condim)."""
    cd = np.asarray(m.flex_condim)
    z = [np.zeros(0, np.int64)]
    return np.concatenate(z + [np.full(g.k * ROWS[g.dim], cd[g.flex], np.int64) for g in groups(m)])


def _select(over: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(rows (k,) int: the first k candidates with `over`, live (k,), overflow ()) of a (P,) bool broadphase."""
    if k >= over.shape[0]:
        return jp.arange(over.shape[0]), over, jp.zeros((), bool)
    (rows,) = jp.nonzero(over, size=k, fill_value=0)
    count = jp.sum(over)
    return rows, jp.arange(k) < count, count > k


def _group(m: Model, d: types.Data, g: Group):
    """(dist (n,), pos (n, 3), normal (n, 3), active (n,), e1 (n,), e2 (n,), overflow ()) of one flex's self
    contacts, n = g.k * ROWS[g.dim]."""
    f, dim = g.flex, g.dim
    adr, num = int(m.flex_elemdataadr[f]), int(m.flex_elemnum[f])
    ed = np.asarray(m.flex_elem)[adr : adr + num * (dim + 1)].reshape(num, dim + 1)
    x = d.flexvert_xpos[int(m.flex_vertadr[f]) + ed]  # (num, dim + 1, 3)
    r = m.flex_radius[f]
    lo, hi = jp.min(x, axis=1) - r, jp.max(x, axis=1) + r  # element boxes (flexelem_aabb)
    e1, e2 = jp.asarray(g.e1, jp.int32), jp.asarray(g.e2, jp.int32)
    over = jp.all((lo[e1] <= hi[e2]) & (lo[e2] <= hi[e1]), axis=1)  # (P,) filterBox with margin 0
    rows, live, overflow = _select(over, g.k)
    a, b = e1[rows], e2[rows]
    xa, xb = x[a], x[b]
    if dim == 1:

        def one(x1, x2, ok):
            c = primitive.capsule_capsule(flex_elem._edge_capsule(x1, r), flex_elem._edge_capsule(x2, r), 0.0)
            return c.dist, c.pos, c.normal, ok & (c.dist < 0)

    else:

        def one(x1, x2, ok):
            # the cores (triangles, tetrahedra) by GJK/EPA within the two radii; the midpoint between the thickened
            # surfaces is the cores' midpoint (both grow by r)
            dist, pos, n = general.collide(GeomType.MESH, GeomType.MESH, flex_hfield._element(dim, x1, r),
                                           flex_hfield._element(dim, x2, r), 2 * r, sat_budget=0, skip=~ok)  # fmt: skip
            dist = dist - 2 * r
            return dist[None], pos[None], n[None], (ok & (dist < 0))[None]

    dist, pos, nrm, act = jax.vmap(one)(xa, xb, live)
    k = ROWS[dim]
    return (dist.reshape(-1), pos.reshape(-1, 3), nrm.reshape(-1, 3), act.reshape(-1), jp.repeat(a, k),
            jp.repeat(b, k), overflow)  # fmt: skip


def contacts(m: Model, d: types.Data) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(overflow (), contact fields (capacity(m) rows, Data.contact's layout)) of the flex self-collisions."""
    dtype = d.geom_xpos.dtype
    parts = [_group(m, d, g) for g in groups(m)]
    dist, pos, nrm, active, e1, e2 = (jp.concatenate([p[i] for p in parts]) for i in range(6))
    overflow = jp.any(jp.stack([p[6] for p in parts]))
    fl = np.concatenate([np.full(g.k * ROWS[g.dim], g.flex, np.int64) for g in groups(m)])
    n = len(fl)
    fr = m.flex_friction[fl]
    friction = jp.stack([fr[:, 0], fr[:, 0], fr[:, 1], fr[:, 2], fr[:, 2]], axis=-1)
    solref, solimp = m.flex_solref[fl], m.flex_solimp[fl]
    if m.opt.enableflags & EnableBit.OVERRIDE:
        solref = jp.broadcast_to(m.opt.o_solref, (n, 2))
        solimp = jp.broadcast_to(m.opt.o_solimp, (n, 5))
        friction = jp.broadcast_to(m.opt.o_friction, (n, 5))
    friction = jp.maximum(friction, types.MINMU)
    frame = make_frame(nrm, jp.zeros_like(nrm))
    eye = jp.broadcast_to(jp.eye(3, dtype=dtype), (n, 3, 3))
    side = np.full(n, -1)
    dist = jp.where(active, dist, NOCONTACT).astype(dtype)
    zero = jp.zeros(n, dtype)
    return overflow, dict(
        dist=dist,
        pos=jp.where(active[:, None], pos, 0.0).astype(dtype),
        frame=jp.where(active[:, None, None], frame, eye).astype(dtype),
        includemargin=zero,
        friction=friction.astype(dtype),
        solref=solref.astype(dtype),
        solreffriction=jp.zeros((n, 2), dtype),
        solimp=solimp.astype(dtype),
        dim=jp.asarray(slot_condim(m), jp.int32),
        adhesion=zero,
        geom=jp.asarray(np.stack([side, side], -1), jp.int32),
        flex=jp.asarray(np.stack([fl, fl], -1), jp.int32),
        elem=jp.stack([e1, e2], -1).astype(jp.int32),
        vert=jp.asarray(np.stack([side, side], -1), jp.int32),
        efc_address=jp.full((n,), -1, jp.int32),
        active=active,
    )
