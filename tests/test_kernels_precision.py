"""No product inside a fused kernel runs at TF32 on an NVIDIA GPU.

Pallas' Triton lowering gives a matrix product at the default precision (or HIGH) `tt.dot` operands rounded to
TF32 (10-bit mantissas: ~1e-3 relative), where the XLA path's products are full float32 (`Config.matmul_precision`,
"highest" by default). Each kernel of the fused step is lowered for "cuda" on this CPU (no GPU needed) and its Triton
module is read: every `tt.dot` must have IEEE input precision (the attribute `inputPrecision = tf32` absent), and
every dot_general in a kernel's jaxpr must ask for Precision.HIGHEST. A control kernel shows that the check sees a
TF32 product. The lane kernels have no products (their loops are elementwise); the tiled solver's Hessian is one
(kernels/primal_tiled.py, Launch.hessian="dot").
"""

import re

import jax
import jax.numpy as jp
import mujoco
import pytest
from jax._src.pallas.triton import lowering as triton_lowering
from jax.experimental import pallas as pl
from jax.experimental.pallas import triton as plt

import mjx_lite as mjl
from mjx_lite.pipeline import kernels
from mjx_lite.pipeline.kernels import launch
from mjx_lite.solver.solve import solve
from tests import oracle
from tests import test_kernels as tk
from tests import test_kernels_rows as tkr
from tests import test_kernels_solver as tks

# a tt.dot whose operands are rounded (TF32, TF32x3, BF16 variants): any input precision but the default IEEE
_ROUNDED_DOT = re.compile(r"tt\.dot [^\n]*inputPrecision = (?!ieee)\w+")


def triton_modules(fn, *args) -> dict:
    """name -> Triton IR text of every pallas_call in `jax.jit(fn)(*args)` lowered for "cuda" (on any machine)."""
    captured = {}
    original = triton_lowering.lower_jaxpr_to_triton_module

    def capture(*a, **k):
        res = original(*a, **k)
        text = str(res.module.operation.get_asm())
        name = re.search(r"tt\.func (?:public )?@(\S+?)\(", text)
        captured[name.group(1) if name else f"kernel{len(captured)}"] = text
        return res

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(triton_lowering, "lower_jaxpr_to_triton_module", capture)
        jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    return captured


def gpu_triton_modules(fn, dtype, *args) -> dict:
    """`triton_modules` of `fn` at `args` cast to `dtype` (floating leaves), the kernels compiled as on a GPU (the
    Model's own kernel_layout, not interpret mode)."""
    cast = jax.tree.map(lambda x: x.astype(dtype) if jp.issubdtype(x.dtype, jp.floating) else x, args)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: launch.Launch(layout=m.config.kernel_layout))
        return triton_modules(fn, *cast)


def rounded_dots(text: str) -> list:
    return _ROUNDED_DOT.findall(text)


def kernel_dot_precisions(jaxpr) -> list:
    """The precision of every dot_general inside the pallas_calls of a (closed) jaxpr, nested jaxprs included."""
    found = []

    def walk(j, inside):
        for eqn in j.eqns:
            if eqn.primitive.name == "dot_general" and inside:
                found.append(eqn.params["precision"])
            for sub in jax.core.jaxprs_in_params(eqn.params):
                walk(sub, inside or eqn.primitive.name == "pallas_call")

    walk(jaxpr.jaxpr, False)
    return found


def _highest(precision) -> bool:
    return precision in ((jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST), jax.lax.Precision.HIGHEST)


@pytest.mark.parametrize("precision", [None, jax.lax.Precision.HIGH, jax.lax.Precision.HIGHEST])
def test_detector_sees_tf32(precision):
    """A 16 x 16 product in a Triton kernel: TF32 at the default precision and HIGH, IEEE at HIGHEST."""

    def body(a, b, o):
        o[...] = jp.dot(a[...], b[...], precision=precision)

    def f(a, b):
        return pl.pallas_call(body, out_shape=jax.ShapeDtypeStruct((16, 16), jp.float32),
                              compiler_params=plt.CompilerParams())(a, b)  # fmt: skip

    x = jp.ones((16, 16), jp.float32)
    (text,) = triton_modules(f, x, x).values()
    assert text.count("tt.dot") == 1
    assert bool(rounded_dots(text)) == (precision != jax.lax.Precision.HIGHEST), precision
    assert all(_highest(p) for p in kernel_dot_precisions(jax.make_jaxpr(f)(x, x))) == (
        precision == jax.lax.Precision.HIGHEST)  # fmt: skip


def _rows_and_solver(m, d):
    """The constraint rows and the solver: the kernels that a tiled Launch (rows_tile, dof_tile) changes; the step's
    other kernels are the lane kernels whatever the Launch's tiles."""
    return solve(m, kernels.make_constraint(m, d))


def _check_step(m, ds, how: launch.Launch, expect: set, min_dots: int, fn=mjl.step):
    """The fused step of `m` (float32; or `fn`) under `how`: the kernels `expect`, no rounded tt.dot, HIGHEST
    dot_generals."""
    m, ds = tk._float32_host(m), tk._float32_host(ds)  # (on the host, CI time: no eager cast per Model leaf)
    step = jax.vmap(fn, in_axes=(None, 0))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: how)
        mf = mjl.configure(m, kernels="fused")
        mods = triton_modules(step, mf, ds)
        precisions = kernel_dot_precisions(jax.make_jaxpr(step)(mf, ds))
    assert expect <= set(mods), sorted(mods)
    bad = {n: rounded_dots(t) for n, t in mods.items() if rounded_dots(t)}
    assert not bad, bad
    assert sum(t.count("tt.dot ") for t in mods.values()) >= min_dots
    assert len(precisions) >= min_dots and all(_highest(p) for p in precisions), precisions


@pytest.fixture(scope="module")
def rows_model():
    """(Model, 8 states) of test_kernels_rows' ROWS model (equality, friction, limit and contact rows: the rows
    and solver kernels run), float64 before `_check_step`'s float32."""
    mjm = mujoco.MjModel.from_xml_string(tkr.ROWS)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    return m, tkr._states(mjm, m, 8)


_TILED = launch.Launch(dof_tile=1, hessian="dot", rows_tile=1)


# the tiled Launch lowers the rows and the solver only (CI time: the whole step lowered again is its lane kernels
# again, which the lane Launch's whole step checks)
@pytest.mark.parametrize("how,expect,min_dots,fn", [
    (launch.Launch(), {"constraint_rows", "solve_newton"}, 0, mjl.step),
    (_TILED, {"constraint_rows_tiled", "solve_newton_tiled"}, 1, _rows_and_solver)])  # fmt: skip
def test_fused_step_has_no_tf32_product(rows_model, how, expect, min_dots, fn):
    """Every kernel of the fused step (lane kernels; the tiled rows and solver, whose Hessian is a tt.dot) computes
    its products at IEEE float32 precision."""
    _check_step(*rows_model, how, expect, min_dots, fn)


@pytest.fixture(scope="module")
def elliptic_model():
    """(Model, 8 sliding states) of test_kernels_solver.ELLIPTIC_SMALL (elliptic cones of condim 3 and 4 in the rows
    and solver kernels; CI time: the kernels unroll each cone dimension's code, the same lines for condim 4 and 6,
    and condim 6's group was the largest), float64 before `_check_step`'s float32."""
    mjm = mujoco.MjModel.from_xml_string(tks.ELLIPTIC_SMALL)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    return m, tks.sliding_states(mjm, m, 8)


# the rows and the solver only (CI time: the elliptic cones' code is theirs; the step's other kernels are the lane
# kernels of test_fused_step_has_no_tf32_product's whole step, the same code for every model)
@pytest.mark.parametrize("how,expect,min_dots", [
    pytest.param(launch.Launch(), {"constraint_rows", "solve_newton"}, 0, marks=pytest.mark.slow),
    (_TILED, {"constraint_rows_tiled", "solve_newton_tiled"}, 1)])  # fmt: skip
def test_elliptic_step_has_no_tf32_product(elliptic_model, how, expect, min_dots):
    """The elliptic cones' code of the rows and solver kernels (the tiled Hessian's tt.dot and the cones' rank-1
    terms): IEEE float32 products, and no weakly typed literal branch of a select (unbatched launch)."""
    _check_step(*elliptic_model, how, expect, min_dots, _rows_and_solver)
    m, ds = tk._float32_host(elliptic_model[0]), tk._float32_host(elliptic_model[1])
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kernels, "launch_of", lambda m: how)
        jaxpr = jax.make_jaxpr(_rows_and_solver)(mjl.configure(m, kernels="fused"),
                                                 jax.tree.map(lambda x: x[0], ds)).jaxpr  # fmt: skip
    assert "pallas_call" in str(jaxpr) and tk._weak_literal_selects(jaxpr) == []


@pytest.mark.slow  # CI time (the humanoid's step lowered twice)
@pytest.mark.parametrize("how", [launch.Launch(), launch.Launch(dof_tile=1, hessian="dot", rows_tile=4)])
def test_humanoid_step_has_no_tf32_product(how):
    """The MJX humanoid's fused step (the benchmark model of docs/kernels.md's GPU runs), contacts on."""
    mjm = mujoco.MjModel.from_xml_path(tk.MJX_HUMANOID)
    m = mjl.configure(oracle.model_from_mujoco(mjm), kernels="xla")
    ds = tkr._states(mjm, m, 8, scale=0.1)
    tiled = how.dof_tile > 0
    expect = {"constraint_rows_tiled", "solve_newton_tiled"} if tiled else {"constraint_rows", "solve_newton"}
    _check_step(m, ds, how, expect, int(tiled))
