"""The constraint problem shared by the solvers, and the primal cost with its derivatives.

MuJoCo's constraint model (computation chapter, "Constraint model" / "Constraint solver"): given the
unconstrained acceleration `a0 = qacc_smooth`, constraint Jacobian `J (nefc, nv)`, reference acceleration
`aref`, regulariser `R` (and `D = 1/R`), the primal problem is

    min_a  0.5 (a - a0)' M (a - a0) + s(J a - aref)

where `s` is a sum over constraints of convex, piecewise-quadratic (or conic) costs:
  equality:              0.5 D jar^2
  friction loss (Huber): 0.5 D jar^2 for |jar| < R f, f |jar| - 0.5 R f^2 beyond
  inequality (limits, frictionless and pyramidal contact rows): 0.5 D jar^2 where jar < 0, 0 otherwise
  elliptic contact (rows n, t1..): in U = (mu jar_n, f1 jar_t1, ...), N = U_0, T = |U_t|:
      top zone (N >= mu T): 0;  bottom zone (mu N + T <= 0): 0.5 sum D jar^2;
      middle zone: 0.5 Dm (N - mu T)^2 with Dm = D_n / (mu^2 (1 + mu^2))
The constraint force is `efc_force = -ds/djar` and `qfrc_constraint = J' efc_force`.

The row layout is static (`Layout`): each row's kind, the elliptic cones grouped by dimension, and the layout of
the mass matrix (dense (nv, nv), or tree-sparse (nM,) as MuJoCo stores it, `TreeMass`).

The Jacobian is dense (nefc, nv), or sparse in fixed-width rows: values J (nefc, w) and column indices
J_colind (nefc, w) (a column may repeat within a row: the values add; padding is value 0 at column 0). Every use
goes through `j_mul` (J x: a gather and a row sum), `jt_mul` (J' f: a scatter-add) and, where a dense Hessian is
wanted, `constraint_hessian` (per-row outer products scatter-added); the rows of one elliptic cone share their
columns.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import ConstraintState


def iterate(body: Callable[[dict], dict], init: dict, length: int, early_exit: bool, unroll: int = 0,
            refill: bool = False) -> dict:
    """Apply `body(carry) -> carry` up to `length` times; `carry["done"]` stops it.

    `body` must keep the carry where `carry["done"]`. length <= unroll (static): `body` applied `length` times
    in Python, with no loop (the same result, since done iterations are no-ops; under vmap a batched loop runs
    while any environment is not done anyway, and the unrolled form fuses across iterations and costs no loop
    copies). early_exit=False: `lax.scan` with a static trip count (reverse-differentiable; iterations after
    `done` are no-ops). early_exit=True: a `lax.while_loop` bounded by `length` that stops at `done` (fast; for
    forward evaluation, or under implicit differentiation); with refill=True it is batch-aware under `vmap`
    (`_refill_while`, `Config.solver_batch`).
    """
    if length == 0:
        return init
    if length <= unroll:
        for _ in range(length):
            init = body(init)
        return init
    if early_exit:
        return _refill_while(body, init, length) if refill else _while(body, init, length)
    out, _ = jax.lax.scan(lambda c, _: (body(c), None), init, None, length=length)
    return out


def _while(body: Callable[[dict], dict], init: dict, length: int) -> dict:
    """`lax.while_loop` of `body` from init until carry["done"], at most `length` trips."""

    def step(s):
        c, it = s
        return body(c), it + 1

    def cond(s):
        c, it = s
        return (~c["done"]) & (it < length)

    return jax.lax.while_loop(cond, step, (init, jp.zeros((), jp.int32)))[0]


# `_refill_while` under vmap: batches of at least REFILL_MIN_BATCH environments run buffers of batch // REFILL_SHARE
# (ant, RK4, Newton, batch 256, 2-core CPU: buffers of a quarter ran faster than of an eighth or a half)
REFILL_MIN_BATCH = 64
REFILL_SHARE = 4


def _refill_while(body: Callable[[dict], dict], init: dict, length: int) -> dict:
    """`_while`, batch-aware under `vmap`: the same iterations, and so the same values, per environment.

    A vmapped `lax.while_loop` runs as many trips as the batch's slowest environment, each over the whole batch.
    Here (batches of REFILL_MIN_BATCH or more) each trip gathers up to batch // REFILL_SHARE unfinished
    environments (carry and the body's batched constants) into a buffer, runs one iteration on it and scatters it
    back, with each environment's own trip count bounded by `length`: the batch pays about its total number of
    iterations, not the slowest one's count times the batch size.
    """
    closed, consts = _closure_convert(body, init)  # custom_vmap takes no closed-over tracers

    def run(c, consts):
        return _while(lambda x: closed(x, *consts), c, length)

    loop = jax.custom_batching.custom_vmap(run)

    @loop.def_vmap
    def rule(axis_size, in_batched, c, consts):
        c_b, k_b = in_batched
        k_axes = [0 if b else None for b in k_b]
        everywhere = jax.tree.map(lambda _: True, c)
        if axis_size < REFILL_MIN_BATCH:
            c_axes = jax.tree.map(lambda b: 0 if b else None, c_b)
            return jax.vmap(run, in_axes=(c_axes, k_axes))(c, consts), everywhere
        c = jax.tree.map(lambda x, b: x if b else jp.broadcast_to(x, (axis_size,) + jp.shape(x)), c, c_b)
        vbody = jax.vmap(lambda x, k: closed(x, *k), in_axes=(0, k_axes))
        size = max(1, axis_size // REFILL_SHARE)

        def take(x, idx):
            return jp.take(x, idx, axis=0, mode="clip")

        def trip(s):
            c, it = s
            # up to `size` unfinished environments; empty slots point past the batch: done in the buffer, dropped
            # on the way back
            (idx,) = jp.nonzero(~c["done"] & (it < length), size=size, fill_value=axis_size)
            valid = idx < axis_size
            buf = jax.tree.map(lambda x: take(x, idx), c)
            buf["done"] = buf["done"] | ~valid
            buf = vbody(buf, [take(x, idx) if b else x for x, b in zip(consts, k_b)])
            buf["done"] = buf["done"] & valid
            c = jax.tree.map(lambda x, y: x.at[idx].set(y, mode="drop"), c, buf)
            return c, it.at[idx].add(1, mode="drop")

        def cond(s):
            c, it = s
            return jp.any(~c["done"] & (it < length))

        out, _ = jax.lax.while_loop(cond, trip, (c, jp.zeros((axis_size,), jp.int32)))
        return out, everywhere

    # custom_vmap has no differentiation rule: a differentiated loop (iLQR's reverse-over-reverse Hessians linearize
    # the implicit solver's forward pass) runs the lockstep loop's derivative
    @jax.custom_jvp
    def differentiable(c, consts):
        return loop(c, consts)

    @differentiable.defjvp
    def differentiable_jvp(primals, tangents):
        return jax.jvp(run, primals, tangents)

    return differentiable(init, consts)


def _closure_convert(f: Callable, x) -> tuple[Callable, list]:
    """(g, consts): g(x, *consts) == f(x), with every value f closes over (traced or not, of any dtype) in consts
    (`jax.closure_convert` hoists only the floating-point ones)."""
    leaves, tree = jax.tree.flatten(x)
    cj, shape = jax.make_jaxpr(lambda *xs: f(jax.tree.unflatten(tree, xs)), return_shape=True)(*leaves)
    out_tree = jax.tree.structure(shape)

    def g(x, *consts):
        return jax.tree.unflatten(out_tree, jax.core.eval_jaxpr(cj.jaxpr, consts, *jax.tree.leaves(x)))

    return g, list(cj.consts)


# row kinds
EQUALITY = 0
FRICTION = 1
INEQUALITY = 2
CONE = 3  # rows of elliptic contacts (handled per cone)


@dataclasses.dataclass(frozen=True, eq=False)
class TreeMass:
    """Static index tables of a tree-sparse mass matrix qM (nM,) (MuJoCo's layout: row i holds M(i, j) for j = i
    and i's ancestor dofs).

    diag: (nv,) address of M(i, i); off: (no,) addresses of the off-diagonal entries, row/col: (no,) their i and j.
    """

    nv: int
    diag: np.ndarray
    off: np.ndarray
    row: np.ndarray
    col: np.ndarray

    @functools.cached_property
    def dense(self) -> np.ndarray:
        """(nv * nv,) address in qM of every dense entry (nM, an appended zero, off the tree); built when used."""
        nm = self.diag.size + self.off.size
        idx = np.full((self.nv, self.nv), nm, np.int64)
        idx[np.arange(self.nv), np.arange(self.nv)] = self.diag
        idx[self.row, self.col] = self.off
        idx[self.col, self.row] = self.off
        return idx.reshape(-1)

    def mul(self, qM: jax.Array, x: jax.Array) -> jax.Array:  # noqa: N803
        """M x, x (nv,)."""
        vals = qM[self.off]
        y = qM[self.diag] * x
        y = y.at[self.row].add(vals * x[self.col])
        return y.at[self.col].add(vals * x[self.row])

    def full(self, qM: jax.Array) -> jax.Array:  # noqa: N803
        """Dense (nv, nv) M."""
        return jp.concatenate([qM, jp.zeros((1,), qM.dtype)])[self.dense].reshape(self.nv, self.nv)


@dataclasses.dataclass(frozen=True, eq=False)
class Layout:
    """Static row structure of the padded constraint arrays.

    kind:  (nefc,) int, one of EQUALITY, FRICTION, INEQUALITY, CONE
    cones: tuple of (k, dim) int arrays: row indices of the k elliptic contacts of dimension dim
           (first row normal, then tangential rows), one array per dim present
    mass:  None: Problem.M is the dense (nv, nv) mass matrix; a TreeMass: Problem.M is tree-sparse (nM,)
    unit_col: None, or (nefc,) int: for a row whose dense J has one entry of magnitude 1 or 0 (dof friction, and
           slide/hinge limits: J = +-e_dof, zeroed when inactive), that dof; -1 for every other row. The dense
           Hessian then takes those rows as a diagonal term instead of through the (nv, nefc) @ (nefc, nv) product.
    """

    kind: np.ndarray
    cones: tuple[np.ndarray, ...] = ()
    mass: TreeMass | None = None
    unit_col: np.ndarray | None = None

    @property
    def nefc(self) -> int:
        return int(self.kind.shape[0])


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Problem:
    """Traced data of one constraint problem (shapes for nefc rows, nv dofs).

    J: (nefc, nv) dense, or (nefc, w) values of sparse rows whose columns are J_colind (nefc, w) int (None:
    dense); D, R, aref, frictionloss: (nefc,); mask: (nefc,) bool (padding rows are False);
    cone_mu: tuple of (k,) regularised cone friction mu = friction[0] / sqrt(impratio), one per cone group;
    cone_friction: tuple of (k, dim-1) friction coefficients of the tangential rows.
    qacc_smooth: (nv,); M: (nv, nv) dense mass matrix, or tree-sparse (nM,) when `Layout.mass` is set;
    M^-1: not stored (see solvers).
    """

    J: jax.Array
    D: jax.Array
    R: jax.Array
    aref: jax.Array
    frictionloss: jax.Array
    mask: jax.Array
    cone_mu: tuple
    cone_friction: tuple
    qacc_smooth: jax.Array
    M: jax.Array
    J_colind: jax.Array | None = None


def j_mul(J: jax.Array, colind: jax.Array | None, x: jax.Array) -> jax.Array:
    """J x (nefc,) for x (nv,), J dense (nefc, nv) or sparse values (nefc, w) with colind (nefc, w)."""
    if colind is None:
        return J @ x
    return jp.sum(J * x[colind], axis=1)


def jt_mul(J: jax.Array, colind: jax.Array | None, f: jax.Array, nv: int) -> jax.Array:
    """J' f (nv,) for f (nefc,) (see `j_mul`)."""
    if colind is None:
        return f @ J
    return jp.zeros((nv,), J.dtype).at[colind].add(J * f[:, None])


def j_dense(J: jax.Array, colind: jax.Array | None, nv: int) -> jax.Array:
    """The dense (nefc, nv) Jacobian (see `j_mul`)."""
    if colind is None:
        return J
    n = J.shape[0]
    return jp.zeros((n, nv), J.dtype).at[jp.arange(n)[:, None], colind].add(J)


def nv_of(p: Problem) -> int:
    return int(p.qacc_smooth.shape[0])


def mul_m(layout: Layout, p: Problem, x: jax.Array) -> jax.Array:
    """M x (nv,)."""
    return p.M @ x if layout.mass is None else layout.mass.mul(p.M, x)


def full_m(layout: Layout, p: Problem) -> jax.Array:
    """Dense M (nv, nv)."""
    return p.M if layout.mass is None else layout.mass.full(p.M)


def trace_m(layout: Layout, p: Problem) -> jax.Array:
    """() trace of the mass matrix. MuJoCo 4.0's solvers (Newton, CG, PGS, noslip) scale their stopping tests by its
    inverse (the current M's trace, not meaninertia * nv)."""
    if layout.mass is None:
        return jp.trace(p.M)
    return jp.sum(p.M[layout.mass.diag])


def p_j_mul(p: Problem, x: jax.Array) -> jax.Array:
    """J x (nefc,) of problem p."""
    return j_mul(p.J, p.J_colind, x)


def p_jt_mul(p: Problem, f: jax.Array) -> jax.Array:
    """J' f (nv,) of problem p."""
    return jt_mul(p.J, p.J_colind, f, nv_of(p))


def _cone_eval(jar: jax.Array, D: jax.Array, mu: jax.Array, fric: jax.Array):
    """Elliptic cone cost terms for k contacts of one dimension.

    jar: (k, dim); D: (k, dim); mu: (k,); fric: (k, dim-1).
    Returns cost (k,), force (k, dim), hessian (k, dim, dim) (constraint space), state (k,) int.
    """
    dt = jar.dtype
    scale = jp.concatenate([mu[:, None], fric], axis=1)  # (k, dim)
    U = jar * scale
    N = U[:, 0]
    Ut = U[:, 1:]
    T2 = jp.sum(Ut * Ut, axis=1)
    T_pos = T2 > 0
    T = jp.sqrt(jp.where(T_pos, T2, 1.0))
    T = jp.where(T_pos, T, 0.0)
    top = (N >= mu * T) | (~T_pos & (N >= 0))
    bottom = ~top & ((mu * N + T <= 0) | (~T_pos & (N < 0)))
    middle = ~top & ~bottom

    # bottom zone: all rows quadratic
    cost_b = 0.5 * jp.sum(D * jar * jar, axis=1)
    force_b = -D * jar
    hess_b = jax.vmap(jp.diag)(D)

    # middle zone
    Dm = D[:, 0] / (mu * mu * (1.0 + mu * mu))
    g = N - mu * T
    Tsafe = jp.where(T_pos, T, 1.0)
    e = Ut / Tsafe[:, None]  # unit tangent in U space
    grad_g = jp.concatenate([jp.ones_like(N)[:, None], -mu[:, None] * e], axis=1)  # dg/dU
    cost_m = 0.5 * Dm * g * g
    force_m = -(Dm * g)[:, None] * grad_g * scale
    dim1 = Ut.shape[1]
    eye = jp.eye(dim1, dtype=dt)
    hess_gt = -(mu / Tsafe)[:, None, None] * (eye[None] - e[:, :, None] * e[:, None, :])  # d2g/dUt2
    hess_g = jp.zeros(jar.shape + (jar.shape[1],), dt).at[:, 1:, 1:].set(hess_gt)
    hess_U = Dm[:, None, None] * (grad_g[:, :, None] * grad_g[:, None, :] + g[:, None, None] * hess_g)
    hess_m = scale[:, :, None] * hess_U * scale[:, None, :]

    zero = jp.zeros_like
    cost = jp.where(bottom, cost_b, jp.where(middle, cost_m, zero(cost_b)))
    force = jp.where(bottom[:, None], force_b, jp.where(middle[:, None], force_m, zero(force_b)))
    hess = jp.where(bottom[:, None, None], hess_b, jp.where(middle[:, None, None], hess_m, zero(hess_b)))
    state = jp.where(
        bottom, int(ConstraintState.QUADRATIC), jp.where(middle, int(ConstraintState.CONE), 0)
    ).astype(jp.int32)
    return cost, force, hess, state


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class ConstraintEval:
    """s(jar) and its derivatives. cost: (); force: (nefc,) = -ds/djar; hdiag: (nefc,) diagonal Hessian of
    the scalar rows (0 on cone rows); cone_hess: tuple of (k, dim, dim); state: (nefc,) ConstraintState;
    cost_rows: (nefc,) each row's cost, a cone's on its first row (summed per island), or None."""

    cost: jax.Array
    force: jax.Array
    hdiag: jax.Array
    cone_hess: tuple
    state: jax.Array
    cost_rows: jax.Array | None = None


def eval_constraints(layout: Layout, p: Problem, jar: jax.Array) -> ConstraintEval:
    """Evaluate the constraint cost s at `jar = J a - aref` (nefc,)."""
    kind = jp.asarray(layout.kind)
    D, R, fl, mask = p.D, p.R, p.frictionloss, p.mask
    Q, LINNEG, LINPOS = (int(ConstraintState.QUADRATIC), int(ConstraintState.LINEARNEG),
                         int(ConstraintState.LINEARPOS))  # fmt: skip
    quad_cost = 0.5 * D * jar * jar
    # friction loss (Huber)
    Rf = R * fl
    lin_pos = jar >= Rf
    lin_neg = jar <= -Rf
    fr_cost = jp.where(lin_pos, fl * jar - 0.5 * Rf * fl, jp.where(lin_neg, -fl * jar - 0.5 * Rf * fl, quad_cost))
    fr_force = jp.where(lin_pos, -fl, jp.where(lin_neg, fl, -D * jar))
    fr_h = jp.where(lin_pos | lin_neg, 0.0, D)
    fr_state = jp.where(lin_pos, LINPOS, jp.where(lin_neg, LINNEG, Q))
    # inequality
    act = jar < 0
    iq_cost = jp.where(act, quad_cost, 0.0)
    iq_force = jp.where(act, -D * jar, 0.0)
    iq_h = jp.where(act, D, 0.0)
    iq_state = jp.where(act, Q, int(ConstraintState.SATISFIED))

    is_eq, is_fr, is_iq = kind == EQUALITY, kind == FRICTION, kind == INEQUALITY
    cost_r = jp.where(is_eq, quad_cost, jp.where(is_fr, fr_cost, jp.where(is_iq, iq_cost, 0.0)))
    force = jp.where(is_eq, -D * jar, jp.where(is_fr, fr_force, jp.where(is_iq, iq_force, 0.0)))
    hdiag = jp.where(is_eq, D, jp.where(is_fr, fr_h, jp.where(is_iq, iq_h, 0.0)))
    state = jp.where(is_eq, Q, jp.where(is_fr, fr_state, jp.where(is_iq, iq_state, 0))).astype(jp.int32)
    cost_r = jp.where(mask, cost_r, 0.0)
    force = jp.where(mask, force, 0.0)
    hdiag = jp.where(mask, hdiag, 0.0)
    cost = jp.sum(cost_r)

    cone_hess = []
    for rows, mu, fric in zip(layout.cones, p.cone_mu, p.cone_friction):
        rows_j = jp.asarray(rows)
        cmask = mask[rows_j[:, 0]]
        c_cost, c_force, c_hess, c_state = _cone_eval(jar[rows_j], D[rows_j], mu, fric)
        c_cost = jp.where(cmask, c_cost, 0.0)
        c_force = jp.where(cmask[:, None], c_force, 0.0)
        c_hess = jp.where(cmask[:, None, None], c_hess, 0.0)
        cost = cost + jp.sum(c_cost)
        cost_r = cost_r.at[rows_j[:, 0]].add(c_cost)
        force = force.at[rows_j].set(c_force)
        state = state.at[rows_j].set(jp.broadcast_to(c_state[:, None], rows.shape))
        cone_hess.append(c_hess)
    state = jp.where(mask, state, 0)
    return ConstraintEval(cost=cost, force=force, hdiag=hdiag, cone_hess=tuple(cone_hess), state=state,
                          cost_rows=cost_r)


MAX_ROW_RUNS = 8  # `constraint_hessian` slices J's general rows when they form at most this many contiguous runs


def _row_runs(rows: np.ndarray) -> list[tuple[int, int]]:
    """The contiguous runs [(start, stop)] of the sorted static row indices `rows`."""
    if rows.size == 0:
        return []
    cut = np.nonzero(np.diff(rows) != 1)[0] + 1
    starts, stops = np.concatenate([[0], cut]), np.concatenate([cut, [rows.size]])
    return [(int(rows[a]), int(rows[b - 1]) + 1) for a, b in zip(starts, stops)]


def constraint_hessian(layout: Layout, p: Problem, ev: ConstraintEval) -> jax.Array:
    """J' H_s J (nv, nv): the constraint part of the primal Hessian (dense; sparse rows are scatter-added)."""
    if p.J_colind is None:
        uc = layout.unit_col
        if uc is None or not np.any(uc >= 0):
            H = (p.J * ev.hdiag[:, None]).T @ p.J
        else:  # J = +-e_c rows: h J' J = h e_c e_c' (J_rc^2 is 1, or 0 on an inactive row)
            gen, uni = np.nonzero(uc < 0)[0], np.nonzero(uc >= 0)[0]
            runs = _row_runs(gen)
            if len(runs) <= MAX_ROW_RUNS:  # a sum over static slices (a gather of J's rows with constant indices
                # runs element by element on XLA:CPU: the quadruped's 2438 general rows cost more than the product)
                H = sum(((p.J[a:b] * ev.hdiag[a:b, None]).T @ p.J[a:b] for a, b in runs),
                        jp.zeros((p.J.shape[1],) * 2, p.J.dtype))  # fmt: skip
            else:
                Jg = p.J[gen]
                H = (Jg * ev.hdiag[gen][:, None]).T @ Jg
            ju = p.J[uni, uc[uni]]
            H = H + jp.diag(jp.zeros(p.J.shape[1], p.J.dtype).at[uc[uni]].add(ev.hdiag[uni] * ju * ju))
        for rows, ch in zip(layout.cones, ev.cone_hess):
            Jc = p.J[jp.asarray(rows)]  # (k, dim, nv)
            H = H + jp.einsum("kin,kij,kjm->nm", Jc, ch, Jc)
        return H
    nv, c = nv_of(p), p.J_colind
    H = jp.zeros((nv, nv), p.J.dtype)
    H = H.at[c[:, :, None], c[:, None, :]].add(ev.hdiag[:, None, None] * p.J[:, :, None] * p.J[:, None, :])
    for rows, ch in zip(layout.cones, ev.cone_hess):
        rows_j = jp.asarray(rows)
        Jc = p.J[rows_j]  # (k, dim, w); the rows of one cone share their columns
        cc = c[rows_j[:, 0]]  # (k, w)
        H = H.at[cc[:, :, None], cc[:, None, :]].add(jp.einsum("kia,kij,kjb->kab", Jc, ch, Jc))
    return H


def hess_mul(layout: Layout, p: Problem, ev: ConstraintEval, v: jax.Array) -> jax.Array:
    """(M + J' H_s J) v (nv,) without forming the Hessian (the primal Hessian at the evaluation ev)."""
    Jv = p_j_mul(p, v)
    w = ev.hdiag * Jv
    for rows, ch in zip(layout.cones, ev.cone_hess):
        rows_j = jp.asarray(rows)
        w = w.at[rows_j].add(jp.einsum("kij,kj->ki", ch, Jv[rows_j]))
    return mul_m(layout, p, v) + p_jt_mul(p, w)


def hess_quadform(layout: Layout, ev: ConstraintEval, v: jax.Array) -> jax.Array:
    """v' H_s v for a constraint-space vector v (nefc,)."""
    q = jp.sum(ev.hdiag * v * v)
    for rows, ch in zip(layout.cones, ev.cone_hess):
        vc = v[jp.asarray(rows)]
        q = q + jp.einsum("ki,kij,kj->", vc, ch, vc)
    return q


def hess_quadform_rows(layout: Layout, ev: ConstraintEval, v: jax.Array) -> jax.Array:
    """(nefc,) the terms of v' H_s v per row (a cone's on its first row): `hess_quadform` before the sum."""
    q = ev.hdiag * v * v
    for rows, ch in zip(layout.cones, ev.cone_hess):
        vc = v[jp.asarray(rows)]
        q = q.at[jp.asarray(rows[:, 0])].add(jp.einsum("ki,kij,kj->k", vc, ch, vc))
    return q


class Whole:
    """Reductions of a solver over the whole system (one scalar per quantity): `Segments` with one segment, in the
    operations the monolithic solvers have always used (jp.dot, jp.sum)."""

    n = None

    @staticmethod
    def dot_dof(a, b):
        return jp.dot(a, b)

    @staticmethod
    def sum_dof(x):
        return jp.sum(x)

    @staticmethod
    def dot_efc(a, b):
        return jp.dot(a, b)

    @staticmethod
    def at_dof(v):
        return v

    @staticmethod
    def at_efc(v):
        return v

    @staticmethod
    def cost(ev: ConstraintEval, qacc, qacc_smooth, Ma):  # noqa: N803
        return 0.5 * jp.dot(qacc - qacc_smooth, Ma) + ev.cost

    @staticmethod
    def quadform(layout: Layout, ev: ConstraintEval, v):
        return hess_quadform(layout, ev, v)


@dataclasses.dataclass(frozen=True)
class Segments:
    """Reductions of a solver per constraint island (MuJoCo 4.0 solves each island on its own): each dof and row
    carries a segment id in [0, n); dot products and sums are segment sums ((n,) per quantity) and per-segment
    values reach dofs and rows by gathers. dof: (nv,) int, efc: (nefc,) int (`island.segments`)."""

    dof: jax.Array
    efc: jax.Array
    n: int

    def sum_dof(self, x):
        return jax.ops.segment_sum(x, self.dof, num_segments=self.n)

    def dot_dof(self, a, b):
        return self.sum_dof(a * b)

    def dot_efc(self, a, b):
        return jax.ops.segment_sum(a * b, self.efc, num_segments=self.n)

    def at_dof(self, v):
        return v[self.dof]

    def at_efc(self, v):
        return v[self.efc]

    def cost(self, ev: ConstraintEval, qacc, qacc_smooth, Ma):  # noqa: N803
        return 0.5 * self.dot_dof(qacc - qacc_smooth, Ma) + jax.ops.segment_sum(ev.cost_rows, self.efc,
                                                                               num_segments=self.n)

    def quadform(self, layout: Layout, ev: ConstraintEval, v):
        return jax.ops.segment_sum(hess_quadform_rows(layout, ev, v), self.efc, num_segments=self.n)


def evaluate(layout: Layout, p: Problem, qacc: jax.Array, jar: jax.Array, Ma: jax.Array):
    """(total cost (), ConstraintEval) at qacc (nv,), given jar = J qacc - aref (nefc,) and Ma = M (qacc -
    qacc_smooth) (nv,): no product with J or M (the solvers update jar and Ma along their steps, as MuJoCo does)."""
    ev = eval_constraints(layout, p, jar)
    return 0.5 * jp.dot(qacc - p.qacc_smooth, Ma) + ev.cost, ev


def start_at(layout: Layout, p: Problem, qacc: jax.Array) -> tuple:
    """A primal solver's start at qacc (nv,): (qacc, jar = J qacc - aref (nefc,), Ma = M (qacc - qacc_smooth) (nv,))."""
    return qacc, p_j_mul(p, qacc) - p.aref, mul_m(layout, p, qacc - p.qacc_smooth)


def solver_start(layout: Layout, p: Problem, qacc_warmstart: jax.Array | None) -> tuple:
    """The solver's start by MuJoCo's rule: qacc_smooth (where Ma = 0), or qacc_warmstart (nv,) when its total cost
    is lower (None: the warmstart flag is disabled). Returns ((qacc0, jar0, Ma0), jar_smooth = J qacc_smooth - aref
    (nefc,), Data.efc_b)."""
    jar_smooth = p_j_mul(p, p.qacc_smooth) - p.aref
    start = (p.qacc_smooth, jar_smooth, jp.zeros_like(p.qacc_smooth))
    if qacc_warmstart is not None:
        start_ws = start_at(layout, p, qacc_warmstart)
        c_ws, _ = evaluate(layout, p, *start_ws)
        c_sm, _ = evaluate(layout, p, *start)
        start = jax.tree.map(lambda a, b: jp.where(c_ws < c_sm, a, b), start_ws, start)
    return start, jar_smooth


def primal_cost(layout: Layout, p: Problem, qacc: jax.Array):
    """For qacc (nv,): (total cost (), ConstraintEval, jar = J qacc - aref (nefc,),
    Ma = M (qacc - qacc_smooth) (nv,))."""
    _, jar, Ma = start_at(layout, p, qacc)
    cost, ev = evaluate(layout, p, qacc, jar, Ma)
    return cost, ev, jar, Ma


LS_UNROLL = 4  # line searches of at most this many iterations run unrolled (see `iterate`)
SOLVER_UNROLL = 1  # likewise the solvers' own iterations (a single iteration: no loop)
_LS_STALL_EPS = 4.0  # a line-search Newton step of at most this many ulps of alpha counts as converged


def line_search_update(alpha: jax.Array, lo: jax.Array, hi: jax.Array, done: jax.Array, d1: jax.Array,
                       d2: jax.Array, tol: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """One step of the exact line search (shared by `line_search` and the fused solver kernel): from alpha, the
    bracket [lo, hi] and the cost's first / second derivatives d1, d2 at alpha, the next (alpha, lo, hi, done).
    A Newton step inside the bracket, else doubling (no upper end yet) or bisection; a lane already done keeps its
    values. Converged: the derivative test |d1| < tol, or a Newton step below the float resolution of alpha (in
    float32 the derivative test can be out of reach: without this, the bracket test fails on a zero step and the
    fallback doubles alpha away from the minimum). Any shapes that broadcast together."""
    newton = alpha - d1 / jp.where(d2 > 0, d2, 1.0)
    stall = (d2 > 0) & (jp.abs(newton - alpha) <= _LS_STALL_EPS * jp.finfo(alpha.dtype).eps * jp.abs(alpha))
    conv = (jp.abs(d1) < tol) | stall
    lo_n = jp.where(d1 < 0, alpha, lo)
    hi_n = jp.where(d1 >= 0, alpha, hi)
    ok = (newton > lo_n) & (newton < hi_n) & (d2 > 0)
    fallback = jp.where(jp.isinf(hi_n), 2.0 * jp.maximum(lo_n, alpha) + 1e-12, 0.5 * (lo_n + hi_n))
    stop = done | conv
    nxt = jp.where(ok, newton, fallback)
    return jp.where(stop, alpha, nxt), jp.where(stop, lo, lo_n), jp.where(stop, hi, hi_n), stop


def line_search(layout: Layout, p: Problem, search: jax.Array, Ma: jax.Array, jar: jax.Array, iterations: int,
                gtol_factor: jax.Array, scale: jax.Array, early_exit: bool = False, seg=Whole,
                skip: jax.Array | None = None):  # fmt: skip
    """Exact 1-D minimisation of the convex cost from qacc along `search` (nv,) (safeguarded Newton with
    bracketing); the start is given by Ma (nv,) = M (qacc - qacc_smooth) and jar (nefc,) = J qacc - aref.

    At most `iterations` steps; once |f'(alpha)| < gtol_factor * |search| / scale (gtol_factor = tolerance *
    ls_tolerance, the derivative analogue of the solver's own gradient test) it stops (see `iterate`).
    seg: `Whole` (one search), or `Segments` (one independent search per island: alpha, the bracket and the
    stopping test per segment (scale (n,)), the loop runs until every segment is done); skip: None, or (n,) bool,
    segments that take no step (alpha 0: islands already converged).
    Returns (alpha ((), or (n,) per segment), 0 where the direction is not a descent direction; Js = J search (nefc,);
    Ms = M search (nv,)): the step moves jar by alpha Js and Ma by alpha Ms (per segment: alpha at each row / dof).
    """
    with jax.named_scope("line_search"):
        return _line_search(layout, p, search, Ma, jar, iterations, gtol_factor, scale, early_exit, seg, skip)


def _line_search(layout, p, search, Ma, jar, iterations, gtol_factor, scale, early_exit, seg, skip):  # noqa: N803
    """`line_search` inside its named scope (profiles attribute its kernels to "line_search")."""
    dt = search.dtype
    Js = p_j_mul(p, search)
    Ms = mul_m(layout, p, search)
    sMs = seg.dot_dof(search, Ms)
    jar0 = jar
    g0 = seg.dot_dof(search, Ma)

    def derivs(alpha):
        ev = eval_constraints(layout, p, jar0 + seg.at_efc(alpha) * Js)
        d1 = g0 + alpha * sMs - seg.dot_efc(Js, ev.force)
        d2 = sMs + seg.quadform(layout, ev, Js)
        return d1, d2

    snorm = jp.sqrt(jp.maximum(seg.dot_dof(search, search), 0.0))
    tol = gtol_factor * snorm / scale
    zero = jp.zeros(() if seg.n is None else (seg.n,), dt)
    d1_0, d2_0 = derivs(zero)
    descent = d1_0 < 0
    if skip is not None:
        descent = descent & ~skip
    alpha0 = jp.where(descent, -d1_0 / jp.where(d2_0 > 0, d2_0, 1.0), 0.0)
    inf = jp.asarray(jp.inf, dt)

    def body(c):
        d1, d2 = derivs(c["alpha"])
        alpha, lo, hi, done = line_search_update(c["alpha"], c["lo"], c["hi"], c["seg_done"], d1, d2, tol)
        return {"alpha": alpha, "lo": lo, "hi": hi, "seg_done": done, "done": jp.all(done)}

    init = {"alpha": alpha0, "lo": zero, "hi": zero + inf, "seg_done": ~descent, "done": jp.all(~descent)}
    out = iterate(body, init, iterations, early_exit, unroll=LS_UNROLL)
    return jp.where(descent, out["alpha"], 0.0), Js, Ms
