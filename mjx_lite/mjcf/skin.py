"""Skins (<asset><skin> and <deformable><skin>): visual meshes bound to bodies, compiled as MuJoCo compiles them.

A skin is a triangle mesh (vertices, optional texture coordinates, faces) whose vertices follow bones: each bone is
a body with a bind pose (bindpos, bindquat) and weighted vertices. Skins have no physics; `render.skin` computes
their vertex positions from the bodies' poses as MuJoCo's visualiser does (mjv_updateActiveSkin).

Inline data (vertex, texcoord, face, <bone> children) or a binary .skn file (`file`, looked up in meshdir), never
both. MuJoCo's checks and messages: data and file both given, unknown file type, missing data, sizes, unknown
bodies and materials, vertex ids out of range, vertices with no total weight, face vertex ids out of range.
MuJoCo keeps a skin's data in float32: the values are rounded to float32 here too, the bone weights normalised
per vertex and the bind quaternions normalised in float32 as MuJoCo does.

Compiled (mjModel's names): nskin, nskinvert, nskintexvert, nskinface, nskinbone, nskinbonevert; skin_matid,
skin_group, skin_rgba, skin_inflate, skin_vertadr, skin_vertnum, skin_texcoordadr, skin_faceadr, skin_facenum,
skin_boneadr, skin_bonenum, skin_vert, skin_texcoord, skin_face, skin_bonevertadr, skin_bonevertnum,
skin_bonebindpos, skin_bonebindquat, skin_bonebodyid, skin_bonevertid, skin_bonevertweight (not skin_pathadr: the
Model keeps no file paths).
"""

from __future__ import annotations

import os
import struct

import numpy as np

from mjx_lite.mjcf.attrs import compiler, error, get, register_all
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.mesh import read_asset_file
from mjx_lite.mjcf.spec import Element
from mjx_lite.mjcf.texture import material_id

_MINVAL = 1e-15  # mjMINVAL
_INT_MAX = 2**31 - 1
_SIZES = ("nskin", "nskinvert", "nskintexvert", "nskinface", "nskinbone", "nskinbonevert")


class _Skin:
    """One skin's data as MuJoCo's mjCSkin holds it (float32 values, one entry per bone)."""

    def __init__(self):
        self.vert = np.zeros(0, np.float32)
        self.texcoord = np.zeros(0, np.float32)
        self.face = np.zeros(0, np.int32)
        self.bodies: list[str] = []
        self.bindpos: list[np.ndarray] = []
        self.bindquat: list[np.ndarray] = []
        self.vertid: list[np.ndarray] = []
        self.vertweight: list[np.ndarray] = []


def skin_elements(root: Element) -> list[Element]:
    """Every <skin> of the model, in MuJoCo's order (those of <asset> sections, then those of <deformable>)."""
    out = [c for sec in root.children if sec.tag == "asset" for c in sec.children if c.tag == "skin"]
    return out + [c for sec in root.children if sec.tag == "deformable" for c in sec.children if c.tag == "skin"]


def compile_skins(root: Element, ctx: CompileContext) -> None:
    """Skins -> ctx.arrays (skin_*), ctx.sizes (nskin*), ctx.ids['skin'] (names; unnamed ones from their file)."""
    els = skin_elements(root)
    for el in els:
        if not get(el, "name") and get(el, "file"):
            el.attrs["name"] = os.path.splitext(os.path.basename(str(get(el, "file")).replace("\\", "/")))[0]
    register_all(ctx, "skin", els)
    skins = [_load(el, ctx) for el in els]
    out = {k: [] for k in ("vertadr", "vertnum", "texcoordadr", "faceadr", "facenum", "boneadr", "bonenum")}
    vert, tex, face, bindpos, bindquat, bodyid, bvadr, bvnum, bvid, bvw = ([] for _ in range(10))
    nvert = ntex = nface = nbone = nbv = 0
    for s in skins:
        nv = s.vert.size // 3
        out["vertadr"].append(nvert)
        out["vertnum"].append(nv)
        out["texcoordadr"].append(ntex if s.texcoord.size else -1)
        out["faceadr"].append(nface)
        out["facenum"].append(s.face.size // 3)
        out["boneadr"].append(nbone)
        out["bonenum"].append(len(s.bodies))
        vert.append(s.vert.reshape(-1, 3))
        tex.append(s.texcoord.reshape(-1, 2))
        face.append(s.face.reshape(-1, 3))
        for b in range(len(s.bodies)):
            bindpos.append(s.bindpos[b])
            bindquat.append(s.bindquat[b])
            bodyid.append(ctx.ids["body"][s.bodies[b]])
            bvadr.append(nbv)
            bvnum.append(s.vertid[b].size)
            bvid.append(s.vertid[b])
            bvw.append(s.vertweight[b])
            nbv += s.vertid[b].size
        nvert, ntex, nface = nvert + nv, ntex + s.texcoord.size // 2, nface + s.face.size // 3
        nbone += len(s.bodies)
    n = len(els)

    def cat(parts, shape, dtype):
        return np.concatenate(parts).astype(dtype).reshape(shape) if parts else np.zeros(shape, dtype)

    A = ctx.arrays
    for k, v in out.items():
        A["skin_" + k] = np.asarray(v, np.int32).reshape(n)
    A["skin_matid"] = np.array([material_id(ctx, el, what=f"skin {i}") for i, el in enumerate(els)],
                               np.int32).reshape(n)  # fmt: skip
    A["skin_group"] = np.array([int(get(el, "group", 0)) for el in els], np.int32).reshape(n)
    A["skin_rgba"] = np.array([_f32(get(el, "rgba", (0.5, 0.5, 0.5, 1))) for el in els], np.float64).reshape(n, 4)
    A["skin_inflate"] = np.array([_f32(get(el, "inflate", 0.0)) for el in els], np.float64).reshape(n)
    A["skin_vert"] = cat(vert, (nvert, 3), np.float64)
    A["skin_texcoord"] = cat(tex, (ntex, 2), np.float64)
    A["skin_face"] = cat(face, (nface, 3), np.int32)
    A["skin_bonebindpos"] = cat(bindpos, (nbone, 3), np.float64)
    A["skin_bonebindquat"] = cat(bindquat, (nbone, 4), np.float64)
    A["skin_bonebodyid"] = np.asarray(bodyid, np.int32).reshape(nbone)
    A["skin_bonevertadr"] = np.asarray(bvadr, np.int32).reshape(nbone)
    A["skin_bonevertnum"] = np.asarray(bvnum, np.int32).reshape(nbone)
    A["skin_bonevertid"] = cat(bvid, (nbv,), np.int32)
    A["skin_bonevertweight"] = cat(bvw, (nbv,), np.float64)
    ctx.sizes.update(nskin=n, nskinvert=nvert, nskintexvert=ntex, nskinface=nface, nskinbone=nbone, nskinbonevert=nbv)


def _f32(v) -> np.ndarray:
    """Values rounded to float32 (MuJoCo keeps skins in float32), as float64."""
    return np.asarray(v, np.float32).astype(np.float64)


def _load(el: Element, ctx: CompileContext) -> _Skin:
    """The skin's data (inline or from its .skn file), checked and normalised as mjCSkin::Compile does."""
    s = _Skin()
    bones = [b for b in el.children if b.tag == "bone"]
    inline = {"vertex": get(el, "vertex"), "texcoord": get(el, "texcoord"), "face": get(el, "face")}
    file = get(el, "file", "") or ""
    if file:
        if any(v is not None and np.size(v) for v in inline.values()) or bones:
            raise error(el, f"Both skin data and file were specified: {file}", "file")
        cs = compiler(ctx, el)
        if cs.get("strippath"):
            file = os.path.basename(file.replace("\\", "/"))
        if os.path.splitext(file)[1].lower() != ".skn":
            raise error(el, f"Unknown skin file type: {file}", "file")
        meshdir = cs.get("meshdir") or cs.get("assetdir") or ""
        data = read_asset_file(file, cs.get("_model_dir", ctx.model_dir) or "", meshdir, ctx.assets, False, el)
        _read_skn(el, data, file, s)
    else:
        for key, attr, dtype in (("vert", "vertex", np.float32), ("texcoord", "texcoord", np.float32),
                                 ("face", "face", np.int32)):  # fmt: skip
            v = inline[attr]
            setattr(s, key, np.zeros(0, dtype) if v is None else np.asarray(v).astype(dtype).reshape(-1))
        for b in bones:
            s.bodies.append(str(get(b, "body")))
            s.bindpos.append(np.asarray(get(b, "bindpos"), np.float32).reshape(-1))
            s.bindquat.append(np.asarray(get(b, "bindquat"), np.float32).reshape(-1))
            s.vertid.append(np.asarray(get(b, "vertid"), np.int64).reshape(-1))
            s.vertweight.append(np.asarray(get(b, "vertweight"), np.float32).reshape(-1))
    _check(el, ctx, s)
    return s


def _check(el: Element, ctx: CompileContext, s: _Skin) -> None:
    if not (s.vert.size and s.face.size and s.bodies):
        raise error(el, "Missing data in skin")
    if s.vert.size % 3:
        raise error(el, "Vertex data must be multiple of 3", "vertex")
    nvert = s.vert.size // 3
    if s.texcoord.size and s.texcoord.size != 2 * nvert:
        raise error(el, "Vertex and texcoord data incompatible size", "texcoord")
    if s.face.size % 3:
        raise error(el, "Face data must be multiple of 3", "face")
    for b, name in enumerate(s.bodies):
        if s.bindpos[b].size != 3:
            raise error(el, "Unexpected bindpos size in skin")
        if s.bindquat[b].size != 4:
            raise error(el, "Unexpected bindquat size in skin")
        if name not in ctx.ids.get("body", {}):
            raise error(el, f"unknown body '{name}' in skin")
    total = np.zeros(nvert, np.float32)
    for ids, w in zip(s.vertid, s.vertweight):
        if w.size != ids.size or ids.size == 0:
            raise error(el, "vertid and vertweight must have same non-zero size in skin")
        for j, wj in zip(ids, w):  # (MuJoCo's float32 accumulation order)
            if j < 0 or j >= nvert:
                raise error(el, f"vertid {int(j)} out of range in skin")
            total[j] = np.float32(total[j] + wj)
    bad = np.nonzero(total <= _MINVAL)[0]
    if bad.size:
        raise error(el, f"vertex {int(bad[0])} must have positive total weight in skin")
    s.vertid = [ids.astype(np.int32) for ids in s.vertid]
    s.vertweight = [(w / total[ids]).astype(np.float32) for ids, w in zip(s.vertid, s.vertweight)]
    for b, q in enumerate(s.bindquat):  # normalised in double (mjuu_normvec: left as is below mjEPS), kept in float
        q64 = q.astype(np.float64)
        nrm = np.sqrt(q64 @ q64)
        s.bindquat[b] = (q64 / nrm if nrm >= 1e-14 else q64).astype(np.float32)
    bad = np.nonzero((s.face < 0) | (s.face >= nvert))[0]
    if bad.size:
        raise error(el, f"face vertex index {int(s.face[bad[0]])} out of range in skin", "face")


def _read_skn(el: Element, data: bytes, file: str, s: _Skin) -> None:
    """A binary SKN file: int32 header (nvert, ntexcoord, nface, nbone); float32 vertices and texture coordinates;
    int32 faces; per bone a 40-byte body name, bindpos (3), bindquat (4) floats, a vertex count, the vertex ids
    (int32) and weights (float32). Little-endian, as MuJoCo reads it on the machines it runs on."""
    if not data:
        raise error(el, f"SKN file '{file}' is empty", "file")
    if len(data) < 16:
        raise error(el, f"missing header in SKN file '{file}'", "file")
    nvert, ntex, nface, nbone = struct.unpack_from("<4i", data, 0)
    if min(nvert, ntex, nface, nbone) < 0:
        raise error(el, f"negative size in header of SKN file '{file}'", "file")
    if nvert >= _INT_MAX // 12 or ntex >= _INT_MAX // 8 or nface >= _INT_MAX // 12 or nbone >= _INT_MAX // 18:
        raise error(el, f"too large sizes in SKN file '{file}'", "file")
    if len(data) < 16 + 4 * (3 * nvert + 2 * ntex + 3 * nface + 18 * nbone):
        raise error(el, f"insufficient data in SKN file '{file}'", "file")
    words = len(data) // 4 - 4  # 4-byte words after the header
    pos = 0  # in words

    def take(n: int, dtype: str) -> np.ndarray:
        nonlocal pos
        a = np.frombuffer(data, dtype=dtype, count=n, offset=16 + 4 * pos).copy()
        pos += n
        return a

    s.vert, s.texcoord, s.face = take(3 * nvert, "<f4"), take(2 * ntex, "<f4"), take(3 * nface, "<i4")
    for b in range(nbone):
        if words - pos < 18:
            raise error(el, f"insufficient data in SKN file '{file}', bone {b}", "file")
        raw = data[16 + 4 * pos : 16 + 4 * pos + 39]
        pos += 10
        s.bodies.append(raw.split(b"\0", 1)[0].decode("utf-8", "replace"))
        s.bindpos.append(take(3, "<f4"))
        s.bindquat.append(take(4, "<f4"))
        count = int(take(1, "<i4")[0])
        if count < 1:
            raise error(el, f"vertex count must be positive in SKN file '{file}', bone {b}", "file")
        if (words - pos) // 2 < count:
            raise error(el, f"insufficient vertex data in SKN file '{file}', bone {b}", "file")
        s.vertid.append(take(count, "<i4").astype(np.int64))
        s.vertweight.append(take(count, "<f4"))
    if len(data) != 16 + 4 * pos:
        raise error(el, f"unexpected buffer size in SKN file '{file}'", "file")
