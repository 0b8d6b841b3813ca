"""`State` and `Env`: the contract every environment (bundled task or user subclass) follows.

An `Env` holds its `Model`; `reset(rng) -> State` and `step(state, action) -> State` are pure JAX functions of
one environment (no batch axis): `jit`, `vmap` and `grad` go through them, and `step` never branches in Python
on a traced value. Batching, episode length, action repeat and auto-reset are added by
`mjx_lite.envs.wrap_for_training`.

Actions live in [-1, 1]^action_size; `Env.ctrl_from_action` maps them affinely onto each actuator's
`ctrlrange` (actuators without a limited ctrlrange get the action itself).

Subclassing (see docs/rl.md):

    class Hold(envs.Env):
        def __init__(self):
            super().__init__(mjl.load_mjcf("pendulum"), n_frames=2)
            self._hinge = names.qpos_slice(self.model, "hinge")

        def reset(self, rng):
            qpos = self.model.qpos0 + 0.1 * jax.random.normal(rng, (self.model.nq,))
            data = self.init_data(qpos=qpos)
            return envs.State(data, self._obs(data), *self.zeros(2), metrics={}, info={})

        def step(self, state, action):
            data = self.physics_step(state.data, action)
            reward = envs.tolerance(data.qpos[self._hinge][0], bounds=(-0.1, 0.1), margin=1.0)
            return state.replace(data=data, obs=self._obs(data), reward=reward)

Anything computed from the model's *float* fields must be read from `self.model` inside `reset`/`step` (not
cached in `__init__`), so that domain randomisation, which swaps the model per environment with `with_model`,
reaches it. Host values (ids, slices, sizes) can be cached.
"""

from __future__ import annotations

import abc
import copy
from typing import Any

import flax.struct
import jax
import jax.numpy as jp
import numpy as np

import mjx_lite
from mjx_lite.envs.randomize import scale_randomizer
from mjx_lite.pipeline.forward import fwd_position
from mjx_lite.types import Data, Model, Warning

__all__ = ["DEFAULT_RANDOMIZE", "DIVERGENCE_WARNINGS", "Env", "State", "diverged"]

# the default domain randomisation ranges of `Env.randomizer` (factors, one per row of each field)
DEFAULT_RANDOMIZE = {"geom_friction": (0.8, 1.2), "body_mass": (0.9, 1.1), "dof_damping": (0.8, 1.2)}

# the warnings counted when the physics resets an environment for divergence (see pipeline/integrate.py)
DIVERGENCE_WARNINGS = (Warning.BADQPOS, Warning.BADQVEL, Warning.BADQACC)


@flax.struct.dataclass
class State:
    """One environment's state (a pytree; batched states have a leading axis on every leaf).

    Attributes:
      data: the simulation `Data`.
      obs: (observation_size,) observation, the model's float dtype.
      reward: () reward of the last step (0 after reset).
      done: () 1.0 where the episode ended at the last step (termination, truncation, divergence), else 0.0;
        the float dtype of `reward` (it multiplies discounts).
      metrics: dict of () floats the task reports every step (reward terms); same keys after reset and step.
      info: dict of extra per-environment values; the training wrapper adds its bookkeeping here
        (see `mjx_lite.envs.wrappers`).
    """

    data: Data
    obs: jax.Array
    reward: jax.Array
    done: jax.Array
    metrics: dict[str, jax.Array] = flax.struct.field(default_factory=dict)
    info: dict[str, Any] = flax.struct.field(default_factory=dict)


def _warning_total(d: Data) -> jax.Array:
    return sum(d.warning_number[..., int(w)] for w in DIVERGENCE_WARNINGS)


def diverged(before: Data, after: Data) -> jax.Array:
    """() bool: the physics reset the environment for divergence between `before` and `after`.

    mjx_lite's step resets a diverged environment to the model's reset state (as mj_step) and counts it in
    `warning_number[BADQPOS | BADQVEL | BADQACC]`: the counters grew.
    """
    return _warning_total(after) > _warning_total(before)


# jitted per environment object (static, hashed by identity) with the model as a traced argument
_jit_reset = jax.jit(lambda env, model, rng: env.with_model(model).reset(rng), static_argnums=0)
_jit_step = jax.jit(lambda env, model, state, action: env.with_model(model).step(state, action), static_argnums=0)


class Env(abc.ABC):
    """Base class of environments; subclasses implement `reset` and `step` (see the module docstring).

    Args:
      model: the compiled Model.
      n_frames: physics steps per `step` (the control period is `n_frames * model.opt.timestep`).

    `RANDOMIZE` (class attribute): the float fields and factor ranges of the task's domain randomisation hook
    `randomizer()`.
    """

    RANDOMIZE: dict[str, tuple[float, float]] = DEFAULT_RANDOMIZE

    def __init__(self, model: Model, n_frames: int = 1):
        if not isinstance(model, Model):
            raise TypeError(f"Env needs a mjx_lite.Model, not {type(model).__name__}")
        if int(n_frames) < 1:
            raise ValueError(f"n_frames must be >= 1, not {n_frames}")
        self._model = model
        self._n_frames = int(n_frames)
        # the shortest decimal of the stored (float32 or float64) timestep: 0.01, not 0.009999999776
        self._dt = float(str(np.asarray(model.opt.timestep)[()])) * self._n_frames
        self._obs_size: int | None = None
        self._origin: Env | None = None  # the env a `with_model` copy was made from (the key of the jit caches)

    # ---- properties ----------------------------------------------------------------------------------------
    @property
    def model(self) -> Model:
        """The Model (a batched one inside domain-randomised training, see `with_model`)."""
        return self._model

    @property
    def n_frames(self) -> int:
        return self._n_frames

    @property
    def dt(self) -> float:
        """Control period in seconds: n_frames * timestep (of the model the env was built with)."""
        return self._dt

    @property
    def action_size(self) -> int:
        """Length of an action (default: the number of actuators, `model.nu`)."""
        return self._model.nu

    @property
    def observation_size(self) -> int:
        """Length of an observation (from the shape of `reset`'s output, traced once without running)."""
        if self._obs_size is None:
            shape = jax.eval_shape(self.reset, jax.random.PRNGKey(0)).obs.shape
            if len(shape) != 1:
                raise ValueError(f"{type(self).__name__}.reset must return a 1-D observation, got shape {shape}")
            self._obs_size = int(shape[0])
        return self._obs_size

    @property
    def name(self) -> str:
        return getattr(self, "_name", type(self).__name__)

    def with_model(self, model: Model) -> Env:
        """A shallow copy of this environment that simulates `model` (same static structure, other floats)."""
        env = copy.copy(self)
        env._model = model
        env._origin = self._origin or self
        return env

    def jit_reset(self, rng: jax.Array) -> State:
        """`reset`, jitted; the model is an argument, so `with_model` copies share the compilation."""
        return _jit_reset(self._origin or self, self._model, rng)

    def jit_step(self, state: State, action: jax.Array) -> State:
        """`step`, jitted (shared like `jit_reset`); a float action is cast to the observation dtype first."""
        action = jp.asarray(action)
        if jp.issubdtype(action.dtype, jp.floating):
            action = jp.asarray(action, dtype=state.obs.dtype)
        return _jit_step(self._origin or self, self._model, state, action)

    def randomizer(self, ranges: dict[str, tuple[float, float]] | None = None, per: str = "object"):
        """The task's domain randomisation hook: `randomize(model, rng) -> model` scaling the fields of `ranges`
        (default: the task's `RANDOMIZE`) by uniform factors (`envs.scale_randomizer`); pass it as `randomize=`
        to `wrap_for_training` or `ppo.train`."""
        return scale_randomizer(self.RANDOMIZE if ranges is None else ranges, per=per)

    # ---- the contract ---------------------------------------------------------------------------------------
    @abc.abstractmethod
    def reset(self, rng: jax.Array) -> State:
        """A fresh initial state drawn with `rng` (a PRNG key)."""

    @abc.abstractmethod
    def step(self, state: State, action: jax.Array) -> State:
        """Advance one control period with `action`: (action_size,) in [-1, 1]."""

    # ---- helpers for subclasses -----------------------------------------------------------------------------
    def float_dtype(self):
        """The model's float dtype (float32, or float64 with jax_enable_x64)."""
        return self._model.opt.timestep.dtype

    def zeros(self, n: int = 1) -> tuple[jax.Array, ...]:
        """`n` scalar zeros of the float dtype (reward, done after a reset)."""
        return tuple(jp.zeros((), self.float_dtype()) for _ in range(n))

    def check_action(self, action: jax.Array) -> jax.Array:
        """`action` as a float array of shape (action_size,); a wrong shape is a ValueError at trace time."""
        action = jp.asarray(action)
        if action.shape != (self.action_size,):
            hint = " (a batch? use jax.vmap or envs.wrap_for_training)" if action.ndim > 1 else ""
            raise ValueError(
                f"{self.name}: action must have shape ({self.action_size},) (one value per actuator), "
                f"got {action.shape}{hint}"
            )
        if not jp.issubdtype(action.dtype, jp.floating):
            raise TypeError(f"{self.name}: action must be a float array, got dtype {action.dtype}")
        return action.astype(self.float_dtype())

    def ctrl_from_action(self, action: jax.Array) -> jax.Array:
        """Map an action in [-1, 1] onto `ctrlrange` (affine); unlimited actuators take the action as is.

        Actions outside [-1, 1] are clipped.
        """
        m = self._model
        a = jp.clip(self.check_action(action), -1.0, 1.0)
        lo, hi = m.actuator_ctrlrange[:, 0], m.actuator_ctrlrange[:, 1]
        mapped = lo + 0.5 * (a + 1.0) * (hi - lo)
        limited = jp.asarray(np.asarray(m.actuator_ctrllimited, bool))
        return jp.where(limited, mapped, a)

    def init_data(self, qpos: jax.Array | None = None, qvel: jax.Array | None = None,
                  mocap_pos: jax.Array | None = None) -> Data:  # fmt: skip
        """Data at `qpos`/`qvel` (default qpos0 and zero), with `forward` run (observations can be read)."""
        m = self._model
        d = mjx_lite.make_data(m)
        f = d.qpos.dtype
        changes = {}
        if qpos is not None:
            changes["qpos"] = jp.asarray(qpos, f).reshape(m.nq)
        if qvel is not None:
            changes["qvel"] = jp.asarray(qvel, f).reshape(m.nv)
        if mocap_pos is not None:
            changes["mocap_pos"] = jp.asarray(mocap_pos, f).reshape(m.nmocap, 3)
        d = d.replace(**changes)
        return mjx_lite.forward(m, d)

    def position_data(self, qpos: jax.Array) -> Data:
        """Data at `qpos` (zero qvel) after the position stage only (mj_fwdPosition: poses, contacts, constraint
        rows; no velocities, accelerations or constraint solve): what a reset needs to test candidate poses for
        contacts, traced and compiled at a fraction of `init_data`'s cost."""
        m = self._model
        d = mjx_lite.make_data(m)
        return fwd_position(m, d.replace(qpos=jp.asarray(qpos, d.qpos.dtype).reshape(m.nq)))

    def physics_step(self, data: Data, action: jax.Array) -> Data:
        """Set `ctrl` from `action` and run `n_frames` physics steps."""
        d = data.replace(ctrl=self.ctrl_from_action(action))
        m = self._model
        if self._n_frames == 1:
            return mjx_lite.step(m, d)
        return jax.lax.fori_loop(0, self._n_frames, lambda _, dd: mjx_lite.step(m, dd), d)
