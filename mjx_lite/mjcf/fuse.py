"""`<compiler fusestatic="true">`: static bodies fused into their parents (MuJoCo's mjCModel::FuseStatic).

MuJoCo fuses after every body is compiled (inertia, geoms, sites), so this runs on the compiler's per-body records,
not on the spec tree. A body is fused when it has no joints, is not a mocap body, its name is not referenced by
any element outside the tree (camera/light targets, excludes, equalities, actuators, sensors, custom tuples),
none of its sites carries a force or torque sensor and it does not opt out (`<body fuse="false">`). Bodies are
visited in tree order (a fused body's children take its place and are visited next). Fusing moves the body's
geoms, sites, cameras and lights to the end of the parent's lists, with their poses expressed in the parent's frame;
the body's children become the parent's children at the body's place; its mass and inertia are added to the
parent's (not when the parent is the world).
URDF models have fusestatic on by default.
"""

from __future__ import annotations

import numpy as np

from mjx_lite.mjcf import inertia as inr
from mjx_lite.mjcf.spec import Element, MJCFError
from mjx_lite.types import MINVAL

# sensor attributes naming a body, and the (type attribute, name attribute) pairs that may
_BODY_ATTRS = {"body", "body1", "body2", "subtree1", "subtree2"}
_TYPED_NAMES = (("objtype", "objname"), ("reftype", "refname"))
_BODY_TYPES = ("body", "xbody")


def change_frame(pos, quat, bpos, bquat) -> tuple[np.ndarray, np.ndarray]:
    """Pose (pos, quat) given in a body's frame (bpos, bquat) expressed in the body's parent frame (MuJoCo's
    changeframe / mjuu_frameaccum: rotation matrix times position, an unnormalised quaternion product)."""
    mat = inr.quat_to_mat(np.asarray(bquat, float))
    return (np.asarray(bpos, float) + mat @ np.asarray(pos, float),
            inr.quat_mul(np.asarray(bquat, float), np.asarray(quat, float)))  # fmt: skip


def referenced_bodies(root: Element) -> tuple[set[str], set[int]]:
    """Names of bodies referenced from outside the tree (they are not fused), and the ids (`id(Element)`) of the
    sites force/torque sensors read (their bodies are not fused either)."""
    names: set[str] = set()
    sites: set[str] = set()
    for sec in root.children:
        if sec.tag == "worldbody":
            stack = list(sec.children)
            while stack:
                el = stack.pop()
                stack.extend(el.children)
                if el.tag in ("camera", "light") and el.attrs.get("target"):
                    names.add(el.attrs["target"])
            continue
        if sec.tag not in ("contact", "equality", "actuator", "sensor", "custom", "tendon"):
            continue
        stack = list(sec.children)
        while stack:
            el = stack.pop()
            stack.extend(el.children)
            a = el.attrs
            for k in _BODY_ATTRS:
                if sec.tag != "tendon" and isinstance(a.get(k), str) and a[k]:
                    names.add(a[k])
            for t, n in _TYPED_NAMES:
                if a.get(t) in _BODY_TYPES and a.get(n):
                    names.add(a[n])
            if sec.tag == "sensor" and el.tag in ("force", "torque") and a.get("site"):
                sites.add(a["site"])
    return names, sites


def _accumulate(par, b) -> None:
    """Add body b's mass and inertia to its parent's (mjCBody::AccumulateInertia)."""
    ipos_b, iquat_b = change_frame(b.ipos, b.iquat, b.pos, b.quat)
    masses = (float(par.mass), float(b.mass))
    poss = (np.asarray(par.ipos, float), ipos_b)
    quats = (np.asarray(par.iquat, float), iquat_b)
    inertias = (np.asarray(par.inertia, float), np.asarray(b.inertia, float))
    mass = 0.0
    acc = np.zeros(3)
    for m, p in zip(masses, poss):
        mass += m
        acc = acc + m * p
    if mass < MINVAL:
        par.mass, par.inertia, par.ipos, par.iquat = 0.0, np.zeros(3), np.zeros(3), np.array([1.0, 0, 0, 0])
        return
    com = acc / mass
    full = np.zeros(6)
    for m, p, q, i in zip(masses, poss, quats, inertias):
        full = full + inr.global_inertia(i, q) + inr.offcenter_inertia(m, p - com)
    res = inr.principal_inertia(full)
    if res is None:
        el = b.el
        raise MJCFError("error 'inertia must have positive eigenvalues' in fusing static body inertias", el.file,
                        el.line, el.tag)  # fmt: skip
    par.mass, par.ipos = mass, com
    par.inertia, par.iquat = res


def fuse_static(bodies: list, root: Element) -> list:
    """Fuse the static bodies of `bodies` (the compiler's per-body records in tree order, world first; each with
    el, parent, pos, quat, joints, mocap, mass, inertia, ipos, iquat and the compiled lists gvals [(el, values)],
    svals [(el, values)], cams / lights [(el, frame)], frame = None or (pos, quat) to apply to the element's own
    pose). Returns the new list (parents re-indexed)."""
    ref_names, ft_sites = referenced_bodies(root)
    bodies = list(bodies)
    i = 1
    while i < len(bodies):
        b = bodies[i]
        name = b.el.attrs.get("name") or ""
        if (b.joints or b.mocap or (name and name in ref_names) or b.el.attrs.get("fuse") == "false"
                or any((el.attrs.get("name") or "") in ft_sites for el, _ in b.svals if el.attrs.get("name"))):
            i += 1
            continue
        par = bodies[b.parent]
        if b.parent != 0 and b.mass >= MINVAL:
            _accumulate(par, b)
        for c in bodies[i + 1 :]:
            if c.parent == i:
                c.pos, c.quat = change_frame(c.pos, c.quat, b.pos, b.quat)
        for _, g in b.gvals:
            g["pos"], g["quat"] = change_frame(g["pos"], g["quat"], b.pos, b.quat)
        for _, s in b.svals:
            s["pos"], s["quat"] = change_frame(s["pos"], s["quat"], b.pos, b.quat)
        par.gvals.extend(b.gvals)
        par.svals.extend(b.svals)
        for el, fr in b.cams:
            par.cams.append((el, (b.pos, b.quat) if fr is None else change_frame(fr[0], fr[1], b.pos, b.quat)))
        for el, fr in b.lights:
            par.lights.append((el, (b.pos, b.quat) if fr is None else change_frame(fr[0], fr[1], b.pos, b.quat)))
        del bodies[i]
        for c in bodies[1:]:
            if c.parent == i:
                c.parent = b.parent
            elif c.parent > i:
                c.parent -= 1
    return bodies
