"""Recursive Newton-Euler: bias forces (mj_rne with flg_acc=0) and the post-constraint pass (mj_rnePostConstraint).

rne(m, d): qfrc_bias (nv,) = C(qpos, qvel) + gravity (gravity honours DisableBit.GRAVITY).
rne_postconstraint(m, d, cfrc_constraint=None): cacc (nbody, 6), cfrc_int (nbody, 6), cfrc_ext (nbody, 6).

cfrc_ext = xfrc_applied (mapped to the com frame) + constraint wrenches. Constraint (contact, connect and weld)
wrenches are passed in as `cfrc_constraint` (nbody, 6), com-based [torque, force] as MuJoCo accumulates them
(`contact_force.cfrc_ext_constraint(m, d)` computes them; the callers, sensors and inverse dynamics, pass them);
None adds no constraint wrench.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.pipeline import support
from mjx_lite.types import Data, DisableBit, Model

_WORLD = np.array([0])


def _world_acc(m: Model, dtype) -> jax.Array:
    """(6,) world acceleration: [0, 0, 0, -gravity] unless gravity is disabled."""
    if m.opt.disableflags & DisableBit.GRAVITY:
        return jp.zeros(6, dtype)
    return jp.concatenate([jp.zeros(3, dtype), -jp.asarray(m.opt.gravity, dtype)])


def _body_sum(m: Model, x: jax.Array) -> jax.Array:
    """(nv, 6) per-dof terms summed per body -> (nbody, 6)."""
    return jax.ops.segment_sum(x, np.asarray(m.dof_bodyid), num_segments=m.nbody)


def _body_forces(d: Data, cacc: jax.Array) -> jax.Array:
    """cinert * cacc + cvel x* (cinert * cvel), (nbody, 6)."""
    f = math.inert_mul_c(d.cinert, cacc)
    return f + math.force_cross_c(d.cvel, math.inert_mul_c(d.cinert, d.cvel))


def _body_forces_elementwise(d: Data, cacc: jax.Array) -> jax.Array:
    """`_body_forces` with the elementwise spatial products: the einsum forms become tiny batched dot_generals
    under vmap, a slow library call on CPU (this pass runs once per step for the acc/force sensors)."""
    f = math.inert_mul(d.cinert, cacc)
    return f + math.force_cross(d.cvel, math.inert_mul(d.cinert, d.cvel))


def rne(m: Model, d: Data) -> Data:
    """qfrc_bias: Coriolis, centrifugal and gravitational forces (mj_rne, flg_acc=0). Needs com_vel."""
    dtype = d.cinert.dtype
    if m.nv == 0:
        return d.replace(qfrc_bias=jp.zeros((0,), dtype))
    local = support.put(_body_sum(m, d.cdof_dot * d.qvel[:, None]), _WORLD, _world_acc(m, dtype)[None])
    cacc = support.forward_accumulate(m, local)
    cfrc = support.put(_body_forces(d, cacc), _WORLD, 0.0)
    cfrc = support.subtree_sum(m, cfrc, include_world=False)
    qfrc_bias = jp.sum(d.cdof * support.take(cfrc, np.asarray(m.dof_bodyid)), axis=-1)
    return d.replace(qfrc_bias=qfrc_bias)


def xfrc_to_cfrc(m: Model, d: Data) -> jax.Array:
    """xfrc_applied (nbody, 6) [force, torque] at xipos -> com-based [torque, force] (nbody, 6)."""
    force, torque = d.xfrc_applied[:, :3], d.xfrc_applied[:, 3:]
    com = support.take(d.subtree_com, np.asarray(m.body_rootid))
    torque = torque - math.cross_c(com - d.xipos, force)
    return support.put(jp.concatenate([torque, force], axis=-1), _WORLD, 0.0)


def rne_postconstraint(m: Model, d: Data, cfrc_constraint: jax.Array | None = None) -> Data:
    """cacc, cfrc_int, cfrc_ext with the final qacc (mj_rnePostConstraint). Needs com_vel and qacc.

    cfrc_constraint: optional (nbody, 6) com-based constraint wrenches (contacts, connect, weld), e.g.
    `contact_force.cfrc_ext_constraint(m, d)`; None: no constraint wrench (see the module docstring).
    """
    dtype = d.cinert.dtype
    cfrc_ext = xfrc_to_cfrc(m, d)
    if cfrc_constraint is not None:
        cfrc_ext = cfrc_ext + cfrc_constraint
    if m.nv:
        local = _body_sum(m, d.cdof_dot * d.qvel[:, None] + d.cdof * d.qacc[:, None])
    else:
        local = jp.zeros((m.nbody, 6), dtype)
    cacc = support.forward_accumulate(m, support.put(local, _WORLD, _world_acc(m, dtype)[None]))
    cfrc_int = support.put(_body_forces_elementwise(d, cacc) - cfrc_ext, _WORLD, 0.0)
    cfrc_int = support.subtree_sum(m, cfrc_int, include_world=True)
    return d.replace(cacc=cacc, cfrc_int=cfrc_int, cfrc_ext=cfrc_ext)
