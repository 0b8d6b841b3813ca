"""Compile time of gradients through rollouts, mjx_lite beside MJX (section of docs/benchmarks.md).

    python benchmarks/grad_compile.py [--quick] [--only NAME]
    MJX_LITE_COMPILATION_CACHE=0 python benchmarks/grad_compile.py --ab split,auto [--steps 50] [--rounds 1]
        [--reps 20] [--batch 0]

For each case, `jax.jit(jax.grad(loss))` where loss(ctrl) runs `steps` steps with `lax.scan` (controls (T, nu)
as the decision variables, the loss a squared distance of the final state): trace (Python) and XLA compile times
measured apart, then the run time of the compiled gradient, and whether it is finite. MJX runs the same loss with
its own step (its solver loop is a while_loop: reverse mode needs `iterations=1`, as a user would do; its
gradient is then that of a one-iteration solver). float32, cold compiles (no persistent cache).

`--ab A,B,...`: the ant case only, one process, for each variant given (interleaved: A, B, A, B over `--rounds`; a
variant is a `Config.rk4_loop` value ("split"), Config fields `key=value` joined by `+`
("mass_factorization=dense+rk4_loop=merged"), or "base" (the model's own configuration)): trace+lower and XLA
compile in CPU seconds (`time.process_time`: all threads, so a loaded machine inflates wall time, not these) and
wall seconds, the StableHLO line count and the compiled program's fusions, then the compiled gradients' run times
interleaved (`--reps` calls each, alternating; min and median) and their largest difference; with `--batch B` the
same for the gradient vmapped over B control sequences; and the StableHLO size of the rollout
that is not differentiated (the program a plain `jit` of the rollout runs).
"""

from __future__ import annotations

import os
import sys
import time

import jax

jax.config.update("jax_enable_compilation_cache", False)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from mujoco import mjx  # noqa: E402

import mjx_lite as mjl  # noqa: E402

SUITE = os.path.join(os.path.dirname(os.path.dirname(mujoco.__file__)), "dm_control", "suite")
MJX = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
BENCH_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mjx_lite", "models")

CASES = {  # name: (path, steps)
    "cartpole swing-up (bundled, RK4, slider limits), 100 steps": (f"{BUNDLED}/cartpole.xml", 100),
    "dm_control reacher, 50 steps": (f"{SUITE}/reacher.xml", 50),
    "mjx humanoid (contacts), 100 steps": (f"{MJX}/humanoid/humanoid.xml", 100),
    "ant (RK4, Newton 100 iterations, contacts), 50 steps": (f"{BENCH_MODELS}/ant.xml", 50),
}
QUICK = {"cartpole swing-up (bundled, RK4, slider limits), 10 steps": (f"{BUNDLED}/cartpole.xml", 10)}


def _loss_fn(step, m, d0, steps):
    def loss(ctrl):
        def body(d, u):
            d = step(m, d.replace(ctrl=u))
            return d, None

        d, _ = jax.lax.scan(body, d0, ctrl)
        return jp.sum(d.qpos**2) + 0.1 * jp.sum(d.qvel**2)

    return loss


def _measure(loss, ctrl) -> dict:
    fn = jax.jit(jax.grad(loss))
    t0 = time.perf_counter()
    traced = fn.trace(ctrl)
    t1 = time.perf_counter()
    compiled = traced.lower().compile()
    t2 = time.perf_counter()
    g = compiled(ctrl)
    jax.block_until_ready(g)
    t3 = time.perf_counter()
    g = compiled(ctrl)
    jax.block_until_ready(g)
    t4 = time.perf_counter()
    return {"trace_s": t1 - t0, "compile_s": t2 - t1, "first_run_s": t3 - t2, "run_s": t4 - t3,
            "finite": bool(np.all(np.isfinite(np.asarray(g))))}  # fmt: skip


def ours(path: str, steps: int) -> dict:
    m = mjl.load_mjcf(path)
    d0 = mjl.make_data(m)
    ctrl = 0.1 * jp.ones((steps, m.nu), d0.qpos.dtype)
    return _measure(_loss_fn(mjl.step, m, d0, steps), ctrl)


def theirs(path: str, steps: int) -> dict:
    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.iterations = 1
    mjm.opt.ls_iterations = 1
    try:
        m = mjx.put_model(mjm)
    except Exception as e:  # noqa: BLE001 - MJX refuses some models
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"}
    d0 = mjx.make_data(m)
    ctrl = 0.1 * jp.ones((steps, mjm.nu), jp.float32)
    try:
        return _measure(_loss_fn(mjx.step, m, d0, steps), ctrl)
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"}


def _ops(text: str) -> int:
    """Operations of a StableHLO module's text (lines with an `=` assignment)."""
    return sum(1 for line in text.splitlines() if " = " in line)


def _variant(base, v: str):
    """`base` configured as the --ab variant `v` (see the module docstring)."""
    if v == "base":
        return base
    if "=" not in v:
        return mjl.configure(base, rk4_loop=v)
    kw = {}
    for item in v.split("+"):
        key, val = item.split("=", 1)
        kw[key] = int(val) if val.lstrip("-").isdigit() else val
    return mjl.configure(base, **kw)


def _fusions(compiled) -> int:
    """Fused computations in a compiled program's optimised HLO (XLA:CPU's kernels, roughly)."""
    try:
        text = compiled.as_text()
    except Exception:  # noqa: BLE001 - not every backend gives its HLO
        return -1
    return sum(1 for line in text.splitlines() if line.lstrip("%").startswith("fused_computation"))


def ab(variants: list[str], steps: int = 50, rounds: int = 1, reps: int = 20, batch: int = 0) -> str:
    """The ant's `jax.jit(jax.grad(loss))` of a `steps`-step rollout for each variant (`_variant`), interleaved;
    batch > 0: the run times of that gradient vmapped over `batch` control sequences too."""
    base = mjl.load_mjcf(f"{BENCH_MODELS}/ant.xml")
    d0 = mjl.make_data(base)
    ctrl = 0.1 * jp.ones((steps, base.nu), d0.qpos.dtype)
    lines = [f"ant, {steps} steps, float32, load average {os.getloadavg()[0]:.1f} at the start"]
    compiled, batched, rollout_ops = {}, {}, {}
    for r in range(rounds):
        for v in variants:
            m = _variant(base, v)
            loss = _loss_fn(mjl.step, m, d0, steps)
            fn = jax.jit(jax.grad(loss))
            c0, w0 = time.process_time(), time.perf_counter()
            lowered = fn.trace(ctrl).lower()
            c1, w1 = time.process_time(), time.perf_counter()
            compiled[v] = lowered.compile()
            c2, w2 = time.process_time(), time.perf_counter()
            lines.append(f"round {r} {v:7s}: StableHLO {_ops(lowered.as_text())} ops; trace+lower {c1 - c0:.1f} CPU-s "
                         f"({w1 - w0:.1f} wall); XLA compile {c2 - c1:.1f} CPU-s ({w2 - w1:.1f} wall); "
                         f"{_fusions(compiled[v])} fusions")  # fmt: skip
            print(lines[-1], file=sys.stderr, flush=True)
            if r == 0:  # the rollout that is not differentiated: its program, lowered only
                rollout_ops[v] = _ops(jax.jit(loss).trace(ctrl).lower().as_text())
                if batch:
                    batched[v] = jax.jit(jax.vmap(jax.grad(loss))).trace(jp.stack([ctrl] * batch)).lower().compile()
    lines.append("rollout (not differentiated) StableHLO ops: "
                 + ", ".join(f"{v} {n}" for v, n in rollout_ops.items()))  # fmt: skip
    cases = [("", compiled, ctrl)]
    if batch:
        cases.append((f" batch {batch}", batched, jp.stack([ctrl * (1 + 0.01 * i) for i in range(batch)])))
    for label, fns, x in cases:
        g = {v: np.asarray(jax.block_until_ready(fns[v](x))) for v in variants}  # first runs (warm-up)
        times = {v: [] for v in variants}
        for _ in range(reps):
            for v in variants:
                t0 = time.perf_counter()
                jax.block_until_ready(fns[v](x))
                times[v].append(time.perf_counter() - t0)
        for v in variants:
            t = np.asarray(times[v]) * 1e3
            diff = np.max(np.abs(g[v] - g[variants[0]]))
            lines.append(f"run{label} {v:7s}: min {t.min():.1f} ms, median {np.median(t):.1f} ms ({reps} calls "
                         f"interleaved); max |g - g[{variants[0]}]| {diff:.2e} (max |g| {np.max(np.abs(g[v])):.3g}), "
                         f"finite {bool(np.all(np.isfinite(g[v])))}")  # fmt: skip
            print(lines[-1], file=sys.stderr, flush=True)
    lines.append(f"load average {os.getloadavg()[0]:.1f} at the end")
    return "\n".join(lines)


def _fmt(r: dict) -> str:
    if "error" in r:
        return r["error"]
    return (f"{r['trace_s']:.1f} + {r['compile_s']:.1f} s (run {r['run_s'] * 1e3:.0f} ms"
            f"{', NaN' if not r['finite'] else ''})")  # fmt: skip


def report(quick: bool = False, only: str | None = None) -> str:
    rows, load0 = [], os.getloadavg()[0]
    for name, (path, steps) in (QUICK if quick else CASES).items():
        if only and only not in name:
            continue
        a = ours(path, steps)
        b = theirs(path, steps)
        rows.append(f"| {name} | {_fmt(a)} | {_fmt(b)} |")
        print(rows[-1], file=sys.stderr, flush=True)
    return "\n".join([
        "### Compile time of rollout gradients (float32)",
        "",
        "`python benchmarks/grad_compile.py`: `jax.jit(jax.grad(loss))` of a `lax.scan` rollout over the controls; "
        "trace (Python) + XLA compile, cold; MJX with `iterations=1` (its solver's while_loop blocks reverse mode "
        f"otherwise). Wall times; load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at the end.",
        "",
        "| case | mjx_lite trace + compile | MJX trace + compile |",
        "| --- | --- | --- |",
        *rows,
    ])


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__, valued=("--only", "--ab", "--steps", "--rounds", "--reps", "--batch"))

    def _opt(name, default=None):
        return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default

    if "--ab" in sys.argv:
        print(ab(_opt("--ab").split(","), int(_opt("--steps", 50)), int(_opt("--rounds", 1)), int(_opt("--reps", 20)),
                 int(_opt("--batch", 0))))
    else:
        print(report(quick="--quick" in sys.argv, only=_opt("--only")))
