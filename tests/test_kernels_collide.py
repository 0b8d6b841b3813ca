"""The fused primitive colliders (kernels/collide.py: the plane/sphere/capsule pairs and plane-box of the pair groups
with static slots as one Pallas kernel) against the XLA collision (collision/driver.py).

The collision stage runs alone here (`kernels.collision` on Data whose kinematics ran on the XLA path), so the test
compiles one kernel in Pallas' interpret mode. PRIMS holds every covered primitive kind (plane-sphere, plane-capsule
(one dynamic and one explicit group with its own margin), plane-box, sphere-sphere (a geom margin and gap),
sphere-capsule, capsule-capsule (parallel axes in the first state: two contacts), sphere-box (one sphere touching
the box from outside, one whose centre is inside it), capsule-box, with the cases of capsule-box of CAPSULE_BOX's
capsules on a table) and a kind that keeps its XLA collider in the same program (plane-ellipsoid: the floor's bit
16 reaches the ellipsoid alone; CI time: box-box's XLA collider before, in both paths' programs, ~9 CPU-s to trace
and compile alone at load 10 against ~1 for plane-ellipsoid); TERRAIN spheres on a height field. The MJX humanoid,
dm_control's humanoid, MJX's barkour, the bundled legged model, float32, the gradients and the whole step are in the
slow selection.
"""

import os

import dm_control
import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from jax._src.interpreters import partial_eval as pe

import mjx_lite as mjl
from mjx_lite.collision import driver
from mjx_lite.pipeline import kernels, kinematics
from mjx_lite.pipeline.kernels import collide, contact_params, launch
from tests import oracle
from tests import test_kernels as tk

# float64: the kernel's formulas are the colliders' written per lane (sums in their own order): round-off, relative
# to max(1, max |field|) (the requirement: 1e-10)
COLLIDE_TOL = 1e-12
# float32 against float32's XLA colliders
F32_TOL = 1e-5
# derivatives run through the XLA twin on both paths
GRAD_TOL = 1e-10
# the whole step on either path (the other fused kernels' round-off, through the solver)
STEP_TOL = 1e-9
# XLA operations of the fused collision stage of dm_control's cheetah and the MJX humanoid (float32, batch 8,
# lowered for "cuda"; test_collision_program_size): the two kernels' layout operations, active's compare and ncon's
# sum. Recorded: cheetah 56 (426 + 1 kernel before the contact parameters' kernel), humanoid 60 (101 + 1)
FUSED_COLLISION_OPS = 60

PRIMS = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" contype="19" conaffinity="3"/>
    <body name="ball1" pos="0 0 0.09"><freejoint/><geom name="ball1" type="sphere" size="0.1"/></body>
    <body name="ball2" pos="0.19 0 0.09">
      <freejoint/><geom type="sphere" size="0.1" margin="0.01" gap="0.005"/>
    </body>
    <body name="cap1" pos="0 0.5 0.045">
      <freejoint/><geom name="cap1" type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/>
    </body>
    <body name="cap2" pos="0.05 0.59 0.045">
      <freejoint/><geom type="capsule" fromto="-0.2 0 0 0.2 0 0" size="0.05"/>
    </body>
    <body name="ball3" pos="0 0.5 0.14"><freejoint/><geom type="sphere" size="0.05"/></body>
    <body name="box" pos="0.6 0 0.095">
      <freejoint/><geom type="box" size="0.1 0.08 0.1" contype="2" conaffinity="2"/>
    </body>
    <body name="ball4" pos="0.6 0 0.24">
      <freejoint/><geom type="sphere" size="0.05" contype="2" conaffinity="2"/>
    </body>
    <body name="ball5" pos="0.62 0.01 0.1">
      <freejoint/><geom type="sphere" size="0.03" contype="2" conaffinity="2"/>
    </body>
    <body name="cap3" pos="0.6 0.2 0.1">
      <freejoint/><geom type="capsule" fromto="0 -0.1 0 0 0.1 0" size="0.03" contype="2" conaffinity="2"/>
    </body>
    <body name="ellipsoid" pos="0.6 -0.3 0.05">
      <freejoint/><geom type="ellipsoid" size="0.08 0.06 0.055" contype="0" conaffinity="16"/>
    </body>
    {capsule_box}
  </worldbody>
  <contact><pair geom1="floor" geom2="cap1" margin="0.02" condim="4"/></contact>
</mujoco>
"""

# box-box only: no covered group
BOXES = """
<mujoco>
  <worldbody>
    <body><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0 0 0.3"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>
"""

# capsules on a box (a world geom): lying on its top face over its +x edge, tilted at a corner, across the -x edge
# beside the +y face (rotated), short and near the middle of the top face: the nearest features are faces, edges and
# corners, and the second contact row comes from each of MuJoCo's cases in some state. The capsules collide with the
# table only (contype 0, conaffinity 8; the table 8, 0), so the scene sits in PRIMS (overlapping its bodies, which it
# never touches: CI time, one compiled collision for both) and its states are CAPSULE_BOX's own (`_prims_states`)
CAPSULE_BOX_BODIES = """
    <geom name="table" type="box" size="0.2 0.15 0.1" pos="0 0 0.1" contype="8" conaffinity="0"/>
    <body pos="0.15 0 0.228">
      <freejoint/><geom type="capsule" fromto="-0.1 0 0 0.1 0 0" size="0.03" contype="0" conaffinity="8"/>
    </body>
    <body pos="-0.2 -0.15 0.23" euler="0 30 20">
      <freejoint/><geom type="capsule" size="0.03 0.06" contype="0" conaffinity="8"/>
    </body>
    <body pos="-0.16 0.18 0.2" euler="0 0 40">
      <freejoint/><geom type="capsule" fromto="0 -0.08 0 0 0.08 0" size="0.035" contype="0" conaffinity="8"/>
    </body>
    <body pos="0.0 -0.1 0.24" euler="10 0 0">
      <freejoint/><geom type="capsule" size="0.02 0.05" contype="0" conaffinity="8"/>
    </body>
"""
CAPSULE_BOX = f"<mujoco><worldbody>{CAPSULE_BOX_BODIES}</worldbody></mujoco>"
PRIMS_ONLY = PRIMS.format(capsule_box="")
PRIMS = PRIMS.format(capsule_box=CAPSULE_BOX_BODIES)


# spheres on a 6 x 7 height field (elevations drawn once, fixed): a 2 x 2 cell window per sphere (8 prisms, each its
# contact slot), one sphere with a geom margin and gap, one near the grid's corner (its window clipped to the grid)
_ELEVATION = " ".join(f"{v:.3f}" for v in np.random.default_rng(3).uniform(0.2, 0.6, 6 * 7))
TERRAIN = f"""
<mujoco>
  <asset><hfield name="terrain" nrow="6" ncol="7" size="1 0.8 0.2 0.1" elevation="{_ELEVATION}"/></asset>
  <worldbody>
    <geom name="terrain" type="hfield" hfield="terrain"/>
    <body pos="0.1 0.05 0.17"><freejoint/><geom type="sphere" size="0.08"/></body>
    <body pos="-0.45 0.3 0.15"><freejoint/><geom type="sphere" size="0.06" margin="0.01" gap="0.005"/></body>
    <body pos="0.9 -0.7 0.1"><freejoint/><geom type="sphere" size="0.05"/></body>
  </worldbody>
</mujoco>
"""

FLOAT = ("dist", "pos", "frame", "includemargin", "friction", "solref", "solreffriction", "solimp")
EXACT = ("dim", "geom", "flex", "vert", "efc_address", "active")


def _batch(m, qpos):
    """Data of the states qpos (n, nq), kinematics on the XLA path (host numpy until then: no eager operations)."""
    d0 = mjl.make_data(m)
    n = len(qpos)
    ds = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (n,) + np.shape(x)), d0)
    return _kinematics(m, ds.replace(qpos=np.asarray(qpos)))


def _qpos(mjm, n, seed=0, scale=0.02):
    """(n, nq): n states' qpos around qpos0, the first at qpos0 itself (PRIMS: the two capsules parallel)."""
    rng = np.random.default_rng(seed)
    qpos = []
    for i in range(n):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng, qpos_scale=scale if i else 0.0)
        qpos.append(mjd.qpos.copy())
    return np.stack(qpos)


def _states(mjm, m, n, seed=0, scale=0.02):
    """`_qpos`'s n states, kinematics on the XLA path."""
    return _batch(m, _qpos(mjm, n, seed, scale))


def _first(ds):
    return jax.tree.map(lambda x: np.asarray(x)[0], ds)


_kinematics = jax.jit(jax.vmap(kinematics.kinematics, in_axes=(None, 0)))
_collide = jax.jit(jax.vmap(kernels.collision, in_axes=(None, 0)))


def _setup(mjm, n=3, scale=0.02):
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    return m, _states(mjm, m, n, scale=scale)


@pytest.fixture(scope="module")
def small():
    """(Model, batch of 4 states after kinematics) of PRIMS, float64: its primitives' bodies at the states `_states`
    draws for them alone (the first at qpos0: the two capsules parallel), the capsules on the table at those it
    draws for CAPSULE_BOX alone (scale 0.03)."""
    mjm = mujoco.MjModel.from_xml_string(PRIMS)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    prims = _qpos(mujoco.MjModel.from_xml_string(PRIMS_ONLY), 4)
    capsules = _qpos(mujoco.MjModel.from_xml_string(CAPSULE_BOX), 4, scale=0.03)
    assert prims.shape[1] + capsules.shape[1] == mjm.nq  # the capsules' free joints come last
    return m, _batch(m, np.concatenate([prims, capsules], axis=1))


def _compare(got, want, tol, what):
    tk._assert_close(got.contact, want.contact, FLOAT, tol, what)
    for f in EXACT:
        np.testing.assert_array_equal(getattr(got.contact, f), getattr(want.contact, f), err_msg=f"{what}: {f}")
    np.testing.assert_array_equal(got.ncon, want.ncon, err_msg=what)
    np.testing.assert_array_equal(got.warning_number, want.warning_number, err_msg=what)


def _kinds(m):
    groups = driver.pair_table(m).groups
    return [collide.kind(m, groups[i]) for i in collide.covered(m)]


def test_selection(small):
    """PRIMS has every covered primitive kind (plane-capsule twice: dynamic and explicit) and one XLA group
    (plane-ellipsoid); a model of boxes (box-box) has none."""
    m, _ = small
    assert sorted(_kinds(m)) == sorted(list(collide.KINDS.values()) + ["plane_capsule"])
    groups = driver.pair_table(m).groups
    assert [g.collider.__name__ for i, g in enumerate(groups) if i not in collide.covered(m)] == ["plane_ellipsoid"]
    assert kernels.collide_fused(mjl.configure(m, kernels="fused")) and not kernels.collide_fused(m)
    mjm_b = mujoco.MjModel.from_xml_string(BOXES)
    assert not collide.fusable(oracle.model_from_mujoco(mjm_b))


def test_collision_equals_xla(small):
    """Every contact field, ncon and the warnings of the fused collision (one kernel; plane-ellipsoid's XLA collider in
    the same program) equal the XLA collision's (float64), on states where every covered kind has contacts (the
    parallel capsules two; sphere-box from outside and with the sphere's centre inside the box)."""
    m, ds = small
    mf = mjl.configure(m, kernels="fused")
    # the traces are jit's cache: the calls below reuse them
    fused, xla = str(_collide.trace(mf, ds).jaxpr), str(_collide.trace(m, ds).jaxpr)
    # the colliders' kernel and the contact parameters' (kernels/contact_params.py)
    assert fused.count("pallas_call") == 2 and "collide_primitive" in fused and "contact_params" in fused
    assert "pallas_call" not in xla
    want = _collide(m, ds)
    got = _collide(mf, ds)
    _compare(got, want, COLLIDE_TOL, "PRIMS")
    # every covered group has active rows, some rows are not contacts
    groups = driver.pair_table(m).groups
    act = np.asarray(want.contact.active)
    assert not act.all()
    row = 0
    for i, g in enumerate(groups):
        rows = act[:, row : row + g.nrows]
        assert rows.any(), (i, g.collider)
        if g.collider is collide.primitive.capsule_capsule:
            assert rows[0].reshape(-1, 2).all(axis=1).any()  # parallel: both rows of a pair
        if g.collider is collide.primitive.sphere_box:  # ball4 outside (dist > -r), ball5's centre inside (< -r)
            dist = np.asarray(want.contact.dist)[:, row : row + g.nrows]
            assert (rows & (dist > -0.03)).any() and (rows & (dist < -0.03)).any(), dist
        row += g.nrows


def test_twin_reads_only_the_kernel_inputs(small):
    """custom_jvp's rule differentiates the XLA twin with respect to the kernel's inputs only: no float Model or
    Data leaf may be read by the twin except through them."""
    m, ds = small
    d = _first(ds)
    x = jax.eval_shape(lambda m, d: collide.kernel(m, d)[1], m, d)  # (shapes only: no eager operations)

    def twin(m, d, x):
        return collide.kernel(m, d)[0].xla(x)

    jaxpr = jax.make_jaxpr(twin)(m, d, x)
    leaves = jax.tree.leaves((m, d))
    used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.out_avals))[1]
    floats = [i for i, v in enumerate(leaves) if jp.issubdtype(jp.asarray(v).dtype, jp.floating)]
    assert not any(used[i] for i in floats), [i for i in floats if used[i]]
    assert any(used[len(leaves) :])


@pytest.mark.parametrize("layout, dtype", [("lanes_last", "float64"),
                                           pytest.param("lanes_first", "float64", marks=pytest.mark.slow),
                                           pytest.param("lanes_last", "float32", marks=pytest.mark.slow)])
def test_lowers_to_triton(small, monkeypatch, layout, dtype):
    """The kernel lowers to Triton at a batch of 200 = 128 + 72 (masked lanes). No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    m, ds = small
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], ds)
    if dtype == "float32":
        m, batch = tk._float32(m), tk._float32(batch)
    mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
    text = tk._lower_cuda(jax.vmap(kernels.collision, in_axes=(None, 0)), mf, batch)
    assert text.count("__gpu$xla.gpu.triton") == 2  # the colliders and the contact parameters


DM_HUMANOID = os.path.join(os.path.dirname(dm_control.__file__), "suite", "humanoid.xml")


@pytest.mark.slow
@pytest.mark.parametrize("path", [tk.MJX_HUMANOID, DM_HUMANOID], ids=["mjx_humanoid", "dm_humanoid"])
def test_collision_equals_xla_humanoid(path):
    """The benchmark humanoids lowered onto the floor: the MJX humanoid's explicit plane-capsule pairs (its only
    group), dm_control's plane-sphere, plane-capsule, sphere-sphere, sphere-capsule and capsule-capsule groups."""
    mjm = mujoco.MjModel.from_xml_path(path)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    rng = np.random.default_rng(1)
    qpos = []
    for _ in range(3):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng, qpos_scale=0.3)
        mjd.qpos[2] -= 0.35 if "mjx" in path else 0.9  # feet (dm_control: the whole body) on the floor
        qpos.append(mjd.qpos.copy())
    ds = _batch(m, np.stack(qpos))
    assert len(collide.covered(m)) == len(driver.pair_table(m).groups)
    want = _collide(m, ds)
    assert np.all(np.asarray(want.ncon) > 0)
    _compare(_collide(mjl.configure(m, kernels="fused"), ds), want, COLLIDE_TOL, os.path.basename(path))


@pytest.mark.slow
def test_collision_float32(small):
    """float32: the kernel's contacts equal float32's XLA collision to float32 round-off. Not at the first state:
    its capsules are exactly parallel, where det = ma mc - mb^2 is float32 round-off against the 1e-15 threshold (a
    fused multiply-add or not decides the branch, and XLA's interpreted kernel at -O0 evaluated it both ways within
    one row)."""
    m, ds = small
    m32, ds32 = tk._float32(m), tk._float32(jax.tree.map(lambda x: np.asarray(x)[1:], ds))
    want = _collide(m32, ds32)
    got = _collide(mjl.configure(m32, kernels="fused"), ds32)
    assert got.contact.dist.dtype == jp.float32
    tk._assert_close(got.contact, want.contact, FLOAT, F32_TOL, "float32")
    np.testing.assert_array_equal(got.contact.active, want.contact.active)


def _loss(m, d, xpos, xmat):
    """A nonlinear function of every float contact field (through the geoms' poses)."""
    c = kernels.collision(m, d.replace(geom_xpos=xpos, geom_xmat=xmat)).contact
    return sum(jp.sum(jp.sin(getattr(c, f))) for f in ("pos", "frame")) + jp.sum(jp.where(c.active, c.dist, 0.0))


@pytest.mark.slow
def test_gradients_equal_xla(small):
    """jax.grad through the fused collision (custom_jvp: the XLA twin) is the XLA collision's, batched by vmap."""
    m, ds = small
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
    args = (ds, ds.geom_xpos, ds.geom_xmat)
    got, want = grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args)
    tk.assert_grads_equal(got, want, GRAD_TOL)


@pytest.mark.slow
def test_step_equals_xla(small):
    """The whole fused step (tree, collision, rows, velocity and solver kernels) equals the XLA step on PRIMS."""
    m, ds = small
    ds = ds.replace(qvel=jp.zeros_like(ds.qvel))
    step = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
    got, want = step(mjl.configure(m, kernels="fused"), ds), step(m, ds)
    assert np.all(np.asarray(want.ncon) > 0)
    tk._assert_close(got, want, ("qpos", "qvel", "qacc"), STEP_TOL, "step")
    np.testing.assert_array_equal(got.contact.active, want.contact.active)


# ---- height fields (spheres): barkour's feet on its terrain ------------------------------------------------------


@pytest.fixture(scope="module")
def terrain():
    """(Model, batch of 3 states after kinematics) of TERRAIN, float64."""
    return _setup(mujoco.MjModel.from_xml_string(TERRAIN))


def _hfield_rows(m):
    """The row range of TERRAIN's height-field group."""
    groups = driver.pair_table(m).groups
    row = 0
    for g in groups:
        if g.type1 == mjl.GeomType.HFIELD:
            return slice(row, row + g.nrows)
        row += g.nrows
    raise AssertionError("no height-field group")


def test_hfield_selection(terrain):
    """A height field-sphere group is covered when each prism of its window has a contact slot; with the prisms
    capped (`Config.hfield_prisms`) it keeps its XLA collider."""
    m, _ = terrain
    assert sorted(_kinds(m)) == ["hfield_sphere", "sphere_sphere"]
    capped = mjl.configure(m, hfield_prisms=4)
    assert _kinds(capped) == ["sphere_sphere"]


def test_hfield_equals_xla(terrain):
    """The fused height field-sphere contacts (window, prism bounds, point-prism distances) equal the XLA
    collider's, float64; and with the spheres grown past their windows (domain randomisation: the windows were
    sized at load) both paths count the overflow in CONTACTFULL and still agree on the rows they keep."""
    m, ds = terrain
    mf = mjl.configure(m, kernels="fused")
    want = _collide(m, ds)
    _compare(_collide(mf, ds), want, COLLIDE_TOL, "TERRAIN")
    rows = _hfield_rows(m)
    act = np.asarray(want.contact.active)[:, rows]
    assert act.any(axis=1).all() and (act.sum(axis=1) > 1).any() and not act.all()
    assert not np.asarray(want.warning_number).any()
    # geom radii x 4 (rbound alike): the windows (2 x 2 cells) no longer cover the spheres
    grow = np.where(np.asarray(m.geom_type) == mjl.GeomType.SPHERE, 4.0, 1.0)
    big = m.replace(geom_size=m.geom_size * grow[:, None], geom_rbound=m.geom_rbound * grow)
    want = _collide(big, ds)
    _compare(_collide(mjl.configure(big, kernels="fused"), ds), want, COLLIDE_TOL, "TERRAIN, grown")
    assert np.asarray(want.warning_number)[:, mjl.Warning.CONTACTFULL].all()


def test_hfield_randomised_equals_xla(terrain):
    """Elevations vmapped with the environments (domain randomisation): the kernel gathers each lane's cells from
    its own copy of the height field (the per-environment input), as the XLA collider."""
    m, ds = terrain
    scale = np.array([1.0, 1.3, 0.7])[:, None]
    data = np.asarray(m.hfield_data)[None] * scale

    def run(m, data, d):
        return kernels.collision(m.replace(hfield_data=data), d)

    col = jax.jit(jax.vmap(run, in_axes=(None, 0, 0)))
    # the XLA reference: environment i of the shared height field scaled by scale[i], by test_hfield_equals_xla's
    # compiled XLA collision (CI time: no XLA program with vmapped elevations)
    per_scale = [_collide(m.replace(hfield_data=data[i]), ds) for i in range(len(scale))]
    want = jax.tree.map(lambda *x: np.stack([np.asarray(v)[i] for i, v in enumerate(x)]), *per_scale)
    _compare(col(mjl.configure(m, kernels="fused"), data, ds), want, COLLIDE_TOL, "TERRAIN, randomised")
    assert np.asarray(want.contact.active)[:, _hfield_rows(m)].any(axis=1).all()


@pytest.mark.parametrize("layout", ["lanes_last", pytest.param("lanes_first", marks=pytest.mark.slow)])
def test_hfield_lowers_to_triton(terrain, monkeypatch, layout):
    """The height-field loops lower to Triton (the cells' gather from a shared and from a per-environment input)
    at a batch of 200 = 128 + 72 (masked lanes). No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    m, ds = terrain
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], ds)
    mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
    text = tk._lower_cuda(jax.vmap(kernels.collision, in_axes=(None, 0)), mf, batch)
    assert text.count("__gpu$xla.gpu.triton") == 2  # the colliders and the contact parameters
    data = np.broadcast_to(np.asarray(m.hfield_data), (200, m.hfield_data.shape[0]))
    run = jax.vmap(lambda data, d: kernels.collision(mf.replace(hfield_data=data), d))
    assert tk._lower_cuda(run, data, batch).count("__gpu$xla.gpu.triton") == 2


@pytest.mark.slow
def test_hfield_gradients_equal_xla(terrain):
    """jax.grad through the fused height-field contacts (custom_jvp: the XLA twin) is the XLA collision's."""
    m, ds = terrain
    grad = jax.jit(jax.vmap(jax.grad(_loss, argnums=(2, 3)), in_axes=(None, 0, 0, 0)))
    args = (ds, ds.geom_xpos, ds.geom_xmat)
    tk.assert_grads_equal(grad(mjl.configure(m, kernels="fused"), *args), grad(m, *args), GRAD_TOL)


@pytest.mark.slow
def test_collision_equals_xla_barkour():
    """MJX's barkour (its four feet, spheres, on a 240 x 280 height field: its only group) near its initial pose."""
    mjm = mujoco.MjModel.from_xml_path(os.path.join(oracle.MJX_TEST_DATA, "barkour_v0", "assets",
                                                    "barkour_v0_mjx.xml"))  # fmt: skip
    m, ds = _setup(mjm)
    assert len(collide.covered(m)) == len(driver.pair_table(m).groups) == 1
    want = _collide(m, ds)
    assert np.all(np.asarray(want.ncon) > 0)
    _compare(_collide(mjl.configure(m, kernels="fused"), ds), want, COLLIDE_TOL, "barkour")


# ---- capsule-box ------------------------------------------------------------------------------------------------


def test_capsule_box_equals_xla(small):
    """The fused capsule-box contacts (the nearest segment point against faces and edges, the second point of
    MuJoCo's corner, edge and face cases) equal the XLA collider's, float64 (PRIMS' program, compared row by row in
    test_collision_equals_xla: here its capsule-box rows): both rows of some capsule-table pairs in contact, one row
    of others."""
    m, ds = small
    table = mujoco.mj_name2id(mujoco.MjModel.from_xml_string(PRIMS), mujoco.mjtObj.mjOBJ_GEOM, "table")
    groups = driver.pair_table(m).groups
    i = [g.collider for g in groups].index(collide.primitive.capsule_box)
    g = groups[i]
    assert i in collide.covered(m) and g.static_slots and g.ncon == 2
    pairs = np.nonzero((g.geom1 == table) | (g.geom2 == table))[0]
    assert len(pairs) == 4
    row = sum(h.nrows for h in groups[:i])
    rows = (row + 2 * pairs[:, None] + np.arange(2)).ravel()
    want = _collide(m, ds)
    got = _collide(mjl.configure(m, kernels="fused"), ds)
    _compare(got, want, COLLIDE_TOL, "PRIMS")
    act = np.asarray(want.contact.active)[:, rows].reshape(-1, 4, 2)
    assert act.all(axis=2).sum() >= 4 and (act[..., 0] & ~act[..., 1]).sum() >= 4


@pytest.mark.slow
def test_collision_equals_xla_legged():
    """The bundled legged model (plane-capsule, plane-box, capsule-capsule and capsule-box: all in the kernel)
    lowered onto the floor."""
    mjm = mujoco.MjModel.from_xml_path(mjl.models.path("legged"))
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    assert len(collide.covered(m)) == len(driver.pair_table(m).groups)
    rng = np.random.default_rng(2)
    qpos = []
    for _ in range(3):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng, qpos_scale=0.3)
        qpos.append(mjd.qpos.copy())
    ds = _batch(m, np.stack(qpos))
    want = _collide(m, ds)
    assert np.all(np.asarray(want.ncon) > 0)
    _compare(_collide(mjl.configure(m, kernels="fused"), ds), want, COLLIDE_TOL, "legged")


# ---- contact parameters (kernels/contact_params.py) --------------------------------------------------------------

# the contact parameters' cases: priorities (geom1's higher, geom2's higher, equal), solmix (a zero one: the other
# geom's parameters; a mixed one), a direct solref (negative: the smaller of the two where both are not standard),
# adhesion (geoms and an explicit pair; the adhesive rule's dim 1 in the gap band), condim 1, 3, 4, 6, geom margins
# and gaps, an explicit pair with its own margin, gap, friction and solreffriction replacing a dynamic pair
PARAMS = """
<mujoco>
  {option}
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1" friction="0.8 0.01 0.002" solmix="2" solref="0.03 1.1"
          solimp="0.8 0.9 0.002 0.4 3"/>
    <body pos="0 0 0.09">
      <freejoint/>
      <geom type="sphere" size="0.1" priority="1" friction="1.2 0.02 0.001" condim="4" solref="0.01 0.9"
            solimp="0.85 0.96 0.001 0.5 2" adhesion="0.5" gap="0.02"/>
    </body>
    <body pos="0.3 0 0.095">
      <freejoint/>
      <geom type="sphere" size="0.1" solmix="0" solref="-1000 -40" condim="6" margin="0.01" gap="0.005"/>
    </body>
    <body pos="0.6 0 0.045">
      <freejoint/><geom name="cap" type="capsule" fromto="-0.1 0 0 0.1 0 0" size="0.05" priority="-1" condim="1"/>
    </body>
    <body pos="0.45 0 0.1">
      <freejoint/><geom type="sphere" size="0.06" solmix="0.5" solref="0.02 1" adhesion="0.2" condim="3"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="floor" geom2="cap" margin="0.02" gap="0.01" condim="3" solreffriction="0.05 1.2" adhesion="0.1"
          friction="0.5 0.5 0.01 0.001 0.001"/>
  </contact>
</mujoco>
"""
OVERRIDE = ('<option o_margin="0.015" o_solref="0.04 1.3" o_solimp="0.7 0.9 0.003 0.5 2"'
            ' o_friction="0.7 0.6 0.02 0.003 0.004"><flag override="enable"/></option>')  # fmt: skip
# Model floats drawn per environment (domain randomisation): the contact parameters' kernel's inputs
PARAM_RANGES = {"geom_friction": (0.5, 1.5), "geom_solmix": (0.5, 2.0), "geom_solref": (0.8, 1.25),
                "geom_solimp": (0.95, 1.0), "geom_margin": (0.5, 2.0), "geom_gap": (0.5, 2.0),
                "geom_adhesion": (0.5, 2.0), "pair_solreffriction": (0.8, 1.25),
                "pair_friction": (0.8, 1.25)}  # fmt: skip


@pytest.fixture(scope="module")
def params():
    """{name: (Model, batch of 3 states after kinematics)} of PARAMS, plain and with the override flag."""
    out = {}
    for name, option in (("plain", ""), ("override", OVERRIDE)):
        mjm = mujoco.MjModel.from_xml_string(PARAMS.format(option=option))
        out[name] = _setup(mjm, scale=0.01)
    return out


def test_contact_params_selection(params):
    """Every group of PARAMS is covered (plane-sphere, plane-capsule explicit, sphere-sphere, sphere-capsule), the
    fused collision launches the colliders' and the parameters' kernels, and the model has what the parameters'
    cases need: adhesion, an explicit pair, priorities both ways."""
    m, _ = params["plain"]
    groups = driver.pair_table(m).groups
    assert len(collide.covered(m)) == len(groups) and m.flg_adhesion
    _, info = contact_params.plan(m, collide.covered(m))
    assert info["dynamic"] and info["explicit"]
    codes = set(contact_params.plan(m, collide.covered(m))[0]["code"].tolist())
    assert codes == {0, 1, 2}, codes


@pytest.mark.parametrize("name", ["plain", "override"])
def test_contact_params_equal_xla(params, name):
    """Every contact field (adhesion and the adhesive dims included), ncon and the warnings of the fused collision
    equal the XLA collision's (float64). "plain": 3 Models drawn per environment (PARAM_RANGES), each with its
    state, so the parameters' kernel runs on per-environment inputs; "override": one shared Model, the kernel's one
    lane (opt.o_margin, o_solref, o_solimp, o_friction replace the pairs')."""
    m, ds = params[name]
    if name == "plain":
        ms = tk.randomized(m, 3, ranges=PARAM_RANGES)
        col = jax.jit(jax.vmap(kernels.collision))
        want, got = col(ms, ds), col(jax.vmap(lambda m: mjl.configure(m, kernels="fused"))(ms), ds)
        assert tk.spread(want.contact.friction) > 0.01 and tk.spread(want.contact.includemargin) > 1e-3
    else:
        want, got = _collide(m, ds), _collide(mjl.configure(m, kernels="fused"), ds)
    _compare(got, want, COLLIDE_TOL, name)
    tk._assert_close(got.contact, want.contact, ("adhesion",), COLLIDE_TOL, name)
    act = np.asarray(want.contact.active)
    assert (act.sum(axis=1) >= 4).all(), act.sum(axis=1)
    if name == "plain":  # some active adhesive row in the gap band has dim 1
        c = want.contact
        band = act & (np.asarray(c.adhesion) != 0) & (np.asarray(c.dist) >= np.asarray(c.includemargin))
        assert band.any() and (np.asarray(c.dim)[band] == 1).all()


def test_contact_params_twin_reads_only_the_kernel_inputs(params):
    """The parameters' XLA twin (custom_jvp's rule) reads no float Model leaf except through the kernel's inputs."""
    for name in ("plain", "override"):
        m, _ = params[name]
        cov = collide.covered(m)
        x = jax.eval_shape(lambda m, cov=cov: contact_params.kernel(m, cov)[1], m)
        jaxpr = jax.make_jaxpr(lambda m, x, cov=cov: contact_params.kernel(m, cov)[0].xla(x))(m, x)
        leaves = jax.tree.leaves(m)
        used = pe.dce_jaxpr(jaxpr.jaxpr, [True] * len(jaxpr.out_avals))[1]
        floats = [i for i, v in enumerate(leaves) if jp.issubdtype(jp.asarray(v).dtype, jp.floating)]
        assert not any(used[i] for i in floats), (name, [i for i in floats if used[i]])
        assert all(used[len(leaves) :]), name


def _param_loss(m, d, friction, solref, margin, sfr, adhesion):
    """A nonlinear function of the contacts' parameters and geometry, of Model floats the parameters mix."""
    m = m.replace(geom_friction=friction, geom_solref=solref, geom_margin=margin, pair_solreffriction=sfr,
                  geom_adhesion=adhesion)  # fmt: skip
    c = kernels.collision(m, d).contact
    w = c.active.astype(c.dist.dtype)
    fields = ("friction", "solref", "solimp", "solreffriction", "includemargin", "adhesion", "dist")
    return sum(jp.sum(w[:, None] * jp.sin(getattr(c, f)).reshape(w.shape[0], -1)) for f in fields)


def test_contact_params_gradients_equal_xla(params):
    """jax.grad through the fused contact parameters and colliders (custom_jvp: the XLA twins) with respect to the
    Model floats that the parameters mix (friction, solref, margin, the pair's solreffriction, adhesion) is the XLA
    collision's, summed over a batch of states."""
    m, ds = params["plain"]

    def total(m, *p):
        return jp.sum(jax.vmap(lambda d: _param_loss(m, d, *p))(ds))

    grad = jax.jit(jax.grad(total, argnums=(1, 2, 3, 4, 5)))
    p = (m.geom_friction, m.geom_solref, m.geom_margin, m.pair_solreffriction, m.geom_adhesion)
    tk.assert_grads_equal(grad(mjl.configure(m, kernels="fused"), *p), grad(m, *p), GRAD_TOL)


def test_collision_program_size(monkeypatch):
    """dm_control's cheetah (plane-capsule and capsule-capsule groups: all in the kernels) and the MJX humanoid: the
    fused collision stage (float32, batch 8, lowered for "cuda") is the colliders' and the parameters' Triton
    kernels and layout operations, ncon's sum, active's compare and no arithmetic of the parameters (no gather,
    select or multiply: the mixing is in the kernel); at most FUSED_COLLISION_OPS operations."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    for path in (os.path.join(os.path.dirname(dm_control.__file__), "suite", "cheetah.xml"), tk.MJX_HUMANOID):
        m = tk._float32_host(oracle.model_from_mujoco(mujoco.MjModel.from_xml_path(path)))
        assert len(collide.covered(m)) == len(driver.pair_table(m).groups)
        batch = tk._float32_host(jax.tree.map(lambda x: np.stack([np.asarray(x)] * 8), mjl.make_data(m)))
        text = tk._lower_cuda(jax.vmap(kernels.collision, in_axes=(None, 0)), mjl.configure(m, kernels="fused"), batch)
        ops = tk._op_names(text)
        assert text.count("__gpu$xla.gpu.triton") == 2, path
        assert set(ops) <= tk.LAYOUT_OPS | {"stablehlo.compare", "stablehlo.reduce"}, sorted(set(ops))
        assert len(ops) <= FUSED_COLLISION_OPS, (path, len(ops))


@pytest.mark.slow  # 70 s wall at load 9; the collision stage's equality (above) runs in CI
def test_contact_params_step_equals_xla(params):
    """Two whole fused steps of PARAMS (every kernel of the step: the contacts' parameters and colliders, rows, solver,
    tree and velocity passes, the update) equal the XLA steps: qpos, qvel, qacc and every contact field."""
    m, ds = params["plain"]

    def roll(m, d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=2)[0]

    roll = jax.jit(jax.vmap(roll, in_axes=(None, 0)))
    want, got = roll(m, ds), roll(mjl.configure(m, kernels="fused"), ds)
    assert (np.asarray(want.ncon) >= 4).all()
    tk._assert_close(got, want, ("qpos", "qvel", "qacc", "efc_force"), STEP_TOL, "PARAMS: 2 steps")
    tk._assert_close(got.contact, want.contact, FLOAT + ("adhesion",), STEP_TOL, "PARAMS: 2 steps")
    for f in EXACT:
        np.testing.assert_array_equal(getattr(got.contact, f), getattr(want.contact, f), err_msg=f)


@pytest.mark.parametrize("layout", ["lanes_last", pytest.param("lanes_first", marks=pytest.mark.slow)])
def test_contact_params_lower_to_triton(params, monkeypatch, layout):
    """The parameters' kernel lowers to Triton with one lane (a shared Model, the override flag) and with
    per-environment inputs (200 = 128 + 72 Models, one per environment: masked lanes). No GPU needed."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    m, ds = params["plain"]
    batch = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], ds)
    # 200 Models, every leaf batched as tk.randomized returns them (lowered only: the values do not matter; CI time:
    # on the host, no randomiser program)
    mf = mjl.configure(m, kernels="fused", kernel_layout=layout)
    ms = jax.tree.map(lambda x: np.broadcast_to(np.asarray(x), (200,) + np.shape(x)), mf)
    text = tk._lower_cuda(jax.vmap(kernels.collision), ms, batch)
    assert text.count("__gpu$xla.gpu.triton") == 2
    mo, _ = params["override"]
    mo = mjl.configure(mo, kernels="fused", kernel_layout=layout)
    assert tk._lower_cuda(jax.vmap(kernels.collision, in_axes=(None, 0)), mo, batch).count("__gpu$xla.gpu.triton") == 2
