#!/bin/bash
# Two evaluator runs at once on one machine, before and after the lane lock: the bundled suite's
# references as candidates (kernelbench_refcheck.py --bundled), twice side by side at an older
# commit (its tree from scripts/ab_prepare.sh) and twice side by side at HEAD, one pair after the
# other. What to compare: each run's copies (median 1 is the truth) and their intervals' widths,
# against runs alone (docs/data/refcheck-cpu-2026-12-06/).
#   bash scripts/ab_prepare.sh 078e0ce && bash benchmarks/bench_neighbours.sh 078e0ce OUT
set -euo pipefail
old=$(git rev-parse --short "${1:?an older commit}"); out=${2:?an output folder}; hw=${HARDWARE:-cpu}
[ -d ".ab/$old" ] || { echo "bench_neighbours: no .ab/$old (scripts/ab_prepare.sh $old)"; exit 2; }
py=${PYTHON:-$PWD/.venv/bin/python}; mkdir -p "$out"
pair() {  # $1 label, $2 tree
    for i in 1 2; do
        (cd "$2" && PYTHONPATH=$2 "$py" benchmarks/kernelbench_refcheck.py --bundled --hardware "$hw" \
            --out "$out/$1-$i" > "$out/$1-$i.log" 2>&1) &
    done
    wait
    tail -n 2 "$out/$1-1.log" "$out/$1-2.log"
}
pair "old-$old" "$PWD/.ab/$old"
pair "head-$(git rev-parse --short HEAD)" "$PWD"
