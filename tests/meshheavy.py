"""A generated gripper with Robotiq-sized meshes (issue 43), shared by tests/test_mesh_heavy.py and
benchmarks/menagerie.py.

Two fingers on slide joints coupled by a joint equality and closed by a position actuator, each with a link mesh
(a closed lat-long surface of 16,802 vertices, dented so that about 870 of them are on its convex hull: the size of
the Robotiq 2F-85's largest meshes) and a pad mesh (a 144-gon prism: a 144-vertex face, as the Robotiq's pads), a
free box between the pads and a floor: mesh-mesh, mesh-box and mesh-plane pairs, the hull-size classes of a
mesh-heavy gripper.
"""

from __future__ import annotations

import struct

import numpy as np


def stl(v: np.ndarray, f: list) -> bytes:
    """Binary STL of vertices v (N, 3) and triangles f (T, 3)."""
    v = np.asarray(v, np.float32)
    out = bytearray(80) + struct.pack("<I", len(f))
    for tri in f:
        out += struct.pack("<3f", 0, 0, 0) + v[list(tri)].tobytes() + b"\0\0"
    return bytes(out)


def dented_ellipsoid(nlat: int = 120, nlon: int = 140, radii=(0.02, 0.012, 0.03), every=(4, 5), dent: float = 0.97):
    """A closed lat-long surface of nlat * nlon + 2 vertices (radii the semi-axes) whose vertices are pushed in by
    `dent` except on every (4th, 5th) row and column: (vertices (V, 3), outward triangles (T, 3))."""
    th = np.linspace(0, np.pi, nlat + 2)[1:-1]
    ph = np.linspace(0, 2 * np.pi, nlon, endpoint=False)
    t, p = np.meshgrid(th, ph, indexing="ij")
    keep = (np.arange(nlat)[:, None] % every[0] == 0) & (np.arange(nlon)[None] % every[1] == 0)
    r = np.where(keep, 1.0, dent)
    v = np.stack([np.sin(t) * np.cos(p), np.sin(t) * np.sin(p), np.cos(t)], -1) * r[..., None]
    v = np.concatenate([[[0, 0, 1]], v.reshape(-1, 3), [[0, 0, -1]]]) * np.asarray(radii)

    def idx(i, j):
        return 1 + i * nlon + (j % nlon)

    f = [(0, idx(0, j), idx(0, j + 1)) for j in range(nlon)]
    for i in range(nlat - 1):
        for j in range(nlon):
            f += [(idx(i, j), idx(i + 1, j), idx(i + 1, j + 1)), (idx(i, j), idx(i + 1, j + 1), idx(i, j + 1))]
    last = len(v) - 1
    f += [(last, idx(nlat - 1, j + 1), idx(nlat - 1, j)) for j in range(nlon)]
    return v, f


def prism(n: int = 144, radius: float = 0.01, h: float = 0.003, rings: int = 12):
    """A prism on a regular n-gon (two n-gon faces at z = -h, h), its sides cut into `rings` bands (vertices on the
    side faces, not on the hull's vertices): (vertices, outward triangles)."""
    a = 2 * np.pi * np.arange(n) / n
    ring = np.stack([radius * np.cos(a), radius * np.sin(a)], -1)
    v = np.concatenate([np.c_[ring, np.full(n, z)] for z in np.linspace(-h, h, rings + 1)])
    f = []
    for k in range(rings):
        for j in range(n):
            a0, a1, b0, b1 = k * n + j, k * n + (j + 1) % n, (k + 1) * n + j, (k + 1) * n + (j + 1) % n
            f += [(a0, a1, b1), (a0, b1, b0)]
    top = rings * n
    f += [(0, j + 1, j) for j in range(1, n - 1)]  # bottom (outward -z)
    f += [(top, top + j, top + j + 1) for j in range(1, n - 1)]  # top
    return v, f


GRIPPER_XML = """<mujoco model="gripper">
  <option timestep="0.002" integrator="implicitfast" cone="elliptic" impratio="10"/>
  <asset><mesh name="link" file="link.stl"/><mesh name="pad" file="pad.stl"/></asset>
  <worldbody>
    <geom name="floor" type="plane" size=".3 .3 .01"/>
    <body name="base" pos="0 0 .035">
      <geom name="base" type="box" size=".04 .015 .01" pos="0 0 .06"/>
      <body name="left" pos="-.03 0 0"><joint name="left" type="slide" axis="1 0 0" range="0 .03"/>
        <geom name="left_link" type="mesh" mesh="link" pos="-.008 0 .01"/>
        <geom name="left_pad" type="mesh" mesh="pad" pos=".006 0 -.02" euler="0 90 0" friction="1.5"/></body>
      <body name="right" pos=".03 0 0"><joint name="right" type="slide" axis="-1 0 0" range="0 .03"/>
        <geom name="right_link" type="mesh" mesh="link" pos=".008 0 .01" euler="0 0 180"/>
        <geom name="right_pad" type="mesh" mesh="pad" pos="-.006 0 -.02" euler="0 90 0" friction="1.5"/></body>
    </body>
    <body name="object" pos="0 0 .012"><freejoint/><geom name="object" type="box" size=".012 .012 .012" mass=".05"/>
    </body>
    <body name="puck" pos="0 .05 .003"><freejoint/><geom name="puck" type="mesh" mesh="pad"/></body>
  </worldbody>
  <equality><joint joint1="left" joint2="right"/></equality>
  <actuator><position joint="left" kp="50" ctrlrange="0 .03"/></actuator>
</mujoco>"""


def gripper() -> tuple[str, dict[str, bytes]]:
    """The gripper's MJCF text and its mesh files (name -> bytes)."""
    return GRIPPER_XML, {"link.stl": stl(*dented_ellipsoid()), "pad.stl": stl(*prism())}
