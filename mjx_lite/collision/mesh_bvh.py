"""MuJoCo's bounding volume hierarchy of a mesh's faces (mjCBoundingVolumeHierarchy::MakeBVH), host side, in numpy.

MuJoCo builds it top down: a node's box is the union of its faces' boxes (flat ones inflated by mjEPS); its faces are
split at n // 2 by their centres (the faces' circumcentres) along the node's longest axis (longer by more than
mjEPS, x first), with std::nth_element; nodes are numbered in preorder. The mesh-SDF collider
(collision/sdf_mesh_pair.py) visits its leaves in MuJoCo's traversal order, so the tree must be MuJoCo's node for node.
"""

from __future__ import annotations

import numpy as np

_EPS = 1e-14  # mjEPS


def _circumcenters(vert: np.ndarray, face: np.ndarray) -> np.ndarray:
    """(nface, 3) MuJoCo's face centres (mjCMesh::MakeCenter: circumcentres), the BVH's element positions."""
    v0, v1, v2 = vert[face[:, 0]], vert[face[:, 1]], vert[face[:, 2]]
    a, b = v0 - v2, v1 - v2
    nrm = np.cross(a, b)
    na = a[:, 0] * a[:, 0] + a[:, 1] * a[:, 1] + a[:, 2] * a[:, 2]
    nb = b[:, 0] * b[:, 0] + b[:, 1] * b[:, 1] + b[:, 2] * b[:, 2]
    area = np.sqrt(nrm[:, 0] * nrm[:, 0] + nrm[:, 1] * nrm[:, 1] + nrm[:, 2] * nrm[:, 2])
    vec = na[:, None] * b - nb[:, None] * a
    res = np.cross(vec, nrm)
    with np.errstate(all="ignore"):
        return res / (2 * area * area)[:, None] + v2


# MuJoCo partitions each BVH node's faces with std::nth_element under a comparator that treats centres within mjEPS
# as equal (then the face index decides). That comparator is not a strict weak order where centres nearly tie, and
# which faces go left then depends on the partition algorithm: `exact_bvh` replays the one of GCC's libstdc++
# (introselect: median-of-3 pivot to the front, unguarded Hoare partition, insertion sort below 4 elements; a heap
# select past the depth limit), which MuJoCo's Linux builds use, on the faces in MuJoCo's order.


def _introselect(a: list, nth: int, less) -> None:
    """In-place nth_element of list a (libstdc++'s algorithm)."""

    def swap(i, j):
        a[i], a[j] = a[j], a[i]

    first, last = 0, len(a)
    if first == last or nth == last:
        return
    depth = 2 * (max(1, last - first).bit_length() - 1)
    while last - first > 3:
        if depth == 0:
            _heap_select(a, first, nth + 1, last, less)
            swap(first, nth)
            return
        depth -= 1
        mid = first + (last - first) // 2
        x, y, z = first + 1, mid, last - 1
        if less(a[x], a[y]):
            if less(a[y], a[z]):
                swap(first, y)
            elif less(a[x], a[z]):
                swap(first, z)
            else:
                swap(first, x)
        elif less(a[x], a[z]):
            swap(first, x)
        elif less(a[y], a[z]):
            swap(first, z)
        else:
            swap(first, y)
        lo, hi, pivot = first + 1, last, first
        while True:
            while less(a[lo], a[pivot]):
                lo += 1
            hi -= 1
            while less(a[pivot], a[hi]):
                hi -= 1
            if not lo < hi:
                break
            swap(lo, hi)
            lo += 1
        cut = lo
        if cut <= nth:
            first = cut
        else:
            last = cut
    for i in range(first + 1, last):  # insertion sort
        val = a[i]
        if less(val, a[first]):
            a[first + 1 : i + 1] = a[first:i]
            a[first] = val
        else:
            j = i
            while less(val, a[j - 1]):
                a[j] = a[j - 1]
                j -= 1
            a[j] = val


def _heap_select(a: list, first: int, middle: int, last: int, less) -> None:
    """libstdc++'s __heap_select (make_heap on [first, middle), then pop the larger ones out)."""
    n = middle - first

    def adjust(hole, length, value):  # __adjust_heap with __push_heap
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if less(a[first + child], a[first + child - 1]):
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if (length & 1) == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and less(a[first + parent], value):
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = value

    if n >= 2:
        for parent in range((n - 2) // 2, -1, -1):
            adjust(parent, n, a[first + parent])
    for i in range(middle, last):
        if less(a[i], a[first]):
            value = a[i]
            a[i] = a[first]
            adjust(0, n, value)


def exact_bvh(vert: np.ndarray, face: np.ndarray) -> dict:
    """MuJoCo's BVH of a mesh (vert (n, 3) float64, face (m, 3)) with its partitions replayed (see above), in its
    layout: aabb (nnode, 6) centre and half sizes, child (nnode, 2) (-1: none), nodeid (nnode,) the face of a leaf
    (-1 inside), order (nface,) the faces in leaf (left-first depth-first) order. Python loops: O(n log n)."""
    n = len(face)
    fv = vert[face]
    lo, hi = fv.min(axis=1), fv.max(axis=1)
    c, h = 0.5 * (lo + hi), 0.5 * (hi - lo)
    blo, bhi = (c - h).tolist(), (c + h).tolist()
    lpos = _circumcenters(vert, face).tolist()
    aabb = np.zeros((max(2 * n - 1, 0), 6))
    child = np.full((len(aabb), 2), -1, np.int32)
    nodeid = np.full(len(aabb), -1, np.int32)
    elems = list(range(n))
    order = []
    stack = [(0, n, 0)]
    while stack:
        s, e, k = stack.pop()
        ids = elems[s:e]
        mn = [min(blo[i][a] for i in ids) for a in range(3)]
        mx = [max(bhi[i][a] for i in ids) for a in range(3)]
        for a in range(3):
            if abs(mn[a] - mx[a]) < _EPS:
                mn[a] -= _EPS
                mx[a] += _EPS
        aabb[k] = [(mx[0] + mn[0]) / 2, (mx[1] + mn[1]) / 2, (mx[2] + mn[2]) / 2,
                   (mx[0] - mn[0]) / 2, (mx[1] - mn[1]) / 2, (mx[2] - mn[2]) / 2]  # fmt: skip
        if e - s == 1:
            nodeid[k] = ids[0]
            order.append(ids[0])
            continue
        edge = [mx[a] - mn[a] for a in range(3)]
        axis = 0
        if edge[1] >= edge[0] + _EPS:
            axis = 1
        if edge[2] >= edge[axis] + _EPS:
            axis = 2

        def less(i, j, axis=axis):
            ki, kj = lpos[i][axis], lpos[j][axis]
            return ki < kj if abs(ki - kj) > _EPS else i < j

        _introselect(ids, (e - s) // 2, less)
        elems[s:e] = ids
        m = (e - s) // 2
        left, right = k + 1, k + 1 + (2 * m - 1)
        child[k] = (left, right)
        stack.append((s + m, e, right))  # (left popped first: preorder)
        stack.append((s, s + m, left))
    return {"aabb": aabb, "child": child, "nodeid": nodeid, "order": np.asarray(order, np.int64)}
