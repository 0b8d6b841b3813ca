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
    # a quat as written: MuJoCo rotates by it unnormalised (|q|^2 scales the points) and accepts a zero one
    "quat_unnormalised": _fc('type="grid" dim="2" count="3 4 1" spacing=".05 .05 .05" quat="1 .6 -.3 .2" '
                             'pos=".1 0 .05"', NOCON + '<edge equality="true"/><pin id="1"/>'),
    # curved references: 2-D bending of a box surface (folded 90 degrees at its edges)
    "box2_bend": _fc('type="box" dim="2" count="3 3 3" spacing=".05 .05 .05"',
                     NOCON + '<elasticity young="1e3" poisson=".2" thickness=".01" elastic2d="bend" damping=".01"/>'),
    "quat_zero": _fc('type="grid" dim="1" count="4 1 1" spacing=".05 .05 .05" quat="0 0 0 0"',
                     NOCON + '<edge stiffness="10"/>'),
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
    "disc_bending": (COMPILE["disc"], False),
    "circle": (COMPILE["circle"], False),
    "direct3": (COMPILE["direct3"], False),
    "quat_unnormalised": (COMPILE["quat_unnormalised"], False),
    "box2_bend": (COMPILE["box2_bend"], False),
}  # fmt: skip


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


# the bent disc's curved-reference bending coefficients (zero for a flat cloth) are round-off of the frame's rotation
# (MuJoCo: 7e-10 against entries of 500): its body turns about z only, which keeps the cloth exactly flat
EULER = {"disc": "0 0 30", "disc_bending": "0 0 30"}


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


def _forward_both(fwd, m, mjm, qpos, qvel, fields):
    """MuJoCo's and our forward at (qpos, qvel); `fields` equal to FWD_RTOL/FWD_ATOL. Returns (ours, MuJoCo's)."""
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    mujoco.mj_forward(mjm, mjd)
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
    for f in fields:
        np.testing.assert_allclose(np.asarray(getattr(d, f)), getattr(mjd, f), rtol=FWD_RTOL, atol=FWD_ATOL, err_msg=f)
    return d, mjd


# slow (the same runtime code as a default case; their generated points and fields stay default in
# test_compiled_model_matches_mujoco): disc_on_plane, ellipsoid2_on_plane and quat_unnormalised (a dim-2 flex with
# edge equalities, on a plane: tests/test_flex.py::test_forward_matches_mujoco[drop], which checks more fields),
# box3_on_plane, cylinder3 and direct3 (dim-3 elasticity on a plane: test_flex.py's [box]; a pinned vertex: circle),
# disc_bending (2-D stretch and bending: test_deformable_flex_matches_mujoco[cloth]; curved references: box2_bend)
_FWD_SLOW = ("disc_on_plane", "box3_on_plane", "ellipsoid2_on_plane", "cylinder3", "direct3", "quat_unnormalised",
             "disc_bending")  # fmt: skip


@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in _FWD_SLOW else k for k in FORWARD])
def test_forward_matches_mujoco(fwd, name):
    flexcomp, plane = FORWARD[name]
    euler = "5 3 0" if plane else EULER.get(name, "10 20 30")  # (plane scenes: nearly level)
    xml = _scene(flexcomp, plane, euler=euler)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert oracle.compare_models(m, mjm) == []
    for seed in range(2):
        fields = ("flexvert_xpos", "flexedge_length", "qfrc_spring", "qfrc_damper", "qfrc_passive", "qacc_smooth",
                  "qacc", "qfrc_constraint")  # fmt: skip
        d, mjd = _forward_both(fwd, m, mjm, *_state(mjm, plane, seed), fields)
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


@pytest.mark.parametrize("attrs,kids,what", [
    ('type="box" dim="1" count="3 3 3" spacing=".05 .05 .05"', NOCON, "type='box'"),
    ('type="ellipsoid" dim="2" count="3 3 1" spacing=".05 .05 .05"', NOCON, "count below 2"),
    ('type="direct" dim="2" point="0 0 0 1 0 0 0 1 0" element="0 1 2" cellcount="1 1 1"', NOCON, "cellcount"),
])  # fmt: skip
def test_refusals_name_the_feature(attrs, kids, what):
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(_scene(_fc(attrs, kids)))


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


# <deformable><flex>: vertices on bodies the model writes (slide-jointed points, free bodies, a hinged bar with
# vertex offsets, the world), elements given; edge springs, elasticity, an <equality><flex> on a deformable flex
def _points(n, joints="slide", z=0.3, flat=False):
    out = []
    for i in range(n):
        j = ("".join(f'<joint type="slide" axis="{a}"/>' for a in ("1 0 0", "0 1 0", "0 0 1")) if joints == "slide"
             else "<freejoint/>")  # fmt: skip
        out.append(f'<body name="p{i}" pos="{0.1 * (i % 3)} {0.1 * (i // 3)} {z + (0 if flat else 0.02) * (i % 2)}">{j}'
                   '<inertial pos="0 0 0" mass=".05" diaginertia="1e-5 1e-5 1e-5"/></body>')  # fmt: skip
    return "".join(out)


_BAR = (
    '<body name="bar" pos="0 0 .6"><joint name="swing" type="hinge" axis="1 0 0"/>'
    '<geom type="capsule" fromto="-.2 0 0 .2 0 0" size=".01" mass=".1" contype="0" conaffinity="0"/></body>'
)
DEFORMABLE = {
    "cloth": ('<flex name="c" dim="2" body="p0 p1 p2 p3 p4 p5" element="0 1 4 0 4 3 1 2 5 1 5 4" radius=".01">'
              '<elasticity young="3e3" poisson=".2" thickness=".01" elastic2d="both" damping=".01"/>' + NOCON
              + '</flex>', _points(6, flat=True), ""),
    "cloth_curved": ('<flex name="c" dim="2" body="p0 p1 p2 p3 p4 p5" element="0 1 4 0 4 3 1 2 5 1 5 4" radius=".01">'
                     '<elasticity young="3e3" poisson=".2" thickness=".01" elastic2d="bend"/>' + NOCON + '</flex>',
                     _points(6), ""),  # (the points zigzag in z: every hinge folded)
    "rope_on_bar": ('<flex name="r" dim="1" body="bar bar p0 p1 p2" vertex="-.2 0 0 .2 0 0 0 0 0 0 0 0 0 0 0" '
                    'element="0 2 2 3 3 4 4 1"><edge stiffness="30" damping=".05"/>' + NOCON + '</flex>',
                    _BAR + _points(3, z=0.45), ""),
    "tets_free": ('<flex name="t" dim="3" body="p0 p1 p2 p3 world" vertex="0 0 0 0 0 0 0 0 0 0 0 0 .05 .05 .2" '
                  'element="0 1 2 3 1 2 3 4" radius="0"><elasticity young="2e3" poisson=".3" damping=".01"/>'
                  + NOCON + '</flex>', _points(4, joints="free"), ""),
    "equality": ('<flex name="q" dim="2" body="p0 p1 p2 p3" element="0 1 3 0 3 2"><edge damping=".02"/>' + NOCON
                 + '</flex>', _points(4), '<equality><flex flex="q" solref=".01 1"/></equality>'),
    "on_plane": ('<flex name="d" dim="2" body="p0 p1 p2 p3 p4 p5" element="0 1 4 0 4 3 1 2 5 1 5 4">'
                 '<contact selfcollide="none"/><edge damping=".02"/></flex>',
                 '<geom type="plane" size="1 1 .1"/>' + _points(6, z=0.012), '<equality><flex flex="d"/></equality>'),
}  # fmt: skip


def _deformable(name: str) -> str:
    flex, world, extra = DEFORMABLE[name]
    flexcomp = _fc(
        'type="grid" dim="1" count="3 1 1" spacing=".05 .05 .05" pos="0 .5 .5"',
        NOCON + '<edge stiffness="5"/><pin id="0"/>',
    )  # a flexcomp after it (flex ids: deformable first)
    return (f'<mujoco><option timestep="0.002"/><deformable>{flex}</deformable><worldbody>{world}{flexcomp}'
            f'</worldbody>{extra}</mujoco>')  # fmt: skip


# slow: cloth_curved (curved-reference bending: test_forward_matches_mujoco[box2_bend]; a deformable cloth on slide
# bodies: cloth) and equality (an <equality><flex> on a deformable flex: on_plane)
@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in ("cloth_curved", "equality") else k
                                  for k in DEFORMABLE])  # fmt: skip
def test_deformable_flex_matches_mujoco(fwd, name):
    xml = _deformable(name)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    assert m.nflex == 2
    assert oracle.compare_models(m, mjm) == []
    plane = name == "on_plane"
    for seed in range(2):
        d, mjd = _forward_both(
            fwd,
            m,
            mjm,
            *_state(mjm, plane, seed),
            ("flexvert_xpos", "flexedge_length", "qfrc_passive", "qacc", "qfrc_constraint"),
        )
        assert int(np.asarray(d.contact.active).sum()) == mjd.ncon
        assert mjd.ncon > 0 if plane else mjd.ncon == 0


@pytest.mark.parametrize("flex,what", [
    ('<flex name="c" dim="1" body="p0 p1" element="0 1"><elasticity young="1e3"/></flex>', "elastic 1D"),
    ('<flex name="c" dim="2" body="p0 p1 p2" element="0 1 2" node="p0"/>', "interpolated"),
    ('<flex name="c" dim="2" body="p0 p1 p2" element="0 1 2"><plugin plugin="mujoco.elasticity.shell"/></flex>',
     "plugin"),
])  # fmt: skip
def test_deformable_refusals_name_the_feature(flex, what):
    xml = f"<mujoco><deformable>{flex}</deformable><worldbody>{_points(6)}</worldbody></mujoco>"
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(xml)


def test_attach_of_a_model_with_a_deformable_flex_is_refused(tmp_path):
    child = f"<mujoco><deformable>{DEFORMABLE['equality'][0]}</deformable><worldbody>{_points(4)}</worldbody></mujoco>"
    (tmp_path / "child.xml").write_text(child)
    (tmp_path / "scene.xml").write_text('<mujoco><asset><model name="c" file="child.xml"/></asset><worldbody>'
                                        '<attach model="c" prefix="c-"/></worldbody></mujoco>')  # fmt: skip
    mujoco.MjModel.from_xml_path(str(tmp_path / "scene.xml"))  # (MuJoCo attaches it)
    with pytest.raises(MJCFUnsupportedError, match="deformable"):
        mjx_lite.load_mjcf(str(tmp_path / "scene.xml"))


def test_deformable_equality_and_elasticity_is_an_error_as_in_mujoco():
    flex = ('<flex name="q" dim="2" body="p0 p1 p2 p3" element="0 1 3 0 3 2"><elasticity young="1e3" poisson=".2" '
            'thickness=".01" elastic2d="stretch"/>' + NOCON + "</flex>")  # fmt: skip
    xml = (f"<mujoco><deformable>{flex}</deformable><worldbody>{_points(4, flat=True)}</worldbody>"
           '<equality><flex flex="q"/></equality></mujoco>')  # fmt: skip
    with pytest.raises(ValueError, match="cannot both be present"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="cannot both be present"):
        mjx_lite.load_mjcf_string(xml)


def test_appearance_matches_mujoco():
    """flex_group, flex_rgba and flex_matid (MuJoCo 4.0 stores the material per element) of a <deformable><flex>
    and a <flexcomp>, each with and without a material."""
    for mat_flex, mat_comp in (("red", ""), ("", "blue")):
        flex = (f'<flex name="c" dim="2" body="p0 p1 p2" element="0 1 2" rgba=".1 .2 .3 .4" group="3" '
                f'material="{mat_flex}">{NOCON}</flex>')  # fmt: skip
        comp = _fc('type="grid" dim="2" count="3 3 1" spacing=".05 .05 .05" rgba=".7 .1 .1 1" group="2" '
                   f'material="{mat_comp}"', NOCON + '<edge equality="true"/>')  # fmt: skip
        xml = ('<mujoco><asset><material name="red" rgba="1 0 0 1"/><material name="blue" rgba="0 0 1 1"/></asset>'
               f'<deformable>{flex}</deformable><worldbody>{_points(3, flat=True)}<body name="b">{comp}</body>'
               "</worldbody></mujoco>")  # fmt: skip
        m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
        assert oracle.compare_models(m, mjm) == []
        np.testing.assert_array_equal(np.asarray(m.flex_matid), mjm.flex_matid)
