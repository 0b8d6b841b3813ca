"""Bundled MJCF models, loadable by name from anywhere: `mjx_lite.load_mjcf("cartpole")`.

`names()` lists them; `path(name)` gives the file. Tasks in `mjx_lite.envs` bundle their own models here too.
"""

from __future__ import annotations

import os

from mjx_lite.mjcf.spec import MJCFNotFoundError, did_you_mean

__all__ = ["names", "path", "resolve"]

_DIR = os.path.dirname(os.path.abspath(__file__))


def names() -> list[str]:
    """Names of the bundled models (file names without `.xml`), sorted."""
    return sorted(f[:-4] for f in os.listdir(_DIR) if f.endswith(".xml"))


def path(name: str) -> str:
    """Absolute path of the bundled model `name` ("cartpole" or "cartpole.xml")."""
    stem = name[:-4] if name.endswith(".xml") else name
    p = os.path.join(_DIR, stem + ".xml")
    if os.sep in stem or (os.altsep and os.altsep in stem) or not os.path.isfile(p):
        raise MJCFNotFoundError(f"no bundled model {name!r}{did_you_mean(stem, names())}; bundled models: "
                                f"{', '.join(names())}")
    return p


def resolve(p: str | os.PathLike) -> str | os.PathLike:
    """`p` itself when it is an existing file (or has a directory part), else the bundled model of that name.

    A name that is neither raises `MJCFNotFoundError` (an `MJCFError` and a `FileNotFoundError`) naming the closest
    bundled models.
    """
    s = os.fspath(p)
    if os.path.exists(s) or os.path.dirname(s):
        return p
    stem = s[:-4] if s.endswith(".xml") else s
    if stem in names():
        return path(stem)
    raise MJCFNotFoundError(f"{s!r}: no such file, and no bundled model of that name{did_you_mean(stem, names())} "
                            f"(bundled: {', '.join(names())})")
