"""Rendering assets: <texture> and <material>, checked as MuJoCo's compiler checks them and compiled into the
Model's mat_* and tex_* fields.

Checks: names (repeated names; an unnamed texture is named after its file), texture sources (builtin sizes, files
and their content type, PNG headers, cube layouts), material layers and the textures materials refer to, so that
a model MuJoCo refuses does not load here either. Registers the names in ctx.ids ('texture', 'material') for the
references from geoms, sites, tendons and lights.

Compiled (mjModel's names): mat_rgba, mat_emission, mat_specular, mat_shininess, mat_reflectance, mat_metallic,
mat_roughness, mat_texrepeat, mat_texuniform, mat_texid (one texture per mjtTextureRole: `texture=` sets the RGB
role, <layer role=...> the others), tex_type; and, where mjModel keeps generated pixels (tex_data) that the Model
does not, the builtin texture's description with mjsTexture's names: tex_builtin, tex_rgb1, tex_rgb2.
"""

from __future__ import annotations

import os
import struct
import zlib

import numpy as np

from mjx_lite import types
from mjx_lite.mjcf.attrs import compiler, error, get, keyword, register, sections, vec
from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.mesh import read_asset_file
from mjx_lite.mjcf.spec import Element

_CUBE_FILES = ("fileright", "fileleft", "fileup", "filedown", "filefront", "fileback")
# material layer roles, mjtTextureRole 1.. (0 is mjTEXROLE_USER)
_ROLES = ("rgb", "occlusion", "roughness", "metallic", "normal", "opacity", "emissive", "rgba", "orm")
_TEX_TYPES = ("2d", "cube", "skybox")  # mjtTexture
_BUILTINS = ("none", "gradient", "checker", "flat")  # mjtBuiltin
_INT_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _content_type(el: Element, file: str) -> str:
    """MuJoCo's content type of an asset file: the content_type attribute ('type/subtype[;...]'), else from the
    file extension ('' when unknown)."""
    ct = get(el, "content_type", "") or ""
    if ct:
        main = ct.split(";")[0].strip()
        parts = main.split("/")
        return main if len(parts) == 2 and all(parts) else ""
    ext = os.path.splitext(file)[1].lower()
    return {".stl": "model/stl", ".obj": "model/obj", ".ply": "model/ply", ".msh": "model/vnd.mujoco.msh",
            ".png": "image/png", ".ktx": "image/ktx"}.get(ext, "")  # fmt: skip


def _png_size(el: Element, data: bytes, file: str) -> tuple[int, int]:
    """(width, height) of a PNG file; MJCFError when it is not a decodable PNG (signature, IHDR, image data)."""
    try:
        if data[:8] != _PNG_SIGNATURE:
            raise ValueError("not a PNG file")
        length, ctype = struct.unpack(">I4s", data[8:16])
        if ctype != b"IHDR" or length < 13:
            raise ValueError("missing IHDR")
        width, height = struct.unpack(">II", data[16:24])
        if width == 0 or height == 0:
            raise ValueError("invalid image dimensions")
        pos, idat = 8, []
        while pos + 8 <= len(data):
            n, t = struct.unpack(">I4s", data[pos : pos + 8])
            if t == b"IDAT":
                idat.append(data[pos + 8 : pos + 8 + n])
            pos += 12 + n
        zlib.decompress(b"".join(idat))
    except (ValueError, struct.error, zlib.error) as e:
        raise error(el, f"could not decode PNG file '{file}': {e}", "file") from None
    return width, height


def _load_image(el: Element, ctx: CompileContext, file: str, texturedir: str) -> tuple[int, int]:
    ctype = _content_type(el, file)
    if ctype not in ("image/png", "image/ktx"):
        raise error(el, f"unsupported content type: '{ctype}'", "content_type" if el.attrs.get("content_type")
                    else "file")  # fmt: skip
    cs = compiler(ctx, el)  # (an attached model's texture: its directory and settings)
    data = read_asset_file(file, cs.get("_model_dir", ctx.model_dir) or "", texturedir, ctx.assets,
                           bool(cs.get("strippath")), el)  # fmt: skip
    if ctype == "image/ktx":
        if get(el, "hflip", False) or get(el, "vflip", False):
            raise error(el, "cannot flip KTX textures", "hflip")
        if not data:
            raise error(el, f"texture file is empty: '{file}'", "file")
        return len(data), 1
    nchannel = int(get(el, "nchannel", 3))
    if nchannel not in (1, 3, 4):
        raise error(el, f"Unsupported number of channels: {nchannel}", "nchannel")
    return _png_size(el, data, file)


def check_texture(el: Element, ctx: CompileContext) -> None:
    """mjCTexture::Compile's checks (and the XML reader's gridlayout check)."""
    cs = compiler(ctx, el)
    texturedir = cs.get("texturedir") or cs.get("assetdir") or ""
    ttype = get(el, "type", "cube")
    grid = [int(x) for x in get(el, "gridsize", (1, 1))]
    layout = el.attrs.get("gridlayout")
    if layout is not None and len(layout) != grid[0] * grid[1]:
        raise error(el, "gridlayout length must match gridsize", "gridlayout")
    nchannel = int(get(el, "nchannel", 3))
    if get(el, "builtin", "none") != "none":
        width, height = int(get(el, "width", 0)), int(get(el, "height", 0))
        if width < 1:
            raise error(el, "Invalid width of builtin texture", "width")
        if ttype != "2d":
            if width >= _INT_MAX // 6:
                raise error(el, "Invalid width of builtin texture", "width")
            height = 6 * width
        elif height < 1:
            raise error(el, "Invalid height of builtin texture", "height")
        if nchannel <= 0 or width * height >= _INT64_MAX // nchannel:
            raise error(el, "Builtin texture too large", "width")
        return
    file = get(el, "file", "") or ""
    if file:
        if ttype == "2d":
            _load_image(el, ctx, file, texturedir)
            return
        if grid[0] < 1 or grid[1] < 1 or grid[0] * grid[1] > 12:
            raise error(el, "gridsize must be non-zero and no more than 12 squares in texture", "gridsize")
        w, h = _load_image(el, ctx, file, texturedir)
        if w // grid[1] != h // grid[0] or w % grid[1] or h % grid[0]:
            raise error(el, f"PNG size must be integer multiple of gridsize in texture '{file}'", "gridsize")
        for k in range(grid[0] * grid[1]):
            if grid != [1, 1] and (layout or "")[k : k + 1] not in tuple(".RLUDFB"):
                raise error(el, "gridlayout symbol is not among '.RLUDFB' in texture", "gridlayout")
        return
    if ttype == "2d":
        raise error(el, "Cannot load 2D texture from separate files, texture", "file")
    files = [(a, get(el, a, "") or "") for a in _CUBE_FILES]
    if not any(f for _, f in files):
        raise error(el, "No cubefiles_ defined in cube or skybox texture", "file")
    width = None
    for attr, f in files:
        if not f:
            continue
        w, h = _load_image(el, ctx, f, texturedir)
        if w != h:
            raise error(el, f"Non-square PNG file '{f}' in cube or skybox", attr)
        if width is None:
            width = w
        elif w != width:
            raise error(el, f"PNG file '{f}' has incompatible size in texture", attr)


def compile_textures_materials(root: Element, ctx: CompileContext) -> None:
    """Check every <texture> and <material>; register their names (ctx.ids, ctx.elements)."""
    assets = [c for a in sections(root, "asset") for c in a.children]
    ctx.ids["texture"], ctx.ids["material"] = {}, {}
    textures = [el for el in assets if el.tag == "texture"]
    materials = [el for el in assets if el.tag == "material"]
    discard = bool(ctx.compiler.get("discardvisual"))
    for i, el in enumerate(textures):
        if not get(el, "name") and get(el, "file"):  # an unnamed texture is named after its file
            el.attrs["name"] = os.path.splitext(os.path.basename(str(get(el, "file")).replace("\\", "/")))[0]
        if not discard and not get(el, "name") and get(el, "type", "cube") != "skybox":  # (one skybox needs none)
            raise error(el, "empty name in texture", "name")
        register(ctx, "texture", el, i)
    for i, el in enumerate(materials):
        if not discard and not get(el, "name"):
            raise error(el, "empty name in material", "name")
        register(ctx, "material", el, i)
    if discard:  # MuJoCo deletes every material and texture after checking their names, before compiling them
        textures, materials = [], []
        ctx.ids["texture"], ctx.ids["material"] = {}, {}
        ctx.elements["texture"], ctx.elements["material"] = [], []
    for el in textures:
        check_texture(el, ctx)
    for el in materials:
        tex = get(el, "texture", "") or ""
        refs = [(el, tex)] if tex else []
        for layer in el.children:
            if tex:
                raise error(layer, "A material with a texture attribute cannot have layer sub-elements")
            role, ltex = layer.attrs.get("role"), layer.attrs.get("texture")
            if role is None or ltex is None:
                raise error(layer, "required attribute missing", "role" if role is None else "texture")
            if role not in _ROLES:
                raise error(layer, f"invalid keyword '{role}' (expected one of {', '.join(_ROLES)})", "role")
            if ltex:
                refs.append((layer, ltex))
        for src, name in refs:
            if name not in ctx.ids["texture"]:
                raise error(src, f"texture '{name}' not found in material", "texture")
    ctx.arrays.update(_texture_arrays(textures))
    ctx.arrays.update(_material_arrays(materials, ctx))
    ctx.sizes.update(ntex=len(textures), nmat=len(materials))


def material_id(ctx: CompileContext, el: Element, attribute: str = "material", what: str = "",
                name: str | None = None) -> int:  # fmt: skip
    """Id of the material `el` names in `attribute` (or `name`): -1 when none, and always with <compiler
    discardvisual="true"> (MuJoCo deletes materials before resolving references); an unknown name is an error."""
    name = (get(el, attribute, "") or "") if name is None else name
    if not name or ctx.compiler.get("discardvisual"):
        return -1
    if name not in ctx.ids.get("material", {}):
        raise error(el, f"material '{name}' not found in {what}" if what else f"unknown material '{name}'", attribute)
    return ctx.ids["material"][name]


def texture_id(ctx: CompileContext, el: Element, attribute: str = "texture") -> int:
    """Id of the texture `el` names (-1: none, or discardvisual); an unknown name is an error."""
    name = get(el, attribute, "") or ""
    if not name or ctx.compiler.get("discardvisual"):
        return -1
    if name not in ctx.ids.get("texture", {}):
        raise error(el, f"unknown texture '{name}'", attribute)
    return ctx.ids["texture"][name]


def _texture_arrays(textures: list[Element]) -> dict[str, np.ndarray]:
    n = len(textures)
    return {
        "tex_type": np.array([keyword(el, "type", _TEX_TYPES, "cube") for el in textures], np.int32).reshape(n),
        "tex_builtin": np.array([keyword(el, "builtin", _BUILTINS, "none") for el in textures], np.int32).reshape(n),
        "tex_rgb1": np.array([vec(el, "rgb1", 3, (0.8, 0.8, 0.8)) for el in textures], float).reshape(n, 3),
        "tex_rgb2": np.array([vec(el, "rgb2", 3, (0.5, 0.5, 0.5)) for el in textures], float).reshape(n, 3),
    }


def _material_arrays(materials: list[Element], ctx: CompileContext) -> dict[str, np.ndarray]:
    n = len(materials)
    texid = np.full((n, types.NTEXROLE), -1, np.int32)
    for i, el in enumerate(materials):
        tex = get(el, "texture", "") or ""
        if tex:
            texid[i, types.TextureRole.RGB] = ctx.ids["texture"][tex]
        for layer in el.children:
            if layer.attrs.get("texture"):
                texid[i, 1 + _ROLES.index(layer.attrs["role"])] = ctx.ids["texture"][layer.attrs["texture"]]

    def scalar(name: str, default: float) -> np.ndarray:
        return np.array([float(get(el, name, default)) for el in materials], float).reshape(n)

    return {
        "mat_rgba": np.array([vec(el, "rgba", 4, (1, 1, 1, 1)) for el in materials], float).reshape(n, 4),
        "mat_emission": scalar("emission", 0.0),
        "mat_specular": scalar("specular", 0.5),
        "mat_shininess": scalar("shininess", 0.5),
        "mat_reflectance": scalar("reflectance", 0.0),
        "mat_metallic": scalar("metallic", -1.0),
        "mat_roughness": scalar("roughness", -1.0),
        "mat_texrepeat": np.array([vec(el, "texrepeat", 2, (1, 1)) for el in materials], float).reshape(n, 2),
        "mat_texuniform": np.array([bool(get(el, "texuniform", False)) for el in materials], bool).reshape(n),
        "mat_texid": texid,
    }
