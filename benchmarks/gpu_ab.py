"""A/B variants of the batched humanoid step beside MJX in one process: steps/s of jit(vmap(scan(step))) and kernels.

    python benchmarks/gpu_ab.py [BATCH ...] [--variants NAME ...]   # default 1024, every variant; AB_STEPS (50)

`--variants xla fused "fused, lanes_first"` compares the XLA path with the fused Pallas kernels
(`Config.kernels`, both layouts of `Config.kernel_layout`); `bash benchmarks/gpu.sh kernels` runs that at batch
1024 and 8192. On a CPU the fused variants run in Pallas' interpret mode (slow: a check of the script only).

The MJX humanoid with contacts after 50 MuJoCo steps, float32, qvel + 0.01 N(0, 1) per environment. Variants are
patched in at trace time (see VARIANTS); MJX runs first and last, so its two rows show the run-to-run noise.
Written for a lent GPU (`benchmarks/gpu.sh` installs the wheels; then `PYTHONPATH=/tmp/site:. python ...`), runs
anywhere (docs/benchmarks.md, GPU section).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import jax
import jax.numpy as jp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import profile_step  # noqa: E402  (benchmarks/ is on the path)
import stages  # noqa: E402
from mujoco import mjx  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.pipeline import integrate, kernels  # noqa: E402
from mjx_lite.pipeline.kernels import launch  # noqa: E402
from mjx_lite.pipeline.kernels import velocity as fused_velocity  # noqa: E402

jax.config.update("jax_enable_compilation_cache", False)
STEPS = int(os.environ.get("AB_STEPS", 50))


def _no_reset(m, d, bad, warning, keep=None):
    """integrate.reset_where without the reset (the warning is still counted)."""
    return d.replace(warning_number=d.warning_number.at[warning].add(bad.astype(d.warning_number.dtype)))


_no_reset.__name__ = "reset_where"
_reset_where = integrate.reset_where


def _full_reset(m, d, bad, warning, keep=None):
    """integrate.reset_where as before 2026-11-27: every Data field selected, none kept from the step's start."""
    del keep
    return _reset_where(m, d, bad, warning)


_full_reset.__name__ = "reset_where"
# name: (Config.quaternion_ops, [(module, attribute, replacement) patches], optional other Config fields); every
# variant but the fused ones runs the XLA path (Config.kernels "auto" would pick the fused kernels on a GPU)
VARIANTS = {
    "einsum": ("einsum", []),
    "elementwise": ("elementwise", []),
    "elementwise, no reset": ("elementwise", [(integrate, "reset_where", _no_reset)]),
    "elementwise, full reset (before)": ("elementwise", [(integrate, "reset_where", _full_reset)]),
    "elementwise, sparse qM": ("elementwise", [], {"mass_matrix": "sparse"}),
    "elementwise, dense factorization": ("elementwise", [], {"mass_factorization": "dense"}),
    "xla": ("auto", []),
    "fused": ("auto", [], {"kernels": "fused"}),
    "fused, lanes_first": ("auto", [], {"kernels": "fused", "kernel_layout": "lanes_first"}),
    # packed inputs, one output buffer per field in Data's layout (no slices / transposes of packed outputs)
    "fused, lanes_mixed": ("auto", [], {"kernels": "fused", "kernel_layout": "lanes_mixed"}),
    # the fused path with the constraint solver left to XLA: the solver kernel's share (kernels/primal.py)
    "fused, XLA solver": ("auto", [(kernels, "primal_fused", lambda *a: False)], {"kernels": "fused"}),
    # ... and with the constraint rows left to XLA: the rows kernel's share (kernels/rows.py)
    "fused, XLA rows": ("auto", [(kernels, "rows_fused", lambda *a: False)], {"kernels": "fused"}),
    # ... with both the rows and the solver left to XLA (the kernels that lost to XLA in GPU run 5)
    "fused, XLA rows + solver": ("auto", [(kernels, "rows_fused", lambda *a: False),
                                          (kernels, "primal_fused", lambda *a: False)], {"kernels": "fused"}),
    # ... and with the primitive colliders left to XLA: the collision kernel's share (kernels/collide.py)
    "fused, XLA colliders": ("auto", [(kernels, "collide_fused", lambda *a: False)], {"kernels": "fused"}),
    # ... and with the passive forces left to XLA: their share of the velocity pass (kernels/passive.py)
    "fused, XLA passive": ("auto", [(fused_velocity, "passive_fusable", lambda *a: False)], {"kernels": "fused"}),
}
# the fused path at other block sizes (environments per program) and warps per program
for _blk, _w in ((32, 1), (64, 2), (16, 1)):
    VARIANTS[f"fused, block {_blk} w{_w}"] = (
        "auto", [(kernels, "launch_of", lambda m, b=_blk, w=_w: launch.Launch(layout=m.config.kernel_layout, block=b,
                                                                              num_warps=w))],
        {"kernels": "fused"})  # fmt: skip



def _tiled_launch(tile: int, warps: int, hessian: str = "auto", rows_tile: int = 0):
    """kernels.launch_of for the dof-tiled solver kernel (kernels/primal_tiled.py): `tile` environments per program
    (0: kernels/primal.py's lanes), and the row-tiled rows kernel (kernels/rows_tiled.py) with `rows_tile` (0:
    kernels/rows.py's lanes)."""
    return lambda m: launch.Launch(layout=m.config.kernel_layout, dof_tile=tile, num_warps=warps, hessian=hessian,
                                   rows_tile=rows_tile, interpret=jax.default_backend() != "gpu")  # fmt: skip


# the fused path with the dof-tiled Newton kernel (kernels/primal_tiled.py: an environment's rows and dofs spread over
# a program's threads) in place of kernels/primal.py's one environment per thread: one environment per program (its
# Hessian one tl.dot, or rank-1 updates), 4 per program (rank-1 updates), and at 2 warps
for _name, _tile, _w, _hess in (("fused, tiled solver", 1, 4, "auto"), ("fused, tiled solver rank1", 1, 4, "rank1"),
                                ("fused, tiled solver x4", 4, 4, "auto"), ("fused, tiled solver w2", 1, 2, "auto")):
    VARIANTS[_name] = ("auto", [(kernels, "launch_of", _tiled_launch(_tile, _w, _hess))], {"kernels": "fused"})
# the fused path with the row-tiled constraint rows kernel (kernels/rows_tiled.py: an environment's rows and dofs spread
# over a program's threads) in place of kernels/rows.py's one environment per thread: 1, 4 and 16 environments per
# program, and with the tiled solver too (both at one environment per program)
for _name, _tile, _rows in (("fused, tiled rows", 0, 1), ("fused, tiled rows x4", 0, 4),
                            ("fused, tiled rows x16", 0, 16), ("fused, tiled rows + solver", 1, 1)):  # fmt: skip
    VARIANTS[_name] = ("auto", [(kernels, "launch_of", _tiled_launch(_tile, 4, rows_tile=_rows))], {"kernels": "fused"})


def _batch(tree, qvel, b):
    t = jax.tree.map(lambda x: jp.broadcast_to(x, (b,) + x.shape) if hasattr(x, "shape") else x, tree)
    return t.replace(qvel=qvel)


def _rollout(step, m):
    def r(d):
        return jax.lax.scan(lambda d, _: (step(m, d), None), d, None, length=STEPS)[0]

    return jax.jit(jax.vmap(r))


def measure(name, patch, step, m, db, compiled=None):
    """Compile (unless `compiled` is given), time and print one variant; returns the compiled rollout."""
    if compiled is not None:
        return _time(name, compiled, db, 0.0, 0.0)
    saved = [(mod, n, getattr(mod, n)) for mod, n, _ in patch]
    for mod, n, f in patch:
        setattr(mod, n, f)
    try:
        t = time.perf_counter()
        lowered = _rollout(step, m).lower(db)
        t_lower = time.perf_counter() - t
        t = time.perf_counter()
        c = lowered.compile()
        t_compile = time.perf_counter() - t
    finally:
        for mod, n, f in saved:
            setattr(mod, n, f)
    return _time(name, c, db, t_lower, t_compile)


def _time(name, c, db, t_lower, t_compile):
    kernels = len(profile_step._kernels(c.as_text()))
    out = jax.block_until_ready(c(db))
    best = float("inf")
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(c(db))
        best = min(best, time.perf_counter() - t)
    b = jax.tree.leaves(db)[0].shape[0]
    print(f"{name:20s} batch {b:6d}: {b * STEPS / best / 1e3:9.1f}k steps/s ({best / STEPS * 1e3:.3f} ms/step) "
          f"kernels {kernels:4d}  lower {t_lower:5.1f} s, compile {t_compile:5.1f} s, "
          f"finite {bool(jp.all(jp.isfinite(out.qpos)))}", flush=True)  # fmt: skip
    return c


def check_fused(m, db) -> None:
    """The fused tree pass against the XLA stages on this device (the first thing to know on a new GPU): the largest
    difference of each field over the batch, relative to max(1, |field|)."""
    from mjx_lite.pipeline import forward as fwd  # noqa: PLC0415
    from mjx_lite.pipeline.kernels import tree  # noqa: PLC0415

    pos = jax.jit(jax.vmap(fwd.fwd_position, in_axes=(None, 0)))
    want, got = pos(mjl.configure(m, kernels="xla"), db), pos(mjl.configure(m, kernels="fused"), db)
    errs = {}
    for f in tree.KINEMATICS_OUTPUTS + tree.COM_OUTPUTS + tree.CRB_OUTPUTS:
        a, b = getattr(got, f), getattr(want, f)
        if b.size:
            errs[f] = float(jp.max(jp.abs(a - b)) / jp.maximum(1.0, jp.max(jp.abs(b))))
    worst = max(errs, key=errs.get)
    print(f"fused == xla check ({jax.tree.leaves(db)[0].shape[0]} environments): largest relative difference "
          f"{errs[worst]:.1e} ({worst}); " + ", ".join(f"{k} {v:.0e}" for k, v in errs.items()), flush=True)
    # the whole forward pass, the fused constraint solver included (float32: solver_niter may differ by one where
    # the stopping test fires on round-off, docs/kernels.md)
    want = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(mjl.configure(m, kernels="xla"), db)
    _check_forward(m, db, want, "fused")
    check_stages(m, db, want)
    # the model's solver stops after opt.iterations = 1 Newton iteration (4 line-search steps): its qacc is an
    # unconverged iterate that jumps where round-off flips a row's state (on the CPU, 1-ulp changes of qpos move the
    # XLA path's qacc by up to 1.3 relative in 3 of 4096 environments). Converged (100 iterations, 50 line-search
    # steps) both paths should agree to float32's conditioning of the problem.
    mc = m.replace(opt=m.opt.replace(iterations=100, ls_iterations=50))
    want_c = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(mjl.configure(mc, kernels="xla"), db)
    _check_forward(mc, db, want_c, "fused, converged solver (100 iterations)")
    saved = kernels.launch_of
    # the dof-tiled solver kernel (its Hessian a tl.dot), and the row-tiled rows kernel with it
    for label, how in (("fused, tiled solver", _tiled_launch(1, 4)),
                       ("fused, tiled rows + solver", _tiled_launch(1, 4, rows_tile=1))):  # fmt: skip
        kernels.launch_of = how
        try:
            _check_forward(m, db, want, label)
        except Exception as e:  # noqa: BLE001
            print(f"{label} == xla check FAILED {type(e).__name__}: {str(e)[:3000]}", flush=True)
        finally:
            kernels.launch_of = saved


def check_stages(m, db, want) -> None:
    """Each fused kernel after the tree pass alone on the XLA path's inputs (`want`: the XLA forward pass), so that a
    device difference of the whole forward pass is located: the collision kernel (contact dist, pos, frame, active),
    the rows kernel (efc_*: J, aref, R, the mask) and the solver kernel (qacc, efc_force). Per field: the largest and
    99th-percentile difference over the batch relative to max(1, |field|), and the environments whose discrete
    outcome (contact.active, efc_mask, efc_state, solver_niter) differs."""
    from mjx_lite.solver.solve import solve  # noqa: PLC0415

    mx, mf = mjl.configure(m, kernels="xla"), mjl.configure(m, kernels="fused")
    stages_ = (("collision", kernels.collision, lambda d: d.contact, ("dist", "pos", "frame"), ("active",)),
               ("rows", kernels.make_constraint, lambda d: d, ("efc_J", "efc_aref", "efc_R", "efc_pos"), ("efc_mask",)),
               ("solver", solve, lambda d: d, ("qacc", "efc_force"), ("efc_state", "solver_niter")),
               ("rows, tiled", kernels.make_constraint, lambda d: d, ("efc_J", "efc_aref", "efc_R", "efc_pos"),
                ("efc_mask",)))  # fmt: skip
    saved = kernels.launch_of
    for label, fn, part, fields, discrete in stages_:
        try:
            run = jax.jit(jax.vmap(fn, in_axes=(None, 0)))
            ref = part(run(mx, want))
            if "tiled" in label:
                kernels.launch_of = _tiled_launch(0, 4, rows_tile=1)
            run = jax.jit(jax.vmap(fn, in_axes=(None, 0)))  # traced again: launch_of is read at trace time
            got = part(run(mf, want))
            b = jax.tree.leaves(db)[0].shape[0]
            out = []
            for f in fields:
                a = jp.reshape(getattr(got, f), (b, -1)).astype(jp.float32)
                r = jp.reshape(getattr(ref, f), (b, -1)).astype(jp.float32)
                per = jp.max(jp.abs(a - r), axis=1) / jp.maximum(1.0, jp.max(jp.abs(r), axis=1))
                out.append(f"{f} max {float(jp.max(per)):.1e} p99 {float(jp.percentile(per, 99)):.1e}")
            for f in discrete:
                a, r = jp.reshape(getattr(got, f), (b, -1)), jp.reshape(getattr(ref, f), (b, -1))
                out.append(f"{f} differs in {int(jp.sum(jp.any(a != r, axis=1)))} environments")
            print(f"fused {label} alone == xla (the XLA forward's inputs, {b} environments): " + ", ".join(out),
                  flush=True)  # fmt: skip
        except Exception as e:  # noqa: BLE001
            print(f"fused {label} alone == xla check FAILED {type(e).__name__}: {str(e)[:2000]}", flush=True)
        finally:
            kernels.launch_of = saved


def _check_forward(m, db, want, label: str) -> None:
    """Print the forward pass's differences (the fused path as traced now) from the XLA path's `want`."""
    got = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(mjl.configure(m, kernels="fused"), db)
    errs, spread = {}, {}
    for f in ("qacc", "efc_force", "qfrc_constraint"):
        a, b = getattr(got, f).reshape(got.qacc.shape[0], -1), getattr(want, f).reshape(want.qacc.shape[0], -1)
        per_env = jp.max(jp.abs(a - b), axis=1) / jp.maximum(1.0, jp.max(jp.abs(b), axis=1))  # (batch,)
        errs[f] = float(jp.max(per_env))
        spread[f] = (float(jp.median(per_env)), float(jp.percentile(per_env, 99)), int(jp.sum(per_env > 1e-3)))
    same = float(jp.mean((got.solver_niter == want.solver_niter).astype(jp.float32)))
    print(f"{label} == xla forward check (per environment, relative to max(1, |field|)): " + ", ".join(
        f"{k} max {v:.1e} median {spread[k][0]:.1e} p99 {spread[k][1]:.1e} ({spread[k][2]} environments > 1e-3)"
        for k, v in errs.items()) + f", solver_niter equal in {same:.1%} of environments", flush=True)  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("batches", type=int, nargs="*", default=[1024])
    p.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument("--no-mjx", action="store_true", help="leave MJX's rows out")
    p.add_argument("--no-check", action="store_true", help="leave the fused == xla check out")
    a = p.parse_args()
    mjm, mjd, m, d = stages.forwarded_state()
    mx = mjx.put_model(mjm)
    dx = jax.jit(mjx.forward)(mx, mjx.put_data(mjm, mjd))
    print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}, {STEPS} steps per rollout")
    checked = False
    for b in a.batches:
        qvel = jp.asarray(mjd.qvel, jp.float32) + 0.01 * jax.random.normal(jax.random.PRNGKey(0), (b, mjm.nv))
        db, dxb = _batch(d, qvel, b), _batch(dx, qvel, b)
        fused_any = any(VARIANTS[v][2:] and VARIANTS[v][2].get("kernels") == "fused" for v in a.variants)
        if not checked and not a.no_check and fused_any:
            checked = True  # on the first batch only: the check compiles two forward passes
            try:
                check_fused(m, db)
            except Exception as e:  # noqa: BLE001
                print(f"fused == xla check FAILED {type(e).__name__}: {str(e)[:3000]}", flush=True)
        c_mjx = None if a.no_mjx else measure("mjx", [], mjx.step, mx, dxb)
        for name in a.variants:
            ops, patch, *cfg = VARIANTS[name]
            mv = mjl.configure(m, quaternion_ops=ops, **{"kernels": "xla", **(cfg[0] if cfg else {})})
            dv = db
            same = jax.tree.map(lambda x, y: jp.shape(x) == jp.shape(y), mjl.make_data(mv), d)
            if not all(jax.tree.leaves(same)):  # Data's layout depends on the configuration: make and forward it
                d0 = mjl.make_data(mv).replace(qpos=d.qpos, qvel=d.qvel)
                dv = _batch(jax.jit(mjl.forward)(mv, d0), qvel, b)
            try:  # one variant failing to lower or compile on a new device must not cost the others' numbers
                measure(name, patch, mjl.step, mv, dv)
            except Exception as e:  # noqa: BLE001
                print(f"{name:20s} batch {b:6d}: FAILED {type(e).__name__}: {str(e)[:2000]}", flush=True)
        if c_mjx is not None:
            measure("mjx (again)", [], mjx.step, mx, dxb, compiled=c_mjx)  # the same program: run-to-run noise


if __name__ == "__main__":
    main()
