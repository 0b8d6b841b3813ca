"""Rigid flexes (every vertex on one body: collision geometry that moves with it) against MuJoCo 4.0: the three ways
to write one (`<flexcomp rigid="true">`, a flexcomp with every point pinned, a `<deformable><flex>` of one body with
vertex offsets) compile to MuJoCo's fields (flex_rigid, flex_vert, vertex bodies, no bodies or mass added, no
self-collisions), and a scene where they fall on a plane and a ball falls on one steps like mj_step, contact for
contact (the flexes' contype/conaffinity keep them from colliding with each other: they never meet, and flex-flex
pairs would only add their collider's compile)."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from tests import oracle

SCENE = """<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="1 1 .1"/>
    <body name="plate" pos="0 0 .12" euler="15 -10 5">
      <freejoint/>
      <geom type="box" size=".05 .05 .02" mass="1" contype="0" conaffinity="0"/>
      <flexcomp name="grid" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" rigid="true" radius=".01"
                mass="5"><contact contype="1" conaffinity="2"/></flexcomp>
    </body>
    <body name="cube" pos=".4 0 .15" euler="0 20 0">
      <freejoint/>
      <geom type="sphere" size=".03" mass=".5" contype="0" conaffinity="0"/>
      <flexcomp name="pinned" type="grid" count="2 2 2" spacing=".08 .08 .08" dim="3" radius=".005">
        <pin id="0 1 2 3 4 5 6 7"/><contact contype="1" conaffinity="2"/>
      </flexcomp>
    </body>
    <body name="ball" pos=".02 .03 .3">
      <freejoint/>
      <geom type="sphere" size=".04" mass=".3"/>
    </body>
    <body name="tet" pos="-.4 0 .1" euler="0 0 30">
      <freejoint/>
      <geom type="capsule" size=".02 .05" mass=".4" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <deformable>
    <flex name="offsets" dim="3" body="tet" vertex="0 0 -.06  .08 0 -.06  0 .08 -.06  0 0 .05" element="0 1 2 3"
          radius=".004"><contact contype="1" conaffinity="2"/></flex>
  </deformable>
</mujoco>
"""
STEPS = 100
TRAJ_ATOL = 1e-9  # qpos after 100 steps (float64; contacts of rigid elements against a plane and a sphere)


@pytest.fixture(scope="module")
def both():
    return mjx_lite.load_mjcf_string(SCENE), mujoco.MjModel.from_xml_string(SCENE)


def test_compiled_fields_match_mujoco(both):
    m, mjm = both
    assert oracle.compare_models(m, mjm) == []
    np.testing.assert_array_equal(np.asarray(m.flex_rigid), [True, True, True])  # (deformable first, as MuJoCo)
    assert m.nbody == mjm.nbody == 5  # no vertex bodies
    np.testing.assert_array_equal(np.asarray(m.flex_selfcollide), mjm.flex_selfcollide)  # kept, never used


def test_steps_like_mujoco(both):
    m, mjm = both
    mjd, d = mujoco.MjData(mjm), mjx_lite.make_data(m)
    step = jax.jit(mjx_lite.step)
    touched = set()
    for _ in range(STEPS):
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
        assert int(np.asarray(d.contact.active).sum()) == mjd.ncon  # contacts of the state each step started from
        touched |= set(mjd.contact.flex[: mjd.ncon].ravel().tolist())
    assert touched >= {0, 1, 2}  # every rigid flex touched something on the way (the test is not vacuous)
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, rtol=0, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, rtol=0, atol=TRAJ_ATOL)


def _one(flexcomp: str) -> str:
    return (f'<mujoco><worldbody><body name="b" pos="0 0 .3"><freejoint/><geom type="box" size=".05 .05 .05" '
            f'mass="1"/>{flexcomp}</body></worldbody></mujoco>')  # fmt: skip


def _grid(dim: int, inner: str) -> str:
    count = {1: "4 1 1", 2: "3 3 1", 3: "2 2 2"}[dim]
    return _one(f'<flexcomp name="f" type="grid" count="{count}" spacing=".1 .1 .1" dim="{dim}" rigid="true" '
                f'radius=".01">{inner}<contact selfcollide="none"/></flexcomp>')  # fmt: skip


@pytest.mark.parametrize("xml", [
    _grid(1, '<elasticity young="1e4" poisson=".3"/>'),  # a rigid rod: no hinges, no twist bodies
    _grid(2, '<elasticity young="1e4" poisson=".3" thickness=".01" elastic2d="both"/>'),  # stiffness kept
    _grid(3, '<elasticity young="1e4" poisson=".3"/>'),
    _grid(2, '<edge equality="true"/>'),  # a rigid flexcomp adds no edge equality
    _one('<flexcomp name="f" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" radius=".01"><pin id="0"/>'
         '<pin gridrange="0 0 2 2"/><contact selfcollide="none"/></flexcomp>'),  # every point pinned (twice)
])  # fmt: skip
def test_rigid_variants_compile_like_mujoco(xml):
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert bool(np.asarray(m.flex_rigid)[0])
    assert oracle.compare_models(m, mjm) == []


@pytest.mark.parametrize("inner", ['<edge damping=".1"/>', '<elasticity young="1e4" poisson=".3" damping=".01"/>'])
def test_rigid_with_damping_fails_as_in_mujoco(inner):
    xml = _grid(3, inner)
    with pytest.raises(ValueError, match="flexedge_J_rownnz"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjx_lite.MJCFError, match="rigid flex"):
        mjx_lite.load_mjcf_string(xml)
