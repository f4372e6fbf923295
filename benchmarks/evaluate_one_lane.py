"""Candidates of one bundled task through one evaluator lane, in order, so they share its
reference baseline (the red-team rounds' way of running an attack next to plain copies).

    python benchmarks/evaluate_one_lane.py 01_softmax tests/data/exploits/59_*.py copy \
        kernelbench/solutions/01_softmax/torch_fused.py copy

`copy` is the task's reference renamed ModelNew. One JSON line per record with its timing
fields (speedup and interval, both sides' times, the baseline, ref_contention, the candidate
alone, basis). Add WARPK_DEBUG_TIMING=1 WARPK_WORKER_LOGS=DIR for every batch's time.
A diagnostic on the CPU profile: nothing here is a benchmark figure by itself.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.kernelbench_refcheck import hardware  # noqa: E402
from warpk.config import EvaluateConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator  # noqa: E402
from warpk.tasks import load_task_file  # noqa: E402

FIELDS = ("candidate", "status", "speedup", "speedup_low", "speedup_high", "runtime_ms", "ref_runtime_ms",
          "ref_alone_runtime_ms", "ref_contention", "new_alone_runtime_ms", "basis", "error")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("task", help="a bundled task (kernelbench/problems/TASK.py)")
    parser.add_argument("candidates", nargs="+", help="candidate files, or `copy`")
    parser.add_argument("--timing-batches", type=int, default=10)
    parser.add_argument("--memory-limit-gb", type=float, default=2.0)
    args = parser.parse_args()
    path = REPO / "kernelbench" / "problems" / f"{args.task}.py"
    task, reference = load_task_file(path), path.read_text()
    items = []
    for i, name in enumerate(args.candidates):
        source = re.sub(r"\bModel\b", "ModelNew", reference) if name == "copy" else Path(name).read_text()
        items.append(EvalItem(task, source, f"{i}:{Path(name).name}"))
    protocol = EvaluateConfig(result_cache=False, timing_batches=args.timing_batches,
                              memory_limit_gb=args.memory_limit_gb, compile_timeout_s=120.0)
    with Evaluator(protocol, hardware("cpu"), lanes=[""]) as evaluator:
        evaluator.evaluate_many(items, on_record=lambda i, r: print(
            json.dumps({k: getattr(r, k) for k in FIELDS}), flush=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
