"""Flex contacts, the flex part of mj_collision: flex vertices against planes (MuJoCo 4.0's mj_collidePlaneFlex) and
the elements of flexes against the convex geoms and height fields (mj_collideGeomElem).

Static layout, after the geom-geom groups of the collision driver:
  - every (plane geom g, flex f) pair that MuJoCo collides (geom-level contype/conaffinity filter, the plane on a body
    welded to the world, as mj_collideTree calls mj_collidePlaneFlex) owns flex_vertnum[f] consecutive slots, one
    per vertex in vertex order. Per vertex v (flexvert_xpos x, plane position p and normal n = the plane's z axis,
    flex radius r): dist_v = (x - p).n; a contact when dist_v <= margin + gap + r, with dist = dist_v - r,
    pos = x - (dist/2 + r) n, geom = (g, -1), flex = (-1, f), vert = (-1, v).
  - every (sphere/capsule/box geom g, element e of a dim 1 or 2 flex f) pair whose contype/conaffinity match owns
    flex_elem.ELEM_NCON[(type, dim)] slots (the rows of the collider in flex_elem.py), grouped by (geom type, dim);
    an element with a vertex on the geom's body is left out (MuJoCo skips it). geom = (g, -1), flex = (-1, f),
    elem = (-1, e), vert = (-1, -1). MuJoCo's broadphase and BVH midphase only prune pairs farther apart than the
    margin (element boxes include the flex radius), so every pair is tested here and its collider decides.
  - every (height-field geom g, element e) pair likewise owns the slots of its window of prisms
    (collision/flex_hfield.py), grouped by (height field, dim); same ids.
Frames from the normal (mju_makeFrame); the contact parameters mix the geom's and the flex's (priority, condim,
solmix, friction) as mj_contactParam, margin and gap add up. Every contact of a pair is kept: MuJoCo 4.0 selects no
mjMAXCONPAIR = 50 subset of a plane-flex or geom-flex pair (checked against it with 64 and 100 vertices on a plane in
tests/test_flex.py, and 118 contacts of a 6x6 cloth on a box). An element contact's constraint rows spread it over
the element's vertex bodies (`contact_body_weights`); a contact of an interpolated flex (vertex or element) spreads
over the node bodies of the cell at its parametric coordinates (mjx_lite/pipeline/flex_interp.py, MuJoCo's
mj_vertBodyWeight). Flex-flex contacts (self-collisions and pairs of flexes) are
collision/flex_flex.py's, their slots after these; SDF geoms are refused at load (mjcf/flex.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision import flex_elem, flex_flex, flex_hfield, hull
from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.types import NOCONTACT, GeomInfo, adhesive_dim, info_axes, mix_params
from mjx_lite.pipeline import flex_interp
from mjx_lite.types import DisableBit, EnableBit, GeomType, Model

MAXCONPAIR = 50  # mjMAXCONPAIR: contacts MuJoCo keeps per geom-flex pair

__all__ = ["ELEM_TYPES", "MAXCONPAIR", "capacity", "contact_bodies", "contact_body_weights", "contacts", "diag_weights",
           "elem_pairs",
           "elem_width", "plane_pairs", "slot_condim"]


def plane_pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (plane geom ids, flex ids) of the plane-flex pairs that collide, plane-major (body order, then flex)."""

    def build(m):
        gtype = np.asarray(m.geom_type)
        planes = [g for g in range(m.ngeom) if gtype[g] == GeomType.PLANE and plane_is_static(m, g)]
        return flex_hfield.geom_flex_pairs(m, planes)

    return static_memo(m, "flex_plane_pairs", build)


def plane_is_static(m: Model, g: int) -> bool:
    """The plane geom g is on a body welded to a dof-less body (MuJoCo's plane-flex test applies there)."""
    b = int(np.asarray(m.geom_bodyid)[g])
    w = int(np.asarray(m.body_weldid)[b])
    return int(np.asarray(m.body_dofnum)[w]) == 0


ELEM_TYPES = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX,
              GeomType.MESH)  # geoms collided with flex elements (`flex_elem.ELEM_NCON` says with which dims)


def elem_pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (geom ids, flex ids) of the geom-flex pairs collided element by element (mj_collideGeomElem): a
    convex geom (ELEM_TYPES) and a flex whose contype/conaffinity match, the pair in `flex_elem.ELEM_NCON`;
    geom-major, then flex."""

    def build(m):
        gs, fs = [], []
        if m.nflex == 0 or m.opt.disableflags & (DisableBit.CONSTRAINT | DisableBit.CONTACT):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        gtype, gct, gca = np.asarray(m.geom_type), np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
        fct, fca, fdim = np.asarray(m.flex_contype), np.asarray(m.flex_conaffinity), np.asarray(m.flex_dim)
        for g in range(m.ngeom):
            if gtype[g] not in ELEM_TYPES:
                continue
            for f in range(m.nflex):
                if ((gct[g] & fca[f]) or (fct[f] & gca[g])) and (int(gtype[g]), int(fdim[f])) in flex_elem.ELEM_NCON:
                    gs.append(g)
                    fs.append(f)
        return np.asarray(gs, np.int64), np.asarray(fs, np.int64)

    return static_memo(m, "flex_elem_pairs", build)


def elem_data(m: Model, f: int) -> np.ndarray:
    """(elemnum, dim + 1) local vertex ids of the elements of flex f."""
    dim, adr, num = int(m.flex_dim[f]), int(m.flex_elemdataadr[f]), int(m.flex_elemnum[f])
    return np.asarray(m.flex_elem)[adr : adr + num * (dim + 1)].reshape(num, dim + 1)


def _elem_groups(m: Model) -> tuple[tuple[int, int, np.ndarray, np.ndarray, np.ndarray], ...]:
    """Static groups (geom type, flex dim, geom ids, flex ids, element ids) of the (geom, element) pairs, pair
    order within a group. An element with a vertex on the geom's body is left out (as MuJoCo skips it), and so is a
    tetrahedron below the flex's active layers (flex_elemlayer >= flex_activelayers: MuJoCo 4.0 skips it, with the
    midphase enabled or disabled)."""

    def build(m):
        groups: dict[tuple[int, int], list] = {}
        gtype = np.asarray(m.geom_type)
        for g, f in zip(*elem_pairs(m)):
            key = (int(gtype[g]), int(m.flex_dim[f]))
            for e in np.nonzero(_keep_elem(m, g, f))[0]:
                groups.setdefault(key, []).append((g, f, e))
        return tuple((t, dim, *(np.asarray(x, np.int64) for x in zip(*rows))) for (t, dim), rows in
                     sorted(groups.items()))  # fmt: skip

    return static_memo(m, "flex_elem_groups", build)


def _keep_elem(m: Model, g: int, f: int) -> np.ndarray:
    """(elemnum,) bool: the elements of flex f that MuJoCo collides with geom g: none with a vertex on g's body,
    and for tetrahedra only those of the active layers (flex_elemlayer < flex_activelayers)."""
    ed = elem_data(m, f)
    vbody, vadr = np.asarray(m.flex_vertbodyid), np.asarray(m.flex_vertadr)
    keep = ~np.any(vbody[vadr[f] + ed] == np.asarray(m.geom_bodyid)[g], axis=1)
    layer = np.asarray(m.flex_elemlayer)[int(m.flex_elemadr[f]) : int(m.flex_elemadr[f]) + len(ed)]
    return keep & (layer < int(m.flex_activelayers[f]))


def _hfield_groups(m: Model) -> tuple[flex_hfield.Group, ...]:
    """Static groups of the (height-field geom, element) pairs (collision/flex_hfield.py)."""
    return flex_hfield.groups(m, elem_data, _keep_elem)


def _slots(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static per slot: geom, flex, local vertex (plane slots; -1 otherwise), element (element slots; -1 otherwise).
    The plane slots first, then each element group's pairs, flex_elem.ELEM_NCON rows per pair, then each
    height-field group's pairs, its window's slots (`flex_hfield.Group.k`) per pair."""

    def build(m):
        gs, fs = plane_pairs(m)
        num = np.asarray(m.flex_vertnum)
        g = [np.full(num[f], gi) for gi, f in zip(gs, fs)]
        f = [np.full(num[fi], fi) for fi in fs]
        v = [np.arange(num[fi]) for fi in fs]
        e = [np.full(num[fi], -1) for fi in fs]
        for t, dim, gg, ff, ee in _elem_groups(m):
            k = flex_elem.ELEM_NCON[(t, dim)]
            g.append(np.repeat(gg, k))
            f.append(np.repeat(ff, k))
            v.append(np.full(len(gg) * k, -1))
            e.append(np.repeat(ee, k))
        for grp in _hfield_groups(m):
            n = len(grp.geom)
            g.append(np.repeat(grp.geom, grp.k))
            f.append(np.repeat(grp.flex, grp.k))
            v.append(np.full(n * grp.k, -1))
            e.append(np.repeat(grp.elem, grp.k))
        z = [np.zeros(0, np.int64)]
        return tuple(np.concatenate(x + z).astype(np.int64) for x in (g, f, v, e))

    return static_memo(m, "flex_slots", build)


def capacity(m: Model) -> int:
    """Static number of flex contact slots: the geom-flex slots (`_slots`), then the self-collision slots
    (collision/flex_flex.py)."""
    return int(_slots(m)[0].shape[0]) + flex_flex.capacity(m)


def slot_condim(m: Model) -> np.ndarray:
    """Static condim of every flex contact slot (mj_contactParam: the higher priority's, else the larger)."""
    g, f, _, _ = _slots(m)
    p1, p2 = np.asarray(m.geom_priority)[g], np.asarray(m.flex_priority)[f]
    c1, c2 = np.asarray(m.geom_condim)[g], np.asarray(m.flex_condim)[f]
    out = np.where(p1 > p2, c1, np.where(p1 < p2, c2, np.maximum(c1, c2))).astype(np.int64)
    return np.concatenate([out, flex_flex.slot_condim(m)])


def _params(m: Model, g: np.ndarray, f: np.ndarray):
    """(margin, gap, friction (n, 5), solref (n, 2), solimp (n, 5), adhesion (n,)) of geom-flex slots, as
    mj_contactParam."""
    p1, p2 = np.asarray(m.geom_priority)[g], np.asarray(m.flex_priority)[f]
    friction, solref, solimp = mix_params(
        (p1, m.geom_solmix[g], m.geom_solref[g], m.geom_solimp[g], m.geom_friction[g]),
        (p2, m.flex_solmix[f], m.flex_solref[f], m.flex_solimp[f], m.flex_friction[f]))
    hi2 = jp.asarray(p1 < p2)
    margin = m.geom_margin[g] + m.flex_margin[f]
    gap = m.geom_gap[g] + m.flex_gap[f]
    if m.opt.enableflags & EnableBit.OVERRIDE:
        n = len(g)
        margin = jp.broadcast_to(m.opt.o_margin, (n,))
        solref = jp.broadcast_to(m.opt.o_solref, (n, 2))
        solimp = jp.broadcast_to(m.opt.o_solimp, (n, 5))
        friction = jp.broadcast_to(m.opt.o_friction, (n, 5))
    # adhesion: the geom's (a flex has none), unless the flex has the higher priority
    adhesion = jp.where(hi2, 0.0, m.geom_adhesion[g])
    return margin, gap, jp.maximum(friction, types.MINMU), solref, solimp, adhesion


def contacts(m: Model, d: types.Data) -> tuple[jax.Array, dict[str, jax.Array]]:
    """(overflow (), contact fields (capacity(m) rows, Data.contact's layout)) of the flex vertices against planes,
    of the flex elements against the convex geoms and height fields, then of the flex-flex pairs and
    self-collisions (collision/flex_flex.py); overflow: an element outgrew its height-field window, or a flex pair
    had more overlapping element pairs than its slots (the driver counts it in CONTACTFULL)."""
    parts = []
    if len(_slots(m)[0]):
        parts.append(_geom_contacts(m, d))
    if flex_flex.groups(m):
        parts.append(flex_flex.contacts(m, d))
    if len(parts) == 1:
        return parts[0]
    (o1, c1), (o2, c2) = parts
    return o1 | o2, {k: jp.concatenate([c1[k], c2[k]]) for k in c1}


def _geom_contacts(m: Model, d: types.Data) -> tuple[jax.Array, dict[str, jax.Array]]:
    """`contacts` of the geom-flex slots (`_slots`)."""
    g, f, v, e = _slots(m)
    dtype = d.geom_xpos.dtype
    n = len(g)
    margin, gap, friction, solref, solimp, adhesion = _params(m, g, f)
    dist, pos, nrm, active = [], [], [], []
    nplane = int(np.sum(v >= 0))
    if nplane:  # flex vertices against planes (mj_collidePlaneFlex)
        gp, fp = g[:nplane], f[:nplane]
        x = d.flexvert_xpos[np.asarray(m.flex_vertadr)[fp] + v[:nplane]]
        pn = d.geom_xmat[gp][:, :, 2]
        r = m.flex_radius[fp]
        dist_v = jp.sum((x - d.geom_xpos[gp]) * pn, axis=-1)
        dist.append(dist_v - r)
        pos.append(x - (0.5 * (dist_v - r) + r)[:, None] * pn)
        nrm.append(pn)
        active.append(dist_v <= margin[:nplane] + gap[:nplane] + r)
    start = nplane
    for t, dim, gg, ff, ee in _elem_groups(m):  # flex elements against geoms (mj_collideGeomElem)
        k = flex_elem.ELEM_NCON[(t, dim)]
        sl = slice(start, start + k * len(gg))
        start = sl.stop
        x = _elem_xpos(m, d, ff, ee)
        det = (margin[sl] + gap[sl])[::k]

        def one(geom, xe, r, mg, t=t, dim=dim):
            return flex_elem.collide(t, dim, geom, xe, r, mg)

        info = _geom_info(m, d, gg, t)
        cd, cp, cn, ok = jax.vmap(one, in_axes=(info_axes(info), 0, 0, 0))(info, x, m.flex_radius[ff], det)
        dist.append(cd.reshape(-1))
        pos.append(cp.reshape(-1, 3))
        nrm.append(cn.reshape(-1, 3))
        active.append(ok.reshape(-1))
    overflow = jp.zeros((), bool)
    for grp in _hfield_groups(m):  # flex elements against height fields
        sl = slice(start, start + grp.k * len(grp.geom))
        start = sl.stop
        x = _elem_xpos(m, d, grp.flex, grp.elem)
        cd, cp, cn, ok, over = flex_hfield.collide_group(m, d, grp, x, (margin[sl] + gap[sl])[:: grp.k])
        dist.append(cd.reshape(-1))
        pos.append(cp.reshape(-1, 3))
        nrm.append(cn.reshape(-1, 3))
        active.append(ok.reshape(-1))
        overflow = overflow | over
    dist, pos, nrm, active = (jp.concatenate(a) for a in (dist, pos, nrm, active))
    frame = make_frame(nrm, jp.zeros_like(nrm))
    eye = jp.broadcast_to(jp.eye(3, dtype=dtype), (n, 3, 3))
    side = np.full(n, -1)
    dist = jp.where(active, dist, NOCONTACT).astype(dtype)
    adhesion = adhesion.astype(dtype) if m.flg_adhesion else jp.zeros(n, dtype)
    return overflow, dict(
        dist=dist,
        pos=jp.where(active[:, None], pos, 0.0).astype(dtype),
        frame=jp.where(active[:, None, None], frame, eye).astype(dtype),
        includemargin=margin.astype(dtype),
        friction=friction.astype(dtype),
        solref=solref.astype(dtype),
        solreffriction=jp.zeros_like(solref).astype(dtype),
        solimp=solimp.astype(dtype),
        dim=adhesive_dim(m, jp.asarray(slot_condim(m)[:n], jp.int32), dist, margin.astype(dtype), adhesion),
        adhesion=adhesion,
        geom=jp.asarray(np.stack([g, side], -1), jp.int32),
        flex=jp.asarray(np.stack([side, f], -1), jp.int32),
        elem=jp.asarray(np.stack([side, e], -1), jp.int32),
        vert=jp.asarray(np.stack([side, v], -1), jp.int32),
        efc_address=jp.full((n,), -1, jp.int32),
        active=active,
    )


def _elem_xpos(m: Model, d: types.Data, ff: np.ndarray, ee: np.ndarray) -> jax.Array:
    """(n, dim + 1, 3) vertex positions of the elements ee of the flexes ff (static (n,) ids, one dim)."""
    local = np.stack([elem_data(m, fi)[ei] for fi, ei in zip(ff, ee)])
    return d.flexvert_xpos[np.asarray(m.flex_vertadr)[ff][:, None] + local]


def _geom_info(m: Model, d: types.Data, gids: np.ndarray, gtype: int) -> GeomInfo:
    """The geoms gids (n,) of one element group as a vectorised GeomInfo; a mesh with its hull tables padded to the
    largest hull of the group's meshes (the collision driver's layout: per-pair rows, shared per-mesh tables)."""
    info = GeomInfo(d.geom_xpos[gids], d.geom_xmat[gids], m.geom_size[gids])
    if gtype != GeomType.MESH:
        return info
    mids = np.asarray(m.geom_dataid)[gids]
    return info._replace(**hull.geom_fields(m, mids, mids))


def _elem_vertices(m: Model, con: types.Contact, side: int, nv: int) -> jax.Array:
    """(nconmax, nv) global flex vertex ids of the element of every row's `side` (its first vertex repeated past
    dim + 1 and on rows without an element)."""
    fl = jp.maximum(con.flex[:, side], 0)
    el = jp.maximum(con.elem[:, side], 0)
    dim = jp.asarray(np.asarray(m.flex_dim), jp.int32)[fl]
    adr = jp.asarray(np.asarray(m.flex_elemdataadr), jp.int32)[fl] + el * (dim + 1)
    j = jp.minimum(jp.arange(nv)[None, :], dim[:, None])
    j = jp.where(jp.arange(nv)[None, :] <= dim[:, None], j, 0)
    nelem = max(int(np.asarray(m.flex_elem).shape[0]) - 1, 0)
    local = jp.asarray(np.asarray(m.flex_elem), jp.int32)[jp.clip(adr[:, None] + j, 0, nelem)]
    return jp.asarray(np.asarray(m.flex_vertadr), jp.int32)[fl][:, None] + local


def contact_bodies(m: Model, con: types.Contact) -> tuple[jax.Array, jax.Array]:
    """The bodies (nconmax,) x 2 of the two sides of every contact row: the geom's body, the body of the flex
    vertex (flex_vertbodyid) on a vertex side, the body of the element's first vertex on an element side (the
    constraint rows use `contact_body_weights`, which spreads an element contact over all its vertices)."""
    gb = jp.asarray(np.asarray(m.geom_bodyid), jp.int32)
    out = []
    for side in range(2):
        g = con.geom[:, side]
        b = gb[jp.clip(g, 0, max(m.ngeom - 1, 0))] if m.ngeom else jp.zeros_like(g)
        if m.nflex:
            vadr = jp.asarray(np.asarray(m.flex_vertadr), jp.int32)
            vb = jp.asarray(np.maximum(np.asarray(m.flex_vertbodyid), 0), jp.int32)  # (interpolated: the world)
            fl = jp.maximum(con.flex[:, side], 0)
            vid = jp.clip(vadr[fl] + con.vert[:, side], 0, max(m.nflexvert - 1, 0))
            if np.any(_slots(m)[3] >= 0) or flex_flex.groups(m):
                vid = jp.where(con.vert[:, side] >= 0, vid, _elem_vertices(m, con, side, 1)[:, 0])
            b = jp.where(g >= 0, b, vb[jp.clip(vid, 0, max(m.nflexvert - 1, 0))])
        out.append(b)
    return out[0], out[1]


def _side_widths(m: Model) -> tuple[int, int]:
    """Static (W2, W1): bodies of a contact row's second side (1 without element contacts, else the most vertices
    of a colliding element: 2 edges, 3 triangles, 4 tetrahedra; the nodes of a cell, 8 or 27, where an
    interpolated flex collides) and of its first side beyond body1 (the same for the first element of flex-flex
    contacts, collision/flex_flex.py; 0 without them)."""
    ff = flex_flex.groups(m)
    dims = [dim for _, dim, *_ in _elem_groups(m)] + [grp.dim for grp in _hfield_groups(m)] + [g.dim2 for g in ff]
    w2, w1 = (1 + max(dims) if dims else 1), (1 + max(g.dim1 for g in ff) if ff else 0)
    interp = np.asarray(m.flex_interp) if m.nflex else np.zeros(0, np.int64)
    npc = [(abs(int(interp[f])) + 1) ** 3 for f in _colliding_flexes(m) if interp[f]]
    if npc:
        w2 = max(w2, max(npc))
        w1 = max(w1, max(npc)) if ff else w1
    return w2, w1


def _colliding_flexes(m: Model) -> set[int]:
    """Static ids of the flexes with contact slots (against planes, geoms, height fields or flexes)."""
    out = {int(f) for f in _slots(m)[1]}
    for g in flex_flex.groups(m):
        out |= {int(f) for f in np.atleast_1d(g.f1)} | {int(f) for f in np.atleast_1d(g.f2)}
    return out


def elem_width(m: Model) -> int:
    """Static number of bodies on the second side of a contact row in `contact_body_weights`: 1 without element
    contacts, else the most vertices of a colliding element (2 for edges, 3 for triangles, 4 for tetrahedra), plus
    those of the first side's element with flex-flex contacts."""
    w2, w1 = _side_widths(m)
    return w2 + w1


def _elem_weights(m: Model, d: types.Data, con: types.Contact, side: int, w: int) -> tuple[jax.Array, jax.Array]:
    """(vertex bodies (nconmax, w), barycentric weights (nconmax, w)) of the element on `side` of every row at its
    point nearest to the contact point (zero weights past its dim + 1 vertices); where an interpolated flex is on
    that side, its vertices' node bodies and weights instead (`_interp_weights`)."""
    vid, wts = _elem_vertex_weights(m, d, con, side, w)
    bodies = jp.asarray(np.maximum(np.asarray(m.flex_vertbodyid), 0), jp.int32)[vid]
    if not _side_has_interp(m):
        return bodies, wts
    return _interp_weights(m, con, side, vid, wts, bodies, w)


def _side_has_interp(m: Model) -> bool:
    """Static: an interpolated flex has contact slots."""
    return bool(m.nflex) and any(int(np.asarray(m.flex_interp)[f]) for f in _colliding_flexes(m))


def _interp_weights(m: Model, con: types.Contact, side: int, vid: jax.Array, wts: jax.Array, bodies: jax.Array,
                    w: int) -> tuple[jax.Array, jax.Array]:
    """(bodies, weights) (nconmax, w) of `side` with the rows of interpolated flexes replaced by their nodes: the
    contact's parametric coordinates sum_k |wts_k| flex_vert0[vid_k] (the contact's vertex, or its element's
    vertices at barycentric weights), then the nodes of that cell at their interpolation weights (MuJoCo's
    mj_vertBodyWeight)."""
    fl = jp.maximum(con.flex[:, side], 0)
    vert0 = jp.asarray(np.asarray(m.flex_vert0), wts.dtype)
    coord = jp.einsum("nk,nkx->nx", jp.abs(wts), vert0[vid])
    nb, nw = flex_interp.vertex_weights(m, fl, coord, w)
    interp = jp.asarray(np.asarray(m.flex_interp) != 0)[fl] & (con.flex[:, side] >= 0)
    bodies, wts = _pad(bodies, wts, w)
    return jp.where(interp[:, None], nb, bodies), jp.where(interp[:, None], nw, wts)


def _elem_vertex_weights(m: Model, d: types.Data, con: types.Contact, side: int, w: int
                         ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """(global vertex ids (nconmax, w), barycentric weights (nconmax, w)) of the element on `side` of every row at
    its point nearest to the contact point (zero weights past its dim + 1 vertices)."""
    w = min(w, 4)
    vid = _elem_vertices(m, con, side, w)  # (n, w)
    x = d.flexvert_xpos[vid]  # (n, w, 3)
    dt = d.qpos.dtype
    dim = jp.asarray(np.asarray(m.flex_dim), jp.int32)[jp.maximum(con.flex[:, side], 0)]
    seg = jax.vmap(flex_elem.barycentric)(con.pos, x[:, :2])
    wts = jp.concatenate([seg, jp.zeros((seg.shape[0], w - 2), dt)], axis=1)
    for k in range(3, w + 1):  # triangles, tetrahedra
        bk = jax.vmap(flex_elem.barycentric)(con.pos, x[:, :k])
        wts = jp.where((dim == k - 1)[:, None], jp.concatenate([bk, jp.zeros((bk.shape[0], w - k), dt)], 1), wts)
    return vid, wts


def diag_weights(m: Model, con: types.Contact, w2: jax.Array) -> jax.Array:
    """(nconmax, W) the weights of `contact_body_weights`'s bodies2 in a contact row's diagApprox: |w2| (a flex-flex
    row's first side weighs -w there), but the signed node weights of an interpolated flex on either side (MuJoCo sums
    body_invweight0 times the shape function values, some negative for quadratic flexes; its first side's columns,
    the last W1, hold them negated)."""
    if not _side_has_interp(m):
        return jp.abs(w2)
    interp = jp.asarray(np.asarray(m.flex_interp) != 0)
    side1 = interp[jp.maximum(con.flex[:, 1], 0)] & (con.flex[:, 1] >= 0) & (con.geom[:, 1] < 0)
    wside2, wside1 = _side_widths(m)
    out = jp.where(side1[:, None], w2[:, :wside2], jp.abs(w2[:, :wside2]))
    if wside1:  # flex-flex rows: the first element's columns
        side0 = interp[jp.maximum(con.flex[:, 0], 0)] & (con.flex[:, 0] >= 0) & (con.elem[:, 0] >= 0)
        out = jp.concatenate([out, jp.where(side0[:, None], -w2[:, wside2:], jp.abs(w2[:, wside2:]))], axis=1)
    return out


def _pad(bodies: jax.Array, wts: jax.Array, w: int) -> tuple[jax.Array, jax.Array]:
    """bodies, wts (n, k) padded with body 0 / weight 0 to (n, w)."""
    k = bodies.shape[1]
    return jp.pad(bodies, ((0, 0), (0, w - k))), jp.pad(wts, ((0, 0), (0, w - k)))


def contact_body_weights(m: Model, d: types.Data, con: types.Contact
                         ) -> tuple[jax.Array, jax.Array, jax.Array]:  # fmt: skip
    """(body1 (nconmax,), bodies2 (nconmax, W), weights2 (nconmax, W)), W = elem_width(m): a contact row's Jacobian
    is sum_k weights2[k] J(bodies2[k]) - J(body1) at the contact point, its diagApprox the same sum of body_invweight0
    with |weights2|. An element side (MuJoCo 4.0) weighs the element's vertex bodies with the barycentric
    coordinates of the element point nearest to the contact point; every other side is one body of weight 1. A
    flex-flex row (an element on both sides) has body1 the world (no Jacobian) and its first element's bodies
    after the second's, with the negated weights."""
    b1, b2 = contact_bodies(m, con)
    w2, w1 = _side_widths(m)
    dt = d.qpos.dtype
    if w2 + w1 == 1:
        return b1, b2[:, None], jp.ones((b2.shape[0], 1), dt)
    bodies, wts = _elem_weights(m, d, con, 1, w2)
    bodies, wts = _pad(bodies, wts, w2)
    is_elem = (con.elem[:, 1] >= 0) & (con.vert[:, 1] < 0) & (con.geom[:, 1] < 0)
    one = jp.zeros((1, w2), dt).at[0, 0].set(1.0)
    wts = jp.where(is_elem[:, None], wts, one)
    bodies = jp.where(is_elem[:, None], bodies, b2[:, None])
    if _side_has_interp(m):  # a vertex of an interpolated flex: its cell's node bodies
        n = con.pos.shape[0]
        vadr = jp.asarray(np.asarray(m.flex_vertadr), jp.int32)
        vid = jp.clip(vadr[jp.maximum(con.flex[:, 1], 0)] + con.vert[:, 1], 0, max(m.nflexvert - 1, 0))
        vb, vw = _interp_weights(m, con, 1, vid[:, None], jp.ones((n, 1), dt), b2[:, None], w2)
        is_vert = (con.vert[:, 1] >= 0) & (con.geom[:, 1] < 0)
        bodies, wts = jp.where(is_vert[:, None], vb, bodies), jp.where(is_vert[:, None], vw, wts)
    if w1:
        is_self = (con.elem[:, 0] >= 0) & (con.vert[:, 0] < 0) & (con.geom[:, 0] < 0)
        bodies0, wts0 = _pad(*_elem_weights(m, d, con, 0, w1), w1)
        bodies = jp.concatenate([bodies, jp.where(is_self[:, None], bodies0, 0)], axis=1)
        wts = jp.concatenate([wts, jp.where(is_self[:, None], -wts0, 0.0)], axis=1)
        b1 = jp.where(is_self, 0, b1)
    return b1, bodies, wts
