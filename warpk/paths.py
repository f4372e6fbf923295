"""Where the checkout's own folders are: the one home of the repository root.

The cache's default (`default_cache_dir`) is here too: the evaluator's builds and results and
the generated synthetic tasks live under it; and the host folders no sandbox may see whole
(`private_folders`, warpk.evaluator.sandbox).

Non-goals: no run dirs (Hydra owns those).
"""

from __future__ import annotations

import os
import tempfile
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


KEPT_PRIVATE: set[Path] = set()  # more folders no sandbox may see whole (an evaluator's cache_dir)


def private_folders() -> list[Path]:
    """Host folders no sandbox may see whole: homes, /tmp (each sandbox's own home lies there) and
    the host's temp folder (the run's pool gate, other runs' files), and the evaluator's caches
    (builds, results, their locks: the default one and any in KEPT_PRIVATE)."""
    return [Path.home().resolve(), Path("/home"), Path("/root"), Path("/tmp"),
            Path(tempfile.gettempdir()).resolve(), default_cache_dir().resolve(), *sorted(KEPT_PRIVATE)]


def covers_private(path: Path) -> bool:
    """Whether mounting `path` would show a private folder whole (it is one, or lies above one);
    folders inside one (a venv in ~) stay allowed (red team round 23: a script run from ~ put
    all of ~ on sys.path, and with it the cache's locks and ~/.ssh)."""
    return any(path == folder or path in folder.parents for folder in private_folders())
