"""Import direction (DESIGN.md 4): Hydra stops at the front door; the evaluator stays light; no
arrow from a lower layer of warpk to a higher one; no stage imports another."""

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "warpk"
FRONT_DOOR = {"__main__.py"}


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _modules(under: Path):
    return [p for p in under.rglob("*.py") if p.name not in FRONT_DOOR or p.parent != PACKAGE]


def test_hydra_and_omegaconf_stop_at_the_front_door():
    offenders = []
    for path in _modules(PACKAGE):
        found = _imports(path) & {"hydra", "omegaconf"}
        # warpk.config may import the ConfigStore inside register_configs(), called by __main__ only.
        where = path.relative_to(PACKAGE).as_posix()
        if found and not (where == "config/__init__.py" and found == {"hydra"}):
            offenders.append(f"{path.relative_to(PACKAGE)}: {sorted(found)}")
    assert not offenders


def test_evaluator_never_imports_training_or_logging_libraries():
    heavy = {"trl", "peft", "wandb", "transformers", "hydra", "omegaconf", "datasets"}
    light = [
        *(PACKAGE / "evaluator").rglob("*.py"),
        PACKAGE / "records.py",
        PACKAGE / "tasks.py",
        *(PACKAGE / "telemetry").rglob("*.py"),
    ]
    offenders = [f"{p.name}: {sorted(_imports(p) & heavy)}" for p in light if _imports(p) & heavy]
    assert not offenders


# warpk's own modules and packages by layer: each may import its own layer and those below only
LAYERS = {
    "config": 0, "paths": 0, "records": 0, "provenance": 0, "progress": 0, "requeue": 0, "tracking": 0,
    "tables": 0, "stats": 0,
    "telemetry": 1, "tasks": 1, "synthetic": 1,
    "hardware": 2, "evaluator": 2, "rewards": 2, "policy": 2,
    "trainers": 3, "runtime": 3, "report": 3,
    "stages": 4,
    "__main__": 5, "__init__": 5,
}  # fmt: skip


def _warpk_imports(path: Path) -> list[str]:
    """The warpk modules `path` imports, as dotted names below warpk."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import; warpk imports by absolute name"
            names = [f"warpk.{a.name}" for a in node.names] if node.module == "warpk" else [node.module]
        found += [n.split(".", 1)[1] for n in names if n.startswith("warpk.")]
    return found


def _unit(path: Path) -> str:
    rel = path.relative_to(PACKAGE)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def test_no_import_goes_from_a_lower_layer_to_a_higher_one():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        unit = _unit(path)
        assert unit in LAYERS, f"warpk/{path.relative_to(PACKAGE)}: give {unit} a layer in LAYERS"
        for target in _warpk_imports(path):
            other = target.split(".")[0]
            if LAYERS[other] > LAYERS[unit]:
                offenders.append(f"{path.relative_to(PACKAGE)} (layer {LAYERS[unit]}) imports warpk.{target} "
                                 f"(layer {LAYERS[other]})")
    assert not offenders


def test_no_stage_imports_another_stage():
    offenders = [
        f"stages/{path.name} imports warpk.{target}"
        for path in (PACKAGE / "stages").glob("*.py")
        for target in _warpk_imports(path)
        if target.startswith("stages.") and path.name != "__init__.py"
    ]
    assert not offenders


def test_the_layer_test_sees_an_upward_import(tmp_path, monkeypatch):
    fake = tmp_path / "warpk"
    (fake / "evaluator").mkdir(parents=True)
    (fake / "evaluator" / "bad.py").write_text("from warpk.trainers.grpo import run_grpo\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    with pytest.raises(AssertionError, match="evaluator/bad.py .layer 2. imports warpk.trainers.grpo"):
        test_no_import_goes_from_a_lower_layer_to_a_higher_one()


# warpk.runtime's subpackages, one way (warpk/runtime/__init__.py): the simulator knows nothing of
# its controllers, the controllers nothing of the stages' tables and rounds
RUNTIME_LAYERS = {"serving": 0, "control": 1, "arms": 2}
RUNTIME_ONLY_ARMS_MAY = ("trainers", "stages")  # M5's rounds import the trainers; no stage from runtime


def test_runtime_s_subpackages_import_one_way():
    offenders = []
    runtime = PACKAGE / "runtime"
    for path in runtime.rglob("*.py"):
        rel = path.relative_to(runtime)
        if len(rel.parts) == 1:  # warpk/runtime/__init__.py: the picture only, no imports
            offenders += [f"runtime/{rel} imports warpk.{t}" for t in _warpk_imports(path)]
            continue
        sub = rel.parts[0]
        assert sub in RUNTIME_LAYERS, f"warpk/runtime/{rel}: give {sub} a place in RUNTIME_LAYERS"
        for target in _warpk_imports(path):
            parts = target.split(".")
            if parts[0] == "runtime":
                other = parts[1] if len(parts) > 1 else None  # `from warpk.runtime import x`: no layer named
                if other not in RUNTIME_LAYERS or RUNTIME_LAYERS[other] > RUNTIME_LAYERS[sub]:
                    offenders.append(f"runtime/{rel.as_posix()} ({sub}) imports warpk.{target}")
            elif parts[0] in RUNTIME_ONLY_ARMS_MAY and (sub != "arms" or parts[0] == "stages"):
                offenders.append(f"runtime/{rel.as_posix()} ({sub}) imports warpk.{target}")
    assert not offenders


@pytest.mark.parametrize(
    ("where", "code", "message"),
    [
        ("serving/bad.py", "from warpk.runtime.control.ppo import train_ppo\n",
         "runtime/serving/bad.py .serving. imports warpk.runtime.control.ppo"),
        ("control/bad.py", "from warpk.runtime.arms import results\n",
         "runtime/control/bad.py .control. imports warpk.runtime.arms"),
        ("control/lazy.py", "def f():\n    from warpk.trainers.grpo import run_grpo\n",
         "runtime/control/lazy.py .control. imports warpk.trainers.grpo"),
        ("arms/bad.py", "from warpk.stages import run_stage\n",
         "runtime/arms/bad.py .arms. imports warpk.stages"),
    ],
)
def test_the_runtime_layer_test_sees_an_upward_import(tmp_path, monkeypatch, where, code, message):
    fake = tmp_path / "warpk"
    (fake / "runtime" / where).parent.mkdir(parents=True)
    (fake / "runtime" / where).write_text(code)
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    with pytest.raises(AssertionError, match=message):
        test_runtime_s_subpackages_import_one_way()


def test_the_evaluator_loads_only_telemetry_s_seam():
    import subprocess

    code = (
        "import sys, warpk.telemetry, warpk.evaluator.trusted, warpk.evaluator.untrusted, "
        "warpk.evaluator.energy; print(sorted(m for m in sys.modules if m.startswith('warpk.telemetry.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(ast.literal_eval(out))
    assert not loaded & {"warpk.telemetry.capture", "warpk.telemetry.replay", "warpk.telemetry.phases",
                         "warpk.telemetry.sampler_client"}, loaded  # fmt: skip
    assert {"warpk.telemetry.meter", "warpk.telemetry.nvml"} <= loaded


def test_the_sandboxed_workers_import_nothing_outside_warpk():
    """The untrusted worker's sandbox holds warpk, torch and the standard library only, and a
    candidate may import the trusted worker's modules there (exploit 30b does): neither module's
    imports may reach the `sampler` package, which is not in the sandbox."""
    import subprocess

    code = ("import sys; sys.modules['sampler'] = None; "
            "import warpk.evaluator.trusted, warpk.evaluator.untrusted, warpk.evaluator.checks")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=PACKAGE.parent)
    assert result.returncode == 0, result.stderr[-2000:]


def test_no_module_is_over_400_lines_and_no_stage_over_120():
    """Small modules that read top to bottom (issue #16's goal); the stages are thin scripts over
    library calls."""
    long = [f"{p.relative_to(PACKAGE)}: {n}" for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 400]  # fmt: skip
    assert not long
    stages = [f"{p.name}: {n}" for p in (PACKAGE / "stages").glob("*.py")
              if (n := len(p.read_text().splitlines())) > 120]  # fmt: skip
    assert not stages


def _module_graph() -> dict[str, set[str]]:
    """warpk's modules and the warpk modules each imports, at any depth of its code."""
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in names.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("warpk"):
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in names else node.module
                         for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("warpk")}
        graph[name] = {d for d in deps if d in names and d != name}
    return graph


def test_no_import_cycle_among_warpks_modules():
    graph, cycles = _module_graph(), []

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo += graph[node]
        return False

    for module, deps in graph.items():
        cycles += [f"{module} <-> {dep}" for dep in deps if reaches(dep, module)]
    assert not cycles  # a lazy import inside a function is a cycle too


def test_the_cycle_test_sees_a_lazy_cycle(tmp_path, monkeypatch):
    fake = tmp_path / "warpk"
    (fake / "runtime" / "serving").mkdir(parents=True)
    lazy = "def f():\n    from warpk.runtime.arms import results\n"  # inside a function: a cycle too
    (fake / "runtime" / "serving" / "env.py").write_text(lazy)
    (fake / "runtime" / "arms").mkdir()
    (fake / "runtime" / "arms" / "results.py").write_text("from warpk.runtime.serving.env import f\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    with pytest.raises(AssertionError, match="warpk.runtime.serving.env <-> warpk.runtime.arms.results"):
        test_no_import_cycle_among_warpks_modules()
