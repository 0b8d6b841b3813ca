"""Every notebook in notebooks/ runs headless (nbclient, MJX_LITE_SMALL=1, a time limit each) without a cell
error, and is committed without outputs."""

import glob
import os
import time

import nbformat
import pytest
from nbclient import NotebookClient

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = sorted(glob.glob(os.path.join(ROOT, "notebooks", "*.ipynb")))
# seconds per notebook: the budget is 45 s in small mode on the CI machine; the limit leaves room for the kernel's
# start and a shared, loaded machine, and still stops a notebook that hangs
TIMEOUT = 300
# XLA flags of the notebooks' kernels (and the README runner's, tests/test_readme.py): no backend optimisation,
# no expensive LLVM passes (jax's `jax_disable_most_optimizations`, as flags that a subprocess inherits)
FAST_COMPILE = ("--xla_backend_optimization_level=0", "--xla_llvm_disable_expensive_passes=true")


def _id(path):
    return os.path.basename(path)


def test_notebooks_exist():
    names = {_id(p) for p in NOTEBOOKS}
    assert {"quickstart.ipynb", "rendering.ipynb"} <= names, names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_has_no_outputs(path):
    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert not cell.get("outputs") and cell.get("execution_count") is None, f"{_id(path)} cell {i}: " \
                "outputs are committed; clear them (jupyter nbconvert --clear-output --inplace)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_id)
def test_notebook_runs(path, monkeypatch):
    monkeypatch.setenv("MJX_LITE_SMALL", "1")
    # a smoke test compiles quickly rather than runs fast: XLA's CPU backend without its optimisation passes (the
    # notebooks' small sizes run in a fraction of their compile time; the values the notebooks print and check,
    # deformables' gradient against central differences, are float64 either way)
    monkeypatch.setenv("XLA_FLAGS", " ".join([os.environ.get("XLA_FLAGS", ""), *FAST_COMPILE]).strip())
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("MUJOCO_GL", "egl")
    # the kernel imports this checkout's mjx_lite, and keeps JAX's default float32 (no conftest there)
    monkeypatch.setenv("PYTHONPATH", ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=TIMEOUT, kernel_name="python3", resources={"metadata": {"path": ROOT}})
    deadline = time.monotonic() + TIMEOUT
    with client.setup_kernel():
        for index, cell in enumerate(nb.cells):
            # the whole notebook shares TIMEOUT: each cell gets what is left (nbclient raises on a timeout)
            client.timeout = max(1, int(deadline - time.monotonic()))
            client.execute_cell(cell, index)  # raises CellExecutionError naming the cell on the first error
