"""What keeping an evaluator's lanes warm between calls saves (issue: evaluator throughput):
successive `evaluate_many` calls of a few candidates each, as a GRPO run makes one per step.

Two arms, side by side in one run, their calls interleaved (the order alternates per round):
- `cold`: a new Evaluator per call, closed after it (every call starts its trusted worker,
  reference worker and first candidate worker, each importing torch);
- `warm`: one Evaluator for every call (the lanes, with their workers, are kept between calls).
Each round's two calls evaluate the same `--per-call` bundled solutions (result cache off, so
every call measures): another set each round, or with `--same` the same set every round (a GRPO
run's steps over a small task set: the warm lane also keeps the task's reference loaded and
probed, and its time alone for a minute), with the protocol of `python -m warpk` and
`--timing-batches`.

    python benchmarks/bench_warm_lanes.py --hardware cpu --rounds 5 --per-call 2 [--same] --out DIR

Writes warm_lanes.json (every call's wall and statuses) and prints the median wall per call of
each arm and their ratio per round (median, min-max over rounds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.profile_evaluator import default_protocol, hardware_profile, items  # noqa: E402
from warpk.evaluator import Evaluator  # noqa: E402


def call(evaluator: Evaluator, batch: list) -> tuple[float, list[str]]:
    start = time.perf_counter()
    records = evaluator.evaluate_many(batch)
    return time.perf_counter() - start, [r.status for r in records]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--per-call", type=int, default=2)
    parser.add_argument("--timing-batches", type=int, default=10)
    parser.add_argument("--same", action="store_true", help="the same candidates every round")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    hardware = hardware_profile(args.hardware)
    protocol = default_protocol(result_cache=False, timing_batches=args.timing_batches)
    pool = items(None, hardware.device)
    need = args.per_call if args.same else args.rounds * args.per_call
    if len(pool) < need:
        print(f"bench_warm_lanes: {need} distinct candidates needed, {len(pool)} bundled for "
              f"hardware={args.hardware}; lower --rounds or --per-call")
        return 2
    batches = [pool[i:i + args.per_call] for i in range(0, need, args.per_call)]
    if args.same:
        batches = batches * args.rounds
    warm = Evaluator(protocol, hardware)
    calls = []
    try:
        for r in range(args.rounds):
            for arm in (("cold", "warm") if r % 2 == 0 else ("warm", "cold")):
                if arm == "cold":
                    with Evaluator(protocol, hardware) as cold:
                        wall_s, statuses = call(cold, batches[r])
                else:
                    wall_s, statuses = call(warm, batches[r])
                calls.append(dict(round=r, arm=arm, wall_s=wall_s, statuses=statuses))
                print(f"round {r} {arm}: {wall_s:.2f} s for {len(statuses)} candidates "
                      f"({', '.join(statuses)})", flush=True)
    finally:
        warm.close()
    by_round = {(c["round"], c["arm"]): c["wall_s"] for c in calls}
    ratios = [by_round[(r, "cold")] / by_round[(r, "warm")] for r in range(1, args.rounds)]  # round 0 warms
    summary = dict(
        hardware=args.hardware, per_call=args.per_call, timing_batches=args.timing_batches, same=args.same,
        cold_median_s=statistics.median(by_round[(r, "cold")] for r in range(1, args.rounds)),
        warm_median_s=statistics.median(by_round[(r, "warm")] for r in range(1, args.rounds)),
        ratio_median=statistics.median(ratios), ratio_min=min(ratios), ratio_max=max(ratios),
        note="round 0 is left out of the medians: the warm arm's first call starts its lanes",
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "warm_lanes.json").write_text(json.dumps(dict(summary=summary, calls=calls), indent=1))
    print(f"cold {summary['cold_median_s']:.2f} s, warm {summary['warm_median_s']:.2f} s per call of "
          f"{args.per_call} (median of rounds 1-{args.rounds - 1}); "
          f"cold / warm {summary['ratio_median']:.2f} "
          f"({summary['ratio_min']:.2f}-{summary['ratio_max']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
