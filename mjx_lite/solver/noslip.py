"""The noslip post-processor (MuJoCo's `opt.noslip_iterations`; computation chapter, "Solver" / noslip).

After the main solver (Newton, CG or PGS), MuJoCo can run a few Gauss-Seidel sweeps on the dual problem that
touch only the friction-like forces, with the normal forces held where the main solver left them and without
regularisation: the rows' cost is 0.5 f' A f + b' f with A = J M^-1 J' (not A + R), so the soft-contact slip
that R allows is removed. Rows swept, the friction-loss rows first, then the contacts in MuJoCo's contact order
(`sensor_contact.contact_rank`: the sweeps usually stop at their bound unconverged, so their result depends on the
order; our contact slots are in another), all other rows (equalities, limits, the normal forces) keeping the main
solver's values:

  friction loss (dof and tendon):  f_i -= r_i / A_ii, clamped to [-frictionloss, frictionloss]
  pyramidal contacts, dim > 1:     each pair of opposite edges (rows 2j, 2j+1) keeps its sum (the normal force
                                   it carries) and moves its difference to the pair's exact minimiser, clamped so
                                   that both stay >= 0
  elliptic contacts, dim > 1:      the dim-1 friction forces minimise the block's quadratic inside the friction
                                   ellipsoid sum (f_j / friction_j)^2 <= f_n^2 (a QCQP: Newton's method on the
                                   multiplier of the ellipsoid constraint, at most 20 steps), zero when f_n ~ 0

where r = b + A f is the current residual of the row (b = efc_b = J qacc_smooth - aref; A is never formed: the
sweeps carry M^-1 J' f, nv values, so memory grows with nefc nv, not nefc^2). A contact block's update is
undone when it would raise the cost by more than 1e-10. The improvement of a sweep is the cost decrease it made,
scaled by 1 / trace(M) (MuJoCo 4.0: the current mass matrix, not meaninertia); the first sweep adds
0.5 sum R f^2, the cost of removing the regulariser.
Sweeps stop when the improvement falls below `opt.noslip_tolerance`, after at most `opt.noslip_iterations`.
With constraint islands on (MuJoCo 4.0's default), each island is swept on its own (its improvement scaled by its
own trace(M), stopped by its own test), as MuJoCo's mj_solNoSlip_island; the fused kernels' whole-system solve and
`<flag island="disable"/>` sweep all rows together.
Then qfrc_constraint = J' f and qacc = qacc_smooth + M^-1 qfrc_constraint (mj_dualFinish), efc_state is the dual
state of the forces, and solver_niter counts the main solver's iterations plus these sweeps.

Differentiation: the sweeps run a static number of times (`lax.scan`; sweeps after convergence are no-ops) and are
differentiated through, under either `Config.gradients` mode: their input is the main solver's efc_force, whose
derivative is the main solver's own (implicit or unrolled), so the result is the derivative of what is computed.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import inertia, sensor_contact
from mjx_lite.solver import common
from mjx_lite.types import MINVAL, ConstraintState, Data, Model

QCQP_ITERATIONS = 20  # Newton steps on the ellipsoid multiplier (MuJoCo's bound)
_QCQP_EPS = 1e-10  # its singularity threshold, convergence and step thresholds
_BLOCK_EPS = 1e-10  # floor of a block's diagonal, and the cost rise above which a block's update is undone


@dataclasses.dataclass(frozen=True, eq=False)
class Blocks:
    """Static sweep blocks: the friction-loss rows, then the k contacts with friction (dim > 1), padded to the
    largest dimension.

    friction: (nf,) int rows; elliptic: the cone (one for all contacts); rows: (k, nrows) int, each contact's rows
    (elliptic: normal then dim-1 friction rows; pyramidal: 2 (dim-1) edge rows, opposite edges adjacent), padded
    with row 0; pad: (k, nrows) bool, True on padding (never swept); dim: (k,) int; slots: (k,) int, the contacts'
    indices in the contact arrays.
    """

    friction: np.ndarray
    elliptic: bool
    rows: np.ndarray
    pad: np.ndarray
    dim: np.ndarray
    slots: np.ndarray


def blocks_from_contacts(friction_rows: np.ndarray, elliptic: bool, con_adr: np.ndarray, con_dim: np.ndarray
                         ) -> Blocks:  # fmt: skip
    """Blocks of a row layout: contact k's rows start at con_adr[k] with static dimension con_dim[k] (contacts of
    dimension 1 have no friction and are skipped)."""
    con_dim = np.asarray(con_dim, np.int64)
    slots = np.nonzero(con_dim > 1)[0]
    dim = con_dim[slots]
    nrows = dim if elliptic else 2 * (dim - 1)
    width = int(nrows.max()) if len(slots) else 0
    pad = np.arange(width)[None, :] >= nrows[:, None]
    rows = np.where(pad, 0, np.asarray(con_adr, np.int64)[slots, None] + np.arange(width)[None, :])
    return Blocks(friction=np.asarray(friction_rows, np.int64), elliptic=bool(elliptic), rows=rows, pad=pad, dim=dim,
                  slots=slots)


def _spd_inverse(M: jax.Array) -> tuple[jax.Array, jax.Array]:  # noqa: N803
    """(M^-1, ok) for a symmetric n x n M (n <= 5), ok False where MuJoCo's QCQP deems M singular: determinant
    below 1e-10 for n = 2, 3 (closed form), a Cholesky pivot below 1e-10 otherwise."""
    n = M.shape[0]
    if n == 1:
        ok = M[0, 0] >= _QCQP_EPS
        return 1.0 / jp.where(ok, M, 1.0), ok
    if n == 2:
        det = M[0, 0] * M[1, 1] - M[0, 1] * M[0, 1]
        ok = det >= _QCQP_EPS
        adj = jp.array([[M[1, 1], -M[0, 1]], [-M[0, 1], M[0, 0]]])
        return adj / jp.where(ok, det, 1.0), ok
    if n == 3:
        c00 = M[1, 1] * M[2, 2] - M[1, 2] * M[1, 2]
        c11 = M[0, 0] * M[2, 2] - M[0, 2] * M[0, 2]
        c22 = M[0, 0] * M[1, 1] - M[0, 1] * M[0, 1]
        c01 = M[0, 2] * M[1, 2] - M[0, 1] * M[2, 2]
        c02 = M[0, 1] * M[1, 2] - M[0, 2] * M[1, 1]
        c12 = M[0, 1] * M[0, 2] - M[1, 2] * M[0, 0]
        det = M[0, 0] * c00 + M[0, 1] * c01 + M[0, 2] * c02
        ok = det >= _QCQP_EPS
        adj = jp.array([[c00, c01, c02], [c01, c11, c12], [c02, c12, c22]])
        return adj / jp.where(ok, det, 1.0), ok
    # Cholesky with MuJoCo's pivot threshold, then the inverse from the factor (n <= 5: unrolled)
    L = [[None] * n for _ in range(n)]
    ok = jp.ones((), bool)
    for j in range(n):
        piv = M[j, j] - sum((L[j][k] * L[j][k] for k in range(j)), jp.zeros((), M.dtype))
        ok = ok & (piv >= _QCQP_EPS)
        L[j][j] = jp.sqrt(jp.maximum(piv, _QCQP_EPS))
        for i in range(j + 1, n):
            L[i][j] = (M[i, j] - sum((L[i][k] * L[j][k] for k in range(j)), jp.zeros((), M.dtype))) / L[j][j]
    zero = jp.zeros((), M.dtype)
    Lm = jp.stack([jp.stack([L[i][k] if k <= i else zero for k in range(n)]) for i in range(n)])
    Linv = jax.scipy.linalg.solve_triangular(Lm, jp.eye(n, dtype=M.dtype), lower=True)
    return Linv.T @ Linv, ok


def qcqp(A: jax.Array, b: jax.Array, d: jax.Array, r: jax.Array) -> tuple[jax.Array, jax.Array]:  # noqa: N803
    """min 0.5 x'A x + x'b subject to sum (x_j / d_j)^2 <= r^2, for A (n, n), b (n,), d (n,) > 0, r ().

    In coordinates y = x / d the constraint is |y| <= r; y(la) = -(A_s + la I)^-1 b_s (A_s = D A D, b_s = D b)
    and Newton's method on |y(la)|^2 = r^2 from la = 0 (at most 20 steps; it stops once |y|^2 - r^2 < 1e-10 or the
    step is below 1e-10). Returns (x (n,), active): active when the constraint was found binding (la > 0); a
    (near-)singular A_s + la I gives x = 0, inactive.
    """
    n = A.shape[0]
    As = A * d[:, None] * d[None, :]
    bs = b * d
    eye = jp.eye(n, dtype=A.dtype)

    def step(c, _):
        la, y, done, failed = c["la"], c["y"], c["done"], c["failed"]
        P, ok = _spd_inverse(As + la * eye)
        y_new = -(P @ bs)
        val = jp.dot(y_new, y_new) - r * r
        deriv = -2.0 * jp.dot(y_new, P @ y_new)
        delta = -val / jp.where(deriv != 0, deriv, -1.0)
        stop = (val < _QCQP_EPS) | (delta < _QCQP_EPS)
        y_out = jp.where(ok, y_new, 0.0)
        la_out = jp.where(ok & ~stop, la + delta, la)
        return {"la": jp.where(done, la, la_out), "y": jp.where(done, y, y_out),
                "done": done | ~ok | stop, "failed": failed | (~done & ~ok)}, None  # fmt: skip

    init = {"la": jp.zeros((), A.dtype), "y": jp.zeros_like(b), "done": jp.zeros((), bool),
            "failed": jp.zeros((), bool)}  # fmt: skip
    out, _ = jax.lax.scan(step, init, None, length=QCQP_ITERATIONS)
    return out["y"] * d, (out["la"] != 0) & ~out["failed"]


def _to_ellipsoid(x: jax.Array, d: jax.Array, r: jax.Array) -> jax.Array:
    """x scaled onto the boundary sum (x_j / d_j)^2 = r^2 (NaN-free at x = 0)."""
    s = jp.sum((x / d) ** 2)
    ratio = r * r / jp.maximum(s, MINVAL)
    return x * jp.sqrt(jp.where(ratio > 0, ratio, 1.0)) * (ratio > 0)


def _cost_change(Ac: jax.Array, f: jax.Array, old: jax.Array, res: jax.Array):  # noqa: N803
    """(f or old, change): the block's cost change 0.5 df' Ac df + df' res; an update raising the cost by more than
    1e-10 is undone (change 0)."""
    delta = f - old
    change = 0.5 * jp.dot(delta, Ac @ delta) + jp.dot(delta, res)
    undo = change > _BLOCK_EPS
    return jp.where(undo, old, f), jp.where(undo, 0.0, change)


def _block(J: jax.Array, MinvJ: jax.Array, rows, live: jax.Array) -> jax.Array:  # noqa: N803
    """A[rows][:, rows] (A = J M^-1 J') with the diagonal floored at 1e-10; rows not live become identity rows
    (decoupled)."""
    Ac = J[rows] @ MinvJ[rows].T
    n = Ac.shape[0]
    eye = jp.eye(n, dtype=J.dtype)
    Ac = Ac * (1.0 - eye) + jp.maximum(jp.diagonal(Ac), _BLOCK_EPS) * eye
    both = live[:, None] & live[None, :]
    return jp.where(both, Ac, eye)


def _set(J, MinvJ, f, v, rows, new):  # noqa: N803
    """Forces `new` at `rows`, and v = M^-1 J' f updated by their change."""
    return f.at[rows].set(new), v + MinvJ[rows].T @ (new - f[rows])


def _pyramidal_contact(J, MinvJ, b, f, v, rows, live):  # noqa: N803
    """Sweep the opposite-edge pairs of one pyramidal contact. rows: (2 (dim-1),); live: (2 (dim-1),)."""
    change = jp.zeros((), f.dtype)
    for j in range(0, rows.shape[0], 2):
        pr = rows[j : j + 2]
        plive = live[j] & live[j + 1]
        old = f[pr]
        res = b[pr] + J[pr] @ v
        Ac = _block(J, MinvJ, pr, jp.stack([plive, plive]))
        bc = res - Ac @ old
        mid = 0.5 * (old[0] + old[1])
        k1 = Ac[0, 0] + Ac[1, 1] - Ac[0, 1] - Ac[1, 0]
        k0 = mid * (Ac[0, 0] - Ac[1, 1]) + bc[0] - bc[1]
        y = -k0 / jp.where(k1 < MINVAL, 1.0, k1)
        new = jp.where(y < -mid, jp.stack([0.0 * mid, 2.0 * mid]),
                       jp.where(y > mid, jp.stack([2.0 * mid, 0.0 * mid]), jp.stack([mid + y, mid - y])))  # fmt: skip
        new = jp.where(k1 < MINVAL, jp.stack([mid, mid]), new)
        new, dc = _cost_change(Ac, new, old, res)
        f, v = _set(J, MinvJ, f, v, pr, jp.where(plive, new, old))
        change = change + jp.where(plive, dc, 0.0)
    return f, v, change


def _elliptic_contact(J, MinvJ, b, f, v, rows, live, fric):  # noqa: N803
    """Sweep the friction forces of one elliptic contact. rows: (dim,) normal first; live: (dim,); fric: (dim-1,)."""
    fr = rows[1:]
    flive = live[1:]
    old = jp.where(flive, f[fr], 0.0)  # padding and rows not live: decoupled, held at 0 in the block
    res = jp.where(flive, b[fr] + J[fr] @ v, 0.0)
    Ac = _block(J, MinvJ, fr, flive)
    bc = res - Ac @ old
    d = jp.where(flive & (fric > 0), fric, 1.0)  # a dimension beyond the contact's own: decoupled, stays 0
    normal = f[rows[0]]
    x, active = qcqp(Ac, bc, d, normal)
    x = jp.where(active, _to_ellipsoid(x, d, normal), x)
    x = jp.where((normal < MINVAL) | ~flive, 0.0, x)
    new, dc = _cost_change(Ac, x, old, res)
    on = live[0] & jp.any(flive)
    f, v = _set(J, MinvJ, f, v, fr, jp.where(on & flive, new, f[fr]))
    return f, v, jp.where(on, dc, 0.0)


def noslip(blocks: Blocks, J: jax.Array, MinvJT: jax.Array, b: jax.Array, R: jax.Array, frictionloss: jax.Array,
           mask: jax.Array, force: jax.Array, friction: jax.Array | None, *, iterations: int, tolerance: jax.Array,
           scale: jax.Array, order: jax.Array | None = None, segments: tuple | None = None):  # noqa: N803
    """The noslip sweeps from the main solver's force (nefc,).

    J: (nefc, nv) dense constraint Jacobian; MinvJT: (nv, nefc) M^-1 J' (A = J M^-1 J' is never formed: a row's
    residual is b + J (M^-1 J' f), with M^-1 J' f carried and updated by each block's change); b: (nefc,) J qacc_smooth
    - aref; R, frictionloss: (nefc,); mask: (nefc,) bool live rows; friction: (k, nrows-1) friction coefficients of
    the elliptic contacts of `blocks` (0 beyond a contact's dimension; None for pyramidal cones); iterations: static
    bound; tolerance: opt.noslip_tolerance; scale: 1 / trace(M); order: (k,) int, the contacts'
    sweep order (a permutation of range(k); None: blocks order). The sweeps are Gauss-Seidel and stop at
    `iterations` before converging, so their result depends on this order: MuJoCo sweeps in its contact order.
    segments: None (the whole system), or (efc_seg (nefc,) int in [0, S), S) the rows' constraint islands (MuJoCo
    4.0 sweeps each island on its own): each island's improvement is its own (scale (S,) per island) and its sweeps
    stop by its own test. The islands are decoupled (A is block-diagonal over them), so one sweep over all rows in
    order is each island's sweep over its rows in order; an island that is done keeps its forces.
    Returns (force (nefc,), niter, improvement of the last sweep): () each, or (S,) per island.
    """
    fric_rows = jp.asarray(blocks.friction)
    nfr = int(blocks.friction.shape[0])
    ncon = int(blocks.rows.shape[0])
    rows_j, pad_j = jp.asarray(blocks.rows), jp.asarray(blocks.pad)
    order = jp.arange(ncon) if order is None else order
    # M^-1 J' by rows, (nefc, nv): a block's rows are gathered contiguous (its columns of the (nv, nefc) layout were
    # one cache line per element: dog's 82 contact slots, 4 sweeps at batch 64: 264-340 -> 112-158 CPU-ms)
    MinvJ = MinvJT.T
    diag_a = jp.sum(J * MinvJ, axis=1)  # (nefc,) A_ii
    # the whole system is one segment; per island, the improvements are segment sums
    seg, S = (jp.zeros(mask.shape, jp.int32), 1) if segments is None else (segments[0], int(segments[1]))
    scale = jp.broadcast_to(scale, (S,))

    def friction_row(i, c):
        f, v, imp = c
        r = fric_rows[i]
        a = jp.maximum(diag_a[r], MINVAL)
        res = b[r] + jp.dot(J[r], v)
        fl = frictionloss[r]
        new = jp.clip(f[r] - res / a, -fl, fl)
        delta = new - f[r]
        live = mask[r]
        f2, v2 = _set(J, MinvJ, f, v, r[None], jp.where(live, new, f[r])[None])
        return f2, v2, imp.at[seg[r]].add(-jp.where(live, 0.5 * delta * delta * a + delta * res, 0.0))

    def contact(i, c):
        f, v, imp = c
        k = order[i]
        rows = rows_j[k]
        live = mask[rows] & ~pad_j[k]
        if blocks.elliptic:
            f, v, dc = _elliptic_contact(J, MinvJ, b, f, v, rows, live, friction[k])
        else:
            f, v, dc = _pyramidal_contact(J, MinvJ, b, f, v, rows, live)
        return f, v, imp.at[seg[rows[0]]].add(-dc)

    def sweep(c, _):
        f0, done = c["f"], c["done"]
        first = jp.where(mask & (c["niter"][seg] == 0), 0.5 * R * f0 * f0, 0.0)
        carry = (f0, MinvJT @ f0, jax.ops.segment_sum(first, seg, num_segments=S))  # M^-1 J' f afresh each sweep
        if nfr:
            carry = jax.lax.fori_loop(0, nfr, friction_row, carry)
        if ncon:
            carry = jax.lax.fori_loop(0, ncon, contact, carry)
        f, _, imp = carry
        imp = imp * scale
        return {"f": jp.where(done[seg], f0, f), "done": done | (imp < tolerance),
                "niter": c["niter"] + jp.where(done, 0, 1).astype(jp.int32),
                "improvement": jp.where(done, c["improvement"], imp)}, None  # fmt: skip

    init = {"f": force, "done": jp.zeros((S,), bool), "niter": jp.zeros((S,), jp.int32),
            "improvement": jp.zeros((S,), force.dtype)}  # fmt: skip
    if iterations > 0:
        init, _ = jax.lax.scan(sweep, init, None, length=iterations)
    if segments is None:
        return init["f"], init["niter"][0], init["improvement"][0]
    return init["f"], init["niter"], init["improvement"]


def contact_friction(blocks: Blocks, friction: jax.Array) -> jax.Array | None:
    """The (k, nrows-1) friction coefficients `noslip` takes, from the contacts' friction (ncon, 5), 0 beyond each
    contact's dimension; None for pyramidal cones."""
    if not blocks.elliptic:
        return None
    width = blocks.rows.shape[1] - 1
    inside = np.arange(width)[None, :] < (blocks.dim - 1)[:, None]
    return jp.where(jp.asarray(inside), friction[jp.asarray(blocks.slots), :width], 0.0)


def dual_state(kind: np.ndarray, cones: tuple, force: jax.Array, frictionloss: jax.Array, mask: jax.Array,
               cone_mu: tuple, cone_friction: tuple) -> jax.Array:
    """efc_state of dual forces (MuJoCo's classification after PGS and noslip), (nefc,) int32.

    kind: (nefc,) solver.common row kinds; cones: elliptic row groups (k, dim) with their regularised mu (k,) and
    friction (k, dim-1) (0 beyond a contact's own dimension). Equality rows are quadratic; friction loss is
    LINEARPOS at f <= -frictionloss, LINEARNEG at f >= frictionloss; inequalities are satisfied at f <= 0; an
    elliptic cone in U = (f_n / mu, f_j / friction_j) is satisfied where mu N >= |T|, quadratic where N + mu |T| <= 0,
    else in the cone zone."""
    S, Q = int(ConstraintState.SATISFIED), int(ConstraintState.QUADRATIC)
    kind_j = jp.asarray(kind)
    fr_state = jp.where(force <= -frictionloss, int(ConstraintState.LINEARPOS),
                        jp.where(force >= frictionloss, int(ConstraintState.LINEARNEG), Q))  # fmt: skip
    state = jp.where(kind_j == common.EQUALITY, Q,
                     jp.where(kind_j == common.FRICTION, fr_state, jp.where(force <= 0, S, Q)))  # fmt: skip
    for rows, mu, fric in zip(cones, cone_mu, cone_friction):
        rows_j = jp.asarray(rows)
        fc = force[rows_j]
        n = fc[:, 0] / mu
        t = jp.where(fric > 0, fc[:, 1:] / jp.where(fric > 0, fric, 1.0), 0.0)
        tn = jp.sqrt(jp.sum(t * t, axis=1))
        cs = jp.where(mu * n >= tn, S, jp.where(n + mu * tn <= 0, Q, int(ConstraintState.CONE)))
        state = state.at[rows_j].set(jp.broadcast_to(cs[:, None], rows.shape))
    return jp.where(mask, state, 0).astype(jp.int32)


def apply(m: Model, d: Data, plan, prob: common.Problem, islands: tuple | None = None) -> Data:
    """Run the noslip sweeps on d, the main solver's output (efc_force, efc_b), for `plan` (pipeline.constraint.Plan)
    and its Problem: new efc_force, efc_state, qfrc_constraint, qacc; solver_niter counts the sweeps too.

    islands: None (the whole system), or (dof_island (nv,), efc_island (nefc,), ntree) (`island.find`): each island
    swept on its own, its improvement scaled by its own trace(M) and stopped by its own test (MuJoCo 4.0's
    mj_solNoSlip_island); solver_niter_island gains each island's sweeps and solver_niter is the largest count."""
    blocks = blocks_from_contacts(np.arange(plan.adr["fric_dof"], plan.adr["lim_jnt"]), plan.elliptic, plan.con_adr,
                                  plan.con_dim)
    J = common.j_dense(prob.J, prob.J_colind, m.nv)
    MinvJT = inertia.solve_m(m, d, J.T)  # (nv, nefc)
    # MuJoCo sweeps the contacts in its contact order (sensor_contact.contact_rank), not in our slot order
    order = jp.argsort(sensor_contact.contact_rank(m, d)[jp.asarray(blocks.slots)]) if len(blocks.slots) else None
    segments = None
    if islands is None:
        scale = 1.0 / jp.maximum(MINVAL, common.trace_m(plan.layout, prob))  # MuJoCo 4.0: the current M's trace
    else:  # segments: the islands, then one for the rows and dofs of no island (never swept: no live rows)
        ntree = int(islands[2])
        dof_seg = jp.where(islands[0] < 0, ntree, islands[0]).astype(jp.int32)
        segments = (jp.where(islands[1] < 0, ntree, islands[1]).astype(jp.int32), ntree + 1)
        diag = jp.diagonal(prob.M) if plan.layout.mass is None else prob.M[plan.layout.mass.diag]
        scale = 1.0 / jp.maximum(MINVAL, jax.ops.segment_sum(diag, dof_seg, num_segments=ntree + 1))
    force, niter, _ = noslip(blocks, J, MinvJT, d.efc_b, prob.R, prob.frictionloss, prob.mask, d.efc_force,
                             contact_friction(blocks, d.contact.friction), iterations=int(m.opt.noslip_iterations),
                             tolerance=m.opt.noslip_tolerance, scale=scale, order=order, segments=segments)
    if segments is None:
        niter_total = d.solver_niter + niter
        niter_island = d.solver_niter_island
    else:  # an island with no live row does not exist: no sweeps
        exists = jax.ops.segment_sum(prob.mask.astype(jp.int32), segments[0], num_segments=segments[1]) > 0
        niter_island = d.solver_niter_island + jp.where(exists, niter, 0)[:ntree].astype(jp.int32)
        niter_total = jp.max(niter_island, initial=0)
    qfrc = common.p_jt_mul(prob, force)
    state = dual_state(plan.layout.kind, plan.layout.cones, force, prob.frictionloss, prob.mask, prob.cone_mu,
                       prob.cone_friction)
    return d.replace(efc_force=force, efc_state=state, qfrc_constraint=qfrc,
                     qacc=d.qacc_smooth + inertia.solve_m(m, d, qfrc), solver_niter=niter_total.astype(jp.int32),
                     solver_niter_island=niter_island)
