"""Operations of the step's lowered program, fused and XLA paths, counted as tests/test_kernels.py counts them.

    PYTHONPATH=. python benchmarks/fused_program_size.py [humanoid cheetah barkour point_mass legged] [--scopes]
        [--sources] [--no-xla] [--cpu-config] [--layout=lanes_last|lanes_first|lanes_mixed]

Each model at a random state, float32, batch 8, lowered for "cuda" on this machine (kernels compiled as on a GPU, no
GPU needed), with the Config fields that "auto" resolves by backend set as a GPU resolves them
(`config.AUTO_OFF_CPU`: the program a GPU runs; --cpu-config: as this CPU resolves them): StableHLO operations
besides constants and returns, and the Triton kernels. An operation inside a private function (`jit`-wrapped jnp
helpers such as `jp.where`, emitted once per distinct signature) counts once, however often it is called.
--scopes: the fused step's operations per stage (the named scope in each operation's location,
`as_text(debug_info=True)`). --sources: per (stage, source line, operation): the innermost frame of this package
in the operation's location (launch.py's layout code named with the kernel's stage; a private function's
operations under its first call site), the most common 40, then per group (see `_group`).
"""

import collections
import os
import re
import sys

import jax
import jax.numpy as jp
import mujoco
import numpy as np

import mjx_lite as mjl
from mjx_lite import config as _config
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from tests import oracle

OP = re.compile(r"^\s*(?:%\S+ = )?\"?(stablehlo\.[a-z_]+)")
SKIP = ("stablehlo.constant", "stablehlo.return")


def _path(name: str) -> str:
    if name == "humanoid":
        return os.path.join(oracle.MJX_TEST_DATA, "humanoid", "humanoid.xml")
    if name == "barkour":
        return os.path.join(oracle.MJX_TEST_DATA, "barkour_v0", "assets", "barkour_v0_mjx.xml")
    if name == "legged":
        return mjl.models.path("legged")
    import dm_control  # noqa: PLC0415

    return os.path.join(os.path.dirname(dm_control.__file__), "suite", f"{name}.xml")


def _f32(t):
    return jax.tree.map(lambda x: x.astype(jp.float32) if jp.issubdtype(x.dtype, jp.floating) else x, t)


def _batch(name: str):
    mjm = mujoco.MjModel.from_xml_path(_path(name))
    m = oracle.model_from_mujoco(mjm)
    mjd = mujoco.MjData(mjm)
    oracle.random_state(mjm, mjd, np.random.default_rng(0))
    d = mjl.make_data(m).replace(qpos=jp.array(mjd.qpos), qvel=jp.array(mjd.qvel))
    return _f32(m), _f32(jax.tree.map(lambda x: jp.stack([x] * 8), d))


def _ops(text: str) -> list:
    ops = re.findall(OP.pattern, text, re.MULTILINE)
    return [o for o in ops if o not in SKIP]


class _Locations:
    """The `#locN = ...` table of a program printed with debug_info, resolved to (names, frames): the name-stack
    strings and the "file:line" frames, innermost first."""

    def __init__(self, text: str):
        self.table = dict(re.findall(r"^#(loc\d*) = (.*)$", text, re.MULTILINE))
        self.memo = {}

    def of(self, ref: str) -> tuple:
        if ref not in self.memo:
            self.memo[ref] = self._parse(self.table.get(ref[1:], "unknown"))
        return self.memo[ref]

    def _parse(self, s: str) -> tuple:
        s = s.strip()
        if s.startswith("loc(") and s.endswith(")"):
            s = s[4:-1]
        if re.fullmatch(r"#loc\d*", s):
            return self.of(s)
        mm = re.fullmatch(r"callsite\((#loc\d*) at (#loc\d*)\)", s)
        if mm:
            a, b = self.of(mm.group(1)), self.of(mm.group(2))
            return a[0] + b[0], a[1] + b[1]
        mm = re.fullmatch(r'"([^"]*)"\((.*)\)', s)
        if mm:
            inner = self._parse(mm.group(2))
            return (mm.group(1),) + inner[0], inner[1]
        mm = re.fullmatch(r'"([^"]*)":(\d+):.*', s)
        if mm:
            return (), (mm.group(1).split("mjx_lite/")[-1] + ":" + mm.group(2),)
        mm = re.fullmatch(r'"([^"]*)"', s)
        return ((mm.group(1),), ()) if mm else ((), ())


def _stage(names: tuple) -> str:
    scope = next((n for n in names if "/" in n or "jit(" in n), "")
    parts = [p for p in scope.split("/") if p and not p.startswith(("jit(", "vmap("))][:-1]
    return "/".join(parts[:2]) or "(no stage)"


def _sites(text: str):
    """(operation, stage, source frames) of each counted operation; a private function's operations take the
    location of its first call (in the order the program prints them)."""
    loc = _Locations(text)
    calls = {}
    for mm in re.finditer(r"call @([\w.$-]+)\(.*loc\((#loc\d*)\)\s*$", text, re.MULTILINE):
        calls.setdefault(mm.group(1), mm.group(2))
    func, out = None, []
    for line in text.splitlines():
        fm = re.match(r"\s*func\.func (?:public |private )?@([\w.$-]+)", line)
        if fm:
            func = fm.group(1)
            continue
        mm = OP.match(line)
        if not mm or mm.group(1) in SKIP:
            continue
        ref = re.search(r"loc\((#loc\d*)\)\s*$", line)
        names, frames = loc.of(ref.group(1)) if ref else ((), ())
        if func in calls and not frames:
            names, frames = loc.of(calls[func])
            frames = (f"[{func}]",) + frames
        out.append((mm.group(1)[len("stablehlo.") :], _stage(names), frames))
    return out


def _group(stage: str, src: str) -> str:
    """A coarse group for a source: the kernels' layout code (launch.py), resets (integrate's selects), the
    stages' own XLA code."""
    if "kernels/launch.py" in src:
        return f"kernel layout ({stage})"
    if "_select_reset" in src or "integrate.py:46" in src:
        return "reset selects"
    return f"XLA code: {stage}"


def _sources(text: str, top: int = 40) -> None:
    rows = collections.Counter()
    groups = collections.Counter()
    for op, stage, frames in _sites(text):
        own = [f for f in frames if f.startswith("[") or ".py:" in f]
        src = " < ".join(own[:3]) or "(no source)"
        rows[(stage, src, op)] += 1
        groups[_group(stage, " ".join(own[:4]))] += 1
    for (stage, src, op), n in rows.most_common(top):
        print(f"  {n:5d} {stage:30s} {op:18s} {src}")
    print("  groups:")
    for g, n in groups.most_common():
        print(f"  {n:5d} {g}")


def _scopes(text: str) -> collections.Counter:
    return collections.Counter(stage for _, stage, _ in _sites(text))


def _lower(m, batch, path: str, auto: dict):
    """The vmapped step of `m` on `batch` with `Config.kernels=path`, lowered for "cuda"."""
    kernels.launch_of = lambda m: launch.Launch(layout=m.config.kernel_layout)  # compiled kernels, as on a GPU
    step = jax.vmap(mjl.step, in_axes=(None, 0))
    mp = mjl.configure(m, kernels=path, **auto)
    return jax.jit(step).trace(mp, batch).lower(lowering_platforms=("cuda",))


def _count(text: str) -> tuple[int, int]:
    """(StableHLO operations as `_ops` counts them, Triton kernels) of a lowered program's text."""
    return len(_ops(text)), text.count("__gpu$xla.gpu.triton")


def report(quick: bool = False) -> str:
    """docs/benchmarks.md's section: the operations and kernels of the fused and XLA steps per model."""
    import datetime  # noqa: PLC0415

    # point_mass: a tendon model (two fixed tendons, tendon motors; the tendons' passive forces in the smooth pass)
    names = ["humanoid"] if quick else ["humanoid", "cheetah", "barkour", "point_mass"]
    rows = []
    for name in names:
        m, batch = _batch(name)
        cells = []
        for path in ("fused", "xla"):
            ops, tri = _count(_lower(m, batch, path, _config.AUTO_OFF_CPU).as_text())
            cells.append(f"{ops:,} + {tri}")
        rows.append(f"| {name} (nv {m.nv}) | {cells[0]} | {cells[1]} |")
    when = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M+00:00")
    return "\n".join([
        "### Program size of the fused step (issue 37)", "",
        f"`PYTHONPATH=. python benchmarks/fused_program_size.py {' '.join(names)}` ({when}; lowering only, no GPU "
        "needed): each model at a random state, float32, batch 8, `jax.jit(jax.vmap(step))` lowered for \"cuda\" "
        "with the Config fields that \"auto\" resolves by backend set as a GPU resolves them "
        "(`config.AUTO_OFF_CPU`). StableHLO operations (besides constants and returns; a private function's once) "
        "+ Triton kernels. A GPU runs XLA's fusions of these operations, not one kernel each; "
        "tests/test_kernels.py::test_fused_step_program_size (slow selection) keeps the count from growing.", "",
        "| model | fused path: operations + kernels | XLA path: operations + kernels |",
        "| --- | --- | --- |", *rows])  # fmt: skip


def main(argv):
    names = [a for a in argv if not a.startswith("--")] or ["humanoid", "cheetah"]
    auto = {} if "--cpu-config" in argv else _config.AUTO_OFF_CPU
    for a in argv:
        if a.startswith("--layout="):  # Config.kernel_layout of the fused path (default: Config's)
            auto = {**auto, "kernel_layout": a.split("=", 1)[1]}
    for name in names:
        m, batch = _batch(name)
        for path in ("fused",) + (() if "--no-xla" in argv else ("xla",)):
            lowered = _lower(m, batch, path, auto)
            text = lowered.as_text()
            ops, tri = _count(text)
            print(f"{name} {path}: {ops} operations + {tri} Triton kernels")
            if path == "fused" and ("--scopes" in argv or "--sources" in argv):
                debug = lowered.as_text(debug_info=True)
                if "--scopes" in argv:
                    for scope, n in _scopes(debug).most_common(25):
                        print(f"  {n:5d} {scope}")
                if "--sources" in argv:
                    _sources(debug)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main(sys.argv[1:])
