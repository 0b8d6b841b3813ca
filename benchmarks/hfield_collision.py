"""Height-field collision alone: a box and a small mesh (a tetrahedron) over the 8x8 test field of
tests/test_collision_hfield.py, at random poses; one vmap-ed collision call per batch, mjx_lite vs MJX in the same
process (where MJX accepts the model), float32. Best of 5 rounds of 10 calls.

python benchmarks/hfield_collision.py [BATCH] [curved]     (default batch 256; needs the test dependencies)

`curved`: an ellipsoid and a cylinder instead of the box and the tetrahedron.
"""

import os
import sys

import mujoco
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from convex_collision import compare, states

from tests.test_collision_hfield import GEOMS, MORE_GEOMS, _xml


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 256
    curved = "curved" in sys.argv[2:]
    geoms = ({"ellipsoid": MORE_GEOMS["ellipsoid"], "cylinder": MORE_GEOMS["cylinder"]} if curved
             else {"box": GEOMS["box"], "mesh": MORE_GEOMS["mesh"]})  # fmt: skip
    mjm = mujoco.MjModel.from_xml_string(_xml(geoms))
    rng = np.random.default_rng(0)

    def set_qpos(qpos):
        for b in range(2):
            qpos[7 * b : 7 * b + 3] = [rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), rng.uniform(0.1, 0.5)]
            qpos[7 * b + 3 : 7 * b + 7] = rng.normal(size=4)  # normalised by `states`

    m, d, dx = states(mjm, set_qpos, batch)
    (ms, jit_ours), theirs = compare(mjm, m, d, dx)
    line = f"hfield + {' + '.join(geoms)}, batch {batch}, float32: mjx_lite {ms:.1f} ms (jit {jit_ours:.1f} s)"
    if isinstance(theirs, str):
        line += f"   MJX fails: {theirs}"
    else:
        line += f"   MJX {theirs[0]:.1f} ms (jit {theirs[1]:.1f} s)"
    print(line)


if __name__ == "__main__":
    main()
