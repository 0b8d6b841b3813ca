"""Tree tables and tree-walking helpers shared by the smooth-dynamics stages; Jacobians (mj_jac, mj_jacDot).

Static tables (host numpy, built once per model topology at trace time and memoised):
  `tables(m)` -> `TreeTables` with body/dof depth levels, ancestor masks and the sparse inertia layout.

Level-scheduled tree sweeps (Python loop over tree depth, vector ops over the bodies of one level, in a
level-ordered layout so that each level costs one small gather or segment_sum; the traced graph grows with the
depth of the tree, not with the number of bodies):
  `level_scan(m, x, fn)`: y[i] = fn(y[parent(i)], x[i]) from the root down (generic forward sweep).
  `forward_accumulate(m, x)`: y[i] = y[parent(i)] + x[i] (prefix sums along the tree).
  `subtree_sum(m, x, include_world)`: y[i] = sum of x over the subtree of i (leaves up).
  The two linear sweeps are one (nbody, nbody) product with a static 0/1 matrix for trees of at most
  DENSE_SWEEP_NBODY bodies (one fat op instead of a gather or segment sum per level).
  `memo(m, name, build)`: memoise a static plan per model topology.
Static-index helpers (one primitive each, no negative-index normalisation): `take`, `put`, `put_add`.
Wrenches: `wrench_to_cfrc(m, d, body_ids, points, torque_force)` -> (nbody, 6) com-based (for cfrc_ext).

Jacobians (MuJoCo's conventions; `body_id` may be a Python int or a traced int32 scalar):
  `jac(m, d, point (3,), body_id) -> (jacp (3, nv), jacr (3, nv))`                  as mj_jac
  `jac_dot(m, d, point (3,), body_id) -> (jacp_dot (3, nv), jacr_dot (3, nv))`      as mj_jacDot
  `jac_batch(m, d, points (n, 3), body_ids (n,)) -> (jacp (n, 3, nv), jacr (n, 3, nv))`
  `jac_dot_batch(...)` likewise.
  `body_dof_mask(m) -> (nbody, nv) bool` (static): dofs that move body i (its own and all ancestors').
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.math import cross_c, motion_cross_c
from mjx_lite.types import JointType, Model

# ---- static tables ------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TreeTables:
    """Static (numpy) tree tables of one model topology. Shapes in comments."""

    body_depth: np.ndarray  # (nbody,) world = 0
    body_levels: tuple  # tuple over depth 1..D of (bodies (nB,), parents (nB,)) int arrays
    body_dof_mask: np.ndarray  # (nbody, nv) bool: dof j moves body i (j in the dof chain of i)
    dof_depth: np.ndarray  # (nv,) depth in the dof tree (roots = 0)
    dof_levels: tuple  # tuple over dof depth 0..Dd of dof index arrays
    dof_anc: np.ndarray  # (nv, nv) bool: [i, j] = j is a strict ancestor of i in the dof tree
    # sparse (tree-structured) layout of qM: row i holds (i, i), (i, parent(i)), (i, parent(parent(i)))...
    madr: np.ndarray  # (nv,) address of the diagonal entry of row i
    m_rows: np.ndarray  # (nM,) row index i of each stored entry
    m_cols: np.ndarray  # (nM,) column index j (ancestor-or-self of i) of each stored entry
    # per-dof kinematic description (for cdof)
    dof_kind: np.ndarray  # (nv,) 0 hinge, 1 slide, 2 ball/free rotation, 3 free translation
    dof_axis: np.ndarray  # (nv,) axis index 0..2 for ball/free dofs, 0 otherwise
    dof_group_prev: np.ndarray  # (nv, P) dofs of the same body preceding dof's velocity group (-1 padded)
    # level-ordered layout: bodies sorted by depth (world first); level k occupies order[start_k:end_k]
    order: np.ndarray  # (nbody,) bodies in level order
    inv_order: np.ndarray  # (nbody,) position of body i in `order`
    level_bounds: tuple  # ((start, end) per depth 0..D)
    level_parent: tuple  # per depth 1..D: parent positions within the previous level (nB,)


def tables(m: Model) -> TreeTables:
    """The static tree tables of `m` (built once per Model static part, see `_struct.static_memo`)."""
    return static_memo(m, "tree_tables", _build_tables)


def _build_tables(m: Model) -> TreeTables:
    nbody, nv = m.nbody, m.nv
    parent = np.asarray(m.body_parentid, np.int64)
    depth = np.zeros(nbody, np.int64)
    for i in range(1, nbody):  # MuJoCo orders bodies so that parent < child
        depth[i] = depth[parent[i]] + 1
    levels = tuple((np.nonzero(depth == k)[0], parent[depth == k]) for k in range(1, int(depth.max(initial=0)) + 1))

    dof_parent = np.asarray(m.dof_parentid, np.int64)
    dof_body = np.asarray(m.dof_bodyid, np.int64)
    ddepth = np.zeros(nv, np.int64)
    anc = np.zeros((nv, nv), bool)
    for i in range(nv):
        p = dof_parent[i]
        if p >= 0:
            ddepth[i] = ddepth[p] + 1
            anc[i] = anc[p]
            anc[i, p] = True
    dof_levels = tuple(np.nonzero(ddepth == k)[0] for k in range(int(ddepth.max(initial=-1)) + 1))

    body_dof_mask = np.zeros((nbody, nv), bool)
    dofadr = np.asarray(m.body_dofadr)
    dofnum = np.asarray(m.body_dofnum)
    for i in range(1, nbody):
        body_dof_mask[i] = body_dof_mask[parent[i]]
        body_dof_mask[i, dofadr[i] : dofadr[i] + dofnum[i]] = True

    # sparse layout: row i = [i, parent(i), parent(parent(i)), ...]
    rows, cols, madr = [], [], np.zeros(nv, np.int64)
    for i in range(nv):
        madr[i] = len(rows)
        j = i
        while j >= 0:
            rows.append(i)
            cols.append(j)
            j = dof_parent[j]

    # dof kinds and velocity groups (mj_comVel: free translation, then rotation groups; ball one group)
    jtype = np.asarray(m.jnt_type)
    jdofadr = np.asarray(m.jnt_dofadr)
    dof_jnt = np.asarray(m.dof_jntid, np.int64)
    kind = np.zeros(nv, np.int64)
    axis = np.zeros(nv, np.int64)
    group_start = np.arange(nv)
    for i in range(nv):
        jt = jtype[dof_jnt[i]]
        k = i - jdofadr[dof_jnt[i]]
        if jt == JointType.HINGE:
            kind[i] = 0
        elif jt == JointType.SLIDE:
            kind[i] = 1
        elif jt == JointType.BALL:
            kind[i], axis[i], group_start[i] = 2, k, jdofadr[dof_jnt[i]]
        else:  # free
            if k < 3:
                kind[i], axis[i], group_start[i] = 3, k, jdofadr[dof_jnt[i]]
            else:
                kind[i], axis[i], group_start[i] = 2, k - 3, jdofadr[dof_jnt[i]] + 3
    prev = [list(range(dofadr[dof_body[i]], group_start[i])) for i in range(nv)]
    width = max([len(p) for p in prev] + [1])
    group_prev = np.full((nv, width), -1, np.int64)
    for i, p in enumerate(prev):
        group_prev[i, : len(p)] = p

    order = np.concatenate([[0]] + [b for b, _ in levels]).astype(np.int64)
    inv_order = np.empty(nbody, np.int64)
    inv_order[order] = np.arange(nbody)
    bounds, start = [(0, 1)], 1
    for b, _ in levels:
        bounds.append((start, start + b.size))
        start += b.size
    level_parent = tuple(inv_order[p] - bounds[k][0] for k, (_, p) in enumerate(levels))

    return TreeTables(
        order=order, inv_order=inv_order, level_bounds=tuple(bounds), level_parent=level_parent,
        body_depth=depth, body_levels=levels, body_dof_mask=body_dof_mask, dof_depth=ddepth,
        dof_levels=dof_levels, dof_anc=anc, madr=madr, m_rows=np.asarray(rows, np.int64),
        m_cols=np.asarray(cols, np.int64), dof_kind=kind, dof_axis=axis, dof_group_prev=group_prev,
    )  # fmt: skip


def memo(m: Model, name: str, build) -> Any:
    """A static (host) plan `build(m)` of another stage, built once per Model static part under `name`."""
    return static_memo(m, name, build)


def body_dof_mask(m: Model) -> np.ndarray:
    """(nbody, nv) static bool: True where dof j moves body i (dofs of i and of all its ancestors)."""
    return tables(m).body_dof_mask


# ---- static-index gathers and scatters ----------------------------------------------------------------------
# x[idx] / x.at[idx].set(v) with host (numpy) indices known to be in bounds: one primitive each, without the
# negative-index normalisation jnp indexing adds (keeps traced graphs and compile times small).

_PIB = jax.lax.GatherScatterMode.PROMISE_IN_BOUNDS
_HI = jax.lax.Precision.HIGHEST
# trees of at most this many bodies (world included) do linear sweeps (subtree sums, prefix sums) as one dense
# product with a static 0/1 matrix: O(nbody^2) work in a single op, against one gather or segment sum per level
# (MJX humanoid, batch 4096, XLA:CPU: crb 60 -> 12 ms with the gather-free qM); larger scenes (the 220-body pile)
# keep the level sweeps, whose work is linear in the bodies
DENSE_SWEEP_NBODY = 128


def take(x: jax.Array, idx) -> jax.Array:
    """x[idx] along axis 0 for a static non-negative int array idx: shape idx.shape + x.shape[1:]."""
    idx = np.asarray(idx, np.int32)
    dnums = jax.lax.GatherDimensionNumbers(
        offset_dims=tuple(range(idx.ndim, idx.ndim + x.ndim - 1)), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return jax.lax.gather(x, jp.asarray(idx[..., None]), dnums, slice_sizes=(1,) + tuple(x.shape[1:]), mode=_PIB)


def _scatter(fn, x, idx, v, unique):
    idx = np.asarray(idx, np.int32)
    v = jp.broadcast_to(jp.asarray(v, x.dtype), idx.shape + tuple(x.shape[1:]))
    dnums = jax.lax.ScatterDimensionNumbers(
        update_window_dims=tuple(range(idx.ndim, idx.ndim + x.ndim - 1)), inserted_window_dims=(0,),
        scatter_dims_to_operand_dims=(0,),
    )  # fmt: skip
    return fn(x, jp.asarray(idx[..., None]), v, dnums, unique_indices=unique, mode=_PIB)


def put(x: jax.Array, idx, v) -> jax.Array:
    """x.at[idx].set(v) along axis 0 for static, non-negative, unique indices."""
    return _scatter(jax.lax.scatter, x, idx, v, True)


def put_add(x: jax.Array, idx, v) -> jax.Array:
    """x.at[idx].add(v) along axis 0 for static non-negative indices (duplicates accumulate)."""
    unique = np.unique(np.asarray(idx)).size == np.asarray(idx).size
    return _scatter(jax.lax.scatter_add, x, idx, v, unique)


# ---- level-scheduled tree sweeps -----------------------------------------------------------------------------


def level_scan(m: Model, x: jax.Array, fn) -> jax.Array:
    """Root-to-leaf sweep: y[0] = x[0], y[i] = fn(y[parent(i)], x[i]) (vectorised per level). x: (nbody, ...).

    Works in the level-ordered layout (each level's parents are the previous level), so every level costs one
    small gather and no scatter.
    """
    t = tables(m)
    xs = take(x, t.order)
    out = [xs[0:1]]
    for (s, e), parent in zip(t.level_bounds[1:], t.level_parent):
        out.append(fn(take(out[-1], parent), xs[s:e]))
    return take(jp.concatenate(out, axis=0), t.inv_order)


def _tree_matrix(m: Model) -> np.ndarray:
    """(nbody, nbody) static 0/1 matrix: [i, k] = 1 where k is i or a descendant of i (k in the subtree of i)."""

    def build(m: Model) -> np.ndarray:
        parent = np.asarray(m.body_parentid, np.int64)
        a = np.eye(m.nbody)
        for k in range(m.nbody - 1, 0, -1):  # MuJoCo orders bodies parent < child: children before parents
            a[parent[k]] += a[k]
        return a

    return memo(m, "support_tree_matrix", build)


def _dense_sweep(m: Model) -> bool:
    """Linear tree sweeps as one (nbody, nbody) product instead of a loop over levels (small trees: one fat op
    beats depth-many gathers and segment sums, above all under vmap)."""
    return m.nbody <= DENSE_SWEEP_NBODY


def _apply(a: np.ndarray, x: jax.Array) -> jax.Array:
    y = jp.tensordot(jp.asarray(a, x.dtype), x.reshape(x.shape[0], -1), axes=(1, 0), precision=_HI)
    return y.reshape(x.shape)


def forward_accumulate(m: Model, x: jax.Array) -> jax.Array:
    """Root-to-leaf prefix sums: returns y with y[0] = x[0], y[i] = y[parent(i)] + x[i]. x: (nbody, ...)."""
    if _dense_sweep(m):
        return _apply(_tree_matrix(m).T, x)  # y[i] = sum of x over i and its ancestors
    return level_scan(m, x, lambda p, v: p + v)


def subtree_sum(m: Model, x: jax.Array, include_world: bool = True) -> jax.Array:
    """Leaf-to-root sums: y[i] = sum of x[k] over the subtree of i. x: (nbody, ...).

    With include_world=False, children of the world do not add into body 0 (as mj_crb / mj_rne).
    """
    if _dense_sweep(m):
        a = _tree_matrix(m)
        if not include_world:
            a = memo(m, "support_tree_matrix_noworld", lambda m: np.concatenate([np.eye(1, m.nbody), a[1:]]))
        return _apply(a, x)
    t = tables(m)
    xs = take(x, t.order)
    nlev = len(t.level_bounds)
    out = [None] * nlev
    s, e = t.level_bounds[-1]
    out[-1] = xs[s:e]
    for k in range(nlev - 2, -1, -1):
        s, e = t.level_bounds[k]
        cur = xs[s:e]
        if k > 0 or include_world:
            cur = cur + jax.ops.segment_sum(out[k + 1], t.level_parent[k], num_segments=e - s)
        out[k] = cur
    return take(jp.concatenate(out, axis=0), t.inv_order)


# ---- Jacobians ----------------------------------------------------------------------------------------------


def _root_com(m: Model, d: Any, body_id) -> jax.Array:
    rootid = np.asarray(m.body_rootid)
    if isinstance(body_id, (int, np.integer)):
        return d.subtree_com[int(rootid[int(body_id)])]
    if isinstance(body_id, np.ndarray):  # static ids: a gather with constant indices
        return d.subtree_com[rootid[body_id]]
    return d.subtree_com[jp.asarray(rootid)[body_id]]


def _mask(m: Model, body_id, dtype) -> jax.Array:
    mask = tables(m).body_dof_mask
    if isinstance(body_id, (int, np.integer)):
        return jp.asarray(mask[int(body_id)], dtype)
    if isinstance(body_id, np.ndarray):  # static ids: a constant
        return jp.asarray(mask[body_id], dtype)
    return jp.asarray(mask, dtype)[body_id]


def jac(m: Model, d: Any, point: jax.Array, body_id) -> tuple[jax.Array, jax.Array]:
    """Translational and rotational Jacobians of a world point attached to `body_id` (mj_jac).

    point: (3,) world position; body_id: int or traced int scalar. Needs kinematics + com_pos (cdof,
    subtree_com). Returns jacp (3, nv), jacr (3, nv).
    """
    cdof = d.cdof
    mask = _mask(m, body_id, cdof.dtype)
    offset = point - _root_com(m, d, body_id)
    ang, lin = cdof[:, :3], cdof[:, 3:]
    jacr = (ang * mask[:, None]).T
    jacp = ((lin + cross_c(ang, offset)) * mask[:, None]).T
    return jacp, jacr


def jac_dot(m: Model, d: Any, point: jax.Array, body_id) -> tuple[jax.Array, jax.Array]:
    """Time derivative of `jac` (mj_jacDot). Needs kinematics, com_pos and com_vel. Returns (3, nv) x 2."""
    t = tables(m)
    cdof, cdof_dot = d.cdof, d.cdof_dot
    mask = _mask(m, body_id, cdof.dtype)
    com = _root_com(m, d, body_id)
    offset = point - com
    if isinstance(body_id, (int, np.integer)):
        cvel = d.cvel[int(body_id)]
    else:
        cvel = d.cvel[body_id]
    pvel_lin = cvel[3:] - cross_c(offset, cvel[:3])
    # ball and free-rotation dofs: cdof_dot recomputed with the velocity of the dof's own body
    is_quat = t.dof_kind == 2
    if np.any(is_quat):
        own = motion_cross_c(d.cvel[np.asarray(m.dof_bodyid)], cdof)
        cdof_dot = jp.where(jp.asarray(is_quat)[:, None], own, cdof_dot)
    ang_dot, lin_dot = cdof_dot[:, :3], cdof_dot[:, 3:]
    jacr = (ang_dot * mask[:, None]).T
    jacp = ((lin_dot + cross_c(ang_dot, offset) + cross_c(cdof[:, :3], pvel_lin)) * mask[:, None]).T
    return jacp, jacr


def jac_batch(m: Model, d: Any, points: jax.Array, body_ids) -> tuple[jax.Array, jax.Array]:
    """`jac` for many points: points (n, 3), body_ids (n,) int (numpy or traced) -> (n, 3, nv) x 2."""
    body_ids = jp.asarray(body_ids, jp.int32)
    return jax.vmap(lambda p, b: jac(m, d, p, b))(points, body_ids)


def jac_dot_batch(m: Model, d: Any, points: jax.Array, body_ids) -> tuple[jax.Array, jax.Array]:
    """`jac_dot` for many points: points (n, 3), body_ids (n,) -> (n, 3, nv) x 2."""
    body_ids = jp.asarray(body_ids, jp.int32)
    return jax.vmap(lambda p, b: jac_dot(m, d, p, b))(points, body_ids)


def wrench_to_cfrc(m: Model, d: Any, body_ids, points: jax.Array, torque_force: jax.Array) -> jax.Array:
    """Accumulate world-frame wrenches into a com-based (nbody, 6) `cfrc_ext`-like array.

    body_ids: (n,) int (numpy or traced); points: (n, 3) application points; torque_force: (n, 6) world-oriented
    [torque, force] about `points`. Returns (nbody, 6) [torque about subtree_com of the body's root, force];
    entries for body 0 are dropped (as MuJoCo skips the world body). Used for contact and equality forces in
    rne_postconstraint.
    """
    body_ids = jp.asarray(body_ids, jp.int32)
    com = d.subtree_com[jp.asarray(np.asarray(m.body_rootid), jp.int32)[body_ids]]
    torque = torque_force[:, :3] - jp.cross(com - points, torque_force[:, 3:])  # elementwise: no tiny dot
    w = jp.concatenate([torque, torque_force[:, 3:]], axis=-1)
    w = jp.where((body_ids > 0)[:, None], w, 0.0)
    return jax.ops.segment_sum(w, body_ids, num_segments=m.nbody)


def xfrc_accumulate(m: Model, d) -> jax.Array:
    """Generalised force of the Cartesian wrenches `xfrc_applied` (mj_xfrcAccumulate), (nv,).

    Each body's (force, torque) acts at its centre of mass `xipos`. In the com-based frame (origin at the
    subtree root's com) the wrench is (torque + (xipos - com) x force, force); a dof feels the sum of the
    wrenches of the bodies it moves (the subtree of its body): qfrc[j] = cdof[j] . subtree_sum(wrench)[body(j)].
    """
    if m.nv == 0:
        return jp.zeros((0,), d.qvel.dtype)
    frc, trq = d.xfrc_applied[:, :3], d.xfrc_applied[:, 3:]
    offset = d.xipos - d.subtree_com[np.asarray(m.body_rootid)]
    wrench = jp.concatenate([trq + jp.cross(offset, frc), frc], axis=-1)  # (nbody, 6)
    wrench = subtree_sum(m, wrench)
    return jp.sum(d.cdof * wrench[np.asarray(m.dof_bodyid)], axis=-1)
