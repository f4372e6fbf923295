"""Where the CPU exploit corpus's time goes (issue: evaluator throughput, fast tests): the test
fixture's one `evaluate_many` over the corpus's CPU files and their controls
(tests/integration/test_exploits.py), each record's wall, load, correctness and timing seconds,
slowest first.

    python benchmarks/corpus_walls.py [--out FILE]

Prints the total and one line per record, then how long the lane waited, outside every record's
wall, for the next worker's Ready (its torch import: `Lane._wait_spare`) and for the trusted
worker's (`TrustedProcess.wait_ready`); with --out also writes the records as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tests.integration.test_exploits as corpus  # noqa: E402
from warpk.evaluator import lane  # noqa: E402

WAITS: Counter = Counter()


def timed(cls, name: str) -> None:
    """`cls.name` with its seconds added up in WAITS (a diagnostic: no verdict reads it)."""
    inner = getattr(cls, name)

    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            WAITS[name] += time.perf_counter() - start

    setattr(cls, name, wrapper)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    timed(lane.Lane, "_wait_spare")
    timed(lane.TrustedProcess, "wait_ready")
    evaluator = corpus.Evaluator(corpus._protocol(), corpus._hardware("cpu"), lanes=[""])
    start = time.perf_counter()
    records = corpus._evaluate(evaluator, corpus.CPU_EXPLOITS)
    total_s = time.perf_counter() - start
    print(f"{len(records)} records in {total_s:.1f} s")
    print(f"{'wall s':>7} {'load s':>6} {'corr s':>6} {'time s':>6} status         candidate")
    rows = sorted(records.items(), key=lambda kv: -(kv[1].wall_s or 0.0))
    for name, r in rows:
        print(f"{r.wall_s or 0:7.2f} {r.compile_s or 0:6.2f} {r.correctness_s or 0:6.2f} "
              f"{r.timing_s or 0:6.2f} {r.status:14s} {name}")
    print(f"the lane waited {WAITS['_wait_spare']:.1f} s for the next worker's Ready and "
          f"{WAITS['wait_ready']:.1f} s for the trusted worker's ({len(records)} records)")
    if args.out:
        args.out.write_text("".join(json.dumps({"candidate": name, "status": r.status, "wall_s": r.wall_s,
                                                "compile_s": r.compile_s}) + "\n" for name, r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
