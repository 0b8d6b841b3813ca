"""Inverse dynamics (mj_inverse), the forward/inverse comparison (mj_compareFwdInv) and contact forces.

inverse(m, d): given qpos, qvel and qacc, the generalised force that produces qacc (computation chapter,
"Inverse dynamics"). The constraint forces follow analytically from qacc through the soft-constraint force
law: with jar = J qacc - aref, efc_force = -ds/djar (the same convex cost s the forward solvers minimise), so
no optimisation is needed; then

    qfrc_inverse = M qacc + qfrc_bias - qfrc_passive - qfrc_constraint

with M including armature (qM), i.e. qfrc_inverse = qfrc_applied + J'xfrc_applied + qfrc_actuator whenever qacc
came from forward dynamics. Under the `invdiscrete` enable flag qacc is read as the discrete-time acceleration
of the integrator (Euler with implicit joint damping, implicit, implicitfast) and converted to the continuous-
time one before the above (mj_discreteAcc); d.qacc itself is left unchanged.

contact_force(m, d): (nconmax, 6) force/torque of each contact in its contact frame (mj_contactForce), and
cfrc_ext_constraint(m, d): (nbody, 6) com-based wrenches of the contact and connect/weld forces, for
rne_postconstraint (cfrc_ext).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline import sensor
from mjx_lite.types import ConeType, Data, DisableBit, EnableBit, IntegratorType, Model


def _constraints_live(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.CONSTRAINT) and m.njmax > 0


def inv_constraint(m: Model, d: Data) -> Data:
    """efc_force, efc_state, qfrc_constraint from d.qacc (mj_invConstraint). Needs make_constraint's rows."""
    if not _constraints_live(m):
        return d.replace(qfrc_constraint=jp.zeros_like(d.qacc))
    from mjx_lite.pipeline import constraint, inertia
    from mjx_lite.solver import common

    p = constraint.plan(m)
    prob = constraint.problem(m, d, inertia.full_m(m, d))
    jar = d.efc_J @ d.qacc - d.efc_aref
    ev = common.eval_constraints(p.layout, prob, jar)
    return d.replace(efc_force=ev.force, efc_state=ev.state, qfrc_constraint=ev.force @ d.efc_J)


def discrete_acc(m: Model, d: Data) -> jax.Array:
    """Continuous-time qacc from the integrator's discrete-time qacc (mj_discreteAcc), (nv,)."""
    from mjx_lite.pipeline import inertia, integrate

    integ = m.opt.integrator
    h = m.opt.timestep
    if integ == IntegratorType.RK4:
        raise NotImplementedError("discrete inverse dynamics is not supported by the RK4 integrator (as MuJoCo)")
    if integ == IntegratorType.EULER:
        flags = m.opt.disableflags
        if flags & DisableBit.EULERDAMP or flags & DisableBit.DAMPER:
            return d.qacc
        qfrc = inertia.mul_m(m, d, d.qacc) + h * integrate.euler_damping(m, d) * d.qacc
    else:
        qd = integrate.qderiv(m, d, bias=integ == IntegratorType.IMPLICIT)
        qfrc = inertia.mul_m(m, d, d.qacc) - h * (qd @ d.qacc)
    return inertia.solve_m(m, d, qfrc)


def inverse_acc(m: Model, d: Data, sensors: bool = True) -> Data:
    """The acceleration stage of mj_inverse (positions and velocities already computed)."""
    from mjx_lite.pipeline import inertia

    qacc_given = d.qacc
    if m.opt.enableflags & EnableBit.INVDISCRETE:
        d = d.replace(qacc=discrete_acc(m, d))
    d = inv_constraint(m, d)
    qfrc_inverse = inertia.mul_m(m, d, d.qacc) + d.qfrc_bias - d.qfrc_passive - d.qfrc_constraint
    d = d.replace(qfrc_inverse=qfrc_inverse)
    if sensors:
        d = sensor.sensor_acc(m, d)
    return d.replace(qacc=qacc_given)


def inverse(m: Model, d: Data) -> Data:
    """Inverse dynamics (mj_inverse): qfrc_inverse, the constraint forces implied by qacc, and the sensors."""
    d = fwd.fwd_position(m, d)
    d = sensor.sensor_pos(m, d)
    d = fwd._energy_pos(m, d)
    d = fwd.fwd_velocity(m, d)
    d = sensor.sensor_vel(m, d)
    d = fwd._energy_vel(m, d)
    return inverse_acc(m, d, sensors=True)


def compare_fwd_inv(m: Model, d: Data) -> Data:
    """solver_fwdinv (mj_compareFwdInv) after forward dynamics; the forward results are left unchanged.

    solver_fwdinv[0] = |qfrc_constraint(forward) - qfrc_constraint(inverse)|,
    solver_fwdinv[1] = |qfrc_applied + J'xfrc_applied + qfrc_actuator - qfrc_inverse|.
    """
    if not _constraints_live(m):
        return d.replace(solver_fwdinv=jp.zeros_like(d.solver_fwdinv))
    qforce = d.qfrc_applied + d.qfrc_actuator + fwd.xfrc_accumulate(m, d)
    di = inverse_acc(m, d, sensors=False)
    dif0 = d.qfrc_constraint - di.qfrc_constraint
    dif1 = qforce - di.qfrc_inverse
    out = jp.stack([jp.sqrt(jp.sum(dif0 * dif0)), jp.sqrt(jp.sum(dif1 * dif1))])
    out = jp.where(d.nefc > 0, out, 0.0)
    return d.replace(solver_fwdinv=out.astype(d.solver_fwdinv.dtype))


# ---------------------------------------------------------------------------------------------------------
# contact forces


def contact_force(m: Model, d: Data) -> jax.Array:
    """(nconmax, 6) force of each contact in its contact frame (mj_contactForce): normal, tangent forces,
    torsional and rolling torques; zero for inactive contacts and beyond the contact's condim.

    Pyramidal contacts are converted from edge forces: normal = sum of the edge forces, friction i =
    mu_i (f_i+ - f_i-); elliptic contacts read their rows directly.
    """
    from mjx_lite.pipeline import constraint

    nc = m.nconmax
    dt = d.qpos.dtype
    out = jp.zeros((nc, 6), dt)
    if nc == 0 or not _constraints_live(m):
        return out
    p = constraint.plan(m)
    if len(p.con_dim) == 0:
        return out
    con = d.contact
    for dim in sorted(set(p.con_dim.tolist())):
        slots = np.nonzero(p.con_dim == dim)[0]
        nrow = int(p.con_rows[slots][0])
        rows = p.con_adr[slots][:, None] + np.arange(nrow)[None, :]
        f = d.efc_force[rows]  # (k, nrow)
        if dim == 1 or m.opt.cone == ConeType.ELLIPTIC:
            frc = f
        else:
            fr = con.friction[slots][:, : dim - 1]
            pair = f.reshape(len(slots), dim - 1, 2)
            frc = jp.concatenate([jp.sum(f, axis=1, keepdims=True), fr * (pair[:, :, 0] - pair[:, :, 1])], axis=1)
        adim = con.dim[slots]
        frc = jp.where(jp.arange(frc.shape[1])[None, :] < adim[:, None], frc, 0.0)
        live = d.efc_mask[rows[:, 0]]
        frc = jp.where(live[:, None], frc, 0.0)
        out = out.at[slots, : frc.shape[1]].set(frc)
    return out


def cfrc_ext_constraint(m: Model, d: Data) -> jax.Array:
    """(nbody, 6) com-based [torque, force] wrenches of contact, connect and weld forces (for cfrc_ext).

    Contacts: the contact-frame force rotated to the world acts at the contact point, +f on geom2's body and
    -f on geom1's body. Connect/weld: the wrench whose generalised force is J'f of the equality rows (the
    force at each body's anchor, and for welds the torque rotated out of the error coordinates).
    """
    from mjx_lite.pipeline import constraint, support

    dt = d.qpos.dtype
    out = jp.zeros((m.nbody, 6), dt)
    if not _constraints_live(m):
        return out
    p = constraint.plan(m)
    if m.nconmax and len(p.con_dim):
        cf = contact_force(m, d)  # (nc, 6)
        frame = d.contact.frame  # rows: normal, tangent1, tangent2
        fw = jp.einsum("cji,cj->ci", frame, cf[:, :3])
        tw = jp.einsum("cji,cj->ci", frame, cf[:, 3:])
        gb = jp.asarray(np.asarray(m.geom_bodyid), jp.int32)
        b1 = gb[d.contact.geom[:, 0]]
        b2 = gb[d.contact.geom[:, 1]]
        tf = jp.concatenate([tw, fw], axis=1)
        bodies = jp.concatenate([b1, b2])
        pts = jp.concatenate([d.contact.pos, d.contact.pos])
        out = out + support.wrench_to_cfrc(m, d, bodies, pts, jp.concatenate([-tf, tf]))
    if len(p.connect) or len(p.weld):
        out = out + _equality_wrenches(m, d, p)
    return out


def _equality_wrenches(m: Model, d: Data, p) -> jax.Array:
    from mjx_lite.pipeline import constraint, support

    out = jp.zeros((m.nbody, 6), d.qpos.dtype)
    if len(p.connect):
        ids = p.connect
        n = len(ids)
        rows = p.adr["connect"] + np.arange(3 * n).reshape(n, 3)
        f = d.efc_force[rows]  # (n, 3) world force on body1 at its anchor
        data = m.eq_data[ids]
        b1, p1, _ = constraint._bodies_points(m, d, ids, 1, data[:, 0:3])
        b2, p2, _ = constraint._bodies_points(m, d, ids, 2, data[:, 3:6])
        z = jp.zeros_like(f)
        out = out + support.wrench_to_cfrc(
            m,
            d,
            np.concatenate([b1, b2]),
            jp.concatenate([p1, p2]),
            jp.concatenate([jp.concatenate([z, f], 1), jp.concatenate([z, -f], 1)]),
        )
    if len(p.weld):
        ids = p.weld
        n = len(ids)
        rows = p.adr["weld"] + np.arange(6 * n).reshape(n, 6)
        f = d.efc_force[rows]  # (n, 6): world force, then rotational-error coordinates
        geo = constraint._weld_geometry(m, d, ids)
        torque = jp.einsum("nij,ni->nj", geo["T"], f[:, 3:])  # J_r' f = (jr1 - jr2)' T' f: world torque T'f
        force = f[:, :3]
        out = out + support.wrench_to_cfrc(
            m, d, np.concatenate([geo["b1"], geo["b2"]]), jp.concatenate([geo["p1"], geo["p2"]]),
            jp.concatenate([jp.concatenate([torque, force], 1), jp.concatenate([-torque, -force], 1)]))  # fmt: skip
    return out
