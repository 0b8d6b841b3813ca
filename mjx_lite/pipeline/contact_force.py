"""Contact forces (mj_contactForce) and the constraint wrenches of cfrc_ext (mj_rnePostConstraint's contact,
connect and weld part).

contact_force(m, d): (nconmax, 6) force/torque of each contact in its contact frame.
cfrc_ext_constraint(m, d): (nbody, 6) com-based [torque, force] wrenches of the contact and connect/weld forces,
the `cfrc_constraint` argument of `rne.rne_postconstraint` (cfrc_ext). Below the sensors and inverse dynamics,
above the constraint rows it reads.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import flex as flexcol
from mjx_lite.pipeline import constraint, support
from mjx_lite.types import ConeType, Data, DisableBit, Model

__all__ = ["cfrc_ext_constraint", "contact_force", "contact_wrenches", "equality_wrenches"]


def _constraints_live(m: Model) -> bool:
    return not (m.opt.disableflags & DisableBit.CONSTRAINT) and m.njmax > 0


def contact_force(m: Model, d: Data) -> jax.Array:
    """(nconmax, 6) force of each contact in its contact frame (mj_contactForce): normal, tangent forces,
    torsional and rolling torques; zero for inactive contacts and beyond the contact's condim.

    Pyramidal contacts are converted from edge forces: normal = sum of the edge forces, friction i =
    mu_i (f_i+ - f_i-); elliptic contacts read their rows directly. Adhesive contacts report the net interface
    force: their adhesion is subtracted from the normal force (which can so be negative).
    """
    nc = m.nconmax
    dt = d.qpos.dtype
    out = jp.zeros((nc, 6), dt)
    if nc == 0 or not _constraints_live(m):
        return out
    p = constraint.plan(m)
    if len(p.con_dim) == 0:
        return out
    con = d.contact
    for dim in sorted(set(p.con_dim.tolist())):
        slots = np.nonzero(p.con_dim == dim)[0]
        nrow = int(p.con_rows[slots][0])
        rows = p.con_adr[slots][:, None] + np.arange(nrow)[None, :]
        f = d.efc_force[rows]  # (k, nrow)
        if dim == 1 or m.opt.cone == ConeType.ELLIPTIC:
            frc = f
        else:
            fr = con.friction[slots][:, : dim - 1]
            pair = f.reshape(len(slots), dim - 1, 2)
            frc = jp.concatenate([jp.sum(f, axis=1, keepdims=True), fr * (pair[:, :, 0] - pair[:, :, 1])], axis=1)
        adim = con.dim[slots]
        frc = jp.where(jp.arange(frc.shape[1])[None, :] < adim[:, None], frc, 0.0)
        live = d.efc_mask[rows[:, 0]]
        if m.flg_adhesion:  # the net interface force: the cone force minus the adhesive pull
            frc = frc.at[:, 0].add(-con.adhesion[slots])
        frc = jp.where(live[:, None], frc, 0.0)
        out = out.at[slots, : frc.shape[1]].set(frc)
    return out


def cfrc_ext_constraint(m: Model, d: Data, forces: jax.Array | None = None) -> jax.Array:
    """(nbody, 6) com-based [torque, force] wrenches of contact, connect and weld forces (for cfrc_ext).

    forces: `contact_force(m, d)` when the caller has it already (the sensors share it), else computed here.

    Contacts: the contact-frame force rotated to the world acts at the contact point, +f on geom2's body and
    -f on geom1's body; contacts of flexes are left out, as MuJoCo leaves them out. Connect/weld: the wrench whose
    generalised force is J'f of the equality rows (the force at each body's anchor, and for welds the torque rotated
    out of the error coordinates).
    """
    out = contact_wrenches(m, d, forces)
    if not _constraints_live(m):
        return out
    p = constraint.plan(m)
    if len(p.connect) or len(p.weld):
        out = out + _equality_wrenches(m, d, p)
    return out


def contact_wrenches(m: Model, d: Data, forces: jax.Array | None = None) -> jax.Array:
    """(nbody, 6) com-based [torque, force] wrenches of the contact forces alone (`cfrc_ext_constraint`'s contact
    part; forces as there)."""
    out = jp.zeros((m.nbody, 6), d.qpos.dtype)
    if not _constraints_live(m):
        return out
    p = constraint.plan(m)
    if m.nconmax and len(p.con_dim):
        cf = contact_force(m, d) if forces is None else forces  # (nc, 6)
        frame = d.contact.frame  # rows: normal, tangent1, tangent2
        # frame^T f as multiply-adds (a batched 3x3 dot_general per contact is slow on CPU under vmap)
        fw = sum(frame[:, j] * cf[:, j : j + 1] for j in range(3))
        tw = sum(frame[:, j] * cf[:, 3 + j : 4 + j] for j in range(3))
        b1, b2 = flexcol.contact_bodies(m, d.contact)
        tf = jp.concatenate([tw, fw], axis=1)
        if m.nflex:  # mj_rnePostConstraint skips the contacts of flexes (a side without a geom)
            tf = jp.where(jp.all(d.contact.geom >= 0, axis=1)[:, None], tf, 0.0)
        bodies = jp.concatenate([b1, b2])
        pts = jp.concatenate([d.contact.pos, d.contact.pos])
        out = out + support.wrench_to_cfrc(m, d, bodies, pts, jp.concatenate([-tf, tf]))
    return out


def equality_wrenches(m: Model, d: Data) -> jax.Array | None:
    """(nbody, 6) com-based wrenches of the connect and weld forces (`cfrc_ext_constraint`'s equality part), or None
    where the model has no such rows."""
    if not _constraints_live(m):
        return None
    p = constraint.plan(m)
    return _equality_wrenches(m, d, p) if len(p.connect) or len(p.weld) else None


def _equality_wrenches(m: Model, d: Data, p) -> jax.Array:
    out = jp.zeros((m.nbody, 6), d.qpos.dtype)
    if len(p.connect):
        ids = p.connect
        n = len(ids)
        rows = p.adr["connect"] + np.arange(3 * n).reshape(n, 3)
        f = d.efc_force[rows]  # (n, 3) world force on body1 at its anchor
        data = m.eq_data[ids]
        b1, p1, _ = constraint._bodies_points(m, d, ids, 1, data[:, 0:3])
        b2, p2, _ = constraint._bodies_points(m, d, ids, 2, data[:, 3:6])
        z = jp.zeros_like(f)
        out = out + support.wrench_to_cfrc(
            m,
            d,
            np.concatenate([b1, b2]),
            jp.concatenate([p1, p2]),
            jp.concatenate([jp.concatenate([z, f], 1), jp.concatenate([z, -f], 1)]),
        )
    if len(p.weld):
        ids = p.weld
        n = len(ids)
        rows = p.adr["weld"] + np.arange(6 * n).reshape(n, 6)
        f = d.efc_force[rows]  # (n, 6): world force, then rotational-error coordinates
        geo = constraint._weld_geometry(m, d, ids)
        torque = jp.einsum("nij,ni->nj", geo["T"], f[:, 3:])  # J_r' f = (jr1 - jr2)' T' f: world torque T'f
        force = f[:, :3]
        out = out + support.wrench_to_cfrc(
            m, d, np.concatenate([geo["b1"], geo["b2"]]), jp.concatenate([geo["p1"], geo["p2"]]),
            jp.concatenate([jp.concatenate([torque, force], 1), jp.concatenate([-torque, -force], 1)]))  # fmt: skip
    return out
