"""The renderer draws flexes (mjx_lite/render/flex.py): a deformed cloth (dim 2), a rope (dim 1: capsules of the flex
radius) and a soft box (dim 3: its boundary), checked pixel by pixel against ray casts computed here in numpy from
d.flexvert_xpos and flex_elem (segmentation, depth to 1e-9), the skin's radius offset, colours, flex groups, vmap and
the gradient of depth with respect to the vertex positions; and against mujoco.Renderer (EGL) with test_render's
criteria. The states drawn are MuJoCo's (the poses of its mj_forward that the renderer reads), as test_render's
kinematics="mujoco": the renderer alone, no compile of our `forward` on these flex models (our flex kinematics are
compared with MuJoCo's in tests/test_flex*.py; notebooks/deformables.ipynb draws our own rollout's flex states)."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402
import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite  # noqa: E402
from benchmarks import render_compare as rc  # noqa: E402
from mjx_lite import render  # noqa: E402
from mjx_lite.types import ObjType  # noqa: E402

H = W = 32
DEPTH_TOL = 1e-9  # float64 ray casts, different operation order
MARGIN = 1e-3  # pixels whose ray passes this close (barycentric / metres) to a silhouette are not compared
NOCON = '<contact contype="0" conaffinity="0"/>'


def _scene(flexes: str) -> str:
    return ('<mujoco><worldbody><geom type="plane" size="1 1 .1" rgba="0 0 1 1"/><camera name="top" pos="0 0 1"/>'
            f"{flexes}</worldbody></mujoco>")  # fmt: skip


CLOTH = ('<body name="c" pos="0 0 .3"><flexcomp name="cloth" type="grid" dim="2" count="5 5 1" spacing=".1 .1 .1" '
         f'radius="0" rgba="1 0 0 1">{NOCON}<edge equality="true"/></flexcomp></body>')  # fmt: skip
ROPE = ('<body name="r" pos="0 .08 .45"><flexcomp name="rope" type="grid" dim="1" count="4 1 1" spacing=".1 .1 .1" '
        f'radius=".02" rgba="0 1 0 1">{NOCON}</flexcomp></body>')  # fmt: skip
SOFT = ('<body name="s" pos="0 0 .3"><flexcomp name="soft" type="box" dim="3" count="3 3 3" spacing=".12 .12 .12" '
        f'radius="0" rgba="1 1 0 1">{NOCON}</flexcomp></body>')  # fmt: skip


# the fields of Data that the renderer reads (mjx_lite/render): bodies (lights' frames), geoms, cameras, flex vertices
POSES = ("qpos", "xpos", "xquat", "xmat", "subtree_com", "geom_xpos", "geom_xmat", "cam_xpos", "cam_xmat",
         "flexvert_xpos")  # fmt: skip


def _mujoco_state(xml: str, qpos=None):
    """(our Model, our Data with the POSES of MuJoCo's mj_forward at qpos (default qpos0), MjModel, MjData)."""
    m, mjm = mjx_lite.load_mjcf_string(xml), mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    if qpos is not None:
        mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    d = mjx_lite.make_data(m)
    poses = {k: jp.asarray(np.reshape(getattr(mjd, k), np.shape(getattr(d, k))), d.qpos.dtype) for k in POSES}
    return m, d.replace(**poses), mjm, mjd


def _state(xml: str, seed: int, scale: float = 0.02):
    mjm = mujoco.MjModel.from_xml_string(xml)
    rng = np.random.default_rng(seed)
    m, d, _, _ = _mujoco_state(xml, mjm.qpos0 + scale * rng.standard_normal(mjm.nq))
    return m, d


def _rays(r, m, d):
    o, dirs, _ = r.rays(m, d, r.camera_id("top"))
    return np.asarray(o, float), np.asarray(dirs, float)


def _tri_hits(o, dirs, tris):
    """Nearest hit t (P,) (inf: none) over triangles (T, 3, 3) and whether each ray is clear of every triangle's
    boundary by MARGIN in barycentric terms (P,)."""
    v0, e1, e2 = tris[:, 0], tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0]
    p = np.cross(dirs[:, None], e2[None])
    det = np.einsum("tk,ptk->pt", e1, p)
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = 1.0 / det
        s = o - v0
        u = np.einsum("tk,ptk->pt", s, p) * inv
        q = np.cross(s, e1)
        v = np.einsum("pk,tk->pt", dirs, q) * inv
        t = np.einsum("tk,tk->t", e2, q)[None] * inv
    w = 1 - u - v
    inside = (u >= 0) & (v >= 0) & (w >= 0) & (t > 0)
    near = (np.minimum(np.minimum(u, v), w) > -MARGIN) & (np.minimum(np.minimum(u, v), w) < MARGIN) & (t > 0)
    return np.where(inside, t, np.inf).min(1), ~near.any(1)


def _capsule_hits(o, dirs, a, b, r):
    """Whether each ray passes within r of a segment (a, b) (P,), and whether it is clear of r by MARGIN."""
    best = np.full(len(dirs), np.inf)
    for p0, p1 in zip(a, b):
        # closest distance between the ray o + t d (t > 0) and the segment, by dense sampling along the segment
        s = np.linspace(0.0, 1.0, 401)
        pts = p0[None] + s[:, None] * (p1 - p0)[None]  # (S, 3)
        rel = pts[None] - o  # (1, S, 3)
        dn = dirs / np.linalg.norm(dirs, axis=1, keepdims=True)
        along = np.einsum("psk,pk->ps", rel, dn)
        perp = np.linalg.norm(rel - along[..., None] * dn[:, None], axis=-1)
        best = np.minimum(best, perp.min(1))
    return best < r, np.abs(best - r) > MARGIN


@pytest.fixture(scope="module")
def cloth_and_rope():
    m, d = _state(_scene(CLOTH + ROPE), seed=0)
    r = render.Renderer(m, H, W)
    return m, d, r, r.render(d, "top")


def test_cloth_and_rope_pixels_match_ray_casts(cloth_and_rope):
    m, d, r, out = cloth_and_rope
    o, dirs = _rays(r, m, d)
    x = np.asarray(d.flexvert_xpos)
    cloth, rope = 0, 1
    va = int(m.flex_vertadr[cloth])
    elem = np.asarray(m.flex_elem)[: int(m.flex_elemnum[cloth]) * 3].reshape(-1, 3) + va
    t_cloth, clear_cloth = _tri_hits(o, dirs, x[elem])
    e = np.asarray(m.flex_edge)[m.flex_edgeadr[rope] : m.flex_edgeadr[rope] + m.flex_edgenum[rope]]
    e = e + int(m.flex_vertadr[rope])
    on_rope, clear_rope = _capsule_hits(o, dirs, x[e[:, 0]], x[e[:, 1]], float(m.flex_radius[rope]))
    # the rope lies above the cloth: where both are hit the rope is seen
    want = np.where(on_rope, rope, np.where(np.isfinite(t_cloth), cloth, -1))
    ok = clear_cloth & clear_rope
    seg = np.asarray(out["segmentation"]).reshape(-1, 2)
    assert ok.sum() > 0.8 * H * W
    assert (want[ok] == cloth).sum() > 100 and (want[ok] == rope).sum() > 20
    kind = np.where(want >= 0, int(ObjType.FLEX), int(ObjType.GEOM))
    np.testing.assert_array_equal(seg[ok, 1], kind[ok])
    np.testing.assert_array_equal(seg[ok, 0], np.where(want >= 0, want, 0)[ok])
    depth = np.asarray(out["depth"]).reshape(-1)
    sel = ok & (want == cloth)
    np.testing.assert_allclose(depth[sel], t_cloth[sel], rtol=0, atol=DEPTH_TOL)
    rgb = np.asarray(out["rgb"]).reshape(-1, 3).astype(int)
    floor = ok & (want == -1)
    assert np.all(rgb[sel, 0] > rgb[sel, 2]) and np.all(rgb[floor, 2] > rgb[floor, 0])
    assert np.all(rgb[ok & (want == rope), 1] > rgb[ok & (want == rope), 0])


def test_soft_body_boundary_matches_ray_casts():
    """Every face of every tetrahedron as the reference (interior faces are hidden behind the boundary)."""
    m, d = _state(_scene(SOFT), seed=1, scale=0.01)
    r = render.Renderer(m, H, W)
    out = r.render(d, "top")
    o, dirs = _rays(r, m, d)
    x = np.asarray(d.flexvert_xpos)
    tet = np.asarray(m.flex_elem).reshape(-1, 4)
    faces = np.concatenate([tet[:, [0, 1, 2]], tet[:, [0, 1, 3]], tet[:, [0, 2, 3]], tet[:, [1, 2, 3]]])
    t, clear = _tri_hits(o, dirs, x[faces])
    hit = np.isfinite(t)
    seg = np.asarray(out["segmentation"]).reshape(-1, 2)
    depth = np.asarray(out["depth"]).reshape(-1)
    assert clear.sum() > 0.8 * H * W and (hit & clear).sum() > 100
    np.testing.assert_array_equal(seg[clear, 1], np.where(hit, int(ObjType.FLEX), int(ObjType.GEOM))[clear])
    sel = hit & clear
    np.testing.assert_allclose(depth[sel], t[sel], rtol=0, atol=DEPTH_TOL)


def test_skin_offset_by_the_radius():
    """A flat cloth of radius rho is seen at its height plus rho (the skin's upper layer), as MuJoCo draws it."""
    rho = 0.01
    xml = _scene(CLOTH.replace('radius="0"', f'radius="{rho}"'))
    m, d, _, _ = _mujoco_state(xml)
    r = render.Renderer(m, H, W)
    out = r.render(d, "top")  # depth and segmentation from one compiled program
    depth = np.asarray(out["depth"]).reshape(-1)
    seg = np.asarray(out["segmentation"]).reshape(-1, 2)
    o, dirs = _rays(r, m, d)
    x = np.asarray(d.flexvert_xpos)
    lo, hi = x[:, :2].min(0) + 0.01, x[:, :2].max(0) - 0.01
    z = x[0, 2] + rho
    t = (o[2] - z) / -dirs[:, 2]
    p = o + t[:, None] * dirs
    inside = np.all((p[:, :2] > lo) & (p[:, :2] < hi), axis=1)
    assert inside.sum() > 100
    assert np.all(seg[inside, 1] == int(ObjType.FLEX))
    np.testing.assert_allclose(depth[inside], t[inside], rtol=0, atol=DEPTH_TOL)


def test_flexgroup_hides_and_shows():
    xml = _scene(CLOTH.replace('radius="0"', 'radius="0" group="3"'))
    m, d, _, _ = _mujoco_state(xml)
    hidden = np.asarray(render.Renderer(m, 16, 16).segmentation(d, "top"))
    shown = np.asarray(render.Renderer(m, 16, 16, flexgroup=(1, 1, 1, 1, 0, 0)).segmentation(d, "top"))
    assert np.all(hidden[..., 1] == int(ObjType.GEOM))
    assert np.sum(shown[..., 1] == int(ObjType.FLEX)) > 50


def test_batched_equals_unbatched_and_depth_gradient(cloth_and_rope):
    m, d0, r, out0 = cloth_and_rope
    _, d1 = _state(_scene(CLOTH + ROPE), seed=3)
    batch = jax.tree_util.tree_map(lambda a, b: np.stack([a, b]), d0, d1)  # numpy: no eager program per field shape
    seg_b = jax.vmap(lambda d: r.segmentation(d, "top"))(batch)
    # the unbatched images by the fixture's compiled render program (all three images from the same cast)
    for i, d in enumerate((d0, d1)):
        np.testing.assert_array_equal(np.asarray(seg_b[i]), np.asarray(r.render(d, "top")["segmentation"]))
    # depth of a cloth pixel near the image centre against a central difference in the vertex heights
    seg = np.asarray(out0["segmentation"])
    ij = [(i, j) for i in range(H // 2 - 4, H // 2 + 4) for j in range(W // 2 - 4, W // 2 + 4)
          if seg[i, j, 1] == int(ObjType.FLEX) and seg[i, j, 0] == 0]  # fmt: skip
    assert ij
    i, j = ij[0]
    x0 = d0.flexvert_xpos

    def depth_at(dz):
        return r.depth(d0.replace(flexvert_xpos=x0.at[:, 2].add(dz)), "top")[i, j]

    dz = jp.asarray(np.random.default_rng(0).standard_normal(x0.shape[0]) * 1e-3)
    # one compiled program: the central difference's values come from value_and_grad's too
    vg = jax.jit(jax.value_and_grad(lambda s: depth_at(s * dz)))
    g = vg(0.0)[1]
    h = 1e-6
    fd = (vg(h)[0] - vg(-h)[0]) / (2 * h)
    assert np.isfinite(g) and abs(float(g)) > 0
    np.testing.assert_allclose(float(g), float(fd), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("name", ["cloth", "rope", "soft"])
def test_depth_segmentation_vs_mujoco_renderer(name):
    """The same state drawn by mujoco.Renderer: segmentation (flex id, mjOBJ_FLEX) on >= 98 % of the pixels, depth
    within rc.DEPTH_RTOL on >= 99 % of the pixels where both see a surface (test_render's criteria; MuJoCo draws in
    float32 and tessellates the rope's capsules)."""
    flex = {"cloth": CLOTH, "rope": ROPE, "soft": SOFT}[name].replace('radius="0"', 'radius=".005"')
    xml = _scene(flex)
    qpos0 = mujoco.MjModel.from_xml_string(xml).qpos0
    m, d, mjm, mjd = _mujoco_state(xml, qpos0 + 0.02 * np.random.default_rng(0).standard_normal(len(qpos0)))
    ours = jax.tree.map(np.asarray, render.Renderer(m, H, W).render(d, "top"))
    theirs = rc.mujoco_images(mjm, mjd, H, W, 0)
    seen = theirs["segmentation"][..., 1] == int(ObjType.FLEX)
    assert seen.sum() > 40
    assert (ours["segmentation"] == theirs["segmentation"]).all(-1).mean() >= 0.98
    res = rc.agreement(ours, theirs)
    assert res["depth"] >= 0.99, res
