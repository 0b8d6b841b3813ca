"""Derivatives of the step as a product: transition Jacobians in MuJoCo's convention, and contact-aware gradients.

`transition(m, d)` returns the Jacobians of one `step` in the layout and tangent-space convention of MuJoCo's
`mjd_transitionFD`, computed exactly by autodiff through the step instead of finite differences (forward mode
where the model allows it, else reverse mode through the implicit differentiation of the constraint solver):

    x = (dq, qvel, act): (2 nv + na,)  dq is a tangent-space position (nv,): qpos = integrate_pos(qpos0, dq, 1)
    A = d x_next / d x        (2nv+na, 2nv+na)
    B = d x_next / d ctrl     (2nv+na, nu)
    C = d sensordata / d x    (nsensordata, 2nv+na)   sensordata of the step's forward pass (at x, as mj_step)
    D = d sensordata / d ctrl (nsensordata, nu)

The position rows of A and B are tangent vectors at the next state: dq_next = differentiate_pos(qpos_next0,
qpos_next) (mj_differentiatePos), so ball and free joints contribute 3 rows/columns per rotation.

Contact-aware gradients (`Config(contact_gradients="smooth")`, off by default): `step` keeps its exact value but
its reverse-mode derivative is the average of the exact derivatives at `contact_smoothing_samples` randomly
perturbed copies of the input state (first-order randomised smoothing of the dynamics, the "bundled gradient" of
Suh, Pang and Tedrake 2022; cf. Suh et al. 2022, "Do differentiable simulators give better policy gradients?",
and Pang et al. 2023 for the smoothing view of contact). Where a contact is about to be made the smoothed
derivative sees it, so an optimiser is pulled towards making the contact; the exact derivative is zero there.
Positions (the dofs `contact_smoothing_dofs`, default all) are perturbed in the tangent space with standard
deviation `contact_smoothing_std` (metres or radians). `mjx_lite.step` itself consults the configuration.
See docs/gradients.md for its cost and when the exact gradient is the better choice.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NamedTuple

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import active_collision as _active_collision
from mjx_lite import io as _io
from mjx_lite import linalg
from mjx_lite._eager import jit_when_eager
from mjx_lite.collision import driver as _driver
from mjx_lite.config import linalg as config_linalg
from mjx_lite.config import matmul_precision
from mjx_lite.pipeline import actuation as _actuation
from mjx_lite.pipeline import constraint as _constraint
from mjx_lite.pipeline import derivative as _derivative
from mjx_lite.pipeline import forward as _fwd
from mjx_lite.pipeline import inertia as _inertia
from mjx_lite.pipeline import integrate as _integrate
from mjx_lite.pipeline import sensor as _sensor
from mjx_lite.pipeline import smoothing as _smoothing
from mjx_lite.pipeline import step as _pipeline
from mjx_lite.pipeline.buckets import batch_max as _batch_max
from mjx_lite.pipeline.integrate import integrate_pos
from mjx_lite.solver import common as _solver
from mjx_lite.types import MINVAL, Data, DisableBit, IntegratorType, JointType, Model
from mjx_lite.types import Warning as MjWarning

__all__ = ["differentiate_pos", "forward_mode", "integrate_pos", "jacobian", "smooth_step", "step", "transition"]

# Below this |sin(angle/2)| the rotation vector of a quaternion uses the series of atan2(s, w) / s
# (1/w - s^2 / (3 w^3)): its truncation error s^4/5 < 2e-17 is below float64 round-off, and the closed form's
# 0/0 (value and derivative) at the identity is avoided.
_LOG_SERIES_BELOW = 1e-4


def _quat_log(q: jax.Array) -> jax.Array:
    """Rotation vector v of unit quaternion q (..., 4) with q = exp(v) (shortest path), NaN-free at identity.

    Equals mju_quat2Vel(q, 1): angle wrapped to [-pi, pi] (equivalently q flipped to w >= 0).
    """
    q = jp.where(q[..., :1] < 0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    s2 = jp.sum(v * v, axis=-1)
    small = s2 < _LOG_SERIES_BELOW**2
    s = jp.sqrt(jp.where(small, 1.0, s2))
    ws = jp.where(small, w, 1.0)
    ratio = jp.where(small, 1.0 / ws - s2 / (3.0 * ws**3), jp.arctan2(s, w) / s)  # atan2(s, w) / s
    return 2.0 * v * ratio[..., None]


def _quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jp.sum(av * bv, axis=-1, keepdims=True)
    v = aw * bv + bw * av + jp.cross(av, bv)
    return jp.concatenate([w, v], axis=-1)


def _joint_tables(m: Model):
    """Static index tables: (linear qpos, linear dof, quaternion qpos (k, 4), rotation dofs (k, 3))."""
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    vadr = np.asarray(m.jnt_dofadr)
    lin_q, lin_v, rot_q, rot_v = [], [], [], []
    for j in range(m.njnt):
        if jtype[j] in (JointType.HINGE, JointType.SLIDE):
            lin_q.append([qadr[j]])
            lin_v.append([vadr[j]])
        elif jtype[j] == JointType.FREE:
            lin_q.append(qadr[j] + np.arange(3))
            lin_v.append(vadr[j] + np.arange(3))
            rot_q.append(qadr[j] + 3 + np.arange(4))
            rot_v.append(vadr[j] + 3 + np.arange(3))
        else:  # ball
            rot_q.append(qadr[j] + np.arange(4))
            rot_v.append(vadr[j] + np.arange(3))
    cat = lambda xs, w: np.concatenate(xs).astype(int) if xs else np.zeros(0, int)  # noqa: E731
    stack = lambda xs, w: np.stack(xs).astype(int) if xs else np.zeros((0, w), int)  # noqa: E731
    return cat(lin_q, 1), cat(lin_v, 1), stack(rot_q, 4), stack(rot_v, 3)


def differentiate_pos(m: Model, qpos1: jax.Array, qpos2: jax.Array, h: float | jax.Array = 1.0) -> jax.Array:
    """Velocity that takes qpos1 to qpos2 in time h (mj_differentiatePos), (nv,).

    `integrate_pos(m, qpos1, differentiate_pos(m, qpos1, qpos2, h), h) == qpos2`; rotations are expressed in the
    local frame of qpos1 (ball and free joints), with a derivative that is finite and exact at qpos1 == qpos2.
    """
    lin_q, lin_v, rot_q, rot_v = _joint_tables(m)
    out = jp.zeros((m.nv,), jp.result_type(qpos1, qpos2))
    if lin_q.size:
        out = out.at[lin_v].set(qpos2[lin_q] - qpos1[lin_q])
    if rot_q.size:
        q1, q2 = qpos1[rot_q], qpos2[rot_q]
        q1 = q1 / jp.linalg.norm(q1, axis=-1, keepdims=True)
        q2 = q2 / jp.linalg.norm(q2, axis=-1, keepdims=True)
        conj = q1 * jp.asarray([1.0, -1.0, -1.0, -1.0], q1.dtype)
        out = out.at[rot_v].set(_quat_log(_quat_mul(conj, q2)))
    return out / h


# ---- the step, with the configured gradient ------------------------------------------------------------------


def step(m: Model, d: Data) -> Data:
    """`mjx_lite.step` with the derivative chosen by `m.config.contact_gradients`.

    "exact" (default): the exact derivative. "smooth": the same value, with the randomised-smoothing derivative
    of `smooth_step`. `mjx_lite.step` consults the configuration itself, so this is that function under the name
    the planners use.
    """
    return _pipeline.step(m, d)


def smooth_step(m: Model, d: Data) -> Data:
    """One step whose value is exact and whose reverse-mode derivative is randomly smoothed (see
    `mjx_lite.pipeline.smoothing.smooth_step`)."""
    return _smoothing.smooth_step(_pipeline.step, m, d)


# ---- Jacobians ---------------------------------------------------------------------------------------------------


def forward_mode(m: Model) -> bool:
    """Whether forward-mode autodiff (`jax.jvp`, `jax.jacfwd`) goes through `step` for this model.

    It does not where the constraint solver runs with its implicit (reverse-only) gradient, i.e. a model with
    constraint rows under `Config(gradients="implicit")`, nor with `contact_gradients="smooth"` (reverse only).
    """
    if m.config.contact_gradients != "exact":
        return False
    return m.njmax == 0 or m.config.gradients == "unrolled"


def jacobian(m: Model, f, argnums: int = 0, has_aux: bool = False):
    """`jax.jacfwd(f)` where `forward_mode(m)`, else `jax.jacrev(f)`: the Jacobian of a function that steps `m`."""
    jac = jax.jacfwd if forward_mode(m) else jax.jacrev
    return jac(f, argnums=argnums, has_aux=has_aux)


# ---- the step linearised at its solution -----------------------------------------------------------------------


def _solver_on(m: Model) -> bool:
    return m.njmax > 0 and not (m.opt.disableflags & DisableBit.CONSTRAINT)


def _symmetric_qderiv(m: Model) -> bool:
    """Static: d(qfrc_passive + qfrc_actuator)/d(qvel) is symmetric at every state (damping, tendon damping and
    actuator forces enter as moment' f'(velocity) moment); fluid forces are the exception."""
    return not m.fluid_active


def linearized_supported(m: Model) -> bool:
    """Whether `linearized_step` applies: exact gradients, no noslip, any integrator but IMPLICITFAST with fluid
    forces or standalone free bodies (those are left to autodiff through `step`)."""
    if m.config.contact_gradients != "exact" or m.opt.noslip_iterations > 0:
        return False
    if m.opt.integrator == IntegratorType.IMPLICITFAST:
        return _symmetric_qderiv(m) and _integrate._standalone_free_dofs(m).size == 0
    return True


_sg = jax.lax.stop_gradient


def _newton(x_star: jax.Array, residual: jax.Array, solve) -> jax.Array:
    """x* with the derivative of the root x(p) of r(x, p) = 0 at x*: -A^-1 dr/dp, given residual = r(x*, p) (its
    value ~0, its derivative in p) and solve(b) = A^-1 b with A = dr/dx held at x* (not differentiated)."""
    delta = solve(residual)
    return _sg(x_star) - (delta - _sg(delta))


def _smooth_acc_at(m: Model, d: Data) -> Data:
    """qacc_smooth = M^-1 qfrc_smooth differentiated as M qacc_smooth - qfrc_smooth = 0 with M's factors held: no
    derivative of the factorisation."""
    if m.nv == 0:
        return d
    qs = _sg(d.qacc_smooth)
    qld, inv = _sg(d.qLD), _sg(d.qLDiagInv)
    r = _inertia.mul_m(m, d, qs) - d.qfrc_smooth
    return d.replace(qacc_smooth=_newton(qs, r, lambda b: _inertia.solve_factored(m, qld, inv, b)))


def _constraint_at(m: Model, d: Data, star: Data, aligned: bool = True) -> Data:
    """The constraint stage given the solver's solution `star.qacc` at this point: the value is star's, the
    derivative that of the implicit function g(qacc, problem) = M (qacc - qacc_smooth) - J' f(J qacc - aref) = 0,
    i.e. one Newton correction qacc* - H^-1 g(qacc*, problem) with H = M + J' H_s J held at qacc* (the step's own
    Hessian: factorised once per state, whatever the number of tangents). aligned=False: d's constraint rows are not
    star's row for row (`active_collision`: the same contacts in other slots), so the row values (efc_force,
    efc_state) are d's own at star's qacc instead of star's."""
    if not _solver_on(m):
        return _fwd.fwd_constraint(m, d)
    layout = _constraint.plan(m).layout
    prob = _constraint.problem(m, d)
    qacc_s = _sg(star.qacc)
    jtf = None
    if _held_contacts(m):  # efc_J's contact rows are held: their derivative enters as products (dJ qacc, dJ' f)
        jx, jtf = _constraint.contact_products(m, d)
        prob = dataclasses.replace(prob, aref=prob.aref - _constraint._tangent(jx(qacc_s)))
    _, ev, _, Ma = _solver.primal_cost(layout, prob, qacc_s)
    g = Ma - _solver.p_jt_mul(prob, ev.force)
    if jtf is not None:
        g = g - _constraint._tangent(jtf(_sg(ev.force)))
    sprob = _sg(prob)
    hess = _solver.full_m(layout, sprob) + _solver.constraint_hessian(layout, sprob, _sg(ev))
    library = config_linalg(m.config) == "library"
    qacc = _newton(qacc_s, g, lambda b: linalg.spd_solve(hess, b, library=library, mindiag=MINVAL))
    jar = _solver.p_j_mul(prob, qacc) - prob.aref
    ev_at = _solver.eval_constraints(layout, prob, jar)
    force = ev_at.force
    if aligned:
        force = force + _sg(star.efc_force - force)
    qfrc = _solver.p_jt_mul(prob, force)
    if jtf is not None:
        qfrc = qfrc + _constraint._tangent(jtf(_sg(force)))
    qfrc = qfrc + _sg(star.qfrc_constraint - qfrc)
    state, efc_b = (star.efc_state, star.efc_b) if aligned else (_sg(ev_at.state), _sg(jar))
    return d.replace(qacc=qacc, efc_force=force, efc_state=state, efc_b=efc_b, qfrc_constraint=qfrc,
                     solver_niter=star.solver_niter, solver_improvement=star.solver_improvement,
                     solver_gradient=star.solver_gradient)  # fmt: skip


def _integrate_at(m: Model, d: Data) -> Data:
    """The integrator's acceleration (M + h B)^-1 qfrc (Euler's implicit damping B), (M - h qDeriv)^-1 qfrc
    (implicit; symmetrised qDeriv for implicitfast) differentiated as a root with the matrix held: the derivative
    of the matrix enters through one product with the solution (a jvp of the velocity forces), no derivative of a
    factorisation and no second derivative of qDeriv's columns."""
    h = m.opt.timestep
    library = config_linalg(m.config) == "library"
    integ = m.opt.integrator
    qfrc = d.qfrc_smooth + d.qfrc_constraint
    mass = _sg(_inertia.full_m(m, d))
    if integ == IntegratorType.EULER:
        flags = m.opt.disableflags
        undamped = _integrate._concrete_all_zero(m.dof_damping, m.dof_dampingpoly) and not np.any(
            np.asarray(m.jnt_actuatorid) >= 0)
        if m.nv == 0 or (flags & DisableBit.EULERDAMP) or (flags & DisableBit.DAMPER) or undamped:
            return _integrate.euler(m, d)  # qacc itself: no solve
        b = _derivative.euler_damping(m, d)
        mat = mass + h * jp.diag(_sg(b))
        solve = functools.partial(linalg.spd_solve, mat, library=library, mindiag=MINVAL)
        x = _sg(solve(qfrc))

        def op(v):
            return _inertia.mul_m(m, d, v) + h * b * v
    else:
        bias = integ == IntegratorType.IMPLICIT
        force = _derivative.smooth_vel_force(m, d, bias=bias)
        der = _sg(_derivative.qderiv(m, d, bias=bias))
        if bias:
            solve = functools.partial(linalg.general_solve, mass - h * der, library=library)
        else:
            sym = jp.tril(der) + jp.tril(der, -1).T
            solve = functools.partial(linalg.spd_solve, mass - h * sym, library=library, mindiag=MINVAL)
        x = _sg(solve(qfrc))

        def op(v):  # (M - h qDeriv) v; implicitfast: qDeriv symmetric (`_symmetric_qderiv`), so sym(qDeriv) v
            return _inertia.mul_m(m, d, v) - h * jax.jvp(force, (d.qvel,), (v,))[1]
    qacc = _newton(x, op(x) - qfrc, solve)
    return _integrate._advance(m, d, d.act_dot, qacc)


class SolverStar(NamedTuple):
    """What `_constraint_at` reads of a forward pass: the solver's solution and its statistics."""

    qacc: jax.Array
    efc_force: jax.Array
    efc_state: jax.Array
    efc_b: jax.Array
    qfrc_constraint: jax.Array
    solver_niter: jax.Array
    solver_improvement: jax.Array
    solver_gradient: jax.Array


def _solver_star(d: Data) -> SolverStar:
    return SolverStar(*(getattr(d, f) for f in SolverStar._fields))


def _held_contacts(m: Model) -> bool:
    """Static: the derivative pass builds the contact rows of efc_J without derivative and differentiates their
    products instead (`constraint.make_constraint_held`, where supported)."""
    return _solver_on(m) and _constraint.held_contacts_supported(m)


def _forward_at(m: Model, d: Data, star, sensors: bool, collide=None) -> Data:
    """forward_skip with its mass-matrix and constraint solves linearised at star's solution (no FWDINV check);
    collide: the collision stage in place of m's (`active_collision.stage`), None: m's own."""
    constrain = _constraint.make_constraint_held if _held_contacts(m) else None
    d = _fwd.forward_pos_vel(m, d, sensors, collide, constrain)
    d = _fwd.fwd_actuation(m, d)
    d = _fwd.fwd_acceleration(m, d)
    d = _fwd.run(_smooth_acc_at, m, d)
    d = _fwd.run(_constraint_at, m, d, star, collide is None)
    if sensors:
        d = _fwd.run(_sensor.sensor_acc, m, d)
    return d


def linearized_star(m: Model, d: Data):
    """The solutions `linearized_step` linearises at, not differentiated: the forward pass at the state of `d`
    (`forward_skip(m, d, sensors=False)`) and, for RK4 with a constraint solve, the `SolverStar` of stages 2-4
    stacked (3, ...) (the RK4 step run once, its stages as in `step`: same warm start, same solver iterations), else
    None (without constraints no stage has a solution to linearise at: the RK4 run would be dead weight in the
    compiled program)."""
    with matmul_precision(m.config):
        star = _fwd.forward_skip(m, d, sensors=False)
        stages = None
        if m.opt.integrator == IntegratorType.RK4 and _solver_on(m):

            def fwd(mm, di, x):
                f = _fwd.forward_skip(mm, di, sensors=False)
                return f, _solver_star(f)

            stages = _integrate.rk4_stages(m, star, fwd)[1]
    return jax.lax.stop_gradient((star, stages))


def linearized_step(m: Model, d: Data, star: Data, sensors: bool = True, stages: SolverStar | None = None,
                    collide=None) -> Data:  # fmt: skip
    """One step whose linear solves are replaced by their linearisation at their solution (see `_newton`).

    star: the forward pass at the state of `d` (`forward_skip(m, d, sensors=False)`), holding the solver's qacc;
    stages (RK4 with constraints only): the solver solutions of RK4's stages 2-4 at that state (`linearized_star`).
    At that state the value is the step's (without its divergence checks); the derivative, in forward and reverse
    mode alike, is the implicit-function derivative of the constraint solves (no differentiation through solver
    iterations) and of the mass-matrix and integrator solves (no differentiation through factorisations). RK4:
    every stage's forward pass is linearised at its own solution. collide (not with RK4): the collision stage of
    the differentiated pass (`active_collision.stage`), None: m's own.
    """
    if collide is not None and m.opt.integrator == IntegratorType.RK4:
        raise ValueError("linearized_step: collide is not supported with RK4")
    with matmul_precision(m.config):
        d1 = _forward_at(m, d, star, sensors, collide)
        if m.opt.integrator != IntegratorType.RK4:
            return _fwd.run(_integrate_at, m, d1)
        if stages is None and _solver_on(m):
            raise ValueError("linearized_step: an RK4 model with constraints needs the stages' solutions "
                             "(linearized_star)")
        fwd = lambda mm, di, x: (_forward_at(mm, di, x, False), None)  # noqa: E731
        dn = _integrate.rk4_stages(m, d1, fwd, stages)[0]
        if _actuation.dcmotor_state(m):  # as `step`: dcmotor states see the step's actuator velocity
            dn = dn.replace(actuator_velocity=dn.actuator_moment @ d1.qvel)
        return dn


# ---- transition Jacobians ------------------------------------------------------------------------------------


MODES = ("auto", "forward", "reverse", "step")


def _hi_dot(a: jax.Array, b: jax.Array) -> jax.Array:
    return jp.dot(a, b, precision=jax.lax.Precision.HIGHEST)


def _structured_reverse(m: Model, sensors: bool) -> bool:
    """Static: mode "auto" of `_structured_jacobian` runs reverse mode: its nv+na (+nsensordata) rows are at most
    the nv position tangents plus half the nv+na+nu others (forward mode's velocity tangents skip the position
    stages: about half the cost of a position tangent or less). Measured on MJX's humanoid (nv 27, nu 21; vmap over 64
    states, load 14): reverse 33.5 ms per state, forward 41.6 ms (the former full-row reverse mode 81.0 ms); load 3:
    4.5, 19.2 and 23.7 ms, MuJoCo C's centred differences 3.0 ms. Not where the pair table has GJK/EPA colliders
    (general convex, cylinder pairs, two-stage mesh colliders): their reverse-mode derivative costs far more;
    dm_control's quadruped (vmap 64, ncon 8, load 3): forward 50 ms per state, reverse 154 ms."""
    groups = _driver.pair_table(m).groups if m.nconmax else ()
    if any(getattr(g.collider, "func", g.collider) in _driver._LOOPED or _driver._shared_distance(g)
           or g.stages is not None for g in groups):  # fmt: skip
        return False
    rows = m.nv + m.na + (m.nsensordata if sensors else 0)
    return rows <= m.nv + (m.nv + m.na + m.nu) // 2


def _structured_jacobian(m: Model, md: Model, d: Data, star: Data, sensors: bool, mode: str, collide=None
                         ) -> jax.Array:  # fmt: skip
    """d(x_next, sensordata)/d(dq, qvel, act, ctrl) (2nv+na (+nsensordata), 2nv+na+nu) of the linearised step
    (`linearized_step` of md at star) for the integrators whose qpos_next = integrate_pos(qpos, qvel_next, h)
    (Euler, implicit, implicitfast).

    Only the rows of (qvel_next, act_next, sensordata) are differentiated through the dynamics, V (nv+na+ns,
    2nv+na+nu); the position rows follow from the position update: dq_next = Pq dq + Pv dqvel_next, with Pq, Pv
    (nv, nv) the derivatives of differentiate_pos(qpos_next, integrate_pos(integrate_pos(qpos, dq, 1), qvel_next,
    h)) (identity and h I for hinges and slides), so A's position rows cost one (nv, nv) product instead of nv more
    rows (reverse) or nv more outputs (forward).

    Forward mode ("forward") runs two `jacfwd`s: one over the nv position tangents (through every stage)
    and one over the nv+na+nu velocity, activation and control tangents, whose position stages (kinematics,
    collision, constraint Jacobians, mass matrix: the bulk of the work) carry no tangent and run once per state, not
    once per tangent. Reverse mode ("reverse"): `jacrev` over the nv+na (+ns) rows. "auto": by shape
    (`_structured_reverse`).
    """
    nv, na, nu = m.nv, m.na, m.nu
    nx = 2 * nv + na
    dtype = d.qvel.dtype

    def rows(dq, dv, da, du):
        di = d.replace(qpos=integrate_pos(m, d.qpos, dq, 1.0), qvel=d.qvel + dv, act=d.act + da, ctrl=d.ctrl + du)
        dn = linearized_step(md, di, star, sensors, None, collide)
        out = jp.concatenate([dn.qvel, dn.act] + ([dn.sensordata] if sensors else []))
        return out, jax.lax.stop_gradient(out)

    zq, zv, za, zu = (jp.zeros((n,), dtype) for n in (nv, nv, na, nu))
    if mode == "auto":
        mode = "reverse" if _structured_reverse(m, sensors) else "forward"
    if mode == "reverse":
        split = lambda z: jp.split(z, np.cumsum([nv, nv, na]))  # noqa: E731
        V, out0 = jax.jacrev(lambda z: rows(*split(z)), has_aux=True)(jp.zeros((nx + nu,), dtype))
    else:
        Vq, out0 = jax.jacfwd(lambda dq: rows(dq, zv, za, zu), has_aux=True)(zq)
        split = lambda w: jp.split(w, np.cumsum([nv, na]))  # noqa: E731
        Vr, _ = jax.jacfwd(lambda w: rows(zq, *split(w)), has_aux=True)(jp.zeros((nv + na + nu,), dtype))
        V = jp.concatenate([Vq, Vr], axis=1)
    h = m.opt.timestep
    vn = out0[:nv]
    qn0 = integrate_pos(m, d.qpos, vn, h)

    def q_next(dq, v):
        return differentiate_pos(m, qn0, integrate_pos(m, integrate_pos(m, d.qpos, dq, 1.0), v, h))

    Pq, Pv = jax.jacfwd(q_next, argnums=(0, 1))(zq, vn)
    Q = _hi_dot(Pv, V[:nv])
    Q = Q.at[:, :nv].add(Pq)
    return jp.concatenate([Q, V], axis=0)


# Contact capacities `transition(ncon="auto")` tries below the model's own: a batch whose states all have at most
# that many contacts runs the derivative pass with that capacity (legged models on the ground have a few contacts).
AUTO_NCON = (8,)


def _overflow(star: Data, d: Data) -> jax.Array:
    """() bool: the forward pass `star` (from d) left contacts or constraint rows out (its capacity was full)."""
    full = (MjWarning.CONTACTFULL, MjWarning.CNSTRFULL)
    return sum(star.warning_number[w] - d.warning_number[w] for w in full) > 0


def _capped_jacobian(m: Model, md: Model, d: Data, star: Data, sensors: bool, mode: str) -> jax.Array:
    """`_structured_jacobian` of md (m, or m with a contact capacity) at star (md's forward pass): where md is
    capped, the colliders of the differentiated pass run only on the pairs in contact at the state
    (`active_collision`, where a group has more pairs than the capacity), and the Jacobian is NaN where star left
    contacts out."""
    if md is m:
        return _structured_jacobian(m, m, d, star, sensors, mode)
    collide, over = None, _overflow(star, d)
    if _active_collision.supported(m):  # collide only the pairs in contact at the state
        sel = _active_collision.select(m, star, md.nconmax)
        if any(g is not None for g in sel.groups):  # some group has more pairs than the capacity
            collide, over = _active_collision.stage(m, sel, md.nconmax), over | sel.over
    jac = _structured_jacobian(m, md, d, star, sensors, mode, collide)
    return jp.where(over, jp.nan, jac)


def _ladder_jacobian(m: Model, d: Data, sensors: bool, mode: str, caps: tuple[int, ...]) -> jax.Array:
    """`_capped_jacobian` on the first capacity of `caps` whose forward pass holds every contact of the state (of
    every state of the batch under vmap: `_batch_max`), else on m itself. Each capacity's forward pass runs only
    where the smaller ones overflowed (nested `lax.switch`: one branch per batch)."""
    if not caps:
        star = linearized_star(m, d)[0]
        return _capped_jacobian(m, m, d, star, sensors, mode)
    md = _io.configure(m, nconmax=int(caps[0]))
    star = linearized_star(md, d)[0]
    over = _batch_max(_overflow(star, d).astype(jp.int32))
    return jax.lax.switch(over, [lambda d, s: _capped_jacobian(m, md, d, s, sensors, mode),
                                 lambda d, s: _ladder_jacobian(m, d, sensors, mode, caps[1:])], d, star)  # fmt: skip


def _ladder(m: Model, ncon) -> tuple[int, ...]:
    """The capacities below m.nconmax of a `transition` ncon given as "auto" or a tuple (sorted, unique)."""
    caps = AUTO_NCON if isinstance(ncon, str) else ncon
    return tuple(sorted({int(c) for c in caps if int(c) < m.nconmax}))


@functools.partial(jit_when_eager, static_argnames=("sensors", "mode", "ncon"))
def transition(m: Model, d: Data, sensors: bool = True, mode: str = "auto", ncon: int | str | tuple | None = None):
    """Jacobians (A, B, C, D) of one step at the state of `d` in the layout and convention of mjd_transitionFD.

    Exact. Where `linearized_supported(m)` (exact gradients, no noslip), the step is first run once, then autodiff
    goes through `linearized_step`: the same step at that state with the constraint solve, the mass-matrix solve
    and the integrator's solve replaced by their implicit-function linearisations at their solutions (RK4: those
    of each stage; no derivative of solver iterations or factorisations; the contact rows of efc_J held, their
    derivative entering as products, `constraint.make_constraint_held`, where supported). Otherwise, and for RK4
    without constraints in mode "auto" (nothing to linearise but the mass-matrix solves: the plain step compiles
    faster), autodiff goes through `step` itself (`jacobian`: forward mode where `forward_mode(m)`, else reverse
    mode through the solver's implicit gradient, or the smoothed derivative of `smooth_step`).

    Args:
      m: Model (its `config.contact_gradients` chooses exact or smoothed derivatives, see `step`).
      d: Data holding the state (qpos, qvel, act), ctrl, applied forces and qacc_warmstart; forward need not
        have run. Under `jax.vmap` over `d`, Jacobians for a batch of states.
      sensors: also return C and D (else None for both).
      mode: "auto" (by shape; Euler and the implicit integrators: reverse mode over the nv+na (+nsensordata)
        velocity, activation and sensor rows where they are at most nv + (nv+na+nu)/2, else forward mode split into
        the nv position tangents and the nv+na+nu others, see `_structured_jacobian`; RK4: forward mode over the
        2nv+na+nu inputs unless the 2nv+na (+nsensordata) outputs are fewer), "forward" (`jax.jacfwd`),
        "reverse" (`jax.jacrev`), or "step" (autodiff through `step` itself, the former method: for comparison).
      ncon: None (default), or a contact capacity for the differentiated pass (`configure(m, nconmax=ncon)`): the
        derivatives then go through ncon contact slots' rows instead of the model's m.nconmax, which is faster
        where most slots are empty; and (Euler, implicit, without flex contacts) the colliders of the differentiated
        pass run only on the pairs in contact at the state, at most ncon per group of the pair table
        (`active_collision`). Exact when the state has at most ncon active contacts; where it has more,
        the Jacobians are NaN (never a silent approximation). Not with mode "step".
        A tuple of capacities, or "auto" (`AUTO_NCON`; Euler, implicit, implicitfast): a ladder, always exact. The
        forward pass and the derivative pass run with the ladder's first capacity (as ncon=int) where its forward
        pass left no contact out; else with the next capacity, and so on, and with the model's own m.nconmax
        where every capacity overflowed. Under `jax.vmap` the choice is made once for the whole batch (`_batch_max`:
        one branch of a `lax.switch` runs, not all), so a batch pays the capacity of its fullest state; each
        capacity is compiled. Elsewhere (RK4, mode "step", unsupported models) "auto" is None.

    Called on concrete arrays it runs jitted (compiled once per model and Data shapes); inside a transformation it
    traces inline.

    Returns:
      A: (2nv+na, 2nv+na), B: (2nv+na, nu), C: (nsensordata, 2nv+na), D: (nsensordata, nu), in the dtype of
      d.qpos. State rows/columns are (dq, qvel, act) with dq in the tangent space (see the module docstring).
    """
    if mode not in MODES:
        raise ValueError(f"transition: mode must be one of {MODES}, not {mode!r}")
    nv, na, nu = m.nv, m.na, m.nu
    dtype = d.qvel.dtype
    lin = mode != "step" and linearized_supported(m)
    if lin and mode == "auto" and ncon is None and m.opt.integrator == IntegratorType.RK4 and not _solver_on(m):
        lin = False  # measured on the acrobot, vmap over 16: compile 51 s through step, 73 s linearised (load 13)
    structured = lin and m.opt.integrator != IntegratorType.RK4
    if ncon == "auto" and not structured:
        ncon = None
    if isinstance(ncon, str) and ncon != "auto":
        raise ValueError(f"transition: ncon must be None, an int, a tuple of ints or 'auto', not {ncon!r}")
    if isinstance(ncon, (tuple, list)) or ncon == "auto":
        if not structured:
            raise ValueError(f"transition: an ncon ladder needs the linearised step of Euler or an implicit "
                             f"integrator (mode {mode!r}, linearized_supported: "
                             f"{linearized_supported(m)})")  # fmt: skip
        if any(int(c) < 0 for c in (() if ncon == "auto" else ncon)):
            raise ValueError(f"transition: ncon capacities must be >= 0, not {ncon}")
        caps = _ladder(m, ncon)
        ncon = None
    else:
        caps = ()
    if ncon is not None:
        if not lin:
            raise ValueError(f"transition: ncon needs the linearised step (mode {mode!r}, linearized_supported: "
                             f"{linearized_supported(m)})")  # fmt: skip
        if ncon < 0:
            raise ValueError(f"transition: ncon must be >= 0, not {ncon}")
    md = m if ncon is None or ncon >= m.nconmax else _io.configure(m, nconmax=int(ncon))
    if lin and not caps:
        star, stages = linearized_star(md, d)

    def f(z):
        dq, dv, da, du = jp.split(z, np.cumsum([nv, nv, na]))
        di = d.replace(qpos=integrate_pos(m, d.qpos, dq, 1.0), qvel=d.qvel + dv, act=d.act + da, ctrl=d.ctrl + du)
        dn = linearized_step(md, di, star, sensors, stages) if lin else step(m, di)
        q_next = differentiate_pos(m, jax.lax.stop_gradient(dn.qpos), dn.qpos)
        x_next = jp.concatenate([q_next, dn.qvel, dn.act])
        if sensors:
            return jp.concatenate([x_next, dn.sensordata])
        return x_next

    z0 = jp.zeros((2 * nv + na + nu,), dtype)
    if caps:
        jac = _ladder_jacobian(m, d, sensors, mode, caps)
    elif lin and m.opt.integrator != IntegratorType.RK4:
        jac = _capped_jacobian(m, md, d, star, sensors, mode)
    elif lin:
        nout = 2 * nv + na + (m.nsensordata if sensors else 0)
        fwd = mode == "forward" or (mode == "auto" and z0.size <= nout)
        jac = (jax.jacfwd if fwd else jax.jacrev)(f)(z0)
    else:
        jac = jacobian(m, f)(z0)
    if md is not m and not (lin and m.opt.integrator != IntegratorType.RK4):  # contacts left out of the capped
        jac = jp.where(_overflow(star, d), jp.nan, jac)  # pass (RK4): NaN, not a wrong Jacobian
    nx = 2 * nv + na
    A, B = jac[:nx, :nx], jac[:nx, nx:]
    if not sensors:
        return A, B, None, None
    return A, B, jac[nx:, :nx], jac[nx:, nx:]
