"""Compile CPU-s, peak memory and CPU-s per environment-step of dm_control models at their own settings (issue 39).

    MJX_LITE_COMPILATION_CACHE=0 B=256 K=5 python benchmarks/capacity_probe.py quadruped:default quadruped:n32

Each argument MODEL:CFG (MODEL a suite name or a path without .xml; CFG `default`, `uncapped`, nN:
Config(nconmax=N), `auto`: Config(contact_buckets="auto"), `off`: contact_buckets=None, bA-B-...:
contact_buckets=(A, B, ...)) is compiled in turn in this process as `jit(scan(vmap(step)))` of K steps at batch B,
float32:
its trace + compile CPU seconds (time.process_time) and wall seconds, and the process's peak RSS during that compile
(VmHWM reset first; a later entry's peak includes what the earlier ones hold). Then 4 settling rollouts each, and 3
rounds of all entries' rollouts interleaved (best of 3): CPU and wall ms per environment-step, the contacts after
them and the warnings counted. A watchdog stops the process above LIMIT_GB of RSS (default 3).

Where two large entries do not fit in LIMIT_GB together, PROBE_CACHE=/some/dir keeps the compiled programs in JAX's
persistent cache there: compile each entry in its own process (its compile time as above, on a cold directory), then
run all of them in one process (loaded from the cache: its compile column is then the load) for the interleaved
timing.
"""
import os
import sys
import threading
import time

os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")
import jax  # noqa: E402
import jax.numpy as jp  # noqa: E402
import numpy as np  # noqa: E402

import mjx_lite  # noqa: E402
from mjx_lite.pipeline import buckets  # noqa: E402

CACHE = os.environ.get("PROBE_CACHE", "")
if CACHE:  # compiled programs kept in CACHE: entries compiled one per process, then timed together from it
    jax.config.update("jax_compilation_cache_dir", CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
else:
    jax.config.update("jax_enable_compilation_cache", False)
SUITE = os.path.join(os.path.dirname(os.path.dirname(jax.__file__)), "dm_control", "suite")
B = int(os.environ.get("B", "256"))
K = int(os.environ.get("K", "5"))
LIMIT = float(os.environ.get("LIMIT_GB", "3.0"))


def _status(key: str) -> float:
    """A /proc/self/status memory line in GB."""
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) / 1e6
    return float("nan")


def _reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def _watchdog():
    while True:
        if _status("VmRSS") > LIMIT:
            print(f"WATCHDOG: RSS {_status('VmRSS'):.2f} GB > {LIMIT}", flush=True)
            os._exit(3)
        time.sleep(0.5)


def make(name: str, cfg: str) -> mjx_lite.Model:
    m = mjx_lite.load_mjcf(name + ".xml" if "/" in name else os.path.join(SUITE, name + ".xml"))
    if cfg == "default":
        return m
    if cfg == "uncapped":
        return mjx_lite.configure(m, nconmax=-1)
    if cfg.startswith("n"):
        return mjx_lite.configure(m, nconmax=int(cfg[1:]))
    if cfg == "auto":
        return mjx_lite.configure(m, contact_buckets="auto")
    if cfg == "off":
        return mjx_lite.configure(m, contact_buckets=None)
    if cfg.startswith("b"):
        return mjx_lite.configure(m, contact_buckets=tuple(int(c) for c in cfg[1:].split("-")))
    raise ValueError(cfg)


def rollout(m, d, ctrl):
    def body(d, c):
        return jax.vmap(mjx_lite.step, in_axes=(None, 0))(m, d.replace(ctrl=c)), None

    return jax.lax.scan(body, d, ctrl)[0]


def main():
    threading.Thread(target=_watchdog, daemon=True).start()
    runs = []
    for spec in sys.argv[1:]:
        name, cfg = spec.split(":")
        m = make(name, cfg)
        d0 = jax.vmap(lambda _, m=m: mjx_lite.make_data(m))(jp.arange(B))
        ctrl = jp.asarray(np.random.default_rng(0).uniform(-1, 1, (K, B, m.nu)), d0.qpos.dtype)
        _reset_peak()
        base = _status("VmRSS")
        c0, t0 = time.process_time(), time.time()
        fn = jax.jit(rollout).lower(m, d0, ctrl).compile()
        cc, ct = time.process_time() - c0, time.time() - t0
        print(f"{spec}: nconmax {m.nconmax} njmax {m.njmax} buckets {buckets.capacities(m)}: compile {cc:.1f} CPU-s "
              f"{ct:.1f} s wall, peak RSS "
              f"{_status('VmHWM'):.2f} GB (before {base:.2f}) load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        d = d0
        for _ in range(4):
            d = fn(m, d, ctrl)
        jax.block_until_ready(d)
        runs.append((spec, m, fn, d, ctrl))
    res = {r[0]: [] for r in runs}
    for _ in range(3):
        for spec, m, fn, d, ctrl in runs:
            c0, t0 = time.process_time(), time.time()
            jax.block_until_ready(fn(m, d, ctrl))
            res[spec].append((time.process_time() - c0, time.time() - t0))
    for spec, m, fn, d, ctrl in runs:
        out = fn(m, d, ctrl)
        w = np.asarray(out.warning_number).sum(0)
        bc, bw = min(x[0] for x in res[spec]), min(x[1] for x in res[spec])
        print(f"{spec}: {1e3 * bc / (B * K):.3f} CPU-ms/env-step, {1e3 * bw / (B * K):.3f} wall-ms/env-step (best of "
              f"3), ncon mean {float(jp.mean(out.ncon)):.1f} max {int(jp.max(out.ncon))}, warnings {w.tolist()} "
              f"load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
