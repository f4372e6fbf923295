"""The evaluator's profile (warpk.evaluator.profile): laps on our clock, one line per side."""

import json

from warpk.evaluator.profile import Stopwatch


def test_laps_charge_the_time_since_the_last_lap_and_repeat_names_add_up(monkeypatch):
    clock = iter([0.0, 1.0, 3.5, 4.0])
    monkeypatch.setattr("warpk.evaluator.profile.time.perf_counter", lambda: next(clock))
    watch = Stopwatch("trusted")
    watch.lap("load")
    watch.lap("timing")
    watch.lap("load")
    assert watch.phases == {"load": 1.5, "timing": 2.5}


def test_a_line_is_appended_only_where_warpk_profile_names_a_file(tmp_path, monkeypatch):
    monkeypatch.delenv("WARPK_PROFILE", raising=False)
    Stopwatch("lane").write(candidate_pid=1)  # nowhere to write: nothing happens
    path = tmp_path / "profile.jsonl"
    monkeypatch.setenv("WARPK_PROFILE", str(path))
    for side in ("lane", "trusted"):
        watch = Stopwatch(side)
        watch.lap("spawn")
        watch.write(candidate_pid=7)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(x["side"], x["candidate_pid"], list(x["phases_s"])) for x in lines] == [
        ("lane", 7, ["spawn"]), ("trusted", 7, ["spawn"])]
