"""Cameras: the model's cameras (from `Data.cam_xpos`/`cam_xmat`, all tracking modes computed by kinematics),
MuJoCo's free camera (`free_camera`), and the primary rays of a pinhole camera.

Conventions are MuJoCo's: a camera looks along its local -z axis with +y up and +x to the right; `fovy` is the
vertical field of view in degrees; image row 0 is the top row. Rays are returned unnormalised with a local z
component of -1, so a ray parameter `t` is the depth along the optical axis (what `mujoco.Renderer` returns as
depth), not the distance along the ray.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import pytree_dataclass

__all__ = ["FreeCamera", "free_camera", "free_camera_pose", "pixel_directions"]


@pytree_dataclass
class FreeCamera:
    """A free camera orbiting `lookat` (MuJoCo's mjvCamera of type mjCAMERA_FREE). Angles in degrees.

    lookat: (3,); distance, azimuth, elevation: (); fovy: () vertical field of view (None: the model's
    <visual><global fovy>, 45 by default).
    """

    lookat: jax.Array
    distance: jax.Array
    azimuth: jax.Array
    elevation: jax.Array
    fovy: jax.Array | None = None


def free_camera(lookat=(0.0, 0.0, 0.0), distance=2.0, azimuth=90.0, elevation=-45.0, fovy=None) -> FreeCamera:
    """A free camera looking at `lookat` from `distance`, turned `azimuth` degrees about +z and raised
    `elevation` degrees (negative: looking down), as MuJoCo's viewer camera. All values may be traced."""
    f = jp.asarray(lookat).dtype if hasattr(lookat, "dtype") else None
    dt = f if f is not None and jp.issubdtype(f, jp.floating) else jp.asarray(0.0).dtype
    as_f = lambda x: None if x is None else jp.asarray(x, dt)  # noqa: E731
    return FreeCamera(lookat=jp.asarray(lookat, dt), distance=as_f(distance), azimuth=as_f(azimuth),
                      elevation=as_f(elevation), fovy=as_f(fovy))  # fmt: skip


def free_camera_pose(cam: FreeCamera) -> tuple[jax.Array, jax.Array]:
    """Position (3,) and orientation (3, 3) (columns: right, up, backward) of a free camera (mjv_updateCamera)."""
    az = jp.deg2rad(cam.azimuth)
    el = jp.deg2rad(cam.elevation)
    ca, sa, ce, se = jp.cos(az), jp.sin(az), jp.cos(el), jp.sin(el)
    forward = jp.stack([ce * ca, ce * sa, se])
    up = jp.stack([-se * ca, -se * sa, ce])
    right = jp.cross(forward, up)
    pos = cam.lookat - cam.distance * forward
    return pos, jp.stack([right, up, -forward], axis=1)


def pixel_directions(height: int, width: int, fovy: jax.Array, dtype) -> jax.Array:
    """Camera-frame ray directions (height*width, 3) through pixel centres, z = -1 (row-major, top row first)."""
    ys = 1.0 - (np.arange(height) + 0.5) * 2.0 / height
    xs = (np.arange(width) + 0.5) * 2.0 / width - 1.0
    gx, gy = np.meshgrid(xs, ys)
    half = jp.tan(jp.deg2rad(fovy) / 2.0)
    x = jp.asarray(gx.ravel(), dtype) * half * (width / height)
    y = jp.asarray(gy.ravel(), dtype) * half
    return jp.stack([x, y, -jp.ones_like(x)], axis=-1)
