"""Dense factorisations and solves for the small systems of the step that cannot deadlock XLA:CPU's thread pool.

Why not `jax.numpy.linalg` / `jax.scipy.linalg` on the CPU: JAX lowers Cholesky, LU, triangular solves, eigh and
SVD to LAPACK custom calls whose batched form (any of them under `vmap`) splits a large batch into tasks on XLA:CPU's
intra-op thread pool and blocks until they finish (`jax::ParallelBatchMap`, jaxlib 0.10.2). When every pool thread
is such a blocked call (several forced CPU devices, or concurrent calls on a machine with few cores), nothing runs
the tasks and the program never returns (seen with gdb on a 2-core machine: the legged model at batch 2048 over 4
forced devices, both pool threads in `lapack_spotrf_ffi` -> `ParallelBatchMap` -> `BlockingCounter::Wait`). The
factorisations here are ordinary XLA operations: under `vmap` they become wider operations or loops, never a library
call that waits for the pool (larger solves: unbatched LAPACK calls, below).

An *unbatched* LAPACK call never splits (`ParallelBatchMap` runs a batch that fits one task inline on the calling
thread, and a batch of one always does), so `unbatched` wraps the decompositions we do not write ourselves (eigh,
pinv: planner and fitting code, never differentiated) so that `vmap` maps them one call at a time.

Algorithms (n static; loops are `fori_loop`s of n iterations with fixed shapes, so the traced graph does not grow
with n; XLA's fusion of long unrolled chains recomputed earlier steps and took tens of seconds to compile):
  cholesky_upper: a = U' U row by row ("up-looking" Cholesky-Crout: row j of U is a's row j minus one
    vector-matrix product with the rows above, over the square root of its pivot). A pivot below `mindiag` is set
    to `mindiag` and the factorisation goes on with it, as MuJoCo's mju_cholFactor; None keeps a negative pivot
    (its square root is NaN, as LAPACK's failure).
  solve_triangular: forward / back substitution, one dot per row.
  lu: a = L U without pivoting (L unit lower-triangular), as MuJoCo's mju_factorLUSparse; for the diagonally
    dominant matrices of the implicit integrators (M - h D, h the timestep).
  solve_spd / solve: a linear solve whose derivatives are those of the solution (`lax.custom_linear_solve`: the
    factorisation is never differentiated, a tangent or cotangent costs one more solve with the same matrix), and
    whose batched form (`custom_batching.custom_vmap`) runs the batch in chunks of `CHUNK` systems (`lax.map`):
    the vectorised loops then work on a chunk that stays in cache (at batch 1024, n = 24 one unchunked pass over
    the batch per row took 8x LAPACK's time; chunked it is on par), and a matrix shared by a batch of right-hand
    sides (a Jacobian's rows) is factorised once. Systems of `SEQUENTIAL_MIN_N` or more (n is static) are solved
    by LAPACK one system at a time instead (`lax.map` of unbatched calls, which cannot deadlock; the row loops
    re-read the whole batch once per row and were 2x slower there), falling back to the clamped factorisation
    where LAPACK's fails (a pivot <= 0). Under nested vmaps each level comes back to the batching rule, so no
    level batches the LAPACK calls.

Shapes: matrices (..., n, n) for the plain functions, (n, n) for the solves (batch them with `vmap`); right-hand
sides (n,) or (n, k). Differentiable, float32 and float64.

Which implementation a Model uses is `Config.linalg` (`mjx_lite.config.linalg`): "own" (these) where JAX's default
backend is the CPU, "library" (JAX's: cuSOLVER / cuBLAS on a GPU, where this deadlock does not exist) elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import jax.scipy.linalg as jsl

__all__ = ["CHUNK", "SEQUENTIAL_MIN_N", "cho_solve_upper", "cholesky_pivots", "cholesky_upper", "general_solve", "lu",
           "lu_solve", "solve", "solve_spd", "solve_triangular", "spd_solve", "unbatched"]  # fmt: skip

# systems per chunk of a batched solve: a larger batch is mapped in chunks of this many, whose matrices stay in a
# core's cache during the n loop iterations (256 matrices of 24 x 24 float32: 0.6 MB); up to it, one vmapped pass
# (mapping smaller chunks of a batch of 256 made the humanoid's Newton step slower, not faster)
CHUNK = 256
# solves of systems at least this large use JAX's LAPACK calls one system at a time (`lax.map` of unbatched calls,
# which run inline on the calling thread and never wait on the pool): the row loops here re-read the whole batch of
# matrices once per row, LAPACK keeps each matrix in cache. With the row loops at every size the humanoid's (nv 27)
# Newton step took 1.68x LAPACK's time at batch 256, with this dispatch 0.99x (`python benchmarks/report.py --only
# linalg`, docs/benchmarks.md); below ~20 the per-call overhead of one call per system dominates (a loop of 10
# batched float32 solves of 256 systems, n = 12: rows 238 us, batched LAPACK 193 us, one LAPACK call at a time 727 us)
SEQUENTIAL_MIN_N = 20


def _clamp(piv: jax.Array, mindiag) -> jax.Array:
    """piv with values below mindiag set to mindiag (NaN stays NaN); mindiag None: piv."""
    return piv if mindiag is None else jp.where(piv < mindiag, mindiag, piv)


def _row(x: jax.Array, i) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(x, i, axis=-2, keepdims=False)


def _col(x: jax.Array, i) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(x, i, axis=-1, keepdims=False)


def _at(x: jax.Array, i) -> jax.Array:
    return jax.lax.dynamic_index_in_dim(x, i, axis=-1, keepdims=False)


def _set_row(x: jax.Array, i, row: jax.Array) -> jax.Array:
    return jax.lax.dynamic_update_index_in_dim(x, row, i, axis=-2)


def cholesky_upper(a: jax.Array, mindiag: float | jax.Array | None = None) -> jax.Array:
    """U upper-triangular with a = U' U, a (..., n, n) symmetric (its upper triangle is read).

    mindiag: a pivot (the diagonal of U squared) below it is set to it and the factorisation goes on (MuJoCo's
    mju_cholFactor); a traced array may be given (broadcast against a's batch shape, ...). None: no clamping, a
    negative pivot gives NaN.
    """
    return cholesky_pivots(a, mindiag)[0]


def cholesky_pivots(a: jax.Array, mindiag: float | jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
    """(U, pivots (..., n)): `cholesky_upper` and each row's pivot before clamping (U[j, j]^2 where unclamped)."""
    n = a.shape[-1]
    idx = jp.arange(n)
    if mindiag is not None:
        mindiag = jp.asarray(mindiag, a.dtype)

    def body(j, c):
        u, piv = c
        # rows >= j of u are still zero: u[:, j] . u is the sum over the rows above j
        r = _row(a, j) - jp.einsum("...k,...km->...m", _col(u, j), u)
        p = _at(r, j)
        d = jp.sqrt(_clamp(p, mindiag))[..., None]
        r = jp.where(idx > j, r / d, jp.where(idx == j, d, jp.zeros((), a.dtype)))
        return _set_row(u, j, r), jax.lax.dynamic_update_index_in_dim(piv, p, j, axis=-1)

    return jax.lax.fori_loop(0, n, body, (jp.zeros_like(a), jp.zeros_like(a[..., 0])))


def solve_triangular(a: jax.Array, b: jax.Array, *, lower: bool, transpose: bool = False,
                     unit_diagonal: bool = False) -> jax.Array:  # fmt: skip
    """x with op(a) x = b, op(a) = a or a' (a (..., n, n) triangular: only its triangle is read; leading dimensions
    broadcast).

    b: (..., n) or (..., n, k). unit_diagonal: the diagonal is taken as ones (not read).
    """
    n = a.shape[-1]
    vec = b.ndim == a.ndim - 1
    bm = b[..., None] if vec else b
    shape = jp.broadcast_shapes(a.shape[:-2], bm.shape[:-2]) + bm.shape[-2:]
    bm = jp.broadcast_to(bm, shape)
    forward = lower != transpose  # op(a) lower-triangular: from the first row

    def op_row(i):
        """op(a)[i, :] (..., n): entries of unsolved rows meet zeros of x, the triangle's other side is masked."""
        r = _col(a, i) if transpose else _row(a, i)
        keep = (jp.arange(n) < i) if forward else (jp.arange(n) > i)
        return jp.where(keep, r, jp.zeros((), a.dtype))

    def body(k, x):
        i = k if forward else n - 1 - k
        xi = _row(bm, i) - jp.einsum("...m,...mj->...j", op_row(i), x)
        if not unit_diagonal:
            xi = xi / _at(_row(a, i), i)[..., None]
        return _set_row(x, i, xi)

    # zeros that vary like a and b do (shard_map's varying manual axes)
    x0 = (jp.zeros_like(bm) + jp.zeros_like(a[..., :1, :1])).astype(jp.result_type(a, b))
    x = jax.lax.fori_loop(0, n, body, x0)
    return x[..., 0] if vec else x


def cho_solve_upper(u: jax.Array, b: jax.Array) -> jax.Array:
    """x with (U' U) x = b, U from `cholesky_upper` (..., n, n); b (..., n) or (..., n, k)."""
    y = solve_triangular(u, b, lower=False, transpose=True)
    return solve_triangular(u, y, lower=False)


def lu(a: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(L, U) with a = L U, a (..., n, n), L unit lower-triangular (ones stored on its diagonal), U upper-triangular;
    no pivoting (Doolittle, row by row). A zero pivot gives inf/NaN: for matrices that need no pivoting, such as
    the implicit integrators' M - h D."""
    n = a.shape[-1]
    idx = jp.arange(n)
    zero = jp.zeros((), a.dtype)

    def body(j, c):
        lo, up = c
        # rows >= j of up and columns >= j of lo are still zero
        urow = _row(a, j) - jp.einsum("...k,...km->...m", _row(lo, j), up)
        urow = jp.where(idx >= j, urow, zero)
        lcol = _col(a, j) - jp.einsum("...mk,...k->...m", lo, _col(up, j))
        lcol = jp.where(idx > j, lcol / _at(urow, j)[..., None], jp.where(idx == j, jp.ones((), a.dtype), zero))
        lo = jax.lax.dynamic_update_index_in_dim(lo, lcol, j, axis=-1)
        return lo, _set_row(up, j, urow)

    return jax.lax.fori_loop(0, n, body, (jp.zeros_like(a), jp.zeros_like(a)))


def lu_solve(lu_factors: tuple[jax.Array, jax.Array], b: jax.Array) -> jax.Array:
    """x with L U x = b, (L, U) from `lu`; b (..., n) or (..., n, k)."""
    lo, up = lu_factors
    return solve_triangular(up, solve_triangular(lo, b, lower=True, unit_diagonal=True), lower=False)


# ---- solves: custom_linear_solve (derivatives) over custom_vmap (chunked batches) -----------------------------------


def _by_size(direct: Callable, lapack: Callable) -> Callable:
    """direct for n < SEQUENTIAL_MIN_N; else lapack(a, b) (one unbatched LAPACK call: inline, never waits on the
    pool), and where its solution is not finite (LAPACK's Cholesky fails on a pivot <= 0) direct's, which clamps
    pivots below mindiag as MuJoCo (a `lax.cond`: only computed then)."""

    def f(a, b, mindiag):
        if a.shape[-1] < SEQUENTIAL_MIN_N:
            return direct(a, b, mindiag)
        x = lapack(a, b)
        return jax.lax.cond(jp.all(jp.isfinite(x)) | ~jp.all(jp.isfinite(a)), lambda: x,
                            lambda: direct(a, b, mindiag))  # fmt: skip

    return f


def _chunked(direct: Callable, lapack: Callable) -> Callable:
    """direct(a (n, n), b (n, k), mindiag ()) -> x (n, k), as a custom_vmap whose batched rule maps chunks of
    `CHUNK` systems (each chunk vectorised), and factorises a matrix shared by the batch once. Systems of
    SEQUENTIAL_MIN_N or more use lapack(a, b) one system at a time (`_by_size`)."""
    one = _by_size(direct, lapack)

    @jax.custom_batching.custom_vmap
    def f(a, b, mindiag):
        return one(a, b, mindiag)

    @f.def_vmap
    def rule(axis_size, in_batched, a, b, mindiag):
        a_b, b_b, m_b = in_batched
        if not a_b and not m_b:  # one matrix, a batch of right-hand sides: one factorisation, k * batch columns
            n, k = b.shape[-2:]
            bb = jp.moveaxis(b, 0, -2).reshape(n, axis_size * k)
            x = f(a, bb, mindiag).reshape(n, axis_size, k)  # f, not one: an outer vmap comes back to this rule
            return jp.moveaxis(x, -2, 0), True
        a = a if a_b else jp.broadcast_to(a, (axis_size,) + a.shape)
        b = b if b_b else jp.broadcast_to(b, (axis_size,) + b.shape)
        mindiag = mindiag if m_b else jp.broadcast_to(mindiag, (axis_size,))
        if a.shape[-1] >= SEQUENTIAL_MIN_N:  # one unbatched LAPACK call per system; under an outer vmap the body's
            # f comes back to this rule (the map's body batched as is would batch the LAPACK calls again)
            return jax.lax.map(lambda args: f(*args), (a, b, mindiag)), True
        if axis_size <= CHUNK:
            return jax.vmap(direct)(a, b, mindiag), True
        return jax.lax.map(lambda args: direct(*args), (a, b, mindiag), batch_size=CHUNK), True

    return f


def _spd_direct(a, b, mindiag):
    return cho_solve_upper(cholesky_upper(a, mindiag), b)


def _spd_direct_free(a, b, mindiag):
    del mindiag
    return cho_solve_upper(cholesky_upper(a), b)


def _spd_lapack(a, b):
    return jsl.cho_solve(jsl.cho_factor(a.T, lower=True), b)  # a' = a: LAPACK's column-major operand as is


_spd_clamped = _chunked(_spd_direct, _spd_lapack)
_spd_free = _chunked(_spd_direct_free, _spd_lapack)
_lu_chunked = _chunked(lambda a, b, mindiag: lu_solve(lu(a), b), jp.linalg.solve)


def _linear_solve(apply: Callable, a: jax.Array, b: jax.Array, mindiag, symmetric: bool) -> jax.Array:
    vec = b.ndim == 1
    bm = b[:, None] if vec else b
    md = jp.zeros((), a.dtype) if mindiag is None else jp.asarray(mindiag, a.dtype)

    def matvec(x):
        return jp.matmul(a, x, precision="highest")

    def solve_fn(_, r):
        return apply(a, r, md)

    def transpose_solve(_, r):
        return apply(a.T, r, md)

    x = jax.lax.custom_linear_solve(matvec, bm, solve_fn, None if symmetric else transpose_solve,
                                    symmetric=symmetric)  # fmt: skip
    return x[:, 0] if vec else x


def solve_spd(a: jax.Array, b: jax.Array, mindiag: float | jax.Array | None = None) -> jax.Array:
    """x with a x = b, a (n, n) symmetric positive definite (Cholesky, `cholesky_upper`'s mindiag), b (n,) or
    (n, k). Batch with `vmap`."""
    return _linear_solve(_spd_free if mindiag is None else _spd_clamped, a, b, mindiag, symmetric=True)


def solve(a: jax.Array, b: jax.Array) -> jax.Array:
    """x with a x = b, a (n, n) by LU without pivoting (`lu`), b (n,) or (n, k). Batch with `vmap`."""
    return _linear_solve(_lu_chunked, a, b, None, symmetric=False)


def spd_solve(a: jax.Array, b: jax.Array, *, library: bool, mindiag: float | jax.Array | None = None) -> jax.Array:
    """`solve_spd`, or with library=True JAX's Cholesky (`jax.scipy.linalg.cho_factor` / `cho_solve`: NaN where a is
    not positive definite; mindiag unused). The library path factorises a' (= a): LAPACK reads a column-major
    operand, and a' is a's row-major buffer as is (with a itself XLA copies a to the other layout first)."""
    if library:
        return jsl.cho_solve(jsl.cho_factor(a.T, lower=True), b)
    return solve_spd(a, b, mindiag)


def general_solve(a: jax.Array, b: jax.Array, *, library: bool) -> jax.Array:
    """`solve` (LU without pivoting), or with library=True `jax.numpy.linalg.solve` (LU with partial pivoting)."""
    if library:
        return jp.linalg.solve(a, b)
    return solve(a, b)


def unbatched(f: Callable) -> Callable:
    """f, mapped one call at a time under `vmap` (`jax.custom_batching.sequential_vmap`): for JAX's LAPACK-backed
    decompositions (eigh, pinv) on the CPU, whose unbatched call never waits for the thread pool (see the module
    docstring). Not reverse-differentiable: only for code that is not differentiated."""
    # through *args: custom_vmap would bind f's keyword defaults (eigh's static UPLO, ...) as traced operands

    @jax.custom_batching.custom_vmap
    def g(*args):
        return f(*args)

    @g.def_vmap
    def rule(axis_size, in_batched, *args):
        args = tuple(x if bt else jp.broadcast_to(x, (axis_size,) + x.shape) for x, bt in zip(args, in_batched))
        # g, not f, in the body: under nested vmaps the outer one comes back to this rule (JAX's sequential_vmap
        # maps f itself, whose calls an outer vmap batches)
        out = jax.lax.map(lambda xs: g(*xs), args)
        return out, jax.tree.map(lambda _: True, out)

    return g


