"""The public entry points that run whole pipelines: mj_step, mj_step1, mj_step2 and mj_inverse.

The top of the pipeline layer: `forward` (the stages), `integrate` (the integrators and divergence checks) and
`inverse` (the acceleration stage of inverse dynamics) are below it.

Every entry point first checks the Data against the model's declared shapes (`mjx_lite.data.check_data`, at
trace time: free at run time), so a wrong-shaped field is an error that names it.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
from jax.custom_derivatives import SymbolicZero

from mjx_lite import data as _data
from mjx_lite._eager import jit_when_eager
from mjx_lite.config import matmul_precision
from mjx_lite.data import as_data, check_data
from mjx_lite.pipeline import actuation, integrate, kernels, sleep, smoothing
from mjx_lite.pipeline import forward as fwd
from mjx_lite.pipeline import inverse as inv
from mjx_lite.types import Data, IntegratorType, Model

__all__ = ["forward", "inverse", "make_data", "step", "step1", "step2"]


def check_arguments(name: str, m, d) -> None:
    """TypeError naming the mistake when `name(m, d)` is not given a Model and a Data (e.g. swapped)."""
    if isinstance(m, Data) and isinstance(d, Model):
        raise TypeError(f"mjx_lite.{name}(m, d): the arguments are swapped (a Data, then a Model): "
                        f"call {name}(m, d), the Model first")  # fmt: skip
    if not isinstance(m, Model):
        raise TypeError(f"mjx_lite.{name}(m, d): m must be a Model (from mjl.load_mjcf), not {type(m).__name__}")
    if not isinstance(d, Data):
        raise TypeError(f"mjx_lite.{name}(m, d): d must be a Data (from mjl.make_data(m)), not {type(d).__name__}")


def _entry_point(fn):
    """fn(m, d) as a public entry point: its arguments checked (a Model and a Data; fields given as lists or numpy
    arrays made jax arrays), traced under the model's matrix-product precision (`Config.matmul_precision`), and
    run jitted when called on concrete arrays (`jit_when_eager`)."""

    @functools.wraps(fn)
    def traced(m: Model, d: Data) -> Data:
        with matmul_precision(m.config):
            return fn(m, d)

    run = jit_when_eager(traced)

    @functools.wraps(fn)
    def entry(m: Model, d: Data) -> Data:
        check_arguments(fn.__name__, m, d)
        return run(m, as_data(d))

    entry.jitted = run.jitted
    return entry


@_entry_point
def forward(m: Model, d: Data) -> Data:
    """Forward dynamics (mj_forward): every derived quantity of the state, qacc and the sensors."""
    check_data(m, d)
    return sleep.freeze(m, d, fwd.run(fwd.forward, m, d))


@_entry_point
def step(m: Model, d: Data) -> Data:
    """Advance the simulation by one timestep (mj_step) with the model's integrator.

    Divergence (non-finite or |x| > 1e10 in qpos, qvel or qacc) resets the offending environment to the
    model's reset state (see `integrate.check_pos_vel`), counting it in `warning_number`. After a bad qacc the
    reset state is returned unstepped unless `m.config.exact_reset` (MuJoCo's behaviour: reset, forward, step):
    the state (`types.STATE_FIELDS`) and everything from the actuation stage on (forces, qacc, constraint
    forces, sensordata) are reset; the position and velocity stages' fields (poses, Jacobians, contacts, qM)
    are reset too, or with `Config.qacc_reset` "state" (the default off the CPU) and Euler or the implicit
    integrators are those of the step's start, as for the other environments (the next step recomputes them
    either way). RK4's later stages rewrite those fields, so with RK4 all of Data is reset.
    With `m.config.contact_gradients == "smooth"` the value is the same and the derivative is randomly smoothed
    (`mjx_lite.pipeline.smoothing.smooth_step`).
    """
    if m.config.contact_gradients != "exact":
        return smoothing.smooth_step(step, m, d)
    check_data(m, d)
    d = fwd.run(integrate.check_pos_vel, m, d)
    if integrate.rk4_merged(m):  # forward and RK4's stages as one loop (one traced forward pass)
        return _step_merged(m, d)
    if integrate.rk4_merged(m, derivatives=True):  # the split step's values, the merged step's derivatives
        return _split_value_merged_derivative(m, d)
    return _step_split(m, d)


def _step_merged(m: Model, d: Data) -> Data:
    """The step after mj_checkPos / mj_checkVel with RK4 as one loop over the four stages (`integrate.rk4_forward`)."""
    qvel0 = d.qvel
    d2, qacc0 = fwd.run(integrate.rk4_forward, m, d)
    if actuation.dcmotor_state(m):  # MuJoCo advances dcmotor states at the step's actuator velocity
        d2 = d2.replace(actuator_velocity=d2.actuator_moment @ qvel0)
    bad_acc = integrate.bad_acc(m, d.replace(qacc=qacc0))
    return fwd.run(integrate.reset_where, m, d2, bad_acc, warning=integrate.Warning.BADQACC)


def _zero_tangents(tangents: list, at: set[int]) -> list:
    """tangents with the symbolic zeros at positions `at` made zero arrays that depend on the first float tangent
    that is not a symbolic zero (`jp.where(True, 0, sum(t))`: a linear function of it, unknown to JAX's partial
    evaluation as a real tangent is, which XLA folds to zero); as they are where every tangent is a symbolic zero."""
    live = next((t for t in tangents if not isinstance(t, SymbolicZero) and jp.issubdtype(t.dtype, jp.inexact)), None)
    if live is None:
        return list(tangents)
    zero = jp.where(True, jp.zeros((), live.dtype), jp.sum(live))
    return [jp.broadcast_to(zero.astype(t.dtype), t.shape) if k in at and isinstance(t, SymbolicZero) else t
            for k, t in enumerate(tangents)]  # fmt: skip


def _split_value_merged_derivative(m: Model, d: Data) -> Data:
    """`_step_split(m, d)` as the value, `_step_merged`'s derivative (`Config.rk4_loop` "auto"): a step that is
    not differentiated runs the split step (faster to run), while forward and reverse mode go through the merged
    step's one traced forward pass (half the graph of a gradient: faster to compile). The two steps compute the
    same values to round-off, so the derivative is the split step's too.

    A `custom_jvp` whose rule is `jax.jvp` of the merged step over the leaves of (m, d) that carry a tangent (the
    others, symbolic zeros, are closed over: a model that is not differentiated adds nothing to the graph); under
    `jax.grad` the merged step's linearisation is transposed as usual (its solver's implicit VJP included).

    Once any leaf carries a tangent, every float leaf of the Data does in the rule (a zero one: `_zero_tangent`),
    and the merged step is one jitted function per step call: in a rollout (`lax.scan` over steps from a Data that
    is not differentiated) JAX's fixpoint over which carries have tangents traces the rule twice, first with the
    Data's tangents zero, then with all of them; with the same tangent pattern both times the second trace reuses
    the first's jaxprs (JAX's caches of the jitted function's trace, jvp and partial evaluation) instead of
    tracing, linearising and partially evaluating the step again. The 50-step ant's gradient: trace 11.3 and 10.6
    -> 4.6 and 4.6 CPU-s (interleaved, load 13), the same program after XLA (2,020 fusions) and the same gradient
    bitwise. The cost: a jvp with only some of the Data's leaves differentiated (e.g. ctrl alone) computes the
    tangents of the others too (zeros; in reverse mode XLA removes that work, in forward mode it runs)."""
    leaves, tree = jax.tree.flatten((m, d))
    config = m.config
    # only traced leaves go through the custom_jvp (a concrete array, e.g. a Model closed over by a jitted function,
    # carries no tangent): the concrete ones stay constants of the program, as without "auto" (the 50-step ant
    # rollout, not differentiated: StableHLO 9,251 -> 9,097 operations, the split step's 8,290; after XLA's
    # optimisation the same operations as the split step's, tests/test_integrate.py)
    traced = [i for i, x in enumerate(leaves) if isinstance(x, jax.core.Tracer)]

    def with_leaves(xs, at):
        args = list(leaves)
        for i, x in zip(at, xs):
            args[i] = x
        return jax.tree.unflatten(tree, args)

    @jax.custom_jvp
    def f(*xs):
        return _step_split(*with_leaves(xs, traced))

    # one jitted function per step call: its trace (and JAX's derivatives of it) cached across the rule's traces (with
    # the fused kernels too: their custom_jvp rules, the XLA twins, read only the kernels' inputs, no tracer of the
    # trace that called them, so the cached program's rules can be traced again in a later trace; kernels/launch.py)
    merged_jit = jax.jit(lambda *xs: _step_merged(*with_leaves(xs, traced)))
    n_model = len(jax.tree.leaves(m))  # (m, d)'s leaves: the Model's first
    data_float = {k for k, i in enumerate(traced) if i >= n_model and jp.issubdtype(leaves[i].dtype, jp.inexact)}

    def f_jvp(primals, tangents):
        tangents = _zero_tangents(tangents, data_float)
        live = [k for k, t in enumerate(tangents) if not isinstance(t, SymbolicZero)]

        def merged(*xs):
            args = list(primals)
            for k, x in zip(live, xs):
                args[k] = x
            return merged_jit(*args)

        with matmul_precision(config):  # the rule may be traced outside the entry point's context (jit, then grad)
            return jax.jvp(merged, [primals[k] for k in live], [tangents[k] for k in live])

    f.defjvp(f_jvp, symbolic_zeros=True)
    return f(*[leaves[i] for i in traced])


def _step_split(m: Model, d: Data) -> Data:
    """The step after mj_checkPos / mj_checkVel: forward, then the integrator (RK4: its three later stages as one
    loop, a second traced forward pass)."""
    d_in = d
    with jax.named_scope("forward"):  # fwd.forward in two halves: a bad qacc leaves the first half's fields as they are
        d_pos_vel = sleep.freeze(m, d_in, fwd.forward_pos_vel(m, d, smooth=True))
        d = sleep.freeze(m, d_in, fwd.forward_acc(m, d_pos_vel, smooth=True))
        if kernels.smooth_fused(m):  # the fused smooth pass computed the acceleration stages' fields in the first
            # half: the reset's `keep` (the fields no later stage rewrote) must not hold them, as on the XLA path
            d_pos_vel = d_pos_vel.replace(**{n: getattr(d_in, n) for n in kernels.SMOOTH_ACC_FIELDS})
    exact = m.config.exact_reset
    if exact:
        d = fwd.run(integrate.check_acc, m, d)  # a bad env is reset, forwarded, then stepped once (as mj_step)
    bad_acc = integrate.bad_acc(m, d)
    if m.opt.integrator == IntegratorType.EULER:
        d2 = fwd.run(integrate.euler, m, d)
    elif m.opt.integrator == IntegratorType.RK4:
        d2 = fwd.run(integrate.rk4, m, d)
        if actuation.dcmotor_state(m):  # MuJoCo advances dcmotor states at the step's actuator velocity
            d2 = d2.replace(actuator_velocity=d2.actuator_moment @ d.qvel)
    elif m.opt.integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
        d2 = fwd.run(integrate.implicit, m, d)
    else:
        raise ValueError(f"mjx_lite: unknown integrator {m.opt.integrator}")
    if exact:
        return d2
    # the reset state, not stepped (with Config.qacc_reset "state", the position/velocity stages' fields: those of
    # this step's start)
    return fwd.run(integrate.reset_where, m, d2, bad_acc, warning=integrate.Warning.BADQACC, keep=d_pos_vel)


@_entry_point
def step1(m: Model, d: Data) -> Data:
    """First half of mj_step (mj_step1): checks, position and velocity stages with their sensors.

    Set `ctrl`, `qfrc_applied` or `xfrc_applied` between `step1` and `step2`.
    """
    check_data(m, d)
    d = fwd.run(integrate.check_pos_vel, m, d)
    return sleep.freeze(m, d, fwd.forward_pos_vel(m, d))


@_entry_point
def step2(m: Model, d: Data) -> Data:
    """Second half of mj_step (mj_step2): actuation, acceleration, constraints, sensors, integration.

    As in MuJoCo, RK4 models are advanced with Euler here (RK4 needs the whole forward pass per stage).
    """
    check_data(m, d)
    d_pos_vel = d
    d = sleep.freeze(m, d_pos_vel, fwd.forward_acc(m, d, sensors=True))  # with solver_fwdinv when enabled, as mj_step2
    exact = m.config.exact_reset
    if exact:
        d = fwd.run(integrate.check_acc, m, d)
    bad_acc = integrate.bad_acc(m, d)
    if m.opt.integrator in (IntegratorType.IMPLICIT, IntegratorType.IMPLICITFAST):
        d2 = fwd.run(integrate.implicit, m, d)
    else:
        d2 = fwd.run(integrate.euler, m, d)
    if exact:
        return d2
    return fwd.run(integrate.reset_where, m, d2, bad_acc, warning=integrate.Warning.BADQACC, keep=d_pos_vel)


@_entry_point
def inverse(m: Model, d: Data) -> Data:
    """Inverse dynamics (mj_inverse): qfrc_inverse, the constraint forces implied by qacc, and the sensors."""
    check_data(m, d)
    d = fwd.forward_pos_vel(m, d)
    return fwd.run(inv.inverse_acc, m, d, sensors=True)


def make_data(m: Model) -> Data:
    """Data at `qpos0`, zero velocity and controls (mj_makeData + mj_resetData): `mjx_lite.data.make_data`; with the
    sleep flag and trees of sleep policy "init", those are put to sleep as mj_resetData does (a forward pass, then
    mj_sleep with those trees ready: `sleep.init`)."""
    return sleep.init(m, _data.make_data(m), forward)
