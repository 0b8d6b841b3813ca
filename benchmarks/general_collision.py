"""Collision detection alone on a scene of general convex pairs (GJK/EPA): an ellipsoid, a cylinder, a box, a capsule,
a sphere and a second ellipsoid, free and overlapping at random poses above a plane; one vmap-ed call, float32, and
the time per pair group. MJX refuses the model (ellipsoid-box), so only mjx_lite is timed. Times are the best of 5
rounds of 10 calls.

python benchmarks/general_collision.py [BATCH]     (default batch 256; needs the test dependencies)
"""

import os
import sys

import jax
import jax.numpy as jp
import mujoco
import numpy as np
from mujoco import mjx

import mjx_lite as mjl
from mjx_lite.collision import driver

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.convex_collision import _compiled, timeit
from tests.oracle import model_from_mujoco

SHAPES = ['type="ellipsoid" size=".1 .15 .2"', 'type="cylinder" size=".1 .15"', 'type="box" size=".1 .1 .1"',
          'type="capsule" size=".08 .1"', 'type="sphere" size=".1"', 'type="ellipsoid" size=".2 .1 .12"']  # fmt: skip


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    bodies = "".join(f'<body pos="{0.3 * (i % 3)} {0.3 * (i // 3)} .5"><freejoint/><geom {s}/></body>'
                     for i, s in enumerate(SHAPES))  # fmt: skip
    xml = f'<mujoco><worldbody><geom type="plane" size="5 5 .1"/>{bodies}</worldbody></mujoco>'
    mjm = mujoco.MjModel.from_xml_string(xml)
    rng = np.random.default_rng(0)
    mjd = mujoco.MjData(mjm)
    xpos, xmat = [], []
    for _ in range(batch):
        mjd.qpos[:] = mjm.qpos0
        for i in range(len(SHAPES)):  # every body within reach of every other
            mjd.qpos[7 * i : 7 * i + 3] = rng.uniform(-0.15, 0.15, 3) + [0.15, 0.15, 0.12]
            mjd.qpos[7 * i + 3 : 7 * i + 7] = rng.normal(size=4)
        mujoco.mj_normalizeQuat(mjm, mjd.qpos)
        mujoco.mj_kinematics(mjm, mjd)
        xpos.append(mjd.geom_xpos.copy())
        xmat.append(mjd.geom_xmat.reshape(-1, 3, 3).copy())
    m = model_from_mujoco(mjm)
    d0 = mjl.make_data(m)
    xpos, xmat = jp.asarray(np.stack(xpos)), jp.asarray(np.stack(xmat))
    d = jax.vmap(lambda a, b: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat)
    f, jit_s = _compiled(driver.collision, m, d)
    print(f"general convex scene, batch {batch}, {jp.zeros(()).dtype}: mjx_lite {timeit(f, m, d):.1f} ms "
          f"(jit {jit_s:.1f} s)")  # fmt: skip
    try:
        mjx.put_model(mjm)
        print("MJX accepts the model (not timed here)")
    except Exception as e:  # MJX refuses ellipsoid-box
        print(f"MJX: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
    for g in driver.pair_table(m).groups:
        fg = jax.jit(jax.vmap(lambda dd, g=g: driver._run_group(m, dd, g)))
        types = [mujoco.mjtGeom(t).name[7:].lower() for t in (g.type1, g.type2) if t >= 0]
        name = "-".join(types) or "general"
        print(f"  group {name:<18} {len(g.geom1)} pairs  {timeit(fg, d):.1f} ms")


if __name__ == "__main__":
    main()
