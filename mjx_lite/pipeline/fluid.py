"""Fluid forces (MuJoCo's inertia-box and ellipsoid models), qfrc_fluid (nv,).

A body uses the ellipsoid model when any of its geoms has geom_fluid[0] (interaction coefficient) > 0, the
inertia-box model otherwise; since geom_fluid is traced, both are computed and selected with masks. Bodies
with mass < MINVAL get no fluid force.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import math as mjm
from mjx_lite.pipeline.tendon import apply_ft
from mjx_lite.types import MINVAL, Data, GeomType, Model


def _sqrt0(x):
    pos = x > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, x, 1.0)), 0.0)


def _local_vel(m: Model, d: Data, pos, rot, bodies):
    """Frame velocity (ang, lin) in local coordinates minus the local wind (mj_objectVelocity, flg_local)."""
    root = np.asarray(m.body_rootid)[bodies]
    cvel = d.cvel[bodies]
    w, v = cvel[:, :3], cvel[:, 3:]
    v = v - jp.cross(pos - d.subtree_com[root], w)
    lw = jp.einsum("nji,nj->ni", rot, w)
    lv = jp.einsum("nji,nj->ni", rot, v) - jp.einsum("nji,j->ni", rot, m.opt.wind)
    return lw, lv


def _box_forces(m: Model, d: Data, bodies):
    """Inertia-box model forces (world torque, force) at body coms."""
    mass = m.body_mass[bodies]
    smass = jp.where(mass < MINVAL, 1.0, mass)
    inr = m.body_inertia[bodies]
    box = jp.stack(
        [
            _sqrt0(jp.maximum(MINVAL, inr[:, 1] + inr[:, 2] - inr[:, 0]) / smass * 6.0),
            _sqrt0(jp.maximum(MINVAL, inr[:, 0] + inr[:, 2] - inr[:, 1]) / smass * 6.0),
            _sqrt0(jp.maximum(MINVAL, inr[:, 0] + inr[:, 1] - inr[:, 2]) / smass * 6.0),
        ],
        -1,
    )
    rot = d.ximat[bodies]
    lw, lv = _local_vel(m, d, d.xipos[bodies], rot, bodies)
    visc, dens = m.opt.viscosity, m.opt.density
    diam = jp.mean(box, -1, keepdims=True)
    tq = -jp.pi * diam**3 * visc * lw
    fr = -3.0 * jp.pi * diam * visc * lv
    b0, b1, b2 = box[:, 0], box[:, 1], box[:, 2]
    area = jp.stack([b1 * b2, b0 * b2, b0 * b1], -1)
    fr = fr - 0.5 * dens * area * jp.abs(lv) * lv
    mom = jp.stack([b0 * (b1**4 + b2**4), b1 * (b0**4 + b2**4), b2 * (b0**4 + b1**4)], -1)
    tq = tq - dens * mom * jp.abs(lw) * lw / 64.0
    return jp.einsum("nij,nj->ni", rot, tq), jp.einsum("nij,nj->ni", rot, fr)


def _semiaxes(m: Model, geoms) -> jax.Array:
    size = m.geom_size[geoms]
    gt = np.asarray(m.geom_type)[geoms]
    sph = jp.asarray(gt == GeomType.SPHERE)[:, None]
    cap = jp.asarray(gt == GeomType.CAPSULE)[:, None]
    cyl = jp.asarray(gt == GeomType.CYLINDER)[:, None]
    r = size[:, :1]
    return jp.where(
        sph,
        jp.concatenate([r, r, r], -1),
        jp.where(
            cap,
            jp.concatenate([r, r, size[:, 1:2] + r], -1),
            jp.where(cyl, jp.concatenate([r, r, size[:, 1:2]], -1), size),
        ),
    )


def _ellipsoid_forces(m: Model, d: Data, geoms, gbody):
    """Ellipsoid model forces (world torque, force) at geom centres."""
    coef = m.geom_fluid[geoms]
    interaction, blunt, slender, angdrag, kutta, magnus = (coef[:, i] for i in range(6))
    vmass, vinertia = coef[:, 6:9], coef[:, 9:12]
    s = _semiaxes(m, geoms)
    rot = d.geom_xmat[geoms]
    w, v = _local_vel(m, d, d.geom_xpos[geoms], rot, gbody)
    rho, visc = m.opt.density, m.opt.viscosity

    # added mass
    lin_mom = rho * vmass * v
    ang_mom = rho * vinertia * w
    tq = jp.cross(lin_mom, v) + jp.cross(ang_mom, w)
    fr = jp.cross(lin_mom, w)

    # viscous, lift and drag
    volume = 4.0 / 3.0 * jp.pi * s[:, 0] * s[:, 1] * s[:, 2]
    dmax = jp.max(s, -1)
    dmin = jp.min(s, -1)
    dmid = jp.sum(s, -1) - dmax - dmin
    amax = jp.pi * dmax * dmid
    magnus_f = jp.cross(w, v) * (magnus * rho * volume)[:, None]
    s0, s1, s2 = s[:, 0], s[:, 1], s[:, 2]
    vx, vy, vz = v[:, 0], v[:, 1], v[:, 2]
    proj_denom = (s1 * s2) ** 4 * vx**2 + (s2 * s0) ** 4 * vy**2 + (s0 * s1) ** 4 * vz**2
    proj_num = (s1 * s2 * vx) ** 2 + (s2 * s0 * vy) ** 2 + (s0 * s1 * vz) ** 2
    a_proj = jp.pi * _sqrt0(proj_denom / jp.maximum(MINVAL, proj_num))
    norm = jp.stack([(s1 * s2) ** 2 * vx, (s2 * s0) ** 2 * vy, (s0 * s1) ** 2 * vz], -1)
    speed = mjm.safe_norm(v)
    cos_alpha = proj_num / jp.maximum(MINVAL, speed * proj_denom)
    circ = jp.cross(norm, v) * (kutta * rho * cos_alpha * a_proj)[:, None]
    kutta_f = jp.cross(circ, v)
    eq_d = 2.0 / 3.0 * (s0 + s1 + s2)
    lin_visc_f = 3.0 * jp.pi * eq_d
    lin_visc_t = jp.pi * eq_d**3
    imax = 8.0 / 15.0 * jp.pi * dmid * dmax**4
    ii = jp.stack(
        [8.0 / 15.0 * jp.pi * s[:, k] * jp.maximum(s[:, (k + 1) % 3], s[:, (k + 2) % 3]) ** 4 for k in range(3)], -1
    )
    mom_visc = w * (angdrag[:, None] * ii + slender[:, None] * (imax[:, None] - ii))
    drag_lin = visc * lin_visc_f + rho * speed * (a_proj * blunt + slender * (amax - a_proj))
    drag_ang = visc * lin_visc_t + rho * mjm.safe_norm(mom_visc)
    tq = tq - drag_ang[:, None] * w
    fr = fr + magnus_f + kutta_f - drag_lin[:, None] * v
    tq = tq * interaction[:, None]
    fr = fr * interaction[:, None]
    return jp.einsum("nij,nj->ni", rot, tq), jp.einsum("nij,nj->ni", rot, fr)


def traced(m: Model) -> bool:
    """Static: `fluid` computes forces for `m` (a model with a medium, bodies and dofs); else they are zero."""
    return m.nbody >= 2 and m.nv > 0 and bool(m.fluid_active)


def fluid(m: Model, d: Data) -> jax.Array:
    """qfrc_fluid (nv,) from opt.density / opt.viscosity / opt.wind (zero when both are zero).

    Traced only for a model with a medium (`m.fluid_active`: density or viscosity > 0 when it was compiled); then
    zero at run time where both are zero, as MuJoCo.
    """
    dtype = d.qpos.dtype
    if not traced(m):
        return jp.zeros((m.nv,), dtype)
    on = (m.opt.density > 0) | (m.opt.viscosity > 0)
    # skipped at run time without a medium (a real branch unless density/viscosity are batched under vmap)
    return jax.lax.cond(on, _fluid_forces, lambda m, d: jp.zeros((m.nv,), dtype), m, d)


def _fluid_forces(m: Model, d: Data) -> jax.Array:
    """qfrc_fluid (nv,) with a medium: inertia-box bodies plus ellipsoid-model geoms."""
    dtype = d.qpos.dtype
    bodies = np.arange(1, m.nbody)
    massive = m.body_mass[bodies] >= MINVAL
    gbody_all = np.asarray(m.geom_bodyid)
    geoms = np.nonzero(gbody_all > 0)[0]
    # per body: does any geom use the ellipsoid model
    if len(geoms):
        uses = (m.geom_fluid[geoms, 0] > 0).astype(jp.int32)
        body_ell = jax.ops.segment_max(uses, gbody_all[geoms], num_segments=m.nbody)[bodies] > 0
    else:
        body_ell = jp.zeros((len(bodies),), bool)
    tq, fr = _box_forces(m, d, bodies)
    wb = (massive & ~body_ell).astype(dtype)[:, None]
    qfrc = apply_ft(m, d, fr * wb, tq * wb, d.xipos[bodies], bodies)
    if len(geoms):
        gb = gbody_all[geoms]
        gtq, gfr = _ellipsoid_forces(m, d, geoms, gb)
        full_ell = jp.zeros((m.nbody,), bool).at[bodies].set(body_ell & massive)
        wg = full_ell[gb].astype(dtype)[:, None]
        qfrc = qfrc + apply_ft(m, d, gfr * wg, gtq * wg, d.geom_xpos[geoms], gb)
    return qfrc
