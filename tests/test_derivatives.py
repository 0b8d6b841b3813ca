"""derivatives: transition Jacobians against MuJoCo's mjd_transitionFD, differentiate_pos against
mj_differentiatePos, NaN-free gradients at contact onset, zero velocity and joint limits (float32 and float64), and
the contact-aware (randomly smoothed) step derivative."""

import sys

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import derivatives  # noqa: E402
from mjx_lite.pipeline import constraint  # noqa: E402
from mjx_lite.pipeline import forward as fwd  # noqa: E402
from tests import oracle  # noqa: E402

# Centred finite differences of MuJoCo with eps = 1e-6 carry round-off ~1e-16/eps = 1e-10 relative to the entries
# and a truncation error eps^2 |f'''| ~ 1e-12 x (a few hundred on stiff rows): the exact Jacobians agree with them to
# ~2e-10 (normwise, max |J - J_fd| / max |J_fd|); 1e-8 leaves a margin of 50 for other states while staying far
# below the 1e-6.
FD_EPS = 1e-6
TRANSITION_RTOL = 1e-8
# With contacts, MuJoCo's solver is run to tolerance 1e-13 (100 iterations) so that its finite differences resolve
# the piecewise-smooth map between its kinks; the remaining gap is the finite difference's own error where the
# constraint force law bends (measured 3e-9 on the sliding box below).
CONTACT_RTOL = 1e-7

ZOO = """
<mujoco>
  <option timestep="0.005" integrator="{integrator}"/>
  <worldbody>
    <body name="free" pos="0 0 1">
      <freejoint/>
      <geom type="box" size=".1 .15 .05" mass="1" contype="0" conaffinity="0"/>
      <site name="imu" pos=".02 .01 0"/>
    </body>
    <body name="arm" pos="1 0 1">
      <joint name="ball" type="ball" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .2 0 -.4" size=".03" contype="0" conaffinity="0"/>
      <body pos=".2 0 -.4">
        <joint name="hinge" type="hinge" axis="0 1 0" damping=".05" stiffness=".5"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" contype="0" conaffinity="0"/>
        <body pos=".3 0 0">
          <joint name="slide" type="slide" axis="1 0 0" damping=".2"/>
          <geom type="sphere" size=".05" contype="0" conaffinity="0"/>
          <site name="tip"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" gear="2"/>
    <position name="servo" joint="slide" kp="10" kv="1"/>
    <general joint="hinge" dyntype="filter" dynprm=".05" gainprm="1.5"/>
    <general joint="slide" dyntype="integrator" gainprm="3" biastype="affine" biasprm="0 -2 -.5"/>
    <motor joint="ball" gear="0 0 1"/>
  </actuator>
  <sensor>
    <jointpos joint="hinge"/><jointvel joint="slide"/><ballquat joint="ball"/>
    <framequat objtype="body" objname="free"/><gyro site="imu"/><accelerometer site="imu"/>
    <velocimeter site="tip"/><actuatorfrc actuator="servo"/><framepos objtype="site" objname="tip"/>
  </sensor>
</mujoco>
"""

# Euler in the fast suite; the other integrators compile a larger step (slow)
INTEGRATORS = ["Euler"] + [pytest.param(i, marks=pytest.mark.slow) for i in ("implicitfast", "implicit", "RK4")]


def _random_state(mjm, seed):
    rng = np.random.default_rng(seed)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_integratePos(mjm, mjd.qpos, rng.normal(size=mjm.nv) * 0.5, 1.0)
    mjd.qvel[:] = rng.normal(size=mjm.nv)
    mjd.act[:] = rng.normal(size=mjm.na) * 0.3
    mjd.ctrl[:] = rng.normal(size=mjm.nu) * 0.5
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _data(m, mjd):
    h = oracle.host_array
    return mjl.make_data(m).replace(qpos=h(mjd.qpos), qvel=h(mjd.qvel), act=h(mjd.act), ctrl=h(mjd.ctrl),
                                    qacc_warmstart=h(mjd.qacc_warmstart), time=h(mjd.time))  # fmt: skip


def mujoco_transition(mjm, mjd):
    """(A, B, C, D) by MuJoCo's mjd_transitionFD (centred)."""
    nx = 2 * mjm.nv + mjm.na
    A, B = np.zeros((nx, nx)), np.zeros((nx, mjm.nu))
    C, D = np.zeros((mjm.nsensordata, nx)), np.zeros((mjm.nsensordata, mjm.nu))
    mujoco.mjd_transitionFD(mjm, mjd, FD_EPS, True, A, B, C, D)
    return A, B, C, D


def step_transition(mjm, mjd):
    """(A, B, C, D) by centred differences of mj_step in mjd_transitionFD's tangent-space convention (for RK4,
    which mjd_transitionFD refuses): positions perturbed by mj_integratePos, outputs differenced by
    mj_differentiatePos; warm start, time and controls restored for every evaluation."""
    nv, na, nu = mjm.nv, mjm.na, mjm.nu
    nx = 2 * nv + na

    def run(dx, du):
        d = mujoco.MjData(mjm)
        d.qpos[:] = mjd.qpos
        mujoco.mj_integratePos(mjm, d.qpos, dx[:nv], 1.0)
        d.qvel[:] = mjd.qvel + dx[nv : 2 * nv]
        d.act[:] = mjd.act + dx[2 * nv :]
        d.ctrl[:] = mjd.ctrl + du
        d.qacc_warmstart[:] = mjd.qacc_warmstart
        d.time = mjd.time
        mujoco.mj_step(mjm, d)
        return d.qpos.copy(), np.concatenate([d.qvel, d.act]), d.sensordata.copy()

    def column(dx, du):
        qp, rp, sp = run(dx, du)
        qm, rm, sm = run(-dx, -du)
        dq = np.zeros(nv)
        mujoco.mj_differentiatePos(mjm, dq, 2 * FD_EPS, qm, qp)
        return np.concatenate([dq, (rp - rm) / (2 * FD_EPS)]), (sp - sm) / (2 * FD_EPS)

    A, C = np.zeros((nx, nx)), np.zeros((mjm.nsensordata, nx))
    B, D = np.zeros((nx, nu)), np.zeros((mjm.nsensordata, nu))
    for i in range(nx):
        A[:, i], C[:, i] = column(FD_EPS * np.eye(nx)[i], np.zeros(nu))
    for i in range(nu):
        B[:, i], D[:, i] = column(np.zeros(nx), FD_EPS * np.eye(nu)[i])
    return A, B, C, D


def _normwise(got, want):
    return float(np.abs(np.asarray(got) - want).max() / max(np.abs(want).max(), 1e-300))


@pytest.fixture(scope="module")
def batched_transition():
    return jax.jit(jax.vmap(derivatives.transition, in_axes=(None, 0)))


@pytest.mark.parametrize("integrator", INTEGRATORS)
def test_transition_matches_mjd_transition_fd(integrator, batched_transition):
    """Free, ball, hinge and slide joints, filter/integrator activations, position/velocity/acceleration sensors:
    every block of (A, B, C, D) for a batch of states (vmap) against MuJoCo's finite differences."""
    mjm = mujoco.MjModel.from_xml_string(ZOO.format(integrator=integrator))
    m = oracle.model_from_mujoco(mjm)
    states = [_random_state(mjm, seed) for seed in range(2)]
    batch = jax.tree.map(lambda *xs: np.stack(xs), *[_data(m, s) for s in states])  # on the host: no eager programs
    got = [np.asarray(g) for g in batched_transition(m, batch)]
    nx = 2 * mjm.nv + mjm.na
    shapes = [(nx, nx), (nx, mjm.nu), (mjm.nsensordata, nx), (mjm.nsensordata, mjm.nu)]
    assert [tuple(g.shape[1:]) for g in got] == shapes
    assert all(g.dtype == jp.float64 for g in got)
    for i, mjd in enumerate(states):
        want = step_transition(mjm, mjd) if integrator == "RK4" else mujoco_transition(mjm, mjd)
        for name, g, w in zip("ABCD", got, want):
            err = _normwise(g[i], w)
            assert err < TRANSITION_RTOL, f"{integrator} state {i}: {name} differs from FD by {err:.2e} (normwise)"


def test_step_fd_helper_matches_mjd_transition_fd():
    """The mj_step finite differences used for RK4 are MuJoCo's own convention (checked where both exist)."""
    mjm = mujoco.MjModel.from_xml_string(ZOO.format(integrator="Euler"))
    mjd = _random_state(mjm, 3)
    for name, a, b in zip("ABCD", step_transition(mjm, mjd), mujoco_transition(mjm, mjd)):
        assert _normwise(a, b) < 1e-9, name


# a damped cart-pole with a motor: the eager entry point's test needs no more (ZOO's transition took 4x longer to
# compile)
CARTPOLE = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body><joint type="slide" axis="1 0 0" damping=".1"/>
      <geom type="box" size=".2 .1 .1" mass="1" contype="0" conaffinity="0"/>
      <body><joint name="hinge" type="hinge" axis="0 1 0" damping=".05"/>
        <geom type="capsule" fromto="0 0 0 0 0 .6" size=".03" mass=".2" contype="0" conaffinity="0"/></body>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="2"/></actuator>
</mujoco>
"""


def test_eager_transition_runs_jitted_once_per_model():
    """Called on concrete arrays (a notebook's first call), transition runs its jitted form: MuJoCo's Jacobians, and
    a second state reuses the compilation (eagerly, op by op, every call took 3.7 s on the cartpole)."""
    mjm = mujoco.MjModel.from_xml_string(CARTPOLE)
    m = oracle.model_from_mujoco(mjm)
    size = derivatives.transition.jitted._cache_size()
    for seed in (0, 1):
        got = derivatives.transition(m, _data(m, _random_state(mjm, seed)), False)
        assert got[2] is None and got[3] is None
        want = mujoco_transition(mjm, _random_state(mjm, seed))
        assert _normwise(got[0], want[0]) < TRANSITION_RTOL and _normwise(got[1], want[1]) < TRANSITION_RTOL
        assert derivatives.transition.jitted._cache_size() == size + 1


@pytest.mark.slow
def test_transition_without_sensors_and_float32():
    """sensors=False returns (A, B, None, None); float32 states give float32 Jacobians close to float64's."""
    mjm = mujoco.MjModel.from_xml_string(ZOO.format(integrator="Euler"))
    m = oracle.model_from_mujoco(mjm)
    d = _data(m, _random_state(mjm, 0))
    fn = jax.jit(derivatives.transition, static_argnames="sensors")
    A, B, C, D = fn(m, d, sensors=False)
    assert C is None and D is None
    want = mujoco_transition(mjm, _random_state(mjm, 0))
    assert _normwise(A, want[0]) < TRANSITION_RTOL and _normwise(B, want[1]) < TRANSITION_RTOL
    m32, d32 = oracle.cast_floats(m, jp.float32), oracle.cast_floats(d, jp.float32)
    A32, B32, _, _ = fn(m32, d32, sensors=False)
    assert A32.dtype == jp.float32 and B32.dtype == jp.float32
    assert np.all(np.isfinite(A32)) and np.all(np.isfinite(B32))
    # float32 round-off (~1e-7) amplified by the model's conditioning
    assert _normwise(A32, want[0]) < 1e-4 and _normwise(B32, want[1]) < 1e-4


# A slide cart with a ball-jointed pole, a filter activation and position, velocity and actuator-force sensors: the
# structured derivative's every ingredient (a quaternion's tangent rows, act, C and D rows) at a fraction of ZOO's
# compile (CI time: ZOO's reverse and step transitions took 21 s)
SMALL_ZOO = """
<mujoco>
  <option timestep="0.01" integrator="{integrator}"/>
  <worldbody>
    <body><joint name="cart" type="slide" axis="1 0 0" damping=".1"/>
      <geom type="box" size=".2 .1 .1" mass="1" contype="0" conaffinity="0"/>
      <body><joint name="pole" type="ball" damping=".05"/>
        <geom type="capsule" fromto="0 0 0 .1 0 .6" size=".03" mass=".2" contype="0" conaffinity="0"/></body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="cart" gear="2"/>
    <general name="filter" joint="cart" dyntype="filter" dynprm=".05" gainprm="1.5"/>
  </actuator>
  <sensor><jointpos joint="cart"/><ballquat joint="pole"/><jointvel joint="cart"/><actuatorfrc actuator="filter"/>
  </sensor>
</mujoco>
"""

# Euler's reverse mode on SMALL_ZOO in the fast suite; on ZOO (free, ball, hinge and slide joints, two activations,
# nine sensors) slow: test_structured_transition_equals_autodiff_through_step[Euler-reverse-small] keeps the
# structured reverse mode against autodiff through the step by default, and ZOO's structured Jacobian (forward mode,
# the mode "auto" takes on ZOO with sensors) is checked against MuJoCo by test_transition_matches_mjd_transition_fd[
# Euler]; the other integrators are slow too: one compiled transition each
_MODES = ("forward", "reverse")
_SLOW_STRUCTURED = [("Euler", x, "zoo") for x in _MODES] + [
    (i, x, "zoo") for i in ("implicitfast", "implicit") for x in _MODES]  # fmt: skip
STRUCTURED = [("Euler", "reverse", "small")] + [pytest.param(*c, marks=pytest.mark.slow) for c in _SLOW_STRUCTURED]


@pytest.fixture(scope="module")
def transition_fn():
    return jax.jit(derivatives.transition, static_argnames=("sensors", "mode", "ncon"))


@pytest.mark.parametrize("integrator,mode,model", STRUCTURED)
def test_structured_transition_equals_autodiff_through_step(integrator, mode, model, transition_fn):
    """The structured Jacobian (velocity rows through the dynamics, position rows from the position update; forward
    mode split into position and velocity/control tangents, or reverse mode over the velocity rows) equals plain
    autodiff through `step` (mode "step") to round-off in every block, with ball and slide joints (ZOO: free, ball,
    hinge and slide), activations and sensors."""
    mjm = mujoco.MjModel.from_xml_string((ZOO if model == "zoo" else SMALL_ZOO).format(integrator=integrator))
    m = oracle.model_from_mujoco(mjm)
    d = _data(m, _random_state(mjm, 3))
    want = transition_fn(m, d, mode="step")
    for name, g, w in zip("ABCD", transition_fn(m, d, mode=mode), want):
        assert _normwise(g, w) < 1e-10, f"{integrator} {mode}: {name} differs by {_normwise(g, w):.2e}"


# ---- positions in the tangent space ---------------------------------------------------------------------------


def test_differentiate_pos_matches_mujoco_and_is_smooth_at_zero():
    mjm = mujoco.MjModel.from_xml_string(ZOO.format(integrator="Euler"))
    m = oracle.model_from_mujoco(mjm)
    rng = np.random.default_rng(0)
    q1, q2 = np.array(mjm.qpos0), np.array(mjm.qpos0)
    mujoco.mj_integratePos(mjm, q1, rng.normal(size=mjm.nv), 1.0)
    q2[:] = q1
    mujoco.mj_integratePos(mjm, q2, rng.normal(size=mjm.nv) * 2.0, 1.0)  # rotations beyond pi/2 included
    want = np.zeros(mjm.nv)
    mujoco.mj_differentiatePos(mjm, want, 0.3, q1, q2)
    got = jax.jit(derivatives.differentiate_pos)(m, jp.asarray(q1), jp.asarray(q2), 0.3)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12)

    # at q2 == q1 the derivative in q2 along integrate_pos is the identity (no 0/0 in the quaternion logarithm)
    @jax.jit
    def jac(q):
        return jax.jacfwd(lambda v: derivatives.differentiate_pos(m, q, derivatives.integrate_pos(m, q, v, 1.0)))(
            jp.zeros(mjm.nv, q.dtype))

    np.testing.assert_allclose(np.asarray(jac(jp.asarray(q1))), np.eye(mjm.nv), atol=1e-12)


# ---- contacts -------------------------------------------------------------------------------------------------

SLIDING_BOX = """
<mujoco>
  <option timestep="0.01" tolerance="1e-13" iterations="100" ls_iterations="50"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" friction=".5"/>
    <body name="box" pos="0 0 .0499">
      <freejoint/>
      <geom type="box" size=".1 .07 .05" mass="1" friction=".5"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow
def test_transition_on_persistent_contacts():
    """A box sliding on the floor (4 corner contacts, pyramidal friction at the sliding limit): the implicit-gradient
    Jacobian against MuJoCo's finite differences with the solver converged to 1e-13."""
    mjm = mujoco.MjModel.from_xml_string(SLIDING_BOX)
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    for _ in range(300):  # settle at rest on the floor (MuJoCo's equilibrium penetration)
        mujoco.mj_step(mjm, mjd)
    mjd.qvel[:] = [0.4, 0.1, 0.0, 0.0, 0.0, 0.3]  # then slide (the next step's friction impulse lifts the box off)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 4
    A, B, _, _ = jax.jit(derivatives.transition)(m, _data(m, mjd))
    want = mujoco_transition(mjm, mjd)
    err = _normwise(A, want[0])
    assert np.all(np.isfinite(A)) and err < CONTACT_RTOL, f"A differs from FD by {err:.2e} on contacts"


def _sliding_box_and_ball():
    """(mjm, m, mjd): the sliding box after 300 MuJoCo steps, given a sliding and spinning velocity, beside a sphere
    falling far above it (its contact slots make a small capacity a real cap)."""
    ball = '<body pos="1 0 50"><freejoint/><geom type="sphere" size=".05" mass=".2"/></body></worldbody>'
    mjm = mujoco.MjModel.from_xml_string(SLIDING_BOX.replace("</worldbody>", ball))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    for _ in range(300):
        mujoco.mj_step(mjm, mjd)
    mjd.qvel[:6] = [0.4, 0.1, 0.0, 0.0, 0.0, 0.3]
    return mjm, m, mjd


@pytest.mark.slow
def test_transition_modes_and_contact_capacity_on_contacts():
    """The sliding box in contact (4 contacts): the linearised step in forward and reverse mode, autodiff through
    the step itself (mode "step") and the linearised step with a contact capacity of 4 (ncon=4) give the same
    Jacobians as MuJoCo's finite differences; a capacity of 3 leaves a contact out and gives NaN. (A sphere falls
    far above the box: its slots make the capacity of 4 a real cap.)"""
    mjm, m, mjd = _sliding_box_and_ball()
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 4 and m.nconmax > 4
    want = mujoco_transition(mjm, mjd)
    d = _data(m, mjd)
    fn = jax.jit(derivatives.transition, static_argnames=("sensors", "mode", "ncon"))
    ref = None
    for mode, ncon in (("forward", None), ("reverse", None), ("step", None), ("auto", 4)):
        A, B, _, _ = fn(m, d, sensors=False, mode=mode, ncon=ncon)
        err = _normwise(A, want[0])
        assert np.all(np.isfinite(A)) and err < CONTACT_RTOL, f"{mode}, ncon {ncon}: A differs from FD by {err:.2e}"
        ref = np.asarray(A) if ref is None else ref
        assert _normwise(A, ref) < 1e-10, (mode, ncon)  # the same exact derivative by other routes: round-off apart
    A, _, _, _ = fn(m, d, sensors=False, ncon=3)
    assert np.all(np.isnan(A))


HELD_CONTACTS = """
<mujoco>
  <option timestep="0.01" cone="{cone}" tolerance="1e-13" iterations="100" ls_iterations="50"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1" friction=".6 .01 .002"/>
    <body name="box" pos="0 0 .0499">
      <freejoint/>
      <geom type="box" size=".1 .07 .05" mass="1" friction=".5 .01 .002" condim="{condim}"/>
    </body>
    <body name="arm" pos=".6 0 .3">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping=".1"/>
      <geom type="capsule" fromto="0 0 0 .2 0 -.1" size=".03" mass=".3" condim="{condim}"/>
      <body pos=".2 0 -.1">
        <joint type="hinge" axis="0 1 0" damping=".1"/>
        <geom type="capsule" fromto="0 0 0 .1 0 -.17" size=".03" mass=".2" condim="1"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder" gear="1"/></actuator>
</mujoco>
"""

# The contact products agree with efc_J's to round-off of the (rows, nv) products they replace.
PRODUCT_RTOL = 1e-12


def _held_contacts_scene(cone: str, condim: int):
    """(mjm, m, mjd): a box (condim `condim`) on the floor and a two-hinge arm whose tip touches it (condim 3), after
    100 MuJoCo steps, with velocities set."""
    mjm = mujoco.MjModel.from_xml_string(HELD_CONTACTS.format(cone=cone, condim=condim))
    mjd = mujoco.MjData(mjm)
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    mjd.qvel[:] = np.random.default_rng(3).normal(size=mjm.nv) * 0.2
    mjd.ctrl[:] = 0.1
    mujoco.mj_forward(mjm, mjd)
    return mjm, oracle.model_from_mujoco(mjm), mjd


@pytest.mark.parametrize("cone,condim", [("pyramidal", 3), ("elliptic", 6)])
def test_contact_products_equal_efc_j_products(cone, condim):
    """`constraint.contact_products` at a state with contacts of two condims: jx(x) is efc_J x on the contact rows
    (0 on the others) and jtf(f) efc_J' f over the contact rows, in value and in derivative along a position
    tangent (the products replace the (rows, nv) derivative of efc_J in `transition`'s derivative pass)."""
    mjm, m, mjd = _held_contacts_scene(cone, condim)
    assert constraint.held_contacts_supported(m)
    d0 = _data(m, mjd)
    p = constraint.plan(m)
    pre = p.adr["contact"]
    rng = np.random.default_rng(0)
    x, f = jp.asarray(rng.normal(size=m.nv)), jp.asarray(rng.normal(size=m.njmax))
    rows = jp.arange(m.njmax) >= pre

    def both(dq):
        d = fwd.fwd_position(m, d0.replace(qpos=derivatives.integrate_pos(m, d0.qpos, dq, 1.0)))
        jx, jtf = constraint.contact_products(m, d)
        J = jp.where(rows[:, None], d.efc_J, 0.0)
        return (jx(x), jtf(f)), (J @ x, f @ J)

    dq = jp.asarray(rng.normal(size=m.nv))
    (got, want), (dgot, dwant) = jax.jit(lambda t: jax.jvp(both, (jp.zeros(m.nv),), (t,)))(dq)
    assert int(mjd.ncon) >= 3 and float(jp.abs(want[0]).max()) > 0
    for g, w in zip(got + dgot, want + dwant):
        assert _normwise(g, w) < PRODUCT_RTOL, (_normwise(g, w), cone, condim)


@pytest.mark.slow
@pytest.mark.parametrize("cone,condim", [("pyramidal", 3), ("elliptic", 6), ("pyramidal", 4)])
def test_transition_with_held_contact_rows(cone, condim):
    """The derivative pass with the contact rows of efc_J held (their derivative as products, the default where
    `held_contacts_supported`) gives the Jacobians of autodiff through the step itself (mode "step") to round-off
    and MuJoCo's finite differences, contacts of condim 3 and `condim` at once."""
    mjm, m, mjd = _held_contacts_scene(cone, condim)
    assert derivatives._held_contacts(m)
    d = _data(m, mjd)
    want = mujoco_transition(mjm, mjd)
    fn = jax.jit(derivatives.transition, static_argnames=("sensors", "mode", "ncon"))
    ref = fn(m, d, sensors=False, mode="step")
    for mode in ("reverse", "forward"):
        A, B, _, _ = fn(m, d, sensors=False, mode=mode)
        assert _normwise(A, want[0]) < CONTACT_RTOL and _normwise(B, want[1]) < CONTACT_RTOL, mode
        assert _normwise(A, ref[0]) < 1e-10 and _normwise(B, ref[1]) < 1e-10, mode


@pytest.mark.slow
def test_transition_contact_capacity_ladder():
    """ncon as a ladder of capacities (2, 4): under vmap the batch's derivative pass runs with the smallest capacity
    that holds every state's active contacts, or with the model's own (6 slots) where none does, and is exact in
    every case: batches whose largest contact count is 0 (capacity 2), 4 (capacity 4) and 5 (the model's) give the
    Jacobians of the full pass to round-off, and MuJoCo's finite differences. The sliding box (4 contacts) and a
    sphere that rests on the floor (1 contact) or floats far above it."""
    mjm, m, mjd = _sliding_box_and_ball()
    states = []
    for box_z, ball_z in ((None, None), (0.6, None), (None, 0.0499)):  # 4, 0 and 5 contacts
        s = mujoco.MjData(mjm)
        s.qpos[:], s.qvel[:], s.qacc_warmstart[:] = mjd.qpos, mjd.qvel, mjd.qacc_warmstart
        if box_z is not None:
            s.qpos[2] = box_z
        if ball_z is not None:
            s.qpos[9] = ball_z
        mujoco.mj_forward(mjm, s)
        states.append(s)
    assert [s.ncon for s in states] == [4, 0, 5] and m.nconmax == 6
    ds = [_data(m, s) for s in states]

    def batch(*idx):
        return jax.tree.map(lambda *xs: jp.stack(xs), *[ds[i] for i in idx])

    def vfn(ncon):
        return jax.jit(jax.vmap(lambda d: derivatives.transition(m, d, sensors=False, mode="reverse", ncon=ncon)[:2]))

    full, ladder = vfn(None), vfn((2, 4))
    for idx in ((1, 1), (0, 1), (2, 1), (2, 0)):  # largest contact count 0, 4, 5, 5 (no actuators: B is empty)
        got, ref = ladder(batch(*idx))[0], full(batch(*idx))[0]
        for k, i in enumerate(idx):
            assert np.all(np.isfinite(got[k])), idx
            diff = _normwise(got[k], ref[k])
            assert diff < 1e-10, f"batch {idx}: ladder vs full pass {diff:.2e}"
            err = _normwise(got[k], mujoco_transition(mjm, states[i])[0])
            assert err < CONTACT_RTOL, f"batch {idx}, state {i}: A differs from FD by {err:.2e}"


SPHERES = """
<mujoco>
  <option timestep="0.01" tolerance="1e-13" iterations="100" ls_iterations="50"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction=".5"/>
    <body name="s0" pos="0 0 .099"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
    <body name="e0" pos=".2 0 .12"><freejoint/><geom type="ellipsoid" size=".11 .06 .05" mass=".5"/></body>
    <body pos="1 0 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
    <body pos="-1 0 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
    <body pos="0 1 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
    <body pos="0 -1 1"><freejoint/><geom type="sphere" size=".1" mass="1"/></body>
  </worldbody>
</mujoco>
"""


@pytest.mark.slow
def test_transition_collides_only_the_pairs_in_contact():
    """With a contact capacity (ncon) below a group's number of pairs, the derivative pass runs the colliders only on
    the pairs in contact at the state (`active_collision`): five spheres (one on the floor, four in the air) and an
    ellipsoid pressed into the grounded sphere (a GJK/EPA pair), ncon 3, so the plane-sphere, sphere-sphere and
    sphere-ellipsoid groups (5, 10 and 5 pairs) are restricted. A equals the full pass (ncon None, whose
    agreement with MuJoCo is tested above) to round-off, forward and reverse. (Not against mjd_transitionFD here:
    MuJoCo finds the sphere-ellipsoid contact by its convex collider to ccd_tolerance 1e-6, so its differences at
    eps 1e-6 are off by ~4e-4 at this state, measured.)"""
    mjm = mujoco.MjModel.from_xml_string(SPHERES)
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:6] = [0.2, -0.1, -0.05, 0.3, 0.1, -0.2]
    mjd.qvel[6:12] = [-0.1, 0.05, 0.0, 0.0, 0.2, 0.1]
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 2 and {tuple(sorted(c.geom)) for c in mjd.contact} == {(0, 1), (1, 2)}
    groups = derivatives._active_collision.driver.pair_table(m).groups
    assert sum(len(g.geom1) > 3 for g in groups) == 3  # the restricted groups
    d = _data(m, mjd)
    fn = jax.jit(derivatives.transition, static_argnames=("sensors", "mode", "ncon"))
    full = fn(m, d)
    assert np.all(np.isfinite(full[0])) and np.abs(full[0][42:48, 0:6]).max() > 0  # e0 feels s0 (the pair)
    for mode in ("forward", "reverse"):
        got = fn(m, d, mode=mode, ncon=3)
        for name, g, f in zip("A", got, full):  # (no actuators, no sensors: B, C, D are empty)
            assert np.all(np.isfinite(g)), (mode, name)
            assert _normwise(g, f) < 1e-10, f"{mode} {name}: restricted vs full pass {_normwise(g, f):.2e}"


def _gjk_transition_text(mode: str) -> str:
    """The StableHLO text of `transition`'s A on SPHERES (a GJK/EPA pair) in `mode`, ncon 3, without sensors
    (lowered, not compiled: ~8 CPU-s to trace each)."""
    gjk = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(SPHERES))
    fn = jax.jit(lambda d: derivatives.transition(gjk, d, sensors=False, mode=mode, ncon=3)[0])
    return fn.lower(mjl.make_data(gjk)).as_text()


class _ChosenError(Exception):
    """Raised by `_chosen_mode`'s stand-ins for jax.jacfwd / jax.jacrev: the mode `_structured_jacobian` took."""


def _chosen_mode(monkeypatch, m) -> str:
    """The autodiff mode ("forward" or "reverse") that `transition(m, d, sensors=False, mode="auto", ncon=3)` takes
    in `_structured_jacobian`: traced until its first jacfwd / jacrev there (the forward pass only; a full trace of
    the derivative is ~8 CPU-s more)."""

    def stand_in(name, orig):
        def fn(*args, **kwargs):
            if sys._getframe(1).f_code is derivatives._structured_jacobian.__code__:
                raise _ChosenError(name)
            return orig(*args, **kwargs)

        return fn

    monkeypatch.setattr(jax, "jacfwd", stand_in("forward", jax.jacfwd))
    monkeypatch.setattr(jax, "jacrev", stand_in("reverse", jax.jacrev))
    try:
        jax.make_jaxpr(lambda d: derivatives.transition(m, d, sensors=False, mode="auto", ncon=3))(mjl.make_data(m))
    except _ChosenError as e:
        return e.args[0]
    finally:
        monkeypatch.undo()
    raise AssertionError("_structured_jacobian took neither jacfwd nor jacrev")


def test_transition_auto_mode_is_forward_with_gjk_pairs(monkeypatch):
    """`transition`'s mode "auto" with the structured (Euler) derivative: reverse mode by shape (here nv+na = 36
    rows against nv + (nv+na+nu)/2 = 54 tangent-equivalents), but forward mode where the pair table has a GJK/EPA
    collider (the sphere-ellipsoid pairs), whose reverse-mode derivative costs far more to compile and run
    (dm_control's quadruped, ncon 8: reverse took 601 s to compile against forward's 151 s, load 11, before this
    rule). The mode `_structured_jacobian` takes is read at its first jacfwd / jacrev (that "auto" then traces the
    very program of "forward", same StableHLO, is test_transition_auto_mode_traces_the_forward_program, slow)."""
    gjk = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(SPHERES))
    plain = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(SPHERES.replace(
        'type="ellipsoid" size=".11 .06 .05"', 'type="sphere" size=".06"')))  # fmt: skip
    assert not derivatives._structured_reverse(gjk, sensors=False)
    assert derivatives._structured_reverse(plain, sensors=False)
    assert _chosen_mode(monkeypatch, gjk) == "forward"
    assert _chosen_mode(monkeypatch, plain) == "reverse"


@pytest.mark.slow  # two full traces (~25 CPU-s); test_transition_auto_mode_is_forward_with_gjk_pairs covers the rule
def test_transition_auto_mode_traces_the_forward_program():
    """With the ellipsoid there, "auto" traces the very program of "forward" (same StableHLO)."""
    assert _gjk_transition_text("auto") == _gjk_transition_text("forward")


@pytest.mark.slow  # a third trace; test_transition_auto_mode_is_forward_with_gjk_pairs covers the mode rule
def test_transition_modes_lower_to_other_programs():
    """Forward and reverse mode are other programs (the text comparison above tells modes apart)."""
    assert _gjk_transition_text("forward") != _gjk_transition_text("reverse")


def test_transition_arguments_are_validated():
    m = mjl.load_mjcf_string(PUSHER)
    d = mjl.make_data(m)
    with pytest.raises(ValueError, match="mode"):
        derivatives.transition(m, d, mode="sideways")
    with pytest.raises(ValueError, match="ncon"):
        derivatives.transition(m, d, ncon=-1)
    with pytest.raises(ValueError, match="ncon"):
        derivatives.transition(m, d, mode="step", ncon=2)
    with pytest.raises(ValueError, match="ncon"):
        derivatives.transition(m, d, ncon="some")
    with pytest.raises(ValueError, match="ncon"):
        derivatives.transition(m, d, mode="step", ncon=(2,))
    with pytest.raises(ValueError, match="ncon"):
        derivatives.transition(m, d, ncon=(-1,))


NAN_XML = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <body name="ball" pos="0 0 .1">
      <freejoint/>
      <geom type="sphere" size=".1" mass="1"/>
    </body>
    <body name="cart" pos="1 0 .5">
      <joint name="rail" type="slide" axis="1 0 0" range="-.2 .2" limited="true"/>
      <geom type="box" size=".05 .05 .05" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="rail"/></actuator>
</mujoco>
"""


@pytest.mark.parametrize("dtype", [pytest.param(jp.float64, marks=pytest.mark.slow), jp.float32])
def test_gradients_nan_free_at_onset_rest_and_limits(dtype):
    """A sphere exactly touching the floor at rest (contact onset, zero velocity, free-joint quaternion at zero
    rotation) and a slide joint exactly at its limit: the gradient of a 3-step rollout with respect to the state,
    the controls, the masses and the friction coefficients is finite (float32 and float64)."""
    m = oracle.cast_floats(mjl.load_mjcf_string(NAN_XML), dtype)
    d = oracle.cast_floats(mjl.make_data(m), dtype).replace(qpos=np.asarray([0, 0, 0.1, 1, 0, 0, 0, 0.2], dtype))

    def loss(mass, friction, qpos, qvel, ctrl):
        mm = m.replace(body_mass=mass, geom_friction=friction)

        def body(d, u):
            d = mjl.step(mm, d.replace(ctrl=u))
            return d, jp.sum(d.qpos**2) + jp.sum(d.qvel**2) + jp.sum(d.efc_force**2)

        _, out = jax.lax.scan(body, d.replace(qpos=qpos, qvel=qvel), ctrl)
        return jp.sum(out)

    ctrl = np.ones((3, 1), dtype)
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2, 3, 4)))(m.body_mass, m.geom_friction, d.qpos, d.qvel, ctrl)
    assert all(x.dtype == dtype for x in grads)
    bad = [name for name, x in zip(("mass", "friction", "qpos", "qvel", "ctrl"), grads)
           if not np.all(np.isfinite(np.asarray(x)))]  # fmt: skip
    assert not bad, f"non-finite gradients: {bad}"
    assert abs(float(np.asarray(grads[2])[2])) > 0  # the contact height matters


# ---- contact-aware (smoothed) derivative ----------------------------------------------------------------------

PUSHER = """
<mujoco>
  <option timestep="0.01" gravity="0 0 0"/>
  <worldbody>
    <body name="finger"><joint name="fx" type="slide" axis="1 0 0" damping="1"/>
      <geom type="sphere" size=".03" mass=".2"/></body>
    <body name="box" pos=".12 0 0"><joint name="bx" type="slide" axis="1 0 0"/>
      <geom type="box" size=".05 .05 .05" mass=".3"/></body>
  </worldbody>
  <actuator><motor joint="fx" gear="4" ctrlrange="-1 1" ctrllimited="true"/></actuator>
</mujoco>
"""


def _box_after(m, mass, d, ctrl):
    """The box's position after len(ctrl) steps (a function of the body masses and the controls)."""

    def body(d, u):
        return mjl.step(m.replace(body_mass=mass), d.replace(ctrl=u)), None

    return jax.lax.scan(body, d, ctrl)[0].qpos[1]


@pytest.fixture(scope="module")
def pusher_grad():
    return jax.jit(jax.value_and_grad(_box_after, argnums=(1, 3)))


def test_smoothed_gradient_sees_the_contact_ahead(pusher_grad):
    """4 cm from the box, the exact gradient of the box's final position with respect to the finger's controls is
    zero; the smoothed one (finger position perturbed with std 3 cm) is positive (push to move the box) and the
    value of the rollout is unchanged."""
    m = mjl.load_mjcf_string(PUSHER)
    d = mjl.make_data(m)
    ctrl = jp.full((10, 1), 0.5)
    v_exact, (_, g_exact) = pusher_grad(m, m.body_mass, d, ctrl)
    smooth = mjl.configure(m, contact_gradients="smooth", contact_smoothing_std=0.03, contact_smoothing_dofs=(0,),
                           contact_smoothing_samples=8)  # fmt: skip
    v_smooth, (_, g_smooth) = pusher_grad(smooth, m.body_mass, d, ctrl)
    assert float(v_smooth) == float(v_exact)
    assert np.all(np.asarray(g_exact) == 0.0)
    assert np.all(np.isfinite(g_smooth)) and float(g_smooth[0, 0]) > 0


@pytest.mark.slow
def test_smoothed_gradient_with_vanishing_noise_is_exact(pusher_grad):
    """In contact (the finger pressing on the box), the smoothed derivative with a vanishing std is the exact one,
    for the controls and the masses (the custom VJP's plumbing)."""
    m = mjl.load_mjcf_string(PUSHER)
    touching = mjl.make_data(m).replace(qpos=jp.asarray([0.045, 0.0]), qvel=jp.asarray([0.3, 0.0]))
    ctrl = jp.full((10, 1), 0.5)
    tiny = mjl.configure(m, contact_gradients="smooth", contact_smoothing_std=1e-9, contact_smoothing_samples=2)
    ve, (gm_e, gu_e) = pusher_grad(m, m.body_mass, touching, ctrl)
    vt, (gm_t, gu_t) = pusher_grad(tiny, m.body_mass, touching, ctrl)
    assert float(ve) == float(vt) and float(jp.abs(gu_e).max()) > 0
    np.testing.assert_allclose(np.asarray(gu_t), np.asarray(gu_e), rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(np.asarray(gm_t), np.asarray(gm_e), rtol=1e-6, atol=1e-12)


def test_contact_gradient_config_is_validated():
    with pytest.raises(ValueError, match="contact_gradients"):
        mjl.Config(contact_gradients="soft")
    with pytest.raises(ValueError, match="contact_smoothing_samples"):
        mjl.Config(contact_smoothing_samples=0)
    with pytest.raises(ValueError, match="contact_smoothing_std"):
        mjl.Config(contact_smoothing_std=-1.0)
    with pytest.raises(ValueError, match="contact_smoothing_dofs"):
        mjl.Config(contact_smoothing_dofs=(0, -1))
    assert mjl.Config(contact_smoothing_dofs=[0, 1]).contact_smoothing_dofs == (0, 1)
    m = mjl.configure(mjl.load_mjcf_string(PUSHER), contact_gradients="smooth", contact_smoothing_dofs=(5,))
    d = mjl.make_data(m)
    with pytest.raises(ValueError, match="nv=2"):  # (jitted: traced only, no eager operation compiled on the way)
        jax.jit(jax.grad(lambda q: mjl.step(m, d.replace(qpos=q)).qpos[1]))(np.zeros(2))


# ---- RK4: the linearised step per stage ---------------------------------------------------------------------

RK4_CONTACT = """
<mujoco>
  <option timestep="0.01" integrator="RK4" tolerance="1e-13" iterations="100" ls_iterations="50"/>
  <worldbody>
    <geom type="plane" size="2 2 .1" friction=".5"/>
    <body pos="0 0 .1">
      <joint name="x" type="slide" axis="1 0 0" damping=".1"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size=".1" mass="1" friction=".5"/>
      <body pos="0 0 .3">
        <joint name="h" type="hinge" axis="0 1 0" range="-.3 .3" damping=".1" limited="true"/>
        <geom type="capsule" fromto="0 0 0 .3 0 0" size=".03" mass=".2" contype="0" conaffinity="0"/>
        <site name="tip" pos=".3 0 0"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="x"/><motor joint="h" gear="2"/></actuator>
  <sensor><jointpos joint="h"/><velocimeter site="tip"/><accelerometer site="tip"/></sensor>
</mujoco>
"""


@pytest.fixture(scope="module")
def rk4_contact():
    """The RK4 model with the sphere pressed into the floor and the hinge past its limit, and its state.

    The sphere is 1.5 mm deep and moving in: past the contact impedance's 1 mm transition (solimp width), and every
    RK4 stage stays in contact. Resting at its settled depth (48 um) instead, the state lay 5 um below a
    discontinuity of mj_step (a later stage loses the contact: the step's qvel jumps between dz = +4e-6 and +5e-6)
    and the centred differences of the accelerometer rows (z column) erred by their truncation error, which scaled
    as eps^2: 1.3e-5, 1.3e-7, 1.3e-9 of C at eps 1e-5, 1e-6, 1e-7 (the reference's error, not the Jacobian's).
    Here the differences at eps 1e-4 ... 1e-7 agree with each other to 4e-10 (A, C) and 5e-8 (B, D)."""
    mjm = mujoco.MjModel.from_xml_string(RK4_CONTACT)
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    for _ in range(50):  # settle on the floor (a warm start)
        mujoco.mj_step(mjm, mjd)
    mjd.qpos[1] = -0.0015  # 1.5 mm into the floor
    mjd.qpos[2] = 0.31  # past the hinge's upper limit
    mjd.qvel[:] = [0.3, -0.05, 0.5]
    mjd.ctrl[:] = [0.2, -0.1]
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 1 and mjd.nefc > 3  # a contact (pyramidal, condim 3) and the limit
    fn = jax.jit(derivatives.transition, static_argnames=("sensors", "mode", "ncon"))
    return mjm, m, mjd, fn


@pytest.mark.slow  # five compiled RK4 programs: minutes on the 2-core machine
def test_rk4_linearized_step_value_and_transition(rk4_contact):
    """RK4 with a contact and an active joint limit: the linearised step (each stage linearised at its own solver
    solution) has the step's value, its Jacobians equal autodiff through `step` (mode "step") to round-off and
    MuJoCo's centred finite differences of mj_step within the contact tolerance."""
    mjm, m, mjd, fn = rk4_contact
    assert derivatives.linearized_supported(m)
    d = _data(m, mjd)
    star, stages = jax.jit(derivatives.linearized_star)(m, d)
    lin = jax.jit(derivatives.linearized_step, static_argnames="sensors")(m, d, star, sensors=True, stages=stages)
    ref = jax.jit(mjl.step)(m, d)
    for f in ("qpos", "qvel", "act", "sensordata", "qacc_warmstart"):
        np.testing.assert_allclose(getattr(lin, f), getattr(ref, f), rtol=1e-12, atol=1e-12, err_msg=f)
    got = fn(m, d)
    via_step = fn(m, d, mode="step")
    want = step_transition(mjm, mjd)
    for name, g, s, w in zip("ABCD", got, via_step, want):
        assert np.all(np.isfinite(g)), name
        assert _normwise(g, s) < 1e-9, f"{name}: linearised vs autodiff through step {_normwise(g, s):.2e}"
        err = _normwise(g, w)
        assert err < CONTACT_RTOL, f"{name} differs from FD by {err:.2e} (normwise)"


@pytest.mark.slow
def test_rk4_linearized_forward_and_reverse_agree(rk4_contact):
    """The RK4 linearised step in forward and reverse mode gives the same Jacobians (round-off apart)."""
    mjm, m, mjd, fn = rk4_contact
    d = _data(m, mjd)
    fwd, rev = fn(m, d, mode="forward"), fn(m, d, mode="reverse")
    for name, a, b in zip("ABCD", fwd, rev):
        assert _normwise(a, b) < 1e-10, name
