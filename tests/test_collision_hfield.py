"""Oracle tests of height-field collisions (mjx_lite.collision.hfield) against MuJoCo C."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import driver, general, hfield  # noqa: E402
from mjx_lite.collision.types import GeomInfo  # noqa: E402
from tests.oracle import model_from_mujoco, posed_data, reference_models  # noqa: E402

ATOL_DIST = 1e-4  # GJK/EPA on the prisms (iterative, as the general convex path) vs MuJoCo's GJK/EPA
ATOL_POS = 1e-4  # contact points, likewise
ATOL_NORMAL = 1e-4  # normals where the prism's face/edge/vertex meets a sphere, capsule or polyhedron
CCD_TOL = 1e-6  # MuJoCo's EPA distance tolerance (opt.ccd_tolerance, the default)


def atol_curved(radius):
    """Normal/point tolerance on a curved surface of radius of curvature `radius` (ellipsoid, cylinder rim): an EPA
    that stops within CCD_TOL of the depth leaves the normal undetermined by about sqrt(2 CCD_TOL / radius)."""
    return float(np.sqrt(2 * CCD_TOL / radius))
MARGIN = 0.02  # per geom; the pair's detection distance is the sum of both geoms' margins
PAIR_MARGIN = 2 * MARGIN

GEOMS = {  # name: geom element (body-relative)
    "sphere": '<geom name="sphere" type="sphere" size="0.09"',
    "box": '<geom name="box" type="box" size="0.08 0.11 0.06"',
    "capsule": '<geom name="capsule" type="capsule" size="0.06 0.12"',
    # small: at the deep target its centre is inside a prism (the analytic sphere-prism path's inside branch)
    "pebble": '<geom name="pebble" type="sphere" size="0.02"',
}
MORE_GEOMS = {  # the other convex types (slow: one more compiled collider each)
    "ellipsoid": '<geom name="ellipsoid" type="ellipsoid" size="0.07 0.1 0.12"',
    "cylinder": '<geom name="cylinder" type="cylinder" size="0.08 0.07"',
    "mesh": '<geom name="mesh" type="mesh" mesh="tet"',
}


def _elevation(nrow=8, ncol=8):
    """A slope plus a Gaussian bump, row-major as written in MJCF."""
    y, x = np.meshgrid(np.linspace(-1, 1, nrow), np.linspace(-1, 1, ncol), indexing="ij")
    return 0.3 * (x + 1) / 2 + np.exp(-((x - 0.2) ** 2 + (y + 0.1) ** 2) / 0.15)


def _xml(geoms=GEOMS):
    elev = " ".join(f"{v:.5f}" for v in _elevation().ravel())
    bodies = "".join(
        f'<body name="b_{n}" pos="0 0 1"><freejoint/>{g} contype="2" conaffinity="1" margin="{MARGIN}"/></body>'
        for n, g in geoms.items()
    )
    return f"""<mujoco><option gravity="0 0 0"/>
      <asset><mesh name="tet" vertex="0.1 0 -0.05  -0.06 0.09 -0.04  -0.05 -0.08 -0.06  0.01 0.02 0.11"/>
             <hfield name="terrain" nrow="8" ncol="8" size="0.9 0.8 0.35 0.1" elevation="{elev}"/></asset>
      <worldbody><geom name="hf" type="hfield" hfield="terrain" pos="0.05 -0.03 0.02" euler="0 0 25"
                       margin="{MARGIN}"/>{bodies}</worldbody></mujoco>"""


def _random_quat(rng):
    q = rng.normal(size=4)
    return q / np.linalg.norm(q)


def _mj_deepest(mjm, mjd, gid):
    mujoco.mj_kinematics(mjm, mjd)
    mujoco.mj_collision(mjm, mjd)
    c = mjd.contact[: mjd.ncon]
    dist = np.array(c.dist)[np.array(c.geom).reshape(-1, 2)[:, 1] == gid] if mjd.ncon else np.zeros(0)
    return dist.min() if len(dist) else np.inf


def _poses(mjm, rng, n, targets, geoms=GEOMS):
    """Random poses of all three bodies; body i's deepest MuJoCo contact is at `targets` (bisection on height).

    A target of inf means: separated beyond the detection distance (no contact)."""
    mjd = mujoco.MjData(mjm)
    out = []
    for k in range(n):
        qpos = np.zeros(mjm.nq)
        for i, name in enumerate(geoms):
            target = targets[(k + i) % len(targets)]
            xy = rng.uniform(-0.55, 0.55, 2)
            q = _random_quat(rng)
            adr = mjm.jnt_qposadr[mjm.body(f"b_{name}").jntadr[0]]
            gid = mjm.geom(name).id

            def dist_at(z, adr=adr, xy=xy, q=q, gid=gid, qpos=qpos):
                qpos[adr : adr + 7] = np.concatenate([xy, [z], q])
                mjd.qpos[:] = qpos
                return _mj_deepest(mjm, mjd, gid)

            if np.isinf(target):  # just above the detection distance
                lo, hi = -0.05, 2.0
                for _ in range(50):
                    mid = 0.5 * (lo + hi)
                    lo, hi = (mid, hi) if dist_at(mid) <= PAIR_MARGIN else (lo, mid)
                dist_at(hi + 0.01)  # raises the distance by >= 0.01 * (surface normal z) beyond detection
            else:
                lo, hi = -0.05, 2.0  # low z: deep (the centre above the terrain base, z = -0.08), high z: separated
                for _ in range(50):
                    mid = 0.5 * (lo + hi)
                    lo, hi = (lo, mid) if dist_at(mid) > target else (mid, hi)
                dist_at(hi)
        mjd.qpos[:] = qpos
        mujoco.mj_kinematics(mjm, mjd)
        mujoco.mj_collision(mjm, mjd)
        c = mjd.contact[: mjd.ncon]
        out.append(
            dict(
                xpos=mjd.geom_xpos.copy(),
                xmat=mjd.geom_xmat.copy().reshape(-1, 3, 3),
                geom=np.array(c.geom).reshape(-1, 2),
                dist=np.array(c.dist),
                pos=np.array(c.pos).reshape(-1, 3),
                normal=np.array(c.frame).reshape(-1, 9)[:, :3],
            )
        )
    return out


TARGETS = (-0.03, -0.005, 0.5 * PAIR_MARGIN, np.inf)  # deep, shallow, within margin, beyond margin


@pytest.fixture(scope="session")  # session: not torn down when a worker runs another module in between
def setup():
    mjm = mujoco.MjModel.from_xml_string(_xml())
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(0), 8, TARGETS)
    d0 = mjl.make_data(m)
    d = posed_data(m, [p["xpos"] for p in poses], [p["xmat"] for p in poses])
    collide = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))
    out = jax.device_get(collide(m, d))  # on the host: the tests index it (eager device indexing compiles per shape)
    return mjm, m, d0, poses, out, (collide, d)


def test_table_and_window(setup):
    mjm, m, _, _, _, _ = setup
    groups = [g for g in driver.pair_table(m).groups if g.type1 == mujoco.mjtGeom.mjGEOM_HFIELD]
    assert {int(g.type2) for g in groups} == {2, 3, 6}  # sphere, capsule, box: one group each
    for g in groups:
        wr, wc = hfield.window_size(m, 0, g.geom1, g.geom2)
        # a slot per prism of the window (default Config.hfield_prisms: no cap), at most MAXCONPAIR
        assert m.config.hfield_prisms is None and g.ncon == min(2 * wr * wc, hfield.MAXCONPAIR)
        dx = 2 * mjm.hfield_size[0, 0] / (mjm.hfield_ncol[0] - 1)
        reach = mjm.geom_rbound[g.geom2].max() + 2 * MARGIN
        assert wc >= min(mjm.hfield_ncol[0] - 1, np.ceil(2 * reach / dx))


def _match_pair(out, i, p, gid, atol_normal, atol_pos=ATOL_POS, msg=""):
    """Our contacts of (hfield, geom gid) in environment i equal MuJoCo's (pose p): the same count (one per
    colliding prism), each MuJoCo contact has its own of ours with the same dist, pos and normal, in the same order.
    Returns the number of contacts."""
    sel = p["geom"][:, 1] == gid
    act = np.asarray(out.contact.active[i]) & (np.asarray(out.contact.geom[i])[:, 1] == gid)
    d, pos = np.asarray(out.contact.dist[i])[act], np.asarray(out.contact.pos[i])[act]
    nrm = np.asarray(out.contact.frame[i])[act][:, 0]
    assert len(d) == int(sel.sum()), (msg, d, p["dist"][sel])
    free = np.ones(len(d), bool)
    order = []
    for dj, pj, nj in zip(p["dist"][sel], p["pos"][sel], p["normal"][sel]):
        # the first free contact of ours within tolerance (several prisms around one vertex can give the same
        # contact), else the nearest (whose check below fails)
        fits = free & (np.abs(d - dj) <= ATOL_DIST) & np.all(np.abs(pos - pj) <= atol_pos, axis=1)
        fits &= np.all(np.abs(nrm - nj) <= atol_normal, axis=1)
        cost = np.linalg.norm(pos - pj, axis=1) + np.abs(d - dj) + np.linalg.norm(nrm - nj, axis=1)
        k = int(np.flatnonzero(fits)[0]) if fits.any() else int(np.argmin(np.where(free, cost, np.inf)))
        free[k] = False
        order.append(k)
        np.testing.assert_allclose(d[k], dj, atol=ATOL_DIST, err_msg=msg)
        np.testing.assert_allclose(pos[k], pj, atol=atol_pos, err_msg=msg)
        np.testing.assert_allclose(nrm[k], nj, atol=atol_normal, err_msg=msg)
    assert order == sorted(order), (msg, order)  # MuJoCo's order: the height field's grid order
    return len(d)


@pytest.mark.parametrize("name", list(GEOMS))
def test_contacts_match_mujoco(setup, name):
    """Every colliding prism gives one contact, as in MuJoCo: the whole contact set of each (hfield, geom) pair
    matches (deep, shallow, within margin, beyond margin)."""
    mjm, _, _, poses, out, _ = setup
    gid = mjm.geom(name).id
    counts = [_match_pair(out, i, p, gid, ATOL_NORMAL, msg=f"{name} pose {i}") for i, p in enumerate(poses)]
    assert sum(c > 0 for c in counts) >= 4 and max(counts) >= 3, counts  # several prisms per pair are exercised
    if name == "pebble":  # its centre goes inside a prism in some pose
        assert min(p["dist"][p["geom"][:, 1] == gid].min(initial=np.inf) for p in poses) < -mjm.geom(gid).size[0]


def test_more_than_four_contacts_per_pair(setup):
    """A round geom between bumps touches more than 4 prisms: all of them are kept (the old cap was 4)."""
    _, _, _, poses, out, _ = setup
    n = np.asarray(out.contact.active) & (np.asarray(out.contact.geom)[..., 0] == 0)
    gids = range(1, 1 + len(GEOMS))
    per_pair = [max(int(np.sum(n[i] & (np.asarray(out.contact.geom[i])[:, 1] == g))) for g in gids)
                for i in range(len(poses))]  # fmt: skip
    theirs = [max(int(np.sum(p["geom"][:, 1] == g)) for g in gids) for p in poses]
    assert per_pair == theirs and max(theirs) > 4, (per_pair, theirs)


def test_gradient_of_deepest_distance_is_finite(setup):
    mjm, m, d0, poses, _, _ = setup
    p = poses[0]
    d = d0.replace(geom_xpos=jp.asarray(p["xpos"]), geom_xmat=jp.asarray(p["xmat"]))
    gids = [mjm.geom(n).id for n in GEOMS]

    def deepest(pos):  # (3 geoms, 3) positions -> sum of each geom's deepest distance (pairs are independent)
        dd = d.replace(geom_xpos=d.geom_xpos.at[jp.asarray(gids)].set(pos))
        c = driver.collision(m, dd).contact
        mine = c.active[None, :] & (c.geom[None, :, 1] == jp.asarray(gids)[:, None])
        return jp.sum(jp.min(jp.where(mine, c.dist[None, :], 1.0), axis=1))

    grad = np.asarray(jax.jit(jax.grad(deepest))(jp.asarray(p["xpos"][gids])))
    assert np.all(np.isfinite(grad)), grad
    for i, gid in enumerate(gids):
        if np.any(p["geom"][:, 1] == gid):  # in contact: the distance moves with the geom
            assert np.linalg.norm(grad[i]) > 0.5, grad


CLOSED_FORM_ATOL = 1e-9  # closed-form sphere/capsule-prism vs converged float64 GJK/EPA (tolerances 1e-10, 1e-9)


# slow (CI budget): the closed-form prism colliders are compared with MuJoCo by default in test_contacts_match_mujoco
# (sphere, capsule, box) and test_rough_field_contacts_match_mujoco; this compares them with our GJK/EPA
@pytest.mark.slow
@pytest.mark.parametrize("gtype", [mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_CAPSULE])
def test_closed_form_prism_colliders_match_gjk_epa(gtype):
    """Spheres and capsules meet the prisms through exact closed forms (`hfield._sphere_prism`,
    `hfield._capsule_prism`); on random prisms (sloped, flat, either triangle orientation) and random poses
    (separated, touching the faces, edges and vertices, core inside) they equal the general GJK/EPA path (itself
    checked against MuJoCo) in dist, pos and normal."""
    rng = np.random.default_rng(3)
    n = 3000
    tri = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1]])
    prisms = []
    for k in range(n):
        t = tri[[1, 0, 2]] if k % 2 else tri  # both windings (the two triangles of a cell)
        z = np.full(3, 0.04) if k % 5 == 0 else rng.uniform(0.0, 0.1, 3)  # some flat tops
        prisms.append(np.concatenate([np.c_[t, np.full(3, -0.1)], np.c_[t, z]]))
    verts = jp.asarray(np.stack(prisms))
    pos = jp.asarray(rng.uniform([-0.06, -0.06, -0.16], [0.16, 0.16, 0.2], (n, 3)))
    mat = jax.vmap(mjl.math.quat_to_mat)(jp.asarray([_random_quat(rng) for _ in range(n)]))
    size = jp.array([0.02, 0.04, 0.0])

    def closed(v, p, r):
        g2 = GeomInfo(p, r, size, None, None)
        return hfield._sphere_prism(v, g2) if gtype == mujoco.mjtGeom.mjGEOM_SPHERE else hfield._capsule_prism(v, g2)

    def both(v, p, r):
        g2 = GeomInfo(p, r, size, None, None)
        g1 = GeomInfo(jp.zeros(3), jp.eye(3), jp.zeros(3), v, None)
        budget = mjl.Config().sat_budget  # a prism and a sphere or capsule: no polytope pair, the budget does not apply
        return closed(v, p, r), general.collide(mujoco.mjtGeom.mjGEOM_MESH, int(gtype), g1, g2, sat_budget=budget)

    ours, gjk = jax.jit(jax.vmap(both))(verts, pos, mat)
    dist = np.asarray(gjk[0])
    assert np.sum(dist < -0.02) > 100 and np.sum(np.abs(dist) < 0.01) > 100 and np.sum(dist > 0.01) > 100
    for a, b, what in zip(ours, gjk, ("dist", "pos", "normal")):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), atol=CLOSED_FORM_ATOL, err_msg=what)
    # the closed form's gradient alone (through `both` it also traced the JVP of GJK/EPA, then dropped it)
    grad = jax.jit(jax.vmap(jax.grad(lambda v, p, r: closed(v, p, r)[0], argnums=(0, 1))))(verts, pos, mat)
    assert all(np.all(np.isfinite(np.asarray(g))) for g in grad)


def test_overflow_flag_when_geom_outgrows_window(setup):
    """A geom grown after the table was built needs more cells than its window: CONTACTFULL is counted.

    (Same shapes as the setup batch: changing model floats reuses the compiled function, no retrace.)"""
    mjm, m, _, _, _, (collide, d) = setup
    gid = mjm.geom("sphere").id
    big = m.replace(geom_size=m.geom_size.at[gid, 0].set(0.6), geom_rbound=m.geom_rbound.at[gid].set(0.6))
    d = d.replace(geom_xpos=d.geom_xpos.at[:, gid].set(jp.array([0.0, 0.0, 0.5])))
    full = np.asarray(collide(big, d).warning_number[:, mjl.types.Warning.CONTACTFULL])
    np.testing.assert_array_equal(full, 1)
    full = np.asarray(collide(m, d).warning_number[:, mjl.types.Warning.CONTACTFULL])
    np.testing.assert_array_equal(full, 0)


def _ref(name):
    return next(p for p in reference_models() if p.endswith(name))


@pytest.mark.parametrize("name", ["barkour_v0_mjx.xml", "quadruped.xml"])
def test_reference_models_load(name):
    m = mjl.load_mjcf(_ref(name))
    assert m.nhfield == 1
    # the quadruped's terrain lies under its floor (collision/occlusion.py): its pairs get slots only without occlusion
    occluded = name == "quadruped.xml"
    assert bool(len(driver.pair_table(m).occluded[0])) == occluded
    m = mjl.configure(m, hfield_occlusion=False)
    assert any(g.type1 == mujoco.mjtGeom.mjGEOM_HFIELD for g in driver.pair_table(m).groups)


LOWER = {"barkour_v0_mjx.xml": 0.0, "quadruped.xml": 0.3}  # root drop: quadruped's feet into the terrain


@pytest.mark.slow
@pytest.mark.parametrize("name", ["barkour_v0_mjx.xml", "quadruped.xml"])
def test_reference_models_step(name):
    """One jitted step (constraints on) is finite; its height-field contacts (count and distances per pair) match
    MuJoCo's mj_step. (The quadruped's terrain lies under its floor and its feet are pushed through it: the pairs
    need their slots, `Config.hfield_occlusion` off.)"""
    m = mjl.configure(mjl.load_mjcf(_ref(name)), hfield_occlusion=False)
    assert not m.opt.disableflags & (mjl.types.DisableBit.CONTACT | mjl.types.DisableBit.CONSTRAINT)
    mjm = mujoco.MjModel.from_xml_path(_ref(name))
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] -= LOWER[name]
    mujoco.mj_step(mjm, mjd)
    d = mjl.make_data(m)
    d = d.replace(qpos=d.qpos.at[2].add(-LOWER[name]))
    d = jax.jit(mjl.step)(m, d)
    for x in (d.qpos, d.qvel, d.qacc):
        assert np.all(np.isfinite(np.asarray(x)))
    ours = mjl.active_contacts(m, d)
    hf = [i for i in range(mjm.ngeom) if mjm.geom_type[i] == mujoco.mjtGeom.mjGEOM_HFIELD]
    theirs = {"geom": np.array(mjd.contact.geom).reshape(-1, 2), "dist": np.array(mjd.contact.dist)}
    pairs = {tuple(g) for g in theirs["geom"] if g[0] in hf} | {tuple(g) for g in ours["geom"] if g[0] in hf}
    if name == "quadruped.xml":
        assert len(pairs) >= 8  # 4 feet and 4 toes on the terrain
    for pair in pairs:
        a = ours["dist"][np.all(ours["geom"] == pair, axis=1)]
        b = theirs["dist"][np.all(theirs["geom"] == pair, axis=1)]
        assert len(a) == len(b) > 0, (pair, a, b)  # one contact per colliding prism
        np.testing.assert_allclose(np.sort(a), np.sort(b), atol=ATOL_DIST, err_msg=str(pair))


@pytest.mark.slow
def test_other_convex_types_match_mujoco():
    """Ellipsoid, cylinder and mesh: the whole contact set of each pair as MuJoCo's (one contact per prism). On the
    curved surfaces EPA's normal is determined only to about sqrt(2 tol / radius) (see atol_curved)."""
    mjm = mujoco.MjModel.from_xml_string(_xml(MORE_GEOMS))
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(1), 8, TARGETS, MORE_GEOMS)
    d = posed_data(m, [p["xpos"] for p in poses], [p["xmat"] for p in poses])
    out = jax.device_get(jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m, d))
    # smallest radius of curvature: the ellipsoid's b^2 / a, the cylinder's side radius
    radius = {"ellipsoid": 0.07**2 / 0.12, "cylinder": 0.08, "mesh": None}
    for name in MORE_GEOMS:
        gid = mjm.geom(name).id
        r = radius[name]
        atol_n = ATOL_NORMAL if r is None else atol_curved(r)
        atol_p = ATOL_POS if r is None else max(ATOL_POS, r * atol_curved(r))
        counts = [_match_pair(out, i, p, gid, atol_n, atol_p, msg=f"{name} pose {i}") for i, p in enumerate(poses)]
        assert sum(c > 0 for c in counts) >= 4, (name, counts)


@pytest.mark.slow  # CI time: float64/float32 hfield colliders are covered apart
def test_float32_after_float64_in_one_process():
    """A capsule on a height field steps in float32 (`jax.enable_x64(False)`) after the same model ran in float64 in
    this process: the prism edge tables are int32 (as int64 numpy constants they failed to index under the toggle,
    `lax.add ... int64, int32`)."""
    xml = """<mujoco><asset><hfield name="h" nrow="3" ncol="3" size="1 1 .3 .1"
             elevation="0 .2 0 .3 .5 .2 0 .1 0"/></asset><worldbody><geom type="hfield" hfield="h"/>
             <body pos=".1 .2 .25"><freejoint/><geom type="capsule" size=".1 .2" euler="0 80 0"/></body>
             </worldbody></mujoco>"""
    for x64 in (True, False):
        with jax.enable_x64(x64):
            m = mjl.load_mjcf_string(xml)
            d = jax.jit(mjl.step)(m, mjl.make_data(m))
            assert d.qpos.dtype == (jp.float64 if x64 else jp.float32)
            assert np.all(np.isfinite(np.asarray(d.qpos)))
            assert len(mjl.active_contacts(m, d)["dist"]) > 0


# a rough random height field (41 x 41, cells of 0.1) and a long capsule: the prism cap (Config.hfield_prisms)
# and its lower bound (`hfield._prism_bound`) against MuJoCo, where a geom's window holds more prisms than slots
ROUGH_GEOMS = {"capsule": '<geom name="capsule" type="capsule" size="0.05 0.2"'}


def _rough_xml(geoms=ROUGH_GEOMS):
    elev = np.random.default_rng(7).uniform(0, 1, (41, 41))
    bodies = "".join(
        f'<body name="b_{n}" pos="0 0 1"><freejoint/>{g} contype="2" conaffinity="1" margin="{MARGIN}"/></body>'
        for n, g in geoms.items()
    )
    return f"""<mujoco><option gravity="0 0 0"/>
      <asset><hfield name="terrain" nrow="41" ncol="41" size="2 2 0.08 0.1"
                     elevation="{" ".join(f"{v:.5f}" for v in elev.ravel())}"/></asset>
      <worldbody><geom name="hf" type="hfield" hfield="terrain" pos="0.03 -0.02 0" euler="0 0 15"
                       margin="{MARGIN}"/>{bodies}</worldbody></mujoco>"""


@pytest.fixture(scope="module")
def rough():
    mjm = mujoco.MjModel.from_xml_string(_rough_xml())
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(2), 4, TARGETS, ROUGH_GEOMS)
    d = posed_data(m, [p["xpos"] for p in poses], [p["xmat"] for p in poses])
    return mjm, m, poses, d


def test_rough_field_contacts_match_mujoco(rough):
    """A window of 98 prisms, more than MuJoCo's 50 contacts per pair: only the first 50 candidates (by the bound)
    reach the exact collider; every pair's contact set (up to 19 prisms) is MuJoCo's, without a CONTACTFULL."""
    mjm, m, poses, d = rough
    windows = {int(g.type2): (hfield.window_size(m, 0, g.geom1, g.geom2), g.ncon) for g in driver.pair_table(m).groups
               if g.type1 == mujoco.mjtGeom.mjGEOM_HFIELD}  # fmt: skip
    assert windows == {3: ((7, 7), hfield.MAXCONPAIR)}, windows
    out = jax.device_get(jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m, d))
    for name in ROUGH_GEOMS:
        gid = mjm.geom(name).id
        counts = [_match_pair(out, i, p, gid, ATOL_NORMAL, msg=f"{name} pose {i}") for i, p in enumerate(poses)]
        assert max(counts) >= 3, (name, counts)
    np.testing.assert_array_equal(np.asarray(out.warning_number[:, mjl.types.Warning.CONTACTFULL]), 0)


def test_more_than_50_colliding_prisms_keep_mujocos_first_50():
    """A large sphere sunk into the rough field touches more than MuJoCo's 50 prisms per pair: MuJoCo keeps the first
    50 colliding prisms in its grid order (not the deepest), and so do we (the same contacts, in order), with
    CONTACTFULL counted (candidates were dropped)."""
    mjm = mujoco.MjModel.from_xml_string(_rough_xml({"big": '<geom name="big" type="sphere" size="0.4"'}))
    m = model_from_mujoco(mjm)
    (p,) = _poses(mjm, np.random.default_rng(5), 1, (-0.06,), {"big": None})
    d = posed_data(m, [p["xpos"]], [p["xmat"]])
    out = jax.device_get(jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m, d))
    gid = mjm.geom("big").id
    assert _match_pair(out, 0, p, gid, ATOL_NORMAL) == hfield.MAXCONPAIR
    assert int(out.warning_number[0, mjl.types.Warning.CONTACTFULL]) == 1


# curved geoms (GJK/EPA per prism) on the rough field: only the prisms within reach by the bound run the collider
CURVED_GEOMS = {"ellipsoid": MORE_GEOMS["ellipsoid"], "cylinder": MORE_GEOMS["cylinder"]}
RADIUS_CURVED = {"ellipsoid": 0.07**2 / 0.12, "cylinder": 0.08}  # smallest radius of curvature (see atol_curved)


@pytest.mark.slow  # CI time: two GJK/EPA collider compiles (455 s at load ~15 beside 392 s of the closed-form test)
def test_curved_geoms_on_rough_field_match_mujoco():
    """An ellipsoid and a cylinder on the rough field (windows of 18 and 32 prisms), deep, shallow, within and
    beyond the margin: each pair's whole contact set (dist, pos, normal, grid order) is MuJoCo's, float64, with the
    prisms beyond reach of the bound skipped by the candidate loop (`hfield._prisms_runner`)."""
    mjm = mujoco.MjModel.from_xml_string(_rough_xml(CURVED_GEOMS))
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(4), 4, TARGETS, CURVED_GEOMS)
    d = posed_data(m, [p["xpos"] for p in poses], [p["xmat"] for p in poses])
    out = jax.device_get(jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m, d))
    for name, r in RADIUS_CURVED.items():
        gid = mjm.geom(name).id
        atol_p = max(ATOL_POS, r * atol_curved(r))
        counts = [_match_pair(out, i, p, gid, atol_curved(r), atol_p, msg=f"{name} pose {i}")
                  for i, p in enumerate(poses)]  # fmt: skip
        assert sum(c > 0 for c in counts) >= 2 and max(counts) >= 2, (name, counts)
    np.testing.assert_array_equal(np.asarray(out.warning_number[:, mjl.types.Warning.CONTACTFULL]), 0)


FD_RTOL = 1e-5  # directional derivative of the contact distances vs central differences (step 1e-6, float64)


@pytest.mark.slow  # CI time: the JVP of the curved colliders is a compile of its own
def test_candidate_loop_derivatives_match_finite_differences():
    """The candidate loop (`hfield._prisms_runner`) has no derivative of its own: its JVP is the collider's over
    every slot. Its primal equals the loop's forward answer, and its tangent equals central differences of the
    forward answer (an ellipsoid and a cylinder moved and turned into the rough field)."""
    mjm = mujoco.MjModel.from_xml_string(_rough_xml(CURVED_GEOMS))
    m = model_from_mujoco(mjm)
    poses = _poses(mjm, np.random.default_rng(4), 1, (-0.005,), CURVED_GEOMS)
    d = mjl.make_data(m).replace(geom_xpos=jp.asarray(poses[0]["xpos"]), geom_xmat=jp.asarray(poses[0]["xmat"]))
    rng = np.random.default_rng(0)
    dpos = jp.asarray(rng.normal(size=d.geom_xpos.shape)).at[0].set(0.0)
    w = jp.asarray(rng.normal(size=(mjm.ngeom, 3))).at[0].set(0.0)

    def dists(t):  # active contact distances (inactive rows hold NOCONTACT, constant) along the direction
        skew = jax.vmap(lambda v: jp.cross(jp.eye(3), v))(w)  # (ngeom, 3, 3): [w]x, rotation rate
        xmat = d.geom_xmat + t * jp.einsum("gij,gjk->gik", skew, d.geom_xmat)
        return driver.collision(m, d.replace(geom_xpos=d.geom_xpos + t * dpos, geom_xmat=xmat)).contact.dist

    fwd = jax.jit(dists)
    primal, tangent = jax.jit(lambda t: jax.jvp(dists, (t,), (jp.ones_like(t),)))(jp.zeros(()))
    act = np.asarray(fwd(jp.zeros(())) < 1.0)
    assert act.sum() >= 2, act.sum()
    np.testing.assert_allclose(np.asarray(primal), np.asarray(fwd(jp.zeros(()))), atol=1e-12)
    h = 1e-6
    fd = (np.asarray(fwd(jp.asarray(h))) - np.asarray(fwd(jp.asarray(-h)))) / (2 * h)
    np.testing.assert_allclose(np.asarray(tangent)[act], fd[act], rtol=FD_RTOL, atol=FD_RTOL)


@pytest.mark.slow  # CI time: its own compile of the capped colliders
def test_prism_cap_overflow_is_counted(rough):
    """With one slot per pair (hfield_prisms=1), a pair with several candidate prisms counts CONTACTFULL and keeps
    one of MuJoCo's contacts (the prism nearest by the bound)."""
    mjm, m, poses, d = rough
    m1 = mjl.configure(m, hfield_prisms=1)
    out = jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m1, d)
    full = np.asarray(out.warning_number[:, mjl.types.Warning.CONTACTFULL])
    for i, p in enumerate(poses):
        many = any(np.sum(p["geom"][:, 1] == mjm.geom(n).id) > 1 for n in ROUGH_GEOMS)
        assert (full[i] > 0) if many else True, (i, full[i])  # (candidates by the bound: more than the contacts)
        act = np.asarray(out.contact.active[i])
        for dist in np.asarray(out.contact.dist[i])[act]:
            assert np.min(np.abs(p["dist"] - dist)) <= ATOL_DIST, (i, dist, p["dist"])
    assert full.sum() > 0


@pytest.mark.parametrize("gtype", [pytest.param(mujoco.mjtGeom.mjGEOM_SPHERE, marks=pytest.mark.slow),
                                   mujoco.mjtGeom.mjGEOM_CAPSULE])  # fmt: skip
def test_prism_bound_is_a_lower_bound(gtype):
    """`hfield._prism_bound` never exceeds the exact prism distance (closed forms, themselves checked against
    GJK/EPA): prisms it rules out cannot touch. Random sloped prisms and poses, float64."""
    rng = np.random.default_rng(5)
    n = 2000
    tri = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1]])
    prisms = [np.concatenate([np.c_[tri, np.full(3, -0.1)], np.c_[tri, rng.uniform(0.0, 0.3, 3)]]) for _ in range(n)]
    verts = jp.asarray(np.stack(prisms))
    pos = jp.asarray(rng.uniform([-0.2, -0.2, -0.2], [0.3, 0.3, 0.6], (n, 3)))
    mat = jax.vmap(mjl.math.quat_to_mat)(jp.asarray([_random_quat(rng) for _ in range(n)]))
    size = jp.array([0.03, 0.08, 0.0])

    def both(v, p, r):
        g = GeomInfo(p, r, size, None, None)
        exact = hfield._sphere_prism(v, g) if gtype == mujoco.mjtGeom.mjGEOM_SPHERE else hfield._capsule_prism(v, g)
        half, center = hfield._aabb_half(int(gtype), g)
        return hfield._prism_bound(int(gtype), g, center - half, center + half, v[None])[0], exact[0]

    bound, dist = (np.asarray(x) for x in jax.jit(jax.vmap(both))(verts, pos, mat))
    assert np.all(bound <= dist + 1e-12), np.max(bound - dist)
    assert np.mean(bound > 0.05) > 0.3 and np.corrcoef(bound, dist)[0, 1] > 0.9  # and not a trivial bound


@pytest.mark.slow
def test_quadruped_on_random_terrain_matches_mujoco():
    """dm_control's quadruped (ellipsoid torso, cylinder eyes, capsule legs, sphere toes; 201 x 201 field with
    cells of 0.3) lowered into random terrain (as the escape task makes) in random poses: every height-field pair's
    contacts (count and distances) equal mj_collision's at the default Config (every window prism), with no
    CONTACTFULL. (With hfield_prisms=8 the buried torso's 11 contacts are cut to 8, flagged.)"""
    mjm = mujoco.MjModel.from_xml_path(_ref("quadruped.xml"))
    rng = np.random.default_rng(11)
    mjm.hfield_data[:] = rng.uniform(0, 0.04, mjm.hfield_data.shape)
    m = model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    hf = mjm.geom("terrain").id
    poses, theirs = [], []
    for k in range(6):
        mjd.qpos[:] = mjm.qpos0
        mjd.qpos[:2] = rng.uniform(-3, 3, 2)
        mjd.qpos[2] = rng.uniform(0.05, 0.35)
        mjd.qpos[3:7] = _random_quat(rng) if k % 2 else [1, 0, 0, 0]
        mjd.qpos[7:] += rng.uniform(-0.5, 0.5, mjm.nq - 7)
        mujoco.mj_kinematics(mjm, mjd)
        mujoco.mj_collision(mjm, mjd)
        c = mjd.contact[: mjd.ncon]
        g = np.array(c.geom).reshape(-1, 2)
        theirs.append((g[g[:, 0] == hf], np.array(c.dist)[g[:, 0] == hf]))
        poses.append((mjd.geom_xpos.copy(), mjd.geom_xmat.copy().reshape(-1, 3, 3)))
    d = posed_data(m, [p[0] for p in poses], [p[1] for p in poses])
    out = jax.device_get(jax.jit(jax.vmap(driver.collision, in_axes=(None, 0)))(m, d))
    np.testing.assert_array_equal(np.asarray(out.warning_number[:, mjl.types.Warning.CONTACTFULL]), 0)
    geoms_hit = set()
    for i, (g, dist) in enumerate(theirs):
        act = np.asarray(out.contact.active[i])
        og, od = np.asarray(out.contact.geom[i])[act], np.asarray(out.contact.dist[i])[act]
        og, od = og[og[:, 0] == hf], od[og[:, 0] == hf]
        for gid in set(g[:, 1]) | set(og[:, 1]):
            a, b = np.sort(od[og[:, 1] == gid]), np.sort(dist[g[:, 1] == gid])
            assert len(a) == len(b), (i, mjm.geom(gid).name, a, b)
            np.testing.assert_allclose(a, b, atol=ATOL_DIST, err_msg=f"pose {i} {mjm.geom(gid).name}")
            geoms_hit.add(int(mjm.geom_type[gid]))
    assert {2, 3, 4} <= geoms_hit, geoms_hit  # spheres, capsules and the ellipsoid torso touched the terrain


LOOP_ATOL = 1e-15  # two compiled programs of the same float64 arithmetic (fused differently): a few ulps of ~0.1


def test_candidate_loop_pools_lanes_as_dense():
    """The candidate loop (`hfield._prisms_runner`) unbatched, under one vmap and under two nested vmaps (the group's
    pairs and the environments, with geom sizes and the margin shared by the lanes at the inner level as the driver
    passes them) equals the collider on every prism masked the same way (`hfield._dense_runner`), float64, to
    rounding: the pooled candidates of all lanes land on their own lane's slots."""
    rng = np.random.default_rng(8)
    envs, pairs, k = 3, 4, 6
    tri = np.array([[0.0, 0.0], [0.1, 0.0], [0.0, 0.1]])
    z = np.concatenate([np.full((envs, pairs, k, 3), -0.1), rng.uniform(0.0, 0.1, (envs, pairs, k, 3))], -1)
    xy = np.broadcast_to(np.concatenate([tri, tri]), (envs, pairs, k, 6, 2))
    # inputs on the host (numpy): eager device ops (slices, updates) would compile a tiny program each
    verts = np.concatenate([xy, z[..., None]], -1)  # (envs, pairs, k, 6, 3): bottom, then top
    pos = rng.uniform([-0.05, -0.05, -0.05], [0.15, 0.15, 0.2], (envs, pairs, 3))
    mat = np.broadcast_to(np.eye(3), (envs, pairs, 3, 3))
    size = jp.array([0.03, 0.0, 0.0])
    cand = rng.uniform(size=(envs, pairs, k)) < 0.4
    cand[0] = False  # environment 0: no candidate
    cand[1, 2] = True  # one lane with every prism a candidate (more than the pooled average)
    prism = hfield._prism_collider(int(mujoco.mjtGeom.mjGEOM_SPHERE), mjl.Config().sat_budget)
    loop, dense = hfield._prisms_runner(prism), hfield._dense_runner(prism)

    def call(f):
        def one(v, c, p, r, margin):
            return f(v, c, GeomInfo(p, r, size, None, None), margin)

        return one

    margin = np.float64(0.01)
    # each form jitted (run eagerly, its operations compiled one by one: ~190 tiny programs)
    single = [jax.jit(call(f))(verts[1, 2], cand[1, 2], pos[1, 2], mat[1, 2], margin) for f in (loop, dense)]
    pairs_only = [jax.jit(jax.vmap(call(f), in_axes=(0, 0, 0, 0, None)))(verts[1], cand[1], pos[1], mat[1], margin)
                  for f in (loop, dense)]  # fmt: skip
    nested = [jax.jit(jax.vmap(jax.vmap(call(f), in_axes=(0, 0, 0, 0, None)), in_axes=(0, 0, 0, 0, None)))(
              verts, cand, pos, mat, margin) for f in (loop, dense)]  # fmt: skip
    for a, b in (single, pairs_only, nested):
        on = np.asarray(cand[1, 2] if a[0].ndim == 1 else cand[1] if a[0].ndim == 2 else cand)
        for x, y in zip(a, b):
            x, y = np.asarray(x), np.asarray(y)
            np.testing.assert_allclose(x[on], y[on], rtol=0, atol=LOOP_ATOL)
        np.testing.assert_array_equal(np.asarray(a[0])[~on], np.asarray(b[0])[~on])  # NOCONTACT off the candidates
    dist = np.asarray(nested[0][0])[np.asarray(cand)]
    assert np.sum(dist <= 0.01) >= 3 and np.sum(dist > 0.01) >= 3, dist  # candidates within and beyond the margin
