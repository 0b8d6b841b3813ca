"""Quaternions, rotations, spatial algebra and NaN-safe norms (JAX).

Conventions are MuJoCo's: quaternions are (w, x, y, z); spatial vectors are (angular, linear) 6-vectors in
the "com-based" frame (world orientation, origin at the subtree root's centre of mass); `cinert` is the
10-vector (I_xx, I_yy, I_zz, I_xy, I_xz, I_yz, m*c_x, m*c_y, m*c_z, m).
All functions broadcast over leading batch dimensions unless stated.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np


def dot3(a: jax.Array, b: jax.Array) -> jax.Array:
    """a . b over a trailing axis of size 3: (..., 3), (..., 3) -> (...), broadcasting. Written as explicit adds:
    XLA on CPU reduces a minor axis of 3 of a large batched array 10-30x slower than it fuses these."""
    return a[..., 0] * b[..., 0] + a[..., 1] * b[..., 1] + a[..., 2] * b[..., 2]


def outer3(a: jax.Array, b: jax.Array) -> jax.Array:
    """All dot products of two lists of 3-vectors: (N, 3), (M, 3) -> (N, M), a @ b.T written as three fused outer
    products (XLA on CPU runs a matrix product with an inner size of 3 under vmap several times slower)."""
    return a[:, None, 0] * b[None, :, 0] + a[:, None, 1] * b[None, :, 1] + a[:, None, 2] * b[None, :, 2]


def safe_norm(x: jax.Array, axis: int = -1, keepdims: bool = False, eps: float = 0.0) -> jax.Array:
    """Euclidean norm with a finite (zero) gradient at x = 0."""
    if x.shape[axis] == 3 and axis in (-1, x.ndim - 1):
        sq = dot3(x, x)[..., None]
    else:
        sq = jp.sum(x * x, axis=axis, keepdims=True)
    is_zero = sq <= eps * eps
    safe_sq = jp.where(is_zero, jp.ones_like(sq), sq)
    n = jp.where(is_zero, jp.zeros_like(sq), jp.sqrt(safe_sq))
    return n if keepdims else jp.squeeze(n, axis=axis)


def safe_normalize(x: jax.Array, axis: int = -1, eps: float = 1e-15) -> tuple[jax.Array, jax.Array]:
    """(x / |x|, |x|); returns x unchanged (and norm 0) where |x| <= eps, with finite gradients."""
    n = safe_norm(x, axis=axis, keepdims=True)
    small = n <= eps
    y = x / jp.where(small, jp.ones_like(n), n)
    return y, jp.squeeze(n, axis=axis)


def pick(v: jax.Array, k: jax.Array) -> jax.Array:
    """v[k] for v (n, ...) and a traced int k, as a one-hot product (gradients reach only row k)."""
    return jp.tensordot(jax.nn.one_hot(k, v.shape[0], dtype=v.dtype), v, axes=1)


def safe_div(a: jax.Array, b: jax.Array, eps: float = 1e-15) -> jax.Array:
    """a / b with b replaced by sign(b)*eps where |b| < eps (finite values and gradients)."""
    small = jp.abs(b) < eps
    return a / jp.where(small, jp.where(b < 0, -eps, eps), b)


# ---- quaternions ------------------------------------------------------------------------------------------


def quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product a * b, (..., 4)."""
    aw, ax, ay, az = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bw, bx, by, bz = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return jp.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        axis=-1,
    )


def quat_conj(q: jax.Array) -> jax.Array:
    return q * jp.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def quat_normalize(q: jax.Array) -> jax.Array:
    """Unit quaternion; the identity where |q| is ~0 (as mju_normalize4)."""
    n = safe_norm(q, keepdims=True)
    small = n < 1e-15
    ident = jp.zeros_like(q).at[..., 0].set(1.0)
    return jp.where(small, ident, q / jp.where(small, jp.ones_like(n), n))


def quat_to_mat(q: jax.Array) -> jax.Array:
    """Rotation matrix of a unit quaternion, (..., 4) -> (..., 3, 3)."""
    w, x, y, z = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    ww, xx, yy, zz = w * w, x * x, y * y, z * z
    wx, wy, wz, xy, xz, yz = w * x, w * y, w * z, x * y, x * z, y * z
    r0 = jp.stack([ww + xx - yy - zz, 2 * (xy - wz), 2 * (xz + wy)], axis=-1)
    r1 = jp.stack([2 * (xy + wz), ww - xx + yy - zz, 2 * (yz - wx)], axis=-1)
    r2 = jp.stack([2 * (xz - wy), 2 * (yz + wx), ww - xx - yy + zz], axis=-1)
    return jp.stack([r0, r1, r2], axis=-2)


def rotate(v: jax.Array, q: jax.Array) -> jax.Array:
    """Rotate vector v (..., 3) by unit quaternion q (..., 4)."""
    u = q[..., 1:]
    w = q[..., :1]
    t = 2.0 * jp.cross(u, v)
    return v + w * t + jp.cross(u, t)


def axis_angle_to_quat(axis: jax.Array, angle: jax.Array) -> jax.Array:
    """Quaternion of a rotation by `angle` about unit `axis` (..., 3), (...) -> (..., 4)."""
    half = 0.5 * angle
    return jp.concatenate([jp.cos(half)[..., None], axis * jp.sin(half)[..., None]], axis=-1)


def quat_integrate(q: jax.Array, omega: jax.Array, dt: jax.Array) -> jax.Array:
    """Integrate unit quaternion q by local angular velocity omega over dt (as mju_quatIntegrate)."""
    axis, angle = safe_normalize(omega)
    dq = axis_angle_to_quat(axis, angle * dt)
    return quat_normalize(quat_mul(q, dq))


def quat_sub(a: jax.Array, b: jax.Array) -> jax.Array:
    """3-vector v such that a = b * exp(v) (local frame of b), as mju_subQuat."""
    dq = quat_mul(quat_conj(b), a)
    # shortest path
    dq = jp.where(dq[..., :1] < 0, -dq, dq)
    axis, sin_half = safe_normalize(dq[..., 1:])
    angle = 2.0 * jp.arctan2(sin_half, dq[..., 0])
    return axis * angle[..., None]


def quat_to_rotvec(q: jax.Array) -> jax.Array:
    """Rotation vector (axis * angle, angle in [-pi, pi]) of a unit quaternion (..., 4) -> (..., 3), as
    mju_quat2Vel(q, 1), with exact finite gradients at the identity (2 atan2(s, w) / s by its series near s = 0)."""
    q = jp.where(q[..., :1] < 0, -q, q)  # the shortest rotation (angle <= pi)
    v, w = q[..., 1:], q[..., 0]
    s2 = dot3(v, v)
    small = s2 < 1e-12
    s = jp.sqrt(jp.where(small, 1.0, s2))
    ws = jp.where(small, jp.where(w > 0, w, 1.0), w)
    factor = jp.where(small, 2.0 / ws * (1.0 - s2 / (3.0 * ws * ws)), 2.0 * jp.arctan2(s, w) / s)
    return v * factor[..., None]


def rotvec_to_quat(v: jax.Array) -> jax.Array:
    """Unit quaternion exp(v / 2) of a rotation vector (..., 3) -> (..., 4) (MuJoCo's expmap2Quat), with exact
    finite gradients at v = 0 (sin(t / 2) / t by its series near t = 0)."""
    t2 = dot3(v, v)
    small = t2 < 1e-12
    t = jp.sqrt(jp.where(small, 1.0, t2))
    half_sinc = jp.where(small, 0.5 - t2 / 48.0, jp.sin(0.5 * t) / t)
    cos_half = jp.where(small, 1.0 - t2 / 8.0, jp.cos(0.5 * t))
    return jp.concatenate([cos_half[..., None], v * half_sinc[..., None]], axis=-1)


def quat_to_axis_angle(q: jax.Array) -> tuple[jax.Array, jax.Array]:
    axis, s = safe_normalize(q[..., 1:])
    angle = 2.0 * jp.arctan2(s, q[..., 0])
    return axis, angle


def mat_to_quat(mat: jax.Array) -> jax.Array:
    """Unit quaternion (w >= 0 branch choice as mju_mat2Quat) of a rotation matrix (..., 3, 3)."""
    m = mat
    tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]

    def branch_w():
        s = jp.sqrt(jp.maximum(tr + 1.0, 1e-30)) * 2.0
        return jp.stack(
            [0.25 * s, (m[..., 2, 1] - m[..., 1, 2]) / s, (m[..., 0, 2] - m[..., 2, 0]) / s,
             (m[..., 1, 0] - m[..., 0, 1]) / s], axis=-1)  # fmt: skip

    def branch_x():
        s = jp.sqrt(jp.maximum(1.0 + m[..., 0, 0] - m[..., 1, 1] - m[..., 2, 2], 1e-30)) * 2.0
        return jp.stack(
            [(m[..., 2, 1] - m[..., 1, 2]) / s, 0.25 * s, (m[..., 0, 1] + m[..., 1, 0]) / s,
             (m[..., 0, 2] + m[..., 2, 0]) / s], axis=-1)  # fmt: skip

    def branch_y():
        s = jp.sqrt(jp.maximum(1.0 + m[..., 1, 1] - m[..., 0, 0] - m[..., 2, 2], 1e-30)) * 2.0
        return jp.stack(
            [(m[..., 0, 2] - m[..., 2, 0]) / s, (m[..., 0, 1] + m[..., 1, 0]) / s, 0.25 * s,
             (m[..., 1, 2] + m[..., 2, 1]) / s], axis=-1)  # fmt: skip

    def branch_z():
        s = jp.sqrt(jp.maximum(1.0 + m[..., 2, 2] - m[..., 0, 0] - m[..., 1, 1], 1e-30)) * 2.0
        return jp.stack(
            [(m[..., 1, 0] - m[..., 0, 1]) / s, (m[..., 0, 2] + m[..., 2, 0]) / s,
             (m[..., 1, 2] + m[..., 2, 1]) / s, 0.25 * s], axis=-1)  # fmt: skip

    qw, qx, qy, qz = branch_w(), branch_x(), branch_y(), branch_z()
    use_w = (tr > 0)[..., None]
    use_x = ((m[..., 0, 0] > m[..., 1, 1]) & (m[..., 0, 0] > m[..., 2, 2]))[..., None]
    use_y = (m[..., 1, 1] > m[..., 2, 2])[..., None]
    q = jp.where(use_w, qw, jp.where(use_x, qx, jp.where(use_y, qy, qz)))
    return quat_normalize(q)


# ---- spatial algebra (motion/force 6-vectors: [angular, linear]) ------------------------------------------


def motion_cross(v: jax.Array, u: jax.Array) -> jax.Array:
    """Motion cross product v x u (mju_crossMotion), (..., 6)."""
    w, vl = v[..., :3], v[..., 3:]
    uw, ul = u[..., :3], u[..., 3:]
    return jp.concatenate([jp.cross(w, uw), jp.cross(w, ul) + jp.cross(vl, uw)], axis=-1)


def force_cross(v: jax.Array, f: jax.Array) -> jax.Array:
    """Force cross product v x* f (mju_crossForce), (..., 6)."""
    w, vl = v[..., :3], v[..., 3:]
    ft, ff = f[..., :3], f[..., 3:]
    return jp.concatenate([jp.cross(w, ft) + jp.cross(vl, ff), jp.cross(w, ff)], axis=-1)


def inert_mul(cinert: jax.Array, v: jax.Array) -> jax.Array:
    """Spatial inertia (10-vector, com-based) times motion vector -> force vector (mju_mulInertVec)."""
    i = cinert
    w, lin = v[..., :3], v[..., 3:]
    mc = i[..., 6:9]
    mass = i[..., 9:10]
    ixx, iyy, izz, ixy, ixz, iyz = (i[..., k] for k in range(6))
    iw = jp.stack(
        [ixx * w[..., 0] + ixy * w[..., 1] + ixz * w[..., 2],
         ixy * w[..., 0] + iyy * w[..., 1] + iyz * w[..., 2],
         ixz * w[..., 0] + iyz * w[..., 1] + izz * w[..., 2]], axis=-1)  # fmt: skip
    torque = iw + jp.cross(mc, lin)
    force = mass * lin - jp.cross(mc, w)
    return jp.concatenate([torque, force], axis=-1)


def transform_motion(vel: jax.Array, offset: jax.Array) -> jax.Array:
    """Shift the reference point of a motion vector by `offset` (new = old_point + offset)."""
    w, lin = vel[..., :3], vel[..., 3:]
    return jp.concatenate([w, lin - jp.cross(offset, w)], axis=-1)


def transform_force(frc: jax.Array, offset: jax.Array) -> jax.Array:
    """Shift the reference point of a force vector by `offset`."""
    t, f = frc[..., :3], frc[..., 3:]
    return jp.concatenate([t - jp.cross(offset, f), f], axis=-1)


# ---- compact forms (one einsum each: small traced graphs, fast compiles) -----------------------------------
# Same results as the elementwise versions above up to float round-off; used by the tree sweeps in pipeline/.

_HIGHEST = jax.lax.Precision.HIGHEST


def _np_tensors():
    eps = np.zeros((3, 3, 3))
    eps[0, 1, 2] = eps[1, 2, 0] = eps[2, 0, 1] = 1.0
    eps[0, 2, 1] = eps[2, 1, 0] = eps[1, 0, 2] = -1.0
    # Hamilton product: (a*b)_i = sum_jk QMUL[i, j, k] a_j b_k
    qmul = np.zeros((4, 4, 4))
    for i, j, k, s in [(0, 0, 0, 1), (0, 1, 1, -1), (0, 2, 2, -1), (0, 3, 3, -1),
                       (1, 0, 1, 1), (1, 1, 0, 1), (1, 2, 3, 1), (1, 3, 2, -1),
                       (2, 0, 2, 1), (2, 1, 3, -1), (2, 2, 0, 1), (2, 3, 1, 1),
                       (3, 0, 3, 1), (3, 1, 2, 1), (3, 2, 1, -1), (3, 3, 0, 1)]:  # fmt: skip
        qmul[i, j, k] = s
    # rotation matrix: R_ij = sum_kl QMAT[i, j, k, l] q_k q_l (unit q)
    qmat = np.zeros((3, 3, 4, 4))
    w, x, y, z = 0, 1, 2, 3
    for (i, j), terms in {
        (0, 0): [(w, w, 1), (x, x, 1), (y, y, -1), (z, z, -1)],
        (1, 1): [(w, w, 1), (x, x, -1), (y, y, 1), (z, z, -1)],
        (2, 2): [(w, w, 1), (x, x, -1), (y, y, -1), (z, z, 1)],
        (0, 1): [(x, y, 2), (w, z, -2)], (1, 0): [(x, y, 2), (w, z, 2)],
        (0, 2): [(x, z, 2), (w, y, 2)], (2, 0): [(x, z, 2), (w, y, -2)],
        (1, 2): [(y, z, 2), (w, x, -2)], (2, 1): [(y, z, 2), (w, x, 2)],
    }.items():  # fmt: skip
        for k, l, s in terms:
            qmat[i, j, k, l] = s
    return eps, qmul, qmat


_EPS, _QMUL, _QMAT = _np_tensors()


def cross_c(a: jax.Array, b: jax.Array) -> jax.Array:
    """a x b, (..., 3) (one einsum)."""
    return jp.einsum("ijk,...j,...k->...i", jp.asarray(_EPS, a.dtype), a, b, precision=_HIGHEST)


def quat_mul_c(a: jax.Array, b: jax.Array) -> jax.Array:
    """Hamilton product a * b, (..., 4) (one einsum)."""
    return jp.einsum("ijk,...j,...k->...i", jp.asarray(_QMUL, a.dtype), a, b, precision=_HIGHEST)


def quat_to_mat_c(q: jax.Array) -> jax.Array:
    """Rotation matrix (..., 3, 3) of a unit quaternion (..., 4) (one einsum)."""
    return jp.einsum("ijkl,...k,...l->...ij", jp.asarray(_QMAT, q.dtype), q, q, precision=_HIGHEST)


def rotate_c(v: jax.Array, q: jax.Array) -> jax.Array:
    """Rotate v (..., 3) by unit quaternion q (..., 4)."""
    return jp.einsum("ijkl,...k,...l,...j->...i", jp.asarray(_QMAT, q.dtype), q, q, v, precision=_HIGHEST)


def _spatial_tensors():
    eps = _EPS
    # motion cross v x u: [w x uw, w x ul + vl x uw]
    mc = np.zeros((6, 6, 6))
    mc[:3, :3, :3] = eps
    mc[3:, :3, 3:] = eps
    mc[3:, 3:, :3] = eps
    # force cross v x* f: [w x ft + vl x ff, w x ff]
    fc = np.zeros((6, 6, 6))
    fc[:3, :3, :3] = eps
    fc[:3, 3:, 3:] = eps
    fc[3:, :3, 3:] = eps
    # inertia (10-vector) times motion: res_i = sum_jk INERT[i, j, k] cinert_j v_k
    it = np.zeros((6, 10, 6))
    sym = [[0, 3, 4], [3, 1, 5], [4, 5, 2]]
    for r in range(3):
        for c in range(3):
            it[r, sym[r][c], c] = 1.0  # I w
    for i in range(3):
        for j in range(3):
            for k in range(3):
                it[i, 6 + j, 3 + k] += eps[i, j, k]  # mc x lin
                it[3 + i, 6 + j, k] -= eps[i, j, k]  # - mc x w
        it[3 + i, 9, 3 + i] = 1.0  # m lin
    return mc, fc, it


_MCROSS, _FCROSS, _INERT = _spatial_tensors()


def motion_cross_c(v: jax.Array, u: jax.Array) -> jax.Array:
    """Motion cross product v x u (mju_crossMotion), (..., 6) (one einsum)."""
    return jp.einsum("ijk,...j,...k->...i", jp.asarray(_MCROSS, v.dtype), v, u, precision=_HIGHEST)


def force_cross_c(v: jax.Array, f: jax.Array) -> jax.Array:
    """Force cross product v x* f (mju_crossForce), (..., 6) (one einsum)."""
    return jp.einsum("ijk,...j,...k->...i", jp.asarray(_FCROSS, v.dtype), v, f, precision=_HIGHEST)


def inert_mul_c(cinert: jax.Array, v: jax.Array) -> jax.Array:
    """Spatial inertia (10-vector) times motion vector (mju_mulInertVec), (..., 6) (one einsum)."""
    return jp.einsum("ijk,...j,...k->...i", jp.asarray(_INERT, v.dtype), cinert, v, precision=_HIGHEST)
