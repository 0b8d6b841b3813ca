"""`humanoid_stand`, `humanoid_walk`, `humanoid_run` on dm_control's `humanoid.xml` (dm_control.suite.humanoid).

Observation (67): joint angles (qpos without the free root: 21), head height (1), hands and feet relative to the
torso in the torso frame (12), the torso frame's z row (xmat[torso, 2, :]: 3), the torso subtree linear velocity
(3), qvel (27). Control period 0.025 s (5 physics steps of 5 ms).
Reward: small_control * standing * upright * move with standing = tolerance(head height, bounds=(1.4, inf),
margin=0.35), upright = tolerance(torso z-z, bounds=(0.9, inf), margin=1.9, linear, value_at_margin=0),
small_control = (4 + mean tolerance(ctrl, margin=1, value_at_margin=0, quadratic)) / 5; stand: move = mean
tolerance(horizontal centre-of-mass velocity (x, y), margin=2); walk / run: move = (5 tolerance(|velocity xy|,
bounds=(v, inf), margin=v, linear, value_at_margin=0) + 1) / 6, v = 1 or 10 m/s.
Starts with joints drawn as dm_control (limited hinges uniform in range, the root's orientation a normalised
U(0, 1)^4 quaternion, the root position kept), the first of `CANDIDATES` draws without a contact (dm_control
redraws until none), at rest; no termination. (The bundled humanoid's task is `humanoid_bundled_stand`.)
"""

from __future__ import annotations

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["CANDIDATES", "SPEEDS", "SuiteHumanoid"]

STAND_HEIGHT = 1.4
SPEEDS = {"stand": 0.0, "walk": 1.0, "run": 10.0}
CANDIDATES = 8  # initial poses drawn at reset (the first without contact is kept)


class SuiteHumanoid(suite.SuiteEnv):
    """Stand (`move_speed=0`), walk (1 m/s) or run (10 m/s) (see the module docstring)."""

    def __init__(self, move_speed: float = 0.0, model: Model | None = None):
        super().__init__(suite.load("humanoid") if model is None else model, n_frames=5)
        m = self.model
        self._move_speed = float(move_speed)
        self._torso, self._head = names.body_id(m, "torso"), names.body_id(m, "head")
        self._limbs = [names.body_id(m, f"{side}_{limb}") for side in ("left", "right") for limb in ("hand", "foot")]
        self._com_vel = names.sensor_slice(m, "torso_subtreelinvel")

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        frame = d.xmat[self._torso]
        limbs = (d.xpos[jp.asarray(self._limbs)] - d.xpos[self._torso]) @ frame
        return jp.concatenate([d.qpos[7:], d.xpos[self._head, 2:3], limbs.ravel(), frame[2],
                               d.sensordata[self._com_vel], d.qvel])  # fmt: skip

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        head = d.xpos[self._head, 2]
        standing = tolerance(head, bounds=(STAND_HEIGHT, float("inf")), margin=STAND_HEIGHT / 4)
        upright = tolerance(d.xmat[self._torso, 2, 2], bounds=(0.9, float("inf")), sigmoid="linear", margin=1.9,
                            value_at_margin=0.0)  # fmt: skip
        control = tolerance(d.ctrl, margin=1.0, value_at_margin=0.0, sigmoid="quadratic").mean()
        small_control = (4.0 + control) / 5.0
        vxy = d.sensordata[self._com_vel][:2]
        if self._move_speed == 0:
            move = tolerance(vxy, margin=2.0).mean()
        else:
            speed = jp.sqrt(jp.sum(vxy**2) + 1e-30)
            move = tolerance(speed, bounds=(self._move_speed, float("inf")), margin=self._move_speed,
                             value_at_margin=0.0, sigmoid="linear")  # fmt: skip
            move = (5.0 * move + 1.0) / 6.0
        metrics = {"standing": standing, "upright": upright, "small_control": small_control, "move": move}
        return small_control * standing * upright * move, metrics

    def reset(self, rng: jax.Array) -> State:
        m = self.model

        def draw(key):
            return suite.random_joints(m, m.qpos0, key), jp.zeros(m.nv, self.float_dtype()), ()

        data, _ = suite.collision_free(self, draw, rng, CANDIDATES)
        return self.start(data)
