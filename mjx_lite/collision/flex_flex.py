"""Flex-flex contacts (MuJoCo 4.0's mj_collideElems): the elements of one flex against each other (self-collisions,
the flex self-collision loop of mj_collision) and the elements of two flexes whose contype/conaffinity match (the
flex : flex pairs of its broadphase).

MuJoCo 4.0's behaviour, probed with the `mujoco` package (tests/test_flex_self.py checks it):
  - Self-collisions, which flexes: not rigid, contype & conaffinity != 0 (the flex's own bits) and selfcollide !=
    'none'. The modes 'narrow' (every pair), 'bvh' (the flex's BVH), 'sap' (sweep and prune) and 'auto' (BVH for
    dim 3, else SAP) make the same contacts: the same pairs and dists (1e-13 with ccd_tolerance 1e-13), pos and
    normals within MuJoCo's EPA tolerance (a few 1e-6: a pair found as elem = (e2, e1) runs EPA from the other side
    and carries the opposite normal, the same constraint); their order in d.contact differs. MuJoCo 4.0 has no
    `flex_internal` (no element-vertex or within-tetrahedron contacts).
  - Self-collisions, which pairs: e1 < e2 both active (dim 1 and 2: every element; dim 3: flex_elemlayer <
    flex_activelayers) with no vertex body in common (elements sharing a vertex are skipped, and so are elements
    whose vertices sit on one body, e.g. pinned to the world). Margin and gap are ignored (0): a contact is a
    penetration of the two elements thickened by the flex radius, dist < 0, includemargin 0.
  - Two flexes f1 < f2 (contype1 & conaffinity2 or contype2 & conaffinity1): every element of f1 against every
    element of f2 (no active-layer filter), again none with a vertex body in common; margin = the sum of the two
    flexes' margins, gap the sum of their gaps: a contact where dist < margin + gap, includemargin = margin (the
    gap not taken off, as for geom-element contacts).
  - Element boxes (vertex box grown by the flex radius) farther apart than margin + gap are skipped (filterBox: a
    conservative filter, the collider decides).
  - Colliders: two edges (dim 1 and 1): mjraw_CapsuleCapsule of their capsules (1 row, 2 for parallel edges); any
    other pair: one contact from GJK/EPA on the thickened elements (mjc_ConvexElem; no normal fix, no geom is
    involved): dist, pos the midpoint between the two surfaces, normal from elem[0] to elem[1]. Here that is
    computed in closed form (collision/elem_elem.py: separating axes and feature pairs of the cores, the radii added;
    exact where MuJoCo's EPA converges).
  - Parameters: mj_contactParam of the two flexes (for self-collisions the flex's own: condim = flex_condim,
    friction = flex_friction as (sliding, sliding, torsional, rolling, rolling), solref, solimp); solreffriction 0,
    no adhesion; the <option><flag override> values where enabled (but margin 0 for self-collisions). Ids: geom
    (-1, -1), flex (f1, f2), elem (e1, e2), vert (-1, -1).
  - Order: flex : flex pairs in the broadphase order, self-collisions after every other contact ('narrow' in
    (e1, e2) loop order, the others in their midphase's).
  - Jacobian: each side is its element's vertex bodies weighted by the barycentric coordinates of the element point
    nearest to the contact point (as a geom-element contact's flex side, `flex.contact_body_weights`);
    diagApprox sums both sides' weighted body_invweight0. No mjMAXCONPAIR selection, but for a pair with an
    interpolated flex: its sides' cell nodes at the contact's interpolation weights, and at most 50 contacts kept
    (collision/flex_cap.py).

Here each (f1, f2) pair of flexes (f1 == f2 for self-collisions) is one static group: the table of its candidate
element pairs (P of them: O(nelem^2), e.g. 39803 for the self-collisions of MuJoCo's 288-triangle flag), then per step
  1. a broadphase over the whole table by the element boxes (vectorised, P x 6 comparisons) keeps the first `k`
     overlapping pairs, k = min(P, Config.flex_pairs_per_elem (default 8) x the mean element count of the two flexes);
  2. edges and triangles: a facet test (elem_elem.separated: an element's faces and in-plane edge normals) leaves
     out the pairs apart by more than the radii and margin, and the first 2 ncon of the rest go to the collider;
     tetrahedra: all k;
  3. the closed-form collider (elem_elem.collide; capsule-capsule for two edges), and the first `ncon` rows in
     contact take the group's contact slots, ncon = Config.flex_contacts_per_elem (default 2) x the mean element
     count (at most k x rows).
More pairs than a stage's budget set the overflow flag (d.warning_number[Warning.CONTACTFULL]); nothing is dropped
silently. Groups with more than types.FLEX_MAX_ELEM_PAIRS element pairs are refused at load (mjcf/flex.py). The
constraint rows grow with ncon, the collider's work with 2 ncon. MuJoCo's flag at a folded state (107 self contacts,
CPU float32, batch 1): this group 304 ms -> 4 ms, the step 572 -> 48 ms against GJK/EPA on all k = 2304 pairs in
2304 contact slots.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision import elem_elem, flex_cap, flex_elem, primitive
from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.types import NOCONTACT, mix_params
from mjx_lite.types import DisableBit, EnableBit, Model

__all__ = ["Group", "capacity", "contacts", "groups", "slot_condim"]


class Group(NamedTuple):
    """The element pairs of flexes f1 <= f2 (f1 == f2: self-collisions): their dims, the candidate pairs e1 (P,),
    e2 (P,) (local element ids; e1 < e2 for self-collisions, in MuJoCo's loop order), the pairs `k` collided per
    step and the contact slots `ncon`; a pair with an interpolated flex keeps at most `cap` of its `ncand` candidate
    contacts (collision/flex_cap.py; cap 0: no cap, ncand = ncon)."""

    f1: int
    f2: int
    dim1: int
    dim2: int
    e1: np.ndarray
    e2: np.ndarray
    k: int
    ncon: int
    cap: int = 0
    ncand: int = 0

    @property
    def rows(self) -> int:
        """Contact rows per pair: capsule-capsule 2 (parallel edges), the others 1."""
        return 2 if self.dim1 == self.dim2 == 1 else 1


def _elements(m: Model, f: int) -> np.ndarray:
    """(elemnum, dim + 1) local vertex ids of the elements of flex f."""
    dim, adr, num = int(m.flex_dim[f]), int(m.flex_elemdataadr[f]), int(m.flex_elemnum[f])
    return np.asarray(m.flex_elem)[adr : adr + num * (dim + 1)].reshape(num, dim + 1)


def candidate_pairs(m: Model, f1: int, f2: int) -> tuple[np.ndarray, np.ndarray]:
    """Static (e1, e2) (P,) each: the element pairs of flexes f1, f2 with no vertex body in common; for f1 == f2 the
    active ones (tetrahedra: flex_elemlayer < flex_activelayers) with e1 < e2."""
    bodies = []
    nbody = max(int(np.asarray(m.flex_vertbodyid).max(initial=0)) + 1, 1)
    for k, f in enumerate((f1, f2)):
        b = np.asarray(m.flex_vertbodyid)[int(m.flex_vertadr[f]) + _elements(m, f)]
        # vertices of an interpolated flex are on no body (-1): a column of their own, shared by no other flex
        bodies.append(np.where(b < 0, nbody + k, b))
    ids1, ids2 = np.arange(len(bodies[0])), np.arange(len(bodies[1]))
    if f1 == f2:
        if int(m.flex_dim[f1]) == 3:
            layer = np.asarray(m.flex_elemlayer)[int(m.flex_elemadr[f1]) : int(m.flex_elemadr[f1]) + len(ids1)]
            ids1 = ids2 = ids1[layer < int(m.flex_activelayers[f1])]
    nb = max(int(b.max()) + 1 if b.size else 1 for b in bodies)

    def incidence(b, ids):  # (n, nbody) element-body incidence
        out = np.zeros((len(ids), nb), np.int32)
        np.put_along_axis(out, b[ids], 1, axis=1)
        return out

    share = (incidence(bodies[0], ids1) @ incidence(bodies[1], ids2).T) > 0
    if f1 == f2:
        i1, i2 = np.triu_indices(len(ids1), 1)
    else:
        i1, i2 = (x.reshape(-1) for x in np.meshgrid(np.arange(len(ids1)), np.arange(len(ids2)), indexing="ij"))
    keep = ~share[i1, i2]
    return ids1[i1[keep]].astype(np.int64), ids2[i2[keep]].astype(np.int64)


def flex_pairs(m: Model) -> list[tuple[int, int]]:
    """Static (f1, f2) of the flex pairs that collide: (f, f) for self-collisions (not rigid, contype & conaffinity,
    selfcollide != 'none'), (f1, f2), f1 < f2, whose contype/conaffinity match; none with contacts disabled."""
    if m.nflex == 0 or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
        return []
    ct, ca = np.asarray(m.flex_contype), np.asarray(m.flex_conaffinity)
    rigid, mode = np.asarray(m.flex_rigid), np.asarray(m.flex_selfcollide)
    out = []
    for f1 in range(m.nflex):
        for f2 in range(f1, m.nflex):
            if f1 == f2:
                if not rigid[f1] and ct[f1] & ca[f1] and mode[f1] != 0:
                    out.append((f1, f1))
            elif (ct[f1] & ca[f2]) or (ct[f2] & ca[f1]):
                out.append((f1, f2))
    return out


def groups(m: Model) -> tuple[Group, ...]:
    """Static groups, one per colliding flex pair with candidate element pairs: the pairs of two flexes first, then
    the self-collisions, each in flex order."""

    def build(m):
        out = []
        for f1, f2 in sorted(flex_pairs(m), key=lambda p: (p[0] == p[1], p)):
            e1, e2 = candidate_pairs(m, f1, f2)
            if not len(e1):
                continue
            if f1 == f2:  # the elements that take part (tetrahedra: the active layers)
                mean = len(np.unique(np.concatenate([e1, e2])))
            else:
                mean = 0.5 * (int(m.flex_elemnum[f1]) + int(m.flex_elemnum[f2]))
            k = min(len(e1), max(1, math.ceil(m.config.flex_pairs_per_elem * mean)))
            dim1, dim2 = int(m.flex_dim[f1]), int(m.flex_dim[f2])
            rows = 2 if dim1 == dim2 == 1 else 1
            ncon = min(k * rows, max(1, math.ceil(m.config.flex_contacts_per_elem * mean)))
            interp = np.asarray(m.flex_interp)
            cap = flex_cap.MAXCONPAIR if f1 != f2 and (interp[f1] or interp[f2]) else 0
            out.append(Group(f1, f2, dim1, dim2, e1, e2, k, min(ncon, cap) if cap else ncon, cap, ncon))
        return tuple(out)

    return static_memo(m, "flex_flex_groups", build)


def capacity(m: Model) -> int:
    """Static number of flex-flex contact slots (after the flex module's geom-flex slots)."""
    return sum(g.ncon for g in groups(m))


def _slot_flexes(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (f1, f2) of every slot."""
    z = [np.zeros(0, np.int64)]
    return (np.concatenate(z + [np.full(g.ncon, g.f1, np.int64) for g in groups(m)]),
            np.concatenate(z + [np.full(g.ncon, g.f2, np.int64) for g in groups(m)]))  # fmt: skip


def slot_condim(m: Model) -> np.ndarray:
    """Static condim of every flex-flex slot (mj_contactParam: the higher priority's, else the larger)."""
    f1, f2 = _slot_flexes(m)
    p1, p2 = np.asarray(m.flex_priority)[f1], np.asarray(m.flex_priority)[f2]
    c1, c2 = np.asarray(m.flex_condim)[f1], np.asarray(m.flex_condim)[f2]
    return np.where(p1 > p2, c1, np.where(p1 < p2, c2, np.maximum(c1, c2))).astype(np.int64)


def _margins(m: Model, f1: np.ndarray, f2: np.ndarray) -> tuple[jax.Array, jax.Array]:
    """(margin, gap) (n,) of slots of the flexes f1, f2: the sums of the two flexes' (<option><flag override>: the
    override margin), 0 for self-collisions (MuJoCo ignores them there)."""
    margin = m.flex_margin[f1] + m.flex_margin[f2]
    if m.opt.enableflags & EnableBit.OVERRIDE:
        margin = jp.broadcast_to(m.opt.o_margin, margin.shape)
    gap = m.flex_gap[f1] + m.flex_gap[f2]
    self_ = jp.asarray(f1 == f2)
    return jp.where(self_, 0.0, margin), jp.where(self_, 0.0, gap)


def _select(over: jax.Array, k: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(rows (k,) int: the first k candidates with `over`, live (k,), overflow ()) of a (P,) bool broadphase."""
    if k >= over.shape[0]:
        return jp.arange(over.shape[0]), over, jp.zeros((), bool)
    (rows,) = jp.nonzero(over, size=k, fill_value=0)
    count = jp.sum(over)
    return rows, jp.arange(k) < count, count > k


def _group(m: Model, d: types.Data, g: Group, margin: jax.Array, gap: jax.Array):
    """(dist (n,), pos (n, 3), normal (n, 3), active (n,), e1 (n,), e2 (n,), overflow ()) of one group's contacts,
    n = g.ncon; margin, gap: () detection margin and gap of the group."""
    xs, boxes = [], []
    for f in (g.f1, g.f2):
        x = d.flexvert_xpos[int(m.flex_vertadr[f]) + _elements(m, f)]  # (num, dim + 1, 3)
        r = m.flex_radius[f]
        xs.append(x)
        boxes.append((jp.min(x, axis=1) - r, jp.max(x, axis=1) + r))  # element boxes (flexelem_aabb)
    (lo1, hi1), (lo2, hi2) = boxes
    e1, e2 = jp.asarray(g.e1, jp.int32), jp.asarray(g.e2, jp.int32)
    mg = margin + gap
    over = jp.all((lo1[e1] <= hi2[e2] + mg) & (lo2[e2] <= hi1[e1] + mg), axis=1)  # (P,) filterBox
    rows, live, overflow = _select(over, g.k)
    a, b = e1[rows], e2[rows]
    r1, r2 = m.flex_radius[g.f1], m.flex_radius[g.f2]
    if g.dim1 == g.dim2 == 1:

        def one(x1, x2, ok):
            c = primitive.capsule_capsule(flex_elem._edge_capsule(x1, r1), flex_elem._edge_capsule(x2, r2), mg)
            return c.dist, c.pos, c.normal, ok & (c.dist < NOCONTACT)

        dist, pos, nrm, act = jax.vmap(one)(xs[0][a], xs[1][b], live)
    elif max(g.dim1, g.dim2) <= 2:  # edges and triangles: a facet test, then the collider on 2 ncon of the rest
        x1, x2 = xs[0][a], xs[1][b]
        near = live & ~elem_elem.separated(g.dim1, g.dim2, x1, x2, r1 + r2 + mg)
        keep, live, full = _select(near, min(g.k, 2 * (g.ncand or g.ncon)))
        dist, pos, nrm = elem_elem.collide(g.dim1, g.dim2, x1[keep], x2[keep], r1, r2)
        act, a, b = live & (dist < mg), a[keep], b[keep]
        overflow = overflow | full
    else:  # tetrahedra: the closed-form collider on all k pairs
        dist, pos, nrm = elem_elem.collide(g.dim1, g.dim2, xs[0][a], xs[1][b], r1, r2)
        act = live & (dist < mg)
    dist, pos, nrm, act = dist.reshape(-1), pos.reshape(-1, 3), nrm.reshape(-1, 3), act.reshape(-1)
    a, b = jp.repeat(a, g.rows), jp.repeat(b, g.rows)
    if g.cap:  # an interpolated pair: the first ncand rows in contact are the candidates, `cap` of them kept
        if g.ncand < act.shape[0]:
            keep, act, full = _select(act, g.ncand)
            dist, pos, nrm, a, b = dist[keep], pos[keep], nrm[keep], a[keep], b[keep]
            overflow = overflow | full
        act = flex_cap.spread(dist, pos, act, g.cap)
    if g.ncon < act.shape[0]:  # the first g.ncon rows in contact take the slots
        keep, act, full = _select(act, g.ncon)
        dist, pos, nrm, a, b = dist[keep], pos[keep], nrm[keep], a[keep], b[keep]
        overflow = overflow | full
    return dist, pos, nrm, act, a, b, overflow


def contacts(m: Model, d: types.Data) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(overflow (), contact fields (capacity(m) rows, Data.contact's layout)) of the flex-flex contacts."""
    dtype = d.geom_xpos.dtype
    gs = groups(m)
    f1, f2 = _slot_flexes(m)
    n = len(f1)
    margin, gap = _margins(m, f1, f2)
    starts = np.cumsum([0] + [g.ncon for g in gs])
    parts = [_group(m, d, g, margin[s], gap[s]) for g, s in zip(gs, starts)]
    dist, pos, nrm, active, e1, e2 = (jp.concatenate([p[i] for p in parts]) for i in range(6))
    overflow = jp.any(jp.stack([p[6] for p in parts]))
    fp = np.asarray(m.flex_priority)
    friction, solref, solimp = mix_params(
        (fp[f1], m.flex_solmix[f1], m.flex_solref[f1], m.flex_solimp[f1], m.flex_friction[f1]),
        (fp[f2], m.flex_solmix[f2], m.flex_solref[f2], m.flex_solimp[f2], m.flex_friction[f2]))  # fmt: skip
    if m.opt.enableflags & EnableBit.OVERRIDE:
        solref = jp.broadcast_to(m.opt.o_solref, (n, 2))
        solimp = jp.broadcast_to(m.opt.o_solimp, (n, 5))
        friction = jp.broadcast_to(m.opt.o_friction, (n, 5))
    friction = jp.maximum(friction, types.MINMU)
    frame = make_frame(nrm, jp.zeros_like(nrm))
    eye = jp.broadcast_to(jp.eye(3, dtype=dtype), (n, 3, 3))
    side = np.full(n, -1)
    dist = jp.where(active, dist, NOCONTACT).astype(dtype)
    return overflow, dict(
        dist=dist,
        pos=jp.where(active[:, None], pos, 0.0).astype(dtype),
        frame=jp.where(active[:, None, None], frame, eye).astype(dtype),
        includemargin=margin.astype(dtype),  # (MuJoCo 4.0: the margin, the gap not taken off)
        friction=friction.astype(dtype),
        solref=solref.astype(dtype),
        solreffriction=jp.zeros((n, 2), dtype),
        solimp=solimp.astype(dtype),
        dim=jp.asarray(slot_condim(m), jp.int32),
        adhesion=jp.zeros(n, dtype),
        geom=jp.asarray(np.stack([side, side], -1), jp.int32),
        flex=jp.asarray(np.stack([f1, f2], -1), jp.int32),
        elem=jp.stack([e1, e2], -1).astype(jp.int32),
        vert=jp.asarray(np.stack([side, side], -1), jp.int32),
        efc_address=jp.full((n,), -1, jp.int32),
        active=active,
    )
