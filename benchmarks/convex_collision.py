"""Collision detection alone on MJX's convex.xml (a box and 3 small meshes on a plane): one vmap-ed call over a
batch of random poses, mjx_lite vs MJX in the same process, float32 (or float64 with `64`), and mjx_lite's time
per pair group. Times are the best of 5 rounds of 10 calls.

python benchmarks/convex_collision.py [BATCH] [64] [ratio=R]     (default batch 64; needs the test dependencies)

ratio=R sets the model's `Config.mesh_size_ratio` (mesh pairs are grouped by size classes spanning this
factor; inf: one class).

`states` and `compare` also serve benchmarks/hull_sizes.py.
"""

import os
import sys
import time

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx

import mjx_lite as mjl
from mjx_lite.collision import driver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.oracle import MJX_TEST_DATA, model_from_mujoco


def timeit(f, *args, repeat=10, rounds=5):
    """Best of `rounds` rounds of `repeat` calls, ms per call (after one warm-up call; a warm-up call over 2 s is
    timed once more instead: MJX mesh-mesh on 500-vertex hulls takes minutes per call)."""
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    if time.perf_counter() - t > 2.0:
        repeat, rounds = 1, 1
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeat):
            r = f(*args)
        jax.block_until_ready(r)
        best = min(best, (time.perf_counter() - t) / repeat * 1e3)
    return best


def states(mjm, set_qpos, batch):
    """Kinematics of `batch` poses (set_qpos(qpos) fills one in place): (mjx_lite Model, batched Data, MJX Data or
    the error text where MJX refuses the model)."""
    mjd = mujoco.MjData(mjm)
    xpos, xmat, dxs = [], [], []
    for _ in range(batch):
        set_qpos(mjd.qpos)
        mujoco.mj_normalizeQuat(mjm, mjd.qpos)
        mujoco.mj_kinematics(mjm, mjd)
        xpos.append(mjd.geom_xpos.copy())
        xmat.append(mjd.geom_xmat.reshape(-1, 3, 3).copy())
        if not isinstance(dxs, str):
            try:
                dxs.append(mjx.put_data(mjm, mjd))
            except Exception as e:  # MJX refuses some geom pairs already here
                dxs = f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"
    m = model_from_mujoco(mjm)
    d0 = mjl.make_data(m)
    xpos, xmat = jp.asarray(np.stack(xpos)), jp.asarray(np.stack(xmat))
    d = jax.vmap(lambda a, b: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat)
    return m, d, dxs if isinstance(dxs, str) else jax.tree_util.tree_map(lambda *x: jp.stack(x), *dxs)


def _compiled(f, *args):
    f = jax.jit(jax.vmap(f, in_axes=(None, 0)))
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    return f, time.perf_counter() - t


def compare(mjm, m, d, dx, **kw):
    """(ms, jit s) of one vmap-ed collision call for mjx_lite and for MJX; MJX's is an error text if it refuses the
    model or fails (e.g. out of memory)."""
    f, jit_ours = _compiled(driver.collision, m, d)
    ours = (timeit(f, m, d, **kw), jit_ours)
    if isinstance(dx, str):  # `states` could not build MJX's Data
        return ours, dx
    try:
        mx = mjx.put_model(mjm)
        g, jit_mjx = _compiled(mjx.collision, mx, dx)
        return ours, (timeit(g, mx, dx, **kw), jit_mjx)
    except Exception as e:  # MJX refuses some models and runs out of memory on others
        return ours, f"{type(e).__name__}: {str(e).splitlines()[0][:80]}"


def main():
    if "64" in sys.argv[2:]:
        jax.config.update("jax_enable_x64", True)
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    ratio = mjl.Config().mesh_size_ratio
    for a in sys.argv[2:]:
        if a.startswith("ratio="):
            ratio = float(a[6:])
    mjm = mujoco.MjModel.from_xml_path(os.path.join(MJX_TEST_DATA, "convex.xml"))
    rng = np.random.default_rng(0)

    def set_qpos(qpos):
        qpos[:] = mjm.qpos0 + rng.normal(size=mjm.nq) * 0.3

    m, d, dx = states(mjm, set_qpos, batch)
    m = mjl.configure(m, mesh_size_ratio=ratio)
    (ms_ours, jit_ours), (ms_mjx, jit_mjx) = compare(mjm, m, d, dx)
    ngroups = len(driver.pair_table(m).groups)
    print(f"convex.xml collision, batch {batch}, {jp.zeros(()).dtype}, mesh_size_ratio {ratio}: "
          f"{ngroups} groups")  # fmt: skip
    print(f"mjx_lite {ms_ours:.1f} ms (jit {jit_ours:.1f} s)   MJX {ms_mjx:.1f} ms (jit {jit_mjx:.1f} s)   "
          f"ratio {ms_ours / ms_mjx:.1f}x")  # fmt: skip
    for g in driver.pair_table(m).groups:
        f = jax.jit(jax.vmap(lambda dd, g=g: driver._run_group(m, dd, g)))
        name = f"{mujoco.mjtGeom(g.type1).name[7:].lower()}-{mujoco.mjtGeom(g.type2).name[7:].lower()}"
        print(f"  group {name:<14} {len(g.geom1)} pairs  {timeit(f, d):.1f} ms")


if __name__ == "__main__":
    main()
