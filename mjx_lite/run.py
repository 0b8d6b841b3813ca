"""Run a batched rollout of a bundled model and print its throughput (no `mujoco` needed).

    python -m mjx_lite.run [--model pendulum|cartpole|free_box|legged|PATH] [--batch N] [--steps T]

Loads the model with our MJCF compiler, gives each environment a random initial velocity and random
constant controls, runs `jit(vmap(scan(step)))`, and prints JIT time, steps/s and a summary of the
final states.
"""

from __future__ import annotations

import argparse
import os
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite

MODELS_DIR = os.path.join(os.path.dirname(__file__), "models")
BUNDLED = ("pendulum", "cartpole", "free_box", "legged")


def model_path(name: str) -> str:
    """Path of a bundled model (by name) or of a given MJCF file."""
    if name in BUNDLED:
        return os.path.join(MODELS_DIR, f"{name}.xml")
    if os.path.exists(name):
        return name
    raise SystemExit(f"unknown model {name!r}: use one of {BUNDLED} or a path")


def rollout_fn(steps: int):
    """jit(vmap(scan(step))) returning the final Data and the per-step qpos."""

    def rollout(m, d):
        def body(d, _):
            d = mjx_lite.step(m, d)
            return d, d.qpos

        return jax.lax.scan(body, d, None, length=steps)

    return jax.jit(jax.vmap(rollout, in_axes=(None, 0)))


def main(argv: list[str] | None = None) -> float:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="pendulum")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    m = mjx_lite.load_mjcf(model_path(a.model))
    d = mjx_lite.make_data(m)
    rng = np.random.default_rng(a.seed)
    dtype = d.qvel.dtype
    qvel = jp.asarray(0.5 * rng.standard_normal((a.batch, m.nv)), dtype)
    ctrl = jp.asarray(rng.uniform(-1.0, 1.0, (a.batch, m.nu)), dtype)
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (a.batch,) + x.shape), d).replace(qvel=qvel, ctrl=ctrl)

    fn = rollout_fn(a.steps)
    t0 = time.perf_counter()
    compiled = fn.lower(m, db).compile()
    jit_s = time.perf_counter() - t0
    out, _ = compiled(m, db)
    jax.block_until_ready(out.qpos)
    t0 = time.perf_counter()
    out, traj = compiled(m, db)
    jax.block_until_ready(out.qpos)
    run_s = time.perf_counter() - t0
    sps = a.batch * a.steps / run_s

    qpos = np.asarray(out.qpos)
    print(f"model {a.model}: nq {m.nq} nv {m.nv} nu {m.nu}  batch {a.batch}  steps {a.steps}  "
          f"backend {jax.default_backend()}")  # fmt: skip
    print(f"jit {jit_s:.2f} s   run {run_s:.3f} s   {sps:,.0f} steps/s")
    print(f"final time {float(np.asarray(out.time)[0]):.3f}  finite {bool(np.all(np.isfinite(qpos)))}  "
          f"qpos mean {np.round(qpos.mean(axis=0), 3).tolist()}")  # fmt: skip
    del traj
    return sps


if __name__ == "__main__":
    main()
