"""MuJoCo's `mujoco.pid` actuator plugin (MuJoCo 4.0's plugin/actuator/pid.cc), built in.

An actuator `<plugin plugin="mujoco.pid">` (or an instance of it) is a PID servo on its transmission:

    force = kp e + kd de/dt + ki I,   e = setpoint - actuator_length,   de/dt = setpoint_dot - actuator_velocity

The setpoint is the actuator's control (clamped to ctrlrange where ctrllimited, whatever the clampctrl flag; read
from d.ctrl itself: no delay buffer, no bad-control rule), or for an actuator with activation dynamics (dyntype
filter, filterexact, integrator) its last act slot (the next one with actearly), whose act_dot is then
setpoint_dot (0 otherwise). With `slewmax` the setpoint moves at most slewmax * timestep from the previous one (kept
in an act slot; only once d.time > 0). With ki != 0 the error integral I is an act slot advanced by I + e h,
clamped to +-imax / ki with `imax`. Its states come first in the actuator's act block (integral, slew, then the
dyntype's state: `Model.actuator_pluginslot`); they advance through act_dot = (new - old) / h and the integrator's
ordinary activation update, as in MuJoCo. The force is set after the built-in actuators' (even for a disabled
actuator group, as MuJoCo's plugin does) and before the tendon and actuator force limits.

Parameters are `Model.actuator_pluginprm` (traced: kp, ki, kd, imax / ki, slewmax), so they can be batched and
differentiated; which states exist is static. MuJoCo's implicit integrators do not linearise plugin forces (its
TODO: actuator plugins give no velocity derivative), and neither do ours (`derivative.smooth_vel_force`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import Data, DynType, Model

__all__ = ["has_pid", "pid"]


def has_pid(m: Model) -> bool:
    """Whether `m` has `mujoco.pid` plugin actuators (static; every actuator plugin mjx_lite builds in is one)."""
    return bool(m.nactuator) and bool(np.any(np.asarray(m.actuator_plugin) >= 0))


def _setpoint(m: Model, d: Data, ids: np.ndarray, next_act: jax.Array, early: bool) -> jax.Array:
    """The setpoints (n,) of pid actuators `ids` before the slew limit (MuJoCo's GetCtrl): clamped controls, or the
    last act slot of actuators with dynamics (with `early`: `next_act`, its next value, where actearly is set)."""
    dyn = np.asarray(m.actuator_dyntype)[ids]
    adr = np.asarray(m.actuator_ctrladr)[ids]
    u = d.ctrl[adr]
    lim = np.asarray(m.actuator_ctrllimited, bool)[adr]
    if lim.any():
        rng = m.actuator_ctrlrange[adr]
        u = jp.where(jp.asarray(lim), jp.clip(u, rng[:, 0], rng[:, 1]), u)
    stateful = dyn != DynType.NONE
    if not stateful.any():
        return u
    last = np.asarray(m.actuator_actadr)[ids] + np.asarray(m.actuator_actnum)[ids] - 1
    a = d.act[np.where(stateful, last, 0)]
    if early:
        a = jp.where(jp.asarray(np.asarray(m.actuator_actearly, bool)[ids]), next_act, a)
    return jp.where(jp.asarray(stateful), a, u)


def pid(m: Model, d: Data, act_dot: jax.Array, force: jax.Array, next_act: jax.Array) -> tuple[jax.Array, jax.Array]:
    """The pid plugin actuators' act_dot slots (MuJoCo's actuator_act_dot) and forces (its compute).

    act_dot: (na,) with the built-in dynamics' rates (the dyntype slots of pid actuators among them); force:
    (nactuator,) the built-in actuators' forces before the force limits; next_act: (nactuator,) each actuator's
    next last-slot activation (actuation.next_activation, read where actearly). Returns (act_dot, force)."""
    ids = np.nonzero(np.asarray(m.actuator_plugin) >= 0)[0]
    h = m.opt.timestep
    prm = m.actuator_pluginprm[ids]
    kp, ki, kd, bound, slewmax = (prm[:, k] for k in range(5))
    slot = np.asarray(m.actuator_pluginslot)[ids]
    actadr = np.asarray(m.actuator_actadr)[ids]
    outadr = np.asarray(m.actuator_outadr)[ids]
    length, vel = d.actuator_length[outadr], d.actuator_velocity[outadr]
    has_int, has_slew = slot[:, 0] >= 0, slot[:, 1] >= 0
    int_adr = np.where(has_int, actadr + slot[:, 0], 0)
    slew_adr = np.where(has_slew, actadr + slot[:, 1], 0)

    def limited(u):  # the slew limit around the previous setpoint, once time > 0
        if not has_slew.any():
            return u
        prev = d.act[slew_adr]
        step = slewmax * h
        on = jp.asarray(has_slew) & (d.time > 0)
        return jp.where(on, jp.clip(u, prev - step, prev + step), u)

    def integral(err):  # the error integral after this step, clamped (0 without an integral state)
        if not has_int.any():
            return jp.zeros_like(err)
        z = jp.clip(d.act[int_adr] + err * h, -bound, bound)
        return jp.where(jp.asarray(has_int), z, 0.0)

    # act_dot of the plugin's own states (the setpoint without actearly)
    u = limited(_setpoint(m, d, ids, next_act[ids], early=False))
    if has_int.any():
        rate = (integral(u - length) - d.act[int_adr]) / h
        act_dot = act_dot.at[int_adr[has_int]].set(rate[has_int])
    if has_slew.any():
        rate = (u - d.act[slew_adr]) / h
        act_dot = act_dot.at[slew_adr[has_slew]].set(rate[has_slew])

    # the force (the setpoint with actearly)
    u = limited(_setpoint(m, d, ids, next_act[ids], early=True))
    err = u - length
    dyn = np.asarray(m.actuator_dyntype)[ids]
    stateful = dyn != DynType.NONE
    if stateful.any():
        last = actadr + np.asarray(m.actuator_actnum)[ids] - 1
        u_dot = jp.where(jp.asarray(stateful), act_dot[np.where(stateful, last, 0)], 0.0)
    else:
        u_dot = jp.zeros_like(err)
    f = kp * err + kd * (u_dot - vel) + ki * integral(err)
    return act_dot, force.at[ids].set(f)
