"""The 220-body pile with the sparse and the dense constraint Jacobian (section of docs/benchmarks.md).

    python benchmarks/pile.py [--batch 1 16] [--steps 20] [--layouts sparse dense] [--mjx-steps 2] [--quick]

One process, float32: for each `Config.efc_jacobian` layout, the bytes of one environment's Data (and its largest
fields), the time per stage of one step at batch 1 (collision, make_constraint, solve and the whole step, each
jitted alone from the same state), and steps/s of `jit(vmap(scan(step)))` at each batch, from the same initial
state (the bundled scene, bodies about to land; `--settle` steps first), with MuJoCo C's single-thread
`mj_step` over the same steps for reference, and MJX (`mujoco.mjx`, its own Data from `mjx.make_data`) at batch 1
over `--mjx-steps` steps when its predicted memory fits (half the available host memory; its Data is ~1 GB per
environment, a dense njmax x nv Jacobian among others; 0 skips it). Ratios are within this run; say how loaded
the machine was.
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite as mjl
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver.solve import solve

BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mjx_lite", "models", "pile.xml")


def _nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def _fields(d) -> list[tuple[int, str]]:
    out = [(np.asarray(getattr(d, k)).nbytes, k) for k in d.__dataclass_fields__ if k != "contact"]
    out.append((_nbytes(d.contact), "contact"))
    return sorted(out, reverse=True)


def _best(f, *args, repeats: int = 5) -> float:
    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(f(*args))
        best = min(best, time.perf_counter() - t0)
    return best


def stage_times(m, d) -> dict[str, float]:
    """Seconds per call of each stage at state d (batch 1), every stage jitted alone and returning only its own
    outputs (so that no stage pays for copying the whole Data)."""
    d_pos = jax.jit(fwd.fwd_position)(m, d)
    d_acc = jax.jit(lambda m, d: fwd.fwd_acceleration(m, fwd.fwd_actuation(m, fwd.fwd_velocity(m, d))))(m, d_pos)
    d_col = jax.jit(driver.collision)(m, d)
    f_col = jax.jit(lambda m, d: driver.collision(m, d).contact)
    f_con = jax.jit(lambda m, d: (lambda o: (o.efc_J, o.efc_J_colind, o.efc_D, o.efc_aref))(
        constraint.make_constraint(m, d)))  # fmt: skip
    f_sol = jax.jit(lambda m, d: (lambda o: (o.qacc, o.efc_force))(solve(m, d)))
    f_step = jax.jit(lambda m, d: mjl.step(m, d).qpos)
    return {"collision": _best(f_col, m, d), "make_constraint": _best(f_con, m, d_col), "solve": _best(f_sol, m, d_acc),
            "step": _best(f_step, m, d)}  # fmt: skip


def throughput(m, d, batch: int, steps: int, repeats: int = 3, step=mjl.step) -> tuple[float, float]:
    """(steps/s, compile seconds) of jit(vmap(scan(step))) over `batch` copies of d; batch 0: jit(scan(step)) of
    d itself (one environment, no vmap)."""

    def rollout(m, d):
        return jax.lax.scan(lambda d, _: (step(m, d), None), d, None, length=steps)[0]

    if batch == 0:
        t0 = time.perf_counter()
        f = jax.jit(rollout).lower(m, d).compile()
        compile_s = time.perf_counter() - t0
        return steps / _best(f, m, d, repeats=repeats), compile_s
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
    t0 = time.perf_counter()
    f = jax.jit(jax.vmap(rollout, in_axes=(None, 0))).lower(m, db).compile()
    compile_s = time.perf_counter() - t0
    wall = _best(f, m, db, repeats=repeats)
    return batch * steps / wall, compile_s


def mujoco_c(steps: int, settle: int) -> float:
    """MuJoCo C single-thread steps/s over the same steps."""
    import mujoco  # noqa: PLC0415 - a test dependency, only for the reference

    mjm = mujoco.MjModel.from_xml_path(BUNDLED)
    mjd = mujoco.MjData(mjm)
    for _ in range(settle):
        mujoco.mj_step(mjm, mjd)
    t0 = time.perf_counter()
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    return steps / (time.perf_counter() - t0)


def _available_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            return 1024 * int(next(ln.split()[1] for ln in f if ln.startswith("MemAvailable")))
    except (OSError, StopIteration, ValueError):
        return 0


# MJX's step on the pile peaks at about this many times its Data (measured: ~1.8 GB resident per environment of
# ~0.96 GB Data on the CPU, benchmarks/gpu_bench.py); with margin
MJX_PEAK_PER_DATA = 3.0


def mjx_reference(steps: int, state: dict | None) -> dict:
    """MJX at batch 1 over `steps` steps from the same state: Data bytes, compile and steps/s (or why not)."""
    import mujoco  # noqa: PLC0415
    from mujoco import mjx  # noqa: PLC0415

    if steps <= 0:
        return {}
    mjm = mujoco.MjModel.from_xml_path(BUNDLED)
    m = mjx.put_model(mjm)
    d = mjx.make_data(m)
    out = {"data_bytes": _nbytes(d), "nefc": int(d._impl.efc_J.shape[0]), "ncon": int(d._impl.contact.dist.shape[0])}
    need, avail = MJX_PEAK_PER_DATA * out["data_bytes"], _available_bytes() // 2
    if need > avail:
        why = f"predicted {need / 2**30:.1f} GiB > half the available memory ({avail / 2**30:.1f} GiB)"
        return {**out, "skipped": why}
    if state is not None:
        d = d.replace(**{k: jp.asarray(v, d.qpos.dtype) for k, v in state.items()})
    try:
        out["batch1"], out["steps"] = throughput(m, d, 1, steps, repeats=1, step=mjx.step), steps
    except Exception as e:  # noqa: BLE001 - reported, not hidden: MJX is a reference only
        out["skipped"] = f"{type(e).__name__}: {str(e)[:200]}"
    return out


def run(layouts=("sparse", "dense"), batches=(1, 16), steps: int = 20, settle: int = 0, mjx_steps: int = 2) -> dict:
    base = mjl.load_mjcf(BUNDLED)
    res = {"nv": base.nv, "njmax": base.njmax, "nconmax": base.nconmax, "layouts": {}}
    state = None
    for layout in layouts:
        m = mjl.configure(base, efc_jacobian=layout)
        d = mjl.make_data(m)
        if state is None:
            step = jax.jit(mjl.step)
            for _ in range(settle):
                d = step(m, d)
            state = dict(qpos=d.qpos, qvel=d.qvel, qacc_warmstart=d.qacc_warmstart)
        d = mjl.make_data(m).replace(**state)
        r = {"data_bytes": _nbytes(d), "largest": _fields(d)[:4], "efc_J": tuple(d.efc_J.shape)}
        r["stages"] = stage_times(m, d)
        r["unbatched"] = throughput(m, d, 0, steps)
        for b in batches:
            r[f"batch{b}"] = throughput(m, d, b, steps)
        res["layouts"][layout] = r
        print(layout, {k: v for k, v in r.items() if k != "largest"}, flush=True)
    res["mujoco_c"] = mujoco_c(steps, settle)
    res["mjx"] = mjx_reference(mjx_steps, state if settle else None)
    if res["mjx"]:
        print("mjx", res["mjx"], flush=True)
    return res


def _markdown(res: dict, cmd: str, batches, steps: int) -> str:
    lay = res["layouts"]
    rows = []
    for name, r in lay.items():
        st = r["stages"]
        tp = " | ".join(f"{r[f'batch{b}'][0]:.1f}" for b in batches)
        rows.append(f"| {name} {r['efc_J']} | {r['data_bytes'] / 1e6:.2f} | {1e3 * st['collision']:.1f} | "
                    f"{1e3 * st['make_constraint']:.1f} | {1e3 * st['solve']:.1f} | {1e3 * st['step']:.1f} | "
                    f"{r['unbatched'][0]:.1f} | {tp} | {r[f'batch{batches[0]}'][1]:.0f} |")  # fmt: skip
    ratio = ""
    if "sparse" in lay and "dense" in lay:
        ratio = ", ".join([f"one environment: {lay['sparse']['unbatched'][0] / lay['dense']['unbatched'][0]:.1f}x"]
                          + [f"batch {b}: {lay['sparse'][f'batch{b}'][0] / lay['dense'][f'batch{b}'][0]:.1f}x"
                             for b in batches])  # fmt: skip
        smaller = lay["dense"]["data_bytes"] / lay["sparse"]["data_bytes"]
        ratio = f"Sparse / dense steps/s: {ratio}; Data {smaller:.0f}x smaller."
    x = res.get("mjx", {})
    if "batch1" in x:
        ours = {n: r["batch1"][0] / x["batch1"][0] for n, r in lay.items() if "batch1" in r}
        mjx = (f"MJX (`mjx.make_data`: Data {x['data_bytes'] / 1e6:.0f} MB/env, efc rows {x['nefc']}), batch 1, "
               f"{x['steps']} steps: {x['batch1'][0]:.2f} steps/s (compile {x['batch1'][1]:.0f} s); mjx_lite / MJX at "
               "batch 1: " + ", ".join(f"{n} {v:.0f}x" for n, v in ours.items()) + ".")  # fmt: skip
    elif x:
        mjx = f"MJX (Data {x['data_bytes'] / 1e6:.0f} MB/env) not run: {x.get('skipped', '?')}."
    else:
        mjx = ""
    head = " | ".join(f"steps/s batch {b}" for b in batches)
    largest = "; ".join(f"{n}: " + ", ".join(f"{k} {b / 1e6:.2f} MB" for b, k in r["largest"][:3])
                        for n, r in lay.items())  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        "### Large scene: the 220-body pile, sparse vs dense constraint Jacobian (float32)",
        "",
        f"`{cmd}` ({datetime.date.today()}, {platform.machine()} {os.cpu_count()}-core CPU, load average "
        f"{load:.1f}; nv {res['nv']}, njmax {res['njmax']} rows, nconmax {res['nconmax']}). Stage times: best of "
        f"5 calls at batch 1, each stage jitted alone; throughput: `jit(scan(step))` of one environment and "
        f"`jit(vmap(scan(step)))` per batch, {steps} steps from the same state (under vmap the sparse rows' "
        f"gathers become batched gathers, which XLA's CPU backend runs slower at small batches: compare one "
        f"environment with batch 1); compile: the batch-{batches[0]} program, cold (persistent cache off unless "
        f"--cache). MuJoCo C, one thread, same steps: {res['mujoco_c']:.0f} steps/s.",
        "",
        f"| efc_J layout | Data MB/env | collision ms | make_constraint ms | solve ms | step ms | steps/s, one env "
        f"(no vmap) | {head} | compile s |",
        "| --- | --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in batches) + " | --- |",
        *rows,
        "",
        ratio + f" Largest Data fields: {largest}.",
        "",
        mjx,
    ])  # fmt: skip


def _cold() -> None:
    """Compile times are cold: JAX's persistent compilation cache (on by default in mjx_lite) is turned off."""
    jax.config.update("jax_enable_compilation_cache", False)


def report(quick: bool = False) -> str:
    _cold()
    batches, steps = ((1,), 5) if quick else ((1, 16), 20)
    res = run(batches=batches, steps=steps, mjx_steps=0 if quick else 2)
    cmd = "python benchmarks/pile.py" + (" --quick" if quick else "")
    return _markdown(res, cmd, batches, steps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, nargs="*", default=[1, 16])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--settle", type=int, default=0, help="steps taken (first layout) before measuring")
    p.add_argument("--layouts", nargs="*", default=["sparse", "dense"], choices=["sparse", "dense", "auto"])
    p.add_argument("--mjx-steps", type=int, default=2, help="MJX steps at batch 1 (0: skip MJX)")
    p.add_argument("--quick", action="store_true", help="batch 1, 5 steps, no MJX")
    p.add_argument("--cache", action="store_true", help="keep JAX's persistent compilation cache on")
    a = p.parse_args()
    if not a.cache:
        _cold()
    batches, steps = ((1,), 5) if a.quick else (tuple(a.batch), a.steps)
    res = run(tuple(a.layouts), batches, steps, a.settle, 0 if a.quick else a.mjx_steps)
    print(_markdown(res, "python benchmarks/pile.py " + " ".join(sys.argv[1:]), batches, steps))


if __name__ == "__main__":
    main()
