"""The one pytree rule of mjx_lite.

`pytree_dataclass` turns a class into a frozen dataclass registered as a JAX pytree. Fields declared with
`static_field()` (integer tables, type codes, topology, names, sizes) are host values carried in the
pytree's auxiliary data; every other field is a leaf (a `jax.Array`, traced under `jit`).

Static values may be numpy arrays. They are compared by content and hashed once, when the object is
built, so passing a `Model` to a jitted function costs no rehashing and two models with equal static
tables share one compiled function.

Plans. `static_memo(obj, name, build)` memoises a host-side plan (pair tables, constraint row plans, tree
tables) on the object's static part: it is built once, from the object's static values only, and kept while
only traced leaves change (`replace` of floats, `vmap`/`jit` flattening and unflattening the same static
part). Any change of a static field makes a new static part, so its plans are rebuilt: there is no cache with
a hand-written key that could leave out a field a plan depends on.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

__all__ = ["pytree_dataclass", "shaped", "static_field", "static_hash", "static_memo"]


def static_field(default: Any = dataclasses.MISSING, *, shape: tuple | None = None, dtype: str | None = None,
                 **kwargs) -> Any:
    """A dataclass field kept out of the traced leaves (host value, part of the jit cache key).

    `shape`/`dtype`: the declared shape (dimension names of size fields, ints, or expressions like "nmocap*3")
    and dtype ("int32", "bool", "uint8", "float64") of an array field; see `shaped`.
    """
    metadata = dict(kwargs.pop("metadata", {}) or {})
    metadata["static"] = True
    if shape is not None:
        metadata["shape"] = tuple(shape)
        metadata["dtype"] = dtype
    if default is dataclasses.MISSING:
        return dataclasses.field(metadata=metadata, **kwargs)
    return dataclasses.field(default=default, metadata=metadata, **kwargs)


def shaped(*dims, dtype: str = "float") -> Any:
    """A traced array field with a declared shape: `xpos: jax.Array = shaped("nbody", 3)`.

    `dims` are ints or names resolved against the owner's sizes (`mjx_lite.types.resolve_shape`); `dtype` is
    "float" (the model's float dtype), "int32" or "bool".
    """
    return dataclasses.field(metadata={"shape": tuple(dims), "dtype": dtype})


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

    __slots__ = ("values", "_hash", "plans")

    def __init__(self, values: tuple):
        self.values = values
        self._hash = static_hash(values)
        self.plans: dict = {}

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


def _static_part(obj) -> _Static:
    cached = obj.__dict__.get("_static_cache")
    if cached is None:
        cached = _Static(tuple(getattr(obj, n) for n in type(obj)._static_fields))
        object.__setattr__(obj, "_static_cache", cached)
    return cached


def static_memo(obj, name: str, build: Callable[[Any], Any]) -> Any:
    """`build(obj)`, computed once per static part of the pytree_dataclass `obj` and memoised under `name`.

    The static part includes those of nested pytree_dataclass fields (e.g. a Model's `opt`: its integer options
    and flags). `build` must read only static values (host values): the result is shared by every object with
    the same static part, whatever its traced leaves.
    """
    key = (name,) + tuple(_static_part(v) for v in _nodes(obj))
    plans = _static_part(obj).plans
    if key not in plans:
        plans[key] = build(obj)
    return plans[key]


def _nodes(obj) -> list:
    """The values of `obj`'s traced fields that are pytree_dataclasses themselves (recursively)."""
    out = []
    for n in type(obj)._leaf_fields:
        v = getattr(obj, n)
        if hasattr(type(v), "_static_fields"):
            out.append(v)
            out.extend(_nodes(v))
    return out


# a concrete array of at most this many values prints them (at its own precision: float32 0.01, not 0.009999999776)
_REPR_VALUES = 6


def _short_repr(v: Any) -> str:
    """A field in a pytree_dataclass's repr: small concrete arrays by value, others by shape (`array(nbody, 3)`)."""
    shape = getattr(v, "shape", None)
    if shape is None:
        return repr(v)
    if isinstance(v, jax.core.Tracer) or int(np.prod(shape)) > _REPR_VALUES:
        return f"array{tuple(shape)}"
    return np.array2string(np.asarray(v), separator=", ")


def pytree_dataclass(cls):
    """Frozen dataclass + JAX pytree; see the module docstring for the static/traced rule."""
    cls = dataclasses.dataclass(frozen=True, eq=False, repr=False, kw_only=True)(cls)
    fields = dataclasses.fields(cls)
    static_names = tuple(f.name for f in fields if f.metadata.get("static", False))
    leaf_names = tuple(f.name for f in fields if not f.metadata.get("static", False))

    def flatten_with_keys(obj):
        children = tuple((jax.tree_util.GetAttrKey(n), getattr(obj, n)) for n in leaf_names)
        return children, _static_part(obj)

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
        check = getattr(cls, "_check_replace", None)
        if check is not None:
            check(self, changes)
        coerce = getattr(cls, "_coerce_replace", None)
        if coerce is not None:
            changes = coerce(self, changes)
        obj = object.__new__(cls)
        for n in leaf_names + static_names:
            object.__setattr__(obj, n, changes.get(n, getattr(self, n)))
        if not (set(changes) & set(static_names)) and "_static_cache" in self.__dict__:
            object.__setattr__(obj, "_static_cache", self.__dict__["_static_cache"])
        return obj

    def __repr__(self):  # noqa: N807
        parts = (f"{n}={_short_repr(getattr(self, n))}" for n in leaf_names + static_names)
        return f"{cls.__name__}(" + ", ".join(parts) + ")"

    def __setattr__(self, name, value):  # noqa: N807
        hint = {
            "Model": f"m = m.replace({name}=...)",
            "Data": f"d = d.replace({name}=...)",
            "Option": f"m = m.replace(opt=m.opt.replace({name}=...))",
            "Statistic": f"m = m.replace(stat=m.stat.replace({name}=...))",
            "Contact": f"d = d.replace(contact=d.contact.replace({name}=...))",
        }.get(cls.__name__, f"x = x.replace({name}=...)")
        hint = f"use `{hint}`"
        raise dataclasses.FrozenInstanceError(f"{cls.__name__} is immutable (a JAX pytree): {hint}")

    def __delattr__(self, name):  # noqa: N807
        raise dataclasses.FrozenInstanceError(f"{cls.__name__} is immutable: cannot delete {name!r}")

    cls.replace = replace
    cls.__repr__ = __repr__
    cls.__setattr__ = __setattr__
    cls.__delattr__ = __delattr__
    cls._static_fields = static_names
    cls._leaf_fields = leaf_names
    return cls
