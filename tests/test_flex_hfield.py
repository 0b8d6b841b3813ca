"""Flex elements against height fields (MuJoCo 4.0's mj_collideGeomElem with a height-field geom) against MuJoCo 4.0:
compiled fields, contacts (one per prism within the margin of the element grown by the flex radius), constraint rows
and qacc at states of MuJoCo's own fall, a trajectory, gradients, float32, the window's overflow flag."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite
from mjx_lite.models import flex
from mjx_lite.types import Warning
from tests import oracle
from tests.test_flex_geom import CURVED_ROWS_RTOL, GJK_QACC_ATOL, GJK_ROWS_ATOL, _compare, _touching

# MuJoCo collides the element grown by the radius with each prism by GJK (apart) or EPA (overlapping). Run to
# convergence its distances equal ours to round-off, but its GJK normals of pairs apart stop short: measured 4.6e-6
# (frame) and 3e-5 (qacc) on the terrain scene at ccd_tolerance 1e-13, moving toward ours as the tolerance shrinks
# (a 3x3 cloth: frame 1.1e-6 at 1e-13, 7e-8 at 1e-15). Contact points: 8e-10 measured.
CCD_CONVERGED = {"ccd_tolerance": 1e-13, "ccd_iterations": 2000}
HF_ATOL = {"dist": 1e-12, "pos": 1e-7, "frame": 1e-5}
# efc_aref carries b (J qvel) with b = 2 / (dmax timeconst) ~ 105/s: MuJoCo's normals' 2e-6 times vertex speeds of
# .2 m/s at the impact (step 75) make 4.3e-5 (measured)
IMPACT_ROWS_ATOL = 1e-4
EXACT_ATOL = 1e-12  # contacts apart against their brute-force distance (measured 2e-14 on the normals)
TRAJ_ATOL = 1e-6  # 100 steps through contact (test_flex_geom's; MuJoCo's normals' 1e-6 grow through the solver)
CLOTH = flex.on_terrain((2,), margin=0.004, pin=True)  # a pinned 4x4 cloth: MuJoCo skips the pinned vertex's elements
ALL = flex.on_terrain((1, 2, 3), margin=0.004)  # a 6-point rope, the cloth, a 2x2x2-cell cube (8 inner tetrahedra)


def _nearest_on_triangle(p, a, b, c):
    """The point of the triangle (a, b, c) nearest to p (3,) (Voronoi regions of its vertices, edges and face)."""
    ab, ac, ap, bp, cp = b - a, c - a, p - a, p - b, p - c
    d1, d2, d3, d4, d5, d6 = ab @ ap, ac @ ap, ab @ bp, ac @ bp, ab @ cp, ac @ cp
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    if d1 <= 0 and d2 <= 0:
        return a
    if d3 >= 0 and d4 <= d3:
        return b
    if d6 >= 0 and d5 <= d6:
        return c
    if vc <= 0 and d1 >= 0 and d3 <= 0:
        return a + d1 / (d1 - d3) * ab
    if vb <= 0 and d2 >= 0 and d6 <= 0:
        return a + d2 / (d2 - d6) * ac
    if va <= 0 and d4 - d3 >= 0 and d5 - d6 >= 0:
        return b + (d4 - d3) / ((d4 - d3) + (d5 - d6)) * (c - b)
    return a + (vb * ab + vc * ac) / (va + vb + vc)


def _nearest_on_segments(p1, q1, p2, q2):
    """The nearest points of the segments p1-q1 and p2-q2 (neither degenerate)."""
    d1, d2, r = q1 - p1, q2 - p2, p1 - p2
    a, e, b, c, f = d1 @ d1, d2 @ d2, d1 @ d2, d1 @ r, d2 @ r
    den = a * e - b * b
    s = float(np.clip((b * f - c * e) / den, 0, 1)) if den > 1e-300 else 0.0
    t = (b * s + f) / e
    if t < 0:
        t, s = 0.0, float(np.clip(-c / a, 0, 1))
    elif t > 1:
        t, s = 1.0, float(np.clip((b - c) / a, 0, 1))
    return p1 + s * d1, p2 + t * d2


_PRISM_TRIS = ((0, 2, 1), (3, 4, 5), (0, 1, 4), (0, 4, 3), (1, 2, 5), (1, 5, 4), (2, 0, 3), (2, 3, 5))
_ELEM_TRIS = {1: (), 2: ((0, 1, 2),), 3: ((0, 1, 2), (0, 1, 3), (0, 2, 3), (1, 2, 3))}


def _polytope_distance(va, ta, vb, tb):
    """(distance, nearest point of a, nearest point of b) of two disjoint convex polytopes (vertices (n, 3), their
    triangles): the least over vertex-triangle and edge-edge pairs (brute force, exact to round-off)."""
    ea = {tuple(sorted((t[i], t[(i + 1) % 3]))) for t in ta for i in range(3)}
    eb = {tuple(sorted((t[i], t[(i + 1) % 3]))) for t in tb for i in range(3)} or {(0, 1)}
    cands = [(p, _nearest_on_triangle(p, *vb[list(t)])) for p in va for t in tb]
    cands += [(_nearest_on_triangle(p, *va[list(t)]), p) for p in vb for t in ta]
    cands += [_nearest_on_segments(va[i], va[j], vb[k], vb[n]) for i, j in ea for k, n in eb]
    x, y = min(cands, key=lambda c: np.linalg.norm(c[1] - c[0]))
    return np.linalg.norm(y - x), x, y


def _check_exact_when_apart(m, mjm, mjd, d):
    """Our contacts at a positive distance against the brute-force distance of their element (grown by the radius) to
    the field's prisms (world frame): the distance, point and normal of the nearest prism, to round-off."""
    nrow, ncol = int(mjm.hfield_nrow[0]), int(mjm.hfield_ncol[0])
    sx, sy, sz, base = mjm.hfield_size[0]
    elev = mjm.hfield_data.reshape(nrow, ncol)
    dx, dy = 2 * sx / (ncol - 1), 2 * sy / (nrow - 1)
    rot, org = mjd.geom_xmat[0].reshape(3, 3), mjd.geom_xpos[0]
    prisms = []
    for r in range(nrow - 1):
        for c in range(ncol - 1):
            for tri in (((1, 0), (0, 0), (1, 1)), ((0, 0), (1, 1), (0, 1))):
                top = np.array([[(c + j) * dx - sx, (r + i) * dy - sy, elev[r + i, c + j] * sz] for i, j in tri])
                prisms.append(np.vstack([top * [1, 1, 0] - [0, 0, base], top]) @ rot.T + org)
    act = np.asarray(d.contact.active) & (np.asarray(d.contact.dist) > 0)
    assert act.sum() > 3
    for i in np.nonzero(act)[0]:
        f, e = int(d.contact.flex[i, 1]), int(d.contact.elem[i, 1])
        dim, rad = int(mjm.flex_dim[f]), float(mjm.flex_radius[f])
        adr = mjm.flex_elemdataadr[f] + e * (dim + 1)
        x = mjd.flexvert_xpos[mjm.flex_vertadr[f] + mjm.flex_elem[adr : adr + dim + 1]]
        near = [_polytope_distance(p, _PRISM_TRIS, x, _ELEM_TRIS[dim]) for p in prisms
                if np.linalg.norm(p.mean(0)[:2] - np.asarray(d.contact.pos[i])[:2]) < 0.2]  # fmt: skip
        dist, a, b = min(near, key=lambda t: abs(t[0] - rad - float(d.contact.dist[i])))
        normal = (b - a) / dist
        np.testing.assert_allclose(float(d.contact.dist[i]), dist - rad, rtol=0, atol=EXACT_ATOL)
        np.testing.assert_allclose(np.asarray(d.contact.frame[i, 0]), normal, rtol=0, atol=EXACT_ATOL)
        np.testing.assert_allclose(np.asarray(d.contact.pos[i]), 0.5 * (a + b - rad * normal), rtol=0, atol=EXACT_ATOL)


def _converged(xml):
    mjm = mujoco.MjModel.from_xml_string(xml)
    for k, v in CCD_CONVERGED.items():
        setattr(mjm.opt, k, v)
    return mjm


def _state(m, mjd):
    return mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


@pytest.fixture(scope="module")
def cloth():
    return mjx_lite.load_mjcf_string(CLOTH), _converged(CLOTH)


def test_cloth_on_height_field_matches_mujoco(fwd, cloth):
    """The pinned cloth at a state of its fall onto the field: compiled fields, contacts (elements at the pinned
    vertex skipped as MuJoCo), rows and qacc of mj_forward; no window overflow."""
    m, mjm = cloth
    assert oracle.compare_models(m, mujoco.MjModel.from_xml_string(CLOTH)) == []
    mjd = _touching(mjm, 60)
    assert mjd.ncon > 5 and np.any(mjd.contact.dist[: mjd.ncon] < 0) and np.any(mjd.contact.dist[: mjd.ncon] > 0)
    d = fwd(m, _state(m, mjd))
    _compare(m, mjm, mjd, d, GJK_QACC_ATOL, HF_ATOL, CURVED_ROWS_RTOL, GJK_ROWS_ATOL)
    _check_exact_when_apart(m, mjm, mjd, d)
    assert int(d.warning_number[Warning.CONTACTFULL]) == 0


def test_window_overflow_is_flagged(fwd, cloth):
    """A cloth element stretched beyond its window (a vertex moved .4 along x, the window holds 2 x 2 cells of .13)
    counts CONTACTFULL; nothing is silently dropped."""
    m, mjm = cloth
    mjd = _touching(mjm, 60)
    qpos = mjd.qpos.copy()
    qpos[-3] += 0.4  # the last vertex's x slide
    d = fwd(m, mjx_lite.make_data(m).replace(qpos=qpos))
    assert int(d.warning_number[Warning.CONTACTFULL]) == 1


@pytest.fixture(scope="module")
def everything():
    return mjx_lite.load_mjcf_string(ALL), _converged(ALL)


@pytest.mark.slow
@pytest.mark.parametrize("steps", [50, 75, 125])
def test_rope_cloth_and_soft_cube_match_mujoco(fwd, everything, steps):
    """A rope (capsule-prism), the cloth (triangle-prism) and a soft cube (tetrahedron-prism, inner layer skipped) at
    three states of their fall (first touch, the deepest, resting): contacts, rows and qacc."""
    m, mjm = everything
    mjd = _touching(mjm, steps)
    assert set(mjd.contact.flex[: mjd.ncon, 1]) == {0, 1, 2}
    d = fwd(m, _state(m, mjd))
    _check_exact_when_apart(m, mjm, mjd, d)
    _compare(m, mjm, mjd, d, GJK_QACC_ATOL, HF_ATOL, CURVED_ROWS_RTOL, IMPACT_ROWS_ATOL)


@pytest.mark.slow
def test_trajectory_matches_mujoco(everything):
    """100 steps from the first touch (MuJoCo's step 50) equal MuJoCo's: qpos and the flex vertices."""
    m, mjm = everything
    mjd = _touching(mjm, 50)
    d = jax.jit(lambda d: jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=100)[0])(
        _state(m, mjd))  # fmt: skip
    for _ in range(100):
        mujoco.mj_step(mjm, mjd)
    assert mjd.ncon > 20
    np.testing.assert_allclose(np.asarray(d.qpos), mjd.qpos, atol=TRAJ_ATOL)
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, atol=TRAJ_ATOL)


@pytest.mark.slow
@pytest.mark.xfail(strict=True, reason="NaN gradient under the tests' XLA optimization level 0 (conftest); finite and "
                   "equal to central differences at the default level (-0.0597634909 vs -0.0597634909 measured). At "
                   "level 0 only inside a loop: 2 steps by lax.scan give NaN, the same 2 steps unrolled (a Python "
                   "loop, or scan unroll=2) give -0.00243609, and every single step's gradient w.r.t. all of Data "
                   "is finite along the 20 steps (also with hfield_prisms=8); not yet found")  # fmt: skip
def test_grad_matches_central_differences(cloth):
    """d(mean flex height after 20 steps)/d(the field's contact time constant) from a state in contact: finite and
    equal to central differences; vmapped rollouts equal unbatched ones."""
    m, mjm = cloth
    d0 = _state(m, _touching(mjm, 60))
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(geom_solref=m.geom_solref.at[0, 0].set(k)), 0.02)


@pytest.mark.slow
def test_float32(cloth):
    """float32 forward of the cloth at a touching state: finite, MuJoCo's contact count and elements."""
    m, mjm = cloth
    mjd = _touching(mjm, 60)
    d = oracle.float32_forward(m, mjd.qpos, mjd.qvel)
    assert d.qacc.dtype == jp.float32 and np.all(np.isfinite(np.asarray(d.qacc)))
    act = np.asarray(d.contact.active)
    assert int(act.sum()) == mjd.ncon
    assert sorted(np.asarray(d.contact.elem)[act, 1]) == sorted(mjd.contact.elem[: mjd.ncon, 1])
