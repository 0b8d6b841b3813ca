"""The locomotion and manipulation tasks on bundled models (quadruped_joystick, quadruped_getup, humanoid_joystick,
push_box) and their velocity commands (mjx_lite.envs.commands).

Not slow (no physics compiled): command sampling and resampling; the reset distributions (the sampled start poses,
before the forward pass); every reward term against a hand computation (numpy, and dm_control's own `tolerance`)
on Data whose fields are set to random values. Slow: batched rollouts that check the same terms on simulated
states, command resampling inside `step`, the observation layout, and the `pusher` model against MuJoCo C.
The registry-wide contract (shapes, dtypes, metrics, the randomizer hook) is tests/test_envs.py::test_task_contract.
"""

import dm_control.utils.rewards as dm_rewards
import jax
import jax.numpy as jp
import mujoco
import numpy as np
import pytest

import mjx_lite as mjl
from mjx_lite import envs, names
from mjx_lite.envs import commands, push_box, quadruped_joystick
from mjx_lite.rl import configs, ppo

# the task computes the same float64 formulas as the hand computation (different operation order)
TERM_RTOL = 1e-10
TERM_ATOL = 1e-12
N_DRAWS = 512  # draws of a distribution test
# pusher, mjx_lite vs MuJoCo C: 100 steps of 5 ms with a tip-box contact and frictionloss rows (both solve the same
# constraint problem; the solver iterations differ in rounding, amplified by the contact)
PUSHER_QPOS_ATOL = 1e-5


def _hand_tol(x, bounds, margin, sigmoid="gaussian", value_at_margin=0.1):
    return dm_rewards.tolerance(np.asarray(x, float), bounds=bounds, margin=margin, sigmoid=sigmoid,
                                value_at_margin=value_at_margin)  # fmt: skip


def _random_rotation(rng):
    q = rng.normal(size=4)
    q /= np.linalg.norm(q)
    mat = np.zeros(9)
    mujoco.mju_quat2Mat(mat, q)
    return mat.reshape(3, 3)


def _random_data(m, rng, **fields):
    """make_data with the named fields replaced (random values: the terms are formulas of these fields)."""
    d = mjl.make_data(m)
    return d.replace(**{k: jp.asarray(v, d.qpos.dtype) for k, v in fields.items()})


# ---- commands ---------------------------------------------------------------------------------------------------

RANGES = ((-0.5, 1.0), (-0.2, 0.2), (-1.0, 1.0))


def test_command_sampling_ranges_and_zero_probability():
    keys = jax.random.split(jax.random.PRNGKey(0), N_DRAWS)
    cmd = np.asarray(jax.vmap(lambda k: commands.sample(k, RANGES, 0.25, jp.float64))(keys))
    zero = np.all(cmd == 0, axis=1)
    # a binomial(512, 0.25) count: mean 128, std 9.8; 5 std either side
    assert 128 - 49 <= zero.sum() <= 128 + 49
    nz = cmd[~zero]
    for i, (lo, hi) in enumerate(RANGES):
        assert np.all((nz[:, i] >= lo) & (nz[:, i] <= hi))
        assert nz[:, i].min() < lo + 0.1 * (hi - lo) and nz[:, i].max() > hi - 0.1 * (hi - lo)  # spans the range
    assert np.all(np.asarray(jax.vmap(lambda k: commands.sample(k, RANGES, 0.0, jp.float64))(keys)) != 0)


def test_command_resampled_every_n_steps_only():
    n = 3
    info = commands.initial(jax.random.PRNGKey(1), RANGES, 0.0, jp.float64)
    info["other"] = jp.ones(2)
    advance = jax.jit(lambda i: commands.advance(i, RANGES, 0.0, n))
    seen = [np.asarray(info["command"])]
    for step in range(1, 2 * n + 1):
        before = info
        info = advance(info)
        assert int(info["command_steps"]) == step % n
        changed = not np.array_equal(np.asarray(info["command"]), np.asarray(before["command"]))
        assert changed == (step % n == 0), step
        np.testing.assert_array_equal(info["other"], 1.0)
        if changed:
            seen.append(np.asarray(info["command"]))
    assert len({tuple(c) for c in seen}) == 3
    again = commands.initial(jax.random.PRNGKey(1), RANGES, 0.0, jp.float64)  # reproducible from the key
    for _ in range(2 * n):
        again = advance(again)
    np.testing.assert_array_equal(again["command"], info["command"])


# ---- reward terms against hand computations (random field values, no physics) ----------------------------------


def test_quadruped_joystick_reward_by_hand():
    env = envs.make("quadruped_joystick")
    m = env.model
    terms = jax.jit(env._joystick_terms)
    rng = np.random.default_rng(0)
    for _ in range(4):
        sd = rng.normal(size=m.nsensordata) * 0.5
        sd[6:9] /= np.linalg.norm(sd[6:9])  # the up axis is a unit vector
        d = _random_data(m, rng, sensordata=sd)
        info = {"command": jp.asarray(rng.uniform(-1, 1, 3)), "last_action": jp.asarray(rng.uniform(-1, 1, 8))}
        action = rng.uniform(-1, 1, 8)
        t = terms(d, jp.asarray(action), info)
        v = sd[names.sensor_slice(m, "torso_vel")]
        w = sd[names.sensor_slice(m, "torso_gyro")]
        up_z = sd[names.sensor_slice(m, "torso_up")][2]
        c, a0 = np.asarray(info["command"]), np.asarray(info["last_action"])
        lin = np.exp(-np.sum((c[:2] - v[:2]) ** 2) / 0.25)
        yaw = np.exp(-((c[2] - w[2]) ** 2) / 0.25)
        smooth = np.exp(-(0.5 * np.mean((action - a0) ** 2) + v[2] ** 2))
        want = (1 + up_z) / 2 * (0.6 * lin + 0.4 * yaw) * (1 - 0.2 * (1 - smooth))
        np.testing.assert_allclose(float(env.reward(t)), want, rtol=TERM_RTOL, atol=TERM_ATOL)
        assert 0 <= want <= 1


def test_quadruped_getup_reward_by_hand():
    env = envs.make("quadruped_getup")
    m = env.model
    terms = jax.jit(env._getup_terms)
    rng = np.random.default_rng(1)
    torso = names.body_id(m, "torso")
    for _ in range(4):
        sd = rng.normal(size=m.nsensordata)
        sd[6:9] /= np.linalg.norm(sd[6:9])
        xpos = rng.uniform(0, 0.6, (m.nbody, 3))
        qpos = np.asarray(m.qpos0) + np.r_[np.zeros(7), rng.normal(size=8) * 0.6]
        d = _random_data(m, rng, sensordata=sd, xpos=xpos, qpos=qpos)
        t = terms(d)
        up_z = sd[names.sensor_slice(m, "torso_up")][2]
        rms = np.sqrt(np.mean((qpos[7:] - np.asarray(m.qpos0)[7:]) ** 2))
        upright = _hand_tol(up_z, (0.9, np.inf), 1.9, "linear", 0.0)
        height = _hand_tol(xpos[torso, 2], (0.4, np.inf), 0.4, "linear", 0.0)
        posture = _hand_tol(rms, (0, 0), 1.0)
        np.testing.assert_allclose([float(t[k]) for k in ("upright", "height", "posture")], [upright, height, posture],
                                   rtol=TERM_RTOL, atol=TERM_ATOL)  # fmt: skip


def test_humanoid_joystick_reward_by_hand():
    env = envs.make("humanoid_joystick")
    m = env.model
    terms = jax.jit(env._joystick_terms)
    rng = np.random.default_rng(2)
    torso = names.body_id(m, "torso")
    for _ in range(4):
        sd = rng.normal(size=m.nsensordata)
        xmat = np.tile(np.eye(3), (m.nbody, 1, 1))
        xmat[torso] = _random_rotation(rng)
        site_xpos = rng.uniform(0.6, 1.8, (m.nsite, 3))
        d = _random_data(m, rng, sensordata=sd, xmat=xmat, site_xpos=site_xpos)
        cmd = rng.uniform(-1, 1, 2)
        action = rng.uniform(-1, 1, m.nu)
        t = terms(d, jp.asarray(action), {"command": jp.asarray(cmd)})
        # heading frame: the torso's x axis projected on the floor
        fwd = xmat[torso][:2, 0] / np.linalg.norm(xmat[torso][:2, 0])
        left = np.array([-fwd[1], fwd[0]])
        vcom = sd[names.sensor_slice(m, "com_vel")]
        vx, vy = fwd @ vcom[:2], left @ vcom[:2]
        wz = (xmat[torso] @ sd[names.sensor_slice(m, "torso_gyro")])[2]
        lin = np.exp(-((cmd[0] - vx) ** 2 + vy**2) / 0.25)
        yaw = np.exp(-((cmd[1] - wz) ** 2) / 0.25)
        head = site_xpos[names.site_id(m, "head"), 2]
        standing = _hand_tol(head, (1.4, np.inf), 0.35)
        upright = _hand_tol(sd[names.sensor_slice(m, "torso_up")][2], (0.9, np.inf), 1.9, "linear", 0.0)
        small_control = (4 + np.mean(_hand_tol(action, (0, 0), 1.0, "quadratic", 0.0))) / 5
        want = small_control * standing * upright * (2 * lin + yaw) / 3
        np.testing.assert_allclose([float(t["forward"]), float(t["yaw_rate"]), float(env.reward(t))], [vx, wz, want],
                                   rtol=TERM_RTOL, atol=TERM_ATOL)  # fmt: skip


def test_push_box_reward_by_hand():
    env = envs.make("push_box")
    m = env.model
    terms = jax.jit(env._terms)
    rng = np.random.default_rng(3)
    box, tip = names.body_id(m, "box"), names.site_id(m, "tip")
    for scale in (0.05, 0.2, 0.5):  # near (reach inside its bounds) to far
        xpos = rng.uniform(-scale, scale, (m.nbody, 3))
        site_xpos = rng.uniform(-scale, scale, (m.nsite, 3))
        d = _random_data(m, rng, xpos=xpos, site_xpos=site_xpos)
        target = rng.uniform(-scale, scale, 2)
        t = terms(d, jp.asarray(target))
        reach = _hand_tol(np.linalg.norm(xpos[box, :2] - site_xpos[tip, :2]), (0, 0.065), 0.2)
        push = _hand_tol(np.linalg.norm(target - xpos[box, :2]), (0, 0.02), 0.3)
        np.testing.assert_allclose([float(t["reach"]), float(t["push"])], [reach, push], rtol=TERM_RTOL,
                                   atol=TERM_ATOL)  # fmt: skip


# ---- reset distributions (the sampled start, before the forward pass) -------------------------------------------


def test_quadruped_getup_starts_fallen_at_random():
    env = envs.make("quadruped_getup")
    m = env.model
    qpos = np.asarray(jax.jit(jax.vmap(env.initial_qpos))(jax.random.split(jax.random.PRNGKey(0), N_DRAWS)))
    np.testing.assert_allclose(qpos[:, 2], quadruped_joystick.DROP_HEIGHT)
    np.testing.assert_allclose(np.linalg.norm(qpos[:, 3:7], axis=1), 1.0, rtol=1e-12)
    lo, hi = np.asarray(m.jnt_range[1:, 0]), np.asarray(m.jnt_range[1:, 1])
    assert np.all((qpos[:, 7:] >= lo) & (qpos[:, 7:] <= hi))
    # the torso's up axis (z row of the rotation) is uniform on [-1, 1] for a uniform rotation
    x, y = qpos[:, 4], qpos[:, 5]
    up_z = 1 - 2 * (x**2 + y**2)
    assert abs(up_z.mean()) < 0.1 and np.mean(up_z < 0) > 0.4 and np.mean(up_z < -0.5) > 0.15
    # no start in the floor: a foot's farthest reach from the torso centre (hip offset + leg + foot radius) and the
    # torso box's half diagonal are below the drop height
    assert quadruped_joystick.DROP_HEIGHT > max(np.hypot(0.25, 0.16) + 0.4 + 0.04, np.linalg.norm([0.3, 0.12, 0.05]))


def test_push_box_start_distribution():
    env = envs.make("push_box")
    m = env.model
    qpos, target = jax.jit(jax.vmap(env.initial_state))(jax.random.split(jax.random.PRNGKey(0), N_DRAWS))
    qpos, target = np.asarray(qpos), np.asarray(target)
    box = qpos[:, 3:5] + np.asarray(m.body_pos[names.body_id(m, "box"), :2])
    r_box, r_t = np.linalg.norm(box, axis=1), np.linalg.norm(target, axis=1)
    assert np.all((r_box >= 0.2) & (r_box <= 0.35)) and np.all((r_t >= 0.15) & (r_t <= 0.4))
    phi, phi_t = np.arctan2(box[:, 1], box[:, 0]), np.arctan2(target[:, 1], target[:, 0])
    assert np.all(np.abs(np.angle(np.exp(1j * (phi_t - phi)))) <= np.pi / 2 + 1e-9)
    assert np.all(np.abs(qpos[:, 5]) <= np.pi) and np.all(np.abs(qpos[:, 1:3]) <= 0.3)
    # the tip by planar forward kinematics (links 0.2, 0.18 and the tip 0.1 along the hand): clear of the box
    a1 = qpos[:, 0]
    a2, a3 = a1 + qpos[:, 1], a1 + qpos[:, 1] + qpos[:, 2]
    tip = np.stack([0.2 * np.cos(a1) + 0.18 * np.cos(a2) + 0.1 * np.cos(a3),
                    0.2 * np.sin(a1) + 0.18 * np.sin(a2) + 0.1 * np.sin(a3)], axis=1)  # fmt: skip
    assert np.linalg.norm(tip - box, axis=1).min() > push_box.REACH_RADIUS + 0.1
    # the reward at the start is small: the box is rarely on the target already
    assert np.mean(np.linalg.norm(target - box, axis=1) < push_box.TARGET_RADIUS) < 0.02


# ---- simulated (slow: each compiles a batched reset and step) --------------------------------------------------

B = 4


def _row(tree, b):
    return jax.tree.map(lambda x: x[b], tree)


def _rollout(env, n, seed=0):
    reset = jax.jit(jax.vmap(env.reset))
    step = jax.jit(jax.vmap(env.step))
    s = reset(jax.random.split(jax.random.PRNGKey(seed), B))
    key = jax.random.PRNGKey(seed + 1)
    out = [s]
    for _ in range(n):
        key, k = jax.random.split(key)
        s = step(s, jax.random.uniform(k, (B, env.action_size), jp.float64, -1, 1))
        out.append(s)
    return out


@pytest.mark.slow
def test_quadruped_joystick_rollout_resamples_and_rewards():
    env = quadruped_joystick.QuadrupedJoystick(resample_steps=3)
    states = _rollout(env, 7)
    for i, s in enumerate(states):
        obs = np.asarray(s.obs)
        assert np.all(np.isfinite(obs)) and np.all((np.asarray(s.reward) >= 0) & (np.asarray(s.reward) <= 1))
        np.testing.assert_array_equal(obs[:, 26:29], s.info["command"])
        np.testing.assert_array_equal(obs[:, 29:], s.info["last_action"])
        np.testing.assert_array_equal(s.info["command_steps"], i % 3)
        if i:
            changed = np.any(np.asarray(s.info["command"]) != np.asarray(states[i - 1].info["command"]), axis=1)
            assert np.all(changed == (i % 3 == 0))
            # the reward of step i from the state it returned and the command it was given (the previous info)
            for b in range(B):
                t = env._joystick_terms(_row(s.data, b), s.info["last_action"][b], _row(states[i - 1].info, b))
                np.testing.assert_allclose(float(env.reward(t)), float(s.reward[b]), rtol=TERM_RTOL, atol=TERM_ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["quadruped_getup", "humanoid_joystick", "push_box"])
def test_task_rollout_finite_and_bounded(name):
    env = envs.make(name)
    states = _rollout(env, 20)
    for s in states:
        assert np.all(np.isfinite(np.asarray(s.obs)))
        assert np.all((np.asarray(s.reward) >= 0) & (np.asarray(s.reward) <= 1))
    if name == "quadruped_getup":  # dropped: the torso falls from DROP_HEIGHT towards the floor
        assert np.all(np.asarray(states[-1].metrics["torso_z"]) < quadruped_joystick.DROP_HEIGHT - 0.2)
    if name == "humanoid_joystick":
        np.testing.assert_array_equal(np.asarray(states[-1].obs)[:, -2:], states[-1].info["command"])
    if name == "push_box":  # the target is the mocap body; the reward is the documented mix of the terms
        s = states[-1]
        np.testing.assert_allclose(np.asarray(s.data.mocap_pos)[:, 0, :2], s.info["target"])
        np.testing.assert_allclose(s.reward, (s.metrics["reach"] + 4 * s.metrics["push"]) / 5, rtol=TERM_RTOL)


@pytest.mark.slow
def test_pusher_model_matches_mujoco():
    """The bundled pusher arm pushing its box: 100 steps of mjx_lite against MuJoCo C from the same state."""
    mm = mujoco.MjModel.from_xml_path(mjl.models.path("pusher"))
    md = mujoco.MjData(mm)
    md.qpos[:] = [0.0, 0.0, 0.0, 0.15, 0.25, 0.3]  # the box in the tip's path as the shoulder turns
    md.ctrl[:] = [0.5, -0.2, 0.1]
    m = mjl.load_mjcf("pusher")
    d = mjl.make_data(m).replace(qpos=jp.asarray(md.qpos), ctrl=jp.asarray(md.ctrl))
    step = jax.jit(mjl.step)
    touched = False
    for _ in range(100):
        mujoco.mj_step(mm, md)
        d = step(m, d)
        touched |= md.ncon > 0
    assert touched
    np.testing.assert_allclose(np.asarray(d.qpos), md.qpos, atol=PUSHER_QPOS_ATOL)


def test_tasks_have_ppo_defaults():
    for name in ("quadruped_joystick", "quadruped_getup", "humanoid_joystick", "push_box"):
        cfg = configs.defaults(name, num_envs=256)
        assert name in configs.DEFAULTS and cfg["num_timesteps"] > 0
        ppo.PPOConfig(**{k: v for k, v in cfg.items() if k != "num_timesteps"})  # valid settings
