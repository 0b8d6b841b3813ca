"""mjx_lite.envs.brax_adapter: our tasks as brax.envs.Env, trained by Brax's own PPO (skipped without brax).

On the tiny Slider task (tests/rl_envs.py: one slide joint, Euler) so that the compilation stays short: the
adapter's reset and step equal our env's (same program, same state), and brax.training.agents.ppo.train runs a
few updates on it (slow), with our domain randomisation hook through Brax's randomisation wrapper.
"""

import functools

import jax
import numpy as np
import pytest

pytest.importorskip("brax")

from brax.training.agents.ppo import networks as brax_networks  # noqa: E402
from brax.training.agents.ppo import train as brax_ppo  # noqa: E402

from mjx_lite.envs import brax_adapter  # noqa: E402
from tests.rl_envs import Slider  # noqa: E402


@pytest.fixture(scope="module")
def slider():
    return Slider()


def test_reset_and_step_equal_ours(slider):
    benv = brax_adapter.to_brax(slider)
    assert (benv.observation_size, benv.action_size, benv.backend) == (slider.observation_size, 1, "mjx_lite")
    key = jax.random.PRNGKey(0)
    ours, theirs = slider.jit_reset(key), jax.jit(benv.reset)(key)
    action = np.array([0.7])
    ours, theirs = slider.jit_step(ours, action), jax.jit(benv.step)(theirs, action)
    for a, b in ((ours.obs, theirs.obs), (ours.reward, theirs.reward), (ours.data.qpos, theirs.pipeline_state.qpos)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert set(theirs.metrics) == set(ours.metrics) and set(theirs.info) == set(ours.info)
    with pytest.raises(TypeError, match="needs an mjx_lite envs.Env"):
        brax_adapter.to_brax("slider")


@pytest.mark.slow  # 77 s on the loaded 2-core CPU: Brax's PPO compiles its own update and evaluation
def test_brax_ppo_trains_a_few_updates(slider, monkeypatch):
    """Brax's PPO, unchanged, on the adapter: 2 evaluations of 4 environments, 2 minibatches of 4 unrolls of 5
    steps per update, domain randomisation of the block's mass and damping (our hook, Brax's wrapper)."""
    try:  # Brax 0.14 calls jax.device_put_replicated, removed in JAX 0.10 (brax_adapter.install_jax_shims)
        jax.device_put_replicated  # noqa: B018
    except AttributeError:
        monkeypatch.setattr(jax, "device_put_replicated", brax_adapter.device_put_replicated, raising=False)
    benv = brax_adapter.to_brax(slider)
    randomize = brax_adapter.randomization_fn(slider.randomizer({"body_mass": (0.5, 1.5), "dof_damping": (0.5, 2)}))
    evals = []
    network = functools.partial(brax_networks.make_ppo_networks, policy_hidden_layer_sizes=(8,),
                                value_hidden_layer_sizes=(8,))  # fmt: skip
    make_policy, params, metrics = brax_ppo.train(
        environment=benv, num_timesteps=320, episode_length=20, num_envs=4, batch_size=4, num_minibatches=2,
        unroll_length=5, num_updates_per_batch=1, num_evals=2, num_eval_envs=4, seed=0, network_factory=network,
        randomization_fn=randomize, progress_fn=lambda step, m: evals.append((step, m["eval/episode_reward"])),
    )  # fmt: skip
    assert len(evals) == 2 and evals[-1][0] >= 320, evals
    assert all(np.isfinite(float(r)) and 0 <= float(r) <= 20 for _, r in evals), evals
    policy = make_policy(params, deterministic=True)
    action, _ = policy(np.zeros(slider.observation_size, np.float32), jax.random.PRNGKey(0))
    assert action.shape == (1,) and np.all(np.abs(np.asarray(action)) <= 1)
