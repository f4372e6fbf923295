"""Should the lane's next worker, importing torch on cores apart from the lane's, be frozen while
the current candidate is timed (issue: evaluator throughput)?

The next worker has run no candidate code (it imports torch and waits), so freezing it is about
precision, not trust: its import, left running, shares the trusted worker's cores while that
worker drives the timed round trips. Frozen, the import waits for the timing and is paid between
candidates. Two arms, side by side in one run, the order alternating per round, each call a fresh
Evaluator over the bundled suite's references as candidates (copies: true speedup 1), result
cache off:
- `frozen`: the trusted worker freezes it while anything is timed (`Lane.freeze_spare`, the rule);
- `thawed`: it imports through the timing (`Lane.freeze_spare` False).
On a machine with no cpuset cgroup, or one core, the next worker shares the lane's cores, where
thawing it is known to stretch batches (said, exit 2).

    python benchmarks/bench_spare_thawed.py --rounds 2 --out DIR

Writes spare_thawed.json (every call's wall and every copy's speedup and interval) and prints per
arm the median wall, the copies' median speedup, how many intervals contain 1 and the median
interval width, and the frozen / thawed wall ratio per round.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.kernelbench_refcheck import as_candidate  # noqa: E402
from benchmarks.profile_evaluator import default_protocol, hardware_profile  # noqa: E402
from warpk.config import TasksConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator, lane  # noqa: E402
from warpk.evaluator.resources import placement  # noqa: E402
from warpk.tasks import load_suite  # noqa: E402

ORIGINAL_INIT = lane.Lane.__init__
ARMS = ("frozen", "thawed")


def _thawed(self, *args, **kwargs) -> None:
    ORIGINAL_INIT(self, *args, **kwargs)
    self.freeze_spare = False


def call(arm: str, protocol, hardware, batch: list) -> dict:
    lane.Lane.__init__ = _thawed if arm == "thawed" else ORIGINAL_INIT
    try:
        start = time.perf_counter()
        with Evaluator(protocol, hardware) as evaluator:
            records = evaluator.evaluate_many(batch)
        wall_s = time.perf_counter() - start
    finally:
        lane.Lane.__init__ = ORIGINAL_INIT
    copies = [dict(task=r.task_id, status=r.status, speedup=r.speedup, low=r.speedup_low,
                   high=r.speedup_high) for r in records]
    return dict(arm=arm, wall_s=wall_s, copies=copies)


def arm_summary(calls: list[dict]) -> dict:
    ok = [c for call_ in calls for c in call_["copies"] if c["status"] == "ok"]
    return dict(
        wall_median_s=statistics.median(c["wall_s"] for c in calls),
        copies=sum(len(c["copies"]) for c in calls), ok=len(ok),
        speedup_median=statistics.median(c["speedup"] for c in ok) if ok else None,
        contains_1=sum(1 for c in ok if c["low"] <= 1 <= c["high"]),
        width_median=statistics.median(c["high"] - c["low"] for c in ok) if ok else None,
        # the copies' scatter (their true speedup is 1): what a noisier timing shows first
        log_sd=statistics.stdev(math.log(c["speedup"]) for c in ok) if len(ok) > 1 else None,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tasks", type=int, default=24, help="the first N bundled tasks")
    parser.add_argument("--timing-batches", type=int, default=10)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    if "cpuset" not in placement()[1] or len(os.sched_getaffinity(0)) < 2:
        print("bench_spare_thawed: no cpuset cgroup here, or one core: the next worker would share "
              "the lane's cores")
        return 2
    hardware = hardware_profile(args.hardware)
    protocol = default_protocol(result_cache=False, timing_batches=args.timing_batches, energy="none")
    tasks = load_suite(TasksConfig(source="bundled"))[:args.tasks]
    batch = [EvalItem(t, as_candidate(t.path.read_text()), "reference_as_candidate") for t in tasks]
    calls = []
    for r in range(args.rounds):
        for arm in ARMS if r % 2 == 0 else ARMS[::-1]:
            result = dict(round=r, **call(arm, protocol, hardware, batch))
            calls.append(result)
            s = arm_summary([result])
            print(f"round {r} {arm}: {result['wall_s']:.1f} s, {s['ok']}/{s['copies']} ok, median "
                  f"{s['speedup_median']:.3f}, interval contains 1 for {s['contains_1']}, median width "
                  f"{s['width_median']:.3f}", flush=True)
    by = {(c["round"], c["arm"]): c["wall_s"] for c in calls}
    ratios = [by[(r, "frozen")] / by[(r, "thawed")] for r in range(args.rounds)]
    summary = {arm: arm_summary([c for c in calls if c["arm"] == arm]) for arm in ARMS}
    summary.update(hardware=args.hardware, tasks=len(batch), timing_batches=args.timing_batches,
                   ratio_median=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios))
    args.out.mkdir(parents=True, exist_ok=True)
    report = json.dumps(dict(summary=summary, calls=calls), indent=1)
    (args.out / "spare_thawed.json").write_text(report + "\n")
    for arm in ARMS:
        s = summary[arm]
        print(f"{arm}: wall {s['wall_median_s']:.1f} s (median of {args.rounds}), "
              f"{s['ok']}/{s['copies']} ok, "
              f"copies' median {s['speedup_median']:.3f}, interval contains 1 for {s['contains_1']}, "
              f"median width {s['width_median']:.3f}, sd of log speedup {s['log_sd']:.3f}")
    print(f"frozen / thawed wall {summary['ratio_median']:.2f} "
          f"({summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
