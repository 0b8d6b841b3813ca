"""Collision cost against hull size: a box and a mesh, and two meshes, whose hulls have N vertices (random points on
an ellipsoid), free-falling onto each other at random poses; one vmap-ed collision call per batch, mjx_lite vs MJX
in the same process, float32. Best of 3 rounds of 5 calls.

python benchmarks/hull_sizes.py [BATCH] [N ...]     (default batch 256, N = 50 200 500; needs the test dependencies)
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
from tests.oracle import model_from_mujoco

BATCH = int(sys.argv[1]) if len(sys.argv) > 1 else 256
SIZES = [int(a) for a in sys.argv[2:]] or [50, 200, 500]


def timeit(f, *args):
    jax.block_until_ready(f(*args))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(5):
            r = f(*args)
        jax.block_until_ready(r)
        best = min(best, (time.perf_counter() - t) / 5 * 1e3)
    return best


def xml(n, pair):
    rng = np.random.default_rng(n)
    p = rng.normal(size=(n, 3))
    p = p / np.linalg.norm(p, axis=1, keepdims=True) * [0.1, 0.08, 0.06]
    verts = " ".join(f"{v:.5f}" for v in p.ravel())
    g1 = '<geom type="box" size=".07 .06 .05"/>' if pair == "box-mesh" else '<geom type="mesh" mesh="hull"/>'
    return f"""<mujoco><asset><mesh name="hull" vertex="{verts}"/></asset><worldbody>
      <body><freejoint/>{g1}</body><body><freejoint/><geom type="mesh" mesh="hull"/></body></worldbody></mujoco>"""


def poses(mjm):
    rng = np.random.default_rng(0)
    mjd = mujoco.MjData(mjm)
    out = []
    for _ in range(BATCH):
        for b in range(2):
            mjd.qpos[7 * b : 7 * b + 3] = rng.normal(size=3) * 0.05
            q = rng.normal(size=4)
            mjd.qpos[7 * b + 3 : 7 * b + 7] = q / np.linalg.norm(q)
        mujoco.mj_kinematics(mjm, mjd)
        out.append((mjd.geom_xpos.copy(), mjd.geom_xmat.reshape(-1, 3, 3).copy(), mjx.put_data(mjm, mjd)))
    return out


print(f"batch {BATCH}, float32: ms per vmap-ed collision call (jit s)")
for n in SIZES:
    for pair in ("box-mesh", "mesh-mesh"):
        mjm = mujoco.MjModel.from_xml_string(xml(n, pair))
        st = poses(mjm)
        m = model_from_mujoco(mjm)
        d0 = mjl.make_data(m)
        d = jax.vmap(lambda a, b, d0=d0: d0.replace(geom_xpos=a, geom_xmat=b))(
            jp.asarray(np.stack([s[0] for s in st])), jp.asarray(np.stack([s[1] for s in st]))
        )
        ours = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))
        t = time.perf_counter()
        jax.block_until_ready(ours(m, d))
        jit_ours = time.perf_counter() - t
        ms = timeit(ours, m, d)
        line = f"hull {int(mjm.mesh_vertnum[0]):4d} verts {pair:9s}  mjx_lite {ms:8.1f} ms ({jit_ours:.1f} s)"
        try:
            mx = mjx.put_model(mjm)
            dx = jax.tree_util.tree_map(lambda *x: jp.stack(x), *[s[2] for s in st])
            theirs = jax.jit(jax.vmap(mjx.collision, in_axes=(None, 0)))
            t = time.perf_counter()
            jax.block_until_ready(theirs(mx, dx))
            jit_mjx = time.perf_counter() - t
            line += f"   MJX {timeit(theirs, mx, dx):8.1f} ms ({jit_mjx:.1f} s)"
        except Exception as e:  # MJX refuses some models
            line += f"   MJX refuses: {type(e).__name__}: {str(e).splitlines()[0][:80]}"
        print(line, flush=True)
