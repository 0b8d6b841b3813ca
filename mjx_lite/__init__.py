"""mjx_lite: MuJoCo's physics in pure JAX (jit, vmap and grad)."""

from mjx_lite.io import make_data
from mjx_lite.types import Contact, Data, Model, Option, Statistic

__all__ = ["Contact", "Data", "Model", "Option", "Statistic", "make_data"]
