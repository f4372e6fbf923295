"""docs/training.md's table of what trl overlaps (issue #31 item 3) recomputed from the probe's
data: a figure or an overlap claim that drifts from docs/data fails here."""

import json

from tests.conftest import REPO

DATA = json.loads((REPO / "docs/data/reward-overlap-cpu-2026-12-05/probe_reward_overlap.json").read_text())
DOC = (REPO / "docs" / "training.md").read_text()


def test_the_overlap_table_is_its_data():
    rows = {row["variant"]: row for row in DATA["rows"]}
    for variant, label in (("sync", "sync (what WARP-K gives trl)"), ("async", "async reward functions"),
                           ("spg2", "`steps_per_generation=2`"),
                           ("stale", "one-step-stale prototype (the benchmark's own subclass)")):
        row = rows[variant]
        assert f"| {label} | {row['wall_s']:.2f} s | {row['wall_s'] / row['steps']:.2f} s |" in DOC
    # the claim: nothing of trl's own overlaps the evaluation with generation; the subclass does
    for variant in ("sync", "async", "spg2"):
        assert not any("generate" in pair for pair in rows[variant]["overlapping"])
    assert ["evaluate", "generate"] in rows["stale"]["overlapping"]
