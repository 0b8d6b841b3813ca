"""The spec tree: what the parser hands to the compiler.

`parse.py` turns MJCF XML into a tree of `Element`s with includes expanded, `frame`s folded into their
children's poses, default classes applied (the modeling guide's CSS-like rules: element attributes override
the active class, which inherits from its parent class, which falls back to MuJoCo's built-in defaults), and
every value typed per the schema. The compiler (`compile.py` and its helpers) reads only this tree.

Schema format (`schema.py`, `schema_actuation.py`): for each element tag, a dict attribute -> `Attr`.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any


@dataclasses.dataclass(frozen=True)
class Attr:
    """Type of one MJCF attribute.

    kind:  'real' | 'int' | 'string' | 'keyword' | 'bool' ('true'/'false') | 'auto_bool' ('false'/'true'/'auto')
    count: number of values for 'real'/'int' (1 -> a Python scalar, n -> np.ndarray of shape (n,));
           -1 = any length (np.ndarray), (lo, hi) = a length between lo and hi
    default: MuJoCo's built-in default (already typed), or None where the attribute is unset by default
    keywords: allowed values for 'keyword'
    """

    kind: str
    count: Any = 1
    default: Any = None
    keywords: tuple[str, ...] = ()


@dataclasses.dataclass
class Element:
    """One MJCF element after parsing.

    attrs:    every attribute the schema lists for `tag`, typed; defaults (class chain, then built-in) applied
    explicit: names of attributes set in the XML or by a default class (not just MuJoCo's built-in default);
              needed where MuJoCo distinguishes "unset" (e.g. autolimits, fromto vs pos, inertial)
    file, line: source location, for error messages
    """

    tag: str
    attrs: dict[str, Any]
    children: list[Element]
    file: str
    line: int
    explicit: set[str] = dataclasses.field(default_factory=set)
    defaults: list[Element] = dataclasses.field(default_factory=list)
    # True when `quat` was computed from an orientation alternative of a body, geom or inertial: MuJoCo normalises
    # those quaternions before resolving the alternative, not after, so the compiler uses it as it is
    raw_quat: bool = False
    # Composition (<attach>, mjcf/compose.py) and frames. frames: names of the named <frame>s the element was
    # written in (innermost last), for <attach frame=...>; compiler: the compiler settings of the model the element
    # comes from when it is not the top-level model (`attrs.compiler`); keysource: for a <key>, the joints,
    # actuators and mocap bodies of the model it was written in, in that model's order (its qpos, ctrl, ... are laid
    # out over them; the compiler places the values of the ones present in the composed model).
    frames: tuple[str, ...] = ()
    compiler: dict[str, Any] | None = None
    keysource: dict[str, list] | None = None

    # Actuators are the one exception to "defaults already applied": MuJoCo keeps ONE actuator default per
    # class, which every actuator element in a <default> (general, motor, position, velocity, intvelocity,
    # damper, cylinder, muscle, adhesion) writes with its shortcut semantics (e.g. <position kp=...> sets
    # gainprm/biasprm). So for actuator elements the parser leaves `attrs` holding only what the element
    # itself writes (typed, no defaults) and puts in `defaults` the actuator elements of the applicable
    # default classes, outermost class first (each likewise holding only its written attributes);
    # `mjcf/actuation.py` resolves them in that order.

    def find(self, tag: str) -> list[Element]:
        """Direct children with this tag."""
        return [c for c in self.children if c.tag == tag]

    def where(self) -> str:
        """'file:line <tag>' for error messages."""
        return f"{self.file}:{self.line} <{self.tag}>"


class MJCFError(ValueError):
    """Malformed or invalid MJCF: the message names the file, line, element and attribute."""

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 element: str | None = None, attribute: str | None = None):  # fmt: skip
        self.file, self.line, self.element, self.attribute = file, line, element, attribute
        where = ""
        if file is not None:
            where = f"{file}:{line}: " if line is not None else f"{file}: "
        ctx = []
        if element is not None:
            ctx.append(f"element <{element}>")
        if attribute is not None:
            ctx.append(f"attribute '{attribute}'")
        super().__init__(where + (", ".join(ctx) + ": " if ctx else "") + message)


class MJCFUnsupportedError(MJCFError, NotImplementedError):
    """Valid MJCF that uses a MuJoCo feature mjx_lite does not implement (named in the message, with file, line,
    element and attribute). The one error type for unsupported features: an `MJCFError` (so `except MJCFError`
    catches every load failure) and a `NotImplementedError`."""


class MJCFWarning(UserWarning):
    """A model element MuJoCo loads but ignores or changes (e.g. an unknown attribute in a URDF's <mujoco>
    extension, a repeated URDF geom name, a <mimic> between unsupported joint types): the model loads as in MuJoCo,
    and the warning names the file, line and element."""


class MJCFNotFoundError(MJCFError, FileNotFoundError):
    """A model name that is neither a file nor a bundled model (the message lists the closest bundled names): an
    `MJCFError`, like every load failure, and a `FileNotFoundError`, as it was before it was an `MJCFError`."""


def did_you_mean(name: str, candidates) -> str:
    """" (did you mean 'x'?)" for the candidates closest to a mistyped `name` (difflib), else ""."""
    close = difflib.get_close_matches(str(name), [str(c) for c in candidates], n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
