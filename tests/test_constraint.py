"""Oracle tests of the constraint rows (make_constraint) and of the full constraint solve against MuJoCo."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import constraint
from tests import oracle

# Row quantities are closed-form functions of the state: float64 round-off.
ROW_ATOL = 1e-8

# with a weld of two sites too (MuJoCo aligns the sites' frames: the identity relative rotation)
EQ_XML = (oracle.EVERY_ROW_XML
          .replace("{option}", '<option jacobian="dense" cone="{cone}" impratio="{impratio}"/>')
          .replace("{g_condim}", "{condim}")
          .replace('<connect site1="sa" site2="sb"/>',
                   '<connect site1="sa" site2="sb"/><weld site1="sa" site2="s2" torquescale="2"/>'))


def _state(mjm, seed):
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    mjd.qpos[:] = mjm.qpos0 + rng.normal(size=mjm.nq) * 0.1
    mjd.qpos[mjm.jnt_qposadr[5] + 2] = 0.08 + 0.02 * rng.random()  # box f sinks into the floor
    mjd.qpos[mjm.jnt_qposadr[6] + 2] = 0.09 + 0.02 * rng.random()  # sphere g touches
    mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.3
    mujoco.mj_normalizeQuat(mjm, mjd.qpos)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _ours(m, mjd):
    d = mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel))
    return _rows(m, d)


_rows = oracle.constraint_rows


_kbip = jax.jit(constraint.efc_kbip)

_SLOW = pytest.mark.slow


@pytest.mark.parametrize("cone,condim", [pytest.param("pyramidal", 1, marks=_SLOW), ("pyramidal", 3),
                                         pytest.param("pyramidal", 4, marks=_SLOW),
                                         pytest.param("elliptic", 3, marks=_SLOW), ("elliptic", 6)])  # fmt: skip
def test_rows_match_mujoco(cone, condim):
    mjm = mujoco.MjModel.from_xml_string(EQ_XML.format(cone=cone, condim=condim, impratio=2.0))
    m = oracle.model_from_mujoco(mjm)
    for seed in range(3):
        mjd = _state(mjm, seed)
        d = _ours(m, mjd)
        rm, ro = oracle.match_rows(mjd, mjm, d)
        nv = mjm.nv
        Jm = mjd.efc_J[: mjd.nefc * nv].reshape(mjd.nefc, nv)
        np.testing.assert_allclose(np.asarray(d.efc_J)[ro], Jm[rm], atol=ROW_ATOL)
        for ours, theirs in [("efc_pos", "efc_pos"), ("efc_margin", "efc_margin"), ("efc_diagA", "efc_diagA"),
                             ("efc_R", "efc_R"), ("efc_aref", "efc_aref"), ("efc_frictionloss", "efc_frictionloss"),
                             ("efc_vel", "efc_vel")]:  # fmt: skip
            np.testing.assert_allclose(np.asarray(getattr(d, ours))[ro], getattr(mjd, theirs)[rm], atol=ROW_ATOL,
                                       rtol=1e-7, err_msg=ours)  # fmt: skip
        kbip = np.asarray(_kbip(m, d))  # recomputed on request (not stored in Data)
        np.testing.assert_allclose(kbip[ro, :3], mjd.efc_KBIP[rm, :3], rtol=1e-7, atol=ROW_ATOL)


@pytest.mark.parametrize("cone,condim", [("pyramidal", 3), pytest.param("elliptic", 6, marks=_SLOW)])
def test_chain_sparse_contact_rows_match_mujoco(cone, condim):
    """Contact rows built from the bodies' dof chains (the large-scene path, forced here) equal MuJoCo's."""
    mjm = mujoco.MjModel.from_xml_string(EQ_XML.format(cone=cone, condim=condim, impratio=2.0))
    m = mjl.configure(oracle.model_from_mujoco(mjm), contact_jacobian="chain")
    assert constraint._chain_sparse(m)
    rows = _rows  # the configuration is part of the jit cache key
    for seed in range(2):
        mjd = _state(mjm, seed)
        d = rows(m, mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel)))
        rm, ro = oracle.match_rows(mjd, mjm, d)
        Jm = mjd.efc_J[: mjd.nefc * mjm.nv].reshape(mjd.nefc, mjm.nv)
        np.testing.assert_allclose(np.asarray(d.efc_J)[ro], Jm[rm], atol=ROW_ATOL)
        np.testing.assert_allclose(np.asarray(d.efc_aref)[ro], mjd.efc_aref[rm], atol=ROW_ATOL, rtol=1e-7)


# diagexact rows: the exact diagonal is a dense M^-1 J^T solve (round-off of a few float64 operations per entry)
DIAGEXACT_ATOL = 1e-8
# qacc from the Newton solve at MuJoCo's default tolerance (1e-8) on both sides
DIAGEXACT_QACC_TOL = 1e-6


@pytest.mark.parametrize("cone,condim,jacobian", [("pyramidal", 4, "dense"),
                                                  pytest.param("elliptic", 6, "dense", marks=_SLOW),
                                                  pytest.param("pyramidal", 3, "sparse", marks=_SLOW)])  # fmt: skip
def test_diagexact_matches_mujoco(cone, condim, jacobian):
    """The diagexact flag: efc_diagA is each row's exact J M^-1 J^T (a contact's rows derived from its first row's,
    as mj_makeImpedance does), and R, D, aref and qacc follow it as in mj_forward; every kind of row."""
    xml = EQ_XML.replace("<option ", '<option><flag diagexact="enable"/></option><option ')
    mjm = mujoco.MjModel.from_xml_string(xml.format(cone=cone, condim=condim, impratio=2.0))  # the oracle: dense rows
    assert mjm.opt.enableflags & mujoco.mjtEnableBit.mjENBL_DIAGEXACT
    xml = xml.replace('jacobian="dense"', f'jacobian="{jacobian}"')
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml.format(cone=cone, condim=condim, impratio=2.0)))
    fwd = jax.jit(mjl.forward)
    for seed in range(2):
        mjd = _state(mjm, seed)
        d = fwd(m, mjl.make_data(m).replace(qpos=jp.asarray(mjd.qpos), qvel=jp.asarray(mjd.qvel)))
        rm, ro = oracle.match_rows(mjd, mjm, d)
        Jd = np.asarray(constraint.efc_j_dense(m, d))
        M = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, mjd, M)
        exact = np.einsum("ij,ij->i", Jd, np.linalg.solve(M, Jd.T).T)
        noncon = np.asarray(d.efc_type)[ro] < int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS)
        # rows other than contacts carry the plain exact diagonal
        np.testing.assert_allclose(np.asarray(d.efc_diagA)[ro][noncon], exact[ro][noncon], rtol=1e-9,
                                   atol=DIAGEXACT_ATOL)  # fmt: skip
        for name in ("efc_diagA", "efc_R", "efc_D", "efc_aref"):
            np.testing.assert_allclose(np.asarray(getattr(d, name))[ro], getattr(mjd, name)[rm], rtol=1e-7,
                                       atol=DIAGEXACT_ATOL, err_msg=name)  # fmt: skip
        oracle.close(d.qacc, mjd.qacc, DIAGEXACT_QACC_TOL, "qacc")


@_SLOW
def test_diagexact_gradient_matches_central_differences():
    """d/dz of a 5-step loss with diagexact (the exact diagonal's M^-1 J^T solve differentiated) against central
    differences (step 1e-6, float64)."""
    xml = oracle.SMALL_XML.replace("<option ", '<option><flag diagexact="enable"/></option><option ')
    mjm = mujoco.MjModel.from_xml_string(xml.format(solver="Newton", cone="pyramidal", impratio=1.0, tol=1e-10,
                                                    iters=100))  # fmt: skip
    mjd = mujoco.MjData(mjm)
    oracle.small_state(mjm, mjd, np.random.default_rng(0))
    m = oracle.model_from_mujoco(mjm)
    d0 = oracle.data_with_state(m, mjm, mjd)

    def loss(z):
        d = d0.replace(qpos=d0.qpos.at[2].add(z))
        for _ in range(5):
            d = mjl.step(m, d)
        return jp.sum(d.qpos[:3]) + jp.sum(d.qvel)

    g = jax.jit(jax.grad(loss))(0.0)
    f = jax.jit(loss)
    fd = (f(1e-6) - f(-1e-6)) / 2e-6
    np.testing.assert_allclose(g, fd, rtol=oracle.GRAD_FD_RTOL)
