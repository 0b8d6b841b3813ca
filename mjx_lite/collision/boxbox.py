"""Box-box collider: separating axes, then face clipping or an edge-edge contact (up to 8 contacts).

Everything is computed in box1's frame, as MuJoCo does (rot = mat1^T mat2: box2's axes in box1's frame; pos21 =
mat1^T (pos2 - pos1), pos12 = mat2^T (pos1 - pos2)), with MuJoCo's operation order, so that touching boxes (distance
0 up to round-off, e.g. the closed fingers of a gripper) are decided as MuJoCo decides them.

Stage 1 (separating-axis test): the 15 candidate axes (3 face normals per box, 9 edge cross products; an edge pair
whose sin^2 is below PAREPS is skipped, the face axes cover it). If the boxes are separated along any axis by more
than septol = margin + SEPEPS * (sum of the six half-sizes) -- slack for the rounding of the supports -- there is no
contact. The face axis of maximum separation is found first; an edge axis wins only if it beats the running best
by a relative bias (EDGE_BIAS) and the best face, and an edge within ~8 degrees of the best face axis is replaced by
that face unless it separates by 5% more.
Stage 2: face axis -> the face's box is the reference; the incident face (the other box's face most anti-parallel to
the reference normal) is written in the reference face's coordinates (x, y in the face, z the height above it),
clipped against the face's four side planes (Sutherland-Hodgman on fixed-size arrays), and each clipped vertex with
z <= margin (near-duplicates dropped) is a contact with dist z and pos midway between the surfaces. Edge axis -> one
contact at the midpoint of the closest points of the two supporting edges (both corners tried where the axis makes
the choice ambiguous), dist = separation along the axis, none if that exceeds septol. More than MAXCON vertices
would be reduced by maximising the manifold area keeping the deepest vertex (newer MuJoCo); MuJoCo 4.0.0 keeps all
of them (MAXCON = 8).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo, Ids, Mask, Points, Scalar, Values
from mjx_lite.types import MINVAL

MAXCON = 8  # MuJoCo 4.0.0 returns every clipped vertex in the band (up to 8); the area reduction is newer
EDGE_BIAS = 1e-6
_MAXVERT = 8
# rounding scales (MuJoCo's, per precision): slack of the separation tests per unit of summed half-size; sin^2
# below which an edge-cross axis is noise; axis component below which a supporting edge's corner is ambiguous;
# squared relative radius of clip-vertex deduplication
_EPS64 = {"sep": 1e-13, "par": 1e-16, "sgn": 1e-9, "dup": 1e-14}
_EPS32 = {"sep": 1e-6, "par": 1e-7, "sgn": 1e-5, "dup": 1e-10}
_NEXT1 = (1, 2, 0)  # (i + 1) % 3
_NEXT2 = (2, 0, 1)  # (i + 2) % 3


def _mtv(m: jax.Array, v: jax.Array, one: Scalar) -> jax.Array:
    """m^T v for (3, 3) m and (3,) v, summed in MuJoCo's order (mji_mulMatTVec3); `one`: see `_unfused_one`."""
    return (m[0] * v[0]) * one + (m[1] * v[1]) * one + (m[2] * v[2]) * one


def _mv(m: jax.Array, v: jax.Array, one: Scalar) -> jax.Array:
    """m v for (3, 3) m and (3,) v, summed in MuJoCo's order (mji_mulMatVec3)."""
    return (m[:, 0] * v[0]) * one + (m[:, 1] * v[1]) * one + (m[:, 2] * v[2]) * one


def _dot3(a: jax.Array, b: jax.Array, one: Scalar) -> jax.Array:
    """a . b over the last axis (size 3), summed in MuJoCo's order."""
    return (a[..., 0] * b[..., 0]) * one + (a[..., 1] * b[..., 1]) * one + (a[..., 2] * b[..., 2]) * one


def _unfused_one(x: Scalar) -> Scalar:
    """1 (x's dtype), as a value the compiler cannot see: XLA (CPU and GPU, through LLVM) contracts a product that
    feeds an addition into one fused multiply-add, which rounds once where MuJoCo's C rounds twice; on touching boxes
    that flips the sign of a 1e-17 distance, hence contact or none. Multiplying the rounded product by this `one`
    makes the product the last multiply's operand: a contraction of `(a * b) * one + c` is fma(round(a b), 1, c),
    MuJoCo's round(round(a b) + c). NaN where x is NaN (the result is then NaN anyway); no gradient."""
    return jax.lax.stop_gradient(jp.where(jp.isnan(x), x, jp.ones((), x.dtype)))


def _first_k(valid: Mask, k: int) -> tuple[Ids, Mask]:
    """(k,) indices of the first k valid entries (in order), and the (k,) mask of filled slots."""
    rank = jp.cumsum(valid) - 1
    sel = valid[None, :] & (rank[None, :] == jp.arange(k)[:, None])
    return jp.argmax(sel, axis=1), jp.any(sel, axis=1)


def _clip(verts: Points, valid: Mask, coord: int, sign: float, limit: Scalar, one: Scalar) -> tuple[Points, Mask]:
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
    inter = verts + (t[:, None] * (q - verts)) * one
    cand = jp.stack([verts, inter], axis=1).reshape(2 * nn, 3)
    cvalid = jp.stack([emit_p, cross], axis=1).reshape(2 * nn)
    sel, ok = _first_k(cvalid, _MAXVERT)
    return cand[sel], ok


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


def _normalize3(v: jax.Array, one: Scalar) -> jax.Array:
    """v / |v| (MuJoCo's mju_normalize3: (1, 0, 0) below MINVAL), NaN-free gradient."""
    n2 = _dot3(v, v, one)
    pos = n2 > 0
    norm = jp.where(pos, jp.sqrt(jp.where(pos, n2, 1.0)), 0.0)  # the square root's gradient is infinite at 0
    small = norm < MINVAL
    inv = 1 / jp.where(small, 1.0, norm)
    return jp.where(small, jp.array([1.0, 0.0, 0.0], v.dtype), v * inv)


def box_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Contacts of two boxes (g1, g2: pos (3,), mat (3, 3), size (3,) half-sizes): (MAXCON,) dist (NOCONTACT where
    none), (MAXCON, 3) pos and normal (from g1 to g2)."""
    dt = g1.pos.dtype
    eps = _EPS32 if jp.dtype(dt).itemsize <= 4 else _EPS64
    pos1, pos2, mat1, mat2, s1, s2 = g1.pos, g2.pos, g1.mat, g2.mat, g1.size, g2.size
    i1s, i2s = jp.array(_NEXT1), jp.array(_NEXT2)
    o = _unfused_one(pos1[0])  # every product that feeds a sum is rounded first, as in MuJoCo's C

    # box2's axes in box1's frame (columns), the centres in each other's frames
    pos21 = _mtv(mat1, pos2 - pos1, o)
    pos12 = _mtv(mat2, pos1 - pos2, o)
    t0, t1, t2 = ((mat1[k][:, None] * mat2[k][None, :]) * o for k in range(3))
    rot = t0 + t1 + t2  # rot[i, j] = mat1[:, i] . mat2[:, j]
    rotabs = jp.abs(rot)

    # ---- stage 1: separating axes
    septol = margin + (eps["sep"] * (s1[0] + s1[1] + s1[2] + s2[0] + s2[1] + s2[2])) * o
    radius2 = _mv(rotabs, s2, o)  # box2's support radius along box1's axes
    radius1 = _mtv(rotabs, s1, o)  # box1's along box2's
    fsep = jp.concatenate([jp.abs(pos21) - s1 - radius2, jp.abs(pos12) - s2 - radius1])  # (6,) faces of 1, of 2
    code_face = jp.argmax(fsep)  # first of equals, as MuJoCo's strict > scan
    sep_face = fsep[code_face]

    # edge axes: axis i of box1 x axis j of box2, in box1's frame (component i is zero), entry 3 i + j
    ax1 = -rot[i2s, :]  # component i1 of axis (i, j): -rot[i2, j]
    ax2 = rot[i1s, :]  # component i2: rot[i1, j]
    norm2 = (ax1 * ax1) * o + (ax2 * ax2) * o
    edge_ok = norm2 >= eps["par"]  # nearly parallel edges: the direction is rounding noise (faces cover it)
    inv = 1 / jp.sqrt(jp.where(edge_ok, norm2, 1.0))
    ax1, ax2 = ax1 * inv, ax2 * inv
    er1 = (s1[i1s][:, None] * jp.abs(ax1)) * o + (s1[i2s][:, None] * jp.abs(ax2)) * o
    a2_1 = (ax1 * rot[i1s][:, i1s]) * o + (ax2 * rot[i2s][:, i1s]) * o  # the axis in box2's frame: components j1, j2
    a2_2 = (ax1 * rot[i1s][:, i2s]) * o + (ax2 * rot[i2s][:, i2s]) * o
    er2 = (s2[i1s][None, :] * jp.abs(a2_1)) * o + (s2[i2s][None, :] * jp.abs(a2_2)) * o
    proj = (ax1 * pos21[i1s][:, None]) * o + (ax2 * pos21[i2s][:, None]) * o
    esep = (jp.abs(proj) - er1 - er2).reshape(9)
    edge_ok = edge_ok.reshape(9)
    separated = jp.any(fsep > septol) | jp.any(edge_ok & (esep > septol))

    # the running best: an edge must beat it by the relative bias and beat the best face
    sep_best, code = sep_face, code_face
    for k in range(9):
        take = edge_ok[k] & (esep[k] - (EDGE_BIAS * jp.abs(esep[k])) * o > sep_best) & (esep[k] > sep_face)
        sep_best = jp.where(take, esep[k], sep_best)
        code = jp.where(take, 6 + k, code)

    # full (unnormalised) edge axes in box1's frame, (9, 3)
    rows = []
    for i in range(3):
        for j in range(3):
            v = [None, None, None]
            v[i] = jp.zeros((), dt)
            v[_NEXT1[i]] = -rot[_NEXT2[i], j]
            v[_NEXT2[i]] = rot[_NEXT1[i], j]
            rows.append(jp.stack(v))
    axes = jp.stack(rows)
    ek = jp.clip(code - 6, 0, 8)
    axis = _normalize3(axes[ek], o)

    # an edge axis within ~8 degrees of the best face axis duplicates it: the face wins unless the edge separates by
    # 5% more
    face_dot = jp.abs(jp.where(code_face < 3, axis[code_face % 3], _dot3(axis, rot[:, code_face % 3], o)))
    alias = (face_dot > 0.99) & (sep_best < sep_face + (0.05 * jp.abs(sep_face)) * o + MINVAL)
    use_edge = (code >= 6) & ~alias

    # ---- edge contact: closest points of the two supporting edges
    i, j = ek // 3, ek % 3
    i1, i2, j1, j2 = (i + 1) % 3, (i + 2) % 3, (j + 1) % 3, (j + 2) % 3
    axis = jp.where(_dot3(axis, pos21, o) < 0, -axis, axis)
    a2 = _mtv(rot, axis, o)
    sg = eps["sgn"]
    amb1 = jp.where(jp.abs(axis[i1]) < sg, i1, jp.where(jp.abs(axis[i2]) < sg, i2, -1))
    amb2 = jp.where(jp.abs(a2[j1]) < sg, j1, jp.where(jp.abs(a2[j2]) < sg, j2, -1))
    e_i, e_j = jax.nn.one_hot(i, 3, dtype=dt), jax.nn.one_hot(j, 3, dtype=dt)
    d2 = rot[:, j]
    b = d2[i]
    denom = 1 - (b * b) * o
    c1_0 = (1 - e_i) * jp.where(axis >= 0, s1, -s1)
    cc_0 = (1 - e_j) * jp.where(a2 >= 0, -s2, s2)
    flip = jp.array([[0, 0], [0, 1], [1, 0], [1, 1]], bool)  # (v1, v2) in MuJoCo's loop order
    tries = flip & jp.stack([amb1 >= 0, amb2 >= 0])[None, :] | ~flip  # a flip is tried only if ambiguous
    tried = tries[:, 0] & tries[:, 1]
    c1 = jp.where(flip[:, :1] & (jp.arange(3) == amb1)[None, :], -c1_0, c1_0)  # (4, 3)
    cc = jp.where(flip[:, 1:] & (jp.arange(3) == amb2)[None, :], -cc_0, cc_0)
    c2 = jax.vmap(lambda c: _mv(rot, c, o))(cc) + pos21
    e = c2 - c1
    d1e = e[:, i]
    d2e = _dot3(d2, e, o)
    small = denom < MINVAL
    sp = jp.where(small, 0.0, (d1e - (b * d2e) * o) / jp.where(small, 1.0, denom))
    sp = jp.clip(sp, -s1[i], s1[i])
    tp = jp.clip((b * sp) * o - d2e, -s2[j], s2[j])
    sp = jp.clip(d1e + (b * tp) * o, -s1[i], s1[i])
    p1 = c1 + e_i * sp[:, None]
    p2 = c2 + (d2 * tp[:, None]) * o
    gap = p2 - p1
    best = jp.argmin(jp.where(tried, _dot3(gap, gap, o), jp.inf))
    w1, w2 = p1[best], p2[best]
    edist = _dot3(w2 - w1, axis, o)
    mid = 0.5 * (w1 + w2)
    epos = _mv(mat1, mid, o) + pos1
    enormal = _mv(mat1, axis, o)

    # ---- face contact: the incident face in the reference face's coordinates, clipped
    fcode = jp.where(code < 6, code, code_face)
    ref1 = fcode < 3
    a = fcode % 3
    sref, sinc = jp.where(ref1, s1, s2), jp.where(ref1, s2, s1)
    pref, mref = jp.where(ref1, pos1, pos2), jp.where(ref1, mat1, mat2)
    posoi = jp.where(ref1, pos21, pos12)  # incident centre in the reference frame
    rinc = jp.where(ref1, rot, rot.T)  # rinc[r, c]: component r of incident axis c
    sgn = jp.where(posoi[a] >= 0, 1.0, -1.0).astype(dt)
    row = rinc[a]
    binc = jp.argmax(jp.abs(row))
    tinc = jp.where(sgn * row[binc] > 0, -1.0, 1.0).astype(dt)
    ax, ay = (a + 1) % 3, (a + 2) % 3
    bu, bv = (binc + 1) % 3, (binc + 2) % 3
    cidx = jp.stack([ax, ay, a])
    rc = rinc[cidx]  # rows reordered to (x, y, z)
    cx = posoi[cidx] + (tinc * sinc[binc] * rc[:, binc]) * o
    du = sinc[bu] * rc[:, bu]
    dv = sinc[bv] * rc[:, bv]
    zs = jp.array([1.0, 1.0, 0.0], dt) + sgn * jp.array([0.0, 0.0, 1.0], dt)  # (1, 1, sgn)
    cx = cx.at[2].set(sgn * cx[2] - sref[a])
    du, dv = du * zs, dv * zs
    cs = jp.array([[1.0, 1.0], [-1.0, 1.0], [-1.0, -1.0], [1.0, -1.0]], dt)
    quad = cx + cs[:, :1] * du + cs[:, 1:] * dv
    verts = jp.zeros((_MAXVERT, 3), dt).at[:4].set(quad)
    valid = jp.arange(_MAXVERT) < 4
    lx, ly = sref[ax], sref[ay]
    for coord, sign, lim in ((0, 1.0, lx), (0, -1.0, lx), (1, 1.0, ly), (1, -1.0, ly)):
        verts, valid = _clip(verts, valid, coord, sign, lim, o)
    # in the margin band, dropping near-duplicates of accepted vertices (clipping at polygon corners)
    dupe2 = eps["dup"] * ((lx * lx) * o + (ly * ly) * o)
    dx = verts[:, None, 0] - verts[None, :, 0]  # [q, k]: earlier vertex q minus vertex k
    dy = verts[:, None, 1] - verts[None, :, 1]
    near = jp.tril((dx * dx) * o + (dy * dy) * o < dupe2, -1).T  # [q, k], q < k
    cand = valid & ~(verts[:, 2] > margin)
    acc = jp.zeros(_MAXVERT, bool)
    for k in range(_MAXVERT):  # in order: a vertex is a duplicate only of an accepted one
        acc = acc.at[k].set(cand[k] & ~jp.any(acc & near[:, k]))
    sel, fok = _first_k(acc, _MAXVERT)
    verts = verts[sel]
    if MAXCON < _MAXVERT:
        idx, fok = _reduce(verts[:, :2], verts[:, 2], fok)
        verts = verts[idx]
    fdist = verts[:, 2]
    oa, ox, oy = (jax.nn.one_hot(c, 3, dtype=dt) for c in (a, ax, ay))
    posc = ox * verts[:, :1] + oy * verts[:, 1:2] + oa * (sgn * (sref[a] + 0.5 * verts[:, 2:3]))
    fpos = jax.vmap(lambda p: _mv(mref, p, o))(posc) + pref
    fnormal = jp.where(ref1, sgn, -sgn) * mref[:, a]

    none = jp.full(MAXCON, NOCONTACT, dt)
    dist = jp.where(use_edge, jp.where(edist > septol, none, none.at[0].set(edist)), jp.where(fok, fdist, NOCONTACT))
    dist = jp.where(separated, NOCONTACT, dist)
    pos = jp.where(use_edge, jp.broadcast_to(epos, (MAXCON, 3)), fpos)
    normal = jp.broadcast_to(jp.where(use_edge, enormal, fnormal), (MAXCON, 3))
    return Contacts(dist, pos, normal, jp.zeros((MAXCON, 3), dt))
