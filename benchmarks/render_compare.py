"""Our renderer beside `mujoco.Renderer` (the oracle) on one model: depth and segmentation agreement, images.

    MUJOCO_GL=egl python benchmarks/render_compare.py [MODEL ...] [--size 64]

For each model and camera (the free camera and every model camera) both renderers draw the same state (qpos0
plus a small random perturbation, forwarded by each engine): depth agreement is the fraction of the pixels where
both see a surface whose depths differ by at most 1 %, segmentation agreement the fraction of all pixels with the
same geom id (or both none). MuJoCo is told to draw what we draw: geoms of groups 0-2, no sites, no tendons.
Used by tests/test_render.py and by the pictures in docs/rendering.md.
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402
import mujoco  # noqa: E402
import numpy as np  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite import render  # noqa: E402

SITE_PACKAGES = os.path.dirname(os.path.dirname(mujoco.__file__))
MJX_TEST_DATA = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
DM_SUITE = os.path.join(SITE_PACKAGES, "dm_control", "suite")
# reference models of the oracle tests: (label, path)
REFERENCE = {
    "mjx/humanoid": os.path.join(MJX_TEST_DATA, "humanoid", "humanoid.xml"),
    "mjx/convex": os.path.join(MJX_TEST_DATA, "convex.xml"),
    "dm/cartpole": os.path.join(DM_SUITE, "cartpole.xml"),
    "dm/cheetah": os.path.join(DM_SUITE, "cheetah.xml"),
    "dm/walker": os.path.join(DM_SUITE, "walker.xml"),
    "dm/finger": os.path.join(DM_SUITE, "finger.xml"),
    "dm/reacher": os.path.join(DM_SUITE, "reacher.xml"),
}
DEPTH_RTOL = 0.01  # the criterion: depth within 1 %


def every_geom_xml() -> str:
    """A scene with every geom type: infinite and sized planes, height field, sphere, capsule, ellipsoid,
    cylinder, box and a non-convex mesh (320 triangles); a checker floor, two cameras, a light."""
    # a non-convex mesh: a UV sphere whose radius varies with the angles (many triangles: several BVH levels)
    nu, nv = 16, 10
    verts = [(0, 0, 1.0), (0, 0, -1.0)]
    for i in range(1, nv):
        th = np.pi * i / nv
        for j in range(nu):
            ph = 2 * np.pi * j / nu
            r = 1.0 + 0.25 * np.cos(3 * ph) * np.sin(th)
            verts.append((r * np.sin(th) * np.cos(ph), r * np.sin(th) * np.sin(ph), np.cos(th)))
    faces = []

    def ring(i, j):
        return 2 + (i - 1) * nu + (j % nu)

    for j in range(nu):
        faces.append((0, ring(1, j), ring(1, j + 1)))
        faces.append((1, ring(nv - 1, j + 1), ring(nv - 1, j)))
    for i in range(1, nv - 1):
        for j in range(nu):
            a, b, c, d = ring(i, j), ring(i, j + 1), ring(i + 1, j), ring(i + 1, j + 1)
            faces += [(a, c, d), (a, d, b)]
    v = " ".join(f"{x:.5f}" for p in verts for x in p)
    f = " ".join(str(int(x)) for t in faces for x in t)
    rng = np.random.default_rng(3)
    elev = " ".join(f"{x:.4f}" for x in rng.uniform(0, 1, 12 * 12))
    return f"""
<mujoco model="every geom type">
  <asset>
    <texture name="grid" type="2d" builtin="checker" rgb1=".1 .2 .3" rgb2=".2 .3 .4" width="64" height="64"/>
    <material name="grid" texture="grid" texrepeat="2 2" texuniform="true"/>
    <mesh name="blob" vertex="{v}" face="{f}" scale=".15 .15 .15"/>
    <hfield name="terrain" nrow="12" ncol="12" size=".4 .4 .1 .05" elevation="{elev}"/>
  </asset>
  <worldbody>
    <light pos="0 0 3" dir="0 0 -1" diffuse=".6 .6 .6"/>
    <geom name="floor" type="plane" size="0 0 1" material="grid"/>
    <geom name="pad" type="plane" size=".3 .2 .1" pos="-.9 .6 .01" rgba=".8 .7 .2 1"/>
    <geom name="terrain" type="hfield" hfield="terrain" pos=".8 .7 0" rgba=".4 .6 .3 1"/>
    <body name="a" pos="-.6 -.3 .3"><freejoint/><geom name="sphere" type="sphere" size=".15" rgba=".9 .2 .2 1"/></body>
    <body name="b" pos="-.2 -.3 .3" euler="30 20 0"><freejoint/>
      <geom name="capsule" type="capsule" size=".08 .15" rgba=".2 .9 .2 1"/></body>
    <body name="c" pos=".2 -.3 .3" euler="10 40 0"><freejoint/>
      <geom name="ellipsoid" type="ellipsoid" size=".2 .1 .12" rgba=".2 .2 .9 1"/></body>
    <body name="d" pos=".6 -.3 .3" euler="50 0 20"><freejoint/>
      <geom name="cylinder" type="cylinder" size=".1 .12" rgba=".9 .9 .2 1"/></body>
    <body name="e" pos="-.3 .3 .3" euler="20 30 40"><freejoint/>
      <geom name="box" type="box" size=".12 .08 .1" rgba=".9 .2 .9 1"/></body>
    <body name="f" pos=".2 .3 .3" euler="0 20 60"><freejoint/>
      <geom name="mesh" type="mesh" mesh="blob" rgba=".2 .9 .9 1"/></body>
    <camera name="front" pos="0 -2.2 1.4" xyaxes="1 0 0 0 .55 .83"/>
    <camera name="top" pos="0 0 3" xyaxes="1 0 0 0 1 0" fovy="50"/>
  </worldbody>
</mujoco>"""


def every_geom_path(directory: str | None = None) -> str:
    """every_geom_xml() written to a file in `directory` (default: the system's temporary directory; MuJoCo and our
    loader both read it from there)."""
    import tempfile  # noqa: PLC0415

    path = os.path.join(directory or tempfile.gettempdir(), f"mjx_lite_every_geom_{os.getpid()}.xml")
    with open(path, "w") as f:
        f.write(every_geom_xml())
    return path


def scene_option() -> mujoco.MjvOption:
    """MuJoCo's default visualisation less what our renderer does not draw (sites, tendons)."""
    opt = mujoco.MjvOption()
    opt.sitegroup[:] = 0
    opt.flags[mujoco.mjtVisFlag.mjVIS_TENDON] = 0
    return opt


def mujoco_images(mjm, mjd, height: int, width: int, camera: int) -> dict:
    r = mujoco.Renderer(mjm, height, width)
    try:
        r.update_scene(mjd, camera, scene_option())
        rgb = r.render().copy()
        r.enable_depth_rendering()
        depth = r.render().copy()
        r.disable_depth_rendering()
        r.enable_segmentation_rendering()
        seg = r.render().copy()
    finally:
        r.close()
    return {"rgb": rgb, "depth": depth, "segmentation": seg}


def states(path: str, seed: int = 0, noise: float = 0.1, kinematics: str = "ours"):
    """(our Model, Data), (MjModel, MjData) at the same perturbed qpos, both forwarded.

    kinematics="ours": our Data comes from our `forward` (contacts off: they do not change what is drawn);
    "mujoco": our Data takes MuJoCo's poses (xpos, xmat, geom/cam poses, subtree_com), which tests the renderer
    alone and saves compiling `forward`.
    """
    m = mjl.load_mjcf(path)
    mjm = mujoco.MjModel.from_xml_path(path)
    mjd = mujoco.MjData(mjm)
    rng = np.random.default_rng(seed)
    qpos = np.array(mjm.qpos0)
    for j in range(mjm.njnt):
        if mjm.jnt_type[j] in (mujoco.mjtJoint.mjJNT_HINGE, mujoco.mjtJoint.mjJNT_SLIDE):
            qpos[mjm.jnt_qposadr[j]] += noise * rng.standard_normal()
    mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    d = mjl.make_data(m)
    f = d.qpos.dtype
    d = d.replace(qpos=jax.numpy.asarray(qpos, f))
    if kinematics == "mujoco":
        poses = {k: np.asarray(getattr(mjd, k)).reshape(np.shape(getattr(d, k))) for k in
                 ("xpos", "xmat", "geom_xpos", "geom_xmat", "cam_xpos", "cam_xmat", "subtree_com")}  # fmt: skip
        return (m, d.replace(**{k: jax.numpy.asarray(v, f) for k, v in poses.items()})), (mjm, mjd)
    mk = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | mjl.DisableBit.CONTACT
                                     | mjl.DisableBit.CONSTRAINT))  # fmt: skip
    return (m, jax.jit(mjl.forward)(mk, d)), (mjm, mjd)


def agreement(ours: dict, theirs: dict) -> dict:
    """Depth agreement (where both see a surface) and segmentation agreement (all pixels)."""
    so, st = np.asarray(ours["segmentation"])[..., 0], theirs["segmentation"][..., 0]
    do, dt = np.asarray(ours["depth"], np.float64), theirs["depth"].astype(np.float64)
    both = (so >= 0) & (st >= 0)
    close = np.abs(do - dt) <= DEPTH_RTOL * dt
    return {"depth": float(close[both].mean()) if both.any() else 1.0, "segmentation": float((so == st).mean()),
            "surface_pixels": int(both.sum())}


def compare(path: str, height: int = 64, width: int = 64, cameras=None, renderer=None, seed: int = 0,
            kinematics: str = "ours") -> dict:
    """{camera: agreement dict + images} for the free camera (-1) and every model camera."""
    (m, d), (mjm, mjd) = states(path, seed, kinematics=kinematics)
    r = renderer if renderer is not None else render.Renderer(m, height, width)
    cams = list(range(-1, m.ncam)) if cameras is None else cameras
    out = {}
    for c in cams:
        ours = jax.jit(lambda d, c=c: r.render(d, c))(d)
        theirs = mujoco_images(mjm, mjd, height, width, c)
        out[c] = {**agreement(ours, theirs), "ours": jax.tree.map(np.asarray, ours), "mujoco": theirs}
    return out


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=list(REFERENCE))
    p.add_argument("--size", type=int, default=64)
    a = p.parse_args(argv)
    for name in a.models:
        path = REFERENCE.get(name, name)
        res = compare(path, a.size, a.size)
        for c, v in res.items():
            print(f"{name:16s} camera {c:2d}: depth {100 * v['depth']:6.2f} %  segmentation "
                  f"{100 * v['segmentation']:6.2f} %  ({v['surface_pixels']} surface pixels)")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
