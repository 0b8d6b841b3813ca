"""Collision driver: the static pair table, broadphase, narrow-phase dispatch and Data.contact (mj_collision).

Static part (host numpy, memoised per model, built only from static Model fields so nothing retraces):
  * candidate geom pairs from the body pairs: contype/conaffinity, same weld body, parent-child of weld bodies
    unless the parent is the world (and unless `filterparent` is disabled), `exclude_signature`; explicit
    `pair_*` entries replace the dynamic pair of the same two geoms. geom1/geom2 are ordered as MuJoCo does:
    geom1 < geom2 for dynamic pairs (pair order for explicit ones), swapped so that type1 <= type2.
  * pairs are grouped by (type1, type2, height field ids, mesh size classes, explicit or not; the general convex
    pairs in two groups: with a curved shape and no mesh, and the others); each group runs
    one collider, written for one pair and `vmap`ped over the group, emitting a fixed number of contacts per pair.
    Mesh tables are padded to the group's largest mesh; size classes (`_size_class`) keep that padding within a
    factor `m.config.mesh_size_ratio` of every mesh in the group. A collider that depends on the configuration is
    bound to the model's value here (box-mesh and mesh-mesh: `sat_budget=m.config.sat_budget`), so two models of
    different configurations get different tables and traces (the configuration is part of the static part).
Run-time part: a bounding-sphere test with margin (geom_rbound, as mj_collideGeoms) masks the pairs, the
colliders' rows with dist > margin + gap are masked, and contact parameters are mixed (priority, solmix, max
friction, max condim, or the explicit pair's own), `opt.o_*` under the override flag. As in MuJoCo 4, geom
margins (inflation) and gaps (extra detection buffer) of the two geoms add up; a contact is detected when
dist <= margin + gap and `includemargin = margin` (rows with dist > includemargin make no constraint).

Contacts are written into `Data.contact`, padded to `m.nconmax = contact_capacity(m)` rows. Row layout
(static): the groups of `pair_table(m).groups` in order, group k owning `capacity * ncon` consecutive rows,
pair-major (the `ncon` rows of one pair are adjacent). `contact.active` marks real contacts (detected:
dist <= margin + gap), `d.ncon` counts them; rows with dist > includemargin are contacts without constraint,
as in MuJoCo. Inactive rows hold finite placeholder values (dist = NOCONTACT, identity frame, pos 0).

Broadphase: a group of dynamic pairs with more than `m.config.broadphase_min_pairs` candidates (e.g. hundreds of free
bodies) does not run its collider on every candidate, so the narrow-phase cost grows with the number of geoms,
not with its square. A cheap bounding test scores every candidate (bounding spheres with margin; for a plane, the
signed distance of the other geom's centre to the plane against its bounding radius) and the `narrow` most
overlapping ones (`jax.lax.top_k`) go to the narrow phase, narrow = ceil(broadphase_pairs_per_geom * number of
geoms in the group) (when that is below the number of candidates). Colliders with several contacts per pair
(box-box 8, plane-box 4, ...) then keep only the ceil(broadphase_contacts_per_pair * narrow) deepest active rows
of the group: such a group is laid out as `capacity` slots of one row (`ncon = 1`; `collider_ncon` is the
collider's count). When more candidates overlap than `narrow`, or more rows are active than fit, the least
overlapping candidates / shallowest rows are left out and `d.warning_number[Warning.CONTACTFULL]` is
incremented (per environment under vmap): nothing is dropped silently.
Mesh groups (a mesh against a bounded geom: box-mesh, mesh-mesh, ...; not plane or height field) of more than
`broadphase_mesh_min_pairs` dynamic candidates are trimmed the same way, whatever their size, since their colliders
(separating axes over hulls of hundreds of vertices, GJK/EPA, face clipping) cost far more than the test: a candidate
is near when its bounding spheres and its oriented bounding boxes (geom_aabb, the six face axes, as MuJoCo's
midphase) overlap with the margin, and the max(broadphase_mesh_min_pairs, ceil(broadphase_mesh_fraction * n)) with
the most box overlap reach the collider, all their rows kept (e.g. the Robotiq 2F-85's 42 box-mesh and 34 mesh-mesh
candidates run 11 and 9 colliders); more near candidates than that count CONTACTFULL as above.
The capacities are fields of the model's configuration (`mjx_lite.Config`), which decide its `nconmax`: change them
with `mjx_lite.configure`.

Capacity caps: MuJoCo's `<size nconmax njmax>` (or `Config.nconmax/njmax`) may set `m.nconmax` below the pair
table's rows (`mjx_lite.io`); then every group still runs and the deepest `m.nconmax` active rows of all groups
are kept, in layout order (`capped`); the steps that leave active rows out are counted in
`d.warning_number[Warning.CONTACTFULL]` (`CNSTRFULL` where the slots were cut to fit njmax).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite._struct import static_memo
from mjx_lite.collision import (
    boxbox,
    cylinder,
    epa,
    general,
    hfield,
    hull,
    mpr,
    occlusion,
    polyhedral,
    primitive,
    refine,
    sdf,
    sdf_mesh_pair,
)
from mjx_lite.collision import flex as flexcol
from mjx_lite.collision.frame import make_frame
from mjx_lite.collision.support import CURVED
from mjx_lite.collision.types import NOCONTACT, Contacts, GeomInfo, adhesive_dim, info_axes, mix_params
from mjx_lite.data import count_warning
from mjx_lite.types import DisableBit, EnableBit, GeomType, Model

GENERAL = -1  # Group.type1/type2 of the group of general convex pairs (types are then per pair)

_PLANE, _HFIELD, _MESH, _SDF = GeomType.PLANE, GeomType.HFIELD, GeomType.MESH, GeomType.SDF

# (type1, type2) -> (collider, contacts per pair); type1 <= type2. Missing pairs use general.general.
_ANALYTIC: dict[tuple[int, int], tuple[Callable, int]] = {
    (GeomType.PLANE, GeomType.SPHERE): (primitive.plane_sphere, 1),
    (GeomType.PLANE, GeomType.CAPSULE): (primitive.plane_capsule, 2),
    (GeomType.PLANE, GeomType.ELLIPSOID): (primitive.plane_ellipsoid, 1),
    (GeomType.PLANE, GeomType.CYLINDER): (primitive.plane_cylinder, 4),
    (GeomType.PLANE, GeomType.BOX): (primitive.plane_box, 4),
    (GeomType.PLANE, GeomType.MESH): (primitive.plane_mesh, primitive.PLANE_MESH_NCON),
    (GeomType.SPHERE, GeomType.SPHERE): (primitive.sphere_sphere, 1),
    (GeomType.SPHERE, GeomType.CAPSULE): (primitive.sphere_capsule, 1),
    (GeomType.SPHERE, GeomType.CYLINDER): (primitive.sphere_cylinder, 1),
    (GeomType.SPHERE, GeomType.BOX): (primitive.sphere_box, 1),
    (GeomType.SPHERE, GeomType.MESH): (general.sphere_mesh, 1),
    (GeomType.CAPSULE, GeomType.CAPSULE): (primitive.capsule_capsule, 2),
    (GeomType.CAPSULE, GeomType.BOX): (primitive.capsule_box, 2),
    (GeomType.BOX, GeomType.BOX): (boxbox.box_box, boxbox.MAXCON),
    (GeomType.BOX, GeomType.MESH): (polyhedral.box_mesh, polyhedral.MULTI_NCON),
    (GeomType.MESH, GeomType.MESH): (polyhedral.mesh_mesh, polyhedral.MULTI_NCON),
    (GeomType.CAPSULE, GeomType.CYLINDER): (cylinder.capsule_cylinder, cylinder.CYL_NCON),
    (GeomType.CAPSULE, GeomType.MESH): (cylinder.capsule_mesh, cylinder.CYL_NCON),
    (GeomType.CYLINDER, GeomType.CYLINDER): (cylinder.cylinder_cylinder, cylinder.CYL_NCON),
    (GeomType.CYLINDER, GeomType.BOX): (cylinder.cylinder_box, cylinder.CYL_NCON),
    (GeomType.CYLINDER, GeomType.MESH): (cylinder.cylinder_mesh, cylinder.CYL_NCON),
}
_MULTICCD = (polyhedral.box_mesh, polyhedral.mesh_mesh, cylinder.capsule_cylinder, cylinder.capsule_mesh,
             cylinder.cylinder_cylinder, cylinder.cylinder_box, cylinder.cylinder_mesh)  # fmt: skip
# with multiccd disabled, a multiccd collider's single contact: its own where it has one, else the general group's
_SINGLE_CONTACT = {cylinder.capsule_mesh: (general.capsule_mesh_single, 1)}
# colliders that take the model's separating-axis budget (`m.config.sat_budget`), bound per group by `_build_table`
_SAT_BUDGETED = (polyhedral.box_mesh, polyhedral.mesh_mesh)


def collider_for(type1: int, type2: int) -> tuple[Callable, int] | None:
    """(collider, contacts per pair) for an ordered type pair (type1 <= type2); None: no collision (MuJoCo)."""
    if type1 == _PLANE and type2 in (_PLANE, _HFIELD):
        return None
    if type1 == _HFIELD and type2 == _HFIELD:
        return None
    if _SDF in (type1, type2):
        raise NotImplementedError("collision: SDF geoms are not supported")
    if (type1, type2) in _ANALYTIC:
        return _ANALYTIC[(type1, type2)]
    if type1 == _HFIELD:
        return hfield.collider_for(type2)
    return general.general, general.GENERAL_NCON


@dataclasses.dataclass(frozen=True)
class Group:
    """Pairs of one (type1, type2) that share a collider. Arrays are static host numpy, shape (n,)."""

    type1: int
    type2: int
    data1: int  # hfield id of geom1 (-1 otherwise); part of the grouping key
    data2: int
    geom1: np.ndarray
    geom2: np.ndarray
    pair: np.ndarray  # explicit pair id, or -1 for dynamic pairs
    ncon: int  # contact rows per slot (= collider_ncon, or 1 when the group's rows are compacted)
    capacity: int  # output slots (= n unless the broadphase trims the group); rows = capacity * ncon
    collider: Callable = dataclasses.field(compare=False, repr=False)
    narrow: int = -1  # pairs that go through the narrow phase (= capacity unless compacted; -1: capacity)
    collider_ncon: int = -1  # contacts the collider emits per pair (-1: ncon)
    touch: int = -1  # pairs whose manifold runs (two-stage colliders, `stages`; -1: all narrow-phase pairs)
    # (distance stage, manifold stage) of a two-stage collider (`polyhedral.STAGES`), None: one stage
    stages: tuple | None = dataclasses.field(default=None, compare=False, repr=False)

    @property
    def nrows(self) -> int:
        return self.capacity * self.ncon

    @property
    def npair_narrow(self) -> int:
        return self.capacity if self.narrow < 0 else self.narrow

    @property
    def ncon_collider(self) -> int:
        return self.ncon if self.collider_ncon < 0 else self.collider_ncon

    @property
    def npair_out(self) -> int:
        """Pairs whose collider output fills the group's rows: `touch` for a two-stage group, else npair_narrow."""
        return self.npair_narrow if self.touch < 0 else self.touch

    @property
    def compacted(self) -> bool:
        return self.npair_out * self.ncon_collider != self.nrows

    @property
    def static_slots(self) -> bool:
        """Slot i always holds pair i (its ncon rows adjacent): the group is neither trimmed nor compacted, so the
        geoms (and bodies) of each row are known at trace time."""
        return self.capacity == len(self.geom1) and not self.compacted


@dataclasses.dataclass(frozen=True)
class PairTable:
    groups: tuple[Group, ...]
    nconmax: int
    # the candidate pairs of occluded height fields left out of the groups (collision/occlusion.py): the fields'
    # geom ids and the other geoms' (k,), watched every step (`collision` counts CONTACTFULL if one could touch)
    occluded: tuple[np.ndarray, np.ndarray] = (np.zeros(0, np.int32), np.zeros(0, np.int32))


def pair_table(m: Model) -> PairTable:
    """The static pair table of `m` (built once per Model static part, see `_struct.static_memo`)."""
    return static_memo(m, "pair_table", _build_table)


def contact_capacity(m: Model) -> int:
    """Static number of contact rows (Data.contact is padded to this): the pair table's rows, then the flex
    contact slots (collision/flex.py)."""
    return pair_table(m).nconmax + flexcol.capacity(m)


def dynamic_pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Candidate geom pairs of the dynamic (contype/conaffinity) mechanism, geom1 < geom2, before type ordering."""
    n = m.ngeom
    if n < 2:
        return np.zeros(0, np.int32), np.zeros(0, np.int32)
    g1, g2 = np.triu_indices(n, 1)
    ct, ca = np.asarray(m.geom_contype), np.asarray(m.geom_conaffinity)
    keep = ((ct[g1] & ca[g2]) != 0) | ((ct[g2] & ca[g1]) != 0)
    b1, b2 = np.asarray(m.geom_bodyid)[g1], np.asarray(m.geom_bodyid)[g2]
    weld = np.asarray(m.body_weldid)
    parent = np.asarray(m.body_parentid)
    w1, w2 = weld[b1], weld[b2]
    keep &= w1 != w2
    dofnum = np.asarray(m.body_dofnum)
    keep &= (dofnum[w1] > 0) | (dofnum[w2] > 0)  # both dof-less (static or mocap): no force can act, as MuJoCo
    if not m.opt.disableflags & DisableBit.FILTERPARENT:
        wp1, wp2 = weld[parent[w1]], weld[parent[w2]]
        keep &= ~((w1 != 0) & (w2 != 0) & ((w1 == wp2) | (w2 == wp1)))
    if m.nexclude:
        sig = (np.minimum(b1, b2).astype(np.int64) << 16) + np.maximum(b1, b2)
        keep &= ~np.isin(sig, np.asarray(m.exclude_signature, np.int64))
    if m.npair:
        p1, p2 = np.asarray(m.pair_geom1, np.int64), np.asarray(m.pair_geom2, np.int64)
        psig = np.concatenate([p1 * n + p2, p2 * n + p1])
        keep &= ~np.isin(g1.astype(np.int64) * n + g2, psig)
    return g1[keep].astype(np.int32), g2[keep].astype(np.int32)


def _collider(m: Model, type1: int, type2: int) -> tuple[Callable, int] | None:
    """`collider_for`, with multiccd disabled (m.opt): one contact instead of a manifold (`_SINGLE_CONTACT`); with
    nativeccd disabled, MuJoCo's mjc_Convex pairs go to libccd's MPR (`mpr.py`: one contact, or five with multiccd
    where neither geom is a sphere or an ellipsoid)."""
    if m.opt.disableflags & DisableBit.NATIVECCD and (type1, type2) in mpr.CONVEX_PAIRS:
        multiccd = not m.opt.disableflags & DisableBit.MULTICCD
        return mpr.collider(type1, type2, bool(multiccd), int(m.opt.ccd_iterations))
    fn = collider_for(type1, type2)
    if fn is not None and fn[0] in _MULTICCD and (m.opt.disableflags & DisableBit.MULTICCD):
        return _SINGLE_CONTACT.get(fn[0], (general.general, general.GENERAL_NCON))
    return fn


def _size_class(m: Model) -> np.ndarray:
    """(ngeom,) int: for mesh geoms, a size class of its mesh; -1 for other geoms. A mesh's size is the larger of its
    hull's vertex and triangle counts (the colliders see the hull only: `hull.mesh_hull`); sizes in ascending order
    are cut into classes wherever a size exceeds `m.config.mesh_size_ratio` times its class's smallest (the meshes of
    geoms that may collide; the others join the last class). Mesh pairs are
    grouped by class, so a group's padded tables (its largest mesh's) are within that factor of each of its meshes,
    and the number of classes grows with the log of the ratio of the largest mesh to the smallest, not with the
    number of meshes."""
    out = np.full(m.ngeom, -1, np.int64)
    mesh = np.asarray(m.geom_type) == _MESH
    if not (m.nmesh and np.any(mesh)):
        return out
    # only the meshes of geoms that may collide set the classes (visual meshes would shift their bounds); only
    # their hulls are built (`hull.mesh_hull`); the others join the last class
    used = _collided_meshes(m)
    size = np.zeros(m.nmesh, np.int64)
    size[used] = [hull.hull_size(m, i) for i in np.flatnonzero(used)]
    cls = np.zeros(m.nmesh, np.int64)
    first, k = None, -1
    for i in [i for i in np.argsort(size, kind="stable") if used[i]]:
        if first is None or size[i] > m.config.mesh_size_ratio * first:
            first, k = size[i], k + 1
        cls[i] = k
    cls[~used] = max(k, 0)
    out[mesh] = cls[np.asarray(m.geom_dataid)[mesh]]
    return out


def _sdf_ids(m: Model) -> np.ndarray:
    """(ngeom,) for SDF geoms the index of their plugin configuration among the model's distinct ones, else -1
    (part of an SDF group's key, `Group.data1/data2`)."""
    out = np.full(m.ngeom, -1, np.int64)
    seen: dict = {}
    for i, cfg in enumerate(m.geom_sdf):
        if cfg is not None:
            out[i] = seen.setdefault(cfg, len(seen))
    return out


def _sdf_collider(m: Model, t1: int, da: int, db: int) -> tuple[Callable, int]:
    """The collider of an SDF group: da is geom1's SDF id (`_sdf_ids`), or its mesh for mesh-SDF pairs."""
    cfgs = list(dict.fromkeys(c for c in m.geom_sdf if c is not None))
    if t1 == _MESH:
        return sdf_mesh_pair.collider(m, da, cfgs[db])
    return sdf.collider(m, t1, cfgs[da] if da >= 0 else None, cfgs[db])


def _mesh_group(gtype: np.ndarray, t1: int, arr: np.ndarray) -> bool:
    """Whether a group (first type t1, pairs arr (n, 3)) collides a mesh with a bounded geom (no plane or height
    field): its candidates are trimmed by `Config.broadphase_mesh_*` and tested by their bounding boxes."""
    return t1 not in (_PLANE, _HFIELD) and bool(np.any(gtype[arr[:, :2]] == _MESH))


def _hull_size(m: Model) -> np.ndarray:
    """(ngeom,) the size a geom's hull adds to a collider's padded tables: a mesh's larger of its hull's vertex and
    triangle counts (as `_size_class`), a box's (12: as a mesh side's `hull.BOX_HULL`), 1 for the other geoms."""
    out = np.ones(m.ngeom, np.int64)
    out[np.asarray(m.geom_type) == GeomType.BOX] = max(len(hull.BOX_HULL.vert), len(hull.BOX_HULL.face))
    mesh = np.asarray(m.geom_type) == _MESH
    if m.nmesh and np.any(mesh):
        used = _collided_meshes(m)
        size = np.ones(m.nmesh, np.int64)  # meshes of geoms that never collide: in no pair
        size[used] = [hull.hull_size(m, i) for i in np.flatnonzero(used)]
        out[mesh] = size[np.asarray(m.geom_dataid)[mesh]]
    return out


def _collided_meshes(m: Model) -> np.ndarray:
    """(nmesh,) bool: the meshes of mesh geoms that may collide (contype or conaffinity set, or in an explicit pair):
    the only ones whose hulls the pair table and the colliders need."""
    mesh = np.asarray(m.geom_type) == _MESH
    collides = mesh & ((np.asarray(m.geom_contype) | np.asarray(m.geom_conaffinity)) != 0)
    collides[np.asarray(m.pair_geom1, np.int64)] = True
    collides[np.asarray(m.pair_geom2, np.int64)] = True
    used = np.zeros(m.nmesh, bool)
    used[np.asarray(m.geom_dataid)[collides & mesh]] = True
    return used


@dataclasses.dataclass(frozen=True)
class _Layout:
    """A group's static slots (see `Group`): output slots, narrow-phase pairs, rows per slot, manifold pairs."""

    capacity: int
    narrow: int
    ncon: int
    touch: int  # -1: one stage

    def __add__(self, o: _Layout) -> _Layout:
        """Two groups' pairs in one: the slots of both (every pair that reached a collider in either still does;
        the manifold stage keeps both groups' manifold pairs)."""
        t1, t2 = (x.touch if x.touch >= 0 else x.narrow for x in (self, o))
        touch = t1 + t2 if t1 + t2 < self.narrow + o.narrow else -1
        return _Layout(self.capacity + o.capacity, self.narrow + o.narrow, self.ncon, touch)


def _layout(m: Model, gtype: np.ndarray, t1: int, arr: np.ndarray, explicit: bool, ncon: int, staged: bool
            ) -> _Layout:  # fmt: skip
    """The slots of a group of pairs arr (n, 3) of first type t1 and a collider of `ncon` contacts (`staged`: it has
    a distance and a manifold stage): the broadphase's trims (module docstring) from `m.config`."""
    n = len(arr)
    cap, narrow, k = n, n, ncon
    cfg = m.config
    if not explicit and n > cfg.broadphase_min_pairs:
        nuniq = len(np.unique(arr[:, :2]))
        narrow = cap = min(n, max(1, int(np.ceil(cfg.broadphase_pairs_per_geom * nuniq))))
        rows = int(np.ceil(cfg.broadphase_contacts_per_pair * narrow))
        # keep only the deepest rows of multi-contact colliders (not height fields: own layout); rows < n keeps
        # `capacity < n` the mark of a trimmed group for the modules that follow this layout
        if narrow < n and ncon > 1 and t1 != _HFIELD and rows < min(n, narrow * ncon):
            cap, k = rows, 1
    if not explicit and _mesh_group(gtype, t1, arr) and n > cfg.broadphase_mesh_min_pairs:
        # mesh pairs: only the most overlapping share reaches the (expensive) collider, all its rows kept
        mesh_narrow = max(cfg.broadphase_mesh_min_pairs, int(np.ceil(cfg.broadphase_mesh_fraction * n)))
        if mesh_narrow < narrow:
            narrow = mesh_narrow
            cap = narrow if k == ncon else min(cap, narrow * ncon)
    touch = -1
    if not explicit and staged and _mesh_group(gtype, t1, arr) and cfg.broadphase_mesh_touch < narrow:
        # two stages: the distance of every narrow-phase pair, then the manifold (feature search and clipping,
        # most of the collider's cost) of the `broadphase_mesh_touch` closest within the margin (as MuJoCo:
        # only a pair in contact gets a manifold)
        touch = cfg.broadphase_mesh_touch
        cap = touch if k == ncon else min(cap, touch * ncon)
    return _Layout(cap, narrow, k, touch)


def _merges_classes(fn: Callable) -> bool:
    """Whether a collider's pairs in different mesh size classes may share a group (`_merge_classes`): the GJK/EPA
    and manifold colliders, whose compile time dominates a mesh model's (not plane-mesh or height fields: cheap to
    compile, their cost is per step)."""
    fn = getattr(fn, "func", fn)
    return fn in _LOOPED or fn in _MULTICCD or fn is general.sphere_mesh


def _merge_classes(m: Model, parts: list[tuple[np.ndarray, _Layout]], size: np.ndarray
                   ) -> list[tuple[np.ndarray, _Layout]]:  # fmt: skip
    """Size classes weighed against compile time: the buckets `parts` ((pairs (n, 3), layout), ascending size
    classes) of one pair type and collider merged, in order, where the merged group's narrow-phase work (narrow
    pairs x the sum of its two sides' padded hull sizes, `_hull_size`) is at most `m.config.mesh_class_merge` times
    the work of the groups apart: one compiled collider instead of two, for a bounded slowdown of the step."""

    def work(arr, lay):
        return lay.narrow * (int(size[arr[:, 0]].max()) + int(size[arr[:, 1]].max()))

    out = [parts[0]]
    for arr, lay in parts[1:]:
        arr0, lay0 = out[-1]
        both = np.concatenate([arr0, arr])
        merged = lay0 + lay
        apart = work(arr0, lay0) + work(arr, lay)
        if lay0.ncon == lay.ncon and work(both, merged) <= m.config.mesh_class_merge * apart:
            out[-1] = (both, merged)
        else:
            out.append((arr, lay))
    return out


def _boxes_as_meshes(m: Model, buckets: dict[tuple, list]) -> dict[tuple, list]:
    """Box-mesh buckets re-keyed as mesh-mesh ones (first size class -1, before the meshes' classes) where the model
    also has mesh-mesh pairs of the same kind (explicit or not): a box enters the mesh-mesh collider as an 8-vertex
    hull (`hull.BOX_HULL`, `_geom_info`), the same polygons, planes and edges as the box collider's, so both pair
    types run one compiled collider (distance and manifold stages) instead of two (`_merge_classes` then weighs the
    box class against the meshes' like any other). Without mesh-mesh pairs nothing changes."""
    box_mesh = collider_for(GeomType.BOX, _MESH)
    if _collider(m, GeomType.BOX, _MESH) != box_mesh:  # multiccd disabled: box-mesh is a general pair
        return buckets
    kinds = {key[4] for key in buckets if key[:2] == (_MESH, _MESH)}
    out: dict[tuple, list] = {}
    for key, rows in buckets.items():
        if key[:2] == (GeomType.BOX, _MESH) and key[4] in kinds:
            key = (_MESH, _MESH, -1, -1, key[4], key[5], -1, key[7])
        out.setdefault(key, []).append(rows)
    return {key: np.concatenate(parts) for key, parts in out.items()}


def _buckets(m: Model, gtype: np.ndarray, dataid: np.ndarray, sizes: np.ndarray) -> dict[tuple, np.ndarray]:
    """The candidate pairs (dynamic, then explicit) bucketed by collider key, in array operations (a scene of 100
    humanoids has 1.8M candidate pairs): {key: (n, 3) int (geom1, geom2, explicit pair id or -1)}, geom1's type <=
    geom2's; keys in order of first appearance, rows in candidate order. key: (type1, type2, hfield or SDF id of
    geom1, of geom2, explicit, curved, size class of geom1, of geom2), with GENERAL types for the general convex
    pairs (one compiled GJK/EPA for those with a curved shape and no mesh, one for the others); height fields
    grouped per field, meshes per size class (a group's tables are padded to its largest mesh)."""
    d1, d2 = dynamic_pairs(m)
    a = np.concatenate([d1, np.asarray(m.pair_geom1)]).astype(np.int64)
    b = np.concatenate([d2, np.asarray(m.pair_geom2)]).astype(np.int64)
    p = np.concatenate([np.full(len(d1), -1), np.arange(m.npair)]).astype(np.int64)
    swap = gtype[a] > gtype[b]
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    t1, t2 = gtype[a].astype(np.int64), gtype[b].astype(np.int64)
    keep = ~occlusion.pairs(m, a, b, p)  # occluded height-field pairs: no slots (`occluded_pairs`)
    curved = np.zeros(len(a), bool)
    is_sdf = t2 == _SDF
    keep &= ~(is_sdf & (t1 == _HFIELD))  # MuJoCo warns and makes no contact
    plane_sdf = is_sdf & (t1 == _PLANE)  # a plane collides with the SDF's mesh (as MuJoCo)
    t2 = np.where(plane_sdf, _MESH, t2)
    sdf_group = is_sdf & ~plane_sdf & keep  # collision/sdf.py, grouped by plugin
    rest = keep & ~sdf_group
    k1, k2 = t1.copy(), t2.copy()
    for u in np.unique(t1[rest] * 16 + t2[rest]).tolist():
        u1, u2 = divmod(u, 16)
        sel = rest & (t1 == u1) & (t2 == u2)
        fn = _collider(m, u1, u2)
        if fn is None:
            keep &= ~sel
        elif fn[0] is general.general:
            curved[sel] = (u1 in CURVED or u2 in CURVED) and _MESH not in (u1, u2)
            k1[sel] = k2[sel] = GENERAL
    rest &= keep
    sdfs = _sdf_ids(m)
    da = np.where(sdf_group, np.where(t1 == _MESH, dataid[a], sdfs[a]), np.where(rest & (k1 == _HFIELD), dataid[a], -1))
    db = np.where(sdf_group, sdfs[b], np.where(rest & (k2 == _HFIELD), dataid[b], -1))
    s1, s2 = np.where(sdf_group, -1, sizes[a]), np.where(sdf_group, -1, sizes[b])
    keys = np.stack([k1, k2, da, db, p >= 0, curved, s1, s2], axis=1)[keep]
    rows = np.stack([a, b, p], axis=1)[keep]
    if not len(rows):
        return {}
    code = np.zeros(len(rows), np.int64)  # one integer per key (mixed radix over each column's distinct values)
    for col in keys.T:
        values, ids = np.unique(col, return_inverse=True)
        code = code * len(values) + ids.reshape(-1)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    uniq = keys[first]
    parts = np.split(np.argsort(inverse, kind="stable"), np.cumsum(np.bincount(inverse, minlength=len(uniq)))[:-1])
    out = {}
    for u in np.argsort(first):
        k = uniq[u].tolist()
        out[(*k[:4], bool(k[4]), bool(k[5]), *k[6:])] = rows[parts[u]]
    return out


def _build_table(m: Model) -> PairTable:
    if m.opt.disableflags & (DisableBit.CONTACT | DisableBit.CONSTRAINT):
        return PairTable((), 0)
    gtype = np.asarray(m.geom_type)
    dataid = np.asarray(m.geom_dataid)
    sizes = _size_class(m)
    buckets = _buckets(m, gtype, dataid, sizes)
    buckets = _boxes_as_meshes(m, buckets)
    # the size classes of one pair type (same key up to the classes), each bucket with its collider and layout
    kinds: dict[tuple, list] = {}
    for key in sorted(buckets):
        t1, t2, da, db, explicit, curved = key[:6]
        arr = np.asarray(buckets[key], np.int32)
        stages = None
        if t1 == GENERAL:  # the others: refined where curved if any is
            fn, ncon = general.general if curved else general.general_plain, general.GENERAL_NCON
        elif t2 == _SDF:
            fn, ncon = _sdf_collider(m, t1, da, db)
        else:
            fn, ncon = _collider(m, t1, t2)
            stages = polyhedral.STAGES.get(fn)
        if t1 == _HFIELD:  # contacts per pair: the field's window for this group's geoms
            _, ncon = hfield.group_collider(m, da, t2, arr[:, 0], arr[:, 1])
        kinds.setdefault(key[:6], []).append((arr, _layout(m, gtype, t1, arr, explicit, ncon, stages is not None)))
    size = _hull_size(m)
    groups = []
    for (t1, t2, da, db, _, curved), parts in kinds.items():
        stages = None
        if t1 == GENERAL:
            fn, ncon = None, general.GENERAL_NCON  # chosen per merged group below
        elif t2 == _SDF:
            fn, ncon = _sdf_collider(m, t1, da, db)
        else:
            fn, ncon = _collider(m, t1, t2)
            stages = polyhedral.STAGES.get(fn)
        if len(parts) > 1 and t1 != _HFIELD and (t1 == GENERAL or _merges_classes(fn)):
            parts = _merge_classes(m, parts, size)
        for arr, lay in parts:
            gfn, gstages = fn, None
            if t1 == GENERAL:
                any_curved = np.isin(gtype[arr[:, :2]], CURVED).any()
                gfn = general.general_curved if curved else general.general if any_curved else general.general_plain
                if not curved:  # the support maps branch over the types of each side only (`general.general`)
                    side = (tuple(np.unique(gtype[arr[:, k]]).tolist()) for k in (0, 1))
                    gfn = functools.partial(gfn, types=tuple(side))
            elif fn in _SAT_BUDGETED:  # the model's budget, a static value: two budgets make two tables and traces
                gfn = functools.partial(fn, sat_budget=m.config.sat_budget)
            gncon = ncon
            if t1 == _HFIELD:  # bound to its height field and window size: fn(m, info1, info2, margin)
                gfn, gncon = hfield.group_collider(m, da, t2, arr[:, 0], arr[:, 1])
            if lay.touch >= 0:
                gstages = (functools.partial(stages[0], sat_budget=m.config.sat_budget), stages[1])
            for a in (arr[:, 0], arr[:, 1], arr[:, 2]):
                a.setflags(write=False)
            groups.append(Group(t1, t2, da, db, arr[:, 0].copy(), arr[:, 1].copy(), arr[:, 2].copy(), lay.ncon,
                                lay.capacity, gfn, lay.narrow, gncon, lay.touch, gstages))  # fmt: skip
    return PairTable(tuple(groups), int(sum(g.nrows for g in groups)), occluded_pairs(m))


def occluded_pairs(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (height-field geoms (k,), other geoms (k,)) of the candidate pairs `_buckets` leaves out because the
    field lies below a plane the other geom collides with (collision/occlusion.py)."""
    d1, d2 = dynamic_pairs(m)
    a = np.concatenate([d1, np.asarray(m.pair_geom1)]).astype(np.int64)
    b = np.concatenate([d2, np.asarray(m.pair_geom2)]).astype(np.int64)
    p = np.concatenate([np.full(len(d1), -1), np.arange(m.npair)]).astype(np.int64)
    gtype = np.asarray(m.geom_type)
    swap = gtype[a] > gtype[b]
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    sel = occlusion.pairs(m, a, b, p)
    return a[sel].astype(np.int32), b[sel].astype(np.int32)


# ---------------------------------------------------------------------------------------------------------
# contact parameters


def _mix_params(m: Model, g1: np.ndarray, g2: np.ndarray) -> tuple:
    """Dynamic-pair parameters (mj_contactParam) for static geom id arrays (n,). Returns jax arrays."""
    f = m.geom_friction
    p1, p2 = np.asarray(m.geom_priority)[g1], np.asarray(m.geom_priority)[g2]
    c1, c2 = np.asarray(m.geom_condim)[g1], np.asarray(m.geom_condim)[g2]
    hi1 = p1 > p2  # geom1 has priority
    hi2 = p2 > p1
    same = ~(hi1 | hi2)
    condim = np.where(same, np.maximum(c1, c2), np.where(hi1, c1, c2)).astype(np.int32)
    friction, solref, solimp = mix_params((p1, m.geom_solmix[g1], m.geom_solref[g1], m.geom_solimp[g1], f[g1]),
                                          (p2, m.geom_solmix[g2], m.geom_solref[g2], m.geom_solimp[g2], f[g2]))
    # MuJoCo >= 4: margins (geometric inflation) and gaps (extra detection buffer) of the two geoms add up
    margin = m.geom_margin[g1] + m.geom_margin[g2]
    gap = m.geom_gap[g1] + m.geom_gap[g2]
    solreffriction = jp.zeros_like(solref)
    # adhesion: the two geoms' sum, or the higher priority's
    a1, a2 = m.geom_adhesion[g1], m.geom_adhesion[g2]
    adhesion = jp.where(same, a1 + a2, jp.where(hi1, a1, a2))
    return condim, margin, gap, friction, solref, solreffriction, solimp, adhesion


def _pair_params(m: Model, pid: np.ndarray) -> tuple:
    """Explicit-pair parameters (as `_mix_params`) of the pair ids pid (n,)."""
    condim = np.asarray(m.pair_dim)[pid].astype(np.int32)
    return (condim, m.pair_margin[pid], m.pair_gap[pid], m.pair_friction[pid], m.pair_solref[pid],
            m.pair_solreffriction[pid], m.pair_solimp[pid], m.pair_adhesion[pid])  # fmt: skip


def _params(m: Model, g: Group, mixed: tuple | None = None) -> tuple:
    """(condim (n,), margin (n,), gap (n,), friction (n, 5), solref (n, 2), solreffriction (n, 2), solimp (n, 5),
    adhesion (n,)) of a group's pairs, explicit or mixed, under the override flag (which leaves adhesion alone).
    mixed: the group's `_mix_params`, computed with other groups' (`_all_params`); None: computed here."""
    if g.pair[0] >= 0:
        condim, margin, gap, friction, solref, solreffriction, solimp, adhesion = _pair_params(m, g.pair)
    elif mixed is not None:
        condim, margin, gap, friction, solref, solreffriction, solimp, adhesion = mixed
    else:
        condim, margin, gap, friction, solref, solreffriction, solimp, adhesion = _mix_params(m, g.geom1, g.geom2)
    if m.opt.enableflags & EnableBit.OVERRIDE:
        n = len(g.geom1)
        margin = jp.broadcast_to(m.opt.o_margin, (n,))
        solref = jp.broadcast_to(m.opt.o_solref, (n, 2))
        solimp = jp.broadcast_to(m.opt.o_solimp, (n, 5))
        friction = jp.broadcast_to(m.opt.o_friction, (n, 5))
    friction = jp.maximum(friction, types.MINMU)
    return condim, margin, gap, friction, solref, solreffriction, solimp, adhesion


def _all_params(m: Model, groups: dict[int, Group]) -> dict[int, tuple]:
    """{group index: `_params`} of the groups, the dynamic pairs of all of them mixed in one `_mix_params` call (its
    operations are elementwise per pair): one set of mixing operations per model, not one per group (22 in the
    Shadow Hand, whose per-group copies were 239 of its collision program's 4386 fused kernels)."""
    mixed = sorted(i for i, g in groups.items() if g.pair[0] < 0)
    out = {}
    if mixed:
        g1 = np.concatenate([groups[i].geom1 for i in mixed])
        g2 = np.concatenate([groups[i].geom2 for i in mixed])
        allp = _mix_params(m, g1, g2)
        at = 0
        for i in mixed:
            n = len(groups[i].geom1)
            out[i] = _params(m, groups[i], tuple(x[at : at + n] for x in allp))
            at += n
    for i, g in groups.items():
        if i not in out:
            out[i] = _params(m, g)
    return out


def covered_params(m: Model, groups: dict[int, Group]) -> dict[int, tuple]:
    """{group index: (condim, margin, gap, friction, solref, solreffriction, solimp, adhesion)} of the groups' pairs,
    as `collision` computes them (the XLA twin of the fused contact parameters, pipeline/kernels/contact_params.py)."""
    return _all_params(m, groups)


# ---------------------------------------------------------------------------------------------------------
# run time


class _Deferred(NamedTuple):
    """A side's per-pair mesh rows not yet gathered (`hull.geom_fields`' deferred=True): the tables (`hull.PER_PAIR`
    fields, indexed by mesh id) and each pair's mesh id mid (n,); `_near_only` gathers the rows of the pairs it runs
    at a time (`_resolve`)."""

    tables: dict
    mid: jax.Array


def _resolve(info: GeomInfo, deferred: _Deferred | None, idx: jax.Array | None = None) -> GeomInfo:
    """info with its deferred per-pair mesh rows gathered: for the pairs idx (k,) of the deferred ids (info: those
    pairs' already), or for every pair (idx None); info itself where nothing is deferred."""
    if deferred is None:
        return info
    mid = deferred.mid if idx is None else deferred.mid[idx]
    return info._replace(**{k: t[mid] for k, t in deferred.tables.items()})


def _geom_info(m: Model, d: types.Data, gids: jax.Array, gtype: int, group_gids: np.ndarray | None = None,
               meshes: bool = True, deferred: bool = False
               ) -> GeomInfo | tuple[GeomInfo, _Deferred | None]:  # fmt: skip
    """The geoms `gids` (n,) of one group as a vectorised GeomInfo; `group_gids` (numpy) are all the geoms this side
    of the group may take (None: any geom). A mesh enters as its convex hull (`hull.group_tables`: hull vertices,
    triangles, polygons, face planes, edges), padded to the largest hull of the meshes this side may take.
    meshes=False: no mesh tables for GENERAL (the side holds no mesh). deferred=True (a side without boxes): returns
    (info without its per-pair mesh rows, `_Deferred` of those rows or None), for `_near_only` to gather the rows of
    the near pairs only."""
    mesh = {}
    boxes = gtype == _MESH and group_gids is not None and np.any(np.asarray(m.geom_type)[group_gids] == GeomType.BOX)
    if boxes:  # a mesh side that also takes boxes (`_boxes_as_meshes`): as the mesh of id nmesh (`hull.BOX_HULL`)
        is_box = jp.asarray(m.geom_type)[gids] == GeomType.BOX
        mid = jp.where(is_box, m.nmesh, jp.maximum(jp.asarray(m.geom_dataid)[gids], 0))
        ggids = np.asarray(group_gids)
        mids = np.asarray(m.geom_dataid)[ggids[np.asarray(m.geom_type)[ggids] == _MESH]]
        mesh = hull.geom_fields(m, mid, mids, box=(is_box, m.geom_size[gids]))
    elif gtype == _MESH or (gtype == GENERAL and m.nmesh and meshes):
        mid = jp.maximum(jp.asarray(m.geom_dataid)[gids], 0)
        mids = np.arange(m.nmesh) if group_gids is None else np.maximum(np.asarray(m.geom_dataid)[group_gids], 0)
        mesh = hull.geom_fields(m, mid, mids, deferred=deferred)
        if deferred and gtype == GENERAL:  # GJK/EPA kinds: the refinement's kinks once per mesh
            side = np.unique(mids[(mids >= 0) & (mids < m.nmesh)])
            t = hull.group_tables(m, mids)
            mesh.update(refine.mesh_kink_tables(m.mesh_vert[jp.asarray(t["vert"][side])], jp.asarray(t["face"][side]),
                                                jp.asarray(t["edge"][side])))  # fmt: skip
    gt = jp.asarray(m.geom_type)[gids] if gtype == GENERAL else None
    tables = mesh.pop("deferred", None)
    info = GeomInfo(d.geom_xpos[gids], d.geom_xmat[gids], m.geom_size[gids], gtype=gt, **mesh)
    if not deferred:
        return info
    if boxes:
        raise ValueError("_geom_info: deferred mesh rows on a side with boxes")
    return info, None if tables is None else _Deferred(tables, mid)


def _box_slack(m: Model, d: types.Data, g1: jax.Array, g2: jax.Array, margin: jax.Array) -> jax.Array:
    """(n,) the least slack of the oriented bounding boxes (geom_aabb: centre, half-size in the geom frame) of the
    pairs g1, g2 (n,) over the six face axes of the two boxes, with the detection margin (n,): negative where an axis
    separates them by more than the margin (no contact possible), else how far the boxes overlap along their
    least-overlapping face axis (the broadphase's score)."""
    a1, a2 = m.geom_aabb[g1], m.geom_aabb[g2]
    r1, r2 = d.geom_xmat[g1], d.geom_xmat[g2]  # (n, 3, 3): columns are the geom axes
    c1 = d.geom_xpos[g1] + jp.einsum("nij,nj->ni", r1, a1[:, :3])
    c2 = d.geom_xpos[g2] + jp.einsum("nij,nj->ni", r2, a2[:, :3])
    axes = jp.concatenate([r1, r2], axis=-1)  # (n, 3, 6): the six face axes
    rad1 = jp.sum(jp.abs(jp.einsum("nik,nij->nkj", axes, r1)) * a1[:, None, 3:], axis=-1)  # (n, 6)
    rad2 = jp.sum(jp.abs(jp.einsum("nik,nij->nkj", axes, r2)) * a2[:, None, 3:], axis=-1)
    proj = jp.abs(jp.einsum("nik,ni->nk", axes, c1 - c2))
    return jp.min(rad1 + rad2 + margin[:, None] - proj, axis=-1)


def _take_info(info: GeomInfo, idx: jax.Array) -> GeomInfo:
    """The pairs idx (k,) of a group's vectorised GeomInfo (its batched fields: those `info_axes` maps)."""
    axes = info_axes(info)
    return GeomInfo(*[x if x is None or a is None else x[idx] for x, a in zip(info, axes)])


# GJK/EPA colliders (fixed iteration counts: every pair pays them): `_run_group` runs them on the pairs that pass the
# broadphase only (`_near_only`)
_LOOPED = (general.general, general.general_curved, general.general_plain, cylinder.capsule_cylinder,
           cylinder.cylinder_cylinder, cylinder.cylinder_box, cylinder.cylinder_mesh, cylinder.capsule_mesh,
           general.capsule_mesh_single, general.general_mixed, *cylinder.CURVED_MANIFOLDS.values(),
           cylinder.curved_manifold,
           mpr.mpr)  # fmt: skip
NEAR_CHUNK = 4  # pairs per trip of `_near_only`'s loop


def _pair_flags(args: tuple) -> tuple:
    """Which leaves of `_near_loop`'s arguments (info1, info2, margin, near, extra, deferred) have the pair axis
    (True: (n, ...)) and which are shared by every pair (False: the mesh tables): a tree of the arguments' structure."""
    info1, info2, margin, near, extra, deferred = args

    def info(g):
        return GeomInfo(*[None if x is None else a == 0 for x, a in zip(g, info_axes(g))])

    def dfr(x):
        return None if x is None else _Deferred({key: False for key in x.tables}, True)

    return info(info1), info(info2), True, True, tuple(True for _ in extra), tuple(dfr(x) for x in deferred)


def _near_loop(collider: Callable, k: int, chunk: int, dense: Callable) -> Callable:
    """loop(info1, info2, margin, near, extra, deferred) -> Contacts (n, k, ...): `dense` (the collider vmapped over
    lanes) on the near pairs, compacted (order kept) and run `chunk` at a time in a `lax.while_loop` of
    ceil(near pairs / chunk) trips; placeholders on the others."""

    def loop(info1, info2, margin, near, extra, deferred):
        n = near.shape[0]
        c = min(n, chunk)
        dt = info1.pos.dtype
        init = Contacts(jp.full((n, k), NOCONTACT, dt), jp.zeros((n, k, 3), dt),
                        jp.broadcast_to(jp.array([0.0, 0.0, 1.0], dt), (n, k, 3)), jp.zeros((n, k, 3), dt))
        order = jp.argsort(~near, stable=True).astype(jp.int32)  # near pairs first
        count = jp.sum(near.astype(jp.int32))
        slot = jp.arange(c, dtype=jp.int32)

        def body(carry):
            j, out = carry
            at = j * c + slot
            idx = order[jp.minimum(at, n - 1)]
            with epa.forward_only():  # never differentiated (custom_jvp in `_near_only`): EPA may stop early
                r = dense(_resolve(_take_info(info1, idx), deferred[0], idx),
                          _resolve(_take_info(info2, idx), deferred[1], idx), margin[idx], tuple(x[idx] for x in extra))
            if r.dist.shape[1:] != (k,):
                raise ValueError(f"collision: {collider} emits {r.dist.shape[1:]} contacts per pair, not ({k},)")
            dst = jp.where(at < count, idx, n)  # beyond the near pairs: dropped
            return j + 1, Contacts(*[o.at[dst].set(x.astype(o.dtype), mode="drop") for o, x in zip(out, r)])

        trips = (count + c - 1) // c
        return jax.lax.while_loop(lambda x: x[0] < trips, body, (jp.zeros((), jp.int32), init))[1]

    return loop


@jax.custom_batching.custom_vmap
def _pool(args: tuple) -> tuple[tuple, jax.Array]:
    """(args, token): `_near_loop`'s arguments as they are and an empty token (0,). Under `vmap` (`_pool_rule`) the
    environments' pairs pooled: every per-pair leaf (B, n, ...) (or (n, ...), broadcast) reshaped to (B * n, ...), the
    shared leaves (mesh tables) as they are, all returned unbatched, and the token batched (B, 0). So the loop that
    reads them is traced once, outside the batching (no batched while loop: no fixpoint over its carry, no per-lane
    selects in its body and early stop), and `_unpool` finds the batch size from the token. The pooled values are not
    the vmap of the identity (their shape holds the batch): only the loop and `_unpool` read them."""
    return args, jp.zeros((0,), jp.int32)


@_pool.def_vmap
def _pool_rule(axis_size: int, in_batched: list, args: tuple) -> tuple:
    (batched_tree,) = in_batched
    leaves, tree = jax.tree.flatten(args)
    batched = jax.tree.leaves(batched_tree)
    pair = jax.tree.leaves(_pair_flags(args))
    if len(batched) != len(leaves) or len(pair) != len(leaves):
        raise ValueError("collision: the near-pair loop's arguments and their flags differ in structure")
    token = jp.zeros((axis_size, 0), jp.int32)
    if any(b and not p for b, p in zip(batched, pair)):  # a batched mesh table (a batch of models): not pooled
        return (args, token), (batched_tree, True)
    n = args[3].shape[-1]
    flat = []
    for x, b, p in zip(leaves, batched, pair):
        if p:
            x = x if b else jp.broadcast_to(x, (axis_size,) + x.shape)
            x = x.reshape((axis_size * n,) + x.shape[2:])
        flat.append(x)
    return (jax.tree.unflatten(tree, flat), token), (jax.tree.unflatten(tree, [False] * len(flat)), True)


@jax.custom_batching.custom_vmap
def _unpool(c: Contacts, token: jax.Array) -> Contacts:
    """The loop's Contacts c as they are; under `vmap` (the token batched by `_pool`) pooled rows (B * n, k, ...)
    back to (B, n, k, ...) batched."""
    return c


@_unpool.def_vmap
def _unpool_rule(axis_size: int, in_batched: list, c: Contacts, token: jax.Array) -> tuple:
    cb = jax.tree.leaves(in_batched[0])
    if all(cb):  # not pooled (`_pool`'s fallback): the batched loop's rows
        return c, Contacts(True, True, True, True)
    if any(cb):
        raise ValueError("collision: the near-pair loop's rows are partly batched")
    n = c.dist.shape[0] // axis_size
    return Contacts(*[x.reshape((axis_size, n) + x.shape[1:]) for x in c]), Contacts(True, True, True, True)


def _near_only(collider: Callable, n: int, k: int) -> Callable:
    """run(info1, info2, margin (n,), near (n,) bool, extra=()) -> Contacts (n, k, ...): `collider` (k contacts per
    pair; called as collider(g1, g2, margin, *extra) with `extra` per-pair arrays (n, ...), e.g. a manifold stage's
    distance stage) on the pairs that are near (the broadphase's verdict), placeholders (dist NOCONTACT, +z normals)
    on the others, which `_rows` masks anyway. The collider is traced in the loop's body (the output shapes are
    known from k and the geoms' dtype: no separate shape trace, which cost as much trace time as the body's).

    Forward, the near pairs are compacted (order kept) and run `NEAR_CHUNK` at a time in a `lax.while_loop`
    (`_near_loop`): none where no pair of the group is near (a quadruped's legs and its eyes), one for a ball at its
    torso, instead of every pair's full GJK/EPA iterations. Under `vmap` the loop runs over every environment's
    near pairs pooled (`_pool`, `_unpool`), `NEAR_CHUNK` times the batch per trip (at most the trips of the batch's
    slowest environment): it is traced once and compiled unbatched (a batched while loop whose body holds EPA's while
    loop was half of the Shadow Hand's step's trace time, and put per-lane selects in both loops).
    Derivatives (custom_jvp) are those of the collider `vmap`-ed over all n pairs, as before: no derivative passes
    through the loop, so its EPA stops at its last live iteration (`epa.forward_only`)."""

    def dense(info1, info2, margin, extra):
        axes = (info_axes(info1), info_axes(info2), 0) + (0,) * len(extra)
        return jax.vmap(collider, in_axes=axes)(info1, info2, margin, *extra)

    @jax.custom_jvp
    def run(info1, info2, margin, near, extra, deferred):
        pooled, token = _pool((info1, info2, margin, near, extra, deferred))
        lanes = NEAR_CHUNK * max(1, pooled[3].shape[0] // n)  # NEAR_CHUNK per environment of a pooled batch
        return _unpool(_near_loop(collider, k, lanes, dense)(*pooled), token)

    @run.defjvp
    def run_jvp(primals, tangents):
        info1, info2, margin, _, extra, deferred = primals
        t1, t2, tm, _, te, td = tangents

        def full(info1, info2, margin, extra, deferred):  # every pair's mesh rows (only under differentiation)
            return dense(_resolve(info1, deferred[0]), _resolve(info2, deferred[1]), margin, extra)

        return jax.jvp(full, (info1, info2, margin, extra, deferred), (t1, t2, tm, te, td))

    def call(info1, info2, margin, near, extra=(), deferred=(None, None)):
        return run(info1, info2, margin, near, tuple(extra), tuple(deferred))

    return call


def _is_mpr(g: Group) -> bool:
    """Whether group g runs libccd's MPR (`mpr.py`: nativeccd disabled)."""
    return getattr(g.collider, "func", None) is mpr.mpr


def _mpr_info(m: Model, gids: jax.Array, gtype: int, group_gids: np.ndarray, info: GeomInfo) -> GeomInfo:
    """An MPR group's GeomInfo: a mesh's vertices all of them, in MuJoCo's order (`mpr.mesh_vert`), no hull tables."""
    if gtype != _MESH:
        return info
    return GeomInfo(info.pos, info.mat, info.size, vert=mpr.mesh_vert(m, gids, group_gids))


def _extra(m: Model, g: Group, margin: jax.Array) -> tuple:
    """Per-pair arrays (n,) a group's collider takes after the margin: opt.ccd_tolerance for MPR (`mpr.py`)."""
    if _is_mpr(g):
        return (jp.broadcast_to(m.opt.ccd_tolerance, margin.shape).astype(margin.dtype),)
    return ()


def _looped(collider: Callable, n: int, k: int) -> Callable:
    """`_near_only(collider, n, k)` for the colliders in `_LOOPED`, else the collider on every pair (same call)."""
    if getattr(collider, "func", collider) in _LOOPED:
        return _near_only(collider, n, k)

    def dense(info1, info2, margin, near, extra=(), deferred=(None, None)):
        info1, info2 = _resolve(info1, deferred[0]), _resolve(info2, deferred[1])
        axes = (info_axes(info1), info_axes(info2), 0) + (0,) * len(extra)
        return jax.vmap(collider, in_axes=axes)(info1, info2, margin, *extra)

    return dense


_NEAR_PLANE, _NEAR_MESH, _NEAR_SPHERES = 0, 1, 2  # the broadphase's bounding tests (`_near_kind`)


def _near_kind(m: Model, g: Group) -> int:
    """Group g's bounding test: a plane's (_NEAR_PLANE), the spheres' and boxes' of a mesh group (_NEAR_MESH), the
    spheres' (_NEAR_SPHERES)."""
    if g.type1 == _PLANE:
        return _NEAR_PLANE
    mesh = _mesh_group(np.asarray(m.geom_type), g.type1, np.stack([g.geom1, g.geom2], -1))
    return _NEAR_MESH if mesh else _NEAR_SPHERES


def _near(m: Model, d: types.Data, g: Group, g1: jax.Array, g2: jax.Array, margin: jax.Array
          ) -> tuple[jax.Array, jax.Array]:
    """(near, score) (n,) of a group's pairs g1, g2 (n,) with detection margins (n,): the broadphase's bounding test
    and the overlap that ranks its candidates."""
    return _near_pairs(m, d, _near_kind(m, g), g1, g2, margin)


def _all_near(m: Model, d: types.Data, groups: dict[int, Group], params: dict[int, tuple]
              ) -> dict[int, tuple[jax.Array, jax.Array]]:  # fmt: skip
    """{group index: `_near`} of the groups, the pairs of all groups of one bounding test in one call (its operations
    are elementwise per pair: the same values as per group): one set of bounding tests per model, not one per group.
    params: each group's `_params`."""
    out = {}
    for kind in (_NEAR_PLANE, _NEAR_MESH, _NEAR_SPHERES):
        ids = [i for i, g in groups.items() if _near_kind(m, g) == kind]
        if not ids:
            continue
        g1 = jp.asarray(np.concatenate([groups[i].geom1 for i in ids]))
        g2 = jp.asarray(np.concatenate([groups[i].geom2 for i in ids]))
        margin = jp.concatenate([params[i][1] + params[i][2] for i in ids])
        near, score = _near_pairs(m, d, kind, g1, g2, margin)
        at = 0
        for i in ids:
            n = len(groups[i].geom1)
            out[i] = (near[at : at + n], score[at : at + n])
            at += n
    return out


def _near_pairs(m: Model, d: types.Data, kind: int, g1: jax.Array, g2: jax.Array, margin: jax.Array
                ) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """`_near` of pairs g1, g2 (n,) by the bounding test `kind` (`_near_kind`)."""
    pos1, pos2 = d.geom_xpos[g1], d.geom_xpos[g2]
    rb1, rb2 = m.geom_rbound[g1], m.geom_rbound[g2]
    if kind == _NEAR_PLANE:  # signed distance of geom2's centre from the plane vs its bounding radius (exact-safe)
        sdist = jp.sum((pos2 - pos1) * d.geom_xmat[g1][..., 2], axis=-1)
        near = ~(rb2 > 0) | (sdist <= rb2 + margin)
        score = rb2 + margin - sdist
    else:
        center = jp.sum((pos1 - pos2) ** 2, axis=-1)
        bound = rb1 + rb2 + margin
        has_rb = (rb1 > 0) & (rb2 > 0)
        # squared-distance test avoids a sqrt (NaN-free gradient)
        near = ~has_rb | (center <= jp.where(bound > 0, bound, 0.0) ** 2)
        score = bound - jp.sqrt(jp.maximum(center, 1e-30))
        if kind == _NEAR_MESH:
            slack = _box_slack(m, d, g1, g2, margin)  # bounding boxes (as MuJoCo's midphase): tighter for links
            near = near & (slack >= 0)
            score = slack
    return near, score


def _rows(g: Group, c, near: jax.Array, margin: jax.Array, dtype) -> tuple:
    """A group's collider output c (Contacts of (n, k) rows) as (dist, pos, frame, active) of (n, k) rows: rows that
    are not contacts (out of the bounding test or beyond the margin) masked to the placeholder values."""
    # colliders with MuJoCo's own inclusion test (primitive.py) have decided ties at the margin already
    dist, pos, active = _rows_geometry(g, c, near, margin, dtype)
    return dist, pos, _masked_frame(c.normal, c.tangent, active), active


def _rows_geometry(g: Group, c, near: jax.Array, margin: jax.Array, dtype) -> tuple:
    """`_rows` without the frames: (dist, pos, active) of (n, k) rows."""
    within = (c.dist < NOCONTACT) if getattr(g.collider, "margin_tested", False) else (c.dist <= margin[:, None])
    active = near[:, None] & within
    dist = jp.where(active, c.dist, NOCONTACT).astype(dtype)
    pos = jp.where(active[..., None], c.pos, 0.0)
    return dist, pos, active


def _masked_frame(normal: jax.Array, tangent: jax.Array, active: jax.Array) -> jax.Array:
    """(..., 3, 3) contact frames (`make_frame`) of rows with normals and tangent hints (..., 3), the identity on
    rows that are not active (...,)."""
    frame = make_frame(normal, tangent)
    eye = jp.broadcast_to(jp.eye(3, dtype=frame.dtype), frame.shape)
    return jp.where(active[..., None, None], frame, eye)


def detection_margin(m: Model, g: Group) -> jax.Array:
    """(n,) the detection distance (margin + gap, MuJoCo >= 4) of a group's pairs."""
    p = _params(m, g)
    return p[1] + p[2]


def static_rows(m: Model, d: types.Data, g: Group, margin: jax.Array, overflow: bool = False) -> tuple:
    """(dist (nrows,), pos (nrows, 3), frame (nrows, 3, 3), active (nrows,)) of a group with static slots
    (`Group.static_slots`, no broadphase trim) and one-stage collider, at detection margins (n,): the geometry of its
    contact rows as `collision` writes it (the reference of the fused colliders, pipeline/kernels/collide.py).
    overflow=True: also the pairs' overflow flags (n,) bool that `collision` counts in CONTACTFULL (a height field's
    window too small for its geom; False for the other colliders)."""
    g1, g2 = jp.asarray(g.geom1), jp.asarray(g.geom2)
    near, _ = _near(m, d, g, g1, g2, margin)
    info1, info2 = _geom_info(m, d, g1, g.type1, g.geom1), _geom_info(m, d, g2, g.type2, g.geom2)
    if _is_mpr(g):
        info1, info2 = _mpr_info(m, g1, g.type1, g.geom1, info1), _mpr_info(m, g2, g.type2, g.geom2, info2)
    if g.type1 == _HFIELD:
        c, over = g.collider(m, info1, info2, margin)
        over = over & near
    else:
        extra = _extra(m, g, margin)
        c = jax.vmap(g.collider, in_axes=(info_axes(info1), info_axes(info2), 0) + (0,) * len(extra))(
            info1, info2, margin, *extra)
        over = jp.zeros(len(g.geom1), bool)
    dist, pos, frame, active = _rows(g, c, near, margin, d.geom_xpos.dtype)
    n = g.nrows
    rows = dist.reshape(n), pos.reshape(n, 3).astype(dist.dtype), frame.reshape(n, 3, 3), active.reshape(n)
    return rows + (over,) if overflow else rows


def contact_fields(m: Model, g: Group, dist: jax.Array, pos: jax.Array, frame: jax.Array, active: jax.Array
                   ) -> dict[str, jax.Array]:
    """The contact fields of a group with static slots whose rows' geometry (as `static_rows` returns it) was
    computed elsewhere (the fused colliders): its pairs' parameters added as `collision` mixes them."""
    condim, includemargin, _, friction, solref, solreffriction, solimp, adhesion = _params(m, g)
    g1, g2 = jp.asarray(g.geom1), jp.asarray(g.geom2)
    return _fields(m, g1, g2, g.ncon_collider, jp.asarray(condim), includemargin, friction, solref, solreffriction,
                   solimp, adhesion, dist, pos, frame, active, dist.dtype)  # fmt: skip


def _fields(m, g1, g2, k, condim, includemargin, friction, solref, solreffriction, solimp, adhesion, dist, pos, frame,
            active, dtype) -> dict[str, jax.Array]:
    """Data.contact's fields of a group's rows: per-pair (n,) ids and parameters repeated over k rows per pair,
    the rows' geometry (n * k rows, any leading shape) flattened. Adhesive rows in the gap band (see
    `adhesive_fields`) have dim 1."""

    def rep(x):  # per-pair -> per-row
        return jp.repeat(x, k, axis=0)

    n = g1.shape[0] * k
    dist = dist.reshape(n)
    incl = rep(includemargin).astype(dtype)
    adh = rep(adhesion).astype(dtype)
    return dict(
        dist=dist,
        pos=pos.reshape(n, 3).astype(dtype),
        frame=None if frame is None else frame.reshape(n, 3, 3).astype(dtype),
        includemargin=incl,
        friction=rep(friction).astype(dtype),
        solref=rep(solref).astype(dtype),
        solreffriction=rep(solreffriction).astype(dtype),
        solimp=rep(solimp).astype(dtype),
        dim=adhesive_dim(m, rep(condim).astype(jp.int32), dist, incl, adh),
        adhesion=adh if m.flg_adhesion else jp.zeros(n, dtype),
        geom=rep(jp.stack([g1, g2], axis=-1)).astype(jp.int32),
        flex=jp.full((n, 2), -1, jp.int32),
        vert=jp.full((n, 2), -1, jp.int32),
        elem=jp.full((n, 2), -1, jp.int32),
        efc_address=jp.full((n,), -1, jp.int32),
        active=active.reshape(n),
    )


def static_condim(m: Model, g: Group) -> np.ndarray:
    """(n,) int32 numpy: the condim of a group's pairs (static: the explicit pair's, or mixed by priority)."""
    return np.asarray(_params(m, g)[0], np.int32)


def row_fields(m: Model, g1: np.ndarray, g2: np.ndarray, condim: np.ndarray, dist: jax.Array, pos: jax.Array,
               frame: jax.Array, active: jax.Array, includemargin: jax.Array, friction: jax.Array, solref: jax.Array,
               solimp: jax.Array, solreffriction: jax.Array, adhesion: jax.Array | None) -> dict[str, jax.Array]:
    """Data.contact's fields of rows whose geometry and parameters were computed per row elsewhere (the fused
    colliders and contact parameters, pipeline/kernels/collide.py and contact_params.py): geom ids g1, g2 and condim
    (static numpy, (n,)), dist, pos, frame, active and the parameters (n rows each); adhesion None without
    adhesion (`m.flg_adhesion`). The same fields as `contact_fields`, the adhesive rule applied to the dims."""
    n = len(g1)
    dtype = dist.dtype
    adh = jp.zeros(n, dtype) if adhesion is None else adhesion
    return dict(dist=dist, pos=pos, frame=frame, includemargin=includemargin, friction=friction, solref=solref,
                solreffriction=jp.asarray(solreffriction, dtype), solimp=solimp,
                dim=adhesive_dim(m, jp.asarray(condim, jp.int32), dist, includemargin, adh), adhesion=adh,
                geom=jp.asarray(np.stack([g1, g2], axis=-1).astype(np.int32)),
                flex=jp.asarray(np.full((n, 2), -1, np.int32)), vert=jp.asarray(np.full((n, 2), -1, np.int32)),
                elem=jp.asarray(np.full((n, 2), -1, np.int32)), efc_address=jp.asarray(np.full((n,), -1, np.int32)),
                active=active)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class _Candidates:
    """A group's pairs that reach its collider (after the broadphase's trim): geom ids g1, g2 (n,), near (n,) (the
    bounding test), the overflow flag () and their contact parameters (`_params`; margin: the detection distance)."""

    g1: jax.Array
    g2: jax.Array
    near: jax.Array
    overflow: jax.Array
    params: tuple  # condim, margin, includemargin, friction, solref, solreffriction, solimp, adhesion


def _candidates(m: Model, d: types.Data, g: Group, params: tuple | None = None,
                near: tuple[jax.Array, jax.Array] | None = None) -> _Candidates:  # fmt: skip
    """The pairs of group g that reach its collider: the bounding test, and the broadphase's trim where the group is
    trimmed (the `npair_narrow` most overlapping). params: the group's `_params`; near: its `_near` (computed with
    other groups', `_all_near`); None: computed here."""
    p = _params(m, g) if params is None else params
    condim, includemargin, gap, friction, solref, solreffriction, solimp, adhesion = p
    margin = includemargin + gap  # detection distance; rows beyond includemargin make no constraint
    g1, g2 = jp.asarray(g.geom1), jp.asarray(g.geom2)
    near, score = _near(m, d, g, g1, g2, margin) if near is None else near
    overflow = jp.zeros((), bool)
    params = (jp.asarray(condim), margin, includemargin, friction, solref, solreffriction, solimp, adhesion)
    if g.npair_narrow < len(g.geom1):
        score = jp.where(near, score, -jp.inf)
        _, idx = jax.lax.top_k(jax.lax.stop_gradient(score), g.npair_narrow)
        overflow = jp.sum(near) > g.npair_narrow
        g1, g2, near = g1[idx], g2[idx], near[idx]
        params = tuple(x[idx] for x in params)
    return _Candidates(g1, g2, near, overflow, params)


# the kinds of pairs whose distance stage (one contact: GJK/EPA, or a capsule core's separating axes into a hull) is
# one program per model over every group of the kind, the geom types traced per pair where there are several
_CURVED, _MESH_GJK, _CAPSULE_MESH = "curved", "mesh", "capsule-mesh"
_MIXED = "curved+mesh"  # the curved and mesh kinds in one program (`Config.merge_curved_mesh`)
# `Config.merge_curved_mesh` True: a model with both curved pairs without a mesh and GJK/EPA pairs with one runs
# their distance stages as one
# program (`general.general_mixed`: each pair keeps its kind's EPA iteration count) and their manifold stages as one
# (`cylinder.curved_manifold` over both tables): one compiled GJK/EPA and one manifold instead of two each, the same
# contacts bitwise. Measured on the Shadow Hand (issue 43, float64, batch 4, one process): the shared stages trace +
# compile in 10-13 + 39-43 instead of 17-21 + 53-57 CPU-s, but run 4-8x slower (every curved pair then pays the
# mesh support maps over the kind's padded 2,324-vertex hulls and the mesh pairs' 40 EPA iterations: under vmap a
# select runs every type's branch). Off until a mesh support map costs little for the other lanes (MuJoCo's
# hill-climbing on the hull graph).
# a two-stage pair's manifold stage after its kind's distance stage: the curved pairs' (`cylinder.CURVED_MANIFOLDS`)
# and the cylinder and capsule pairs against a mesh (their manifolds are also one program, `_shared_manifolds`)
_MESH_MANIFOLDS = {cylinder.capsule_mesh: cylinder.capsule_mesh_manifold,
                   cylinder.cylinder_mesh: cylinder.cylinder_mesh_manifold}  # fmt: skip
_MANIFOLDS = {**cylinder.CURVED_MANIFOLDS, **_MESH_MANIFOLDS}


def _distance_kind(g: Group) -> str | None:
    """The shared distance stage of group g (`_shared_distances`), None where its collider runs alone:
      * _CURVED: the curved pairs without a mesh (the general ellipsoid pairs, capsule-cylinder, cylinder-cylinder,
        cylinder-box), GJK/EPA with a refined normal (`general.general_curved`);
      * _MESH_GJK: the general group of pairs with a mesh (e.g. ellipsoid-mesh) and cylinder-mesh: GJK/EPA, the
        normal refined where a shape is curved (`general.general`);
      * _CAPSULE_MESH: capsule-mesh and sphere-mesh, the core segment's separating axes into the hull
        (`general.capsule_mesh_single`; a sphere is a capsule of half-length 0, its geom_size[1]: its segment a point,
        no edge axis, the least deep face plane as `general.sphere_mesh`'s).
    Cylinder and capsule pairs then run their manifold stage (`_MANIFOLDS`, `_shared_manifolds`)."""
    if g.collider is general.general_curved or g.collider in cylinder.CURVED_MANIFOLDS:
        return _CURVED
    if g.collider is cylinder.cylinder_mesh or getattr(g.collider, "func", None) is general.general:
        return _MESH_GJK
    if g.collider is cylinder.capsule_mesh or g.collider is general.sphere_mesh:
        return _CAPSULE_MESH
    return None


def _shared_distance(g: Group) -> bool:
    """Whether group g's distance stage is a shared one (`_distance_kind`)."""
    return _distance_kind(g) is not None


def _side_types(m: Model, gids: np.ndarray) -> tuple[int, ...]:
    """The geom types (static, ascending) of the geoms gids (numpy) of one side of a shared program."""
    return tuple(np.unique(np.asarray(m.geom_type)[gids]).tolist())


def _concat_candidates(m: Model, d: types.Data, groups: dict[int, Group], cands: dict[int, _Candidates],
                       ids: list[int], meshes: tuple[bool, bool]) -> tuple:  # fmt: skip
    """The candidates of the groups ids in one program: (info1, info2 (GENERAL GeomInfo: geom types per pair, mesh
    tables on a side where `meshes` says so, their per-pair rows deferred), margin (n,), near (n,), (side 1 types,
    side 2 types), (side 1's, side 2's `_Deferred` or None): `_looped` gathers the rows of the near pairs only)."""
    g1 = jp.concatenate([cands[i].g1 for i in ids])
    g2 = jp.concatenate([cands[i].g2 for i in ids])
    near = jp.concatenate([cands[i].near for i in ids])
    margin = jp.concatenate([cands[i].params[1] for i in ids])
    gids1 = np.concatenate([groups[i].geom1 for i in ids])
    gids2 = np.concatenate([groups[i].geom2 for i in ids])
    info1, def1 = _geom_info(m, d, g1, GENERAL, gids1, meshes=meshes[0], deferred=True)
    info2, def2 = _geom_info(m, d, g2, GENERAL, gids2, meshes=meshes[1], deferred=True)
    return info1, info2, margin, near, (_side_types(m, gids1), _side_types(m, gids2)), (def1, def2)


def _split(c: Contacts, cands: dict[int, _Candidates], ids: list[int]) -> dict[int, Contacts]:
    """A shared program's Contacts (n, k) back to its groups ids (in order): {group index: Contacts of its pairs}."""
    out, at = {}, 0
    for i in ids:
        k = cands[i].g1.shape[0]
        out[i] = Contacts(*[x[at : at + k] for x in c])
        at += k
    return out


def _shared_distances(m: Model, d: types.Data, groups: dict[int, Group], cands: dict[int, _Candidates]
                      ) -> dict[int, tuple[jax.Array, jax.Array, jax.Array]]:  # fmt: skip
    """The distance stage of the groups of each kind (`_distance_kind`), every group's candidates of a kind in one
    program: their pairs concatenated, the geom types traced per pair where a side takes several (the support maps
    of the types present on that side only), run on the near pairs (`_near_only`). One compiled GJK/EPA per kind
    and model, not one per type pair or size class: the curved pairs without a mesh (`general.general_curved`),
    the pairs with a mesh that run GJK/EPA (ellipsoid-mesh, cylinder-mesh, ...: `general.general`, the mesh tables
    padded to the largest mesh of the kind), the capsule-mesh and sphere-mesh pairs (`general.capsule_mesh_single`);
    the first two as one (`general.general_mixed`) where `m.config.merge_curved_mesh`. The pairs' mesh rows (hull
    vertices, triangles, edges) are gathered per chunk of near pairs inside the loop (`_Deferred`), not per candidate.
    Returns {group index: (dist (n,), pos (n, 3), normal (n, 3)) of its candidates}."""
    out = {}
    by_kind = {kind: sorted(i for i, g in groups.items() if _distance_kind(g) == kind)
               for kind in (_CURVED, _MESH_GJK, _CAPSULE_MESH)}  # fmt: skip
    programs = [(kind, by_kind[kind]) for kind in (_CURVED, _MESH_GJK, _CAPSULE_MESH)]
    if m.config.merge_curved_mesh and by_kind[_CURVED] and by_kind[_MESH_GJK]:  # one GJK/EPA for both kinds
        programs = [(_MIXED, sorted(by_kind[_CURVED] + by_kind[_MESH_GJK])), programs[2]]
    for kind, ids in programs:
        if not ids:
            continue
        meshes = (False, False) if kind == _CURVED else (False, True) if kind == _CAPSULE_MESH else None
        if meshes is None:  # general pairs: mesh tables on a side that takes a mesh
            sides = [np.concatenate([groups[i].geom1 for i in ids]), np.concatenate([groups[i].geom2 for i in ids])]
            meshes = tuple(bool(np.any(np.asarray(m.geom_type)[s] == _MESH)) for s in sides)
        info1, info2, margin, near, kinds, deferred = _concat_candidates(m, d, groups, cands, ids, meshes)
        extra = ()
        if kind == _CURVED:
            fn = functools.partial(general.general_curved, types=kinds)
        elif kind == _MESH_GJK:
            fn = functools.partial(general.general, types=kinds)
        elif kind == _MIXED:  # each pair's EPA iterations: the curved kind's short EPA, the mesh kind's full one
            fn = functools.partial(general.general_mixed, types=kinds)
            short = np.concatenate([np.full(cands[i].g1.shape[0], _distance_kind(groups[i]) == _CURVED) for i in ids])
            extra = (jp.asarray(short),)
        else:  # static types: a capsule (a sphere: half-length 0) against a mesh
            fn = general.capsule_mesh_single
        c = _looped(fn, margin.shape[0], general.GENERAL_NCON)(info1, info2, margin, near, extra, deferred)
        for i, x in _split(c, cands, ids).items():
            out[i] = (x.dist[:, 0], x.pos[:, 0], x.normal[:, 0])
    return out


def _shared_manifolds(m: Model, d: types.Data, groups: dict[int, Group], cands: dict[int, _Candidates],
                      shared: dict[int, tuple]) -> dict[int, Contacts]:  # fmt: skip
    """The manifold stage of the cylinder and capsule pairs (`_MANIFOLDS`) from their shared distance stage
    (`_shared_distances`), in two programs, their pairs concatenated, the geom types traced per pair
    (`cylinder.curved_manifold`), run on the near pairs (`_near_only`): the curved pairs without a mesh
    (capsule-cylinder, cylinder-cylinder, cylinder-box: `cylinder.CURVED_MANIFOLDS`) and the capsule and cylinder
    pairs against a mesh (`_MESH_MANIFOLDS`); one program for both where `m.config.merge_curved_mesh`. One compiled
    manifold per kind and model, not one per type pair; the mesh rows gathered per chunk of near pairs (`_Deferred`).
    Returns {group index: Contacts (n, CYL_NCON) of its candidates}."""
    out = {}
    programs = [(cylinder.CURVED_MANIFOLDS, (False, False)), (_MESH_MANIFOLDS, (False, True))]
    if m.config.merge_curved_mesh and all(any(g.collider in t for g in groups.values()) for t, _ in programs):
        programs = [(_MANIFOLDS, (False, True))]  # one manifold program for both
    for table, meshes in programs:
        ids = sorted(i for i, g in groups.items() if g.collider in table)
        if not ids:
            continue
        info1, info2, margin, near, kinds, deferred = _concat_candidates(m, d, groups, cands, ids, meshes)
        stage = tuple(jp.concatenate([shared[i][k] for i in ids]) for k in range(3))
        fn = functools.partial(cylinder.curved_manifold, types=kinds)
        c = _looped(fn, margin.shape[0], cylinder.CYL_NCON)(info1, info2, margin, near, stage, deferred)
        out.update(_split(c, cands, ids))
    return out


def _run_group(m: Model, d: types.Data, g: Group, cand: _Candidates | None = None,
               shared: tuple | None = None, manifold: Contacts | None = None, frames: bool = True
               ) -> tuple[dict[str, jax.Array], jax.Array]:  # fmt: skip
    """Contacts of one group: fields (capacity*ncon, ...) and the overflow flag. cand: its `_candidates` (None:
    computed here); shared: its pairs' GJK/EPA stage where it is the shared one (`_shared_distances`; None: computed
    here for this group alone); manifold: its pairs' manifold stage where it is the shared one (`_shared_manifolds`;
    None: computed here for this group alone). frames=False: fields["frame"] holds each row's normal and tangent
    hint (rows, 2, 3) instead of its frame (`collision` builds the frames of all groups at once)."""
    cand = _candidates(m, d, g) if cand is None else cand
    g1, g2, near, overflow = cand.g1, cand.g2, cand.near, cand.overflow
    condim, margin, includemargin, friction, solref, solreffriction, solimp, adhesion = cand.params
    info1 = _geom_info(m, d, g1, g.type1, g.geom1)
    info2 = _geom_info(m, d, g2, g.type2, g.geom2)
    if _is_mpr(g):  # MuJoCo's vertex order (ties of the support maps break as its search's)
        info1, info2 = _mpr_info(m, g1, g.type1, g.geom1, info1), _mpr_info(m, g2, g.type2, g.geom2, info2)
    if _shared_distance(g):  # the kind's distance stage (shared by the groups of a model), then the manifold
        if shared is None:
            shared = _shared_distances(m, d, {0: g}, {0: cand})[0]
        dist0, pos0, nrm0 = shared
        if g.collider not in _MANIFOLDS:  # general_curved: the GJK/EPA contact itself
            c = general.one_contact_rows(dist0, pos0, nrm0)
        elif manifold is None:
            c = _shared_manifolds(m, d, {0: g}, {0: cand}, {0: shared})[0]
        else:
            c = manifold
    elif g.stages is not None:  # distance of every narrow-phase pair, manifold of the closest `touch` in contact
        dist_fn, manifold_fn = g.stages
        # pairs out of reach by the bounding boxes run no GJK/EPA loop (under vmap a loop runs while any pair's does)
        dist0, pos0, nrm0 = jax.vmap(dist_fn, in_axes=(info_axes(info1), info_axes(info2), 0, 0))(
            info1, info2, margin, ~near)
        touching = near & (dist0 <= margin)
        dist0 = jp.where(touching, dist0, NOCONTACT)  # the manifold stage runs only for pairs in contact
        _, idx = jax.lax.top_k(jax.lax.stop_gradient(jp.where(touching, -dist0, -jp.inf)), g.touch)
        overflow = overflow | (jp.sum(touching) > g.touch)
        g1, g2, near = g1[idx], g2[idx], touching[idx]
        condim, margin, includemargin, friction = condim[idx], margin[idx], includemargin[idx], friction[idx]
        solref, solreffriction, solimp, adhesion = solref[idx], solreffriction[idx], solimp[idx], adhesion[idx]
        info1, info2 = _take_info(info1, idx), _take_info(info2, idx)
        c = jax.vmap(manifold_fn, in_axes=(info_axes(info1), info_axes(info2), 0, 0, 0, 0))(
            info1, info2, margin, dist0[idx], pos0[idx], nrm0[idx])
    elif g.type2 == _SDF:  # SDF pairs (collision/sdf.py) need the geoms' bounding boxes too
        c = jax.vmap(sdf.bind(g.collider, m), in_axes=(info_axes(info1), info_axes(info2), 0, 0))(
            info1, info2, m.geom_aabb[g1], m.geom_aabb[g2])
    elif g.type1 == _HFIELD:  # height fields: vectorised by the collider, which also reports window overflow
        c, hf_over = g.collider(m, info1, info2, margin)
        overflow = overflow | jp.any(hf_over & near)
    else:  # GJK/EPA colliders (`_LOOPED`) on the near pairs only
        c = _looped(g.collider, g.npair_narrow, g.ncon_collider)(info1, info2, margin, near, _extra(m, g, margin))
    dist, pos, active = _rows_geometry(g, c, near, margin, d.geom_xpos.dtype)
    fields = _fields(m, g1, g2, g.ncon_collider, condim, includemargin, friction, solref, solreffriction, solimp,
                     adhesion, dist, pos, None, active, d.geom_xpos.dtype)  # fmt: skip
    n = fields["dist"].shape[0]
    hint = jp.stack([c.normal.reshape(n, 3), c.tangent.reshape(n, 3)], axis=1).astype(pos.dtype)
    fields["frame"] = _masked_frame(hint[:, 0], hint[:, 1], fields["active"]) if frames else hint
    if g.compacted:  # keep the deepest `nrows` active rows of the group
        act = fields["active"]
        _, rows = jax.lax.top_k(jax.lax.stop_gradient(jp.where(act, -fields["dist"], -jp.inf)), g.nrows)
        overflow = overflow | (jp.sum(act) > g.nrows)
        fields = {key: v[rows] for key, v in fields.items()}
    return fields, overflow


def slot_geoms(m: Model) -> tuple[np.ndarray, np.ndarray] | None:
    """Static (geom1, geom2) (nconmax,) of every contact slot, or None where a slot's geoms are traced (a trimmed or
    compacted group, a capacity cap, flex contacts)."""
    if flexcol.capacity(m) or capped(m):
        return None
    g1, g2 = [], []
    for g in pair_table(m).groups:
        if not g.static_slots:
            return None
        g1.append(np.repeat(np.asarray(g.geom1), g.ncon))
        g2.append(np.repeat(np.asarray(g.geom2), g.ncon))
    if not g1:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(g1).astype(np.int64), np.concatenate(g2).astype(np.int64)


def slot_bodies(m: Model) -> tuple[np.ndarray, np.ndarray] | None:
    """Static (body1, body2) (nconmax,) of every contact slot: the bodies of `slot_geoms`, or None."""
    g = slot_geoms(m)
    if g is None:
        return None
    gb = np.asarray(m.geom_bodyid, np.int64)
    return gb[g[0]], gb[g[1]]


def capped(m: Model) -> bool:
    """Static: the model's contact capacity is below its pair table's rows (a `<size nconmax/njmax>` or
    `Config.nconmax/njmax` cap), so `collision` keeps the deepest rows of all groups in `m.nconmax` slots."""
    return m.nconmax < contact_capacity(m)


def _cap_warning(m: Model) -> int:
    """The warning counted when the cap leaves contacts out: CONTACTFULL where the contact cap itself binds,
    CNSTRFULL where the slots were cut to fit the constraint rows in njmax."""
    want = types.requested_capacities(m)[0]
    return types.Warning.CONTACTFULL if 0 <= want <= m.nconmax else types.Warning.CNSTRFULL


def _keep_deepest(fields: dict[str, jax.Array], n: int) -> tuple[dict[str, jax.Array], jax.Array]:
    """The n deepest active rows of `fields` (in their layout order, so that a pair's rows keep the collider's
    order) and whether active rows were left out."""
    act = fields["active"]
    overflow = jp.sum(act) > n
    if n == 0:
        return {k: v[:0] for k, v in fields.items()}, overflow
    _, rows = jax.lax.top_k(jax.lax.stop_gradient(jp.where(act, -fields["dist"], -jp.inf)), n)
    rows = jp.sort(rows)
    return {k: v[rows] for k, v in fields.items()}, overflow


def collision(m: Model, d: types.Data, computed: dict | None = None, computed_overflow: jax.Array | None = None
              ) -> types.Data:  # fmt: skip
    """Collision detection (mj_collision): fills `d.contact` (padded to m.nconmax) and `d.ncon`.

    Under a capacity cap (`capped`) the deepest m.nconmax active rows of all groups are kept and the steps that
    leave some out are counted in d.warning_number (CONTACTFULL, or CNSTRFULL when njmax set the cap).
    computed: {index in pair_table(m).groups: fields} of groups with static slots whose contacts were computed
    elsewhere (`contact_fields`; the fused colliders, pipeline/kernels/collide.py); the other groups run here. The
    fields of a run of consecutive groups may come as one entry at the run's first index, the others mapped to None
    (their rows are in it).
    computed_overflow: () bool, whether those groups overflowed (`static_rows`' flags), counted as the others'."""
    table = pair_table(m)
    nflexcon = flexcol.capacity(m)
    occluded = occlusion.overflow(m, d, *table.occluded) if len(table.occluded[0]) else None
    if not table.groups and not nflexcon:
        warn = d.warning_number if occluded is None else count_warning(d.warning_number, types.Warning.CONTACTFULL,
                                                                         occluded)  # fmt: skip
        return d.replace(ncon=jp.zeros((), jp.int32), warning_number=warn)
    parts = []
    overflow = computed_overflow  # None: nothing can overflow (so far)
    if occluded is not None:
        overflow = occluded if overflow is None else overflow | occluded
    run = {i: g for i, g in enumerate(table.groups) if not (computed and i in computed)}
    params = _all_params(m, run)
    nears = _all_near(m, d, run, params)
    cands = {i: _candidates(m, d, g, params[i], nears[i]) for i, g in run.items()}
    curved = {i: g for i, g in run.items() if _shared_distance(g)}
    shared = _shared_distances(m, d, curved, cands)
    manifolds = _shared_manifolds(m, d, curved, cands, shared)
    ran = []
    for i, g in enumerate(table.groups):
        if i not in run:  # static slots: no candidate is left out
            if computed[i] is not None:
                parts.append(computed[i])
            continue
        f, o = _run_group(m, d, g, cands[i], shared.get(i), manifolds.get(i), frames=False)
        ran.append(len(parts))
        parts.append(f)
        overflow = o if overflow is None else overflow | o
    # the contact frames of every group's rows in one go (from their normals and tangent hints, (n, 2, 3)): one
    # make_frame per model, not one per group (the Shadow Hand's 22 copies were 220 of its 4386 fused kernels)
    if ran:
        hint = jp.concatenate([parts[j]["frame"] for j in ran], axis=0)
        frame = _masked_frame(hint[:, 0], hint[:, 1], jp.concatenate([parts[j]["active"] for j in ran], axis=0))
        at = 0
        for j in ran:
            n = parts[j]["frame"].shape[0]
            parts[j] = {**parts[j], "frame": frame[at : at + n]}
            at += n
    if nflexcon:
        flex_over, flex_fields = flexcol.contacts(m, d)
        parts.append(flex_fields)
        overflow = flex_over if overflow is None else overflow | flex_over
    fields = parts[0] if len(parts) == 1 else {k: jp.concatenate([p[k] for p in parts], axis=0) for k in parts[0]}
    warn = d.warning_number
    if capped(m):
        fields, cap_over = _keep_deepest(fields, m.nconmax)
        warn = count_warning(warn, _cap_warning(m), cap_over)
    contact = types.Contact(**fields)
    ncon = jp.sum(contact.active).astype(jp.int32)
    if overflow is not None:  # (the fused colliders' static slots without a height field: none can overflow)
        warn = count_warning(warn, types.Warning.CONTACTFULL, overflow)
    return d.replace(contact=contact, ncon=ncon, warning_number=warn)


def active_contacts(m: Model, d: types.Data) -> dict[str, np.ndarray]:
    """Host numpy arrays of the active contacts of an unbatched Data (geom (n,2), dist, pos, frame, ...)."""
    c = d.contact
    act = np.asarray(c.active, bool)
    out = {
        "geom": np.asarray(c.geom)[act],
        "dist": np.asarray(c.dist)[act],
        "pos": np.asarray(c.pos)[act],
        "frame": np.asarray(c.frame)[act],
        "friction": np.asarray(c.friction)[act],
        "dim": np.asarray(c.dim)[act],
        "includemargin": np.asarray(c.includemargin)[act],
        "solref": np.asarray(c.solref)[act],
        "solreffriction": np.asarray(c.solreffriction)[act],
        "solimp": np.asarray(c.solimp)[act],
        "adhesion": np.asarray(c.adhesion)[act],
    }
    return out
