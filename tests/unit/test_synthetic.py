"""tasks=synthetic (warpk.synthetic): the generator is reproducible from its seed, its splits are
disjoint by composition and by held-out op pair, no kept task is a benchmark problem, the
execution filter keeps only solutions that match by the evaluator's rule, and bad settings are
refused before anything runs."""

from __future__ import annotations

import json
import random

import pytest

from warpk.__main__ import compose_config, preflight
from warpk.config import ConfigError, TasksConfig
from warpk.evaluator.inprocess import check_solution
from warpk.synthetic.contamination import benchmark_index, chain_families, collision, name_families
from warpk.synthetic.generate import draw, graph_key, render_problem, render_solution
from warpk.synthetic.ops import OPS
from warpk.synthetic.suite import Settings, SyntheticError, build, ensure
from warpk.tasks import TaskError, load_suite, synthetic_folder

SMALL = Settings(seed=3, size=60, heldout_pairs=24)


def _check(problem, solution, seed):
    return check_solution(problem, solution, seed)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    folder = tmp_path_factory.mktemp("syn") / "a"
    return folder, build(SMALL, folder, _check)


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_text() for p in sorted(folder.rglob("*.py"))}


def test_the_same_seed_gives_the_same_tasks_and_another_seed_others(built, tmp_path):
    folder, manifest = built
    again = build(SMALL, tmp_path / "b", _check)
    assert _files(folder) == _files(tmp_path / "b")
    assert {**vars(again), "seconds": 0} == {**vars(manifest), "seconds": 0}
    other = build(Settings(seed=4, size=60), tmp_path / "c", _check)
    assert _files(tmp_path / "c") != _files(folder) and other.kept == 60


def _tasks(folder):
    out = []
    for path in sorted((folder / "problems").glob("*.py")):
        namespace: dict = {}
        text = path.read_text()
        for line in text.splitlines():
            if line.startswith(("SPLIT = ", "OPS = ")):
                exec(line, namespace)  # noqa: S102 - our generated literals
        out.append((path.stem, namespace["SPLIT"], graph_key(namespace["OPS"]), namespace["OPS"]))
    return out


def test_splits_are_disjoint_by_composition_and_by_held_out_pair(built):
    folder, manifest = built
    tasks = _tasks(folder)
    assert len(tasks) == manifest.kept == 60 and sum(manifest.splits.values()) == 60
    splits = ("train", "heldout", "heldout_pair")
    keys = {split: {key for _, s, key, _ in tasks if s == split} for split in splits}
    assert all(keys.values())  # every split has tasks
    assert not keys["train"] & keys["heldout"] and not keys["train"] & keys["heldout_pair"]
    assert len({key for *_, key, _ in tasks}) == 60  # no duplicate composition at all
    pairs = {tuple(p) for p in manifest.reserved_pairs}
    held = lambda key: any(p in pairs for p in zip(key, key[1:], strict=False))  # noqa: E731
    assert not any(held(key) for key in keys["train"] | keys["heldout"])
    assert all(held(key) for key in keys["heldout_pair"])


def test_no_kept_task_is_a_benchmark_problem_and_collisions_are_counted(built):
    folder, manifest = built
    index = benchmark_index()
    assert not [ops for *_, ops in _tasks(folder) if collision(graph_key(ops), index)]
    assert manifest.collisions == sum(manifest.collided_with.values()) > 0
    assert name_families("level2/63_Gemm_ReLU_Divide") == ("gemm", "relu", "scale")
    assert name_families("level1/47_Sum_reduction_over_a_dimension") == ("sum",)
    assert name_families("level2/1_Conv2D_ReLU_BiasAdd") is None  # Conv2D: outside the vocabulary
    assert collision(("linear", "relu", "divide"), index) == "level2/63_Gemm_ReLU_Divide"
    assert collision(("gelu",), index) == "level1/26_GELU_"
    assert chain_families(("scale", "divide", "relu")) == ("scale", "relu")
    assert collision(("linear", "relu", "divide", "tanh"), index) is None


def test_duplicates_are_decided_by_the_normalised_graph():
    assert graph_key(("divide", "scale", "relu", "relu")) == ("scale", "relu")
    assert graph_key(("sigmoid", "sigmoid")) == ("sigmoid", "sigmoid")  # not idempotent


def test_every_kept_solution_passes_the_filter_and_a_wrong_one_does_not(built):
    folder, _ = built
    for name in [p.stem for p in sorted((folder / "problems").glob("*.py"))][:10]:
        problem = (folder / "problems" / f"{name}.py").read_text()
        assert check_solution(problem, (folder / "solutions" / name / "fused.py").read_text()) is None
    spec = next(s for s in (draw(random.Random(i), ("gelu", "softmax"), 2) for i in range(50))
                if s.ops == ("gelu", "softmax"))
    problem, solution = render_problem("t", spec, "train", 0), render_solution("t", spec)
    wrong = solution.replace("torch.softmax(x, dim=-1)", "torch.softmax(x * 1.01, dim=-1)")
    assert "differs" in check_solution(problem, wrong)
    gelu = 'x = F.gelu(x, approximate="tanh")'
    in_place = solution.replace(gelu, gelu.replace("(x,", "(x.add_(1.0).sub_(1.0),"))
    assert check_solution(problem, in_place) == "the solution modified its inputs in place"


def test_the_generators_in_place_forms_never_touch_the_callers_input():
    rng = random.Random(0)
    for _ in range(200):
        spec = draw(rng, ("relu", "scale", "sigmoid", "residual", "bias", "tanh"), 4)
        problem, solution = render_problem("t", spec, "train", 0), render_solution("t", spec)
        assert check_solution(problem, solution) is None, (spec.ops, solution)


def test_settings_that_cannot_give_the_tasks_asked_for_say_what_to_change(tmp_path):
    with pytest.raises(SyntheticError, match="widen tasks.vocabulary or raise tasks.max_ops"):
        build(Settings(size=5, max_ops=1, vocabulary=("relu", "gelu")), tmp_path / "x", _check)
    with pytest.raises(SyntheticError, match="unknown ops \\['nope'\\]"):
        Settings(vocabulary=("nope",)).ops()
    assert Settings(vocabulary=("norms", "relu")).ops()[-1] == "relu"


def test_the_suite_loads_from_the_cache_once_generated(tmp_path):
    config = TasksConfig(source="synthetic", root=str(tmp_path), size=20, seed=1)
    with pytest.raises(TaskError, match="are not generated"):
        load_suite(config)
    folder, manifest = ensure(Settings(seed=1, size=20), tmp_path, _check)
    assert folder == synthetic_folder(config)
    assert json.loads((folder / "manifest.json").read_text())["kept"] == 20
    tasks = load_suite(config)
    assert len(tasks) == 20 and all(t.task_id.startswith("synthetic/") and t.solutions for t in tasks)
    held = load_suite(TasksConfig(source="synthetic", root=str(tmp_path), size=20, seed=1, split="heldout"))
    assert {t.split for t in held} == {"heldout"} and len(held) == manifest.splits.get("heldout", 0)
    assert ensure(Settings(seed=1, size=20), tmp_path, lambda *a: "never called")[1].kept == 20  # reused


def test_synthetic_settings_are_refused_for_other_sources_and_unknown_ops_before_anything_runs():
    with pytest.raises(ConfigError, match="tasks.size apply to tasks=synthetic only"):
        TasksConfig(source="bundled", size=50)
    run = compose_config(["tasks=synthetic", "tasks.size=200", "tasks.vocabulary=[norms,linear]"], [])
    assert run.tasks.source == "synthetic" and run.tasks.size == 200 and run.tasks.heldout_pairs == 24
    refused = preflight(["tasks=synthetic", "tasks.vocabulary=[softmaxx]"], gpu_names=[])
    assert "unknown ops ['softmaxx']" in refused
    assert "apply to tasks=synthetic only" in preflight(["tasks=bundled", "tasks.max_ops=3"], gpu_names=[])
    assert set(OPS) >= {"linear", "softmax", "to_bf16"}


def test_the_documented_generator_figures_are_the_data_files():
    from tests.conftest import REPO

    data = json.loads((REPO / "docs/data/synthetic-cpu-2026-12-05/bench_synthetic.json").read_text())
    m, doc = data["manifest"], (REPO / "docs/training.md").read_text()
    assert f"{m['kept']:,} tasks kept in **{data['wall_s']:.1f} s**" in doc
    drawn = f"({m['drawn']:,} drawn: {m['duplicates']}\nduplicates, {m['collisions']} benchmark collisions"
    assert drawn in doc
    n = m["splits"]
    assert f"{n['train']} train, {n['heldout']} heldout, {n['heldout_pair']} heldout_pair" in doc
    speedups = [s["speedup"] for s in data["sandboxed"]]
    ok = sum(s["status"] == "ok" for s in data["sandboxed"])
    assert f"{ok}/{len(speedups)} `ok`, speedups {min(speedups):.2f}-{max(speedups):.2f}" in doc


def test_the_small_policys_tokenizer_learns_the_generated_suite_but_no_held_out_solution(built):
    from warpk.policy.tiny import small_corpus
    from warpk.trainers.common import corpus_root

    folder, _ = built
    corpus = small_corpus(folder)
    held = [(folder / "solutions" / name / "fused.py").read_text()
            for name, split, *_ in _tasks(folder) if split != "train"]
    train = [(folder / "solutions" / name / "fused.py").read_text()
             for name, split, *_ in _tasks(folder) if split == "train"]
    assert held and not any(text in corpus for text in held) and all(text in corpus for text in train)
    run = compose_config(["tasks=synthetic", "tasks.root=/x", "tasks.size=60", "tasks.seed=3"], [])
    assert corpus_root(run) == synthetic_folder(run.tasks) and corpus_root(compose_config([], [])) is None


def test_a_held_out_sample_is_the_same_for_every_run_on_the_suite(tmp_path):
    from warpk.trainers.data import heldout_tasks

    ensure(Settings(seed=1, size=40), tmp_path, _check)
    overrides = ["tasks=synthetic", f"tasks.root={tmp_path}", "tasks.size=40", "tasks.seed=1"]
    every = heldout_tasks(compose_config(overrides, []))
    sample = heldout_tasks(compose_config([*overrides, "train.heldout_tasks=3"], []))
    again = heldout_tasks(compose_config([*overrides, "train.heldout_tasks=3", "seed=9"], []))
    assert len(every) > 3 and len(sample) == 3 and {t.split for t in sample} == {"heldout"}
    assert [t.name for t in sample] == [t.name for t in again]
    assert {t.name for t in sample} < {t.name for t in every}


def test_the_documented_screens_are_the_data_files():
    from tests.conftest import REPO

    doc = " ".join((REPO / "docs/training.md").read_text().split())
    data = REPO / "docs/data/synthetic-screen-2026-12-05"
    m0, m1 = (json.loads((data / arm / "screen.json").read_text())["splits"] for arm in ("m0", "m1"))
    f = lambda row: f"{row['correct']}/{row['samples']}"  # noqa: E731
    assert (f"**M0** train {f(m0['train'])}, held-out **{f(m0['heldout'])}**, held-out pair "
            f"{f(m0['heldout_pair'])}") in doc
    assert (f"18 min at idle priority beside other work): train {f(m1['train'])}, held-out "
            f"**{f(m1['heldout'])}**, held-out pair {f(m1['heldout_pair'])}") in doc
