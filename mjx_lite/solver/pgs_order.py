"""MuJoCo's efc block order for the PGS sweep (`pgs.solve_pgs(block_key=...)`).

MuJoCo's PGS shuffles its list of constraint blocks, which starts in efc order; our padded rows are laid out by
kind (`pipeline.constraint`), so each block gets sort keys that reproduce that order among the live blocks:
  equality rows by equality id (then row within it); friction loss rows as laid out (dofs, then tendons); limits
  by joint id (lower side, then upper), then tendons; contacts in MuJoCo's contact order
  (`sensor_contact.contact_rank`, which noslip and the contact sensors use too), then the row within a pyramidal
  contact.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import sensor_contact
from mjx_lite.solver import pgs
from mjx_lite.types import Data, Model

_NKEY = 3  # category, then two keys


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
    rank = sensor_contact.contact_rank(m, d)[jp.asarray(slot)]  # MuJoCo's contact order
    con_keys = [jp.full(nb, 3, jp.int32), rank, jp.asarray(offset, jp.int32)]
    isc = jp.asarray(is_con)
    keys = [jp.where(isc, ck, k) for ck, k in zip(con_keys, keys)]
    return tuple(reversed(keys))
