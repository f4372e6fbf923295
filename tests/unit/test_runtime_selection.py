"""M4's checkpoint selection: the order of checkpoints, and the chosen one put back into the model."""

import numpy as np
import torch

from tests.unit.test_runtime_env import make_env
from warpk.runtime.control import ppo
from warpk.runtime.control.evaluation import evaluate
from warpk.runtime.control.policies import PPOPolicy
from warpk.runtime.control.selection import Checkpoint


def test_the_cheapest_checkpoint_at_static_max_attainment_wins_else_the_most_attaining():
    at_max_cheap, at_max_dear = Checkpoint(1, 80.0, 0.990, 0.990, 0), Checkpoint(2, 120.0, 0.995, 0.990, 0)
    short_cheap, short_dear = Checkpoint(3, 60.0, 0.989, 0.990, 1), Checkpoint(4, 90.0, 0.989, 0.990, 2)
    lower = Checkpoint(5, 50.0, 0.950, 0.990, 1)
    above_on_mean = Checkpoint(6, 40.0, 0.999, 0.990, 1)  # above static max on the mean, below on one episode
    assert at_max_cheap.meets_static_max and not short_cheap.meets_static_max
    assert not above_on_mean.meets_static_max and at_max_dear.better_than(above_on_mean)
    assert at_max_cheap.better_than(at_max_dear) and not at_max_dear.better_than(at_max_cheap)
    assert at_max_dear.better_than(short_cheap)  # meeting static max beats any saving below it
    assert short_cheap.better_than(short_dear) and short_cheap.better_than(lower)
    assert lower.better_than(None)


def test_the_model_returned_is_the_chosen_checkpoint_with_its_own_statistics(monkeypatch):
    seeds = (31, 32)
    monkeypatch.setattr(ppo, "SELECT_EVERY_ROLLOUTS", 1)  # a checkpoint every rollout of 480 steps
    monkeypatch.setattr(Checkpoint, "better_than", lambda self, other: other is None)  # keep the first
    make = lambda: make_env(episode_steps=12)  # noqa: E731
    chosen = ppo.train_ppo(make, 1440, seed=3, normalize=True, select_seeds=seeds)
    last = ppo.train_ppo(make, 1440, seed=3, normalize=True)
    # steps trained on: scored at the end of rollouts 1 and 2 (before their updates), then the last
    assert [c.timesteps for c in chosen.selection.considered] == [0, 480, 1440]
    assert chosen.selection.best.timesteps == 0
    # the weights are the first checkpoint's (the initial policy), not the last
    initial = ppo.new_ppo(make_env(episode_steps=12), 3, 1440)
    for a, b in zip(chosen.policy.parameters(), initial.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    pairs = zip(chosen.policy.parameters(), last.policy.parameters(), strict=True)
    assert any(not torch.equal(a, c) for a, c in pairs)
    # ... with the observation statistics of that moment, frozen for evaluation
    assert chosen.get_env().obs_rms.count < last.get_env().obs_rms.count
    again = evaluate(make_env(episode_steps=12), PPOPolicy(chosen), list(seeds))
    assert np.mean([r.sla_attainment for r in again]) == chosen.selection.best.sla_attainment
    assert np.mean([r.energy_per_request_j for r in again]) == chosen.selection.best.energy_per_request_j


def test_scoring_checkpoints_leaves_training_as_it_was(monkeypatch):
    monkeypatch.setattr(ppo, "SELECT_EVERY_ROLLOUTS", 1)
    monkeypatch.setattr(Checkpoint, "better_than", lambda self, other: True)  # keep the latest
    make = lambda: make_env(episode_steps=12)  # noqa: E731
    scored = ppo.train_ppo(make, 1440, seed=3, envs=2, normalize=True, select_seeds=(31,))
    plain = ppo.train_ppo(make, 1440, seed=3, envs=2, normalize=True)
    assert [c.timesteps for c in scored.selection.considered] == [0, 480, 1440]  # 2 copies x 240 a rollout
    for a, b in zip(scored.policy.parameters(), plain.policy.parameters(), strict=True):
        assert torch.equal(a, b)
    assert np.array_equal(scored.get_env().obs_rms.mean, plain.get_env().obs_rms.mean)


def test_selection_episodes_are_neither_held_out_nor_tuning_episodes():
    from warpk.__main__ import compose_config
    from warpk.runtime.control.evaluation import evaluation_seeds, tuning_seeds_of
    from warpk.runtime.control.selection import selection_seeds

    config = compose_config(["model=m4", "hardware=cpu", "seed=7"])
    chosen = set(selection_seeds(config))
    assert len(chosen) == 24
    assert not chosen & set(evaluation_seeds(config)) and not chosen & set(tuning_seeds_of(config))


def test_training_leaves_no_sb3_log_folder_in_the_temp_dir(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.delenv("SB3_LOGDIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where sb3's default logger writes
    model = ppo.new_ppo(make_env(episode_steps=12), 3, 48)
    model.learn(total_timesteps=48)
    assert model.num_timesteps >= 48
    assert not list(tmp_path.glob("SB3-*"))  # sb3's default made one such folder per learn()
