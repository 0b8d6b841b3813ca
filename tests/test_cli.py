"""`python -m mjx_lite {run,bench,render,check,train}`: each subcommand on a bundled model (by name), `check` of a
model with an unsupported feature (exit code 2, clear message), every --help (defaults, examples, usage lines), the
`mjx_lite` console script, and mistakes that fail early with a message naming them.

`run` starts a real `python -m mjx_lite` (the entry point, `sys.exit(main())`, and the command's float32 default);
the other commands call the same `main` in this process (`_main`: its exit code, returned or raised, and its output),
which spares a start of Python, JAX and mjx_lite per command (about 3 CPU-s each on the CI machine)."""

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
import types

import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import __main__ as cli
from mjx_lite import run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 600  # seconds per subprocess: generous, the CI machine is shared by two test workers


def _main(capsys, *args):
    """`python -m mjx_lite ARGS` in this process: its exit code (returned by main or raised, as `sys.exit(main())`
    turns either into the status) and what it printed."""
    try:
        code = cli.main(list(map(str, args)))
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return types.SimpleNamespace(returncode=0 if code is None else code, stdout=out.out, stderr=out.err)


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "MUJOCO_GL": "egl"}
    return subprocess.run([sys.executable, "-m", "mjx_lite", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=cwd or ROOT)  # fmt: skip


@pytest.mark.parametrize("command", [None, "run", "bench", "render", "check", "train"])
def test_help(command, capsys):
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as e:
        if cli.main(argv) == 0:
            raise SystemExit(0)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m mjx_lite{'' if command is None else ' ' + command} ")
    assert "examples:" in out
    if command is None:
        assert all(c in out for c in cli.COMMANDS) and all(n in out for n in mjl.models.names())
    else:
        assert "(default:" in out  # ArgumentDefaultsHelpFormatter


def test_console_script_entry_point():
    """pyproject's [project.scripts] `mjx_lite` names cli.main (which returns the exit code)."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        target = tomllib.load(f)["project"]["scripts"]["mjx_lite"]
    module, func = target.split(":")
    assert getattr(importlib.import_module(module), func) is cli.main


@pytest.mark.parametrize("name", mjl.models.names())
def test_every_bundled_name_loads_through_the_cli(name):
    """The loader of render and check, and run's and bench's model argument, take every bundled model's name."""
    m, path = cli._load(name)
    assert path == mjl.models.path(name) and m.nbody >= 1
    p = run.argparse.ArgumentParser()
    run.model_arguments(p)
    assert run.model_name(p, p.parse_args([name])) == name
    assert run.model_name(p, p.parse_args(["--model", name])) == name


def test_mistyped_model_names_the_closest(capsys):
    for argv in (["run", "humanod"], ["render", "humanod"], ["check", "humanod"], ["bench", "humanod"]):
        try:  # the exit status of `python -m mjx_lite` (sys.exit(main())): raised, or returned (check)
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code
        assert code == cli.EXIT_FAILURE, argv
        assert "did you mean 'humanoid'?" in capsys.readouterr().err, argv


def test_render_checks_its_writer_before_any_work(monkeypatch, capsys, tmp_path):
    """A missing optional writer (Pillow for GIF, imageio-ffmpeg for MP4) fails before the model is even loaded,
    naming the `render` extra; an unknown format is a usage error."""
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    monkeypatch.setattr(cli, "_load", lambda *a: pytest.fail("loaded the model before checking the writer"))
    for out in ("x.gif", "x.mp4"):
        with pytest.raises(SystemExit) as e:
            cli.main(["render", "cartpole", "-o", str(tmp_path / out)])
        assert e.value.code == cli.EXIT_UNSUPPORTED
        assert "pip install 'mjx_lite[render]'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        cli.main(["render", "cartpole", "-o", "x.avi"])
    assert e.value.code == 2 and ".png, .gif, .mp4" in capsys.readouterr().err


def test_run():
    """A rollout by bundled name (every name reaches the loader: test_every_bundled_name_loads_through_the_cli),
    with the options that change what drives speed, and those settings said. The smallest model: a subprocess
    compiles from scratch (a humanoid took twice as long)."""
    p = _cli("run", "pendulum", "--batch", 2, "--steps", 2, "--iterations", 2, "--disable", "contact",
             "--integrator", "euler")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "steps/s" in p.stdout and "compile" in p.stdout
    assert "timestep 0.01 s, euler, Newton solver (2 iterations" in p.stdout and "disabled: contact" in p.stdout


def test_bench(capsys, tmp_path):
    """The benchmark's result, with `--budget 0`: one timed call of the 2 asked for (a call of minutes at a large
    batch is then timed once), the first call and the compile's CPU time reported apart, and the JSON written."""
    out = tmp_path / "bench.json"
    p = _main(capsys, "bench", "pendulum", "--batch", 2, "--steps", 2, "--repeats", 2, "--budget", 0,
              "--skip", "mjx", "c", "--json", out)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "mjx_lite" in p.stdout and "steps_per_s" in p.stdout
    assert "the model's own settings (nothing disabled)" in p.stdout
    res = json.loads(out.read_text())["mjx_lite"]
    assert res["timed_calls"] == 1 and res["first_call_s"] > 0 and res["jit_cpu_s"] > 0 and res["steps_per_s"] > 0


def test_render(tmp_path, capsys, monkeypatch):
    """A video by bundled name from outside the repository, and the frames-vs-steps explanation: 20 steps of
    0.01 s at 25 fps is a frame every 4 steps, 6 frames."""
    out = tmp_path / "rollout.mp4"
    monkeypatch.chdir(tmp_path)
    p = _main(capsys, "render", "pendulum", "-o", out, "--steps", 20, "--fps", 25, "--height", 32, "--width", 32)
    assert p.returncode == 0, p.stderr
    assert out.exists() and out.stat().st_size > 0
    assert "a frame every 4 steps" in p.stdout and "20 steps -> 6 frames" in p.stdout
    assert "wrote" in p.stdout and "6 frames" in p.stdout


def test_render_png_frame(tmp_path, capsys):
    """One picture (--steps 0) as a PNG, which needs no optional dependency; it is not dark. In this process (no
    second interpreter start)."""
    from PIL import Image

    out = tmp_path / "frame.png"
    assert cli.main(["render", "cartpole", "-o", str(out), "--steps", "0", "--height", "24", "--width", "32"]) == 0
    img = np.asarray(Image.open(out))
    assert img.shape == (24, 32, 3) and img.mean() > cli.DARK
    stdout = capsys.readouterr().out
    assert "one frame of the initial state" in stdout and "note: the picture is dark" not in stdout


def test_check_agrees_with_mujoco(capsys):
    p = _main(capsys, "check", "cartpole")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sizes: nq 2, nv 2, nu 1" in p.stdout
    assert "agrees with MuJoCo C" in p.stdout


def test_check_unsupported_feature(tmp_path, capsys):
    xml = tmp_path / "composite.xml"
    xml.write_text('<mujoco><worldbody><body><composite type="grid" count="2 2 1"/></body></worldbody></mujoco>')
    p = _main(capsys, "check", xml)
    assert p.returncode == cli.EXIT_UNSUPPORTED
    assert "unsupported feature" in p.stderr and "<composite>" in p.stderr
    assert "Traceback" not in p.stderr


def test_check_unknown_model(capsys):
    p = _main(capsys, "check", "no_such_model")
    assert p.returncode == cli.EXIT_FAILURE
    assert "no bundled model" in p.stderr


def test_train_help_or_unavailable(capsys):
    p = _main(capsys, "train", "--help")
    if importlib.util.find_spec("mjx_lite.rl") and importlib.util.find_spec("mjx_lite.rl.train"):
        assert p.returncode == 0, p.stderr
    else:  # the RL subpackage is not part of this checkout: a clear message, no traceback
        assert p.returncode == cli.EXIT_UNSUPPORTED
        assert "mjx_lite.rl.train" in p.stderr and "Traceback" not in p.stderr


def test_train_takes_a_bundled_model_name():
    """A bundled model's name trains its first task; a model without a task, a path or a mistyped task name is
    refused with what to do instead."""
    train = pytest.importorskip("mjx_lite.rl.train")
    assert train.task_of("hopper") == ("hopper", "")
    task, note = train.task_of("humanoid")
    assert task == "humanoid_bundled_stand" and "bundled model: training its task humanoid_bundled_stand" in note
    assert "humanoid_walk" not in note  # dm_control's humanoid tasks run on dm_control's model
    assert train.task_of("pendulum")[0] == "pendulum_swingup_shaped"
    task, note = train.task_of("quadruped")  # its running task, not the alphabetically first (getup)
    assert task == "quadruped_run" and "quadruped_getup" in note and "quadruped_joystick" in note
    task, note = train.task_of("cartpole.xml")
    assert task == "cartpole_balance"
    assert "its tasks: cartpole_balance, cartpole_balance_sparse, cartpole_swingup" in note
    for name in ("legged", "some/dir/robot.urdf"):
        with pytest.raises(ValueError, match=f"'{name}' is a model without a task.*train TASK --model {name}"):
            train.task_of(name)
    with pytest.raises(ValueError, match="unknown task 'humanoid_stnd' \\(did you mean 'humanoid_stand'"):
        train.task_of("humanoid_stnd")


def test_train_on_a_model_that_does_not_fit(capsys):
    """`train hopper --model cartpole`: the task reads a body the model lacks; a usage error naming it, before any
    compilation."""
    pytest.importorskip("mjx_lite.rl.train")
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "hopper", "--model", "cartpole"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "--model cartpole does not fit the task hopper: no body named 'torso'" in err
    with pytest.raises(SystemExit) as e:
        cli.main(["train", "hopper", "--model", "hoper"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "did you mean 'hopper'?" in err


@pytest.mark.slow  # a PPO compile: minutes on a loaded 2-core CPU
def test_train(tmp_path):
    """A few thousand PPO steps end to end, by model name and on a model file: evaluation lines, the learning
    curve, the saved parameters."""
    out = tmp_path / "p.msgpack"
    xml = mjl.models.path("cartpole")
    p = _cli("train", "cartpole", "--model", xml, "--timesteps", 4000, "--num-envs", 8, "--evals", 2, "--no-progress",
             "--out", out, "--set", "batch_size=8", "--set", "num_minibatches=2", "--set", "episode_length=50",
             cwd=tmp_path)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "training its task cartpole_balance" in p.stdout and f"training cartpole_balance on {xml}" in p.stdout
    assert "learning curve" in p.stdout and out.exists()


def test_check_lists_every_unsupported_feature(tmp_path, capsys):
    """`check` names every unsupported feature of a model (an element the reader refuses, attributes, a flag), not only
    the first, and exits 2 (sleep: refused with a tendon equality active at load, as MuJoCo 4.0 stops there)."""
    xml = tmp_path / "many.xml"
    xml.write_text("""<mujoco><option ccd_iterations="10">
      <flag sleep="enable" speculative="enable"/></option>
      <worldbody><geom name="floor" type="plane" size="1 1 .1"/>
        <body><freejoint/><geom type="ellipsoid" size=".1 .1 .1"/><site name="s"/></body>
        <body pos="1 0 0"><composite type="grid" count="2 2 1"/></body>
        <body pos="2 0 0"><joint name="j" stiffness="1"/><geom size=".1"/></body>
      </worldbody>
      <tendon><fixed name="t"><joint joint="j" coef="1"/></fixed></tendon>
      <equality><tendon tendon1="t"/></equality></mujoco>""")
    p = _main(capsys, "check", xml)
    assert p.returncode == cli.EXIT_UNSUPPORTED, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    for feature in ("<composite>", "sleep", "speculative", "ccd_iterations"):  # (adhesion etc.: supported)
        assert feature in p.stderr, (feature, p.stderr)
    assert "unsupported: 4 features" in p.stdout


SOLVER_XML = """<mujoco><option solver="PGS" iterations="{iterations}" tolerance="{tolerance}"/>
  <worldbody><geom type="plane" size="2 2 .1"/>
    <body pos="0 0 .095"><freejoint/><geom type="box" size=".1 .1 .1" condim="4" friction=".7 .02 .001"/></body>
    <body pos=".4 0 .095"><freejoint/><geom size=".1" condim="3"/></body>
  </worldbody></mujoco>"""


def test_check_explains_an_unconverged_solver(tmp_path, capsys):
    """A model whose PGS stops at its iteration limit (2) on both sides: `check` prints both sides' iterations, final
    improvement and gradient, per island (MuJoCo 4.0 and ours solve each island on its own, the same iterates:
    the model agrees); run to convergence, no note. (The first differing stage when a solver stops elsewhere:
    test_check_names_the_first_stage_that_differs, its mj_fwdConstraint case.)"""
    short, long = tmp_path / "short.xml", tmp_path / "long.xml"
    short.write_text(SOLVER_XML.format(iterations=2, tolerance="1e-8"))
    long.write_text(SOLVER_XML.format(iterations=3000, tolerance="1e-15"))
    p = _main(capsys, "check", short)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "stopped at its iteration limit on both sides" in p.stdout, p.stdout
    assert len(re.findall(r"MuJoCo C island \d: 2 iterations, final improvement", p.stdout)) == 2, p.stdout
    assert "mjx_lite: 2 iterations (per island: 2, 2), final improvement" in p.stdout, p.stdout
    assert "agrees with MuJoCo C" in p.stdout
    p = _main(capsys, "check", long)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "agrees with MuJoCo C" in p.stdout and "iteration limit" not in p.stdout


def test_check_solver_note_with_noslip():
    """With noslip on, MuJoCo's solver_niter and last statistics are its noslip sweeps': the note reports its main
    solver (the same state with noslip off: 2 PGS iterations, their improvement and gradient), and says ours counts
    the sweeps too. (Our side is given: the note only reads solver_niter, solver_improvement, solver_gradient.)"""
    import types

    import mujoco

    from mjx_lite import check

    xml = SOLVER_XML.format(iterations=2, tolerance="1e-8").replace('tolerance="1e-8"',
                                                                     'tolerance="1e-8" noslip_iterations="3"')
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.solver_niter[0] > 2  # the main solver's 2 and the noslip sweeps
    off = mujoco.MjData(mjm)
    mjm.opt.noslip_iterations = 0
    mujoco.mj_forward(mjm, off)
    mjm.opt.noslip_iterations = 3
    ours = types.SimpleNamespace(solver_niter=int(mjd.solver_niter[0]), solver_improvement=1.0, solver_gradient=2.0)
    lines = check.solver_note(m, ours, mjm, mjd)
    assert "stopped at its iteration limit on both sides" in lines[0], lines
    theirs = [line for line in lines if line.lstrip().startswith("MuJoCo C")]
    assert len(theirs) == max(1, off.nisland), lines
    for i, line in enumerate(theirs):
        st = off.solver[i * mujoco.mjNSOLVER + 1]
        assert f": 2 iterations, final improvement {st.improvement:.3e}, gradient {st.gradient:.3e}" in line, lines
    assert f"mjx_lite: {ours.solver_niter} iterations (the main solver's and up to 3 noslip sweeps)" in lines[-2]


def test_check_names_the_first_stage_that_differs():
    """check.stage_report on our forward pass of a perturbed Model against MuJoCo's model: a moved body differs from
    mj_kinematics on, a larger geom (same masses) from mj_collision on, more damping from mj_fwdVelocity on, a solver
    stopped early (tolerance 1e9 x) from mj_fwdConstraint on."""
    import jax
    import mujoco

    from mjx_lite import check, interop

    xml = """<mujoco><worldbody><geom type="plane" size="2 2 .1"/>
      <body pos="0 0 .099"><freejoint/><geom type="box" size=".1 .1 .1"/></body>
      <body pos=".5 0 .3"><joint name="h" axis="0 1 0" damping=".1"/><geom size=".05" pos=".2 0 0"/></body>
      </worldbody></mujoco>"""
    m = mjl.load_mjcf_string(xml)
    mjm = mujoco.MjModel.from_xml_string(xml)
    d = mjl.make_data(m).replace(qvel=jax.numpy.full(m.nv, 0.1))
    fwd = jax.jit(mjl.forward)
    cases = {"mj_kinematics": m.replace(body_pos=m.body_pos.at[2, 0].add(0.01)),
             "mj_collision": m.replace(geom_size=m.geom_size.at[1].mul(1.01)),
             "mj_fwdVelocity": m.replace(dof_damping=m.dof_damping.at[6].add(0.5)),
             "mj_fwdConstraint": m.replace(opt=m.opt.replace(tolerance=m.opt.tolerance * 1e9))}  # fmt: skip
    report = check.stage_report(m, fwd(m, d), mjm, interop.to_mujoco(m, d, mjm, forward=False))
    assert all(diff is None for _, diff in report), report
    for stage, mm in cases.items():
        report = check.stage_report(m, fwd(mm, d), mjm, interop.to_mujoco(m, d, mjm, forward=False))
        assert check.first_differing_stage(report, "qacc")[0] == stage, report
