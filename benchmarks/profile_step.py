"""Where a batched step's time and compile cost go, per pipeline stage, from XLA's own profile.

    python benchmarks/profile_step.py [--model PATH] [--batch 4096] [--depth 2] [--steps 4] [--disable constraint]
                                      [--kernels auto|xla|fused]

`jit(vmap(scan(step)))` of the model over `steps` steps (default: the MJX humanoid after 50 MuJoCo steps,
float32) is compiled and run under `jax.profiler`; every kernel of the compiled program is attributed to its
stage by the named scopes the pipeline puts in op names (`pipeline.forward.run`). Printed per stage: kernels
(XLA compiles each on its own), milliseconds per step (device time of its kernels, mean of 3 profiled calls,
divided by `steps`) and milliseconds of XLA's per-fusion code generation in the compile (summed over compiler
threads). With `--steps 1` the step is jitted alone: its outputs are then fresh buffers, so XLA adds a copy of
every Data field the step does not rewrite, which a rollout's loop does not pay.
"""

from __future__ import annotations

import argparse
import collections
import functools
import glob
import gzip
import json
import operator
import os
import re
import tempfile
import time

import jax
import jax.numpy as jp
import stages  # benchmarks/ is on the path (run as a script, or by report.py)

import mjx_lite as mjl

# a cached executable would carry the op names of whatever code compiled it first (names are not in the cache key)
jax.config.update("jax_enable_compilation_cache", False)

HUMANOID = stages.PATH
_SKIP_OPS = ("parameter", "constant", "get-tuple-element", "tuple", "bitcast", "copy-start", "copy-done")


def _stage(op_name: str, depth: int) -> str:
    """The named-scope path of an op name (transformation frames such as `vmap(...)`, loop frames and the
    primitive removed; `vmap(forward)` counts as `forward`), cut at `depth` levels."""
    parts = []
    for p in op_name.split("/")[1:-1]:  # [0]: jit(<the jitted function>)
        inner = re.fullmatch(r"\w+\(([a-z_0-9]*)\)", p)
        p = inner.group(1) if inner else p
        if re.fullmatch(r"[a-z_0-9]+", p) and p not in ("while", "body", "cond", "scan", "jit", "vmap", "closed_call"):
            parts.append(p)
    return "/".join(parts[:depth]) or ("(no op name: copies XLA added)" if not op_name else "(top)")


def _kernels(hlo: str) -> dict[str, str]:
    """instruction name -> op_name of every instruction of the optimised HLO that runs as its own kernel: those of
    the entry and of loop bodies and conditions, not the insides of fusions or reductions."""
    out, inside = {}, False
    for line in hlo.splitlines():
        head = re.match(r"(ENTRY )?%([\w.\-]+) ", line)
        if head:  # a computation's header: kernels live in the entry and in loop regions
            inside = bool(head.group(1)) or re.match(r"(wide\.)*region_", head.group(2)) is not None
            continue
        m = re.match(r"\s*(?:ROOT )?%([\w.\-]+) = .*? ([\w\-]+)\(", line)
        if not inside or not m or m.group(2) in _SKIP_OPS:
            continue
        op = re.search(r'op_name="([^"]*)"', line)
        out[m.group(1)] = op.group(1) if op else ""
    return out


def _events(fn) -> list[dict]:
    """The complete ("X") events of a perfetto trace of fn(); on a GPU only those of the device's streams (the host
    also logs each launch under the kernel's name)."""
    with tempfile.TemporaryDirectory() as out:
        with jax.profiler.trace(out, create_perfetto_trace=True):
            fn()
        trace = json.load(gzip.open(glob.glob(out + "/**/*.trace.json.gz", recursive=True)[0]))
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    procs = {e.get("pid"): str(e.get("args", {}).get("name", "")) for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = {pid for pid, name in procs.items() if "/device:GPU" in name or "/device:TPU" in name}
    return [e for e in events if e.get("ph") == "X" and (not device or e.get("pid") in device)]


def _kernel_of(e: dict) -> str:
    """The HLO instruction an event ran: GPU kernels carry it as `hlo_op`, XLA:CPU names the event after it."""
    return str(e.get("args", {}).get("hlo_op") or e["name"])


def profile(path: str, batch: int, depth: int, top: int = 0, steps: int = 4, disable: tuple = (),
            kernels: str = "auto") -> list[tuple[str, int, float, float]]:  # fmt: skip
    """Rows (stage, kernels, ms per step, ms of XLA's per-fusion code generation), by decreasing ms per step; with
    `top`, also prints the `top` slowest kernels with their op names. disable: MuJoCo disable flag names; kernels:
    `Config.kernels` (a fused kernel is one kernel of its stage)."""
    _, mjd, m, d = stages.forwarded_state(path)
    m = mjl.configure(m, kernels=kernels)
    if disable:
        bits = functools.reduce(operator.or_, (int(getattr(mjl.types.DisableBit, f.upper())) for f in disable))
        m = mjl.configure(m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | bits)))
        d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos, jp.float32), qvel=jp.asarray(mjd.qvel, jp.float32))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)

    def rollout(m, d):
        return jax.lax.scan(lambda c, _: (mjl.step(m, c), None), d, length=steps)[0]

    g = jax.jit(jax.vmap(mjl.step if steps == 1 else rollout, in_axes=(None, 0)))
    lowered = g.lower(m, db)
    box = {}
    compile_events = _events(lambda: box.update(c=lowered.compile()))
    kernels = _kernels(box["c"].as_text())
    jax.block_until_ready(g(m, db))

    def run3():
        for _ in range(3):
            jax.block_until_ready(g(m, db))

    wall = float("inf")  # best of 3 unprofiled calls, ms per step
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(g(m, db))
        wall = min(wall, (time.perf_counter() - t) * 1e3 / steps)

    ms, cms, per_kernel = collections.Counter(), collections.Counter(), collections.Counter()
    for e in _events(run3):
        k = _kernel_of(e)
        if k in kernels:
            ms[_stage(kernels[k], depth)] += e.get("dur", 0) / 3e3 / steps
            per_kernel[k] += e.get("dur", 0) / 3e3 / steps
    for k, t in per_kernel.most_common(top):
        print(f"{t:8.3f} ms  {k:40s} {kernels[k][-110:]}")
    for e in compile_events:  # XLA:CPU compiles each fusion on its own (MLIR, then LLVM); named by instruction
        name = re.sub(r"^__compute_module_|_kernel_module$", "", str(e.get("args", {}).get("module")))
        if e["name"] == "FusionCompiler::Compile" and name in kernels:
            cms[_stage(kernels[name], depth)] += e.get("dur", 0) / 1e3
    count = collections.Counter(_stage(op, depth) for op in kernels.values())
    rows = [(k, count[k], ms[k], cms[k]) for k in set(count) | set(ms)]
    return sorted(rows, key=lambda r: -r[2]), wall


def _table(rows) -> list[str]:
    return [
        "| stage | kernels | ms per step | codegen ms |",
        "| --- | --- | --- | --- |",
        *[f"| {k} | {n} | {t:.2f} | {c:.0f} |" for k, n, t, c in rows],
        f"| total | {sum(r[1] for r in rows)} | {sum(r[2] for r in rows):.2f} | {sum(r[3] for r in rows):.0f} |",
    ]


def report(quick: bool = False, batch: int = 4096, steps: int = 4) -> str:
    """Markdown section of docs/benchmarks.md (the humanoid, contacts on and constraints off; --quick: batch 64)."""
    batch = 64 if quick else batch
    out = [
        "### Where a rollout step's time goes (XLA profile, humanoid, float32)",
        "",
        f"`python benchmarks/profile_step.py --batch {batch} --steps {steps} --depth 3 [--disable constraint]` "
        f"({os.cpu_count()} cores, jax {jax.__version__}, {jax.default_backend()}): `jit(vmap(scan(step)))` over "
        f"{steps} steps at batch {batch}, each kernel of the compiled program attributed to its stage by the named "
        "scopes in its op name. kernels: XLA compiles each on its own; ms per step: the kernels' time from "
        "`jax.profiler` (mean of 3 calls, divided by the steps; profiling adds overhead to every kernel, so the "
        "total exceeds the unprofiled wall time given with each table); codegen ms: XLA's per-fusion code "
        "generation (MLIR) time in the profiled compile, summed over threads (LLVM's final codegen of the whole "
        "module is not per stage). Copies and matrix-vector products that XLA rewrites lose their op names and are "
        "counted apart.",
    ]
    for label, disable in (("contacts on, the model's own settings", ()), ("constraints off", ("constraint",))):
        rows, wall = profile(HUMANOID, batch, 3, steps=steps, disable=disable)
        out += ["", f"{label}: unprofiled wall time {wall:.2f} ms per step", "", *_table(rows)]
    return "\n".join(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default=HUMANOID)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--depth", type=int, default=2, help="named-scope levels to group by")
    p.add_argument("--top", type=int, default=0, help="also print this many slowest kernels with their op names")
    p.add_argument("--steps", type=int, default=4, help="steps of the profiled scan (1: the step jitted alone)")
    p.add_argument("--disable", nargs="*", default=[], help="MuJoCo disable flags, e.g. constraint")
    p.add_argument("--kernels", default="auto", choices=("auto", "xla", "fused"), help="Config.kernels")
    a = p.parse_args()
    rows, wall = profile(a.model, a.batch, a.depth, a.top, a.steps, tuple(a.disable), a.kernels)
    print(f"{os.path.basename(a.model)}, batch {a.batch}, {a.steps} steps, kernels {a.kernels}, {os.cpu_count()} "
          f"cores, jax {jax.__version__} on {jax.devices()[0].platform}; unprofiled wall time {wall:.2f} ms per step")
    print(f"{'stage':50s} {'kernels':>8s} {'ms/step':>8s} {'codegen ms':>11s}")
    for k, n, t, c in rows:
        print(f"{k:50s} {n:8d} {t:8.2f} {c:11.0f}")
    print(f"{'total':50s} {sum(r[1] for r in rows):8d} {sum(r[2] for r in rows):8.2f} {sum(r[3] for r in rows):11.0f}")


if __name__ == "__main__":
    main()
