"""Projected Gauss-Seidel on the dual problem (MJX and MuJoCo Warp have no PGS; we do).

Dual problem (computation chapter): with A = J M^-1 J' and b = J a0 - aref,

    min_f 0.5 f' (A + R) f + b' f   subject to f in the constraint set K:
        equality rows free; friction loss rows |f| <= frictionloss; limits, frictionless and pyramidal
        contact rows f >= 0; elliptic contacts f_n >= |(f_t1/mu_1, f_t2/mu_2, ...)|.

One iteration is a sweep: every scalar row in order (exact 1-D minimisation then projection), then every
elliptic contact as a block (the block subproblem is solved by a fixed number of projected-gradient steps
in coordinates where the cone is the standard second-order cone). A static number of sweeps inside
`lax.scan`; once the dual cost stops improving (opt.tolerance) the remaining sweeps are no-ops.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.solver import common
from mjx_lite.solver.common import Layout, Problem

_CONE_INNER = 16


def _proj_soc(y: jax.Array) -> jax.Array:
    """Euclidean projection onto {(t, z): |z| <= t}, y: (dim,)."""
    t, z = y[0], y[1:]
    nz2 = jp.sum(z * z)
    nz = jp.sqrt(jp.where(nz2 > 0, nz2, 1.0))
    nz = jp.where(nz2 > 0, nz, 0.0)
    inside = nz <= t
    polar = nz <= -t
    a = 0.5 * (t + nz)
    edge = jp.concatenate([a[None], a * z / jp.where(nz > 0, nz, 1.0)])
    return jp.where(inside, y, jp.where(polar, jp.zeros_like(y), edge))


def solve_pgs(layout: Layout, p: Problem, force0: jax.Array, *, iterations: int, tolerance: jax.Array,
              meaninertia: jax.Array, minv: Callable[[jax.Array], jax.Array], early_exit: bool = False,
              refill: bool = False):
    """Projected Gauss-Seidel on the dual problem from force0 (nefc,); minv(x): M^-1 x for x (nv,) or (nv, k).

    Returns (efc_force (nefc,), qacc (nv,), niter () int, improvement ()).
    """
    if p.J_colind is not None:
        raise ValueError("PGS needs the dense constraint Jacobian: Config.efc_jacobian='dense' (or 'auto')")
    nv = common.nv_of(p)
    scale = 1.0 / (meaninertia * max(1, nv))
    JT = p.J.T
    MinvJT = minv(JT)  # (nv, nefc)
    AR = p.J @ MinvJT + jp.diag(p.R)
    b = p.J @ p.qacc_smooth - p.aref
    kind = layout.kind
    scalar_rows = np.nonzero(kind != common.CONE)[0]
    kind_j = jp.asarray(kind)
    mask = p.mask

    def dual_cost(f):
        return 0.5 * jp.dot(f, AR @ f) + jp.dot(b, f)

    def scalar_update(i, f):
        r = jp.asarray(scalar_rows)[i]
        res = jp.dot(AR[r], f) + b[r]
        diag = AR[r, r]
        fi = f[r] - res / jp.where(diag > 0, diag, 1.0)
        k = kind_j[r]
        fl = p.frictionloss[r]
        fi = jp.where(k == common.FRICTION, jp.clip(fi, -fl, fl), fi)
        fi = jp.where(k == common.INEQUALITY, jp.maximum(fi, 0.0), fi)
        fi = jp.where(mask[r], fi, 0.0)
        return f.at[r].set(fi)

    def cone_updates(f):
        for rows, fric in zip(layout.cones, p.cone_friction):
            rows_j = jp.asarray(rows)

            def one(c, f, rows_j=rows_j, fric=fric):
                r = rows_j[c]
                s = jp.concatenate([jp.ones((1,), f.dtype), fric[c]])
                A = AR[r][:, r]
                x_old = f[r]
                cvec = AR[r] @ f + b[r] - A @ x_old
                SAS = s[:, None] * A * s[None, :]
                Sc = s * cvec
                L = jp.trace(SAS)
                step = 1.0 / jp.where(L > 0, L, 1.0)
                y = x_old / jp.where(s > 0, s, 1.0)  # rows beyond a contact's dimension (s = 0) stay 0

                def inner(y, _):
                    return _proj_soc(y - step * (SAS @ y + Sc)), None

                y, _ = jax.lax.scan(inner, y, None, length=_CONE_INNER)
                x = jp.where(mask[r[0]], s * y, 0.0)
                return f.at[r].set(x)

            f = jax.lax.fori_loop(0, rows.shape[0], one, f)
        return f

    def sweep(c):
        f, cost, done = c["f"], c["cost"], c["done"]
        f_new = jax.lax.fori_loop(0, scalar_rows.shape[0], scalar_update, f) if scalar_rows.size else f
        f_new = cone_updates(f_new)
        cost_new = dual_cost(f_new)
        improvement = scale * (cost - cost_new)
        conv = improvement < tolerance
        return {"f": jp.where(done, f, f_new), "cost": jp.where(done, cost, cost_new), "done": done | conv,
                "niter": c["niter"] + jp.where(done, 0, 1),
                "improvement": jp.where(done, c["improvement"], improvement)}  # fmt: skip

    f0 = jp.where(mask, force0, 0.0)
    init = {"f": f0, "cost": dual_cost(f0), "done": jp.zeros((), bool), "niter": jp.zeros((), jp.int32),
            "improvement": jp.zeros((), f0.dtype)}  # fmt: skip
    out = common.iterate(sweep, init, iterations, early_exit, unroll=common.SOLVER_UNROLL, refill=refill)
    f = out["f"]
    qacc = p.qacc_smooth + MinvJT @ f
    return f, qacc, out["niter"], out["improvement"]
