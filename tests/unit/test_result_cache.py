"""The result cache (warpk.evaluator.cache.ResultCache)."""

from __future__ import annotations

import json

from warpk.evaluator.cache import ResultCache
from warpk.records import EvalRecord

RECORD = EvalRecord(task_id="t", candidate="c.py", candidate_sha="0", hardware="cpu", status="ok",
                    speedup=2.0)


def test_a_stored_record_comes_back_marked_cached_under_the_asking_name(tmp_path):
    cache = ResultCache(tmp_path, enabled=True)
    cache.put("ab" * 32, RECORD)
    got = cache.get("ab" * 32, "other.py", "t2")
    assert got.cached and got.candidate == "other.py" and got.task_id == "t2" and got.speedup == 2.0


def test_an_entry_another_version_wrote_or_a_torn_one_is_a_miss_not_a_crash(tmp_path):
    cache = ResultCache(tmp_path, enabled=True)
    cache.put("cd" * 32, RECORD)
    path = next((tmp_path / "results").rglob("*.json"))
    path.write_text(json.dumps({**json.loads(path.read_text()), "field_of_another_version": 1}))
    assert cache.get("cd" * 32, "c.py", "t") is None
    path.write_text('{"task_id": "t", "candid')
    assert cache.get("cd" * 32, "c.py", "t") is None
