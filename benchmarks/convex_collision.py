"""Collision detection alone on MJX's convex.xml (a box and 3 small meshes on a plane): one vmap-ed call over a
batch of random poses, mjx_lite vs MJX in the same process, float32 (or float64 with `64`), and mjx_lite's time
per pair group. Times are the best of 5 rounds of 10 calls.

python benchmarks/convex_collision.py [BATCH] [64]     (default batch 64; needs the test dependencies)
"""

import os
import sys
import time

import jax

if "64" in sys.argv[2:]:
    jax.config.update("jax_enable_x64", True)
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx

import mjx_lite as mjl
from mjx_lite.collision import driver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.oracle import MJX_TEST_DATA, model_from_mujoco

BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else 64
REPEAT, ROUNDS = 10, 5


def timeit(f, *args):
    """Best of ROUNDS rounds of REPEAT calls, ms per call (after one warm-up call)."""
    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(REPEAT):
            r = f(*args)
        jax.block_until_ready(r)
        best = min(best, (time.perf_counter() - t) / REPEAT * 1e3)
    return best


mjm = mujoco.MjModel.from_xml_path(os.path.join(MJX_TEST_DATA, "convex.xml"))
mjd = mujoco.MjData(mjm)
rng = np.random.default_rng(0)
states = []
for _ in range(BATCH):
    mjd.qpos[:] = mjm.qpos0 + rng.normal(size=mjm.nq) * 0.3
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mujoco.mj_kinematics(mjm, mjd)
    states.append((mjd.geom_xpos.copy(), mjd.geom_xmat.reshape(-1, 3, 3).copy(), mjx.put_data(mjm, mjd)))

m = model_from_mujoco(mjm)
d0 = mjl.make_data(m)
xpos = jp.asarray(np.stack([s[0] for s in states]))
xmat = jp.asarray(np.stack([s[1] for s in states]))
d = jax.vmap(lambda a, b: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat)
ours = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))
t = time.perf_counter()
jax.block_until_ready(ours(m, d))
jit_ours = time.perf_counter() - t
ms_ours = timeit(ours, m, d)

mx = mjx.put_model(mjm)
dx = jax.tree_util.tree_map(lambda *x: jp.stack(x), *[s[2] for s in states])
theirs = jax.jit(jax.vmap(mjx.collision, in_axes=(None, 0)))
t = time.perf_counter()
jax.block_until_ready(theirs(mx, dx))
jit_mjx = time.perf_counter() - t
ms_mjx = timeit(theirs, mx, dx)

print(f"convex.xml collision, batch {BATCH}, {jp.zeros(()).dtype}")
print(f"mjx_lite {ms_ours:.1f} ms (jit {jit_ours:.1f} s)   MJX {ms_mjx:.1f} ms (jit {jit_mjx:.1f} s)   "
      f"ratio {ms_ours / ms_mjx:.1f}x")  # fmt: skip
for g in driver.pair_table(m).groups:
    f = jax.jit(jax.vmap(lambda dd, g=g: driver._run_group(m, dd, g)))
    name = f"{mujoco.mjtGeom(g.type1).name[7:].lower()}-{mujoco.mjtGeom(g.type2).name[7:].lower()}"
    print(f"  group {name:<14} {len(g.geom1)} pairs  {timeit(f, d):.1f} ms")
