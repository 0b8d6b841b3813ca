"""Planners on the test-bed tasks (`mjx_lite.trajopt.tasks`): iLQR, predictive sampling and MPPI on the cartpole
swing-up (2 s from hanging at rest), the reacher, the quadruped stand-up and the box push (contacts); then MPC in
closed loop (`trajopt.closed_loop`): the cartpole swing-up with one iLQR iteration per step, against mjx_lite's step
and against MuJoCo C, and MuJoCo MPC's acrobot swing-up (`tasks.run_closed_loop`: 2 s horizon re-planned every
control step, 15 s): prints two tables. The acrobot's 2 s task has no open-loop rows by default (`--tasks acrobot`
adds them: no plan over its 2 s horizon can reach the top); `acrobot_open` is the swing-up as one 7 s open-loop plan
from an energy pump's controls (`tasks.acrobot_open`).

Each planner runs once with a fixed iteration budget (iLQR 30, the samplers 50; issue 42's targets; iLQR on
`acrobot_open` 60, `Task.ilqr_iterations`: a 7 s plan of a chaotic double pendulum, mostly short steps), then again for
the timing (no compilation): the timed calls of all planners of a task are interleaved `--repeats` times and the
median is reported as ms per iteration (a loaded machine shows up as a spread between min and median). "solved":
the end state of the returned controls' rollout meets the task's goal check (`Task.success`: the cartpole's pole
within 0.1 rad of upright and turning slower than 0.5 rad/s, ...); "error" is the distance from the goal in units of
its tolerance (<= 1: solved). float64 throughout.

The closed loop: real-time factor = simulated seconds / wall seconds of one timed run after an ahead-of-time
compilation (not counted); "solved": the task's goal check on the plant's final state (the acrobot: on every state
of the last second, `tasks.ACROBOT_HOLD`; "held from": the time from which it held to the end).

python benchmarks/planners.py [--tasks cartpole,acrobot_open,reacher,quadruped_stand,box_push] [--planners ilqr,ps,mppi]
                              [--samples 256] [--repeats 3] [--mpc-steps 300]
                              [--mpc-tasks cartpole,cartpole_copy,acrobot]
                              [--acrobot-steps 1500] [--acrobot-planners ilqr] [--quick] [--merge FILE ...]
python benchmarks/planners.py --ab [--samples 256] [--iterations 3] [--repeats 5] [--planners ps|mppi]

Where a sampling iteration's time goes (cartpole, 256 samples x 200 RK4 steps, float64, 2-core CPU at load 6-9,
variants compiled in one process and timed interleaved, 2026-11-30): the rollout's forward passes. One batched
RK4 step compiles to ~700 fused kernels and 17 while loops (a forward pass: ~300 and 8) and took 1.1 / 3.2 / 7.4 ms
for 64 / 256 / 1024 samples (a fixed cost per kernel plus ~6 us per sample); a pass of 200 steps 390-570 ms. The
same pass on an Euler copy (one forward per step) 105 ms, without the rail's limit row (no constraint solver) 317 ms
against 568; the spline product, the jit entry and the host are negligible (one compiled scan per call);
`Config.solver_batch` "lockstep" 401 vs 391 ms, the time scan unrolled 4x 483 vs 391 ms (and 3x the compile), the
cost's extra RK4 forward pass is already removed by XLA (skipping it explicitly: 546 vs 554 ms median).
Since then the rail's single limit row is solved exactly without iterations (`solver.direct`, Newton's optimum to
round-off): one batched RK4 step 417 kernels and 1 loop (the RK4 scan) instead of 698 and 17, and `--ab` (3
iterations, 5 interleaved rounds, load 12 -> 11) 1.41x faster per iteration (median 815 vs 1145 ms per batched
rollout, the same costs to the last digit); the Euler planning copy (`trajopt.planning_model`) 6.3x (182 ms), but
its plan, replayed on the RK4 model, ends 8.7 tolerances from upright (the RK4 plans: 1.1 after 3 iterations).
Closed-loop iLQR on the RK4 model (horizon 100, one iteration per step, 100 steps, two interleaved rounds, load
8-10): real-time factor 0.085-0.088 against 0.073-0.074 with the iterative solver (the same closed-loop cost),
compile 173 vs 222 s: still far from 1x (the Euler planning copy is the way there, `test_trajopt`).
Measured again 2026-11-30 (load 10-14; CPU seconds beside wall, `ClosedLoop.cpu_time`): a sampling iteration is
297-370 ms of CPU, all in the rollout's 577 XLA kernels per RK4 step (YNNPACK's 6x6 dots 33 % of kernel time, the
copies around them 21 %); iLQR on RK4 52-85 ms of CPU per control step (nominal rollout batched over the step sizes
22-25 ms, Jacobians and backward pass ~30, line search 22-25) against 10 ms for 1x. The `cartpole_copy` rows
(`run_mpc_copy`: MuJoCo MPC's arrangement, the plan made on an Euler copy every k control steps, the plant RK4):
horizon 100, k = 4: goal held from 1.98 s, 0.98x real time wall at load 10.4, 3.06x by CPU; k = 2: 0.54x wall,
1.30x by CPU (docs/benchmarks/planners.md).
The quadruped stand-up (`tasks.quadruped_stand`, contacts; MuJoCo MPC-style residuals with a joint posture, read from
the state alone), 2026-12-01, load 11-15: `--tasks quadruped_stand --planners ilqr --mpc-steps 0 --repeats 1`:
solved in the 30-iteration budget (cost 328.5 -> 25.5, 0.02 of the tolerance; the torso within the goal from 0.2 s),
first call 481 s (compilation), 1130 ms per iteration wall. A/B in one process (`benchmarks/quadruped_state_cost.py`:
the same residuals read from the forward pass's xpos/xmat, so iLQR expands the cost through forward and the contact
solver): 308 vs 444 ms of CPU per iteration (min of 2 interleaved calls; wall 766 vs 1486 ms), compilation 37 vs
155 s of CPU (160 vs 613 s wall; the state variant's from a warm persistent cache), the same final cost (25.4902).

The whole section of docs/benchmarks.md (every task, then the closed loop; tens of minutes on an idle 2-core CPU):
`python benchmarks/report.py --only planners` (rewrites docs/benchmarks/planners.md and reassembles
docs/benchmarks.md). Some tasks' rows only, the other rows kept:
`python benchmarks/planners.py --tasks reacher --mpc-steps 0 --merge docs/benchmarks/planners.md docs/benchmarks.md`
(replaces those tasks' rows of the planners table in each FILE and notes the date and commit in its header).
The acrobot's closed-loop row alone: `python benchmarks/planners.py --tasks "" --mpc-tasks acrobot`.
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import subprocess
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402

from mjx_lite import configure as mjl_configure  # noqa: E402
from mjx_lite import interop, trajopt  # noqa: E402
from mjx_lite.trajopt import tasks  # noqa: E402

ILQR_ITERATIONS = 30
SAMPLING_ITERATIONS = 50


def make_planner(task: tasks.Task, name: str, samples: int, iterations: int | None):
    """(iterations, planner(key) -> Result) for planner `name` on `task`."""
    n = iterations or (task.ilqr_iterations if name == "ilqr" else SAMPLING_ITERATIONS)
    return n, lambda key: tasks.plan(task, name, n, samples=samples, rng=key)


def run_task(task: tasks.Task, planners, samples: int, repeats: int, iterations: int | None):
    rows = {}
    calls = {}
    for name in planners:
        n, plan = make_planner(task, name, samples, iterations)
        t = time.perf_counter()
        res = jax.block_until_ready(plan(jax.random.PRNGKey(0)))
        first = time.perf_counter() - t
        err = tasks.final_error(task, res.ctrl)
        used = int(res.report.iterations) if res.report is not None else n
        reason = res.report.reason_name() if res.report is not None else "-"
        rows[name] = dict(n=n, used=used, reason=reason, c0=float(res.costs[0]), c1=float(res.cost), err=err,
                          first=first, times=[])  # fmt: skip
        calls[name] = plan
        print(f"  {task.name} {name}: first call {first:.1f} s, error {err:.2f}", flush=True)
    for _ in range(repeats):  # interleaved timings
        for name, plan in calls.items():
            t = time.perf_counter()
            jax.block_until_ready(plan(jax.random.PRNGKey(0)))
            rows[name]["times"].append(time.perf_counter() - t)
    return rows


LABELS = {"ilqr": "iLQR", "ps": "predictive sampling", "mppi": "MPPI"}


def table_lines(head, table) -> list[str]:
    widths = [max(len(str(row[i])) for row in [head, *table]) for i in range(len(head))]
    return ["| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |"
            for row in [head, tuple("-" * w for w in widths), *table]]  # fmt: skip


HEADING = "### Planners (iLQR, predictive sampling, MPPI) on the trajopt tasks"
HEAD = ("task", "planner", "iterations", "cost", "error/tol", "solved", "ms/iteration", "first call s")


MPC_HEAD = ("task", "plant", "planner", "steps", "cost", "error/tol", "solved", "real-time factor", "compile s")
MPC_HORIZON = 100  # 1 s: one iLQR iteration per step swings the cartpole up robustly (0.5 s: a knife-edge, measured)


def run_mpc(steps: int, horizon: int, plants=("mjx_lite", "mujoco")):
    """Closed-loop rows: the cartpole swing-up by receding-horizon iLQR (one iteration per step)."""
    task = tasks.cartpole(horizon)
    full = tasks.cartpole()

    def planner(m, d, u):
        return trajopt.ilqr(m, d, task.cost, horizon, iterations=1, ctrl_init=u, terminal_cost=task.terminal_cost)

    rows = []
    for kind in plants:
        plant = interop.mujoco_model(task.m) if kind == "mujoco" else None
        run = trajopt.closed_loop(task.m, task.d0, planner, horizon, steps, plant=plant, cost=task.cost,
                                  terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init)  # fmt: skip
        q, v = np.asarray(run.result.states.qpos[-1]), np.asarray(run.result.states.qvel[-1])
        err = full.error(q, v, None)
        rows.append((f"cartpole ({steps} steps)", "MuJoCo C" if kind == "mujoco" else "mjx_lite",
                     f"iLQR, 1 iteration per step, horizon {horizon}", str(steps), f"{run.cost:.1f}", f"{err:.2f}",
                     "yes" if err <= 1.0 else "no", f"{run.realtime_factor:.2f} ({run.wall_time:.1f} s)",
                     f"{run.compile_time:.0f}"))  # fmt: skip
        print(f"  mpc {kind}: rtf {run.realtime_factor:.2f}, error {err:.2f}", flush=True)
    return rows


COPY_HORIZON = 100  # 1 s, as the RK4 rows (0.5 s: held only from 2.72 s of 3 s, re-planning every step)
COPY_REPLAN = (2, 4)  # re-plan every k control steps (one row each; 4 at 0.5 s horizon: not solved)


def run_mpc_copy(steps: int, horizon: int = COPY_HORIZON, replan=COPY_REPLAN):
    """Closed-loop rows: the cartpole swing-up with MuJoCo MPC's arrangement, the plan made on a cheaper model than
    the plant: one iLQR iteration per re-plan on an Euler copy of the task's model (`trajopt.planning_model`), the
    plant the task's RK4 model (mjx_lite), re-planned every k control steps (iLQR's feedback gains in between).
    "real-time factor" also gives the process's CPU seconds (`ClosedLoop.cpu_time`: what the load does not inflate);
    solved: the task's goal check holds over the last second."""
    task = tasks.cartpole(horizon)
    m_plan = trajopt.planning_model(task.m, "Euler")

    def planner(m, d, u):
        return trajopt.ilqr(m, d, task.cost, horizon, iterations=1, ctrl_init=u, terminal_cost=task.terminal_cost)

    rows = []
    for k in replan:
        run = trajopt.closed_loop(m_plan, task.d0, planner, horizon, steps, plant=task.m, cost=task.cost,
                                  terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init,
                                  replan_every=k)  # fmt: skip
        errors = tasks.state_errors(task, run.result.states.qpos, run.result.states.qvel)
        err = float(np.max(errors[-101:]))
        every = "every step" if k == 1 else f"every {k} steps"
        rows.append((f"cartpole ({steps} steps)", "mjx_lite (RK4)",
                     f"iLQR on an Euler copy, 1 iteration per re-plan {every}, horizon {horizon}", str(steps),
                     f"{run.cost:.1f}", f"{err:.2f}", "yes" if err <= 1.0 else "no",
                     f"{run.realtime_factor:.2f} ({run.wall_time:.1f} s; CPU {run.cpu_time:.1f} s)",
                     f"{run.compile_time:.0f}"))  # fmt: skip
        print(f"  mpc Euler copy, re-plan every {k}: rtf {run.realtime_factor:.2f} (CPU {run.cpu_time:.2f} s), "
              f"error over the last second {err:.2f}", flush=True)
    return rows


ACROBOT_STEPS = 1500  # 15 s: the goal holds from 11.5 s with iLQR (tests/test_trajopt.py)


def run_mpc_acrobot(steps: int, planners=("ilqr",), samples: int = 16, iterations: int = 1):
    """Closed-loop rows: MuJoCo MPC's acrobot swing-up, `iterations` per control step over the task's 2 s horizon."""
    task = tasks.acrobot()
    rows = []
    for name in planners:
        out = tasks.run_closed_loop(task, name, steps, iterations=iterations, samples=samples)
        run = out.run
        label = LABELS[name] + ("" if name == "ilqr" else f" ({samples}, MuJoCo MPC's noise and spline)")
        held = "not at the end" if out.held_from is None else f"from {out.held_from:.2f} s"
        rows.append((f"acrobot ({steps} steps)", "mjx_lite",
                     f"{label}, {iterations} iteration per step, horizon {task.horizon}", f"{steps} (goal held {held})",
                     f"{run.cost:.1f}", f"{out.error:.2f}", "yes" if out.error <= 1.0 else "no",
                     f"{run.realtime_factor:.2f} ({run.wall_time:.1f} s)", f"{run.compile_time:.0f}"))  # fmt: skip
        print(f"  mpc acrobot {name}: rtf {run.realtime_factor:.2f}, error {out.error:.2f}, held {held}", flush=True)
    return rows


def run_ab(samples: int, iterations: int, repeats: int, planner: str = "ps") -> list[tuple]:
    """A/B rows: one sampling planner (`planner`, the cartpole task's spline and noise) on variants of the cartpole
    model, compiled in one process and timed interleaved `repeats` times: RK4 with the iterative constraint solver
    (`Config(direct_solve_rows=0)`), RK4 as loaded (the rail's one limit row solved exactly, `solver.direct`), and
    an Euler planning copy (`trajopt.planning_model`). ms/iteration: median wall time / (iterations + 1), the
    batched rollouts each call runs; the returned controls' error is on the RK4 model."""
    task = tasks.cartpole()
    variants = {"RK4, iterative solver": mjl_configure(task.m, direct_solve_rows=0), "RK4 (exact small solve)": task.m,
                "Euler planning copy": trajopt.planning_model(task.m, "Euler")}  # fmt: skip
    fn = trajopt.predictive_sampling if planner == "ps" else trajopt.mppi
    opts = dict(task.sampler, terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init)
    calls, rows = {}, {}
    for name, m in variants.items():
        def call(m=m):
            return fn(m, task.d0, task.cost, task.horizon, samples=samples, rng=jax.random.PRNGKey(0),
                      iterations=iterations, **opts)  # fmt: skip

        t = time.perf_counter()
        res = jax.block_until_ready(call())
        rows[name] = dict(first=time.perf_counter() - t, cost=float(res.cost), err=tasks.final_error(task, res.ctrl),
                          times=[], cpu=[])  # fmt: skip
        calls[name] = call
        print(f"  ab {name}: first call {rows[name]['first']:.1f} s, cost {rows[name]['cost']:.3f}", flush=True)
    load0 = os.getloadavg()[0]
    for _ in range(repeats):
        for name, call in calls.items():
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(call())
            rows[name]["times"].append(time.perf_counter() - t)
            rows[name]["cpu"].append(time.process_time() - c)
    load1 = os.getloadavg()[0]
    ref = statistics.median(rows["RK4, iterative solver"]["times"])
    out = []
    for name, r in rows.items():
        med = statistics.median(r["times"])
        n = iterations + 1
        out.append((name, f"{1e3 * med / n:.0f} (min {1e3 * min(r['times']) / n:.0f})",
                    f"{1e3 * statistics.median(r['cpu']) / n:.0f}", f"{ref / med:.2f}", f"{r['cost']:.3f}",
                    f"{r['err']:.2f}", f"{r['first']:.0f}"))  # fmt: skip
    print(f"\n{LABELS[planner]} ({samples} samples, {iterations} iterations, horizon {task.horizon}), "
          f"{repeats} interleaved rounds, load average {load0:.1f} -> {load1:.1f}:")  # fmt: skip
    print("\n".join(table_lines(AB_HEAD, out)))
    return out


AB_HEAD = ("model", "ms/iteration", "CPU ms/iteration", "speed-up", "cost", "error/tol (on RK4)", "first call s")


def report(quick: bool = False) -> str:
    """The docs/benchmarks.md section (benchmarks/report.py)."""
    args = ["--quick"] if quick else []
    table, mpc_table = main(args)
    cmd = "python benchmarks/planners.py" + (" --quick" if quick else "")
    load = f"load average {os.getloadavg()[0]:.1f} at the end" if hasattr(os, "getloadavg") else ""
    return "\n".join([
        HEADING, "",
        f"`{cmd}` (float64; iLQR budget {ILQR_ITERATIONS} iterations ({tasks.ACROBOT_OPEN_ILQR_ITERATIONS} on "
        f"acrobot_open, `Task.ilqr_iterations`), samplers {SAMPLING_ITERATIONS} with 256 "
        "samples over cubic spline knots; solved: the end state meets the task's goal check, error/tol <= 1; "
        f"ms/iteration: median of interleaved timed calls, no compilation; {load}).", "",
        *table_lines(HEAD, table), "",
        "MPC in closed loop (`trajopt.closed_loop`; real-time factor: simulated / wall seconds of one run, "
        "compilation excluded; error/tol of the plant's final state, the cartpole task's goal check; the acrobot's: "
        "the largest over the last second):", "",
        *table_lines(MPC_HEAD, mpc_table), ""])  # fmt: skip


def _cells(line: str) -> tuple[str, ...]:
    return tuple(c.strip() for c in line.strip().strip("|").split("|"))


def merge_rows(text: str, task_names, table) -> str:
    """`text` (a markdown page with the planners section, `HEADING`) with the rows of `task_names` in its planners
    table replaced by `table` (rows as `main` returns them), at the place of the first replaced row (appended when
    the table had none); every other row and line kept, the table realigned. Raises ValueError without a table."""
    lines = text.split("\n")
    try:
        start = next(i for i, ln in enumerate(lines) if ln.startswith(HEADING))
        first = next(i for i in range(start, len(lines)) if lines[i].startswith("| task "))
    except StopIteration:
        raise ValueError(f"no planners table (heading {HEADING!r} then a '| task' row) to merge into") from None
    end = next((i for i in range(first, len(lines)) if not lines[i].startswith("|")), len(lines))
    rows = [_cells(ln) for ln in lines[first + 2:end]]
    if _cells(lines[first]) != HEAD:
        raise ValueError(f"the planners table's columns {_cells(lines[first])} are not {HEAD}")
    mine = [i for i, r in enumerate(rows) if any(r[0].startswith(f"{t} (") for t in task_names)]
    at = mine[0] if mine else len(rows)
    kept = [r for i, r in enumerate(rows) if i not in set(mine)]
    at -= sum(1 for i in mine if i < at)
    rows = kept[:at] + [tuple(str(c) for c in r) for r in table] + kept[at:]
    return "\n".join(lines[:first] + table_lines(HEAD, rows) + lines[end:])


def merge_into(paths, task_names, table) -> None:
    """`merge_rows` into each file of `paths`, and a line noting the date, commit and tasks under its first line
    (the generator's `<!-- ... -->` stamp) or heading."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=os.path.dirname(os.path.abspath(__file__)), check=True).stdout.strip()  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    stamp = datetime.datetime.now().strftime("%Y-%m-%d %H:%M")
    load = f", load average {os.getloadavg()[0]:.1f} at the end" if hasattr(os, "getloadavg") else ""
    note = (f"<!-- planners rows of {', '.join(task_names)}: {stamp}, commit {commit}{load}, "
            f"`python benchmarks/planners.py --tasks {','.join(task_names)} --mpc-steps 0 --merge ...` -->")
    for path in paths:
        with open(path) as f:
            text = merge_rows(f.read(), task_names, table)
        lines = [ln for ln in text.split("\n") if not ln.startswith(note.split(":")[0] + ":")]  # the last note
        at = next(i for i, ln in enumerate(lines) if ln.startswith(HEADING))
        lines.insert(at, note)
        with open(path, "w") as f:
            f.write("\n".join(lines))
        print(f"merged the rows of {', '.join(task_names)} into {path}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tasks", default=",".join(t for t in tasks.TASKS if t != "acrobot"))
    p.add_argument("--planners", default="ilqr,ps,mppi")
    p.add_argument("--samples", type=int, default=256)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--iterations", type=int, default=None, help="override the iteration budgets")
    p.add_argument("--mpc-steps", type=int, default=300, help="cartpole closed-loop control steps (0: no MPC table)")
    p.add_argument("--mpc-tasks", default="cartpole,cartpole_copy,acrobot",
                   help="the closed-loop rows: cartpole, cartpole_copy (planned on an Euler copy), acrobot")
    p.add_argument("--acrobot-steps", type=int, default=ACROBOT_STEPS, help="acrobot closed-loop steps (0: none)")
    p.add_argument("--acrobot-planners", default="ilqr", help="planners of the acrobot's closed loop")
    p.add_argument("--quick", action="store_true", help="short horizons and budgets (a smoke test, no targets)")
    p.add_argument("--merge", nargs="+", default=None, metavar="FILE",
                   help="replace these tasks' rows of the planners table in each FILE (e.g. docs/benchmarks.md)")
    p.add_argument("--ab", action="store_true", help="only the A/B of solver paths and the Euler planning copy "
                   "(cartpole; --samples, --repeats, --iterations (default 3), --planners: its first sampler)")
    args = p.parse_args(argv)
    if args.ab:
        sampler = next((x for x in args.planners.split(",") if x in ("ps", "mppi")), "ps")
        return run_ab(args.samples, args.iterations or 3, max(args.repeats, 1), sampler), []
    if args.merge and args.quick:
        p.error("--merge records targets: not with --quick")
    makers = tasks.TASKS
    wanted = [s for s in args.planners.split(",") if s]
    table = []
    for tname in [s for s in args.tasks.split(",") if s]:
        task = makers[tname](20) if args.quick else makers[tname]()
        planners = [x for x in tasks.PLANNERS if x in wanted]
        samples = 16 if args.quick else args.samples
        iterations = 2 if args.quick else args.iterations
        rows = run_task(task, planners, samples, 1 if args.quick else args.repeats, iterations)
        for name, r in rows.items():
            med = statistics.median(r["times"])
            per = 1e3 * med / r["n"]
            table.append((f"{tname} ({task.horizon} steps)", LABELS[name] + ("" if name == "ilqr" else f" ({samples})"),
                          f"{r['used']}/{r['n']} ({r['reason']})", f"{r['c0']:.1f} -> {r['c1']:.1f}", f"{r['err']:.2f}",
                          "yes" if r["err"] <= 1.0 else "no", f"{per:.0f} (min {1e3 * min(r['times']) / r['n']:.0f})",
                          f"{r['first']:.0f}"))  # fmt: skip
    print()
    print("\n".join(table_lines(HEAD, table)))
    print(f"\njax {jax.__version__}, {jax.devices()[0].platform}, float64, samples {args.samples}; "
          f"ms/iteration: median of {args.repeats} interleaved timed calls / iterations")  # fmt: skip
    if args.merge:
        merge_into(args.merge, [s for s in args.tasks.split(",") if s], table)
    mpc_table = []
    mpc_tasks = args.mpc_tasks.split(",") if args.mpc_steps else []
    if "cartpole" in mpc_tasks:
        steps = 10 if args.quick else args.mpc_steps
        mpc_table = run_mpc(steps, 10 if args.quick else MPC_HORIZON)
    if "cartpole_copy" in mpc_tasks:
        mpc_table += run_mpc_copy(10 if args.quick else args.mpc_steps, 10 if args.quick else COPY_HORIZON)
    if "acrobot" in mpc_tasks and args.acrobot_steps:
        names = [x for x in tasks.PLANNERS if x in args.acrobot_planners.split(",")]
        mpc_table += run_mpc_acrobot(10 if args.quick else args.acrobot_steps, names)
    if mpc_table:
        print()
        print("\n".join(table_lines(MPC_HEAD, mpc_table)))
    return table, mpc_table


if __name__ == "__main__":
    main()
