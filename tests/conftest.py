"""Test environment: CPU, offline, one thread; W&B, HF and inductor state in a temp dir.

Set before anything imports torch, transformers or wandb (FACTS.md: with 2 cores and another
busy process, torch steps ran up to 100x slower without OMP_NUM_THREADS=1).
"""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

_STATE = tempfile.mkdtemp(prefix="warpk-tests-")
os.environ.update(
    OMP_NUM_THREADS="1",
    HF_HUB_OFFLINE="1",
    HF_DATASETS_OFFLINE="1",
    TRANSFORMERS_OFFLINE="1",
    WANDB_SILENT="true",
    HF_HOME=os.path.join(_STATE, "hf"),
    TORCHINDUCTOR_CACHE_DIR=os.path.join(_STATE, "inductor"),
)
for var in ("WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
    os.environ[var] = os.path.join(_STATE, var.lower())
os.environ.pop("WANDB_API_KEY", None)
os.environ["WARPK_CACHE_DIR"] = os.path.join(_STATE, "warpk-cache")  # builds and results

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


def run_warpk(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m warpk ARGS` from the repo root, as a user would type it."""
    return subprocess.run(
        [sys.executable, "-m", "warpk", *args], cwd=REPO, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


def pytest_collection_modifyitems(config, items):
    """Skip `gpu` tests when NVML finds no NVIDIA GPU, `slurm` tests when `sbatch` is not on PATH."""
    import shutil

    from warpk.hardware import detect_gpu_names

    needs_gpu = [i for i in items if i.get_closest_marker("gpu")]
    if needs_gpu and not detect_gpu_names():
        skip = pytest.mark.skip(reason="needs an NVIDIA GPU: NVML reports none on this machine")
        for item in needs_gpu:
            item.add_marker(skip)
    if shutil.which("sbatch") is None:
        skip = pytest.mark.skip(reason="needs a SLURM controller: sbatch is not on PATH")
        for item in items:
            if item.get_closest_marker("slurm"):
                item.add_marker(skip)
