"""dm_control models' steps/s, float32, full padded step vs contact buckets ("auto"), A/B interleaved in one process.

    MODELS=quadruped,cheetah,walker,humanoid BATCHES=64,256 K=10 python benchmarks/contact_buckets_bench.py

Per model and batch: the compile time of each jitted K-step `lax.scan(vmap(step))` rollout (cold: no persistent
cache), then 8 settling rollouts with the full step, then 3 rounds of both rollouts from the settled states,
alternating (best of 3 each), and the largest |qpos| difference between them after K steps (float32).
"""

import os
import subprocess
import time

os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")
import dm_control.suite  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jp  # noqa: E402
import numpy as np  # noqa: E402

import mjx_lite  # noqa: E402
from mjx_lite.pipeline import buckets  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)
SUITE = os.path.dirname(dm_control.suite.__file__)
K = int(os.environ.get("K", "10"))
BATCHES = [int(b) for b in os.environ.get("BATCHES", "64,256").split(",")]
MODELS = os.environ.get("MODELS", "quadruped,cheetah,walker,humanoid").split(",")


def rollout(mm, d, ctrl):
    def body(d, c):
        d = jax.vmap(mjx_lite.step, in_axes=(None, 0))(mm, d.replace(ctrl=c))
        return d, None

    return jax.lax.scan(body, d, ctrl)[0]


def load() -> str:
    return f"load {os.getloadavg()[0]:.1f}"


for name in MODELS:
    m = mjx_lite.load_mjcf(os.path.join(SUITE, f"{name}.xml"))
    mb = mjx_lite.configure(m, contact_buckets="auto")
    caps = buckets.capacities(mb)
    print(f"{name}: caps {caps} nconmax {m.nconmax} njmax {m.njmax} solver {m.opt.solver} "
          f"integrator {m.opt.integrator}", flush=True)  # fmt: skip
    if not caps:
        print(f"{name}: no bucket below nconmax: buckets are off", flush=True)
        continue
    for B in BATCHES:
        rng = np.random.default_rng(0)
        d0 = jax.vmap(lambda _, m=m: mjx_lite.make_data(m))(jp.arange(B))
        ctrl = jp.asarray(rng.uniform(-1, 1, (K, B, m.nu)), d0.qpos.dtype)
        fns, ct = {}, {}
        for tag, mm in (("full", m), ("bucket", mb)):
            t = time.time()
            fns[tag] = jax.jit(rollout).lower(mm, d0, ctrl).compile()
            ct[tag] = time.time() - t
            print(f"{name} B={B} compile {tag}: {ct[tag]:.1f} s ({load()})", flush=True)
        d = d0
        for _ in range(8):  # settle (full step)
            d = fns["full"](m, d, ctrl)
        jax.block_until_ready(d)
        need = jax.vmap(buckets.need, in_axes=(None, 0))(m, d)
        print(f"{name} B={B} live contacts after {8 * K} steps: max {int(jp.max(need))} "
              f"mean {float(jp.mean(need)):.1f}", flush=True)  # fmt: skip
        times = {"full": [], "bucket": []}
        for _ in range(3):
            for tag, mm in (("full", m), ("bucket", mb)):
                t = time.time()
                out = fns[tag](mm, d, ctrl)
                jax.block_until_ready(out)
                times[tag].append(time.time() - t)
        a, b = fns["full"](m, d, ctrl), fns["bucket"](mb, d, ctrl)
        diff = float(jp.max(jp.abs(a.qpos - b.qpos)))
        sps = {tag: B * K / min(times[tag]) for tag in times}
        print(f"{name} B={B}: full {sps['full']:.0f} steps/s, bucket {sps['bucket']:.0f} steps/s "
              f"(x{sps['bucket'] / sps['full']:.2f}; best of 3, all full {[round(B * K / t) for t in times['full']]} "
              f"bucket {[round(B * K / t) for t in times['bucket']]}); max |qpos diff| {diff:.1e}; ({load()})",
              flush=True)  # fmt: skip
print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
