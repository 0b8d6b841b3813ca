"""Environments for reinforcement learning on mjx_lite: tasks, a training wrapper, domain randomisation.

    from mjx_lite import envs
    envs.names()                                    # registered task names
    env = envs.make("cartpole_balance")             # -> envs.Env
    state = env.reset(jax.random.PRNGKey(0))        # envs.State (data, obs, reward, done, metrics, info)
    state = env.step(state, action)                 # pure, jit/vmap-able; action in [-1, 1]^action_size
    train_env = envs.wrap_for_training(env, episode_length=1000, action_repeat=1, randomize=None)

The DeepMind Control Suite tasks (acrobot, ball_in_cup, cheetah, finger, fish, hopper_*, humanoid_*, manipulator,
pendulum_swingup, point_mass, reacher_*, swimmer, walker) simulate dm_control's own model files
(`mjx_lite.envs.suite`); cartpole, `hopper`, `reacher`, `pendulum_swingup_shaped`, `quadruped_run`,
`quadruped_joystick`, `quadruped_getup`, `humanoid_bundled_stand`, `humanoid_joystick` and `push_box` (the
`pusher` arm) run on mjx_lite's bundled models. Every task has a domain randomisation hook,
`env.randomizer()`. See docs/rl.md for the tasks (observations and rewards), the wrapper's
semantics and subclassing `Env`.
"""

from mjx_lite.envs.acrobot import Acrobot
from mjx_lite.envs.ball_in_cup import BallInCup
from mjx_lite.envs.base import DEFAULT_RANDOMIZE, DIVERGENCE_WARNINGS, Env, State, diverged
from mjx_lite.envs.cartpole import CartPole
from mjx_lite.envs.cheetah import Cheetah
from mjx_lite.envs.finger import Finger
from mjx_lite.envs.fish import FishSwim
from mjx_lite.envs.gymnasium_adapter import to_gymnasium, to_gymnasium_env
from mjx_lite.envs.hopper import Hopper
from mjx_lite.envs.humanoid import HumanoidStand
from mjx_lite.envs.humanoid_joystick import HumanoidJoystick
from mjx_lite.envs.manipulator import ManipulatorBring
from mjx_lite.envs.pendulum import PendulumSwingup
from mjx_lite.envs.point_mass import PointMass
from mjx_lite.envs.push_box import PushBox
from mjx_lite.envs.quadruped import QuadrupedRun
from mjx_lite.envs.quadruped_joystick import QuadrupedGetup, QuadrupedJoystick
from mjx_lite.envs.randomize import randomizable_fields, scale_randomizer
from mjx_lite.envs.reacher import Reacher
from mjx_lite.envs.registry import make, names, register
from mjx_lite.envs.rewards import tolerance
from mjx_lite.envs.suite_hopper import SuiteHopper
from mjx_lite.envs.suite_humanoid import SuiteHumanoid
from mjx_lite.envs.suite_pendulum import SuitePendulum
from mjx_lite.envs.suite_reacher import TARGET_SIZES, SuiteReacher
from mjx_lite.envs.swimmer import Swimmer
from mjx_lite.envs.walker import Walker
from mjx_lite.envs.wrappers import WRAPPER_INFO, TrainingEnv, wrap_for_training

__all__ = [
    "DEFAULT_RANDOMIZE",
    "DIVERGENCE_WARNINGS",
    "WRAPPER_INFO",
    "Acrobot",
    "BallInCup",
    "CartPole",
    "Cheetah",
    "Env",
    "Finger",
    "FishSwim",
    "Hopper",
    "HumanoidJoystick",
    "HumanoidStand",
    "ManipulatorBring",
    "PendulumSwingup",
    "PointMass",
    "PushBox",
    "QuadrupedGetup",
    "QuadrupedJoystick",
    "QuadrupedRun",
    "Reacher",
    "SUITE_TASKS",
    "State",
    "SuiteHopper",
    "SuiteHumanoid",
    "SuitePendulum",
    "SuiteReacher",
    "Swimmer",
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
register("cartpole_balance_sparse", lambda **kw: CartPole(swing_up=False, sparse=True, **kw))
register("cartpole_swingup_sparse", lambda **kw: CartPole(swing_up=True, sparse=True, **kw))
register("pendulum_swingup_shaped", PendulumSwingup)  # registered as pendulum_swingup before dm_control's took it
register("reacher", Reacher)
register("hopper", Hopper)
register("quadruped_run", QuadrupedRun)
register("humanoid_bundled_stand", HumanoidStand)  # registered as humanoid_stand before dm_control's took it
# locomotion and manipulation on bundled models (MuJoCo Playground's kinds of task)
register("quadruped_joystick", QuadrupedJoystick)
register("quadruped_getup", QuadrupedGetup)
register("humanoid_joystick", HumanoidJoystick)
register("push_box", PushBox)
# the DeepMind Control Suite on dm_control's own model files (mjx_lite.envs.suite)
SUITE_TASKS: set[str] = set()  # the tasks below (`train MODEL` on a bundled model's name does not pick them)


def _suite_task(name, factory):
    register(name, factory)
    SUITE_TASKS.add(name)


_suite_task("acrobot_swingup", lambda **kw: Acrobot(sparse=False, **kw))
_suite_task("acrobot_swingup_sparse", lambda **kw: Acrobot(sparse=True, **kw))
_suite_task("ball_in_cup_catch", BallInCup)
_suite_task("cheetah_run", Cheetah)
_suite_task("finger_spin", lambda **kw: Finger(target_radius=None, **kw))
_suite_task("finger_turn_easy", lambda **kw: Finger(target_radius=0.07, **kw))
_suite_task("finger_turn_hard", lambda **kw: Finger(target_radius=0.03, **kw))
_suite_task("fish_swim", FishSwim)
_suite_task("hopper_stand", lambda **kw: SuiteHopper(hopping=False, **kw))
_suite_task("hopper_hop", lambda **kw: SuiteHopper(hopping=True, **kw))
_suite_task("humanoid_stand", lambda **kw: SuiteHumanoid(move_speed=0.0, **kw))
_suite_task("humanoid_walk", lambda **kw: SuiteHumanoid(move_speed=1.0, **kw))
_suite_task("humanoid_run", lambda **kw: SuiteHumanoid(move_speed=10.0, **kw))
_suite_task("manipulator_bring_ball", ManipulatorBring)
_suite_task("pendulum_swingup", SuitePendulum)
_suite_task("point_mass_easy", PointMass)
_suite_task("reacher_easy", lambda **kw: SuiteReacher(target_size=TARGET_SIZES["easy"], **kw))
_suite_task("reacher_hard", lambda **kw: SuiteReacher(target_size=TARGET_SIZES["hard"], **kw))
_suite_task("swimmer_swimmer6", lambda **kw: Swimmer(n_links=6, **kw))
_suite_task("walker_stand", lambda **kw: Walker(move_speed=0.0, **kw))
_suite_task("walker_walk", lambda **kw: Walker(move_speed=1.0, **kw))
_suite_task("walker_run", lambda **kw: Walker(move_speed=8.0, **kw))
