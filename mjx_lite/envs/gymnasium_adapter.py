"""Gymnasium adapters (numpy in and out) for CleanRL / Stable-Baselines style code. Needs `gymnasium` (optional).

    vec = envs.to_gymnasium(envs.make("cartpole_balance"), num_envs=16)   # gymnasium.vector.VectorEnv
    obs, info = vec.reset(seed=0)                                         # (16, 5) float32
    obs, reward, terminated, truncated, info = vec.step(actions)          # actions (16, 1) in [-1, 1]

    one = envs.to_gymnasium_env(envs.make("cartpole_balance"))            # gymnasium.Env (passes check_env)

The vector env runs the training wrapper (`wrap_for_training`, jitted) underneath; the single env steps the
jitted `env.jit_step` and applies the same rules on the host. Episodes are truncated at `episode_length`
(environment steps), `action_repeat` applies, and a diverged or NaN-action environment ends its episode
(`terminated`, with `info["diverged"]` / `info["nan_action"]`, reward 0). The vector env auto-resets in the same
step (gymnasium's `AutoresetMode.SAME_STEP`): where an episode ended, the returned observation is the next
episode's first one and `info["final_obs"]` (masked by `info["_final_obs"]`) holds the last one. The single env
does not auto-reset: after `terminated or truncated`, call `reset()`. Observations are float32; actions are cast to
the model's float dtype. Seeds: `reset(seed=s)` draws the keys from `s`; `reset()` without a seed continues from
the last seeded generator.
"""

from __future__ import annotations

import jax
import numpy as np

from mjx_lite.envs.base import Env, _warning_total
from mjx_lite.envs.wrappers import wrap_for_training

__all__ = ["to_gymnasium", "to_gymnasium_env"]


def _gymnasium():
    try:
        import gymnasium
    except ImportError as e:  # pragma: no cover - optional extra
        raise ImportError("the gymnasium adapter needs gymnasium: pip install 'gymnasium>=1.0'") from e
    return gymnasium


class _Core:
    """Jitted batched reset/step of a training env, numpy in and out."""

    def __init__(self, env: Env, num_envs: int, episode_length: int, action_repeat: int):
        self.env = env
        self.num_envs = int(num_envs)
        self.train_env = wrap_for_training(env, episode_length=episode_length, action_repeat=action_repeat)
        self.state = None
        self.dtype = env.model.opt.timestep.dtype

    def reset(self, np_random: np.random.Generator) -> np.ndarray:
        seed = int(np_random.integers(0, 2**31 - 1))
        keys = jax.random.split(jax.random.PRNGKey(seed), self.num_envs)
        self.state = self.train_env.jit_reset(keys)
        return np.array(self.state.obs, dtype=np.float32)

    def step(self, actions) -> dict:
        if self.state is None:
            raise RuntimeError("call reset() before step()")
        a = np.asarray(actions, dtype=self.dtype)
        want = (self.num_envs, self.env.action_size)
        if a.shape != want:
            a = a.reshape(want) if a.size == np.prod(want) else a
        if a.shape != want:
            raise ValueError(f"actions must have shape {want}, got {np.shape(actions)}")
        self.state = self.train_env.jit_step(self.state, a)
        s = jax.device_get(self.state)
        trunc = np.asarray(s.info["truncation"]) > 0
        done = np.asarray(s.done) > 0
        return {
            "obs": np.array(s.obs, dtype=np.float32),
            "reward": np.array(s.reward, dtype=np.float64),
            "terminated": done & ~trunc,
            "truncated": trunc,
            "final_obs": np.array(s.info["final_obs"], dtype=np.float32),
            "done": done,
            "diverged": np.asarray(s.info["diverged"]) > 0,
            "nan_action": np.asarray(s.info["nan_action"]) > 0,
            "episode_return": np.array(s.info["episode_metrics"]["return"], dtype=np.float64),
            "episode_length": np.array(s.info["episode_metrics"]["length"], dtype=np.int64),
        }


def to_gymnasium(env: Env, num_envs: int, episode_length: int = 1000, action_repeat: int = 1):
    """A `gymnasium.vector.VectorEnv` of `num_envs` copies of `env` (see the module docstring)."""
    gym = _gymnasium()
    from gymnasium.vector import AutoresetMode, VectorEnv
    from gymnasium.vector.utils import batch_space

    class MjxLiteVectorEnv(VectorEnv):
        metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

        def __init__(self):
            self._core = _Core(env, num_envs, episode_length, action_repeat)
            self.num_envs = int(num_envs)
            obs_size = env.observation_size
            self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_size,), np.float32)
            self.single_action_space = gym.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
            self.action_space = batch_space(self.single_action_space, self.num_envs)

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            if seed is not None and not isinstance(seed, int):
                raise TypeError(f"seed must be an int (one key is split over the environments), got {seed!r}")
            super().reset(seed=seed)
            return self._core.reset(self.np_random), {}

        def step(self, actions):
            r = self._core.step(actions)
            ended = r["done"]
            info = {
                "final_obs": r["final_obs"], "_final_obs": ended.copy(),
                "diverged": r["diverged"], "_diverged": ended.copy(),
                "nan_action": r["nan_action"], "_nan_action": ended.copy(),
                "episode_return": r["episode_return"], "_episode_return": ended.copy(),
                "episode_length": r["episode_length"], "_episode_length": ended.copy(),
            }  # fmt: skip
            return r["obs"], r["reward"], r["terminated"], r["truncated"], info

    return MjxLiteVectorEnv()


def to_gymnasium_env(env: Env, episode_length: int = 1000, action_repeat: int = 1):
    """A single `gymnasium.Env` view of `env` (no auto-reset: call `reset()` after an episode ends)."""
    gym = _gymnasium()
    if int(episode_length) < 1 or int(action_repeat) < 1:
        raise ValueError(f"episode_length and action_repeat must be >= 1, got {episode_length}, {action_repeat}")
    dtype = env.model.opt.timestep.dtype

    class MjxLiteEnv(gym.Env):
        metadata = {"render_modes": []}

        def __init__(self):
            self.observation_space = gym.spaces.Box(-np.inf, np.inf, (env.observation_size,), np.float32)
            self.action_space = gym.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)
            self.env = env
            self.state = None

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            super().reset(seed=seed)
            key = jax.random.PRNGKey(int(self.np_random.integers(0, 2**31 - 1)))
            self.state = env.jit_reset(key)
            self._steps, self._return = 0, 0.0
            return np.array(self.state.obs, dtype=np.float32), {}

        def step(self, action):
            if self.state is None:
                raise RuntimeError("call reset() before step()")
            a = np.asarray(action, dtype=dtype)
            if a.shape != (env.action_size,):
                raise ValueError(f"action must have shape ({env.action_size},), got {np.shape(action)}")
            nan = not np.all(np.isfinite(a))
            if nan:
                a = np.zeros_like(a)
            reward, done, diverged = 0.0, False, False
            for _ in range(int(action_repeat)):
                before = int(_warning_total(self.state.data))
                self.state = env.jit_step(self.state, a)
                diverged = int(_warning_total(self.state.data)) > before
                reward += float(self.state.reward)
                done = bool(self.state.done > 0) or diverged
                if done:
                    break
            if nan or diverged:
                reward = 0.0
            self._steps += int(action_repeat)
            self._return += reward
            terminated = done or nan
            truncated = not terminated and self._steps >= int(episode_length)
            info = {"diverged": diverged, "nan_action": nan}
            if terminated or truncated:
                info["episode_return"] = self._return
                info["episode_length"] = self._steps
            return np.array(self.state.obs, dtype=np.float32), reward, terminated, truncated, info

    return MjxLiteEnv()
