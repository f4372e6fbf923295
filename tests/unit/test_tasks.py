"""The bundled suite: KernelBench format, metadata read without executing, selection by split."""

import pytest

from warpk.config import TasksConfig
from warpk.tasks import BUNDLED_ROOT, TaskError, load_suite, load_task_file


def test_bundled_suite_is_data_in_kernelbench_format():
    assert not list(BUNDLED_ROOT.rglob("__init__.py"))  # upstream's package is also `kernelbench`
    tasks = load_suite(TasksConfig())
    assert len(tasks) >= 8
    kinds = [t.kind for t in tasks]
    assert kinds.count("single_op") >= 4 and kinds.count("fusion") >= 4
    for task in tasks:
        assert task.task_id == f"bundled/{task.name}"
        assert task.shape_overrides("cpu"), f"{task.name} has no CPU-sized shape"
        assert task.shape_overrides("gpu") == {}  # the file's own constants are the GPU shape
        assert task.solutions, f"{task.name} has no reference candidate"
        source = task.path.read_text()
        for name in task.shape_overrides("cpu"):
            assert f"\n{name} = " in source, f"{task.name}: SHAPES overrides unknown constant {name}"


def test_split_and_subset_select_tasks():
    heldout = load_suite(TasksConfig(split="heldout"))
    train = load_suite(TasksConfig(split="train"))
    assert heldout and train and not {t.name for t in heldout} & {t.name for t in train}
    assert len(heldout) + len(train) == len(load_suite(TasksConfig()))
    picked = load_suite(TasksConfig(subset=["01_softmax", "07_attention"]))
    assert [t.name for t in picked] == ["01_softmax", "07_attention"]
    with pytest.raises(TaskError, match="unknown tasks.*99_nope"):
        load_suite(TasksConfig(subset=["99_nope"]))


def test_task_file_must_define_the_interface(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class Model: pass\n")
    with pytest.raises(TaskError, match="lacks get_init_inputs, get_inputs"):
        load_task_file(bad)
    meta = tmp_path / "meta.py"
    meta.write_text(
        "SHAPES = {'cpu': {'n': 2 ** 4}}\nclass Model: pass\n"
        "def get_inputs(): pass\ndef get_init_inputs(): pass\n"
    )
    with pytest.raises(TaskError, match="plain literal"):
        load_task_file(meta)


UPSTREAM = BUNDLED_ROOT.parent / "tests" / "data" / "kernelbench_upstream"
CANDIDATES = BUNDLED_ROOT.parent / "tests" / "data" / "kernelbench_candidates"


def test_upstream_kernelbench_levels_load_in_numeric_order():
    level1 = load_suite(TasksConfig(source="kernelbench", root=str(UPSTREAM), level=1), str(CANDIDATES))
    assert [t.task_id for t in level1] == [
        "kernelbench/L1/1_Vector_add",
        "kernelbench/L1/2_Row_sum",
        "kernelbench/L1/10_Scale",
    ]
    solutions = {t.name: [p.name for p in t.solutions] for t in level1}
    assert solutions == {
        "1_Vector_add": ["1_Vector_add.py"],
        "2_Row_sum": [],
        "10_Scale": ["ignores_factor.py", "right.py"],
    }
    level2 = load_suite(TasksConfig(source="kernelbench", root=str(UPSTREAM), level=2))
    assert [t.name for t in level2] == ["1_Matmul_relu"] and level2[0].shapes == {}


def test_upstream_kernelbench_needs_a_root_that_exists():
    with pytest.raises(TaskError, match="needs tasks.root=PATH"):
        load_suite(TasksConfig(source="kernelbench", level=1))
    with pytest.raises(TaskError, match="no task folder /nowhere/level3"):
        load_suite(TasksConfig(source="kernelbench", root="/nowhere", level=3))
