"""Cylinder pairs (cylinder-box, -cylinder, -mesh; capsule-cylinder, capsule-mesh): MuJoCo 4's multiccd manifolds.

MuJoCo 4 approximates a cylinder cap by a regular 16-gon (vertex k at angle 2 pi k / 16 in the geom frame) and its
side by the axis-parallel segment through the support point. Probing MuJoCo 4.0 gives the rules reproduced here:
  * face-face (cap or box/mesh face of geom1 against a face of geom2, normals within 1 - cos = 0.004): geom1's face
    is clipped by the side planes of geom2's face; each clipped point p gets its own depth to geom2's face plane
    (along geom2's face normal n2, which gives the contact normal -n2, whichever face the GJK/EPA normal is);
  * edge-face (cylinder side or capsule segment against a face, |axis . face normal| < 0.0888): the segment is
    clipped by the face's side planes the same way (the face is the reference, whichever geom it belongs to);
  * points deeper than the detection margin are dropped; more than 4 are reduced to a largest-area quadrilateral.
Otherwise (edges crossing, curved sides, tilts beyond the tolerances) the single GJK/EPA contact (`general.collide`)
is kept. Clipping and reduction are `manifold.py`'s.
Shapes: cap and face vertices (K, 3) with masks (K,); normals (3,); Contacts of CYL_NCON rows.
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite.collision.general import collide
from mjx_lite.collision.manifold import EDGE_SIN, FACE_COS, clip_to_face, face_manifold, manifold_contacts, reduce_quad
from mjx_lite.collision.polytope import (
    face_polygon,
    face_rows,
    face_toward,
    face_vertices,
    local_polyhedron,
    pad_rows,
    triangle_normals,
)
from mjx_lite.collision.support import choices, typed
from mjx_lite.collision.types import Contacts, GeomInfo, GType, Ids, Mask, Points, Scalar, Vec3
from mjx_lite.math import outer3, safe_norm
from mjx_lite.types import GeomType

CYL_NCON = 4
_CYL_NPOLY = 16  # cap polygon vertices
_CYL_ANG = 2 * np.pi * np.arange(_CYL_NPOLY) / _CYL_NPOLY


def _cyl_cap(g: GeomInfo, u: Vec3) -> tuple[Points, Vec3]:
    """The cap of a cylinder facing direction u: world vertices (16, 3) in MuJoCo's order (clockwise about the
    outward normal, from the geom's x axis), outward normal (3,)."""
    a = g.mat[:, 2]
    s = jp.where(jp.dot(a, u) >= 0, 1.0, -1.0).astype(u.dtype)
    r, h = g.size[0], g.size[1]
    ang = jp.asarray(_CYL_ANG, u.dtype)
    local = jp.stack([r * jp.cos(ang), -s * r * jp.sin(ang), jp.broadcast_to(s * h, ang.shape)], axis=-1)
    return g.pos + local @ g.mat.T, s * a


def _cyl_side(g: GeomInfo, u: Vec3, radius: Scalar) -> Points:
    """Side segment of a cylinder (radius r) or capsule core (radius 0) farthest along u: endpoints (2, 3)."""
    a = g.mat[:, 2]
    rad = u - jp.dot(u, a) * a
    rn = safe_norm(rad)
    rad = jp.where(rn > 1e-12, rad / jp.where(rn > 1e-12, rn, 1.0), 0.0)
    h = g.size[1]
    c = g.pos + radius * rad
    return jp.stack([c - h * a, c + h * a])


def _is(gtype: GType, t: int) -> bool | Scalar:
    """Whether geom type `gtype` (a static int or a `support.TracedType`) is t: a Python bool where that is known at
    trace time (a static type, or t not among the traced type's choices), else a traced () bool."""
    if isinstance(gtype, int):
        return gtype == t
    return (gtype == t) if t in choices(gtype) else False


def face_of_any(gtype: GType, g: GeomInfo, u: Vec3) -> tuple[Points, Mask, Vec3, Vec3, Points, Ids, Scalar]:
    """`face_of` for a static type, or for a traced one (`support.TracedType`): every choice's face, its arrays
    padded to the widest choice's rows (vertices by their first row, masks by False, polygon ids by the first id), the
    pair's own type's selected."""
    if isinstance(gtype, int):
        return face_of(gtype, g, u)
    faces = [face_of(t, g, u) for t in gtype.choices]
    out = []
    for k in range(7):
        parts = [f[k] for f in faces]
        if parts[0].ndim:
            n = max(x.shape[0] for x in parts)
            parts = [pad_rows(x, n, False if x.dtype == bool else x[0]) for x in parts]
        out.append(jp.select([gtype == t for t in gtype.choices], parts, parts[0]))
    return tuple(out)


def face_of(gtype: int, g: GeomInfo, u: Vec3) -> tuple[Points, Mask, Vec3, Vec3, Points, Ids, Scalar]:
    """A face of geom g facing u: (its vertices compacted to a static bound (K, 3) with mask (K,), outward normal
    (3,), a point of the face (3,), every vertex (V, 3), its polygon in MuJoCo's face order (vertex ids of the (V, 3)
    array (P,), count (); 0 where the mesh has no polygon tables))."""
    if gtype == GeomType.CYLINDER:
        w, nrm = _cyl_cap(g, u)
        ids = jp.arange(w.shape[0])
        return w, jp.ones(w.shape[0], bool), nrm, w[0], w, ids, jp.asarray(w.shape[0], jp.int32)
    local, tris = local_polyhedron(gtype, g)
    w = g.pos + outer3(local, g.mat)
    if gtype == GeomType.MESH and g.facenormal is not None and g.mesh is not None:
        nl = g.facenormal[g.mesh]  # the side's table (once per mesh, `refine.mesh_kink_tables`)
    else:
        nl = triangle_normals(local, tris)[0]
    nrm, p0, mask, t = face_toward(w, tris, nl, g.mat, u)
    wc, mc = face_vertices(w, mask, face_rows(gtype, g, w.shape[0]))
    fp, fn = face_polygon(gtype, g, t)
    if fp is None:
        return wc, mc, nrm, p0, w, jp.zeros(3, jp.int32), jp.zeros((), jp.int32)
    return wc, mc, nrm, p0, w, fp, fn


def _cylinder_pair(t1: int, t2: int, g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """CYL_NCON contacts of a cylinder or capsule (geom1, t1) and a cylinder, box or mesh (geom2, t2): the face-face
    or edge-face manifold of the module docstring, else the single contact of `collide`."""
    dist0, pos0, n = collide(t1, t2, g1, g2, margin, sat_budget=0)  # geom1 a cylinder or capsule: no polytope pair
    return _cylinder_manifold(t1, t2, g1, g2, margin, dist0, pos0, n)


def _cylinder_manifold(t1: GType, t2: GType, g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist0: Scalar, pos0: Vec3,
                       n: Vec3) -> Contacts:  # fmt: skip
    """The second half of `_cylinder_pair`: its contacts from the pair's single contact (dist0 (), pos0 (3,), normal
    n (3,) from geom1 to geom2, `collide`'s). t1 (capsule or cylinder), t2 (cylinder, box or mesh): static types, or
    traced ones (`support.TracedType`, `curved_manifold`): then the features of every type the pair may take are
    computed and the pair's own selected (the same values as its static collider's)."""
    dt = pos0.dtype
    cap1, cyl1, cyl2 = _is(t1, GeomType.CAPSULE), _is(t1, GeomType.CYLINDER), _is(t2, GeomType.CYLINDER)
    # geom2's face toward geom1 (every t2 here has faces); geom1's face toward geom2 (not for a capsule)
    w2, m2, n2, p2, v2, poly2, npoly2 = face_of_any(t2, g2, -n)
    if cap1 is True:
        w1, m1, n1, p1 = w2, jp.zeros_like(m2), -n2, p2  # placeholders: a capsule has no face
        has_face1 = jp.zeros((), bool)
    else:  # a traced capsule gets its core's cylinder cap (finite), never used: it has no face
        w1, m1, n1, p1, v1, poly1, npoly1 = face_of(GeomType.CYLINDER if cyl1 is not False else t1, g1, n)
        has_face1 = jp.ones((), bool) if cap1 is False else ~cap1
    facing = jp.maximum(jp.dot(n1, n), -jp.dot(n2, n)) > FACE_COS  # the contact normal is one of the faces'
    face_face = has_face1 & (jp.dot(n1, n2) < -FACE_COS) & facing
    # edge of geom1 (cylinder side / capsule core) on geom2's face
    r1 = g1.size[0]
    if cap1 is not False or cyl1 is not False:
        axis = g1.mat[:, 2]
        # a capsule: the line along its axis through its support point along n (MuJoCo 4, probed)
        side = _cyl_side(g1, -n2, r1) if cyl1 is not False else None
        if cap1 is not False:
            ends = jp.stack([g1.pos - g1.size[1] * axis, g1.pos + g1.size[1] * axis])
            core = ends + r1 * (n - jp.dot(n, axis) * axis)
        e1 = side if cap1 is False else core if cyl1 is False else jp.where(cyl1, side, core)
        edge1 = (jp.abs(jp.dot(axis, n2)) < EDGE_SIN) & (-jp.dot(n2, n) > FACE_COS)
    else:
        e1, edge1 = jp.zeros((2, 3), dt), jp.zeros((), bool)
    # edge of geom2 (cylinder side) on geom1's face
    if cyl2 is not False:
        e2 = _cyl_side(g2, -n1, g2.size[0])
        edge2 = has_face1 & (jp.abs(jp.dot(g2.mat[:, 2], n1)) < EDGE_SIN) & (jp.dot(n1, n) > FACE_COS) & cyl2
    else:
        e2, edge2 = jp.zeros((2, 3), dt), jp.zeros((), bool)
    edge1 = edge1 & ~face_face
    edge2 = edge2 & ~face_face & ~edge1
    # reference: geom2's face, except for an edge of geom2 on geom1's face
    nv = max(w1.shape[0], w2.shape[0])
    w1p, w2p = pad_rows(w1, nv, w1[0]), pad_rows(w2, nv, w2[0])
    m1p, m2p = pad_rows(m1, nv, False), pad_rows(m2, nv, False)
    emask = jp.arange(nv) < 2
    e1p, e2p = pad_rows(e1, nv, e1[0]), pad_rows(e2, nv, e2[0])
    wr = jp.where(edge2, w1p, w2p)
    rmask = jp.where(edge2, m1p, m2p)
    nr = jp.where(edge2, n1, n2)
    r0 = jp.where(edge2, p1, p2)
    wi = jp.where(face_face, w1p, jp.where(edge1, e1p, e2p))
    imask = jp.where(face_face, m1p, emask)
    pts, ok, depth = clip_to_face(
        wr,
        rmask,
        nr,
        r0,
        wi,
        imask,
        jp.where(face_face, n1, -nr),
        margin,
        inc_poly=face_face,
        cdir=jp.where(face_face, -n1, nr),
    )
    ok = ok & (depth <= margin)
    idx, valid = reduce_quad(pts, ok, nr)
    pts, depth = pts[idx], depth[idx]
    idx = jp.arange(idx.shape[0])
    if cap1 is not True:  # face-face: MuJoCo's own points (as `polyhedral._polyhedral`), its cap being a 16-gon
        x2, ok2 = face_manifold(v1, v2, poly1, npoly1, poly2, npoly2, n1, margin, face_face & (npoly2 > 0))
        x1 = x2 - n1 * ((x2 - v1[poly1[0]]) @ n1)[:, None]  # onto geom1's cap plane along n1
        use = face_face & (npoly2 > 0)
        pts = jp.where(use, x1, pts)
        depth = jp.where(use, (x1 - p2) @ n2, depth)
        valid = jp.where(use, ok2, valid)
    return manifold_contacts(pts, depth, idx, valid, nr, edge2, face_face | edge1 | edge2, dist0, pos0, n, dt)


def capsule_cylinder(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Capsule-cylinder: 2 contacts for a capsule lying on a cap (within 0.0888 rad), else GJK/EPA."""
    return _cylinder_pair(GeomType.CAPSULE, GeomType.CYLINDER, g1, g2, margin)


def capsule_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Capsule-mesh: 2 contacts for a capsule lying on a mesh face (within 0.0888 rad; MuJoCo 4's multiccd edge-face
    manifold), else GJK/EPA."""
    return _cylinder_pair(GeomType.CAPSULE, GeomType.MESH, g1, g2, margin)


def cylinder_cylinder(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Cylinder-cylinder: cap-cap manifold (up to 4), side on cap (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.CYLINDER, g1, g2, margin)


def cylinder_box(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Cylinder-box: cap-face manifold (up to 4), side on face (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.BOX, g1, g2, margin)


def cylinder_mesh(g1: GeomInfo, g2: GeomInfo, margin: Scalar) -> Contacts:
    """Cylinder-mesh: cap-face manifold (up to 4), side on face (2), else GJK/EPA."""
    return _cylinder_pair(GeomType.CYLINDER, GeomType.MESH, g1, g2, margin)


def capsule_cylinder_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3
                              ) -> Contacts:  # fmt: skip
    """The manifold stage of `capsule_cylinder` from its GJK/EPA contact (dist (), pos (3,), normal (3,)):
    capsule_cylinder(g1, g2, margin) == capsule_cylinder_manifold(g1, g2, margin, *collide(...)). The driver runs the
    GJK/EPA stage of every curved pair without a mesh in one shared program (`general.general_curved`)."""
    return _cylinder_manifold(GeomType.CAPSULE, GeomType.CYLINDER, g1, g2, margin, dist, pos, normal)


def cylinder_cylinder_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3
                               ) -> Contacts:  # fmt: skip
    """The manifold stage of `cylinder_cylinder` (see `capsule_cylinder_manifold`)."""
    return _cylinder_manifold(GeomType.CYLINDER, GeomType.CYLINDER, g1, g2, margin, dist, pos, normal)


def cylinder_box_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3
                          ) -> Contacts:  # fmt: skip
    """The manifold stage of `cylinder_box` (see `capsule_cylinder_manifold`)."""
    return _cylinder_manifold(GeomType.CYLINDER, GeomType.BOX, g1, g2, margin, dist, pos, normal)


def capsule_mesh_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3
                          ) -> Contacts:  # fmt: skip
    """The manifold stage of `capsule_mesh` from its single contact (`general.capsule_mesh_single`'s dist, pos,
    normal; see `capsule_cylinder_manifold`)."""
    return _cylinder_manifold(GeomType.CAPSULE, GeomType.MESH, g1, g2, margin, dist, pos, normal)


def cylinder_mesh_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3
                           ) -> Contacts:  # fmt: skip
    """The manifold stage of `cylinder_mesh` from its GJK/EPA contact (see `capsule_cylinder_manifold`); the driver
    runs that stage with the general pairs' against meshes (`general.general`) and this one with capsule-mesh's."""
    return _cylinder_manifold(GeomType.CYLINDER, GeomType.MESH, g1, g2, margin, dist, pos, normal)


# collider -> its manifold stage, for the pairs whose GJK/EPA stage is the curved pairs' shared one (the driver's
# `_shared_distances`: one compiled GJK/EPA for every curved pair type without a mesh); the driver runs these
# manifolds as one program too (`curved_manifold` on traced types, `_shared_manifolds`)
CURVED_MANIFOLDS = {capsule_cylinder: capsule_cylinder_manifold, cylinder_cylinder: cylinder_cylinder_manifold,
                    cylinder_box: cylinder_box_manifold}  # fmt: skip


def curved_manifold(g1: GeomInfo, g2: GeomInfo, margin: Scalar, dist: Scalar, pos: Vec3, normal: Vec3, *,
                    types: tuple) -> Contacts:  # fmt: skip
    """The manifold stage of every curved pair type without a mesh (capsule-cylinder, cylinder-cylinder,
    cylinder-box) in one program: the geom types traced per pair (GeomInfo.gtype), types = (geom1's, geom2's) static
    tuples of the types each side may take (the driver's `_shared_manifolds` binds them per model). One type pair:
    its static manifold (`capsule_cylinder_manifold`, ...); several: `_cylinder_manifold` on traced types, the
    features of each type computed and the pair's own selected (the values of its own manifold)."""
    t1, t2 = typed(g1.gtype, types[0]), typed(g2.gtype, types[1])
    return _cylinder_manifold(t1, t2, g1, g2, margin, dist, pos, normal)
