"""Armature of tendons and actuators (MuJoCo 4.0): in qM at run time, in dof_M0 and the invweights at compile time."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import inertia, kinematics, tendon

TOL = 1e-12  # closed-form float64 arithmetic
TRAJ_TOL = 1e-9  # 100 float64 steps: round-off grows with the steps

XML = """<mujoco><worldbody><body><joint name="j0" axis="0 1 0"/><geom size=".1" pos=".3 0 0"/>
<body pos=".3 0 0"><joint name="j1" axis="0 1 0"/><geom size=".1" pos=".3 0 0"/></body></body></worldbody>
<tendon><fixed name="t" armature="0.5"><joint joint="j0" coef="1"/><joint joint="j1" coef="2"/></fixed></tendon>
<actuator><motor joint="j0" gear="3" armature="0.1"/><motor tendon="t" gear="2" armature="0.2"/></actuator>
</mujoco>"""


@jax.jit
def _full_m(m, d):
    """M after the stages that build it, in one program (CI time: run eagerly, op by op, they compiled one small
    program per operation)."""
    return inertia.full_m(m, inertia.crb(m, tendon.tendon(m, kinematics.com_pos(m, kinematics.kinematics(m, d)))))


def test_armature_in_mass_matrix_and_constants():
    mjm = mujoco.MjModel.from_xml_string(XML)
    m = mjl.load_mjcf_string(XML)
    for name in ("dof_M0", "dof_invweight0", "body_invweight0", "tendon_invweight0", "actuator_acc0"):
        np.testing.assert_allclose(np.asarray(getattr(m, name)), getattr(mjm, name), atol=TOL, err_msg=name)
    mjd = mujoco.MjData(mjm)
    for qpos in ([0.3, -0.5], [1.0, 0.2]):
        mjd.qpos[:] = qpos
        mujoco.mj_forward(mjm, mjd)
        full = np.zeros((2, 2))
        mujoco.mj_fullM(mjm, mjd, full)
        d = mjl.make_data(m).replace(qpos=jp.asarray(qpos))
        np.testing.assert_allclose(np.asarray(_full_m(m, d)), full, atol=TOL)


# a tendon coupling dofs on different branches (j1, j2) with armature on the tendon and on a tendon actuator
BRANCHED = """<mujoco><option><flag constraint="disable"/></option><worldbody>
<body><joint name="j0" axis="0 1 0"/><geom size=".1" pos=".3 0 0"/>
<body pos=".3 0 0"><joint name="j1" axis="0 1 0"/><geom size=".1" pos=".3 0 0"/></body>
<body pos="0 .3 0"><joint name="j2" axis="1 0 0"/><geom size=".1" pos="0 .3 0"/></body></body></worldbody>
<tendon><fixed name="t" armature="0.5"><joint joint="j1" coef="1"/><joint joint="j2" coef="2"/></fixed></tendon>
<actuator><motor tendon="t" gear="2" armature="0.2"/></actuator>
</mujoco>"""


@pytest.mark.parametrize("layout", ["dense", "sparse"])
def test_tendon_armature_across_branches_keeps_tree_sparsity(layout):
    """MuJoCo adds J' a J to qM only on the dof-tree entries: the j1-j2 coupling is dropped, at run time and in
    the compile-time constants; the same with the tree-sparse qM layout (forced here for nv = 3)."""
    mjm = mujoco.MjModel.from_xml_string(BRANCHED)
    m = mjl.load_mjcf_string(BRANCHED, config=mjl.Config(mass_matrix=layout))
    assert inertia.is_sparse(m) == (layout == "sparse")
    for name in ("dof_M0", "dof_invweight0", "body_invweight0", "tendon_invweight0", "actuator_acc0"):
        np.testing.assert_allclose(np.asarray(getattr(m, name)), getattr(mjm, name), atol=TOL, err_msg=name)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0.3, -0.5, 0.7]
    mjd.qvel[:] = [1.0, -2.0, 0.5]
    mjd.ctrl[:] = [0.3]
    mujoco.mj_forward(mjm, mjd)
    full = np.zeros((3, 3))
    mujoco.mj_fullM(mjm, mjd, full)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), ctrl=jp.asarray(mjd.ctrl))
    d = mjl.forward(m, d)
    np.testing.assert_allclose(np.asarray(mjl.full_m(m, d)), full, atol=TOL)
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, atol=TOL, rtol=TOL)


# actuator armature (and damping) on a free and a ball joint: MuJoCo 4.0 adds gear[0]^2 * armature on every dof of
# the joint (6 and 3), damping likewise per dof; no collisions (CI time: no box-sphere collider to compile; the geoms
# never touched, MuJoCo's results are bitwise the same)
BALL_FREE = """<mujoco><option integrator="implicitfast"/><default><geom contype="0" conaffinity="0"/></default>
<worldbody>
<body pos="0 0 1"><freejoint name="f"/><geom type="box" size=".1 .2 .3"/>
<body pos=".3 0 0"><joint name="b" type="ball" damping=".02"/><geom size=".1" pos=".1 0 0"/>
<body pos=".2 0 0"><joint name="h" axis="0 1 0"/><geom size=".05" pos=".1 0 0"/></body></body></body>
</worldbody><actuator><motor joint="b" gear="2 0 0 0 0 0" armature="0.5" damping=".3"/>
<motor joint="f" gear="3 1 0 0 0 0" armature="0.2"/><motor joint="h" gear="1.5" armature="0.1"/></actuator>
</mujoco>"""


# sparse: slow (CI time: a second forward compile); the armature enters the tree-sparse qM layout by default in
# test_tendon_armature_across_branches_keeps_tree_sparsity[sparse], the actuator armature of ball and free joints
# in [dense]
@pytest.mark.parametrize("layout", ["dense", pytest.param("sparse", marks=pytest.mark.slow)])
def test_actuator_armature_on_ball_and_free_joints(layout):
    mjm = mujoco.MjModel.from_xml_string(BALL_FREE)
    m = mjl.load_mjcf_string(BALL_FREE, config=mjl.Config(mass_matrix=layout))
    for name in ("dof_M0", "dof_invweight0", "body_invweight0", "actuator_acc0", "jnt_actuatorid"):
        np.testing.assert_allclose(np.asarray(getattr(m, name)), getattr(mjm, name), atol=TOL, err_msg=name)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(0)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.ctrl[:] = [0.3, -0.2, 0.1]
    mujoco.mj_forward(mjm, mjd)
    full = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, mjd, full)
    d = mjl.make_data(m).replace(qvel=jp.asarray(mjd.qvel), ctrl=jp.asarray(mjd.ctrl))
    d = mjl.forward(m, d)
    np.testing.assert_allclose(np.asarray(mjl.full_m(m, d)), full, atol=TOL)
    np.testing.assert_allclose(np.asarray(d.qfrc_passive), mjd.qfrc_passive, atol=TOL)
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, atol=TOL, rtol=TOL)


@pytest.mark.slow
def test_actuator_armature_on_ball_and_free_joints_trajectory():
    """100 implicitfast steps (the actuator damping of the ball joint in the implicit velocity derivative)."""
    mjm = mujoco.MjModel.from_xml_string(BALL_FREE)
    m = mjl.load_mjcf_string(BALL_FREE)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = np.random.default_rng(0).normal(size=mjm.nv)
    mjd.ctrl[:] = [0.3, -0.2, 0.1]
    d = mjl.make_data(m).replace(qvel=jp.asarray(mjd.qvel), ctrl=jp.asarray(mjd.ctrl))
    step = jax.jit(mjl.step)
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_TOL)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=TRAJ_TOL)
