"""The README's suite line at 0dfd525 (2026-12-07), from docs/data/suite-cpu-2026-12-07-0dfd525/."""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TEXT = (REPO / "docs" / "data" / "suite-cpu-2026-12-07-0dfd525" / "pytest.txt").read_text()
README = " ".join((REPO / "README.md").read_text().split())


def test_the_readme_line():
    found = re.search(r"(\d+) passed, (\d+) skipped, \d+ warnings in ([\d.]+)s", TEXT)
    passed, skipped, seconds = found.groups()
    minutes, rest = divmod(round(float(seconds)), 60)
    assert f"took {minutes} min {rest} s for {passed} passed, {skipped} skipped" in README
    assert "rc=0" in TEXT
    setups = [round(float(s)) for s in re.findall(r"([\d.]+)s setup", TEXT)[:3]]
    assert f"its costliest fixtures {setups[0]}, {setups[1]} and {setups[2]} s of setup" in README
