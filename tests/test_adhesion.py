"""Adhesive contacts (MuJoCo 4.0's geom and pair `adhesion`): the contact's adhesion (the geoms' sum, the higher
priority's, or the explicit pair's), rows that stay in the gap band with dim 1, the aref bias R * adhesion (shared by
the pyramid edges), qfrc_adhesion in qfrc_passive and the net contact force (normal minus adhesion) of
mj_contactForce, touch sensors and cfrc_ext; against mj_forward, mj_step, and gradients against central differences.
"""

import re

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import contact_force, rne
from tests import oracle

FWD_TOL = 1e-10  # one forward pass, float64, solvers run to tolerance 1e-15 (scaled by max(1, |field|))
TRAJ_TOL = 1e-8  # qpos/qvel after 100 float64 steps in contact (round-off grows with the steps)
ELLIPTIC_TRAJ_TOL = 1e-7  # elliptic cones: Newton's convergence path differs from MuJoCo's by ~1e-9 per step
NOSLIP_TOL = 1e-8  # noslip sweeps all rows together (MuJoCo: per island), converged to ~1e-9 on elliptic cones
GRAD_RTOL = 1e-4  # jax.grad vs central differences (relative step 1e-4, float64)
SOLVE = 'tolerance="1e-15" iterations="300" ls_iterations="100"'


def _xml(cone="pyramidal", condim=3, solver="Newton", opt="", flags="", pair=True, sensors=True, nogap="capsule"):
    """A box resting on an adhesive floor (four contacts in compression), a ball in the floor's gap band (one
    normal-only row that pulls), a higher-priority ball (its own adhesion alone), a capsule without adhesion in its
    gap band (no row), and with `pair` an explicit pair whose adhesion overrides the geoms'. nogap="sphere": a
    sphere of the capsule's radius at its height in the capsule's place (the same contact; CI time: no capsule
    colliders to compile)."""
    shape = 'type="capsule" size=".05 .1" euler="0 90 0"' if nogap == "capsule" else 'size=".05"'  # fmt: skip
    p = (f'<contact><pair geom1="floor" geom2="b3" adhesion="0.9" condim="{condim}" gap="0.04"/></contact>'
         if pair else "")  # fmt: skip
    s = ('<sensor><touch site="ts"/><touch site="bs"/><contact geom1="box" data="found force torque" num="4"/>'
         '<contact body1="ball" data="found force" reduce="netforce"/></sensor>' if sensors else "")  # fmt: skip
    return f"""<mujoco><option cone="{cone}" solver="{solver}" {SOLVE} {opt}><flag {flags}/></option><worldbody>
<geom name="floor" type="plane" size="2 2 .1" adhesion="0.5" gap="0.05" condim="{condim}"/>
<body name="bb" pos="0 0 .099"><freejoint/><geom name="box" type="box" size=".1 .1 .1" adhesion="0.25"
  condim="{condim}"/><site name="ts" type="box" size=".1 .1 .02" pos="0 0 -.1"/></body>
<body name="ball" pos=".5 0 .13"><freejoint/><geom name="b1" size=".1" adhesion="0.3" condim="{condim}"/>
  <site name="bs" size=".12"/></body>
<body pos="-.5 0 .11"><freejoint/><geom name="b2" size=".1" adhesion="0.3" priority="1" condim="{condim}"/></body>
<body pos="-.5 .5 .12"><freejoint/><geom {shape} gap="0.02"
  condim="{condim}"/></body>
<body pos=".5 .5 .12"><freejoint/><geom name="b3" size=".1" adhesion="0.4" condim="{condim}"/></body>
</worldbody>{p}{s}</mujoco>"""


def _state(xml, steps=0):
    """(MjModel, MjData forwarded after `steps` steps from a random velocity, our Model, our Data at that state)."""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qvel[:] = np.random.default_rng(0).normal(size=mjm.nv) * 0.3
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    m = mjl.load_mjcf_string(xml)
    d = mjl.make_data(m).replace(qpos=mjd.qpos, qvel=mjd.qvel, qacc_warmstart=mjd.qacc_warmstart, time=mjd.time)
    return mjm, mjd, m, d


@jax.jit
def _forward(m, d):
    f = mjl.forward(m, d)
    return f, contact_force.contact_force(m, f), rne.rne_postconstraint(m, f, contact_force.cfrc_ext_constraint(m, f))


def _compare_forward(mjm, mjd, m, d, tol=FWD_TOL):
    f, cf, post = _forward(m, d)
    act = np.asarray(f.contact.active)
    assert int(f.ncon) == mjd.ncon and int(f.nefc) == mjd.nefc
    # contacts, matched by geom pair and position: adhesion, dim, whether they make rows, net contact force
    geom, pos = np.asarray(f.contact.geom)[act], np.asarray(f.contact.pos)[act]
    for i in range(mjd.ncon):
        c = mjd.contact[i]
        j = int(np.argmin(np.linalg.norm(pos - c.pos, axis=1) + 1e9 * np.any(geom != c.geom, axis=1)))
        row = np.nonzero(act)[0][j]
        assert np.asarray(f.contact.adhesion)[row] == pytest.approx(c.adhesion, abs=1e-15)
        assert int(np.asarray(f.contact.dim)[row]) == c.dim
        assert (int(np.asarray(f.contact.efc_address)[row]) >= 0) == (c.efc_address >= 0)
        ref = np.zeros(6)
        mujoco.mj_contactForce(mjm, mjd, i, ref)
        oracle.close(np.asarray(cf)[row], ref, tol, f"contact force {i}")
    rm, ro = oracle.match_rows(mjd, mjm, f)
    for name in ("efc_pos", "efc_margin", "efc_R", "efc_aref", "efc_force"):
        oracle.close(np.asarray(getattr(f, name))[ro], getattr(mjd, name)[rm], tol, name)
    for name in ("qfrc_adhesion", "qfrc_passive", "qfrc_constraint", "qacc", "sensordata"):
        oracle.close(getattr(f, name), getattr(mjd, name), tol, name)
    mujoco.mj_rnePostConstraint(mjm, mjd)
    oracle.close(post.cfrc_ext, mjd.cfrc_ext, tol, "cfrc_ext")
    return f


def test_adhesion_compiles_and_forward_matches_mujoco():
    """Compiled adhesion fields, then one forward of the scene (pyramidal, condim 3) against mj_forward: contacts in
    compression and in the gap band, the priority geom's and the pair's adhesion, rows, qfrc_adhesion, qacc, contact
    forces, touch and contact sensors, cfrc_ext. (The geom without adhesion a sphere: CI time; the slow tests keep
    the capsule.)"""
    mjm, mjd, m, d = _state(_xml(nogap="sphere"))
    np.testing.assert_array_equal(np.asarray(m.geom_adhesion), mjm.geom_adhesion)
    np.testing.assert_array_equal(np.asarray(m.pair_adhesion), mjm.pair_adhesion)
    assert m.flg_adhesion and bool(mjm.flg_adhesion)
    assert np.any(mjd.qfrc_adhesion != 0) and np.any(mjd.contact.dim[: mjd.ncon] == 1)
    assert np.any(mjd.efc_force != 0) and mjd.sensordata[0] > 0  # the box is pressed on the floor and touches
    _compare_forward(mjm, mjd, m, d)


@pytest.mark.slow
@pytest.mark.parametrize("cone, condim, solver", [
    ("pyramidal", 1, "Newton"), ("pyramidal", 4, "Newton"), ("pyramidal", 6, "Newton"), ("elliptic", 1, "Newton"),
    ("elliptic", 3, "Newton"), ("elliptic", 4, "Newton"), ("elliptic", 6, "Newton"), ("pyramidal", 3, "CG"),
    ("pyramidal", 3, "PGS")])  # fmt: skip
def test_adhesion_forward_cones_condims_solvers(cone, condim, solver):
    _compare_forward(*_state(_xml(cone, condim, solver)))


@pytest.mark.slow
@pytest.mark.parametrize("flags", ['contact="disable"', 'constraint="disable"', 'spring="disable" damper="disable"'])
def test_adhesion_disable_flags(flags):
    """No contacts, no adhesion; with springs and dampers both off MuJoCo skips every passive force, adhesion too."""
    mjm, mjd, m, d = _state(_xml(flags=flags, sensors=False))
    f = _compare_forward(mjm, mjd, m, d)
    assert not np.any(np.asarray(f.qfrc_adhesion))


@pytest.mark.slow
@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_adhesion_noslip_and_inverse(cone):
    """Noslip after the main solver, and inverse dynamics (qfrc_passive holds the adhesion), against MuJoCo."""
    mjm, mjd, m, d = _state(_xml(cone, opt='noslip_iterations="20"', sensors=False))
    f = _compare_forward(mjm, mjd, m, d, tol=NOSLIP_TOL)
    mujoco.mj_inverse(mjm, mjd)
    oracle.close(jax.jit(mjl.inverse)(m, f).qfrc_inverse, mjd.qfrc_inverse, NOSLIP_TOL, "qfrc_inverse")


@pytest.mark.slow
def test_adhesion_diagexact():
    """The diagexact flag: a normal-only row in a pyramidal slot takes its own exact diagonal (no edge scaling)."""
    _compare_forward(*_state(_xml(flags='diagexact="enable"', sensors=False)))


@pytest.mark.slow
def test_adhesion_fused_kernels_fall_back():
    """Config(kernels="fused") (interpret mode on the CPU): the rows kernel and the fused passive forces step aside
    for adhesive models, the fused colliders' contacts get their adhesion; same forward as MuJoCo."""
    mjm, mjd, m, d = _state(_xml(sensors=False))
    _compare_forward(mjm, mjd, mjl.configure(m, kernels="fused"), d)


@pytest.mark.slow
def test_adhesion_flex_contacts():
    """Geom-flex contacts take the geom's adhesion (a flex has none), or none where the flex has the priority."""
    xml = """<mujoco><option timestep="0.002" {solve}/><worldbody>
<body><freejoint/><geom type="sphere" size=".1" adhesion="0.02" gap=".02"/></body>
<geom type="box" size=".1 .1 .1" pos=".4 0 0" euler="0 0 10" adhesion="0.03" gap=".01"/>
<flexcomp name="rope" type="grid" count="6 1 1" spacing=".05 .05 .05" pos=".41 .02 .104" euler="5 3 0" dim="1"
  mass=".1" radius=".005"><edge equality="true" damping=".01"/><contact selfcollide="none"/></flexcomp>
<flexcomp name="cloth" type="grid" count="4 4 1" spacing=".05 .05 .05" pos=".01 .02 .1" euler="5 3 0" dim="2"
  mass=".2" radius=".005"><edge equality="true" damping=".01"/><contact selfcollide="none" priority="{p}"/>
</flexcomp></worldbody></mujoco>"""
    for p in (0, 1):
        x = xml.format(solve=SOLVE, p=p)
        mjm = mujoco.MjModel.from_xml_string(x)
        mjd = mujoco.MjData(mjm)
        for _ in range(20):
            mujoco.mj_step(mjm, mjd)
        mujoco.mj_forward(mjm, mjd)
        m = mjl.load_mjcf_string(x)
        d = mjl.make_data(m).replace(qpos=mjd.qpos, qvel=mjd.qvel, qacc_warmstart=mjd.qacc_warmstart)
        f = jax.jit(mjl.forward)(m, d)
        act = np.asarray(f.contact.active)
        np.testing.assert_allclose(np.sort(np.asarray(f.contact.adhesion)[act]), np.sort(mjd.contact.adhesion))
        np.testing.assert_array_equal(np.sort(np.asarray(f.contact.dim)[act]), np.sort(mjd.contact.dim))
        assert np.any(mjd.qfrc_adhesion != 0)
        for name in ("qfrc_adhesion", "qacc"):
            oracle.close(getattr(f, name), getattr(mjd, name), FWD_TOL * 1e2, name)


def _run(m, d, n):
    return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=n)[0]


@pytest.mark.slow
@pytest.mark.parametrize("cone, condim, tol", [("pyramidal", 3, TRAJ_TOL), ("elliptic", 4, ELLIPTIC_TRAJ_TOL)])
def test_adhesion_steps_like_mujoco(cone, condim, tol):
    """100 steps: the balls in the gap band are pulled onto the floor and stick, the box stays stuck."""
    mjm, mjd, m, d = _state(_xml(cone, condim, sensors=False))
    z0 = mjd.qpos[9]  # the first ball's height
    d = jax.jit(_run, static_argnums=2)(m, d, 100)
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    assert mjd.qpos[9] < z0 - 0.02  # pulled down across the gap into contact
    oracle.close(d.qpos, mjd.qpos, tol, "qpos")
    oracle.close(d.qvel, mjd.qvel, tol, "qvel")


@pytest.mark.slow
def test_adhesion_gradient_matches_central_differences():
    """d(box height + ball height after 30 steps)/d(floor adhesion): the box is pulled up by less than its weight
    plus the adhesion (a contact in tension), the ball falls in the gap band pulled by the adhesion."""
    xml = re.sub(r"<body pos=\"-\.5.*?</body>\n", "", _xml(pair=False, sensors=False), flags=re.S)
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    weight = float(mjm.body_subtreemass[1]) * 9.81
    xfrc = np.zeros((m.nbody, 6))
    xfrc[1, 2] = weight + 1.5  # less than the four contacts' pull (4 x 0.75)
    d0 = mjl.make_data(m).replace(xfrc_applied=xfrc)

    def height(k):
        mm = m.replace(geom_adhesion=m.geom_adhesion.at[0].set(k))
        d = _run(mm, d0, 30)
        return d.qpos[2] + d.qpos[9]

    f = jax.jit(height)
    k = 0.5
    g = float(jax.jit(jax.grad(height))(k))
    h = 1e-4 * k
    fd = (float(f(k + h)) - float(f(k - h))) / (2 * h)
    assert np.isfinite(g) and g < 0  # more adhesion: lower
    np.testing.assert_allclose(g, fd, rtol=GRAD_RTOL)
