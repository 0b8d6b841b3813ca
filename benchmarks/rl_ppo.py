"""PPO on mjx_lite vs Brax's PPO (on our env through the adapter, and on MJX), over several seeds per trainer.

    python benchmarks/rl_ppo.py                                   # cartpole_balance and hopper, 5 seeds per trainer
    python benchmarks/rl_ppo.py --tasks cartpole_balance --seeds 5 --json out.json
    python benchmarks/rl_ppo.py --tasks cartpole_balance --quick --seeds 2     # a smoke run
    python benchmarks/rl_ppo.py --from-json a.json b.json          # the markdown of saved runs, nothing trained

Trainers, each on the same task (same MJCF, observations, rewards) with the same hyper-parameters (the task's
defaults in `mjx_lite.rl.configs`, passed to every trainer under Brax's names; swish MLPs of the same sizes):
  * `mjx_lite`: `mjx_lite.rl.ppo.train` on `mjx_lite.envs.make(task)`;
  * `brax_adapter`: Brax's `ppo.train`, unchanged, on `mjx_lite.envs.brax_adapter.to_brax(envs.make(task))`
    (Brax's episodes, auto-reset and evaluation; our physics);
  * `brax_mjx`: Brax's `ppo.train` on a Brax environment that steps the task's MJCF with MJX (`mujoco.mjx`) and
    computes observation, reward and termination with the very same task methods (they only read Data fields that
    MJX names the same: qpos, qvel, xpos, sensordata); only for the tasks with an MJX twin (`TASKS`).
Seeds 0..N-1 run one training at a time, interleaved (seed 0 of every trainer, then seed 1, ...) so that a change
of the machine's load spreads over the trainers alike. JAX's persistent compilation cache (which `import mjx_lite`
turns on) is switched off and the in-memory caches are cleared before each training, so every wall-clock includes
that training's compilation (`--compilation-cache` keeps the persistent cache: then every training but the first
of a kind loads its programs from disk, as a user's second run would).

Measured per training, from the progress callbacks (every trainer calls them after each evaluation):
  * steps and wall-clock to target: at the first evaluation at or above the target return (wall-clock since
    `train` was called: compilation and evaluations included);
  * lowest evaluation after the target: the minimum evaluation return from that first evaluation on (a collapse
    after reaching the target shows here);
  * training throughput: environment steps per second of training (acting + updates), the median over evaluation
    intervals of steps / training time, the first interval (compilation) left out;
  * final and best evaluation returns, total wall-clock.
Per trainer: median, min and max over seeds (a seed that never reached the target counts as infinitely late: the
median is "not reached" when half or more of the seeds did not reach it; the lowest evaluation after the target is
over the seeds that reached it). Deterministic evaluation, float32.

Our trainer could run the seeds as one vmapped training (`Trainer.init`/`update`/`evaluate` are pure functions of
the key), but the seeds would then share one wall-clock, which is not comparable with Brax's one seed per call and
is one of the measured quantities: the seeds run one after another here.
Brax 0.14 calls `jax.device_put_replicated`, which the installed JAX removed: `brax_adapter.install_jax_shims()`
adds a stand-in before Brax's `train`. The machine may be shared: the load average is recorded per training.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
import math
import os
import platform
import statistics
import sys
import time

import jax
import jax.numpy as jp

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import mjx_lite  # noqa: E402
from benchmarks import _args  # noqa: E402 - after ROOT is on sys.path
from mjx_lite import envs  # noqa: E402
from mjx_lite.rl import configs, ppo  # noqa: E402

TASKS = {
    # task: (target return or None (the return at the budget only), environment steps, evaluations,
    #        bundled model of the Brax-on-MJX twin or None)
    "cartpole_balance": (900.0, 1_500_000, 16, "cartpole"),
    "hopper": (400.0, 2_000_000, 9, "hopper"),
    "walker_walk": (None, 5_000_000, 11, None),
    "cheetah_run": (None, 5_000_000, 11, None),
}
DEFAULT_TASKS = ("cartpole_balance", "hopper")  # what `report()` and a plain run measure
QUICK_STEPS, QUICK_EVALS = 300_000, 4
TRAINERS = ("mjx_lite", "brax_adapter", "brax_mjx")
SEEDS = 5


def _brax():
    """Brax's PPO modules, after adding the stand-in for jax.device_put_replicated where JAX lacks it."""
    from mjx_lite.envs import brax_adapter

    brax_adapter.install_jax_shims()
    from brax.envs import base as brax_base
    from brax.training.agents.ppo import networks as brax_networks
    from brax.training.agents.ppo import train as brax_ppo

    return brax_base, brax_networks, brax_ppo


def make_mjx_env(task: str):
    """A Brax environment stepping the task's MJCF with MJX, observations/rewards from the mjx_lite task."""
    import mujoco
    from mujoco import mjx

    brax_base, _, _ = _brax()
    ours = envs.make(task)
    model_name = TASKS[task][3]
    mjm = mujoco.MjModel.from_xml_path(mjx_lite.models.path(model_name))
    m = mjx.put_model(mjm)

    def reward_done(d, action):
        if task.startswith("cartpole"):
            reward, metrics = ours._reward(d, action)
            return reward, jp.zeros_like(reward), metrics
        reward, metrics = ours._reward(d)  # hopper
        return reward, ours._fallen(d).astype(reward.dtype), metrics

    class MjxTask(brax_base.Env):
        def reset(self, rng):
            qpos, qvel = ours._initial_qpos_qvel(rng)
            d = mjx.forward(m, mjx.make_data(m).replace(qpos=qpos, qvel=qvel))
            _, _, metrics = reward_done(d, jp.zeros(ours.action_size))
            zero = jp.zeros(())
            return brax_base.State(d, ours._obs(d), zero, zero, {k: zero for k in metrics}, {})

        def step(self, state, action):
            d = state.pipeline_state.replace(ctrl=ours.ctrl_from_action(action))
            d = jax.lax.fori_loop(0, ours.n_frames, lambda _, x: mjx.step(m, x), d)
            reward, done, metrics = reward_done(d, jp.clip(action, -1.0, 1.0))
            return state.replace(pipeline_state=d, obs=ours._obs(d), reward=reward, done=done,
                                 metrics={**state.metrics, **metrics})  # fmt: skip

        @property
        def observation_size(self):
            return ours.observation_size

        @property
        def action_size(self):
            return ours.action_size

        @property
        def backend(self):
            return "mjx"

    return MjxTask()


def summary(curve: list[dict], target: float | None) -> dict:
    """One training's numbers from its evaluation records ({"steps", "return", "wall_s", "train_s"}, in order)."""
    hit = None if target is None else next((i for i, c in enumerate(curve) if c["return"] >= target), None)
    rates = []
    for a, b in zip(curve[1:], curve[2:]):  # the first training interval includes compilation
        dt = b["train_s"] - a["train_s"]
        if dt > 0:
            rates.append((b["steps"] - a["steps"]) / dt)
    return {
        "steps_to_target": curve[hit]["steps"] if hit is not None else None,
        "time_to_target_s": curve[hit]["wall_s"] if hit is not None else None,
        "min_after_target": min(c["return"] for c in curve[hit:]) if hit is not None else None,
        "sps": statistics.median(rates) if rates else None,
        "final_return": curve[-1]["return"],
        "best_return": max(c["return"] for c in curve),
        "total_s": curve[-1]["wall_s"],
    }


def spread(values: list, late: bool = False) -> dict | None:
    """{"median", "min", "max", "n"} of the numbers in `values`. A None is a seed without the value: with
    late=True it counts as infinitely late (math.inf in the statistics: never reached), else it is left out;
    None when nothing is left."""
    xs = [math.inf if v is None else float(v) for v in values] if late else [float(v) for v in values if v is not None]
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


STATS = ("steps_to_target", "time_to_target_s", "min_after_target", "sps", "final_return", "best_return", "total_s")
LATE = ("steps_to_target", "time_to_target_s")  # a seed that never reached the target is infinitely late


def aggregate(runs: list[dict]) -> dict:
    """Per-trainer statistics over its seeds' runs (each a `summary` plus "seed", or {"seed", "error"})."""
    ok = [r for r in runs if "error" not in r]
    out = {"seeds": len(runs), "failed": len(runs) - len(ok),
           "reached": sum(r["steps_to_target"] is not None for r in ok)}  # fmt: skip
    for k in STATS:
        out[k] = spread([r[k] for r in ok], late=k in LATE) if ok else None
    return out


def _progress(curve: list[dict], t0: float):
    def progress(step, m):
        curve.append({"steps": int(step), "return": float(m["eval/episode_reward"]), "wall_s": time.perf_counter() - t0,
                      "train_s": float(m.get("training/walltime", 0.0))})  # fmt: skip

    return progress


def _cfg(task: str, num_envs: int | None = None) -> dict:
    """The task's defaults (at `num_envs` environments, batching derived from it; None: the task's own)."""
    cfg = configs.defaults(task, num_envs=num_envs)
    cfg.pop("num_timesteps")
    return cfg


def run_ours(task: str, steps: int, num_evals: int, seed: int, num_envs: int | None = None) -> list[dict]:
    cfg = _cfg(task, num_envs)
    num_envs = cfg.pop("num_envs")
    curve: list[dict] = []
    t0 = time.perf_counter()
    ppo.train(envs.make(task), steps, num_envs=num_envs, seed=seed, progress_fn=_progress(curve, t0),
              num_evals=num_evals, show_progress=False, **cfg)  # fmt: skip
    return curve


def run_brax(task: str, steps: int, num_evals: int, seed: int, env: str, num_envs: int | None = None) -> list[dict]:
    """Brax's PPO on our env through the adapter (env "adapter") or on the MJX twin (env "mjx")."""
    _, brax_networks, brax_ppo = _brax()
    cfg = _cfg(task, num_envs)
    networks = functools.partial(brax_networks.make_ppo_networks, policy_hidden_layer_sizes=cfg.pop("policy_hidden"),
                                 value_hidden_layer_sizes=cfg.pop("value_hidden"))  # fmt: skip
    cfg.pop("activation", None)  # both default to swish
    cfg.pop("stagger_episodes", None)  # ours only: Brax starts every environment's episodes together
    cfg.pop("train_episode_length", None)  # ours only: Brax's training episodes last episode_length
    cfg.pop("clip_per_network", None)  # ours only: Brax clips the two networks' gradients together
    if cfg.pop("learning_rate_schedule", "constant") == "adaptive_kl":
        # Brax's own ADAPTIVE_KL in the same bounds (it adapts per minibatch on the Gaussians' analytic KL, ours per
        # update on the mean sampled KL: mjx_lite.rl.ppo._adapt_learning_rate)
        cfg.update(learning_rate_schedule="ADAPTIVE_KL", learning_rate_schedule_max_lr=cfg["learning_rate"],
                   learning_rate_schedule_min_lr=cfg["learning_rate"] * ppo.MIN_LEARNING_RATE_FRACTION)  # fmt: skip
    else:
        cfg.pop("desired_kl", None)
    if env == "adapter":
        from mjx_lite.envs import brax_adapter

        environment = brax_adapter.to_brax(envs.make(task))
    else:
        environment = make_mjx_env(task)
    curve: list[dict] = []
    t0 = time.perf_counter()
    brax_ppo.train(environment=environment, num_timesteps=steps, num_evals=num_evals, seed=seed,
                   progress_fn=_progress(curve, t0), network_factory=networks, deterministic_eval=True,
                   **cfg)  # fmt: skip
    return curve


def train_one(trainer: str, task: str, steps: int, num_evals: int, seed: int,
              num_envs: int | None = None) -> list[dict]:  # fmt: skip
    """One training's evaluation curve (at the task's defaults for `num_envs` environments; None: the task's)."""
    if trainer == "mjx_lite":
        return run_ours(task, steps, num_evals, seed, num_envs)
    if trainer in ("brax_adapter", "brax_mjx"):
        return run_brax(task, steps, num_evals, seed, trainer.removeprefix("brax_"), num_envs)
    raise ValueError(f"unknown trainer {trainer!r}; trainers: {TRAINERS}")


def trainers_for(task: str, trainers) -> list[str]:
    """`trainers` less brax_mjx where the task has no MJX twin."""
    return [t for t in trainers if t != "brax_mjx" or TASKS[task][3] is not None]


def run(tasks: list[str], seeds: int = SEEDS, trainers=TRAINERS, quick: bool = False, steps: int | None = None,
        evals: int | None = None, json_path: str | None = None, compilation_cache: bool = False,
        num_envs: int | None = None) -> dict:
    """Train every (task, seed, trainer), one at a time; the raw results (written to json_path after each).
    compilation_cache=False switches JAX's persistent compilation cache off meanwhile (every training compiles).
    num_envs: the task's defaults at that many environments (None: the task's own, 128)."""
    previous = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", previous and compilation_cache)
    try:
        return _run(tasks, seeds, trainers, quick, steps, evals, json_path, compilation_cache, num_envs)
    finally:
        jax.config.update("jax_enable_compilation_cache", previous)


def _run(tasks, seeds, trainers, quick, steps, evals, json_path, compilation_cache, num_envs=None) -> dict:
    for t in tasks:
        if t not in TASKS:
            raise SystemExit(f"unknown task {t!r}; tasks: {list(TASKS)}")
    out = {"date": datetime.datetime.now().isoformat(timespec="minutes"), "load_start": os.getloadavg(),
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
           "jax": jax.__version__, "backend": jax.default_backend(), "seeds": seeds,
           "compilation_cache": bool(compilation_cache), "num_envs": num_envs, "tasks": {}}  # fmt: skip
    for task in tasks:
        target, n_steps, n_evals, _ = TASKS[task]
        if quick:
            n_steps, n_evals = QUICK_STEPS, QUICK_EVALS
        n_steps, n_evals = steps or n_steps, evals or n_evals
        res = out["tasks"][task] = {"target": target, "steps": n_steps, "evals": n_evals, "runs": {}}
        names = trainers_for(task, trainers)
        for seed in range(seeds):
            for name in names:
                jax.clear_caches()  # every training compiles: its wall-clock includes compilation
                load = os.getloadavg()
                try:
                    curve = train_one(name, task, n_steps, n_evals, seed, num_envs)
                    r = {"seed": seed, **summary(curve, target), "load": [load, os.getloadavg()], "curve": curve}
                except Exception as e:  # noqa: BLE001 - reported, not hidden
                    r = {"seed": seed, "error": f"{type(e).__name__}: {e}"[:300], "load": [load, os.getloadavg()]}
                res["runs"].setdefault(name, []).append(r)
                shown = {k: v for k, v in r.items() if k != "curve"}
                print(f"[rl_ppo] {task} {name} {json.dumps(shown)}", flush=True)
                if json_path:
                    out["load_end"] = os.getloadavg()
                    with open(json_path, "w") as f:
                        json.dump(out, f, indent=1)
    out["load_end"] = os.getloadavg()
    if json_path:
        with open(json_path, "w") as f:
            json.dump(out, f, indent=1)
    return out


def _num(x: float | None, spec: str, unit: str = "") -> str:
    if x is None:
        return ""
    return "not reached" if math.isinf(x) else format(x, spec) + unit


def _cell(s: dict | None, spec: str, unit: str = "") -> str:
    """median [min - max] of a `spread`."""
    if s is None:
        return "-"
    return f"{_num(s['median'], spec, unit)} [{_num(s['min'], spec, unit)} - {_num(s['max'], spec, unit)}]"


def markdown(res: dict, command: str) -> str:
    loads = [r["load"] for t in res["tasks"].values() for rs in t["runs"].values() for r in rs if "load" in r]
    load_txt = ""
    if loads:
        l1 = [x[0] for pair in loads for x in pair]
        load_txt = f"; 1-minute load average {min(l1):.1f}-{max(l1):.1f} at the starts and ends of the trainings"
    done = max((len(rs) for t in res["tasks"].values() for rs in t["runs"].values()), default=0)
    cut = f" of the {res['seeds']} planned (the run was cut short)" if done < res["seeds"] else ""
    compiled = {False: "each compiling afresh (no persistent compilation cache)",
                True: "with JAX's persistent compilation cache (a training after the first of its kind loads its "
                      "programs from disk)",
                None: "with JAX's persistent compilation cache on (mjx_lite's default) and not recorded: seeds after "
                      "the first, or runs after an earlier one, may have loaded their programs from disk"}[
        res.get("compilation_cache")]  # fmt: skip
    lines = [
        "### Reinforcement learning: PPO on mjx_lite vs Brax's PPO (through the adapter, and on MJX), several seeds",
        "",
        f"`{command}` ({res['date']}, {res['machine']}, JAX {res.get('jax', '?')} {res.get('backend', '')}"
        f"{load_txt}: the machine was shared, timings are noisy). Same MJCF, observations, rewards and "
        "hyper-parameters (`mjx_lite.rl.configs`"
        + (f" at {res['num_envs']} environments" if res.get("num_envs") else "")
        + ") for every trainer; float32, deterministic evaluation; seeds 0 to "
        f"{done - 1}{cut}, one training at a time, interleaved over the trainers, {compiled}. "
        "`mjx_lite`: our PPO; `brax_adapter`: Brax's PPO on our env (`envs.brax_adapter.to_brax`); `brax_mjx`: "
        "Brax's PPO on MJX with the same task functions. Cells: median [min - max] over the seeds. Steps and "
        "wall-clock to target: at the first evaluation at or above the target (wall-clock since `train` was called, "
        "compilation and evaluations included; a seed that never reached it counts as infinitely late). Lowest "
        "evaluation after the target: the minimum return from that evaluation on, over the seeds that reached it. "
        "Throughput: environment steps per second of training, median over evaluation intervals after the first.",
        "",
        "| task | target | trainer | reached / seeds | steps to target | wall-clock to target "
        "| lowest eval after target | final return | steps/s | total wall-clock |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for task, t in res["tasks"].items():
        target = "-" if t["target"] is None else f"{t['target']:.0f}"
        medians = {}
        for name, runs in t["runs"].items():
            a = aggregate(runs)
            medians[name] = a
            ok = a["seeds"] - a["failed"]
            reached = f"{a['reached'] if t['target'] is not None else '-'}/{ok}"
            if a["failed"]:
                err = next(r["error"] for r in runs if "error" in r)
                reached += f" ({a['failed']} failed: {err[:60]})"
            lines.append(f"| {task} | {target} | {name} | {reached} | {_cell(a['steps_to_target'], ',.0f')} | "
                         f"{_cell(a['time_to_target_s'], '.0f', ' s')} | {_cell(a['min_after_target'], '.0f')} | "
                         f"{_cell(a['final_return'], '.0f')} | {_cell(a['sps'], ',.0f')} | "
                         f"{_cell(a['total_s'], '.0f', ' s')} |")  # fmt: skip
        ours = medians.get("mjx_lite")
        ratios = []
        for name, a in medians.items():
            if name == "mjx_lite" or ours is None:
                continue
            if a["sps"] and ours["sps"]:
                ratios.append(f"throughput mjx_lite / {name} = {ours['sps']['median'] / a['sps']['median']:.2f}x")
            tt_o, tt_b = ours["time_to_target_s"], a["time_to_target_s"]
            if tt_o and tt_b and math.isfinite(tt_o["median"]) and math.isfinite(tt_b["median"]):
                ratios.append(f"median wall-clock to target {name} / mjx_lite = {tt_b['median'] / tt_o['median']:.2f}x")
        if ratios:
            lines.append(f"| {task} | | ratios | {'; '.join(ratios)} | | | | | | |")
    lines += ["", "Per seed (steps to target / wall-clock to target / lowest eval after it / final return / steps/s):",
              "", "| task | trainer | " + " | ".join(f"seed {s}" for s in range(res["seeds"])) + " |",
              "|---|---|" + "---|" * res["seeds"]]  # fmt: skip
    for task, t in res["tasks"].items():
        for name, runs in t["runs"].items():
            cells = []
            for r in sorted(runs, key=lambda r: r["seed"]):
                if "error" in r:
                    cells.append("failed")
                    continue
                tt = "not reached" if r["steps_to_target"] is None else f"{r['steps_to_target']:,}"
                tt = "-" if t["target"] is None else tt
                tt += "" if r["time_to_target_s"] is None else f" / {r['time_to_target_s']:.0f} s"
                low = "-" if r["min_after_target"] is None else f"{r['min_after_target']:.0f}"
                cells.append(f"{tt} / {low} / {r['final_return']:.0f} / {_num(r['sps'], ',.0f')}")
            cells += [""] * (res["seeds"] - len(cells))
            lines.append(f"| {task} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def merge(results: list[dict]) -> dict:
    """Several saved runs (one task each, or other trainers or seeds of a task) as one result for `markdown`; a
    later (trainer, seed) replaces an earlier one. Runs of one task must share its target and budget."""
    if len({r.get("num_envs") for r in results}) > 1:
        raise ValueError("runs at different num_envs cannot be merged")
    out = dict(results[0], tasks={})
    out["seeds"] = max(r["seeds"] for r in results)
    out["date"] = " / ".join(sorted({r["date"] for r in results}))
    for r in results:
        for task, t in r["tasks"].items():
            m = out["tasks"].setdefault(task, dict(t, runs={}))
            if (m["target"], m["steps"], m["evals"]) != (t["target"], t["steps"], t["evals"]):
                raise ValueError(f"{task}: runs with different target, steps or evaluations cannot be merged")
            for name, runs in t["runs"].items():
                by_seed = {x["seed"]: x for x in m["runs"].get(name, [])} | {x["seed"]: x for x in runs}
                m["runs"][name] = [by_seed[k] for k in sorted(by_seed)]
    return out


def report(quick: bool = False) -> str:
    """Markdown section for docs/benchmarks.md (runs the benchmark: hours on a 2-core CPU; minutes with quick)."""
    if quick:
        res = run(["cartpole_balance"], seeds=2, quick=True)
        return markdown(res, "python benchmarks/rl_ppo.py --tasks cartpole_balance --seeds 2 --quick")
    res = run(list(DEFAULT_TASKS))
    return markdown(res, "python benchmarks/rl_ppo.py")


def command_line(a: argparse.Namespace) -> str:
    """The command that reproduces a run with these arguments (what the markdown names)."""
    cmd = "python benchmarks/rl_ppo.py"
    if a.tasks != ",".join(DEFAULT_TASKS):
        cmd += f" --tasks {a.tasks}"
    if getattr(a, "compilation_cache", False):
        cmd += " --compilation-cache"
    if a.seeds != SEEDS:
        cmd += f" --seeds {a.seeds}"
    if a.trainers != ",".join(TRAINERS):
        cmd += f" --trainers {a.trainers}"
    for flag in ("steps", "evals", "num_envs"):
        if getattr(a, flag, None) is not None:
            cmd += f" --{flag.replace('_', '-')} {getattr(a, flag)}"
    return cmd + (" --quick" if a.quick else "")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(DEFAULT_TASKS), help=f"comma-separated, of {list(TASKS)}")
    p.add_argument("--seeds", type=int, default=SEEDS, help="seeds per trainer (0..N-1)")
    p.add_argument("--trainers", default=",".join(TRAINERS), help=f"comma-separated, of {list(TRAINERS)}")
    p.add_argument("--steps", type=int, default=None, help="environment steps per training (default: the task's)")
    p.add_argument("--evals", type=int, default=None, help="evaluations per training (default: the task's)")
    p.add_argument("--num-envs", type=int, default=None,
                   help="environments (the task's defaults at that many, batching derived; default: the task's)")
    p.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS:,} steps, {QUICK_EVALS} evaluations")
    p.add_argument("--compilation-cache", action="store_true",
                   help="keep JAX's persistent compilation cache on (default: off, every training compiles)")
    _args.add_saved_runs(p, "write the raw results here (rewritten after every training)")
    a = p.parse_args(argv)
    if a.from_json:
        print(markdown(merge(_args.load_saved_runs(a.from_json)), a.command or "python benchmarks/rl_ppo.py"))
        return
    if a.seeds < 1:
        p.error("--seeds must be >= 1")
    trainers = [t for t in a.trainers.split(",") if t]
    for t in trainers:
        if t not in TRAINERS:
            p.error(f"unknown trainer {t!r}; trainers: {list(TRAINERS)}")
    tasks = [t for t in a.tasks.split(",") if t]
    res = run(tasks, seeds=a.seeds, trainers=trainers, quick=a.quick, steps=a.steps, evals=a.evals, json_path=a.json,
              compilation_cache=a.compilation_cache, num_envs=a.num_envs)  # fmt: skip
    print(markdown(res, command_line(a)))


if __name__ == "__main__":
    main()
