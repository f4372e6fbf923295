"""runtime.reward_baseline=static_max: training rewards minus static max's on the same trace."""

import numpy as np

from tests.unit.test_runtime_env import make_env, run_episode
from warpk.__main__ import compose_config
from warpk.runtime import ppo
from warpk.runtime.baselines import static_max
from warpk.runtime.reward_baseline import StaticMaxBaseline

OTHER = np.array([3, 2, 1])  # a low cap, a locked clock, concurrency 16: slower and cheaper than static max


def wrapped_episode(env, actions, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(rewards, the shadow's rewards) of one episode, actions[i] at step i."""
    env.reset(seed=seed)
    rewards, baselines = [], []
    for action in actions:
        _, reward, _, truncated, info = env.step(action)
        rewards.append(reward)
        baselines.append(info["baseline_reward"])
        if truncated:
            return np.array(rewards), np.array(baselines)
    raise AssertionError("the episode did not end")


def test_the_reward_is_the_plain_reward_minus_static_max_s_in_the_same_period():
    plain = make_env(episode_steps=12, arrival_rate_rps=6.0)
    biggest = static_max(plain).action
    _, plain_rewards, _ = run_episode(plain, OTHER, seed=7)
    _, max_rewards, _ = run_episode(plain, biggest, seed=7)
    wrapped = StaticMaxBaseline(make_env(episode_steps=12, arrival_rate_rps=6.0))
    rewards, baselines = wrapped_episode(wrapped, [OTHER] * 12, seed=7)
    np.testing.assert_allclose(baselines, max_rewards)
    np.testing.assert_allclose(rewards, plain_rewards - max_rewards)
    assert np.any(rewards != 0)
    same, _ = wrapped_episode(wrapped, [np.array(biggest)] * 12, seed=7)
    assert np.all(same == 0)  # static max itself gains nothing over itself


def test_the_baseline_depends_on_the_trace_never_on_the_actions():
    # what makes it a baseline: every policy's return moves by the same amount on a trace
    wrapped = StaticMaxBaseline(make_env(episode_steps=12, arrival_rate_rps=6.0))
    rng = np.random.default_rng(0)
    _, steady = wrapped_episode(wrapped, [OTHER] * 12, seed=7)
    _, random = wrapped_episode(wrapped, [rng.integers(0, wrapped.action_space.nvec) for _ in range(12)], 7)
    np.testing.assert_array_equal(steady, random)
    _, other_trace = wrapped_episode(wrapped, [OTHER] * 12, seed=8)
    assert not np.array_equal(steady, other_trace)


def test_training_uses_the_baseline_and_selection_scores_on_the_plain_env(monkeypatch):
    stepped: list[float] = []
    real_step = StaticMaxBaseline.step

    def spy(self, action):
        out = real_step(self, action)
        stepped.append(out[4]["baseline_reward"])
        return out

    monkeypatch.setattr(StaticMaxBaseline, "step", spy)
    config = compose_config(["model=m4", "logger=disabled", "runtime.reward_baseline=static_max",
                             "runtime.ppo_timesteps=480", "runtime.ppo_select_episodes=1",
                             "runtime.episode_steps=12"], [])  # fmt: skip
    models = ppo.train_for_run(config, lambda: make_env(episode_steps=12))
    assert len(stepped) == 480  # every training step went through the baseline
    (model,) = models.values()
    assert len(model.selection.considered) == 1  # scored on the plain env: no wrapper step counted there

