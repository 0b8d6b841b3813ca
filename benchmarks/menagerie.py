"""Mesh-heavy manipulators: compile time, memory per environment and steps/s beside MuJoCo C (section of
docs/benchmarks.md).

    python benchmarks/menagerie.py [--menagerie DIR] [--batches 1 64 1024] [--models gripper robotiq panda]
    python benchmarks/menagerie.py --all --menagerie DIR [--timeout 600] [--batch 4] [--log FILE.jsonl]

DIR is a checkout of MuJoCo Menagerie (or the public subset `steadymingha/mujoco_menagerie`; also read from
$MJX_LITE_MENAGERIE); without it only the generated gripper of tests/meshheavy.py runs (Robotiq-sized meshes: a
16,802-vertex link whose hull has 842 vertices, a 144-gon pad). One process, float32, the persistent compilation
cache off. Per model and batch: `jax.jit(jax.vmap(mjl.step))` traced, lowered and compiled (wall and CPU seconds of
this process), XLA's temporary buffer (`compile().memory_analysis()`) and the Data bytes per environment, then the
steps/s of the compiled batch; MuJoCo C's `mj_step` steps/s on one core beside it (a Python loop over one MjData).

`--all` sweeps every MJCF file under DIR that MuJoCo loads, each in a fresh niced process with a timeout, in
float64: whether mjx_lite loads it (or the error it names), the CPU seconds of tracing and compiling
`jax.jit(jax.vmap(mjl.step))` at a small batch (getrusage of the process: all threads), XLA's temporary buffer per
environment, and that compiled step's forward pass (qacc, contacts) against mj_forward at qpos0, the first keyframe
and two random states.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import time

os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")  # compile times are measured

import jax
import jax.numpy as jp
import mujoco
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver  # noqa: E402
from tests.menagerie import batch_of, forward_diff, mujoco_loads, oracle_states  # noqa: E402
from tests.meshheavy import gripper  # noqa: E402

MODELS = {  # name -> (label, path relative to the Menagerie checkout or None: generated)
    "gripper": ("generated gripper (tests/meshheavy.py)", None),
    "robotiq": ("Menagerie robotiq_2f85/scene.xml", "robotiq_2f85/scene.xml"),
    "panda": ("Menagerie franka_emika_panda/scene.xml", "franka_emika_panda/scene.xml"),
}


def _load(name: str, menagerie: str | None):
    """(mjx_lite Model, MjModel) or None where the file is not available."""
    rel = MODELS[name][1]
    if rel is None:
        xml, assets = gripper()
        return mjl.load_mjcf_string(xml, assets), mujoco.MjModel.from_xml_string(xml, assets)
    if not menagerie or not os.path.isfile(os.path.join(menagerie, rel)):
        return None
    path = os.path.join(menagerie, rel)
    return mjl.load_mjcf(path), mujoco.MjModel.from_xml_path(path)


def _nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def mujoco_steps(mjm: mujoco.MjModel, seconds: float = 3.0) -> float:
    """MuJoCo C's steps/s on one core from the model's initial state (home keyframe if any)."""
    mjd = mujoco.MjData(mjm)
    if mjm.nkey:
        mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(50):
            mujoco.mj_step(mjm, mjd)
        n += 50
    return n / (time.perf_counter() - t0)


def ours(m, mjm: mujoco.MjModel, batch: int, steps: int) -> dict:
    d = mjl.make_data(m)
    if mjm.nkey:
        d = d.replace(qpos=jp.asarray(mjm.key_qpos[0], d.qpos.dtype), ctrl=jp.asarray(mjm.key_ctrl[0], d.ctrl.dtype))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
    f = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
    w0, c0 = time.perf_counter(), time.process_time()
    lowered = f.lower(m, db)
    w1 = time.perf_counter()
    compiled = lowered.compile()
    w2, c2 = time.perf_counter(), time.process_time()
    mem = compiled.memory_analysis()
    out = jax.block_until_ready(compiled(m, db))
    t0 = time.perf_counter()
    for _ in range(steps):
        out = compiled(m, out)
    jax.block_until_ready(out)
    dt = (time.perf_counter() - t0) / steps
    return {"trace": w1 - w0, "compile": w2 - w1, "cpu": c2 - c0, "temp": mem.temp_size_in_bytes / batch,
            "data": _nbytes(d), "sps": batch / dt, "ncon": int(np.max(np.asarray(out.ncon))),
            "nan": bool(np.any(~np.isfinite(np.asarray(out.qpos))))}  # fmt: skip


def _mesh_groups(m) -> str:
    """The box-mesh and mesh-mesh groups: candidates -> distance stage -> manifold stage (Config.broadphase_mesh_*)."""
    names = {int(mjl.types.GeomType.BOX): "box", int(mjl.types.GeomType.MESH): "mesh"}
    out = []
    for g in driver.pair_table(m).groups:
        if g.type1 in names and g.type2 == mjl.types.GeomType.MESH:
            out.append(f"{names[g.type1]}-mesh {len(g.geom1)} -> {g.npair_narrow} -> {g.npair_out}")
    return ", ".join(out)


def run(names, menagerie, batches, steps) -> dict:
    res = {}
    for n in names:
        loaded = _load(n, menagerie)
        if loaded is None:
            res[n] = None
            print(n, "skipped: no Menagerie checkout (--menagerie or $MJX_LITE_MENAGERIE)", flush=True)
            continue
        m, mjm = loaded
        r = {"nv": m.nv, "ngeom": m.ngeom, "nmesh": m.nmesh, "nconmax": m.nconmax, "njmax": m.njmax,
             "mujoco": mujoco_steps(mjm), "batches": {}, "groups": _mesh_groups(m)}  # fmt: skip
        for b in batches:
            r["batches"][b] = ours(m, mjm, b, steps)
            print(n, b, r["batches"][b], flush=True)
        res[n] = r
    return res


def _mb(b: float) -> str:
    return f"{b / 1e6:.2f} MB" if b >= 1e5 else f"{b / 1e3:.1f} kB"


def markdown(res: dict, cmd: str) -> str:
    rows = []
    for n, r in res.items():
        if r is None:
            rows.append(f"| {MODELS[n][0]} | not run: no Menagerie checkout given | | | | | | |")
            continue
        for b, o in r["batches"].items():
            rows.append(f"| {MODELS[n][0]} (nv {r['nv']}, {r['ngeom']} geoms, {r['nmesh']} meshes; contacts "
                        f"{r['nconmax']}, rows {r['njmax']}) | {b} | {o['trace']:.1f} + {o['compile']:.1f} "
                        f"({o['cpu']:.0f} CPU) | {_mb(o['temp'])} | {_mb(o['data'])} | {o['sps']:,.0f} | "
                        f"{r['mujoco']:,.0f} | {o['sps'] / r['mujoco']:.3g} |")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        "### Mesh-heavy manipulators (float32, CPU)",
        "",
        f"`{cmd}` ({datetime.date.today()}, {platform.machine()} {os.cpu_count()}-core CPU, load average {load:.1f};"
        f" jax {jax.__version__}, mujoco {mujoco.__version__}). `jax.jit(jax.vmap(mjl.step))` at each batch: "
        "trace + compile seconds (wall; CPU seconds of the process in brackets, persistent cache off), XLA's "
        "temporary buffer per environment during a step, Data bytes per environment, steps/s of the batch, and "
        "MuJoCo C's `mj_step` steps/s on one core.",
        "",
        "| model | batch | trace + compile s | temp / env | Data / env | steps/s | MuJoCo C steps/s | ratio |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Mesh groups per model (candidates -> pairs whose distance is computed -> pairs whose manifold is computed, "
        "`Config.broadphase_mesh_*`): " + "; ".join(f"{MODELS[n][0]}: {r['groups']}" for n, r in res.items() if r)
        + ".",
    ])  # fmt: skip


def report(quick: bool = False) -> str:
    menagerie = os.environ.get("MJX_LITE_MENAGERIE")
    # the generated gripper stands in for the Robotiq where no Menagerie checkout is given
    names = ["gripper"] if quick or not menagerie else ["robotiq", "panda"]
    batches = [1] if quick else [1, 64, 1024]
    cmd = "python benchmarks/menagerie.py" + (" --quick" if quick else f" --menagerie DIR --models {' '.join(names)}")
    return markdown(run(names, menagerie, batches, 3), cmd)


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def sweep_one(path: str, batch: int = 4, steps: int = 5) -> dict:
    """One file: load, compile jit(vmap(step)) at `batch` (float64), memory, forward vs mj_forward (see module doc)."""
    rec = {"path": path}
    mjm = mujoco.MjModel.from_xml_path(path)
    rec.update(nq=mjm.nq, nv=mjm.nv, ngeom=mjm.ngeom, nmesh=mjm.nmesh, neq=mjm.neq, nkey=mjm.nkey)
    c0 = _cpu()
    try:
        m = mjl.load_mjcf(path)
    except Exception as e:  # noqa: BLE001 - the sweep records what the loader names
        rec["load"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return rec
    rec["load"], rec["load_cpu"] = "ok", _cpu() - c0
    rec["nconmax"], rec["njmax"], rec["groups"] = int(m.nconmax), int(m.njmax), _mesh_groups(m)
    states = oracle_states(mjm)
    d0 = mjl.make_data(m)
    db = batch_of(d0, states, batch)
    f = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
    c0, w0 = _cpu(), time.perf_counter()
    lowered = f.lower(m, db)
    c1 = _cpu()
    compiled = lowered.compile()
    rec["trace_cpu"], rec["compile_cpu"], rec["wall"] = c1 - c0, _cpu() - c1, time.perf_counter() - w0
    rec["temp_per_env"] = compiled.memory_analysis().temp_size_in_bytes / batch
    rec["data_per_env"] = _nbytes(d0)
    out = jax.block_until_ready(compiled(m, db))
    diffs = [forward_diff(m, jax.tree.map(lambda x, i=i: x[i], out), s) for i, s in enumerate(states[:batch])]
    for k in ("qacc_err", "contacts_ok", "dist_err", "ncon"):
        rec[k] = [x[k] for x in diffs]
    rec["contact_diff"] = {i: (x["ours"], x["theirs"]) for i, x in enumerate(diffs) if not x["contacts_ok"]}
    t0 = time.perf_counter()
    for _ in range(steps):
        out = compiled(m, out)
    jax.block_until_ready(out)
    rec["sps"] = batch * steps / (time.perf_counter() - t0)
    rec["finite"] = bool(np.all(np.isfinite(np.asarray(out.qpos))))
    return rec


def sweep(menagerie: str, files: list[str] | None, batch: int, timeout: float, log: str | None) -> list[dict]:
    """Each file in a fresh `nice` process (`--one`) with a timeout; the records, also appended to `log` as JSON."""
    recs = []
    for rel in files or mujoco_loads(menagerie):
        cmd = ["nice", "-n", "10", sys.executable, os.path.abspath(__file__), "--one", os.path.join(menagerie, rel),
               "--batch", str(batch)]  # fmt: skip
        t0 = time.perf_counter()
        try:
            env = dict(os.environ, JAX_ENABLE_X64="1")
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
            lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
            err = " | ".join(p.stderr.strip().splitlines()[-2:])[:300]
            rec = json.loads(lines[-1]) if lines else {"load": f"crashed (rc {p.returncode}): {err}"}
        except subprocess.TimeoutExpired:
            rec = {"load": f"timed out after {timeout:.0f} s"}
        rec["path"], rec["total_wall"] = rel, time.perf_counter() - t0
        print(json.dumps(rec), flush=True)
        if log:
            with open(log, "a") as fh:
                fh.write(json.dumps(rec) + "\n")
        recs.append(rec)
    return recs


def sweep_markdown(recs: list[dict]) -> str:
    """The sweep's table: one row per file."""
    rows = ["| file | nv, geoms, meshes | mjx_lite | trace + compile CPU s | temp / env | Data / env "
            "| qacc err (qpos0, key, random, random) | contacts as MuJoCo's | max dist err |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for r in recs:
        dims = f"{r.get('nv', '')}, {r.get('ngeom', '')}, {r.get('nmesh', '')}"
        if "compile_cpu" not in r:
            rows.append(f"| {r['path']} | {dims} | {r.get('load', 'failed')} | | | | | | |")
            continue
        err = ", ".join(f"{e:.0e}" for e in r["qacc_err"])
        ok = ", ".join("yes" if c else f"no ({a} vs {b})" for c, (a, b) in zip(r["contacts_ok"], r["ncon"]))
        dist = max((e for e in r["dist_err"] if e == e), default=float("nan"))
        rows.append(f"| {r['path']} | {dims} | loads | {r['trace_cpu']:.0f} + {r['compile_cpu']:.0f} | "
                    f"{_mb(r['temp_per_env'])} | {_mb(r['data_per_env'])} | {err} | {ok} | {dist:.0e} |")  # fmt: skip
    return "\n".join(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--menagerie", default=os.environ.get("MJX_LITE_MENAGERIE"), help="Menagerie checkout")
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--batches", nargs="*", type=int, default=[1, 64, 1024])
    p.add_argument("--steps", type=int, default=3, help="timed steps per batch")
    p.add_argument("--quick", action="store_true", help="the gripper at batch 1")
    p.add_argument("--all", action="store_true", help="sweep every file under --menagerie that MuJoCo loads")
    p.add_argument("--files", nargs="*", help="with --all: these files (relative to --menagerie) only")
    p.add_argument("--batch", type=int, default=4, help="with --all: the batch compiled per file")
    p.add_argument("--timeout", type=float, default=600, help="with --all: seconds per file")
    p.add_argument("--log", help="with --all: append each file's record (JSON) here")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the sweep's worker: one file, one JSON line
    a = p.parse_args()
    if a.one:
        jax.config.update("jax_enable_x64", True)
        print(json.dumps(sweep_one(a.one, a.batch)), flush=True)
        return
    if a.all:
        print(sweep_markdown(sweep(a.menagerie, a.files, a.batch, a.timeout, a.log)))
        return
    names, batches = (["gripper"], [1]) if a.quick else (a.models, a.batches)
    cmd = "python benchmarks/menagerie.py " + " ".join(sys.argv[1:])
    print(markdown(run(names, a.menagerie, batches, a.steps), cmd))


if __name__ == "__main__":
    main()
