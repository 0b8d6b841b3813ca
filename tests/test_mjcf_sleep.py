"""The sleep flag's compiled policies (tree_sleep_policy as MuJoCo's compiler: sleep="never", or "auto" on a tree an
actuator moves, never; other trees allowed; "init" kept), and where no tree may fall asleep MuJoCo's simulation does
not change with the flag and ours matches it. Sleeping trees themselves: tests/test_sleep.py."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl

TRAJ_ATOL = 1e-8  # float64, 150 steps with contacts (Newton to tolerance 1e-10)
_NEVER = (int(mujoco.mjtSleepPolicy.mjSLEEP_AUTO_NEVER), int(mujoco.mjtSleepPolicy.mjSLEEP_NEVER))

SCENE = """
<mujoco>
  <option tolerance="1e-10"><flag sleep="{sleep}"/></option>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="arm" pos="0 0 .5"><joint name="h" axis="0 1 0" damping=".1"/><geom type="capsule" size=".05 .2"/></body>
    <body name="ball" pos=".6 0 .3" {ball}><freejoint/><geom size=".1"/><site name="sb"/></body>
    <body name="pend" pos="1.5 0 .6" {pend}><joint type="ball" name="bj" damping=".05"/>
      <geom size=".05" pos=".1 0 0"/>
      <body><joint name="h2" axis="1 0 0"/><geom type="box" size=".05 .05 .05" pos="0 0 -.2"/></body>
    </body>
  </worldbody>
  <actuator><motor joint="h"/>{act}</actuator>
</mujoco>"""
ACCEPTED = {
    "actuated and never": dict(ball='sleep="never"', pend="", act='<motor joint="h2"/>'),
    "site actuator": dict(ball="", pend="", act='<motor joint="h2"/><general site="sb" gear="0 0 1 0 0 0"/>'),
    "adhesion": dict(
        ball="", pend="", act='<adhesion body="pend" ctrlrange="0 1"/><adhesion body="ball" ctrlrange="0 1"/>'
    ),  # fmt: skip
}
MAY_SLEEP = {
    "free ball": dict(ball="", pend="", act='<motor joint="h2"/>'),
    "allowed": dict(ball='sleep="never"', pend='sleep="allowed"', act='<motor joint="h2"/>'),
    "init": dict(ball='sleep="init"', pend="", act='<motor joint="h2"/>'),
}


@pytest.mark.parametrize("case", sorted(ACCEPTED) + sorted(MAY_SLEEP))
def test_policy_as_mujoco(case):
    """tree_sleep_policy is MuJoCo's compiled one; the flag loads whether or not a tree may sleep."""
    kw = {**ACCEPTED, **MAY_SLEEP}[case]
    xml = SCENE.format(sleep="enable", **kw)
    mjm = mujoco.MjModel.from_xml_string(xml)
    never = all(int(p) in _NEVER for p in mjm.tree_sleep_policy)
    assert never == (case in ACCEPTED)
    m = mjl.load_mjcf_string(xml)
    assert m.opt.enableflags & mujoco.mjtEnableBit.mjENBL_SLEEP
    np.testing.assert_array_equal(np.asarray(m.tree_sleep_policy), mjm.tree_sleep_policy)


# slow (CI time, ~9 worker-s: the step's compile of this scene's colliders): the sleep-enabled step against MuJoCo
# (trees that may sleep and trees that may not) stays by default in tests/test_sleep.py (test_activation[Euler],
# test_settle_sleep_wake_by_contact[Euler]); the policies that keep every tree awake stay by default in
# test_policy_as_mujoco
@pytest.mark.slow
def test_no_sleeping_tree_steps_as_mujoco():
    """With every tree's policy never, MuJoCo's trajectory (controls on, contacts) is the same with and without the
    flag, and ours matches it."""
    kw = ACCEPTED["actuated and never"]
    trajs = []
    for sleep in ("enable", "disable"):
        mjm = mujoco.MjModel.from_xml_string(SCENE.format(sleep=sleep, **kw))
        mjd = mujoco.MjData(mjm)
        mjd.ctrl[:] = (0.3, -0.2)
        out = []
        for _ in range(150):
            mujoco.mj_step(mjm, mjd)
            out.append(np.concatenate([mjd.qpos, mjd.qvel, [mjd.ncon]]))
        trajs.append(np.array(out))
    np.testing.assert_array_equal(trajs[0], trajs[1])
    assert trajs[0][:, -1].max() >= 1  # the ball lands
    m = mjl.load_mjcf_string(SCENE.format(sleep="enable", **kw))
    d = mjl.make_data(m)
    d = d.replace(ctrl=d.ctrl.at[:].set(np.array([0.3, -0.2])))
    stp = jax.jit(mjl.step)
    for k in range(150):
        d = stp(m, d)
        np.testing.assert_allclose(np.asarray(d.qpos), trajs[0][k, : m.nq], rtol=0, atol=TRAJ_ATOL,
                                   err_msg=f"step {k}")  # fmt: skip


@pytest.mark.parametrize("dim,count,kids", [
    (2, "3 3 1", '<elasticity young="1e3"/>'),  # no elastic2d: no stiffness -> never
    (2, "3 3 1", '<elasticity young="1e3" elastic2d="stretch" thickness=".01"/>'),
    (2, "3 3 1", '<elasticity young="1e3" elastic2d="bend" thickness=".01"/>'),
    (3, "2 2 2", '<elasticity young="1e3"/>'),
    (1, "4 1 1", '<elasticity young="1e3"/>'),  # a rod: bending
    (1, "4 1 1", '<edge stiffness="10"/>'),  # edge stiffness alone -> never
    (3, "2 2 2", '<elasticity damping=".01"/>'),  # damping alone -> never
    (2, "3 3 1", '<edge equality="true"/>'),
])  # fmt: skip
def test_flex_tree_policies_as_mujoco(dim, count, kids):
    """The trees of a flex's vertex bodies: never unless the flex has edge equality or elastic forces (a nonzero
    stiffness or bending block), as MuJoCo 4.0's compiler; beside a plain cloth (never)."""
    xml = f"""<mujoco><worldbody><flexcomp type="grid" count="{count}" spacing=".1 .1 .1" dim="{dim}" radius=".01"
      name="c"><contact selfcollide="none" contype="0" conaffinity="0"/>{kids}</flexcomp>
      <flexcomp type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" radius=".01" name="d" pos="1 0 0"/>
      </worldbody></mujoco>"""
    np.testing.assert_array_equal(np.asarray(mjl.load_mjcf_string(xml).tree_sleep_policy),
                                  mujoco.MjModel.from_xml_string(xml).tree_sleep_policy)  # fmt: skip
