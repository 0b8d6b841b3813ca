"""Common mistakes of a new user work or fail with a message that names them: Python lists and numpy arrays where
arrays go, swapped arguments, the Data of another model (or a batch without vmap), a mistyped bundled model name,
a mistyped MJCF attribute or element; float32 values print at their own precision."""

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import data as data_mod
from mjx_lite._struct import _short_repr


@pytest.fixture(scope="module")
def pendulum():
    m = mjl.load_mjcf("pendulum")
    return m, mjl.make_data(m)


def test_lists_and_numpy_arrays_are_accepted(pendulum):
    """d.replace(ctrl=[...]) then step: the same result as with a jax array, eagerly and under jit."""
    m, d = pendulum
    want = mjl.step(m, d.replace(ctrl=jp.asarray([0.5], d.ctrl.dtype), qpos=jp.asarray([0.1], d.qpos.dtype)))
    for ctrl, qpos in (([0.5], (0.1,)), (np.array([0.5]), np.array([0.1])), ([0.5], [0.1])):
        d2 = d.replace(ctrl=ctrl, qpos=qpos)
        assert isinstance(d2.ctrl, jax.Array) and d2.ctrl.dtype == d.ctrl.dtype
        got = mjl.step(m, d2)
        np.testing.assert_array_equal(np.asarray(got.qpos), np.asarray(want.qpos))

    @jax.jit  # under jit a list of tracers is stacked into the field's dtype (not a second compile of step)
    def replaced(u):
        d2 = d.replace(ctrl=[u], qpos=[0.1])
        return d2.ctrl, d2.qpos

    ctrl, qpos = replaced(jp.asarray(0.5))
    assert ctrl.dtype == d.ctrl.dtype and qpos.dtype == d.qpos.dtype
    np.testing.assert_array_equal(np.asarray(ctrl), np.asarray(d.replace(ctrl=[0.5]).ctrl))
    np.testing.assert_array_equal(np.asarray(qpos), np.asarray(d.replace(qpos=[0.1]).qpos))
    contact = d.contact.replace(dist=np.zeros(m.nconmax).tolist())
    assert isinstance(contact.dist, jax.Array) and contact.dist.dtype == d.contact.dist.dtype


def test_entry_points_convert_fields_of_a_constructed_data(pendulum):
    """A Data built with the constructor (no replace) and a list in it is converted at the entry point."""
    m, d = pendulum
    fields = {f.name: getattr(d, f.name) for f in dataclasses.fields(mjl.Data)}
    built = mjl.Data(**{**fields, "ctrl": [0.5], "qpos": np.array([0.1])})
    fixed = data_mod.as_data(built)
    assert isinstance(fixed.ctrl, jax.Array) and fixed.ctrl.dtype == d.ctrl.dtype
    assert fixed.qpos.dtype == d.qpos.dtype
    assert data_mod.as_data(d) is d  # nothing to convert: the same object


@pytest.mark.parametrize("fn", [mjl.step, mjl.forward, mjl.inverse, mjl.step1, mjl.step2])
def test_swapped_arguments_are_named(pendulum, fn):
    m, d = pendulum
    with pytest.raises(TypeError, match=r"arguments are swapped"):
        fn(d, m)
    with pytest.raises(TypeError, match=r"m must be a Model .*not str"):
        fn("pendulum", d)
    with pytest.raises(TypeError, match=r"d must be a Data .*not dict"):
        fn(m, {})


def test_data_of_another_model_lists_a_few_fields(pendulum):
    m, d = pendulum
    other = mjl.load_mjcf("cartpole")
    with pytest.raises(ValueError) as e:
        mjl.forward(other, d)
    msg = str(e.value)
    lines = msg.splitlines()
    assert "another model" in msg and "mjl.make_data(m)" in msg
    assert "qpos: got float (1,), expected float (2,) (nq)" in msg
    assert len(lines) == 1 + data_mod.LISTED + 1 and lines[-1].strip().startswith("... and ")


def test_batched_data_without_vmap_says_vmap(pendulum):
    m, d = pendulum
    batch = jax.tree.map(lambda x: jp.stack([x, x, x]), d)
    with pytest.raises(ValueError, match=r"extra leading axis.*jax\.vmap\(mjl\.step, in_axes=\(None, 0\)\)"):
        mjl.step(m, batch)


def test_mistyped_bundled_name():
    with pytest.raises(mjl.MJCFError, match=r"did you mean 'humanoid'\?") as e:
        mjl.load_mjcf("humanod")
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, mjl.MJCFNotFoundError)
    with pytest.raises(FileNotFoundError, match=r"did you mean 'cartpole'\?"):  # as before it was an MJCFError
        mjl.models.path("cartpol")


@pytest.mark.parametrize(
    "xml,expected",
    [('<mujoco><worldbody><geom type="sphere" szie="1"/></worldbody></mujoco>',
      r"attribute 'szie': unknown attribute \(did you mean 'size'\?\)"),
     ("<mujoco><worldbody><bodyy/></worldbody></mujoco>", r"<bodyy>: unknown element .*did you mean 'body'\?"),
     ("<mujoco><optoin/></mujoco>", r"did you mean 'option'\?"),
     ('<mujoco><actuator><motr joint="j"/></actuator></mujoco>', r"did you mean 'motor'( or 'dcmotor')?\?"),
     ('<mujoco><default><jiont damping="1"/></default></mujoco>', r"did you mean 'joint'\?"),
     ('<mujoco><worldbody><geom size="1" xyz="1"/></worldbody></mujoco>', r"unknown attribute$")],
)  # fmt: skip
def test_unknown_mjcf_names_get_the_closest(xml, expected):
    with pytest.raises(mjl.MJCFError, match=expected):
        mjl.load_mjcf_string(xml)


def test_float32_values_print_rounded(pendulum):
    """Small arrays print by value at their own precision (float32 0.01, not 0.009999999776482582)."""
    assert _short_repr(jp.asarray(0.01, jp.float32)) == "0.01"
    assert _short_repr(np.asarray([0.1, 0.2], np.float32)) == "[0.1, 0.2]"
    m, _ = pendulum
    text = repr(m.opt)
    assert "timestep=0.01," in text and "0.00999" not in text
    assert "gravity=[ 0.  ,  0.  , -9.81]" in text
    assert "array(" in repr(m)  # large arrays by shape



def test_unknown_object_names_get_the_closest(pendulum):
    """Mistyped names of a model's objects, cameras and tasks: the closest valid names first, then the list."""
    m, _ = pendulum
    with pytest.raises(KeyError, match=r"no joint named 'hinj' in this model \(did you mean 'hinge'\?\); joint names"):
        mjl.names.joint_id(m, "hinj")
    with pytest.raises(KeyError, match=r"no body named 'pol' in this model \(did you mean 'pole'\?\)"):
        mjl.names.body_id(m, "pol")
    cam = mjl.load_mjcf_string('<mujoco><worldbody><camera name="track" pos="0 -2 1"/><geom size=".1"/></worldbody>'
                               "</mujoco>")  # fmt: skip
    with pytest.raises(ValueError, match=r"no camera named 'trak' \(did you mean 'track'\?\)"):
        mjl.render.Renderer(cam, 8, 8).camera_id("trak")
    with pytest.raises(ValueError, match=r"unknown task 'hoper' \(did you mean 'hopper' or 'hopper_hop'\?\)"):
        mjl.envs.make("hoper")
