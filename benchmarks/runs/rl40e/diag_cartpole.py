"""Train cartpole_balance at N envs (defaults + overrides) for S steps, then roll out the deterministic policy from
fresh starts and print, per 100-step window, mean reward, mean |x|, fraction at the rail (|x| > 0.95), mean cos."""
import json
import sys
import time

import jax
import numpy as np

from mjx_lite import envs
from mjx_lite.rl import ppo

N, S, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
over = json.loads(sys.argv[4]) if len(sys.argv) > 4 else {}
env = envs.make("cartpole_balance")
t0 = time.time()
mk, params, m = ppo.train(env, S, num_envs=N, seed=seed, num_evals=4, show_progress=False,
                          progress_fn=lambda s, m: print(s, round(m["eval/episode_reward"], 1), round(time.time() - t0),
                                                         flush=True), **over)
pol = mk(params, deterministic=True)
te = envs.wrap_for_training(env, episode_length=1000)
st = te.jit_reset(jax.random.split(jax.random.PRNGKey(123), 32))
@jax.jit
def roll(st):
    def body(s, _):
        a = pol(s.obs)
        s = te.step(s, a)
        return s, (s.reward, s.data.qpos[:, 0], s.data.qpos[:, 1], a[:, 0])
    return jax.lax.scan(body, st, None, length=1000)[1]
r, x, th, a = (np.asarray(v) for v in roll(st))
print("total return per episode", np.round(r.sum(0)).astype(int).tolist())
for w in range(0, 1000, 100):
    s = slice(w, w + 100)
    print(f"t {w:4d}: r {r[s].mean():.2f} |x| {np.abs(x[s]).mean():.2f} rail {np.mean(np.abs(x[s]) > 0.95):.2f} "
          f"cos {np.cos(th[s]).mean():.2f} |a| {np.abs(a[s]).mean():.2f}")
