"""Where one candidate's wall time goes (benchmarks/profile_evaluator.py): with WARPK_PROFILE set
to a file, the lane (parent side) and the trusted worker each append one JSON line per candidate
with the seconds of each of their steps, keyed by the candidate worker's pid.

A diagnostic only: nothing here decides a verdict or reaches a record, and the worker
processes' own reports are not used (every lap is the trusted or the parent process's clock).

Non-goals: no statistics (the benchmark's).
"""

from __future__ import annotations

import json
import os
import time


class Stopwatch:
    """Laps of one side's steps: `lap(name)` charges the time since the last lap to `name`."""

    def __init__(self, side: str):
        self.side = side
        self.path = os.environ.get("WARPK_PROFILE")
        self.last = time.perf_counter()
        self.phases: dict[str, float] = {}
        self.counts: dict[str, int] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.phases[name] = self.phases.get(name, 0.0) + now - self.last
        self.last = now

    def count(self, name: str, n: int = 1) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    def write(self, **about) -> None:
        """One line in $WARPK_PROFILE (appended whole: both sides write to one file)."""
        if not self.path:
            return
        line = json.dumps({"side": self.side, **about, "phases_s": self.phases}) + "\n"
        with open(self.path, "a") as f:
            f.write(line)
