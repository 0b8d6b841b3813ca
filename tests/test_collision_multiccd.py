"""Oracle tests of the box-mesh / mesh-mesh face manifolds (MuJoCo 4 with multiccd on, its default)."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import convex, driver  # noqa: E402
from tests.oracle import model_from_mujoco  # noqa: E402

ATOL_FACE = 1e-6  # face manifold: clipped polygon vertices, closed form (float32 mesh vertices are shared)
ATOL_CONVEX = 1e-4  # single contacts from the iterative GJK/EPA
CUBE = "-1 -1 -1  1 -1 -1  -1 1 -1  1 1 -1  -1 -1 1  1 -1 1  -1 1 1  1 1 1"


def _xml(t1, margin=0.0, flags=""):
    g1 = (f'<geom type="mesh" mesh="cube" margin="{margin}"/>' if t1 == "mesh"
          else f'<geom type="box" size=".1 .1 .1" margin="{margin}"/>')  # fmt: skip
    return f"""<mujoco><option gravity="0 0 0">{flags}</option>
      <asset><mesh name="cube" vertex="{CUBE}" scale=".1 .1 .1"/></asset><worldbody>
      <body><freejoint/>{g1}</body>
      <body><freejoint/><geom type="mesh" mesh="cube" margin="{margin}"/></body></worldbody></mujoco>"""


def _poses(mjm, rng, n, tilt, yaws, zrange):
    mjd = mujoco.MjData(mjm)
    out = []
    for _ in range(n):
        q = np.zeros(4)
        mujoco.mju_euler2Quat(q, np.array([tilt, rng.uniform(-1, 1) * tilt, rng.choice(yaws)]), "xyz")
        z = rng.uniform(*zrange) + 0.1 * abs(np.sin(tilt))
        mjd.qpos[:] = np.r_[0, 0, 0, 1, 0, 0, 0, rng.uniform(-0.08, 0.08, 2), z, q]
        mujoco.mj_kinematics(mjm, mjd)
        mujoco.mj_collision(mjm, mjd)
        c = mjd.contact[: mjd.ncon]
        theirs = {"dist": np.array(c.dist), "pos": np.array(c.pos).reshape(-1, 3),
                  "normal": np.array(c.frame).reshape(-1, 9)[:, :3]}  # fmt: skip
        out.append((mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3), theirs))
    return out


_COLLIDE = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))


_MODELS = {}


def _model(t1):
    if t1 not in _MODELS:  # one compiled collision per model, shared by the tests
        mjm = mujoco.MjModel.from_xml_string(_xml(t1))
        _MODELS[t1] = (mjm, model_from_mujoco(mjm))
    return _MODELS[t1]


def _compare(m, poses, atol, deepest_only=False):
    d0 = mjl.make_data(m)
    xpos = jp.asarray(np.stack([p[0] for p in poses]))
    xmat = jp.asarray(np.stack([p[1] for p in poses]))
    d = _COLLIDE(m, jax.vmap(lambda a, b: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat))
    counts = []
    for i, (_, _, theirs) in enumerate(poses):
        ours = mjl.active_contacts(m, jax.tree_util.tree_map(lambda x, i=i: x[i], d))
        counts.append(len(theirs["dist"]))
        if deepest_only:
            a, b = np.argmin(ours["dist"]), np.argmin(theirs["dist"])
            np.testing.assert_allclose(ours["dist"][a], theirs["dist"][b], atol=atol)
            np.testing.assert_allclose(ours["pos"][a], theirs["pos"][b], atol=atol)
            continue
        assert len(ours["dist"]) == len(theirs["dist"]), (i, ours["dist"], theirs["dist"])
        for j in range(len(theirs["dist"])):
            cost = np.linalg.norm(ours["pos"] - theirs["pos"][j], axis=1) + abs(ours["dist"] - theirs["dist"][j])
            k = int(np.argmin(cost))
            np.testing.assert_allclose(ours["dist"][k], theirs["dist"][j], atol=atol)
            np.testing.assert_allclose(ours["pos"][k], theirs["pos"][j], atol=atol)
            np.testing.assert_allclose(ours["frame"][k][0], theirs["normal"][j], atol=atol)
    return counts


@pytest.mark.parametrize("t1", ["mesh", pytest.param("box", marks=pytest.mark.slow)])
def test_face_face_resting(t1):
    """A cube resting on a cube (box or mesh), faces parallel, edges aligned (yaw a multiple of 90 degrees),
    random offsets and penetration: the 4 corners of the overlap rectangle, each with its own depth."""
    mjm, m = _model(t1)
    assert driver.pair_table(m).groups[0].ncon == convex.MULTI_NCON
    poses = _poses(mjm, np.random.default_rng(0), 10, 0.0, [0.0, np.pi / 2, np.pi, -np.pi / 2], (0.185, 0.199))
    counts = _compare(m, poses, ATOL_FACE)
    assert counts == [4] * len(poses)


def test_vertex_face_deepest():
    """A cube on a corner or an edge (large tilt): the deepest contact matches MuJoCo's. (Known difference: where
    MuJoCo keeps one contact we may add a shallower second vertex of the clipped incident face.)"""
    mjm, m = _model("mesh")
    poses = _poses(mjm, np.random.default_rng(1), 8, 0.7, [0.3, 1.1, -0.8, 2.5], (0.16, 0.19))
    poses = [p for p in poses if len(p[2]["dist"])]
    assert len(poses) >= 4
    _compare(m, poses, ATOL_CONVEX, deepest_only=True)


def test_multiccd_disabled_single_contact():
    mjm = mujoco.MjModel.from_xml_string(_xml("mesh", flags='<flag multiccd="disable"/>'))
    m = model_from_mujoco(mjm)
    assert driver.pair_table(m).groups[0].ncon == convex.GENERAL_NCON == 1
    poses = _poses(mjm, np.random.default_rng(2), 4, 0.0, [0.0], (0.185, 0.199))
    d0 = mjl.make_data(m)
    for xpos, xmat, theirs in poses:
        d = jax.jit(driver.collision)(m, d0.replace(geom_xpos=jp.asarray(xpos), geom_xmat=jp.asarray(xmat)))
        assert int(d.ncon) == len(theirs["dist"]) == 1
        np.testing.assert_allclose(np.asarray(d.contact.dist)[0], theirs["dist"][0], atol=ATOL_CONVEX)


@pytest.mark.slow
def test_face_manifold_grad_finite():
    mjm, m = _model("mesh")
    xpos, xmat, _ = _poses(mjm, np.random.default_rng(3), 1, 0.0, [0.3], (0.19, 0.195))[0]
    d0 = mjl.make_data(m).replace(geom_xpos=jp.asarray(xpos), geom_xmat=jp.asarray(xmat))

    def loss(xpos, xmat):
        c = driver.collision(m, d0.replace(geom_xpos=xpos, geom_xmat=xmat)).contact
        return jp.sum(jp.where(c.active, c.dist, 0.0)) + jp.sum(jp.where(c.active[:, None], c.pos, 0.0))

    gp, gm = jax.jit(jax.grad(loss, argnums=(0, 1)))(d0.geom_xpos, d0.geom_xmat)
    assert np.all(np.isfinite(gp)) and np.all(np.isfinite(gm))
    # every contact's depth falls by the height gained: d(sum dist)/d(z of geom2) = number of contacts
    c = jax.jit(driver.collision)(m, d0).contact
    n = int(np.sum(np.asarray(c.active)))
    assert n == 4
    gz = jax.grad(lambda x: jp.sum(jp.where(c.active, driver.collision(m, d0.replace(geom_xpos=x)).contact.dist,
                                            0.0)))(d0.geom_xpos)  # fmt: skip
    np.testing.assert_allclose(np.asarray(gz)[1, 2], n, atol=1e-6)


# ---- cylinder pairs: MuJoCo 4 approximates caps by 16-gons (face-face up to 4, side or capsule on a face 2) ----------

_CYL = '<geom type="cylinder" size=".1 .1"/>'
_BIGCYL = '<geom type="cylinder" size=".3 .1"/>'
_CYL_MODELS = {
    "box_cyl": ('<geom type="box" size=".2 .2 .1"/>', _CYL),
    "cyl_cyl": (_CYL, _CYL),
    "cap_cyl": (_BIGCYL, '<geom type="capsule" size=".05 .1"/>'),
    "cyl_smallbox": (_BIGCYL, '<geom type="box" size=".05 .05 .05"/>'),
    "mesh_cyl": ('<geom type="mesh" mesh="cube"/>', _CYL),
}
# (model, z of body 2, euler of body 2 in degrees, exact): exact = MuJoCo's contact set is determined (<= 4 clipped
# points or a single contact); otherwise more than 4 points clip and MuJoCo keeps 4 by a tie-sensitive local search
# (polygonQuad), so only the count and the normal are compared
_CYL_CASES = [
    ("box_cyl", 0.195, (0, 0, 0), False),  # standing: 16 cap vertices
    ("box_cyl", 0.195, (2, 0, 0), False),
    ("box_cyl", 0.2, (5, 0, 0), True),  # 5 penetrating vertices -> 4
    ("box_cyl", 0.2, (10, 0, 0), True),  # beyond the face tolerance: one GJK/EPA contact
    ("box_cyl", 0.195, (90, 0, 0), True),  # lying: side segment on the face
    ("box_cyl", 0.195, (90.5, 0, 0), True),
    ("box_cyl", 0.197, (90, 0, 0), True),
    ("cyl_cyl", 0.195, (0, 0, 0), True),  # caps: 16-gon clipped by 16-gon, 4 points
    ("cyl_cyl", 0.195, (2, 0, 0), True),
    ("cyl_cyl", 0.195, (90, 0, 0), True),  # lying on a cap
    ("cap_cyl", 0.145, (0, 90, 0), True),  # capsule lying on a cap: 2
    ("cap_cyl", 0.245, (0, 0, 0), True),  # capsule standing: 1
    ("cyl_smallbox", 0.146, (2, 0, 0), True),  # box face clipped by the cap
    ("cyl_smallbox", 0.146, (0, 0, 30), True),
    ("mesh_cyl", 0.195, (2, 0, 0), False),
]
ATOL_CYL_SIDE = 1e-4  # side segment: MuJoCo takes it through its EPA support point (off by the EPA tolerance)


def _cyl_xml(key):
    g1, g2 = _CYL_MODELS[key]
    return f"""<mujoco><option gravity="0 0 0"/><asset><mesh name="cube" vertex="{CUBE}" scale=".1 .1 .1"/></asset>
      <worldbody><body><freejoint/>{g1}</body><body><freejoint/>{g2}</body></worldbody></mujoco>"""


@pytest.fixture(scope="module")
def cyl_results():
    out = []
    for key in _CYL_MODELS:
        cases = [c for c in _CYL_CASES if c[0] == key]
        mjm = mujoco.MjModel.from_xml_string(_cyl_xml(key))
        m = model_from_mujoco(mjm)
        mjd = mujoco.MjData(mjm)
        poses = []
        for _, z, eul, _exact in cases:
            q = np.zeros(4)
            mujoco.mju_euler2Quat(q, np.radians(eul), "xyz")
            mjd.qpos[:] = np.r_[0, 0, 0, 1, 0, 0, 0, 0.01, 0.02, z, q]
            mujoco.mj_kinematics(mjm, mjd)
            mujoco.mj_collision(mjm, mjd)
            c = mjd.contact[: mjd.ncon]
            theirs = {"dist": np.array(c.dist), "pos": np.array(c.pos).reshape(-1, 3),
                      "normal": np.array(c.frame).reshape(-1, 9)[:, :3]}  # fmt: skip
            poses.append((mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3), theirs))
        d0 = mjl.make_data(m)
        xpos = jp.asarray(np.stack([p[0] for p in poses]))
        xmat = jp.asarray(np.stack([p[1] for p in poses]))
        d = _COLLIDE(m, jax.vmap(lambda a, b, d0=d0: d0.replace(geom_xpos=a, geom_xmat=b))(xpos, xmat))
        for i, (case, pose) in enumerate(zip(cases, poses)):
            ours = mjl.active_contacts(m, jax.tree_util.tree_map(lambda x, i=i: x[i], d))
            out.append((case, ours, pose[2]))
    return out


@pytest.mark.parametrize("k", range(len(_CYL_CASES)))
def test_cylinder_manifold(cyl_results, k):
    (key, z, eul, exact), ours, theirs = cyl_results[k]
    assert len(ours["dist"]) == len(theirs["dist"]), (key, eul, ours["dist"], theirs["dist"])
    side = eul[0] % 180 != 0 and key in ("box_cyl", "cyl_cyl") and abs(eul[0] - 90) < 5
    single = len(theirs["dist"]) == 1
    atol = ATOL_CYL_SIDE if side else (ATOL_CONVEX if single else ATOL_FACE)
    for j in range(len(theirs["dist"])):
        np.testing.assert_allclose(ours["frame"][:, 0], np.broadcast_to(theirs["normal"][j], ours["pos"].shape),
                                   atol=ATOL_CONVEX if single else ATOL_FACE)  # fmt: skip
        if not exact or (single and "box_cyl" == key and eul[0] == 10):
            continue  # 4 of > 4 points (MuJoCo's polygonQuad) / EPA on a cap rim (MuJoCo's EPA is ~2e-4 off)
        cost = np.linalg.norm(ours["pos"] - theirs["pos"][j], axis=1) + abs(ours["dist"] - theirs["dist"][j])
        i = int(np.argmin(cost))
        np.testing.assert_allclose(ours["dist"][i], theirs["dist"][j], atol=atol)
        np.testing.assert_allclose(ours["pos"][i], theirs["pos"][j], atol=atol)
