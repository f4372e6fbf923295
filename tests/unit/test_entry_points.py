"""The test suite runs as people type it: a bare `pytest` as well as `python -m pytest`."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.mark.slow
def test_bare_pytest_collects_modules_that_import_the_tests_package(tmp_path):
    pytest_script = Path(sys.executable).parent / "pytest"  # the venv's entry point, not python -m
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["TMPDIR"] = str(tmp_path)  # where conftest's state folder goes, and must be gone from after
    for args in (["tests/unit/test_hrl.py"], ["-m", "slurm"]):
        result = subprocess.run(
            [str(pytest_script), "--collect-only", "-q", "-p", "no:cacheprovider", *args],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
        assert "error" not in result.stdout.splitlines()[-1]
        assert not list(tmp_path.glob("warpk-tests-*"))  # removed when the session's process ends
