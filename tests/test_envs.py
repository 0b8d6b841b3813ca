"""mjx_lite.envs: the Env/State contract, the training wrapper, domain randomisation, tolerance, gymnasium adapters.

Wrapper and adapter semantics are tested on a tiny user subclass (tests/rl_envs.Slider: one slide joint, Euler) so
that compilation stays short; the bundled tasks are checked by tracing (shapes, dtypes, metric keys).
"""

import gc

import dm_control.utils.rewards as dm_rewards
import jax
import jax.numpy as jp
import numpy as np
import pytest

from mjx_lite import envs
from tests.rl_envs import LIMIT, Slider

# jit vs eager and vmap vs a loop run the same float64 operations; XLA may fuse/reorder them differently
SAME_PROGRAM_RTOL = 1e-12
# tolerance(): our JAX implementation vs dm_control's numpy one, float64, same formulas
TOLERANCE_ATOL = 1e-12

B = 4  # environments in the wrapper tests
REPEAT = 2  # action_repeat of the wrapper tests
EPISODE = 4 * REPEAT  # environment steps per episode: 4 calls of step


@pytest.fixture(scope="module")
def slider():
    return Slider()


@pytest.fixture(scope="module")
def fns(slider):
    """Jitted functions shared by the tests (and by the gymnasium adapters): the library's jit_reset / jit_step."""

    def env_vstep(s, a):  # a loop over environments of the single-environment step
        rows = [slider.jit_step(_row(s, i), a[i]) for i in range(a.shape[0])]
        return jax.tree.map(lambda *x: np.stack(x), *rows)

    return {
        "reset": lambda te, k: te.jit_reset(k),
        "step": lambda te, s, a: te.jit_step(s, a),
        "env_reset": slider.jit_reset,
        "env_step": lambda s, a, model=None: (slider if model is None else slider.with_model(model)).jit_step(s, a),
        "env_vstep": env_vstep,
    }


@pytest.fixture(scope="module")
def train_env(slider):
    return envs.wrap_for_training(slider, episode_length=EPISODE, action_repeat=REPEAT)


def _inner(state):
    """The env's own part of a wrapper state (without the wrapper's info)."""
    return state.replace(info={"hits": state.info["hits"]})


def _keys(seed=0, n=B):
    return jax.random.split(jax.random.PRNGKey(seed), n)


def _row(tree, i):
    return jax.tree.map(lambda x: np.asarray(x)[i], tree)  # numpy indexing: no per-shape slicing kernels


def _assert_tree_close(a, b, rtol=SAME_PROGRAM_RTOL):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_allclose(np.asarray(x, float), np.asarray(y, float), rtol=rtol, atol=1e-300)


# ---- the bundled tasks: contract by tracing --------------------------------------------------------------------


# tasks whose tracing alone takes 12-40 s on the loaded 2-core CPU (a collision-free reset over several candidate
# poses, elliptic-cone solvers): slow; test_envs_suite.py compares their rewards and observations with dm_control's
SLOW_CONTRACT = ("finger_spin", "finger_turn_easy", "finger_turn_hard", "humanoid_stand", "humanoid_walk",
                 "humanoid_run", "manipulator_bring_ball")


# variants built by the same class with another value of a parameter that takes the same code path (tracing the same
# reset, step and observation again): slow; the default selection keeps walker_stand (move_speed 0) and walker_walk
# (a move speed), reacher_easy (a target size), cartpole_balance (swing_up False, smooth) and
# cartpole_swingup_sparse (swing_up True, sparse): each branch of those parameters stays traced by default;
# acrobot_swingup_sparse traces acrobot_swingup's reset and step (its sparse reward is compared with dm_control's by
# default: test_envs_suite.py::test_reward_and_observation_equal_dm_control[acrobot_swingup_sparse])
SLOW_VARIANT = ("walker_run", "reacher_hard", "cartpole_swingup", "cartpole_balance_sparse", "acrobot_swingup_sparse")


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n in SLOW_CONTRACT + SLOW_VARIANT else n
                                  for n in envs.names()])  # fmt: skip
def test_task_contract(name):
    env = envs.make(name)
    assert env.name == name and env.dt > 0
    s0 = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    s1 = jax.eval_shape(env.step, s0, jax.ShapeDtypeStruct((env.action_size,), jp.float64))
    f = jp.float64  # tests run with jax_enable_x64: the model's floats are float64
    for s in (s0, s1):
        assert s.obs.shape == (env.observation_size,) and s.obs.dtype == f
        assert s.reward.shape == () and s.reward.dtype == f
        assert s.done.shape == () and s.done.dtype == f
        assert all(v.shape == () for v in s.metrics.values())
    assert set(s0.metrics) == set(s1.metrics) and jax.tree.structure(s0.info) == jax.tree.structure(s1.info)
    assert env.action_size == env.model.nu
    randomized = jax.eval_shape(env.randomizer(), env.model, jax.random.PRNGKey(0))  # the task's hook: valid fields
    assert jax.tree.structure(randomized) == jax.tree.structure(env.model)


def test_unknown_task_lists_registered():
    with pytest.raises(ValueError, match="unknown task 'cartpole'.*cartpole_balance, cartpole_balance_sparse"):
        envs.make("cartpole")


def test_bad_action_shapes_are_trace_time_errors(slider, train_env):
    env = envs.make("cartpole_balance")
    s = jax.eval_shape(env.reset, jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"action must have shape \(1,\).*got \(2,\)"):
        jax.eval_shape(env.step, s, jax.ShapeDtypeStruct((2,), jp.float64))
    with pytest.raises(ValueError, match="a batch"):
        jax.eval_shape(env.step, s, jax.ShapeDtypeStruct((8, 1), jp.float64))
    with pytest.raises(TypeError, match="float"):
        jax.eval_shape(slider.step, jax.eval_shape(slider.reset, jax.random.PRNGKey(0)), jp.zeros(1, jp.int32))
    ts = jax.eval_shape(train_env.reset, _keys())
    with pytest.raises(ValueError, match=r"\(num_envs, action_size\) = \(4, 1\), got \(4, 2\)"):
        jax.eval_shape(train_env.step, ts, jax.ShapeDtypeStruct((B, 2), jp.float64))
    with pytest.raises(ValueError, match="one PRNG key per environment"):
        train_env.reset(jax.random.PRNGKey(0))


# ---- Env contract on the small env ------------------------------------------------------------------------------


def test_jit_equals_eager(slider, fns):
    a = jp.array([0.7])
    s0 = fns["env_reset"](jax.random.PRNGKey(3))
    s_eager = slider.step(s0, a)  # op by op (one step: eager dispatch of the whole pipeline is slow)
    s_jit = fns["env_step"](s0, a)
    _assert_tree_close(s_jit, s_eager)
    assert float(s_jit.data.qvel[0]) > 0  # it moved


def test_vmap_equals_loop(slider, train_env, fns):
    """The wrapper's vmapped step equals the single-environment step looped over the batch."""
    states = fns["reset"](train_env, _keys(1))
    actions = jp.array([[-1.0], [0.2], [0.9], [0.0]])
    batched = fns["step"](train_env, states, actions)
    assert not np.any(np.asarray(batched.done))
    inner = _inner(states)
    for i in range(B):
        one, reward = _row(inner, i), 0.0
        for _ in range(REPEAT):
            one = slider.jit_step(one, actions[i])
            reward = reward + one.reward
        _assert_tree_close((_row(batched.data, i), batched.obs[i], batched.reward[i]), (one.data, one.obs, reward))


def test_ctrl_mapping_onto_ctrlrange():
    env = envs.make("pendulum_swingup_shaped")  # ctrlrange -2..2
    np.testing.assert_allclose(env.ctrl_from_action(jp.array([-1.0])), [-2.0])
    np.testing.assert_allclose(env.ctrl_from_action(jp.array([0.25])), [0.5])
    np.testing.assert_allclose(env.ctrl_from_action(jp.array([3.0])), [2.0])  # clipped to [-1, 1] first


# ---- the training wrapper ---------------------------------------------------------------------------------------


def test_reset_batch_and_info(train_env, fns, slider):
    s = fns["reset"](train_env, _keys())
    assert s.obs.shape == (B, slider.observation_size) and s.done.shape == (B,)
    assert set(envs.WRAPPER_INFO) <= set(s.info) and "hits" in s.info  # the env's own info is kept
    assert np.all(np.asarray(s.done) == 0) and np.all(np.asarray(s.info["steps"]) == 0)
    assert len({tuple(np.asarray(k)) for k in s.info["rng"]}) == B  # one key per environment
    assert len(set(np.asarray(s.obs[:, 0]).round(12))) == B  # distinct initial states


def test_autoreset_resets_only_finished_envs(train_env, fns, slider):
    s0 = fns["reset"](train_env, _keys())
    # environment 0 is about to leave the rail: it terminates this step
    s0 = s0.replace(data=s0.data.replace(qpos=s0.data.qpos.at[0, 0].set(LIMIT - 0.01),
                                         qvel=s0.data.qvel.at[0, 0].set(2.0)))  # fmt: skip
    a = jp.zeros((B, 1))
    s1 = fns["step"](train_env, s0, a)
    np.testing.assert_array_equal(s1.done, [1, 0, 0, 0])
    np.testing.assert_array_equal(s1.info["truncation"], [0, 0, 0, 0])
    np.testing.assert_array_equal(s1.info["episode_done"], [1, 0, 0, 0])
    # the others are exactly the unwrapped env's steps (action_repeat of them)
    plain, reward = _inner(s0), 0.0
    for _ in range(REPEAT):
        plain = fns["env_vstep"](plain, a)
        reward = reward + plain.reward
    for i in (1, 2, 3):
        _assert_tree_close((_row(s1.data, i), s1.obs[i], s1.reward[i]), (_row(plain.data, i), plain.obs[i], reward[i]))
    # the finished one restarts from a fresh state drawn with its own key; its last observation is kept
    reset_key = jax.random.split(s0.info["rng"][0])[1]
    fresh = fns["env_reset"](reset_key)
    _assert_tree_close((_row(s1.data, 0), s1.obs[0]), (fresh.data, fresh.obs))
    assert float(s1.info["final_obs"][0, 0]) > LIMIT and float(s1.obs[0, 0]) < LIMIT
    np.testing.assert_allclose(s1.info["final_obs"][1:], s1.obs[1:])
    assert int(s1.info["steps"][0]) == 0 and np.all(np.asarray(s1.info["steps"][1:]) == REPEAT)
    np.testing.assert_array_equal(s1.info["episode_metrics"]["length"], [REPEAT] * B)
    np.testing.assert_allclose(s1.info["episode_metrics"]["return"], s1.reward)


def test_truncation_vs_termination(train_env, fns):
    s = fns["reset"](train_env, _keys(5))
    a = jp.zeros((B, 1))
    returns = np.zeros(B)
    for _ in range(EPISODE // REPEAT - 1):
        s = fns["step"](train_env, s, a)
        returns += np.asarray(s.reward)
        assert np.all(np.asarray(s.done) == 0)
    # environment 2 terminates on the last step of the time limit: termination wins, no truncation flag
    s = s.replace(data=s.data.replace(qpos=s.data.qpos.at[2, 0].set(-LIMIT + 0.01),
                                      qvel=s.data.qvel.at[2, 0].set(-2.0)))  # fmt: skip
    s = fns["step"](train_env, s, a)
    returns += np.asarray(s.reward)
    np.testing.assert_array_equal(s.done, [1, 1, 1, 1])
    np.testing.assert_array_equal(s.info["truncation"], [1, 1, 0, 1])
    np.testing.assert_array_equal(s.info["episode_metrics"]["length"], [EPISODE] * B)
    np.testing.assert_allclose(s.info["episode_metrics"]["return"], returns, rtol=1e-12)
    np.testing.assert_array_equal(s.info["steps"], [0] * B)
    s = fns["step"](train_env, s, a)  # the sums restart with the new episode
    np.testing.assert_array_equal(s.info["episode_metrics"]["length"], [REPEAT] * B)
    np.testing.assert_allclose(s.info["episode_metrics"]["return"], s.reward)


def test_divergence_ends_the_episode(train_env, fns):
    s0 = fns["reset"](train_env, _keys(7))
    a = jp.full((B, 1), 0.3)
    ref = fns["step"](train_env, s0, a)
    bad = s0.replace(data=s0.data.replace(qvel=s0.data.qvel.at[2, 0].set(1e11)))  # mju_isBad: |qvel| > 1e10
    s1 = fns["step"](train_env, bad, a)
    np.testing.assert_array_equal(s1.done, [0, 0, 1, 0])
    np.testing.assert_array_equal(s1.info["diverged"], [0, 0, 1, 0])
    np.testing.assert_array_equal(s1.info["truncation"], [0, 0, 0, 0])
    assert float(s1.reward[2]) == 0.0
    assert int(s1.info["final_obs"].shape[0]) == B and np.all(np.isfinite(np.asarray(s1.obs)))
    for i in (0, 1, 3):
        _assert_tree_close((_row(s1.data, i), s1.reward[i]), (_row(ref.data, i), ref.reward[i]), rtol=0)


def test_nan_actions_flagged_and_reset_per_env(train_env, fns):
    s0 = fns["reset"](train_env, _keys(9))
    a = jp.array([[0.5], [jp.nan], [-0.5], [jp.inf]])
    s1 = fns["step"](train_env, s0, a)
    np.testing.assert_array_equal(s1.info["nan_action"], [0, 1, 0, 1])
    np.testing.assert_array_equal(s1.done, [0, 1, 0, 1])
    np.testing.assert_array_equal(np.asarray(s1.reward)[[1, 3]], [0, 0])
    assert np.all(np.isfinite(np.asarray(s1.obs))) and np.all(np.isfinite(np.asarray(s1.data.qpos)))
    ref = fns["step"](train_env, s0, a.at[1].set(0.0).at[3].set(0.0))
    for i in (0, 2):
        _assert_tree_close((_row(s1.data, i), s1.obs[i], s1.reward[i]), (_row(ref.data, i), ref.obs[i],
                                                                           ref.reward[i]), rtol=0)  # fmt: skip


def test_action_repeat_sums_rewards(slider, train_env, fns):
    assert train_env.dt == pytest.approx(REPEAT * slider.dt)
    s0 = fns["reset"](train_env, _keys(2))
    a = jp.full((B, 1), 0.4)
    s1 = fns["step"](train_env, s0, a)
    inner = _inner(s0)
    total = 0.0
    for _ in range(REPEAT):
        inner = fns["env_vstep"](inner, a)
        total = total + inner.reward
    np.testing.assert_allclose(s1.reward, total, rtol=SAME_PROGRAM_RTOL)
    _assert_tree_close(s1.data.qpos, inner.data.qpos)
    np.testing.assert_array_equal(s1.info["steps"], [REPEAT] * B)


# ---- domain randomisation ---------------------------------------------------------------------------------------


def test_domain_randomisation_per_env_without_retrace(slider, fns):
    rand = envs.scale_randomizer({"body_mass": (0.5, 2.0), "dof_damping": (0.2, 3.0), "actuator_gear": (0.5, 1.5)})
    te_a = envs.wrap_for_training(slider, episode_length=EPISODE, action_repeat=REPEAT, randomize=rand, num_envs=B,
                                  rng=jax.random.PRNGKey(1))  # fmt: skip
    te_b = envs.wrap_for_training(slider, episode_length=EPISODE, action_repeat=REPEAT, randomize=rand, num_envs=B,
                                  rng=jax.random.PRNGKey(2))  # fmt: skip
    assert sorted(te_a.randomized_fields()) == ["actuator_gear", "body_mass", "dof_damping"]
    masses = np.asarray(te_a.model.body_mass[:, 1])
    assert te_a.model.body_mass.shape == (B, slider.model.nbody) and len(set(masses.round(12))) == B
    assert te_a.model.qpos0.shape == slider.model.qpos0.shape  # untouched fields stay shared
    traces = []

    @jax.jit
    def step(te, s, a):
        traces.append(1)
        return te.step(s, a)

    s0 = te_a.jit_reset(_keys(4))
    a = jp.ones((B, 1))
    out_a = step(te_a, s0, a)
    out_b = step(te_b, s0, a)
    assert len(traces) == 1  # a re-randomised model reuses the compiled step
    va, vb = np.asarray(out_a.data.qvel[:, 0]), np.asarray(out_b.data.qvel[:, 0])
    assert len(set(va.round(12))) == B and not np.allclose(va, vb)
    inner = _inner(s0)
    for i in range(B):
        ref = _row(inner, i)
        for _ in range(REPEAT):
            ref = fns["env_step"](ref, a[i], model=te_a.env_model(i))
        np.testing.assert_allclose(out_a.data.qvel[i], ref.data.qvel, rtol=SAME_PROGRAM_RTOL)
    with pytest.raises(ValueError, match="num_envs"):
        envs.wrap_for_training(slider, randomize=rand)
    with pytest.raises(ValueError, match="batch of 3 environments"):
        te_a.reset(_keys(0, 3))


def test_scale_randomizer_validates_fields(slider):
    with pytest.raises(ValueError, match="unknown float field 'body_masses'"):
        envs.scale_randomizer({"body_masses": (0.9, 1.1)})
    with pytest.raises(ValueError, match="static"):
        envs.scale_randomizer({"jnt_type": (0.9, 1.1)})
    with pytest.raises(ValueError, match="lo <= hi"):
        envs.scale_randomizer({"body_mass": (1.1, 0.9)})
    assert "opt.gravity" in envs.randomizable_fields() and "geom_friction" in envs.randomizable_fields()
    m = envs.scale_randomizer({"opt.gravity": (2.0, 2.0), "geom_friction": (0.5, 0.5)})(slider.model,
                                                                                       jax.random.PRNGKey(0))
    np.testing.assert_allclose(m.opt.gravity, 2 * np.asarray(slider.model.opt.gravity))
    np.testing.assert_allclose(m.geom_friction, 0.5 * np.asarray(slider.model.geom_friction))
    with pytest.raises(ValueError, match="same static structure"):
        envs.wrap_for_training(slider, randomize=lambda m, k: m.replace(jnt_type=np.array([3], np.int32)),
                               num_envs=2)  # fmt: skip


# ---- tolerance ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("sigmoid", envs.rewards.SIGMOIDS)
def test_tolerance_matches_dm_control(sigmoid):
    x = np.linspace(-3.0, 3.0, 241)
    values = (0.1, 0.0) if sigmoid in ("cosine", "linear", "quadratic") else (0.1, 0.7)
    for bounds in ((-0.5, 1.0), (0.0, 0.0), (0.2, np.inf)):
        for margin in (0.0, 0.7, 2.0):
            for v in values:
                ours = envs.tolerance(jp.asarray(x), bounds=bounds, margin=margin, sigmoid=sigmoid, value_at_margin=v)
                ref = dm_rewards.tolerance(x, bounds=bounds, margin=margin, sigmoid=sigmoid, value_at_margin=v)
                np.testing.assert_allclose(ours, ref, atol=TOLERANCE_ATOL, rtol=0)


def test_tolerance_gradient_finite_with_infinite_bounds():
    g = jax.grad(lambda x: envs.tolerance(x, bounds=(1.0, np.inf), margin=1.0, sigmoid="gaussian"))
    for x in (0.0, 0.5, 2.0):
        assert np.isfinite(float(g(x)))
    assert float(g(0.5)) > 0 and float(g(2.0)) == 0
    with pytest.raises(ValueError, match="value_at_margin"):
        envs.tolerance(0.0, margin=1.0, sigmoid="gaussian", value_at_margin=0.0)
    with pytest.raises(ValueError, match="unknown sigmoid"):
        envs.tolerance(0.0, margin=1.0, sigmoid="logistic")


# ---- gymnasium ----------------------------------------------------------------------------------------------------


def test_gymnasium_single_env_passes_check_env(slider):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.utils.env_checker import check_env

    env = envs.to_gymnasium_env(slider, episode_length=EPISODE, action_repeat=REPEAT)
    assert isinstance(env, gymnasium.Env)
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=0)
    done, n = False, 0
    while not done:
        obs, r, term, trunc, info = env.step(np.ones(1, np.float32))
        done, n = term or trunc, n + 1
    assert trunc and not term and n == EPISODE // REPEAT and isinstance(r, float)
    assert info["episode_length"] == EPISODE
    obs, _ = env.reset(seed=0)
    d = env.state.data
    env.state = env.state.replace(data=d.replace(qpos=d.qpos.at[0].set(LIMIT - 0.01), qvel=d.qvel.at[0].set(2.0)))
    obs, r, term, trunc, info = env.step(np.ones(1, np.float32))
    assert term and not trunc and obs[0] > LIMIT  # pushed off the rail: terminated, the final observation shown


def test_gymnasium_vector_env(slider):
    gymnasium = pytest.importorskip("gymnasium")
    from gymnasium.vector.utils import batch_space

    vec = envs.to_gymnasium(slider, num_envs=B, episode_length=EPISODE, action_repeat=REPEAT)
    assert isinstance(vec, gymnasium.vector.VectorEnv) and vec.num_envs == B
    assert vec.observation_space == batch_space(vec.single_observation_space, B)
    assert vec.action_space == batch_space(vec.single_action_space, B)
    assert vec.metadata["autoreset_mode"] == gymnasium.vector.AutoresetMode.SAME_STEP
    o1, _ = vec.reset(seed=0)
    o2, _ = vec.reset(seed=0)
    o3, _ = vec.reset(seed=1)
    np.testing.assert_array_equal(o1, o2)
    assert not np.array_equal(o1, o3) and o1 in vec.observation_space and o1.dtype == np.float32
    vec.reset(seed=0)
    vec.action_space.seed(0)
    for _ in range(EPISODE // REPEAT):
        obs, rew, term, trunc, info = vec.step(vec.action_space.sample())
        assert obs.shape == (B, 3) and obs.dtype == np.float32 and obs in vec.observation_space
        assert rew.shape == (B,) and term.dtype == bool and trunc.dtype == bool
    assert np.all(trunc) and not np.any(term) and np.all(info["_final_obs"])
    assert not np.allclose(info["final_obs"], obs)  # the next episodes started in the same step
    np.testing.assert_array_equal(info["episode_length"], [EPISODE] * B)
    obs, rew, term, trunc, info = vec.step(np.array([[0.0], [np.nan], [0.0], [0.0]], np.float32))
    np.testing.assert_array_equal(term, [False, True, False, False])
    np.testing.assert_array_equal(info["nan_action"], [False, True, False, False])
    with pytest.raises(ValueError, match="actions must have shape"):
        vec.step(np.zeros((2, 1), np.float32))


@pytest.fixture
def _release_programs():
    """Drop the compiled programs after each task: every task compiles its own reset and step, and one module of
    them all outgrew a worker's memory mappings (an xdist worker died in XLA's compile here; see conftest's
    `_release_compiled_programs`)."""
    yield
    jax.clear_caches()
    gc.collect()


@pytest.mark.slow
@pytest.mark.parametrize("name", envs.names())
def test_task_rolls_out(name, _release_programs):
    """Random actions for 40 control steps on 4 environments: finite observations, rewards in [0, 1], no divergence."""
    env = envs.make(name)
    te = envs.wrap_for_training(env, episode_length=1000)
    s = te.jit_reset(_keys(0))
    key = jax.random.PRNGKey(1)
    diverged = 0.0
    for _ in range(40):
        key, k = jax.random.split(key)
        s = te.jit_step(s, jax.random.uniform(k, (B, env.action_size), minval=-1, maxval=1))
        assert np.all(np.isfinite(np.asarray(s.obs)))
        assert np.all((np.asarray(s.reward) >= 0) & (np.asarray(s.reward) <= 1))
        diverged += float(np.sum(s.info["diverged"]))
    assert diverged == 0
