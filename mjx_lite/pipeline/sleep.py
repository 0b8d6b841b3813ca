"""Sleeping islands (MuJoCo 4.0's `<flag sleep="enable"/>`; computation chapter "Sleeping islands", simulation
chapter "siSleep"): kinematic trees that stay below `opt.sleep_tolerance` are frozen until something wakes them.

The state is `Data.tree_asleep` (ntree,) int32, as MuJoCo's: an awake tree counts from -(1 + MINAWAKE) up to -1
(ready to sleep) over the steps at which its dof_length-weighted velocity stays below the tolerance (no applied
force, a policy that allows sleeping); an island whose trees are all ready (or a ready tree in no island) falls
asleep together, and each of its trees holds the next tree of the island (ascending tree order, the last pointing to
the first: a cycle). `tree_awake`, `body_awake` (mjtSleepState: -1 static, 0 asleep, 1 awake; mocap bodies count
as awake) and the counts are derived from it by `update`.

The stages, in MuJoCo's order:
  `wake`            after kinematics: a sleeping tree whose bodies' poses changed (qpos written by the user), or
                    with nonzero qvel, qfrc_applied or xfrc_applied (bytewise: -0.0 counts), wakes with its island;
  `wake_tendon`     after the tendon stage: a limited tendon at its limit between an awake and a sleeping tree
                    wakes the sleeping one (with the awake tree's counter);
  `collide`         after collision: contacts between bodies that are not awake (asleep-asleep, asleep-static) are
                    dropped; a contact between an awake tree (or a mocap body) and a sleeping one wakes that one's
                    island (with the awake tree's counter: they can fall asleep together), then the contacts are
                    filtered again with the new states (MuJoCo runs collision a second time);
                    then active equalities (connect, weld, joint) from an awake body to a sleeping tree, or between
                    two sleeping islands, wake them (their contacts come next step, as in MuJoCo);
  `mask_rows`       after make_constraint: no rows for sleeping joints' limits, sleeping dofs' friction loss,
                    sleeping tendons' limits and friction loss, equalities with no awake side;
  `freeze`          after the forward pass (and each of RK4's stages): a sleeping tree's velocity-stage and force
                    fields, its actuators' act_dot and its sensors' values keep their last values (MuJoCo skips
                    them; delayed and interval sensors still read and sample their history buffers); its qacc is
                    its qacc_smooth (it has no constraint rows); its qfrc_actuator and its actuators' forces are
                    zero (MuJoCo 4.0 clears them);
  `fall_asleep`     in mj_advance (`integrate._advance`), after the activations advanced (a sleeping actuator's act
                    keeps integrating its frozen act_dot, as MuJoCo's) and after the integrator computed its qacc
                    (RK4: after its four stages, from the last stage's rows and positions and the step's start
                    velocities): the counters, the islands of the rows (`solver.island.find`), the trees that fall
                    asleep get qvel = qacc = 0 and the velocity and acceleration stages are recomputed (`lax.cond`:
                    only at steps where a tree falls asleep; under vmap the cond is a select, so a batched step
                    always pays the recomputation);
  `integrate_mask`  in mj_advance: sleeping trees' qpos and qvel stay as they were.
RK4 as MuJoCo 4.0: a tree that falls asleep keeps the poses of the last stage while its qpos stays at the step's
start, so the next step's kinematics sees it moved and wakes it, unless the stages did not move it.
All stages are identities (not traced) when the flag is off or no tree may sleep (`on(m)`). `init` is mj_resetData's
"init" policy (called by `pipeline.step.make_data`, which `mjx_lite.make_data` is).

Known differences: a contact table in another order than MuJoCo's may give a woken island a different counter when
several awake trees with different counters touch it in one step (MuJoCo takes the first contact's); the derived
fields of a tree initialised asleep are those of the reset's forward pass (MuJoCo's reset keeps the same ones).
Tendon equalities inactive at load are supported (MuJoCo 4.0 errs on an active one at every forward pass, so a
model with one is refused at load; one activated later through eq_active is where MuJoCo would stop, and here its
rows are built as for an awake equality). What is not implemented (flexes) is refused at load time
(mjcf/compile.py `_check_sleep`).

Fixed shapes throughout: per-tree arrays, cycle representatives by pointer doubling (log2(ntree) gathers),
segment reductions over trees. Batched under vmap as every stage. Gradients: the sleep state is integer and
piecewise constant; derivatives flow through the awake trees as usual and are zero through a sleeping tree's
frozen state (its qpos and qvel do not depend on anything while it sleeps), like a contact that is absent.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.data import MINAWAKE
from mjx_lite.solver import island
from mjx_lite.types import (
    ConstraintType,
    Data,
    DisableBit,
    EnableBit,
    EqType,
    JointType,
    Model,
    ObjType,
    SensorType,
    TrnType,
    sparse_efc_jacobian,
)

__all__ = ["AWAKE_VALUE", "collide", "fall_asleep", "freeze", "init", "integrate_mask", "mask_rows", "on", "update",
           "wake", "wake_tendon"]  # fmt: skip

AWAKE_VALUE = -(1 + MINAWAKE)  # tree_asleep of a fully awake tree
STATIC, ASLEEP, AWAKE = -1, 0, 1  # mjtSleepState
_NEVER = (1, 3)  # mjSLEEP_AUTO_NEVER, mjSLEEP_NEVER
INIT = 5  # mjSLEEP_INIT


def on(m: Model) -> bool:
    """Static: the sleep flag is on and some tree's policy lets it sleep (otherwise every stage is an identity)."""
    return bool(m.opt.enableflags & EnableBit.SLEEP) and bool(np.any(~np.isin(np.asarray(m.tree_sleep_policy), _NEVER)))


# ---- derived arrays and islands ---------------------------------------------------------------------------------


def _static_body(m: Model) -> np.ndarray:
    """(nbody,) bool: bodies of no tree that are not (under) mocap bodies: always static."""
    mocap = np.asarray(m.body_mocapid)[np.asarray(m.body_rootid)] >= 0
    return (np.asarray(m.body_treeid) < 0) & ~mocap


def update(m: Model, d: Data, tree_asleep: jax.Array | None = None) -> Data:
    """tree_asleep (default d's) with its derived arrays (mj_updateSleep): tree_awake, body_awake, ntree_awake,
    nbody_awake, nv_awake."""
    ta = d.tree_asleep if tree_asleep is None else tree_asleep
    tree_awake = (ta < 0).astype(jp.int32)
    treeid = np.asarray(m.body_treeid)
    dyn = treeid >= 0
    if m.ntree:
        body = jp.where(jp.asarray(dyn), tree_awake[np.maximum(treeid, 0)], AWAKE)
    else:
        body = jp.full((m.nbody,), AWAKE, jp.int32)
    body = jp.where(jp.asarray(_static_body(m)), STATIC, body).astype(jp.int32)
    dof_awake = body[np.asarray(m.dof_bodyid)] == AWAKE
    return d.replace(tree_asleep=ta.astype(jp.int32), tree_awake=tree_awake, body_awake=body,
                     ntree_awake=jp.sum(tree_awake).astype(jp.int32),
                     nbody_awake=jp.sum(body != ASLEEP).astype(jp.int32),
                     nv_awake=jp.sum(dof_awake).astype(jp.int32))  # fmt: skip


def _cycle_rep(ta: jax.Array) -> jax.Array:
    """(ntree,) the smallest tree of each sleeping tree's cycle (mj_sleepCycle); an awake tree its own index. Pointer
    doubling: after k rounds each tree has the minimum over 2^k successors."""
    n = ta.shape[0]
    ids = jp.arange(n, dtype=jp.int32)
    nxt = jp.where(ta >= 0, ta, ids)
    rep = ids
    for _ in range(max(1, math.ceil(math.log2(max(n, 2))))):
        rep = jp.minimum(rep, rep[nxt])
        nxt = nxt[nxt]
    return rep


def _wake_islands(ta: jax.Array, wake: jax.Array, value: jax.Array | int) -> jax.Array:
    """tree_asleep with the sleeping islands (cycles) that hold a tree of `wake` (ntree,) bool set to `value`
    (a scalar, or (ntree,) per cycle representative)."""
    n = ta.shape[0]
    rep = _cycle_rep(ta)
    asleep = ta >= 0
    hit = jax.ops.segment_max((wake & asleep).astype(jp.int32), rep, num_segments=n) > 0
    woken = asleep & hit[rep]
    v = value[rep] if jp.ndim(value) else value
    return jp.where(woken, v, ta).astype(jp.int32)


def _nonzero(x: jax.Array) -> jax.Array:
    """Bytewise nonzero (mju_isZeroByte negated): -0.0 counts as nonzero."""
    return (x != 0) | jp.signbit(x)


def _per_tree(m: Model, x: jax.Array, treeid: np.ndarray) -> jax.Array:
    """(ntree,) bool: any of x (n,) bool over the items of each tree (items of no tree ignored)."""
    treeid = np.asarray(treeid)
    if x.shape[0] == 0:
        return jp.zeros((m.ntree,), bool)
    seg = jp.asarray(np.where(treeid >= 0, treeid, 0))
    return jax.ops.segment_max((x & jp.asarray(treeid >= 0)).astype(jp.int32), seg, num_segments=m.ntree) > 0


def _cannot_sleep(m: Model, d: Data, tol) -> jax.Array:
    """(ntree,) bool: not treeCanSleep: a never policy, nonzero xfrc_applied or qfrc_applied (bytewise), or a
    velocity at or above tol (weighted by dof_length, infinity norm; tol None: any bytewise nonzero qvel)."""
    never = jp.asarray(np.isin(np.asarray(m.tree_sleep_policy), _NEVER))
    xfrc = _per_tree(m, jp.any(_nonzero(d.xfrc_applied), axis=1), m.body_treeid)
    qfrc = _per_tree(m, _nonzero(d.qfrc_applied), m.dof_treeid)
    if tol is None:
        fast = _per_tree(m, _nonzero(d.qvel), m.dof_treeid)
    else:
        fast = _per_tree(m, m.dof_length * jp.abs(d.qvel) >= tol, m.dof_treeid)
    return never | xfrc | qfrc | fast


# ---- position stage ------------------------------------------------------------------------------------------


def wake(m: Model, d: Data, xpos0: jax.Array, xquat0: jax.Array) -> Data:
    """After kinematics (mj_kinematics' pose check, then mj_wake): a sleeping tree wakes with its island when a body
    of it with joints moved (xpos or xquat differs from xpos0, xquat0, the poses before this step's kinematics), or
    when it has nonzero qvel, qfrc_applied or xfrc_applied."""
    if not on(m):
        return d
    d = update(m, d)  # (the derived arrays from tree_asleep, whatever wrote it)
    asleep_body = d.body_awake == ASLEEP
    moved = jp.any(d.xpos != xpos0, axis=1) | jp.any(d.xquat != xquat0, axis=1)
    moved = moved & asleep_body & jp.asarray(np.asarray(m.body_jntnum) > 0)
    flag = _per_tree(m, moved, m.body_treeid) | _cannot_sleep(m, d, None)
    ta = _wake_islands(d.tree_asleep, flag, AWAKE_VALUE)
    return update(m, d, ta)


def _contact_keep(m: Model, d: Data) -> jax.Array:
    """(nconmax,) bool: contacts with an awake side (MuJoCo's collision filter: no contacts between bodies that are
    asleep or static)."""
    bid = np.asarray(m.geom_bodyid)
    g = d.contact.geom
    b1, b2 = jp.asarray(bid)[jp.maximum(g[:, 0], 0)], jp.asarray(bid)[jp.maximum(g[:, 1], 0)]
    return (d.body_awake[b1] == AWAKE) | (d.body_awake[b2] == AWAKE)


def _filter(m: Model, d: Data, found: jax.Array) -> Data:
    """d with contact.active: the contacts `found` by collision that have an awake side; ncon recounted."""
    con = d.contact
    active = found & _contact_keep(m, d)
    return d.replace(contact=con.replace(active=active), ncon=jp.sum(active).astype(d.ncon.dtype))


def _wake_by(m: Model, ta: jax.Array, valid: jax.Array, sleeper: jax.Array, value: jax.Array) -> jax.Array:
    """tree_asleep after MuJoCo's loop over items (contacts, tendons) in order, each waking the island of the sleeping
    tree `sleeper` with `value` (the awake side's counter) where `valid`: an island takes the value of its first item,
    a tree each item names also the smallest of its items' values (MuJoCo's loop does not update tree_awake, so a tree
    woken earlier in it takes min(value, its counter))."""
    n = m.ntree
    if valid.shape[0] == 0:  # (no contact capacity, no limited tendons)
        return ta
    sleeper = jp.where(valid, sleeper, 0)
    rep = _cycle_rep(ta)
    big = jp.iinfo(jp.int32).max
    idx = jp.arange(valid.shape[0], dtype=jp.int32)
    first = jax.ops.segment_min(jp.where(valid, idx, big), rep[sleeper], num_segments=n)  # per representative
    island_value = value[jp.clip(first, 0, valid.shape[0] - 1)]
    own = jax.ops.segment_min(jp.where(valid, value, 0), sleeper, num_segments=n)  # per tree (0 > any counter)
    touched = jax.ops.segment_max(valid.astype(jp.int32), sleeper, num_segments=n) > 0
    woken = (ta >= 0) & (first[rep] != big)
    new = jp.where(touched, jp.minimum(island_value[rep], own), island_value[rep])
    return jp.where(woken, new, ta).astype(jp.int32)


def wake_tendon(m: Model, d: Data) -> Data:
    """After the tendon stage (mj_wakeTendon): a limited tendon between two trees, one awake and one asleep, at or
    past a limit (within its margin) wakes the sleeping tree's island with the awake tree's counter."""
    if not on(m) or not m.ntendon:
        return d
    sel = np.nonzero((np.asarray(m.tendon_treenum) == 2) & (np.asarray(m.tendon_limited) != 0))[0]
    if not len(sel):
        return d
    t1, t2 = (np.asarray(m.tendon_treeid).reshape(-1, 2)[sel, k] for k in (0, 1))
    length, rng, margin = d.ten_length[sel], m.tendon_range[sel], m.tendon_margin[sel]
    limit = (length - rng[:, 0] < margin) | (rng[:, 1] - length < margin)
    a1, a2 = d.tree_awake[t1] > 0, d.tree_awake[t2] > 0
    valid = limit & (a1 != a2)
    sleeper = jp.where(a1, jp.asarray(t2), jp.asarray(t1))
    value = jp.where(a1, d.tree_asleep[t1], d.tree_asleep[t2])
    return update(m, d, _wake_by(m, d.tree_asleep, valid, sleeper, value))


def _wake_collision(m: Model, d: Data) -> jax.Array:
    """tree_asleep after mj_wakeCollision over the (filtered) active contacts: the island of a tree asleep in contact
    with an awake tree takes the awake tree's counter, from the first such contact of the island; each contacted
    tree also the smallest counter of its own contacts (MuJoCo's loop: a tree woken earlier in it keeps the min);
    a contact with a mocap body wakes with the fully awake value."""
    ta = d.tree_asleep
    bid, treeid = jp.asarray(np.asarray(m.geom_bodyid)), jp.asarray(np.asarray(m.body_treeid))
    g = d.contact.geom
    b1, b2 = bid[jp.maximum(g[:, 0], 0)], bid[jp.maximum(g[:, 1], 0)]
    s1, s2 = d.body_awake[b1], d.body_awake[b2]
    t1, t2 = treeid[b1], treeid[b2]
    one = (s1 == ASLEEP) & (s2 == AWAKE)  # side 1 sleeps, side 2 awake (a tree or a mocap body)
    two = (s2 == ASLEEP) & (s1 == AWAKE)
    valid = d.contact.active & (one | two)
    sleeper = jp.where(one, t1, t2)
    other = jp.where(one, t2, t1)
    value = jp.where(other >= 0, ta[jp.maximum(other, 0)], AWAKE_VALUE)
    return _wake_by(m, ta, valid, sleeper, value)


def _eq_bodies(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Static per equality: (body1, body2, kind) with body -1 for none; kind 1 for connect/weld/joint (the kinds that
    wake), 0 otherwise."""
    et, ot = np.asarray(m.eq_type), np.asarray(m.eq_objtype)
    o1, o2 = np.asarray(m.eq_obj1id), np.asarray(m.eq_obj2id)
    b1, b2, kind = np.full(m.neq, -1), np.full(m.neq, -1), np.zeros(m.neq, np.int32)
    for i in range(m.neq):
        if et[i] in (EqType.CONNECT, EqType.WELD):
            of = np.asarray(m.site_bodyid) if ot[i] == ObjType.SITE else None
            b1[i] = o1[i] if of is None else of[o1[i]]
            b2[i] = o2[i] if of is None else of[o2[i]]
            kind[i] = 1
        elif et[i] == EqType.JOINT:
            jb = np.asarray(m.jnt_bodyid)
            b1[i] = jb[o1[i]] if o1[i] >= 0 else -1
            b2[i] = jb[o2[i]] if o2[i] >= 0 else -1
            kind[i] = 1
    return b1, b2, kind


def _eq_state(m: Model, d: Data, b: np.ndarray) -> jax.Array:
    """(neq,) mjtSleepState of an equality side's body (-1 body: static)."""
    return jp.where(jp.asarray(b >= 0), d.body_awake[np.maximum(b, 0)], STATIC)


def _eq_sleep_state(m: Model, d: Data) -> jax.Array:
    """(neq,) mjtSleepState of each equality (mj_equalitySleepState): asleep when neither side is awake (connect,
    weld, joint); awake otherwise and for the other kinds."""
    b1, b2, kind = _eq_bodies(m)
    s1, s2 = _eq_state(m, d, b1), _eq_state(m, d, b2)
    return jp.where(jp.asarray(kind > 0) & (s1 != AWAKE) & (s2 != AWAKE), ASLEEP, AWAKE).astype(jp.int32)


def _wake_equality(m: Model, d: Data) -> jax.Array:
    """tree_asleep after mj_wakeEquality: an active connect/weld/joint equality between an awake body (a tree's or a
    mocap body) and a sleeping tree wakes it; between two sleeping trees of different islands wakes both."""
    b1, b2, kind = _eq_bodies(m)
    if not np.any(kind):
        return d.tree_asleep
    ta = d.tree_asleep
    treeid = np.asarray(m.body_treeid)
    s1, s2 = _eq_state(m, d, b1), _eq_state(m, d, b2)
    t1 = np.where(b1 >= 0, treeid[np.maximum(b1, 0)], -1)
    t2 = np.where(b2 >= 0, treeid[np.maximum(b2, 0)], -1)
    live = d.eq_active & jp.asarray(kind > 0) & jp.asarray(t1 != t2)
    rep = _cycle_rep(ta)
    r1, r2 = rep[np.maximum(t1, 0)], rep[np.maximum(t2, 0)]
    both = (s1 == ASLEEP) & (s2 == ASLEEP) & (r1 != r2)
    w1 = live & (((s1 == ASLEEP) & (s2 == AWAKE)) | both)
    w2 = live & (((s2 == ASLEEP) & (s1 == AWAKE)) | both)
    seg = jp.asarray(np.concatenate([np.maximum(t1, 0), np.maximum(t2, 0)]))
    flag = jax.ops.segment_max(jp.concatenate([w1, w2]).astype(jp.int32), seg, num_segments=m.ntree) > 0
    return _wake_islands(ta, flag, AWAKE_VALUE)


def collide(m: Model, d: Data) -> Data:
    """After collision (mj_collision, mj_wakeCollision, the second collision, mj_wakeEquality): the contacts of
    sleeping bodies dropped, their islands woken by awake contacts and equalities."""
    if not on(m):
        return d
    found = d.contact.active
    d = update(m, _filter(m, d, found))
    d = update(m, d, _wake_collision(m, d))
    d = _filter(m, d, found)  # the second collision pass: contacts with the woken trees (already in the padded table)
    return update(m, d, _wake_equality(m, d))


def mask_rows(m: Model, d: Data) -> Data:
    """After make_constraint: no rows for a sleeping joint's limits, a sleeping dof's friction loss, a sleeping
    tendon's limits and friction loss, or an equality whose sides are both asleep or static (mj_makeConstraint's
    sleep filter); nefc recounted."""
    if not on(m) or d.efc_mask.shape[0] == 0:
        return d
    typ, ids = d.efc_type, d.efc_id
    asleep_dof = d.body_awake[np.asarray(m.dof_bodyid)] == ASLEEP if m.nv else jp.zeros((0,), bool)
    asleep_jnt = d.body_awake[np.asarray(m.jnt_bodyid)] == ASLEEP if m.njnt else jp.zeros((0,), bool)
    drop = jp.zeros_like(d.efc_mask)
    if m.nv:
        drop |= (typ == ConstraintType.FRICTION_DOF) & asleep_dof[jp.clip(ids, 0, m.nv - 1)]
    if m.njnt:
        drop |= (typ == ConstraintType.LIMIT_JOINT) & asleep_jnt[jp.clip(ids, 0, m.njnt - 1)]
    if m.ntendon:
        ten_asleep = _tendon_state(m, d) == ASLEEP
        is_ten = (typ == ConstraintType.FRICTION_TENDON) | (typ == ConstraintType.LIMIT_TENDON)
        drop |= is_ten & ten_asleep[jp.clip(ids, 0, m.ntendon - 1)]
    if m.neq:
        eq_asleep = _eq_sleep_state(m, d) == ASLEEP
        drop |= (typ == ConstraintType.EQUALITY) & eq_asleep[jp.clip(ids, 0, m.neq - 1)]
    mask = d.efc_mask & ~drop
    return d.replace(efc_mask=mask, nefc=jp.sum(mask).astype(d.nefc.dtype))


# ---- forward results of sleeping trees --------------------------------------------------------------------------

_DOF_FIELDS = ("qfrc_bias", "qfrc_spring", "qfrc_damper", "qfrc_gravcomp", "qfrc_fluid", "qfrc_passive",
               "qfrc_smooth", "qacc_smooth")  # fmt: skip


def _actuator_asleep(m: Model, d: Data) -> jax.Array:
    """(nu,) bool: actuators whose transmission's bodies are all asleep (mj_sleepState of an actuator)."""
    trn, tid = np.asarray(m.actuator_trntype), np.asarray(m.actuator_trnid).reshape(-1, 2)
    bodies = []
    for i in range(m.nu):
        t, a, b = int(trn[i]), int(tid[i, 0]), int(tid[i, 1])
        if t in (TrnType.JOINT, TrnType.JOINTINPARENT) or (t == TrnType.SO3 and b < 0):
            bodies.append([int(m.jnt_bodyid[a])])
        elif t in (TrnType.SITE,):
            bodies.append([int(m.site_bodyid[a])])
        elif t in (TrnType.SLIDERCRANK, TrnType.SO3):
            bodies.append([int(m.site_bodyid[a]), int(m.site_bodyid[b])])
        elif t == TrnType.BODY:
            bodies.append([a])
        elif t == TrnType.TENDON:
            ttree = np.asarray(m.tendon_treeid).reshape(-1, 2)[a]
            roots = [int(m.tree_bodyadr[x]) for x in ttree[: int(m.tendon_treenum[a])]]
            bodies.append(roots or [-1])
        else:
            bodies.append([-1])
    width = max((len(b) for b in bodies), default=1)
    table = np.full((m.nu, width), -1)
    for i, b in enumerate(bodies):
        table[i, : len(b)] = b
        table[i, len(b) :] = b[0]
    state = jp.where(jp.asarray(table >= 0), d.body_awake[np.maximum(table, 0)], AWAKE)
    return jp.all(state == ASLEEP, axis=1)


def _tendon_state(m: Model, d: Data) -> jax.Array:
    """(ntendon,) mjtSleepState of each tendon (mj_tendonSleepState): static on no tree, its tree's on one, awake
    when either of two is awake, awake on more."""
    num = np.asarray(m.tendon_treenum)
    tid = np.maximum(np.asarray(m.tendon_treeid).reshape(-1, 2), 0)
    if not m.ntendon:
        return jp.zeros((0,), jp.int32)
    if not m.ntree:
        return jp.full((m.ntendon,), STATIC, jp.int32)
    a1, a2 = d.tree_awake[tid[:, 0]] > 0, d.tree_awake[tid[:, 1]] > 0
    one = jp.where(a1, AWAKE, ASLEEP)
    two = jp.where(a1 | a2, AWAKE, ASLEEP)
    return jp.select([jp.asarray(num == 0), jp.asarray(num == 1), jp.asarray(num == 2)], [STATIC, one, two],
                     AWAKE).astype(jp.int32)  # fmt: skip


def _sensor_asleep(m: Model, d: Data) -> jax.Array:
    """(nsensordata,) bool: the values of sensors asleep (mj_sensorSleepState), which MuJoCo does not recompute."""
    from_body = {ObjType.BODY: None, ObjType.XBODY: None, ObjType.JOINT: m.jnt_bodyid, ObjType.DOF: m.dof_bodyid,
                 ObjType.GEOM: m.geom_bodyid, ObjType.SITE: m.site_bodyid, ObjType.CAMERA: m.cam_bodyid,
                 ObjType.LIGHT: m.light_bodyid}  # fmt: skip
    act = jp.where(_actuator_asleep(m, d), ASLEEP, AWAKE) if m.nu else jp.zeros((0,), jp.int32)
    pool = jp.concatenate([d.body_awake, _tendon_state(m, d), act.astype(jp.int32), _eq_sleep_state(m, d),
                           jp.array([AWAKE], jp.int32)])  # fmt: skip
    base = {
        ObjType.TENDON: m.nbody,
        ObjType.ACTUATOR: m.nbody + m.ntendon,
        ObjType.EQUALITY: m.nbody + m.ntendon + m.nu,
    }
    awake_at = m.nbody + m.ntendon + m.nu + m.neq

    def index(objtype, objid):
        t, i = int(objtype), int(objid)
        if t in from_body:
            return i if from_body[t] is None else int(np.asarray(from_body[t])[i])
        if t in base and i >= 0:
            return base[t] + i
        return awake_at  # unknown (and types MuJoCo has no sleep state for): awake

    typ, ot, rt = (np.asarray(x) for x in (m.sensor_type, m.sensor_objtype, m.sensor_reftype))
    oi = np.array([index(t, i) for t, i in zip(ot, np.asarray(m.sensor_objid))], np.int32)
    ri = np.array([index(t, i) for t, i in zip(rt, np.asarray(m.sensor_refid))], np.int32)
    so, sr = pool[oi], pool[ri]
    always = np.isin(typ, (SensorType.USER, SensorType.PLUGIN, SensorType.RANGEFINDER)) | (
        (typ == SensorType.CONTACT) & ((ot == ObjType.SITE) | (rt == ObjType.SITE))
    )
    ou, ru = jp.asarray(ot == ObjType.UNKNOWN), jp.asarray(rt == ObjType.UNKNOWN)
    asleep = jp.where(ou & ru, False, jp.where(ou, sr == ASLEEP, jp.where(ru, so == ASLEEP,
                                                                          (so != AWAKE) & (sr != AWAKE))))  # fmt: skip
    asleep = asleep & ~jp.asarray(always)
    hist = np.asarray(m.sensor_history).reshape(-1, 2)[:, 0] > 0
    if np.any(hist):  # delayed and interval sensors read or sample their buffers asleep too (MuJoCo 4.0, probed)
        asleep = asleep & ~(jp.asarray(hist) & ((m.sensor_delay > 0) | (m.sensor_interval[:, 0] > 0)))
    return asleep[_sensor_of_data(m)]


def _sensor_of_data(m: Model) -> np.ndarray:
    """(nsensordata,) the sensor of each sensordata entry."""
    owner = np.repeat(np.arange(m.nsensor), np.asarray(m.sensor_dim))
    order = np.concatenate([np.arange(a, a + n) for a, n in zip(np.asarray(m.sensor_adr), np.asarray(m.sensor_dim))])
    per = np.zeros(m.nsensordata, np.int64)
    per[order] = owner
    return per


def freeze(m: Model, d0: Data, d: Data) -> Data:
    """After the forward pass: the fields MuJoCo skips for sleeping trees keep d0's values (the previous step's):
    the dofs' passive, bias and smooth forces and qacc_smooth, the actuators' act_dot (mj_advance still integrates
    act with it), the sensors' values; a sleeping dof's qacc is its qacc_smooth (no constraint rows touch it); its
    qfrc_actuator and its actuators' forces are zero (MuJoCo 4.0 clears them: probed). Sleeping poses and zero
    velocities recompute to the values MuJoCo keeps, so the other fields need no freezing."""
    if not on(m):
        return d
    dof = d.body_awake[np.asarray(m.dof_bodyid)] == ASLEEP
    out = {f: jp.where(dof, getattr(d0, f), getattr(d, f)) for f in _DOF_FIELDS}
    out["qacc"] = jp.where(dof, out["qacc_smooth"], d.qacc)
    out["qfrc_actuator"] = jp.where(dof, 0.0, d.qfrc_actuator)  # (MuJoCo 4.0 clears them, probed)
    if m.nu:
        act = _actuator_asleep(m, d)
        out["actuator_force"] = jp.where(act, 0.0, d.actuator_force)
        if m.na:  # act_dot: MuJoCo skips sleeping actuators (mj_advance still integrates act with it)
            owner = np.repeat(np.arange(m.nu), np.maximum(np.asarray(m.actuator_actnum), 0))
            out["act_dot"] = jp.where(act[owner], d0.act_dot, d.act_dot)
    if m.nsensordata:
        out["sensordata"] = jp.where(_sensor_asleep(m, d), d0.sensordata, d.sensordata)
    return d.replace(**out)


# ---- state advancement ----------------------------------------------------------------------------------------


def _islands(m: Model, d: Data):
    """(nisland, tree_island (ntree,)) of this step's live constraint rows (mj_island)."""

    class _P:  # the three fields `island.find` reads
        J = d.efc_J
        J_colind = d.efc_J_colind if sparse_efc_jacobian(m) else None
        mask = d.efc_mask

    isl = island.find(_P, m.dof_treeid, m.ntree)
    return isl.nisland, isl.tree_island


def _ready(m: Model, d: Data) -> tuple[jax.Array, jax.Array]:
    """(tree_asleep with the counters advanced, (ntree,) bool trees to put to sleep) (mj_sleep's two sweeps)."""
    n, ta = m.ntree, d.tree_asleep
    awake = ta < 0
    can = ~_cannot_sleep(m, d, m.opt.sleep_tolerance)
    ta = jp.where(awake, jp.where(can, ta + (ta < -1), AWAKE_VALUE), ta).astype(jp.int32)
    ready = awake & (ta == -1)
    if m.njmax and not (m.opt.disableflags & DisableBit.ISLAND):
        nisland, tree_island = _islands(m, d)
        seg = jp.where(tree_island >= 0, tree_island, 0)
        notready = jax.ops.segment_max((~ready & (tree_island >= 0)).astype(jp.int32), seg, num_segments=n) > 0
        go = ready & ((tree_island < 0) | ~notready[seg])
        blocked = (d.nefc > 0) & (nisland == 0)
    else:  # no island structure: trees sleep alone, and none when there are rows
        tree_island = jp.full((n,), -1, jp.int32)
        go = ready
        blocked = d.nefc > 0 if m.njmax else jp.zeros((), bool)
    go = go & ~blocked
    ta = jp.where(blocked, d.tree_asleep, ta)  # (mj_sleep returns before counting)
    # the cycle: each tree of an island to the next one in ascending order, the last to the first; alone: itself
    ids = jp.arange(n, dtype=jp.int32)
    same = (tree_island[:, None] == tree_island[None, :]) & (tree_island[:, None] >= 0) | (ids[:, None] == ids[None])
    later = same & (ids[None, :] > ids[:, None])
    big = jp.int32(n)
    nxt = jp.min(jp.where(later, ids[None, :], big), axis=1)
    first = jp.min(jp.where(same, ids[None, :], big), axis=1)
    nxt = jp.where(nxt == big, first, nxt)
    return jp.where(go, nxt, ta).astype(jp.int32), go


def fall_asleep(m: Model, d: Data, recompute) -> Data:
    """mj_sleep at the start of state advancement: count the trees below the tolerance, put ready islands to sleep
    (qvel, qacc = 0), recompute the velocity and acceleration stages when any did (`recompute(d) -> d`:
    mj_forwardSkip from the velocity stage, the trees still counted awake; d.history holds this step's samples
    already, so interval and delayed sensors read them as MuJoCo's), then the derived arrays."""
    if not on(m):
        return d
    ta, go = _ready(m, d)
    dof_go = go[np.asarray(m.dof_treeid)] if m.nv else jp.zeros((0,), bool)
    slept = d.replace(tree_asleep=ta, qvel=jp.where(dof_go, 0.0, d.qvel), qacc=jp.where(dof_go, 0.0, d.qacc))
    d = jax.lax.cond(jp.any(go), recompute, lambda x: x, slept)
    return update(m, d)


def integrate_mask(m: Model, d0: Data, d: Data) -> Data:
    """After integration: a sleeping tree's qpos and qvel are d0's (MuJoCo integrates the awake dofs and bodies)."""
    if not on(m):
        return d
    dof = d0.body_awake[np.asarray(m.dof_bodyid)] == ASLEEP
    jnt_q = np.repeat(np.asarray(m.jnt_bodyid), _qpos_width(m))
    q = d0.body_awake[jnt_q] == ASLEEP if m.nq else jp.zeros((0,), bool)
    return d.replace(qpos=jp.where(q, d0.qpos, d.qpos), qvel=jp.where(dof, d0.qvel, d.qvel))


def _qpos_width(m: Model) -> np.ndarray:
    return np.array([{JointType.FREE: 7, JointType.BALL: 4}.get(int(t), 1) for t in np.asarray(m.jnt_type)], int)


def init(m: Model, d: Data, forward) -> Data:
    """mj_resetData's "init" policy: `forward(m, d) -> d` (every tree awake), then the trees marked init are ready and
    mj_sleep puts to sleep those whose islands hold only such trees (the others stay awake, as MuJoCo's warning
    says: 4.0 no longer refuses them). As MuJoCo's reset, the forward pass's fields are kept except qfrc_smooth and
    qacc_smooth (zero) and the constraint rows (cleared); the slept trees' qvel and qacc are zero."""
    if not on(m) or not np.any(np.asarray(m.tree_sleep_policy) == INIT):
        return d
    f = forward(m, d)
    init_tree = jp.asarray(np.asarray(m.tree_sleep_policy) == INIT)
    f = f.replace(tree_asleep=jp.where(init_tree, -1, AWAKE_VALUE).astype(jp.int32))
    ta, go = _ready(m, f)
    dof_go = go[np.asarray(m.dof_treeid)] if m.nv else jp.zeros((0,), bool)
    out = f.replace(qvel=jp.where(dof_go, 0.0, f.qvel), qacc=jp.where(dof_go, 0.0, f.qacc),
                    qfrc_smooth=jp.zeros_like(f.qfrc_smooth), qacc_smooth=jp.zeros_like(f.qacc_smooth),
                    efc_mask=jp.zeros_like(f.efc_mask), nefc=jp.zeros_like(f.nefc))  # fmt: skip
    return update(m, out, ta)
