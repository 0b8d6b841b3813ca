"""Box-mesh and mesh-mesh contacts with MuJoCo 4's multiccd face manifolds (up to 4 points per pair).

From the pair's normal (`general.collide`: separating axes within the model's sat budget, else GJK/EPA), the
feature (vertex, edge or face) of each geom along it, then a face-face manifold, an edge-face one, or the single
contact (see `_polyhedral`). Clipping and reduction are `manifold.py`'s; faces and polygons `polytope.py`'s.
Both colliders take `sat_budget` (the model's `m.config.sat_budget`), which the driver binds per group.
Shapes: w (V, 3) world vertices; tris (T, 3); normals (3,); Contacts of MULTI_NCON rows.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import jax.numpy as jp

from mjx_lite.collision.general import collide
from mjx_lite.collision.manifold import EDGE_SIN, FACE_COS, clip_to_face, face_manifold, manifold_contacts
from mjx_lite.collision.polytope import (
    FACE_ALIGNED,
    FacePlanes,
    face_polygon,
    face_rows,
    face_vertices,
    hull_normals,
    polyhedron,
    top_indices,
    vertex_edges,
    vertex_planes,
)
from mjx_lite.collision.types import Contacts, GeomInfo, Ids, Mask, Points, Scalar, Values, Vec3, info_axes
from mjx_lite.math import dot3, outer3, safe_norm
from mjx_lite.types import GeomType

MULTI_NCON = 4  # contacts per polyhedral pair (MuJoCo reduces larger manifolds to 4)


def _feature(w: Points, tris: Ids, pn: Points, po: Values, vplanes: Callable[[Scalar], Ids], u: Vec3, tol: Scalar
             ) -> tuple[Mask, Scalar, Ids, Mask, Mask, Scalar]:
    """The feature (vertex, edge or face) of a polyhedron supporting direction u, as MuJoCo's EPA reports it.

    Returns (support mask (V,), dim () in {1, 2, 3}, candidate face planes (Dp,) with their mask (Dp,), hull vertex
    mask (V,), the support vertex ()): the candidates are the face planes (normals pn (F, 3), offsets po (F,))
    through the feature (all faces at a vertex, both at an edge, the face itself), i.e. those among the planes at
    the support vertex (vplanes(v): (Dp,)) that hold every support vertex (tested on the first 4 by support value: a
    plane through 3 support vertices of a face is that face's). O(V + T): no table over every plane."""
    nv = w.shape[0]
    valid = jp.zeros(nv, bool).at[tris.reshape(-1)].set(True)  # hull vertices (not padding)
    s = jp.where(valid, dot3(w, u), -jp.inf)
    sup = valid & (s >= jp.max(s) - tol)
    dim = jp.minimum(jp.sum(sup), 3)
    v = jp.argmax(sup)  # the support vertex of lowest id
    ids = vplanes(v)
    top = top_indices(s, min(4, nv))
    on_plane = jp.abs(outer3(w[top], pn[ids]) - po[ids][None, :]) <= tol  # (k, Dp)
    cand = jp.all(on_plane | ~sup[top][:, None], axis=0)
    return sup, dim, ids, cand, valid, v


def _edges_at(w: Points, nt: Points, vedge: Ids, v: Scalar) -> tuple[Ids, Mask, Points]:
    """Hull edges at vertex v: (other ends (De,), mask (De,), unit directions (De, 3)) from the triangle edges at v
    (vedge (De, 3)); a triangulation diagonal of a flat face (both triangles at the edge coplanar) is no edge."""
    ends, ta, tb = vedge[:, 0], vedge[:, 1], vedge[:, 2]
    bent = dot3(nt[ta], nt[tb]) < 1 - FACE_ALIGNED
    e = w[ends] - w[v]
    return ends, bent, e / jp.maximum(safe_norm(e, axis=-1, keepdims=True), 1e-30)


def _polyhedral(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin: Scalar, sat_budget: int, one_table: bool = False
                ) -> Contacts:  # fmt: skip
    """Box-mesh / mesh-mesh contacts as MuJoCo 4 with multiccd (probed): from the pair's normal n (`collide`:
    separating axes within `sat_budget`, else GJK/EPA), the feature of each geom (support vertex, edge or face along
    +-n) and the faces through it; then
      * face-face: a face of geom1 and one of geom2 with n1 . n2 < -0.996: geom2's face polygon clipped by the
        planes through geom1's face edges (Sutherland-Hodgman in MuJoCo's vertex orders: its box corner table, its
        mesh polygons reversed; `face_manifold`), points farther than the margin from geom1's face plane dropped,
        more than 4 reduced to 4 by MuJoCo's polygonQuad local search; each point with its own depth to geom2's face
        plane (taken on geom1's face, straight along n1), normal -n2;
      * else edge-face, for the geom with the lower-dimensional feature (geom1 on ties), an edge at its feature with
        |edge . n_face| < 0.0888 for a face through the other geom's feature: the edge clipped by that face's side
        planes, depths to its plane, normal -+ the face normal;
      * else the single GJK/EPA contact.
    Features are looked up at the support vertex (its few face planes and edges, `hull.vertex_tables`), so the cost
    follows the polygons' sizes, not the hull's: no table over all faces or vertex pairs. A hull triangle that no
    mesh polygon holds (a vertex inside a merged patch of near-coplanar triangles) is its own polygon.
    Known differences: where several faces/edges qualify MuJoCo takes the first in its own order (box: x, y, z edges
    at a corner; mesh: its polygon list, whose order the compiler does not reproduce, e.g. an STL face whose float32
    triangles fall into two normal bins is two coplanar polygons), we the most (anti-)parallel; MuJoCo's features
    come from its EPA face, so where two EPA normals nearly tie (deep, edge on a face's rim) its feature may differ;
    where a clipped edge keeps only its crossing with a side plane MuJoCo reports that point twice (we once)."""
    dist0, pos0, n = collide(t1, t2, g1, g2, margin, sat_budget=sat_budget)
    return _manifold(t1, t2, g1, g2, margin, dist0, pos0, n)


def stackable(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, one_table: bool) -> bool:
    """Whether the two sides of a pair can run one side's work as one program over a side axis (`both_sides`): the
    same static type, per-pair fields of the same shapes, and (where the mesh tables are shared, GeomInfo.mesh) one
    set of tables for both sides (`one_table`: the driver gives a mesh-mesh group's two sides the tables of both
    sides' meshes where their padded shapes agree, `driver._one_table`; g1's are then used for both)."""
    if t1 != t2 or g1.gtype is not None or g2.gtype is not None or (g1.mesh is not None and not one_table):
        return False
    for name in GeomInfo._fields:
        a, b = getattr(g1, name), getattr(g2, name)
        if (a is None) != (b is None):
            return False
        if a is not None and (a.shape != b.shape or a.dtype != b.dtype):
            return False
    return True


def both_sides(fn: Callable, t1: int, g1: GeomInfo, t2: int, g2: GeomInfo, args1: tuple = (), args2: tuple = (),
               one_table: bool = False) -> tuple:  # fmt: skip
    """(fn(t1, g1, *args1), fn(t2, g2, *args2)): where the sides are `stackable`, one call of fn vmapped over a side
    axis of 2 (one compiled copy of the per-side work instead of two; the same values), else two calls."""
    if not stackable(t1, t2, g1, g2, one_table):
        return fn(t1, g1, *args1), fn(t2, g2, *args2)
    axes = info_axes(g1)
    g = GeomInfo(*[x if x is None or a is None else jp.stack([x, y]) for x, y, a in zip(g1, g2, axes)])
    args = jax.tree_util.tree_map(lambda x, y: jp.stack([x, y]), tuple(args1), tuple(args2))
    out = jax.vmap(lambda g, a: fn(t1, g, *a), in_axes=(axes, 0))(g, args)
    return jax.tree_util.tree_map(lambda x: x[0], out), jax.tree_util.tree_map(lambda x: x[1], out)


def _side_hull(t: int, g: GeomInfo) -> tuple:
    """One side's world hull: vertices w (V, 3), triangles (T, 3), triangle normals (T, 3), face planes pl (F,)
    (a triangle each) with their normals pn (F, 3) and offsets po (F,), and max |w - pos| (its size)."""
    w, tri = polyhedron(t, g)
    nt, off, area = hull_normals(t, g)
    pl = FacePlanes(t, g, tri).reps(area)
    return w, tri, nt, pl, nt[pl], off[pl], jp.max(jp.abs(w - g.pos))


def _side_feature(t: int, g: GeomInfo, w: Points, tri: Ids, nt: Points, pn: Points, po: Values, u: Vec3, tol: Scalar
                  ) -> tuple:  # fmt: skip
    """One side's feature along u (`_feature`) and the hull edges at its support vertex (`_edges_at`; an edge
    feature: its own edge only): (sup, dim, cid, cand, hull, v, end, nbr, e)."""
    sup, dim, cid, cand, hull, v = _feature(w, tri, pn, po, lambda v: vertex_planes(t, g, v), u, tol)
    end, nbr, e = _edges_at(w, nt, vertex_edges(t, g, v), v)
    nbr = nbr & ((dim == 1) | sup[end])
    return sup, dim, cid, cand, hull, v, end, nbr, e


def _side_face(t: int, g: GeomInfo, w: Points, hull: Mask, nf: Vec3, of: Scalar, tol: Scalar, tp: Scalar, *,
               rows: int) -> tuple:  # fmt: skip
    """One side's reference face (plane normal nf, offset of): its vertices compacted to `rows` (`face_vertices`),
    and the polygon of its triangle tp (`face_polygon`)."""
    mask = hull & (jp.abs(dot3(w, nf) - of) <= tol)
    return face_vertices(w, mask, rows) + face_polygon(t, g, tp)


def _manifold(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist0: Scalar, pos0: Vec3, n: Vec3,
              one_table: bool = False) -> Contacts:  # fmt: skip
    """The second half of `_polyhedral`: the manifold from the pair's single contact (dist0 (), pos0 (3,), normal n
    (3,) from geom1 to geom2, `collide`'s). A pair beyond the margin (dist0 > margin: no contact, its rows are
    dropped) gets no manifold: its face clipping and polygon reduction loops do not run (under vmap they would run
    as long as any pair's, e.g. two flat pads facing each other from afar). The per-side work (hull, feature, face)
    runs as one program over both sides where they are `stackable` (mesh-mesh: about a third of this stage's
    compiled kernels; `one_table`: both sides' mesh tables are one set, `stackable`)."""
    dt = pos0.dtype
    sides = both_sides(_side_hull, t1, g1, t2, g2, one_table=one_table)
    (w1, tri1, nt1, pl1, pn1, po1, s1), (w2, tri2, nt2, pl2, pn2, po2, s2) = sides
    tol = 1e-6 * jp.maximum(s1, s2)
    f1_, f2_ = both_sides(_side_feature, t1, g1, t2, g2, (w1, tri1, nt1, pn1, po1, n, tol),
                          (w2, tri2, nt2, pn2, po2, -n, tol), one_table)  # fmt: skip
    sup1, dim1, cid1, cand1, hull1, v1, end1, nbr1, e1 = f1_
    sup2, dim2, cid2, cand2, hull2, v2, end2, nbr2, e2 = f2_
    # face-face: the most anti-parallel pair of faces through the two features
    dots = outer3(pn1[cid1], pn2[cid2])  # (Dp1, Dp2)
    okff = cand1[:, None] & cand2[None, :] & (dots < -FACE_COS)
    ij = jp.argmin(jp.where(okff, dots, jp.inf))
    fi, fj = cid1[ij // dots.shape[1]], cid2[ij % dots.shape[1]]
    live = dist0 <= margin  # in contact: only then a manifold (MuJoCo's multiccd runs for a pair in contact)
    face_face = live & jp.any(okff)
    # edge-face: edges at the lower-dimensional feature against the faces through the other one
    c12 = jp.abs(outer3(e1, pn2[cid2]))  # (De1, Dp2)
    ok12 = nbr1[:, None] & cand2[None, :] & (c12 < EDGE_SIN)
    c21 = jp.abs(outer3(e2, pn1[cid1]))  # (De2, Dp1)
    ok21 = nbr2[:, None] & cand1[None, :] & (c21 < EDGE_SIN)
    try1 = (dim1 < 3) & (dim1 <= dim2)
    edge1 = live & ~face_face & try1 & jp.any(ok12)
    edge2 = live & ~face_face & ~try1 & (dim2 < 3) & jp.any(ok21)
    a12 = jp.argmin(jp.where(ok12, c12, jp.inf))
    u1, f2e = end1[a12 // c12.shape[1]], cid2[a12 % c12.shape[1]]
    a21 = jp.argmin(jp.where(ok21, c21, jp.inf))
    u2, f1e = end2[a21 // c21.shape[1]], cid1[a21 % c21.shape[1]]
    # reference face: geom2's (face-face, edge of geom1) or geom1's (edge of geom2); its polygon is every vertex on
    # the plane (a convex hull's plane meets it only there); the two faces' vertices compacted to nv rows (a face
    # has at most its polygon's vertices; the clipper is quadratic in its rows, so it must not see every hull
    # vertex); the face-face polygons those of the triangles ti, tj (every box and mesh triangle has one)
    f1 = jp.where(face_face, fi, f1e)
    f2 = jp.where(face_face, fj, f2e)
    n1f, n2f = pn1[f1], pn2[f2]
    nv = max(face_rows(t1, g1, w1.shape[0]), face_rows(t2, g2, w2.shape[0]), 2)
    ti, tj = pl1[fi], pl2[fj]
    (w1p, m1p, fp1, fn1), (w2p, m2p, fp2, fn2) = both_sides(
        functools.partial(_side_face, rows=nv), t1, g1, t2, g2, (w1, hull1, n1f, po1[f1], tol, ti),
        (w2, hull2, n2f, po2[f2], tol, tj), one_table)  # fmt: skip
    wr = jp.where(edge2, w1p, w2p)
    rmask = jp.where(edge2, m1p, m2p)
    nr = jp.where(edge2, n1f, n2f)
    r0 = jp.where(edge2, w1[tri1[pl1[f1], 0]], w2[tri2[pl2[f2], 0]])
    seg = jp.where(edge1, jp.stack([w1[v1], w1[u1]]), jp.stack([w2[v2], w2[u2]]))
    # the clipper only cuts an edge by a face (face-face comes from the polygons below)
    pts, ok, depth = clip_to_face(wr, rmask, nr, r0, seg, jp.ones(2, bool), -nr, margin, inc_poly=False, cdir=nr)
    # a segment clipped by a convex face has at most 2 points: the first 4 valid are kept
    idx = jax.lax.top_k(jp.where(ok, -jp.arange(ok.shape[0]), -ok.shape[0] - 1), MULTI_NCON)[1]
    valid = ok[idx]
    pts, depth = pts[idx], depth[idx]
    idx = jp.arange(idx.shape[0])
    # face-face: MuJoCo's own points (its polygon orders, clipping and polygonQuad local search)
    x2, ok2 = face_manifold(w1, w2, fp1, fn1, fp2, fn2, pn1[fi], margin, face_face)
    x1 = x2 - pn1[fi] * ((x2 - w1[fp1[0]]) @ pn1[fi])[:, None]  # onto geom1's face plane along n1
    pts = jp.where(face_face, x1, pts)
    depth = jp.where(face_face, (x1 - w2[tri2[tj, 0]]) @ pn2[fj], depth)
    valid = jp.where(face_face, ok2, valid)
    return manifold_contacts(pts, depth, idx, valid, nr, edge2, face_face | edge1 | edge2, dist0, pos0, n, dt)


def box_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar, *, sat_budget: int) -> Contacts:
    """Box-mesh: face-face manifold (up to 4), edge on face (2), else the single contact (see `_polyhedral`).
    `sat_budget`: the model's `m.config.sat_budget` (bound by the driver)."""
    return _polyhedral(GeomType.BOX, GeomType.MESH, g1, g2, margin, sat_budget)


def mesh_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar, *, sat_budget: int, one_table: bool = False) -> Contacts:
    """Mesh-mesh: face-face manifold (up to 4), edge on face (2), else the single contact (see `_polyhedral`).
    `sat_budget`: the model's `m.config.sat_budget`; `one_table`: both sides take one set of mesh tables (`_manifold`;
    both bound by the driver)."""
    return _polyhedral(GeomType.MESH, GeomType.MESH, g1, g2, margin, sat_budget, one_table)


def box_mesh_distance(g1: GeomInfo, g2: GeomInfo, margin: Scalar, skip: Scalar | None = None, *, sat_budget: int
                      ) -> tuple[Scalar, Vec3, Vec3]:
    """The first stage of `box_mesh`: the pair's single contact (dist (), pos (3,), normal (3,)), as `collide`;
    `skip` () bool: the broadphase's out-of-reach verdict (no GJK/EPA loop runs; dist beyond the margin)."""
    return collide(GeomType.BOX, GeomType.MESH, g1, g2, margin, sat_budget=sat_budget, skip=skip)


def mesh_mesh_distance(g1: GeomInfo, g2: GeomInfo, margin: Scalar, skip: Scalar | None = None, *, sat_budget: int
                       ) -> tuple[Scalar, Vec3, Vec3]:
    """The first stage of `mesh_mesh` (see `box_mesh_distance`)."""
    return collide(GeomType.MESH, GeomType.MESH, g1, g2, margin, sat_budget=sat_budget, skip=skip)


def box_mesh_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3) -> Contacts:
    """The second stage of `box_mesh`: its contacts from the first stage's (dist, pos, normal); box_mesh(g1, g2,
    margin) == box_mesh_manifold(g1, g2, margin, *box_mesh_distance(g1, g2, margin))."""
    return _manifold(GeomType.BOX, GeomType.MESH, g1, g2, margin, dist, pos, normal)


def mesh_mesh_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3, *,
                       one_table: bool = False) -> Contacts:  # fmt: skip
    """The second stage of `mesh_mesh` (see `box_mesh_manifold`; `one_table` as `mesh_mesh`'s)."""
    return _manifold(GeomType.MESH, GeomType.MESH, g1, g2, margin, dist, pos, normal, one_table)


# collider -> (distance stage, manifold stage): the driver may run the (costly) manifold only on the pairs whose
# distance is within the margin, as MuJoCo does (mjc_Convex computes the manifold only for a pair in contact)
STAGES = {box_mesh: (box_mesh_distance, box_mesh_manifold), mesh_mesh: (mesh_mesh_distance, mesh_mesh_manifold)}
