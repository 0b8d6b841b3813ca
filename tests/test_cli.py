"""`python -m mjx_lite {run,bench,render,check,train}`: each subcommand in a subprocess on a bundled model,
`check` of a model with an unsupported feature (exit code 2, clear message), and every --help."""

import importlib.util
import os
import subprocess
import sys

import pytest

import mjx_lite as mjl
from mjx_lite import __main__ as cli

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT = 600  # seconds per subprocess: generous, the CI machine is shared by two test workers


def _cli(*args, cwd=None):
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), "MUJOCO_GL": "egl"}
    return subprocess.run([sys.executable, "-m", "mjx_lite", *map(str, args)], capture_output=True, text=True,
                          timeout=TIMEOUT, env=env, cwd=cwd or ROOT)  # fmt: skip


@pytest.mark.parametrize("command", [None, "run", "bench", "render", "check"])
def test_help(command, capsys):
    argv = ["--help"] if command is None else [command, "--help"]
    with pytest.raises(SystemExit) as e:
        if cli.main(argv) == 0:
            raise SystemExit(0)
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "usage" in out.lower() or "python -m mjx_lite" in out
    if command is None:
        assert all(c in out for c in cli.COMMANDS)


def test_run():
    p = _cli("run", "--model", "pendulum", "--batch", 2, "--steps", 3)
    assert p.returncode == 0, p.stderr
    assert "steps/s" in p.stdout


def test_bench():
    p = _cli("bench", "--model", mjl.models.path("pendulum"), "--batch", 2, "--steps", 2, "--repeats", 1,
             "--skip", "mjx", "c")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "mjx_lite" in p.stdout and "steps_per_s" in p.stdout


def test_render(tmp_path):
    out = tmp_path / "rollout.mp4"
    p = _cli("render", "pendulum", "-o", out, "--steps", 20, "--fps", 25, "--height", 32, "--width", 32)
    assert p.returncode == 0, p.stderr
    assert out.exists() and out.stat().st_size > 0
    assert "frames" in p.stdout


def test_check_agrees_with_mujoco():
    p = _cli("check", "cartpole")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "sizes: nq 2, nv 2, nu 1" in p.stdout
    assert "agrees with MuJoCo C" in p.stdout


def test_check_unsupported_feature(tmp_path):
    xml = tmp_path / "composite.xml"
    xml.write_text('<mujoco><worldbody><body><composite type="grid" count="2 2 1"/></body></worldbody></mujoco>')
    p = _cli("check", xml)
    assert p.returncode == cli.EXIT_UNSUPPORTED
    assert "unsupported feature" in p.stderr and "<composite>" in p.stderr
    assert "Traceback" not in p.stderr


def test_check_unknown_model():
    p = _cli("check", "no_such_model")
    assert p.returncode == cli.EXIT_FAILURE
    assert "no bundled model" in p.stderr


def test_train():
    p = _cli("train", "--help")
    if importlib.util.find_spec("mjx_lite.rl") and importlib.util.find_spec("mjx_lite.rl.train"):
        assert p.returncode == 0, p.stderr
    else:  # the RL subpackage is not part of this checkout: a clear message, no traceback
        assert p.returncode == cli.EXIT_UNSUPPORTED
        assert "mjx_lite.rl.train" in p.stderr and "Traceback" not in p.stderr
