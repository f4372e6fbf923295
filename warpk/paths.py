"""Where the checkout's own folders are: the one home of the repository root.

Non-goals: no user paths (caches, run dirs: warpk.evaluator.cache and Hydra own those).
"""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONF_DIR = REPO / "conf"  # Hydra's config groups
BUNDLED_ROOT = REPO / "kernelbench"  # the bundled task suite


def from_repo(path: str | Path) -> Path:
    """A config's path: absolute as given, relative from the repository root."""
    path = Path(path)
    return path if path.is_absolute() else REPO / path
