"""Host-side (numpy) geometry helpers of the compiler: quaternions, geom volume and inertia, principal axes.

Everything here runs once at compile time on float64 numpy values; nothing is traced. The conventions are
MuJoCo's: quaternions are (w, x, y, z); a diagonal inertia is given in the frame whose orientation is `quat`;
"full" inertias are stored as (Ixx, Iyy, Izz, Ixy, Ixz, Iyz).
"""

from __future__ import annotations

import math

import numpy as np

from mjx_lite.types import MINVAL

EPS = 1e-14  # MuJoCo's mjEPS (user_util.h: "minimum value in various calculations" of the compiler)
_MJEPS = EPS
_EIG_REL = 8 * np.finfo(float).eps  # body eig3: Jacobi stops at off-diagonals below this times max|A|
_EIG_SORT = 1e-12  # body eig3: eigenvalues closer than this times max|A| are not swapped when sorting

# number of size parameters each geom type needs (plane, hfield, sphere, capsule, ellipsoid, cylinder, box, mesh)
GEOM_NSIZE = (3, 0, 1, 2, 3, 2, 3, 0, 0)


# ----------------------------------------------------------------------------------------------------------
# quaternions (numpy, (4,))


def quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a * b."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])  # fmt: skip


def quat_to_mat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix (3, 3) of a unit quaternion."""
    w, x, y, z = q
    return np.array([
        [w * w + x * x - y * y - z * z, 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), w * w - x * x + y * y - z * z, 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), w * w - x * x - y * y + z * z],
    ])  # fmt: skip


# C's <math.h> semantics for the compiler's scalar arithmetic: NaN (not a Python ValueError) outside the domain, inf
# (not OverflowError) on overflow, as MuJoCo computes; numpy's warnings are silenced by compile_model's errstate.
def sqrt(x: float) -> float:
    return float(np.sqrt(x))


def cos(x: float) -> float:
    return float(np.cos(x))


def sin(x: float) -> float:
    return float(np.sin(x))


def acos(x: float) -> float:
    return float(np.arccos(x))


def atan2(y: float, x: float) -> float:
    return float(np.arctan2(y, x))


def rot_vec(v: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Rotate vector v by quaternion q."""
    return quat_to_mat(q) @ np.asarray(v, float)


def normalize(v: np.ndarray) -> tuple[np.ndarray, float]:
    """mjuu_normvec on a copy: (v / |v|, |v|); (v, 0) when |v|^2 < mjEPS; v unchanged when |v| is within mjEPS
    of 1."""
    v = np.array(v, float)
    with np.errstate(over="ignore", invalid="ignore"):
        sq = float(np.dot(v, v))
        if sq < EPS:
            return v, 0.0
        n = sqrt(sq)
        if abs(n - 1) > EPS:
            v = v / n
    return v, n


def z2quat(vec: np.ndarray) -> np.ndarray:
    """Quaternion rotating the z axis onto the (unit) direction `vec` (mjuu_z2quat)."""
    vec = np.asarray(vec, float)
    axis = np.cross([0.0, 0.0, 1.0], vec)
    axis, s = normalize(axis)
    if s < 1e-10:
        axis = np.array([1.0, 0.0, 0.0])
    ang = atan2(s, vec[2])
    return np.concatenate([[cos(ang / 2)], axis * sin(ang / 2)])


def frame_accum(pos: np.ndarray, quat: np.ndarray, cpos: np.ndarray, cquat: np.ndarray):
    """Pose of a child frame (cpos, cquat) given in the frame (pos, quat): returns the composed pose."""
    return np.asarray(pos, float) + rot_vec(cpos, quat), quat_mul(np.asarray(quat, float), np.asarray(cquat, float))


# ----------------------------------------------------------------------------------------------------------
# principal axes


def _normvec(v: list[float]) -> float:
    """mjuu_normvec: normalise in place unless |v| < mjEPS or already within mjEPS of 1; return the norm."""
    nrm = sum(x * x for x in v)
    if nrm < _MJEPS:
        return 0.0
    nrm = sqrt(nrm)
    if abs(nrm - 1) > _MJEPS:
        for i in range(len(v)):
            v[i] /= nrm
    return nrm


def _quat2mat(q) -> list[float]:
    """mjuu_quat2mat: row-major 3x3."""
    if q[0] == 1 and q[1] == 0 and q[2] == 0 and q[3] == 0:
        return [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
    q00, q01, q02, q03 = q[0] * q[0], q[0] * q[1], q[0] * q[2], q[0] * q[3]
    q11, q12, q13 = q[1] * q[1], q[1] * q[2], q[1] * q[3]
    q22, q23, q33 = q[2] * q[2], q[2] * q[3], q[3] * q[3]
    return [
        q00 + q11 - q22 - q33, 2 * (q12 - q03), 2 * (q13 + q02),
        2 * (q12 + q03), q00 - q11 + q22 - q33, 2 * (q23 - q01),
        2 * (q13 - q02), 2 * (q23 + q01), q00 - q11 - q22 + q33,
    ]  # fmt: skip


def _mulquat(a, b) -> list[float]:
    tmp = [
        a[0] * b[0] - a[1] * b[1] - a[2] * b[2] - a[3] * b[3],
        a[0] * b[1] + a[1] * b[0] + a[2] * b[3] - a[3] * b[2],
        a[0] * b[2] - a[1] * b[3] + a[2] * b[0] + a[3] * b[1],
        a[0] * b[3] + a[1] * b[2] - a[2] * b[1] + a[3] * b[0],
    ]
    _normvec(tmp)
    return tmp


def _mulmat(a, b) -> list[float]:
    return [a[3 * i] * b[j] + a[3 * i + 1] * b[3 + j] + a[3 * i + 2] * b[6 + j] for i in range(3) for j in range(3)]


def eig3(mat: np.ndarray, off_rtol: float = _EIG_REL, sort_rtol: float = _EIG_SORT) -> tuple[np.ndarray, np.ndarray]:
    """Eigen-decomposition of a symmetric 3x3 matrix by quaternion Jacobi rotations (MuJoCo's eig3).

    Returns (eigval (3,) in decreasing order, quat (4,)) with mat = R diag(eigval) R^T, R = quat_to_mat(quat).
    Follows MuJoCo's procedure (largest off-diagonal first, half-angle quaternion rotations, sorting by 90-degree
    rotations, in MuJoCo's operation order) so that the principal frame matches the one MuJoCo reports, not just
    an equivalent one. The iteration stops when the largest off-diagonal is below off_rtol max|A|; two eigenvalues
    are swapped when sorting only if they differ by more than sort_rtol max|A|. The defaults are MuJoCo 4.0's for
    body inertias (fullinertia, and the inertia combined from a body's geoms: every body of the reference models
    to 2e-13 in the quaternion); meshes use looser ones (mesh.eig3).
    """
    m = [float(x) for x in np.asarray(mat, float).reshape(9)]
    quat = [1.0, 0.0, 0.0, 0.0]
    eigval = [m[0], m[4], m[8]]
    scale = max(abs(x) for x in m)
    tol = off_rtol * scale
    for _ in range(500):
        ev = _quat2mat(quat)
        evt = [ev[0], ev[3], ev[6], ev[1], ev[4], ev[7], ev[2], ev[5], ev[8]]
        d = _mulmat(_mulmat(evt, m), ev)
        eigval = [d[0], d[4], d[8]]
        if abs(d[1]) > abs(d[2]) and abs(d[1]) > abs(d[5]):
            rk, ck, rotk = 0, 1, 2
        elif abs(d[2]) > abs(d[5]):
            rk, ck, rotk = 0, 2, 1
        else:
            rk, ck, rotk = 1, 2, 0
        off = d[3 * rk + ck]
        if abs(off) <= tol:
            break
        tau = (d[4 * ck] - d[4 * rk]) / (2 * off)
        if tau >= 0:
            t = 1.0 / (tau + sqrt(1 + tau * tau))
        else:
            t = -1.0 / (-tau + sqrt(1 + tau * tau))
        c = 1.0 / sqrt(1 + t * t)
        # rotation by the half angle, sin(theta/2) computed stably from sin(theta) = t*c
        tmp = [0.0, 0.0, 0.0, 0.0]
        tmp[rotk + 1] = -(t * c) / sqrt(2 * (1 + c))
        if rotk == 1:
            tmp[rotk + 1] = -tmp[rotk + 1]
        tmp[0] = sqrt(1.0 - tmp[rotk + 1] * tmp[rotk + 1])
        _normvec(tmp)
        quat = _mulquat(quat, tmp)
        _normvec(quat)
    for j in range(3):
        j1 = j % 2
        if eigval[j1] + sort_rtol * scale < eigval[j1 + 1]:
            eigval[j1], eigval[j1 + 1] = eigval[j1 + 1], eigval[j1]
            tmp = [0.707106781186548, 0.0, 0.0, 0.0]
            tmp[(j1 + 2) % 3 + 1] = tmp[0]
            quat = _mulquat(quat, tmp)
            _normvec(quat)
    return np.array(eigval), np.array(quat)


def full_to_mat(full: np.ndarray) -> np.ndarray:
    """(Ixx, Iyy, Izz, Ixy, Ixz, Iyz) -> symmetric (3, 3)."""
    xx, yy, zz, xy, xz, yz = np.asarray(full, float)
    return np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])


def principal_inertia(full: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Principal moments and frame quaternion of a full inertia (mjuu_fullInertia); None when the smallest
    eigenvalue is below mjEPS ("inertia must have positive eigenvalues")."""
    eigval, quat = eig3(full_to_mat(full))
    if not eigval[2] >= EPS:
        return None
    return eigval, quat


def global_inertia(inertia: np.ndarray, quat: np.ndarray) -> np.ndarray:
    """Diagonal inertia in frame `quat` -> full inertia (6,) in the parent frame (mjuu_globalinertia's arithmetic:
    the principal frame of a sum of such terms depends on its last bits)."""
    m = _quat2mat([float(x) for x in quat])
    li = [float(x) for x in inertia]
    t = [m[0] * li[0], m[3] * li[0], m[6] * li[0], m[1] * li[1], m[4] * li[1], m[7] * li[1],
         m[2] * li[2], m[5] * li[2], m[8] * li[2]]  # fmt: skip
    return np.array([
        m[0] * t[0] + m[1] * t[3] + m[2] * t[6], m[3] * t[1] + m[4] * t[4] + m[5] * t[7],
        m[6] * t[2] + m[7] * t[5] + m[8] * t[8], m[0] * t[1] + m[1] * t[4] + m[2] * t[7],
        m[0] * t[2] + m[1] * t[5] + m[2] * t[8], m[3] * t[2] + m[4] * t[5] + m[5] * t[8],
    ])  # fmt: skip


def offcenter_inertia(mass: float, d: np.ndarray) -> np.ndarray:
    """Parallel-axis term (6,) of a point mass at offset d (mjuu_offcenter)."""
    x, y, z = (float(v) for v in d)
    return np.array([mass * (y * y + z * z), mass * (x * x + z * z), mass * (x * x + y * y), -mass * x * y,
                     -mass * x * z, -mass * y * z])  # fmt: skip


# ----------------------------------------------------------------------------------------------------------
# geom volume and inertia (primitive shapes; meshes come from mesh.py)


def geom_volume(gtype: int, size: np.ndarray, shell: bool) -> float:
    """Volume (or surface area when `shell`) of a primitive geom (MuJoCo's size conventions)."""
    s = size
    if gtype == 2:  # sphere
        r = s[0]
        return 4 * math.pi * r * r if shell else 4 * math.pi * r**3 / 3
    if gtype == 3:  # capsule
        r, h = s[0], 2 * s[1]
        return 4 * math.pi * r * r + 2 * math.pi * r * h if shell else math.pi * (r * r * h + 4 * r**3 / 3)
    if gtype == 5:  # cylinder
        r, h = s[0], 2 * s[1]
        return 2 * math.pi * r * r + 2 * math.pi * r * h if shell else math.pi * r * r * h
    if gtype == 4:  # ellipsoid
        if shell:  # Thomsen's approximation of the surface area
            p = 1.6075
            t = (s[0] * s[1]) ** p + (s[1] * s[2]) ** p + (s[2] * s[0]) ** p
            return 4 * math.pi * (t / 3) ** (1 / p)
        return 4 * math.pi * s[0] * s[1] * s[2] / 3
    if gtype in (1, 6):  # hfield, box
        if shell:
            return 8 * (s[0] * s[1] + s[1] * s[2] + s[2] * s[0])
        return 8 * s[0] * s[1] * s[2]
    return 0.0


def geom_inertia(gtype: int, size: np.ndarray, mass: float, shell: bool) -> np.ndarray:
    """Diagonal inertia (3,) about the geom centre, in the geom frame, of a primitive of the given mass."""
    s = size
    if gtype == 2:  # sphere
        return np.full(3, (2 / 3 if shell else 2 / 5) * mass * s[0] * s[0])
    if gtype == 3:  # capsule
        r, hh = s[0], s[1]
        h = 2 * hh
        if not shell:
            ms = mass * 4 * r / (4 * r + 3 * h)
            mc = mass - ms
            ixy = mc * (3 * r * r + h * h) / 12 + 2 * ms * r * r / 5 + ms * h * (3 * r + 2 * h) / 8
            iz = mc * r * r / 2 + 2 * ms * r * r / 5
            return np.array([ixy, ixy, iz])
        a_s, a_c = 4 * math.pi * r * r, 2 * math.pi * r * h
        ms = mass * a_s / (a_s + a_c)
        mc = mass - ms
        com, pos = r / 2, hh + r / 2
        ixy = mc * (6 * r * r + h * h) / 12 + 2 * ms * r * r / 3 + ms * (pos * pos - com * com)
        iz = mc * r * r + 2 * ms * r * r / 3
        return np.array([ixy, ixy, iz])
    if gtype == 5:  # cylinder
        r, hh = s[0], s[1]
        h = 2 * hh
        if not shell:
            ixy = mass * (3 * r * r + h * h) / 12
            return np.array([ixy, ixy, mass * r * r / 2])
        a_d, a_c = math.pi * r * r, 2 * math.pi * r * h
        md = mass * a_d / (2 * a_d + a_c)
        mc = mass - 2 * md
        ixy = mc * (6 * r * r + h * h) / 12 + 2 * (md * r * r / 4 + md * hh * hh)
        iz = mc * r * r + 2 * md * r * r / 2
        return np.array([ixy, ixy, iz])
    if gtype == 4:  # ellipsoid
        a2, b2, c2 = s[0] ** 2, s[1] ** 2, s[2] ** 2
        if not shell:
            return mass * np.array([b2 + c2, a2 + c2, a2 + b2]) / 5
        eps = 1e-6
        va = 4 * math.pi * s[0] * s[1] * s[2] / 3
        ae, be, ce = s[0] + eps, s[1] + eps, s[2] + eps
        vb = 4 * math.pi * ae * be * ce / 3
        rho = mass / (vb - va)
        ia = va * rho * np.array([b2 + c2, a2 + c2, a2 + b2]) / 5
        ib = vb * rho * np.array([be * be + ce * ce, ae * ae + ce * ce, ae * ae + be * be]) / 5
        return ib - ia
    if gtype in (1, 6):  # hfield, box
        a2, b2, c2 = s[0] ** 2, s[1] ** 2, s[2] ** 2
        if not shell:
            return mass * np.array([b2 + c2, a2 + c2, a2 + b2]) / 3
        lx, ly, lz = 2 * s[0], 2 * s[1], 2 * s[2]
        a0, a1, a2_ = lx * ly, ly * lz, lz * lx
        tot = 2 * (a0 + a1 + a2_)
        m0, m1, m2 = mass * a0 / tot, mass * a1 / tot, mass * a2_ / tot
        ix = m0 * ly * ly / 12 + m1 * (ly * ly + lz * lz) / 12 + m2 * lz * lz / 12
        iy = m0 * lx * lx / 12 + m1 * lz * lz / 12 + m2 * (lx * lx + lz * lz) / 12
        iz = m0 * (lx * lx + ly * ly) / 12 + m1 * ly * ly / 12 + m2 * lx * lx / 12
        return 2 * np.array([m0 * c2 + m2 * b2 + ix, m0 * c2 + m1 * a2 + iy, m1 * a2 + m2 * b2 + iz])
    return np.zeros(3)


def box_inertia(boxsz: np.ndarray, mass: float) -> np.ndarray:
    """Inertia of a mesh from its equivalent inertia box half-sizes (MuJoCo's mesh geom convention)."""
    b = np.asarray(boxsz, float)
    return mass * np.array([b[1] ** 2 + b[2] ** 2, b[0] ** 2 + b[2] ** 2, b[0] ** 2 + b[1] ** 2]) / 3


def combine_inertia(masses, poss, quats, inertias):
    """Total mass, centre of mass and principal frame of rigidly attached parts.

    Returns (mass, com (3,), quat (4,), inertia (3,)); None for the frame when the full inertia has a
    negative eigenvalue.
    """
    mass = 0.0
    acc = [0.0, 0.0, 0.0]
    for m, p in zip(masses, poss):  # MuJoCo's order of operations (InertiaFromGeom)
        m = float(m)
        mass += m
        for k in range(3):
            acc[k] += m * float(p[k])
    com = np.array([a / mass for a in acc])
    full = [0.0] * 6
    for m, p, q, i in zip(masses, poss, quats, inertias):
        i0 = global_inertia(i, q)
        i1 = offcenter_inertia(float(m), [float(p[k]) - com[k] for k in range(3)])
        full = [full[j] + i0[j] + i1[j] for j in range(6)]
    res = principal_inertia(np.array(full))
    return mass, com, res


# ----------------------------------------------------------------------------------------------------------
# fluid model: added-mass coefficients of the equivalent ellipsoid

_KRONROD_W = (0.01146766, 0.03154605, 0.05239501, 0.07032663, 0.08450236, 0.09517529, 0.10221647, 0.10474107,
              0.10221647, 0.09517529, 0.08450236, 0.07032663, 0.05239501, 0.03154605, 0.01146766)  # fmt: skip


def _kronrod_nodes():
    """K15 nodes (8 digits, as MuJoCo tabulates them) mapped to [0, inf) by l = x^3 / (1 - x)^2, and dl/dx."""
    xs = np.array([0.00427231, 0.02544604, 0.06756779, 0.12923441, 0.20695638, 0.29707742, 0.39610752, 0.5,
                   0.60389248, 0.70292258, 0.79304362, 0.87076559, 0.93243221, 0.97455396, 0.99572769])  # fmt: skip
    lam = xs**3 / (1 - xs) ** 2
    dl = (3 * xs**2 * (1 - xs) + 2 * xs**3) / (1 - xs) ** 3
    return lam, dl


_KL, _KD = _kronrod_nodes()


def _added_mass_kappa(dx: float, dy: float, dz: float) -> float:
    """Integral of dx dy dz / sqrt((dx^2+l)^3 (dy^2+l) (dz^2+l)) over l in [0, inf), by 15-point quadrature."""
    ix, iy, iz = 1.0 / (dx * dx), 1.0 / (dy * dy), 1.0 / (dz * dz)
    scale = (dx**3 * dy * dz) ** 0.4
    lam = scale * _KL
    denom = (1 + lam * ix) * np.sqrt((1 + lam * ix) * (1 + lam * iy) * (1 + lam * iz))
    kappa = float(np.sum(scale * _KD / denom * np.asarray(_KRONROD_W)))
    return kappa * ix


def fluid_coefs(gtype: int, size: np.ndarray, interaction: float, coefs: np.ndarray) -> np.ndarray:
    """geom_fluid (12,): [interaction, 5 coefficients, virtual mass (3), virtual inertia (3)]."""
    s = size
    if gtype == 2:
        dx = dy = dz = s[0]
    elif gtype == 3:
        dx, dy, dz = s[0], s[0], s[1] + s[0]
    elif gtype == 5:
        dx, dy, dz = s[0], s[0], s[1]
    else:
        dx, dy, dz = s[0], s[1], s[2]
    vol = 4.0 / 3.0 * math.pi * dx * dy * dz
    kx = _added_mass_kappa(dx, dy, dz)
    ky = _added_mass_kappa(dy, dz, dx)
    kz = _added_mass_kappa(dz, dx, dy)

    def fac(a, b, ka, kb):
        return (a * a - b * b) ** 2 * abs(kb - ka) / max(EPS, abs(2 * (a * a - b * b) + (a * a + b * b) * (ka - kb)))

    vm = [vol * k / max(EPS, 2 - k) for k in (kx, ky, kz)]
    vi = [vol * fac(dy, dz, ky, kz) / 5, vol * fac(dz, dx, kz, kx) / 5, vol * fac(dx, dy, kx, ky) / 5]
    return np.array([interaction, *np.asarray(coefs, float)[:5], *vm, *vi])


# ----------------------------------------------------------------------------------------------------------
# joint-space inertia at qpos0 (MuJoCo's LDL factorisation, dense here)


def factor_ld(mfull: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """MuJoCo's factorisation M = L' D L (unit lower L, eliminated from the last dof up: no fill-in on a tree);
    pivots below mjMINVAL are clamped to mjMINVAL as mj_factorM does for (near-)singular inertia.
    Returns (L (nv, nv), 1/D (nv,))."""
    n = len(mfull)
    a = mfull.copy()
    lmat = np.eye(n)
    dinv = np.zeros(n)
    for k in range(n - 1, -1, -1):
        dk = max(a[k, k], MINVAL)
        dinv[k] = 1.0 / dk
        row = a[k, :k] / dk
        nz = np.nonzero(row)[0]  # tree sparsity: only ancestors' entries change
        a[np.ix_(nz, nz)] -= np.outer(row[nz], a[k, nz])
        lmat[k, :k] = row
    return lmat, dinv


def solve_ld(lmat: np.ndarray, dinv: np.ndarray, x: np.ndarray) -> np.ndarray:
    """M^-1 x from the factors, in mj_solveLD's order (inv(L'), inv(D), inv(L)); x (nv,) or (nv, k)."""
    x = np.array(x, float)
    n = len(dinv)
    for i in range(n - 1, 0, -1):
        nz = np.nonzero(lmat[i, :i])[0]  # tree sparsity (large scenes)
        x[nz] -= np.multiply.outer(lmat[i, nz], x[i])
    x *= dinv.reshape((n,) + (1,) * (x.ndim - 1))
    for i in range(1, n):
        nz = np.nonzero(lmat[i, :i])[0]
        x[i] -= lmat[i, nz] @ x[nz]
    return x
