"""Marginal cost of the Newton solver's parts in a batched rollout: each part doubled, the difference timed.

    python benchmarks/solver_parts.py --model PATH [--batch 256] [--steps 20] [--warm 30] [--repeats 5]
                                      [--parts base,cholesky,hessian,line_search,library]

An XLA profile (`benchmarks/profile_step.py`) adds a fixed overhead to every kernel it records, so stages made of
many small kernels in loops (the Cholesky's row loops) look larger there than they run. Here the rollout is
compiled once per variant and timed without a profiler: "cholesky" solves every Newton system twice (H and
H (1 + 1e-7), the mean kept, so XLA cannot merge the two), "hessian" forms the constraint Hessian J' D J twice,
"line_search" runs every line search twice; the extra CPU seconds of a variant over "base" are that part's cost
in the step. "library" is `Config.linalg="library"` (JAX's batched LAPACK Cholesky; on the CPU for comparison
only, see `mjx_lite.linalg`). Variants patch `mjx_lite.linalg` / `mjx_lite.solver.common` at trace time only.

The batch: the model's `make_data` with qvel ~ 0.01 N(0, 1) (as `python -m mjx_lite.bench`), stepped `--warm`
steps first (so that contacts are on), float32, the model's own settings. Calls of the variants are interleaved
(`--repeats` rounds) and CPU seconds (`time.process_time`, all threads) are reported beside wall time: on a
loaded machine wall time swings, CPU time much less. The mean `solver_niter` shows the iterations are the same.

Measured 2026-12-01 (2-core CPU, load 8-11, float32; extra CPU seconds of the doubled part over base):
  dm_control hopper (nv 7), batch 256, 20 steps after 30: Cholesky -0.2 %, Hessian +6.0 %, line search +9.5 %,
    library -4.3 %; cheetah (nv 9, 222 padded rows), the same: Cholesky +0.4 %, Hessian +15 %, line search +3.6 %.
  dm_control humanoid (nv 27, 403 rows) in contact, batch 64, 10 steps after 150 (niter 1.16): Cholesky +25.8 %,
    Hessian +46.6 %, library +15 % CPU but 1.19x the best wall steps/s (JAX's batched LAPACK runs the batch on
    both cores). Below SEQUENTIAL_MIN_N the own row-loop Cholesky is as fast as batched LAPACK; at n = 27 the
    one-LAPACK-call-per-system path costs ~4x batched LAPACK's CPU (micro: 1.5 vs 0.4 ms per 256 solves).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite as mjl
from mjx_lite import linalg
from mjx_lite.solver import common

jax.config.update("jax_enable_compilation_cache", False)


def _twice_solve(orig):
    def f(a, b, *, library, mindiag=None):
        return 0.5 * (orig(a, b, library=library, mindiag=mindiag) + orig(a * (1 + 1e-7), b, library=library,
                                                                        mindiag=mindiag))  # fmt: skip

    return f


def _twice_hessian(orig):
    def f(layout, p, ev):
        ev2 = jax.tree.map(lambda x: x * (1 + 1e-7) if jp.issubdtype(x.dtype, jp.floating) else x, ev)
        return 0.5 * (orig(layout, p, ev) + orig(layout, p, ev2))

    return f


def _twice_line_search(orig):
    def f(layout, p, search, *args, **kw):
        r1, r2 = orig(layout, p, search, *args, **kw), orig(layout, p, search * (1 + 1e-7), *args, **kw)
        return jax.tree.map(lambda x, y: 0.5 * (x + y), r1, r2)

    return f


PATCHES = {"cholesky": (linalg, "spd_solve", _twice_solve), "hessian": (common, "constraint_hessian", _twice_hessian),
           "line_search": (common, "line_search", _twice_line_search)}  # fmt: skip


@contextlib.contextmanager
def _patched(part: str):
    if part not in PATCHES:
        yield
        return
    mod, name, wrap = PATCHES[part]
    orig = getattr(mod, name)
    setattr(mod, name, wrap(orig))
    try:
        yield
    finally:
        setattr(mod, name, orig)


def _rollout(m, d, n):
    return jax.lax.scan(lambda c, _: (mjl.step(m, c), c.solver_niter), d, None, length=n)


def run(path: str, batch: int, steps: int, warm: int, repeats: int, parts: list[str]) -> list[dict]:
    m = mjl.configure(mjl.load_mjcf(path))
    d = mjl.make_data(m)
    qvel = 0.01 * np.random.default_rng(0).standard_normal((batch, m.nv))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + jp.shape(x)), d)
    db = db.replace(qvel=jp.asarray(qvel, d.qvel.dtype))
    if warm:
        db, _ = jax.jit(jax.vmap(functools.partial(_rollout, n=warm), in_axes=(None, 0)))(m, db)
    rows = []
    for part in parts:
        mp = mjl.configure(m, linalg="library") if part == "library" else m
        with _patched(part):
            fn = jax.jit(jax.vmap(functools.partial(_rollout, n=steps), in_axes=(None, 0)))
            t0, c0 = time.perf_counter(), time.process_time()
            compiled = fn.lower(mp, db).compile()
            comp = (time.perf_counter() - t0, time.process_time() - c0)
        _, niter = jax.block_until_ready(compiled(mp, db))
        rows.append({"part": part, "fn": compiled, "m": mp, "compile": comp, "niter": float(np.mean(niter)),
                     "wall": [], "cpu": []})  # fmt: skip
    for _ in range(repeats):
        for r in rows:
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(r["fn"](r["m"], db))
            r["wall"].append(time.perf_counter() - t0)
            r["cpu"].append(time.process_time() - c0)
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warm", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--parts", default="base,cholesky,hessian,line_search,library")
    a = p.parse_args()
    parts = a.parts.split(",")
    rows = run(a.model, a.batch, a.steps, a.warm, a.repeats, parts)
    base = next((r for r in rows if r["part"] == "base"), rows[0])
    cpu0 = float(np.median(base["cpu"]))
    n = a.batch * a.steps
    print(f"{os.path.basename(a.model)}, batch {a.batch}, {a.steps} steps after {a.warm}, {os.cpu_count()} cores, "
          f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| variant | compile s (wall / CPU) | mean niter | steps/s (best wall) | CPU s per call (median) | "
          "extra CPU vs base |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        cpu = float(np.median(r["cpu"]))
        print(f"| {r['part']} | {r['compile'][0]:.1f} / {r['compile'][1]:.1f} | {r['niter']:.2f} | "
              f"{n / min(r['wall']):.0f} | {cpu:.3f} | {100 * (cpu - cpu0) / cpu0:+.1f} % |")  # fmt: skip


if __name__ == "__main__":
    main()
