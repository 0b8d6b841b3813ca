"""mj_transmission of tendon actuators (and of the slide/hinge joint actuators beside them) and fwd_velocity_extras'
velocities, written per lane: parts of the velocity pass's kernel (kernels/velocity.py).

Two parts:
  - `extras_body`: ten_velocity = ten_J qvel (ntendon,) and actuator_velocity = actuator_moment qvel (nout,) (zero
    under the actuation disable flag), `actuation.fwd_velocity_extras`: every velocity pass computes them.
  - `body` (when `fusable(m)`): actuator_length (nactuator,) and actuator_moment (nactuator * nv,): a tendon
    actuator's length gear[0] ten_length and moment row gear[0] ten_J (its tendon's row), a slide/hinge joint
    actuator's (joint or jointinparent) gear[0] qpos and gear[0] at its dof. The tree pass computes the
    transmission when every actuator drives a slide or hinge joint (kernels/tree.py, `tree.transmission_fused`);
    with tendon actuators the tendon stage (XLA, after the tree pass) must run first, so the velocity pass computes
    it instead: `forward.forward_pos_vel` skips the position stage's XLA transmission (`fwd_position(...,
    defer_transmission=True)`). Only where nothing between the two reads the actuators' lengths or moments: no
    actuatorpos sensor (sensor_pos reads actuator_length).

Inputs: qvel, qpos, ten_J (ntendon * nv), ten_length (ntendon,) (per environment), actuator_moment when the pass does
not compute it, and the Model's actuator_gear (shared by the block unless vmapped). The formulas are
transmission.py's and actuation.py's per lane; values equal the XLA stages' to round-off (the products' summation
order). Derivatives go through the XLA twin (`xla`: the stages on the inputs).

Not fused here (the XLA transmission runs): ball and free joint, site, slider-crank, body and so3 transmissions,
several outputs per actuator.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import actuation as _actuation
from mjx_lite.pipeline import transmission as _transmission
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import tree as _tree
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.types import Data, DisableBit, JointType, Model, SensorType, TrnType

__all__ = ["OUTPUTS", "body", "extras_body", "extras_fusable", "fusable", "plan", "xla"]

OUTPUTS = ("actuator_length", "actuator_moment")


def fusable(m: Model) -> bool:
    """Static: the velocity pass computes the transmission (see the module docstring): some actuator drives a tendon,
    every other a slide or hinge joint, one output each, no actuatorpos sensor."""
    n = m.nactuator
    if not (n and m.nv and m.ntendon) or m.nout != n or _tree.transmission_fused(m):
        return False
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    joint = np.isin(trntype, (TrnType.JOINT, TrnType.JOINTINPARENT))
    if m.njnt and np.any(joint):
        joint &= np.isin(np.asarray(m.jnt_type)[np.where(joint, trnid[:, 0], 0)], (JointType.SLIDE, JointType.HINGE))
    if not np.all(joint | (trntype == TrnType.TENDON)):
        return False
    return not (m.nsensor and np.any(np.asarray(m.sensor_type) == SensorType.ACTUATORPOS))


def extras_fusable(m: Model) -> bool:
    """Static: fwd_velocity_extras has something to compute (tendons or actuators)."""
    return bool(m.ntendon or m.nactuator)


def plan(m: Model) -> dict:
    """Static per-actuator int32 tables: t_ten (1 for a tendon actuator), t_tid (its tendon), t_qadr / t_dadr (a joint
    actuator's qpos and dof addresses)."""
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    ten = trntype == TrnType.TENDON
    jid = np.where(ten, 0, trnid[:, 0])
    qadr = np.asarray(m.jnt_qposadr)[jid] if m.njnt else np.zeros(m.nactuator, int)
    dadr = np.asarray(m.jnt_dofadr)[jid] if m.njnt else np.zeros(m.nactuator, int)
    tab = dict(t_ten=ten, t_tid=np.where(ten, trnid[:, 0], 0), t_qadr=np.where(ten, 0, qadr),
               t_dadr=np.where(ten, -1, dadr))  # fmt: skip
    return {n: np.asarray(v, np.int32) for n, v in tab.items()}


def body(m: Model):
    """The transmission's part of a kernel body: writes outputs actuator_length and actuator_moment."""
    nv = m.nv

    def run(io):
        def actuator(a):
            g = io.read("actuator_gear", 6 * a)
            ten, t = io.table("t_ten", a) > 0, io.table("t_tid", a)
            joint_len = io.read("qpos", io.table("t_qadr", a)) * g
            io.write("actuator_length", a, launch.where(ten, io.read("ten_length", t) * g, joint_len))
            dof = io.table("t_dadr", a)

            def entry(k):
                jrow = launch.where(k == dof, g, 0.0, io.dtype)
                io.write("actuator_moment", a * nv + k, launch.where(ten, io.read("ten_J", t * nv + k) * g, jrow))

            _loop(0, nv, entry)

        _loop(0, m.nactuator, actuator)

    return run


def extras_body(m: Model):
    """fwd_velocity_extras' part of a kernel body: writes ten_velocity (ntendon,) and actuator_velocity (nout,) from
    ten_J and actuator_moment (inputs, or outputs written earlier in the body: `read` as the caller's IO maps it)."""
    nv, nt, nout = m.nv, m.ntendon, m.nout
    off = bool(m.opt.disableflags & DisableBit.ACTUATION)

    def dot(io, name, row):
        def acc(k, s):
            return s + io.read(name, row * nv + k) * io.read("qvel", k)

        return jax.lax.fori_loop(np.int32(1), np.int32(nv), acc, io.read(name, row * nv) * io.read("qvel", 0))

    def run(io):
        _loop(0, nt, lambda t: io.write("ten_velocity", t, dot(io, "ten_J", t)))
        if off:
            _loop(0, nout, lambda a: io.write("actuator_velocity", a, 0.0))
        else:
            _loop(0, nout, lambda a: io.write("actuator_velocity", a, dot(io, "actuator_moment", a)))

    return run


def xla(m: Model, d: Data, x: dict, with_transmission: bool) -> dict:
    """The XLA twin of both parts on the inputs `x` (qvel, and ten_J, ten_length, qpos, actuator_gear,
    actuator_moment as present): transmission.transmission (when `with_transmission`) and fwd_velocity_extras."""
    out = {}
    nv = m.nv
    if with_transmission:
        m2 = launch.detach(m, {"actuator_gear": x["actuator_gear"].reshape(jp.shape(m.actuator_gear))})
        keep = {n: x[n].reshape(jp.shape(getattr(d, n))) for n in ("qpos", "ten_length", "ten_J")}
        d2 = _transmission.transmission(m2, launch.detach(d, keep))
        out.update(actuator_length=d2.actuator_length, actuator_moment=d2.actuator_moment.reshape(-1))
    d3 = launch.detach(d, {"qvel": x["qvel"]})
    if m.ntendon:
        d3 = d3.replace(ten_J=x["ten_J"].reshape(m.ntendon, nv))
    if m.nactuator:
        moment = out["actuator_moment"] if with_transmission else x["actuator_moment"]
        d3 = d3.replace(actuator_moment=moment.reshape(m.nout, nv))
    d3 = _actuation.fwd_velocity_extras(m, d3)
    if m.ntendon:
        out["ten_velocity"] = d3.ten_velocity
    if m.nactuator:
        out["actuator_velocity"] = d3.actuator_velocity
    return out
