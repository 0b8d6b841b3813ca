"""Our PPO on many tasks at a fixed budget: the return each task reaches after N environment steps at its defaults.

    python benchmarks/rl_tasks.py --tasks reacher_easy --steps 3000000 --num-envs 256 --json rl_tasks.json
    python benchmarks/rl_tasks.py --tasks point_mass_easy,pendulum_swingup --steps 1000000 --seeds 0,1
    python benchmarks/rl_tasks.py --from-json a.json b.json          # the markdown of saved runs, nothing trained

Each (task, seed) is one `mjx_lite.rl.ppo.train` at `configs.defaults(task, num_envs=N)` (batch size and minibatches
derived from N; everything else the task's defaults, as a user's `ppo.train(env, steps, **defaults)`), for the same
budget of environment steps, one training at a time. Recorded per training: the evaluation return at each
evaluation point (deterministic policy, `num_eval_envs` fresh episodes), the final and best return, the steps and
wall-clock to the task's target where it has one (`TARGETS`), the total wall-clock (compilation and evaluations
included) and the 1-minute load average at its start and end: returns and steps do not depend on the machine's load,
wall-clocks do. The JSON is rewritten after every training, so a run cut short keeps what it finished.

(benchmarks/rl_ppo.py compares trainers over seeds on a few tasks; this one covers the task list, ours only.)
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import platform
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from benchmarks import _args  # noqa: E402 - after ROOT is on sys.path

# the targets of issue 40 (the other tasks: the return at the budget)
TARGETS = {"cartpole_balance": 900.0, "reacher_easy": 900.0}
STEPS, NUM_ENVS, EVALS = 1_000_000, 256, 11
# recorded with each evaluation (means over the updates since the previous one): what changes before a collapse
TRAINING_METRICS = ("training/episode_reward", "training/entropy", "training/policy_std", "training/loss/value",
                    "training/loss/policy", "training/grad_norm", "training/approx_kl", "training/clip_fraction",
                    "training/learning_rate", "training/grad_norm_policy", "training/grad_norm_value",
                    "training/value_clip_fraction")  # fmt: skip


def summary(curve: list[dict], target: float | None) -> dict:
    """One training's numbers from its evaluation records ({"steps", "return", "wall_s"}, in order)."""
    hit = None if target is None else next((c for c in curve if c["return"] >= target), None)
    return {
        "final_return": curve[-1]["return"],
        "best_return": max(c["return"] for c in curve),
        "steps_to_target": None if hit is None else hit["steps"],
        "time_to_target_s": None if hit is None else hit["wall_s"],
        "total_s": curve[-1]["wall_s"],
    }


def train_one(task: str, steps: int, num_envs: int, evals: int, seed: int, overrides: dict | None = None):
    """(evaluation curve, the settings trained with) of one training of our PPO at the task's defaults (with
    `overrides` of PPOConfig fields, for experiments)."""
    from mjx_lite import envs
    from mjx_lite.rl import configs, ppo

    cfg = configs.defaults(task, num_envs=num_envs)
    cfg.pop("num_timesteps")
    cfg.update(overrides or {})
    n = cfg.pop("num_envs")
    curve: list[dict] = []
    t0 = time.perf_counter()

    def progress(step, m):
        curve.append({"steps": int(step), "return": round(float(m["eval/episode_reward"]), 2),
                      "wall_s": round(time.perf_counter() - t0, 1)})  # fmt: skip
        train = {k.removeprefix("training/"): float(f"{m[k]:.4g}") for k in TRAINING_METRICS if k in m}
        if train:
            curve[-1]["training"] = train  # means over the updates since the previous evaluation
        print(f"[rl_tasks]   {task} seed {seed}: {curve[-1]}", flush=True)

    ppo.train(envs.make(task), steps, num_envs=n, seed=seed, progress_fn=progress, num_evals=evals,
              show_progress=False, **cfg)  # fmt: skip
    settings = {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()}
    return curve, settings


def _write(out: dict, path: str | None) -> None:
    if path:
        out["load_end"] = os.getloadavg()[0]
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f, indent=1)
        os.replace(tmp, path)


def run(tasks: list[str], steps: int = STEPS, num_envs: int = NUM_ENVS, evals: int = EVALS, seeds=(0,),
        json_path: str | None = None, command: str = "", overrides: dict | None = None) -> dict:  # fmt: skip
    """Train every (task, seed) in turn; the results (rewritten to json_path after each training). `overrides`:
    PPOConfig fields replacing the defaults (recorded as "overrides"; the table names them)."""
    import jax

    out = {"date": datetime.datetime.now(datetime.UTC).isoformat(timespec="minutes"),
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "jax": jax.__version__, "backend": jax.default_backend(), "command": command,
           "load_start": os.getloadavg()[0], "overrides": dict(overrides or {}), "tasks": {}}  # fmt: skip
    for task in tasks:
        target = TARGETS.get(task)
        res = out["tasks"][task] = {"target": target, "steps": steps, "num_envs": num_envs, "evals": evals,
                                    "overrides": dict(overrides or {}), "runs": []}  # fmt: skip
        for seed in seeds:
            load = os.getloadavg()[0]
            try:
                curve, settings = train_one(task, steps, num_envs, evals, seed, overrides)
                r = {"seed": seed, **summary(curve, target), "curve": curve, "settings": settings}
            except Exception as e:  # noqa: BLE001 - reported, not hidden
                r = {"seed": seed, "error": f"{type(e).__name__}: {e}"[:300]}
            r["load"] = [round(load, 2), round(os.getloadavg()[0], 2)]
            res["runs"].append(r)
            shown = {k: v for k, v in r.items() if k not in ("curve", "settings")}
            print(f"[rl_tasks] {task} {json.dumps(shown)}", flush=True)
            _write(out, json_path)
    _write(out, json_path)
    return out


def merge(results: list[dict]) -> dict:
    """Several saved runs as one: rows in order of first appearance, one per (task, budget, num_envs, settings
    trained with); a later seed of the same row replaces an earlier one."""
    out = dict(results[0], tasks={})
    out["date"] = " / ".join(sorted({r["date"] for r in results}))
    commands = [r.get("command", "") for r in results if r.get("command")]
    out["command"] = "; ".join(dict.fromkeys(commands))
    for r in results:
        for task, t in r["tasks"].items():
            name = t.get("task", task)
            settings = next((x["settings"] for x in t["runs"] if "settings" in x), t.get("overrides", {}))
            key = f"{name}|{t['steps']}|{t['num_envs']}|{json.dumps(settings, sort_keys=True)}"
            m = out["tasks"].setdefault(key, dict(t, task=name, runs=[]))
            by_seed = {x["seed"]: x for x in m["runs"]} | {x["seed"]: x for x in t["runs"]}
            m["runs"] = [by_seed[k] for k in sorted(by_seed)]
    return out


def _curve_cell(curve: list[dict], points: int = 6) -> str:
    """The return at up to `points` evaluations, evenly picked, first and last included: "73 -> 410 -> 905"."""
    if len(curve) <= points:
        picked = curve
    else:
        picked = [curve[round(i * (len(curve) - 1) / (points - 1))] for i in range(points)]
    return " → ".join(f"{c['return']:.0f}" for c in picked)


def _steps(n: int | None) -> str:
    if n is None:
        return "not reached"
    return f"{n / 1e6:.2f}M" if n >= 100_000 else f"{n / 1e3:.0f}k"


def _changed(task: str, t: dict) -> dict:
    """The settings a row trained with that differ from today's `configs.defaults(task, num_envs)` (a run saved
    before a default changed, or an experiment's --set); the recorded overrides where no settings were saved."""
    from mjx_lite.rl import configs

    settings = next((x["settings"] for x in t["runs"] if "settings" in x), None)
    if settings is None:
        return dict(t.get("overrides") or {})
    now = json.loads(json.dumps(configs.defaults(task, num_envs=t["num_envs"])))  # tuples as lists, as saved
    return {k: v for k, v in settings.items() if now.get(k) != v}


def markdown(res: dict, command: str | None = None) -> str:
    """The section for docs/benchmarks.md: one row per (task, seed)."""
    command = command or res.get("command") or "python benchmarks/rl_tasks.py"
    lines = [
        "### Reinforcement learning: the return of every task at a fixed budget (our PPO, the task's defaults)",
        "",
        f"`{command}` ({res['date']}, {res['machine']}, JAX {res.get('jax', '?')} {res.get('backend', '')}; the "
        "machine was shared: returns and steps do not depend on its load, wall-clocks do, so each row gives the "
        "1-minute load average at the training's start and end). `mjx_lite.rl.ppo.train` at "
        "`configs.defaults(task, num_envs=N)`; float32; deterministic evaluation (mean return of the default "
        "`num_eval_envs` fresh episodes); wall-clock since `train` was called (compilation and evaluations "
        "included). Returns are per episode of 1000 control steps with rewards in [0, 1] (1000 is the maximum).",
        "",
        "| task (settings that differ from the defaults) | budget | num_envs | seed | return at evaluations | final "
        "| best | target: steps to it "
        "| wall-clock | load |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, t in res["tasks"].items():
        name = t.get("task", task)
        changed = _changed(name, t)
        if changed:
            name += " (" + ", ".join(f"{k}={v}" for k, v in changed.items()) + ")"
        for r in t["runs"]:
            head = f"| {name} | {_steps(t['steps'])} | {t['num_envs']} | {r['seed']} |"
            load = "-" if "load" not in r else f"{r['load'][0]:.1f}-{r['load'][1]:.1f}"
            if "error" in r:
                lines.append(f"{head} failed: {r['error'][:80]} | | | | | {load} |")
                continue
            tgt = "-"
            if t["target"] is not None:
                tgt = f"{t['target']:.0f}: {_steps(r['steps_to_target'])}"
                if r["time_to_target_s"] is not None:
                    tgt += f" ({r['time_to_target_s']:.0f} s)"
            lines.append(f"{head} {_curve_cell(r['curve'])} | {r['final_return']:.0f} | {r['best_return']:.0f} | "
                         f"{tgt} | {r['total_s'] / 60:.0f} min | {load} |")  # fmt: skip
    return "\n".join(lines) + "\n"


REPORT_TASKS = ["point_mass_easy", "pendulum_swingup", "cartpole_swingup", "acrobot_swingup", "ball_in_cup_catch",
                "walker_stand", "cheetah_run"]  # fmt: skip


def report(quick: bool = False) -> str:
    """Markdown section for docs/benchmarks.md (benchmarks/report.py): reacher_easy over 3 seeds at 3M steps, then
    REPORT_TASKS at 1M steps, one seed, 256 environments (hours on a 2-core CPU); quick: cartpole_balance, 50k."""
    if quick:
        res = run(["cartpole_balance"], steps=50_000, evals=3)
        return markdown(res, "python benchmarks/rl_tasks.py --tasks cartpole_balance --steps 50000 --evals 3")
    reacher = run(["reacher_easy"], steps=3_000_000, evals=16, seeds=(0, 1, 2))
    rest = run(REPORT_TASKS)
    return markdown(merge([reacher, rest]),
                    "python benchmarks/rl_tasks.py --tasks reacher_easy --steps 3000000 --num-envs 256 --evals 16 "
                    f"--seeds 0,1,2; python benchmarks/rl_tasks.py --tasks {','.join(REPORT_TASKS)} "
                    "--steps 1000000 --num-envs 256")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=None, help="comma-separated task names (envs.names()); 'all' for every one")
    p.add_argument("--steps", type=int, default=STEPS, help="environment steps per training (the budget)")
    p.add_argument("--num-envs", type=int, default=NUM_ENVS, help="environments (batching derived from it)")
    p.add_argument("--evals", type=int, default=EVALS, help="evaluations per training, the first before training")
    p.add_argument("--seeds", default="0", help="comma-separated seeds (one training each)")
    p.add_argument("--set", action="append", default=[], metavar="FIELD=VALUE",
                   help="a PPOConfig field replacing the default (an experiment; the table names it)")  # fmt: skip
    _args.add_saved_runs(p, "write the results here (rewritten after every training)")
    a = p.parse_args(argv)
    if a.from_json:
        print(markdown(merge(_args.load_saved_runs(a.from_json)), a.command))
        return
    if not a.tasks:
        p.error("--tasks is required (or --from-json)")
    from mjx_lite import envs

    tasks = envs.names() if a.tasks == "all" else [t for t in a.tasks.split(",") if t]
    for t in tasks:
        if t not in envs.names():
            p.error(f"unknown task {t!r}; tasks: {', '.join(envs.names())}")
    seeds = [int(s) for s in a.seeds.split(",") if s]
    if not seeds or a.steps < 1 or a.num_envs < 1 or a.evals < 2:
        p.error("need >= 1 seed, --steps >= 1, --num-envs >= 1 and --evals >= 2")
    overrides = {}
    for item in a.set:
        field, sep, value = item.partition("=")
        if not sep:
            p.error(f"--set {item!r}: expected FIELD=VALUE")
        try:
            overrides[field] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            overrides[field] = value
    command = f"python benchmarks/rl_tasks.py --tasks {a.tasks} --steps {a.steps} --num-envs {a.num_envs}"
    command += "".join(f" --set {x}" for x in a.set)
    if a.seeds != "0":
        command += f" --seeds {a.seeds}"
    if a.evals != EVALS:
        command += f" --evals {a.evals}"
    res = run(tasks, a.steps, a.num_envs, a.evals, seeds, a.json, command, overrides)
    print(markdown(res))


if __name__ == "__main__":
    main()
