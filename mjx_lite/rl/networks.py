"""Networks for PPO: flax MLPs, a tanh-squashed Gaussian policy, a value function, running observation statistics.

Parameters are plain nested dicts of arrays:

    params = {"normalizer": {"count": (), "mean": (obs,), "m2": (obs,)},
              "policy": <flax params of the policy MLP>, "value": <flax params of the value MLP>}

The policy MLP outputs (loc, raw_scale) per action dimension; scale = softplus(raw_scale) + MIN_STD. An action is
tanh(u) with u ~ N(loc, scale); log-probabilities include the tanh Jacobian, and the entropy is the Gaussian's
plus the expected log-Jacobian estimated with the sample drawn (as in Brax's NormalTanhDistribution).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jp

__all__ = ["MIN_STD", "MLP", "NetworkConfig", "init_normalizer", "normalize", "update_normalizer"]

MIN_STD = 1e-3  # lower bound of the Gaussian's scale (keeps log-probabilities finite)
STD_RANGE = (1e-6, 1e6)  # clip of the running observation std (constant features get std 1e-6, not 0)
_LOG2 = 0.6931471805599453

ACTIVATIONS = {"swish": nn.swish, "tanh": nn.tanh, "relu": nn.relu, "elu": nn.elu}


class MLP(nn.Module):
    """Dense layers of `hidden` widths with `activation`, then a linear layer of width `out`."""

    hidden: Sequence[int]
    out: int
    activation: str = "swish"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        init = nn.initializers.lecun_uniform()
        for i, width in enumerate(self.hidden):
            x = act(nn.Dense(width, kernel_init=init, name=f"hidden_{i}")(x))
        return nn.Dense(self.out, kernel_init=init, name="out")(x)


@dataclasses.dataclass(frozen=True)
class NetworkConfig:
    """Everything needed to rebuild the networks from saved parameters."""

    observation_size: int
    action_size: int
    policy_hidden: tuple[int, ...] = (32, 32, 32, 32)
    value_hidden: tuple[int, ...] = (256, 256, 256, 256, 256)
    activation: str = "swish"
    normalize_observations: bool = True

    def __post_init__(self):
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {self.activation!r}; one of {sorted(ACTIVATIONS)}")
        object.__setattr__(self, "policy_hidden", tuple(int(h) for h in self.policy_hidden))
        object.__setattr__(self, "value_hidden", tuple(int(h) for h in self.value_hidden))

    @property
    def policy_net(self) -> MLP:
        return MLP(self.policy_hidden, 2 * self.action_size, self.activation)

    @property
    def value_net(self) -> MLP:
        return MLP(self.value_hidden, 1, self.activation)

    def init(self, rng: jax.Array) -> dict:
        """Fresh parameters (normalizer at count 0)."""
        kp, kv = jax.random.split(rng)
        x = jp.zeros((1, self.observation_size), jp.float32)
        return {
            "normalizer": init_normalizer(self.observation_size),
            "policy": self.policy_net.init(kp, x)["params"],
            "value": self.value_net.init(kv, x)["params"],
        }

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> NetworkConfig:
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in d.items()})


# ---- running observation statistics -------------------------------------------------------------------------


def init_normalizer(size: int) -> dict:
    return {"count": jp.zeros((), jp.float32), "mean": jp.zeros((size,), jp.float32),
            "m2": jp.zeros((size,), jp.float32)}  # fmt: skip


def update_normalizer(stats: dict, obs: jax.Array) -> dict:
    """Merge a batch of observations (..., size) into the running mean / sum of squared deviations (Chan et al.)."""
    x = obs.reshape(-1, obs.shape[-1]).astype(jp.float32)
    n_b = jp.asarray(x.shape[0], jp.float32)
    mean_b = x.mean(0)
    m2_b = jp.sum((x - mean_b) ** 2, axis=0)
    n_a = stats["count"]
    n = n_a + n_b
    delta = mean_b - stats["mean"]
    mean = stats["mean"] + delta * (n_b / n)
    m2 = stats["m2"] + m2_b + delta**2 * (n_a * n_b / n)
    return {"count": n, "mean": mean, "m2": m2}


def normalize(stats: dict, obs: jax.Array) -> jax.Array:
    """(obs - mean) / std with the running statistics (identity before any update)."""
    count = stats["count"]
    std = jp.sqrt(stats["m2"] / jp.maximum(count, 1.0))
    std = jp.where(count > 0, jp.clip(std, *STD_RANGE), 1.0)
    return ((obs - stats["mean"]) / std).astype(obs.dtype)


# ---- the tanh-Gaussian policy ---------------------------------------------------------------------------------


def _log_det_tanh(u: jax.Array) -> jax.Array:
    """log |d tanh(u) / du| = log(1 - tanh(u)^2), computed stably, summed over the last axis."""
    return jp.sum(2.0 * (_LOG2 - u - jax.nn.softplus(-2.0 * u)), axis=-1)


def gaussian_params(out: jax.Array) -> tuple[jax.Array, jax.Array]:
    loc, raw = jp.split(out, 2, axis=-1)
    return loc, jax.nn.softplus(raw) + MIN_STD


def log_prob(loc: jax.Array, scale: jax.Array, u: jax.Array) -> jax.Array:
    """log-density of the squashed action tanh(u) given the pre-tanh sample u: (...,)."""
    z = (u - loc) / scale
    gauss = jp.sum(-0.5 * z * z - jp.log(scale) - 0.5 * jp.log(2 * jp.pi), axis=-1)
    return gauss - _log_det_tanh(u)


def entropy(loc: jax.Array, scale: jax.Array, rng: jax.Array) -> jax.Array:
    """Entropy of the squashed Gaussian, one-sample estimate of its Jacobian term: (...,)."""
    u = loc + scale * jax.random.normal(rng, loc.shape, loc.dtype)
    gauss = jp.sum(0.5 + 0.5 * jp.log(2 * jp.pi) + jp.log(scale), axis=-1)
    return gauss + _log_det_tanh(u)
