"""Actuation (mj_fwdActuation), activation integration (mj_nextActivation) and velocity-stage helpers.

Supported: dyntype none/integrator/filter/filterexact/muscle/pid/dcmotor, gaintype fixed/affine/muscle/pid/dcmotor/
so3, biastype none/affine/muscle/dcmotor/so3; actuators with several controls (pid, dcmotor, so3: `actuator_ctrlnum`,
the control block at `actuator_ctrladr`); one force output each except orientation (so3) servos, which have 3
(`actuator_outnum`, at `actuator_outadr`: actuator_length/velocity/force and the moment rows are per output,
`_so3_force`). `mujoco.pid` plugin actuators: `plugin_pid`. User types raise at trace time.

Controls are read from `d.ctrl`, or for an actuator with a `delay` from its ring buffer in `d.history`
(`pipeline.history`). pid and dcmotor states live in `act` in MuJoCo's slot order (slew, integral, temperature,
bristle, current; `m.actuator_actslot` says which exist). Position servos (and pid) on a ball joint or a
rotational site-with-refsite transmission read their setpoint on the circle (the representative nearest the
actuator length), as MuJoCo 4.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.data import count_warning
from mjx_lite.pipeline import history, muscle, plugin_pid
from mjx_lite.pipeline.passive import gravcomp_dof_mask
from mjx_lite.types import MINVAL, BiasType, Data, DisableBit, DynType, GainType, Input, JointType, Model, TrnType
from mjx_lite.types import Warning as Warn

_DYN = (DynType.NONE, DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT, DynType.MUSCLE, DynType.PID,
        DynType.DCMOTOR)  # fmt: skip
_GAIN = (GainType.FIXED, GainType.AFFINE, GainType.MUSCLE, GainType.PID, GainType.DCMOTOR, GainType.SO3)
_BIAS = (BiasType.NONE, BiasType.AFFINE, BiasType.MUSCLE, BiasType.DCMOTOR, BiasType.SO3)
CHART_QUAT = 2  # actuator_ctrlspec of an so3 actuator commanded by a quaternion (4 controls; else expmap, 3)
# slot columns of Model.actuator_actslot (types.ACT_SLOTS)
SLEW, INTEGRAL, TEMPERATURE, BRISTLE, CURRENT = range(5)


def _check(m: Model) -> None:
    for name, ok, enum in (
        ("actuator_dyntype", _DYN, DynType),
        ("actuator_gaintype", _GAIN, GainType),
        ("actuator_biastype", _BIAS, BiasType),
    ):
        bad = [int(v) for v in np.asarray(getattr(m, name)) if int(v) not in ok]
        if bad:
            raise NotImplementedError(f"mjx_lite actuation: unsupported {name} {enum(bad[0]).name.lower()}")
    so3 = np.asarray(m.actuator_gaintype) == GainType.SO3
    if m.nactuator and np.any((np.asarray(m.actuator_outnum) != 1) & ~so3):
        raise NotImplementedError("mjx_lite actuation: several force outputs are supported for so3 actuators only")
    multi = (np.asarray(m.actuator_ctrlnum) > 1) & ~np.isin(m.actuator_gaintype,
                                                            (GainType.PID, GainType.DCMOTOR, GainType.SO3))
    if multi.any():
        raise NotImplementedError("mjx_lite actuation: several controls are supported for pid and dcmotor only")
    plain = ~np.isin(m.actuator_dyntype, (DynType.PID, DynType.DCMOTOR)) & ~so3 & (np.asarray(m.actuator_plugin) < 0)
    if m.nactuator and np.any((np.asarray(m.actuator_actnum) > 1) & plain):
        raise NotImplementedError("mjx_lite actuation: actuators with actdim > 1 are not supported")


def fwd_velocity_extras(m: Model, d: Data) -> Data:
    """ten_velocity = ten_J qvel (ntendon,); actuator_velocity = actuator_moment qvel (nout,) (0 if
    disabled)."""
    ten_vel = d.ten_J @ d.qvel if m.ntendon else d.ten_velocity
    if m.nactuator == 0:
        return d.replace(ten_velocity=ten_vel)
    if m.opt.disableflags & DisableBit.ACTUATION:
        act_vel = jp.zeros((m.nout,), d.qvel.dtype)
    else:
        act_vel = d.actuator_moment @ d.qvel
    return d.replace(ten_velocity=ten_vel, actuator_velocity=act_vel)


def by_type(types: np.ndarray, branches: dict, default) -> jax.Array:
    """Per-element value chosen by a static type code: `branches[t]()` where types == t, else `default`.

    Only the branches of the types present are traced (a model without muscles compiles no muscle code), and a
    branch that covers every element is returned without a select. types: (n,) host ints; values (n,).
    """
    out = default
    for t, fn in branches.items():
        sel = np.isin(types, t)
        if not sel.any():
            continue
        if sel.all():
            return fn()
        out = jp.where(jp.asarray(sel), fn(), out)
    return out


def per_actuator(m: Model, x: jax.Array) -> jax.Array:
    """A per-output array (nout, ...) read at each actuator's first output (nactuator, ...): the value of the
    single-output actuators (x itself when every actuator has one output)."""
    return x if m.nout == m.nactuator else x[np.asarray(m.actuator_outadr)]


def actuator_disabled(m: Model) -> np.ndarray:
    """Static (nactuator,) bool: actuator group disabled by opt.disableactuator (mj_actuatorDisabled)."""
    grp = np.asarray(m.actuator_group)
    ok = (grp >= 0) & (grp <= 30)
    return ok & ((m.opt.disableactuator >> np.clip(grp, 0, 30)) & 1).astype(bool)


# ---------------------------------------------------------------------------------------------------------
# static tables


def _slot_adr(m: Model, slot: int) -> tuple[np.ndarray, np.ndarray]:
    """(actuators that have `slot`, the act address of that slot for each) (static)."""
    off = np.asarray(m.actuator_actslot)[:, slot] if m.nactuator else np.zeros(0, int)
    ids = np.nonzero(off >= 0)[0]
    return ids, np.asarray(m.actuator_actadr)[ids] + off[ids]


def _input_index(m: Model) -> np.ndarray:
    """(nactuator, 4) static index into ctrl of each actuator's [pos, vel, ff, voltage] input (-1: absent).

    pid and dcmotor blocks are packed in that canonical order (actuator_ctrlspec bits); a single-input actuator's
    one control is reported in the pos column (where the generic force law reads it)."""
    out = np.full((m.nactuator, 4), -1, int)
    spec = np.asarray(m.actuator_ctrlspec)
    adr, num = np.asarray(m.actuator_ctrladr), np.asarray(m.actuator_ctrlnum)
    gt = np.asarray(m.actuator_gaintype)
    for i in range(m.nactuator):
        if gt[i] in (GainType.PID, GainType.DCMOTOR):
            if spec[i] == Input.NONE:
                continue
            k = 0
            for c, bit in enumerate((Input.POS, Input.VEL, Input.FF, Input.VOLTAGE)):
                if spec[i] & bit:
                    out[i, c] = adr[i] + k
                    k += 1
        elif num[i] > 0:
            out[i, 0] = adr[i]
    return out


def _take(x: jax.Array, idx: np.ndarray) -> jax.Array:
    """x[idx] with 0 where idx < 0 (static idx)."""
    if x.shape[0] == 0:
        return jp.zeros(idx.shape, x.dtype)
    v = x[np.maximum(idx, 0)]
    return jp.where(jp.asarray(idx >= 0), v, 0.0) if np.any(idx < 0) else v


def wrap_period(m: Model) -> jax.Array | None:
    """(nactuator,) period of the rotational transmission of wrap-eligible servos (0 otherwise), None if no
    actuator can wrap (static check). Eligible: fixed gain, affine bias, gainprm[0] == -biasprm[1] and dyntype
    none or integrator (position and intvelocity servos), or gaintype pid; on a ball joint (joint/jointinparent:
    2 pi |gear[:3]|) or a site transmission with a refsite and purely rotational gear (2 pi |gear[3:]|)."""
    trn, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    isjnt = np.isin(trn, (TrnType.JOINT, TrnType.JOINTINPARENT))
    jt = np.asarray(m.jnt_type)[np.where(isjnt, trnid[:, 0], 0)] if m.njnt else np.full(m.nactuator, -1)
    ball = isjnt & (jt == JointType.BALL)
    refsite = (trn == TrnType.SITE) & (trnid[:, 1] >= 0)
    gt, bt, dt = np.asarray(m.actuator_gaintype), np.asarray(m.actuator_biastype), np.asarray(m.actuator_dyntype)
    servo_type = (gt == GainType.FIXED) & (bt == BiasType.AFFINE) & np.isin(dt, (DynType.NONE, DynType.INTEGRATOR))
    cand = (ball | refsite) & (servo_type | (gt == GainType.PID))
    if not cand.any():
        return None
    g = per_actuator(m, m.actuator_gear)
    servo = jp.asarray(gt == GainType.PID) | (
        jp.asarray(servo_type) & (m.actuator_gainprm[:, 0] == -m.actuator_biasprm[:, 1])
    )
    rot_only = jp.all(g[:, :3] == 0, axis=-1)
    norm3 = lambda v: jp.sqrt(jp.sum(v * v, -1))  # noqa: E731 - gear norms, never differentiated at 0 in practice
    period = jp.where(jp.asarray(ball), 2 * jp.pi * norm3(g[:, :3]),
                      jp.where(jp.asarray(refsite) & rot_only, 2 * jp.pi * norm3(g[:, 3:]), 0.0))  # fmt: skip
    return jp.where(jp.asarray(cand) & servo, period, 0.0)


def wrap_setpoint(u: jax.Array, length: jax.Array, period: jax.Array) -> jax.Array:
    """The representative of setpoint u nearest to length on a circle of `period` (u itself where period <= 0)."""
    p = jp.where(period > 0, period, 1.0)
    return jp.where(period > 0, u - p * jp.round((u - length) / p), u)


def _stribeck(vel, prm):
    """LuGre's Stribeck curve g(v) = F_C + (F_S - F_C) exp(-(v / v_S)^2); prm: biasprm (n, 10)."""
    r = vel / jp.maximum(MINVAL, prm[:, 5])
    return prm[:, 3] + (prm[:, 4] - prm[:, 3]) * jp.exp(-r * r)


# ---------------------------------------------------------------------------------------------------------
# activation integration


def next_activation(m: Model, d: Data, act: jax.Array, act_dot: jax.Array) -> jax.Array:
    """Activation of each actuator's last slot after one step (mj_nextActivation), for actearly.

    act, act_dot: (nactuator,) per actuator (its last activation slot)."""
    dyn = np.asarray(m.actuator_dyntype)
    h = m.opt.timestep

    def exact():
        tau = jp.maximum(MINVAL, m.actuator_dynprm[:, 0])
        return act + act_dot * tau * (1 - jp.exp(-h / tau))

    nxt = by_type(dyn, {(DynType.FILTEREXACT, DynType.DCMOTOR): exact}, act + act_dot * h)
    lim = np.asarray(m.actuator_actlimited, bool) & (dyn != DynType.DCMOTOR)
    if not lim.any():
        return nxt
    clipped = jp.clip(nxt, m.actuator_actrange[:, 0], m.actuator_actrange[:, 1])
    return clipped if lim.all() else jp.where(jp.asarray(lim), clipped, nxt)


def dcmotor_state(m: Model) -> bool:
    """Whether the model has a dcmotor with activation states (static): MuJoCo then advances its states with the
    actuator velocity at the step's qvel (`advance_act`), also after RK4's stages (see `step`)."""
    dyn, num = np.asarray(m.actuator_dyntype), np.asarray(m.actuator_actnum)
    return bool(np.any((dyn == DynType.DCMOTOR) & (num > 0)))


def advance_act(m: Model, d: Data, act: jax.Array, act_dot: jax.Array) -> jax.Array:
    """MuJoCo's per-slot rules of mj_nextActivation and mj_advance that the generic Euler / filterexact update
    (`integrate.next_act`, giving `act`) lacks: dcmotor slots from d.act (current: exact filter; LuGre bristle:
    exact zero-order-hold solution; integral: Euler clamped to +-Imax; others Euler; never actrange-clamped), and
    integrator servos on a rotational transmission re-anchored to the representative nearest the length.

    act: (na,) after the generic update; act_dot: (na,) the step's activation derivatives. Returns (na,)."""
    if m.na == 0:
        return act
    h = m.opt.timestep
    dyn = np.asarray(m.actuator_dyntype)
    off = actuator_disabled(m)
    dc = np.nonzero(dyn == DynType.DCMOTOR)[0]
    if len(dc):
        adr0, num = np.asarray(m.actuator_actadr)[dc], np.asarray(m.actuator_actnum)[dc]
        idx = np.concatenate([a + np.arange(n) for a, n in zip(adr0, num)]).astype(int)
        owner = np.concatenate([np.full(n, i) for i, n in zip(dc, num)]).astype(int)
        adot = jp.where(jp.asarray(off[owner]), 0.0, act_dot[idx])
        act = act.at[idx].set(d.act[idx] + adot * h)  # Euler for slew and temperature (and the default)
        ids, adr = _slot_adr(m, CURRENT)
        if len(ids):
            te = jp.maximum(MINVAL, m.actuator_dynprm[ids, 0])
            a = jp.where(jp.asarray(off[ids]), 0.0, act_dot[adr])
            act = act.at[adr].set(d.act[adr] + a * te * (1 - jp.exp(-h / te)))
        ids, adr = _slot_adr(m, BRISTLE)
        if len(ids):
            vel = d.actuator_moment[np.asarray(m.actuator_outadr)[ids]] @ d.qvel  # at the step's qvel (RK4: not the
            # last stage's)
            g = _stribeck(vel, m.actuator_biasprm[ids])
            rate = -m.actuator_dynprm[ids, 5] * jp.abs(vel) / jp.maximum(MINVAL, g)
            e = jp.exp(rate * h)
            small = jp.abs(rate) <= MINVAL
            integral = jp.where(small, h, (e - 1) / jp.where(small, 1.0, rate))
            z = e * d.act[adr] + integral * vel
            act = act.at[adr].set(z)
        ids, adr = _slot_adr(m, INTEGRAL)
        ids_dc = np.isin(ids, dc)
        if ids_dc.any():
            ids, adr = ids[ids_dc], adr[ids_dc]
            imax = m.actuator_dynprm[ids, 8]
            z = act[adr]
            act = act.at[adr].set(jp.where(imax > 0, jp.clip(z, -imax, imax), z))
    period = wrap_period(m)
    integ = np.nonzero(dyn == DynType.INTEGRATOR)[0]
    if period is not None and len(integ):
        last = np.asarray(m.actuator_actadr)[integ] + np.asarray(m.actuator_actnum)[integ] - 1
        wrapped = wrap_setpoint(act[last], d.actuator_length[np.asarray(m.actuator_outadr)[integ]], period[integ])
        act = act.at[last].set(wrapped)
    so3 = np.nonzero((dyn == DynType.INTEGRATOR) & (np.asarray(m.actuator_gaintype) == GainType.SO3))[0]
    if len(so3):  # so3 setpoints (rotation vectors) re-anchored to the representative of angle <= pi
        idx = np.asarray(m.actuator_actadr)[so3][:, None] + np.arange(3)
        a = act[idx]
        angle = mjm.safe_norm(a, keepdims=True)
        over = angle > jp.pi
        safe = jp.where(over, angle, 1.0)
        scale = (safe - 2 * jp.pi * jp.round(safe / (2 * jp.pi))) / safe
        act = act.at[idx].set(jp.where(over, a * scale, a))
    return act


def dcmotor_force_vel(m: Model, d: Data) -> tuple[np.ndarray, jax.Array]:
    """(dcmotor ids, d force / d actuator_velocity of each) as MuJoCo's implicit integrators linearise them
    (mjd_actuator_vel): back-EMF -K^2/R (no current state); the controller's K (dV/dw - K) s / R with
    s = 1 - exp(-h/te) (current state, actearly) or K dV/dw / R (none), dV/dw = -kd R/K + K for controller
    signatures (0 while the controller's voltage is held at Vmax); -sigma1 with LuGre friction; 0 where the force
    is clamped or the actuator disabled. R is the resistance at the motor's temperature; the LuGre rate's velocity
    dependence is ignored."""
    dc = np.nonzero(np.asarray(m.actuator_dyntype) == DynType.DCMOTOR)[0]
    if not len(dc):
        return dc, jp.zeros((0,), d.qvel.dtype)
    g, p = m.actuator_gainprm[dc], m.actuator_dynprm[dc]
    r, k, te = jp.maximum(MINVAL, g[:, 0]), g[:, 1], p[:, 0]
    ids, adr = _slot_adr(m, TEMPERATURE)
    if len(ids):  # the resistance at the motor's temperature
        pos = np.searchsorted(dc, ids)
        scale = 1 + m.actuator_gainprm[ids, 2] * (d.act[adr] + m.actuator_dynprm[ids, 4] - m.actuator_gainprm[ids, 3])
        r = r * jp.ones_like(r).at[pos].set(scale)
    spec = np.asarray(m.actuator_ctrlspec)[dc]
    ctl = jp.asarray((spec & (Input.POS | Input.VEL | Input.FF) != 0) & (spec != Input.NONE))
    dvdw = jp.where(ctl, -g[:, 6] * r / jp.where(ctl, k, 1.0) + k, 0.0)
    if np.any(spec & (Input.POS | Input.VEL | Input.FF)):  # a voltage held at Vmax does not change with velocity
        u4, x_int, _, _, _ = _controls(m, d)
        o = np.asarray(m.actuator_outadr)[dc]
        volt = _dcmotor_voltage(m, dc, u4[dc], d.actuator_length[o], d.actuator_velocity[o], x_int[dc], clamp=False)
        dvdw = jp.where((g[:, 7] > 0) & (jp.abs(volt) > g[:, 7]), 0.0, dvdw)
    s = 1 - jp.exp(-m.opt.timestep / jp.where(te > 0, te, 1.0))
    out = jp.where(te <= 0, -k * k / r, 0.0)
    out = out + jp.where(te > 0, k * (dvdw - k) * s / r, k * dvdw / r)
    out = out - jp.where(p[:, 6] > 0, p[:, 6], 0.0)
    lim = np.asarray(m.actuator_forcelimited, bool)[dc]
    if lim.any():
        f, rng = d.actuator_force[np.asarray(m.actuator_outadr)[dc]], m.actuator_forcerange[dc]
        out = jp.where(jp.asarray(lim) & ((f <= rng[:, 0]) | (f >= rng[:, 1])), 0.0, out)
    off = actuator_disabled(m)[dc]
    return dc, jp.where(jp.asarray(off), 0.0, out) if off.any() else out


# ---------------------------------------------------------------------------------------------------------
# forces


def _dcmotor_voltage(m: Model, ids: np.ndarray, u4: jax.Array, length, vel, x_i, clamp: bool = True) -> jax.Array:
    """Terminal voltage of dcmotors `ids`: the on-board torque-space PID (for signatures with pos/vel/ff) as a
    current-controlled drive V = R/K tau + K v, clamped to Vmax if set, plus the raw voltage input."""
    spec = np.asarray(m.actuator_ctrlspec)[ids]
    g = m.actuator_gainprm[ids]
    ctl = jp.asarray((spec & (Input.POS | Input.VEL | Input.FF)) != 0) & jp.asarray(spec != Input.NONE)
    tau = g[:, 4] * (u4[:, 0] - length) + g[:, 6] * (u4[:, 1] - vel) + g[:, 5] * x_i + u4[:, 2]
    v = g[:, 0] / jp.where(ctl, g[:, 1], 1.0) * tau + g[:, 1] * vel
    vmax = g[:, 7]
    if clamp:
        v = jp.where(vmax > 0, jp.clip(v, -vmax, vmax), v)
    else:  # the controller's voltage before the Vmax clamp (its voltage input aside)
        return jp.where(ctl, v, 0.0)
    return jp.where(ctl, v, 0.0) + u4[:, 3]


def _controls(m: Model, d: Data):
    """The inputs of the force law: (u4 (nactuator, 4) [pos, vel, ff, voltage] inputs (single-input actuators:
    column 0) after delays, ctrlrange clamps and slew limits; x_int (nactuator,) integral states (0 without);
    act_dot (na,) with the slew and integral rates; bad: any control NaN/inf/huge (all controls taken as 0);
    ctrl (nu,) the controls after delays, clamps and the bad-control rule)."""
    dtype = d.qpos.dtype
    na_, flags = m.nactuator, m.opt.disableflags
    # controls (nu,): delayed ones from the history buffer; clamped to ctrlrange; then if any is bad (NaN, inf or
    # |x| > 1e10, mju_isBad) all are taken as zero and BADCTRL is counted (d.ctrl itself is left as given)
    ctrl = history.delayed_ctrl(m, d) if m.nu else d.ctrl
    lim = np.asarray(m.actuator_ctrllimited, bool)
    if not flags & DisableBit.CLAMPCTRL and lim.any():
        ctrl = jp.where(jp.asarray(lim), jp.clip(ctrl, m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]), ctrl)
    bad = jp.any(~jp.isfinite(ctrl) | (jp.abs(ctrl) > 1e10))
    ctrl = jp.where(bad, 0.0, ctrl)

    gt = np.asarray(m.actuator_gaintype)
    prm, length, h = m.actuator_dynprm, per_actuator(m, d.actuator_length), m.opt.timestep
    uidx = _input_index(m)
    if np.array_equal(uidx[:, 0], np.arange(na_)) and not np.any(uidx[:, 1:] >= 0):
        u4 = ctrl[:, None]  # one control per actuator, in order: only column 0 is read
    else:
        u4 = _take(ctrl, uidx.reshape(-1)).reshape(na_, 4)  # [pos, vel, ff, voltage] (single input: column 0)
    period = wrap_period(m)
    act_dot = jp.zeros((m.na,), dtype)

    # pid and dcmotor controller states: slew-rate limited first input (its effective value is what the force law
    # reads), integral of the position error with anti-windup
    ids, adr = _slot_adr(m, SLEW)
    if len(ids):
        pidm = jp.asarray(gt[ids] == GainType.PID)
        first = np.argmax(uidx[ids] >= 0, axis=1)  # dcmotor: the first input of the block
        col = np.where(gt[ids] == GainType.PID, 0, first)
        u = u4[ids, col]
        prev = d.act[adr]
        if period is not None:
            u = wrap_setpoint(u, prev, period[ids])
        rate = jp.where(pidm, prm[ids, 1], prm[ids, 7]) * h
        eff = jp.clip(u, prev - rate, prev + rate)
        act_dot = act_dot.at[adr].set((eff - prev) / h)
        u4 = u4.at[ids, col].set(eff)
    ids, adr = _slot_adr(m, INTEGRAL)
    x_int = jp.zeros((na_,), dtype)
    if len(ids):
        pidm = jp.asarray(gt[ids] == GainType.PID)
        err = u4[ids, 0] - length[ids]
        if period is not None:
            p = period[ids]
            err = jp.where(p > 0, err - jp.where(p > 0, p, 1.0) * jp.round(err / jp.where(p > 0, p, 1.0)), err)
        imax = jp.where(pidm, prm[ids, 0], prm[ids, 8])
        z = d.act[adr]
        err = jp.where(imax > 0, jp.where(z >= imax, jp.minimum(err, 0.0), jp.where(z <= -imax, jp.maximum(err, 0.0),
                                                                                     err)), err)  # fmt: skip
        act_dot = act_dot.at[adr].set(err)
        x_int = x_int.at[ids].set(z)

    return u4, x_int, act_dot, bad, ctrl


def _so3_force(m: Model, d: Data, ids: np.ndarray, ctrl: jax.Array, act_dot: jax.Array) -> jax.Array:
    """Forces (n, 3) of the orientation servos `ids` (static), before the force clamp: kp log(q^-1 q_target) +
    biasprm[0] + biasprm[2] velocity per output, q = exp(actuator_length) the current relative orientation;
    the target is the normalised quaternion control block (quat chart; zero: the identity) or exp of the expmap
    block: the controls, or for dyntype integrator the act block (its next value with actearly). ctrl: (nu,)
    the clamped controls; act_dot: (na,)."""
    dtype = d.qpos.dtype
    spec = np.asarray(m.actuator_ctrlspec)[ids]
    uadr, oadr = np.asarray(m.actuator_ctrladr)[ids], np.asarray(m.actuator_outadr)[ids]
    dyn = np.asarray(m.actuator_dyntype)[ids]
    target = jp.zeros((len(ids), 4), dtype)
    quat = np.nonzero(spec == CHART_QUAT)[0]
    if len(quat):
        target = target.at[quat].set(mjm.quat_normalize(ctrl[uadr[quat][:, None] + np.arange(4)]))
    expc = np.nonzero((spec != CHART_QUAT) & (dyn == DynType.NONE))[0]
    if len(expc):
        target = target.at[expc].set(mjm.rotvec_to_quat(ctrl[uadr[expc][:, None] + np.arange(3)]))
    integ = np.nonzero((spec != CHART_QUAT) & (dyn == DynType.INTEGRATOR))[0]
    if len(integ):
        a_ids = ids[integ]
        slots = np.asarray(m.actuator_actadr)[a_ids][:, None] + np.arange(3)
        u = d.act[slots]
        early = np.asarray(m.actuator_actearly, bool)[a_ids]
        if early.any():  # mj_nextActivation per slot: Euler, then the actrange clamp
            nxt = u + act_dot[slots] * m.opt.timestep
            lim = np.asarray(m.actuator_actlimited, bool)[a_ids]
            rng = m.actuator_actrange[a_ids]
            nxt = jp.where(jp.asarray(lim)[:, None], jp.clip(nxt, rng[:, :1], rng[:, 1:]), nxt)
            u = jp.where(jp.asarray(early)[:, None], nxt, u)
        target = target.at[integ].set(mjm.rotvec_to_quat(u))
    out = oadr[:, None] + np.arange(3)
    current = mjm.rotvec_to_quat(d.actuator_length[out])
    err = mjm.quat_to_rotvec(mjm.quat_mul(mjm.quat_conj(current), target))
    kp, prm = m.actuator_gainprm[ids, :1], m.actuator_biasprm[ids]
    return kp * err + prm[:, :1] + prm[:, 2:3] * d.actuator_velocity[out]


def actuation(m: Model, d: Data) -> Data:
    """Actuator forces (mj_fwdActuation): act_dot (na,), actuator_force (nactuator,), qfrc_actuator (nv,).

    Reads actuator_length/moment/velocity (transmission, fwd_velocity_extras), qfrc_gravcomp (passive) and, for
    delayed actuators, d.history.
    """
    _check(m)
    dtype = d.qpos.dtype
    na_, nv = m.nactuator, m.nv
    flags = m.opt.disableflags
    if na_ == 0 or flags & DisableBit.ACTUATION:
        z = jp.zeros((nv,), dtype)
        return d.replace(act_dot=jp.zeros_like(d.act_dot), actuator_force=jp.zeros((m.nout,), dtype),
                         qfrc_actuator=z)

    u4, x_int, act_dot, bad, ctrl = _controls(m, d)
    warning_number = count_warning(d.warning_number, Warn.BADCTRL, bad)
    dyn = np.asarray(m.actuator_dyntype)
    gt, bt = np.asarray(m.actuator_gaintype), np.asarray(m.actuator_biastype)
    actadr, actnum = np.asarray(m.actuator_actadr), np.asarray(m.actuator_actnum)
    stateful = actnum > 0
    last = np.where(stateful, actadr + actnum - 1, 0)
    act = d.act[last] if m.na else jp.zeros((na_,), dtype)
    prm, gp, bp = m.actuator_dynprm, m.actuator_gainprm, m.actuator_biasprm
    length, vel = per_actuator(m, d.actuator_length), per_actuator(m, d.actuator_velocity)
    so3 = np.nonzero(gt == GainType.SO3)[0]
    period = wrap_period(m)

    # dcmotor electrical, thermal and friction states
    dc = np.nonzero(dyn == DynType.DCMOTOR)[0]
    r_eff = gp[:, 0]
    if len(dc):
        volt = _dcmotor_voltage(m, dc, u4[dc], length[dc], vel[dc], x_int[dc])
        ids, adr = _slot_adr(m, TEMPERATURE)
        if len(ids):
            temp = d.act[adr]
            scale = 1 + gp[ids, 2] * (temp + prm[ids, 4] - gp[ids, 3])
            r_eff = r_eff * jp.ones_like(r_eff).at[ids].set(scale)  # (scatter-multiply has no gradient)
        rd, kd, te = r_eff[dc], gp[dc, 1], prm[dc, 0]
        ids_c, adr_c = _slot_adr(m, CURRENT)
        cur_state = jp.zeros((na_,), dtype).at[ids_c].set(d.act[adr_c]) if len(ids_c) else jp.zeros((na_,), dtype)
        if len(ids):
            pos = np.searchsorted(dc, ids)
            current = jp.where(te[pos] > 0, cur_state[ids], (volt[pos] - kd[pos] * vel[ids]) / rd[pos])
            dT = (rd[pos] * current * current - d.act[adr] / prm[ids, 2]) / prm[ids, 3]  # noqa: N806
            act_dot = act_dot.at[adr].set(dT)
        ids, adr = _slot_adr(m, BRISTLE)
        if len(ids):
            g = _stribeck(vel[ids], bp[ids])
            rate = -prm[ids, 5] * jp.abs(vel[ids]) / jp.maximum(MINVAL, g)
            act_dot = act_dot.at[adr].set(rate * d.act[adr] + vel[ids])
        if len(ids_c):
            pos = np.searchsorted(dc, ids_c)
            idot = (volt[pos] / rd[pos] - kd[pos] / rd[pos] * vel[ids_c] - d.act[adr_c]) / prm[ids_c, 0]
            dimax = prm[ids_c, 1]
            act_dot = act_dot.at[adr_c].set(jp.where(dimax > 0, jp.clip(idot, -dimax, dimax), idot))
        # the force law's input: the voltage (controller signatures), or the raw voltage control
        u4 = u4.at[dc, 0].set(volt)

    # plain activation dynamics (one state, the last slot)
    u0 = u4[:, 0]
    adot = by_type(dyn, {
        DynType.INTEGRATOR: lambda: u0,
        (DynType.FILTER, DynType.FILTEREXACT): lambda: (u0 - act) / jp.maximum(MINVAL, prm[:, 0]),
        DynType.MUSCLE: lambda: muscle.muscle_dynamics(u0, act, prm[:, :3]),
    }, jp.zeros((na_,), dtype))  # fmt: skip
    plain_dyn = (DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT, DynType.MUSCLE)
    plain = np.nonzero(stateful & (gt != GainType.SO3) & np.isin(dyn, plain_dyn))[0]
    if len(plain):
        act_dot = act_dot.at[last[plain]].set(adot[plain])
    integ3 = so3[dyn[so3] == DynType.INTEGRATOR]
    if len(integ3):  # so3 integrators: one state per control (the expmap setpoint's rate)
        slots = (actadr[integ3][:, None] + np.arange(3)).reshape(-1)
        act_dot = act_dot.at[slots].set(ctrl[(np.asarray(m.actuator_ctrladr)[integ3][:, None] + np.arange(3))
                                             .reshape(-1)])
    if not m.na:
        act_dot = d.act_dot

    # gain and bias
    lr, acc0 = per_actuator(m, m.actuator_lengthrange), per_actuator(m, m.actuator_acc0)
    gain = by_type(gt, {
        GainType.AFFINE: lambda: gp[:, 0] + gp[:, 1] * length + gp[:, 2] * vel,
        GainType.MUSCLE: lambda: muscle.muscle_gain(length, vel, lr, acc0, gp),
        GainType.PID: lambda: jp.zeros((na_,), dtype),
        GainType.DCMOTOR: lambda: jp.where(prm[:, 0] > 0, gp[:, 1], gp[:, 1] / jp.maximum(MINVAL, r_eff)),
    }, gp[:, 0])  # fmt: skip
    bias = by_type(bt, {
        BiasType.AFFINE: lambda: bp[:, 0] + bp[:, 1] * length + bp[:, 2] * vel,
        BiasType.MUSCLE: lambda: muscle.muscle_bias(length, lr, acc0, bp),
        BiasType.DCMOTOR: lambda: jp.where(prm[:, 0] <= 0, -gain * gp[:, 1] * vel, 0.0),
    }, jp.zeros((na_,), dtype))  # fmt: skip

    # the input of the force law: the activation (its next value with actearly) or the control
    act_dot_last = act_dot[last] if m.na else jp.zeros((na_,), dtype)
    early = np.asarray(m.actuator_actearly, bool) & stateful
    act_in = jp.where(jp.asarray(early), next_activation(m, d, act, act_dot_last), act) if early.any() else act
    use_act = stateful & (gt != GainType.PID)
    if len(dc):  # a dcmotor without a current state reads its (voltage) input even if it has other states
        use_act = use_act & ~((gt == GainType.DCMOTOR) & (np.asarray(m.actuator_actslot)[:, CURRENT] < 0))
    inp = jp.where(jp.asarray(use_act), act_in, u0) if use_act.any() else u0
    if period is not None:
        inp = wrap_setpoint(inp, length, jp.where(jp.asarray(gt != GainType.PID), period, 0.0))
    force = gain * inp + bias
    pid = np.nonzero(gt == GainType.PID)[0]
    if len(pid):  # kp (qref - l) + kv (vref - v) + ff [+ ki z]: the input side here, the state side in the bias
        qref = u4[pid, 0]
        if period is not None:
            qref = wrap_setpoint(qref, length[pid], period[pid])
        f = -bp[pid, 1] * qref - bp[pid, 2] * u4[pid, 1] + u4[pid, 2] + bias[pid]
        ids, adr = _slot_adr(m, INTEGRAL)
        withz = np.isin(pid, ids)
        if withz.any():
            z = jp.where(jp.asarray(early[pid]), act_in[pid], act[pid])
            f = f + jp.where(jp.asarray(withz) & (gp[pid, 0] > 0), gp[pid, 0] * z, 0.0)
        force = force.at[pid].set(f)
    off = actuator_disabled(m)
    if off.any():
        force = jp.where(jp.asarray(off), 0.0, force)
    if plugin_pid.has_pid(m):  # the plugin actuators' states and forces (also in disabled groups, as MuJoCo)
        nxt = next_activation(m, d, act, act_dot[last]) if m.na else jp.zeros((na_,), dtype)
        act_dot, force = plugin_pid.pid(m, d, act_dot, force, nxt)

    # tendon-level actuator force limits: scale the forces of actuators on a limited tendon
    trntype = np.asarray(m.actuator_trntype)
    trnid = np.asarray(m.actuator_trnid)
    onten = trntype == TrnType.TENDON
    if m.ntendon and onten.any():
        tid = np.where(onten, trnid[:, 0], 0)
        tlim = onten & np.asarray(m.tendon_actfrclimited, bool)[tid]
        if tlim.any():
            tot = jax.ops.segment_sum(jp.where(jp.asarray(tlim), force, 0.0), tid, num_segments=m.ntendon)[tid]
            lo, hi = m.tendon_actfrcrange[tid, 0], m.tendon_actfrcrange[tid, 1]
            stot = jp.where(tot == 0, 1.0, tot)
            scale = jp.where(tot < lo, lo / stot, jp.where(tot > hi, hi / stot, 1.0))
            force = jp.where(jp.asarray(tlim) & (tot != 0), force * scale, force)

    # actuator force clamp (so3: on the norm, below)
    flim = np.asarray(m.actuator_forcelimited, bool) & (gt != GainType.SO3)
    if flim.any():
        clipped = jp.clip(force, m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1])
        force = jp.where(jp.asarray(flim), clipped, force)

    # dcmotor mechanical forces (after the clamp: not subject to current limits): cogging, LuGre friction
    dcon = dc[~off[dc]] if len(dc) else dc
    if len(dcon):
        cog = bp[dcon, 0] * jp.sin(bp[dcon, 1] * length[dcon] + bp[dcon, 2])
        force = force.at[dcon].add(jp.where(bp[dcon, 0] != 0, cog, 0.0))
        ids, adr = _slot_adr(m, BRISTLE)
        keep = np.isin(ids, dcon)
        if keep.any():
            ids, adr = ids[keep], adr[keep]
            force = force.at[ids].add(-(prm[ids, 5] * d.act[adr] + prm[ids, 6] * act_dot[adr]))

    if m.nout != na_ or len(so3):  # per-output forces: single-output actuators at outadr, so3 blocks of 3
        outadr = np.asarray(m.actuator_outadr)
        single = np.nonzero(gt != GainType.SO3)[0]
        force = jp.zeros((m.nout,), dtype).at[outadr[single]].set(force[single])
        if len(so3):
            f3 = _so3_force(m, d, so3, ctrl, act_dot)
            lim = np.asarray(m.actuator_forcelimited, bool)[so3]
            if lim.any():  # the norm clamped to forcerange[1], the direction kept
                hi = m.actuator_forcerange[so3, 1:]
                nrm = mjm.safe_norm(f3, keepdims=True)
                scale = jp.where(nrm > hi, hi / jp.where(nrm > hi, nrm, 1.0), 1.0)
                f3 = jp.where(jp.asarray(lim)[:, None], f3 * scale, f3)
            if off[so3].any():
                f3 = jp.where(jp.asarray(off[so3])[:, None], 0.0, f3)
            force = force.at[(outadr[so3][:, None] + np.arange(3)).reshape(-1)].set(f3.reshape(-1))
    qfrc = force @ d.actuator_moment

    # gravity compensation (qfrc_gravcomp, from `passive`) routed to actuators
    actgc = gravcomp_dof_mask(m, True)
    if actgc.any() and not flags & DisableBit.GRAVITY:
        qfrc = qfrc + d.qfrc_gravcomp * jp.asarray(actgc, dtype)

    # joint-level actuator force limits (first dof of each joint, as MuJoCo's clampVec)
    jlim = np.nonzero(np.asarray(m.jnt_actfrclimited, bool))[0]
    if len(jlim):
        cols = np.asarray(m.jnt_dofadr)[jlim]
        qfrc = qfrc.at[cols].set(jp.clip(qfrc[cols], m.jnt_actfrcrange[jlim, 0], m.jnt_actfrcrange[jlim, 1]))

    return d.replace(act_dot=act_dot, actuator_force=force, qfrc_actuator=qfrc, warning_number=warning_number)
