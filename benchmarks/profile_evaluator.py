"""Where one candidate's wall time goes: a per-phase profile of the evaluator (issue: evaluator
throughput), per backend, on the bundled suite.

Runs the bundled solutions of `--tasks` through `Evaluator.evaluate_many` with the protocol of
`python -m warpk` (conf/config.yaml's `evaluate`, result cache off) and WARPK_PROFILE set, so the
lane (parent side) and the trusted worker each log the seconds of their steps per candidate
(warpk.evaluator.profile; every lap is the parent's or the trusted worker's clock). Prints a
table of medians per phase and backend, with each phase's share of the median wall.

    python benchmarks/profile_evaluator.py --hardware cpu --out results/profile-cpu
    python benchmarks/profile_evaluator.py --hardware h200 --out results/profile-h200

Writes profile.json (every candidate's phases and its record's status and wall) and profile.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.config import EvaluateConfig, HardwareConfig  # noqa: E402
from warpk.evaluator import EvalItem, Evaluator  # noqa: E402
from warpk.evaluator.static import backend_of  # noqa: E402
from warpk.tasks import BUNDLED_ROOT, load_task_file  # noqa: E402

CONF = Path(__file__).resolve().parents[1] / "conf"


def hardware_profile(name: str) -> HardwareConfig:
    raw = yaml.safe_load((CONF / "hardware" / f"{name}.yaml").read_text())
    raw.pop("clock_profiles", None)
    return HardwareConfig(**raw)


def default_protocol(**overrides) -> EvaluateConfig:
    """`python -m warpk`'s evaluate settings, with `overrides`."""
    raw = yaml.safe_load((CONF / "config.yaml").read_text())["evaluate"]
    return EvaluateConfig(**{**raw, **overrides})


def items(tasks: list[str] | None, device: str) -> list[EvalItem]:
    """Every bundled solution of `tasks` (all bundled tasks if None); on the CPU torch ones only."""
    import ast

    out = []
    for problem in sorted((BUNDLED_ROOT / "problems").glob("*.py")):
        if tasks and problem.stem not in tasks:
            continue
        task = load_task_file(problem)
        for solution in sorted((BUNDLED_ROOT / "solutions" / problem.stem).glob("*.py")):
            source = solution.read_text()
            if device == "cpu" and backend_of(ast.parse(source)) != "torch":
                continue
            out.append(EvalItem(task, source, f"{problem.stem}/{solution.name}"))
    return out


def table(rows: list[dict]) -> str:
    """Median seconds per phase, per backend, and each phase's share of the median wall."""
    lines = []
    for backend in sorted({r["backend"] for r in rows}):
        group = [r for r in rows if r["backend"] == backend]
        wall = statistics.median(r["wall_s"] for r in group)
        names: list[tuple[str, str]] = []
        for r in group:
            for side in ("lane", "trusted"):
                for name in r[side]:
                    if (side, name) not in names:
                        names.append((side, name))
        lines += [f"\n{backend}: {len(group)} candidates, median wall {wall:.2f} s\n",
                  "| side | phase | median s | share of median wall |", "|---|---|---:|---:|"]
        for side, name in names:
            median = statistics.median(r[side].get(name, 0.0) for r in group)
            lines.append(f"| {side} | {name} | {median:.3f} | {100 * median / wall:.0f}% |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hardware", default="cpu")
    parser.add_argument("--tasks", nargs="*", default=None, help="bundled task names (default: all)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--energy", default=None, help="evaluate.energy (default: conf/config.yaml's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    hardware = hardware_profile(args.hardware)
    batch = items(args.tasks, hardware.device)
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "profile.jsonl"
        os.environ["WARPK_PROFILE"] = str(log)  # read by the lane here and the trusted worker
        energy = {"energy": args.energy} if args.energy else {}
        protocol = default_protocol(result_cache=False, cache_dir=str(Path(scratch) / "cache"), **energy)
        evaluator = Evaluator(protocol, hardware)
        start = time.perf_counter()

        def progress(index: int, record) -> None:  # one line per candidate as it arrives: never silent
            wall = "-" if record.wall_s is None else f"{record.wall_s:.1f} s"
            print(f"  {index + 1}/{len(batch)} {record.candidate}: {record.status}, wall {wall}"
                  f" (at {time.perf_counter() - start:.0f} s)", flush=True)

        print(f"{len(batch)} candidates on {args.hardware}, energy {protocol.energy}", flush=True)
        records = evaluator.evaluate_many(batch, on_record=progress)
        total_s = time.perf_counter() - start
        lines = [json.loads(line) for line in log.read_text().splitlines()]
    lanes = {line["candidate_sha"]: line for line in lines if line["side"] == "lane"}
    trusted = {line["candidate_pid"]: line["phases_s"] for line in lines if line["side"] == "trusted"}
    rows = [dict(candidate=r.candidate, backend=r.backend, status=r.status, wall_s=r.wall_s,
                 lane=lane["phases_s"], trusted=trusted.get(lane["candidate_pid"], {}))
            for r in records if (lane := lanes.get(r.candidate_sha)) is not None]
    head = (f"{len(records)} candidates on {args.hardware} in {total_s:.1f} s "
            f"({sum(r.status == 'ok' for r in records)} ok); protocol: conf/config.yaml evaluate")
    text = head + "\n" + table(rows)
    print(text)
    (args.out / "profile.md").write_text(text + "\n")
    (args.out / "profile.json").write_text(json.dumps(dict(total_s=total_s, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
