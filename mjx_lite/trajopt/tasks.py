"""Planning tasks as a test bed (the tests, benchmarks/planners.py and the trajectory optimisation notebook share
them): a model, a start state, a cost in the style of MuJoCo MPC's residuals (`trajopt.costs`), a horizon, initial
controls and a goal check on the end state. A task is built once per horizon (cached): its cost functions are the
same objects on every call, so the planners' compilations are reused.

- `cartpole()`: the bundled cartpole (RK4, 0.01 s, force limited to 10 N) swings its pole up from hanging at rest
  within `horizon` steps (default 2 s) and ends balanced: |angle| <= ANGLE_TOL, |angular velocity| <= RATE_TOL.
- `acrobot()`: a two-link acrobot (dm_control's dimensions: 1 m links of 1 kg, elbow motor of 2 N m) swings up
  from hanging at rest: both links upright within ANGLE_TOL at the end, rates within ACROBOT_RATE_TOL. Not solved
  yet: iLQR in 30 iterations over 4 s ends 15 to 29 tolerances away from 14 sinusoidal and square-wave starts, over
  6 s 9 to 31 from 5 (measured; other costs and horizons: CHANGELOG, issue 42).
- `reacher()`: the bundled 2-link planar reacher brings its fingertip to a target: within REACH_TOL at the end.
- `quadruped_stand()` (contacts): the bundled quadruped (free torso, 8 torque motors, feet and torso touching the
  floor) lying where it collapsed with its motors off stands up: torso at STAND_HEIGHT within HEIGHT_TOL, its z axis
  within UPRIGHT_TOL of vertical, at the end.
- `box_push()` (contacts): the bundled box_push finger pushes the box to BOX_TARGET (within BOX_TOL at the end).
  The model is configured with the smoothed contact gradients (`Config(contact_gradients="smooth")`) for iLQR's
  Jacobians; the cost also has MuJoCo MPC's "reach" residual (finger to box), which alone gives a gradient before
  the first touch.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.trajopt import common, costs, sampling
from mjx_lite.trajopt.ilqr import ilqr
from mjx_lite.trajopt.mppi import mppi

__all__ = ["ACROBOT", "PLANNERS", "TASKS", "Task", "acrobot", "box_push", "cartpole", "final_error", "plan",
           "quadruped_stand", "reacher"]

ANGLE_TOL = 0.1  # rad: "upright" at the end of a swing-up
RATE_TOL = 0.5  # rad/s: "balanced" (cartpole)
ACROBOT_RATE_TOL = 1.0  # rad/s (acrobot)
REACH_TOL = 0.01  # m: the reacher's fingertip from its target

# dm_control's acrobot (suite/acrobot.xml) without its floor, decorations and includes; RK4 at 0.01 s, no constraints
ACROBOT = """
<mujoco model="acrobot">
  <option timestep="0.01" integrator="RK4"><flag constraint="disable"/></option>
  <default>
    <joint damping=".05"/>
    <geom type="capsule" mass="1" contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <body name="upper_arm" pos="0 0 2">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom name="upper_arm" fromto="0 0 0 0 0 1" size="0.05"/>
      <body name="lower_arm" pos="0 0 1">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom name="lower_arm" fromto="0 0 0 0 0 1" size="0.049"/>
        <site name="tip" pos="0 0 1" size="0.01"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="elbow" joint="elbow" gear="2" ctrllimited="true" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


@dataclasses.dataclass(frozen=True, eq=False)
class Task:
    """m, d0: model and start state; cost(d, u, t), terminal_cost(d): the objective; horizon: T steps;
    ctrl_init: (T, nu) initial controls; success(qpos, qvel, d_final) -> bool: the goal check on the end state
    (qpos (nq,), qvel (nv,) of the last state; d_final: the forward pass there, for site positions);
    error(qpos, qvel, d_final) -> float: the distance from the goal in units of its tolerance (success: <= 1);
    sampler: the sampling planners' spline and noise options for this task (knots, interpolation, noise_std,
    noise_decay), as keyword arguments."""

    name: str
    m: object
    d0: object
    cost: Callable
    terminal_cost: Callable
    horizon: int
    ctrl_init: jax.Array
    success: Callable
    error: Callable
    sampler: dict = dataclasses.field(default_factory=dict)


def _wrap(angle):
    return float(np.angle(np.exp(1j * float(angle))))


def _cartpole_cost(d, u, t):
    # residuals: distance from vertical, cart from the centre, velocities, control (MuJoCo MPC's cartpole task)
    return costs.weighted([(1.0, 1.0 - jp.cos(d.qpos[1])), (0.2, costs.quadratic(d.qpos[0])),
                           (0.02, costs.quadratic(d.qvel)), (0.02, costs.quadratic(u))])  # fmt: skip


def _cartpole_terminal(d):
    return costs.weighted([(1000.0, 1.0 - jp.cos(d.qpos[1])), (40.0, costs.quadratic(d.qvel[1])),
                           (20.0, costs.quadratic(d.qvel[0])), (20.0, costs.quadratic(d.qpos[0]))])  # fmt: skip


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def cartpole(horizon: int = 200) -> Task:
    """The bundled cartpole hanging at rest (hinge = pi; upright is 0). Initial controls: a full-range sinusoid of
    period 1.05 s (hanging at rest with zero controls is a stationary point: every gradient there is 0). iLQR is
    sensitive to it (measured, 30 iterations, 2 s: amplitude 1 at 0.06 rad per step solved, as at 0.05; amplitude
    0.2 or 0.5, or period 1.46 s, ended 0.1 to 0.3 rad from upright or still turning)."""
    m = mjx_lite.load_mjcf("cartpole")
    d0 = mjx_lite.make_data(m)
    d0 = d0.replace(qpos=jp.asarray([0.0, np.pi], d0.qpos.dtype))
    init = jp.asarray(np.sin(np.arange(horizon) * 0.06)[:, None], d0.qpos.dtype)

    def error(qpos, qvel, d):
        return max(abs(_wrap(qpos[1])) / ANGLE_TOL, abs(float(qvel[1])) / RATE_TOL)

    sampler = dict(knots=10, interpolation="cubic", noise_std=0.6, noise_decay=0.95)
    return Task("cartpole", m, d0, _cartpole_cost, _cartpole_terminal, horizon, init,
                lambda q, v, d: error(q, v, d) <= 1.0, error, sampler)  # fmt: skip


def _acrobot_cost(d, u, t):
    # residuals: the tip from its upright position (0, 0, 4), velocities, control
    tip = d.site_xpos[0] - jp.asarray([0.0, 0.0, 4.0])
    return costs.weighted([(1.0, costs.quadratic(tip)), (0.01, costs.quadratic(d.qvel)),
                           (0.01, costs.quadratic(u))])  # fmt: skip


def _acrobot_terminal(d):
    up = jp.stack([1.0 - jp.cos(d.qpos[0]), 1.0 - jp.cos(d.qpos[0] + d.qpos[1])])
    return costs.weighted([(1000.0, jp.sum(up)), (50.0, costs.quadratic(d.qvel))])


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def acrobot(horizon: int = 400) -> Task:
    """The acrobot (`ACROBOT`) hanging at rest (shoulder = pi; upright is shoulder = elbow = 0), default 4 s."""
    m = mjx_lite.load_mjcf_string(ACROBOT)
    d0 = mjx_lite.make_data(m)
    d0 = d0.replace(qpos=jp.asarray([np.pi, 0.0], d0.qpos.dtype))
    init = jp.asarray(0.5 * np.sin(np.arange(horizon) * 0.05)[:, None])

    def error(qpos, qvel, d):
        a = max(abs(_wrap(qpos[0])), abs(_wrap(qpos[0] + qpos[1])))
        return max(a / ANGLE_TOL, float(np.max(np.abs(np.asarray(qvel)))) / ACROBOT_RATE_TOL)

    sampler = dict(knots=12, interpolation="cubic", noise_std=0.6, noise_decay=0.96)
    return Task("acrobot", m, d0, _acrobot_cost, _acrobot_terminal, horizon, init,
                lambda q, v, d: error(q, v, d) <= 1.0, error, sampler)  # fmt: skip


REACHER_TARGET = (0.12, 0.15)


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def reacher(horizon: int = 150) -> Task:
    """The bundled reacher2 at rest, fingertip to REACHER_TARGET (the model's target site) in 1.5 s."""
    m = mjx_lite.load_mjcf("reacher2")
    d0 = mjx_lite.make_data(m)
    site = m.names["site"].index("fingertip")
    target = jp.asarray(REACHER_TARGET, d0.qpos.dtype)

    def cost(d, u, t):
        return costs.weighted([(1.0, costs.quadratic(d.site_xpos[site, :2] - target)),
                               (1e-4, costs.quadratic(u))])  # fmt: skip

    def terminal(d):
        return costs.weighted([(100.0, costs.quadratic(d.site_xpos[site, :2] - target)),
                               (0.01, costs.quadratic(d.qvel))])  # fmt: skip

    def error(qpos, qvel, d):
        return float(np.linalg.norm(np.asarray(d.site_xpos[site, :2]) - np.asarray(REACHER_TARGET))) / REACH_TOL

    sampler = dict(knots=6, interpolation="cubic", noise_std=0.5, noise_decay=0.93)
    return Task("reacher", m, d0, cost, terminal, horizon, jp.zeros((horizon, m.nu), d0.qpos.dtype),
                lambda q, v, d: error(q, v, d) <= 1.0, error, sampler)  # fmt: skip


STAND_HEIGHT = 0.4  # m: the quadruped's torso standing on slightly bent legs (straight legs: 0.44)
HEIGHT_TOL = 0.05  # m
UPRIGHT_TOL = 0.05  # 1 - (torso z axis)_z at the end (about 18 degrees of tilt)
# the quadruped's start: legs folded (knees near their limits), torso 0.25 m up, then SETTLE_STEPS (2 s) with the
# motors off: it lies on its belly (torso on the floor, 8 contacts, at rest; measured with MuJoCo C)
FOLDED = (0.0, -2.2, 0.0, -2.2, 0.0, 2.2, 0.0, 2.2)  # hip, knee: front left, front right, hind left, hind right
SETTLE_STEPS = 400


def _torso_up(d, torso):
    return d.xmat[torso].reshape(3, 3)[2, 2]


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def quadruped_stand(horizon: int = 200) -> Task:
    """The bundled quadruped (implicitfast, 5 ms, 8 torque motors of gear 12) lying on its belly, legs folded
    (`FOLDED`, settled), to standing: residuals (MuJoCo MPC's quadruped style) torso height
    - STAND_HEIGHT, 1 - torso z axis up, torso xy drift, joint velocities, controls. Default 1 s."""
    m = mjx_lite.load_mjcf("quadruped")
    d0 = mjx_lite.make_data(m)
    d0 = d0.replace(qpos=d0.qpos.at[2].set(0.25).at[7:].set(jp.asarray(FOLDED, d0.qpos.dtype)))
    d0 = jax.jit(lambda d: jax.lax.fori_loop(0, SETTLE_STEPS, lambda i, d: mjx_lite.step(m, d), d))(d0)
    d0 = d0.replace(time=jp.zeros_like(d0.time))
    torso = m.names["body"].index("torso")
    xy0 = jp.asarray(np.asarray(d0.qpos[:2]))

    def residual_cost(d, u, w):
        height = d.xpos[torso, 2] - STAND_HEIGHT
        return costs.weighted([(w, costs.quadratic(height)), (w / 4, 1.0 - _torso_up(d, torso)),
                               (1.0, costs.quadratic(d.qpos[:2] - xy0)), (1e-3, costs.quadratic(d.qvel)),
                               (1e-3, costs.quadratic(u))])  # fmt: skip

    def cost(d, u, t):
        return residual_cost(d, u, 10.0)

    def terminal(d):
        return residual_cost(d, jp.zeros((m.nu,), d.qpos.dtype), 1000.0) + 1.0 * costs.quadratic(d.qvel)

    def error(qpos, qvel, d):
        return max(abs(float(d.xpos[torso, 2]) - STAND_HEIGHT) / HEIGHT_TOL,
                   (1.0 - float(_torso_up(d, torso))) / UPRIGHT_TOL)  # fmt: skip

    sampler = dict(knots=6, interpolation="cubic", noise_std=0.5, noise_decay=0.95)
    return Task("quadruped_stand", m, d0, cost, terminal, horizon, jp.zeros((horizon, m.nu), d0.qpos.dtype),
                lambda q, v, d: error(q, v, d) <= 1.0, error, sampler)  # fmt: skip


BOX_TARGET = (0.25, 0.0)  # m: where the box's centre should end (it starts at the origin)
BOX_TOL = 0.03  # m


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def box_push(horizon: int = 100) -> Task:
    """The bundled box_push (Euler, 10 ms; a force-driven finger 4 cm from a free box on the floor) pushes the box
    to BOX_TARGET in `horizon` steps (default 1 s). Residuals: box xy to the target, finger to box (reach), box
    velocity at the end, controls. Smoothed contact gradients: std 3 cm on the finger's dofs, 8 samples."""
    m = mjx_lite.load_mjcf("box_push")
    m = mjx_lite.configure(m, contact_gradients="smooth", contact_smoothing_std=0.03, contact_smoothing_dofs=(0, 1),
                           contact_smoothing_samples=8)  # fmt: skip
    d0 = mjx_lite.make_data(m)
    target = jp.asarray(BOX_TARGET, d0.qpos.dtype)
    finger, box = m.names["body"].index("finger"), m.names["body"].index("box")

    def cost(d, u, t):
        return costs.weighted([(1.0, costs.quadratic(d.xpos[box, :2] - target)),
                               (0.1, costs.quadratic(d.xpos[finger, :2] - d.xpos[box, :2])),
                               (1e-3, costs.quadratic(u))])  # fmt: skip

    def terminal(d):
        return costs.weighted([(50.0, costs.quadratic(d.xpos[box, :2] - target)),
                               (1.0, costs.quadratic(d.qvel[2:5]))])  # fmt: skip

    def error(qpos, qvel, d):
        return float(np.linalg.norm(np.asarray(d.xpos[box, :2]) - np.asarray(BOX_TARGET))) / BOX_TOL

    sampler = dict(knots=6, interpolation="cubic", noise_std=0.5, noise_decay=0.95)
    return Task("box_push", m, d0, cost, terminal, horizon, jp.zeros((horizon, m.nu), d0.qpos.dtype),
                lambda q, v, d: error(q, v, d) <= 1.0, error, sampler)  # fmt: skip


TASKS = {"cartpole": cartpole, "acrobot": acrobot, "reacher": reacher, "quadruped_stand": quadruped_stand,
         "box_push": box_push}  # fmt: skip
PLANNERS = ("ilqr", "ps", "mppi")  # iLQR, predictive sampling, MPPI


def plan(task: Task, planner: str, iterations: int, *, samples: int = 256, rng: jax.Array | None = None):
    """Run `planner` (one of PLANNERS) on `task` from its initial controls; the samplers use `task.sampler`."""
    kw = dict(terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init)
    if planner == "ilqr":
        return ilqr(task.m, task.d0, task.cost, task.horizon, iterations=iterations, **kw)
    if planner not in PLANNERS:
        raise ValueError(f"tasks.plan: planner must be one of {PLANNERS}, not {planner!r}")
    fn = sampling.predictive_sampling if planner == "ps" else mppi
    opts = dict(task.sampler)
    opts["knots"] = min(opts["knots"], task.horizon)
    return fn(task.m, task.d0, task.cost, task.horizon, samples=samples, rng=rng, iterations=iterations, **opts,
              **kw)  # fmt: skip


def final_error(task: Task, ctrl: jax.Array) -> float:
    """`task.error` at the end of the rollout of `ctrl` (T, nu) from the task's start (<= 1: the goal is met)."""
    d = common.rollout(task.m, task.d0, ctrl)
    last = jax.tree.map(lambda x: x[-1], d)
    return task.error(np.asarray(last.qpos), np.asarray(last.qvel), last)
