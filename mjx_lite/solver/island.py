"""Constraint islands (MuJoCo's mj_island): the connected components of the graph whose vertices are kinematic trees
and whose edges are the live constraint rows between them, computed per environment in fixed shapes.

MuJoCo 4.0 (islands on by default; `<flag island="disable"/>` turns them off) solves each island on its own with
Newton, CG and PGS, and runs noslip per island; each island stops by its own tolerance, scaled by its own trace(M).
A tree that no live row touches belongs to no island (its dofs keep qacc_smooth). Island ids are assigned in
ascending order of each island's smallest tree index (mj_dsuAssign), so they are MuJoCo's numbers.

Here the components come from a bounded min-label propagation over the (rows x trees) incidence, with pointer
jumping, as a `lax.while_loop` of at most ntree rounds that stops at its fixed point (integers only: nothing to
differentiate). A row touches a tree when one of its Jacobian entries on that tree's dofs is nonzero.
`solver.solve` passes dof_island and efc_island to Newton, CG and PGS (XLA path), which solve each island on its own
with segment sums over these ids (`common.Segments`), and noslip sweeps each island on its own (`noslip.apply`); the
fused kernels solve the whole system.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.solver import common


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Islands:
    """Islands of one constraint problem (ntree trees, nefc padded rows, nv dofs).

    nisland: () int32; tree_island: (ntree,) int32, -1 for a tree no live row touches; dof_island: (nv,) int32
    (-1: unconstrained); efc_island: (nefc,) int32 (-1: padding rows).
    """

    nisland: jax.Array
    tree_island: jax.Array
    dof_island: jax.Array
    efc_island: jax.Array


def incidence(p: common.Problem, dof_treeid: np.ndarray, ntree: int) -> jax.Array:
    """(nefc, ntree) bool: live row r has a nonzero Jacobian entry on a dof of tree t."""
    nz = jp.abs(p.J) > 0
    if p.J_colind is None:  # dense (nefc, nv): any over each tree's columns
        # the count of a row's nonzeros on each tree, as a product with the static (nv, ntree) one-hot of the dofs'
        # trees (exact: small integers); a segment_max over the transposed rows ran as a scatter plus a transposed
        # copy of the whole (nefc, nv) mask per environment (11-14 % of the quadruped's profiled step at 2454 rows)
        onehot = np.asarray(dof_treeid)[:, None] == np.arange(ntree)[None, :]
        touch = nz.astype(p.J.dtype) @ jp.asarray(onehot, p.J.dtype) > 0
    else:  # sparse rows: scatter each nonzero value's tree
        rows = jp.broadcast_to(jp.arange(p.J.shape[0])[:, None], p.J.shape)
        trees = jp.asarray(dof_treeid)[p.J_colind]
        touch = jp.zeros((p.J.shape[0], ntree), bool).at[rows, trees].max(nz)
    return touch & p.mask[:, None]


def find(p: common.Problem, dof_treeid: np.ndarray, ntree: int) -> Islands:
    """The islands of problem p: dof_treeid (nv,) and ntree are the Model's (static)."""
    dof_treeid = np.asarray(dof_treeid, np.int32)
    nefc = p.mask.shape[0]
    if ntree == 0 or nefc == 0:
        none = jp.int32(-1)
        return Islands(nisland=jp.zeros((), jp.int32), tree_island=jp.full((ntree,), none),
                       dof_island=jp.full(dof_treeid.shape, none), efc_island=jp.full((nefc,), none))  # fmt: skip
    touch = incidence(p, dof_treeid, ntree)
    big = jp.int32(ntree)
    tree_ids = jp.arange(ntree, dtype=jp.int32)

    def round_(label):
        row = jp.min(jp.where(touch, label[None, :], big), axis=1)  # (nefc,) smallest label among a row's trees
        down = jp.min(jp.where(touch, row[:, None], big), axis=0)  # (ntree,) smallest label of the rows at a tree
        label = jp.minimum(label, down)
        return label[label]  # pointer jumping: a label is a tree of the same component with a smaller index

    def cond(s):
        label, prev, it = s
        return jp.any(label != prev) & (it < ntree)

    def body(s):
        label, _, it = s
        return round_(label), label, it + 1

    label0 = round_(tree_ids)
    label, _, _ = jax.lax.while_loop(cond, body, (label0, tree_ids, jp.ones((), jp.int32)))
    active = jp.any(touch, axis=0)  # (ntree,)
    root = active & (label == tree_ids)
    rank = jp.cumsum(root.astype(jp.int32)) - 1  # island id of each root, in ascending tree order
    tree_island = jp.where(active, rank[label], -1).astype(jp.int32)
    first = jp.argmax(touch, axis=1)  # a tree of each row (all its trees share the island)
    efc_island = jp.where(jp.any(touch, axis=1), tree_island[first], -1).astype(jp.int32)
    return Islands(nisland=jp.sum(root).astype(jp.int32), tree_island=tree_island,
                   dof_island=tree_island[jp.asarray(dof_treeid)], efc_island=efc_island)  # fmt: skip
