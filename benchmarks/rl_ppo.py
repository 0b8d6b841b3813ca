"""PPO on mjx_lite vs Brax's PPO on MJX: same MJCF, same observations and rewards, same hyper-parameters.

    python benchmarks/rl_ppo.py                       # cartpole_balance and hopper (about an hour on a 2-core CPU)
    python benchmarks/rl_ppo.py --tasks cartpole_balance --quick

For each task, in one process and back to back: `mjx_lite.rl.ppo.train` on `mjx_lite.envs.make(task)`, then
`brax.training.agents.ppo.train` on a Brax environment that steps the same MJCF with MJX (`mujoco.mjx`) and
computes the observation, reward and termination with the very same task methods (they only read Data fields
that MJX names the same: qpos, qvel, xpos, sensordata). Hyper-parameters: the task's defaults in
`mjx_lite.rl.configs`, passed to both trainers under Brax's names; networks of the same sizes (swish MLPs).

Measured per run, from the progress callbacks (both trainers call them after each evaluation):
  * the learning curve: deterministic evaluation return vs environment steps and wall-clock since `train` was called
    (compilation and evaluations included);
  * time to target: wall-clock until the first evaluation at or above the target return;
  * training throughput: environment steps per second of training (acting with the policy + updates), the median
    over evaluation intervals of steps / training time, the first interval (compilation) left out.
Brax 0.14 calls `jax.device_put_replicated`, which the installed JAX removed; the script adds a stand-in (a stack
over the devices) before importing Brax. The machine is shared: the load average is reported with the numbers.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import json
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
from mjx_lite import envs  # noqa: E402
from mjx_lite.rl import configs, ppo  # noqa: E402

TASKS = {
    # task: (bundled model, target return, environment steps, evaluations)
    "cartpole_balance": ("cartpole", 900.0, 1_500_000, 16),
    "hopper": ("hopper", 400.0, 2_000_000, 9),
}
QUICK = {"cartpole_balance": 300_000, "hopper": 300_000}
SEED = 0


def _brax():
    """Brax's PPO, with the stand-in for jax.device_put_replicated (removed from JAX, still called by Brax 0.14)."""
    try:
        jax.device_put_replicated  # noqa: B018 - raises AttributeError on current JAX
    except AttributeError:

        def device_put_replicated(x, devices):
            return jax.tree.map(lambda a: jax.device_put(jp.stack([jp.asarray(a)] * len(devices))), x)

        jax.device_put_replicated = device_put_replicated
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
    model_name = TASKS[task][0]
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


def _summary(curve: list[dict], target: float) -> dict:
    """time/steps to target, steady training throughput, final return from a list of callback records."""
    hit = next((c for c in curve if c["return"] >= target), None)
    rates = []
    for a, b in zip(curve[1:], curve[2:]):  # the first training interval includes compilation
        dt = b["train_s"] - a["train_s"]
        if dt > 0:
            rates.append((b["steps"] - a["steps"]) / dt)
    return {
        "time_to_target_s": hit["wall_s"] if hit else None,
        "steps_to_target": hit["steps"] if hit else None,
        "sps": statistics.median(rates) if rates else None,
        "final_return": curve[-1]["return"],
        "best_return": max(c["return"] for c in curve),
        "total_s": curve[-1]["wall_s"],
    }


def run_ours(task: str, steps: int, num_evals: int) -> dict:
    cfg = configs.defaults(task)
    cfg.pop("num_timesteps")
    num_envs = cfg.pop("num_envs")
    curve: list[dict] = []
    t0 = time.perf_counter()

    def progress(step, m):
        curve.append({"steps": int(step), "return": float(m["eval/episode_reward"]), "wall_s": time.perf_counter() - t0,
                      "train_s": float(m["training/walltime"])})  # fmt: skip

    ppo.train(envs.make(task), steps, num_envs=num_envs, seed=SEED, progress_fn=progress, num_evals=num_evals,
              show_progress=False, **cfg)  # fmt: skip
    return {"curve": curve, **_summary(curve, TASKS[task][1])}


def run_brax(task: str, steps: int, num_evals: int) -> dict:
    _, brax_networks, brax_ppo = _brax()
    cfg = configs.defaults(task)
    cfg.pop("num_timesteps")
    networks = functools.partial(brax_networks.make_ppo_networks, policy_hidden_layer_sizes=cfg.pop("policy_hidden"),
                                 value_hidden_layer_sizes=cfg.pop("value_hidden"))  # fmt: skip
    cfg.pop("activation", None)  # both default to swish
    env = make_mjx_env(task)
    curve: list[dict] = []
    t0 = time.perf_counter()

    def progress(step, m):
        curve.append({"steps": int(step), "return": float(m["eval/episode_reward"]), "wall_s": time.perf_counter() - t0,
                      "train_s": float(m.get("training/walltime", 0.0))})  # fmt: skip

    brax_ppo.train(environment=env, num_timesteps=steps, num_evals=num_evals, seed=SEED, progress_fn=progress,
                   network_factory=networks, deterministic_eval=True, **cfg)  # fmt: skip
    return {"curve": curve, **_summary(curve, TASKS[task][1])}


def run(tasks: list[str], quick: bool = False) -> dict:
    out = {"date": datetime.datetime.now().isoformat(timespec="minutes"), "load_start": os.getloadavg()[0],
           "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores", "tasks": {}}  # fmt: skip
    for task in tasks:
        _, target, steps, evals = TASKS[task]
        if quick:
            steps, evals = QUICK[task], 4
        res = {"target": target, "steps": steps}
        res["mjx_lite"] = run_ours(task, steps, evals)
        print(f"{task} mjx_lite: {json.dumps({k: v for k, v in res['mjx_lite'].items() if k != 'curve'})}", flush=True)
        try:
            res["brax_mjx"] = run_brax(task, steps, evals)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            res["brax_mjx"] = {"error": f"{type(e).__name__}: {e}"[:300]}
        print(f"{task} brax: {json.dumps({k: v for k, v in res['brax_mjx'].items() if k != 'curve'})}", flush=True)
        out["tasks"][task] = res
    out["load_end"] = os.getloadavg()[0]
    return out


def _fmt(x, spec=",.0f", none="not reached"):
    return none if x is None else format(x, spec)


def markdown(res: dict, command: str) -> str:
    lines = [
        "### Reinforcement learning: PPO on mjx_lite vs Brax PPO on MJX",
        "",
        f"`{command}` ({res['date']}, {res['machine']}; load average {res['load_start']:.1f} at start, "
        f"{res['load_end']:.1f} at the end: the machine was shared, timings are noisy). Same MJCF, observations, "
        "rewards and hyper-parameters (`mjx_lite.rl.configs`), seed 0, float32, deterministic evaluation. "
        "Throughput: environment steps per second of training (policy + physics + updates), median over evaluation "
        "intervals after the first. Time to target: wall-clock from calling `train` (compilation and evaluations "
        "included) to the first evaluation at or above the target.",
        "",
        "| task | target | trainer | steps/s | time to target | steps to target | best / final return |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, r in res["tasks"].items():
        for name in ("mjx_lite", "brax_mjx"):
            x = r[name]
            if "error" in x:
                lines.append(f"| {task} | {r['target']:.0f} | {name} | failed: {x['error'][:80]} | | | |")
                continue
            tt = _fmt(x["time_to_target_s"], ".0f") + (" s" if x["time_to_target_s"] else "")
            lines.append(f"| {task} | {r['target']:.0f} | {name} | {_fmt(x['sps'])} | {tt} | "
                         f"{_fmt(x['steps_to_target'])} | {x['best_return']:.0f} / {x['final_return']:.0f} |")
        o, b = r["mjx_lite"], r["brax_mjx"]
        if "error" not in b and o["sps"] and b["sps"]:
            ratio = f"throughput mjx_lite / Brax-MJX = {o['sps'] / b['sps']:.2f}x"
            if o["time_to_target_s"] and b["time_to_target_s"]:
                ratio += f"; time to target Brax-MJX / mjx_lite = {b['time_to_target_s'] / o['time_to_target_s']:.2f}x"
            lines.append(f"| {task} | | ratio | {ratio} | | | |")
    for task, r in res["tasks"].items():
        lines += ["", f"Learning curve, {task} (return at environment steps; wall-clock seconds since `train`):", "",
                  "| steps | mjx_lite return | mjx_lite s | Brax-MJX return | Brax-MJX s |", "|---|---|---|---|---|"]
        oc = {c["steps"]: c for c in r["mjx_lite"]["curve"]}
        bc = {c["steps"]: c for c in r["brax_mjx"].get("curve", [])}
        for s in sorted(set(oc) | set(bc)):
            o, b = oc.get(s), bc.get(s)
            lines.append(f"| {s:,} | {o['return']:.0f} | {o['wall_s']:.0f} |" if o else f"| {s:,} | | |")
            lines[-1] += f" {b['return']:.0f} | {b['wall_s']:.0f} |" if b else " | |"
    return "\n".join(lines) + "\n"


def report(quick: bool = False) -> str:
    """Markdown section for docs/benchmarks.md (runs the benchmark: about an hour, minutes with quick=True)."""
    res = run(list(TASKS), quick=quick)
    return markdown(res, "python benchmarks/rl_ppo.py" + (" --quick" if quick else ""))


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", default=",".join(TASKS), help="comma-separated tasks")
    p.add_argument("--quick", action="store_true", help="small budgets (a smoke run)")
    p.add_argument("--json", default=None, help="also write the raw results here")
    a = p.parse_args(argv)
    tasks = [t for t in a.tasks.split(",") if t]
    res = run(tasks, quick=a.quick)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)
    cmd = "python benchmarks/rl_ppo.py" + (f" --tasks {a.tasks}" if a.tasks != ",".join(TASKS) else "")
    print(markdown(res, cmd + (" --quick" if a.quick else "")))


if __name__ == "__main__":
    main()
