"""General convex collisions (MuJoCo's mjc_Convex with mjc_ccd): one contact from a pair's distance or penetration.

`collide` is the distance of two convex geoms, the core of every convex collider (also of the face manifolds'
fallback and of the height-field prisms):
  * polytope pairs (box, mesh) whose separating-axis test costs at most `sat_budget` (the model's
    `m.config.sat_budget`, bound by the driver), and sphere-mesh and capsule-mesh pairs: penetration by separating
    axes (`sat.py`, exact), GJK only where they are apart within the margin (`gjk.gjk_polytopes`);
  * the others: GJK (`gjk.py`), then EPA (`epa.py`) where the cores overlap; pairs with a curved shape (ellipsoid,
    cylinder) then refine the normal by Newton's method (`refine.py`) after a shorter EPA (EPA_ITERATIONS_CURVED).
Spheres and capsules enter as their core (point, segment) plus a radius (`support.py`).

`general` serves every pair without a collider of its own (`driver.collider_for`): ellipsoids against every geom
but planes and height fields, and with multiccd disabled box-mesh, mesh-mesh and the cylinder pairs, so no convex
pair is refused. The geom types are traced per pair, so all general pairs of a model form one group (two: those
with a curved shape and no mesh, `general_curved`, and the others, `general` or `general_plain`): GJK/EPA is
compiled once or twice per model, not once per type pair. One contact per pair (MuJoCo with the multiccd flag
disabled; the multi-point manifolds are `polyhedral.py` and `cylinder.py`).
Shapes: dist (), pos (3,), normal (3,) (from geom1 to geom2); Contacts of k rows as in `types.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.collision.epa import EPA_ITERATIONS, EPA_ITERATIONS_CURVED, complete_simplex, epa, epa_polytopes
from mjx_lite.collision.gjk import gjk, gjk_polytopes
from mjx_lite.collision.refine import refine_normal, small_mesh
from mjx_lite.collision.sat import polytope_sat, sat_cost, sat_tables, segment_sat
from mjx_lite.collision.segment import segments_closest
from mjx_lite.collision.support import CURVED, radius, support, support_feature, traced, typed
from mjx_lite.collision.types import NOCONTACT, Contacts, Distance, GeomInfo, GType, Scalar, Vec3
from mjx_lite.math import dot3, safe_norm
from mjx_lite.types import GeomType

GENERAL_NCON = 1
_POLYTOPES = (GeomType.BOX, GeomType.MESH)


def _apart(g1: GeomInfo, g2: GeomInfo, margin: Scalar | None) -> tuple[Scalar, Scalar]:
    """Whether two boxes or meshes are farther apart than the margin by their bounding spheres about their positions
    (a box's half diagonal, a mesh's farthest vertex), so that no GJK/EPA is needed, and the gap between those
    spheres (a lower bound of their distance)."""
    def rad(g):
        return safe_norm(g.size) if g.vert is None else jp.sqrt(jp.max(dot3(g.vert, g.vert)))

    gap = safe_norm(g1.pos - g2.pos) - rad(g1) - rad(g2)
    return gap > (0.0 if margin is None else margin), gap


def collide(t1: GType, t2: GType, g1: GeomInfo, g2: GeomInfo, margin: Scalar | None = None, curved: bool | None = None,
            *, sat_budget: int, skip: Scalar | None = None, epa_limit: Scalar | None = None) -> Distance:
    """(dist (), pos (3,), normal (3,) from geom1 to geom2) of two convex geoms. Polytope pairs (box, mesh; static
    types) whose separating-axis test costs at most `sat_budget` (`sat_cost`; the model's `m.config.sat_budget`), and
    sphere-mesh and capsule-mesh pairs (the core point or segment, `segment_sat`), take their penetration from
    separating axes and run GJK only where they are apart by at most `margin` (the detection distance; where it is
    given): farther apart, dist is the separating axes' lower bound on the distance, beyond the margin, with that axis
    and a point between the two bodies (no contact either way). Others run GJK/EPA, and pairs with a curved shape
    (ellipsoid, cylinder) then refine the normal (`refine_normal`), after a shorter EPA (EPA_ITERATIONS_CURVED) where
    the other shape is no mesh, or a small one (`small_mesh`; against a larger mesh the refinement looks only at the
    kinks near its current normal, and from a deep EPA_ITERATIONS_CURVED normal it can end a few 1e-4 off:
    EPA_ITERATIONS there). `curved`, for traced types: every pair has a curved shape and no mesh (True), no pair has a
    curved shape (False), or either (None: EPA_ITERATIONS, refined where curved); static types decide it themselves.
    `skip` (() bool, polytope pairs only): the caller's broadphase found the pair out of reach (its bounding boxes
    apart by more than the margin): no GJK/EPA loop runs for it and, without separating axes, dist is NOCONTACT
    (beyond any margin); None: the bounding spheres about the positions decide (`_apart`).
    `epa_limit` (() int, traced; GJK/EPA pairs only): the pair's own EPA iteration count, at most EPA_ITERATIONS
    (the scan runs EPA_ITERATIONS, those beyond the limit are no-ops: `epa.epa`'s `limit`); None: as above."""
    dt = g1.pos.dtype
    if isinstance(t1, int) and isinstance(t2, int):
        has_curved = t1 in CURVED or t2 in CURVED
        big_mesh = any(t == GeomType.MESH and not small_mesh(t, g) for t, g in ((t1, g1), (t2, g2)))
        curved = None if has_curved and big_mesh else has_curved
    tol = jp.asarray(1e-10 if dt == jp.float64 else 1e-5, dt)
    epa_tol = jp.asarray(1e-9 if dt == jp.float64 else 1e-5, dt)

    def sup(d):
        return support(t1, g1, d), support(t2, g2, -d)

    tilt = jp.array([0.5377, 0.3183, 0.7812], dt)
    v0 = g1.pos - g2.pos
    # a generic tilt of the first direction: axis-aligned directions hit flat caps/faces at their centres, from
    # which GJK can stall on the boundary (touching) of an overlapping pair (e.g. coaxial cylinders)
    v0 = v0 + 1e-2 * safe_norm(v0) * tilt
    v0 = jp.where(jp.sum(v0 * v0) > 1e-20, v0, jp.array([1.0, 0.0, 0.0], dt))

    def separated(w, wa, mask, v, lam, inside):  # nearest points
        vn = safe_norm(v)
        return vn, -v / jp.where(vn > 0, vn, 1.0), lam @ wa, lam @ wa - v

    static = isinstance(t1, int) and isinstance(t2, int)
    sat = None  # (depth, normal, point) of the cores by separating axes, where they are exact
    s1, s2 = (sat_tables(t1, g1), sat_tables(t2, g2)) if static else (None,) * 2
    if s1 is not None and s2 is not None and sat_cost(s1, s2) <= sat_budget:  # polytopes (cheaper than EPA)
        sat = polytope_sat(g1, s1, g2, s2)
    elif static and t1 in (GeomType.SPHERE, GeomType.CAPSULE) and t2 == GeomType.MESH and g2.edge is not None:
        sat = segment_sat(t1, g1, g2)  # a sphere's centre or a capsule's segment into a hull
    if sat is not None:
        # the separation along the best axis (-depth) bounds the distance from below: GJK only within the margin
        depth, n_pen, p_pen = sat
        r1 = radius(t1, g1.size)  # 0 for polytopes
        apart = depth <= 0
        skip = (~apart if margin is None else ~apart | (-depth - r1 > margin)) | (False if skip is None else skip)
        # GJK starts along the best separating axis (geom2 towards geom1; tilted as v0): fewer iterations than
        # from the centres' difference (500-vertex hull, batch 256: at most 10-11 instead of 12-13)
        near_gjk, _ = gjk_polytopes(sup, -n_pen + 1e-2 * tilt, tol, skip)
        vn, n_sep, a_sep, b_sep = separated(*near_gjk)
        use_gjk = ~skip & ~near_gjk[5]
        normal = jp.where(use_gjk, n_sep, n_pen)
        pos = jp.where(use_gjk, 0.5 * (a_sep + b_sep), p_pen) + 0.5 * r1 * normal
        return jp.where(use_gjk, vn, -depth) - r1, pos, normal
    dummy = jp.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [-1.0, -1.0, -1.0]], dt)
    if static and t1 in _POLYTOPES and t2 in _POLYTOPES:  # early exit; derivatives from the final features
        if skip is None:
            far, gap = _apart(g1, g2, margin)
        else:  # the broadphase's verdict (tighter than the spheres; their vertex scan is not repeated)
            far, gap = jp.asarray(skip), jp.asarray(NOCONTACT, dt)
        (w, wa, mask, v, lam, inside), dirs = gjk_polytopes(sup, v0, tol, far)
        vn, n_sep, a_sep, b_sep = separated(w, wa, mask, v, lam, inside)
        # apart: the spheres' gap (beyond the margin: no contact), along the centres
        n_far = (g2.pos - g1.pos) / jp.maximum(safe_norm(g2.pos - g1.pos), 1e-30)
        vn, n_sep = jp.where(far, gap, vn), jp.where(far, n_far, n_sep)
        a_sep, b_sep = jp.where(far, g1.pos, a_sep), jp.where(far, g2.pos, b_sep)
        tet, teta, tet_ok, tdir = complete_simplex(sup, w, wa, mask, dirs)
        near = ~inside & (vn <= tol) & (jp.sum(mask) >= 2) & tet_ok
        run = (inside | near) & ~far
        safe_w = jp.where(inside, w, jp.where(near, tet, dummy))
        safe_dir = jp.where(inside, dirs, jp.where(near, tdir, dummy))
        depth, n_pen, a_pen, b_pen = epa_polytopes(sup, safe_w, jp.where(inside, wa, teta), safe_dir, epa_tol, ~run)
    else:
        w, wa, mask, v, lam, inside = gjk(sup, v0, tol)
        vn, n_sep, a_sep, b_sep = separated(w, wa, mask, v, lam, inside)
        # the origin within tol of a GJK segment or triangle: touching or penetrating, which EPA tells from a
        # tetrahedron completed around it (in float32, tol = 1e-5 stops GJK on such a face inside deep overlaps)
        tet, teta, tet_ok = complete_simplex(sup, w, wa, mask)
        near = ~inside & (vn <= tol) & (jp.sum(mask) >= 2) & tet_ok
        # penetrating: EPA (run on a valid tetrahedron in every case; its result is selected only when inside or
        # near)
        safe_w = jp.where(inside, w, jp.where(near, tet, dummy))
        iterations = EPA_ITERATIONS_CURVED if curved and epa_limit is None else EPA_ITERATIONS
        depth, n_pen, a_pen, b_pen = epa(sup, safe_w, jp.where(inside, wa, teta), epa_tol, iterations, epa_limit)
    inside = inside | (near & (depth > 0))
    dist = jp.where(inside, -depth, vn)
    normal = jp.where(inside, n_pen, n_sep)
    a = jp.where(inside, a_pen, a_sep)
    b = jp.where(inside, b_pen, b_sep)
    if curved is not False:  # some pairs may have a curved shape
        n_ref, h_ref, a_ref, b_ref = refine_normal(t1, t2, g1, g2, normal)
        refined = jp.any(n_ref != normal)
        if curved is None:
            refined = refined & ((t1 == CURVED[0]) | (t1 == CURVED[1]) | (t2 == CURVED[0]) | (t2 == CURVED[1]))
        # witness points: the support point of a shape whose support is unique, the other one h along the normal;
        # two crossing segments (capsule, cylinder sides, box edges): their nearest points; else (lines or faces in
        # contact) GJK/EPA's, moved with the normal about their midpoint
        u1, c1, h1, seg1 = support_feature(t1, g1, n_ref)
        u2, c2, h2, seg2 = support_feature(t2, g2, -n_ref)
        x1, x2, det = segments_closest(c1, h1, c2, h2)
        crossing = seg1 & seg2 & (det > 1e-6 * dot3(h1, h1) * dot3(h2, h2))
        mid = jp.where(crossing, 0.5 * (c1 + x1 * h1 + c2 + x2 * h2), 0.5 * (a + b))
        a_new = jp.where(u1, a_ref, jp.where(u2, b_ref + h_ref * n_ref, mid + 0.5 * h_ref * n_ref))
        b_new = jp.where(u2, b_ref, a_new - h_ref * n_ref)
        dist = jp.where(refined, -h_ref, dist)
        normal = jp.where(refined, n_ref, normal)
        a = jp.where(refined, a_new, a)
        b = jp.where(refined, b_new, b)
    r1, r2 = radius(t1, g1.size), radius(t2, g2.size)
    dist = dist - r1 - r2
    a = a + normal * r1
    b = b - normal * r2
    return dist, 0.5 * (a + b), normal


def one_contact(dist: Scalar, pos: Vec3, normal: Vec3) -> Contacts:
    """One contact (dist (), pos (3,), normal (3,)) as Contacts of k = 1 (default tangent)."""
    return Contacts(dist[None], pos[None], normal[None], jp.zeros((1, 3), pos.dtype))


def one_contact_rows(dist: jax.Array, pos: jax.Array, normal: jax.Array) -> Contacts:
    """`one_contact` of n pairs at once: dist (n,), pos (n, 3), normal (n, 3) as Contacts of (n, 1) rows."""
    return Contacts(dist[:, None], pos[:, None], normal[:, None], jp.zeros_like(pos)[:, None])


def general(g1: GeomInfo, g2: GeomInfo, margin: Scalar, curved: bool | None = None, *, types: tuple | None = None
            ) -> Contacts:  # fmt: skip
    """One contact from GJK/EPA. The geom types are traced (GeomInfo.gtype), so one compiled collider serves
    every general pair type of a model (`curved`: as `collide`'s; the driver groups the pairs with a curved shape
    and no mesh (`general_curved`) apart from the others (`general`, or `general_plain` where none is curved)).
    types: (geom1's, geom2's) static tuples of the types each side may take (None: any): the support maps branch over
    those only (`support.traced`: the types stay traced, so the values are those of any-type branches; the
    Shadow Hand's ellipsoid-mesh pairs: 2 support maps per side instead of 6)."""
    t1, t2 = (g1.gtype, g2.gtype) if types is None else (traced(g1.gtype, types[0]), traced(g2.gtype, types[1]))
    return one_contact(*collide(t1, t2, g1, g2, curved=curved, sat_budget=0))  # traced types: no SAT


def general_curved(g1: GeomInfo, g2: GeomInfo, margin: Scalar, *, types: tuple | None = None) -> Contacts:
    """`general` for pairs that all have a curved shape (ellipsoid, cylinder) and no mesh: shorter EPA, refined
    normal. types: (geom1's, geom2's) static tuples of the types each side may take (None: any), so that the support
    maps branch over the types present only (`support.typed`; the driver binds them per model)."""
    if types is not None:
        t1, t2 = typed(g1.gtype, types[0]), typed(g2.gtype, types[1])
        if isinstance(t1, int) and isinstance(t2, int):  # one type pair: `collide` decides from the static types
            return one_contact(*collide(t1, t2, g1, g2, sat_budget=0))
        return one_contact(*collide(t1, t2, g1, g2, curved=True, sat_budget=0))
    return general(g1, g2, margin, curved=True)


def general_mixed(g1: GeomInfo, g2: GeomInfo, margin: Scalar, short: Scalar, *, types: tuple) -> Contacts:
    """`general_curved` and `general` in one program (the driver's shared distance stage of the curved pairs
    without a mesh and the GJK/EPA pairs with one, `driver._shared_distances`): the geom types traced per pair
    (`support.traced` over types = (geom1's, geom2's) static tuples), the normal refined where a shape is curved,
    and each pair's own EPA iteration count: short (() bool, per pair) EPA_ITERATIONS_CURVED, the pairs of
    `general_curved` (curved, no mesh), else EPA_ITERATIONS, those of `general` (the same values as their own
    programs': `epa.epa`'s `limit`)."""
    t1, t2 = traced(g1.gtype, types[0]), traced(g2.gtype, types[1])
    limit = jp.where(short, EPA_ITERATIONS_CURVED, EPA_ITERATIONS)
    return one_contact(*collide(t1, t2, g1, g2, curved=None, sat_budget=0, epa_limit=limit))


def general_plain(g1: GeomInfo, g2: GeomInfo, margin: Scalar, *, types: tuple | None = None) -> Contacts:
    """`general` for pairs without a curved shape (box-mesh and mesh-mesh with multiccd disabled): EPA alone."""
    return general(g1, g2, margin, curved=False, types=types)


def sphere_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Sphere-mesh: one contact, the sphere's centre against the mesh's hull (MuJoCo runs GJK/EPA; this is their
    converged answer): inside the hull the least deep face plane (exact), outside GJK only within the margin
    (`collide`, `segment_sat`)."""
    return one_contact(*collide(GeomType.SPHERE, GeomType.MESH, g1, g2, margin, sat_budget=0))  # not a polytope pair


def capsule_mesh_single(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Capsule-mesh with multiccd disabled: the single contact (separating axes, GJK within the margin: `collide`)."""
    return one_contact(*collide(GeomType.CAPSULE, GeomType.MESH, g1, g2, margin, sat_budget=0))  # not a polytope pair
