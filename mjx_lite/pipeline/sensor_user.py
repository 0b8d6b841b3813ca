"""User sensors (`<sensor><user .../>`): their values come from `m.config.sensor_user` (MuJoCo's mjcb_sensor).

MuJoCo clears a user sensor's slots at its stage, calls the global callback `mjcb_sensor(m, d, stage)` if one is set
and applies the sensor's cutoff. Here the callback is a field of the Model's configuration (`Config.sensor_user`, a
pure JAX function `(m, d, sensor_id) -> (dim,)`), called once per user sensor at its stage; without one the sensor
reads zeros, as MuJoCo without a callback. The cutoff is applied by the caller (`sensor._values`) as for every sensor.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import Data, Model


def values(m: Model, d: Data, i: int) -> jax.Array:
    """Values (dim,) of user sensor `i` (static id): `m.config.sensor_user(m, d, i)`, zeros without a callback."""
    dim = int(np.asarray(m.sensor_dim)[i])
    fn = m.config.sensor_user
    if fn is None:
        return jp.zeros((dim,), d.sensordata.dtype)
    v = jp.asarray(fn(m, d, i), d.sensordata.dtype)
    if v.shape != (dim,) and not (dim == 1 and v.shape == ()):
        raise ValueError(f"Config.sensor_user returned shape {v.shape} for user sensor {i}, which has dim {dim}")
    return v.reshape(dim)
