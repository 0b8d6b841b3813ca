"""The one pytree rule of mjx_lite.

`pytree_dataclass` turns a class into a frozen dataclass registered as a JAX pytree. Fields declared with
`static_field()` (integer tables, type codes, topology, names, sizes) are host values carried in the
pytree's auxiliary data; every other field is a leaf (a `jax.Array`, traced under `jit`).

Static values may be numpy arrays. They are compared by content and hashed once, when the object is
built, so passing a `Model` to a jitted function costs no rehashing and two models with equal static
tables share one compiled function.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import jax
import numpy as np

__all__ = ["pytree_dataclass", "static_field", "static_hash"]


def static_field(default: Any = dataclasses.MISSING, **kwargs) -> Any:
    """A dataclass field kept out of the traced leaves (host value, part of the jit cache key)."""
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = True
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata, **kwargs)
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def _digest(value: Any, h: hashlib._Hash) -> None:
    if isinstance(value, np.ndarray):
        h.update(b"nd")
        h.update(str(value.dtype).encode())
        h.update(str(value.shape).encode())
        h.update(np.ascontiguousarray(value).tobytes())
    elif isinstance(value, (tuple, list)):
        h.update(b"(" if isinstance(value, tuple) else b"[")
        for v in value:
            _digest(v, h)
        h.update(b")")
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value):
            _digest(k, h)
            _digest(value[k], h)
        h.update(b"}")
    else:
        h.update(type(value).__name__.encode())
        h.update(repr(value).encode())


def static_hash(value: Any) -> int:
    """Content hash of a host value (numpy arrays, tuples, dicts, scalars, strings)."""
    h = hashlib.blake2b(digest_size=8)
    _digest(value, h)
    return int.from_bytes(h.digest(), "little")


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (
            isinstance(a, np.ndarray)
            and isinstance(b, np.ndarray)
            and a.dtype == b.dtype
            and a.shape == b.shape
            and np.array_equal(a, b)
        )
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


class _Static:
    """Auxiliary data of a pytree_dataclass: the static values, hashed once."""

    __slots__ = ("values", "_hash")

    def __init__(self, values: tuple):
        self.values = values
        self._hash = static_hash(values)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _Static) or self._hash != other._hash:
            return False
        return _equal(self.values, other.values)

    def __repr__(self) -> str:
        return f"_Static(hash={self._hash:#x})"


def pytree_dataclass(cls):
    """Frozen dataclass + JAX pytree; see the module docstring for the static/traced rule."""
    cls = dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=True)(cls)
    fields = dataclasses.fields(cls)
    static_names = tuple(f.name for f in fields if f.metadata.get("static", False))
    leaf_names = tuple(f.name for f in fields if not f.metadata.get("static", False))

    def flatten_with_keys(obj):
        children = tuple((jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in leaf_names)
        cached = obj.__dict__.get("_static_cache")
        if cached is None:
            cached = _Static(tuple(getattr(obj, n) for n in static_names))
            object.__setattr__(obj, "_static_cache", cached)
        return children, cached

    def flatten(obj):
        children, aux = flatten_with_keys(obj)
        return tuple(c for _, c in children), aux

    def unflatten(aux: _Static, children):
        obj = object.__new__(cls)
        for n, v in zip(leaf_names, children):
            object.__setattr__(obj, n, v)
        for n, v in zip(static_names, aux.values):
            object.__setattr__(obj, n, v)
        object.__setattr__(obj, "_static_cache", aux)
        return obj

    jax.tree_util.register_pytree_with_keys(cls, flatten_with_keys, unflatten, flatten)

    def replace(self, **changes):
        """A copy with `changes` applied (static fields keep their hash cache unless changed)."""
        unknown = set(changes) - set(leaf_names) - set(static_names)
        if unknown:
            raise AttributeError(f"{cls.__name__} has no field(s) {sorted(unknown)}")
        obj = object.__new__(cls)
        for n in leaf_names + static_names:
            object.__setattr__(obj, n, changes.get(n, getattr(self, n)))
        if not (set(changes) & set(static_names)) and "_static_cache" in self.__dict__:
            object.__setattr__(obj, "_static_cache", self.__dict__["_static_cache"])
        return obj

    def __repr__(self):  # noqa: N807
        parts = []
        for n in leaf_names + static_names:
            v = getattr(self, n)
            shape = getattr(v, "shape", None)
            parts.append(f"{n}={'array' + str(tuple(shape)) if shape is not None else repr(v)}")
        return f"{cls.__name__}(" + ", ".join(parts) + ")"

    cls.replace = replace
    cls.__repr__ = __repr__
    cls._static_fields = static_names
    cls._leaf_fields = leaf_names
    return cls
