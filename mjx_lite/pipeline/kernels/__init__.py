"""Fused Pallas kernels: the second execution path of the pipeline's stages (DESIGN.md, "Two execution paths, one
recipe"; docs/kernels.md).

`Config(kernels="fused")` runs the stages that have a kernel here as Pallas kernels over
blocks of environments; the others stay XLA operations in the same program. pipeline/forward.py keeps the one
stage list: a fused group runs first and the stages it computed are skipped.

  launch.py   the launcher: layouts, the custom_vmap rule that turns the user's vmap into blocks of
              environments, custom_jvp derivatives through the XLA twin
  tree.py     kinematics + com_pos + crb (+ factor.py's factorisation) as one kernel (the position tree pass)
  velocity.py com_vel + rne (+ passive.py: the joints' passive forces; transmission.py: fwd_velocity_extras and
              the transmission of tendon actuators) as one kernel
  smooth.py   the velocity pass, the actuators' velocities, actuation.py and factor.py's fwd_acceleration as one
              kernel (qvel to qacc_smooth), where the step runs the stages back to back
  factor.py   the L'DL factorisation; fwd_acceleration (qfrc_smooth, J'xfrc, M^-1 qfrc_smooth) as one kernel, and the
              solve (M + diag(shift))^-1 x
  primal.py   the constraint solver's Newton / CG iterations as one kernel
  pgs.py      the constraint solver's PGS sweeps (the dual method) as one kernel
  primal_tiled.py  Newton's solver kernel on (environments, rows, dofs) tiles (`Launch.dof_tile`)
  collide.py  the primitive colliders (plane/sphere/capsule pairs, plane-box, sphere-box, capsule-box) and height
              field-sphere of static pair groups as one kernel
  contact_params.py  those groups' contact parameters (mj_contactParam: detection margins, friction, solref, ...)
              as one kernel of the Model alone (one lane under the usual vmap)
  actuation.py  the actuators' forces (mj_fwdActuation) of stateless fixed/affine actuators as one kernel
  sensor_acc.py  mj_sensorAcc's mj_rnePostConstraint (cacc, cfrc_int, cfrc_ext with the contact wrenches) and the
              accelerometer, force, torque and frame acceleration sensors as one kernel
  sensor_posvel.py  mj_sensorPos's and mj_sensorVel's joint, tendon, actuator, frame, subtree, velocimeter and gyro
              sensors (and mj_subtreeVel) as one kernel per stage
  advance.py  the integrator's update qvel + h qacc and mj_integratePos (Euler, implicit, implicitfast); Euler with
              implicit damping whole (the damping, factor.py's shifted factorisation and solve, the update)
  rows.py     the constraint rows (make_constraint) of connect/weld/joint/tendon/flex equalities, dof and tendon
              friction, joint, ball and tendon limits and pyramidal or elliptic contacts as one kernel
  rows_tiled.py  the rows kernel on (environments, rows, dofs) tiles (`Launch.rows_tile`)
"""

from __future__ import annotations

import jax

from mjx_lite.collision import driver
from mjx_lite.config import kernels as _kernels
from mjx_lite.pipeline import actuation as _xla_actuation
from mjx_lite.pipeline import constraint, inertia, sensor
from mjx_lite.pipeline.kernels import actuation as _actuation
from mjx_lite.pipeline.kernels import advance as _advance
from mjx_lite.pipeline.kernels import collide as _collide
from mjx_lite.pipeline.kernels import factor as _factor
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import pgs as _pgs
from mjx_lite.pipeline.kernels import primal as _primal
from mjx_lite.pipeline.kernels import primal_tiled as _primal_tiled
from mjx_lite.pipeline.kernels import rows as _rows
from mjx_lite.pipeline.kernels import rows_tiled as _rows_tiled
from mjx_lite.pipeline.kernels import sensor_acc as _sensor_acc
from mjx_lite.pipeline.kernels import sensor_posvel as _sensor_posvel
from mjx_lite.pipeline.kernels import smooth as _smooth
from mjx_lite.pipeline.kernels import transmission as _transmission
from mjx_lite.pipeline.kernels import tree as _tree
from mjx_lite.pipeline.kernels import velocity as _velocity
from mjx_lite.solver import common as _common
from mjx_lite.types import Data, Model, Stage

__all__ = ["SMOOTH_ACC_FIELDS", "acceleration", "actuation", "actuation_fused", "advance", "advance_fused",
           "collide_fused", "collision", "euler_advance", "euler_fused", "fused", "launch_of", "make_constraint",
           "pgs_fused", "primal_fused", "rows_fused", "sensor_acc", "sensor_acc_fused", "sensor_pos",
           "sensor_posvel_fused", "sensor_vel", "smooth_fused", "smooth_pass", "solve_pgs", "solve_primal",
           "solve_shifted", "transmission_deferred", "tree_pass", "velocity_pass"]


SMOOTH_ACC_FIELDS = _smooth.ACC_FIELDS  # the acceleration stages' fields the smooth pass computes


def fused(m: Model) -> bool:
    """Static: the model runs the fused kernels (`Config.kernels`, "auto" resolved at trace time)."""
    return _kernels(m.config) == "fused"


def launch_of(m: Model) -> launch.Launch:
    """How the kernels launch for `m`: its layout (`Config.kernel_layout`); compiled by Triton on a GPU, Pallas'
    interpret mode elsewhere (at trace time, by JAX's default backend)."""
    return launch.Launch(layout=m.config.kernel_layout, interpret=jax.default_backend() != "gpu")


def tree_pass(m: Model, d: Data) -> tuple[Data, tuple]:
    """The fused tree pass (kinematics, com_pos, crb, factor_m) when `fused(m)`: (d, names of the stages it
    computed); (d, ()) on the XLA path."""
    if not fused(m):
        return d, ()
    return _tree.tree(m, d, launch_of(m))


def velocity_pass(m: Model, d: Data) -> tuple[Data, tuple]:
    """The fused velocity pass (com_vel, rne, and passive when its terms are the joints' only) when `fused(m)` and
    the model has dofs: (d, names of the stages it computed); (d, ()) otherwise."""
    if not (fused(m) and _velocity.fusable(m)):
        return d, ()
    return _velocity.velocity_pass(m, d, launch_of(m))


def transmission_deferred(m: Model) -> bool:
    """Static: the velocity pass's kernel computes mj_transmission (`fused(m)`, tendon actuators beside slide/hinge
    joint ones, no actuatorpos sensor: kernels/transmission.py), so `forward.forward_pos_vel` skips the position
    stage's XLA transmission."""
    return fused(m) and _velocity.fusable(m) and _transmission.fusable(m)


def smooth_fused(m: Model) -> bool:
    """Static: the velocity pass, the actuators' velocities, actuation and fwd_acceleration run as one fused kernel
    where the caller runs them back to back (`fused(m)` and kernels/smooth.py's `fusable`)."""
    return fused(m) and _smooth.fusable(m)


def smooth_pass(m: Model, d: Data) -> tuple[Data, tuple]:
    """The smooth pass (kernels/smooth.py) when `smooth_fused(m)`: (d, names of the stages it computed:
    fwd_velocity_extras, com_vel, passive, rne, actuation, fwd_acceleration); (d, ()) otherwise."""
    if not smooth_fused(m):
        return d, ()
    d = _smooth.smooth_pass(m, d, launch_of(m))
    return d, ("fwd_velocity_extras", "com_vel", "passive", "rne", "actuation", "fwd_acceleration")


def collide_fused(m: Model) -> bool:
    """Static: some pair groups collide in the fused kernel (`fused(m)` and a group with static slots of a kind
    kernels/collide.py computes: plane-sphere/capsule/box, sphere-sphere/capsule/box, capsule-capsule/box, height
    field-sphere)."""
    return fused(m) and _collide.fusable(m)


def collision(m: Model, d: Data) -> Data:
    """`driver.collision`, the groups `collide_fused` covers computed by two fused kernels (their contact parameters
    and their colliders; the others: XLA)."""
    if not collide_fused(m):
        return driver.collision(m, d)
    return _collide.collision(m, d, launch_of(m))


def rows_fused(m: Model) -> bool:
    """Static: the constraint rows run as the fused kernel (`fused(m)` and rows of the kinds kernels/rows.py builds:
    connect, weld, joint, tendon and flex edge equalities, dof and tendon friction loss, slide/hinge, ball and tendon
    limits, pyramidal or elliptic contacts of static slots)."""
    return fused(m) and _rows.fusable(m)


def make_constraint(m: Model, d: Data) -> Data:
    """`constraint.make_constraint`, its rows built by one fused kernel when `rows_fused(m)` (on row tiles,
    kernels/rows_tiled.py, when the launch asks for them: `Launch.rows_tile`)."""
    if not rows_fused(m):
        return constraint.make_constraint(m, d)
    how = launch_of(m)
    if how.rows_tile:
        return _rows_tiled.make_constraint(m, d, how)
    return _rows.make_constraint(m, d, how)


def actuation_fused(m: Model) -> bool:
    """Static: the actuation stage runs as the fused kernel (`fused(m)` and actuators kernels/actuation.py computes:
    stateless, fixed or affine gain and bias, one control and output each)."""
    return fused(m) and _actuation.fusable(m)


def actuation(m: Model, d: Data) -> Data:
    """`actuation.actuation` (mj_fwdActuation), as one fused kernel when `actuation_fused(m)`."""
    if not actuation_fused(m):
        return _xla_actuation.actuation(m, d)
    return _actuation.actuation(m, d, launch_of(m))


def _solve_fused(m: Model, x: jax.Array) -> bool:
    return fused(m) and _factor.fusable(m) and x.ndim == 1


def acceleration(m: Model, d: Data) -> tuple | None:
    """fwd_acceleration's (qfrc_smooth, qacc_smooth) as one fused kernel (kernels/factor.py: the forces' sum, the
    Cartesian wrenches' J'xfrc and M^-1 qfrc_smooth) when `fused(m)` (tree factorisation, dofs); None otherwise (the
    stage's XLA code runs)."""
    if not (fused(m) and _factor.fusable(m)):
        return None
    return _factor.acceleration(m, d, launch_of(m))


def solve_shifted(m: Model, d: Data, shift: jax.Array, x: jax.Array) -> jax.Array:
    """(M + diag(shift))^-1 x (`inertia.solve_shifted`), x (nv,): factorisation and solve as one fused kernel when
    `fused(m)` (tree factorisation), else XLA."""
    if not _solve_fused(m, x):
        return inertia.solve_shifted(m, d, shift, x)
    return _factor.solve_shifted(m, d, shift, x, launch_of(m))


def advance_fused(m: Model) -> bool:
    """Static: the integrator's velocity and position update runs as the fused kernel (`fused(m)`, dofs)."""
    return fused(m) and _advance.fusable(m)


def advance(m: Model, qpos: jax.Array, qvel: jax.Array, qacc: jax.Array, integrate_pos) -> tuple:
    """(qpos', qvel') of the integrator's update as one fused kernel (the caller checks `advance_fused`; its
    `integrate_pos` is the XLA twin's), see `kernels.advance.advance`."""
    return _advance.advance(m, qpos, qvel, qacc, integrate_pos, launch_of(m))


def euler_fused(m: Model) -> bool:
    """Static: Euler's implicit damping ((M + h B)^-1 (qfrc_smooth + qfrc_constraint)) and the update run as one fused
    kernel (`fused(m)`, dofs, the tree factorisation, no sleeping trees: kernels/advance.py's `euler`)."""
    return fused(m) and _advance.euler_fusable(m)


def euler_advance(m: Model, d: Data, integrate_pos) -> tuple:
    """(qpos', qvel') of Euler with implicit damping as one fused kernel (the caller checks `euler_fused` and that the
    damping is implicit; `integrate_pos` is the XLA twin's), see `kernels.advance.euler`."""
    return _advance.euler(m, d, integrate_pos, launch_of(m))


def primal_fused(m: Model, layout: _common.Layout, sparse_j: bool) -> bool:
    """Static: the constraint solver runs as the fused kernel (`fused(m)`, and Newton or CG (pyramidal or elliptic
    cones) with a dense efc_J: kernels/primal.py)."""
    return fused(m) and _primal.fusable(m, layout, sparse_j)


def solve_primal(m: Model, layout: _common.Layout, p: _common.Problem, start: tuple, factors: tuple,
                 kw: dict) -> tuple:  # fmt: skip
    """The Newton / CG iterations of the solver as one fused kernel (the caller checks `primal_fused`): (qacc, jar,
    force, J' force, niter, improvement, gradient), see `kernels.primal.solve`; Newton on dof tiles
    (kernels/primal_tiled.py) when the launch asks for them (`Launch.dof_tile`)."""
    how = launch_of(m)
    if how.dof_tile and _primal_tiled.fusable(m, layout, p.J_colind is not None):
        return _primal_tiled.solve(m, layout, p, start, kw, how)
    return _primal.solve(m, layout, p, start, factors, kw, how)


def pgs_fused(m: Model, layout: _common.Layout, sparse_j: bool) -> bool:
    """Static: the constraint solver runs as the fused PGS kernel (`fused(m)`, PGS (pyramidal or elliptic cones) with
    a dense efc_J and the tree factorisation: kernels/pgs.py)."""
    return fused(m) and _pgs.fusable(m, layout, sparse_j)


def solve_pgs(m: Model, layout: _common.Layout, p: _common.Problem, qacc_warmstart, block_key: tuple, factors: tuple,
              kw: dict) -> tuple:  # fmt: skip
    """PGS's sweeps as one fused kernel (the caller checks `pgs_fused`): (efc_force, qacc, jar, J' force, niter,
    improvement, efc_b), see `kernels.pgs.solve`."""
    return _pgs.solve(m, layout, p, qacc_warmstart, block_key, factors, kw, launch_of(m))


def sensor_acc_fused(m: Model) -> bool:
    """Static: the acceleration sensors' stage runs its mj_rnePostConstraint and its accelerometer, force, torque and
    frame acceleration sensors as the fused kernel (`fused(m)`, a sensor of the stage needs cacc or cfrc_int, dofs, no
    flexes, static contact slots: kernels/sensor_acc.py)."""
    return fused(m) and _sensor_acc.fusable(m)


def sensor_acc(m: Model, d: Data) -> Data:
    """`sensor.sensor_acc` (mj_sensorAcc), as one fused kernel and the uncovered sensors' XLA code when
    `sensor_acc_fused(m)`."""
    if not sensor_acc_fused(m):
        return sensor.sensor_acc(m, d)
    return _sensor_acc.sensor_acc(m, d, launch_of(m))


def sensor_posvel_fused(m: Model, stage: int) -> bool:
    """Static: the position (stage POS) or velocity (VEL) sensors' stage runs its covered sensors as the fused kernel
    (`fused(m)` and a sensor of a type kernels/sensor_posvel.py computes: joint, tendon, actuator, frame, subtree,
    velocimeter, gyro)."""
    return fused(m) and _sensor_posvel.fusable(m, stage)


def sensor_pos(m: Model, d: Data) -> Data:
    """`sensor.sensor_pos` (mj_sensorPos), its covered sensors as one fused kernel when `sensor_posvel_fused`."""
    if not sensor_posvel_fused(m, Stage.POS):
        return sensor.sensor_pos(m, d)
    return _sensor_posvel.sensor_stage(m, d, Stage.POS, launch_of(m))


def sensor_vel(m: Model, d: Data) -> Data:
    """`sensor.sensor_vel` (mj_sensorVel, with mj_subtreeVel when a sensor needs it), its covered sensors as one fused
    kernel when `sensor_posvel_fused`."""
    if not sensor_posvel_fused(m, Stage.VEL):
        return sensor.sensor_vel(m, d)
    return _sensor_posvel.sensor_stage(m, d, Stage.VEL, launch_of(m))
