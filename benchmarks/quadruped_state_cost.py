"""A/B in one process: iLQR on the quadruped stand-up (`trajopt.tasks.quadruped_stand`, 200 steps, 30 iterations)
with its cost read from the state alone (the task's: iLQR expands it without a forward pass) against the same
residuals read from the forward pass's Data.xpos / Data.xmat (the expansion then runs forward and differentiates
through the contact solver): the same iterates up to round-off; first call (compilation) and time per iteration,
wall and CPU (time.process_time), two interleaved rounds.

MJX_LITE_COMPILATION_CACHE=0 python benchmarks/quadruped_state_cost.py

Measured 2026-12-01 by this script's logic before it was tidied into `main` (float64, the 2-core CPU at load 10-14;
a persistent cache, warm for the state variant from an earlier run, cold for the forward variant): first call 160 s
wall / 37 s CPU (state) vs 613 / 155 (forward); per iteration 308 vs 444 ms of CPU (min of 2; wall 766 vs 1486 ms);
final cost 25.4902 both, error 0.019 tolerances both; controls within 5.5e-4.
"""

import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import jax.numpy as jp  # noqa: E402
import numpy as np  # noqa: E402

from mjx_lite import trajopt  # noqa: E402
from mjx_lite.trajopt import common, tasks  # noqa: E402

ITERATIONS = 30
ROUNDS = 2


def forward_costs(task):
    """The stand-up's cost and terminal cost with height, upright and position read from Data.xpos / Data.xmat."""
    torso = task.m.names["body"].index("torso")
    xy0 = jp.asarray(np.asarray(task.d0.qpos[:2]))

    def residuals(d):
        r = tasks._quadruped_residuals(d.qpos, d.qvel, xy0)
        r["height"] = d.xpos[torso, 2] - tasks.STAND_HEIGHT
        r["upright"] = 1.0 - tasks._torso_up(d, torso)
        r["position"] = d.xpos[torso, :2] - xy0
        return r

    def cost(d, u, t):
        return tasks._quadruped_cost(residuals(d), u, tasks.QUADRUPED_WEIGHTS)

    def terminal(d):
        return tasks._quadruped_cost(residuals(d), None, tasks.QUADRUPED_TERMINAL_WEIGHTS)

    return cost, terminal


def main():
    task = tasks.quadruped_stand()
    cost_fwd, term_fwd = forward_costs(task)
    print("forward variant reads only state:", common.reads_only_state(cost_fwd, task.d0, task.ctrl_init[0], 0))
    variants = {"state": (task.cost, task.terminal_cost), "forward": (cost_fwd, term_fwd)}

    def call(c, tc):
        return trajopt.ilqr(task.m, task.d0, c, task.horizon, iterations=ITERATIONS, terminal_cost=tc,
                            ctrl_init=task.ctrl_init)  # fmt: skip

    out = {}
    for name, (c, tc) in variants.items():
        t0, c0 = time.perf_counter(), time.process_time()
        res = jax.block_until_ready(call(c, tc))
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        err = tasks.final_error(task, res.ctrl)
        print(f"{name} first call {wall:.1f} s wall {cpu:.1f} s cpu; cost {float(res.cost):.4f}, error {err:.3f}, "
              f"iterations {int(res.report.iterations)}", flush=True)  # fmt: skip
        out[name] = {"wall": [], "cpu": [], "res": res}
    for rnd in range(ROUNDS):  # interleaved
        for name, (c, tc) in variants.items():
            t0, c0 = time.perf_counter(), time.process_time()
            jax.block_until_ready(call(c, tc))
            out[name]["wall"].append(time.perf_counter() - t0)
            out[name]["cpu"].append(time.process_time() - c0)
            print(f"round {rnd} {name}: {out[name]['wall'][-1]:.1f} s wall {out[name]['cpu'][-1]:.1f} s cpu, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
    a, b = out["state"]["res"], out["forward"]["res"]
    print("max |ctrl difference|", float(jp.max(jp.abs(a.ctrl - b.ctrl))),
          "max |cost curve difference|", float(jp.max(jp.abs(a.costs - b.costs))))  # fmt: skip
    for name, r in out.items():
        print(f"{name}: ms per iteration, min over rounds: wall {1e3 * min(r['wall']) / ITERATIONS:.0f}, "
              f"CPU {1e3 * min(r['cpu']) / ITERATIONS:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
