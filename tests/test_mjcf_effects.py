"""The audit of every parsed MJCF attribute (mjx_lite/mjcf/effects.py): nothing the loader parses is silently
ignored. Each attribute either reaches a Model field the runtime reads, shapes the compile, is refused with
MJCFUnsupportedError, or has no effect on the simulation in MuJoCo either (some of those claims checked against
MuJoCo's own trajectories)."""

import dataclasses
import glob
import os
import re

import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import types
from mjx_lite.mjcf import effects
from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.effects import Compiler, Model, NoEffect, Refused

ROOT = os.path.dirname(os.path.abspath(mjl.__file__))
# modules that only build or carry the Model: a field they mention is not thereby read by the simulation
_NOT_RUNTIME = ("mjcf", "types.py", "io.py", "interop.py", "_struct.py", "check.py")


def _runtime_source() -> str:
    files = [f for f in glob.glob(os.path.join(ROOT, "**", "*.py"), recursive=True)
             if not any(part in os.path.relpath(f, ROOT) for part in _NOT_RUNTIME)]  # fmt: skip
    return "\n".join(open(f).read() for f in files)


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def _unused() -> list[str]:
    """Parsed attributes without an audited effect, or whose Model fields the runtime never reads."""
    # the runtime's identifiers, once (a word-bounded regex search per field over the whole source took ~20 s)
    idents = set(re.findall(r"\w+", _runtime_source()))
    fields = {"": _fields(types.Model), "opt.": _fields(types.Option), "stat.": _fields(types.Statistic)}
    out = []
    for key, schema in sc.SCHEMA.items():
        if key.startswith("default/"):
            base = sc.DEFAULT_BASE[key.split("/", 1)[1]]
            out += [f"{key}/{a}: not an attribute of <{base}>" for a in schema if a not in sc.SCHEMA[base]]
            continue
        for a in schema:
            e = effects.EFFECTS.get(key, {}).get(a)
            if not isinstance(e, (Model, Compiler, Refused, NoEffect)):
                out.append(f"{key}/{a}: no audited effect")
                continue
            if isinstance(e, Model):
                for f in e.fields:
                    prefix = next((p for p in ("opt.", "stat.") if f.startswith(p)), "")
                    name = f[len(prefix) :]
                    if name not in fields[prefix]:
                        out.append(f"{key}/{a}: Model field {f} does not exist")
                    elif name not in idents:  # (field names are identifiers: the same test as r"\bname\b")
                        out.append(f"{key}/{a}: Model field {f} is never read by the runtime")
    for key, table in effects.EFFECTS.items():
        out += [f"{key}/{a}: audited but not parsed" for a in table if a not in sc.SCHEMA.get(key, {})]
    return out


def test_no_parsed_attribute_is_unused():
    """Every attribute of the schema has an audited effect, and every Model field named is read by the runtime."""
    unused = _unused()
    assert not unused, "parsed but unused:\n" + "\n".join(unused)


# one model holding every element a refusal or probe needs; {slot} is where the attribute under test goes
BASE = """<mujoco>
  <compiler {compiler}/>
  <option {option}><flag {flag}/></option>
  <asset><mesh name="m" {mesh}/></asset>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 .1"/>
    <site name="s0" pos="0 0 .3" size=".2"/>
    <camera name="c" pos="0 -1 .5" xyaxes="1 0 0 0 .5 1"/>
    <body name="b1" pos="0 0 .3">
      <joint name="hinge" axis="0 1 0" range="-1 1" {joint}/>
      <geom name="g1" type="box" size=".1 .1 .1" pos=".2 0 0" {geom}/>
      <site name="s1" pos=".3 0 0"/>
      <body name="b3" pos=".3 0 0"><joint name="ball" type="ball"/><geom size=".03"/></body>
    </body>
    <body name="b2" pos="1 0 .2"><freejoint name="free" {freejoint}/><geom name="g2" size=".05"/></body>
    <body name="b4" pos="-1 0 .2"><freejoint/><geom name="g4" type="ellipsoid" size=".06 .05 .04"/></body>
  </worldbody>
  <contact><pair geom1="floor" geom2="g2" {pair}/></contact>
  <tendon>
    <spatial name="t0" {spatial}><site site="s0"/><site site="s1"/></spatial>
    <fixed name="t1" range="-1 1" {fixed}><joint joint="hinge" coef="1"/></fixed>
  </tendon>
  <actuator><motor name="a0" joint="hinge"/>{actuator}</actuator>
  <sensor>{sensor}</sensor>
</mujoco>"""
_SLOTS = ("compiler", "option", "flag", "mesh", "joint", "geom", "freejoint", "pair", "spatial", "fixed",
          "actuator", "sensor")  # fmt: skip
_SENSOR_OBJ = {
    **{t: 'site="s1"' for t in ("touch", "accelerometer", "velocimeter", "gyro", "force", "torque", "magnetometer",
                                "rangefinder")},
    **{t: 'joint="hinge"' for t in ("jointpos", "jointvel", "jointactuatorfrc", "jointlimitpos", "jointlimitvel",
                                    "jointlimitfrc")},
    "ballquat": 'joint="ball"', "ballangvel": 'joint="ball"',
    **{t: 'tendon="t1"' for t in ("tendonpos", "tendonvel", "tendonactuatorfrc", "tendonlimitpos", "tendonlimitvel",
                                  "tendonlimitfrc")},
    **{t: 'actuator="a0"' for t in ("actuatorpos", "actuatorvel", "actuatorfrc")},
    **{t: 'objtype="body" objname="b1"' for t in ("framepos", "framequat", "framexaxis", "frameyaxis", "framezaxis",
                                                  "framelinvel", "frameangvel", "framelinacc", "frameangacc")},
    **{t: 'body="b1"' for t in ("subtreecom", "subtreelinvel", "subtreeangmom")},
    "insidesite": 'site="s0" objtype="site" objname="s1"', "camprojection": 'site="s1" camera="c"',
    "sensor/distance": 'geom1="g1" geom2="g2"', "sensor/normal": 'geom1="g1" geom2="g2"',
    "sensor/fromto": 'geom1="g1" geom2="g2"', "sensor/contact": "", "e_potential": "", "e_kinetic": "", "clock": "",
    "sensor/user": 'dim="1"',
}  # fmt: skip


def model_xml(key: str, attrs: str) -> str:
    """BASE with `attrs` written on the element of schema key `key` (None: unknown key)."""
    slots = dict.fromkeys(_SLOTS, "")
    slots["mesh"] = 'vertex="0 0 0 .1 0 0 0 .1 0 0 0 .1"'
    tag = key.split("/")[-1]
    if key == "mesh" and "builtin" in attrs:
        slots["mesh"] = ""
    if key in ("compiler", "option", "mesh", "joint", "geom", "freejoint", "pair", "spatial", "fixed"):
        slots[key] = attrs
    elif key == "option/flag":
        slots["flag"] = attrs
    elif key in sc.ACTUATOR_TAGS:
        target = {"adhesion": 'body="b1"', "orientation": 'joint="ball"'}.get(key, 'joint="hinge"')
        slots["actuator"] = f'<{key} {target} ctrlrange="0 1" {attrs}/>'
    elif key in _SENSOR_OBJ:
        obj = "" if key == "rangefinder" and "camera" in attrs else _SENSOR_OBJ[key]  # a site or a camera
        slots["sensor"] = f"<{tag} {obj} {attrs}/>"
    else:
        return None
    return BASE.format(**slots)


def test_base_model_loads():
    """The template itself loads in both (so that a refusal below is the attribute's)."""
    xml = model_xml("option", "")
    mujoco.MjModel.from_xml_string(xml)
    mjl.load_mjcf_string(xml)


_REFUSALS = [(k, a, e) for k, t in effects.EFFECTS.items() for a, e in t.items() if isinstance(e, Refused)]


@pytest.mark.parametrize("key,attr,e", _REFUSALS, ids=[f"{k}-{a}" for k, a, _ in _REFUSALS])
def test_refused(key, attr, e):
    """Each refusal is raised at load, naming the attribute (or one MuJoCo requires with it); MuJoCo accepts the
    same model."""
    xml = model_xml(key, f'{attr}="{e.value}" {e.also}')
    assert xml is not None, f"no template for <{key}>"
    mujoco.MjModel.from_xml_string(xml)  # valid MJCF
    with pytest.raises(mjl.MJCFUnsupportedError) as err:
        mjl.load_mjcf_string(xml)
    named = {attr} | {a.split("=")[0] for a in e.also.split()}
    assert err.value.attribute in named, str(err.value)


@pytest.mark.parametrize("key", sorted(effects.REFUSED_ELEMENTS))
def test_refused_elements(key):
    xml = model_xml(key, "")
    mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjl.MJCFUnsupportedError, match=key.split("/")[-1]):
        mjl.load_mjcf_string(xml)


_PROBES = [(k, a, e.probe) for k, t in effects.EFFECTS.items() for a, e in t.items()
           if isinstance(e, NoEffect) and e.probe is not None]  # fmt: skip
_PROBE_TOL = 1e-12  # only round-off may differ (dense vs sparse products, islands solved apart)


def _mujoco_run(xml: str) -> np.ndarray:
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    d.ctrl[:] = 0.5
    out = []
    for _ in range(100):
        mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel, d.sensordata, d.actuator_force]))
    return np.array(out)


@pytest.mark.parametrize("key,attr,value", _PROBES, ids=[f"{k}-{a}" for k, a, _ in _PROBES])
def test_no_effect_in_mujoco(key, attr, value):
    """The NoEffect claims that name a probe: MuJoCo's 100-step trajectory (with contacts, an actuator and the
    sensor under test) is the same with and without the setting."""
    sensor = key in _SENSOR_OBJ
    extra = "" if sensor else model_xml("accelerometer", "").split("<sensor>")[1].split("</sensor>")[0]
    plain, probed = model_xml(key, ""), model_xml(key, f'{attr}="{value}"')
    if not sensor:
        plain = plain.replace("<sensor></sensor>", f"<sensor>{extra}</sensor>")
        probed = probed.replace("<sensor></sensor>", f"<sensor>{extra}</sensor>")
    a, b = _mujoco_run(plain), _mujoco_run(probed)
    assert np.abs(a).max() > 0
    np.testing.assert_allclose(b, a, atol=_PROBE_TOL * max(1.0, np.abs(a).max()), rtol=0)


def test_body_fuse_false_opts_out_of_fusestatic():
    """<body fuse="false"> keeps a static body under fusestatic (it was parsed and ignored): bodies and masses as
    MuJoCo's, with fuse auto (fused) and false (kept)."""
    for fuse, nbody in (("auto", 2), ("false", 3)):
        xml = f"""<mujoco><compiler fusestatic="true"/><worldbody><body name="a"><freejoint/><geom size=".1"/>
          <body name="b" pos="0 0 .2" fuse="{fuse}"><geom size=".1" mass="2"/></body></body></worldbody></mujoco>"""
        m, mjm = mjl.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
        assert m.nbody == mjm.nbody == nbody
        np.testing.assert_allclose(np.asarray(m.body_mass), mjm.body_mass, rtol=1e-12)
        np.testing.assert_allclose(np.asarray(m.body_inertia), mjm.body_inertia, rtol=1e-9, atol=1e-12)
