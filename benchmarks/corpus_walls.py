"""Where the CPU exploit corpus's time goes (issue: evaluator throughput, fast tests): the test
fixture's one `evaluate_many` over the corpus's CPU files and their controls
(tests/integration/test_exploits.py), each record's wall, load, correctness and timing seconds,
slowest first.

    python benchmarks/corpus_walls.py [--out FILE]

Prints the total and one line per record; with --out also writes them as JSON lines.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import tests.integration.test_exploits as corpus  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
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
    if args.out:
        args.out.write_text("".join(json.dumps({"candidate": name, "status": r.status, "wall_s": r.wall_s,
                                                "compile_s": r.compile_s}) + "\n" for name, r in rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
