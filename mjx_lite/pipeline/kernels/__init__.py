"""Fused Pallas kernels: the second execution path of the pipeline's stages (DESIGN.md, "Two execution paths, one
recipe"; docs/kernels.md).

`Config(kernels="fused")` (or "auto" on a GPU) runs the stages that have a kernel here as Pallas kernels over
blocks of environments; the others stay XLA operations in the same program. pipeline/forward.py keeps the one
stage list: a fused group runs first and the stages it computed are skipped.

  launch.py   the launcher: layouts, the custom_vmap rule that turns the user's vmap into blocks of
              environments, custom_jvp derivatives through the XLA twin
  tree.py     kinematics + com_pos + crb as one kernel (the position-dependent tree pass)
"""

from __future__ import annotations

import jax

from mjx_lite.config import kernels as _kernels
from mjx_lite.pipeline.kernels import launch
from mjx_lite.pipeline.kernels import tree as _tree
from mjx_lite.types import Data, Model

__all__ = ["fused", "launch_of", "tree_pass"]


def fused(m: Model) -> bool:
    """Static: the model runs the fused kernels (`Config.kernels`, "auto" resolved at trace time)."""
    return _kernels(m.config) == "fused"


def launch_of(m: Model) -> launch.Launch:
    """How the kernels launch for `m`: its layout (`Config.kernel_layout`); compiled by Triton on a GPU, Pallas'
    interpret mode elsewhere (at trace time, by JAX's default backend)."""
    return launch.Launch(layout=m.config.kernel_layout, interpret=jax.default_backend() != "gpu")


def tree_pass(m: Model, d: Data) -> tuple[Data, tuple]:
    """The fused tree pass (kinematics, com_pos, crb) when `fused(m)`: (d, names of the stages it computed);
    (d, ()) on the XLA path."""
    if not fused(m):
        return d, ()
    return _tree.tree(m, d, launch_of(m))
