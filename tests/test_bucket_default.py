"""`Config.contact_buckets="large"` (mjx_lite/pipeline/buckets.py): models whose padded constraint rows
are many and mostly dead, with few kinematic trees, run "auto"'s buckets, equal to the padded step
(contact_buckets=None) to float64 round-off, with the overflow flagged per environment; other models trace the padded
step's program itself."""

import os

import jax
import jax.numpy as jp
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite.pipeline import buckets

# The bucketed and the padded step solve the same problem, rows in the same order: only reductions over the dead rows
# differ (sums of exact zeros grouped otherwise): float64 round-off on values of order 1-100.
ROUNDOFF = 1e-11

# One free body carrying a 10 x 10 grid of spheres (condims 1, 3, 4, 6 in turn: the bucket's slots have the largest,
# the padded layout's each its own) above a plane: 100 plane-sphere pairs, `<size nconmax="90">` keeps 90 slots (900
# rows: "large"). The 4 corner spheres hang 2 cm below the others, the 28 of the next ring 1 cm: at body height LOW
# the corners touch (4 live), 1 cm lower 32 (the bucket of 32, full), 2 cm lower all 100 (above every bucket, and 10
# over the cap: CONTACTFULL).
N = 10
LOW = 0.1 + 0.02 - 0.001


def _xml(extra_bodies: int = 0) -> str:
    """The grid, and `extra_bodies` free spheres high up (more kinematic trees)."""
    spheres = []
    for i in range(N):
        for j in range(N):
            ring = min(i, j, N - 1 - i, N - 1 - j)
            corner = i in (0, N - 1) and j in (0, N - 1)
            z = -0.02 if corner else (-0.01 if ring == 1 else 0.0)
            cd = (1, 3, 4, 6)[(i * N + j) % 4]
            spheres.append(f'<geom type="sphere" size=".1" pos="{0.25 * i} {0.25 * j} {z}" condim="{cd}"/>')
    return f"""<mujoco>
  <option timestep="0.005" iterations="100" tolerance="1e-12" ls_iterations="50"/>
  <size nconmax="90"/>
  <worldbody>
    <geom type="plane" size="10 10 .1"/>
    <body pos="0 0 {LOW}"><freejoint/>{"".join(spheres)}</body>
    {"".join(f'<body pos="{i} -2 3"><freejoint/><geom type="sphere" size=".1"/></body>' for i in range(extra_bodies))}
  </worldbody>
</mujoco>"""


@pytest.fixture(scope="module")
def grid():
    """("large" model, padded model, vmapped step) of the sphere grid."""
    m = mjl.configure(mjl.load_mjcf_string(_xml()), contact_buckets="large")
    return m, mjl.configure(m, contact_buckets=None), jax.jit(jax.vmap(mjl.step, in_axes=(None, 0)))


def _state(m, dz: float, seed: int):
    """The grid dz below LOW, with a small random velocity."""
    d = mjl.make_data(m)
    rng = np.random.default_rng(seed)
    return d.replace(qpos=d.qpos.at[2].add(-dz), qvel=0.01 * jp.asarray(rng.standard_normal(m.nv)))


def test_large_picks_large_models(grid):
    m, off, _ = grid
    assert (m.nconmax, m.njmax) == (90, 900)  # 90 slots of 10 rows (condim 6, pyramidal)
    assert buckets.large(m) and buckets.capacities(m) == buckets.AUTO_BUCKETS == (8, 32)
    assert buckets.capacities(off) == ()
    # a capped layout below LARGE_MIN_ROWS keeps its padded program; "auto" still buckets it
    small = mjl.configure(m, nconmax=40)
    assert small.njmax < buckets.LARGE_MIN_ROWS and buckets.capacities(small) == ()
    assert buckets.capacities(mjl.configure(small, contact_buckets="auto")) == (8,)
    # 600 rows, but not LARGE_MIN_RATIO times the bucket of 8's 80 (90 slots: 900 rows, 11x)
    capped = mjl.configure(m, nconmax=60)
    assert capped.njmax >= buckets.LARGE_MIN_ROWS and not buckets.large(capped) and buckets.capacities(capped) == ()
    # more kinematic trees than LARGE_MAX_TREES: their contacts likely do not fit the buckets
    crowd = mjl.configure(mjl.load_mjcf_string(_xml(extra_bodies=buckets.LARGE_MAX_TREES)), contact_buckets="large")
    assert crowd.ntree == buckets.LARGE_MAX_TREES + 1 and crowd.njmax >= m.njmax and buckets.capacities(crowd) == ()
    assert m.ntree == 1
    with pytest.raises(ValueError, match="contact_buckets"):
        mjl.Config(contact_buckets="big")


def test_small_models_trace_the_padded_program():
    """Below the thresholds "large" changes nothing: no bucket (forward then runs the padded stages, as with
    contact_buckets=None), so the step's jaxpr is the padded one (checked on cartpole: CI time, a trace of the
    humanoid's step takes ~15 s) and its compile the same program's. dm_control's humanoid (403 rows, 7.6x its
    bucket of 8's) and cartpole."""
    import dm_control.suite  # noqa: PLC0415 - a test dependency, imported on use

    suite = os.path.dirname(dm_control.suite.__file__)
    for name in ("cartpole", "humanoid"):
        m = mjl.configure(mjl.load_mjcf(os.path.join(suite, name + ".xml")), contact_buckets="large")
        assert buckets.capacities(m) == () and not buckets.large(m), name
        assert not buckets.enabled(m)
        if name == "cartpole":
            off = mjl.configure(m, contact_buckets=None)
            d = mjl.make_data(m)
            a, b = (str(jax.make_jaxpr(mjl.step)(mm, d)) for mm in (m, off))
            assert a == b, name


def _check_lanes(m, a, b):
    """Every lane of the "large" step b equals the padded step a (fields the user reads, the live rows, flags)."""
    for f in ("qpos", "qvel", "qacc", "qfrc_constraint"):
        x, y = np.asarray(getattr(a, f)), np.asarray(getattr(b, f))
        np.testing.assert_allclose(y, x, rtol=0, atol=ROUNDOFF * max(1.0, float(np.abs(x).max())), err_msg=f)
    for f in ("ncon", "nefc", "solver_niter", "warning_number", "efc_mask", "efc_type", "efc_id", "efc_state"):
        live = np.asarray(a.efc_mask) if f.startswith("efc_") and f != "efc_mask" else True
        np.testing.assert_array_equal(np.where(live, getattr(b, f), 0), np.where(live, getattr(a, f), 0), err_msg=f)
    live = np.asarray(a.efc_mask)
    x, y = np.asarray(a.efc_force), np.asarray(b.efc_force)
    np.testing.assert_allclose(y[live], x[live], rtol=0, atol=ROUNDOFF * max(1.0, float(np.abs(x).max())))
    for f in ("dist", "geom", "efc_address", "active"):
        np.testing.assert_array_equal(getattr(b.contact, f), getattr(a.contact, f), err_msg="contact." + f)


# slow (CI time: the vmapped "large" and padded steps of the 900-row grid compile, ~95 s wall / ~30 CPU-s at load 11);
# the bucketed step equals the padded one with explicit capacities in CI (tests/test_contact_buckets.py): "large" runs
# the same code with "auto"'s capacities
@pytest.mark.slow
@pytest.mark.parametrize(("dz", "need", "full"), [(0.0, 4, False), (0.01, 32, False), (0.02, 90, True)],
                         ids=["bucket8", "bucket32", "fallback-overflow"])  # fmt: skip
def test_large_step_equals_padded(grid, dz, need, full):
    """A batch of two: one environment at rest on its corners (4 live) and one dz lower (4, 32 live: the buckets of 8
    and 32; or all 100 spheres down: 90 kept, CONTACTFULL in that environment only, the padded fallback for the
    batch). The "large" step equals the padded step in every lane, flags included."""
    m, off, vstep = grid
    batch = jax.tree.map(lambda *x: jp.stack(x), _state(m, 0.0, 1), _state(m, dz, 2))
    a, b = jax.device_get((vstep(off, batch), vstep(m, batch)))
    lanes = [jax.tree.map(lambda x, i=i: x[i], a) for i in range(2)]
    assert [int(buckets.need(m, x)) for x in lanes] == [4, need]
    assert (max(4, need) > buckets.capacities(m)[-1]) == full
    flags = np.asarray(a.warning_number)[:, int(mjl.Warning.CONTACTFULL)]
    assert flags.tolist() == [0, int(full)], flags  # overflow flagged per environment
    _check_lanes(m, a, b)


@pytest.mark.slow  # the vmapped gradient of the step compiles for both models (each bucket's branch)
def test_large_grad_equals_padded(grid):
    """Reverse mode through a step under vmap (the bucket of 8 and of 32 in one batch: the 32's): the padded step's."""
    m, off, _ = grid

    def loss(mm, qvel, d0):
        d = mjl.step(mm, d0.replace(qvel=qvel))
        return jp.sum(d.qpos**2) + jp.sum(d.qvel**2)

    batch = jax.tree.map(lambda *x: jp.stack(x), _state(m, 0.0, 3), _state(m, 0.01, 4))
    grad = jax.jit(jax.vmap(jax.grad(loss, argnums=1), in_axes=(None, 0, 0)))
    ga, gb = grad(off, batch.qvel, batch), grad(m, batch.qvel, batch)
    assert np.all(np.isfinite(ga))
    np.testing.assert_allclose(gb, ga, rtol=0, atol=ROUNDOFF * max(1.0, float(np.abs(ga).max())))


@pytest.mark.slow  # the quadruped's padded and bucketed steps compile (minutes on a 2-core CPU)
def test_quadruped_large_is_bucketed_and_exact():
    """dm_control's quadruped (455 slots, 1246 rows, 12.5x its bucket of 8's 100, 2 trees) runs "auto"'s buckets
    under "large"; a state of a rollout (after landing) steps as the padded model does."""
    import dm_control.suite  # noqa: PLC0415 - a test dependency, imported on use

    m = mjl.configure(mjl.load_mjcf(os.path.join(os.path.dirname(dm_control.suite.__file__), "quadruped.xml")),
                      contact_buckets="large")
    off = mjl.configure(m, contact_buckets=None)
    assert buckets.capacities(m) == (8, 32) and buckets.capacities(off) == ()
    step = jax.jit(mjl.step)
    rng = np.random.default_rng(1)
    d = mjl.make_data(m)
    for _ in range(80):
        d = step(off, d.replace(ctrl=rng.uniform(-1, 1, m.nu)))
    a, b = jax.device_get((step(off, d), step(m, d)))
    assert 0 < int(buckets.need(m, a)) <= 32
    stack = lambda x: jax.tree.map(lambda y: np.asarray(y)[None], x)  # noqa: E731
    _check_lanes(m, stack(a), stack(b))
