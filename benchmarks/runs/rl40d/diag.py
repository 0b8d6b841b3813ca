"""Per-update diagnostic of PPO's value function on cartpole_balance (issue 40): task defaults vs overrides.

    python benchmarks/runs/rl40d/diag.py --seed 3 --num-envs 2048 --steps 500000 --variants defaults,norm
Records per update: value loss, value / policy gradient norms, policy scale, training episode return, the
learning rate, and over the environments' current observations: max |cart velocity|, max |pole angular velocity|,
and the value net's prediction (mean, max); an evaluation (deterministic, as ppo.train's) at the end.
"""

import argparse
import json
import os
import time

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import envs
from mjx_lite.rl import configs, ppo

VARIANTS = {
    "defaults": {},
    "norm": {"normalize_observations": True},
    "rs0.1": {"reward_scaling": 0.1},
    "lr3e-4": {"learning_rate": 3e-4},
    "norm_joint": {"normalize_observations": True, "clip_per_network": False, "learning_rate_schedule": "constant"},
}


def run(task, seed, num_envs, steps, overrides, evals_at=()):
    cfg = configs.defaults(task, num_envs=num_envs)
    cfg.pop("num_timesteps")
    n = cfg.pop("num_envs")
    cfg.update(overrides)
    config = ppo.PPOConfig(num_envs=n, **cfg)
    env = envs.make(task)
    trainer = ppo.Trainer(env, config)
    train_env, ts, state, key = trainer.init(seed)
    spu = config.env_steps_per_update
    n_up = max(1, -(-steps // spu))
    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)
    value_net = trainer.network.value_net

    @jax.jit
    def probe(params, obs):
        x = trainer.spec.normalized(params["normalizer"], obs)
        v = value_net.apply({"params": params["value"]}, x)[..., 0]
        return jp.abs(obs).max(0), v.mean(), jp.abs(v).max()

    rows, evals = [], []
    c0, w0 = time.process_time(), time.perf_counter()
    for i in range(1, n_up + 1):
        train_env, ts, state, key, m = trainer.update(train_env, ts, state, key)
        m = jax.device_get(m)
        omax, vmean, vmax = jax.device_get(probe(ts.params, state.obs))
        ep = float(m["episodes"])
        rows.append({
            "update": i, "steps": i * spu, "loss_value": float(m["loss/value"]),
            "gn_value": float(m["grad_norm_value"]), "gn_policy": float(m["grad_norm_policy"]),
            "policy_std": float(m["policy_std"]), "lr": float(m["learning_rate"]),
            "train_return": float(m["episode_return_sum"]) / ep if ep else None,
            "max_abs_cart_vel": float(omax[3]), "max_abs_pole_vel": float(omax[4]),
            "v_mean": float(vmean), "v_absmax": float(vmax),
            "norm_std": [float(x) for x in np.sqrt(np.asarray(ts.params["normalizer"]["m2"])
                                                   / max(float(ts.params["normalizer"]["count"]), 1.0))],
        })  # fmt: skip
        r = rows[-1]
        print(
            f"  u{i:3d} {r['steps'] / 1e6:.3f}M vloss {r['loss_value']:9.3f} gnV {r['gn_value']:9.1f} "
            f"gnP {r['gn_policy']:7.2f} std {r['policy_std']:.3f} lr {r['lr']:.2e} "
            f"ret {r['train_return'] if r['train_return'] is None else round(r['train_return'], 1)} "
            f"|xd| {r['max_abs_cart_vel']:.1f} |thd| {r['max_abs_pole_vel']:.1f} "
            f"V {r['v_mean']:.1f}/{r['v_absmax']:.1f}"
            + (f" nstd {np.round(r['norm_std'], 4).tolist()}" if config.normalize_observations else ""),
            flush=True,
        )
        if i in evals_at or i == n_up:
            em = jax.device_get(trainer.evaluate(ts.params, jax.random.fold_in(eval_key, i)))
            evals.append({"steps": i * spu, "return": float(em["eval/episode_reward"])})
            print(f"  eval at {i * spu}: {evals[-1]['return']:.1f}", flush=True)
    cpu, wall = time.process_time() - c0, time.perf_counter() - w0
    return {
        "rows": rows,
        "evals": evals,
        "cpu_s": cpu,
        "wall_s": wall,
        "updates": n_up,
        "steps_per_update": spu,
        "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
    }


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--num-envs", type=int, default=2048)
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--variants", default="defaults,norm")
    p.add_argument("--evals", default="", help="extra update indices to evaluate at")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    out = {"seed": a.seed, "num_envs": a.num_envs, "steps": a.steps, "load_start": os.getloadavg()[0], "runs": {}}
    ev = {int(x) for x in a.evals.split(",") if x}
    for v in a.variants.split(","):
        print(f"== {v} {VARIANTS[v]} seed {a.seed} num_envs {a.num_envs} steps {a.steps}", flush=True)
        out["runs"][v] = run("cartpole_balance", a.seed, a.num_envs, a.steps, VARIANTS[v], ev)
        r = out["runs"][v]
        print(f"== {v}: cpu {r['cpu_s']:.0f} s wall {r['wall_s']:.0f} s load {os.getloadavg()[0]:.1f}", flush=True)
        out["load_end"] = os.getloadavg()[0]
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
