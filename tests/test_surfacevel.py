"""Surface velocities of geoms (MuJoCo 4.0's geom surfacevel: conveyor belts, turntables): the contact rows'
efc_vel (and so efc_aref) carry the relative tangential and torsional surface velocity of the two geoms; 100 steps
against MuJoCo with pyramidal and elliptic cones, condim 1, 3, 4 and 6."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from tests import oracle

TOL = 1e-10  # one forward pass, float64
TRAJ_TOL = 1e-8  # 200 float64 steps in contact (round-off grows with the steps)
ELLIPTIC_TOL = 1e-7  # elliptic cones: the Newton solver's convergence path differs from MuJoCo's by ~1e-9 per step


# the belt: a box (its top at z = .05), or (belt="plane") a plane there: the default test's smaller collision program
# (CI time: the box-box collider)
BELTS = {"box": 'type="box" size="1 1 .05"', "plane": 'type="plane" size="1 1 .05" pos="0 0 .05"'}


def _xml(cone: str, condim: int, belt: str = "box") -> str:
    return f"""<mujoco><option cone="{cone}"/><worldbody>
<geom name="belt" {BELTS[belt]} surfacevel="0.3 0.1 0 0 0 0.5" euler="0 0 20" condim="{condim}"/>
<body pos="0.2 0 .14"><freejoint/><geom type="box" size=".1 .1 .1" condim="{condim}"/></body>
<body pos="-0.3 0.2 .3"><freejoint/><geom size=".06" surfacevel="0 0.2 0 0 0.4 0"/></body></worldbody></mujoco>"""


def _settled(cone, condim, belt="box"):
    xml = _xml(cone, condim, belt)
    mjm, m = mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)
    assert m.flg_surfacevel and bool(mjm.flg_surfacevel)
    mjd = mujoco.MjData(mjm)
    for _ in range(30):  # settle into contact
        mujoco.mj_step(mjm, mjd)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), time=jp.asarray(mjd.time),
                                 qacc_warmstart=jp.asarray(mjd.qacc_warmstart))  # fmt: skip
    return mjm, mjd, m, d


def test_surface_velocity_rows_match_mujoco():
    """efc_vel and efc_aref of the contact rows (pyramidal, condim 3) with a belt (a plane: CI time; the slow
    trajectories run on a box belt) and a spinning ball."""
    mjm, mjd, m, d = _settled("pyramidal", 3, belt="plane")
    mujoco.mj_forward(mjm, mjd)
    f = jax.jit(mjl.forward)(m, d)
    assert mjd.nefc > 0
    rm, ro = oracle.match_rows(mjd, mjm, f)
    for name in ("efc_vel", "efc_aref"):
        np.testing.assert_allclose(np.asarray(getattr(f, name))[ro], getattr(mjd, name)[rm], atol=TOL, err_msg=name)
    np.testing.assert_allclose(np.asarray(f.qacc), mjd.qacc, atol=TOL * 1e2)


@pytest.mark.slow
@pytest.mark.parametrize("cone, condim, tol", [("pyramidal", 3, TRAJ_TOL), ("elliptic", 4, ELLIPTIC_TOL),
                                               ("pyramidal", 6, TRAJ_TOL), ("elliptic", 1, TRAJ_TOL)])  # fmt: skip
def test_surface_velocity_moves_like_mujoco(cone, condim, tol):
    mjm, mjd, m, d = _settled(cone, condim)

    def run(d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=200)[0]

    d = jax.jit(run)(d)
    for _ in range(200):
        mujoco.mj_step(mjm, mjd)
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=tol)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=tol)
    if condim > 1:
        assert np.linalg.norm(mjd.qvel[:2]) > 0.1  # the belt carries the box
