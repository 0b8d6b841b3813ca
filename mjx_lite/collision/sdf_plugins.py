"""Signed distance functions of MuJoCo's SDF plugins (mujoco.sdf.torus, bowl, bolt, nut, gear) and their gradients.

Each distance `f(p, attr, xp)` takes points p (..., 3) in the geom frame, the plugin's attributes (a tuple of floats,
in the plugin's attribute order, defaults filled in) and an array module `xp` (numpy at compile time, where the
marching-cubes mesh samples the field; jax.numpy at run time). The formulas are those of the plugins' shapes
(Inigo Quilez's distance functions: a torus, a spherical bowl shell, a hexagonal bolt and nut with a helical thread,
an involute spur gear); the operation order follows the plugins so float64 results agree to rounding.

Gradients (`gradient`): the torus has an analytic one (MuJoCo's, including its division by the distance to the axis,
NaN on the axis, which MuJoCo's descent treats as a failed step); the others are MuJoCo's forward differences with
step 1e-8 in float64. Float32 cannot take that step (p + 1e-8 == p), so there the gradient is the autodiff gradient of
the distance (then results follow the converged geometry, not MuJoCo's iterates).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp
import numpy as np

# plugin name -> (attribute names, defaults): MuJoCo's plugin/sdf/*.h
ATTRIBUTES: dict[str, tuple[tuple[str, ...], tuple[float, ...]]] = {
    "mujoco.sdf.torus": (("radius1", "radius2"), (0.35, 0.15)),
    "mujoco.sdf.bowl": (("height", "radius", "thickness"), (0.4, 1.0, 0.02)),
    "mujoco.sdf.bolt": (("radius",), (0.26,)),
    "mujoco.sdf.nut": (("radius",), (0.26,)),
    "mujoco.sdf.gear": (("alpha", "diameter", "teeth", "thickness", "innerdiameter"), (0.0, 2.8, 25.0, 0.2, -1.0)),
}
FD_EPS = 1e-8  # MuJoCo's forward-difference step (bowl, bolt, nut, gear)


def _sqrt(xp, x):
    """sqrt with a finite derivative at 0 under jax (value unchanged)."""
    if xp is np:
        return np.sqrt(x)
    pos = x > 0
    return jp.where(pos, jp.sqrt(jp.where(pos, x, 1.0)), 0.0)


def _atan2(xp, y, x):
    if xp is np:
        return np.arctan2(y, x)
    zero = (x == 0) & (y == 0)
    return jp.where(zero, 0.0, jp.arctan2(y, jp.where(zero, 1.0, x)))


def _fract(xp, x):
    return x - xp.floor(x)


def torus(p, attr, xp=jp):
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    q = _sqrt(xp, x * x + y * y) - attr[0]
    return _sqrt(xp, q * q + z * z) - attr[1]


def bowl(p, attr, xp=jp):
    height, radius, thick = attr[0], attr[1], attr[2]
    width = math.sqrt(radius * radius - height * height)
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    q0 = _sqrt(xp, x * x + y * y)
    q1 = z
    d0, d1 = q0 - width, q1 - height
    rim = _sqrt(xp, d0 * d0 + d1 * d1)
    shell = xp.abs(_sqrt(xp, q0 * q0 + q1 * q1) - radius)
    return xp.where(height * q0 < width * q1, rim, shell) - thick


def _hex_head(p, radius, xp):
    """The hexagonal head of the bolt and the nut (shared by both plugins), given the radial term."""
    sqrt12 = math.sqrt(2.0) / 2.0
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    k = 6.0 / math.pi / 2.0
    angle = -xp.floor(_atan2(xp, y, x) * k + 0.5) / k
    s0, s1 = xp.sin(angle), xp.sin(angle + math.pi * 0.5)
    r0 = s1 * x + (-s0) * y  # mju_mulMatVec with mat = [s1, -s0; s0, s1]
    head = r0 - 0.5
    head = xp.maximum(head, xp.abs(z + 0.25) - 0.25)
    return xp.maximum(head, (z + radius - 0.22) * sqrt12)


def _thread(p, attr, xp):
    """The bolt's and the nut's screw thread: (radius from its axis, the thread's distance, sqrt(2)/2, z)."""
    screw = 12.0
    sqrt12 = math.sqrt(2.0) / 2.0
    x, y, z = p[..., 0], p[..., 1], p[..., 2]
    radius = _sqrt(xp, x * x + y * y) - attr[0]
    azimuth = _atan2(xp, y, x)
    triangle = xp.abs(_fract(xp, z * screw - azimuth / math.pi / 2.0) - 0.5)
    return radius, (radius - triangle / screw) * sqrt12, sqrt12, z


def bolt(p, attr, xp=jp):
    radius, thread, sqrt12, z = _thread(p, attr, xp)
    b = xp.maximum(thread, -(0.5 - xp.abs(z + 0.5)))  # Subtraction(a, b) = max(a, -b)
    cone = (z - radius) * sqrt12
    b = xp.maximum(b, -(cone + 1.0 * sqrt12))
    head = _hex_head(p, radius, xp)
    return xp.minimum(b, head)


def nut(p, attr, xp=jp):
    radius2, thread2, sqrt12, z = _thread(p, attr, xp)
    cone2 = (z - radius2) * sqrt12
    hole = xp.maximum(thread2, -(cone2 + 0.5 * sqrt12))
    hole = xp.minimum(hole, -cone2 - 0.05 * sqrt12)
    head = _hex_head(p, radius2, xp)
    return xp.maximum(head, -hole)


def _smooth_union(a, b, k, xp):
    h = xp.clip(0.5 + 0.5 * (b - a) / k, 0.0, 1.0)
    return b * (1.0 - h) + a * h - k * h * (1.0 - h)


def _smooth_intersection(a, b, k, xp):
    return xp.maximum(xp.maximum(a, b), -_smooth_union(xp.maximum(a, -b), xp.maximum(b, -a), k, xp))


def _mod(x, y, xp):
    return x - y * xp.floor(x / y)


def _gear2d(p, attr, xp):
    alpha, D, N = attr[0], attr[1], attr[2]
    psi = 3.096e-5 * N * N - 6.557e-3 * N + 0.551  # pressure angle
    R = D / 2.0
    x, y = p[..., 0], p[..., 1]
    rho = _sqrt(xp, x * x + y * y)
    Pd = N / D
    P = math.pi / Pd
    a = 1.0 / Pd
    Do = D + 2.0 * a
    Ro = Do / 2.0
    h = 2.2 / Pd
    innerR = Ro - h - 0.14 * D
    if attr[4] >= 0.0:
        innerR = attr[4] / 2.0
    Db = D * math.cos(psi)
    Rb = Db / 2.0
    fi = _atan2(xp, y, x) + alpha
    alpha_stride = P / R
    inv_alpha = math.acos(Rb / R)
    inv_phi = math.tan(inv_alpha) - inv_alpha
    shift = alpha_stride / 2.0 - 2.0 * inv_phi
    fia = _mod(fi + shift / 2.0, alpha_stride, xp) - shift / 2.0
    fib = _mod(-fi - shift + shift / 2.0, alpha_stride, xp) - shift / 2.0
    outside = Rb < rho
    rho_safe = xp.where(outside, rho, Rb + 1.0)
    acos_rb = xp.arccos(xp.clip(Rb / rho_safe, -1.0, 1.0))
    ta = _sqrt(xp, rho_safe * rho_safe - Rb * Rb)
    dista = xp.where(outside, ta - Rb * (fia + acos_rb), -1.0e6)
    distb = xp.where(outside, ta - Rb * (fib + acos_rb), -1.0e6)
    gear_outer = rho - Ro
    gear_low_base = rho - (Ro - h)
    crown_base = rho - innerR
    cogs = xp.maximum(dista, distb)
    base_walls = xp.maximum(fia - (alpha_stride - shift), fib - (alpha_stride - shift))
    cogs = xp.maximum(base_walls, cogs)
    cogs = _smooth_intersection(gear_outer, cogs, 0.0035 * D, xp)
    cogs = _smooth_union(gear_low_base, cogs, Rb - Ro + h, xp)
    cogs = xp.maximum(cogs, -crown_base)
    # the plugin's early exits (inside the crown's hole; far outside the teeth)
    cogs = xp.where(Ro - rho < -0.2, rho - Ro, cogs)
    return xp.where(innerR - rho > 0.0, innerR - rho, cogs)


def gear(p, attr, xp=jp):
    d2 = _gear2d(p, attr, xp)
    w0, w1 = d2, xp.abs(p[..., 2]) - attr[3] / 2.0
    a0, a1 = xp.maximum(w0, 0.0), xp.maximum(w1, 0.0)
    return xp.minimum(xp.maximum(w0, w1), 0.0) + _sqrt(xp, a0 * a0 + a1 * a1)


DISTANCE = {"mujoco.sdf.torus": torus, "mujoco.sdf.bowl": bowl, "mujoco.sdf.bolt": bolt, "mujoco.sdf.nut": nut,
            "mujoco.sdf.gear": gear}  # fmt: skip


def aabb(name: str, attr) -> np.ndarray:
    """(6,) the plugin's bounding box (centre, half sizes) in the geom frame (MuJoCo's sdf_aabb)."""
    if name == "mujoco.sdf.torus":
        return np.array([0, 0, 0, attr[0] + attr[1], attr[0] + attr[1], attr[1]], float)
    if name == "mujoco.sdf.bowl":
        r = attr[1] + attr[2]
        return np.array([0, 0, 0, r, r, r], float)
    if name in ("mujoco.sdf.bolt", "mujoco.sdf.nut"):
        return np.array([0, 0, 0, 0.6, 0.6, 1.0], float)
    return np.array([0, 0, 0, attr[1] / 2.0 * 1.25, attr[1] / 2.0 * 1.25, attr[3] / 2.0 * 1.1], float)


def _torus_gradient(p, attr):
    x, y, z = p[0], p[1], p[2]
    len_xy = jp.sqrt(x * x + y * y)  # MuJoCo divides by it unguarded: NaN on the axis (the descent then stops)
    q = len_xy - attr[0]
    len_qz = jp.maximum(jp.sqrt(q * q + z * z), 1e-15)
    return jp.stack([q * (x / len_xy) / len_qz, q * (y / len_xy) / len_qz, z / len_qz])


def gradient(name: str, attr, p: jax.Array) -> jax.Array:
    """(3,) MuJoCo's gradient of plugin `name`'s distance at one point p (3,) (see the module docstring)."""
    f = DISTANCE[name]
    if p.dtype != jp.float64:
        return jax.grad(lambda q: f(q, attr))(p)
    if name == "mujoco.sdf.torus":
        return _torus_gradient(p, attr)
    d0 = f(p, attr)
    pts = p[None, :] + FD_EPS * jp.eye(3, dtype=p.dtype)
    return (f(pts, attr) - d0) / FD_EPS
