"""Default PPO settings per task, for `python -m mjx_lite train`, the benchmarks and `ppo.train(env, steps,
**configs.defaults(task, num_envs=...))`.

Sized for a CPU (small networks, 128 environments) and tuned there: `cartpole_balance` and `hopper` were
measured (benchmarks/rl_ppo.py); the other tasks' entries are starting points.

Scaling with `num_envs` (`defaults(task, num_envs=N)`, `train --num-envs N`, and `ppo.train(env, steps,
num_envs=N)` on a registered task): an update collects `TRAJECTORIES` (1024) trajectories of `unroll_length` steps,
in `max(1, round(1024 / N))` rounds of N environments (N * rounds trajectories: N of them at N >= 1536), split into
minibatches of `MINIBATCH` (64) trajectories: `max(16, round(N * rounds / 64))` minibatches (the largest divisor
of N * rounds up to that when it does not divide). Up to ~1024 environments an update is the one tuned at 128 (1024
trajectories, 16 minibatches of 64); beyond, one round of N trajectories in N / 64 minibatches (2048 environments:
32), so the samples per gradient step and the gradient steps per environment step stay those tuned, only the
policy iterations per budget fall (3M steps at unroll 10: 293 updates at 256 environments, 146 at 2048).
Everything else (learning rate, epochs, unroll, discount, networks) does not depend on N.

Episode age at large N: with a budget of B steps each of N environments runs B / N steps, so no training episode is
older than B / N steps until then (3M steps at 2048 environments: 1465 steps each, 2M steps before any environment
has run a whole 1000-step episode; at 256 environments 256k). cartpole_balance is where it shows: a near-upright
pole stays up for ~100 steps under any policy, so what teaches balancing comes from older episodes. Measured on seed
1 (3M steps; benchmarks/runs/rl40e/): 256 environments reach 970 at 0.5M; 2048 with the update of 256 (unroll 5,
16 minibatches of 128: 10240 steps and 128 gradient steps per update, 293 updates) stay at best 399, so the update
schedule is not the cause; discount 0.99 best 426 (to 2.5M); learning rate 3e-3 193 at 0.5M; training episodes cut
at 125 steps (the population turning over as fast as 256 environments') 207: no learning. The running observation
normaliser is the part that matters: its statistics follow the ageing population for ~2M steps, and without it
(`normalize_observations=False`, cartpole's observations are O(1) by construction: cart position in [-1, 1] m,
cos, sin, velocities) seed 1 at 2048 reaches 999 (first >= 900 at 2.5M; 461 / 496 / 825 at 0.5 / 1 / 1.5M against
~200 / 332 / 504 with it). Over seeds 0-4 at 2048, best return in 3M steps: 557 / 999 / 1000 / 667 / 1000 without
it (median 999, 3 of 5 reach 900; seed 2 ends at 517 after 995, a collapse), over seeds 0-2 998 / 627 / 681 with it
(median 681, 1 of 3). At 256 environments without it, seeds 0-4: 999 / 996 / 999 / 999 / 997 (median 999, 5 of 5;
first >= 900 at 0.5-2.0M; seed 4 ends at 667, a collapse). So cartpole_balance trains without the normaliser; the
other tasks keep it. reacher_easy does not share the effect (benchmarks/runs/rl40f/, seeds 0-4, 3M steps): without
the normaliser its median best is 884 at 2048 and 865 at 256 environments, against 904 and 933 with it; its inputs
are not O(1) (fingertip-to-target in metres, an unbounded shoulder angle, velocities).

Staggered episodes (`stagger_episodes=True`): every environment's first episode starts at a random step counter,
so the episodes end at different times. Without it all N environments are in the same phase of their episode
(1000 steps), and an update of 10 steps of 2048 environments sees only 10 consecutive steps of it: with 3M
steps each of 2048 environments lives about 1.5 episodes, and the policy is trained on the end of an episode
for ~70 updates in a row before it sees another start (reacher_easy at 2048 environments, 3M steps, seed 0,
discount 0.99: a return of 900 after 2.42M steps with synchronised starts, after 0.80M staggered; one seed, so a
direction, not a measured size). The evaluation is unaffected (fresh episodes).

Late collapses and seeds that never learn (cartpole_balance; benchmarks/runs/rl40h/, benchmarks/rl_tasks.py now
records the training metrics with each evaluation). At 256 environments, seed 4, constant learning rate 1e-3: the
policy's Gaussian narrows from scale 0.70 to 0.01 by 1M steps, and from then on an update moves it far in KL (mean
sampled KL from the collecting policy 0.11-0.18 against 0.02 early, 33-41% of the ratios clipped, every gradient
clipped: norm 30-58 against max_grad_norm 1), with a positive surrogate loss; the evaluation goes 997 (2.0M) -> 936
-> 845 -> 667 (3M). `learning_rate_schedule="adaptive_kl"` (ppo._adapt_learning_rate: the rate /1.5 after an update
of mean KL > 2 * desired_kl, x1.5 up to `learning_rate` below desired_kl / 2; desired_kl 0.02, so the early updates
keep 1e-3) holds the KL at 0.017-0.029 on the same seed: 922 at 0.75M, 999.8 at 3M. At 2048 environments the
seeds that never reached 900 (0 and 3: best 557 and 667) have a diverging value function over the first 0.5M steps
(value loss 119-495, value gradient norm ~2000-3900, against 0.2 and 1.4 in seed 2, which learns) while the policy's
scale grows to 1.3-1.9 (the entropy bonus wins over advantages of a wrong value function); both networks' gradients
clipped together at 1 scale the policy's by 1/2000 in those steps. `clip_per_network=True` clips each on its own:
seeds 0 / 3 reach best 994 / 999 (first >= 900 at 1.5M / 2.0M; adaptive_kl alone: 963 / 516). Over seeds 0-4 at
256 environments (3M steps, both settings): 5 of 5 reach 900 (first at 0.5-2.0M, median 0.75M on a 0.25M grid),
finals 999 / 999 / 999 / 1000 / 1000, lowest evaluation after 900 958-986; at the constant rate: 5 of 5 (0.5-2.0M,
median 1.0M on a 0.5M grid), finals 996 / 994 / 999 / 998 / 667. The value function's early divergence itself
remains (the policy now recovers from it). reacher_easy was measured with both settings and keeps the constant
rate and the joint clip (benchmarks/runs/rl40i/, 256 environments, 3M steps, seeds 0-4, both at today's code):
with them every seed reaches 900 but the finals drop (526 / 937 / 725 / 915 / 801 against 944 / 906 / 938 / 901 /
941 at the constant rate; first >= 900 at 1.6 / 0.8 / 2.6 / 0.8 / 2.4M against 0.6 / 1.0 / 2.0 / 1.8 / 1.8M). Its
late declines come with a mean KL held at 0.02 (seed 0: the training return falls from 873 to 714 as the rate falls
to 1.2e-4), so they are not cartpole's trust-region collapse. The other tasks are not measured with them.

Where these defaults differ from Brax's (MuJoCo Playground's dm_control suite settings: 2048 environments,
`batch_size` 1024 x 32 minibatches x unroll 30, i.e. ~1M steps per update and 512 gradient steps on minibatches
of 30720 samples; 16 epochs; learning rate 1e-3; discount 0.995; reward scaling 10; networks 4 x 32 and 5 x 256;
60M steps): ours are sized for budgets of a few million steps on a CPU, so an update is ~50-100x smaller (10k-20k
steps) with ~25x more gradient steps per environment step (8 epochs of minibatches of 640 samples), smaller
networks (2 x 32 policy, 2 x 64 value), discount 0.97/0.99, reward scaling 1, and staggered episodes (Brax
starts every environment's episode together); cartpole_balance also adapts its learning rate per update (Brax's
ADAPTIVE_KL adapts per minibatch on the Gaussians' analytic KL, in [1e-5, 1e-2]) and clips
each network's gradient on its own (Brax: together). Brax fixes `batch_size` and `num_minibatches` per task and
requires `batch_size * num_minibatches` to be a multiple of `num_envs`, so its settings for 2048 environments do
not run at 100 and learn differently at 256; here they follow N (docs/rl.md).
"""

from __future__ import annotations

__all__ = ["DEFAULTS", "MINIBATCH", "MINIBATCHES", "TRAJECTORIES", "batching", "defaults"]

TRAJECTORIES = 1024  # trajectories per update at the tuned setting (128 environments x 8 rounds)
MINIBATCHES = 16  # minibatches per epoch at the tuned setting
MINIBATCH = TRAJECTORIES // MINIBATCHES  # trajectories per minibatch (64), kept when the batch grows

_CPU = dict(
    num_envs=128, batch_size=64, num_minibatches=16, unroll_length=10, num_updates_per_batch=8,
    learning_rate=1e-3, entropy_cost=1e-2, discounting=0.97, gae_lambda=0.95, reward_scaling=1.0,
    max_grad_norm=1.0, normalize_observations=True, episode_length=1000, action_repeat=1,
    policy_hidden=(32, 32), value_hidden=(64, 64), num_eval_envs=16, stagger_episodes=True,
)  # fmt: skip

# what cartpole_balance measured against late collapses and a diverging value function (module docstring)
_STABLE = dict(learning_rate_schedule="adaptive_kl", desired_kl=0.02, clip_per_network=True)

DEFAULTS: dict[str, dict] = {
    # no observation normalisation: its observations are O(1) by construction, and at 2048 environments the running
    # statistics keep moving for ~2M steps while the environments' episodes age (module docstring; issue 40);
    # the learning rate adapted to the update's KL and each network's gradient clipped on its own (module docstring:
    # late collapses at 256 environments, seeds that never learn at 2048)
    "cartpole_balance": {**_CPU, "num_timesteps": 1_500_000, "normalize_observations": False, **_STABLE},
    "cartpole_swingup": {**_CPU, "num_timesteps": 5_000_000},
    "cartpole_balance_sparse": {**_CPU, "num_timesteps": 1_500_000},
    "cartpole_swingup_sparse": {**_CPU, "num_timesteps": 10_000_000, "discounting": 0.99},
    "pendulum_swingup_shaped": {**_CPU, "num_timesteps": 5_000_000, "discounting": 0.99},
    "reacher": {**_CPU, "num_timesteps": 5_000_000, "learning_rate": 3e-4},
    "hopper": {**_CPU, "num_timesteps": 2_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64)},
    "quadruped_run": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                      "value_hidden": (128, 128)},
    "humanoid_bundled_stand": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4,
                               "policy_hidden": (64, 64), "value_hidden": (128, 128)},
    # locomotion and manipulation on bundled models (untuned starting points; discount 0.97 as Playground's
    # joystick tasks; getup at 0.99: the reward comes late, after the fall)
    "quadruped_joystick": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                           "value_hidden": (128, 128)},
    "quadruped_getup": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "discounting": 0.99,
                        "policy_hidden": (64, 64), "value_hidden": (128, 128)},
    "humanoid_joystick": {**_CPU, "num_timesteps": 100_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                          "value_hidden": (128, 128)},
    "push_box": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "discounting": 0.99,
                 "episode_length": 500, "policy_hidden": (64, 64), "value_hidden": (128, 128)},
    # the DeepMind Control Suite tasks (untuned starting points; dm_control's episodes: 1000 control steps)
    "acrobot_swingup": {**_CPU, "num_timesteps": 20_000_000, "discounting": 0.99},
    "acrobot_swingup_sparse": {**_CPU, "num_timesteps": 20_000_000, "discounting": 0.99},
    "point_mass_easy": {**_CPU, "num_timesteps": 5_000_000, "discounting": 0.99},
    "ball_in_cup_catch": {**_CPU, "num_timesteps": 10_000_000, "discounting": 0.99},
    "cheetah_run": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                    "value_hidden": (128, 128)},
    "walker_stand": {**_CPU, "num_timesteps": 10_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                     "value_hidden": (128, 128)},
    "walker_walk": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                    "value_hidden": (128, 128)},
    "walker_run": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                   "value_hidden": (128, 128)},
    "pendulum_swingup": {**_CPU, "num_timesteps": 10_000_000, "discounting": 0.99},
    # constant rate and joint clip: adaptive_kl + clip_per_network lower its finals (module docstring; rl40i)
    # discount 0.97 (the suite's entries have 0.99): 3M steps, seeds 0-2, best return 953/933/769 at 256
    # environments and 975/961/900 at 2048, against 880/944/865 and 969/626/972 at 0.99; seeds 0-4 at 0.97:
    # median best 933 at 256 (4 of 5 >= 900), 904 at 2048 (3 of 5) (benchmarks/runs/rl40/, issue 40). At today's
    # code (3M steps, seeds 0-4): 256 environments 5 of 5 reach 900, median final 938 (rl40i, rerun in rl40j);
    # 2048 environments 3 of 5, median best 908, median final 860 (rl40j: 146 updates, half of 256's; the final
    # policies fail 11-17% of episodes, and 16 evaluation episodes give the mean a standard error of ~50-90)
    "reacher_easy": {**_CPU, "num_timesteps": 5_000_000},
    "reacher_hard": {**_CPU, "num_timesteps": 10_000_000, "discounting": 0.99},
    "finger_spin": {**_CPU, "num_timesteps": 10_000_000, "discounting": 0.99},
    "finger_turn_easy": {**_CPU, "num_timesteps": 20_000_000, "discounting": 0.99},
    "finger_turn_hard": {**_CPU, "num_timesteps": 20_000_000, "discounting": 0.99},
    "hopper_stand": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                     "value_hidden": (128, 128)},
    "hopper_hop": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                   "value_hidden": (128, 128)},
    "fish_swim": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                  "value_hidden": (128, 128)},
    "swimmer_swimmer6": {**_CPU, "num_timesteps": 20_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                         "value_hidden": (128, 128)},
    "manipulator_bring_ball": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4,
                               "policy_hidden": (64, 64), "value_hidden": (128, 128)},
    "humanoid_stand": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                       "value_hidden": (128, 128)},
    "humanoid_walk": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                      "value_hidden": (128, 128)},
    "humanoid_run": {**_CPU, "num_timesteps": 50_000_000, "learning_rate": 3e-4, "policy_hidden": (64, 64),
                     "value_hidden": (128, 128)},
}  # fmt: skip


def batching(num_envs: int) -> dict:
    """{"num_envs", "batch_size", "num_minibatches"} for `num_envs` environments (the rule of the module docstring).

    >>> batching(128), batching(256), batching(2048)  # 1024, 1024, 2048 trajectories per update
    ({'num_envs': 128, 'batch_size': 64, 'num_minibatches': 16}, {'num_envs': 256, 'batch_size': 64, \
'num_minibatches': 16}, {'num_envs': 2048, 'batch_size': 64, 'num_minibatches': 32})
    """
    if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
        raise ValueError(f"num_envs must be a positive int, not {num_envs!r}")
    trajectories = num_envs * max(1, round(TRAJECTORIES / num_envs))
    wanted = max(MINIBATCHES, round(trajectories / MINIBATCH))
    minibatches = max(d for d in range(1, wanted + 1) if trajectories % d == 0)
    return {"num_envs": num_envs, "batch_size": trajectories // minibatches, "num_minibatches": minibatches}


def defaults(task: str, num_envs: int | None = None) -> dict:
    """A copy of the default settings of `task` (the CPU defaults for a task without its own entry), with
    `batch_size` and `num_minibatches` derived from `num_envs` when given (see `batching`); includes
    `num_timesteps` and `num_envs`."""
    cfg = dict(DEFAULTS.get(task, {**_CPU, "num_timesteps": 5_000_000}))
    if num_envs is not None:
        cfg.update(batching(num_envs))
    return cfg
