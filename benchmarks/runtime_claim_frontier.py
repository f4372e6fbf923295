"""The held-out claim's PPO policies against every static setting and the best calm rule, on the
claim's own episodes, without training again.

The claim of 2026-12-05 (docs/runtime.md section 5) ran before the frontier and the calm-rule
baseline existed. Both are deterministic functions of the episodes (the grid on the held-out
episodes; the calm rule chosen on the tuning episodes, then run on the held-out ones), so they
are computed here for the same 20 episodes per regime, and the three PPO policies' episode rows
are read from the claim's data (`--claim`, runtime_results.jsonl per regime). Writes per regime
a Markdown table (frontier.md) and the figure (frontier-<regime>.png) under --out. SIMULATED:
measured cost fit, MODELLED cap/clock effect. About 1 min per regime on one core.

    python benchmarks/runtime_claim_frontier.py --claim docs/data/runtime-heldout-2026-12-05 \
        --out docs/data/runtime-heldout-2026-12-05/frontier
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from warpk.__main__ import compose_config  # noqa: E402
from warpk.runtime.arms.frontier import Standing, frontier_figure, frontier_table, pareto, points, standing  # noqa: E402
from warpk.runtime.control import baselines  # noqa: E402
from warpk.runtime.control.evaluation import evaluate, evaluation_seeds, tuning_seeds_of  # noqa: E402
from warpk.runtime.serving.env import ServingEnv, reward_weights, served_calibration  # noqa: E402
from warpk.tables import to_markdown  # noqa: E402

REGIMES = ("mixed", "latency_sensitive", "throughput")
CLAIMED = ("static max", "oracle static", "slo-slack feedback", "M4 PPO", "M4 PPO (train seed 1000)",
           "M4 PPO (train seed 2000)")  # fmt: skip


def mean(rows: list[dict], key: str) -> float:
    return sum(r[key] for r in rows) / len(rows)


def as_dict(s: Standing) -> dict:
    return {"policy": s.policy, "sla_attainment": s.sla_attainment,
            "energy_per_request_j": s.energy_per_request_j, "energy_share": s.energy_share,
            "frontier_static": s.static.label if s.static else None,
            "beaten_by": s.dominated_by.label if s.dominated_by else None}  # fmt: skip


def regime(name: str, claim: Path, out: Path, heldout_offset: int = 0) -> dict:
    overrides = ["model=m4", "hardware=cpu", "logger=disabled", f"sla={name}",
                 "runtime.selection.eval_seeds=20", f"runtime.selection.heldout_offset={heldout_offset}"]
    config = compose_config(overrides)
    rt = config.runtime
    env = ServingEnv(rt, config.sla, rt.served, served_calibration(config), **reward_weights(config))
    seeds = evaluation_seeds(config)
    rows: dict[str, list[dict]] = {}
    for line in (claim / f"{name}.jsonl").read_text().splitlines():
        row = json.loads(line)
        if not row.get("summary"):
            rows.setdefault(row["policy"], []).append(row)
    if sorted({r["seed"] for r in rows["M4 PPO"]}) != sorted(seeds):
        raise SystemExit(f"{claim / name}.jsonl: not the episodes of runtime.selection.eval_seeds=20 "
                         "(the claim's)")
    grid = baselines.sweep(env, baselines.full_grid(env), seeds)
    statics = points({a: env.setting(a).label for a in grid}, grid)
    rule = baselines.best_calm_rule(env, tuning_seeds_of(config))
    calm = evaluate(env, rule, seeds)
    calm_rows = [{"sla_attainment": r.sla_attainment, "energy_per_request_j": r.energy_per_request_j}
                 for r in calm]  # fmt: skip
    front = pareto(statics)
    standings = [standing(p, mean(rows[p], "sla_attainment"), mean(rows[p], "energy_per_request_j"), front)
                 for p in CLAIMED]  # fmt: skip
    standings.append(standing("best calm rule", mean(calm_rows, "sla_attainment"),
                              mean(calm_rows, "energy_per_request_j"), front))  # fmt: skip
    title = (f"The claim's policies against all {len(statics)} static settings, 20 held-out episodes, "
             f"sla={name}")  # fmt: skip
    frontier_figure(statics, standings, f"{title}; SIMULATED", out / f"frontier-{name}.png")
    with (out / "frontier.md").open("a") as md:
        table = to_markdown(frontier_table(standings, front, title))
        md.write(f"{table}\nbest calm rule (chosen on the tuning episodes): {rule.describe(env)}\n\n")
    listed = [as_dict(s) for s in standings]
    return {"regime": name, "calm_rule": rule.describe(env), "standings": listed}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--claim", type=Path, required=True, help="the claim's data folder (<regime>.jsonl)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--heldout-offset", type=int, default=0,
                        help="the claim's runtime.selection.heldout_offset (20: 2026-12-07's fresh claim)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "frontier.md").write_text("")
    results = []
    for name in REGIMES:
        results.append(regime(name, args.claim, args.out, args.heldout_offset))
        for s in results[-1]["standings"]:
            print(f"{name}: {s['policy']}: attainment {s['sla_attainment']:.4f}, "
                  f"{s['energy_per_request_j']:.1f} J/request, share of the frontier {s['energy_share']}")
    (args.out / "frontier.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
