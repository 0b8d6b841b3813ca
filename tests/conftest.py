"""Shared test setup: float64 for the whole session (oracle comparisons against MuJoCo are float64), and
headless OpenGL for mujoco.Renderer (the renderer's oracle) unless the environment chose another backend."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")

import jax  # noqa: E402 - MUJOCO_GL must be set before anything imports mujoco

jax.config.update("jax_enable_x64", True)
