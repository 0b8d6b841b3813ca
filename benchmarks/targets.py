"""Issue 39's targets: real models at their own settings against MuJoCo C on all cores (section of docs/benchmarks.md).

    python benchmarks/targets.py [--quick]
    python benchmarks/targets.py --iterations PATH float32|float64     # one model's solver iterations (JSON)

Three tables, float32 unless stated:
1. Throughput: dm_control's cheetah, walker, hopper, quadruped, humanoid and dog and our ant (RK4, Newton at
   MuJoCo's defaults), each at the settings in its file, at batch 256 and 4096: `python -m mjx_lite.bench --model
   PATH --batch B --steps T --skip mjx --budget 60` (one process per row, cold compile; its trace + compile time
   in its own column; timed calls stop once they have taken 60 s, so that a batch-4096 call of minutes is timed
   once; a row stopped by the 1800 s limit reports the stages it finished), beside MuJoCo C on one thread and
   `mujoco.rollout` on all cores. Target: ours >= all cores, and no fall from batch 256 to 4096.
2. Solver iterations per step (`solver_niter`) from the same random initial states (qvel ~ 0.01 N(0, 1)): ours in
   float32 and float64, mean and max over environments and steps, and the mean over steps of the batch's maximum,
   which is what a `vmap`ped bounded `while_loop` runs; MuJoCo C's (float64) from the same states.
3. Where a step's time goes at batch 256 (XLA profile by pipeline stage, `benchmarks/profile_step.py`), and for
   the ant at batch 32, 256 and 1024.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import mujoco
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import throughput  # noqa: E402 - benchmarks/ is on the path

SUITE = throughput.SUITE
ANT = os.path.join(HERE, "models", "ant.xml")
# (label, path, steps per row): fewer steps where a step is slow, so that batch 4096 stays within minutes
MODELS = [
    ("dm_control cheetah", f"{SUITE}/cheetah.xml", 100),
    ("dm_control walker", f"{SUITE}/walker.xml", 100),
    ("dm_control hopper", f"{SUITE}/hopper.xml", 100),
    ("dm_control quadruped", f"{SUITE}/quadruped.xml", 20),
    ("dm_control humanoid", f"{SUITE}/humanoid.xml", 20),
    ("dm_control dog", f"{SUITE}/dog.xml", 10),
    ("ant (RK4, Newton 100 iterations, tolerance 1e-8)", ANT, 20),
]
BATCHES = (256, 4096)
QUICK_MODELS = [MODELS[0], MODELS[-1]]


# One row's process: trace, lower and XLA compile (minutes for the quadruped and the dog on a loaded 2-core CPU:
# the quadruped's trace alone took 20 CPU-s, 72 s wall at load 13), the first call, then timed calls for at most
# BUDGET_S seconds (one call of a batch-4096 rollout can take minutes), then MuJoCo C. A row stopped by the limit
# still reports its compile time and, when its first call finished, the steps/s of that call.
ROW_TIMEOUT_S = 1800
BUDGET_S = 60.0


def _rate(r: dict, batch: int, steps: int) -> tuple[float | None, str]:
    """(steps/s, how it was measured): the best timed call's, else the first call's (which includes the buffers'
    first allocation: a lower bound), else None."""
    if not isinstance(r, dict):
        return None, ""
    if r.get("steps_per_s") and "error" not in r:
        calls = r.get("timed_calls")
        if calls == 1:
            return r["steps_per_s"], "one timed call"
        return r["steps_per_s"], (f"best of {calls} calls" if calls is not None and calls < 5 else "")
    if r.get("first_call_s"):
        return batch * steps / r["first_call_s"], "first call only: a lower bound"
    return None, ""


def _compile(r: dict) -> str:
    """Trace + lower and XLA compile wall seconds, and the CPU seconds of the three, of one row's process."""
    if not isinstance(r, dict) or "compile_s" not in r:
        return "-"
    cpu = f" ({r['jit_cpu_s']:.0f} CPU-s)" if "jit_cpu_s" in r else ""
    return f"{r['trace_s'] + r['lower_s']:.0f} + {r['compile_s']:.0f} s{cpu}"


def _mujoco_c(path: str, batch: int, steps: int) -> dict:
    from mjx_lite.bench import bench_mujoco_c  # noqa: PLC0415 - imports JAX, only for a stopped row

    return bench_mujoco_c(path, batch, steps, 0)


def _settings(path: str) -> str:
    mjm = mujoco.MjModel.from_xml_path(path)
    o = mjm.opt
    integ = {0: "Euler", 1: "RK4", 2: "implicit", 3: "implicitfast"}.get(int(o.integrator), str(o.integrator))
    solver = {0: "PGS", 1: "CG", 2: "Newton"}.get(int(o.solver), str(o.solver))
    extra = f", noslip {o.noslip_iterations}" if o.noslip_iterations else ""
    return f"nv {mjm.nv}, {integ}, {solver} {o.iterations} it{extra}, dt {o.timestep:g}"


def niter_rollout(m, batch: int, steps: int):
    """(roll, db): a batch of `batch` copies of make_data(m) with random qvel ~ 0.01 N(0, 1) (seed 0), and a jitted
    `steps`-step vmapped rollout of it returning (final Data, solver_niter (steps, batch))."""
    import jax  # noqa: PLC0415 - the caller chooses x64 through the environment
    import jax.numpy as jp  # noqa: PLC0415

    import mjx_lite as mjl  # noqa: PLC0415

    d = mjl.make_data(m)
    qvel = 0.01 * np.random.default_rng(0).standard_normal((batch, m.nv))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d).replace(qvel=jp.asarray(qvel, d.qvel.dtype))

    @jax.jit
    def roll(db):
        def body(d, _):
            d = jax.vmap(mjl.step, in_axes=(None, 0))(m, d)
            return d, d.solver_niter

        return jax.lax.scan(body, db, None, length=steps)

    return roll, db


def iterations(path: str, batch: int = 64, steps: int = 50, c_envs: int = 16) -> dict:
    """Solver iterations of ours (the dtype JAX is set to) and MuJoCo C's from the same random initial states."""
    import mjx_lite as mjl  # noqa: PLC0415

    roll, db = niter_rollout(mjl.configure(mjl.load_mjcf(path)), batch, steps)
    ours = np.asarray(roll(db)[1])  # (steps, batch)
    mjm = mujoco.MjModel.from_xml_path(path)
    mjd = mujoco.MjData(mjm)
    c = []
    for i in range(min(batch, c_envs)):
        mujoco.mj_resetData(mjm, mjd)
        mjd.qvel[:] = np.asarray(db.qvel[i], np.float64)  # the same random initial velocities
        for _ in range(steps):
            mujoco.mj_step(mjm, mjd)
            c.append(int(mjd.solver_niter[0]))
    return {"mean": float(ours.mean()), "max": int(ours.max()), "batch_max_mean": float(ours.max(1).mean()),
            "c_mean": float(np.mean(c)), "c_max": int(np.max(c))}  # fmt: skip


def _iterations_subprocess(path: str, dtype: str) -> dict:
    env = {**os.environ, "JAX_ENABLE_X64": "1" if dtype == "float64" else "0"}
    cmd = [sys.executable, os.path.abspath(__file__), "--iterations", path, dtype]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    except subprocess.TimeoutExpired:
        return {"error": "no result in 1800 s"}
    if p.returncode != 0:
        return {"error": p.stderr.strip().splitlines()[-1][:100] if p.stderr.strip() else f"exit {p.returncode}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def _profile_subprocess(path: str, batch: int, steps: int) -> tuple[list, float] | str:
    code = (f"import sys, json; sys.path.insert(0, {HERE!r}); import profile_step; "
            f"rows, wall = profile_step.profile({path!r}, {batch}, 2, steps={steps}); "
            "print(json.dumps([rows, wall]))")  # fmt: skip
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired:
        return "no result in 1800 s"
    if p.returncode != 0:
        return (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1][:100]
    rows, wall = json.loads(p.stdout.strip().splitlines()[-1])
    return rows, wall


def _shares(rows: list, wall: float, top: int = 4) -> str:
    total = sum(r[2] for r in rows) or 1.0
    parts = [f"{k.replace('forward/', '')} {100 * t / total:.0f}%" for k, _, t, _ in rows[:top]]
    return f"{wall:.2f} ms per step; " + ", ".join(parts)


def report(quick: bool = False) -> str:
    models = QUICK_MODELS if quick else MODELS
    batches = (16, 64) if quick else BATCHES
    thr, its, prof = [], [], []
    for label, path, steps in models:
        steps = 5 if quick else steps
        settings = _settings(path)
        res = {b: throughput.run(path, [], b, steps, skip=("mjx",), timeout=ROW_TIMEOUT_S, budget=BUDGET_S)
               for b in batches}  # fmt: skip
        rates = {b: _rate(res[b].get("mjx_lite", {}), b, steps) for b in batches}
        growth = f"{rates[batches[1]][0] / rates[batches[0]][0]:.2f}" if all(r[0] for r in rates.values()) else "-"
        for b in batches:
            ours = res[b].get("mjx_lite", {})
            c = res[b].get("mujoco_c") or _mujoco_c(path, b, steps)  # a stopped row has not run MuJoCo C yet
            (o, how), allc = rates[b], c.get("rollout_steps_per_s")
            err = ours.get("error", "") if isinstance(ours, dict) else ""
            err = err or str(res[b].get("error", ""))
            ratio = f"{o / allc:.3f}" if o and allc else "-"
            note = "; ".join(x for x in (how, err[-80:]) if x)
            thr.append(f"| {label} ({settings}) | {b} | {throughput._k(o)}{' (' + note + ')' if note else ''} | "
                       f"{_compile(ours)} | {throughput._k(c.get('single_thread_steps_per_s'))} | "
                       f"{throughput._k(allc)} | {ratio} | {growth if b == batches[1] else ''} |")
        row = [label]
        for dtype in ("float32", "float64"):
            r = _iterations_subprocess(path, dtype)
            row.append(r.get("error", f"{r.get('mean', 0):.2f} / {r.get('max', 0)} / {r.get('batch_max_mean', 0):.2f}"))
            c = r
        row.append(f"{c['c_mean']:.2f} / {c['c_max']}" if "c_mean" in c else "-")
        its.append("| " + " | ".join(row) + " |")
        pb = 16 if quick else 256
        p = _profile_subprocess(path, pb, 2 if quick else 4)
        prof.append(f"| {label} | {pb} | {p if isinstance(p, str) else _shares(*p)} |")
    if not quick:
        for b in (32, 1024):
            p = _profile_subprocess(ANT, b, 4)
            prof.append(f"| {models[-1][0]} | {b} | {p if isinstance(p, str) else _shares(*p)} |")
    return "\n".join([
        "### Real models at their own settings against MuJoCo C on all cores (issue 39's targets, float32)",
        "",
        "`python benchmarks/targets.py` (rows: `python -m mjx_lite.bench --model PATH --batch B --steps T --skip mjx "
        f"--budget {BUDGET_S:g}`, one process per row, cold compiles, stopped after {ROW_TIMEOUT_S} s; random initial "
        "qvel ~ 0.01 N(0, 1); steps/s from the best of up to 5 timed calls, fewer once they have taken "
        f"{BUDGET_S:g} s; trace + compile: wall seconds of trace and lowering, of XLA's compile, and the CPU seconds "
        "of the three). Target: mjx_lite >= "
        "`mujoco.rollout` on all cores (ratio >= 1), and steps/s that do not fall from batch "
        f"{batches[0]} to {batches[1]} (the last column: steps/s at {batches[1]} / at {batches[0]}).",
        "",
        "| model (its own settings) | batch | mjx_lite steps/s | mjx_lite trace + compile | MuJoCo C 1 thread "
        f"| `mujoco.rollout` all cores | mjx_lite / all cores | {batches[1]} / {batches[0]} |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *thr,
        "",
        "Solver iterations per step (`python benchmarks/targets.py --iterations PATH DTYPE`: 50 steps of 64 "
        "environments from the random states above; MuJoCo C: 16 of the same environments, float64). Ours: mean / "
        "max / mean over steps of the batch's maximum (the trip count of a `vmap`ped bounded while loop).",
        "",
        "| model | mjx_lite float32 | mjx_lite float64 | MuJoCo C mean / max |",
        "| --- | --- | --- | --- |",
        *its,
        "",
        "Where a step's time goes (`benchmarks/profile_step.py --model PATH --batch B --steps 4`: XLA profile by "
        "pipeline stage, from the state after 50 MuJoCo steps; unprofiled ms per step of the whole batch and the "
        "four largest stages' share of the profiled time).",
        "",
        "| model | batch | time per step, largest stages |",
        "| --- | --- | --- |",
        *prof,
    ])


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--iterations":
        print(json.dumps(iterations(sys.argv[2])))
    else:
        import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

        _args.check(__doc__)  # --help or a mistyped option: the usage, not a run of hours
        print(report(quick="--quick" in sys.argv))
