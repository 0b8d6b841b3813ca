"""Side-by-side pictures (ours | MuJoCo's) for docs/rendering.md, written to docs/images/.

    MUJOCO_GL=egl python benchmarks/render_images.py

Each PNG shows our rgb, MuJoCo's rgb, and our depth beside MuJoCo's, for one model and camera (240x320).
"""

from __future__ import annotations

import os

import mediapy
import numpy as np

from benchmarks import render_compare as rc
from mjx_lite import render

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "images")
PICTURES = (("every_geom", None, 0), ("dm/cheetah", None, 0), ("mjx/humanoid", None, -1), ("dm/walker", None, 0))


def _depth_rgb(depth: np.ndarray, lo: float, hi: float) -> np.ndarray:
    g = 1.0 - np.clip((depth - lo) / max(hi - lo, 1e-9), 0, 1)
    return np.repeat((g[..., None] * 255).astype(np.uint8), 3, -1)


def picture(path: str, camera: int, height: int = 240, width: int = 320, shadows: bool = True) -> np.ndarray:
    (m, _), _ = rc.states(path)
    r = render.Renderer(m, height, width, shadows=shadows)
    res = rc.compare(path, height, width, cameras=[camera], renderer=r)[camera]
    ours, theirs = res["ours"], res["mujoco"]
    seen = theirs["segmentation"][..., 0] >= 0
    lo, hi = (float(theirs["depth"][seen].min()), float(theirs["depth"][seen].max())) if seen.any() else (0, 1)
    gap = np.full((height, 4, 3), 255, np.uint8)
    row1 = np.concatenate([ours["rgb"], gap, theirs["rgb"]], 1)
    row2 = np.concatenate([_depth_rgb(ours["depth"], lo, hi), gap, _depth_rgb(theirs["depth"], lo, hi)], 1)
    return np.concatenate([row1, np.full((4, row1.shape[1], 3), 255, np.uint8), row2], 0), res


def main() -> None:
    os.makedirs(OUT, exist_ok=True)
    for name, path, cam in PICTURES:
        if path is None:
            path = rc.every_geom_path() if name == "every_geom" else rc.REFERENCE[name]
        img, res = picture(path, cam)
        f = os.path.join(OUT, f"render_{name.replace('/', '_')}.png")
        mediapy.write_image(f, img)
        print(f"{f}: depth {100 * res['depth']:.2f} % segmentation {100 * res['segmentation']:.2f} %")


if __name__ == "__main__":
    main()
