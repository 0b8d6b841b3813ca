"""Points and elements of the generated <flexcomp> types (MuJoCo 4.0's mjCFlexcomp::MakeGrid / MakeSquare / MakeBox),
before the flexcomp's pose; host numpy, checked point by point against `mujoco` in tests/test_flex_types.py.

    point, element = shape(ftype, dim, count, spacing)   # point (npnt, 3), element (nelem, dim + 1)

  grid      dim 1: count[0] points spacing[0] apart along x, centred; dim 2: count[0] x count[1] points (point
            ix * count[1] + iy), two triangles per cell; dim 3: (ix * count[1] + iy) * count[2] + iz, six tetrahedra
            per cell (CUBE_TETS)
  circle    dim 1: count[0] - 1 points on a circle of radius spacing[0] / (2 sin(pi / (count[0] - 1))) in the
            xy plane, a closed loop of edges; other dims: as grid
  square    dim 2 (whatever dim says): the 2-D grid
  disc      dim 2: the 2-D grid with the triangles of the (-, +) and (+, -) quadrants flipped, each point moved
            along its direction from the centre to |p|_inf * size (size = spacing * (count - 1) / 2 per axis)
  box, cylinder, ellipsoid (dim 2 or 3, count >= 2 each way): the points of the surface of a count[0] x count[1] x
            count[2] grid of the cube [-1, 1]^3 (dim 2: without its top face, z = max), projected on a box of half
            sizes size, on a cylinder (xy direction scaled by |p_xy|_inf, radii size[0:2], half height size[2]) or on
            an ellipsoid (radii size); dim 2: two triangles per surface cell; dim 3: the centre first, then two
            tetrahedra (centre, surface triangle) per surface cell.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

EPS = 1e-14  # MuJoCo's compiler mjEPS
# the six tetrahedra of a grid cell (corners 0-3: the z = 0 face counter-clockwise from the origin, 4-7 above them)
CUBE_TETS = ((0, 3, 1, 7), (0, 1, 4, 7), (1, 3, 2, 7), (1, 2, 6, 7), (1, 5, 4, 7), (1, 6, 5, 7))
GENERATED = ("grid", "circle", "square", "disc", "box", "cylinder", "ellipsoid")


def _normalize(v: list, n: int) -> None:
    """mjuu_normvec on the first n entries of v (in place): unchanged when |v|^2 < EPS or | |v| - 1 | <= EPS."""
    nrm = sum(x * x for x in v[:n])
    if nrm < EPS:
        return
    nrm = math.sqrt(nrm)
    if abs(nrm - 1) > EPS:
        for i in range(n):
            v[i] /= nrm


def shape(ftype: str, dim: int, count: list, spacing: list) -> tuple[np.ndarray, np.ndarray, int]:
    """(point (npnt, 3), element (nelem, dim + 1), dim) of a generated flexcomp type (square and disc force dim 2)."""
    if ftype in ("square", "disc"):
        dim = 2
    if ftype in ("box", "cylinder", "ellipsoid"):
        pts, elem = _box(ftype, dim, count, spacing)
    else:
        pts, elem = _grid(ftype, dim, count, spacing)
    return np.array(pts, float).reshape(-1, 3), np.array(elem, np.int64).reshape(-1, dim + 1), dim


def _grid(ftype: str, dim: int, count: list, spacing: list) -> tuple[list, list]:
    pts, elem = [], []
    if dim == 1:
        for ix in range(count[0]):
            if ftype == "circle":
                if ix >= count[0] - 1:
                    continue
                theta = 2 * math.pi / (count[0] - 1)
                rad = spacing[0] / math.sin(theta / 2) / 2
                pts.append((rad * math.cos(theta * ix), rad * math.sin(theta * ix), 0.0))
                elem.append((ix, 0 if ix == count[0] - 2 else ix + 1))
            else:
                pts.append((spacing[0] * (ix - 0.5 * (count[0] - 1)), 0.0, 0.0))
                if ix < count[0] - 1:
                    elem.append((ix, ix + 1))
    elif dim == 2:
        c1, c2 = count[1], count[2]
        for ix in range(count[0]):
            for iy in range(count[1]):
                x, y = spacing[0] * (ix - 0.5 * (count[0] - 1)), spacing[1] * (iy - 0.5 * (count[1] - 1))
                pts.append((x, y, 0.0))
                tri = [[0, 1, 2], [0, 2, 3]]
                if ftype == "disc" and ((x < -EPS and y > -EPS) or (x > -EPS and y < -EPS)):
                    tri[0][2], tri[1][0] = 3, 1
                if ix < count[0] - 1 and iy < count[1] - 1:
                    v = (c2 * c1 * ix + c2 * iy, c2 * c1 * (ix + 1) + c2 * iy, c2 * c1 * (ix + 1) + c2 * (iy + 1),
                         c2 * c1 * ix + c2 * (iy + 1))  # fmt: skip
                    elem += [tuple(v[k] for k in t) for t in tri]
        if ftype == "disc":
            size = (0.5 * spacing[0] * (count[0] - 1), 0.5 * spacing[1] * (count[1] - 1))
            for i, p in enumerate(pts):
                q = list(p)
                l0 = max(abs(q[0]), abs(q[1]))
                _normalize(q, 2)
                pts[i] = (q[0] * size[0] * l0, q[1] * size[1] * l0, q[2])
    else:
        for ix, iy, iz in itertools.product(range(count[0]), range(count[1]), range(count[2])):
            pts.append(tuple(spacing[k] * (i - 0.5 * (count[k] - 1)) for k, i in enumerate((ix, iy, iz))))
            if ix < count[0] - 1 and iy < count[1] - 1 and iz < count[2] - 1:
                corner = [((ix + a) * count[1] + iy + b) * count[2] + iz + c
                          for c, (a, b) in itertools.product((0, 1), ((0, 0), (1, 0), (1, 1), (0, 1)))]  # fmt: skip
                elem += [tuple(corner[k] for k in t) for t in CUBE_TETS]
    return pts, elem


def _project(ftype: str, count: list, spacing: list, ix: int, iy: int, iz: int) -> tuple:
    """BoxProject: grid coordinates -> a point of the box, cylinder or ellipsoid surface."""
    p = [2.0 * ix / (count[0] - 1) - 1, 2.0 * iy / (count[1] - 1) - 1, 2.0 * iz / (count[2] - 1) - 1]
    size = [0.5 * spacing[k] * (count[k] - 1) for k in range(3)]
    if ftype == "box":
        return tuple(p[k] * size[k] for k in range(3))
    if ftype == "cylinder":
        l0 = max(abs(p[0]), abs(p[1]))
        _normalize(p, 2)
        return (p[0] * size[0] * l0, p[1] * size[1] * l0, p[2] * size[2])
    _normalize(p, 3)
    return tuple(p[k] * size[k] for k in range(3))


def _box(ftype: str, dim: int, count: list, spacing: list) -> tuple[list, list]:
    """MakeBox (open: a dim 2 surface has no top face): the surface points in MuJoCo's order, then the elements."""
    c0, c1, c2 = count
    open2 = dim == 2
    pts = [(0.0, 0.0, 0.0)] if dim == 3 else []
    idx: dict[tuple, int] = {}

    def add(ix, iy, iz):
        idx[(ix, iy, iz)] = len(pts) - (dim == 3)
        pts.append(_project(ftype, count, spacing, ix, iy, iz))

    for iz in (0, c2 - 1):
        for ix, iy in itertools.product(range(c0), range(c1)):
            if not (open2 and iz != 0):
                add(ix, iy, iz)
    for iy in (0, c1 - 1):
        for ix, iz in itertools.product(range(c0), range(c2)):
            if iz > 0 and (open2 or iz < c2 - 1):
                add(ix, iy, iz)
    for ix in (0, c0 - 1):
        for iy, iz in itertools.product(range(c1), range(c2)):
            if iz > 0 and (open2 or iz < c2 - 1) and 0 < iy < c1 - 1:
                add(ix, iy, iz)

    def bid(ix, iy, iz):  # BoxID: the closed box's numbering after the centre (dim 3)
        if iz == 0:
            return ix * c1 + iy + 1
        if iz == c2 - 1:
            return c0 * c1 + ix * c1 + iy + 1
        if iy == 0:
            return 2 * c0 * c1 + ix * (c2 - 2) + iz
        if iy == c1 - 1:
            return 2 * c0 * c1 + c0 * (c2 - 2) + ix * (c2 - 2) + iz
        if ix == 0:
            return 2 * c0 * c1 + 2 * c0 * (c2 - 2) + (iy - 1) * (c2 - 2) + iz
        return 2 * c0 * c1 + 2 * c0 * (c2 - 2) + (c1 - 2) * (c2 - 2) + (iy - 1) * (c2 - 2) + iz

    elem: list = []
    for iz in (0, c2 - 1):
        for ix, iy in itertools.product(range(c0), range(c1)):
            if (open2 and iz != 0) or ix >= c0 - 1 or iy >= c1 - 1:
                continue
            if dim == 3:
                elem += [(0, bid(ix, iy, iz), bid(ix + 1, iy, iz), bid(ix + 1, iy + 1, iz)),
                         (0, bid(ix, iy, iz), bid(ix, iy + 1, iz), bid(ix + 1, iy + 1, iz))]  # fmt: skip
            else:
                s1, s2 = (1, 0) if iz == 0 else (0, 1)
                elem += [(idx[(ix, iy, iz)], idx[(ix + 1, iy + s1, iz)], idx[(ix + 1, iy + s2, iz)]),
                         (idx[(ix, iy, iz)], idx[(ix + s2, iy + 1, iz)], idx[(ix + s1, iy + 1, iz)])]  # fmt: skip
    for iy in (0, c1 - 1):
        for ix, iz in itertools.product(range(c0), range(c2)):
            if ix >= c0 - 1 or iz >= c2 - 1:
                continue
            if dim == 3:
                elem += [(0, bid(ix, iy, iz), bid(ix + 1, iy, iz), bid(ix + 1, iy, iz + 1)),
                         (0, bid(ix, iy, iz), bid(ix, iy, iz + 1), bid(ix + 1, iy, iz + 1))]  # fmt: skip
            else:
                x0, dx = (ix, 1) if iy == 0 else (ix + 1, -1)
                elem += [(idx[(x0, iy, iz)], idx[(x0 + dx, iy, iz)], idx[(x0 + dx, iy, iz + 1)]),
                         (idx[(x0, iy, iz)], idx[(x0 + dx, iy, iz + 1)], idx[(x0, iy, iz + 1)])]  # fmt: skip
    for ix in (0, c0 - 1):
        for iy, iz in itertools.product(range(c1), range(c2)):
            if iy >= c1 - 1 or iz >= c2 - 1:
                continue
            if dim == 3:
                elem += [(0, bid(ix, iy, iz), bid(ix, iy + 1, iz), bid(ix, iy + 1, iz + 1)),
                         (0, bid(ix, iy, iz), bid(ix, iy, iz + 1), bid(ix, iy + 1, iz + 1))]  # fmt: skip
            else:
                y0, dy = (iy, 1) if ix != 0 else (iy + 1, -1)
                elem += [(idx[(ix, y0, iz)], idx[(ix, y0 + dy, iz)], idx[(ix, y0 + dy, iz + 1)]),
                         (idx[(ix, y0, iz)], idx[(ix, y0 + dy, iz + 1)], idx[(ix, y0, iz + 1)])]  # fmt: skip
    return pts, elem
