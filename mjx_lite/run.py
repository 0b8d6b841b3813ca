"""Run a batched rollout of a model and print its compile time and throughput (no `mujoco` needed).

Loads the model with our MJCF compiler, gives each environment a random initial velocity and random constant
controls, runs `jit(vmap(scan(step)))` and prints the compile time (once per model, batch size and step count),
the steps per second of a second, compiled call, and a summary of the final states. The options change the
settings that drive speed (docs/performance.md): the integrator, the solver and its iterations, float64, and
MuJoCo's disable flags (e.g. `--disable contact`).
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jp
import numpy as np

import mjx_lite

EXAMPLES = """examples:
  {prog} cartpole                                  a bundled model (mjx_lite.models.names())
  {prog} humanoid --batch 64 --steps 100
  {prog} path/to/model.xml --dtype float64         any MJCF (or URDF) file
  {prog} humanoid --iterations 2 --disable contact
"""


class HelpFormatter(argparse.RawDescriptionHelpFormatter, argparse.ArgumentDefaultsHelpFormatter):
    """--help keeps the description's line breaks and shows each option's default (not None, off or empty)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default == []:
            return action.help
        return super()._get_help_string(action)


def model_arguments(p: argparse.ArgumentParser, default: str | None = None) -> None:
    """MODEL as a positional argument or --model (a bundled name or an MJCF/URDF path)."""
    names = ", ".join(mjx_lite.models.names())
    p.add_argument("model", nargs="?", default=None, help=f"MJCF/URDF path or bundled model name ({names})")
    p.add_argument("--model", dest="model_option", metavar="MODEL", default=default, help="the same, as an option")


def model_name(p: argparse.ArgumentParser, a: argparse.Namespace) -> str:
    name = a.model or a.model_option
    if name is None:
        p.error("give a model: a bundled name (e.g. cartpole) or an MJCF/URDF path")
    return name


SOLVER_NAMES = {int(mjx_lite.SolverType.PGS): "PGS", int(mjx_lite.SolverType.CG): "CG",
                int(mjx_lite.SolverType.NEWTON): "Newton"}  # fmt: skip


def fmt(x) -> str:
    """A number at its own precision: a float32 0.01 prints as 0.01, not 0.009999999776482582."""
    return np.format_float_positional(np.asarray(x)[()], trim="-") if np.ndim(x) == 0 else str(np.asarray(x))


def settings(m) -> str:
    """One line naming what drives speed: integrator, solver and iterations, timestep, dtype, disabled parts."""
    opt = m.opt
    disabled = [b.name.lower() for b in mjx_lite.DisableBit if int(opt.disableflags) & int(b)]
    return (f"timestep {fmt(opt.timestep)} s, {mjx_lite.IntegratorType(int(opt.integrator)).name.lower()}, "
            f"{SOLVER_NAMES[int(opt.solver)]} solver ({int(opt.iterations)} iterations, "
            f"{int(opt.ls_iterations)} line search), {np.dtype(opt.timestep.dtype).name}, "
            f"contacts <= {m.nconmax}, constraint rows <= {m.njmax}"
            + (f", disabled: {' '.join(disabled)}" if disabled else ""))  # fmt: skip


def rollout_fn(steps: int):
    """jit(vmap(scan(step))) returning the final Data and the per-step qpos."""

    def rollout(m, d):
        def body(d, _):
            d = mjx_lite.step(m, d)
            return d, d.qpos

        return jax.lax.scan(body, d, None, length=steps)

    return jax.jit(jax.vmap(rollout, in_axes=(None, 0)))


def apply_options(m, a: argparse.Namespace):
    """The model with the command line's --integrator, --solver, --iterations and --disable."""
    opt = m.opt
    if a.integrator:
        opt = opt.replace(integrator=int(mjx_lite.IntegratorType[a.integrator.upper()]))
    if a.solver:
        opt = opt.replace(solver=int(mjx_lite.SolverType[a.solver.upper()]))
    if a.iterations is not None:
        opt = opt.replace(iterations=a.iterations)
    bits = 0
    for name in a.disable:
        bits |= int(mjx_lite.DisableBit[name.upper()])
    # configure: the contact and constraint capacities follow the flags (e.g. none with contacts disabled)
    return mjx_lite.configure(m.replace(opt=opt.replace(disableflags=int(opt.disableflags) | bits)))


def option_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--integrator", choices=[t.name.lower() for t in mjx_lite.IntegratorType], default=None,
                   help="override the model's integrator (default: the model's)")  # fmt: skip
    p.add_argument("--solver", choices=[t.name.lower() for t in mjx_lite.SolverType], default=None,
                   help="override the model's constraint solver (default: the model's)")  # fmt: skip
    p.add_argument("--iterations", type=int, default=None, help="solver iterations (default: the model's)")
    p.add_argument("--disable", nargs="*", default=[], metavar="FLAG",
                   choices=[b.name.lower() for b in mjx_lite.DisableBit],
                   help="MuJoCo disable flags added to the model's (e.g. contact, constraint)")  # fmt: skip
    p.add_argument("--dtype", choices=["float32", "float64"], default="float32", help="float precision")


def main(argv: list[str] | None = None, prog: str = "python -m mjx_lite run") -> float:
    p = argparse.ArgumentParser(prog=prog, description=__doc__, formatter_class=HelpFormatter,
                                epilog=EXAMPLES.format(prog=prog))  # fmt: skip
    model_arguments(p, default="pendulum")
    p.add_argument("--batch", type=int, default=256, help="environments stepped in parallel (vmap)")
    p.add_argument("--steps", type=int, default=200, help="steps per environment (one lax.scan)")
    p.add_argument("--seed", type=int, default=0, help="seed of the initial velocities and controls")
    option_arguments(p)
    a = p.parse_args(argv)
    if a.dtype == "float64":
        jax.config.update("jax_enable_x64", True)
    name = model_name(p, a)
    try:
        m = apply_options(mjx_lite.load_mjcf(name), a)
    except mjx_lite.MJCFError as e:
        p.exit(2 if isinstance(e, NotImplementedError) else 1, f"{prog}: {e}\n")
    d = mjx_lite.make_data(m)
    rng = np.random.default_rng(a.seed)
    dtype = d.qvel.dtype
    qvel = jp.asarray(0.5 * rng.standard_normal((a.batch, m.nv)), dtype)
    ctrl = jp.asarray(rng.uniform(-1.0, 1.0, (a.batch, m.nu)), dtype)
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (a.batch,) + x.shape), d).replace(qvel=qvel, ctrl=ctrl)
    print(f"model {name}: nq {m.nq} nv {m.nv} nu {m.nu} ngeom {m.ngeom}; {settings(m)}")
    print(f"batch {a.batch} x {a.steps} steps on {jax.default_backend()}", flush=True)

    fn = rollout_fn(a.steps)
    t0 = time.perf_counter()
    compiled = fn.lower(m, db).compile()
    jit_s = time.perf_counter() - t0
    out, _ = compiled(m, db)
    jax.block_until_ready(out.qpos)
    t0 = time.perf_counter()
    out, traj = compiled(m, db)
    jax.block_until_ready(out.qpos)
    run_s = time.perf_counter() - t0
    sps = a.batch * a.steps / run_s

    qpos = np.asarray(out.qpos)
    print(f"compile {jit_s:.2f} s (once per model, batch and steps; a second process loads it from JAX's cache)")
    print(f"run {run_s:.3f} s: {sps:,.0f} steps/s (batch x steps / wall time of the second call)")
    print(f"final time {fmt(np.asarray(out.time)[0])} s  finite {bool(np.all(np.isfinite(qpos)))}  "
          f"qpos mean {np.round(qpos.mean(axis=0, dtype=np.float64), 3).tolist()}")  # fmt: skip
    warned = mjx_lite.warnings(out)
    if warned:
        print(f"warnings (environments that raised each): { {k: int(np.count_nonzero(v)) for k, v in warned.items()} }")
    del traj
    return sps


if __name__ == "__main__":
    main()
