"""What a sandboxed worker's start costs in CPU before any candidate arrives, at two commits side by
side (issue: evaluator throughput; the test suite is CPU-bound on these starts).

Every untrusted worker (candidate, next worker, reference worker, compile sandbox) is a fresh
interpreter that imports torch and then warpk.evaluator.untrusted. This times, in fresh
interpreters with torch already imported, the CPU (user + system) of that second import, the
commits alternating run by run, each commit's `warpk` package exported by `git archive` into a
folder of its own (bytecode not written, as in the sandbox: PYTHONDONTWRITEBYTECODE=1).

    python benchmarks/bench_worker_import.py --commits e98f5cd~1 e98f5cd --runs 15 --out DIR

Writes worker_import.json (every run's CPU seconds and warpk modules loaded) and prints per
commit the median CPU with its 5-95% range, the module count, and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
from io import BytesIO
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PROBE = """import resource, sys
import torch
before = resource.getrusage(resource.RUSAGE_SELF)
import warpk.evaluator.untrusted
after = resource.getrusage(resource.RUSAGE_SELF)
cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
print(cpu, sum(m.startswith("warpk") for m in sys.modules))
"""


def export(commit: str, into: Path) -> Path:
    """`commit`'s warpk package in a folder of its own."""
    archive = subprocess.run(["git", "archive", commit, "warpk"], cwd=REPO, capture_output=True, check=True)
    folder = into / commit.replace("~", "-").replace("/", "-")
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as tar:
        tar.extractall(folder, filter="data")
    return folder


def one_run(folder: Path) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(folder), "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"the probe failed in {folder}: {done.stderr.strip().splitlines()[-1:]}")
    cpu, modules = done.stdout.split()
    return float(cpu), int(modules)


def percentile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[round(q * (len(xs) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--commits", nargs=2, required=True, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--out", type=Path, default=REPO / "outputs" / "worker_import")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[tuple[float, int]]] = {c: [] for c in args.commits}
    with tempfile.TemporaryDirectory(prefix="warpk-import-") as tmp:
        folders = {c: export(c, Path(tmp)) for c in args.commits}
        for i in range(args.runs):
            for commit in args.commits if i % 2 == 0 else reversed(args.commits):
                runs[commit].append(one_run(folders[commit]))
            print(f"  run {i + 1}/{args.runs}", file=sys.stderr, flush=True)
    data = {"commits": args.commits, "runs": {c: [list(r) for r in v] for c, v in runs.items()}}
    (args.out / "worker_import.json").write_text(json.dumps(data, indent=1) + "\n")
    medians = {}
    for commit, values in runs.items():
        cpu = [c for c, _ in values]
        medians[commit] = statistics.median(cpu)
        print(f"{commit}: median {medians[commit]:.3f} s CPU (5-95% {percentile(cpu, 0.05):.3f}-"
              f"{percentile(cpu, 0.95):.3f}), {values[0][1]} warpk modules, {len(cpu)} runs")
    before, after = args.commits
    print(f"after / before: {medians[after] / medians[before]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
