"""Where a step's time goes: per-stage times of mjx_lite beside MJX (section of docs/benchmarks.md).

    python benchmarks/stages.py [--batch 4096] [--quick] [--model PATH]

The MJX humanoid (its own settings, contacts on) after 50 MuJoCo steps, float32: each pipeline stage jitted alone
as `jit(vmap(stage))` over `batch` copies of the same state, best of 3 warm calls, in the same process for both
engines. Stage inputs are forwarded states, so each stage does its full work.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
import types

import jax
import jax.numpy as jp
import mujoco
from mujoco import mjx

import mjx_lite as mjl
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, inertia, integrate, kinematics
from mjx_lite.pipeline import forward as fwd

PATH = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data", "humanoid", "humanoid.xml")


def _stages(e) -> dict:
    """The pipeline stages of one engine `e` (a namespace with MJX's stage names), each f(m, d) -> Data."""
    return {
        "kinematics + com_pos": lambda m, d: e.com_pos(m, e.kinematics(m, d)),
        "crb + factor_m": lambda m, d: e.factor_m(m, e.crb(m, d)),
        "collision": e.collision,
        "make_constraint": e.make_constraint,
        "fwd_velocity": e.fwd_velocity,
        "fwd_actuation + fwd_acceleration": lambda m, d: e.fwd_acceleration(m, e.fwd_actuation(m, d)),
        "solve": e.solve,
        "euler": e.euler,
        "whole step": e.step,
    }


OURS = _stages(types.SimpleNamespace(
    kinematics=kinematics.kinematics, com_pos=kinematics.com_pos, crb=inertia.crb, factor_m=inertia.factor_m,
    collision=driver.collision, make_constraint=constraint.make_constraint, fwd_velocity=fwd.fwd_velocity,
    fwd_actuation=fwd.fwd_actuation, fwd_acceleration=fwd.fwd_acceleration, solve=fwd.fwd_constraint,
    euler=integrate.euler, step=mjl.step))
MJX = _stages(mjx)


def _written(f):
    """f(m, d) returning only the leaves of its Data that it wrote (not the input's own arrays passed through):
    returning the whole Data would time copying every untouched field into the jitted function's outputs (about
    10 ms per call for the humanoid's Data at batch 4096), which a stage inside a step does not do."""

    def g(m, d):
        ins = {id(x) for x in jax.tree.leaves(d)}
        return [x for x in jax.tree.leaves(f(m, d)) if id(x) not in ins]

    return g


def _time_ms(f, m, d) -> float:
    g = jax.jit(jax.vmap(_written(f), in_axes=(None, 0)))
    jax.block_until_ready(g(m, d))
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        jax.block_until_ready(g(m, d))
        best = min(best, time.perf_counter() - t)
    return best * 1e3


def forwarded_state(path: str = PATH):
    """(mjm, mjd, m, d): the model after 50 MuJoCo steps from its initial state, and our Model with a float32 Data
    forwarded at that qpos / qvel."""
    mjm = mujoco.MjModel.from_xml_path(path)
    mjd = mujoco.MjData(mjm)
    for _ in range(50):
        mujoco.mj_step(mjm, mjd)
    m = mjl.load_mjcf(path)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos, jp.float32), qvel=jp.asarray(mjd.qvel, jp.float32))
    return mjm, mjd, m, jax.jit(mjl.forward)(m, d)


def run(batch: int, path: str = PATH) -> list[tuple[str, float, float]]:
    mjm, mjd, m, d = forwarded_state(path)
    mx = mjx.put_model(mjm)
    dx = jax.jit(mjx.forward)(mx, mjx.put_data(mjm, mjd))

    def rep(tree):
        return jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape) if hasattr(x, "shape") else x, tree)

    db, dxb = rep(d), rep(dx)
    return [(k, _time_ms(OURS[k], m, db), _time_ms(MJX[k], mx, dxb)) for k in OURS]


def report(quick: bool = False, batch: int = 4096, path: str = PATH) -> str:
    batch = 64 if quick else batch
    rows = run(batch, path)
    load = os.getloadavg()[0]
    cmd = "python benchmarks/stages.py" + (" --quick" if quick else f" --batch {batch}")
    name = "humanoid" if path == PATH else os.path.basename(path)
    if path != PATH:
        cmd += f" --model {path}"
    return "\n".join([
        f"### Where a step's time goes ({name}, float32)",
        "",
        f"`{cmd}` ({datetime.date.today()}, {os.cpu_count()} cores, load average {load:.1f}): each stage as "
        f"`jit(vmap(stage))` over {batch} copies of a forwarded state of {name} (contacts on, its own "
        "settings), best of 3 warm calls, ms per call. Each stage returns only the fields it writes (copying the "
        "untouched rest of Data into the outputs is not timed).",
        "",
        "| stage | mjx_lite ms | MJX ms | MJX / mjx_lite |",
        "| --- | --- | --- | --- |",
        *[f"| {k} | {a:.2f} | {b:.2f} | {b / a:.2f}x |" for k, a, b in rows],
    ])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--model", default=PATH, help="MJCF file (default: the MJX humanoid)")
    a = p.parse_args()
    print(report(quick=a.quick, batch=a.batch, path=a.model))


if __name__ == "__main__":
    main()
