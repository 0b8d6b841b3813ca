"""The smooth dynamics from qvel to qacc_smooth as one fused kernel: the velocity pass (com_vel, rne and the joints'
passive forces, kernels/velocity.py and kernels/passive.py), the actuators' velocities (`fwd_velocity_extras`'s
actuator_moment qvel), mj_fwdActuation (kernels/actuation.py) and fwd_acceleration (kernels/factor.py: qfrc_smooth
with J'xfrc and M^-1 qfrc_smooth) for a block of environments, in that order, in one launch.

Outputs (per environment, Data's fields): the velocity pass's (cvel, cdof_dot, qfrc_bias, qfrc_spring, qfrc_damper,
qfrc_passive, actuator_velocity (nactuator,); with ball or free joint actuators the transmission's actuator_length and
actuator_moment, kernels/transmission.py), actuation's (actuator_force, qfrc_actuator and the warnings' increments)
and fwd_acceleration's (qfrc_smooth, qacc_smooth).
Inputs: the union of the three kernels' inputs less what the kernel computes itself (qvel, qpos, cdof, cinert, ctrl,
actuator_length, actuator_moment, qfrc_applied, xfrc_applied, xipos, subtree_com, qLD, qLDiagInv; the Model floats
they read, shared by the block unless vmapped).

The body is the three kernels' bodies run one after the other on one block; a later part reads what an earlier one
wrote (qfrc_bias, qfrc_passive, actuator_velocity (and length and moment), qfrc_actuator) from the kernel's own
output block instead of an input (`velocity.Outputs`). The formulas are theirs, so the fields equal the XLA stages'
to round-off. Derivatives go through the XLA twin: the three kernels' twins chained (the velocity stages with
fwd_velocity_extras and the transmission where the pass computes it, the actuation stage, fwd_acceleration), each
reading only its inputs (kernels/launch.py).

Used when the three are fused (`fusable`: dofs, passive forces of the joints only, every actuator one the actuation
kernel computes or no actuators, the tree factorisation, no sleeping trees) and only where nothing runs between the
velocity and the acceleration stages that could change the actuation's inputs: `forward.forward_skip` and the step
(the velocity sensors and energy run after the kernel; they read none of its later outputs). `step1` / `step2` (the
user sets ctrl or the applied forces between them) and the derivatives' passes keep the separate kernels.
"""

from __future__ import annotations

import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import sleep
from mjx_lite.pipeline.kernels import actuation as _actuation
from mjx_lite.pipeline.kernels import factor as _factor
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import velocity as _velocity
from mjx_lite.types import Data, Model

__all__ = ["ACC_FIELDS", "fusable", "kernel", "smooth_pass"]

# the Data fields the kernel computes that belong to the actuation and acceleration stages (on the XLA path computed
# after the velocity stage: `step._step_split` leaves them out of the reset's `keep`)
ACC_FIELDS = ("actuator_force", "qfrc_actuator", "qfrc_smooth", "qacc_smooth")


def fusable(m: Model) -> bool:
    """Static: the velocity pass computes the passive forces (`velocity.passive_fusable`), the actuation stage is
    the actuation kernel's (`actuation.fusable`) or there are no actuators, and fwd_acceleration is fused
    (`factor.fusable`: the tree factorisation, dofs); not with sleeping trees (`sleep.freeze` replaces the velocity
    stage's forces of sleeping dofs before the acceleration stages read them)."""
    if not (_velocity.fusable(m) and _velocity.passive_fusable(m) and _factor.fusable(m)) or sleep.on(m):
        return False
    return m.nactuator == 0 or _actuation.fusable(m)


def _merge_tables(*parts: dict) -> dict:
    out = {}
    for tab in parts:
        for n, v in tab.items():
            if n in out and not np.array_equal(out[n], v):
                raise AssertionError(f"kernels.smooth: table {n} differs between the merged kernels")
            out[n] = v
    return out


def kernel(m: Model, d: Data) -> tuple[launch.Kernel, dict]:
    """The pass as a `launch.Kernel` for (m, d) (one environment's shapes) and its inputs (the caller checks
    `fusable(m)`)."""
    kv, xv = _velocity.kernel(m, d)
    ka, xa = _actuation.kernel(m, d) if m.nactuator else (None, {})
    kc = _factor.acceleration_kernel(m)
    xc = {n: getattr(d, n) for n in _factor.ACCELERATION_INPUTS}
    nu = m.nactuator
    vel_out = frozenset(n for n in kv.outputs if not n.startswith("_"))
    act_out = frozenset(n for n in (ka.outputs if nu else {}) if not n.startswith("_"))
    from_vel = vel_out & frozenset(ka.inputs if nu else ())  # actuator_velocity
    from_acc = (vel_out | act_out) & frozenset(kc.inputs)  # qfrc_passive, qfrc_bias, qfrc_actuator
    x = dict(xv)
    x.update({n: v for n, v in xa.items() if n not in from_vel})
    x.update({n: v for n, v in xc.items() if n not in from_acc})
    outputs = dict(kv.outputs)
    outputs.update(ka.outputs if nu else {})
    outputs.update(kc.outputs)
    names = (kv.outputs, ka.outputs if nu else {}, kc.outputs)
    assert sum(len(o) for o in names) == len(outputs), "kernels.smooth: an output name clash"
    tables = _merge_tables(kv.tables, ka.tables if nu else {}, kc.tables)

    def body(io):
        kv.body(io)
        if nu:
            ka.body(_velocity.Outputs(io, from_vel))
        kc.body(_velocity.Outputs(io, from_acc))

    def xla(x):
        out = kv.xla({n: x[n] for n in kv.inputs if n in x})
        if nu:
            out.update(ka.xla({n: out[n] if n in from_vel else x[n] for n in ka.inputs}))
        out.update(kc.xla({n: out[n] if n in from_acc else x[n] for n in kc.inputs}))
        return out

    inputs = {n: tuple(jp.shape(v)) for n, v in x.items()}
    return launch.Kernel("smooth_pass", inputs, outputs, tables, body, xla), x


def smooth_pass(m: Model, d: Data, how: launch.Launch) -> Data:
    """The velocity pass, actuator_velocity, actuation and fwd_acceleration as one fused kernel (the caller checks
    `fusable(m)`): d with their fields; a bad control counts in warning_number[BADCTRL] as the XLA stage counts it."""
    k, x = kernel(m, d)
    dtype = d.qvel.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    warn = out.pop("warn", None)
    out = {n: v.reshape(getattr(d, n).shape).astype(getattr(d, n).dtype) for n, v in out.items()}
    zero = jp.zeros_like(d.qfrc_passive)
    d = d.replace(qfrc_gravcomp=zero, qfrc_fluid=zero, qfrc_adhesion=zero, **out)
    if warn is not None:
        d = d.replace(warning_number=d.warning_number + warn.astype(d.warning_number.dtype))
    return d
