"""Config(linalg="own") (mjx_lite.linalg) against "library" (JAX's LAPACK-backed factorisations, which can deadlock
XLA:CPU's thread pool under vmap, issue 44) on the CPU. Both programs are compiled in one process and timed
interleaved (best of rounds), so that a loaded machine slows both alike.

    python benchmarks/linalg.py --model PATH_OR_NAME [--batch 256] [--steps 100] [--rounds 5] [--iterations N]
        [--settle S] [--dtype float64]     time per step of jit(vmap(scan(step)))
    python benchmarks/linalg.py --transition 16 [--rounds 3]
        time per state of jit(vmap(derivatives.transition)) over humanoid contact states (float64)
    python benchmarks/report.py --only linalg      the docs/benchmarks.md section

--settle: steps (with the "own" program) from the initial state before timing, e.g. to let a body fall into
contact. --iterations: overrides opt.iterations (and ls_iterations = iterations // 2 when given).
Prints one JSON line per configuration and the ratio library / own (above 1: "own" is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jp

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import mjx_lite as mjl  # noqa: E402
from mjx_lite import derivatives  # noqa: E402

KINDS = ("own", "library")


def _interleaved(fns: dict, args, rounds: int) -> dict:
    """Best wall time (s) of each compiled function over `rounds` rounds, the functions alternating in each."""
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def ab_step(model: str, batch: int = 256, steps: int = 100, rounds: int = 5, iterations: int | None = None,
            settle: int = 0) -> dict:  # fmt: skip
    """ms per step of jit(vmap(fori_loop(step))) with each Config.linalg, and the compile times."""
    base = mjl.load_mjcf(model if os.path.exists(model) else mjl.models.path(model))
    if iterations is not None:
        base = base.replace(opt=base.opt.replace(iterations=iterations, ls_iterations=max(1, iterations // 2)))
    models = {k: base.replace(config=base.config.replace(linalg=k)) for k in KINDS}
    d = mjl.make_data(base)
    key1, key2 = jax.random.split(jax.random.PRNGKey(0))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
    db = db.replace(qvel=0.05 * jax.random.normal(key1, (batch, base.nv), db.qvel.dtype),
                    ctrl=jax.random.uniform(key2, (batch, base.nu), db.ctrl.dtype, -0.5, 0.5))  # fmt: skip

    def rollout_fn(m, n):
        return jax.jit(jax.vmap(lambda d: jax.lax.fori_loop(0, n, lambda i, d: mjl.step(m, d), d)))

    if settle:
        db = jax.block_until_ready(rollout_fn(models["own"], settle)(db))
    fns, compile_s = {}, {}
    for k, m in models.items():
        t = time.perf_counter()
        fns[k] = rollout_fn(m, steps).lower(db).compile()
        compile_s[k] = time.perf_counter() - t
    best = _interleaved(fns, (db,), rounds)
    return {"model": os.path.basename(model), "batch": batch, "steps": steps, "nv": base.nv,
            "solver": int(base.opt.solver), "integrator": int(base.opt.integrator),
            "ncon_env0": int(jp.sum(db.contact.dist[0] < 0)) if hasattr(db, "contact") else None,
            "ms_per_step": {k: best[k] * 1e3 / steps for k in KINDS}, "compile_s": compile_s,
            "load": os.getloadavg()[0]}  # fmt: skip


def ab_transition(n: int = 16, rounds: int = 3) -> dict:
    """ms per state of jit(vmap(derivatives.transition)) over n humanoid contact states (float64, MuJoCo's default
    solver budget), as tests/hang_worker.py's transition case (which hung at n = 64 with "library")."""
    from tests import hang_worker  # noqa: PLC0415 - test helper, only for this case

    jax.config.update("jax_enable_x64", True)
    import mujoco  # noqa: PLC0415 - optional dependency

    spec = mujoco.MjSpec.from_file(hang_worker._model_path("mjx:humanoid/humanoid.xml"))
    spec.option.iterations, spec.option.ls_iterations = 100, 50
    states = hang_worker._contact_states(spec.compile(), n)
    fns, compile_s, db = {}, {}, None
    for k in KINDS:
        m = hang_worker._load("mjx:humanoid/humanoid.xml", k)
        m = m.replace(opt=m.opt.replace(iterations=100, ls_iterations=50))
        d0 = mjl.make_data(m)
        db = jax.tree.map(lambda *xs: jp.stack(xs), *[
            d0.replace(qpos=jp.asarray(s.qpos), qvel=jp.asarray(s.qvel), ctrl=jp.asarray(s.ctrl),
                       qacc_warmstart=jp.asarray(s.qacc_warmstart)) for s in states])  # fmt: skip
        t = time.perf_counter()
        fns[k] = jax.jit(jax.vmap(lambda d, m=m: derivatives.transition(m, d, sensors=False)[:2])).lower(db).compile()
        compile_s[k] = time.perf_counter() - t
    best = _interleaved(fns, (db,), rounds)
    return {"model": "humanoid (transition)", "batch": n, "ncon": [int(s.ncon) for s in states],
            "ms_per_state": {k: best[k] * 1e3 / n for k in KINDS}, "compile_s": compile_s,
            "load": os.getloadavg()[0]}  # fmt: skip


def report(quick: bool = False) -> str:
    """The docs/benchmarks.md section: the humanoid and dm_control's walker stepped at two batch sizes, and the
    vmapped transition Jacobians of 16 humanoid states."""
    from tests import oracle  # noqa: PLC0415 - test data paths

    humanoid = os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml")
    walker = os.path.join(oracle.DM_SUITE, "walker.xml")
    cases = [(humanoid, 256, 100), (walker, 256, 0)] if not quick else [(humanoid, 16, 0)]
    if not quick:
        cases += [(humanoid, 1024, 100)]
    rows = []
    for path, batch, settle in cases:
        r = ab_step(path, batch=batch, steps=20 if quick else 50, rounds=3 if quick else 5, settle=settle)
        ms = r["ms_per_step"]
        rows.append(f"| {r['model']} (step, solver {r['solver']}, integrator {r['integrator']}) | {batch} | "
                    f"{ms['own']:.2f} ms | {ms['library']:.2f} ms | {ms['library'] / ms['own']:.2f}x | "
                    f"{r['compile_s']['own']:.1f} / {r['compile_s']['library']:.1f} s | {r['load']:.1f} |")  # fmt: skip
    r = ab_transition(4 if quick else 16)
    ms = r["ms_per_state"]
    rows.append(f"| humanoid (vmapped `derivatives.transition`, per state, float64) | {r['batch']} | "
                f"{ms['own']:.1f} ms | {ms['library']:.1f} ms | {ms['library'] / ms['own']:.2f}x | "
                f"{r['compile_s']['own']:.1f} / {r['compile_s']['library']:.1f} s | {r['load']:.1f} |")  # fmt: skip
    head = """### Own factorisations beside JAX's LAPACK calls (`Config.linalg`, CPU)

`python benchmarks/report.py --only linalg` (`python benchmarks/linalg.py --model PATH --batch B --settle S` and
`--transition 16` for single rows). `Config(linalg="own")` (`mjx_lite.linalg`, the CPU default: plain XLA operations,
which cannot deadlock XLA:CPU's thread pool as JAX's batched LAPACK kernels can) against `"library"` (JAX's
Cholesky / LU / triangular solves: LAPACK), both compiled in one process and timed interleaved, best of 5 rounds
(transition: 3); float32 steps of `jit(vmap(fori_loop(step)))` (50 steps; the humanoid after 100 settling steps,
in contact), float64 transition Jacobians. Ratio: library / own, above 1 when ours is faster. load: the machine's
load average at the end of the row (shared machine: absolute times are inflated, the ratio is what to read).

| case | batch | own | library | ratio | compile own / library | load |
| --- | --- | --- | --- | --- | --- | --- |
"""
    return head + "\n".join(rows) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model")
    ap.add_argument("--transition", type=int, default=0)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--settle", type=int, default=0)
    ap.add_argument("--dtype", default="float32")
    args = ap.parse_args(argv)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    if args.transition:
        r = ab_transition(args.transition, args.rounds)
        key = "ms_per_state"
    elif args.model:
        r = ab_step(args.model, args.batch, args.steps, args.rounds, args.iterations, args.settle)
        key = "ms_per_step"
    else:
        raise SystemExit("--model or --transition")
    print(json.dumps(r), flush=True)
    print(f"ratio library / own: {r[key]['library'] / r[key]['own']:.3f}")


if __name__ == "__main__":
    main()
