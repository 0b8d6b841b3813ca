"""The integrator's velocity and position update (integrate._advance: qvel + h qacc, then mj_integratePos with the
new velocity) as one fused kernel, for Euler and the implicit integrators; and Euler with implicit damping whole
(`euler`: the damping, qacc = (M + h B)^-1 (qfrc_smooth + qfrc_constraint) and the update) as one kernel.

Outputs (per environment): qpos (nq,), qvel (nv,). Inputs: qpos (nq,), qvel (nv,), qacc (nv,) and opt.timestep
(shared by the block unless vmapped).

qvel' = qvel + h qacc per dof; then loops over static tables of joints by kind: slide/hinge and the translation of
free joints qpos += h qvel'; ball joints and the rotation of free joints normalise the quaternion and multiply it
by exp(h omega / 2) (the half-angle's sine through sinc, as integrate._quat_integrate, exact at omega = 0). The
formulas are integrate.py's written per lane; fields equal the XLA update's to round-off. Derivatives go through
the XLA twin (kernels/launch.py), the caller's `integrate_pos`.

`euler` (integrate.euler where the damping is implicit): per dof the damping's derivative B = b + 2 p1 |v| + 3 p2 v^2
(the dof's damping and dampingpoly plus those of the actuator on its joint, derivative.euler_damping), then
kernels/factor.py's `shifted_body` factorises qM + h B (tree elimination, pivots clamped at MINVAL) and solves for
qacc (a scratch output), then the update above reads it. Inputs besides the update's: qM, qfrc_smooth, qfrc_constraint
and the Model's dof_damping, dof_dampingpoly (actuator_damping, actuator_dampingpoly when an actuator is on a
damped joint). Its twin: derivative.euler_damping, inertia.solve_shifted and the update's twin.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import derivative, inertia, sleep, support
from mjx_lite.pipeline.kernels import factor as _factor
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import Data, JointType, Model, qm_shape

__all__ = ["advance", "euler", "euler_fusable", "fusable", "plan"]


def fusable(m: Model) -> bool:
    """Static: the model has dofs (and so joints: every qpos belongs to one)."""
    return m.nv > 0


def plan(m: Model) -> dict:
    """Static tables (name -> int32 array; empty ones left out): qpos and dof addresses of the linear coordinates
    (slide, hinge, free translation) and of the quaternions (ball, free rotation)."""
    jtype, qadr, dadr = np.asarray(m.jnt_type), np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    scal = np.nonzero((jtype == JointType.SLIDE) | (jtype == JointType.HINGE))[0]
    free = np.nonzero(jtype == JointType.FREE)[0]
    ball = np.nonzero(jtype == JointType.BALL)[0]
    lin_q = np.concatenate([qadr[scal], (qadr[free][:, None] + np.arange(3)).ravel()])
    lin_d = np.concatenate([dadr[scal], (dadr[free][:, None] + np.arange(3)).ravel()])
    tab = dict(lin_qadr=lin_q, lin_dadr=lin_d, quat_qadr=np.concatenate([qadr[ball], qadr[free] + 3]),
               quat_dadr=np.concatenate([dadr[ball], dadr[free] + 3]))  # fmt: skip
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def _body(m: Model, p: dict, qacc: Callable | None = None):
    """The update's body; qacc(io, i): dof i's acceleration (default: input qacc)."""
    nv = m.nv

    def body(io):
        tab, read = io.table, io.read
        h = read("timestep", 0)
        acc = (lambda i: read("qacc", i)) if qacc is None else (lambda i: qacc(io, i))

        def velocity(i):
            io.write("qvel", i, read("qvel", i) + h * acc(i))

        def linear(k):
            qa = tab("lin_qadr", k)
            io.write("qpos", qa, read("qpos", qa) + h * io.load("qvel", tab("lin_dadr", k)))

        def rotation(k):  # integrate._quat_integrate
            qa, da = tab("quat_qadr", k), tab("quat_dadr", k)
            q = launch.unit_quat(tuple(read("qpos", qa + i) for i in range(4)))
            w = tuple(io.load("qvel", da + i) for i in range(3))
            sw = w[0] * w[0] + w[1] * w[1] + w[2] * w[2]
            wzero = sw <= 0.0
            half = 0.5 * (where(wzero, 0.0, jp.sqrt(where(wzero, 1.0, sw))) * h)
            x = half / np.pi  # jnp.sinc(x): sin(pi x) / (pi x), 1 at 0
            x0 = x == 0.0
            pix = where(x0, 1.0, np.pi * x)
            scale = 0.5 * h * where(x0, 1.0, jp.sin(pix) / pix)
            dq = (jp.cos(half), w[0] * scale, w[1] * scale, w[2] * scale)
            out = (q[0] * dq[0] - q[1] * dq[1] - q[2] * dq[2] - q[3] * dq[3],
                   q[0] * dq[1] + q[1] * dq[0] + q[2] * dq[3] - q[3] * dq[2],
                   q[0] * dq[2] - q[1] * dq[3] + q[2] * dq[0] + q[3] * dq[1],
                   q[0] * dq[3] + q[1] * dq[2] - q[2] * dq[1] + q[3] * dq[0])  # fmt: skip
            for i in range(4):
                io.write("qpos", qa + i, out[i])

        _loop(0, nv, velocity)
        if "lin_qadr" in p:
            _loop(0, p["lin_qadr"].size, linear)
        if "quat_qadr" in p:
            _loop(0, p["quat_qadr"].size, rotation)

    return body




def advance(m: Model, qpos: jax.Array, qvel: jax.Array, qacc: jax.Array, integrate_pos: Callable,
            how: launch.Launch) -> tuple[jax.Array, jax.Array]:  # fmt: skip
    """(qpos', qvel') = (integrate_pos(m, qpos, qvel', h), qvel + h qacc) as one fused kernel; `integrate_pos`
    (integrate.py's, passed in: integrate imports this package) is the XLA twin's position update."""

    def xla(x):
        h = x["timestep"]
        v = x["qvel"] + h * x["qacc"]
        return {"qpos": integrate_pos(m, x["qpos"], v, h), "qvel": v}

    x = dict(qpos=qpos, qvel=qvel, qacc=qacc, timestep=m.opt.timestep)
    p = support.memo(m, "kernels_advance_plan", plan)
    k = launch.Kernel("advance", {n: tuple(jp.shape(v)) for n, v in x.items()}, {"qpos": qpos.shape,
                      "qvel": qvel.shape}, p, _body(m, p), xla)  # fmt: skip
    dtype = qvel.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    return out["qpos"].astype(qpos.dtype), out["qvel"]


def euler_fusable(m: Model) -> bool:
    """Static: Euler's implicit damping and update run as one kernel (`fusable` and the tree factorisation,
    factor.fusable; not with sleeping trees: mj_sleep runs between the acceleration and the update)."""
    return fusable(m) and _factor.fusable(m) and not sleep.on(m)


def _damping_actuators(m: Model) -> np.ndarray:
    """Static (nv,) the actuator on each dof's joint (jnt_actuatorid), -1 for none."""
    return np.asarray(m.jnt_actuatorid)[np.asarray(m.dof_jntid)].astype(np.int32)


def euler(m: Model, d: Data, integrate_pos: Callable, how: launch.Launch) -> tuple[jax.Array, jax.Array]:
    """(qpos', qvel') of Euler with implicit damping as one fused kernel (the caller checks `euler_fusable` and that
    the damping is implicit): qacc = (M + h B)^-1 (qfrc_smooth + qfrc_constraint), then the update as `advance`."""
    nv = m.nv
    aid = _damping_actuators(m)
    acts = bool(np.any(aid >= 0))
    x = dict(qpos=d.qpos, qvel=d.qvel, qM=d.qM, qfrc_smooth=d.qfrc_smooth, qfrc_constraint=d.qfrc_constraint,
             timestep=m.opt.timestep, dof_damping=m.dof_damping, dof_dampingpoly=m.dof_dampingpoly)  # fmt: skip
    if acts:
        x.update(actuator_damping=m.actuator_damping, actuator_dampingpoly=m.actuator_dampingpoly)
    p = support.memo(m, "kernels_advance_plan", plan)
    tables = dict(p, **_factor.shifted_tables(m))
    if acts:
        tables["e_act"] = np.maximum(aid, 0).astype(np.int32)
        tables["e_has"] = (aid >= 0).astype(np.int32)

    def damping(io, k):  # h (b + 2 p1 |v| + 3 p2 v^2) (derivative.euler_damping)
        b, (p1, p2) = io.read("dof_damping", k), io.read_vec("dof_dampingpoly", k, 2)
        if acts:
            has, a = io.table("e_has", k) > 0, io.table("e_act", k)
            q1, q2 = io.read_vec("actuator_dampingpoly", a, 2)
            b = b + where(has, io.read("actuator_damping", a), 0.0, io.dtype)
            p1, p2 = p1 + where(has, q1, 0.0, io.dtype), p2 + where(has, q2, 0.0, io.dtype)
        v = io.read("qvel", k)
        return io.read("timestep", 0) * (b + 2.0 * p1 * jp.abs(v) + 3.0 * p2 * v * v)

    update = _body(m, p, lambda io, i: io.load("_qacc", i))

    def body(io):
        force = lambda k: io.read("qfrc_smooth", k) + io.read("qfrc_constraint", k)  # noqa: E731
        _factor.shifted_body(io, m, lambda k: damping(io, k), force, "_qacc")
        update(io)

    def xla(x):
        h = x["timestep"]
        names = ("dof_damping", "dof_dampingpoly", "actuator_damping", "actuator_dampingpoly")
        m2 = launch.detach(m, {n: x[n] for n in names if n in x})
        d2 = launch.detach(d, {"qvel": x["qvel"], "qM": x["qM"]})
        shift = h * derivative.euler_damping(m2, d2)
        qacc = inertia.solve_shifted(m2, d2, shift, x["qfrc_smooth"] + x["qfrc_constraint"])
        v = x["qvel"] + h * qacc
        return {"qpos": integrate_pos(m, x["qpos"], v, h), "qvel": v}

    nm = support.tables(m).m_rows.size
    inputs = {n: tuple(jp.shape(v)) for n, v in x.items()}
    assert inputs["qM"] == tuple(qm_shape(m))
    outputs = {"qpos": d.qpos.shape, "qvel": d.qvel.shape, "_qacc": (nv,), "_ld": (nm,), "_inv": (nv,)}
    k = launch.Kernel("euler", inputs, outputs, tables, body, xla)
    dtype = d.qvel.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    return out["qpos"].astype(d.qpos.dtype), out["qvel"]
