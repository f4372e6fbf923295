"""The synthetic task generator's cost and yield (issue: task data at RL scale): `--size` tasks
generated from `--seed` and execution-filtered (warpk.evaluator.inprocess) into a fresh folder,
with what was drawn and dropped (duplicates, benchmark collisions, filter failures), the splits,
and the wall time; then `--sandboxed K` of the kept solutions put through the whole sandboxed
evaluator, which must give each `ok` as the filter did.

    python benchmarks/bench_synthetic.py --size 1000 --seed 0 --sandboxed 12 --out DIR

Writes DIR/bench_synthetic.json (the manifest, the wall time, the sandboxed statuses). The
folder of tasks goes to a temporary directory and is deleted (never committed in bulk).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.profile_evaluator import default_protocol, hardware_profile  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator  # noqa: E402
from warpk.evaluator.inprocess import check_solution  # noqa: E402
from warpk.synthetic.suite import Settings, build  # noqa: E402
from warpk.tasks import load_task_file  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-ops", type=int, default=5)
    p.add_argument("--sandboxed", type=int, default=12, help="kept solutions run by the whole evaluator")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory(prefix="warpk-synthetic-") as tmp:
        folder = Path(tmp) / "tasks"
        start = time.perf_counter()
        settings = Settings(seed=args.seed, size=args.size, max_ops=args.max_ops)
        manifest = build(settings, folder, check_solution)
        wall_s = time.perf_counter() - start
        print(f"{manifest.kept} tasks in {wall_s:.1f} s (drawn {manifest.drawn}: {manifest.duplicates} "
              f"duplicates, {manifest.collisions} benchmark collisions, {manifest.failed_check} failed the "
              f"filter); splits {manifest.splits}", flush=True)
        problems = sorted((folder / "problems").glob("*.py"))
        sample = random.Random(args.seed).sample(problems, min(args.sandboxed, len(problems)))
        statuses = []
        if sample:
            os.environ.setdefault("OMP_NUM_THREADS", "1")
            hardware = hardware_profile("cpu")
            evaluator = Evaluator(default_protocol(result_cache=False), hardware)
            solution = lambda p: (folder / "solutions" / p.stem / "fused.py").read_text()  # noqa: E731
            items = [EvalItem(load_task_file(p, "synthetic"), solution(p), "fused.py") for p in sample]
            for record in evaluator.evaluate_many(items):
                statuses.append({"task": record.task_id, "status": record.status, "speedup": record.speedup,
                                 "speedup_low": record.speedup_low, "speedup_high": record.speedup_high,
                                 "error": record.error})
                print(f"  {record.task_id}: {record.status} {record.speedup}", flush=True)
    result = {"date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv), "wall_s": round(wall_s, 2),
              "manifest": vars(manifest), "sandboxed": statuses}
    (args.out / "bench_synthetic.json").write_text(json.dumps(result, indent=2) + "\n")
    ok = sum(s["status"] == "ok" for s in statuses)
    print(f"sandboxed evaluator: {ok}/{len(statuses)} ok")
    return 0 if ok == len(statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
