"""Issue 39: constraint islands. MuJoCo 4.0 solves each island apart (Newton, CG, PGS, and noslip per island; on by
default, `<flag island="disable"/>` turns it off). Here: `solver.island.find` gives MuJoCo's islands (its numbering
too) on scenes of several islands, with dense and sparse Jacobians, batched.

Probe on the 4.0 binary (/tmp/isl39/probe2.py in the issue's report): three bodies on a plane and a limited hinge
chain (4 islands), tolerance 1e-8, islands on vs off: Newton's qacc agrees to 1e-12 (pyramidal), CG's differs by
1e-3 and PGS's by 5e-3 to 2.5e-2 (max |qacc| 3.5e2), and each island stops at its own iteration count
(e.g. CG 48/43/6/6 against 63 for the whole).
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import constraint
from mjx_lite.pipeline import forward as fwd
from mjx_lite.solver import common, island
from tests import oracle

# trees: 0 box on the floor, 1 sphere resting on 0, 2 sphere on the floor, 3 limited hinge chain, 4 and 5 free bodies
# joined by a connect, 6 a free body in the air (no island), 7 a sphere on the floor far away
XML = """
<mujoco>
  <option jacobian="dense"/>
  <worldbody>
    <geom type="plane" size="9 9 .1"/>
    <body pos="0 0 .095"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="0 0 .29"><freejoint/><geom type="sphere" size=".1"/></body>
    <body pos="1 0 .09"><freejoint/><geom type="sphere" size=".1"/></body>
    <body pos="-1 0 .6">
      <joint type="hinge" axis="0 1 0" range="-30 30"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
      <body pos=".3 0 0"><joint type="hinge" axis="0 1 0" range="-10 10"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/></body>
    </body>
    <body name="a" pos="2 2 1"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body name="b" pos="2.3 2 1"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body pos="-2 -2 2"><freejoint/><geom type="sphere" size=".1" contype="0" conaffinity="0"/></body>
    <body pos="3 0 .09"><freejoint/><geom type="sphere" size=".1"/></body>
  </worldbody>
  <equality><connect body1="a" body2="b" anchor=".15 0 0"/></equality>
</mujoco>
"""


def _states(mjm, n):
    """Bodies sunk into the floor / each other, the chain past its limits, random velocities."""
    out = []
    rng = np.random.default_rng(0)
    for i in range(n):
        mjd = mujoco.MjData(mjm)
        for b in (1, 2, 3, 8):
            a = mjm.jnt_qposadr[mjm.body_jntadr[b]]
            mjd.qpos[a + 2] -= 0.004 + 0.004 * rng.random()
        hinge = mjm.jnt_qposadr[mjm.body_jntadr[4]]
        mjd.qpos[hinge] = 0.55 if i % 2 == 0 else 0.0  # the chain's island appears in every other state
        mjd.qpos[hinge + 1] = -0.2 if i % 2 == 0 else 0.0
        mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
        mujoco.mj_forward(mjm, mjd)
        out.append(mjd)
    return out


@pytest.fixture(scope="module", params=["dense", "sparse"])
def scene(request):
    """(MuJoCo model, our Model, MuJoCo's Data per state, our Data per state (rows made), batched islands)."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    m = mjl.configure(oracle.model_from_mujoco(mjm), efc_jacobian=request.param)
    mjds = _states(mjm, 4)
    ds = [mjl.make_data(m).replace(qpos=jp.asarray(x.qpos), qvel=jp.asarray(x.qvel)) for x in mjds]
    batch = jax.tree.map(lambda *x: np.stack(x), *ds)
    made = jax.jit(jax.vmap(lambda d: fwd.forward_pos_vel(m, d)))(batch)

    def islands(d):
        p = constraint.problem(m, d)
        assert (p.J_colind is not None) == (request.param == "sparse")
        return island.find(p, m.dof_treeid, m.ntree)

    isl = jax.jit(jax.vmap(islands))(made)
    return mjm, m, mjds, made, isl


def test_islands_match_mujoco(scene):
    """nisland, tree_island, dof_island and each live row's island are MuJoCo's (rows matched by J and pos)."""
    mjm, m, mjds, made, isl = scene
    seen = set()

    def dense_j(d):
        p = constraint.problem(m, d)
        return common.j_dense(p.J, p.J_colind, m.nv)

    # every state's dense rows in one program, the states then read on the host (CI time: eagerly, the problem's
    # operations and each Data leaf's slice compiled a small program each)
    dense = np.asarray(jax.jit(jax.vmap(dense_j))(made))
    made, isl = jax.tree.map(np.asarray, (made, isl))
    for i, mjd in enumerate(mjds):
        d = jax.tree.map(lambda x, i=i: x[i], made)
        d = d.replace(efc_J=dense[i])  # match_rows compares dense rows
        assert int(isl.nisland[i]) == mjd.nisland, (i, int(isl.nisland[i]), mjd.nisland)
        np.testing.assert_array_equal(np.asarray(isl.tree_island[i]), mjd.tree_island, err_msg=f"state {i}")
        np.testing.assert_array_equal(np.asarray(isl.dof_island[i]), mjd.dof_island, err_msg=f"state {i}")
        r, c = oracle.match_rows(mjd, mjm, d)
        np.testing.assert_array_equal(np.asarray(isl.efc_island[i])[c], mjd.efc_island[r], err_msg=f"state {i}")
        dead = np.setdiff1d(np.arange(d.efc_mask.shape[0]), c)
        assert np.all(np.asarray(isl.efc_island[i])[dead] == -1)
        seen.add(mjd.nisland)
    assert seen == {4, 5}, seen  # the scene has several islands, their number changing with the state
