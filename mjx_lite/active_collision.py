"""Collision restricted to the pairs in contact at a linearisation point: the collision stage of the derivative pass
of `derivatives.transition` (with a contact capacity `ncon`).

The Jacobians of a step at a state see only its active contacts: a pair out of contact there stays out under an
infinitesimal perturbation, and its rows are masked (no force, no derivative). The full collision stage still runs
every collider on every pair of the pair table (fixed iteration counts for GJK/EPA, and, differentiated, their
tangents for every pair): for dm_control's quadruped 455 pairs' worth, for 4 contacts. Here each group of the pair
table runs its collider on at most `cap` pairs, those with an active contact at the linearisation point (read from
its `Data.contact`), and the rows are laid out in the capped model's `nconmax` slots as `driver.collision` lays them
out (the deepest active rows, in layout order). Groups of at most `cap` pairs and height-field groups run as they
are.

Measured (dm_control's quadruped without its height field, vmap over 64 states, ncon 8, forward mode, load 14):
340 ms per state against MuJoCo C's centred differences at 15 ms, from ~190x C before. Still far, and where the
rest goes is not yet profiled. A candidate: every restricted group keeps `cap` slots, and the GJK/EPA groups
differentiate their fixed iterations densely over all of them (`driver._near_only`'s jvp), though the quadruped's
contacts are all plane-sphere; a pool of `cap` slots shared by the GJK/EPA groups would remove that.

Exact where every group has at most `cap` pairs in contact (`select` returns the flag that says otherwise; the
caller then returns NaN Jacobians); the values of the derivative pass are then those of the capped model's collision
(the same contacts, possibly in other slots).
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import jax
import jax.numpy as jp

from mjx_lite import types
from mjx_lite.collision import driver
from mjx_lite.collision import flex as flexcol
from mjx_lite.types import Data, GeomType, Model


class Selection(NamedTuple):
    """Per group of `driver.pair_table(m)`: None (the group runs whole) or (idx (k,) int pair indices in the group,
    valid (k,) bool); over: () bool, some group has more than k pairs in contact."""

    groups: tuple
    over: jax.Array


def supported(m: Model) -> bool:
    """Static: the restricted stage applies (no flex contacts: those have no pair table)."""
    return flexcol.capacity(m) == 0 and bool(driver.pair_table(m).groups)


def _reduced(g: driver.Group, cap: int) -> bool:
    return len(g.geom1) > cap and g.type1 != GeomType.HFIELD


def select(m: Model, star: Data, cap: int) -> Selection:
    """The pairs of each group with an active contact in `star.contact` (any Data of `m`'s pair table, e.g. a
    capped model's), at most `cap` per group, in the group's pair order. Not differentiated."""
    con = jax.lax.stop_gradient(star.contact)
    out = []
    over = jp.zeros((), bool)
    for g in driver.pair_table(m).groups:
        if not _reduced(g, cap):
            out.append(None)
            continue
        hit = (con.geom[:, None, 0] == jp.asarray(g.geom1)[None]) & (con.geom[:, None, 1] == jp.asarray(g.geom2)[None])
        live = jp.any(hit & con.active[:, None], axis=0)  # (n,) pairs in contact
        count = jp.sum(live)
        (idx,) = jp.nonzero(live, size=cap, fill_value=0)
        out.append((idx.astype(jp.int32), jp.arange(cap) < count))
        over = over | (count > cap)
    return Selection(tuple(out), over)


def stage(m: Model, sel: Selection, nconmax: int):
    """collide(m, d) -> d: `driver.collision` of a model whose contact capacity is `nconmax` (a capped model of the
    same pair table as m), each group restricted to the pairs of `sel`."""

    def collision_active(mm: Model, d: Data) -> Data:
        parts = []
        for g, s in zip(driver.pair_table(m).groups, sel.groups):
            if s is None:
                parts.append(driver._run_group(mm, d, g)[0])
                continue
            idx, valid = s
            k = idx.shape[0]
            condim, includemargin, gap, friction, solref, solreffriction, solimp, adhesion = driver._params(mm, g)
            params = (condim, includemargin + gap, includemargin, friction, solref, solreffriction, solimp, adhesion)
            params = tuple(jp.asarray(x)[idx] for x in params)
            g1, g2 = jp.asarray(g.geom1)[idx], jp.asarray(g.geom2)[idx]
            near, _ = driver._near(mm, d, g, g1, g2, params[1])
            cand = driver._Candidates(g1, g2, near & valid, jp.zeros((), bool), params)
            nc = g.ncon_collider
            sub = dataclasses.replace(g, ncon=nc, capacity=k, narrow=-1, collider_ncon=nc,
                                      touch=-1 if g.touch < 0 else k)  # fmt: skip
            parts.append(driver._run_group(mm, d, sub, cand)[0])
        fields = {key: jp.concatenate([p[key] for p in parts], axis=0) for key in parts[0]}
        rows = fields["dist"].shape[0]
        if rows > nconmax:
            fields, _ = driver._keep_deepest(fields, nconmax)
        elif rows < nconmax:  # pad with copies of the last row, inactive
            at = jp.minimum(jp.arange(nconmax), rows - 1)
            fields = {key: v[at] for key, v in fields.items()}
            fields["active"] = fields["active"] & (jp.arange(nconmax) < rows)
            fields["dist"] = jp.where(fields["active"], fields["dist"], driver.NOCONTACT)
        contact = types.Contact(**fields)
        return d.replace(contact=contact, ncon=jp.sum(contact.active).astype(jp.int32))

    return collision_active
