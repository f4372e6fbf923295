"""The SLURM launcher presets compose, read site settings from the environment, and ask for what
the issue says (no scheduler needed: the real one is exercised in tests/integration/test_slurm.py)."""

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from tests.conftest import run_warpk
from warpk.__main__ import CONF_DIR


def _launcher(name: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
        cfg = compose("config", overrides=[f"hydra/launcher={name}"], return_hydra_config=True)
    return cfg.hydra.launcher


def test_slurm_h100_reads_partition_account_qos_from_env(monkeypatch):
    for var in ("WARPK_SLURM_PARTITION", "WARPK_SLURM_ACCOUNT", "WARPK_SLURM_QOS", "WARPK_SLURM_CONSTRAINT"):
        monkeypatch.delenv(var, raising=False)
    launcher = _launcher("slurm_h100")
    assert launcher._target_.endswith("SlurmLauncher")
    assert (launcher.partition, launcher.account, launcher.qos) == (None, None, None)  # omitted
    assert launcher.gpus_per_node == 1 and launcher.nodes == 1 and launcher.tasks_per_node == 1
    assert launcher.mem_gb and launcher.cpus_per_task and launcher.timeout_min and launcher.array_parallelism
    assert launcher.signal_delay_s < launcher.timeout_min * 60
    monkeypatch.setenv("WARPK_SLURM_PARTITION", "h100")
    monkeypatch.setenv("WARPK_SLURM_ACCOUNT", "proj42")
    monkeypatch.setenv("WARPK_SLURM_QOS", "high")
    launcher = _launcher("slurm_h100")
    resolved = OmegaConf.to_container(launcher, resolve=False)
    assert (launcher.partition, launcher.account, launcher.qos) == ("h100", "proj42", "high")
    assert resolved["name"] == "${hydra.job.name}"


@pytest.mark.parametrize("name", ["slurm_local", "slurm_h100"])
def test_slurm_presets_set_memory_and_one_gpu(name):
    launcher = _launcher(name)
    # without --mem a job takes the whole node's memory (CR_Core_Memory) and a sweep serialises
    assert launcher.mem_gb is not None
    assert launcher.gpus_per_node == 1 or launcher.gres


def test_help_lists_the_slurm_launchers():
    result = run_warpk("--help")
    assert result.returncode == 0
    assert "hydra/launcher basic | submitit_local | slurm_h100 | slurm_local" in result.stdout
