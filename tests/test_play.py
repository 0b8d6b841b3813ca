"""Watching a policy: `train TASK --video PATH` renders the trained deterministic policy, `play FILE` rolls out a
saved parameter file and renders it; eval lines go through tqdm.write; bad files and formats give clear errors.

Not slow: play on a policy file of freshly initialised networks (tests/rl_envs.Slider); slow: one tiny training
run (test_ppo's TINY settings) with --video. Images are tiny.
"""

import jax
import numpy as np
import pytest
from PIL import Image

from mjx_lite import __main__ as cli
from mjx_lite import envs
from mjx_lite.rl import play, ppo
from mjx_lite.rl import train as train_cli
from tests.rl_envs import Slider
from tests.test_ppo import TINY, TINY_STEPS

SIZE = ["--height", "16", "--width", "20"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A parameter file as train writes it, of initialised (untrained) networks for test_slider."""
    if "test_slider" not in envs.names():
        envs.register("test_slider", Slider)
    tmp = tmp_path_factory.mktemp("saved")
    trainer = ppo.Trainer(envs.make("test_slider"), ppo.PPOConfig(**TINY))
    params = trainer.network.init(jax.random.PRNGKey(0))
    policy = tmp / "slider.msgpack"
    ppo.save(str(policy), params, trainer.network, {"env": "test_slider", "config": {"action_repeat": 1}})
    return {"policy": policy, "tmp": tmp, "params": params, "network": trainer.network}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Train test_slider for two updates with --video (a GIF of 6 control steps at 25 fps: 7 frames)."""
    if "test_slider" not in envs.names():
        envs.register("test_slider", Slider)
    tmp = tmp_path_factory.mktemp("play")
    policy, video = tmp / "slider.msgpack", tmp / "trained.gif"
    args = ["test_slider", "--timesteps", str(TINY_STEPS), "--evals", "2", "--out", str(policy),
            "--video", str(video), "--video-steps", "6"]  # fmt: skip
    for k, v in TINY.items():
        args += ["--set", f"{k}={v!r}"]
    written = []
    mp = pytest.MonkeyPatch()
    mp.setattr(train_cli.tqdm, "write", lambda s, *a, **k: written.append(s))  # the eval lines' writer
    try:
        code = train_cli.main(args)
    finally:
        mp.undo()
    return {"code": code, "policy": policy, "video": video, "written": written, "tmp": tmp}


@pytest.mark.slow
def test_train_video_and_eval_lines(trained):
    assert trained["code"] == 0 and trained["policy"].exists()
    gif = Image.open(trained["video"])
    assert gif.n_frames == 7  # dt 0.04 s at 30 fps: a frame every control step; the initial state and 6 more
    assert len(trained["written"]) == 2 and all("return" in line for line in trained["written"])  # two evals


def test_play_renders_saved_policy(saved, capsys):
    out = saved["tmp"] / "frames.png"
    assert cli.main(["play", str(saved["policy"]), "-o", str(out), "--steps", "3", "--fps", "25", *SIZE]) == 0
    files = sorted(saved["tmp"].glob("frames_*.png"))
    assert len(files) == 4
    img = np.asarray(Image.open(files[0]))
    assert img.shape == (16, 20, 3)
    text = capsys.readouterr().out
    assert "a frame every 1 control steps" in text and "return over 3 control steps" in text


@pytest.mark.slow
def test_play_is_the_deterministic_policy(saved):
    """play's rollout applies the saved deterministic policy: the state of env.step with make_policy(params, True)."""
    make_policy, params, meta = play.load_policy(saved["policy"])
    assert meta["env"] == "test_slider"
    env = play.env_of(meta)
    policy = make_policy(params, deterministic=True)
    s0 = env.jit_reset(jax.random.PRNGKey(0))
    expected = env.jit_step(s0, policy(s0.obs))
    carry = play.rollout(env, policy, per_frame=1)((s0, jax.random.PRNGKey(1), expected.reward * 0, np.int32(0)))
    np.testing.assert_array_equal(np.asarray(carry[0].data.qpos), np.asarray(expected.data.qpos))
    assert float(carry[2]) == float(expected.reward)


def test_play_errors(saved, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:  # missing file: exit 1, the path named
        cli.main(["play", str(tmp_path / "nope.msgpack"), "-o", str(tmp_path / "x.png")])
    assert e.value.code == 1 and "nope.msgpack: no such policy file" in capsys.readouterr().err
    bad = tmp_path / "bad.msgpack"
    bad.write_bytes(b"\xc1garbage not msgpack")
    with pytest.raises(SystemExit) as e:  # corrupt file: exit 1
        cli.main(["play", str(bad), "-o", str(tmp_path / "x.png")])
    assert e.value.code == 1 and "not a mjx_lite PPO parameter file" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:  # unknown format: a usage error, before loading anything
        cli.main(["play", str(saved["policy"]), "-o", str(tmp_path / "x.avi")])
    assert e.value.code == 2 and "x.avi" in capsys.readouterr().err
    foreign = tmp_path / "foreign.msgpack"
    ppo.save(str(foreign), saved["params"], saved["network"], meta={"env": "no_such_task"})
    with pytest.raises(SystemExit) as e:  # a task this process does not know: exit 1, naming it
        cli.main(["play", str(foreign), "-o", str(tmp_path / "x.png")])
    assert e.value.code == 1 and "'no_such_task', which is not registered" in capsys.readouterr().err

