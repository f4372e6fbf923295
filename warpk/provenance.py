"""Which code produced a run: the git commit of this checkout, recorded in every summary.json."""

from __future__ import annotations

import subprocess
from pathlib import Path

from warpk.paths import REPO


def git_head(repo: Path = REPO) -> str | None:
    """HEAD of the checkout (+"-dirty" with uncommitted changes to tracked files); None without git."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")
