"""Actuation (mj_fwdActuation) and velocity-stage helpers (ten_velocity, actuator_velocity).

Supported: dyntype none/integrator/filter/filterexact/muscle, gaintype fixed/affine/muscle, biastype
none/affine/muscle, one control and one output per actuator. Other types (dcmotor, pid, so3, user, plugins)
and control delays raise at trace time.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import muscle
from mjx_lite.pipeline.passive import gravcomp_dof_mask
from mjx_lite.types import MINVAL, BiasType, Data, DisableBit, DynType, GainType, Model, TrnType, Warning

_DYN = (DynType.NONE, DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT, DynType.MUSCLE)
_GAIN = (GainType.FIXED, GainType.AFFINE, GainType.MUSCLE)
_BIAS = (BiasType.NONE, BiasType.AFFINE, BiasType.MUSCLE)


def _check(m: Model) -> None:
    for name, ok, enum in (
        ("actuator_dyntype", _DYN, DynType),
        ("actuator_gaintype", _GAIN, GainType),
        ("actuator_biastype", _BIAS, BiasType),
    ):
        bad = [int(v) for v in np.asarray(getattr(m, name)) if int(v) not in ok]
        if bad:
            raise NotImplementedError(f"mjx_lite actuation: unsupported {name} {enum(bad[0]).name.lower()}")
    if m.nu and (np.any(np.asarray(m.actuator_ctrlnum) != 1) or np.any(np.asarray(m.actuator_outnum) != 1)):
        raise NotImplementedError("mjx_lite actuation: actuators with several controls/outputs are not supported")
    if m.nu and np.any(np.asarray(m.actuator_historyadr) >= 0):
        raise NotImplementedError("mjx_lite actuation: actuator control history/delay is not supported")
    if m.nu and np.any(np.asarray(m.actuator_actnum) > 1):
        raise NotImplementedError("mjx_lite actuation: actuators with actdim > 1 are not supported")


def fwd_velocity_extras(m: Model, d: Data) -> Data:
    """ten_velocity = ten_J qvel (ntendon,); actuator_velocity = actuator_moment qvel (nu,) (0 if disabled)."""
    ten_vel = d.ten_J @ d.qvel if m.ntendon else d.ten_velocity
    if m.nu == 0:
        return d.replace(ten_velocity=ten_vel)
    if m.opt.disableflags & DisableBit.ACTUATION:
        act_vel = jp.zeros((m.nu,), d.qvel.dtype)
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


def actuator_disabled(m: Model) -> np.ndarray:
    """Static (nu,) bool: actuator group disabled by opt.disableactuator (mj_actuatorDisabled)."""
    grp = np.asarray(m.actuator_group)
    ok = (grp >= 0) & (grp <= 30)
    return ok & ((m.opt.disableactuator >> np.clip(grp, 0, 30)) & 1).astype(bool)


def next_activation(m: Model, d: Data, act: jax.Array, act_dot: jax.Array) -> jax.Array:
    """Activation after one step (nextActivation): Euler or exact filter integration, then actrange clamp.

    act, act_dot: (nu,) per actuator (last activation of each stateful actuator).
    """
    dyn = np.asarray(m.actuator_dyntype)
    h = m.opt.timestep

    def exact():
        tau = jp.maximum(MINVAL, m.actuator_dynprm[:, 0])
        return act + act_dot * tau * (1 - jp.exp(-h / tau))

    nxt = by_type(dyn, {DynType.FILTEREXACT: exact}, act + act_dot * h)
    lim = np.asarray(m.actuator_actlimited, bool)
    if not lim.any():
        return nxt
    clipped = jp.clip(nxt, m.actuator_actrange[:, 0], m.actuator_actrange[:, 1])
    return clipped if lim.all() else jp.where(jp.asarray(lim), clipped, nxt)


def actuation(m: Model, d: Data) -> Data:
    """Actuator forces (mj_fwdActuation): act_dot (na,), actuator_force (nu,), qfrc_actuator (nv,).

    Reads actuator_length/moment/velocity (transmission, fwd_velocity_extras) and qfrc_gravcomp (passive).
    """
    _check(m)
    dtype = d.qpos.dtype
    nu, nv = m.nu, m.nv
    flags = m.opt.disableflags
    if nu == 0 or flags & DisableBit.ACTUATION:
        z = jp.zeros((nv,), dtype)
        return d.replace(act_dot=jp.zeros_like(d.act_dot), actuator_force=jp.zeros((nu,), dtype), qfrc_actuator=z)

    # controls: clamped to ctrlrange; then if any is bad (NaN, inf or |x| > 1e10, mju_isBad) all are taken as zero
    # and BADCTRL is counted (d.ctrl itself is left as given), as MuJoCo
    ctrl = d.ctrl[np.asarray(m.actuator_ctrladr)]
    lim = np.asarray(m.actuator_ctrllimited, bool)
    if not flags & DisableBit.CLAMPCTRL and lim.any():
        ctrl = jp.where(jp.asarray(lim), jp.clip(ctrl, m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]), ctrl)
    bad = jp.any(~jp.isfinite(ctrl) | (jp.abs(ctrl) > 1e10))
    ctrl = jp.where(bad, 0.0, ctrl)
    warning_number = d.warning_number.at[Warning.BADCTRL].add(bad.astype(d.warning_number.dtype))

    # activation dynamics
    dyn = np.asarray(m.actuator_dyntype)
    actadr = np.asarray(m.actuator_actadr)
    actnum = np.asarray(m.actuator_actnum)
    stateful = actadr >= 0
    last = np.where(stateful, actadr + actnum - 1, 0)
    act = d.act[last] if m.na else jp.zeros((nu,), dtype)
    prm = m.actuator_dynprm
    adot = by_type(dyn, {
        DynType.INTEGRATOR: lambda: ctrl,
        (DynType.FILTER, DynType.FILTEREXACT): lambda: (ctrl - act) / jp.maximum(MINVAL, prm[:, 0]),
        DynType.MUSCLE: lambda: muscle.muscle_dynamics(ctrl, act, prm[:, :3]),
    }, jp.zeros((nu,), dtype))  # fmt: skip
    act_dot = d.act_dot
    if m.na:
        act_dot = jp.zeros((m.na,), dtype)
        idx = np.nonzero(stateful)[0]
        act_dot = act_dot.at[last[idx]].set(adot[idx])

    # gain and bias
    length, vel = d.actuator_length, d.actuator_velocity
    gt, bt = np.asarray(m.actuator_gaintype), np.asarray(m.actuator_biastype)
    gp, bp = m.actuator_gainprm, m.actuator_biasprm
    lr, acc0 = m.actuator_lengthrange, m.actuator_acc0
    gain = by_type(gt, {
        GainType.AFFINE: lambda: gp[:, 0] + gp[:, 1] * length + gp[:, 2] * vel,
        GainType.MUSCLE: lambda: muscle.muscle_gain(length, vel, lr, acc0, gp),
    }, gp[:, 0])  # fmt: skip
    bias = by_type(bt, {
        BiasType.AFFINE: lambda: bp[:, 0] + bp[:, 1] * length + bp[:, 2] * vel,
        BiasType.MUSCLE: lambda: muscle.muscle_bias(length, lr, acc0, bp),
    }, jp.zeros((nu,), dtype))  # fmt: skip
    early = np.asarray(m.actuator_actearly, bool) & stateful
    act_in = jp.where(jp.asarray(early), next_activation(m, d, act, adot), act) if early.any() else act
    inp = act_in if stateful.all() else jp.where(jp.asarray(stateful), act_in, ctrl) if stateful.any() else ctrl
    force = gain * inp + bias
    off = actuator_disabled(m)
    if off.any():
        force = jp.where(jp.asarray(off), 0.0, force)

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

    # actuator force clamp
    flim = np.asarray(m.actuator_forcelimited, bool)
    if flim.any():
        clipped = jp.clip(force, m.actuator_forcerange[:, 0], m.actuator_forcerange[:, 1])
        force = jp.where(jp.asarray(flim), clipped, force)

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
