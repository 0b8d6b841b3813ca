"""Domain randomisation helpers: `randomize(model, rng) -> model` functions for `wrap_for_training`.

Every physical float of a Model is a traced leaf, so a randomised model has the same static structure and the
compiled step is reused (no retrace). `scale_randomizer` covers the common case, scaling named float fields by
uniform random factors:

    randomize = envs.scale_randomizer({
        "geom_friction": (0.6, 1.4),    # one factor per geom (all three coefficients)
        "body_mass": (0.8, 1.2),        # one factor per body
        "dof_damping": (0.5, 2.0),
        "actuator_gear": (0.9, 1.1),
        "opt.gravity": (0.95, 1.05),    # Option fields as "opt.<name>"
    })
    train_env = envs.wrap_for_training(env, randomize=randomize, num_envs=256)

Only the named fields change: derived compile-time quantities (body_subtreemass, dof_invweight0,
actuator_acc0, body_inertia for a scaled mass, the bias of a position actuator whose gain is scaled) are not
recomputed, as in MJX/Brax domain randomisation. Scale them together if the task depends on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import jax

from mjx_lite.types import Model, Option

__all__ = ["randomizable_fields", "scale_randomizer"]


def randomizable_fields() -> list[str]:
    """Names of the traced float fields of Model and Option (as "opt.<name>") that can be randomised.

    (Colours and lights are Model fields too: geom_rgba, mat_rgba, light_diffuse, ...; the <visual> settings in
    `m.vis` are a nested group, changed with `m.replace(vis=...)`.)"""
    model = [f.name for f in dataclasses.fields(Model) if not f.metadata.get("static") and f.name not in
             ("opt", "stat", "vis")]  # fmt: skip
    opt = ["opt." + f.name for f in dataclasses.fields(Option) if not f.metadata.get("static")]
    return sorted(model) + opt


def scale_randomizer(
    ranges: Mapping[str, tuple[float, float]], per: str = "object"
) -> Callable[[Model, jax.Array], Model]:
    """`randomize(model, rng)` multiplying each named float field by a factor drawn from U(lo, hi).

    Args:
      ranges: field name ("body_mass", "opt.gravity", ...; see `randomizable_fields()`) -> (lo, hi), lo <= hi.
      per: "object": one factor per row (per body, geom, dof, actuator ...; a vector Option field gets one
        factor); "element": one factor per array element; "field": one factor for the whole field.
    """
    allowed = set(randomizable_fields())
    static = {f.name for f in dataclasses.fields(Model) if f.metadata.get("static")}
    static |= {"opt." + f.name for f in dataclasses.fields(Option) if f.metadata.get("static")}
    if per not in ("object", "element", "field"):
        raise ValueError(f"scale_randomizer: per must be 'object', 'element' or 'field', not {per!r}")
    spec = {}
    for name, rng in ranges.items():
        if name in static:
            raise ValueError(f"scale_randomizer: {name!r} is a static (integer/host) field and cannot be randomised")
        if name not in allowed:
            raise ValueError(f"scale_randomizer: unknown float field {name!r}; randomisable: {sorted(allowed)}")
        lo, hi = (float(v) for v in rng)
        if not lo <= hi:
            raise ValueError(f"scale_randomizer: range for {name!r} must have lo <= hi, got ({lo}, {hi})")
        spec[name] = (lo, hi)
    names = sorted(spec)

    def randomize(model: Model, rng: jax.Array) -> Model:
        keys = jax.random.split(rng, max(len(names), 1))
        changes: dict = {}
        opt_changes: dict = {}
        for key, name in zip(keys, names):
            lo, hi = spec[name]
            is_opt = name.startswith("opt.")
            x = getattr(model.opt, name[4:]) if is_opt else getattr(model, name)
            if per == "element" or x.ndim == 0:
                shape = x.shape
            elif per == "object" and not is_opt:
                shape = x.shape[:1] + (1,) * (x.ndim - 1)
            else:
                shape = (1,) * x.ndim
            factor = jax.random.uniform(key, shape, x.dtype, lo, hi)
            (opt_changes if is_opt else changes)[name[4:] if is_opt else name] = x * factor
        if opt_changes:
            changes["opt"] = model.opt.replace(**opt_changes)
        return model.replace(**changes)

    return randomize
