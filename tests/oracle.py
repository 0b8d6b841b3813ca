"""Test-only helpers that talk to MuJoCo C (the oracle). The runtime never imports `mujoco`."""

from __future__ import annotations

import dataclasses
import glob
import os

import mujoco
import numpy as np

from mjx_lite import io, types
from mjx_lite.mjcf.mesh import hull_tables, polygon_tables_from_vert

_OBJ = {
    "body": mujoco.mjtObj.mjOBJ_BODY, "joint": mujoco.mjtObj.mjOBJ_JOINT, "geom": mujoco.mjtObj.mjOBJ_GEOM,
    "site": mujoco.mjtObj.mjOBJ_SITE, "camera": mujoco.mjtObj.mjOBJ_CAMERA, "light": mujoco.mjtObj.mjOBJ_LIGHT,
    "mesh": mujoco.mjtObj.mjOBJ_MESH, "hfield": mujoco.mjtObj.mjOBJ_HFIELD, "pair": mujoco.mjtObj.mjOBJ_PAIR,
    "exclude": mujoco.mjtObj.mjOBJ_EXCLUDE, "equality": mujoco.mjtObj.mjOBJ_EQUALITY,
    "tendon": mujoco.mjtObj.mjOBJ_TENDON, "actuator": mujoco.mjtObj.mjOBJ_ACTUATOR,
    "sensor": mujoco.mjtObj.mjOBJ_SENSOR, "key": mujoco.mjtObj.mjOBJ_KEY,
}  # fmt: skip
_COUNT = {"body": "nbody", "joint": "njnt", "geom": "ngeom", "site": "nsite", "camera": "ncam", "light": "nlight",
          "mesh": "nmesh", "hfield": "nhfield", "pair": "npair", "exclude": "nexclude", "equality": "neq",
          "tendon": "ntendon", "actuator": "nu", "sensor": "nsensor", "key": "nkey"}  # fmt: skip

SITE_PACKAGES = os.path.dirname(os.path.dirname(mujoco.__file__))
MJX_TEST_DATA = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
DM_SUITE = os.path.join(SITE_PACKAGES, "dm_control", "suite")


def reference_models() -> list[str]:
    """Paths of the reference MJCF models shipped with mujoco-mjx and dm_control."""
    files = sorted(glob.glob(os.path.join(MJX_TEST_DATA, "**", "*.xml"), recursive=True))
    files += sorted(glob.glob(os.path.join(DM_SUITE, "*.xml")))
    return files


def model_from_mujoco(mjm: mujoco.MjModel) -> types.Model:
    """Our Model built directly from MuJoCo's compiled arrays (to test the pipeline apart from our compiler)."""
    arrays = {}
    for f in dataclasses.fields(types.Model):
        if f.name in ("opt", "stat", "names") or f.name in types.SIZE_FIELDS or f.name in ("nconmax", "njmax"):
            continue
        if hasattr(mjm, f.name):
            arrays[f.name] = np.array(getattr(mjm, f.name))
    sizes = {k: getattr(mjm, k) for k in types.SIZE_FIELDS}
    opt = {f.name: getattr(mjm.opt, f.name) for f in dataclasses.fields(types.Option)}
    opt["integrator"] = int(mjm.opt.integrator)
    stat = {k: getattr(mjm.stat, k) for k in ("meaninertia", "meanmass", "meansize", "extent", "center")}
    names = {
        k: tuple(mujoco.mj_id2name(mjm, _OBJ[k], i) or "" for i in range(getattr(mjm, _COUNT[k]))) for k in _OBJ
    }
    extra = [f for f in dataclasses.fields(types.Model) if f.name not in arrays and not f.metadata.get("static")]
    missing = [
        f.name
        for f in extra
        if f.name not in ("opt", "stat") and f.name not in arrays
    ]
    if missing:
        raise KeyError(f"model_from_mujoco: no MuJoCo array for {missing}")
    if "mesh_hullvert" not in arrays:  # MuJoCo keeps no hull tables of ours: build them from its vertices
        arrays.update(hull_tables(arrays["mesh_vert"], arrays["mesh_vertadr"], arrays["mesh_vertnum"]))
    if "mesh_polyvert" not in arrays:
        arrays.update(polygon_tables_from_vert(arrays["mesh_vert"], arrays["mesh_vertadr"], arrays["mesh_vertnum"]))
    return io.build_model(arrays, sizes, opt, stat, names)
