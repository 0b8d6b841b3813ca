"""The value clip (`clipping_epsilon_value`) on cartpole_balance's early value divergence at 2048 environments
(issue 40; rl40d found the value net's mean output going 37 -> 259 -> 917 -> 2134 over updates 1-4 on seed 3).

    PYTHONPATH=. python benchmarks/runs/rl40j/vclip.py --seed 3 --eps none,1.0,3.0 --json out.json
Runs rl40d/diag.py's per-update probe (value loss, value / policy gradient norms, the value net's mean output over
the environments' current observations, an evaluation at the end) at the task's defaults with
clipping_epsilon_value set to each of --eps ("none": off, the default), one after another in this process.
"""

import argparse
import importlib.util
import json
import os

spec = importlib.util.spec_from_file_location("diag", os.path.join(os.path.dirname(__file__), "../rl40d/diag.py"))
diag = importlib.util.module_from_spec(spec)
spec.loader.exec_module(diag)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--num-envs", type=int, default=2048)
    p.add_argument("--steps", type=int, default=500_000)
    p.add_argument("--eps", default="none,1.0")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    out = {"seed": a.seed, "num_envs": a.num_envs, "steps": a.steps, "load_start": os.getloadavg()[0], "runs": {}}
    for e in a.eps.split(","):
        over = {} if e == "none" else {"clipping_epsilon_value": float(e)}
        print(f"== eps {e} seed {a.seed} num_envs {a.num_envs} steps {a.steps}", flush=True)
        r = out["runs"][e] = diag.run("cartpole_balance", a.seed, a.num_envs, a.steps, over)
        peak = max(x["loss_value"] for x in r["rows"])
        print(f"== eps {e}: peak value loss {peak:.3f}, eval {r['evals'][-1]['return']:.1f}, cpu {r['cpu_s']:.0f} s "
              f"wall {r['wall_s']:.0f} s load {os.getloadavg()[0]:.1f}", flush=True)  # fmt: skip
        out["load_end"] = os.getloadavg()[0]
        if a.json:
            with open(a.json, "w") as f:
                json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
