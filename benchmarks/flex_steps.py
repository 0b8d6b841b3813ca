"""Steps/s of a rope hanging from a pin and a cloth dropped on a plane: mjx_lite (batch 1 and a vmapped batch) beside
MuJoCo C on one thread (mj_step in a Python loop; the loop's overhead is included, as in the other benchmarks).

python benchmarks/flex_steps.py [--batch 64] [--steps 200] [--f64] [--only TEXT]
python benchmarks/report.py --only flex_steps     # the docs/benchmarks.md section (`report`)

The scenes are mjx_lite/models/flex.py's builders (the ones tests/test_flex.py uses, larger). The rope: 20 points
(19 slide-jointed bodies, 57 dofs), edge stiffness and damping. The cloth: 7 x 7 points (49 bodies, 147 dofs), edge
equality constraints (84 rows) and one contact slot per vertex against the plane, dropped from 3 cm (it lies on the
plane for most of the run). The elastic cloth: 7 x 7 points pinned at two corners (141 dofs), <elasticity> stretch
and bending, no contacts. The soft cube: 3 x 3 x 3 points (81 dofs, 48 tetrahedra), <elasticity>, dropped on a
plane. The draped rope: 20 points on a fixed box (edges as capsules against the box, 60 dofs); the draped cloth: 7 x 7
points on a fixed ellipsoid (72 triangles against it by GJK/EPA, 147 dofs); both with edge equality constraints,
dropped from 12 cm. The flag: MuJoCo's flex example (model/flex/flag.xml, written out below): a 9 x 19 cloth (288
triangles, 513 dofs) hanging from a corner in the wind, CG solver, self-collisions on; every scene starts from its
`START` state, the flag from MuJoCo's state after 1000 steps (2 s: it has folded onto itself, 107 self contacts, about
40-140 during the run). Each mjx_lite number is the best of 3 timed runs of one jitted `lax.scan` of `--steps` steps
after a warm-up compile; MuJoCo's the best of 3 runs of the same steps.
"""

import argparse
import time

import jax
import jax.numpy as jp
import mujoco
import numpy as np

from mjx_lite.models import flex

SCENES = {
    "rope (20 points)": flex.rope(),
    "cloth on plane (7x7)": flex.cloth_on_plane(),
    "elastic cloth (7x7, stretch+bend)": flex.hanging_cloth(count=(7, 7), spacing=0.04, damping=1e-4),
    "soft cube on plane (3x3x3)": flex.soft_box(count=(3, 3, 3), spacing=0.05),
    "rope on box (20 points)": flex.draped("box", dim=1, count=20, spacing=0.015),
    "cloth on ellipsoid (7x7)": flex.draped("ellipsoid", dim=2, count=7, spacing=0.03),
    # MuJoCo's model/flex/flag.xml (its statistic and light left out)
    "flag (9x19, self-collisions)": """<mujoco model="Flag">
  <option wind="5 5 0" density="10" solver="CG" tolerance="1e-6"/>
  <worldbody>
    <geom name="floor" type="plane" size="0 0 .1"/>
    <body name="pin" pos="0 0 1.5">
      <flexcomp type="grid" count="9 19 1" spacing=".05 .05 .05" mass="10" name="flag" radius="0.001">
        <edge equality="true" damping="0.001"/>
      </flexcomp>
    </body>
  </worldbody>
  <equality><connect body1="flag_0" anchor="0 0 0"/></equality>
</mujoco>""",
}
START = {"flag (9x19, self-collisions)": 1000}  # MuJoCo steps before the timed runs (default 0)


def start_state(xml: str, steps: int) -> tuple[np.ndarray, np.ndarray]:
    """(qpos, qvel) of MuJoCo after `steps` steps from the model's initial state."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, d)
    return d.qpos.copy(), d.qvel.copy()


def mujoco_rate(xml: str, steps: int, start: int = 0) -> float:
    mjm = mujoco.MjModel.from_xml_string(xml)
    qpos, qvel = start_state(xml, start)
    best = np.inf
    for _ in range(3):
        d = mujoco.MjData(mjm)
        d.qpos, d.qvel = qpos, qvel
        t = time.perf_counter()
        for _ in range(steps):
            mujoco.mj_step(mjm, d)
        best = min(best, time.perf_counter() - t)
    return steps / best


def ours_rate(xml: str, steps: int, batch: int, start: int = 0) -> tuple[float, float]:
    import mjx_lite as mjl

    m = mjl.load_mjcf_string(xml)
    qpos, qvel = start_state(xml, start)
    d0 = mjl.make_data(m).replace(qpos=jp.asarray(qpos), qvel=jp.asarray(qvel))

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


def run(steps: int, batch: int, only: str = "") -> list[tuple[str, float, float, float, float, float]]:
    """(scene, MuJoCo C steps/s, mjx_lite batch 1 steps/s, its compile s, batch steps/s, its compile s) per scene."""
    rows = []
    for name, xml in SCENES.items():
        if only and only not in name:
            continue
        start = START.get(name, 0)
        c = mujoco_rate(xml, steps, start)
        r1, c1 = ours_rate(xml, steps, 1, start)
        rb, cb = ours_rate(xml, steps, batch, start)
        rows.append((name, c, r1, c1, rb, cb))
    return rows


def report(quick: bool = False) -> str:
    """The docs/benchmarks.md section (benchmarks/report.py --only flex_steps), float32 as the other sections."""
    steps, batch = (50, 8) if quick else (200, 64)
    cmd = f"python benchmarks/flex_steps.py --steps {steps} --batch {batch}"
    lines = ["### Deformables (flex): steps/s beside MuJoCo C", "", f"`{cmd}` ({jax.default_backend()}, float32). "
             "MuJoCo C on one thread (mj_step in a Python loop); mjx_lite: one jitted `lax.scan`, best of 3 runs after "
             "the compile. MJX has no flexes.", "",
             f"| scene | MuJoCo C | mjx_lite batch 1 | mjx_lite batch {batch} | compile (1 / {batch}) |",
             "|---|---:|---:|---:|---:|"]  # fmt: skip
    for name, c, r1, c1, rb, cb in run(steps, batch):
        lines.append(f"| {name} | {c:,.0f} | {r1:,.0f} | {rb:,.0f} | {c1:.0f} s / {cb:.0f} s |")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--f64", action="store_true")
    ap.add_argument("--only", default="", help="run the scenes whose name contains this text")
    a = ap.parse_args()
    if a.f64:
        jax.config.update("jax_enable_x64", True)
    print(f"backend {jax.default_backend()}, {'float64' if a.f64 else 'float32'}, {a.steps} steps")
    for name, c, r1, c1, rb, cb in run(a.steps, a.batch, a.only):
        print(f"{name}: MuJoCo C 1 thread {c:,.0f} steps/s | mjx_lite batch 1 {r1:,.0f} steps/s (compile {c1:.1f} s)"
              f" | batch {a.batch} {rb:,.0f} steps/s (compile {cb:.1f} s)")


if __name__ == "__main__":
    main()
