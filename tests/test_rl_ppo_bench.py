"""benchmarks/rl_ppo.py's per-seed summary, aggregation over seeds and markdown (no training but the slow smoke)."""

import json
import math

import pytest

from benchmarks import rl_ppo


def _curve(returns, steps_per_eval=100, train_per_eval=2.0, compile_s=10.0):
    """Evaluation records: evaluation i at i * steps_per_eval steps; the first interval also compiles."""
    out = []
    for i, r in enumerate(returns):
        train = 0.0 if i == 0 else compile_s + i * train_per_eval
        out.append({"steps": i * steps_per_eval, "return": float(r), "wall_s": 1.0 + train + i, "train_s": train})
    return out


def test_summary_target_collapse_and_throughput():
    curve = _curve([100, 500, 950, 700, 990])
    s = rl_ppo.summary(curve, 900.0)
    assert s["steps_to_target"] == 200 and s["time_to_target_s"] == curve[2]["wall_s"]
    assert s["min_after_target"] == 700.0  # the collapse after the first evaluation at the target
    assert s["sps"] == pytest.approx(100 / 2.0)  # the compiling first interval is left out
    assert (s["final_return"], s["best_return"], s["total_s"]) == (990.0, 990.0, curve[-1]["wall_s"])
    never = rl_ppo.summary(_curve([100, 200, 300]), 900.0)
    assert never["steps_to_target"] is never["time_to_target_s"] is never["min_after_target"] is None
    assert rl_ppo.summary(curve, None)["steps_to_target"] is None
    last = rl_ppo.summary(_curve([100, 200, 950]), 900.0)  # reached at the last evaluation
    assert last["min_after_target"] == 950.0


def test_aggregate_counts_unreached_seeds_as_late():
    runs = [{"seed": i, **rl_ppo.summary(_curve(rs), 900.0)}
            for i, rs in enumerate([[0, 950, 960], [0, 0, 990], [0, 0, 0], [0, 0, 0]])]  # fmt: skip
    runs.append({"seed": 4, "error": "RuntimeError: boom"})
    a = rl_ppo.aggregate(runs)
    assert (a["seeds"], a["failed"], a["reached"]) == (5, 1, 2)
    steps = a["steps_to_target"]
    assert math.isinf(steps["median"]) and steps["min"] == 100 and math.isinf(steps["max"]) and steps["n"] == 4
    assert a["min_after_target"] == {"median": 970.0, "min": 950.0, "max": 990.0, "n": 2}  # reached seeds only
    three = rl_ppo.aggregate(runs[:3])  # 2 of 3 reached: the median is the later of the two
    assert three["steps_to_target"]["median"] == 200 and math.isinf(three["steps_to_target"]["max"])
    assert rl_ppo.spread([None, None]) is None and math.isinf(rl_ppo.spread([None], late=True)["median"])


@pytest.fixture(scope="module")
def result():
    def runs(curves):
        return [{"seed": i, **rl_ppo.summary(_curve(c), 900.0), "load": [[1.0, 1, 1], [2.0, 2, 2]]}
                for i, c in enumerate(curves)]  # fmt: skip

    return {"date": "2026-11-29T15:00", "machine": "x86_64, 2 cores", "jax": "0.10.2", "backend": "cpu", "seeds": 3,
            "load_start": [1.0, 1, 1], "load_end": [2.0, 2, 2],
            "tasks": {"cartpole_balance": {"target": 900.0, "steps": 200, "evals": 3, "runs": {
                "mjx_lite": runs([[0, 950, 800], [0, 0, 990], [0, 0, 0]]),
                "brax_adapter": runs([[0, 0, 990], [0, 0, 995], [0, 10, 20]])}}}}  # fmt: skip


def test_markdown_tables(result):
    md = rl_ppo.markdown(result, "python benchmarks/rl_ppo.py --tasks cartpole_balance --seeds 3")
    assert md.startswith("### ") and "`python benchmarks/rl_ppo.py --tasks cartpole_balance --seeds 3`" in md
    assert "seeds 0 to 2, one training" in md and "persistent compilation cache on (mjx_lite's default) and not" in md
    cut = json.loads(json.dumps(result))
    cut["seeds"] = 5  # a run stopped before its last seeds
    assert "seeds 0 to 2 of the 5 planned (the run was cut short)" in rl_ppo.markdown(cut, "x")
    rows = {ln.split("|")[3].strip(): ln for ln in md.splitlines() if ln.startswith("| cartpole_balance |")}
    assert "| 2/3 | 200 [100 - not reached] |" in rows["mjx_lite"]
    assert "| 895 [800 - 990] | 800 [0 - 990] |" in rows["mjx_lite"]  # lowest eval after the target, final
    assert "| 2/3 | 200 [200 - not reached] |" in rows["brax_adapter"]
    assert "throughput mjx_lite / brax_adapter = 1.00x" in rows["ratios"]
    assert "median wall-clock to target brax_adapter / mjx_lite = 1.00x" in rows["ratios"]
    per_seed = [ln for ln in md.splitlines() if ln.startswith("| cartpole_balance | mjx_lite |")]
    assert len(per_seed) == 1 and "| 100 / 14 s / 800 / 800 / 50 |" in per_seed[0] and "not reached" in per_seed[0]


def test_from_json_merges_saved_runs(result, saved_json, capsys):
    other = json.loads(json.dumps(result))
    other["tasks"] = {"hopper": dict(result["tasks"]["cartpole_balance"], target=400.0)}
    paths = saved_json([result, other])
    rl_ppo.main(["--from-json", *paths, "--command", "python benchmarks/rl_ppo.py --tasks cartpole_balance,hopper"])
    md = capsys.readouterr().out
    assert "| cartpole_balance | 900 | mjx_lite |" in md and "| hopper | 400 | mjx_lite |" in md
    assert "`python benchmarks/rl_ppo.py --tasks cartpole_balance,hopper`" in md
    rerun = json.loads(json.dumps(result))  # another trainer's seeds of the same task, run separately
    rerun["tasks"]["cartpole_balance"]["runs"] = {"brax_mjx": result["tasks"]["cartpole_balance"]["runs"]["mjx_lite"]}
    merged = rl_ppo.merge([result, rerun])
    assert list(merged["tasks"]["cartpole_balance"]["runs"]) == ["mjx_lite", "brax_adapter", "brax_mjx"]
    rerun["tasks"]["cartpole_balance"]["steps"] = 400
    with pytest.raises(ValueError, match="cartpole_balance: runs with different target"):
        rl_ppo.merge([result, rerun])


def test_command_line_names_the_options():
    args = rl_ppo.main.__globals__["argparse"].Namespace(tasks="cartpole_balance", seeds=5, trainers="mjx_lite",
                                                         steps=None, evals=4, quick=False,
                                                         compilation_cache=True, num_envs=2048)  # fmt: skip
    assert rl_ppo.command_line(args) == ("python benchmarks/rl_ppo.py --tasks cartpole_balance --compilation-cache "
                                         "--trainers mjx_lite --evals 4 --num-envs 2048")  # fmt: skip


@pytest.mark.slow
def test_smoke_one_seed_of_ours(tmp_path):
    """Two updates of our PPO on cartpole_balance through the benchmark's own loop (compiles: tens of seconds)."""
    path = str(tmp_path / "r.json")
    res = rl_ppo.run(["cartpole_balance"], seeds=1, trainers=("mjx_lite",), steps=20_480, evals=2, json_path=path)
    (r,) = res["tasks"]["cartpole_balance"]["runs"]["mjx_lite"]
    assert "error" not in r and [c["steps"] for c in r["curve"]] == [0, 20_480] and not res["compilation_cache"]
    assert 0 <= r["final_return"] <= 1000
    with open(path) as f:
        assert json.load(f)["tasks"]["cartpole_balance"]["runs"]["mjx_lite"][0]["seed"] == 0
