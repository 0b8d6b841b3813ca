"""Program size of the collision stage (issue 43): the traced program grows with the pair groups, not with the number
of pairs, and each group's collider is traced once. A model with the structure that made ANYmal C slow to compile
(many cylinder-cylinder pairs: GJK/EPA, then the multiccd manifold) pins it."""

import dataclasses
import re

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jp  # noqa: E402
import pytest  # noqa: E402

import mjx_lite as mjl  # noqa: E402
from mjx_lite.collision import cylinder, driver  # noqa: E402

# StableHLO operations (constants and returns left out) of jit(vmap(the group's collision)) for the
# cylinder-cylinder model below: 6,820 when written (jax 0.10.2, float64), the same for 2 and 6 pairs. Work unrolled
# per pair shows up here; a deliberate growth of the collider moves this bound.
MAX_COLLISION_OPS = 7_800


def _cylinders(k: int) -> str:
    """k cylinders fixed in the world (they do not collide with each other) and one free cylinder: k pairs."""
    fixed = "".join(f'<geom type="cylinder" size=".05 .1" pos="{0.3 * i} 0 0"/>' for i in range(k))
    return f"""<mujoco><worldbody>{fixed}
      <body pos="0 0 .3"><freejoint/><geom type="cylinder" size=".05 .1"/></body></worldbody></mujoco>"""


def _ops(text: str) -> int:
    ops = re.findall(r"^\s*(?:%\S+ = )?\"?(stablehlo\.[a-z_]+)", text, re.MULTILINE)
    return sum(o not in ("stablehlo.constant", "stablehlo.return") for o in ops)


def _model(k: int):
    m = mjl.load_mjcf_string(_cylinders(k))
    (g,) = driver.pair_table(m).groups
    assert g.collider is cylinder.cylinder_cylinder and len(g.geom1) == k
    return m, g


def _group_program(m, g) -> str:
    """StableHLO of jit(vmap(one group's collision)) at batch 2."""
    d = mjl.make_data(m)
    db = jax.tree.map(lambda x: jp.broadcast_to(x, (2,) + x.shape), d)
    run = jax.vmap(lambda m, d: driver._run_group(m, d, g)[0], in_axes=(None, 0))
    return jax.jit(run).lower(m, db).as_text()


def test_group_program_size():
    """A cylinder-cylinder group (GJK/EPA on its near pairs, `driver._near_only`, then the multiccd manifold): its
    collider is traced once (not also for its output shapes, which cost ANYmal C's cylinder groups as much trace
    time as their loop body) and its program stays below MAX_COLLISION_OPS."""
    m, g = _model(6)
    calls = []

    def counted(g1, g2, margin):
        calls.append(1)
        return cylinder.cylinder_cylinder(g1, g2, margin)

    looped, driver._LOOPED = driver._LOOPED, (*driver._LOOPED, counted)
    try:
        n = _ops(_group_program(m, dataclasses.replace(g, collider=counted)))
    finally:
        driver._LOOPED = looped
    assert len(calls) == 1
    assert n <= MAX_COLLISION_OPS, n


@pytest.mark.slow  # two more traces of the group (~30 s at load 10); test_group_program_size: the bound
def test_program_size_independent_of_pairs():
    """The group's program for 2 and 6 cylinder-cylinder pairs: the same number of operations (vectorised over the
    pairs, nothing unrolled per pair)."""
    sizes = {k: _ops(_group_program(*_model(k))) for k in (2, 6)}
    assert sizes[2] == sizes[6] <= MAX_COLLISION_OPS, sizes
