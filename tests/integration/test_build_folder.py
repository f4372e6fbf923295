"""One build folder, one live sandbox (warpk.evaluator.dispatch.folder_alone).

Red team round 6 (2026-12-05): one source submitted for two tasks shares one build folder
(keyed by source hash), mounted read-write into the compile worker that imports the second item
and into the lane worker that times the first. Started at once, they passed work through a
shared file in it: the compile worker computed half of every timed matmul, 1.25x [1.09, 1.56]
for a copy of the reference against 0.99 for the honest copy in the same run. Now building and
measuring hold a lock on the folder. This test times each build and each measurement of two
such items (a decoy build whose import takes 2 s, so the second build would overlap the first
item's measurement) and asserts that no build of a folder ever overlaps a measurement of it.
"""

import time

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator, dispatch
from warpk.evaluator.lane import Lane
from warpk.evaluator.resources import cgroup2_root
from warpk.tasks import load_task_file

pytestmark = pytest.mark.slow  # four imports of 2 s each, one after another

SOURCE = '''"""A decoy build (never called) makes this a candidate with a build folder."""
import time

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

time.sleep(2.0)


def _never_called():
    return load_inline(name="never_called", cpp_sources="int f() { return 0; }", functions=["f"])


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)
'''


def test_no_build_of_a_folder_overlaps_a_measurement_of_it(tmp_path, monkeypatch):
    spans: dict[str, list[tuple[float, float, str]]] = {"build": [], "measure": []}
    build, measure = dispatch.compile_candidate, Lane.measure

    def timed_build(source, build_dir, *args, **kwargs):
        start = time.monotonic()
        try:
            return build(source, build_dir, *args, **kwargs)
        finally:
            spans["build"].append((start, time.monotonic(), str(build_dir)))

    def timed_measure(self, request, build_dir, backstop_s):
        start = time.monotonic()
        try:
            return measure(self, request, build_dir, backstop_s)
        finally:
            spans["measure"].append((start, time.monotonic(), str(build_dir)))

    monkeypatch.setattr(dispatch, "compile_candidate", timed_build)
    monkeypatch.setattr(Lane, "measure", timed_measure)
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=5.0,
                              cache_dir=str(tmp_path / "cache"), memory_limit_gb=2.0)
    problems = REPO / "kernelbench" / "problems"
    items = [EvalItem(load_task_file(problems / f"{task}.py"), SOURCE, f"same-source-{task}")
             for task in ("01_softmax", "14_mish")]
    with Evaluator(protocol, hardware, lanes=[""]) as evaluator:
        records = evaluator.evaluate_many(items)
    assert records[0].status == "ok", records[0].error  # softmax is right for 01_softmax only
    assert len(spans["build"]) == 2 and len(spans["measure"]) == 2
    assert len({folder for _, _, folder in spans["build"] + spans["measure"]}) == 1  # one folder
    for b_start, b_end, _ in spans["build"]:
        for m_start, m_end, _ in spans["measure"]:
            assert b_end <= m_start or m_end <= b_start, (spans, "a build overlapped a measurement")


@pytest.mark.skipif(cgroup2_root() is None, reason="no writable cgroup v2: the pool is not frozen here")
def test_the_compile_pool_is_frozen_through_every_timed_batch(tmp_path, monkeypatch):
    # Red team round 9: a build in the compile pool that loaded the trusted worker's core only
    # while the reference was timed gave a copy 1.9x. The lane freezes the pool while it times.
    monkeypatch.setenv("WARPK_WORKER_LOGS", str(tmp_path / "logs"))
    (tmp_path / "logs").mkdir()
    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    hardware = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    protocol = EvaluateConfig(result_cache=False, timing_batches=3, batch_target_ms=5.0,
                              cache_dir=str(tmp_path / "cache"), memory_limit_gb=2.0)
    task = load_task_file(REPO / "kernelbench" / "problems" / "01_softmax.py")
    honest = (REPO / "kernelbench" / "solutions" / "01_softmax" / "torch_fused.py").read_text()
    with Evaluator(protocol, hardware, lanes=[""]) as evaluator:
        (record,) = evaluator.evaluate_many([EvalItem(task, honest, "honest.py")])
    assert record.status == "ok", record.error
    (log,) = [p for p in (tmp_path / "logs").glob("*.txt") if "compile pool" in p.read_text()]
    events = [line for line in log.read_text().splitlines() if line.startswith(("compile pool", "batch "))]
    batches = [i for i, line in enumerate(events) if line.startswith("batch ")]
    assert batches, events
    frozen = [i for i, line in enumerate(events) if line == "compile pool frozen"]
    thawed = [i for i, line in enumerate(events) if line == "compile pool thawed"]
    for b in batches:  # every timed batch inside a frozen span
        assert any(f < b and not any(f < t < b for t in thawed) for f in frozen), events
    assert events[-1] == "compile pool thawed"
