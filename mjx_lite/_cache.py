"""JAX's persistent compilation cache, on by default for mjx_lite users.

Compiling a step takes seconds to tens of seconds; the cache keeps the compiled programs on disk so that a second
process (a restarted notebook kernel, the next training run) loads them instead of compiling again.

`import mjx_lite` turns it on unless the user chose otherwise:
  * `MJX_LITE_COMPILATION_CACHE=0` (or "off", "false"): leave JAX's cache setting alone (off unless set elsewhere);
  * `MJX_LITE_COMPILATION_CACHE=/some/dir`: cache there;
  * unset: `$XDG_CACHE_HOME/mjx_lite/jax` (default `~/.cache/mjx_lite/jax`);
  * if JAX's own cache directory is already set (`JAX_COMPILATION_CACHE_DIR` or `jax.config`), it is kept.
JAX caches only programs that took at least `jax_persistent_cache_min_compile_time_secs` (default 1 s) to compile.
"""

from __future__ import annotations

import os

import jax

__all__ = ["compilation_cache_dir", "enable_compilation_cache"]

_OFF = ("0", "off", "false", "no")


def default_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "mjx_lite", "jax")


def enable_compilation_cache() -> str | None:
    """Apply the rule of the module docstring; returns the cache directory in use (None: off)."""
    choice = os.environ.get("MJX_LITE_COMPILATION_CACHE", "").strip()
    current = jax.config.jax_compilation_cache_dir
    if choice.lower() in _OFF:
        return current or None
    if current:
        return current
    path = choice if choice and choice != "1" else default_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:  # a read-only home: run without the cache rather than fail on import
        return None
    jax.config.update("jax_compilation_cache_dir", path)
    return path


def compilation_cache_dir() -> str | None:
    """The persistent compilation cache directory JAX uses now (None: off)."""
    return jax.config.jax_compilation_cache_dir or None
