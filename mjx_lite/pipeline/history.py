"""Delay and history ring buffers of actuators and sensors (MuJoCo 4's `nsample`, `delay`, `interp`, `interval`).

Each actuator or sensor with `nsample` > 0 owns a block of `Data.history` at its `*_historyadr`, laid out as
MuJoCo's: [user, cursor, times (n), values (n * dim)] (an actuator's dim is its number of controls
`actuator_ctrlnum`: the whole control block; a sensor's is `sensor_dim`). `cursor` is the physical slot of the
newest sample; logical sample j (0: oldest) lives in slot
(cursor + 1 + j) % n. A sensor's `user` slot holds the time of its last interval tick.

(`mjx_lite.data.make_data` writes the buffers of mj_resetData.)
- `delayed_ctrl(m, d)`: the controls the actuation stage reads (mj_readCtrl at time - delay for delayed actuators).
- `read_sensors(m, d, sel)`: delayed sensors read from their buffers, interval sensors between ticks held.
- `advance(m, d)`: the buffers after a step (mj_advance): the control, and the sensor values, inserted at d.time.

Reads (`read`) interpolate with MuJoCo's zero-order hold, linear or cubic (Catmull-Rom) rule; inserts
(`insert`) keep the samples sorted by time, replacing an equal timestamp, dropping the oldest. Everything is
vectorised over buffers of equal (n, dim) and differentiable in the stored values.
"""

from __future__ import annotations

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite.types import MINVAL, Data, Model


def _groups(nsample: np.ndarray, dim: np.ndarray, ids: np.ndarray) -> dict[tuple[int, int], np.ndarray]:
    """Objects `ids` grouped by their buffer shape (nsample, dim) (static)."""
    out: dict[tuple[int, int], list[int]] = {}
    for i in ids:
        out.setdefault((int(nsample[i]), int(dim[i])), []).append(int(i))
    return {k: np.asarray(v) for k, v in out.items()}


def _slots(adr: np.ndarray, n: int, dim: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Static index arrays into Data.history for buffers at `adr`: user (k,), cursor (k,), times (k, n),
    values (k, n, dim)."""
    adr = np.asarray(adr)[:, None]
    return (adr[:, 0], adr[:, 0] + 1, adr + 2 + np.arange(n), (adr + 2 + n + np.arange(n * dim)).reshape(-1, n, dim))


def _logical(times: jax.Array, values: jax.Array, cursor: jax.Array):
    """(k, n) times and (k, n, dim) values in logical order (oldest first) and the (k, n) physical slot of each."""
    n = times.shape[-1]
    phys = (cursor.astype(jp.int32)[:, None] + 1 + jp.arange(n)) % n
    return jp.take_along_axis(times, phys, 1), jp.take_along_axis(values, phys[..., None], 1), phys


def _tol(t: jax.Array) -> tuple[jax.Array, jax.Array]:
    """(equality tolerance, ordering slack) of sample times near t: MuJoCo's 1e-15 and none in float64; in float32
    64 ulps of max(1, |t|) for both (an accumulated float32 time misses a sample time by round-off, which would
    shift a zero-order-hold read by one sample)."""
    if t.dtype == jp.float64:
        return jp.asarray(MINVAL, t.dtype), jp.zeros((), t.dtype)
    r = 64 * jp.finfo(t.dtype).eps * jp.maximum(1.0, jp.abs(t))
    return r, r


def read(times: jax.Array, values: jax.Array, cursor: jax.Array, t: jax.Array, interp: np.ndarray) -> jax.Array:
    """Values at time t of k buffers (mju_historyRead): (k, dim).

    times (k, n), values (k, n, dim), cursor (k,), t (k,); interp (k,) static: 0 zero-order hold (the latest
    sample at or before t), 1 linear, 2 cubic Hermite with Catmull-Rom slopes (0 at the ends). Before the oldest
    sample the oldest value, after the newest the newest."""
    tl, vl, _ = _logical(times, values, cursor)
    n = tl.shape[-1]
    tt = t[:, None]
    tol, slack = _tol(t)
    # times[i-1] < t <= times[i] (between the ends)
    i = jp.clip(jp.sum(tl < tt - jp.expand_dims(slack, -1), axis=1), 1, max(n - 1, 1))
    take_t = lambda j: jp.take_along_axis(tl, jp.clip(j, 0, n - 1)[:, None], 1)[:, 0]  # noqa: E731
    take_v = lambda j: jp.take_along_axis(vl, jp.clip(j, 0, n - 1)[:, None, None], 1)[:, 0]  # noqa: E731
    t_lo, t_hi = take_t(i - 1), take_t(i)
    v_lo, v_hi = take_v(i - 1), take_v(i)
    dt = jp.where(t_hi - t_lo > 0, t_hi - t_lo, 1.0)
    a = ((t - t_lo) / dt)[:, None]
    lin = v_lo + a * (v_hi - v_lo)
    a2, a3 = a * a, a * a * a
    im2, ip1 = jp.maximum(i - 2, 0), jp.minimum(i + 1, n - 1)
    dlo = jp.where(i > 1, t_hi - take_t(im2), 1.0)
    dhi = jp.where(i < n - 1, take_t(ip1) - t_lo, 1.0)
    m_lo = jp.where((i > 1)[:, None], (v_hi - take_v(im2)) / dlo[:, None], 0.0)
    m_hi = jp.where((i < n - 1)[:, None], (take_v(ip1) - v_lo) / dhi[:, None], 0.0)
    cub = ((2 * a3 - 3 * a2 + 1) * v_lo + (a3 - 2 * a2 + a) * dt[:, None] * m_lo + (-2 * a3 + 3 * a2) * v_hi
           + (a3 - a2) * dt[:, None] * m_hi)  # fmt: skip
    mode = jp.asarray(np.asarray(interp))[:, None]
    out = jp.where(mode == 0, v_lo, jp.where(mode == 1, lin, cub))
    exact = (jp.abs(t - t_hi) < tol)[:, None]
    out = jp.where(exact, v_hi, out)
    out = jp.where((t <= tl[:, 0] + tol)[:, None], vl[:, 0], out)
    return jp.where((t >= tl[:, -1] - tol)[:, None], vl[:, -1], out)


def insert(times: jax.Array, values: jax.Array, cursor: jax.Array, t: jax.Array, v: jax.Array):
    """k buffers with (t, v) inserted (mju_historyInsert): (times, values, cursor) of the same shapes.

    An existing sample with the same time (within 1e-15) is overwritten; otherwise the oldest sample is dropped
    and the new one takes its logical place (a sample newer than all advances the cursor). v: (k, dim)."""
    tl, vl, _ = _logical(times, values, cursor)
    n = tl.shape[-1]
    tt = t[:, None]
    tol, slack = _tol(t)
    i = jp.sum(tl < tt - jp.expand_dims(slack, -1), axis=1)  # logical insertion index: times[i-1] < t <= times[i]
    at_i = jp.take_along_axis(tl, jp.minimum(i, n - 1)[:, None], 1)[:, 0]
    match = (i < n) & (jp.abs(t - at_i) < tol)
    j = jp.arange(n)[None, :]
    ii = i[:, None]
    # no match: slots j < i-1 take j+1, slot i-1 takes the new sample (i == 0: slot 0 is replaced)
    src = jp.where(j < ii - 1, j + 1, j)
    put = jp.where(match[:, None], j == ii, jp.where(ii == 0, j == 0, j == ii - 1))
    nt = jp.where(put, tt, jp.take_along_axis(tl, src, 1))
    nv = jp.where(put[..., None], v[:, None, :], jp.take_along_axis(vl, src[..., None], 1))
    ncur = jp.where(~match & (i == n), (cursor.astype(jp.int32) + 1) % n, cursor.astype(jp.int32))
    phys = (ncur[:, None] + 1 + jp.arange(n)) % n  # logical -> physical with the new cursor
    out_t = jp.zeros_like(times).at[jp.arange(len(t))[:, None], phys].set(nt)
    out_v = jp.zeros_like(values).at[jp.arange(len(t))[:, None], phys].set(nv)
    return out_t, out_v, ncur.astype(times.dtype)


# ---------------------------------------------------------------------------------------------------------
# model-level helpers


def delayed_ctrl(m: Model, d: Data) -> jax.Array:
    """The controls (nu,) the actuation stage reads: d.ctrl, with the control block of each actuator whose delay
    is nonzero read from its buffer at d.time - delay (mj_readCtrl with the actuator's interp)."""
    hist = np.asarray(m.actuator_history).reshape(-1, 2)
    ids = np.nonzero(hist[:, 0] > 0)[0]
    ctrl = d.ctrl
    if not len(ids):
        return ctrl
    adr, num = np.asarray(m.actuator_historyadr), np.asarray(m.actuator_ctrlnum)
    for (n, k), g in _groups(hist[:, 0], num, ids).items():
        _, cur, ti, va = _slots(adr[g], n, k)
        delay = m.actuator_delay[g]
        v = read(d.history[ti], d.history[va], d.history[cur], d.time - delay, hist[g, 1])
        cols = np.asarray(m.actuator_ctrladr)[g][:, None] + np.arange(k)
        ctrl = ctrl.at[cols].set(jp.where((delay != 0)[:, None], v, ctrl[cols]))  # (MuJoCo reads a negative one too)
    return ctrl


def read_sensors(m: Model, d: Data, sel: np.ndarray) -> Data:
    """Sensors among `sel` with a history buffer (compute_or_read_sensor): delay > 0 reads the buffer at
    d.time - delay; an interval sensor (delay 0) keeps its computed value on a tick (last tick + period <= time)
    and reads the buffer at d.time between ticks. d.sensordata holds the computed values on entry."""
    hist = np.asarray(m.sensor_history).reshape(-1, 2)
    ids = np.asarray([i for i in sel if hist[i, 0] > 0], int)
    if not len(ids):
        return d
    adr, sadr, dim = np.asarray(m.sensor_historyadr), np.asarray(m.sensor_adr), np.asarray(m.sensor_dim)
    data = d.sensordata
    for (n, k), g in _groups(hist[:, 0], dim, ids).items():
        us, cur, ti, va = _slots(adr[g], n, k)
        delay, period = m.sensor_delay[g], m.sensor_interval[g, 0]
        tread = d.time - jp.where(delay > 0, delay, 0.0)
        v = read(d.history[ti], d.history[va], d.history[cur], tread, hist[g, 1])
        due = d.history[us] + period <= d.time
        use_buf = (delay > 0) | ((period > 0) & ~due)
        cols = sadr[g][:, None] + np.arange(k)
        data = data.at[cols].set(jp.where(use_buf[:, None], v, data[cols]))
    return d.replace(sensordata=data)


def needs_raw(m: Model) -> np.ndarray:
    """Static ids of the sensors whose history insert computes the sensor afresh (delay > 0 at compile time is
    not known statically: every history sensor whose delay is traced; the caller masks by delay > 0)."""
    hist = np.asarray(m.sensor_history).reshape(-1, 2)
    return np.nonzero(hist[:, 0] > 0)[0] if m.nsensor else np.zeros(0, int)


def advance(m: Model, d: Data, raw: jax.Array | None = None) -> jax.Array:
    """Data.history after a step (the history part of mj_advance), inserting at d.time (before it advances):
    each actuator's control block (as given: unclamped); each sensor's value (`raw`, the freshly computed
    (nsensordata,) values, for delay > 0; d.sensordata otherwise), on every step, or with an interval only on
    ticks (last tick + period <= time: the tick advances by the period)."""
    buf = d.history
    if m.nhistory == 0:
        return buf
    time = d.time
    ahist = np.asarray(m.actuator_history).reshape(-1, 2)
    aids = np.nonzero(ahist[:, 0] > 0)[0]
    aadr = np.asarray(m.actuator_historyadr)
    anum = np.asarray(m.actuator_ctrlnum)
    for (n, k), g in _groups(ahist[:, 0], anum, aids).items():
        _, cur, ti, va = _slots(aadr[g], n, k)
        v = d.ctrl[np.asarray(m.actuator_ctrladr)[g][:, None] + np.arange(k)]
        nt, nv, nc = insert(buf[ti], buf[va], buf[cur], jp.full((len(g),), time), v)
        buf = buf.at[ti].set(nt).at[va].set(nv).at[cur].set(nc)
    shist = np.asarray(m.sensor_history).reshape(-1, 2)
    sids = needs_raw(m)
    sadr, dim, hadr = np.asarray(m.sensor_adr), np.asarray(m.sensor_dim), np.asarray(m.sensor_historyadr)
    for (n, k), g in _groups(shist[:, 0], dim, sids).items():
        us, cur, ti, va = _slots(hadr[g], n, k)
        delay, period = m.sensor_delay[g], m.sensor_interval[g, 0]
        cols = sadr[g][:, None] + np.arange(k)
        value = d.sensordata[cols]
        if raw is not None:
            value = jp.where((delay > 0)[:, None], raw[cols], value)
        due = buf[us] + period <= time
        write = (period <= 0) | due
        nt, nv, nc = insert(buf[ti], buf[va], buf[cur], jp.full((len(g),), time), value)
        w = write[:, None]
        buf = buf.at[ti].set(jp.where(w, nt, buf[ti])).at[va].set(jp.where(w[..., None], nv, buf[va]))
        buf = buf.at[cur].set(jp.where(write, nc, buf[cur]))
        buf = buf.at[us].set(jp.where((period > 0) & due, buf[us] + period, buf[us]))
    return buf


def has_history(m: Model) -> bool:
    """Whether the model has any history buffer (static)."""
    return m.nhistory > 0


