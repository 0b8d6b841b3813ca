"""The bundled 220-body pile, batch 2, 1200 steps (6 s): finite, no overflow, penetration, speeds, separation.

python benchmarks/pile_settle.py [64]     (64: float64; needs the test dependencies)
"""

import os
import sys
import time

import jax

if len(sys.argv) > 1 and sys.argv[1] == "64":
    jax.config.update("jax_enable_x64", True)
import jax.numpy as jp
import mujoco
import numpy as np

import mjx_lite as mjl
from mjx_lite.types import Warning

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from tests.test_scene import BUNDLED, HALF, RADIUS, _check_separated

STEPS, CHUNK = 1200, 200
mjm = mujoco.MjModel.from_xml_path(BUNDLED)
m = mjl.load_mjcf(BUNDLED)


def chunk(m, d):
    def body(d, _):
        d = mjl.step(m, d)
        return d, jp.min(jp.where(d.contact.active, d.contact.dist, jp.inf))

    return jax.lax.scan(body, d, None, length=CHUNK)


f = jax.jit(jax.vmap(chunk, in_axes=(None, 0)))
d0 = mjl.make_data(m)
db = jax.tree.map(lambda x: jp.stack([x, x]), d0)
db = db.replace(
    qvel=db.qvel.at[1].set(0.05 * jp.asarray(np.random.default_rng(1).standard_normal(m.nv), db.qvel.dtype))
)
t0 = time.perf_counter()
c = f.lower(m, db).compile()
print(f"jit {time.perf_counter() - t0:.1f}s", flush=True)
mins = []
t0 = time.perf_counter()
for i in range(STEPS // CHUNK):
    db, md = c(m, db)
    md = np.asarray(md)
    mins.append(md)
    q = np.asarray(db.qpos)
    v = np.asarray(db.qvel).reshape(2, -1, 6)
    print(
        f"step {(i + 1) * CHUNK}: t={time.perf_counter() - t0:.0f}s ncon={np.asarray(db.ncon).tolist()} "
        f"mindist(chunk)={md.min():.4f} "
        f"max|v|={np.abs(v[..., :3]).max():.3f} max|w|={np.abs(v[..., 3:]).max():.3f} finite={np.isfinite(q).all()} "
        f"contactfull={np.asarray(db.warning_number)[:, Warning.CONTACTFULL].tolist()}",
        flush=True,
    )
wall = time.perf_counter() - t0
print(f"{2 * STEPS / wall:.1f} steps/s (batch 2)")
q = np.asarray(db.qpos)
z = q[:, 2::7]
print("min body z", z.min(), "(sphere r", RADIUS, "box half", HALF, ")")
mins = np.concatenate(mins, axis=1)
print("min contact dist over the run", mins.min(), "over the last 600 steps", mins[:, -600:].min())
for e in range(2):
    _check_separated(mjm, q[e], 5e-3)
print("pairwise separation check passed (5 mm)")
