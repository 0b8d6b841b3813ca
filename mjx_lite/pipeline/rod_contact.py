"""Contact Jacobians of elastic rods (MuJoCo 4.0 `<flexcomp dim="1">` with twist joints, pipeline/passive_rod.py).

A rod's contact point sits on its surface, at the lever arm `a` from the element's axis: a = -r n for a vertex
contact (r the flex radius, n the contact normal), a = pos - p for an element contact (p the axis point nearest to
the contact point). The element (edge e = x_b - x_a, twist joint angle theta) rotates with its reference frame
(u, v, t): t = e / |e|, u the time-parallel transport of the stored u_old from the stored tangent t_old
(Data.plastic, passive_rod.frames) to t, v = t x u; with the twist, w = 1/2 sum_i r_i x dr_i/dt + dtheta/dt t over
the frame's rows r_i (= (e x de/dt) / |e|^2 + dtheta/dt t where t_old = t, as at an unset state). MuJoCo 4.0 adds
that rotation to the rod side of the contact (probed against mj_forward's efc_J, which depends on Data.plastic):
the point's velocity gains w x a, the contact's angular velocity (torsional and rolling rows) is w. A row with
linear coefficients c and angular coefficients c_w (the contact frame) thus gains w . q with q = a x c + c_w:
    (W' q) . (v_b - v_a)   and   (t . q) dtheta/dt,   W = dw / d(de/dt) (3, 3).
A vertex contact uses the rod element that starts at the vertex (the last element for the chain's last vertex).
v_a, v_b are the vertex bodies' linear Jacobians at the vertices. mjcf/flex.py admits rod contacts where the rod's
vertex bodies move by their own slide joints under one body C or are pinned to it (as every <flexcomp> makes them).
Where C moves (angular velocity w_c), MuJoCo 4.0 (probed: its efc_J to 6e-14, tests/test_rod_moving.py) moves the
rod's contact point as the axis point plus the rod's rotation, v(p) + w x a, and turns it with w alone; the contact
Jacobian of the rod side (its vertex bodies at the contact point: v(p) + w_c x a, turning with w_c) thus loses
w_c . q (`add_rows`' carrier rows). w itself carries w_c's part normal to the edge: the edge's velocity, from the
vertex Jacobians at the vertices, includes w_c x e.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._struct import static_memo
from mjx_lite.collision import flex as flexcol
from mjx_lite.pipeline import passive_rod
from mjx_lite.types import Model


def tables(m: Model) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Static rod tables, None where no rod has contact slots: per global flex vertex its rod element (global
    element id, -1 off rods) (nflexvert,); per global element (va, vb) global vertex ids (nelem, 2), the twist
    dof (nelem,) (-1: no twist joint, a clamped edge; or not a rod) and the address of its reference frame
    (t_old, u_old) in Data.plastic (nelem,)."""

    def build(m):
        if not m.nflex:
            return None
        colliding = flexcol._colliding_flexes(m)
        rods = [r for r in passive_rod.rods(m) if r[0] in colliding]
        if not rods:
            return None
        nelem = int(np.sum(np.asarray(m.flex_elemnum)))
        vert_elem = np.full(m.nflexvert, -1, np.int64)
        ends = np.zeros((nelem, 2), np.int64)
        tdof = np.full(nelem, -1, np.int64)
        padr = np.zeros(nelem, np.int64)
        edofs = np.asarray(m.flexedge_twistdof)
        for f, chain, plastic, _ in rods:
            eadr, ne = int(np.asarray(m.flex_elemadr)[f]), len(chain) - 1
            edge = np.asarray(m.flex_edge)[int(np.asarray(m.flex_edgeadr)[f]) :][:ne]
            vadr = int(np.asarray(m.flex_vertadr)[f])
            for k in range(ne):
                a, b = int(chain[k]), int(chain[k + 1])
                ends[eadr + k] = a, b
                padr[eadr + k] = plastic + 6 * k
                la, lb = a - vadr, b - vadr
                hit = np.nonzero((edge.min(1) == min(la, lb)) & (edge.max(1) == max(la, lb)))[0][0]
                tdof[eadr + k] = edofs[int(np.asarray(m.flex_edgeadr)[f]) + hit]
                vert_elem[a] = eadr + k
            vert_elem[int(chain[-1])] = eadr + ne - 1
        return vert_elem, ends, tdof, padr

    return static_memo(m, "rod_contact_tables", build)


def has_contacts(m: Model) -> bool:
    """Static: some rod can make contacts (its contact rows need `terms` / `add_rows`)."""
    return tables(m) is not None


def terms(m: Model, d, con) -> tuple[jax.Array, ...]:
    """Per contact slot (nconmax,): (body of v_a, body of v_b, positions of v_a and v_b (n, 3), edge vector e
    (n, 3), lever arm a (n, 3), twist dof (-1 none), rod mask, the element's reference tangent and normal (n, 3));
    rows off rods get bodies 0, zero e and a, mask False."""
    vert_elem, ends, tdof, padr = tables(m)
    dt = d.qpos.dtype
    fl = jp.maximum(con.flex[:, 1], 0)
    on_flex = (con.flex[:, 1] >= 0) & (con.geom[:, 1] < 0)
    is_vert = on_flex & (con.vert[:, 1] >= 0)
    is_elem = on_flex & (con.vert[:, 1] < 0) & (con.elem[:, 1] >= 0)
    vadr = jp.asarray(np.asarray(m.flex_vertadr), jp.int32)[fl]
    eadr = jp.asarray(np.asarray(m.flex_elemadr), jp.int32)[fl]
    nvert, nelem = max(m.nflexvert - 1, 0), max(len(tdof) - 1, 0)
    ve = jp.asarray(vert_elem, jp.int32)[jp.clip(vadr + con.vert[:, 1], 0, nvert)]
    el = jp.where(is_vert, ve, jp.where(is_elem, eadr + con.elem[:, 1], -1))
    elc = jp.clip(el, 0, nelem)
    rod = (el >= 0) & jp.asarray(ends[:, 0] != ends[:, 1])[elc]  # (elements off rods: ends (0, 0))
    va, vb = jp.asarray(ends[:, 0], jp.int32)[elc], jp.asarray(ends[:, 1], jp.int32)[elc]
    xa, xb = d.flexvert_xpos[va], d.flexvert_xpos[vb]
    e = jp.where(rod[:, None], xb - xa, 0.0)
    l2 = jp.sum(e * e, -1)
    safe = jp.where(l2 > 0, l2, 1.0)
    t = jp.clip(jp.sum((con.pos - xa) * e, -1) / safe, 0.0, 1.0)
    lever_elem = con.pos - (xa + t[:, None] * e)
    radius = m.flex_radius.astype(dt)[fl]
    lever = jp.where(is_vert[:, None], -radius[:, None] * con.frame[:, 0], lever_elem)
    lever = jp.where(rod[:, None], lever, 0.0)
    vbody = jp.asarray(np.maximum(np.asarray(m.flex_vertbodyid), 0), jp.int32)
    ba, bb = jp.where(rod, vbody[va], 0), jp.where(rod, vbody[vb], 0)
    dof = jp.where(rod, jp.asarray(tdof, jp.int32)[elc], -1)
    # the element's reference frame: stored (t_old, u_old); unset (zeros): the current tangent (any normal)
    ref = d.plastic[jp.asarray(padr, jp.int32)[elc][:, None] + jp.arange(6)[None, :]].astype(dt)
    tcur = jp.where(rod[:, None], e, jp.asarray([1.0, 0.0, 0.0], dt)) / jp.sqrt(jp.where(rod & (l2 > 0), l2, 1.0))[
        :, None]  # fmt: skip
    isset = jp.sum(ref[:, :3] * ref[:, :3], -1) > 0
    axis = jax.nn.one_hot(jp.argmin(jp.abs(tcur), -1), 3, dtype=dt)
    perp = jp.cross(tcur, axis)
    perp = perp / jp.linalg.norm(perp, axis=-1, keepdims=True)
    told = jp.where((isset & rod)[:, None], ref[:, :3], tcur)
    uold = jp.where((isset & rod)[:, None], ref[:, 3:], perp)
    return ba, bb, xa, xb, e, lever, dof, rod, told, uold


def _frame(e: jax.Array, told: jax.Array, uold: jax.Array) -> jax.Array:
    """(3, 3) rows (u, v, t): the element's reference frame at edge vector e (3,), u the time-parallel transport of
    uold from tangent told to t = e / |e| (passive_rod._transport), v = t x u."""
    t = e / jp.linalg.norm(e)
    u = passive_rod._transport(told, t, uold)
    return jp.stack([u, jp.cross(t, u), t])


def add_rows(m: Model, rows_of, vertex_rows_of, e: jax.Array, lever: jax.Array, dof: jax.Array, rod: jax.Array,
             told: jax.Array, uold: jax.Array, sparse: bool, carrier_rows_of=None):  # fmt: skip
    """rows_of (see constraint._contact_jacobian) plus the rods' rotation terms of k contacts: e, lever (k, 3), dof,
    rod (k,) from `terms`; vertex_rows_of: the linear Jacobian difference J(body of v_b at v_b) - J(body of v_a at
    v_a) (ncomp 3); carrier_rows_of (rods on a moving body, else None): the Jacobian of the body of v_a at the
    contact point (ncomp 6), whose rotation w_c MuJoCo 4.0 leaves out of a rod's side: the point moves with the
    axis point and the rod's own rotation, v(p) + w x a, and turns with w alone, so the rows lose w_c . q.
    coef (k, r, 3 or 6) -> rows (k, r, nv), or sparse (values, columns) with the extra columns appended."""

    def out(coef):
        c = coef[..., :3]
        q = jp.cross(lever[:, None, :], c)
        if coef.shape[-1] == 6:
            q = q + coef[..., 3:]
        l2 = jp.sum(e * e, -1)
        safe = jp.where(rod & (l2 > 0), l2, 1.0)
        es = jp.where((rod & (l2 > 0))[:, None], e, jp.asarray([1.0, 0.0, 0.0], e.dtype))
        frame = jax.vmap(_frame)(es, told, uold)  # (k, 3, 3)
        dframe = jax.vmap(jax.jacfwd(_frame))(es, told, uold)  # (k, 3 (i), 3 (c), 3 (e_j))
        # w = 1/2 sum_i r_i x dr_i/dt: w . q = (1/2 sum_i dr_i/de' (q x r_i)) . de/dt
        qr = jp.cross(q[:, :, None, :], frame[:, None, :, :])  # (k, r, i, c)
        u = 0.5 * jp.einsum("kicj,kric->krj", dframe, qr)  # (k, r, 3): coefficients of v_b - v_a
        u = jp.where(rod[:, None, None], u, 0.0)
        tw = jp.sum(e[:, None, :] * q, -1) / jp.sqrt(safe)[:, None]  # (k, r): of dtheta/dt
        tw = jp.where((rod & (dof >= 0))[:, None], tw, 0.0)
        base, extra = rows_of(coef), vertex_rows_of(u)
        col = jp.maximum(dof, 0)
        parts = [base, extra]
        if carrier_rows_of is not None:
            qc = jp.where(rod[:, None, None], q, 0.0)
            carrier = carrier_rows_of(jp.concatenate([jp.zeros_like(qc), qc], axis=-1))
            parts.append((-carrier[0], carrier[1]) if sparse else -carrier)
        if sparse:
            vals = jp.concatenate([p[0] for p in parts] + [tw[..., None]], axis=-1)
            cols = jp.concatenate([p[1] for p in parts] + [jp.broadcast_to(col[:, None, None], tw[..., None].shape)],
                                  axis=-1)  # fmt: skip
            return vals, cols
        onehot = jax.nn.one_hot(col, base.shape[-1], dtype=base.dtype)  # (k, nv)
        return sum(parts) + tw[..., None] * onehot[:, None, :]

    return out
