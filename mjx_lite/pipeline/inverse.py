"""The acceleration stage of inverse dynamics (mj_invConstraint, mj_discreteAcc) and mj_compareFwdInv.

`mjx_lite.inverse(m, d)` (pipeline/step.py) runs the position and velocity stages, then `inverse_acc`: given
qpos, qvel and qacc, the generalised force that produces qacc (computation chapter, "Inverse dynamics"). The
constraint forces follow analytically from qacc through the soft-constraint force law: with jar = J qacc - aref,
efc_force = -ds/djar (the same convex cost s the forward solvers minimise), so no optimisation is needed; then

    qfrc_inverse = M qacc + qfrc_bias - qfrc_passive - qfrc_constraint

with M including armature (qM), i.e. qfrc_inverse = qfrc_applied + J'xfrc_applied + qfrc_actuator whenever qacc
came from forward dynamics. Under the `invdiscrete` enable flag qacc is read as the discrete-time acceleration
of the integrator (Euler with implicit joint damping, implicit, implicitfast) and converted to the continuous-
time one before the above (mj_discreteAcc); d.qacc itself is left unchanged.

Contact forces (mj_contactForce) are in `pipeline/contact_force.py`.
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite.pipeline import constraint, derivative, inertia, sensor, support
from mjx_lite.solver import common
from mjx_lite.types import Data, DisableBit, EnableBit, IntegratorType, Model


def _constraints_live(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.CONSTRAINT) and m.njmax > 0


def inv_constraint(m: Model, d: Data) -> Data:
    """efc_force, efc_state, qfrc_constraint from d.qacc (mj_invConstraint). Needs make_constraint's rows."""
    if not _constraints_live(m):
        return d.replace(qfrc_constraint=jp.zeros_like(d.qacc))
    p = constraint.plan(m)
    prob = constraint.problem(m, d, inertia.full_m(m, d))
    jar = d.efc_J @ d.qacc - d.efc_aref
    ev = common.eval_constraints(p.layout, prob, jar)
    return d.replace(efc_force=ev.force, efc_state=ev.state, qfrc_constraint=ev.force @ d.efc_J)


def discrete_acc(m: Model, d: Data) -> jax.Array:
    """Continuous-time qacc from the integrator's discrete-time qacc (mj_discreteAcc), (nv,)."""
    integ = m.opt.integrator
    h = m.opt.timestep
    if integ == IntegratorType.RK4:
        raise NotImplementedError("discrete inverse dynamics is not supported by the RK4 integrator (as MuJoCo)")
    if integ == IntegratorType.EULER:
        flags = m.opt.disableflags
        if flags & DisableBit.EULERDAMP or flags & DisableBit.DAMPER:
            return d.qacc
        qfrc = inertia.mul_m(m, d, d.qacc) + h * derivative.euler_damping(m, d) * d.qacc
    else:
        qd = derivative.qderiv(m, d, bias=integ == IntegratorType.IMPLICIT)
        qfrc = inertia.mul_m(m, d, d.qacc) - h * (qd @ d.qacc)
    return inertia.solve_m(m, d, qfrc)


def inverse_acc(m: Model, d: Data, sensors: bool = True) -> Data:
    """The acceleration stage of mj_inverse (positions and velocities already computed)."""
    qacc_given = d.qacc
    if m.opt.enableflags & EnableBit.INVDISCRETE:
        d = d.replace(qacc=discrete_acc(m, d))
    d = inv_constraint(m, d)
    qfrc_inverse = inertia.mul_m(m, d, d.qacc) + d.qfrc_bias - d.qfrc_passive - d.qfrc_constraint
    d = d.replace(qfrc_inverse=qfrc_inverse)
    if sensors:
        d = sensor.sensor_acc(m, d)
    return d.replace(qacc=qacc_given)


def compare_fwd_inv(m: Model, d: Data) -> Data:
    """solver_fwdinv (mj_compareFwdInv) after forward dynamics; the forward results are left unchanged.

    solver_fwdinv[0] = |qfrc_constraint(forward) - qfrc_constraint(inverse)|,
    solver_fwdinv[1] = |qfrc_applied + J'xfrc_applied + qfrc_actuator - qfrc_inverse|.
    """
    if not _constraints_live(m):
        return d.replace(solver_fwdinv=jp.zeros_like(d.solver_fwdinv))
    qforce = d.qfrc_applied + d.qfrc_actuator + support.xfrc_accumulate(m, d)
    di = inverse_acc(m, d, sensors=False)
    dif0 = d.qfrc_constraint - di.qfrc_constraint
    dif1 = qforce - di.qfrc_inverse
    out = jp.stack([jp.sqrt(jp.sum(dif0 * dif0)), jp.sqrt(jp.sum(dif1 * dif1))])
    out = jp.where(d.nefc > 0, out, 0.0)
    return d.replace(solver_fwdinv=out.astype(d.solver_fwdinv.dtype))
