"""Records and the suite summary, on records built by hand."""

import math

import pytest

from warpk.records import EvalRecord, summarize


def _rec(task, status, speedup=None, energy=None, ref_energy=None):
    runtime = None if speedup is None else 1.0
    return EvalRecord(
        task_id=task,
        candidate="c.py",
        candidate_sha="x",
        status=status,
        error=None if status == "ok" else "why",
        runtime_ms=runtime,
        ref_runtime_ms=None if speedup is None else speedup,
        speedup=speedup,
        energy_j=energy,
        ref_energy_j=ref_energy,
        energy_source="model" if energy else "none",
    )


def test_summary_rates_geomean_and_fast_1():
    records = [
        _rec("a", "ok", 2.0, 1.0, 2.0),
        _rec("a", "ok", 0.5, 4.0, 2.0),
        _rec("b", "ok", 4.0),
        _rec("b", "incorrect"),
        _rec("c", "compile_error"),
        _rec("c", "crashed"),
    ]
    s = summarize(records)
    assert s["n_candidates"] == 6 and s["n_tasks"] == 3
    assert s["compile_rate"] == pytest.approx(4 / 6)  # ok x3 and incorrect loaded; a crash proves nothing
    assert s["correct_rate"] == pytest.approx(3 / 6)
    assert s["geomean_speedup"] == pytest.approx((2.0 * 0.5 * 4.0) ** (1 / 3))
    assert s["fast_1"] == pytest.approx(2 / 6)  # 2.0x and 4.0x; 0.5x is correct but slower
    assert s["geomean_energy_ratio"] == pytest.approx(math.sqrt(2.0 * 0.5))
    assert (s["n_ok"], s["n_incorrect"], s["n_compile_error"], s["n_crashed"]) == (3, 1, 1, 1)


def test_summary_without_correct_candidates_has_no_speedup():
    s = summarize([_rec("a", "incorrect")])
    assert s["geomean_speedup"] is None and s["correct_rate"] == 0.0 and s["fast_1"] == 0.0


def test_record_rejects_unknown_status_and_silent_failures():
    with pytest.raises(ValueError, match="status='great'"):
        _rec("a", "great")
    with pytest.raises(ValueError, match="one-line reason"):
        EvalRecord(task_id="a", candidate="c", candidate_sha="x", status="timeout")


def test_record_json_round_trip_keeps_none():
    record = _rec("a", "incorrect")
    back = EvalRecord.from_json(record.to_json())
    assert back == record and back.runtime_ms is None


# --- records files -------------------------------------------------------------------------
def test_the_sink_writes_records_in_item_order_as_they_arrive_in_any_order(tmp_path):
    from warpk.records import OrderedSink, read_records

    path = tmp_path / "records.jsonl"
    kept = [_rec("t0", "ok", speedup=1.0)]
    with path.open("w") as file:
        sink = OrderedSink(file, kept)
        sink.add(2, _rec("t2", "incorrect"))  # a lane finished early: held back
        assert [r.task_id for r in read_records(path)] == ["t0"] and sink.arrived == 2
        sink.add(1, _rec("t1", "ok", speedup=2.0))
        assert [r.task_id for r in read_records(path)] == ["t0", "t1", "t2"]  # flushed in order
    assert [r.task_id for r in sink.records] == ["t0", "t1", "t2"]


def test_a_resume_keeps_the_prefix_up_to_a_torn_line_or_a_record_to_redo(tmp_path):
    from warpk.records import kept_prefix, write_records

    path = tmp_path / "records.jsonl"
    write_records(path, [_rec("t0", "ok", speedup=1.0), _rec("t1", "crashed"), _rec("t2", "ok", speedup=1.0)])
    keys = [(f"t{i}", "c.py") for i in range(4)]
    assert [r.task_id for r in kept_prefix(path, keys, redo=("crashed",))] == ["t0"]
    assert len(kept_prefix(path, keys, redo=())) == 3
    assert kept_prefix(path, [("other", "c.py")], redo=()) == []  # not this job's items
    path.write_text(path.read_text()[:-20])  # killed mid-write
    assert len(kept_prefix(path, keys, redo=())) == 2
    assert kept_prefix(tmp_path / "none.jsonl", keys, redo=()) == []


def test_reading_a_damaged_records_file_names_the_file_and_line(tmp_path):
    from warpk.records import read_records, write_records

    path = tmp_path / "records.jsonl"
    write_records(path, [_rec("t0", "ok", speedup=1.0)])
    good = path.read_text()
    path.write_text(good + '{"task_id": "x"}\n')
    with pytest.raises(ValueError, match=r"records.jsonl:2 is not an evaluation record"):
        read_records(path)
    path.write_text("\n" + good)  # record i must be line i + 1: reports cite lines
    with pytest.raises(ValueError, match=r"records.jsonl:1 is not an evaluation record"):
        read_records(path)
