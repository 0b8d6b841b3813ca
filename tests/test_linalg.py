"""mjx_lite.linalg: the factorisations and solves written in plain array operations, against numpy / scipy in float64
(random SPD and diagonally dominant matrices of several sizes, batched, chunked), their derivatives against JAX's
own (LAPACK-backed) functions, clamping as MuJoCo's mju_cholFactor, float32, and the absence of LAPACK calls."""

from __future__ import annotations

import re

import jax
import jax.numpy as jp
import numpy as np
import pytest
import scipy.linalg as sl

import mjx_lite as mjl
from mjx_lite import linalg
from mjx_lite.config import linalg as config_linalg

# float64 round-off of a factorisation or solve of a well-conditioned matrix (condition number below ~1e3 here)
TOL = 1e-12
# float32: the same systems, relative to the solution's size
TOL32 = 2e-5
# one representative size in the default selection (the Newton Hessian of a small robot), the edge and larger
# cases slow
SIZES = (pytest.param(1, marks=pytest.mark.slow), pytest.param(2, marks=pytest.mark.slow),
         pytest.param(5, marks=pytest.mark.slow), 24, pytest.param(40, marks=pytest.mark.slow))  # fmt: skip


def _spd(rng, n, batch=()):
    g = rng.standard_normal(batch + (n, n))
    return g @ np.swapaxes(g, -1, -2) + n * np.eye(n)


def _dominant(rng, n, batch=()):
    """A nonsymmetric matrix that needs no pivoting (as M - h D): an SPD matrix plus a small nonsymmetric part."""
    return _spd(rng, n, batch) + 0.3 * rng.standard_normal(batch + (n, n))


def _lapack_calls(text: str) -> list[str]:
    return re.findall(r"lapack_\w+", text)


@pytest.mark.parametrize("n", SIZES)
def test_cholesky_matches_numpy(n):
    rng = np.random.default_rng(n)
    a = _spd(rng, n, (3,))
    u, piv = jax.jit(linalg.cholesky_pivots)(jp.asarray(a))
    np.testing.assert_allclose(np.swapaxes(np.asarray(u), -1, -2), np.linalg.cholesky(a), atol=TOL * n, rtol=0)
    np.testing.assert_allclose(np.asarray(piv), np.diagonal(np.asarray(u), axis1=-2, axis2=-1) ** 2, rtol=1e-14)


@pytest.mark.parametrize("n", SIZES)
def test_solves_match_numpy(n):
    """solve_spd, solve (LU), the triangular solves (every orientation) and lu itself, vmapped, vector and matrix
    right-hand sides."""
    rng = np.random.default_rng(10 + n)
    a, m = _spd(rng, n, (3,)), _dominant(rng, n, (3,))
    b, bk = rng.standard_normal((3, n)), rng.standard_normal((3, n, 4))
    ja, jm = jp.asarray(a), jp.asarray(m)
    spd = jax.jit(jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-15)))
    np.testing.assert_allclose(np.asarray(spd(ja, jp.asarray(b))), np.linalg.solve(a, b[..., None])[..., 0],
                               atol=TOL, rtol=0)  # fmt: skip
    np.testing.assert_allclose(np.asarray(spd(ja, jp.asarray(bk))), np.linalg.solve(a, bk), atol=TOL, rtol=0)
    gen = jax.jit(jax.vmap(linalg.solve))
    np.testing.assert_allclose(np.asarray(gen(jm, jp.asarray(b))), np.linalg.solve(m, b[..., None])[..., 0],
                               atol=TOL, rtol=0)  # fmt: skip
    lo, up = jax.jit(linalg.lu)(jm)
    np.testing.assert_allclose(np.asarray(lo @ up), m, atol=TOL * n, rtol=0)
    np.testing.assert_array_equal(np.diagonal(np.asarray(lo), axis1=-2, axis2=-1), 1.0)
    np.testing.assert_array_equal(np.triu(np.asarray(lo), 1), 0.0)
    np.testing.assert_array_equal(np.tril(np.asarray(up), -1), 0.0)
    low = np.linalg.cholesky(a)
    cases = [(lower, transpose, unit) for lower in (True, False) for transpose in (False, True)
             for unit in (False, True)]  # fmt: skip

    @jax.jit
    def tri(low, b):  # every orientation in one program (one compilation)
        return [linalg.solve_triangular(low if lower else jp.swapaxes(low, -1, -2), b, lower=lower, transpose=transpose,
                                        unit_diagonal=unit) for lower, transpose, unit in cases]  # fmt: skip

    for (lower, transpose, unit), x in zip(cases, tri(jp.asarray(low), jp.asarray(bk))):
        t = low if lower else np.swapaxes(low, -1, -2)
        ref = np.stack([sl.solve_triangular(ti, bi, lower=lower, trans=int(transpose), unit_diagonal=unit)
                        for ti, bi in zip(t, bk)])  # fmt: skip
        np.testing.assert_allclose(np.asarray(x), ref, atol=TOL * np.abs(ref).max(), rtol=0)


def test_batched_paths():
    """A batch larger than CHUNK (mapped in chunks), one matrix shared by a batch of right-hand sides (factorised once)
    and nested vmaps give numpy's solutions."""
    rng = np.random.default_rng(1)
    n, batch = 5, linalg.CHUNK + 3
    a, b = _spd(rng, n, (batch,)), rng.standard_normal((batch, n))
    x = jax.jit(jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-15)))(jp.asarray(a), jp.asarray(b))
    np.testing.assert_allclose(np.asarray(x), np.linalg.solve(a, b[..., None])[..., 0], atol=TOL, rtol=0)
    shared = jax.jit(jax.vmap(lambda b: linalg.solve_spd(jp.asarray(a[0]), b)))(jp.asarray(b))
    np.testing.assert_allclose(np.asarray(shared), np.linalg.solve(a[0], b.T).T, atol=TOL, rtol=0)
    nested = jax.jit(jax.vmap(jax.vmap(linalg.solve)))(jp.asarray(a[:6].reshape(2, 3, n, n)),
                                                      jp.asarray(b[:6].reshape(2, 3, n)))  # fmt: skip
    np.testing.assert_allclose(np.asarray(nested).reshape(6, n), np.linalg.solve(a[:6], b[:6, :, None])[..., 0],
                               atol=TOL, rtol=0)  # fmt: skip


@pytest.mark.parametrize("n", (pytest.param(1, marks=pytest.mark.slow), 5, pytest.param(24, marks=pytest.mark.slow)))
def test_derivatives_match_jax(n):
    """Reverse and forward derivatives of the solves and of the Cholesky factor equal those of JAX's own
    (LAPACK-backed) functions."""
    rng = np.random.default_rng(20 + n)
    a, m = jp.asarray(_spd(rng, n, (2,))), jp.asarray(_dominant(rng, n, (2,)))
    b, da = jp.asarray(rng.standard_normal((2, n))), jp.asarray(rng.standard_normal((2, n, n)))

    def sym(a):
        return 0.5 * (a + jp.swapaxes(a, -1, -2))

    own_spd = lambda a, b: jp.sum(jp.sin(jax.vmap(linalg.solve_spd)(sym(a), b)))  # noqa: E731
    ref_spd = lambda a, b: jp.sum(jp.sin(jp.linalg.solve(sym(a), b[..., None])[..., 0]))  # noqa: E731
    own_gen = lambda a, b: jp.sum(jp.sin(jax.vmap(linalg.solve)(a, b)))  # noqa: E731
    ref_gen = lambda a, b: jp.sum(jp.sin(jp.linalg.solve(a, b[..., None])[..., 0]))  # noqa: E731
    own_chol = lambda a, b: jp.sum(jp.sin(linalg.cholesky_upper(sym(a))) * b[..., None])  # noqa: E731
    ref_chol = lambda a, b: jp.sum(jp.sin(jp.swapaxes(jp.linalg.cholesky(sym(a)), -1, -2)) * b[..., None])  # noqa: E731
    @jax.jit
    def both(a, m, b, da):  # one program: each pair's gradients and directional derivatives
        out = []
        for f, mat in ((own_spd, a), (ref_spd, a), (own_gen, m), (ref_gen, m), (own_chol, a), (ref_chol, a)):
            out.append((jax.grad(f, (0, 1))(mat, b), jax.jvp(f, (mat, b), (da, b))[1]))
        return out

    res = both(a, m, b, da)
    for (g_own, t_own), (g_ref, t_ref) in zip(res[0::2], res[1::2]):
        for x, y in zip(g_own, g_ref):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), atol=TOL * (1 + np.abs(np.asarray(y)).max()))
        np.testing.assert_allclose(float(t_own), float(t_ref), atol=TOL * (1 + abs(float(t_ref))))


def test_second_derivative_of_solve():
    """A Hessian through solve_spd (reverse over reverse, as iLQR's cost expansion through the implicit adjoint)
    equals the one through JAX's solve."""
    rng = np.random.default_rng(3)
    a, b = jp.asarray(_spd(rng, 4)), jp.asarray(rng.standard_normal(4))

    def f(s, solve):
        return jp.sum(jp.sin(solve(a + jp.diag(s * s), b)))

    h_own = jax.jit(jax.hessian(lambda s: f(s, linalg.solve_spd)))(b)
    h_ref = jax.hessian(lambda s: f(s, jp.linalg.solve))(b)
    np.testing.assert_allclose(np.asarray(h_own), np.asarray(h_ref), atol=TOL)


def test_clamped_pivots_as_mujoco():
    """A singular PSD matrix: a pivot below mindiag is set to mindiag and the factorisation goes on with it (finite U,
    U' U = a off the clamped pivot), as mju_cholFactor; without mindiag an indefinite matrix gives NaN (LAPACK's
    failure), a diverged (NaN) matrix stays NaN either way."""
    v = np.array([[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.5, 1.0, 3.0]])  # rank 2: the second pivot is 0
    mindiag = 1e-10
    u, piv = jax.jit(linalg.cholesky_pivots)(jp.asarray(v), mindiag)
    u, piv = np.asarray(u), np.asarray(piv)
    assert np.isfinite(u).all()
    assert abs(piv[1]) < 1e-14 and u[1, 1] ** 2 == pytest.approx(mindiag, rel=1e-12)
    # rows are those of the factorisation with the pivot replaced: U'U = v + (mindiag - pivot) e1 e1'
    np.testing.assert_allclose(u.T @ u, v + np.diag([0.0, mindiag - piv[1], 0.0]), atol=1e-12)
    indefinite = jp.asarray(np.diag([1.0, -1.0, 2.0]))
    assert np.isnan(np.asarray(jax.jit(linalg.cholesky_upper)(indefinite))).any()
    assert np.isfinite(np.asarray(jax.jit(lambda a: linalg.cholesky_upper(a, 1e-15))(indefinite))).all()
    bad = jp.asarray(v).at[0, 0].set(jp.nan)
    assert np.isnan(np.asarray(jax.jit(lambda a: linalg.cholesky_upper(a, 1e-15))(bad))).any()
    # the gradient of a clamped factorisation is finite (the clamped pivot's derivative is zero)
    g = jax.jit(jax.grad(lambda a: jp.sum(linalg.solve_spd(a, jp.ones(3), mindiag))))(jp.asarray(v))
    assert np.isfinite(np.asarray(g)).all()


def test_float32():
    rng = np.random.default_rng(4)
    n = 24
    a, b = _spd(rng, n, (4,)), rng.standard_normal((4, n))
    x = jax.jit(jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-15)))(jp.asarray(a, jp.float32),
                                                                       jp.asarray(b, jp.float32))  # fmt: skip
    assert x.dtype == jp.float32
    ref = np.linalg.solve(a, b[..., None])[..., 0]
    assert np.abs(np.asarray(x, np.float64) - ref).max() < TOL32 * np.abs(ref).max()
    y = jax.jit(jax.vmap(linalg.solve))(jp.asarray(a, jp.float32), jp.asarray(b, jp.float32))
    assert y.dtype == jp.float32 and np.abs(np.asarray(y, np.float64) - ref).max() < TOL32 * np.abs(ref).max()


def test_no_lapack_calls():
    """The batched programs of every function here call no LAPACK kernel (what deadlocks XLA:CPU's pool); the
    library path of the dispatchers does (so the check sees one when there is one)."""
    a, b = jp.ones((8, 5, 5)), jp.ones((8, 5))
    own = [jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-15)), jax.vmap(linalg.solve),
           lambda a, b: linalg.cholesky_upper(a), lambda a, b: linalg.lu(a),
           jax.vmap(lambda a, b: linalg.spd_solve(a, b, library=False)),
           jax.vmap(lambda a, b: linalg.general_solve(a, b, library=False)),
           lambda a, b: linalg.solve_triangular(a, b, lower=True),
           jax.grad(lambda a, b: jp.sum(jax.vmap(linalg.solve_spd)(a, b)))]  # fmt: skip
    for f in own:
        assert _lapack_calls(jax.jit(f).lower(a, b).as_text()) == []
    lib = jax.jit(jax.vmap(lambda a, b: linalg.spd_solve(a, b, library=True))).lower(a, b).as_text()
    assert _lapack_calls(lib)


def test_unbatched_maps_one_call_at_a_time():
    """`unbatched(eigh)` under vmap equals the batched eigh, and its LAPACK call takes one matrix (an unbatched call
    never waits on the thread pool)."""
    rng = np.random.default_rng(5)
    h = jp.asarray(_spd(rng, 6, (5,)) - 8.0 * np.eye(6))
    f = jax.jit(jax.vmap(linalg.unbatched(jp.linalg.eigh)))
    w, v = f(h)
    w_ref, _ = jp.linalg.eigh(h)
    np.testing.assert_allclose(np.asarray(w), np.asarray(w_ref), atol=TOL * 10)
    np.testing.assert_allclose(np.asarray(v @ (w[..., None] * jp.swapaxes(v, -1, -2))), np.asarray(h), atol=1e-10)
    text = f.lower(h).as_text()
    calls = [ln for ln in text.splitlines() if "lapack_" in ln and "custom_call" in ln]
    assert calls and all("tensor<5x6x6" not in ln for ln in calls), calls


def test_config_linalg_auto_resolves_by_backend():
    """Config.linalg: "auto" is our own on the CPU and JAX's library elsewhere; explicit values are kept; an unknown
    value is refused."""
    with pytest.raises(ValueError, match="linalg"):
        mjl.Config(linalg="lapack")
    assert config_linalg(mjl.Config()) == ("own" if jax.default_backend() == "cpu" else "library")
    for kind in ("own", "library"):
        assert config_linalg(mjl.Config(linalg=kind)) == kind


# float64 steps of a contact model with each factorisation: the Newton and implicit solves agree to round-off,
# amplified by the solver's iterations and the contacts over a few steps
STEP_ATOL = 1e-9
# the gradient of the final positions through those steps (implicit adjoint: one more Cholesky solve per step),
# relative to its largest entry
GRAD_RTOL = 1e-8


@pytest.mark.slow  # 6 min on the loaded 2-core machine (the step's gradient compiles twice); the default selection
# checks the solves' derivatives against JAX's (test_derivatives_match_jax), the step against MuJoCo elsewhere
@pytest.mark.parametrize("integrator", ["implicitfast", "implicit"])
def test_own_and_library_steps_agree(integrator):
    """Five steps of a floating body with legs on a floor (Newton, contacts, implicit integrators incl. the free
    bodies' 6 x 6 blocks, dense mass factorisation) and their gradient with respect to the initial velocities
    (implicit adjoint) with Config(linalg="own") and "library"."""
    xml = f"""
    <mujoco>
      <option timestep="0.005" integrator="{integrator}"/>
      <default><joint type="hinge" damping="0.2" armature="0.01"/><geom type="capsule" size="0.03"/></default>
      <worldbody>
        <geom type="plane" size="5 5 0.1"/>
        <body pos="0 0 0.17">
          <freejoint/><geom type="box" size="0.2 0.1 0.04" mass="2"/>
          <body pos="0.18 0 0"><joint axis="0 1 0"/><geom fromto="0 0 0 0 0 -0.15"/></body>
          <body pos="-0.18 0 0"><joint axis="1 0 0"/><geom fromto="0 0 0 0 0 -0.15"/></body>
        </body>
        <body pos="1 0 0.09"><freejoint/><geom type="sphere" size="0.1"/></body>
      </worldbody>
    </mujoco>"""
    base = mjl.load_mjcf_string(xml)
    out, grad = {}, {}
    for kind in ("own", "library"):
        m = base.replace(config=base.config.replace(linalg=kind, mass_factorization="dense"))
        d = mjl.make_data(m).replace(qvel=jp.asarray(np.random.default_rng(0).normal(0, 0.3, base.nv)))

        def loss(qvel, d=d, m=m):
            dn = jax.lax.fori_loop(0, 5, lambda i, d: mjl.step(m, d), d.replace(qvel=qvel))
            return jp.sum(jp.sin(3.0 * dn.qpos)), dn

        (_, out[kind]), grad[kind] = jax.jit(jax.value_and_grad(loss, has_aux=True))(d.qvel)
    assert int(out["own"].nefc) > 0
    for f in ("qpos", "qvel", "qacc", "qLD", "efc_force"):
        np.testing.assert_allclose(np.asarray(getattr(out["own"], f)), np.asarray(getattr(out["library"], f)),
                                   atol=STEP_ATOL, rtol=0, err_msg=f)  # fmt: skip
    g_own, g_lib = np.asarray(grad["own"]), np.asarray(grad["library"])
    assert np.isfinite(g_lib).all() and np.abs(g_lib).max() > 0
    np.testing.assert_allclose(g_own, g_lib, atol=GRAD_RTOL * np.abs(g_lib).max(), rtol=0)


def test_large_systems_one_lapack_call_at_a_time():
    """Systems of SEQUENTIAL_MIN_N or more under (nested) vmaps and their gradient: unbatched LAPACK calls only (one
    matrix each: inline, never waiting on the pool), numpy's solutions; a matrix LAPACK cannot factorise (a zero
    pivot) falls back to the clamped factorisation (finite, as MuJoCo's mju_cholFactor)."""
    n = linalg.SEQUENTIAL_MIN_N
    rng = np.random.default_rng(6)
    a, m, b = _spd(rng, n, (2, 3)), _dominant(rng, n, (2, 3)), rng.standard_normal((2, 3, n))
    spd = jax.vmap(jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-15)))
    gen = jax.vmap(jax.vmap(linalg.solve))
    grad = jax.grad(lambda a, b: jp.sum(jp.sin(spd(a, b))))
    for f in (spd, gen, grad):
        text = jax.jit(f).lower(jp.asarray(a), jp.asarray(b)).as_text()
        calls = [ln for ln in text.splitlines() if "lapack_" in ln and "custom_call" in ln]
        assert calls and all(f"tensor<{n}x{n}x" in ln or f"tensor<{n}x1x" in ln for ln in calls), calls
        assert all(f"tensor<3x{n}" not in ln and f"tensor<2x3x{n}" not in ln for ln in calls), calls
    ref = np.linalg.solve(a, b[..., None])[..., 0]
    np.testing.assert_allclose(np.asarray(jax.jit(spd)(jp.asarray(a), jp.asarray(b))), ref, atol=TOL, rtol=0)
    ref = np.linalg.solve(m, b[..., None])[..., 0]
    np.testing.assert_allclose(np.asarray(jax.jit(gen)(jp.asarray(m), jp.asarray(b))), ref, atol=TOL, rtol=0)
    singular = np.zeros((2, n, n))
    singular[0] = _spd(rng, n)
    singular[1, :3, :3] = [[1.0, 2.0, 0.5], [2.0, 4.0, 1.0], [0.5, 1.0, 3.0]]  # rank 2, then zeros
    x = jax.jit(jax.vmap(lambda a, b: linalg.solve_spd(a, b, 1e-10)))(jp.asarray(singular), jp.asarray(b[0, :2]))
    np.testing.assert_allclose(np.asarray(x[0]), np.linalg.solve(singular[0], b[0, 0]), atol=TOL, rtol=0)
    u = linalg.cholesky_upper(jp.asarray(singular[1]), 1e-10)
    np.testing.assert_allclose(np.asarray(x[1]), np.asarray(linalg.cho_solve_upper(u, jp.asarray(b[0, 1]))),
                               rtol=1e-12)  # fmt: skip
    assert np.isfinite(np.asarray(x)).all()
