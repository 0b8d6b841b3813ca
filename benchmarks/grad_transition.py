"""Transition Jacobians (A, B of mjd_transitionFD's layout): time per state of `mjx_lite.derivatives.transition`
(exact autodiff, one state and a vmapped batch) against MuJoCo C's `mjd_transitionFD` (finite differences, centred
and forward) and `jax.jacfwd` of MJX's step, on the humanoid (MJX test data) and dm_control's quadruped (its
height-field terrain geom and rangefinders removed), at a state with contacts, float64, both with MuJoCo's default
solver budget (100 iterations, tolerance 1e-8). Also the agreement of the exact Jacobians
with MuJoCo's centred differences, and the batch with a contact capacity for the derivative pass (`ncon=NCON`: the
constraint rows of NCON contact slots, and the colliders run only on the pairs in contact).

python benchmarks/grad_transition.py [--quick]
"""

from __future__ import annotations

import os
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

BATCH, QUICK_BATCH = 64, 4
NCON = 8  # contact capacity of the derivative pass (the states have at most 7 contacts)
REPEATS = 5


def _models():
    """The humanoid and the quadruped with MuJoCo's default solver budget (the MJX humanoid test model runs 1
    iteration: the implicit derivative is that of the converged solution, see docs/gradients.md), the quadruped
    without its height-field geom and rangefinders (not supported yet)."""
    out = {}
    for name, path in (("humanoid", os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml")),
                       ("quadruped", os.path.join(oracle.DM_SUITE, "quadruped.xml"))):  # fmt: skip
        spec = mujoco.MjSpec.from_file(path)
        for g in list(spec.geoms):
            if g.type == mujoco.mjtGeom.mjGEOM_HFIELD:
                spec.delete(g)
        for sen in list(spec.sensors):
            if sen.type == mujoco.mjtSensor.mjSENS_RANGEFINDER:
                spec.delete(sen)
        spec.option.iterations = max(spec.option.iterations, 100)
        spec.option.ls_iterations = max(spec.option.ls_iterations, 50)
        out[name] = spec.compile()
    return out


def _state(mjm, seed=0, steps=30):
    """A state after `steps` steps with random controls from the first keyframe (or qpos0): in contact."""
    rng = np.random.default_rng(seed)
    mjd = mujoco.MjData(mjm)
    if mjm.nkey:
        mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    for _ in range(steps):
        mjd.ctrl[:] = rng.uniform(-0.3, 0.3, mjm.nu)
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _data(m, mjd):
    return mjl.make_data(m).replace(
        qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), act=jp.asarray(mjd.act), ctrl=jp.asarray(mjd.ctrl),
        qacc_warmstart=jp.asarray(mjd.qacc_warmstart), time=jp.asarray(mjd.time))  # fmt: skip


def _best(f, repeats=REPEATS):
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f())
        ts.append(time.perf_counter() - t)
    return min(ts)


def _c_time(mjm, mjd, centred):
    nx = 2 * mjm.nv + mjm.na
    A, B = np.zeros((nx, nx)), np.zeros((nx, mjm.nu))

    def f():
        mujoco.mjd_transitionFD(mjm, mjd, 1e-6, centred, A, B, None, None)
        return A

    f()
    return _best(f), A.copy(), B.copy()


def _mjx_time(mjm, mjd):
    from mujoco import mjx  # noqa: PLC0415

    mx = mjx.put_model(mjm)
    dx = mjx.put_data(mjm, mjd)
    nq, nv = mjm.nq, mjm.nv

    def f(z):
        d = dx.replace(qpos=z[:nq], qvel=z[nq : nq + nv], ctrl=z[nq + nv :])
        d = mjx.step(mx, d)
        return jp.concatenate([d.qpos, d.qvel])

    z = jp.concatenate([dx.qpos, dx.qvel, dx.ctrl])
    jac = jax.jit(jax.jacfwd(f))
    t = time.perf_counter()
    jax.block_until_ready(jac(z))
    compile_s = time.perf_counter() - t
    return _best(lambda: jac(z)), compile_s


def run(name, mjm, batch):
    out = {"name": name, "nv": mjm.nv, "nu": mjm.nu, "na": mjm.na}
    m = oracle.model_from_mujoco(mjm)
    mjd = _state(mjm)
    out["ncon"] = int(mjd.ncon)
    out["c_centred"], A_fd, B_fd = _c_time(mjm, mjd, True)
    out["c_forward"], _, _ = _c_time(mjm, mjd, False)
    d = _data(m, mjd)
    fn = jax.jit(derivatives.transition, static_argnames="sensors")
    t = time.perf_counter()
    A, B, _, _ = jax.block_until_ready(fn(m, d, sensors=False))
    out["compile"] = time.perf_counter() - t
    out["ours"] = _best(lambda: fn(m, d, sensors=False))
    scale = max(np.abs(A_fd).max(), 1e-300)
    out["err_A"] = float(np.abs(np.asarray(A) - A_fd).max() / scale)
    out["err_B"] = float(np.abs(np.asarray(B) - B_fd).max() / max(np.abs(B_fd).max(), 1e-300))
    states = [_state(mjm, seed=s) for s in range(batch)]
    db = jax.tree.map(lambda *xs: jp.stack(xs), *[_data(m, s) for s in states])
    fb = jax.jit(jax.vmap(lambda d: derivatives.transition(m, d, sensors=False)))
    t = time.perf_counter()
    jax.block_until_ready(fb(db))
    out["compile_batch"] = time.perf_counter() - t
    out["ours_batch"] = _best(lambda: fb(db), repeats=3) / batch
    fc = jax.jit(jax.vmap(lambda d: derivatives.transition(m, d, sensors=False, ncon=NCON)))
    Ac = np.asarray(jax.block_until_ready(fc(db))[0])
    out["ours_ncon"] = _best(lambda: fc(db), repeats=3) / batch
    out["ncon_max"] = max(s.ncon for s in states)
    out["ncon_vs_full"] = float(np.abs(Ac - np.asarray(fb(db)[0])).max() / np.abs(Ac).max())
    try:
        out["mjx"], out["mjx_compile"] = _mjx_time(mjm, mjd)
    except Exception as e:  # noqa: BLE001 - report MJX's failure instead of crashing the section
        out["mjx_error"] = f"{type(e).__name__}: {str(e)[:80]}"
    return out


def report(quick: bool = False) -> str:
    batch = QUICK_BATCH if quick else BATCH
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    rows = []
    for name, mjm in _models().items():
        r = run(name, mjm, batch)
        print(r, flush=True)
        mjx = f"{r['mjx'] * 1e3:.1f} ms" if "mjx" in r else r.get("mjx_error", "-")
        rows.append(f"| {name} (nv {r['nv']}, nu {r['nu']}, na {r['na']}, ncon {r['ncon']}) | "
                    f"{r['ours'] * 1e3:.1f} ms | {r['ours_batch'] * 1e3:.1f} ms | {r['ours_ncon'] * 1e3:.2f} ms | "
                    f"{r['c_centred'] * 1e3:.2f} ms | "
                    f"{r['c_forward'] * 1e3:.2f} ms | {mjx} | {r['compile']:.0f} s | "
                    f"{r['err_A']:.1e} / {r['err_B']:.1e} |")  # fmt: skip
    return "\n".join([
        "### Transition Jacobians (float64, CPU)",
        "",
        f"`python benchmarks/grad_transition.py{' --quick' if quick else ''}`. Time per state of (A, B) at a state "
        "with contacts after 30 steps of random controls: `derivatives.transition` jitted (one state; vmapped batch "
        f"of {batch}, time per state), MuJoCo C `mjd_transitionFD` (eps 1e-6, centred / forward, one thread), and "
        "`jax.jacfwd` of MJX's `mjx.step` over (qpos, qvel, ctrl) (plain coordinates, for timing only). The batch "
        f"again with `ncon={NCON}` (contact capacity of the derivative pass; the states' largest contact count is in "
        "the printed dict, `ncon_max`, and the largest difference from the full pass, `ncon_vs_full`). Best of "
        f"{REPEATS}. Agreement: max |A - A_fd| / max |A_fd| against MuJoCo's centred differences (contacts make FD "
        f"itself approximate). Shared machine, load average {load:.1f} at the end of the run: times are inflated "
        "and noisy.",
        "",
        f"| model | mjx_lite 1 state | mjx_lite batched, per state | batched, ncon={NCON} | MuJoCo C centred | "
        "MuJoCo C forward | MJX jacfwd | compile (1 state) | agreement A / B |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ])


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__)
    print(report(quick="--quick" in sys.argv))
