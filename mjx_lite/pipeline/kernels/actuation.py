"""The actuators' forces (mj_fwdActuation, actuation.actuation) as one fused kernel, for stateless actuators with
fixed or affine gains and no or affine biases (motors, position and velocity servos without activation).

Outputs (per environment): actuator_force (nactuator,), qfrc_actuator (nv,) and the increments of warning_number
(NWARNING,): 1 at BADCTRL where a control was bad, else zeros (added to warning_number by one operation).
Inputs: ctrl (nu,), actuator_length, actuator_velocity (nactuator,), actuator_moment (nactuator * nv,) (per
environment) and the Model's actuator_gainprm, actuator_biasprm, actuator_ctrlrange, actuator_forcerange (shared by
the block unless vmapped).

Per actuator (loops over the actuators, their kinds in static int32 tables): the control clamped to ctrlrange
(ctrllimited, unless clampctrl is disabled); if any clamped control is NaN, infinite or above 1e10 in magnitude, all
are taken as zero (the caller counts BADCTRL); force = gain u + bias with gain = gainprm[0] (+ gainprm[1] length +
gainprm[2] velocity when affine) and bias 0 (or biasprm[0] + biasprm[1] length + biasprm[2] velocity); zero in a
disabled actuator group; clamped to forcerange (forcelimited); then qfrc_actuator = actuator_moment' force (every
actuator's row, dense, as the XLA stage's product). The formulas are actuation.py's per lane; fields equal the XLA
stage's to round-off. Derivatives go through the XLA twin (kernels/launch.py), the stage itself.

Not fused (the XLA stage runs): activation states (na > 0), delays, several controls or outputs per actuator,
muscle, PID, dcmotor or so3 actuators, periodic setpoints, plugin PIDs, tendon- or joint-level actuator force
limits, gravity compensation routed to actuators, and the actuation disable flag.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import actuation as _actuation
from mjx_lite.pipeline import passive, plugin_pid, support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import NWARNING, BiasType, Data, DisableBit, DynType, GainType, Model, TrnType, Warning

__all__ = ["actuation", "fusable", "kernel"]

MODEL_INPUTS = ("actuator_gainprm", "actuator_biasprm", "actuator_ctrlrange", "actuator_forcerange")
DATA_INPUTS = ("ctrl", "actuator_length", "actuator_velocity", "actuator_moment")


def fusable(m: Model) -> bool:
    """Static: every actuator is one the kernel computes (see the module docstring) and the model has dofs."""
    n = m.nactuator
    if not n or not m.nv or m.na or m.nu != n or m.nout != n or m.opt.disableflags & DisableBit.ACTUATION:
        return False
    if not np.array_equal(np.asarray(m.actuator_ctrladr), np.arange(n)):
        return False
    if np.any(np.asarray(m.actuator_history).reshape(-1, 2)[:, 0] > 0) or plugin_pid.has_pid(m):
        return False
    if np.any(np.asarray(m.actuator_dyntype) != DynType.NONE):
        return False
    if not np.all(np.isin(np.asarray(m.actuator_gaintype), (GainType.FIXED, GainType.AFFINE))):
        return False
    if not np.all(np.isin(np.asarray(m.actuator_biastype), (BiasType.NONE, BiasType.AFFINE))):
        return False
    if _actuation.wrap_period(m) is not None or np.any(np.asarray(m.jnt_actfrclimited, bool)):
        return False
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    onten = trntype == TrnType.TENDON
    if m.ntendon and np.any(np.asarray(m.tendon_actfrclimited, bool)[trnid[onten, 0]]):
        return False
    return not (passive.gravcomp_dof_mask(m, True).any() and not m.opt.disableflags & DisableBit.GRAVITY)


def plan(m: Model) -> dict:
    """Static per-actuator flags (int32 0/1): ctrl clamped, gain affine, bias affine, disabled group, force clamped."""
    clamp = not m.opt.disableflags & DisableBit.CLAMPCTRL
    tab = dict(
        a_clamp=np.asarray(m.actuator_ctrllimited, bool) & clamp,
        a_gain=np.asarray(m.actuator_gaintype) == GainType.AFFINE,
        a_bias=np.asarray(m.actuator_biastype) == BiasType.AFFINE,
        a_off=_actuation.actuator_disabled(m),
        a_flim=np.asarray(m.actuator_forcelimited, bool),
    )
    return {n: np.asarray(v, np.int32) for n, v in tab.items()}


def _body(m: Model):
    nu, nv = m.nactuator, m.nv
    ng, nb = m.actuator_gainprm.shape[1], m.actuator_biasprm.shape[1]

    def body(io):
        tab, read = io.table, io.read

        def control(a):
            """The clamped control of actuator a and whether it is bad (NaN: bad whatever the clamp gives)."""
            raw = read("ctrl", a)
            lo, hi = read("actuator_ctrlrange", 2 * a), read("actuator_ctrlrange", 2 * a + 1)
            c = where(tab("a_clamp", a) > 0, jp.minimum(jp.maximum(raw, lo), hi), raw)
            bad = jp.isnan(raw) | ~jp.isfinite(c) | (jp.abs(c) > 1e10)
            return c, bad

        def any_bad(a, acc):
            return where(control(a)[1], 1.0, acc, io.dtype)

        bad = jax.lax.fori_loop(np.int32(0), np.int32(nu), any_bad, io.lanes(0.0))
        for w in range(NWARNING):  # the warnings' increments: BADCTRL's 0 or 1, the others 0
            io.write("warn", w, bad if w == Warning.BADCTRL else 0.0)
        ok = bad <= 0.0

        def force(a):
            c = where(ok, control(a)[0], 0.0, io.dtype)
            ln, vel = read("actuator_length", a), read("actuator_velocity", a)
            g = [read("actuator_gainprm", ng * a + i) for i in range(3)]
            b = [read("actuator_biasprm", nb * a + i) for i in range(3)]
            gain = where(tab("a_gain", a) > 0, g[0] + g[1] * ln + g[2] * vel, g[0], io.dtype)
            bias = where(tab("a_bias", a) > 0, b[0] + b[1] * ln + b[2] * vel, 0.0, io.dtype)
            f = where(tab("a_off", a) > 0, 0.0, gain * c + bias, io.dtype)
            lo, hi = read("actuator_forcerange", 2 * a), read("actuator_forcerange", 2 * a + 1)
            f = where(tab("a_flim", a) > 0, jp.minimum(jp.maximum(f, lo), hi), f, io.dtype)
            io.write("actuator_force", a, f)

        _loop(0, nu, force)

        def dof(k):
            def acc(a, s):
                return s + io.load("actuator_force", a) * read("actuator_moment", a * nv + k)

            io.write("qfrc_actuator", k, jax.lax.fori_loop(np.int32(0), np.int32(nu), acc, io.lanes(0.0)))

        _loop(0, nv, dof)

    return body




def _twin(m: Model, d: Data):
    """The XLA twin: the stage on Model/Data whose other traced fields are zeros (a custom_jvp rule reads no array
    of the (m, d) it closes over, see launch.call)."""

    def xla(x):
        m2 = launch.detach(m, {n: x[n].reshape(jp.shape(getattr(m, n))) for n in MODEL_INPUTS})
        d2 = launch.detach(d, {n: x[n].reshape(jp.shape(getattr(d, n))) for n in DATA_INPUTS})
        out = _actuation.actuation(m2, d2)
        warn = (out.warning_number - d2.warning_number).astype(out.qfrc_actuator.dtype)
        return {"actuator_force": out.actuator_force, "qfrc_actuator": out.qfrc_actuator, "warn": warn}

    return xla


def kernel(m: Model, d: Data) -> tuple[launch.Kernel, dict]:
    """The stage as a `launch.Kernel` for (m, d) (one environment's shapes) and its inputs (also a part of the smooth
    pass's kernel, kernels/smooth.py)."""
    _actuation._check(m)
    x = {n: getattr(m, n) for n in MODEL_INPUTS}  # (shared: read in their shape, launch.IO.read)
    x.update({n: getattr(d, n).reshape(-1) for n in DATA_INPUTS})
    tables = support.memo(m, "kernels_actuation_plan", plan)
    outputs = {"actuator_force": (m.nactuator,), "qfrc_actuator": (m.nv,), "warn": (NWARNING,)}
    k = launch.Kernel("actuation", {n: tuple(v.shape) for n, v in x.items()}, outputs, tables, _body(m),
                      _twin(m, d))  # fmt: skip
    return k, x


def actuation(m: Model, d: Data, how: launch.Launch) -> Data:
    """actuator_force and qfrc_actuator as one fused kernel (the caller checks `fusable`); a bad control counts in
    warning_number[BADCTRL] as the XLA stage counts it."""
    k, x = kernel(m, d)
    dtype = d.qpos.dtype
    out = launch.call(k, {n: v.astype(dtype) for n, v in x.items()}, how)
    warn = out["warn"].astype(d.warning_number.dtype)  # 0 or 1 at BADCTRL, zeros elsewhere: one add
    return d.replace(actuator_force=out["actuator_force"].astype(d.actuator_force.dtype),
                     qfrc_actuator=out["qfrc_actuator"].astype(d.qfrc_actuator.dtype),
                     warning_number=d.warning_number + warn)  # fmt: skip
