"""The lane's next worker, started ahead (warpk.evaluator.lane): it imports torch while the
current candidate loads and is checked, is frozen while anything is timed (the trusted worker,
warpk.evaluator.session), is thawed once the candidate is done, and becomes the next candidate's."""

import json
import os
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.evaluator.freeze import process_tree
from warpk.tasks import load_task_file

SOFTMAX = REPO / "kernelbench" / "problems" / "01_softmax.py"
needs_bwrap = pytest.mark.skipif(not any(os.path.exists(os.path.join(p, "bwrap"))
                                         for p in os.environ.get("PATH", "").split(":")),
                                 reason="bubblewrap is not installed")


def _running(pid: int) -> bool:
    """No process of its tree stopped, and its cgroup v2 (if any) not frozen."""
    for p in process_tree(pid):
        try:
            stat = Path(f"/proc/{p}/stat").read_text()
            if stat[stat.rindex(")") + 2] in "Tt":
                return False
            for line in Path(f"/proc/{p}/cgroup").read_text().splitlines():
                events = Path("/sys/fs/cgroup/unified", line[3:].lstrip("/"), "cgroup.events")
                if line.startswith("0::") and events.exists() and "frozen 1" in events.read_text():
                    return False
        except OSError:
            continue
    return True


@needs_bwrap
def test_the_worker_started_ahead_is_thawed_after_each_candidate_and_serves_the_next(tmp_path, monkeypatch):
    profile = tmp_path / "profile.jsonl"
    monkeypatch.setenv("WARPK_PROFILE", str(profile))
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=2.0, memory_limit_gb=2.0)
    task = load_task_file(SOFTMAX)
    sources = [f"import torch\nimport torch.nn as nn\n# variant {k}\nclass ModelNew(nn.Module):\n"
               "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n" for k in range(3)]
    seen: list[bool] = []

    def arrived(_, record) -> None:  # the lane is between candidates: its spare must be running
        lane = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "lane"][-1]
        seen.append(lane["spare_pid"] is not None and _running(lane["spare_pid"]))

    records = Evaluator(protocol, hardware).evaluate_many(
        [EvalItem(task, s, f"copy{k}.py") for k, s in enumerate(sources)], arrived)
    assert [r.status for r in records] == ["ok"] * 3, [r.error for r in records]
    assert seen == [True] * 3
    lanes = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "lane"]
    assert [x["candidate_pid"] for x in lanes[1:]] == [x["spare_pid"] for x in lanes[:-1]]
    # the trusted worker's line splits both sides' timed round trips (benchmarks/screen_copy_bias.py)
    trusted = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "trusted"]
    for line in trusted:
        for side in ("candidate", "reference"):
            phases, counts = line["go"][side]
            assert counts["timing: calls"] > 0 and phases["timing: answer"] > 0, (side, line["go"])
            assert {"timing: freeze", "timing: read back"} <= set(phases)
