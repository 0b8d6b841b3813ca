"""Proximal Policy Optimisation on batched mjx_lite environments (flax networks, optax Adam).

    from mjx_lite import envs
    from mjx_lite.rl import ppo
    make_policy, params, metrics = ppo.train(envs.make("cartpole_balance"), num_timesteps=2_000_000,
                                             num_envs=256, seed=0, progress_fn=print)
    policy = make_policy(params, deterministic=True)     # obs -> action, jit-able

The hyper-parameters and their meaning follow Brax's `brax.training.agents.ppo.train`, so one set of values
drives both (benchmarks/rl_ppo.py runs them side by side). One *update* (a jitted function):
  1. collects `batch_size * num_minibatches` trajectories of `unroll_length` steps from `num_envs` environments
     (`batch_size * num_minibatches / num_envs` unrolls in a row, the environments carrying over), sampling the
     tanh-Gaussian policy; environment steps per update = batch_size * num_minibatches * unroll_length *
     action_repeat;
  2. merges the observations into the running mean/std used to normalise the networks' inputs;
  3. runs `num_updates_per_batch` epochs; each shuffles the trajectories into `num_minibatches` minibatches and
     takes one Adam step (gradient clipped to `max_grad_norm`) per minibatch on
         clipped surrogate (clipping_epsilon, advantages normalised) + vf_loss_coefficient * 0.5 * value error^2
         - entropy_cost * entropy,
     with rewards multiplied by `reward_scaling` and GAE(discounting, gae_lambda) advantages recomputed with the
     current value network; a terminated step does not bootstrap, a truncated step (time limit) is left out of
     the advantage (its delta is masked) rather than treated as terminal.
`clipping_epsilon_value` (None: off, the default, as Brax's): PPO2's value clip. The value each step had when it
was collected (the value network and normaliser of the collecting update, stored in the batch) bounds the value
error: the squared error is max((target - v)^2, (target - v_clip)^2) with v_clip = v_old + clip(v - v_old,
-clipping_epsilon_value, clipping_epsilon_value), in reward-scaled units (Brax's `clipping_epsilon_value`, same
formula).
`learning_rate_schedule` "adaptive_kl" (off in `PPOConfig`, on in the task defaults of `configs`) changes the
learning rate between updates to keep an update's mean KL from the collecting policy near `desired_kl` (divided by
1.5 above twice it, multiplied by 1.5 below half of it, never above `learning_rate`): as the policy's Gaussian
narrows, a step of constant size moves it further in KL and the updates leave the trust region (see
`_adapt_learning_rate`).
Brax's ADAPTIVE_KL adapts per minibatch on the Gaussians' analytic KL, between fixed bounds (1e-5, 1e-2).
`stagger_episodes` (ours, not Brax's; off in `PPOConfig`, on in the task defaults of `configs`) starts each
environment's first episode at a random step counter, so the batch covers every phase of an episode rather than
the same few steps of all of them. `train` on a registered task fills the hyper-parameters not given from
`configs.defaults(env.name, num_envs)`.
Evaluation runs `num_eval_envs` fresh episodes with the deterministic policy (tanh of the mean) and reports
the mean return. Everything random is drawn from `seed`: two runs with the same seed give the same parameters.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable
from typing import Any

import flax.serialization
import flax.struct
import jax
import jax.numpy as jp
import numpy as np
import optax
from tqdm.auto import tqdm

from mjx_lite.envs.base import Env
from mjx_lite.envs.wrappers import TrainingEnv, wrap_for_training
from mjx_lite.rl import configs, networks
from mjx_lite.rl.networks import NetworkConfig

__all__ = ["FORMAT", "PPOConfig", "Trainer", "TrainingState", "gae", "load", "make_policy_fn", "save", "train"]

FORMAT = "mjx_lite.ppo/1"  # tag of saved parameter files
LEARNING_RATE_SCHEDULES = ("constant", "adaptive_kl")
KL_FACTOR = 1.5  # adaptive_kl: the learning rate's change per update
MIN_LEARNING_RATE_FRACTION = 1e-3  # adaptive_kl: the learning rate never falls below this fraction of learning_rate


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (names and meaning as Brax's ppo.train; see the module docstring)."""

    num_envs: int = 256
    episode_length: int = 1000
    action_repeat: int = 1
    unroll_length: int = 20
    batch_size: int = 256
    num_minibatches: int = 8
    num_updates_per_batch: int = 4
    learning_rate: float = 3e-4
    learning_rate_schedule: str = "constant"
    desired_kl: float = 0.02
    entropy_cost: float = 1e-2
    discounting: float = 0.97
    gae_lambda: float = 0.95
    clipping_epsilon: float = 0.3
    clipping_epsilon_value: float | None = None
    max_grad_norm: float | None = 1.0
    clip_per_network: bool = False
    reward_scaling: float = 1.0
    normalize_observations: bool = True
    normalize_advantage: bool = True
    vf_loss_coefficient: float = 0.5
    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    activation: str = "swish"
    num_eval_envs: int = 64
    deterministic_eval: bool = True
    stagger_episodes: bool = False
    train_episode_length: int | None = None

    def __post_init__(self):
        for name in ("num_envs", "episode_length", "action_repeat", "unroll_length", "batch_size", "num_minibatches",
                     "num_updates_per_batch", "num_eval_envs"):  # fmt: skip
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"PPOConfig.{name} must be a positive int, not {v!r}")
        t = self.train_episode_length
        if t is not None and (isinstance(t, bool) or not isinstance(t, (int, np.integer)) or t < 1):
            raise ValueError(f"PPOConfig.train_episode_length must be a positive int or None, not {t!r}")
        if (self.batch_size * self.num_minibatches) % self.num_envs:
            raise ValueError(
                f"batch_size * num_minibatches ({self.batch_size} * {self.num_minibatches}) must be a multiple of "
                f"num_envs ({self.num_envs}): each update collects that many trajectories from num_envs environments"
            )
        if not 0 < self.discounting <= 1 or not 0 <= self.gae_lambda <= 1:
            raise ValueError(f"discounting must be in (0, 1] and gae_lambda in [0, 1], got {self.discounting}, "
                             f"{self.gae_lambda}")  # fmt: skip
        if self.learning_rate <= 0 or self.clipping_epsilon <= 0:
            raise ValueError("learning_rate and clipping_epsilon must be > 0")
        if self.clipping_epsilon_value is not None and not self.clipping_epsilon_value > 0:
            raise ValueError(f"clipping_epsilon_value must be > 0 or None, not {self.clipping_epsilon_value}")
        if self.learning_rate_schedule not in LEARNING_RATE_SCHEDULES:
            raise ValueError(f"learning_rate_schedule must be one of {LEARNING_RATE_SCHEDULES}, not "
                             f"{self.learning_rate_schedule!r}")  # fmt: skip
        if not self.desired_kl > 0:
            raise ValueError(f"desired_kl must be > 0, not {self.desired_kl}")
        if self.max_grad_norm is not None and self.max_grad_norm <= 0:
            raise ValueError(f"max_grad_norm must be > 0 or None, not {self.max_grad_norm}")
        object.__setattr__(self, "policy_hidden", tuple(int(h) for h in self.policy_hidden))
        object.__setattr__(self, "value_hidden", tuple(int(h) for h in self.value_hidden))

    @property
    def training_episode_length(self) -> int:
        """Environment steps after which a training environment's episode is truncated (`train_episode_length`,
        default `episode_length`); evaluation episodes last `episode_length`."""
        return self.episode_length if self.train_episode_length is None else int(self.train_episode_length)

    @property
    def env_steps_per_update(self) -> int:
        return self.batch_size * self.num_minibatches * self.unroll_length * self.action_repeat


@flax.struct.dataclass
class TrainingState:
    """params: {"normalizer", "policy", "value"}; opt_state: optax state of {"policy", "value"}; learning_rate:
    the step size of the next update (`learning_rate` throughout, unless `learning_rate_schedule` adapts it)."""

    params: dict
    opt_state: Any
    env_steps: jax.Array  # () int
    learning_rate: jax.Array  # () float


def gae(rewards, values, bootstrap, termination, truncation, discounting: float, lam: float):
    """Generalised advantage estimation along axis 1 of (batch, time) arrays.

    Returns (value targets, advantages), both (batch, time), without gradient. A terminated step does not
    bootstrap; a truncated step's delta is masked and the trace is cut there.
    """
    r, v, term, trunc = (x.T for x in (rewards, values, termination, truncation))
    next_v = jp.concatenate([v[1:], bootstrap[None]], axis=0)
    deltas = (r + discounting * (1.0 - term) * next_v - v) * (1.0 - trunc)

    def body(acc, x):
        delta, te, tr = x
        acc = delta + discounting * lam * (1.0 - te) * (1.0 - tr) * acc
        return acc, acc

    _, adv = jax.lax.scan(body, jp.zeros_like(bootstrap), (deltas, term, trunc), reverse=True)
    return jax.lax.stop_gradient((adv + v).T), jax.lax.stop_gradient(adv.T)


def make_policy_fn(net: NetworkConfig) -> Callable:
    """`make_policy(params, deterministic=False) -> policy(obs, rng=None) -> action` for networks `net`.

    The deterministic policy is tanh of the Gaussian's mean; the stochastic one samples (needs `rng`). `obs` may
    have leading batch axes.
    """
    policy_net = net.policy_net

    def make_policy(params: dict, deterministic: bool = False) -> Callable:
        def policy(obs: jax.Array, rng: jax.Array | None = None) -> jax.Array:
            x = networks.normalize(params["normalizer"], obs) if net.normalize_observations else obs
            loc, scale = networks.gaussian_params(policy_net.apply({"params": params["policy"]}, x))
            if deterministic:
                return jp.tanh(loc)
            if rng is None:
                raise ValueError("the stochastic policy needs a PRNG key: policy(obs, rng)")
            return jp.tanh(loc + scale * jax.random.normal(rng, loc.shape, loc.dtype))

        return policy

    return make_policy


@dataclasses.dataclass(frozen=True)
class _Spec:
    """The static part of the jitted PPO functions (hashable): hyper-parameters and networks."""

    config: PPOConfig
    network: NetworkConfig

    def optimizer(self) -> optax.GradientTransformation:
        """Adam's direction (the gradient clipped to `max_grad_norm` first); the step applies -learning_rate times
        it, the rate being a traced value of the TrainingState (optax.adam(lr) is scale_by_adam then scale(-lr))."""
        opt = optax.scale_by_adam()
        if self.config.max_grad_norm is None:
            return opt
        opt = optax.chain(optax.clip_by_global_norm(self.config.max_grad_norm), opt)
        if not self.config.clip_per_network:
            return opt
        # each network's gradient clipped on its own (Adam is per parameter, so only the clipping differs)
        return optax.multi_transform({"policy": opt, "value": opt}, _network_labels)

    def normalized(self, normalizer: dict, obs: jax.Array) -> jax.Array:
        return networks.normalize(normalizer, obs) if self.config.normalize_observations else obs


def _network_labels(pv: dict) -> dict:
    """{"policy": tree of "policy", "value": tree of "value"}: each parameter labelled with its network."""
    return {name: jax.tree.map(lambda _, name=name: name, tree) for name, tree in pv.items()}


def _collect(spec: _Spec, train_env: TrainingEnv, params: dict, state, key: jax.Array):
    c = spec.config
    policy_net = spec.network.policy_net

    def one_step(carry, _):
        s, k = carry
        k, k_act = jax.random.split(k)
        x = spec.normalized(params["normalizer"], s.obs)
        out = policy_net.apply({"params": params["policy"]}, x)
        loc, scale = networks.gaussian_params(out)
        u = loc + scale * jax.random.normal(k_act, loc.shape, loc.dtype)
        logp = networks.log_prob(loc, scale, u)
        ns = train_env.step(s, jp.tanh(u))
        tr = {
            "obs": s.obs, "raw_action": u, "logp": logp, "reward": ns.reward, "done": ns.done,
            "truncation": ns.info["truncation"], "next_obs": ns.obs,
            "episode_return": ns.info["episode_metrics"]["return"], "episode_done": ns.info["episode_done"],
        }  # fmt: skip
        if c.clipping_epsilon_value is not None:  # the value at collection, for the value clip
            tr["value"] = spec.network.value_net.apply({"params": params["value"]}, x)[..., 0]
        return (ns, k), tr

    def one_unroll(carry, _):
        s, k = carry
        k, k_u = jax.random.split(k)
        (s, _), tr = jax.lax.scan(one_step, (s, k_u), None, length=c.unroll_length)
        return (s, k), tr

    n_unrolls = c.batch_size * c.num_minibatches // c.num_envs
    (state, _), data = jax.lax.scan(one_unroll, (state, key), None, length=n_unrolls)
    # (unrolls, time, envs, ...) -> (unrolls * envs, time, ...)
    data = jax.tree.map(lambda x: jp.swapaxes(x, 1, 2).reshape((-1, c.unroll_length) + x.shape[3:]), data)
    return state, data


def _loss(spec: _Spec, pv: dict, normalizer: dict, batch: dict, key: jax.Array):
    c = spec.config
    obs = spec.normalized(normalizer, batch["obs"])
    loc, scale = networks.gaussian_params(spec.network.policy_net.apply({"params": pv["policy"]}, obs))
    value_net = spec.network.value_net
    values = value_net.apply({"params": pv["value"]}, obs)[..., 0]
    last = spec.normalized(normalizer, batch["next_obs"][:, -1])
    bootstrap = value_net.apply({"params": pv["value"]}, last)[..., 0]
    truncation = batch["truncation"]
    termination = batch["done"] * (1.0 - truncation)
    targets, adv = gae(batch["reward"] * c.reward_scaling, values, bootstrap, termination, truncation,
                       c.discounting, c.gae_lambda)  # fmt: skip
    if c.normalize_advantage:
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    log_ratio = networks.log_prob(loc, scale, batch["raw_action"]) - batch["logp"]
    ratio = jp.exp(log_ratio)
    surrogate = jp.minimum(ratio * adv, jp.clip(ratio, 1 - c.clipping_epsilon, 1 + c.clipping_epsilon) * adv)
    policy_loss = -surrogate.mean()
    value_error = (targets - values) ** 2
    diagnostics = {}
    if c.clipping_epsilon_value is not None:
        old = batch["value"]
        eps = c.clipping_epsilon_value
        clipped = old + jp.clip(values - old, -eps, eps)
        value_error = jp.maximum(value_error, (targets - clipped) ** 2)
        # the fraction of values that moved further than eps from the collected ones
        diagnostics["value_clip_fraction"] = jax.lax.stop_gradient(jp.mean(jp.abs(values - old) > eps))
    value_loss = c.vf_loss_coefficient * 0.5 * jp.mean(value_error)
    entropy = networks.entropy(loc, scale, key).mean()
    total = policy_loss + value_loss - c.entropy_cost * entropy
    diagnostics |= {
        "policy_std": scale.mean(),  # the Gaussian's scale, mean over actions and samples
        "approx_kl": jax.lax.stop_gradient(jp.mean(ratio - 1.0 - log_ratio)),  # KL(old || new), k3 estimator
        "clip_fraction": jax.lax.stop_gradient(jp.mean(jp.abs(ratio - 1.0) > c.clipping_epsilon)),
    }
    return total, {"loss/total": total, "loss/policy": policy_loss, "loss/value": value_loss, "entropy": entropy,
                   **diagnostics}  # fmt: skip


def _adapt_learning_rate(lr: jax.Array, kl: jax.Array, c: PPOConfig) -> jax.Array:
    """The next update's learning rate under `adaptive_kl`: divided by KL_FACTOR when the update's mean KL from the
    collecting policy exceeded 2 * desired_kl, multiplied by it (up to `learning_rate`) when below desired_kl / 2.

    Why: the policy's Gaussian narrows as it learns (cartpole_balance: scale 0.7 -> 0.01), and the KL of an Adam
    step of fixed size grows like 1 / scale^2; at a constant rate the updates leave PPO's trust region (mean KL
    0.1-0.18, 35-40% of the ratios clipped, every gradient clipped) and the policy eventually collapses (issue 40).
    """
    lower = c.learning_rate * MIN_LEARNING_RATE_FRACTION
    lr = jp.where(kl > 2.0 * c.desired_kl, lr / KL_FACTOR, jp.where(kl < 0.5 * c.desired_kl, lr * KL_FACTOR, lr))
    return jp.clip(lr, lower, c.learning_rate).astype(lr.dtype)


@functools.partial(jax.jit, static_argnums=(0,), donate_argnums=(3,))
def _update(spec: _Spec, train_env: TrainingEnv, ts: TrainingState, state, key: jax.Array):
    """One PPO update (collect, normalise, SGD epochs); jitted once per (spec, environment, shapes)."""
    c = spec.config
    optimizer = spec.optimizer()
    key, k_roll, k_sgd = jax.random.split(key, 3)
    state, data = _collect(spec, train_env, ts.params, state, k_roll)
    normalizer = ts.params["normalizer"]
    if c.normalize_observations:
        normalizer = networks.update_normalizer(normalizer, data["obs"])
    grad_fn = jax.value_and_grad(functools.partial(_loss, spec), has_aux=True)
    n = data["obs"].shape[0]

    lr = ts.learning_rate

    def minibatch(carry, batch):
        opt_state, pv, k = carry
        k, k_loss = jax.random.split(k)
        (_, metrics), grads = grad_fn(pv, normalizer, batch, k_loss)
        metrics["grad_norm"] = optax.global_norm(grads)
        metrics["grad_norm_policy"] = optax.global_norm(grads["policy"])
        metrics["grad_norm_value"] = optax.global_norm(grads["value"])
        updates, opt_state = optimizer.update(grads, opt_state, pv)
        updates = jax.tree.map(lambda u: (-lr * u).astype(u.dtype), updates)
        return (opt_state, optax.apply_updates(pv, updates), k), metrics

    def epoch(carry, _):
        opt_state, pv, k = carry
        k, k_perm, k_mb = jax.random.split(k, 3)
        perm = jax.random.permutation(k_perm, n)
        shuffled = jax.tree.map(lambda x: x[perm].reshape((c.num_minibatches, -1) + x.shape[1:]), data)
        (opt_state, pv, _), metrics = jax.lax.scan(minibatch, (opt_state, pv, k_mb), shuffled)
        return (opt_state, pv, k), metrics

    pv = {"policy": ts.params["policy"], "value": ts.params["value"]}
    (opt_state, pv, _), metrics = jax.lax.scan(epoch, (ts.opt_state, pv, k_sgd), None,
                                               length=c.num_updates_per_batch)  # fmt: skip
    metrics = {k: v.mean() for k, v in metrics.items()}
    metrics["learning_rate"] = lr
    if c.learning_rate_schedule == "adaptive_kl":
        lr = _adapt_learning_rate(lr, metrics["approx_kl"], c)
    ended = data["episode_done"]
    metrics["episodes"] = ended.sum()
    metrics["episode_return_sum"] = (data["episode_return"] * ended).sum()
    params = {"normalizer": normalizer, **pv}
    ts = TrainingState(params=params, opt_state=opt_state, env_steps=ts.env_steps + c.env_steps_per_update,
                       learning_rate=lr)  # fmt: skip
    return train_env, ts, state, key, metrics


@functools.partial(jax.jit, static_argnums=(0,))
def _evaluate(spec: _Spec, eval_env: TrainingEnv, params: dict, key: jax.Array) -> dict:
    """Mean return of `num_eval_envs` fresh episodes (the first episode of each environment)."""
    c = spec.config
    k_reset, k_act = jax.random.split(key)
    policy = make_policy_fn(spec.network)(params, deterministic=c.deterministic_eval)
    s = eval_env.reset(jax.random.split(k_reset, c.num_eval_envs))
    zeros = jp.zeros((c.num_eval_envs,), s.reward.dtype)

    def body(carry, k):
        s, ret, length, active = carry
        a = policy(s.obs) if c.deterministic_eval else policy(s.obs, k)
        s = eval_env.step(s, a)
        ret = ret + s.reward * active
        length = length + c.action_repeat * active
        return (s, ret, length, active * (1.0 - s.done)), None

    steps = math.ceil(c.episode_length / c.action_repeat)
    (_, ret, length, _), _ = jax.lax.scan(body, (s, zeros, zeros, jp.ones_like(zeros)),
                                          jax.random.split(k_act, steps))  # fmt: skip
    return {"eval/episode_reward": ret.mean(), "eval/episode_reward_std": ret.std(),
            "eval/episode_length": length.mean()}  # fmt: skip


def _stagger(state, c: PPOConfig, key: jax.Array):
    """`state` with each environment's step counter drawn uniformly from [0, episode_length) (in whole calls of
    `step`), so that the first episodes end at different times and every update sees all phases of an episode."""
    calls = math.ceil(c.training_episode_length / c.action_repeat)
    steps = jax.random.randint(key, (c.num_envs,), 0, calls) * c.action_repeat
    info = dict(state.info, steps=steps.astype(state.info["steps"].dtype))
    return state.replace(info=info)


class Trainer:
    """The pieces of PPO for one environment and configuration (what `train` loops over).

    `init(seed)` -> (TrainingEnv, TrainingState, env State, key); `update(train_env, ts, env_state, key)` ->
    the same after one update, plus scalar metrics; `evaluate(params, key)` -> eval metrics. The jitted functions
    are shared by every Trainer of the same environment object and configuration (no recompilation when `train`
    is called again), and the training env is an argument (a pytree), so re-randomised models reuse them too.
    """

    def __init__(self, env: Env, config: PPOConfig, randomize: Callable | None = None, eval_env: Env | None = None):
        if not isinstance(env, Env):
            raise TypeError(f"ppo needs an envs.Env, not {type(env).__name__}")
        self.env = env
        self.config = c = config
        self.randomize = randomize
        self.network = NetworkConfig(env.observation_size, env.action_size, c.policy_hidden, c.value_hidden,
                                     c.activation, c.normalize_observations)  # fmt: skip
        self.spec = _Spec(c, self.network)
        self.make_policy = make_policy_fn(self.network)
        self.eval_env = wrap_for_training(eval_env or env, c.episode_length, c.action_repeat)

    def init(self, seed: int) -> tuple[TrainingEnv, TrainingState, Any, jax.Array]:
        c = self.config
        key = jax.random.PRNGKey(seed)
        k_net, k_env, k_rand, k_loop = jax.random.split(key, 4)
        train_env = wrap_for_training(self.env, c.training_episode_length, c.action_repeat, self.randomize,
                                      c.num_envs if self.randomize else None, k_rand)  # fmt: skip
        params = self.network.init(k_net)
        opt_state = self.spec.optimizer().init({"policy": params["policy"], "value": params["value"]})
        steps = jp.zeros((), jp.int64 if jax.config.jax_enable_x64 else jp.int32)
        lr = jp.asarray(c.learning_rate, jax.tree.leaves(params["policy"])[0].dtype)
        ts = TrainingState(params=params, opt_state=opt_state, env_steps=steps, learning_rate=lr)
        env_state = train_env.jit_reset(jax.random.split(k_env, c.num_envs))
        if c.stagger_episodes:
            env_state = _stagger(env_state, c, jax.random.fold_in(key, 2))
        return train_env, ts, env_state, k_loop

    def update(self, train_env: TrainingEnv, ts: TrainingState, state, key: jax.Array):
        """One PPO update: (train_env, ts, env_state, key, metrics)."""
        return _update(self.spec, train_env, ts, state, key)

    def evaluate(self, params: dict, key: jax.Array) -> dict:
        return _evaluate(self.spec, self.eval_env, params, key)


def train(
    env: Env,
    num_timesteps: int,
    num_envs: int = 256,
    seed: int = 0,
    progress_fn: Callable[[int, dict], None] | None = None,
    *,
    num_evals: int = 10,
    randomize: Callable | None = None,
    eval_env: Env | None = None,
    show_progress: bool = True,
    **hyperparameters,
) -> tuple[Callable, dict, dict]:
    """Train a PPO policy on `env` for `num_timesteps` environment steps.

    Args:
      env: the environment (one instance; it is batched with `envs.wrap_for_training`).
      num_timesteps: environment steps to train for (rounded up to whole updates).
      num_envs: environments stepped in parallel.
      seed: every random draw (networks, resets, actions, minibatches, randomisation) derives from it.
      progress_fn: called as progress_fn(env_steps, metrics) after each evaluation (metrics: Python floats).
      num_evals: evaluations, evenly spaced, the first before training (0: none).
      randomize: optional domain randomisation `randomize(model, rng) -> model` (see envs.wrap_for_training).
      eval_env: environment to evaluate on (default `env`, not randomised).
      show_progress: a tqdm progress bar over environment steps.
      **hyperparameters: fields of `PPOConfig` (episode_length, unroll_length, batch_size, learning_rate, ...).
        Those not given take the task's defaults where `env.name` is a task of `configs.DEFAULTS`
        (`configs.defaults(env.name, num_envs)`: batch size and minibatches derived from `num_envs`), else
        `PPOConfig`'s own (Brax's).

    Returns:
      (make_policy, params, metrics): `make_policy(params, deterministic=False)` gives `policy(obs, rng=None)`;
      params {"normalizer", "policy", "value"}; metrics: the last evaluation's and training metrics, plus
      "history" (one dict per evaluation, with "steps" and "walltime" since the call) and "network" (the
      NetworkConfig, for `save`).
    """
    unknown = set(hyperparameters) - {f.name for f in dataclasses.fields(PPOConfig)}
    if unknown:
        raise TypeError(f"ppo.train: unknown hyper-parameter(s) {sorted(unknown)}; "
                        f"known: {[f.name for f in dataclasses.fields(PPOConfig)]}")  # fmt: skip
    if env.name in configs.DEFAULTS:
        task = configs.defaults(env.name, num_envs=num_envs)
        for k in ("num_timesteps", "num_envs"):
            task.pop(k)
        hyperparameters = {**task, **hyperparameters}
    config = PPOConfig(num_envs=num_envs, **hyperparameters)
    t0 = time.perf_counter()
    trainer = Trainer(env, config, randomize=randomize, eval_env=eval_env)
    train_env, ts, state, key = trainer.init(seed)
    steps_per_update = config.env_steps_per_update
    n_updates = max(1, math.ceil(num_timesteps / steps_per_update))
    eval_at = set()
    if num_evals > 1:
        eval_at = {round(i * n_updates / (num_evals - 1)) for i in range(1, num_evals)}
    elif num_evals == 1:
        eval_at = {n_updates}
    eval_key = jax.random.fold_in(jax.random.PRNGKey(seed), 1)
    history: list[dict] = []
    totals = {"train": 0.0, "eval": 0.0, "compile": None}
    interval = {"steps": 0, "time": 0.0, "metrics": []}
    last: dict = {}

    def evaluate(i: int) -> None:
        nonlocal last
        te = time.perf_counter()
        em = jax.device_get(trainer.evaluate(ts.params, jax.random.fold_in(eval_key, i)))
        totals["eval"] += time.perf_counter() - te
        m = {k: float(v) for k, v in em.items()}
        if interval["metrics"]:
            ms = jax.device_get(interval["metrics"])
            for k in ms[0]:
                if k not in ("episodes", "episode_return_sum"):
                    m["training/" + k] = float(np.mean([x[k] for x in ms]))
            n_ep = sum(float(x["episodes"]) for x in ms)
            if n_ep:
                m["training/episode_reward"] = sum(float(x["episode_return_sum"]) for x in ms) / n_ep
        if interval["time"] > 0:
            m["training/sps"] = interval["steps"] / interval["time"]
        m["training/walltime"] = totals["train"]
        m["eval/walltime"] = totals["eval"]
        if totals["compile"] is not None:
            m["training/compile_time"] = totals["compile"]
        m["steps"] = float(i * steps_per_update)
        m["walltime"] = time.perf_counter() - t0
        interval.update(steps=0, time=0.0, metrics=[])
        history.append(m)
        last = m
        if progress_fn is not None:
            progress_fn(i * steps_per_update, m)

    bar = None
    if show_progress:
        bar = tqdm(total=n_updates * steps_per_update, unit="step", unit_scale=True, desc=env.name, leave=True)
    try:
        if num_evals > 1:
            evaluate(0)
        for i in range(1, n_updates + 1):
            tu = time.perf_counter()
            train_env, ts, state, key, metrics = trainer.update(train_env, ts, state, key)
            jax.block_until_ready(metrics)
            dt = time.perf_counter() - tu
            totals["train"] += dt
            if totals["compile"] is None:
                totals["compile"] = dt  # the first call compiles (and runs one update)
            else:
                interval["steps"] += steps_per_update
                interval["time"] += dt
            interval["metrics"].append(metrics)
            if bar is not None:
                bar.update(steps_per_update)
            if i in eval_at:
                evaluate(i)
                if bar is not None and "eval/episode_reward" in last:
                    bar.set_postfix(eval_return=f"{last['eval/episode_reward']:.1f}")
    finally:
        if bar is not None:
            bar.close()
    out = dict(last)
    out["history"] = history
    out["network"] = trainer.network
    return trainer.make_policy, ts.params, out


# ---- saving and loading ---------------------------------------------------------------------------------------


def save(path: str, params: dict, network: NetworkConfig, meta: dict | None = None) -> None:
    """Write `params` (and what rebuilds the networks) to `path` with flax's msgpack serialisation (not pickle)."""
    payload = {
        "format": FORMAT,
        "network": {k: list(v) if isinstance(v, tuple) else v for k, v in network.to_dict().items()},
        "meta": dict(meta or {}),
        "params": jax.tree.map(np.asarray, jax.device_get(params)),
    }
    with open(path, "wb") as f:
        f.write(flax.serialization.msgpack_serialize(payload))


def load(path: str) -> tuple[Callable, dict, dict]:
    """Read a file written by `save`: (make_policy, params, meta)."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        payload = flax.serialization.msgpack_restore(raw)
    except Exception as e:  # msgpack raises its own exception types on truncated or foreign bytes
        raise ValueError(f"{path}: not a mjx_lite PPO parameter file (unreadable: {type(e).__name__}: {e})") from e
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ValueError(f"{path}: not a mjx_lite PPO parameter file (expected format {FORMAT!r})")
    try:
        network = NetworkConfig.from_dict(payload["network"])
        params = jax.tree.map(jp.asarray, payload["params"])
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path}: a damaged mjx_lite PPO parameter file ({type(e).__name__}: {e})") from e
    return make_policy_fn(network), params, payload.get("meta", {})
