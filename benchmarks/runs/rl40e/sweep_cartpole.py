"""Short variants of cartpole_balance PPO (defaults at N + overrides), one after another: eval return at 0.5M, 1M."""
import json
import sys
import time

from mjx_lite import envs
from mjx_lite.rl import ppo

seed, steps, variants = int(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
for name, n, over in variants:
    t0 = time.time()
    out = []
    ppo.train(envs.make("cartpole_balance"), steps, num_envs=n, seed=seed, num_evals=3, show_progress=False,
              progress_fn=lambda s, m, out=out: out.append((s, round(m["eval/episode_reward"], 1))), **over)
    print(json.dumps({"variant": name, "num_envs": n, "seed": seed, "overrides": over, "evals": out,
                      "wall_s": round(time.time() - t0)}), flush=True)
