"""tasks=synthetic through the front door: `python -m warpk tasks=synthetic` generates the suite
into the cache (its line says what was kept and dropped) and the sandboxed evaluator gives the
generator's own solutions `ok`, as the in-process execution filter did."""

import pytest

from tests.conftest import run_warpk
from warpk.records import EvalRecord

pytestmark = pytest.mark.slow  # one real run: ~15 s on 2 cores


def test_the_front_door_generates_the_suite_and_the_evaluator_agrees_with_the_filter(tmp_path):
    run_dir = tmp_path / "run"
    result = run_warpk(f"hydra.run.dir={run_dir}", "tasks=synthetic", f"tasks.root={tmp_path / 'syn'}",
                       "tasks.size=12", "tasks.seed=7", "tasks.split=heldout", "evaluate.energy=none",
                       # statuses are asserted, not speedups: the protocol's fewest batches, short
                       "evaluate.timing_batches=3", "evaluate.batch_target_ms=5",
                       "logger=disabled")
    assert result.returncode == 0, result.stderr[-2000:]
    line = next(t for t in result.stdout.splitlines() if t.startswith("tasks=synthetic: 12 tasks"))
    assert "benchmark collisions dropped" in line and "failed the execution filter" in line
    records = [EvalRecord.from_json(t) for t in (run_dir / "records.jsonl").read_text().splitlines()]
    assert records and all(r.task_id.startswith("synthetic/") for r in records)
    assert [r for r in records if r.status != "ok"] == []
