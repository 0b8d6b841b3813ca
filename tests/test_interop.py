"""interop: Data <-> MjData round trip, and mj_forward on the copied state equals our forward (float64)."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import interop

MODEL = "cartpole"
# float64 forward pass vs MuJoCo on the copied state: the pipeline's own oracle tolerance (tests/test_forward.py)
FWD_RTOL = 1e-7
FWD_ATOL = 1e-7
FORWARD_FIELDS = ("xpos", "xquat", "geom_xpos", "qfrc_bias", "qfrc_passive", "qfrc_actuator", "qacc", "sensordata")


@pytest.fixture(scope="module")
def models():
    m = mjl.load_mjcf(MODEL)
    return m, interop.mujoco_model(m, source=MODEL)


def _random_state(m, seed, batch=None):
    rng = np.random.default_rng(seed)
    d = mjl.make_data(m)
    shape = () if batch is None else (batch,)
    if batch is not None:
        d = jax.tree.map(lambda x: jp.broadcast_to(x, shape + jp.shape(x)), d)
    return d.replace(
        time=jp.asarray(rng.uniform(0, 5, shape)), qpos=jp.asarray(rng.normal(size=shape + (m.nq,))),
        qvel=jp.asarray(rng.normal(size=shape + (m.nv,))), ctrl=jp.asarray(rng.uniform(-1, 1, shape + (m.nu,))),
        qfrc_applied=jp.asarray(rng.normal(size=shape + (m.nv,))),
    )  # fmt: skip


def _same(a, b):
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_round_trip(models):
    m, mjm = models
    d = _random_state(m, 0)
    back = interop.from_mujoco(m, interop.to_mujoco(m, d, mjm, forward=False))
    jax.tree.map(_same, d, back)


def test_round_trip_batched(models):
    m, mjm = models
    d = _random_state(m, 1, batch=3)
    datas = interop.to_mujoco(m, d, mjm, forward=False)
    assert isinstance(datas, list) and len(datas) == 3
    np.testing.assert_array_equal(datas[2].qpos, np.asarray(d.qpos[2]))
    back = interop.from_mujoco(m, datas)
    jax.tree.map(_same, d, back)


def test_mj_forward_equals_forward(models):
    m, mjm = models
    d = _random_state(m, 2)
    mjd = interop.to_mujoco(m, d, mjm)  # mj_forward on the copied state
    ours = jax.jit(mjl.forward)(m, d)
    for f in FORWARD_FIELDS:
        want = np.asarray(getattr(mjd, f)).reshape(np.shape(getattr(ours, f)))
        scale = max(1.0, float(np.abs(want).max(initial=0.0)))
        np.testing.assert_allclose(np.asarray(getattr(ours, f)), want, rtol=FWD_RTOL, atol=FWD_ATOL * scale, err_msg=f)


def test_mujoco_model_checks_source(models):
    m, _ = models
    with pytest.raises(ValueError, match="source"):
        interop.mujoco_model(m)
    with pytest.raises(ValueError, match="does not describe"):
        interop.mujoco_model(m, source="pendulum")
    assert isinstance(interop.mujoco_model(m, source=mjl.models.path(MODEL)), mujoco.MjModel)
