"""The fused position and velocity sensors' stages (kernels/sensor_posvel.py: joint, tendon, actuator, frame and subtree
sensors, velocimeter and gyro, mj_subtreeVel, as one kernel per stage) against the XLA stages and MuJoCo, in float64
(Pallas' interpret mode on the CPU).

Each stage runs on MuJoCo's state after mj_forward (oracle.data_from_mujoco: no forward pass of ours is compiled),
its sensors' entries of sensordata set to a junk value first, so the comparison with MuJoCo is one of the sensors
alone and the other stages' entries must come through unchanged. The gradients (two more programs per stage) are in
the slow selection.
"""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import sensor_posvel as kposvel
from mjx_lite.types import Stage
from tests import oracle
from tests.kernel_checks import rel, twin_tracers

# fused and XLA fields differ by float64 round-off only (summation orders): relative to max(1, max |field|)
ROUNDOFF = 1e-12
# against MuJoCo C (float64; the stages on MuJoCo's own poses and velocities)
MUJOCO_TOL = 1e-10
# derivatives run through the XLA twin on the fused path; they differ by the primal's round-off
GRAD_TOL = 1e-10
# whole steps: the solver's iterations amplify round-off (tests/test_kernels.py's STEP_TOL)
STEP_TOL = 1e-9

# a free body with a ball-jointed child (a hinge and a slide below it), a tendon over the hinge and slide, actuators
# on the joints and the tendon; every covered sensor type over every object type and with reference frames, cutoffs,
# and sensors of each stage the kernels leave to XLA (magnetometer, clock, e_kinetic; a user sensor of the velocity
# stage: zeros without Config.sensor_user, as MuJoCo's without mjcb_sensor)
SENSORS = """
<mujoco>
  <option magnetic="0 -.5 .2"/>
  <worldbody>
    <body name="a" pos="0 0 1">
      <freejoint/>
      <geom name="ga" type="box" size=".1 .05 .03" pos=".02 0 0" euler="10 20 30"/>
      <site name="sa" pos=".05 0 0" quat="0.9 0.1 0.3 0.2"/>
      <camera name="ca" pos="0 .1 .2" euler="20 -10 5"/>
      <body name="b" pos="0 0 -0.2">
        <joint name="ball" type="ball"/>
        <geom type="capsule" fromto="0 0 0 .2 0 0" size=".04"/>
        <site name="sb" pos=".1 0 0" quat="0.7 0.7 0 0"/>
        <body name="c" pos=".2 0 0">
          <joint name="h" type="hinge" axis="0 1 0" range="-3 3" limited="true"/>
          <geom name="gc" type="sphere" size=".05" pos=".05 .01 0"/>
          <body name="e" pos=".1 0 0">
            <joint name="s" type="slide" axis="1 0 .3"/>
            <geom type="box" size=".03 .02 .01" euler="5 5 5"/>
            <site name="se" pos=".01 .02 0"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t"><joint joint="h" coef=".7"/><joint joint="s" coef="-1.3"/></fixed>
  </tendon>
  <actuator>
    <motor name="mh" joint="h" gear="2"/>
    <position name="ms" joint="s" kp="10"/>
    <motor name="mt" tendon="t"/>
  </actuator>
  <sensor>
    <jointpos joint="h" cutoff=".3"/>
    <jointpos joint="s"/>
    <tendonpos tendon="t"/>
    <actuatorpos actuator="mh"/>
    <actuatorpos actuator="mt"/>
    <ballquat joint="ball"/>
    <framepos objtype="site" objname="sa"/>
    <framepos objtype="body" objname="c" reftype="site" refname="sb"/>
    <framepos objtype="xbody" objname="e" reftype="camera" refname="ca"/>
    <framepos objtype="geom" objname="gc"/>
    <framepos objtype="camera" objname="ca" reftype="body" refname="b"/>
    <framexaxis objtype="geom" objname="ga" reftype="xbody" refname="c"/>
    <frameyaxis objtype="site" objname="se"/>
    <framezaxis objtype="camera" objname="ca" reftype="site" refname="sa"/>
    <framequat objtype="site" objname="sa"/>
    <framequat objtype="body" objname="b" reftype="xbody" refname="e"/>
    <framequat objtype="xbody" objname="c"/>
    <framequat objtype="geom" objname="gc" reftype="site" refname="sb"/>
    <framequat objtype="camera" objname="ca" reftype="geom" refname="ga"/>
    <subtreecom body="b"/>
    <subtreecom body="a" cutoff=".2"/>
    <magnetometer site="se"/>
    <clock/>
    <velocimeter site="sa" cutoff=".5"/>
    <gyro site="se"/>
    <jointvel joint="h"/>
    <jointvel joint="s" cutoff=".4"/>
    <tendonvel tendon="t"/>
    <actuatorvel actuator="ms"/>
    <ballangvel joint="ball"/>
    <framelinvel objtype="site" objname="sb"/>
    <framelinvel objtype="body" objname="e" reftype="site" refname="sa"/>
    <frameangvel objtype="geom" objname="gc"/>
    <frameangvel objtype="camera" objname="ca" reftype="xbody" refname="c"/>
    <subtreelinvel body="a"/>
    <subtreelinvel body="c"/>
    <subtreeangmom body="a"/>
    <subtreeangmom body="b"/>
    <e_kinetic/>
    <user dim="2" needstage="vel"/>
  </sensor>
</mujoco>
"""
JUNK = 7.0
STAGES = {"pos": Stage.POS, "vel": Stage.VEL}


def _stage(m, d, stage):
    fn = kernels.sensor_pos if stage == "pos" else kernels.sensor_vel
    d = fn(m, d)
    return {"sensordata": d.sensordata, "subtree_linvel": d.subtree_linvel, "subtree_angmom": d.subtree_angmom}


def _loss(m, d, stage):
    out = _stage(m, d, stage)
    return sum(jp.sum(jp.sin(v * (k + 1))) for k, v in enumerate(out.values()))


def _grads(m, d, stage):
    """The stage's gradient with respect to its Data inputs and the Model floats it reads."""
    gm, gd = jax.grad(_loss, argnums=(0, 1), allow_int=True)(m, d, stage)
    names = ("qpos", "ten_length", "actuator_length", "xpos", "xquat", "xmat", "xipos", "ximat", "geom_xpos",
             "geom_xmat", "site_xpos", "site_xmat", "cam_xpos", "cam_xmat", "subtree_com", "qvel", "ten_velocity",
             "actuator_velocity", "cvel", "sensordata")  # fmt: skip
    out = {n: getattr(gd, n) for n in names}
    out.update({n: getattr(gm, n) for n in ("sensor_cutoff", "body_iquat", "geom_quat", "site_quat", "cam_quat",
                                            "body_mass", "body_subtreemass", "body_inertia", "opt")})  # fmt: skip
    out["magnetic"] = out.pop("opt").magnetic
    return out


_run = jax.jit(jax.vmap(_stage, in_axes=(None, 0, None)), static_argnums=2)
_run_grads = jax.jit(jax.vmap(_grads, in_axes=(None, 0, None)), static_argnums=2)


def _elements(mjm, stage):
    ids = np.nonzero(mjm.sensor_needstage == int(STAGES[stage]))[0]
    return np.concatenate([mjm.sensor_adr[i] + np.arange(mjm.sensor_dim[i]) for i in ids])


@pytest.fixture(scope="module")
def case():
    """MuJoCo's model and data of each state, our Model and the batch of MuJoCo's states (each stage's sensordata
    entries junk, subtree velocities zero)."""
    mjm = mujoco.MjModel.from_xml_string(SENSORS)
    m = oracle.model_from_mujoco(mjm)
    rng = np.random.default_rng(2)
    mjds, ds = [], []
    for _ in range(3):
        mjd = mujoco.MjData(mjm)
        oracle.random_state(mjm, mjd, rng, qpos_scale=0.8)
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
        d = oracle.data_from_mujoco(m, mjm, mjd)
        sd = np.array(mjd.sensordata)
        sd[_elements(mjm, "pos")] = JUNK
        sd[_elements(mjm, "vel")] = JUNK
        z = np.zeros((mjm.nbody, 3))
        ds.append(d.replace(sensordata=oracle.host_array(sd), subtree_linvel=oracle.host_array(z),
                            subtree_angmom=oracle.host_array(z)))  # fmt: skip
    batch = jax.tree.map(lambda *x: np.stack(x), *ds)
    return mjm, mjds, m, batch


@pytest.mark.parametrize("stage", ["pos", "vel"])
def test_values_equal_xla_and_mujoco(case, stage):
    """The fused stage's sensordata (and subtree velocities): the XLA stage's to round-off and MuJoCo's; every covered
    sensor is the kernel's, the stage's others XLA's, the other stages' entries unchanged."""
    mjm, mjds, m, batch = case
    mf = mjl.configure(m, kernels="fused")
    assert kernels.sensor_posvel_fused(mf, STAGES[stage])
    covered = kposvel._covered(mf, STAGES[stage])
    xla_only = [mujoco.mjtSensor.mjSENS_MAGNETOMETER, mujoco.mjtSensor.mjSENS_CLOCK, mujoco.mjtSensor.mjSENS_E_KINETIC,
                mujoco.mjtSensor.mjSENS_USER]  # fmt: skip
    here = mjm.sensor_needstage == int(STAGES[stage])
    assert list(covered) == list(np.nonzero(here & ~np.isin(mjm.sensor_type, xla_only))[0])
    assert np.any(here & np.isin(mjm.sensor_type, xla_only))
    got = _run(mf, batch, stage)
    want = _run(mjl.configure(m, kernels="xla"), batch, stage)
    for n in got:
        assert rel(got[n], want[n]) <= ROUNDOFF, (n, rel(got[n], want[n]))
    here = _elements(mjm, stage)
    other = np.setdiff1d(np.arange(mjm.nsensordata), here)
    for i, mjd in enumerate(mjds):
        sd = np.asarray(got["sensordata"][i])
        assert rel(sd[here], mjd.sensordata[here]) <= MUJOCO_TOL, (i, rel(sd[here], mjd.sensordata[here]))
        assert np.array_equal(sd[other], np.where(np.isin(other, _elements(mjm, "pos" if stage == "vel" else "vel")),
                                                  JUNK, mjd.sensordata[other]))  # fmt: skip
        if stage == "vel":
            for n in ("subtree_linvel", "subtree_angmom"):
                assert rel(got[n][i], getattr(mjd, n)) <= MUJOCO_TOL, (i, n)
    # the cutoffs bind somewhere (REAL sensors at +-cutoff)
    cut = mjm.sensor_cutoff[mjm.sensor_needstage == int(STAGES[stage])]
    assert np.any(np.isin(np.abs(np.asarray(got["sensordata"])), cut[cut > 0]))


@pytest.mark.slow  # CI time: two gradient programs per stage
@pytest.mark.parametrize("stage", ["pos", "vel"])
def test_gradients_equal_xla(case, stage):
    """Derivatives of the stage's outputs with respect to its Data inputs and the Model floats it reads: the XLA
    stage's."""
    _, _, m, batch = case
    a = _run_grads(mjl.configure(m, kernels="fused"), batch, stage)
    b = _run_grads(mjl.configure(m, kernels="xla"), batch, stage)
    for n in a:
        assert rel(a[n], b[n]) <= GRAD_TOL, (n, rel(a[n], b[n]))
    nonzero = ("qpos", "site_quat", "xquat") if stage == "pos" else ("qvel", "cvel", "body_mass", "body_inertia")
    for n in nonzero:
        assert np.any(np.asarray(a[n])), n


def test_twins_read_only_the_kernel_inputs(case, monkeypatch):
    """Both kernels' XLA twins read no traced array of the Model or Data they close over (both traced arguments of
    the two stages, traced, not compiled; the whole step's kernels: tests/test_kernels_sensor.py)."""
    _, _, m, batch = case

    def stages(m, d):
        return kernels.sensor_vel(m, kernels.sensor_pos(m, d))

    seen = twin_tracers(monkeypatch, m, jax.tree.map(lambda x: np.asarray(x)[0], batch), stages)
    assert {"sensor_pos", "sensor_vel"} <= set(seen), sorted(seen)
    assert {n: a for n, a in seen.items() if a} == {}


def test_not_fusable_falls_back():
    """A stage without a covered sensor stays XLA's; disabled sensors leave both stages alone."""
    xml = SENSORS[: SENSORS.index("<sensor>")] + '<sensor><clock/><jointlimitvel joint="h"/></sensor></mujoco>'
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(xml))
    assert not kposvel.fusable(m, Stage.POS) and not kposvel.fusable(m, Stage.VEL)
    off = SENSORS.replace('<option magnetic="0 -.5 .2"/>', '<option><flag sensor="disable"/></option>')
    m = oracle.model_from_mujoco(mujoco.MjModel.from_xml_string(off))
    assert not kposvel.fusable(m, Stage.POS) and not kposvel.fusable(m, Stage.VEL)


def test_lowers_to_triton(case, monkeypatch):
    """Both kernels lower to Triton (Pallas' GPU backend) at a batch of 200 = 128 + 72 (masked lanes), float32 (as a
    GPU runs them). No GPU needed: lowering only."""
    monkeypatch.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
    _, _, m, batch = case
    f32 = lambda t: oracle.cast_floats(t, jp.float32)  # noqa: E731
    big = jax.tree.map(lambda x: np.concatenate([np.asarray(x)] * 67)[:200], batch)

    def both(m, d):
        return kernels.sensor_vel(m, kernels.sensor_pos(m, d)).sensordata

    fn = jax.jit(jax.vmap(both, in_axes=(None, 0)))
    text = fn.trace(mjl.configure(f32(m), kernels="fused"), f32(big)).lower(lowering_platforms=("cuda",)).as_text()
    assert text.count("__gpu$xla.gpu.triton") == 2


@pytest.mark.slow  # CI time: two whole-step programs
def test_step_equals_xla(case):
    """Two whole steps (RK4 off: the default Euler) of the fused path, both sensor kernels in them, equal the XLA
    path's sensordata and subtree velocities."""
    _, _, m, batch = case

    def roll(m, d):
        return jax.lax.scan(lambda d, _: (mjl.step(m, d), None), d, None, length=2)[0]

    roll = jax.jit(jax.vmap(roll, in_axes=(None, 0)))
    want, got = roll(mjl.configure(m, kernels="xla"), batch), roll(mjl.configure(m, kernels="fused"), batch)
    for n in ("sensordata", "subtree_linvel", "subtree_angmom", "qpos", "qvel"):
        assert rel(getattr(got, n), getattr(want, n)) <= STEP_TOL, (n, rel(getattr(got, n), getattr(want, n)))
