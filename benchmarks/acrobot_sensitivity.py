"""How robust is iLQR's open-loop acrobot swing-up (`trajopt.tasks.acrobot_open`: 700 Euler steps, from an energy
pump's controls, terminal-weighted cost)? The task's start (hanging at rest) is perturbed by a few shoulder angles
(0 and +-1e-4 .. 1e-2 rad; the pump's controls recomputed from each start), iLQR runs with its defaults and with
`retries=4`, and the end state's error (in tolerances; <= 1: solved) is printed per start, with the convergence
report (cost, actual vs predicted reduction, mu, step size: `Report.lines`) of the unperturbed start.

MJX_LITE_COMPILATION_CACHE=0 python benchmarks/acrobot_sensitivity.py [--iterations 30] [--eps 0,-1e-3,...]
                                                                     [--retries 0,4] [--report]

Measured 2026-12-01 (branch plan42d, float64, the 2-core CPU at load 10-12), starts eps = 0, -1e-3, -1e-4, 1e-4,
1e-3, 1e-2 rad:
  30 iterations, retries 0: errors 1.64 8.31 11.96 6.84 0.79 14.21 (solved 1/6)
  30 iterations, retries 4: errors 1.48 7.68 7.07 1.39 0.70 12.44 (solved 1/6)
  60 iterations, retries 0: errors 0.35 7.68 7.09 1.41 0.36 12.05 (solved 2/6)
  60 iterations, retries 4: errors 0.38 3.53 0.45 1.29 0.36 10.30 (solved 3/6)
The unperturbed start's error at 30 iterations moved between 1.64, 1.67 and 2.08 with round-off-level changes of
the compiled program (the same costs to 3 decimals through iteration 13, apart from iteration 14): the 7 s
open-loop plan of a chaotic double pendulum from a bang-bang start has no margin. See `tasks.acrobot_open`.
"""

import argparse
import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

import mjx_lite  # noqa: E402
from mjx_lite import trajopt  # noqa: E402
from mjx_lite.trajopt import tasks  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", type=int, default=30)
    p.add_argument("--eps", default="0,-1e-3,-1e-4,1e-4,1e-3,1e-2", help="shoulder-angle perturbations of the start")
    p.add_argument("--retries", default="0,4", help="ilqr(retries=...) variants")
    p.add_argument("--report", action="store_true", help="print the convergence report of the unperturbed start")
    args = p.parse_args(argv)
    task = tasks.acrobot_open()
    m, d0 = task.m, task.d0
    fwd = jax.jit(mjx_lite.forward)
    starts = []
    for eps in (float(x) for x in args.eps.split(",")):
        d = d0.replace(qpos=d0.qpos.at[0].add(eps))
        starts.append((eps, d, tasks.acrobot_pump(m, d, task.horizon)))
    print(f"acrobot_open ({task.horizon} steps), {args.iterations} iterations, load {os.getloadavg()[0]:.1f}")
    for retries in (int(x) for x in args.retries.split(",")):
        errors, c0, t0 = [], time.process_time(), time.time()
        for eps, d, init in starts:
            res = trajopt.ilqr(m, d, task.cost, task.horizon, iterations=args.iterations, ctrl_init=init,
                               terminal_cost=task.terminal_cost, retries=retries)  # fmt: skip
            q, v = res.states.qpos[-1], res.states.qvel[-1]
            errors.append(task.error(q, v, fwd(m, d.replace(qpos=q, qvel=v))))
            if args.report and eps == 0.0:
                print(f"retries={retries}, unperturbed start:")
                print("\n".join("  " + line for line in res.report.lines(res.costs)))
        e = np.asarray(errors)
        print(f"retries={retries}: errors {' '.join(f'{x:.2f}' for x in e)} (solved {int(np.sum(e <= 1))}/{len(e)}; "
              f"{time.process_time() - c0:.0f} CPU s, {time.time() - t0:.0f} s wall, with the first compilation)")


if __name__ == "__main__":
    main()
