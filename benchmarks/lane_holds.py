"""Where a test suite's (or any runs') time goes on the machine's lane lock: the holds that
`WARPK_LANE_LOG=FILE` recorded (warpk.evaluator.lane_lock), summed, and by test module.

    WARPK_LANE_LOG=/tmp/holds make test && python benchmarks/lane_holds.py /tmp/holds
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path


def read(path: Path) -> list[tuple[int, float, float, float, str]]:
    rows = []
    for line in path.read_text().splitlines():
        pid, asked, got, released, test = line.split(maxsplit=4)
        rows.append((int(pid), float(asked), float(got), float(released), test))
    return rows


def summary(rows: list) -> dict:
    """span (first ask to last release), held (sum of holds), waited (sum of waits), holds."""
    return {"span_s": max(r[3] for r in rows) - min(r[1] for r in rows),
            "held_s": sum(r[3] - r[2] for r in rows), "waited_s": sum(r[2] - r[1] for r in rows),
            "holds": len(rows)}


def by_module(rows: list) -> list[tuple[str, float, int]]:
    held: dict[str, list] = collections.defaultdict(lambda: [0.0, 0])
    for _, _, got, released, test in rows:
        entry = held[test.split("::")[0]]
        entry[0] += released - got
        entry[1] += 1
    return sorted(((m, s, n) for m, (s, n) in held.items()), key=lambda x: -x[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", type=Path, nargs="+")
    parser.add_argument("--top", type=int, default=8)
    args = parser.parse_args()
    for path in args.log:
        rows = read(path)
        s = summary(rows)
        print(f"{path}: {s['holds']} holds, held {s['held_s']:.0f} s of a {s['span_s']:.0f} s span, "
              f"waited {s['waited_s']:.0f} s")
        for module, held_s, n in by_module(rows)[:args.top]:
            print(f"  {held_s:6.1f} s in {n:3d} holds  {module}")


if __name__ == "__main__":
    main()
