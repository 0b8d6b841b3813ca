"""Name lookups: ids of named objects, qpos/qvel slices of joints, sensor data by name (mj_name2id and friends).

All lookups read the static part of the Model (`m.names`, the integer address tables), so they are host
functions returning Python ints and slices: call them once (e.g. in an environment's `__init__`) and index the
traced arrays with the result, also under `jit` and `vmap`. The `joint_qpos`, `joint_qvel` and `sensor_data`
helpers index the last axis, so they work on a single Data and on a batched one (leading batch axes).

    hinge = names.joint_id(m, "hinge")
    sl = names.qpos_slice(m, "hinge")               # slice(1, 2)
    angle = d.qpos[..., sl]                         # (..., 1)
    tip = names.sensor_data(m, d, "tip_pos")        # (..., 3)

An unknown name raises a `KeyError` naming the closest names of that kind (difflib) and listing them all.
"""

from __future__ import annotations

import difflib

import jax
import numpy as np

from mjx_lite.types import Data, JointType, Model, ObjType

__all__ = [
    "actuator_id",
    "body_id",
    "geom_id",
    "joint_id",
    "joint_qpos",
    "joint_qvel",
    "name2id",
    "qpos_slice",
    "qvel_slice",
    "sensor_data",
    "sensor_id",
    "sensor_slice",
    "site_id",
]

# ObjType -> the key of `m.names`
_KIND = {
    ObjType.BODY: "body", ObjType.XBODY: "body", ObjType.JOINT: "joint", ObjType.GEOM: "geom", ObjType.SITE: "site",
    ObjType.CAMERA: "camera", ObjType.LIGHT: "light", ObjType.MESH: "mesh", ObjType.HFIELD: "hfield",
    ObjType.PAIR: "pair", ObjType.EXCLUDE: "exclude", ObjType.EQUALITY: "equality", ObjType.TENDON: "tendon",
    ObjType.ACTUATOR: "actuator", ObjType.SENSOR: "sensor", ObjType.KEY: "key", ObjType.SKIN: "skin",
}  # fmt: skip


def name2id(m: Model, kind: str | ObjType, name: str) -> int:
    """Id of the object of `kind` ("body", "joint", ... or an `ObjType`) named `name` (mj_name2id).

    Raises KeyError naming the kinds or the names of that kind when there is no such object.
    """
    key = _KIND.get(kind) if isinstance(kind, ObjType) else kind
    if key not in m.names:
        raise KeyError(f"unknown object kind {kind!r}; kinds with names: {', '.join(sorted(m.names))}")
    table = m.names[key]
    if not isinstance(name, str) or not name:
        raise KeyError(f"{key} name must be a non-empty string, not {name!r}")
    try:
        return table.index(name)
    except ValueError:
        named = [n for n in table if n]
        listed = ", ".join(repr(n) for n in named) if named else "none are named"
        close = difflib.get_close_matches(name, named, n=3)
        hint = f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""
        raise KeyError(f"no {key} named {name!r} in this model{hint}; {key} names: {listed}") from None


def body_id(m: Model, name: str) -> int:
    """Id of the body `name` (index into `d.xpos`, `m.body_mass`, ...)."""
    return name2id(m, "body", name)


def joint_id(m: Model, name: str) -> int:
    """Id of the joint `name`."""
    return name2id(m, "joint", name)


def geom_id(m: Model, name: str) -> int:
    """Id of the geom `name`."""
    return name2id(m, "geom", name)


def site_id(m: Model, name: str) -> int:
    """Id of the site `name` (index into `d.site_xpos`, `d.site_xmat`)."""
    return name2id(m, "site", name)


def sensor_id(m: Model, name: str) -> int:
    """Id of the sensor `name`."""
    return name2id(m, "sensor", name)


def actuator_id(m: Model, name: str) -> int:
    """Id of the actuator `name` (index into `d.ctrl`, `d.actuator_force`)."""
    return name2id(m, "actuator", name)


def _joint(m: Model, joint: str | int) -> int:
    j = joint_id(m, joint) if isinstance(joint, str) else int(joint)
    if not 0 <= j < m.njnt:
        raise IndexError(f"joint id {j} out of range: the model has {m.njnt} joints")
    return j


def qpos_slice(m: Model, joint: str | int) -> slice:
    """Slice of `d.qpos` holding joint `joint` (name or id): width 7 free, 4 ball, 1 slide/hinge."""
    j = _joint(m, joint)
    adr = int(np.asarray(m.jnt_qposadr)[j])
    return slice(adr, adr + JointType(int(np.asarray(m.jnt_type)[j])).qpos_width())


def qvel_slice(m: Model, joint: str | int) -> slice:
    """Slice of `d.qvel` (and qacc, qfrc_*) of joint `joint`: width 6 free, 3 ball, 1 slide/hinge."""
    j = _joint(m, joint)
    adr = int(np.asarray(m.jnt_dofadr)[j])
    return slice(adr, adr + JointType(int(np.asarray(m.jnt_type)[j])).dof_width())


def joint_qpos(m: Model, d: Data, joint: str | int) -> jax.Array:
    """qpos of `joint`: (..., width) for Data with any leading batch axes."""
    return d.qpos[..., qpos_slice(m, joint)]


def joint_qvel(m: Model, d: Data, joint: str | int) -> jax.Array:
    """qvel of `joint`: (..., width)."""
    return d.qvel[..., qvel_slice(m, joint)]


def sensor_slice(m: Model, sensor: str | int) -> slice:
    """Slice of `d.sensordata` written by sensor `sensor` (name or id)."""
    s = sensor_id(m, sensor) if isinstance(sensor, str) else int(sensor)
    if not 0 <= s < m.nsensor:
        raise IndexError(f"sensor id {s} out of range: the model has {m.nsensor} sensors")
    adr = int(np.asarray(m.sensor_adr)[s])
    return slice(adr, adr + int(np.asarray(m.sensor_dim)[s]))


def sensor_data(m: Model, d: Data, sensor: str | int) -> jax.Array:
    """Values of sensor `sensor`: (..., sensor_dim)."""
    return d.sensordata[..., sensor_slice(m, sensor)]
