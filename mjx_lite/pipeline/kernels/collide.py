"""The primitive colliders (collision/primitive.py) of the pair groups with static slots as one fused kernel:
plane-sphere, plane-capsule, plane-box, sphere-sphere, sphere-capsule, capsule-capsule, sphere-box and capsule-box;
and height field-sphere (collision/hfield.py).

Outputs (per environment), for every row of the covered groups (`covered`, in the pair table's order, each group's
rows pair-major as in Data.contact): dist, pos (3), frame (3 x 3, rows normal and two tangents) and active (0/1),
masked as the collision driver masks them (dist NOCONTACT, pos 0, identity frame on rows that are not contacts); and
per pair of the height-field groups its window overflow (0/1, counted in CONTACTFULL).
The pairs' parameters (friction, solref, solimp, includemargin, ...: the same for every environment unless the Model
is vmapped) come from a second kernel, kernels/contact_params.py, the condims and geom ids from the static pair
table (`driver.row_fields`); `driver.collision` places the groups among the others, which keep their XLA colliders
in the same program, a run of consecutive covered groups as one block of rows (no per-group slices).
Inputs: geom_xpos, geom_xmat (per environment); geom_size, geom_rbound and the pairs' detection margins (margin +
gap, mixed or the explicit pair's: contact_params' output; `driver.detection_margin` where `kernel` is called
without them), and with a height-field group hfield_size and hfield_data, shared by the block unless vmapped.

One loop per collider kind (tables: geom1, geom2, output row, margin index, row in the pair), so the kernel's code
grows with the number of kinds, not of pairs: plane-capsule and capsule-capsule iterate over rows (one sphere test
each: a segment end; the segments' nearest points, or for parallel axes an end of their overlap), plane-box over
pairs (an inner loop over the 8 corners keeps the first four in MuJoCo's corner order with a running count per
lane), the others over pairs (capsule-box: the nearest segment point to the faces and the 12 edges, then the second
point of MuJoCo's corner, edge or face case; two sphere-box rows). Each iteration runs the driver's bounding test
(the plane's signed distance to geom2's centre against its bounding radius, or the two bounding spheres) and the
collider's formulas written per lane (MuJoCo's own inclusion tests where primitive.py marks them `margin_tested`,
dist <= margin for plane-box, sphere-box and capsule-box: the sphere's centre clamped to the box, or inside it the
nearest face, the first of ties), and writes dist, pos, active and the normal and tangent hint; a last pass over all
rows builds the contact frames (frame.make_frame), traced once. Fields equal the XLA path's to round-off.

A height field-sphere group has its own loop (its grid and window sizes are static): per pair the window of cells
under the sphere's box (hfield.group_collider's origin and overflow test), per prism of the window (its contact slot)
the elevations gathered per lane (`launch.IO.gather`), hfield._prism_bound's separating axes, and where the prism may
be within the margin the exact point-prism distance (hfield._point_prism). It is covered when every prism of the
window has its slot (no `Config.hfield_prisms` cap, at most hfield.MAXCONPAIR prisms).

A group is covered when its slots are static (`Group.static_slots`: no broadphase trim, no compaction), its
collider is one of these, and it has one stage; everything else (box-box, cylinders, ellipsoids, meshes, height
fields against other geoms, trimmed groups) runs the XLA colliders. Derivatives go through the XLA twin
(`driver.static_rows` at the kernel's inputs, kernels/launch.py).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver, hfield, hull, primitive
from mjx_lite.collision.types import NOCONTACT
from mjx_lite.pipeline import support
from mjx_lite.pipeline.kernels import contact_params, launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MINVAL, Data, GeomType, Model

__all__ = ["KINDS", "collision", "covered", "fusable", "kernel", "kind"]

# collider -> kind (the name of its loop and tables)
KINDS = {primitive.plane_sphere: "plane_sphere", primitive.plane_capsule: "plane_capsule",
         primitive.plane_box: "plane_box", primitive.sphere_sphere: "sphere_sphere",
         primitive.sphere_capsule: "sphere_capsule", primitive.capsule_capsule: "capsule_capsule",
         primitive.sphere_box: "sphere_box", primitive.capsule_box: "capsule_box"}  # fmt: skip
_BOX_NCON = 4  # plane-box contacts per pair


def _hfield_window(m: Model, g: driver.Group) -> tuple[int, int] | None:
    """Static: (wr, wc), the cell window of a height field-sphere group whose slots hold every prism of the window
    (no `Config.hfield_prisms` cap, at most hfield.MAXCONPAIR prisms: each slot is one prism, in grid order), else
    None."""
    if g.type1 != GeomType.HFIELD or g.type2 != GeomType.SPHERE:
        return None
    wr, wc = hfield.window_size(m, g.data1, g.geom1, g.geom2)
    return (wr, wc) if g.ncon == 2 * wr * wc else None


def kind(m: Model, g: driver.Group) -> str | None:
    """Static: the kernel's kind for group g (None: it keeps its XLA collider)."""
    if not g.static_slots or g.stages is not None:
        return None
    if g.type1 == GeomType.HFIELD:
        return "hfield_sphere" if _hfield_window(m, g) else None
    return KINDS.get(g.collider)


def covered(m: Model) -> tuple[int, ...]:
    """Static: indices (into driver.pair_table(m).groups) of the groups the kernel computes."""
    return tuple(i for i, g in enumerate(driver.pair_table(m).groups) if kind(m, g))


def fusable(m: Model) -> bool:
    """Static: the model has a group the kernel computes."""
    return bool(covered(m))


# rows per loop iteration of each kind: plane-capsule and capsule-capsule loop over rows (one sphere test each),
# plane-box over pairs (its corner loop fills four rows), the others have one row per pair
_ROW_LOOPS = ("plane_capsule", "capsule_capsule")


def _collide_plan(m: Model) -> tuple[dict, dict]:
    """(tables, info): per kind, per loop iteration, the geom1, geom2, output row, margin index and row in the pair
    (q); info: the iterations of each kind, the rows and pairs of the covered groups, and each covered group's
    (first row, first pair)."""
    groups = driver.pair_table(m).groups
    tab, per, starts, hf = {}, {}, {}, []
    row = pair = over = 0
    for i in covered(m):
        g = groups[i]
        n = len(g.geom1)
        starts[i] = (row, pair)
        name = kind(m, g)
        if name == "hfield_sphere":  # one loop per group (its grid and window are static): pairs, then prisms
            j = len(hf)
            wr, wc = _hfield_window(m, g)
            hid = int(g.data1)
            # prism p = 2 (window cell) + triangle: its three top vertices' (row, col) offsets, hfield.group_collider's
            tri = np.array([[[1, 0], [0, 0], [1, 1]], [[0, 0], [1, 1], [0, 1]]], np.int32)
            cell = np.stack(np.meshgrid(np.arange(wr), np.arange(wc), indexing="ij"), -1).reshape(-1, 2)
            corner = (cell[:, None, None, :] + tri[None]).reshape(-1)
            tab[f"hf{j}_g1"], tab[f"hf{j}_g2"] = np.asarray(g.geom1, np.int32), np.asarray(g.geom2, np.int32)
            tab[f"hf{j}_corner"] = np.asarray(corner, np.int32)
            grid = dict(nrow=int(m.hfield_nrow[hid]), ncol=int(m.hfield_ncol[hid]), adr=int(m.hfield_adr[hid]))
            hf.append(dict(j=j, row=row, pair=pair, over=over, n=n, nprism=g.ncon, hid=hid, wr=wr, wc=wc, **grid))
            row, pair, over = row + g.nrows, pair + n, over + n
            continue
        k = g.ncon if name in _ROW_LOOPS else 1
        t = per.setdefault(name, ([], [], [], [], []))
        t[0].append(np.repeat(g.geom1, k))
        t[1].append(np.repeat(g.geom2, k))
        t[2].append(row + (g.ncon * np.arange(n)[:, None] + np.arange(k)[None]).reshape(-1))
        t[3].append(pair + np.repeat(np.arange(n), k))
        t[4].append(np.tile(np.arange(k), n))
        row, pair = row + g.nrows, pair + n
    for name, t in per.items():
        for field, parts in zip(("g1", "g2", "row", "pair", "q"), t):
            tab[f"{name}_{field}"] = np.asarray(np.concatenate(parts), np.int32)
    info = dict(kinds={k: len(tab[f"{k}_g1"]) for k in per}, nrows=row, npair=pair, starts=starts, hfield=hf,
                nover=over)  # fmt: skip
    return tab, info


def _plan(m: Model) -> tuple[dict, dict]:
    return support.memo(m, "kernels_collide_plan", _collide_plan)


# ---- lane arithmetic: vectors are 3-tuples of lane vectors (or scalars) ---------------------------------------


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def _scale(a, s):
    return tuple(x * s for x in a)


def _sel(c, a, b):
    return tuple(where(c, x, y) for x, y in zip(a, b))


def _norm(v):
    """math.safe_norm: 0 where |v|^2 <= 0."""
    sq = _dot(v, v)
    zero = sq <= 0
    return where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))


def _normalize(v, eps):
    """math.safe_normalize: (v / |v|, |v|), v unchanged where |v| <= eps."""
    n = _norm(v)
    d = where(n <= eps, 1.0, n)
    return tuple(x / d for x in v), n


def _unit_or(v, fallback):
    """primitive._unit_or: normalize(v), or fallback where |v| < MINVAL."""
    n = _norm(v)
    small = n < MINVAL
    d = where(small, 1.0, n)
    return tuple(where(small, f, x / d) for x, f in zip(v, fallback))


def _clip1(x):
    return jp.minimum(jp.maximum(x, -1.0), 1.0)


def _body(m: Model, info: dict):
    ex = (1.0, 0.0, 0.0)

    def body(io):
        tab = io.table
        zero = io.lanes(0.0)

        def flag(b):
            """A condition on shared or static values as a lane vector (Triton's select wants one shape)."""
            return io.lanes(jp.asarray(b).astype(io.dtype)) > 0.5

        def lanes3(v):
            return tuple(io.lanes(x) for x in v)

        def geom(g):
            """(pos, mat (9, row-major), size) of geom g: lane vectors, size scalars (shared)."""
            return io.read_vec("geom_xpos", g, 3), io.read_vec("geom_xmat", g, 9), io.read_vec("geom_size", g, 3)

        def emit(r, dist, pos, normal, active, tangent=None):
            """Row r: dist, pos and active masked where the row is not a contact; the normal and tangent hint for
            the frame pass."""
            io.write("dist", r, where(active, dist, NOCONTACT))
            io.write_vec("pos", r, tuple(where(active, p, 0.0) for p in pos))
            io.write("active", r, where(active, 1.0, 0.0, io.dtype))
            io.write_vec("_normal", r, normal)
            io.write_vec("_tangent", r, (zero, zero, zero) if tangent is None else tangent)

        def tested(r, raw, near, tangent=None):
            """Emit a row of a `margin_tested` collider: raw (dist, pos, normal, is a contact)."""
            dist, pos, normal, ok = raw
            d = where(ok, dist, NOCONTACT)
            emit(r, d, pos, normal, near & (d < NOCONTACT), tangent)

        def near_plane(p1, z1, p2, g2, margin):
            rb2 = io.read("geom_rbound", g2)
            sdist = _dot(_sub(p2, p1), z1)
            return flag(jp.logical_not(rb2 > 0)) | (sdist <= rb2 + margin)

        def near_spheres(p1, g1, p2, g2, margin):
            rb1, rb2 = io.read("geom_rbound", g1), io.read("geom_rbound", g2)
            dif = _sub(p1, p2)
            center = _dot(dif, dif)
            bound = rb1 + rb2 + margin
            has_rb = (rb1 > 0) & (rb2 > 0)
            return flag(jp.logical_not(has_rb)) | (center <= where(bound > 0, bound, 0.0) ** 2)

        def plane_sphere_raw(pp, n, sp, r, margin):
            """primitive._plane_sphere_raw: (dist, pos, normal, is a contact)."""
            cdist = _dot(_sub(sp, pp), n)
            dist = cdist - r
            pos = _sub(sp, _scale(n, r + 0.5 * dist))
            return dist, pos, n, cdist <= margin + r

        def sphere_sphere_raw(p1, r1, p2, r2, z1, z2, margin):
            """primitive._sphere_sphere_raw."""
            dif = _sub(p2, p1)
            dist = _norm(dif) - r1 - r2
            alt = _unit_or(_cross(z1, z2), lanes3(ex))
            normal = _unit_or(dif, alt)
            pos = _add(p1, _scale(normal, r1 + 0.5 * dist))
            bound = margin + r1 + r2
            return dist, pos, normal, _dot(dif, dif) <= bound * bound

        def item(kind, i):
            """Loop iteration i of a kind: (geom ids, output row, row in the pair, margin, both geoms' pos, mat,
            size and z axis)."""
            g1, g2, r, q = tab(f"{kind}_g1", i), tab(f"{kind}_g2", i), tab(f"{kind}_row", i), tab(f"{kind}_q", i)
            margin = io.read("margin", tab(f"{kind}_pair", i))
            p1, m1, s1 = geom(g1)
            p2, m2, s2 = geom(g2)
            return g1, g2, r, q, margin, p1, m1, s1, (m1[2], m1[5], m1[8]), p2, m2, s2, (m2[2], m2[5], m2[8])

        def plane_sphere(i):
            _, g2, r, _, margin, p1, _, _, z1, p2, _, s2, _ = item("plane_sphere", i)
            tested(r, plane_sphere_raw(p1, z1, p2, s2[0], margin), near_plane(p1, z1, p2, g2, margin))

        def plane_capsule(i):  # row q of a pair: the sphere at segment end 1 - 2 q
            _, g2, r, q, margin, p1, _, _, z1, p2, _, s2, z2 = item("plane_capsule", i)
            end = _add(p2, _scale(_scale(z2, s2[1]), io.lanes(1.0 - 2.0 * q.astype(io.dtype))))
            tested(r, plane_sphere_raw(p1, z1, end, s2[0], margin), near_plane(p1, z1, p2, g2, margin), z2)

        def plane_box(i):  # the first four corners (MuJoCo's order) below the centre's level within the margin
            _, g2, r, _, margin, p1, _, _, n, p2, m2, s2, _ = item("plane_box", i)
            dist0 = _dot(_sub(p2, p1), n)

            def corner(c, carry):
                count, out = carry
                # hull.BOX_CORNERS[c]: -1 or +1 by the bits of c
                loc = [((jp.right_shift(c, j) & 1).astype(io.dtype) * 2.0 - 1.0) * s2[j] for j in range(3)]
                off = tuple(loc[0] * m2[3 * k] + loc[1] * m2[3 * k + 1] + loc[2] * m2[3 * k + 2] for k in range(3))
                ldist = _dot(off, n)
                dist = dist0 + ldist
                valid = (dist <= margin) & (ldist <= 0)
                pos = _sub(_add(p2, off), _scale(n, 0.5 * dist))
                new = []
                for j in range(_BOX_NCON):
                    take = valid & (count == j)
                    new.append(tuple(where(take, a, b) for a, b in zip((dist, *pos), out[j])))
                return count + where(valid, 1.0, 0.0, io.dtype), tuple(new)

            init = (zero, tuple((io.lanes(NOCONTACT), zero, zero, zero) for _ in range(_BOX_NCON)))
            _, out = jax.lax.fori_loop(np.int32(0), np.int32(8), corner, init)
            near = near_plane(p1, n, p2, g2, margin)
            for j, (dist, *pos) in enumerate(out):
                emit(r + j, dist, pos, n, near & (dist <= margin))

        def sphere_sphere(i):
            g1, g2, r, _, margin, p1, _, s1, z1, p2, _, s2, z2 = item("sphere_sphere", i)
            tested(r, sphere_sphere_raw(p1, s1[0], p2, s2[0], z1, z2, margin), near_spheres(p1, g1, p2, g2, margin))

        def sphere_capsule(i):
            g1, g2, r, _, margin, p1, _, s1, z1, p2, _, s2, z2 = item("sphere_capsule", i)
            x = jp.minimum(jp.maximum(_dot(z2, _sub(p1, p2)), -s2[1]), s2[1])
            raw = sphere_sphere_raw(p1, s1[0], _add(p2, _scale(z2, x)), s2[0], z1, z2, margin)
            tested(r, raw, near_spheres(p1, g1, p2, g2, margin))

        def sphere_box_raw(p1, r1, p2, m2, s2):
            """primitive._sphere_box_raw: the sphere (p1, r1) against the box (p2, m2 (9, row-major), size s2): its
            centre clamped to the box, or inside it the nearest face, the first of ties. (dist, pos, normal)."""
            dif = _sub(p1, p2)
            center = tuple(m2[j] * dif[0] + m2[3 + j] * dif[1] + m2[6 + j] * dif[2] for j in range(3))  # mat2' dif
            clamped = tuple(jp.minimum(jp.maximum(center[j], -s2[j]), s2[j]) for j in range(3))
            tmp = _sub(clamped, center)
            d = _norm(tmp)
            inside = d <= MINVAL
            t = tuple(x / where(inside, 1.0, d) for x in tmp)
            pos_out = _scale(_add(clamped, _add(center, _scale(t, r1))), 0.5)
            # inside: the nearest face (the first of the six on a tie, as argmin), k = 2 axis + (the +size face)
            faces = [jp.abs(sg * s2[j // 2] - center[j // 2]) for j, sg in enumerate((-1.0, 1.0) * 3)]
            closest, k = faces[0], zero
            for j in range(1, 6):
                take = faces[j] < closest
                closest, k = where(take, faces[j], closest), where(take, float(j), k)
            nearest = tuple(where(k == 2 * a, 1.0, where(k == 2 * a + 1, -1.0, 0.0, io.dtype)) for a in range(3))
            pos_in = _add(center, _scale(nearest, 0.5 * (r1 - closest)))
            local = _sel(inside, pos_in, pos_out)
            normal_local = _sel(inside, nearest, t)

            def rot(v):  # mat2 v
                return tuple(m2[3 * j] * v[0] + m2[3 * j + 1] * v[1] + m2[3 * j + 2] * v[2] for j in range(3))

            dist = where(inside, -closest, d) - r1
            return dist, _add(p2, rot(local)), rot(normal_local)

        def sphere_box(i):  # the driver's test dist <= margin (not margin_tested)
            g1, g2, r, _, margin, p1, _, s1, _, p2, m2, s2, _ = item("sphere_box", i)
            dist, pos, normal = sphere_box_raw(p1, s1[0], p2, m2, s2)
            near = near_spheres(p1, g1, p2, g2, margin)
            emit(r, dist, pos, normal, near & (dist <= margin))

        def ilanes(v):
            return jp.broadcast_to(jp.asarray(v, jp.int32), (io.block,))

        def pick3(v, k):
            """v[k] for a lane vector of axes k (0, 1, 2)."""
            return where(k == 0, v[0], where(k == 1, v[1], v[2]))

        def edge_segment(c, j, s, pos, half, mc):
            """primitive._edge_segment: box edge c + t s[j] e_j against the segment pos + x half, clamped in
            MuJoCo's order (edge parameter first): (edge param, segment param, squared distance, clamp code, ok)."""
            dif = _sub(c, pos)
            ma, mb = io.lanes(s[j] * s[j]), -s[j] * half[j]
            u, v = -s[j] * dif[j], _dot(half, dif)
            det = ma * mc - mb * mb
            ok = jp.abs(det) >= MINVAL
            idet = 1.0 / where(ok, det, 1.0)
            ma_s, mc_s = where(ma > 0, ma, 1.0), where(mc > 0, mc, 1.0)
            x1 = (mc * u - mb * v) * idet
            x2 = (ma * v - mb * u) * idet
            s1 = where(x1 > 1, 2, where(x1 < -1, 0, 1)).astype(jp.int32)
            x2 = where(x1 > 1, (v - mb) / mc_s, where(x1 < -1, (v + mb) / mc_s, x2))
            x1 = _clip1(x1)
            hi2, lo2 = x2 > 1, x2 < -1
            x1r = where(hi2, (u - mb) / ma_s, (u + mb) / ma_s)
            s1 = where(hi2 | lo2, where(x1r > 1, 2, where(x1r < -1, 0, s1)), s1).astype(jp.int32)
            x1 = where(hi2 | lo2, _clip1(x1r), x1)
            x2 = _clip1(x2)
            w = tuple(dif[k] - half[k] * x2 + (s[j] * x1 if k == j else 0.0 * x1) for k in range(3))
            return x1, x2, _dot(w, w), s1, ok

        def capsule_box(i):  # primitive.capsule_box: rows r (the nearest segment point), r + 1 (the second)
            g1, g2, r, _, margin, p1, m1, s1, z1, p2, m2, s2, _ = item("capsule_box", i)
            s = s2
            dif = _sub(p1, p2)
            pos = tuple(m2[j] * dif[0] + m2[3 + j] * dif[1] + m2[6 + j] * dif[2] for j in range(3))  # mat2' dif
            axis = tuple(m2[j] * z1[0] + m2[3 + j] * z1[1] + m2[6 + j] * z1[2] for j in range(3))
            half = _scale(axis, s1[1])
            mc = io.lanes(s1[1] * s1[1])
            axisdir = sum((half[k] > 0).astype(jp.int32) * (1 << k) for k in range(3))
            best_d, best_x, best_box = io.lanes(jp.inf), zero, zero
            cltype, clface, clcorner, cledge = ilanes(-4), ilanes(-1), ilanes(0), ilanes(0)
            for e in (-1, 1):  # the segment ends against the faces (outside the slab of at most one axis)
                p = _add(pos, _scale(half, float(e)))
                out = [(p[k] < -s[k]) | (p[k] > s[k]) for k in range(3)]
                nout = sum(o.astype(jp.int32) for o in out)
                face = where(out[2], 2, where(out[1], 1, where(out[0], 0, -1))).astype(jp.int32)
                w = tuple(jp.minimum(jp.maximum(p[k], -s[k]), s[k]) - p[k] for k in range(3))
                dd = _dot(w, w)
                better = (nout <= 1) & (dd < best_d)
                best_d, best_x = where(better, dd, best_d), where(better, float(e), best_x)
                cltype, clface = where(better, -2 + e, cltype), where(better, face, clface)
            for j, ci in primitive._EDGES:  # the segment against the 12 edges
                c = tuple(0.0 if k == j else float(hull.BOX_CORNERS[ci][k]) * s[k] for k in range(3))
                x1, x2, dd, code, ok = edge_segment(c, j, s, pos, half, mc)
                better = ok & (dd < best_d - MINVAL)
                best_d, best_x, best_box = (where(better, dd, best_d), where(better, x2, best_x),
                                            where(better, x1, best_box))  # fmt: skip
                cltype = where(better, code * 3, cltype)
                clcorner = where(better, ci + (1 << j) * (code // 2), clcorner)
                cledge = where(better, j, cledge)
            ahalf = tuple(jp.abs(h) for h in half)
            big = io.lanes(jp.inf)

            def extent(k, scale):  # scale * size[k] / |half[k]|, inf where the segment is perpendicular to axis k
                h = pick3(ahalf, k)
                return where(h > 0, scale * pick3(s, k) / where(h > 0, h, 1.0), big)

            # (a) the nearest box point is a corner
            c1 = jp.bitwise_xor(axisdir, clcorner)
            flip = (c1 == 3) | (c1 == 5) | (c1 == 6)
            mul = where(flip, -1.0, 1.0, io.dtype)
            de, dp = where(flip, 1 + best_x, 1 - best_x), where(flip, 1 - best_x, 1 + best_x)
            cc = where(flip, 7 - c1, c1)
            ax = where(cc == 1, 0, where(cc == 2, 1, 2)).astype(jp.int32)
            along_edge = pick3(axis, ax) ** 2 > 0.5
            sp_edge = jp.minimum(de, extent(ax, 2.0)) * mul
            ax1, ax2 = where(ax == 2, 0, ax + 1), where(ax == 0, 2, ax - 1)  # (ax + 1) % 3, (ax + 2) % 3
            sp_face = -mul * jp.minimum(dp, jp.minimum(extent(ax1, 2.0), extent(ax2, 2.0)))
            sec_a = where(along_edge, sp_edge, sp_face)
            has_a = (cltype >= 0) & (cltype != 3) & (c1 != 0) & (c1 != 7)  # cltype // 3 != 1 (cltype: 0, 3, 6)
            # (b) the nearest box point is inside an edge
            cb = jp.bitwise_and(c1, 7 - jp.left_shift(1, cledge))
            a1, a2 = where(cledge == 2, 0, cledge + 1), where(cledge == 0, 2, cledge - 1)
            a1 = where(jp.abs(pick3(axis, a1)) > jp.abs(pick3(axis, a2)), a2, a1)
            a2 = 3 - cledge - a1
            bit2 = jp.bitwise_and(cb, jp.left_shift(1, a2)) != 0
            mul_b = where(bit2, 1.0, -1.0, io.dtype)
            sp = jp.minimum(where(bit2, 1 - best_x, 1 + best_x), extent(a2, 2.0))
            same = (jp.bitwise_and(axisdir, jp.left_shift(1, cledge)) != 0) == bit2
            sp = jp.minimum(sp, extent(cledge, where(same, 1 - best_box, 1 + best_box)))
            sec_b = sp * mul_b
            has_b = (cltype == 3) & ((cb == 1) | (cb == 2) | (cb == 4))
            # (c) a segment end is nearest to a face: walk back along the segment until leaving the face's slab
            mul_c = where(cltype == -3, 1.0, -1.0, io.dtype)
            tmp = _sub(pos, _scale(half, mul_c))
            sp = io.lanes(2.0)
            for k in range(3):
                hk = half[k]
                hk_s = where(hk != 0, hk, 1.0)
                for bound in (s[k], -s[k]):
                    e1 = (bound - tmp[k]) / hk_s * mul_c
                    use = (clface != k) & (hk != 0) & (e1 > 0) & (e1 < sp)
                    sp = where(use, e1, sp)
            sec_c = sp * mul_c
            has_c = (cltype < 0) & (cltype != -4) & (clface != -1)
            second = where(has_a, sec_a, where(has_b, sec_b, sec_c))
            has2 = has_a | has_b | has_c

            def rot(v):  # mat2 v
                return tuple(m2[3 * j] * v[0] + m2[3 * j + 1] * v[1] + m2[3 * j + 2] * v[2] for j in range(3))

            near = near_spheres(p1, g1, p2, g2, margin)
            for q, (x, valid) in enumerate(((best_x, cltype != -4), (second + best_x, has2))):
                point = _add(p2, rot(_add(pos, _scale(half, x))))
                dist, cpos, normal = sphere_box_raw(point, s1[0], p2, m2, s)
                emit(r + q, dist, cpos, normal, near & valid & (dist <= margin))

        def capsule_capsule(i):  # row q of a pair
            g1, g2, r, q, margin, p1, _, s1, z1, p2, _, s2, z2 = item("capsule_capsule", i)
            a1, a2 = _scale(z1, s1[1]), _scale(z2, s2[1])
            # segment.segments_closest (MuJoCo's clamping order)
            dif = _sub(p1, p2)
            ma, mb, mc = _dot(a1, a1), -_dot(a1, a2), _dot(a2, a2)
            u, v = -_dot(a1, dif), _dot(a2, dif)
            det = ma * mc - mb * mb
            dsafe = where(jp.abs(det) < 1e-15, where(det < 0, -1e-15, 1e-15, io.dtype), det)
            x1, x2 = (mc * u - mb * v) / dsafe, (ma * v - mb * u) / dsafe
            mc_s, ma_s = where(mc > 0, mc, 1.0), where(ma > 0, ma, 1.0)
            x2 = where(x1 > 1, (v - mb) / mc_s, where(x1 < -1, (v + mb) / mc_s, x2))
            x1 = _clip1(x1)
            x1 = where(x2 > 1, _clip1((u - mb) / ma_s), where(x2 < -1, _clip1((u + mb) / ma_s), x1))
            x2 = _clip1(x2)
            # parallel axes: row q at the q-th end of the overlap of the segments; else row 0 at the nearest points
            # and row 1 none
            xa, xb = (u - mb) / ma_s, (u + mb) / ma_s
            first = flag(q == 0)
            y1 = _clip1(where(first, jp.minimum(xa, xb), jp.maximum(xa, xb)))
            y2 = _clip1((v - mb * y1) / mc_s)
            par = jp.abs(det) < MINVAL
            t1, t2 = where(par, y1, x1), where(par, y2, x2)
            dist, pos, normal, ok = sphere_sphere_raw(_add(p1, _scale(a1, t1)), s1[0], _add(p2, _scale(a2, t2)),
                                                      s2[0], z1, z2, margin)  # fmt: skip
            tested(r, (dist, pos, normal, ok & (par | first)), near_spheres(p1, g1, p2, g2, margin))

        def point_prism(p, top, zb):
            """hfield._point_prism per lane: p (3,) and the prism's top vertices (3 x (3,)) over the bottom z = zb:
            (dist, nearest point on the prism, normal)."""
            e = [_sub(top[(i + 1) % 3], top[i]) for i in range(3)]
            area2 = e[0][0] * e[1][1] - e[0][1] * e[1][0]
            sgn = where(area2 >= 0, 1.0, -1.0, io.dtype)
            n_side, s_side = [], []
            for i in range(3):
                ln = jp.sqrt(e[i][0] ** 2 + e[i][1] ** 2)
                lsafe = where(ln > 0, ln, 1.0)
                n = (sgn * e[i][1] / lsafe, sgn * -e[i][0] / lsafe, zero)
                n_side.append(n)
                s_side.append(_dot(n, _sub(p, top[i])))
            n_top = _scale(_cross(e[0], _sub(top[2], top[0])), sgn)
            n_top = _scale(n_top, 1.0 / jp.sqrt(_dot(n_top, n_top)))  # |n_top| >= the cell's area > 0
            s_top = _dot(n_top, _sub(p, top[0]))
            s_bot = zb - p[2]
            depth, n_in = s_bot, (zero, zero, io.lanes(-1.0))
            for s_, n in zip([s_top] + s_side, [n_top] + n_side):
                better = s_ > depth
                depth, n_in = where(better, s_, depth), _sel(better, n, n_in)
            best, q_out = io.lanes(jp.inf), p

            def consider(q, valid, best, q_out):
                dq = _sub(p, q)
                d2 = _dot(dq, dq)
                better = valid & (d2 < best)
                return where(better, d2, best), _sel(better, q, q_out)

            def clamp_segment(a, b):
                ab = _sub(b, a)
                ll = _dot(ab, ab)
                t = jp.minimum(jp.maximum(_dot(_sub(p, a), ab) / where(ll > 0, ll, 1.0), 0.0), 1.0)
                return _add(a, _scale(ab, t))

            on_top = s_side[0] - s_top * _dot(n_side[0], n_top) <= 0
            for s_, n in zip(s_side[1:], n_side[1:]):
                on_top = on_top & (s_ - s_top * _dot(n, n_top) <= 0)
            best, q_out = consider(_sub(p, _scale(n_top, s_top)), on_top, best, q_out)
            on_bot = (s_side[0] <= 0) & (s_side[1] <= 0) & (s_side[2] <= 0)
            best, q_out = consider((p[0], p[1], zb), on_bot, best, q_out)
            yes = flag(True)
            for i in range(3):
                a, b = top[i], top[(i + 1) % 3]
                ll = e[i][0] ** 2 + e[i][1] ** 2
                t = ((p[0] - a[0]) * e[i][0] + (p[1] - a[1]) * e[i][1]) / where(ll > 0, ll, 1.0)
                on_side = (t >= 0) & (t <= 1) & (p[2] >= zb) & (p[2] <= a[2] + t * (b[2] - a[2]))
                best, q_out = consider(_sub(p, _scale(n_side[i], s_side[i])), on_side, best, q_out)
                best, q_out = consider(clamp_segment(a, b), yes, best, q_out)
                best, q_out = consider(clamp_segment((a[0], a[1], zb), (b[0], b[1], zb)), yes, best, q_out)
                best, q_out = consider((a[0], a[1], jp.minimum(jp.maximum(p[2], zb), a[2])), yes, best, q_out)
            d_out = jp.sqrt(jp.maximum(best, jp.finfo(io.dtype).tiny))
            n_out = _scale(_sub(p, q_out), 1.0 / d_out)
            inside = depth <= 0
            return (where(inside, depth, d_out), _sel(inside, _sub(p, _scale(n_in, depth)), q_out),
                    _sel(inside, n_in, n_out))  # fmt: skip

        def hfield_sphere(h):
            """hfield.group_collider for spheres: per pair the window of cells under the sphere's bounding box,
            per prism of the window the bound (`hfield._prism_bound`), and where it may touch the exact point-prism
            distance; the pair's window overflow."""
            j, nrow, ncol, wr, wc, nprism = h["j"], h["nrow"], h["ncol"], h["wr"], h["wc"], h["nprism"]
            sx, sy, sz, base = (io.read("hfield_size", 4 * h["hid"] + k) for k in range(4))
            dx, dy = 2 * sx / (ncol - 1), 2 * sy / (nrow - 1)
            slack = 1e-4 * (dx + dy)

            def pair(i, c):
                g1, g2 = tab(f"hf{j}_g1", i), tab(f"hf{j}_g2", i)
                margin = io.read("margin", h["pair"] + i)
                p1, m1, _ = geom(g1)
                p2, _, s2 = geom(g2)
                r = s2[0]
                m2 = io.read_vec("geom_xmat", g2, 9)
                dif = _sub(p2, p1)
                loc = tuple(m1[k] * dif[0] + m1[3 + k] * dif[1] + m1[6 + k] * dif[2] for k in range(3))  # mat1' dif
                # the sphere's axes in the height field's frame (mat1' mat2's columns): _prism_bound's own axes
                axes = [tuple(m1[k] * m2[a] + m1[3 + k] * m2[3 + a] + m1[6 + k] * m2[6 + a] for k in range(3))
                        for a in range(3)]  # fmt: skip
                blo, bhi = tuple(x - r for x in loc), tuple(x + r for x in loc)
                lo, hi = tuple(x - margin for x in blo), tuple(x + margin for x in bhi)
                c0 = jp.minimum(jp.maximum(jp.floor((lo[0] + sx) / dx), 0.0), float(ncol - 1 - wc))
                r0 = jp.minimum(jp.maximum(jp.floor((lo[1] + sy) / dy), 0.0), float(nrow - 1 - wr))
                c0, r0 = where(c0 == c0, c0, 0.0), where(r0 == r0, r0, 0.0)  # NaN lanes: a valid cell
                c1 = jp.minimum(jp.ceil((hi[0] + sx) / dx), float(ncol - 1))
                r1 = jp.minimum(jp.ceil((hi[1] + sy) / dy), float(nrow - 1))
                inside = ((lo[0] <= sx) & (hi[0] >= -sx) & (lo[1] <= sy) & (hi[1] >= -sy) & (lo[2] <= sz)
                          & (hi[2] >= -base))  # fmt: skip
                near = near_spheres(p1, g1, p2, g2, margin)
                over = inside & ((c1 > c0 + wc) | (r1 > r0 + wr)) & near
                io.write("overflow", h["over"] + i, where(over, 1.0, 0.0, io.dtype))
                zb = io.lanes(-base)

                def prism(q, c_):
                    top = []
                    for v in range(3):
                        rr = r0 + tab(f"hf{j}_corner", 6 * q + 2 * v).astype(io.dtype)
                        cc = c0 + tab(f"hf{j}_corner", 6 * q + 2 * v + 1).astype(io.dtype)
                        z = io.gather("hfield_data", h["adr"] + rr.astype(jp.int32) * ncol + cc.astype(jp.int32))
                        top.append((cc * dx - sx, rr * dy - sy, z * sz))
                    verts = [(x, y, zb) for x, y, _ in top] + top
                    # hfield._prism_bound (a sphere: support = its centre, radius r)
                    gap = None
                    for k in range(3):
                        pmin = functools.reduce(jp.minimum, [v_[k] for v_ in verts])
                        pmax = functools.reduce(jp.maximum, [v_[k] for v_ in verts])
                        gk = jp.maximum(pmin - bhi[k], blo[k] - pmax)
                        gap = gk if gap is None else jp.maximum(gap, gk)
                    own = None
                    for ax in axes:
                        proj = [_dot(v_, ax) for v_ in verts]
                        cen = _dot(ax, loc)
                        gk = jp.maximum(functools.reduce(jp.minimum, proj) - (cen + r),
                                        (cen - r) - functools.reduce(jp.maximum, proj))  # fmt: skip
                        own = gk if own is None else jp.maximum(own, gk)
                    gap = jp.maximum(gap, own)
                    n_top = _cross(_sub(top[1], top[0]), _sub(top[2], top[0]))
                    n_top = _scale(n_top, where(n_top[2] < 0, -1.0, 1.0, io.dtype))
                    normals, on = [n_top], [top[0]]
                    for k in range(3):
                        edge = _sub(top[(k + 1) % 3], top[k])
                        ns = (edge[1], -edge[0], zero)
                        inward = _dot(ns, _sub(top[(k + 2) % 3], top[k])) > 0
                        normals.append(_sel(inward, _scale(ns, -1.0), ns))
                        on.append(top[k])
                    low = None
                    for n, o in zip(normals, on):
                        n = _scale(n, 1.0 / jp.sqrt(_dot(n, n)))
                        gk = (_dot(n, loc) - r) - _dot(n, o)
                        low = gk if low is None else jp.maximum(low, gk)
                    bound = jp.maximum(gap, low)
                    cand = inside & (bound <= margin + slack)
                    dist, pnear, normal = point_prism(loc, top, zb)
                    dist = where(cand, dist - r, NOCONTACT)
                    cpos = _scale(_sub(_add(pnear, loc), _scale(normal, r)), 0.5)
                    world = tuple(p1[k] + m1[3 * k] * cpos[0] + m1[3 * k + 1] * cpos[1] + m1[3 * k + 2] * cpos[2]
                                  for k in range(3))  # fmt: skip
                    nworld = tuple(m1[3 * k] * normal[0] + m1[3 * k + 1] * normal[1] + m1[3 * k + 2] * normal[2]
                                   for k in range(3))  # fmt: skip
                    emit(h["row"] + i * nprism + q, dist, world, nworld, near & (dist <= margin))
                    return c_

                jax.lax.fori_loop(np.int32(0), np.int32(nprism), prism, np.int32(0))
                return c

            jax.lax.fori_loop(np.int32(0), np.int32(h["n"]), pair, np.int32(0))

        for h in info["hfield"]:
            hfield_sphere(h)

        fns = dict(plane_sphere=plane_sphere, plane_capsule=plane_capsule, plane_box=plane_box,
                   sphere_sphere=sphere_sphere, sphere_capsule=sphere_capsule,
                   capsule_capsule=capsule_capsule, sphere_box=sphere_box, capsule_box=capsule_box)  # fmt: skip
        for kind, n in info["kinds"].items():
            jax.lax.fori_loop(np.int32(0), np.int32(n), lambda i, c, f=fns[kind]: (f(i), c)[1], np.int32(0))

        # ---- every row: the contact frame (frame.make_frame: rows normal, tangent1, tangent2), masked ---------------
        eye = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)

        def frame(r, c):
            active = io.load("active", r) > 0.5
            n, _ = _normalize(io.load_vec("_normal", r, 3), 1e-15)
            hint = io.load_vec("_tangent", r, 3)
            default = _sel(jp.abs(n[1]) < 0.5, lanes3((0.0, 1.0, 0.0)), lanes3((0.0, 0.0, 1.0)))
            t = _sel(_dot(hint, hint) >= 0.25, hint, default)
            t = _sub(t, _scale(n, _dot(n, t)))
            t, tn = _normalize(t, 1e-15)
            t = _sel(tn < 1e-15, lanes3(ex), t)
            io.write_vec("frame", r, tuple(where(active, f, e) for f, e in zip(n + t + _cross(n, t), eye)))
            return c

        jax.lax.fori_loop(np.int32(0), np.int32(info["nrows"]), frame, np.int32(0))

    return body


def _twin(m: Model, d: Data) -> callable:
    """The XLA twin: the driver's colliders (`driver.static_rows`) of the covered groups at the kernel's inputs."""
    groups = driver.pair_table(m).groups
    _, info = _plan(m)

    def xla(x):
        m2 = m.replace(geom_size=x["geom_size"].reshape(-1, 3), geom_rbound=x["geom_rbound"])
        if info["hfield"]:
            m2 = m2.replace(hfield_size=x["hfield_size"].reshape(-1, 4), hfield_data=x["hfield_data"])
        d2 = d.replace(geom_xpos=x["geom_xpos"].reshape(-1, 3), geom_xmat=x["geom_xmat"].reshape(-1, 3, 3))
        parts, over = [], []
        for i in covered(m):
            g = groups[i]
            _, p0 = info["starts"][i]
            parts.append(driver.static_rows(m2, d2, g, x["margin"][p0 : p0 + len(g.geom1)], overflow=True))
            if g.type1 == GeomType.HFIELD:
                over.append(parts[-1][4])
        dt = x["geom_xpos"].dtype
        return {"dist": jp.concatenate([p[0] for p in parts]).astype(dt),
                "pos": jp.concatenate([p[1] for p in parts]).reshape(-1).astype(dt),
                "frame": jp.concatenate([p[2] for p in parts]).reshape(-1).astype(dt),
                "active": jp.concatenate([p[3] for p in parts]).astype(dt),
                **({"overflow": jp.concatenate(over).astype(dt)} if over else {})}  # fmt: skip

    return xla


def kernel(m: Model, d: Data, margin: jax.Array | None = None) -> tuple[launch.Kernel, dict]:
    """The covered groups' colliders as a `launch.Kernel` (one environment's shapes) and its inputs. The pairs'
    detection margins (an input, (npair,)): `margin` (`collision`: the contact parameters' kernel,
    kernels/contact_params.py), or None: the XLA driver's (`driver.detection_margin`)."""
    tables, info = _plan(m)
    groups = driver.pair_table(m).groups
    if margin is None:
        margin = jp.concatenate([jp.broadcast_to(driver.detection_margin(m, groups[i]), (len(groups[i].geom1),))
                                 for i in covered(m)])  # fmt: skip
    x = dict(geom_xpos=d.geom_xpos.reshape(-1), geom_xmat=d.geom_xmat.reshape(-1), geom_size=m.geom_size.reshape(-1),
             geom_rbound=m.geom_rbound, margin=margin)  # fmt: skip
    if info["hfield"]:
        x.update(hfield_size=m.hfield_size.reshape(-1), hfield_data=m.hfield_data)
    n = info["nrows"]
    outputs = dict(dist=(n,), pos=(n * 3,), frame=(n * 9,), active=(n,), _normal=(n * 3,), _tangent=(n * 3,))
    if info["nover"]:  # the height-field pairs' window overflow
        outputs["overflow"] = (info["nover"],)
    k = launch.Kernel("collide_primitive", {k: tuple(jp.shape(v)) for k, v in x.items()}, outputs, tables,
                      _body(m, info), _twin(m, d))  # fmt: skip
    return k, x


def _runs(idx: tuple) -> list[tuple]:
    """Runs of consecutive integers in idx (sorted): [(first, ..., last), ...]."""
    runs = []
    for i in idx:
        if runs and runs[-1][-1] == i - 1:
            runs[-1] = runs[-1] + (i,)
        else:
            runs.append((i,))
    return runs


def collision(m: Model, d: Data, how: launch.Launch) -> Data:
    """driver.collision with the covered groups' contacts computed by the kernels (the caller checks `fusable`): the
    contact parameters' kernel (Model-only: shared by the environments unless the Model is vmapped) and the
    colliders' kernel; the rows of consecutive covered groups go to the driver as one block each."""
    cov = covered(m)
    params = contact_params.call(m, cov, how)
    k, x = kernel(m, d, params["margin"])
    dtype = d.geom_xpos.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    _, info = _plan(m)
    groups = driver.pair_table(m).groups
    computed = {}
    for run in _runs(cov):
        r0 = info["starts"][run[0]][0]
        r1 = info["starts"][run[-1]][0] + groups[run[-1]].nrows
        whole = r0 == 0 and r1 == info["nrows"]

        def rows(v, r0=r0, r1=r1, whole=whole):
            return v if whole else v[r0:r1]

        g1 = np.concatenate([np.repeat(groups[i].geom1, groups[i].nrows // len(groups[i].geom1)) for i in run])
        g2 = np.concatenate([np.repeat(groups[i].geom2, groups[i].nrows // len(groups[i].geom1)) for i in run])
        condim = np.concatenate([np.repeat(driver.static_condim(m, groups[i]), groups[i].nrows // len(groups[i].geom1))
                                 for i in run])  # fmt: skip
        fields = {f: rows(params[f]).astype(dtype) for f in ("includemargin", "friction", "solref", "solimp")}
        fields["solreffriction"] = (rows(params["solreffriction"]).astype(dtype) if "solreffriction" in params
                                    else np.zeros((r1 - r0, 2), dtype))  # fmt: skip
        fields["adhesion"] = rows(params["adhesion"]).astype(dtype) if "adhesion" in params else None
        computed[run[0]] = driver.row_fields(m, g1, g2, condim, rows(out["dist"]), rows(out["pos"].reshape(-1, 3)),
                                             rows(out["frame"].reshape(-1, 3, 3)), rows(out["active"]) > 0.5,
                                             **fields)  # fmt: skip
        computed.update({i: None for i in run[1:]})
    overflow = jp.any(out["overflow"] > 0.5) if info["nover"] else None
    return driver.collision(m, d, computed, overflow)
