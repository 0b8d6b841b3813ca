"""Issue 39: does the ant's throughput fall as the batch grows, and is it the solver's loops? (not in the report)

    python benchmarks/ant_batch.py [--batches 32,256,1024] [--rounds 3] [--variants base,it1] [--steps 20]

benchmarks/models/ant.xml (RK4, Newton 100 iterations, float32): `jit(scan(vmap(step)))` rollouts of `--steps` steps
from random qvel ~ 0.01 N(0, 1) after 2 x steps settling steps (the ant lands on its legs), every variant and batch
compiled first, then timed interleaved in one process (best of the rounds). Variants: "base" (the model as it is),
"it1" (opt.iterations = ls_iterations = 1: no solver or line-search loop at all, one Newton step per solve: the step's
cost without the loops a vmapped batch runs for its slowest environment; not the same physics), "merged"
(Config.rk4_loop "merged"), "lockstep" (Config.solver_batch "lockstep": each solver loop is one vmapped while loop,
every environment waiting for the batch's slowest; the CPU's default is "refill"). Prints steps/s per round and the
per-environment `solver_niter` of the last RK4 stage's solve: mean, max, the mean over steps of the batch's maximum (the
trip count of a lockstep loop) and the histogram.
"""

from __future__ import annotations

import os
import sys
import time

import jax
import numpy as np

import mjx_lite as mjl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import targets  # noqa: E402 - benchmarks/ is on the path

ANT = os.path.join(HERE, "models", "ant.xml")


def _model(variant: str):
    m = mjl.load_mjcf(ANT)
    if variant == "it1":
        return m.replace(opt=m.opt.replace(iterations=1, ls_iterations=1))
    if variant == "merged":
        return mjl.configure(m, rk4_loop="merged")
    if variant == "lockstep":
        return mjl.configure(m, solver_batch="lockstep")
    if variant != "base":
        raise ValueError(f"unknown variant {variant!r}")
    return m


def _prepare(variant: str, batch: int, steps: int):
    roll, db = targets.niter_rollout(_model(variant), batch, steps)
    db, _ = roll(roll(db)[0])  # compile, then 2 x steps settling steps
    jax.block_until_ready(db)
    return roll, db


def main(batches, rounds, variants, steps):
    t0 = time.perf_counter()
    fns = {(v, b): _prepare(v, b, steps) for v in variants for b in batches}
    print(f"compiled {len(fns)} programs in {time.perf_counter() - t0:.0f} s", flush=True)
    best = {}
    for r in range(rounds):
        for b in batches:
            for v in variants:
                roll, db = fns[v, b]
                t = time.perf_counter()
                out, nit = roll(db)
                jax.block_until_ready(out)
                best[v, b] = min(best.get((v, b), np.inf), time.perf_counter() - t)
                if r == 0:
                    nit = np.asarray(nit)
                    print(f"{v} batch {b}: solver_niter mean {nit.mean():.2f}, max {nit.max()}, batch max mean "
                          f"{nit.max(1).mean():.2f}, histogram {np.bincount(nit.ravel()).tolist()}", flush=True)
        rates = ", ".join(f"{v}@{b} {b * steps / best[v, b]:.0f}" for b in batches for v in variants)
        print(f"round {r} (load {os.getloadavg()[0]:.1f}), best steps/s: {rates}", flush=True)


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__, flags=(), valued=("--batches", "--rounds", "--variants", "--steps"))

    def opt(name, default):
        return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default

    main([int(b) for b in opt("--batches", "32,256,1024").split(",")], int(opt("--rounds", "3")),
         opt("--variants", "base,it1").split(","), int(opt("--steps", "20")))
