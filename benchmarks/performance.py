"""What drives speed and compile time: one model under settings that differ in one thing each (docs/performance.md).

    python benchmarks/performance.py [--model humanoid] [--batch 64] [--steps 50] [--repeats 7] [--float64]

Each row is `jit(vmap(scan(step)))` over `batch` environments and `steps` steps of the model (bundled name or
path) with one change: the integrator, the solver or its iterations, contacts or all constraints off, a contact
capacity, the batch size. All rows are compiled in this one process (cold: JAX's persistent cache is off), then
timed in turns call by call (best of `--repeats`), so a slow spell of a shared machine slows every row alike.
Prints a markdown table: compile s (trace + XLA; wall and the process's CPU time), ms per call, steps/s (batch x
steps / best wall time) and CPU microseconds per environment-step (the process's CPU time over all its threads,
best call: on a machine shared with other processes this varies less than wall time). `--float64` runs the same
rows in float64 (one process per precision: JAX's x64 flag is process-wide); compare the default rows of both runs.
"""

from __future__ import annotations

import argparse
import time

import jax


def _variants(mjl, m, batch: int) -> list[tuple[str, object, int, str]]:
    """(label, model, batch, the `python -m mjx_lite run` options that reproduce the row)."""
    opt = m.opt
    rows = [("the model's settings", m, batch, "")]
    rows.append(("integrator euler", m.replace(opt=opt.replace(integrator=int(mjl.IntegratorType.EULER))), batch,
                 "--integrator euler"))  # fmt: skip
    rows.append(("integrator rk4", m.replace(opt=opt.replace(integrator=int(mjl.IntegratorType.RK4))), batch,
                 "--integrator rk4"))  # fmt: skip
    for it in (1, 20):
        rows.append((f"solver iterations {it}", m.replace(opt=opt.replace(iterations=it)), batch, f"--iterations {it}"))
    rows.append(("CG solver", m.replace(opt=opt.replace(solver=int(mjl.SolverType.CG))), batch, "--solver cg"))
    flags = int(opt.disableflags)
    rows.append(("contacts off", mjl.configure(m.replace(opt=opt.replace(
        disableflags=flags | int(mjl.DisableBit.CONTACT)))), batch, "--disable contact"))  # fmt: skip
    rows.append(("all constraints off", mjl.configure(m.replace(opt=opt.replace(
        disableflags=flags | int(mjl.DisableBit.CONSTRAINT)))), batch, "--disable constraint"))  # fmt: skip
    if m.nconmax > 8:
        rows.append(("contact capacity 8", mjl.configure(m, nconmax=8), batch, "(mjl.configure(m, nconmax=8))"))
    for b in sorted({1, 16, 4 * batch} - {batch}):
        rows.append((f"batch {b}", m, b, f"--batch {b}"))
    return rows


class _Row:
    def __init__(self, mjl, label, m, batch, steps, flags):
        import jax.numpy as jp

        self.label, self.batch, self.steps, self.flags = label, batch, steps, flags
        d = mjl.make_data(m)
        self.db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
        self.db = self.db.replace(qvel=0.1 * jax.random.normal(jax.random.PRNGKey(0), (batch, m.nv), d.qvel.dtype))
        self.m, self.nconmax, self.njmax = m, m.nconmax, m.njmax

        def rollout(m, d):
            return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=steps)[0]

        t0, c0 = time.perf_counter(), time.process_time()
        self.fn = jax.jit(jax.vmap(rollout, in_axes=(None, 0))).lower(m, self.db).compile()
        self.compile_s, self.compile_cpu = time.perf_counter() - t0, time.process_time() - c0
        jax.block_until_ready(self.fn(m, self.db))
        self.best = self.best_cpu = float("inf")

    def time(self) -> None:
        t0, c0 = time.perf_counter(), time.process_time()
        jax.block_until_ready(self.fn(self.m, self.db))
        self.best = min(self.best, time.perf_counter() - t0)
        self.best_cpu = min(self.best_cpu, time.process_time() - c0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="humanoid")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--float64", action="store_true")
    a = p.parse_args()
    jax.config.update("jax_enable_compilation_cache", False)
    if a.float64:
        jax.config.update("jax_enable_x64", True)
    import mjx_lite as mjl  # noqa: PLC0415 - after the x64 flag

    m = mjl.load_mjcf(a.model)
    rows = []
    for label, mv, b, flags in _variants(mjl, m, a.batch):
        rows.append(_Row(mjl, label, mv, b, a.steps, flags))
        print(f"compiled {label}: {rows[-1].compile_s:.1f} s", flush=True)
    for _ in range(a.repeats):
        for r in rows:
            r.time()
    dtype = "float64" if a.float64 else "float32"
    print(f"\n`python benchmarks/performance.py --model {a.model} --batch {a.batch} --steps {a.steps} --repeats "
          f"{a.repeats}{' --float64' if a.float64 else ''}` ({dtype}, jax {jax.__version__}, "
          f"{jax.default_backend()}, {jax.device_count()} device):\n")  # fmt: skip
    print("| setting | `run` options | contacts / rows | compile s (CPU s) | ms per call | steps/s | "
          "CPU us per env-step |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        sps = r.batch * r.steps / r.best
        cpu_us = 1e6 * r.best_cpu / (r.batch * r.steps)
        flags = f"`{r.flags}`" if r.flags else "(none)"
        print(f"| {r.label} | {flags} | {r.nconmax} / {r.njmax} | {r.compile_s:.1f} ({r.compile_cpu:.1f}) | "
              f"{1e3 * r.best:.1f} | {sps:,.0f} | {cpu_us:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
