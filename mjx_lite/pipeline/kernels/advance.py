"""The integrator's velocity and position update (integrate._advance: qvel + h qacc, then mj_integratePos with the
new velocity) as one fused kernel, for Euler and the implicit integrators.

Outputs (per environment): qpos (nq,), qvel (nv,). Inputs: qpos (nq,), qvel (nv,), qacc (nv,) and opt.timestep
(shared by the block unless vmapped).

qvel' = qvel + h qacc per dof; then loops over static tables of joints by kind: slide/hinge and the translation of
free joints qpos += h qvel'; ball joints and the rotation of free joints normalise the quaternion and multiply it
by exp(h omega / 2) (the half-angle's sine through sinc, as integrate._quat_integrate, exact at omega = 0). The
formulas are integrate.py's written per lane; fields equal the XLA update's to round-off. Derivatives go through
the XLA twin (kernels/launch.py), the caller's `integrate_pos`.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import support
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import JointType, Model

__all__ = ["advance", "fusable", "plan"]


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


def _body(m: Model, p: dict):
    nv = m.nv

    def body(io):
        tab, read = io.table, io.read
        h = read("timestep", 0)

        def velocity(i):
            io.write("qvel", i, read("qvel", i) + h * read("qacc", i))

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
