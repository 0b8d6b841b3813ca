"""Oracle tests of the smooth dynamics (kinematics, com_pos, crb/factor/solve, com_vel, subtree_vel, rne, jac)."""

import functools
import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import io, math
from mjx_lite.pipeline import inertia, kinematics, rne, support, velocity
from mjx_lite.types import DisableBit
from tests import oracle

RTOL = 1e-9  # float64 round-off, relative to the field's magnitude
ATOL = 1e-10  # float64 round-off, absolute floor (fields of order 1)
F32_TOL = 2e-4  # float32 run vs the float64 oracle, relative to the field's magnitude

POS_FIELDS = ("xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos", "geom_xmat", "site_xpos",
              "site_xmat", "cam_xpos", "cam_xmat", "subtree_com", "cinert", "cdof", "crb")  # fmt: skip
VEL_FIELDS = ("cvel", "cdof_dot", "subtree_linvel", "subtree_angmom", "qfrc_bias")
ACC_FIELDS = ("cacc", "cfrc_int", "cfrc_ext")

# humanoid; pendula: all joint types (ball, several joints per body), mocap, every camera mode; a dm_control model
# (cheetah: slow, CI time; the humanoid and pendula cover its joint types and stages by default)
DEFAULT_MODELS = ("humanoid/humanoid.xml", "pendula.xml", pytest.param("cheetah.xml", marks=pytest.mark.slow))


def _path(name: str) -> str:
    for p in oracle.reference_models():
        if p.endswith(os.sep + name):
            return p
    raise FileNotFoundError(name)


def _loadable(p: str) -> bool:
    try:
        mujoco.MjModel.from_xml_path(p)
        return True
    except Exception:  # noqa: BLE001 - models MuJoCo itself rejects
        return False


ALL_MODELS = [p for p in oracle.reference_models() if _loadable(p)]


def random_state(mjm: mujoco.MjModel, seed: int = 0):
    """Joint-type aware random qpos (unnormalised quaternions on purpose), qvel, qacc, mocap, xfrc."""
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0.copy()
    for j in range(mjm.njnt):
        a, t = mjm.jnt_qposadr[j], mjm.jnt_type[j]
        if t == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a : a + 3] = rng.normal(size=3)
            qpos[a + 3 : a + 7] = rng.normal(size=4) * 1.3
        elif t == mujoco.mjtJoint.mjJNT_BALL:
            qpos[a : a + 4] = rng.normal(size=4) * 0.7
        else:
            qpos[a] = rng.normal()
    return dict(
        qpos=qpos, qvel=rng.normal(size=mjm.nv), qacc=rng.normal(size=mjm.nv),
        mocap_pos=rng.normal(size=(mjm.nmocap, 3)), mocap_quat=rng.normal(size=(mjm.nmocap, 4)),
        xfrc_applied=rng.normal(size=(mjm.nbody, 6)),
    )  # fmt: skip


def mujoco_smooth(mjm: mujoco.MjModel, state: dict) -> dict:
    """MuJoCo's results for the fields under test."""
    mjd = mujoco.MjData(mjm)
    for k, v in state.items():
        getattr(mjd, k)[:] = v
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_comPos(mjm, mjd)
    mujoco.mj_camlight(mjm, mjd)
    mujoco.mj_crb(mjm, mjd)
    mujoco.mj_factorM(mjm, mjd)
    mujoco.mj_comVel(mjm, mjd)
    mujoco.mj_subtreeVel(mjm, mjd)
    bias = np.zeros(mjm.nv)
    mujoco.mj_rne(mjm, mjd, 0, bias)
    mjd.qacc[:] = state["qacc"]
    mujoco.mj_rnePostConstraint(mjm, mjd)
    out = {f: np.array(getattr(mjd, f)) for f in POS_FIELDS + VEL_FIELDS + ACC_FIELDS if f != "qfrc_bias"}
    out["qfrc_bias"] = bias
    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, mjd, full)
    out["full_m"] = full
    out["mjd"] = mjd
    return out


def our_data(m, state: dict):
    d = io.make_data(m)
    return d.replace(**{k: oracle.host_array(np.asarray(v, d.qpos.dtype)) for k, v in state.items()})


def smooth(m, d):
    """Our pipeline for the fields under test."""
    d = kinematics.kinematics(m, d)
    d = kinematics.com_pos(m, d)
    d = inertia.crb(m, d)
    d = inertia.factor_m(m, d)
    d = velocity.com_vel(m, d)
    d = velocity.subtree_vel(m, d)
    d = rne.rne(m, d)
    d = rne.rne_postconstraint(m, d)
    return d


_smooth_jit = jax.jit(smooth)


def assert_close(name, ours, ref, rtol=RTOL, atol=ATOL):
    ours = np.asarray(ours, np.float64)
    ref = np.asarray(ref, np.float64).reshape(ours.shape)
    if ref.size == 0:
        return
    scale = max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(ours - ref).max())
    assert err <= atol + rtol * scale, f"{name}: max error {err:.3e} (scale {scale:.3e})"


@functools.partial(jax.jit, static_argnums=4)
def _products(m, d, x, pts, body: int) -> dict:
    """The products checked after the smooth pipeline, in one program (run eagerly, op by op, they compiled ~100
    single-operation programs per model): full M (nv, nv); M^-1 x' (nv, k) and M^-1 x[0]; M x[0] and M x' for x
    (k, nv); Jacobians and their time derivatives at pts (nbody, 3), point i on body i (traced body ids, batched),
    (nbody, 3, nv) each; and the Jacobians of pts[body] with the static body id `body`."""
    bodies = np.arange(m.nbody)
    return dict(full_m=inertia.full_m(m, d), solve_k=inertia.solve_m(m, d, x.T), solve_1=inertia.solve_m(m, d, x[0]),
                mul_1=inertia.mul_m(m, d, x[0]), mul_k=inertia.mul_m(m, d, x.T),
                jac=support.jac_batch(m, d, pts, bodies), jac_dot=support.jac_dot_batch(m, d, pts, bodies),
                jac_static=support.jac(m, d, pts[body], body))  # fmt: skip


def check_against_mujoco(path: str, seed: int = 0, fn=_smooth_jit, config=None):
    mjm = mujoco.MjModel.from_xml_path(path)
    m = oracle.model_from_mujoco(mjm)
    if config is not None:
        m = mjl.configure(m, config)
    state = random_state(mjm, seed)
    ref = mujoco_smooth(mjm, state)
    d = fn(m, our_data(m, state))
    for f in POS_FIELDS + VEL_FIELDS + ACC_FIELDS:
        assert_close(f, getattr(d, f), ref[f])
    # qpos and mocap_quat are not modified (MuJoCo 4 normalises where used)
    np.testing.assert_array_equal(np.asarray(d.qpos), state["qpos"])
    rng = np.random.default_rng(seed + 1)
    if not mjm.nv:
        assert_close("full_m", inertia.full_m(m, d), ref["full_m"])
        return m, d
    mjd = ref["mjd"]
    x = rng.normal(size=(3, mjm.nv))
    pts = rng.normal(size=(mjm.nbody, 3))
    b = mjm.nbody - 1
    got = jax.tree.map(np.asarray, _products(m, d, x, pts, b))
    assert_close("full_m", got["full_m"], ref["full_m"])
    y = np.zeros_like(x)
    mujoco.mj_solveM(mjm, mjd, y, x)
    assert_close("solve_m (nv, k)", got["solve_k"], y.T)
    assert_close("solve_m (nv,)", got["solve_1"], y[0])
    mx = np.zeros(mjm.nv)
    mujoco.mj_mulM(mjm, mjd, mx, x[0])
    assert_close("mul_m", got["mul_1"], mx)
    assert_close("mul_m (nv, k)", got["mul_k"], ref["full_m"] @ x.T)
    # Jacobians at random points of every body, traced (batched) and static body ids
    (jp_b, jr_b), (jdp_b, jdr_b) = got["jac"], got["jac_dot"]
    for i in range(mjm.nbody):
        jacp, jacr = np.zeros((3, mjm.nv)), np.zeros((3, mjm.nv))
        mujoco.mj_jac(mjm, mjd, jacp, jacr, pts[i], i)
        assert_close(f"jacp body {i}", jp_b[i], jacp)
        assert_close(f"jacr body {i}", jr_b[i], jacr)
        mujoco.mj_jacDot(mjm, mjd, jacp, jacr, pts[i], i)
        assert_close(f"jacp_dot body {i}", jdp_b[i], jacp)
        assert_close(f"jacr_dot body {i}", jdr_b[i], jacr)
    jacp, jacr = np.zeros((3, mjm.nv)), np.zeros((3, mjm.nv))
    mujoco.mj_jac(mjm, mjd, jacp, jacr, pts[b], b)
    sp, sr = got["jac_static"]
    assert_close("jacp static id", sp, jacp)
    assert_close("jacr static id", sr, jacr)
    return m, d


@pytest.mark.parametrize("name", DEFAULT_MODELS)
def test_oracle_default(name):
    check_against_mujoco(_path(name))


@pytest.mark.slow
@pytest.mark.parametrize("path", ALL_MODELS, ids=[os.path.relpath(p, oracle.SITE_PACKAGES) for p in ALL_MODELS])
def test_oracle_all_models(path):
    check_against_mujoco(path, seed=3)


@pytest.mark.parametrize("name", ("pendula.xml",))
def test_oracle_sparse_layout(name):
    """The tree-sparse qM / qLD path (forced on small models) against MuJoCo."""
    m, d = check_against_mujoco(_path(name), seed=5, config=mjl.Config(mass_matrix="sparse"))
    assert inertia.is_sparse(m) and d.qM.ndim == 1 and d.qM.shape == (m.nM,)


@pytest.mark.parametrize("factorization", ("tree", "dense"))
@pytest.mark.parametrize("layout", ("dense", "sparse"))
def test_factor_layout_reconstructs_mujoco_m(layout, factorization):
    """qLD in its elimination order (inertia._factor_layout), read back into tree (madr) addresses, is a unit lower
    L and D with L' D L = MuJoCo's full M, and 1/D = MuJoCo's qLDiagInv (both independent of storage layout), for
    both factorisations (Config.mass_factorization)."""
    mjm = mujoco.MjModel.from_xml_path(_path("humanoid/humanoid.xml"))
    m = mjl.configure(oracle.model_from_mujoco(mjm), mass_matrix=layout, mass_factorization=factorization)
    state = random_state(mjm, 7)
    ref = mujoco_smooth(mjm, state)
    d = _smooth_jit(m, our_data(m, state))
    t = support.tables(m)
    tree = np.asarray(d.qLD)[inertia._factor_layout(m).pos]  # tree entries at madr addresses
    L = np.eye(m.nv)
    off = t.m_rows != t.m_cols
    L[t.m_rows[off], t.m_cols[off]] = tree[off]
    D = tree[t.madr]
    assert_close("qLDiagInv", d.qLDiagInv, ref["mjd"].qLDiagInv)
    assert_close("L'DL", L.T @ np.diag(D) @ L, ref["full_m"])


@pytest.mark.parametrize("layout", ("dense", "sparse"))
def test_oracle_dense_factorization(layout):
    """Config(mass_factorization="dense"): qLD, qLDiagInv, qacc_smooth and solve_m (mj_solveM) against MuJoCo, from
    either qM layout."""
    cfg = mjl.Config(mass_matrix=layout, mass_factorization="dense")
    m, d = check_against_mujoco(_path("humanoid/humanoid.xml"), seed=8, config=cfg)
    assert inertia._dense_factorization(m) and inertia.is_sparse(m) == (layout == "sparse")


def test_dense_factorization_gradient_matches_tree():
    """Reverse-mode gradients through factor_m and solve_m (M^-1 qfrc_bias) w.r.t. M and qfrc_bias are the same with
    either factorisation. The stages before factor_m (which do not depend on it) run once, outside the gradient, in
    test_oracle_default[pendula.xml]'s compiled pipeline (CI time)."""
    mjm = mujoco.MjModel.from_xml_path(_path("pendula.xml"))
    state = random_state(mjm, 9)
    m0 = oracle.model_from_mujoco(mjm)
    d = _smooth_jit(m0, our_data(m0, state))
    qm, bias = np.asarray(d.qM), np.asarray(d.qfrc_bias)
    t = support.tables(m0)
    tree = np.zeros((m0.nv, m0.nv))
    tree[t.m_rows, t.m_cols] = tree[t.m_cols, t.m_rows] = 1.0
    grads = []
    for fac in ("tree", "dense"):
        m = mjl.configure(m0, mass_factorization=fac)

        def loss(qm, bias, m=m):
            if qm.ndim == 2:  # M as the pipeline makes it: symmetric, zero off the dof tree (each factorisation may
                qm = tree * 0.5 * (qm + qm.T)  # read its own triangle; the dense one reads the structural zeros too)
            dd = inertia.factor_m(m, d.replace(qM=qm))
            return jp.sum(jp.sin(inertia.solve_m(m, dd, bias)))

        grads.append([np.asarray(g) for g in jax.jit(jax.grad(loss, argnums=(0, 1)))(qm, bias)])
    for g_tree, g_dense in zip(*grads):
        assert np.all(np.isfinite(g_tree)) and np.abs(g_tree).max() > 0.1
        np.testing.assert_allclose(g_dense, g_tree, rtol=1e-9, atol=1e-12)


def test_oracle_level_sweeps(monkeypatch):
    """Small trees sum over subtrees / ancestors with one dense product (support.DENSE_SWEEP_NBODY); the level-by-
    level sweeps that larger scenes use, forced here on a small model, against MuJoCo too."""
    monkeypatch.setattr(support, "DENSE_SWEEP_NBODY", 0)
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_path(_path("pendula.xml")))
    assert not support._dense_sweep(m)
    check_against_mujoco(_path("pendula.xml"), seed=6, fn=jax.jit(lambda m, d: smooth(m, d)))
    # and the two implementations agree on arbitrary values
    x = jp.asarray(np.random.default_rng(0).standard_normal((m.nbody, 3)))

    def sweeps():
        sub = support.subtree_sum
        return sub(m, x), sub(m, x, include_world=False), support.forward_accumulate(m, x)

    level = sweeps()
    monkeypatch.setattr(support, "DENSE_SWEEP_NBODY", 10**6)
    for a, b in zip(level, sweeps()):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)


def _rne_stages(m, d):
    return rne.rne_postconstraint(m, rne.rne(m, d))


_rne_jit = jax.jit(_rne_stages)


def test_gravity_disabled():
    mjm = mujoco.MjModel.from_xml_path(_path("pendula.xml"))
    m_on = oracle.model_from_mujoco(mjm)
    state = random_state(mjm, 7)
    d = _smooth_jit(m_on, our_data(m_on, state))  # gravity only enters rne: reuse the compiled pipeline
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_GRAVITY
    m = oracle.model_from_mujoco(mjm)
    assert m.opt.disableflags & DisableBit.GRAVITY
    ref = mujoco_smooth(mjm, state)
    d = _rne_jit(m, d)
    for f in ("qfrc_bias", "cacc", "cfrc_int"):
        assert_close(f, getattr(d, f), ref[f])


def test_contact_wrench_hook():
    """cfrc_ext with contact forces, assembled by support.wrench_to_cfrc and passed to rne_postconstraint."""
    mjm = mujoco.MjModel.from_xml_path(_path("humanoid/humanoid.xml"))
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    for _ in range(20):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 0
    mujoco.mj_rnePostConstraint(mjm, mjd)
    ref_ext, ref_int = np.array(mjd.cfrc_ext), np.array(mjd.cfrc_int)
    bodies, points, wrenches = [], [], []
    for i in range(mjd.ncon):
        con = mjd.contact[i]
        lfrc = np.zeros(6)
        mujoco.mj_contactForce(mjm, mjd, i, lfrc)
        frame = con.frame.reshape(3, 3)
        w = np.concatenate([frame.T @ lfrc[3:], frame.T @ lfrc[:3]])
        for b, sign in ((mjm.geom_bodyid[con.geom[0]], -1.0), (mjm.geom_bodyid[con.geom[1]], 1.0)):
            bodies.append(b)
            points.append(con.pos)
            wrenches.append(sign * w)
    m = oracle.model_from_mujoco(mjm)
    state = {k: np.array(getattr(mjd, k)) for k in ("qpos", "qvel", "qacc", "xfrc_applied")}
    d = _smooth_jit(m, our_data(m, state))
    cfrc = support.wrench_to_cfrc(m, d, np.array(bodies), jp.asarray(np.array(points)), jp.asarray(np.array(wrenches)))
    d = jax.jit(rne.rne_postconstraint)(m, d, cfrc)
    assert np.abs(ref_ext).max() > 1.0  # contact forces are present
    assert_close("cfrc_ext", d.cfrc_ext, ref_ext)
    assert_close("cfrc_int", d.cfrc_int, ref_int)


# ---- transformations: jit, vmap, grad, float32 -----------------------------------------------------------


@pytest.fixture(scope="module")
def humanoid():
    mjm = mujoco.MjModel.from_xml_path(_path("humanoid/humanoid.xml"))
    return mjm, oracle.model_from_mujoco(mjm)


@pytest.fixture(scope="module")
def pendula():
    mjm = mujoco.MjModel.from_xml_path(_path("pendula.xml"))
    return mjm, oracle.model_from_mujoco(mjm)


def _outputs(d):
    return {f: getattr(d, f) for f in POS_FIELDS + VEL_FIELDS + ACC_FIELDS + ("qM", "qLD", "qLDiagInv")}


# slow (CI time: op by op, ~250 single-operation programs); the public entry points run jitted (test_forward's
# test_eager_entry_points_run_jitted_and_trace_inline_under_transformations), and every oracle test here runs the
# stages under jit
@pytest.mark.slow
def test_jit_equals_nojit():
    mjm = mujoco.MjModel.from_xml_path(_path("acrobot.xml"))
    m = oracle.model_from_mujoco(mjm)
    d = our_data(m, random_state(mjm, 2))
    a, b = _outputs(smooth(m, d)), _outputs(_smooth_jit(m, d))
    for k in a:
        np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-12, atol=1e-12, err_msg=k)


def test_vmap_equals_loop(pendula):
    """A batch of states and of models (domain randomisation of masses) equals one-by-one calls."""
    mjm, m = pendula
    ds = [our_data(m, random_state(mjm, s)) for s in range(3)]
    # the batches built on the host, the results read there (no eager programs)
    batch = jax.tree.map(lambda *x: np.stack(x), *ds)
    scales = np.asarray([0.5, 1.0, 2.0])
    mass = np.asarray(m.body_mass)
    ms = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (3,) + np.shape(x)), m)
    ms = ms.replace(body_mass=mass[None] * scales[:, None])
    out = jax.tree.map(np.asarray, jax.jit(jax.vmap(smooth))(ms, batch))
    for i, d in enumerate(ds):
        one = _outputs(_smooth_jit(m.replace(body_mass=mass * scales[i]), d))
        for k, v in one.items():
            np.testing.assert_allclose(getattr(out, k)[i], np.asarray(v), rtol=1e-12, atol=1e-12, err_msg=k)


def test_no_retrace_on_float_change(pendula):
    mjm, m = pendula
    d = our_data(m, random_state(mjm, 1))
    _smooth_jit(m, d)
    n = _smooth_jit._cache_size()
    _smooth_jit(m.replace(body_mass=m.body_mass * 1.1, opt=m.opt.replace(gravity=m.opt.gravity * 0.5)), d)
    assert _smooth_jit._cache_size() == n


def test_grad(pendula):
    """Gradients are finite (also at qpos0 / zero qvel: zero norms, identity quaternions) and match central
    finite differences, w.r.t. qpos, qvel and body masses."""
    mjm, m = pendula
    d0 = our_data(m, random_state(mjm, 6))

    def loss(qpos, qvel, mass):
        d = smooth(m.replace(body_mass=mass), d0.replace(qpos=qpos, qvel=qvel))
        x = inertia.solve_m(m, d, d.qfrc_bias)
        return (jp.sum(x**2) + jp.sum(d.xpos**2) + jp.sum(d.cfrc_int**2) * 1e-3 + jp.sum(d.subtree_angmom**2)
                + jp.sum(d.cam_xmat))  # fmt: skip

    vg = jax.jit(jax.value_and_grad(loss, argnums=(0, 1, 2)))
    args = [np.asarray(d0.qpos), np.asarray(d0.qvel), np.asarray(m.body_mass)]  # host arithmetic: no eager programs
    _, g = vg(*args)
    _, g0 = vg(np.asarray(m.qpos0), np.zeros_like(args[1]), args[2])
    for gi in g + g0:
        assert np.all(np.isfinite(np.asarray(gi)))
    rng = np.random.default_rng(0)
    for arg, gi in enumerate(g):
        v = rng.normal(size=args[arg].shape)
        eps = 1e-6
        plus, minus = list(args), list(args)
        plus[arg] = args[arg] + eps * v
        minus[arg] = args[arg] - eps * v
        fd = (float(vg(*plus)[0]) - float(vg(*minus)[0])) / (2 * eps)
        an = np.sum(np.asarray(gi) * v)
        assert abs(float(fd - an)) <= 1e-5 * max(1.0, abs(float(an))), (arg, float(fd), float(an))


def test_float32(pendula):
    mjm, m = pendula
    state = random_state(mjm, 8)
    ref = mujoco_smooth(mjm, state)
    m32, d32 = oracle.cast_floats(m, jp.float32), oracle.cast_floats(our_data(m, state), jp.float32)
    d = _smooth_jit(m32, d32)
    for f in POS_FIELDS + VEL_FIELDS + ACC_FIELDS:
        assert getattr(d, f).dtype == jp.float32, f
        assert_close(f, getattr(d, f), ref[f], rtol=F32_TOL, atol=F32_TOL)
    assert d.qLD.dtype == jp.float32

    @jax.jit
    def solve_mul(m, d, b):
        x = inertia.solve_m(m, d, b)
        return x, inertia.mul_m(m, d, x)

    x, mx = solve_mul(m32, d, np.ones(m.nv, np.float32))
    assert x.dtype == jp.float32
    assert_close("solve_m f32", mx, np.ones(m.nv), rtol=F32_TOL, atol=F32_TOL)


# ---- graph size and compile time --------------------------------------------------------------------------


def _count_eqns(jaxpr) -> int:
    n = 0
    for eqn in jaxpr.eqns:
        n += 1
        for p in eqn.params.values():
            sub = getattr(p, "jaxpr", None)
            if sub is not None:
                n += _count_eqns(getattr(sub, "jaxpr", sub))
    return n


@pytest.mark.parametrize("layout", ("sparse", "dense"))
def test_graph_does_not_grow_with_bodies(layout):
    counts = []
    for name in ("humanoid/01_humanoids.xml", "humanoid/04_humanoids.xml"):
        m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_path(_path(name)))
        m = mjl.configure(m, mass_matrix=layout)
        d = io.make_data(m)
        counts.append(_count_eqns(jax.make_jaxpr(smooth)(m, d).jaxpr))
    assert counts[0] == counts[1], counts



def test_math_matches_mju():
    """math.py's spatial helpers used here agree with MuJoCo's mju_* functions."""
    rng = np.random.default_rng(3)
    for _ in range(5):
        a, b = rng.normal(size=4), rng.normal(size=4)
        a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
        r4, r9, r3, r6 = np.zeros(4), np.zeros(9), np.zeros(3), np.zeros(6)
        mujoco.mju_mulQuat(r4, a, b)
        assert_close("quat_mul", math.quat_mul(a, b), r4)
        mujoco.mju_quat2Mat(r9, a)
        assert_close("quat_to_mat", math.quat_to_mat(a), r9.reshape(3, 3))
        v = rng.normal(size=3)
        mujoco.mju_rotVecQuat(r3, v, a)
        assert_close("rotate", math.rotate(v, a), r3)
        axis, ang = v / np.linalg.norm(v), rng.normal() * 3
        mujoco.mju_axisAngle2Quat(r4, axis, ang)
        assert_close("axis_angle_to_quat", math.axis_angle_to_quat(axis, ang), r4)
        vec, newp, oldp = rng.normal(size=6), rng.normal(size=3), rng.normal(size=3)
        mujoco.mju_transformSpatial(r6, vec, 0, newp, oldp, np.eye(3).ravel())
        assert_close("transform_motion", math.transform_motion(vec, newp - oldp), r6)
        mujoco.mju_transformSpatial(r6, vec, 1, newp, oldp, np.eye(3).ravel())
        assert_close("transform_force", math.transform_force(vec, newp - oldp), r6)
