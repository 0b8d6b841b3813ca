"""Compiler pass for <contact>: explicit geom pairs and body-pair excludes (mjModel pair_*, exclude_*).

As MuJoCo: a pair's geoms are swapped so that body(geom1) <= body(geom2); signature = body1 << 16 | body2;
pairs and excludes are stably sorted by signature (their ids, hence names, follow the sorted order). Pair
properties come from the element and its default class only (never from the geoms).
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf.attrs import error, get, register_all, section_children, vec
from mjx_lite.mjcf.context import CompileContext

_SOLREF = (0.02, 1.0)
_SOLIMP = (0.9, 0.95, 0.001, 0.5, 2.0)
_FRICTION = (1.0, 1.0, 0.005, 0.0001, 0.0001)


def compile_contact(root, ctx: CompileContext) -> None:
    """Pairs and excludes -> ctx.arrays (pair_*, exclude_signature), ctx.sizes (npair, nexclude)."""
    els = section_children(root, "contact")
    for e in els:
        if e.tag not in ("pair", "exclude"):
            raise error(e, f"unknown contact element <{e.tag}>")
    pairs = [e for e in els if e.tag == "pair"]
    excludes = [e for e in els if e.tag == "exclude"]
    geom_bodyid = np.asarray(ctx.arrays.get("geom_bodyid", np.zeros(0, np.int32)))

    rows = []
    for p in pairs:
        g1 = ctx.id_of("geom", _req(p, "geom1"), p, "geom1")
        g2 = ctx.id_of("geom", _req(p, "geom2"), p, "geom2")
        b1, b2 = int(geom_bodyid[g1]), int(geom_bodyid[g2])
        if b1 > b2:
            g1, g2, b1, b2 = g2, g1, b2, b1
        condim = int(get(p, "condim", 3))
        if condim not in (1, 3, 4, 6):
            raise error(p, f"invalid condim {condim} (expected 1, 3, 4 or 6)", "condim")
        rows.append(dict(
            el=p, geom1=g1, geom2=g2, signature=(b1 << 16) + b2, dim=condim, friction=vec(p, "friction", 5, _FRICTION),
            solref=vec(p, "solref", 2, _SOLREF), solreffriction=vec(p, "solreffriction", 2, (0.0, 0.0)),
            solimp=vec(p, "solimp", 5, _SOLIMP), margin=float(get(p, "margin", 0.0)), gap=float(get(p, "gap", 0.0)),
            adhesion=float(get(p, "adhesion", 0.0)),
        ))  # fmt: skip
    rows.sort(key=lambda r: r["signature"])  # stable
    register_all(ctx, "pair", [r["el"] for r in rows])
    n = len(rows)

    def col(key, dtype, shape=()):
        return np.array([r[key] for r in rows], dtype=dtype).reshape((n,) + shape)

    ctx.arrays.update(
        pair_dim=col("dim", np.int32), pair_geom1=col("geom1", np.int32), pair_geom2=col("geom2", np.int32),
        pair_signature=col("signature", np.int32), pair_friction=col("friction", float, (5,)),
        pair_solref=col("solref", float, (2,)), pair_solreffriction=col("solreffriction", float, (2,)),
        pair_solimp=col("solimp", float, (5,)), pair_margin=col("margin", float), pair_gap=col("gap", float),
        pair_adhesion=col("adhesion", float),
    )  # fmt: skip
    ctx.sizes["npair"] = n

    ex = []
    for e in excludes:
        b1 = ctx.id_of("body", _req(e, "body1"), e, "body1")
        b2 = ctx.id_of("body", _req(e, "body2"), e, "body2")
        b1, b2 = min(b1, b2), max(b1, b2)
        ex.append((e, (b1 << 16) + b2))
    ex.sort(key=lambda r: r[1])
    register_all(ctx, "exclude", [e for e, _ in ex])
    ctx.arrays["exclude_signature"] = np.array([s for _, s in ex], np.int32)
    ctx.sizes["nexclude"] = len(ex)


def _req(el, name: str) -> str:
    v = get(el, name)
    if v is None:
        raise error(el, "missing required attribute", name)
    return v
