"""Shared test setup: float64 for the whole session (oracle comparisons against MuJoCo are float64), headless
OpenGL for mujoco.Renderer (the renderer's oracle) unless the environment chose another backend, and a private
compilation cache."""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("MUJOCO_GL", "egl")
# A fresh persistent compilation cache per test process (and the subprocesses it starts), removed at exit: entries
# left by other checkouts or earlier code versions never reach a test run (once, a stale entry written by another
# process aborted a test inside JAX's deserialisation); the cache code itself is still exercised.
if "MJX_LITE_COMPILATION_CACHE" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="mjx_lite_test_cache_")
    os.environ["MJX_LITE_COMPILATION_CACHE"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

import jax  # noqa: E402 - MUJOCO_GL must be set before anything imports mujoco

jax.config.update("jax_enable_x64", True)
