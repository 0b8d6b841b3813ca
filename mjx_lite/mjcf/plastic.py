"""Plastic springs (MuJoCo 4.0 `springyield` of joints and tendons): the layout of `mjData.plastic` and keyframes.

A joint or tendon with springyield > 0 keeps its spring reference in the mutable state vector `Data.plastic`
(`pipeline/plastic.py` updates it after each step): 1 entry for a slide or hinge joint (initialised from
qpos_spring), 4 for a ball joint (its reference quaternion), 2 for a tendon (the dead band [lower, upper] of
tendon_lengthspring). Joints come first in joint order, then tendons (as MuJoCo lays them out). Free joints refuse
springyield (MuJoCo's compile error). `<key plastic>` gives a keyframe's values: a short array is completed from
the initial values, a long one is an error, ball quaternions are normalised.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.data import PLASTIC_WIDTH, plastic_source
from mjx_lite.mjcf import attrs as at
from mjx_lite.mjcf.context import CompileContext


def compile_plastic(ctx: CompileContext) -> None:
    """jnt_plasticadr, tendon_plasticadr, nplastic and key_plastic (after set_const: tendon_lengthspring resolved)."""
    A, S = ctx.arrays, ctx.sizes
    jtype = np.asarray(A.get("jnt_type", np.zeros(0, int)), int)
    jyield = np.asarray(A.get("jnt_springyield", np.zeros(len(jtype))), float)
    tyield = np.asarray(A.get("tendon_springyield", np.zeros(0)), float)
    n = 0
    jadr = np.full(len(jtype), -1, np.int32)
    for j in np.nonzero(jyield > 0)[0]:
        jadr[j] = n
        n += PLASTIC_WIDTH[int(jtype[j])]
    tadr = np.full(len(tyield), -1, np.int32)
    for t in np.nonzero(tyield > 0)[0]:
        tadr[t] = n
        n += 2
    A["jnt_plasticadr"], A["tendon_plasticadr"] = jadr, tadr
    nspring = n
    fadr = np.full(len(np.asarray(A.get("flex_dim", np.zeros(0)))), -1, np.int32)
    for f, ne in enumerate(_rod_edges(A)):  # elastic rods: 6 per edge (reference frame), 1 per interior vertex
        if ne:
            fadr[f] = n
            n += 6 * ne + ne - 1
    A["flex_plasticadr"] = fadr
    S["nplastic"] = n
    ls = np.asarray(A.get("tendon_lengthspring", np.zeros((len(tyield), 2))), float).reshape(-1, 2)
    qs = np.asarray(A.get("qpos_spring", np.zeros(0)), float)
    src = plastic_source(jtype, A.get("jnt_qposadr", np.zeros(0, int)), jadr, tadr, len(qs), n)
    init = np.concatenate([np.concatenate([qs, ls.reshape(-1)])[src], np.zeros(n - nspring)])
    keys = ctx.elements.get("key", [])
    rows = np.tile(init, (len(keys), 1))
    for i, k in enumerate(keys):
        v = None if k is None else k.attrs.get("plastic")
        if v is None:
            continue
        if k.keysource is not None:
            raise at.unsupported(k, "plastic state in a keyframe of an attached model", "plastic")
        v = np.atleast_1d(np.asarray(v, float))
        if v.size > n:
            raise at.error(k, f"keyframe {i}: invalid plastic size, expected length {n}", "plastic")
        rows[i, : v.size] = v
    for j in np.nonzero((jadr >= 0) & (jtype == 1))[0]:  # ball references: unit quaternions (identity if ~0)
        q = rows[:, jadr[j] : jadr[j] + 4]
        norm = np.linalg.norm(q, axis=1, keepdims=True)
        rows[:, jadr[j] : jadr[j] + 4] = np.where(norm > 1e-15, q / np.where(norm > 0, norm, 1), [1.0, 0, 0, 0])
    A["key_plastic"] = rows.reshape(len(keys), n)


def _rod_edges(A: dict) -> list[int]:
    """Per flex, the number of edges of an elastic rod with twist joints (a dim 1 flex whose flex_bending has
    hinges), else 0."""
    out = []
    for f, dim in enumerate(np.asarray(A.get("flex_dim", np.zeros(0)), int)):
        badr = int(np.asarray(A["flex_bendingadr"])[f])
        rod = dim == 1 and badr >= 0 and len(A["flex_bending"]) > badr and A["flex_bending"][badr] > 0
        out.append(int(np.asarray(A["flex_edgenum"])[f]) if rod else 0)
    return out
