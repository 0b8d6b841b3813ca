"""Derivatives of the step as a product: transition Jacobians in MuJoCo's convention, and contact-aware gradients.

`transition(m, d)` returns the Jacobians of one `step` in the layout and tangent-space convention of MuJoCo's
`mjd_transitionFD`, computed exactly by autodiff through the step instead of finite differences (forward mode
where the model allows it, else reverse mode through the implicit differentiation of the constraint solver):

    x = (dq, qvel, act): (2 nv + na,)  dq is a tangent-space position (nv,): qpos = integrate_pos(qpos0, dq, 1)
    A = d x_next / d x        (2nv+na, 2nv+na)
    B = d x_next / d ctrl     (2nv+na, nu)
    C = d sensordata / d x    (nsensordata, 2nv+na)   sensordata of the step's forward pass (at x, as mj_step)
    D = d sensordata / d ctrl (nsensordata, nu)

The position rows of A and B are tangent vectors at the next state: dq_next = differentiate_pos(qpos_next0,
qpos_next) (mj_differentiatePos), so ball and free joints contribute 3 rows/columns per rotation.

Contact-aware gradients (`Config(contact_gradients="smooth")`, off by default): `step` keeps its exact value but
its reverse-mode derivative is the average of the exact derivatives at `contact_smoothing_samples` randomly
perturbed copies of the input state (first-order randomised smoothing of the dynamics, the "bundled gradient" of
Suh, Pang and Tedrake 2022; cf. Suh et al. 2022, "Do differentiable simulators give better policy gradients?",
and Pang et al. 2023 for the smoothing view of contact). Where a contact is about to be made the smoothed
derivative sees it, so an optimiser is pulled towards making the contact; the exact derivative is zero there.
Positions (the dofs `contact_smoothing_dofs`, default all) are perturbed in the tangent space with standard
deviation `contact_smoothing_std` (metres or radians). `mjx_lite.step` itself consults the configuration.
See docs/gradients.md for its cost and when the exact gradient is the better choice.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jp
import numpy as np

from mjx_lite._eager import jit_when_eager
from mjx_lite.pipeline import smoothing as _smoothing
from mjx_lite.pipeline import step as _pipeline
from mjx_lite.pipeline.integrate import integrate_pos
from mjx_lite.types import Data, JointType, Model

__all__ = ["differentiate_pos", "forward_mode", "integrate_pos", "jacobian", "smooth_step", "step", "transition"]

# Below this |sin(angle/2)| the rotation vector of a quaternion uses the series of atan2(s, w) / s
# (1/w - s^2 / (3 w^3)): its truncation error s^4/5 < 2e-17 is below float64 round-off, and the closed form's
# 0/0 (value and derivative) at the identity is avoided.
_LOG_SERIES_BELOW = 1e-4


def _quat_log(q: jax.Array) -> jax.Array:
    """Rotation vector v of unit quaternion q (..., 4) with q = exp(v) (shortest path), NaN-free at identity.

    Equals mju_quat2Vel(q, 1): angle wrapped to [-pi, pi] (equivalently q flipped to w >= 0).
    """
    q = jp.where(q[..., :1] < 0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    s2 = jp.sum(v * v, axis=-1)
    small = s2 < _LOG_SERIES_BELOW**2
    s = jp.sqrt(jp.where(small, 1.0, s2))
    ws = jp.where(small, w, 1.0)
    ratio = jp.where(small, 1.0 / ws - s2 / (3.0 * ws**3), jp.arctan2(s, w) / s)  # atan2(s, w) / s
    return 2.0 * v * ratio[..., None]


def _quat_mul(a: jax.Array, b: jax.Array) -> jax.Array:
    aw, av = a[..., :1], a[..., 1:]
    bw, bv = b[..., :1], b[..., 1:]
    w = aw * bw - jp.sum(av * bv, axis=-1, keepdims=True)
    v = aw * bv + bw * av + jp.cross(av, bv)
    return jp.concatenate([w, v], axis=-1)


def _joint_tables(m: Model):
    """Static index tables: (linear qpos, linear dof, quaternion qpos (k, 4), rotation dofs (k, 3))."""
    jtype = np.asarray(m.jnt_type)
    qadr = np.asarray(m.jnt_qposadr)
    vadr = np.asarray(m.jnt_dofadr)
    lin_q, lin_v, rot_q, rot_v = [], [], [], []
    for j in range(m.njnt):
        if jtype[j] in (JointType.HINGE, JointType.SLIDE):
            lin_q.append([qadr[j]])
            lin_v.append([vadr[j]])
        elif jtype[j] == JointType.FREE:
            lin_q.append(qadr[j] + np.arange(3))
            lin_v.append(vadr[j] + np.arange(3))
            rot_q.append(qadr[j] + 3 + np.arange(4))
            rot_v.append(vadr[j] + 3 + np.arange(3))
        else:  # ball
            rot_q.append(qadr[j] + np.arange(4))
            rot_v.append(vadr[j] + np.arange(3))
    cat = lambda xs, w: np.concatenate(xs).astype(int) if xs else np.zeros(0, int)  # noqa: E731
    stack = lambda xs, w: np.stack(xs).astype(int) if xs else np.zeros((0, w), int)  # noqa: E731
    return cat(lin_q, 1), cat(lin_v, 1), stack(rot_q, 4), stack(rot_v, 3)


def differentiate_pos(m: Model, qpos1: jax.Array, qpos2: jax.Array, h: float | jax.Array = 1.0) -> jax.Array:
    """Velocity that takes qpos1 to qpos2 in time h (mj_differentiatePos), (nv,).

    `integrate_pos(m, qpos1, differentiate_pos(m, qpos1, qpos2, h), h) == qpos2`; rotations are expressed in the
    local frame of qpos1 (ball and free joints), with a derivative that is finite and exact at qpos1 == qpos2.
    """
    lin_q, lin_v, rot_q, rot_v = _joint_tables(m)
    out = jp.zeros((m.nv,), jp.result_type(qpos1, qpos2))
    if lin_q.size:
        out = out.at[lin_v].set(qpos2[lin_q] - qpos1[lin_q])
    if rot_q.size:
        q1, q2 = qpos1[rot_q], qpos2[rot_q]
        q1 = q1 / jp.linalg.norm(q1, axis=-1, keepdims=True)
        q2 = q2 / jp.linalg.norm(q2, axis=-1, keepdims=True)
        conj = q1 * jp.asarray([1.0, -1.0, -1.0, -1.0], q1.dtype)
        out = out.at[rot_v].set(_quat_log(_quat_mul(conj, q2)))
    return out / h


# ---- the step, with the configured gradient ------------------------------------------------------------------


def step(m: Model, d: Data) -> Data:
    """`mjx_lite.step` with the derivative chosen by `m.config.contact_gradients`.

    "exact" (default): the exact derivative. "smooth": the same value, with the randomised-smoothing derivative
    of `smooth_step`. `mjx_lite.step` consults the configuration itself, so this is that function under the name
    the planners use.
    """
    return _pipeline.step(m, d)


def smooth_step(m: Model, d: Data) -> Data:
    """One step whose value is exact and whose reverse-mode derivative is randomly smoothed (see
    `mjx_lite.pipeline.smoothing.smooth_step`)."""
    return _smoothing.smooth_step(_pipeline.step, m, d)


# ---- Jacobians ---------------------------------------------------------------------------------------------------


def forward_mode(m: Model) -> bool:
    """Whether forward-mode autodiff (`jax.jvp`, `jax.jacfwd`) goes through `step` for this model.

    It does not where the constraint solver runs with its implicit (reverse-only) gradient, i.e. a model with
    constraint rows under `Config(gradients="implicit")`, nor with `contact_gradients="smooth"` (reverse only).
    """
    if m.config.contact_gradients != "exact":
        return False
    return m.njmax == 0 or m.config.gradients == "unrolled"


def jacobian(m: Model, f, argnums: int = 0, has_aux: bool = False):
    """`jax.jacfwd(f)` where `forward_mode(m)`, else `jax.jacrev(f)`: the Jacobian of a function that steps `m`."""
    jac = jax.jacfwd if forward_mode(m) else jax.jacrev
    return jac(f, argnums=argnums, has_aux=has_aux)


# ---- transition Jacobians ------------------------------------------------------------------------------------


@functools.partial(jit_when_eager, static_argnames=("sensors",))
def transition(m: Model, d: Data, sensors: bool = True):
    """Jacobians (A, B, C, D) of one step at the state of `d` in the layout and convention of mjd_transitionFD.

    Exact: forward-mode autodiff where the model allows it (`forward_mode`), else reverse mode through the
    implicit gradient of the constraint solver (or the smoothed derivative of `smooth_step`).

    Args:
      m: Model (its `config.contact_gradients` chooses exact or smoothed derivatives, see `step`).
      d: Data holding the state (qpos, qvel, act), ctrl, applied forces and qacc_warmstart; forward need not
        have run. Under `jax.vmap` over `d`, Jacobians for a batch of states.
      sensors: also return C and D (else None for both).

    Called on concrete arrays it runs jitted (compiled once per model and Data shapes); inside a transformation it
    traces inline.

    Returns:
      A: (2nv+na, 2nv+na), B: (2nv+na, nu), C: (nsensordata, 2nv+na), D: (nsensordata, nu), in the dtype of
      d.qpos. State rows/columns are (dq, qvel, act) with dq in the tangent space (see the module docstring).
    """
    nv, na, nu = m.nv, m.na, m.nu
    dtype = d.qvel.dtype

    def f(z):
        dq, dv, da, du = jp.split(z, np.cumsum([nv, nv, na]))
        di = d.replace(qpos=integrate_pos(m, d.qpos, dq, 1.0), qvel=d.qvel + dv, act=d.act + da, ctrl=d.ctrl + du)
        dn = step(m, di)
        q_next = differentiate_pos(m, jax.lax.stop_gradient(dn.qpos), dn.qpos)
        x_next = jp.concatenate([q_next, dn.qvel, dn.act])
        if sensors:
            return jp.concatenate([x_next, dn.sensordata])
        return x_next

    z0 = jp.zeros((2 * nv + na + nu,), dtype)
    jac = jacobian(m, f)(z0)
    nx = 2 * nv + na
    A, B = jac[:nx, :nx], jac[:nx, nx:]
    if not sensors:
        return A, B, None, None
    return A, B, jac[nx:, :nx], jac[nx:, nx:]
