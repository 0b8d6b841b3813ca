"""The velocity tree pass as one fused kernel: com_vel and rne (mj_comVel, mj_rne with flg_acc=0) for a block of
environments.

Outputs (per environment, Data's fields): cvel (nbody, 6), cdof_dot (nv, 6), qfrc_bias (nv,).
Inputs: qvel (nv,), cdof (nv, 6), cinert (nbody, 10) (from the position stages) and opt.gravity (3,) (shared by
the block unless vmapped; left out when gravity is disabled).

One loop over the bodies, parents first, with an inner loop over each body's dofs in order: the running cvel
starts at the parent's, each dof's cdof_dot is the motion cross product of the cvel at the start of its velocity
group (a hinge or slide dof alone, a ball's three dofs, a free joint's rotation after its translation; free
translation: zero) with its cdof, then cvel += cdof qvel; the bias acceleration cacc accumulates cdof_dot qvel
the same way from the world's [0, -gravity]; the body's force cinert cacc + cvel x* (cinert cvel) is written in
the same iteration. A second loop adds each body's force into its parent's from the last body to the first
(children of the world do not add into it), a third gives qfrc_bias = cdof . cfrc(body of the dof). The formulas
are velocity.com_vel's and rne.rne's written per lane; fields equal the XLA stages' to round-off. Derivatives go
through the XLA twin (kernels/launch.py).

When `passive_fusable(m)` (kernels/passive.py: the passive forces are the joints' and tendons' springs and dampers
only) the kernel computes them after qfrc_bias (outputs qfrc_spring, qfrc_damper, qfrc_passive; inputs qpos, with
tendons ten_length, and the Model floats they read) and the pass replaces the passive stage too.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import rne, support, velocity
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import passive as _passive
from mjx_lite.pipeline.kernels import transmission as _trn
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import Data, DisableBit, Model

__all__ = ["OUTPUTS", "Outputs", "fusable", "kernel", "passive_fusable", "velocity_pass"]

OUTPUTS = ("cvel", "cdof_dot", "qfrc_bias")


def fusable(m: Model) -> bool:
    """Static: the model has dofs (without them both stages are constants)."""
    return m.nv > 0


def _gravity_on(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.GRAVITY)


def _plan(m: Model) -> dict:
    t = support.tables(m)
    start = np.arange(m.nv)
    # a dof starts its velocity group when no dof of its group precedes it: group_prev lists the body's dofs
    # before the group, so the group starts at dofadr(body) + len(group_prev)
    dofadr = np.asarray(m.body_dofadr)[np.asarray(m.dof_bodyid)]
    gstart = dofadr + (np.asarray(t.dof_group_prev) >= 0).sum(axis=1)
    tab = dict(body_parentid=m.body_parentid, body_dofadr=m.body_dofadr, body_dofnum=m.body_dofnum,
               dof_bodyid=m.dof_bodyid, dof_group_start=(gstart == start).astype(np.int32),
               dof_free_trans=(t.dof_kind == 3).astype(np.int32))  # fmt: skip
    return {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}


def _motion_cross(v, u):
    """v x u for motion vectors [angular, linear] (mju_crossMotion), 6-tuples of lanes."""
    w, vl, a, b = v[:3], v[3:], u[:3], u[3:]
    wa, wb, va = _cross(w, a), _cross(w, b), _cross(vl, a)
    return wa + tuple(wb[i] + va[i] for i in range(3))


def _force_cross(v, f):
    """v x* f (mju_crossForce)."""
    w, vl, fa, fl = v[:3], v[3:], f[:3], f[3:]
    wa, vf, wf = _cross(w, fa), _cross(vl, fl), _cross(w, fl)
    return tuple(wa[i] + vf[i] for i in range(3)) + wf


def _inert_mul(c, v):
    """cinert (10-tuple) times a motion vector (mju_mulInertVec)."""
    wv, lin, mc, mi = v[:3], v[3:], c[6:9], c[9]
    iw = (c[0] * wv[0] + c[3] * wv[1] + c[4] * wv[2], c[3] * wv[0] + c[1] * wv[1] + c[5] * wv[2],
          c[4] * wv[0] + c[5] * wv[1] + c[2] * wv[2])  # fmt: skip
    t1, t2 = _cross(mc, lin), _cross(mc, wv)
    return tuple(iw[k] + t1[k] for k in range(3)) + tuple(mi * lin[k] - t2[k] for k in range(3))


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


class Outputs:
    """A kernel body's view of the block (`launch.IO`) in which the inputs named in `produced` are read from the
    kernel's own outputs (written by an earlier part of the body): `read` / `read_vec` of those become `load` /
    `load_vec`; everything else is the IO's."""

    def __init__(self, io, produced):
        self._io, self._produced = io, frozenset(produced)

    def read(self, name: str, i):
        return self._io.load(name, i) if name in self._produced else self._io.read(name, i)

    def read_vec(self, name: str, i, n: int) -> tuple:
        return self._io.load_vec(name, i, n) if name in self._produced else self._io.read_vec(name, i, n)

    def __getattr__(self, name):
        return getattr(self._io, name)


def _body(m: Model, passive_plan: dict | None, transmission: bool):
    nbody, nv = m.nbody, m.nv
    gravity = _gravity_on(m)
    passive_body = None if passive_plan is None else _passive.body(m, passive_plan)
    trn_body = _trn.body(m) if transmission else None
    extras_body = _trn.extras_body(m) if _trn.extras_fusable(m) else None

    def body(io):
        if trn_body is not None:
            trn_body(io)
        if extras_body is not None:
            extras_body(Outputs(io, _trn.OUTPUTS if transmission else ()))
        tab, out, put = io.table, io.load_vec, io.write_vec

        def lanes(v):
            return tuple(io.lanes(c) for c in v)

        zero6 = (0.0,) * 6
        put("cvel", 0, zero6)
        g = io.read_vec("gravity", 0, 3) if gravity else (0.0, 0.0, 0.0)
        put("_cacc", 0, (0.0, 0.0, 0.0) + tuple(-c for c in g))

        def frame(b):
            par = tab("body_parentid", b)

            def dof(i, carry):
                cur, grp, acc = carry
                grp = tuple(where(tab("dof_group_start", i) == 1, c, gc) for c, gc in zip(cur, grp))
                cd, v = io.read_vec("cdof", i, 6), io.read("qvel", i)
                dot = tuple(where(tab("dof_free_trans", i) == 1, 0.0, c) for c in _motion_cross(grp, cd))
                put("cdof_dot", i, dot)
                cur = tuple(cur[k] + cd[k] * v for k in range(6))
                acc = tuple(acc[k] + dot[k] * v for k in range(6))
                return lanes(cur), lanes(grp), lanes(acc)

            cur = lanes(out("cvel", par, 6))
            acc = lanes(out("_cacc", par, 6))
            da = tab("body_dofadr", b)
            cur, _, acc = jax.lax.fori_loop(da, da + tab("body_dofnum", b), dof, (cur, cur, acc))
            put("cvel", b, cur)
            put("_cacc", b, acc)
            c = io.read_vec("cinert", b, 10)
            f = _inert_mul(c, acc)
            fc = _force_cross(cur, _inert_mul(c, cur))
            put("_cfrc", b, tuple(f[k] + fc[k] for k in range(6)))

        _loop(1, nbody, frame)

        def push(k):  # leaves up, not into the world
            b = nbody - 1 - k
            par = tab("body_parentid", b)
            acc, add = out("_cfrc", par, 6), out("_cfrc", b, 6)
            put("_cfrc", par, tuple(acc[i] + where(par != 0, add[i], 0.0) for i in range(6)))

        put("_cfrc", 0, zero6)
        _loop(0, nbody - 1, push)

        def bias(i):
            cd, f = io.read_vec("cdof", i, 6), out("_cfrc", tab("dof_bodyid", i), 6)
            v = cd[0] * f[0]
            for k in range(1, 6):
                v = v + cd[k] * f[k]
            io.write("qfrc_bias", i, v)

        _loop(0, nv, bias)
        if passive_body is not None:
            passive_body(io)

    return body




def _xla(m: Model, d: Data, x: dict, with_passive: bool, with_transmission: bool) -> dict:
    """The XLA twin: com_vel and rne (and, when `with_passive`, passive.passive; the transmission when
    `with_transmission`, fwd_velocity_extras when the model has tendons or actuators) on the inputs."""
    m2 = m.replace(opt=m.opt.replace(gravity=x["gravity"])) if "gravity" in x else m
    d2 = d.replace(qvel=x["qvel"], cdof=x["cdof"], cinert=x["cinert"])
    d2 = rne.rne(m2, velocity.com_vel(m2, d2))
    out = {n: getattr(d2, n) for n in OUTPUTS}
    if _trn.extras_fusable(m):
        out.update(_trn.xla(m, d, x, with_transmission))
    if with_passive:  # (tendon dampers read the twin's ten_velocity)
        out.update(_passive.xla(m, d, x, out.get("ten_velocity")))
    return out


def kernel(m: Model, d: Data) -> tuple[launch.Kernel, dict]:
    """The pass as a `launch.Kernel` for (m, d) (one environment's shapes) and its inputs; with the passive forces
    (kernels/passive.py) when `passive_fusable(m)`."""
    x = dict(qvel=d.qvel, cdof=d.cdof, cinert=d.cinert)
    if _gravity_on(m):
        x["gravity"] = m.opt.gravity
    outputs = {n: tuple(getattr(d, n).shape) for n in OUTPUTS}
    outputs.update(_cacc=(m.nbody, 6), _cfrc=(m.nbody, 6))
    tables = dict(support.memo(m, "kernels_velocity_plan", _plan))
    with_trn = _trn.fusable(m)
    if _trn.extras_fusable(m):  # fwd_velocity_extras (and the transmission: kernels/transmission.py)
        if m.ntendon:
            x["ten_J"] = d.ten_J.reshape(-1)
            outputs["ten_velocity"] = (m.ntendon,)
        if m.nactuator:
            outputs["actuator_velocity"] = (m.nout,)
        if with_trn:
            x.update(qpos=d.qpos, actuator_gear=m.actuator_gear)
            trn_plan = _trn.plan(m)
            if "tr_ten_act" in trn_plan:
                x["ten_length"] = d.ten_length
            outputs.update(actuator_length=(m.nactuator,), actuator_moment=(m.nactuator * m.nv,))
            tables.update(trn_plan)
        elif m.nactuator:
            x["actuator_moment"] = d.actuator_moment.reshape(-1)
    with_passive = passive_fusable(m)
    pplan = support.memo(m, "kernels_passive_plan", _passive.plan) if with_passive else None
    if with_passive:
        x.update(_passive.inputs(m, d, pplan))
        outputs.update({n: tuple(getattr(d, n).shape) for n in _passive.OUTPUTS})
        tables.update(pplan)
    k = launch.Kernel("velocity_pass", {n: tuple(jp.shape(v)) for n, v in x.items()}, outputs, tables,
                      _body(m, pplan, with_trn), lambda x: _xla(m, d, x, with_passive, with_trn))  # fmt: skip
    return k, x


def passive_fusable(m: Model) -> bool:
    """Static: the pass computes the passive forces too (`kernels.passive.fusable`)."""
    return _passive.fusable(m)


def velocity_pass(m: Model, d: Data, how: launch.Launch) -> tuple[Data, tuple]:
    """com_vel and rne (and passive when `passive_fusable(m)`) as one fused kernel: (d with cvel, cdof_dot,
    qfrc_bias (and the passive forces); the names of the stages computed)."""
    k, x = kernel(m, d)
    dtype = d.qvel.dtype
    out = launch.call(k, {n: jp.asarray(v).astype(dtype) for n, v in x.items()}, how)
    out = {n: v.reshape(getattr(d, n).shape).astype(getattr(d, n).dtype) for n, v in out.items()}
    extras = ("fwd_velocity_extras",) if _trn.extras_fusable(m) else ()
    if not passive_fusable(m):
        return d.replace(**out), ("com_vel", "rne") + extras
    zero = jp.zeros_like(d.qfrc_passive)
    d = d.replace(qfrc_gravcomp=zero, qfrc_fluid=zero, qfrc_adhesion=zero, **out)
    return d, ("com_vel", "passive", "rne") + extras
