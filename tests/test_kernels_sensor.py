"""The fused acceleration sensors' stage (kernels/sensor_acc.py: mj_rnePostConstraint and the accelerometer, force,
torque, frame linear and angular acceleration sensors as one kernel) against the XLA stage and MuJoCo, in float64
(Pallas' interpret mode on the CPU).

The stage runs on MuJoCo's state after mj_forward (its contacts and constraint forces placed in our slots and rows on
the host: no forward pass of ours is compiled), so the comparison with MuJoCo is one of mj_rnePostConstraint and the
sensors alone. The gradients (two more programs) and elliptic cones are in the slow selection.
"""

import sys

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.collision import driver
from mjx_lite.pipeline import constraint, kernels
from mjx_lite.pipeline.kernels import launch
from tests import oracle
from tests.kernel_checks import rel, twin_tracers

ksensor = sys.modules["mjx_lite.pipeline.kernels.sensor_acc"]  # (kernels.sensor_acc is the stage's function)

# fused and XLA fields differ by float64 round-off only (summation orders): relative to max(1, max |field|)
ROUNDOFF = 1e-12
# against MuJoCo C (float64; the stage on MuJoCo's own state and constraint forces)
MUJOCO_TOL = 1e-10
# derivatives run through the XLA twin on the fused path; they differ by the primal's round-off
GRAD_TOL = 1e-10

# a free body (sphere, condim 3) with a hinged capsule (condim 4) and a free sphere (condim 1) on a plane (their only
# contacts: contype 2 and conaffinity 1 leave the bodies' pairs out), tied by a connect equality (its wrenches enter
# cfrc_ext); every covered sensor kind and object type, a cutoff, and a sensor of the stage the kernel leaves to XLA
# (jointactuatorfrc)
SENSORS = """
<mujoco>
  <option cone="{cone}"/>
  <worldbody>
    <geom type="plane" size="5 5 .1" condim="1" contype="1" conaffinity="1"/>
    <body name="a" pos="0 0 .3">
      <freejoint/>
      <geom type="sphere" size=".1" condim="3" contype="2" conaffinity="1"/>
      <site name="sa" pos=".05 0 0" quat="0.9 0.1 0.3 0.2"/>
      <body name="b" pos="0 0 -0.2">
        <joint name="h" type="hinge" axis="0 1 0" damping=".1"/>
        <geom type="capsule" fromto="0 0 0 .2 0 0" size=".04" condim="4" contype="2" conaffinity="1"/>
        <site name="sb" pos=".1 0 0" quat="0.7 0.7 0 0"/>
      </body>
    </body>
    <body name="c" pos=".5 0 .1">
      <freejoint/>
      <geom name="gc" type="sphere" size=".08" condim="1" contype="2" conaffinity="1"/>
      <camera name="cam" pos="0 0 .2"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="c" body2="a" anchor="0 0 0.1"/>
  </equality>
  <actuator>
    <motor joint="h" gear="2"/>
  </actuator>
  <sensor>
    <accelerometer site="sa"/>
    <force site="sb" cutoff="0.5"/>
    <torque site="sb"/>
    <accelerometer site="sb"/>
    <framelinacc objtype="body" objname="c"/>
    <frameangacc objtype="geom" objname="gc"/>
    <framelinacc objtype="camera" objname="cam"/>
    <frameangacc objtype="xbody" objname="b"/>
    <force site="sa"/>
    <jointactuatorfrc joint="h"/>
  </sensor>
</mujoco>
"""
FIELDS = ("cacc", "cfrc_int", "cfrc_ext", "sensordata")


def _stage(m, d):
    """The acceleration sensors' stage (`kernels.sensor_acc`: fused or XLA by m's Config) on a forward state."""
    d = kernels.sensor_acc(m, d.replace(sensordata=jp.zeros_like(d.sensordata)))
    return {n: getattr(d, n) for n in FIELDS}


def _loss(m, d):
    out = _stage(m, d)
    return sum(jp.sum(jp.sin(out[n] * (k + 1))) for k, n in enumerate(FIELDS))


def _grads(m, d):
    """The stage's gradient with respect to its Data inputs and the Model floats it reads."""
    g = jax.grad(_loss, argnums=(0, 1), allow_int=True)(m, d)
    gm, gd = g
    out = {n: getattr(gd, n) for n in ("qvel", "qacc", "cdof", "cdof_dot", "cinert", "cvel", "xfrc_applied",
                                        "subtree_com", "xipos", "efc_force", "site_xpos", "site_xmat")}  # fmt: skip
    out.update(frame=gd.contact.frame, pos=gd.contact.pos, friction=gd.contact.friction, gravity=gm.opt.gravity,
               sensor_cutoff=gm.sensor_cutoff)  # fmt: skip
    return out


_run = jax.jit(jax.vmap(_stage, in_axes=(None, 0)))
_run_grads = jax.jit(jax.vmap(_grads, in_axes=(None, 0)))


def _state(m, mjm, mjd):
    """Our Data at MuJoCo's state after mj_forward, built on the host (no forward pass of ours is compiled): the
    fields MuJoCo also has (oracle.data_from_mujoco), each MuJoCo contact in a slot of its geom pair (static slots,
    `driver.slot_geoms`) with its frame, point, friction, dim and efc_force rows, and the connect's rows."""
    d = oracle.data_from_mujoco(m, mjm, mjd)
    g1, g2 = driver.slot_geoms(m)
    p = constraint.plan(m)
    nc = len(g1)
    frame, pos, friction = np.zeros((nc, 3, 3)), np.zeros((nc, 3)), np.zeros((nc, 5))
    dim, active = np.asarray(p.con_dim).copy(), np.zeros(nc, bool)
    force, mask = np.zeros(m.njmax), np.zeros(m.njmax, bool)
    for c in mjd.contact[: mjd.ncon]:
        slot = next(i for i in range(nc) if {g1[i], g2[i]} == set(c.geom.tolist()) and not active[i])
        frame[slot], pos[slot], friction[slot], dim[slot], active[slot] = c.frame.reshape(3, 3), c.pos, c.friction, \
            c.dim, True  # fmt: skip
        nrow = int(p.con_rows[slot])
        rows = p.con_adr[slot] + np.arange(nrow)
        force[rows], mask[rows] = mjd.efc_force[c.efc_address : c.efc_address + nrow], True
    eq = np.nonzero(mjd.efc_type[: mjd.nefc] == mujoco.mjtConstraint.mjCNSTR_EQUALITY)[0]
    rows = p.adr["connect"] + np.arange(len(eq))
    force[rows], mask[rows] = mjd.efc_force[eq], True
    h = oracle.host_array
    con = d.contact.replace(frame=h(frame), pos=h(pos), friction=h(friction), dim=h(dim.astype(np.int32)),
                            active=h(active), geom=h(np.stack([g1, g2], 1).astype(np.int32)))  # fmt: skip
    return d.replace(contact=con, efc_force=h(force), efc_mask=h(mask))


def _case(cone: str):
    mjm = mujoco.MjModel.from_xml_string(SENSORS.format(cone=cone))
    m = oracle.model_from_mujoco(mjm)
    rng = np.random.default_rng(1)
    mjds, ds = [], []
    for i in range(3):  # every contact active in some state: the spheres low, the capsule tilted down
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:] = mjm.qpos0
        mjd.qpos[2] = 0.095 + 0.05 * i
        mjd.qpos[7] = 0.3 * rng.normal()
        mjd.qpos[8:11] = (0.45, 0.05 * i, 0.075)
        mjd.qvel[:] = rng.normal(size=mjm.nv) * 0.5
        mjd.ctrl[:] = rng.normal(size=mjm.nu)
        mjd.xfrc_applied[1:] = rng.normal(size=(mjm.nbody - 1, 6))
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
        ds.append(_state(m, mjm, mjd))
    batch = jax.tree.map(lambda *x: np.stack(x), *ds)
    return mjm, mjds, m, batch


@pytest.fixture(scope="module", params=["pyramidal", pytest.param("elliptic", marks=pytest.mark.slow)])
def case(request):
    """MuJoCo's model and data of each state, our Model, the XLA forward's batch, and the fused stage's fields."""
    mjm, mjds, m, batch = _case(request.param)
    return mjm, mjds, m, batch, _run(mjl.configure(m, kernels="fused"), batch)


def test_values_equal_xla_and_mujoco(case):
    """cacc, cfrc_int, cfrc_ext and sensordata of the fused stage: the XLA stage's to round-off and MuJoCo's; the
    states have contacts of condim 1, 3 and 4 (and the connect's wrench) in cfrc_ext."""
    mjm, mjds, m, batch, got = case
    assert kernels.sensor_acc_fused(mjl.configure(m, kernels="fused"))
    assert sum(mjd.ncon for mjd in mjds) >= 3 and {1, 3, 4} <= {int(c.dim) for mjd in mjds for c in mjd.contact}
    want = _run(mjl.configure(m, kernels="xla"), batch)
    for n in FIELDS:
        assert rel(got[n], want[n]) <= ROUNDOFF, (n, rel(got[n], want[n]))
    for i, mjd in enumerate(mjds):
        ref = dict(cacc=mjd.cacc, cfrc_int=mjd.cfrc_int, cfrc_ext=mjd.cfrc_ext, sensordata=mjd.sensordata)
        for n in FIELDS:
            assert rel(got[n][i], ref[n]) <= MUJOCO_TOL, (i, n, rel(got[n][i], ref[n]))
    assert np.any(np.asarray(got["sensordata"]) == 0.5)  # the force sensor's cutoff binds in some state


@pytest.mark.slow  # CI time: two gradient programs (~27 CPU-s); the twin's inputs are checked by the test below
def test_gradients_equal_xla(case):
    """Derivatives of the stage's fields with respect to its Data inputs (the contacts' frames, positions and
    friction, efc_force, the poses and velocities) and the Model's gravity and cutoffs: the XLA stage's."""
    _, _, m, batch, _ = case
    a = _run_grads(mjl.configure(m, kernels="fused"), batch)
    b = _run_grads(mjl.configure(m, kernels="xla"), batch)
    for n in a:
        assert rel(a[n], b[n]) <= GRAD_TOL, (n, rel(a[n], b[n]))
    assert np.any(np.asarray(a["efc_force"])) and np.any(np.asarray(a["frame"]))


def test_twin_reads_only_the_kernel_inputs(case, monkeypatch):
    """The kernel runs in the fused step and its XLA twin reads no traced array of the step it closes over (every
    Model or Data field it reads is a kernel input): a traced step, not compiled. Every other kernel of the step too
    (before: the constraint rows' twin read the step's contact.solreffriction, a connect model's contacts)."""
    _, _, m, batch, _ = case
    seen = twin_tracers(monkeypatch, m, jax.tree.map(lambda x: np.asarray(x)[0], batch))
    assert "sensor_acc" in seen and "constraint_rows" in seen, sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}


def test_not_fusable_falls_back():
    """Without a sensor that needs cacc or cfrc_int the stage is XLA's (nothing to fuse); a capped contact capacity
    (traced slot bodies) keeps it on XLA too."""
    xml = SENSORS.format(cone="pyramidal")
    cut = xml[: xml.index("<sensor>")] + '<sensor><jointactuatorfrc joint="h"/></sensor></mujoco>'
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(cut))
    assert not ksensor.fusable(m)
    m = mjl.configure(oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml)), nconmax=2)
    assert not ksensor.fusable(m)


def test_lowers_to_triton(case, monkeypatch):
    """The kernel lowers to Triton (Pallas' GPU backend) at a batch of 200 = 128 + 72 (masked lanes), float32 (as a
    GPU runs it). No GPU needed: lowering only."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    _, _, m, batch, _ = case
    f32 = lambda t: oracle.cast_floats(t, jp.float32)  # noqa: E731
    big = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], batch)
    fn = jax.jit(jax.vmap(_stage, in_axes=(None, 0)))
    text = fn.trace(mjl.configure(f32(m), kernels="fused"), f32(big)).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 1
