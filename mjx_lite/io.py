"""Host-side assembly of `Model` from numpy arrays (`build_model`) and its configuration (`configure`). The top of the
core: the capacities of the padded contact/constraint arrays come from `pipeline.capacity` (the collision driver
and the constraint plan size Data; `configure` is re-exported from there), `make_data` from `mjx_lite.data`."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from mjx_lite import types
from mjx_lite.collision import occlusion
from mjx_lite.config import Config
from mjx_lite.data import float_dtype, make_data
from mjx_lite.pipeline.capacity import _with_capacities, configure
from mjx_lite.types import Model, ModelSource, Option, Statistic, Visual

__all__ = ["build_model", "configure", "make_data"]

_OPTION_STATIC = {f.name for f in dataclasses.fields(Option) if f.metadata.get("static")}


def _to_device(a) -> jax.Array:
    """Host float array -> device array of the float dtype (device_put: no per-shape XLA compilation)."""
    return jax.device_put(np.asarray(np.asarray(a, dtype=np.float64), dtype=float_dtype()))


_PLUGIN_FIELDS = ("nplugin", "npluginstate", "plugin", "plugin_stateadr", "plugin_statenum", "actuator_plugin",
                  "sensor_plugin", "actuator_pluginprm", "actuator_pluginslot")  # fmt: skip


def _plugin_fields(arrays: Mapping[str, np.ndarray], sizes: Mapping[str, int]) -> dict[str, Any]:
    """The plugin fields of Model (types.py) from `arrays`, defaulting to a model without plugins where absent (other
    producers than the MJCF compiler: MuJoCo's arrays have no actuator_pluginprm / actuator_pluginslot)."""
    nu_, ns = int(sizes["nactuator"]), int(sizes["nsensor"])

    def static(name, default):
        a = np.array(arrays.get(name, default), np.int32).reshape(np.shape(default))
        a.setflags(write=False)
        return a

    plugin = np.asarray(arrays.get("plugin", np.zeros(0)), np.int32).reshape(-1)
    n = plugin.size
    kw = {"nplugin": n, "plugin": static("plugin", np.zeros(n)), "plugin_stateadr": static("plugin_stateadr",
          np.zeros(n)), "plugin_statenum": static("plugin_statenum", np.zeros(n)),
          "actuator_plugin": static("actuator_plugin", -np.ones(nu_)), "sensor_plugin": static("sensor_plugin",
          -np.ones(ns)), "actuator_pluginslot": static("actuator_pluginslot", -np.ones((nu_, 2)))}  # fmt: skip
    kw["npluginstate"] = int(np.sum(kw["plugin_statenum"]))
    kw["actuator_pluginprm"] = _to_device(np.asarray(arrays.get("actuator_pluginprm", np.zeros((nu_, 5))),
                                                     np.float64).reshape(nu_, 5))  # fmt: skip
    return kw


def build_model(
    arrays: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    opt: Mapping[str, Any],
    stat: Mapping[str, Any],
    names: Mapping[str, tuple],
    config: Config | None = None,
    vis: Mapping[str, Mapping[str, Any]] | None = None,
    source: ModelSource | None = None,
) -> Model:
    """Assemble a `Model` from host arrays named as in mjModel.

    Integer/boolean arrays stay host numpy (static); float arrays become `jax.Array` leaves. Missing
    arrays are an error, so every producer (the MJCF compiler, test converters) fills every field.
    Contact and constraint capacities (`nconmax`, `njmax`) are derived here from the static tables.
    `vis`: {group: {field: value}} of `types.Visual` (`types.VISUAL_DEFAULTS` for what is not given);
    `source`: the MJCF the model was compiled from (`types.ModelSource`), None for other producers.
    """
    fields = {f.name: f for f in dataclasses.fields(Model)}
    kw: dict[str, Any] = {}
    for name, f in fields.items():
        if name in ("opt", "stat", "vis", "source", "names", "nconmax", "njmax", "size_nconmax", "size_njmax",
                    "dof_frictional", "tendon_frictional", "tendon_armed", "jnt_limit_onerow", "tendon_limit_onerow",
                    "geom_reach0", "hfield_cell0", "flex_reach0", "geom_occluder0", "config", "ngravcomp",
                    "fluid_active", "flg_surfacevel", "flg_adhesion", "actuator_actslot", "geom_sdf",
                    "sensor_plugincfg", *_PLUGIN_FIELDS):  # fmt: skip
            continue
        if name in types.SIZE_FIELDS:
            kw[name] = int(sizes[name])
            continue
        if name not in arrays:
            raise KeyError(f"build_model: missing array {name!r}")
        a = np.asarray(arrays[name])
        if f.metadata.get("static"):
            kw[name] = np.array(a, dtype=bool if a.dtype == bool else np.int32 if a.dtype.kind in "iu" else a.dtype)
            kw[name].setflags(write=False)
        else:
            kw[name] = _to_device(a)
    o = {}
    for f in dataclasses.fields(Option):
        if f.name not in opt and f.default is not dataclasses.MISSING:  # (options added later: their default)
            o[f.name] = f.default
            continue
        v = opt[f.name]
        o[f.name] = int(v) if f.name in _OPTION_STATIC else _to_device(v)
    kw["opt"] = Option(**o)
    kw["stat"] = Statistic(**{k: _to_device(stat[k]) for k in
                              ("meaninertia", "meanmass", "meansize", "extent", "center")})
    kw["vis"] = _visual(vis or {})
    kw["source"] = source
    kw["sensor_plugincfg"] = tuple(arrays.get("sensor_plugincfg", ()))
    kw["geom_sdf"] = tuple(arrays.get("geom_sdf", ())) if any(g is not None for g in arrays.get("geom_sdf", ())) else ()
    kw.update(_plugin_fields(arrays, sizes))
    kw["names"] = {k: tuple(v) for k, v in names.items()}
    for flag, src in (("dof_frictional", "dof_frictionloss"), ("tendon_frictional", "tendon_frictionloss")):
        kw[flag] = np.asarray(arrays[src], np.float64) > 0
        kw[flag].setflags(write=False)
    # one limit row where the compiled range is at least twice the margin (both sides cannot be active at once)
    for flag, rng, margin in (("jnt_limit_onerow", "jnt_range", "jnt_margin"),
                              ("tendon_limit_onerow", "tendon_range", "tendon_margin")):  # fmt: skip
        r = np.asarray(arrays[rng], np.float64).reshape(-1, 2)
        kw[flag] = (r[:, 1] - r[:, 0]) >= 2 * np.asarray(arrays[margin], np.float64).reshape(-1)
        kw[flag].setflags(write=False)
    armed = np.asarray(arrays["tendon_armature"], np.float64) > 0
    trn = np.asarray(arrays["actuator_trntype"])
    for i in np.nonzero((trn == types.TrnType.TENDON) & (np.asarray(arrays["actuator_armature"]) > 0))[0]:
        armed[int(np.asarray(arrays["actuator_trnid"])[i, 0])] = True
    armed.setflags(write=False)
    kw["tendon_armed"] = armed
    slots = types.actuator_slots(arrays["actuator_dyntype"], arrays["actuator_dynprm"], arrays["actuator_gainprm"])
    slots.setflags(write=False)
    kw["actuator_actslot"] = slots
    rbound = np.asarray(arrays["geom_rbound"], np.float64)
    inflate = np.asarray(arrays["geom_margin"], np.float64) + np.asarray(arrays["geom_gap"], np.float64)
    reach = np.stack([rbound, inflate], axis=-1).reshape(-1, 2)
    hsize = np.asarray(arrays["hfield_size"], np.float64).reshape(-1, 4)
    nrow = np.asarray(arrays["hfield_nrow"]).reshape(-1)
    ncol = np.asarray(arrays["hfield_ncol"]).reshape(-1)
    cell = np.stack([2 * hsize[:, 0] / np.maximum(ncol - 1, 1), 2 * hsize[:, 1] / np.maximum(nrow - 1, 1)], axis=-1)
    elen = np.asarray(arrays["flexedge_length0"], np.float64).reshape(-1)
    eadr, enum = np.asarray(arrays["flex_edgeadr"]).reshape(-1), np.asarray(arrays["flex_edgenum"]).reshape(-1)
    longest = [float(np.max(elen[a : a + n], initial=0.0)) for a, n in zip(eadr, enum)]
    finflate = sum(np.asarray(arrays[k], np.float64).reshape(-1) for k in ("flex_radius", "flex_margin", "flex_gap"))
    freach = np.stack([np.asarray(longest, np.float64).reshape(-1), np.asarray(finflate).reshape(-1)], -1)
    for name, v in (("geom_reach0", reach), ("hfield_cell0", cell.reshape(-1, 2)), ("flex_reach0", freach)):
        v = np.array(v, np.float64)
        v.setflags(write=False)
        kw[name] = v
    occ = occlusion.snapshot(arrays)
    occ.setflags(write=False)
    kw["geom_occluder0"] = occ
    # MuJoCo counts the bodies with gravcomp > 0 (negative or NaN values alone leave the model without it)
    kw["ngravcomp"] = int(np.count_nonzero(np.asarray(arrays["body_gravcomp"], np.float64) > 0))
    kw["fluid_active"] = bool(float(opt["density"]) > 0 or float(opt["viscosity"]) > 0)
    kw["flg_surfacevel"] = bool(np.any(np.asarray(arrays["geom_surfacevel"]) != 0))
    kw["flg_adhesion"] = bool(np.any(np.asarray(arrays["geom_adhesion"]) != 0)
                              or np.any(np.asarray(arrays.get("pair_adhesion", np.zeros(0))) != 0))
    for name in ("nconmax", "njmax"):  # MuJoCo's <size nconmax njmax> (mjModel.nconmax / njmax); -1: not given
        v = int(sizes.get(name, -1))
        if v < -1:
            raise ValueError(f"build_model: {name} must be >= -1, not {v}")
        kw["size_" + name] = v
    m = Model(nconmax=0, njmax=0, config=Config() if config is None else config, **kw)
    return _with_capacities(m)


def _visual(vis: Mapping[str, Mapping[str, Any]]) -> Visual:
    """`types.Visual` from {group: {field: value}} over MuJoCo's defaults (floats traced, ints static)."""
    groups = {}
    for group, cls in types.VISUAL_GROUPS.items():
        given = dict(vis.get(group, {}))
        unknown = set(given) - set(types.VISUAL_DEFAULTS[group])
        if unknown:
            raise KeyError(f"build_model: unknown vis.{group} fields {sorted(unknown)}")
        kw = {}
        for f in dataclasses.fields(cls):
            v = given.get(f.name, types.VISUAL_DEFAULTS[group][f.name])
            kw[f.name] = int(v) if f.metadata.get("static") else _to_device(v)
        groups[group] = cls(**kw)
    return Visual(**groups)


