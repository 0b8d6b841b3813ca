"""Trace + compile CPU seconds of each collision pair group of a model, alone, and of the whole collision stage
(issue 43: the Shadow Hand's step compile is a sum over its heavy groups).

    MJX_LITE_COMPILATION_CACHE=0 python benchmarks/collision_groups.py FILE.xml [--batch 4] [--groups 0 21]
        [--programs] [--stage] [--step] [--run] [--xla xla_cpu_use_fusion_emitters=false ...]

Per group: `jax.jit(jax.vmap(f))` of that group's `_run_group` alone at `--batch` (float64), traced, lowered and
compiled; CPU seconds of the process (getrusage: all threads, so XLA's parallel codegen counts in full).
--programs: instead of the groups, the programs the collision stage is made of (a group alone misses the stages that
groups of one kind share, `driver._distance_kind`): each shared distance stage over its groups, that stage with its
shared manifold, each remaining mesh group (plane-mesh, box-mesh, mesh-mesh), and the other groups together.
--merge: `Config.merge_curved_mesh` (one GJK/EPA and one manifold program for the curved and mesh kinds; off by
default: bitwise the same contacts, less compile, slower steps). --stage: the whole collision stage; --step: the
whole step; --run: steps/s of the compiled step at batch 1 and 64 (each batch compiled). --xla: XLA compiler
options for every compile (`Lowered.compile(compiler_options=...)`, the same as `jax.jit(...,
compiler_options=...)`; e.g. xla_backend_optimization_level=0).
Measured (issue 43, Shadow Hand scene_right.xml, float64, whole step, one process, load 6-9 on 2 cores):
xla_cpu_use_fusion_emitters=false compiled batch 1 in 104.5 instead of 172.2 CPU-s (11.0 vs 11.9 steps/s) and
batch 64 in 164.3 instead of 198.1 CPU-s, but ran batch 64 at 8.6 instead of 13.1 env-steps/s: no free lever.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")

import jax

jax.config.update("jax_enable_x64", True)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mujoco  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver  # noqa: E402
from tests.menagerie import batch_of, oracle_states  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, m, db, options: dict | None = None) -> tuple[float, float, object]:
    """(trace + lower CPU s, compile CPU s, compiled) of jax.jit(jax.vmap(fn, (None, 0))) under XLA `options`."""
    f = jax.jit(jax.vmap(fn, in_axes=(None, 0)))
    c0 = _cpu()
    lowered = f.lower(m, db)
    c1 = _cpu()
    compiled = lowered.compile(compiler_options=options) if options else lowered.compile()
    return c1 - c0, _cpu() - c1, compiled


def _option(text: str) -> tuple[str, object]:
    key, value = text.split("=", 1)
    low = value.lower()
    return key, low == "true" if low in ("true", "false") else int(value) if value.lstrip("-").isdigit() else value


def name(g: driver.Group) -> str:
    t = {int(v): v.name.lower() for v in mjl.types.GeomType}
    fn = getattr(g.collider, "func", g.collider)
    return f"{t.get(g.type1, 'general')}-{t.get(g.type2, 'general')} ({fn.__name__}, {len(g.geom1)} pairs)"


def programs(m) -> dict:
    """{name: f(m, d)} of the collision stage's programs (`--programs`), each run as `driver.collision` runs it."""
    groups = driver.pair_table(m).groups

    def prep(m, d, sel):
        run = {i: groups[i] for i in sel}
        params = driver._all_params(m, run)
        nears = driver._all_near(m, d, run, params)
        return run, {i: driver._candidates(m, d, g, params[i], nears[i]) for i, g in run.items()}

    def shared(sel, manifold):
        def f(m, d):
            run, cands = prep(m, d, sel)
            dist = driver._shared_distances(m, d, run, cands)
            return driver._shared_manifolds(m, d, run, cands, dist) if manifold else dist

        return f

    def alone(sel):
        def f(m, d):
            run, cands = prep(m, d, sel)
            return [driver._run_group(m, d, g, cands[i], frames=False)[0]["dist"] for i, g in run.items()]

        return f

    kinds: dict = {}
    for i, g in enumerate(groups):
        kinds.setdefault(driver._distance_kind(g), []).append(i)
    out = {}
    if m.config.merge_curved_mesh and driver._CURVED in kinds and driver._MESH_GJK in kinds:  # `--merge`: one program
        both = sorted(kinds.pop(driver._CURVED) + kinds.pop(driver._MESH_GJK))
        out[f"curved+mesh distance ({len(both)} groups)"] = shared(both, False)
        man = [i for i in both + kinds.get(driver._CAPSULE_MESH, []) if groups[i].collider in driver._MANIFOLDS]
        out[f"curved+mesh distance + manifold ({len(man)} groups)"] = shared(sorted(man), True)
    for kind in (driver._CURVED, driver._MESH_GJK, driver._CAPSULE_MESH):
        if kind in kinds:
            out[f"{kind} distance ({len(kinds[kind])} groups)"] = shared(kinds[kind], False)
            man = [i for i in kinds[kind] if groups[i].collider in driver._MANIFOLDS]
            if man:
                out[f"{kind} distance + manifold ({len(man)} groups)"] = shared(man, True)
    mesh_type = int(mjl.types.GeomType.MESH)
    rest = []
    for i in kinds.get(None, []):
        if mesh_type in (groups[i].type1, groups[i].type2):
            out[f"group {i} {name(groups[i])}"] = alone([i])
        else:
            rest.append(i)
    if rest:
        out[f"the other {len(rest)} groups"] = alone(rest)
    return out


def steps_per_s(compiled, m, db, seconds: float = 3.0) -> float:
    out = jax.block_until_ready(compiled(m, db))
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        out = compiled(m, out)
        n += 1
    jax.block_until_ready(out)
    return n * db.qpos.shape[0] / (time.perf_counter() - t0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--groups", nargs="*", type=int, help="group indices (default: all)")
    p.add_argument("--programs", action="store_true", help="the collision stage's programs instead of the groups")
    p.add_argument("--stage", action="store_true")
    p.add_argument("--step", action="store_true")
    p.add_argument("--run", action="store_true")
    p.add_argument("--xla", nargs="*", default=[], help="XLA compiler options KEY=VALUE")
    p.add_argument("--merge", action="store_true", help="Config.merge_curved_mesh: curved and mesh GJK/EPA as one")
    a = p.parse_args()
    opts = dict(_option(x) for x in a.xla) or None
    mjm = mujoco.MjModel.from_xml_path(a.file)
    m = mjl.configure(mjl.load_mjcf(a.file), merge_curved_mesh=a.merge)
    states = oracle_states(mjm)
    db = batch_of(mjl.make_data(m), states, a.batch)
    table = driver.pair_table(m)
    print(f"load {os.getloadavg()[0]:.1f}; {len(table.groups)} groups; compiler options {opts}", flush=True)
    total = 0.0
    if a.programs:
        for label, fn in programs(m).items():
            tr, co, _ = timed(fn, m, db, opts)
            total += tr + co
            print(f"{label:60s} {tr:6.1f} + {co:6.1f} CPU-s (load {os.getloadavg()[0]:.1f})", flush=True)
        print(f"programs total {total:.1f} CPU-s", flush=True)
    for i in [] if a.programs else a.groups if a.groups is not None else range(len(table.groups)):
        g = table.groups[i]
        tr, co, _ = timed(lambda m, d, g=g: driver._run_group(m, d, g)[0], m, db, opts)
        total += tr + co
        print(f"group {i:2d} {name(g):60s} {tr:6.1f} + {co:6.1f} CPU-s", flush=True)
    if not a.programs:
        print(f"groups total {total:.1f} CPU-s", flush=True)
    if a.stage:
        tr, co, _ = timed(lambda m, d: driver.collision(m, d).contact, m, db, opts)
        print(f"collision stage {tr:.1f} + {co:.1f} CPU-s", flush=True)
    if a.step or a.run:
        tr, co, compiled = timed(mjl.step, m, db, opts)
        print(f"step {tr:.1f} + {co:.1f} CPU-s", flush=True)
    if a.run:
        for b in (1, 64):
            dbb = batch_of(mjl.make_data(m), states, b)
            _, _, c = timed(mjl.step, m, dbb, opts) if b != a.batch else (0, 0, compiled)
            print(f"batch {b}: {steps_per_s(c, m, dbb):.1f} steps/s (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
