"""Import direction (DESIGN.md 4): Hydra stops at the front door; the evaluator stays light."""

import ast
from pathlib import Path

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
        # config.py may import the ConfigStore inside register_configs(), called by __main__ only.
        if found and not (path.name == "config.py" and found == {"hydra"}):
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
