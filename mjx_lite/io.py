"""Host-side assembly of `Model` from numpy arrays, and `make_data` (mj_makeData)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite import types
from mjx_lite.config import Config
from mjx_lite.types import NWARNING, Contact, Data, Model, Option, Statistic

_OPTION_STATIC = {f.name for f in dataclasses.fields(Option) if f.metadata.get("static")}


def _float_dtype():
    return jp.float64 if jax.config.jax_enable_x64 else jp.float32


def _to_device(a) -> jax.Array:
    """Host float array -> device array of the float dtype (device_put: no per-shape XLA compilation)."""
    return jax.device_put(np.asarray(np.asarray(a, dtype=np.float64), dtype=_float_dtype()))


def build_model(
    arrays: Mapping[str, np.ndarray],
    sizes: Mapping[str, int],
    opt: Mapping[str, Any],
    stat: Mapping[str, Any],
    names: Mapping[str, tuple],
    config: Config | None = None,
) -> Model:
    """Assemble a `Model` from host arrays named as in mjModel.

    Integer/boolean arrays stay host numpy (static); float arrays become `jax.Array` leaves. Missing
    arrays are an error, so every producer (the MJCF compiler, test converters) fills every field.
    Contact and constraint capacities (`nconmax`, `njmax`) are derived here from the static tables.
    """
    fields = {f.name: f for f in dataclasses.fields(Model)}
    if "mesh_hullvert" not in arrays and "mesh_vert" in arrays:  # hull tables not given (e.g. from mujoco)
        from mjx_lite.mjcf.mesh import hull_tables

        arrays = {**arrays, **hull_tables(arrays["mesh_vert"], arrays["mesh_vertadr"], arrays["mesh_vertnum"])}
    if "mesh_polyvert" not in arrays and "mesh_vert" in arrays:  # polygon tables not given
        from mjx_lite.mjcf.mesh import polygon_tables_from_vert

        arrays = {**arrays, **polygon_tables_from_vert(arrays["mesh_vert"], arrays["mesh_vertadr"],
                                                       arrays["mesh_vertnum"])}  # fmt: skip
    kw: dict[str, Any] = {}
    for name, f in fields.items():
        if name in ("opt", "stat", "names", "nconmax", "njmax", "dof_frictional", "tendon_frictional", "tendon_armed",
                    "geom_reach0", "hfield_cell0", "config"):
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
        v = opt[f.name]
        o[f.name] = int(v) if f.name in _OPTION_STATIC else _to_device(v)
    kw["opt"] = Option(**o)
    kw["stat"] = Statistic(**{k: _to_device(stat[k]) for k in
                              ("meaninertia", "meanmass", "meansize", "extent", "center")})
    kw["names"] = {k: tuple(v) for k, v in names.items()}
    for flag, src in (("dof_frictional", "dof_frictionloss"), ("tendon_frictional", "tendon_frictionloss")):
        kw[flag] = np.asarray(arrays[src], np.float64) > 0
        kw[flag].setflags(write=False)
    armed = np.asarray(arrays["tendon_armature"], np.float64) > 0
    trn = np.asarray(arrays["actuator_trntype"])
    for i in np.nonzero((trn == types.TrnType.TENDON) & (np.asarray(arrays["actuator_armature"]) > 0))[0]:
        armed[int(np.asarray(arrays["actuator_trnid"])[i, 0])] = True
    armed.setflags(write=False)
    kw["tendon_armed"] = armed
    rbound = np.asarray(arrays["geom_rbound"], np.float64)
    inflate = np.asarray(arrays["geom_margin"], np.float64) + np.asarray(arrays["geom_gap"], np.float64)
    reach = np.stack([rbound, inflate], axis=-1).reshape(-1, 2)
    hsize = np.asarray(arrays["hfield_size"], np.float64).reshape(-1, 4)
    nrow = np.asarray(arrays["hfield_nrow"]).reshape(-1)
    ncol = np.asarray(arrays["hfield_ncol"]).reshape(-1)
    cell = np.stack([2 * hsize[:, 0] / np.maximum(ncol - 1, 1), 2 * hsize[:, 1] / np.maximum(nrow - 1, 1)], axis=-1)
    for name, v in (("geom_reach0", reach), ("hfield_cell0", cell.reshape(-1, 2))):
        v = np.array(v, np.float64)
        v.setflags(write=False)
        kw[name] = v
    m = Model(nconmax=0, njmax=0, config=Config() if config is None else config, **kw)
    return _with_capacities(m)


def configure(m: Model, config: Config | None = None, **changes) -> Model:
    """A copy of `m` with configuration `config` (or `m.config` with `changes`), capacities recomputed.

    Example: `m = mjx_lite.configure(m, gradients="unrolled", exact_reset=True)`. See `mjx_lite.Config`.
    """
    cfg = m.config if config is None else config
    if not isinstance(cfg, Config):
        raise TypeError(f"configure: config must be a mjx_lite.Config, not {type(cfg).__name__}")
    cfg = cfg.replace(**changes) if changes else cfg
    return _with_capacities(_replace_static_unchecked(m, config=cfg, nconmax=0, njmax=0))


def _replace_static_unchecked(m: Model, **changes) -> Model:
    """m.replace without Model's config check (configure recomputes the capacities right after)."""
    obj = object.__new__(Model)
    for n in Model._leaf_fields + Model._static_fields:
        object.__setattr__(obj, n, changes.get(n, getattr(m, n)))
    return obj


def _with_capacities(m: Model) -> Model:
    nconmax, njmax = _capacities(m)
    return m.replace(nconmax=nconmax, njmax=njmax)


def _capacities(m: Model) -> tuple[int, int]:
    """Static sizes of the padded contact and constraint arrays."""
    nconmax = 0
    njmax = 0
    try:
        from mjx_lite.collision import driver
    except ImportError:  # collision not built yet
        driver = None
    if driver is not None and hasattr(driver, "contact_capacity"):
        nconmax = int(driver.contact_capacity(m))
    try:
        from mjx_lite.pipeline import constraint
    except ImportError:
        constraint = None
    if constraint is not None and hasattr(constraint, "efc_capacity"):
        njmax = int(constraint.efc_capacity(m, nconmax))
    return nconmax, njmax


def make_data(m: Model) -> Data:
    """Data at `qpos0`, zero velocity and controls (mj_makeData + mj_resetData)."""
    f = _float_dtype()
    i = jp.int32

    def z(*shape, dtype=f):
        return jp.zeros(shape, dtype=dtype)

    nc, nj = m.nconmax, m.njmax
    from mjx_lite.pipeline import inertia  # qM/qLD layout: dense (nv, nv) or tree-sparse (nM,), see inertia.py

    qm_shape = inertia.qm_shape(m)
    contact = Contact(
        dist=z(nc), pos=z(nc, 3), frame=z(nc, 3, 3), includemargin=z(nc), friction=z(nc, 5),
        solref=z(nc, 2), solreffriction=z(nc, 2), solimp=z(nc, 5), dim=z(nc, dtype=i), geom=z(nc, 2, dtype=i),
        efc_address=jp.full((nc,), -1, i), active=z(nc, dtype=bool),
    )  # fmt: skip
    mocap_body = np.nonzero(np.asarray(m.body_mocapid) >= 0)[0]
    mocap_order = np.argsort(np.asarray(m.body_mocapid)[mocap_body])
    mocap_body = mocap_body[mocap_order]
    mocap_pos = jp.asarray(m.body_pos)[mocap_body] if m.nmocap else z(0, 3)
    mocap_quat = jp.asarray(m.body_quat)[mocap_body] if m.nmocap else z(0, 4)
    return Data(
        time=z(), qpos=jp.asarray(m.qpos0, f), qvel=z(m.nv), act=z(m.na), qacc_warmstart=z(m.nv),
        ctrl=z(m.nu), qfrc_applied=z(m.nv), xfrc_applied=z(m.nbody, 6),
        eq_active=jp.asarray(np.asarray(m.eq_active0, bool)), mocap_pos=mocap_pos.astype(f),
        mocap_quat=mocap_quat.astype(f), qacc=z(m.nv), act_dot=z(m.na),
        warning_number=z(NWARNING, dtype=i), solver_niter=z(dtype=i), solver_improvement=z(),
        solver_gradient=z(), solver_fwdinv=z(2), energy=z(2),
        xpos=z(m.nbody, 3), xquat=z(m.nbody, 4), xmat=z(m.nbody, 3, 3), xipos=z(m.nbody, 3),
        ximat=z(m.nbody, 3, 3), xanchor=z(m.njnt, 3), xaxis=z(m.njnt, 3), geom_xpos=z(m.ngeom, 3),
        geom_xmat=z(m.ngeom, 3, 3), site_xpos=z(m.nsite, 3), site_xmat=z(m.nsite, 3, 3), cam_xpos=z(m.ncam, 3),
        cam_xmat=z(m.ncam, 3, 3), subtree_com=z(m.nbody, 3), cdof=z(m.nv, 6), cinert=z(m.nbody, 10),
        crb=z(m.nbody, 10), ten_wrapadr=z(m.ntendon, dtype=i), ten_wrapnum=z(m.ntendon, dtype=i),
        ten_J=z(m.ntendon, m.nv), ten_length=z(m.ntendon), wrap_obj=z(m.nwrap, 2, dtype=i),
        wrap_xpos=z(m.nwrap, 6), actuator_length=z(m.nu), actuator_moment=z(m.nu, m.nv),
        qM=z(*qm_shape), qLD=z(*qm_shape), qLDiagInv=z(m.nv),
        ncon=z(dtype=i), contact=contact, nefc=z(dtype=i), efc_type=z(nj, dtype=i), efc_id=z(nj, dtype=i),
        efc_mask=z(nj, dtype=bool), efc_J=z(nj, m.nv), efc_pos=z(nj), efc_margin=z(nj),
        efc_frictionloss=z(nj), efc_diagA=z(nj), efc_KBIP=z(nj, 4), efc_D=z(nj), efc_R=z(nj),
        efc_vel=z(nj), efc_aref=z(nj), efc_b=z(nj), efc_force=z(nj), efc_state=z(nj, dtype=i),
        actuator_velocity=z(m.nu), cvel=z(m.nbody, 6), cdof_dot=z(m.nv, 6), qfrc_bias=z(m.nv),
        qfrc_spring=z(m.nv), qfrc_damper=z(m.nv), qfrc_gravcomp=z(m.nv), qfrc_fluid=z(m.nv),
        qfrc_passive=z(m.nv), ten_velocity=z(m.ntendon), subtree_linvel=z(m.nbody, 3),
        subtree_angmom=z(m.nbody, 3), actuator_force=z(m.nu), qfrc_actuator=z(m.nv), qfrc_smooth=z(m.nv),
        qacc_smooth=z(m.nv), qfrc_constraint=z(m.nv), qfrc_inverse=z(m.nv), cacc=z(m.nbody, 6),
        cfrc_int=z(m.nbody, 6), cfrc_ext=z(m.nbody, 6), sensordata=z(m.nsensordata),
    )  # fmt: skip
