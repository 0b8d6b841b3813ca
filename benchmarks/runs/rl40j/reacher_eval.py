"""Why a reacher_easy seed at 2048 environments evaluates below its training return (issue 40, rl40j).

    PYTHONPATH=. python benchmarks/runs/rl40j/reacher_eval.py --seed 1 --json out.json
Retrains reacher_easy at the task's defaults (`configs.defaults("reacher_easy", num_envs=N)`, 3M steps, 16
evaluations: the same training as benchmarks/rl_tasks.py's run of that seed, whose curve it prints to compare), then
runs the final policy on K fresh 1000-step episodes, deterministic (tanh of the mean, as the evaluation) and
stochastic (as in training), and on the 16 episodes of the last evaluation (its keys): per episode the return, the
step of the first touch, the final distance to the target and the final joint speed. An episode that never touches
with the finger at rest is a "stuck" one.
"""

import argparse
import json
import math
import os
import time

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import envs
from mjx_lite.envs.wrappers import wrap_for_training
from mjx_lite.rl import configs, ppo

RADII = 0.05 + 0.01  # target + finger radius (reacher_easy)


def episodes(env, make_policy, params, keys, deterministic, act_key):
    """Per-episode (return, first touch step or -1, final distance, final |qvel|) of len(keys) episodes."""
    wenv = wrap_for_training(env, 1000, 1)
    policy = make_policy(params, deterministic=deterministic)

    @jax.jit
    def run(keys, act_key):
        s = wenv.reset(keys)

        def body(carry, k):
            s = carry
            a = policy(s.obs) if deterministic else policy(s.obs, k)
            s = wenv.step(s, a)
            return s, (s.reward, jp.linalg.norm(s.obs[:, 2:4], axis=-1), jp.abs(s.obs[:, 4:6]).max(-1))

        _, (r, dist, speed) = jax.lax.scan(body, s, jax.random.split(act_key, 1000))
        return r, dist, speed

    r, dist, speed = (np.asarray(x) for x in run(keys, act_key))  # (1000, K)
    touched = dist <= RADII
    first = np.where(touched.any(0), touched.argmax(0), -1)
    return {"return": r.sum(0).tolist(), "first_touch": first.tolist(), "final_dist": dist[-1].tolist(),
            "final_speed": speed[-1].tolist()}  # fmt: skip


def summary(name, e):
    ret = np.asarray(e["return"])
    never = np.asarray(e["first_touch"]) < 0
    stuck = never & (np.asarray(e["final_speed"]) < 0.1)
    low = ret < 500
    print(f"  {name}: mean {ret.mean():.1f} (std {ret.std():.1f}, n {len(ret)}), median {np.median(ret):.0f}; "
          f"< 500: {low.sum()}, never touched: {never.sum()} (at rest at the end: {stuck.sum()}); "
          f"final distance of those < 500: {np.round(np.asarray(e['final_dist'])[low], 3).tolist()[:12]}",
          flush=True)  # fmt: skip


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=2048)
    p.add_argument("--steps", type=int, default=3_000_000)
    p.add_argument("--episodes", type=int, default=256)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    cfg = configs.defaults("reacher_easy", num_envs=a.num_envs)
    cfg.pop("num_timesteps")
    n = cfg.pop("num_envs")
    env = envs.make("reacher_easy")
    load0, c0, w0 = os.getloadavg()[0], time.process_time(), time.perf_counter()
    curve = []
    make_policy, params, m = ppo.train(env, a.steps, num_envs=n, seed=a.seed, num_evals=16, show_progress=False,
                                       progress_fn=lambda s, mm: curve.append(round(mm["eval/episode_reward"], 2)),
                                       **cfg)  # fmt: skip
    print(f"curve {curve}; cpu {time.process_time() - c0:.0f} s wall {time.perf_counter() - w0:.0f} s", flush=True)
    out = {"seed": a.seed, "num_envs": n, "steps": a.steps, "curve": curve, "load_start": load0}
    # the last evaluation's 16 episodes (ppo.train's keys: fold_in(fold_in(PRNGKey(seed), 1), last update))
    c = ppo.PPOConfig(num_envs=n, **cfg)
    last = max(1, math.ceil(a.steps / c.env_steps_per_update))
    k_reset, k_act = jax.random.split(jax.random.fold_in(jax.random.fold_in(jax.random.PRNGKey(a.seed), 1), last))
    out["last_eval"] = episodes(env, make_policy, params, jax.random.split(k_reset, c.num_eval_envs), True, k_act)
    summary("the last evaluation's episodes, deterministic", out["last_eval"])
    keys = jax.random.split(jax.random.PRNGKey(12345), a.episodes)
    for det in (True, False):
        name = "deterministic" if det else "stochastic"
        out[name] = episodes(env, make_policy, params, keys, det, jax.random.PRNGKey(7))
        summary(f"{a.episodes} fresh episodes, {name}", out[name])
    out["load_end"] = os.getloadavg()[0]
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f)


if __name__ == "__main__":
    main()
