"""Geom distance sensors: distance, normal, fromto (MuJoCo's mjSENS_GEOMDIST / GEOMNORMAL / GEOMFROMTO).

A sensor names two geoms or two bodies (all the geoms of a body, whatever their contype); every geom pair of the
two lists is collided with the sensor's cutoff as the margin (mj_geomDistance), and the smallest distance below
the cutoff wins (strictly: the first such pair in geom order on ties). The sensor starts at dist = cutoff and
fromto = 0, so with the default cutoff 0 only penetrations are reported. Pairs MuJoCo collides with its convex
solver (mjc_Convex and box-box, which MuJoCo 4.0's nativeccd sends to its distance solver) go through our general
convex distance (`general.collide`: GJK, EPA where they overlap); the analytic pairs (plane-*, sphere-sphere,
sphere-capsule, sphere-cylinder, sphere-box, capsule-capsule, capsule-box) through the same colliders as the
contacts. fromto runs from geom1's surface point to geom2's (pos -+ normal * dist / 2), normal is that segment
normalised (0 where it is zero). Pairs without a collision function (plane-plane, plane-height field) leave the
sensor at its start; height fields and SDF geoms are refused by the compiler.

Outputs per sensor: distance (1,), normal (3,), fromto (6,).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.collision import driver, general
from mjx_lite.collision.support import CURVED
from mjx_lite.collision.types import NOCONTACT, info_axes
from mjx_lite.math import safe_norm
from mjx_lite.types import Data, GeomType, Model, ObjType, SensorType

_G = GeomType
# MuJoCo's analytic collision functions (mjCOLLISIONFUNC) for ordered type pairs: they run with the margin as in the
# contact pipeline; every other pair with a collision function is mjc_Convex or box-box (the convex distance solver)
_ANALYTIC = {(_G.PLANE, _G.SPHERE), (_G.PLANE, _G.CAPSULE), (_G.PLANE, _G.ELLIPSOID), (_G.PLANE, _G.CYLINDER),
             (_G.PLANE, _G.BOX), (_G.PLANE, _G.MESH), (_G.SPHERE, _G.SPHERE), (_G.SPHERE, _G.CAPSULE),
             (_G.SPHERE, _G.CYLINDER), (_G.SPHERE, _G.BOX), (_G.CAPSULE, _G.CAPSULE), (_G.CAPSULE, _G.BOX)}  # fmt: skip
GEOMDIST_TYPES = (SensorType.GEOMDIST, SensorType.GEOMNORMAL, SensorType.GEOMFROMTO)


def sensor_geoms(m: Model, objtype: int, objid: int) -> list[int]:
    """The geoms of one side of a sensor (static): the geom, or every geom of the body in order."""
    if objtype == ObjType.BODY:
        adr, num = int(np.asarray(m.body_geomadr)[objid]), int(np.asarray(m.body_geomnum)[objid])
        return list(range(adr, adr + num)) if num > 0 else []
    return [int(objid)]


def _pairs(m: Model, sensors) -> tuple[dict, list]:
    """Static plan: the collider groups {key: [(ga, gb, sensor)]} (ga, gb ordered by type) and, per sensor, its pairs
    as (group key, row in group, flip) in MuJoCo's loop order."""
    gtype = np.asarray(m.geom_type)
    groups: dict[tuple, list] = {}
    plan = []
    for i in sensors:
        side1 = sensor_geoms(m, int(np.asarray(m.sensor_objtype)[i]), int(np.asarray(m.sensor_objid)[i]))
        side2 = sensor_geoms(m, int(np.asarray(m.sensor_reftype)[i]), int(np.asarray(m.sensor_refid)[i]))
        rows = []
        for g1 in side1:
            for g2 in side2:
                flip = bool(gtype[g1] > gtype[g2])
                ga, gb = (g2, g1) if flip else (g1, g2)
                ta, tb = int(gtype[ga]), int(gtype[gb])
                if driver.collider_for(ta, tb) is None:
                    continue  # no collision function: the pair leaves the sensor as it is
                if (ta, tb) in _ANALYTIC:
                    key = (ta, tb)
                else:  # the convex distance solver, types traced: one group (two: curved without mesh, the rest)
                    curved = (ta in CURVED or tb in CURVED) and _G.MESH not in (ta, tb)
                    key = (driver.GENERAL, int(curved))
                groups.setdefault(key, []).append((ga, gb, i))
                rows.append((key, len(groups[key]) - 1, flip))
        plan.append(rows)
    return groups, plan


def _run(m: Model, d: Data, key: tuple, members: list) -> tuple[jax.Array, jax.Array, jax.Array]:
    """(dist (n,), from (n, 3), to (n, 3)) of one collider group, from geom ga to gb of each member; dist =
    NOCONTACT where the pair is at least its sensor's cutoff apart."""
    ga = np.asarray([x[0] for x in members])
    gb = np.asarray([x[1] for x in members])
    cutoff = jp.asarray(m.sensor_cutoff, d.geom_xpos.dtype)[np.asarray([x[2] for x in members])]
    t1, t2 = key
    ia = driver._geom_info(m, d, jp.asarray(ga), t1, ga)
    ib = driver._geom_info(m, d, jp.asarray(gb), t1 if t1 == driver.GENERAL else t2, gb)
    if t1 == driver.GENERAL:
        fn = general.general_curved if t2 else general.general
    else:
        fn = driver.collider_for(t1, t2)[0]
    c = jax.vmap(fn, in_axes=(info_axes(ia), info_axes(ib), 0))(ia, ib, cutoff)  # (n, k) rows
    dist = jp.where((c.dist < cutoff[:, None]) & (c.dist < NOCONTACT), c.dist, NOCONTACT)
    k = jp.argmin(dist, axis=1)
    pick = jp.arange(len(members))
    dk, pk, nk = dist[pick, k], c.pos[pick, k], c.normal[pick, k]
    half = jp.where(dk < NOCONTACT, 0.5 * dk, 0.0)[:, None]
    return dk, pk - nk * half, pk + nk * half


def geomdist(m: Model, d: Data, sensors) -> list[jax.Array]:
    """Values of the geom distance sensors `sensors` (static indices): distance (1,), normal (3,) or fromto (6,)
    each."""
    groups, plan = _pairs(m, sensors)
    res = {key: _run(m, d, key, members) for key, members in groups.items()}
    dtype = d.geom_xpos.dtype
    out = []
    for i, rows in zip(sensors, plan):
        stype = int(np.asarray(m.sensor_type)[i])
        cutoff = jp.asarray(m.sensor_cutoff[i], dtype)
        dist, fromto = cutoff, jp.zeros(6, dtype)
        if rows:
            dn = jp.stack([res[key][0][r] for key, r, _ in rows])
            ft = jp.stack([jp.concatenate([res[key][2][r], res[key][1][r]]) if flip
                           else jp.concatenate([res[key][1][r], res[key][2][r]]) for key, r, flip in rows])
            k = jp.argmin(dn)  # the first smallest, as MuJoCo's loop with its strict test
            better = dn[k] < cutoff
            dist = jp.where(better, dn[k], cutoff)
            fromto = jp.where(better, ft[k], fromto)
        if stype == SensorType.GEOMDIST:
            out.append(dist[None])
        elif stype == SensorType.GEOMNORMAL:
            v = fromto[3:] - fromto[:3]
            n = safe_norm(v)
            out.append(jp.where(n > 0, v / jp.where(n > 0, n, 1.0), 0.0))
        else:
            out.append(fromto)
    return out
