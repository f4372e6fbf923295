#!/bin/bash
# The GPU acceptance runs of the evaluator issues, on one GPU, with .carry/ from make_carry.sh:
#   bash scripts/device_acceptance.sh tests|refcheck|ab|profile|bench|grpo|learning [LIMIT_S]
# tests     pytest -m gpu, verbose, one summary line per test and a junit file under $OUT
# refcheck  upstream L1-L3 references as candidates (records under $OUT/rc; REPEAT=N: each N times); on the H100 (2026-12-06)
#           L1 took 6.5-9.2 min, L2 5-7 min, L3 3-4 min, hosts differing by 1.4x: LEVELS=1, LEVELS=2,
#           LEVELS=3 in three calls is safe (L2 and L3 together overran one call on the slower host);
#           SEQUENCE="names..." (one level): those problems in that order, a name may come again;
#           WORKER_LOGS=1: the workers' logs in $OUT/wl.tgz, the trusted worker's with a line per
#           batch, per copy of outputs and the GPU's clocks before each side (WARPK_DEBUG_TIMING)
# ab        OLD=<commit> (scripts/ab_prepare.sh made .ab/<commit>; carry it): the refcheck of LEVEL (1)
#           SUBSET at OLD, at HEAD, at OLD again (A-B-A: drift shows as A against A) under $OUT/ab
# bench     benchmarks/bench_evaluator.py (cold, warm, serial) under $OUT/bench
# profile   benchmarks/profile_evaluator.py, where a candidate's wall goes, a line per candidate, under
#           $OUT/prof: ENERGY (none), TASKS (all 24 bundled problems, 73 candidates: more than a call
#           holds with energy on; #30's 5.1 s goal was on 8: TASKS="01_softmax 02_layer_norm
#           03_gelu_tanh 04_rms_norm 05_gemm_bias_gelu 06_residual_add_layer_norm 07_attention 08_swiglu_mlp")
# grpo      benchmarks/bench_grpo.py (needs `make_carry.sh train`): SIZES (1.5b 7b), GENERATORS
#           (hf hf-static hf-paged), PROMPTS (1 4), STEPS (3), TOKENS (256), LEAN (on), PROFILE (unset) under $OUT/grpo
# learning  benchmarks/bench_learning.py recipes side by side on the machine's CPU cores, CORES_PER_JOB (2) each
#           (taskset), each seed's M0 from .carry/m0 when it is there (an `--m0-only` run's --out,
#           made here), else trained in each job: RECIPES ("name:overrides|name:overrides"), SEEDS (1);
#           M0_SEED=S: one M0, of seed S, for every seed (bench_learning.py --m0-seed); K (16) samples a task;
#           under $OUT/learn
# Each part stops itself before LIMIT_S (default 570) so its output comes back. The device returns
# only a few files per call (8 on 2026-12-07): several parts in one call, tar each part's $OUT.
set -o pipefail
export PATH=$PWD/.carry/bin:$PATH PYTHONPATH=$PWD/.carry/py:$PWD NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
LIMIT=${2:-570}
nvidia-smi --query-gpu=name,driver_version,power.limit,temperature.gpu --format=csv > "$OUT/gpu.txt"
python -c "from warpk.evaluator.resources import describe; print('limits:', describe())" >> "$OUT/gpu.txt" 2>&1
case "$1" in
  tests)
    WARPK_INSTAFAIL=1 timeout "$LIMIT" python -m pytest -m gpu -v -rA -p no:cacheprovider --timeout 200 \
        --junitxml="$OUT/junit.xml" 2>&1 | tee "$OUT/pytest-gpu.log" | grep -E "PASSED|FAILED|ERROR|XFAIL|XPASS|passed|failed|Error|assert" ;;
  refcheck)
    if [ -n "${WORKER_LOGS:-}" ]; then mkdir -p "$OUT/wl"; export WARPK_WORKER_LOGS=$OUT/wl; fi
    # diagnostics of the huge copies' two speeds: GO_PAUSE_MS (a pause before each huge Go),
    # FREEZE_REFERENCE=1 (the reference worker frozen after each huge batch, as the candidate is)
    if [ -n "${GO_PAUSE_MS:-}" ]; then export WARPK_DEBUG_GO_PAUSE_MS=$GO_PAUSE_MS; fi
    if [ -n "${FREEZE_REFERENCE:-}" ]; then export WARPK_DEBUG_FREEZE_REFERENCE=1; fi
    timeout "$LIMIT" python benchmarks/kernelbench_refcheck.py --root .carry/kb/KernelBench \
        --levels ${LEVELS:-1 2 3} ${SUBSET:+--subset $SUBSET} ${SEQUENCE:+--sequence $SEQUENCE} --repeat ${REPEAT:-1} --out "$OUT/rc" 2>&1 | tee "$OUT/refcheck.log" \
        | grep -v ": ok speedup"
    # one file: a log per worker, more files than the device returns
    status=$?
    if [ -n "${WORKER_LOGS:-}" ]; then tar -czf "$OUT/wl.tgz" -C "$OUT" wl && rm -rf "$OUT/wl"; fi
    exit $status ;;
  ab)
    tree=$PWD/.ab/${OLD:?OLD=<commit>}; [ -d "$tree" ] || { echo "ab: no $tree (scripts/ab_prepare.sh $OLD)"; exit 2; }
    for run in old new old-again; do
      at=$PWD; [ "$run" = new ] || at=$tree
      (cd "$at" && PYTHONPATH=$OLDPWD/.carry/py:$at timeout $((LIMIT / 3)) python benchmarks/kernelbench_refcheck.py \
          --root "$OLDPWD/.carry/kb/KernelBench" --levels "${LEVEL:-1}" ${SUBSET:+--subset $SUBSET} \
          --out "$OUT/ab/$run") 2>&1 | tee "$OUT/ab-$run.log" | tail -2
    done
    # one file: the device returns a limited count of files (session 27 lost the third run's records)
    tar -czf "$OUT/ab.tar.gz" -C "$OUT" ab && rm -rf "$OUT/ab" ;;
  profile)
    # shellcheck disable=SC2086  # the task names are words
    timeout "$LIMIT" python benchmarks/profile_evaluator.py --hardware h200 --energy "${ENERGY:-none}" \
        ${TASKS:+--tasks $TASKS} --out "$OUT/prof" 2>&1 | tee "$OUT/profile.log" ;;
  bench)
    timeout "$LIMIT" python benchmarks/bench_evaluator.py --hardware h200 --out "$OUT/bench" 2>&1 \
        | tee "$OUT/bench.log" | tail -30 ;;
  grpo)
    # a folder named site-packages: dill (datasets' hashing) pickles by value what lies elsewhere
    SITE=$PWD/.carry/site-packages; export PYTHONPATH=$SITE:$PYTHONPATH
    if [ -e .carry/train-site.tar.xz ] && [ ! -d "$SITE/trl" ]; then
        mkdir -p "$SITE" && tar -xJf .carry/train-site.tar.xz -C "$SITE"
        python -c "import pandas" 2>/dev/null || pip install --quiet --no-deps --target "$SITE" .carry/pandas-*.whl
    fi
    HF_HUB_OFFLINE=1 timeout "$LIMIT" python benchmarks/bench_grpo.py --out "$OUT/grpo" --work /tmp \
        --sizes ${SIZES:-1.5b 7b} --generators ${GENERATORS:-hf hf-static hf-paged} \
        --prompts ${PROMPTS:-1 4} --steps ${STEPS:-3} --completion-tokens ${TOKENS:-256} --lean ${LEAN:-on} ${PROFILE:+--profile} 2>&1 \
        | tee "$OUT/grpo.log" | grep -E "^bench_grpo|Error|error" ;;
  learning)
    SITE=$PWD/.carry/site-packages; export PYTHONPATH=$SITE:$PYTHONPATH
    if [ -e .carry/train-site.tar.xz ] && [ ! -d "$SITE/trl" ]; then
        mkdir -p "$SITE" && tar -xJf .carry/train-site.tar.xz -C "$SITE"
        python -c "import pandas" 2>/dev/null || pip install --quiet --no-deps --target "$SITE" .carry/pandas-*.whl
    fi
    m0_from=; [ -d .carry/m0 ] && m0_from="--m0-from .carry/m0"
    [ -n "${M0_SEED:-}" ] && [ -z "$m0_from" ] && {
        echo "learning: M0_SEED needs .carry/m0 (an --m0-only --m0-seed run's --out), so that every job shares one M0"; exit 2; }
    mkdir -p "$OUT/learn"; slot=0; IFS='|' read -ra recipes <<< "${RECIPES:?RECIPES=name:overrides|...}"
    want=$(( ${#recipes[@]} * $(wc -w <<< "${SEEDS:-1}") * ${CORES_PER_JOB:-2} ))
    [ "$want" -le "$(nproc)" ] || { echo "learning: $want cores asked, $(nproc) here"; exit 2; }
    for recipe in "${recipes[@]}"; do
        name=${recipe%%:*}; overrides=${recipe#*:}
        for seed in ${SEEDS:-1}; do
            n=${CORES_PER_JOB:-2}; job=$name-seed$seed; cores=$((n * slot))-$((n * slot + n - 1)); slot=$((slot + 1))
            # shellcheck disable=SC2086  # the overrides are words
            (taskset -c "$cores" timeout "$LIMIT" python benchmarks/bench_learning.py --out "/tmp/learn/$job" \
                --seeds "$seed" --k ${K:-16} $m0_from ${M0_SEED:+--m0-seed $M0_SEED} evaluate.timing_batches=3 \
                "evaluate.cache_dir=/tmp/learn-cache-$slot" $overrides > "$OUT/learn/$job.log" 2>&1
             rc=$?; cp "/tmp/learn/$job/bench_learning.json" "$OUT/learn/$job.json" 2>/dev/null
             echo "$job: rc $rc $(grep -E '^seed' "$OUT/learn/$job.log")"; exit $rc) &
        done
    done
    failed=0; for pid in $(jobs -p); do wait "$pid" || failed=1; done; exit $failed ;;
  *) echo "usage: $0 tests|refcheck|ab|profile|bench|grpo|learning [LIMIT_S]"; exit 2 ;;
esac
