"""Shared test setup: float64 for the whole session (oracle comparisons against MuJoCo are float64)."""

import jax

jax.config.update("jax_enable_x64", True)
