"""Throughput benchmark: mjx_lite beside MJX and MuJoCo C, in one process, on the same machine.

    python -m mjx_lite bench MODEL --batch N --steps T [--disable constraint] [--dtype float32]

Reports, for `jit(vmap(scan(step)))` over `batch` environments and `steps` steps: the time to trace (Python,
building the jaxpr), to lower and to compile (XLA) separately, steps/s (batch * steps / the best wall time of
`--repeats` warm calls after a first, untimed one; the JAX engines take turns call by call, so a slow spell of a
shared machine slows both; `--budget S` stops an engine's calls once they have taken S seconds), and the bytes of
one environment's Data. With `--json`, the file is written after the compiles and after the first calls too, so a
run stopped by a caller's time limit leaves the stages it finished. JAX's persistent compilation cache is turned
off here (compile times are cold) unless `--cache` is given. If the `mujoco` package is importable (it is a test
dependency, imported lazily here and nowhere in the runtime package), the same model and settings are also run
with MJX (`mujoco.mjx`) and with MuJoCo C: a single-threaded `mj_step` loop, and `mujoco.rollout` over all cores.
Absolute numbers depend on the machine; compare ratios within one run. Every engine runs the model's own settings
unless `--disable` turns parts off (the same flags for each).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.run import HelpFormatter, model_arguments, model_name, settings

EXAMPLES = """examples:
  {prog} humanoid --batch 256                           a bundled model, with its own settings
  {prog} path/to/model.xml --batch 1024 --steps 100     any MJCF (or URDF) file
  {prog} humanoid --disable constraint                  the smooth dynamics only (no contacts or limits)
  {prog} cartpole --skip mjx c                          mjx_lite alone (no mujoco needed)
"""

_FLAGS = {
    "constraint": 1, "equality": 2, "frictionloss": 4, "limit": 8, "contact": 16, "spring": 32, "damper": 64,
    "gravity": 128, "clampctrl": 256, "warmstart": 512, "actuation": 2048, "sensor": 8192, "eulerdamp": 32768,
}  # fmt: skip


def _disable_bits(names: list[str]) -> int:
    bits = 0
    for n in names:
        if n not in _FLAGS:
            raise SystemExit(f"unknown disable flag {n!r}; known: {sorted(_FLAGS)}")
        bits |= _FLAGS[n]
    return bits


def _block(tree: Any) -> None:
    jax.tree.map(lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x, tree)


def _initial_batch(make_data, m, batch: int, nv: int, seed: int = 0):
    """`batch` copies of make_data(m) with small random qvel (same for every engine)."""
    d = make_data(m)
    qvel = 0.01 * np.random.default_rng(seed).standard_normal((batch, nv))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + jp.shape(x)), d)
    return db.replace(qvel=jp.asarray(qvel, dtype=d.qvel.dtype)), qvel


class _Rollout:
    """A compiled jit(vmap(scan(step))) of one engine, its compile timings, and its best wall time so far."""

    def __init__(self, step_fn, m, db, steps: int):
        def rollout(m, d):
            def body(d, _):
                return step_fn(m, d), None

            d, _ = jax.lax.scan(body, d, None, length=steps)
            return d

        fn = jax.jit(jax.vmap(rollout, in_axes=(None, 0)))
        t0, c0 = time.perf_counter(), time.process_time()
        traced = fn.trace(m, db)
        t1 = time.perf_counter()
        lowered = traced.lower()
        t2 = time.perf_counter()
        self.compiled = lowered.compile()
        t3, c3 = time.perf_counter(), time.process_time()
        self.m, self.db, self.steps = m, db, steps
        self.out = None
        self.best = float("inf")
        self.spent = 0.0  # wall seconds of the timed calls so far
        self.calls = 0
        self.error = None
        self.timings = {"jit_s": t3 - t0, "trace_s": t1 - t0, "lower_s": t2 - t1, "compile_s": t3 - t2,
                        "jit_cpu_s": c3 - c0}  # fmt: skip

    def warm(self) -> None:
        """The first call (not timed for steps/s: it allocates the buffers); its wall and CPU time are kept."""
        r0, c0 = time.perf_counter(), time.process_time()
        self.out = self.compiled(self.m, self.db)
        _block(self.out)
        self.timings |= {"first_call_s": time.perf_counter() - r0, "first_call_cpu_s": time.process_time() - c0}

    def run(self) -> None:
        """One timed call; keeps the best."""
        r0 = time.perf_counter()
        self.out = self.compiled(self.m, self.db)
        _block(self.out)
        dt = time.perf_counter() - r0
        self.best, self.spent, self.calls = min(self.best, dt), self.spent + dt, self.calls + 1

    def result(self) -> dict:
        if self.error is not None:
            return {"error": self.error}
        batch = jax.tree.leaves(self.db)[0].shape[0]
        finite = bool(np.all(np.isfinite(np.asarray(self.out.qpos))))
        return {**self.timings, "run_s": self.best, "timed_calls": self.calls,
                "steps_per_s": batch * self.steps / self.best, "finite": finite}  # fmt: skip


def _time_rollouts(rollouts: list, repeats: int, budget: float | None = None) -> None:
    """Best of `repeats` calls of each rollout, the engines taking turns call by call: a slow spell of a shared
    machine then slows one call of every engine rather than all calls of one, so the ratios hold. With a `budget`
    (seconds), a rollout makes no further call once its timed calls have taken that long (at least one call each):
    a batch whose call takes minutes is measured once instead of `repeats` times, and a first call that alone took
    the budget is that one call (its buffers' first allocation is then a negligible part of it)."""
    if budget is not None:
        for r in rollouts:
            first = r.timings.get("first_call_s")
            if r.error is None and first is not None and first >= budget:
                r.best, r.spent, r.calls = first, first, 1
    for _ in range(repeats):
        for r in rollouts:
            if r.error is None and (budget is None or r.calls == 0 or r.spent < budget):
                try:
                    r.run()
                except Exception as e:  # noqa: BLE001 - report, do not fail the other engine's timing
                    r.error = f"{type(e).__name__}: {e}"


def _data_bytes(d) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(d)))


def prepare_mjx_lite(path: str, batch: int, steps: int, disable: int) -> tuple[_Rollout, dict]:
    m = mjx_lite.load_mjcf(path)
    m = mjx_lite.configure(m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | disable)))  # capacities
    db, _ = _initial_batch(mjx_lite.make_data, m, batch, m.nv)
    return _Rollout(mjx_lite.step, m, db, steps), {"data_bytes_per_env": _data_bytes(mjx_lite.make_data(m)),
                                                    "nv": m.nv}  # fmt: skip


def prepare_mjx(path: str, batch: int, steps: int, disable: int) -> tuple[_Rollout, dict]:
    import mujoco  # noqa: PLC0415
    from mujoco import mjx  # noqa: PLC0415

    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.disableflags |= disable
    m = mjx.put_model(mjm)
    db, _ = _initial_batch(lambda m: mjx.make_data(m), m, batch, mjm.nv)
    return _Rollout(mjx.step, m, db, steps), {"data_bytes_per_env": _data_bytes(mjx.make_data(m))}


def bench_mujoco_c(path: str, batch: int, steps: int, disable: int) -> dict:
    import mujoco  # noqa: PLC0415

    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.disableflags |= disable
    mjd = mujoco.MjData(mjm)
    qvel = 0.01 * np.random.default_rng(0).standard_normal((batch, mjm.nv))
    # single thread: one environment, `steps` steps
    mjd.qvel[:] = qvel[0]
    n = max(steps, 1000)
    t0 = time.perf_counter()
    for _ in range(n):
        mujoco.mj_step(mjm, mjd)
    single = n / (time.perf_counter() - t0)
    res = {"single_thread_steps_per_s": single}
    try:
        from mujoco import rollout  # noqa: PLC0415

        nthread = os.cpu_count() or 1
        datas = [mujoco.MjData(mjm) for _ in range(nthread)]
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        init = np.zeros((batch, mujoco.mj_stateSize(mjm, spec)))
        for i in range(batch):
            mujoco.mj_resetData(mjm, mjd)
            mjd.qvel[:] = qvel[i]
            mujoco.mj_getState(mjm, mjd, init[i], spec)
        rollout.rollout(mjm, datas, init, nstep=2)  # warm-up
        t0 = time.perf_counter()
        rollout.rollout(mjm, datas, init, nstep=steps)
        res["rollout_steps_per_s"] = batch * steps / (time.perf_counter() - t0)
        res["rollout_threads"] = nthread
    except Exception as e:  # noqa: BLE001 - report, do not fail the benchmark
        res["rollout_error"] = f"{type(e).__name__}: {e}"
    return res


def main(argv: list[str] | None = None, prog: str = "python -m mjx_lite bench") -> dict:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter,
                                epilog=EXAMPLES.format(prog=prog))  # fmt: skip
    model_arguments(p)
    p.add_argument("--batch", type=int, default=1024, help="environments stepped in parallel")
    p.add_argument("--steps", type=int, default=100, help="steps per environment (one lax.scan)")
    p.add_argument("--repeats", type=int, default=5, help="timed calls per engine (the best counts)")
    p.add_argument("--budget", type=float, default=None, metavar="SECONDS",
                   help="stop an engine's timed calls once they have taken this long (at least one call); default: "
                   "all --repeats calls")  # fmt: skip
    p.add_argument("--disable", nargs="*", default=[], metavar="FLAG",
                   help=f"MuJoCo disable flags for every engine ({', '.join(_FLAGS)}); default: none, the model's "
                   "own settings")  # fmt: skip
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="float precision")
    p.add_argument("--skip", nargs="*", default=[], choices=["mjx", "c"], help="engines to skip")
    p.add_argument("--cache", action="store_true", help="keep JAX's persistent compilation cache on")
    p.add_argument("--json", default=None, help="also write the results to this JSON file")
    a = p.parse_args(argv)
    try:
        a.model = os.fspath(mjx_lite.models.resolve(model_name(p, a)))
    except mjx_lite.MJCFError as e:
        p.exit(1, f"{prog}: {e}\n")
    if not a.cache:
        jax.config.update("jax_enable_compilation_cache", False)
    if a.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    disable = _disable_bits(a.disable)
    flags = f"disabled: {' '.join(a.disable)}" if a.disable else "the model's own settings (nothing disabled)"
    print(f"model {a.model}  batch {a.batch}  steps {a.steps}  dtype {a.dtype}  {flags}")
    print(f"jax {jax.__version__}  backend {jax.default_backend()}  devices {jax.devices()}")
    results: dict = {}
    rollouts: dict = {}

    def partial(stage: str) -> None:
        """The JSON so far (each engine's compile timings and first call), so that a run stopped by its caller's
        time limit still says which stage it reached and how long the others took."""
        if a.json:
            part = {k: {**r.timings, "stage": stage, **extra} for k, (r, extra) in rollouts.items()}
            with open(a.json, "w") as f:
                json.dump({**results, **part, "partial": stage}, f, indent=1)

    try:
        rollouts["mjx_lite"] = prepare_mjx_lite(a.model, a.batch, a.steps, disable)
        print(f"settings: {settings(rollouts['mjx_lite'][0].m)}", flush=True)
        print(f"mjx_lite compiled: {_timings(rollouts['mjx_lite'][0].timings)}", flush=True)
    except Exception as e:  # noqa: BLE001
        results["mjx_lite"] = {"error": f"{type(e).__name__}: {e}"}
    try:
        import mujoco  # noqa: F401, PLC0415

        have_mujoco = True
    except ImportError:
        have_mujoco = False
    if have_mujoco and "mjx" not in a.skip:
        try:
            rollouts["mjx"] = prepare_mjx(a.model, a.batch, a.steps, disable)
        except Exception as e:  # noqa: BLE001
            results["mjx"] = {"error": f"{type(e).__name__}: {e}"}
    partial("compiled")
    for name, (r, _) in rollouts.items():
        try:
            r.warm()
        except Exception as e:  # noqa: BLE001 - report, do not fail the other engine's timing
            r.error = f"{type(e).__name__}: {e}"
        print(f"{name} first call: {_timings(r.timings)}", flush=True)
        partial("first call")
    _time_rollouts([r for r, _ in rollouts.values()], a.repeats, a.budget)
    for name, (r, extra) in rollouts.items():
        results[name] = {**r.result(), **extra}
    results = {k: results[k] for k in ("mjx_lite", "mjx") if k in results}
    if have_mujoco and "c" not in a.skip:
        results["mujoco_c"] = bench_mujoco_c(a.model, a.batch, a.steps, disable)
    for name, r in results.items():
        print(f"{name:9s} " + "  ".join(f"{k}={_fmt(v)}" for k, v in r.items()))
    ours = results.get("mjx_lite", {}).get("steps_per_s")
    if ours:
        for name, key in (("mjx", "steps_per_s"), ("mujoco_c", "single_thread_steps_per_s"),
                          ("mujoco_c", "rollout_steps_per_s")):  # fmt: skip
            other = results.get(name, {}).get(key)
            if other:
                print(f"ratio mjx_lite / {name}.{key} = {ours / other:.3g}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    return results


def _timings(t: dict) -> str:
    return "  ".join(f"{k}={v:.3g}" for k, v in t.items())


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


if __name__ == "__main__":
    main()
