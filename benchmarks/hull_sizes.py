"""Collision cost against hull size: a box and a mesh, and two meshes, whose hulls have N vertices (random points on
an ellipsoid), at random poses around each other; one vmap-ed collision call per batch, mjx_lite vs MJX in the same
process, float32. Best of 3 rounds of 5 calls.

python benchmarks/hull_sizes.py [BATCH] [N ...] [pairs=P,...]     (default batch 256, N = 50 200 500, pairs
box-mesh,mesh-mesh; also ellipsoid-mesh, cylinder-mesh, sphere-mesh, capsule-mesh; needs the test dependencies)
"""

import os
import sys

import mujoco
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from convex_collision import compare, states


def xml(n, pair):
    rng = np.random.default_rng(n)
    p = rng.normal(size=(n, 3))
    p = p / np.linalg.norm(p, axis=1, keepdims=True) * [0.1, 0.08, 0.06]
    verts = " ".join(f"{v:.5f}" for v in p.ravel())
    g1 = {"box": '<geom type="box" size=".07 .06 .05"/>', "ellipsoid": '<geom type="ellipsoid" size=".07 .06 .05"/>',
          "cylinder": '<geom type="cylinder" size=".06 .05"/>', "sphere": '<geom type="sphere" size=".06"/>',
          "capsule": '<geom type="capsule" size=".04 .05"/>', "mesh": '<geom type="mesh" mesh="hull"/>'}[pair[:-5]]
    return f"""<mujoco><asset><mesh name="hull" vertex="{verts}"/></asset><worldbody>
      <body><freejoint/>{g1}</body><body><freejoint/><geom type="mesh" mesh="hull"/></body></worldbody></mujoco>"""


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("pairs=")]
    pairs = [a[6:].split(",") for a in sys.argv[1:] if a.startswith("pairs=")] or [["box-mesh", "mesh-mesh"]]
    batch = int(args[0]) if args else 256
    sizes = [int(a) for a in args[1:]] or [50, 200, 500]
    print(f"batch {batch}, float32: ms per vmap-ed collision call (jit s)")
    for n in sizes:
        for pair in pairs[0]:
            mjm = mujoco.MjModel.from_xml_string(xml(n, pair))
            rng = np.random.default_rng(0)

            def set_qpos(qpos, rng=rng):
                for b in range(2):
                    qpos[7 * b : 7 * b + 3] = rng.normal(size=3) * 0.05
                    qpos[7 * b + 3 : 7 * b + 7] = rng.normal(size=4)  # normalised by `states`

            (ms, jit_ours), theirs = compare(mjm, *states(mjm, set_qpos, batch), repeat=5, rounds=3)
            line = f"hull {int(mjm.mesh_vertnum[0]):4d} verts {pair:14s}  mjx_lite {ms:8.1f} ms ({jit_ours:.1f} s)"
            if isinstance(theirs, str):
                line += f"   MJX fails: {theirs}"
            else:
                line += f"   MJX {theirs[0]:8.1f} ms ({theirs[1]:.1f} s)"
            print(line, flush=True)


if __name__ == "__main__":
    main()
