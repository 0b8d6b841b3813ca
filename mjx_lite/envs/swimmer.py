"""`swimmer_swimmer6` on dm_control's swimmer (dm_control.suite.swimmer.swimmer6): fluid forces (density 3000),
no contacts. dm_control builds the n-link model from `swimmer.xml` in code; `swimmer_model(n)` does the same
here (a chain of n - 1 segments, each with a hinge limited to +-360/n degrees, a motor, a velocimeter and a gyro).

Observation (25 for 6 links): the n - 1 joint angles, the nose-to-target vector in the head's frame (x, y: 2),
forward and sideways velocity and yaw rate of the head and every segment (velocimeter x, y and gyro z: 3n).
Control period 0.03 s (15 physics steps of 2 ms).
Reward: tolerance(|nose to target|, bounds=(0, target radius), margin=5 target radius, long_tail).
Starts with joints drawn as dm_control (the unlimited root hinge U(-pi, pi), the others uniform in range, root
position kept), at rest; the target at x, y U(-2, 2) (U(-0.3, 0.3) with probability 0.2), in `info["target"]`
(x, y; dm_control moves the target geom of the model instead); no termination.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import jax
import jax.numpy as jp

from mjx_lite import names
from mjx_lite.envs import suite
from mjx_lite.envs.base import State
from mjx_lite.envs.rewards import tolerance
from mjx_lite.types import Data, Model

__all__ = ["Swimmer", "swimmer_model"]

CLOSE_TARGET = 0.2  # probability of a target within 0.3 m


def swimmer_model(n_links: int = 6) -> Model:
    """dm_control's n-link swimmer (n >= 3), built from its `swimmer.xml` as dm_control's `_make_model` builds it."""
    if int(n_links) < 3:
        raise ValueError(f"the swimmer needs at least 3 links, not {n_links}")
    n = int(n_links)

    def edit(root: ET.Element) -> None:
        parent = root.find("./worldbody/body")
        actuator, sensor = ET.SubElement(root, "actuator"), ET.SubElement(root, "sensor")
        for i in range(n - 1):
            body = ET.SubElement(parent, "body", name=f"segment_{i}", pos="0 .1 0")
            ET.SubElement(body, "geom", {"class": "visual", "name": f"visual_{i}"})
            ET.SubElement(body, "geom", {"class": "inertial", "name": f"inertial_{i}"})
            ET.SubElement(body, "site", name=f"site_{i}")
            ET.SubElement(body, "joint", name=f"joint_{i}", range=f"{-360.0 / n} {360.0 / n}")
            ET.SubElement(actuator, "motor", name=f"motor_{i}", joint=f"joint_{i}")
            ET.SubElement(sensor, "velocimeter", name=f"velocimeter_{i}", site=f"site_{i}")
            ET.SubElement(sensor, "gyro", name=f"gyro_{i}", site=f"site_{i}")
            parent = body
        for cam in root.findall("./worldbody/body/camera"):  # tracking cameras move out with the length
            if cam.get("mode") == "trackcom":
                cam.set("pos", " ".join(str(float(x) * n / 6.0) for x in cam.get("pos").split()))

    return suite.load_string("swimmer", edit)


class Swimmer(suite.SuiteEnv):
    """Swim the nose to a random target (see the module docstring).

    Args:
      n_links: links of the swimmer (6: dm_control's swimmer6).
      model: a replacement model with the same names (default: `swimmer_model(n_links)`).
    """

    RANDOMIZE = {"body_mass": (0.9, 1.1), "dof_damping": (0.8, 1.2), "opt.density": (0.9, 1.1)}

    def __init__(self, n_links: int = 6, model: Model | None = None):
        super().__init__(swimmer_model(n_links) if model is None else model, n_frames=15)
        m = self.model
        self._nose, self._target, self._head = names.geom_id(m, "nose"), names.geom_id(m, "target"), names.body_id(
            m, "head")
        self._vel = names.sensor_slice(m, "head_vel").start  # head velocimeter, gyro, then each segment's

    def _to_target(self, d: Data, info: dict | None) -> jax.Array:
        target = d.geom_xpos[self._target] if not info else jp.concatenate([info["target"],
                                                                            d.geom_xpos[self._target, 2:]])
        return ((target - d.geom_xpos[self._nose]) @ d.xmat[self._head])[:2]

    def observation(self, d: Data, info: dict | None = None) -> jax.Array:
        vel = d.sensordata[self._vel:].reshape(-1, 6)[:, jp.asarray([0, 1, 5])]
        return jp.concatenate([d.qpos[3:], self._to_target(d, info), vel.ravel()])

    def reward(self, d: Data, info: dict | None = None) -> tuple[jax.Array, dict]:
        dist = jp.sqrt(jp.sum(self._to_target(d, info) ** 2) + 1e-30)
        size = self.model.geom_size[self._target, 0]
        # tolerance(dist, (0, size), margin=5 size, long_tail), in units of the (model float) size
        near = tolerance(jp.maximum(dist / size - 1.0, 0.0), margin=5.0, sigmoid="long_tail")
        return near, {"distance": dist}

    def reset(self, rng: jax.Array) -> State:
        m, f = self.model, self.float_dtype()
        k1, k2, k3 = jax.random.split(rng, 3)
        box = jp.where(jax.random.uniform(k2, (), f) < CLOSE_TARGET, 0.3, 2.0).astype(f)
        target = box * jax.random.uniform(k3, (2,), f, -1.0, 1.0)
        return self.start(self.init_data(qpos=suite.random_joints(m, m.qpos0, k1)), {"target": target})
