"""Skins (<asset>/<deformable> <skin>, inline or from .skn files): compiled fields, MuJoCo's load errors, and the
skin vertices and normals of render.skin against MuJoCo's visualiser (mjv_updateScene's skinvert/skinnormal)."""

import os
import struct

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import kinematics
from mjx_lite.render import skin
from tests import oracle

# MuJoCo keeps skin vertices in float32 (scn->skinvert): positions agree to float32 resolution of the scene
F32_POS_TOL = 1e-6
# normals computed from float32 positions: float32 round-off relative to the face size (faces here are ~0.1 m)
F32_NORMAL_TOL = 1e-5

BONES = """<bone body="torso" bindpos="0 0 0" bindquat="1 0 0 0" vertid="0 1 2 3" vertweight="1 1 .5 .5"/>
<bone body="arm" bindpos="-.3 0 0" bindquat="0.9 0 0.1 0" vertid="2 3 4 5" vertweight=".5 .5 2 1"/>"""
SKIN = ('<skin name="{name}" rgba=".2 .3 .4 1" inflate="{inflate}" group="1" {extra} vertex="0 -.1 0  0 .1 0  '
        '.3 -.1 .02  .3 .1 .02  .6 -.1 0  .6 .1 0" face="0 2 1  1 2 3  2 4 3  3 4 5">' + BONES + "</skin>")
XML = """<mujoco><asset><material name="m" rgba="1 0 0 1"/>{asset}</asset><deformable>{deformable}</deformable>
<worldbody><body name="torso" pos="0 0 1"><freejoint/><geom type="box" size=".1 .1 .1"/>
<body name="arm" pos=".3 0 0"><joint type="ball"/><geom size=".05" pos=".15 0 0"/></body></body></worldbody>
</mujoco>"""
INLINE = XML.format(asset=SKIN.format(name="a", inflate="0", extra='material="m" texcoord="0 0 0 1 .5 0 .5 1 1 0 1 1"'),
                    deformable=SKIN.format(name="b", inflate="0.01", extra=""))


@pytest.fixture(scope="module")
def inline():
    return mujoco.MjModel.from_xml_string(INLINE), mjl.load_mjcf_string(INLINE)


def test_inline_skins_compile_like_mujoco(inline):
    mjm, m = inline
    assert m.nskin == 2 and m.names["skin"] == ("a", "b")
    assert oracle.compare_models(m, mjm) == []
    np.testing.assert_array_equal(m.skin_texcoordadr, [0, -1])


def _skn_bytes(mjm, i: int) -> bytes:
    """Skin i of a compiled MuJoCo model written in MuJoCo's binary SKN layout."""
    va, vn = mjm.skin_vertadr[i], mjm.skin_vertnum[i]
    fa, fn = mjm.skin_faceadr[i], mjm.skin_facenum[i]
    ta = mjm.skin_texcoordadr[i]
    nt = vn if ta >= 0 else 0
    out = [struct.pack("<4i", vn, nt, fn, mjm.skin_bonenum[i]), mjm.skin_vert[va : va + vn].astype("<f4").tobytes()]
    if nt:
        out.append(mjm.skin_texcoord[ta : ta + nt].astype("<f4").tobytes())
    out.append(mjm.skin_face[fa : fa + fn].astype("<i4").tobytes())
    for b in range(mjm.skin_boneadr[i], mjm.skin_boneadr[i] + mjm.skin_bonenum[i]):
        name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_BODY, mjm.skin_bonebodyid[b]).encode()
        a, n = mjm.skin_bonevertadr[b], mjm.skin_bonevertnum[b]
        out += [name.ljust(40, b"\0"), mjm.skin_bonebindpos[b].astype("<f4").tobytes(),
                mjm.skin_bonebindquat[b].astype("<f4").tobytes(), struct.pack("<i", n),
                mjm.skin_bonevertid[a : a + n].astype("<i4").tobytes(),
                (mjm.skin_bonevertweight[a : a + n] * 3).astype("<f4").tobytes()]  # (weights renormalised)
    return b"".join(out)


def test_skn_file_compiles_like_mujoco(inline, tmp_path):
    """A .skn file in meshdir (unnamed: named after the file), from disk and from the assets dict."""
    data = _skn_bytes(inline[0], 0)
    os.makedirs(tmp_path / "meshes")
    (tmp_path / "meshes" / "body_skin.skn").write_bytes(data)
    xml = XML.format(asset='<skin file="body_skin.skn" inflate=".02"/>', deformable="").replace(
        "<mujoco>", '<mujoco><compiler meshdir="meshes"/>')
    (tmp_path / "model.xml").write_text(xml)
    mjm = mujoco.MjModel.from_xml_path(str(tmp_path / "model.xml"))
    m = mjl.load_mjcf(str(tmp_path / "model.xml"))
    assert m.names["skin"] == ("body_skin",)
    assert oracle.compare_models(m, mjm) == []
    m2 = mjl.load_mjcf_string(xml, assets={"body_skin.skn": data})
    np.testing.assert_array_equal(np.asarray(m2.skin_vert), np.asarray(m.skin_vert))
    with pytest.raises(mjl.MJCFError, match="unexpected buffer size in SKN file"):
        mjl.load_mjcf_string(xml, assets={"body_skin.skn": data + b"\0\0\0\0"})


@pytest.mark.parametrize("change, message", [
    (('face="0 2 1', 'face="0 2 9'), "face vertex index 9 out of range in skin"),
    (('vertid="0 1 2 3"', 'vertid="0 1 2 7"'), "vertid 7 out of range in skin"),
    (('vertweight="1 1 .5 .5"', 'vertweight="0 1 0 0"'), "vertex 0 must have positive total weight in skin"),
    (('body="arm"', 'body="leg"'), "unknown body 'leg' in skin"),
    (('name="a"', 'name="a" file="a.obj"'), "Both skin data and file were specified: a.obj"),
    (('texcoord="0 0 0 1', 'texcoord="0 1'), "Vertex and texcoord data incompatible size"),
    (('bindquat="1 0 0 0" ', ""), "required attribute missing"),
])  # fmt: skip
def test_skin_errors_are_mujocos(change, message):
    xml = INLINE.replace(*change, 1)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        mujoco.MjModel.from_xml_string(xml)
    with pytest.raises(mjl.MJCFError, match=message):
        mjl.load_mjcf_string(xml)


def _mujoco_skin(mjm, qpos):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    scn = mujoco.MjvScene(mjm, 100)
    opt = mujoco.MjvOption()
    opt.skingroup[:] = 1
    mujoco.mjv_updateScene(mjm, mjd, opt, None, mujoco.MjvCamera(), mujoco.mjtCatBit.mjCAT_ALL, scn)
    return np.array(scn.skinvert).reshape(-1, 3), np.array(scn.skinnormal).reshape(-1, 3)


def test_skin_vertices_match_mujoco(inline):
    """Bones on a free and a ball joint in a random pose; the inflated skin moves along its normals. Batched
    under vmap (jit) the same."""
    mjm, m = inline
    rng = np.random.default_rng(1)
    qs = []
    for _ in range(2):
        q = mjm.qpos0 + 0.4 * rng.normal(size=mjm.nq)
        q[3:7] /= np.linalg.norm(q[3:7])
        q[7:11] /= np.linalg.norm(q[7:11])
        qs.append(q)
    d0 = mjl.make_data(m)

    def skin_at(m, q):
        return skin.skin_vertices(m, kinematics.kinematics(m, d0.replace(qpos=q)))

    vert, normal = jax.jit(jax.vmap(skin_at, in_axes=(None, 0)))(m, jp.asarray(np.array(qs)))
    for i, q in enumerate(qs):
        want_v, want_n = _mujoco_skin(mjm, q)
        np.testing.assert_allclose(np.asarray(vert[i]), want_v, atol=F32_POS_TOL)
        np.testing.assert_allclose(np.asarray(normal[i]), want_n, atol=F32_NORMAL_TOL)
    grad = jax.jit(jax.grad(lambda inflate: skin_at(m.replace(skin_inflate=inflate), jp.asarray(qs[0]))[0].sum()))
    g = grad(m.skin_inflate)
    assert np.all(np.isfinite(np.asarray(g))) and float(g[1]) != 0.0


@pytest.mark.slow
def test_dog_skin_like_mujoco():
    """dm_control's dog: its .skn skin (24065 vertices, 57 bones) compiles to MuJoCo's arrays exactly, and the
    skin vertices follow the bodies as in MuJoCo's visualiser; the normals from MuJoCo's float32 positions."""
    path = os.path.join(oracle.DM_SUITE, "dog.xml")
    mjm, m = mujoco.MjModel.from_xml_path(path), mjl.load_mjcf(path)
    assert oracle.compare_models(m, mjm) == []
    q = mjm.qpos0 + 0.1 * np.random.default_rng(0).normal(size=mjm.nq)
    q[3:7] /= np.linalg.norm(q[3:7])
    want_v, want_n = _mujoco_skin(mjm, q)
    d = kinematics.kinematics(m, mjl.make_data(m).replace(qpos=jp.asarray(q)))
    vert, _ = jax.jit(skin.skin_vertices)(m, d)
    np.testing.assert_allclose(np.asarray(vert), want_v, atol=F32_POS_TOL)
    np.testing.assert_allclose(np.asarray(skin.skin_normals(m, jp.asarray(want_v, jp.float64))), want_n,
                               atol=F32_NORMAL_TOL)  # fmt: skip
