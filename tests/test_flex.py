"""Flexes (<flexcomp> type="grid", dim 1, 2 and 3) against MuJoCo 4.0: compiled fields, flex kinematics, edge forces,
elasticity (stretch and bending), <equality><flex> rows, 100-step trajectories, gradients; refusals of what is not
implemented."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from mjx_lite.models import flex
from mjx_lite.pipeline import constraint
from tests import oracle

# A rope (dim 1: edge stiffness and damping, first point pinned to the world) and a cloth (dim 2: edge equality,
# edge damping and bending elasticity, two corners pinned to a swinging body), both without contacts.
ROPE = flex.rope(count=6, spacing=0.08, euler="0 20 10", mass=0.3, radius=0.01, stiffness=40, damping=0.05, plane=True)
CLOTH = """
<mujoco>
  <option timestep="0.002" solver="Newton"/>
  <default><joint armature="0.001"/></default>
  <worldbody>
    <body name="bar" pos="0 0 1">
      <joint name="swing" type="hinge" axis="1 0 0" damping="0.1"/>
      <geom type="capsule" fromto="-.2 0 0 .2 0 0" size=".01" mass="0.1" contype="0" conaffinity="0"/>
      <flexcomp name="cloth" type="grid" count="4 3 1" spacing=".1 .1 .1" pos="0 0 -0.01" euler="90 0 0" dim="2"
                mass="0.2" radius="0.005">
        <edge equality="true" damping="0.02" solref="0.01 1"/>
        <elasticity young="2e4" poisson="0.2" thickness="0.01" elastic2d="bend" damping="0.01"/>
        <contact contype="2" conaffinity="0"/>
        <pin id="0 9"/>
      </flexcomp>
    </body>
  </worldbody>
</mujoco>
"""
# A cloth dropped on a plane: flex vertices against the plane (the contacts mjx_lite implements for flexes).
DROP = flex.cloth_on_plane(count=4, spacing=0.05, friction=0.8)
# Elasticity: a 3x3 cloth hanging from two pinned corners (stretch and bending), a 2x2x2 soft cube (dim 3, six
# tetrahedra) dropped on a plane.
ELASTIC = flex.hanging_cloth()
BOX = flex.soft_box()
MODELS = {"rope": ROPE, "cloth": CLOTH, "drop": DROP, "elastic": ELASTIC, "box": BOX}
FWD_RTOL, FWD_ATOL = 1e-9, 1e-9  # forward quantities at one state (float64, different operation order)
TRAJ_ATOL = 1e-6  # qpos / qvel after 100 steps (round-off grows through the constraint solver)


@pytest.fixture(scope="module")
def models():
    out = {}
    for k, xml in MODELS.items():
        out[k] = (mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml))
    return out


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


def _state(mjm, seed):
    if mjm.ngeom and mjm.geom_contype[0]:  # the cloth on the plane: a state with contacts, from MuJoCo's own fall
        mjd = mujoco.MjData(mjm)
        for _ in range(60 + 5 * seed):
            mujoco.mj_step(mjm, mjd)
        return mjd.qpos.copy(), mjd.qvel.copy()
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0 + 0.03 * rng.standard_normal(mjm.nq)
    qvel = 0.5 * rng.standard_normal(mjm.nv)
    return qpos, qvel


def _mj_flexedge_J(mjm, mjd):
    J = np.zeros((mjm.nflexedge, mjm.nv))
    for e in range(mjm.nflexedge):
        a, n = mjm.flexedge_J_rowadr[e], mjm.flexedge_J_rownnz[e]
        J[e, mjm.flexedge_J_colind[a : a + n]] = mjd.flexedge_J[a : a + n]
    return J


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_model_matches_mujoco(models, name):
    m, mjm = models[name]
    assert m.nflex == 1 and m.nflexedge > 0
    assert oracle.compare_models(m, mjm) == []


# slow (CI time): "drop" (the cloth on the plane: vertex-plane contacts beside edge equality rows); the vertex-plane
# contacts and their rows stay default through "box" (the soft cube on the plane), edge equality rows through "cloth",
# both kinds of rows together through tests/test_flex_self.py::test_flex_pairs_match_mujoco
_FWD_SLOW = ("drop",)


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in _FWD_SLOW else k for k in MODELS])
def test_forward_matches_mujoco(models, fwd, name):
    m, mjm = models[name]
    for seed in range(2):
        qpos, qvel = _state(mjm, seed)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
        for f in ("flexvert_xpos", "flexedge_length", "flexedge_velocity", "qfrc_spring", "qfrc_damper",
                  "qfrc_passive", "qacc_smooth", "qacc", "qfrc_constraint"):  # fmt: skip
            np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=FWD_RTOL, atol=FWD_ATOL,
                                       err_msg=f)  # fmt: skip
        np.testing.assert_allclose(np.asarray(d.flexedge_J), _mj_flexedge_J(mjm, mjd), rtol=FWD_RTOL, atol=FWD_ATOL)
        act = np.asarray(d.contact.active)
        assert int(act.sum()) == mjd.ncon
        if mjd.ncon:  # the same contacts (matched by vertex): distance, point, frame, parameters
            order = np.argsort(np.asarray(d.contact.vert)[act, 1])
            theirs = np.argsort(mjd.contact.vert[:, 1])
            np.testing.assert_array_equal(np.asarray(d.contact.vert)[act][order], mjd.contact.vert[theirs])
            np.testing.assert_array_equal(np.asarray(d.contact.geom)[act][order], mjd.contact.geom[theirs])
            np.testing.assert_array_equal(np.asarray(d.contact.flex)[act][order], mjd.contact.flex[theirs])
            for f in ("dist", "pos", "frame", "friction", "solref", "solimp", "includemargin", "dim"):
                a = np.asarray(getattr(d.contact, f))[act][order].reshape(mjd.ncon, -1)
                np.testing.assert_allclose(a, getattr(mjd.contact, f)[theirs].reshape(mjd.ncon, -1), rtol=FWD_RTOL,
                                           atol=FWD_ATOL, err_msg=f)  # fmt: skip
        live = np.asarray(d.efc_mask)
        assert int(live.sum()) == mjd.nefc
        if mjd.nefc:
            Jmj = np.zeros((mjd.nefc, mjm.nv))
            if mujoco.mj_isSparse(mjm):
                mujoco.mju_sparse2dense(Jmj, mjd.efc_J, mjd.efc_J_rownnz, mjd.efc_J_rowadr, mjd.efc_J_colind)
            else:
                Jmj[:] = mjd.efc_J.reshape(mjd.nefc, mjm.nv)
            if not mjd.ncon:  # (contact rows come in another order than MuJoCo's: compared through qacc above)
                J = np.asarray(constraint.efc_j_dense(m, d))[live]
                np.testing.assert_allclose(J, Jmj, rtol=FWD_RTOL, atol=FWD_ATOL)
                for f in ("efc_pos", "efc_diagA", "efc_R", "efc_aref", "efc_force"):
                    np.testing.assert_allclose(np.asarray(getattr(d, f))[live], getattr(mjd, f), rtol=1e-7,
                                               atol=1e-9, err_msg=f)  # fmt: skip
            else:
                for f in ("efc_pos", "efc_diagA", "efc_R", "efc_aref", "efc_force"):
                    np.testing.assert_allclose(np.sort(np.asarray(getattr(d, f))[live]), np.sort(getattr(mjd, f)),
                                               rtol=1e-7, atol=1e-9, err_msg=f)  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("name", list(MODELS))
def test_trajectory_matches_mujoco(models, name):
    """100 steps from rest (the rope hangs from its pin, the cloth from its bar) equal MuJoCo's."""
    m, mjm = models[name]
    mjd = mujoco.MjData(mjm)
    qpos, qvel = _state(mjm, 7)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    d = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=100)[0]

    d = roll(d)
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=100 * TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, atol=TRAJ_ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name,field,value", [("rope", "flex_edgestiffness", 40.0), ("drop", "geom_solref", 0.02)])
def test_vmap_and_grad(models, name, field, value):
    """Batched rollouts equal unbatched ones; d(final height)/d(parameter) is finite and equals central differences
    (the rope's edge stiffness; the cloth's contact time constant, 20 steps from a state with 16 plane contacts)."""
    m, mjm = models[name]
    qpos, qvel = _state(mjm, 0) if name == "drop" else (mjm.qpos0, np.zeros(mjm.nv))
    d0 = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)
    base = getattr(m, field)
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(**{field: base.at[(0,) * base.ndim].set(k)}), value)


_GRID = '<flexcomp name="f" count="3 3 1" spacing=".1 .1 .1" {attrs}>{kids}</flexcomp>'


@pytest.mark.parametrize("attrs,kids,what", [
    ('dim="2"', '<contact contype="0" conaffinity="0"/><edge equality="true"/>', None),
    ('dim="1"', '<contact contype="0" conaffinity="0"/><elasticity young="1e4"/>', None),  # tests/test_flex_rod.py
    ('dim="1"', '<contact contype="0" conaffinity="0"/><elasticity young="1e4" section="box"/>', "section"),
    ('dim="2"', '<contact contype="0" conaffinity="0"/><elasticity young="1e4" thickness=".1" elastic2d="both"/>',
     None),
    ('dim="3"', '<contact contype="0" conaffinity="0"/><elasticity young="1e4" yield="0.1"/>', "yield"),
    ('dim="2"', '<contact contype="0" conaffinity="0"/><edge equality="vert"/>', "equality='vert'"),
    ('dim="2"', '', None),  # self-collisions (tests/test_flex_self.py)
    ('dim="2"', '<contact contype="0" conaffinity="0"/><elasticity shear="1"/>', None),  # (ignored, as MuJoCo)
    ('dim="2"', '<contact contype="0" conaffinity="0"/><plugin plugin="mujoco.elasticity.shell"/>', "plugin"),
])  # fmt: skip
def test_refusals_name_the_feature(attrs, kids, what):
    xml = f"<mujoco><worldbody>{_GRID.format(attrs=attrs, kids=kids)}</worldbody></mujoco>"
    _expect(xml, what)


@pytest.mark.parametrize("geom,what", [
    ('<geom type="sphere" size=".1" pos="0 0 -1"/>', None),
    ('<geom type="cylinder" size=".1 .1" pos="0 0 -1"/>', None),
    ('<geom type="hfield" hfield="h"/>', None),
    ('<geom type="plane" size="1 1 .1" contype="2" conaffinity="2"/>', None),
])  # fmt: skip
def test_flex_contact_refusals(geom, what):
    cloth = _GRID.format(attrs='dim="2" pos="0 0 1"', kids='<contact selfcollide="none"/>')
    hfield = '<asset><hfield name="h" nrow="2" ncol="2" size="1 1 .1 .1"/></asset>'
    _expect(f"<mujoco>{hfield}<worldbody>{geom}{cloth}</worldbody></mujoco>", what)


def _expect(xml, what):
    if what is None:
        assert mjx_lite.load_mjcf_string(xml).nflex == 1
        return
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(xml)


def test_edge_stiffness_on_cloth_is_an_error_as_in_mujoco():
    xml = ("<mujoco><worldbody>" + _GRID.format(attrs='dim="2"', kids='<contact contype="0" conaffinity="0"/>'
           '<edge stiffness="3"/>') + "</worldbody></mujoco>")  # fmt: skip
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="edge stiffness only available for dim=1"):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["elastic", "box"])
def test_elasticity_vmap_and_grad(models, name):
    """d(mean vertex height after 20 steps)/d(scale of flex_stiffness) is finite and equals central differences (the
    hanging cloth from a perturbed state; the soft cube from a state in contact with the plane); vmapped rollouts
    over the scale equal unbatched ones."""
    m, mjm = models[name]
    qpos, qvel = _state(mjm, 0)
    d0 = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)
    oracle.check_rollout_grad(m, d0, lambda m, s: m.replace(flex_stiffness=s * m.flex_stiffness,
                                                            flex_bending=s * m.flex_bending), 1.0)  # fmt: skip


@pytest.mark.parametrize("elasticity,option,what", [
    ('young="1e4" poisson="0.3" thickness="0.01" elastic2d="both"', 'integrator="implicitfast"', "implicit"),
    ('young="1e4" poisson="0.5" thickness="0.01" elastic2d="stretch"', "", "Poisson ratio"),
    ('young="1e4" poisson="0.3" elastic2d="bend"', "", "positive thickness"),
])  # fmt: skip
def test_elasticity_errors_as_in_mujoco(elasticity, option, what):
    xml = flex.hanging_cloth().replace("<option ", f"<option {option} ")
    a = xml.index("<elasticity")
    xml = xml[:a] + f"<elasticity {elasticity}/>" + xml[xml.index("/>", a) + 2 :]
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=what):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.slow
def test_more_than_50_vertices_on_a_plane(fwd):
    """An 8x8 cloth lying on a plane: MuJoCo 4.0 keeps all 64 vertex contacts of the plane-flex pair (no selection
    of 50); the same contacts and qacc."""
    xml = flex.cloth_on_plane(count=8, spacing=0.04)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    for _ in range(80):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon == 64
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    act = np.asarray(d.contact.active)
    assert sorted(np.asarray(d.contact.vert)[act, 1].tolist()) == sorted(mjd.contact.vert[:, 1].tolist())
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=FWD_RTOL, atol=1e-8)


# a flexcomp's edge equality and an <equality> section written before and after the worldbody
_EQ_ORDER = """<mujoco>{before}<worldbody>
  <body><joint name="a" type="slide"/><geom size=".1"/></body>
  <body pos="1 0 0"><joint name="b" type="slide"/><geom size=".1"/></body>
  <flexcomp name="f" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" pos="0 0 1"><edge equality="true"/></flexcomp>
  </worldbody>{after}</mujoco>"""
_EQ_SECTION = '<equality><joint joint1="a" joint2="b" solref=".03 1"/></equality>'


@pytest.mark.parametrize("where", ["before", "after"])
def test_flexcomp_equalities_follow_the_equality_section(where):
    """MuJoCo 4.0 appends a flexcomp's edge equality after the <equality> section's constraints wherever the
    section stands (MuJoCo's gripper_2d.xml: a joint equality, then two flex equalities)."""
    xml = _EQ_ORDER.format(**{where: _EQ_SECTION, ("after" if where == "before" else "before"): ""})
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    np.testing.assert_array_equal(mjm.eq_type, [mujoco.mjtEq.mjEQ_JOINT, mujoco.mjtEq.mjEQ_FLEX])
    assert oracle.compare_models(m, mjm) == []


# A plain <flex> over the user's own bodies, whose slide joints are damped (MuJoCo's bag.xml string): allowed, as in
# MuJoCo 4.0 (which refuses joint damping only on the vertex bodies a flexcomp makes, e.g. from a default class).
USER_BODIES = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    {bodies}
  </worldbody>
  <deformable>
    <flex name="string" dim="1" radius="0.01" body="a b c" vertex="0 0 0  0 0 0  0 0 0" element="0 1  1 2">
      <edge stiffness="30" damping="0.05"/>
      <contact contype="0" conaffinity="0"/>
    </flex>
  </deformable>
</mujoco>
"""
_BODY = ('<body name="{n}" pos="{x} 0 1"><joint type="slide" axis="1 0 0" damping="0.2"/>'
         '<joint type="slide" axis="0 0 1" damping="0.3"/><geom size=".01" mass=".02" contype="0" conaffinity="0"/>'
         '</body>')  # fmt: skip


def test_joint_damping_on_user_flex_bodies_as_in_mujoco():
    """Damped joints on a plain <flex>'s bodies load and step as MuJoCo's (Euler's implicit damping, edge springs);
    on a flexcomp's own vertex bodies (default-class damping) both refuse them."""
    xml = USER_BODIES.format(bodies="".join(_BODY.format(n=n, x=x) for n, x in (("a", 0), ("b", 0.1), ("c", 0.2))))
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert np.asarray(m.dof_damping).tolist() == mjm.dof_damping.tolist()
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = 0.02 * np.arange(mjm.nq)
    mjd.qvel[:] = 0.3 * np.cos(np.arange(mjm.nv))
    d0 = mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())
    oracle.check_steps(m, mjm, mjd, d0, 20, ("qpos", "qvel", "qfrc_damper"), TRAJ_ATOL)
    comp = ('<mujoco><default><joint damping="0.3"/></default><worldbody><flexcomp name="g" type="grid" '
            'count="3 1 1" spacing=".1 .1 .1" dim="1" radius=".01"/></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(ValueError, match="cannot have joint damping"):
        mujoco.MjModel.from_xml_string(comp)
    with pytest.raises(MJCFError, match="cannot have joint damping"):
        mjx_lite.load_mjcf_string(comp)
