"""State shared between the compiler's passes (`compile.py` drives; the per-section modules read/extend).

Order of passes in `compile.compile_model`:
  1. options, compiler settings, assets (meshes, hfields)
  2. kinematic tree: bodies, joints/dofs, geoms, sites, cameras, lights, inertia     (compile.py)
  3. tendons (+ wraps), equality, actuators, sensors, contact pairs/excludes          (tendon.py, equality.py,
     actuation.py, sensor.py, contact.py: `compile_<section>(root, ctx) -> None`, writing into ctx.arrays)
  4. keyframes, derived constants needing kinematics (qpos0-based invweight0, length0, acc0, lengthrange,
     stat), then `io.build_model`.

Also the helpers every pass that needs a (provisional) `Model` shares: `fill_missing` (correctly shaped empty
arrays), `names`, `provisional_model` (a float64 Model of everything compiled so far, for the qpos0 constants).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import numpy as np

from mjx_lite import io, types
from mjx_lite.mjcf.spec import Element, MJCFError

# object type -> size field (for Model.names)
NAME_TYPES = {"body": "nbody", "joint": "njnt", "geom": "ngeom", "site": "nsite", "camera": "ncam",
              "light": "nlight", "mesh": "nmesh", "hfield": "nhfield", "pair": "npair", "exclude": "nexclude",
              "equality": "neq", "tendon": "ntendon", "actuator": "nactuator", "sensor": "nsensor", "key": "nkey",
              "material": "nmat", "texture": "ntex", "skin": "nskin", "flex": "nflex"}  # fmt: skip
# named constant dimensions of declared shapes
_CONST = {"NTEXROLE": types.NTEXROLE, "NWARNING": types.NWARNING}
# MuJoCo's statistics before setStat computes them
DEFAULT_STAT = {"meaninertia": 1.0, "meanmass": 1.0, "meansize": 0.2, "extent": 2.0, "center": np.zeros(3)}


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
    model_dir, assets: where asset files (meshes, height fields) are read from
    mesh_assets, hfield_assets: the loaded assets (mesh.MeshAsset / hfield data), in id order
    joint_springdamper: (njnt, 2) springdamper values (stiffness and damping are set from dof_invweight0)
    lengthrange_opts: typed <compiler><lengthrange> settings
    """

    compiler: dict[str, Any]
    option: dict[str, Any]
    ids: dict[str, dict[str, int]] = dataclasses.field(default_factory=dict)
    elements: dict[str, list[Element]] = dataclasses.field(default_factory=dict)
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)
    sizes: dict[str, int] = dataclasses.field(default_factory=dict)
    file: str = "<string>"
    model_dir: str | None = None
    assets: dict = dataclasses.field(default_factory=dict)
    mesh_assets: list = dataclasses.field(default_factory=list)
    hfield_assets: list = dataclasses.field(default_factory=list)
    joint_springdamper: np.ndarray | None = None
    lengthrange_opts: dict[str, Any] | None = None

    def id_of(self, objtype: str, name: str, element: Element, attribute: str) -> int:
        """Id of a named object, or an MJCFError naming the referring element/attribute/line."""
        try:
            return self.ids[objtype][name]
        except KeyError:
            raise MJCFError(
                f"unknown {objtype} '{name}'", element.file, element.line, element.tag, attribute
            ) from None


# ----------------------------------------------------------------------------------------------------------
# provisional models


ALL_FIELDS = tuple(f.name for f in dataclasses.fields(types.Model))


def fill_missing(ctx: CompileContext, prefixes: tuple[str, ...], sizes: dict[str, int]) -> None:
    """Fill missing Model array fields with these prefixes with zero arrays of their declared shapes (`types`)."""
    for name in types.shaped_fields(types.Model):
        if not name.startswith(prefixes) or name in ctx.arrays:
            continue
        dims, dt = types.field_shape(types.Model, name)
        shape = []
        for d in dims:
            if isinstance(d, int):
                shape.append(d)
                continue
            n = 1
            for factor in d.split("*"):
                factor = factor.strip()
                known = ctx.sizes.get(factor, sizes.get(factor, _CONST.get(factor, 0)))
                n *= int(factor) if factor.isdigit() else int(known)
            shape.append(n)
        dtype = {"int32": np.int32, "bool": bool, "uint8": np.uint8}.get(dt, float)
        ctx.arrays[name] = np.zeros(shape, dtype)


def names(ctx: CompileContext) -> dict[str, tuple[str, ...]]:
    """Model.names: object type -> names in id order ('' for unnamed objects)."""
    out = {}
    for objtype, size in NAME_TYPES.items():
        n = int(ctx.sizes.get(size, 0))
        nm = [""] * n
        if objtype == "body" and n:
            nm[0] = "world"
        for name, i in ctx.ids.get(objtype, {}).items():
            if 0 <= i < n and name:
                nm[i] = name
        out[objtype] = tuple(nm)
    return out


def provisional_model(ctx: CompileContext) -> types.Model:
    """A float64 Model from everything compiled so far (missing fields empty, default statistics)."""
    fill_missing(ctx, ALL_FIELDS, {})
    sizes = {k: int(ctx.sizes.get(k, 0)) for k in types.SIZE_FIELDS}
    with jax.enable_x64(True):
        return io.build_model(ctx.arrays, sizes, ctx.option, DEFAULT_STAT, names(ctx))


def dof_tree_mask(ctx: CompileContext) -> np.ndarray:
    """(nv, nv) bool: entries of the joint-space inertia inside the dof-tree sparsity (i == j, or one of them an
    ancestor of the other). MuJoCo adds armature coupling terms (J' a J of tendons) only there."""
    parent = np.asarray(ctx.arrays["dof_parentid"], int)
    nv = parent.size
    mask = np.eye(nv, dtype=bool)
    for i in range(nv):
        j = parent[i]
        while j >= 0:
            mask[i, j] = mask[j, i] = True
            j = parent[j]
    return mask
