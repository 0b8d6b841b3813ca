"""Issue 38: sleeping islands (`<flag sleep="enable"/>`, pipeline/sleep.py) against MuJoCo 4.0 in float64.

Each test steps our model and MuJoCo's side by side through trajectories long enough that trees fall asleep, are
woken (by contact with an awake tree, an equality, a moved pose, an applied force) and fall asleep again, and
compares every step: the state (qpos, qvel, qacc, qacc_warmstart), the forces that reach a sleeping tree or are
frozen for it (qfrc_bias, qfrc_smooth, qacc_smooth, qfrc_constraint, qfrc_actuator, actuator_force), the sleep
state (tree_asleep with its island cycles, tree_awake, body_awake and the counts), and the contacts and constraint
rows (ncon, nefc; the active contacts' geom pairs, distances and points), and the sensors (a sleeping sensor keeps
its last value).
"""

import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.mjcf.spec import MJCFUnsupportedError

STATE_ATOL = 1e-9  # qpos, qvel: float64, Newton to tolerance 1e-12 (MuJoCo: 2.9e-15 / 2.9e-13 over 150 steps)
ACC_ATOL = 1e-7  # qacc and forces (contact impacts: |qacc| up to ~1e3)
CONTACT_ATOL = 1e-9  # contact distances and points
_INT = ("tree_asleep", "tree_awake", "body_awake", "ntree_awake", "nbody_awake", "nv_awake", "ncon", "nefc")
_FLOAT = {"qpos": STATE_ATOL, "qvel": STATE_ATOL, "qacc": ACC_ATOL, "qacc_warmstart": ACC_ATOL,
          "qfrc_constraint": ACC_ATOL, "qfrc_smooth": ACC_ATOL, "qacc_smooth": ACC_ATOL, "qfrc_bias": ACC_ATOL,
          "qfrc_actuator": ACC_ATOL, "actuator_force": ACC_ATOL, "sensordata": ACC_ATOL, "act": STATE_ATOL,
          "act_dot": ACC_ATOL, "history": ACC_ATOL}  # fmt: skip

# two boxes: a settles on the floor and sleeps, b falls on it (wakes it), both settle and sleep as one island; with
# sensors on a, some delayed or sampled at an interval (history buffers: MuJoCo 4.0 keeps filling them while a
# sleeps, and delayed and interval sensors keep reading and sampling them)
TWO = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12" integrator="{integrator}"><flag sleep="enable"/></option>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>
    <body name="a" pos="0 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/><site name="sa" pos="0 0 .1"/></body>
    <body name="b" pos=".03 .02 1.5" euler="0 0 20"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
  <sensor>
    <framepos objtype="body" objname="a"/><accelerometer site="sa"/><velocimeter site="sa"/><subtreecom body="a"/>
    <framelinvel objtype="body" objname="b" reftype="body" refname="a"/><clock delay=".02" nsample="3"/>
    <framepos objtype="body" objname="a" delay=".02" nsample="3"/>
    <framelinvel objtype="body" objname="a" delay=".03" nsample="4"/>
    <framepos objtype="body" objname="a" nsample="3" interval=".05"/>
    <framelinvel objtype="body" objname="a" nsample="3" interval=".05"/>
    <framepos objtype="body" objname="a" nsample="3"/>
  </sensor>
</mujoco>"""

# a stack of three (one island: its cycle), a lone box, a mocap box swept into the lone box after it sleeps
STACK = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12"><flag sleep="enable"/></option>
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <body pos="0 0 .34"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="1 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="0 0 .56"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="0 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body name="pusher" pos="1.5 0 .1" mocap="true"><geom type="sphere" size=".08"/></body>
  </worldbody>
</mujoco>"""

# sleep policies: a box never sleeping, an actuated hinge arm allowed to sleep (its motor is asleep with it), a box
# initialised asleep in mid-air (woken by a touch), a slide box initialised asleep in penetration
POLICY = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12"><flag sleep="enable"/></option>
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <body pos="2 0 .12" sleep="never"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body name="arm" pos="-1 0 .3" sleep="allowed"><joint name="h" axis="0 1 0" damping="2"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.2" size=".04"/></body>
    <body pos="0 0 .6" sleep="init"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body pos="1 0 .09" sleep="init"><joint type="slide" axis="0 0 1"/><geom type="box" size=".1 .1 .1"/></body>
    <body pos=".03 .02 1.5" euler="0 0 20"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
  </worldbody>
  <actuator><motor joint="h"/></actuator>
</mujoco>"""

# equalities: a box asleep on the floor and a damped pendulum, joined by a connect that is off at first; turning it
# on (while the pendulum swings) wakes the box
EQUALITY = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12"><flag sleep="enable"/></option>
  <worldbody>
    <geom type="plane" size="3 3 .1"/>
    <body name="box" pos=".4 0 .12"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
    <body name="pend" pos="0 0 1"><joint axis="0 1 0" damping=".05"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body>
  </worldbody>
  <equality><connect body1="box" body2="pend" anchor="0 0 .3" active="false" solref=".05 1"/></equality>
</mujoco>"""


# pendulums that come to rest against a tendon limit, with tendon and dof friction loss, and against a joint limit:
# their limit and friction rows go when they sleep
LIMITS = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12"><flag sleep="enable"/></option>
  <worldbody>
    <body pos="0 0 1"><joint name="h" axis="0 1 0" damping=".5"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body>
    <body pos="1 0 1"><joint name="h2" axis="0 1 0" damping=".5" frictionloss=".01"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body>
    <body pos="2 0 1"><joint axis="0 1 0" damping=".5" range="-20 20"/>
      <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03"/></body>
  </worldbody>
  <tendon><fixed range="-.3 .3" limited="true"><joint joint="h" coef="1"/></fixed>
          <fixed frictionloss=".02"><joint joint="h2" coef="1"/></fixed></tendon>
</mujoco>"""


# two pendulums asleep apart, coupled by a limited tendon between their trees; one pushed swings to the limit and
# wakes the other
TENDON = """
<mujoco>
  <option timestep="0.01" tolerance="1e-12"><flag sleep="enable"/></option>
  <worldbody>
    <body pos="0 0 1"><joint name="h1" axis="0 1 0" damping=".2"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.3" size=".03"/></body>
    <body pos="1 0 1"><joint name="h2" axis="0 1 0" damping=".2"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.3" size=".03"/></body>
  </worldbody>
  <tendon>
    <fixed limited="true" range="-.3 .3"><joint joint="h1" coef="1"/><joint joint="h2" coef="-1"/></fixed>
  </tendon>
</mujoco>"""


def _models(xml):
    return mujoco.MjModel.from_xml_string(xml), mjl.load_mjcf_string(xml)


def _contacts(con, n=None):
    """The active contacts as a sorted list of (geom1, geom2, dist, pos)."""
    if n is None:
        act = np.asarray(con.active)
        g, dist, pos = np.asarray(con.geom)[act], np.asarray(con.dist)[act], np.asarray(con.pos)[act]
    else:
        g, dist, pos = con.geom[:n], con.dist[:n], con.pos[:n]
    rows = [(int(a), int(b), float(x), tuple(p)) for (a, b), x, p in zip(g, dist, pos)]
    return sorted(rows, key=lambda r: (r[0], r[1], tuple(np.round(r[3], 6))))  # (points equal to round-off)


def _compare(k, d, mjd):
    for f in _INT:
        ours = np.asarray(getattr(d, f))
        theirs = getattr(mjd, f) if f not in ("ncon", "nefc") else getattr(mjd, f)
        np.testing.assert_array_equal(ours, np.asarray(theirs).reshape(ours.shape), err_msg=f"step {k}: {f}")
    for f, tol in _FLOAT.items():
        np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=0, atol=tol,
                                   err_msg=f"step {k}: {f}")  # fmt: skip
    ours, theirs = _contacts(d.contact), _contacts(mjd.contact, mjd.ncon)
    assert [r[:2] for r in ours] == [r[:2] for r in theirs], f"step {k}: contact pairs"
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a[2:3] + a[3], b[2:3] + b[3], rtol=0, atol=CONTACT_ATOL, err_msg=f"step {k}")


@pytest.fixture(scope="module")
def stepper():
    return jax.jit(mjl.step)


def _run(xml, n, stepper, actions=None, config=None):
    """Step both for n steps; actions: {step: f(mjm, mjd, m, d) -> d} applied to both before that step; config:
    `mjl.configure` keywords. Returns the MuJoCo tree_asleep history (n, ntree)."""
    mjm, m = _models(xml)
    if config:
        m = mjl.configure(m, **config)
    mjd = mujoco.MjData(mjm)
    d = mjl.make_data(m)
    np.testing.assert_array_equal(np.asarray(d.tree_asleep), mjd.tree_asleep, err_msg="make_data")
    np.testing.assert_array_equal(np.asarray(d.body_awake), mjd.body_awake, err_msg="make_data")
    hist = []
    for k in range(n):
        if actions and k in actions:
            d = actions[k](mjm, mjd, m, d)
        mujoco.mj_step(mjm, mjd)
        d = stepper(m, d)
        _compare(k, d, mjd)
        hist.append(mjd.tree_asleep.copy())
    return np.array(hist)


def test_policy_compiled_as_mujoco():
    """tree_sleep_policy as MuJoCo's compiler sets it: user policies, auto -> never for actuated trees, else allowed."""
    for xml in (TWO.format(integrator="Euler"), STACK, POLICY, EQUALITY):
        mjm, m = _models(xml)
        np.testing.assert_array_equal(np.asarray(m.tree_sleep_policy), mjm.tree_sleep_policy)
        assert float(m.opt.sleep_tolerance) == mjm.opt.sleep_tolerance


@pytest.mark.parametrize("integrator", ["Euler", pytest.param("implicitfast", marks=pytest.mark.slow)])
def test_settle_sleep_wake_by_contact(stepper, integrator):
    """a sleeps, b lands on it and wakes it (b's counter), both sleep together as one island cycle."""
    hist = _run(TWO.format(integrator=integrator), 150, stepper)
    asleep = hist >= 0
    assert asleep[:, 0].any() and not asleep[:, 0].all()  # a slept, then was woken
    assert np.array_equal(hist[-1], [1, 0])  # one island: a -> b -> a


@pytest.mark.slow
def test_stack_cycle_and_mocap_wake(stepper):
    """The stack sleeps as one island (cycle in ascending tree order); a mocap body moved into the lone sleeping
    box wakes it."""

    def push(x):
        def act(mjm, mjd, m, d):
            mjd.mocap_pos[0] = (x, 0, 0.1)
            return d.replace(mocap_pos=d.mocap_pos.at[0].set(jp.array([x, 0, 0.1])))

        return act

    actions = {k: push(1.5 - 0.01 * (k - 60)) for k in range(60, 110)}
    hist = _run(STACK, 130, stepper, actions)
    assert (hist[59] >= 0).all() and np.array_equal(hist[59][[0, 2, 3]], [2, 3, 0])
    assert (hist[100:, 1] < 0).any()  # the pusher woke the lone box


@pytest.mark.slow
def test_policies_never_allowed_init(stepper):
    """never: awake throughout; allowed on an actuated arm hanging at rest: sleeps, and stays asleep (its actuator
    force frozen) when the control changes, until a qfrc_applied of -0.0 (bytewise nonzero) wakes it; init: asleep
    from make_data, in mid-air and in penetration, until the falling box hits the mid-air one."""

    def ctrl(mjm, mjd, m, d):
        mjd.ctrl[0] = 0.5
        return d.replace(ctrl=d.ctrl.at[0].set(0.5))

    def poke(mjm, mjd, m, d):
        mjd.qfrc_applied[6] = -0.0
        return d.replace(qfrc_applied=d.qfrc_applied.at[6].set(-0.0))

    hist = _run(POLICY, 70, stepper, {30: ctrl, 50: poke})
    assert (hist[:, 0] < 0).all()
    assert (hist[20:50, 1] >= 0).all() and (hist[50:, 1] < 0).all()
    assert (hist[:, 3] >= 0).all()  # the slide box stays asleep in penetration
    assert (hist[:10, 2] >= 0).all() and (hist[:, 2] < 0).any()


@pytest.mark.slow
def test_equality_and_pose_wake(stepper):
    """A connect turned on between the swinging pendulum and the sleeping box wakes the box; later a qpos written
    into the sleeping box (a moved pose) and an xfrc_applied wake it."""

    def eq_on(mjm, mjd, m, d):
        mjd.eq_active[0] = 1
        return d.replace(eq_active=d.eq_active.at[0].set(True))

    hist = _run(EQUALITY, 80, stepper, {40: eq_on})
    assert (hist[30:40, 0] >= 0).all() and (hist[40:, 0] < 0).all()


@pytest.mark.slow
def test_pose_and_force_wake(stepper):
    """A sleeping box woken by a qpos written into it (its pose changes), and by xfrc_applied."""

    def move(mjm, mjd, m, d):
        mjd.qpos[0] += 0.05
        return d.replace(qpos=d.qpos.at[0].add(0.05))

    def push(mjm, mjd, m, d):
        mjd.xfrc_applied[1, 0] = 1.0
        return d.replace(xfrc_applied=d.xfrc_applied.at[1, 0].set(1.0))

    def release(mjm, mjd, m, d):
        mjd.xfrc_applied[1, 0] = 0.0
        return d.replace(xfrc_applied=d.xfrc_applied.at[1, 0].set(0.0))

    hist = _run(TWO.format(integrator="Euler").replace('pos=".03 .02 1.5"', 'pos="1 0 .12"'), 110, stepper,
                {30: move, 60: push, 62: release})  # fmt: skip
    assert (hist[28, :] >= 0).all() and (hist[30, 0] < 0) and (hist[60, 0] < 0) and (hist[-1] >= 0).all()


@pytest.mark.slow
def test_limit_and_friction_rows_of_sleeping_trees(stepper):
    """Trees asleep against a tendon limit, with friction loss, and against a joint limit lose those rows."""
    hist = _run(LIMITS, 300, stepper)
    assert (hist[-1] >= 0).all()


@pytest.mark.slow
def test_wake_by_tendon(stepper):
    """A limited tendon at its limit between an awake and a sleeping tree wakes the sleeping one."""

    def push(k):
        def act(mjm, mjd, m, d):
            mjd.xfrc_applied[1, 0] = 80.0 * (k == 30)
            return d.replace(xfrc_applied=d.xfrc_applied.at[1, 0].set(80.0 * (k == 30)))

        return act

    hist = _run(TENDON, 60, stepper, {30: push(30), 31: push(31)})
    assert (hist[20:30] >= 0).all() and hist[35, 1] >= 0 and (hist[55] < 0).all()


# RK4 (no contacts: cheap to compile): a damped pendulum released at 45 degrees settles under gravity; a damped
# horizontal slider pushed and left alone settles. A tree that falls asleep keeps the poses of RK4's last stage while
# its qpos stays at the step's start, so the next step's kinematics sees it moved and wakes it (MuJoCo 4.0, probed):
# the pendulum sleeps for single steps; the slider, woken with zero velocity and no force, does not move at all over
# the next stages and then stays asleep, until pushed again
RK4 = """
<mujoco>
  <option timestep="0.01" integrator="RK4"><flag sleep="enable"/></option>
  <worldbody>
    <body pos="0 0 1"><joint axis="0 1 0" damping=".3"/><geom type="capsule" fromto="0 0 0 .2 0 -.2" size=".03"/>
    </body>
    <body name="s" pos="1 0 1"><joint name="s" type="slide" axis="1 0 0" damping="20"/>
      <geom type="box" size=".05 .05 .05"/><site name="ss"/></body>
  </worldbody>
  <sensor><jointpos joint="s"/><velocimeter site="ss"/><accelerometer site="ss"/></sensor>
</mujoco>"""


@pytest.mark.slow  # (~40 s to compile; test_activation[RK4], not slow, covers RK4's sleeping in 10 s)
@pytest.mark.parametrize("rk4_loop", ["auto", "merged"])
def test_rk4(stepper, rk4_loop):
    """RK4 as MuJoCo 4.0: mj_sleep after the four stages (islands of the last stage's rows, the recomputation on
    its positions), a tree that fell asleep woken by its moved pose at the next step, a tree asleep at rest kept
    asleep through the stages (their forces frozen); qacc is the b-weighted acceleration, qacc_warmstart the last
    stage's."""

    def push(f):
        def act(mjm, mjd, m, d):
            mjd.xfrc_applied[2, 0] = f
            return d.replace(xfrc_applied=d.xfrc_applied.at[2, 0].set(f))

        return act

    hist = _run(RK4, 160, stepper, {0: push(3.0), 3: push(0.0), 100: push(-3.0), 102: push(0.0)},
                config={"rk4_loop": rk4_loop})  # fmt: skip
    slept = hist[:-1] >= 0
    assert (slept[:, 0] & (hist[1:, 0] < 0)).any()  # the pendulum slept and was woken at the next step
    assert (slept[:, 1] & (hist[1:, 1] < 0)).any()  # so did the slider
    assert (hist[60:100, 1] >= 0).all() and (hist[100:110, 1] < 0).all()  # then it stayed asleep until pushed


# activations: an arm allowed to sleep with a position servo with a filter, a filterexact actuator and a motor;
# it falls asleep while the filters still move (MuJoCo 4.0 freezes their act_dot and keeps integrating act with it,
# clears the sleeping actuators' forces and qfrc_actuator, and keeps the sensors' last values), a new control does
# not wake it
ACTIVATION = """
<mujoco>
  <option timestep="0.01" sleep_tolerance=".02" integrator="{integrator}"><flag sleep="enable"/></option>
  <worldbody>
    <body name="arm" pos="-1 0 .3" sleep="allowed"><joint name="h" axis="0 1 0" damping=".5"/>
      <geom type="capsule" fromto="0 0 0 0 0 -.2" size=".04"/></body>
  </worldbody>
  <actuator><position name="p" joint="h" kp="1" timeconst=".3"/>
    <general joint="h" dyntype="filterexact" dynprm=".2" gainprm=".1"/><motor joint="h" gear=".1"/></actuator>
  <sensor><actuatorfrc actuator="p"/><jointactuatorfrc joint="h"/></sensor>
</mujoco>"""


@pytest.mark.parametrize("integrator", ["Euler", "RK4", pytest.param("implicitfast", marks=pytest.mark.slow)])
def test_activation(stepper, integrator):
    """Actuators with activation on a sleeping tree: mj_sleep after the activations advanced (its recomputation sees
    the new act), act integrated with the frozen act_dot while asleep, forces cleared, sensors frozen."""

    def ctrl(v):
        def act(mjm, mjd, m, d):
            mjd.ctrl[:] = v
            return d.replace(ctrl=d.ctrl.at[:].set(v))

        return act

    hist = _run(ACTIVATION.format(integrator=integrator), 100, stepper, {0: ctrl(0.3), 60: ctrl(-0.2)})
    assert (hist >= 0).any()
    if integrator == "Euler":
        assert (hist[10:, 0] >= 0).all()  # asleep from step 9 on, the new control at 60 included
    if integrator == "RK4":  # asleep for single steps: woken by the last stage's poses (see test_rk4)
        assert ((hist[:-1, 0] >= 0) & (hist[1:, 0] < 0)).any()


# tendon equalities: MuJoCo 4.0 errs on an active one with the sleep flag (whatever the policies: refused at load);
# inactive ones (here two swinging pendulums that settle and sleep, each with a tendon) step as MuJoCo
TENDON_EQ = """
<mujoco>
  <option timestep="0.01"><flag sleep="enable"/></option>
  <worldbody>
    <body pos="0 0 1" {policy}><joint name="h1" axis="0 1 0" damping=".5"/>
      <geom type="capsule" fromto="0 0 0 .2 0 -.2" size=".03"/></body>
    <body pos="1 0 1" {policy}><joint name="h2" axis="0 1 0" damping=".3"/>
      <geom type="capsule" fromto="0 0 0 -.2 0 -.2" size=".03"/></body>
  </worldbody>
  <tendon><fixed name="t1"><joint joint="h1" coef="1"/></fixed><fixed name="t2"><joint joint="h2" coef="1"/></fixed>
  </tendon>
  <equality><tendon tendon1="t1" tendon2="t2" active="{active}"/></equality>
</mujoco>"""


# slow (CI time: a step compile of its own); trees settling and sleeping as MuJoCo's stay by default in
# test_settle_sleep_wake_by_contact[Euler] and test_activation, the refusal of an active tendon equality in
# test_refused_by_name
@pytest.mark.slow
def test_inactive_tendon_equality(stepper):
    """A tendon equality inactive at load: the pendulums settle and sleep as MuJoCo's."""
    hist = _run(TENDON_EQ.format(policy="", active="false"), 250, stepper)
    assert (hist[-1] >= 0).all()


REFUSED = {
    "active tendon equality": TENDON_EQ.format(policy="", active="true"),
    "active tendon equality, no tree may sleep": TENDON_EQ.format(policy='sleep="never"', active="true"),
    "flexes": """<mujoco><option><flag sleep="enable"/></option><worldbody><flexcomp type="grid" count="3 3 1"
      spacing=".1 .1 .1" dim="2" radius=".01" name="c"><edge equality="true"/></flexcomp></worldbody></mujoco>""",
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_by_name(case):
    """What the sleep stage does not implement (flexes), or MuJoCo 4.0 errs on at the first forward pass (active
    tendon equalities), is refused at load time naming the sleep flag (MuJoCo loads them)."""
    mjm = mujoco.MjModel.from_xml_string(REFUSED[case])
    if "tendon" in case:
        with pytest.raises(mujoco.FatalError, match="tendon equality does not yet support sleeping"):
            mujoco.mj_forward(mjm, mujoco.MjData(mjm))
    with pytest.raises(MJCFUnsupportedError, match="sleep") as err:
        mjl.load_mjcf_string(REFUSED[case])
    assert err.value.attribute == "sleep"


@pytest.mark.slow
def test_batched_equals_unbatched(stepper):
    """vmap over two environments (one perturbed so that it wakes at another step) equals stepping each alone."""
    m = mjl.load_mjcf_string(TWO.format(integrator="Euler"))
    d0 = mjl.make_data(m)
    d1 = d0.replace(qpos=d0.qpos.at[7].set(0.3))
    batch = jax.tree.map(lambda a, b: jp.stack([a, b]), d0, d1)
    vstep = jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))
    singles = [d0, d1]
    for _ in range(60):
        batch = vstep(m, batch)
        singles = [stepper(m, s) for s in singles]
    for i, s in enumerate(singles):
        for f in ("qpos", "qvel", "tree_asleep", "body_awake"):
            np.testing.assert_allclose(np.asarray(getattr(batch, f))[i], np.asarray(getattr(s, f)), rtol=0,
                                       atol=1e-12)  # fmt: skip
    assert (np.asarray(batch.tree_asleep) >= 0).any()


@pytest.mark.slow
def test_gradient_through_sleep():
    """d(box a's x after 40 steps)/d(its initial x velocity): a slides, stops and falls asleep at step ~22; the
    derivative flows through the awake steps and is zero through the frozen ones (its qpos no longer changes), and
    equals the central difference."""
    m = mjl.load_mjcf_string(TWO.format(integrator="Euler"))

    def final_x(v):
        d = mjl.make_data(m)
        d = d.replace(qvel=d.qvel.at[0].set(v))
        d, _ = jax.lax.scan(lambda x, _: (mjl.step(m, x), None), d, None, length=40)
        return d.qpos[0], d.tree_asleep

    (x, asleep), g = jax.jit(jax.value_and_grad(final_x, has_aux=True))(0.01)
    assert asleep[0] >= 0
    f = jax.jit(lambda v: final_x(v)[0])
    eps = 1e-5
    fd = (f(0.01 + eps) - f(0.01 - eps)) / (2 * eps)
    assert np.isfinite(g) and abs(float(g) - float(fd)) < 1e-6 * max(1.0, abs(float(fd)))


EXAMPLES = "/tmp/mjmodels/model/sleep"  # MuJoCo's example models (the test data)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["dominos", "humanoid", "100_humanoids"])
def test_example_models(name, stepper):
    """MuJoCo's sleep example models load with MuJoCo's policies; dominos (96 trees falling asleep, then woken one by
    one by the chain) and the humanoid (initialised asleep, woken by a push, falling) step with MuJoCo's sleep state,
    contacts and rows. (Measured: dominos 400 steps, qpos within 2.4e-15; humanoid 120 steps, 4.9e-15.)"""
    path = os.path.join(EXAMPLES, name + ".xml")
    if not os.path.exists(path):
        pytest.skip(f"{path}: MuJoCo's example models are not installed")
    m = mjl.load_mjcf(path)
    mjm = mujoco.MjModel.from_xml_path(path)
    np.testing.assert_array_equal(np.asarray(m.tree_sleep_policy), mjm.tree_sleep_policy)
    if name == "100_humanoids":  # (its step compiles for minutes: the load and policies only)
        return
    mjd, d = mujoco.MjData(mjm), mjl.make_data(m)
    np.testing.assert_array_equal(np.asarray(d.tree_asleep), mjd.tree_asleep)
    for k in range(200 if name == "dominos" else 60):
        if name == "humanoid" and k in (20, 21):  # a push on the torso for one step
            mjd.xfrc_applied[1, 0] = 5.0 * (k == 20)
            d = d.replace(xfrc_applied=d.xfrc_applied.at[1, 0].set(5.0 * (k == 20)))
        mujoco.mj_step(mjm, mjd)
        d = stepper(m, d)
        for f in ("tree_asleep", "ncon", "nefc"):
            np.testing.assert_array_equal(np.asarray(getattr(d, f)), getattr(mjd, f), err_msg=f"step {k}: {f}")
        np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, rtol=0, atol=STATE_ATOL, err_msg=f"step {k}")
