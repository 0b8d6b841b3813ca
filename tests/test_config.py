"""Configuration is a value of the Model (part of jit's cache key) and plans belong to the Model.

Each test here failed with the global switches and hand-keyed process caches that these replaced: a step jitted
under one mode kept it outside; a constraint plan keyed without the explicit pairs' geoms was reused for a model
whose slots have other condims; a height-field window depended on whether the table was first built under a trace.
"""

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import types
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint

PENDULUM = """
<mujoco><option timestep="0.01"/>
  <worldbody><body><joint name="j" type="hinge" axis="0 1 0" limited="true" range="-1 1"/>
    <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05"/></body></worldbody>
  <actuator><motor joint="j"/></actuator>
</mujoco>"""

# two mesh geoms of different condim on a plane; swapping which mesh each geom uses (geom_dataid) changes the static
# slot order (pairs are grouped by mesh size class, smaller first) but no count, type or condim array (the meshes
# do not collide with each other)
_ICO = np.array([[0, 1, 1.618], [0, -1, 1.618], [0, 1, -1.618], [0, -1, -1.618], [1, 1.618, 0], [-1, 1.618, 0],
                 [1, -1.618, 0], [-1, -1.618, 0], [1.618, 0, 1], [-1.618, 0, 1], [1.618, 0, -1], [-1.618, 0, -1]])
MESHES = """
<mujoco><asset>
  <mesh name="tet" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
  <mesh name="ico" vertex="{ico}"/>
</asset><worldbody>
  <geom type="plane" size="1 1 0.1" condim="1" contype="2" conaffinity="1"/>
  <body pos="0 0 0.5"><freejoint/><geom type="mesh" mesh="{first}" condim="1" conaffinity="2"/></body>
  <body pos="0.5 0 0.5"><freejoint/><geom type="mesh" mesh="{second}" condim="3" conaffinity="2"/></body>
</worldbody></mujoco>"""


def _meshes(first, second):
    return MESHES.format(ico=" ".join(f"{v:.4f}" for v in (0.05 * _ICO).ravel()), first=first, second=second)


def test_config_is_validated_and_hashable():
    c = mjl.Config()
    assert hash(c) == hash(mjl.Config()) and c == mjl.Config()
    assert c.replace(gradients="unrolled").gradients == "unrolled"
    with pytest.raises(ValueError, match="gradients"):
        mjl.Config(gradients="smooth-ish")
    with pytest.raises(ValueError, match="mesh_size_ratio"):
        mjl.Config(mesh_size_ratio=0.5)
    with pytest.raises(ValueError, match="broadphase_mesh_touch"):
        mjl.Config(broadphase_mesh_touch=0)
    with pytest.raises(ValueError, match="hfield_prisms"):
        mjl.Config(hfield_prisms=0)
    assert mjl.Config(hfield_prisms=8).hfield_prisms == 8 and c.hfield_prisms is None
    with pytest.raises(TypeError, match="no field"):
        c.replace(gradient="unrolled")


def test_one_jitted_step_follows_each_models_reset_mode():
    """The same jitted function, called with two configurations: each call gets its own (two traces)."""
    m = mjl.load_mjcf_string(PENDULUM)
    exact = mjl.configure(m, exact_reset=True)
    d = mjl.make_data(m).replace(qfrc_applied=jp.array([1e13]), time=jp.array(2.0))  # qacc diverges
    traces = []

    @jax.jit
    def step(m, d):
        traces.append(m.config)
        return mjl.step(m, d)

    fast = step(m, d)
    mj = step(exact, d)
    assert len(traces) == 2
    h = float(m.opt.timestep)
    assert float(fast.time) == 0.0  # the reset state, not stepped
    assert float(mj.time) == pytest.approx(h)  # MuJoCo: reset, forward, stepped once
    assert int(fast.warning_number[types.Warning.BADQACC]) == int(mj.warning_number[types.Warning.BADQACC]) == 1
    again = step(m, d)  # back to the first configuration: cached, and still its own behaviour
    assert len(traces) == 2 and float(again.time) == 0.0


def test_one_jitted_jvp_follows_each_models_gradient_mode():
    """Forward mode goes through the unrolled solver and not through the implicit one, in the same function."""
    m = mjl.load_mjcf_string(PENDULUM)
    d = mjl.make_data(m).replace(qpos=jp.array([0.999]), qvel=jp.array([2.0]))  # at the limit: solver active

    @jax.jit
    def tangent(m, q):
        return jax.jvp(lambda q: mjl.forward(m, d.replace(qpos=q)).qacc, (q,), (jp.ones_like(q),))[1]

    unrolled = tangent(mjl.configure(m, gradients="unrolled"), d.qpos)
    assert np.all(np.isfinite(np.asarray(unrolled)))
    with pytest.raises(TypeError, match="custom_vjp"):  # implicit: reverse mode only
        tangent(m, d.qpos)


def test_replace_config_refuses_layout_changes():
    m = mjl.load_mjcf_string(PENDULUM)
    assert m.replace(config=m.config.replace(gradients="unrolled")).config.gradients == "unrolled"
    with pytest.raises(ValueError, match="configure"):
        m.replace(config=m.config.replace(broadphase_min_pairs=1))
    m2 = mjl.configure(m, broadphase_min_pairs=1)
    assert m2.config.broadphase_min_pairs == 1


def test_constraint_plan_follows_geom_dataid():
    """The old plan key left out geom_dataid: the second model reused the first one's slot condims."""
    config = mjl.Config(mesh_size_ratio=4.0)  # the tetrahedron and the icosahedron in two size classes (groups)
    first = mjl.load_mjcf_string(_meshes("tet", "ico"), config=config)
    second = mjl.load_mjcf_string(_meshes("ico", "tet"), config=config)
    assert first.nconmax == second.nconmax and not np.array_equal(first.geom_dataid, second.geom_dataid)
    for f in ("geom_type", "geom_condim", "geom_priority", "pair_dim", "geom_contype", "body_weldid"):
        assert np.array_equal(getattr(first, f), getattr(second, f)), f
    k = first.nconmax // 2  # plane-mesh: the same number of contact slots per pair
    assert constraint.plan(first).con_dim.tolist() == [1] * k + [3] * k  # the tetrahedron (condim 1) first
    assert constraint.plan(second).con_dim.tolist() == [3] * k + [1] * k  # the tetrahedron is now the condim-3 geom
    for m in (first, second):  # the rows follow the pair table's groups
        dims = [int(max(m.geom_condim[g.geom1[0]], m.geom_condim[g.geom2[0]])) for g in driver.pair_table(m).groups]
        assert constraint.plan(m).con_dim.tolist() == [x for x in dims for _ in range(k)]


def test_plans_are_per_model_static_part():
    """A plan is built once per static part: kept across float changes and jit, rebuilt when a static field changes."""
    m = mjl.load_mjcf_string(_meshes("tet", "ico"))
    t = driver.pair_table(m)
    assert driver.pair_table(m.replace(geom_size=m.geom_size * 2)) is t
    seen = []
    jax.jit(lambda m: seen.append(driver.pair_table(m)) or m.geom_size.sum())(m)
    assert seen[0] is t
    m2 = m.replace(opt=m.opt.replace(disableflags=int(types.DisableBit.CONTACT)))
    assert driver.pair_table(m2) is not t and driver.pair_table(m2).groups == ()


def test_hfield_window_does_not_depend_on_call_history():
    """The window is sized from the model's static part: the same under a trace and outside, in either order."""
    xml = """<mujoco><asset><hfield name="h" nrow="9" ncol="9" size="1 1 0.1 0.1"/></asset><worldbody>
      <geom type="hfield" hfield="h"/>
      <body pos="0 0 0.3"><freejoint/><geom type="sphere" size="0.2"/></body></worldbody></mujoco>"""
    m = mjl.load_mjcf_string(xml)
    under_trace = []
    jax.jit(lambda m: under_trace.append(driver.pair_table(mjl.configure(m, sat_budget=1))) or m.geom_size.sum())(m)
    outside = driver.pair_table(mjl.configure(m, sat_budget=1))
    assert [g.nrows for g in under_trace[0].groups] == [g.nrows for g in outside.groups]
    grown = m.replace(geom_size=m.geom_size * 3)  # a float change keeps the static window (overflow is flagged)
    assert mjl.configure(grown, sat_budget=2).nconmax == m.nconmax


def test_frozen_messages_say_what_works():
    m = mjl.load_mjcf_string(PENDULUM)
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"m\.replace\(opt=m\.opt\.replace\(timestep="):
        m.opt.timestep = 0.1  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"d\.replace\(qpos="):
        mjl.make_data(m).qpos = jp.zeros(1)  # type: ignore[misc]
    fixed = m.replace(opt=m.opt.replace(timestep=jp.asarray(0.1)))  # what the message says works
    assert float(fixed.opt.timestep) == pytest.approx(0.1)


def _dot_precisions(jaxpr) -> set:
    """Precision parameters of every dot_general in a jaxpr, nested ones included."""
    out = set()
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            out.add(eqn.params["precision"])
        for v in eqn.params.values():
            for sub in v if isinstance(v, (tuple, list)) else (v,):
                inner = getattr(sub, "jaxpr", None)
                if inner is not None:
                    out |= _dot_precisions(getattr(inner, "jaxpr", inner))
    return out


def test_matmul_precision_reaches_every_product_of_step_and_its_gradient():
    """Config.matmul_precision: "highest" (default) on every product of step, also the implicit solver's backward
    pass (traced outside step's own context); "default" leaves JAX's setting to the products that do not pin their
    own (a few small tree products always ask for HIGHEST)."""
    with pytest.raises(ValueError, match="matmul_precision"):
        mjl.Config(matmul_precision="tf32")
    m = mjl.load_mjcf_string(PENDULUM)
    d = mjl.make_data(m).replace(qpos=jp.array([1.2]))  # past the limit: a constraint row, the solver runs
    hi = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)

    def loss(m, qvel):
        return mjl.step(m, d.replace(qvel=qvel)).qvel.sum()

    for config in (m.config, m.config.replace(matmul_precision="default")):
        mm = m.replace(config=config)
        fwd = _dot_precisions(jax.make_jaxpr(mjl.step)(mm, d).jaxpr)
        grad = _dot_precisions(jax.make_jaxpr(jax.grad(loss, argnums=1))(mm, d.qvel).jaxpr)
        if config.matmul_precision == "highest":
            assert fwd == {hi} and grad == {hi}, (fwd, grad)
        else:
            assert None in fwd and None in grad, (fwd, grad)


def test_quaternion_ops_auto_resolves_by_backend():
    """Config.quaternion_ops: "auto" is the constant-tensor form on the CPU and the elementwise form elsewhere;
    explicit choices are kept; anything else is refused. (Both forms match MuJoCo: test_forward.py.)"""
    from mjx_lite.config import quaternion_ops

    with pytest.raises(ValueError, match="quaternion_ops"):
        mjl.Config(quaternion_ops="fast")
    want = "einsum" if jax.default_backend() == "cpu" else "elementwise"
    assert quaternion_ops(mjl.Config()) == want
    for ops in ("einsum", "elementwise"):
        assert quaternion_ops(mjl.Config(quaternion_ops=ops)) == ops


def test_qacc_reset_auto_resolves_by_backend():
    """Config.qacc_reset: "auto" resets every field on the CPU and the state (keeping the position/velocity
    stages' fields) elsewhere; explicit values are kept; an unknown value is refused."""
    from mjx_lite.config import qacc_reset

    with pytest.raises(ValueError, match="qacc_reset"):
        mjl.Config(qacc_reset="some")
    assert qacc_reset(mjl.Config()) == ("all" if jax.default_backend() == "cpu" else "state")
    for mode in ("all", "state"):
        assert qacc_reset(mjl.Config(qacc_reset=mode)) == mode


@pytest.mark.parametrize("gradients", ["implicit", "unrolled"])
def test_qfrc_constraint_value_and_derivative_in_both_gradient_modes(gradients):
    """qfrc_constraint is the solver's own J' efc_force (its value) and carries the derivative of J' efc_force:
    reverse mode (implicit) or forward mode (unrolled) against central finite differences, the limit active."""
    m = mjl.configure(mjl.load_mjcf_string(PENDULUM.replace('<option timestep="0.01"/>',
                                                            '<option timestep="0.01" tolerance="1e-14"/>')),
                      gradients=gradients)  # fmt: skip
    d = mjl.make_data(m).replace(qpos=jp.array([1.02]), ctrl=jp.array([0.3]))
    fwd = jax.jit(mjl.forward)
    out = fwd(m, d)
    assert float(out.qfrc_constraint[0]) != 0.0
    np.testing.assert_allclose(out.qfrc_constraint, out.efc_J.T @ out.efc_force, rtol=1e-12, atol=1e-14)

    def qfrc(v):
        return fwd(m, d.replace(qvel=v)).qfrc_constraint[0]

    v, eps = jp.array([0.4]), 1e-6
    fd = (qfrc(v + eps) - qfrc(v - eps)) / (2 * eps)
    if gradients == "implicit":
        got = jax.grad(qfrc)(v)[0]
    else:
        got = jax.jvp(qfrc, (v,), (jp.ones_like(v),))[1]
    assert abs(float(fd)) > 1e-3  # the force does depend on qvel
    np.testing.assert_allclose(float(got), float(fd), rtol=1e-6)
