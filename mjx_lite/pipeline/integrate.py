"""Time integration (mj_Euler, mj_RungeKutta, mj_implicit), mj_integratePos and the divergence checks.

All integrators take Data on which `forward` has run and return the advanced state (qpos, qvel, act, time,
qacc_warmstart); the other fields keep the values of the last forward evaluation, as in MuJoCo.

- `euler`: semi-implicit Euler. Joint damping is integrated implicitly, (M + h D) qacc = qfrc_smooth +
  qfrc_constraint with D the diagonal damping derivative (`euler_damping`: dof damping, dampingpoly and
  joint-actuator damping), unless the eulerdamp or damper disable flag is set (mj_EulerSkip).
- `implicit`: m.opt.integrator IMPLICIT: (M - h qDeriv) qacc = qfrc with the full qDeriv =
  d(qfrc_passive + qfrc_actuator - qfrc_bias)/d(qvel) (LU solve); IMPLICITFAST: qDeriv without the RNE
  term, symmetrised from its lower triangle as MuJoCo does (Cholesky solve), then standalone free bodies
  re-solved with their full 6x6 block including the gyroscopic derivative (MuJoCo 4's mjd_freeMhat).
  qDeriv is the exact Jacobian of our own force computation (forward-mode autodiff over the velocity and
  actuation stages), so it includes dof/tendon damping (with dampingpoly), affine actuator gain/bias velocity
  terms and fluid forces (which MuJoCo's analytic mjd_passive_vel also includes). Possible differences from
  MuJoCo's analytic derivative: muscle/dcmotor velocity dependence, and the tendon-armature bias term.
- `rk4`: MuJoCo's 4-stage tableau on (qpos, qvel, act), stages evaluated without sensors or energy; ball/free
  rotations are integrated as in MuJoCo 4 (Runge-Kutta-Munthe-Kaas: stage rates mapped through the exact
  inverse differential of the exponential map, see `rk4`).

Divergence (mj_checkPos / mj_checkVel / mj_checkAcc): a value is bad when it is NaN or |x| > 1e10
(mju_isBad). A bad environment is reset to the model's reset state (mj_resetData: qpos0, zero velocity,
act, ctrl, applied forces, time; mocap at the model's body pose) with `jp.where`, so other environments
of a vmapped batch are untouched, and `warning_number[BADQPOS|BADQVEL|BADQACC]` is incremented (counters
are kept across the reset, unlike MuJoCo which clears them). With the autoreset disable flag only the
counter is incremented. After a bad qacc the step returns the reset state itself (time 0): its state and every
field from the actuation stage on are reset; the position and velocity stages' fields (poses, Jacobians, contacts,
qM) are reset too, or, with `Config.qacc_reset` "state" (the default off the CPU) and Euler or the implicit
integrators, keep the values computed at the step's start (see `reset_where`; RK4's stages rewrite them, so there
everything is reset). MuJoCo instead runs
forward on the reset state and integrates once from there (time = h); a model configured with
`Config(exact_reset=True)` does that too, at the price of a second forward pass in the compiled step (about twice
the compile time of `step`), which is why it is not the default.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import linalg
from mjx_lite.config import linalg as config_linalg
from mjx_lite.config import qacc_reset
from mjx_lite.data import count_warning, count_warnings, float_dtype, make_data, reset_values
from mjx_lite.math import quat_mul, quat_normalize, safe_norm
from mjx_lite.pipeline import actuation, derivative, forward, history, inertia, kernels, plastic, sensor, sleep
from mjx_lite.types import MINVAL, STATE_FIELDS, Data, DisableBit, DynType, IntegratorType, JointType, Model, Warning

MAXVAL = 1e10  # mjMAXVAL: |x| above this counts as divergence


# ---- positions ---------------------------------------------------------------------------------------------


def _quat_integrate(q: jax.Array, omega: jax.Array, h: jax.Array) -> jax.Array:
    """mju_quatIntegrate: normalise q, then q * exp(h * omega / 2) with omega in the local frame.

    Written with sinc so it is exact and differentiable at omega = 0.
    """
    q = quat_normalize(q)
    angle = safe_norm(omega) * h
    half = 0.5 * angle
    # sin(half) * omega / |omega| = omega * h/2 * sinc(half / pi)
    vec = omega * (0.5 * h * jp.sinc(half / jp.pi))[..., None]
    dq = jp.concatenate([jp.cos(half)[..., None], vec], axis=-1)
    return quat_mul(q, dq)


def integrate_pos(m: Model, qpos: jax.Array, qvel: jax.Array, h: jax.Array) -> jax.Array:
    """qpos advanced by velocity qvel over time h (mj_integratePos): quaternions on the sphere.

    Vectorised by joint type with static index tables.
    """
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    vadr = np.asarray(m.jnt_dofadr)
    out = qpos
    # hinge and slide: qpos += h * qvel
    lin = np.nonzero((jtype == JointType.HINGE) | (jtype == JointType.SLIDE))[0]
    if lin.size:
        out = out.at[qadr[lin]].add(h * qvel[vadr[lin]])
    # free: translation
    free = np.nonzero(jtype == JointType.FREE)[0]
    if free.size:
        pi = qadr[free][:, None] + np.arange(3)
        vi = vadr[free][:, None] + np.arange(3)
        out = out.at[pi].add(h * qvel[vi])
    # ball and the rotation of free: quaternion integration
    quat_q = np.concatenate([qadr[jtype == JointType.BALL], qadr[free] + 3]).astype(int)
    quat_v = np.concatenate([vadr[jtype == JointType.BALL], vadr[free] + 3]).astype(int)
    if quat_q.size:
        pi = quat_q[:, None] + np.arange(4)
        vi = quat_v[:, None] + np.arange(3)
        out = out.at[pi].set(_quat_integrate(qpos[pi], qvel[vi], h))
    return out


# ---- activations -------------------------------------------------------------------------------------------


def _actuator_disabled(m: Model) -> np.ndarray:
    """Static (nu,) mask of actuators whose group is disabled (opt.disableactuator bitmask)."""
    group = np.asarray(m.actuator_group)
    ok = (group >= 0) & (group < 31)
    bits = np.where(ok, np.left_shift(1, np.clip(group, 0, 30)), 0)
    return ok & ((m.opt.disableactuator & bits) != 0)


def _act_tables(m: Model) -> tuple[np.ndarray, np.ndarray]:
    """Static (na,) actuator index of each activation slot, and whether it is a filterexact slot."""
    owner = np.zeros(m.na, int)
    for i in range(m.nactuator):
        adr, num = int(m.actuator_actadr[i]), int(m.actuator_actnum[i])
        if adr >= 0:
            owner[adr : adr + num] = i
    exact = np.asarray(m.actuator_dyntype)[owner] == DynType.FILTEREXACT if m.na else np.zeros(0, bool)
    return owner, exact


def next_act(m: Model, act: jax.Array, act_dot: jax.Array) -> jax.Array:
    """Activations after one timestep (nextActivation): Euler or exact filter, then actrange clamping."""
    if m.na == 0:
        return act
    owner, exact = _act_tables(m)
    h = m.opt.timestep
    act_dot = jp.where(jp.asarray(_actuator_disabled(m)[owner]), 0.0, act_dot)
    if exact.any():
        tau = jp.maximum(1e-15, m.actuator_dynprm[owner, 0])
        step = jp.where(jp.asarray(exact), act_dot * tau * (1.0 - jp.exp(-h / tau)), act_dot * h)
    else:
        step = act_dot * h
    new = act + step
    limited = np.asarray(m.actuator_actlimited, bool)[owner]
    if limited.any():
        rng = m.actuator_actrange[owner]
        new = jp.where(jp.asarray(limited), jp.clip(new, rng[:, 0], rng[:, 1]), new)
    return new


def _advance(m: Model, d: Data, act_dot: jax.Array, qacc: jax.Array | None, qvel: jax.Array | None = None,
             start: Data | None = None) -> Data:
    """mj_advance: act, then qvel += h qacc, then qpos with `qvel` (or the new d.qvel), time += h; the history
    buffers' samples and the plastic springs' references (`plastic.update`) from `start` (forward at the step's
    start; default d). With sleeping islands, mj_sleep after act and the history buffers (`sleep.fall_asleep`: the
    trees that fall asleep get zero qvel and qacc, the velocity and acceleration stages are recomputed at the new
    act and buffers, so an interval sensor that ticked at this step keeps the sample it just recorded, the
    velocities before the sleep, as MuJoCo's) and neither they nor the trees asleep before are advanced; `qacc`
    (computed before, as MuJoCo's integrators do) moves the others. qacc None: Euler's implicit damping, computed by
    the fused kernel with the update (`kernels.euler_fused`)."""
    h = m.opt.timestep
    act = d.act
    if m.na and not (m.opt.disableflags & DisableBit.ACTUATION):
        act = actuation.advance_act(m, d, next_act(m, d.act, act_dot), act_dot)  # dcmotor slots, servo wraps
    # the step's controls and sensor values recorded at its start time (mj_advance); delayed sensors afresh
    # (RK4: delayed sensors sample the step's start state, not the last stage's kinematics: as MuJoCo, probed)
    buf = history.advance(m, d, sensor.history_raw(m, d if start is None else start))
    pre = d
    if sleep.on(m):  # mj_sleep, after the activations and the history buffers advanced (its recomputation sees
        # them: an interval sensor ticked here reads its new sample, a delayed one reads the buffer with it)
        d = forward.run(sleep.fall_asleep, m, d.replace(act=act, history=buf),
                        lambda x: sleep.freeze(m, pre, forward.forward_vel_acc(m, x)))
    if qacc is None:  # Euler's damping, solve and update as one fused kernel (kernels/advance.py's euler)
        qpos, new_qvel = kernels.euler_advance(m, d, integrate_pos)
        vel = new_qvel
    elif qvel is None and kernels.advance_fused(m):  # one fused kernel (kernels/advance.py), integrate_pos its twin
        qpos, new_qvel = kernels.advance(m, d.qpos, d.qvel, qacc, integrate_pos)
        vel = new_qvel
    else:
        new_qvel = d.qvel + h * qacc
        vel = new_qvel if qvel is None else qvel
        qpos = integrate_pos(m, d.qpos, vel, h)
    plast = plastic.update(m, pre if start is None else start, qpos, h * vel)
    out = d.replace(qpos=qpos, qvel=new_qvel, act=act, time=d.time + h, qacc_warmstart=d.qacc, history=buf,
                    plastic=plast)  # fmt: skip
    return sleep.integrate_mask(m, d, out)  # (sleeping trees keep qpos and qvel; identity without sleep)


# ---- integrators -------------------------------------------------------------------------------------------


def _concrete_all_zero(*xs: jax.Array) -> bool:
    """True only when every x is a concrete (untraced) array of zeros: lets closed-over models skip work."""
    for x in xs:
        if isinstance(x, jax.core.Tracer) or np.any(np.asarray(x) != 0):
            return False
    return True


def euler(m: Model, d: Data) -> Data:
    """Semi-implicit Euler (mj_Euler), implicit in joint damping unless eulerdamp/damper are disabled."""
    flags = m.opt.disableflags
    damp = m.nv > 0 and not (flags & DisableBit.EULERDAMP) and not (flags & DisableBit.DAMPER)
    if damp and _concrete_all_zero(m.dof_damping, m.dof_dampingpoly) and not np.any(np.asarray(m.jnt_actuatorid) >= 0):
        damp = False
    if not damp:
        return _advance(m, d, d.act_dot, d.qacc)
    # qacc = (M + h B)^-1 qfrc: the diagonal shift keeps qM's tree sparsity (MuJoCo's mj_factorI on qH)
    if kernels.euler_fused(m):  # the damping, the solve and the update: one fused kernel
        return _advance(m, d, d.act_dot, None)
    qfrc = d.qfrc_smooth + d.qfrc_constraint
    qacc = kernels.solve_shifted(m, d, m.opt.timestep * derivative.euler_damping(m, d), qfrc)  # or XLA's
    return _advance(m, d, d.act_dot, qacc)


def _standalone_free_dofs(m: Model) -> np.ndarray:
    """Static (k, 6) dofs of free joints whose body has no children (mj_isFreeBody)."""
    jtype = np.asarray(m.jnt_type)
    parent = np.asarray(m.body_parentid)
    out = []
    for j in np.nonzero(jtype == JointType.FREE)[0]:
        body = int(m.jnt_bodyid[j])
        if not np.any(parent[1:] == body):
            out.append(int(m.jnt_dofadr[j]) + np.arange(6))
    return np.asarray(out, int).reshape(-1, 6)


def implicit(m: Model, d: Data) -> Data:
    """Implicit-in-velocity integration (mj_implicit) for IMPLICIT and IMPLICITFAST.

    IMPLICITFAST, as MuJoCo 4: the global solve uses the symmetrised qDeriv without the bias derivative; then
    each standalone free body (free joint, no children) is re-solved with its 6x6 block of M - h (qDeriv -
    d qfrc_bias/d qvel), which adds the gyroscopic term (mjd_freeMhat).

    Solves (`Config.linalg`): "own": LU without pivoting (MuJoCo's mju_factorLUSparse) for IMPLICIT and its 6x6
    blocks, Cholesky with pivots clamped at MINVAL (mj_factorI) for IMPLICITFAST; "library": JAX's LU with partial
    pivoting and Cholesky (NaN for a matrix that is not positive definite).
    """
    if m.nv == 0:
        return _advance(m, d, d.act_dot, d.qacc)
    h = m.opt.timestep
    qfrc = d.qfrc_smooth + d.qfrc_constraint
    library = config_linalg(m.config) == "library"
    if m.opt.integrator == IntegratorType.IMPLICIT:
        qlu = inertia.full_m(m, d) - h * derivative.qderiv(m, d, bias=True)
        qacc = linalg.general_solve(qlu, qfrc, library=library)
    elif m.opt.integrator == IntegratorType.IMPLICITFAST:
        der = derivative.qderiv(m, d, bias=False)
        sym = jp.tril(der) + jp.tril(der, -1).T
        mass = inertia.full_m(m, d)
        qacc = linalg.spd_solve(mass - h * sym, qfrc, library=library, mindiag=MINVAL)
        free = _standalone_free_dofs(m)
        if free.size:
            flat = free.reshape(-1)
            force = derivative.smooth_vel_force(m, d, bias=True)

            def block_force(v: jax.Array) -> jax.Array:
                return force(d.qvel.at[flat].set(v))[flat]

            full = jax.jacfwd(block_force)(d.qvel[flat])  # (6k, 6k): blocks of qDeriv - d bias/d qvel
            k = free.shape[0]
            blocks = full.reshape(k, 6, k, 6)[np.arange(k), :, np.arange(k), :]  # (k, 6, 6)
            a = mass[free[:, :, None], free[:, None, :]] - h * blocks
            solve = jax.vmap(lambda a, b: linalg.general_solve(a, b, library=library))
            qacc = qacc.at[free].set(solve(a, qfrc[free]))
    else:
        raise ValueError("implicit: integrator must be IMPLICIT or IMPLICITFAST")
    return _advance(m, d, d.act_dot, qacc)


def _rotation_dofs(m: Model) -> np.ndarray:
    """Static (k, 3) dof indices of the local angular velocities of ball and free joints."""
    jtype = np.asarray(m.jnt_type)
    vadr = np.asarray(m.jnt_dofadr)
    start = np.concatenate([vadr[jtype == JointType.BALL], vadr[jtype == JointType.FREE] + 3]).astype(int)
    return start[:, None] + np.arange(3) if start.size else np.zeros((0, 3), int)


def _dexpinv(theta: jax.Array, w: jax.Array) -> jax.Array:
    """Lie-algebra rate of a body-frame angular velocity w at rotation vector theta, (k, 3).

    For q(t) = q0 exp(theta(t)) with body-frame angular velocity w, theta' = dexp^-1(theta) w
      = w + 1/2 theta x w + c(|theta|) theta x (theta x w),  c(t) = (1 - (t/2) cot(t/2)) / t^2,
    closed form of the Bernoulli series. Near 0 (where the closed form cancels) c is its Taylor series
    1/12 + t^2/720 + t^4/30240 + t^6/1209600, so value and derivatives are exact and NaN-free at theta = 0;
    the switch is at t^2 = 1e-4 in float64 and 0.1 in float32 (series truncation and cancellation both below
    the dtype's round-off there).
    """
    t2 = jp.sum(theta * theta, axis=-1)
    small = t2 < (1e-4 if jp.finfo(t2.dtype).eps < 1e-10 else 0.1)
    t2s = jp.where(small, 1.0, t2)
    half = 0.5 * jp.sqrt(t2s)
    exact = (1.0 - half * jp.cos(half) / jp.sin(half)) / t2s
    series = 1.0 / 12.0 + t2 * (1.0 / 720.0 + t2 * (1.0 / 30240.0 + t2 / 1209600.0))
    c = jp.where(small, series, exact)
    tw = jp.cross(theta, w)
    return w + 0.5 * tw + c[..., None] * jp.cross(theta, tw)


# RK4 Butcher tableau (MuJoCo's RK4_A / RK4_B); C = row sums of A.
_RK4_A = ((0.5,), (0.0, 0.5), (0.0, 0.0, 1.0))
_RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)
_RK4_A_ROWS = tuple(row + (0.0,) * (4 - len(row)) for row in _RK4_A)  # (3, 4): zero-padded rows
_RK4_C = tuple(sum(row) for row in _RK4_A)


def rk4(m: Model, d: Data) -> Data:
    """4th-order Runge-Kutta-Munthe-Kaas on (qpos, qvel, act) (mj_RungeKutta, N=4, MuJoCo 4).

    Stage i evaluates forward (without sensors/energy) at time + c_i h on
      qpos_i = integrate_pos(qpos0, sum_j a_ij k_j, h),  qvel_i = qvel0 + h sum_j a_ij qacc_j,
      act_i = act0 + h sum_j a_ij act_dot_j,
    where the position rates k_j are the stage velocities qvel_j, except for the rotations of ball and free
    joints where they are Lie-algebra rates k_j = dexp^-1(theta_j) w_j at the stage's rotation vector
    theta_j = h sum_l a_jl k_l (`_dexpinv`, exact). The step is mj_advance with the b-weighted sums:
    qvel += h sum b qacc, act by sum b act_dot, qpos = integrate_pos(qpos0, sum b k, h). This makes the
    orientations 4th-order accurate (MuJoCo 4 changelog: "Runge-Kutta-Munthe-Kaas correction").

    `d` must hold forward's results for the current state (stage 1). The returned Data holds the last stage's
    derived quantities, as MuJoCo's does, except qacc: the b-weighted acceleration (qacc_warmstart is the last
    stage's), as MuJoCo 4.0's.
    """
    return rk4_stages(m, d, lambda m, di, x: (forward.forward_skip(m, di, sensors=False), None))[0]


def _row_state(m: Model, d0: Data, a: jax.Array, c: jax.Array, rate: jax.Array, acc: jax.Array,
               adot: jax.Array) -> tuple[jax.Array, ...]:
    """The state of RK4 tableau row a (4,) at time fraction c from the step's start d0, with the stage rates so far
    (rate, acc, adot: (4, ...)): (qpos, qvel, act, time, dv) where dv is the combined position rate."""
    h = m.opt.timestep
    dv = _combine(a, rate)
    return (integrate_pos(m, d0.qpos, dv, h), d0.qvel + h * _combine(a, acc), d0.act + h * _combine(a, adot),
            d0.time + c * h, dv)  # fmt: skip


def _stage_rate(rot: np.ndarray, h: jax.Array, dv: jax.Array, qvel: jax.Array, plain=None) -> jax.Array:
    """A stage's position rate k (nv,): qvel, in the Lie algebra on the rotation dofs `rot` (dexp^-1 at h dv);
    `plain` (a () bool, or None) keeps qvel itself there (stage 1 of the merged loop)."""
    if not rot.size:
        return qvel
    lie = _dexpinv(h * dv[rot], qvel[rot])
    return qvel.at[rot].set(lie if plain is None else jp.where(plain, qvel[rot], lie))


def rk4_stages(m: Model, d: Data, stage_forward, xs=None):
    """`rk4` with the forward pass of stages 2-4 given: stage_forward(m, d_i, x_i) -> (Data, y_i) where x_i is
    row i of the pytree xs (leading axis 3, or None) and the y_i are stacked (3, ...). Returns (Data, ys).
    (The hook of `derivatives.transition`: each stage's solver solution recorded, then linearised at it.)"""
    h = m.opt.timestep
    rot = _rotation_dofs(m)
    qpos0, qvel0, act0, time0 = d.qpos, d.qvel, d.act, d.time
    # k_j (position rates: Lie-algebra rates on the rotation dofs; k_1 = qvel0, theta = 0), F[j].qacc and
    # F[j].act_dot of the four stages, stage 1's from `d`; the later stages fill their rows
    rate = jp.zeros((4,) + qvel0.shape, qvel0.dtype).at[0].set(qvel0)
    acc = jp.zeros((4,) + d.qacc.shape, d.qacc.dtype).at[0].set(d.qacc)
    adot = jp.zeros((4,) + d.act_dot.shape, d.act_dot.dtype).at[0].set(d.act_dot)

    def stage(carry, ix):
        """Stage i + 2 (i = 0, 1, 2): forward at the state of tableau row i; its rates go to row i + 1. One traced
        forward pass for the three stages (`lax.scan`), not three: the step's graph, and the compile time of a
        gradient through it, hold two forward passes instead of four."""
        i, x = ix
        d, rate, acc, adot = carry
        a = jp.asarray(_RK4_A_ROWS, h.dtype)[i]  # (4,): row i, zero from column i + 1 on
        qpos, qvel, act, time, dv = _row_state(m, start, a, jp.asarray(_RK4_C, h.dtype)[i], rate, acc, adot)
        d_prev = d
        d, y = stage_forward(m, d.replace(qpos=qpos, qvel=qvel, act=act, time=time), x)
        d = sleep.freeze(m, d_prev, d)  # sleeping trees keep their frozen forces and qacc (identity without sleep)
        k = _stage_rate(rot, h, dv, d.qvel)
        return (d, rate.at[i + 1].set(k), acc.at[i + 1].set(d.qacc), adot.at[i + 1].set(d.act_dot)), y

    start = d
    (d, rate, acc, adot), ys = jax.lax.scan(stage, (d, rate, acc, adot), (jp.arange(3), xs))
    b = jp.asarray(_RK4_B, h.dtype)
    d = d.replace(qpos=qpos0, qvel=qvel0, act=act0, time=time0)
    return _rk4_advance(m, d, _combine(b, adot), _combine(b, acc), _combine(b, rate), start), ys


def _rk4_advance(m: Model, d: Data, act_dot: jax.Array, qacc: jax.Array, rate: jax.Array, start: Data) -> Data:
    """RK4's mj_advance with the b-weighted rates, `d` the last stage's Data with the step's start state restored.
    With sleeping islands (`sleep.on`), mj_sleep runs in `_advance` as in MuJoCo 4.0 (probed): after the four
    stages, its counters and islands from the last stage's rows and the start's velocities; trees that fall asleep
    get zero qvel and qacc, the velocity and acceleration stages (with sensors) are recomputed on the last stage's
    positions, and neither they nor the trees still asleep are advanced. (A tree that falls asleep so keeps the
    last stage's poses with the start's qpos: the next step's kinematics sees it moved and wakes it, as MuJoCo's,
    unless the stages did not move it.)"""
    out = _advance(m, d, act_dot, qacc, rate, start=start)
    # MuJoCo 4.0 (probed): qacc is the b-weighted acceleration the step applied, qacc_warmstart the last stage's
    return out.replace(qacc=qacc, qacc_warmstart=d.qacc)


def rk4_merged(m: Model, derivatives: bool = False) -> bool:
    """Whether `step` runs forward and RK4 as one loop of four stages (`rk4_forward`): `Config.rk4_loop` "merged"
    (derivatives=True: whether its derivatives go through that loop: "merged" or "auto"), and not with delayed
    sensors or plastic springs (their update reads stage 1's own Data) or `Config.exact_reset`."""
    if m.opt.integrator != IntegratorType.RK4 or m.config.rk4_loop not in (("merged", "auto") if derivatives
                                                                           else ("merged",)):  # fmt: skip
        return False
    return not (m.nhistory or m.nplastic or m.config.exact_reset)


def _zeros_with_tangent(x: jax.Array, shape: tuple[int, ...]) -> jax.Array:
    """Zeros of `shape` (x's trailing shape) whose derivative is a (zero) function of x's: `jp.where(True, 0, x)`.

    For a `lax.scan` carry that starts at zero and takes the state's derivative after the first iteration (RK4's
    stage rates): a constant would start with a symbolic zero tangent, and `jax.jvp` / `jax.linearize` of the scan
    would trace and partially evaluate the loop body twice (their fixpoints over which carries have tangents, and
    which are known, converge one round later). The select is folded away by XLA (no run-time cost)."""
    return jp.where(True, jp.zeros((), x.dtype), jp.broadcast_to(x, shape))


_RK4_A_FULL = ((0.0,) * 4,) + _RK4_A_ROWS  # (4, 4): row 0 (stage 1, the step's own state) all zero


def rk4_forward(m: Model, d: Data) -> tuple[Data, jax.Array]:
    """forward (with sensors) at d's state, then `rk4`, as one `lax.scan` over the four stages: the step's traced
    graph holds one forward pass instead of two (the first stage's under `forward.forward_pos_vel` /
    `forward_acc` in `step`, the later ones' in `rk4_stages`'s loop), and so does its gradient (`Config.rk4_loop`
    "merged": faster to compile, slower to run). Same values as forward followed by `rk4`: stage
    1 runs on d's own state (selected, not re-integrated) with its sensors (`lax.cond` on the stage index), and
    the later stages leave stage 1's sensordata as `rk4` does. Returns (the stepped Data, stage 1's qacc: the
    step's mj_checkAcc input)."""
    h = m.opt.timestep
    rot = _rotation_dofs(m)
    qpos0, qvel0, act0, time0 = d.qpos, d.qvel, d.act, d.time
    rate, acc, adot = (_zeros_with_tangent(x, (4,) + x.shape) for x in (qvel0, qvel0, act0))
    start = d

    def stage(carry, i):
        """Stage i + 1 (i = 0..3): forward at the state of tableau row i (stage 1: d's state), rates to row i."""
        d, rate, acc, adot = carry
        first = i == 0
        a = jp.asarray(_RK4_A_FULL, h.dtype)[i]
        row = _row_state(m, start, a, jp.asarray((0.0,) + _RK4_C, h.dtype)[i], rate, acc, adot)
        qpos, qvel, act, time = (jp.where(first, x0, x) for x0, x in zip((qpos0, qvel0, act0, time0), row[:4]))
        with jax.named_scope("forward"):
            d_prev = d
            d = forward.forward_skip(m, d.replace(qpos=qpos, qvel=qvel, act=act, time=time), sensors=first)
            d = sleep.freeze(m, d_prev, d)  # (identity without sleeping islands)
        k = _stage_rate(rot, h, row[4], d.qvel, plain=first)
        return (d, rate.at[i].set(k), acc.at[i].set(d.qacc), adot.at[i].set(d.act_dot)), None

    (d, rate, acc, adot), _ = jax.lax.scan(stage, (d, rate, acc, adot), jp.arange(4))
    b = jp.asarray(_RK4_B, h.dtype)
    d = d.replace(qpos=qpos0, qvel=qvel0, act=act0, time=time0)
    return _rk4_advance(m, d, _combine(b, adot), _combine(b, acc), _combine(b, rate), start), acc[0]


def _combine(w: jax.Array, x: jax.Array) -> jax.Array:
    """sum_j w[j] x[j] for w (4,) and x (4, n), as a sum of products (no dot: no matmul precision to set)."""
    return jp.sum(w.astype(x.dtype)[:, None] * x, axis=0) if x.shape[-1] else x[0]


# ---- divergence checks ------------------------------------------------------------------------------------


def _is_bad(x: jax.Array) -> jax.Array:
    """mju_isBad over a vector: any NaN or |x| > 1e10, () bool. Written as not all(|x| <= 1e10): a comparison with
    NaN is false, so NaN is bad as in mju_isBad (x != x || |x| > mjMAXVAL), in one compare and one reduction
    instead of two compares, an or and a reduction."""
    if x.size == 0:
        return jp.zeros((), bool)
    return ~jp.all(jp.abs(x) <= MAXVAL)


def _select_reset(m: Model, d: Data, bad: jax.Array, keep: Data | None = None) -> Data:
    """mj_resetData's state (make_data(m) in d's dtypes, warning counters kept) where `bad`, d elsewhere, field by
    field. Only the fields whose reset value is not zero (data.reset_values: qpos0, mocap poses, eq_active0,
    history, plastic) are built as arrays; the others select a constant of the field's shape and dtype (zeros; the
    contacts' ids -1): a splat constant in the program, no operation and no dtype conversion per field (a scalar
    was broadcast twice under vmap: one operation more per distinct shape). A field of `d` that is `keep`'s own
    array and not a STATE_FIELD is left as it is (see reset_where)."""
    fields, contact_fill = reset_values(m, float_dtype())

    def select(path, b, k=None):
        name = path[0].name
        if (b is k and name not in STATE_FIELDS) or name == "warning_number" or b.size == 0:
            return b
        if name == "contact":
            a = np.full(b.shape, contact_fill.get(path[1].name, 0), b.dtype)
        else:
            a = jp.asarray(fields[name], b.dtype) if name in fields else np.zeros(b.shape, b.dtype)
        return jp.where(bad, a, b)

    return jax.tree_util.tree_map_with_path(select, d, *(() if keep is None else (keep,)))


def reset_where(m: Model, d: Data, bad: jax.Array, warning: int, keep: Data | None = None) -> Data:
    """Count `warning` where `bad`, and (unless autoreset is disabled) reset d there, elementwise.

    With `keep` (this step's Data after its position and velocity stages, computed from a state that passed the
    checks) and `Config.qacc_reset` "state", the fields of `d` that are still `keep`'s own arrays (the same traced
    values: nothing after those stages rewrote them) and are not STATE_FIELDS are left as they are: poses,
    Jacobians, contacts, the mass matrix. The next step recomputes them from the reset state. This leaves most of
    Data out of the select (about 5% of a batched humanoid step on a GPU); with "all" every field is selected.
    """
    wn = count_warning(d.warning_number, warning, bad)
    if qacc_reset(m.config) == "all":
        keep = None
    if not (m.opt.disableflags & DisableBit.AUTORESET):
        d = _select_reset(m, d, bad, keep)
    return d.replace(warning_number=wn)


def check_pos_vel(m: Model, d: Data) -> Data:
    """mj_checkPos then mj_checkVel with one reset: a diverged qpos resets the environment (and then its qvel is
    zero, so BADQVEL is not counted too, as in MuJoCo); a diverged qvel alone resets it too."""
    # one elementwise test of mju_isBad over [qpos, qvel] (not |x| <= 1e10: NaN fails it), reduced over qpos and
    # over both: the environment is reset unless both pass (= bad_pos | bad_vel)
    ok = jp.abs(jp.concatenate([d.qpos, d.qvel])) <= MAXVAL
    ok_pos, ok_all = jp.all(ok[: m.nq]), jp.all(ok)
    bad_pos, bad = ~ok_pos, ~ok_all
    bad_vel = ok_pos & bad  # (qpos passed: bad is qvel's test)
    # both counters in one add (BADQPOS and BADQVEL are adjacent: one padded row)
    wn = count_warnings(d.warning_number, Warning.BADQPOS, (bad_pos, bad_vel))
    if not (m.opt.disableflags & DisableBit.AUTORESET):
        d = _select_reset(m, d, bad)
    return d.replace(warning_number=wn)


def check_pos(m: Model, d: Data) -> Data:
    """mj_checkPos: reset the environment if qpos diverged."""
    return reset_where(m, d, _is_bad(d.qpos), Warning.BADQPOS)


def check_vel(m: Model, d: Data) -> Data:
    """mj_checkVel: reset the environment if qvel diverged."""
    return reset_where(m, d, _is_bad(d.qvel), Warning.BADQVEL)


def bad_acc(m: Model, d: Data) -> jax.Array:
    """mj_checkAcc's condition: qacc diverged, () bool."""
    del m
    return _is_bad(d.qacc)


def _reset_forward(m: Model, like: Data) -> Data:
    """mj_resetData + mj_forward, with the dtypes of `like` (shapes/dtypes only are read from it)."""

    r = jax.tree.map(lambda a, b: jp.asarray(a, dtype=b.dtype), make_data(m), like)
    return forward.forward(m, r)


def _reset_forward_where(m: Model, like: Data, bad: jax.Array) -> Data:
    """`_reset_forward(m, like)` where `bad`; elsewhere the values are unspecified (zeros): select with `bad`.

    The forward pass of the reset state depends on the model only, so it is computed lazily: under `jit` it
    runs only when `bad` (lax.cond); under `vmap` (custom batching rule) it runs once for the whole batch, and
    only when some environment is bad (vmapped over the model's batched leaves when the model is batched).
    No gradient flows through the reset state (a reset is a discontinuity of the trajectory).
    """
    proto = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), like)

    def compute(mm: Model) -> Data:
        return _reset_forward(mm, proto)

    def skip(mm: Model) -> Data:
        del mm
        return jax.tree.map(lambda s: jp.zeros(s.shape, s.dtype), proto)

    @jax.custom_batching.custom_vmap
    def lazy(flag: jax.Array, mm: Model) -> Data:
        return jax.lax.cond(flag, compute, skip, mm)

    @lazy.def_vmap
    def _batched(axis_size: int, in_batched, flag: jax.Array, mm: Model):
        flag_batched, m_batched = in_batched
        anybad = jp.any(flag) if flag_batched else flag
        if any(jax.tree.leaves(m_batched)):
            axes = jax.tree.map(lambda b: 0 if b else None, m_batched)
            f_true, f_false = jax.vmap(compute, in_axes=(axes,)), jax.vmap(skip, in_axes=(axes,))
            out = jax.lax.cond(anybad, f_true, f_false, mm)
            return out, jax.tree.map(lambda _: True, out)
        out = jax.lax.cond(anybad, compute, skip, mm)
        return out, jax.tree.map(lambda _: False, out)

    return lazy(jax.lax.stop_gradient(bad), jax.tree.map(jax.lax.stop_gradient, m))


def check_acc(m: Model, d: Data) -> Data:
    """mj_checkAcc: if qacc diverged, count it and reset the environment, then run forward on the reset state.

    As in MuJoCo, the caller then integrates (mj_step/mj_step2): a bad environment is stepped once from the
    reset state. The warning counters are kept (and incremented) across the reset.
    """
    bad = bad_acc(m, d)
    wn = count_warning(d.warning_number, Warning.BADQACC, bad)
    if not (m.opt.disableflags & DisableBit.AUTORESET):
        r = _reset_forward_where(m, d, bad)
        d = jax.tree.map(lambda a, b: jp.where(bad, a, b), r, d)
    return d.replace(warning_number=wn)
