"""Where the checkout's own folders are: the one home of the repository root.

The cache's default (`default_cache_dir`) is here too: the evaluator's builds and results and
the generated synthetic tasks live under it.

Non-goals: no run dirs (Hydra owns those).
"""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "conf"  # Hydra's config groups
BUNDLED_ROOT = REPO / "kernelbench"  # the bundled task suite


def from_repo(path: str | Path) -> Path:
    """A config's path: absolute as given, relative from the repository root."""
    path = Path(path)
    return path if path.is_absolute() else REPO / path


def default_cache_dir() -> Path:
    """$WARPK_CACHE_DIR, else ~/.cache/warpk."""
    return Path(os.environ.get("WARPK_CACHE_DIR") or Path.home() / ".cache" / "warpk")
