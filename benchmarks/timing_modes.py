"""Which side was fast, and when, in a refcheck run's trusted debug log (`WORKER_LOGS=1`,
scripts/device_acceptance.sh): per copy, each side's interleaved batches against the reference's
own baseline (the same worker back to back before any candidate code ran), for the whole batch
and for the trusted worker's copy of its outputs (the `unpack` lines of a big task), and how often
the reference's batch was more than 5% faster than the candidate's by what ran just before it.

    python benchmarks/timing_modes.py --log DIR/trusted.log.gz --records DIR/records-L1.jsonl \
        [--first 26 --last 39]

The huge L1 copies on the H100 (2026-12-07): the reference ~10% faster interleaved than in its
baseline, the candidate not, mostly right after the candidate in the same batch (docs/benchmarks.md).

Non-goals: no intervals (replay_timing_log.py), no verdicts (the records').
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import statistics
from pathlib import Path

BATCH = re.compile(r"batch (\d+) k=\d+ reference ([\d.]+) ms candidate ([\d.]+) ms \((\w+) first\)")
BASELINE = re.compile(r"baseline batch (\d+) k=\d+ reference ([\d.]+) ms")
UNPACK = re.compile(r"unpack \d+ MiB: map [\d.]+ ms, copy ([\d.]+) ms")
FAST = 0.95  # the reference's batch this much of the candidate's or less: fast
WARMUP = 2  # timed batches before these are warmups (timing_phase.WARMUP_BATCHES)


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def number(record: dict) -> int:
    return int(record["task_id"].split("/")[-1].split("_")[0])


def batches(log: Path) -> list[dict]:
    """Per copy, in order: its baseline's (wall, copy) ms, its timed batches' per side after the
    warmups, and every timed batch as (reference ms, candidate ms, who went first). A copy's
    `copy` ms is None where the log has no unpack line for it (a task below the big size)."""
    found, pending, baseline = [], [], []
    for line in gzip.open(log, "rt"):
        if m := UNPACK.match(line):
            pending.append(float(m[1]))
        elif m := BASELINE.match(line):
            baseline = [] if m[1] == "0" else baseline
            baseline.append((float(m[2]), pending[-1] if pending else None))
            pending = []
        elif m := BATCH.match(line):
            if m[1] == "0":
                found.append(dict(baseline=baseline, ref=[], new=[], order=[]))
            first, second = (pending[-2:] if len(pending) >= 2 else (None, None))
            ref_copy, new_copy = (second, first) if m[4] == "candidate" else (first, second)
            pending = []
            found[-1]["order"].append((float(m[2]), float(m[3]), m[4]))
            if int(m[1]) >= WARMUP:
                found[-1]["ref"].append((float(m[2]), ref_copy))
                found[-1]["new"].append((float(m[3]), new_copy))
        elif line.startswith("alone"):
            pending = []
    return found


def of_baseline(copy: dict, side: str, part: int) -> float | None:
    """A side's median interleaved (0: batch wall, 1: copy of outputs) over the baseline's."""
    mine = [x[part] for x in copy[side] if x[part] is not None]
    base = [x[part] for x in copy["baseline"] if x[part] is not None]
    if not mine or not base:
        return None
    return statistics.median(mine) / statistics.median(base)


def positions(chosen: list[dict]) -> dict[str, tuple[int, int]]:
    """(fast, of) reference batches by what ran just before the reference: the candidate in the
    same batch, the candidate at the end of the batch before, or the reference itself."""
    counts = {"same batch": [0, 0], "previous batch": [0, 0], "itself": [0, 0]}
    for copy in chosen:
        last = None  # who ran last in the batch before
        for i, (ref, new, first) in enumerate(copy["order"]):
            before = "same batch" if first == "candidate" else (
                "previous batch" if last == "candidate" else "itself")
            last = "reference" if first == "candidate" else "candidate"
            if i >= WARMUP:
                counts[before][0] += ref <= FAST * new
                counts[before][1] += 1
    return {k: (fast, n) for k, (fast, n) in counts.items()}


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the trusted worker's log (.gz)")
    parser.add_argument("--records", type=Path, required=True, help="the run's records (.jsonl)")
    parser.add_argument("--first", type=int, default=0, help="the lowest problem number to count")
    parser.add_argument("--last", type=int, default=10**6, help="the highest problem number to count")
    args = parser.parse_args()
    rs, found = records(args.records), batches(args.log)
    chosen = [(r, c) for r, c in zip(rs, found, strict=False) if args.first <= number(r) <= args.last]
    print("| copy | speedup | ref / baseline | candidate / baseline | ref copy / baseline "
          "| candidate copy / baseline |")
    print("|---|---:|---:|---:|---:|---:|")
    for r, c in chosen:
        cells = [of_baseline(c, side, part) for part in (0, 1) for side in ("ref", "new")]
        text = " | ".join("-" if x is None else f"{x:.3f}" for x in cells)
        print(f"| {r['task_id'].split('/')[-1]} | {r.get('speedup', float('nan')):.3f} | {text} |")
    for side, name in (("ref", "reference"), ("new", "candidate")):
        values = [x for _, c in chosen if (x := of_baseline(c, side, 0)) is not None]
        if values:
            print(f"{name} interleaved / its baseline: {spread(values)} over {len(values)} copies")
    said = ", ".join(f"{name} {fast} of {n}" for name, (fast, n) in positions([c for _, c in chosen]).items())
    print(f"reference fast (<= {FAST} of the candidate's batch) after: {said}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
