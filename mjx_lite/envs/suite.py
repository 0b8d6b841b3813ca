"""Shared pieces of the DeepMind Control Suite tasks (acrobot, point_mass, ball_in_cup, cheetah, walker).

The tasks simulate dm_control's own model files (`dm_control/suite/*.xml`, found in the installed `dm-control`
package without importing it) and compute dm_control's observations and rewards in JAX. Like MJX-based suites
(and unlike dm_control, whose legacy step re-runs the position stage), a step's observation and reward read the
Data that `step` returns: kinematics and sensors of the state at the start of the last physics step.

    suite.model_path("walker")                          # .../dm_control/suite/walker.xml
    qpos = suite.random_joints(m, m.qpos0, rng)         # dm_control's randomize_limited_and_rotational_joints
"""

from __future__ import annotations

import abc
import importlib.util
import os

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, JointType, Model

__all__ = ["SuiteEnv", "load", "model_path", "random_joints", "within"]


class SuiteEnv(Env):
    """A suite task: `observation(d)` and `reward(d) -> (reward, metrics)` of the Data a step returns; `step`
    applies the action, reads both and ends the episode only where the state diverged (dm_control's suite tasks
    have fixed-length episodes)."""

    @abc.abstractmethod
    def observation(self, d: Data) -> jax.Array:
        """The task's observation of `d`."""

    @abc.abstractmethod
    def reward(self, d: Data) -> tuple[jax.Array, dict]:
        """(reward (), metrics) of `d`."""

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        reward, metrics = self.reward(data)
        done = diverged(state.data, data).astype(reward.dtype)
        return state.replace(data=data, obs=self.observation(data), reward=reward, done=done, metrics=metrics)


def model_path(domain: str) -> str:
    """Path of dm_control's suite model `domain` (e.g. "acrobot"); FileNotFoundError naming what to install."""
    spec = importlib.util.find_spec("dm_control")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the {domain} tasks simulate dm_control's suite model {domain}.xml: pip install "
                                "dm-control (only its model files are read; it is not imported)")  # fmt: skip
    path = os.path.join(list(spec.submodule_search_locations)[0], "suite", f"{domain}.xml")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"dm_control's suite model {path} is missing (dm-control installed without it?)")
    return path


def load(domain: str) -> Model:
    """The compiled suite model `domain`."""
    return mjx_lite.load_mjcf(model_path(domain))


def random_joints(m: Model, qpos: jax.Array, rng: jax.Array) -> jax.Array:
    """`qpos` with joints drawn as dm_control's `randomize_limited_and_rotational_joints`: limited hinges and
    slides uniform in their range, unlimited hinges uniform in [-pi, pi], unlimited ball joints a uniform unit
    quaternion, free joints' quaternions normalised U(0, 1)^4 (dm_control's draw), positions of free joints and
    unlimited slides unchanged. Limited ball joints are left as they are (not drawn)."""
    f = qpos.dtype
    keys = jax.random.split(rng, max(1, m.njnt))
    for j in range(m.njnt):
        t, a, limited = int(m.jnt_type[j]), int(m.jnt_qposadr[j]), bool(m.jnt_limited[j])
        if t in (int(JointType.HINGE), int(JointType.SLIDE)):
            if limited:
                lo, hi = m.jnt_range[j, 0], m.jnt_range[j, 1]
                qpos = qpos.at[a].set(jax.random.uniform(keys[j], (), f, 0.0, 1.0) * (hi - lo) + lo)
            elif t == int(JointType.HINGE):
                qpos = qpos.at[a].set(jax.random.uniform(keys[j], (), f, -np.pi, np.pi))
        elif t == int(JointType.BALL) and not limited:
            q = jax.random.normal(keys[j], (4,), f)
            qpos = qpos.at[a:a + 4].set(q / jp.linalg.norm(q))
        elif t == int(JointType.FREE):
            q = jax.random.uniform(keys[j], (4,), f)
            qpos = qpos.at[a + 3:a + 7].set(q / jp.linalg.norm(q))
    return qpos


def within(dist: jax.Array, radius: jax.Array, margin: float) -> jax.Array:
    """tolerance(dist, bounds=(0, radius), margin) (gaussian, 0.1 at the margin) for a traced `radius` (a model
    float, which domain randomisation may change): 1 within the radius, the gaussian of the distance beyond it."""
    return tolerance(jp.maximum(dist - radius, 0.0), bounds=(0.0, 0.0), margin=margin)
