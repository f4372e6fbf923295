"""The bundled suite's realistic wrong candidates get exactly the status they declare."""

import ast

import pytest
import yaml

from tests.conftest import REPO
from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator import EvalItem, Evaluator
from warpk.tasks import BUNDLED_ROOT, load_task_file

pytestmark = pytest.mark.slow  # every bundled negative through the sandboxed evaluator

NEGATIVES = sorted((BUNDLED_ROOT / "negatives").rglob("*.py"))


def _declared(path, name):
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    raise AssertionError(f"{path} does not declare {name}")


def _hardware(name: str) -> HardwareConfig:
    raw = yaml.safe_load((REPO / "conf" / "hardware" / f"{name}.yaml").read_text())
    raw.pop("clock_profiles")
    return HardwareConfig(**raw)


def _items(paths):
    return [
        EvalItem(
            load_task_file(BUNDLED_ROOT / "problems" / f"{p.parent.name}.py", "bundled"),
            p.read_text(),
            p.name,
        )
        for p in paths
    ]


def test_negatives_cover_several_tasks_and_statuses():
    assert len(NEGATIVES) >= 12
    assert len({p.parent.name for p in NEGATIVES}) >= 6
    assert {_declared(p, "EXPECTED_STATUS") for p in NEGATIVES} >= {
        "compile_error",
        "incorrect",
        "runtime_error",
    }
    assert sum(not _declared(p, "NEEDS_GPU") for p in NEGATIVES) >= 6


@pytest.fixture(scope="module")
def cpu_verdicts():
    paths = [p for p in NEGATIVES if not _declared(p, "NEEDS_GPU")]
    protocol = EvaluateConfig(timing_batches=3, result_cache=False)
    records = Evaluator(protocol, _hardware("cpu")).evaluate_many(_items(paths))
    return dict(zip(paths, records, strict=True))


@pytest.mark.parametrize(
    "path", [p for p in NEGATIVES if not _declared(p, "NEEDS_GPU")], ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_cpu_negative_gets_its_declared_status(path, cpu_verdicts):
    record = cpu_verdicts[path]
    assert (record.status, bool(record.error)) == (_declared(path, "EXPECTED_STATUS"), True), record.error


@pytest.mark.gpu
def test_gpu_negatives_get_their_declared_status():
    paths = [p for p in NEGATIVES if _declared(p, "NEEDS_GPU")]
    protocol = EvaluateConfig(timing_batches=3, result_cache=False)
    records = Evaluator(protocol, _hardware("h200")).evaluate_many(_items(paths))
    wrong = [
        (p.parent.name, p.name, r.status, r.error)
        for p, r in zip(paths, records, strict=True)
        if r.status != _declared(p, "EXPECTED_STATUS")
    ]
    assert not wrong
