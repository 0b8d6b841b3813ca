"""Batched ray-cast renderer in JAX: `Renderer(m, height, width)` -> rgb / depth / segmentation images that
jit, vmap and (for depth, away from silhouettes) grad go through; `free_camera`; `video`.

    from mjx_lite import render
    r = render.Renderer(m, height=240, width=320)                  # colours, lights, <visual>: from the Model
    frames = jax.vmap(lambda d: r.rgb(d, camera=-1))(batch)       # (B, H, W, 3) uint8
    render.video(frames, fps=30)

See docs/rendering.md.
"""

from mjx_lite.render.camera import FreeCamera, free_camera
from mjx_lite.render.renderer import DEFAULT_GEOMGROUP, Renderer
from mjx_lite.render.video import video, write_video

__all__ = ["DEFAULT_GEOMGROUP", "FreeCamera", "Renderer", "free_camera", "video", "write_video"]
