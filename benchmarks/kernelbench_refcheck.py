"""Every upstream KernelBench problem, with its own reference as the candidate: all must be `ok`.

A reference renamed `ModelNew` is correct by construction and exactly as fast as the reference,
so any other verdict is a false rejection by our evaluator, and a "faster" verdict is noise
counted as a win (`fast_1` of these copies should be <= 5%).

    git clone https://github.com/ScalingIntelligence/KernelBench /path/KB     # never commit it
    python benchmarks/kernelbench_refcheck.py --root /path/KB/KernelBench --levels 1 2 3 \
        --out outputs/refcheck

    python benchmarks/kernelbench_refcheck.py --bundled --out outputs/refcheck-bundled   # ours (CPU)

Prints counts per level and status, fast_1 of the copies, the copies' speedup distribution (median,
5-95%, how many intervals contain 1: the timing's bias and noise) and the wall time per level, and
writes every record to OUT/records-L<level>.jsonl and the table to OUT/summary.json.
Hardware: `--hardware auto` (the GPU's profile, or cpu); energy is not measured here.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from warpk.config import EvaluateConfig, HardwareConfig, TasksConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator  # noqa: E402
from warpk.evaluator.timing_phase import CONTENTION_TOLERANCE  # noqa: E402
from warpk.hardware import detect_gpu_names, profile_for  # noqa: E402
from warpk.records import faster  # noqa: E402
from warpk.tasks import load_suite  # noqa: E402


def as_candidate(reference_source: str) -> str:
    """The reference itself as a candidate: `Model` renamed `ModelNew` everywhere."""
    return re.sub(r"\bModel\b", "ModelNew", reference_source)


def show(out, n: int, i: int, record) -> None:
    """One line per record as it arrives (and its JSON to `out`)."""
    out.write(record.to_json() + "\n")
    out.flush()
    tail = f" {record.error[:160]}" if record.status != "ok" else (
        f" speedup {record.speedup:.3f} [{record.speedup_low:.3f}, {record.speedup_high:.3f}]"
    )
    if record.status == "ok" and record.ref_contention and record.ref_contention > 1.05:
        tail += f" (reference {record.ref_contention:.2f}x slower interleaved than alone; " + (
            f"candidate alone {record.new_alone_runtime_ms:.3f} ms, basis {record.basis}"
            if record.basis else "scaled to alone") + (
            f", interleaved {record.interleaved_speedup:.3f})" if record.interleaved_speedup else ")")
    print(f"  {i + 1}/{n} {record.task_id}: {record.status}{tail}", flush=True)


def hardware(name: str) -> HardwareConfig:
    if name == "auto":
        name = profile_for(detect_gpu_names())
    raw = yaml.safe_load((REPO / "conf" / "hardware" / f"{name}.yaml").read_text())
    return HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})


def copy_speedups(ok: list) -> dict:
    """The copies' speedup distribution: each copy is exactly as fast as the reference, so these
    measure the timing's bias (the median) and noise (the spread, the intervals that miss 1)."""
    if not ok:
        return {}
    values = sorted(r.speedup for r in ok)

    def at(q: float) -> float:
        return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]

    widened = [r for r in ok if was_widened(r)]
    return {
        "speedup_median": statistics.median(values),
        "speedup_p5": at(0.05),
        "speedup_p95": at(0.95),
        "interval_contains_1": sum(1 for r in ok if contains_1(r)),
        # intervals whose upper end reaches a second estimate (timing_phase.wider): they contain 1
        # more easily by construction, so the count among the others is given apart
        "intervals_widened": len(widened),
        "unwidened_contain_1": sum(1 for r in ok if contains_1(r) and not was_widened(r)),
    }


def contains_1(r) -> bool:
    return r.speedup_low <= 1.0 <= r.speedup_high


def was_widened(r) -> bool:
    """The interleaved reference beyond the tolerance from its baseline either way: slowed (the
    upper end reaches the interleaved ratio) or faster (it reaches the reference at its alone
    speed)."""
    c = r.ref_contention
    return c is not None and not 1 / (1 + CONTENTION_TOLERANCE) <= c <= 1 + CONTENTION_TOLERANCE


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", help="upstream KernelBench/KernelBench (holds level1/..)")
    parser.add_argument("--bundled", action="store_true",
                        help="our bundled suite's references instead (level 0 in the output)")
    parser.add_argument("--timing-batches", type=int, default=None, help="evaluate.timing_batches")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--hardware", default="auto")
    parser.add_argument("--subset", nargs="*", default=[], help="problem names (file stems) only")
    parser.add_argument("--sequence", nargs="*", default=[],
                        help="problem names in this order, a name may come again (one level): e.g. the "
                             "huge L1 copies first, then L1 1-24, then the huge copies again, in one "
                             "process (does the reference worker's state after other tasks move them?)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="each copy this many times in a row (how much the timing varies between "
                             "evaluations of one problem; the counts are then over every evaluation)")
    parser.add_argument("--sandbox", default="auto", choices=["auto", "bwrap", "process"])
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "refcheck")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    hw = hardware(args.hardware)
    if not args.bundled and not args.root:
        parser.error("--root (an upstream KernelBench checkout) or --bundled")
    extra = {"timing_batches": args.timing_batches} if args.timing_batches else {}
    protocol = EvaluateConfig(energy="none", result_cache=False, sandbox=args.sandbox, **extra)
    evaluator = Evaluator(protocol, hw, shape="auto")
    print(f"hardware={hw.name} lanes={evaluator.lanes} sandbox={evaluator.sandbox}", flush=True)
    table, grand = {}, time.perf_counter()
    for level in [0] if args.bundled else args.levels:
        subset = sorted(set(args.sequence)) or args.subset
        tasks = load_suite(TasksConfig(source="bundled", subset=subset) if args.bundled else
                           TasksConfig(source="kernelbench", root=args.root, level=level, subset=subset))
        # a repeat differs by a comment (identical sources in one call are evaluated once) and
        # comes a round later, each round all the problems (a baseline is kept a minute a task)
        rounds = [(r, t) for r in range(args.repeat) for t in tasks]
        if args.sequence:  # in the order given, the n-th time a name comes its repeat n
            named = {t.path.stem: t for t in tasks}
            if missing := sorted(set(args.sequence) - set(named)):
                parser.error(f"--sequence: no problem named {', '.join(missing)} in level {level}")
            rounds = [(args.sequence[:i].count(name), named[name]) for i, name in enumerate(args.sequence)]
        items = [EvalItem(t, as_candidate(t.path.read_text()) + (f"# repeat {r}\n" if r else ""),
                          f"reference_as_candidate#{r}" if r else "reference_as_candidate")
                 for r, t in rounds]
        start = time.perf_counter()
        out = (args.out / f"records-L{level}.jsonl").open("w")

        records = evaluator.evaluate_many(items, on_record=functools.partial(show, out, len(items)))
        out.close()
        wall_s = time.perf_counter() - start
        counts = Counter(r.status for r in records)
        ok = [r for r in records if r.status == "ok"]
        table[level] = {
            "problems": len(records),
            "statuses": dict(counts),
            "fast_1": sum(1 for r in ok if faster(r)) / max(len(records), 1),
            "fast_1_point_estimate": sum(1 for r in ok if r.speedup > 1) / max(len(records), 1),
            "wall_s": wall_s,
            **copy_speedups(ok),
        }
        t = table[level]
        print(f"L{level}: {dict(counts)}  fast_1 {t['fast_1']:.1%} (point estimate > 1: "
              f"{t['fast_1_point_estimate']:.1%})  wall {wall_s:.0f} s", flush=True)
        if ok:
            print(f"L{level} copies: median speedup {t['speedup_median']:.3f}, 5-95% "
                  f"{t['speedup_p5']:.3f}-{t['speedup_p95']:.3f}, interval contains 1 for "
                  f"{t['interval_contains_1']}/{len(ok)} ({t['unwidened_contain_1']}/"
                  f"{len(ok) - t['intervals_widened']} of those not widened)", flush=True)
    total_s = time.perf_counter() - grand
    (args.out / "summary.json").write_text(json.dumps({"levels": table, "wall_s": total_s,
                                                       "hardware": hw.name}, indent=2) + "\n")
    total = sum(t["problems"] for t in table.values())
    total_ok = sum(t["statuses"].get("ok", 0) for t in table.values())
    print(f"all: {total_ok}/{total} ok in {total_s:.0f} s")
    return 0 if total_ok == total else 1


if __name__ == "__main__":
    sys.exit(main())
