"""Velocity derivatives of the smooth forces (mjd_smooth_vel) and Euler's implicit-damping diagonal.

Used by the implicit integrators (`integrate.implicit`) and by discrete-time inverse dynamics
(`inverse.discrete_acc`). qDeriv is the exact Jacobian of our own force computation (forward-mode autodiff over
the velocity and actuation stages), so it contains every velocity-dependent term those stages model, except for
dcmotor actuators, whose force enters with MuJoCo's own linearisation (`actuation.dcmotor_force_vel`), and
orientation (so3) servos whose force norm is clamped and plugin actuators, which MuJoCo leaves out of qDeriv.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import actuation, passive, rne, velocity
from mjx_lite.types import Data, GainType, Model

__all__ = ["euler_damping", "qderiv", "smooth_vel_force"]


def euler_damping(m: Model, d: Data) -> jax.Array:
    """Diagonal (nv,) of d(damping force)/d(qvel) used by Euler's implicit damping (mj_EulerSkip).

    Per dof: b + 2 p1 |v| + 3 p2 v^2 for the damping force b v + p1 v|v| + p2 v^3, with b and (p1, p2) the dof's
    damping and dampingpoly plus those of the actuator attached to its joint (jnt_actuatorid). Tendon damping
    is not included (as in MuJoCo).
    """
    b, poly = m.dof_damping, m.dof_dampingpoly
    aid = np.asarray(m.jnt_actuatorid)[np.asarray(m.dof_jntid)] if m.nv else np.zeros(0, int)
    has = aid >= 0
    if has.any():
        a = np.where(has, aid, 0)
        b = b + jp.where(jp.asarray(has), m.actuator_damping[a], 0.0)
        poly = poly + jp.where(jp.asarray(has)[:, None], m.actuator_dampingpoly[a], 0.0)
    v = d.qvel
    return b + 2.0 * poly[:, 0] * jp.abs(v) + 3.0 * poly[:, 1] * v * v


def smooth_vel_force(m: Model, d: Data, bias: bool):
    """The map qvel (nv,) -> qfrc_passive + qfrc_actuator [- qfrc_bias] (nv,) at d's positions (for autodiff)."""

    def f(qvel: jax.Array) -> jax.Array:
        dd = d.replace(qvel=qvel)
        dd = actuation.fwd_velocity_extras(m, dd)
        dd = velocity.com_vel(m, dd)
        dd = passive.passive(m, dd)
        dd = actuation.actuation(m, dd)
        out = dd.qfrc_passive + dd.qfrc_actuator
        dc, slope = actuation.dcmotor_force_vel(m, dd)
        if len(dc):  # MuJoCo's linearisation of dcmotor forces: value unchanged, derivative replaced
            o = np.asarray(m.actuator_outadr)[dc]
            force, vel = dd.actuator_force[o], dd.actuator_velocity[o]
            sg = jax.lax.stop_gradient
            swap = sg(force) - force + sg(slope) * (vel - sg(vel))
            out = out + swap @ dd.actuator_moment[o]
        so3 = np.nonzero((np.asarray(m.actuator_gaintype) == GainType.SO3)
                         & np.asarray(m.actuator_forcelimited, bool))[0]  # fmt: skip
        if len(so3):  # MuJoCo's linearisation of force-limited so3 servos: biasprm[2] per output (the unclamped
            # law), or 0 where the force norm is at the limit; value unchanged. MuJoCo tests the clamped force's
            # norm >= the bound, which rounding decides either way for a clamped force; here a norm within 1e-9
            # (relative) of the bound counts as clamped.
            rows = np.asarray(m.actuator_outadr)[so3][:, None] + np.arange(3)
            sg = jax.lax.stop_gradient
            f3, vel = dd.actuator_force[rows], dd.actuator_velocity[rows]
            hi = m.actuator_forcerange[so3, 1:]
            sat = jp.sqrt(jp.sum(sg(f3) ** 2, -1, keepdims=True)) >= hi * (1 - 1e-9)
            lin = jp.where(sat, 0.0, m.actuator_biasprm[so3, 2:3] * (vel - sg(vel)))
            off = actuation.actuator_disabled(m)[so3]
            lin = jp.where(jp.asarray(off)[:, None], 0.0, lin) if off.any() else lin
            out = out + jp.einsum("nk,nkv->v", sg(f3) - f3 + lin, dd.actuator_moment[rows])
        plug = np.nonzero(np.asarray(m.actuator_plugin) >= 0)[0] if m.nactuator else np.zeros(0, int)
        if len(plug):  # plugin actuators (pid): MuJoCo gives them no velocity derivative; value unchanged
            o = np.asarray(m.actuator_outadr)[plug]
            f = dd.actuator_force[o]
            out = out + (jax.lax.stop_gradient(f) - f) @ dd.actuator_moment[o]
        if bias:
            out = out - rne.rne(m, dd).qfrc_bias
        return out

    return f


def qderiv(m: Model, d: Data, bias: bool) -> jax.Array:
    """d(qfrc_passive + qfrc_actuator [- qfrc_bias])/d(qvel), dense (nv, nv) (mjd_smooth_vel)."""
    return jax.jacfwd(smooth_vel_force(m, d, bias))(d.qvel)
