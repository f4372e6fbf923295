"""What `python -m warpk` returns to Hydra's sweepers: each stage's objective as a float."""

import math

from warpk.config import STAGES
from warpk.stages import OBJECTIVES, RUNNERS, objective


def test_every_stage_names_its_objective():
    assert set(OBJECTIVES) == set(STAGES) == set(RUNNERS)


def test_the_objective_is_the_stage_s_summary_value_as_a_float():
    assert objective("evaluate", {"correct_rate": 0.5, "n_candidates": 18.0}) == 0.5
    assert objective("runtime", {"ppo_energy_saving_vs_best_static": 0.3}) == 0.3
    assert objective("hrl", {"m5_energy_saving_vs_m4": -0.02}) == -0.02
    assert type(objective("train", {"correct_rate": 1})) is float


def test_a_run_without_its_objective_returns_nan_not_a_made_up_number():
    assert math.isnan(objective("train", {"train_loss": 0.1}))  # no held-out evaluation
    assert math.isnan(objective("evaluate", {"correct_rate": None}))  # no candidate
    assert math.isnan(objective("report", {"n_runs": 3.0}))
