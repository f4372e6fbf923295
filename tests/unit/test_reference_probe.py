"""`too_big` is the task's verdict only when decided before any candidate code runs: the trusted
worker builds and runs the reference once per task before the candidate is imported
(session.Session.probe_reference); from the candidate's import on, running out of memory may be
the candidate's doing (it shares the device), so it is the candidate's verdict."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from warpk.config import EvaluateConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.tasks import load_task_file

TASK = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        raise MemoryError("the reference needs more than this device has")


def get_inputs():
    return [torch.randn(8)]


def get_init_inputs():
    return []
'''


def test_a_reference_that_does_not_fit_is_too_big_before_the_candidate_is_imported(tmp_path):
    import yaml

    from warpk.config import HardwareConfig

    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    cpu = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    path = tmp_path / "oom_task.py"
    path.write_text(TASK)
    marker = tmp_path / "candidate_was_imported"
    candidate = (f"import pathlib\npathlib.Path({str(marker)!r}).write_text('x')\n"
                 "import torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
                 "        return x\n")
    evaluator = Evaluator(EvaluateConfig(result_cache=False, sandbox="process"), cpu, lanes=[""])
    record = evaluator.measure(EvalItem(load_task_file(path), candidate, "c.py"))
    assert record.status == "too_big", record.error
    assert not marker.exists(), "the candidate ran before the task's needs were known"


@pytest.mark.slow
def test_a_candidate_that_fails_to_load_leaves_the_reference_worker_in_step_for_the_next_task():
    """The reference worker's Load answer for a task whose candidate failed to import is still owed
    when the next task comes: it must be read first, or every reply after it is one step behind
    and the run stops as a harness failure (review of evaluator v3)."""
    import yaml

    from warpk.config import HardwareConfig

    raw = yaml.safe_load((REPO / "conf" / "hardware" / "cpu.yaml").read_text())
    cpu = HardwareConfig(**{k: v for k, v in raw.items() if k != "clock_profiles"})
    problems, solutions = REPO / "kernelbench" / "problems", REPO / "kernelbench" / "solutions"
    softmax, gelu = load_task_file(problems / "01_softmax.py"), load_task_file(problems / "03_gelu_tanh.py")
    items = [
        EvalItem(softmax, "import torch.nn as nn\nraise ImportError('no such kernel')\n"
                          "class ModelNew(nn.Module):\n    pass\n", "broken.py"),
        EvalItem(gelu, (solutions / "03_gelu_tanh" / "torch_fused.py").read_text(), "torch_fused.py"),
    ]
    protocol = EvaluateConfig(result_cache=False, sandbox="process", timing_batches=3, batch_target_ms=5.0)
    records = Evaluator(protocol, cpu, lanes=[""]).evaluate_many(items)
    assert [r.status for r in records] == ["compile_error", "ok"], [(r.status, r.error) for r in records]
