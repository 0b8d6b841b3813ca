"""Euler with implicit damping as one fused kernel (kernels/advance.py's `euler`: the damping's derivative, the
factorisation of M + h B and the solve for qacc, then qvel + h qacc and mj_integratePos) against the XLA path and
MuJoCo's mj_Euler, in float64 (Pallas' interpret mode on the CPU).

The model is tests/test_integrate.py's chain (free, ball, hinge and slide joints, damped, with damping polynomials and
an actuator's damping on the slide), a batch of MuJoCo states after mj_forward: the kernel's qpos and qvel equal
the XLA path's to round-off and mj_Euler's to its tolerance; the step runs the kernel in place of solve_shifted and
advance; it lowers to one Triton kernel for "cuda"; derivatives (w.r.t. the state, the forces, qM and the damping
floats) are the XLA path's (slow selection, with float32).
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import integrate, kernels
from tests import oracle
from tests.kernel_checks import rel, twin_tracers
from tests.test_integrate import MODELS, RTOL, _forwarded
from tests.test_kernels_precision import gpu_triton_modules

# fused and XLA fields differ by float64 round-off only (the factorisation's and solve's summation orders): relative
# to max(1, max |field|)
ROUNDOFF = 1e-12
# derivatives run through the XLA twin on both paths; they differ by the primal's round-off
GRAD_TOL = 1e-10
# float32 fused and XLA steps differ by float32 round-off (relative to max(1, max |field|))
FLOAT32_TOL = 1e-5
NENV = 3
FIELDS = ("qpos", "qvel", "act", "time", "qacc_warmstart")


def _euler(m, d):
    out = integrate.euler(m, d)
    return {f: getattr(out, f) for f in FIELDS}


_run = jax.jit(jax.vmap(_euler, in_axes=(None, 0)))


@pytest.fixture(scope="module")
def case():
    """MuJoCo's chain and its states after mj_forward, our Model (fused), the batch, fused and XLA values."""
    mjm = MODELS["chain"]
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="fused")
    mjds = [_forwarded(mjm, seed) for seed in range(NENV)]
    ds = [oracle.data_from_mujoco(m, mjm, mjd) for mjd in mjds]
    batch = jax.tree.map(lambda *x: np.stack([np.asarray(v) for v in x]), *ds)  # (host numpy: no eager jp.stack)
    return mjm, mjds, m, batch, _run(m, batch), _run(mjl.configure(m, kernels="xla"), batch)


def test_euler_kernel_equals_xla_and_mujoco(case):
    """qpos, qvel (and the fields the update leaves to XLA) equal the XLA path's to round-off and mj_Euler's to its
    tolerance, with every joint kind, damping polynomials and an actuator's damping."""
    mjm, mjds, m, _, got, want = case
    assert kernels.euler_fused(m) and not kernels.euler_fused(mjl.configure(m, kernels="xla"))
    for f in FIELDS:
        assert rel(got[f], want[f]) <= ROUNDOFF, (f, rel(got[f], want[f]))
    for i, mjd in enumerate(mjds):
        mujoco.mj_Euler(mjm, mjd)
        for f in FIELDS:
            np.testing.assert_allclose(np.asarray(got[f][i]), getattr(mjd, f), rtol=RTOL, atol=RTOL, err_msg=f)


def test_step_runs_the_kernel_and_its_twin_reads_only_inputs(case, monkeypatch):
    """The fused Euler step launches `euler` in place of solve_shifted and advance (a traced step, not compiled), and
    its XLA twin reads no traced array of the step it closes over."""
    _, _, m, batch, _, _ = case
    d = jax.tree.map(lambda x: np.asarray(x)[0], batch)
    seen = twin_tracers(monkeypatch, m, d, fn=integrate.euler)
    assert set(seen) == {"euler"}, sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}


@pytest.mark.parametrize("dtype", [jp.float32, jp.float64])
def test_euler_kernel_lowers_to_triton(case, dtype):
    """The kernel lowers to one Triton kernel for "cuda" (compiled as on a GPU), in float32 and float64."""
    _, _, m, batch, _, _ = case
    mods = gpu_triton_modules(jax.vmap(_euler, in_axes=(None, 0)), dtype, m, batch)
    assert set(mods) == {"euler"}, sorted(mods)
    assert ("f32" if dtype == jp.float32 else "f64") in mods["euler"]


DAMPING_PARAMS = ("dof_damping", "dof_dampingpoly", "actuator_damping", "actuator_dampingpoly")


@pytest.mark.slow  # CI time: two gradient programs (~8 CPU-s)
def test_euler_kernel_gradients_equal_xla(case):
    """Reverse mode through the kernel w.r.t. qpos, qvel, qM, qfrc_smooth, qfrc_constraint, the timestep and the
    damping floats: the XLA path's derivatives."""
    _, _, m, batch, _, _ = case
    d = jax.tree.map(lambda x: np.asarray(x)[0], batch)

    def grads(m):
        def loss(params, h, qpos, qvel, qM, qfrc_smooth, qfrc_constraint):
            mm = m.replace(opt=m.opt.replace(timestep=h), **params)
            dd = d.replace(qpos=qpos, qvel=qvel, qM=qM, qfrc_smooth=qfrc_smooth, qfrc_constraint=qfrc_constraint)
            out = integrate.euler(mm, dd)
            return jp.sum(jp.sin(3.0 * out.qpos)) + jp.sum(jp.cos(out.qvel))

        params = {n: jp.asarray(getattr(m, n)) for n in DAMPING_PARAMS}
        args = (params, m.opt.timestep, d.qpos, d.qvel, d.qM, d.qfrc_smooth, jp.sin(d.qvel))
        return jax.grad(loss, argnums=tuple(range(7)))(*args)

    got, want = jax.jit(grads)(m), jax.jit(grads)(mjl.configure(m, kernels="xla"))
    for (path, b), a in zip(jax.tree_util.tree_leaves_with_path(want), jax.tree.leaves(got)):
        a, b = np.asarray(a), np.asarray(b)
        assert np.all(np.isfinite(a)), jax.tree_util.keystr(path)
        np.testing.assert_allclose(a, b, rtol=GRAD_TOL, atol=GRAD_TOL * max(1.0, np.abs(b).max()),
                                   err_msg=jax.tree_util.keystr(path))  # fmt: skip


@pytest.mark.slow
def test_euler_kernel_float32(case):
    """In float32 the kernel's step equals the XLA path's to float32 round-off."""
    _, _, m, batch, _, _ = case

    def cast(t):
        return jax.tree.map(lambda x: x.astype(np.float32) if np.issubdtype(x.dtype, np.floating) else x, t)

    m32, b32 = cast(m), cast(batch)
    got, want = _run(m32, b32), _run(mjl.configure(m32, kernels="xla"), b32)
    assert got["qvel"].dtype == jp.float32
    for f in ("qpos", "qvel"):
        assert rel(got[f], want[f]) <= FLOAT32_TOL, (f, rel(got[f], want[f]))
