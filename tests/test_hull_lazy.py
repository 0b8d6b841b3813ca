"""Mesh hulls are built for the meshes that collide only (issue 43: the Franka Panda collides 12 of its 67 meshes;
building every hull took 1.6 s of its first trace), and the tables the colliders read are those of the full
build. No compilation: the static pair table and host tables only."""

import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite._struct import _static_part
from mjx_lite.collision import driver, hull

# a tetrahedron, an octahedron (collided) and a 40-vertex prism (visual only: contype = conaffinity = 0)
_TET = "0 0 0  1 0 0  0 1 0  0 0 1"
_OCT = "1 0 0  -1 0 0  0 1 0  0 -1 0  0 0 1  0 0 -1"
_PRISM = " ".join(f"{np.cos(a):.6f} {np.sin(a):.6f} {z}" for z in (0, 1) for a in np.linspace(0, 2 * np.pi, 20, False))
XML = f"""
<mujoco>
  <asset>
    <mesh name="tet" vertex="{_TET}" scale=".05 .05 .05"/>
    <mesh name="oct" vertex="{_OCT}" scale=".05 .05 .05"/>
    <mesh name="prism" vertex="{_PRISM}" scale=".05 .05 .05"/>
  </asset>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 .1"/>
    <body pos="0 0 .2"><freejoint/><geom type="mesh" mesh="tet"/></body>
    <body pos="0 0 .3"><freejoint/><geom type="mesh" mesh="oct"/>
      <geom type="mesh" mesh="prism" contype="0" conaffinity="0"/></body>
    <body pos=".2 0 .3"><freejoint/><geom type="mesh" mesh="oct"/></body>
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def model():
    return mjl.load_mjcf_string(XML)


def _built(m) -> set[int]:
    """The mesh ids whose hulls are memoised on m's static part."""
    keys = [k[0] for k in _static_part(m).plans]
    return {int(k.rsplit(".", 1)[1]) for k in keys if isinstance(k, str) and k.startswith("collision.mesh_hull.")}


def test_only_collided_hulls_built(model):
    m = model
    groups = driver.pair_table(m).groups
    assert any(g.type1 == g.type2 == mjl.types.GeomType.MESH for g in groups)
    prism = 2  # mesh ids in asset order
    assert prism not in _built(m)
    assert _built(m) == {0, 1}
    # every pair of the table is between geoms that collide; the visual mesh geom is in none
    visual = int(np.flatnonzero(np.asarray(m.geom_contype) == 0)[0])
    for g in groups:
        assert visual not in g.geom1 and visual not in g.geom2


def test_tables_as_full_build(model):
    """group_tables (memoised, from the lazily built hulls) equal the tables of hulls built afresh."""
    m = model
    mids = np.array([0, 1])
    t = hull.group_tables(m, mids)
    assert hull.group_tables(m, mids) is t  # memoised per side
    fresh = [hull._mesh_hull(m, i) for i in range(m.nmesh)]
    for i in (0, 1):
        h = hull.mesh_hull(m, i)
        np.testing.assert_array_equal(h.vert, fresh[i].vert)
        np.testing.assert_array_equal(h.face, fresh[i].face)
        np.testing.assert_array_equal(h.edge, fresh[i].edge)
        np.testing.assert_array_equal(h.vedge, fresh[i].vedge)
        assert h.plane == fresh[i].plane
        row = t["row"][i]
        np.testing.assert_array_equal(t["vert"][i][: len(h.vert)], h.vert)
        np.testing.assert_array_equal(t["face"][i][: len(h.face)], h.face)
        np.testing.assert_array_equal(t["polynum"][row][: len(h.face)], [len(h.poly[j]) for j in h.tri_poly])
    # the size classes: the collided meshes' hull sizes (the visual mesh joins the last class)
    sizes = [hull.hull_size(m, i) for i in (0, 1)]
    assert sizes == [max(len(fresh[i].vert), len(fresh[i].face)) for i in (0, 1)]
