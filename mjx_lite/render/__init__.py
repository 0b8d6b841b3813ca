"""Batched ray-cast renderer in JAX: `Renderer(m, height, width)` -> rgb / depth / segmentation images that
jit, vmap and (for depth, away from silhouettes) grad go through; `free_camera`; `video`.

    from mjx_lite import render
    r = render.Renderer(m, height=240, width=320)                  # colours, lights, <visual>: from the Model
    frames = jax.vmap(lambda d: r.rgb(d, camera=-1))(batch)       # (B, H, W, 3) uint8
    render.write_image("frame.png", frames[0])                    # PNG: no extra dependency
    render.write_video("rollout.mp4", frames, fps=30)             # .mp4, .gif: pip install 'mjx_lite[render]'
    render.video(frames, fps=30)                                  # in a notebook

See docs/rendering.md.
"""

from mjx_lite.render.camera import FreeCamera, free_camera
from mjx_lite.render.renderer import DEFAULT_GEOMGROUP, Renderer
from mjx_lite.render.video import require_writer, video, write_image, write_video

__all__ = ["DEFAULT_GEOMGROUP", "FreeCamera", "Renderer", "free_camera", "require_writer", "video", "write_image",
           "write_video"]
