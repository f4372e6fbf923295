"""benchmarks/bench_learning.py: the held-out figures of a seed and `--merge`, which summarises the
seeds of one design run in several sittings (and refuses runs of different designs)."""

import importlib.util
import json
import math
from pathlib import Path

import pytest

from warpk.config import RewardConfig
from warpk.records import EvalRecord
from warpk.rewards import total_reward

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("bench_learning", REPO / "benchmarks" / "bench_learning.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def _record(status: str, speedup: float | None) -> EvalRecord:
    return EvalRecord(task_id="t", candidate="c", candidate_sha="0" * 64, status=status, speedup=speedup,
                      error=None if status == "ok" else "wrong values")


def test_heldout_scores_are_the_runs_records_mean_reward_and_ok_geomean(tmp_path):
    records = [_record("ok", 2.0), _record("ok", 0.5), _record("incorrect", None), _record("ok", 4.0)]
    (tmp_path / "records.jsonl").write_text("\n".join(r.to_json() for r in records) + "\n")
    scores = bench.heldout_scores(tmp_path, RewardConfig())
    assert scores["heldout_n"] == 4
    geomean = math.exp((math.log(2) + math.log(0.5) + math.log(4)) / 3)
    assert scores["heldout_ok_speedup"] == pytest.approx(geomean)
    mean_reward = sum(total_reward(r, RewardConfig()) for r in records) / 4
    assert scores["heldout_reward"] == pytest.approx(mean_reward)
    (tmp_path / "records.jsonl").write_text(_record("incorrect", None).to_json() + "\n")
    assert bench.heldout_scores(tmp_path, RewardConfig())["heldout_ok_speedup"] is None


def _run(folder: Path, seeds: dict[int, tuple[float, float]], commit: str = "abc", k: int = 8) -> Path:
    """A bench_learning.json whose seeds have held-out correct rates (M0, M1)."""
    rows = []
    for seed, (m0, m1) in seeds.items():
        arm = lambda rate: {"reward": rate, "correct_rate": rate, "n": 8, "heldout_correct_rate": rate,  # noqa: E731
                            "heldout_pass_at_1": rate, "heldout_reward": rate - 1, "heldout_ok_speedup": None}
        rows.append({"seed": seed, "wall_s": {"m0_train": 1.0}, "m0": arm(m0), "m1": arm(m1),
                     "m1_curves": {"step": [1, 2], **{key: [0.1, 0.2] for key in bench.CURVE_KEYS}}})
    meta = {"date": "2026-12-06", "machine": "x", "command": f"python bench --seeds {list(seeds)}",
            "commit": commit, "k": k, "m0_seed": None, "m0_train_s": 0.0, "tasks": "tasks=synthetic",
            "wall_s": 10.0}
    folder.mkdir(parents=True)
    (folder / "bench_learning.json").write_text(json.dumps({"meta": meta, "seeds": rows, "summary": {}}))
    return folder


def test_merge_summarises_every_seed_of_the_sittings_together(tmp_path):
    first = _run(tmp_path / "a", {0: (0.1, 0.3), 1: (0.2, 0.3)})
    second = _run(tmp_path / "b", {2: (0.1, 0.2)})
    bench.merge([first, second], tmp_path / "all")
    merged = json.loads((tmp_path / "all" / "bench_learning.json").read_text())
    assert [s["seed"] for s in merged["seeds"]] == [0, 1, 2]
    paired = merged["summary"]["heldout_correct_rate"]["m1_minus_m0"]
    assert paired["n"] == 3 and paired["mean"] == pytest.approx((0.2 + 0.1 + 0.1) / 3)
    assert merged["summary"]["heldout_reward"]["m1"]["mean"] == pytest.approx((0.3 + 0.3 + 0.2) / 3 - 1)
    assert merged["meta"]["wall_s"] == 20.0 and len(merged["meta"]["merged_from"]) == 2
    assert (tmp_path / "all" / "learning_curves.png").stat().st_size > 0
    assert "| heldout_reward |" in (tmp_path / "all" / "bench_learning.md").read_text()
    assert "heldout_ok_speedup" not in merged["summary"]  # no seed had an `ok` record to average


def test_merge_gives_the_heldout_ok_speedup_its_paired_interval_where_every_seed_has_one(tmp_path):
    folder = _run(tmp_path / "a", {0: (0.1, 0.3), 1: (0.2, 0.3)})
    data = json.loads((folder / "bench_learning.json").read_text())
    for row, (m0, m1) in zip(data["seeds"], ((1.1, 1.3), (1.2, 1.2)), strict=True):
        row["m0"]["heldout_ok_speedup"], row["m1"]["heldout_ok_speedup"] = m0, m1
    (folder / "bench_learning.json").write_text(json.dumps(data))
    bench.merge([folder], tmp_path / "all")
    summary = json.loads((tmp_path / "all" / "bench_learning.json").read_text())["summary"]
    speedup = summary["heldout_ok_speedup"]
    assert speedup["m1_minus_m0"]["mean"] == pytest.approx(0.1) and speedup["m0"]["n"] == 2


@pytest.mark.parametrize("change", [{"commit": "def"}, {"k": 16}])
def test_merge_refuses_runs_of_another_design(tmp_path, change):
    first = _run(tmp_path / "a", {0: (0.1, 0.3)})
    second = _run(tmp_path / "b", {1: (0.1, 0.2)}, **change)
    with pytest.raises(SystemExit, match=next(iter(change))):
        bench.merge([first, second], tmp_path / "all")


def test_merge_refuses_a_seed_twice(tmp_path):
    first = _run(tmp_path / "a", {0: (0.1, 0.3)})
    second = _run(tmp_path / "b", {0: (0.1, 0.2)})
    with pytest.raises(SystemExit, match="twice"):
        bench.merge([first, second], tmp_path / "all")


def test_against_puts_each_seed_beside_the_same_seed_of_an_earlier_run(tmp_path):
    """`make reproduce` re-runs seed 0 of the claim and prints it beside the committed seed 0."""
    earlier = _run(tmp_path / "claim", {0: (0.16, 0.13), 1: (0.14, 0.14)}, commit="e49ae00")
    now = json.loads(_run(tmp_path / "now", {0: (0.17, 0.12), 5: (0.1, 0.1)})
                     .joinpath("bench_learning.json").read_text())["seeds"]
    table = bench.against(now, earlier)
    assert "commit e49ae00" in table
    assert "| 0 | M0 | held-out correct | 0.170 | 0.160 |" in table
    assert "| 0 | M1 | held-out correct | 0.120 | 0.130 |" in table
    assert f"| 5 | - | - | - | not in {earlier} |" in table
    assert "| 1 |" not in table  # only this run's seeds
