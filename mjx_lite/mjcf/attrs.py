"""Reading typed attributes of spec `Element`s in the compiler passes (one copy, shared by every section module).

The parser (`parse.py`) has already typed every value and checked its count against the schema, so these helpers
only supply defaults, pad vectors and locate errors. Wrong arity is an error everywhere, as in MuJoCo's XML reader
("attribute has too much data"): `vec` raises when an attribute holds more values than the compiled field takes,
it never truncates.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from mjx_lite.mjcf.context import CompileContext
from mjx_lite.mjcf.inertia import normalize
from mjx_lite.mjcf.spec import Element, MJCFError, MJCFUnsupportedError


def error(el: Element, message: str, attribute: str | None = None) -> MJCFError:
    """An MJCFError located at `el` (file, line, tag), optionally naming an attribute."""
    return MJCFError(message, el.file, el.line, el.tag, attribute)


def unsupported(el: Element, message: str, attribute: str | None = None) -> MJCFUnsupportedError:
    """An MJCFUnsupportedError (a MuJoCo feature mjx_lite does not implement) located at `el`."""
    return MJCFUnsupportedError(message, el.file, el.line, el.tag, attribute)


def get(el: Element, name: str, default: Any = None) -> Any:
    """Typed attribute value (None/absent -> `default`)."""
    v = el.attrs.get(name)
    return default if v is None else v


def vec(el: Element, name: str, n: int, default) -> np.ndarray:
    """A real vector attribute of length n: the written values, then `default`'s trailing values (zeros past
    `default`'s end). More than n written values is an error naming the attribute."""
    out = np.array(default, dtype=np.float64).reshape(-1)[:n].copy()
    if out.size < n:
        out = np.concatenate([out, np.zeros(n - out.size)])
    v = el.attrs.get(name)
    if v is None:
        return out
    v = np.atleast_1d(np.asarray(v, dtype=np.float64))
    if v.size > n:
        raise error(el, f"expected at most {n} values, got {v.size}", name)
    out[: v.size] = v
    return out


def keyword(el: Element, name: str, options: tuple[str, ...], default: str) -> int:
    """Index of a keyword attribute's value in `options` (case-insensitive)."""
    v = get(el, name, default)
    if isinstance(v, (int, np.integer)):
        return int(v)
    for i, o in enumerate(options):
        if str(v).lower() == o.lower():
            return i
    raise error(el, f"invalid value '{v}' (expected one of {', '.join(options)})", name)


def quat(el: Element, name: str = "quat") -> np.ndarray:
    """A quaternion attribute (w, x, y, z) normalised as MuJoCo's compiler does (mjuu_normvec: left as written when
    its squared norm is below mjEPS), except the quaternion of an orientation alternative of a body, geom or inertial,
    which MuJoCo uses as computed (Element.raw_quat). (The parser refuses an all-zero quaternion as written, as MuJoCo's
    reader does.)"""
    q = vec(el, name, 4, (1, 0, 0, 0))
    return q if name == "quat" and el.raw_quat else normalize(q)[0]


def bool_auto(v) -> str:
    """'true' | 'false' | 'auto' from a typed bool/auto_bool value (None -> 'auto')."""
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    return str(v).lower() if v is not None else "auto"


def compiler(ctx: CompileContext, el: Element | None) -> dict[str, Any]:
    """The compiler settings that apply to `el`: those of the model it was written in (an element attached from
    another model by <attach> keeps that model's angle, autolimits, inertia and asset settings), else the top-level
    model's."""
    return el.compiler if el is not None and el.compiler is not None else ctx.compiler


def autolimits(ctx: CompileContext, el: Element | None = None) -> bool:
    """The <compiler autolimits> setting (of the model `el` comes from, see `compiler`)."""
    v = compiler(ctx, el).get("autolimits", True)
    return v if isinstance(v, bool) else str(v) == "true"


def resolve_limited(el: Element, flag_attr: str, range_attr: str, autolimits: bool, entity: str) -> bool:
    """MuJoCo's limited/autolimits rule.

    'true'/'false' are taken as is; 'auto' with autolimits means range[0] < range[1]; 'auto' without autolimits
    is an error if the range is nonzero (MuJoCo: "has `range` but not `limited`"), else False.
    """
    flag = bool_auto(el.attrs.get(flag_attr, "auto"))
    if flag == "true":
        return True
    if flag == "false":
        return False
    if flag != "auto":
        raise error(el, f"invalid keyword '{flag}' (expected false, true or auto)", flag_attr)
    rng = vec(el, range_attr, 2, (0.0, 0.0))
    if autolimits:
        return bool(rng[0] < rng[1])
    if np.any(rng != 0):
        raise error(
            el,
            f'{entity} has `{range_attr}` but not `{flag_attr}`: set the autolimits="true" compiler option, '
            f"specify `{flag_attr}` explicitly, or remove `{range_attr}`",
            range_attr,
        )
    return False


def sections(root: Element, tag: str) -> list[Element]:
    """The top-level sections of the model with this tag."""
    return [c for c in root.children if c.tag == tag]


def section_children(root: Element, section: str) -> list[Element]:
    """All children of every <section> element of the model root, in document order."""
    out: list[Element] = []
    for sec in root.find(section):
        out.extend(sec.children)
    return out


def frame_children(el: Element, tags: tuple[str, ...]) -> list[Element]:
    """Children with these tags, looking through <frame> containers (the parser folds frame poses)."""
    out = []
    for c in el.children:
        if c.tag == "frame":
            out.extend(frame_children(c, tags))
        elif c.tag in tags:
            out.append(c)
    return out


def name_of(el: Element) -> str | None:
    n = el.attrs.get("name")
    return n if n else None


def register(ctx: CompileContext, objtype: str, el: Element, index: int) -> str:
    """Record element `el` as object `index` of `objtype`; raise on a repeated name. Returns the name."""
    ctx.elements.setdefault(objtype, []).append(el)
    ids = ctx.ids.setdefault(objtype, {})
    name = get(el, "name", "") or ""
    if name:
        if name in ids:
            raise error(el, f"repeated name '{name}' in {objtype}", "name")
        ids[name] = index
    return name


def register_all(ctx: CompileContext, objtype: str, elements: list[Element]) -> None:
    """Fill ctx.ids / ctx.elements for a new object type (names must be unique)."""
    ctx.ids[objtype] = {}
    ctx.elements[objtype] = []
    for i, el in enumerate(elements):
        register(ctx, objtype, el, i)
