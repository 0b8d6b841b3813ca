"""Box-mesh and mesh-mesh contacts with MuJoCo 4's multiccd face manifolds (up to 4 points per pair).

From the pair's normal (`general.collide`: separating axes within the model's sat budget, else GJK/EPA), the
feature (vertex, edge or face) of each geom along it, then a face-face manifold, an edge-face one, or the single
contact (see `_polyhedral`). Clipping and reduction are `manifold.py`'s; faces and polygons `polytope.py`'s.
Both colliders take `sat_budget` (the model's `m.config.sat_budget`), which the driver binds per group.
Shapes: w (V, 3) world vertices; tris (T, 3); normals (3,); Contacts of MULTI_NCON rows.
"""

from __future__ import annotations

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
from mjx_lite.collision.types import Contacts, GeomInfo, Ids, Mask, Points, Scalar, Values, Vec3
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


def _polyhedral(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin: Scalar, sat_budget: int) -> Contacts:
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


def _manifold(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist0: Scalar, pos0: Vec3, n: Vec3
              ) -> Contacts:
    """The second half of `_polyhedral`: the manifold from the pair's single contact (dist0 (), pos0 (3,), normal n
    (3,) from geom1 to geom2, `collide`'s). A pair beyond the margin (dist0 > margin: no contact, its rows are
    dropped) gets no manifold: its face clipping and polygon reduction loops do not run (under vmap they would run
    as long as any pair's, e.g. two flat pads facing each other from afar)."""
    dt = pos0.dtype
    w1, tri1 = polyhedron(t1, g1)
    w2, tri2 = polyhedron(t2, g2)
    scale = jp.maximum(jp.max(jp.abs(w1 - g1.pos)), jp.max(jp.abs(w2 - g2.pos)))
    tol = 1e-6 * scale
    nt1, off1, area1 = hull_normals(t1, g1)
    nt2, off2, area2 = hull_normals(t2, g2)
    # faces are chosen among face planes (one triangle each): pl (F,) triangle ids, pn (F, 3) normals, po offsets
    pl1, pl2 = FacePlanes(t1, g1, tri1).reps(area1), FacePlanes(t2, g2, tri2).reps(area2)
    pn1, po1, pn2, po2 = nt1[pl1], off1[pl1], nt2[pl2], off2[pl2]
    sup1, dim1, cid1, cand1, hull1, v1 = _feature(w1, tri1, pn1, po1, lambda v: vertex_planes(t1, g1, v), n, tol)
    sup2, dim2, cid2, cand2, hull2, v2 = _feature(w2, tri2, pn2, po2, lambda v: vertex_planes(t2, g2, v), -n, tol)
    # face-face: the most anti-parallel pair of faces through the two features
    dots = outer3(pn1[cid1], pn2[cid2])  # (Dp1, Dp2)
    okff = cand1[:, None] & cand2[None, :] & (dots < -FACE_COS)
    ij = jp.argmin(jp.where(okff, dots, jp.inf))
    fi, fj = cid1[ij // dots.shape[1]], cid2[ij % dots.shape[1]]
    live = dist0 <= margin  # in contact: only then a manifold (MuJoCo's multiccd runs for a pair in contact)
    face_face = live & jp.any(okff)
    # edge-face: edges at the lower-dimensional feature against the faces through the other one
    end1, nbr1, e1 = _edges_at(w1, nt1, vertex_edges(t1, g1, v1), v1)
    end2, nbr2, e2 = _edges_at(w2, nt2, vertex_edges(t2, g2, v2), v2)
    nbr1 = nbr1 & ((dim1 == 1) | sup1[end1])  # an edge feature: its own edge only
    nbr2 = nbr2 & ((dim2 == 1) | sup2[end2])
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
    # the plane (a convex hull's plane meets it only there)
    f1 = jp.where(face_face, fi, f1e)
    f2 = jp.where(face_face, fj, f2e)
    n1f, n2f = pn1[f1], pn2[f2]
    m1 = hull1 & (jp.abs(dot3(w1, n1f) - po1[f1]) <= tol)
    m2 = hull2 & (jp.abs(dot3(w2, n2f) - po2[f2]) <= tol)
    # the two faces' vertices, compacted to nv rows (a face has at most its polygon's vertices; the clipper is
    # quadratic in its rows, so it must not see every hull vertex)
    nv = max(face_rows(t1, g1, w1.shape[0]), face_rows(t2, g2, w2.shape[0]), 2)
    (w1p, m1p), (w2p, m2p) = face_vertices(w1, m1, nv), face_vertices(w2, m2, nv)
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
    ti, tj = pl1[fi], pl2[fj]
    (fp1, fn1), (fp2, fn2) = face_polygon(t1, g1, ti), face_polygon(t2, g2, tj)  # every box and mesh triangle has one
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


def mesh_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar, *, sat_budget: int) -> Contacts:
    """Mesh-mesh: face-face manifold (up to 4), edge on face (2), else the single contact (see `_polyhedral`).
    `sat_budget`: the model's `m.config.sat_budget` (bound by the driver)."""
    return _polyhedral(GeomType.MESH, GeomType.MESH, g1, g2, margin, sat_budget)


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


def mesh_mesh_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3) -> Contacts:
    """The second stage of `mesh_mesh` (see `box_mesh_manifold`)."""
    return _manifold(GeomType.MESH, GeomType.MESH, g1, g2, margin, dist, pos, normal)


# collider -> (distance stage, manifold stage): the driver may run the (costly) manifold only on the pairs whose
# distance is within the margin, as MuJoCo does (mjc_Convex computes the manifold only for a pair in contact)
STAGES = {box_mesh: (box_mesh_distance, box_mesh_manifold), mesh_mesh: (mesh_mesh_distance, mesh_mesh_manifold)}
