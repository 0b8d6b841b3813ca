"""No hangs: mjx_lite's programs use no batched LAPACK factorisation on the CPU (issue 44).

JAX's batched LAPACK kernels (Cholesky, LU, triangular solves, eigh, SVD under `vmap`) split a large batch into tasks
on XLA:CPU's intra-op thread pool and block until they finish; when every pool thread is such a blocked call, the
program never returns. Reproduced on the 2-core machine (tests/hang_worker.py, `Config(linalg="library")`, i.e. the
factorisations used before `mjx_lite.linalg`): a loop of 5 batched 24 x 24 Cholesky solves over 4 forced CPU devices
(8192 systems) hung 2 of 2 times (all threads asleep), the chain model stepped at batch 4096 over 4 devices hung, and
so did the legged model at batch 2048 over 4 devices (gdb: the pool threads in `lapack_spotrf_ffi` ->
`ParallelBatchMap` -> `BlockingCounter::Wait`).

Here: (1) the lowered programs of the step, its derivatives, the planners and the fit contain no LAPACK call except
unbatched ones (`linalg.unbatched`: a batch of one runs inline and never waits on the pool); (2) the programs that
hung run to the end in a subprocess with a timeout, so that a hang fails the test instead of stalling the suite.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import derivatives, linalg, trajopt

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKER = os.path.join(HERE, "hang_worker.py")
# the solve case runs in ~20 s on the loaded 2-core machine (compile 3.5 s, 8.4 s for its 20 calls); the model cases
# compile for one to two minutes there. A hang is forever: these limits only turn it into a failure.
TIMEOUT_S = 150
TIMEOUT_SLOW_S = 900
# float32 solves of well-conditioned 24 x 24 systems against float64 numpy
SOLVE_ATOL = 1e-5

# a small model on every path that factorises: Newton, implicitfast (and its free-body blocks), contacts
CHAIN = """
<mujoco>
  <option timestep="0.005" integrator="{integrator}"/>
  <default><joint type="hinge" damping="0.2" armature="0.01"/><geom type="capsule" size="0.03"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.3">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.04" mass="2"/>
      <body pos="0.18 0 0">
        <joint name="hip" axis="0 1 0" range="-1 1" limited="true"/><geom fromto="0 0 0 0 0 -0.15"/>
      </body>
      <body pos="-0.18 0 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body>
    </body>
    <body pos="1 0 0.2"><freejoint/><geom type="sphere" size="0.1"/></body>
  </worldbody>
  <actuator><motor joint="hip"/></actuator>
</mujoco>
"""


def _lapack_batched(text: str) -> list[str]:
    """The LAPACK custom calls of a lowered program whose operand is a batch of matrices (rank > 2)."""
    out = []
    for line in text.splitlines():
        if "custom_call" in line and "lapack_" in line:
            ranks = [s.count("x") for s in re.findall(r"tensor<([0-9x]+)x?[a-z]", line)]
            if any(r > 2 for r in ranks):
                out.append(line.strip()[:200])
    return out


def _has_lapack(text: str) -> bool:
    return "lapack_" in text


def _model(integrator: str, linalg: str = "auto", **config):
    m = mjl.load_mjcf_string(CHAIN.format(integrator=integrator))
    return m.replace(config=m.config.replace(linalg=linalg, **config))


@pytest.fixture(scope="module")
def batch():
    def make(m, n=4):
        d = mjl.make_data(m)
        # host numpy (CI time: an eager jp.broadcast_to compiles one tiny program per leaf shape)
        return jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (n,) + x.shape), d)

    return make


def _step_and_grad_text(m, d) -> str:
    def loss(qvel):
        return jp.sum(jax.vmap(lambda d, v: mjl.step(m, d.replace(qvel=v)).qpos)(d, qvel) ** 2)

    step_text = jax.jit(jax.vmap(lambda d: mjl.step(m, d))).lower(d).as_text()
    return step_text + jax.jit(jax.grad(loss)).lower(d.qvel).as_text()


@pytest.mark.parametrize(("integrator", "config"), [
    ("implicitfast", {}),
    ("implicit", {"mass_factorization": "dense"}),
    pytest.param("Euler", {"mass_factorization": "dense"}, marks=pytest.mark.slow),
    pytest.param("implicitfast", {"gradients": "unrolled"}, marks=pytest.mark.slow),
])  # fmt: skip
def test_step_and_gradient_call_no_lapack(integrator, config, batch):
    """vmap(step) and its gradient (through the implicit adjoint, or the unrolled Newton iterations) lower to no
    LAPACK call on the CPU (Newton's Cholesky, the implicit integrators' solves, the dense mass factorisation)."""
    m = _model(integrator, **config)
    assert not _has_lapack(_step_and_grad_text(m, batch(m)))


def test_library_path_calls_lapack(batch):
    """With Config(linalg="library") the step lowers to LAPACK's batched Cholesky: the check above sees one."""
    m = _model("implicitfast", "library")
    text = jax.jit(jax.vmap(lambda d: mjl.step(m, d))).lower(batch(m)).as_text()
    assert _lapack_batched(text)


@pytest.mark.slow
def test_transition_and_planners_call_no_batched_lapack(batch):
    """vmapped transition Jacobians, iLQR vmapped over start states (eigh: one LAPACK call per matrix) and sysid's
    fit (pinv: one call) lower to no batched LAPACK call."""
    m = _model("implicitfast")
    d = batch(m, 2)
    text = jax.jit(jax.vmap(lambda d: derivatives.transition(m, d, sensors=False)[:2])).lower(d).as_text()
    assert not _has_lapack(text)
    cost = lambda dd, u, t: jp.sum(dd.qpos**2) + 1e-3 * jp.sum(u**2)  # noqa: E731
    plan = jax.jit(jax.vmap(lambda d: trajopt.ilqr(m, d, cost, 4, iterations=1).cost))
    text = plan.lower(d).as_text()
    assert _has_lapack(text) and not _lapack_batched(text)


def _run(args, devices, timeout, cache):
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    if devices > 1:
        flags.append(f"--xla_force_host_platform_device_count={devices}")
    env.update(XLA_FLAGS=" ".join(flags), JAX_PLATFORMS="cpu", MJX_LITE_COMPILATION_CACHE=cache,
               PYTHONPATH=ROOT + os.pathsep + env.get("PYTHONPATH", ""))  # fmt: skip
    env.pop("JAX_ENABLE_X64", None)
    try:
        out = subprocess.run([sys.executable, WORKER, *map(str, args)], env=env, capture_output=True, text=True,
                             timeout=timeout)  # fmt: skip
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"hang_worker {args} did not return within {timeout} s (a hang); stderr: {e.stderr!r}")
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads([ln for ln in out.stdout.splitlines() if ln.startswith("{")][-1])


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("jax_cache"))


# n = 12 slow (CI time, ~13 s: a second subprocess): below SEQUENTIAL_MIN_N the program calls no LAPACK kernel, which
# tests/test_linalg.py's test_no_lapack_calls checks (and test_batched_paths its solutions against numpy); the
# program that hung (LAPACK per system, n = 24) stays in CI
@pytest.mark.parametrize("n", [24, pytest.param(12, marks=pytest.mark.slow)])
def test_batched_solves_over_forced_devices_finish(n, cache_dir):
    """The smallest program that hung: a loop of 5 batched Cholesky solves (8192 systems of 24 x 24, float32) over 4
    forced CPU devices, 5 calls. With mjx_lite.linalg it finishes and solves the systems: at n = 24 with one
    unbatched LAPACK call per system (never waiting on the pool), at n = 12 (below SEQUENTIAL_MIN_N) with no
    LAPACK call. (5 calls, not the 20 of the runs below, in CI time: `batched_lapack == []` is what rules the hang
    out, deterministically; the calls check that the program runs to the end and solves the systems.)

    With JAX's LAPACK Cholesky (`hang_worker.py solve 8192 24 20 library`) the same program hung in 3 of 4 runs on
    the 2-core machine (asleep after 1.4-2.4 s of CPU time; the fourth finished in 7.7 s), and with 100 calls in 4 of
    4 (2026-11-28; three 40-call runs started side by side all finished)."""
    facts = _run(["solve", 8192, n, 5], 4, TIMEOUT_S, cache_dir)
    assert facts["devices"] == 4 and facts["batched_lapack"] == []
    assert facts["custom_calls"] == [] if n < linalg.SEQUENTIAL_MIN_N else facts["custom_calls"]
    assert facts["max_error"] < SOLVE_ATOL


@pytest.mark.slow
@pytest.mark.parametrize("args", [["devices", "chain", 4096, 5], ["devices", "legged", 2048, 20]])
def test_step_over_forced_devices_finishes(args, cache_dir):
    """The rollouts that hung over 4 forced CPU devices (chain at batch 4096, legged at 2048) run to the end."""
    facts = _run(args, 4, TIMEOUT_SLOW_S, cache_dir)
    assert facts["finite"] and facts["batched_lapack"] == []


@pytest.mark.slow
def test_vmapped_transition_of_64_humanoid_states_finishes(cache_dir):
    """The issue's case: vmap(derivatives.transition) over 64 states of the humanoid in contact (MJX test model,
    100 solver iterations, float64)."""
    facts = _run(["transition", 64], 1, TIMEOUT_SLOW_S, cache_dir)
    assert facts["finite"] and facts["ncon_min"] > 0 and facts["batched_lapack"] == []


@pytest.mark.slow
def test_walker_at_batch_4096_finishes(cache_dir):
    """MJX's walker program hung at batch 4096; ours (Newton) runs 10 steps of dm_control's walker at 4096."""
    facts = _run(["step", "dm:walker.xml", 4096, 10], 1, TIMEOUT_SLOW_S, cache_dir)
    assert facts["finite"] and facts["solver"] == 2 and facts["batched_lapack"] == []

