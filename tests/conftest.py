"""Shared test setup: float64 for the whole session (oracle comparisons against MuJoCo are float64), headless
OpenGL for mujoco.Renderer (the renderer's oracle) unless the environment chose another backend, and no
persistent compilation cache."""

import os

os.environ.setdefault("MUJOCO_GL", "egl")
# No persistent compilation cache in the test processes (and the subprocesses they start): in 4 of 6 full runs of
# the suite on a 2-core CPU with it on (two xdist workers sharing it), a worker died in XLA's executable
# serialisation (a segfault inside `compilation_cache.put_executable_and_time`, in test_trajopt's MPC program;
# never in one process running the same worker's 1011 tests in order, with a fresh or a filled cache, nor with
# that file alone under CPU load), and an entry left by another checkout once aborted a test in deserialisation.
# (Those segfaults came late in a worker's run, as the one `_release_compiled_programs` below ends: likely the same
# limit on memory mappings, not the cache itself; not re-checked with the cache on.)
# test_cache.py checks the cache itself in fresh processes with their own settings.
os.environ.setdefault("MJX_LITE_COMPILATION_CACHE", "0")
# XLA:CPU's LLVM code generation at optimisation level 0 in the test processes (and the subprocesses, notebooks and
# README snippets they start): compiling dominates the suite's time and the tests run tiny workloads. Measured on
# tests/test_dynamics.py's default selection (22 tests, one process, 2-core CPU): 89 s -> 72 s wall, 91 -> 66 s user
# CPU; `--xla_llvm_disable_expensive_passes` on top changed nothing (69 vs 70 s). The level changes how LLVM
# optimises the generated code, not the HLO program nor floating-point semantics (no fast-math at any level), so the
# values compared with MuJoCo are the same operations in the same order. Benchmarks do not run under this file.
if "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_backend_optimization_level=0").strip()
# XLA:CPU's older elemental emitters instead of its MLIR fusion emitters, in the test processes only: compiling a
# vmapped step took 2-3x less CPU (A/B alternated in fresh processes, jit(vmap(step)) of 4 environments, compile
# only, /tmp/ct/probe3.py: cartpole 13.3, 8.3 -> 5.9, 5.0 s; bundled humanoid 18.5, 24.5 -> 8.8, 5.9 s); a
# one-step gradient barely moved (21.3 -> 19.5 s). Both emitters implement the same HLO operations without
# fast-math; the values compared with MuJoCo are the same operations in the same order.
# (jaxlib 0.11 removed the flag, and XLA aborts on an unknown flag: only older jaxlibs get it.)
def _jaxlib_before(major: int, minor: int) -> bool:
    from importlib.metadata import version  # noqa: PLC0415

    try:
        return tuple(int(x) for x in version("jaxlib").split(".")[:2]) < (major, minor)
    except Exception:  # noqa: BLE001 - unknown layout: leave the flag out
        return False


if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", "") and _jaxlib_before(0, 11):
    os.environ["XLA_FLAGS"] = (os.environ["XLA_FLAGS"] + " --xla_cpu_use_fusion_emitters=false").strip()

import jax  # noqa: E402 - MUJOCO_GL must be set before anything imports mujoco

jax.config.update("jax_enable_x64", True)

import gc  # noqa: E402

import pytest  # noqa: E402


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after each test module.

    Every XLA:CPU executable keeps a few memory mappings of its JIT-ed code, and the programs compiled for functions
    that live all session (`mjx_lite.step` and the other library functions tests jit) stay in JAX's caches. One
    process had 26,873 mappings after test_collision and part of test_forward; an xdist worker runs half of the suite,
    and the kernel allows 65,530 per process (`vm.max_map_count`). Workers died in a segfault inside XLA's compiler
    at 98% of `make test` (test_trajopt, here and in CI). That is how a failed mapping ends: with `vm.max_map_count`
    lowered to 2,500, a process compiling small functions died the same way after XLA logged "LLVM compilation
    error: Cannot allocate memory" (xdist did not show the crashed worker's log lines). With this fixture no worker
    went above 15,700 mappings and the suite passed. Module-scoped fixtures keep sharing compilations inside a
    module."""
    yield
    jax.clear_caches()
    gc.collect()


def pytest_collection_finish(session):
    """Python's cyclic garbage collector, tuned for tracing: after collection the objects alive (modules, MuJoCo
    models, collected items: alive all session) are frozen out of the collector's scans, and the youngest generation
    is collected every 10,000 allocations instead of 700. Tracing and lowering allocate millions of short-lived
    objects. Measured with gc callbacks in one process (-p no:xdist, not slow, load 10-14, cache off) on 8 test files:
    the collector's CPU 7.9 -> 1.7 s, of the tests' 181.6 s (their totals moved within the load's noise). Explicit
    `gc.collect()` (the fixture above) still frees everything not frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 50, 100)


@pytest.fixture
def saved_json(tmp_path):
    """save(results) -> paths: each dict of `results` written as a JSON file under tmp_path (the benchmarks' saved
    runs, read back by their `--from-json`)."""

    def save(results: list) -> list[str]:
        import json  # noqa: PLC0415

        paths = []
        for i, r in enumerate(results):
            paths.append(str(tmp_path / f"{i}.json"))
            with open(paths[-1], "w") as f:
                json.dump(r, f)
        return paths

    return save


# Test files whose tests are independent processes (a notebook kernel, a README snippet, a fresh interpreter): their
# tests are spread over the xdist workers one by one. Every other file's tests run on one worker (`make test` uses
# `--dist loadgroup`), so that its module-scoped fixtures compile once, not once per worker that got some of its
# tests: on four oracle-heavy files (-n 2, not slow, load 9-15 from other jobs) 217 vs 236 CPU-s and 1000 vs 1281 s
# wall against `--dist load`. xdist orders groups by their number of tests, so the single tests fill the tail.
# (test_readme.py is grouped: its snippets share one runner process, the module fixture `outcomes`; spread, each
# worker set it up and the README ran twice, 35 and 37 s in a CI run)
_SPREAD = {"test_notebooks.py", "test_cache.py"}


# tryfirst: xdist's worker reads the xdist_group marks in its own pytest_collection_modifyitems (appending the group
# to each node id) and, registered after this conftest, ran first and saw no marks; and pytest 9 ignores the node id
# xdist 3.8 rewrites (pyproject pins pytest below 9). Either way every file's tests were spread over both workers,
# each compiling the file's module fixtures (the last full run: every file on both workers; test_cylinder_manifold's
# session fixture set up on each, 38 and 40 s). Checked: with -n 2 --dist loadgroup a file's tests share a worker.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name not in _SPREAD:
            item.add_marker(pytest.mark.xdist_group(item.path.name))
