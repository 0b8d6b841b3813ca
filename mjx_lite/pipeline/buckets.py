"""Contact buckets (`Config.contact_buckets`): the constraint rows and the solver on the live contacts only.

The collision driver writes `m.nconmax` padded contact slots, and the constraint rows follow them (`m.njmax` rows),
though a state has few live contacts (dm_control's quadruped: ~4 of 455 slots, ~20 of 1246 rows). With buckets, the
two stages that work per row run on a small static capacity instead:

    make_constraint: the live contacts (`constraint.contact_live`) are compacted, in slot order, into the first of
        the bucket capacities that holds them all; the rows of a capacity-`c` model (`configure(m, nconmax=c)`: c
        slots of the model's largest condim, the equality / friction / limit rows unchanged) are made there and
        scattered to their rows of m's layout (`_row_map`); the other rows hold the values of dead rows.
    solve: the same bucket (recomputed from d.contact: the same contacts, the same choice) gathers its rows back
        from Data's padded efc arrays, the model's solver runs on them, and its outputs (efc_force, efc_state,
        efc_b) are scattered back.

The live rows keep their relative order (equality, friction, limits, then contacts in slot order, each contact's
rows as in its own slot), so the solver sees the full step's problem without its dead rows: the same start (the
same qacc_warmstart and cost rule), the same iterates and the same result to round-off. Data keeps its shapes;
`contact.efc_address` is the full layout's.

Under `jax.vmap` the bucket is chosen once for the batch (`batch_max`: the largest need of the batch), so
`lax.switch` runs one branch; where no capacity holds the need, the last branch is the full padded stage itself
(exact fallback). Each capacity compiles its own rows and solver. Gradients go through the chosen branch (gather
and scatter are linear; the need is an integer).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.pipeline import capacity, constraint, kernels
from mjx_lite.solver.solve import solve as _solve
from mjx_lite.types import ConstraintType, Contact, Data, DisableBit, Model

__all__ = ["AUTO_BUCKETS", "AUTO_MAX_SHARE", "LARGE_MAX_TREES", "LARGE_MIN_RATIO", "LARGE_MIN_ROWS", "batch_max",
           "capacities", "enabled", "large", "make_constraint", "need", "solve"]  # fmt: skip

# Capacities of `Config(contact_buckets="auto")`: legged models on the ground (a few feet, a few contacts each).
AUTO_BUCKETS = (8, 32)
# "auto" keeps a capacity only where it is at most this share of m.nconmax: a bucket costs a compiled branch (its rows
# and solver: cheetah, batch 64, compile 147 -> 176 s at load 11 with two) and a gather and a scatter of every efc
# field per stage, which a bucket that does not at least halve the slots does not pay back (walker: 8 of 14 slots)
AUTO_MAX_SHARE = 0.5
# "large": "auto"'s capacities, only on models whose padded constraint rows (m.njmax) are many and
# mostly dead: at least LARGE_MIN_ROWS, and at least LARGE_MIN_RATIO times the rows of the smallest "auto" bucket (the
# rows of AUTO_BUCKETS[0] contacts of the largest condim; a small model keeps its one padded program, compiled as
# before). Batch 256, float32, 2-core CPU, load 10-12 (benchmarks/capacity_probe.py, interleaved): dm_control's
# quadruped (1,246 rows, 12.5x its bucket of 8's 100) 2.60 -> 0.54 CPU-ms per environment-step for a compile of
# 128-152 -> 168 CPU-s; the humanoid (403 rows, 7.6x) 1.5x faster for a compile of 45 -> 72 CPU-s
# (docs/benchmarks.md): left padded, as are models below 512 rows, whose compile the buckets' rows and solvers would
# lengthen by more than they save them. Likely live: a few contacts per kinematic tree (a foot's, a box's corners),
# so "large" also needs at most LARGE_MAX_TREES trees (AUTO_BUCKETS[-1] / LARGE_MAX_TREES = 8 contacts each in the
# largest bucket) and no flex: a pile, a crowd or a cloth has as many live contacts as bodies or vertices, above every
# bucket (the padded fallback would run every step, its compile lengthened for nothing).
LARGE_MIN_ROWS = 512
LARGE_MIN_RATIO = 10.0
LARGE_MAX_TREES = 4

EFC_FIELDS = tuple(f.name for f in dataclasses.fields(Data) if f.name.startswith("efc_"))


def batch_max(x: jax.Array) -> jax.Array:
    """x itself, except under `jax.vmap`: the maximum over the batch, unbatched (`lax.switch` on it then runs one
    branch for the whole batch instead of every branch). Integer, not differentiated."""

    @jax.custom_batching.custom_vmap
    def f(x):
        return x

    @f.def_vmap
    def rule(axis_size, in_batched, x):
        return (jp.max(x, axis=0) if in_batched[0] else x), False

    return f(jax.lax.stop_gradient(x))


def capacities(m: Model) -> tuple[int, ...]:
    """Static: the bucket capacities of `m` (ascending, each below m.nconmax; () when buckets are off): those of
    `m.config.contact_buckets` as `configure(m, nconmax=c)` sizes them (a `<size njmax>` cap can cut one); for
    "auto", only those of at most AUTO_MAX_SHARE * m.nconmax slots; for "large", "auto"'s where `large(m)`, else
    none (and none with the fused kernels)."""
    want = m.config.contact_buckets
    if want is None or m.nconmax == 0 or m.njmax == 0 or (m.opt.disableflags & DisableBit.CONSTRAINT):
        return ()
    if want == "large" and (m.njmax < LARGE_MIN_ROWS or m.ntree > LARGE_MAX_TREES or kernels.fused(m)):
        return ()  # before any plan is built: small models, many trees

    def build(m: Model) -> tuple[int, ...]:
        if want == "large" and not large(m):
            return ()
        if kernels.fused(m):
            raise ValueError("Config.contact_buckets is not supported with Config.kernels='fused' (the fused rows "
                             "and solver kernels work on the full padded rows): use kernels='xla' or "
                             "contact_buckets=None")  # fmt: skip
        caps = {_bucket_model(m, c).nconmax for c in (want if isinstance(want, tuple) else AUTO_BUCKETS)}
        top = m.nconmax - 1 if isinstance(want, tuple) else AUTO_MAX_SHARE * m.nconmax
        return tuple(sorted(c for c in caps if 0 < c <= top))

    return static_memo(m, "contact_buckets", build)


def large(m: Model) -> bool:
    """Static: m's padded constraint rows are many and mostly dead (`contact_buckets="large"`): m.njmax is at least
    LARGE_MIN_ROWS and LARGE_MIN_RATIO times the rows of a capacity of AUTO_BUCKETS[0] contacts, and m has at most
    LARGE_MAX_TREES kinematic trees and no flex (its live contacts likely fit the buckets)."""
    if m.njmax < LARGE_MIN_ROWS or m.nconmax <= AUTO_BUCKETS[0] or m.ntree > LARGE_MAX_TREES or m.nflex > 0:
        return False
    return m.njmax >= LARGE_MIN_RATIO * constraint.plan(_bucket_model(m, AUTO_BUCKETS[0])).nefc


def enabled(m: Model) -> bool:
    """Static: `make_constraint` and `solve` of this module run buckets for m."""
    return bool(capacities(m))


def _bucket_model(m: Model, c: int) -> Model:
    """m with c contact slots (`configure(m, nconmax=c)`): the constraint plan of a capped capacity."""
    return capacity.configure(m, nconmax=int(c))


def need(m: Model, d: Data) -> jax.Array:
    """() int32: the live contacts of d (those that make constraint rows)."""
    return jp.sum(constraint.contact_live(m, d.contact)).astype(jp.int32)


def _compact(live: jax.Array, c: int) -> jax.Array:
    """(c,) int32 slot ids: the live slots in slot order, then the others in slot order (needs sum(live) <= c)."""
    n = live.shape[0]
    pos = jp.where(live, jp.cumsum(live) - 1, jp.sum(live) + jp.cumsum(~live) - 1)
    return jp.zeros((c,), jp.int32).at[pos].set(jp.arange(n, dtype=jp.int32), mode="drop")


def _dead_rows(md: Model) -> dict[str, np.ndarray]:
    """Static efc_type and efc_id of md's rows as a dead row holds them (contact rows: the slot's type and id)."""

    def build(md: Model) -> dict[str, np.ndarray]:
        p = constraint.plan(md)
        ctype = np.zeros(p.nefc, np.int32)
        cid = np.zeros(p.nefc, np.int32)
        for s, (adr, rows, dim) in enumerate(zip(p.con_adr, p.con_rows, p.con_dim)):
            if dim == 1:
                t = ConstraintType.CONTACT_FRICTIONLESS
            else:
                t = ConstraintType.CONTACT_ELLIPTIC if p.elliptic else ConstraintType.CONTACT_PYRAMIDAL
            ctype[adr : adr + rows] = t
            cid[adr : adr + rows] = s
        return {"efc_type": ctype, "efc_id": cid}

    return static_memo(md, "bucket_dead_rows", build)


def _dead(md: Model, name: str, like: jax.Array) -> jax.Array:
    """md's rows of efc field `name` (shape of `like`'s rows, md.njmax of them) as dead rows hold them."""
    shape = (constraint.plan(md).nefc,) + like.shape[1:]
    if name in ("efc_type", "efc_id"):
        return jp.asarray(_dead_rows(md)[name], like.dtype)
    return jp.full(shape, 1 if name in ("efc_D", "efc_R") else 0, like.dtype)


@dataclasses.dataclass(frozen=True)
class _Bucket:
    """One state's bucket of capacity c: its slots (c,) (live first) and where its rows go in m's layout."""

    slots: jax.Array  # (c,) int32 slot ids of m
    target: jax.Array  # (nefc_c,) int32 row of m of each bucket row; m's nefc (dropped) for dead rows


def _row_map(m: Model, md: Model, live: jax.Array) -> _Bucket:
    """The bucket of md's capacity for the live contacts `live` (nconmax,) of m.

    Bucket slot k holds m's slot slots[k]; its row j (md's slots all have the rows of m's largest condim) goes to
    m's row con_adr[slots[k]] + j when k is live and j is a row of m's slot (rows beyond it are dead: a contact's
    rows lie within its own slot's); equality, friction and limit rows come first in both layouts, unmoved."""
    pf, pb = constraint.plan(m), constraint.plan(md)
    pre = pb.adr["contact"]
    assert pre == pf.adr["contact"] and np.all(pb.con_rows == pb.con_rows[0]), (pre, pf.adr, pb.con_rows)
    c, nb = md.nconmax, int(pb.con_rows[0])
    slots = _compact(live, c)
    k = np.repeat(np.arange(c), nb)
    j = np.tile(np.arange(nb), c)
    s = slots[k]
    ok = (jp.asarray(k) < jp.sum(live)) & (jp.asarray(j) < jp.asarray(pf.con_rows, jp.int32)[s])
    con = jp.where(ok, jp.asarray(pf.con_adr, jp.int32)[s] + jp.asarray(j, jp.int32), pf.nefc)
    return _Bucket(slots=slots, target=jp.concatenate([jp.arange(pre, dtype=jp.int32), con.astype(jp.int32)]))


def _compact_contacts(con: Contact, slots: jax.Array) -> Contact:
    return jax.tree.map(lambda x: x[slots], con)


def _scatter(m: Model, name: str, small: jax.Array, target: jax.Array, full: jax.Array) -> jax.Array:
    """m's rows of efc field `name` from md's rows `small`: dead rows, with the bucket rows put at `target`."""
    return _dead(m, name, full).at[target].set(small, mode="drop")


def _gather(md: Model, name: str, full: jax.Array, target: jax.Array) -> jax.Array:
    """md's rows of efc field `name` from m's rows `full` (dead rows where a bucket row has no row of m)."""
    ok = target < full.shape[0]
    rows = full[jp.minimum(target, full.shape[0] - 1)]
    ok = ok.reshape(ok.shape + (1,) * (rows.ndim - 1))
    return jp.where(ok, rows, _dead(md, name, full))


def _choose(m: Model, d: Data, stage, fallback):
    """`stage(m, md, d, bucket)` on the first bucket capacity that holds the batch's live contacts, else
    `fallback(m, d)` (the full padded stage)."""
    caps = capacities(m)
    live = constraint.contact_live(m, d.contact)
    n = batch_max(jp.sum(live).astype(jp.int32))
    index = jp.sum(n > jp.asarray(caps, jp.int32)).astype(jp.int32)  # caps ascending: the first that holds n

    def branch(c):
        def run(d):
            md = _bucket_model(m, c)
            return stage(m, md, d, _row_map(m, md, live))

        return run

    return jax.lax.switch(index, [branch(c) for c in caps] + [lambda d: fallback(m, d)], d)


def _merge(m: Model, md: Model, full: Data, small_in: Data, small_out: Data, b: _Bucket) -> Data:
    """small_out (md's stage on small_in) in m's layout: the efc fields the stage wrote scattered to m's rows, the
    others full's; every other field small_out's, but the contacts full's."""
    efc = {}
    pre = constraint.plan(md).adr["contact"]
    for name in EFC_FIELDS:
        out = getattr(small_out, name)
        if out is getattr(small_in, name):
            efc[name] = getattr(full, name)
            continue
        if name == "efc_id":  # a contact row's id is its slot: the bucket's slot k is m's slots[k]
            out = jp.concatenate([out[:pre], b.slots[jp.clip(out[pre:], 0, md.nconmax - 1)]]).astype(out.dtype)
        efc[name] = _scatter(m, name, out, b.target, getattr(full, name))
    return small_out.replace(contact=full.contact, **efc)


def _rows_stage(m: Model, md: Model, d: Data, b: _Bucket) -> Data:
    small = d.replace(contact=_compact_contacts(d.contact, b.slots))
    out = _merge(m, md, d, small, kernels.make_constraint(md, small), b)
    live = constraint.contact_live(m, d.contact)  # efc_address of m's layout (as constraint.fill)
    adr = jp.where(live, jp.asarray(constraint.plan(m).con_adr, jp.int32), -1)
    return out.replace(contact=out.contact.replace(efc_address=adr))


def _solve_stage(m: Model, md: Model, d: Data, b: _Bucket) -> Data:
    efc = {name: _gather(md, name, getattr(d, name), b.target) for name in EFC_FIELDS}
    small = d.replace(contact=_compact_contacts(d.contact, b.slots), **efc)
    return _merge(m, md, d, small, _solve(md, small), b)


def make_constraint(m: Model, d: Data) -> Data:
    """`constraint.make_constraint` (its `kernels` dispatch) with the contact rows made in a bucket."""
    return _choose(m, d, _rows_stage, kernels.make_constraint)


def solve(m: Model, d: Data) -> Data:
    """`solver.solve` on the bucket's rows (the bucket `make_constraint` chose: recomputed from d.contact)."""
    return _choose(m, d, _solve_stage, _solve)
