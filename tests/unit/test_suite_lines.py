"""The suite's runs from a fresh clone (docs/benchmarks.md's table, the README's line) recomputed
from pytest's own output in docs/data/suite-cpu-<date>-<commit>/."""

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "docs" / "data"
BENCH = (REPO / "docs" / "benchmarks.md").read_text()
README = " ".join((REPO / "README.md").read_text().split())


def _run(commit: str) -> tuple[str, str, str, list[int]]:
    text = (next(DATA.glob(f"suite-cpu-2026-12-0*-{commit}")) / "pytest.txt").read_text()
    assert not re.search(r"\d+ (failed|error)", text)
    summary = re.search(r"(\d+) passed, (\d+) skipped, \d+ warnings in ([\d.]+)s", text)
    passed, skipped, seconds = summary.groups()
    minutes, rest = divmod(round(float(seconds)), 60)
    setups = [round(float(s)) for s in re.findall(r"([\d.]+)s setup", text)[:3]]
    return passed, skipped, f"{minutes} min {rest} s", setups


RUNS = ["0dfd525", "8d05390", "3bb7f92", "3f7e9fc", "6ce06c2", "d883418", "ba2c0d6", "9a2dc93", "511e6b2",
        "e5d503d"]


@pytest.mark.parametrize("commit", RUNS)
def test_the_table_row(commit):
    passed, skipped, wall, setups = _run(commit)
    fixtures = ", ".join(map(str, setups)) if setups else "-"
    assert f"| {commit} | {passed} | {skipped} | {wall} | {fixtures} |" in BENCH


def test_the_readmes_line_is_the_last_run():
    passed, skipped, wall, setups = _run("e5d503d")
    assert f"clone at e5d503d on the idle 2-core VM (2026-12-08, session 40): {passed} passed, {skipped} " \
           f"skipped in {wall}," in README
    said = f"CPU files {setups[0]} s of setup, the default run {setups[1]} s, the report {setups[2]} s"
    assert said in README
    text = (DATA / "suite-cpu-2026-12-08-e5d503d" / "pytest.txt").read_text()
    order = [line.split("::")[0].split()[-1] for line in text.splitlines() if "s setup" in line][:3]
    assert order[1:] == ["tests/integration/test_evaluate.py", "tests/integration/test_report.py"]
    later = _run("3f7e9fc")
    assert f"({later[2]} at 3f7e9fc, the VM slower then" in README
