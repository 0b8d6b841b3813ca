"""`Renderer`: batched ray casting of a Model's geoms in JAX (rgb, depth, segmentation).

    r = Renderer(m, height=240, width=320, mjcf=path)   # static: resolution, visible geom groups, options
    rgb = r.rgb(d, camera=0)                             # (H, W, 3) uint8
    depth = r.depth(d, camera=0)                         # (H, W) metres along the optical axis
    seg = r.segmentation(d, camera=0)                    # (H, W, 2) int32 (geom id, mjOBJ_GEOM), -1 for none
    frames = jax.vmap(lambda d: r.rgb(d, 0))(batch)      # (B, H, W, 3)

One primary ray per pixel centre. Hits are found in two passes: a search pass (no gradients) intersects every
visible geom, analytic for primitives (`shapes.py`) and through a BVH for meshes and height fields (`bvh.py`),
and keeps the nearest geom (and triangle) per pixel; a surface pass recomputes the winner's hit distance and
normal from the traced state, so depth and colours are differentiable with respect to geom poses, sizes and
camera poses away from silhouettes (where the winning geom changes, the image is discontinuous).

Shading is MuJoCo's fixed-function model: emission + sum over the headlight and the model's lights of
ambient + diffuse (Lambert) + specular (Blinn-Phong, exponent 128 * shininess), with spot cones and distance
attenuation, optional hard shadows (one shadow ray per light), a checker texture on planes whose material uses a
builtin checker texture, and a skybox gradient (or black) behind.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.math import dot3
from mjx_lite.render import bvh, shapes
from mjx_lite.render import visual as visual_lib
from mjx_lite.render.camera import FreeCamera, free_camera_pose, pixel_directions
from mjx_lite.types import GeomType, ObjType

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
      m: the Model (held by the renderer; `model=` on each call renders another Model of the same structure).
      height, width: image size in pixels.
      mjcf: the MJCF file (path, bundled name or XML string) `m` was loaded from, for colours, materials, lights
        and <visual> settings, which the Model does not carry yet; without it every geom is grey.
      visual: a `render.visual.Visual` to use instead (e.g. with randomised colours).
      geomgroup: six flags, which geom groups to draw (MuJoCo's default shows groups 0, 1 and 2).
      shadows: cast one shadow ray per model light that casts shadows.
    """

    def __init__(self, m, height: int = 240, width: int = 320, *, mjcf=None, visual=None,
                 geomgroup=DEFAULT_GEOMGROUP, shadows: bool = False):  # fmt: skip
        if int(height) <= 0 or int(width) <= 0:
            raise ValueError(f"render.Renderer: height and width must be positive, not {height}x{width}")
        self.m = m
        self.height, self.width = int(height), int(width)
        self.shadows = bool(shadows)
        if visual is None:
            visual = visual_lib.from_mjcf(m, mjcf) if mjcf is not None else visual_lib.default_visual(m)
        self.visual = visual
        groups = np.zeros(6, bool)
        groups[: len(geomgroup)] = np.asarray(geomgroup, bool)
        gtype = np.asarray(m.geom_type)
        if np.any(gtype == GeomType.SDF):
            raise ValueError("render: SDF geoms are not supported by the renderer")
        group = np.clip(np.asarray(m.geom_group), 0, 5)
        alpha = np.asarray(visual.geom_rgba)[:, 3] if m.ngeom else np.zeros(0)
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

    # ---- cameras ---------------------------------------------------------------------------------------

    def camera_id(self, camera) -> int:
        """Index of a model camera given by index or name (-1: the default free camera)."""
        if isinstance(camera, str):
            names = self.m.names.get("camera", ())
            if camera not in names:
                raise ValueError(f"render: no camera named {camera!r}; cameras: {list(names)}")
            return names.index(camera)
        c = int(camera)
        if c < -1 or c >= self.m.ncam:
            raise ValueError(f"render: camera {c} out of range: the model has {self.m.ncam} cameras (-1: free)")
        return c

    def _camera(self, m, d, camera, vis):
        """(position (3,), orientation (3, 3), fovy) of the camera."""
        if isinstance(camera, FreeCamera):
            pos, mat = free_camera_pose(camera)
            return pos, mat, vis.fovy if camera.fovy is None else camera.fovy
        c = self.camera_id(camera)
        if c == -1:
            cam = FreeCamera(lookat=m.stat.center, distance=1.5 * m.stat.extent, azimuth=vis.azimuth,
                             elevation=vis.elevation)  # fmt: skip
            pos, mat = free_camera_pose(cam)
            return pos, mat, vis.fovy
        return d.cam_xpos[c], d.cam_xmat[c], m.cam_fovy[c]

    def rays(self, m, d, camera, vis):
        """Primary rays: origin (3,), directions (H*W, 3) with unit depth, camera orientation (3, 3)."""
        pos, mat, fovy = self._camera(m, d, camera, vis)
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
        return best_t, best_g, best_p

    def surface(self, m, d, o, dirs, geom, prim, tmin, tmax):
        """Differentiable hit of the given geom (and triangle) per ray: t (P,), world normal (P, 3) (unit,
        facing the ray), local hit point (P, 3). Rays with geom -1 get t = tmax."""
        P = dirs.shape[0]
        o = jp.broadcast_to(o, dirs.shape)
        g = jp.maximum(geom, 0)
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
            tt, nn = shapes.triangle(ol, dl, fv[:, 0], fv[:, 1], fv[:, 2])
            sel = prim >= 0
            t = jp.where(sel, tt, t)
            n = jp.where(sel[:, None], nn, n)
        hit = geom >= 0
        t = jp.where(hit & jp.isfinite(t), t, tmax)
        nw = jp.einsum("pij,pj->pi", d.geom_xmat[g], n)
        nw = nw / jp.sqrt(jp.maximum(dot3(nw, nw), 1e-30))[:, None]
        nw = jp.where((dot3(nw, dirs) > 0)[:, None], -nw, nw)
        pl = ol + jp.where(hit, t, 0.0)[:, None] * dl
        return t, nw, pl

    # ---- images ----------------------------------------------------------------------------------------

    def _clip(self, m, vis):
        return vis.znear * m.stat.extent, vis.zfar * m.stat.extent

    def depth(self, d, camera=0, *, model=None, visual=None):
        """Depth (H, W) in metres along the optical axis; pixels that see nothing get the far plane
        (`zfar * stat.extent`), as mujoco.Renderer. Differentiable away from silhouettes."""
        return self._call("depth", d, camera, model, visual)

    def segmentation(self, d, camera=0, *, model=None, visual=None):
        """(H, W, 2) int32: (geom id, mjOBJ_GEOM = 5) per pixel, (-1, -1) where no geom is seen."""
        return self._call("segmentation", d, camera, model, visual)

    def rgb(self, d, camera=0, *, model=None, visual=None):
        """(H, W, 3) uint8 colour image."""
        return self._call("rgb", d, camera, model, visual)

    def render(self, d, camera=0, *, model=None, visual=None) -> dict:
        """All three images from one cast: {"rgb", "depth", "segmentation"}."""
        return self._call("all", d, camera, model, visual)

    def _call(self, what, d, camera, model, visual):
        """Run through one jitted function per (renderer, output, camera index); a FreeCamera is traced."""
        m = self.m if model is None else model
        vis = self.visual if visual is None else visual
        if isinstance(camera, FreeCamera):
            return _jitted(self, what, None, m, vis, d, camera)
        return _jitted(self, what, self.camera_id(camera), m, vis, d, None)

    def _images(self, what, m, vis, d, camera):
        o, dirs, cmat = self.rays(m, d, camera, vis)
        near, far = self._clip(m, vis)
        _, geom, prim = self.cast(m, d, o, dirs, near, far)
        H, W = self.height, self.width
        kind = jp.where(geom >= 0, int(ObjType.GEOM), -1).astype(jp.int32)
        seg = jp.stack([geom, kind], -1).reshape(H, W, 2)
        if what == "segmentation":
            return seg
        t, n, pl = self.surface(m, d, o, dirs, geom, prim, near, far)
        if what == "depth":
            return t.reshape(H, W)
        hit = geom >= 0
        p = o + t[:, None] * dirs
        color = self._shade(m, d, vis, geom, p, n, pl, dirs, cmat, hit)
        rgb = jp.round(jp.clip(color, 0.0, 1.0) * 255.0).astype(jp.uint8).reshape(H, W, 3)
        if what == "rgb":
            return rgb
        return {"rgb": rgb, "depth": t.reshape(H, W), "segmentation": seg}

    # ---- shading ---------------------------------------------------------------------------------------

    def _shade(self, m, d, vis, geom, p, n, pl, dirs, cmat, hit):
        g = jp.maximum(geom, 0)
        base = vis.geom_rgba[g, :3]
        if np.any(np.asarray(vis.geom_tex)[self.geom_visible] == 1):
            base = jp.where((jp.asarray(vis.geom_tex)[g] == 1)[:, None], self._checker(m, vis, g, pl), base)
        spec = vis.geom_specular[g][:, None]
        shin = 128.0 * vis.geom_shininess[g][:, None]
        view = -dirs / jp.sqrt(dot3(dirs, dirs))[:, None]
        color = vis.geom_emission[g][:, None] * base
        if vis.headlight_active:
            amb, dif, spc = vis.headlight[0], vis.headlight[1], vis.headlight[2]
            light = cmat[:, 2]  # towards the camera's back: a light at the eye
            color = color + _light_terms(base, spec, shin, n, view, jp.broadcast_to(light, n.shape), amb, dif, spc, 1.0)
        if m.nlight:
            lpos, ldir = _light_frames(m, d)
            for i in range(m.nlight):
                if not vis.light_active[i]:
                    continue
                ltype = int(m.light_type[i])
                if ltype == 1:  # directional
                    to_light = jp.broadcast_to(-ldir[i], n.shape)
                    vec = to_light * (2.0 * vis.zfar * m.stat.extent)
                    factor = 1.0
                else:
                    vec = lpos[i] - p
                    dist = jp.sqrt(jp.maximum(dot3(vec, vec), 1e-30))
                    to_light = vec / dist[:, None]
                    att = vis.light_attenuation[i]
                    factor = 1.0 / (att[0] + att[1] * dist + att[2] * dist * dist)
                    if ltype == 0:  # spot cone
                        cosang = -dot3(to_light, ldir[i])
                        cone = cosang >= jp.cos(jp.deg2rad(vis.light_cutoff[i]))
                        factor = factor * jp.where(cone, jp.maximum(cosang, 0.0) ** vis.light_exponent[i], 0.0)
                    factor = factor[:, None]
                if self.shadows and vis.light_castshadow[i]:
                    start = p + n * (_SHADOW_OFFSET * m.stat.extent)
                    ts, gs, _ = self.cast(m, d, start, vec, 0.0, 1.0)
                    lit = ((gs < 0) | (ts >= 1.0))[:, None]
                else:
                    lit = True
                amb = vis.light_ambient[i] * base
                direct = _light_terms(base, spec, shin, n, view, to_light, 0.0, vis.light_diffuse[i],
                                      vis.light_specular[i], factor)  # fmt: skip
                color = color + amb + jp.where(lit, direct, 0.0)
        if vis.has_sky:
            up = jp.clip(0.5 + 0.5 * dirs[:, 2] / jp.sqrt(dot3(dirs, dirs)), 0.0, 1.0)[:, None]
            bg = vis.sky[1] + (vis.sky[0] - vis.sky[1]) * up
        else:
            bg = jp.zeros_like(color)
        return jp.where(hit[:, None], color, bg)

    def _checker(self, m, vis, g, pl):
        rep = vis.geom_texrepeat[g]
        size = m.geom_size[g]
        uniform = jp.asarray(np.asarray(vis.geom_texuniform))[g]
        scale = jp.where(uniform[:, None] | (size[:, :2] <= 0), rep, rep / jp.maximum(2.0 * size[:, :2], 1e-9))
        uv = pl[:, :2] * scale
        cell = (jp.floor(uv[:, 0]) + jp.floor(uv[:, 1])).astype(jp.int32) % 2
        tex = jp.where((cell == 0)[:, None], vis.geom_texrgb[g, 0], vis.geom_texrgb[g, 1])
        return tex * vis.geom_rgba[g, :3]


@functools.partial(jax.jit, static_argnums=(0, 1, 2))
def _jitted(r: Renderer, what: str, camera_id, m, vis, d, free):
    return r._images(what, m, vis, d, free if camera_id is None else camera_id)


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
