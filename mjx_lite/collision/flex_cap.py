"""The per-pair contact cap of interpolated flexes (MuJoCo 4.0's filterFlexContacts, probed): when a flex : flex pair
with an interpolated flex (dof="trilinear" / "quadratic") makes more than MAXCONPAIR contacts, MuJoCo keeps
MAXCONPAIR of them, spread out: the deepest first (the largest -dist, the first of equals), then repeatedly the
candidate farthest from every contact kept so far (the largest min over kept of |pos - pos_kept|^2, the first of
equals). Pairs of flexes that are not interpolated keep every contact (no cap in 4.0).

Here `spread` is that selection over a group's fixed candidate rows (collision/flex_flex.py), MAXCONPAIR steps of an
argmax over the rows under `lax.fori_loop`; traced, batched under vmap. The kept set is MuJoCo's wherever its
candidates are among ours (no overflow of the group's candidate slots) and no two candidates tie; the selection is
piecewise constant (no gradient flows through which contacts are kept, only through the kept contacts).
"""

from __future__ import annotations

import jax
import jax.numpy as jp

__all__ = ["MAXCONPAIR", "spread"]

MAXCONPAIR = 50  # mjMAXCONPAIR: contacts kept of one interpolated flex : flex pair


def spread(dist: jax.Array, pos: jax.Array, active: jax.Array, cap: int = MAXCONPAIR) -> jax.Array:
    """(n,) bool: the rows kept of n candidate contacts with depth -dist (n,), points pos (n, 3) and `active` (n,):
    all of them when at most `cap` are active, else `cap` chosen as described in the module docstring."""
    n = dist.shape[0]
    if n <= cap:
        return active
    count = jp.sum(active)
    inf = jp.asarray(jp.inf, pos.dtype)

    def body(i, carry):
        kept, mind, best = carry
        take = i < count
        kept = kept.at[best].set(kept[best] | take)
        d2 = jp.sum((pos - pos[best]) ** 2, axis=1)
        free = active & ~kept
        mind = jp.where(free, jp.minimum(mind, d2), mind)
        nxt = jp.argmax(jp.where(free, mind, -inf))  # (the first of equals, as MuJoCo's strict >)
        return kept, mind, nxt

    first = jp.argmax(jp.where(active, -dist, -inf))
    init = (jp.zeros(n, bool), jp.full(n, inf), first)
    kept, _, _ = jax.lax.fori_loop(0, cap, body, init)
    return jp.where(count > cap, kept & active, active)  # (MuJoCo selects only above the cap)
