"""The position-dependent tree pass as one fused kernel: kinematics, com_pos, crb and factor_m (mj_kinematics,
mj_camlight, mj_comPos, mj_crb, mj_factorM) for a block of environments.

Outputs (per environment, Data's fields): xpos, xquat, xmat, xipos, ximat, xanchor, xaxis, geom_xpos, geom_xmat,
site_xpos, site_xmat, cam_xpos, cam_xmat, subtree_com, cinert, cdof, and, unless a tendon has armature (its
J' a J term needs ten_J, computed by the tendon stage between com_pos and crb), crb and qM, and then (with
`Config.mass_factorization="tree"`, kernels/factor.py) qLD, qLDiagInv and whether a pivot was clamped.
Inputs: qpos, mocap_pos, mocap_quat (per environment) and the Model's floats the stages read (body_pos, body_quat,
jnt_axis, masses, inertias, geom/site/camera offsets, armature...), shared by the block unless vmapped.

Inside the kernel every value of one environment is a lane vector (BLOCK,) (a scalar for a shared Model float).
The Model's static tables (parent ids, joint types and addresses, sameframe codes, dof kinds, qM's tree entries)
are int32 kernel inputs and the pass is a sequence of loops over them, in MuJoCo's order: bodies (parents before
children; each body's joints in an inner loop, the joint type chosen by a switch that is uniform across the
block, so no lane diverges), inertial frames, geoms, sites, subtree sums from the last body to the first, cameras,
cinert, cdof, crb, and qM's tree entries. Values that later iterations need (a parent's pose, the subtree sums,
crb) live in the kernel's own output block, written and read back by the same thread (scratch outputs "_sub"
and "_buf" hold the subtree masses and crb(body) cdof products). The formulas are those of kinematics.py and
inertia.py written per lane (elementwise quaternion algebra), so the fields equal the XLA stages' to round-off.

Why loops and not a Python-unrolled pass: unrolled, the bundled humanoid's pass (13 bodies, 24 dofs) traced to
~13k scalar operations (the kernel, and its compile time, grow with the number of bodies, geoms and qM entries:
a 220-body scene would not compile in reasonable time), while the looped kernel's code is the same size for
every model; the XLA:CPU compile of its interpreted form went from out of memory (> 5 GB, unrolled) to ~0.7 GB.
The loops' runtime cost is the table loads (the same address for every lane: one broadcast load) and the reads
of earlier results from the output block (a parent's pose written a few iterations before: L1 or L2; the
humanoid's block is ~2k floats per environment, ~1 MiB for 128 lanes in float32).

One kernel or several: the looped pass keeps only one body's pose and a few rows in registers, far below the
255 32-bit registers a thread may hold on an H200, so nothing pushes for a split; splitting it (e.g. at crb)
would add launches and a round trip of the fields through HBM. The block size (`launch.BLOCK`, 128 lanes, one
per thread of 4 warps) and the layout are the knobs to measure on the GPU.

The factorisation (kernels/factor.py) closes the pass: qM's tree entries are copied into qLD's positions (the
XLA factorisation's elimination order, `inertia._factor_layout`) and eliminated there in place.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.data import count_warning
from mjx_lite.pipeline import inertia, kinematics, support, transmission
from mjx_lite.pipeline.kernels import factor, launch
from mjx_lite.pipeline.kernels.launch import loop as _loop
from mjx_lite.pipeline.kernels.launch import where
from mjx_lite.types import MINVAL, Data, JointType, Model, TrnType, Warning, qm_shape

__all__ = ["MODEL_INPUTS", "TRANSMISSION_OUTPUTS", "crb_fused", "kernel", "transmission_fused", "tree"]

# Model floats the pass may read (only those a model needs are passed)
MODEL_INPUTS = ("body_pos", "body_quat", "body_ipos", "body_iquat", "body_mass", "body_inertia", "jnt_axis",
                "jnt_pos", "qpos0", "geom_pos", "geom_quat", "site_pos", "site_quat", "cam_pos", "cam_quat",
                "cam_mat0", "cam_pos0", "cam_poscom0", "dof_armature", "actuator_gear",
                "actuator_armature")  # fmt: skip
DATA_INPUTS = ("qpos", "mocap_pos", "mocap_quat")
KINEMATICS_OUTPUTS = ("xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos", "geom_xmat",
                      "site_xpos", "site_xmat", "cam_xpos", "cam_xmat")  # fmt: skip
COM_OUTPUTS = ("subtree_com", "cinert", "cdof")
CRB_OUTPUTS = ("crb", "qM")
FACTOR_OUTPUTS = ("qLD", "qLDiagInv", "factor_clamped")
TRANSMISSION_OUTPUTS = ("actuator_length", "actuator_moment")


def transmission_fused(m: Model) -> bool:
    """Static: the pass computes mj_transmission too: every actuator (one output each) drives a slide or hinge
    joint (joint or jointinparent transmission: length gear[0] qpos, moment gear[0] at the joint's dof), which
    needs qpos alone. Other transmissions (ball and free joints, tendons, sites, slider-cranks, bodies, so3) stay
    the XLA stage's."""
    if not m.nactuator or m.nout != m.nactuator or not m.njnt:
        return False
    trntype, trnid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid)
    if not np.all(np.isin(trntype, (TrnType.JOINT, TrnType.JOINTINPARENT))):
        return False
    return bool(np.all(np.isin(np.asarray(m.jnt_type)[trnid[:, 0]], (JointType.SLIDE, JointType.HINGE))))


def crb_fused(m: Model) -> bool:
    """Static: crb is part of the kernel (no tendon armature, whose term needs ten_J from the tendon stage)."""
    armed = np.asarray(m.tendon_armed) if m.tendon_armed is not None else np.zeros(0, bool)
    return not np.any(armed)


# ---- lane algebra: tuples of lane values (arrays (BLOCK,), scalars or Python floats) ---------------------------


def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def _qmul(a, b):
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return (aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw)  # fmt: skip


def _rotate(v, q):
    """v rotated by the unit quaternion q (math.rotate)."""
    u, w = q[1:], q[0]
    t = tuple(2.0 * c for c in _cross(u, v))
    ut = _cross(u, t)
    return tuple(v[i] + w * t[i] + ut[i] for i in range(3))


def _qmat(q):
    """Row-major 3x3 rotation matrix (9-tuple) of a unit quaternion (math.quat_to_mat)."""
    w, x, y, z = q
    ww, xx, yy, zz = w * w, x * x, y * y, z * z
    wx, wy, wz, xy, xz, yz = w * x, w * y, w * z, x * y, x * z, y * z
    return (ww + xx - yy - zz, 2 * (xy - wz), 2 * (xz + wy),
            2 * (xy + wz), ww - xx + yy - zz, 2 * (yz - wx),
            2 * (xz - wy), 2 * (yz + wx), ww - xx - yy + zz)  # fmt: skip


def _norm(v):
    sq = v[0] * v[0]
    for c in v[1:]:
        sq = sq + c * c
    zero = sq <= 0.0
    return where(zero, 0.0, jp.sqrt(where(zero, 1.0, sq)))  # math.safe_norm


def _qnormalize(q):
    """Unit quaternion, the identity where |q| < 1e-15 (math.quat_normalize)."""
    n = _norm(q)
    small = n < 1e-15
    inv = 1.0 / where(small, 1.0, n)
    return tuple(where(small, 1.0 if i == 0 else 0.0, q[i] * inv) for i in range(4))


def _normalize(v):
    """(v / |v|), v itself where |v| <= 1e-15 (math.safe_normalize)."""
    n = _norm(v)
    d = where(n <= 1e-15, 1.0, n)
    return tuple(c / d for c in v)


def _compose(a, b):
    """Pose a o b of poses (pos 3-tuple, quat 4-tuple)."""
    rb = _rotate(b[0], a[1])
    return tuple(a[0][i] + rb[i] for i in range(3)), _qmul(a[1], b[1])


def _mat_vec(mat, v):
    return tuple(mat[3 * i] * v[0] + mat[3 * i + 1] * v[1] + mat[3 * i + 2] * v[2] for i in range(3))


_WORLD = ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
_EYE = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)


# ---- the kernel body -------------------------------------------------------------------------------------------




def _plan(m: Model) -> dict:
    """The kernel's static tables (int32 numpy, nonempty ones only) and flags."""
    t = support.tables(m)
    jtype = np.asarray(m.jnt_type)
    jntadr, jntnum = np.asarray(m.body_jntadr), np.asarray(m.body_jntnum)
    for b in range(m.nbody):
        types = jtype[jntadr[b] : jntadr[b] + jntnum[b]] if jntnum[b] else ()
        if len(types) > 1 and np.any(np.asarray(types) == JointType.FREE):
            raise ValueError(f"body {b}: a free joint must be the only joint of its body")
    if np.any(np.isin(np.asarray(m.body_sameframe), (2, 4))):
        raise ValueError("body_sameframe 2 or 4 (inertial frame) is not a body frame")
    # actuators with a joint transmission add gear^2 armature to each dof of their joint (as
    # inertia._joint_actuator_armature)
    sel, jdof = inertia.joint_armature_dofs(m)
    sparse = inertia.is_sparse(m)
    rows, cols = t.m_rows, t.m_cols  # qM's tree entries (i, j ancestor-or-self of i), in tree (madr) order
    nv = m.nv
    tab = dict(
        body_parentid=m.body_parentid, body_rootid=m.body_rootid, body_mocapid=m.body_mocapid,
        body_jntadr=jntadr, body_jntnum=jntnum, body_sameframe=m.body_sameframe, jnt_type=jtype,
        jnt_qposadr=m.jnt_qposadr, geom_bodyid=m.geom_bodyid, geom_sameframe=m.geom_sameframe,
        site_bodyid=m.site_bodyid, site_sameframe=m.site_sameframe, cam_bodyid=m.cam_bodyid, cam_mode=m.cam_mode,
        cam_targetbodyid=m.cam_targetbodyid, dof_bodyid=m.dof_bodyid, dof_jntid=m.dof_jntid, dof_kind=t.dof_kind,
        dof_axis=t.dof_axis, qm_row=rows, qm_col=cols,
        qm_addr=np.arange(rows.size) if sparse else rows * nv + cols, qm_addr_t=cols * nv + rows,
        arm_act=sel, arm_addr=t.madr[jdof] if sparse else jdof * (nv + 1),
        arm_out=np.asarray(m.actuator_outadr)[sel],  # the actuator's gear row (its force output)
    )  # fmt: skip
    trn = transmission_fused(m)
    if trn:  # each actuator's joint: its qpos and dof addresses
        jid = np.asarray(m.actuator_trnid)[:, 0]
        tab.update(trn_qadr=np.asarray(m.jnt_qposadr)[jid], trn_dadr=np.asarray(m.jnt_dofadr)[jid])
    tab = {n: np.asarray(v, np.int32) for n, v in tab.items() if np.asarray(v).size}
    fac = crb_fused(m) and factor.fusable(m)
    if fac:
        tab.update(factor.plan(m))
    return dict(tables=tab, sparse=sparse, crb=crb_fused(m), factor=fac, trn=trn)


def _body(m: Model, p: dict):
    """body(io): the whole pass for one block (see the module docstring)."""
    nbody, nv, njnt = m.nbody, m.nv, m.njnt
    sf_any = {o: set(np.asarray(getattr(m, f"{o}_sameframe")).tolist()) for o in ("body", "geom", "site")}
    cam_modes = set(np.asarray(m.cam_mode).tolist())
    cam_aim = bool(np.any(np.isin(np.asarray(m.cam_mode), (3, 4)) & (np.asarray(m.cam_targetbodyid) >= 0)))

    def body(io):
        w = jp.where
        tab = io.table

        vec, out, put = io.read_vec, io.load_vec, io.write_vec

        def lanes(v):
            return tuple(io.lanes(c) for c in v)

        def sel(cond, a, b):
            return tuple(w(cond, x, y) for x, y in zip(a, b))

        if p["trn"]:  # mj_transmission of slide/hinge joint actuators: length gear[0] qpos, moment row gear[0] e_dof
            _loop(0, m.nactuator * nv, lambda k: io.write("actuator_moment", k, 0.0))

            def trn(a):
                g = io.read("actuator_gear", 6 * a)
                io.write("actuator_length", a, io.read("qpos", tab("trn_qadr", a)) * g)
                io.write("actuator_moment", a * nv + tab("trn_dadr", a), g)

            _loop(0, m.nactuator, trn)

        # ---- kinematics: body frames, joint anchors and axes (kinematics._body_frames), parents before children
        put("xpos", 0, _WORLD[0])
        put("xquat", 0, _WORLD[1])
        put("xmat", 0, _EYE)

        def joint(j, pose):
            """The pose after joint j (pose: the frame before it, in the world); writes xanchor/xaxis[j]."""
            jt, a = tab("jnt_type", j), tab("jnt_qposadr", j)
            ra, rp = _rotate(vec("jnt_axis", j, 3), pose[1]), _rotate(vec("jnt_pos", j, 3), pose[1])
            anchor, axis = tuple(pose[0][i] + rp[i] for i in range(3)), ra

            def free():
                return lanes(tuple(io.read("qpos", a + k) for k in range(7)))

            def ball():
                q = _qnormalize(tuple(io.read("qpos", a + k) for k in range(4)))
                jpos = vec("jnt_pos", j, 3)
                rj = _rotate(jpos, q)
                g = _compose(pose, (tuple(jpos[i] - rj[i] for i in range(3)), q))
                return lanes(g[0] + g[1])

            def slide():
                dq = io.read("qpos", a) - io.read("qpos0", a)
                rb = _rotate(tuple(c * dq for c in vec("jnt_axis", j, 3)), pose[1])
                return lanes(tuple(pose[0][i] + rb[i] for i in range(3)) + pose[1])

            def hinge():
                half = 0.5 * (io.read("qpos", a) - io.read("qpos0", a))
                s, ax, jpos = jp.sin(half), vec("jnt_axis", j, 3), vec("jnt_pos", j, 3)
                q = (jp.cos(half), ax[0] * s, ax[1] * s, ax[2] * s)
                rj = _rotate(jpos, q)
                g = _compose(pose, (tuple(jpos[i] - rj[i] for i in range(3)), q))
                return lanes(g[0] + g[1])

            g = jax.lax.switch(jt, [free, ball, slide, hinge])  # JointType order
            is_free = jt == JointType.FREE
            put("xanchor", j, sel(is_free, g[:3], anchor))
            put("xaxis", j, sel(is_free, (0.0, 0.0, 1.0), axis))
            return g[:3], g[3:]

        def frame(b):
            par = tab("body_parentid", b)
            lpos, lquat = vec("body_pos", b, 3), vec("body_quat", b, 4)
            if m.nmocap:
                mid = tab("body_mocapid", b)
                mi, mocap = jp.maximum(mid, 0), mid >= 0
                lpos, lquat = sel(mocap, vec("mocap_pos", mi, 3), lpos), sel(mocap, vec("mocap_quat", mi, 4), lquat)
            pose = _compose((out("xpos", par, 3), out("xquat", par, 4)), (lpos, _qnormalize(lquat)))
            pose = lanes(pose[0]), lanes(pose[1])
            if njnt:
                ja, jn = tab("body_jntadr", b), tab("body_jntnum", b)
                pose = jax.lax.fori_loop(ja, ja + jn, joint, pose)
            quat = _qnormalize(pose[1])
            put("xpos", b, pose[0])
            put("xquat", b, quat)
            put("xmat", b, _qmat(quat))

        _loop(1, nbody, frame)

        # ---- inertial frames, geoms, sites (kinematics._local_to_global)
        def local_to_global(b, pos, quat, sf, sfs, inertial):
            xpos, xmat = out("xpos", b, 3), out("xmat", b, 9)
            mb = _mat_vec(xmat, pos)
            gpos = tuple(xpos[i] + mb[i] for i in range(3))
            gmat = _qmat(_qmul(out("xquat", b, 4), quat))
            if 1 in sfs:
                gpos = sel(sf == 1, xpos, gpos)
            if sfs & {1, 3}:
                gmat = sel((sf == 1) | (sf == 3), xmat, gmat)
            if inertial and 2 in sfs:
                gpos = sel(sf == 2, out("xipos", b, 3), gpos)
            if inertial and sfs & {2, 4}:
                gmat = sel((sf == 2) | (sf == 4), out("ximat", b, 9), gmat)
            return gpos, gmat

        put("xipos", 0, (0.0, 0.0, 0.0))
        put("ximat", 0, _EYE)

        def inertial_frame(b):
            sf = tab("body_sameframe", b)
            gpos, gmat = local_to_global(b, vec("body_ipos", b, 3), vec("body_iquat", b, 4), sf, sf_any["body"], False)
            put("xipos", b, gpos)
            put("ximat", b, gmat)

        _loop(1, nbody, inertial_frame)
        for obj, n in (("geom", m.ngeom), ("site", m.nsite)):

            def place(g, obj=obj):
                b, sf = tab(f"{obj}_bodyid", g), tab(f"{obj}_sameframe", g)
                gpos, gmat = local_to_global(b, vec(f"{obj}_pos", g, 3), vec(f"{obj}_quat", g, 4), sf, sf_any[obj],
                                             True)  # fmt: skip
                put(f"{obj}_xpos", g, gpos)
                put(f"{obj}_xmat", g, gmat)

            _loop(0, n, place)

        # ---- subtree centres of mass (kinematics._subtree_com): leaf-to-root sums, the world included; scratch
        # "_sub" (nbody, 4) holds each subtree's (mass, sum of mass * xipos)
        def sub_init(b):
            mb = io.read("body_mass", b)
            put("_sub", b, (mb,) + tuple(c * mb for c in out("xipos", b, 3)))

        def sub_push(k):
            b = nbody - 1 - k
            par = tab("body_parentid", b)
            acc, add = out("_sub", par, 4), out("_sub", b, 4)
            put("_sub", par, tuple(acc[i] + add[i] for i in range(4)))

        def sub_com(b):
            s = out("_sub", b, 4)
            small = s[0] < MINVAL
            den = w(small, 1.0, s[0])
            put("subtree_com", b, sel(small, out("xipos", b, 3), tuple(c / den for c in s[1:])))

        _loop(0, nbody, sub_init)
        _loop(0, nbody - 1, sub_push)
        _loop(0, nbody, sub_com)

        # ---- cameras (kinematics._cameras)
        def camera(c):
            b, mode = tab("cam_bodyid", c), tab("cam_mode", c)
            pos, mat = local_to_global(b, vec("cam_pos", c, 3), vec("cam_quat", c, 4), 0, set(), False)
            if cam_modes & {1, 2}:  # track, trackcom
                track = (mode == 1) | (mode == 2)
                base = sel(mode == 1, out("xpos", b, 3), out("subtree_com", b, 3))
                off = sel(mode == 1, vec("cam_pos0", c, 3), vec("cam_poscom0", c, 3))
                pos = sel(track, tuple(base[i] + off[i] for i in range(3)), pos)
                mat = sel(track, vec("cam_mat0", c, 9), mat)
            if cam_aim:  # targetbody, targetbodycom
                tgt = tab("cam_targetbodyid", c)
                aim = ((mode == 3) | (mode == 4)) & (tgt >= 0)
                t = jp.maximum(tgt, 0)
                look = sel(mode == 3, out("xpos", t, 3), out("subtree_com", t, 3))
                z = _normalize(tuple(pos[i] - look[i] for i in range(3)))
                x = _normalize(_cross((0.0, 0.0, 1.0), z))
                y = _normalize(_cross(z, x))
                mat = sel(aim, (x[0], y[0], z[0], x[1], y[1], z[1], x[2], y[2], z[2]), mat)
            put("cam_xpos", c, pos)
            put("cam_xmat", c, mat)

        _loop(0, m.ncam, camera)

        # ---- com_pos: cinert (kinematics._inert_com), cdof
        put("cinert", 0, (0.0,) * 10)

        def cinert(b):
            r, inert, mb = out("ximat", b, 9), vec("body_inertia", b, 3), io.read("body_mass", b)
            xi, root = out("xipos", b, 3), out("subtree_com", tab("body_rootid", b), 3)
            off = tuple(xi[i] - root[i] for i in range(3))
            dd = off[0] * off[0] + off[1] * off[1] + off[2] * off[2]

            def full(i, k):
                rot = r[3 * i] * inert[0] * r[3 * k] + r[3 * i + 1] * inert[1] * r[3 * k + 1]
                rot = rot + r[3 * i + 2] * inert[2] * r[3 * k + 2]
                return rot + mb * ((dd if i == k else 0.0) - off[i] * off[k])

            put("cinert", b, (full(0, 0), full(1, 1), full(2, 2), full(0, 1), full(0, 2), full(1, 2),
                              mb * off[0], mb * off[1], mb * off[2], mb))  # fmt: skip

        _loop(1, nbody, cinert)

        def cdof(i):
            b, j, kind, ax = tab("dof_bodyid", i), tab("dof_jntid", i), tab("dof_kind", i), tab("dof_axis", i)
            xmat = out("xmat", b, 9)
            col = tuple(w(ax == 0, xmat[3 * r], w(ax == 1, xmat[3 * r + 1], xmat[3 * r + 2])) for r in range(3))
            unit = tuple(w(ax == k, io.lanes(1.0), io.lanes(0.0)) for k in range(3))
            axis = sel(kind <= 1, out("xaxis", j, 3), sel(kind == 2, col, unit))
            root, anchor = out("subtree_com", tab("body_rootid", b), 3), out("xanchor", j, 3)
            off = tuple(root[k] - anchor[k] for k in range(3))
            rotational = (kind == 0) | (kind == 2)
            put("cdof", i, sel(rotational, axis, (0.0, 0.0, 0.0)) + sel(rotational, _cross(axis, off), axis))

        _loop(0, nv, cdof)
        if not p["crb"]:
            return

        # ---- crb: composite inertias (leaves up, not into the world) and qM (inertia.crb); scratch "_buf" (nv, 6)
        # holds crb(body(i)) cdof[i]
        _loop(0, nbody, lambda b: put("crb", b, out("cinert", b, 10)))

        def crb_push(k):
            b = nbody - 1 - k
            par = tab("body_parentid", b)
            acc, add = out("crb", par, 10), out("crb", b, 10)
            put("crb", par, tuple(acc[i] + w(par != 0, add[i], 0.0) for i in range(10)))

        _loop(0, nbody - 1, crb_push)

        def buf(i):
            c, v = out("crb", tab("dof_bodyid", i), 10), out("cdof", i, 6)
            wv, lin, mc, mi = v[:3], v[3:], c[6:9], c[9]
            iw = (c[0] * wv[0] + c[3] * wv[1] + c[4] * wv[2], c[3] * wv[0] + c[1] * wv[1] + c[5] * wv[2],
                  c[4] * wv[0] + c[5] * wv[1] + c[2] * wv[2])  # fmt: skip
            t1, t2 = _cross(mc, lin), _cross(mc, wv)
            put("_buf", i, tuple(iw[k] + t1[k] for k in range(3)) + tuple(mi * lin[k] - t2[k] for k in range(3)))

        _loop(0, nv, buf)
        if not p["sparse"]:
            _loop(0, nv * nv, lambda k: io.write("qM", k, 0.0))
        nm = support.tables(m).m_rows.size

        def entry(k):
            i, j = tab("qm_row", k), tab("qm_col", k)
            bi, cj = out("_buf", i, 6), out("cdof", j, 6)
            v = bi[0] * cj[0] + bi[1] * cj[1] + bi[2] * cj[2] + bi[3] * cj[3] + bi[4] * cj[4] + bi[5] * cj[5]
            v = v + w(i == j, io.read("dof_armature", i), 0.0)
            io.write("qM", tab("qm_addr", k), v)
            if not p["sparse"]:
                io.write("qM", tab("qm_addr_t", k), v)

        _loop(0, nm, entry)

        def armature(k):
            a, addr = tab("arm_act", k), tab("arm_addr", k)
            gear = io.read("actuator_gear", 6 * tab("arm_out", k))
            io.write("qM", addr, io.load("qM", addr) + gear * gear * io.read("actuator_armature", a))

        _loop(0, p["tables"].get("arm_act", np.zeros(0)).size, armature)
        if not p["factor"]:
            return

        # ---- factor_m (kernels/factor.py): qM's tree entries into qLD's positions, eliminated in place
        _loop(0, nm, lambda k: io.write("qLD", tab("f_entry", k), io.load("qM", tab("qm_addr", k))))
        io.write("factor_clamped", 0, factor.factor_into(io, m, "qLD", "qLDiagInv"))

    return body


# ---- the stage ----------------------------------------------------------------------------------------------


def _inputs(m: Model, d: Data, p: dict) -> dict:
    """The arrays the kernel reads (empty ones and unused Model fields left out)."""
    names = list(MODEL_INPUTS)
    if "arm_act" not in p["tables"]:
        names = [n for n in names if n not in ("actuator_armature",) + (() if p["trn"] else ("actuator_gear",))]
    if not p["crb"]:
        names = [n for n in names if n not in ("dof_armature", "actuator_armature") + (() if p["trn"] else
                                                                                      ("actuator_gear",))]  # fmt: skip
    x = {n: getattr(m, n) for n in names}
    x.update({n: getattr(d, n) for n in DATA_INPUTS})
    return {n: v for n, v in x.items() if v.size}


def _outputs(m: Model, d: Data, p: dict) -> dict:
    """Per-environment shapes of the kernel's (non-scratch) outputs: Data's, qM's as the model lays it out."""
    names = KINEMATICS_OUTPUTS + COM_OUTPUTS + (CRB_OUTPUTS if p["crb"] else ()) + (FACTOR_OUTPUTS if p["factor"]
                                                                                   else ())  # fmt: skip
    names += TRANSMISSION_OUTPUTS if p["trn"] else ()
    special = {"qM": tuple(qm_shape(m)), "factor_clamped": (1,)}
    return {n: special[n] if n in special else tuple(getattr(d, n).shape) for n in names}


def _xla(m: Model, d: Data, p: dict, x: dict) -> dict:
    """The XLA twin: the stages themselves on Model/Data fields replaced by the inputs (those left out of the inputs,
    empty or unused, by zeros of their shape: the twin, a custom_jvp rule, reads no array of the (m, d) it closes
    over, whose tracers may belong to a finished trace when the rule is traced, see launch.call)."""

    def fields(obj, names):
        return {n: x[n] if n in x else jp.zeros(jp.shape(getattr(obj, n)), getattr(obj, n).dtype) for n in names}

    m2 = m.replace(**fields(m, MODEL_INPUTS))
    d2 = d.replace(**fields(d, DATA_INPUTS))
    d2 = kinematics.com_pos(m2, kinematics.kinematics(m2, d2))
    if p["crb"]:
        d2 = inertia.crb(m2, d2)
    if p["trn"]:
        d2 = transmission.transmission(m2, d2)
    out = {n: getattr(d2, n) for n in _outputs(m, d, p) if n not in FACTOR_OUTPUTS}
    if p["factor"]:
        qld, diag, clamped = inertia._factor(m2, d2)
        out.update(qLD=qld, qLDiagInv=1.0 / diag, factor_clamped=clamped.astype(qld.dtype)[None])
    return out


def kernel(m: Model, d: Data) -> tuple[launch.Kernel, dict]:
    """The pass as a `launch.Kernel` for (m, d) (one environment's shapes) and its inputs."""
    p = support.memo(m, "kernels_tree_plan", _plan)
    x = _inputs(m, d, p)
    outputs = dict(_outputs(m, d, p), _sub=(m.nbody, 4), **({"_buf": (m.nv, 6)} if p["crb"] else {}))
    k = launch.Kernel("tree_pass", {n: tuple(v.shape) for n, v in x.items()}, outputs, p["tables"], _body(m, p),
                      lambda x: _xla(m, d, p, x))  # fmt: skip
    return k, x


def tree(m: Model, d: Data, how: launch.Launch) -> tuple[Data, tuple]:
    """kinematics, com_pos and (without tendon armature) crb and factor_m as one fused kernel: (d with their fields,
    the names of the stages computed). A clamped pivot counts in warning_number[INERTIA] as factor_m does."""
    p = support.memo(m, "kernels_tree_plan", _plan)
    k, x = kernel(m, d)
    dtype = d.qpos.dtype
    out = launch.call(k, {n: v.astype(dtype) for n, v in x.items()}, how)
    if p["factor"]:
        clamped = out.pop("factor_clamped")[0] > 0
        wn = count_warning(d.warning_number, Warning.INERTIA, clamped)
        out["warning_number"] = wn
    out = {n: v.astype(getattr(d, n).dtype) for n, v in out.items()}
    done = ("kinematics", "com_pos") + (("crb",) if p["crb"] else ()) + (("factor_m",) if p["factor"] else ())
    done += ("transmission",) if p["trn"] else ()
    return d.replace(**out), done
