"""Receding-horizon control (MPC): re-plan from the current state at every control step, apply the first control.

    planner = lambda m, d, u: trajopt.ilqr(m, d, cost, 50, iterations=2, ctrl_init=u)
    out = trajopt.mpc(m, d0, planner, horizon=50, steps=300)

The plan is warm-started: after applying ctrl[0] the remaining controls are shifted by one step and the last one
repeated. The whole loop is one `lax.scan` (jit-compiled once per planner, horizon and steps; vmap over `d0`
works). The plant that is stepped can be a different model (e.g. with perturbed parameters, to test robustness).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jp

from mjx_lite import derivatives
from mjx_lite.trajopt import common
from mjx_lite.types import Data, Model

__all__ = ["MPCResult", "mpc"]

Planner = Callable[[Model, Data, jax.Array], common.Result]


@flax.struct.dataclass
class MPCResult:
    """ctrl: (steps, nu) the controls applied; states: the plant's `Trajectory` (steps + 1 states);
    planned_cost: (steps,) the cost of the plan made at each step (over its horizon)."""

    ctrl: jax.Array
    states: common.Trajectory
    planned_cost: jax.Array


def mpc(m: Model, d0: Data, planner: Planner, horizon: int, steps: int, *, plant: Model | None = None,
        ctrl_init: jax.Array | None = None) -> MPCResult:  # fmt: skip
    """Run `steps` control steps of receding-horizon control from `d0`.

    Args:
      m: the model the planner plans with.
      d0: the plant's start state.
      planner: planner(m, d, ctrl_init) -> `Result` with ctrl (horizon, nu), e.g. a `functools.partial` or lambda
        around `trajopt.ilqr` / `shooting` / `mppi` (pass the same object on every call to reuse the compilation).
      horizon: the planner's horizon (static); steps: number of control steps (static).
      plant: the model stepped with the chosen controls (default `m`); must have the same sizes as `m`.
      ctrl_init: (horizon, nu) first plan's initial controls (default zeros clipped into range).
    """
    steps = common.check_iterations(steps, "steps")
    u0 = common.check_horizon(m, horizon, ctrl_init, d0.qpos.dtype)
    plant = m if plant is None else plant
    if (plant.nq, plant.nv, plant.na, plant.nu) != (m.nq, m.nv, m.na, m.nu):
        raise ValueError("mpc: plant must have the sizes (nq, nv, na, nu) of the planning model")
    return _mpc(m, plant, d0, u0, planner, steps)


@functools.partial(jax.jit, static_argnames=("planner", "steps"))
def _mpc(m, plant, d0, u0, planner, steps):
    def body(carry, _):
        d, plan = carry
        res = planner(m, d, plan)
        u = res.ctrl[0]
        d_in = d.replace(ctrl=u)
        d_next = derivatives.step(plant, d_in)
        plan = jp.concatenate([res.ctrl[1:], res.ctrl[-1:]], axis=0)
        return (d_next, plan), (u, (d_in.qpos, d_in.qvel, d_in.act, d_in.time), res.cost)

    (d_last, _), (ctrl, states, planned) = jax.lax.scan(body, (d0, u0), None, length=steps)
    last = (d_last.qpos, d_last.qvel, d_last.act, d_last.time)
    qpos, qvel, act, time = jax.tree.map(lambda a, b: jp.concatenate([a, b[None]]), states, last)
    traj = common.Trajectory(qpos=qpos, qvel=qvel, act=act, time=time)
    return MPCResult(ctrl=ctrl, states=traj, planned_cost=planned)
