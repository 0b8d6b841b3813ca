"""MuJoCo's efc block order for the PGS sweep (`pgs.solve_pgs(block_key=...)`).

MuJoCo's PGS shuffles its list of constraint blocks, which starts in efc order; our padded rows are laid out by
kind (`pipeline.constraint`), so each block gets sort keys that reproduce that order among the live blocks:
  equality rows by equality id (then row within it); friction loss rows as laid out (dofs, then tendons); limits
  by joint id (lower side, then upper), then tendons; contacts as mj_collision emits them: by body-pair signature
  (bodies ordered), explicit <pair>s before the dynamic pairs of the same signature, then the geom pair (all-to-all:
  the geom of the lower body first; bodies with several geoms go through the midphase, whose contacts are sorted by
  the contact's geom ids), then the slot (the collider's order within one geom pair).
Flex contacts and trimmed or compacted pair groups (whose slots are not tied to one pair) keep their slot order
after the geom contacts.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.solver import pgs
from mjx_lite.types import Data, DisableBit, Model

_NKEY = 8


def block_keys(m: Model, d: Data, plan) -> tuple[jax.Array, ...]:
    """Sort keys of the PGS blocks of `plan.layout` (`pgs.block_rows` order): a tuple of (nb,) int32 arrays, the last
    one primary (`jp.lexsort`'s convention)."""
    rows, _ = pgs.block_rows(plan.layout)
    first = rows[:, 0] if rows.size else np.zeros(0, np.int64)
    nb = first.shape[0]
    static = np.zeros((nb, _NKEY), np.int64)  # columns: category, then keys, most significant first
    adr = plan.adr
    con0 = adr["contact"]

    def rows_of(name, n_per, ids, inner=None):
        lo = adr[name]
        for i, r in enumerate(first):
            if lo <= r < lo + n_per * len(ids):
                k = (r - lo) // n_per
                static[i, :3] = (0, ids[k], (r - lo) % n_per if inner is None else inner[k])

    rows_of("connect", 3, plan.connect)
    rows_of("weld", 6, plan.weld)
    rows_of("joint_eq", 1, plan.joint_eq)
    rows_of("tendon_eq", 1, plan.tendon_eq)
    rows_of("flex_eq", 1, plan.flex_eq_owner, inner=np.arange(len(plan.flex_eq_owner)))
    fr = (first >= adr["fric_dof"]) & (first < adr["lim_jnt"])
    static[fr, 0], static[fr, 1] = 1, first[fr]
    # limits: the rows of `_two_sided` (lower, upper; one-row objects only the first) and ball joints' one row
    lim = []
    for j, one in zip(plan.lim_jnt, plan.lim_jnt_one):
        lim += [(int(j), 0)] + ([] if one else [(int(j), 1)])
    lim += [(int(j), 0) for j in plan.lim_ball]
    for t, one in zip(plan.lim_ten, plan.lim_ten_one):
        lim += [(m.njnt + int(t), 0)] + ([] if one else [(m.njnt + int(t), 1)])
    if lim:
        lim_r = np.asarray(lim)
        lim_rows = adr["lim_jnt"] + np.arange(len(lim))
        for i, r in enumerate(first):
            if adr["lim_jnt"] <= r < con0:
                k = int(np.nonzero(lim_rows == r)[0][0])
                static[i, :3] = (2, lim_r[k, 0], lim_r[k, 1])
    keys = [jp.asarray(static[:, c], jp.int32) for c in range(_NKEY)]
    is_con = first >= con0
    if not np.any(is_con):
        return tuple(reversed(keys))

    # contacts: slot and row offset of each block's first row
    slot = np.searchsorted(plan.con_adr, first, side="right") - 1
    slot = np.where(is_con, slot, 0)
    offset = np.where(is_con, first - plan.con_adr[slot], 0)
    # static explicit pair id of each slot (-1: dynamic, or a group whose slots are not tied to one pair)
    nslot = len(plan.con_adr)
    pair_of = np.full(nslot, -1, np.int64)
    explicit = np.zeros(nslot, bool)
    off = 0
    for g in driver.pair_table(m).groups:
        n = g.nrows
        if g.pair.size and g.pair[0] >= 0:
            explicit[off : off + n] = True
            if g.static_slots:
                pair_of[off : off + n] = np.repeat(g.pair, g.ncon)
        off += n
    geom = d.contact.geom[slot]  # (nb, 2)
    g0, g1 = geom[:, 0], geom[:, 1]
    is_geom = (g0 >= 0) & (g1 >= 0)
    bodyid = jp.asarray(np.asarray(m.geom_bodyid), jp.int32)
    gtype = jp.asarray(np.asarray(m.geom_type), jp.int32)
    b0, b1 = bodyid[jp.maximum(g0, 0)], bodyid[jp.maximum(g1, 0)]
    bf1, bf2 = jp.minimum(b0, b1), jp.maximum(b0, b1)
    # all-to-all: (geom of the lower body, geom of the other); midphase: the contact's geoms, type order undone
    lo_first = b0 <= b1
    a2a = (jp.where(lo_first, g0, g1), jp.where(lo_first, g1, g0))
    swap = gtype[jp.maximum(g0, 0)] > gtype[jp.maximum(g1, 0)]
    mid = (jp.where(swap, g1, g0), jp.where(swap, g0, g1))
    ngeom = jp.asarray(np.asarray(m.body_geomnum), jp.int32)
    midphase = ~((ngeom[bf1] == 1) & (ngeom[bf2] == 1))
    if m.opt.disableflags & DisableBit.MIDPHASE:
        midphase = jp.zeros_like(midphase)
    k1 = jp.where(midphase, mid[0], a2a[0])
    k2 = jp.where(midphase, mid[1], a2a[1])
    pid = jp.asarray(pair_of[slot], jp.int32)
    expl = jp.asarray(explicit[slot])
    k1 = jp.where(expl & (pid >= 0), pid, k1)
    k2 = jp.where(expl & (pid >= 0), 0, k2)
    flag = jp.where(expl, 0, 1)
    big = jp.int32(1 << 30)
    ordered = is_geom & jp.asarray(pair_of[slot] >= 0) | is_geom & ~expl
    con_keys = [jp.full(nb, 3, jp.int32),
                jp.where(ordered, bf1, big), jp.where(ordered, bf2, 0), jp.where(ordered, flag, 0),
                jp.where(ordered, k1, 0), jp.where(ordered, k2, 0),
                jp.asarray(slot, jp.int32), jp.asarray(offset, jp.int32)]  # fmt: skip
    isc = jp.asarray(is_con)
    keys = [jp.where(isc, ck, k) for ck, k in zip(con_keys, keys)]
    return tuple(reversed(keys))
