"""Round trip with MuJoCo C (the optional `mujoco` package): hand a state to MuJoCo's viewer, renderer or
functions, and bring MuJoCo states back.

    mj_model = interop.mujoco_model(m)                      # MjModel of the same MJCF (same ids)
    mj_data = interop.to_mujoco(m, d, mj_model)             # MjData (list of MjData for a batched d)
    d = interop.from_mujoco(m, mj_data)                     # Data (batched for a list)

What is copied: the state and inputs of mjData: time, qpos, qvel, act, ctrl, mocap_pos, mocap_quat, and also
qacc_warmstart, qfrc_applied, xfrc_applied and eq_active, so that `mj_forward` on the copy computes what our
`forward` computes. Derived quantities are recomputed by `mj_forward` (to_mujoco does it unless forward=False);
`from_mujoco` returns `make_data(m)` with the copied state (call `mjx_lite.forward` for derived fields).

`mujoco` is imported here only: the rest of mjx_lite never needs it. A Model loaded by `load_mjcf` /
`load_mjcf_string` keeps the MJCF it was compiled from (`Model.source`: the top-level text, its path or model
directory and the `assets` dictionary); `mujoco_model` has MuJoCo compile that and checks that the two models
agree (sizes and names), which guarantees the same ids.
"""

from __future__ import annotations

import os

import jax
import jax.numpy as jp
import numpy as np

try:
    import mujoco
except ImportError:  # pragma: no cover - exercised only without the extra
    mujoco = None

from mjx_lite import models
from mjx_lite.io import make_data
from mjx_lite.types import STATE_FIELDS, Data, Model  # STATE_FIELDS: the Data fields copied both ways

__all__ = ["STATE_FIELDS", "from_mujoco", "mujoco_model", "to_mujoco"]

_SIZES = ("nq", "nv", "nu", "na", "nbody", "njnt", "ngeom", "nsite", "ncam", "nlight", "nmesh", "nhfield", "ntendon",
          "neq", "nsensor", "nsensordata", "nmocap", "nkey", "nmat", "ntex", "nactuator", "nout",
          "nhistory")  # fmt: skip
_NAMES = {"body": "mjOBJ_BODY", "joint": "mjOBJ_JOINT", "geom": "mjOBJ_GEOM", "site": "mjOBJ_SITE",
          "camera": "mjOBJ_CAMERA", "light": "mjOBJ_LIGHT", "actuator": "mjOBJ_ACTUATOR", "sensor": "mjOBJ_SENSOR",
          "material": "mjOBJ_MATERIAL"}  # fmt: skip


def _need_mujoco():
    if mujoco is None:
        raise ImportError("mjx_lite.interop needs the `mujoco` package: pip install mujoco")
    return mujoco


def mujoco_model(m: Model, source: str | os.PathLike | None = None, assets: dict | None = None):
    """The MjModel MuJoCo compiles from the MJCF `m` was loaded from (`m.source`), or from `source` (a path, bundled
    model name or XML string, with `assets`) when given, e.g. for a Model that keeps no source.

    A model loaded from a file is compiled from that file (which must not have changed since: its text is compared
    with the one `m` was compiled from); one loaded from a string from the kept text, with asset paths relative to
    its `model_dir`. The `assets` given to the loader are passed on. The model's floats are MuJoCo's compiled values
    (values changed with `m.replace` are not copied). Raises if neither `m` nor the call gives a source (e.g. a Model
    built from an MjModel by a test helper) or if MuJoCo's model differs from `m` in any size or name (then ids
    would not correspond).
    """
    mj = _need_mujoco()
    if source is not None:
        mjm = _from_given(mj, os.fspath(source), assets or {})
    elif m.source is None:
        raise ValueError("interop.mujoco_model: this Model has no MJCF source (m.source is None): only models "
                         "loaded by mjx_lite.load_mjcf / load_mjcf_string keep the MJCF they were compiled from; "
                         "pass source= (the MJCF path, bundled model name or XML string)")  # fmt: skip
    else:
        mjm = _from_source(mj, m.source)
    bad = [f"{k}: ours {getattr(m, k)}, MuJoCo {getattr(mjm, k)}" for k in _SIZES if getattr(m, k) != getattr(mjm, k)]
    if bad:
        raise ValueError("interop.mujoco_model: the MJCF does not describe this model: " + "; ".join(bad))
    for kind, obj in _NAMES.items():
        theirs = tuple(mj.mj_id2name(mjm, getattr(mj.mjtObj, obj), i) or "" for i in range(len(m.names.get(kind, ()))))
        if tuple(m.names.get(kind, ())) != theirs:
            raise ValueError(f"interop.mujoco_model: {kind} names differ: ours {m.names.get(kind)}, MuJoCo {theirs}")
    return mjm


def _from_given(mj, source: str, assets: dict):
    """MuJoCo's model of an explicit source: XML text, or a path / bundled model name."""
    if source.lstrip().startswith("<"):
        return mj.MjModel.from_xml_string(source, assets)
    return mj.MjModel.from_xml_path(os.fspath(models.resolve(source)), assets)


def _from_source(mj, src):
    """MuJoCo's model of the MJCF a Model keeps (`types.ModelSource`)."""
    assets = dict(src.assets)
    if src.path is not None:
        try:
            with open(src.path, "rb") as f:
                current = f.read()
        except OSError as e:
            raise ValueError(f"interop.mujoco_model: cannot read {src.path}, the file the model was loaded from: "
                             f"{e.strerror}") from None  # fmt: skip
        if current != src.xml:
            raise ValueError(f"interop.mujoco_model: {src.path} changed since the model was loaded from it; load it "
                             "again")  # fmt: skip
        mjm = mj.MjModel.from_xml_path(src.path, assets)
    elif src.model_dir is None:
        mjm = mj.MjModel.from_xml_string(src.xml.decode(), assets)
    else:
        spec = mj.MjSpec.from_string(src.xml.decode(), assets=assets)
        spec.modelfiledir = src.model_dir + os.sep
        mjm = spec.compile()
    return mjm


def _is_batched(m: Model, d: Data) -> bool:
    return np.ndim(d.qpos) == 2 or (m.nq == 0 and np.ndim(d.time) == 1)


def _copy_in(mjm, mjd, values: dict) -> None:
    for f in STATE_FIELDS:
        v = np.asarray(values[f])
        if f == "time":
            mjd.time = float(v)
        else:
            getattr(mjd, f)[...] = v.reshape(getattr(mjd, f).shape)


def to_mujoco(m: Model, d: Data, mj_model, forward: bool = True):
    """MjData with the state of `d` (a list of MjData when `d` is batched), forwarded by `mj_forward` unless
    `forward=False`."""
    mj = _need_mujoco()
    host = {f: np.asarray(getattr(d, f)) for f in STATE_FIELDS}
    if not _is_batched(m, d):
        out = mj.MjData(mj_model)
        _copy_in(mj_model, out, host)
        if forward:
            mj.mj_forward(mj_model, out)
        return out
    datas = []
    for i in range(host["qpos"].shape[0]):
        one = mj.MjData(mj_model)
        _copy_in(mj_model, one, {f: v[i] for f, v in host.items()})
        if forward:
            mj.mj_forward(mj_model, one)
        datas.append(one)
    return datas


def from_mujoco(m: Model, mj_data, template: Data | None = None) -> Data:
    """Data with the state of an MjData (a batched Data for a list of MjData): `template` (default
    `make_data(m)`) with the STATE_FIELDS replaced."""
    base = make_data(m) if template is None else template
    many = isinstance(mj_data, (list, tuple))
    items = list(mj_data) if many else [mj_data]
    vals = {}
    for f in STATE_FIELDS:
        ref = getattr(base, f)
        arr = np.stack([np.asarray(getattr(x, f), np.float64 if f != "eq_active" else bool) for x in items])
        shape = (len(items),) + tuple(np.shape(ref))
        vals[f] = jp.asarray(arr.reshape(shape), ref.dtype)
    if many:
        batched = jax.tree.map(lambda x: jp.broadcast_to(x, (len(items),) + jp.shape(x)), base)
        return batched.replace(**vals)
    return base.replace(**{f: v[0] for f, v in vals.items()})
