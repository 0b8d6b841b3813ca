"""mjx_lite: MuJoCo's physics in pure JAX (jit, vmap and grad)."""

from mjx_lite import models
from mjx_lite.collision.driver import active_contacts
from mjx_lite.config import Config
from mjx_lite.io import configure, make_data
from mjx_lite.mjcf.compile import load_mjcf, load_mjcf_string
from mjx_lite.pipeline.forward import forward, step, step1, step2
from mjx_lite.pipeline.inertia import full_m
from mjx_lite.pipeline.inverse import contact_force, inverse
from mjx_lite.types import (
    ConeType,
    Contact,
    Data,
    DisableBit,
    EnableBit,
    GeomType,
    IntegratorType,
    JointType,
    Model,
    ObjType,
    Option,
    SolverType,
    Statistic,
    Warning,
)

__all__ = [
    "Config",
    "ConeType",
    "Contact",
    "Data",
    "DisableBit",
    "EnableBit",
    "GeomType",
    "IntegratorType",
    "JointType",
    "Model",
    "ObjType",
    "Option",
    "SolverType",
    "Statistic",
    "Warning",
    "active_contacts",
    "configure",
    "contact_force",
    "forward",
    "full_m",
    "inverse",
    "load_mjcf",
    "load_mjcf_string",
    "make_data",
    "models",
    "step",
    "step1",
    "step2",
]
