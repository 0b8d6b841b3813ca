"""Visual properties the renderer needs and the Model does not carry yet: colours, materials, light colours,
checker textures, the <visual> section (free camera, headlight, clipping planes).

`Visual` is a pytree: its floats are traced (vmap over it to randomise colours), its type tables are static.
`from_mjcf(path or xml)` reads them from the MJCF the model was loaded from (host side, through mjx_lite's own
parser, which resolves default classes), `default_visual(m)` gives MuJoCo's defaults (grey geoms) when no
source is given. This is a stopgap: once the compiler puts geom_rgba, geom_matid, mat_*, light_ambient/diffuse/
specular/attenuation/cutoff/exponent/castshadow and the visual settings in the Model, `from_model` will read them.

Colour rule (MuJoCo's renderer): a geom with a material and the default rgba (0.5 0.5 0.5 1) takes the
material's rgba; otherwise its own rgba. Specular, shininess and emission come from the material (defaults
0.5, 0.5, 0).
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import models
from mjx_lite._struct import pytree_dataclass, static_field
from mjx_lite.mjcf import parse

__all__ = ["Visual", "default_visual", "from_mjcf"]

_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)


@pytree_dataclass
class Visual:
    """Rendering properties of a model (shapes in comments).

    geom_rgba: (ngeom, 4); geom_specular, geom_shininess, geom_emission: (ngeom,) material terms
    geom_tex: (ngeom,) static, 0 = none, 1 = checker; geom_texrgb: (ngeom, 2, 3) checker colours;
    geom_texrepeat: (ngeom, 2); geom_texuniform: (ngeom,) static bool (repeat per metre, not per geom)
    light_ambient/diffuse/specular/attenuation: (nlight, 3); light_cutoff, light_exponent: (nlight,) degrees, -
    light_active, light_castshadow: (nlight,) static bool
    headlight: (3, 3) ambient, diffuse, specular; headlight_active static
    fovy, azimuth, elevation: () free camera (degrees); znear, zfar: () clipping planes in units of stat.extent
    sky: (2, 3) skybox gradient colours (up, down); has_sky static (black background otherwise)
    """

    geom_rgba: jax.Array
    geom_specular: jax.Array
    geom_shininess: jax.Array
    geom_emission: jax.Array
    geom_texrgb: jax.Array
    geom_texrepeat: jax.Array
    light_ambient: jax.Array
    light_diffuse: jax.Array
    light_specular: jax.Array
    light_attenuation: jax.Array
    light_cutoff: jax.Array
    light_exponent: jax.Array
    headlight: jax.Array
    fovy: jax.Array
    azimuth: jax.Array
    elevation: jax.Array
    znear: jax.Array
    zfar: jax.Array
    sky: jax.Array
    geom_tex: np.ndarray = static_field()
    geom_texuniform: np.ndarray = static_field()
    light_active: np.ndarray = static_field()
    light_castshadow: np.ndarray = static_field()
    headlight_active: bool = static_field(True)
    has_sky: bool = static_field(False)


def _assemble(h: dict, dtype) -> Visual:
    static = ("geom_tex", "geom_texuniform", "light_active", "light_castshadow", "headlight_active", "has_sky")
    kw = {}
    for k, v in h.items():
        if k in static:
            if isinstance(v, np.ndarray):
                v = np.array(v)
                v.setflags(write=False)
            kw[k] = v
        else:
            kw[k] = jp.asarray(np.asarray(v, np.float64), dtype)
    return Visual(**kw)


def _defaults(ngeom: int, nlight: int) -> dict:
    return {
        "geom_rgba": np.tile(_DEFAULT_RGBA, (ngeom, 1)), "geom_specular": np.full(ngeom, 0.5),
        "geom_shininess": np.full(ngeom, 0.5), "geom_emission": np.zeros(ngeom),
        "geom_texrgb": np.zeros((ngeom, 2, 3)), "geom_texrepeat": np.ones((ngeom, 2)),
        "geom_tex": np.zeros(ngeom, np.int32), "geom_texuniform": np.zeros(ngeom, bool),
        "light_ambient": np.zeros((nlight, 3)), "light_diffuse": np.full((nlight, 3), 0.7),
        "light_specular": np.full((nlight, 3), 0.3), "light_attenuation": np.tile([1.0, 0, 0], (nlight, 1)),
        "light_cutoff": np.full(nlight, 45.0), "light_exponent": np.full(nlight, 10.0),
        "light_active": np.ones(nlight, bool), "light_castshadow": np.ones(nlight, bool),
        "headlight": np.array([[0.1] * 3, [0.4] * 3, [0.5] * 3]), "headlight_active": True,
        "fovy": 45.0, "azimuth": 90.0, "elevation": -45.0, "znear": 0.01, "zfar": 50.0,
        "sky": np.zeros((2, 3)), "has_sky": False,
    }  # fmt: skip


def _dtype(m):
    return jp.asarray(m.geom_size).dtype


def default_visual(m) -> Visual:
    """MuJoCo's default visual properties for `m` (every geom grey, lights with default colours)."""
    return _assemble(_defaults(m.ngeom, m.nlight), _dtype(m))


def _floats(text: str | None, n: int, default) -> np.ndarray:
    if text is None:
        return np.asarray(default, float)
    v = np.asarray(text, float).ravel() if not isinstance(text, str) else np.array([float(x) for x in text.split()])
    if v.size != n:
        raise ValueError(f"render: expected {n} numbers in <visual> attribute, got {text!r}")
    return v


def _walk(el, geoms: list, lights: list) -> None:
    """Geoms and lights of a body subtree in MuJoCo's order (body by body, depth first, XML order)."""
    bodies = []

    def collect(e):
        for c in e.children:
            if c.tag == "frame":
                collect(c)
            elif c.tag == "geom":
                geoms.append(c)
            elif c.tag == "light":
                lights.append(c)
            elif c.tag == "body":
                bodies.append(c)

    collect(el)
    for b in bodies:
        _walk(b, geoms, lights)


def _walk_ordered(world) -> tuple[list, list]:
    """Geoms and lights in MuJoCo's id order: the world's own first, then bodies depth first."""
    geoms, lights = [], []
    _walk(world, geoms, lights)
    return geoms, lights


def from_mjcf(m, source: str | os.PathLike) -> Visual:
    """Visual properties of `m` read from the MJCF it was loaded from (a path, a bundled model name, or XML).

    Checks that the file describes `m` (same geom and light counts and geom names) and raises otherwise.
    """
    s = os.fspath(source)
    if s.lstrip().startswith("<"):
        root = parse.parse_string(s)
    else:
        root = parse.parse_file(os.fspath(models.resolve(s)))
    h = _defaults(m.ngeom, m.nlight)
    worlds = [c for c in root.children if c.tag == "worldbody"]
    geoms, lights = [], []
    for w in worlds:
        g, li = _walk_ordered(w)
        geoms += g
        lights += li
    if len(geoms) != m.ngeom or len(lights) != m.nlight:
        raise ValueError(f"render: the MJCF {s[:80]!r} has {len(geoms)} geoms and {len(lights)} lights, the model "
                         f"{m.ngeom} and {m.nlight}: pass the file the model was loaded from")
    names = m.names.get("geom", ())
    for i, g in enumerate(geoms):
        name = g.attrs.get("name") or ""
        if names and name != names[i]:
            raise ValueError(f"render: geom {i} is {names[i]!r} in the model but {name!r} in {s[:80]!r}")
    assets = [c for c in root.children if c.tag == "asset"]
    textures = {c.attrs.get("name"): c for a in assets for c in a.children if c.tag == "texture"}
    materials = {c.attrs.get("name"): c for a in assets for c in a.children if c.tag == "material"}
    for i, g in enumerate(geoms):
        rgba = np.asarray(g.attrs.get("rgba", _DEFAULT_RGBA), float)
        mat = materials.get(g.attrs.get("material"))
        if mat is None:
            h["geom_rgba"][i] = rgba
            continue
        use_mat = np.allclose(rgba, _DEFAULT_RGBA)
        h["geom_rgba"][i] = np.asarray(mat.attrs.get("rgba"), float) if use_mat else rgba
        h["geom_specular"][i] = float(mat.attrs.get("specular"))
        h["geom_shininess"][i] = float(mat.attrs.get("shininess"))
        h["geom_emission"][i] = float(mat.attrs.get("emission"))
        tex = textures.get(mat.attrs.get("texture"))
        if tex is not None and str(tex.attrs.get("builtin")) == "checker":
            h["geom_tex"][i] = 1
            h["geom_texrgb"][i] = [np.asarray(tex.attrs.get("rgb1"), float), np.asarray(tex.attrs.get("rgb2"), float)]
            h["geom_texrepeat"][i] = np.asarray(mat.attrs.get("texrepeat"), float)
            h["geom_texuniform"][i] = bool(mat.attrs.get("texuniform"))
        elif tex is not None and str(tex.attrs.get("builtin")) in ("flat", "gradient") and use_mat:
            h["geom_rgba"][i, :3] = h["geom_rgba"][i, :3] * np.asarray(tex.attrs.get("rgb1"), float)
    for i, li in enumerate(lights):
        for k in ("ambient", "diffuse", "specular", "attenuation"):
            h[f"light_{k}"][i] = np.asarray(li.attrs.get(k), float)
        h["light_cutoff"][i] = float(li.attrs.get("cutoff"))
        h["light_exponent"][i] = float(li.attrs.get("exponent"))
        h["light_active"][i] = bool(li.attrs.get("active"))
        h["light_castshadow"][i] = bool(li.attrs.get("castshadow"))
    for t in textures.values():
        if str(t.attrs.get("type")) == "skybox" and str(t.attrs.get("builtin")) in ("gradient", "flat"):
            h["sky"] = np.stack([np.asarray(t.attrs.get("rgb1"), float), np.asarray(t.attrs.get("rgb2"), float)])
            h["has_sky"] = True
    for v in (c for c in root.children if c.tag == "visual"):
        for c in v.children:
            a = {k: val for k, val in c.attrs.items() if val is not None}
            if c.tag == "global":
                for k in ("fovy", "azimuth", "elevation"):
                    if k in a:
                        h[k] = float(a[k])
            elif c.tag == "map":
                for k in ("znear", "zfar"):
                    if k in a:
                        h[k] = float(a[k])
            elif c.tag == "headlight":
                for j, k in enumerate(("ambient", "diffuse", "specular")):
                    if k in a:
                        h["headlight"][j] = _floats(a[k], 3, h["headlight"][j])
                if "active" in a:
                    h["headlight_active"] = str(a["active"]).strip() not in ("0", "false")
    return _assemble(h, _dtype(m))
