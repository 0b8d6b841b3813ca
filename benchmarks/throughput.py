"""Throughput and compile time against MJX and MuJoCo C (section of docs/benchmarks.md).

    python benchmarks/throughput.py [--quick]

Runs `python -m mjx_lite.bench` (one process per configuration: jit(vmap(scan(step))), float32, cold compiles)
on the models of the issue's targets and prints a markdown table: steps/s of mjx_lite, MJX, MuJoCo C (one
thread) and `mujoco.rollout` (all cores), the ratio to MJX, and trace / XLA compile times of both JAX engines.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import mujoco
from lxml import etree

MJX = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
SUITE = os.path.join(os.path.dirname(os.path.dirname(mujoco.__file__)), "dm_control", "suite")


def quadruped_walk() -> str:
    """dm_control's quadruped as its walk and run tasks build it (`quadruped.make_model()`): no terrain height
    field, no rangefinders, no walls, ball or target. Written next to a link to the suite's `common/` assets;
    returns the file's path. (MJX cannot load the full quadruped.xml: no height-field/cylinder collisions.)"""
    root = etree.parse(os.path.join(SUITE, "quadruped.xml")).getroot()
    doomed = root.xpath(".//geom[@name='terrain' or starts-with(@name, 'wall')] | .//body[@name='ball']"
                        " | .//site[@name='target'] | .//sensor/rangefinder")  # fmt: skip
    for el in doomed:
        el.getparent().remove(el)
    folder = tempfile.mkdtemp(prefix="quadruped_walk_")
    os.symlink(os.path.join(SUITE, "common"), os.path.join(folder, "common"))
    path = os.path.join(folder, "quadruped_walk.xml")
    with open(path, "wb") as f:
        f.write(etree.tostring(root))
    return path

# (label, path, disable flags (None: constraints on), batches, steps)
CONFIGS = [
    ("mjx humanoid (off)", f"{MJX}/humanoid/humanoid.xml", ["constraint"], (256, 4096), 100),
    ("mjx humanoid (on, its own settings)", f"{MJX}/humanoid/humanoid.xml", [], (256, 4096), 100),
    ("dm_control walker (off)", f"{SUITE}/walker.xml", ["constraint"], (256, 4096), 100),
    ("dm_control cheetah (off)", f"{SUITE}/cheetah.xml", ["constraint"], (256, 4096), 100),
    ("dm_control cheetah (on, 100 iterations)", f"{SUITE}/cheetah.xml", [], (256,), 100),
    ("dm_control quadruped, walk task's model (off)", "quadruped_walk", ["constraint"], (256, 4096), 100),
    ("dm_control quadruped.xml (off; 20 rangefinders over a 201 x 201 height field)", f"{SUITE}/quadruped.xml",
     ["constraint"], (256,), 100),
    ("mjx barkour_v0 (on; height field)", f"{MJX}/barkour_v0/assets/barkour_v0_mjx.xml", [], (256,), 100),
    ("mjx convex.xml (on; meshes)", f"{MJX}/convex.xml", [], (64,), 50),
]
QUICK = [("mjx humanoid (off)", f"{MJX}/humanoid/humanoid.xml", ["constraint"], (16,), 10)]


# A run that takes longer is taken as hung: XLA:CPU's batched LAPACK Cholesky (jax.scipy.linalg.cho_factor under vmap)
# can deadlock on the intra-op thread pool of a 2-core machine (seen in MJX's walker program at batch 4096: every
# thread waiting in jax::ParallelBatchMap); the row is then rerun without MJX and says so. (The slowest compile of a
# row that finished, MJX's humanoid with contacts at batch 4096, took 11 s.)
RUN_TIMEOUT_S = 240


def run(path: str, disable: list[str], batch: int, steps: int, skip: tuple[str, ...] = (),
        timeout: float = RUN_TIMEOUT_S, budget: float | None = None) -> dict:
    """One `python -m mjx_lite.bench` process (its JSON). `timeout`: seconds for the whole process; `budget`: its
    `--budget` (seconds of timed calls per engine). A process stopped by the timeout returns what its partial JSON
    holds (each engine's compile timings and first call, when it got that far) with an "error" naming the stage it
    had reached, so a row that is slow rather than hung reports the stages it finished."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    cmd = [sys.executable, "-m", "mjx_lite.bench", "--model", path, "--batch", str(batch), "--steps", str(steps),
           "--repeats", "5", "--json", out, "--disable", *disable]  # fmt: skip
    if budget is not None:
        cmd += ["--budget", str(budget)]
    if skip:
        cmd += ["--skip", *skip]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        part = _partial(out)
        if "mjx" in skip:
            return {"mjx_lite": _stopped(part.get("mjx_lite"), timeout, part.get("partial"))}
        res = run(path, disable, batch, steps, skip=("mjx", *skip), timeout=timeout, budget=budget)
        res["mjx"] = {"error": f"hung (no result in {timeout:.0f} s)"}
        return res
    if proc.returncode != 0:
        return {"error": proc.stderr[-500:]}
    with open(out) as f:
        return json.load(f)


def _partial(out: str) -> dict:
    try:
        with open(out) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def _stopped(r: dict | None, timeout: float, stage: str | None) -> dict:
    """An engine's partial result, with the error a stopped run gets: which stage it had finished."""
    if not r:
        return {"error": f"no result in {timeout:.0f} s (not compiled)"}
    done = "compiled" if stage == "compiled" or "first_call_s" not in r else "first call done"
    return {**r, "error": f"stopped at {timeout:.0f} s ({done})"}


def _k(x) -> str:
    if x is None:
        return "-"
    return f"{x / 1000:.1f}k" if x >= 1000 else f"{x:.3g}"


def _cell(r: dict, key: str) -> float | None:
    return r.get(key) if isinstance(r, dict) and "error" not in r else None


def report(quick: bool = False) -> str:
    rows = []
    for label, path, disable, batches, steps in QUICK if quick else CONFIGS:
        if path == "quadruped_walk":
            path = quadruped_walk()
        if not os.path.exists(path):
            rows.append(f"| {label} | - | missing model {path} |||||||")
            continue
        for batch in batches:
            res = run(path, disable, batch, steps)
            ours, mjx, c = res.get("mjx_lite", {}), res.get("mjx", {}), res.get("mujoco_c", {})
            o, x = _cell(ours, "steps_per_s"), _cell(mjx, "steps_per_s")
            ratio = f"{o / x:.2f}x" if o and x else ("MJX " + str(mjx.get("error", "-"))[:60] if o else "-")
            comp = (f"{_cell(ours, 'trace_s') or 0:.1f} + {_cell(ours, 'compile_s') or 0:.1f} s / "
                    f"{_cell(mjx, 'trace_s') or 0:.1f} + {_cell(mjx, 'compile_s') or 0:.1f} s") if o and x else "-"
            err = ours.get("error", "") if isinstance(ours, dict) else ""
            rows.append(f"| {label} | {batch} | {_k(o)}{' (' + err[:60] + ')' if err else ''} | {_k(x)} | {ratio} | "
                        f"{_k(c.get('single_thread_steps_per_s'))} | {_k(c.get('rollout_steps_per_s'))} | {comp} | "
                        f"{ours.get('data_bytes_per_env', 0) / 1e3:.1f} / {mjx.get('data_bytes_per_env', 0) / 1e3:.1f}"
                        " |")  # fmt: skip
    return "\n".join([
        "### Throughput and compile time (float32)",
        "",
        "`python benchmarks/throughput.py` (each row: `python -m mjx_lite.bench --model PATH --batch B --steps T "
        "[--disable constraint]`, one process per row, cold compiles). steps/s = batch x steps / wall time of a warm "
        "`jit(vmap(scan(step)))`; compile = trace (Python) + XLA compile, mjx_lite / MJX; Data kB per environment "
        "mjx_lite / MJX.",
        "",
        "| model (constraints) | batch | mjx_lite steps/s | MJX steps/s | ratio | MuJoCo C 1 thread | `mujoco.rollout` "
        "all cores | compile mjx_lite / MJX | Data kB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ])


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__)
    print(report(quick="--quick" in sys.argv))
