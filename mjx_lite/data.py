"""`make_data` (mj_makeData + mj_resetData) and the shape check of Data, both from the declared field shapes.

Every Data (and Contact) field declares its shape in `mjx_lite.types` as names of the Model's static sizes;
`make_data` builds zeros of those shapes (then the state of mj_resetData: qpos0, mocap poses, active equalities)
and `check_data` compares a Data with them at trace time, so a wrong-shaped field is an error that names it,
at no run-time cost. This module depends on `types` only.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jp
import numpy as np
from jax._src import core as jax_core  # trace_state_clean: no public equivalent

from mjx_lite.types import NWARNING, Contact, Data, GainType, Model, Warning, field_shape, resolve_shape, shaped_fields

__all__ = ["WARNING_TEXT", "as_data", "check_data", "count_warning", "count_warnings", "float_dtype", "make_data",
           "reset_values", "warnings"]  # fmt: skip

# check_data lists this many wrong fields (a Data of another model has almost every field wrong)
LISTED = 5

# what each of MuJoCo's warnings (mjtWarning, counted in Data.warning_number) means here
WARNING_TEXT = {
    Warning.INERTIA: "mass matrix too close to singular (a pivot below 1e-15 was clamped): check masses/inertias",
    Warning.CONTACTFULL: "more contacts than the contact capacity (nconmax): the least overlapping were left out",
    Warning.CNSTRFULL: "more constraint rows than the capacity (njmax): rows were left out",
    Warning.BADQPOS: "qpos was NaN, inf or huge (|x| > 1e10): the environment was reset",
    Warning.BADQVEL: "qvel was NaN, inf or huge: the environment was reset",
    Warning.BADQACC: "qacc was NaN, inf or huge (the simulation diverged): the environment was reset",
    Warning.BADCTRL: "ctrl was NaN, inf or huge: all controls were taken as zero for that step",
}


def float_dtype():
    """The float dtype of new arrays: float64 under `jax_enable_x64`, else float32."""
    return jp.float64 if jax.config.jax_enable_x64 else jp.float32


def _dtype(word: str | None, f):
    return {"int32": jp.int32, "bool": jp.bool_}.get(word, f)


def _full(shape, value, dtype) -> jax.Array:
    """jp.full without a compiled program when called eagerly: each distinct (shape, dtype) of an eager jp.zeros
    compiles a broadcast, and jp.asarray of a host array compiles a `stage` program per shape (jax 0.10): 44
    compiles, ~3 s of CPU, per make_data of the humanoid in a fresh process or after jax.clear_caches();
    jax.device_put of a host array compiles nothing. Under a trace (make_data inside jit, as
    environments' reset) it stays a broadcast rather than a constant embedded in the program."""
    if _tracing():
        return jp.full(shape, value, dtype)
    return jax.device_put(np.full(shape, value, np.dtype(dtype)))


def _array(x, dtype) -> jax.Array:
    """jp.asarray(x, dtype), through the host when eager (see _full)."""
    if _tracing():
        return jp.asarray(x, dtype)
    return jax.device_put(np.asarray(x, np.dtype(dtype)))


def _tracing() -> bool:
    clean = getattr(jax_core, "trace_state_clean", None)
    return clean is None or not clean()


def _zeros(m: Model, cls: type, f) -> dict:
    out = {}
    for name in shaped_fields(cls):
        dims, word = field_shape(cls, name)
        out[name] = _full(resolve_shape(m, dims), 0, _dtype(word, f))
    return out


def make_data(m: Model) -> Data:
    """Data at `qpos0`, zero velocity and controls (mj_makeData + mj_resetData).

    Shapes follow the declarations in `mjx_lite.types` (contacts padded to `m.nconmax`, constraint rows to
    `m.njmax`); floats are float64 under `jax_enable_x64`, else float32.
    """
    f = float_dtype()
    fields, contact_fill = reset_values(m, f)
    contact = _zeros(m, Contact, f)
    for name, value in contact_fill.items():
        contact[name] = _full(contact[name].shape, value, contact[name].dtype)
    return Data(**(_zeros(m, Data, f) | fields), contact=Contact(**contact))


# Contact fields whose reset value is -1 (no constraint row, flex, vertex or element); the others are 0
CONTACT_FILL = {"efc_address": -1, "flex": -1, "vert": -1, "elem": -1}


def reset_values(m: Model, f) -> tuple[dict, dict]:
    """mj_resetData's values that are not zero: ({Data field: array (floats of dtype f)}, {Contact field: fill
    value}). Every other field resets to zeros (`make_data`; `integrate.reset_where` selects a scalar zero there,
    so that a reset builds no array for them)."""
    fields = dict(qpos=_array(m.qpos0, f), history=_init_history(m, f), plastic=_init_plastic(m, f),
                  eq_active=_array(m.eq_active0, bool))  # fmt: skip
    fields.update(_sleep_values(m))
    if np.any(_quat_ctrl(m)):  # quaternion inputs of orientation servos start at the identity; else zeros
        fields["ctrl"] = _init_ctrl(m, f)
    if m.nmocap:
        mocap_body = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
        mocap_body = mocap_body[np.argsort(np.asarray(m.body_mocapid)[mocap_body])]
        for name, src in (("mocap_pos", m.body_pos), ("mocap_quat", m.body_quat)):
            fields[name] = (_array(np.asarray(src)[mocap_body], f) if not _tracing()
                            else jp.asarray(src)[mocap_body].astype(f))  # fmt: skip
    return fields, dict(CONTACT_FILL)


MINAWAKE = 10  # mjMINAWAKE: steps below the sleep tolerance before a tree is ready to sleep (pipeline/sleep.py)


def _sleep_values(m: Model) -> dict:
    """mj_resetData's sleep state, every tree awake: tree_asleep -(1 + MINAWAKE), tree_awake 1, body_awake 1 (awake)
    for the bodies of trees and mocap bodies' trees, -1 (static) for the others; the counts of the awake ones. Trees
    with the sleep policy "init" are put to sleep by `mjx_lite.io.make_data` (pipeline/sleep.py `init`)."""
    static = np.asarray(m.body_treeid) < 0
    mocap = np.asarray(m.body_mocapid)[np.asarray(m.body_rootid)] >= 0
    body_awake = np.where(static & ~mocap, -1, 1).astype(np.int32)
    return dict(tree_asleep=_array(np.full(m.ntree, -(1 + MINAWAKE)), np.int32),
                tree_awake=_array(np.ones(m.ntree), np.int32), body_awake=_array(body_awake, np.int32),
                ntree_awake=_array(m.ntree, np.int32), nbody_awake=_array(m.nbody, np.int32),
                nv_awake=_array(m.nv, np.int32))  # fmt: skip


def _quat_ctrl(m: Model) -> np.ndarray:
    """(nactuator,) bool: orientation (so3) servos commanded by a quaternion (mjCHART_QUAT: 4 controls)."""
    return (np.asarray(m.actuator_gaintype) == GainType.SO3) & (np.asarray(m.actuator_ctrlspec) == 2)


def _init_ctrl(m: Model, dtype) -> jax.Array:
    """Neutral controls (mj_resetCtrl), (nu,): zero, except the quaternion inputs of orientation (so3) servos,
    which start at the identity quaternion (their first control, qw, is 1)."""
    ctrl = np.zeros(m.nu)
    ctrl[np.asarray(m.actuator_ctrladr)[_quat_ctrl(m)]] = 1.0
    return _array(ctrl, dtype)


# relative tolerance of the timestep grid in interval sensors' initial sample times: MuJoCo 4.0 rounds a time
# within (5e-13, 1e-12) * |t / timestep| above a grid point down to it (probed; the rule is undocumented)
_GRID_TOL = 7.5e-13


PLASTIC_WIDTH = {1: 4, 2: 1, 3: 1}  # plastic entries of a ball, slide, hinge joint (jnt_type); free joints have none


def plastic_source(jnt_type, jnt_qposadr, jnt_plasticadr, tendon_plasticadr, nq: int, nplastic: int) -> np.ndarray:
    """Static (nplastic,) index of each plastic entry's initial value in concatenate([qpos_spring,
    tendon_lengthspring.ravel()]) (mj_resetData: a joint's qpos_spring, a tendon's [lower, upper] dead band).
    Only the joints' and tendons' entries, which come first: the rods' state after them (flex_plasticadr) starts at
    zero, so the result may be shorter than nplastic."""
    ends = [adr + PLASTIC_WIDTH[int(jnt_type[j])] for j, adr in enumerate(np.asarray(jnt_plasticadr)) if adr >= 0]
    ends += [adr + 2 for adr in np.asarray(tendon_plasticadr) if adr >= 0]
    out = np.zeros(min(nplastic, max(ends, default=0)), np.int32)
    for j, adr in enumerate(np.asarray(jnt_plasticadr)):
        if adr >= 0:
            w = PLASTIC_WIDTH[int(jnt_type[j])]
            out[adr : adr + w] = int(jnt_qposadr[j]) + np.arange(w)
    for t, adr in enumerate(np.asarray(tendon_plasticadr)):
        if adr >= 0:
            out[adr : adr + 2] = nq + 2 * t + np.arange(2)
    return out


def _init_plastic(m: Model, dtype) -> jax.Array:
    """Data.plastic of mj_resetData (nplastic,): the spring references of the plastic joints and tendons."""
    if m.nplastic == 0:
        return _full((0,), 0, dtype)
    idx = plastic_source(m.jnt_type, m.jnt_qposadr, m.jnt_plasticadr, m.tendon_plasticadr, m.nq, m.nplastic)
    pad = m.nplastic - len(idx)  # the rods' reference frames and twists: zero (not yet initialised)
    if not _tracing():
        src = np.concatenate([np.asarray(m.qpos_spring), np.asarray(m.tendon_lengthspring).reshape(-1)])
        return _array(np.concatenate([src[idx], np.zeros(pad)]), dtype)
    src = jp.concatenate([jp.asarray(m.qpos_spring), jp.asarray(m.tendon_lengthspring).reshape(-1)])
    return jp.concatenate([src[idx].astype(dtype), jp.zeros(pad, dtype)])


def _init_history(m: Model, dtype) -> jax.Array:
    """Data.history of mj_resetData (nhistory,) (layout: `mjx_lite.pipeline.history`): per buffer the user slot
    (actuators 0; sensors the last interval tick: the interval's phase, or -period, or -timestep without an
    interval), the cursor n-1, times -(n-j) timestep (interval sensors: ticks t0 - (n-1-j) period rounded up to
    the timestep grid, at least a timestep apart) and zero values."""
    out = _full((m.nhistory,), 0, dtype)
    if m.nhistory == 0:
        return out
    dt = jp.asarray(m.opt.timestep, dtype)
    for kind in ("actuator", "sensor"):
        hist = np.asarray(getattr(m, f"{kind}_history")).reshape(-1, 2)
        adr = np.asarray(getattr(m, f"{kind}_historyadr"))
        for i in np.nonzero(hist[:, 0] > 0)[0]:
            n, a = int(hist[i, 0]), int(adr[i])
            j = jp.arange(n, dtype=dtype)
            times = -(n - j) * dt
            user = jp.asarray(0.0, dtype)
            if kind == "sensor":
                period, phase = m.sensor_interval[i, 0].astype(dtype), m.sensor_interval[i, 1].astype(dtype)
                t0 = jp.where(phase == 0, -period, phase)
                x = (jp.where(phase == 0, -jp.maximum(period, dt), phase) - (n - 1 - j) * period) / dt
                # up to the timestep grid; within _GRID_TOL (relative) of a grid point counts as on it (MuJoCo 4.0
                # absorbs the round-off of decimal phases and periods, e.g. -0.01 - 3 * 0.03 = -0.0999..); at
                # least one timestep apart (a period shorter than the timestep: one sample per step, the last at
                # -timestep without a phase): j + the reverse running minimum of (tick - j), as MuJoCo 4.0 (probed)
                grid = jp.ceil(x - _GRID_TOL * jp.abs(x))
                grid = j + jax.lax.cummin(grid - j, reverse=True)
                times = jp.where(period > 0, grid * dt, times)
                user = jp.where(period > 0, t0, -dt)
            out = out.at[a].set(user).at[a + 1].set(n - 1).at[a + 2 : a + 2 + n].set(times)
    return out


def count_warning(counts: jax.Array, warning: int, n) -> jax.Array:
    """warning_number `counts` (NWARNING,) with n (a () bool or integer) added to the counter of `warning` (static):
    n padded with zeros to a one-hot row (`lax.pad`: a reshape, the pad and the add, three operations), not a
    scatter (`counts.at[warning].add(n)`), which under vmap is a scatter over the environments, a kernel of its own on
    a GPU; nor a product with a constant one-hot row (its broadcasts: six operations under vmap). The pad and the
    add are elementwise and fuse with their neighbours."""
    w, size = int(warning), counts.shape[-1]
    row = jp.asarray(n).astype(counts.dtype).reshape(1)
    return counts + jax.lax.pad(row, jp.zeros((), counts.dtype), [(w, size - 1 - w, 0)])


def count_warnings(counts: jax.Array, first: int, ns) -> jax.Array:
    """warning_number `counts` (NWARNING,) with ns[k] (() bools or integers) added to the counter of warning
    `first + k` (static, consecutive warnings): one padded row and one add for all of them (`count_warning`'s form)."""
    w, size = int(first), counts.shape[-1]
    row = jp.concatenate([jp.asarray(n).reshape(1) for n in ns]).astype(counts.dtype)  # (not jp.stack: under vmap
    # its batching puts the environments first and transposes)
    return counts + jax.lax.pad(row, jp.zeros((), counts.dtype), [(w, size - len(ns) - w, 0)])


def warnings(d: Data) -> dict[str, int | np.ndarray]:
    """The warnings counted in `d.warning_number`, by MuJoCo's name: {"BADQACC": 2, ...} (only nonzero ones).

    For a batched Data (leading axes), each value is the array of per-environment counts, for the warnings that
    any environment raised. `mjx_lite.data.WARNING_TEXT[mjx_lite.Warning[name]]` says what each means.
    """
    counts = np.asarray(d.warning_number)
    if counts.shape[-1:] != (NWARNING,):
        raise ValueError(f"warning_number has shape {counts.shape}, expected (..., {NWARNING})")
    out: dict[str, int | np.ndarray] = {}
    for w in Warning:
        c = counts[..., int(w)]
        if np.any(c != 0):
            out[w.name] = int(c) if c.ndim == 0 else c
    return out


def _kind(dtype) -> str:
    d = np.dtype(dtype)
    return "bool" if d == np.bool_ else "int" if d.kind in "iu" else "float" if d.kind == "f" else d.kind


def check_data(m: Model, d: Data) -> None:
    """Raise ValueError naming the fields of `d` whose shape or dtype kind differs from its declaration.

    Runs at trace time on the (unbatched) shapes: free at run time. Under `vmap`, `d` is one environment's Data.
    The message lists the first `LISTED` fields (shape, and the sizes the model needs) and says what the likely
    mistake is: a batched Data without `vmap`, or the Data of another model.
    """
    if not isinstance(d, Data):
        raise TypeError(f"expected a mjx_lite Data, got {type(d).__name__}")
    wrong, batched = [], True
    for cls, obj, prefix in ((Data, d, ""), (Contact, d.contact, "contact.")):
        for name in shaped_fields(cls):
            dims, word = field_shape(cls, name)
            want = resolve_shape(m, dims)
            x = getattr(obj, name)
            if not hasattr(x, "shape"):
                x = np.asarray(x)
            shape, kind = tuple(x.shape), _kind(x.dtype)
            want_kind = {"int32": "int", "bool": "bool"}.get(word, "float")
            if shape != want or kind != want_kind:
                named = ", ".join(str(k) for k in dims)
                wrong.append(f"{prefix}{name}: got {kind} {shape}, expected {want_kind} {want}"
                             + (f" ({named})" if any(isinstance(k, str) for k in dims) else ""))  # fmt: skip
                batched = batched and kind == want_kind and len(shape) == len(want) + 1 and shape[1:] == want
    if not wrong:
        return
    if batched:
        hint = ("every one has an extra leading axis: a batched Data is stepped through "
                "`jax.vmap(mjl.step, in_axes=(None, 0))`")  # fmt: skip
    elif len(wrong) > LISTED:
        hint = "is this the Data of another model? Make it with `mjl.make_data(m)` from the Model you step"
    else:
        hint = "set them with `d.replace(name=array)` at the shapes the model needs"
    more = f"\n  ... and {len(wrong) - LISTED} more" if len(wrong) > LISTED else ""
    raise ValueError(f"Data does not match the model: {len(wrong)} field(s) of the wrong shape or dtype; {hint}:\n  "
                     + "\n  ".join(wrong[:LISTED]) + more)  # fmt: skip


def as_data(d: Data) -> Data:
    """`d` with any field set to a list, number or numpy array (e.g. by the `Data(...)` constructor) made a jax
    array of its declared dtype (`Data.replace` does this on its own). Entry points call it before tracing."""
    if not isinstance(d, Data):
        return d
    f = d.qvel.dtype if isinstance(d.qvel, jax.Array) else float_dtype()
    out = {}
    for cls, obj in ((Data, d), (Contact, d.contact)):
        loose = {}
        for name in shaped_fields(cls):
            x = getattr(obj, name)
            if not isinstance(x, jax.Array):
                loose[name] = jp.asarray(x, _dtype(field_shape(cls, name)[1], f))
        if loose:
            out[cls] = obj.replace(**loose)
    if not out:
        return d
    d = out.get(Data, d)
    return d.replace(contact=out[Contact]) if Contact in out else d


# Data fields that are not arrays of declared shape (none today): keep the check exhaustive
assert {f.name for f in dataclasses.fields(Data)} == set(shaped_fields(Data)) | {"contact"}
assert {f.name for f in dataclasses.fields(Contact)} == set(shaped_fields(Contact))
