"""Transition Jacobians per state: `mjx_lite.derivatives.transition` vmapped over a batch of states against MuJoCo
C's centred `mjd_transitionFD` (eps 1e-6, one thread), float64, CPU, in one process with the runs interleaved.

Models: the bundled humanoid (`mjx_lite/models/humanoid.xml`), dm_control's quadruped (suite/quadruped.xml, as
shipped) and MJX's humanoid test model (`humanoid_mjx`, not in `all`), each at states with contacts (random controls
from the initial state, then `--settle` steps). For every round, MuJoCo C computes (A, B) for each of the states one
after the other, then each mjx_lite mode computes the batch; the best round of each is reported as time per state,
with the ratio mjx_lite / C (below 1: mjx_lite is faster), CPU seconds per state (median over rounds, all threads)
and the largest normwise disagreement max |A - A_fd| / max |A_fd| (and B) over the states. Compilation is reported
in wall and CPU seconds with the process's peak RSS.

python benchmarks/transition.py [--model humanoid|quadruped|humanoid_mjx|all] [--batch 64] [--rounds 5]
                                [--modes forward,reverse,step,forward:8]
(a mode "MODE:N" passes ncon=N: the differentiated pass with N contact slots; "MODE:auto" ncon="auto", and
"MODE:N+M" the ladder ncon=(N, M): the smallest capacity that holds the batch's contacts, else the model's own).
Each mode's agreement with the first mode's Jacobians is also printed (`vs first`: the same exact derivative by
another route should differ by round-off only).
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mjx_lite as mjl  # noqa: E402
from mjx_lite import derivatives  # noqa: E402
from tests import oracle  # noqa: E402

MODELS = {
    "humanoid": os.path.join(os.path.dirname(mjl.__file__), "models", "humanoid.xml"),
    "quadruped": os.path.join(oracle.DM_SUITE, "quadruped.xml"),
    "humanoid_mjx": os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml"),
}
SETTLE = {"humanoid": 300, "quadruped": 100, "humanoid_mjx": 300}


def load(name):
    """The model `name` of MODELS; MJX's humanoid test model (Euler, nv 27, nu 21, 1 solver iteration) with
    MuJoCo's default solver budget, as in benchmarks/grad_transition.py (the exact derivative is that of the
    converged solution)."""
    if name != "humanoid_mjx":
        return mujoco.MjModel.from_xml_path(MODELS[name])
    spec = mujoco.MjSpec.from_file(MODELS[name])
    spec.option.iterations = max(spec.option.iterations, 100)
    spec.option.ls_iterations = max(spec.option.ls_iterations, 50)
    return spec.compile()


EPS = 1e-6


def states(mjm, n, settle, seed=0):
    """n states with contacts: from the first keyframe (or qpos0), `settle` steps of random controls, then one
    state every 3 steps."""
    rng = np.random.default_rng(seed)
    mjd = mujoco.MjData(mjm)
    if mjm.nkey:
        mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    out = []
    for i in range(settle + 3 * n):
        mjd.ctrl[:] = rng.uniform(-0.5, 0.5, mjm.nu)
        mujoco.mj_step(mjm, mjd)
        if i >= settle and (i - settle) % 3 == 0:
            s = mujoco.MjData(mjm)
            s.qpos[:], s.qvel[:], s.act[:], s.ctrl[:] = mjd.qpos, mjd.qvel, mjd.act, mjd.ctrl
            s.qacc_warmstart[:], s.time = mjd.qacc_warmstart, mjd.time
            mujoco.mj_forward(mjm, s)
            out.append(s)
    return out


def c_transition(mjm, mjds):
    nx = 2 * mjm.nv + mjm.na
    out = []
    for mjd in mjds:
        A, B = np.zeros((nx, nx)), np.zeros((nx, mjm.nu))
        mujoco.mjd_transitionFD(mjm, mjd, EPS, 1, A, B, None, None)
        out.append((A, B))
    return out


def batch_data(m, mjds):
    ds = [mjl.make_data(m).replace(qpos=jp.asarray(s.qpos), qvel=jp.asarray(s.qvel), act=jp.asarray(s.act),
                                   ctrl=jp.asarray(s.ctrl), qacc_warmstart=jp.asarray(s.qacc_warmstart),
                                   time=jp.asarray(s.time)) for s in mjds]  # fmt: skip
    return jax.tree.map(lambda *xs: jp.stack(xs), *ds)


def _err(got, want):
    return max(float(np.abs(g - w).max() / max(np.abs(w).max(), 1e-300)) for g, w in zip(got, want))


def run(name, batch, rounds, modes):
    mjm = load(name)
    mjds = states(mjm, batch, SETTLE[name])
    m = oracle.model_from_mujoco(mjm)
    ncon = [s.ncon for s in mjds]
    nefc = [s.nefc for s in mjds]
    print(f"{name}: nv {mjm.nv} nu {mjm.nu} na {mjm.na} nconmax {m.nconmax} njmax {m.njmax}; ncon {min(ncon)}-"
          f"{max(ncon)}, nefc {min(nefc)}-{max(nefc)} over {batch} states", flush=True)
    db = batch_data(m, mjds)
    fns = {}
    for mode in modes:
        base, _, cap = mode.partition(":")  # "forward:8": ncon=8
        ncon = cap if cap == "auto" else tuple(map(int, cap.split("+"))) if "+" in cap else int(cap) if cap else None
        fn = jax.jit(jax.vmap(lambda d, b=base, c=ncon: derivatives.transition(m, d, sensors=False, mode=b,
                                                                                ncon=c)[:2]))  # fmt: skip
        t, c = time.perf_counter(), time.process_time()
        out = jax.block_until_ready(fn(db))
        print(f"  compile+first {mode}: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} CPU-s; "
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20:.2f} GiB", flush=True)
        fns[mode] = (fn, out)
    want = c_transition(mjm, mjds)
    best = {k: np.inf for k in ["C", *modes]}
    cpu = {k: [] for k in ["C", *modes]}  # CPU seconds per state (all threads), each round
    for _ in range(rounds):
        t, c = time.perf_counter(), time.process_time()
        c_transition(mjm, mjds)
        best["C"] = min(best["C"], (time.perf_counter() - t) / batch)
        cpu["C"].append((time.process_time() - c) / batch)
        for mode, (fn, _) in fns.items():
            t, c = time.perf_counter(), time.process_time()
            jax.block_until_ready(fn(db))
            best[mode] = min(best[mode], (time.perf_counter() - t) / batch)
            cpu[mode].append((time.process_time() - c) / batch)
    first = np.asarray(fns[modes[0]][1][0]), np.asarray(fns[modes[0]][1][1])
    for mode, (_, out) in fns.items():
        A, B = np.asarray(out[0]), np.asarray(out[1])
        errA = max(_err([A[i]], [want[i][0]]) for i in range(batch))
        errB = max(_err([B[i]], [want[i][1]]) for i in range(batch))
        medA = float(np.median([_err([A[i]], [want[i][0]]) for i in range(batch)]))
        selfA = max(_err([A[i]], [first[0][i]]) for i in range(batch))
        selfB = max(_err([B[i]], [first[1][i]]) for i in range(batch))
        print(f"  {mode}: {best[mode] * 1e3:.2f} ms/state (CPU median {np.median(cpu[mode]) * 1e3:.2f}), C centred "
              f"{best['C'] * 1e3:.2f} ms/state (CPU {np.median(cpu['C']) * 1e3:.2f}), ratio "
              f"{best[mode] / best['C']:.2f}; agreement A {errA:.1e} (median over states {medA:.1e}) B {errB:.1e}; "
              f"vs first A {selfA:.1e} B {selfB:.1e}", flush=True)
    print(f"  load average {os.getloadavg()[0]:.1f}", flush=True)
    return best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--modes", default="forward,reverse")
    a = ap.parse_args()
    names = ["humanoid", "quadruped"] if a.model == "all" else a.model.split(",")
    for name in names:
        run(name, a.batch, a.rounds, a.modes.split(","))


if __name__ == "__main__":
    main()
