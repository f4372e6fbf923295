"""The seeds of the #33 claim run so far (docs/data/learning-synthetic-claim-e49ae00/): each seed's
held-out and train figures recompute from its committed records, and docs/training.md quotes them."""

import gzip
import json
from pathlib import Path

import pytest

from warpk.config import RewardConfig
from warpk.records import EvalRecord
from warpk.rewards import total_reward

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data" / "learning-synthetic-claim-e49ae00"
SEEDS = sorted(DATA.glob("seed*"))
TEXT = " ".join((REPO / "docs" / "training.md").read_text().split())


def records(path: Path) -> list[EvalRecord]:
    return [EvalRecord.from_json(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def test_there_are_seeds_and_all_ran_at_the_designs_commit():
    assert SEEDS
    for seed in SEEDS:
        meta = json.loads((seed / "bench_learning.json").read_text())["meta"]
        assert meta["commit"].startswith("e49ae00") and meta["k"] == 8
        assert "train.sft_max_steps=1500" in meta["command"] and "train.heldout_tasks=24" in meta["command"]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda p: p.name)
def test_a_seeds_figures_recompute_from_its_records(seed):
    (row,) = json.loads((seed / "bench_learning.json").read_text())["seeds"]
    cfg = RewardConfig()
    for arm in ("m0", "m1"):
        held = records(seed / f"{arm}-records.jsonl.gz")
        assert len(held) == 24 * 8
        ok = sum(r.status == "ok" for r in held)
        assert row[arm]["heldout_correct_rate"] == pytest.approx(ok / len(held))
        mean_reward = sum(total_reward(r, cfg) for r in held) / len(held)
        assert row[arm]["heldout_reward"] == pytest.approx(mean_reward)
        train = records(seed / f"{arm}_eval-records.jsonl.gz")
        assert row[arm]["correct_rate"] == pytest.approx(sum(r.status == "ok" for r in train) / len(train))
        assert f"{arm.upper()} {ok}/192" in TEXT.split(f"seed {row['seed']}:", 1)[1][:300]
    line = TEXT.split(f"seed {row['seed']}:", 1)[1][:300]
    for key in ("heldout_reward", "heldout_ok_speedup"):
        assert f"{row['m0'][key]:.3f} / {row['m1'][key]:.3f}" in line, key


MERGED = DATA / "merged" / "bench_learning.json"


@pytest.mark.skipif(not MERGED.exists(), reason="the claim's seeds are not merged yet")
def test_the_merged_claim_recomputes_from_the_seeds_records_and_the_docs_quote_it():
    from warpk.stats import t_interval

    merged = json.loads(MERGED.read_text())
    assert sorted(s["seed"] for s in merged["seeds"]) == [int(p.name[4:]) for p in SEEDS]
    readme = " ".join((REPO / "README.md").read_text().split())
    for metric in ("heldout_correct_rate", "heldout_reward"):
        per_seed = {}
        for seed in SEEDS:
            arms = []
            for arm in ("m0", "m1"):
                held = records(seed / f"{arm}-records.jsonl.gz")
                if metric == "heldout_correct_rate":
                    arms.append(sum(r.status == "ok" for r in held) / len(held))
                else:
                    arms.append(sum(total_reward(r, RewardConfig()) for r in held) / len(held))
            per_seed[seed.name] = arms[1] - arms[0]
        iv = t_interval(list(per_seed.values()), 0.95)
        paired = merged["summary"][metric]["m1_minus_m0"]
        got = (paired["mean"], paired["low"], paired["high"])
        assert got == pytest.approx((iv.estimate, iv.low, iv.high))
        quoted = f"{iv.estimate:+.3f} [{iv.low:+.3f}, {iv.high:+.3f}]"
        assert quoted in TEXT, (metric, quoted)
        if metric == "heldout_correct_rate":
            assert quoted in readme, quoted
