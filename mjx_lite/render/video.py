"""Write rendered frames to files, or show them in a notebook.

    render.write_image("frame.png", rgb)                 # (H, W, 3) uint8 (or floats in [0, 1])
    render.write_video("rollout.mp4", frames, fps=30)    # (T, H, W, 3); .mp4, .gif or .png

Writers, chosen per format:
- PNG: written here with the standard library (zlib), so a picture needs nothing beyond the base install. A
  single frame is one file; several frames are a numbered sequence beside it (`out.png` -> `out_0000.png`,
  `out_0001.png`, ...), which any tool (ffmpeg, ImageMagick) assembles.
- GIF: Pillow (the `render` extra). GIF frame durations are whole hundredths of a second, so 30 fps plays at
  1 / 0.03 = 33.3 fps: say `fps=25` or 50 for exact timing.
- MP4 (H.264, yuv420p, playable in browsers): the ffmpeg binary that the `imageio-ffmpeg` wheel bundles (the
  `render` extra), so no system package is needed. H.264 needs even sizes: an odd height or width loses its last
  row or column.
`require_writer(path)` checks a format's dependency before any work (the CLI calls it before it simulates).
`video(frames)` shows frames in a notebook (mediapy, the `notebook` extra).
"""

from __future__ import annotations

import importlib.util
import os
import struct
import warnings
import zlib

import numpy as np

__all__ = ["require_writer", "video", "write_image", "write_video"]

# file extension -> (module it needs or None, the extra that installs it)
FORMATS = {".png": None, ".gif": "PIL", ".mp4": "imageio_ffmpeg"}
_EXTRA = "pip install 'mjx_lite[render]'"


def require_writer(path: str | os.PathLike) -> str:
    """The extension of `path` (".png", ".gif" or ".mp4") once its writer is importable; else a ValueError (an
    unsupported extension) or an ImportError naming the extra that provides the writer."""
    ext = os.path.splitext(os.fspath(path))[1].lower()
    if ext not in FORMATS:
        raise ValueError(f"render: cannot write {os.fspath(path)!r}: use one of {', '.join(FORMATS)}")
    module = FORMATS[ext]
    if module is not None and importlib.util.find_spec(module) is None:
        what = "Pillow" if module == "PIL" else "imageio-ffmpeg (its bundled ffmpeg)"
        raise ImportError(f"render: writing {ext} needs {what}: {_EXTRA} (.png needs nothing)")
    return ext


def _uint8(x, what: str, ndim: int) -> np.ndarray:
    f = np.asarray(x)
    if f.ndim == ndim - 1:  # grey: add a channel axis
        f = f[..., None]
    if f.ndim != ndim or f.shape[-1] not in (1, 3, 4):
        want = "(H, W, 3)" if ndim == 3 else "(T, H, W, 3)"
        raise ValueError(f"render.{what}: expected {want} (or 1 or 4 channels), got shape {f.shape}")
    if f.dtype != np.uint8:
        f = np.clip(np.round(np.asarray(f, np.float64) * 255.0), 0, 255).astype(np.uint8)
    return f


def _png(img: np.ndarray) -> bytes:
    """PNG file bytes of an (H, W, C) uint8 image, C = 1 (grey), 3 (RGB) or 4 (RGBA): one IDAT, filter 0."""
    h, w, c = img.shape
    colour_type = {1: 0, 3: 2, 4: 6}[c]
    rows = np.concatenate([np.zeros((h, 1), np.uint8), img.reshape(h, w * c)], axis=1)

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, colour_type, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows.tobytes(), 6))
            + chunk(b"IEND", b""))  # fmt: skip


def write_image(path: str | os.PathLike, image) -> str:
    """Write one image (H, W, 3) (uint8, or floats in [0, 1]; 1 or 4 channels too) to a .png file; returns the
    path. Needs nothing beyond the base install."""
    if require_writer(path) != ".png":
        raise ValueError(f"render.write_image: {os.fspath(path)!r}: images are written as .png")
    with open(path, "wb") as fh:
        fh.write(_png(_uint8(image, "write_image", 3)))
    return os.fspath(path)


def write_video(path: str | os.PathLike, frames, fps: float = 30.0) -> str:
    """Write frames (T, H, W, 3) (uint8, or floats in [0, 1]) to `path`: .mp4, .gif, or .png (one frame: that
    file; several: a numbered sequence `stem_0000.png`, ...). Returns what was written (the path, or the first and
    last file of a PNG sequence). GIF needs Pillow and MP4 imageio-ffmpeg (`pip install 'mjx_lite[render]'`)."""
    ext = require_writer(path)
    f = _uint8(frames, "write_video", 4)
    path = os.fspath(path)
    if ext == ".png":
        if len(f) == 1:
            return write_image(path, f[0])
        stem = path[: -len(ext)]
        names = [f"{stem}_{i:04d}.png" for i in range(len(f))]
        for name, img in zip(names, f):
            write_image(name, img)
        return f"{names[0]} ... {names[-1]}"
    if ext == ".gif":
        from PIL import Image  # noqa: PLC0415 - optional dependency (the `render` extra)

        images = [Image.fromarray(img[..., 0] if img.shape[-1] == 1 else img) for img in f]
        images[0].save(path, save_all=True, append_images=images[1:], duration=max(10, round(1000.0 / fps)), loop=0)
        return path
    import imageio_ffmpeg  # noqa: PLC0415 - optional dependency (the `render` extra)

    f = f[:, : f.shape[1] // 2 * 2, : f.shape[2] // 2 * 2, :3]  # H.264 (yuv420p) needs even sizes
    if f.shape[-1] == 1:
        f = np.repeat(f, 3, axis=-1)
    writer = imageio_ffmpeg.write_frames(path, (f.shape[2], f.shape[1]), fps=fps, codec="libx264",
                                         pix_fmt_in="rgb24", pix_fmt_out="yuv420p", macro_block_size=2,
                                         ffmpeg_log_level="error")  # fmt: skip
    with warnings.catch_warnings():  # Python warns of fork() beside JAX's threads; the child only execs ffmpeg
        warnings.filterwarnings("ignore", message=r"os\.fork\(\) was called", category=RuntimeWarning)
        writer.send(None)  # start the generator (and ffmpeg)
    for img in f:
        writer.send(np.ascontiguousarray(img).tobytes())
    writer.close()
    return path


def video(frames, fps: float = 30.0, path: str | os.PathLike | None = None, **kwargs):
    """Display frames (T, H, W, 3) in a notebook (mediapy.show_video), or write them to `path` when given."""
    if path is not None:
        return write_video(path, frames, fps)
    try:
        import mediapy  # noqa: PLC0415 - optional dependency (the `notebook` extra)
    except ImportError as e:
        raise ImportError("render.video shows videos with mediapy: pip install 'mjx_lite[notebook]', or write a file "
                          "with render.write_video(path, frames)") from e  # fmt: skip
    if not mediapy.video_is_available():  # no ffmpeg on the PATH: imageio-ffmpeg's
        try:
            import imageio_ffmpeg  # noqa: PLC0415 - optional dependency (the `render` extra)
        except ImportError as e:
            raise ImportError(f"render.video: no ffmpeg on the PATH: {_EXTRA}") from e
        mediapy.set_ffmpeg(imageio_ffmpeg.get_ffmpeg_exe())
    return mediapy.show_video(_uint8(frames, "video", 4), fps=fps, **kwargs)
