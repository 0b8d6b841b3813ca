"""Oracle tests of the section passes (tendons, equality, actuators, sensors, contact pairs/excludes).

Every model is compiled by mjx_lite and by MuJoCo 4.0; the section fields (tendon_*, wrap_*, eq_*, actuator_*,
sensor_*, pair_*, exclude_*, jnt_actuatorid) and names are compared: integers exactly, floats to RTOL.
"""

import dataclasses
import os

import mujoco
import numpy as np
import pytest

from mjx_lite.mjcf import compile as mjcf_compile
from mjx_lite.mjcf import document
from mjx_lite.mjcf.spec import MJCFError, MJCFUnsupportedError
from tests.oracle import load_supported, reference_models

RTOL = 1e-6  # compile-time constants, float64 (qpos0 quantities go through a different but exact algebra)
ATOL = 1e-9  # float64 round-off on values that are zero in MuJoCo
PREFIXES = ("tendon_", "wrap_", "eq_", "actuator_", "sensor_", "pair_", "exclude_", "jnt_actuatorid")
NAMED = {"tendon": mujoco.mjtObj.mjOBJ_TENDON, "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
         "sensor": mujoco.mjtObj.mjOBJ_SENSOR, "equality": mujoco.mjtObj.mjOBJ_EQUALITY,
         "pair": mujoco.mjtObj.mjOBJ_PAIR, "exclude": mujoco.mjtObj.mjOBJ_EXCLUDE}  # fmt: skip
NUM = {"tendon": "ntendon", "actuator": "nactuator", "sensor": "nsensor", "equality": "neq", "pair": "npair",
       "exclude": "nexclude"}  # fmt: skip
# NotImplementedError of a part another engineer is still writing (pipeline stage, hfield collisions, ...)
PENDING = ("does not exist yet", "not implemented yet")


def _ours_string(xml: str):
    try:
        return mjcf_compile.compile_model(document.parse_string(xml))
    except NotImplementedError as e:
        if any(p in str(e) for p in PENDING):
            pytest.skip(f"pipeline dependency missing: {e}")
        raise


def _ours_file(path: str):
    try:
        return mjcf_compile.compile_model(document.parse_file(path), model_dir=os.path.dirname(path))
    except NotImplementedError as e:
        if any(p in str(e) for p in PENDING):
            pytest.skip(f"pipeline dependency missing: {e}")
        raise


def mismatches(m, mj) -> list[str]:
    """Section fields and names of our Model `m` that differ from MuJoCo's `mj`."""
    out = []
    for f in dataclasses.fields(m):
        n = f.name
        if not n.startswith(PREFIXES) or not hasattr(mj, n):  # our own derived tables (e.g. tendon_frictional)
            continue
        a, b = np.asarray(getattr(m, n)), np.asarray(getattr(mj, n))
        if a.shape != b.shape:
            out.append(f"{n}: shape {a.shape} vs MuJoCo {b.shape}")
        elif b.dtype.kind in "iub":
            if not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
                out.append(f"{n}: {a.tolist()} vs MuJoCo {b.tolist()}")
        elif not np.allclose(a, b, rtol=RTOL, atol=ATOL):
            bad = np.argwhere(~np.isclose(a, b, rtol=RTOL, atol=ATOL))[:4]
            out.append(f"{n} at {bad.tolist()}: {[a[tuple(i)] for i in bad]} vs MuJoCo {[b[tuple(i)] for i in bad]}")
    for kind, objtype in NAMED.items():
        names = tuple(mujoco.mj_id2name(mj, objtype, i) or "" for i in range(getattr(mj, NUM[kind])))
        if tuple(m.names.get(kind, ())) != names:
            out.append(f"names[{kind}]: {m.names.get(kind)} vs MuJoCo {names}")
    for k in ("ntendon", "nwrap", "neq", "nu", "nactuator", "nhistory", "na", "nsensor", "nsensordata", "npair",
              "nexclude"):
        if getattr(m, k) != getattr(mj, k):
            out.append(f"{k}: {getattr(m, k)} vs MuJoCo {getattr(mj, k)}")
    return out


def check_string(xml: str):
    mj = mujoco.MjModel.from_xml_string(xml)
    m = _ours_string(xml)
    bad = mismatches(m, mj)
    assert not bad, "\n".join(bad)
    return m, mj


# ---------------------------------------------------------------------------------------------- small models

TREE = """
<worldbody>
  <site name="w0" pos="0 0 1"/>
  <body name="a" euler="0 0 30"><joint name="hinge" range="-1 2" limited="true" springref="20"/>
    <geom name="ga" size=".1" mass="1"/><site name="s0" pos=".1 0 0"/>
    <body name="b" pos="0 0 1" euler="10 0 0">
      <joint name="slide" type="slide" axis="1 0 0" range="-.5 .5" limited="true"/>
      <geom name="gb" type="cylinder" fromto="0 -0.1 0 0 0.1 0" size=".1"/><geom name="gs" size=".08" pos="0 .3 0"/>
      <site name="s1" pos=".2 0 0"/><site name="side" pos=".3 0 0"/><site name="s3" pos=".2 .2 .1"/>
      <body name="c" pos="0 0 .5"><joint name="ball" type="ball"/><geom size=".05 .1" type="capsule"/>
        <site name="s4" pos="0 0 .1"/></body>
    </body>
  </body>
  <body name="free" pos="2 0 0" quat="0.9 0.1 0.3 0.2"><freejoint name="free"/><geom name="gf" size=".1"/>
    <site name="s2" pos=".05 0 0"/></body>
  <camera name="cam" pos="0 -3 1" xyaxes="1 0 0 0 0.3 1"/>
</worldbody>
"""


def model(body: str, compiler: str = '<compiler autolimits="true"/>', defaults: str = "") -> str:
    return f"<mujoco>{compiler}{defaults}{TREE}{body}</mujoco>"


TENDONS = """
<tendon>
  <fixed name="t0" range="0 1" stiffness="1 2" damping="3 .5 .25" springlength="0.3" solreflimit="0.01 2"
         solimplimit="0.8 0.9 0.01 0.4 3" frictionloss="0.1" margin="0.01" group="2" armature="0.2">
    <joint joint="hinge" coef="2"/><joint joint="slide" coef="-1"/></fixed>
  <spatial name="t1" limited="true" range="0.1 5" width="0.01" frictionloss="0.5" solreffriction="0.03 1"
           solimpfriction="0.7 0.8 0.002 0.5 2" actuatorfrcrange="-2 2">
    <site site="w0"/><site site="s0"/><geom geom="gb" sidesite="side"/><site site="s1"/><pulley divisor="2"/>
    <site site="s1"/><geom geom="gs"/><site site="s3"/><site site="s2"/></spatial>
  <fixed name="t2" springlength="0.1 0.4" actuatorfrclimited="false" actuatorfrcrange="-1 1">
    <joint joint="slide" coef="1"/></fixed>
  <spatial name="t3" springlength="0.2"><pulley divisor="3"/><site site="s0"/><site site="s4"/></spatial>
</tendon>
"""

EQUALITY = """
<equality>
  <connect name="c0" body1="a" body2="b" anchor="0 0 0.5"/>
  <connect body1="b" anchor="1 2 3" solref="0.05 1" solimp="0.8 0.9 0.01 0.4 3"/>
  <connect site1="s0" site2="s1"/>
  <weld body1="b" body2="free"/>
  <weld body1="b" body2="free" anchor="0.1 0.2 0.3" torquescale="3"/>
  <weld body1="c" relpose="1 2 3 0.5 0.5 0.5 0.5"/>
  <weld body1="b" body2="free" relpose="1 2 3 0 0 0 0"/>
  <weld site1="s1" site2="s2" active="false" torquescale="2"/>
  <joint joint1="hinge" joint2="slide" polycoef="0 1 2"/>
  <joint joint1="slide"/>
  <tendon name="te" tendon1="t0" tendon2="t2" polycoef="0.1 1 0 0 0.5"/>
</equality>
"""

SHORTCUTS = """
<actuator>
  <motor name="m" joint="hinge" gear="2" ctrlrange="-1 1" forcerange="-3 3" group="3"/>
  <position joint="hinge" kp="10" kv="2"/>
  <position joint="slide" kp="10" dampratio="1"/>
  <position joint="hinge" kp="3" timeconst="0.1" inheritrange="0.8"/>
  <position tendon="t0" kp="3" inheritrange="1.2" dampratio="0.7"/>
  <velocity joint="slide" kv="5" ctrllimited="false" ctrlrange="-1 1"/>
  <intvelocity joint="hinge" kp="4" actrange="-1 1"/>
  <intvelocity joint="slide" kp="4" kv="1" inheritrange="1"/>
  <damper joint="hinge" kv="2" ctrlrange="0 3"/>
  <cylinder joint="slide" timeconst="0.2" area="0.5" bias="1 2 3"/>
  <cylinder joint="slide" diameter="0.3"/>
  <muscle name="mus" tendon="t0" timeconst="0.02 0.05" tausmooth="0.1" range="0.6 1.2" force="100" scale="150"
          lmin="0.4" lmax="1.5" vmax="2" fpmax="1.2" fvmax="1.3" lengthrange="0.1 0.5"/>
  <adhesion body="b" gain="3" ctrlrange="0 1"/>
  <general joint="hinge" dyntype="filter" gaintype="affine" biastype="affine" dynprm="0.3" gainprm="1 2 3"
           biasprm="4 5 6" actearly="true" actlimited="true" actrange="-2 2" input="vel"/>
  <general joint="slide" dyntype="user" actdim="3" gaintype="user" biastype="user"/>
  <general jointinparent="free" gear="1 2 3 .1 .2 .3"/>
  <general joint="free" gear="1 2 3 .1 .2 .3"/>
  <motor joint="ball" gear="0 0 1"/>
  <motor jointinparent="ball" gear="1 0 0"/>
  <motor joint="slide" damping="1 2 3" gear="3"/>
  <muscle tendon="t0"/><muscle joint="hinge" gear="-2"/>
  <motor joint="hinge" armature="0.1" gear="3"/><motor tendon="t0" armature="0.3"/>
  <position joint="slide" kp="2" dampratio="1" armature="0.1"/>
</actuator>
"""

SENSORS = """
<sensor>
  <touch site="s0"/><accelerometer name="acc" site="s0" noise="0.1" cutoff="2"/><velocimeter site="s0"/>
  <gyro site="s0"/><force site="s0"/><torque site="s0"/><magnetometer site="s0"/>
  <rangefinder site="s0"/><rangefinder site="s0" data="dist point normal"/>
  <jointpos joint="hinge"/><jointvel joint="slide"/><tendonpos tendon="t0"/><tendonvel tendon="t1"/>
  <actuatorpos actuator="m"/><actuatorvel actuator="m"/><actuatorfrc actuator="mus"/>
  <jointactuatorfrc joint="hinge"/><tendonactuatorfrc tendon="t0"/><ballquat joint="ball"/><ballangvel joint="ball"/>
  <jointlimitpos joint="hinge"/><jointlimitvel joint="hinge"/><jointlimitfrc joint="hinge"/>
  <tendonlimitpos tendon="t0"/><tendonlimitvel tendon="t0"/><tendonlimitfrc tendon="t1"/>
  <framepos objtype="body" objname="b"/><framequat objtype="xbody" objname="b" reftype="site" refname="s0"/>
  <framexaxis objtype="geom" objname="ga"/><frameyaxis objtype="site" objname="s1"/>
  <framezaxis objtype="camera" objname="cam" reftype="geom" refname="gb"/>
  <framelinvel objtype="body" objname="b" reftype="body" refname="a"/><frameangvel objtype="site" objname="s0"/>
  <framelinacc objtype="site" objname="s0"/><frameangacc objtype="body" objname="free"/>
  <subtreecom body="a"/><subtreelinvel body="a"/><subtreeangmom body="world"/>
  <insidesite objtype="body" objname="b" site="s0"/>
  <contact/><contact geom1="ga" data="found force dist" num="3" reduce="mindist"/>
  <contact body1="a" subtree2="free" data="pos normal tangent linvel"/><contact site="s0" reduce="netforce"/>
  <contact subtree1="b" geom2="gf" data="torque angvel" reduce="maxforce" num="2"/>
  <e_potential/><e_kinetic/><clock name="clk"/>
  <jointpos joint="hinge" interval="0.1"/><jointpos joint="hinge" interval="0.1 -0.05"/>
</sensor>
"""

CONTACT = """
<contact>
  <pair name="p0" geom1="gb" geom2="ga"/>
  <pair name="p1" geom1="ga" geom2="gf" condim="6" friction="0.7 0.8" solref="0.01 2" solreffriction="0.02 1"
        solimp="0.8 0.9 0.01 0.4 3" margin="0.1" gap="0.05"/>
  <pair name="p2" geom1="gs" geom2="gb" class="pc"/>
  <pair geom1="gf" geom2="gb" condim="1"/>
  <exclude name="e0" body1="b" body2="a"/>
  <exclude name="e1" body1="free" body2="world"/>
  <exclude body1="c" body2="a"/>
</contact>
"""
ALL_DEFAULTS = """<default><equality solref="0.03 1.5"/>
  <default class="pc"><pair condim="4" friction="0.3"/></default></default>"""


@pytest.fixture(scope="module")
def all_sections():
    """One model with every section (few models = few compilations of the qpos0 pipeline)."""
    compiler = '<compiler autolimits="true"><lengthrange uselimit="true"/></compiler>'
    xml = model(TENDONS + EQUALITY + SHORTCUTS + SENSORS + CONTACT, compiler=compiler, defaults=ALL_DEFAULTS)
    mj = mujoco.MjModel.from_xml_string(xml)
    return _ours_string(xml), mj


@pytest.mark.parametrize(
    "prefixes",
    [
        ("tendon_", "wrap_"),
        ("eq_",),
        ("actuator_", "jnt_actuatorid", "tendon_actuatorid"),
        ("sensor_",),
        ("pair_", "exclude_"),
    ],
    ids=["tendon", "equality", "actuator", "sensor", "contact"],
)
def test_sections(all_sections, prefixes):
    m, mj = all_sections
    bad = [b for b in mismatches(m, mj) if _concerns(b, prefixes)]
    assert not bad, "\n".join(bad)


_SIZE_OF = {"tendon_": ("ntendon", "nwrap", "names[tendon]"), "eq_": ("neq", "names[equality]"),
            "actuator_": ("nu", "nactuator", "na", "names[actuator]"),
            "sensor_": ("nsensor", "nsensordata", "names[sensor]"),
            "pair_": ("npair", "names[pair]"), "exclude_": ("nexclude", "names[exclude]")}  # fmt: skip


def _concerns(line: str, prefixes) -> bool:
    head = line.split(":")[0].split(" ")[0]
    return head.startswith(prefixes) or any(head in _SIZE_OF.get(p, ()) for p in prefixes)


@pytest.mark.slow
def test_tendon_defaults_and_autolimits_off():
    defaults = '<default><tendon stiffness="5" range="0 2" limited="true"/><default class="c"><tendon damping="1"/>' \
               "</default></default>"  # fmt: skip
    body = """<tendon><fixed class="c" limited="false"><joint joint="hinge" coef="1"/></fixed>
              <spatial><site site="s0"/><site site="s1"/></spatial></tendon>"""
    check_string(model(body, '<compiler autolimits="false"/>', defaults))


# each case: (class defaults, actuators of that class); all cases go into one model, one class each
DEFAULT_CASES = [
    ('<position kp="10" kv="2"/>', '<position joint="hinge"/><motor joint="hinge"/><general joint="hinge"/>'
     '<velocity joint="hinge"/><intvelocity joint="hinge"/><muscle tendon="t" lengthrange="0 1"/>'),
    ('<position kp="10" dampratio="1" timeconst="0.2" inheritrange="2"/>',
     '<position joint="slide" kp="3"/><general joint="hinge"/><position joint="hinge" kv="1"/>'),
    ('<general gainprm="5 6" biasprm="1 2 3" dyntype="filterexact" dynprm="2 3"/>',
     '<motor joint="hinge"/><position joint="hinge"/><general joint="hinge"/><velocity joint="slide"/>'
     '<intvelocity joint="slide"/><cylinder joint="slide"/><adhesion body="b" ctrlrange="0 1"/>'),
    ('<general gaintype="affine" gainprm="0 0 -4"/>',
     '<damper joint="hinge" ctrlrange="0 1"/><general joint="slide"/>'),
    ('<muscle force="100" timeconst="0.1 0.2" range="0.5 1.2"/>',
     '<muscle tendon="t" lengthrange="0 1"/><muscle tendon="t" scale="3" lengthrange="0 1"/>'
     '<general tendon="t" lengthrange="0 1"/><position joint="hinge"/>'),
    ('<cylinder timeconst="3" area="2" bias="1 0 0"/>', '<cylinder joint="slide"/><general joint="slide"/>'
     '<position joint="slide" kp="2"/>'),
    ('<motor gear="3" ctrlrange="-1 1" forcerange="-2 2" group="2"/>',
     '<position joint="hinge"/><damper joint="hinge" ctrlrange="0 1"/><general joint="slide"/>'),
    ('<adhesion gain="5"/>', '<adhesion body="b" ctrlrange="0 1"/>'),
]  # fmt: skip
NESTED = (
    """<default class="n"><position kp="7"/><default class="nA"><position kv="2"/>
             <default class="nB"><velocity kv="3"/></default></default>
             <default class="nC"><general ctrlrange="-1 1" gear="2"/></default></default>""",
    """<position joint="hinge" class="nA"/><position joint="hinge" class="nB"/><velocity joint="hinge" class="nB"/>
             <general joint="hinge" class="nB"/><position joint="slide" class="nC"/>
             <motor joint="slide" class="nC"/>""",
)
ACT_TENDON = '<tendon><fixed name="t" range="0 2"><joint joint="hinge" coef="1"/><joint joint="slide" coef="2"/>' \
             "</fixed></tendon>"  # fmt: skip


def test_actuator_defaults():
    """Shortcut/general default inheritance (MuJoCo 4.0 rules), each case in its own class."""
    defaults = "".join(f'<default class="k{i}">{d}</default>' for i, (d, _) in enumerate(DEFAULT_CASES))
    acts = "".join(a.replace("/>", f' class="k{i}"/>') for i, (_, a) in enumerate(DEFAULT_CASES))
    xml = model(ACT_TENDON + f"<actuator>{acts}{NESTED[1]}</actuator>",
                defaults=f"<default>{defaults}{NESTED[0]}</default>")  # fmt: skip
    check_string(xml)


@pytest.mark.slow
def test_actuator_site_and_slidercrank_transmissions():
    body = """<actuator><general site="s2" gear="1 0 0 0 0 1"/><position site="s4" refsite="s0" kp="2"
              gear="0 1 0 0 0 0"/><motor cranksite="s3" slidersite="s1" cranklength="0.5"/>
              <position cranksite="s0" slidersite="s1" cranklength="1.5" dampratio="0.5"/></actuator>"""
    check_string(model(body))


LENGTHRANGE = """<mujoco><compiler autolimits="true"/><option timestep="0.005"/>
<worldbody><body><joint name="h" range="-30 60"/><geom size=".1" pos=".2 0 0" mass="1"/><site name="a" pos=".3 0 0"/>
  <body pos=".4 0 0"><joint name="free_slide" type="slide"/><geom size=".05"/></body></body>
  <site name="w" pos=".3 .3 0"/></worldbody>
<tendon><spatial name="sp"><site site="w"/><site site="a"/></spatial></tendon>
<actuator><muscle joint="h"/><muscle tendon="sp"/>{extra}</actuator></mujoco>"""


@pytest.mark.slow
def test_muscle_lengthrange_simulation():
    """Targets without uselimit: MuJoCo's damped simulation (mj_setLengthRange), run with our pipeline."""
    check_string(LENGTHRANGE.format(extra=""))


@pytest.mark.slow
def test_muscle_lengthrange_unlimited_is_an_error():
    xml = LENGTHRANGE.format(extra='<muscle name="unlimited" joint="free_slide"/>')
    with pytest.raises(ValueError):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(MJCFError, match="unlimited"):
        _ours_string(xml)


# ---------------------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    "body, attribute",
    [
        ('<tendon><fixed><joint joint="nope" coef="1"/></fixed></tendon>', "joint"),
        ('<tendon><spatial><site site="s0"/><site site="nope"/></spatial></tendon>', "site"),
        ('<tendon><spatial><site site="s0"/><geom geom="gb" sidesite="nope"/><site site="s1"/></spatial></tendon>',
         "sidesite"),
        ('<actuator><motor tendon="nope"/></actuator>', "tendon"),
        ('<actuator><motor joint="hinge" cranklength="1"/></actuator>', "cranklength"),
        ('<actuator><position joint="hinge" kv="1" dampratio="1"/></actuator>', "dampratio"),
        ('<actuator><position joint="hinge" inheritrange="1" ctrlrange="0 1"/></actuator>', "inheritrange"),
        ('<actuator><general joint="hinge" dyntype="bogus"/></actuator>', "dyntype"),
        ('<equality><joint joint1="hinge" polycoef="1 2 3 4 5 6"/></equality>', "polycoef"),
        ('<equality><weld body1="nope"/></equality>', "body1"),
        ('<sensor><rangefinder site="s0" data="dist bogus"/></sensor>', "data"),
        ('<sensor><contact data="dist found"/></sensor>', "data"),
        ('<sensor><framepos objtype="joint" objname="hinge"/></sensor>', "objtype"),
        ('<sensor><jointpos joint="ball"/></sensor>', "joint"),
        ('<contact><pair geom1="ga" geom2="nope"/></contact>', "geom2"),
        ('<contact><exclude body1="a" body2="nope"/></contact>', "body2"),
    ],
)  # fmt: skip
def test_bad_input(body, attribute):
    with pytest.raises(MJCFError) as info:
        _ours_string(model(body))
    e = info.value
    assert e.attribute == attribute, str(e)
    assert e.line is not None and e.element is not None, str(e)


def test_unsupported_actuator_is_refused():
    with pytest.raises((MJCFError, NotImplementedError), match="plugin"):
        _ours_string(model('<actuator><plugin plugin="x" joint="ball"/></actuator>'))


def test_autolimits_false_requires_limited():
    with pytest.raises(MJCFError, match="ctrllimited"):
        _ours_string(model('<actuator><motor joint="hinge" ctrlrange="-1 1"/></actuator>',
                           compiler='<compiler autolimits="false"/>'))  # fmt: skip


# ---------------------------------------------------------------------------------------------- reference models

_SECTION_TAGS = ("<tendon", "<equality", "<actuator", "<sensor", "<contact")
_QUICK = ("tendon/fixed.xml", "sensor/sensor.xml")


def _reference_with_sections():
    out = []
    for f in reference_models():
        with open(f) as fh:
            text = fh.read()
        if not any(t in text for t in _SECTION_TAGS):
            continue
        # each model costs a fresh compilation of the qpos0 pipeline: only two small ones run by default
        marks = [] if any(f.endswith(q) for q in _QUICK) else [pytest.mark.slow]
        out.append(pytest.param(f, id=os.path.relpath(f, os.path.dirname(os.path.dirname(f))), marks=marks))
    return out


@pytest.mark.parametrize("path", _reference_with_sections())
def test_reference_model(path):
    try:
        mj = mujoco.MjModel.from_xml_path(path)
    except ValueError as e:
        pytest.skip(f"MuJoCo itself rejects this model: {str(e).splitlines()[0]}")
    try:
        m = _ours_file(path)
    except MJCFUnsupportedError:  # sensor.xml's camprojection sensors are refused: compare the rest of the model
        m, mj, _ = load_supported(path)
    bad = mismatches(m, mj)
    assert not bad, "\n".join(bad)
