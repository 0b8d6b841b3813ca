"""The passive forces of joints and tendons (passive.passive: springs, dampers, actuator damping) written per lane,
a part of the velocity pass's kernel (kernels/velocity.py) for models whose passive forces are those terms only
(`passive.joint_terms_only(m, tendons=True)`: no flex, plastic springs, gravity compensation, fluid or adhesion).

Outputs (per environment, Data's fields): qfrc_spring, qfrc_damper, qfrc_passive (nv,) (their sum: the gravity
compensation and fluid forces are zero for these models; the pass sets qfrc_gravcomp and qfrc_fluid to zero).
Inputs: qpos (nq,), qvel (nv,) and the Model's floats the terms read (shared by a block unless vmapped): with
springs jnt_stiffness, jnt_stiffnesspoly, qpos_spring; with dampers dof_damping, dof_dampingpoly and, when an
actuator has a joint transmission, actuator_damping, actuator_dampingpoly, actuator_gear. With tendons: ten_J
(ntendon * nv, the velocity pass's input) and ten_velocity (the pass's own output, written before: kernels/
transmission.py's extras), with springs ten_length, tendon_stiffness, tendon_stiffnesspoly, tendon_lengthspring,
with dampers tendon_damping, tendon_dampingpoly (and the actuator floats for tendon actuators).

Loops over static tables, each of one kind of joint (the traced kernel does not grow with the number of joints):
slide/hinge springs f = -(a x + b x^2 + c x^3) of x = qpos - qpos_spring; free translations and free/ball
rotations (the quaternion normalised, its difference to the spring quaternion as an axis-angle vector) push back
along the vector with the polynomial of its norm; dampers -(a v + b v|v| + c v^3) per dof; the actuator damping
of each (actuator, dof) pair of a joint transmission, gear^2 times the actuator's polynomial, is subtracted
from its dof's damper force. Tendons: each tendon's spring force -(a x + b x^2 + c x^3) of its length's distance x
out of the [lower, upper] dead band, its damper force -(a v + b v|v| + c v^3) of ten_velocity, and each tendon
actuator's damping gear^2 times the actuator's polynomial of its tendon's velocity, subtracted from the damper
force, go to the dofs through the tendon's ten_J row, a loop over the dofs the row can be nonzero on
(`types.tendon_dofs`; the XLA stage's product with the whole row). The formulas are passive.py's, written per lane;
fields equal the XLA stage's to round-off. Derivatives go through the XLA twin (kernels/launch.py).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import passive
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import Data, DisableBit, JointType, Model, TrnType, tendon_dofs

__all__ = ["OUTPUTS", "body", "fusable", "inputs", "plan", "xla"]

OUTPUTS = ("qfrc_spring", "qfrc_damper", "qfrc_passive")
SPRING_INPUTS = ("jnt_stiffness", "jnt_stiffnesspoly", "qpos_spring")
DAMPER_INPUTS = ("dof_damping", "dof_dampingpoly")
ACTUATOR_INPUTS = ("actuator_damping", "actuator_dampingpoly", "actuator_gear")
TENDON_SPRING_INPUTS = ("tendon_stiffness", "tendon_stiffnesspoly", "tendon_lengthspring")
TENDON_DAMPER_INPUTS = ("tendon_damping", "tendon_dampingpoly")


def fusable(m: Model) -> bool:
    """Static: the passive forces of `m` are the joint and tendon terms this kernel computes (and the model has
    dofs)."""
    return m.nv > 0 and passive.joint_terms_only(m, tendons=True)


def _springs_on(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.SPRING)


def _dampers_on(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.DAMPER)


def plan(m: Model) -> dict:
    """Static tables (name -> int32 array; empty ones left out): joints by kind with their qpos and dof addresses,
    the (actuator, dof) pairs of joint transmissions; the dofs of each tendon's Jacobian row (pas_ten_dof, from
    pas_ten_dofadr[t] to pas_ten_dofadr[t + 1]) and the tendon actuators (pas_tact_id, their tendons pas_tact_ten and
    gear rows pas_tact_out)."""
    jtype, qadr, dadr = np.asarray(m.jnt_type), np.asarray(m.jnt_qposadr), np.asarray(m.jnt_dofadr)
    scal = np.nonzero((jtype == JointType.SLIDE) | (jtype == JointType.HINGE))[0]
    free = np.nonzero(jtype == JointType.FREE)[0]
    rot = np.nonzero((jtype == JointType.FREE) | (jtype == JointType.BALL))[0]
    shift = np.where(jtype[rot] == JointType.FREE, 3, 0)  # a free joint's quaternion and rotation dofs
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    acts, cols = [], []
    for i in np.nonzero((trntype == TrnType.JOINT) | (trntype == TrnType.JOINTINPARENT))[0]:
        j = int(trnid[i, 0])
        nd = JointType(int(jtype[j])).dof_width()
        acts += [i] * nd
        cols += list(int(dadr[j]) + np.arange(nd))
    tab = dict(scal_jnt=scal, scal_qadr=qadr[scal], scal_dadr=dadr[scal], free_jnt=free, free_qadr=qadr[free],
               free_dadr=dadr[free], rot_jnt=rot, rot_qadr=qadr[rot] + shift, rot_dadr=dadr[rot] + shift,
               act_id=np.asarray(acts, np.int64), act_dof=np.asarray(cols, np.int64),
               act_out=np.asarray(m.actuator_outadr)[np.asarray(acts, np.int64)])  # (gear row) # fmt: skip
    if m.ntendon:
        dofs = tendon_dofs(m)
        tact = np.nonzero(trntype == TrnType.TENDON)[0]
        tab.update(pas_ten_dof=np.concatenate(dofs), pas_ten_dofadr=np.cumsum([0] + [len(x) for x in dofs]),
                   pas_tact_id=tact, pas_tact_ten=trnid[tact, 0], pas_tact_out=np.asarray(m.actuator_outadr)[tact])
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def inputs(m: Model, d: Data, p: dict) -> dict:
    """The kernel's inputs for (m, d) (one environment's shapes): qpos and the Model floats the terms read."""
    x = dict(qpos=d.qpos, qvel=d.qvel)
    if m.ntendon:
        x["ten_J"] = d.ten_J.reshape(-1)
    if _springs_on(m):
        x.update({n: getattr(m, n) for n in SPRING_INPUTS})
        if m.ntendon:
            x.update(ten_length=d.ten_length, **{n: getattr(m, n) for n in TENDON_SPRING_INPUTS})
    if _dampers_on(m):
        x.update({n: getattr(m, n) for n in DAMPER_INPUTS})
        if m.ntendon:
            x.update({n: getattr(m, n) for n in TENDON_DAMPER_INPUTS})
        if "act_id" in p or "pas_tact_id" in p:
            x.update({n: getattr(m, n) for n in ACTUATOR_INPUTS})
    return x


def xla(m: Model, d: Data, x: dict, ten_velocity: jax.Array | None = None) -> dict:
    """The XLA twin: passive.passive on the inputs (qfrc_spring, qfrc_damper, qfrc_passive); `ten_velocity` (the
    velocity pass's twin's, fwd_velocity_extras) for a model with tendons."""
    names = SPRING_INPUTS + DAMPER_INPUTS + ACTUATOR_INPUTS + TENDON_SPRING_INPUTS + TENDON_DAMPER_INPUTS
    m2 = m.replace(**{n: x[n] for n in names if n in x})
    d2 = d.replace(qpos=x["qpos"], qvel=x["qvel"])
    if m.ntendon:
        d2 = d2.replace(ten_J=x["ten_J"].reshape(m.ntendon, m.nv), ten_velocity=ten_velocity)
        if "ten_length" in x:
            d2 = d2.replace(ten_length=x["ten_length"])
    d2 = passive.passive(m2, d2)
    return {n: getattr(d2, n) for n in OUTPUTS}


def _stiff(x, a, b, c):
    """a x + b x^2 + c x^3 (passive._poly_stiff)."""
    return a * x + b * x * x + c * x * x * x


def _damp(v, a, b, c):
    """a v + b v|v| + c v^3 (passive._poly_damp)."""
    return a * v + b * v * jp.abs(v) + c * v * v * v


def _norm3(v):
    """|v| with a zero at v = 0 (math.safe_norm)."""
    sq = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
    zero = sq <= 0.0
    return where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))


def body(m: Model, p: dict):
    """body(io): writes OUTPUTS of one block (called by the velocity pass's body)."""
    nv = m.nv
    springs, dampers = _springs_on(m), _dampers_on(m)

    def run(io):
        tab, read = io.table, io.read

        def vec_spring(v, j, da):  # -f(|v|) v / |v| into dofs da..da+2 (passive._springs' vec_spring)
            n = _norm3(v)
            b, c = io.read_vec("jnt_stiffnesspoly", j, 2)
            f = _stiff(n, read("jnt_stiffness", j), b, c)
            safe = where(n > 0, n, 1.0)
            for k in range(3):
                io.write("qfrc_spring", da + k, -f * v[k] / safe)

        def scalar(k):
            j, qa = tab("scal_jnt", k), tab("scal_qadr", k)
            x = read("qpos", qa) - read("qpos_spring", qa)
            b, c = io.read_vec("jnt_stiffnesspoly", j, 2)
            io.write("qfrc_spring", tab("scal_dadr", k), -_stiff(x, read("jnt_stiffness", j), b, c))

        def translation(k):
            qa = tab("free_qadr", k)
            v = tuple(read("qpos", qa + i) - read("qpos_spring", qa + i) for i in range(3))
            vec_spring(v, tab("free_jnt", k), tab("free_dadr", k))

        def rotation(k):  # mju_subQuat(normalize(qpos quaternion), spring quaternion) (math.quat_sub)
            qa = tab("rot_qadr", k)
            q = launch.unit_quat(tuple(read("qpos", qa + i) for i in range(4)))
            s = tuple(read("qpos_spring", qa + i) for i in range(4))
            b = (s[0], -s[1], -s[2], -s[3])  # conj(spring) * q
            dq = (b[0] * q[0] - b[1] * q[1] - b[2] * q[2] - b[3] * q[3],
                  b[0] * q[1] + b[1] * q[0] + b[2] * q[3] - b[3] * q[2],
                  b[0] * q[2] - b[1] * q[3] + b[2] * q[0] + b[3] * q[1],
                  b[0] * q[3] + b[1] * q[2] - b[2] * q[1] + b[3] * q[0])  # fmt: skip
            neg = dq[0] < 0
            dq = tuple(where(neg, -c, c) for c in dq)
            sin_half = _norm3(dq[1:])
            unit = where(sin_half <= 1e-15, 1.0, sin_half)
            angle = 2.0 * jp.arctan2(sin_half, dq[0])
            vec_spring(tuple(dq[1 + i] / unit * angle for i in range(3)), tab("rot_jnt", k), tab("rot_dadr", k))

        def tendon_force(name, t, f):  # output name += f ten_J[t] on the dofs of the tendon's row
            def add(k, c):
                i = tab("pas_ten_dof", k)
                io.write(name, i, io.load(name, i) + f * read("ten_J", t * nv + i))
                return c

            jax.lax.fori_loop(tab("pas_ten_dofadr", t), tab("pas_ten_dofadr", t + 1), add, np.int32(0))

        def tendon_spring(t):  # -f(x), x the length's distance out of the dead band [lower, upper]
            length = read("ten_length", t)
            lower, upper = io.read_vec("tendon_lengthspring", t, 2)
            x = where(length > upper, length - upper, where(length < lower, length - lower, 0.0))
            b, c = io.read_vec("tendon_stiffnesspoly", t, 2)
            tendon_force("qfrc_spring", t, -_stiff(x, read("tendon_stiffness", t), b, c))

        def tendon_damper(t):
            b, c = io.read_vec("tendon_dampingpoly", t, 2)
            tendon_force("qfrc_damper", t, -_damp(io.load("ten_velocity", t), read("tendon_damping", t), b, c))

        def tendon_actuator(k):  # qfrc_damper -= gear^2 f(ten_velocity) ten_J with the actuator's polynomial
            a, t = tab("pas_tact_id", k), tab("pas_tact_ten", k)
            g = read("actuator_gear", 6 * tab("pas_tact_out", k))
            b, c = io.read_vec("actuator_dampingpoly", a, 2)
            f = _damp(io.load("ten_velocity", t), read("actuator_damping", a), b, c)
            tendon_force("qfrc_damper", t, -(g * g) * f)

        if springs:
            for name, fn in (("scal_jnt", scalar), ("free_jnt", translation), ("rot_jnt", rotation)):
                if name in p:
                    _loop(0, p[name].size, fn)
            if "pas_ten_dof" in p:
                _loop(0, m.ntendon, tendon_spring)
        else:
            _loop(0, nv, lambda i: io.write("qfrc_spring", i, 0.0))

        def damper(i):
            b, c = io.read_vec("dof_dampingpoly", i, 2)
            io.write("qfrc_damper", i, -_damp(read("qvel", i), read("dof_damping", i), b, c))

        def actuator(k):  # qfrc_damper[dof] -= gear^2 f(qvel[dof]) with the actuator's polynomial
            a, i = tab("act_id", k), tab("act_dof", k)
            g = read("actuator_gear", 6 * tab("act_out", k))
            b, c = io.read_vec("actuator_dampingpoly", a, 2)
            f = _damp(read("qvel", i), read("actuator_damping", a), b, c)
            io.write("qfrc_damper", i, io.load("qfrc_damper", i) + -(g * g) * f)

        if dampers:
            _loop(0, nv, damper)
            if "act_id" in p:
                _loop(0, p["act_id"].size, actuator)
            if "pas_ten_dof" in p:
                _loop(0, m.ntendon, tendon_damper)
                if "pas_tact_id" in p:
                    _loop(0, p["pas_tact_id"].size, tendon_actuator)
        else:
            _loop(0, nv, lambda i: io.write("qfrc_damper", i, 0.0))
        _loop(0, nv, lambda i: io.write("qfrc_passive", i, io.load("qfrc_spring", i) + io.load("qfrc_damper", i)))

    return run


