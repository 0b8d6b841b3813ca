"""MuJoCo's `mujoco.sensor.touch_grid` sensor plugin (MuJoCo 4.0's plugin/sensor/touch_grid.cc), built in.

A <plugin> sensor on a site: a grid of size[0] x size[1] taxels over the site's field of view. Every contact of the
site's weld body (either side) is expressed in the site's frame: its point in spherical coordinates (azimuth
a = atan2(x, -z) about -y, elevation e = atan2(y, sqrt(x^2 + z^2)) about +x; the site looks down its -z axis), its
force and torque (mj_contactForce, rotated to the world, then to the site frame, negated when the site's weld body
has a smaller id than the larger of the contact's two bodies, then permuted (x, y, z) -> (z, x, y): normal first).
The taxel grid splits [-fov, fov] (degrees; x: azimuth, y: elevation) into size bins after a foveal deformation
g x^5 + (1 - g) x of the unit edges (gamma g). Each contact adds its first nchannel components (normal force, two
tangent forces, then the torques) to the taxel its point falls in (an edge belongs to the bin below it; points
outside the grid are dropped). sensordata: channel-major, then elevation rows, azimuth fastest
(nchannel x size[1] x size[0]); the sensor's cutoff applies.

Differentiable in the contact forces (a segment sum over the padded contacts; the taxel of a contact is piecewise
constant in its position). Flex contacts (no geom on a side) are left out (MuJoCo would read a geom id -1).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import Data, Model

__all__ = ["bin_edges", "touch_grid"]


def _fovea(x: np.ndarray, gamma: float) -> np.ndarray:
    if not gamma:
        return x
    g = max(0.0, min(1.0, gamma))
    return g * x**5 + (1 - g) * x


def bin_edges(n: int, fov: float, gamma: float) -> np.ndarray:
    """(n + 1,) taxel edges in radians over [-fov, fov] degrees, as MuJoCo's (evenly spaced by repeated addition,
    foveated, scaled by fov pi / 180)."""
    inc = 2.0 / n
    out, v = np.zeros(n + 1), -1.0
    for i in range(n + 1):
        out[i] = v
        v += inc
    return _fovea(out, gamma) * (fov * np.pi / 180)


def touch_grid(m: Model, d: Data, i: int, forces: jax.Array) -> jax.Array:
    """Values (sensor_dim[i],) of touch_grid sensor i (static). forces: (nconmax, 6) contact-frame forces
    (contact_force.contact_force)."""
    nchannel, nx, ny, fovx, fovy, gamma = m.sensor_plugincfg[i][1]
    frame = nx * ny
    dtype = d.qpos.dtype
    if m.nconmax == 0:
        return jp.zeros((nchannel * frame,), dtype)
    site = int(np.asarray(m.sensor_objid)[i])
    weld = np.asarray(m.body_weldid)
    parent = int(weld[int(np.asarray(m.site_bodyid)[site])])
    con = d.contact
    g = con.geom
    ok = jp.all(g >= 0, axis=1)
    body = jp.asarray(np.asarray(m.geom_bodyid, np.int32))[jp.where(ok[:, None], g, 0)]  # (ncon, 2)
    wb = jp.asarray(weld.astype(np.int32))[body]
    hit = con.active & ok & jp.any(wb == parent, axis=1)

    mat, pos = d.site_xmat[site], d.site_xpos[site]
    world_f = jp.einsum("cki,ck->ci", con.frame, forces[:, :3])  # frame^T f (rows of frame: the contact axes)
    world_t = jp.einsum("cki,ck->ci", con.frame, forces[:, 3:])
    f6 = jp.concatenate([world_f @ mat, world_t @ mat], axis=1)  # mat^T v per contact
    flip = parent < jp.max(body, axis=1)
    f6 = jp.where(flip[:, None], -f6, f6)
    f6 = f6[:, np.array([2, 0, 1, 5, 3, 4])]  # (x, y, z) -> (z, x, y): normal, tangents

    p = (con.pos - pos) @ mat  # the points in the site's frame
    x, y, z = p[:, 0], p[:, 1], p[:, 2]
    az = jp.arctan2(x, -z)
    el = jp.arctan2(y, jp.sqrt(x * x + z * z))
    ex = jp.asarray(bin_edges(nx, fovx, gamma), dtype)
    ey = jp.asarray(bin_edges(ny, fovy, gamma), dtype)
    ix = jp.searchsorted(ex, az, side="left")  # first edge >= the point: bin ix - 1, valid for 1 <= ix <= n
    iy = jp.searchsorted(ey, el, side="left")
    inside = hit & (ix >= 1) & (ix <= nx) & (iy >= 1) & (iy <= ny)
    taxel = jp.where(inside, (iy - 1) * nx + (ix - 1), frame)
    vals = jp.where(inside[:, None], f6[:, :nchannel], 0.0)
    grid = jax.ops.segment_sum(vals, taxel, num_segments=frame + 1)[:frame]  # (frame, nchannel)
    return grid.T.reshape(-1)
