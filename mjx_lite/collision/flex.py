"""Flex contacts: flex vertices against planes (MuJoCo 4.0's mj_collidePlaneFlex), the flex part of mj_collision.

Static layout: every (plane geom g, flex f) pair that MuJoCo collides (geom-level contype/conaffinity filter, the
plane on a body welded to the world, as mj_collideTree calls mj_collidePlaneFlex) owns flex_vertnum[f] consecutive
contact slots after the geom-geom groups of the collision driver, one per vertex in vertex order.
Per vertex v (flexvert_xpos x, plane position p and normal n = the plane's z axis, flex radius r):
dist_v = (x - p).n; a contact when dist_v <= margin + gap + r, with dist = dist_v - r, pos = x - (dist/2 + r) n,
frame from the normal (mju_makeFrame), geom = (g, -1), flex = (-1, f), vert = (-1, v); the contact parameters mix
the geom's and the flex's (priority, condim, solmix, friction) as mj_contactParam, margin and gap add up.
Every vertex gets its slot: MuJoCo 4.0 keeps all the vertex contacts of a plane-flex pair (checked against it with
64 and 100 vertices on a plane in tests/test_flex.py), no selection of mjMAXCONPAIR = 50 as for other pairs.
Contacts of flexes with other geom types and flex self-collisions are refused at load (mjcf/flex.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.types import NOCONTACT
from mjx_lite.types import DisableBit, EnableBit, GeomType, Model

MAXCONPAIR = 50  # mjMAXCONPAIR: contacts MuJoCo keeps per geom-flex pair

__all__ = ["MAXCONPAIR", "capacity", "contact_bodies", "contacts", "plane_pairs", "slot_condim"]


def plane_pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (plane geom ids, flex ids) of the plane-flex pairs that collide, plane-major (body order, then flex)."""

    def build(m):
        gs, fs = [], []
        if m.nflex == 0 or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        gtype, gct, gca = np.asarray(m.geom_type), np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
        fct, fca = np.asarray(m.flex_contype), np.asarray(m.flex_conaffinity)
        for g in range(m.ngeom):
            if gtype[g] != GeomType.PLANE or not plane_is_static(m, g):
                continue
            for f in range(m.nflex):
                if (gct[g] & fca[f]) or (fct[f] & gca[g]):
                    gs.append(g)
                    fs.append(f)
        return np.asarray(gs, np.int64), np.asarray(fs, np.int64)

    return static_memo(m, "flex_plane_pairs", build)


def plane_is_static(m: Model, g: int) -> bool:
    """The plane geom g is on a body welded to a dof-less body (MuJoCo's plane-flex test applies there)."""
    b = int(np.asarray(m.geom_bodyid)[g])
    w = int(np.asarray(m.body_weldid)[b])
    return int(np.asarray(m.body_dofnum)[w]) == 0


def _slots(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static per slot: plane geom, flex, local vertex."""

    def build(m):
        gs, fs = plane_pairs(m)
        num = np.asarray(m.flex_vertnum)
        g = np.concatenate([np.full(num[f], gi) for gi, f in zip(gs, fs)] + [np.zeros(0, np.int64)])
        f = np.concatenate([np.full(num[fi], fi) for fi in fs] + [np.zeros(0, np.int64)])
        v = np.concatenate([np.arange(num[fi]) for fi in fs] + [np.zeros(0, np.int64)])
        return g.astype(np.int64), f.astype(np.int64), v.astype(np.int64)

    return static_memo(m, "flex_plane_slots", build)


def capacity(m: Model) -> int:
    """Static number of flex contact slots."""
    return int(_slots(m)[0].shape[0])


def slot_condim(m: Model) -> np.ndarray:
    """Static condim of every flex contact slot (mj_contactParam: the higher priority's, else the larger)."""
    g, f, _ = _slots(m)
    p1, p2 = np.asarray(m.geom_priority)[g], np.asarray(m.flex_priority)[f]
    c1, c2 = np.asarray(m.geom_condim)[g], np.asarray(m.flex_condim)[f]
    return np.where(p1 > p2, c1, np.where(p1 < p2, c2, np.maximum(c1, c2))).astype(np.int64)


def _params(m: Model, g: np.ndarray, f: np.ndarray):
    """(margin, gap, friction (n, 5), solref (n, 2), solimp (n, 5)) of geom-flex slots, as mj_contactParam."""
    p1, p2 = np.asarray(m.geom_priority)[g], np.asarray(m.flex_priority)[f]
    hi1, hi2 = jp.asarray(p1 > p2), jp.asarray(p1 < p2)
    same = ~(hi1 | hi2)
    s1, s2 = m.geom_solmix[g], m.flex_solmix[f]
    big1, big2 = s1 >= types.MINVAL, s2 >= types.MINVAL
    mix = jp.where(big1 & big2, s1 / jp.where(big1 & big2, s1 + s2, 1.0),
                   jp.where(~big1 & ~big2, 0.5, jp.where(~big1, 0.0, 1.0)))  # fmt: skip
    mix = jp.where(hi1, 1.0, jp.where(hi2, 0.0, mix))
    r1, r2 = m.geom_solref[g], m.flex_solref[f]
    both_std = (r1[:, :1] > 0) & (r2[:, :1] > 0)
    solref = jp.where(both_std | ~same[:, None], mix[:, None] * r1 + (1 - mix[:, None]) * r2, jp.minimum(r1, r2))
    solimp = mix[:, None] * m.geom_solimp[g] + (1 - mix[:, None]) * m.flex_solimp[f]
    f1, f2 = m.geom_friction[g], m.flex_friction[f]
    fr = jp.where(same[:, None], jp.maximum(f1, f2), jp.where(hi1[:, None], f1, f2))
    friction = jp.stack([fr[:, 0], fr[:, 0], fr[:, 1], fr[:, 2], fr[:, 2]], axis=-1)
    margin = m.geom_margin[g] + m.flex_margin[f]
    gap = m.geom_gap[g] + m.flex_gap[f]
    if m.opt.enableflags & EnableBit.OVERRIDE:
        n = len(g)
        margin = jp.broadcast_to(m.opt.o_margin, (n,))
        solref = jp.broadcast_to(m.opt.o_solref, (n, 2))
        solimp = jp.broadcast_to(m.opt.o_solimp, (n, 5))
        friction = jp.broadcast_to(m.opt.o_friction, (n, 5))
    return margin, gap, jp.maximum(friction, types.MINMU), solref, solimp


def contacts(m: Model, d: types.Data) -> dict[str, jax.Array]:
    """Contact fields (capacity(m) rows, Data.contact's layout) of the flex vertices against planes."""
    g, f, v = _slots(m)
    dtype = d.geom_xpos.dtype
    x = d.flexvert_xpos[np.asarray(m.flex_vertadr)[f] + v]
    nrm = d.geom_xmat[g][:, :, 2]
    r = m.flex_radius[f]
    margin, gap, friction, solref, solimp = _params(m, g, f)
    dist_v = jp.sum((x - d.geom_xpos[g]) * nrm, axis=-1)
    active = dist_v <= margin + gap + r
    dist = dist_v - r
    pos = x - (0.5 * dist + r)[:, None] * nrm
    frame = make_frame(nrm, jp.zeros_like(nrm))
    n = len(g)
    eye = jp.broadcast_to(jp.eye(3, dtype=dtype), (n, 3, 3))
    return dict(
        dist=jp.where(active, dist, NOCONTACT).astype(dtype),
        pos=jp.where(active[:, None], pos, 0.0).astype(dtype),
        frame=jp.where(active[:, None, None], frame, eye).astype(dtype),
        includemargin=margin.astype(dtype),
        friction=friction.astype(dtype),
        solref=solref.astype(dtype),
        solreffriction=jp.zeros_like(solref).astype(dtype),
        solimp=solimp.astype(dtype),
        dim=jp.asarray(slot_condim(m), jp.int32),
        geom=jp.asarray(np.stack([g, np.full(n, -1)], -1), jp.int32),
        flex=jp.asarray(np.stack([np.full(n, -1), f], -1), jp.int32),
        vert=jp.asarray(np.stack([np.full(n, -1), v], -1), jp.int32),
        efc_address=jp.full((n,), -1, jp.int32),
        active=active,
    )


def contact_bodies(m: Model, con: types.Contact) -> tuple[jax.Array, jax.Array]:
    """The bodies (nconmax,) x 2 of the two sides of every contact row: the geom's body, or the body of the flex
    vertex (flex_vertbodyid) on a flex side."""
    gb = jp.asarray(np.asarray(m.geom_bodyid), jp.int32)
    out = []
    for side in range(2):
        g = con.geom[:, side]
        b = gb[jp.clip(g, 0, max(m.ngeom - 1, 0))] if m.ngeom else jp.zeros_like(g)
        if m.nflex:
            vadr = jp.asarray(np.asarray(m.flex_vertadr), jp.int32)
            vb = jp.asarray(np.asarray(m.flex_vertbodyid), jp.int32)
            fl = jp.maximum(con.flex[:, side], 0)
            vid = jp.clip(vadr[fl] + con.vert[:, side], 0, max(m.nflexvert - 1, 0))
            b = jp.where(g >= 0, b, vb[vid])
        out.append(b)
    return out[0], out[1]
