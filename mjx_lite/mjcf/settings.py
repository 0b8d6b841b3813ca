"""Typed <compiler> settings of a spec tree (the compiler's and the composition's view of them)."""

from __future__ import annotations

from typing import Any

import numpy as np

from mjx_lite.mjcf import attrs as at
from mjx_lite.mjcf.spec import Element


def compiler_settings(root: Element) -> dict[str, Any]:
    """Typed <compiler> settings (several <compiler> elements are merged, later ones win)."""
    out: dict[str, Any] = {
        "angle": "degree", "eulerseq": "xyz", "autolimits": True, "inertiafromgeom": "auto", "boundmass": 0.0,
        "boundinertia": 0.0, "balanceinertia": False, "settotalmass": -1.0, "meshdir": None, "texturedir": None,
        "assetdir": None, "fitaabb": False, "discardvisual": False, "inertiagrouprange": (0, 5),
        "alignfree": False, "fusestatic": False, "strippath": False,
    }  # fmt: skip
    for c in at.sections(root, "compiler"):
        for k, v in c.attrs.items():
            if v is None:
                continue
            if k == "alignfree" and v:
                raise at.unsupported(c, "alignfree='true' is not supported", k)
            out[k] = v
    out["inertiafromgeom"] = at.bool_auto(out["inertiafromgeom"])
    out["degree"] = str(out["angle"]).lower() == "degree"
    out["inertiagrouprange"] = tuple(int(x) for x in np.asarray(out["inertiagrouprange"]).reshape(-1)[:2])
    return out
