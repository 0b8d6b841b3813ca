"""Where a compiled program's kernels come from: XLA:CPU fusions of an optimised HLO dump, by source function.

    XLA_FLAGS="--xla_dump_to=/tmp/dump --xla_dump_hlo_as_text --xla_dump_hlo_module_re=.*forward.*" python ...
    python benchmarks/compile_attribution.py /tmp/dump/module_*.jit_forward.cpu_after_optimizations.txt [--top 30]

XLA:CPU emits and optimises each fusion as its own LLVM function, so a program's compile time follows its number of
fused kernels and their size (issue 43: the Shadow Hand's collision stage had 4386 fusions, 94k fused operations;
HLO passes, IR emission and LLVM each took about a third of its compile). Each fusion is attributed through the
dump's stack frames to (a) the first mjx_lite collision function below the driver (the group's collider) and
(b) the innermost mjx_lite function; printed: kernels, fused operations, name. `--ir`: also the bytes of each fusion's
LLVM IR after LLVM's optimisation (the dump's *.ir-with-opt.ll files), by the same names: LLVM vectorises the small
per-pair loops, so a fusion's optimised IR can be 10-20x its emitted IR (issue 43, the Panda's mesh-mesh group: 3.4 MB
emitted, 6.5 MB optimised; XLA at --xla_backend_optimization_level=0 compiled that group in 6.9 instead of 12.7
CPU-s). Neither count is a cost model: stacking the two sides of the mesh-mesh manifold took its fusions from 308 to
265 and its compile from 6.2 to 6.7 CPU-s, and leaving out half of `_nearest_on_simplex`'s IR (its rebuild after
GJK) or EPA's final face search did not move the distance stage's 4.9 CPU-s (all of EPA: 2.2 of them).
"""

from __future__ import annotations

import argparse
import collections
import os
import re

_SECTIONS = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _tables(lines: list[str]) -> tuple[dict, dict]:
    """(locations {id: (file, function)}, frames {id: (location id, parent frame id or 0)}) of an HLO text dump."""
    files, funcs, locs, frames, sec = {}, {}, {}, {}, None
    for line in lines:
        if line in _SECTIONS:
            sec = line
            continue
        if sec and not line.strip():
            sec = None
            continue
        if sec == "FileNames":
            k, v = line.split(" ", 1)
            files[int(k)] = v.strip('"').split("mjx_lite/")[-1]
        elif sec == "FunctionNames":
            k, v = line.split(" ", 1)
            funcs[int(k)] = v.strip('"')
        elif sec == "FileLocations":
            m = re.match(r"(\d+) \{file_name_id=(\d+) function_name_id=(\d+)", line)
            locs[int(m[1])] = (files[int(m[2])], funcs[int(m[3])])
        elif sec == "StackFrames":
            m = re.match(r"(\d+) \{file_location_id=(\d+) parent_frame_id=(\d+)", line)
            frames[int(m[1])] = (int(m[2]), int(m[3]) - 1)  # printed parents are 1-based (0: none)
    return locs, frames


def _chain(frame: int, locs: dict, frames: dict) -> list[tuple[str, str]]:
    """(file, function) from the outermost caller to the innermost."""
    out = []
    while frame in frames and len(out) < 100:
        loc, parent = frames[frame]
        out.append(locs[loc])
        frame = parent if parent != frame else 0
    return out[::-1]


def _ir_bytes(path: str, fusion: str) -> int:
    """Bytes of a fusion's optimised LLVM IR in the dump beside `path` (0 where it was not dumped)."""
    prefix = path.split(".cpu_after_optimizations")[0]
    for name in (f"{fusion}_kernel_module", f"__compute_module_{fusion}"):
        name = f"{prefix}.{name}.ir-with-opt.ll"
        if os.path.exists(name):
            return os.path.getsize(name)
    return 0


def attribute(path: str, ir: bool = False) -> tuple[collections.Counter, collections.Counter, collections.Counter, int]:
    """(kernels by collider, kernels by innermost function, fused operations by either name (and, with `ir`, bytes
    of optimised LLVM IR under "ir group ..." / "ir leaf ..."), fusions)."""
    lines = open(path).read().split("\n")
    locs, frames = _tables(lines)
    size, cur, n = {}, None, 0
    for line in lines:  # the number of instructions of every computation (a fusion's body: its size)
        m = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{$", line)
        if m:
            cur, n = m[1], 0
        elif line.startswith("}") and cur:
            size[cur], cur = n, None
        elif cur and " = " in line:
            n += 1
    by_group, by_leaf, ops, total = collections.Counter(), collections.Counter(), collections.Counter(), 0
    for line in lines:
        if " fusion(" not in line:
            continue
        called = re.search(r"calls=%([\w.\-]+)", line)
        frame = re.search(r"stack_frame_id=(\d+)", line)
        chain = _chain(int(frame[1]), locs, frames) if frame else []
        ours = [(f, fn) for f, fn in chain if f.startswith(("collision/", "pipeline/", "solver/", "math.py"))]
        group = next((f"{f}:{fn}" for f, fn in ours if f.startswith("collision/") and f != "collision/driver.py"),
                     f"{ours[-1][0]}:{ours[-1][1]}" if ours else "?")  # fmt: skip
        leaf = f"{ours[-1][0]}:{ours[-1][1]}" if ours else "?"
        k = size.get(called[1], 1) if called else 1
        by_group[group] += 1
        by_leaf[leaf] += 1
        ops["group " + group] += k
        ops["leaf " + leaf] += k
        if ir:
            name = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) =", line)
            b = _ir_bytes(path, name[1]) if name else 0
            ops["ir group " + group] += b
            ops["ir leaf " + leaf] += b
        total += 1
    return by_group, by_leaf, ops, total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dump", help="an XLA:CPU *.cpu_after_optimizations.txt dump")
    p.add_argument("--top", type=int, default=30)
    p.add_argument("--ir", action="store_true", help="also optimised LLVM IR bytes (the dump's *.ir-with-opt.ll)")
    a = p.parse_args()
    by_group, by_leaf, ops, total = attribute(a.dump, a.ir)
    print(f"{total} fusions, {sum(v for k, v in ops.items() if k.startswith('group '))} fused operations")
    print("-- by collider (first collision function below the driver; else the innermost)")
    for k, v in by_group.most_common(a.top):
        print(f"{v:6d} {ops['group ' + k]:8d}  {k}")
    print("-- by innermost mjx_lite function")
    for k, v in by_leaf.most_common(a.top):
        print(f"{v:6d} {ops['leaf ' + k]:8d}  {k}")
    if a.ir:
        for kind in ("group", "leaf"):
            irs = collections.Counter({k[len(kind) + 4 :]: v for k, v in ops.items() if k.startswith(f"ir {kind} ")})
            print(f"-- optimised LLVM IR bytes by {'collider' if kind == 'group' else 'innermost function'} "
                  f"(total {sum(irs.values())})")  # fmt: skip
            for k, v in irs.most_common(a.top):
                print(f"{v:9d}  {k}")


if __name__ == "__main__":
    main()
