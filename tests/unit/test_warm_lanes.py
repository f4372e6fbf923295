"""An evaluator keeps its lanes between calls (warpk.evaluator.WarmLanes): the next call's
candidates go through the same trusted worker, the first of them into the worker started ahead
in the last call; close(), or the evaluator's collection, ends every worker."""

import gc
import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.tasks import load_task_file

SOFTMAX = REPO / "kernelbench" / "problems" / "01_softmax.py"
needs_bwrap = pytest.mark.skipif(not any(os.path.exists(os.path.join(p, "bwrap"))
                                         for p in os.environ.get("PATH", "").split(":")),
                                 reason="bubblewrap is not installed")


def _evaluator() -> Evaluator:
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=2.0, memory_limit_gb=2.0)
    return Evaluator(protocol, hardware)


def _item(k: int) -> EvalItem:
    source = (f"import torch\nimport torch.nn as nn\n# variant {k}\nclass ModelNew(nn.Module):\n"
              "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n")
    return EvalItem(load_task_file(SOFTMAX), source, f"copy{k}.py")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _trusted_children() -> list[int]:
    """This process's children that are trusted workers (one per live lane)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"warpk.evaluator.trusted" in (proc / "cmdline").read_bytes():
                stat = (proc / "stat").read_text()
                if int(stat[stat.rindex(")") + 2:].split()[1]) == os.getpid():
                    found.append(int(proc.name))
        except (OSError, ValueError):
            continue
    return found


@pytest.mark.slow
@needs_bwrap
def test_the_next_call_reuses_the_lane_and_its_worker_started_ahead(tmp_path, monkeypatch):
    profile = tmp_path / "profile.jsonl"
    monkeypatch.setenv("WARPK_PROFILE", str(profile))
    evaluator = _evaluator()
    first = evaluator.evaluate_many([_item(0)])
    lane = evaluator.warm.lanes[0]
    trusted_pid, spare_pid = lane.trusted.proc.pid, lane.spare.proc.pid
    second = evaluator.evaluate_many([_item(1)])
    assert [r.status for r in first + second] == ["ok", "ok"], [r.error for r in first + second]
    assert evaluator.warm.lanes[0] is lane and lane.trusted.proc.pid == trusted_pid
    lanes = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "lane"]
    assert lanes[-1]["candidate_pid"] == spare_pid  # started in the first call, used in the second
    next_spare = lane.spare.proc.pid
    evaluator.close()
    assert not evaluator.warm.lanes
    assert not _alive(trusted_pid) and not _alive(next_spare)


@pytest.mark.slow
@needs_bwrap
def test_an_evaluator_dropped_without_close_ends_its_workers():
    evaluator = _evaluator()
    assert evaluator.evaluate_many([_item(2)])[0].status == "ok"
    lane = evaluator.warm.lanes[0]
    pids = [lane.trusted.proc.pid, lane.spare.proc.pid]
    del evaluator, lane
    gc.collect()
    assert not any(_alive(pid) for pid in pids)


@pytest.mark.slow
@needs_bwrap
@pytest.mark.timeout(180)
def test_a_call_made_while_another_holds_the_lanes_gets_its_own_and_close_waits_for_the_first():
    """From the red team (session 17): a call made from `on_record` deadlocked on the kept lane's
    one thread, and a close() during a call left that call's lane kept and alive afterwards."""
    evaluator = _evaluator()
    nested: list = []

    def on_record(_, record) -> None:
        lane = evaluator.warm.lanes.get(0)
        assert lane is None  # the lane is the running call's, not kept yet
        nested.extend(evaluator.evaluate_many([_item(4)]))  # lanes of its own, closed after it
        evaluator.close()  # while the outer call still runs its lane

    outer = evaluator.evaluate_many([_item(3)], on_record)
    assert [r.status for r in outer + nested] == ["ok", "ok"], [r.error for r in outer + nested]
    assert not evaluator.warm.lanes and evaluator.warm.pool is None
    assert not _trusted_children()  # the outer call's lane was closed when it ended
    again = evaluator.evaluate_many([_item(5)])  # usable after close: new lanes
    assert again[0].status == "ok", again[0].error
    pids = [evaluator.warm.lanes[0].trusted.proc.pid]
    evaluator.close()
    assert not any(_alive(pid) for pid in pids)
