"""Scaling over devices: one batch sharded over 1, 2 and 4 forced CPU devices with mjx_lite.parallel.

    python benchmarks/parallel.py [--model legged] [--batch 256] [--steps 100] [--devices 1 2 4] [--quick]
    python benchmarks/parallel.py --run [--distributed [--coordinator HOST:PORT --num-processes N --process-id I]]
        [--model NAME|PATH] [--batch 4096] [--steps 100]     # one sharded rollout on whatever devices there are

Each device count runs in its own process (`XLA_FLAGS=--xla_force_host_platform_device_count=N`, the persistent
compilation cache off so that compile times are cold): `parallel.rollout_fn` (jit(vmap(scan(step))) with the batch
sharded over an N-device mesh, one replicated model), float32, the same initial states for every N. Reported per
N: compile time, steps/s (batch * steps / best of 3 warm runs), the speed-up over one device, and the largest
|qpos| difference of the final states from the one-device run (float rounding across device counts; see
docs/parallel.md).

`--run` is the same rollout on every device JAX sees (all GPUs of a node, every host of a TPU pod slice with
`--distributed`): the commands are in docs/parallel.md.

A forced CPU "device" is a share of the same processor, not extra hardware: on a machine with C cores, N devices
can at best approach min(N, C) times one device, and XLA:CPU may already use several cores for one device.

Keep the per-device batch small (the default 256 over 2 or 4 devices) when N >= C: with JAX 0.10.2, XLA:CPU runs
the devices' programs on its intra-op pool (C threads), JAX's batched LAPACK kernels (Cholesky in the solver) split
a large batch into tasks on that same pool and wait for them, and with every pool thread so waiting the run
deadlocks (seen: `legged`, batch 2048 over 2 devices on 2 cores, with or without --xla_cpu_multi_thread_eigen=false).
A device count that does not finish within the timeout is reported as hung.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(model: str, batch: int, steps: int, repeats: int, out: str | None = None, distributed: bool = False,
        coordinator: str | None = None, num_processes: int | None = None, process_id: int | None = None) -> dict:
    """One sharded rollout over every device of every process (`--run`; the scaling measurement's worker)."""
    import jax  # noqa: PLC0415 - after XLA_FLAGS

    if distributed:  # before anything starts JAX's backend (`import mjx_lite` does, for now)
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator, num_processes, process_id)
    import numpy as np  # noqa: PLC0415

    import mjx_lite as mjl  # noqa: PLC0415
    from mjx_lite import parallel  # noqa: PLC0415

    m = mjl.load_mjcf(model)
    d0 = mjl.make_data(m)
    mesh = parallel.make_mesh()

    def init(index):  # environment i: its own generator, so the batch does not depend on the device count
        rows = [np.random.default_rng(int(i)) for i in index]
        qvel = np.stack([0.1 * g.standard_normal(m.nv) for g in rows]).astype(d0.qvel.dtype)
        ctrl = np.stack([g.uniform(-0.5, 0.5, m.nu) for g in rows]).astype(d0.ctrl.dtype)
        return parallel.broadcast(d0, len(index)).replace(qvel=qvel, ctrl=ctrl)

    mr = parallel.replicate(m, mesh)
    db = parallel.make_batch(init, batch, mesh)
    f = parallel.rollout_fn(mesh, steps)
    t0 = time.perf_counter()
    c = f.lower(mr, db).compile()
    compile_s = time.perf_counter() - t0
    d, _ = c(mr, db)
    jax.block_until_ready(d)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        d, _ = c(mr, db)
        jax.block_until_ready(d)
        best = min(best, time.perf_counter() - t0)
    qpos = parallel.to_host(d.qpos)
    res = {"devices": jax.device_count(), "processes": jax.process_count(), "device_kind": jax.devices()[0].device_kind,
           "batch": batch, "steps": steps, "compile_s": compile_s, "run_s": best, "steps_per_s": batch * steps / best,
           "finite": bool(np.isfinite(qpos).all()), "dtype": str(qpos.dtype)}  # fmt: skip
    if jax.process_index() == 0:
        if out:
            np.save(out, qpos)
        print(json.dumps(res), flush=True)
    if distributed:
        jax.distributed.shutdown()
    return res


def measure(model: str, batch: int, steps: int, devices: list[int], repeats: int = 3,
            timeout_s: float = 1800) -> list[dict]:  # fmt: skip
    import tempfile  # noqa: PLC0415

    import numpy as np  # noqa: PLC0415

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in devices:
            env = dict(os.environ)
            flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
            env.update(XLA_FLAGS=" ".join(flags + [f"--xla_force_host_platform_device_count={n}"]),
                       JAX_PLATFORMS="cpu", MJX_LITE_COMPILATION_CACHE="0",
                       PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))  # fmt: skip
            env.pop("JAX_ENABLE_X64", None)
            out = os.path.join(tmp, f"q{n}.npy")
            cmd = [sys.executable, os.path.abspath(__file__), "--run", "--model", model, "--batch", str(batch),
                   "--steps", str(steps), "--repeats", str(repeats), "--out", out]  # fmt: skip
            try:
                p = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout_s)
            except subprocess.TimeoutExpired:  # see the module docstring: XLA:CPU can deadlock
                rows.append({"devices": n, "error": f"no result in {timeout_s} s (hung)"})
                print(f"[parallel] {n} devices: no result in {timeout_s} s", flush=True)
                continue
            if p.returncode:
                raise RuntimeError(f"{n} devices failed:\n{p.stderr[-3000:]}")
            row = json.loads([ln for ln in p.stdout.splitlines() if ln.startswith("{")][-1])
            row["qpos"] = np.load(out)
            rows.append(row)
            print(f"[parallel] {n} devices: {row['steps_per_s']:.0f} steps/s, compile {row['compile_s']:.1f} s",
                  flush=True)  # fmt: skip
    ok = [r for r in rows if "qpos" in r]
    if ok:
        base, q0 = ok[0]["steps_per_s"], ok[0]["qpos"]
        for r in ok:
            r["speedup"] = r["steps_per_s"] / base
            r["max_qpos_diff"] = float(np.max(np.abs(r["qpos"] - q0)))
            r["bitwise"] = bool(np.array_equal(r["qpos"], q0))
        for r in ok:
            del r["qpos"]
    return rows


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"


def report(quick: bool = False, model: str = "legged", batch: int | None = None, steps: int | None = None,
           devices: tuple[int, ...] = (1, 2, 4)) -> str:  # fmt: skip
    batch = batch or (32 if quick else 256)
    steps = steps or (20 if quick else 100)
    load0 = _load()
    rows = measure(model, batch, steps, list(devices))
    cmd = f"python benchmarks/parallel.py --model {model} --batch {batch} --steps {steps} " + " ".join(
        ["--devices", *map(str, devices)]
    )
    lines = [
        "### Scaling over devices (mjx_lite.parallel, forced CPU devices)",
        "",
        f"`{cmd}` ({datetime.date.today()}; {os.cpu_count()} cores, {platform.machine()}, load average {load0} "
        f"before and {_load()} after: the machine was shared). float32, `parallel.rollout_fn`, the `{model}` model, "
        f"batch {batch} split evenly, {steps} steps, best of 3 warm runs; compile cold.",
        "",
        "| devices | steps/s | speed-up vs 1 | compile | max \\|qpos\\| diff vs 1 device |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['devices']} | {r['error']} | | | |")
            continue
        diff = "bitwise equal" if r["bitwise"] else f"{r['max_qpos_diff']:.1e}"
        lines.append(f"| {r['devices']} | {r['steps_per_s']:.0f} | {r['speedup']:.2f}x | {r['compile_s']:.1f} s "
                     f"| {diff} |")  # fmt: skip
    lines += [
        "",
        f"A forced CPU device is a share of the same {os.cpu_count()}-core processor, not more hardware: at best "
        f"min(N, {os.cpu_count()})x, less when XLA:CPU already spreads one device's work over the cores or other "
        "jobs hold them. These numbers check that sharding costs nothing and that the devices do run at once; real "
        "scaling is over GPUs/TPUs (docs/parallel.md).",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="legged")
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--steps", type=int, default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--devices", type=int, nargs="*", default=[1, 2, 4])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--run", action="store_true", help="one sharded rollout over every device of every process")
    p.add_argument("--distributed", action="store_true", help="with --run: jax.distributed.initialize first")
    p.add_argument("--coordinator", help="host:port of process 0 (not needed on TPU pods, SLURM, Open MPI)")
    p.add_argument("--num-processes", type=int)
    p.add_argument("--process-id", type=int)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--worker", dest="run", action="store_true", help=argparse.SUPPRESS)  # older name of --run
    a = p.parse_args(argv)
    if a.run:
        run(a.model, a.batch or 4096, a.steps or 100, a.repeats, a.out, a.distributed, a.coordinator,
            a.num_processes, a.process_id)
        return
    print(report(a.quick, a.model, a.batch, a.steps, tuple(a.devices)))


if __name__ == "__main__":
    main()
