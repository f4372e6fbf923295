"""The `make reproduce` figures of docs/reports.md and docs/training.md (2026-12-07), recomputed
from docs/data/reproduce-cpu-2026-12-07-4f604c2/ (seed 0 of the learning claim re-run) and the
claim's committed seed 0."""

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "reproduce-cpu-2026-12-07-4f604c2"
CLAIM = REPO / "docs" / "data" / "learning-synthetic-claim-e49ae00" / "seed0"
REPORTS = " ".join((REPO / "docs" / "reports.md").read_text().split())
TRAINING = " ".join((REPO / "docs" / "training.md").read_text().split())


def seed0(folder: Path) -> dict:
    (seed,) = json.loads((folder / "bench_learning.json").read_text())["seeds"]
    assert seed["seed"] == 0
    return seed


def test_seed_0_beside_the_claims_seed_0():
    now, then = seed0(DATA), seed0(CLAIM)
    pairs = {key: [f"{run[arm][key]:.3f}" for arm in ("m0", "m1") for run in (now, then)]
             for key in ("heldout_correct_rate", "heldout_reward", "correct_rate")}
    m0, m0_then, m1, m1_then = pairs["heldout_correct_rate"]
    assert f"held-out correct M0 {m0} (claim {m0_then}), M1 {m1} ({m1_then})" in REPORTS
    assert f"held-out correct M0 {m0} / M1 {m1} against the claim's {m0_then} / {m1_then}" in TRAINING
    r0, r0_then, r1, r1_then = pairs["heldout_reward"]
    assert f"held-out mean reward M0 {r0} ({r0_then}), M1 {r1} ({r1_then})" in REPORTS
    assert f"held-out mean reward {r0} / {r1} against {r0_then} / {r1_then}" in TRAINING
    c0, c0_then, c1, c1_then = pairs["correct_rate"]
    assert f"train-split correct M0 {c0} ({c0_then}), M1 {c1} ({c1_then})" in REPORTS
    assert now["m1"]["heldout_correct_rate"] <= now["m0"]["heldout_correct_rate"]  # the finding
    table = (DATA / "against.md").read_text()
    assert f"| 0 | M0 | held-out correct | {m0} | {m0_then} |" in table


def test_the_times():
    meta = json.loads((DATA / "bench_learning.json").read_text())["meta"]
    assert meta["commit"].startswith("4f604c2") and "+experiment=synthetic_learning_claim" in meta["command"]
    assert f"{meta['wall_s']:.0f} s for seed 0" in TRAINING
    times = (DATA / "times.txt").read_text()
    minutes, seconds = re.search(r"real\s+(\d+)m([\d.]+)s", times).groups()
    assert f"**{minutes} min {float(seconds):.0f} s** in all" in REPORTS
    assert f"the learning claim's seed 0 44 min ({meta['wall_s']:.0f} s)" in REPORTS
