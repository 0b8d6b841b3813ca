"""Record a rollout to frames: the loop shared by `mjx_lite render` (zero controls) and `play` / `train --video`
(a policy).

    plan = record.frame_plan(dt, fps=30.0, steps=300)          # a frame every plan.per_frame steps
    frames, state = record.record(r, advance, state, plan.nframes, camera, data_of=lambda s: s.data)
    record.write(path, frames, plan, height, width)            # writes, prints what it wrote, notes a dark picture

`advance(state) -> state` runs `plan.per_frame` steps (jit it); `data_of(state)` is the `Data` a frame draws.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from mjx_lite.render.renderer import Renderer
from mjx_lite.render.video import write_video

__all__ = ["DARK", "FramePlan", "frame_plan", "record", "write"]

# a first frame darker than this mean (0-255) gets a note on where the lighting comes from
DARK = 40.0


@dataclasses.dataclass(frozen=True)
class FramePlan:
    """per_frame: steps between frames; nframes: frames after the initial one; fps: playback rate (frames per
    second of simulated time, rounded to whole steps); dt: seconds per step; steps: the steps asked for."""

    per_frame: int
    nframes: int
    fps: float
    dt: float
    steps: int

    def describe(self, unit: str = "steps") -> str:
        """How steps become frames, for the user before rendering: "a frame every 4 steps (0.04 s); 20 steps -> 6
        frames (the initial state and 5 more), played at 25 fps" (or "one frame of the initial state")."""
        if not self.nframes:
            return "one frame of the initial state"
        done = self.nframes * self.per_frame
        rest = f" (of the {self.steps} asked: whole frames)" if self.steps != done else ""
        return (f"a frame every {self.per_frame} {unit} ({self.per_frame * self.dt:.6g} s); {done} {unit}{rest} -> "
                f"{self.nframes + 1} frames (the initial state and {self.nframes} more), played at {self.fps:.4g} fps")


def frame_plan(dt: float, fps: float, steps: int) -> FramePlan:
    """A frame every round(1 / (fps dt)) steps (at least 1) of `dt` seconds, over `steps` steps (whole frames)."""
    per_frame = max(1, round(1.0 / (fps * dt)))
    return FramePlan(per_frame, max(0, int(steps)) // per_frame, 1.0 / (per_frame * dt), float(dt), int(steps))


def record(r: Renderer, advance: Callable[[Any], Any], state: Any, nframes: int, camera: int | str = -1,
           data_of: Callable[[Any], Any] = lambda s: s, desc: str = "render") -> tuple[np.ndarray, Any]:  # fmt: skip
    """(frames, last state): frames (nframes + 1, H, W, 3) uint8 of `state`, then `nframes` times
    `state = advance(state)`; the last state is the one the last frame drew.

    Args:
      r: the Renderer; camera: its camera (index, name, -1 for the free camera).
      advance: state -> state (one frame's worth of steps).
      data_of: the Data of a state (identity when the state is a Data; `lambda s: s.data` for an env State).
    """
    frames = [np.asarray(r.rgb(data_of(state), camera))]
    for _ in tqdm(range(nframes), desc=desc, unit="frame", disable=nframes == 0):
        state = advance(state)
        frames.append(np.asarray(r.rgb(data_of(state), camera)))
    return np.stack(frames), state


def write(path: str, frames: np.ndarray, plan: FramePlan, unit: str = "steps", echo: Callable = print) -> str:
    """Write `frames` at the plan's fps to `path` (.mp4, .gif, .png), print what was written, and a note when the
    first frame is dark. Returns what `write_video` returned."""
    out = write_video(path, frames, fps=plan.fps)
    n, h, w = frames.shape[:3]
    echo(f"wrote {out}: {n} frame{'s' * (n > 1)} {h}x{w}, {plan.nframes * plan.per_frame} {unit}")
    brightness = float(np.mean(frames[0]))
    if brightness < DARK:
        echo(f"note: the picture is dark (mean {brightness:.0f}/255). Lighting comes from the model, as in MuJoCo: "
             "brighten <visual><headlight ambient diffuse>, add a <light> or a skybox texture")  # fmt: skip
    return out
