"""Planning tasks as a test bed (the tests, benchmarks/planners.py and the trajectory optimisation notebook share
them): a model, a start state, a cost in the style of MuJoCo MPC's residuals (`trajopt.costs`), a horizon, initial
controls and a goal check on the end state. A task is built once per horizon (cached): its cost functions are the
same objects on every call, so the planners' compilations are reused.

- `cartpole()`: the bundled cartpole (RK4, 0.01 s, force limited to 10 N) swings its pole up from hanging at rest
  within `horizon` steps (default 2 s) and ends balanced: |angle| <= ANGLE_TOL, |angular velocity| <= RATE_TOL.
- `acrobot()`: MuJoCo MPC's acrobot task (dm_control's acrobot, Euler; its residuals and weights; 2 s horizon)
  swings up from hanging at rest in closed loop (`run_closed_loop(task, "ilqr")`): the tip within ACROBOT_TIP_TOL of
  the target and the joints slower than ACROBOT_RATE_TOL over the last ACROBOT_HOLD steps. Its terminal cost adds
  an energy residual to MuJoCo MPC's (see `acrobot`).
- `acrobot_open()`: the same swing-up as one open-loop plan over 7 s from an energy pump's controls
  (`acrobot_pump`), with a terminal-weighted cost (see `acrobot_open`); the same goal check at the end.
- `reacher()`: the bundled 2-link planar reacher brings its fingertip to a target: within REACH_TOL at the end.
- `quadruped_stand()` (contacts): the bundled quadruped (free torso, 8 torque motors, feet and torso touching the
  floor) lying where it collapsed with its motors off stands up: torso at STAND_HEIGHT within HEIGHT_TOL, its z axis
  within UPRIGHT_TOL of vertical, at the end. Residuals of MuJoCo MPC's quadruped (height, upright, position,
  posture, effort) read from the state alone.
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
from mjx_lite.trajopt.mpc import closed_loop
from mjx_lite.trajopt.mppi import mppi

__all__ = ["ACROBOT", "PLANNERS", "TASKS", "ClosedLoopRun", "Task", "acrobot", "acrobot_open", "acrobot_pump",
           "box_push", "cartpole", "final_error", "mpc_planner", "plan", "quadruped_stand", "reacher",
           "run_closed_loop", "state_errors"]  # fmt: skip

ANGLE_TOL = 0.1  # rad: "upright" at the end of a swing-up
RATE_TOL = 0.5  # rad/s: "balanced" (cartpole)
ACROBOT_TIP_TOL = 0.2  # m: the acrobot's tip from the target: the target site's radius (MuJoCo MPC, dm_control)
ACROBOT_RATE_TOL = 1.0  # rad/s: the acrobot's joint velocities
ACROBOT_HOLD = 100  # control steps (1 s) over which the acrobot's goal must hold at the end of a closed loop
ACROBOT_WEIGHTS = (50.0, 1.0, 0.05)  # MuJoCo MPC's acrobot task.xml: Distance, Velocity, Control
ACROBOT_ENERGY_WEIGHT = 100.0  # the acrobot's terminal energy residual (ours; see `acrobot`)
ACROBOT_OPEN_HORIZON = 700  # steps (7 s) of the open-loop acrobot swing-up (`acrobot_open`)
ACROBOT_OPEN_TERMINAL_WEIGHT = 10.0  # its terminal cost: this times the acrobot's (see `acrobot_open`)
ACROBOT_OPEN_ILQR_ITERATIONS = 60  # the iLQR budget of `acrobot_open` (measured: solved at 60, not at 30)
REACH_TOL = 0.01  # m: the reacher's fingertip from its target

# ACROBOT: MuJoCo MPC's acrobot task model (mjpc/tasks/acrobot: dm_control's suite/acrobot.xml patched to MuJoCo's
# default Euler integrator, energy enabled); its floor, light, cameras and includes left out: 0.01 s, no constraints
ACROBOT = """
<mujoco model="acrobot">
  <option timestep="0.01"><flag constraint="disable" energy="enable"/></option>
  <default>
    <joint damping=".05"/>
    <geom type="capsule" mass="1" contype="0" conaffinity="0"/>
  </default>
  <worldbody>
    <site name="target" type="sphere" pos="0 0 4" size="0.2"/>
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
    noise_decay), as keyword arguments; ilqr_iterations: the iLQR budget the task is solved within (`plan`'s
    default for "ilqr"; benchmarks/planners.py's budget)."""

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
    ilqr_iterations: int = 30


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


def _acrobot_residual_cost(d, u):
    # MuJoCo MPC's residuals (mjpc/tasks/acrobot/acrobot.cc): goal - tip (z, x), joint velocities, control; its
    # task.xml's weights on quadratic norms 0.5 |r|^2 (mjpc/norm.cc)
    goal, tip = d.site_xpos[0], d.site_xpos[1]
    w_tip, w_vel, w_ctrl = ACROBOT_WEIGHTS
    return costs.weighted([(w_tip, costs.quadratic(jp.stack([goal[2] - tip[2], goal[0] - tip[0]]))),
                           (w_vel, costs.quadratic(d.qvel)), (w_ctrl, costs.quadratic(u))])  # fmt: skip


def _acrobot_cost(d, u, t):
    return _acrobot_residual_cost(d, u)


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def acrobot(horizon: int = 200) -> Task:
    """MuJoCo MPC's acrobot swing-up (`ACROBOT`: Euler, 0.01 s, an elbow motor of 2 N m) from hanging at rest
    (shoulder = pi, the keyframe "home"; upright is shoulder = elbow = 0, the tip at the target (0, 0, 4)).

    Running cost: MuJoCo MPC's residuals and weights (`ACROBOT_WEIGHTS`), summed over the horizon (MuJoCo MPC
    averages them: the same minimiser). Terminal cost: the same residuals at the final state with the last control
    (MuJoCo MPC's last term), plus ours, ACROBOT_ENERGY_WEIGHT * 0.5 (E - E_upright)^2 (E: `Data.energy`, potential +
    kinetic), a cost-to-go for the swing-up beyond the short horizon: with MuJoCo MPC's cost alone a 2 s receding
    horizon settles with the lower link balanced on the hanging upper one (the tip at 2 m, a local minimum; measured
    with iLQR, predictive sampling, and MuJoCo MPC's own predictive-sampling settings emulated in MuJoCo C).

    Solved in closed loop (`run_closed_loop(task, "ilqr")`: one iLQR iteration per 0.01 s control step over the 2 s
    horizon, as MuJoCo MPC plans): the goal check (`error` <= 1: the tip within ACROBOT_TIP_TOL of the target and
    every joint slower than ACROBOT_RATE_TOL) must hold over the run's last ACROBOT_HOLD steps. Measured over 15 s:
    held from 11.53 s (also with a re-plan every 2 steps and iLQR's feedback between: first reached at 8.9 s, held at
    the end); the energy weight matters: 30 settles in the local minimum, 300 reaches the top at 11.2 s but is 0.5 m
    off it in the last second. Predictive sampling at MuJoCo MPC's noise (16 samples, 1 iteration per step) pumps
    too slowly (tip at most 3.4 m by 15 s). No single plan over the default horizon reaches the top (the swing-up
    takes about 9-11 s with 2 N m). Initial controls: a sinusoid (hanging at rest with zero controls is a stationary
    point). `sampler`: MuJoCo MPC's sampling settings (10 cubic spline points, noise 0.05 of the half range)."""
    m, d0 = _acrobot_start()
    init = jp.asarray(0.5 * np.sin(np.arange(horizon) * 0.05)[:, None], d0.qpos.dtype)
    return _acrobot_task("acrobot", m, d0, horizon, init)


def _acrobot_start():
    m = mjx_lite.load_mjcf_string(ACROBOT)
    d0 = mjx_lite.make_data(m)
    return m, d0.replace(qpos=jp.asarray([np.pi, 0.0], d0.qpos.dtype))


def _acrobot_upright_energy(m, d0) -> float:
    return float(jp.sum(jax.jit(mjx_lite.forward)(m, d0.replace(qpos=jp.zeros_like(d0.qpos))).energy))


def _acrobot_control_cost(d, u, t):
    return ACROBOT_WEIGHTS[2] * costs.quadratic(u)


def _acrobot_task(name, m, d0, horizon, init, open_loop: bool = False) -> Task:
    """MuJoCo MPC's acrobot cost, terminal cost (with the energy residual) and goal check on `horizon` steps;
    open_loop: the running cost is the control residual alone and the terminal cost is ACROBOT_OPEN_TERMINAL_WEIGHT
    times the acrobot's (see `acrobot_open`)."""
    e_up = _acrobot_upright_energy(m, d0)
    target, tip = (m.names["site"].index(n) for n in ("target", "tip"))

    def terminal(d):
        energy = jp.sum(d.energy) - e_up
        return _acrobot_residual_cost(d, d.ctrl) + ACROBOT_ENERGY_WEIGHT * costs.quadratic(energy)

    def error(qpos, qvel, d):
        dist = float(np.linalg.norm(np.asarray(d.site_xpos[tip]) - np.asarray(d.site_xpos[target])))
        return max(dist / ACROBOT_TIP_TOL, float(np.max(np.abs(np.asarray(qvel)))) / ACROBOT_RATE_TOL)

    def open_terminal(d):
        return ACROBOT_OPEN_TERMINAL_WEIGHT * terminal(d)

    sampler = dict(knots=10, interpolation="cubic", noise_std=0.05, noise_decay=1.0)
    running, final = (_acrobot_control_cost, open_terminal) if open_loop else (_acrobot_cost, terminal)
    budget = ACROBOT_OPEN_ILQR_ITERATIONS if open_loop else 30
    return Task(name, m, d0, running, final, horizon, init, lambda q, v, d: error(q, v, d) <= 1.0, error,
                sampler, budget)  # fmt: skip


def acrobot_pump(m, d0, horizon: int) -> jax.Array:
    """(horizon, nu) controls of an energy pump for the acrobot from `d0`: while the total energy (`Data.energy`) is
    below the upright's, the elbow torque saturated in the sense of the elbow's velocity (it does positive work);
    above it, a damping torque -clip(elbow velocity, -1, 1). The classic heuristic of the acrobot swing-up (it
    gains the energy, not the pose): an initialisation for a long open-loop plan (`acrobot_open`)."""
    e_up = _acrobot_upright_energy(m, d0)

    def body(d, _):
        d = mjx_lite.forward(m, d)
        w = d.qvel[1]
        u = jp.where(jp.sum(d.energy) < e_up, jp.where(w >= 0, 1.0, -1.0), -jp.clip(w, -1.0, 1.0))
        u = jp.broadcast_to(u, (m.nu,)).astype(d.qpos.dtype)
        return mjx_lite.step(m, d.replace(ctrl=u)), u

    return jax.jit(lambda d: jax.lax.scan(body, d, None, length=int(horizon))[1])(d0)


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def acrobot_open(horizon: int = ACROBOT_OPEN_HORIZON) -> Task:
    """The acrobot swing-up as one open-loop plan: MuJoCo MPC's model and goal check (`acrobot`) over a horizon long
    enough for the 2 N m elbow (default 7 s; the pump alone first has the upright energy after 5.9 s), from the
    controls of an energy pump (`acrobot_pump`; hanging at rest with zero controls is a stationary point).

    Cost: MuJoCo MPC's control residual as the running cost, ACROBOT_OPEN_TERMINAL_WEIGHT times the acrobot's
    terminal cost (MuJoCo MPC's residuals plus the energy residual) at the end. MuJoCo MPC's running tip and velocity
    residuals are made for its 2 s receding horizon: summed over an 8 s plan they pull the tip up at every step
    and charge the velocity the pump needs. Measured (iLQR, 30 iterations from the pump, error in tolerances at the
    end): 700 steps 0.69 (solved; pump alone 10.7); 800 steps 2.84, with terminal weight 100 9.76, with MuJoCo MPC's
    running residuals 12.1; 600 steps with them 3.69. Measured again 2026-12-01 (the physics of the time): 30
    iterations 1.67 (1.44 with iLQR's retries, `ilqr(retries=4)`), 60 iterations 0.41 (0.39 with retries=4): the
    task's iLQR budget is
    ACROBOT_OPEN_ILQR_ITERATIONS. Most iterations accept steps of 0.01-0.03 (a 7 s plan of a chaotic double
    pendulum: the linearisation holds only near the nominal); MuJoCo MPC's surprise rule for mu changed nothing
    there. Measured again 2026-12-01 with the predicted reductions (`Report.lines`): the actual reduction is 1.7 to
    200 times the quadratic model's at the accepted steps (likely causes, not isolated: the pump's controls all sit
    on their bounds, so the feedback is clipped or absent, and the |H| metric over-states the curvature where the
    cost is concave: the pendulum test's swing shows ratios 2.4-3.4 at full steps, 1 to 1e-3 at small ones).
    Not solved robustly, neither at 30 nor at 60 iterations: with the start perturbed by -1e-3, -1e-4, 1e-4, 1e-3,
    1e-2 rad (and 0), 1/6 starts are solved at 30 iterations, 2/6 at 60 (3/6 with retries=4); tried without a
    robust gain at 30 iterations: retries, log-spaced step sizes down to 1e-3, a larger mu floor, Tassa's
    state-deviation (value) regularisation, MuJoCo MPC's mu rule, feedback on clamped controls, unsaturated (tanh)
    pumps (`benchmarks/acrobot_sensitivity.py`). See `acrobot` for the 2 s task that MuJoCo MPC plans in a receding
    horizon (solved in closed loop)."""
    m, d0 = _acrobot_start()
    return _acrobot_task("acrobot_open", m, d0, horizon, acrobot_pump(m, d0, horizon), open_loop=True)


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
# the standing posture (MuJoCo MPC's "home" keyframe of its quadruped): each foot under its hip with the torso at
# STAND_HEIGHT: thigh and shin (0.2 m each) at +-a from vertical, 0.4 cos(a) + 0.04 (foot radius) = STAND_HEIGHT
_STAND_A = float(np.arccos((STAND_HEIGHT - 0.04) / 0.4))
STAND_POSTURE = (_STAND_A, -2 * _STAND_A) * 2 + (-_STAND_A, 2 * _STAND_A) * 2  # the order of FOLDED
# weights of the stand-up's residuals (MuJoCo MPC's quadruped: Height, Upright, Position, Posture, Effort; plus
# joint velocities): the running cost's, the terminal cost's
QUADRUPED_WEIGHTS = dict(height=10.0, upright=2.5, position=1.0, posture=0.1, velocity=1e-3, control=1e-3)
QUADRUPED_TERMINAL_WEIGHTS = dict(height=1000.0, upright=250.0, position=1.0, posture=10.0, velocity=1.0)


def _torso_up(d, torso):
    return d.xmat[torso].reshape(3, 3)[2, 2]


def _quadruped_residuals(qpos, qvel, xy0):
    """MuJoCo MPC-style residuals of the stand-up from the state alone (the torso is the free joint's body: its
    position is qpos[:3], the z component of its z axis 1 - 2 (qx^2 + qy^2) of its quaternion qpos[3:7]; the same
    values as Data.xpos and Data.xmat after forward, test_trajopt): {name: residual}."""
    qx, qy = qpos[4], qpos[5]
    return dict(height=qpos[2] - STAND_HEIGHT, upright=2.0 * (qx * qx + qy * qy), position=qpos[:2] - xy0,
                posture=qpos[7:] - jp.asarray(STAND_POSTURE, qpos.dtype), velocity=qvel)  # fmt: skip


def _quadruped_cost(residuals, u, weights):
    # the upright residual 1 - z_z >= 0 enters linearly (as before), the others by the quadratic norm
    terms = [(weights["upright"], residuals["upright"])]
    terms += [(weights[k], costs.quadratic(residuals[k])) for k in ("height", "position", "posture", "velocity")]
    if u is not None:
        terms.append((weights["control"], costs.quadratic(u)))
    return costs.weighted(terms)


def _quadruped_costs(xy0):
    """(cost(d, u, t), terminal_cost(d)) of the stand-up, the torso's start xy0 (2,) held by the position residual."""

    def cost(d, u, t):
        return _quadruped_cost(_quadruped_residuals(d.qpos, d.qvel, xy0), u, QUADRUPED_WEIGHTS)

    def terminal(d):
        return _quadruped_cost(_quadruped_residuals(d.qpos, d.qvel, xy0), None, QUADRUPED_TERMINAL_WEIGHTS)

    return cost, terminal


@functools.lru_cache(maxsize=8)  # one Task (and cost function: one compilation) per horizon
def quadruped_stand(horizon: int = 200) -> Task:
    """The bundled quadruped (implicitfast, 5 ms, 8 torque motors of gear 12) lying on its belly, legs folded
    (`FOLDED`, settled), to standing. Residuals in MuJoCo MPC's quadruped style (`QUADRUPED_WEIGHTS`, terminal
    `QUADRUPED_TERMINAL_WEIGHTS`): torso height - STAND_HEIGHT, 1 - torso z axis up, torso xy drift, joint posture
    - STAND_POSTURE, joint velocities, controls. Default 1 s. The costs read the state alone (qpos, qvel, ctrl:
    `common.reads_only_state`), so iLQR expands them without a forward pass (and without differentiating through
    the contact solver); the goal check reads the forward pass (Data.xpos, Data.xmat).

    Measured (2026-12-01, float64, iLQR's budget of 30 iterations from zero controls, the 2-core CPU at load 11-14):
    solved, 0.02 of the tolerance at the end (cost 328.5 -> 25.5; the torso within the goal from 0.2 s on, the joints
    within 0.011 rad of STAND_POSTURE at the end), 343 ms of CPU per iteration (1.3 s wall under that load); the
    compilation took about 5 minutes of wall time (benchmarks/planners.py --tasks quadruped_stand). With 10
    iterations: solved, 0.07 of the tolerance (cost 328.5 -> 30.7), 370 ms of CPU per iteration."""
    m = mjx_lite.load_mjcf("quadruped")
    d0 = mjx_lite.make_data(m)
    d0 = d0.replace(qpos=d0.qpos.at[2].set(0.25).at[7:].set(jp.asarray(FOLDED, d0.qpos.dtype)))
    d0 = jax.jit(lambda d: jax.lax.fori_loop(0, SETTLE_STEPS, lambda i, d: mjx_lite.step(m, d), d))(d0)
    d0 = d0.replace(time=jp.zeros_like(d0.time))
    torso = m.names["body"].index("torso")
    xy0 = jp.asarray(np.asarray(d0.qpos[:2]))

    cost, terminal = _quadruped_costs(xy0)

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


TASKS = {"cartpole": cartpole, "acrobot": acrobot, "acrobot_open": acrobot_open, "reacher": reacher,
         "quadruped_stand": quadruped_stand, "box_push": box_push}  # fmt: skip
PLANNERS = ("ilqr", "ps", "mppi")  # iLQR, predictive sampling, MPPI


def plan(task: Task, planner: str, iterations: int | None = None, *, samples: int = 256, rng: jax.Array | None = None):
    """Run `planner` (one of PLANNERS) on `task` from its initial controls; the samplers use `task.sampler`.
    iterations: None: `task.ilqr_iterations` for iLQR, 50 for the samplers."""
    kw = dict(terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init)
    if iterations is None:
        iterations = task.ilqr_iterations if planner == "ilqr" else 50
    if planner == "ilqr":
        return ilqr(task.m, task.d0, task.cost, task.horizon, iterations=iterations, **kw)
    if planner not in PLANNERS:
        raise ValueError(f"tasks.plan: planner must be one of {PLANNERS}, not {planner!r}")
    fn = sampling.predictive_sampling if planner == "ps" else mppi
    opts = dict(task.sampler)
    opts["knots"] = min(opts["knots"], task.horizon)
    return fn(task.m, task.d0, task.cost, task.horizon, samples=samples, rng=rng, iterations=iterations, **opts,
              **kw)  # fmt: skip


@functools.lru_cache(maxsize=16)  # the same planner object per arguments: `trajopt.mpc` compiles once
def mpc_planner(task: Task, planner: str = "ilqr", iterations: int = 1, samples: int = 16, seed: int = 0):
    """planner(m, d, ctrl_init) -> `Result` for `trajopt.mpc` / `trajopt.closed_loop`: `planner` (one of PLANNERS)
    over `task.horizon` from the plant's state with the task's cost, `iterations` per re-plan, warm-started by the
    shifted plan; the samplers use `task.sampler` and `samples`, with fresh noise at every control step (the key of
    `seed` folded with the step number)."""
    if planner not in PLANNERS:
        raise ValueError(f"tasks.mpc_planner: planner must be one of {PLANNERS}, not {planner!r}")
    kw = dict(iterations=iterations, terminal_cost=task.terminal_cost)
    if planner == "ilqr":

        def plan_ilqr(m, d, u):
            return ilqr(m, d, task.cost, task.horizon, ctrl_init=u, **kw)

        return plan_ilqr
    fn = sampling.predictive_sampling if planner == "ps" else mppi
    opts = dict(task.sampler)
    opts["knots"] = min(opts["knots"], task.horizon)
    key = jax.random.PRNGKey(seed)

    def plan_sampling(m, d, u):
        rng = jax.random.fold_in(key, jp.round(d.time / m.opt.timestep).astype(jp.int32))
        return fn(m, d, task.cost, task.horizon, samples=samples, rng=rng, ctrl_init=u, **opts, **kw)

    return plan_sampling


@dataclasses.dataclass(frozen=True)
class ClosedLoopRun:
    """run: the timed `trajopt.ClosedLoop`; errors: (steps + 1,) `task.error` at every state of the plant; error: their
    maximum over the last `hold` + 1 states (<= 1: the goal held there); held_from: the time (s) from which the goal
    held to the end (None: not at the end)."""

    run: object
    errors: np.ndarray
    error: float
    held_from: float | None


@jax.jit
def _forward_states(m, d0, qpos, qvel):
    def at(q, v):
        return mjx_lite.forward(m, d0.replace(qpos=q, qvel=v))

    return jax.vmap(at)(qpos, qvel)


def state_errors(task: Task, qpos: jax.Array, qvel: jax.Array) -> np.ndarray:
    """(N,) `task.error` at each of N states qpos (N, nq), qvel (N, nv) (the forward pass at each, batched)."""
    ds = jax.tree.map(np.asarray, _forward_states(task.m, task.d0, qpos, qvel))
    q, v = np.asarray(qpos), np.asarray(qvel)
    return np.asarray([task.error(q[i], v[i], jax.tree.map(lambda x, i=i: x[i], ds)) for i in range(q.shape[0])])


def run_closed_loop(task: Task, planner: str = "ilqr", steps: int = 1500, *, iterations: int = 1, samples: int = 16,
                    hold: int = ACROBOT_HOLD, plant=None, seed: int = 0) -> ClosedLoopRun:  # fmt: skip
    """MPC on `task` (`trajopt.closed_loop` with `mpc_planner(task, planner, iterations, samples, seed)`, from the
    task's start and initial controls, re-planning at every control step) for `steps` control steps; the goal check
    along the plant's states. plant: as for `trajopt.closed_loop` (None: the simulator)."""
    if isinstance(hold, bool) or not isinstance(hold, (int, np.integer)) or not 0 <= hold <= steps:
        raise ValueError(f"tasks.run_closed_loop: hold must be an int in [0, steps = {steps}], not {hold!r}")
    fn = mpc_planner(task, planner, iterations, samples, seed)
    run = closed_loop(task.m, task.d0, fn, task.horizon, steps, plant=plant, cost=task.cost,
                              terminal_cost=task.terminal_cost, ctrl_init=task.ctrl_init)  # fmt: skip
    errors = state_errors(task, run.result.states.qpos, run.result.states.qvel)
    bad = np.flatnonzero(errors > 1.0)
    held_from = None if errors[-1] > 1.0 else (0 if bad.size == 0 else int(bad[-1]) + 1) * float(task.m.opt.timestep)
    return ClosedLoopRun(run, errors, float(np.max(errors[-hold - 1 :])), held_from)


def final_error(task: Task, ctrl: jax.Array) -> float:
    """`task.error` at the end of the rollout of `ctrl` (T, nu) from the task's start (<= 1: the goal is met)."""
    d = common.rollout(task.m, task.d0, ctrl)
    last = jax.tree.map(lambda x: x[-1], d)
    return task.error(np.asarray(last.qpos), np.asarray(last.qvel), last)
