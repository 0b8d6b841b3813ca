"""The contact parameters of the fused colliders' pairs (mj_contactParam) as one Pallas kernel.

The collider kernel (kernels/collide.py) computes the geometry of the covered groups' rows (dist, pos, frame,
active), which depends on the environment; the rows' parameters depend on the Model alone: the detection margin of
each pair (margin + gap, the collider's input) and, per row, includemargin, friction (5), solref, solimp, and
solreffriction and adhesion where the model has explicit pairs or adhesion. On the XLA path they are
`collision.driver`'s `_params` (mixed by priority and solmix, or the explicit pair's own, `opt.o_*` under the
override flag, friction clamped at MINMU): a few hundred small operations per model (gathers of the geoms' values,
the mixing's selects, the per-row repeats), as many as the collisions themselves on a model of two groups. Here
they are one kernel: a loop over the covered pairs for their detection margins and one over the covered rows (each
row's pair from a table) for the rest, written per lane.

Under the usual `jax.vmap(step, in_axes=(None, 0))` the Model is shared, so the kernel's inputs have no environment
axis and it launches once with one lane; its outputs stay shared (the rows kernel reads them as scalars) and vmap
broadcasts them into Data.contact as on the XLA path. A vmapped Model (domain randomisation) makes them
per-environment inputs and outputs (the launch's custom_vmap rule).

Priorities, condims and the explicit pairs' ids are static: tables. Derivatives go through the XLA twin
(`driver.covered_params` at the kernel's inputs, kernels/launch.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver
from mjx_lite.pipeline import support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MINMU, MINVAL, EnableBit, Model

__all__ = ["call", "kernel", "plan"]

# the per-row outputs besides includemargin (their sizes per row)
_ROW = {"friction": 5, "solref": 2, "solimp": 5}


def _plan(m: Model, covered: tuple) -> tuple[dict, dict]:
    """(tables, info) for the covered groups (indices into driver.pair_table(m).groups, in order): per pair geom1,
    geom2, explicit pair id (-1: dynamic) and priority code (0 equal, 1 geom1's higher, 2 geom2's); per row its pair
    (into the covered pairs). info: npair, nrows, whether there are dynamic and explicit pairs, each group's (first
    row, first pair)."""
    groups = driver.pair_table(m).groups
    g1, g2, pid, row_pair, starts = [], [], [], [], {}
    npair = nrow = 0
    for i in covered:
        g = groups[i]
        n = len(g.geom1)
        starts[i] = (nrow, npair)
        g1.append(np.asarray(g.geom1))
        g2.append(np.asarray(g.geom2))
        pid.append(np.broadcast_to(np.asarray(g.pair), (n,)))
        row_pair.append(npair + np.repeat(np.arange(n), g.nrows // n))
        npair, nrow = npair + n, nrow + g.nrows
    g1, g2, pid = (np.concatenate(a).astype(np.int32) for a in (g1, g2, pid))
    prio = np.asarray(m.geom_priority)
    code = np.where(prio[g1] > prio[g2], 1, np.where(prio[g2] > prio[g1], 2, 0)).astype(np.int32)
    tables = dict(g1=g1, g2=g2, pid=pid, code=code, row_pair=np.concatenate(row_pair).astype(np.int32))
    info = dict(npair=npair, nrows=nrow, dynamic=bool((pid < 0).any()), explicit=bool((pid >= 0).any()),
                starts=starts)  # fmt: skip
    return tables, info


def plan(m: Model, covered: tuple) -> tuple[dict, dict]:
    """`_plan`, memoised per model (`covered` is the model's: kernels/collide.py's `covered(m)`)."""
    return support.memo(m, "kernels_contact_params", lambda m: _plan(m, covered))


def _override(m: Model) -> bool:
    return bool(m.opt.enableflags & EnableBit.OVERRIDE)


def _inputs(m: Model, info: dict) -> dict:
    """The Model floats the kernel reads (in their shapes: shared inputs are read by flat index, launch.IO): under
    the override flag opt.o_* in place of the pairs' margins, friction, solref and solimp."""
    override = _override(m)
    x = {}
    if info["dynamic"]:
        x["geom_gap"] = m.geom_gap
        if not override:
            x.update(geom_margin=m.geom_margin, geom_solmix=m.geom_solmix, geom_solref=m.geom_solref,
                     geom_solimp=m.geom_solimp, geom_friction=m.geom_friction)  # fmt: skip
        if m.flg_adhesion:
            x["geom_adhesion"] = m.geom_adhesion
    if info["explicit"]:
        x.update(pair_gap=m.pair_gap, pair_solreffriction=m.pair_solreffriction)
        if not override:
            x.update(pair_margin=m.pair_margin, pair_friction=m.pair_friction, pair_solref=m.pair_solref,
                     pair_solimp=m.pair_solimp)  # fmt: skip
        if m.flg_adhesion:
            x["pair_adhesion"] = m.pair_adhesion
    if override:
        x.update(o_margin=m.opt.o_margin.reshape(1), o_solref=m.opt.o_solref.reshape(-1),
                 o_solimp=m.opt.o_solimp.reshape(-1), o_friction=m.opt.o_friction.reshape(-1))  # fmt: skip
    return x


def _outputs(m: Model, info: dict) -> dict:
    n = info["nrows"]
    out = {"margin": (info["npair"],), "includemargin": (n,), **{k: (n * s,) for k, s in _ROW.items()}}
    if info["explicit"]:
        out["solreffriction"] = (n * 2,)
    if m.flg_adhesion:
        out["adhesion"] = (n,)
    return out


def _body(m: Model, info: dict):
    override = _override(m)

    def body(io):
        tab = io.table

        def flag(b):
            return io.lanes(jp.asarray(b).astype(io.dtype)) > 0.5

        def vec(name, i, n):
            return tuple(io.lanes(v) for v in io.read_vec(name, i, n))

        def lane(name, i):
            return io.lanes(io.read(name, i))

        def margins(p):
            """(margin, gap) of pair p: the two geoms' sums or the explicit pair's, o_margin under the override."""
            g1, g2, pid = tab("g1", p), tab("g2", p), tab("pid", p)
            if info["dynamic"]:
                dm = None if override else lane("geom_margin", g1) + lane("geom_margin", g2)
                dg = lane("geom_gap", g1) + lane("geom_gap", g2)
            if info["explicit"]:
                k = jp.maximum(pid, 0)
                em, eg = None if override else lane("pair_margin", k), lane("pair_gap", k)
            if info["dynamic"] and info["explicit"]:
                ex = flag(pid >= 0)
                margin, gap = None if override else where(ex, em, dm), where(ex, eg, dg)
            elif info["dynamic"]:
                margin, gap = dm, dg
            else:
                margin, gap = em, eg
            if override:
                margin = lane("o_margin", 0)
            return margin, gap

        def pair_margin(p, c):
            margin, gap = margins(p)
            io.write("margin", p, margin + gap)
            return c

        jax.lax.fori_loop(np.int32(0), np.int32(info["npair"]), pair_margin, np.int32(0))

        def code(p):
            c = tab("code", p)
            hi1, hi2 = flag(c == 1), flag(c == 2)
            return hi1, hi2, ~(hi1 | hi2)

        def mixed(p):
            """Dynamic pair p: (friction (5), solref, solimp) as types.mix_params / driver._mix_params."""
            g1, g2 = tab("g1", p), tab("g2", p)
            hi1, hi2, same = code(p)
            s1, s2 = lane("geom_solmix", g1), lane("geom_solmix", g2)
            big1, big2 = s1 >= MINVAL, s2 >= MINVAL
            both = big1 & big2
            dt = io.dtype
            mix = where(both, s1 / where(both, s1 + s2, 1.0),
                        where(~big1 & ~big2, 0.5, where(~big1, 0.0, 1.0, dt), dt))  # fmt: skip
            mix = where(hi1, 1.0, where(hi2, 0.0, mix))
            r1, r2 = vec("geom_solref", g1, 2), vec("geom_solref", g2, 2)
            both_std = (r1[0] > 0) & (r2[0] > 0)
            blend = both_std | ~same
            solref = tuple(where(blend, mix * a + (1 - mix) * b, jp.minimum(a, b)) for a, b in zip(r1, r2))
            i1, i2 = vec("geom_solimp", g1, 5), vec("geom_solimp", g2, 5)
            solimp = tuple(mix * a + (1 - mix) * b for a, b in zip(i1, i2))
            f1, f2 = vec("geom_friction", g1, 3), vec("geom_friction", g2, 3)
            fr = tuple(where(same, jp.maximum(a, b), where(hi1, a, b)) for a, b in zip(f1, f2))
            return (fr[0], fr[0], fr[1], fr[2], fr[2]), solref, solimp

        def adhesion(p):
            """The pair's adhesion: the explicit pair's, else the two geoms' sum or the higher priority's."""
            hi1, _, same = code(p)
            if info["dynamic"]:
                a1, a2 = lane("geom_adhesion", tab("g1", p)), lane("geom_adhesion", tab("g2", p))
                dyn = where(same, a1 + a2, where(hi1, a1, a2))
            if not info["explicit"]:
                return dyn
            exp = lane("pair_adhesion", jp.maximum(tab("pid", p), 0))
            return where(flag(tab("pid", p) >= 0), exp, dyn) if info["dynamic"] else exp

        def row(r, c):
            p = tab("row_pair", r)
            margin, _ = margins(p)
            k = jp.maximum(tab("pid", p), 0)
            ex = flag(tab("pid", p) >= 0)
            if override:  # adhesion and solreffriction stay the pair's
                fr, solref, solimp = vec("o_friction", 0, 5), vec("o_solref", 0, 2), vec("o_solimp", 0, 5)
            else:
                if info["dynamic"]:
                    fr, solref, solimp = mixed(p)
                if info["explicit"]:
                    efr, esolref = vec("pair_friction", k, 5), vec("pair_solref", k, 2)
                    esolimp = vec("pair_solimp", k, 5)
                if info["dynamic"] and info["explicit"]:
                    fr, solref, solimp = ((tuple(where(ex, a, b) for a, b in zip(e, d_)))
                                          for e, d_ in ((efr, fr), (esolref, solref), (esolimp, solimp)))  # fmt: skip
                elif info["explicit"]:
                    fr, solref, solimp = efr, esolref, esolimp
            io.write("includemargin", r, margin)
            io.write_vec("friction", r, tuple(jp.maximum(f, MINMU) for f in fr))
            io.write_vec("solref", r, solref)
            io.write_vec("solimp", r, solimp)
            if info["explicit"]:
                sfr = vec("pair_solreffriction", k, 2)
                io.write_vec("solreffriction", r, tuple(where(ex, a, 0.0) for a in sfr) if info["dynamic"] else sfr)
            if m.flg_adhesion:
                io.write("adhesion", r, adhesion(p))
            return c

        jax.lax.fori_loop(np.int32(0), np.int32(info["nrows"]), row, np.int32(0))

    return body


def _twin(m: Model, covered: tuple, info: dict):
    """The XLA twin: `driver.covered_params` of the covered groups at the kernel's inputs."""
    groups = driver.pair_table(m).groups

    def xla(x):
        # every other traced field as zeros (adhesion without the flag, the mixed ones under the override flag): the
        # twin, a custom_jvp rule, reads no array of the Model it closes over (launch.detach, launch.call)
        m2 = launch.detach(m, {n: v.reshape(jp.shape(getattr(m, n))) for n, v in x.items() if not n.startswith("o_")})
        if _override(m):
            m2 = m2.replace(opt=m2.opt.replace(o_margin=x["o_margin"].reshape(()), o_solref=x["o_solref"],
                                               o_solimp=x["o_solimp"], o_friction=x["o_friction"]))  # fmt: skip
        params = driver.covered_params(m2, {i: groups[i] for i in covered})
        dt = next(iter(x.values())).dtype
        out = {k: [] for k in _outputs(m, info)}
        for i in covered:
            g = groups[i]
            _, margin, gap, friction, solref, solreffriction, solimp, adhesion = params[i]
            k = g.nrows // len(g.geom1)
            n = len(g.geom1)

            def rep_(v, n=n, k=k):
                return jp.repeat(jp.broadcast_to(v, (n,) + jp.shape(v)[1:]), k, axis=0)

            out["margin"].append(jp.broadcast_to(margin + gap, (n,)))
            out["includemargin"].append(rep_(margin))
            for name, v in (("friction", friction), ("solref", solref), ("solimp", solimp),
                            ("solreffriction", solreffriction), ("adhesion", adhesion)):  # fmt: skip
                if name in out:
                    out[name].append(rep_(v).reshape(-1))
        return {k: jp.concatenate(v).astype(dt) for k, v in out.items()}

    return xla


def kernel(m: Model, covered: tuple) -> tuple[launch.Kernel, dict]:
    """The covered groups' contact parameters as a `launch.Kernel` and its inputs."""
    tables, info = plan(m, covered)
    x = _inputs(m, info)
    k = launch.Kernel("contact_params", {n: tuple(v.shape) for n, v in x.items()}, _outputs(m, info), tables,
                      _body(m, info), _twin(m, covered, info))  # fmt: skip
    return k, x


def call(m: Model, covered: tuple, how: launch.Launch) -> dict:
    """The covered groups' contact parameters (see the module doc): margin (npair,) (detection: margin + gap),
    includemargin (nrows,), friction (nrows, 5), solref (nrows, 2), solimp (nrows, 5), and solreffriction (nrows, 2)
    and adhesion (nrows,) when the model has explicit pairs / adhesion among them."""
    k, x = kernel(m, covered)
    dtype = jp.result_type(*x.values())
    out = launch.call(k, {n: v.astype(dtype) for n, v in x.items()}, how)
    shapes = {"friction": (-1, 5), "solref": (-1, 2), "solimp": (-1, 5), "solreffriction": (-1, 2)}
    return {n: v.reshape(shapes[n]) if n in shapes else v for n, v in out.items()}
