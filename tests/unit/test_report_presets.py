"""Experiment presets (conf/experiment): each opens with its command, and every job it sweeps composes."""

import itertools
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from warpk.__main__ import CONF_DIR, compose_job

PRESETS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))


def test_the_issue_list_is_covered():
    assert {
        "cross_model",
        "matched_runtime_energy",
        "ipw_frontier",
        "reward_ablation",
        "seed_robustness",
        "failure_taxonomy",
        "measured_vs_modelled",
        "runtime_regimes",
    } <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_preset_opens_with_its_command_and_every_sweep_job_composes(name):
    lines = Path(CONF_DIR / "experiment" / f"{name}.yaml").read_text().splitlines()
    assert lines[0] == "# @package _global_"
    assert lines[1].startswith(f"# python -m warpk -m +experiment={name}")
    assert lines[2].startswith("# then: python -m warpk stage=report results=")
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3", job_name="warpk"):
        cfg = compose("config", overrides=[f"+experiment={name}"], return_hydra_config=True)
        params = OmegaConf.to_container(cfg.hydra.sweeper.params)
        assert params, f"{name} sweeps nothing"
        axes = [[f"{k}={v}" for v in str(values).split(",")] for k, values in params.items()]
        jobs = list(itertools.product(*axes))
        for job in jobs:
            run = compose_job(lambda ov: compose("config", overrides=ov), [f"+experiment={name}", *job], [])
            assert run.stage in ("train", "evaluate", "runtime", "hrl")
            for override in job:
                key, _, value = override.partition("=")
                if key in ("model", "sla"):
                    assert getattr(run, key).name == value
    assert len(jobs) >= 2
