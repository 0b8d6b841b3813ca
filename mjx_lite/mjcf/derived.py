"""Compile-time constants that need kinematics at qpos0 (MuJoCo's mj_setConst), and model statistics.

`set_const(ctx)` evaluates the model at qpos0 and fills, in numpy:
  dof_M0, body_invweight0, dof_invweight0, body_subtreemass, cam_pos0/poscom0/mat0, light_pos0/poscom0/dir0,
  jnt_actuatorid, tendon_actuatorid, dof_length, the springdamper joints' stiffness and damping,
  and returns the statistics (meaninertia, meanmass, meansize, extent, center).

At qpos0 every joint sits at its reference (hinge/slide displacement 0, ball identity, free = body pose), so
the kinematics are the compiled body_pos/body_quat chain; `ConstState` evaluates them (and the com-frame dof
motions, the joint-space inertia and its inverse) in numpy float64. This is deliberate: running the JAX
pipeline eagerly costs one XLA compilation per primitive (hundreds per model, tens of seconds on a loaded
machine), far beyond a compile-time budget of well under a second; the test-suite checks this state against
`pipeline.kinematics` / `com_pos` / `crb`.

Section constants (tendon_length0/invweight0, actuator_length0/acc0, dampratio gains, springlength,
lengthrange) go through the hook `actuation.finalize_sections(ctx, state)`; `state.run(stage)` applies a JAX
pipeline stage (jitted once) to a Data holding the qpos0 kinematics, `state.minv` is M^-1 (numpy).
"""

from __future__ import annotations

import jax
import numpy as np

from mjx_lite import io, types
from mjx_lite.mjcf import actuation, flex
from mjx_lite.mjcf.context import DEFAULT_STAT, CompileContext, dof_tree_mask, provisional_model
from mjx_lite.mjcf.inertia import factor_ld, quat_mul, quat_to_mat, solve_ld
from mjx_lite.pipeline import tendon
from mjx_lite.types import MINVAL, JointType

# fields filled here (placeholders are written before a provisional Model is built)
_DERIVED = {
    "dof_M0": ("nv",), "dof_invweight0": ("nv",), "dof_length": ("nv",), "body_invweight0": ("nbody", 2),
    "body_subtreemass": ("nbody",), "cam_pos0": ("ncam", 3), "cam_poscom0": ("ncam", 3), "cam_mat0": ("ncam", 9),
    "light_pos0": ("nlight", 3), "light_poscom0": ("nlight", 3), "light_dir0": ("nlight", 3),
}  # fmt: skip


def _placeholders(ctx: CompileContext) -> None:
    for name, dims in _DERIVED.items():
        if name not in ctx.arrays:
            ctx.arrays[name] = np.zeros(tuple(int(ctx.sizes.get(d, 0)) for d in dims))


def _normalize4(q: np.ndarray) -> np.ndarray:
    """mju_normalize4: unit quaternion, (1, 0, 0, 0) when the norm is below mjMINVAL (e.g. a zero quaternion)."""
    n = float(np.sqrt(np.dot(q, q)))
    return q / n if n >= MINVAL else np.array([1.0, 0.0, 0.0, 0.0])


class ConstState:
    """The model at qpos0, in numpy float64 (MuJoCo's names, rotation matrices (…, 3, 3)).

    xpos, xquat, xmat, xipos, ximat (nbody, …); xanchor, xaxis (njnt, 3); geom_xpos/xmat, site_xpos/xmat;
    subtree_com (nbody, 3); cdof (nv, 6) [angular, linear] about subtree_com[rootid]; body_dof_mask (nbody, nv);
    mfull (nv, nv) joint-space inertia with armature; minv = mfull^-1.
    `m` / `d`: a provisional Model (float64) and a Data holding these kinematics, built on first use;
    `run(stage)` applies a pipeline stage f(m, d) -> d to `d` (jitted, float64) and returns the new Data.
    """

    def __init__(self, ctx: CompileContext):
        self.ctx = ctx
        A, S = ctx.arrays, ctx.sizes
        nbody, njnt, nv = S["nbody"], S["njnt"], S["nv"]
        par = A["body_parentid"]
        xpos = np.zeros((nbody, 3))
        xquat = np.zeros((nbody, 4))
        xquat[0] = (1, 0, 0, 0)
        xmat = np.zeros((nbody, 3, 3))
        xmat[0] = np.eye(3)
        for i in range(1, nbody):
            p = par[i]
            q = _normalize4(quat_mul(xquat[p], A["body_quat"][i]))
            xquat[i] = q
            xmat[i] = quat_to_mat(q)
            xpos[i] = xpos[p] + xmat[p] @ A["body_pos"][i]
        self.xpos, self.xquat, self.xmat = xpos, xquat, xmat
        self.xipos, self.ximat = self._local(np.arange(nbody), A["body_ipos"], A["body_iquat"], A.get("body_sameframe"))
        self.geom_xpos, self.geom_xmat = self._local(
            A["geom_bodyid"], A["geom_pos"], A["geom_quat"], A.get("geom_sameframe")
        )
        self.site_xpos, self.site_xmat = self._local(
            A["site_bodyid"], A["site_pos"], A["site_quat"], A.get("site_sameframe")
        )
        jb = A["jnt_bodyid"]
        self.xanchor = xpos[jb] + np.einsum("nij,nj->ni", xmat[jb], A["jnt_pos"]).reshape(njnt, 3)
        self.xaxis = np.einsum("nij,nj->ni", xmat[jb], A["jnt_axis"]).reshape(njnt, 3)
        free = A["jnt_type"] == 0
        self.xanchor[free] = xpos[jb[free]]
        self.xaxis[free] = A["jnt_axis"][free]
        # subtree centres of mass
        mass = np.asarray(A["body_mass"], float)
        msum = mass.copy()
        wsum = self.xipos * mass[:, None]
        for i in range(nbody - 1, 0, -1):
            msum[par[i]] += msum[i]
            wsum[par[i]] += wsum[i]
        small = msum < MINVAL
        self.subtree_com = np.where(small[:, None], self.xipos, wsum / np.where(small, 1.0, msum)[:, None])
        # dof motions in the com frame of each tree (mj_comPos)
        root = A["body_rootid"]
        cdof = np.zeros((nv, 6))
        for j in range(njnt):
            t, adr, b = A["jnt_type"][j], A["jnt_dofadr"][j], jb[j]
            com = self.subtree_com[root[b]]
            if t == 0:
                for k in range(3):
                    cdof[adr + k, 3 + k] = 1.0
                axes, adr = xmat[b].T, adr + 3
            elif t == 1:
                axes = xmat[b].T
            elif t == 2:
                cdof[adr, 3:] = self.xaxis[j]
                continue
            else:
                axes = self.xaxis[j][None]
            for k, ax in enumerate(axes):
                cdof[adr + k, :3] = ax
                cdof[adr + k, 3:] = np.cross(ax, com - self.xanchor[j])
        self.cdof = cdof
        mask = np.zeros((nbody, nv), bool)
        for i in range(1, nbody):
            mask[i] = mask[par[i]]
            n = A["body_dofnum"][i]
            if n:
                a = A["body_dofadr"][i]
                mask[i, a : a + n] = True
        self.body_dof_mask = mask
        # joint-space inertia: sum over bodies of the com Jacobians' kinetic energy, plus armature
        mfull = np.zeros((nv, nv))
        inertia = np.asarray(A["body_inertia"], float)
        for i in range(1, nbody):
            if not mask[i].any() or mass[i] == 0 and not inertia[i].any():
                continue
            jp_, jr = self.point_jac(self.xipos[i], i)
            iw = self.ximat[i] @ np.diag(inertia[i]) @ self.ximat[i].T
            dofs = np.ix_(mask[i], mask[i])  # only the body's dofs are nonzero (keeps large scenes O(nv))
            jp_, jr = jp_[:, mask[i]], jr[:, mask[i]]
            mfull[dofs] += mass[i] * jp_.T @ jp_ + jr.T @ iw @ jr
        mfull[np.diag_indices(nv)] += np.asarray(A["dof_armature"], float)
        self.mfull = mfull
        self.lmat, self.dinv = factor_ld(mfull)
        self.minv = solve_ld(self.lmat, self.dinv, np.eye(nv))
        self._m = None
        self._d = None

    def _local(self, body, pos, quat, sameframe=None):
        """World pose of frames (pos, quat) on `body` (mj_local2Global): frames marked as coinciding with the
        body frame (sameframe 1) or the inertial frame (2) copy that pose, those sharing only its orientation
        (3: body, 4: inertial) copy the rotation, exactly as MuJoCo's kinematics does."""
        body = np.asarray(body, int)
        n = len(body)
        p = self.xpos[body] + np.einsum("nij,nj->ni", self.xmat[body], np.asarray(pos, float).reshape(n, 3))
        mats = np.array([quat_to_mat(q) for q in np.asarray(quat, float).reshape(n, 4)]).reshape(n, 3, 3)
        p, mat = p.reshape(n, 3), np.einsum("nij,njk->nik", self.xmat[body], mats).reshape(n, 3, 3)
        if sameframe is not None and n:
            sf = np.asarray(sameframe).reshape(n)
            xipos, ximat = getattr(self, "xipos", None), getattr(self, "ximat", None)  # None while computing them
            for code, src_pos, src_mat in ((1, self.xpos, self.xmat), (2, xipos, ximat), (3, None, self.xmat),
                                           (4, None, ximat)):  # fmt: skip
                sel = sf == code
                if np.any(sel) and src_pos is not None:
                    p[sel] = src_pos[body[sel]]
                if np.any(sel) and src_mat is not None:
                    mat[sel] = src_mat[body[sel]]
        return p, mat

    def point_jac(self, point: np.ndarray, body: int) -> tuple[np.ndarray, np.ndarray]:
        """(jacp (3, nv), jacr (3, nv)) of a world point attached to `body` (mj_jac)."""
        mask = self.body_dof_mask[body]
        off = np.asarray(point) - self.subtree_com[self.ctx.arrays["body_rootid"][body]]
        ang, lin = self.cdof[:, :3], self.cdof[:, 3:]
        return ((lin + np.cross(ang, off)) * mask[:, None]).T, (ang * mask[:, None]).T

    @property
    def m(self) -> types.Model:
        if self._m is None:
            self._m = provisional_model(self.ctx)
        return self._m

    @property
    def d(self) -> types.Data:
        if self._d is None:
            m = self.m
            with jax.enable_x64(True):
                shapes = jax.eval_shape(io.make_data, m)
                d = jax.tree_util.tree_map(lambda s: np.zeros(s.shape, s.dtype), shapes)
                A = self.ctx.arrays
                mocap = np.argsort(np.where(A["body_mocapid"] >= 0, A["body_mocapid"], 1 << 30))[: m.nmocap]
                d = d.replace(
                    qpos=np.asarray(A["qpos0"], float), xpos=self.xpos, xquat=self.xquat, xmat=self.xmat,
                    xipos=self.xipos, ximat=self.ximat, xanchor=self.xanchor, xaxis=self.xaxis,
                    geom_xpos=self.geom_xpos, geom_xmat=self.geom_xmat, site_xpos=self.site_xpos,
                    site_xmat=self.site_xmat, subtree_com=self.subtree_com, cdof=self.cdof,
                    mocap_pos=A["body_pos"][mocap].reshape(-1, 3), mocap_quat=A["body_quat"][mocap].reshape(-1, 4),
                    eq_active=np.asarray(A["eq_active0"], bool),
                )  # fmt: skip
                self._d = jax.device_put(d)  # (jp.asarray would compile a conversion per shape)
        return self._d

    def run(self, stage):
        """Apply a pipeline stage f(m, d) -> d to the qpos0 Data (one jit compilation), return the new Data."""
        m, d = self.m, self.d
        with jax.enable_x64(True):
            self._d = jax.jit(stage)(m, d)
        return self._d


def set_const(ctx: CompileContext) -> dict:
    """Fill the qpos0-dependent constants into ctx.arrays; return the model statistics."""
    _placeholders(ctx)
    A, S = ctx.arrays, ctx.sizes
    nbody, nv, njnt = S["nbody"], S["nv"], S["njnt"]
    # subtree mass (setFixed)
    sub = np.array(A["body_mass"], float).copy()
    par = A["body_parentid"]
    for i in range(nbody - 1, 0, -1):
        sub[par[i]] += sub[i]
    A["body_subtreemass"] = sub
    _actuator_ids(ctx)

    st = ConstState(ctx)
    # dof_M0: cdof' crb cdof + dof armature + joint-actuator armature (MuJoCo 4.0: no tendon armature)
    m0 = np.diag(st.mfull).copy() + _joint_actuator_armature(ctx)
    _tendon_armature(ctx, st)
    # actuator armature (joint: gear^2 a on the dof; tendon: gear^2 a J'J) is part of M for the invweights
    actuation.actuator_armature(ctx, st)
    if getattr(st, "actuator_armature_included", False):
        st.lmat, st.dinv = factor_ld(st.mfull)
        st.minv = solve_ld(st.lmat, st.dinv, np.eye(len(st.dinv)))
    _simple_dofs(ctx, st, m0)
    mfull = st.mfull
    xpos, xmat, xipos, subtree_com = st.xpos, st.xmat, st.xipos, st.subtree_com

    # dof_M0: diagonal of the joint-space inertia (armature included), i.e. cdof' crb cdof + armature
    A["dof_M0"] = m0

    # cameras and lights (as if fixed to their body)
    for kind, n in (("cam", S["ncam"]), ("light", S["nlight"])):
        if not n:
            continue
        body = A[f"{kind}_bodyid"]
        target = A[f"{kind}_targetbodyid"]
        p = xpos[body] + np.einsum("nij,nj->ni", xmat[body], A[f"{kind}_pos"])
        A[f"{kind}_pos0"] = p - xpos[body]
        A[f"{kind}_poscom0"] = p - subtree_com[np.where(target >= 0, target, body)]
        if kind == "cam":
            A["cam_mat0"] = np.stack([xmat[b] @ quat_to_mat(q) for b, q in zip(body, A["cam_quat"])]).reshape(n, 9)
        else:
            A["light_dir0"] = np.einsum("nij,nj->ni", xmat[body], A["light_dir"])

    # body_invweight0: A = J M^-1 J' at each body's com (one batched solve, mj_solveM's order per column)
    minv = st.minv
    inv_b = np.zeros((nbody, 2))
    general = []
    for i in range(1, nbody):
        if A["body_weldid"][i] == 0:
            continue
        if A["body_simple"][i] == 2:
            inv_b[i] = (1.0 / max(MINVAL, A["body_mass"][i]), 0.0)
        elif nv:
            general.append(i)
    if general:
        jacs = np.stack([np.concatenate(st.point_jac(xipos[i], i)) for i in general])  # (n, 6, nv)
        sol = solve_ld(st.lmat, st.dinv, jacs.transpose(2, 0, 1).reshape(nv, -1)).reshape(nv, len(general), 6)
        a = np.einsum("nrv,vnc->nrc", jacs, sol)
        inv_b[general, 0] = np.trace(a[:, :3, :3], axis1=1, axis2=2) / 3
        inv_b[general, 1] = np.trace(a[:, 3:, 3:], axis1=1, axis2=2) / 3
    A["body_invweight0"] = inv_b

    # dof_invweight0
    inv_d = np.zeros(nv)
    for jn in range(njnt):
        t, adr, b = A["jnt_type"][jn], A["jnt_dofadr"][jn], A["jnt_bodyid"][jn]
        if A["body_simple"][b] == 2:
            inv_d[adr] = 1.0 / max(MINVAL, A["body_mass"][b])
        elif t == 0:
            blk = minv[adr : adr + 6, adr : adr + 6]
            inv_d[adr : adr + 3] = np.trace(blk[:3, :3]) / 3
            inv_d[adr + 3 : adr + 6] = np.trace(blk[3:, 3:]) / 3
        elif t == 1:
            inv_d[adr : adr + 3] = np.trace(minv[adr : adr + 3, adr : adr + 3]) / 3
        else:
            inv_d[adr] = minv[adr, adr]
    A["dof_invweight0"] = inv_d

    # flex edges (length0, invweight0) and the body sizes they imply
    flex_size = flex.constants(ctx, st)

    # sections: tendons and actuators
    _section_constants(ctx, st)

    stat = _statistics(ctx, st, mfull, flex_size)
    _auto_spring_damper(ctx)
    return stat


def _simple_dofs(ctx: CompileContext, st: ConstState, m0: np.ndarray) -> None:
    """MuJoCo's qM for the dofs of simple bodies (dof_simplenum > 0) is the fixed diagonal dof_M0 with no coupling
    (mj_crb); the qpos0 constants that use M^-1 (acc0, invweight0) see that matrix."""
    simple = np.nonzero(np.asarray(ctx.arrays["dof_simplenum"]) > 0)[0]
    if not simple.size:
        return
    mfull = np.array(st.mfull, float)
    mfull[simple, :] = 0.0
    mfull[:, simple] = 0.0
    mfull[simple, simple] = m0[simple]
    if np.array_equal(mfull, st.mfull):
        return
    st.mfull = mfull
    st.lmat, st.dinv = factor_ld(mfull)
    st.minv = solve_ld(st.lmat, st.dinv, np.eye(len(st.dinv)))


def _joint_actuator_armature(ctx: CompileContext) -> np.ndarray:
    """(nv,) gear[0]^2 * armature of actuators with a joint transmission, on each dof of their joint."""
    A, nv = ctx.arrays, ctx.sizes["nv"]
    out = np.zeros(nv)
    arm = np.asarray(A.get("actuator_armature", np.zeros(0)), float)
    for i in np.nonzero(arm)[0]:
        trn, obj = int(A["actuator_trntype"][i]), int(A["actuator_trnid"][i, 0])
        if trn in (0, 1):  # joint/jointinparent: every dof of the joint (a free joint's 6, a ball's 3)
            da, nd = int(A["jnt_dofadr"][obj]), JointType(int(A["jnt_type"][obj])).dof_width()
            out[da : da + nd] += arm[i] * float(A["actuator_gear"][A["actuator_outadr"][i], 0]) ** 2
    return out


def _tendon_armature(ctx: CompileContext, st: ConstState) -> None:
    """Tendon armature adds J' a J, on the dof-tree entries, to the joint-space inertia (MuJoCo 4.0); refactor."""
    arm = np.asarray(ctx.arrays.get("tendon_armature", np.zeros(0)), float)
    if not np.any(arm) or not ctx.sizes["nv"]:
        return
    d = st.run(tendon.tendon)
    tj = np.asarray(d.ten_J, float).reshape(len(arm), -1)
    st.mfull = st.mfull + np.where(dof_tree_mask(ctx), tj.T @ (arm[:, None] * tj), 0.0)
    st.lmat, st.dinv = factor_ld(st.mfull)
    st.minv = solve_ld(st.lmat, st.dinv, np.eye(len(st.dinv)))


def _actuator_ids(ctx: CompileContext) -> None:
    """jnt_actuatorid / tendon_actuatorid: the one actuator with damping or armature on it (-2 if several)."""
    A, S = ctx.arrays, ctx.sizes
    jid = np.full(S["njnt"], -1, np.int32)
    tid = np.full(S.get("ntendon", 0), -1, np.int32)
    nu = S.get("nactuator", 0)
    for i in range(nu):
        damp = float(np.asarray(A.get("actuator_damping", np.zeros(nu)))[i])
        poly = np.asarray(A.get("actuator_dampingpoly", np.zeros((nu, 2))))[i]
        arm = float(np.asarray(A.get("actuator_armature", np.zeros(nu)))[i])
        if damp == 0 and not np.any(poly) and arm == 0:
            continue
        trn, obj = int(A["actuator_trntype"][i]), int(A["actuator_trnid"][i][0])
        tgt = jid if trn in (0, 1) else tid if trn == 3 else None
        if tgt is not None:
            tgt[obj] = i if tgt[obj] == -1 else -2
    A["jnt_actuatorid"] = jid
    A["tendon_actuatorid"] = tid


def _section_constants(ctx: CompileContext, st: ConstState) -> None:
    """qpos0 constants of tendons and actuators (length0, invweight0, acc0, lengthrange, ...): mjcf/actuation.py."""
    actuation.finalize_sections(ctx, st)


def _cmax(a, b) -> float:
    """mjMAX (a NaN in a gives b, in b gives b)."""
    return float(a if a > b else b)


def _mju_max(a, b) -> float:
    """mju_max: a >= b ? a : b."""
    return float(a if a >= b else b)


def _statistics(ctx: CompileContext, st: ConstState, mfull: np.ndarray, flex_size: np.ndarray) -> dict:
    """meaninertia, meanmass, meansize, extent, center (setStat); also dof_length."""
    A, S = ctx.arrays, ctx.sizes
    nbody, nv, ngeom = S["nbody"], S["nv"], S["ngeom"]
    stat = {k: (np.array(v) if k == "center" else v) for k, v in DEFAULT_STAT.items()}
    xpos, xipos, xanchor = st.xpos, st.xipos, st.xanchor
    gpos, spos = st.geom_xpos, st.site_xpos
    # MuJoCo's updateBox, point by point in its order (mjMIN/mjMAX: a NaN point enters the box and the next
    # point replaces it, so the order matters)
    lo = [1e10, 1e10, 1e10]
    hi = [-1e10, -1e10, -1e10]

    def update(p, r=0.0):
        for k in range(3):
            v = float(p[k])
            lo[k] = lo[k] if lo[k] < v - r else v - r
            hi[k] = hi[k] if hi[k] > v + r else v + r

    for i in range(1, nbody):
        update(xpos[i])
        update(xipos[i])
    for p in list(xanchor) + list(spos):
        update(p)
    rb = np.asarray(A["geom_rbound"], float)
    gt, gs = A["geom_type"], np.asarray(A["geom_size"], float)
    for i in range(ngeom):
        r = 0.0
        if rb[i] > 0:
            r = float(rb[i])
        elif gt[i] == 0:
            r = _cmax(gs[i, 0], gs[i, 1]) * 0.1 if (gs[i, 0] or gs[i, 1]) else 0.01
        elif gt[i] == 1:
            h = A["hfield_size"][A["geom_dataid"][i]]
            r = _cmax(h[0], _cmax(h[1], _cmax(h[2], h[3]))) * 0.1
        update(gpos[i], r)
    stat["center"] = (np.array(lo) + np.array(hi)) / 2
    if hi[0] > lo[0]:
        d = [hi[k] - lo[k] for k in range(3)]
        stat["extent"] = _mju_max(1e-5, _mju_max(d[0], _mju_max(d[1], d[2])))
    body = np.zeros(nbody)
    for j in range(S["njnt"]):
        b = A["jnt_bodyid"][j]
        body[b] = _mju_max(body[b], float(np.linalg.norm(xipos[b] - xanchor[j])))
        p = A["body_parentid"][b]
        body[p] = _mju_max(body[p], float(np.linalg.norm(xipos[p] - xanchor[j])))
    body[0] = 0
    gb = A["geom_bodyid"]
    for i in range(ngeom):
        b = gb[i]
        if b > 0 and rb[i] > 0:
            body[b] = _mju_max(body[b], rb[i] + float(np.linalg.norm(xipos[b] - gpos[i])))
    body = np.maximum(body, flex_size)  # the longest flex edge at each body
    if nbody > 1:
        meansize = 0.0
        for i in range(1, nbody):
            body[i] = _mju_max(body[i], 1e-5)
            meansize += body[i] / (nbody - 1)
        stat["meansize"] = meansize
    length = np.ones(nv)
    for i in range(nv):
        j = A["dof_jntid"][i]
        t = A["jnt_type"][j]
        if t in (1, 3) or (t == 0 and i - A["jnt_dofadr"][j] >= 3):
            length[i] = body[A["dof_bodyid"][i]]
    A["dof_length"] = length
    stat["extent"] = _mju_max(stat["extent"], 2 * stat["meansize"])
    if nbody > 1:
        stat["meanmass"] = float(np.sum(A["body_mass"][1:]) / (nbody - 1))
    if nv:
        stat["meaninertia"] = float(np.trace(mfull) / nv)
    return stat


def _auto_spring_damper(ctx: CompileContext) -> None:
    """Joints with springdamper = (timeconst, dampratio): stiffness and damping from dof_invweight0."""
    A = ctx.arrays
    sd = ctx.joint_springdamper
    if sd is None:
        return
    for n in range(len(sd)):
        tc, dr = sd[n]
        if tc <= 0 or dr <= 0:
            continue
        adr = A["jnt_dofadr"][n]
        ndim = types.JointType(int(A["jnt_type"][n])).dof_width()
        inertia = ndim / max(MINVAL, float(np.sum(A["dof_invweight0"][adr : adr + ndim])))
        A["jnt_stiffness"][n] = inertia / max(MINVAL, tc * tc * dr * dr)
        A["dof_damping"][adr : adr + ndim] = 2 * inertia / max(MINVAL, tc)
