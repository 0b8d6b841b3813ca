"""Receding-horizon control (MPC): re-plan from the current state, apply the plan's first controls, repeat.

    planner = lambda m, d, u: trajopt.ilqr(m, d, cost, 50, iterations=1, ctrl_init=u, terminal_cost=final)
    out = trajopt.mpc(m, d0, planner, horizon=50, steps=300)                   # one jit-compiled scan
    run = trajopt.closed_loop(m, d0, planner, 50, 300, cost=cost, terminal_cost=final, replan_every=2)
    run.realtime_factor, run.cost, run.result.states.qpos                      # timed, compilation excluded
    run = trajopt.closed_loop(m, d0, planner, 50, 300, plant=interop.mujoco_model(m))   # MuJoCo C as the plant

Any planner fits: planner(m, d, ctrl_init) -> `Result` with ctrl (horizon, nu), e.g. a closure around
`trajopt.ilqr`, `predictive_sampling`, `mppi` or `shooting` (pass the same object on every call so that its
compilation is reused). A sampling planner that should draw fresh noise at every re-plan can fold the time into
its key: `rng=jax.random.fold_in(key, jp.round(d.time / m.opt.timestep).astype(jp.int32))`.

Each plan is applied for `replan_every` control steps (MuJoCo MPC's agent likewise keeps acting on its latest plan
while the next one is computed); where the planner returns feedback gains (iLQR) the applied control is
clip(ctrl[j] + K[j] dx), dx the tangent-space deviation of the plant's state from the plan's state j (`feedback`).
The plan is then warm-started by shifting it: the remaining controls move forward by `replan_every` steps and the
last one is repeated. The plant is the simulator (`m` itself, or another Model of the same sizes, e.g. with
perturbed parameters) or a MuJoCo C model (`mujoco.MjModel`, stepped by `mujoco.mj_step` on an MjData, the states
exchanged through `mjx_lite.interop`).
"""

from __future__ import annotations

import dataclasses
import functools
import time as _time
from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import derivatives, interop
from mjx_lite.pipeline import step as _pipeline
from mjx_lite.trajopt import common
from mjx_lite.types import Data, Model

__all__ = ["ClosedLoop", "MPCResult", "closed_loop", "mpc"]

Planner = Callable[[Model, Data, jax.Array], common.Result]


@flax.struct.dataclass
class MPCResult:
    """ctrl: (steps, nu) the controls applied; states: the plant's `Trajectory` (steps + 1 states);
    planned_cost: (plans,) the cost of each plan (over its horizon), plans = ceil(steps / replan_every)."""

    ctrl: jax.Array
    states: common.Trajectory
    planned_cost: jax.Array


@dataclasses.dataclass(frozen=True)
class ClosedLoop:
    """A timed closed-loop run (`closed_loop`).

    result: the `MPCResult`; cost: the closed-loop trajectory's cost (the planners' convention, `trajopt.common`,
    evaluated along the plant's states and the applied controls; None without a cost); sim_time: simulated seconds
    (steps * timestep); wall_time: seconds the loop ran, compilation excluded; compile_time: seconds spent
    compiling (lowering included) before it; realtime_factor: sim_time / wall_time (>= 1: faster than real time);
    plant: "mjx_lite" or "mujoco"; cpu_time: the process's CPU seconds (all threads) over the same loop, the
    measure that a machine shared with other work does not inflate (an idle machine's wall time is at least
    cpu_time / cores).
    """

    result: MPCResult
    cost: float | None
    sim_time: float
    wall_time: float
    compile_time: float
    realtime_factor: float
    plant: str
    cpu_time: float = float("nan")


def _check(m: Model, d0: Data, horizon, steps, ctrl_init, replan_every):
    steps = common.check_iterations(steps, "steps")
    u0 = common.check_horizon(m, horizon, ctrl_init, d0.qpos.dtype)
    k = replan_every
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= horizon:
        raise ValueError(f"mpc: replan_every must be an int in [1, horizon = {horizon}], not {k!r}")
    return steps, u0, int(k)


def _is_mujoco_model(plant) -> bool:
    return plant is not None and not isinstance(plant, Model) and type(plant).__name__ == "MjModel"


def _check_plant(m: Model, plant) -> None:
    if plant is None:
        return
    if not isinstance(plant, Model) and not _is_mujoco_model(plant):
        raise TypeError(f"mpc: plant must be an mjx_lite Model or a mujoco.MjModel, not {type(plant).__name__}")
    if (plant.nq, plant.nv, plant.na, plant.nu) != (m.nq, m.nv, m.na, m.nu):
        raise ValueError(f"mpc: plant must have the sizes (nq, nv, na, nu) = {(m.nq, m.nv, m.na, m.nu)} of the "
                         f"planning model, not {(plant.nq, plant.nv, plant.na, plant.nu)}")  # fmt: skip


def mpc(m: Model, d0: Data, planner: Planner, horizon: int, steps: int, *, plant: Model | None = None,
        ctrl_init: jax.Array | None = None, replan_every: int = 1, feedback: bool = True) -> MPCResult:  # fmt: skip
    """Run `steps` control steps of receding-horizon control from `d0` (module docstring), as one jit-compiled scan.

    Args:
      m: the model the planner plans with.
      d0: the plant's start state.
      planner: planner(m, d, ctrl_init) -> `Result` with ctrl (horizon, nu).
      horizon: the planner's horizon (static); steps: number of control steps (static).
      plant: the Model stepped with the chosen controls (default `m`); must have the sizes of `m` (for a MuJoCo C
        plant use `closed_loop`).
      ctrl_init: (horizon, nu) first plan's initial controls (default zeros clipped into range).
      replan_every: control steps between re-plans (static, 1 <= replan_every <= horizon).
      feedback: apply the planner's feedback gains between re-plans, where it returns them (static).

    Returns:
      `MPCResult`. jit-compiled once per (model structure, planner, horizon, steps, replan_every); vmap over `d0`
      works.
    """
    steps, u0, k = _check(m, d0, horizon, steps, ctrl_init, replan_every)
    if _is_mujoco_model(plant):
        raise TypeError("mpc: a mujoco.MjModel plant runs on the host: use trajopt.closed_loop(..., plant=mj_model)")
    _check_plant(m, plant)
    plant = m if plant is None else plant
    return _mpc(m, plant, d0, u0, planner, steps, k, bool(feedback))


def _feedback_ctrl(m: Model, res: common.Result, j, d: Data, use_gains: bool, lo, hi) -> jax.Array:
    """The control at step j of plan `res` for the plant state of `d`: with iLQR's gains, ctrl[j] + K[j] dx."""
    u = res.ctrl[j]
    if use_gains and res.gains is not None:
        s = res.states
        dx = jp.concatenate([derivatives.differentiate_pos(m, s.qpos[j], d.qpos), d.qvel - s.qvel[j], d.act - s.act[j]])
        u = jp.clip(u + res.gains[j] @ dx, lo, hi)
    return u


def _shift(ctrl: jax.Array, k: int) -> jax.Array:
    """The warm start: ctrl (T, nu) moved forward by k steps, the last control repeated."""
    return jp.concatenate([ctrl[k:], jp.repeat(ctrl[-1:], k, axis=0)], axis=0)


@functools.partial(jax.jit, static_argnames=("planner", "steps", "replan_every", "feedback"))
def _mpc(m, plant, d0, u0, planner, steps, replan_every, feedback):
    k = replan_every
    plans = -(-steps // k)
    lo, hi = common.ctrl_bounds(m, u0.dtype)

    def body(carry, _):
        d, plan = carry
        res = planner(m, d, plan)

        def act(d, j):
            u = _feedback_ctrl(m, res, j, d, feedback, lo, hi)
            d_in = d.replace(ctrl=u)
            return derivatives.step(plant, d_in), (u, (d_in.qpos, d_in.qvel, d_in.act, d_in.time))

        d_next, out = jax.lax.scan(act, d, jp.arange(k))
        return (d_next, _shift(res.ctrl, k)), (out, res.cost)

    if plans * k == steps:
        (d_last, _), ((ctrl, states), planned) = jax.lax.scan(body, (d0, u0), None, length=plans)
        flat = jax.tree.map(lambda a: a.reshape((steps,) + a.shape[2:]), (ctrl, states))
        ctrl, states = flat
        last = (d_last.qpos, d_last.qvel, d_last.act, d_last.time)
    else:  # the last plan is applied for fewer steps: simulate whole plans, keep the first `steps` (+1 state)
        (_, _), ((ctrl, states), planned) = jax.lax.scan(body, (d0, u0), None, length=plans)
        ctrl, states = jax.tree.map(lambda a: a.reshape((plans * k,) + a.shape[2:]), (ctrl, states))
        last = jax.tree.map(lambda a: a[steps], states)
        ctrl, states = ctrl[:steps], jax.tree.map(lambda a: a[:steps], states)
    qpos, qvel, act, time = jax.tree.map(lambda a, b: jp.concatenate([a, b[None]]), states, last)
    traj = common.Trajectory(qpos=qpos, qvel=qvel, act=act, time=time)
    return MPCResult(ctrl=ctrl, states=traj, planned_cost=planned)


# ---- timed closed loop (the simulator or MuJoCo C as the plant) -------------------------------------------------


@functools.partial(jax.jit, static_argnames=("planner",))
def _plan(m, d, u, planner):
    return planner(m, d, u)


@functools.partial(jax.jit, static_argnames=("cost", "terminal_cost"))
def _trajectory_cost(m, d0, traj, ctrl, cost, terminal_cost):
    """The cost (planners' convention) of the states traj (T+1) with the applied controls ctrl (T, nu)."""

    def at(i, u):
        d = d0.replace(qpos=traj.qpos[i], qvel=traj.qvel[i], act=traj.act[i], time=traj.time[i], ctrl=u)
        return _pipeline.forward(m, d)

    T = ctrl.shape[0]
    ts = jp.arange(T)
    running = jax.vmap(lambda i, u: common.check_scalar(cost(at(i, u), u, i), "cost"))(ts, ctrl)
    total = jp.sum(running)
    if terminal_cost is not None:
        total = total + common.check_scalar(terminal_cost(at(T, ctrl[-1])), "terminal_cost")
    return total


def closed_loop(m: Model, d0: Data, planner: Planner, horizon: int, steps: int, *, plant=None,
                cost: common.Cost | None = None, terminal_cost: common.TerminalCost | None = None,
                ctrl_init: jax.Array | None = None, replan_every: int = 1,
                feedback: bool = True) -> ClosedLoop:  # fmt: skip
    """Run MPC (see `mpc`) and time it: compile first, then run the loop once and report the real-time factor.

    Args:
      m, d0, planner, horizon, steps, ctrl_init, replan_every, feedback: as for `mpc`.
      plant: None (the simulator with `m`), another Model of the same sizes, or a `mujoco.MjModel` of the same MJCF
        (`interop.mujoco_model(m)`): then MuJoCo C simulates the plant on one MjData (`mujoco.mj_step`, on the
        host), the planner runs on `interop.from_mujoco` of its state at every re-plan, and iLQR's feedback uses
        `mujoco.mj_differentiatePos`.
      cost, terminal_cost: the closed-loop trajectory's cost is reported with these (usually the planner's own);
        evaluated after the timed loop, with the planning model `m` for a MuJoCo plant, with the plant otherwise.

    Returns:
      `ClosedLoop`: the `MPCResult`, its cost, simulated and wall seconds (compilation excluded), compile seconds,
      the real-time factor. One compilation per call (ahead of time, `jit(...).lower(...).compile()`).
    """
    steps, u0, k = _check(m, d0, horizon, steps, ctrl_init, replan_every)
    _check_plant(m, plant)
    if _is_mujoco_model(plant):
        result, wall, comp, cpu = _closed_loop_mujoco(m, d0, u0, planner, plant, steps, k, bool(feedback))
        cost_model, dt, kind = m, float(plant.opt.timestep), "mujoco"
    else:
        p = m if plant is None else plant
        t = _time.perf_counter()
        compiled = _mpc.lower(m, p, d0, u0, planner=planner, steps=steps, replan_every=k,
                              feedback=bool(feedback)).compile()  # fmt: skip
        comp = _time.perf_counter() - t
        t, c = _time.perf_counter(), _time.process_time()
        result = jax.block_until_ready(compiled(m, p, d0, u0))
        wall, cpu = _time.perf_counter() - t, _time.process_time() - c
        cost_model, dt, kind = p, float(p.opt.timestep), "mjx_lite"
    total = None
    if cost is not None:
        total = float(_trajectory_cost(cost_model, d0, result.states, result.ctrl, cost, terminal_cost))
    sim = steps * dt
    return ClosedLoop(result=result, cost=total, sim_time=sim, wall_time=wall, compile_time=comp,
                      realtime_factor=sim / wall if wall > 0 else float("inf"), plant=kind, cpu_time=cpu)  # fmt: skip


def _closed_loop_mujoco(m, d0, u0, planner, mjm, steps, k, feedback):
    """MPC with MuJoCo C stepping the plant; (MPCResult, wall seconds, compile seconds, CPU seconds)."""
    mj = interop._need_mujoco()
    mjd = interop.to_mujoco(m, d0, mjm, forward=False)
    t = _time.perf_counter()
    plan_fn = _plan.lower(m, d0, u0, planner=planner).compile()
    comp = _time.perf_counter() - t
    lo, hi = (np.asarray(x) for x in common.ctrl_bounds(m, u0.dtype))
    nv, na = m.nv, m.na
    dx = np.zeros(2 * nv + na)
    plan = u0
    qpos, qvel, act, tm, ctrl, planned = [], [], [], [], [], []
    t, c = _time.perf_counter(), _time.process_time()
    while len(ctrl) < steps:
        d = interop.from_mujoco(m, mjd, template=d0)
        res = plan_fn(m, d, plan)
        u_plan = np.asarray(res.ctrl)
        planned.append(res.cost)
        gains = None
        if feedback and res.gains is not None:
            gains = np.asarray(res.gains)
            sq, sv, sa = (np.asarray(x) for x in (res.states.qpos, res.states.qvel, res.states.act))
        for j in range(min(k, steps - len(ctrl))):
            u = u_plan[j]
            if gains is not None:
                mj.mj_differentiatePos(mjm, dx[:nv], 1.0, sq[j], mjd.qpos)
                dx[nv : 2 * nv] = mjd.qvel - sv[j]
                dx[2 * nv :] = mjd.act - sa[j]
                u = np.clip(u + gains[j] @ dx, lo, hi)
            qpos.append(mjd.qpos.copy())
            qvel.append(mjd.qvel.copy())
            act.append(mjd.act.copy())
            tm.append(mjd.time)
            ctrl.append(np.asarray(u, np.float64))
            mjd.ctrl[:] = u
            mj.mj_step(mjm, mjd)
        plan = _shift(res.ctrl, k)
    wall, cpu = _time.perf_counter() - t, _time.process_time() - c
    qpos.append(mjd.qpos.copy())
    qvel.append(mjd.qvel.copy())
    act.append(mjd.act.copy())
    tm.append(mjd.time)
    dtype = u0.dtype
    traj = common.Trajectory(qpos=jp.asarray(np.stack(qpos), dtype), qvel=jp.asarray(np.stack(qvel), dtype),
                             act=jp.asarray(np.stack(act).reshape(len(act), na), dtype),
                             time=jp.asarray(np.asarray(tm), dtype))  # fmt: skip
    result = MPCResult(ctrl=jp.asarray(np.stack(ctrl), dtype), states=traj, planned_cost=jp.stack(planned))
    return result, wall, comp, cpu
