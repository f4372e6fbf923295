"""Session 34's suite figures in docs/benchmarks.md, recomputed from
docs/data/suite-cpu-2026-12-07-5ab7eca/ (the pytest lines and bench_worker_import.py's runs)."""

import json
import re
import statistics
from pathlib import Path

from tests.unit.test_refcheck_h100_078e0ce_figures import TEXT

DATA = Path(__file__).resolve().parents[2] / "docs" / "data" / "suite-cpu-2026-12-07-5ab7eca"


def summary(name: str) -> tuple[str, float]:
    line = next(ln for ln in (DATA / name).read_text().splitlines() if " in " in ln and "passed" in ln)
    counts = re.sub(r", \d+ warnings", "", line.split(" in ")[0])
    return counts, float(re.search(r" in ([\d.]+)s", line).group(1))


def test_the_suite_rows_recompute_from_the_pytest_lines():
    for commit, name in (("e096e21", "pytest-e096e21-split.txt"), ("5ab7eca", "pytest-5ab7eca.txt"),
                         ("b83f4f3", "pytest-b83f4f3.txt"), ("47f1a75", "pytest-47f1a75.txt"),
                         ("91151d0", "pytest-91151d0.txt"), ("7510972", "pytest-7510972.txt")):
        counts, wall = summary(name)
        shown = (f"| {wall:.0f} s |", f"| **{wall:.0f} s** |")
        assert f"| {counts} | " in TEXT and any(w in TEXT for w in shown), commit
    assert "rc=0" in (DATA / "pytest-5ab7eca.txt").read_text()
    minutes, seconds = divmod(round(summary("pytest-5ab7eca.txt")[1]), 60)
    assert f"## The test suite in {minutes} min {seconds} s" in TEXT


def test_the_three_failures_were_the_worker_lookup():
    text = (DATA / "pytest-e096e21-split.txt").read_text()
    assert text.count("FAILED") == 3 == text.count("cannot be read at")
    assert text.count("No such process (exit code 0)") == 3


def test_the_import_figures_recompute_from_the_runs():
    runs = json.loads((DATA / "worker_import.json").read_text())["runs"]
    at = lambda xs, q: sorted(xs)[round(q * (len(xs) - 1))]  # noqa: E731 - the benchmark's rule
    words = []
    for commit in ("e98f5cd~1", "e98f5cd"):
        cpu = [c for c, _ in runs[commit]]
        words.append(f"{statistics.median(cpu):.3f} s (5-95% {at(cpu, 0.05):.3f}-{at(cpu, 0.95):.3f})")
        assert len(cpu) == 15
    before, after = (statistics.median(c for c, _ in runs[k]) for k in ("e98f5cd~1", "e98f5cd"))
    text = f"median {words[0]}, 35 warpk modules; after (e98f5cd) {words[1]}, 10 modules;"
    assert f"{text} {after / before:.2f} of it" in TEXT
