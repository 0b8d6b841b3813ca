"""`video(frames, fps)`: show frames in a notebook, or write them to an mp4 / gif file (mediapy).

mediapy encodes with an `ffmpeg` executable; where none is on the PATH, the one bundled by the `imageio-ffmpeg`
wheel is used (a dependency of the `notebook`/`test` extras), so no system package is needed.
"""

from __future__ import annotations

import os
import shutil

import numpy as np

__all__ = ["video", "write_video"]


def _mediapy():
    try:
        import mediapy  # noqa: PLC0415 - optional dependency (the `notebook` extra)
    except ImportError as e:
        raise ImportError("render.video needs mediapy: pip install 'mjx_lite[notebook]'") from e
    if shutil.which("ffmpeg") is None:
        try:
            import imageio_ffmpeg  # noqa: PLC0415 - optional: bundles an ffmpeg binary
        except ImportError as e:
            raise ImportError("render.video: no ffmpeg on the PATH; pip install imageio-ffmpeg") from e
        mediapy.set_ffmpeg(imageio_ffmpeg.get_ffmpeg_exe())
    return mediapy


def _frames(frames) -> np.ndarray:
    f = np.asarray(frames)
    if f.ndim != 4 or f.shape[-1] != 3:
        raise ValueError(f"render.video: frames must be (T, H, W, 3), got shape {f.shape}")
    if f.dtype != np.uint8:
        f = np.clip(np.round(np.asarray(f, np.float64) * 255.0), 0, 255).astype(np.uint8)
    return f


def write_video(path: str | os.PathLike, frames, fps: float = 30.0) -> str:
    """Write frames (T, H, W, 3) (uint8, or floats in [0, 1]) to `path` (.mp4 or .gif); returns the path."""
    f = _frames(frames)
    if f.shape[1] % 2 or f.shape[2] % 2:  # H.264 needs even sizes
        f = f[:, : f.shape[1] // 2 * 2, : f.shape[2] // 2 * 2]
    _mediapy().write_video(os.fspath(path), f, fps=fps)
    return os.fspath(path)


def video(frames, fps: float = 30.0, path: str | os.PathLike | None = None, **kwargs):
    """Display frames (T, H, W, 3) in a notebook (mediapy.show_video), or write them to `path` when given."""
    if path is not None:
        return write_video(path, frames, fps)
    return _mediapy().show_video(_frames(frames), fps=fps, **kwargs)
