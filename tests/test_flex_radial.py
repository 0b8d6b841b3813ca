"""<flexcomp dof="radial"> against MuJoCo 4.0 in float64: the first point (the centre) is always pinned to the parent,
every other point's body gets one slide joint along its position in the parent's frame (mjcf/flexcomp.py). Compiled
fields of every kind we simulate (grid, ellipsoid, box, direct; dims 1-3; posed, pinned), MuJoCo's two radial
examples, the load errors MuJoCo gives (a count below 2 of a dim-3 radial flexcomp, a point at the parent's origin),
the refusal of an elastic dim-1 radial or 2d flexcomp (MuJoCo 4.0 gives it no twist joints), and the dynamics of a
radial soft ball dropped on a plane: contacts, rows and qacc at MuJoCo's states, a trajectory, a gradient."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import oracle
from tests.test_flex_geom import _compare
from tests.test_flex_interp import _example

_BODY = """<mujoco><option timestep="0.001" tolerance="1e-15" iterations="200" ls_iterations="50"/>
<worldbody><geom type="plane" size="1 1 .1" euler="5 -3 0"/>
<body name="b" pos="0 0 .2" euler="10 20 30">{joint}<geom size=".02" contype="0" conaffinity="0"/>
<flexcomp name="f" {attrs} radius=".005" mass="1" dof="radial">{kids}</flexcomp></body></worldbody></mujoco>"""
_EDGE = '<edge equality="true" damping=".05"/><contact selfcollide="none"/>'
KINDS = {
    "ellipsoid3": 'type="ellipsoid" dim="3" count="3 3 3" spacing=".06 .06 .06"',
    "sphere2": 'type="ellipsoid" dim="2" count="4 4 4" spacing=".06 .06 .06"',
    "box3": 'type="box" dim="3" count="3 3 3" spacing=".06 .06 .06"',
    "grid1": 'type="grid" dim="1" count="4 1 1" spacing=".06 .06 .06"',
    "grid2": 'type="grid" dim="2" count="3 4 1" spacing=".06 .06 .06"',  # (no point at the origin)
    "posed": 'type="ellipsoid" dim="3" count="3 3 3" spacing=".06 .06 .06" pos=".1 0 .05" euler="10 20 30"',
    "direct": 'type="direct" dim="2" point="0 0 0  .1 0 0  0 .1 0  .1 .1 .05" element="0 1 2  1 3 2"',
}
# contacts, rows, qacc at one state; 100-step trajectory. Measured (/tmp/flex38d/radial_dyn.py, 3 states): contacts
# 1e-16, efc_J 1.8e-15, efc_aref 3.8e-13, qacc 5.8e-13 at |qacc| 29 (the same formulas in another order)
FWD_ATOL = 1e-10
TRAJ_ATOL = 1e-9


def _xml(kind, joint="<freejoint/>", kids=_EDGE):
    return _BODY.format(attrs=KINDS.get(kind, kind), joint=joint, kids=kids)


def test_compiled_models_match_mujoco():
    """Every kind: MuJoCo's bodies, one slide joint per unpinned point along its direction from the parent's origin
    (unit axes), the flex's vertices (point 0 on the parent), every compiled field; also with pins."""
    cases = [_xml(k) for k in KINDS]
    cases.append(_xml("sphere2", kids=_EDGE + '<pin id="3 5"/>'))
    for xml in cases:
        mjm, m = mujoco.MjModel.from_xml_string(xml), mjx_lite.load_mjcf_string(xml)
        assert oracle.compare_models(m, mjm) == [], xml
        slides = np.asarray(m.jnt_type) == 2
        vb = np.asarray(m.flex_vertbodyid)
        assert vb[0] == mjm.body("b").id  # (the centre: pinned)
        np.testing.assert_allclose(np.linalg.norm(np.asarray(m.jnt_axis)[slides], axis=1), 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize(("kind", "what"), [
    ('type="ellipsoid" dim="3" count="3 1 3" spacing=".06 .06 .06"', "Count too small"),
    ('type="grid" dim="2" count="3 3 1" spacing=".06 .06 .06"', "axis too small"),  # (point 4 at the origin)
])  # fmt: skip
def test_errors_as_in_mujoco(kind, what):
    xml = _xml(kind)
    with pytest.raises(ValueError, match=what):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match=what):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.parametrize("dof", ["radial", "2d"])
def test_elastic_rod_without_twist_refused(dof):
    """An elastic dim-1 flexcomp with dof radial or 2d: MuJoCo 4.0 loads it without twist joints (a rod without
    them, as an elastic 1D <flex>, which mjx_lite refuses too); refused by name."""
    xml = _xml("grid1", joint="", kids='<elasticity young="1e5"/><contact selfcollide="none"/>')
    xml = xml.replace('dof="radial"', f'dof="{dof}"')
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert mjm.nplastic == 0 and not any("twist" in mjm.joint(j).name for j in range(mjm.njnt))
    with pytest.raises(MJCFUnsupportedError, match=f"elastic dim=1 <flexcomp dof='{dof}'>"):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.parametrize("name", ["sphere_radial", "softbox"])
def test_mujoco_examples_compile_as_mujoco(tmp_path, name):
    """MuJoCo's radial examples (an 8x8x8 ellipsoid of 296 slide joints, a 7x7x7 box): every compiled field."""
    path = _example(tmp_path, name)
    assert oracle.compare_models(mjx_lite.load_mjcf(path), mujoco.MjModel.from_xml_path(path)) == []


@pytest.fixture(scope="module")
def ball():
    xml = _xml("ellipsoid3")
    return mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)


def _mj_state(mjm, steps):
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _data(m, mjd):
    return mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())


# slow: a forward program of the 32-dof flex compiles in ~10 s of CPU at the tests' optimisation level; the compiled
# fields (above) are what dof="radial" changes, the dynamics of slide joints and flexes are the other flex tests'
@pytest.mark.slow
@pytest.mark.parametrize("steps", [200, 400])
def test_forward_matches_mujoco(ball, steps):
    """The radial ball at its first touch (step 200) and resting (400): contacts, rows and qacc of mj_forward."""
    m, mjm = ball
    mjd = _mj_state(mjm, steps)
    assert mjd.ncon >= 3
    d = jax.jit(mjx_lite.forward)(m, _data(m, mjd))
    _compare(m, mjm, mjd, d, FWD_ATOL, FWD_ATOL, 0.0, FWD_ATOL)


@pytest.mark.slow
def test_trajectory_matches_mujoco(ball):
    """300 steps from MuJoCo's step 100 (the fall, the impact, the bounce): qpos, qvel."""
    m, mjm = ball
    mjd = _mj_state(mjm, 100)
    oracle.check_steps(m, mjm, mjd, _data(m, mjd), 300, ("qpos", "qvel"), TRAJ_ATOL)
    assert mjd.ncon >= 3


@pytest.mark.slow
def test_rollout_gradient_matches_central_differences(ball):
    """d(mean vertex height after 20 steps)/d(edge damping) from the first touch: finite, equal to central
    differences, batched equal to unbatched (oracle.check_rollout_grad)."""
    m, mjm = ball
    d0 = _data(m, _mj_state(mjm, 200))
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(flex_edgedamping=m.flex_edgedamping * k), 1.0)
