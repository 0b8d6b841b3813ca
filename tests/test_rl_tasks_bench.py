"""benchmarks/rl_tasks.py: per-training summary, merging saved runs and the markdown table (nothing trained)."""

import json

import pytest

from benchmarks import rl_tasks
from mjx_lite.rl import configs


def _curve(returns, steps_per_eval=100_000, s_per_eval=30.0):
    return [{"steps": i * steps_per_eval, "return": float(r), "wall_s": 5.0 + i * s_per_eval}
            for i, r in enumerate(returns)]  # fmt: skip


def _settings(task, **changed):
    """What rl_tasks.train_one records: the task's defaults at 256 environments (as JSON has them), `changed`."""
    cfg = json.loads(json.dumps(configs.defaults(task, num_envs=256)))
    del cfg["num_timesteps"], cfg["num_envs"]
    return {**cfg, **changed}


def _run(seed, returns, target, task, **changed):
    curve = _curve(returns)
    return {"seed": seed, **rl_tasks.summary(curve, target), "curve": curve, "settings": _settings(task, **changed),
            "load": [3.25, 9.5]}  # fmt: skip


@pytest.fixture(scope="module")
def result():
    """A saved run of two fake tasks: one with a target (reached), one without."""
    return {"date": "2026-11-30T03:00+00:00", "machine": "x86_64, 2 cores", "jax": "0.10.2", "backend": "cpu",
            "command": "python benchmarks/rl_tasks.py --tasks reacher_easy,walker_stand --steps 300000 "
                       "--num-envs 256", "load_start": 3.0, "load_end": 9.0,
            "tasks": {
                "reacher_easy": {"target": 900.0, "steps": 300_000, "num_envs": 256, "evals": 4,
                                 "runs": [_run(0, [70, 480, 910, 870], 900.0, "reacher_easy")]},
                "walker_stand": {"target": None, "steps": 300_000, "num_envs": 256, "evals": 4,
                                 "runs": [_run(0, [120, 250, 400, 380], None, "walker_stand"),
                                          {"seed": 1, "error": "RuntimeError: boom", "load": [1.0, 2.0]}]},
            }}  # fmt: skip


def test_summary():
    s = rl_tasks.summary(_curve([70, 480, 910, 870]), 900.0)
    assert s == {"final_return": 870.0, "best_return": 910.0, "steps_to_target": 200_000, "time_to_target_s": 65.0,
                 "total_s": 95.0}  # fmt: skip
    never = rl_tasks.summary(_curve([70, 480]), 900.0)
    assert never["steps_to_target"] is None and never["time_to_target_s"] is None
    assert rl_tasks.summary(_curve([70, 950]), None)["steps_to_target"] is None  # no target: nothing to reach


def test_markdown_rows(result):
    md = rl_tasks.markdown(result)
    assert md.startswith("### ") and f"`{result['command']}`" in md
    rows = [ln for ln in md.splitlines() if ln.startswith(("| reacher_easy |", "| walker_stand |"))]
    assert len(rows) == 3
    assert rows[0] == ("| reacher_easy | 0.30M | 256 | 0 | 70 → 480 → 910 → 870 | 870 | 910 | 900: 0.20M (65 s) | "
                       "2 min | 3.2-9.5 |")  # fmt: skip
    assert "| walker_stand | 0.30M | 256 | 0 | 120 → 250 → 400 → 380 | 380 | 400 | - |" in rows[1]
    assert "failed: RuntimeError: boom" in rows[2]


def test_curve_cell_picks_evenly_with_both_ends():
    cell = rl_tasks._curve_cell(_curve(range(0, 1100, 100)), points=6)  # 11 evaluations: every other one
    assert cell == "0 → 200 → 400 → 600 → 800 → 1000"


def test_from_json_merges_saved_runs(result, saved_json, capsys):
    later = json.loads(json.dumps(result))  # a second run: a new seed of walker_stand replacing the failed one
    later["tasks"] = {
        "walker_stand": dict(result["tasks"]["walker_stand"], runs=[_run(1, [100, 600], None, "walker_stand")])
    }
    later["date"] = "2026-11-30T04:00+00:00"
    paths = saved_json([result, later])
    rl_tasks.main(["--from-json", *paths, "--command", "python benchmarks/rl_tasks.py --tasks X"])
    md = capsys.readouterr().out
    assert "`python benchmarks/rl_tasks.py --tasks X`" in md and "2026-11-30T03:00+00:00 / 2026-11-30T04:00" in md
    walker = [ln for ln in md.splitlines() if ln.startswith("| walker_stand |")]
    assert len(walker) == 2 and "| 1 | 100 → 600 | 600 | 600 |" in walker[1] and "failed" not in md
    other = json.loads(json.dumps(later))  # another budget and other settings (an experiment): rows of their own
    other["tasks"]["walker_stand"].update(steps=1_000_000, overrides={"learning_rate": 0.001})
    other["tasks"]["walker_stand"]["runs"] = [_run(1, [100, 600], None, "walker_stand", learning_rate=0.001)]
    rows = [ln for ln in rl_tasks.markdown(rl_tasks.merge([result, later, other])).splitlines()
            if ln.startswith("| walker_stand")]  # fmt: skip
    assert len(rows) == 3 and rows[2].startswith("| walker_stand (learning_rate=0.001) | 1.00M | 256 | 1 |")


def test_command_line_checks_tasks(capsys):
    with pytest.raises(SystemExit):
        rl_tasks.main(["--tasks", "no_such_task"])
    assert "unknown task 'no_such_task'" in capsys.readouterr().err
