"""Ray casting (`pipeline.ray.ray`, MuJoCo's mj_ray) and rangefinder sensors against MuJoCo (float64).

Geoms of every type mj_ray handles (plane, sphere, capsule, ellipsoid, cylinder, box, mesh, a square and a
non-square height field), invisible geoms (by rgba and by material), rays from outside, from inside solids and
from below the height fields; distances, geom ids and normals are compared ray by ray. Rangefinders are compared
end to end (forward) with every data field and a cutoff, and on dm_control's quadruped (20 rangefinders, a 201 x
201 height field with random terrain).
"""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite import types
from mjx_lite.pipeline import ray, sensor
from tests import oracle

RAY_TOL = 1e-9  # float64: a handful of products and one division per hit
F32_TOL = 2e-4  # float32 sensor values (lengths of order 1) against MuJoCo's float64
FD_TOL = 1e-6  # central differences (step 1e-6) of a smooth hit distance

SCENE = """
<mujoco>
  <asset>
    <hfield name="sq" nrow="7" ncol="7" size="1.5 1.5 .6 .2"
      elevation="0 .1 .2 .3 .2 .1 0  .1 .5 .6 .4 .3 .2 .1  .2 .6 1 .8 .5 .3 .2  .3 .4 .8 .9 .7 .4 .1
                 .2 .3 .5 .7 .6 .5 .3  .1 .2 .3 .4 .5 .4 .2  .4 .3 .2 .1 .2 .3 .5"/>
    <hfield name="wide" nrow="4" ncol="6" size="1.2 .6 .4 .1"
      elevation="0 .2 .4 .6 .8 1  .1 .3 .5 .7 .9 .6  .2 .4 .6 .8 .5 .3  .3 .5 .7 .4 .2 .1"/>
    <mesh name="tet" vertex="0 0 0 .6 0 0 0 .6 0 0 0 .6"/>
    <material name="ghost" rgba="1 1 1 0"/>
    <material name="solid" rgba="1 1 1 1"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="6 6 .1" pos="0 0 -1"/>
    <geom name="hf" type="hfield" hfield="sq" pos="3 0 -.5" euler="5 -4 10"/>
    <geom name="hf2" type="hfield" hfield="wide" pos="-3 -2 -.6" euler="-3 6 -20" group="2"/>
    <geom name="tet" type="mesh" mesh="tet" pos="-2 1 0" euler="20 30 40" group="1"/>
    <geom name="hidden" type="sphere" size=".3" pos="-2 -2 0" rgba="1 0 0 0"/>
    <geom name="hidden2" type="sphere" size=".3" pos="-2 -2.5 0" material="ghost"/>
    <geom name="shown" type="sphere" size=".3" pos="-1 -2.5 0" rgba="1 0 0 0" material="solid"/>
    <body name="a" pos="0 0 .5" euler="10 20 30">
      <freejoint/>
      <geom name="sph" type="sphere" size=".2"/>
      <geom name="cap" type="capsule" size=".1 .3" pos=".5 0 0" euler="0 90 0" group="3"/>
      <geom name="ell" type="ellipsoid" size=".1 .2 .3" pos="0 .6 0"/>
      <geom name="cyl" type="cylinder" size=".15 .25" pos="0 -.6 .1" euler="30 0 0" group="4"/>
      <geom name="box" type="box" size=".1 .2 .15" pos="0 0 .6" euler="0 10 20" group="5"/>
      <site name="down" pos="0 0 -.3" zaxis="0 0 -1"/>
      <site name="to_hf" pos=".9 0 0" zaxis="1 0 -.4"/>
      <site name="to_mesh" pos="-.3 .3 0" zaxis="-2 1 -.5"/>
      <site name="to_hf2" pos="-.3 -.3 0" zaxis="-3 -2 -1.3"/>
      <site name="up" pos="0 0 .3"/>
    </body>
    <body name="b" pos="0 -2 .2">
      <joint type="hinge" axis="1 0 0"/>
      <geom type="box" size=".1 .1 .1"/>
      <site name="to_a" zaxis="0 1 .2"/>
    </body>
  </worldbody>
  <sensor>
    <rangefinder site="down"/>
    <rangefinder site="to_hf" data="dist dir origin point normal depth"/>
    <rangefinder site="to_mesh" data="dist normal"/>
    <rangefinder site="to_hf2" data="point normal"/>
    <rangefinder site="up" data="dist dir" cutoff="0.7"/>
    <rangefinder site="to_a" data="dist depth" cutoff="1.5"/>
  </sensor>
</mujoco>
"""


# the end-to-end tests need kinematics only: contacts off keeps their forward programs small
SCENE_NO_CONTACT = SCENE.replace("<mujoco>", '<mujoco><option><flag contact="disable"/></option>', 1)
# the default end-to-end model: SCENE_NO_CONTACT without the height fields and the mesh (each rangefinder data mask
# casts its own rays at every geom: their casts are test_ray_matches_mujoco's; the rangefinders' data fields, cutoffs,
# site frames and body exclusion are the same code on the plane, the primitives and the hinged box)
SCENE_RF_SMALL = "\n".join(line for line in SCENE_NO_CONTACT.splitlines()
                           if not any(f'name="{g}"' in line for g in ("hf", "hf2", "tet")))  # fmt: skip


@pytest.fixture(scope="module")
def scene():
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(0), qpos_scale=0.1)
    mujoco.mj_forward(mjm, mjd)
    m = oracle.model_from_mujoco(mjm)
    d = oracle.data_from_mujoco(m, mjm, mjd)
    return mjm, mjd, m, d


def _cast(m, d, pnt, vec, **kw):
    return tuple(np.asarray(x) for x in jax.jit(lambda d, p, v: ray.ray(m, d, p, v, **kw))(d, pnt, vec))


def _mujoco_rays(mjm, mjd, pnt, vec, bodyexclude, geomgroup=None, flg_static=True):
    gid, nrm = np.zeros(1, np.int32), np.zeros(3)
    out = np.zeros(len(pnt)), np.zeros(len(pnt), int), np.zeros((len(pnt), 3))
    for i in range(len(pnt)):
        grp = None if geomgroup is None else np.asarray(geomgroup, np.uint8)
        out[0][i] = mujoco.mj_ray(mjm, mjd, pnt[i], vec[i], grp, flg_static, int(bodyexclude[i]), gid, nrm)
        out[1][i], out[2][i] = gid[0], nrm
    return out


def _rays(mjm, mjd, kind: str, rng, k=1500):
    """Random rays: `random` anywhere, `aimed` at a random geom, `inside` starting near a geom's centre."""
    if kind == "random":
        pnt = rng.uniform([-4, -3.5, -1.2], [5, 3, 1.5], size=(k, 3))
        return pnt, rng.normal(size=(k, 3)) * rng.uniform(0.5, 2, size=(k, 1))
    g = rng.integers(1, mjm.ngeom, size=k)
    centre = mjd.geom_xpos[g]
    if kind == "inside":
        return centre + rng.normal(size=(k, 3)) * 0.05, rng.normal(size=(k, 3))
    tgt = centre + rng.normal(size=(k, 3)) * np.maximum(mjm.geom_rbound[g], 0.3)[:, None] * 0.7
    pnt = tgt + rng.normal(size=(k, 3)) * 2.0
    return pnt, (tgt - pnt) * rng.uniform(0.5, 2, size=(k, 1))


def _compare(mjm, ours, theirs, what):
    np.testing.assert_allclose(ours[0], theirs[0], rtol=0, atol=RAY_TOL, err_msg=f"{what}: distance")
    np.testing.assert_array_equal(ours[1], theirs[1], err_msg=f"{what}: geom id")
    np.testing.assert_allclose(ours[2], theirs[2], rtol=0, atol=RAY_TOL, err_msg=f"{what}: normal")


KINDS = ("random", "aimed", "inside")


@pytest.fixture(scope="module")
def cast_kinds(scene):
    """The rays of every kind of test_ray_matches_mujoco, cast in one call (one compile; the per-ray bodyexclude is
    static): {kind: (pnt, vec, bodyexclude, our (dist, geomid, normal))}."""
    mjm, mjd, m, d = scene
    rays = {}
    for kind in KINDS:
        rng = np.random.default_rng(KINDS.index(kind))
        pnt, vec = _rays(mjm, mjd, kind, rng)
        rays[kind] = (pnt, vec, rng.integers(-1, mjm.nbody, size=len(pnt)))
    pnt, vec, ex = (np.concatenate([r[k] for r in rays.values()]) for k in range(3))
    ours = _cast(m, d, jp.asarray(pnt), jp.asarray(vec), bodyexclude=ex)
    out, start = {}, 0
    for kind, (pnt, vec, ex) in rays.items():
        out[kind] = (pnt, vec, ex, tuple(x[start : start + len(pnt)] for x in ours))
        start += len(pnt)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_ray_matches_mujoco(scene, cast_kinds, kind):
    mjm, mjd, _, _ = scene
    pnt, vec, ex, ours = cast_kinds[kind]
    _compare(mjm, ours, _mujoco_rays(mjm, mjd, pnt, vec, ex), kind)
    assert 0 < np.sum(ours[0] >= 0) < len(pnt)  # hits and misses
    if kind == "aimed":  # the comparison covers every geom type
        assert set(mjm.geom_type[ours[1][ours[1] >= 0]]) == set(mjm.geom_type)
        for name in ("hidden", "hidden2"):
            assert mjm.geom(name).id not in ours[1]
        assert mjm.geom("shown").id in ours[1]  # its material's alpha decides, not its rgba


def test_ray_options_match_mujoco(scene):
    """geomgroup, flg_static off and one bodyexclude for all rays; a single ray gives scalar shapes."""
    mjm, mjd, m, d = scene
    rng = np.random.default_rng(7)
    pnt, vec = _rays(mjm, mjd, "aimed", rng, k=800)
    groups = (((1, 0, 1, 0, 1, 0), True), ((0, 1, 0, 1, 0, 1), False), (None, False), ((0,) * 6, True))
    # every option set cast in one compiled program
    cast = jax.jit(lambda d, p, v: [ray.ray(m, d, p, v, bodyexclude=1, geomgroup=group, flg_static=static)
                                    for group, static in groups])  # fmt: skip
    every = jax.device_get(cast(d, jp.asarray(pnt), jp.asarray(vec)))
    for (group, static), ours in zip(groups, every):  # the last sees nothing: every ray misses
        theirs = _mujoco_rays(mjm, mjd, pnt, vec, np.ones(len(pnt), int), group, static)
        _compare(mjm, ours, theirs, f"geomgroup={group} flg_static={static}")
    # shapes only (an eager cast would compile each of its operations)
    dist, gid, nrm = jax.eval_shape(lambda p, v: ray.ray(m, d, p, v), jp.asarray(pnt[0]), jp.asarray(vec[0]))
    assert dist.shape == gid.shape == () and nrm.shape == (3,)


# "full" slow (CI time: ~20 worker-s, its six rangefinder groups each cast at both height fields and the mesh): "small"
# (SCENE_RF_SMALL) compares the same sensor code by default, test_ray_matches_mujoco the height-field and mesh casts
@pytest.mark.parametrize("xml", [pytest.param(SCENE_RF_SMALL, id="small"),
                                 pytest.param(SCENE_NO_CONTACT, id="full", marks=pytest.mark.slow)])  # fmt: skip
def test_rangefinders_match_mujoco_end_to_end(xml):
    """forward's sensordata (every rangefinder data field, cutoffs) == mj_forward's, over random states."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = mjx_lite.load_mjcf_string(xml)
    fwd = jax.jit(mjx_lite.forward)
    hits, misses = 0, 0
    for seed in range(4):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, np.random.default_rng(seed), qpos_scale=0.2)
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, mjx_lite.make_data(m).replace(qpos=jp.asarray(mjd.qpos)))
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=RAY_TOL, err_msg=str(seed))
        dist = mjd.sensordata[mjm.sensor_adr[[0, 1, 2, 5]]]
        hits, misses = hits + np.sum(dist >= 0), misses + np.sum(dist < 0)
    assert hits > 0 and misses > 0, (hits, misses)


@pytest.mark.slow  # CI time: the float64 rangefinder tests cover the ray casts
def test_rangefinders_float32():
    """float32 sensors agree with MuJoCo's float64 to float32 precision in a state where every ray hits a face
    far from any edge (here: the first random state)."""
    mjm = mujoco.MjModel.from_xml_string(SCENE_NO_CONTACT)
    with jax.enable_x64(False):
        m = mjx_lite.load_mjcf_string(SCENE_NO_CONTACT)
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, np.random.default_rng(0), qpos_scale=0.2)
        mujoco.mj_forward(mjm, mjd)
        d = jax.jit(mjx_lite.forward)(m, mjx_lite.make_data(m).replace(qpos=jp.asarray(mjd.qpos, jp.float32)))
        assert d.sensordata.dtype == jp.float32
        np.testing.assert_allclose(np.asarray(d.sensordata), mjd.sensordata, rtol=0, atol=F32_TOL)


def test_ray_gradients_are_finite_and_match_differences(scene):
    """d(distance)/d(origin) on a sphere, a box face, a mesh face and a height-field triangle: central differences."""
    mjm, mjd, m, d = scene
    targets = ["sph", "box", "tet", "hf"]
    up = np.array([1.0, -1.0, -1.0, -1.0])  # the sphere from below (the box sits above it)
    pnt = np.stack([mjd.geom(n).xpos + np.array([0.013, -0.021, 0.8 * s]) for n, s in zip(targets, -up)])
    vec = np.array([0.05, 0.02, 1.0]) * np.array([1.0, 1.0, 0.0]) + np.array([0.0, 0.0, 1.0]) * up[:, None]

    def cast(p):
        dist, gid, _ = ray.ray(m, d, p, jp.asarray(vec))
        return dist, gid

    # one compiled program: the distances, geom ids and the gradient of their sum (the differences below use its
    # distances too)
    f = jax.jit(lambda p: (cast(p), jax.grad(lambda p: cast(p)[0].sum())(p)))
    (dist, gid), grad = jax.device_get(f(jp.asarray(pnt)))
    assert [mjm.geom(int(g)).name for g in gid] == targets  # each ray hits the geom it aims at
    assert np.all(np.isfinite(grad)) and np.all(dist > 0)
    h = 1e-6
    for j in range(3):
        e = np.zeros(3)
        e[j] = h
        fd = (np.asarray(f(jp.asarray(pnt + e))[0][0]) - np.asarray(f(jp.asarray(pnt - e))[0][0])) / (2 * h)
        np.testing.assert_allclose(grad[:, j], fd, rtol=0, atol=FD_TOL, err_msg=f"axis {j}")


def test_quadruped_rangefinders_match_mujoco():
    """dm_control's quadruped: 20 rangefinders over its 201 x 201 height field with random terrain (as the escape
    task makes), floor and walls, in random states."""
    path = os.path.join(oracle.DM_SUITE, "quadruped.xml")
    mjm = mujoco.MjModel.from_xml_path(path)
    rng = np.random.default_rng(0)
    terrain = rng.uniform(0, 1, size=mjm.hfield_data.shape) * 0.05 + np.linspace(0, 0.2, mjm.hfield_data.size)
    mjm.hfield_data[:] = terrain
    m = oracle.model_from_mujoco(mjm)
    rf = np.nonzero(mjm.sensor_type == mujoco.mjtSensor.mjSENS_RANGEFINDER)[0]
    assert len(rf) == 20
    fn = jax.jit(lambda d: sensor._compute_stage(m, d, types.Stage.POS))
    terrain_hits = 0
    for seed in range(3):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, np.random.default_rng(seed), qpos_scale=0.3)
        mujoco.mj_forward(mjm, mjd)
        d = fn(oracle.data_from_mujoco(m, mjm, mjd))
        got = np.asarray(d.sensordata)[mjm.sensor_adr[rf]]
        want = mjd.sensordata[mjm.sensor_adr[rf]]
        np.testing.assert_allclose(got, want, rtol=0, atol=RAY_TOL, err_msg=str(seed))
        pnt, vec = mjd.site_xpos[mjm.sensor_objid[rf]], mjd.site_xmat[mjm.sensor_objid[rf]].reshape(-1, 3, 3)[:, :, 2]
        _, gid, _ = _mujoco_rays(mjm, mjd, pnt, vec, mjm.site_bodyid[mjm.sensor_objid[rf]])
        terrain_hits += np.sum(gid == mjm.geom("terrain").id)
    assert terrain_hits > 0
