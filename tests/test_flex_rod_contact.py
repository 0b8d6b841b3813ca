"""Contacts of elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with twist joints) against MuJoCo in float64: the
compiled model, contacts (pos, frame, dist), efc_J rows with the lever-arm coupling into the twist joints and the
element's rotation (mjx_lite/pipeline/rod_contact.py), qacc at rest and at random states, a 100-step trajectory,
gradients; refusals of what is not implemented."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFUnsupportedError
from tests import oracle
from tests.test_flex_geom import CURVED_ROWS_RTOL, GJK_ATOL, GJK_QACC_ATOL, GJK_ROWS_ATOL, _compare, _converged

# Two tiny rods in one model (one compile): "r" (4 edges) draped over a capsule (condim 6), a box (condim 4) and a
# sphere; "p" (2 edges) resting on the plane (vertex contacts). The rods do not collide with each other (contype 1,
# conaffinity 2; the geoms contype 2, conaffinity 1). GJK: a cylinder, a mesh box and an ellipsoid in their places.
PRIMITIVE = """
    <geom type="capsule" size="0.03 0.2" pos="0.03 0 0.1" euler="90 0 0" condim="6" friction="0.8 0.02 0.01"/>
    <geom type="box" size="0.03 0.2 0.02" pos="0.2 0 0.118" euler="0 0 5" condim="4"/>
    <geom type="sphere" size="0.03" pos="-0.18 0 0.1"/>"""
GJK = """
    <geom type="cylinder" size="0.03 0.2" pos="0.03 0 0.1" euler="90 0 0" condim="6" friction="0.8 0.02 0.01"/>
    <geom type="mesh" mesh="box" pos="0.2 0 0.118" euler="0 0 5" condim="4"/>
    <geom type="ellipsoid" size="0.03 0.05 0.03" pos="-0.18 0 0.1" euler="0 0 20" condim="6"
          friction="0.8 0.02 0.01"/>"""
BOX_MESH = """<asset><mesh name="box" vertex="-.03 -.2 -.02  .03 -.2 -.02  -.03 .2 -.02  .03 .2 -.02  -.03 -.2 .02
  .03 -.2 .02  -.03 .2 .02  .03 .2 .02"/></asset>"""
ROD = """
<mujoco>
  <option timestep="0.001" gravity="0 0 -9.81" cone="{cone}" tolerance="1e-15" iterations="200" ls_iterations="50"
          {jac}/>
  {asset}
  <default><geom contype="2" conaffinity="1"/></default>
  <worldbody>
    <geom type="plane" size="2 2 .1"/>{geoms}
    <flexcomp name="r" type="grid" dim="1" count="5 1 1" spacing="0.1 0.1 0.1" radius="0.01" mass="0.5"
              pos="0.02 0 0.138">
      <elasticity young="1e6" damping="0.01"/>
      <contact condim="6" selfcollide="none" contype="1" conaffinity="2"/>
    </flexcomp>
    <flexcomp name="p" type="grid" dim="1" count="3 1 1" spacing="0.1 0.1 0.1" radius="0.01" mass="0.5"
              pos="1 0 0.008" euler="0 0 30">
      <elasticity young="1e5"/>
      <contact condim="3" selfcollide="none" contype="1" conaffinity="2"/>
      {pin}
    </flexcomp>
  </worldbody>
</mujoco>
"""


def rod(cone="elliptic", pin="", jac="", gjk=False):
    return ROD.format(cone=cone, pin=pin, jac=jac, geoms=GJK if gjk else PRIMITIVE, asset=BOX_MESH if gjk else "")


CONTACT_ATOL = 1e-12  # contact dist / pos / frame (float64; the collision formulas of flex elements)
FWD_RTOL, FWD_ATOL = 1e-9, 1e-9  # efc_J, efc_pos, efc_R, efc_aref at one state
# qacc: the rows' inputs agree to ~1e-13 (efc_J 7e-15), but the Newton solution's stopping point differs (efc_force
# to ~5e-9 relative with elliptic condim-6 rows whose R reaches 5e7), and the twist dofs' tiny polar inertia
# (m r^2 / 2 ~ 1e-6) amplifies it in qacc (|qacc| up to ~4e3)
QACC_ATOL = 1e-5
TRAJ_ATOL = 1e-10  # qpos / qvel / plastic after 100 steps (measured: 5e-15)
# GJK geoms (cylinder, mesh, ellipsoid; MuJoCo run to convergence): tests/test_flex_geom.py's GJK tolerances. Measured
# (the three slow cases): frame 8.6e-7, pos 2.5e-8, dist 5.8e-14; efc_J 8.6e-6 (the twist columns take the normal's
# error times the lever arm over |e|), efc_aref 6.2e-5 and qacc 9.5e-4 at |qacc| 1.8e3, both within the relative
# tolerance; a zero lever arm fails them (efc_J off by 0.09)
GJK_TOLS = {"qacc_atol": GJK_QACC_ATOL, "contact_atol": GJK_ATOL, "fwd_rtol": CURVED_ROWS_RTOL,
            "fwd_atol": GJK_ROWS_ATOL}  # fmt: skip


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


class _Models(dict):
    """(mjx_lite, mujoco) models by cone ("elliptic", "pyramidal") or ("gjk", cone), loaded on first use."""

    def __missing__(self, key):
        gjk, cone = key if isinstance(key, tuple) else (None, key)
        xml = rod(cone, gjk=gjk is not None)
        mjm = mujoco.MjModel.from_xml_string(xml)
        self[key] = mjx_lite.load_mjcf_string(xml), _converged(mjm) if gjk else mjm
        return self[key]


@pytest.fixture(scope="module")
def models():
    return _Models()


def _state(mjm, seed):
    """A random state near qpos0 (vertices moved ~2 mm, twist angles ~0.3 rad, velocities ~0.1): the rods touch."""
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0 + 0.002 * rng.standard_normal(mjm.nq)
    twist = [mjm.jnt_qposadr[j] for j in range(mjm.njnt) if "_twist" in mjm.joint(j).name]
    qpos[twist] = 0.3 * rng.standard_normal(len(twist))
    return qpos, 0.1 * rng.standard_normal(mjm.nv)


def test_compiled_model_matches_mujoco(models):
    m, mjm = models["elliptic"]
    assert (m.nbody, m.njnt, m.nq, m.nplastic) == (mjm.nbody, mjm.njnt, mjm.nq, mjm.nplastic)
    assert oracle.compare_models(m, mjm) == []


# default: MuJoCo's own state after one step from a random state (the rods' reference frames in plastic are set: the
# rows follow the transported frames, pipeline/rod_contact.py); slow: at rest, and random states with unset frames,
# and the GJK geoms (a second model: another compile)
@pytest.mark.parametrize(("cone", "seed", "steps"), [
    ("elliptic", 7, 1), pytest.param("elliptic", None, 0, marks=pytest.mark.slow),
    pytest.param("elliptic", 1, 0, marks=pytest.mark.slow), pytest.param("pyramidal", 2, 0, marks=pytest.mark.slow),
    pytest.param(("gjk", "elliptic"), 7, 1, marks=pytest.mark.slow, id="gjk-elliptic-7-1"),
    pytest.param(("gjk", "elliptic"), None, 0, marks=pytest.mark.slow, id="gjk-elliptic-None-0"),
    pytest.param(("gjk", "pyramidal"), 2, 0, marks=pytest.mark.slow, id="gjk-pyramidal-2-0"),
])  # fmt: skip
def test_contacts_rows_and_qacc_match_mujoco(fwd, models, cone, seed, steps):
    """At qpos0 (at rest), at random bent, twisted, moving states and after a step: every contact (vertex-plane,
    edge-capsule, edge-box, edge-sphere; or edge-cylinder, edge-mesh, edge-ellipsoid), the rows (the tangent and
    angular rows couple the twist dofs and the edge's rotation) and qacc."""
    m, mjm = models[cone]
    mjd = mujoco.MjData(mjm)
    if seed is not None:
        mjd.qpos[:], mjd.qvel[:] = _state(mjm, seed)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert (np.abs(mjd.plastic).max() > 0) == (steps > 0)
    assert {int(c.geom[0]) for c in mjd.contact[: mjd.ncon]} == {0, 1, 2, 3}  # every geom touches
    d = fwd(m, oracle.data_with_state(m, mjm, mjd))
    tols = {"qacc_atol": QACC_ATOL, "contact_atol": CONTACT_ATOL, "fwd_rtol": FWD_RTOL, "fwd_atol": FWD_ATOL}
    _compare(m, mjm, mjd, d, **(GJK_TOLS if isinstance(cone, tuple) else tols))
    twist = [mjm.jnt_dofadr[j] for j in range(mjm.njnt) if "_twist" in mjm.joint(j).name]
    assert np.abs(mjd.efc_J.reshape(mjd.nefc, mjm.nv)[:, twist]).max() > 1e-3  # the twist coupling is exercised


@pytest.mark.slow
def test_sparse_jacobian_matches_dense(fwd, models):
    """The sparse efc_J layout (the rod's extra columns appended to each row) gives the dense layout's qacc."""
    m, mjm = models["elliptic"]
    qpos, qvel = _state(mjm, 3)
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
    ms = mjx_lite.configure(m, efc_jacobian="sparse")
    ds = fwd(ms, mjx_lite.make_data(ms).replace(qpos=qpos, qvel=qvel))
    np.testing.assert_allclose(np.asarray(ds.qacc), np.asarray(d.qacc), rtol=FWD_RTOL, atol=QACC_ATOL)


@jax.jit
def _roll10(m, d):
    return jax.lax.fori_loop(0, 10, lambda i, d: mjx_lite.step(m, d), d)


# slow: ~18 s warm / ~60 s cold (a step program); the rows it integrates are test_contacts_rows_and_qacc_match_mujoco's
@pytest.mark.slow
def test_trajectory_matches_mujoco(models):
    """100 Euler steps of both rods from a random state (sliding, rolling and twisting on the geoms): qpos, qvel and
    the rods' state in plastic against mj_step."""
    m, mjm = models["pyramidal"]
    qpos, qvel = _state(mjm, 7)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    d = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)
    for k in range(10):
        d = _roll10(m, d)
        for _ in range(10):
            mujoco.mj_step(mjm, mjd)
        assert mjd.ncon > 0
        for f in ("qpos", "qvel", "plastic"):
            np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=0, atol=TRAJ_ATOL,
                                       err_msg=f"{f} after {10 * (k + 1)} steps")  # fmt: skip


@pytest.mark.slow
def test_rollout_gradient_matches_central_differences(models):
    """d(mean vertex height after 20 steps)/d(friction scale of every geom): finite, equal to central differences,
    batched equal to unbatched (oracle.check_rollout_grad); the friction acts through the twist-coupled rows."""
    m, mjm = models["pyramidal"]
    qpos, qvel = _state(mjm, 3)
    d0 = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_friction=m.geom_friction * k), 1.0)


SMALL = """
<mujoco>
  <asset><hfield name="h" nrow="3" ncol="3" size="1 1 .1 .1" elevation="0 0 0 0 0 0 0 0 0"/></asset>
  <worldbody>
    <geom type="{geom}" {attrs}/>
    <body name="b" pos="0 0 0.1">{joint}
      <flexcomp name="r" type="grid" dim="1" count="3 1 1" spacing="0.1 0.1 0.1" radius="0.01" mass="0.5">
        <elasticity young="1e5"/>
        <contact {contact}/>{pin}
      </flexcomp>
    </body>
  </worldbody>
</mujoco>
"""


def small(geom="plane", attrs='size="1 1 .1"', joint="", contact='selfcollide="none"', pin=""):
    return SMALL.format(geom=geom, attrs=attrs, joint=joint, contact=contact, pin=pin)


@pytest.mark.parametrize(("xml", "what"), [
    (small(contact=""), "self-collisions of an elastic rod"),
])  # fmt: skip
def test_refused_by_name(xml, what):
    mujoco.MjModel.from_xml_string(xml)  # MuJoCo loads it
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(xml)


def test_static_parent_loads():
    """A rod under a static body (its vertices' own slide joints), or pinned to it, collides: no refusal."""
    assert mjx_lite.load_mjcf_string(small()).nflex == 1
    assert mjx_lite.load_mjcf_string(small(pin='<pin id="0"/>')).nflex == 1
    assert mjx_lite.load_mjcf_string(small("cylinder", 'size=".05 .2"')).nflex == 1  # (GJK geoms: checked above)
    assert mjx_lite.load_mjcf_string(small("hfield", 'hfield="h"')).nflex == 1  # (tests/test_rod_hfield.py)
    moving = small(joint='<joint type="hinge"/><geom size=".01" contype="0" conaffinity="0"/>', pin='<pin id="0"/>')
    assert mjx_lite.load_mjcf_string(moving).nflex == 1  # (on a moving body: tests/test_rod_moving.py)
