"""The README's suite line at 8d05390 (2026-12-07, session 37), from
docs/data/suite-cpu-2026-12-07-8d05390/."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "docs" / "data" / "suite-cpu-2026-12-07-8d05390" / "pytest.txt").read_text()
README = " ".join((REPO / "README.md").read_text().split())


def test_the_readme_line():
    found = re.search(r"(\d+) passed, (\d+) skipped, \d+ warnings in ([\d.]+)s", TEXT)
    passed, skipped, seconds = found.groups()
    assert not re.search(r"\d+ (failed|error)", TEXT)
    minutes, rest = divmod(round(float(seconds)), 60)
    assert f"({minutes} min {rest} s for {passed} passed at 8d05390)" in README
