"""The package's import graph: layers that only import downwards, no cycles, no imports hidden in function bodies.

Read from the source (AST), without importing anything. Every module of `mjx_lite` belongs to one layer of
`LAYERS` (a new module must be placed there); a module may import modules of its own layer or of lower ones, and
the graph has no cycle. Imports inside function bodies are allowed only for the optional dependencies of
`OPTIONAL` (packages a user may not have installed) and, in the CLI, for its subcommands (so that `--help` stays
fast).
"""

from __future__ import annotations

import ast
import os

import mjx_lite

ROOT = os.path.dirname(os.path.abspath(mjx_lite.__file__))

# bottom to top; a module's layer is that of its longest matching prefix
LAYERS = [
    ("foundation", ["mjx_lite._struct", "mjx_lite._cache", "mjx_lite._eager", "mjx_lite.config", "mjx_lite.math",
                    "mjx_lite.linalg"]),
    ("types", ["mjx_lite.types"]),
    ("data", ["mjx_lite.data"]),
    ("runtime", ["mjx_lite.collision", "mjx_lite.solver", "mjx_lite.pipeline"]),
    ("entry points", ["mjx_lite.pipeline.step"]),
    ("model assembly", ["mjx_lite.io"]),
    ("compiler", ["mjx_lite.models", "mjx_lite.mjcf"]),
    ("package", ["mjx_lite"]),
    ("products", ["mjx_lite.names", "mjx_lite.envs", "mjx_lite.rl", "mjx_lite.render", "mjx_lite.interop",
                  "mjx_lite.derivatives", "mjx_lite.trajopt", "mjx_lite.sysid", "mjx_lite.parallel",
                  "mjx_lite.run", "mjx_lite.bench", "mjx_lite.check"]),
    ("cli", ["mjx_lite.__main__"]),
]  # fmt: skip

# packages that may be missing at run time: imported where used, inside the function that needs them
OPTIONAL = ("mujoco", "brax", "gymnasium", "mediapy", "matplotlib", "IPython", "imageio_ffmpeg", "jupyter", "PIL")
LAZY_SUBCOMMANDS = ("mjx_lite.__main__",)  # the CLI imports a subcommand's module when it runs


def _modules() -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(dirpath, f), os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = os.path.join(dirpath, f)
    return out


MODULES = _modules()


def _layer(mod: str) -> int:
    best, layer = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (mod == p or mod.startswith(p + ".")) and len(p) > best:
                best, layer = len(p), i
    assert layer is not None, f"module {mod} is in no layer of tests/test_layers.py: place it"
    return layer


def _resolve(mod: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    pkg = mod if MODULES[mod].endswith("__init__.py") else mod.rsplit(".", 1)[0]
    for _ in range(node.level - 1):
        pkg = pkg.rsplit(".", 1)[0]
    return f"{pkg}.{node.module}" if node.module else pkg


def _targets(mod: str, node: ast.AST) -> list[str]:
    """mjx_lite modules an import node refers to (a name imported from a package counts as its submodule if any)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    base = _resolve(mod, node)
    return [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]


def _imports() -> dict[str, list[tuple[str, bool, int]]]:
    """module -> [(imported module, inside a function body, line)] for every import of the package's modules
    and of the optional packages."""
    out = {}
    for mod, path in MODULES.items():
        tree = ast.parse(open(path).read(), path)
        found = []

        def visit(node, in_function, mod=mod, found=found):
            for child in ast.iter_child_nodes(node):
                inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for t in _targets(mod, child):
                        found.append((t, in_function, child.lineno))
                visit(child, inner)

        visit(tree, False)
        out[mod] = found
    return out


IMPORTS = _imports()


def test_every_module_has_a_layer():
    for mod in MODULES:
        _layer(mod)


def test_imports_point_down():
    wrong = []
    for mod, found in IMPORTS.items():
        for target, _, line in found:
            if target.split(".")[0] != "mjx_lite" or target not in MODULES:
                continue
            if _layer(target) > _layer(mod):
                wrong.append(f"{mod}:{line} imports {target} ({LAYERS[_layer(target)][0]} above "
                             f"{LAYERS[_layer(mod)][0]})")  # fmt: skip
    assert not wrong, "\n".join(wrong)


def test_no_import_cycles():
    # explicit imports only: a package's __init__ importing its own submodules is the usual pattern, not a cycle
    graph = {mod: sorted({t for t, _, _ in found if t in MODULES and t != mod}) for mod, found in IMPORTS.items()}
    cycles, index, low, stack, on = [], {}, {}, [], set()

    def strong(v, counter=[0]):  # noqa: B006 - Tarjan's algorithm, recursion over a small graph
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in graph:
        if v not in index:
            strong(v)
    assert not cycles, f"import cycles: {cycles}"


def test_no_imports_in_function_bodies():
    wrong = []
    for mod, found in IMPORTS.items():
        for target, in_function, line in found:
            if not in_function:
                continue
            if target.split(".")[0] in OPTIONAL:
                continue
            if mod in LAZY_SUBCOMMANDS and target.startswith("mjx_lite."):
                continue
            wrong.append(f"{mod}:{line} imports {target} inside a function")
    assert not wrong, "\n".join(wrong)


def test_runtime_never_imports_the_compiler_or_mujoco():
    runtime = {i for i, (name, _) in enumerate(LAYERS) if name in ("foundation", "types", "data", "runtime",
                                                                    "entry points", "model assembly")}  # fmt: skip
    wrong = [f"{mod}:{line} imports {t}" for mod, found in IMPORTS.items() if _layer(mod) in runtime
             for t, _, line in found if t.startswith("mjx_lite.mjcf") or t.split(".")[0] == "mujoco"]  # fmt: skip
    assert not wrong, "\n".join(wrong)
