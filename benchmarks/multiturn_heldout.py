"""Single-shot against 2-turn held-out correct rate at one generation budget, on the claim run's M0s.

The design is docs/training.md, "Multi-turn on the same family". Per seed S: the claim's own M0
held-out evaluation (8 samples per task) is the single-shot arm; this script adds the 2-turn arm,
`stage=evaluate` of the same M0 adapter with `model.turns=2` and 4 conversations per task (the
same 192 generations over the 24 held-out tasks), run from the claim's archived tree.

    python benchmarks/multiturn_heldout.py --tree /tmp/claim-tree --runs /tmp/claim \\
        --claim docs/data/learning-synthetic-claim-e49ae00 --out docs/data/multiturn-synthetic-e49ae00

--runs holds the claim's run dirs (seedS/runs/seedS/m0/adapter); --claim the committed records
(seedS/m0-records.jsonl.gz, the single-shot arm, and bench_learning.json, its command).
`--summarise` only recomputes the table from --out's committed records.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.records import EvalRecord  # noqa: E402
from warpk.stats import t_interval  # noqa: E402

SUITE_KEYS = ("tasks.size=", "tasks.vocabulary=", "tasks.max_ops=", "tasks.seed=",
              "evaluate.timing_batches=", "evaluate.cache_dir=")
TURNS, CONVERSATIONS = 2, 4  # 2 x 4 = the single-shot arm's 8 generations per task


def read_records(path: Path) -> list[EvalRecord]:
    text = gzip.decompress(path.read_bytes()).decode() if path.suffix == ".gz" else path.read_text()
    return [EvalRecord.from_json(line) for line in text.splitlines()]


def claim_overrides(claim: Path, seed: int) -> list[str]:
    """The suite and evaluator settings of the claim's command (the same tasks, cache, timing)."""
    command = json.loads((claim / f"seed{seed}" / "bench_learning.json").read_text())["meta"]["command"]
    return [word for word in shlex.split(command) if word.startswith(SUITE_KEYS)]


def heldout_names(records: list[EvalRecord]) -> list[str]:
    return sorted({r.task_id.split("/", 1)[1] for r in records})


def run_two_turn(tree: Path, runs: Path, claim: Path, seed: int, out: Path) -> float:
    """The 2-turn arm of one seed into out/seedS; its wall seconds."""
    single = read_records(claim / f"seed{seed}" / "m0-records.jsonl.gz")
    run_dir = Path(tempfile.gettempdir()) / "warpk-multiturn" / f"seed{seed}"  # the adapters' samples
    overrides = [
        "stage=evaluate", "policy=small", "hardware=cpu", "logger=disabled", f"seed={seed}",
        "tasks=synthetic",
        *claim_overrides(claim, seed), "tasks.split=heldout",
        f"tasks.subset=[{','.join(heldout_names(single))}]",
        f"policy.checkpoint={runs / f'seed{seed}' / 'runs' / f'seed{seed}' / 'm0' / 'adapter'}",
        f"model.turns={TURNS}", f"train.samples_per_task={CONVERSATIONS}", f"hydra.run.dir={run_dir}",
    ]  # fmt: skip
    print("$ python -m warpk", " ".join(overrides), flush=True)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(tree)}
    result = subprocess.run([sys.executable, "-m", "warpk", *overrides], cwd=tree, env=env,
                            capture_output=True, text=True)  # fmt: skip
    if result.returncode:
        why = result.stderr[-3000:]
        raise SystemExit(f"seed {seed}: the 2-turn evaluation failed ({result.returncode}):\n{why}")
    wall_s = time.perf_counter() - start
    folder = out / f"seed{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    records = (run_dir / "records.jsonl").read_bytes()
    (folder / "two-turn-records.jsonl.gz").write_bytes(gzip.compress(records, 9))
    summary = json.loads((run_dir / "summary.json").read_text())
    (folder / "two-turn-summary.json").write_text(json.dumps(summary, indent=2))
    command = f"cd {tree} && python -m warpk {shlex.join(overrides)}\n# {wall_s:.0f} s\n"
    (folder / "command.txt").write_text(command)
    return wall_s


def seed_row(claim: Path, out: Path, seed: int) -> dict:
    single = read_records(claim / f"seed{seed}" / "m0-records.jsonl.gz")
    last = read_records(out / f"seed{seed}" / "two-turn-records.jsonl.gz")
    summary = json.loads((out / f"seed{seed}" / "two-turn-summary.json").read_text())
    if heldout_names(single) != heldout_names(last) or len(single) != TURNS * len(last):
        raise SystemExit(f"seed {seed}: the arms differ in tasks or generation budget")
    return {
        "seed": seed,
        "single_shot_correct": sum(r.status == "ok" for r in single) / len(single),
        "two_turn_last_correct": sum(r.status == "ok" for r in last) / len(last),
        "two_turn_turn0_correct": summary["turn0/correct_rate"],
        "generations": len(single),
    }


def summarise(rows: list[dict]) -> dict:
    diffs = [r["two_turn_last_correct"] - r["single_shot_correct"] for r in rows]
    iv = t_interval(diffs, 0.95)
    return {"two_turn_minus_single": {"mean": iv.estimate, "low": iv.low, "high": iv.high, "n": iv.n}}


def markdown(rows: list[dict], summary: dict) -> str:
    lines = ["| seed | single-shot correct (8 a task) | 2-turn last answer (4 a task) | 2-turn turn 0 "
             "| generations a seed |", "|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        lines.append(f"| {r['seed']} | {r['single_shot_correct']:.3f} | {r['two_turn_last_correct']:.3f} | "
                     f"{r['two_turn_turn0_correct']:.3f} | {r['generations']} |")  # fmt: skip
    d = summary["two_turn_minus_single"]
    span = "" if d["low"] is None else f" [{d['low']:+.3f}, {d['high']:+.3f}]"
    lines += ["", f"2-turn minus single-shot, paired over {d['n']} seeds: {d['mean']:+.3f}{span} (95% t)", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--claim", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--tree", type=Path, help="the claim's archived tree (with its .commit)")
    parser.add_argument("--runs", type=Path, help="the claim's run dirs (M0 adapters)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--summarise", action="store_true", help="only the table, from --out's records")
    args = parser.parse_args()
    if not args.summarise:
        if not (args.tree and args.runs):
            parser.error("--tree and --runs are needed to run the 2-turn arm (or pass --summarise)")
        commit = (args.tree / ".commit").read_text().strip()
        if not re.match(r"[0-9a-f]{40}$", commit):
            raise SystemExit(f"{args.tree}/.commit does not hold a commit")
        for seed in args.seeds:
            wall_s = run_two_turn(args.tree, args.runs, args.claim, seed, args.out)
            print(f"seed {seed}: {wall_s:.0f} s", flush=True)
    rows = [seed_row(args.claim, args.out, s) for s in args.seeds]
    summary = summarise(rows)
    (args.out / "multiturn.json").write_text(json.dumps({"seeds": rows, "summary": summary}, indent=2))
    (args.out / "multiturn.md").write_text(markdown(rows, summary))
    print(markdown(rows, summary))


if __name__ == "__main__":
    main()
