"""mjx_lite: MuJoCo's physics in pure JAX (jit, vmap and grad)."""

import importlib

from mjx_lite import models
from mjx_lite._cache import compilation_cache_dir, enable_compilation_cache
from mjx_lite.collision.driver import active_contacts
from mjx_lite.config import Config
from mjx_lite.data import warnings
from mjx_lite.io import configure
from mjx_lite.mjcf.compile import load_mjcf, load_mjcf_string, load_model
from mjx_lite.mjcf.spec import MJCFError, MJCFNotFoundError, MJCFUnsupportedError, MJCFWarning
from mjx_lite.pipeline.contact_force import contact_force
from mjx_lite.pipeline.inertia import full_m
from mjx_lite.pipeline.ray import ray
from mjx_lite.pipeline.step import forward, inverse, make_data, step, step1, step2
from mjx_lite.types import (
    Builtin,
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
    TextureRole,
    TextureType,
    Warning,
)

enable_compilation_cache()

# Subpackages with heavier imports (flax, optax, the renderer) load on first use: `mjl.envs.make("cartpole_balance")`.
_LAZY = ("derivatives", "envs", "interop", "names", "parallel", "render", "rl", "sysid", "trajopt")


def __getattr__(name: str):
    if name in _LAZY:
        return importlib.import_module(f"mjx_lite.{name}")
    raise AttributeError(f"module 'mjx_lite' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + list(_LAZY))

__all__ = [
    "Builtin",
    "Config",
    "ConeType",
    "Contact",
    "Data",
    "DisableBit",
    "EnableBit",
    "GeomType",
    "IntegratorType",
    "JointType",
    "MJCFError",
    "MJCFNotFoundError",
    "MJCFUnsupportedError",
    "MJCFWarning",
    "Model",
    "ObjType",
    "Option",
    "SolverType",
    "Statistic",
    "TextureRole",
    "TextureType",
    "Warning",
    "active_contacts",
    "compilation_cache_dir",
    "configure",
    "contact_force",
    "forward",
    "full_m",
    "inverse",
    "load_mjcf",
    "load_mjcf_string",
    "load_model",
    "make_data",
    "models",
    "ray",
    "step",
    "step1",
    "step2",
    "warnings",
]
