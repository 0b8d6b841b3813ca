"""Flex elements against sphere, capsule and box geoms (MuJoCo 4.0's mj_collideGeomElem) against MuJoCo 4.0: contact
fields (elem, dist, pos, frame, parameters), constraint rows and qacc at touching states, 100-step trajectories,
gradients; refusals of the geom types and flex dims not implemented."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.mjcf.spec import MJCFUnsupportedError
from mjx_lite.models import flex
from mjx_lite.pipeline import constraint

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


def _compare(m, mjm, mjd, d, qacc_atol=FWD_ATOL):
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
        np.testing.assert_allclose(c[f][mine].reshape(mjd.ncon, -1), getattr(mjd.contact, f)[theirs].reshape(
            mjd.ncon, -1), rtol=0, atol=CONTACT_ATOL, err_msg=f)  # fmt: skip
    live = np.asarray(d.efc_mask)
    assert int(live.sum()) == mjd.nefc
    J = np.asarray(constraint.efc_j_dense(m, d))[live]
    Jmj = np.zeros((mjd.nefc, mjm.nv))
    if mujoco.mj_isSparse(mjm):
        mujoco.mju_sparse2dense(Jmj, mjd.efc_J, mjd.efc_J_rownnz, mjd.efc_J_rowadr, mjd.efc_J_colind)
    else:
        Jmj[:] = mjd.efc_J.reshape(mjd.nefc, mjm.nv)
    rows = np.lexsort(np.round(J, 9).T[::-1])  # the rows in another order than MuJoCo's: sorted by their values
    rows_mj = np.lexsort(np.round(Jmj, 9).T[::-1])
    np.testing.assert_allclose(J[rows], Jmj[rows_mj], rtol=FWD_RTOL, atol=FWD_ATOL, err_msg="efc_J")
    for f in ("efc_pos", "efc_R", "efc_aref"):
        np.testing.assert_allclose(np.asarray(getattr(d, f))[live][rows], getattr(mjd, f)[rows_mj], rtol=FWD_RTOL,
                                   atol=FWD_ATOL, err_msg=f)  # fmt: skip
    np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=FWD_RTOL, atol=qacc_atol, err_msg="qacc")


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
    ('dim="2"', '<geom type="cylinder" size=".1 .1" pos="0 0 -1"/>', "cylinder geoms"),
    ('dim="2"', '<geom type="ellipsoid" size=".1 .1 .2" pos="0 0 -1"/>', "ellipsoid geoms"),
    ('dim="3"', '<geom type="sphere" size=".1" pos="0 0 -1"/>', "dim 3 flexes with sphere geoms"),
    ('dim="1"', '<geom type="capsule" size=".1 .1" pos="0 0 -1"/>', None),
    ('dim="2"', '<geom type="box" size=".1 .1 .1" pos="0 0 -1"/>', None),
])  # fmt: skip
def test_refusals_name_the_geom_type(attrs, geom, what):
    count = "3 1 1" if 'dim="1"' in attrs else "3 3 1"
    xml = (f'<mujoco><worldbody>{geom}<flexcomp name="f" count="{count}" spacing=".1 .1 .1" {attrs}>'
           '<contact selfcollide="none"/></flexcomp></worldbody></mujoco>')  # fmt: skip
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
    ("sphere", 2, False, 0.12, 60, "", False), ("box", 1, True, 0.12, 60, "", False),
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
    mjd = mujoco.MjData(mjm)
    d = mjx_lite.make_data(m)

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=100)[0]

    d = roll(d)
    ncon = 0
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
        ncon = max(ncon, mjd.ncon)
    assert ncon > 0
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.qvel), mjd.qvel, atol=100 * TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, atol=TRAJ_ATOL)


@pytest.mark.slow
def test_grad_matches_central_differences(both):
    """d(mean flex height after 20 steps)/d(the sphere's contact time constant), from a state in contact: finite and
    equal to central differences; vmapped rollouts equal unbatched ones."""
    m, mjm = both
    mjd = _touching(mjm, 10)
    assert mjd.ncon > 0
    d0 = mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())
    g = int(np.nonzero(np.asarray(m.geom_type) == 2)[0][0])

    def height(k):
        mm = m.replace(geom_solref=m.geom_solref.at[g, 0].set(k))
        d = jax.lax.scan(lambda d, _: (mjx_lite.step(mm, d), None), d0, None, length=20)[0]
        return jp.mean(d.flexvert_xpos[:, 2])

    value = 0.02
    f = jax.jit(height)
    grad = float(jax.jit(jax.grad(height))(value))
    h = 1e-4 * value
    fd = (float(f(value + h)) - float(f(value - h))) / (2 * h)
    assert np.isfinite(grad) and grad != 0
    np.testing.assert_allclose(grad, fd, rtol=1e-4, atol=1e-10)
    ks = jp.array([0.5 * value, value])
    np.testing.assert_allclose(np.asarray(jax.jit(jax.vmap(height))(ks)), [float(f(0.5 * value)), float(f(value))],
                               rtol=1e-12, atol=1e-12)  # fmt: skip


@pytest.mark.slow
def test_float32_finite(both):
    """float32 forward of the draped cloth and rope at a touching state: finite, MuJoCo's contact count."""
    m, mjm = both
    mjd = _touching(mjm, 0)
    def f32(x):
        return x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x

    m32, d32 = jax.tree.map(f32, m), jax.tree.map(f32, mjx_lite.make_data(m))
    d = jax.jit(mjx_lite.forward)(m32, d32.replace(qpos=mjd.qpos.astype(np.float32),
                                                   qvel=mjd.qvel.astype(np.float32)))  # fmt: skip
    assert d.qacc.dtype == jp.float32 and np.all(np.isfinite(np.asarray(d.qacc)))
    assert int(np.asarray(d.contact.active).sum()) == mjd.ncon
