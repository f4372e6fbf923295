#!/bin/bash
# A-B-A-B-A of the bundled refcheck (24 copies) at 6eb28ef (a worktree at /tmp/old-6eb28ef) and HEAD (RUNS=...)
set -o pipefail
OUT=${1:-/tmp/ab-settle}; mkdir -p $OUT
for run in ${RUNS:-old new old-again}; do
  at=/work/main; [ "${run%%-*}" = new ] || at=/tmp/old-6eb28ef
  (cd $at && PYTHONPATH=$at /work/main/.venv/bin/python benchmarks/kernelbench_refcheck.py --bundled --out $OUT/$run) 2>&1 | tail -3 > $OUT/$run.log
  tail -2 $OUT/$run.log
done
