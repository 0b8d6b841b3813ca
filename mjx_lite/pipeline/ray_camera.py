"""Camera rangefinders: one ray per pixel of a camera (MuJoCo's rangefinder sensor with `camera=`).

Pixel (col, row), row 0 at the top, is cast through its centre: px = col + 0.5 - cx, py = row + 0.5 - cy, with the
focal lengths fx, fy and principal point cx, cy in pixels. A perspective camera with a sensor size takes them from
its intrinsics (computed in float32, as MuJoCo does from its float fields), otherwise from fovy (fx = fy =
height / (2 tan(fovy / 2)), principal point at the image centre); every ray starts at the camera and points along
the normalised camera-frame direction (px / fx, -py / fy, -1). An orthographic camera casts parallel rays along
its -z axis from origins offset by (px / fx, -py / fy, 0) * fovy / 2 in its frame (fx, fy: half the width, height;
fovy is the image height in length units). Rays skip the geoms of the camera's body (`ray.ray`). Values per pixel,
row-major, in the canonical field order of the data mask; depth is the hit point's distance from the camera plane
(-1 on a miss), the other fields are the site rangefinder's (`ray.rangefinder`).
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline import ray
from mjx_lite.pipeline.ray_shapes import unit
from mjx_lite.types import Data, Model

PERSPECTIVE, ORTHOGRAPHIC = 0, 1


def _focal(m: Model, cam: int, dtype) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """Focal lengths and principal point in pixels (fx, fy, cx, cy) of one camera (mju_camIntrinsics)."""
    w, h = (int(r) for r in np.asarray(m.cam_resolution)[cam])
    if int(np.asarray(m.cam_projection)[cam]) == ORTHOGRAPHIC:
        return (jp.asarray(w / 2.0, dtype), jp.asarray(h / 2.0, dtype), jp.asarray(w / 2.0, dtype),
                jp.asarray(h / 2.0, dtype))  # fmt: skip
    ss, intr = m.cam_sensorsize[cam], m.cam_intrinsic[cam]
    has_ss = (ss[0] != 0) & (ss[1] != 0)
    safe = jp.where(has_ss, ss, 1.0).astype(jp.float32)
    res = jp.asarray([w, h, w, h], jp.float32)
    f32 = (intr.astype(jp.float32) / jp.concatenate([safe, safe]) * res).astype(dtype)  # float arithmetic
    f_fov = 0.5 / jp.tan(m.cam_fovy[cam] * np.pi / 360.0) * h
    fov = jp.stack([f_fov, f_fov, jp.asarray(w / 2.0, dtype), jp.asarray(h / 2.0, dtype)])
    out = jp.where(has_ss, f32, fov.astype(dtype))
    return out[0], out[1], out[2], out[3]


def pixel_rays(m: Model, d: Data, cam: int) -> tuple[jax.Array, jax.Array]:
    """Ray origins and unit directions (w * h, 3) of one camera's pixels, row-major (mju_camPixelRay)."""
    dtype = d.cam_xpos.dtype
    w, h = (int(r) for r in np.asarray(m.cam_resolution)[cam])
    fx, fy, cx, cy = _focal(m, cam, dtype)
    col, row = np.meshgrid(np.arange(w), np.arange(h))  # (h, w): row-major pixel order
    px = jp.asarray(col.reshape(-1) + 0.5, dtype) - cx
    py = jp.asarray(row.reshape(-1) + 0.5, dtype) - cy
    xpos, xmat = d.cam_xpos[cam], d.cam_xmat[cam]
    if int(np.asarray(m.cam_projection)[cam]) == ORTHOGRAPHIC:
        half = m.cam_fovy[cam] / 2
        offset = jp.stack([px / fx * half, -py / fy * half, jp.zeros_like(px)], -1)
        origin = xpos[None, :] + offset @ xmat.T
        direction = jp.broadcast_to(-xmat[:, 2], origin.shape)
        return origin, direction
    local = jp.stack([px / fx, -py / fy, -jp.ones_like(px)], -1)
    direction = unit(local @ xmat.T)
    return jp.broadcast_to(xpos, direction.shape), direction


def rangefinder(m: Model, d: Data, cams: np.ndarray, mask: int) -> jax.Array:
    """Camera rangefinders with one data mask and one resolution: values (k, w * h * datasize), per pixel row-major
    the fields of `mask` in canonical order (dist, dir, origin, point, normal, depth)."""
    cams = np.asarray(cams, int)
    rays = [pixel_rays(m, d, int(c)) for c in cams]
    npix = rays[0][0].shape[0]
    origin = jp.concatenate([o for o, _ in rays])  # (k * npix, 3)
    direction = jp.concatenate([v for _, v in rays])
    exclude = np.repeat(np.asarray(m.cam_bodyid)[cams], npix)
    dist, _, normal = ray.ray(m, d, origin, direction, bodyexclude=exclude)
    hit = (dist >= 0)[:, None]
    point = jp.where(hit, origin + jp.where(hit, dist[:, None], 0.0) * direction, 0.0)
    cam_xpos = jp.repeat(d.cam_xpos[cams], npix, axis=0)
    cam_z = jp.repeat(d.cam_xmat[cams][:, :, 2], npix, axis=0)
    depth = jp.where(hit, -jp.sum((point - cam_xpos) * cam_z, -1, keepdims=True), -1.0)
    fields = {
        ray.DIST: dist[:, None],
        ray.DIR: jp.where(hit, direction, 0.0),
        ray.ORIGIN: origin,
        ray.POINT: point,
        ray.NORMAL: normal,
        ray.DEPTH: depth,
    }
    out = [fields[f] for f in range(len(ray.RAYDATA_SIZE)) if mask & (1 << f)]
    if not out:
        raise ValueError("camera rangefinder: empty data mask")
    return jp.concatenate(out, -1).reshape(len(cams), -1)
