#!/usr/bin/env bash
# GPU checks and benchmarks of mjx_lite beside MJX (benchmarks/gpu_bench.py), in one call of at most 8 minutes.
#
# 1. Once, on a machine with the internet and the project's venv, in the repository root (fills .whl/, ~34 MB,
#    ignored by git: /.whl/ is in .gitignore):
#
#      PYTHON=.venv/bin/python bash benchmarks/gpu.sh prepare
#
#    which runs (Python 3.12, manylinux x86_64, the versions pyproject.toml's test extra pins):
#
#      python -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#        --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
#        --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
#        mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 mujoco-mjx==3.17.0 \
#        glfw==2.11.0 pyopengl==3.1.10 websockets==17.4 trimesh==5.2.0
#
#    and copies dm_control's suite/cheetah.xml and suite/common/ (from the installed dm-control) into
#    .whl/dm_suite/ (dm-control itself, ~50 MB, does not travel; the humanoid and the barkour quadruped come with
#    mujoco-mjx's test data, the pile with mjx_lite).
#
# 2. On the GPU machine (image: Python 3.12, JAX with CUDA, numpy, scipy, lxml, absl-py, etils; no mujoco), from
#    the repository root, with .whl carried along:
#
#      bash benchmarks/gpu.sh                      # writes results.json, results.md and logs to $OUT (or out/gpu)
#
#    It installs the wheels into /tmp/site (only if `import mujoco.mjx` fails), puts the repository on PYTHONPATH
#    and runs gpu_bench.py with a 420 s budget (GPU_BENCH_BUDGET overrides it; extra arguments pass through).
#
#    `bash benchmarks/gpu.sh stages [BATCH]` instead runs the per-stage comparison with MJX (benchmarks/stages.py)
#    and the per-stage kernel profile (benchmarks/profile_step.py, with the 25 slowest kernels) on the GPU at batch
#    BATCH (default 8192), writing stages.txt and profile.txt to $OUT.
#
#    `bash benchmarks/gpu.sh kernels [BATCH ...]` compares the fused Pallas kernels with the XLA path and MJX
#    (`Config.kernels`, docs/kernels.md): benchmarks/gpu_ab.py's variants xla, fused, "fused, lanes_first",
#    "fused, XLA solver" (the constraint solver's kernel left out), "fused, XLA rows" (the constraint rows'
#    kernel left out), "fused, XLA colliders" (the primitive colliders' kernel left out) and "fused, XLA passive"
#    (the passive forces left out of the velocity pass) at the batches
#    (default 8192 1024: steps/s,
#    kernels of the compiled step, compile time; first a fused == xla check of the tree pass and the whole forward
#    pass on the device), then the per-stage
#    profile of the fused step at the first batch, writing kernels_ab.txt and profile_fused.txt to $OUT.
#    `bash benchmarks/gpu.sh tiled [BATCH ...]` times the tiled kernels (rows: Launch.rows_tile 1, 4, 16; solver:
#    Launch.dof_tile 1; both) beside xla and fused (lane kernels), after the fused == xla check, to $OUT/tiled_ab.txt.
#    `bash benchmarks/gpu.sh --kernels fused|xla` runs gpu_bench.py with that Config.kernels (default auto: XLA,
#    config.kernels).
#
# 3. Checking the script on a CPU (batch 4, 5 steps, minutes):
#
#      JAX_PLATFORMS=cpu PYTHON=.venv/bin/python bash benchmarks/gpu.sh --tiny
#      JAX_PLATFORMS=cpu AB_STEPS=2 PYTHON=.venv/bin/python bash benchmarks/gpu.sh kernels 4   # interpret mode
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}

if [ "${1:-}" = "prepare" ]; then
  mkdir -p .whl/dm_suite/common
  "$PYTHON" -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d .whl \
    mujoco==4.0.0 mujoco-core==4.0.0 mujoco-studio==4.0.0 mujoco-mjx==3.17.0 \
    glfw==2.11.0 pyopengl==3.1.10 websockets==17.4 trimesh==5.2.0
  suite=$("$PYTHON" -c "import dm_control, os; print(os.path.join(os.path.dirname(dm_control.__file__), 'suite'))")
  cp "$suite/cheetah.xml" .whl/dm_suite/
  cp "$suite"/common/*.xml .whl/dm_suite/common/
  du -sh .whl
  exit 0
fi

OUT=${OUT:-$PWD/out/gpu}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! "$PYTHON" -c "import mujoco.mjx" 2>/dev/null; then
  ls .whl/*.whl >/dev/null 2>&1 || { echo "no mujoco here and no .whl/: run 'bash benchmarks/gpu.sh prepare' first" >&2; exit 2; }
  "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:$PYTHONPATH"
fi
unset MUJOCO_GL  # nothing here renders; MUJOCO_GL=egl makes `import mujoco` fail where libEGL is absent
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>/dev/null || true; } > "$OUT/nvidia-smi.txt"
if [ "${1:-}" = "stages" ]; then
  batch=${2:-8192}
  "$PYTHON" -u benchmarks/stages.py --batch "$batch" 2>&1 | tee "$OUT/stages.txt"
  # command buffers (CUDA graphs) would hide the kernels from the profiler
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=" \
    "$PYTHON" -u benchmarks/profile_step.py --batch "$batch" --depth 3 --top 25 2>&1 | tee "$OUT/profile.txt"
  exit 0
fi
if [ "${1:-}" = "tiled" ]; then
  # the tiled kernels (kernels/rows_tiled.py: Launch.rows_tile; kernels/primal_tiled.py: Launch.dof_tile) against
  # the lane kernels and the XLA path, MJX left out (its rows are in docs/benchmarks.md's run 5); the fused == xla
  # check first (lane kernels, tiled solver, tiled rows + solver: qacc, efc_force percentiles over the batch)
  shift
  batches=("$@")
  [ ${#batches[@]} -gt 0 ] || batches=(8192 1024)
  timeout "${AB_BUDGET:-420}" "$PYTHON" -u benchmarks/gpu_ab.py --no-mjx --variants xla fused "fused, lanes_mixed" "fused, tiled rows" \
    "fused, tiled rows x4" "fused, tiled rows x16" "fused, tiled solver" "fused, tiled rows + solver" \
    -- "${batches[@]}" 2>&1 | tee "$OUT/tiled_ab.txt" || true
  exit 0
fi
if [ "${1:-}" = "kernels" ]; then
  shift
  batches=("$@")
  [ ${#batches[@]} -gt 0 ] || batches=(8192 1024)
  # each part under its own time limit (AB_BUDGET, PROFILE_BUDGET seconds), so that a slow compile on a new device
  # still leaves the lines printed so far (tee writes them to $OUT as they come)
  timeout "${AB_BUDGET:-420}" "$PYTHON" -u benchmarks/gpu_ab.py --variants xla fused "fused, XLA rows + solver" \
    "fused, XLA solver" "fused, XLA rows" "fused, block 64 w2" -- "${batches[@]}" 2>&1 | tee "$OUT/kernels_ab.txt" || true
  XLA_FLAGS="${XLA_FLAGS:-} --xla_gpu_enable_command_buffer=" timeout "${PROFILE_BUDGET:-120}" \
    "$PYTHON" -u benchmarks/profile_step.py --kernels fused --batch "${batches[0]}" --depth 3 --top 15 2>&1 \
    | tee "$OUT/profile_fused.txt" || true
  exit 0
fi
dm=()
[ -f .whl/dm_suite/cheetah.xml ] && dm=(--dm-suite .whl/dm_suite)
set -o pipefail
"$PYTHON" -u benchmarks/gpu_bench.py --out "$OUT" --budget "${GPU_BENCH_BUDGET:-420}" "${dm[@]}" "$@" 2>&1 | tee "$OUT/log.txt"
