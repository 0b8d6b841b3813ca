"""Contact-aware gradients: a step with its exact value and a randomly smoothed reverse-mode derivative.

Selected by `Config(contact_gradients="smooth")`; `mjx_lite.step` consults the configuration and calls
`smooth_step` with itself as the exact step, so this module sits below the entry points and imports none of them.
The method (first-order randomised smoothing, the "bundled gradient" of Suh, Pang and Tedrake 2022) and its cost
are described in `mjx_lite.derivatives` and docs/gradients.md.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.pipeline.integrate import integrate_pos
from mjx_lite.types import Data, Model

# the inputs of a step that its result depends on (everything else in Data is recomputed by forward)
_INPUTS = ("qpos", "qvel", "act", "ctrl", "qfrc_applied", "xfrc_applied", "mocap_pos", "mocap_quat",
           "qacc_warmstart", "time")  # fmt: skip


def _zero_cotangent(x):
    dt = jp.result_type(x)
    if jp.issubdtype(dt, jp.inexact):
        return jp.zeros_like(x)
    return np.zeros(jp.shape(x), dtype=jax.dtypes.float0)


def _smoothing_dofs(m: Model) -> np.ndarray:
    dofs = m.config.contact_smoothing_dofs
    if dofs is None:
        return np.arange(m.nv)
    dofs = np.asarray(dofs, int)
    if np.any(dofs >= m.nv):
        raise ValueError(f"Config.contact_smoothing_dofs {tuple(dofs.tolist())}: the model has nv={m.nv} dofs")
    return dofs


def smooth_step(step: Callable[[Model, Data], Data], m: Model, d: Data) -> Data:
    """One step whose value is exact and whose reverse-mode derivative is randomly smoothed (module docstring).

    The derivative with respect to the step's inputs (qpos, qvel, act, ctrl, applied forces, mocap, time) and the
    model's floats is the mean of the exact derivatives of `step` at `m.config.contact_smoothing_samples` copies
    of the state whose positions (the dofs `contact_smoothing_dofs`, tangent space) are perturbed by
    N(0, contact_smoothing_std^2); an even number of samples is drawn as antithetic pairs (+w, -w). The key
    depends only on `contact_smoothing_seed` and the step count round(time / timestep), so the gradient of a
    rollout is deterministic. Reverse mode only (`jax.grad`, `jax.vjp`, `jax.jacrev`). `step` is the exact step
    (`mjx_lite.step` passes itself and is called back with contact_gradients="exact").
    """
    cfg = m.config
    n = cfg.contact_smoothing_samples
    std = cfg.contact_smoothing_std
    seed = cfg.contact_smoothing_seed
    dofs = _smoothing_dofs(m)
    mx = _exact(m)
    x = {k: getattr(d, k) for k in _INPUTS}

    def run(model, x, rest):
        return step(model, rest.replace(**x))

    @jax.custom_vjp
    def f(model, x, rest):
        return run(model, x, rest)

    def f_fwd(model, x, rest):
        return run(model, x, rest), (model, x, rest)

    def f_bwd(res, ct):
        model, x, rest = res
        count = jp.round(x["time"] / model.opt.timestep).astype(jp.int32)
        key = jax.random.fold_in(jax.random.PRNGKey(seed), count)
        half = (n + 1) // 2 if n > 1 else 1
        w = std * jax.random.normal(key, (half, dofs.size), x["qvel"].dtype)
        if n > 1:
            w = jp.concatenate([w, -w])[:n]
        dq = jp.zeros((w.shape[0], m.nv), w.dtype).at[:, dofs].set(w)

        def one(dq):
            def perturbed(mm, xx):
                xp = dict(xx, qpos=integrate_pos(mm, xx["qpos"], dq, 1.0))
                return run(mm, xp, rest)

            _, vjp = jax.vjp(perturbed, model, x)
            return vjp(ct)

        gm, gx = jax.vmap(one)(dq)
        mean = lambda g: jp.mean(g, axis=0)  # noqa: E731
        return jax.tree.map(mean, gm), jax.tree.map(mean, gx), jax.tree.map(_zero_cotangent, rest)

    f.defvjp(f_fwd, f_bwd)
    rest = d.replace(**{k: jax.lax.stop_gradient(v) for k, v in x.items()})
    return f(mx, x, rest)


def _exact(m: Model) -> Model:
    """m with contact_gradients="exact" (no other change)."""
    if m.config.contact_gradients == "exact":
        return m
    return m.replace(config=m.config.replace(contact_gradients="exact"))
