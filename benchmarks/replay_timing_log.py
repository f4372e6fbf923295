"""The timing fields of recorded copies recomputed under the current rule (timing_phase.Timing):
from the trusted worker's debug log of a refcheck run (`WORKER_LOGS=1`, scripts/device_acceptance.sh)
and its records, each copy's baseline, timed pairs and alone batches are read back and passed
through `Timing.fields` as they are now, so a change to how the interval is made can be judged on
measured batches before a GPU is spent on it.

    python benchmarks/replay_timing_log.py --log DIR/trusted.log.gz --records DIR/records-L1.jsonl

Prints a line per copy whose interval changed and how many intervals contain 1 as recorded and as
replayed (a copy the log holds only part of, as recorded). The log has three decimals per batch,
so replayed ratios differ from the records' in the third or fourth digit.

Non-goals: no timing (the log's), no verdicts (the records').
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.evaluator.timing_phase import BASELINE_WARMUP_MS, WARMUP_BATCHES, Timing  # noqa: E402

TIMED = re.compile(r"batch (\d+) k=(\d+) reference ([\d.]+) ms candidate ([\d.]+) ms \((\w+) first\)")
BASELINE = re.compile(r"baseline batch (\d+) k=(\d+) reference ([\d.]+) ms")
ALONE = re.compile(r"alone batch (\d+) k=(\d+) candidate ([\d.]+) ms")


@dataclass
class Copy:
    """One copy's batches as the log gives them, per call in ms."""

    k: int
    alone_ms: tuple[float, ...]  # the reference's baseline, the batches that counted
    ref_ms: tuple[float, ...]  # the timed pairs, as time_batches lists them
    new_ms: tuple[float, ...]
    new_alone_ms: tuple[float, ...] = ()

    def timing(self) -> Timing:
        return Timing(self.k, self.ref_ms, self.new_ms, "replayed", new_alone_ms=self.new_alone_ms)

    def fields(self) -> dict:
        return self.timing().fields(self.alone_ms)


def copies(log: Path) -> list[Copy]:
    """Every copy in `log`, in order: a copy starts at its timed batch 0; its baseline is the last
    run of baseline batches before it (reference_alone's rule for which of them count), its alone
    batches the candidate's after its timed ones."""
    found: list[dict] = []
    baseline: list[float] = []  # the last baseline run before a copy (an after-run does not count)
    run: list[float] = []
    warm_ms, after_run = 0.0, False
    for line in gzip.open(log, "rt"):
        if m := BASELINE.match(line):
            batch, k, ms = int(m[1]), int(m[2]), float(m[3])
            if batch == 0:  # a new run: the next copy's, or the one after a copy's alone batches
                run, warm_ms = [], 0.0
                after_run = bool(found and found[-1]["new_alone"])
                if not after_run:
                    baseline = run
            if batch >= WARMUP_BATCHES and warm_ms >= BASELINE_WARMUP_MS:
                run.append(ms / k)
            warm_ms += ms
        elif m := ALONE.match(line):
            if int(m[1]) > 0 and found:  # batch 0 warms up
                found[-1]["new_alone"].append(float(m[3]) / int(m[2]))
        elif m := TIMED.match(line):
            batch, k = int(m[1]), int(m[2])
            if batch == 0:
                found.append(dict(k=k, alone=list(baseline), orders={"candidate": [], "reference": []},
                                  new_alone=[]))
            if batch >= WARMUP_BATCHES:
                found[-1]["orders"][m[5]].append((float(m[3]) / k, float(m[4]) / k))
    result = []
    for c in found:
        ref, new = [], []
        for one, other in zip(c["orders"]["candidate"], c["orders"]["reference"], strict=False):
            ref += [one[0], other[0]]
            new += [one[1], other[1]]
        result.append(Copy(c["k"], tuple(c["alone"]), tuple(ref), tuple(new), tuple(c["new_alone"])))
    return result


def inside(fields: dict) -> bool:
    return fields["speedup_low"] <= 1 <= fields["speedup_high"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, required=True, help="the trusted worker's log (.gz)")
    parser.add_argument("--records", type=Path, required=True, help="the run's records (.jsonl)")
    args = parser.parse_args()
    records = [json.loads(line) for line in args.records.read_text().splitlines() if line.strip()]
    found = copies(args.log)
    if len(found) != len(records):
        print(f"{len(found)} copies in the log, {len(records)} records: not one run", file=sys.stderr)
        return 2
    before = after = 0
    for record, copy in zip(records, found, strict=True):
        now = copy.fields() if len(copy.new_ms) >= record["timing_batches"] else record
        if now is record:  # the log ends inside this copy (the run's limit): kept as recorded
            print(f"{record['task_id']}: {len(copy.new_ms)} of its {record['timing_batches']} batches "
                  "in the log, kept as recorded")
        before, after = before + inside(record), after + inside(now)
        if abs(now["speedup_high"] - record["speedup_high"]) > 2e-3 * record["speedup_high"]:
            print(f"{record['task_id']}: {record['speedup']:.3f} [{record['speedup_low']:.3f}, "
                  f"{record['speedup_high']:.3f}] -> [{now['speedup_low']:.3f}, {now['speedup_high']:.3f}]")
    print(f"intervals containing 1: {before} of {len(records)} recorded, {after} replayed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
