"""Task registry: `envs.make(name, **kwargs)`, `envs.names()`, `envs.register(name, factory)`."""

from __future__ import annotations

import difflib
from collections.abc import Callable

from mjx_lite.envs.base import Env

__all__ = ["make", "names", "register"]

_TASKS: dict[str, Callable[..., Env]] = {}


def register(name: str, factory: Callable[..., Env]) -> None:
    """Register `factory(**kwargs) -> Env` under `name` (an existing name is an error)."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"task name must be a non-empty string, not {name!r}")
    if name in _TASKS:
        raise ValueError(f"task {name!r} is already registered")
    _TASKS[name] = factory


def names() -> list[str]:
    """Registered task names, sorted."""
    return sorted(_TASKS)


def make(name: str, **kwargs) -> Env:
    """A new environment of the registered task `name` (keyword arguments go to its constructor)."""
    if name not in _TASKS:
        close = difflib.get_close_matches(str(name), names(), n=3)
        hint = f" (did you mean {' or '.join(repr(n) for n in close)}?)" if close else ""
        raise ValueError(f"unknown task {name!r}{hint}; registered tasks: {', '.join(names())}")
    env = _TASKS[name](**kwargs)
    env._name = name
    return env
