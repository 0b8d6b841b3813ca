"""Test-only helpers that talk to MuJoCo C (the oracle). The runtime never imports `mujoco`."""

from __future__ import annotations

import dataclasses
import glob
import os

import mujoco
import numpy as np

from mjx_lite import io, types

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
    return io.build_model(arrays, sizes, opt, stat, names)


# ----------------------------------------------------------------------------------------------------------
# a compiled Model against MuJoCo's mjModel, field by field (the MJCF compiler's oracle; used by
# test_mjcf_compile.py and the differential fuzzer test_fuzz_mjcf.py)

RTOL = 1e-6  # float64 compile arithmetic, different operation order than MuJoCo's C
ATOL = 1e-10  # absolute slack for values that are zero up to round-off
QUAT_TOL = 1e-6  # quaternions (compared up to sign)
EIG_GAP = 1e-6  # principal moments closer than this (relative) leave the principal axes free

# MuJoCo stores mesh vertices and height-field data in float32: values computed from them (mesh frames, the
# boxes of mesh geoms) agree to float32 resolution of the geometry, not to float64 round-off
F32_FIELDS = ("mesh_vert", "hfield_data", "geom_aabb")
# offsets from a subtree centre of mass, which for mesh bodies inherits the float32 rounding of the mesh data
MESH_COM_FIELDS = ("light_poscom0", "cam_poscom0")
F32_TOL = 1e-6
# MuJoCo's Jacobi eigen-solver stops once the rotation angle is below ~1e-6 rad, so principal frames agree to
# about that much (not to round-off); the inertia tensor is compared relative to its largest entry.
_NAME_OBJ = _OBJ  # object type -> mjtObj
_NAME_COUNT = _COUNT


def _model_fields() -> list[str]:
    skip = {"opt", "stat", "names", "nconmax", "njmax"}
    return [f.name for f in dataclasses.fields(types.Model) if f.name not in skip and f.name not in types.SIZE_FIELDS]


FIELDS = _model_fields()
POLY_FIELDS = ("mesh_polyadr", "mesh_polynum", "mesh_polyvert", "mesh_polyvertadr", "mesh_polyvertnum")


def mesh_polygons(m, i: int) -> list[tuple[int, ...]]:
    """Mesh i's polygons as vertex-id cycles (each from its own start vertex), in the model's order."""
    out = []
    for j in range(int(m.mesh_polyadr[i]), int(m.mesh_polyadr[i] + m.mesh_polynum[i])):
        a, n = int(m.mesh_polyvertadr[j]), int(m.mesh_polyvertnum[j])
        out.append(tuple(int(x) for x in np.asarray(m.mesh_polyvert)[a : a + n]))
    return out


def _compare_polygons(ours, mjm) -> list[str]:
    """Polygons of every mesh MuJoCo built them for (it skips meshes no collision geom uses): the same vertex cycles
    with the same start vertices; the order of the polygons is MuJoCo's hash-map order, not compared."""
    errs = []
    for i in range(mjm.nmesh):
        if mjm.mesh_polynum[i] == 0:
            continue
        a, b = mesh_polygons(ours, i), mesh_polygons(mjm, i)
        if sorted(a) != sorted(b):
            extra, missing = len(set(a) - set(b)), len(set(b) - set(a))
            errs.append(f"mesh {i} polygons: {extra} of ours not in MuJoCo's, {missing} of MuJoCo's missing")
    return errs


def _quat_rows_close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a.reshape(-1, 4)
    b = b.reshape(-1, 4)
    nan = np.isnan(a) & np.isnan(b)  # NaN where MuJoCo has NaN (e.g. from a written nan) agrees
    same = np.all((np.abs(a - b) <= QUAT_TOL) | nan, axis=1)
    flip = np.all((np.abs(a + b) <= QUAT_TOL) | nan, axis=1)
    return same | flip


def _inertia_tensor(quat: np.ndarray, diag: np.ndarray) -> np.ndarray:
    out = []
    for q, i in zip(quat.reshape(-1, 4), diag.reshape(-1, 3)):
        r = np.zeros(9)
        mujoco.mju_quat2Mat(r, q)
        r = r.reshape(3, 3)
        out.append(r @ np.diag(i) @ r.T)
    return np.array(out).reshape(-1, 3, 3)


def compare_models(ours: types.Model, mjm: mujoco.MjModel, skip_prefixes: tuple[str, ...] = ()) -> list[str]:
    """Differences between our Model and MuJoCo's (empty list when they match)."""
    errs = []
    for k in types.SIZE_FIELDS:
        if k.startswith(("nmesh",)) or any(k == s for s in skip_prefixes):
            continue
        if getattr(ours, k) != getattr(mjm, k):
            errs.append(f"{k}: {getattr(ours, k)} != {getattr(mjm, k)}")
    if errs:
        return errs  # shapes would not line up
    for f in dataclasses.fields(types.Option):
        a, b = np.asarray(getattr(ours.opt, f.name)), np.asarray(getattr(mjm.opt, f.name))
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
            errs.append(f"opt.{f.name}: {a} != {b}")
    for k in ("meaninertia", "meanmass", "meansize", "extent", "center"):
        if ("stat." + k).startswith(skip_prefixes):
            continue
        a, b = np.asarray(getattr(ours.stat, k)), np.asarray(getattr(mjm.stat, k))
        if not np.allclose(a, b, rtol=RTOL, atol=ATOL, equal_nan=True):
            errs.append(f"stat.{k}: {a} != {b}")
    for obj, cnt in _NAME_COUNT.items():
        if any(obj.startswith(p.rstrip("_")) for p in skip_prefixes):
            continue
        want = tuple(mujoco.mj_id2name(mjm, _NAME_OBJ[obj], i) or "" for i in range(getattr(mjm, cnt)))
        if ours.names.get(obj) != want:
            errs.append(f"names[{obj}]: {ours.names.get(obj)} != {want}")
    if not "mesh_polyvert".startswith(skip_prefixes):
        errs += _compare_polygons(ours, mjm)
    for name in FIELDS:
        if name.startswith(skip_prefixes) or not hasattr(mjm, name) or name in POLY_FIELDS:
            continue
        a = np.asarray(getattr(ours, name))
        b = np.asarray(getattr(mjm, name))
        if a.size != b.size:
            errs.append(f"{name}: shape {a.shape} != {b.shape}")
            continue
        a = a.reshape(b.shape) if a.ndim != b.ndim else a
        if name == "body_iquat":
            continue  # compared with body_inertia below
        if name == "body_inertia":
            ta = _inertia_tensor(np.asarray(ours.body_iquat), a)
            tb = _inertia_tensor(mjm.body_iquat, b)
            if not np.allclose(np.sort(a, 1), np.sort(b, 1), rtol=RTOL, atol=ATOL, equal_nan=True):
                errs.append(f"body_inertia (principal moments): {a} != {b}")
            elif not np.allclose(ta, tb, rtol=RTOL, atol=RTOL * max(1.0, np.abs(tb).max(initial=0.0)), equal_nan=True):
                errs.append("body_inertia (tensor R diag R^T) differs")
            # principal frames must agree where the moments are distinct
            gap = np.min(np.abs(np.diff(np.sort(b, 1), axis=1)), axis=1) > EIG_GAP * np.maximum(1, b.max(1))
            bad = gap & ~_quat_rows_close(np.asarray(ours.body_iquat), mjm.body_iquat)
            if np.any(bad):
                errs.append(f"body_iquat rows {np.nonzero(bad)[0].tolist()} differ")
            continue
        if b.dtype.kind in "iub":
            if not np.array_equal(a.astype(np.int64), b.astype(np.int64)):
                idx = np.argwhere(a.astype(np.int64) != b.astype(np.int64))[:5].tolist()
                errs.append(f"{name}: integer mismatch at {idx}: ours {a.reshape(-1)[:8]} mj {b.reshape(-1)[:8]}")
            continue
        if name.endswith("quat") or name in ("mesh_quat",):
            if b.size and not np.all(_quat_rows_close(a, b)):
                errs.append(f"{name}: quaternion mismatch")
            continue
        atol = ATOL
        if name in MESH_COM_FIELDS and mjm.nmesh:
            atol = F32_TOL * float(mjm.stat.extent)
        if name in F32_FIELDS:
            atol = F32_TOL * max(1.0, float(np.abs(b).max(initial=0.0))) if name != "geom_aabb" else F32_TOL
        if not np.allclose(a, b, rtol=RTOL, atol=atol, equal_nan=True):
            diff = np.abs(a - b) - RTOL * np.abs(b)
            i = np.unravel_index(np.argmax(diff), a.shape) if a.ndim else ()
            errs.append(f"{name}: max mismatch at {i}: ours {a[i]} mj {b[i]}")
    return errs


