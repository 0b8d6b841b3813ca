"""Shared pieces of the planners: results, rollouts with a cost, control bounds, input checks.

Cost convention (every planner): for a control sequence `ctrl` (T, nu) from the state of `d0`,

    J = sum_{t<T} cost(d_t, ctrl[t], t) + terminal_cost(d_T)

where `d_t` is the Data of the forward pass at the state x_t with ctrl[t] applied: every field (qpos, xpos,
site_xpos, sensordata, qacc, contacts) belongs to time t, as after `mjx_lite.forward`. x_{t+1} = step(x_t, ctrl[t]).
`d_T` is the forward pass at the final state (with the last control). `cost` must return a scalar (a () array).
For models integrated with RK4 the running cost costs one extra forward pass per step (the step's own derived
fields are those of its last Runge-Kutta stage); for the other integrators the step's own forward pass is used.
"""

from __future__ import annotations

import functools
import types as _types
from collections.abc import Callable

import flax.struct
import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import derivatives
from mjx_lite.pipeline import step as _pipeline
from mjx_lite.types import STATE_FIELDS, Data, IntegratorType, Model

__all__ = ["Report", "Result", "STOP_REASONS", "Trajectory", "ctrl_bounds", "evaluate", "planning_model", "rollout",
           "simulate"]

Cost = Callable[[Data, jax.Array, jax.Array], jax.Array]
TerminalCost = Callable[[Data], jax.Array]


@flax.struct.dataclass
class Trajectory:
    """States along a rollout (T+1 entries: x_0 .. x_T)."""

    qpos: jax.Array  # (T+1, nq)
    qvel: jax.Array  # (T+1, nv)
    act: jax.Array  # (T+1, na)
    time: jax.Array  # (T+1,)


@flax.struct.dataclass
class Result:
    """A planner's answer.

    ctrl: (T, nu) the best control sequence found; states: its rollout (`Trajectory`, T+1 states);
    cost: () its total cost J; costs: (iterations + 1,) the cost curve (costs[0]: the initial controls, then the
    cost of the planner's iterate after each iteration); gains: iLQR's feedback gains K (T, nu, 2nv+na) in the
    tangent-space convention of `derivatives.transition` (u = ctrl[t] + K[t] dx), None for the other planners;
    report: iLQR's convergence `Report`, None for the other planners.
    """

    ctrl: jax.Array
    states: Trajectory
    cost: jax.Array
    costs: jax.Array
    gains: jax.Array | None = None
    report: Report | None = None


STOP_REASONS = ("iterations", "converged", "regularization_limit")


@flax.struct.dataclass
class Report:
    """How an iterative planner stopped.

    iterations: () int, the iterations run (the rest of the static count were skipped); reason: () int, an index into
    `STOP_REASONS`: "iterations" (the count ran out), "converged" (an accepted step lowered the cost by less than
    the relative tolerance), "regularization_limit" (no step lowered the cost even at the largest regularisation);
    regularization: () the final regularisation mu; step_sizes: (iterations,) the accepted line-search step size
    of each iteration (0: rejected or skipped); regularizations: (iterations,) the mu each iteration used;
    expected_reductions: (iterations,) the cost reduction the backward pass's quadratic model predicted at the
    accepted step size alpha (-(alpha dV1 + alpha^2 dV2), Tassa, Erez and Todorov 2012; 0 where rejected or skipped),
    to compare with the actual reduction costs[i] - costs[i + 1] (`lines`). Under vmap every field gains the batch
    axis. `reason_name()` reads the reason on the host.
    """

    iterations: jax.Array
    reason: jax.Array
    regularization: jax.Array
    step_sizes: jax.Array
    regularizations: jax.Array
    expected_reductions: jax.Array | None = None

    def reason_name(self) -> str:
        return STOP_REASONS[int(self.reason)]

    def lines(self, costs) -> list[str]:
        """The convergence report as text, one line per iteration run (host side; not under vmap): the cost after
        it, the actual and the predicted (quadratic model) reduction and their ratio, the mu it used and the
        accepted step size (0: rejected). costs: `Result.costs` (iterations + 1,)."""
        costs = np.asarray(costs, float)
        expected = np.asarray(self.expected_reductions, float) if self.expected_reductions is not None else None
        out = ["iter  cost            actual       expected     ratio   mu         step"]
        for i in range(int(self.iterations)):
            actual = costs[i] - costs[i + 1]
            ex = float(expected[i]) if expected is not None else float("nan")
            ratio = actual / ex if ex else float("nan")
            out.append(f"{i + 1:4d}  {costs[i + 1]:<14.6g}  {actual:<11.4g}  {ex:<11.4g}  {ratio:<6.3g}  "
                       f"{float(self.regularizations[i]):<9.2e}  {float(self.step_sizes[i]):.3g}")  # fmt: skip
        n, mu = int(self.iterations), float(self.regularization)
        out.append(f"stopped: {self.reason_name()} after {n} iterations, mu {mu:.2e}")
        return out


def ctrl_bounds(m: Model, dtype) -> tuple[jax.Array, jax.Array]:
    """(lower, upper) (nu,) control bounds: actuator_ctrlrange where ctrllimited, else -inf / +inf."""
    lim = jp.asarray(np.asarray(m.actuator_ctrllimited, bool))
    rng = jp.asarray(m.actuator_ctrlrange, dtype).reshape(m.nu, 2)
    lo = jp.where(lim, rng[:, 0], -jp.inf)
    hi = jp.where(lim, rng[:, 1], jp.inf)
    return lo, hi


def check_scalar(value, name: str) -> jax.Array:
    """`value` as an array; a clear error (at trace time) when it is not a scalar."""
    value = jp.asarray(value)
    if value.shape != ():
        raise ValueError(f"trajopt: {name} must return a scalar (shape ()), got an array of shape {value.shape}")
    if not jp.issubdtype(value.dtype, jp.inexact) and not jp.issubdtype(value.dtype, jp.integer):
        raise TypeError(f"trajopt: {name} must return a real number, got dtype {value.dtype}")
    return value


def check_horizon(m: Model, horizon, ctrl_init, dtype) -> jax.Array:
    """The initial controls (horizon, nu): `ctrl_init` checked, or zeros clipped into the control range."""
    if isinstance(horizon, bool) or not isinstance(horizon, (int, np.integer)) or horizon < 1:
        raise ValueError(f"trajopt: horizon must be a positive int, not {horizon!r}")
    if ctrl_init is None:
        lo, hi = ctrl_bounds(m, dtype)
        return jp.clip(jp.zeros((int(horizon), m.nu), dtype), lo, hi)
    ctrl_init = jp.asarray(ctrl_init, dtype)
    if ctrl_init.shape != (int(horizon), m.nu):
        raise ValueError(f"trajopt: ctrl_init must have shape (horizon, nu) = ({horizon}, {m.nu}), "
                         f"not {ctrl_init.shape}")  # fmt: skip
    return ctrl_init


def check_iterations(iterations, name: str = "iterations") -> int:
    if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
        raise ValueError(f"trajopt: {name} must be a non-negative int, not {iterations!r}")
    return int(iterations)


# Data fields forward reads and never writes (types.STATE_FIELDS less the solver's warm start): a cost that reads
# nothing else has the same value (and derivatives) on the Data before forward as after it
_FORWARD_INPUTS = frozenset(f for f in STATE_FIELDS if f != "qacc_warmstart")


def reads_only_state(fn: Callable, d: Data, *args) -> bool:
    """Whether fn(d, *args) reads no field of `d` but the state and inputs forward leaves as they are (qpos, qvel,
    act, ctrl, time, mocap, applied forces, ...; `types.STATE_FIELDS` less qacc_warmstart), from one trace of fn
    (`jax.make_jaxpr`, at trace time; the arrays of `d` and `args` only give shapes). Conservative: a field read by
    an operation whose result is then dropped counts as read. The planners then evaluate such a cost on the
    Data without its forward pass (`cost_data`, iLQR's cost expansion): the same values, one forward pass less
    per step where XLA does not remove it (derivatives through the solver's custom rule are not removed)."""
    paths, treedef = jax.tree_util.tree_flatten_with_path(d)
    leaves = [x for _, x in paths]
    names = [p[0].name if isinstance(p[0], jax.tree_util.GetAttrKey) else None for p, _ in paths]

    def call(leaves, *args):
        return fn(jax.tree.unflatten(treedef, leaves), *args)

    shapes = [jax.ShapeDtypeStruct(jp.shape(x), jp.result_type(x)) for x in leaves]
    arg_shapes = [jax.tree.map(lambda x: jax.ShapeDtypeStruct(jp.shape(x), jp.result_type(x)), a) for a in args]
    try:
        jaxpr = jax.make_jaxpr(call)(shapes, *arg_shapes).jaxpr
    except Exception:  # noqa: BLE001 - e.g. a cost that needs concrete values: evaluate it after forward, as before
        return False
    invars = jaxpr.invars[: len(leaves)]
    used = {id(v) for e in jaxpr.eqns for v in e.invars} | {id(v) for v in jaxpr.outvars}
    return all(name in _FORWARD_INPUTS for v, name in zip(invars, names, strict=True) if id(v) in used)


def cost_data(m: Model, d_in: Data, d_next: Data, state_only: bool = False) -> Data:
    """The Data of the forward pass at the state of `d_in` (see the module docstring) given its step `d_next`;
    state_only: the cost reads only fields forward leaves as they are (`reads_only_state`): `d_in` itself."""
    if state_only:
        return d_in
    if m.opt.integrator == IntegratorType.RK4:
        return _pipeline.forward(m, d_in)
    return d_next.replace(qpos=d_in.qpos, qvel=d_in.qvel, act=d_in.act, time=d_in.time)


def forward_for(m: Model, d: Data, state_only: bool) -> Data:
    """forward(m, d), or `d` itself where the function it is for reads only state (`reads_only_state`)."""
    return d if state_only else _pipeline.forward(m, d)


def simulate(m: Model, d0: Data, ctrl: jax.Array, cost: Cost | None = None,
             terminal_cost: TerminalCost | None = None, keep: str = "state"):  # fmt: skip
    """Simulate `ctrl` (T, nu) from `d0` and evaluate the cost.

    Args:
      keep: "state": return a `Trajectory`; "data": the stacked Data of the forward passes d_0 .. d_T ((T+1, ...)
        leaves, for plots and analysis); "inputs": the stacked pre-step Data (T entries, ctrl set) and the final
        Data (used by iLQR to linearise).

    Returns:
      (J, per_step (T,) running costs, trajectory or data).
    """
    dtype = d0.qpos.dtype
    steps = jp.arange(ctrl.shape[0])
    # a cost of the state alone needs no forward pass (the stacked Data of keep="data" always has one)
    state_only = keep != "data" and cost is not None and reads_only_state(cost, d0, ctrl[0], steps[0])
    terminal_only = keep != "data" and terminal_cost is not None and reads_only_state(terminal_cost, d0)

    def body(d, xs):
        u, t = xs
        d_in = d.replace(ctrl=u)
        d_next = derivatives.step(m, d_in)
        c = jp.zeros((), dtype)
        if cost is not None or keep == "data":
            dc = cost_data(m, d_in, d_next, state_only)
            if cost is not None:
                c = check_scalar(cost(dc, u, t), "cost").astype(dtype)
        if keep == "state":
            out = (d_in.qpos, d_in.qvel, d_in.act, d_in.time)
        elif keep == "data":
            out = dc
        else:
            out = d_in
        return d_next, (c, out)

    d_last, (costs, outs) = jax.lax.scan(body, d0, (ctrl, steps))
    d_final = d_last.replace(ctrl=ctrl[-1])
    need_final = terminal_cost is not None or keep == "data"
    df = forward_for(m, d_final, terminal_only) if need_final else d_final
    total = jp.sum(costs)
    if terminal_cost is not None:
        total = total + check_scalar(terminal_cost(df), "terminal_cost").astype(dtype)
    if keep == "state":
        qpos, qvel, act, time = outs
        cat = lambda a, b: jp.concatenate([a, b[None]], axis=0)  # noqa: E731
        traj = Trajectory(qpos=cat(qpos, d_last.qpos), qvel=cat(qvel, d_last.qvel), act=cat(act, d_last.act),
                          time=cat(time, d_last.time))  # fmt: skip
        return total, costs, traj
    if keep == "data":
        return total, costs, jax.tree.map(lambda a, b: jp.concatenate([a, b[None]], axis=0), outs, df)
    return total, costs, (outs, d_final)


def planning_model(m: Model, integrator: str = "Euler") -> Model:
    """A copy of `m` integrated with `integrator` ("Euler", "implicitfast", "implicit" or "RK4", MuJoCo's names, case
    insensitive): a cheaper model to plan with, given to a planner explicitly (nothing changes it by default).

    The trade-off: a rollout of an Euler copy of an RK4 model runs one forward pass per step instead of four (the
    cartpole's sampling pass about 4x faster, benchmarks/planners.py --ab), but it plans a different discrete-time
    system, so an open-loop plan made on it is not optimal (nor necessarily successful) on the exact model; in
    closed loop (`trajopt.closed_loop(planning_model(m), d0, ..., plant=m)`) re-planning from the plant's state
    absorbs the mismatch, as MuJoCo MPC plans on cheaper settings than its plant. Keep the exact model where the
    plan itself is the product (open-loop trajectories, iLQR's gains).
    """
    names = {"euler": IntegratorType.EULER, "rk4": IntegratorType.RK4, "implicit": IntegratorType.IMPLICIT,
             "implicitfast": IntegratorType.IMPLICITFAST}  # fmt: skip
    key = integrator.lower() if isinstance(integrator, str) else None
    if key not in names:
        raise ValueError(f"trajopt.planning_model: integrator must be one of Euler, implicitfast, implicit, RK4, "
                         f"not {integrator!r}")  # fmt: skip
    return m.replace(opt=m.opt.replace(integrator=names[key]))


@jax.jit
def rollout(m: Model, d0: Data, ctrl: jax.Array) -> Data:
    """The stacked Data d_0 .. d_T ((T+1, ...) leaves) of the forward passes along `ctrl` (T, nu) from `d0`.

    d_t holds the state x_t and everything forward computes from it with ctrl[t] (d_T: the last control). Jitted:
    called eagerly, the last forward pass would run operation by operation (a compilation each).
    """
    return simulate(m, d0, jp.asarray(ctrl, d0.qpos.dtype), keep="data")[2]


def evaluate(m: Model, d0: Data, ctrl: jax.Array, cost: Cost, terminal_cost: TerminalCost | None = None) -> jax.Array:
    """The total cost J (module docstring) of `ctrl` (T, nu) from `d0`, (); differentiable."""
    return simulate(m, d0, jp.asarray(ctrl, d0.qpos.dtype), cost, terminal_cost)[0]


# ---- static arguments compared by value ----------------------------------------------------------------------


class _NoKeyError(Exception):
    pass


_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _structural(obj, depth: int = 0):
    """A hashable value describing `obj` (functions by code, defaults, closure cells and referenced globals)."""
    if depth > 40:
        raise _NoKeyError
    if isinstance(obj, _SCALARS):
        return (type(obj).__name__, obj)
    if isinstance(obj, (tuple, list)):
        return (type(obj).__qualname__, tuple(_structural(x, depth + 1) for x in obj))
    if isinstance(obj, dict):
        return ("dict", tuple(sorted((repr(k), _structural(v, depth + 1)) for k, v in obj.items())))
    if isinstance(obj, _types.ModuleType):
        return ("module", obj.__name__)
    if isinstance(obj, functools.partial):
        return ("partial", _structural(obj.func, depth + 1), _structural(obj.args, depth + 1),
                _structural(obj.keywords, depth + 1))  # fmt: skip
    if isinstance(obj, _types.FunctionType):
        code = obj.__code__
        cells = tuple(_structural(c.cell_contents, depth + 1) for c in (obj.__closure__ or ()))
        glob = tuple((n, _structural(obj.__globals__[n], depth + 1)) for n in code.co_names if n in obj.__globals__)
        return ("function", code, _structural(obj.__defaults__, depth + 1),
                _structural(obj.__kwdefaults__, depth + 1), cells, glob)  # fmt: skip
    if isinstance(obj, (_types.BuiltinFunctionType, type)):
        return ("object", id(obj), obj)
    concrete = isinstance(obj, jax.Array) and not isinstance(obj, jax.core.Tracer)
    if isinstance(obj, (np.ndarray, np.generic)) or concrete:
        a = np.asarray(obj)
        if a.size > 100_000:
            raise _NoKeyError
        return ("array", a.dtype.str, a.shape, a.tobytes())
    raise _NoKeyError


class StaticArg:
    """A static jit argument compared by value where possible (an optax optimizer created twice with the same
    hyperparameters is the same key), else by identity."""

    __slots__ = ("obj", "key")

    def __init__(self, obj):
        self.obj = obj
        try:
            self.key = _structural(obj)
            hash(self.key)
        except (_NoKeyError, TypeError, ValueError, RecursionError):
            self.key = None

    def __hash__(self):
        return hash(self.key) if self.key is not None else id(self.obj)

    def __eq__(self, other):
        if not isinstance(other, StaticArg):
            return NotImplemented
        if self.key is not None and other.key is not None:
            return self.key == other.key
        return self.obj is other.obj
