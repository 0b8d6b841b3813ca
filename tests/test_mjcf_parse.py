"""Tests of the MJCF parser (mjx_lite/mjcf/parse.py, schema.py) against MuJoCo's own XML reader."""

from __future__ import annotations

import os
import re

import mujoco
import numpy as np
import pytest

from mjx_lite.mjcf import schema as sc
from mjx_lite.mjcf.document import parse_file, parse_string
from mjx_lite.mjcf.parse import orientation_to_quat
from mjx_lite.mjcf.spec import Element, MJCFError
from tests.oracle import reference_models

ATOL = 1e-9  # float64 round-off of rotations composed in a different order than MuJoCo's
ATOL_F32 = 1e-6  # MuJoCo stores rgba (and a few visual fields) in float32

GEOM_TYPES = ["plane", "hfield", "sphere", "capsule", "ellipsoid", "cylinder", "box", "mesh", "sdf"]


# ---------------------------------------------------------------------------------------------------------
# helpers


def section(root: Element, tag: str) -> Element:
    (s,) = root.find(tag)
    return s


def tree_lists(root: Element):
    """Bodies in MuJoCo's id order (depth-first pre-order) and their joints/geoms/sites/cameras/lights."""
    bodies = []

    def rec(b):
        bodies.append(b)
        for c in b.children:
            if c.tag == "body":
                rec(c)

    rec(section(root, "worldbody"))
    out = {"joint": [], "geom": [], "site": [], "camera": [], "light": []}
    for b in bodies:
        for c in b.children:
            if c.tag in ("joint", "freejoint"):
                out["joint"].append(c)
            elif c.tag in out:
                out[c.tag].append(c)
    return bodies, out


def canon(q):
    q = np.asarray(q, float)
    q = q / np.linalg.norm(q)
    return q if q[0] > 0 or (q[0] == 0 and q[np.nonzero(q)[0][0]] > 0) else -q


def assert_quat(a, b, atol=ATOL):
    np.testing.assert_allclose(canon(a), canon(b), atol=atol)


def compare_with_mujoco(root: Element, m: mujoco.MjModel):
    """Poses and default-resolved properties of our tree equal MuJoCo's compiled ones."""
    bodies, o = tree_lists(root)
    assert len(bodies) == m.nbody
    for i, b in enumerate(bodies[1:], 1):
        np.testing.assert_allclose(b.attrs["pos"], m.body_pos[i], atol=ATOL, err_msg=f"body {i}")
        assert_quat(b.attrs["quat"], m.body_quat[i])
    assert len(o["joint"]) == m.njnt
    for i, j in enumerate(o["joint"]):
        if j.tag == "freejoint":
            assert m.jnt_type[i] == 0
            continue
        a = j.attrs
        d = m.jnt_dofadr[i]
        assert ["free", "ball", "slide", "hinge"].index(a["type"]) == m.jnt_type[i]
        np.testing.assert_allclose(a["pos"], m.jnt_pos[i], atol=ATOL)
        if a["type"] in ("hinge", "slide"):
            np.testing.assert_allclose(a["axis"] / np.linalg.norm(a["axis"]), m.jnt_axis[i], atol=ATOL)
        np.testing.assert_allclose(a["solreflimit"], m.jnt_solref[i])
        np.testing.assert_allclose(a["solimplimit"], m.jnt_solimp[i])
        np.testing.assert_allclose(a["solreffriction"], m.dof_solref[d])
        np.testing.assert_allclose(a["solimpfriction"], m.dof_solimp[d])
        np.testing.assert_allclose(a["margin"], m.jnt_margin[i])
        np.testing.assert_allclose(a["armature"], m.dof_armature[d])
        np.testing.assert_allclose(a["frictionloss"], m.dof_frictionloss[d])
        assert a["group"] == m.jnt_group[i]
        if "springdamper" not in j.explicit:
            np.testing.assert_allclose(a["damping"][0], m.dof_damping[d])
            np.testing.assert_allclose(a["stiffness"][0], m.jnt_stiffness[i])
    assert len(o["geom"]) == m.ngeom
    for i, g in enumerate(o["geom"]):
        a = g.attrs
        assert GEOM_TYPES.index(a["type"]) == m.geom_type[i]
        for k in ("contype", "conaffinity", "condim", "priority", "group"):
            assert a[k] == getattr(m, "geom_" + k)[i], k
        for k in ("friction", "solmix", "solref", "solimp", "margin", "gap"):
            np.testing.assert_allclose(a[k], getattr(m, "geom_" + k)[i], err_msg=k)
        np.testing.assert_allclose(a["rgba"], m.geom_rgba[i], atol=ATOL_F32)
        if a["fromto"] is None and a["type"] not in ("mesh", "hfield"):
            np.testing.assert_allclose(a["pos"], m.geom_pos[i], atol=ATOL)
            assert_quat(a["quat"], m.geom_quat[i])
            nsz = {"sphere": 1, "capsule": 2, "cylinder": 2, "ellipsoid": 3, "box": 3, "plane": 0}[a["type"]]
            np.testing.assert_allclose(a["size"][:nsz], m.geom_size[i][:nsz])
    assert len(o["site"]) == m.nsite
    for i, s in enumerate(o["site"]):
        if s.attrs["fromto"] is None:
            np.testing.assert_allclose(s.attrs["pos"], m.site_pos[i], atol=ATOL)
            assert_quat(s.attrs["quat"], m.site_quat[i])
            np.testing.assert_allclose(s.attrs["size"], m.site_size[i])
    assert len(o["camera"]) == m.ncam
    for i, c in enumerate(o["camera"]):
        np.testing.assert_allclose(c.attrs["pos"], m.cam_pos[i], atol=ATOL)
        assert_quat(c.attrs["quat"], m.cam_quat[i])
    assert len(o["light"]) == m.nlight
    for i, li in enumerate(o["light"]):
        np.testing.assert_allclose(li.attrs["pos"], m.light_pos[i], atol=ATOL)
        d = li.attrs["dir"] / np.linalg.norm(li.attrs["dir"])
        np.testing.assert_allclose(d, m.light_dir[i], atol=ATOL_F32)


def both(xml: str):
    return parse_string(xml), mujoco.MjModel.from_xml_string(xml)


def err(xml: str, exc=MJCFError, **kw) -> Exception:
    with pytest.raises(exc) as e:
        parse_string(xml, **kw)
    return e.value


# ---------------------------------------------------------------------------------------------------------
# reference models


def _ref_id(p):
    return os.path.relpath(p, os.path.dirname(os.path.dirname(p)))


@pytest.mark.parametrize("path", reference_models(), ids=_ref_id)
def test_reference_model_parses_and_matches_mujoco(path):
    root = parse_file(path)
    assert root.tag == "mujoco"
    assert [c.tag for c in root.children][:4] == ["compiler", "option", "size", "statistic"]
    try:
        m = mujoco.MjModel.from_xml_path(path)
    except ValueError:  # a few test files do not compile in MuJoCo itself (e.g. lengthrange); parsing suffices
        return
    compare_with_mujoco(root, m)


def test_every_element_has_location():
    path = [p for p in reference_models() if p.endswith("humanoid/humanoid.xml")][0]
    root = parse_file(path)

    def rec(e):
        assert e.file == path and isinstance(e.line, int) and e.line > 0, e.tag
        assert isinstance(e.explicit, set) and e.explicit <= set(e.attrs), e.tag
        for c in e.children:
            rec(c)

    rec(root)


# ---------------------------------------------------------------------------------------------------------
# schema vs MuJoCo 4.0


def _printed_schema():
    out, stack, cur = {}, [], None
    for line in mujoco.mj_printSchema(False, False).splitlines():
        mt = re.match(r"^(\s*)(\S+) \((.)\)\s*(.*)$", line)
        if mt:
            stack = stack[: len(mt.group(1)) // 3] + [mt.group(2).replace("(world)", "")]
            cur = tuple(stack)
            out[cur] = set(mt.group(4).split())
        elif line.strip():
            out[cur] |= set(line.split())
    return out


def test_schema_attribute_names_match_mujoco():
    """Every element we accept takes exactly the attributes MuJoCo 4.0's reader takes."""
    checked = 0
    for path, attrs in _printed_schema().items():
        parent, tag = (path[-2] if len(path) > 1 else ""), path[-1]
        if parent == "default" and tag != "default":
            key = sc.DEFAULT_CHILDREN.get(tag)
        else:
            key = sc.key_of(parent, tag)
        if key not in sc.SCHEMA or ("deformable" in path and "flex" not in path):
            continue
        assert set(sc.SCHEMA[key]) == attrs, (path, set(sc.SCHEMA[key]) ^ attrs)
        checked += 1
    assert checked > 100


_W = (
    '<worldbody><body name="b"><joint name="j"/><geom name="g1" size=".1"/><site name="s"/><camera name="c"/>'
    '<body name="b2"><joint name="j2"/><geom name="g2" size=".1"/><site name="s2"/></body></body></worldbody>'
    '<tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
)
_TEMPLATES = {
    "body": ('<worldbody><body {A}><geom size=".1"/></body></worldbody>', {}),
    "joint": ('<worldbody><body><joint {A}/><geom size=".1"/></body></worldbody>', {}),
    "geom": ("<worldbody><geom {A}/></worldbody>", {"size": ".1"}),
    "site": ("<worldbody><site {A}/></worldbody>", {}),
    "camera": ("<worldbody><camera {A}/></worldbody>", {}),
    "light": ("<worldbody><light {A}/></worldbody>", {}),
    "inertial": ("<worldbody><body><inertial {A}/></body></worldbody>", {"pos": "0 0 0", "mass": "1"}),
    "option": ("<option {A}/>", {}),
    "compiler": ("<compiler {A}/>", {}),
    "material": ("<asset><material {A}/></asset>", {"name": "m"}),
    "texture": ("<asset><texture {A}/></asset>", {"name": "t", "builtin": "flat", "width": "8", "height": "8"}),
    "pair": (_W + "<contact><pair {A}/></contact>", {"geom1": "g1", "geom2": "g2"}),
    "weld": (_W + "<equality><weld {A}/></equality>", {"body1": "b"}),
    "equality/joint": (_W + "<equality><joint {A}/></equality>", {"joint1": "j"}),
    "fixed": (_W + '<tendon><fixed {A}><joint joint="j" coef="1"/></fixed></tendon>', {}),
    "spatial": (_W + '<tendon><spatial {A}><site site="s"/><site site="s2"/></spatial></tendon>', {}),
    "general": (_W + "<actuator><general {A}/></actuator>", {"joint": "j"}),
    "cylinder": (_W + "<actuator><cylinder {A}/></actuator>", {"joint": "j"}),
    "muscle": (_W + "<actuator><muscle {A}/></actuator>", {"joint": "j"}),
    "jointpos": (_W + "<sensor><jointpos {A}/></sensor>", {"joint": "j"}),
}


def _mujoco_accepts(key, attrs):
    tmpl, base = _TEMPLATES[key]
    xml = "<mujoco>" + tmpl.replace("{A}", " ".join(f'{k}="{v}"' for k, v in {**base, **attrs}.items())) + "</mujoco>"
    try:
        mujoco.MjSpec.from_string(xml)
        return True
    except ValueError:
        return False


@pytest.mark.parametrize("key", sorted(_TEMPLATES))
def test_value_counts_and_keywords_match_mujoco(key):
    """Vector lengths (exact vs "up to n") and keyword sets agree with MuJoCo's reader."""
    for name, a in sc.SCHEMA[key].items():
        if a.kind in ("real", "int") and a.count not in (1, -1):
            lo, hi = (a.count, a.count) if isinstance(a.count, int) else a.count
            accepted = [n for n in range(1, hi + 2) if _mujoco_accepts(key, {name: " ".join(["1"] * n)})]
            assert accepted == list(range(lo, hi + 1)), (key, name, accepted)
        elif a.kind == "keyword":
            for kw in a.keywords:
                assert _mujoco_accepts(key, {name: kw}), (key, name, kw)
            assert not _mujoco_accepts(key, {name: "bogus"}), (key, name)


def test_builtin_defaults_match_mujoco():
    """Built-in defaults of an element without attributes equal MuJoCo's compiled values."""
    xml = (
        '<mujoco><worldbody><body name="b"><joint name="j"/><geom name="g" size=".1"/><site name="s"/>'
        '<camera name="c"/><light name="l"/></body><body name="b2"><joint/><geom name="g2" size=".1"/></body>'
        '</worldbody><tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>'
        '<equality><joint joint1="j"/></equality><contact><pair geom1="g" geom2="g2"/></contact></mujoco>'
    )
    root, m = both(xml)
    compare_with_mujoco(root, m)
    opt = section(root, "option").attrs
    for k in ("timestep", "impratio", "tolerance", "ls_tolerance", "noslip_tolerance", "ccd_tolerance",
              "density", "viscosity", "o_margin", "sleep_tolerance"):  # fmt: skip
        np.testing.assert_allclose(opt[k], getattr(m.opt, k), err_msg=k)
    for k in ("gravity", "wind", "magnetic", "o_solref", "o_solimp", "o_friction"):
        np.testing.assert_allclose(opt[k], getattr(m.opt, k), err_msg=k)
    for k in ("iterations", "ls_iterations", "noslip_iterations", "ccd_iterations", "sdf_iterations",
              "sdf_initpoints"):  # fmt: skip
        assert opt[k] == getattr(m.opt, k), k
    assert sc.SCHEMA["option"]["integrator"].keywords.index(opt["integrator"]) == m.opt.integrator
    assert sc.SCHEMA["option"]["cone"].keywords.index(opt["cone"]) == m.opt.cone
    assert sc.SCHEMA["option"]["solver"].keywords.index(opt["solver"]) == m.opt.solver
    flags = section(root, "option").find("flag")[0].attrs
    for f in sc.FLAGS_ENABLED:
        assert flags[f] == "enable" and not m.opt.disableflags & getattr(mujoco.mjtDisableBit, "mjDSBL_" + f.upper())
    for f in sc.FLAGS_DISABLED:
        assert flags[f] == "disable" and not m.opt.enableflags & getattr(mujoco.mjtEnableBit, "mjENBL_" + f.upper())
    cam = tree_lists(root)[1]["camera"][0].attrs
    np.testing.assert_allclose([cam["fovy"], cam["ipd"]], [m.cam_fovy[0], m.cam_ipd[0]])
    li = tree_lists(root)[1]["light"][0].attrs
    for k in ("attenuation", "cutoff", "exponent", "ambient", "diffuse", "specular", "bulbradius", "intensity",
              "range"):  # fmt: skip
        np.testing.assert_allclose(li[k], getattr(m, "light_" + k)[0], atol=ATOL_F32, err_msg=k)
    ten = section(root, "tendon").children[0].attrs
    np.testing.assert_allclose(ten["solreflimit"], m.tendon_solref_lim[0])
    np.testing.assert_allclose(ten["solimpfriction"], m.tendon_solimp_fri[0])
    np.testing.assert_allclose(ten["springlength"], [-1, -1])  # "unset": the compiler uses the qpos0 length
    eq = section(root, "equality").children[0].attrs
    np.testing.assert_allclose(eq["solref"], m.eq_solref[0])
    np.testing.assert_allclose(eq["polycoef"], m.eq_data[0][:5])
    pair = section(root, "contact").children[0].attrs
    np.testing.assert_allclose(pair["friction"], m.pair_friction[0])
    np.testing.assert_allclose(pair["solref"], m.pair_solref[0])
    np.testing.assert_allclose(pair["solimp"], m.pair_solimp[0])
    assert pair["condim"] == m.pair_dim[0]


def test_actuator_builtin_defaults_match_mjspec():
    spec = mujoco.MjSpec()
    act = spec.add_actuator()
    g = sc.SCHEMA["general"]
    for k in ("gainprm", "biasprm", "dynprm", "gear", "ctrlrange", "forcerange", "actrange"):
        np.testing.assert_allclose(g[k].default, getattr(act, k), err_msg=k)
    assert g["actdim"].default == act.actdim


# ---------------------------------------------------------------------------------------------------------
# default classes


def test_default_classes_match_mujoco():
    xml = """
<mujoco>
  <default>
    <geom friction="0.7 0.1 0.01" rgba="1 0 0 1" solimp="0.8 0.9 0.01 0.4 3"/>
    <joint damping="0.5" armature="0.1"/>
    <site size="0.02"/>
    <default class="a">
      <geom condim="1" friction="0.3" euler="0 0 90"/>
      <joint range="-1 1" solreflimit="0.05"/>
      <default class="b">
        <geom contype="2" size="0.3 0.2 0.1" type="box"/>
        <joint stiffness="3"/>
      </default>
    </default>
    <default class="c"><geom margin="0.01" group="2"/><site rgba="0 1 0 1"/></default>
  </default>
  <worldbody>
    <geom size="1 1 0.1" type="plane"/>
    <body pos="0 0 1" childclass="a">
      <joint/>
      <geom size="0.1" friction="2"/>
      <geom class="b" quat="0 1 0 0"/>
      <geom class="c" size="0.2" solimp="0.5"/>
      <site class="c"/>
      <body childclass="b">
        <joint class="main" damping="2"/>
        <geom/>
        <frame childclass="c" pos="0 0 .5"><geom size="0.1"/><site/></frame>
        <geom/>
      </body>
    </body>
  </worldbody>
</mujoco>"""
    root, m = both(xml)
    compare_with_mujoco(root, m)
    _, o = tree_lists(root)
    g = o["geom"]
    assert g[1].attrs["friction"].tolist() == [2.0, 0.1, 0.01]  # class "a" padded from "main"
    assert g[1].explicit >= {"friction", "condim", "rgba", "solimp", "quat", "size"}
    assert "contype" not in g[1].explicit
    assert g[2].attrs["contype"] == 2 and "contype" in g[2].explicit


def test_default_class_errors():
    e = err('<mujoco><worldbody><geom class="nope" size="1"/></worldbody></mujoco>')
    assert "nope" in str(e) and e.element == "geom" and e.attribute == "class" and e.line == 1
    e = err('<mujoco><worldbody><body childclass="x"><geom size="1"/></body></worldbody></mujoco>')
    assert "'x'" in str(e) and e.attribute == "childclass"
    e = err('<mujoco><default><default class="a"/><default class="a"/></default></mujoco>')
    assert "repeated" in str(e) and e.attribute == "class"
    e = err('<mujoco><default class="x"><geom size=".3"/></default></mujoco>')
    assert "cannot be renamed" in str(e) and e.element == "default" and e.attribute == "class"
    e = err('<mujoco><default><geom name="x"/></default></mujoco>')
    assert e.element == "geom" and e.attribute == "name" and "unknown attribute" in str(e)
    e = err("<mujoco><default><body/></default></mujoco>")
    assert e.element == "body"


def test_freejoint_takes_no_defaults():
    xml = """<mujoco><default><default class="a"><joint damping="5" group="3"/></default></default>
    <worldbody><body childclass="a"><freejoint/><geom size=".1"/></body></worldbody></mujoco>"""
    root, m = both(xml)
    fj = tree_lists(root)[1]["joint"][0]
    assert fj.tag == "freejoint" and fj.attrs["group"] == m.jnt_group[0] == 0
    assert "damping" not in fj.attrs


def test_actuator_defaults_are_left_to_actuation():
    xml = """
<mujoco>
  <default>
    <motor gear="2"/>
    <default class="a">
      <position kp="10" ctrlrange="-1 1"/>
      <general dyntype="filter"/>
      <default class="b"><velocity kv="3"/></default>
    </default>
  </default>
  <worldbody><body><joint name="j"/><geom size=".1"/></body></worldbody>
  <actuator>
    <position name="p" joint="j" class="b" kp="20" gear="3"/>
    <motor name="m" joint="j"/>
  </actuator>
</mujoco>"""
    root = parse_string(xml)
    p, mo = section(root, "actuator").children
    assert p.attrs == {"name": "p", "joint": "j", "class": "b", "kp": 20.0, "gear": pytest.approx(np.array([3.0]))}
    assert p.explicit == set(p.attrs)
    assert [(d.tag, sorted(d.attrs)) for d in p.defaults] == [
        ("motor", ["gear"]),
        ("position", ["ctrlrange", "kp"]),
        ("general", ["dyntype"]),
        ("velocity", ["kv"]),
    ]
    np.testing.assert_array_equal(p.defaults[0].attrs["gear"], [2.0])  # as written: no padding
    assert [d.tag for d in mo.defaults] == ["motor"]
    e = err('<mujoco><actuator><motor joint="j" class="zz"/></actuator></mujoco>')
    assert e.element == "motor" and e.attribute == "class"


# ---------------------------------------------------------------------------------------------------------
# orientations and frames


@pytest.mark.parametrize("seq", ["xyz", "XYZ", "zyx", "ZYX", "xYz", "zxz", "YxY"])
def test_euler_sequences(seq):
    xml = f"""<mujoco><compiler eulerseq="{seq}"/><worldbody>
      <body euler="30 -50 70"><geom size=".1" euler="10 20 30"/></body></worldbody></mujoco>"""
    compare_with_mujoco(*both(xml))


def test_orientation_alternatives_radian():
    xml = """<mujoco><worldbody>
      <body axisangle="1 2 3 0.5"><geom size=".1" xyaxes="1 1 0 -1 2 0.5"/><site zaxis="0 -1 1"/>
        <site zaxis="0 0 -1"/><camera xyaxes="0 -1 0 1 0 0"/><geom size=".1" quat="1 2 3 4"/>
        <inertial pos="0 0 0" mass="1" diaginertia="1 2 3" euler="0.1 0.2 0.3"/></body>
      </worldbody><compiler angle="radian"/></mujoco>"""
    root, m = both(xml)  # <compiler> after <worldbody> still applies
    compare_with_mujoco(root, m)
    body = tree_lists(root)[0][1]
    assert body.attrs["axisangle"] is None and "quat" in body.explicit
    np.testing.assert_allclose(np.linalg.norm(body.find("geom")[1].attrs["quat"]), 1.0, atol=ATOL)


def test_orientation_from_class():
    xml = """<mujoco><default><geom type="box" size=".1 .2 .3" euler="0 0 90"/></default>
      <worldbody><geom/><geom axisangle="1 0 0 30"/></worldbody></mujoco>"""
    compare_with_mujoco(*both(xml))


def test_orientation_helper_identity():
    raw = None
    for kind, v in [("euler", [0, 0, 0]), ("axisangle", [0, 0, 1, 0]), ("xyaxes", [1, 0, 0, 0, 1, 0]),
                    ("zaxis", [0, 0, 1]), ("quat", [2, 0, 0, 0])]:  # fmt: skip
        np.testing.assert_allclose(orientation_to_quat(kind, np.array(v, float), True, "xyz", raw), [1, 0, 0, 0])


def test_multiple_orientations_is_an_error():
    e = err('<mujoco><worldbody><geom size=".1" euler="0 0 1" quat="1 0 0 0"/></worldbody></mujoco>')
    assert e.element == "geom" and e.line == 1 and "orientation" in str(e)
    e = err('<mujoco><worldbody><body xyaxes="1 0 0 0 1 0" zaxis="0 0 1"/></worldbody></mujoco>')
    assert e.element == "body" and e.attribute == "zaxis"


def test_frames_match_mujoco():
    xml = """
<mujoco>
  <worldbody>
    <frame pos="1 2 3" euler="10 20 30">
      <geom size=".1" pos="0 0 1"/>
      <body pos="0.5 0 0" quat="0 1 0 0">
        <frame xyaxes="0 1 0 -1 0 0" pos="0 1 0">
          <joint pos="0 1 0" axis="1 0 0"/>
          <geom type="capsule" size=".05" fromto="0 0 0 1 0 0"/>
          <frame zaxis="1 1 0"><site pos="0 0 1" euler="0 90 0"/><camera pos="1 0 0"/>
            <light pos="0 0 2" dir="1 0 0"/></frame>
          <body pos="0 0 1" euler="0 0 45"><joint type="slide" axis="0 1 0"/><geom size=".1"/></body>
        </frame>
        <geom size=".1"/>
      </body>
    </frame>
  </worldbody>
</mujoco>"""
    root, m = both(xml)
    compare_with_mujoco(root, m)
    _, o = tree_lists(root)
    (cap,) = [g for g in o["geom"] if g.attrs["type"] == "capsule"]
    assert cap.attrs["type"] == "capsule" and "fromto" in cap.explicit
    # fromto transformed by the frame: the capsule centre and axis match MuJoCo's
    ft = cap.attrs["fromto"]
    np.testing.assert_allclose(0.5 * (ft[:3] + ft[3:]), m.geom_pos[o["geom"].index(cap)], atol=ATOL)
    assert all(c.tag != "frame" for b in tree_lists(root)[0] for c in b.children)


def test_replicate_matches_mujoco():
    xml = """
<mujoco>
  <worldbody>
    <frame pos="0 0 1" euler="0 0 20">
      <replicate count="3" offset="1 0 0.5" euler="0 0 30" sep="-">
        <body name="b" pos="0 1 0"><joint name="j"/><geom name="g" size=".1"/>
          <replicate count="11" offset="0 0 .1"><site name="s" pos="1 0 0"/></replicate>
        </body>
      </replicate>
    </frame>
    <replicate count="2" offset="1 0 0" sep="A">
      <replicate count="3" offset="0 1 0" euler="10 0 0" sep="B">
        <frame pos="0 0 1"><body name="c"><geom size=".1"/></body></frame>
      </replicate>
    </replicate>
  </worldbody>
</mujoco>"""
    root, m = both(xml)
    compare_with_mujoco(root, m)
    bodies, o = tree_lists(root)
    assert [b.attrs.get("name") for b in bodies[1:]] == [m.body(i).name for i in range(1, m.nbody)]
    assert [s.attrs["name"] for s in o["site"]] == [m.site(i).name for i in range(m.nsite)]
    assert [j.attrs["name"] for j in o["joint"]] == ["j-0", "j-1", "j-2"]
    e = err('<mujoco><worldbody>\n<replicate offset="1 0 0"><geom size="1"/></replicate></worldbody></mujoco>')
    assert (e.element, e.attribute, e.line) == ("replicate", "count", 2)


# ---------------------------------------------------------------------------------------------------------
# includes


def test_include_files(tmp_path):
    sub = tmp_path / "sub"
    sub.mkdir()
    (tmp_path / "main.xml").write_text(
        '<mujoco model="m">\n<include file="sub/parts.xml"/>\n<worldbody>\n<include file="sub/body.xml"/>\n'
        "</worldbody>\n</mujoco>\n"
    )
    (sub / "parts.xml").write_text(
        '<mujoco><default><geom rgba="0 0 1 1"/></default><include file="opt.xml"/></mujoco>'
    )
    (sub / "opt.xml").write_text('<mujoco><option timestep="0.005"/></mujoco>')
    (sub / "body.xml").write_text('<mujoco>\n\n<body name="b"><geom size=".1"/></body></mujoco>')
    root = parse_file(str(tmp_path / "main.xml"))
    assert section(root, "option").attrs["timestep"] == 0.005
    (b,) = section(root, "worldbody").children
    assert b.attrs["name"] == "b" and b.file == str(sub / "body.xml") and b.line == 3
    assert b.children[0].attrs["rgba"].tolist() == [0, 0, 1, 1]
    m = mujoco.MjModel.from_xml_path(str(tmp_path / "main.xml"))
    assert m.opt.timestep == 0.005


def test_include_from_assets():
    assets = {"a.xml": b'<mujoco><include file="b.xml"/><worldbody><geom size=".2"/></worldbody></mujoco>',
              "b.xml": b'<mujoco><worldbody><geom size=".3"/></worldbody></mujoco>'}  # fmt: skip
    root = parse_string('<mujoco><include file="a.xml"/></mujoco>', assets=assets)
    sizes = [g.attrs["size"][0] for g in section(root, "worldbody").children]
    assert sizes == [0.3, 0.2]


def test_missing_include(tmp_path):
    (tmp_path / "main.xml").write_text('<mujoco>\n<worldbody/>\n  <include file="nothere.xml"/>\n</mujoco>')
    with pytest.raises(MJCFError) as e:
        parse_file(str(tmp_path / "main.xml"))
    assert e.value.file == str(tmp_path / "main.xml") and e.value.line == 3 and e.value.element == "include"
    assert "nothere.xml" in str(e.value) and "main.xml:3" in str(e.value)


def test_recursive_include():
    """MuJoCo includes a file at most once ("already included"), which also stops recursion."""
    assets = {"a.xml": b'<mujoco><include file="a.xml"/></mujoco>'}
    e = err('<mujoco><include file="a.xml"/></mujoco>', assets=assets)
    assert "already included" in str(e)


# ---------------------------------------------------------------------------------------------------------
# errors


def test_malformed_xml_reports_line():
    e = err("<mujoco>\n<worldbody>\n<geom size='1'>\n</worldbody>\n</mujoco>")
    assert e.file == "<string>" and e.line in (3, 4) and "malformed" in str(e)


@pytest.mark.parametrize(
    "body, element, attribute, words",
    [
        ('<worldbody>\n<geom size=".1" foo="1"/></worldbody>', "geom", "foo", "unknown attribute"),
        ('<worldbody>\n<geom size=".1 .2 .3 .4"/></worldbody>', "geom", "size", "1 to 3 values, got 4"),
        ('<worldbody>\n<geom size=".1" pos="1 2"/></worldbody>', "geom", "pos", "expected 3 values, got 2"),
        ('<worldbody>\n<geom size=".1 x"/></worldbody>', "geom", "size", "not a number"),
        ('<worldbody>\n<geom size=".1" condim="1.5"/></worldbody>', "geom", "condim", "not an integer"),
        ('<worldbody>\n<geom size=".1" type="boxx"/></worldbody>', "geom", "type", "invalid keyword 'boxx'"),
        ("<option>\n<flag gravity='off'/></option>", "flag", "gravity", "invalid keyword 'off'"),
        ('<worldbody>\n<body mocap="yes"/></worldbody>', "body", "mocap", "invalid keyword 'yes'"),
        ('<worldbody>\n<body><inertial mass="1"/></body></worldbody>', "inertial", "pos", "required"),
        ("<contact>\n<exclude body1='a'/></contact>", "exclude", "body2", "required"),
        ("<sensor>\n<rangefinder/></sensor>", "rangefinder", "site", "one of"),
        ("<sensor>\n<contact data='found bogus'/></sensor>", "contact", "data", "invalid keyword 'bogus'"),
        ('<compiler eulerseq="xyw"/>\n<worldbody/>', "compiler", "eulerseq", "eulerseq"),
        ('<compiler coordinate="global"/>\n<worldbody/>', "compiler", "coordinate", "invalid keyword 'global'"),
    ],
)
def test_attribute_errors(body, element, attribute, words):
    e = err("<mujoco>" + body + "</mujoco>")
    assert (e.element, e.attribute, e.file) == (element, attribute, "<string>")
    assert words in str(e) and f"<{element}>" in str(e) and f"'{attribute}'" in str(e)
    assert e.line == (1 if element == "compiler" else 2)


@pytest.mark.parametrize(
    "body, element",
    [
        ("<worldbody>\n<bodyy/></worldbody>", "bodyy"),
        ("<worldbody>\n<body><geom size='1'><joint/></geom></body></worldbody>", "joint"),
        ("<foo/>\n", "foo"),
        ("<actuator>\n<joint/></actuator>", "joint"),
        ("<tendon>\n<fixed><site site='a'/></fixed></tendon>", "site"),
    ],
)
def test_unknown_element(body, element):
    e = err("<mujoco>" + body + "</mujoco>")
    assert e.element == element and "unknown element" in str(e) and e.line in (1, 2)


@pytest.mark.parametrize(
    "body, feature",
    [
        ("<worldbody>\n<flexcomp name='f'><edge equality='vert'/></flexcomp></worldbody>", "equality='vert'"),
        ("<worldbody>\n<body><composite/></body></worldbody>", "composite"),
        ("<extension>\n<plugin plugin='acme.x'/></extension>", "plugin 'acme.x' is a third-party plugin"),
        ("<extension>\n<plugin plugin='mujoco.elasticity.cable'/></extension>", "'mujoco.elasticity.cable'"),
        ("<deformable>\n<flex><plugin plugin='mujoco.elasticity.shell'/></flex></deformable>", "(in <flex>)"),
        ("<extension><plugin plugin='acme.s'/></extension><sensor>\n<plugin plugin='acme.s'/></sensor>",
         "plugin 'acme.s'"),
        ("<equality>\n<flexvert/></equality>", "flexvert"),
    ],
)
def test_unsupported_features(body, feature):
    with pytest.raises(NotImplementedError) as e:
        parse_string("<mujoco>" + body + "</mujoco>")
    msg = str(e.value)
    assert feature in msg and ("<string>:2" in msg or "<string>:1" in msg)


# ---------------------------------------------------------------------------------------------------------
# tree layout


def test_sections_merged_and_always_present():
    root = parse_string(
        '<mujoco><worldbody><geom size="1"/></worldbody><option timestep="0.01"/>'
        '<worldbody><geom size="2"/></worldbody><option><flag gravity="disable"/></option>'
        '<option iterations="5"/><custom><numeric name="n" data="1 2"/></custom>'
        "<visual><global offwidth='100'/></visual></mujoco>"
    )
    tags = [c.tag for c in root.children]
    assert tags == ["compiler", "option", "size", "statistic", "visual", "worldbody", "custom"]
    opt = section(root, "option")
    assert (opt.attrs["timestep"], opt.attrs["iterations"]) == (0.01, 5)
    assert opt.explicit == {"timestep", "iterations"}
    assert opt.find("flag")[0].attrs["gravity"] == "disable"
    assert [g.attrs["size"][0] for g in section(root, "worldbody").children] == [1.0, 2.0]
    assert section(root, "statistic").attrs["extent"] is None


def test_springlength_and_partial_vectors():
    xml = """<mujoco><worldbody><body><joint name="j" damping="1 2"/><geom size=".1"/></body></worldbody>
      <tendon><fixed name="t" springlength="0.5"><joint joint="j" coef="1"/></fixed></tendon></mujoco>"""
    root, m = both(xml)
    np.testing.assert_allclose(section(root, "tendon").children[0].attrs["springlength"], m.tendon_lengthspring[0])
    j = tree_lists(root)[1]["joint"][0]
    np.testing.assert_allclose(j.attrs["damping"], [1, 2, 0])
    np.testing.assert_allclose(j.attrs["damping"][0], m.dof_damping[0])
