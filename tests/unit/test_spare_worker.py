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
from warpk.evaluator import EvalItem, Evaluator, resources
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


@pytest.mark.slow
@needs_bwrap
def test_the_worker_started_ahead_is_thawed_after_each_candidate_and_serves_the_next(tmp_path, monkeypatch,
                                                                                 all_cores):
    profile = tmp_path / "profile.jsonl"
    monkeypatch.setenv("WARPK_PROFILE", str(profile))
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=2.0, memory_limit_gb=2.0)
    task = load_task_file(SOFTMAX)
    sources = [f"import torch\nimport torch.nn as nn\n# variant {k}\nclass ModelNew(nn.Module):\n"
               "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n" for k in range(3)]
    # the fourth tells its cores (it runs in the worker that was the spare during the third)
    sources.append("import os\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                   "        raise RuntimeError(f'cores {sorted(os.sched_getaffinity(0))}')\n")
    seen: list[bool] = []
    spare_cores: list[set[int]] = []

    def arrived(_, record) -> None:  # the lane is between candidates: its spare must be running
        lane = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "lane"][-1]
        seen.append(lane["spare_pid"] is not None and _running(lane["spare_pid"]))
        spare_cores.append(os.sched_getaffinity(lane["spare_pid"]))

    records = Evaluator(protocol, hardware).evaluate_many(
        [EvalItem(task, s, f"copy{k}.py") for k, s in enumerate(sources)], arrived)
    assert [r.status for r in records] == ["ok"] * 3 + ["runtime_error"], [r.error for r in records]
    assert seen == [True] * 4
    lane_cores = set(resources.lane_cores(0, protocol.num_threads))
    if records[0].limits and "cpuset" in records[0].limits and len(os.sched_getaffinity(0)) > len(lane_cores):
        # the spare imports off the lane's cores, the candidate it becomes runs on them
        assert all(not (cores & lane_cores) for cores in spare_cores), (spare_cores, lane_cores)
        assert f"cores {sorted(lane_cores)}" in records[3].error, records[3].error
    lanes = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "lane"]
    assert [x["candidate_pid"] for x in lanes[1:]] == [x["spare_pid"] for x in lanes[:-1]]
    # the trusted worker's line splits both sides' timed round trips (benchmarks/screen_copy_bias.py)
    trusted = [x for x in map(json.loads, profile.read_text().splitlines()) if x["side"] == "trusted"]
    for line in trusted[:3]:  # the three that were timed
        for side in ("candidate", "reference"):
            phases, counts = line["go"][side]
            assert counts["timing: calls"] > 0 and phases["timing: answer"] > 0, (side, line["go"])
            assert {"timing: freeze", "timing: read back"} <= set(phases)


def test_the_trusted_worker_and_the_next_worker_run_on_cores_no_lane_times_on():
    """With several lanes, "every core but this lane's" holds the other lanes' timed cores: the
    lane is given the cores no lane uses (the dispatcher's compile cores) and runs its trusted
    worker and its next worker there; with none free, every core but its own."""
    from warpk.evaluator.lane import Lane
    from warpk.evaluator.sandbox import Limits

    limits = Limits(1.0, 1, False, cores=(7,))
    lane = Lane(None, "process", limits, {}, free_cores=(0, 1, 2))
    assert lane.trusted.cores == (0, 1, 2) and lane.spare_limits.cores == (0, 1, 2)
    assert lane.limits.cores == (7,)  # the candidate's and the reference worker's
    alone = Lane(None, "process", limits, {})
    assert alone.trusted.cores == tuple(sorted(set(os.sched_getaffinity(0)) - {7}))
    no_cpuset = Lane(None, "process", Limits(1.0, 1, False), {}, free_cores=(0,))
    assert no_cpuset.trusted.cores == () and no_cpuset.spare_limits is no_cpuset.limits


@pytest.mark.slow
@needs_bwrap
def test_a_lane_stopped_at_its_backstop_mid_timing_leaves_the_next_candidate_ok(monkeypatch):
    """Red team round 18: the trusted worker freezes the spare once correctness is done and only
    its own clean-up thaws it; a trusted worker killed at the parent's backstop before that handed
    a frozen spare to the next candidate, whose load then timed out. The first candidate here
    hangs in its timed calls and the parent's backstop (lowered to 8 s for it alone) stops it."""
    from warpk.evaluator import lane as lane_module

    monkeypatch.setattr(lane_module, "BACKSTOP_GRACE_S", 0.0)
    measure, calls = lane_module.Lane.measure, []

    def first_one_short(self, request, build_dir, backstop_s):
        calls.append(1)
        return measure(self, request, build_dir, 8.0 if len(calls) == 1 else backstop_s)

    monkeypatch.setattr(lane_module.Lane, "measure", first_one_short)
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=2.0, memory_limit_gb=2.0,
                              run_timeout_s=30.0, compile_timeout_s=60.0)
    head = "import time\nimport torch\nimport torch.nn as nn\nclass ModelNew(nn.Module):\n"
    hangs = head + ("    calls = 0\n    def forward(self, x):\n        ModelNew.calls += 1\n"
                    "        if ModelNew.calls > 8:\n            time.sleep(3600)\n"
                    "        return torch.softmax(x, dim=-1)\n")
    honest = head + "    def forward(self, x):\n        return torch.softmax(x, dim=-1)\n"
    task = load_task_file(SOFTMAX)
    with Evaluator(protocol, hardware) as evaluator:
        items = [EvalItem(task, hangs, "hangs.py"), EvalItem(task, honest, "ok.py")]
        records = evaluator.evaluate_many(items)
    assert [r.status for r in records] == ["timeout", "ok"], [r.error for r in records]
    assert "backstop" in records[0].error
