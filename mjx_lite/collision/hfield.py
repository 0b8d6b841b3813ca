"""Height-field collisions (not implemented yet: models with colliding height fields are refused, in words)."""

from __future__ import annotations


def collider_for(type2: int):
    raise NotImplementedError(
        "collision: height-field collisions are not implemented yet (set contype/conaffinity of the hfield geom "
        "to 0, or exclude its pairs, to simulate the rest of the model)"
    )
