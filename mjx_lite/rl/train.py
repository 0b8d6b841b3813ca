"""Train a PPO policy from the shell, with a progress bar; print the learning curve and save the parameters.

    python -m mjx_lite train cartpole_balance --timesteps 2e6
    python -m mjx_lite train humanoid                       # a bundled model: its task (humanoid_bundled_stand)
    python -m mjx_lite train hopper --model my_hopper.xml   # the hopper task on your variant of its model
    python -m mjx_lite train cartpole_balance --video cartpole.mp4   # then render the trained policy
    python -m mjx_lite train --env hopper --timesteps 1e7 --num-envs 256 --set learning_rate=3e-4 --out hop.msgpack

A task is a bundled model with observations, actions and a reward (`mjx_lite.envs.names()`); a bundled model's
name trains its first task. `--model` (a path or bundled name) trains a task on another model with the bodies,
joints and sensors the task reads; a task for a new kind of model is an `envs.Env` subclass (docs/rl.md).
Defaults per task come from `mjx_lite.rl.configs` (batch size and minibatches scaled with --num-envs);
`--set name=value` overrides any `ppo.PPOConfig` field. The
parameters are written with flax's msgpack serialisation (`ppo.load(path)` reads them back).
"""

from __future__ import annotations

import argparse
import ast
import os
import textwrap
import time

from tqdm.auto import tqdm

import mjx_lite
from mjx_lite import envs, models, render
from mjx_lite.mjcf.spec import did_you_mean
from mjx_lite.rl import configs, play, ppo
from mjx_lite.run import HelpFormatter

__all__ = ["main"]


def _parse_set(items: list[str]) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--set expects name=value, got {item!r}")
        k, v = item.split("=", 1)
        try:
            out[k.strip()] = ast.literal_eval(v)
        except (ValueError, SyntaxError):
            out[k.strip()] = v
    return out


# the task a bundled model's name trains where it has several (otherwise its first task, sorted)
MODEL_TASK = {"quadruped": "quadruped_run"}


def task_of(name: str) -> tuple[str, str]:
    """(task, note) for what a user typed: a task name itself (note ""), or the task of a bundled model of that
    name (`MODEL_TASK`, else its first task, sorted: `humanoid` -> `humanoid_bundled_stand`), with a note naming
    the model's tasks (the tasks on dm_control's models, `envs.SUITE_TASKS`, are not a bundled model's). Raises
    ValueError for anything else: a model without a task or a path (saying how to train on it), or an unknown
    name (with the closest task names)."""
    tasks = envs.names()
    if name in tasks:
        return name, ""
    stem = name[:-4] if name.endswith(".xml") else name
    if stem in models.names():
        own = [t for t in tasks if (t == stem or t.startswith(stem + "_")) and t not in envs.SUITE_TASKS]
        if own:
            task = MODEL_TASK.get(stem, own[0])
            rest = f" (its tasks: {', '.join(own)})" if len(own) > 1 else ""
            return task, f"{stem} is a bundled model: training its task {task}{rest}"
    if stem in models.names() or os.path.exists(name) or os.path.dirname(name):
        raise ValueError(f"{name!r} is a model without a task: a task adds observations, actions and a reward "
                         f"(an envs.Env subclass, docs/rl.md). Train a task on a variant of its model with "
                         f"`train TASK --model {name}`; tasks: {', '.join(tasks)}")  # fmt: skip
    raise ValueError(f"unknown task {name!r}{did_you_mean(name, tasks)}; a task is a model with a reward, "
                     f"registered tasks: {', '.join(tasks)}")  # fmt: skip


def main(argv: list[str] | None = None, prog: str = "python -m mjx_lite train") -> int:
    head, examples, tail = __doc__.replace("python -m mjx_lite train", prog).split("\n\n", 2)
    p = argparse.ArgumentParser(prog=prog, description=head + "\n\n" + tail, formatter_class=HelpFormatter,
                                epilog="examples:\n" + textwrap.indent(textwrap.dedent(examples), "  "))  # fmt: skip
    p.add_argument("task", nargs="?", default=None,
                   help=f"task name ({', '.join(envs.names())}) or the bundled model of one")
    p.add_argument("--env", default=None, help="the same, as an option")
    p.add_argument("--model", default=None, help="train the task on this model (MJCF/URDF path or bundled name)")
    p.add_argument("--timesteps", type=float, default=None, help="environment steps (default: the task's)")
    p.add_argument("--num-envs", type=int, default=None,
                   help="parallel environments (default: the task's); batch size and minibatches follow from it")
    p.add_argument("--seed", type=int, default=0, help="random seed")
    p.add_argument("--evals", type=int, default=10, help="evaluations (the first before training)")
    p.add_argument("--out", default=None, help="parameter file (default ppo_<env>.msgpack)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", help="override a PPOConfig field")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--video", default=None, metavar="PATH",
                   help="after training, render the deterministic policy to PATH (.mp4, .gif, .png; as `play`)")
    p.add_argument("--video-steps", type=int, default=500, help="control steps of the --video rollout")
    a = p.parse_args(argv)
    if a.video is not None:
        try:  # before training: a missing writer must not cost a training run
            render.require_writer(a.video)
        except (ImportError, ValueError) as e:
            p.error(f"--video: {e}")
    a.env = a.task or a.env
    if a.env is None:
        p.error(f"give a task: {', '.join(envs.names())}")
    try:
        a.env, note = task_of(a.env)
    except ValueError as e:
        p.error(str(e))
    if note:
        print(note, flush=True)
    try:  # --num-envs N derives batch_size and num_minibatches from N (configs.batching); --set overrides them
        cfg = configs.defaults(a.env, num_envs=a.num_envs)
    except ValueError as e:
        p.error(f"--num-envs: {e}")
    num_timesteps = int(a.timesteps) if a.timesteps is not None else int(cfg.pop("num_timesteps"))
    cfg.pop("num_timesteps", None)
    cfg.update(_parse_set(a.set))
    num_envs = cfg.pop("num_envs")
    out = a.out or f"ppo_{a.env}.msgpack"
    env = envs.make(a.env) if a.model is None else _on_model(p, a.env, a.model)
    on = "" if a.model is None else f" on {a.model}"
    print(f"training {a.env}{on} for {num_timesteps:,} steps, {num_envs} environments, seed {a.seed}", flush=True)

    def progress(step: int, m: dict) -> None:
        line = f"  {step:>12,d} steps  return {m['eval/episode_reward']:8.1f}  {m['walltime']:7.1f} s"
        if "training/sps" in m:
            line += f"  {m['training/sps']:9,.0f} steps/s"
        tqdm.write(line)  # above the progress bar, not over it

    t0 = time.perf_counter()
    make_policy, params, metrics = ppo.train(env, num_timesteps, num_envs=num_envs, seed=a.seed,
                                             progress_fn=progress, num_evals=a.evals,
                                             show_progress=not a.no_progress, **cfg)  # fmt: skip
    total = time.perf_counter() - t0
    print("\nlearning curve (deterministic evaluation):")
    print(f"  {'steps':>12}  {'return':>8}  {'wall s':>7}")
    for h in metrics["history"]:
        print(f"  {int(h['steps']):>12,d}  {h['eval/episode_reward']:8.1f}  {h['walltime']:7.1f}")
    meta = {"env": a.env, **({"model": a.model} if a.model else {}), "seed": a.seed,
            "num_timesteps": num_timesteps, "num_envs": num_envs,
            "config": {k: list(v) if isinstance(v, tuple) else v for k, v in cfg.items()},
            "final_return": metrics.get("eval/episode_reward")}  # fmt: skip
    ppo.save(out, params, metrics["network"], meta)
    print(f"\nsaved parameters to {out} ({total:.0f} s in all)")
    if a.video is not None:
        print(f"rendering the trained policy to {a.video} (later: `python -m mjx_lite play {out}`)", flush=True)
        play.render_policy(env, make_policy(params, deterministic=True), a.video, steps=a.video_steps,
                           action_repeat=int(cfg.get("action_repeat", 1)), seed=a.seed)
    return 0


def _on_model(p: argparse.ArgumentParser, task: str, model: str) -> envs.Env:
    """The task on another model; a load error or a model without what the task reads is a usage error."""
    try:
        m = mjx_lite.load_mjcf(models.resolve(model))
    except (mjx_lite.MJCFError, NotImplementedError) as e:
        p.error(f"--model {model}: {e}")
    try:
        return envs.make(task, model=m)
    except (KeyError, IndexError, ValueError) as e:
        msg = e.args[0] if isinstance(e, KeyError) and e.args else e
        p.error(f"--model {model} does not fit the task {task}: {msg}")


if __name__ == "__main__":
    raise SystemExit(main())
