"""Cartpole swing-up (the bundled cartpole, RK4, from hanging at rest to upright): iterations and wall-clock to the
upright for iLQR, gradient shooting (Adam) and MPPI, and the box push with exact vs contact-aware gradients.

Each planner runs in chunks of a few iterations (one compilation per planner, each chunk warm-started from the
previous controls; iLQR's regularisation and Adam's moments restart at every chunk), and after every chunk the
end state of the planned trajectory is checked: upright means |angle| < 0.1 rad and |angular velocity| < 0.5 rad/s.

python benchmarks/grad_swingup.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import optax  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mjx_lite as mjl  # noqa: E402
from mjx_lite import trajopt  # noqa: E402
from tests.test_trajopt import CARTPOLE_HORIZON, cartpole_cost, cartpole_start, cartpole_terminal, upright  # noqa: E402

HORIZON = CARTPOLE_HORIZON
ADAM = optax.adam(0.05)
cost, terminal, upright, start = cartpole_cost, cartpole_terminal, upright, cartpole_start


_KEY = [jax.random.PRNGKey(0)]


def _next_key():
    """A new MPPI key for every chunk (the chunks are warm-started, their noise should differ)."""
    _KEY[0], key = jax.random.split(_KEY[0])
    return key


PLANNERS = {
    "iLQR": (lambda m, d, u: trajopt.ilqr(m, d, cost, HORIZON, iterations=5, ctrl_init=u, terminal_cost=terminal), 5),
    "shooting (Adam 0.05)": (lambda m, d, u: trajopt.shooting(m, d, cost, HORIZON, ADAM, iterations=50, ctrl_init=u,
                                                              terminal_cost=terminal), 50),
    "MPPI (256 samples)": (lambda m, d, u: trajopt.mppi(m, d, cost, HORIZON, samples=256, iterations=10, ctrl_init=u,
                                                        terminal_cost=terminal, rng=_next_key()), 10),
}  # fmt: skip


def run_planner(name, max_iterations):
    m, d, u = start()
    plan, chunk = PLANNERS[name]
    t = time.perf_counter()
    res = jax.block_until_ready(plan(m, d, u))
    first = time.perf_counter() - t
    # the first chunk's time includes compilation: time it again warm for the per-chunk cost
    t = time.perf_counter()
    jax.block_until_ready(plan(m, d, u))
    per_chunk = time.perf_counter() - t
    compile_s = max(first - per_chunk, 0.0)
    done, iters, wall = upright(res.states.qpos[-1], res.states.qvel[-1]), chunk, per_chunk
    while not done and iters < max_iterations:
        t = time.perf_counter()
        res = jax.block_until_ready(plan(m, d, res.ctrl))
        wall += time.perf_counter() - t
        iters += chunk
        done = upright(res.states.qpos[-1], res.states.qvel[-1])
    return dict(done=done, iterations=iters, wall=wall, compile=compile_s, cost=float(res.cost),
                per_iteration=per_chunk / chunk)  # fmt: skip


def box_push(samples, iterations):
    m = mjl.load_mjcf("box_push")
    d = mjl.make_data(m)
    target = jp.asarray([0.25, 0.0])

    def c(d, u, t):
        return jp.sum((d.qpos[2:4] - target) ** 2) + 1e-3 * jp.sum(u**2)

    def term(d):
        return 50.0 * jp.sum((d.qpos[2:4] - target) ** 2)

    if samples:
        m = mjl.configure(m, contact_gradients="smooth", contact_smoothing_std=0.03, contact_smoothing_dofs=(0, 1),
                          contact_smoothing_samples=samples)  # fmt: skip
    run = jax.jit(lambda d: trajopt.shooting(m, d, c, 80, ADAM, iterations=iterations, terminal_cost=term))
    t = time.perf_counter()
    res = jax.block_until_ready(run(d))
    first = time.perf_counter() - t
    t = time.perf_counter()
    res = jax.block_until_ready(run(d))
    warm = time.perf_counter() - t
    dist = float(jp.linalg.norm(res.states.qpos[-1, 2:4] - target))
    return dict(cost0=float(res.costs[0]), cost=float(res.cost), dist=dist, per_iteration=warm / iterations,
                compile=first - warm)  # fmt: skip


def report(quick: bool = False) -> str:
    max_iters = {"iLQR": 20 if quick else 60, "shooting (Adam 0.05)": 200 if quick else 1500,
                 "MPPI (256 samples)": 20 if quick else 200}  # fmt: skip
    rows = []
    for name in PLANNERS:
        r = run_planner(name, max_iters[name])
        print(name, r, flush=True)
        reached = f"{r['iterations']}" if r["done"] else f"not within {r['iterations']}"
        rows.append(f"| {name} | {reached} | {r['wall']:.1f} s | {r['per_iteration'] * 1e3:.0f} ms | "
                    f"{r['compile']:.0f} s | {r['cost']:.1f} |")  # fmt: skip
    box_rows = []
    for samples in (0, 8) if quick else (0, 4, 8, 16):
        r = box_push(samples, 20 if quick else 60)
        print("box", samples, r, flush=True)
        label = "exact" if samples == 0 else f"smooth, {samples} samples"
        box_rows.append(f"| {label} | {r['cost0']:.2f} -> {r['cost']:.2f} | {r['dist'] * 100:.1f} cm | "
                        f"{r['per_iteration'] * 1e3:.0f} ms | {r['compile']:.0f} s |")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        "### Trajectory optimisation: cartpole swing-up and box push (float64, CPU)",
        "",
        f"`python benchmarks/grad_swingup.py{' --quick' if quick else ''}`. Swing-up of the bundled cartpole (RK4, "
        f"rail limits) from hanging at rest, horizon {HORIZON} steps (2 s), a small sinusoidal initial control; "
        "planners run in warm-started chunks (iLQR 5, shooting 50, MPPI 10 iterations) until the planned end state "
        "is upright (|angle| < 0.1, |angular velocity| < 0.5). Wall-clock excludes compilation (column of its own). "
        f"Shared 2-core machine, load average {load:.1f} at the end of the run: times are inflated and noisy.",
        "",
        "| planner | iterations to upright | wall-clock to upright | per iteration | compile | final cost |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Box push (bundled `box_push`, 80 steps, shooting with Adam 0.05, 60 iterations): the finger starts 4 cm from "
        "the box; exact gradients are zero until contact, the smoothed step derivative (finger position std 3 cm) "
        "finds the push. Distance of the box from its target at the end of the plan:",
        "",
        "| gradient | cost (start -> end) | box to target | per iteration | compile |",
        "| --- | --- | --- | --- | --- |",
        *box_rows,
    ])


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__)
    print(report(quick="--quick" in sys.argv))
