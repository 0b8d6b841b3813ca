"""Height-field collisions: a convex geom against the triangular prisms of a height field (mjc_ConvexHField).

As in MuJoCo, a height field is a grid of cells, each split into two triangles extruded down to the base (z = -base);
geom2 (sphere, capsule, ellipsoid, cylinder, box, mesh) is collided with every prism under its bounding box with the
general convex distance `general.collide` (GJK/EPA), which gives the true signed distance to each prism (MuJoCo 4 does
the same: contacts within margin carry their real distance). Spheres and capsules take exact closed forms instead
(`_point_prism`, `_segment_prism`: the same answer as converged GJK/EPA, ~100x cheaper under vmap on CPU), and boxes and
small meshes find their penetration by exact separating axes (`sat.polytope_sat`, within the model's
`m.config.sat_budget`) after GJK. Grid conventions: vertex (r, c) is at x = c*dx - sx, y = r*dy - sy, z =
hfield_data[r*ncol + c] * sz with dx = 2 sx/(ncol-1), dy = 2 sy/(nrow-1); cell (r, c) holds the triangles {(r+1,c),
(r,c), (r+1,c+1)} and {(r,c), (r+1,c+1), (r,c+1)} (the diagonal from (r, c) to (r+1, c+1), MuJoCo's triangulation).

Static sizes (fixed shapes):
  * window: each pair tests a window of `wr x wc` cells (2 prisms each) anchored at the cell under the
    lower corner of geom2's bounding box (in the height-field frame, enlarged by the margin). The window
    size is static per group, derived from the compile-time sizes kept in the model's static part (`window_size`:
    `m.geom_reach0`, `m.hfield_cell0`): the largest geom_rbound of the group's geoms plus margins, over the cell
    size, plus one; capped by the grid and by `MAX_WINDOW`. When geom2's box needs more cells than the window holds
    (a geom grown by domain randomisation, or the cap), the collider reports overflow and the driver increments
    `d.warning_number[Warning.CONTACTFULL]`: nothing is dropped silently.
  * contacts: one per colliding prism, as MuJoCo (up to mjMAXCONPAIR = 50 per pair): each pair has
    k = min(prisms in the window, 50, `m.config.hfield_prisms` (None: no cap)) contact slots, in MuJoCo's grid
    order. A cheap lower bound on each prism's distance (`_prism_bound`: separating axes x, y, z, geom2's axes and
    the prism's face normals) rules out the prisms beyond the margin (exact: they cannot touch); only the others
    (candidates) run the exact collider in a loop over the candidates pooled across the group's pairs and the
    environments of a `vmap` (`_prisms_runner`: as many prisms per trip as there are lanes, so the trips follow the
    batch's total of candidates, not its worst lane; derivatives through the collider on every slot). With fewer
    slots than window prisms: at MuJoCo's cap of 50 every candidate runs the collider and the slots keep the first
    50 colliding prisms in grid order, MuJoCo's contacts (more colliding prisms count in CONTACTFULL); under a
    smaller `Config.hfield_prisms` cap only the k candidates nearest by the bound run it (more candidates count in
    CONTACTFULL).
Normals: GJK/EPA's, as MuJoCo 4 with its native CCD (mjc_fixNormal only runs when nativeccd is disabled,
which is not supported here). The window is a static superset of MuJoCo's sub-grid.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision.general import collide
from mjx_lite.collision.hull import edge_faces
from mjx_lite.collision.segment import segments_closest
from mjx_lite.collision.support import radius, support
from mjx_lite.collision.types import NOCONTACT, Contacts, Distance, GeomInfo, Points, Scalar, Vec3, info_axes
from mjx_lite.math import pick, safe_norm
from mjx_lite.types import GeomType, Model

MAXCONPAIR = 50  # contacts kept per (hfield, geom) pair at most: one per colliding prism (MuJoCo's mjMAXCONPAIR)
MAX_WINDOW = 16  # cap on window cells per axis (up to 2 * 16 * 16 prisms per pair)

_COLLIDE_TYPES = (GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID, GeomType.CYLINDER, GeomType.BOX,
                  GeomType.MESH)  # fmt: skip


def _placeholder(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:  # replaced by `group_collider`
    raise RuntimeError("height-field collider used without its group (see hfield.group_collider)")


def collider_for(type2: int) -> tuple[Callable, int]:
    """(collider placeholder, contacts per pair) for (hfield, type2); the driver binds the real one per group."""
    if type2 not in _COLLIDE_TYPES:
        raise NotImplementedError(f"collision: height field against geom type {GeomType(type2).name}")
    return _placeholder, MAXCONPAIR


def window_size(m: Model, hid: int, geom1: np.ndarray, geom2: np.ndarray) -> tuple[int, int]:
    """Static (rows, cols) of cells tested per pair for hfield `hid` against the geoms `geom2` (host ints).

    Sized from the compile-time floats kept in the static part of the model (`m.geom_reach0`: rbound and margin +
    gap per geom; `m.hfield_cell0`: the cell size), so it depends on the model's static part alone: a geom grown
    later (e.g. by domain randomisation) can outgrow the window, which is flagged (CONTACTFULL)."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    reach0 = np.asarray(m.geom_reach0, np.float64)
    g1, g2 = np.asarray(geom1), np.asarray(geom2)
    reach = float(np.max(reach0[g2, 0] + reach0[g1, 1] + reach0[g2, 1])) if g2.size else 0.0
    dx, dy = (float(v) for v in np.asarray(m.hfield_cell0, np.float64)[hid])
    wc = math.ceil(2 * reach / dx) + 1 if dx > 0 else MAX_WINDOW
    wr = math.ceil(2 * reach / dy) + 1 if dy > 0 else MAX_WINDOW
    wr = max(1, min(wr, MAX_WINDOW, nrow - 1))
    wc = max(1, min(wc, MAX_WINDOW, ncol - 1))
    return wr, wc


def _aabb_half(t2: int, g: GeomInfo) -> tuple[Vec3, Vec3]:
    """Half extents (3,) of the box around geom2 in its (local-to-hfield) pose, from support points."""
    r = radius(t2, g.size)
    eye = jp.eye(3, dtype=g.pos.dtype)
    hi = jax.vmap(lambda e: support(t2, g, e))(eye)
    lo = jax.vmap(lambda e: support(t2, g, -e))(eye)
    return 0.5 * (jp.diagonal(hi) - jp.diagonal(lo)) + r, 0.5 * (jp.diagonal(hi) + jp.diagonal(lo))


def _clamp_segment(p: Vec3, a: Vec3, b: Vec3) -> Vec3:
    """Nearest point to p on the segment a-b (3,); a degenerate segment gives a."""
    ab = b - a
    ll = jp.sum(ab * ab)
    t = jp.clip(jp.sum((p - a) * ab) / jp.where(ll > 0, ll, 1.0), 0.0, 1.0)
    return a + t * ab


def _point_prism(v: Points, p: Vec3) -> Distance:
    """Signed distance of point p (3,) to a height-field prism v (6, 3): rows 0-2 the bottom triangle (z = -base),
    rows 3-5 the top triangle above it (same x, y). Returns (dist, nearest point on the prism (3,), outward normal
    there (3,)). Exact, no iterations; written with static slices only (gathers are slow under vmap on CPU).

    Inside (or on the surface): the nearest face plane (the minimum translation, as EPA's answer for a point);
    dist is minus that depth. Outside: the nearest of the candidate surface points (the projections onto the top,
    the bottom and the three vertical sides where they fall on the face, and the nearest points on the 9 edges);
    the normal points from it to p."""
    dt = p.dtype
    zb = v[0, 2]
    top = [v[3 + i] for i in range(3)]
    # orientation of the triangle in the xy plane: sides' outward normals and an upward top normal
    e = [top[(i + 1) % 3] - top[i] for i in range(3)]
    area2 = e[0][0] * e[1][1] - e[0][1] * e[1][0]
    sgn = jp.where(area2 >= 0, 1.0, -1.0).astype(dt)
    n_side, s_side = [], []
    for i in range(3):
        ln = jp.sqrt(e[i][0] ** 2 + e[i][1] ** 2)
        n = sgn * jp.stack([e[i][1], -e[i][0], jp.zeros((), dt)]) / jp.where(ln > 0, ln, 1.0)
        n_side.append(n)
        s_side.append(jp.dot(n, p - top[i]))
    n_top = sgn * jp.cross(e[0], top[2] - top[0])
    n_top = n_top / jp.linalg.norm(n_top)  # |n_top| >= the cell area > 0
    s_top = jp.dot(n_top, p - top[0])
    s_bot = zb - p[2]
    n_bot = jp.array([0.0, 0.0, -1.0], dt)
    # inside: the nearest face plane (running maximum: elementwise ops only, which vectorise well under vmap)
    depth, n_in = s_bot, n_bot
    for s, n in zip([s_top] + s_side, [n_top] + n_side):
        better = s > depth
        depth, n_in = jp.where(better, s, depth), jp.where(better, n, n_in)
    # outside: the nearest of the candidate surface points that lie on their face (running minimum)
    best_d2, q_out = jp.asarray(jp.inf, dt), p

    def consider(q, valid, best_d2, q_out):
        d2 = jp.sum((p - q) ** 2)
        better = valid & (d2 < best_d2)
        return jp.where(better, d2, best_d2), jp.where(better, q, q_out)

    on_top = s_side[0] - s_top * jp.dot(n_side[0], n_top) <= 0
    for s, n in zip(s_side[1:], n_side[1:]):
        on_top = on_top & (s - s_top * jp.dot(n, n_top) <= 0)
    best_d2, q_out = consider(p - s_top * n_top, on_top, best_d2, q_out)
    on_bot = (s_side[0] <= 0) & (s_side[1] <= 0) & (s_side[2] <= 0)
    best_d2, q_out = consider(p.at[2].set(zb), on_bot, best_d2, q_out)
    yes = jp.ones((), bool)
    for i in range(3):
        a, b = top[i], top[(i + 1) % 3]
        ll = e[i][0] ** 2 + e[i][1] ** 2
        t = ((p[0] - a[0]) * e[i][0] + (p[1] - a[1]) * e[i][1]) / jp.where(ll > 0, ll, 1.0)
        on_side = (t >= 0) & (t <= 1) & (p[2] >= zb) & (p[2] <= a[2] + t * (b[2] - a[2]))
        best_d2, q_out = consider(p - s_side[i] * n_side[i], on_side, best_d2, q_out)  # onto the vertical side
        best_d2, q_out = consider(_clamp_segment(p, a, b), yes, best_d2, q_out)  # top edge
        best_d2, q_out = consider(_clamp_segment(p, a.at[2].set(zb), b.at[2].set(zb)), yes, best_d2, q_out)
        best_d2, q_out = consider(a.at[2].set(jp.clip(p[2], zb, a[2])), yes, best_d2, q_out)  # vertical edge
    d_out = jp.sqrt(jp.maximum(best_d2, jp.finfo(dt).tiny))
    n_out = (p - q_out) / d_out
    inside = depth <= 0
    dist = jp.where(inside, depth, d_out)
    normal = jp.where(inside, n_in, n_out)
    near = jp.where(inside, p - depth * n_in, q_out)
    return dist, near, normal


def _sphere_prism(v: Points, g2: GeomInfo) -> Distance:
    """(dist, pos, normal) of prism v (6, 3) (geom1) against the sphere g2, as `general.collide`."""
    r = g2.size[0]
    dist, near, normal = _point_prism(v, g2.pos)
    return dist - r, 0.5 * (near + g2.pos - r * normal), normal


_EDGES = ((0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3), (0, 3), (1, 4), (2, 5))  # the prism's 9 edges


def _segments_nearest(p0: Vec3, d1: Vec3, q0: Vec3, d2: Vec3) -> tuple[Vec3, Vec3]:
    """Nearest points of the segments p0 + s d1 and q0 + t d2 (s, t in [0, 1]; d1, d2 not zero): (on 1, on 2),
    by `segment.segments_closest` (centre/half-axis form)."""
    x1, x2, _ = segments_closest(p0 + 0.5 * d1, 0.5 * d1, q0 + 0.5 * d2, 0.5 * d2)
    return p0 + 0.5 * (1 + x1) * d1, q0 + 0.5 * (1 + x2) * d2


_E0 = np.array([i for i, _ in _EDGES], np.int32)
_E1 = np.array([j for _, j in _EDGES], np.int32)
# the prism as a polytope for separating axes against boxes and meshes: 8 triangles (the two sides' diagonals are
# not edges) and its 9 edges with the two triangles at each
_PRISM_TRIS = np.array([[0, 2, 1], [3, 4, 5], [0, 1, 4], [0, 4, 3], [1, 2, 5], [1, 5, 4], [2, 0, 3], [2, 3, 5]],
                       np.int32)  # fmt: skip
_PRISM_EDGES = edge_faces(_PRISM_TRIS, _EDGES)
_PRISM_PLANES = np.array([[0, 0], [1, 1], [2, 3], [4, 5], [6, 7]], np.int32)  # bottom, top, 3 side quads


def _segment_prism(v: Points, p0: Vec3, p1: Vec3) -> tuple[Scalar, Vec3, Vec3, Vec3]:
    """Signed distance of the segment p0-p1 to a height-field prism v (6, 3) (as `_point_prism`): (dist, nearest
    point on the prism (3,), nearest point on the segment (3,), normal from the prism to the segment (3,)). Exact.

    Separated: the nearest of the two endpoints' point-prism answers and the segment's nearest points to the 9
    edges. Overlapping: separating-axis depths over the axes that span the faces of the Minkowski difference of
    the prism and the segment (the prism's 5 face normals and the segment direction crossed with its 9 edges, both
    signs); the least depth is the penetration, its witness the deepest endpoint (a face axis) or the nearest
    points of the segment and the prism edge that attains the support along the axis (an edge axis). Arrays over
    candidates rather than unrolled loops: the traced graph (and its gradient's) stays small."""
    dt = p0.dtype
    d = p1 - p0
    ea, eb = v[_E0], v[_E1]  # (9, 3) edge ends
    # separated: endpoints and edges
    ends = jp.stack([p0, p1])
    dist_p, near_p, n_p = jax.vmap(_point_prism, in_axes=(None, 0))(v, ends)
    on_seg, on_edge = jax.vmap(_segments_nearest, in_axes=(None, None, 0, 0))(p0, d, ea, eb - ea)
    gap = safe_norm(on_seg - on_edge)
    n_edge = (on_seg - on_edge) / jp.maximum(gap, jp.finfo(dt).tiny)[:, None]
    cand_d = jp.concatenate([dist_p, gap])  # (11,)
    i = jp.argmin(cand_d)
    best = pick(cand_d, i)
    a_sep = pick(jp.concatenate([near_p, on_edge]), i)
    b_sep = pick(jp.concatenate([ends, on_seg]), i)
    n_sep = pick(jp.concatenate([n_p, n_edge]), i)
    # overlap: least separating-axis depth over the candidate axes, both signs
    top = v[3:]
    n_top = jp.cross(top[1] - top[0], top[2] - top[0])
    e_top = jp.roll(top, -1, axis=0) - top  # (3, 3) top edges (their xy is the side's)
    side = jp.stack([e_top[:, 1], -e_top[:, 0], jp.zeros(3, dt)], axis=-1)
    faces = jp.concatenate([jp.array([[0.0, 0.0, 1.0]], dt), n_top[None], side])  # (5, 3)
    faces = faces / jp.linalg.norm(faces, axis=-1, keepdims=True)
    c = jp.cross(d, eb - ea)  # (9, 3)
    cn = safe_norm(c)  # zero (NaN-safe) when the segment is parallel to the edge
    valid = cn > 1e-9 * safe_norm(d) * safe_norm(eb - ea)
    axes = jp.concatenate([faces, c / jp.where(valid, cn, 1.0)[:, None]])  # (14, 3)
    axes = jp.concatenate([axes, -axes])  # (28, 3)
    valid = jp.concatenate([jp.ones(5, bool), valid] * 2)
    proj = axes @ v.T  # (28, 6)
    s0, s1 = axes @ p0, axes @ p1
    h = jp.max(proj, axis=1) - jp.minimum(s0, s1)  # translating the segment along the axis by h separates them
    h = jp.where(valid, h, jp.inf)
    # witnesses for every axis: face axes, the deepest endpoint; edge axes, the nearest points to the support edge
    f_axes, e_axes = np.r_[0:5, 14:19], np.r_[5:14, 19:28]
    b_face = jp.where((s1 < s0)[f_axes, None], p1, p0)
    a_face = b_face + h[f_axes, None] * axes[f_axes]
    attain = jp.minimum(proj[e_axes][:, _E0], proj[e_axes][:, _E1])  # (18, 9): an edge's lower end along the axis
    hot_e = jax.nn.one_hot(jp.argmax(attain, axis=1), 9, dtype=dt)  # (18, 9)
    sa, sb = hot_e @ ea, hot_e @ eb
    b_edge, a_edge = jax.vmap(_segments_nearest, in_axes=(None, None, 0, 0))(p0, d, sa, sb - sa)
    order = np.argsort(np.r_[f_axes, e_axes])  # back to the axis order
    a_ax = jp.concatenate([a_face, a_edge])[order]
    b_ax = jp.concatenate([b_face, b_edge])[order]
    k = jp.argmin(h)
    depth = pick(jp.where(valid, h, 0.0), k)
    a_pen, b_pen, n_pen = pick(a_ax, k), pick(b_ax, k), pick(axes, k)
    inside = depth >= 0
    return (jp.where(inside, -depth, best), jp.where(inside, a_pen, a_sep), jp.where(inside, b_pen, b_sep),
            jp.where(inside, n_pen, n_sep))  # fmt: skip


def _capsule_prism(v: Points, g2: GeomInfo) -> Distance:
    """(dist, pos, normal) of prism v (6, 3) (geom1) against the capsule g2, as `general.collide`."""
    r, half = g2.size[0], g2.size[1]
    axis = g2.mat[:, 2] * half
    dist, near, on_seg, normal = _segment_prism(v, g2.pos - axis, g2.pos + axis)
    return dist - r, 0.5 * (near + on_seg - r * normal), normal


def _prism_bound(t2: int, g: GeomInfo, lo: Vec3, hi: Vec3, verts: jax.Array) -> jax.Array:
    """(nprism,) lower bounds on the distance between geom g (hfield frame; its box lo..hi (3,), radius included)
    and the prisms verts (nprism, 6, 3): the largest gap along separating axes, the frame's axes (boxes), g's own
    axes (g's extent from its support), each prism's unit top normal and its three side normals (the prism's face
    plane against g's lowest support point along the normal). Negative when they overlap along every axis; never
    above the true distance."""
    r = radius(t2, g.size)
    pmin, pmax = jp.min(verts, axis=1), jp.max(verts, axis=1)  # (nprism, 3)
    gap = jp.max(jp.maximum(pmin - hi, lo - pmax), axis=-1)
    # g's own axes
    axes = g.mat.T  # (3, 3) rows: g's axes in the hfield frame
    g_hi = jax.vmap(lambda e: jp.dot(e, support(t2, g, e)))(axes) + r
    g_lo = jax.vmap(lambda e: jp.dot(e, support(t2, g, -e)))(axes) - r
    # (nprism, 6, 3) = verts @ axes.T as multiply-adds: under vmap a product over an axis of 3 becomes a batched
    # library call on XLA:CPU that cost the quadruped's capsule-terrain bound 5-8 % of its profiled step
    proj = verts[..., 0:1] * axes[:, 0] + verts[..., 1:2] * axes[:, 1] + verts[..., 2:3] * axes[:, 2]
    gap = jp.maximum(gap, jp.max(jp.maximum(jp.min(proj, 1) - g_hi, g_lo - jp.max(proj, 1)), axis=-1))
    # the prism's top and side faces: outward unit normals n (nprism, 4, 3), a point on each face
    top = verts[:, 3:]
    n_top = jp.cross(top[:, 1] - top[:, 0], top[:, 2] - top[:, 0])
    n_top = n_top * jp.where(n_top[:, 2:3] < 0, -1.0, 1.0)  # upward (the cell's area keeps n[2] away from 0)
    edge = jp.roll(top, -1, axis=1) - top  # (nprism, 3, 3): edge i from vertex i to i + 1
    n_side = jp.stack([edge[..., 1], -edge[..., 0], jp.zeros_like(edge[..., 0])], -1)
    inward = jp.sum(n_side * (jp.roll(top, -2, axis=1) - top), -1, keepdims=True) > 0  # the third vertex's side
    n_side = jp.where(inward, -n_side, n_side)
    n = jp.concatenate([n_top[:, None], n_side], axis=1)
    n = n / jp.linalg.norm(n, axis=-1, keepdims=True)
    on = jp.concatenate([top[:, :1], top], axis=1)  # (nprism, 4, 3)
    low = jax.vmap(jax.vmap(lambda d: jp.dot(d, support(t2, g, -d))))(n) - r
    return jp.maximum(gap, jp.max(low - jp.sum(n * on, axis=-1), axis=-1))


def _prism_collider(type2: int, sat_budget: int) -> Callable:
    """f(v, g2, margin) -> (dist (), pos (3,), normal (3,)) of one prism v (6, 3) (geom1, hfield frame) against
    geom2 g2 (hfield frame), as `general.collide`: closed forms for spheres and capsules, separating axes for boxes
    and small meshes (within `sat_budget`), GJK/EPA for the others."""

    def prism(v: Points, g2: GeomInfo, margin: Scalar) -> Distance:
        if type2 == GeomType.SPHERE:  # exact point-prism distance (the general GJK/EPA costs ~100x more)
            return _sphere_prism(v, g2)
        if type2 == GeomType.CAPSULE:  # exact segment-prism distance, likewise
            return _capsule_prism(v, g2)
        return collide(GeomType.MESH, type2, prism_info(v), g2, margin, sat_budget=sat_budget)

    return prism


def prism_info(v: Points) -> GeomInfo:
    """The prism v (6, 3) as a mesh GeomInfo for `general.collide` (identity pose, its 8 triangles, 9 edges and 5
    face planes)."""
    dt = v.dtype
    return GeomInfo(jp.zeros(3, dt), jp.eye(3, dtype=dt), jp.zeros(3, dt), v, None, jp.asarray(_PRISM_TRIS),
                    edge=jp.asarray(_PRISM_EDGES), faceplane=jp.asarray(_PRISM_PLANES))  # fmt: skip


def _no_prism(g2: GeomInfo, k: int) -> Distance:
    """What a prism that runs no collider reports (k rows): NOCONTACT, geom2's centre, +z (finite, not a contact)."""
    dt = g2.pos.dtype
    up = jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dt), (k, 3))
    return jp.full((k,), NOCONTACT, dt), jp.broadcast_to(g2.pos, (k, 3)), up


def _dense_runner(prism: Callable) -> Callable:
    """run(verts (k, 6, 3), cand (k,) bool, g2, margin) -> (dist (k,), pos (k, 3), normal (k, 3)): `prism` `vmap`-ed
    over all k prisms, `_no_prism` where not a candidate (the derivatives of `_prisms_runner`)."""

    def dense(verts, cand, g2, margin):
        dist, pos, normal = jax.vmap(prism, in_axes=(0, None, None))(verts, g2, margin)
        nd, npos, nn = _no_prism(g2, verts.shape[0])
        return jp.where(cand, dist, nd), jp.where(cand[:, None], pos, npos), jp.where(cand[:, None], normal, nn)

    return dense


def _prisms_runner(prism: Callable) -> Callable:
    """run(verts (k, 6, 3), cand (k,) bool, g2, margin) -> (dist (k,), pos (k, 3), normal (k, 3)): `prism` on the
    candidate prisms, `_no_prism` on the others.

    Forward, the candidates run in a `lax.while_loop` over a compacted list (grid order kept), a chunk of prisms per
    trip. Unbatched, one prism per trip. Under `vmap` (over a group's pairs, over environments) the loop is not
    batched lane by lane (which would run as many trips as the most candidates of any lane, each trip paying the
    collider on every lane): a custom batching rule (`_batched_items`) pools the candidates of all lanes into one
    list and runs it `lanes` prisms per trip, so the trips are ceil(candidates of the whole batch / lanes) (at most
    the most of any lane, and none when no prism of any lane is within reach: a quadruped's torso above the terrain).
    Derivatives (custom_jvp) are those of the same collider `vmap`-ed over all k prisms (masked as the loop): no
    derivative passes through the loop, and a differentiated step pays the whole window as before."""

    dense = _dense_runner(prism)

    @jax.custom_jvp
    def run(verts, cand, g2, margin):
        k = verts.shape[0]
        leaves, tree = jax.tree.flatten((margin, g2))
        return _batched_items(prism, k, tree, (True,) * len(leaves))(verts, cand, *leaves)

    @run.defjvp
    def run_jvp(primals, tangents):
        verts, cand, g2, margin = primals
        tv, _, tg, tm = tangents
        return jax.jvp(lambda v, g, mg: dense(v, cand, g, mg), (verts, g2, margin), (tv, tg, tm))

    return run


def _batched_items(prism: Callable, k: int, tree, shared: tuple[bool, ...]) -> Callable:
    """items(verts (N, 6, 3), cand (N,), *leaves) -> (dist (N,), pos (N, 3), normal (N, 3)): `prism` on the candidate
    items, `_no_prism` on the others. Items come in lanes of k (item i is prism i % k of lane i // k); `leaves` are
    those of (margin, geom2) (`tree`), each either shared by every lane (`shared`: no lane axis) or one per lane
    (leading axis N // k). The candidates run compacted (their order kept), N // k per trip of a while_loop.

    A custom_vmap: under `vmap` the batched axis is folded into the lanes (unbatched arguments broadcast to it, shared
    leaves that become batched get a lane axis) and the same function of more lanes runs (`rule`), so nested vmaps
    (pairs, environments) end in one loop over the candidates of all lanes."""

    @jax.custom_batching.custom_vmap
    def items(verts, cand, *leaves):
        n = verts.shape[0]
        chunk = max(1, n // k)
        dt = verts.dtype
        order = jp.argsort(~cand, stable=True).astype(jp.int32)  # candidates first
        count = jp.sum(cand.astype(jp.int32))
        slot = jp.arange(chunk, dtype=jp.int32)
        axes = tuple(None if s else 0 for s in shared)

        def lane_of(x, s, idx):  # a leaf at the lanes of items idx
            return x if s else x[idx // k]

        # placeholders as `_no_prism` (pos: any finite value; rows that are not contacts are masked by the driver)
        up = jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dt), (n, 3))
        init = (jp.full((n,), NOCONTACT, dt), jp.zeros((n, 3), dt), up)

        def one(v, *lv):
            mg, g = jax.tree.unflatten(tree, lv)
            return prism(v, g, mg)

        def body(carry):
            j, out = carry
            at = j * chunk + slot
            idx = order[jp.minimum(at, n - 1)]
            # the barrier ties geom2 and the margin to the trip: XLA would otherwise hoist the collider's work that
            # depends on them alone out of the loop (loop-invariant code motion), to run even when the loop does not
            lv, idx = jax.lax.optimization_barrier(([lane_of(x, s, idx) for x, s in zip(leaves, shared)], idx))
            res = jax.vmap(one, in_axes=(0, *axes))(verts[idx], *lv)
            dst = jp.where(at < count, idx, n)  # beyond the candidates: dropped
            return j + 1, tuple(o.at[dst].set(r.astype(o.dtype), mode="drop") for o, r in zip(out, res))

        trips = (count + chunk - 1) // chunk
        return jax.lax.while_loop(lambda c: c[0] < trips, body, (jp.zeros((), jp.int32), init))[1]

    @items.def_vmap
    def rule(axis_size, in_batched, verts, cand, *leaves):
        vb, cb, *lb = in_batched
        n = verts.shape[1] if vb else verts.shape[0]
        lanes = n // k

        def fold(x, batched, was_shared, lead):  # batched axis folded into the lanes or items: (axis_size * lead, ...)
            if not batched:
                x = jp.broadcast_to(x, (axis_size,) + x.shape)
            if was_shared:  # a leaf shared by the lanes gets its lane axis
                x = jp.broadcast_to(x[:, None], (axis_size, lead) + x.shape[1:])
            return x.reshape((axis_size * lead,) + x.shape[2:])

        new_leaves, new_shared = [], []
        for x, s, b in zip(leaves, shared, lb):
            keep = s and not b  # still shared by every lane
            new_leaves.append(x if keep else fold(x, b, s, lanes))
            new_shared.append(keep)
        verts, cand = fold(verts, vb, False, n), fold(cand, cb, False, n)
        out = _batched_items(prism, k, tree, tuple(new_shared))(verts, cand, *new_leaves)
        out = tuple(o.reshape((axis_size, n) + o.shape[1:]) for o in out)
        return out, (True, True, True)

    return items


def window_collider(m: Model, hid: int, type2: int, wr: int, wc: int, prism: Callable) -> tuple[Callable, int]:
    """The contacts of one pair of height field `hid` and a shape of type2 over a window of wr x wc cells: (one, k),
    one(elev (nrow, ncol), hsize (4,), g1, g2, margin) -> (Contacts of k rows, overflow ()), g1 the height field's
    pose, g2 the shape (world frame), `prism(v (6, 3), g2, margin) -> (dist, pos, normal)` the collider of one prism
    and the shape in the height field's frame (`_prism_collider`'s signature). k = min(window prisms,
    MAXCONPAIR, m.config.hfield_prisms). Used by `group_collider` (geoms) and collision/flex_hfield.py (flex
    elements)."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    # prism corner offsets (row, col) of the two triangles of a cell, in MuJoCo's vertex order
    tri = np.array([[[1, 0], [0, 0], [1, 1]], [[0, 0], [1, 1], [0, 1]]], np.int32)  # (2, 3, 2)
    cell_r, cell_c = np.meshgrid(np.arange(wr), np.arange(wc), indexing="ij")
    cell = np.stack([cell_r.reshape(-1), cell_c.reshape(-1)], -1)  # (ncell, 2)
    corner = (cell[:, None, None, :] + tri[None]).reshape(-1, 3, 2)  # (nprism, 3, 2) offsets from window origin
    nprism = corner.shape[0]
    cap = m.config.hfield_prisms
    k = min(nprism, MAXCONPAIR, nprism if cap is None else cap)  # prisms to the exact collider = contact slots
    collide_prisms = _prisms_runner(prism)

    def one(elev, hsize, g1: GeomInfo, g2: GeomInfo, margin):
        dt = g2.pos.dtype
        sx, sy, sz, base = hsize[0], hsize[1], hsize[2], hsize[3]
        # geom2 in the hfield frame
        pos = g1.mat.T @ (g2.pos - g1.pos)
        mat = g1.mat.T @ g2.mat
        loc = g2._replace(pos=pos, mat=mat)
        half, center = _aabb_half(type2, loc)
        lo, hi = center - half - margin, center + half + margin
        dx = 2 * sx / (ncol - 1)
        dy = 2 * sy / (nrow - 1)
        # window origin: the cell under the lower corner, clipped so the window stays inside the grid
        c0f = jp.floor((lo[0] + sx) / dx)
        r0f = jp.floor((lo[1] + sy) / dy)
        c0 = jp.clip(c0f, 0, ncol - 1 - wc).astype(jp.int32)
        r0 = jp.clip(r0f, 0, nrow - 1 - wr).astype(jp.int32)
        # cells needed beyond the window -> overflow
        c1 = jp.minimum(jp.ceil((hi[0] + sx) / dx), ncol - 1)
        r1 = jp.minimum(jp.ceil((hi[1] + sy) / dy), nrow - 1)
        inside = (lo[0] <= sx) & (hi[0] >= -sx) & (lo[1] <= sy) & (hi[1] >= -sy) & (lo[2] <= sz) & (hi[2] >= -base)
        overflow = inside & ((c1 > c0 + wc) | (r1 > r0 + wr))
        rc = jax.lax.stop_gradient(jp.stack([r0, c0]))
        idx = rc[None, None, :] + jp.asarray(corner)  # (nprism, 3, 2)
        z = elev[idx[..., 0], idx[..., 1]] * sz
        x = idx[..., 1].astype(dt) * dx - sx
        y = idx[..., 0].astype(dt) * dy - sy
        top = jp.stack([x, y, z], -1)  # (nprism, 3, 3)
        bottom = jp.stack([x, y, jp.broadcast_to(-base, z.shape).astype(dt)], -1)
        verts = jp.concatenate([bottom, top], axis=1)  # (nprism, 6, 3)

        # a lower bound on each prism's distance to geom2 (separating axes: the hfield frame's x, y, z through both
        # boxes, geom2's axes, the prism's face normals through geom2's support); a prism farther than the margin by
        # it cannot touch (exact: no contact in MuJoCo either) and runs no collider (`_collide_prisms`). With fewer
        # slots than window prisms (k < nprism): at MuJoCo's own cap (MAXCONPAIR, no smaller `hfield_prisms`) every
        # candidate runs the collider and the slots keep the first k colliding prisms in grid order, as MuJoCo keeps
        # its first 50 (a large geom sunk into the field; more colliding prisms are flagged); under a smaller cap
        # only the k nearest by the bound (the deepest) run it, more candidates flagged
        bound = _prism_bound(type2, loc, center - half, center + half, verts)
        slack = 1e-4 * (dx + dy)  # rounding of the bound: a few more candidates, never one fewer
        cand = inside & (bound <= margin + slack)
        if k < nprism and k < MAXCONPAIR:
            key = jax.lax.stop_gradient(jp.where(cand, -bound, -jp.inf))
            sel = jp.sort(jax.lax.top_k(key, k)[1])
            overflow = overflow | (jp.sum(cand) > k)
            verts, cand = verts[sel], cand[sel]
        dist, cpos, normal = collide_prisms(verts, cand, loc, margin)
        if k < nprism and k == MAXCONPAIR:
            hit = dist <= margin
            key = jax.lax.stop_gradient(jp.where(hit, -jp.arange(nprism, dtype=dt), -jp.inf))
            sel = jp.sort(jax.lax.top_k(key, k)[1])
            overflow = overflow | (jp.sum(hit) > k)
            dist, cpos, normal = dist[sel], cpos[sel], normal[sel]
        # contacts in MuJoCo's grid order (rows, then columns, then the cell's two triangles)
        d = jp.where(dist <= margin, dist, NOCONTACT)
        return Contacts(d, g1.pos + cpos @ g1.mat.T, normal @ g1.mat.T, jp.zeros((k, 3), dt)), overflow

    return one, k


def group_collider(m: Model, hid: int, type2: int, geom1: np.ndarray, geom2: np.ndarray) -> tuple[Callable, int]:
    """The collider of one (hfield `hid`, type2) group and its contacts per pair `ncon`: (f, ncon), with
    f(m, info1, info2, margin) -> (Contacts, overflow).

    ncon = min(prisms in the window, MAXCONPAIR): every colliding prism gives its contact, as in MuJoCo.
    Vectorised over the pairs of the group (info fields (n, ...), margin (n,)); Contacts fields (n, ncon, ...),
    overflow (n,) bool."""
    nrow, ncol = int(m.hfield_nrow[hid]), int(m.hfield_ncol[hid])
    adr = int(m.hfield_adr[hid])
    wr, wc = window_size(m, hid, geom1, geom2)
    one, k = window_collider(m, hid, type2, wr, wc, _prism_collider(type2, m.config.sat_budget))

    def collide_group(m, info1: GeomInfo, info2: GeomInfo, margin):
        elev = m.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol)
        hsize = m.hfield_size[hid]
        axes = (None, None, info_axes(info1), info_axes(info2), 0)
        return jax.vmap(one, in_axes=axes)(elev, hsize, info1, info2, margin)

    return collide_group, k
