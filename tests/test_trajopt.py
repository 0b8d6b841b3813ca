"""trajopt: the planners decrease the cost on a small problem, compile once, vmap over start states, MPC; bad input
gives clear errors. Slow: cartpole swing-up (iLQR and shooting), the 2-link reacher, and the box push where the
exact gradient stalls and the contact-aware one does not."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import trajopt  # noqa: E402

# A pendulum hanging at angle 0 that should swing towards the upright (pi); Euler, no constraints: the smallest step.
PENDULUM = """
<mujoco>
  <option timestep="0.02" integrator="Euler"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" ctrlrange="-3 3" ctrllimited="true"/></actuator>
</mujoco>
"""
HORIZON = 30
TRACES = []  # one entry per trace of `cost` (a Python side effect runs only while tracing)


def cost(d, u, t):
    TRACES.append(1)
    return 1.0 - jp.cos(d.qpos[0] - jp.pi) + 0.01 * d.qvel[0] ** 2 + 0.01 * jp.sum(u**2)


def terminal(d):
    return 5.0 * (1.0 - jp.cos(d.qpos[0] - jp.pi)) + 0.1 * d.qvel[0] ** 2


@pytest.fixture(scope="module")
def pendulum():
    m = mjl.load_mjcf_string(PENDULUM)
    return m, mjl.make_data(m).replace(qpos=jp.asarray([0.3]))


PLANNERS = {
    "shooting": lambda m, d: trajopt.shooting(m, d, cost, HORIZON, optax.adam(0.3), iterations=30,
                                              terminal_cost=terminal),
    "ilqr": lambda m, d: trajopt.ilqr(m, d, cost, HORIZON, iterations=8, terminal_cost=terminal),
    "mppi": lambda m, d: trajopt.mppi(m, d, cost, HORIZON, samples=32, iterations=8, terminal_cost=terminal),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PLANNERS))
def test_planner_decreases_cost_and_compiles_once(pendulum, name):
    """Shapes and dtypes of the result, a cost curve that ends well below where it starts, the returned cost equal
    to a fresh rollout's, controls within ctrlrange; a second call from another start state (and, for shooting,
    with an equal optimizer created anew) reuses the compilation."""
    m, d = pendulum
    before = len(TRACES)
    res = PLANNERS[name](m, d)
    traced = len(TRACES)
    assert traced > before
    assert res.ctrl.shape == (HORIZON, 1) and res.ctrl.dtype == jp.float64
    assert res.states.qpos.shape == (HORIZON + 1, 1) and res.states.qvel.shape == (HORIZON + 1, 1)
    assert res.states.time.shape == (HORIZON + 1,)
    iters = {"shooting": 30, "ilqr": 8, "mppi": 8}[name]
    assert res.costs.shape == (iters + 1,)
    costs = np.asarray(res.costs)
    assert np.all(np.isfinite(costs))
    assert float(res.cost) < 0.8 * costs[0], costs
    assert float(res.cost) <= costs.min() + 1e-9
    np.testing.assert_allclose(float(res.states.qpos[0, 0]), 0.3)
    again = jax.jit(trajopt.evaluate, static_argnums=(3, 4))(m, d, res.ctrl, cost, terminal)
    np.testing.assert_allclose(float(again), float(res.cost), rtol=1e-10)
    assert np.all(np.abs(np.asarray(res.ctrl)) <= 3.0 + 1e-12)
    traced = len(TRACES)
    res2 = PLANNERS[name](m, d.replace(qpos=jp.asarray([-0.2])))
    assert len(TRACES) == traced, "a second call with another start state traced the cost again"
    assert float(res2.cost) < float(res2.costs[0])
    if name == "ilqr":
        assert res.gains.shape == (HORIZON, 1, 2)


def test_vmap_over_start_states_matches_single(pendulum):
    """MPPI vmapped over a batch of start states gives each state's own answer."""
    m, d = pendulum
    starts = jp.asarray([[0.3], [-0.2], [0.1]])
    batch = jax.vmap(lambda q: d.replace(qpos=q))(starts)
    plan = PLANNERS["mppi"]
    out = jax.vmap(lambda dd: plan(m, dd))(batch)
    assert out.ctrl.shape == (3, HORIZON, 1) and out.costs.shape == (3, 9)
    one = plan(m, d.replace(qpos=starts[1]))
    np.testing.assert_allclose(np.asarray(out.ctrl[1]), np.asarray(one.ctrl), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(float(out.cost[1]), float(one.cost), rtol=1e-9)


def test_mpc_replans_and_beats_doing_nothing(pendulum):
    """Receding-horizon MPPI (one short plan per step) from the hanging pendulum: the closed-loop cost is below the
    cost of zero controls over the same steps."""
    m, d = pendulum
    steps = 20

    def planner(m, dd, u):
        return trajopt.mppi(m, dd, cost, 10, samples=16, iterations=2, ctrl_init=u, terminal_cost=terminal)

    out = trajopt.mpc(m, d, planner, horizon=10, steps=steps)
    assert out.ctrl.shape == (steps, 1) and out.states.qpos.shape == (steps + 1, 1)
    assert out.planned_cost.shape == (steps,)
    closed = jax.jit(trajopt.evaluate, static_argnums=(3, 4))(m, d, out.ctrl, cost, terminal)
    idle = jax.jit(trajopt.evaluate, static_argnums=(3, 4))(m, d, jp.zeros((steps, 1)), cost, terminal)
    assert float(closed) < float(idle)


def test_bad_input_gives_clear_errors(pendulum):
    m, d = pendulum
    with pytest.raises(ValueError, match="cost must return a scalar"):
        trajopt.shooting(m, d, lambda d, u, t: d.qpos, 5, iterations=1)
    with pytest.raises(ValueError, match="terminal_cost must return a scalar"):
        trajopt.ilqr(m, d, cost, 5, iterations=1, terminal_cost=lambda d: d.qvel)
    with pytest.raises(ValueError, match="ctrl_init must have shape"):
        trajopt.mppi(m, d, cost, 5, ctrl_init=jp.zeros((4, 1)))
    with pytest.raises(ValueError, match="horizon must be a positive int"):
        trajopt.ilqr(m, d, cost, 0)
    with pytest.raises(ValueError, match="samples"):
        trajopt.mppi(m, d, cost, 5, samples=1)
    with pytest.raises(TypeError, match="optax"):
        trajopt.shooting(m, d, cost, 5, optimizer="adam")


# ---- slow: the bundled tasks ----------------------------------------------------------------------------------


ILQR_HORIZON = 300  # steps of 0.01 s for iLQR's swing-up (see its test)
CARTPOLE_HORIZON = 200  # 2 s


def cartpole_cost(d, u, t):
    up = 1.0 - jp.cos(d.qpos[1])  # the pole points up at hinge = 0
    return up + 0.5 * d.qpos[0] ** 2 + 0.01 * d.qvel[1] ** 2 + 0.01 * d.qvel[0] ** 2 + 0.01 * jp.sum(u**2)


def cartpole_terminal(d):
    return 100.0 * (1.0 - jp.cos(d.qpos[1])) + 10.0 * d.qvel[1] ** 2 + 10.0 * d.qvel[0] ** 2 + 10 * d.qpos[0] ** 2


def upright(qpos, qvel) -> bool:
    """|angle| < 0.1 rad (modulo 2 pi) and |angular velocity| < 0.5 rad/s."""
    angle = float(np.angle(np.exp(1j * float(qpos[1]))))
    return abs(angle) < 0.1 and abs(float(qvel[1])) < 0.5


def cartpole_start(horizon: int = CARTPOLE_HORIZON):
    """The bundled cartpole hanging at rest, and a small sinusoidal initial control (hanging at rest with zero
    controls is a stationary point of the cost: every gradient there is zero)."""
    m = mjl.load_mjcf("cartpole")
    d = mjl.make_data(m).replace(qpos=jp.asarray([0.0, jp.pi]))
    init = jp.asarray(0.2 * np.sin(np.arange(horizon) * 0.05)[:, None])
    return m, d, init


@pytest.mark.slow
def test_cartpole_swing_up_ilqr():
    """3 s (300 steps): upright and nearly at rest at the end (measured cost 950 -> 388 in 30 iterations). With 2 s
    (200 steps) iLQR stops in a local minimum 0.16 rad from upright and still turning (cost 604 -> 302)."""
    m, d, init = cartpole_start(ILQR_HORIZON)
    res = trajopt.ilqr(m, d, cartpole_cost, ILQR_HORIZON, iterations=30, terminal_cost=cartpole_terminal,
                       ctrl_init=init)  # fmt: skip
    assert upright(res.states.qpos[-1], res.states.qvel[-1]), (res.states.qpos[-1], res.costs)


@pytest.mark.slow
def test_cartpole_swing_up_shooting():
    """Measured: upright after 500 Adam steps (cost 604 -> 282)."""
    m, d, init = cartpole_start()
    res = trajopt.shooting(m, d, cartpole_cost, CARTPOLE_HORIZON, optax.adam(0.05), iterations=500,
                           terminal_cost=cartpole_terminal, ctrl_init=init)  # fmt: skip
    assert upright(res.states.qpos[-1], res.states.qvel[-1]), (res.states.qpos[-1], res.costs)


@pytest.mark.slow
def test_reacher_reaches_target():
    m = mjl.load_mjcf("reacher2")
    d = mjl.make_data(m)
    target = jp.asarray([0.12, 0.15])
    site = m.names["site"].index("fingertip")

    def reach(d, u, t):
        return jp.sum((d.site_xpos[site, :2] - target) ** 2) + 1e-4 * jp.sum(u**2)

    def final(d):
        return 100.0 * jp.sum((d.site_xpos[site, :2] - target) ** 2) + 0.01 * jp.sum(d.qvel**2)

    # 1.5 s: the tip ends 0.3 mm from the target (measured); with 1 s it ends 1.3 cm away, the motors saturated
    res = trajopt.ilqr(m, d, reach, 150, iterations=20, terminal_cost=final)
    tip = trajopt.rollout(m, d, res.ctrl).site_xpos[-1, site, :2]
    assert float(jp.linalg.norm(tip - target)) < 0.01


def box_cost(d, u, t):
    return jp.sum((d.qpos[2:4] - jp.asarray([0.25, 0.0])) ** 2) + 1e-3 * jp.sum(u**2)


def box_terminal(d):
    return 50.0 * jp.sum((d.qpos[2:4] - jp.asarray([0.25, 0.0])) ** 2)


@pytest.mark.slow
def test_box_push_needs_contact_aware_gradients():
    """The finger starts 4 cm from the box: with exact gradients shooting does not move (the gradient is zero), with
    the randomly smoothed step derivative it pushes the box to within 3 cm of the target."""
    m = mjl.load_mjcf("box_push")
    d = mjl.make_data(m)
    opt = optax.adam(0.05)
    exact = trajopt.shooting(m, d, box_cost, 80, opt, iterations=60, terminal_cost=box_terminal)
    assert float(exact.costs[-1]) == float(exact.costs[0])
    smooth = mjl.configure(m, contact_gradients="smooth", contact_smoothing_std=0.03, contact_smoothing_dofs=(0, 1),
                           contact_smoothing_samples=8)  # fmt: skip
    res = trajopt.shooting(smooth, d, box_cost, 80, opt, iterations=60, terminal_cost=box_terminal)
    assert float(res.cost) < 0.3 * float(res.costs[0])
    box = np.asarray(res.states.qpos[-1, 2:4])
    assert np.linalg.norm(box - [0.25, 0.0]) < 0.03, box
