"""Config(linalg="own") against "library" (JAX's LAPACK-backed factorisations) on the CPU: time per step of
jit(vmap(scan(step))), both programs compiled in one process and timed interleaved (best of rounds), float32.

    python benchmarks/linalg.py --model PATH_OR_NAME [--batch 256] [--steps 100] [--rounds 5] [--iterations N]
        [--settle S] [--dtype float64]

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


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=None)
    ap.add_argument("--settle", type=int, default=0)
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--kinds", default="own,library")
    ap.add_argument("--chunk", type=int, default=None)
    args = ap.parse_args(argv)
    if args.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite import linalg  # noqa: PLC0415

    if args.chunk:
        linalg.CHUNK = args.chunk

    base = mjl.load_mjcf(args.model)
    if args.iterations is not None:
        base = base.replace(opt=base.opt.replace(iterations=args.iterations,
                                                 ls_iterations=max(1, args.iterations // 2)))  # fmt: skip
    kinds = args.kinds.split(",")
    models = {k: base.replace(config=base.config.replace(linalg=k)) for k in kinds}
    d = mjl.make_data(base)
    key1, key2 = jax.random.split(jax.random.PRNGKey(0))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (args.batch,) + x.shape), d)
    db = db.replace(qvel=0.05 * jax.random.normal(key1, (args.batch, base.nv), db.qvel.dtype),
                    ctrl=jax.random.uniform(key2, (args.batch, base.nu), db.ctrl.dtype, -0.5, 0.5))  # fmt: skip

    def rollout_fn(m, steps):
        return jax.jit(jax.vmap(lambda d: jax.lax.fori_loop(0, steps, lambda i, d: mjl.step(m, d), d)))

    if args.settle:
        db = jax.block_until_ready(rollout_fn(models[kinds[0]], args.settle)(db))
    fns, out = {}, {}
    for k, m in models.items():
        t = time.perf_counter()
        fns[k] = rollout_fn(m, args.steps).lower(db).compile()
        out[k] = {"linalg": k, "compile_s": round(time.perf_counter() - t, 2), "best_ms_per_step": float("inf")}
    for _ in range(args.rounds):
        for k, f in fns.items():
            t = time.perf_counter()
            jax.block_until_ready(f(db))
            out[k]["best_ms_per_step"] = min(out[k]["best_ms_per_step"], (time.perf_counter() - t) * 1e3 / args.steps)
    nefc = int(jp.sum(db.efc_mask[0])) if hasattr(db, "efc_mask") else None
    niter = float(jp.mean(db.solver_niter)) if hasattr(db, "solver_niter") else None
    for k in kinds:
        out[k].update(model=args.model, batch=args.batch, steps=args.steps, dtype=args.dtype, nv=base.nv,
                      njmax=base.njmax, active_rows_env0=nefc, mean_niter=niter, solver=int(base.opt.solver),
                      integrator=int(base.opt.integrator), load=round(os.getloadavg()[0], 1))  # fmt: skip
        print(json.dumps(out[k]), flush=True)
    if len(kinds) == 2:
        ratio = out[kinds[1]]["best_ms_per_step"] / out[kinds[0]]["best_ms_per_step"]
        print(f"ratio {kinds[1]} / {kinds[0]}: {ratio:.3f}")


if __name__ == "__main__":
    main()
