"""The learning claim's preset (conf/experiment/synthetic_learning_claim.yaml) is the claim's design:
composed, it gives every job of the claim run exactly the config its documented command gave."""

import dataclasses

import pytest

from warpk.__main__ import compose_config

# docs/data/learning-synthetic-claim-e49ae00/README.md: the settings of every run of a seed
CLAIM = ["tasks.size=1000", "tasks.vocabulary=[activations,broadcast,norms]", "tasks.max_ops=3",
         "tasks.seed=0", "train.sft_max_steps=1500", "train.heldout_tasks=24", "train.samples_per_task=8",
         "evaluate.timing_batches=3"]
# what bench_learning.py adds to each of its runs (common_overrides), per job
JOBS = [["stage=train", "model=m0"], ["stage=train", "model=m1"], ["stage=evaluate", "tasks.split=train"]]


def _as_dict(run) -> dict:
    return dataclasses.asdict(run)


@pytest.mark.parametrize("job", JOBS, ids=lambda j: "-".join(j))
def test_the_preset_composes_every_job_of_the_claim_as_its_command_did(job):
    # bench_learning.py names the suite (tasks=synthetic) before the settings
    common = ["policy=small", "hardware=cpu", "seed=3", "tasks=synthetic", *job]
    by_preset = _as_dict(compose_config([*common, "+experiment=synthetic_learning_claim"], []))
    by_command = _as_dict(compose_config([*common, *CLAIM], []))
    assert by_preset == by_command
    alone = [o for o in common if o != "tasks=synthetic"]  # the preset picks the suite itself
    assert _as_dict(compose_config([*alone, "+experiment=synthetic_learning_claim"], [])) == by_command
    assert by_preset["tasks"]["vocabulary"] == ["activations", "broadcast", "norms"]
    assert by_preset["train"]["sft_max_steps"] == 1500 and by_preset["evaluate"]["timing_batches"] == 3


def test_without_the_preset_the_claim_settings_differ():
    """The comparison above can fail: the defaults are not the claim's design."""
    common = ["policy=small", "hardware=cpu", "seed=3", "tasks=synthetic", "stage=train", "model=m0"]
    assert _as_dict(compose_config(common, [])) != _as_dict(compose_config([*common, *CLAIM], []))
