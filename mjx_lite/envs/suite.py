"""Shared pieces of the DeepMind Control Suite tasks (mjx_lite.envs.__init__ lists them).

The tasks simulate dm_control's own model files (`dm_control/suite/*.xml`, found in the installed `dm-control`
package without importing it) and compute dm_control's observations and rewards in JAX. Like MJX-based suites
(and unlike dm_control, whose legacy step re-runs the position stage), a step's observation and reward read the
Data that `step` returns: kinematics and sensors of the state at the start of the last physics step.

    suite.model_path("walker")                          # .../dm_control/suite/walker.xml
    qpos = suite.random_joints(m, m.qpos0, rng)         # dm_control's randomize_limited_and_rotational_joints

What dm_control draws per episode into the *model* (a target's position: reacher, finger, fish, swimmer,
manipulator) is per-episode task state here, in `State.info` (e.g. `info["target"]`), passed to `observation` and
`reward`: the Model stays the same for every episode (and for the jitted step). Every task has a domain
randomisation hook, `env.randomizer()` (a `randomize(model, rng) -> model` for `wrap_for_training` / `ppo.train`),
scaling the task's `RANDOMIZE` fields (see `envs.scale_randomizer`).
"""

from __future__ import annotations

import abc
import importlib.util
import os
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.envs.base import Env, State, diverged
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, JointType, Model

__all__ = ["SuiteEnv", "collision_free", "load", "load_string", "model_path", "random_joints", "within"]


class SuiteEnv(Env):
    """A suite task: `observation(d, info)` and `reward(d, info) -> (reward, metrics)` of the Data a step returns
    (`info`: the task's per-episode state from `reset`, e.g. a target; {} where it has none); `step` applies the
    action, reads both and ends the episode only where the state diverged (dm_control's suite tasks have
    fixed-length episodes)."""

    @abc.abstractmethod
    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        """The task's observation of `d`."""

    @abc.abstractmethod
    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        """(reward (), metrics) of `d`."""

    def step(self, state: State, action: jax.Array) -> State:
        data = self.physics_step(state.data, action)
        reward, metrics = self.reward(data, state.info)
        done = diverged(state.data, data).astype(reward.dtype)
        obs = self.observation(data, state.info)
        return state.replace(data=data, obs=obs, reward=reward, done=done, metrics=metrics)

    def start(self, data: Data, info: dict | None = None) -> State:
        """The State an episode starts from at `data` (reward and done 0, metrics of `data`)."""
        info = {} if info is None else info
        zero = jp.zeros((), self.float_dtype())
        metrics = jax.tree.map(jp.zeros_like, self.reward(data, info)[1])
        return State(data, self.observation(data, info), zero, zero, metrics=metrics, info=info)


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


def load_string(domain: str, edit) -> Model:
    """The suite model `domain` compiled after `edit(root)` changed its XML tree (an xml.etree Element) in place;
    the model's directory stays the base of relative file names (dm_control's ./common assets)."""
    path = model_path(domain)
    root = ET.parse(path).getroot()
    edit(root)
    return mjx_lite.load_mjcf_string(ET.tostring(root, encoding="unicode"), model_dir=os.path.dirname(path))


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


def collision_free(env: Env, draw, rng: jax.Array, candidates: int):
    """(Data, aux) of the first of `candidates` initial states without an active contact (MuJoCo's ncon == 0; the
    last one where all touch): dm_control redraws until nothing touches, a fixed number of draws here.

    Args:
      env: the task (its `init_data` runs forward on each candidate).
      draw: `draw(key) -> (qpos (nq,), qvel (nv,), aux)`, one candidate (aux: any pytree, e.g. a target).
      rng: PRNG key.
      candidates: how many to draw (vmapped).
    """
    qpos, qvel, aux = jax.vmap(draw)(jax.random.split(rng, candidates))
    datas = jax.vmap(lambda q, v: env.init_data(qpos=q, qvel=v))(qpos, qvel)
    touching = jp.any(datas.contact.active, axis=-1)
    pick = jp.where(jp.any(~touching), jp.argmin(touching), candidates - 1)
    return jax.tree.map(lambda x: x[pick], (datas, aux))
