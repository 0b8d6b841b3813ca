"""Interpolated flexes (<flexcomp dof="trilinear" | "quadratic">) against MuJoCo 4.0: node bodies and the flex_node*,
flex_cellnum, flex_vert0, flex_stiffness fields; vertex positions interpolated from the nodes, contacts of vertices
(planes) and elements (spheres, capsules) on the nodes' bodies, corotational cell elasticity, at states with contacts
and at rotated, deformed states; a 100-step trajectory, a rollout gradient, MuJoCo's trilinear.xml example; cut cells
(meshes that do not fill their cells: tetrahedra and closed surfaces, empty cells, MuJoCo's sphere_trilinear.xml); and
the refusals of what is not implemented (strain equalities, shells, open surfaces, quadratic cut
cells); flex-flex contacts of interpolated flexes in tests/test_flex_interp_pair.py."""

import os
import shutil

import jax
import mujoco
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import mjx_lite
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from mjx_lite.pipeline import constraint
from tests import oracle

_SCENE = """<mujoco><option timestep="0.001" solver="Newton" tolerance="1e-12" iterations="100" jacobian="dense"/>
<worldbody><geom type="plane" size="1 1 .1"/>{body}
<flexcomp type="grid" dim="3" radius=".01" name="b" {flex}>
<contact selfcollide="none"/>{kids}</flexcomp>{end}</worldbody></mujoco>"""
_BALL = '<body pos="0.05 0.02 0.35"><freejoint/><geom type="sphere" size=".06" mass="0.3"/></body>'
_ELASTIC = '<elasticity young="3e3" poisson="0.2" damping="0.01"/>'
# a 2x2x2 trilinear cube (one cell, 27 vertices) under a falling ball; a quadratic one (27 nodes) likewise;
# two trilinear cells; a trilinear cube pinned by four nodes to a hinged, rotated arm (node bodies on a moving parent)
MODELS = {
    "trilinear": _SCENE.format(body=_BALL, flex='count="3 3 3" spacing=".1 .1 .1" pos="0 0 .15" mass="2" '
                               'dof="trilinear"', kids=_ELASTIC, end=""),
    "quadratic": _SCENE.format(body=_BALL, flex='count="3 3 3" spacing=".1 .1 .1" pos="0 0 .15" mass="2" '
                               'dof="quadratic"', kids=_ELASTIC, end=""),
    "cells": _SCENE.format(body="", flex='count="5 3 3" spacing=".1 .1 .1" pos="0 0 .15" mass="2" dof="trilinear" '
                           'cellcount="2 1 1"', kids=_ELASTIC, end=""),
    "pinned": _SCENE.format(body='<body name="arm" pos="0 0 .4" euler="0 0 20"><joint type="hinge" axis="0 1 0"/>'
                            '<geom type="capsule" fromto="0 0 0 .2 0 0" size=".02" contype="0" conaffinity="0"/>',
                            flex='count="3 3 3" spacing=".1 .1 .1" pos=".3 0 -.25" mass="1" dof="trilinear"',
                            kids=_ELASTIC + '<pin id="0 1 2 3"/>', end="</body>"),
    # cut cells (MuJoCo 4.0's integration over the mesh volume, mjcf/flex_cells.py): a rotated grid (its tetrahedra
    # fill no cell); one turned by 45 degrees on 4 x 4 cells, its corner cells empty (their corner nodes pinned)
    "cut": _SCENE.format(body=_BALL, flex='count="3 3 3" spacing=".1 .1 .1" pos="0 0 .2" mass="2" dof="trilinear" '
                         'euler="10 20 30" cellcount="2 1 1"', kids=_ELASTIC, end=""),
    "empty": _SCENE.format(body=_BALL, flex='count="3 3 3" spacing=".1 .1 .1" pos="0 0 .15" mass="2" '
                           'dof="trilinear" euler="0 0 45" cellcount="4 4 1"', kids=_ELASTIC, end=""),
    # "quadratic" without the ball: its vertices on the plane (the quadratic node weights in the contact rows) and
    # its elasticity, the default forward test of the quadratic path (CI time: no element-sphere contacts)
    "quadratic_plane": _SCENE.format(body="", flex='count="3 3 3" spacing=".1 .1 .1" pos="0 0 .15" mass="2" '
                                     'dof="quadratic"', kids=_ELASTIC, end=""),
}  # fmt: skip
FWD_ATOL = 1e-9  # forward quantities at one state, relative to the field's scale (float64, other operation order)
TRAJ_ATOL = 1e-7  # qpos / flex vertices after 100 steps (round-off grows through contacts and the solver)
FALL_STEPS = 200  # MuJoCo steps from qpos0 to a state with contacts


@pytest.fixture(scope="module")
def models():
    return {k: (mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)) for k, xml in MODELS.items()}


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


def _fall(mjm, seed):
    """qpos, qvel after MuJoCo's own fall (contacts), with random velocities added."""
    mjd = mujoco.MjData(mjm)
    for _ in range(FALL_STEPS):
        mujoco.mj_step(mjm, mjd)
    return mjd.qpos.copy(), mjd.qvel + 0.1 * np.random.default_rng(seed).standard_normal(mjm.nv)


def _twist(mjm, seed):
    """qpos, qvel with the node bodies' nodes rotated as a whole (angles up to ~2 rad), displaced and lifted clear of
    the plane and the ball, random velocities: the corotational elasticity far from its reference (contacts of
    such strongly sheared quadratic elements differ from MuJoCo's by ~1e-5 in their node weights: not covered)."""
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0.copy()
    nb = [b for b in mjm.flex_nodebodyid if mjm.body_dofnum[b] == 3]
    p = mjm.body_pos[nb]
    Q = Rotation.from_rotvec(rng.normal(size=3) * (0.5 + seed)).as_matrix()
    c = p.mean(axis=0)
    new = c + (p - c) @ Q.T + 0.02 * rng.normal(size=p.shape) + [0.0, 0.0, 0.6]
    for i, b in enumerate(nb):
        a = mjm.jnt_qposadr[mjm.body_jntadr[b]]
        qpos[a : a + 3] = new[i] - p[i]
    return qpos, 0.3 * rng.normal(size=mjm.nv)


@pytest.mark.parametrize("name", list(MODELS))
def test_compiled_model_matches_mujoco(models, name):
    m, mjm = models[name]
    assert m.nflexnode == mjm.nflexnode > 0 and int(m.flex_interp[0]) == mjm.flex_interp[0] > 0
    assert oracle.compare_models(m, mjm) == []


def _compare(m, mjm, mjd, d):
    for f in ("flexvert_xpos", "qfrc_spring", "qfrc_damper", "qfrc_passive", "qacc_smooth", "qacc", "qfrc_constraint"):
        oracle.close(getattr(d, f), getattr(mjd, f), FWD_ATOL, f)
    assert int(np.asarray(d.contact.active).sum()) == mjd.ncon
    if mjd.nefc:
        r, c = oracle.match_rows(mjd, mjm, d)
        assert not mujoco.mj_isSparse(mjm)  # (match_rows reads MuJoCo's dense efc_J)
        Jm = mjd.efc_J.reshape(mjd.nefc, mjm.nv)
        oracle.close(np.asarray(constraint.efc_j_dense(m, d))[c], Jm[r], FWD_ATOL, "efc_J")
        for f in ("efc_pos", "efc_diagA", "efc_R", "efc_aref", "efc_force"):
            oracle.close(np.asarray(getattr(d, f))[c], getattr(mjd, f)[r], FWD_ATOL, f)


# slow: "trilinear" (one cell) and "cells" (two full cells) run the same trilinear forward as "empty" (trilinear cells,
# some empty, a ball on them, the plane), the default test of the trilinear path; "cut" likewise; "quadratic" (CI time:
# ~16 worker-s, the ball's element contacts): its quadratic interpolation, rows and elasticity stay default through
# "quadratic_plane", the ball's element contacts on interpolated flexes through "empty"
_FWD_SLOW = ("trilinear", "cells", "cut", "quadratic")


@pytest.mark.parametrize("state", [_fall, _twist])
@pytest.mark.parametrize("name", [pytest.param(k, marks=pytest.mark.slow) if k in _FWD_SLOW else k for k in MODELS])
def test_forward_matches_mujoco(models, fwd, name, state):
    """Vertex positions, elastic forces, contacts and their rows, qacc: after MuJoCo's fall (vertex-plane and
    element-geom contacts), and at two rotated, deformed states (the corotational elasticity)."""
    m, mjm = models[name]
    for seed in range(2):
        qpos, qvel = state(mjm, seed)
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        if state is _fall:
            assert mjd.ncon > 0
        d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
        _compare(m, mjm, mjd, d)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trilinear", "pinned", "cut", "empty"])
def test_trajectory_matches_mujoco(models, name):
    """100 steps from MuJoCo's fall (contacts on, cells deforming) equal MuJoCo's."""
    m, mjm = models[name]
    qpos, qvel = _fall(mjm, 3)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos, qvel

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=100)[0]

    d = roll(mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel))
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=100 * TRAJ_ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["trilinear", "cut"])
def test_rollout_gradient(models, name):
    """d(mean vertex height after 10 steps from a state with contacts)/d(stiffness scale) is finite, nonzero and
    equals central differences; vmapped rollouts equal unbatched ones."""
    m, mjm = models[name]
    qpos, qvel = _fall(mjm, 0)
    d0 = mjx_lite.make_data(m).replace(qpos=qpos, qvel=qvel)
    oracle.check_rollout_grad(m, d0, lambda m, s: m.replace(flex_stiffness=s * m.flex_stiffness), 1.0, steps=10)


def _example(tmp_path, name):
    """MuJoCo's model/flex/<name>.xml with its scene, in tmp_path, without the newer <contact internal> attribute
    (the example files come from a MuJoCo newer than 4.0)."""
    src = "/tmp/mjmodels/model/flex"
    if not os.path.exists(os.path.join(src, name + ".xml")):
        pytest.skip("MuJoCo's example models are not here")
    for f in (name + ".xml", "scene.xml"):
        with open(os.path.join(src, f)) as fh:
            text = fh.read()
        with open(tmp_path / f, "w") as fh:
            fh.write(text.replace(' internal="false"', "").replace(' internal="true"', ""))
    if os.path.isdir(os.path.join(src, "asset")):
        shutil.copytree(os.path.join(src, "asset"), tmp_path / "asset", dirs_exist_ok=True)
    return str(tmp_path / (name + ".xml"))


def _forward_after_mujoco_steps(m, mjm, steps):
    """MuJoCo's state after `steps` mj_steps (in contact): our forward there, its vertex positions, passive and
    constraint forces and qacc as MuJoCo's. Returns (mjd, d)."""
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 0
    d = jax.jit(mjx_lite.forward)(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos, qvel=mjd.qvel))
    for f in ("flexvert_xpos", "qfrc_passive", "qacc", "qfrc_constraint"):
        oracle.close(getattr(d, f), getattr(mjd, f), FWD_ATOL, f)
    return mjd, d


@pytest.mark.slow
def test_trilinear_example(tmp_path):
    """MuJoCo's trilinear.xml (an 8x8x8 grid on one trilinear cell, dropped on a mocap capsule): compiled fields, and
    forward where the cube lies on the capsule (element contacts), qacc and the flex contacts as MuJoCo's."""
    path = _example(tmp_path, "trilinear")
    mjm, m = mujoco.MjModel.from_xml_path(path), mjx_lite.load_mjcf(path)
    assert oracle.compare_models(m, mjm) == []
    mjd, d = _forward_after_mujoco_steps(m, mjm, 420)
    # the flex contacts (mjx_lite also lists the mocap capsule against the plane, two rows without dofs)
    act = np.asarray(d.contact.active) & (np.asarray(d.contact.flex)[:, 1] >= 0)
    ours = np.argsort(np.asarray(d.contact.elem)[act, 1])
    theirs = np.argsort(mjd.contact.elem[:, 1])
    np.testing.assert_array_equal(np.asarray(d.contact.elem)[act][ours], mjd.contact.elem[theirs])
    for f in ("dist", "pos", "frame"):
        oracle.close(np.asarray(getattr(d.contact, f))[act][ours].reshape(mjd.ncon, -1),
                     getattr(mjd.contact, f)[theirs].reshape(mjd.ncon, -1), FWD_ATOL, f)  # fmt: skip


@pytest.mark.slow
def test_quadratic_example_compiles_as_mujoco(tmp_path):
    path = _example(tmp_path, "quadratic")
    assert oracle.compare_models(mjx_lite.load_mjcf(path), mujoco.MjModel.from_xml_path(path)) == []


_PLAIN = '<contact selfcollide="none"/>'


def _direct(point, elem, dim, cell):
    return (f'<mujoco><worldbody><flexcomp type="direct" dim="{dim}" radius=".001" name="f" dof="trilinear" mass="1" '
            f'cellcount="{cell}" point="{" ".join(map(repr, np.ravel(point).tolist()))}" '
            f'element="{" ".join(map(str, np.ravel(elem)))}"><elasticity young="1e3" poisson="0.2"/>{_PLAIN}'
            "</flexcomp></worldbody></mujoco>")  # fmt: skip


_TET = np.array([[0.0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]) * [1.0, 2.0, 3.0]
_TET_FACES = [[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]]


def _cube_union():
    """An L-like union of four unit cubes (not star-shaped from its box's center): its points, tetrahedra and outward
    boundary triangles."""
    pid, tets = {}, []
    kuhn = [[0, 1, 3, 7], [0, 1, 5, 7], [0, 2, 3, 7], [0, 2, 6, 7], [0, 4, 5, 7], [0, 4, 6, 7]]
    for o in ([0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]):
        corners = [tuple(np.add(o, [i, j, k])) for i in range(2) for j in range(2) for k in range(2)]
        tets += [[pid.setdefault(corners[v], len(pid)) for v in t] for t in kuhn]
    point = np.array(list(pid), float)
    faces: dict = {}
    for t in tets:
        if np.linalg.det(point[t[1:]] - point[t[0]]) < 0:
            t = [t[0], t[2], t[1], t[3]]
        for f in ([t[0], t[2], t[1]], [t[0], t[1], t[3]], [t[0], t[3], t[2]], [t[1], t[2], t[3]]):
            faces.setdefault(tuple(sorted(f)), []).append(f)
    return point, np.array(tets), np.array([f[0] for f in faces.values() if len(f) == 1])


@pytest.mark.parametrize("case,cell", [("tet", "1 1 1"), ("tet", "3 2 1"), ("tet surface", "2 2 2"),
                                       ("union", "2 3 4"), ("union surface", "3 3 3")])  # fmt: skip
def test_cut_cells_compile_as_mujoco(case, cell):
    """Trilinear flexes whose mesh does not fill its cells (MuJoCo 4.0's integration of the cell stiffness and the
    node masses over the mesh volume; empty cells, their nodes pinned): a tetrahedron, a union of cubes, and the
    closed surfaces (dim 2) of both, on one and several cells."""
    if case.startswith("tet"):
        point, elem = _TET, [[0, 1, 2, 3]] if case == "tet" else _TET_FACES
    else:
        point, tets, faces = _cube_union()
        elem = tets if case == "union" else faces
    xml = _direct(point, elem, 2 if "surface" in case else 3, cell)
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert oracle.compare_models(mjx_lite.load_mjcf_string(xml), mjm) == []


def test_open_surface_refused():
    """A trilinear flexcomp of dim 2 whose triangles do not close a volume (MuJoCo's bunny.xml): refused by name."""
    xml = _direct(_TET, _TET_FACES[:3], 2, "1 1 1")
    mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFUnsupportedError, match="do not close a surface"):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.slow
def test_sphere_trilinear_example(tmp_path):
    """MuJoCo's sphere_trilinear.xml (tetrahedral ellipsoids on trilinear cells: cut cells) with one of its two
    spheres (flex-flex contacts are refused), solved to the optimum: compiled fields, and forward where the sphere
    first touches the slope."""
    path = _example(tmp_path, "sphere_trilinear")
    with open(path) as fh:
        text = fh.read()
    a = text.index('<flexcomp type="ellipsoid" count="8 8 8" spacing=".07 .07 .07" pos="-.5 .5 1"')
    with open(path, "w") as fh:
        text = text[:a] + text[text.index("</flexcomp>", a) + len("</flexcomp>") :]
        # (its CG at tolerance 1e-6 stops after 4 iterations, mjx_lite's CG elsewhere; EPA converged: the optimum)
        fh.write(text.replace('solver="CG" tolerance="1e-6"', 'solver="Newton" tolerance="1e-12" iterations="100" '
                              'ccd_tolerance="1e-13" ccd_iterations="2000"'))  # fmt: skip
    mjm, m = mujoco.MjModel.from_xml_path(path), mjx_lite.load_mjcf(path)
    assert oracle.compare_models(m, mjm) == []
    mjd = mujoco.MjData(mjm)
    while not mjd.ncon:  # (the first contacts: later the sphere lies face-down on the slope, where the point of a
        mujoco.mj_step(mjm, mjd)  # face-on-face contact is the collider's choice)
    mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon > 0
    d = jax.jit(mjx_lite.forward)(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos, qvel=mjd.qvel))
    for f in ("flexvert_xpos", "qfrc_spring", "qfrc_passive", "qacc", "qfrc_constraint"):
        oracle.close(getattr(d, f), getattr(mjd, f), FWD_ATOL, f)


ATOL_HOST = 1e-15  # the same steps in numpy and XLA: round-off only
ATOL_ROT = 1e-8  # mju_mat2Rot stops at |omega| < 1e-9: the rotation within ~2e-9 of the exact polar rotation


def test_cell_rotation_and_its_derivative_are_the_polar_rotations():
    """mat_to_rot (MuJoCo's iteration, stopping per cell) gives the polar rotation U V' of F = U S V' and its
    implicit derivative that rotation's (SVD, float64), at rotations up to 3 rad and deformations up to 30 %, one
    row degenerate-free; the iterate equals the host version (mat_to_rot_np) exactly."""
    from mjx_lite import math  # noqa: PLC0415
    from mjx_lite.pipeline import flex_interp  # noqa: PLC0415

    rng = np.random.default_rng(0)
    rots = Rotation.from_rotvec(rng.normal(size=(8, 3)) * np.linspace(0.0, 3.0, 8)[:, None]).as_matrix()
    F = jax.numpy.asarray(rots @ (np.eye(3) + np.linspace(0.01, 0.3, 8)[:, None, None] * rng.normal(size=(8, 3, 3))))
    q = jax.jit(flex_interp.mat_to_rot)(F)
    host = np.stack([flex_interp.mat_to_rot_np(np.asarray(f)) for f in F])
    np.testing.assert_allclose(np.asarray(q), host, rtol=0, atol=ATOL_HOST)

    def polar(F):
        u, _, vt = jax.numpy.linalg.svd(F)
        return u @ vt

    def ours(F):
        return math.quat_to_mat(flex_interp.mat_to_rot(F))

    # each side's value, JVP and gradient from one jitted program (op by op, every primitive compiled on its own)
    @jax.jit
    def value_jvp_grad(F, dF):
        out = []
        for fn in (ours, polar):
            out.append((fn(F), jax.jvp(fn, (F,), (dF,))[1], jax.grad(lambda F, fn=fn: jax.numpy.sum(fn(F) ** 3))(F)))
        return out

    dF = jax.numpy.asarray(rng.normal(size=F.shape))
    (r_ours, t_ours, g_ours), (r_polar, t_polar, g_polar) = value_jvp_grad(F, dF)
    np.testing.assert_allclose(np.asarray(r_ours), np.asarray(r_polar), rtol=0, atol=ATOL_ROT)
    np.testing.assert_allclose(np.asarray(t_ours), np.asarray(t_polar), rtol=0, atol=ATOL_ROT)
    np.testing.assert_allclose(np.asarray(g_ours), np.asarray(g_polar), rtol=0, atol=ATOL_ROT * 10)


_CLOTH_2D = """<mujoco><option timestep="0.001" solver="Newton" tolerance="1e-12" iterations="100" jacobian="dense"
 gravity="0 -9.81 0"/><worldbody><body name="ball" pos="0.05 0.45 0"><freejoint/><geom type="sphere" size=".05"/></body>
<body name="p" pos="0 0 0" euler="0 0 20"><flexcomp type="grid" dim="2" count="4 4 1" spacing=".1 .1 .1" radius=".01"
 name="c" dof="2d" mass="1" pos="0 .2 0"><edge equality="true"/><pin id="12 15"/>
<contact selfcollide="none"/></flexcomp></body></worldbody></mujoco>"""


def test_dof_2d_matches_mujoco():
    """<flexcomp dof="2d">: vertex bodies sliding along their parent's x and y only (a pinned cloth in its plane, a
    ball in it): compiled fields, and forward after MuJoCo's 300 steps (vertex-sphere contacts, edge equalities)."""
    mjm, m = mujoco.MjModel.from_xml_string(_CLOTH_2D), mjx_lite.load_mjcf_string(_CLOTH_2D)
    assert mjm.njnt == 1 + 2 * 14 and oracle.compare_models(m, mjm) == []
    _forward_after_mujoco_steps(m, mjm, 300)


@pytest.mark.parametrize("flex,kids,what", [
    ('dof="trilinear"', _PLAIN + '<edge equality="strain"/>', "strain constraints"),
    ('dof="trilinear"', _PLAIN + '<elasticity young="1e3" thickness=".01" elastic2d="stretch"/>', "shell mode"),
    ('dof="quadratic" euler="10 20 30"', _PLAIN, "cut-cell quadrature"),
    ('dof="trilinear"', "", "self-collisions of an interpolated flex"),
])  # fmt: skip
def test_refusals_name_the_feature(flex, kids, what):
    """What MuJoCo 4.0 loads and mjx_lite does not simulate is refused at load, by name."""
    attrs = 'type="grid" count="3 3 3" spacing=".1 .1 .1" dim="3" radius=".01" name="b" pos="0 0 1" '
    attrs = attrs.replace('count="3 3 3" ', "") if "count=" in flex else attrs
    attrs = attrs.replace('dim="3" ', "") if "dim=" in flex else attrs
    xml = f"<mujoco><worldbody><flexcomp {attrs}{flex}>{kids}</flexcomp></worldbody></mujoco>"
    mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.parametrize("flex", ['dim="2" count="3 3 1"', 'dim="1" count="4 1 1"'])
def test_flat_interpolated_flex_is_an_error_as_in_mujoco(flex):
    """The points of an interpolated flexcomp must span a volume (MuJoCo 4.0: "flex grid rotation R0 is not
    orthonormal")."""
    xml = (f'<mujoco><worldbody><flexcomp type="grid" spacing=".1 .1 .1" radius=".01" name="b" dof="trilinear" '
           f'{flex}><contact selfcollide="none"/></flexcomp></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(ValueError, match="not orthonormal"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="not orthonormal"):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.parametrize("integrator", ["implicit", "implicitfast"])
def test_implicit_elasticity_is_an_error_as_in_mujoco(integrator):
    xml = MODELS["trilinear"].replace('jacobian="dense"', f'jacobian="dense" integrator="{integrator}"')
    with pytest.raises(ValueError, match="no longer integrated implicitly"):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="no longer integrated implicitly"):
        mjx_lite.load_mjcf_string(xml)
