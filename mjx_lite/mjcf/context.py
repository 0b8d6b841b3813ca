"""State shared between the compiler's passes (`compile.py` drives; the per-section modules read/extend).

Order of passes in `compile.compile_model`:
  1. options, compiler settings, assets (meshes, hfields)
  2. kinematic tree: bodies, joints/dofs, geoms, sites, cameras, lights, inertia     (compile.py)
  3. tendons (+ wraps), equality, actuators, sensors, contact pairs/excludes          (tendon.py, equality.py,
     actuation.py, sensor.py, contact.py: `compile_<section>(root, ctx) -> None`, writing into ctx.arrays)
  4. keyframes, derived constants needing kinematics (qpos0-based invweight0, length0, acc0, lengthrange,
     stat), then `io.build_model`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from mjx_lite.mjcf.spec import Element


@dataclasses.dataclass
class CompileContext:
    """Everything compiled so far.

    compiler: typed attributes of <compiler> (angle, autolimits, eulerseq, inertiafromgeom, ...), defaults applied
    option:   typed attributes of <option> plus flags
    ids:      object type ('body', 'joint', 'geom', 'site', 'mesh', 'hfield', 'tendon', 'actuator', 'sensor',
              'equality', 'camera', 'light', 'pair', 'exclude', 'key') -> {name: id}; unnamed objects absent
    elements: object type -> list of the Elements in id order (e.g. elements['joint'][j] is joint j's element)
    arrays:   mjModel-named numpy arrays compiled so far (body_*, jnt_*, dof_*, geom_*, site_*, ...)
    sizes:    mjModel size fields compiled so far (nq, nv, nbody, ...)
    file:     path of the top-level file (for messages)
    """

    compiler: dict[str, Any]
    option: dict[str, Any]
    ids: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    elements: dict[str, list[Element]] = dataclasses.field(default_factory=dict)
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    file: str = "<string>"

    def id_of(self, objtype: str, name: str, element: Element, attribute: str) -> int:
        """Id of a named object, or an MJCFError naming the referring element/attribute/line."""
        from mjx_lite.mjcf.spec import MJCFError

        try:
            return self.ids[objtype][name]
        except KeyError:
            raise MJCFError(
                f"unknown {objtype} '{name}'", element.file, element.line, element.tag, attribute
            ) from None
