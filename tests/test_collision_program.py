"""Program size of the collision stage (issue 43): the traced program grows with the distinct colliders, not with the
number of pairs or of pair types, and each collider is traced once. A model with the structure that made ANYmal C
slow to compile (many cylinder-cylinder and cylinder-box pairs: GJK/EPA, then the multiccd manifold) pins it: the
GJK/EPA stage of every curved pair type without a mesh is one shared program (`driver._shared_distances`), and so is
their manifold stage (`driver._shared_manifolds`)."""

import re

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import cylinder, driver, general  # noqa: E402

# StableHLO operations (constants and returns left out) of jit(vmap(the group's collision)) for the
# cylinder-cylinder model below: 6,820 when written (jax 0.10.2, float64), the same for 2 and 6 pairs; 8,897 since the
# group's GJK/EPA stage is the curved pairs' shared one (geom types traced per pair, so that one program serves every
# curved pair type of a model); 7,056 since that program branches over the types present only (here one type pair:
# static types, `support.typed`). Work unrolled per pair shows up here; a deliberate growth of the collider moves this
# bound.
MAX_COLLISION_OPS = 7_800
# the four curved groups of _CURVED in one collision program over a cylinder-cylinder group's alone: 16,630 / 7,056
# = 2.36 (each group's program on its own: 5,148 to 7,052 operations, 27,313 together: GJK/EPA four times)
MAX_SHARED_RATIO = 2.5


def _cylinders(k: int) -> str:
    """k cylinders fixed in the world (they do not collide with each other) and one free cylinder: k pairs."""
    fixed = "".join(f'<geom type="cylinder" size=".05 .1" pos="{0.3 * i} 0 0"/>' for i in range(k))
    return f"""<mujoco><worldbody>{fixed}
      <body pos="0 0 .3"><freejoint/><geom type="cylinder" size=".05 .1"/></body></worldbody></mujoco>"""


def _ops(text: str) -> int:
    ops = re.findall(r"^\s*(?:%\S+ = )?\"?(stablehlo\.[a-z_]+)", text, re.MULTILINE)
    return sum(o not in ("stablehlo.constant", "stablehlo.return") for o in ops)


def _model(k: int):
    m = mjl.load_mjcf_string(_cylinders(k))
    (g,) = driver.pair_table(m).groups
    assert g.collider is cylinder.cylinder_cylinder and len(g.geom1) == k
    return m, g


def _batch2(m):
    """make_data(m) broadcast to a batch of 2 on the host (numpy: no eager device ops, each a tiny compile)."""
    return jax.tree.map(lambda x: np.broadcast_to(x, (2,) + np.shape(x)), jax.device_get(mjl.make_data(m)))


# operations of the 6-pair cylinder group's program, lowered once per process (test_group_program_size, which lowers
# it itself to count the traces, leaves it here for test_curved_pair_types_share_gjk_epa)
_GROUP_OPS = {}


def _group_program(m, g) -> str:
    """StableHLO of jit(vmap(one group's collision)) at batch 2."""
    run = jax.vmap(lambda m, d: driver._run_group(m, d, g)[0], in_axes=(None, 0))
    return jax.jit(run).lower(m, _batch2(m)).as_text()


def _counting(fn, calls):
    def counted(*args, **kwargs):
        calls.append(1)
        return fn(*args, **kwargs)

    return counted


def test_group_program_size(monkeypatch):
    """A cylinder-cylinder group (the shared GJK/EPA stage on its near pairs, `driver._near_only`, then the multiccd
    manifold, also on the near pairs): GJK/EPA and the manifold are each traced once (not also for their output
    shapes, which cost ANYmal C's cylinder groups as much trace time as their loop body) and the program stays below
    MAX_COLLISION_OPS."""
    m, g = _model(6)
    collide, manifold = [], []
    monkeypatch.setattr(general, "collide", _counting(general.collide, collide))
    monkeypatch.setattr(cylinder, "_cylinder_manifold", _counting(cylinder._cylinder_manifold, manifold))
    n = _GROUP_OPS[6] = _ops(_group_program(m, g))
    assert len(collide) == 1 and len(manifold) == 1
    assert n <= MAX_COLLISION_OPS, n


# one pair of each curved type without a mesh: capsule-cylinder, cylinder-cylinder, cylinder-box, ellipsoid-box
_CURVED = """<mujoco><worldbody>
  <geom type="cylinder" size=".05 .1" pos="0 0 0"/><geom type="box" size=".05 .05 .05" pos=".3 0 0"/>
  <body pos="0 0 .3"><freejoint/><geom type="cylinder" size=".05 .1"/></body>
  <body pos=".6 0 .3"><freejoint/><geom type="capsule" size=".05 .1"/></body>
  <body pos="1.2 0 .3"><freejoint/><geom type="ellipsoid" size=".05 .06 .07"/></body>
</worldbody></mujoco>"""


def test_curved_pair_types_share_gjk_epa(monkeypatch):
    """Four curved pair types in four groups (capsule-cylinder, cylinder-cylinder, cylinder-box with their manifolds,
    ellipsoid-box with one contact): their GJK/EPA is traced once for the model (one program over every group's
    pairs, the geom types selecting the support maps of the types present), and so is the manifold of the three
    cylinder groups (`cylinder.curved_manifold`: the face of each type present, the pair's own selected), so the
    collision program is little more than a single cylinder group's (MAX_SHARED_RATIO)."""
    m = mjl.load_mjcf_string(_CURVED)
    kinds = {getattr(g.collider, "__name__", "") for g in driver.pair_table(m).groups}
    assert {"capsule_cylinder", "cylinder_cylinder", "cylinder_box", "general_curved"} <= kinds, kinds
    calls, manifolds = [], []
    monkeypatch.setattr(general, "collide", _counting(general.collide, calls))
    monkeypatch.setattr(cylinder, "_cylinder_manifold", _counting(cylinder._cylinder_manifold, manifolds))
    text = jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0))).lower(
        m, _batch2(m)).as_text()  # fmt: skip
    assert len(calls) == 1
    assert len(manifolds) == 1
    # a single cylinder group's program: 6 pairs (the same operations as 2: test_program_size_independent_of_pairs),
    # test_group_program_size's when it ran in this process
    if 6 not in _GROUP_OPS:
        _GROUP_OPS[6] = _ops(_group_program(*_model(6)))
    single = _GROUP_OPS[6]
    assert _ops(text) < MAX_SHARED_RATIO * single, (_ops(text), single)


# the shared manifold's values against each group's own: the same arithmetic, fused differently by XLA (measured: one
# distance of 66 rows off by 6.9e-18, the rest bitwise equal; float64)
SHARED_ATOL = 1e-15


def _curved_poses(m) -> np.ndarray:
    """qpos (3, nq) of _CURVED with every manifold kind in contact: the free cylinder's cap on the fixed cylinder's
    (cylinder-cylinder face-face), the capsule lying on the fixed cylinder's cap (capsule-cylinder edge-face) with the
    free cylinder standing on the box (cylinder-box face-face), the free cylinder lying on the box (side on a face)."""
    q = np.zeros((3, m.nq))
    ry = [np.cos(np.pi / 4), 0, np.sin(np.pi / 4), 0]  # 90 degrees about y
    rx = [np.cos(np.pi / 4), np.sin(np.pi / 4), 0, 0]  # 90 degrees about x
    tilt = [np.cos(0.01), np.sin(0.01), 0, 0]
    q[0] = np.r_[0.003, 0.002, 0.1995, tilt, 2.0, 0, 0.3, 1, 0, 0, 0, 1.2, 0, 1.0, 1, 0, 0, 0]
    q[1] = np.r_[0.301, 0.0, 0.1495, tilt, 0.002, 0.0, 0.1495, ry, 1.2, 0, 1.0, 1, 0, 0, 0]
    q[2] = np.r_[0.3, 0.01, 0.0995, rx, 2.0, 0, 0.3, 1, 0, 0, 0, 1.2, 0, 1.0, 1, 0, 0, 0]
    return q


@pytest.mark.slow  # two compiles of the collision stage; test_collision_multiccd's cylinder tests: values vs MuJoCo
def test_shared_manifold_equals_per_group(monkeypatch):
    """The three cylinder groups' shared manifold (traced geom types) gives the contacts of each group's own manifold
    (static types) at poses where each manifold kind is in contact (float64): the same rows, the same values up to
    rounding (SHARED_ATOL)."""
    m = mjl.load_mjcf_string(_CURVED)
    d = mjl.make_data(m)
    qpos = _curved_poses(m)
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (len(qpos),) + x.shape), d).replace(qpos=jp.asarray(qpos))
    db = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(m, db)
    run = jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0)))
    shared = run(m, db)
    alone = driver._shared_manifolds
    # each group's own manifold: the collision stage's shared call finds none, each group runs its own (static types)
    monkeypatch.setattr(driver, "_shared_manifolds", lambda m, d, g, c, s: alone(m, d, g, c, s) if set(g) == {0} else {})  # noqa: E501
    own = jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0)))(m, db)  # a new trace
    for f in ("active", "geom"):
        np.testing.assert_array_equal(np.asarray(getattr(shared, f)), np.asarray(getattr(own, f)), err_msg=f)
    for f in ("dist", "pos", "frame"):
        np.testing.assert_allclose(np.asarray(getattr(shared, f)), np.asarray(getattr(own, f)), rtol=0,
                                   atol=SHARED_ATOL, err_msg=f)  # fmt: skip
    geom = np.asarray(shared.geom)[np.asarray(shared.active)]
    gtype = np.asarray(m.geom_type)[geom]
    kinds = {tuple(sorted(t)) for t in gtype.tolist()}
    want = {(3, 5), (5, 5), (5, 6)}  # capsule-cylinder, cylinder-cylinder, cylinder-box
    assert want <= kinds, kinds


@pytest.mark.slow  # two more traces of the group (~30 s at load 10); test_group_program_size: the bound
def test_program_size_independent_of_pairs():
    """The group's program for 2 and 6 cylinder-cylinder pairs: the same number of operations (vectorised over the
    pairs, nothing unrolled per pair)."""
    sizes = {k: _ops(_group_program(*_model(k))) for k in (2, 6)}
    assert sizes[2] == sizes[6] <= MAX_COLLISION_OPS, sizes


# a free body of each convex type that runs GJK/EPA or a manifold against a mesh: ellipsoid-mesh (the general group),
# cylinder-mesh and capsule-mesh (each with its multiccd manifold), against two meshes of different sizes (the free
# bodies do not collide with each other: no curved pairs without a mesh)
_AGAINST_MESH = """<mujoco><asset><mesh name="cube" vertex="-1 -1 -1 1 -1 -1 1 1 -1 -1 1 -1 -1 -1 1 1 -1 1 1 1 1 -1 1 1"
  scale=".05 .05 .05"/><mesh name="prism" vertex="0 0 0 1 0 0 0 1 0 0 0 1 1 0 1 0 1 1" scale=".1 .1 .1"/></asset>
  <default><geom contype="0" conaffinity="1"/></default>
  <worldbody><geom type="mesh" mesh="cube" contype="1"/><geom type="mesh" mesh="prism" pos=".5 0 0" contype="1"/>
  <body pos="0 0 .3"><freejoint/><geom type="ellipsoid" size=".05 .06 .07"/></body>
  <body pos=".6 0 .3"><freejoint/><geom type="cylinder" size=".05 .1"/></body>
  <body pos="1.2 0 .3"><freejoint/><geom type="capsule" size=".05 .1"/></body>
  <body pos="1.8 0 .3"><freejoint/><geom type="sphere" size=".05"/></body>
</worldbody></mujoco>"""


def test_mesh_pair_types_share_stages(monkeypatch):
    """Ellipsoid-mesh (general), cylinder-mesh, capsule-mesh and sphere-mesh groups: one GJK/EPA for the ellipsoid
    and cylinder pairs against meshes (`driver._MESH_GJK`), one separating-axis stage for the capsule and sphere
    pairs, and one manifold for the cylinder and capsule pairs: `collide` is traced twice and the manifold once for
    the model, not once per group."""
    m = mjl.load_mjcf_string(_AGAINST_MESH)
    kinds = {driver._distance_kind(g) for g in driver.pair_table(m).groups}
    assert {driver._MESH_GJK, driver._CAPSULE_MESH} <= kinds, kinds
    calls, manifolds = [], []
    monkeypatch.setattr(general, "collide", _counting(general.collide, calls))
    monkeypatch.setattr(cylinder, "_cylinder_manifold", _counting(cylinder._cylinder_manifold, manifolds))
    jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0))).lower(m, _batch2(m))
    assert len(calls) == 2
    assert len(manifolds) == 1


# _AGAINST_MESH with a fixed cylinder: the free bodies also make curved pairs without a mesh (ellipsoid-cylinder,
# cylinder-cylinder and capsule-cylinder), so both GJK/EPA kinds (`driver._CURVED`, `driver._MESH_GJK`) are present
_CURVED_AND_MESH = _AGAINST_MESH.replace(
    '<body pos="0 0 .3">', '<geom type="cylinder" size=".05 .1" pos="3 0 0" contype="1"/><body pos="0 0 .3">')


def _merged_trace_counts(monkeypatch, merge: bool) -> tuple[int, int]:
    m = mjl.configure(mjl.load_mjcf_string(_CURVED_AND_MESH), merge_curved_mesh=merge)
    kinds = {driver._distance_kind(g) for g in driver.pair_table(m).groups}
    assert {driver._CURVED, driver._MESH_GJK, driver._CAPSULE_MESH} <= kinds, kinds
    calls, manifolds = [], []
    monkeypatch.setattr(general, "collide", _counting(general.collide, calls))
    monkeypatch.setattr(cylinder, "_cylinder_manifold", _counting(cylinder._cylinder_manifold, manifolds))
    jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0))).lower(m, _batch2(m))
    return len(calls), len(manifolds)


@pytest.mark.slow  # an opt-in path (off by default); one trace of the collision stage (38 s at load 12)
def test_curved_and_mesh_kinds_merged(monkeypatch):
    """`Config.merge_curved_mesh`: the curved pairs without a mesh and the GJK/EPA pairs with one run one GJK/EPA
    (`general.general_mixed`) and one manifold: `collide` traced twice (that program and the capsule- and sphere-mesh
    separating axes), the manifold once."""
    assert _merged_trace_counts(monkeypatch, True) == (2, 1)


def _resting_poses(m) -> np.ndarray:
    """qpos (3, nq) of _CURVED_AND_MESH: every free body overlapping the cube's top, the prism's, the fixed cylinder's
    cap by 4 mm (the free bodies do not collide with each other)."""
    half = [0.07, 0.1, 0.15, 0.05]  # ellipsoid, cylinder, capsule, sphere: half-heights
    q = np.zeros((3, m.nq))
    for k, (x, y, top) in enumerate([(0.0, 0.0, 0.05), (0.52, 0.02, 0.1), (3.0, 0.0, 0.1)]):
        for b, h in enumerate(half):
            q[k, 7 * b : 7 * b + 7] = [x + 0.003 * b, y, top + h - 0.004, 1, 0, 0, 0]
    return q


@pytest.mark.slow  # two compiles of the collision stage
def test_curved_and_mesh_merged_equal(monkeypatch):
    """The merged GJK/EPA and manifold programs (`Config.merge_curved_mesh`) give bitwise the contacts of a program
    per kind, at poses where every free body rests on the cube, the prism and the fixed cylinder (float64)."""
    m = mjl.load_mjcf_string(_CURVED_AND_MESH)
    qpos = _resting_poses(m)
    d = mjl.make_data(m)
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (len(qpos),) + x.shape), d).replace(qpos=jp.asarray(qpos))
    db = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))(m, db)
    out = {}
    for merge in (True, False):
        mm = mjl.configure(m, merge_curved_mesh=merge)
        out[merge] = jax.jit(jax.vmap(lambda m, d: driver.collision(m, d).contact, in_axes=(None, 0)))(mm, db)
    assert int(np.sum(np.asarray(out[True].active))) >= 12
    for f in ("active", "geom", "dist", "pos", "frame"):
        np.testing.assert_array_equal(np.asarray(getattr(out[True], f)), np.asarray(getattr(out[False], f)), err_msg=f)
