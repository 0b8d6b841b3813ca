"""mj_transmission of joint and tendon actuators and fwd_velocity_extras' velocities, written per lane: parts of the
velocity pass's kernel (kernels/velocity.py).

Two parts:
  - `extras_body`: ten_velocity = ten_J qvel (ntendon,) and actuator_velocity = actuator_moment qvel (nout,) (zero
    under the actuation disable flag), `actuation.fwd_velocity_extras`: every velocity pass computes them.
  - `body` (when `fusable(m)`): actuator_length (nactuator,) and actuator_moment (nactuator * nv,) of joint
    (slide, hinge, ball, free; joint or jointinparent) and tendon transmissions: a slide/hinge actuator's length
    gear[0] qpos and moment gear[0] at its dof; a tendon actuator's gear[0] ten_length and gear[0] times its tendon's
    ten_J row; a ball's gaxis . quat2vel(q) (q the joint's normalised quaternion, gaxis = gear[0:3], rotated by
    conj(q) for jointinparent) and gaxis at its three dofs; a free joint's length 0 and moment gear[0:3] at its
    translation dofs and gaxis (of gear[3:6] and the free quaternion) at its rotation dofs. Each kind is one loop over
    a static table of its actuators (the code does not grow with the model). The tree pass computes the
    transmission when every actuator drives a slide or hinge joint (kernels/tree.py, `tree.transmission_fused`);
    otherwise (a tendon actuator needs the tendon stage, XLA after the tree pass) the velocity pass computes it and
    `forward.forward_pos_vel` skips the position stage's XLA transmission (`fwd_position(...,
    defer_transmission=True)`), where nothing between the two reads the actuators' lengths or moments: no
    actuatorpos sensor (sensor_pos reads actuator_length).

Inputs: qvel, qpos, ten_J (ntendon * nv), ten_length (ntendon,) (per environment), actuator_moment when the pass does
not compute it, and the Model's actuator_gear (shared by the block unless vmapped). The formulas are
transmission.py's and actuation.py's per lane; values equal the XLA stages' to round-off (the products' summation
order). Derivatives go through the XLA twin (`xla`: the stages on the inputs).

Not fused here (the XLA transmission runs for the whole model): site, slider-crank, body (adhesion) and so3
transmissions, several outputs per actuator, a model with an actuatorpos sensor (unless the tree pass computes it).
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


def _kinds(m: Model) -> np.ndarray:
    """Static (nactuator,) kind of each actuator's transmission: SCALAR (slide/hinge joint), TENDON, BALL, FREE (joint
    or jointinparent), -1 otherwise."""
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    joint = np.isin(trntype, (TrnType.JOINT, TrnType.JOINTINPARENT))
    jt = np.asarray(m.jnt_type)[np.where(joint, trnid[:, 0], 0)] if m.njnt else np.full(m.nactuator, -1)
    kind = np.full(m.nactuator, -1)
    kind[joint & np.isin(jt, (JointType.SLIDE, JointType.HINGE))] = SCALAR
    kind[joint & (jt == JointType.BALL)] = BALL
    kind[joint & (jt == JointType.FREE)] = FREE
    kind[trntype == TrnType.TENDON] = TENDON
    return kind


SCALAR, TENDON, BALL, FREE = range(4)


def fusable(m: Model) -> bool:
    """Static: the velocity pass computes the transmission (see the module docstring): every actuator drives a joint
    or a tendon, one output each, the tree pass does not compute it (some tendon, ball or free joint actuator), no
    actuatorpos sensor."""
    n = m.nactuator
    if not (n and m.nv) or m.nout != n or _tree.transmission_fused(m) or np.any(_kinds(m) < 0):
        return False
    return not (m.nsensor and np.any(np.asarray(m.sensor_type) == SensorType.ACTUATORPOS))


def extras_fusable(m: Model) -> bool:
    """Static: fwd_velocity_extras has something to compute (tendons or actuators)."""
    return bool(m.ntendon or m.nactuator)


def plan(m: Model) -> dict:
    """Static int32 tables, per kind of transmission (empty ones left out): tr_<kind>_act (the actuators), and for
    joints tr_<kind>_qadr / tr_<kind>_dadr (qpos and dof addresses; a free joint's quaternion and rotation dofs:
    +3), tr_<kind>_inp (jointinparent), for tendons tr_ten_id (the tendon)."""
    kind, trnid = _kinds(m), np.asarray(m.actuator_trnid)
    inparent = np.asarray(m.actuator_trntype) == TrnType.JOINTINPARENT
    tab = {}
    for name, k in (("s", SCALAR), ("b", BALL), ("f", FREE)):
        act = np.nonzero(kind == k)[0]
        jid = trnid[act, 0]
        tab.update({f"tr_{name}_act": act, f"tr_{name}_qadr": np.asarray(m.jnt_qposadr)[jid] if act.size else act,
                    f"tr_{name}_dadr": np.asarray(m.jnt_dofadr)[jid] if act.size else act,
                    f"tr_{name}_inp": inparent[act]})  # fmt: skip
    ten = np.nonzero(kind == TENDON)[0]
    tab.update(tr_ten_act=ten, tr_ten_id=trnid[ten, 0])
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def body(m: Model):
    """The transmission's part of a kernel body: writes outputs actuator_length and actuator_moment (every row zero,
    then each kind's loop over its actuators)."""
    nv, p = m.nv, plan(m)

    def run(io):
        tab, read, write = io.table, io.read, io.write
        _loop(0, m.nactuator * nv, lambda i: write("actuator_moment", i, 0.0))

        def scalar(k):  # length gear[0] qpos, moment gear[0] at the joint's dof
            a = tab("tr_s_act", k)
            g = read("actuator_gear", 6 * a)
            write("actuator_length", a, read("qpos", tab("tr_s_qadr", k)) * g)
            write("actuator_moment", a * nv + tab("tr_s_dadr", k), g)

        def tendon(k):  # length gear[0] ten_length, moment gear[0] ten_J's row
            a, t = tab("tr_ten_act", k), tab("tr_ten_id", k)
            g = read("actuator_gear", 6 * a)
            write("actuator_length", a, read("ten_length", t) * g)
            _loop(0, nv, lambda i: write("actuator_moment", a * nv + i, read("ten_J", t * nv + i) * g))

        def axis(pre, k, a, off):
            """(the joint's unit quaternion, gear[off:off+3] in the joint's frame: rotated by conj(q) for
            jointinparent)."""
            qa = tab(f"tr_{pre}_qadr", k)
            q = launch.unit_quat(tuple(read("qpos", qa + off + i) for i in range(4)))
            g = tuple(read("actuator_gear", 6 * a + off + i) for i in range(3))
            rot = _tree._rotate(g, (q[0], -q[1], -q[2], -q[3]))  # by conj(q)
            inp = tab(f"tr_{pre}_inp", k) > 0
            return q, tuple(launch.where(inp, rot[i], g[i], io.dtype) for i in range(3))

        def ball(k):  # length gaxis . quat2vel(q), moment gaxis at the joint's 3 dofs
            a, da = tab("tr_b_act", k), tab("tr_b_dadr", k)
            q, g = axis("b", k, a, 0)
            s = jp.sqrt(q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
            unit = launch.where(s <= 1e-15, 1.0, s, io.dtype)
            angle = 2.0 * jp.arctan2(s, q[0])
            angle = launch.where(angle > jp.pi, angle - 2 * jp.pi, angle)
            write("actuator_length", a, sum(q[1 + i] / unit * angle * g[i] for i in range(3)))
            for i in range(3):
                write("actuator_moment", a * nv + da + i, g[i])

        def free(k):  # length 0, moment gear[0:3] at the translation dofs, the rotated gear[3:6] at the rotation's
            a, da = tab("tr_f_act", k), tab("tr_f_dadr", k)
            _, g = axis("f", k, a, 3)
            write("actuator_length", a, 0.0)
            for i in range(3):
                write("actuator_moment", a * nv + da + i, read("actuator_gear", 6 * a + i))
                write("actuator_moment", a * nv + da + 3 + i, g[i])

        for name, fn in (("tr_s_act", scalar), ("tr_ten_act", tendon), ("tr_b_act", ball), ("tr_f_act", free)):
            if name in p:
                _loop(0, p[name].size, fn)

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
        keep = {n: x[n].reshape(jp.shape(getattr(d, n))) for n in ("qpos", "ten_length", "ten_J") if n in x}
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
