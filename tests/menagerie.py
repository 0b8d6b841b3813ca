"""MuJoCo Menagerie files for the tests and benchmarks (issue 43), shared by tests/test_menagerie.py and
benchmarks/menagerie.py --all: where the collection is ($MJX_LITE_MENAGERIE: a checkout of MuJoCo Menagerie or of
its public subset `steadymingha/mujoco_menagerie`; CI has none, and the tests skip), which of its files MuJoCo
loads, MuJoCo's forward pass at a few states of a model, and our compiled step's forward pass against it.
"""

from __future__ import annotations

import glob
import os

import jax
import jax.numpy as jp
import mujoco
import numpy as np

from mjx_lite.collision import driver
from tests.oracle import random_state

# Data inputs copied from MuJoCo's state into ours
INPUTS = ("qpos", "qvel", "ctrl", "act", "qfrc_applied", "xfrc_applied", "mocap_pos", "mocap_quat", "qacc_warmstart")


def menagerie_dir() -> str | None:
    """$MJX_LITE_MENAGERIE where it is a directory, else None."""
    d = os.environ.get("MJX_LITE_MENAGERIE", "")
    return d if d and os.path.isdir(d) else None


def mujoco_loads(menagerie: str) -> list[str]:
    """The MJCF files under `menagerie` (paths relative to it, sorted) that MuJoCo loads (the public subset lacks
    some meshes: those files are left out)."""
    out = []
    for p in sorted(glob.glob(os.path.join(menagerie, "**", "*.xml"), recursive=True)):
        try:
            mujoco.MjModel.from_xml_path(p)
        except Exception:  # noqa: BLE001, S112 - a file MuJoCo refuses is not ours to run
            continue
        out.append(os.path.relpath(p, menagerie))
    return out


def oracle_states(mjm: mujoco.MjModel) -> list[dict]:
    """MuJoCo's inputs (INPUTS) and forward pass (qacc; contacts as sorted (geom1 < geom2, dist) rows) after
    mj_forward at qpos0, the first keyframe (qpos0 again without one) and two random states (tests/oracle.py's
    random_state, qpos within 0.1 of qpos0)."""
    mjd = mujoco.MjData(mjm)
    out = []
    for k in range(4):
        mujoco.mj_resetData(mjm, mjd)
        if k == 1 and mjm.nkey:
            mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
        elif k >= 2:
            random_state(mjm, mjd, np.random.default_rng(k), qpos_scale=0.1)
            mjd.time = 0.0
        mujoco.mj_forward(mjm, mjd)
        c = mjd.contact[: mjd.ncon]
        pairs = np.sort(np.stack([c.geom1, c.geom2], 1), 1) if mjd.ncon else np.zeros((0, 2), int)
        s = {k: np.array(getattr(mjd, k)) for k in INPUTS}
        s["qacc"] = mjd.qacc.copy()
        s["contacts"] = sorted(zip(pairs[:, 0].tolist(), pairs[:, 1].tolist(), c.dist.tolist()))
        out.append(s)
    return out


def batch_of(d0, states: list[dict], batch: int):
    """A batched Data (leading axis `batch`) of d0 with the states' INPUTS, cycling through them."""

    def one(s):
        return d0.replace(**{k: jp.asarray(s[k], getattr(d0, k).dtype).reshape(getattr(d0, k).shape) for k in INPUTS})

    return jax.tree.map(lambda *x: jp.stack(x), *[one(states[i % len(states)]) for i in range(batch)])


def forward_diff(m, out, s: dict) -> dict:
    """Our step's forward pass (qacc and contacts of `out`, one unbatched Data computed from s's inputs) against
    MuJoCo's at s: qacc_err (max |difference| over max(1, max |qacc|)), contacts_ok (the same geom pairs, each as
    many times), dist_err (the largest distance difference of the pairs in order; NaN where they differ), ncon
    (ours, MuJoCo's), ours and theirs (the geom pairs)."""
    ac = driver.active_contacts(m, out)
    g = np.sort(np.asarray(ac["geom"]), 1) if len(ac["dist"]) else np.zeros((0, 2), int)
    ours = sorted(zip(g[:, 0].tolist(), g[:, 1].tolist(), np.asarray(ac["dist"]).tolist()))
    a, b = [c[:2] for c in ours], [c[:2] for c in s["contacts"]]
    scale = max(1.0, float(np.max(np.abs(s["qacc"])))) if s["qacc"].size else 1.0
    qerr = float(np.max(np.abs(np.asarray(out.qacc) - s["qacc"]), initial=0.0)) / scale
    derr = max((abs(x[2] - y[2]) for x, y in zip(ours, s["contacts"])), default=0.0) if a == b else float("nan")
    return {"qacc_err": qerr, "contacts_ok": a == b, "dist_err": derr, "ncon": (len(a), len(b)), "ours": a,
            "theirs": b}  # fmt: skip
