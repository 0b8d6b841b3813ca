"""Subprocess side of tests/test_no_hang.py: programs that once deadlocked XLA:CPU's thread pool on a 2-core machine
(JAX's batched LAPACK kernels split a large batch into tasks on the intra-op pool and block until they finish; once
every pool thread is such a blocked kernel, nothing runs the tasks). Run in a subprocess with a timeout, a hang fails
the test instead of stalling the suite.

    python tests/hang_worker.py transition N [LINALG]  vmapped derivatives.transition over N humanoid contact states
    python tests/hang_worker.py step MODEL BATCH STEPS [LINALG]  jit(vmap(scan(step))) of MODEL
    XLA_FLAGS=--xla_force_host_platform_device_count=4 python tests/hang_worker.py devices MODEL BATCH STEPS [LINALG]
    XLA_FLAGS=... python tests/hang_worker.py solve BATCH N CALLS [LINALG]   batched SPD solves sharded over devices

MODEL: a bundled name, a path, "mjx:REL" / "dm:REL" (mujoco-mjx's test data, dm_control's suite) or "chain" (a
small legged chain on a floor: Newton, implicitfast, contacts; compiles in seconds). LINALG: `Config.linalg`
("auto" by default; "library" reproduces the programs that hung). Each prints progress lines to stderr and, at the
end, one JSON line of facts (timings, finiteness, the custom calls in the compiled program).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time

import jax
import jax.numpy as jp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import mjx_lite as mjl  # noqa: E402
from mjx_lite import derivatives, parallel  # noqa: E402


def _log(*args):
    print(*args, file=sys.stderr, flush=True)


def _custom_calls(compiled) -> list[str]:
    """Targets of the custom calls in a compiled program (LAPACK kernels are named lapack_*)."""
    return sorted(set(re.findall(r'custom_call_target="([^"]+)"', compiled.as_text())))


def _batched_lapack(compiled) -> list[str]:
    """The LAPACK custom calls of a compiled program whose (first) result is a batch of matrices (rank > 2: the
    kernels that split over the thread pool and wait); unbatched ones (one matrix, run inline) are not listed."""
    out = []
    for line in compiled.as_text().splitlines():
        if 'custom_call_target="lapack_' in line:
            shape = re.search(r"= \(?[a-z0-9]+\[([0-9,]*)\]", line)
            if shape is None or shape.group(1).count(",") + 1 > 2:
                out.append(line.strip()[:200])
    return out


# a small Newton/implicitfast model with contacts: a free body with four two-hinge legs standing on a floor
CHAIN = """
<mujoco model="chain">
  <option timestep="0.005" integrator="implicitfast"/>
  <default><joint type="hinge" damping="0.2" armature="0.01"/><geom type="capsule" size="0.03"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.35">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.04" mass="2"/>
      <body pos="0.18 0.1 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/>
        <body pos="0 0 -0.15"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body></body>
      <body pos="0.18 -0.1 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/>
        <body pos="0 0 -0.15"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body></body>
      <body pos="-0.18 0.1 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/>
        <body pos="0 0 -0.15"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body></body>
      <body pos="-0.18 -0.1 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/>
        <body pos="0 0 -0.15"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body></body>
    </body>
  </worldbody>
</mujoco>
"""


def _load(name: str, linalg: str):
    m = mjl.load_mjcf_string(CHAIN) if name == "chain" else mjl.load_mjcf(_model_path(name))
    return m.replace(config=m.config.replace(linalg=linalg))


def _model_path(name: str) -> str:
    import mujoco  # noqa: PLC0415 - only the test dependencies' models need it

    roots = {"mjx": os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data"),
             "dm": os.path.join(os.path.dirname(os.path.dirname(mujoco.__file__)), "dm_control", "suite")}  # fmt: skip
    head, _, tail = name.partition(":")
    return os.path.join(roots[head], tail) if tail and head in roots else name


def _contact_states(mjm, n: int, steps: int = 30) -> list:
    """n MuJoCo states after `steps` steps with random controls from the first keyframe (or qpos0): in contact."""
    import mujoco  # noqa: PLC0415

    out = []
    for seed in range(n):
        rng = np.random.default_rng(seed)
        mjd = mujoco.MjData(mjm)
        if mjm.nkey:
            mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
        for _ in range(steps):
            mjd.ctrl[:] = rng.uniform(-0.3, 0.3, mjm.nu)
            mujoco.mj_step(mjm, mjd)
        out.append(mjd)
    return out


def transition(n: int, linalg: str = "auto") -> dict:
    """derivatives.transition under vmap over n states of the MJX humanoid in contact (MuJoCo's default solver
    budget, float64), as benchmarks/grad_transition.py."""
    import mujoco  # noqa: PLC0415

    jax.config.update("jax_enable_x64", True)
    spec = mujoco.MjSpec.from_file(_model_path("mjx:humanoid/humanoid.xml"))
    spec.option.iterations, spec.option.ls_iterations = 100, 50
    mjm = spec.compile()
    m = _load("mjx:humanoid/humanoid.xml", linalg)
    m = m.replace(opt=m.opt.replace(iterations=100, ls_iterations=50))
    states = _contact_states(mjm, n)
    ncon = [int(s.ncon) for s in states]
    d0 = mjl.make_data(m)
    db = jax.tree.map(lambda *xs: jp.stack(xs), *[
        d0.replace(qpos=jp.asarray(s.qpos), qvel=jp.asarray(s.qvel), act=jp.asarray(s.act), ctrl=jp.asarray(s.ctrl),
                   qacc_warmstart=jp.asarray(s.qacc_warmstart), time=jp.asarray(s.time)) for s in states])  # fmt: skip
    fn = jax.jit(jax.vmap(lambda d: derivatives.transition(m, d, sensors=False)[:2]))
    t = time.perf_counter()
    compiled = fn.lower(db).compile()
    facts = {"case": "transition", "n": n, "linalg": linalg, "ncon_min": min(ncon), "ncon_max": max(ncon),
             "compile_s": time.perf_counter() - t, "custom_calls": _custom_calls(compiled),
             "batched_lapack": _batched_lapack(compiled)}  # fmt: skip
    _log("compiled", facts)
    t = time.perf_counter()
    A, B = jax.block_until_ready(compiled(db))
    facts.update(run_s=time.perf_counter() - t, finite=bool(np.isfinite(np.asarray(A)).all()
                                                            and np.isfinite(np.asarray(B)).all()))  # fmt: skip
    return facts


def _batch(m, batch: int):
    """batch copies of the model's initial state with random controls and small random velocities (float32)."""
    d = mjl.make_data(m)
    key1, key2 = jax.random.split(jax.random.PRNGKey(0))
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (batch,) + x.shape), d)
    return db.replace(qvel=0.1 * jax.random.normal(key1, (batch, m.nv), db.qvel.dtype),
                      ctrl=jax.random.uniform(key2, (batch, m.nu), db.ctrl.dtype, -1, 1))  # fmt: skip


def step(name: str, batch: int, steps: int, linalg: str = "auto") -> dict:
    """jit(vmap(scan(step))) of a model at a batch size, in float32 (the RL setting)."""
    m = _load(name, linalg)
    db = _batch(m, batch)

    def roll(d):
        return jax.lax.fori_loop(0, steps, lambda i, d: mjl.step(m, d), d)

    fn = jax.jit(jax.vmap(roll))
    t = time.perf_counter()
    compiled = fn.lower(db).compile()
    facts = {"case": "step", "model": name, "linalg": linalg, "batch": batch, "steps": steps,
             "solver": int(m.opt.solver), "integrator": int(m.opt.integrator), "compile_s": time.perf_counter() - t,
             "custom_calls": _custom_calls(compiled), "batched_lapack": _batched_lapack(compiled)}  # fmt: skip
    _log("compiled", facts)
    t = time.perf_counter()
    out = jax.block_until_ready(compiled(db))
    facts.update(run_s=time.perf_counter() - t, finite=bool(np.isfinite(np.asarray(out.qpos)).all()))
    return facts


def devices(name: str, batch: int, steps: int, linalg: str = "auto") -> dict:
    """parallel.rollout_fn: the batch sharded over every (forced) CPU device, float32."""
    m = _load(name, linalg)
    mesh = parallel.make_mesh()
    mr, db = parallel.replicate(m, mesh), parallel.shard(_batch(m, batch), mesh)
    fn = parallel.rollout_fn(mesh, steps)
    t = time.perf_counter()
    compiled = fn.lower(mr, db).compile()
    facts = {"case": "devices", "model": name, "linalg": linalg, "batch": batch, "steps": steps,
             "devices": jax.device_count(), "compile_s": time.perf_counter() - t,
             "custom_calls": _custom_calls(compiled), "batched_lapack": _batched_lapack(compiled)}  # fmt: skip
    _log("compiled", facts)
    t = time.perf_counter()
    out, _ = jax.block_until_ready(compiled(mr, db))
    facts.update(run_s=time.perf_counter() - t, finite=bool(np.isfinite(np.asarray(out.qpos)).all()))
    return facts


def solve(batch: int, n: int, calls: int, linalg: str = "auto") -> dict:
    """`calls` calls of a loop of 5 batched n x n SPD solves (Newton's: factor, two substitutions; the next matrix
    depends on the last solution), float32, sharded over every (forced) CPU device: mjx_lite.linalg's ("own") or
    JAX's LAPACK-backed Cholesky ("library")."""
    from mjx_lite import linalg as la  # noqa: PLC0415

    mesh = parallel.make_mesh()
    rng = np.random.default_rng(0)
    g = rng.standard_normal((batch, n, n)).astype(np.float32)
    a = parallel.shard(g @ np.swapaxes(g, -1, -2) + n * np.eye(n, dtype=np.float32), mesh)
    b = parallel.shard(rng.standard_normal((batch, n)).astype(np.float32), mesh)

    def one(a, b):
        # Newton-like: a loop of solves with a matrix that depends on the last solution, as the solver's
        def body(i, x):
            h = a + jp.diag(x * x)
            return la.spd_solve(h, b, library=linalg == "library", mindiag=1e-15)

        return jax.lax.fori_loop(0, 5, body, jp.zeros_like(b))

    fn = jax.jit(jax.shard_map(jax.vmap(one), mesh=mesh, in_specs=(jax.sharding.PartitionSpec(parallel.AXIS),) * 2,
                               out_specs=jax.sharding.PartitionSpec(parallel.AXIS)))  # fmt: skip
    t = time.perf_counter()
    compiled = fn.lower(a, b).compile()
    facts = {"case": "solve", "linalg": linalg, "batch": batch, "n": n, "calls": calls, "devices": jax.device_count(),
             "compile_s": time.perf_counter() - t, "custom_calls": _custom_calls(compiled),
             "batched_lapack": _batched_lapack(compiled)}  # fmt: skip
    _log("compiled", facts)
    t = time.perf_counter()
    for _ in range(calls):
        x = jax.block_until_ready(compiled(a, b))
    a64, b64, ref = np.asarray(a, np.float64), np.asarray(b, np.float64), np.zeros(b.shape)
    for _ in range(5):
        ref = np.linalg.solve(a64 + ref[:, :, None] ** 2 * np.eye(n), b64[..., None])[..., 0]
    facts.update(run_s=time.perf_counter() - t, max_error=float(np.abs(np.asarray(x) - ref).max()))
    return facts


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "transition":
        facts = transition(int(args[0]), *args[1:])
    elif mode == "step":
        facts = step(args[0], int(args[1]), int(args[2]), *args[3:])
    elif mode == "devices":
        facts = devices(args[0], int(args[1]), int(args[2]), *args[3:])
    elif mode == "solve":
        facts = solve(int(args[0]), int(args[1]), int(args[2]), *args[3:])
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(facts), flush=True)
