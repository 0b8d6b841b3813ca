"""Schema refinements for the sections compiled by tendon.py, equality.py, actuation.py, sensor.py and contact.py.

`schema.py` (the parser's) already lists the tendon, equality, actuator, sensor and contact elements; this
`SCHEMA` (same format: tag or "parent/tag" -> {attribute: Attr}) is merged over it and adds what it lacks.
Keyword-like attributes (sensor `data`, `reduce`, `objtype`, actuator `interp`, ...) stay strings there and
are validated by the section modules, which raise `MJCFError` naming the element, attribute and line.
(No import of schema.py here: schema.py imports this module.)
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf.spec import Attr

_S = Attr("string", 1, None)
_SENS_COMMON = {
    "name": _S,
    "noise": Attr("real", 1, 0.0),
    "cutoff": Attr("real", 1, 0.0),
    "user": Attr("real", -1, None),
    "delay": Attr("real", 1, 0.0),
    "interp": _S,
    "interval": Attr("real", (1, 2), np.zeros(2)),
    "nsample": Attr("int", 1, 0),
}

_R1 = Attr("real", 1, 0.0)
_SOLREF = np.array([0.02, 1.0])
_SOLIMP = np.array([0.9, 0.95, 0.001, 0.5, 2.0])
SCHEMA: dict[str, dict[str, Attr]] = {
    # sensors missing from schema.py
    "camprojection": {**_SENS_COMMON, "site": _S, "camera": _S},
    "sensor/tactile": {  # MuJoCo 4.0's schema: no noise
        **{k: v for k, v in _SENS_COMMON.items() if k != "noise"},
        "geom": _S,
        "mesh": _S,
    },
    "sensor/user": {  # MuJoCo 4.0's schema: no history buffer attributes (mjcb_sensor writes the values)
        **{k: _SENS_COMMON[k] for k in ("name", "noise", "cutoff", "user")},
        "objtype": _S,
        "objname": _S,
        "datatype": Attr("keyword", 1, "real", ("real", "positive", "axis", "quaternion")),
        "needstage": Attr("keyword", 1, "acc", ("pos", "vel", "acc")),
        "dim": Attr("int", 1, None),
    },
}
