"""GPU checks and benchmarks: mjx_lite beside MJX on the same GPU in the same run, in a fixed time budget.

    python benchmarks/gpu_bench.py [--out DIR] [--budget 420] [--models humanoid barkour cheetah pile] [--tiny]

Run through `benchmarks/gpu.sh` on the GPU machine (it installs the carried wheels first); `--tiny` (batch 4, 5
steps, everything on the CPU when JAX_PLATFORMS=cpu) checks the script itself in a few minutes.

What it measures, per model (mjx humanoid with contacts, the barkour quadruped of MJX's test data, dm_control's
cheetah with its 100 solver iterations, mjx_lite's bundled 220-body `pile`), for mjx_lite and for MJX:
  * steps/s of jit(vmap(scan(step))) at batch 1k, 8k, 32k (float32; best of the warm runs; the input Data is
    donated, as a training loop would; a batch whose predicted memory does not fit is skipped and said so), and
    the largest batch that fits: predicted from the memory per environment of the last run (doubling from 32k
    would cost a compile per doubling, five to reach 1M) and verified by running it (its half if it fails);
    MJX on the pile (~1.8 GB per environment, all pairs of 220 bodies) runs one small batch (--slow-batch 16);
  * compile time (lower + compile of one executable; the two engines' 1k programs compiled side by side, the other
    batches concurrently in threads: each row says how many compiled at once), and GPU memory per environment (the
    executable's own peak from XLA's memory analysis divided by the batch, and the device's peak bytes in use);
  * float32 accuracy on the GPU: the first environments of the batch-1k rollout (100 steps) against float64 on the
    CPU (a separate CPU-only process, run concurrently), with JAX's default matmul precision and again with
    jax.default_matmul_precision("highest") (on NVIDIA GPUs the default may use TF32 for float32 matmuls); float32
    on the CPU against float64 gives the error of float32 itself for comparison.

Time: every model gets a slice of the budget (unused time passes to the next); a worker process per model checks
the time before each compile and run, and is killed when its slice is over (what it measured so far is kept).
Writes results.json, results.md and log files under --out (default $OUT, else ./out/gpu).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import gc
import json
import os
import platform
import signal
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = ("humanoid", "barkour", "cheetah", "pile")
SHARE = {"humanoid": 0.32, "barkour": 0.22, "cheetah": 0.2, "pile": 0.26}  # of the budget left after the references
ENGINES = ("mjx_lite", "mjx")
RUN_TARGET_S = 3.0  # steps per run chosen so that one timed run takes about this long (at the 1k rate)
QVEL_SCALE = 0.01  # initial qvel: QVEL_SCALE * N(0, 1), rows drawn in order from one generator (prefix-stable)


# ---------------------------------------------------------------------------------------------------------- setup
def model_path(name: str, dm_suite: str | None) -> str:
    import mujoco  # noqa: PLC0415 - worker side only

    import mjx_lite  # noqa: PLC0415

    mjx_data = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
    if name == "humanoid":
        return os.path.join(mjx_data, "humanoid", "humanoid.xml")
    if name == "barkour":
        return os.path.join(mjx_data, "barkour_v0", "assets", "barkour_v0_mjx.xml")
    if name == "pile":
        return mjx_lite.models.path("pile")
    if name == "cheetah":
        for d in [dm_suite, os.path.join(ROOT, ".whl", "dm_suite")]:
            if d and os.path.exists(os.path.join(d, "cheetah.xml")):
                return os.path.join(d, "cheetah.xml")
        try:
            import dm_control  # noqa: PLC0415

            return os.path.join(os.path.dirname(dm_control.__file__), "suite", "cheetah.xml")
        except ImportError as e:
            raise FileNotFoundError("cheetah.xml: no --dm-suite, no .whl/dm_suite, no dm_control installed "
                                    "(bash benchmarks/gpu.sh prepare copies it)") from e  # fmt: skip
    raise ValueError(f"unknown model {name!r}; known: {MODELS}")


def initial_qvel(batch: int, nv: int):
    import numpy as np  # noqa: PLC0415

    # one generator filled row by row: the first rows are the same whatever the batch (the references use them)
    return (QVEL_SCALE * np.random.default_rng(0).standard_normal((batch, nv))).astype(np.float32)


def load_engine(engine: str, path: str, kernels: str = "auto"):
    """(model, one environment's Data, step, info) for one engine, in JAX's current default float dtype; kernels:
    mjx_lite's Config.kernels."""
    if engine == "mjx_lite":
        import mjx_lite as mjl  # noqa: PLC0415

        m = mjl.configure(mjl.load_mjcf(path), kernels=kernels)
        info = {"nq": m.nq, "nv": m.nv, "iterations": int(m.opt.iterations), "solver": int(m.opt.solver)}
        return m, mjl.make_data(m), mjl.step, info
    import mujoco  # noqa: PLC0415
    from mujoco import mjx  # noqa: PLC0415

    mjm = mujoco.MjModel.from_xml_path(path)
    m = mjx.put_model(mjm)
    info = {"nq": mjm.nq, "nv": mjm.nv, "iterations": int(mjm.opt.iterations), "solver": int(mjm.opt.solver)}
    return m, mjx.make_data(m), mjx.step, info


def rollout_fn(step, steps: int):
    import jax  # noqa: PLC0415

    def rollout(m, d):
        def body(d, _):
            return step(m, d), None

        return jax.lax.scan(body, d, None, length=steps)[0]

    return jax.jit(jax.vmap(rollout, in_axes=(None, 0)), donate_argnums=(1,))


def batch_fn(d0):
    """jitted qvel (batch, nv) -> a batched Data on the device (nothing of size batch is built on the host)."""
    import jax  # noqa: PLC0415
    import jax.numpy as jp  # noqa: PLC0415

    def make(qvel):
        b = qvel.shape[0]
        d = jax.tree.map(lambda x: jp.broadcast_to(x, (b,) + jp.shape(x)), d0)
        return d.replace(qvel=qvel.astype(d0.qvel.dtype))

    return jax.jit(make)


def _block(tree):
    import jax  # noqa: PLC0415

    jax.block_until_ready(tree)


def _err(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s.splitlines()[0][:300] if s else type(e).__name__


def _oom(e: BaseException) -> bool:
    s = str(e)
    return "RESOURCE_EXHAUSTED" in s or "out of memory" in s.lower() or "Out of memory" in s


# --------------------------------------------------------------------------------------------------- GPU worker
class Worker:
    """One model, both engines, on the default device; results appended as JSON lines to `out`."""

    def __init__(self, a, deadline: float):
        import jax  # noqa: PLC0415

        self.a, self.deadline, self.jax = a, deadline, jax
        self.out = open(a.jsonl, "a")  # noqa: SIM115 - kept open for the worker's life
        self.dev = jax.devices()[0]
        self.path = model_path(a.model, a.dm_suite)
        self.eng = {}
        for e in a.engines:
            try:
                m, d0, step, info = load_engine(e, self.path, a.kernels)
                self.eng[e] = {"m": m, "d0": d0, "step": step, "make": batch_fn(d0), "rate": None, "info": info,
                               "per_env": None}  # fmt: skip
                self.emit(kind="model", engine=e, **info)
            except Exception as ex:  # noqa: BLE001 - report, go on with the other engine
                self.emit(kind="error", engine=e, stage="load", error=_err(ex), trace=traceback.format_exc()[-2000:])

    def left(self) -> float:
        return self.deadline - time.time()

    def emit(self, **kw) -> None:
        kw.update(model=self.a.model, t=round(time.time(), 2))
        self.out.write(json.dumps(kw) + "\n")
        self.out.flush()
        print(f"[{self.a.model}] " + json.dumps({k: v for k, v in kw.items() if k not in ("trace", "sample")}),
              flush=True)  # fmt: skip

    def mem(self) -> dict:
        try:
            s = self.dev.memory_stats() or {}
        except Exception:  # noqa: BLE001 - CPU devices have none
            s = {}
        return {k: s[k] for k in ("bytes_in_use", "peak_bytes_in_use", "bytes_limit") if k in s}

    def limit(self) -> float | None:
        """Bytes a program may use: 90% of the device's limit; on a CPU device half the host's available memory."""
        lim = self.mem().get("bytes_limit")
        if lim:
            return 0.9 * lim
        try:
            with open("/proc/meminfo") as f:
                kb = next(int(ln.split()[1]) for ln in f if ln.startswith("MemAvailable"))
            return 0.5 * kb * 1024
        except (OSError, StopIteration, ValueError):
            return None

    def fits(self, engine: str, batch: int) -> bool:
        per_env, limit = self.eng[engine]["per_env"], self.limit()
        return not (per_env and limit and per_env * batch > limit)

    def lower(self, engine: str, batch: int, steps: int, precision: str | None = None):
        jax = self.jax
        e = self.eng[engine]
        spec = jax.ShapeDtypeStruct((batch, e["info"]["nv"]), "float32")
        d_abs = jax.eval_shape(e["make"], spec)
        fn = rollout_fn(e["step"], steps)
        t0 = time.perf_counter()
        if precision:
            with jax.default_matmul_precision(precision):
                lowered = fn.lower(e["m"], d_abs)
        else:
            lowered = fn.lower(e["m"], d_abs)
        return lowered, time.perf_counter() - t0

    def compile(self, jobs: list[dict], threads: int) -> None:
        """Lower each job (Python, one at a time), then compile them (XLA; concurrently when threads > 1)."""
        for j in jobs:
            if self.left() < 5:
                j["error"] = "skipped: time"
                continue
            try:
                j["lowered"], j["lower_s"] = self.lower(j["engine"], j["batch"], j["steps"], j.get("precision"))
            except Exception as ex:  # noqa: BLE001
                j["error"] = _err(ex)
                j["trace"] = traceback.format_exc()[-2000:]

        def comp(j):
            t0 = time.perf_counter()
            try:
                j["compiled"] = j["lowered"].compile()
            except Exception as ex:  # noqa: BLE001
                j["error"] = _err(ex)
                j["oom"] = _oom(ex)
            j["compile_s"] = time.perf_counter() - t0
            j["concurrent"] = min(threads, len(todo))  # programs compiled at once

        todo = [j for j in jobs if "lowered" in j]
        if threads > 1 and len(todo) > 1:
            with concurrent.futures.ThreadPoolExecutor(threads) as ex:
                list(ex.map(comp, todo))
        else:
            for j in todo:
                comp(j)
        for j in todo:
            j.pop("lowered", None)

    def run(self, j: dict, repeats: int) -> dict:
        """Runs a compiled job: first run, then `repeats` timed runs; the result row (also emitted)."""
        e = self.eng[j["engine"]]
        row = {k: j[k] for k in ("engine", "batch", "steps") if k in j}
        row.update(kind="run", precision=j.get("precision") or "default", purpose=j.get("purpose", "throughput"))
        for k in ("lower_s", "compile_s", "concurrent", "error", "oom", "trace"):
            if k in j:
                row[k] = j[k]
        if "compiled" not in j:
            self.emit(**row)
            return row
        c = j.pop("compiled")
        try:
            ma = c.memory_analysis()
        except Exception:  # noqa: BLE001 - not every backend has it
            ma = None
        if ma is not None:
            row["exe_peak_bytes"] = int(getattr(ma, "peak_memory_in_bytes", 0) or 0)
            row["exe_bytes"] = int(ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
                                   - ma.alias_size_in_bytes)  # fmt: skip
            row["mem_per_env_bytes"] = (row["exe_peak_bytes"] or row["exe_bytes"]) / j["batch"]
            limit = self.limit()
            if limit and (row["exe_peak_bytes"] or row["exe_bytes"]) > limit:
                row["error"] = f"does not fit: needs {(row['exe_peak_bytes'] or row['exe_bytes']) / 2**30:.1f} GiB"
                row["oom"] = True
                self.emit(**row)
                return row
        est = 0.0 if e["rate"] is None else j["batch"] * j["steps"] / e["rate"] * (1 + repeats)
        if est > self.left() - 3:
            row["error"] = f"skipped: time (estimated {est:.0f} s, {self.left():.0f} s left)"
            self.emit(**row)
            return row
        d = None
        try:
            import numpy as np  # noqa: PLC0415

            qvel = initial_qvel(j["batch"], e["info"]["nv"])
            d = e["make"](self.jax.device_put(qvel))
            _block(d)
            t0 = time.perf_counter()
            d = c(e["m"], d)
            _block(d)
            row["first_run_s"] = time.perf_counter() - t0
            if j.get("keep"):  # accuracy sample: the first environments after `steps` steps from the initial state
                n = j["keep"]
                row["sample"] = {"qpos": np.asarray(d.qpos[:n]).tolist(), "qvel": np.asarray(d.qvel[:n]).tolist()}
            q = np.asarray(d.qpos)
            row["finite_fraction"] = float(np.isfinite(q).all(axis=1).mean())
            best = float("inf")
            for _ in range(repeats):
                if self.left() < row["first_run_s"] + 2:
                    break
                t0 = time.perf_counter()
                d = c(e["m"], d)
                _block(d)
                best = min(best, time.perf_counter() - t0)
            if best == float("inf"):
                best = row["first_run_s"]
                row["timed_runs"] = 0
            row["run_s"] = best
            row["steps_per_s"] = j["batch"] * j["steps"] / best
            e.setdefault("ok", {})[j["batch"]] = True
            if j.get("purpose", "throughput") in ("throughput", "max_batch") and j.get("precision") is None:
                e["rate"] = max(e["rate"] or 0.0, row["steps_per_s"])
                e["per_env"] = row.get("mem_per_env_bytes", e["per_env"])
        except Exception as ex:  # noqa: BLE001
            row["error"] = _err(ex)
            row["oom"] = _oom(ex)
        finally:
            del d, c
            gc.collect()
        row.update(self.mem())
        self.emit(**row)
        return row

    def steps_for(self, batch: int, engines) -> int:
        rates = [self.eng[e]["rate"] for e in engines if self.eng[e]["rate"]]
        if not rates:
            return self.a.steps
        return int(min(self.a.steps, max(self.a.min_steps, RUN_TARGET_S * min(rates) / batch)))

    def feasible(self, engine: str, batch: int, steps: int, repeats: int) -> bool:
        """Whether a run is predicted to end in time (from the engine's best rate so far; unknown: yes)."""
        rate = self.eng[engine]["rate"]
        return rate is None or batch * steps / rate * (1 + repeats) < self.left() - 10

    def slow_mjx(self, engine: str) -> bool:
        # MJX on the pile: ~0.3 steps/s for one environment on a 2-core CPU (all pairs of 220 bodies); measured
        # last, with few steps, and without a CPU reference (which would take hours)
        return self.a.model == "pile" and engine == "mjx"

    def phases(self, engines: list[str]) -> None:
        a = self.a
        small = a.batches[0]
        # phase 1: the smallest batch, the engines' programs compiled side by side (one thread each: on a many-core
        # host nearly their compile times alone); its first run from the initial state is also the accuracy sample
        first = []
        for e in engines:
            j = {"engine": e, "batch": small, "steps": a.steps, "keep": a.nref, "purpose": "throughput"}
            if self.slow_mjx(e):  # ~1.8 GB per environment (batch 4 on the CPU): a small batch, 2 steps
                j.update(batch=min(small, a.slow_batch), steps=2, keep=0)
            first.append(j)
        self.compile(first, min(a.threads, len(first)))
        for j in first:
            self.run(j, a.repeats)
        # phase 2: the other batches and the "highest" precision accuracy run, compiled concurrently
        jobs = []
        for b in a.batches[1:]:
            s = self.steps_for(b, engines)
            for e in engines:
                if self.slow_mjx(e):
                    continue
                if not self.fits(e, b):
                    self.emit(kind="run", engine=e, batch=b, steps=s, precision="default", purpose="throughput",
                              error=f"skipped: predicted {self.eng[e]['per_env'] * b / 2**30:.0f} GiB does not fit",
                              oom=True)  # fmt: skip
                elif self.feasible(e, b, s, a.repeats):
                    jobs.append({"engine": e, "batch": b, "steps": s})
        jobs += [{"engine": e, "batch": small, "steps": a.steps, "keep": a.nref, "precision": "highest",
                  "purpose": "accuracy"} for e in engines if not self.slow_mjx(e)]  # fmt: skip
        self.compile(jobs, a.threads)
        for j in jobs:
            self.run(j, a.repeats if j.get("purpose") != "accuracy" else 0)

    def largest(self, engines: list[str]) -> None:
        """Phase 3: the largest batch that fits. Doubling from 32k would cost a compile per step (5 to reach 1M), so
        the batch is predicted from the memory per environment of the last run (85% of the limit, rounded down to a
        multiple of 1024 when above it), then verified by running it; if that fails, half of it is tried."""
        a = self.a
        for e in engines:
            done = [b for b, ok in self.eng[e].setdefault("ok", {}).items() if ok]
            per_env, limit = self.eng[e]["per_env"], self.limit()
            if not (per_env and limit and done):
                self.emit(kind="stop", engine=e, reason="no memory figure to predict from")
                continue
            b = int(0.85 * limit / 0.9 / per_env)
            b = b - b % 1024 if b > 4096 else b
            b = min(b, a.max_batch)
            tries = 0
            while b > max(done) and tries < a.max_tries:
                tries += 1
                steps = self.steps_for(b, [e])
                if self.left() < 20 or not self.feasible(e, b, steps, 1):
                    self.emit(kind="stop", engine=e, batch=b, reason="time")
                    break
                j = {"engine": e, "batch": b, "steps": steps, "purpose": "max_batch"}
                self.compile([j], 1)
                row = self.run(j, 1)
                if "steps_per_s" in row:
                    break
                self.emit(kind="stop", engine=e, batch=b, reason=row.get("error", "failed")[:200])
                b //= 2

    def main(self) -> None:
        engines = [e for e in self.a.engines if e in self.eng]
        fast = [e for e in engines if not self.slow_mjx(e)]
        slow = [e for e in engines if self.slow_mjx(e)]
        self.phases(fast)
        self.largest(fast)
        if slow:
            self.phases(slow)


# --------------------------------------------------------------------------------------------- CPU reference
def reference(a) -> None:
    """float64 (JAX_ENABLE_X64=1) or float32 on the CPU: a.nref environments, a.steps steps, per (engine, model)."""
    import jax  # noqa: PLC0415
    import numpy as np  # noqa: PLC0415

    dtype = "float64" if jax.config.jax_enable_x64 else "float32"
    out = open(a.jsonl, "a")  # noqa: SIM115
    for model in a.models:
        for e in a.engines:
            if model == "pile" and e == "mjx":
                continue  # MJX's pile on the CPU: ~0.3 steps/s on a 2-core machine; far too slow for a reference
            if time.time() > a.deadline - 10:
                out.write(json.dumps({"kind": "ref", "model": model, "engine": e, "dtype": dtype,
                                      "error": "skipped: time"}) + "\n")  # fmt: skip
                out.flush()
                continue
            row = {"kind": "ref", "model": model, "engine": e, "dtype": dtype, "steps": a.steps, "n": a.nref}
            t0 = time.perf_counter()
            try:
                m, d0, step, info = load_engine(e, model_path(model, a.dm_suite))
                d = batch_fn(d0)(jax.numpy.asarray(initial_qvel(a.nref, info["nv"])))
                d = rollout_fn(step, a.steps)(m, d)
                row["qpos"] = np.asarray(d.qpos).tolist()
                row["qvel"] = np.asarray(d.qvel).tolist()
            except Exception as ex:  # noqa: BLE001
                row["error"] = _err(ex)
            row["wall_s"] = time.perf_counter() - t0
            out.write(json.dumps(row) + "\n")
            out.flush()
            print(f"[ref {dtype}] {model} {e}: {row.get('error', 'ok')} {row['wall_s']:.1f} s", flush=True)


# ------------------------------------------------------------------------------------------------ orchestrator
def _sub(args: list[str], env: dict, log: str, timeout: float) -> subprocess.Popen:
    f = open(log, "a")  # noqa: SIM115 - closed with the process
    p = subprocess.Popen([sys.executable, "-u", os.path.abspath(__file__), *args], env=env, cwd=ROOT, stdout=f,
                         stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    p._log, p._timeout = f, timeout  # noqa: SLF001
    return p


def _finish(p: subprocess.Popen, until: float) -> str:
    try:
        p.wait(timeout=max(1.0, until - time.time()))
        status = f"exit {p.returncode}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
        status = "killed at its time limit"
    p._log.close()  # noqa: SLF001
    return status


def _env(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("MJX_LITE_COMPILATION_CACHE", "0")  # a fresh machine: compile times as a user's first run
    env.update(extra)
    return env


def orchestrate(a) -> dict:
    t_start = time.time()
    end = t_start + a.budget
    os.makedirs(a.out, exist_ok=True)
    jsonl = os.path.join(a.out, "rows.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    common = ["--steps", str(a.steps), "--nref", str(a.nref), "--jsonl", jsonl, "--engines", *a.engines,
              "--kernels", a.kernels]  # fmt: skip
    if a.dm_suite:
        common += ["--dm-suite", a.dm_suite]
    # float64 and float32 references on the CPU (never touching the GPU), concurrently with the GPU work unless --serial
    refs: list = []
    ref_end = end - 15

    def start_ref(x64: str):
        env = _env(JAX_PLATFORMS="cpu", JAX_ENABLE_X64=x64)
        return _sub(["--ref", "--models", *a.models, "--deadline", str(ref_end), *common], env,
                    os.path.join(a.out, "log_ref.txt"), ref_end - time.time())  # fmt: skip

    info = meta(a, t_start)
    if not a.serial:
        refs = [start_ref("1"), start_ref("0")]
    statuses = {}
    gpu_end = end - (a.ref_reserve if a.serial else 10)
    for i, model in enumerate(a.models):
        shares = sum(SHARE[m] for m in a.models[i:])
        until = time.time() + (gpu_end - time.time()) * SHARE[model] / shares
        env = _env(XLA_PYTHON_CLIENT_MEM_FRACTION=os.environ.get("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.92"))
        args = ["--worker", "--model", model, "--deadline", str(until - 5), "--batches", *map(str, a.batches),
                "--repeats", str(a.repeats), "--threads", str(a.threads), "--min-steps", str(a.min_steps),
                "--max-tries", str(a.max_tries), "--max-batch", str(a.max_batch), "--slow-batch", str(a.slow_batch),
                *common]  # fmt: skip
        p = _sub(args, env, os.path.join(a.out, "log_gpu.txt"), until - time.time())
        statuses[model] = _finish(p, until)
        print(f"[gpu_bench] {model}: {statuses[model]} ({time.time() - t_start:.0f} s)", flush=True)
    if a.serial:  # one JAX process at a time
        statuses["reference float64"] = _finish(start_ref("1"), ref_end)
        statuses["reference float32"] = _finish(start_ref("0"), ref_end)
    for x64, p in zip(("float64", "float32"), refs):
        statuses[f"reference {x64}"] = _finish(p, ref_end)
    rows = []
    if os.path.exists(jsonl):
        with open(jsonl) as f:
            rows = [json.loads(ln) for ln in f if ln.strip()]
    res = {"meta": info, "status": statuses, "rows": rows}
    res["accuracy"] = accuracy(rows)
    res["wall_s"] = time.time() - t_start
    for r in res["rows"]:
        r.pop("sample", None)
        r.pop("qpos", None)
        r.pop("qvel", None)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    md = markdown(res)
    with open(os.path.join(a.out, "results.md"), "w") as f:
        f.write(md)
    print(md, flush=True)
    return res


def meta(a, t_start: float) -> dict:
    info = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "python": platform.python_version(),
            "machine": platform.machine(), "cpus": os.cpu_count(), "args": {k: v for k, v in vars(a).items()},
            "jax_platforms": os.environ.get("JAX_PLATFORMS", "")}  # fmt: skip
    code = ("import json, jax, jaxlib, mujoco; d = jax.devices()[0]; "
            "print(json.dumps({'jax': jax.__version__, 'jaxlib': jaxlib.__version__, 'mujoco': mujoco.__version__, "
            "'backend': jax.default_backend(), 'device': d.device_kind, 'devices': jax.device_count()}))")  # fmt: skip
    try:  # a short process of its own (the orchestrator never starts JAX on the GPU itself)
        env = _env(XLA_PYTHON_CLIENT_PREALLOCATE="false")
        p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        info.update(json.loads(p.stdout.strip().splitlines()[-1]))
    except Exception as ex:  # noqa: BLE001
        info["versions_error"] = _err(ex)
    try:
        info["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                        text=True, timeout=10).stdout.strip() or os.environ.get("MJX_LITE_COMMIT", "")
        # a copied working tree can differ from the HEAD it carries (the device machines get the tree, not commits)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True, timeout=30).stdout.strip()  # fmt: skip
        if info["commit"] and dirty:
            info["commit"] += " plus uncommitted changes"
    except Exception:  # noqa: BLE001
        info["commit"] = os.environ.get("MJX_LITE_COMMIT", "")
    return info


def accuracy(rows: list[dict]) -> list[dict]:
    """max |x - x_ref| over the sampled environments after the accuracy rollout, x = qpos and qvel."""
    import numpy as np  # noqa: PLC0415

    ref = {(r["model"], r["engine"], r["dtype"]): r for r in rows if r.get("kind") == "ref" and "qpos" in r}
    out = []
    for (model, engine, dtype), r in sorted(ref.items()):
        if dtype != "float64":
            continue
        q64, v64 = np.asarray(r["qpos"]), np.asarray(r["qvel"])
        item = {"model": model, "engine": engine, "n": len(q64), "steps": r["steps"]}

        def diff(q, v, q64=q64, v64=v64):
            q, v = np.asarray(q)[: len(q64)], np.asarray(v)[: len(v64)]
            return {"qpos": float(np.max(np.abs(q - q64[: len(q)]))),
                    "qvel": float(np.max(np.abs(v - v64[: len(v)])))}  # fmt: skip

        r32 = ref.get((model, engine, "float32"))
        if r32:
            item["cpu_float32"] = diff(r32["qpos"], r32["qvel"])
        for g in rows:
            if g.get("kind") == "run" and g["model"] == model and g["engine"] == engine and g.get("sample") \
                    and g["steps"] == r["steps"]:
                item[f"gpu_{g['precision']}"] = diff(g["sample"]["qpos"], g["sample"]["qvel"])
        out.append(item)
    return out


def _k(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 1e6:.2f}M" if x >= 1e6 else (f"{x / 1e3:.1f}k" if x >= 1e3 else f"{x:.0f}")


def _b(x: float | None) -> str:
    if x is None:
        return "-"
    return f"{x / 2**20:.2f} MiB" if x >= 2**20 else f"{x / 2**10:.1f} KiB"


def markdown(res: dict) -> str:
    m = res["meta"]
    rows = res["rows"]
    lines = [f"### GPU: mjx_lite beside MJX on {m.get('device', '?')} ({m.get('backend', '?')})", "",
             f"`bash benchmarks/gpu.sh{' --tiny' if m['args'].get('tiny') else ''}` on {m['date']}; commit "
             f"{m.get('commit') or '?'}; JAX {m.get('jax', '?')}, MuJoCo {m.get('mujoco', '?')}; {m['cpus']} CPU cores;"
             f" mjx_lite Config.kernels {m['args'].get('kernels', 'auto')} (CPU references: xla);"
             " "
             f"wall {res['wall_s']:.0f} s of a {m['args']['budget']:.0f} s budget. float32, jit(vmap(scan(step))), "
             "input Data donated; steps/s = batch x steps / best warm run.", ""]  # fmt: skip
    runs = [r for r in rows if r.get("kind") == "run"]
    described = {}
    for r in rows:
        if r.get("kind") == "model":
            described.setdefault(r["model"], []).append(f"{r['engine']} nv {r['nv']}, {r['iterations']} iterations")
    if described:
        lines += ["Models: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in described.items()) + ".", ""]
    lines += ["| model | batch | steps | mjx_lite steps/s | MJX steps/s | mjx_lite / MJX | compile mjx_lite / MJX "
              "| memory per env mjx_lite / MJX |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    models = list(dict.fromkeys(r["model"] for r in rows if "model" in r))
    for model in models:
        batches = sorted({r["batch"] for r in runs if r["model"] == model and r.get("precision") == "default"})
        for b in batches:
            by = {r["engine"]: r for r in runs if r["model"] == model and r["batch"] == b
                  and r.get("precision") == "default"}  # fmt: skip
            lite, mjx = by.get("mjx_lite", {}), by.get("mjx", {})

            def cell(r):
                return _k(r.get("steps_per_s")) if "steps_per_s" in r else (r.get("error", "-")[:40] or "-")

            def comp(r):
                if "compile_s" not in r:
                    return "-"
                n = r.get("concurrent") or 1
                return f"{r['compile_s']:.1f} s" + (f" ({n})" if n > 1 else "")

            ratio = (f"{lite['steps_per_s'] / mjx['steps_per_s']:.2f}x"
                     if "steps_per_s" in lite and "steps_per_s" in mjx else "-")  # fmt: skip
            steps = lite.get("steps", mjx.get("steps", "-"))
            lines.append(f"| {model} | {b} | {steps} | {cell(lite)} | {cell(mjx)} | {ratio} | {comp(lite)} / "
                         f"{comp(mjx)} | {_b(lite.get('mem_per_env_bytes'))} / {_b(mjx.get('mem_per_env_bytes'))} |")
    lines += ["", "Compile: lower + compile of one program; (n): n programs compiled at once in threads, an upper "
              "bound of the time alone. Memory per env: the executable's peak (XLA memory analysis) / batch.",
              ""]  # fmt: skip
    best = []
    for model in models:
        cells = []
        for e in ENGINES:
            ok = [r for r in runs if r["model"] == model and r["engine"] == e and "steps_per_s" in r
                  and r.get("precision") == "default"]  # fmt: skip
            cells.append(max(ok, key=lambda r: r["steps_per_s"]) if ok else None)
        if any(cells):
            lite, mjx = cells
            ratio = f"{lite['steps_per_s'] / mjx['steps_per_s']:.2f}x" if lite and mjx else "-"
            best.append(f"| {model} | " + " | ".join(
                f"{_k(c['steps_per_s'])} (batch {c['batch']})" if c else "-" for c in cells) + f" | {ratio} |")
    if best:
        lines += ["Best throughput per engine (any batch, incl. the largest that fits):", "",
                  "| model | mjx_lite steps/s | MJX steps/s | ratio |", "| --- | --- | --- | --- |", *best, ""]
    stops = [r for r in rows if r.get("kind") == "stop"]
    if stops:
        lines += ["Largest batch search: " + "; ".join(
            f"{r['model']} {r['engine']}: {r.get('batch', '')} {r['reason'][:80]}" for r in stops), ""]
    acc = res.get("accuracy") or []
    if acc:
        lines += ["float32 accuracy after the accuracy rollout: max |qpos| / max |qvel| difference from float64 on the "
                  "CPU (same initial states, first environments of the batch):", "",
                  "| model | engine | envs x steps | GPU f32 default precision | GPU f32 precision highest | "
                  "CPU f32 |", "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for x in acc:
            def f(k, x=x):
                return f"{x[k]['qpos']:.1e} / {x[k]['qvel']:.1e}" if k in x else "-"

            lines.append(f"| {x['model']} | {x['engine']} | {x['n']} x {x['steps']} | {f('gpu_default')} | "
                         f"{f('gpu_highest')} | {f('cpu_float32')} |")
        lines.append("")
    errs = [r for r in rows if r.get("kind") == "error" or (r.get("kind") == "ref" and "error" in r)]
    if errs or any("exit 0" not in s for s in res["status"].values()):
        lines += ["Problems: " + "; ".join(f"{k}: {v}" for k, v in res["status"].items() if v != "exit 0")
                  + "".join(f"; {r['model']} {r['engine']} {r.get('stage', r.get('dtype', ''))}: {r['error'][:80]}"
                            for r in errs), ""]  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or os.path.join(ROOT, "out", "gpu"))
    p.add_argument("--budget", type=float, default=420.0, help="seconds for everything (default 420)")
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=MODELS)
    p.add_argument("--engines", nargs="*", default=list(ENGINES), choices=ENGINES)
    p.add_argument("--batches", type=int, nargs="*", default=[1024, 8192, 32768])
    p.add_argument("--steps", type=int, default=100, help="steps of the smallest batch and the accuracy rollout")
    p.add_argument("--min-steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--nref", type=int, default=8, help="environments compared with the CPU references")
    p.add_argument("--threads", type=int, default=6, help="concurrent compiles (phase 2)")
    p.add_argument("--max-tries", type=int, default=2, help="largest batch: the prediction, then its half")
    p.add_argument("--max-batch", type=int, default=1 << 22, help="largest batch tried")
    p.add_argument("--slow-batch", type=int, default=16, help="batch of MJX on the pile (~1.8 GB per environment)")
    p.add_argument("--serial", action="store_true", help="run the CPU references after the GPU work, not alongside")
    p.add_argument("--ref-reserve", type=float, default=0.0, help="with --serial: seconds kept for the references")
    p.add_argument("--dm-suite", default=None, help="folder with dm_control's cheetah.xml and common/")
    p.add_argument("--kernels", default="auto", choices=("auto", "xla", "fused"),
                   help="mjx_lite's Config.kernels on the GPU (the CPU references run the XLA path)")
    p.add_argument("--tiny", action="store_true", help="batch 4, 5 steps, largest batch 8, serial (a CPU check)")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--ref", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", help=argparse.SUPPRESS)
    p.add_argument("--deadline", type=float, help=argparse.SUPPRESS)
    p.add_argument("--jsonl", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.tiny and not (a.worker or a.ref):
        a.batches, a.steps, a.min_steps, a.repeats, a.nref, a.threads = [4], 5, 2, 1, 2, 2
        a.max_tries, a.max_batch, a.slow_batch = 1, 8, 1
        a.serial = True
        if a.budget == 420.0:
            a.budget = 3600.0
        if not a.ref_reserve:
            a.ref_reserve = a.budget / 3
    if a.worker:
        w = Worker(a, a.deadline)
        w.main()
    elif a.ref:
        reference(a)
    else:
        orchestrate(a)


if __name__ == "__main__":
    main()
