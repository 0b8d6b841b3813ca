"""Quadruped steps/s, float32, full padded step vs contact buckets ("auto"), A/B interleaved in one process."""
import os
import subprocess
import time

os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")
import dm_control.suite
import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.pipeline import buckets

p = os.path.join(os.path.dirname(dm_control.suite.__file__), "quadruped.xml")
m = mjx_lite.load_mjcf(p)
mb = mjx_lite.configure(m, contact_buckets="auto")
print("caps", buckets.capacities(mb), "nconmax", m.nconmax, "njmax", m.njmax, flush=True)
K = int(os.environ.get("K", "10"))
batches = [int(b) for b in os.environ.get("BATCHES", "64,256").split(",")]

def rollout(mm, d, ctrl):
    def body(d, c):
        d = jax.vmap(mjx_lite.step, in_axes=(None, 0))(mm, d.replace(ctrl=c))
        return d, None
    return jax.lax.scan(body, d, ctrl)[0]

for B in batches:
    rng = np.random.default_rng(0)
    d0 = jax.vmap(lambda _: mjx_lite.make_data(m))(jp.arange(B))
    ctrl = jp.asarray(rng.uniform(-1, 1, (K, B, m.nu)), d0.qpos.dtype)
    fns, ct = {}, {}
    for name, mm in (("full", m), ("bucket", mb)):
        t = time.time()
        fns[name] = jax.jit(rollout).lower(mm, d0, ctrl).compile()
        ct[name] = time.time() - t
        print(f"B={B} compile {name}: {ct[name]:.1f} s  ({os.getloadavg()[0]:.1f} load)", flush=True)
    d = d0
    for _ in range(8):  # settle on the ground (full step)
        d = fns["full"](m, d, ctrl)
    jax.block_until_ready(d)
    need = int(jp.max(jax.vmap(buckets.need, in_axes=(None, 0))(m, d)))
    print(f"B={B} batch need after {8*K} steps: {need} live contacts", flush=True)
    times = {"full": [], "bucket": []}
    for _ in range(3):
        for name, mm in (("full", m), ("bucket", mb)):
            t = time.time()
            out = fns[name](mm, d, ctrl)
            jax.block_until_ready(out)
            times[name].append(time.time() - t)
    a, b = fns["full"](m, d, ctrl), fns["bucket"](mb, d, ctrl)
    print(f"B={B} max |qpos diff| after {K} steps (float32): {float(jp.max(jp.abs(a.qpos - b.qpos))):.2e}")
    for name in times:
        best = min(times[name])
        runs = [round(B * K / t) for t in times[name]]
        print(f"B={B} {name}: {B * K / best:.0f} steps/s (best of 3; all {runs})", flush=True)
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip(), flush=True)
