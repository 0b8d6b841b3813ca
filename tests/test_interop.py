"""interop: Data <-> MjData round trip, and mj_forward on the copied state equals our forward (float64)."""

import os
import pickle

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import interop
from tests import oracle

MODEL = "cartpole"
# float64 forward pass vs MuJoCo on the copied state: the pipeline's own oracle tolerance (tests/test_forward.py)
FWD_RTOL = 1e-7
FWD_ATOL = 1e-7
FORWARD_FIELDS = ("xpos", "xquat", "geom_xpos", "qfrc_bias", "qfrc_passive", "qfrc_actuator", "qacc", "sensordata")


@pytest.fixture(scope="module")
def models():
    m = mjl.load_mjcf(MODEL)
    return m, interop.mujoco_model(m)


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


def test_mujoco_model_from_the_models_source(models, tmp_path):
    """Models keep their MJCF (Model.source): from a file, from a string with assets, from a string whose mesh is
    read relative to model_dir; a Model without a source or whose file changed is refused by name."""
    m, mjm = models
    assert m.source.path == str(mjl.models.path(MODEL)) and mjm.nbody == m.nbody
    obj = b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 0 0 1\nf 1 3 2\nf 1 2 4\nf 1 4 3\nf 2 3 4\n"
    xml = ('<mujoco><asset><mesh name="tet" file="tet.obj"/></asset><worldbody><body name="b"><freejoint/>'
           '<geom name="g" type="mesh" mesh="tet"/></body></worldbody></mujoco>')  # fmt: skip
    (tmp_path / "tet.obj").write_bytes(obj)
    for ours in (mjl.load_mjcf_string(xml, assets={"tet.obj": obj}), mjl.load_mjcf_string(xml, model_dir=tmp_path)):
        theirs = interop.mujoco_model(ours)
        assert theirs.nmeshvert == ours.nmeshvert == 4 and mujoco.mj_id2name(theirs, mujoco.mjtObj.mjOBJ_GEOM, 0) == "g"
    path = tmp_path / "model.xml"
    path.write_text(xml)
    ours = mjl.load_mjcf(path)
    assert interop.mujoco_model(ours).nmesh == 1
    path.write_text(xml.replace('name="g"', 'name="h"'))
    with pytest.raises(ValueError, match="changed since the model was loaded"):
        interop.mujoco_model(ours)
    without = oracle.model_from_mujoco(mjm)
    with pytest.raises(ValueError, match="no MJCF source"):
        interop.mujoco_model(without)
    assert interop.mujoco_model(without, source=MODEL).nbody == m.nbody  # an explicit source: path or bundled name
    with pytest.raises(ValueError, match="does not describe"):
        interop.mujoco_model(m, source="pendulum")


def test_source_is_hashed_by_content():
    """The source is part of the Model's static part through one digest: two loads of the same file share compiled
    functions; a different text makes another static part."""
    a, b = mjl.load_mjcf(MODEL), mjl.load_mjcf(MODEL)
    assert a.source == b.source and hash(a.source) == hash(b.source) and a.source is not b.source
    assert jax.tree.structure(a) == jax.tree.structure(b)
    assert len(repr(a.source)) < 200  # what the static part's hash reads, whatever the size of the text
    copied = pickle.loads(pickle.dumps(a))  # (ModelSource is immutable: it pickles through its constructor)
    assert copied.source == a.source and jax.tree.structure(copied) == jax.tree.structure(a)
    xml = a.source.xml.decode()
    c = mjl.load_mjcf_string(xml.replace("<mujoco", "<!-- another text --><mujoco", 1),
                             model_dir=os.path.dirname(mjl.models.path(MODEL)))
    assert c.source != a.source and jax.tree.structure(c) != jax.tree.structure(a)
