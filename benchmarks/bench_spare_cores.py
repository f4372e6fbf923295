"""Where the lane's next worker should import torch (issue: evaluator throughput): on the lane's
own cores, beside the candidate being loaded and checked, or on the trusted worker's cores.

Two arms, side by side in one run, their calls interleaved (the order alternates per round), each
call a fresh Evaluator over the same `--candidates` bundled solutions (result cache off):
- `lane`: the worker started ahead is born on the lane's cores and stays there (before 2026-12-05);
- `others`: it is born on the other cores and moved to the lane's before its candidate
  (warpk.evaluator.lane, `Lane.spare_limits`).
On a machine with no cpuset cgroup, or one core, both arms are the same (said, exit 2).

    python benchmarks/bench_spare_cores.py --hardware cpu --rounds 3 --candidates 8 --out DIR

Writes spare_cores.json (every call's wall and statuses) and prints each arm's median wall and the
lane / others ratio per round (median, min-max).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.profile_evaluator import default_protocol, hardware_profile, items  # noqa: E402
from warpk.evaluator import Evaluator, lane  # noqa: E402
from warpk.evaluator.resources import placement  # noqa: E402

ORIGINAL_INIT = lane.Lane.__init__


def _spare_on_lane_cores(self, *args, **kwargs) -> None:
    ORIGINAL_INIT(self, *args, **kwargs)
    self.spare_limits = self.limits


def call(arm: str, protocol, hardware, batch: list) -> tuple[float, list[str]]:
    lane.Lane.__init__ = _spare_on_lane_cores if arm == "lane" else ORIGINAL_INIT
    try:
        start = time.perf_counter()
        with Evaluator(protocol, hardware) as evaluator:
            records = evaluator.evaluate_many(batch)
        return time.perf_counter() - start, [r.status for r in records]
    finally:
        lane.Lane.__init__ = ORIGINAL_INIT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--timing-batches", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if "cpuset" not in placement()[1] or len(os.sched_getaffinity(0)) < 2:
        print("bench_spare_cores: no cpuset cgroup here, or one core: both arms would be the same")
        return 2
    hardware = hardware_profile(args.hardware)
    protocol = default_protocol(result_cache=False, timing_batches=args.timing_batches)
    batch = items(None, hardware.device)[:args.candidates]
    calls = []
    for r in range(args.rounds):
        for arm in (("lane", "others") if r % 2 == 0 else ("others", "lane")):
            wall_s, statuses = call(arm, protocol, hardware, batch)
            calls.append(dict(round=r, arm=arm, wall_s=wall_s, statuses=statuses))
            print(f"round {r} {arm}: {wall_s:.2f} s for {len(statuses)} candidates "
                  f"({', '.join(sorted(set(statuses)))})", flush=True)
    by = {(c["round"], c["arm"]): c["wall_s"] for c in calls}
    ratios = [by[(r, "lane")] / by[(r, "others")] for r in range(args.rounds)]
    summary = dict(
        hardware=args.hardware, candidates=len(batch), timing_batches=args.timing_batches,
        lane_median_s=statistics.median(by[(r, "lane")] for r in range(args.rounds)),
        others_median_s=statistics.median(by[(r, "others")] for r in range(args.rounds)),
        ratio_median=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
    )
    args.out.mkdir(parents=True, exist_ok=True)
    report = json.dumps(dict(summary=summary, calls=calls), indent=1)
    (args.out / "spare_cores.json").write_text(report + "\n")
    print(f"spare on the lane's cores {summary['lane_median_s']:.1f} s, on the others "
          f"{summary['others_median_s']:.1f} s per call of {len(batch)} "
          f"(median of {args.rounds} rounds); "
          f"lane / others {summary['ratio_median']:.2f} "
          f"({summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
