"""System identification: parameter error vs number of trajectories and sensor noise.

A 2-link arm in the vertical plane (the test model `tests/test_sysid.py::ARM`: two masses, two joint dampings, two
motor gains) is simulated by MuJoCo C with perturbed parameters (masses +30 % / -30 %, dampings +30 % / -30 %,
gains -20 % / +20 %); Gaussian noise of standard deviation sigma is added to the logged qpos, qvel and sensor
(fingertip position); `sysid.fit` (multiple shooting, windows of 10 steps, fitted window starts, 20
Levenberg-Marquardt iterations, noise-weighted) recovers the six parameters. Also the friction of a box sliding and
tumbling on the floor (contacts in the data).

python benchmarks/grad_sysid.py [--quick]
"""

from __future__ import annotations

import os
import sys
import time

import jax

jax.config.update("jax_enable_x64", True)

import mujoco  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import mjx_lite as mjl  # noqa: E402
from mjx_lite import sysid  # noqa: E402
from tests.test_sysid import ARM, ARM_PARAMS, TUMBLE, _arm_errors, arm_logs, record  # noqa: E402


def arm_fit(n, noise):
    m = mjl.load_mjcf_string(ARM)
    logs = arm_logs(n, noise=noise, seed=1)
    kw = {"noise": {"qpos": noise, "qvel": noise, "sensordata": noise}} if noise else {}
    t = time.perf_counter()
    fit = sysid.fit(m, logs, params=ARM_PARAMS, window=10, iterations=20, **kw)
    wall = time.perf_counter() - t
    err = _arm_errors(fit)
    std = np.asarray(list(fit.std.values())) / np.abs(np.asarray(list(fit.params.values())))
    return err, std, wall


def box_fit(noise):
    mjm = mujoco.MjModel.from_xml_string(TUMBLE)
    mjm.geom_friction[1, 0] = 0.8
    rng = np.random.default_rng(0)
    logs = [record(mjm, s, 200, qvel0=v) for s, v in enumerate(([2.0, 0.5, 0, 3, -2, 5], [-1.5, 1.0, 0, -4, 1, 2]))]
    for log in logs:
        for k in ("qpos", "qvel"):
            log[k] = log[k] + noise * rng.normal(size=log[k].shape)
    m = mjl.load_mjcf_string(TUMBLE)
    kw = {"noise": {"qpos": noise, "qvel": noise}} if noise else {}
    t = time.perf_counter()
    fit = sysid.fit(m, logs, params=("geom_friction", (1, 0)), window=10, iterations=15, **kw)
    return abs(fit.params["geom_friction[1, 0]"] - 0.8) / 0.8, time.perf_counter() - t


def report(quick: bool = False) -> str:
    trajs = (1, 3) if quick else (1, 2, 4, 8)
    noises = (0.0, 1e-3) if quick else (0.0, 1e-4, 1e-3, 1e-2)
    rows = []
    for n in trajs:
        for noise in noises:
            err, std, wall = arm_fit(n, noise)
            print(n, noise, err, std, wall, flush=True)
            rows.append(f"| {n} | {noise:g} | {err.max():.1e} | {np.median(err):.1e} | {std.max():.1e} | "
                        f"{wall:.0f} s |")
    box = []
    for noise in (0.0,) if quick else (0.0, 1e-3):
        err, wall = box_fit(noise)
        print("box", noise, err, wall, flush=True)
        box.append(f"| {noise:g} | {err:.1e} | {wall:.0f} s |")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return "\n".join([
        "### System identification (float64, CPU)",
        "",
        f"`python benchmarks/grad_sysid.py{' --quick' if quick else ''}`. Six parameters of a 2-link arm (masses, "
        "dampings, motor gains perturbed by 20-30 % in MuJoCo C), 2 s logs (200 steps), windows of 10 steps, 20 "
        "Levenberg-Marquardt iterations; relative error of the fitted parameters, and the fit's own standard-error "
        "estimate (relative). Wall-clock includes compilation (one per number of trajectories). Shared 2-core "
        f"machine, load average {load:.1f} at the end.",
        "",
        "| trajectories | noise sigma | max rel. error | median rel. error | max rel. std err (reported) | wall |",
        "| --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Friction of a box thrown onto the floor (slides and tumbles; contacts in every window after landing), 2 "
        "logs of 1 s, true 0.8 from a guess of 0.5:",
        "",
        "| noise sigma (qpos, qvel) | rel. error | wall |",
        "| --- | --- | --- |",
        *box,
    ])


if __name__ == "__main__":
    import _args  # noqa: PLC0415 - benchmarks/ is the script's directory

    _args.check(__doc__)
    print(report(quick="--quick" in sys.argv))
