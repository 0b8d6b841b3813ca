"""<flexcomp> types beyond the grid (circle, square, disc, box, cylinder, ellipsoid, direct) against MuJoCo 4.0:
the generated points and elements, vertex bodies, pins and every compiled field (tests/oracle.compare_models), and
mj_forward (qacc, passive forces, contacts) on one small scene of each kind; the types still refused, by name."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests import oracle

FWD_RTOL, FWD_ATOL = 1e-9, 1e-9  # forward quantities at one state (float64, different operation order)
NOCON = '<contact contype="0" conaffinity="0"/>'


def _scene(flexcomp: str, plane: bool = False, euler: str = "10 20 30") -> str:
    floor = '<geom type="plane" size="1 1 .1"/>' if plane else ""
    return (f'<mujoco><option timestep="0.002"/><worldbody>{floor}<body name="b" pos=".1 .2 .5" euler="{euler}">'
            f'{flexcomp}</body></worldbody></mujoco>')  # fmt: skip


def _fc(attrs: str, kids: str = NOCON) -> str:
    return f'<flexcomp name="f" {attrs} mass=".3" radius=".01">{kids}</flexcomp>'


# compiled-field cases: every generated type in the dims MuJoCo makes of it, posed, scaled and pinned
COMPILE = {
    "circle": _fc('type="circle" dim="1" count="7 1 1" spacing=".05 .05 .05" pos=".1 0 0"',
                  NOCON + '<edge stiffness="20" damping=".1"/><pin id="2"/>'),
    "circle_dim2": _fc('type="circle" dim="2" count="3 4 1" spacing=".05 .05 .05"', NOCON + '<edge equality="true"/>'),
    "square": _fc('type="square" dim="1" count="4 3 1" spacing=".05 .06 .05" euler="0 0 30"',
                  NOCON + '<edge equality="true"/><pin range="0 2"/>'),
    "disc": _fc('type="disc" count="5 5 1" spacing=".05 .05 .05"',
                NOCON + '<elasticity young="1e4" poisson=".3" thickness=".01" elastic2d="both"/>'),
    "disc_even": _fc('type="disc" count="4 6 1" spacing=".05 .04 .05"', NOCON + '<edge equality="true"/>'),
    "box2": _fc('type="box" dim="2" count="3 4 3" spacing=".05 .06 .07"', NOCON + '<edge equality="true"/>'),
    "box3": _fc('type="box" dim="3" count="3 3 4" spacing=".05 .05 .05" euler="10 0 -20"',
                NOCON + '<elasticity young="1e4" poisson=".2" damping=".01"/><pin id="3"/>'),
    "cylinder2": _fc('type="cylinder" dim="2" count="4 4 3" spacing=".05 .05 .05"', NOCON + '<edge equality="true"/>'),
    "cylinder3": _fc('type="cylinder" dim="3" count="4 5 2" spacing=".05 .05 .05"',
                     NOCON + '<elasticity young="1e4" poisson=".3"/>'),
    "ellipsoid2": _fc('type="ellipsoid" dim="2" count="4 3 4" spacing=".05 .06 .05"',
                      NOCON + '<edge equality="true"/><pin id="0 1"/>'),
    "ellipsoid3": _fc('type="ellipsoid" dim="3" count="3 4 3" spacing=".05 .05 .05"',
                      NOCON + '<elasticity young="1e4" poisson=".3"/>'),
    # direct: unused points (1 and 5) dropped after pinning, scale, a pinned point kept on the parent body
    "direct1": _fc('type="direct" dim="1" point="0 0 0  9 9 9  .1 0 0  .2 .05 0  .3 0 .02  7 7 7" '
                   'element="0 2 2 3 3 4" scale="1 2 1"', NOCON + '<edge stiffness="30"/><pin id="0"/>'),
    "direct2": _fc('type="direct" dim="2" point="0 0 0  .1 0 0  0 .1 0  .1 .1 .01  5 5 5" element="0 1 2 1 3 2" '
                   'pos="0 0 .1"',
                   NOCON + '<elasticity young="1e3" poisson=".1" thickness=".01" elastic2d="stretch"/>'),
    "direct3": _fc('type="direct" dim="3" point="0 0 0  .1 0 0  0 .1 0  0 0 .1  .1 .1 .1" element="0 1 2 3 1 2 3 4"',
                   NOCON + '<elasticity young="1e3" poisson=".25"/><pin id="4"/>'),
}  # fmt: skip

# forward scenes (the physics mjx_lite simulates): cloths on a plane, soft bodies with elasticity on a plane, a ring
_DROP = '<contact selfcollide="none"/>'
FORWARD = {
    "disc_on_plane": (_fc('type="disc" count="4 4 1" spacing=".05 .05 .05" pos="0 0 -.485"',
                          _DROP + '<edge equality="true" damping=".01"/>'), True),
    "box3_on_plane": (_fc('type="box" dim="3" count="3 3 3" spacing=".05 .05 .05" pos="0 0 -.44"',
                          _DROP + '<elasticity young="5e3" poisson=".3" damping=".002"/>'), True),
    "ellipsoid2_on_plane": (_fc('type="ellipsoid" dim="2" count="3 3 3" spacing=".05 .05 .05" pos="0 0 -.435"',
                                _DROP + '<edge equality="true"/>'), True),
    "cylinder3": (COMPILE["cylinder3"], False),
    "circle": (COMPILE["circle"], False),
    "direct3": (COMPILE["direct3"], False),
}  # fmt: skip


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


# the bent disc's curved-reference bending coefficients (zero for a flat cloth) are round-off of the frame's rotation
# (MuJoCo: 7e-10 against entries of 500): its body turns about z only, which keeps the cloth exactly flat
EULER = {"disc": "0 0 30"}


@pytest.mark.parametrize("name", list(COMPILE))
def test_compiled_model_matches_mujoco(name):
    xml = _scene(COMPILE[name], euler=EULER.get(name, "10 20 30"))
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert m.nflex == 1 and m.nflexvert == mjm.nflexvert and m.nflexelem == mjm.nflexelem
    np.testing.assert_array_equal(np.asarray(m.flex_elem), mjm.flex_elem)
    np.testing.assert_array_equal(np.asarray(m.flex_vertbodyid), mjm.flex_vertbodyid)
    assert oracle.compare_models(m, mjm) == []


def _state(mjm, plane, seed):
    mjd = mujoco.MjData(mjm)
    if plane:  # a state with contacts, from MuJoCo's own fall
        for _ in range(40 + 10 * seed):
            mujoco.mj_step(mjm, mjd)
        return mjd.qpos.copy(), mjd.qvel.copy()
    rng = np.random.default_rng(seed)
    return mjm.qpos0 + 0.01 * rng.standard_normal(mjm.nq), 0.3 * rng.standard_normal(mjm.nv)


@pytest.mark.parametrize("name", list(FORWARD))
def test_forward_matches_mujoco(fwd, name):
    flexcomp, plane = FORWARD[name]
    xml = _scene(flexcomp, plane, euler="5 3 0" if plane else "10 20 30")  # (plane scenes: nearly level)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert oracle.compare_models(m, mjm) == []
    for seed in range(2):
        qpos, qvel = _state(mjm, plane, seed)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
        for f in ("flexvert_xpos", "flexedge_length", "qfrc_spring", "qfrc_damper", "qfrc_passive", "qacc_smooth",
                  "qacc", "qfrc_constraint"):  # fmt: skip
            np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=FWD_RTOL, atol=FWD_ATOL,
                                       err_msg=f)  # fmt: skip
        act = np.asarray(d.contact.active)
        assert int(act.sum()) == mjd.ncon
        if plane:
            assert mjd.ncon > 0, "the scene should have contacts"
            order = np.argsort(np.asarray(d.contact.vert)[act, 1])
            theirs = np.argsort(mjd.contact.vert[:, 1])
            np.testing.assert_array_equal(np.asarray(d.contact.vert)[act][order], mjd.contact.vert[theirs])
            for f in ("dist", "pos", "frame"):
                a = np.asarray(getattr(d.contact, f))[act][order].reshape(mjd.ncon, -1)
                np.testing.assert_allclose(a, getattr(mjd.contact, f)[theirs].reshape(mjd.ncon, -1), rtol=FWD_RTOL,
                                           atol=FWD_ATOL, err_msg=f)  # fmt: skip


@pytest.mark.parametrize("attrs,what", [
    ('type="mesh" file="x.obj" dim="2"', "type='mesh'"),
    ('type="gmsh" file="x.msh" dim="3"', "type='gmsh'"),
    ('type="box" dim="1" count="3 3 3" spacing=".05 .05 .05"', "type='box'"),
    ('type="ellipsoid" dim="2" count="3 3 1" spacing=".05 .05 .05"', "count below 2"),
    ('type="direct" dim="2" point="0 0 0 1 0 0 0 1 0" element="0 1 2" cellcount="1 1 1"', "cellcount"),
])  # fmt: skip
def test_refusals_name_the_feature(attrs, what):
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(_scene(_fc(attrs)))


@pytest.mark.parametrize("attrs,kids", [
    ('type="direct" dim="2" point="0 0 0 1 0 0 0 1" element="0 1 2"', NOCON),
    ('type="direct" dim="2" point="0 0 0 1 0 0 0 1 0" element="0 1 3"', NOCON),
    ('type="direct" dim="2" point="0 0 0 1 0 0 0 1 0" element="0 1"', NOCON),
    ('type="direct" dim="2"', NOCON),
    ('type="disc" count="3 3 1" spacing=".05 .05 .05"', NOCON + '<pin grid="0 0"/>'),
    ('type="box" dim="2" count="3 3 3" spacing=".01 .05 .05"', NOCON),
    ('type="grid" dim="3" count="3 3 1" spacing=".05 .05 .05"', NOCON),  # (no elements)
])  # fmt: skip
def test_errors_as_in_mujoco(attrs, kids):
    xml = _scene(_fc(attrs, kids))
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError):
        mjx_lite.load_mjcf_string(xml)
