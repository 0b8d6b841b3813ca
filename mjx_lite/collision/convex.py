"""General convex collisions (support functions)."""

from __future__ import annotations

GENERAL_NCON = 1
PLANE_MESH_NCON = 4


def general(g1, g2, margin):
    raise NotImplementedError("general convex collider not implemented yet")


def plane_mesh(g1, g2, margin):
    raise NotImplementedError("plane-mesh collider not implemented yet")
