"""`Renderer`: batched ray casting of a Model's geoms and flexes in JAX (rgb, depth, segmentation).

    r = Renderer(m, height=240, width=320)               # static: resolution, visible geom groups, options
    rgb = r.rgb(d, camera=0)                             # (H, W, 3) uint8
    depth = r.depth(d, camera=0)                         # (H, W) metres along the optical axis
    seg = r.segmentation(d, camera=0)                    # (H, W, 2) int32 (geom id, mjOBJ_GEOM), -1 for none
    frames = jax.vmap(lambda d: r.rgb(d, 0))(batch)      # (B, H, W, 3)

One primary ray per pixel centre. Hits are found in two passes: a search pass (no gradients) intersects every
visible geom, analytic for primitives (`pipeline/ray_shapes.py`) and through a BVH for meshes and height fields
(`bvh.py`), then the flexes (`flex.py`: their skin triangles through a refitted BVH, rope edges as capsules), and keeps
the nearest object (and triangle) per pixel; a surface pass recomputes the winner's hit distance and
normal from the traced state, so depth and colours are differentiable with respect to geom poses, sizes and
camera poses away from silhouettes (where the winning geom changes, the image is discontinuous).

Shading is MuJoCo's fixed-function model: emission + sum over the headlight and the model's lights of
ambient + diffuse (Lambert) + specular (Blinn-Phong, exponent 128 * shininess), with spot cones and distance
attenuation, optional hard shadows (one shadow ray per light), a checker texture on planes whose material uses a
builtin checker texture, and a skybox gradient (or black) behind. Every colour comes from the Model (geom_rgba,
geom_matid, mat_*, tex_*, light_*, vis.headlight; the free camera and clipping planes from vis.global_ and vis.map):
the floats are traced, so `model=m.replace(geom_rgba=...)` renders randomised colours without recompiling.
"""

from __future__ import annotations

import difflib
import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.math import dot3
from mjx_lite.pipeline import ray_shapes as shapes
from mjx_lite.render import bvh
from mjx_lite.render import flex as _flex
from mjx_lite.render.camera import FreeCamera, free_camera_pose, pixel_directions
from mjx_lite.types import Builtin, GeomType, ObjType, TextureRole, TextureType

__all__ = ["Renderer"]

_ANALYTIC = {
    GeomType.PLANE: shapes.plane, GeomType.SPHERE: shapes.sphere, GeomType.CAPSULE: shapes.capsule,
    GeomType.ELLIPSOID: shapes.ellipsoid, GeomType.CYLINDER: shapes.cylinder, GeomType.BOX: shapes.box,
}  # fmt: skip
_SOUP = (GeomType.MESH, GeomType.HFIELD)
# shadow rays start this far (metres, times stat.extent) off the surface so that they do not hit it again
_SHADOW_OFFSET = 1e-4
# MuJoCo's default geom groups shown by mjvOption: 0, 1 and 2
DEFAULT_GEOMGROUP = (1, 1, 1, 0, 0, 0)
# a geom with a material and exactly this rgba takes the material's rgba (MuJoCo's setMaterial)
DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)
# texture kinds per geom (_Materials.tex): none, a builtin checker, a flat/gradient builtin (tints the colour)
_TEX_NONE, _TEX_CHECKER, _TEX_TINT = 0, 1, 2


class _Materials:
    """Static per-geom material plan (host numpy, from the Model's static fields; see `_materials`)."""

    def __init__(self, matid, tex, texid, texuniform, sky):
        self.matid, self.tex, self.texid, self.texuniform, self.sky = matid, tex, texid, texuniform, sky


def _materials(m) -> _Materials:
    """Material, texture kind and texture of each geom, and the skybox texture (-1: none drawn).

    The texture of a geom is its material's RGB-role texture (MuJoCo's renderer reads only that role). The sky is
    MuJoCo's: the first skybox texture, drawn when it is a builtin gradient or flat.
    """
    matid = np.asarray(m.geom_matid, np.int64)
    texid = np.full(m.ngeom, -1, np.int64)
    texuniform = np.zeros(m.ngeom, bool)
    if m.nmat:
        has = matid >= 0
        texid[has] = np.asarray(m.mat_texid)[matid[has], TextureRole.RGB]
        texuniform[has] = np.asarray(m.mat_texuniform)[matid[has]]
    builtin = np.asarray(m.tex_builtin)
    tex = np.full(m.ngeom, _TEX_NONE, np.int64)
    has_tex = texid >= 0
    kind = builtin[texid[has_tex]]
    tex[has_tex] = np.where(kind == Builtin.CHECKER, _TEX_CHECKER,
                            np.where((kind == Builtin.FLAT) | (kind == Builtin.GRADIENT), _TEX_TINT, _TEX_NONE))
    skyboxes = np.nonzero(np.asarray(m.tex_type) == TextureType.SKYBOX)[0]
    sky = int(skyboxes[0]) if len(skyboxes) and builtin[skyboxes[0]] in (Builtin.GRADIENT, Builtin.FLAT) else -1
    return _Materials(matid, tex, texid, texuniform, sky)


def _soups(m) -> bvh.Soups:
    mesh_ids = sorted({int(i) for i in np.asarray(m.geom_dataid)[np.asarray(m.geom_type) == GeomType.MESH]})
    hf_ids = sorted({int(i) for i in np.asarray(m.geom_dataid)[np.asarray(m.geom_type) == GeomType.HFIELD]})
    try:
        vert = np.asarray(m.mesh_vert, np.float64)
        hdata = np.asarray(m.hfield_data, np.float64)
    except jax.errors.TracerArrayConversionError as e:
        raise ValueError("render.Renderer must be built outside jit (it reads the mesh vertices once)") from e
    return bvh.build_soups(m, mesh_ids, hf_ids, vert, hdata)


class Renderer:
    """Ray-casting renderer of a Model (see the module docstring). Static: resolution, visible geoms, options.

    Args:
      m: the Model (held by the renderer; `model=` on each call renders another Model of the same structure, e.g.
        with randomised colours, materials or lights). Colours, materials, textures, lights, the headlight, the
        free camera and the clipping planes are the Model's (geom_rgba, mat_*, tex_*, light_*, m.vis).
      height, width: image size in pixels.
      geomgroup: six flags, which geom groups to draw (MuJoCo's default shows groups 0, 1 and 2).
      flexgroup: six flags, which flex groups to draw (the same default); flexes are drawn from d.flexvert_xpos as
        MuJoCo's flex skin (render/flex.py: cloth and soft-body surfaces, ropes as capsules of flex_radius).
      shadows: cast one shadow ray per model light that casts shadows.
      mjcf, visual: removed (they gave the colours before the Model carried them); passing either raises.

    Geoms and flexes whose colour has alpha 0 in `m` are not drawn (decided here, from `m`'s values).
    """

    def __init__(self, m, height: int = 240, width: int = 320, *, geomgroup=DEFAULT_GEOMGROUP,
                 flexgroup=DEFAULT_GEOMGROUP, shadows: bool = False, mjcf=None, visual=None):  # fmt: skip
        _no_visual_argument(mjcf=mjcf, visual=visual)
        if int(height) <= 0 or int(width) <= 0:
            raise ValueError(f"render.Renderer: height and width must be positive, not {height}x{width}")
        self.m = m
        self.height, self.width = int(height), int(width)
        self.shadows = bool(shadows)
        groups = np.zeros(6, bool)
        groups[: len(geomgroup)] = np.asarray(geomgroup, bool)
        gtype = np.asarray(m.geom_type)
        if np.any(gtype == GeomType.SDF):
            raise ValueError("render: SDF geoms are not supported by the renderer")
        group = np.clip(np.asarray(m.geom_group), 0, 5)
        try:
            alpha = np.asarray(_geom_colours(m, np, static_memo(m, "render.materials", _materials))[0])[:, 3]
        except jax.errors.TracerArrayConversionError as e:
            raise ValueError("render.Renderer must be built outside jit (it reads the model's colours once)") from e
        self.geom_visible = groups[group] & (alpha > 0)
        self._groups = {}
        for t in sorted(set(gtype[self.geom_visible].tolist())):
            ids = np.nonzero(self.geom_visible & (gtype == t))[0]
            self._groups[GeomType(t)] = ids
        soup_geoms = np.nonzero(self.geom_visible & np.isin(gtype, _SOUP))[0]
        self._soup_geoms = soup_geoms
        if len(soup_geoms):
            self.soups = static_memo(m, "render.soups", _soups)
            key = {(int(k), int(i)): s for s, (k, i) in enumerate(zip(self.soups.kind, self.soups.dataid))}
            kind = (gtype[soup_geoms] == GeomType.HFIELD).astype(int)
            self._geom_soup = np.array([key[(k, int(i))] for k, i in zip(kind, np.asarray(m.geom_dataid)[soup_geoms])])
        else:
            self.soups = None
            self._geom_soup = np.zeros(0, int)
        self._types = sorted(set(self._groups))
        fgroups = np.zeros(6, bool)
        fgroups[: len(flexgroup)] = np.asarray(flexgroup, bool)
        falpha = np.asarray(_flex_colours(m, np)[0])[:, 3] if m.nflex else np.zeros(0)
        self.flex_visible = fgroups[np.clip(np.asarray(m.flex_group), 0, 5)] & (falpha > 0)
        self.flex = static_memo(m, ("render.flex", tuple(self.flex_visible.tolist())),
                                lambda m: _flex.flex_plan(m, self.flex_visible))  # fmt: skip

    # ---- cameras ---------------------------------------------------------------------------------------

    def camera_id(self, camera) -> int:
        """Index of a model camera given by index or name (-1: the default free camera)."""
        if isinstance(camera, str):
            names = self.m.names.get("camera", ())
            if camera not in names:
                close = difflib.get_close_matches(camera, [n for n in names if n], n=3)
                hint = f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""
                raise ValueError(f"render: no camera named {camera!r}{hint}; cameras: {list(names)}")
            return names.index(camera)
        c = int(camera)
        if c < -1 or c >= self.m.ncam:
            raise ValueError(f"render: camera {c} out of range: the model has {self.m.ncam} cameras (-1: free)")
        return c

    def _camera(self, m, d, camera):
        """(position (3,), orientation (3, 3), fovy) of the camera."""
        glob = m.vis.global_
        if isinstance(camera, FreeCamera):
            pos, mat = free_camera_pose(camera)
            return pos, mat, glob.fovy if camera.fovy is None else camera.fovy
        if isinstance(camera, jax.Array):  # a model camera's index, traced (`_call`)
            return d.cam_xpos[camera], d.cam_xmat[camera], m.cam_fovy[camera]
        c = self.camera_id(camera)
        if c == -1:
            if glob.orthographic:
                raise ValueError("render: the model's free camera is orthographic (<visual><global "
                                 "orthographic='true'>), which the renderer does not draw")  # fmt: skip
            cam = FreeCamera(lookat=m.stat.center, distance=1.5 * m.stat.extent, azimuth=glob.azimuth,
                             elevation=glob.elevation)  # fmt: skip
            pos, mat = free_camera_pose(cam)
            return pos, mat, glob.fovy
        return d.cam_xpos[c], d.cam_xmat[c], m.cam_fovy[c]

    def rays(self, m, d, camera):
        """Primary rays: origin (3,), directions (H*W, 3) with unit depth, camera orientation (3, 3)."""
        pos, mat, fovy = self._camera(m, d, camera)
        local = pixel_directions(self.height, self.width, fovy, d.geom_xpos.dtype)
        return pos, local @ mat.T, mat

    # ---- ray casting -----------------------------------------------------------------------------------

    def cast(self, m, d, o, dirs, tmin, tmax):
        """Nearest visible geom along each ray (search pass, no gradients).

        o: (P, 3) or (3,); dirs: (P, 3); tmin, tmax: scalars or (P,). Returns t (P,) (tmax where nothing is hit),
        geom (P,) int32 (-1: none) and prim (P,) int32 (the triangle of a mesh / height field, else -1).
        """
        o, dirs = jax.lax.stop_gradient((jp.broadcast_to(o, dirs.shape), dirs))
        xpos, xmat, size = jax.lax.stop_gradient((d.geom_xpos, d.geom_xmat, m.geom_size))
        P = dirs.shape[0]
        tmin = jp.broadcast_to(jp.asarray(tmin, o.dtype), (P,))
        tmax = jp.broadcast_to(jp.asarray(tmax, o.dtype), (P,))
        best_t, best_g, best_p = tmax, jp.full((P,), -1, jp.int32), jp.full((P,), -1, jp.int32)
        for gt, ids in self._groups.items():
            if gt in _SOUP:
                continue
            ol, dl = _to_local(o, dirs, xpos[ids], xmat[ids])
            t0, t1, n0, n1 = _ANALYTIC[gt](ol, dl, size[ids][None])
            t, _ = shapes.first_hit(t0, t1, n0, n1, tmin[:, None], tmax[:, None])
            k = jp.argmin(t, axis=1)
            tk = jp.min(t, axis=1)
            closer = tk < best_t
            best_t = jp.where(closer, tk, best_t)
            best_g = jp.where(closer, jp.asarray(ids, jp.int32)[k], best_g)
            best_p = jp.where(closer, -1, best_p)
        if len(self._soup_geoms):
            ids = self._soup_geoms
            vert = jax.lax.stop_gradient(bvh.soup_vertices(m, self.soups))
            lo, hi = bvh.refit(self.soups, vert)
            ol, dl = _to_local(o, dirs, xpos[ids], xmat[ids])
            roots = jp.asarray(self.soups.root[self._geom_soup], jp.int32)

            def one(ol, dl, root, a, b):
                return bvh.traverse(self.soups, lo, hi, vert, ol, dl, root, a, b)

            per_geom = jax.vmap(one, in_axes=(0, 0, 0, None, None))
            t, f = jax.vmap(per_geom, in_axes=(0, 0, None, 0, 0))(ol, dl, roots, tmin, tmax)
            t = jp.where(f >= 0, t, jp.inf)
            k = jp.argmin(t, axis=1)
            tk = jp.min(t, axis=1)
            closer = tk < best_t
            best_t = jp.where(closer, tk, best_t)
            best_g = jp.where(closer, jp.asarray(ids, jp.int32)[k], best_g)
            best_p = jp.where(closer, jp.take_along_axis(f, k[:, None], 1)[:, 0], best_p)
        if self.flex is not None:  # flexes: object ids ngeom + flex id
            fx = jax.lax.stop_gradient(d.flexvert_xpos)
            vert = _flex.skin_vertices(self.flex, m, fx)
            tf, ff, pf = _flex.cast(self.flex, m, vert, fx, o, dirs, tmin, best_t)
            closer = ff >= 0
            best_t = jp.where(closer, tf, best_t)
            best_g = jp.where(closer, m.ngeom + ff, best_g)
            best_p = jp.where(closer, pf, best_p)
        return best_t, best_g, best_p

    def surface(self, m, d, o, dirs, geom, prim, tmin, tmax):
        """Differentiable hit of the given geom (and triangle) per ray: t (P,), world normal (P, 3) (unit,
        facing the ray), local hit point (P, 3). Rays with geom -1 get t = tmax."""
        P = dirs.shape[0]
        o = jp.broadcast_to(o, dirs.shape)
        g = jp.where(geom < m.ngeom, jp.maximum(geom, 0), 0)
        gtype = jp.asarray(np.asarray(m.geom_type), jp.int32)[g]
        gmat = d.geom_xmat[g]
        ol = jp.einsum("pj,pjk->pk", o - d.geom_xpos[g], gmat)
        dl = jp.einsum("pj,pjk->pk", dirs, gmat)
        size = m.geom_size[g]
        t = jp.full((P,), jp.inf, o.dtype)
        n = jp.zeros((P, 3), o.dtype)
        for gt in self._types:
            if gt in _SOUP:
                continue
            t0, t1, n0, n1 = _ANALYTIC[gt](ol, dl, size)
            tt, nn = shapes.first_hit(t0, t1, n0, n1, tmin, tmax)
            sel = gtype == gt
            t = jp.where(sel, tt, t)
            n = jp.where(sel[:, None], nn, n)
        if len(self._soup_geoms):
            vert = bvh.soup_vertices(m, self.soups)
            fv = vert[jp.asarray(self.soups.face)[jp.maximum(prim, 0)]]
            tt, nn = shapes.triangle(ol, dl, fv[:, 0], fv[:, 1], fv[:, 2], bvh.EDGE_EPS)
            sel = prim >= 0
            t = jp.where(sel, tt, t)
            n = jp.where(sel[:, None], nn, n)
        nw = jp.einsum("pij,pj->pi", d.geom_xmat[g], n)
        if self.flex is not None:  # flex hits: recomputed in the world frame
            vert = _flex.skin_vertices(self.flex, m, d.flexvert_xpos)
            isflex = geom >= m.ngeom
            prim = jp.where(isflex, prim, -1)
            tf, nf = _flex.surface(self.flex, m, vert, d.flexvert_xpos, o, dirs, prim, tmin, tmax)
            t = jp.where(isflex, tf, t)
            nw = jp.where(isflex[:, None], nf, nw)
        hit = geom >= 0
        t = jp.where(hit & jp.isfinite(t), t, tmax)
        nw = nw / jp.sqrt(jp.maximum(dot3(nw, nw), 1e-30))[:, None]
        nw = jp.where((dot3(nw, dirs) > 0)[:, None], -nw, nw)
        pl = ol + jp.where(hit, t, 0.0)[:, None] * dl
        return t, nw, pl

    # ---- images ----------------------------------------------------------------------------------------

    def _clip(self, m):
        """Near and far clipping distances (metres): <visual><map znear zfar> times stat.extent, as MuJoCo."""
        return m.vis.map.znear * m.stat.extent, m.vis.map.zfar * m.stat.extent

    def depth(self, d, camera=0, *, model=None, visual=None):
        """Depth (H, W) in metres along the optical axis; pixels that see nothing get the far plane
        (`zfar * stat.extent`), as mujoco.Renderer. Differentiable away from silhouettes."""
        _no_visual_argument(visual=visual)
        return self._call("depth", d, camera, model)

    def segmentation(self, d, camera=0, *, model=None, visual=None):
        """(H, W, 2) int32: (geom id, mjOBJ_GEOM = 5) or (flex id, mjOBJ_FLEX = 9) per pixel, (-1, -1) where nothing
        is seen."""
        _no_visual_argument(visual=visual)
        return self._call("segmentation", d, camera, model)

    def rgb(self, d, camera=0, *, model=None, visual=None):
        """(H, W, 3) uint8 colour image."""
        _no_visual_argument(visual=visual)
        return self._call("rgb", d, camera, model)

    def render(self, d, camera=0, *, model=None, visual=None) -> dict:
        """All three images from one cast: {"rgb", "depth", "segmentation"}."""
        _no_visual_argument(visual=visual)
        return self._call("all", d, camera, model)

    def _call(self, what, d, camera, model):
        """Run through one jitted function per (renderer, output, kind of camera): a FreeCamera and a model camera's
        index are traced (every model camera shares one program), the model's default free camera (-1) is static."""
        m = self.m if model is None else model
        if isinstance(camera, FreeCamera):
            return _jitted(self, what, None, m, d, camera)
        c = self.camera_id(camera)
        if c >= 0:
            return _jitted(self, what, None, m, d, jp.asarray(c, jp.int32))
        return _jitted(self, what, c, m, d, None)

    def _images(self, what, m, d, camera):
        o, dirs, cmat = self.rays(m, d, camera)
        near, far = self._clip(m)
        _, geom, prim = self.cast(m, d, o, dirs, near, far)
        H, W = self.height, self.width
        isflex = geom >= m.ngeom
        kind = jp.where(geom >= 0, jp.where(isflex, int(ObjType.FLEX), int(ObjType.GEOM)), -1).astype(jp.int32)
        seg = jp.stack([jp.where(isflex, geom - m.ngeom, geom), kind], -1).reshape(H, W, 2)
        if what == "segmentation":
            return seg
        t, n, pl = self.surface(m, d, o, dirs, geom, prim, near, far)
        if what == "depth":
            return t.reshape(H, W)
        hit = geom >= 0
        p = o + t[:, None] * dirs
        color = self._shade(m, d, geom, p, n, pl, dirs, cmat, hit)
        rgb = jp.round(jp.clip(color, 0.0, 1.0) * 255.0).astype(jp.uint8).reshape(H, W, 3)
        if what == "rgb":
            return rgb
        return {"rgb": rgb, "depth": t.reshape(H, W), "segmentation": seg}

    # ---- shading ---------------------------------------------------------------------------------------

    def _shade(self, m, d, geom, p, n, pl, dirs, cmat, hit):
        plan = static_memo(m, "render.materials", _materials)
        colour, spec, shin, emission = _geom_colours(m, jp, plan)
        if self.flex is not None:  # object ids ngeom + flex id
            colour, spec, shin, emission = (jp.concatenate([a, b]) for a, b in
                                            zip((colour, spec, shin, emission), _flex_colours(m, jp)))  # fmt: skip
        g = jp.maximum(geom, 0)
        base = colour[g, :3]
        if np.any(plan.tex[self.geom_visible] == _TEX_CHECKER):
            checker = (jp.asarray(plan.tex) == _TEX_CHECKER)[jp.minimum(g, m.ngeom - 1)] & (geom < m.ngeom)
            base = jp.where(checker[:, None], self._checker(m, plan, g, pl, base), base)
        spec = spec[g][:, None]
        shin = 128.0 * shin[g][:, None]
        view = -dirs / jp.sqrt(dot3(dirs, dirs))[:, None]
        color = emission[g][:, None] * base
        head = m.vis.headlight
        if head.active:  # 1, or 2 ("auto", MuJoCo 4.0's default: mujoco.Renderer draws it)
            light = cmat[:, 2]  # towards the camera's back: a light at the eye
            color = color + _light_terms(base, spec, shin, n, view, jp.broadcast_to(light, n.shape), head.ambient,
                                         head.diffuse, head.specular, 1.0)  # fmt: skip
        if m.nlight:
            lpos, ldir = _light_frames(m, d)
            for i in range(m.nlight):
                if not m.light_active[i]:
                    continue
                ltype = int(m.light_type[i])
                if ltype == 1:  # directional
                    to_light = jp.broadcast_to(-ldir[i], n.shape)
                    vec = to_light * (2.0 * m.vis.map.zfar * m.stat.extent)
                    factor = 1.0
                else:
                    vec = lpos[i] - p
                    dist = jp.sqrt(jp.maximum(dot3(vec, vec), 1e-30))
                    to_light = vec / dist[:, None]
                    att = m.light_attenuation[i]
                    factor = 1.0 / (att[0] + att[1] * dist + att[2] * dist * dist)
                    if ltype == 0:  # spot cone
                        cosang = -dot3(to_light, ldir[i])
                        cone = cosang >= jp.cos(jp.deg2rad(m.light_cutoff[i]))
                        factor = factor * jp.where(cone, jp.maximum(cosang, 0.0) ** m.light_exponent[i], 0.0)
                    factor = factor[:, None]
                if self.shadows and m.light_castshadow[i]:
                    start = p + n * (_SHADOW_OFFSET * m.stat.extent)
                    ts, gs, _ = self.cast(m, d, start, vec, 0.0, 1.0)
                    lit = ((gs < 0) | (ts >= 1.0))[:, None]
                else:
                    lit = True
                amb = m.light_ambient[i] * base
                direct = _light_terms(base, spec, shin, n, view, to_light, 0.0, m.light_diffuse[i],
                                      m.light_specular[i], factor)  # fmt: skip
                color = color + amb + jp.where(lit, direct, 0.0)
        if plan.sky >= 0:  # skybox gradient: rgb1 straight up, rgb2 straight down
            up = jp.clip(0.5 + 0.5 * dirs[:, 2] / jp.sqrt(dot3(dirs, dirs)), 0.0, 1.0)[:, None]
            top, bottom = m.tex_rgb1[plan.sky], m.tex_rgb2[plan.sky]
            bg = bottom + (top - bottom) * up
        else:
            bg = jp.zeros_like(color)
        return jp.where(hit[:, None], color, bg)

    def _checker(self, m, plan, g, pl, base):
        """Checker colour (P, 3) at local hit points `pl` of geoms `g`: the material's texrepeat tiles per geom
        (per metre with texuniform), times the geom's colour `base`."""
        matid = jp.asarray(np.maximum(plan.matid, 0))[g]
        texid = jp.asarray(np.maximum(plan.texid, 0))[g]
        rep = m.mat_texrepeat[matid]
        size = m.geom_size[g]
        uniform = jp.asarray(plan.texuniform)[g]
        scale = jp.where(uniform[:, None] | (size[:, :2] <= 0), rep, rep / jp.maximum(2.0 * size[:, :2], 1e-9))
        uv = pl[:, :2] * scale
        cell = (jp.floor(uv[:, 0]) + jp.floor(uv[:, 1])).astype(jp.int32) % 2
        tex = jp.where((cell == 0)[:, None], m.tex_rgb1[texid], m.tex_rgb2[texid])
        return tex * base


def _no_visual_argument(**given) -> None:
    """The stop-gap arguments `mjcf=` / `visual=` are gone: refuse them with what to do instead."""
    named = [k for k, v in given.items() if v is not None]
    if named:
        verb = "no longer exists" if len(named) == 1 else "no longer exist"
        raise TypeError(f"render.Renderer: {' and '.join(k + '=' for k in named)} {verb}: the compiled Model "
                        "carries its colours, materials, textures, lights and <visual> settings (m.geom_rgba, "
                        "m.mat_*, m.tex_*, m.light_*, m.vis); drop the argument, and render other colours with "
                        "model=m.replace(geom_rgba=...)")  # fmt: skip


def _geom_colours(m, xp, plan: _Materials):
    """Per geom: colour (ngeom, 4), specular, shininess, emission (ngeom,), with MuJoCo's material rule: a geom with
    a material takes the material's specular, shininess and emission, and its rgba when the geom's own is the
    default (0.5, 0.5, 0.5, 1); a flat or gradient builtin texture tints the material's colour with its rgb1.
    Geoms without a material: their rgba, specular and shininess 0.5, no emission. `xp`: numpy or jax.numpy."""
    rgba = xp.asarray(m.geom_rgba)
    half = xp.full(rgba.shape[:1], 0.5, rgba.dtype)
    if not m.nmat:
        return rgba, half, half, xp.zeros_like(half)
    has = plan.matid >= 0
    mid = np.maximum(plan.matid, 0)
    mat = xp.asarray(m.mat_rgba)[mid]
    tint = plan.tex == _TEX_TINT
    if np.any(tint):
        rgb1 = xp.asarray(m.tex_rgb1)[np.maximum(plan.texid, 0)]
        mat = xp.concatenate([xp.where(tint[:, None], mat[:, :3] * rgb1, mat[:, :3]), mat[:, 3:]], axis=1)
    default = xp.all(rgba == xp.asarray(DEFAULT_RGBA, rgba.dtype), axis=1)
    colour = xp.where((has & default)[:, None], mat, rgba)
    spec = xp.where(has, xp.asarray(m.mat_specular)[mid], half)
    shin = xp.where(has, xp.asarray(m.mat_shininess)[mid], half)
    emission = xp.where(has, xp.asarray(m.mat_emission)[mid], 0.0)
    return colour, spec, shin, emission


def _flex_colours(m, xp):
    """Per flex: colour (nflex, 4), specular, shininess, emission (nflex,): flex_rgba, or its material's rgba where
    the flex has a material and the default rgba (as geoms; flex_matid holds the material per element), the
    material's specular, shininess and emission; no texture."""
    rgba = xp.asarray(m.flex_rgba)
    half = xp.full(rgba.shape[:1], 0.5, rgba.dtype)
    matid = np.asarray(m.flex_matid)[np.minimum(np.asarray(m.flex_elemadr), max(len(m.flex_matid) - 1, 0))]
    matid = np.where(np.asarray(m.flex_elemnum) > 0, matid, -1) if len(m.flex_matid) else np.full(m.nflex, -1)
    if not m.nmat or not np.any(matid >= 0):
        return rgba, half, half, xp.zeros_like(half)
    has, mid = matid >= 0, np.maximum(matid, 0)
    default = xp.all(rgba == xp.asarray(DEFAULT_RGBA, rgba.dtype), axis=1)
    colour = xp.where((has & default)[:, None], xp.asarray(m.mat_rgba)[mid], rgba)
    spec = xp.where(has, xp.asarray(m.mat_specular)[mid], half)
    shin = xp.where(has, xp.asarray(m.mat_shininess)[mid], half)
    emission = xp.where(has, xp.asarray(m.mat_emission)[mid], 0.0)
    return colour, spec, shin, emission


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _jitted(r: Renderer, what: str, camera_id, m, d, free):
    return r._images(what, m, d, free if camera_id is None else camera_id)


def _to_local(o, dirs, pos, mat):
    """Rays (P, 3) into G geom frames: (P, G, 3) each (o: (P, 3) or (P, 1, 3); pos (G, 3); mat (G, 3, 3))."""
    if o.ndim == 2:
        o, dirs = o[:, None], dirs[:, None]
    rel = o - pos[None]
    ol = jp.stack([dot3(rel, mat[None, ..., k]) for k in range(3)], -1)
    dl = jp.stack([dot3(dirs, mat[None, ..., k]) for k in range(3)], -1)
    return ol, dl


def _light_terms(base, spec, shin, n, view, to_light, amb, dif, spc, factor):
    ndl = jp.maximum(dot3(n, to_light), 0.0)[:, None]
    h = to_light + view
    h = h / jp.sqrt(jp.maximum(dot3(h, h), 1e-30))[:, None]
    ndh = jp.maximum(dot3(n, h), 0.0)[:, None]
    specular = jp.where(ndl > 0, ndh ** jp.maximum(shin, 1e-3), 0.0)
    return amb * base + factor * (dif * base * ndl + spc * spec * specular)


def _light_frames(m, d):
    """World positions and directions (nlight, 3) of the model's lights (mj_camlight's light part)."""
    body = np.asarray(m.light_bodyid)
    mode = np.asarray(m.light_mode)
    target = np.asarray(m.light_targetbodyid)
    xpos, xmat = d.xpos[body], d.xmat[body]
    pos = xpos + jp.einsum("lij,lj->li", xmat, m.light_pos)
    ldir = jp.einsum("lij,lj->li", xmat, m.light_dir)
    track = jp.asarray(mode == 1)[:, None]
    trackcom = jp.asarray(mode == 2)[:, None]
    pos = jp.where(track, xpos + m.light_pos0, pos)
    pos = jp.where(trackcom, d.subtree_com[body] + m.light_poscom0, pos)
    ldir = jp.where(track | trackcom, m.light_dir0, ldir)
    if np.any(mode >= 3):
        tgt = jp.where(jp.asarray(mode == 4)[:, None], d.subtree_com[np.maximum(target, 0)],
                       d.xpos[np.maximum(target, 0)])  # fmt: skip
        aim = tgt - pos
        aim = aim / jp.sqrt(jp.maximum(dot3(aim, aim), 1e-30))[:, None]
        ldir = jp.where(jp.asarray(mode >= 3)[:, None], aim, ldir)
    return pos, ldir
