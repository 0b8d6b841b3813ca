"""Compile time of the planners: iLQR on the cartpole swing-up and the closed-loop iLQR MPC (`trajopt.mpc`), at the
sizes of the planning notebook's small mode (notebooks/planning.ipynb).

    python benchmarks/planner_compile.py [--opt0] [--task cartpole|acrobot]

For each program: the trace + lowering (`jit(...).lower`) and the XLA compile (`.compile()`) timed apart, in CPU
seconds of this process (user + system: a loaded machine inflates wall time more than CPU time) and wall seconds,
and the number of HLO instructions of the compiled program. --opt0: XLA:CPU at --xla_backend_optimization_level=0,
as the test suite and the notebook's small mode run. --task: the `trajopt.tasks` task (default cartpole; both RK4).
float64, no persistent compilation cache.
"""

from __future__ import annotations

import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _args import check  # noqa: E402

check(__doc__, flags=("--opt0",), valued=("--task",))
if "--opt0" in sys.argv and "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
os.environ["MJX_LITE_COMPILATION_CACHE"] = "0"

import importlib  # noqa: E402

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402

from mjx_lite import trajopt  # noqa: E402
from mjx_lite.trajopt import tasks  # noqa: E402

_ilqr = importlib.import_module("mjx_lite.trajopt.ilqr")
_mpc = importlib.import_module("mjx_lite.trajopt.mpc")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def measure(name: str, fn, *args, **static) -> None:
    c0, w0 = _cpu(), time.perf_counter()
    lowered = fn.lower(*args, **static)
    c1, w1 = _cpu(), time.perf_counter()
    compiled = lowered.compile()
    c2, w2 = _cpu(), time.perf_counter()
    n = len(re.findall(r"^\s+\S+ = ", compiled.as_text(), re.M))
    print(f"{name:44s} lower {c1 - c0:6.1f} s CPU ({w1 - w0:6.1f} wall)  compile {c2 - c1:6.1f} s CPU "
          f"({w2 - w1:6.1f} wall)  {n} HLO instructions", flush=True)  # fmt: skip
    jax.clear_caches()


def main() -> None:
    name = sys.argv[sys.argv.index("--task") + 1] if "--task" in sys.argv else "cartpole"
    if name not in ("cartpole", "acrobot"):
        raise SystemExit(f"--task must be cartpole or acrobot, not {name!r}")
    task = tasks.TASKS[name](30)
    dt = task.ctrl_init.dtype
    scalars = (jp.asarray(1e-6, dt), jp.asarray(_ilqr.DEFAULT_ALPHAS, dt), jp.asarray(_ilqr.DEFAULT_TOLERANCE, dt))
    measure(f"iLQR {name}, horizon 30, 3 iterations", _ilqr._ilqr, task.m, task.d0, task.ctrl_init, *scalars,
            cost=task.cost, terminal_cost=task.terminal_cost, iterations=3, qp_iterations=8)  # fmt: skip
    mpc_task = tasks.TASKS[name](10)

    def planner(m, d, u):
        return trajopt.ilqr(m, d, mpc_task.cost, 10, iterations=1, ctrl_init=u, terminal_cost=mpc_task.terminal_cost)

    measure(f"MPC {name}, iLQR horizon 10 x 1 it., 10 steps", _mpc._mpc, task.m, task.m, task.d0,
            mpc_task.ctrl_init, planner=planner, steps=10, replan_every=1, feedback=True)  # fmt: skip


if __name__ == "__main__":
    main()
