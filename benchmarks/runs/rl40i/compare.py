"""reacher_easy, 256 environments, 3M steps, seeds 0-4: today's defaults (old_*) against adaptive_kl +
clip_per_network (stable_*; seed 2 from rl40h). `python benchmarks/runs/rl40i/compare.py`"""

import json
import os
import statistics

RUNS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OLD = {s: f"{RUNS}/rl40i/old_reacher_easy_256_s{s}.json" for s in range(5)}
NEW = {2: f"{RUNS}/rl40h/exp_stable_reacher_easy_256_s2.json",
       **{s: f"{RUNS}/rl40i/stable_reacher_easy_256_s{s}.json" for s in (0, 1, 3, 4)}}  # fmt: skip


def first_run(path):
    with open(path) as f:
        d = json.load(f)
    return next(r for t in d["tasks"].values() for r in t["runs"] if "curve" in r)


def lowest_after_target(r):
    c = r["curve"]
    i = next((k for k, x in enumerate(c) if x["return"] >= 900), None)
    return None if i is None else min(x["return"] for x in c[i:])


for name, paths in (("old", OLD), ("new", NEW)):
    runs = []
    for seed, path in sorted(paths.items()):
        r = first_run(path)
        runs.append(r)
        t = r["steps_to_target"]
        to = "-" if t is None else f"{t / 1e6:.2f}M"
        print(f"{name} seed {seed}: best {r['best_return']:.0f} final {r['final_return']:.0f} to900 {to} "
              f"lowest_after {lowest_after_target(r)} load {r.get('load')} total {r['total_s']:.0f}s")  # fmt: skip
        print("   ", " ".join(f"{x['return']:.0f}" for x in r["curve"]))
    best = [r["best_return"] for r in runs]
    final = [r["final_return"] for r in runs]
    print(f"{name}: median best {statistics.median(best):.0f}, worst {min(best):.0f}; median final "
          f"{statistics.median(final):.0f}, worst {min(final):.0f}")  # fmt: skip
