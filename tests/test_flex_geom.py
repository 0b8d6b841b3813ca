"""Flex elements against sphere, capsule and box geoms (MuJoCo 4.0's mj_collideGeomElem) against MuJoCo 4.0: contact
fields (elem, dist, pos, frame, parameters), constraint rows and qacc at touching states, 100-step trajectories,
gradients; refusals of the geom types and flex dims not implemented."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

import mjx_lite
from mjx_lite.mjcf.spec import MJCFUnsupportedError
from mjx_lite.models import flex
from mjx_lite.pipeline import constraint
from tests import oracle

# A 4x4 cloth lying on a sphere on a free body (sphere-triangle) and a 6-point rope lying on a fixed box (capsule-box),
# both touching from the start, in one model (one compile for the not-slow test).
BOTH = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <body name="ball"><freejoint/><geom type="sphere" size=".1"/></body>
    <geom type="box" size=".1 .1 .1" pos=".4 0 0" euler="0 0 10"/>
    <flexcomp name="cloth" type="grid" count="4 4 1" spacing=".05 .05 .05" pos=".01 .02 .1" euler="5 3 0" dim="2"
              mass=".2" radius=".005">
      <edge equality="true" damping=".01"/><contact selfcollide="none"/>
    </flexcomp>
    <flexcomp name="rope" type="grid" count="6 1 1" spacing=".05 .05 .05" pos=".41 .02 .104" euler="5 3 0" dim="1"
              mass=".1" radius=".005">
      <edge equality="true" damping=".01"/><contact selfcollide="none"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""
CONTACT_ATOL = 1e-12  # contact dist/pos/frame/parameters (float64; the same formulas in another operation order)
FWD_RTOL, FWD_ATOL = 1e-9, 1e-9  # efc rows and qacc at one state
TRAJ_ATOL = 1e-6  # qpos / flex vertices after 100 steps (round-off grows through the constraint solver)
# box-triangle makes one contact per (triangle, vertex): a vertex shared by 6 triangles makes 6 equal rows, so the
# contact forces are not unique and Newton's stopping point (tolerance 1e-15 here) decides qacc to about 1e-7
DEGENERATE_QACC_ATOL = 1e-6


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


def _touching(mjm, steps):
    """MuJoCo's own state after `steps` steps of the drop, forwarded."""
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _order(geom, elem, pos):
    """Contact order by (geom, element, position): MuJoCo's contact order is its broadphase's."""
    return np.lexsort((np.round(pos[:, 2], 9), np.round(pos[:, 1], 9), np.round(pos[:, 0], 9), elem[:, 1], geom[:, 0]))


def _compare(m, mjm, mjd, d, qacc_atol=FWD_ATOL, contact_atol=CONTACT_ATOL, fwd_rtol=FWD_RTOL, fwd_atol=FWD_ATOL):
    act = np.asarray(d.contact.active)
    assert mjd.ncon > 0 and int(act.sum()) == mjd.ncon
    c = {f: np.asarray(getattr(d.contact, f))[act] for f in ("geom", "flex", "elem", "vert", "dim", "dist", "pos",
                                                              "frame", "friction", "solref", "solimp",
                                                              "includemargin")}  # fmt: skip
    mine = _order(c["geom"], c["elem"], c["pos"])
    theirs = _order(mjd.contact.geom, mjd.contact.elem, mjd.contact.pos)
    for f in ("geom", "flex", "elem", "vert", "dim"):
        np.testing.assert_array_equal(c[f][mine], getattr(mjd.contact, f)[theirs], err_msg=f)
    for f in ("dist", "pos", "frame", "friction", "solref", "solimp", "includemargin"):
        atol = contact_atol.get(f, CONTACT_ATOL) if isinstance(contact_atol, dict) else contact_atol
        np.testing.assert_allclose(c[f][mine].reshape(mjd.ncon, -1), getattr(mjd.contact, f)[theirs].reshape(
            mjd.ncon, -1), rtol=0, atol=atol, err_msg=f)  # fmt: skip
    live = np.asarray(d.efc_mask)
    assert int(live.sum()) == mjd.nefc
    J = np.asarray(constraint.efc_j_dense(m, d))[live]
    Jmj = np.zeros((mjd.nefc, mjm.nv))
    if mujoco.mj_isSparse(mjm):
        mujoco.mju_sparse2dense(Jmj, mjd.efc_J, mjd.efc_J_rownnz, mjd.efc_J_rowadr, mjd.efc_J_colind)
    else:
        Jmj[:] = mjd.efc_J.reshape(mjd.nefc, mjm.nv)
    # the rows in another order than MuJoCo's: paired by the nearest (J, efc_pos)
    rows_mj, rows = linear_sum_assignment(cdist(np.c_[Jmj, mjd.efc_pos], np.c_[J, np.asarray(d.efc_pos)[live]]))
    np.testing.assert_allclose(J[rows], Jmj[rows_mj], rtol=fwd_rtol, atol=fwd_atol, err_msg="efc_J")
    for f in ("efc_pos", "efc_R", "efc_aref"):
        np.testing.assert_allclose(np.asarray(getattr(d, f))[live][rows], getattr(mjd, f)[rows_mj], rtol=fwd_rtol,
                                   atol=fwd_atol, err_msg=f)  # fmt: skip
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=fwd_rtol, atol=qacc_atol, err_msg="qacc")


@pytest.fixture(scope="module")
def both():
    return mjx_lite.load_mjcf_string(BOTH), mujoco.MjModel.from_xml_string(BOTH)


def test_contacts_rows_and_qacc_match_mujoco(fwd, both):
    m, mjm = both
    mjd = _touching(mjm, 0)
    assert set(mjd.contact.flex[:, 1]) == {0, 1} and mjd.ncon > 10
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    _compare(m, mjm, mjd, d)


@pytest.mark.parametrize("attrs,geom,what", [
    ('dim="2"', '<geom type="hfield" hfield="h" pos="0 0 -1"/>', None),
    ('dim="3"', '<geom type="hfield" hfield="h" pos="0 0 -1"/>', None),
    ('dim="1"', '<geom type="cylinder" size=".1 .1" pos="0 0 -1"/>', None),
    ('dim="2"', '<geom type="ellipsoid" size=".1 .1 .2" pos="0 0 -1"/>', None),
    ('dim="3"', '<geom type="sphere" size=".1" pos="0 0 -1"/>', None),
])  # fmt: skip
def test_refusals_name_the_geom_type(attrs, geom, what):
    count = "3 1 1" if 'dim="1"' in attrs else "3 3 1" if 'dim="2"' in attrs else "2 2 2"
    xml = (f'<mujoco><asset><hfield name="h" nrow="2" ncol="2" size="1 1 .1 .1"/></asset><worldbody>{geom}'
           f'<flexcomp name="f" count="{count}" spacing=".1 .1 .1" {attrs}><contact selfcollide="none"/></flexcomp>'
           '</worldbody></mujoco>')  # fmt: skip
    if what is None:
        assert mjx_lite.load_mjcf_string(xml).nflex == 1
        return
    with pytest.raises(MJCFUnsupportedError, match=what):
        mjx_lite.load_mjcf_string(xml)


@pytest.mark.slow
@pytest.mark.parametrize("geom,dim,free,height,steps,option,sparse", [
    ("capsule", 1, False, 0.052, 0, "", False), ("capsule", 2, True, 0.052, 0, 'cone="elliptic"', False),
    ("sphere", 1, True, 0.1, 0, "", True),
    ("box", 2, False, 0.1, 0, 'tolerance="1e-15" iterations="1000" ls_iterations="100"', False),
    ("sphere", 2, False, 0.12, 60, "", False), ("box", 1, True, 0.12, 110, "", False),
])  # fmt: skip
def test_more_shapes_match_mujoco(fwd, geom, dim, free, height, steps, option, sparse):
    """Capsule-capsule and capsule-triangle, sphere-capsule, box-triangle, sphere-triangle and capsule-box (at
    states from MuJoCo's own fall); the sparse efc_J layout gives the same qacc."""
    xml = flex.draped(geom, dim, free=free, height=height, option=option)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = _touching(mjm, steps)
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    _compare(m, mjm, mjd, d, DEGENERATE_QACC_ATOL if (geom, dim) == ("box", 2) else FWD_ATOL)
    if not sparse:
        return
    ms = mjx_lite.configure(m, efc_jacobian="sparse")
    ds = jax.jit(mjx_lite.forward)(ms, mjx_lite.make_data(ms).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    np.testing.assert_allclose(np.asarray(ds.qacc), np.asarray(d.qacc), rtol=FWD_RTOL, atol=FWD_ATOL)


@pytest.mark.slow
def test_trajectory_matches_mujoco(both):
    """100 steps from rest (the cloth rolls the free sphere, the rope slides off the box) equal MuJoCo's."""
    m, mjm = both
    d, mjd = _hundred_steps(m, mjm)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=100 * TRAJ_ATOL)


def _hundred_steps(m, mjm):
    """100 steps from rest of ours and of MuJoCo (which must make contacts on the way): qpos and the flex vertex
    positions equal to TRAJ_ATOL; returns both final Data for further checks."""
    mjd = mujoco.MjData(mjm)

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=100)[0]

    d = roll(mjx_lite.make_data(m))
    ncon = 0
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
        ncon = max(ncon, mjd.ncon)
    assert ncon > 0
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, atol=TRAJ_ATOL)
    return d, mjd


@pytest.mark.slow
def test_grad_matches_central_differences(both):
    """d(mean flex height after 20 steps)/d(the sphere's contact time constant), from a state in contact: finite and
    equal to central differences; vmapped rollouts equal unbatched ones."""
    m, mjm = both
    mjd = _touching(mjm, 10)
    assert mjd.ncon > 0
    d0 = mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())
    g = int(np.nonzero(np.asarray(m.geom_type) == 2)[0][0])
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_solref=m.geom_solref.at[g, 0].set(k)), 0.02)


@pytest.mark.slow
def test_float32_finite(both):
    """float32 forward of the draped cloth and rope at a touching state: finite, MuJoCo's contact count."""
    m, mjm = both
    mjd = _touching(mjm, 0)
    d = oracle.float32_forward(m, mjd.qpos, mjd.qvel)
    assert d.qacc.dtype == jp.float32 and np.all(np.isfinite(np.asarray(d.qacc)))
    assert int(np.asarray(d.contact.active).sum()) == mjd.ncon


# Convex geoms (MuJoCo 4.0's mjc_ConvexElem, one GJK/EPA contact per element): a 3x3 cloth on a fixed ellipsoid, and a
# 3x3x3 soft cube (48 tetrahedra, 8 of them inner: flex_elemlayer 1, skipped) on a fixed sphere, kept apart by their
# contype/conaffinity bits; one model, one compile for the not-slow test.
CONVEX = """<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="ellipsoid" size=".1 .08 .06" euler="0 0 20" contype="1" conaffinity="1"/>
    <flexcomp name="cloth" type="grid" count="3 3 1" spacing=".05 .05 .05" pos=".01 .02 .064" euler="5 3 0" dim="2"
              mass=".2" radius=".005">
      <edge equality="true" damping=".01"/><contact contype="1" conaffinity="1" selfcollide="none"/>
    </flexcomp>
    <geom type="sphere" size=".1" pos=".5 0 0" contype="2" conaffinity="2"/>
    <flexcomp name="cube" type="grid" count="3 3 3" spacing=".05 .05 .05" pos=".51 .02 .155" euler="5 3 0" dim="3"
              mass=".2" radius=".005">
      <edge equality="true" damping=".01"/><contact contype="2" conaffinity="2" selfcollide="none"/>
    </flexcomp>
  </worldbody>
</mujoco>
"""
# MuJoCo runs to convergence (as tests/test_collision.py's CCD_CONVERGED): its EPA then ends within 1e-13 of the depth
CCD_CONVERGED = {"ccd_tolerance": 1e-13, "ccd_iterations": 2000}
# curved geoms: MuJoCo's EPA stops on the value of the support function, flat (quadratic) about its minimum, so a
# tolerance tol leaves its normal undetermined by ~sqrt(2 tol / r) (2e-6 for tol = 1e-13 and the ellipsoid's radius
# of curvature r >= .05) and the contact point by that times the penetration; ours is refined to round-off
# (collision/refine.py). Measured on the cloth: normal 3e-7, pos 3e-8, dist 2e-14.
CURVED_ATOL = {"dist": 1e-12, "pos": 1e-7, "frame": 1e-6}
# efc rows inherit the normals' error (a row is a normal times vertex weights; efc_aref the velocity along it: measured
# 1.8e-6 relative); qacc amplifies it through the stiff contact impedance of the light cloth (1.2e-5 at |qacc| <= 14)
CURVED_ROWS_RTOL, CURVED_ROWS_ATOL, CURVED_QACC_ATOL = 1e-5, 1e-6, 5e-5
def _converged(mjm):
    for k, v in CCD_CONVERGED.items():
        setattr(mjm.opt, k, v)
    return mjm


@pytest.fixture(scope="module")
def convex():
    return mjx_lite.load_mjcf_string(CONVEX), mujoco.MjModel.from_xml_string(CONVEX)


def test_convex_geoms_match_mujoco(fwd, convex):
    """Cloth triangles on an ellipsoid (GJK/EPA, refined normal) and tetrahedra on a sphere: the compiled element
    layers, the contacts (one per element; the inner tetrahedra skipped), constraint rows and qacc of mj_forward."""
    m, mjm = convex
    assert oracle.compare_models(m, mjm) == []
    assert set(np.asarray(m.flex_elemlayer)) == {0, 1}
    mjd = _touching(mjm, 30)
    mujoco.mj_forward(_converged(mjm), mjd)
    assert set(mjd.contact.flex[:mjd.ncon, 1]) == {0, 1}
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    _compare(m, mjm, mjd, d, CURVED_QACC_ATOL, CURVED_ATOL, CURVED_ROWS_RTOL, CURVED_ROWS_ATOL)
    # the tetrahedra on the sphere (a point against a polytope: EPA ends on a face of their Minkowski difference, exact
    # in both) to round-off
    act = np.asarray(d.contact.active) & (np.asarray(d.contact.flex)[:, 1] == 1)
    theirs = mjd.contact.flex[:mjd.ncon, 1] == 1
    for f in ("dist", "pos", "frame"):
        ours, mj = np.asarray(getattr(d.contact, f))[act], getattr(mjd.contact, f)[theirs]
        i, j = np.argsort(np.asarray(d.contact.elem)[act, 1]), np.argsort(mjd.contact.elem[theirs, 1])
        np.testing.assert_allclose(ours[i].reshape(len(i), -1), mj[j].reshape(len(j), -1), atol=CONTACT_ATOL, err_msg=f)


_CONVEX_SHAPES = {"ellipsoid": 'type="ellipsoid" size=".1 .08 .06" euler="0 0 20"',
                  "cylinder": 'type="cylinder" size=".08 .06" euler="0 20 0"',
                  "cylinder_side": 'type="cylinder" size=".06 .12" euler="0 90 10"',
                  "mesh": 'type="mesh" mesh="hull" euler="10 0 15"',
                  "sphere": 'type="sphere" size=".1"', "capsule": 'type="capsule" size=".05 .12" euler="0 90 0"',
                  "box": 'type="box" size=".1 .1 .1" euler="0 0 10"'}  # fmt: skip


def _convex_scene(geom, dim):
    """A rope (6 points), cloth (4x4) or soft cube (3x3x3) dropped on a fixed geom of `_CONVEX_SHAPES`."""
    count, height = {1: ("6 1 1", .12), 2: ("4 4 1", .12), 3: ("3 3 3", .15)}[dim]
    return f"""<mujoco><option timestep="0.002"/>
  <asset><mesh name="hull" vertex=".1 0 0  -.1 0 0  0 .09 0  0 -.09 0  0 0 .07  0 0 -.07  .03 .03 .05"/></asset>
  <worldbody><geom {_CONVEX_SHAPES[geom]}/>
    <flexcomp name="f" type="grid" count="{count}" spacing=".05 .05 .05" pos=".01 .02 {height}" euler="5 3 0"
              dim="{dim}" mass=".2" radius=".005">
      <edge equality="true" damping=".01"/><contact selfcollide="none"/>
    </flexcomp>
  </worldbody>
</mujoco>"""


# GJK/EPA pairs at MuJoCo's falling states (faces and edges resting on faces: the witness points of such contacts are
# not unique, each solver's EPA ends on its own; a rope on a cylinder's side: the normal as on the ellipsoid): measured
# dist 6e-14, pos 5e-8, frame 1.3e-6, qacc 2.6e-5 (the rope on the cylinder's side)
GJK_ATOL = {"dist": 1e-12, "pos": 1e-7, "frame": 3e-6}
# efc rows: efc_aref's velocity term takes the normals' 3e-6 times the vertex speeds (measured 3.7e-6)
GJK_ROWS_ATOL, GJK_QACC_ATOL = 1e-5, 1e-4


@pytest.mark.slow
@pytest.mark.parametrize("geom,dim", [
    ("ellipsoid", 1), ("cylinder", 1), ("cylinder_side", 1), ("mesh", 1), ("cylinder", 2), ("mesh", 2),
    ("ellipsoid", 3), ("cylinder", 3), ("mesh", 3), ("capsule", 3), ("box", 3),
])  # fmt: skip
def test_convex_shapes_match_mujoco(fwd, geom, dim):
    """Ropes, cloth and soft cubes on ellipsoids, cylinders (cap and side), a mesh, capsules and boxes, at states
    from MuJoCo's own fall: one contact per element as MuJoCo (run to convergence), rows and qacc of mj_forward."""
    xml = _convex_scene(geom, dim)
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = _touching(mjm, 60)
    mujoco.mj_forward(_converged(mjm), mjd)
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy()))
    _compare(m, mjm, mjd, d, GJK_QACC_ATOL, GJK_ATOL, CURVED_ROWS_RTOL, GJK_ROWS_ATOL)


@pytest.mark.slow
def test_convex_trajectory_and_grad(convex):
    """100 steps of the cloth on the ellipsoid and the soft cube on the sphere equal MuJoCo's (run to convergence) to
    TRAJ_ATOL; d(mean height after 20 steps)/d(the ellipsoid's contact time constant) equals central differences."""
    m, mjm = convex
    mjm = _converged(mujoco.MjModel.from_xml_string(CONVEX))
    _hundred_steps(m, mjm)
    mjd = _touching(mjm, 30)
    d0 = mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_solref=m.geom_solref.at[0, 0].set(k)), 0.02)
