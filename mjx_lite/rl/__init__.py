"""Reinforcement learning on mjx_lite environments: PPO (`mjx_lite.rl.ppo`) and its command line
(`python -m mjx_lite.rl.train`)."""
