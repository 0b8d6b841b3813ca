"""Operations of the step's lowered program, fused and XLA paths, counted as tests/test_kernels.py counts them.

    PYTHONPATH=. python benchmarks/fused_program_size.py [humanoid cheetah barkour legged] [--scopes] [--no-xla]

Each model at a random state, float32, batch 8, lowered for "cuda" on this machine (kernels compiled as on a GPU, no
GPU needed): StableHLO operations besides constants and returns, and the Triton kernels. --scopes: the fused step's
operations per stage (the named scope in each operation's location, `as_text(debug_info=True)`).
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
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from tests import oracle

OP = re.compile(r"^\s*(?:%\S+ = )?\"?(stablehlo\.[a-z_]+)")


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
    return [o for o in ops if o not in ("stablehlo.constant", "stablehlo.return")]


def _scopes(text: str) -> collections.Counter:
    locs = dict(re.findall(r"^#(loc\d+) = (.*)$", text, re.MULTILINE))
    out = collections.Counter()
    for line in text.splitlines():
        mm = OP.match(line)
        if not mm or mm.group(1) in ("stablehlo.constant", "stablehlo.return"):
            continue
        loc = re.search(r"loc\(#(loc\d+)\)\s*$", line)
        names = re.findall(r'"([^"]*)"', locs.get(loc.group(1), "") if loc else "")
        scope = next((n for n in names if "/" in n or "jit(" in n), "")
        parts = [p for p in scope.split("/") if p and not p.startswith(("jit(", "vmap("))][:-1]
        out["/".join(parts[:2]) or "(no stage)"] += 1
    return out


def main(argv):
    names = [a for a in argv if not a.startswith("--")] or ["humanoid", "cheetah"]
    kernels.launch_of = lambda m: launch.Launch(layout=m.config.kernel_layout)  # compiled kernels, as on a GPU
    step = jax.vmap(mjl.step, in_axes=(None, 0))
    for name in names:
        m, batch = _batch(name)
        for path in ("fused",) + (() if "--no-xla" in argv else ("xla",)):
            lowered = jax.jit(step).trace(mjl.configure(m, kernels=path), batch).lower(lowering_platforms=("cuda",))
            text = lowered.as_text()
            print(f"{name} {path}: {len(_ops(text))} operations + {text.count('__gpu$xla.gpu.triton')} Triton kernels")
            if path == "fused" and "--scopes" in argv:
                for scope, n in _scopes(lowered.as_text(debug_info=True)).most_common(25):
                    print(f"  {n:5d} {scope}")


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    main(sys.argv[1:])
