"""The visual data the renderer draws from, compiled into the Model with mjModel's names, against MuJoCo's compiler
field by field: geom/site colours and materials, every mat_* and light_* field, tex_type, the <visual> settings the
Model keeps (m.vis.global_ / headlight / map) and the builtin-texture description (tex_builtin/rgb1/rgb2, against
MuJoCo's parsed spec: mjModel keeps generated pixels instead). Models: the renderer's reference models
(tests/test_render.py), its every-geom scene, and VISUAL_XML below (materials with layers, default classes, every
light type and mode, a skybox, several <visual> sections)."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

import mjx_lite
from benchmarks import render_compare as rc
from mjx_lite import types
from mjx_lite.mjcf.spec import MJCFError
from tests import oracle

# The fields compared, named one by one (so that none is skipped because a name is misspelt on either side).
GEOM_SITE = ("geom_rgba", "geom_matid", "site_rgba", "site_matid")
MATERIAL = ("mat_rgba", "mat_emission", "mat_specular", "mat_shininess", "mat_reflectance", "mat_metallic",
            "mat_roughness", "mat_texrepeat", "mat_texuniform", "mat_texid")  # fmt: skip
TEXTURE = ("tex_type",)
LIGHT = ("light_type", "light_active", "light_castshadow", "light_texid", "light_ambient", "light_diffuse",
         "light_specular", "light_attenuation", "light_cutoff", "light_exponent", "light_intensity", "light_range",
         "light_bulbradius", "light_softness")  # fmt: skip
FIELDS = GEOM_SITE + MATERIAL + TEXTURE + LIGHT
# MuJoCo stores these floats (colours, material and light parameters, mjVisual) as float32 copies of the decimal
# text it read: our float64 value of the same text, rounded to float32, is MuJoCo's value exactly. No tolerance.
F32_ULPS = 0

VISUAL_XML = """
<mujoco>
  <visual>
    <global fovy="50" azimuth="120" elevation="-30"/>
    <headlight ambient=".2 .2 .2" diffuse=".3 .3 .3" specular=".1 .2 .3" active="1"/>
    <map znear=".02" zfar="40"/>
  </visual>
  <visual><headlight active="false"/><map zfar="35.5"/></visual>
  <default>
    <material specular=".3" rgba=".9 .9 .9 1"/>
    <default class="lamp"><light diffuse=".1 .2 .3" castshadow="false" range="4" intensity="2"/></default>
    <default class="red"><geom rgba="1 0 0 1" material="plain"/><site rgba="0 1 0 .5"/>
      <material shininess=".9" metallic=".7" roughness=".2"/></default>
  </default>
  <asset>
    <texture name="sky" type="skybox" builtin="gradient" rgb1=".1 .2 .3" rgb2=".4 .5 .6" width="8" height="8"/>
    <texture name="grid" type="2d" builtin="checker" rgb1=".9 .8 .7" rgb2=".1 .1 .1" width="16" height="16"
             mark="edge" markrgb="1 1 1"/>
    <texture name="flat" type="cube" builtin="flat" rgb1=".3 .3 .3" width="4"/>
    <texture name="default_colours" type="2d" builtin="gradient" width="4" height="4"/>
    <material name="floor" texture="grid" texrepeat="3 4" texuniform="true" emission=".1" specular=".2"
              shininess=".3" reflectance=".4" rgba=".5 .6 .7 .8"/>
    <material name="layers"><layer role="rgb" texture="grid"/><layer role="normal" texture="flat"/>
      <layer role="orm" texture="grid"/><layer role="emissive" texture="default_colours"/></material>
    <material name="plain"/>
    <material name="classy" class="red"/>
    <mesh name="tet" vertex="0 0 0 1 0 0 0 1 0 0 0 1" face="0 2 1 0 1 3 0 3 2 1 2 3" material="classy"/>
  </asset>
  <worldbody>
    <light name="spot" pos="0 0 3" ambient=".1 .1 .1" diffuse=".5 .6 .7" specular=".2 .3 .4" attenuation="1 .1 .01"
           cutoff="30" exponent="5" castshadow="false" active="false" bulbradius=".05" softness=".4"/>
    <light directional="true" dir="0 1 -1"/>
    <light type="point" class="lamp" pos="1 1 1" texture="grid"/>
    <geom type="plane" size="1 1 .1" material="floor"/>
    <geom class="red" size=".1"/>
    <geom size=".1" material="floor" rgba=".5 .5 .5 1"/>
    <body pos="0 0 1"><freejoint/>
      <geom type="mesh" mesh="tet"/>
      <geom type="box" mesh="tet" pos=".5 0 0"/>
      <geom type="capsule" size=".05 .1" pos="0 .5 0" rgba=".3 .6 .9 1"/>
      <geom type="sphere" size=".1" material="layers" rgba=".2 .3 .4 0"/>
      <site material="layers" rgba=".1 .2 .3 .4"/>
      <site class="red"/>
      <light mode="targetbody" target="world" diffuse="1 1 1" type="image"/>
    </body>
  </worldbody>
</mujoco>"""

# discardvisual: MuJoCo deletes every material and texture (after the repeated-name check) before compiling or
# resolving them: missing files, dangling references and unnamed assets are accepted, every matid is -1
DISCARDED_XML = """
<mujoco>
  <compiler discardvisual="true"/>
  <asset>
    <texture name="grid" type="2d" builtin="checker" width="8" height="8"/>
    <texture name="gone" type="2d" file="no_such_file.png"/><texture builtin="flat"/>
    <material name="used" texture="grid"/><material name="unused" rgba="1 0 0 1"/><material texture="nope"/>
  </asset>
  <worldbody>
    <light texture="nope"/>
    <geom size=".2" contype="0" conaffinity="0" material="unused"/>
    <body><joint/><geom size=".1" material="used" rgba="0 1 0 1"/><geom size=".1" material="nope"/>
      <site material="unused"/></body>
  </worldbody>
</mujoco>"""


def _field_errors(ours: types.Model, mjm: mujoco.MjModel) -> list[str]:
    errs = []
    for name in FIELDS:
        a, b = np.asarray(getattr(ours, name)), np.asarray(getattr(mjm, name))
        if a.shape != b.reshape(a.shape).shape:
            errs.append(f"{name}: shape {a.shape} != {b.shape}")
        elif b.dtype == np.float32:
            if not np.array_equal(a.astype(np.float32), b.reshape(a.shape)):
                errs.append(f"{name}: ours (as float32) {a.astype(np.float32).tolist()} != MuJoCo {b.tolist()}")
        elif not np.array_equal(a.astype(np.int64), b.reshape(a.shape).astype(np.int64)):
            errs.append(f"{name}: ours {a.tolist()} != MuJoCo {b.tolist()}")
    for group, fields in types.VISUAL_DEFAULTS.items():
        for k in fields:
            a, b = np.asarray(getattr(getattr(ours.vis, group), k)), np.asarray(getattr(getattr(mjm.vis, group), k))
            dtype = np.float32 if b.dtype.kind == "f" else np.int64  # (mjVisual's floats arrive as Python floats)
            if not np.array_equal(a.astype(dtype), b.astype(dtype)):
                errs.append(f"vis.{group}.{k}: ours {a.tolist()} != MuJoCo {b.tolist()}")
    return errs


def _compare(ours: types.Model, mjm: mujoco.MjModel, spec: mujoco.MjSpec) -> None:
    sizes = [f"{k}: {getattr(ours, k)} != {getattr(mjm, k)}" for k in ("ngeom", "nsite", "nmat", "ntex", "nlight")
             if getattr(ours, k) != getattr(mjm, k)]  # fmt: skip
    assert not sizes, sizes
    errs = _field_errors(ours, mjm) + oracle.compare_textures_with_spec(ours, spec)
    assert not errs, "\n".join(errs)


@pytest.fixture(scope="module")
def every_geom_path(tmp_path_factory):
    return rc.every_geom_path(str(tmp_path_factory.mktemp("every_geom")))


@pytest.mark.parametrize("name", [*rc.REFERENCE, "every_geom"])
def test_renderer_reference_models(name, request):
    path = request.getfixturevalue("every_geom_path") if name == "every_geom" else rc.REFERENCE[name]
    _compare(mjx_lite.load_mjcf(path), mujoco.MjModel.from_xml_path(path), mujoco.MjSpec.from_file(path))


@pytest.mark.parametrize("xml", [VISUAL_XML, DISCARDED_XML], ids=["visual", "discardvisual"])
def test_visual_model(xml):
    ours = mjx_lite.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    _compare(ours, mjm, mujoco.MjSpec.from_string(xml))
    errs = oracle.compare_models(ours, mjm)  # and everything else of the model
    assert not errs, "\n".join(errs)


def test_visual_model_is_not_trivial():
    """VISUAL_XML exercises what it claims: non-default values in every group, every texture role column used by a
    layer, a skybox, all four light types, a light texture, geoms with and without materials."""
    m = mjx_lite.load_mjcf_string(VISUAL_XML)
    assert sorted(set(np.asarray(m.light_type).tolist())) == [0, 1, 2, 3]
    assert types.TextureType.SKYBOX in np.asarray(m.tex_type).tolist()
    assert np.count_nonzero(np.asarray(m.mat_texid) >= 0) == 5 and np.asarray(m.light_texid).max() >= 0
    assert -1 in np.asarray(m.geom_matid) and np.asarray(m.geom_matid).max() >= 0
    assert m.vis.headlight.active == 0 and float(m.vis.map.zfar) == 35.5 and float(m.vis.global_.fovy) == 50


def test_every_mjmodel_material_and_light_field_is_kept():
    """The Model has every mat_* and light_* field of mjModel (by name), and the visual fields compared above."""
    mjm = mujoco.MjModel.from_xml_string(VISUAL_XML)
    ours = {f.name for f in dataclasses.fields(types.Model)}
    wanted = {k for k in dir(mjm) if k.startswith(("mat_", "light_"))}
    assert wanted <= ours, sorted(wanted - ours)
    assert set(FIELDS) <= ours


@pytest.mark.parametrize("value", ["auto", "true", "false", "0", "1", "2", "01", " 1 ", "3", "-1", "1.0", "True", ""])
def test_headlight_active_as_mujoco_reads_it(value):
    """<headlight active>: MuJoCo 4.0 reads false/true/auto or an integer 0-2 (0/1/2) and refuses anything else."""
    xml = f'<mujoco><visual><headlight active="{value}"/></visual><worldbody/></mujoco>'
    try:
        want = mujoco.MjModel.from_xml_string(xml).vis.headlight.active
    except ValueError:
        with pytest.raises(MJCFError, match="active"):
            mjx_lite.load_mjcf_string(xml)
        return
    assert mjx_lite.load_mjcf_string(xml).vis.headlight.active == want
