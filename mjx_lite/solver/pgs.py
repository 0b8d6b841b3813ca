"""Projected Gauss-Seidel on the dual problem, as MuJoCo 4.0 runs it (MJX and MuJoCo Warp have no PGS; we do).

Dual problem (computation chapter): with A = J M^-1 J' and b = J a0 - aref,

    min_f 0.5 f' (A + R) f + b' f   subject to f in the constraint set K:
        equality rows free; friction loss rows |f| <= frictionloss; limits, frictionless and pyramidal
        contact rows f >= 0; elliptic contacts |(f_t1/mu_1, f_t2/mu_2, ...)| <= f_n (mu: contact.friction).

The iteration (our own implementation of the algorithm MuJoCo 4.0 documents and runs, so that a small iteration
budget gives MuJoCo's iterates, not only its converged solution):
  * blocks: every scalar row (equality, friction loss, limit, pyramidal or frictionless contact row) and every
    elliptic contact (all its rows); visited in an order that is a running Fisher-Yates shuffle of MuJoCo's block
    list (its efc order), reshuffled at the start of every sweep by a PCG32 generator seeded with a fixed seed
    (state 0, increment 1, one draw discarded) at the start of each solve;
  * a scalar block: exact 1-D minimisation (f -= residual / AR_ii), then the interval or sign constraint;
  * an elliptic block: a normal update (normal force below mjMINVAL: 1-D minimisation of the normal, friction
    cleared) or a ray update (exact minimisation along the current force, the normal kept >= 0), then the
    friction rows minimised with the normal fixed: a QCQP in the ellipsoid sum (x_j/mu_j)^2 <= f_n^2 (Newton on
    the multiplier, 20 steps at most; closed forms for 2 and 3 friction rows, Cholesky for 5), put on the
    ellipsoid when the constraint is active;
  * a block update that raises the dual cost by more than 1e-10 is undone; the sweep's improvement is the cost
    decrease times 1/trace(M) (MuJoCo 4.0: the trace of the current mass matrix);
  * Nesterov momentum before each sweep: f += beta (f - f_prev), beta = (k-1)/(k+2), then projected onto K; k
    counts sweeps since the last restart, and restarts at 0 when the sweep's correction opposes the extrapolation
    (O'Donoghue-Candes gradient restart: <f - f_mom, f_mom - f_prev> < 0);
  * stop after a sweep whose improvement is below opt.tolerance, or after opt.iterations sweeps.
The generator works on uint32 pairs (a 64-bit LCG from 16-bit limb products), so float32 programs without x64
produce the same integer sequence.

Loops are bounded (`common.iterate`: scan, or a while_loop bounded by opt.iterations); the sweep and the shuffle are
`fori_loop`s over the static number of blocks (padding blocks are skipped).

The block update (`block_update`, with `qcqp` and `project_ellipsoid`) is written on Python lists of same-shaped
arrays: scalars here, lane vectors (one environment per lane) in the fused PGS kernel (pipeline/kernels/pgs.py),
which runs these functions, `pcg32_next`, `initial_order` and `block_friction` per environment.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem

MINVAL = 1e-15  # mjMINVAL
_COST_UNDO = 1e-10  # a block update that raises the cost by more is undone (costChange)
_QCQP_ITERS = 20  # Newton steps on the QCQP multiplier (mju_QCQP*)
_QCQP_EPS = 1e-10  # its SPD, convergence and step thresholds

# PCG32: multiplier 6364136223846793005 as uint32 halves; increment 1 (inc | 1 = 1)
_MUL_HI, _MUL_LO = 0x5851F42D, 0x4C957F2D


# ---------------------------------------------------------------------------------------------------------
# PCG32 on uint32 pairs


def _mul32(a: jax.Array, b: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Full product of two uint32: (hi, lo) of the 64-bit result, from 16-bit limbs."""
    m16 = jp.uint32(0xFFFF)
    a0, a1 = a & m16, a >> 16
    b0, b1 = b & m16, b >> 16
    p00, p01, p10, p11 = a0 * b0, a0 * b1, a1 * b0, a1 * b1
    mid = (p00 >> 16) + (p01 & m16) + (p10 & m16)
    lo = (p00 & m16) | ((mid & m16) << 16)
    hi = p11 + (p01 >> 16) + (p10 >> 16) + (mid >> 16)
    return hi, lo


def pcg32_next(state: tuple[jax.Array, jax.Array]) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
    """One PCG32 (XSH-RR) draw: state (hi, lo) uint32 -> (new state, output uint32)."""
    hi, lo = state
    # new state = old * MUL + 1 (mod 2^64)
    phi, plo = _mul32(lo, jp.uint32(_MUL_LO))
    phi = phi + lo * jp.uint32(_MUL_HI) + hi * jp.uint32(_MUL_LO)
    nlo = plo + jp.uint32(1)
    nhi = phi + (nlo < plo).astype(jp.uint32)
    # output: xorshifted = ((old >> 18) ^ old) >> 27 (low 32 bits), rotated right by old >> 59
    xhi = hi ^ (hi >> 18)
    xlo = lo ^ ((lo >> 18) | (hi << 14))
    xs = (xlo >> 27) | (xhi << 5)
    rot = hi >> 27
    out = (xs >> rot) | (xs << ((jp.uint32(32) - rot) & jp.uint32(31)))
    return (nhi, nlo), out


def pcg32_seed() -> tuple[jax.Array, jax.Array]:
    """MuJoCo's PGS seed: state 0, increment 1, one draw (the state is then 1)."""
    return jp.uint32(0), jp.uint32(1)


def shuffle(order: jax.Array, n: jax.Array, state: tuple[jax.Array, jax.Array]):
    """Fisher-Yates shuffle of order[:n] in place (i from n-1 down to 1, j = draw % (i+1)); order (nb,) int32,
    n () int (<= nb). Returns (order, state)."""
    nb = order.shape[0]

    def body(t, c):
        order, state = c
        i = n - 1 - t
        run = i >= 1
        new_state, r = pcg32_next(state)
        j = (r % jp.maximum(i + 1, 1).astype(jp.uint32)).astype(jp.int32)
        ii = jp.maximum(i, 0)
        oi, oj = order[ii], order[j]
        swapped = order.at[ii].set(oj).at[j].set(oi)
        order = jp.where(run, swapped, order)
        state = jax.tree.map(lambda a, b: jp.where(run, a, b), new_state, state)
        return order, state

    if nb < 2:
        return order, state
    return jax.lax.fori_loop(0, nb - 1, body, (order, state))


def shuffle_segments(order: jax.Array, n: jax.Array, start: jax.Array, run: jax.Array, state):
    """`shuffle` of several segments of `order` at once, each with its own generator: segment s is
    order[start[s] : start[s] + n[s]] (disjoint), shuffled where run[s], its generator state[s] (hi, lo each (S,))."""
    nb = order.shape[0]

    def body(t, c):
        order, state = c
        i = n - 1 - t  # (S,)
        go = run & (i >= 1)
        new_state, r = pcg32_next(state)
        j = (r % jp.maximum(i + 1, 1).astype(jp.uint32)).astype(jp.int32)
        pi = jp.where(go, start + jp.maximum(i, 0), nb)  # segments that do not draw write nowhere
        pj = jp.where(go, start + j, nb)
        oi, oj = order[jp.minimum(pi, nb - 1)], order[jp.minimum(pj, nb - 1)]
        order = order.at[pi].set(oj, mode="drop").at[pj].set(oi, mode="drop")
        state = jax.tree.map(lambda a, b: jp.where(go, a, b), new_state, state)
        return order, state

    if nb < 2:
        return order, state
    return jax.lax.fori_loop(0, nb - 1, body, (order, state))


# ---------------------------------------------------------------------------------------------------------
# QCQP: min 0.5 x'Ax + x'b  s.t.  sum (x_i/d_i)^2 <= r^2 (mju_QCQP2 / mju_QCQP3 / mju_QCQP)
#
# The block update's helpers work on Python lists of same-shaped arrays (A: a list of rows; b, d: lists): scalars
# on the XLA path (`solve_pgs`), lane vectors in the fused kernel (pipeline/kernels/pgs.py), which runs the same
# functions per environment.


def _qcqp_newton(step: Callable, n_free: int, zero: jax.Array):
    """Run up to 20 Newton steps on the multiplier: step(la) -> (ok, v (list), val, deriv). zero: a zero of the
    values' shape and dtype. Returns (v, active, ok)."""

    def body(_, c):
        la, v, done, ok = c
        ok_i, v_i, val, deriv = step(la)
        fail = ~ok_i
        conv = val < _QCQP_EPS
        delta = -val / jp.where(deriv != 0, deriv, -1.0)
        small = delta < _QCQP_EPS
        stop = fail | conv | small
        v = tuple(jp.where(done, a, b) for a, b in zip(v, v_i))
        ok = jp.where(done, ok, ok_i)
        la = jp.where(done | stop, la, la + delta)
        return la, v, done | stop, ok

    init = (zero, (zero,) * n_free, jp.zeros_like(zero, bool), jp.ones_like(zero, bool))
    la, v, _, ok = jax.lax.fori_loop(0, _QCQP_ITERS, body, init)
    return list(v), (la != 0) & ok, ok


def _qcqp2(A, b, d, r):
    """mju_QCQP2 on the leading 2x2 (closed form)."""
    b1, b2 = b[0] * d[0], b[1] * d[1]
    A11, A22, A12 = A[0][0] * d[0] * d[0], A[1][1] * d[1] * d[1], A[0][1] * d[0] * d[1]

    def step(la):
        det = (A11 + la) * (A22 + la) - A12 * A12
        ok = det >= _QCQP_EPS
        detinv = 1 / jp.where(ok, det, 1.0)
        P11, P22, P12 = (A22 + la) * detinv, (A11 + la) * detinv, -A12 * detinv
        v1 = -P11 * b1 - P12 * b2
        v2 = -P12 * b1 - P22 * b2
        val = v1 * v1 + v2 * v2 - r * r
        deriv = -2.0 * (P11 * v1 * v1 + 2.0 * P12 * v1 * v2 + P22 * v2 * v2)
        return ok, (v1, v2), val, deriv

    v, active, ok = _qcqp_newton(step, 2, jp.zeros_like(b1))
    return [jp.where(ok, v[i] * d[i], 0.0) for i in range(2)], active


def _qcqp3(A, b, d, r):
    """mju_QCQP3 on the leading 3x3 (closed form with the adjugate)."""
    b1, b2, b3 = b[0] * d[0], b[1] * d[1], b[2] * d[2]
    A11, A22, A33 = A[0][0] * d[0] * d[0], A[1][1] * d[1] * d[1], A[2][2] * d[2] * d[2]
    A12, A13, A23 = A[0][1] * d[0] * d[1], A[0][2] * d[0] * d[2], A[1][2] * d[1] * d[2]

    def step(la):
        P11 = (A22 + la) * (A33 + la) - A23 * A23
        P22 = (A11 + la) * (A33 + la) - A13 * A13
        P33 = (A11 + la) * (A22 + la) - A12 * A12
        P12 = A13 * A23 - A12 * (A33 + la)
        P13 = A12 * A23 - A13 * (A22 + la)
        P23 = A12 * A13 - A23 * (A11 + la)
        det = (A11 + la) * P11 + A12 * P12 + A13 * P13
        ok = det >= _QCQP_EPS
        detinv = 1 / jp.where(ok, det, 1.0)
        P11, P22, P33, P12, P13, P23 = (x * detinv for x in (P11, P22, P33, P12, P13, P23))
        v1 = -P11 * b1 - P12 * b2 - P13 * b3
        v2 = -P12 * b1 - P22 * b2 - P23 * b3
        v3 = -P13 * b1 - P23 * b2 - P33 * b3
        val = v1 * v1 + v2 * v2 + v3 * v3 - r * r
        deriv = (-2.0 * (P11 * v1 * v1 + P22 * v2 * v2 + P33 * v3 * v3)
                 - 4.0 * (P12 * v1 * v2 + P13 * v1 * v3 + P23 * v2 * v3))  # fmt: skip
        return ok, (v1, v2, v3), val, deriv

    v, active, ok = _qcqp_newton(step, 3, jp.zeros_like(b1))
    return [jp.where(ok, v[i] * d[i], 0.0) for i in range(3)], active


def _sum(terms, zero):
    """Sum of an iterable of arrays, from zero (an empty sum is zero)."""
    for t in terms:
        zero = zero + t
    return zero


def _chol(A, n: int, zero):
    """Cholesky factor L (lists, lower) of a small SPD matrix A (lists) and whether every pivot reached 1e-10
    (mju_cholFactor's rank test)."""
    L = [[None] * n for _ in range(n)]
    ok = jp.ones_like(zero, bool)
    for j in range(n):
        s = A[j][j] - _sum((L[j][k] * L[j][k] for k in range(j)), zero)
        ok = ok & (s >= _QCQP_EPS)
        ljj = jp.sqrt(jp.where(s >= _QCQP_EPS, s, 1.0))
        L[j][j] = ljj
        for i in range(j + 1, n):
            t = A[i][j] - _sum((L[i][k] * L[j][k] for k in range(j)), zero)
            L[i][j] = t / ljj
    return L, ok


def _chol_solve(L, y, n: int, zero) -> list:
    z = []
    for i in range(n):
        z.append((y[i] - _sum((L[i][k] * z[k] for k in range(i)), zero)) / L[i][i])
    x = [None] * n
    for i in reversed(range(n)):
        x[i] = (z[i] - _sum((L[k][i] * x[k] for k in range(i + 1, n)), zero)) / L[i][i]
    return x


def _qcqp_n(A, b, d, r, n: int):
    """mju_QCQP on the leading n x n (Cholesky), n <= 5."""
    zero = jp.zeros_like(b[0] * d[0])
    bs = [b[i] * d[i] for i in range(n)]
    As = [[A[i][j] * d[i] * d[j] for j in range(n)] for i in range(n)]

    def step(la):
        L, ok = _chol([[As[i][j] + la if i == j else As[i][j] for j in range(n)] for i in range(n)], n, zero)
        v = [-x for x in _chol_solve(L, bs, n, zero)]
        val = _sum((x * x for x in v), zero) - r * r
        w = _chol_solve(L, v, n, zero)
        deriv = -2.0 * _sum((v[i] * w[i] for i in range(n)), zero)
        return ok, tuple(v), val, deriv

    v, active, ok = _qcqp_newton(step, n, zero)
    return [jp.where(ok, v[i] * d[i], 0.0) for i in range(n)], active


def project_ellipsoid(x: list, normal, mu: list, valid: list, feasible: bool) -> list:
    """Scale friction x (list of n) onto sum (x_j/mu_j)^2 <= normal^2: always to the boundary (feasible=False), or
    only when outside (feasible=True). valid (list of n bools): the contact's friction rows (padding rows stay 0)."""
    s = _sum((jp.where(v, a * a / jp.where(v, m * m, 1.0), 0.0) for a, m, v in zip(x, mu, valid)),
             jp.zeros_like(normal))
    n2 = normal * normal
    scl = jp.sqrt(n2 / jp.maximum(MINVAL, s))
    if feasible:
        scale = s > n2
        return [jp.where(scale, a * scl, a) for a in x]
    return [a * scl for a in x]


def qcqp(Ac: list, bc: list, mu: list, normal, adim, dims_present: list) -> tuple[list, jax.Array]:
    """The friction rows' QCQP of an elliptic block (nfr = len(bc) rows) for the contact dims that can occur
    (dims_present, of 3, 4, 6), the one of dim adim selected: (x (list of nfr), on the cone boundary)."""
    nfr = len(bc)
    zero = jp.zeros_like(bc[0])
    out = [zero] * nfr
    act = jp.zeros_like(zero, bool)
    for dim in dims_present:
        n = dim - 1
        A_ = [[Ac[i][j] if (i < n and j < n) else (jp.ones_like(zero) if i == j else zero) for j in range(nfr)]
              for i in range(nfr)]  # fmt: skip
        mu_ = [mu[i] if i < n else jp.ones_like(zero) for i in range(nfr)]
        if n == 2:
            v, a = _qcqp2(A_, bc, mu_, normal)
        elif n == 3:
            v, a = _qcqp3(A_, bc, mu_, normal)
        else:
            v, a = _qcqp_n(A_, bc, mu_, normal, n)
        v = v + [zero] * (nfr - n)
        sel = adim == dim
        out = [jp.where(sel, a_, o) for a_, o in zip(v, out)]
        act = jp.where(sel, a, act)
    return out, act


def block_update(res: list, old: list, A: list, vm: list, kind0, fl0, ell, mu: list, adim, dims_present: list):
    """One block of MuJoCo's PGS sweep (its body): a scalar row, or an elliptic contact, from its residual.

    Lists of same-shaped arrays (scalars on the XLA path, lane vectors in the fused kernel): res, old (dmax) the
    block's residual (AR f + b) and force; A (dmax lists of dmax) its rows of A + R, zero outside the block's valid
    rows vm (dmax bools: the first always set); kind0 the first row's ConstraintType, fl0 its friction loss; ell: an
    elliptic block (else scalar); mu (dmax - 1) the tangential frictions (0 for rows the contact does not have);
    adim the contact's dim; dims_present the contact dims that can occur (static).
    Returns (new force (dmax), the cost change), an update that raises the cost by more than 1e-10 undone.
    """
    dmax = len(res)
    nfr = dmax - 1
    zero = jp.zeros_like(res[0])
    ari = 1.0 / A[0][0]
    a00 = 1.0 / ari
    # scalar block: 1-D minimum, then the interval / sign constraint
    x0 = old[0] - res[0] * ari
    x0 = jp.where(kind0 == common.FRICTION, jp.clip(x0, -fl0, fl0), x0)
    x0 = jp.where((kind0 == common.INEQUALITY) | (kind0 == common.CONE), jp.maximum(x0, 0.0), x0)
    d0 = x0 - old[0]
    change_s = 0.5 * d0 * d0 * a00 + d0 * res[0]
    if nfr == 0:
        undo = change_s > _COST_UNDO
        return [jp.where(undo, old[0], x0)], jp.where(undo, 0.0, change_s)
    # elliptic block: normal or ray update ...
    small = old[0] < MINVAL
    normal = jp.maximum(old[0] - res[0] * ari, 0.0)
    Av = [_sum((A[i][j] * old[j] for j in range(dmax)), zero) for i in range(dmax)]
    denom = _sum((old[i] * Av[i] for i in range(dmax)), zero)
    x = -_sum((old[i] * res[i] for i in range(dmax)), zero) / jp.where(denom >= MINVAL, denom, 1.0)
    x = jp.where(old[0] + x * old[0] < 0, -old[0] / jp.where(small, 1.0, old[0]), x)
    ray = [jp.where(denom >= MINVAL, o + x * o, o) for o in old]
    fe = [jp.where(small, normal, ray[0])] + [jp.where(small, zero, r) for r in ray[1:]]
    # ... then the friction rows with the normal fixed
    Ac = [[A[1 + i][1 + j] for j in range(nfr)] for i in range(nfr)]
    bc = [res[1 + i] - _sum((Ac[i][j] * old[1 + j] for j in range(nfr)), zero) + A[1 + i][0] * (fe[0] - old[0])
          for i in range(nfr)]  # fmt: skip
    fv = vm[1:]
    t, on_cone = qcqp(Ac, bc, mu, fe[0], adim, dims_present)
    tp = project_ellipsoid(t, fe[0], mu, fv, False)
    t = [jp.where(fe[0] < MINVAL, 0.0, jp.where(v, jp.where(on_cone, a, b), 0.0)) for a, b, v in zip(tp, t, fv)]
    fe = fe[:1] + t
    fe = [jp.where(v, a, 0.0) for a, v in zip(fe, vm)]
    delta = [a - o for a, o in zip(fe, old)]
    change_b = (0.5 * _sum((delta[i] * _sum((A[i][j] * delta[j] for j in range(dmax)), zero) for i in range(dmax)),
                           zero) + _sum((d * r for d, r in zip(delta, res)), zero))  # fmt: skip
    new = [jp.where(ell, fe[0], x0)] + [jp.where(ell, a, zero) for a in fe[1:]]
    change = jp.where(ell, change_b, change_s)
    undo = change > _COST_UNDO
    return [jp.where(undo, o, n) for o, n in zip(old, new)], jp.where(undo, 0.0, change)


# ---------------------------------------------------------------------------------------------------------
# blocks


def block_rows(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Static blocks of the layout: every non-cone row (in row order), then every elliptic cone (group by group).
    Returns rows (nb, dmax) int (padding: -1) and dims (nb,) int (1, or the cone group's dim)."""
    kind = layout.kind
    scalar = np.nonzero(kind != common.CONE)[0]
    dmax = max([1] + [int(c.shape[1]) for c in layout.cones])
    rows = [np.concatenate([[r], np.full(dmax - 1, -1)]) for r in scalar]
    dims = [1] * len(scalar)
    for c in layout.cones:
        for r in c:
            rows.append(np.concatenate([r, np.full(dmax - len(r), -1)]))
            dims.append(len(r))
    if not rows:
        return np.zeros((0, dmax), np.int64), np.zeros(0, np.int64)
    return np.stack(rows).astype(np.int64), np.asarray(dims, np.int64)


def block_friction(layout: Layout, cone_friction: tuple, dtype) -> jax.Array:
    """(nb, dmax - 1) friction coefficients of each `block_rows` block's tangential rows: 0 for scalar blocks and for
    rows a contact does not have (a slot may be wider than its contact)."""
    rows_s, _ = block_rows(layout)
    nb, dmax = rows_s.shape
    nfr = dmax - 1
    fric = jp.zeros((nb, max(nfr, 1)), dtype)
    first = int(np.sum(layout.kind != common.CONE))
    for c, fr in zip(layout.cones, cone_friction):
        k, dim = c.shape
        fric = fric.at[first : first + k, : dim - 1].set(fr.astype(dtype))
        first += k
    return fric[:, :nfr]


def dims_present(layout: Layout) -> list:
    """The contact dims an elliptic block can hold: MuJoCo's condims 3, 4, 6 up to its slot's width (a slot may be
    wider than its contact: a capped or bucketed layout gives every slot the model's largest condim)."""
    _, dims_s = block_rows(layout)
    return [c for c in (3, 4, 6) if c <= int(np.max(dims_s[dims_s > 1], initial=0))]


def initial_order(layout: Layout, mask: jax.Array, block_key: tuple | None) -> tuple[jax.Array, jax.Array]:
    """The blocks' order before the first shuffle (the whole system): the live blocks (their first row's mask) in
    block_key's order (see `solve_pgs`), then the others. Returns (order (nb,) int32, live blocks () int32)."""
    rows_s, _ = block_rows(layout)
    nb = rows_s.shape[0]
    live = mask[rows_s[:, 0]] if nb else jp.zeros(0, bool)
    if block_key is None:
        block_key = (jp.arange(nb, dtype=jp.int32),)
    big = jp.iinfo(jp.int32).max
    order = jp.lexsort(tuple(jp.where(live, k, big) for k in block_key) + (~live,)).astype(jp.int32)
    return order, jp.sum(live).astype(jp.int32)


def project(layout: Layout, f: jax.Array, frictionloss: jax.Array, cone_friction: tuple) -> jax.Array:
    """The whole force f (nefc,) projected onto the constraint set K (after the momentum step): friction loss rows
    clipped to their interval, inequalities (limits, pyramidal and frictionless contacts) to f >= 0, elliptic contacts
    onto their cones (a negative normal: the whole contact zero)."""
    kind = layout.kind
    fric_rows = np.nonzero(kind == common.FRICTION)[0]
    ineq_rows = np.nonzero(kind == common.INEQUALITY)[0]
    fl = frictionloss
    f = f.at[fric_rows].set(jp.clip(f[fric_rows], -fl[fric_rows], fl[fric_rows]))
    f = f.at[ineq_rows].set(jp.maximum(f[ineq_rows], 0.0))
    for c, fr in zip(layout.cones, cone_friction):
        blk = f[c]  # (k, dim)
        n = blk[:, 0]
        t = project_ellipsoid([blk[:, 1 + i] for i in range(fr.shape[1])], n, [fr[:, i] for i in range(fr.shape[1])],
                              [fr[:, i] > 0 for i in range(fr.shape[1])], True)  # fmt: skip
        blk = jp.where((n < 0)[:, None], 0.0, jp.stack([n] + t, axis=1))
        f = f.at[c].set(blk)
    return f


def solve_pgs(layout: Layout, p: Problem, force0: jax.Array, *, iterations: int, tolerance: jax.Array,
              minv: Callable[[jax.Array], jax.Array], early_exit: bool = False,
              block_key: tuple[jax.Array, ...] | None = None, refill: bool = False, islands=None,
              order: tuple | None = None):
    """MuJoCo 4.0's PGS on the dual problem from force0 (nefc,); minv(x): M^-1 x for x (nv,) or (nv, k).

    force0: the warm-start force (MuJoCo: the force law at qacc_warmstart), replaced by 0 when its dual cost is
    positive (mj_fwdConstraint's rule; a zero force0 is a cold start).
    block_key: None (blocks visited in `block_rows` order before shuffling, i.e. the efc row order), or a tuple of
    (nb,) int arrays, the lexicographic sort keys (last key primary, as `jp.lexsort`) that put the live blocks
    in MuJoCo's efc order (`pgs_order.block_keys`).
    order: None, or (order (nb,) int, live blocks () int) of `initial_order` (in place of block_key; the whole system).

    islands: None (the whole system), or (dof_island (nv,), efc_island (nefc,), ntree) (`island.find`): each island
    is solved on its own as MuJoCo 4.0 does (its blocks in efc order, its own PCG32 generator from the same seed,
    its own momentum, restart, improvement scaled by its own trace(M) and stopping test); the islands are decoupled
    (A + R is block-diagonal over them), so one sweep over the islands' shuffled blocks laid end to end is each
    island's sweep; an island that is done stops changing while the others continue.

    Returns (efc_force (nefc,), qacc (nv,), niter, improvement): () each, or per island (ntree + 1,) (the last
    entry: rows of no island, niter 0).
    """
    if p.J_colind is not None:
        raise ValueError("PGS needs the dense constraint Jacobian: Config.efc_jacobian='dense' (or 'auto')")
    nefc = layout.nefc
    dt = p.D.dtype
    if islands is None:
        scale = 1.0 / jp.maximum(MINVAL, common.trace_m(layout, p))
    else:
        ntree = int(islands[2])
        S = ntree + 1  # segments: the islands, then one for what no island holds (never updated)
        dof_seg = jp.where(islands[0] < 0, ntree, islands[0]).astype(jp.int32)
        efc_seg = jp.where(islands[1] < 0, ntree, islands[1]).astype(jp.int32)
        diag = jp.diagonal(p.M) if layout.mass is None else p.M[layout.mass.diag]
        scale = 1.0 / jp.maximum(MINVAL, jax.ops.segment_sum(diag, dof_seg, num_segments=S))
    MinvJT = minv(p.J.T)  # (nv, nefc)
    AR = p.J @ MinvJT + jp.diag(p.R)
    b = p.J @ p.qacc_smooth - p.aref
    kind = layout.kind
    mask = p.mask

    rows_s, dims_s = block_rows(layout)
    nb, dmax = rows_s.shape
    nfr = dmax - 1
    fric = block_friction(layout, p.cone_friction, dt)  # (nb, nfr)
    # a cone's friction rows that exist (a slot may be wider than its contact: those rows have friction 0)
    fr_valid = fric > 0  # (nb, nfr)
    adim = 1 + jp.sum(fr_valid, axis=1)  # (nb,) the contact's dim
    cone_s = dims_s > 1
    elliptic = jp.asarray(cone_s) & (adim > 1)  # a 1-dim contact in an elliptic slot is a frictionless row
    rows_g = np.where(rows_s >= 0, rows_s, rows_s[:, :1])  # gather-safe rows
    rows_x = np.where(rows_s >= 0, rows_s, nefc)  # scatter rows (padding out of bounds: dropped)
    row_valid = jp.concatenate([jp.ones((nb, 1), bool), fr_valid], axis=1) & jp.asarray(rows_s >= 0)
    kind0 = kind[rows_g[:, 0]] if nb else np.zeros(0, np.int64)
    live = mask[rows_g[:, 0]] if nb else jp.zeros(0, bool)
    if islands is None:
        order0, n_live = initial_order(layout, mask, block_key) if order is None else order
    else:
        if block_key is None:
            block_key = (jp.arange(nb, dtype=jp.int32),)
        big = jp.iinfo(jp.int32).max
        # each island's live blocks in efc order, the islands one after the other (a live block of no island last)
        blk_seg = efc_seg[rows_g[:, 0]] if nb else jp.zeros(0, jp.int32)
        order0 = jp.lexsort(tuple(jp.where(live, k, big) for k in block_key) + (blk_seg, ~live)).astype(jp.int32)
        cnt = jax.ops.segment_sum((live & (blk_seg < ntree)).astype(jp.int32), blk_seg, num_segments=S)
        seg_start = (jp.cumsum(cnt) - cnt).astype(jp.int32)
        n_live = jp.sum(cnt).astype(jp.int32)
        real = jp.arange(S) < ntree
    dims = dims_present(layout)
    fl = p.frictionloss

    def dual_cost(f):
        return 0.5 * jp.dot(f, AR @ f) + jp.dot(b, f)

    def proj(f):
        return project(layout, f, fl, p.cone_friction)

    def update(bi, c, active=None):
        f, improvement, order = c
        blk = order[bi]
        rg, rx, vm = jp.asarray(rows_g)[blk], jp.asarray(rows_x)[blk], row_valid[blk]
        res = jp.where(vm, AR[rg] @ f + b[rg], 0.0)
        old = jp.where(vm, f[rg], 0.0)
        A = jp.where(vm[:, None] & vm[None, :], AR[rg][:, rg], 0.0)
        new, change = block_update([res[i] for i in range(dmax)], [old[i] for i in range(dmax)],
                                   [[A[i, j] for j in range(dmax)] for i in range(dmax)], [vm[i] for i in range(dmax)],
                                   jp.asarray(kind0)[blk], fl[rg[0]], elliptic[blk], [fric[blk, i] for i in range(nfr)],
                                   adim[blk], dims)  # fmt: skip
        new = jp.stack(new)
        run = bi < n_live
        if islands is None:
            f = jp.where(run, f.at[rx].set(new, mode="drop"), f)
            return f, improvement - jp.where(run, change, 0.0), order
        si = blk_seg[blk]
        run = run & active[si]
        f = jp.where(run, f.at[rx].set(new, mode="drop"), f)
        return f, improvement.at[si].add(-jp.where(run, change, 0.0)), order

    def sweep_islands(c):
        """One sweep of every island not done (per-island copies of `sweep`'s scalars: it, k, rng, improvement)."""
        idone = c["idone"]
        active = ~idone
        it, k = c["it"], c["k"]
        f, fprev = c["f"], c["fprev"]
        beta = jp.where(it > 0, (k - 1).astype(dt) / (k + 2).astype(dt), 0.0)
        mom = (beta > 0) & active
        f_ext = proj(f + beta[efc_seg] * (f - fprev))
        fprev = f
        f = jp.where(mom[efc_seg], f_ext, f)
        fmom = f
        order, state = shuffle_segments(c["order"], cnt, seg_start, active, c["rng"])
        improvement = jp.zeros((S,), dt)
        if nb:
            f, improvement, _ = jax.lax.fori_loop(0, nb, lambda bi, x: update(bi, x, active),
                                                  (f, improvement, order))  # fmt: skip
        improvement = improvement * scale
        dot = jax.ops.segment_sum((f - fmom) * (fmom - fprev), efc_seg, num_segments=S)
        restart = (it > 0) & (dot < 0)
        k = jp.where(restart, 0, k + 1)
        new = {"f": f, "fprev": fprev, "k": k, "rng": state, "it": it + 1, "improvement": improvement}
        row = {"f", "fprev"}
        kept = {n: jp.where((idone[efc_seg] if n in row else idone), c[n], v) if n != "rng" else
                jax.tree.map(lambda o, x: jp.where(idone, o, x), c[n], v) for n, v in new.items()}  # fmt: skip
        idone_n = idone | (improvement < tolerance)
        return {**c, **kept, "order": order, "idone": idone_n, "done": jp.all(idone_n),
                "niter": c["niter"] + jp.where(idone, 0, 1)}

    def sweep(c):
        it, k = c["it"], c["k"]
        f, fprev = c["f"], c["fprev"]
        beta = jp.where(it > 0, (k - 1).astype(dt) / (k + 2).astype(dt), 0.0)
        mom = beta > 0
        f_ext = proj(f + beta * (f - fprev))
        fprev = jp.where(mom, f, f)  # saved pre-extrapolation value (either branch: the current force)
        f = jp.where(mom, f_ext, f)
        fmom = f
        order, state = shuffle(c["order"], n_live, c["rng"])
        improvement = jp.zeros((), dt)
        if nb:
            f, improvement, _ = jax.lax.fori_loop(0, nb, update, (f, improvement, order))
        improvement = improvement * scale
        dot = jp.dot(f - fmom, fmom - fprev)
        restart = (it > 0) & (dot < 0)
        k = jp.where(restart, 0, k + 1)
        new = {"f": f, "fprev": fprev, "k": k, "order": order, "rng": state, "it": it + 1,
               "done": improvement < tolerance, "niter": c["niter"] + 1, "improvement": improvement}  # fmt: skip
        done = c["done"]
        return {**c, **jax.tree.map(lambda a, o: jp.where(done, o, a), new, {k: c[k] for k in new})}

    f0 = jp.where(mask, force0, 0.0)
    f0 = jp.where(dual_cost(f0) > 0, jp.zeros_like(f0), f0)  # MuJoCo's warm-start rule: zero when better
    if islands is None:
        init = {"f": f0, "fprev": f0, "k": jp.zeros((), jp.int32), "order": order0, "rng": pcg32_seed(),
                "it": jp.zeros((), jp.int32), "done": jp.zeros((), bool), "niter": jp.zeros((), jp.int32),
                "improvement": jp.zeros((), dt)}  # fmt: skip
        out = common.iterate(sweep, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    else:
        idone0 = ~real | (cnt == 0)
        seed = jax.tree.map(lambda x: jp.broadcast_to(x, (S,)), pcg32_seed())
        zi = jp.zeros((S,), jp.int32)
        init = {"f": f0, "fprev": f0, "k": zi, "order": order0, "rng": seed, "it": zi, "idone": idone0,
                "done": jp.all(idone0), "niter": zi, "improvement": jp.zeros((S,), dt)}  # fmt: skip
        out = common.iterate(sweep_islands, init, iterations, early_exit, unroll=common.SOLVER_UNROLL,
                             refill=refill)  # fmt: skip
    f = out["f"]
    qacc = p.qacc_smooth + MinvJT @ f
    return f, qacc, out["niter"], out["improvement"]
