"""Choose M4's PPO hyper-parameters on the tuning episodes only, then never look back (issue #15).

Every point of a grid over `runtime.ppo.*` runs `python -m warpk model=m4 sla=REGIME
runtime.selection.evaluate_on=tuning` for each regime: PPO and every baseline are evaluated on the tuning
episodes, never on the held-out ones. The chosen point is the one whose goal (>= 10% less energy
than the best static at equal or better attainment) holds in the most regimes, then the one with
the largest smallest saving over regimes. Its held-out result is a separate run:
`python -m warpk model=m4 sla=REGIME runtime.ppo.seeds=3 <the chosen overrides>`.

Jobs run side by side (`--jobs`, default the cores this process may use; each job's statics' grids
run in a second process meanwhile).

    python benchmarks/tune_runtime.py --out /tmp/tune \\
        --grid runtime.ppo.learning_rate=1e-4,3e-4,1e-3 runtime.ppo.gamma=0.9,0.95,0.99

Writes tune_runtime.json and tune_runtime.md to --out (every job's run dir under --out/runs, and
each finished job's row to rows.jsonl as it finishes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.hardware import usable_cores  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
REGIMES = ("mixed", "latency_sensitive", "throughput")
KEYS = ("ppo_energy_saving_vs_best_static", "ppo_sla_attainment_minus_best_static", "ppo_goal_met",
        "best_static_policy")  # fmt: skip


def points(grid: list[str]) -> list[tuple[str, ...]]:
    """Every combination of the grid's `key=v1,v2,...` axes, as override tuples."""
    axes = []
    for axis in grid:
        key, _, values = axis.partition("=")
        axes.append([f"{key}={v}" for v in values.split(",")])
    return list(itertools.product(*axes))


def run_job(out: Path, point: tuple[str, ...], regime: str, extra: list[str]) -> dict:
    """One stage=runtime run on the tuning episodes; the verdict keys of its summary.json."""
    name = "_".join(o.partition("=")[0].rsplit(".", 1)[-1] + o.partition("=")[2] for o in point) or "defaults"
    run_dir = out / "runs" / f"{name}-{regime}"
    cmd = [sys.executable, "-m", "warpk", "model=m4", f"sla={regime}", "runtime.selection.evaluate_on=tuning",
           "logger=disabled", *point, *extra, f"hydra.run.dir={run_dir}"]  # fmt: skip
    start = time.perf_counter()
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    row = {"point": list(point), "regime": regime, "wall_s": time.perf_counter() - start}
    if result.returncode:
        row["error"] = (result.stderr.strip().splitlines() or ["(no stderr)"])[-1]
    else:
        summary = json.loads((run_dir / "summary.json").read_text())
        row.update({k: summary[k] for k in KEYS})
    with (out / "rows.jsonl").open("a") as sink:  # kept if the sweep is stopped before its table
        sink.write(json.dumps(row) + "\n")
    if "error" in row:
        print(f"{name} {regime}: failed: {row['error']}", flush=True)
        return row
    print(f"{name} {regime}: saving {row[KEYS[0]]:.1%}, attainment {row[KEYS[1]]:+.3f}, goal "
          f"{'met' if row['ppo_goal_met'] else 'not met'} ({row['wall_s']:.0f} s)", flush=True)  # fmt: skip
    return row


def choose(rows: list[dict]) -> dict:
    """Per grid point: regimes where the goal was met and the smallest saving; the best point."""
    by_point: dict[tuple, list[dict]] = {}
    for r in rows:
        by_point.setdefault(tuple(r["point"]), []).append(r)
    scored = []
    for point, rs in by_point.items():
        ok = [r for r in rs if "error" not in r]
        scored.append({
            "point": list(point),
            "regimes_met": sum(bool(r["ppo_goal_met"]) for r in ok),
            "regimes": len(rs),
            "min_saving": min((r[KEYS[0]] for r in ok), default=float("-inf")),
            "failed": len(rs) - len(ok),
        })  # fmt: skip
    scored.sort(key=lambda s: (-s["failed"], s["regimes_met"], s["min_saving"]), reverse=True)
    ran = [s for s in scored if s["failed"] < s["regimes"]]
    return {"ranking": scored, "chosen": ran[0]["point"] if ran else None}


def markdown(meta: dict, rows: list[dict], choice: dict) -> str:
    lines = [f"# PPO hyper-parameters on the tuning episodes ({meta['date']}, {meta['machine']})", "",
             f"`{meta['command']}`", "",
             "Every figure is on the TUNING episodes (runtime.selection.evaluate_on=tuning): for choosing, "
             "not a result. SIMULATED serving (measured cost fit, MODELLED cap/clock).", "",
             "| point | regime | best static | saving (means) | attainment PPO - static | goal |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in sorted(rows, key=lambda r: (r["point"], r["regime"])):
        point = " ".join(r["point"]) or "(defaults)"
        if "error" in r:
            lines.append(f"| {point} | {r['regime']} | failed: {r['error']} | | | |")
            continue
        lines.append(f"| {point} | {r['regime']} | {r['best_static_policy']} | {r[KEYS[0]]:.1%} | "
                     f"{r[KEYS[1]]:+.3f} | {'met' if r['ppo_goal_met'] else 'not met'} |")  # fmt: skip
    lines += ["", "| rank | point | regimes met | smallest saving |", "|---|---|---|---|"]
    for i, s in enumerate(choice["ranking"], 1):
        lines.append(f"| {i} | {' '.join(s['point']) or '(defaults)'} | {s['regimes_met']}/{s['regimes']} | "
                     f"{s['min_saving']:.1%} |")  # fmt: skip
    if choice["chosen"] is None:
        lines += ["", "Nothing chosen: no point ran (see the failures above).", ""]
    else:
        chosen = " ".join(choice["chosen"]) or "(defaults)"
        lines += ["", f"Chosen: `{chosen}`. Total wall time {meta['wall_s']:.0f} s.", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grid", nargs="+", default=[], help="axes: key=v1,v2,... (runtime.ppo.* knobs)")
    parser.add_argument("--regimes", nargs="+", default=list(REGIMES))
    parser.add_argument("--jobs", type=int, default=usable_cores())
    parser.add_argument("overrides", nargs="*", help="extra warpk overrides for every job")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    jobs = [(p, regime) for p in points(args.grid) for regime in args.regimes]
    print(f"{len(jobs)} jobs, {args.jobs} at a time", flush=True)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_job, args.out, p, regime, args.overrides) for p, regime in jobs]
        rows = [f.result() for f in futures]
    meta = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {usable_cores()} cores",
        "command": "python " + " ".join([Path(sys.argv[0]).as_posix(), *sys.argv[1:]]),
        "wall_s": time.perf_counter() - start,
    }
    choice = choose(rows)
    (args.out / "tune_runtime.json").write_text(json.dumps({"meta": meta, "rows": rows, **choice}, indent=2))
    text = markdown(meta, rows, choice)
    (args.out / "tune_runtime.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
