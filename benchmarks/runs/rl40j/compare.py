"""reacher_easy at the task's defaults, 3M steps, seeds 0-4, 256 and 2048 environments (issue 40's target: median
>= 900): per seed best / final / steps to 900 / lowest evaluation after it; per size the medians.
256: benchmarks/runs/rl40i/old_* (commit 9da7013), whose seed 0 rl40j reran at 40ce701+ with an identical curve;
2048: benchmarks/runs/rl40j/. `python benchmarks/runs/rl40j/compare.py`"""

import json
import os
import statistics

RUNS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZES = {256: {s: f"{RUNS}/rl40i/old_reacher_easy_256_s{s}.json" for s in range(5)},
         2048: {s: f"{RUNS}/rl40j/reacher_easy_2048_s{s}.json" for s in range(5)}}  # fmt: skip
RERUN = f"{RUNS}/rl40j/reacher_easy_256_s0.json"


def first_run(path):
    with open(path) as f:
        d = json.load(f)
    return next(r for t in d["tasks"].values() for r in t["runs"] if "curve" in r)


def returns(r):
    return [x["return"] for x in r["curve"]]


def lowest_after_target(r):
    c = returns(r)
    i = next((k for k, x in enumerate(c) if x >= 900), None)
    return None if i is None else min(c[i:])


same = returns(first_run(RERUN)) == returns(first_run(SIZES[256][0]))
print(f"256 seed 0 rerun at today's code: curve identical to rl40i's: {same}")
for n, paths in SIZES.items():
    runs = [first_run(paths[s]) for s in sorted(paths)]
    for seed, r in zip(sorted(paths), runs):
        t = r["steps_to_target"]
        to = "-" if t is None else f"{t / 1e6:.2f}M"
        print(f"{n} seed {seed}: best {r['best_return']:.0f} final {r['final_return']:.0f} to900 {to} "
              f"lowest_after {lowest_after_target(r)} load {r.get('load')} total {r['total_s']:.0f}s")  # fmt: skip
        print("   ", " ".join(f"{x:.0f}" for x in returns(r)))
    best = [r["best_return"] for r in runs]
    final = [r["final_return"] for r in runs]
    hit = [r["steps_to_target"] for r in runs if r["steps_to_target"] is not None]
    med_hit = statistics.median([r["steps_to_target"] or float("inf") for r in runs])
    print(f"{n}: {len(hit)}/5 reach 900 (median steps {med_hit / 1e6:.2f}M); median best {statistics.median(best):.0f} "
          f"(worst {min(best):.0f}); median final {statistics.median(final):.0f} (worst {min(final):.0f})")  # fmt: skip
