"""Oracle tests of the force stages: tendon, transmission, velocity extras, passive (incl. fluid), actuation.

Upstream Data fields (kinematics, com quantities, velocities) are copied from MuJoCo after mj_forward, so the
stages are tested in isolation; every output field is compared against MuJoCo 4.0 in float64.
"""

from __future__ import annotations

import functools
import re

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

from mjx_lite import io
from mjx_lite.pipeline import actuation, passive, tendon, transmission
from tests import oracle

ATOL = 1e-9  # float64 round-off (plus MuJoCo's own sqrt/acos conditioning)
RTOL = 1e-9
# MuJoCo 4.0 solves the "inside" side-site wrap (Newton on the tangent angle) slightly differently from the
# published algorithm we follow; the path length is stationary there, so lengths agree to round-off but the
# single wrap point (and the Jacobian through it) only to this level.
INSIDE_WRAP_ATOL = 1e-6
F32_ATOL = 2e-4  # float32 run vs float64 MuJoCo, O(1) magnitudes

UPSTREAM = (
    "qpos", "qvel", "ctrl", "act", "xpos", "xquat", "xmat", "xipos", "ximat", "xanchor", "xaxis", "geom_xpos",
    "geom_xmat", "site_xpos", "site_xmat", "subtree_com", "cdof", "cinert", "cvel", "cdof_dot",
)  # fmt: skip


def _stages(m, d):
    d = tendon.tendon(m, d)
    d = transmission.transmission(m, d)
    d = actuation.fwd_velocity_extras(m, d)
    d = passive.passive(m, d)
    return actuation.actuation(m, d)


STAGES = jax.jit(_stages)


def _dense(mjm, mjd, which):
    if which == "ten_J":
        out = np.zeros((mjm.ntendon, mjm.nv))
        if mjm.ntendon and mjm.nv:
            mujoco.mju_sparse2dense(out, mjd.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind)
    else:
        out = np.zeros((mjm.nout, mjm.nv))
        if mjm.nout and mjm.nv:
            mujoco.mju_sparse2dense(out, mjd.actuator_moment, mjd.moment_rownnz, mjd.moment_rowadr, mjd.moment_colind)
    return out


def _our_data(m, mjd):
    d = io.make_data(m)
    kw = {f: oracle.host_array(np.array(getattr(mjd, f)).reshape(getattr(d, f).shape)) for f in UPSTREAM}
    return d.replace(**kw)


def _random_state(mjm, mjd, rng):
    mjd.qpos[:] = mjm.qpos0 + rng.uniform(-0.5, 0.5, mjm.nq)
    for j in range(mjm.njnt):
        if mjm.jnt_type[j] in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            a = mjm.jnt_qposadr[j] + (3 if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE else 0)
            q = rng.normal(size=4)
            mjd.qpos[a : a + 4] = q / np.linalg.norm(q)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.ctrl[:] = rng.normal(size=mjm.nu) * 1.5
    mjd.act[:] = rng.uniform(-0.2, 1.2, mjm.na)
    mujoco.mj_forward(mjm, mjd)


def _compare(mjm, mjd, out, inside_wrap=False):
    """Compare every output field of the force stages with MuJoCo."""
    atol_wrap = INSIDE_WRAP_ATOL if inside_wrap else ATOL
    np.testing.assert_allclose(out.ten_length, mjd.ten_length, atol=ATOL, rtol=RTOL, err_msg="ten_length")
    np.testing.assert_allclose(out.ten_J, _dense(mjm, mjd, "ten_J"), atol=atol_wrap, rtol=RTOL, err_msg="ten_J")
    np.testing.assert_array_equal(out.ten_wrapadr, mjd.ten_wrapadr, err_msg="ten_wrapadr")
    np.testing.assert_array_equal(out.ten_wrapnum, mjd.ten_wrapnum, err_msg="ten_wrapnum")
    nw = int(mjd.ten_wrapnum.sum())
    np.testing.assert_array_equal(np.asarray(out.wrap_obj).ravel()[:nw], mjd.wrap_obj.ravel()[:nw], err_msg="wrap_obj")
    np.testing.assert_allclose(
        np.asarray(out.wrap_xpos).reshape(-1, 3)[:nw], mjd.wrap_xpos.reshape(-1, 3)[:nw], atol=atol_wrap,
        err_msg="wrap_xpos",
    )  # fmt: skip
    np.testing.assert_allclose(out.ten_velocity, mjd.ten_velocity, atol=atol_wrap, rtol=RTOL, err_msg="ten_velocity")
    np.testing.assert_allclose(out.actuator_length, mjd.actuator_length, atol=ATOL, rtol=RTOL, err_msg="act_length")
    moment = _dense(mjm, mjd, "moment")
    np.testing.assert_allclose(out.actuator_moment, moment, atol=atol_wrap, rtol=RTOL, err_msg="actuator_moment")
    np.testing.assert_allclose(out.actuator_velocity, mjd.actuator_velocity, atol=atol_wrap, err_msg="act_velocity")
    for f in ("qfrc_spring", "qfrc_damper", "qfrc_gravcomp", "qfrc_fluid", "qfrc_passive", "act_dot",
              "actuator_force", "qfrc_actuator"):  # fmt: skip
        np.testing.assert_allclose(getattr(out, f), getattr(mjd, f), atol=atol_wrap, rtol=RTOL, err_msg=f)


def _check_model(mjm, nstate=4, seed=0, inside_wrap=False):
    mjd = mujoco.MjData(mjm)
    m = oracle.model_from_mujoco(mjm)
    rng = np.random.default_rng(seed)
    for _ in range(nstate):
        _random_state(mjm, mjd, rng)
        out = STAGES(m, _our_data(m, mjd))
        _compare(mjm, mjd, out, inside_wrap=inside_wrap)


# ----------------------------------------------------------------------------------------------------------
# small models covering every feature

WRAP_XML = """
<mujoco>
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <site name="anchor" pos="0 0 0.5"/>
    <geom name="wsph" type="sphere" size="0.1" pos="0.3 0 0.3" contype="0" conaffinity="0"/>
    <site name="side0" pos="0.5 0 0.3"/>
    <body name="b1" pos="0 0 0">
      <joint name="j1" type="hinge" axis="0 1 0" stiffness="0.5 0.2 0.1" damping="0.3 0.1 0.05" springref="10"/>
      <geom type="capsule" size="0.04" fromto="0 0 0 0.6 0 0" mass="1"/>
      <site name="s1" pos="0.6 0 0.05"/>
      <geom name="wcyl" type="cylinder" size="0.07 0.05" pos="0.6 0 0" euler="90 0 0" contype="0" conaffinity="0"/>
      <site name="side1" pos="0.6 0 -0.2"/>
      <body name="b2" pos="0.6 0 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.2"/>
        <joint name="j3" type="slide" axis="1 0 0" stiffness="3 0 1" springref="0.05"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0.5 0 0" mass="0.5"/>
        <site name="s2" pos="0.5 0 0.05"/>
        <site name="s3" pos="0.3 0 -0.05"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <spatial name="t_sphere" stiffness="20 5 3" damping="0.5 0.2 0.1" springlength="0.6 0.9">
      <site site="anchor"/><geom geom="wsph" sidesite="side0"/><site site="s1"/>
      <geom geom="wcyl" sidesite="side1"/><site site="s2"/>
    </spatial>
    <spatial name="t_nosides" damping="0.3">
      <site site="anchor"/><geom geom="wsph"/><site site="s1"/><geom geom="wcyl"/><site site="s3"/>
    </spatial>
    <spatial name="t_pulley" stiffness="4">
      <site site="anchor"/><site site="s1"/>
      <pulley divisor="2"/><site site="s1"/><site site="s2"/>
      <pulley divisor="3"/><site site="s1"/><geom geom="wcyl"/><site site="s3"/>
    </spatial>
    <fixed name="t_fixed" stiffness="2 1" springlength="-0.1 0.2" damping="0.4 0 0.2" actuatorfrclimited="true"
           actuatorfrcrange="-0.5 0.7">
      <joint joint="j1" coef="1"/><joint joint="j2" coef="-0.5"/><joint joint="j3" coef="2"/>
    </fixed>
  </tendon>
  <actuator>
    <motor tendon="t_sphere" gear="2" damping="0.2 0.1"/>
    <motor tendon="t_fixed" gear="1.5"/>
    <motor tendon="t_fixed" gear="-1"/>
    <position tendon="t_pulley" kp="3"/>
  </actuator>
</mujoco>
"""

TRN_XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 1">
      <joint name="free" type="free"/>
      <geom type="box" size="0.1 0.2 0.05" mass="2"/>
      <site name="ref" pos="0.1 0 0" quat="0.9 0.1 0.3 0"/>
      <site name="slider" pos="0 0.2 0" zaxis="1 0 0"/>
      <body name="arm" pos="0.2 0 0">
        <joint name="ball" type="ball" damping="0.1 0.05"/>
        <geom type="capsule" size="0.03" fromto="0 0 0 0.3 0 0" mass="0.5"/>
        <site name="tip" pos="0.3 0.02 0" quat="0.7 0.7 0 0"/>
        <body name="fore" pos="0.3 0 0">
          <joint name="hinge" type="hinge" axis="0 0 1"/>
          <joint name="slide" type="slide" axis="1 0 0"/>
          <geom type="capsule" size="0.03" fromto="0 0 0 0.2 0 0" mass="0.3"/>
          <site name="crank" pos="0.2 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" gear="2"/>
    <motor joint="slide" gear="-1.5" damping="0.3"/>
    <motor joint="ball" gear="1 2 3"/>
    <general jointinparent="ball" gear="0.5 -1 2"/>
    <motor joint="free" gear="1 2 3 0.4 0.5 0.6"/>
    <general jointinparent="free" gear="1 2 3 0.4 0.5 0.6"/>
    <general cranksite="crank" slidersite="slider" cranklength="0.35" gear="1.3"/>
    <motor site="tip" gear="1 0.5 0.2 0.3 0.1 -0.4"/>
    <motor site="tip" refsite="ref" gear="1 0.5 0.2 0.3 0.1 -0.4"/>
    <adhesion body="fore" ctrlrange="0 1" gain="3"/>
  </actuator>
</mujoco>
"""

ACT_XML = """
<mujoco>
  <option timestep="0.01" gravity="0.3 -0.2 -9.81"/>
  <worldbody>
    <body name="b1" gravcomp="0.7">
      <joint name="j1" type="hinge" axis="0 1 0" actuatorfrclimited="true" actuatorfrcrange="-2 1.5"/>
      <geom type="capsule" size="0.04" fromto="0 0 0 0.5 0 0.1" mass="1"/>
      <body name="b2" pos="0.5 0 0.1" gravcomp="1">
        <joint name="j2" type="hinge" axis="0 1 0" actuatorgravcomp="true"/>
        <geom type="capsule" size="0.04" fromto="0 0 0 0.4 0 0" mass="0.7"/>
        <body name="b3" pos="0.4 0 0" gravcomp="0.3">
          <joint name="j3" type="slide" axis="1 0 1" actuatorgravcomp="true" actuatorfrclimited="true"
                 actuatorfrcrange="-0.3 0.2"/>
          <joint name="j4" type="ball"/>
          <geom type="sphere" size="0.05" mass="0.4"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon><fixed name="t"><joint joint="j1" coef="0.5"/><joint joint="j2" coef="1"/></fixed></tendon>
  <actuator>
    <general joint="j1" dyntype="integrator" gaintype="affine" gainprm="1 0.5 0.2" biastype="affine"
             biasprm="0.1 -2 -0.3" actlimited="true" actrange="-0.5 0.8"/>
    <general joint="j2" dyntype="filter" dynprm="0.05" ctrllimited="true" ctrlrange="-1 1" forcelimited="true"
             forcerange="-0.4 0.6"/>
    <general joint="j2" dyntype="filterexact" dynprm="0.2" actearly="true" actlimited="true" actrange="-1 0.3"/>
    <general joint="j1" dyntype="integrator" actearly="true" group="3"/>
    <muscle tendon="t" ctrllimited="true" ctrlrange="0 1" lengthrange="0.1 1.2"/>
    <muscle tendon="t" ctrllimited="true" ctrlrange="0 1" lengthrange="0.1 1.2" tausmooth="0.3" force="5"/>
    <general joint="j3" ctrllimited="true" ctrlrange="-0.5 0.5" gear="2"/>
    <intvelocity joint="j1" kp="3" actrange="-1 1"/>
    <velocity joint="j2" kv="0.7"/>
  </actuator>
</mujoco>
"""

FLUID_XML = """
<mujoco>
  <option density="1000" viscosity="0.05" wind="0.3 -0.2 0.1" gravity="0 0 0"/>
  <worldbody>
    <body name="box" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.02" mass="1"/>
      <body name="fin" pos="0.15 0 0">
        <joint name="h" type="hinge" axis="0 0 1" damping="0.1"/>
        <geom type="ellipsoid" size="0.05 0.02 0.01" fluidshape="ellipsoid" fluidcoef="0.5 0.25 1.5 1 1"/>
        <geom type="capsule" size="0.01 0.03" pos="0.05 0 0" fluidshape="ellipsoid"/>
        <geom type="cylinder" size="0.02 0.01" pos="0.08 0 0" mass="0.01"/>
      </body>
      <body name="ball" pos="-0.15 0 0">
        <joint type="ball"/>
        <geom type="sphere" size="0.03" fluidshape="ellipsoid" mass="0.2"/>
      </body>
      <body name="plain" pos="0 0.1 0">
        <joint type="slide" axis="0 1 0"/>
        <geom type="box" size="0.02 0.03 0.04" mass="0.3"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

SMALL_MODELS = {"wrap": WRAP_XML, "transmission": TRN_XML, "actuation": ACT_XML, "fluid": FLUID_XML}


@pytest.mark.parametrize("name", sorted(SMALL_MODELS))
def test_small_models(name):
    _check_model(mujoco.MjModel.from_xml_string(SMALL_MODELS[name]), nstate=5)


def test_medium_given_after_loading():
    """A model compiled without a medium traces no fluid forces (m.fluid_active False, documented); given one
    later together with fluid_active=True, its forces are MuJoCo's for the same medium."""
    xml = FLUID_XML.replace('density="1000" viscosity="0.05" ', "")
    mjm = mujoco.MjModel.from_xml_string(xml)
    m = oracle.model_from_mujoco(mjm)
    assert not m.fluid_active
    mjm.opt.density, mjm.opt.viscosity = 1000.0, 0.05
    m = m.replace(fluid_active=True, opt=m.opt.replace(density=jp.asarray(1000.0), viscosity=jp.asarray(0.05)))
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(2))
    out = STAGES(m, _our_data(m, mjd))
    _compare(mjm, mjd, out)
    assert np.abs(mjd.qfrc_fluid).max() > 1e-3  # the medium acts


_D = mujoco.mjtDisableBit


@pytest.mark.parametrize(
    "flags",
    [
        _D.mjDSBL_SPRING | _D.mjDSBL_DAMPER,
        _D.mjDSBL_GRAVITY | _D.mjDSBL_CLAMPCTRL,
        pytest.param(_D.mjDSBL_SPRING, marks=pytest.mark.slow),
        pytest.param(_D.mjDSBL_DAMPER, marks=pytest.mark.slow),
        pytest.param(_D.mjDSBL_ACTUATION, marks=pytest.mark.slow),
    ],
    ids=["passive", "gravity+clampctrl", "spring", "damper", "actuation"],
)
def test_disable_flags(flags):
    mjm = mujoco.MjModel.from_xml_string(ACT_XML.replace('gravity="0.3', 'density="3" gravity="0.3'))
    mjm.opt.disableflags = int(flags)
    _check_model(mjm, nstate=2, seed=3)


@pytest.mark.slow
def test_disableactuator_groups():
    mjm = mujoco.MjModel.from_xml_string(ACT_XML)
    mjm.opt.disableactuator = 1 << 3 | 1 << 0
    _check_model(mjm, nstate=2, seed=5)


REFERENCE = [
    pytest.param("tendon/pulley_site_wrap.xml", marks=pytest.mark.slow),
    "actuator/general_dyntype.xml",
    "actuator/tendon_force_clamp.xml",
]


@pytest.mark.parametrize("path", REFERENCE)
def test_mjx_reference_models(path):
    _check_model(mujoco.MjModel.from_xml_path(oracle.MJX_TEST_DATA + "/" + path), nstate=3)


def test_inside_sidesite_wrap():
    """Side sites inside the wrap geom (MuJoCo's inside wrap)."""
    path = oracle.MJX_TEST_DATA + "/tendon/wrap_sidesite.xml"
    _check_model(mujoco.MjModel.from_xml_path(path), nstate=4, inside_wrap=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cheetah", "walker", "finger", "manipulator", "swimmer", "fish"])
def test_dm_suite(name):
    _check_model(mujoco.MjModel.from_xml_path(f"{oracle.DM_SUITE}/{name}.xml"), nstate=2)


@pytest.mark.slow
@pytest.mark.parametrize(
    "path",
    [
        "tendon/fixed.xml",
        "tendon/site_wrap.xml",
        "tendon/fixed_site_wrap.xml",
        "tendon/pulley_fixed_site_wrap.xml",
        "tendon/pulley_wrap.xml",
        "actuator/arm21.xml",
        "sensor/model.xml",
    ],  # fmt: skip
)
def test_more_reference_models(path):
    _check_model(mujoco.MjModel.from_xml_path(oracle.MJX_TEST_DATA + "/" + path), nstate=2)


# ----------------------------------------------------------------------------------------------------------
# gradients, dtypes, retracing, errors


def _sphere_setup():
    xml = """
    <mujoco><worldbody>
      <site name="a" pos="-0.5 0 0.05"/>
      <geom name="g" type="sphere" size="0.1"/>
      <body><joint type="slide" axis="0 0 1"/><geom size="0.01"/><site name="b" pos="0.5 0 0.05"/></body>
    </worldbody>
    <tendon><spatial><site site="a"/><geom geom="g"/><site site="b"/></spatial></tendon></mujoco>
    """
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    m = oracle.model_from_mujoco(mjm)
    return mjm, mjd, m


def test_gradient_at_wrap_tangent():
    """d(length)/d(site height) is finite and matches finite differences where wrapping starts."""
    mjm, mjd, m = _sphere_setup()
    d0 = _our_data(m, mjd)

    def length_of(h, which):
        pos = d0.site_xpos.at[:, 2].set(jp.stack([h, h]) if which == "both" else d0.site_xpos[:, 2].at[1].set(h))
        return tendon.tendon(m, d0.replace(site_xpos=pos)).ten_length[0]

    # symmetric config: the segment touches the sphere exactly at h = radius (tangent)
    h_t = np.float64(0.1)
    for which in ("one",):  # one end moves: asymmetric path through the tangent configuration
        # the lengths and their derivative from one program (host floats in, no eager programs)
        vg = jax.jit(jax.value_and_grad(functools.partial(length_of, which=which)))

        def length(h, vg=vg):
            return float(vg(np.float64(h))[0])

        g = float(vg(h_t)[1])
        assert np.isfinite(g)
        eps = 1e-6
        fd = (length(h_t + eps) - length(h_t - eps)) / (2 * eps)
        np.testing.assert_allclose(g, fd, atol=1e-4)  # C1 at the tangent; FD truncation
        # away from the tangent (wrapped): exact derivative vs FD
        g2 = float(vg(np.float64(0.03))[1])
        fd2 = (length(0.03 + eps) - length(0.03 - eps)) / (2 * eps)
        np.testing.assert_allclose(g2, fd2, atol=1e-6)


def test_tendon_gradients_finite():
    """Gradients of wrapped tendon lengths w.r.t. all site positions are finite (side sites, pulleys)."""
    mjm = mujoco.MjModel.from_xml_string(WRAP_XML)
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(1))
    m = oracle.model_from_mujoco(mjm)
    d = _our_data(m, mjd)
    g = jax.jit(jax.grad(lambda x: jp.sum(tendon.tendon(m, d.replace(site_xpos=x)).ten_length)))(d.site_xpos)
    assert np.all(np.isfinite(g)) and np.any(g != 0)


@pytest.mark.slow
def test_gradients_finite_everywhere():
    """Gradients of all force outputs w.r.t. qvel/ctrl/site positions are finite on the wrap model."""
    mjm = mujoco.MjModel.from_xml_string(WRAP_XML)
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(1))
    m = oracle.model_from_mujoco(mjm)
    d = _our_data(m, mjd)

    def loss(site_xpos, qvel, ctrl):
        out = _stages(m, d.replace(site_xpos=site_xpos, qvel=qvel, ctrl=ctrl))
        return jp.sum(out.qfrc_passive**2) + jp.sum(out.qfrc_actuator**2) + jp.sum(out.ten_length)

    grads = jax.grad(loss, argnums=(0, 1, 2))(d.site_xpos, d.qvel, d.ctrl)
    for g in grads:
        assert np.all(np.isfinite(g))
        assert np.any(g != 0)


def test_float32():
    mjm = mujoco.MjModel.from_xml_string(WRAP_XML)
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(2))
    m = oracle.model_from_mujoco(mjm)
    d = _our_data(m, mjd)

    out = jax.jit(_stages)(oracle.cast_floats(m, jp.float32), oracle.cast_floats(d, jp.float32))
    assert out.ten_length.dtype == jp.float32 and out.qfrc_passive.dtype == jp.float32
    np.testing.assert_allclose(out.ten_length, mjd.ten_length, atol=F32_ATOL)
    np.testing.assert_allclose(out.qfrc_passive, mjd.qfrc_passive, atol=F32_ATOL * 10)
    np.testing.assert_allclose(out.qfrc_actuator, mjd.qfrc_actuator, atol=F32_ATOL * 10)


def test_no_retrace_on_float_change_and_vmap():
    mjm = mujoco.MjModel.from_xml_string(ACT_XML)
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(3))
    m = oracle.model_from_mujoco(mjm)
    d = _our_data(m, mjd)
    traces = []

    @jax.jit
    def f(m, d):
        traces.append(1)
        return _stages(m, d).qfrc_actuator

    a = f(m, d)
    b = f(m.replace(actuator_gainprm=m.actuator_gainprm * 2, body_gravcomp=m.body_gravcomp * 0.5), d)
    assert len(traces) == 1
    assert not np.allclose(a, b)
    batched = jax.jit(jax.vmap(lambda c: _stages(m, d.replace(ctrl=c)).qfrc_actuator))(jp.stack([d.ctrl, d.ctrl]))
    np.testing.assert_allclose(batched[0], a, atol=ATOL)
    np.testing.assert_allclose(batched[1], a, atol=ATOL)


def test_unsupported_features_raise():
    mjm = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint name="h"/><geom size="0.1"/></body></worldbody>'
        '<actuator><general joint="h" dyntype="user" gaintype="user"/></actuator></mujoco>'
    )
    m = oracle.model_from_mujoco(mjm)
    with pytest.raises(NotImplementedError, match="dyntype"):
        actuation.actuation(m, io.make_data(m))


def _repeated_tendons_model(n):
    """WRAP_XML with its tendon block (sphere/cylinder wraps with and without side sites, pulleys, a fixed
    tendon) repeated n times and no actuators."""
    start, end = WRAP_XML.index("<tendon>") + len("<tendon>"), WRAP_XML.index("</tendon>")
    block = re.sub(r' name="[^"]*"', "", WRAP_XML[start:end])
    xml = WRAP_XML[:start] + block * n + WRAP_XML[end:]
    xml = re.sub(r"<actuator>.*</actuator>", "", xml, flags=re.S)
    return mujoco.MjModel.from_xml_string(xml)


def test_tendon_graph_does_not_grow_with_tendon_count():
    """The traced graph of `tendon` depends on the wrap-element kinds present, not on how many tendons or wrap
    elements there are (compile-time scaling; nothing about time is asserted). The 8-copy model is also checked
    against MuJoCo, so the static grouping is exercised with many instances per kind."""
    sizes = {}
    for n in (2, 8):
        mjm = _repeated_tendons_model(n)
        m = oracle.model_from_mujoco(mjm)
        sizes[n] = len(jax.make_jaxpr(tendon.tendon)(m, io.make_data(m)).jaxpr.eqns)
    assert mjm.ntendon == 8 * 4
    assert sizes[2] == sizes[8], sizes
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(11))
    out = jax.jit(tendon.tendon)(m, _our_data(m, mjd))
    np.testing.assert_allclose(out.ten_length, mjd.ten_length, atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(out.ten_J, _dense(mjm, mjd, "ten_J"), atol=ATOL, rtol=RTOL)
    np.testing.assert_array_equal(out.ten_wrapadr, mjd.ten_wrapadr)
    np.testing.assert_array_equal(out.ten_wrapnum, mjd.ten_wrapnum)
    nw = int(mjd.ten_wrapnum.sum())
    np.testing.assert_array_equal(np.asarray(out.wrap_obj).ravel()[:nw], mjd.wrap_obj.ravel()[:nw])
    np.testing.assert_allclose(np.asarray(out.wrap_xpos).reshape(-1, 3)[:nw], mjd.wrap_xpos.reshape(-1, 3)[:nw],
                               atol=ATOL)  # fmt: skip


ADHESION_XML = """
<mujoco><option jacobian="dense" cone="{cone}"/>
 <worldbody>
  <geom name="floor" type="plane" size="5 5 0.1" margin="0.05" gap="0.03"/>
  <body name="box" pos="0 0 0.1"><freejoint/><geom type="box" size="0.2 0.1 0.1" condim="{condim}"/></body>
  <body name="ball" pos="1 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="1"/></body>
 </worldbody>
 <actuator><adhesion body="box" ctrlrange="0 1" gain="3"/><adhesion body="ball" ctrlrange="0 1" gain="2"/></actuator>
</mujoco>"""


@pytest.mark.parametrize(
    "cone,condim",
    [
        ("pyramidal", 4),
        pytest.param("elliptic", 3, marks=pytest.mark.slow),
        pytest.param("pyramidal", 1, marks=pytest.mark.slow),
    ],
)
def test_body_transmission_with_contacts(cone, condim):
    """Adhesion (body) transmission: contacts and efc_J copied from MuJoCo into our padded arrays."""
    mjm = mujoco.MjModel.from_xml_string(ADHESION_XML.format(cone=cone, condim=condim))
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:7] = [0, 0, 0.08, 0.99, 0.08, 0.05, 0]
    mjd.qpos[3:7] /= np.linalg.norm(mjd.qpos[3:7])
    mjd.qpos[9] = 0.13
    mujoco.mj_forward(mjm, mjd)
    n = mjd.ncon
    assert n > 0
    nc, nj = n + 2, mjd.nefc + 3  # padded capacities with inactive rows
    m = oracle.model_from_mujoco(mjm).replace(nconmax=nc, njmax=nj)
    d = _our_data(m, mjd)
    c = mjd.contact

    def pad(x, shape, dtype=np.float64):
        out = np.zeros(shape, dtype)
        out[:n] = x
        return jp.asarray(out)

    con = d.contact.replace(
        pos=pad(c.pos, (nc, 3)), frame=pad(c.frame.reshape(-1, 3, 3), (nc, 3, 3)), dist=pad(c.dist, (nc,)),
        dim=pad(c.dim, (nc,), np.int32), geom=pad(c.geom, (nc, 2), np.int32),
        efc_address=jp.asarray(np.r_[c.efc_address, -np.ones(nc - n)].astype(np.int32)),
        active=pad(np.ones(n, bool), (nc,), bool),
    )  # fmt: skip
    efc_j = np.zeros((nj, mjm.nv))
    efc_j[: mjd.nefc] = mjd.efc_J.reshape(mjd.nefc, mjm.nv)
    out = jax.jit(transmission.transmission)(m, d.replace(contact=con, efc_J=jp.asarray(efc_j)))
    np.testing.assert_allclose(out.actuator_moment, _dense(mjm, mjd, "moment"), atol=ATOL)
    np.testing.assert_allclose(out.actuator_length, mjd.actuator_length, atol=ATOL)


def test_body_transmission_end_to_end():
    """Adhesion through our own collision and constraint rows (contact.efc_address set by make_constraint)."""
    import mjx_lite as mjl  # noqa: PLC0415

    xml = ADHESION_XML.format(cone="pyramidal", condim=3)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:7] = [0, 0, 0.08, 0.99, 0.08, 0.05, 0]
    mjd.qpos[3:7] /= np.linalg.norm(mjd.qpos[3:7])
    mjd.qpos[9] = 0.13  # the ball hovers within the floor's margin
    mjd.ctrl[:] = [0.7, 0.4]
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 1 and np.all(mjd.contact.efc_address >= 0)
    m = mjl.load_mjcf_string(xml)
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), ctrl=jp.asarray(mjd.ctrl))
    out = jax.jit(mjl.forward)(m, d)
    assert int(np.sum(np.asarray(out.contact.efc_address) >= 0)) == int(np.sum(mjd.contact.efc_address >= 0))
    np.testing.assert_allclose(out.actuator_moment, _dense(mjm, mjd, "moment"), atol=ATOL)
    np.testing.assert_allclose(out.qfrc_actuator, mjd.qfrc_actuator, atol=ATOL)


def test_with_our_kinematics():
    """The force stages on top of our own kinematics / com / velocity stages (no MuJoCo upstream fields)."""
    from mjx_lite.pipeline import kinematics, velocity

    mjm = mujoco.MjModel.from_xml_string(WRAP_XML)
    mjd = mujoco.MjData(mjm)
    _random_state(mjm, mjd, np.random.default_rng(7))
    m = oracle.model_from_mujoco(mjm)
    d = io.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel), ctrl=jp.asarray(mjd.ctrl))

    @jax.jit
    def run(m, d):
        d = kinematics.com_pos(m, kinematics.kinematics(m, d))
        return _stages(m, velocity.com_vel(m, d))

    _compare(mjm, mjd, run(m, d))
