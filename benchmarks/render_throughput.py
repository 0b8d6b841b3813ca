"""Images per second: our batched renderer (jit + vmap on the CPU here) beside mujoco.Renderer (EGL, Mesa's
software rasteriser here: no GPU on this machine), for a batch of humanoids, at 64x64 and 240x320.

    MUJOCO_GL=egl python benchmarks/render_throughput.py [--batch 256] [--sizes 64x64 240x320] [--chunk 16]

States: the mjx test_data humanoid at qpos0 with joint angles perturbed per environment (poses from MuJoCo's
mj_forward, so that only rendering is timed). Ours: `jax.lax.map(r.rgb, batch, batch_size=chunk)` jitted (a
vmapped chunk of `chunk` environments at a time bounds memory), best of `repeats` warm runs; the JIT time is
reported apart. MuJoCo: one mujoco.Renderer, update_scene + render of each state in turn (single thread), as the model
configures it (shadows, reflections) and with those two effects off. Both
produce rgb uint8 images of the free camera with the same geoms (groups 0-2, no sites). `report()` returns a
markdown section; the machine is shared (its load average is printed with the numbers).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import time

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402
import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from benchmarks import render_compare as rc  # noqa: E402
from mjx_lite import render  # noqa: E402

MODEL = rc.REFERENCE["mjx/humanoid"]
COMMAND = "MUJOCO_GL=egl python benchmarks/render_throughput.py --batch {batch} --sizes {sizes} --chunk {chunk}"
_RESULTS: dict = {}


def _batch(m, mjm, batch: int, seed: int = 0):
    """Our batched Data and MuJoCo's MjData list at the same perturbed poses."""
    rng = np.random.default_rng(seed)
    scalar = np.isin(mjm.jnt_type, (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE))
    adr = mjm.jnt_qposadr[scalar]
    datas, fields = [], {k: [] for k in ("qpos", "xpos", "xmat", "geom_xpos", "geom_xmat", "cam_xpos", "cam_xmat",
                                         "subtree_com")}  # fmt: skip
    for _ in range(batch):
        mjd = mujoco.MjData(mjm)
        mjd.qpos[adr] += 0.3 * rng.standard_normal(len(adr))
        mujoco.mj_forward(mjm, mjd)
        datas.append(mjd)
        for k in fields:
            fields[k].append(np.array(getattr(mjd, k)))
    d = mjl.make_data(m)
    f = d.qpos.dtype
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
    db = db.replace(**{k: jp.asarray(np.stack(v).reshape((batch,) + np.shape(getattr(d, k))), f)
                       for k, v in fields.items()})  # fmt: skip
    return db, datas


def bench_ours(m, db, height: int, width: int, chunk: int, repeats: int) -> dict:
    r = render.Renderer(m, height, width)
    fn = jax.jit(lambda db: jax.lax.map(lambda d: r.rgb(d, -1), db, batch_size=chunk))
    t0 = time.perf_counter()
    compiled = fn.lower(db).compile()
    jit_s = time.perf_counter() - t0
    jax.block_until_ready(compiled(db))
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        jax.block_until_ready(compiled(db))
        best = min(best, time.perf_counter() - t0)
    batch = db.qpos.shape[0]
    return {"images_per_s": batch / best, "jit_s": jit_s, "run_s": best}


def bench_mujoco(mjm, datas, height: int, width: int, effects: bool = True) -> dict:
    """effects=False: MuJoCo's shadows and reflections off (its shadow map is 4096^2 by default, which a software
    rasteriser pays for every frame), closer to what our renderer draws by default."""
    r = mujoco.Renderer(mjm, height, width)
    opt = rc.scene_option()

    def draw(mjd):
        r.update_scene(mjd, -1, opt)
        if not effects:
            r.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            r.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        r.render()

    try:
        draw(datas[0])
        t0 = time.perf_counter()
        for mjd in datas:
            draw(mjd)
        s = time.perf_counter() - t0
    finally:
        r.close()
    return {"images_per_s": len(datas) / s, "run_s": s}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=256)
    p.add_argument("--sizes", nargs="*", default=["64x64", "240x320"])
    p.add_argument("--chunk", type=int, default=16, help="environments per vmapped chunk (bounds memory)")
    p.add_argument("--repeats", type=int, default=2)
    a = p.parse_args(argv)
    m = mjl.load_mjcf(MODEL)
    mjm = mujoco.MjModel.from_xml_path(MODEL)
    db, datas = _batch(m, mjm, a.batch)
    load = os.getloadavg()
    print(f"humanoid batch {a.batch}  jax {jax.__version__} {jax.default_backend()}  cpus {os.cpu_count()}  "
          f"load average {load[0]:.1f}")  # fmt: skip
    rows = []
    for size in a.sizes:
        h, w = (int(x) for x in size.split("x"))
        ours = bench_ours(m, db, h, w, a.chunk, a.repeats)
        theirs = bench_mujoco(mjm, datas, h, w)
        plain = bench_mujoco(mjm, datas, h, w, effects=False)
        rows.append((size, ours, theirs, plain))
        print(f"{size:8s} mjx_lite {ours['images_per_s']:9.1f} images/s (jit {ours['jit_s']:.1f} s)   "
              f"mujoco.Renderer {theirs['images_per_s']:9.1f} images/s (ratio "
              f"{ours['images_per_s'] / theirs['images_per_s']:.3g}), without shadows/reflections "
              f"{plain['images_per_s']:.1f} images/s (ratio {ours['images_per_s'] / plain['images_per_s']:.3g})")
    _RESULTS.update(rows=rows, args=a, load=load, date=datetime.date.today().isoformat())
    return _RESULTS


def report(quick: bool = False) -> str:
    """Markdown section with the command, date, machine and numbers (runs the benchmark if it has not run; quick:
    batch 16 at 64x64)."""
    if not _RESULTS:
        main(["--batch", "16", "--sizes", "64x64"] if quick else [])
    a = _RESULTS["args"]
    lines = [
        "### Rendering throughput (humanoid, CPU)", "",
        "`" + COMMAND.format(batch=a.batch, sizes=" ".join(a.sizes), chunk=a.chunk) + "`  ",
        f"{_RESULTS['date']}, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, no GPU; "
        f"jax {jax.__version__} ({jax.default_backend()}); mujoco {mujoco.__version__} (EGL, Mesa software). "
        f"Shared machine, load average {_RESULTS['load'][0]:.1f} at the start.", "",
        "| size | mjx_lite images/s | mjx_lite JIT s | mujoco.Renderer images/s | ratio | mujoco.Renderer without "
        "shadows and reflections | ratio |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for size, ours, theirs, plain in _RESULTS["rows"]:
        lines.append(f"| {size} | {ours['images_per_s']:.1f} | {ours['jit_s']:.1f} | {theirs['images_per_s']:.1f} | "
                     f"{ours['images_per_s'] / theirs['images_per_s']:.3g} | {plain['images_per_s']:.1f} | "
                     f"{ours['images_per_s'] / plain['images_per_s']:.3g} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
    print(report())
