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

EQ_XML = oracle.EVERY_ROW_XML.replace(
    "{option}", '<option jacobian="dense" cone="{cone}" impratio="{impratio}"/>').replace("{g_condim}", "{condim}")


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
