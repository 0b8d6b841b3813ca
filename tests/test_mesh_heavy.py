"""Mesh-heavy manipulators (issue 43): a generated gripper with Robotiq-sized meshes (tests/meshheavy.py: a
16,802-vertex link whose hull has 842 vertices, a 144-gon pad) compiles as MuJoCo does, its compiled step's
temporary memory stays within a bound proportional to its Data, and its forward pass matches MuJoCo's at random
states and in a grasp. The compile of the step takes minutes on a 2-core machine: those tests are slow; the
Menagerie robots themselves are measured by benchmarks/menagerie.py."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver, hull, polyhedral, polytope, support  # noqa: E402
from mjx_lite.collision.types import GeomInfo  # noqa: E402
from tests.meshheavy import gripper  # noqa: E402
from tests.oracle import compare_models  # noqa: E402

# XLA's temporary buffer of a compiled step over the bytes of its Data: the bound catches per-pair products of mesh
# sizes (before issue 43 the Robotiq 2F-85 asked for 130 GB, a ratio of about 10^6). Measured (float64, CPU): the
# gripper 66 (6.3 MB over 96 kB: a tiny Data beside the work arrays of 842-vertex hulls; 32 before its hull was
# triangulated as MuJoCo's, whose fan triangulation of the 144-gon faces gives a vertex 143 edges), dm_control's
# cartpole 4.5, the MJX humanoid 0.9.
TEMP_PER_DATA = 128
# qacc relative to the largest |qacc|: a contact's reference acceleration moves with its distance by the contact
# stiffness 1 / (dmax timeconst)^2 = 2.8e3 / s^2 (solref 0.02, solimp dmax 0.95), so GJK/EPA distances equal to 1e-7
# move a qacc of ~170 (a finger pressed on the object) by 3e-4, 1.6e-6 of it (measured: state 2)
QACC_TOL = 5e-6
DIST_TOL = 1e-6  # contact distances: face manifolds in closed form, single contacts from converged GJK/EPA
PUCK_FLOOR = (0, 7)  # geom ids of the floor and the puck
PUCK_DOF = 8  # the puck's free joint: dofs 8-13 (fingers 0-1, object 2-7)


@pytest.fixture(scope="module")
def models():
    xml, assets = gripper()
    return mjl.load_mjcf_string(xml, assets), mujoco.MjModel.from_xml_string(xml, assets)


def test_compiles_like_mujoco(models):
    """Field by field, and our hull triangles are MuJoCo's hull graph's (qhull on the vertices as read, in file
    order: the 144-gon faces are triangulated as MuJoCo does; 182 of 572 triangles agreed when the points were
    sorted), so a plane-mesh contact's hull neighbours are MuJoCo's."""
    m, mjm = models
    assert compare_models(m, mjm) == []
    for i in range(mjm.nmesh):
        g = mjm.mesh_graph[mjm.mesh_graphadr[i] :]
        nv, nf = int(g[0]), int(g[1])
        theirs = {tuple(sorted(f)) for f in np.reshape(g[2 + 3 * nv + 3 * nf : 2 + 3 * nv + 6 * nf], (-1, 3)).tolist()}
        adr, num = int(m.mesh_hullfaceadr[i]), int(m.mesh_hullfacenum[i])
        ours = {tuple(sorted(f)) for f in np.asarray(m.mesh_hullface).reshape(-1, 3)[adr : adr + num].tolist()}
        assert ours == theirs, (i, len(ours & theirs), len(theirs))


def test_mesh_groups_trimmed(models):
    """The gripper's box-mesh (10 candidates) and mesh-mesh (8) pairs run their distance stage on the 6 candidates
    of each whose bounding boxes overlap most (Config.broadphase_mesh_min_pairs, broadphase_mesh_fraction) and their
    manifold on the 4 closest of each within the margin (Config.broadphase_mesh_touch), all 4 rows of each kept: in
    one group, the boxes as 8-vertex hulls (one compiled mesh-mesh collider: driver._boxes_as_meshes)."""
    m, _ = models
    groups = [g for g in driver.pair_table(m).groups if g.type1 != 0 and g.type2 == mjl.types.GeomType.MESH]
    got = [(len(g.geom1), g.npair_narrow, g.touch, g.nrows) for g in groups]
    assert got == [(18, 12, 8, 32)], got
    assert groups[0].collider.func is polyhedral.mesh_mesh


@pytest.fixture(scope="module")
def compiled_step(models):
    m, _ = models
    d = mjl.make_data(m)
    return jax.jit(mjl.step).lower(m, d).compile(), d


def _nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


@pytest.mark.slow
def test_step_memory_bounded(compiled_step):
    step, d = compiled_step
    temp = step.memory_analysis().temp_size_in_bytes
    assert temp <= TEMP_PER_DATA * _nbytes(d), (temp, _nbytes(d))


def _states():
    """MuJoCo states: random poses of the object and the puck near the pads, links and floor (fingers anywhere in
    their range), and the grasp after 400 steps of closing the fingers on the object."""
    xml, assets = gripper()
    mjm = mujoco.MjModel.from_xml_string(xml, assets)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(43)
    out = []
    for _ in range(6):
        mujoco.mj_resetData(mjm, mjd)
        q = rng.uniform(0, 0.012)
        mjd.qpos[:2] = q
        quat = rng.normal(size=4)
        mjd.qpos[2:9] = np.r_[rng.uniform(-0.004, 0.004, 2), rng.uniform(0.008, 0.03), quat / np.linalg.norm(quat)]
        quat = rng.normal(size=4) * [1, 0.1, 0.1, 1]
        mjd.qpos[9:16] = np.r_[rng.uniform(-0.03, 0.03), rng.uniform(0.02, 0.04), rng.uniform(0.0, 0.01),
                               quat / np.linalg.norm(quat)]  # fmt: skip
        mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.05
        mjd.ctrl[:] = rng.uniform(0, 0.03)
        mujoco.mj_forward(mjm, mjd)
        out.append(_snapshot(mjm, mjd))
    mujoco.mj_resetData(mjm, mjd)
    mjd.qpos[9:12] += [0.0, 0.01, 0.002]  # the puck tilted on the floor: no flat-face tie (see test docstring)
    mjd.qpos[12:16] = [np.cos(0.05), np.sin(0.05), 0, 0]
    mjd.ctrl[0] = 0.03
    for _ in range(400):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    out.append(_snapshot(mjm, mjd))
    return out


def _snapshot(mjm, mjd):
    c = mjd.contact[: mjd.ncon]
    contacts = sorted(zip(np.asarray(c.geom1).tolist(), np.asarray(c.geom2).tolist(), np.asarray(c.dist).tolist()))
    return {"qpos": mjd.qpos.copy(), "qvel": mjd.qvel.copy(), "ctrl": mjd.ctrl.copy(),
            "warm": mjd.qacc_warmstart.copy(), "qacc": mjd.qacc.copy(), "contacts": contacts}  # fmt: skip


@pytest.mark.slow
def test_forward_matches_mujoco(models, compiled_step):
    """Our step's forward pass (its qacc and contacts, computed at the input state) against mj_forward at random
    states and in the grasp: every contact (geoms, distance) and qacc. Contact pairs are geom-sorted as MuJoCo
    orders a mesh pair by geom type. Not compared: the puck's extra plane-mesh contacts (MuJoCo 4.0 chooses them by
    a rule we do not reproduce: up to 4 spread over a face resting flat, where we take up to 2 hull neighbours of
    the deepest vertex: docs/physics.md) and so the puck's own qacc; its deepest floor contact is compared."""
    m, _ = models
    step, d0 = compiled_step
    states = _states()
    for i, s in enumerate(states):
        d = d0.replace(qpos=jp.asarray(s["qpos"]), qvel=jp.asarray(s["qvel"]), ctrl=jp.asarray(s["ctrl"]),
                       qacc_warmstart=jp.asarray(s["warm"]))  # fmt: skip
        out = step(m, d)
        assert int(out.warning_number[mjl.types.Warning.CONTACTFULL]) == 0, i  # the mesh broadphase kept every pair
        ac = mjl.active_contacts(m, out)
        geom = np.sort(np.asarray(ac["geom"]), axis=1) if len(ac["dist"]) else np.zeros((0, 2), int)
        ours = sorted(zip(geom[:, 0].tolist(), geom[:, 1].tolist(), np.asarray(ac["dist"]).tolist()))
        theirs = sorted((min(a, b), max(a, b), dist) for a, b, dist in s["contacts"])
        deepest = [min((c[2] for c in x if c[:2] == PUCK_FLOOR), default=None) for x in (ours, theirs)]
        ours, theirs = ([c for c in x if c[:2] != PUCK_FLOOR] for x in (ours, theirs))
        assert [c[:2] for c in ours] == [c[:2] for c in theirs], (i, ours, theirs)
        np.testing.assert_allclose([c[2] for c in ours], [c[2] for c in theirs], atol=DIST_TOL, err_msg=str(i))
        assert (deepest[0] is None) == (deepest[1] is None), (i, deepest)
        if deepest[1] is not None:
            np.testing.assert_allclose(deepest[0], deepest[1], atol=DIST_TOL, err_msg=str(i))
        qacc, want = np.asarray(out.qacc)[:PUCK_DOF], s["qacc"][:PUCK_DOF]
        scale = max(1.0, float(np.max(np.abs(want))))
        np.testing.assert_allclose(qacc, want, atol=QACC_TOL * scale, rtol=0, err_msg=str(i))
    grasp = states[-1]["contacts"]
    pads = {(6, 3), (3, 6), (6, 5), (5, 6)}  # the object held by both pads
    assert sum((a, b) in pads for a, b, _ in grasp) >= 6, grasp


def _mesh_supports(g: GeomInfo, d: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(`support`'s point, the point of argmax's index) of mesh g (identity pose) along d (3,)."""
    vals = g.vert[:, 0] * d[0] + g.vert[:, 1] * d[1] + g.vert[:, 2] * d[2]
    return support.support(mjl.types.GeomType.MESH, g, d), g.vert[jp.argmax(vals)]


_MESH_SUPPORTS = jax.jit(jax.vmap(_mesh_supports, in_axes=(None, 0)))


@pytest.mark.parametrize("dtype", [pytest.param(np.float64, marks=pytest.mark.slow), np.float32])  # CI time
def test_mesh_support_is_argmax(models, dtype):
    """A mesh's support point (`support`: the first maximum by two plain reductions, `polytope.first_max`) is
    argmax's vertex, bitwise, on the gripper's 842-vertex link hull and its 144-gon pad (padded to the larger, as in
    a collision group), along 3,000 random directions, the axes, the 26 grid directions and the pad's face normals
    (exact ties of 144 vertices: the lowest id wins in both); and first_max / first_min equal argmax / argmin on
    ties and infinities."""
    m, _ = models
    t = hull.group_tables(m, np.arange(m.nmesh))
    grid = np.array([c for c in np.ndindex(3, 3, 3) if c != (1, 1, 1)], float) - 1
    dirs = np.concatenate([np.random.default_rng(7).normal(size=(3000, 3)), grid, [[0, 0, 1e-3], [0, 0, -2.0]]])
    d = jp.asarray(dirs, dtype)
    for i in range(m.nmesh):
        vert = jp.asarray(np.asarray(m.mesh_vert)[t["vert"][i]], dtype)
        g = GeomInfo(jp.zeros(3, dtype), jp.eye(3, dtype=dtype), jp.ones(3, dtype), vert=vert)
        got, want = _MESH_SUPPORTS(g, d)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=str(i))
    for x in ([3.0, 1.0, 3.0, -np.inf], [np.inf, np.inf, 0.0], [-1.0, -1.0, -1.0], [2.0]):
        x = jp.asarray(x, dtype)
        assert int(polytope.first_max(x)) == int(jp.argmax(x)) and int(polytope.first_min(x)) == int(jp.argmin(x))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_top_indices_is_top_k(models, dtype):
    """`polytope.top_indices` (the face manifold's 4 highest support values: first-max passes in float64, top_k in
    float32) gives top_k's indices in top_k's order on the gripper's hulls along 100 random and the 26 grid
    directions (ties of the pad's 144-gon faces and of mirrored vertices), with every 97th vertex at -inf (as the
    padding is), and on vectors of ties and infinities."""
    m, _ = models
    t = hull.group_tables(m, np.arange(m.nmesh))
    grid = np.array([c for c in np.ndindex(3, 3, 3) if c != (1, 1, 1)], float) - 1
    d = jp.asarray(np.concatenate([np.random.default_rng(3).normal(size=(100, 3)), grid, [[0, 0, 1], [1, 0, 0]]]),
                   dtype)  # fmt: skip

    def both(vert, u):
        s = vert @ u
        s = jp.where(jp.arange(s.shape[0]) % 97 == 5, -jp.inf, s)
        return polytope.top_indices(s, 4), jax.lax.top_k(s, 4)[1]

    f = jax.jit(jax.vmap(both, in_axes=(None, 0)))
    for i in range(m.nmesh):
        got, want = f(jp.asarray(np.asarray(m.mesh_vert)[t["vert"][i]], dtype), d)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=str(i))
    for x in ([1.0, 1.0, 1.0], [-np.inf, 2.0, -np.inf, 2.0, 0.0], [np.inf, -np.inf, np.inf, 3.0, 3.0]):
        x = jp.asarray(x, dtype)
        k = min(4, x.shape[0])
        np.testing.assert_array_equal(np.asarray(polytope.top_indices(x, k)), np.asarray(jax.lax.top_k(x, k)[1]))
