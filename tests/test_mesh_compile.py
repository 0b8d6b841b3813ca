"""Issue 43 (the mesh colliders' cost): EPA stopping early where it is never differentiated (`epa.forward_only`) and
the refinement's mesh kinks computed once per mesh (`refine.mesh_kink_tables`) give the values of the full scan and
of the per-pair kinks. Tiny shapes, one small compile per test."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver, epa, general, refine, support  # noqa: E402
from mjx_lite.collision.types import GeomInfo, info_axes  # noqa: E402
from mjx_lite.types import GeomType  # noqa: E402
from tests import oracle  # noqa: E402
from tests.oracle import model_from_mujoco  # noqa: E402

ROUNDOFF = 1e-15  # float64 round-off of values of size 0.1 (metres, unit vectors)
DIST_TOL = 1e-6  # GJK/EPA contact distances against MuJoCo's (both converged to its ccd_tolerance, 1e-6)

# a convex mesh that is not small for the refinement (`refine.small_mesh`): a jittered 14-gon prism
_ANG = 2 * np.pi * np.arange(14) / 14
_VERT = np.concatenate([np.stack([0.1 * np.cos(_ANG), 0.08 * np.sin(_ANG), np.full(14, z)], 1) for z in (-0.06, 0.07)])
_VERT = _VERT + np.random.default_rng(3).uniform(-0.004, 0.004, _VERT.shape)
_XML = f"""<mujoco><asset><mesh name="m" vertex="{' '.join(f'{v:.5f}' for v in _VERT.ravel())}"/></asset>
  <worldbody><body><freejoint/><geom type="ellipsoid" size=".05 .06 .08"/></body>
  <body><freejoint/><geom type="mesh" mesh="m"/></body></worldbody></mujoco>"""


def _rotations(rng, n):
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    out = np.zeros((n, 9))
    for i in range(n):
        mujoco.mju_quat2Mat(out[i], q[i])
    return out.reshape(n, 3, 3)


def _mesh_side(n):
    """The mesh geom's GeomInfo as the driver gives a GJK/EPA kind's mesh side (traced type, deferred rows, the kink
    tables), for n pairs (poses to be set), and the model."""
    m = model_from_mujoco(mujoco.MjModel.from_xml_string(_XML))
    d = mjl.make_data(m)
    gids = np.ones(n, np.int32)
    info, deferred = driver._geom_info(m, d, jp.asarray(gids), driver.GENERAL, gids, deferred=True)
    info = driver._resolve(info, deferred)
    assert info.facenormal is not None and not refine.small_mesh(GeomType.MESH, info)
    return info


def test_kink_tables_match_per_pair():
    """`refine._near_kinks` from the side's tables (geom frame, once per mesh) picks the same face and edges as from
    the per-pair kinks (world frame) for 400 random mesh rotations and directions, the same vectors to 1e-15."""
    n = 400
    rng = np.random.default_rng(0)
    info = _mesh_side(n)._replace(mat=jp.asarray(_rotations(rng, n)))
    u = rng.normal(size=(n, 3))
    u = jp.asarray(u / np.linalg.norm(u, axis=1, keepdims=True))
    axes = info_axes(info)

    def near(g, d, tables):
        if not tables:
            g = g._replace(facenormal=None, edgekink=None)
        return refine._near_kinks(refine._mesh_kinks(GeomType.MESH, g), d)

    f = jax.jit(jax.vmap(lambda g, d: (near(g, d, True), near(g, d, False)), in_axes=(axes, 0)))
    (fa, oka, ea, eoka), (fb, okb, eb, eokb) = f(info, u)
    np.testing.assert_array_equal(oka, okb)
    np.testing.assert_array_equal(eoka, eokb)
    np.testing.assert_allclose(fa, fb, rtol=0, atol=1e-15)
    np.testing.assert_allclose(ea, eb, rtol=0, atol=1e-15)


def test_epa_forward_only_equals_scan():
    """EPA as a while loop that stops at its last live iteration (`epa.forward_only`) gives the scan's answers to
    round-off (the same operations; XLA fuses the two loops differently: 1-ulp differences in this test's program,
    bitwise equal contacts in the Shadow Hand's collision programs), each pose with its own iteration limit (3-40), for
    an ellipsoid overlapping the mesh in 64 poses."""
    n = 64
    rng = np.random.default_rng(1)
    g2 = _mesh_side(n)
    g2 = g2._replace(mat=jp.asarray(_rotations(rng, n)), pos=jp.asarray(rng.uniform(-0.03, 0.03, (n, 3))))
    g1 = GeomInfo(jp.zeros((n, 3)), jp.asarray(_rotations(rng, n)), jp.tile(jp.asarray([0.05, 0.06, 0.08]), (n, 1)))
    t1 = GeomType.ELLIPSOID
    limit = jp.asarray(rng.integers(3, 41, n)).at[::4].set(epa.EPA_ITERATIONS)  # a quarter: the full count
    dirs = jp.asarray([[1.0, 1, 1], [1, -1, -1], [-1, 1, -1], [-1, -1, 1]])

    def one(g1, g2, lim, forward):
        tt2 = support.traced(g2.gtype, (GeomType.MESH,))

        def sup(d):
            return support.support(t1, g1, d), support.support(tt2, g2, -d)

        a, b = jax.vmap(sup)(dirs)
        if forward:
            with epa.forward_only():
                return epa.epa(sup, a - b, a, 1e-9, epa.EPA_ITERATIONS, lim)
        return epa.epa(sup, a - b, a, 1e-9, epa.EPA_ITERATIONS, lim)

    def both(a, b, c):
        return one(a, b, c, True), one(a, b, c, False)

    f = jax.jit(jax.vmap(both, in_axes=(GeomInfo(0, 0, 0), info_axes(g2), 0)))
    fast, full = f(g1, g2, limit)
    depth = np.asarray(full[0])
    assert np.sum(depth > 1e-3) > n // 2  # most poses overlap deeply
    for x, y in zip(jax.tree_util.tree_leaves(fast), jax.tree_util.tree_leaves(full)):
        np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=ROUNDOFF)


def _posed_batch():
    """The ellipsoid against the mesh in 3 poses (two overlapping, one apart): (Model, posed Data (3,), MuJoCo's
    contacts per pose [(dist, pos, normal)])."""
    mjm = mujoco.MjModel.from_xml_string(_XML)
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(2)
    xpos, xmat, ref = [], [], []
    for offset in ([0.0, 0.0, 0.05], [0.09, 0.02, 0.0], [0.5, 0.0, 0.0]):
        mjd.qpos[:] = 0
        mjd.qpos[3:7] = rng.normal(size=4)
        mjd.qpos[3:7] /= np.linalg.norm(mjd.qpos[3:7])
        mjd.qpos[7:10] = offset
        mujoco.mj_forward(mjm, mjd)
        xpos.append(mjd.geom_xpos.copy())
        xmat.append(mjd.geom_xmat.reshape(-1, 3, 3).copy())
        ref.append([(c.dist, c.pos.copy(), c.frame[:3].copy()) for c in mjd.contact[: mjd.ncon]])
    return m, oracle.posed_data(m, xpos, xmat), ref


def _contacts(m, d):
    c = driver.collision(m, d).contact
    return c.dist, c.pos, c.frame[..., 0, :], c.active


def test_near_loop_pools_environments(monkeypatch):
    """Under `vmap` the near-pair loop runs once over every environment's near pairs pooled (`driver._pool`):
    NEAR_CHUNK lanes per environment, its arguments unbatched (B * n pairs), and GJK/EPA traced once (lowered only:
    no compile)."""
    m, db, _ = _posed_batch()
    calls, loops = [], []
    collide, near_loop = general.collide, driver._near_loop

    def counted(*args, **kwargs):
        calls.append(1)
        return collide(*args, **kwargs)

    def recorded(collider, k, chunk, dense):
        loop = near_loop(collider, k, chunk, dense)

        def run(*args):
            loops.append((chunk, args[3].shape))
            return loop(*args)

        return run

    monkeypatch.setattr(general, "collide", counted)
    monkeypatch.setattr(driver, "_near_loop", recorded)
    jax.jit(jax.vmap(_contacts, in_axes=(None, 0))).lower(m, db)
    assert len(calls) == 1
    (g,) = [g for g in driver.pair_table(m).groups if driver._distance_kind(g) is not None]
    assert loops == [(driver.NEAR_CHUNK * 3, (3 * g.npair_narrow,))]


@pytest.mark.slow  # two GJK/EPA compiles (10 s at load 2 on the 2-core machine)
def test_near_loop_pooled_contacts_match_unbatched():
    """The pooled near-pair loop (`driver._pool`) gives each of 3 environments the contacts of the unbatched collision
    stage (to oracle.VMAP_TOL: the same operations, fused for 12 lanes instead of 4) and MuJoCo's distances."""
    m, db, ref = _posed_batch()
    batched = jax.jit(jax.vmap(_contacts, in_axes=(None, 0)))(m, db)
    one = jax.jit(_contacts)
    assert [len(r) for r in ref] == [1, 1, 0]
    for i, r in enumerate(ref):
        single = one(m, jax.tree.map(lambda x, i=i: x[i], db))
        for x, y in zip(batched, single):
            np.testing.assert_allclose(np.asarray(x[i]), np.asarray(y), rtol=0, atol=oracle.VMAP_TOL)
        rows = np.flatnonzero(np.asarray(batched[3][i]))
        assert len(rows) == len(r)
        for j, (rd, _, _) in zip(rows, r):
            np.testing.assert_allclose(np.asarray(batched[0][i, j]), rd, rtol=0, atol=DIST_TOL)
