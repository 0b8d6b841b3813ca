"""mjx_lite's command line: `python -m mjx_lite {run,bench,render,check,train,play} ...` (or `mjx_lite ...`).

    python -m mjx_lite run cartpole --batch 256 --steps 200        # batched rollout: compile time, steps/s
    python -m mjx_lite bench humanoid --batch 1024                 # beside MJX and MuJoCo C
    python -m mjx_lite render cartpole -o out.mp4 --steps 300      # a rollout to a video (.mp4, .gif, .png)
    python -m mjx_lite check PATH                                  # compile, sizes, compare with MuJoCo C
    python -m mjx_lite train cartpole_balance                      # PPO (mjx_lite.rl.train)
    python -m mjx_lite play ppo_cartpole_balance.msgpack -o a.mp4  # watch a trained policy

MODEL is a path to an MJCF (or URDF) file or the name of a bundled model (`mjx_lite.models.names()`). Each command's
--help shows its options, their defaults and examples.

Exit codes: 0 success; 1 failure (invalid MJCF, a forward pass that differs from MuJoCo's); 2 a command-line
error or a model that uses a feature mjx_lite does not support (the message names it).

Imports: the one exception to "no imports in function bodies" in mjx_lite is a subcommand importing a package
that only it needs when it runs: `train` imports `mjx_lite.rl.train` and `play` `mjx_lite.rl.play` (another
subpackage, which may be absent), so that `--help` and the other subcommands work without it. (`check` reaches
the optional `mujoco` through `mjx_lite.interop`, which imports it at its top when installed.)
"""

from __future__ import annotations

import argparse
import inspect
import os
import sys

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite import bench, check, render, run
from mjx_lite.render import record
from mjx_lite.run import HelpFormatter, model_arguments, model_name

# how the user called us, for usage lines: the `mjx_lite` console script or `python -m mjx_lite`
PROG = "mjx_lite" if os.path.basename(sys.argv[0] or "") == "mjx_lite" else "python -m mjx_lite"

EXIT_FAILURE = 1
EXIT_UNSUPPORTED = 2
DARK = record.DARK  # render: a first frame darker than this mean (0-255) gets a note on the lighting


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
    plan = record.frame_plan(float(run.fmt(m.opt.timestep)), a.fps, a.steps)
    head = f"timestep {run.fmt(m.opt.timestep)} s at {a.fps:g} fps: " if plan.nframes else ""
    print(f"{os.path.basename(path)}: {head}{plan.describe()}", flush=True)

    @jax.jit
    def advance(d):
        return jax.lax.fori_loop(0, plan.per_frame, lambda _, d: mjx_lite.step(m, d), d)

    frames, _ = record.record(r, advance, mjx_lite.forward(m, d), plan.nframes, camera,
                           desc=f"render {os.path.basename(path)}")  # fmt: skip
    record.write(a.output, frames, plan)
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


PLAY_EXAMPLES = """examples:
  {prog} ppo_cartpole_balance.msgpack                    out.mp4, 500 control steps
  {prog} ppo_hopper.msgpack -o hopper.gif --steps 200 --fps 25
  {prog} ppo_cartpole_balance.msgpack -o frame.png --steps 0
"""


def cmd_play(argv: list[str]) -> int:
    """Roll out a trained policy (a parameter file written by `train`) deterministically on the task it was
    trained on and render it to a video or images. An episode that ends is reset and the video goes on."""
    prog = f"{PROG} play"
    p = argparse.ArgumentParser(prog=prog, description=inspect.cleandoc(cmd_play.__doc__),
                                formatter_class=HelpFormatter, epilog=PLAY_EXAMPLES.format(prog=prog))  # fmt: skip
    p.add_argument("policy", help="parameter file written by train (ppo_<task>.msgpack)")
    p.add_argument("-o", "--output", default="out.mp4", help="file to write: .mp4, .gif, or .png")
    p.add_argument("--steps", type=int, default=500, help="control steps to roll out (0: one frame)")
    p.add_argument("--model", default=None, help="play on this model instead of the one trained on")
    p.add_argument("--fps", type=float, default=30.0, help="frames per second of simulated time")
    p.add_argument("--height", type=int, default=240, help="image height in pixels")
    p.add_argument("--width", type=int, default=320, help="image width in pixels")
    p.add_argument("--camera", default="-1", help="camera index or name (-1: the free camera)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial state")
    a = p.parse_args(argv)
    try:
        from mjx_lite.rl import play  # noqa: PLC0415 - optional subpackage, see the module docstring
    except ImportError as e:
        _fail(f"play needs mjx_lite.rl, which is not available here ({e})", EXIT_UNSUPPORTED)
    try:
        render.require_writer(a.output)
    except ImportError as e:
        _fail(str(e), EXIT_UNSUPPORTED)
    except ValueError as e:
        p.error(str(e))
    try:
        make_policy, params, meta = play.load_policy(a.policy)
        env = play.env_of(meta, a.model)
    except (OSError, ValueError) as e:
        _fail(str(e), EXIT_FAILURE)
    repeat = int(meta.get("config", {}).get("action_repeat", 1))
    camera = int(a.camera) if a.camera.lstrip("-").isdigit() else a.camera
    try:
        play.render_policy(env, make_policy(params, deterministic=True), a.output, steps=a.steps, fps=a.fps,
                           height=a.height, width=a.width, camera=camera, seed=a.seed, action_repeat=repeat)
    except ValueError as e:
        _fail(str(e), EXIT_FAILURE)
    return 0


DESCRIPTION = ("mjx_lite's command line (`python -m mjx_lite` or the `mjx_lite` script). MODEL is a bundled model's "
               f"name ({', '.join(mjx_lite.models.names())}) or the path of an MJCF (or URDF) file.")
COMMANDS = {
    "run": (cmd_run, "batched rollout of a model and its throughput (mjx_lite.run)"),
    "bench": (cmd_bench, "throughput beside MJX and MuJoCo C (mjx_lite.bench)"),
    "render": (cmd_render, "record a rollout to a video or images (mp4, gif, png)"),
    "check": (cmd_check, "compile a model, report sizes and support, compare a forward pass with MuJoCo C"),
    "train": (cmd_train, "train a policy with PPO (mjx_lite.rl.train)"),
    "play": (cmd_play, "roll out a trained policy file and render it (mp4, gif, png)"),
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
