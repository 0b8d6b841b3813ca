"""Flex self-collisions and flex-flex contacts (MuJoCo 4.0's mj_collideElems, collision/flex_flex.py) against MuJoCo
4.0: contact sets, dist, pos, frame and parameters, constraint rows and qacc; the selfcollide modes; refusals; the
overflow flag; a trajectory, a gradient and float32 (slow).

MuJoCo's GJK/EPA runs on the elements thickened by the flex radius (curved shapes), ours on their cores with the radius
added analytically (exact): with ccd_tolerance 1e-13 the distances agree to 1e-13 but MuJoCo's normals and points stop
within EPA_ATOL of the converged ones. So the constraint rows and qacc are checked twice: with MuJoCo's contact points
and frames put in our rows (tight: the Jacobian rule, the parameters, the solver), and end to end (EPA_QACC_RTOL)."""

import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.spatial.distance import cdist

import mjx_lite
from mjx_lite.collision import flex_flex
from mjx_lite.mjcf.spec import MJCFUnsupportedError
from mjx_lite.pipeline import constraint
from mjx_lite.pipeline import forward as fwd_mod
from mjx_lite.pipeline import kernels as pipeline_kernels
from mjx_lite.types import Warning
from tests import oracle

DIST_ATOL = 1e-12  # contact dist (float64; MuJoCo with ccd_tolerance 1e-13)
PARAM_ATOL = 1e-15  # friction, solref, solimp, includemargin (the same mixing formulas)
EXACT_ATOL = 1e-12  # pos and frame of the rope's capsule-capsule contacts (closed form on both sides)
EPA_ATOL = 1e-5  # pos and normal of GJK/EPA contacts: MuJoCo's EPA on the rounded elements (measured: 3e-7, 3.4e-6)
FWD_RTOL, FWD_ATOL = 1e-9, 1e-9  # efc rows and qacc with MuJoCo's contact points and frames
EPA_QACC_RTOL = 1e-5  # end-to-end qacc relative to max |qacc| (measured 1e-6: the EPA normals above)
TRAJ_ATOL = 1e-6  # flex vertices after 40 steps


def _jitter(points, seed, scale):
    """Points moved by a seeded uniform jitter (generic positions: no parallel edges or faces, whose GJK/EPA witness
    points are not unique)."""
    rng = np.random.default_rng(seed)
    return np.round(np.asarray(points, float) + rng.uniform(-1, 1, np.shape(points)) * scale, 5)


def _cloth():
    """A 2x2-cell cloth folded over onto itself through a hinge column: 24 triangles, its two layers 12 mm apart with
    radius 10 mm (penetrating), the hinge triangles against their non-adjacent neighbours."""
    grid = [(0.1 * i, 0.1 * j, 0.0) for i in range(3) for j in range(3)]
    top = [(0.1 * i + 0.003, 0.1 * j + 0.004, 0.012 + 0.02 * 0.1 * i + 0.013 * 0.1 * j) for i in range(3)
           for j in range(3)]  # fmt: skip
    hinge = [(0.23, 0.1 * j, 0.006) for j in range(3)]
    pts = _jitter(grid + top + hinge, 0, np.array([0.004, 0.004, 0.0012]))
    tris = []
    for o in (0, 9):
        for i in range(2):
            for j in range(2):
                a, b = o + 3 * i + j, o + 3 * (i + 1) + j
                tris += [(a, b, b + 1), (a, b + 1, a + 1)]
    for j in range(2):
        tris += [(6 + j, 18 + j, 19 + j), (6 + j, 19 + j, 7 + j), (15 + j, 18 + j, 19 + j), (15 + j, 19 + j, 16 + j)]
    return pts, tris


def _rope():
    """A 7-edge rope zigzagging across itself (radius 6 mm)."""
    pts = [(0, 0, 0), (0.1, 0, 0), (0.2, 0, 0), (0.2, 0.1, 0.004), (0.1, 0.1, 0.004), (0.1, -0.1, 0.011),
           (0.05, -0.1, 0.01), (0.05, 0.05, 0.008)]  # fmt: skip
    return _jitter(pts, 1, 0.003), [(i, i + 1) for i in range(7)]


def _soft():
    """Two unit cubes of 5 tetrahedra each, the second overlapping a corner of the first (the centre tetrahedron of
    each is inner: flex_elemlayer 1, not active)."""
    cube = [np.array([i, j, k]) * 0.1 for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    pts = _jitter(cube + [c + (0.05, 0.03, 0.092) for c in cube], 2, 0.003)
    tets = [(0, 1, 2, 4), (1, 2, 3, 7), (1, 4, 5, 7), (2, 4, 6, 7), (1, 2, 4, 7)]
    return pts, tets + [tuple(v + 8 for v in t) for t in tets]


def _flexcomp(name, dim, pts, elems, radius, contact, pos="0 0 0"):
    p = " ".join(" ".join(f"{v:g}" for v in q) for q in pts)
    e = " ".join(" ".join(str(v) for v in t) for t in elems)
    return (f'<flexcomp name="{name}" type="direct" dim="{dim}" point="{p}" element="{e}" mass=".1" radius="{radius}" '
            f'pos="{pos}"><edge equality="true"/><contact {contact}/></flexcomp>')  # fmt: skip


OPTION = '<option timestep="0.002" ccd_tolerance="1e-13" ccd_iterations="1000"/>'
# contact slots per element for the dense scenes below (layers lying on each other: MuJoCo makes 3.1 contacts per
# element of the folded cloth, 5 of the two cloths; the default Config.flex_contacts_per_elem is 2)
DENSE = dict(flex_contacts_per_elem=6)


def _load(xml):
    return mjx_lite.configure(mjx_lite.load_mjcf_string(xml), **DENSE)


def self_xml(mode="narrow"):
    """The folded cloth, the crossing rope and the overlapping soft cubes, apart and with separate contype bits (each
    collides only with itself), one model."""
    cloth = _flexcomp("cloth", 2, *_cloth(), 0.01, f'selfcollide="{mode}" condim="4" friction=".8 .02 .002"')
    rope = _flexcomp("rope", 1, *_rope(), 0.006, f'selfcollide="{mode}" contype="2" conaffinity="2" solref=".03 .9"',
                     pos="1 0 0")  # fmt: skip
    soft = _flexcomp("soft", 3, *_soft(), 0.005, f'selfcollide="{mode}" contype="4" conaffinity="4"', pos="0 1 0")
    return f"<mujoco>{OPTION}<worldbody>{cloth}{rope}{soft}</worldbody></mujoco>"


# two cloths and a rope, each pair colliding (flex:flex; selfcollide none): priority, solmix, condim, margins, gap
PAIRS = f"""<mujoco>{OPTION}<worldbody>
<flexcomp name="a" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" radius=".01" euler="3 2 0">
  <edge equality="true"/>
  <contact selfcollide="none" margin=".003" gap=".001" priority="1" condim="4" friction=".7 .01 .001"/></flexcomp>
<flexcomp name="b" type="grid" count="3 3 1" spacing=".1 .1 .1" dim="2" pos=".013 .022 .012" euler="-2 4 5"
          radius=".008"><edge equality="true"/><contact selfcollide="none" margin=".002" solmix="3" solref=".03 .8"/>
</flexcomp>
<flexcomp name="c" type="grid" count="4 1 1" spacing=".07 .1 .1" dim="1" pos=".031 .043 .028" euler="4 -3 20"
          radius=".006"><edge equality="true"/><contact selfcollide="none" solimp=".8 .9 .002 .5 2"/></flexcomp>
</worldbody></mujoco>"""


@pytest.fixture(scope="module")
def fwd():
    return jax.jit(mjx_lite.forward)


@pytest.fixture(scope="module")
def selfm():
    xml = self_xml()
    return _load(xml), mujoco.MjModel.from_xml_string(xml)


def _mujoco(mjm, steps=0):
    mjd = mujoco.MjData(mjm)
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    return mjd


def _key(flex, elem, i):
    """The contact's element pair with the lower (flex, elem) first, and whether that swapped its sides."""
    a, b = (int(flex[i, 0]), int(elem[i, 0])), (int(flex[i, 1]), int(elem[i, 1]))
    return (a + b, False) if a <= b else (b + a, True)


def _by_pair(flex, elem, dist, pos, frame, *params):
    """{element pair: (dist, pos, normal (from the lower side), params...)} of contacts with an element on both sides
    (a pair with two rows, parallel rope edges, keyed with its row number)."""
    out = {}
    for i in range(len(dist)):
        k, swap = _key(flex, elem, i)
        j = 0
        while k + (j,) in out:
            j += 1
        out[k + (j,)] = (dist[i], pos[i], -frame[i][0] if swap else frame[i][0], *(p[i] for p in params))
    return out


PARAMS = ("friction", "solref", "solimp", "includemargin", "dim")


def _contacts(m, d):
    act = np.asarray(d.contact.active)
    c = {f: np.asarray(getattr(d.contact, f))[act] for f in ("flex", "elem", "dist", "pos", "frame") + PARAMS}
    return _by_pair(c["flex"], c["elem"], c["dist"], c["pos"], c["frame"], *(c[f] for f in PARAMS))


def _mj_contacts(mjd):
    c = mjd.contact
    return _by_pair(c.flex, c.elem, c.dist, c.pos, c.frame.reshape(-1, 3, 3), *(getattr(c, f) for f in PARAMS))


def _compare_contacts(ours, theirs, exact_flexes=()):
    assert theirs and set(ours) == set(theirs)
    for k, (dist, pos, nrm, *par) in theirs.items():
        o = ours[k]
        np.testing.assert_allclose(o[0], dist, rtol=0, atol=DIST_ATOL, err_msg=f"dist {k}")
        atol = EXACT_ATOL if k[0] in exact_flexes else EPA_ATOL
        np.testing.assert_allclose(o[1], pos, rtol=0, atol=atol, err_msg=f"pos {k}")
        np.testing.assert_allclose(o[2], nrm, rtol=0, atol=atol, err_msg=f"normal {k}")
        for name, a, b in zip(PARAMS, o[3:], par):
            np.testing.assert_allclose(a, b, rtol=0, atol=PARAM_ATOL, err_msg=f"{name} {k}")


def _with_mujoco_contacts(m, mjd, d):
    """A collision stage that gives d's contacts (our collision at MuJoCo's state) with the point, frame and dist of
    every flex-flex contact replaced by MuJoCo's: the constraint rows then see the same geometry as MuJoCo's."""
    theirs = {}
    for i in range(mjd.ncon):
        k, swap = _key(mjd.contact.flex, mjd.contact.elem, i)
        fr = mjd.contact.frame[i].reshape(3, 3)
        theirs[k] = (mjd.contact.dist[i], mjd.contact.pos[i], fr if not swap else fr * np.array([[-1], [1], [-1]]))
    c = d.contact
    flex, elem, act = (np.asarray(x) for x in (c.flex, c.elem, c.active))
    dist, pos, frame = np.array(c.dist), np.array(c.pos), np.array(c.frame)
    for i in np.nonzero(act)[0]:
        k, swap = _key(flex, elem, i)
        dist[i], pos[i], fr = theirs[k]
        frame[i] = fr if not swap else fr * np.array([[-1], [1], [-1]])
    contact = c.replace(dist=jp.asarray(dist), pos=jp.asarray(pos), frame=jp.asarray(frame))
    return lambda m, dd: dd.replace(contact=contact, ncon=d.ncon, warning_number=d.warning_number)


def _compare_rows(m, mjm, mjd, d, qacc_rtol=None):
    """efc_J, efc_pos, efc_R, efc_aref (rows paired by the nearest (J, pos)) and qacc against MuJoCo's."""
    live = np.asarray(d.efc_mask)
    assert int(live.sum()) == mjd.nefc
    J = np.asarray(constraint.efc_j_dense(m, d))[live]
    Jmj = np.zeros((mjd.nefc, mjm.nv))
    mujoco.mju_sparse2dense(Jmj, mjd.efc_J, mjd.efc_J_rownnz, mjd.efc_J_rowadr, mjd.efc_J_colind)
    rows_mj, rows = linear_sum_assignment(cdist(np.c_[Jmj, mjd.efc_pos], np.c_[J, np.asarray(d.efc_pos)[live]]))
    if qacc_rtol is None:
        np.testing.assert_allclose(J[rows], Jmj[rows_mj], rtol=FWD_RTOL, atol=FWD_ATOL, err_msg="efc_J")
        for f in ("efc_pos", "efc_R", "efc_aref"):
            np.testing.assert_allclose(np.asarray(getattr(d, f))[live][rows], getattr(mjd, f)[rows_mj], rtol=FWD_RTOL,
                                       atol=FWD_ATOL, err_msg=f)  # fmt: skip
        np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=FWD_RTOL, atol=FWD_ATOL, err_msg="qacc")
    else:
        scale = np.abs(mjd.qacc).max()
        np.testing.assert_allclose(np.asarray(d.qacc), mjd.qacc, rtol=0, atol=qacc_rtol * scale, err_msg="qacc")


def _state(m, mjd):
    return mjx_lite.make_data(m).replace(qpos=mjd.qpos.copy(), qvel=mjd.qvel.copy())


def _forward_with(m, mjd, collide):
    """forward at MuJoCo's state with `collide` as the collision stage."""
    run = jax.jit(lambda d: fwd_mod.forward_acc(m, fwd_mod.forward_pos_vel(m, d, collide=collide)))
    return run(_state(m, mjd))


def test_self_contacts_match_mujoco(fwd, selfm):
    """The folded cloth (GJK/EPA triangles, condim 4), the crossing rope (capsule-capsule) and the soft cubes
    (tetrahedra of the active layer): MuJoCo's pairs (no adjacent or inner element), dist, pos, normal, parameters;
    qacc end to end."""
    m, mjm = selfm
    mjd = _mujoco(mjm)
    d = fwd(m, mjx_lite.make_data(m))
    theirs = _mj_contacts(mjd)
    assert {k[0] for k in theirs} == {0, 1, 2} and all(k[0] == k[2] for k in theirs)  # each flex with itself
    _compare_contacts(_contacts(m, d), theirs, exact_flexes=(1,))
    _compare_rows(m, mjm, mjd, d, qacc_rtol=EPA_QACC_RTOL)


# slow: the flex-flex rows with MuJoCo's points (the same row code for self and pair contacts) stay default in
# test_flex_pairs_match_mujoco; the self contacts' rows and qacc end to end in test_self_contacts_match_mujoco
@pytest.mark.slow
def test_self_rows_and_qacc_match_mujoco(fwd, selfm):
    """With MuJoCo's contact points and frames: efc_J (both elements' vertex bodies, barycentric weights), efc_pos,
    efc_R (diagApprox of both sides), efc_aref and qacc to FWD tolerances."""
    m, mjm = selfm
    mjd = _mujoco(mjm)
    d = _forward_with(m, mjd, _with_mujoco_contacts(m, mjd, fwd(m, _state(m, mjd))))
    _compare_rows(m, mjm, mjd, d)


def test_selfcollide_modes_make_the_same_contacts():
    """MuJoCo 4.0's narrow, bvh, sap and auto modes make the same pairs and dists, and pos and normals within its EPA
    tolerance (their order differs, and which element is first: EPA from the other side), and ours has one candidate
    table for all of them."""
    base, tables = None, None
    for mode in ("narrow", "bvh", "sap", "auto"):
        xml = self_xml(mode)
        mjm = mujoco.MjModel.from_xml_string(xml)
        got = _mj_contacts(_mujoco(mjm))
        groups = [(g.f1, g.f2, g.e1.tolist(), g.e2.tolist()) for g in flex_flex.groups(mjx_lite.load_mjcf_string(xml))]
        if base is None:
            base, tables = got, groups
            continue
        assert set(got) == set(base) and groups == tables
        for k, v in got.items():
            for a, b, atol in zip(v[:3], base[k][:3], (DIST_ATOL, EPA_ATOL, EPA_ATOL)):
                np.testing.assert_allclose(a, b, rtol=0, atol=atol)


def test_candidate_pairs_skip_shared_bodies():
    """The static table: no pair shares a vertex body (adjacent elements, elements pinned to one body), every other
    active pair once (brute force), tetrahedra of inner layers left out."""
    pinned = self_xml().replace('<edge equality="true"/>', '<edge equality="true"/><pin id="0 1 2 18"/>', 1)
    groups = [(m, g) for xml in (self_xml(), pinned) for m in [mjx_lite.load_mjcf_string(xml)]
              for g in flex_flex.groups(m)]  # fmt: skip
    assert len(groups) == 6
    for m, g in groups:
        elem = flex_flex._elements(m, g.f1)
        body = np.asarray(m.flex_vertbodyid)[int(m.flex_vertadr[g.f1]) + elem]
        active = np.ones(len(elem), bool)
        if g.dim1 == 3:
            active = np.asarray(m.flex_elemlayer)[int(m.flex_elemadr[g.f1]) + np.arange(len(elem))] < 1
            assert not active.all()
        want = [(a, b) for a in range(len(elem)) for b in range(a + 1, len(elem))
                if active[a] and active[b] and not set(body[a]) & set(body[b])]  # fmt: skip
        assert list(zip(g.e1.tolist(), g.e2.tolist())) == want


@jax.jit
def _forward_or_given(m, d, contact, given):
    """forward, its collision stage's contacts replaced by `contact` where `given` (a traced bool): one compiled
    program for forward itself (given False) and forward with MuJoCo's points and frames (`_with_mujoco_contacts`)."""

    def collide(m, dd):
        dd = pipeline_kernels.collision(m, dd)  # the collision stage forward runs
        return dd.replace(contact=jax.tree.map(lambda a, b: jp.where(given, a, b), contact, dd.contact))

    return fwd_mod.forward_acc(m, fwd_mod.forward_pos_vel(m, d, collide=collide))


def test_flex_pairs_match_mujoco():
    """Two cloths and a rope colliding with each other (flex:flex): cloth-cloth (GJK/EPA), cloth-rope (capsule
    against triangle): MuJoCo's pairs, dist, pos, normals, mixed parameters (priority, solmix, condim, margins and
    gaps: includemargin = the margin); rows and qacc with MuJoCo's points and frames; qacc end to end. (CI time: both
    forwards are one compiled program, `_forward_or_given`.)"""
    m, mjm = _load(PAIRS), mujoco.MjModel.from_xml_string(PAIRS)
    mjd = _mujoco(mjm)
    theirs = _mj_contacts(mjd)
    assert {(k[0], k[2]) for k in theirs} == {(0, 1), (0, 2), (1, 2)}
    d0 = mjx_lite.make_data(m)
    d = _forward_or_given(m, d0, d0.contact, False)
    _compare_contacts(_contacts(m, d), theirs)
    _compare_rows(m, mjm, mjd, d, qacc_rtol=EPA_QACC_RTOL)
    given = _with_mujoco_contacts(m, mjd, d)(m, d).contact
    _compare_rows(m, mjm, mjd, _forward_or_given(m, _state(m, mjd), given, True))


# the position stage (kinematics, flex, collision, rows) without the solver: the overflow test reads contacts only
_POSITION = jax.jit(fwd_mod.fwd_position)


def test_overflow_is_flagged():
    """Fewer pair slots than overlapping element pairs (the crossing rope with flex_pairs_per_elem 0.1: 1 slot pair),
    and fewer contact slots than contacts (the folded cloth with the default flex_contacts_per_elem, 2: 48 slots for
    MuJoCo's 74 contacts): CONTACTFULL counted, the contacts kept are MuJoCo's (the first in the candidate order).
    (CI time: the position stage only, `_POSITION`; its contacts are forward's.)"""
    xml = f"<mujoco>{OPTION}<worldbody>{_flexcomp('rope', 1, *_rope(), 0.006, '')}</worldbody></mujoco>"
    m = mjx_lite.configure(mjx_lite.load_mjcf_string(xml), flex_pairs_per_elem=0.1)
    assert [g.k for g in flex_flex.groups(m)] == [1]
    d = _POSITION(m, mjx_lite.make_data(m))
    assert int(d.warning_number[Warning.CONTACTFULL]) == 1
    ours, theirs = _contacts(m, d), _mj_contacts(_mujoco(mujoco.MjModel.from_xml_string(xml)))
    assert ours and set(ours) <= set(theirs)
    cloth = _flexcomp("cloth", 2, *_cloth(), 0.01, "")
    xml = f"<mujoco>{OPTION}<worldbody>{cloth}</worldbody></mujoco>"
    m = mjx_lite.load_mjcf_string(xml)
    assert [g.ncon for g in flex_flex.groups(m)] == [48]
    d = _POSITION(m, mjx_lite.make_data(m))
    assert int(d.warning_number[Warning.CONTACTFULL]) == 1 and int(d.ncon) == 48
    ours, theirs = _contacts(m, d), _mj_contacts(_mujoco(mujoco.MjModel.from_xml_string(xml)))
    assert len(theirs) > 48 and set(ours) <= set(theirs)
    _compare_contacts(ours, {k: theirs[k] for k in ours})


def test_refusals_name_the_feature():
    """An elastic rod that collides with itself, and a flex pair beyond the dense table's bound."""
    rod = ('<mujoco><worldbody><flexcomp name="r" type="grid" count="6 1 1" spacing=".1 .1 .1" dim="1" radius=".01">'
           '<elasticity young="1e5"/><contact selfcollide="auto"/></flexcomp></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(MJCFUnsupportedError, match="self-collisions of an elastic rod"):
        mjx_lite.load_mjcf_string(rod)
    big = ('<mujoco><worldbody><flexcomp name="big" type="grid" count="42 42 1" spacing=".1 .1 .1" dim="2" '
           'radius=".01"><contact selfcollide="auto"/></flexcomp></worldbody></mujoco>')  # fmt: skip
    with pytest.raises(MJCFUnsupportedError, match="flex self-collisions of a flex with 3362 elements"):
        mjx_lite.load_mjcf_string(big)


@pytest.mark.slow
def test_trajectory_matches_mujoco(selfm):
    """40 steps of the three self-colliding flexes from rest (their contacts push the layers apart and end): the flex
    vertices equal MuJoCo's to TRAJ_ATOL."""
    m, mjm = selfm
    mjd = mujoco.MjData(mjm)

    @jax.jit
    def roll(d):
        return jax.lax.scan(lambda d, _: (mjx_lite.step(m, d), None), d, None, length=40)[0]

    d = roll(mjx_lite.make_data(m))
    ncon = 0
    for _ in range(40):
        mujoco.mj_step(mjm, mjd)
        ncon = max(ncon, mjd.ncon)
    assert ncon > 0
    np.testing.assert_allclose(np.asarray(d.flexvert_xpos), mjd.flexvert_xpos, rtol=0, atol=TRAJ_ATOL)


@pytest.mark.slow
def test_grad_matches_central_differences(selfm):
    """d(mean flex height after 20 steps)/d(the cloth's contact time constant) from the folded state: finite and
    equal to central differences; vmapped rollouts equal unbatched ones."""
    m, _ = selfm
    d0 = mjx_lite.make_data(m)
    oracle.check_rollout_grad(m, d0, lambda m, k: m.replace(flex_solref=m.flex_solref.at[0, 0].set(k)), 0.02)


@pytest.mark.slow
def test_float32_forward(selfm):
    """float32 forward at the folded state: finite, MuJoCo's contact count."""
    m, mjm = selfm
    mjd = _mujoco(mjm)
    d = oracle.float32_forward(m, mjd.qpos, mjd.qvel)
    assert d.qacc.dtype == jp.float32 and np.all(np.isfinite(np.asarray(d.qacc)))
    assert int(np.asarray(d.contact.active).sum()) == mjd.ncon
