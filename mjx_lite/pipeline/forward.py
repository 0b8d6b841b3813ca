"""The forward-dynamics recipe (mj_forward) and the public step functions (mj_step, mj_step1, mj_step2).

Every stage is `f(m, d) -> d`; this module only strings them together in MuJoCo's order (computation
chapter, "simulation pipeline"):

    fwd_position:     kinematics, com_pos, tendon, crb, factor_m, [collision, make_constraint], transmission
    sensor_pos, energy (potential)
    fwd_velocity:     ten_velocity/actuator_velocity, com_vel, passive, [reference_constraint], rne
    sensor_vel, energy (kinetic)
    fwd_actuation:    act_dot, actuator_force, qfrc_actuator
    fwd_acceleration: qfrc_smooth, qacc_smooth
    fwd_constraint:   [solver]; without constraints qacc = qacc_smooth, qfrc_constraint = 0
    sensor_acc

Hooks. Collision (`mjx_lite.collision.driver.collision`), constraint assembly
(`mjx_lite.pipeline.constraint.make_constraint`, and `reference_constraint` in the velocity stage if the module
defines it) and the constraint solver (`mjx_lite.solver.solve(m, d)`,
which sets qacc, qfrc_constraint, efc_force, solver_niter) are called when their modules exist and the
constraint disable flag is off. If the model has constraints to enforce (limits, equalities, contacts) with
the flag on but the solver is not available, tracing raises NotImplementedError rather than silently
simulating an unconstrained system: disable constraints explicitly (`<flag constraint="disable"/>`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import integrate, sensor
from mjx_lite.types import Data, DisableBit, EnableBit, IntegratorType, Model


def _disabled(m: Model, bit: int) -> bool:
    return bool(m.opt.disableflags & bit)


def _enabled(m: Model, bit: int) -> bool:
    return bool(m.opt.enableflags & bit)


def _stage(module: str, name: str) -> Callable:
    """A required pipeline stage `mjx_lite.<module>.<name>`, imported when first traced."""
    return getattr(importlib.import_module(f"mjx_lite.{module}"), name)


def _hook(module: str, name: str) -> Callable | None:
    """An optional stage: the function if its module exists and defines it, else None."""
    full = f"mjx_lite.{module}"
    try:
        mod = importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name is not None and full.startswith(e.name):
            return None
        raise
    return getattr(mod, name, None)


def _constraints_on(m: Model) -> bool:
    return not _disabled(m, DisableBit.CONSTRAINT)


def _needs_constraints(m: Model) -> bool:
    """Static: could this model produce constraint rows (limits, equalities, contacts)?"""
    if not _constraints_on(m):
        return False
    limits = not _disabled(m, DisableBit.LIMIT) and (bool(np.any(m.jnt_limited)) or bool(np.any(m.tendon_limited)))
    equality = not _disabled(m, DisableBit.EQUALITY) and m.neq > 0
    contact = not _disabled(m, DisableBit.CONTACT) and (
        m.npair > 0 or bool(np.any((np.asarray(m.geom_contype) | np.asarray(m.geom_conaffinity)) != 0))
    )
    return limits or equality or contact


def _solver() -> Callable | None:
    if _hook("pipeline.constraint", "make_constraint") is None:
        return None
    return _hook("solver", "solve")


# ---- stages ------------------------------------------------------------------------------------------------


def fwd_position(m: Model, d: Data) -> Data:
    """Position-dependent computations (mj_fwdPosition)."""
    d = _stage("pipeline.kinematics", "kinematics")(m, d)
    d = _stage("pipeline.kinematics", "com_pos")(m, d)
    d = _stage("pipeline.tendon", "tendon")(m, d)
    d = _stage("pipeline.inertia", "crb")(m, d)
    d = _stage("pipeline.inertia", "factor_m")(m, d)
    if _constraints_on(m):
        collision = _hook("collision.driver", "collision")
        if collision is not None and not _disabled(m, DisableBit.CONTACT) and m.nconmax > 0:
            d = collision(m, d)
        make_constraint = _hook("pipeline.constraint", "make_constraint")
        if make_constraint is not None:
            d = make_constraint(m, d)
    d = _stage("pipeline.transmission", "transmission")(m, d)
    return d


def fwd_velocity(m: Model, d: Data) -> Data:
    """Velocity-dependent computations (mj_fwdVelocity): ten/actuator velocity, cvel, passive, qfrc_bias."""
    d = _stage("pipeline.actuation", "fwd_velocity_extras")(m, d)
    d = _stage("pipeline.velocity", "com_vel")(m, d)
    d = _stage("pipeline.passive", "passive")(m, d)
    if _constraints_on(m) and m.njmax > 0:
        reference = _hook("pipeline.constraint", "reference_constraint")
        if reference is not None:  # efc_vel, efc_aref (mj_referenceConstraint), when computed apart
            d = reference(m, d)
    d = _stage("pipeline.rne", "rne")(m, d)
    return d


def fwd_actuation(m: Model, d: Data) -> Data:
    """Actuator forces and activation derivatives (mj_fwdActuation)."""
    return _stage("pipeline.actuation", "actuation")(m, d)


def xfrc_accumulate(m: Model, d: Data) -> jax.Array:
    """Generalised force of the Cartesian wrenches `xfrc_applied` (mj_xfrcAccumulate), (nv,).

    Each body's (force, torque) acts at its centre of mass `xipos`. In the com-based frame (origin at the
    subtree root's com) the wrench is (torque + (xipos - com) x force, force); a dof feels the sum of the
    wrenches of the bodies it moves (the subtree of its body): qfrc[j] = cdof[j] . subtree_sum(wrench)[body(j)].
    """
    if m.nv == 0:
        return jp.zeros((0,), d.qvel.dtype)
    frc, trq = d.xfrc_applied[:, :3], d.xfrc_applied[:, 3:]
    offset = d.xipos - d.subtree_com[np.asarray(m.body_rootid)]
    wrench = jp.concatenate([trq + jp.cross(offset, frc), frc], axis=-1)  # (nbody, 6)
    wrench = _stage("pipeline.support", "subtree_sum")(m, wrench)
    return jp.sum(d.cdof * wrench[np.asarray(m.dof_bodyid)], axis=-1)


def fwd_acceleration(m: Model, d: Data) -> Data:
    """qfrc_smooth = passive - bias + applied + actuator + J'xfrc; qacc_smooth = M^-1 qfrc_smooth."""
    qfrc_smooth = d.qfrc_passive - d.qfrc_bias + d.qfrc_applied + d.qfrc_actuator + xfrc_accumulate(m, d)
    qacc_smooth = _stage("pipeline.inertia", "solve_m")(m, d, qfrc_smooth)
    return d.replace(qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)


def fwd_constraint(m: Model, d: Data) -> Data:
    """Constraint forces and qacc (mj_fwdConstraint); without constraints qacc = qacc_smooth."""
    solve = _solver() if _constraints_on(m) else None
    if solve is not None and m.njmax > 0:
        return solve(m, d)
    if _needs_constraints(m) and solve is None:
        raise NotImplementedError(
            "mjx_lite: this model has constraints (joint/tendon limits, equalities or contacts) but the "
            "constraint solver is not implemented yet; disable constraints explicitly with "
            "<option><flag constraint='disable'/></option> (or m.opt.disableflags |= DisableBit.CONSTRAINT)."
        )
    return d.replace(
        qacc=d.qacc_smooth,
        qfrc_constraint=jp.zeros_like(d.qfrc_smooth),
        solver_niter=jp.zeros_like(d.solver_niter),
    )


def _energy_pos(m: Model, d: Data) -> Data:
    if _enabled(m, EnableBit.ENERGY):
        return d.replace(energy=d.energy.at[0].set(sensor.energy_pos(m, d)))
    return d.replace(energy=jp.zeros_like(d.energy))


def _energy_vel(m: Model, d: Data) -> Data:
    if _enabled(m, EnableBit.ENERGY):
        return d.replace(energy=d.energy.at[1].set(sensor.energy_vel(m, d)))
    return d


# ---- public API ----------------------------------------------------------------------------------------


def forward_skip(m: Model, d: Data, sensors: bool = True) -> Data:
    """mj_forwardSkip(m, d, mjSTAGE_NONE, skipsensor=not sensors); `sensors` also gates energy (RK4 stages)."""
    d = fwd_position(m, d)
    if sensors:
        d = sensor.sensor_pos(m, d)
        d = _energy_pos(m, d)
    d = fwd_velocity(m, d)
    if sensors:
        d = sensor.sensor_vel(m, d)
        d = _energy_vel(m, d)
    d = fwd_actuation(m, d)
    d = fwd_acceleration(m, d)
    d = fwd_constraint(m, d)
    if sensors:
        d = sensor.sensor_acc(m, d)
    if _enabled(m, EnableBit.FWDINV):  # solver_fwdinv (mj_compareFwdInv); added by the constraints engineer
        d = _stage("pipeline.inverse", "compare_fwd_inv")(m, d)
    return d


def forward(m: Model, d: Data) -> Data:
    """Forward dynamics (mj_forward): every derived quantity of the state, qacc and the sensors."""
    return forward_skip(m, d, sensors=True)


def step(m: Model, d: Data) -> Data:
    """Advance the simulation by one timestep (mj_step) with the model's integrator.

    Divergence (non-finite or |x| > 1e10 in qpos, qvel or qacc) resets the offending environment to the
    model's reset state (see `integrate.check_pos`), counting it in `warning_number`. After a bad qacc the
    reset state is returned unstepped unless `m.config.exact_reset` (MuJoCo's behaviour: reset, forward, step).
    With `m.config.contact_gradients == "smooth"` the value is the same and the derivative is randomly smoothed
    (`mjx_lite.derivatives.smooth_step`).
    """
    if m.config.contact_gradients != "exact":
        return _stage("derivatives", "smooth_step")(m, d)
    d = integrate.check_pos(m, d)
    d = integrate.check_vel(m, d)
    d = forward(m, d)
    exact = m.config.exact_reset
    if exact:
        d = integrate.check_acc(m, d)  # a bad env is reset, forwarded, then stepped once (as mj_step)
    bad_acc = integrate.bad_acc(m, d)
    if m.opt.integrator == IntegratorType.EULER:
        d2 = integrate.euler(m, d)
    elif m.opt.integrator == IntegratorType.RK4:
        d2 = integrate.rk4(m, d)
    elif m.opt.integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
        d2 = integrate.implicit(m, d)
    else:
        raise ValueError(f"mjx_lite: unknown integrator {m.opt.integrator}")
    if exact:
        return d2
    return integrate.reset_where(m, d2, bad_acc, warning=integrate.Warning.BADQACC)  # reset state, not stepped


def step1(m: Model, d: Data) -> Data:
    """First half of mj_step (mj_step1): checks, position and velocity stages with their sensors.

    Set `ctrl`, `qfrc_applied` or `xfrc_applied` between `step1` and `step2`.
    """
    d = integrate.check_pos(m, d)
    d = integrate.check_vel(m, d)
    d = fwd_position(m, d)
    d = sensor.sensor_pos(m, d)
    d = _energy_pos(m, d)
    d = fwd_velocity(m, d)
    d = sensor.sensor_vel(m, d)
    d = _energy_vel(m, d)
    return d


def step2(m: Model, d: Data) -> Data:
    """Second half of mj_step (mj_step2): actuation, acceleration, constraints, sensors, integration.

    As in MuJoCo, RK4 models are advanced with Euler here (RK4 needs the whole forward pass per stage).
    """
    d = fwd_actuation(m, d)
    d = fwd_acceleration(m, d)
    d = fwd_constraint(m, d)
    d = sensor.sensor_acc(m, d)
    exact = m.config.exact_reset
    if exact:
        d = integrate.check_acc(m, d)
    bad_acc = integrate.bad_acc(m, d)
    if m.opt.integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
        d2 = integrate.implicit(m, d)
    else:
        d2 = integrate.euler(m, d)
    if exact:
        return d2
    return integrate.reset_where(m, d2, bad_acc, warning=integrate.Warning.BADQACC)
