"""Data bytes per environment: mjx_lite beside MJX (section of docs/benchmarks.md).

    python benchmarks/memory.py [--models humanoid pile cartpole barkour] [--quick]

One process, float32 (JAX's default): the sum of the leaf `nbytes` of `mjx_lite.make_data(m)` and of
`mujoco.mjx.make_data(mjx.put_model(mjm))` for the same MJCF file, the padded capacities of each (contacts and
constraint rows) and the largest fields of each. Nothing is stepped: this is the memory a batch of environments
holds between steps (XLA's temporaries during a step come on top; see benchmarks/gpu_bench.py for peaks).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys

import jax
import mujoco
import numpy as np

MJX = os.path.join(os.path.dirname(mujoco.__file__), "mjx", "test_data")
SUITE = os.path.join(os.path.dirname(os.path.dirname(mujoco.__file__)), "dm_control", "suite")
BUNDLED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mjx_lite", "models")

# name -> (label, path, mjx_lite Config fields)
MODELS = {
    "humanoid": ("mjx humanoid", f"{MJX}/humanoid/humanoid.xml", {}),
    "cartpole": ("dm_control cartpole", f"{SUITE}/cartpole.xml", {}),
    "barkour": ("mjx barkour_v0 (height field)", f"{MJX}/barkour_v0/assets/barkour_v0_mjx.xml", {}),
    # the height-field collider gives each foot sphere up to 8 prism contacts (MuJoCo's one per colliding prism; MJX
    # gives 4): a cap of 16 contacts for 4 feet, as `<size nconmax="16">` in the file would
    "barkour16": (
        "mjx barkour_v0, `Config(nconmax=16)`",
        f"{MJX}/barkour_v0/assets/barkour_v0_mjx.xml",
        {"nconmax": 16},
    ),
    "pile": ("pile.xml, 220 free bodies", f"{BUNDLED}/pile.xml", {}),
}


def _nbytes(tree) -> int:
    return int(sum(np.asarray(x).nbytes for x in jax.tree.leaves(tree)))


def _largest(obj, prefix: str = "") -> list[tuple[int, str]]:
    """(bytes, name) of every field of a Data-like dataclass, nested dataclasses expanded one level."""
    out = []
    for k in obj.__dataclass_fields__:
        v = getattr(obj, k)
        if hasattr(v, "__dataclass_fields__") and k in ("_impl",):
            out += _largest(v, prefix)
        elif hasattr(v, "__dataclass_fields__"):
            out.append((_nbytes(v), prefix + k))
        else:
            out.append((_nbytes(v), prefix + k))
    return sorted(out, reverse=True)


def ours(path: str, config: dict) -> dict:
    import mjx_lite as mjl  # noqa: PLC0415

    m = mjl.load_mjcf(path, config=mjl.Config(**config))
    d = mjl.make_data(m)
    return {"bytes": _nbytes(d), "ncon": m.nconmax, "nefc": m.njmax, "efc_J": tuple(d.efc_J.shape), "nv": m.nv,
            "largest": _largest(d)[:3]}  # fmt: skip


def mjx(path: str) -> dict:
    from mujoco import mjx as mjx_  # noqa: PLC0415

    mjm = mujoco.MjModel.from_xml_path(path)
    mjm.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)  # MJX refuses it (dm_control); Data is the same
    d = mjx_.make_data(mjx_.put_model(mjm))
    impl = d._impl
    return {"bytes": _nbytes(d), "ncon": int(impl.contact.dist.shape[0]), "nefc": int(impl.efc_J.shape[0]),
            "largest": _largest(d)[:3]}  # fmt: skip


def run(names) -> dict:
    res = {}
    for n in names:
        _, path, config = MODELS[n]
        r = {"mjx_lite": ours(path, config)}
        try:
            r["mjx"] = mjx(path)
        except Exception as e:  # noqa: BLE001 - reported in the table: MJX is a reference only
            r["mjx"] = {"error": f"{type(e).__name__}: {str(e)[:120]}"}
        res[n] = r
        print(n, {k: {kk: vv for kk, vv in v.items() if kk != "largest"} for k, v in r.items()}, flush=True)
    return res


def _kb(b: int) -> str:
    return f"{b / 1e6:.2f} MB" if b >= 1e6 else f"{b / 1e3:.1f} kB"


def _markdown(res: dict, cmd: str) -> str:
    rows = []
    for n, r in res.items():
        o, x = r["mjx_lite"], r["mjx"]
        big = ", ".join(f"{k} {_kb(b)}" for b, k in o["largest"])
        if "error" in x:
            rows.append(f"| {MODELS[n][0]} | {o['nv']} | {_kb(o['bytes'])} | - | - | {o['ncon']} / - | "
                        f"{o['nefc']} / - | {big} | MJX: {x['error']} |")  # fmt: skip
            continue
        xbig = ", ".join(f"{k} {_kb(b)}" for b, k in x["largest"])
        rows.append(f"| {MODELS[n][0]} | {o['nv']} | {_kb(o['bytes'])} | {_kb(x['bytes'])} | "
                    f"{o['bytes'] / x['bytes']:.3g} | {o['ncon']} / {x['ncon']} | {o['nefc']} / {x['nefc']} | {big} | "
                    f"{xbig} |")  # fmt: skip
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        "### Data bytes per environment (float32)",
        "",
        f"`{cmd}` ({datetime.date.today()}, {platform.machine()} {os.cpu_count()}-core CPU, load average {load:.1f};"
        f" jax {jax.__version__}, mujoco {mujoco.__version__}). Sum of the leaf bytes of `make_data` of each "
        "engine for the same MJCF file (the memory an environment holds between steps); capacities are the padded "
        "contact rows and constraint rows.",
        "",
        "| model | nv | mjx_lite | MJX | mjx_lite / MJX | contacts (ours / MJX) | constraint rows | largest (ours) | "
        "largest (MJX) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
    ])  # fmt: skip


def report(quick: bool = False) -> str:
    names = ["humanoid", "cartpole"] if quick else list(MODELS)
    return _markdown(run(names), "python benchmarks/memory.py" + (" --quick" if quick else ""))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="*", default=list(MODELS), choices=list(MODELS))
    p.add_argument("--quick", action="store_true", help="humanoid and cartpole only")
    a = p.parse_args()
    names = ["humanoid", "cartpole"] if a.quick else a.models
    print(_markdown(run(names), "python benchmarks/memory.py " + " ".join(sys.argv[1:])))


if __name__ == "__main__":
    main()
