"""Reading a model document: MJCF or URDF text or file into a spec tree, with its <attach>ments composed and its
<replicate>s expanded (`parse.py` builds the MJCF tree, `urdf.py` the URDF one, `compose.py` composes)."""

from __future__ import annotations

import os

from mjx_lite.mjcf import compose, urdf, xml
from mjx_lite.mjcf.parse import _build, _Loader, _Raw
from mjx_lite.mjcf.settings import compiler_settings
from mjx_lite.mjcf.spec import Element, MJCFError


def _document(data: bytes | str, file: str, loader: _Loader, directory: str | None,
              loading: tuple[str, ...] = ()) -> Element:  # fmt: skip
    """The spec tree of an MJCF or URDF document (a <robot> root element is URDF, as in MuJoCo), with its
    <attach>ments resolved (`compose.py`). `loading`: the model files being read (an attachment cycle is an
    error)."""
    node = xml.parse(data, file)
    if node.tag.lower() == "robot":
        return urdf.build(node, file)
    return build(loader.convert_root(node, file, directory), loader, directory, loading)


def build(raw: _Raw, loader: _Loader, directory: str | None, loading: tuple[str, ...] = ()) -> Element:
    """The spec tree of an include-expanded MJCF document (`read_file`'s raw tree): built, its <attach>ments
    composed and its <replicate>s expanded. `raw` is consumed (pass a copy to build it again)."""
    tree = _build(raw, loader.assets, directory)
    if compose.has_composition(tree):
        def load(model: Element) -> Element:
            name = model.attrs["file"]
            data, path, newdir = loader._find(name, model_dir(model))
            if data is None:
                raise MJCFError(f"could not open model file '{name}'", model.file, model.line, "model", "file")
            key = os.path.normpath(os.path.abspath(path)) if os.path.isfile(path) else "asset:" + path
            if key in loading:
                raise MJCFError(f"model file '{name}' attaches itself (a cycle of <model> assets)", model.file,
                                model.line, "model", "file")  # fmt: skip
            child_loader = _Loader(loader.assets, newdir)
            if os.path.isfile(path):
                child_loader.included.add(key)
            return _document(data, path, child_loader, newdir, loading + (key,))

        def model_dir(model: Element) -> str | None:
            return os.path.dirname(os.path.abspath(model.file)) if os.path.isfile(model.file) else directory

        compose.resolve(tree, load, compiler_settings, directory)
    compose.replicate(tree)
    return tree


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise MJCFError(f"cannot read file: {e.strerror}", path) from None


def _open(path: str, assets: dict[str, bytes] | None) -> tuple[bytes, _Loader, str, str]:
    """A model file's bytes, a loader resolving relative to its directory (the file marked as included), the
    directory and the file's key (its normalised absolute path)."""
    data = _read(path)
    d = os.path.dirname(os.path.abspath(path))
    loader = _Loader(assets, d)
    key = os.path.normpath(os.path.abspath(path))
    loader.included.add(key)
    return data, loader, d, key


def read_file(path: str, assets: dict[str, bytes] | None = None) -> tuple[_Raw | None, _Loader, str, tuple[str]]:
    """The first step of `parse_file`, for a tool that edits the include-expanded XML before building it
    (mjx_lite.check): (raw tree, or None for a URDF document, loader, directory, loading) for `build`."""
    path = os.fspath(path)
    data, loader, d, key = _open(path, assets)
    node = xml.parse(data, path)
    raw = None if node.tag.lower() == "robot" else loader.convert_root(node, path, d)
    return raw, loader, d, (key,)


def parse_string(text: str | bytes, assets: dict[str, bytes] | None = None, base_dir: str | None = None) -> Element:
    """Parse MJCF (or URDF) text. Includes resolve from `assets` (name -> bytes) first, then relative to
    `base_dir`."""
    return _document(text, "<string>", _Loader(assets, base_dir), base_dir)


def parse_file(path: str, assets: dict[str, bytes] | None = None) -> Element:
    """Parse an MJCF file; includes resolve relative to the including file's directory (or from `assets`)."""
    path = os.fspath(path)
    data, loader, d, key = _open(path, assets)
    return _document(data, path, loader, d, (key,))
