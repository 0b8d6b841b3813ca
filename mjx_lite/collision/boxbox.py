"""Box-box collider: separating axes, then face clipping or an edge-edge contact (up to 4 contacts).

Stage 1 (separating-axis test): the 15 candidate axes (3 face normals per box, 9 edge cross products). If the
boxes are separated by more than margin along any axis there is no contact. The axis of maximum separation
wins; face axes win near-ties against edge axes (relative bias EDGE_BIAS).
Stage 2: face axis -> the face's box is the reference; the incident face (the other box's face most
anti-parallel to the reference normal) is clipped against the reference face's four side planes
(Sutherland-Hodgman on fixed-size arrays); each clipped vertex within the margin band is a contact with dist
its height above the reference face and pos midway between the surfaces. Edge axis -> one contact at the
midpoint of the closest points of the two supporting edges, dist = separation along the axis. More than
MAXCON vertices would be reduced by maximising the manifold area keeping the deepest vertex (newer MuJoCo);
MuJoCo 4.0.0 keeps all of them (MAXCON = 8).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo, Ids, Mask, Points, Scalar, Values
from mjx_lite.types import MINVAL

MAXCON = 8  # MuJoCo 4.0.0 returns every clipped vertex in the band (up to 8); the area reduction is newer
EDGE_BIAS = 1e-6
_MAXVERT = 8


def _first_k(valid: Mask, k: int) -> tuple[jax.Array, Mask]:
    """(k, n) one-hot selection of the first k valid entries, and the (k,) mask of filled slots."""
    rank = jp.cumsum(valid) - 1
    sel = valid[None, :] & (rank[None, :] == jp.arange(k)[:, None])
    return sel, jp.any(sel, axis=1)


def _clip(verts: Points, valid: Mask, coord: int, sign: float, limit: Scalar) -> tuple[Points, Mask]:
    """Clip a polygon (verts (N,3) in order, the first n valid) by sign*v[coord] <= limit."""
    n = jp.sum(valid)
    nn = verts.shape[0]
    idx = jp.arange(nn)
    nxt = jp.where(idx + 1 >= n, 0, idx + 1)
    q = verts[nxt]
    dp = sign * verts[:, coord] - limit
    dq = dp[nxt]
    emit_p = valid & (dp <= 0)
    cross = valid & (((dp < 0) & (dq > 0)) | ((dp > 0) & (dq < 0)))  # strictly crossing, as MuJoCo
    den = jp.where(cross, dp - dq, 1.0)
    t = jp.where(cross, dp / den, 0.0)
    inter = verts + t[:, None] * (q - verts)
    cand = jp.stack([verts, inter], axis=1).reshape(2 * nn, 3)
    cvalid = jp.stack([emit_p, cross], axis=1).reshape(2 * nn)
    sel, ok = _first_k(cvalid, _MAXVERT)
    return sel.astype(verts.dtype) @ cand, ok


def _reduce(xy: jax.Array, depth: Values, valid: Mask) -> tuple[Ids, Mask]:
    """Select 4 of the valid vertices: first, farthest, max area x2, and the deepest. (4,) idx, (4,) ok."""
    n = jp.sum(valid)
    nn = xy.shape[0]
    chosen = jp.zeros(nn, bool).at[0].set(True)
    a = 0

    def pick(score, chosen):
        s = jp.where(valid & ~chosen, score, -jp.inf)
        i = jp.argmax(s)
        return i, chosen.at[i].set(True)

    b, chosen = pick(jp.sum((xy - xy[a]) ** 2, axis=1), chosen)

    def area(p, q):
        return jp.abs((xy[q, 0] - xy[p, 0]) * (xy[:, 1] - xy[p, 1]) - (xy[q, 1] - xy[p, 1]) * (xy[:, 0] - xy[p, 0]))

    c, chosen = pick(area(a, b), chosen)
    d, _ = pick(area(a, c) + area(b, c), chosen)
    deepest = jp.argmin(jp.where(valid, depth, jp.inf))
    d = jp.where(chosen[deepest], d, deepest)  # the deepest vertex must be in the manifold
    sel_many = jp.stack([jp.asarray(a), b, c, d])
    many = n > 4
    idx = jp.where(many, sel_many, jp.arange(4))
    ok = jp.where(many, True, jp.arange(4) < n)
    return idx, ok


def box_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    dt = g1.pos.dtype
    r1, r2, s1, s2 = g1.mat, g2.mat, g1.size, g2.size
    dif = g2.pos - g1.pos
    cr = jp.cross(r1.T[:, None, :], r2.T[None, :, :]).reshape(9, 3)  # axis i of box1 x axis j of box2
    crn2 = jp.sum(cr * cr, axis=-1, keepdims=True)
    edge_ok = crn2[:, 0] >= 1e-16  # nearly parallel edges: the direction is rounding noise (faces cover it)
    cr = cr / jp.sqrt(jp.where(edge_ok[:, None], crn2, 1.0))
    faces = jp.concatenate([r1.T, r2.T], axis=0)  # box1 x, y, z, box2 x, y, z
    axes = jp.concatenate([faces, cr], axis=0)  # (15, 3)
    ext = jp.abs(axes @ r1) @ s1 + jp.abs(axes @ r2) @ s2
    sep = jp.abs(axes @ dif) - ext
    separated = jp.any(jp.where(jp.concatenate([jp.ones(6, bool), edge_ok]), sep, -jp.inf) > margin)
    fbest = jp.argmax(sep[:6])
    fsep = sep[fbest]
    esep_all = jp.where(edge_ok, sep[6:], -jp.inf)
    ebest = jp.argmax(esep_all - EDGE_BIAS * jp.abs(jp.where(edge_ok, sep[6:], 0.0)))
    esep = esep_all[ebest]
    use_edge = (esep - EDGE_BIAS * jp.abs(esep) > fsep) & (esep > fsep)
    # an edge axis within ~8 degrees of the best face axis duplicates it: the face wins unless the edge separates
    # by 5% more
    face_dot = jp.abs(jp.dot(jp.take(cr, ebest, axis=0), jp.take(faces, fbest, axis=0)))
    alias = (face_dot > 0.99) & (esep < fsep + 0.05 * jp.abs(fsep) + MINVAL)
    use_edge = use_edge & ~alias

    # ---- face contact
    ref1 = fbest < 3
    k = fbest % 3
    pa, ra, sa = jp.where(ref1, g1.pos, g2.pos), jp.where(ref1, r1, r2), jp.where(ref1, s1, s2)
    pb, rb, sb = jp.where(ref1, g2.pos, g1.pos), jp.where(ref1, r2, r1), jp.where(ref1, s2, s1)
    na = jp.take(ra, k, axis=1)
    na = jp.where(jp.dot(na, pb - pa) < 0, -na, na)
    ku, kv = (k + 1) % 3, (k + 2) % 3
    u, v = jp.take(ra, ku, axis=1), jp.take(ra, kv, axis=1)
    su, sv = jp.take(sa, ku), jp.take(sa, kv)
    c = pa + na * jp.take(sa, k)
    dots = rb.T @ na
    j = jp.argmax(jp.abs(dots))
    fsign = -jp.sign(jp.take(dots, j))
    j1, j2 = (j + 1) % 3, (j + 2) % 3
    e1 = jp.take(rb, j1, axis=1) * jp.take(sb, j1)
    e2 = jp.take(rb, j2, axis=1) * jp.take(sb, j2)
    fc = pb + jp.take(rb, j, axis=1) * jp.take(sb, j) * fsign
    quad = jp.stack([fc + e1 + e2, fc - e1 + e2, fc - e1 - e2, fc + e1 - e2]) - c
    local = jp.stack([quad @ u, quad @ v, quad @ na], axis=-1)
    verts = jp.zeros((_MAXVERT, 3), dt).at[:4].set(local)
    valid = jp.arange(_MAXVERT) < 4
    for coord, sign, lim in ((0, 1.0, su), (0, -1.0, su), (1, 1.0, sv), (1, -1.0, sv)):
        verts, valid = _clip(verts, valid, coord, sign, lim)
    inband = valid & (verts[:, 2] <= margin)
    # drop near-duplicates produced by clipping at polygon corners
    dxy = jp.sum((verts[:, None, :2] - verts[None, :, :2]) ** 2, axis=-1)
    earlier = jp.tril(jp.ones((_MAXVERT, _MAXVERT), bool), -1)
    dupe = jp.any(earlier & inband[None, :] & (dxy < 1e-14 * (su * su + sv * sv)), axis=1)
    inband = inband & ~dupe
    sel, ok = _first_k(inband, _MAXVERT)
    verts = sel.astype(dt) @ verts
    if MAXCON < _MAXVERT:
        idx, fok = _reduce(verts[:, :2], verts[:, 2], ok)
        fv = verts[idx]
    else:
        fv, fok = verts, ok
    fdist = fv[:, 2]
    fpos = c + fv[:, :1] * u + fv[:, 1:2] * v + (0.5 * fv[:, 2:3]) * na
    fnormal = jp.where(ref1, na, -na)

    # ---- edge contact: clamped closest points of the two supporting edges
    i1, i2 = ebest // 3, ebest % 3
    n = jp.take(cr, ebest, axis=0)
    n = jp.where(jp.dot(n, dif) < 0, -n, n)
    m1 = jax.nn.one_hot(i1, 3, dtype=dt)
    m2 = jax.nn.one_hot(i2, 3, dtype=dt)
    c1 = g1.pos + r1 @ (jp.where(r1.T @ n >= 0, 1.0, -1.0) * s1 * (1 - m1))
    c2 = g2.pos + r2 @ (jp.where(r2.T @ n >= 0, -1.0, 1.0) * s2 * (1 - m2))
    d1, d2 = r1 @ m1, r2 @ m2
    h1, h2 = jp.dot(s1, m1), jp.dot(s2, m2)
    b = jp.dot(d1, d2)
    e = c2 - c1
    d1e, d2e = jp.dot(d1, e), jp.dot(d2, e)
    denom = 1 - b * b
    sp = jp.where(denom < MINVAL, 0.0, (d1e - b * d2e) / jp.where(denom < MINVAL, 1.0, denom))
    sp = jp.clip(sp, -h1, h1)
    tp = jp.clip(b * sp - d2e, -h2, h2)
    sp = jp.clip(d1e + b * tp, -h1, h1)
    w1, w2 = c1 + d1 * sp, c2 + d2 * tp
    edist = jp.dot(w2 - w1, n)
    epos = 0.5 * (w1 + w2)

    dist = jp.where(use_edge, jp.full(MAXCON, NOCONTACT, dt).at[0].set(edist), jp.where(fok, fdist, NOCONTACT))
    dist = jp.where(separated, NOCONTACT, dist)
    pos = jp.where(use_edge, jp.broadcast_to(epos, (MAXCON, 3)), fpos)
    normal = jp.broadcast_to(jp.where(use_edge, n, fnormal), (MAXCON, 3))
    return Contacts(dist, pos, normal, jp.zeros((MAXCON, 3), dt))
