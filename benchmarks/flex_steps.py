"""Steps/s of a rope hanging from a pin and a cloth dropped on a plane: mjx_lite (batch 1 and a vmapped batch) beside
MuJoCo C on one thread (mj_step in a Python loop; the loop's overhead is included, as in the other benchmarks).

python benchmarks/flex_steps.py [--batch 64] [--steps 200] [--f64]

The rope: 20 points (19 slide-jointed bodies, 57 dofs), edge stiffness and damping. The cloth: 7 x 7 points
(49 bodies, 147 dofs), edge equality constraints (84 rows) and one contact slot per vertex against the plane,
dropped from 3 cm (it lies on the plane for most of the run). Each mjx_lite number is the best of 3 timed runs of one
jitted `lax.scan` of `--steps` steps after a warm-up compile; MuJoCo's the best of 3 runs of the same steps.
"""

import argparse
import time

import jax
import jax.numpy as jp
import mujoco
import numpy as np

ROPE = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <flexcomp name="rope" type="grid" count="20 1 1" spacing=".03 .1 .1" pos="0 0 1" euler="0 60 0" dim="1"
              mass="0.2" radius="0.005">
      <edge stiffness="100" damping="0.02"/>
      <contact contype="0" conaffinity="0"/>
      <pin id="0"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""
CLOTH = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="1 1 .1"/>
    <flexcomp name="cloth" type="grid" count="7 7 1" spacing=".04 .04 .04" pos="0 0 0.03" euler="5 3 0" dim="2"
              mass="0.2" radius="0.005">
      <edge equality="true" damping="0.01"/>
      <contact selfcollide="none"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""


def mujoco_rate(xml: str, steps: int) -> float:
    mjm = mujoco.MjModel.from_xml_string(xml)
    best = np.inf
    for _ in range(3):
        d = mujoco.MjData(mjm)
        t = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(mjm, d)
        best = min(best, time.perf_counter() - t)
    return steps / best


def ours_rate(xml: str, steps: int, batch: int) -> tuple[float, float]:
    import mjx_lite as mjl

    m = mjl.load_mjcf_string(xml)
    d0 = mjl.make_data(m)

    def roll(d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=steps)[0]

    if batch > 1:
        d0 = jax.tree.map(lambda x: jp.stack([x] * batch), d0)
        roll = jax.vmap(roll)
    f = jax.jit(roll)
    t = time.perf_counter()
    jax.block_until_ready(f(d0))
    compile_s = time.perf_counter() - t
    best = np.inf
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(f(d0))
        best = min(best, time.perf_counter() - t)
    return steps * batch / best, compile_s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--f64", action="store_true")
    a = ap.parse_args()
    if a.f64:
        jax.config.update("jax_enable_x64", True)
    print(f"backend {jax.default_backend()}, {'float64' if a.f64 else 'float32'}, {a.steps} steps")
    for name, xml in (("rope (20 points)", ROPE), ("cloth on plane (7x7)", CLOTH)):
        c = mujoco_rate(xml, a.steps)
        r1, c1 = ours_rate(xml, a.steps, 1)
        rb, cb = ours_rate(xml, a.steps, a.batch)
        print(f"{name}: MuJoCo C 1 thread {c:,.0f} steps/s | mjx_lite batch 1 {r1:,.0f} steps/s (compile {c1:.1f} s)"
              f" | batch {a.batch} {rb:,.0f} steps/s (compile {cb:.1f} s)")


if __name__ == "__main__":
    main()
