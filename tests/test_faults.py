"""Run-time faults: wrong-shaped Data is an error naming the field; MuJoCo's warnings (BADCTRL, INERTIA) are
counted per environment with MuJoCo's semantics; `mjx_lite.warnings` names them."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.data import WARNING_TEXT

ARM = """
<mujoco><option timestep="0.01"/>
  <worldbody>
    <body><joint name="a" type="hinge" axis="0 1 0"/><geom size=".1" pos="0.2 0 0"/>
      <body pos="0.4 0 0"><joint name="b" type="hinge" axis="0 1 0"/><geom size=".1" pos="0.2 0 0"/></body>
    </body>
  </worldbody>
  <actuator><motor joint="a" ctrllimited="true" ctrlrange="-1 1"/><motor joint="b"/></actuator>
</mujoco>"""
W = mujoco.mjtWarning


@pytest.fixture(scope="module")
def arm():
    m = mjl.load_mjcf_string(ARM)
    mjm = mujoco.MjModel.from_xml_string(ARM)
    return m, mjm, jax.jit(mjl.step), jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))


def _mj_step(mjm, ctrl, steps=1):
    mjd = mujoco.MjData(mjm)
    mjd.ctrl[:] = ctrl
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    return mjd


@pytest.mark.parametrize(
    "field,value,expected",
    [("qpos", jp.zeros(1), r"qpos: got float \(1,\), expected float \(2,\)"),
     ("ctrl", jp.zeros(3), r"ctrl: got float \(3,\), expected float \(2,\)"),
     ("qvel", jp.zeros((2, 1)), r"qvel: got float \(2, 1\)"),
     ("warning_number", jp.zeros(7), r"warning_number: got float \(7,\), expected int \(7,\)")],
)  # fmt: skip
def test_wrong_shape_names_the_field(arm, field, value, expected):
    m, _, step, vstep = arm
    d = mjl.make_data(m).replace(**{field: value})
    for f in (mjl.step, step, mjl.forward, mjl.inverse, mjl.step1):
        with pytest.raises(ValueError, match=expected):
            f(m, d)
    batch = jax.tree.map(lambda x: jp.broadcast_to(x, (2,) + x.shape), d)
    with pytest.raises(ValueError, match=expected):  # under vmap: one environment's shapes
        vstep(m, batch)


def test_bad_ctrl_counted_and_zeroed_like_mujoco(arm):
    m, mjm, step, vstep = arm
    # 1e12 on the clamped actuator is clamped to 1 first (no warning, as MuJoCo); on the other one it is bad
    for ctrl, count in (([np.nan, 0.5], 1), ([0.3, np.inf], 1), ([1e12, 0.5], 0), ([0.5, 1e12], 1)):
        want = _mj_step(mjm, ctrl)
        got = step(m, mjl.make_data(m).replace(ctrl=jp.asarray(ctrl)))
        assert int(got.warning_number[mjl.Warning.BADCTRL]) == want.warning[W.mjWARN_BADCTRL].number == count
        np.testing.assert_allclose(np.asarray(got.qacc), want.qacc, rtol=1e-12, atol=1e-12)  # all taken as zero
        np.testing.assert_array_equal(np.asarray(got.ctrl), want.ctrl)  # d.ctrl is left as given
    # per environment: the bad one is counted, the good one untouched and equal to its own single step
    batch = jax.tree.map(lambda x: jp.stack([x, x]), mjl.make_data(m))
    batch = batch.replace(ctrl=jp.asarray([[np.nan, 0.5], [0.3, 0.5]]))
    out = vstep(m, batch)
    assert np.asarray(out.warning_number)[:, mjl.Warning.BADCTRL].tolist() == [1, 0]
    single = step(m, mjl.make_data(m).replace(ctrl=jp.asarray([0.3, 0.5])))
    np.testing.assert_array_equal(np.asarray(out.qpos[1]), np.asarray(single.qpos))
    named = mjl.warnings(out)
    assert list(named) == ["BADCTRL"] and named["BADCTRL"].tolist() == [1, 0]


@pytest.mark.parametrize("integrator,steps,expected",
                         [("Euler", 2, 3), pytest.param("RK4", 1, 5, marks=pytest.mark.slow)])  # fmt: skip
def test_singular_inertia_warns_like_mujoco(integrator, steps, expected):
    """Masses and inertias set to zero after loading (as a user's m.replace): the pivots are clamped to 1e-15 and
    INERTIA is counted once per factorisation (mj_forward: 1; then each mj_step's forward (+ RK4's 3 stages))."""
    xml = ARM.replace('timestep="0.01"', f'timestep="0.01" integrator="{integrator}"')
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.body_mass[:] = 0
    mjm.body_inertia[:] = 0
    m = m.replace(body_mass=jp.zeros_like(m.body_mass), body_inertia=jp.zeros_like(m.body_inertia))
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    d = jax.jit(mjl.forward)(m, mjl.make_data(m))
    assert int(d.warning_number[mjl.Warning.INERTIA]) == mjd.warning[W.mjWARN_INERTIA].number == 1
    step = jax.jit(mjl.step)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
        d = step(m, d)
    assert mjd.warning[W.mjWARN_INERTIA].number == expected
    assert int(d.warning_number[mjl.Warning.INERTIA]) == expected
    assert mjl.warnings(d)["INERTIA"] == expected


@pytest.mark.parametrize("linalg,expected", [("own", {"INERTIA": 1}), ("library", {"INERTIA": 1, "BADQACC": 1})])
def test_singular_inertia_dense_factorization_is_flagged(linalg, expected):
    """With Config(mass_factorization="dense") a singular mass matrix is counted (INERTIA). Our Cholesky
    (linalg "own", the CPU default) clamps the pivot and goes on, as the tree factorisation and MuJoCo; JAX's
    (linalg "library") has no factor: the NaN acceleration is caught (BADQACC) and the environment reset. Either
    way the state stays finite."""
    m = mjl.configure(mjl.load_mjcf_string(ARM), mass_factorization="dense", linalg=linalg)
    m = m.replace(body_mass=jp.zeros_like(m.body_mass), body_inertia=jp.zeros_like(m.body_inertia))
    d = jax.jit(mjl.step)(m, mjl.make_data(m))
    assert mjl.warnings(d) == expected
    assert np.all(np.isfinite(np.asarray(d.qpos))) and np.all(np.isfinite(np.asarray(d.qvel)))


def test_warnings_helper_names(arm):
    m, _, step, _ = arm
    d = step(m, mjl.make_data(m))
    assert mjl.warnings(d) == {}
    d = d.replace(warning_number=d.warning_number.at[mjl.Warning.BADQACC].set(2))
    assert mjl.warnings(d) == {"BADQACC": 2}
    assert set(WARNING_TEXT) == set(mjl.Warning)
