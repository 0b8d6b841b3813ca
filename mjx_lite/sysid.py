"""System identification: fit float Model parameters to recorded trajectories through the differentiable rollout.

    fit = sysid.fit(m, logs, params=("body_mass", ("dof_damping", 0), ("geom_friction", (1, 0))))
    fit.model            # the fitted Model
    print(fit.report())  # values, standard errors, residuals

Logs. One log is a mapping with
    qpos: (T+1, nq), qvel: (T+1, nv)  the states x_0 .. x_T,
    ctrl: (T, nu)                      the control applied from x_t,
    act: (T+1, na)                     required when the model has activations,
    sensordata: (T, nsensordata)       optional: the sensors of the forward pass at x_t with ctrl[t] (what
                                       MuJoCo's d.sensordata holds after mj_step from x_t),
    qfrc_applied: (T, nv)              optional applied forces.
`logs` is one log or a sequence of logs (their lengths may differ).

Method: multiple shooting. Every log is cut into windows of `window` steps. Each window is simulated from its
start state (the logged state plus a fitted tangent-space correction when `fit_initial_states`, so that noise in
the logged start does not bias the parameters) and its states and sensors are compared with the log, scaled by
the noise levels (`noise`). The weighted least-squares problem over the parameters and the window starts is solved
by Levenberg-Marquardt (Gauss-Newton with Marquardt's diagonal damping, the window starts eliminated by a Schur
complement, static iteration count; the starts are held at the logged states until the parameter-only fit has
converged, `hold_starts`, so that they do not absorb the error of far-off initial parameters) or, with
`optimizer=`, by an optax optimiser on the same loss (starts and parameters together). Parameters are
scaled by their initial magnitude and projected onto bounds after every step: by default masses, inertias,
damping, armature, friction, stiffness stay positive or zero (`bounds` overrides). Short windows keep the problem
close to convex even where long rollouts would diverge (contacts, unstable systems).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence

import jax
import jax.numpy as jp
import numpy as np
import optax

from mjx_lite import derivatives, io, linalg
from mjx_lite.config import linalg as config_linalg
from mjx_lite.trajopt.common import StaticArg
from mjx_lite.types import Data, Model

__all__ = ["Fit", "fit", "simulate_log"]

# fields that are physically non-negative: default lower bound 0 (masses and inertias strictly positive: a small
# fraction of their initial value)
_NONNEGATIVE = ("dof_damping", "dof_armature", "dof_frictionloss", "geom_friction", "jnt_stiffness",
                "tendon_damping", "tendon_stiffness", "tendon_frictionloss", "actuator_damping",
                "actuator_armature", "body_gravcomp", "geom_solref")  # fmt: skip
_POSITIVE = ("body_mass", "body_inertia")
_POSITIVE_FLOOR = 1e-3  # masses/inertias stay above this fraction of their initial value
_LM_LAMBDA0 = 1e-3
_LM_UP = 5.0
_LM_DOWN = 1 / 3
_LM_MIN, _LM_MAX = 1e-12, 1e12
# the window starts are held at the logged states until the parameter-only Levenberg-Marquardt fit has converged:
# its step is below _HOLD_STEP_TOL (in parameters scaled by their initial magnitude, max norm; zero-residual
# problems, whose loss keeps falling by orders) or an accepted step lowered the loss by less than _HOLD_FTOL of
# itself (noisy data: what is left is for the start corrections). See `fit`, hold_starts. Measured on the tumbling
# box (tests/test_sysid.py): noise-free, the friction-only steps (relative to the initial 0.5) shrink 0.52, 0.049,
# 0.014, 0.015, 8e-4, 2e-7 (so 1e-6 ends the hold one step after the fit is at round-off); with 1e-3 noise its loss
# levels off with a step that gains 1e-4 after steps that gained >= 0.2 %.
_HOLD_STEP_TOL = 1e-6
_HOLD_FTOL = 1e-3


@dataclasses.dataclass(frozen=True)
class _Entry:
    name: str  # field name ("body_mass") or "opt.<name>"
    index: tuple[int, ...]  # flat indices into the field
    label: str


@dataclasses.dataclass
class Fit:
    """The result of `fit`.

    model: the fitted Model. params / initial / std: {label: value} for each fitted scalar (label like
    "body_mass[1]"), std the approximate standard error from the Gauss-Newton covariance at the optimum
    (sigma^2 (J'J)^-1 with sigma^2 from the final residual, window starts eliminated). loss: (iterations + 1,) the
    loss curve 0.5 |r|^2. rms: {channel: root-mean-square unscaled residual} at the optimum; windows: number of
    windows; residuals: number of scalar residuals.
    """

    model: Model
    params: dict
    initial: dict
    std: dict
    loss: np.ndarray
    rms: dict
    windows: int
    residuals: int

    def report(self) -> str:
        """A plain-text table of the fit."""
        lines = [f"sysid fit: {self.windows} windows, {self.residuals} residuals, loss {self.loss[0]:.4g} -> "
                 f"{self.loss[-1]:.4g} in {len(self.loss) - 1} iterations"]  # fmt: skip
        lines.append(f"{'parameter':<28}{'initial':>14}{'fitted':>14}{'std err':>12}{'change':>10}")
        for k, v in self.params.items():
            v0 = self.initial[k]
            change = (v - v0) / abs(v0) if v0 != 0 else float("nan")
            lines.append(f"{k:<28}{v0:>14.6g}{v:>14.6g}{self.std[k]:>12.3g}{change:>+10.2%}")
        lines.append("residual rms: " + ", ".join(f"{c} {r:.3g}" for c, r in self.rms.items()))
        return "\n".join(lines)


# ---- parameters ---------------------------------------------------------------------------------------------


def _field(m: Model, name: str):
    if name.startswith("opt."):
        holder, attr = m.opt, name[4:]
    else:
        holder, attr = m, name
    names = {f.name: f for f in dataclasses.fields(holder)}
    if attr not in names:
        raise ValueError(f"sysid: {name!r} is not a field of the Model" + (" options" if holder is m.opt else ""))
    f = names[attr]
    value = getattr(holder, attr)
    if f.metadata.get("static") or not isinstance(value, jax.Array) or not jp.issubdtype(value.dtype, jp.floating):
        raise ValueError(f"sysid: {name!r} is not a float Model field (it is static structure: sizes, types, "
                         "indices); only traced float fields such as body_mass, dof_damping, geom_friction, "
                         "actuator_gainprm can be fitted")  # fmt: skip
    return value


def _entries(m: Model, params) -> tuple[_Entry, ...]:
    if isinstance(params, (str, tuple)) and (isinstance(params, str) or (len(params) == 2 and
                                                                          isinstance(params[0], str) and
                                                                          not isinstance(params[1], str))):
        params = [params]  # a single entry
    out = []
    for p in params:
        if isinstance(p, str):
            name, index = p, None
        elif isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], str):
            name, index = p
        else:
            raise ValueError(f"sysid: a parameter is a field name or (name, index), not {p!r}")
        value = _field(m, name)
        flat = np.arange(value.size).reshape(value.shape)
        try:
            sel = np.atleast_1d(flat if index is None else flat[index if not isinstance(index, list) else
                                                                 np.asarray(index)]).ravel()  # fmt: skip
        except (IndexError, TypeError, ValueError) as e:
            raise ValueError(f"sysid: index {index!r} does not select elements of {name} {value.shape}: {e}") from None
        if sel.size == 0:
            raise ValueError(f"sysid: index {index!r} selects no element of {name} {value.shape}")
        for i in sel:
            pos = np.unravel_index(int(i), value.shape)
            label = f"{name}[{', '.join(str(int(j)) for j in pos)}]" if value.ndim else name
            out.append(_Entry(name, (int(i),), label))
    labels = [e.label for e in out]
    if len(set(labels)) != len(labels):
        raise ValueError(f"sysid: a parameter is listed twice: {sorted({x for x in labels if labels.count(x) > 1})}")
    return tuple(out)


def _get(m: Model, entries) -> jax.Array:
    return jp.stack([_field(m, e.name).ravel()[e.index[0]] for e in entries])


def _set(m: Model, entries, values: jax.Array) -> Model:
    groups: dict[str, list] = {}
    for k, e in enumerate(entries):
        groups.setdefault(e.name, []).append((e.index[0], k))
    opt_changes = {}
    changes = {}
    for name, items in groups.items():
        value = _field(m, name)
        idx = np.asarray([i for i, _ in items])
        vals = values[np.asarray([k for _, k in items])].astype(value.dtype)
        new = value.ravel().at[idx].set(vals).reshape(value.shape)
        if name.startswith("opt."):
            opt_changes[name[4:]] = new
        else:
            changes[name] = new
    if opt_changes:
        changes["opt"] = m.opt.replace(**opt_changes)
    return m.replace(**changes)


def _bounds(m: Model, entries, x0: np.ndarray, bounds) -> tuple[np.ndarray, np.ndarray]:
    lo = np.full(len(entries), -np.inf)
    hi = np.full(len(entries), np.inf)
    bounds = dict(bounds or {})
    unknown = set(bounds) - {e.name for e in entries} - {e.label for e in entries}
    if unknown:
        raise ValueError(f"sysid: bounds given for {sorted(unknown)}, which are not fitted")
    for k, e in enumerate(entries):
        if e.name in _POSITIVE:
            lo[k] = _POSITIVE_FLOOR * abs(x0[k]) if x0[k] != 0 else 0.0
        elif e.name in _NONNEGATIVE:
            lo[k] = 0.0
        b = bounds.get(e.label, bounds.get(e.name))
        if b is not None:
            lo[k], hi[k] = (-np.inf if b[0] is None else float(b[0])), (np.inf if b[1] is None else float(b[1]))
            if lo[k] > hi[k]:
                raise ValueError(f"sysid: bounds for {e.label} are empty: {b}")
    if np.any(x0 < lo) or np.any(x0 > hi):
        bad = [e.label for k, e in enumerate(entries) if not lo[k] <= x0[k] <= hi[k]]
        raise ValueError(f"sysid: the initial values of {bad} are outside their bounds")
    return lo, hi


# ---- logs -----------------------------------------------------------------------------------------------------


def _check_logs(m: Model, logs) -> list[dict]:
    if isinstance(logs, Mapping):
        logs = [logs]
    if not isinstance(logs, Sequence) or not logs:
        raise ValueError("sysid: logs must be a log (a mapping of arrays) or a non-empty sequence of logs")
    out = []
    for i, log in enumerate(logs):
        if not isinstance(log, Mapping):
            raise ValueError(f"sysid: logs[{i}] is not a mapping (qpos, qvel, ctrl, ...)")
        extra = set(log) - {"qpos", "qvel", "ctrl", "act", "sensordata", "qfrc_applied", "time"}
        if extra:
            raise ValueError(f"sysid: logs[{i}] has unknown entries {sorted(extra)}")
        for k in ("qpos", "qvel", "ctrl"):
            if k not in log:
                raise ValueError(f"sysid: logs[{i}] has no {k!r}")
        if m.na and "act" not in log:
            raise ValueError(f"sysid: the model has {m.na} activations: logs[{i}] needs 'act' (T+1, na)")
        a = {k: np.asarray(v, np.float64) for k, v in log.items()}
        T = a["ctrl"].shape[0] if a["ctrl"].ndim == 2 else -1
        want = {"qpos": (T + 1, m.nq), "qvel": (T + 1, m.nv), "ctrl": (T, m.nu), "act": (T + 1, m.na),
                "sensordata": (T, m.nsensordata), "qfrc_applied": (T, m.nv), "time": (T + 1,)}  # fmt: skip
        for k, v in a.items():
            if v.shape != want[k]:
                raise ValueError(f"sysid: logs[{i}]['{k}'] has shape {v.shape}, expected {want[k]} (T = {T} "
                                 "controls: states and time have T+1 rows, ctrl, sensordata, qfrc_applied T)")
            if not np.all(np.isfinite(v)):
                raise ValueError(f"sysid: logs[{i}]['{k}'] has non-finite values")
        out.append(a)
    keys = {tuple(sorted(set(a) & {"sensordata", "qfrc_applied"})) for a in out}
    if len(keys) > 1:
        raise ValueError("sysid: every log must have the same optional entries (sensordata, qfrc_applied)")
    return out


def _windows(m: Model, logs: list[dict], window: int, dt: float) -> dict:
    """Stack windows of `window` steps from every log: arrays with a leading (K,) axis."""
    cols = {k: [] for k in logs[0]}
    for a in logs:
        T = a["ctrl"].shape[0]
        for s in range(0, T - window + 1, window):
            for k, v in a.items():
                rows = window + 1 if k in ("qpos", "qvel", "act", "time") else window
                cols[k].append(v[s : s + rows])
    if not cols["ctrl"]:
        shortest = min(a["ctrl"].shape[0] for a in logs)
        raise ValueError(f"sysid: no log has a full window: window = {window} steps, longest log "
                         f"{max(a['ctrl'].shape[0] for a in logs)} (shortest {shortest})")  # fmt: skip
    out = {k: np.stack(v) for k, v in cols.items()}
    if "act" not in out:
        out["act"] = np.zeros(out["qpos"].shape[:2] + (0,))
    if "time" not in out:
        out["time"] = np.zeros(out["qpos"].shape[:2])
    return out


# ---- simulation -------------------------------------------------------------------------------------------------


def simulate_log(m: Model, d0: Data, ctrl: jax.Array, qfrc_applied: jax.Array | None = None):
    """(qpos (T+1, nq), qvel (T+1, nv), act (T+1, na), sensordata (T, nsensordata)) of a rollout of `ctrl` (T, nu)
    from the state of `d0`, in the layout of a log."""

    def body(d, xs):
        u, f = xs
        d_in = d.replace(ctrl=u) if f is None else d.replace(ctrl=u, qfrc_applied=f)
        d_next = derivatives.step(m, d_in)
        return d_next, (d_in.qpos, d_in.qvel, d_in.act, d_next.sensordata)

    d_last, (qpos, qvel, act, sens) = jax.lax.scan(body, d0, (ctrl, qfrc_applied))
    cat = lambda a, b: jp.concatenate([a, b[None]])  # noqa: E731
    return cat(qpos, d_last.qpos), cat(qvel, d_last.qvel), cat(act, d_last.act), sens


# ---- the fit ----------------------------------------------------------------------------------------------------


def fit(m: Model, logs, params=("body_mass",), *, window: int = 10, iterations: int = 20,
        fit_initial_states: bool = True, hold_starts: int | None = None, noise: Mapping[str, float] | None = None,
        bounds: Mapping[str, tuple] | None = None, optimizer: optax.GradientTransformation | None = None,
        d0: Data | None = None) -> Fit:  # fmt: skip
    """Fit float Model parameters to logs by multiple shooting (see the module docstring).

    Args:
      m: the model whose parameters are fitted (its current values are the initial guess).
      logs: one log or a sequence of logs (module docstring).
      params: a field name (all its elements) or (name, index) with a numpy index into the field, or a sequence
        of these, e.g. ("body_mass", ("geom_friction", (1, 0)), ("actuator_gainprm", (slice(None), 0))).
        "opt.<name>" fits an option (e.g. "opt.gravity"). Only traced float fields can be fitted.
      window: steps per shooting window (static).
      iterations: Levenberg-Marquardt iterations (or optimizer steps) (static).
      fit_initial_states: also fit a tangent-space correction of every window's start state (errors in
        variables); else the logged start states are used as they are.
      hold_starts: with `fit_initial_states` and Levenberg-Marquardt, the number of the first iterations in
        which the window starts stay at the logged states and only the parameters move. None (default): until
        the parameter-only fit has converged (its step is below 1e-6 of the parameters' size or an accepted step
        lowered the loss by less than 0.1 %), at most half of the iterations. 0: parameters and starts from the
        first iteration. Holding the starts first matters when the initial parameters are far off: the start
        corrections then absorb the model error instead (on a box tumbling with contacts, corrections of 2 m/s
        moved the box into other contact phases and the joint fit stalled at a wrong friction; see
        docs/gradients.md).
      noise: the standard deviation of the noise of each channel ({"qpos": .., "qvel": .., "act": ..,
        "sensordata": ..}, scalars or per-coordinate arrays): residuals are divided by it. Default: each channel
        scaled by the root-mean-square of its data (1 where that is 0).
      bounds: {name or label: (lower, upper)} (None for no bound); defaults keep masses and inertias positive and
        damping, armature, friction, stiffness non-negative.
      optimizer: use this optax optimiser on the loss instead of Levenberg-Marquardt.
      d0: the Data the windows start from (its applied forces, mocap, eq_active are used); default make_data(m).

    Returns:
      `Fit` (fit.model is the fitted Model; fit.report() a table).
    """
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise ValueError(f"sysid: window must be a positive int, not {window!r}")
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"sysid: iterations must be a non-negative int, not {iterations!r}")
    if hold_starts is not None and (isinstance(hold_starts, bool) or not isinstance(hold_starts, (int, np.integer))
                                    or hold_starts < 0):
        raise ValueError(f"sysid: hold_starts must be None or a non-negative int, not {hold_starts!r}")
    entries = _entries(m, params)
    checked = _check_logs(m, logs)
    win = _windows(m, checked, int(window), float(m.opt.timestep))
    d0 = io.make_data(m) if d0 is None else d0
    dtype = d0.qpos.dtype
    x0 = np.asarray(_get(m, entries), np.float64)
    lo, hi = _bounds(m, entries, x0, bounds)
    scale = np.where(x0 != 0, np.abs(x0), 1.0)
    weights = _weights(m, win, noise)
    arrays = {k: jp.asarray(v, dtype) for k, v in win.items()}
    w = {k: jp.asarray(v, dtype) for k, v in weights.items()}
    spec = dict(entries=entries, fit_starts=bool(fit_initial_states), iterations=int(iterations),
                optimizer=None if optimizer is None else StaticArg(optimizer))  # fmt: skip
    # the hold is traced (fits that differ only in hold_starts share one compilation)
    hold = (jp.asarray(int(iterations) // 2 if hold_starts is None else min(int(hold_starts), int(iterations) + 1)),
            jp.asarray(hold_starts is None))
    theta, loss, cov_diag, rms = _solve(m, d0, arrays, w, jp.asarray(x0 / scale, dtype), jp.asarray(lo / scale, dtype),
                                        jp.asarray(hi / scale, dtype), jp.asarray(scale, dtype), hold,
                                        **spec)  # fmt: skip
    values = np.asarray(theta, np.float64) * scale
    std = np.sqrt(np.maximum(np.asarray(cov_diag, np.float64), 0.0)) * scale
    fitted = _set(m, entries, jp.asarray(values, _field(m, entries[0].name).dtype))
    K, W1 = win["qpos"].shape[:2]
    count = K * (W1 * (m.nv + m.nv + m.na) + (W1 - 1) * (m.nsensordata if "sensordata" in win else 0))
    return Fit(model=fitted, params={e.label: float(v) for e, v in zip(entries, values)},
               initial={e.label: float(v) for e, v in zip(entries, x0)},
               std={e.label: float(s) for e, s in zip(entries, std)}, loss=np.asarray(loss, np.float64),
               rms={k: float(v) for k, v in rms.items()}, windows=int(K), residuals=int(count))  # fmt: skip


def _weights(m: Model, win: dict, noise) -> dict:
    noise = dict(noise or {})
    unknown = set(noise) - {"qpos", "qvel", "act", "sensordata"}
    if unknown:
        raise ValueError(f"sysid: noise given for unknown channels {sorted(unknown)}")
    sizes = {"qpos": m.nv, "qvel": m.nv, "act": m.na, "sensordata": m.nsensordata}
    out = {}
    for ch in ("qpos", "qvel", "act", "sensordata"):
        if ch not in win or sizes[ch] == 0:
            out[ch] = np.ones(sizes[ch])
            continue
        if ch in noise:
            s = np.broadcast_to(np.asarray(noise[ch], np.float64), (sizes[ch],)).copy()
            if np.any(s <= 0):
                raise ValueError(f"sysid: noise[{ch!r}] must be positive")
        else:
            # one scale per channel: the rms deviation of its data from its mean (qpos has nq coordinates but nv
            # tangent-space residuals, so no per-coordinate scale there)
            data = win[ch].reshape(-1, sizes[ch] if ch != "qpos" else m.nq)
            spread = float(np.sqrt(np.mean((data - data.mean(0)) ** 2)))
            s = np.full(sizes[ch], spread if spread > 0 else 1.0)
        out[ch] = 1.0 / s
    return out


@functools.partial(jax.jit, static_argnames=("entries", "fit_starts", "iterations", "optimizer"))
def _solve(m, d0, win, w, theta0, lo, hi, scale, hold, *, entries, fit_starts, iterations, optimizer):
    """hold: (limit, adaptive): the window starts are held for the first `limit` passes, and, when `adaptive`,
    freed earlier once the parameter-only fit has converged (_HOLD_STEP_TOL, _HOLD_FTOL)."""
    dtype = theta0.dtype
    nv, na = m.nv, m.na
    nx = 2 * nv + na
    K = win["qpos"].shape[0]
    has_sens = "sensordata" in win
    has_frc = "qfrc_applied" in win

    def window_residual(theta, delta, k):
        """Scaled residual of window k, (R,)."""
        model = _set(m, entries, theta * scale)
        qpos0, qvel0, act0 = win["qpos"][k, 0], win["qvel"][k, 0], win["act"][k, 0]
        start = d0.replace(
            qpos=derivatives.integrate_pos(model, qpos0, delta[:nv], 1.0), qvel=qvel0 + delta[nv : 2 * nv],
            act=act0 + delta[2 * nv :], time=win["time"][k, 0],
            qacc_warmstart=jp.zeros_like(d0.qacc_warmstart))  # fmt: skip
        frc = win["qfrc_applied"][k] if has_frc else None
        qpos, qvel, act, sens = simulate_log(model, start, win["ctrl"][k], frc)
        rq = jax.vmap(lambda a, b: derivatives.differentiate_pos(model, a, b))(win["qpos"][k], qpos)
        parts = [(rq * w["qpos"]).ravel(), ((qvel - win["qvel"][k]) * w["qvel"]).ravel()]
        if na:
            parts.append(((act - win["act"][k]) * w["act"]).ravel())
        if has_sens:
            parts.append(((sens - win["sensordata"][k]) * w["sensordata"]).ravel())
        return jp.concatenate(parts)

    ks = jp.arange(K)
    delta0 = jp.zeros((K, nx), dtype)
    n_theta = theta0.shape[0]

    def residuals(theta, delta):
        return jax.vmap(window_residual, in_axes=(None, 0, 0))(theta, delta, ks)

    def loss_fn(theta, delta):
        r = residuals(theta, delta)
        r = jp.where(jp.isfinite(r), r, 1e10)
        return 0.5 * jp.sum(r * r)

    def jacobians(theta, delta):
        def one(d, k):
            def f(z):
                r = window_residual(z[:n_theta], z[n_theta:], k)
                return r, r

            J, r = derivatives.jacobian(m, f, has_aux=True)(jp.concatenate([theta, d]))
            return r, J[:, :n_theta], J[:, n_theta:]

        return jax.vmap(one)(delta, ks)

    tiny = jp.finfo(dtype).eps
    library = config_linalg(m.config) == "library"

    def spd_solve(a, b):
        """a^-1 b for a Gauss-Newton matrix plus a positive diagonal, a (n, n), b (n,) or (n, k): JAX's LU
        (library), else Cholesky with pivots below eps * max|diag| clamped there (a numerically singular
        direction gets a huge finite step, as from LU, instead of NaN)."""
        if library:
            return jp.linalg.solve(a, b)
        return linalg.solve_spd(a, b, mindiag=tiny * jp.max(jp.abs(jp.diagonal(a))))

    def linearize(theta, delta):
        """Residuals and their Jacobians (r (K, R), Jt (K, R, n_theta), Jd (K, R, nx)), non-finite entries zeroed,
        and whether all were finite."""
        r, Jt, Jd = jacobians(theta, delta)
        finite = jp.all(jp.isfinite(r)) & jp.all(jp.isfinite(Jt)) & jp.all(jp.isfinite(Jd))
        clean = lambda x: jp.where(jp.isfinite(x), x, 0.0)  # noqa: E731
        return (clean(r), clean(Jt), clean(Jd)), finite

    def blocks(lin):
        r, Jt, Jd = lin
        Att = jp.einsum("kri,krj->ij", Jt, Jt)
        gt = jp.einsum("kri,kr->i", Jt, r)
        Atd = jp.einsum("kri,krj->kij", Jt, Jd)
        Add = jp.einsum("kri,krj->kij", Jd, Jd)
        gd = jp.einsum("kri,kr->ki", Jd, r)
        return Att, gt, Atd, Add, gd

    def lm_step(lin, lam):
        """Levenberg-Marquardt steps with Marquardt's diagonal damping lam: (held, dtheta, ddelta), the
        parameter-only step with the window starts held, and the joint step with the starts eliminated by a Schur
        complement (block-diagonal in the windows; without fit_starts, the held step and zero)."""
        Att, gt, Atd, Add, gd = blocks(lin)
        Dt = jp.maximum(jp.diagonal(Att), tiny)
        held = -spd_solve(Att + jp.diag(lam * Dt), gt)
        if not fit_starts:
            return held, held, jp.zeros((K, nx), dtype)
        Dd = jp.maximum(jp.diagonal(Add, axis1=1, axis2=2), tiny)
        Add_l = Add + jax.vmap(jp.diag)(lam * Dd)
        inv = jax.vmap(spd_solve)(Add_l, jp.concatenate([gd[..., None], jp.swapaxes(Atd, 1, 2)], axis=-1))
        inv_gd, inv_Adt = inv[..., 0], inv[..., 1:]
        S = Att - jp.einsum("kij,kjl->il", Atd, inv_Adt)
        rhs = gt - jp.einsum("kij,kj->i", Atd, inv_gd)
        dtheta = -spd_solve(S + jp.diag(lam * Dt), rhs)
        ddelta = -(inv_gd + jp.einsum("kij,j->ki", inv_Adt, dtheta))
        return held, dtheta, ddelta

    def gn_matrix(lin):
        """Gauss-Newton matrix of theta with the window starts eliminated (for the covariance)."""
        Att, _, Atd, Add, _ = blocks(lin)
        if not fit_starts:
            return Att
        Dd = jp.maximum(jp.diagonal(Add, axis1=1, axis2=2), tiny)
        reg = jax.vmap(jp.diag)(1e-12 * Dd)
        return Att - jp.einsum("kij,kjl->il", Atd, jax.vmap(spd_solve)(Add + reg, jp.swapaxes(Atd, 1, 2)))

    def project(theta):
        return jp.clip(theta, lo, hi)

    if optimizer is None:
        # iterations + 1 passes of one compiled body (the rollout is traced once, inside the Jacobian): pass 0
        # linearises at the initial guess; each pass then evaluates the candidate proposed from the best point so
        # far and keeps it if it lowers the loss (the Jacobian comes with the evaluation, so an accepted candidate
        # is already linearised for the next step). With fit_starts, the first passes hold the window starts at
        # the log (free = False) and propose parameter-only steps; the starts are freed after `limit` passes or,
        # when `adaptive`, once the parameter-only fit has converged (_HOLD_STEP_TOL, _HOLD_FTOL).
        limit, adaptive = hold

        def iteration(carry, i):
            best, lin_best, cost_best, lam, cand, free = carry
            lin, finite = linearize(*cand)
            cost = 0.5 * jp.sum(lin[0] * lin[0])
            accept = finite & jp.isfinite(cost) & (cost < cost_best)
            pick = lambda new, old: jax.tree.map(lambda a, b: jp.where(accept, a, b), new, old)  # noqa: E731
            best, lin_best = pick(cand, best), pick(lin, lin_best)
            stalled = accept & (cost > (1.0 - _HOLD_FTOL) * cost_best)
            cost_best = jp.where(accept, cost, cost_best)
            lam = jp.clip(jp.where(accept, lam * _LM_DOWN, lam * _LM_UP), _LM_MIN, _LM_MAX)
            held, dtheta, ddelta = lm_step(lin_best, lam)
            if fit_starts:
                converged = stalled | (jp.max(jp.abs(project(best[0] + held) - best[0])) <= _HOLD_STEP_TOL)
                free = free | (i >= limit) | (adaptive & converged)
                dtheta, ddelta = jp.where(free, dtheta, held), jp.where(free, ddelta, 0.0)
            cand = (project(best[0] + dtheta), best[1] + ddelta)
            return (best, lin_best, cost_best, lam, cand, free), cost_best

        lin_shape = jax.eval_shape(lambda: linearize(theta0, delta0)[0])
        lin0 = jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), lin_shape)
        init = ((theta0, delta0), lin0, jp.asarray(jp.inf, dtype), jp.asarray(_LM_LAMBDA0 / _LM_DOWN, dtype),
                (theta0, delta0), jp.asarray(False))  # fmt: skip
        ((theta, delta), lin, cost, _, _, _), curve = jax.lax.scan(iteration, init, jp.arange(iterations + 1))
        S, r = gn_matrix(lin), lin[0]
    else:
        opt = optimizer.obj
        vg = jax.value_and_grad(loss_fn, argnums=(0, 1))

        def iteration(carry, _):
            (theta, delta), state = carry
            c, (gt, gd) = vg(theta, delta)
            g = (jp.where(jp.isfinite(gt), gt, 0.0), jp.where(jp.isfinite(gd), gd, 0.0) if fit_starts else
                 jp.zeros_like(gd))  # fmt: skip
            upd, state = opt.update(g, state, (theta, delta))
            theta, delta = optax.apply_updates((theta, delta), upd)
            return ((project(theta), delta), state), c

        init = ((theta0, delta0), opt.init((theta0, delta0)))
        ((theta, delta), _), curve = jax.lax.scan(iteration, init, None, length=iterations)
        # curve[i]: the loss before update i; drop the first (c0, prepended below) and add the final loss
        c0 = loss_fn(theta0, delta0)
        curve = jp.concatenate([curve[1:], loss_fn(theta, delta)[None]]) if iterations else curve
        lin, _ = linearize(theta, delta)
        S, r = gn_matrix(lin), lin[0]
        cost = 0.5 * jp.sum(r * r)
        curve = jp.concatenate([c0[None], curve])
    # covariance of theta at the optimum: sigma^2 S^-1
    n_res = r.size
    n_par = n_theta + (K * nx if fit_starts else 0)
    sigma2 = 2.0 * cost / max(n_res - n_par, 1)
    cov = sigma2 * (jp.linalg.pinv(S) if library else linalg.unbatched(jp.linalg.pinv)(S))
    # unscaled residual rms per channel
    rms = _channel_rms(m, win, w, r, has_sens)
    return theta, curve, jp.diagonal(cov), rms


def _channel_rms(m, win, w, r, has_sens):
    K, W1 = win["qpos"].shape[:2]
    nv, na = m.nv, m.na
    sizes = [("qpos", W1 * nv), ("qvel", W1 * nv)]
    if na:
        sizes.append(("act", W1 * na))
    if has_sens:
        sizes.append(("sensordata", (W1 - 1) * m.nsensordata))
    out = {}
    start = 0
    for ch, n in sizes:
        if n == 0:  # e.g. logged sensordata of a model without sensors
            continue
        part = r[:, start : start + n].reshape(K, -1, w[ch].shape[0]) / w[ch]
        out[ch] = jp.sqrt(jp.mean(part * part))
        start += n
    return out
