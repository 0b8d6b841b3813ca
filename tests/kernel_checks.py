"""Checks shared by the fused-kernel tests (tests/test_kernels*.py)."""

import jax
import numpy as np

import mjx_lite as mjl
from mjx_lite.pipeline.kernels import launch


def rel(a, b) -> float:
    """max |a - b| relative to max(1, max |b|)."""
    a, b = np.asarray(a), np.asarray(b)
    return float(np.max(np.abs(a - b), initial=0.0)) / max(1.0, float(np.max(np.abs(b), initial=0.0)))


def twin_tracers(monkeypatch, m, d, fn=None) -> dict:
    """{kernel name: avals of the traced arrays its XLA twin closes over} for every kernel of the fused step of (m, d)
    (one environment's Data), from a traced step (not compiled); of fn(m, d) in place of the step when given (a
    stage or two: cheaper to trace). A twin (the kernel's custom_jvp rule, traced lazily, possibly in a later trace
    than the call) must read only its inputs: every list should be empty."""
    calls, seen = launch.call, {}

    def checked(kernel, inputs, how):
        consts = jax.make_jaxpr(kernel.xla)(inputs).consts
        seen.setdefault(kernel.name, []).extend(c.aval for c in consts if isinstance(c, jax.core.Tracer))
        return calls(kernel, inputs, how)

    monkeypatch.setattr(launch, "call", checked)
    jax.jit(fn or mjl.step).trace(mjl.configure(m, kernels="fused"), d)
    return seen
