"""mjx_lite's command line: `python -m mjx_lite {run,bench,render,check,train} ...` (or `mjx_lite ...`).

    python -m mjx_lite run cartpole --batch 256 --steps 200        # batched rollout: compile time, steps/s
    python -m mjx_lite bench humanoid --batch 1024                 # beside MJX and MuJoCo C
    python -m mjx_lite render cartpole -o out.mp4 --steps 300      # a rollout to a video (.mp4, .gif, .png)
    python -m mjx_lite check PATH                                  # compile, sizes, compare with MuJoCo C
    python -m mjx_lite train cartpole_balance                      # PPO (mjx_lite.rl.train)

MODEL is a path to an MJCF (or URDF) file or the name of a bundled model (`mjx_lite.models.names()`). Each command's
--help shows its options, their defaults and examples.

Exit codes: 0 success; 1 failure (invalid MJCF, a forward pass that differs from MuJoCo's); 2 a command-line
error or a model that uses a feature mjx_lite does not support (the message names it).

Imports: the one exception to "no imports in function bodies" in mjx_lite is a subcommand importing a package
that only it needs when it runs: `train` imports `mjx_lite.rl.train` (another subpackage, which may be absent),
so that `--help` and the other subcommands work without it. (`check` reaches the optional `mujoco` through
`mjx_lite.interop`, which imports it at its top when installed.)
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

import jax
import jax.numpy as jp
import numpy as np
from tqdm import tqdm

import mjx_lite
from mjx_lite import bench, check, render, run
from mjx_lite.run import HelpFormatter, model_arguments, model_name

# how the user called us, for usage lines: the `mjx_lite` console script or `python -m mjx_lite`
PROG = "mjx_lite" if os.path.basename(sys.argv[0] or "") == "mjx_lite" else "python -m mjx_lite"

EXIT_FAILURE = 1
EXIT_UNSUPPORTED = 2
# render: a first frame darker than this mean (0-255) gets a note on where the lighting comes from
DARK = 40.0


def _load(model: str):
    """(Model, path) of a path or bundled name; unsupported features exit 2, invalid MJCF exits 1."""
    try:
        path = os.fspath(mjx_lite.models.resolve(model))
    except FileNotFoundError as e:
        _fail(str(e), EXIT_FAILURE)
    try:
        return mjx_lite.load_mjcf(path), path
    except NotImplementedError as e:
        _fail(f"unsupported feature: {e}", EXIT_UNSUPPORTED)
    except ValueError as e:
        _fail(f"invalid model: {e}", EXIT_FAILURE)


def _fail(msg: str, code: int):
    print(f"mjx_lite: {msg}", file=sys.stderr)
    raise SystemExit(code)


# ---- run / bench: the existing mains -------------------------------------------------------------------


def cmd_run(argv: list[str]) -> int:
    run.main(argv, prog=f"{PROG} run")
    return 0


def cmd_bench(argv: list[str]) -> int:
    bench.main(argv, prog=f"{PROG} bench")
    return 0


# ---- render --------------------------------------------------------------------------------------------


RENDER_EXAMPLES = """examples:
  {prog} cartpole -o cartpole.mp4                  MP4 (pip install 'mjx_lite[render]')
  {prog} humanoid -o humanoid.gif --fps 25 --steps 200
  {prog} cartpole -o frame.png --steps 0           one picture (PNG needs no extra)
  {prog} cartpole -o frames.png --steps 30         frames_0000.png, frames_0001.png, ...
  {prog} path/to/model.xml --camera 0 --height 480 --width 640

Frames and steps: a frame is drawn every round(1 / (fps x timestep)) physics steps, so --steps 100 of a model
with timestep 0.01 s at 30 fps (a frame every 3 steps) gives 34 frames: the initial state and 33 more.
"""


def cmd_render(argv: list[str]) -> int:
    """Record a rollout (zero controls, a small random initial velocity) to a video or images. The picture's
    camera, lights and colours are the model's, as in MuJoCo (camera -1: MuJoCo's default free camera, looking
    at the model's <statistic center> from 1.5 x its extent)."""
    prog = f"{PROG} render"
    p = argparse.ArgumentParser(prog=prog, description=inspect.cleandoc(cmd_render.__doc__),
                                formatter_class=HelpFormatter, epilog=RENDER_EXAMPLES.format(prog=prog))  # fmt: skip
    model_arguments(p)
    p.add_argument("-o", "--output", default="out.mp4",
                   help="file to write: .mp4, .gif, or .png (one frame: that file; several: numbered files)")
    p.add_argument("--steps", type=int, default=300, help="physics steps to simulate (0: one frame)")
    p.add_argument("--fps", type=float, default=30.0, help="frames per second of simulated time")
    p.add_argument("--height", type=int, default=240, help="image height in pixels")
    p.add_argument("--width", type=int, default=320, help="image width in pixels")
    p.add_argument("--camera", default="-1", help="camera index or name (-1: the free camera)")
    p.add_argument("--shadows", action="store_true", help="cast shadows from the model's lights")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial velocity")
    a = p.parse_args(argv)
    try:  # before any work: the format's writer (GIF: Pillow, MP4: imageio-ffmpeg)
        render.require_writer(a.output)
    except ImportError as e:
        _fail(str(e), EXIT_UNSUPPORTED)
    except ValueError as e:
        p.error(str(e))
    m, path = _load(model_name(p, a))
    camera = int(a.camera) if a.camera.lstrip("-").isdigit() else a.camera
    r = render.Renderer(m, a.height, a.width, shadows=a.shadows)
    try:
        r.camera_id(camera)
    except ValueError as e:
        _fail(str(e), EXIT_UNSUPPORTED)
    d = mjx_lite.make_data(m)
    rng = np.random.default_rng(a.seed)
    d = d.replace(qvel=jp.asarray(0.1 * rng.standard_normal(m.nv), d.qvel.dtype))
    dt = float(m.opt.timestep)
    per_frame = max(1, round(1.0 / (a.fps * dt)))
    nframes = max(0, a.steps) // per_frame
    fps = 1.0 / (per_frame * dt)
    if nframes:
        frame_s = run.fmt(per_frame * np.asarray(m.opt.timestep))
        rest = f" (of the {a.steps} asked: whole frames)" if a.steps != nframes * per_frame else ""
        print(f"{os.path.basename(path)}: timestep {run.fmt(m.opt.timestep)} s at {a.fps:g} fps: a frame every "
              f"{per_frame} steps ({frame_s} s); {nframes * per_frame} steps{rest} -> {nframes + 1} frames "
              f"(the initial state and {nframes} more), played at {fps:.4g} fps", flush=True)  # fmt: skip
    else:
        print(f"{os.path.basename(path)}: one frame of the initial state", flush=True)

    @jax.jit
    def advance(d):
        d = jax.lax.fori_loop(0, per_frame, lambda _, d: mjx_lite.step(m, d), d)
        return d

    frames = [np.asarray(r.rgb(mjx_lite.forward(m, d), camera))]
    for _ in tqdm(range(nframes), desc=f"render {os.path.basename(path)}", unit="frame", disable=nframes == 0):
        d = advance(d)
        frames.append(np.asarray(r.rgb(d, camera)))
    out = render.write_video(a.output, np.stack(frames), fps=fps)
    plural = "s" * (len(frames) > 1)
    print(f"wrote {out}: {len(frames)} frame{plural} {a.height}x{a.width}, {nframes * per_frame} steps")
    brightness = float(np.mean(frames[0]))
    if brightness < DARK:
        print(f"note: the picture is dark (mean {brightness:.0f}/255). Lighting comes from the model, as in MuJoCo: "
              "brighten <visual><headlight ambient diffuse>, add a <light> or a skybox texture")  # fmt: skip
    return 0


# ---- check ---------------------------------------------------------------------------------------------


def cmd_check(argv: list[str]) -> int:
    """Compile a model, report its sizes and every feature mjx_lite does not support, and (with `mujoco` installed)
    compare one forward pass with MuJoCo C field by field in float64, naming the first pipeline stage where a
    difference starts and whether a solver stopped at its iteration limit (mjx_lite.check)."""
    p = argparse.ArgumentParser(prog=f"{PROG} check", description=inspect.cleandoc(cmd_check.__doc__),
                                formatter_class=HelpFormatter,
                                epilog=f"examples:\n  {PROG} check humanoid\n  {PROG} check model.xml --no-mujoco")
    p.add_argument("model", help="MJCF path or bundled model name")
    p.add_argument("--no-mujoco", action="store_true", help="skip the comparison with MuJoCo C")
    p.add_argument("--seed", type=int, default=0, help="seed of the random velocities and controls compared")
    a = p.parse_args(argv)
    return check.run(a.model, no_mujoco=a.no_mujoco, seed=a.seed)


# ---- train ---------------------------------------------------------------------------------------------


def cmd_train(argv: list[str]) -> int:
    try:
        from mjx_lite.rl import train  # noqa: PLC0415 - optional subpackage, see the module docstring
    except ImportError as e:
        _fail(f"train needs mjx_lite.rl.train, which is not available here ({e})", EXIT_UNSUPPORTED)
    out = train.main(argv, prog=f"{PROG} train")
    return out if isinstance(out, int) else 0


DESCRIPTION = ("mjx_lite's command line (`python -m mjx_lite` or the `mjx_lite` script). MODEL is a bundled model's "
               f"name ({', '.join(mjx_lite.models.names())}) or the path of an MJCF (or URDF) file.")
COMMANDS = {
    "run": (cmd_run, "batched rollout of a model and its throughput (mjx_lite.run)"),
    "bench": (cmd_bench, "throughput beside MJX and MuJoCo C (mjx_lite.bench)"),
    "render": (cmd_render, "record a rollout to a video or images (mp4, gif, png)"),
    "check": (cmd_check, "compile a model, report sizes and support, compare a forward pass with MuJoCo C"),
    "train": (cmd_train, "train a policy with PPO (mjx_lite.rl.train)"),
}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    p = argparse.ArgumentParser(prog=PROG, description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="examples:\n" + "\n".join("  " + line.strip().replace("python -m mjx_lite", PROG)
                                                                   for line in __doc__.split("\n\n")[1].splitlines())
                                + f"\n\nRun `{PROG} COMMAND --help` for a command's options, defaults and examples.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (_, helptext) in COMMANDS.items():
        sub.add_parser(name, help=helptext, add_help=False)
    if not argv or argv[0] in ("-h", "--help"):
        p.print_help()
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        p.parse_args(argv[:1])  # prints the usage error and exits 2
    return COMMANDS[argv[0]][0](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
