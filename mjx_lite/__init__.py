"""mjx_lite: MuJoCo's physics in pure JAX (jit, vmap and grad)."""

from mjx_lite.collision.driver import active_contacts
from mjx_lite.io import make_data
from mjx_lite.mjcf.compile import load_mjcf, load_mjcf_string
from mjx_lite.pipeline.forward import forward, step, step1, step2
from mjx_lite.pipeline.inertia import full_m
from mjx_lite.pipeline.inverse import contact_force, inverse
from mjx_lite.types import Contact, Data, Model, Option, Statistic

__all__ = [
    "active_contacts",
    "Contact",
    "Data",
    "Model",
    "Option",
    "Statistic",
    "contact_force",
    "forward",
    "full_m",
    "inverse",
    "load_mjcf",
    "load_mjcf_string",
    "make_data",
    "step",
    "step1",
    "step2",
]
