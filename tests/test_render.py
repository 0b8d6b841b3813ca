"""Renderer: depth and segmentation against mujoco.Renderer (EGL), mean colour per segment, BVH exactness,
depth gradients, batching, cameras, geom groups, video.

The oracle tests render at small resolutions with MuJoCo's poses copied into our Data (the renderer alone);
the slow case renders every camera of every reference model at 64x64 from our own forward kinematics.
"""

import functools
import os

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402
import jax.numpy as jp  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from benchmarks import render_compare as rc  # noqa: E402
from mjx_lite import render  # noqa: E402
from mjx_lite.pipeline import ray_shapes as shapes  # noqa: E402
from mjx_lite.render import bvh  # noqa: E402

# the criteria: depth within 1 % (rc.DEPTH_RTOL) on >= 99 % of the pixels where both see a surface,
# the same geom on >= 98 % of all pixels (silhouette pixels and MuJoCo's tessellation of curved geoms differ)
DEPTH_FRACTION = 0.99
SEGMENTATION_FRACTION = 0.98
# mean colour per segment (0-255): MuJoCo lights per pixel with smooth (interpolated) mesh normals, dims the
# floor with reflections and draws texture marks; we use face normals and no reflections. A wrong colour,
# material or light is off by far more (the scene's colours are saturated and distinct).
COLOUR_ATOL = 40.0
# pixels a segment needs (in both images) for its mean colour to be compared
MIN_SEGMENT = 8
# depth gradient vs central finite differences (float64, smooth surface point)
GRAD_RTOL = 1e-6
FD_EPS = 1e-6


@pytest.fixture(scope="module")
def every_path(tmp_path_factory):
    return rc.every_geom_path(str(tmp_path_factory.mktemp("every_geom")))


@pytest.fixture(scope="module")
def every_result(every_path):
    """The every-geom scene by both renderers (camera 0, 48x64, MuJoCo's poses); shared by two tests."""
    return rc.compare(every_path, 48, 64, cameras=[0], kinematics="mujoco")[0]


# the dm_control models other than the cartpole, and mjx/humanoid (capsules, spheres, a plane), draw only geom types
# that every_geom has (planes, capsules, spheres, cylinders, boxes, ellipsoids) through the same ray casts: slow here
# (each is one more renderer compile); their cameras stay in test_depth_segmentation_vs_mujoco_all_cameras (slow);
# dm/cartpole (a model's own cameras, materials and textures), mjx/convex (convex meshes) and every_geom run by default
ORACLE_SLOW = ("dm/cheetah", "dm/walker", "dm/finger", "dm/reacher", "mjx/humanoid")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in ORACLE_SLOW else n
                                  for n in list(rc.REFERENCE) + ["every_geom"]])  # fmt: skip
def test_depth_segmentation_vs_mujoco(name, request):
    if name == "every_geom":
        res = request.getfixturevalue("every_result")
    else:
        m = mjl.load_mjcf(rc.REFERENCE[name])
        camera = 0 if m.ncam else -1
        res = rc.compare(rc.REFERENCE[name], 32, 40, cameras=[camera], kinematics="mujoco")[camera]
    assert res["surface_pixels"] > 100
    assert res["depth"] >= DEPTH_FRACTION, res["depth"]
    assert res["segmentation"] >= SEGMENTATION_FRACTION, res["segmentation"]


@pytest.mark.slow
@pytest.mark.parametrize("name", list(rc.REFERENCE) + ["every_geom"])
def test_depth_segmentation_vs_mujoco_all_cameras(name, every_path):
    path = every_path if name == "every_geom" else rc.REFERENCE[name]
    for camera, res in rc.compare(path, 64, 64).items():
        assert res["depth"] >= DEPTH_FRACTION, (camera, res["depth"])
        assert res["segmentation"] >= SEGMENTATION_FRACTION, (camera, res["segmentation"])


def test_mean_colour_per_segment(every_result):
    res = every_result
    so, st = res["ours"]["segmentation"][..., 0], res["mujoco"]["segmentation"][..., 0]
    compared = 0
    for g in np.unique(st[st >= 0]):
        both = (so == g) & (st == g)
        if both.sum() < MIN_SEGMENT:
            continue
        ours = res["ours"]["rgb"][both].astype(float).mean(0)
        theirs = res["mujoco"]["rgb"][both].astype(float).mean(0)
        np.testing.assert_allclose(ours, theirs, atol=COLOUR_ATOL, err_msg=f"geom {g}")
        compared += 1
    assert compared >= 8  # floor, pad, terrain and the six bodies


@pytest.fixture(scope="module")
def every_model(every_path):
    m = mjl.load_mjcf(every_path)
    (_, d), _ = rc.states(every_path, kinematics="mujoco")
    return m, d


def test_bvh_equals_all_triangles(every_model):
    """The BVH walk finds the nearest of all triangles (random rays at the mesh and the height field)."""
    m, _ = every_model
    r = render.Renderer(m, 8, 8)
    soups = r.soups
    # jitted (one program per soup, the vertices and boxes from the model inside): no eager operation by operation
    vert = np.asarray(jax.jit(lambda m: bvh.soup_vertices(m, soups))(m))
    rng = np.random.default_rng(0)

    @functools.partial(jax.jit, static_argnums=(3,))
    def walk_and_all(m, o, dirs, s, faces):
        """(BVH walk, nearest of all the soup's triangles) per ray."""
        v = bvh.soup_vertices(m, soups)
        lo, hi = bvh.refit(soups, v)
        t, f = jax.vmap(lambda o, d: bvh.traverse(soups, lo, hi, v, o, d, int(soups.root[s]), 0.0, 1e9))(o, dirs)
        tri = v[jp.asarray(soups.face)][faces]
        tb, _ = shapes.triangle(o[:, None], dirs[:, None], tri[None, :, 0], tri[None, :, 1], tri[None, :, 2])
        return t, f, jp.where(tb >= 0, tb, jp.inf).min(1)

    for s in range(len(soups.root)):
        faces = np.arange(len(soups.face))
        end = soups.vertadr[s + 1] if s + 1 < len(soups.vertadr) else soups.nvert
        own = (soups.face[:, 0] >= soups.vertadr[s]) & (soups.face[:, 0] < end)
        faces = faces[own]
        vs = vert[soups.face[faces]].reshape(-1, 3)
        centre, span = vs.mean(0), np.ptp(vs, 0).max()
        o = centre + span * rng.normal(size=(256, 3))
        target = centre + 0.3 * span * rng.normal(size=(256, 3))
        dirs = target - o
        t, f, tb = walk_and_all(m, o, dirs, s, faces)
        hit = np.isfinite(np.asarray(tb))
        assert hit.sum() > 50
        assert np.array_equal(np.asarray(f) >= 0, hit)
        np.testing.assert_allclose(np.asarray(t)[hit], np.asarray(tb)[hit], rtol=1e-12)


def test_depth_gradient_matches_finite_differences(every_model):
    """d depth / d geom position on smooth surface points (sphere, box face, ellipsoid, mesh triangle interior)."""
    m, d = every_model
    r = render.Renderer(m, 32, 40)
    # one compiled program: the central differences' depths are value_and_grad's values (no second compile)
    vg = jax.jit(jax.value_and_grad(lambda xpos, p: r.depth(d.replace(geom_xpos=xpos), camera=0).ravel()[p]))
    seg = np.asarray(r.segmentation(d, camera=0))[..., 0]
    x0 = d.geom_xpos
    for geom in ("sphere", "box", "ellipsoid", "mesh"):
        g = m.names["geom"].index(geom)
        inner = [(i, j) for i, j in zip(*np.nonzero(seg == g)) if (seg[i - 1:i + 2, j - 1:j + 2] == g).all()]
        assert inner, geom
        i, j = inner[len(inner) // 2]
        p = i * seg.shape[1] + j
        gr = np.asarray(vg(x0, p)[1])[g]
        assert np.all(np.isfinite(gr)) and np.abs(gr).max() > 0.1, (geom, gr)  # the surface moves the depth
        for k in range(3):
            e = jp.zeros_like(x0).at[g, k].set(FD_EPS)
            fd = (vg(x0 + e, p)[0] - vg(x0 - e, p)[0]) / (2 * FD_EPS)
            np.testing.assert_allclose(gr[k], float(fd), rtol=GRAD_RTOL, atol=GRAD_RTOL, err_msg=geom)


def test_sphere_depth_is_exact():
    """A sphere straight ahead of a camera: the centre pixel's depth is distance - radius."""
    m = mjl.load_mjcf_string("""<mujoco><worldbody><geom type="sphere" size=".25" pos="0 0 0"/>
        <camera pos="0 0 2" xyaxes="1 0 0 0 1 0"/></worldbody></mujoco>""")
    eye = jp.eye(3)[None]
    d = mjl.make_data(m).replace(geom_xpos=jp.zeros((1, 3)), geom_xmat=eye, cam_xpos=jp.asarray([[0.0, 0, 2]]),
                                 cam_xmat=eye)  # the poses kinematics gives (the renderer alone is tested)
    depth = render.Renderer(m, 9, 9).depth(d, camera=0)
    np.testing.assert_allclose(float(depth[4, 4]), 1.75, rtol=1e-12)
    assert float(depth[0, 0]) == pytest.approx(50 * float(m.stat.extent))  # nothing: the far plane


@pytest.fixture(scope="module")
def cartpole():
    path = rc.REFERENCE["dm/cartpole"]
    (m, d), (mjm, mjd) = rc.states(path, kinematics="mujoco")
    return m, d, mjm, mjd, render.Renderer(m, 32, 40)


def test_batched_equals_single_and_jit(cartpole):
    m, d, *_, r = cartpole
    batch = jax.tree.map(lambda x: np.stack([x, x]), d)  # numpy: no eager stacking program per field shape
    batch.geom_xpos[1] += 0.05
    frames = jax.jit(jax.vmap(lambda d: r.rgb(d, 0)))(batch)
    assert frames.shape == (2, r.height, r.width, 3) and frames.dtype == jp.uint8
    single = r.render(d, "fixed")  # camera 0 by name
    np.testing.assert_array_equal(np.asarray(frames[0]), np.asarray(single["rgb"]))
    assert not np.array_equal(np.asarray(frames[0]), np.asarray(frames[1]))
    seg = single["segmentation"]
    assert seg.shape == (r.height, r.width, 2)
    assert set(np.unique(np.asarray(seg[..., 1]))) <= {-1, int(mjl.ObjType.GEOM)}


def test_free_camera_matches_mujoco(cartpole):
    m, d, mjm, mjd, r = cartpole
    cam = render.free_camera(lookat=(0.0, 0.0, 1.0), distance=3.0, azimuth=120.0, elevation=-20.0)
    ours = r.segmentation(d, cam)
    mcam = mujoco.MjvCamera()
    mcam.lookat[:], mcam.distance, mcam.azimuth, mcam.elevation = (0, 0, 1), 3.0, 120.0, -20.0
    theirs = rc.mujoco_images(mjm, mjd, r.height, r.width, mcam)["segmentation"]
    assert (np.asarray(ours)[..., 0] == theirs[..., 0]).mean() >= SEGMENTATION_FRACTION


def test_geom_groups_hide(cartpole):
    m, d, *_, r = cartpole
    g = m.names["geom"].index("floor")
    seen = np.asarray(r.render(d, 0)["segmentation"])[..., 0]
    assert (seen == g).any()
    group = int(m.geom_group[g])
    flags = [1] * 6
    flags[group] = 0
    hidden = np.asarray(render.Renderer(m, r.height, r.width, geomgroup=flags).segmentation(d, 0))[..., 0]
    assert not (hidden == g).any()


def test_randomised_colours(cartpole):
    """vmap over Models with other colours (traced geom_rgba): one image per colour set, one trace."""
    m, d, *_, r = cartpole
    rgba = jp.stack([m.geom_rgba.at[:, :3].set(c) for c in (0.2, 0.9)])
    traces = []

    def image(c):
        traces.append(1)
        return r.rgb(d, 0, model=m.replace(geom_rgba=c))

    images = jax.jit(jax.vmap(image))
    frames = images(rgba)
    seg = np.asarray(r.render(d, 0)["segmentation"])[..., 0] >= 0
    assert np.asarray(frames[1])[seg].mean() > np.asarray(frames[0])[seg].mean() + 20
    images(rgba * 0.5)
    assert len(traces) == 1


def test_lights_headlight_and_sky_come_from_the_model(cartpole):
    """The model's lights, its <visual> headlight and its skybox colours are traced Model fields: with all of them
    black (and no emission in the cartpole's materials) every pixel is black; the default model is not. One trace."""
    m, d, *_, r = cartpole
    assert m.nlight and np.all(np.asarray(m.mat_emission) == 0)
    zero = jp.zeros(3)
    head = m.vis.headlight.replace(ambient=zero, diffuse=zero, specular=zero)
    dark = m.replace(light_ambient=0 * m.light_ambient, light_diffuse=0 * m.light_diffuse,
                     light_specular=0 * m.light_specular, tex_rgb1=0 * m.tex_rgb1, tex_rgb2=0 * m.tex_rgb2,
                     vis=m.vis.replace(headlight=head))  # fmt: skip
    traces = []

    def image(model):
        traces.append(1)
        return r.rgb(d, 0, model=model)

    frames = np.asarray(jax.jit(jax.vmap(image))(jax.tree.map(lambda a, b: np.stack([a, b]), m, dark)))
    assert len(traces) == 1
    assert frames[0].mean() > 20 and not frames[1].any()


def test_stop_gap_arguments_are_refused(cartpole):
    """mjcf= / visual= (colours read from the MJCF before the Model carried them) raise, saying what to do."""
    m, d, *_, r = cartpole
    with pytest.raises(TypeError, match="mjcf= no longer exists.*m.geom_rgba"):
        render.Renderer(m, 4, 4, mjcf="cartpole")
    with pytest.raises(TypeError, match="visual= no longer exists"):
        r.rgb(d, 0, visual=object())


def test_shadows_darken(cartpole):
    m, d, *_, r = cartpole
    plain = r.render(d, 0)["rgb"]
    shaded = render.Renderer(m, r.height, r.width, shadows=True).render(d, 0)["rgb"]
    assert np.asarray(shaded).astype(int).sum() < np.asarray(plain).astype(int).sum()


def test_video_writes_mp4(tmp_path, cartpole):
    *_, r = cartpole
    frames = np.stack([np.asarray(r.render(rc.states(rc.REFERENCE["dm/cartpole"], seed=s, kinematics="mujoco")[0][1],
                                           0)["rgb"]) for s in range(3)])  # fmt: skip
    path = render.video(frames, fps=10, path=tmp_path / "out.mp4")
    assert os.path.getsize(path) > 0


def _frames(n=4, h=18, w=24):
    """n frames of a few flat colours (GIF keeps them exactly), each frame different."""
    f = np.zeros((n, h, w, 3), np.uint8)
    for i in range(n):
        f[i, :, : (i + 1) * w // (n + 1)] = (200, 40 * i, 30)
        f[i, h // 2 :, :, 2] = 255
    return f


def test_png_writer_round_trips(tmp_path):
    """PNG, written with the standard library: one image exactly; several frames as a numbered sequence."""
    from PIL import Image

    f = _frames()
    assert render.write_image(tmp_path / "one.png", f[0]) == str(tmp_path / "one.png")
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "one.png")), f[0])
    grey = np.linspace(0.0, 1.0, 35).reshape(5, 7)
    render.write_image(tmp_path / "grey.png", grey)
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "grey.png")), np.round(grey * 255).astype(np.uint8))
    render.write_video(tmp_path / "seq.png", f)
    for i in range(len(f)):
        np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / f"seq_{i:04d}.png")), f[i])
    render.write_video(tmp_path / "single.png", f[:1])
    assert (tmp_path / "single.png").exists()


@pytest.mark.filterwarnings(r"ignore:os\.fork\(\) was called:RuntimeWarning")  # the test's ffmpeg reader, beside JAX
def test_gif_and_mp4_writers(tmp_path):
    """GIF (Pillow) keeps flat colours exactly and the frame time; MP4 (imageio-ffmpeg) has every frame at the fps
    (H.264 is lossy: the frames' means agree to a few levels)."""
    import imageio_ffmpeg
    from PIL import Image, ImageSequence

    f = _frames()
    gif = Image.open(render.write_video(tmp_path / "a.gif", f, fps=25))
    got = [np.asarray(g.convert("RGB")) for g in ImageSequence.Iterator(gif)]
    assert len(got) == len(f) and gif.info["duration"] == 40
    np.testing.assert_array_equal(np.stack(got), f)
    reader = imageio_ffmpeg.read_frames(render.write_video(tmp_path / "a.mp4", f, fps=30))
    meta = next(reader)
    frames = [np.frombuffer(b, np.uint8).reshape(18, 24, 3) for b in reader]
    reader.close()
    assert meta["size"] == (24, 18) and meta["fps"] == 30 and len(frames) == len(f)
    np.testing.assert_allclose([x.mean() for x in frames], f.reshape(len(f), -1).mean(1), atol=4.0)


def test_writers_check_their_dependency_first(tmp_path, monkeypatch):
    """An unknown format and a missing optional writer raise before anything is written, naming the extra."""
    import importlib.util
    import sys

    video = sys.modules["mjx_lite.render.video"]
    with pytest.raises(ValueError, match=r"\.png, \.gif, \.mp4"):
        render.require_writer("out.avi")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    for ext in (".gif", ".mp4"):
        with pytest.raises(ImportError, match=r"mjx_lite\[render\]"):
            render.write_video(tmp_path / f"x{ext}", _frames())
        assert not (tmp_path / f"x{ext}").exists()
    assert video.require_writer("x.png") == ".png"  # PNG needs nothing


# The default free camera (MuJoCo's: stat.center, 1.5 stat.extent, <visual><global> angles) and lighting give a
# well-exposed picture of every bundled model (their <visual>, <statistic> and skybox): mean brightness and
# luminance contrast (0-255) within these ranges, and the model's own geoms (not planes) on enough pixels.
EXPOSURE_MEAN = (60.0, 190.0)
EXPOSURE_STD = (10.0, 90.0)
MIN_BODY_PIXELS = 0.01
LUMA = np.array([0.299, 0.587, 0.114])


# one compile of forward and of the renderer per model (5-50 s each on a loaded 2-core CPU): the README's cartpole
# is the not-slow case, every other bundled model runs with the slow tests (make test-all)
EXPOSURE_FAST = ("cartpole",)


@pytest.mark.parametrize("name", [n if n in EXPOSURE_FAST else pytest.param(n, marks=pytest.mark.slow)
                                  for n in mjl.models.names()])  # fmt: skip
def test_default_view_of_bundled_models_is_well_exposed(name):
    m = mjl.load_mjcf(name)
    d = mjl.forward(m, mjl.make_data(m))
    out = render.Renderer(m, 30, 40).render(d, camera=-1)
    lum = np.asarray(out["rgb"], np.float64) @ LUMA
    seg = np.asarray(out["segmentation"])[..., 0]
    planes = np.nonzero(np.asarray(m.geom_type) == mjl.GeomType.PLANE)[0]
    body = float(np.mean((seg >= 0) & ~np.isin(seg, planes)))
    assert EXPOSURE_MEAN[0] <= lum.mean() <= EXPOSURE_MEAN[1], (name, lum.mean())
    assert EXPOSURE_STD[0] <= lum.std() <= EXPOSURE_STD[1], (name, lum.std())
    assert body >= MIN_BODY_PIXELS, (name, body)


def test_bad_cameras_are_refused(cartpole):
    m, *_ = cartpole
    with pytest.raises(ValueError, match="camera"):
        render.Renderer(m, 4, 4).rgb(mjl.make_data(m), camera=7)
    ortho = mjl.load_mjcf_string('<mujoco><visual><global orthographic="true"/></visual><worldbody>'
                                 '<geom size=".1"/></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(ValueError, match="orthographic"):
        render.Renderer(ortho, 4, 4).depth(mjl.make_data(ortho), camera=-1)


def test_model_colours_match_mujocos_material_rule():
    """Colour, specular, shininess and emission of each geom from the Model (MuJoCo's setMaterial): the material's
    rgba only where the geom's is the default; textures tint; checker geoms; the first skybox is the sky."""
    from mjx_lite.render import renderer as rr

    m = mjl.load_mjcf_string("""<mujoco><asset>
        <texture name="sky" type="skybox" builtin="gradient" rgb1=".1 .2 .3" rgb2=".4 .5 .6" width="8" height="8"/>
        <texture name="sky2" type="skybox" builtin="flat" width="8" height="8"/>
        <texture name="grid" type="2d" builtin="checker" width="8" height="8"/>
        <texture name="tint" type="2d" builtin="flat" rgb1=".5 1 1" width="8" height="8"/>
        <material name="red" rgba="1 0 0 1" specular=".1" shininess=".2" emission=".3"/>
        <material name="grid" texture="grid"/><material name="tint" texture="tint" rgba=".8 .6 .4 1"/></asset>
      <worldbody><geom size=".1"/><geom size=".1" rgba="0 0 1 1"/><geom size=".1" material="red"/>
        <geom size=".1" material="red" rgba="0 1 0 1"/><geom size=".1" material="grid"/>
        <geom size=".1" material="tint"/></worldbody></mujoco>""")
    plan = rr._materials(m)
    colour, spec, shin, emission = (np.asarray(x) for x in rr._geom_colours(m, jp, plan))
    np.testing.assert_allclose(colour, [[.5, .5, .5, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1], [1, 1, 1, 1],
                                        [.4, .6, .4, 1]], rtol=1e-6)  # fmt: skip
    np.testing.assert_allclose(spec, [.5, .5, .1, .1, .5, .5], rtol=1e-6)
    np.testing.assert_allclose(shin, [.5, .5, .2, .2, .5, .5], rtol=1e-6)
    np.testing.assert_allclose(emission, [0, 0, .3, .3, 0, 0], rtol=1e-6)
    assert plan.tex.tolist() == [0, 0, 0, 0, rr._TEX_CHECKER, rr._TEX_TINT]
    assert plan.sky == 0


def test_light_frames_match_mujoco():
    """World positions and directions of lights in every tracking mode (the renderer's mj_camlight) equal MuJoCo's
    light_xpos / light_xdir."""
    from mjx_lite.render import renderer as rr

    xml = """<mujoco><worldbody><light pos="0 0 3" dir="0 1 -1"/>
      <body name="a" pos=".3 .2 1" euler="10 20 30"><joint type="ball"/><geom size=".1" pos=".1 0 0"/>
        <light pos=".1 0 0" dir="1 0 0" mode="fixed"/><light pos="0 .1 0" mode="track"/>
        <light pos="0 0 .1" mode="trackcom"/><light mode="targetbody" target="b"/>
        <light mode="targetbodycom" target="b" directional="true"/>
        <body name="b" pos=".5 0 0"><joint axis="0 1 0"/><geom size=".1" pos="0 0 .2"/></body></body>
      </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = [0.9, 0.1, 0.3, -0.2, 0.7]
    mujoco.mj_forward(mjm, mjd)
    m = mjl.load_mjcf_string(xml)
    d = mjl.make_data(m).replace(xpos=jp.asarray(mjd.xpos), xmat=jp.asarray(mjd.xmat.reshape(-1, 3, 3)),
                                 subtree_com=jp.asarray(mjd.subtree_com))  # MuJoCo's poses: the function alone
    pos, xdir = rr._light_frames(m, d)
    np.testing.assert_allclose(np.asarray(pos), mjd.light_xpos, atol=1e-9)
    np.testing.assert_allclose(np.asarray(xdir), mjd.light_xdir, atol=1e-9)
