"""Default PPO settings per task, for `python -m mjx_lite.rl.train` and the benchmarks.

Sized for a CPU (small networks, 128 environments); on an accelerator raise `num_envs` and `batch_size`.
`cartpole_balance` and `hopper` were tuned and measured (benchmarks/rl_ppo.py); the others are starting points.
"""

from __future__ import annotations

__all__ = ["DEFAULTS", "defaults"]

_CPU = dict(
    num_envs=128, batch_size=64, num_minibatches=16, unroll_length=10, num_updates_per_batch=8,
    learning_rate=1e-3, entropy_cost=1e-2, discounting=0.97, gae_lambda=0.95, reward_scaling=1.0,
    max_grad_norm=1.0, normalize_observations=True, episode_length=1000, action_repeat=1,
    policy_hidden=(32, 32), value_hidden=(64, 64), num_eval_envs=16,
)  # fmt: skip

DEFAULTS: dict[str, dict] = {
    "cartpole_balance": {**_CPU, "num_timesteps": 1_500_000},
    "cartpole_swingup": {**_CPU, "num_timesteps": 5_000_000},
    "pendulum_swingup": {**_CPU, "num_timesteps": 5_000_000, "discounting": 0.99},
    "reacher": {**_CPU, "num_timesteps": 5_000_000, "learning_rate": 3e-4},
    "hopper": {**_CPU, "num_timesteps": 2_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64)},
    "quadruped_run": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                      "value_hidden": (128, 128)},
    "humanoid_stand": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                       "value_hidden": (128, 128)},
}  # fmt: skip


def defaults(task: str) -> dict:
    """A copy of the default settings of `task` (the CPU defaults for a task without its own entry)."""
    return dict(DEFAULTS.get(task, {**_CPU, "num_timesteps": 5_000_000}))
