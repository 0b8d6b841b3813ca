"""Height fields below a plane (collision/occlusion.py, `Config.hfield_occlusion`): their pairs with the plane's geoms
get no contact slots; while nothing sinks through the plane the results are MuJoCo's, and a step where a geom could
touch the field is counted in CONTACTFULL (per environment), as is a field raised above the plane later."""

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import types  # noqa: E402
from mjx_lite.collision import driver  # noqa: E402
from tests import oracle  # noqa: E402

# Newton run to convergence on both sides (as tests/test_capacity.py): qacc and forces agree to this
NEWTON_TOL = 1e-7
# closed-form plane contacts: float64 round-off
GEOM_TOL = 1e-9

# a 5 x 5 field (MuJoCo scales the samples to [0, 1]; size z 0.02: top 0.02 above its frame) at z = -0.03, 1 cm under
# the floor; a lying capsule and a sphere resting on the floor (closed-form field colliders)
XML = """<mujoco>
  <option solver="Newton" iterations="100" tolerance="1e-12" ls_iterations="50" jacobian="dense"/>
  <asset><hfield name="terrain" nrow="5" ncol="5" size="1 1 .02 .1"
    elevation="0 .1 .2 .1 0  .1 .3 .5 .3 .1  .2 .5 .5 .5 .2  .1 .3 .5 .3 .1  0 .1 .2 .1 0"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <geom name="terrain" type="hfield" hfield="terrain" pos="0 0 -.03" contype="3" conaffinity="3"/>
    <body name="log" pos=".3 .2 .045"><freejoint/><geom name="log" type="capsule" size=".05 .2" euler="0 90 0"/></body>
    <body name="ball" pos="-.3 -.2 .097"><freejoint/><geom name="ball" type="sphere" size=".1"/></body>
  </worldbody>
</mujoco>"""
# with a capsule in the air that collides with the field but not with the floor (contype / conaffinity 2 against
# the floor's 1): its field pair keeps its slots (loaded only: its collider is not compiled by default)
ROD = '''<body name="rod" pos="0 .5 1"><freejoint/>
      <geom name="rod" type="capsule" size=".05 .2" euler="0 90 0" contype="2" conaffinity="2"/></body>
  </worldbody>'''


def _mujoco(xml, qpos=None):
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    if qpos is not None:
        mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    return mjm, mjd


@pytest.fixture(scope="module")
def setup():
    xml = XML
    m = mjl.load_mjcf_string(xml)
    full = mjl.configure(m, hfield_occlusion=False)
    fwd = jax.jit(jax.vmap(mjl.forward, in_axes=(None, 0)))
    return xml, m, full, fwd


def test_snapshot_and_slots():
    xml = XML.replace("  </worldbody>", ROD)
    m = mjl.load_mjcf_string(xml)
    full = mjl.configure(m, hfield_occlusion=False)
    mjm = mujoco.MjModel.from_xml_string(xml)
    terrain, floor = (mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, n) for n in ("terrain", "floor"))
    assert int(m.geom_occluder0[terrain]) == floor and np.sum(np.asarray(m.geom_occluder0) >= 0) == 1
    # the log and the ball collide with the floor: their field pairs are left out; the rod's stays
    fields, geoms = driver.pair_table(m).occluded
    names = {mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, int(g)) for g in geoms}
    assert set(fields.tolist()) == {terrain} and names == {"log", "ball"}
    assert m.nconmax < full.nconmax and m.njmax < full.njmax and not len(driver.pair_table(full).occluded[0])
    # a field above the floor somewhere is not occluded
    high = mjl.load_mjcf_string(xml.replace('pos="0 0 -.03"', 'pos="0 0 -.015"'))
    assert np.all(np.asarray(high.geom_occluder0) == -1) and high.nconmax == full.nconmax


def test_matches_mujoco_and_flags_a_sunk_geom(setup):
    """Resting on the floor: MuJoCo's contacts and accelerations, nothing flagged. The ball pushed through the floor
    into the field: MuJoCo makes field contacts; ours are left out and flagged in that environment only."""
    xml, m, full, fwd = setup
    mjm, rest, sunk, db = _states(m, xml)
    hf = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_GEOM, "terrain")
    assert not np.any(rest.contact.geom[: rest.ncon] == hf) and np.any(sunk.contact.geom[: sunk.ncon] == hf)
    d = fwd(m, db)
    w = np.asarray(d.warning_number)
    np.testing.assert_array_equal(w[:, types.Warning.CONTACTFULL], [0, 1])
    assert int(d.ncon[0]) == rest.ncon and int(np.asarray(d.nefc)[0]) == rest.nefc
    d0 = jax.tree.map(lambda x: x[0], d)
    oracle.close(d0.qacc, rest.qacc, NEWTON_TOL, "qacc")
    act = np.asarray(d0.contact.active)
    np.testing.assert_allclose(np.sort(np.asarray(d0.contact.dist)[act]), np.sort(rest.contact.dist), atol=GEOM_TOL)


def _states(m, xml):
    """(MuJoCo's model, the resting and the sunk MjData, the two states stacked for m)."""
    mjm, rest = _mujoco(xml)
    q = rest.qpos.copy()
    q[7 + 2] = 0.04  # the ball's centre 4 cm above the floor: its lowest point 6 cm below, into the field
    _, sunk = _mujoco(xml, q)
    states = [oracle.data_with_state(m, mjm, mjd) for mjd in (rest, sunk)]
    return mjm, rest, sunk, jax.tree.map(lambda a, b: jp.stack([a, b]), *states)


@pytest.mark.slow  # a second program (every field pair's collider): the default test checks the flag
def test_without_occlusion_the_field_contacts_are_mujocos(setup):
    xml, _, full, fwd = setup
    _, rest, sunk, db = _states(full, xml)
    d = fwd(full, db)
    np.testing.assert_array_equal(np.asarray(d.warning_number)[:, types.Warning.CONTACTFULL], [0, 0])
    np.testing.assert_array_equal(np.asarray(d.ncon), [rest.ncon, sunk.ncon])


def test_field_raised_later_is_flagged(setup):
    """The samples and sizes are leaves: a field raised above the floor after load is seen by the check (the resting
    geoms are then within reach of its solid: flagged), and a field lowered further is not."""
    xml, m, _, fwd = setup
    mjm, rest = _mujoco(xml)
    d0 = oracle.data_with_state(m, mjm, rest)
    db = jax.tree.map(lambda a: jp.stack([a, a]), d0)
    for scale, want in ((3.0, 1), (0.0, 0)):  # top at -0.03 + 0.06 = +0.03 (above the floor), or -0.03
        mr = m.replace(hfield_size=m.hfield_size.at[0, 2].multiply(scale))
        w = np.asarray(fwd(mr, db).warning_number)[:, types.Warning.CONTACTFULL]
        np.testing.assert_array_equal(w, [want, want])


def test_config_validates():
    with pytest.raises(TypeError, match="hfield_occlusion"):
        mjl.Config(hfield_occlusion=1)
