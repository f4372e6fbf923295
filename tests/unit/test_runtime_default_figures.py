"""The session-37 figures of docs/runtime.md on the default M4 run, recomputed from
docs/data/runtime-default-2026-12-07/: what the energy fix (an episode's last period counted
twice) moved, per policy and in PPO's ratio to the oracle static."""

import json
import statistics
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "runtime-default-2026-12-07"
TEXT = (REPO / "docs" / "runtime.md").read_text()


def per_request_j(name: str) -> dict[str, float]:
    by_policy = defaultdict(list)
    for line in (DATA / f"{name}-runtime_results.jsonl").read_text().splitlines():
        row = json.loads(line)
        if "energy_per_request_j" in row and "seed" in row:
            by_policy[row["policy"]].append(row["energy_per_request_j"])
    return {policy: statistics.mean(values) for policy, values in by_policy.items()}


def test_what_the_energy_fix_moved():
    before, after = per_request_j("before-fix"), per_request_j("after-fix")
    assert before.keys() == after.keys() and len(before) == 8
    change = [after[p] / before[p] - 1 for p in before]
    assert f"J/request {min(change):.1%} to {max(change):.1%} per policy" in TEXT.replace("−", "-")
    ppo = [d["M4 PPO"] / d["oracle static"] for d in (before, after)]
    assert f"PPO / oracle static {ppo[0]:.3f} -> {ppo[1]:.3f}" in TEXT
    assert f"M4 PPO {before['M4 PPO']:.1f} -> {after['M4 PPO']:.1f}" in TEXT
