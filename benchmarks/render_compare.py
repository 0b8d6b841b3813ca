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


def states(path: str, seed: int = 0, noise: float = 0.1):
    """(our Model, Data), (MjModel, MjData) at the same perturbed qpos, both forwarded."""
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
    d = d.replace(qpos=jax.numpy.asarray(qpos, d.qpos.dtype))
    # positions only: contacts and constraints do not change what is drawn (and would cost compile time)
    mk = m.replace(opt=m.opt.replace(disableflags=m.opt.disableflags | mjl.DisableBit.CONTACT
                                     | mjl.DisableBit.CONSTRAINT))
    d = jax.jit(mjl.forward)(mk, d)
    return (m, d), (mjm, mjd)


def agreement(ours: dict, theirs: dict) -> dict:
    """Depth agreement (where both see a surface) and segmentation agreement (all pixels)."""
    so, st = np.asarray(ours["segmentation"])[..., 0], theirs["segmentation"][..., 0]
    do, dt = np.asarray(ours["depth"], np.float64), theirs["depth"].astype(np.float64)
    both = (so >= 0) & (st >= 0)
    close = np.abs(do - dt) <= DEPTH_RTOL * dt
    return {"depth": float(close[both].mean()) if both.any() else 1.0, "segmentation": float((so == st).mean()),
            "surface_pixels": int(both.sum())}


def compare(path: str, height: int = 64, width: int = 64, cameras=None, renderer=None, seed: int = 0) -> dict:
    """{camera: agreement dict + images} for the free camera (-1) and every model camera."""
    (m, d), (mjm, mjd) = states(path, seed)
    r = renderer if renderer is not None else render.Renderer(m, height, width, mjcf=path)
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
