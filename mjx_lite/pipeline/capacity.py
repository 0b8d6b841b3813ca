"""Model capacities (the padded sizes of Data's contact and constraint arrays) and `configure`, which recomputes
them for a new configuration: in the runtime layer, so that stages that run a model at another capacity
(`pipeline.buckets`) need not import the model assembly above them (`mjx_lite.io` re-exports these)."""

from __future__ import annotations

from mjx_lite import types
from mjx_lite.collision import driver
from mjx_lite.config import Config
from mjx_lite.pipeline import constraint
from mjx_lite.types import Model

__all__ = ["configure"]


def configure(m: Model, config: Config | None = None, **changes) -> Model:
    """A copy of `m` with configuration `config` (or `m.config` with `changes`), capacities recomputed.

    Example: `m = mjx_lite.configure(m, gradients="unrolled", exact_reset=True)`. See `mjx_lite.Config`.
    """
    cfg = m.config if config is None else config
    if not isinstance(cfg, Config):
        raise TypeError(f"configure: config must be a mjx_lite.Config, not {type(cfg).__name__}")
    cfg = cfg.replace(**changes) if changes else cfg
    return _with_capacities(_replace_static_unchecked(m, config=cfg, nconmax=0, njmax=0))


def _replace_static_unchecked(m: Model, **changes) -> Model:
    """m.replace without Model's config check (configure recomputes the capacities right after)."""
    obj = object.__new__(Model)
    for n in Model._leaf_fields + Model._static_fields:
        object.__setattr__(obj, n, changes.get(n, getattr(m, n)))
    return obj


def _with_capacities(m: Model) -> Model:
    nconmax, njmax = _capacities(m)
    return m.replace(nconmax=nconmax, njmax=njmax)


def _capacities(m: Model) -> tuple[int, int]:
    """Static sizes of the padded contact and constraint arrays.

    Without caps: the pair table's rows (`driver.contact_capacity`) and the constraint plan's rows. With the caps of
    `types.requested_capacities` (the MJCF's `<size nconmax njmax>` or `m.config`): at most that many contact rows
    (the collision driver keeps the deepest, `driver.collision`), and as many contact slots as fit in njmax next to
    the static equality / friction / limit rows (all slots then have the model's largest condim's rows). A cap
    above what the model can produce changes nothing: the arrays are never padded beyond it.
    """
    raw = int(driver.contact_capacity(m))
    want_con, want_efc = types.requested_capacities(m)
    nconmax = raw if want_con < 0 else min(raw, want_con)
    if want_efc >= 0:
        fixed = int(constraint.efc_capacity(m, 0))  # rows that do not depend on contacts
        if fixed > want_efc:
            raise ValueError(
                f"njmax={want_efc} is below the model's {fixed} equality, friction-loss and limit constraint rows "
                "(mjx_lite gives each of them a static row); raise <size njmax> or Config.njmax, or use -1 (no cap)"
            )
        if constraint.efc_capacity(m, nconmax) > want_efc:
            per_slot = int(constraint.plan(m, raw).con_rows.max(initial=0))  # compacted slots: the largest condim
            nconmax = min(nconmax, (want_efc - fixed) // max(per_slot, 1))
    njmax = int(constraint.efc_capacity(m, nconmax))
    return nconmax, njmax
