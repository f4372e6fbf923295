"""The static pre-filter has no false positives: every honest idiom in tests/data/honest/ and every
upstream KernelBench reference (renamed ModelNew) passes, and backend_of names what each builds.

tests/data/honest/ holds one small candidate per idiom an honest author uses (extensions built by
helpers, at import, in __init__ or on first use; kernels launched through tables, partials,
methods, closures, getattr, lists; several kernels; a host C++ extension; torch-only candidates
with helpers). Each file says its task and its backend in `# task:` and `# backend:` headers.
The torch-only ones are also run here against their task's reference (CPU shapes): honest in
fact, not only in intent. The upstream check needs a KernelBench checkout:

    WARPK_KERNELBENCH_ROOT=/path/KernelBench pytest tests/unit/test_static_honest.py

(the folder holding level1/ level2/ level3/; never commit it).
"""

import ast
import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
import torch

from warpk.config import EvaluateConfig
from warpk.evaluator.static import backend_of, check_tree
from warpk.tasks import BUNDLED_ROOT

HONEST = sorted((BUNDLED_ROOT.parent / "tests" / "data" / "honest").glob("*.py"))
PROBLEMS = BUNDLED_ROOT / "problems"
BACKENDS = ("cuda", "triton", "torch")


def _header(source: str, key: str) -> str:
    found = re.search(rf"^# {key}: (\S+)$", source, re.MULTILINE)
    assert found, f"no '# {key}:' header"
    return found.group(1)


def _ids(path: Path) -> str:
    return path.stem


def test_the_honest_set_covers_every_backend():
    backends = [_header(p.read_text(), "backend") for p in HONEST]
    assert len(HONEST) >= 30
    assert all(backends.count(b) >= 10 for b in BACKENDS), {b: backends.count(b) for b in BACKENDS}


@pytest.mark.parametrize("path", HONEST, ids=_ids)
def test_honest_candidate_passes_and_is_classified(path):
    source = path.read_text()
    tree = ast.parse(source)
    assert (PROBLEMS / f"{_header(source, 'task')}.py").is_file()
    assert [str(v) for v in check_tree(tree)] == []
    assert backend_of(tree) == _header(source, "backend")


def _module(path: Path, name: str, monkeypatch):
    """Import a file as module `name`, registered for the test only (dataclasses look it up)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, name, module)
    spec.loader.exec_module(module)
    return module


def _outputs(value) -> tuple:
    return tuple(value) if isinstance(value, tuple | list) else (value,)


@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
@pytest.mark.parametrize(
    "path", [p for p in HONEST if _header(p.read_text(), "backend") == "torch"], ids=_ids
)
def test_honest_torch_candidate_matches_its_reference_on_cpu(path, monkeypatch):
    source = path.read_text()
    for optional in ("einops",):  # upstream imports the policy may use, not our dependencies
        if re.search(rf"^(from|import) {optional}\b", source, re.MULTILINE):
            pytest.importorskip(optional)
    task_name = _header(source, "task")
    task = _module(PROBLEMS / f"{task_name}.py", f"honest_task_{task_name}", monkeypatch)
    vars(task).update(task.SHAPES["cpu"])
    candidate = _module(path, f"honest_candidate_{path.stem}", monkeypatch)
    torch.manual_seed(0)
    inputs = task.get_inputs()
    init = task.get_init_inputs()
    torch.manual_seed(1)
    reference = task.Model(*init).eval()
    torch.manual_seed(1)
    model = candidate.ModelNew(*init).eval()
    with torch.no_grad():
        want = _outputs(reference(*[t.clone() for t in inputs]))
        got = _outputs(model(*[t.clone() for t in inputs]))
    config = EvaluateConfig()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        low = w.dtype in (torch.float16, torch.bfloat16)
        tol = config.tolerance_low_precision if low else config.tolerance_fp32
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g.float(), w.float(), atol=tol, rtol=tol)


def _upstream_root() -> Path | None:
    root = os.environ.get("WARPK_KERNELBENCH_ROOT")
    return Path(root) if root else None


def test_every_upstream_reference_as_a_candidate_passes():
    """As benchmarks/kernelbench_refcheck.py makes them: the reference with Model -> ModelNew."""
    root = _upstream_root()
    if root is None:
        pytest.skip("set WARPK_KERNELBENCH_ROOT to a KernelBench checkout's KernelBench/ folder")
    files = sorted(root.glob("level*/*.py"))
    assert files, f"WARPK_KERNELBENCH_ROOT={root} holds no level*/*.py"
    rejected, not_torch = {}, {}
    for path in files:
        tree = ast.parse(re.sub(r"\bModel\b", "ModelNew", path.read_text()))
        violations = check_tree(tree)
        if violations:
            rejected[f"{path.parent.name}/{path.name}"] = str(violations[0])
        if backend_of(tree) != "torch":
            not_torch[f"{path.parent.name}/{path.name}"] = backend_of(tree)
    print(f"upstream KernelBench references checked: {len(files)}, rejected: {len(rejected)}")
    assert rejected == {}, f"{len(rejected)} of {len(files)} rejected"
    assert not_torch == {}, "references are PyTorch"
