"""Environments for reinforcement learning on mjx_lite: tasks, a training wrapper, domain randomisation.

    from mjx_lite import envs
    envs.names()                                    # registered task names
    env = envs.make("cartpole_balance")             # -> envs.Env
    state = env.reset(jax.random.PRNGKey(0))        # envs.State (data, obs, reward, done, metrics, info)
    state = env.step(state, action)                 # pure, jit/vmap-able; action in [-1, 1]^action_size
    train_env = envs.wrap_for_training(env, episode_length=1000, action_repeat=1, randomize=None)

The DeepMind Control Suite tasks (acrobot, ball_in_cup, cheetah, point_mass, walker) simulate dm_control's own
model files (`mjx_lite.envs.suite`). See docs/rl.md for the tasks (observations and rewards), the wrapper's
semantics and subclassing `Env`.
"""

from mjx_lite.envs.acrobot import Acrobot
from mjx_lite.envs.ball_in_cup import BallInCup
from mjx_lite.envs.base import DIVERGENCE_WARNINGS, Env, State, diverged
from mjx_lite.envs.cartpole import CartPole
from mjx_lite.envs.cheetah import Cheetah
from mjx_lite.envs.gymnasium_adapter import to_gymnasium, to_gymnasium_env
from mjx_lite.envs.hopper import Hopper
from mjx_lite.envs.humanoid import HumanoidStand
from mjx_lite.envs.pendulum import PendulumSwingup
from mjx_lite.envs.point_mass import PointMass
from mjx_lite.envs.quadruped import QuadrupedRun
from mjx_lite.envs.randomize import randomizable_fields, scale_randomizer
from mjx_lite.envs.reacher import Reacher
from mjx_lite.envs.registry import make, names, register
from mjx_lite.envs.rewards import tolerance
from mjx_lite.envs.walker import Walker
from mjx_lite.envs.wrappers import WRAPPER_INFO, TrainingEnv, wrap_for_training

__all__ = [
    "DIVERGENCE_WARNINGS",
    "WRAPPER_INFO",
    "Acrobot",
    "BallInCup",
    "CartPole",
    "Cheetah",
    "Env",
    "Hopper",
    "HumanoidStand",
    "PendulumSwingup",
    "PointMass",
    "QuadrupedRun",
    "Reacher",
    "State",
    "TrainingEnv",
    "Walker",
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
# the DeepMind Control Suite on dm_control's own model files (mjx_lite.envs.suite)
register("acrobot_swingup", lambda **kw: Acrobot(sparse=False, **kw))
register("acrobot_swingup_sparse", lambda **kw: Acrobot(sparse=True, **kw))
register("ball_in_cup_catch", BallInCup)
register("cheetah_run", Cheetah)
register("point_mass_easy", PointMass)
register("walker_stand", lambda **kw: Walker(move_speed=0.0, **kw))
register("walker_walk", lambda **kw: Walker(move_speed=1.0, **kw))
register("walker_run", lambda **kw: Walker(move_speed=8.0, **kw))
