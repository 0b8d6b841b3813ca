"""The forward-dynamics recipe (mj_forward): every stage in MuJoCo's order (computation chapter, "simulation
pipeline"). `step`, `step1`, `step2` and `inverse`, which run whole pipelines, are in `pipeline/step.py`.

Every stage is `f(m, d) -> d`; this module only strings them together:

    fwd_position:     kinematics, com_pos, tendon, crb, factor_m, [collision, make_constraint], transmission
                      (with Config.kernels "fused": kinematics, com_pos, crb and factor_m run first, as one kernel)
    sensor_pos, energy (potential)
    fwd_velocity:     ten_velocity/actuator_velocity, com_vel, passive, rne
                      (fused: com_vel and rne as one kernel at com_vel's place, with passive when it has only joint
                      terms; rne does not read passive's output, passive does not read com_vel's)
    sensor_vel, energy (kinetic)
    fwd_actuation:    act_dot, actuator_force, qfrc_actuator
    fwd_acceleration: qfrc_smooth, qacc_smooth
    fwd_constraint:   [solver]; without constraints qacc = qacc_smooth, qfrc_constraint = 0
    sensor_acc
    [compare_fwd_inv under the fwdinv enable flag]

Bracketed stages run when the constraint disable flag is off (and, for collision, the contact flag; for the
solver, when the model has constraint rows). With `Config.contact_buckets`, make_constraint and the solver run on a
bucket of the live contacts and scatter their rows back (`pipeline/buckets.py`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp

from mjx_lite.collision import driver
from mjx_lite.pipeline import (
    actuation,
    buckets,
    flex,
    inertia,
    inverse,
    kernels,
    kinematics,
    passive,
    rne,
    sensor,
    sleep,
    support,
    tendon,
    transmission,
    velocity,
)
from mjx_lite.solver.solve import solve
from mjx_lite.types import Data, DisableBit, EnableBit, Model

__all__ = ["energy_pos", "energy_vel", "forward", "forward_skip", "forward_vel_acc", "fwd_acceleration",
           "fwd_actuation", "fwd_constraint", "fwd_position", "fwd_velocity"]  # fmt: skip


def _disabled(m: Model, bit: int) -> bool:
    return bool(m.opt.disableflags & bit)


def _enabled(m: Model, bit: int) -> bool:
    return bool(m.opt.enableflags & bit)


def _constraints_on(m: Model) -> bool:
    return not _disabled(m, DisableBit.CONSTRAINT)


def run(fn, m: Model, d: Data, *args, **kwargs) -> Data:
    """fn(m, d, ...) under the named scope fn.__name__: the stage's name is in the op names of the compiled
    program, so profiles (`jax.profiler`, XProf) and HLO dumps say which stage an operation belongs to."""
    with jax.named_scope(fn.__name__):
        return fn(m, d, *args, **kwargs)


def named(fn):
    """Decorator: every call of the stage fn(m, d, ...) runs under its named scope (see `run`)."""

    @functools.wraps(fn)
    def wrapped(m: Model, d: Data, *args, **kwargs) -> Data:
        return run(fn, m, d, *args, **kwargs)

    return wrapped


def run_unless(done: tuple, fn, m: Model, d: Data) -> Data:
    """`run(fn, m, d)` unless a fused kernel already computed the stage (its name is in `done`)."""
    return d if fn.__name__ in done else run(fn, m, d)


# ---- stages ------------------------------------------------------------------------------------------------


@named
def fwd_position(m: Model, d: Data, collide=None, constrain=None, defer_transmission: bool = False) -> Data:
    """Position-dependent computations (mj_fwdPosition).

    collide: None (the collision stage), or a stage `collide(m, d) -> d` run in its place (the derivative pass of
    `derivatives.transition` recomputes only the contacts that are active at its linearisation point).
    constrain: likewise for the constraint rows (`constraint.make_constraint_held` in that derivative pass).
    defer_transmission: the caller runs `fwd_velocity` next (`forward_pos_vel`): with `kernels.transmission_deferred(m)`
    the velocity pass's kernel computes the transmission (tendon actuators: kernels/transmission.py) and it is
    skipped here.

    With fused kernels (`Config.kernels`) the tree pass runs first as one kernel (`kernels.tree_pass`) and the stages it
    computed (kinematics, com_pos and, without tendon armature, crb and factor_m) are skipped below; otherwise it
    does nothing.
    """
    xpos0, xquat0 = d.xpos, d.xquat  # (the poses a sleeping tree keeps: sleep.wake compares)
    d, done = run(kernels.tree_pass, m, d)
    d = run_unless(done, kinematics.kinematics, m, d)
    d = run_unless(done, kinematics.com_pos, m, d)
    d = run(sleep.wake, m, d, xpos0, xquat0)  # sleeping islands (identity unless a tree may sleep)
    if m.nflex:
        d = run(flex.flex, m, d)
    d = run(tendon.tendon, m, d)
    d = run(sleep.wake_tendon, m, d)
    d = run_unless(done, inertia.crb, m, d)
    d = run_unless(done, inertia.factor_m, m, d)
    if _constraints_on(m):
        if not _disabled(m, DisableBit.CONTACT) and driver.contact_capacity(m) > 0:  # (a cap of 0 still counts)
            d = run(kernels.collision if collide is None else collide, m, d)  # driver.collision (fused under kernels)
        d = run(sleep.collide, m, d)  # sleeping bodies' contacts dropped; contacts and equalities wake islands
        # constraint.make_constraint, or its fused kernel; with Config.contact_buckets the rows of a bucket of the live
        # contacts, scattered to the padded rows (pipeline/buckets.py); `constrain`: the caller's (derivatives)
        if constrain is None:
            constrain = buckets.make_constraint if buckets.enabled(m) else kernels.make_constraint
        d = run(constrain, m, d)
        d = run(sleep.mask_rows, m, d)
    if defer_transmission and kernels.transmission_deferred(m):
        done += ("transmission",)  # (computed by the velocity pass's kernel)
    d = run_unless(done, transmission.transmission, m, d)  # (in the tree pass for joint actuators)
    return d


@named
def fwd_velocity(m: Model, d: Data, smooth: bool = False) -> Data:
    """Velocity-dependent computations (mj_fwdVelocity): ten/actuator velocity, cvel, passive, qfrc_bias.

    smooth: the caller runs the acceleration stages next with nothing in between that changes their inputs
    (`forward_acc(..., smooth=True)`): with `kernels.smooth_fused(m)` one fused kernel then computes this stage,
    actuation and fwd_acceleration (kernels/smooth.py), and `forward_acc` skips those two."""
    d, done = run(kernels.smooth_pass, m, d) if smooth else (d, ())
    if not done:  # fused: com_vel, rne, fwd_velocity_extras (passive; the transmission); otherwise nothing
        d, done = run(kernels.velocity_pass, m, d)
    d = run_unless(done, actuation.fwd_velocity_extras, m, d)
    if m.nflexedge:
        d = run(flex.flex_velocity, m, d)
    d = run_unless(done, velocity.com_vel, m, d)
    d = run_unless(done, passive.passive, m, d)
    d = run_unless(done, rne.rne, m, d)
    return d


@named
def fwd_actuation(m: Model, d: Data) -> Data:
    """Actuator forces and activation derivatives (mj_fwdActuation); one fused kernel on the fused path for stateless
    fixed/affine actuators (kernels/actuation.py)."""
    return kernels.actuation(m, d)


@named
def fwd_acceleration(m: Model, d: Data) -> Data:
    """qfrc_smooth = passive - bias + applied + actuator + J'xfrc; qacc_smooth = M^-1 qfrc_smooth (one fused kernel
    on the fused path)."""
    fused = kernels.acceleration(m, d)
    if fused is not None:
        return d.replace(qfrc_smooth=fused[0], qacc_smooth=fused[1])
    qfrc_smooth = d.qfrc_passive - d.qfrc_bias + d.qfrc_applied + d.qfrc_actuator + support.xfrc_accumulate(m, d)
    qacc_smooth = inertia.solve_m(m, d, qfrc_smooth)
    return d.replace(qfrc_smooth=qfrc_smooth, qacc_smooth=qacc_smooth)


@named
def fwd_constraint(m: Model, d: Data) -> Data:
    """Constraint forces and qacc (mj_fwdConstraint); without constraint rows qacc = qacc_smooth."""
    if _constraints_on(m) and m.njmax > 0:
        return run(buckets.solve if buckets.enabled(m) else solve, m, d)  # buckets: the rows make_constraint chose
    return d.replace(
        qacc=d.qacc_smooth,
        qfrc_constraint=jp.zeros_like(d.qfrc_smooth),
        solver_niter=jp.zeros_like(d.solver_niter),
        solver_niter_island=jp.zeros_like(d.solver_niter_island),
    )


@named
def energy_pos(m: Model, d: Data) -> Data:
    """energy[0]: potential energy under the energy enable flag (mj_energyPos), else energy = 0."""
    if _enabled(m, EnableBit.ENERGY):
        return d.replace(energy=d.energy.at[0].set(sensor.energy_pos(m, d)))
    return d.replace(energy=jp.zeros_like(d.energy))


@named
def energy_vel(m: Model, d: Data) -> Data:
    """energy[1]: kinetic energy under the energy enable flag (mj_energyVel)."""
    if _enabled(m, EnableBit.ENERGY):
        return d.replace(energy=d.energy.at[1].set(sensor.energy_vel(m, d)))
    return d


# ---- public API ----------------------------------------------------------------------------------------


def forward_skip(m: Model, d: Data, sensors: bool | jax.Array = True) -> Data:
    """mj_forwardSkip(m, d, mjSTAGE_NONE, skipsensor=not sensors). Energy is computed either way (as mj_forwardSkip
    does: RK4's stages leave the last stage's energy in Data). `sensors` may be a traced () bool (not batched:
    the sensor stages run under `lax.cond`; RK4's merged stage loop, `integrate.rk4_forward`)."""
    return forward_acc(m, forward_pos_vel(m, d, sensors, smooth=True), sensors, smooth=True)


def _sensor_stage(fn, m: Model, d: Data, sensors: bool | jax.Array) -> Data:
    """run(fn, m, d) when `sensors` (a Python bool, or a traced () bool: `lax.cond`), else d."""
    if isinstance(sensors, bool):
        return run(fn, m, d) if sensors else d
    if not m.nsensor or _disabled(m, DisableBit.SENSOR):  # nothing to compute: no cond in the graph
        return run(fn, m, d)
    return jax.lax.cond(sensors, lambda d: run(fn, m, d), lambda d: d, d)


def forward_pos_vel(m: Model, d: Data, sensors: bool | jax.Array = True, collide=None, constrain=None,
                    smooth: bool = False) -> Data:  # fmt: skip
    """The first half of `forward_skip`: the position and velocity stages, with their sensors and energy (collide,
    constrain: see `fwd_position`; smooth: see `fwd_velocity`, for a caller that runs `forward_acc(..., smooth=True)`
    next on the result)."""
    d = fwd_position(m, d, collide, constrain, defer_transmission=True)
    d = _sensor_stage(kernels.sensor_pos, m, d, sensors)  # sensor.sensor_pos (fused under kernels)
    d = energy_pos(m, d)
    d = fwd_velocity(m, d, smooth)
    d = _sensor_stage(kernels.sensor_vel, m, d, sensors)  # sensor.sensor_vel (fused under kernels)
    d = energy_vel(m, d)
    return d


def forward_vel_acc(m: Model, d: Data, sensors: bool = True) -> Data:
    """mj_forwardSkip(m, d, mjSTAGE_POS, not sensors): the velocity and acceleration stages with their sensors (the
    recomputation after trees fall asleep, `sleep.fall_asleep`). The constraint rows are rebuilt first: here their
    velocity terms (efc_vel, efc_aref) are computed with the rows (make_constraint), MuJoCo's in the velocity stage."""
    if _constraints_on(m):
        d = run(buckets.make_constraint if buckets.enabled(m) else kernels.make_constraint, m, d)
        d = run(sleep.mask_rows, m, d)
    d = fwd_velocity(m, d)
    d = _sensor_stage(kernels.sensor_vel, m, d, sensors)  # sensor.sensor_vel (fused under kernels)
    d = energy_vel(m, d)
    return forward_acc(m, d, sensors)


def forward_acc(m: Model, d: Data, sensors: bool | jax.Array = True, smooth: bool = False) -> Data:
    """The second half of `forward_skip`: actuation, acceleration, constraints and the acceleration sensors (smooth:
    d comes from `forward_pos_vel(..., smooth=True)`, whose fused kernel computed actuation and fwd_acceleration
    when `kernels.smooth_fused(m)`)."""
    if not (smooth and kernels.smooth_fused(m)):
        d = fwd_actuation(m, d)
        d = fwd_acceleration(m, d)
    d = fwd_constraint(m, d)
    d = _sensor_stage(kernels.sensor_acc, m, d, sensors)  # sensor.sensor_acc (fused under kernels)
    if _enabled(m, EnableBit.FWDINV):  # solver_fwdinv (mj_compareFwdInv)
        d = inverse.compare_fwd_inv(m, d)
    return d


def forward(m: Model, d: Data) -> Data:
    """Forward dynamics (mj_forward): every derived quantity of the state, qacc and the sensors."""
    return forward_skip(m, d, sensors=True)
