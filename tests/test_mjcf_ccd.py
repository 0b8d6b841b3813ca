"""opt.ccd_iterations below MuJoCo's default (35): loaded where MuJoCo runs no GJK/EPA (the setting has no effect
there), refused by name where it does (mjx_lite's convex colliders give the converged contact, MuJoCo's stop short:
mjcf/compile.py `_check_ccd_iterations`)."""

import jax
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.mjcf.spec import MJCFUnsupportedError

TRAJ_ATOL = 1e-8  # float64, 150 steps of contact dynamics (Newton to tolerance 1e-10)

# closed-form colliders only (plane against everything, sphere-cylinder, capsule-box, box-box, ...: the cylinder's
# collision bits keep it from the box and the capsule), an ellipsoid and a mesh that collide with nothing, and a
# static mesh and ellipsoid that collide only with each other (MuJoCo never collides two static geoms)
PRIMITIVES = """
<mujoco>
  <option ccd_iterations="{it}" tolerance="1e-10"/>
  <asset><mesh name="m" vertex="0 0 0 .1 0 0 0 .1 0 0 0 .1"/></asset>
  <worldbody>
    <geom type="plane" size="2 2 .1" contype="3" conaffinity="3"/>
    <geom type="mesh" mesh="m" pos="1 1 0" contype="4" conaffinity="4"/>
    <geom type="ellipsoid" size=".1 .1 .2" pos="1.1 1 0" contype="4" conaffinity="4"/>
    <body pos="0 0 .3" euler="10 20 0"><freejoint/><geom type="cylinder" size=".08 .1" contype="2" conaffinity="2"/>
    </body>
    <body pos=".05 .02 .55"><freejoint/><geom type="sphere" size=".07" contype="3" conaffinity="3"/></body>
    <body pos=".4 0 .3" euler="0 30 10"><freejoint/><geom type="box" size=".08 .06 .05"/></body>
    <body pos=".45 .02 .5" euler="40 0 0"><freejoint/><geom type="capsule" size=".04 .1"/></body>
    <body pos="-.5 0 .3"><freejoint/><geom type="ellipsoid" size=".1 .08 .06" contype="0" conaffinity="0"/>
      <geom type="mesh" mesh="m" contype="0" conaffinity="0"/></body>
  </worldbody>
</mujoco>"""


def _mujoco_traj(xml: str, n: int) -> np.ndarray:
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    out = []
    for _ in range(n):
        mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel, [d.ncon]]))
    return np.array(out)


def test_no_gjk_model_loads_as_mujoco():
    """The cheap default check of the setting (CI time: the stepping test below is slow): ccd_iterations=10 on the
    model without GJK/EPA pairs loads, and MuJoCo's trajectory there is the one at 35 (the setting has no effect)."""
    n = 150
    low, default = _mujoco_traj(PRIMITIVES.format(it=10), n), _mujoco_traj(PRIMITIVES.format(it=35), n)
    np.testing.assert_array_equal(low, default)
    assert low[:, -1].max() >= 5  # floor contacts and body-body contacts
    m = mjl.load_mjcf_string(PRIMITIVES.format(it=10))
    assert m.opt.ccd_iterations == 10 and m.ngeom == mujoco.MjModel.from_xml_string(PRIMITIVES.format(it=10)).ngeom


# slow (CI time, ~9 worker-s: the step's compile of six colliders): the setting's load and MuJoCo's indifference to it
# stay by default in test_no_gjk_model_loads_as_mujoco; these closed-form colliders' contacts and steps against
# MuJoCo stay by default in tests/test_collision.py (test_analytic_pairs)
@pytest.mark.slow
def test_no_gjk_model_loads_and_steps_as_mujoco():
    """ccd_iterations=10 on a model without GJK/EPA pairs: MuJoCo's trajectory is the one at 35 (no effect), and
    ours matches it step by step, with contacts between the bodies."""
    n = 150
    low, default = _mujoco_traj(PRIMITIVES.format(it=10), n), _mujoco_traj(PRIMITIVES.format(it=35), n)
    np.testing.assert_array_equal(low, default)
    assert low[:, -1].max() >= 5  # floor contacts and body-body contacts
    m = mjl.load_mjcf_string(PRIMITIVES.format(it=10))
    assert m.opt.ccd_iterations == 10
    stp = jax.jit(mjl.step)
    d = mjl.make_data(m)
    for k in range(n):
        d = stp(m, d)
        np.testing.assert_allclose(np.asarray(d.qpos), low[k, : m.nq], rtol=0, atol=TRAJ_ATOL, err_msg=f"step {k}")
        np.testing.assert_allclose(np.asarray(d.qvel), low[k, m.nq : m.nq + m.nv], rtol=0, atol=1e2 * TRAJ_ATOL,
                                   err_msg=f"step {k}")  # fmt: skip


_REFUSED = {
    "ellipsoid-sphere": '<body><freejoint/><geom type="ellipsoid" size=".1 .08 .06"/></body>'
    '<body pos="1 0 0"><freejoint/><geom size=".1"/></body>',
    "cylinder-box": '<body><freejoint/><geom type="cylinder" size=".1 .1"/></body>'
    '<body pos="1 0 0"><freejoint/><geom type="box" size=".1 .1 .1"/></body>',
    "mesh-mesh": '<body><freejoint/><geom type="mesh" mesh="m"/></body>'
    '<body pos="1 0 0"><freejoint/><geom type="mesh" mesh="m"/></body>',
    "hfield": '<geom type="hfield" hfield="h"/><body pos="0 0 1"><freejoint/><geom size=".1"/></body>',
    "explicit pair": '<body><freejoint/><geom name="a" type="cylinder" size=".1 .1" contype="0" conaffinity="0"/>'
    '</body><body pos="1 0 0"><freejoint/><geom name="b" type="capsule" size=".1 .1" contype="0" conaffinity="0"/>'
    "</body>",
    "geom distance sensor": '<body name="p"><freejoint/><geom name="a" size=".1"/></body>'
    '<body pos="1 0 0"><freejoint/><geom name="b" size=".1"/></body>',
    "enclosed insidesite": '<site name="s" size=".5"/><body><freejoint/><geom name="a" size=".1"/></body>',
}
_EXTRA = {
    "explicit pair": '<contact><pair geom1="a" geom2="b"/></contact>',
    "geom distance sensor": '<sensor><distance geom1="a" geom2="b"/></sensor>',
    "enclosed insidesite": '<sensor><insidesite site="s" objtype="geom" objname="a" enclosed="true"/></sensor>',
}


@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_gjk_models_refused(case):
    """Where MuJoCo runs GJK/EPA (convex pairs, height fields, explicit pairs, distance and enclosed sensors),
    ccd_iterations=10 is refused naming the attribute and what needs it; MuJoCo loads the model, and at 35 so do we."""
    xml = f"""<mujoco><option ccd_iterations="{{it}}"/>
      <asset><mesh name="m" vertex="0 0 0 .1 0 0 0 .1 0 0 0 .1"/><hfield name="h" nrow="3" ncol="3" size="1 1 .1 .1"/>
      </asset><worldbody>{_REFUSED[case]}</worldbody>{_EXTRA.get(case, "")}</mujoco>"""
    mujoco.MjModel.from_xml_string(xml.format(it=10))
    with pytest.raises(MJCFUnsupportedError, match="ccd_iterations below") as err:
        mjl.load_mjcf_string(xml.format(it=10))
    assert err.value.attribute == "ccd_iterations"
    mjl.load_mjcf_string(xml.format(it=35))
