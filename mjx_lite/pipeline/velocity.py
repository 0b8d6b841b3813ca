"""Velocity-dependent com-frame quantities: mj_comVel and mj_subtreeVel.

com_vel(m, d): cvel (nbody, 6) com-based spatial velocities [angular, linear]; cdof_dot (nv, 6).
subtree_vel(m, d): subtree_linvel (nbody, 3), subtree_angmom (nbody, 3) (about each subtree's com).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math
from mjx_lite.pipeline import support
from mjx_lite.types import MINVAL, Data, Model


def com_vel(m: Model, d: Data) -> Data:
    """cvel and cdof_dot (mj_comVel). Needs com_pos."""
    t = support.tables(m)
    dtype = d.cdof.dtype
    if m.nv == 0:
        return d.replace(cvel=jp.zeros((m.nbody, 6), dtype), cdof_dot=jp.zeros((0, 6), dtype))
    dof_body = np.asarray(m.dof_bodyid)
    vdof = d.cdof * d.qvel[:, None]  # (nv, 6)
    cvel = support.forward_accumulate(m, jax.ops.segment_sum(vdof, dof_body, num_segments=m.nbody))
    # velocity seen by each dof: parent body's cvel plus the dofs of its own body before its velocity group
    parent = np.asarray(m.body_parentid)[dof_body]
    padded = jp.concatenate([vdof, jp.zeros((1, 6), dtype)], axis=0)
    prev = np.where(t.dof_group_prev < 0, m.nv, t.dof_group_prev)
    vel = support.take(cvel, parent) + jp.sum(support.take(padded, prev), axis=1)
    cdof_dot = math.motion_cross_c(vel, d.cdof)
    cdof_dot = jp.where(jp.asarray(t.dof_kind == 3)[:, None], 0.0, cdof_dot)  # free translation: 0
    return d.replace(cvel=cvel, cdof_dot=cdof_dot)


def subtree_vel(m: Model, d: Data) -> Data:
    """subtree_linvel and subtree_angmom (mj_subtreeVel). Needs com_pos and com_vel."""
    rootid = np.asarray(m.body_rootid)
    parent = np.asarray(m.body_parentid)
    mass = m.body_mass
    # body velocity at its com (mj_objectVelocity, world orientation)
    offset = d.xipos - support.take(d.subtree_com, rootid)
    ang = d.cvel[:, :3]
    lin = d.cvel[:, 3:] - math.cross_c(offset, ang)
    # subtree linear velocity
    mom = support.subtree_sum(m, lin * mass[:, None])
    linvel = mom / jp.maximum(MINVAL, m.body_subtreemass)[:, None]
    # body angular momentum about its com: ximat diag(inertia) ximat' w
    local = jp.einsum("bji,bj->bi", d.ximat, ang) * m.body_inertia
    angmom = jp.einsum("bij,bj->bi", d.ximat, local)
    # momentum of body i about its own subtree com
    own = mass[:, None] * math.cross_c(d.xipos - d.subtree_com, lin - linvel)
    own = support.put(own, np.array([0]), 0.0)
    # momentum of child subtree i about its parent's subtree com, added to the parent
    dx = d.subtree_com - support.take(d.subtree_com, parent)
    dv = (linvel - support.take(linvel, parent)) * m.body_subtreemass[:, None]
    transfer = support.put(math.cross_c(dx, dv), np.array([0]), 0.0)
    base = angmom + own + jax.ops.segment_sum(transfer, parent, num_segments=m.nbody)
    return d.replace(subtree_linvel=linvel, subtree_angmom=support.subtree_sum(m, base))
