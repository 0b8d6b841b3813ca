#!/bin/bash
# reacher_easy at the task's defaults, 3M steps, 16 evaluations, one training per process, one at a time (rl40j).
# usage: bash benchmarks/runs/rl40j/run_reacher.sh NUM_ENVS SEED...
cd "$(dirname "$0")/../../.."
n=$1; shift
for s in "$@"; do
  PYTHONPATH=. nice -n 5 /work/main/.venv/bin/python benchmarks/rl_tasks.py --tasks reacher_easy --steps 3000000 \
    --num-envs "$n" --evals 16 --seeds "$s" --json "benchmarks/runs/rl40j/reacher_easy_${n}_s${s}.json" \
    > "benchmarks/runs/rl40j/reacher_easy_${n}_s${s}.log" 2>&1
done
