"""Oracle tests of mjx_lite.collision against MuJoCo C (mj_forward contacts)."""

import copy
import functools
import os

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import boxbox, driver, epa, general, gjk, hull, sat, support  # noqa: E402
from mjx_lite.collision import types as ctypes  # noqa: E402
from mjx_lite.collision.frame import make_frame  # noqa: E402
from mjx_lite.collision.types import GeomInfo  # noqa: E402
from mjx_lite.types import GeomType  # noqa: E402
from mjx_lite.types import Warning as W  # noqa: E402, N817
from tests.oracle import MJX_TEST_DATA, host_array, model_from_mujoco  # noqa: E402

ATOL_ANALYTIC = 1e-6  # analytic colliders: same formulas as MuJoCo, float64 round-off
ATOL_CONVEX = 1e-4  # iterative general convex path (MuJoCo's own GJK/EPA tolerance is 1e-6 + iterations)
MARGIN = 0.01

SIZES = {
    "sphere": "0.1",
    "capsule": "0.08 0.15",
    "ellipsoid": "0.1 0.13 0.17",
    "cylinder": "0.09 0.14",
    "box": "0.1 0.13 0.16",
}


# an irregular convex polyhedron (icosahedron with jittered, scaled vertices)
_ICO = np.array(
    [
        [0, 1, 1.618],
        [0, -1, 1.618],
        [0, 1, -1.618],
        [0, -1, -1.618],
        [1, 1.618, 0],
        [-1, 1.618, 0],
        [1, -1.618, 0],
        [-1, -1.618, 0],
        [1.618, 0, 1],
        [-1.618, 0, 1],
        [1.618, 0, -1],
        [-1.618, 0, -1],
    ]
)
_MESH_VERTS = " ".join(f"{v:.4f}" for v in (_ICO * [0.06, 0.07, 0.08] + np.random.default_rng(9).uniform(
    -0.01, 0.01, _ICO.shape)).ravel())  # fmt: skip


def _geom(name, t, margin):
    if t == "mesh":
        return f'<geom name="{name}" type="mesh" mesh="poly" margin="{margin}"/>'
    return f'<geom name="{name}" type="{t}" size="{SIZES[t]}" margin="{margin}"/>'


def _xml(t1, t2, margin=MARGIN, flags='<flag multiccd="disable"/>'):
    g1 = (
        f'<geom name="g1" type="plane" size="3 3 .1" margin="{margin}"/>'
        if t1 == "plane"
        else f'<body name="b1"><freejoint/>{_geom("g1", t1, margin)}</body>'
    )
    return f"""<mujoco><option gravity="0 0 0">{flags}</option>
      <asset><mesh name="poly" vertex="{_MESH_VERTS}"/></asset><worldbody>{g1}
      <body name="b2"><freejoint/>{_geom("g2", t2, margin)}</body>
      </worldbody></mujoco>"""


def _random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def _mj_mindist(mjm, mjd):
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_collision(mjm, mjd)
    return min((c.dist for c in mjd.contact[: mjd.ncon]), default=np.inf) if mjd.ncon else np.inf


def _poses(mjm, rng, n, targets):
    """Random relative poses with MuJoCo's deepest contact at `targets` (bisection along a random ray)."""
    mjd = mujoco.MjData(mjm)
    plane = mjm.geom_type[0] == mujoco.mjtGeom.mjGEOM_PLANE
    out = []
    for i in range(n):
        target = targets[i % len(targets)]
        q1, q2 = _random_quat(rng), _random_quat(rng)
        u = rng.normal(size=3)
        u /= np.linalg.norm(u)
        if plane:
            u = np.array([0.3 * u[0], 0.3 * u[1], 1.0])

        def setq(t, u=u, q1=q1, q2=q2):
            if plane:
                mjd.qpos[:] = np.concatenate([t * u, q2])
            else:
                mjd.qpos[:] = np.concatenate([np.zeros(3), q1, t * u, q2])

        lo, hi = 0.0, 1.0
        for _ in range(60):
            mid = 0.5 * (lo + hi)
            setq(mid)
            if _mj_mindist(mjm, mjd) < target:
                lo = mid
            else:
                hi = mid
        setq(lo)
        _mj_mindist(mjm, mjd)
        out.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    return out


def _mj_contacts(mjm, qpos):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_collision(mjm, mjd)
    c = mjd.contact[: mjd.ncon]
    return {
        "geom": np.array(c.geom).reshape(-1, 2), "dist": np.array(c.dist), "pos": np.array(c.pos).reshape(-1, 3),
        "frame": np.array(c.frame).reshape(-1, 3, 3), "friction": np.array(c.friction).reshape(-1, 5),
        "dim": np.array(c.dim), "includemargin": np.array(c.includemargin),
        "solref": np.array(c.solref).reshape(-1, 2), "solimp": np.array(c.solimp).reshape(-1, 5),
    }  # fmt: skip


def _match(ours, theirs, atol, check_count=True, check_frame=True, deepest_only=False):
    """Order-independent comparison of two contact sets (host dicts)."""
    if deepest_only:
        assert len(ours["dist"]) >= 1 and len(theirs["dist"]) >= 1, (ours["dist"], theirs["dist"])
        a, b = np.argmin(ours["dist"]), np.argmin(theirs["dist"])
        np.testing.assert_allclose(ours["dist"][a], theirs["dist"][b], atol=atol)
        np.testing.assert_allclose(ours["frame"][a][0], theirs["frame"][b][0], atol=atol * 10)
        np.testing.assert_array_equal(ours["geom"][a], theirs["geom"][b])
        return
    if check_count:
        assert len(ours["dist"]) == len(theirs["dist"]), (ours["dist"], theirs["dist"])
    used = set()
    for j in range(len(theirs["dist"])):
        cost = [
            np.inf
            if i in used
            else np.linalg.norm(ours["pos"][i] - theirs["pos"][j]) + abs(ours["dist"][i] - theirs["dist"][j])
            for i in range(len(ours["dist"]))
        ]
        i = int(np.argmin(cost))
        used.add(i)
        np.testing.assert_allclose(ours["dist"][i], theirs["dist"][j], atol=atol)
        np.testing.assert_allclose(ours["pos"][i], theirs["pos"][j], atol=atol)
        np.testing.assert_array_equal(ours["geom"][i], theirs["geom"][j])
        np.testing.assert_allclose(ours["frame"][i][0], theirs["frame"][j][0], atol=atol)
        if check_frame:
            np.testing.assert_allclose(ours["frame"][i], theirs["frame"][j], atol=atol)
        for k in ("friction", "includemargin", "solref", "solimp"):
            np.testing.assert_allclose(ours[k][i], theirs[k][j], atol=1e-12)
        assert ours["dim"][i] == theirs["dim"][j]


_COLLIDE = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))
_COLLIDE_ONE = jax.jit(driver.collision)


def _posed(m, xpos, xmat):
    """`posed_data` built on the host: Data (B, ...) with numpy leaves, geoms at xpos (B, ngeom, 3) and xmat
    (B, ngeom, 3, 3); no eager device ops (each would compile a tiny program per shape)."""
    d0 = jax.device_get(mjl.make_data(m))
    b = len(xpos)
    d = jax.tree_util.tree_map(lambda x: np.broadcast_to(x, (b, *np.shape(x))), d0)
    return d.replace(geom_xpos=np.stack(xpos).astype(np.float64), geom_xmat=np.stack(xmat).astype(np.float64))


# the tests of one model (the same scene in test_analytic_pairs and a test of its own: capsule-box, box-box,
# plane-mesh, capsule-capsule) pad their batches to a multiple of this (repeating the last pose): one compiled program
SHARED_BATCH = 40


def _ours_batched(m, poses, batch=1):
    """`driver.collision` at each pose (one compile per model and batch size, the poses padded to a multiple of
    `batch`), its output on the host (numpy leaves, the first len(poses))."""
    pad = -len(poses) % batch
    xpos, xmat = [p[1] for p in poses], [p[2] for p in poses]
    d = jax.device_get(_COLLIDE(m, _posed(m, xpos + xpos[-1:] * pad, xmat + xmat[-1:] * pad)))
    return jax.tree_util.tree_map(lambda x: x[: len(poses)], d)


def _unbatch(d, i):
    """Element i of a batched Data, as host numpy arrays (numpy indexing: no eager device ops)."""
    return jax.tree_util.tree_map(lambda x: np.asarray(x)[i], d)


def _match_poses(m, mjm, poses, atol) -> list[int]:
    """Our contacts equal MuJoCo's at every pose (full sets); returns MuJoCo's contact count per pose."""
    d = _ours_batched(m, poses, SHARED_BATCH)
    counts = []
    for i, (qpos, _, _) in enumerate(poses):
        theirs = _mj_contacts(mjm, qpos)
        counts.append(len(theirs["dist"]))
        _match(mjl.active_contacts(m, _unbatch(d, i)), theirs, atol)
    return counts


TARGETS = (-0.04, -1e-3, 0.5 * MARGIN)  # deep, touching, separated within margin

# (type1, type2): (atol, compare all contacts and their count, check the full frame)
ANALYTIC = {
    ("plane", "sphere"): True,
    ("plane", "capsule"): True,
    ("plane", "ellipsoid"): True,
    ("plane", "cylinder"): True,
    ("plane", "box"): True,
    ("sphere", "sphere"): True,
    ("sphere", "capsule"): True,
    ("sphere", "cylinder"): True,
    ("sphere", "box"): True,
    ("capsule", "capsule"): True,
    ("capsule", "box"): True,
    ("box", "box"): True,
    ("plane", "mesh"): False,  # deepest here; the full set (graph-order dependent) in test_plane_mesh_contacts
}


@pytest.mark.parametrize("pair", list(ANALYTIC), ids=lambda p: "-".join(p))
def test_analytic_pairs(pair):
    full = ANALYTIC[pair]
    mjm = mujoco.MjModel.from_xml_string(_xml(*pair))
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(0)
    poses = _poses(mjm, rng, 24, TARGETS)
    d = _ours_batched(m, poses, SHARED_BATCH)
    for i, (qpos, _, _) in enumerate(poses):
        ours = mjl.active_contacts(m, _unbatch(d, i))
        theirs = _mj_contacts(mjm, qpos)
        assert len(theirs["dist"]) > 0
        _match(ours, theirs, ATOL_ANALYTIC, deepest_only=not full)


CONVEX = [
    ("sphere", "ellipsoid"), ("capsule", "ellipsoid"), ("capsule", "cylinder"), ("ellipsoid", "ellipsoid"),
    ("ellipsoid", "cylinder"), ("ellipsoid", "box"), ("cylinder", "cylinder"), ("cylinder", "box"),
    ("sphere", "mesh"), ("capsule", "mesh"), ("ellipsoid", "mesh"), ("cylinder", "mesh"), ("box", "mesh"),
    ("mesh", "mesh"),
]  # fmt: skip
CONVEX_FAST = {
    ("sphere", "ellipsoid"),
    ("cylinder", "box"),
    ("box", "mesh"),
}  # the rest are marked slow (one compile each)
# MuJoCo's GJK/EPA stops at opt.ccd_tolerance (1e-6) or after opt.ccd_iterations (35): on curved surfaces its normal
# is then up to 3e-2 off the optimum and its point up to 3e-4. Positions and normals are compared with MuJoCo run to
# convergence (these settings), distances with both.
CCD_CONVERGED = {"ccd_tolerance": 1e-13, "ccd_iterations": 2000}


def _converged(mjm):
    """A copy of mjm whose GJK/EPA runs to convergence (CCD_CONVERGED)."""
    out = copy.deepcopy(mjm)
    for k, v in CCD_CONVERGED.items():
        setattr(out.opt, k, v)
    return out


def _check_convex(ours, theirs, converged):
    """One contact, as MuJoCo's: dist to ATOL_CONVEX of MuJoCo's (default settings, `theirs`), and dist, pos and
    normal to ATOL_CONVEX of MuJoCo's run to convergence (`converged`)."""
    assert len(ours["dist"]) == len(theirs["dist"]) == len(converged["dist"]) == 1, (ours["dist"], theirs["dist"])
    np.testing.assert_array_equal(ours["geom"][0], theirs["geom"][0])
    np.testing.assert_allclose(ours["dist"][0], theirs["dist"][0], atol=ATOL_CONVEX)
    np.testing.assert_allclose(ours["dist"][0], converged["dist"][0], atol=ATOL_CONVEX)
    np.testing.assert_allclose(ours["pos"][0], converged["pos"][0], atol=ATOL_CONVEX)
    np.testing.assert_allclose(ours["frame"][0][0], converged["frame"][0][0], atol=ATOL_CONVEX)


@pytest.mark.parametrize(
    "pair", [p if p in CONVEX_FAST else pytest.param(p, marks=pytest.mark.slow) for p in CONVEX],
    ids=lambda p: "-".join(p),
)  # fmt: skip
def test_general_convex_pairs(pair):
    mjm = mujoco.MjModel.from_xml_string(_xml(*pair))
    m = model_from_mujoco(mjm)
    tight = _converged(mjm)
    poses = _poses(mjm, np.random.default_rng(2), 12, TARGETS)
    d = _ours_batched(m, poses)
    for i, (qpos, _, _) in enumerate(poses):
        di = _unbatch(d, i)
        _check_convex(mjl.active_contacts(m, di), _mj_contacts(mjm, qpos), _mj_contacts(tight, qpos))


def test_capsule_capsule_parallel():
    """Exactly parallel capsules: contacts at the ends of the overlap (up to 2)."""
    mjm = mujoco.MjModel.from_xml_string(_xml("capsule", "capsule"))
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(5)
    mjd = mujoco.MjData(mjm)
    poses, counts = [], []
    for _ in range(12):
        q = _random_quat(rng)
        axis = np.zeros(3)
        mujoco.mju_rotVecQuat(axis, np.array([0, 0, 1.0]), q)
        perp = np.cross(axis, rng.normal(size=3))
        perp /= np.linalg.norm(perp)
        off = perp * rng.uniform(0.12, 0.17) + axis * rng.uniform(-0.35, 0.35)
        mjd.qpos[:] = np.concatenate([np.zeros(3), q, off, q])
        mujoco.mj_kinematics(mjm, mjd)
        poses.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    d = _ours_batched(m, poses, SHARED_BATCH)
    for i, (qpos, _, _) in enumerate(poses):
        theirs = _mj_contacts(mjm, qpos)
        counts.append(len(theirs["dist"]))
        _match(mjl.active_contacts(m, _unbatch(d, i)), theirs, ATOL_ANALYTIC)
    assert 2 in counts


def _pose_list(mjm, qposes):
    mjd = mujoco.MjData(mjm)
    out = []
    for q in qposes:
        mjd.qpos[:] = q
        mujoco.mj_kinematics(mjm, mjd)
        out.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    return out


def _quat_z_to(v):
    q = np.zeros(4)
    mujoco.mju_quatZ2Vec(q, np.asarray(v, float))
    return q


def test_capsule_box_along_box():
    """Capsules lying along a box face or across an edge (nearly parallel to a face, random offsets and depths):
    MuJoCo's second contact (the farthest segment point still over the box) is reproduced, with the count."""
    mjm = mujoco.MjModel.from_xml_string(_xml("capsule", "box"))
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(8)
    size = mjm.geom_size[1]
    qposes = []
    for k in range(40):
        q2 = _random_quat(rng)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, q2)
        rot = rot.reshape(3, 3)
        ax = rng.integers(3)
        fn = (ax + 1 + rng.integers(2)) % 3  # the face normal axis
        if k % 4 == 3:  # diagonal over the face
            d = rot[:, ax] + rot[:, 3 - ax - fn] * rng.uniform(-1, 1) + rot[:, fn] * rng.normal() * 0.1
        else:
            d = rot[:, ax] + rng.normal(size=3) * (0.0, 0.05, 0.3)[k % 4 % 3]
        sign = rng.choice([-1.0, 1.0])
        lateral = rot @ (rng.uniform(-1, 1, 3) * size * 1.2 * (np.arange(3) != fn))
        off = rot[:, fn] * sign * (size[fn] + 0.08 + rng.uniform(-0.05, 0.01)) + lateral
        qposes.append(np.concatenate([np.zeros(3), _quat_z_to(d / np.linalg.norm(d)), -off, q2]))
    poses = _pose_list(mjm, qposes)
    counts = _match_poses(m, mjm, poses, ATOL_ANALYTIC)
    assert counts.count(2) >= 10 and 1 in counts, counts


def _support_ties(mjm, mjd):
    """Whether MuJoCo's plane-mesh support vertex ties (another vertex within 1e-12 of the deepest: a face parallel
    to the plane), where its hull search may start from another corner of the face than our first-of-ties."""
    world = mjd.geom_xpos[1] + mjm.mesh_vert.astype(float) @ mjd.geom_xmat[1].reshape(3, 3).T
    dist = (world - mjd.geom_xpos[0]) @ mjd.geom_xmat[0].reshape(3, 3)[:, 2]
    return int(np.sum(dist <= dist.min() + 1e-12)) > 1


def test_plane_mesh_contacts():
    """Mesh on a plane (random poses and resting on a hull face): the support vertex and up to 3 more corners of
    the hull polygon most opposed to the plane, within margin (MuJoCo 4.0). The count always matches; the whole set
    wherever the support vertex is unique (a face exactly parallel to the plane: MuJoCo may start from another
    corner, and we compare the deepest)."""
    mjm = mujoco.MjModel.from_xml_string(_xml("plane", "mesh"))
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(6)
    poses = _poses(mjm, rng, 12, TARGETS)
    from scipy.spatial import ConvexHull

    vert = mjm.mesh_vert.astype(float)
    normals = ConvexHull(vert).equations[:, :3]
    qposes = []
    for k in range(24):
        nrm = normals[rng.integers(len(normals))] + rng.normal(size=3) * (0.0, 0.02, 0.1)[k % 3]
        qi = _quat_z_to(-nrm / np.linalg.norm(nrm))
        qi[1:] *= -1  # maps the face normal to -z
        yaw, q = np.zeros(4), np.zeros(4)
        mujoco.mju_axisAngle2Quat(yaw, np.array([0, 0, 1.0]), rng.uniform(-3, 3))
        mujoco.mju_mulQuat(q, yaw, qi)
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, q)
        low = (vert @ rot.reshape(3, 3).T)[:, 2].min()
        qposes.append(np.r_[rng.uniform(-0.1, 0.1, 2), -low + rng.uniform(-0.02, 0.009), q])
    poses += _pose_list(mjm, qposes)
    d = _ours_batched(m, poses, SHARED_BATCH)
    mjd = mujoco.MjData(mjm)
    counts, full = [], 0
    for i, (qpos, _, _) in enumerate(poses):
        ours, theirs = mjl.active_contacts(m, _unbatch(d, i)), _mj_contacts(mjm, qpos)
        counts.append(len(theirs["dist"]))
        assert len(ours["dist"]) == len(theirs["dist"]), (ours["dist"], theirs["dist"])
        mjd.qpos[:] = qpos
        mujoco.mj_kinematics(mjm, mjd)
        exact = not _support_ties(mjm, mjd)
        full += exact
        _match(ours, theirs, ATOL_ANALYTIC, deepest_only=not exact)
    assert counts.count(3) >= 10 and full >= 0.8 * len(poses), (counts, full)


def test_plane_mesh_polygon_faces():
    """A 12-gon frustum (hull polygons of 4 and 12 corners) tilted on a plane: MuJoCo 4.0's 4 corners of the incident
    polygon (its area-growing corner search from the support vertex), corners above the centre skipped."""
    ang = np.arange(12) * 2 * np.pi / 12
    ring = np.c_[np.cos(ang), np.sin(ang), np.zeros(12)] * 0.1
    vert = " ".join(f"{x:.9g}" for x in np.r_[ring, ring * [0.5, 0.5, 0] + [0, 0, 0.1]].ravel())
    mjm = mujoco.MjModel.from_xml_string(f"""<mujoco><asset><mesh name="f" vertex="{vert}"/></asset><worldbody>
      <geom type="plane" size="5 5 .1" margin="{MARGIN}"/>
      <body><freejoint/><geom type="mesh" mesh="f" margin="{MARGIN}"/></body></worldbody></mujoco>""")
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(11)
    mjd = mujoco.MjData(mjm)
    qposes = []
    for k in range(16):
        q = np.r_[1.0, rng.normal(size=3) * (0.05, 0.05, 1.0)] if k % 2 else rng.normal(size=4)
        mjd.qpos[:] = np.r_[0, 0, 0, q / np.linalg.norm(q)]
        mujoco.mj_kinematics(mjm, mjd)
        low = (mjd.geom_xpos[1] + mjm.mesh_vert @ mjd.geom_xmat[1].reshape(3, 3).T)[:, 2].min()
        qposes.append(np.r_[0, 0, -low - rng.uniform(-MARGIN, 0.01), q / np.linalg.norm(q)])
    poses = _pose_list(mjm, qposes)
    d = _ours_batched(m, poses)
    counts = []
    for i, (qpos, _, _) in enumerate(poses):
        ours, theirs = mjl.active_contacts(m, _unbatch(d, i)), _mj_contacts(mjm, qpos)
        counts.append(len(theirs["dist"]))
        _match(ours, theirs, ATOL_ANALYTIC)
    assert counts.count(4) >= 3 and counts.count(2) >= 3, counts


def test_box_box_face_manifold():
    """Resting box on box (random yaw, small tilt): clipped face manifolds reduced to 4 contacts as MuJoCo."""
    mjm = mujoco.MjModel.from_xml_string(_xml("box", "box"))
    m = model_from_mujoco(mjm)
    rng = np.random.default_rng(7)
    mjd = mujoco.MjData(mjm)
    poses = []
    for i in range(12):
        yaw = rng.uniform(-np.pi, np.pi)
        tilt = rng.normal(size=2) * (0.0 if i % 3 == 0 else 0.02)
        q2 = np.zeros(4)
        mujoco.mju_euler2Quat(q2, np.array([tilt[0], tilt[1], yaw]), "xyz")
        z = 0.32 - rng.uniform(0.0, 0.01)
        mjd.qpos[:] = np.concatenate([np.zeros(3), [1, 0, 0, 0], [rng.uniform(-0.05, 0.05), 0.02, z], q2])
        mujoco.mj_kinematics(mjm, mjd)
        poses.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    # aligned faces (yaw a multiple of 90 degrees, no tilt): incident corners on the reference face's side planes
    # to round-off. An edge that ends on a side plane does not cross it (MuJoCo's clipHalfPlane); counting it as a
    # crossing emitted duplicate vertices that filled the clip buffer, and a corner was lost (3 contacts for 4)
    for yaw in (0.0, np.pi / 2, np.pi, -np.pi / 2, np.pi / 3):
        for z in (0.32, 0.319):
            q2 = np.zeros(4)
            mujoco.mju_euler2Quat(q2, np.array([0.0, 0.0, yaw]), "xyz")
            mjd.qpos[:] = np.concatenate([np.zeros(3), [1, 0, 0, 0], [0, 0, z], q2])
            mujoco.mj_kinematics(mjm, mjd)
            poses.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    counts = _match_poses(m, mjm, poses, ATOL_ANALYTIC)
    assert max(counts) >= 4 and counts[12:].count(4) >= 6, counts


# box-box follows MuJoCo's arithmetic (its frame, its order of operations, no fused multiply-adds): on touching faces
# the distance is rounding (1e-17) and its sign decides contact or none, so agreement is to a few ulps
ATOL_BOX_ROUNDOFF = 1e-15


def _box_box_normals(p1, m1, s1, p2, m2, s2, margin):
    """box_box's contacts: dist (n,), pos (n, 3) and the normal of make_frame (n, 3) (in the compiled program: no
    eager ops on its output)."""
    out = boxbox.box_box(GeomInfo(p1, m1, s1), GeomInfo(p2, m2, s2), margin)
    return out.dist, out.pos, make_frame(out.normal, out.tangent)[..., 0, :]


_BOX_BOX = jax.jit(jax.vmap(_box_box_normals))


def _free_boxes_contacts(s1, s2, qpos, margin):
    """Two boxes (sizes s1, s2) on free bodies at qpos (14,) with a geom margin each: MuJoCo's (xpos (2, 3), xmat
    (2, 3, 3), size (2, 3), detection margin, contact dist (n,), pos (n, 3), normal (n, 3))."""
    mjm = mujoco.MjModel.from_xml_string(f"""<mujoco><worldbody>
      <body><freejoint/><geom type="box" size="{s1[0]} {s1[1]} {s1[2]}" margin="{margin}"/></body>
      <body><freejoint/><geom type="box" size="{s2[0]} {s2[1]} {s2[2]}" margin="{margin}"/></body>
      </worldbody></mujoco>""")
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_collision(mjm, mjd)
    c = mjd.contact[: mjd.ncon]
    return (mjd.geom_xpos.copy(), mjd.geom_xmat.reshape(-1, 3, 3).copy(), mjm.geom_size.copy(), 2 * margin,
            c.dist.copy(), c.pos.copy(), c.frame[:, :3].copy())  # fmt: skip


def _box_box_vs_mujoco(rows):
    """rows: `_free_boxes_contacts`; box_box on MuJoCo's poses gives MuJoCo's contacts (count, order, dist, pos,
    normal). Returns MuJoCo's contact counts."""
    xpos, xmat, size, margin = (np.stack([r[k] for r in rows]) for k in range(4))
    dist, pos, normal = jax.device_get(_BOX_BOX(xpos[:, 0], xmat[:, 0], size[:, 0], xpos[:, 1], xmat[:, 1],
                                                size[:, 1], margin))
    for k, (*_, mdist, mpos, mnormal) in enumerate(rows):
        act = dist[k] < ctypes.NOCONTACT / 2
        assert act.sum() == len(mdist), (k, dist[k][act], mdist)
        np.testing.assert_allclose(dist[k][act], mdist, atol=ATOL_BOX_ROUNDOFF, rtol=0)
        np.testing.assert_allclose(pos[k][act], mpos, atol=ATOL_BOX_ROUNDOFF, rtol=0)
        np.testing.assert_allclose(normal[k][act], mnormal, atol=ATOL_BOX_ROUNDOFF, rtol=0)
    return [len(r[4]) for r in rows]


def _quat(euler):
    q = np.zeros(4)
    mujoco.mju_euler2Quat(q, np.asarray(euler, float), "xyz")
    return q


PANDA_PADS = ((72, 81), (73, 80), (70, 79), (71, 78))  # the finger pads (box geoms) of Menagerie's Panda


def _panda_pad_rows():
    """The Panda's finger pads at qpos0 (closed: their faces coincide), as `_free_boxes_contacts` rows, MuJoCo's
    contacts of each pad pair with its midphase off (its bounding-volume tree culls (70, 79) and (71, 78) by the
    rounding of their bounding boxes; mjx_lite has no such tree for primitive pairs). [] without Menagerie."""
    root = os.environ.get("MJX_LITE_MENAGERIE", "")
    path = os.path.join(root, "franka_emika_panda/scene.xml")
    if not root or not os.path.exists(path):
        return []
    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MIDPHASE
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    rows = []
    for g in PANDA_PADS:
        c = [mjd.contact[i] for i in range(mjd.ncon) if tuple(mjd.contact.geom[i]) == g]
        rows.append((mjd.geom_xpos[list(g)], mjd.geom_xmat[list(g)].reshape(-1, 3, 3), mjm.geom_size[list(g)],
                     mjm.geom_margin[list(g)].sum(), np.array([x.dist for x in c]), np.array([x.pos for x in c]),
                     np.array([x.frame[:3] for x in c])))  # fmt: skip
    return rows


def test_box_box_touching():
    """Boxes touching face to face (issue 43: the Panda's closed finger pads), at distance 0 in exact arithmetic:
    relative yaws of 0, 45, 90, 180 degrees and random, in-face offsets, boxes of different sizes, the pair upright
    or in a common random frame, both geom orders; equal pads, one turned 180 degrees about the normal (as the
    Panda's); with $MJX_LITE_MENAGERIE the Panda's own pads at qpos0. MuJoCo finds 4 or more contacts or none by the
    sign of its rounding (both occur here); box_box on MuJoCo's poses gives MuJoCo's contacts."""
    rng = np.random.default_rng(43)
    sizes = [(0.1, 0.13, 0.16), (0.05, 0.07, 0.1), (0.2, 0.1, 0.05), (0.003, 0.002, 0.0035)]
    rows = []
    for k in range(24):
        s1, s2 = sizes[k % 4], sizes[(k // 4 + k) % 4]
        yaw1 = (0.0, np.pi / 3, rng.uniform(-np.pi, np.pi))[k % 3]
        yaw = (0.0, np.pi / 4, np.pi / 2, np.pi, rng.uniform(-np.pi, np.pi))[k % 5]
        q1, q2 = _quat([0, 0, yaw1]), _quat([0, 0, yaw1 + yaw])
        p2 = np.r_[rng.uniform(-0.5, 0.5, 2) * min(s1[:2]) * (k % 2), s1[2] + s2[2]]
        if k >= 12:  # the touching pair in a common random frame
            r, q = _random_quat(rng), np.zeros(4)
            mujoco.mju_mulQuat(q, r, q1)
            q1 = q.copy()
            mujoco.mju_mulQuat(q, r, q2)
            q2 = q.copy()
            mujoco.mju_rotVecQuat(p2, p2.copy(), r)
        base = rng.uniform(-1, 1, 3)
        for a, b in (((s1, base, q1), (s2, base + p2, q2)), ((s2, base + p2, q2), (s1, base, q1))):  # both orders
            rows.append(_free_boxes_contacts(a[0], b[0], np.r_[a[1], a[2], b[1], b[2]], 0.0))
    # equal pads as the Panda's: 180 degrees about a horizontal axis at 22.5 degrees, the other pad turned 180 degrees
    # about the world z, its centre 2 half-widths away along the pads' y axis
    pad = (0.003, 0.002, 0.0035)
    for k in range(8):
        qa, qz, qb, y = np.zeros(4), np.zeros(4), np.zeros(4), np.zeros(3)
        mujoco.mju_axisAngle2Quat(qa, np.array([np.cos(np.pi / 8), np.sin(np.pi / 8), 0]), np.pi)
        mujoco.mju_axisAngle2Quat(qz, np.array([0.0, 0, 1]), np.pi)
        mujoco.mju_mulQuat(qb, qz, qa)
        mujoco.mju_rotVecQuat(y, np.array([0.0, 1, 0]), qa)
        pa = np.array([0.0933, 0.0025, 0.8281]) + rng.uniform(-0.01, 0.01, 3) * (k % 4 > 0)
        pb = pa - 2 * pad[1] * y
        rows.append(_free_boxes_contacts(pad, pad, np.r_[pa, qa, pb, qb] if k % 2 else np.r_[pb, qb, pa, qa], 0.0))
    panda = _panda_pad_rows()
    counts = _box_box_vs_mujoco(rows + panda)
    upright = counts[:24]
    assert upright.count(0) >= 4 and sum(c >= 4 for c in upright) >= 8, counts
    assert all(c == 4 for c in counts[len(rows) :]), counts  # the Panda's pads: 4 contacts each


def test_pair_filters_and_params():
    """contype/conaffinity, parent-child, weld, exclude, explicit pair, priority and solmix mixing; pairs of two
    dof-less bodies (mocap-floor, mocap-mocap) are skipped as MuJoCo does, a mocap body against a free one is not."""
    xml = """<mujoco><worldbody>
      <geom name="floor" type="plane" size="3 3 .1" friction="0.5 0.01 0.001" solmix="2" priority="0"/>
      <body name="a" pos="0 0 0.09"><freejoint/>
        <geom name="a1" type="sphere" size=".1" condim="4" solref="0.03 1.1" friction="0.7 0.02 0.0001"/>
        <geom name="a2" type="box" size=".05 .05 .05" pos=".25 0 0" contype="2" conaffinity="2"/>
        <body name="c" pos="0 0 .15"><joint type="hinge"/><geom name="c1" type="sphere" size=".1"/></body>
      </body>
      <body name="b" pos=".5 0 0.09"><freejoint/>
        <geom name="b1" type="capsule" size=".1 .1" euler="0 90 0" priority="1" condim="1" solmix="0.1"/>
        <geom name="b2" type="sphere" size=".1" pos="-.2 0 0" solref="-100 -10" margin="0.02" gap="0.005"/>
      </body>
      <body name="e" pos="-.5 0 0.09"><freejoint/><geom name="e1" type="sphere" size=".1" solmix="0"/></body>
      <body name="m1" mocap="true" pos="0 .5 .05"><geom type="sphere" size=".1"/></body>
      <body name="m2" mocap="true" pos=".1 .5 .05"><geom type="capsule" size=".05 .1"/></body>
      <body name="m3" mocap="true" pos="-.5 .18 .09"><geom type="sphere" size=".1"/></body>
      </worldbody>
      <contact><exclude body1="a" body2="e"/>
        <pair geom1="c1" geom2="a1" condim="6" friction="1 1 .1 .01 .01" margin="0.3" gap="0.1"/></contact>
    </mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    m = model_from_mujoco(mjm)
    poses = [(mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3))]
    ours = mjl.active_contacts(m, _unbatch(_ours_batched(m, poses), 0))
    theirs = _mj_contacts(mjm, mjd.qpos)
    assert len(theirs["dist"]) >= 4
    _match(ours, theirs, ATOL_ANALYTIC)


def test_override_flag():
    xml = _xml("plane", "sphere").replace('multiccd="disable"', 'override="enable"')
    xml = xml.replace("<option", '<option o_margin="0.05" o_solref="0.05 2" o_friction="0.3 0.3 0.01 0.001 0.001"')
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0, 0, 0.14, 1, 0, 0, 0]
    mujoco.mj_kinematics(mjm, mjd)
    poses = [(mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3))]
    ours = mjl.active_contacts(m, _unbatch(_ours_batched(m, poses), 0))
    theirs = _mj_contacts(mjm, mjd.qpos)
    assert len(theirs["dist"]) == 1
    _match(ours, theirs, ATOL_ANALYTIC)


_TIE_SHAPES = {  # geom type, size, orientation and its height above its centre, for radius r
    "sphere": ("sphere", "{r}", "", 1), "capsule_up": ("capsule", "{r} {r}", "", 2),
    "capsule_flat": ("capsule", "{r} {r}", 'euler="90 0 0"', 1), "box": ("box", "{r} {r} {r}", "", 1),
    "cylinder": ("cylinder", "{r} {r}", "", 1), "ellipsoid": ("ellipsoid", "{r} {r} {r}", "", 1),
}


def _tie_bodies(shapes: tuple[str, ...], radii: tuple[float, ...]) -> list[tuple[str, float]]:
    """(shape, radius) of each free body of `_tie_scene`: every shape at each radius, radius-major."""
    return [(name, r) for r in radii for name in shapes]


def _tie_scene(base: str | None, radii: tuple[float, ...], shapes: tuple[str, ...]) -> str:
    """Free bodies of `shapes` at each radius in `radii` above a plane (base None) or above static `base` geoms of
    the same radius, one per body, colliding only with what is under them."""
    parts = []
    for i, (name, r) in enumerate(_tie_bodies(shapes, radii)):
        t, size, orient, _ = _TIE_SHAPES[name]
        if base is not None:
            bt, bsize, borient, _ = _TIE_SHAPES[base]
            parts.append(f'<geom type="{bt}" size="{bsize.format(r=r)}" {borient} pos="{3 * i} 0 0" contype="1" '
                         'conaffinity="0"/>')
        parts.append(f'<body pos="{3 * i} 0 1"><freejoint/><geom type="{t}" size="{size.format(r=r)}" {orient} '
                     'contype="2" conaffinity="1"/></body>')
    floor = '<geom type="plane" size="0 0 1" contype="1" conaffinity="0"/>' if base is None else ""
    # several static geoms in the world body: MuJoCo's midphase would first test their bounding boxes (an OBB
    # separating-axis test, which decides ties with its own rounding); the pair-by-pair path is what we reproduce
    flags = '<option><flag midphase="disable"/></option>' if base is not None else ""
    return f"<mujoco>{flags}<worldbody>{floor}{''.join(parts)}</worldbody></mujoco>"


@pytest.mark.parametrize("base", [None, pytest.param("sphere", marks=pytest.mark.slow),
                                  pytest.param("capsule_flat", marks=pytest.mark.slow)],
                         ids=["plane", "sphere", "capsule"])  # fmt: skip
def test_ties_at_margin(base):
    """Touching geoms at distance exactly 0, exactly at the margin and at margin + gap: the same contacts (count and
    distances) and constraint rows as MuJoCo, whose analytic colliders test the centre distance (cdist <= margin + r,
    |d|^2 <= (margin + r1 + r2)^2) and instantiate a row only when dist < includemargin (strict)."""
    shapes = (("sphere", "capsule_up", "capsule_flat", "box", "cylinder", "ellipsoid") if base is None
              else ("sphere", "capsule_up"))
    # both radii in one scene (their bodies apart): one compiled forward
    radii = (0.1, 0.3)
    bodies = _tie_bodies(shapes, radii)
    fwd = jax.jit(mjl.forward)
    xml = _tie_scene(base, radii, shapes)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    m = mjl.load_mjcf_string(xml)
    movable = np.asarray(mjm.body_geomadr[1:])  # each body's geom
    for margin, gap in ((0.0, 0.0), (0.01, 0.0), (0.003, 0.002)):
        mjm.geom_margin[movable] = margin
        mjm.geom_gap[movable] = gap
        mm = m.replace(geom_margin=jp.asarray(mjm.geom_margin), geom_gap=jp.asarray(mjm.geom_gap))
        for at in (0.0, margin, margin + gap):
            qpos = mjm.qpos0.copy()
            for i, (name, r) in enumerate(bodies):
                base_top = 0.0 if base is None else r * _TIE_SHAPES[base][3]
                qpos[7 * i + 2] = base_top + r * _TIE_SHAPES[name][3] + at
            mjd.qpos[:] = qpos
            mujoco.mj_forward(mjm, mjd)
            d = fwd(mm, mjl.make_data(mm).replace(qpos=jp.asarray(qpos)))
            act = np.asarray(d.contact.active)
            where = f"r={radii} margin={margin} gap={gap} at={at}"
            theirs = sorted(zip(mjd.contact.geom[: mjd.ncon, 1].tolist(), mjd.contact.dist[: mjd.ncon].tolist()))
            geom, dist = np.asarray(d.contact.geom)[act, 1], np.asarray(d.contact.dist)[act]
            ours = sorted(zip(geom.tolist(), dist.tolist()))
            assert [g for g, _ in ours] == [g for g, _ in theirs], where
            np.testing.assert_allclose([x for _, x in ours], [x for _, x in theirs], atol=1e-15, err_msg=where)
            assert int(np.sum(d.efc_mask)) == mjd.nefc, where
            np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, atol=1e-8, err_msg=where)


def test_static_table_no_retrace():
    mjm = mujoco.MjModel.from_xml_string(_xml("sphere", "box"))
    m = model_from_mujoco(mjm)
    traces = []

    @jax.jit
    def f(m, d):
        traces.append(1)
        return driver.collision(m, d).contact.dist

    d = mjl.make_data(m)
    f(m, d)
    m2 = m.replace(geom_size=m.geom_size * 1.1, geom_margin=m.geom_margin + 0.1, geom_friction=m.geom_friction * 2)
    f(m2, d)
    assert len(traces) == 1


def test_mesh_size_classes():
    """Mesh pairs are grouped by size class: each group's meshes (each side) are within Config.mesh_size_ratio of
    one another and the collider sees tables trimmed to its group's largest mesh; mesh_size_ratio = inf puts every
    mesh in one class (one group per type pair). With Config.mesh_class_merge (default 2) the classes of a collider
    that is costly to compile (box-mesh, mesh-mesh; not plane-mesh) share a group where that keeps the narrow-phase
    work within the factor, with the slots of the groups apart (the same rows, no pair left out that was kept).
    No compilation: the static table and traced shapes only."""
    m0 = mjl.load_mjcf(os.path.join(MJX_TEST_DATA, "convex.xml"))
    m = mjl.configure(m0, mesh_class_merge=1.0)  # classes apart
    hulls = hull.mesh_hulls(m)
    size = np.array([max(len(h.vert), len(h.face)) for h in hulls])
    dataid, gtype = np.asarray(m.geom_dataid), np.asarray(m.geom_type)

    def mesh_groups(m=m):
        out = []
        for g in driver.pair_table(m).groups:
            sides = [dataid[gids[gtype[gids] == GeomType.MESH]] for t, gids in ((g.type1, g.geom1), (g.type2, g.geom2))
                     if t == GeomType.MESH]  # fmt: skip (a mesh side may also take boxes: driver._boxes_as_meshes)
            if sides:
                out.append((g, sides))
        return out

    pairs = sum(len(g.geom1) for g, _ in mesh_groups())
    for g, sides in mesh_groups():
        for mids in sides:
            assert len(mids) == 0 or size[mids].max() <= m.config.mesh_size_ratio * size[mids].min()
        side = g.geom2 if g.type2 == GeomType.MESH else g.geom1
        d = mjl.make_data(m)
        info = jax.eval_shape(lambda d, side=side: driver._geom_info(m, d, jp.asarray(side), GeomType.MESH, side), d)
        assert info.vert.shape[1] == max(len(hulls[i].vert) for i in dataid[side])
    assert len(mesh_groups()) == 7  # convex.xml: sizes 4, 6 (tetrahedron, pyramid) and 36 (dodecahedron)

    merged = mesh_groups(mjl.configure(m, mesh_size_ratio=float("inf")))
    assert len(merged) == 3 and sum(len(g.geom1) for g, _ in merged) == pairs
    mesh = GeomType.MESH
    # box-mesh pairs run the mesh-mesh collider, the box as an 8-vertex hull: a group of their own here (the box
    # class -1 apart, mesh_class_merge = 1), of type (mesh, mesh)
    assert {(g.type1, g.type2) for g, _ in merged} == {(GeomType.PLANE, mesh), (mesh, mesh)}
    assert [set(gtype[g.geom1].tolist()) for g, _ in merged[1:]] == [{GeomType.BOX}, {mesh}]
    assert gtype[merged[0][0].geom1[0]] == GeomType.PLANE

    # the default merges classes of the costly colliders only, each merged group holding whole class groups with
    # their slots (narrow-phase pairs, manifold pairs, rows) added up
    apart = [g for g, _ in mesh_groups()]
    default = [g for g, _ in mesh_groups(m0)]
    assert sum(len(g.geom1) for g in default) == pairs and driver.pair_table(m0).nconmax == driver.pair_table(m).nconmax
    def plane(groups):
        return [(g.geom1.tolist(), g.geom2.tolist()) for g in groups if g.type1 == GeomType.PLANE]

    assert plane(default) == plane(apart)
    assert len(default) < len(apart)
    for g in default:
        key = {(a, b) for a, b in zip(g.geom1.tolist(), g.geom2.tolist())}
        parts = [h for h in apart if {(a, b) for a, b in zip(h.geom1.tolist(), h.geom2.tolist())} <= key]
        assert sum(len(h.geom1) for h in parts) == len(g.geom1)
        assert sum(h.npair_narrow for h in parts) == g.npair_narrow and sum(h.nrows for h in parts) == g.nrows


def test_grad_finite_small():
    """Gradients of a contact distance w.r.t. geom poses (analytic collider; every type: the slow test below). One
    compile: the collision's vjp, pulled back along two cotangents (vmapped): the loss below and the distance of the
    first active contact alone. (CI time: capsule-capsule, up to two contacts from the segments' closest points; the
    capsule-box collider's reverse pass compiled in 8.0 CPU-s, this one's in 1.7: its gradient is the slow test's.)"""
    mjm = mujoco.MjModel.from_xml_string(_xml("capsule", "capsule"))
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(1), 1, (-0.01,))
    d0 = mjl.make_data(m).replace(geom_xpos=host_array(poses[0][1]), geom_xmat=host_array(poses[0][2]))

    @jax.jit
    def grads(xpos, xmat):
        def f(xpos, xmat):
            c = driver.collision(m, d0.replace(geom_xpos=xpos, geom_xmat=xmat)).contact
            return (c.dist, c.pos), c

        (dist, pos), vjp, c = jax.vjp(f, xpos, xmat, has_aux=True)
        act = c.active.astype(dist.dtype)
        k = jp.argmax(c.active)
        # loss = sum(where(active, dist, 0)) + sum(where(active, pos, 0)); and dist[k]
        cot_dist = jp.stack([act, jp.zeros_like(dist).at[k].set(1.0)])
        cot_pos = jp.stack([jp.broadcast_to(act[:, None], pos.shape), jp.zeros_like(pos)])
        gp, gm = jax.vmap(lambda a, b: vjp((a, b)))(cot_dist, cot_pos)
        return gp, gm, c, k

    gp, gm, c, k = jax.device_get(grads(d0.geom_xpos, d0.geom_xmat))
    assert np.all(np.isfinite(gp[0])) and np.all(np.isfinite(gm[0]))
    assert np.any(gp[0] != 0)
    # first order: d dist / d pos(geom2) = normal, d dist / d pos(geom1) = -normal
    assert c.active[k]
    g = c.geom[k]
    grad = gp[1]
    n = c.frame[k, 0]
    np.testing.assert_allclose(grad[g[1]], n, atol=1e-5)
    np.testing.assert_allclose(grad[g[0]], -n, atol=1e-5)


def _cluster_model():
    """Two geoms of every convex type (and a plane) piled up so that every pair type collides."""
    rng = np.random.default_rng(4)
    bodies = []
    for k in range(2):
        for t in ("sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh"):
            x, y, z = rng.uniform(-0.04, 0.04, 3) + [0, 0, 0.08]
            bodies.append(f'<body pos="{x:.3f} {y:.3f} {z:.3f}" euler="{k * 30 + 10} {k * 20 + 5} 7"><freejoint/>'
                          f'{_geom(f"{t}{k}", t, MARGIN)}</body>')  # fmt: skip
    xml = f"""<mujoco><option><flag multiccd="disable"/></option><asset><mesh name="poly" vertex="{_MESH_VERTS}"/>
      </asset><worldbody><geom type="plane" size="3 3 .1"/>{"".join(bodies)}</worldbody></mujoco>"""
    return mujoco.MjModel.from_xml_string(xml)


@pytest.mark.slow
def test_grad_finite_every_pair_type():
    mjm = _cluster_model()
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    d0 = mjl.make_data(m).replace(
        geom_xpos=jp.asarray(mjd.geom_xpos), geom_xmat=jp.asarray(mjd.geom_xmat.reshape(-1, 3, 3))
    )
    table = driver.pair_table(m)
    offsets = np.cumsum([0] + [g.nrows for g in table.groups])

    def per_group(xpos, xmat):
        c = driver.collision(m, d0.replace(geom_xpos=xpos, geom_xmat=xmat)).contact
        val = jp.where(c.active, c.dist + 0.1 * jp.sum(c.pos, axis=-1) + 0.1 * c.frame[:, 0, 0], 0.0)
        return jp.stack([jp.sum(val[a:b]) for a, b in zip(offsets[:-1], offsets[1:])])

    c = jax.jit(driver.collision)(m, d0).contact
    active = np.asarray(c.active)
    jac_p, jac_m = jax.jit(jax.jacrev(per_group, argnums=(0, 1)))(d0.geom_xpos, d0.geom_xmat)
    assert np.all(np.isfinite(jac_p)) and np.all(np.isfinite(jac_m))
    for k in range(len(table.groups)):
        if active[offsets[k] : offsets[k + 1]].any():
            assert np.any(jac_p[k] != 0), table.groups[k]
    geom = np.asarray(c.geom)[active]
    types = {tuple(mjm.geom_type[g].tolist()) for g in geom}
    assert len(types) >= 25, sorted(types)  # (nearly) every pair type is exercised


@pytest.mark.slow
def test_float32():
    mjm = _cluster_model()
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    d = mjl.make_data(m).replace(
        geom_xpos=jp.asarray(mjd.geom_xpos), geom_xmat=jp.asarray(mjd.geom_xmat.reshape(-1, 3, 3))
    )

    def f32(x):
        return x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x

    m32, d32 = jax.tree_util.tree_map(f32, m), jax.tree_util.tree_map(f32, d)
    c64 = jax.jit(driver.collision)(m, d).contact
    c32 = jax.jit(driver.collision)(m32, d32).contact
    assert c32.dist.dtype == jp.float32 and c32.frame.dtype == jp.float32
    both = np.asarray(c64.active) & np.asarray(c32.active)
    assert both.sum() >= 0.9 * np.asarray(c64.active).sum()
    np.testing.assert_allclose(np.asarray(c32.dist)[both], np.asarray(c64.dist)[both], atol=1e-3)


_CURVED_PAIRS = [("ellipsoid", "ellipsoid"), ("sphere", "ellipsoid"), ("capsule", "ellipsoid"),
                 ("ellipsoid", "cylinder"), ("cylinder", "cylinder"), ("ellipsoid", "box"), ("capsule", "cylinder"),
                 ("cylinder", "box")]  # fmt: skip
_CURVED_SIZES = {"ellipsoid": (0.1, 0.15, 0.2), "cylinder": (0.1, 0.15, 0), "sphere": (0.12, 0, 0),
                 "capsule": (0.08, 0.12, 0), "box": (0.1, 0.12, 0.08)}  # fmt: skip


def _ellipsoid_support(pos, mat, size, d):
    """World support point of an ellipsoid (numpy, float64): pos + R D^2 R^T d / |D R^T d|."""
    loc = size * (mat.T @ d)
    return pos + mat @ (size * loc / np.linalg.norm(loc))


def _curved_poses(pairs, n_per, seed, rot_seeds, reach):
    """n_per random poses of each pair type (names of _CURVED_SIZES): numpy (types1, types2 (n,) int32, sizes1,
    sizes2 (n, 3), rotations1, rotations2 (n, 3, 3), positions2 (n, 3)), geom1 at the origin, geom2 at a distance
    drawn from `reach` (lo, hi) in a random direction."""
    from scipy.spatial.transform import Rotation

    rng = np.random.default_rng(seed)
    names = [p for p in pairs for _ in range(n_per)]
    n = len(names)
    t1 = np.array([getattr(GeomType, a.upper()) for a, _ in names], np.int32)
    t2 = np.array([getattr(GeomType, b.upper()) for _, b in names], np.int32)
    s1 = np.array([_CURVED_SIZES[a] for a, _ in names], float)
    s2 = np.array([_CURVED_SIZES[b] for _, b in names], float)
    m1 = Rotation.random(n, random_state=rot_seeds[0]).as_matrix()
    m2 = Rotation.random(n, random_state=rot_seeds[1]).as_matrix()
    u = rng.normal(size=(n, 3))
    p2 = u / np.linalg.norm(u, axis=1, keepdims=True) * rng.uniform(*reach, (n, 1))
    return t1, t2, s1, s2, m1, m2, p2


def test_curved_normals_float32():
    """GJK/EPA's contact normal of curved shapes, refined by Newton's method on the Minkowski support function
    (`refine.refine_normal`): in float32 within 1e-4 rad of float64's in 98 % and within 1e-3 in all of 1600 random
    penetrating and separated poses of 8 pair types (GJK/EPA alone: up to 0.28 rad; 7.5 % of ellipsoid pairs beyond
    1e-2, 82 % beyond 1e-3), points alike where the witness is unique or two sides cross, and in float64 optimal to
    round-off on ellipsoid pairs (the two support points differ along the normal). One compile per dtype: the
    general collider takes traced types."""
    n_per = 200
    t1, t2, s1, s2, m1, m2, p2 = _curved_poses(_CURVED_PAIRS, n_per, 0, (1, 2), (0.05, 0.35))
    n = len(t1)

    def collide(p1, m1, s1, t1, p2, m2, s2, t2):
        c = general.general_curved(GeomInfo(p1, m1, s1, gtype=t1), GeomInfo(p2, m2, s2, gtype=t2), None)
        return c.dist[0], c.pos[0], c.normal[0]

    f = jax.jit(jax.vmap(collide))
    out = {}
    for dt in (jp.float64, jp.float32):
        args = [jp.asarray(x, dt) for x in (np.zeros((n, 3)), m1, s1)] + [jp.asarray(t1)]
        args += [jp.asarray(x, dt) for x in (p2, m2, s2)] + [jp.asarray(t2)]
        out[dt] = [np.asarray(x, np.float64) for x in f(*args)]
    (d64, pos64, n64), (d32, pos32, n32) = out[jp.float64], out[jp.float32]
    clear = np.abs(d64) > 1e-4  # penetrating or separated, not touching
    assert clear.sum() > 0.9 * n
    err = np.linalg.norm(n32 - n64, axis=1)
    for k, pair in enumerate(_CURVED_PAIRS):
        e = err[k * n_per : (k + 1) * n_per][clear[k * n_per : (k + 1) * n_per]]
        assert np.mean(e > 1e-4) <= 0.02 and e.max() < 1e-3, (pair, np.sort(e)[-5:])
    np.testing.assert_allclose(d32[clear], d64[clear], atol=3e-5)
    perr = np.linalg.norm(pos32 - pos64, axis=1)
    for k, pair in enumerate(_CURVED_PAIRS):
        e = perr[k * n_per : (k + 1) * n_per][clear[k * n_per : (k + 1) * n_per]]
        # an ellipsoid or sphere gives a unique witness point; cylinder sides and caps are lines and faces: where two
        # cross, their nearest points; where one lies on the other, GJK/EPA's witness (as good as their tolerance)
        if {"ellipsoid", "sphere"} & set(pair):
            assert np.percentile(e, 98) < 1e-6, (pair, np.percentile(e, [50, 98, 100]))
        else:  # crossing sides and edges: the segments' nearest points; lines and faces in contact: GJK/EPA's
            assert np.percentile(e, 90) < 1e-5, (pair, np.percentile(e, [50, 90, 100]))
    # float64, ellipsoid-ellipsoid: the supports along +-n differ along n (optimality), to round-off
    across = []
    for i in range(n_per):
        a = _ellipsoid_support(np.zeros(3), m1[i], s1[i], n64[i])
        b = _ellipsoid_support(p2[i], m2[i], s2[i], -n64[i])
        across.append(np.linalg.norm((a - b) - np.dot(a - b, n64[i]) * n64[i]))
    # all but the deepest pose (0.22 m into 0.1 - 0.2 m ellipsoids, from an EPA normal 0.27 rad off) to round-off
    assert np.mean(np.array(across) < 1e-12) >= 0.99 and max(across) < 1e-6, np.sort(across)[-3:]


@pytest.mark.slow  # CI time: test_curved_normals_float32 covers float32 curved normals
def test_curved_mesh_normals_float32():
    """Curved shapes against a mesh that is not small (the test's icosahedron: 50 hull triangles + edges), whose faces
    and edges the refinement finds near its current normal (`refine._near_kinks`): over 300 random penetrating and
    separated poses each, the float32 normal is within 1e-4 rad of float64's in 98 % of ellipsoid-mesh and
    cylinder-mesh poses (the single contact of the cylinder-mesh collider), within 1e-4 in all ellipsoid-mesh poses
    and 1e-3 in all cylinder-mesh poses, and the distance within 3e-5. Without the mesh's kinks: 98 %
    within 8.9e-3 (ellipsoid-mesh) and 2.2e-3 (cylinder-mesh), median 3.7e-5 and 2.8e-6; now 1.2e-5 and 6.7e-5,
    median 1e-7 and 5e-7, maximum 2.7e-5 and 2.0e-4 (2.2e-3 while the refinement also tried the mesh's and the
    cylinder's radial frame axes, which are no kinks: one such candidate won by rounding)."""
    for (a, b), worst in ((("ellipsoid", "mesh"), 1e-4), (("cylinder", "mesh"), 1e-3)):
        mjm = mujoco.MjModel.from_xml_string(_xml(a, b))
        m = model_from_mujoco(mjm)
        d = mjl.make_data(m)
        t1, t2 = int(mjm.geom_type[0]), int(mjm.geom_type[1])
        n = 300
        *_, r1, r2, p2 = _curved_poses([(a, "sphere")], n, 6, (7, 8), (0.05, 0.25))
        i1 = driver._geom_info(m, d, jp.zeros(n, int), t1)._replace(pos=jp.zeros((n, 3)), mat=jp.asarray(r1))
        i2 = driver._geom_info(m, d, jp.ones(n, int), t2)._replace(pos=jp.asarray(p2), mat=jp.asarray(r2))
        out = {}
        for dt in (jp.float64, jp.float32):
            cast = functools.partial(_cast_floats, dtype=dt)
            f = jax.jit(jax.vmap(functools.partial(general.collide, t1, t2, sat_budget=m.config.sat_budget),
                                 in_axes=(ctypes.info_axes(i1), ctypes.info_axes(i2))))
            out[dt] = [np.asarray(x, np.float64) for x in f(cast(i1), cast(i2))]
        (d64, _, n64), (d32, _, n32) = out[jp.float64], out[jp.float32]
        clear = np.abs(d64) > 1e-4
        assert clear.sum() > 0.9 * n
        err = np.linalg.norm(n32 - n64, axis=1)[clear]
        assert np.percentile(err, 98) < 1e-4 and err.max() < worst, (a, b, np.percentile(err, [50, 98, 100]))
        np.testing.assert_allclose(d32[clear], d64[clear], atol=3e-5)


def _first(g):
    """The first pair's GeomInfo of a group's (the shared mesh tables as they are)."""
    axes = ctypes.info_axes(g)
    return type(g)(*[x if a is None or x is None else x[0] for x, a in zip(g, axes, strict=True)])


def _cast_floats(tree, dtype):
    return jax.tree_util.tree_map(lambda x: x.astype(dtype) if jp.issubdtype(x.dtype, jp.floating) else x, tree)


@pytest.mark.slow  # CI time: test_grad_finite_small covers collider gradients in the default selection
def test_curved_distance_grad():
    """jax.grad of a curved pair's distance w.r.t. geom2's position (float64, the general collider with traced types:
    one compile) equals central differences to 1e-7 on 60 random penetrating and separated poses of 6 pair types.
    Through GJK/EPA alone it was up to 0.1 off (ellipsoid pairs): EPA's normal is only square-root accurate, and
    its derivative follows the polytope; the Newton refinement converges, so its derivative is the distance's."""
    poses = _curved_poses(_CURVED_PAIRS[:6], 10, 3, (4, 5), (0.1, 0.3))
    t1, t2, s1, s2, m1, m2, p2 = (jp.asarray(x) for x in poses)

    def dist(p2, m1, s1, t1, m2, s2, t2):
        g1, g2 = GeomInfo(jp.zeros(3), m1, s1, gtype=t1), GeomInfo(p2, m2, s2, gtype=t2)
        return general.general_curved(g1, g2, None).dist[0]

    args = (m1, s1, t1, m2, s2, t2)
    grad = jax.jit(jax.vmap(jax.grad(dist)))(p2, *args)
    f = jax.jit(jax.vmap(dist))
    eps = 1e-6
    fd = np.stack([(f(p2.at[:, i].add(eps), *args) - f(p2.at[:, i].add(-eps), *args)) / (2 * eps) for i in range(3)],
                  -1)  # fmt: skip
    np.testing.assert_allclose(np.asarray(grad), fd, atol=1e-7)


def test_many_spheres_broadphase_vmap():
    n = 220
    rng = np.random.default_rng(3)
    bodies = "".join(
        f'<body pos="{x} {y} {z}"><freejoint/><geom type="{"sphere" if i % 2 else "box"}" size=".05 .05 .05"/></body>'
        for i, (x, y, z) in enumerate(rng.uniform([-1, -1, 0.0], [1, 1, 1.0], size=(n, 3)).round(3))
    )
    xml = f'<mujoco><worldbody><geom type="plane" size="3 3 .1"/>{bodies}</worldbody></mujoco>'
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = model_from_mujoco(mjm)
    table = driver.pair_table(m)
    trimmed = [g for g in table.groups if g.capacity < len(g.geom1)]
    assert trimmed, "the sphere-sphere group should go through the broadphase"
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_collision(mjm, mjd)
    poses = [(mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3))] * 2
    d = _ours_batched(m, poses)
    assert d.contact.dist.shape == (2, m.nconmax)
    ours = mjl.active_contacts(m, _unbatch(d, 0))
    theirs = _mj_contacts(mjm, mjd.qpos)
    assert int(d.warning_number[0, W.CONTACTFULL]) == 0
    # sphere/plane/box-sphere pairs are analytic; box-box deepest contacts are compared by the box-box test
    keep_t = np.array([mjm.geom_type[g].tolist() != [6, 6] for g in theirs["geom"]], bool)
    keep_o = np.array([mjm.geom_type[g].tolist() != [6, 6] for g in ours["geom"]], bool)
    _match({k: v[keep_o] for k, v in ours.items()}, {k: v[keep_t] for k, v in theirs.items()}, ATOL_ANALYTIC)


def test_broadphase_overflow_warns():
    n = 40
    bodies = "".join(
        f'<body pos="0 0 {0.01 * i}"><freejoint/><geom type="sphere" size="0.1"/></body>' for i in range(n)
    )
    mjm = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{bodies}</worldbody></mujoco>")
    m = mjl.configure(model_from_mujoco(mjm), broadphase_min_pairs=100)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    d = mjl.make_data(m).replace(
        geom_xpos=jp.asarray(mjd.geom_xpos), geom_xmat=jp.asarray(mjd.geom_xmat.reshape(-1, 3, 3))
    )
    d = jax.jit(driver.collision)(m, d)
    assert int(d.warning_number[W.CONTACTFULL]) == 1
    assert int(d.ncon) == driver.pair_table(m).groups[0].capacity


_EXACT_TYPES = {
    tuple(int(getattr(mujoco.mjtGeom, f"mjGEOM_{t.upper()}")) for t in p) for p, full in ANALYTIC.items() if full
}
REFERENCE = ["humanoid/humanoid.xml", "convex.xml", "suite/cheetah.xml", "suite/walker.xml", "suite/stacker.xml",
             "suite/humanoid_CMU.xml", "suite/manipulator.xml", "suite/ball_in_cup.xml"]  # fmt: skip
REFERENCE_FAST = {"humanoid/humanoid.xml"}


def _reference_path(name):
    from tests.oracle import DM_SUITE, MJX_TEST_DATA

    return (
        os.path.join(DM_SUITE, name[len("suite/") :])
        if name.startswith("suite/")
        else os.path.join(MJX_TEST_DATA, name)
    )


@pytest.mark.parametrize(
    "name", [n if n in REFERENCE_FAST else pytest.param(n, marks=pytest.mark.slow) for n in REFERENCE]
)
def test_reference_models(name):
    """Random states of reference models: the same geom pairs collide; analytic pairs match contact by contact,
    general convex pairs by their deepest contact (distance; position and normal against MuJoCo run to
    convergence, `_check_convex`)."""
    mjm = mujoco.MjModel.from_xml_path(_reference_path(name))
    # our general convex path is MuJoCo's GJK/EPA single contact; multi-point (multiccd) manifolds are not built
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MULTICCD
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(11)
    poses = []
    for _ in range(4):
        mjd.qpos[:] = mjm.qpos0 + rng.normal(size=mjm.nq) * 0.3
        mujoco.mj_normalizeQuat(mjm, mjd.qpos)
        mujoco.mj_kinematics(mjm, mjd)
        poses.append((mjd.qpos.copy(), mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    d = _ours_batched(m, poses)
    tight = _converged(mjm)
    total = 0
    for i, (qpos, _, _) in enumerate(poses):
        ours = mjl.active_contacts(m, _unbatch(d, i))
        theirs = _mj_contacts(mjm, qpos)
        converged = _mj_contacts(tight, qpos)
        assert int(d.warning_number[i, W.CONTACTFULL]) == 0
        total += len(theirs["dist"])
        pairs_o = {tuple(g) for g in ours["geom"].tolist()}
        pairs_t = {tuple(g) for g in theirs["geom"].tolist()}
        assert pairs_o == pairs_t
        for pr in pairs_t:
            so = {k: v[np.all(ours["geom"] == pr, axis=1)] for k, v in ours.items()}
            st = {k: v[np.all(theirs["geom"] == pr, axis=1)] for k, v in theirs.items()}
            if tuple(int(t) for t in mjm.geom_type[list(pr)]) in _EXACT_TYPES:
                _match(so, st, ATOL_ANALYTIC)
            else:  # the deepest contacts, also against MuJoCo run to convergence
                sc = {k: v[np.all(converged["geom"] == pr, axis=1)] for k, v in converged.items()}
                a, b, c = np.argmin(so["dist"]), np.argmin(st["dist"]), np.argmin(sc["dist"])
                np.testing.assert_allclose(so["dist"][a], st["dist"][b], atol=ATOL_CONVEX)
                np.testing.assert_allclose(so["dist"][a], sc["dist"][c], atol=ATOL_CONVEX)
                np.testing.assert_allclose(so["pos"][a], sc["pos"][c], atol=ATOL_CONVEX)
                np.testing.assert_allclose(so["frame"][a][0], sc["frame"][c][0], atol=ATOL_CONVEX)
    assert total > 0


def _quat_mat(q):
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    return mat.reshape(3, 3)


def _brute_depth(w1, w2, tris1, tris2):
    """Penetration depth of two convex polytopes (world vertices (V, 3)) by brute force: the least overlap over
    every face normal and every cross product of two vertex-difference directions of each hull (a superset of the
    edge pairs), projecting all vertices; <= 0 when separated."""

    def face_normals(w, tris):
        n = np.cross(w[tris[:, 1]] - w[tris[:, 0]], w[tris[:, 2]] - w[tris[:, 0]])
        keep = np.linalg.norm(n, axis=1) > 1e-12
        return n[keep] / np.linalg.norm(n[keep], axis=1, keepdims=True)

    def dirs(w, tris):
        e = np.concatenate([w[tris[:, (k + 1) % 3]] - w[tris[:, k]] for k in range(3)])
        e = e[np.linalg.norm(e, axis=1) > 1e-12]
        # an edge shared by two triangles comes once each way (exactly negated): one sign, each direction once
        lead = e[np.arange(len(e)), np.argmax(np.abs(e) > 0, axis=1)]
        return np.unique(np.where(lead[:, None] < 0, -e, e), axis=0)

    u = np.cross(dirs(w1, tris1)[:, None], dirs(w2, tris2)[None]).reshape(-1, 3)
    u = u[np.linalg.norm(u, axis=1) > 1e-9]
    axes = np.concatenate([face_normals(w1, tris1), face_normals(w2, tris2), u / np.linalg.norm(u, axis=1)[:, None]])
    axes = np.concatenate([axes, -axes])
    overlap = np.max(w1 @ axes.T, axis=0) - np.min(w2 @ axes.T, axis=0)
    return overlap.min()


def _loop_lengths(jaxpr) -> list[tuple[str, int | None]]:
    """(primitive, scan length) of every while and scan loop in a (closed) jaxpr, nested ones included."""
    out = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in ("while", "scan"):
            out.append((eqn.primitive.name, eqn.params.get("length")))
        stack = list(eqn.params.values())
        while stack:
            v = stack.pop()
            if isinstance(v, (list, tuple)):
                stack.extend(v)
            elif hasattr(v, "eqns"):
                out += _loop_lengths(v)
            elif hasattr(v, "jaxpr") and hasattr(v.jaxpr, "eqns"):
                out += _loop_lengths(v.jaxpr)
    return out


def _sat_budget_models():
    """(mjm, m, m_epa, poses, d) of the box-mesh scene with multiccd on: the default model and `sat_budget=0`."""
    mjm = mujoco.MjModel.from_xml_string(_xml("box", "mesh", flags=""))  # multiccd on: the box-mesh collider
    m = model_from_mujoco(mjm)
    m_epa = mjl.configure(m, sat_budget=0)
    poses = _poses(mjm, np.random.default_rng(12), 6, TARGETS)
    d = _posed(m, [p[1] for p in poses], [p[2] for p in poses])
    return mjm, m, m_epa, poses, d


def test_sat_budget_is_the_models_configuration():
    """`m.config.sat_budget` decides per model whether box-mesh pairs (multiccd) find their normal by separating axes
    or by GJK/EPA: the one jitted collision of this module traces, for the default model, separating axes and then
    GJK's early-exit while loop, and for `configure(m, sat_budget=0)` one more while loop, EPA's (both polytope
    loops run only until they converge: no fixed-length GJK or EPA scan in either). With the old module global
    (`convex.SAT_BUDGET`) both traces took the separating axes. Traced only (no compile): the EPA model's contacts
    against MuJoCo are test_sat_budget_zero_matches_mujoco's (slow). (CI time: one environment's collision traced,
    not the vmapped one's: the same loops, without the batching pass.)"""
    _, m, m_epa, _, d = _sat_budget_models()
    d = _unbatch(d, 0)
    assert driver.pair_table(m).groups[0].collider.keywords == {"sat_budget": m.config.sat_budget}
    assert driver.pair_table(m_epa).groups[0].collider.keywords == {"sat_budget": 0}
    fixed, whiles = {}, {}
    for name, model in (("sat", m), ("epa", m_epa)):
        loops = _loop_lengths(_COLLIDE_ONE.trace(model, d).jaxpr.jaxpr)
        fixed[name] = sorted(n for p, n in loops if p == "scan" and n in (gjk.GJK_ITERATIONS, epa.EPA_ITERATIONS))
        whiles[name] = sum(p == "while" for p, _ in loops)
    assert fixed == {"sat": [], "epa": []} and whiles["epa"] == whiles["sat"] + 1, (fixed, whiles)


# slow (CI time, ~13 s: the EPA model's box-mesh collision compiles on its own): GJK/EPA on box-mesh pairs stays in
# the default selection through test_general_convex_pairs[box-mesh] (dist, point and normal against MuJoCo), the
# multiccd box-mesh path through tests/test_collision_multiccd.py, the sat_budget switch through the test above
@pytest.mark.slow
def test_sat_budget_zero_matches_mujoco():
    """`configure(m, sat_budget=0)` (box-mesh pairs, multiccd on, by GJK/EPA) matches MuJoCo's deepest contact at the
    GJK/EPA tolerance (the default path is compared with MuJoCo by the multiccd tests)."""
    mjm, _, m_epa, poses, d = _sat_budget_models()
    out = jax.device_get(_COLLIDE(m_epa, d))
    for i, (qpos, _, _) in enumerate(poses):
        ours = mjl.active_contacts(m_epa, _unbatch(out, i))
        _match(ours, _mj_contacts(mjm, qpos), ATOL_CONVEX, deepest_only=True)


def test_sat_depth_exact():
    """Separating-axis penetration of box/mesh pairs (its edge pairs pruned by the Gauss-map test) equals a
    brute-force minimum over all face normals and edge crosses, and the overlap along its normal is that depth,
    on random deep poses of convex.xml's meshes and a box."""
    mjm = mujoco.MjModel.from_xml_path(os.path.join(MJX_TEST_DATA, "convex.xml"))
    m = model_from_mujoco(mjm)
    d = mjl.make_data(m)
    box = int(np.flatnonzero(mjm.geom_type == mujoco.mjtGeom.mjGEOM_BOX)[0])
    meshes = np.flatnonzero(mjm.geom_type == mujoco.mjtGeom.mjGEOM_MESH).tolist()
    rng = np.random.default_rng(5)
    compiled = {}

    def polytope_sat(g1, g2, t1, t2, r1, p2, r2):
        """Depth (n,), normal (n, 3) of geoms g1, g2 at n poses and the two sides' vertex/face tables: one compile per
        type pair, the geom infos built inside it (the mesh tables are shared by the vmap; no eager ops)."""
        if (t1, t2) not in compiled:

            def run(g1, g2, r1, p2, r2):
                n = r1.shape[0]
                a = driver._geom_info(m, d, jp.full(n, g1), t1)._replace(pos=jp.zeros((n, 3)), mat=r1)
                b = driver._geom_info(m, d, jp.full(n, g2), t2)._replace(pos=p2, mat=r2)
                axes = (ctypes.info_axes(a), ctypes.info_axes(b))
                depth, normal, _ = jax.vmap(
                    lambda a, b: sat.polytope_sat(a, sat.sat_tables(t1, a), b, sat.sat_tables(t2, b)), axes
                )(a, b)
                v1, f1, *_ = sat.sat_tables(t1, _first(a))
                v2, f2, *_ = sat.sat_tables(t2, _first(b))
                return depth, normal, v1, f1, v2, f2

            compiled[t1, t2] = jax.jit(run)
        return jax.device_get(compiled[t1, t2](g1, g2, r1, p2, r2))

    checked = 0
    for g1, g2 in [(box, meshes[1])] + [(a, b) for a in meshes for b in meshes]:
        t1, t2 = int(mjm.geom_type[g1]), int(mjm.geom_type[g2])
        n = 24
        r1 = np.stack([_quat_mat(_random_quat(rng)) for _ in range(n)])
        r2 = np.stack([_quat_mat(_random_quat(rng)) for _ in range(n)])
        p2 = rng.normal(size=(n, 3)) * 0.3 * (mjm.geom_rbound[g1] + mjm.geom_rbound[g2])
        depth, normal, v1, f1, v2, f2 = polytope_sat(g1, g2, t1, t2, r1, p2, r2)
        for k in range(n):
            w1 = np.asarray(v1) @ r1[k].T
            w2 = p2[k] + np.asarray(v2) @ r2[k].T
            want = _brute_depth(w1, w2, np.asarray(f1), np.asarray(f2))
            if want <= 0:
                continue
            checked += 1
            nk = np.asarray(normal[k])
            np.testing.assert_allclose(float(depth[k]), want, atol=1e-9)
            np.testing.assert_allclose(np.max(w1 @ nk) - np.min(w2 @ nk), want, atol=1e-9)
    assert checked > 100


def test_gjk_stops_float32():
    """GJK's steps (`gjk.gjk_step`, as `gjk.gjk_polytopes` runs them where a sphere-mesh or capsule-mesh pair is
    apart within the margin) on a sphere's centre and a capsule's core segment against a 200-vertex hull, 128 random
    poses each, float32: every pose stops within 15 of the GJK_ITERATIONS steps (under vmap the early-exit loop runs
    until its last lane stops), at float64's distance to 2e-6. With the absolute tolerance alone (v . (v - p) <= tol^2,
    below float32 rounding for some poses) 14 of the sphere's poses never stopped: they added and dropped the same
    support point until the last step."""
    rng = np.random.default_rng(0)
    n = 128
    hull = rng.normal(size=(200, 3))
    hull = hull / np.linalg.norm(hull, axis=1, keepdims=True) * [0.1, 0.08, 0.06]
    u = rng.normal(size=(n, 3))
    pos = u / np.linalg.norm(u, axis=1, keepdims=True) * rng.uniform(0.1, 0.16, size=(n, 1))
    mat = np.stack([_quat_mat(_random_quat(rng)) for _ in range(n)])

    def run(dt):
        """Both types' poses in one program per dtype (CI time: one trace of the steps, not one per type): the first n
        lanes the sphere's, the next n the capsule's; the type traced with those two choices (`support.typed`), each
        lane's support selected from its own type's branch."""

        def one(t, p, r, hull):
            size = jp.asarray([0.02, 0.04, 0.0], dt)
            mesh = GeomInfo(jp.zeros(3, dt), jp.eye(3, dtype=dt), jp.zeros(3, dt), vert=hull)
            g1 = GeomInfo(p, r, size)
            t1 = support.typed(t, (GeomType.SPHERE, GeomType.CAPSULE))

            def sup(d):
                return support.support(t1, g1, d), support.support(GeomType.MESH, mesh, -d)

            def body(c, it):
                w, mask, v, stop, first = c
                conv, _, _, w2, keep, v2, _ = gjk.gjk_step(sup, w, mask, v, jp.asarray(1e-5, dt))
                hold = stop | conv
                return (jp.where(hold, w, w2), jp.where(hold, mask, keep), jp.where(hold, v, v2),
                        hold | (jp.sum(keep) == 4), jp.where(stop, first, it)), None  # fmt: skip

            c0 = (jp.zeros((4, 3), dt), jp.zeros(4, bool), p + jp.asarray([1e-3, 0, 0], dt), jp.zeros((), bool), -1)
            (_, _, v, stop, first), _ = jax.lax.scan(body, c0, jp.arange(gjk.GJK_ITERATIONS))
            return stop, first, jp.linalg.norm(v)

        # host casts and the constants built in the program: no eager device ops (each a tiny compile)
        f = jax.jit(jax.vmap(one, in_axes=(0, 0, 0, None)))
        types = np.repeat(np.array([GeomType.SPHERE, GeomType.CAPSULE], np.int32), n)
        return jax.device_get(f(types, np.tile(pos, (2, 1)).astype(dt), np.tile(mat, (2, 1, 1)).astype(dt),
                                hull.astype(dt)))  # fmt: skip

    out32, out64 = run(jp.float32), run(jp.float64)
    for k, t1 in enumerate((GeomType.SPHERE, GeomType.CAPSULE)):
        lanes = slice(k * n, (k + 1) * n)
        stop, first, dist32 = (x[lanes] for x in out32)
        dist64 = out64[2][lanes]
        assert stop.all() and first.max() < 15, (t1, int((~stop).sum()), first.max())
        np.testing.assert_allclose(dist32, dist64, atol=2e-6)


@pytest.mark.parametrize("t1", [pytest.param("mesh", marks=pytest.mark.slow), "sphere",
                                pytest.param("capsule", marks=pytest.mark.slow),
                                pytest.param("box", marks=pytest.mark.slow)])  # fmt: skip
def test_polytope_distance_grad(t1):
    """Box-mesh and mesh-mesh distances (separating axes; GJK only within the margin, a while loop whose simplex is
    rebuilt from live support points), sphere-mesh (face planes) and capsule-mesh (separating axes of the core
    segment), GJK the same way: jax.grad w.r.t. geom2's position and rotation equals central differences, separated
    within the margin and penetrating."""
    from jax.scipy.linalg import expm

    h = 1e-6
    mjm = mujoco.MjModel.from_xml_string(_xml(t1, "mesh", margin=0.03))
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(7)
    d0 = mjl.make_data(m)

    def dist(theta, xpos, xmat):
        skew = jp.array([[0, -theta[5], theta[4]], [theta[5], 0, -theta[3]], [-theta[4], theta[3], 0]])
        d = d0.replace(geom_xpos=xpos.at[1].add(theta[:3]), geom_xmat=xmat.at[1].set(expm(skew) @ xmat[1]))
        return driver.collision(m, d).contact.dist[0]

    vg = jax.jit(jax.value_and_grad(dist))  # one compiled program for the gradient and the values

    def f(*args):
        return vg(*args)[0]

    for gap in (0.02, -0.01):  # summed margins 0.06: both make a contact
        mjd.qpos[:] = np.r_[0, 0, 0, _random_quat(rng), 0, 0, 0, _random_quat(rng)]
        lo, hi = -0.3, 0.6
        for _ in range(50):  # geom2's height where MuJoCo's distance is `gap`
            mjd.qpos[9] = 0.5 * (lo + hi)
            lo, hi = (lo, mjd.qpos[9]) if _mj_mindist(mjm, mjd) > gap else (mjd.qpos[9], hi)
        mujoco.mj_kinematics(mjm, mjd)
        xpos, xmat = jp.asarray(mjd.geom_xpos), jp.asarray(mjd.geom_xmat.reshape(-1, 3, 3))
        g = np.asarray(vg(jp.zeros(6), xpos, xmat)[1])
        fd = np.array([(f(h * e, xpos, xmat) - f(-h * e, xpos, xmat)) / (2 * h) for e in np.eye(6)])
        np.testing.assert_allclose(float(f(jp.zeros(6), xpos, xmat)), gap, atol=1e-6)
        np.testing.assert_allclose(g, fd, atol=1e-6)
        assert np.linalg.norm(g[:3]) > 0.5  # d dist / d pos = the normal


# the same arithmetic in a larger polytope, fused differently by XLA (measured: 9 of 24 depths 1 ulp off, 5.6e-17)
EPA_LIMIT_ATOL = 1e-15


# slow: the per-pair EPA limit serves only `Config.merge_curved_mesh` (off by default); its merged contacts are checked
# by the slow tests/test_collision_program.py::test_curved_and_mesh_merged_equal
@pytest.mark.slow
def test_epa_limit_equals_shorter_scan():
    """`epa.epa` with a per-pair `limit` (the iterations from it on are no-ops; `general.general_mixed` runs the curved
    pairs' short EPA and the mesh pairs' full one in one program) gives the answer of a scan of `limit` iterations
    to rounding (EPA_LIMIT_ATOL), on 24 penetrating ellipsoid-box and cylinder-box poses (float64)."""
    t1, t2, s1, s2, m1, m2, p2 = _curved_poses([("ellipsoid", "box"), ("cylinder", "box")], 12, 5, (6, 7), (0.02, 0.1))
    args = tuple(jp.asarray(x) for x in (t1, t2, s1, s2, m1, m2, p2))
    tol = jp.asarray(1e-9)

    def run(t1, t2, s1, s2, m1, m2, p2, short, limited):
        g1, g2 = GeomInfo(jp.zeros(3), m1, s1), GeomInfo(p2, m2, s2)
        a, b = support.typed(t1, (GeomType.ELLIPSOID, GeomType.CYLINDER)), GeomType.BOX

        def sup(d):
            return support.support(a, g1, d), support.support(b, g2, -d)

        w, wa, mask, _, _, inside = gjk.gjk(sup, g1.pos - g2.pos + 1e-3, jp.asarray(1e-10))
        tet, teta, _ = epa.complete_simplex(sup, w, wa, mask)
        w, wa = jp.where(inside, w, tet), jp.where(inside, wa, teta)
        if limited:
            limit = jp.where(short, epa.EPA_ITERATIONS_CURVED, epa.EPA_ITERATIONS)
            return epa.epa(sup, w, wa, tol, epa.EPA_ITERATIONS, limit)
        return epa.epa(sup, w, wa, tol, epa.EPA_ITERATIONS_CURVED if short else epa.EPA_ITERATIONS)

    # the short count (the full one's limit equals the scan's length: every iteration runs)
    want = jax.jit(jax.vmap(functools.partial(run, short=True, limited=False)))(*args)
    got = jax.jit(jax.vmap(functools.partial(run, short=jp.asarray(True), limited=True)))(*args)
    assert np.all(np.asarray(want[0]) > 0)  # penetrating: EPA's answer
    for x, y in zip(got, want):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=EPA_LIMIT_ATOL)
