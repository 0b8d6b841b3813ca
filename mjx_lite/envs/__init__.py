"""Environments for reinforcement learning on mjx_lite: tasks, a training wrapper, domain randomisation.

    from mjx_lite import envs
    envs.names()                                    # registered task names
    env = envs.make("cartpole_balance")             # -> envs.Env
    state = env.reset(jax.random.PRNGKey(0))        # envs.State (data, obs, reward, done, metrics, info)
    state = env.step(state, action)                 # pure, jit/vmap-able; action in [-1, 1]^action_size
    train_env = envs.wrap_for_training(env, episode_length=1000, action_repeat=1, randomize=None)

See docs/rl.md for the tasks (observations and rewards), the wrapper's semantics and subclassing `Env`.
"""

from mjx_lite.envs.base import DIVERGENCE_WARNINGS, Env, State, diverged
from mjx_lite.envs.cartpole import CartPole
from mjx_lite.envs.gymnasium_adapter import to_gymnasium, to_gymnasium_env
from mjx_lite.envs.hopper import Hopper
from mjx_lite.envs.humanoid import HumanoidStand
from mjx_lite.envs.pendulum import PendulumSwingup
from mjx_lite.envs.quadruped import QuadrupedRun
from mjx_lite.envs.randomize import randomizable_fields, scale_randomizer
from mjx_lite.envs.reacher import Reacher
from mjx_lite.envs.registry import make, names, register
from mjx_lite.envs.rewards import tolerance
from mjx_lite.envs.wrappers import WRAPPER_INFO, TrainingEnv, wrap_for_training

__all__ = [
    "DIVERGENCE_WARNINGS",
    "WRAPPER_INFO",
    "CartPole",
    "Env",
    "Hopper",
    "HumanoidStand",
    "PendulumSwingup",
    "QuadrupedRun",
    "Reacher",
    "State",
    "TrainingEnv",
    "diverged",
    "make",
    "names",
    "randomizable_fields",
    "register",
    "scale_randomizer",
    "to_gymnasium",
    "to_gymnasium_env",
    "tolerance",
    "wrap_for_training",
]

register("cartpole_balance", lambda **kw: CartPole(swing_up=False, **kw))
register("cartpole_swingup", lambda **kw: CartPole(swing_up=True, **kw))
register("pendulum_swingup", PendulumSwingup)
register("reacher", Reacher)
register("hopper", Hopper)
register("quadruped_run", QuadrupedRun)
register("humanoid_stand", HumanoidStand)
