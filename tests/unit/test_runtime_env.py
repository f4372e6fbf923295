"""ServingEnv and its calibration: gymnasium contract, determinism, SLA behaviour, fit error."""

import json
import warnings

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from tests.conftest import hardware_profile
from warpk.config import (
    ActuatorConfig,
    ConfigError,
    RuntimeConfig,
    SelectionConfig,
    SlaConfig,
    WorkloadConfig,
)
from warpk.runtime.serving.calibration import (
    CalibrationError,
    CostModel,
    fit_costs,
    heldout_error,
    load_calibration,
)
from warpk.runtime.serving.env import ServingEnv

FIXTURE = "tests/data/runtime_calibration_fixture.json"
STATIC_MAX = np.array([0, 0, 4])  # 700 W, default clocks, concurrency 128


def make_env(sla=None, workload=None, actuator=None, **runtime):
    """A ServingEnv on the fixture; `workload`, `actuator`: those sections' fields."""
    runtime.setdefault("allow_fixture_calibration", True)
    sections = WorkloadConfig(**(workload or {})), ActuatorConfig(**(actuator or {}))
    cfg = RuntimeConfig(workload=sections[0], actuator=sections[1], **runtime)
    cal = load_calibration(FIXTURE, allow_fixture=cfg.allow_fixture_calibration)
    return ServingEnv(cfg, sla or SlaConfig(), hardware_profile("h200"), cal)


def run_episode(env, action, seed):
    env.reset(seed=seed)
    observations, rewards = [], []
    while True:
        obs, reward, terminated, truncated, _ = env.step(action)
        observations.append(obs)
        rewards.append(reward)
        if terminated or truncated:
            return np.array(observations), np.array(rewards), env.result(seed)


def test_env_passes_the_gymnasium_checker():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no spec / render modes": not applicable here
        check_env(make_env(episode_steps=6), skip_render_check=True)


def test_same_seed_gives_the_same_episode_and_another_seed_does_not():
    env = make_env(episode_steps=12)
    action = np.array([1, 1, 3])
    obs_a, rew_a, res_a = run_episode(env, action, seed=7)
    obs_b, rew_b, res_b = run_episode(env, action, seed=7)
    _, rew_c, res_c = run_episode(env, action, seed=8)
    assert np.array_equal(obs_a, obs_b) and np.array_equal(rew_a, rew_b)
    assert res_a == res_b
    assert res_c.requests != res_a.requests or not np.array_equal(rew_a, rew_c)


def test_static_max_meets_the_sla_at_low_load_and_violates_under_overload():
    low = make_env(workload=dict(arrival_process="poisson", arrival_rate_rps=0.3), episode_steps=12)
    over = make_env(workload=dict(arrival_process="poisson", arrival_rate_rps=30.0), episode_steps=12)
    for seed in (0, 1):
        _, _, calm = run_episode(low, STATIC_MAX, seed)
        assert calm.sla_attainment == 1.0 and calm.sla_met
        _, _, flooded = run_episode(over, STATIC_MAX, seed)
        assert flooded.sla_attainment < 0.5 and not flooded.sla_met
        assert flooded.throughput_rps < 30.0  # the server could not keep up


def test_every_request_is_served_and_energy_is_counted():
    env = make_env(episode_steps=8)
    _, _, res = run_episode(env, STATIC_MAX, seed=3)
    assert not np.isnan(env.finish_s).any()
    assert np.all(env.first_token_s >= env.trace.arrival_s)
    assert np.all(env.finish_s >= env.first_token_s)
    idle_floor = env.cost.fit.idle_power_w * 8 * env.period_s
    assert res.energy_j > idle_floor  # idle power all along plus the work


def test_lower_clock_saves_decode_energy_and_cap_does_not_bind_decode():
    cal = load_calibration(FIXTURE, allow_fixture=True)
    cost = CostModel(fit_costs(cal.prefill, cal.decode, cal.idle_power_w), 1980.0)
    t_max, e_max = cost.decode_step(32, 32 * 600, 700.0, None)
    t_cap, e_cap = cost.decode_step(32, 32 * 600, 400.0, None)
    t_low, e_low = cost.decode_step(32, 32 * 600, 700.0, 1110)
    assert (t_cap, e_cap) == (t_max, e_max)  # decode draws < 400 W: the cap never binds
    assert e_low < e_max and t_max < t_low < 1.2 * t_max  # memory-bound: slightly slower, cheaper
    t_pre, _ = cost.prefill(4096, 4096**2, 700.0, None)
    t_pre_cap, _ = cost.prefill(4096, 4096**2, 300.0, None)
    assert t_pre_cap > 1.1 * t_pre  # prefill is cap-sensitive


def test_a_fixture_is_refused_as_a_measurement(tmp_path):
    with pytest.raises(CalibrationError, match="test fixture"):
        load_calibration(FIXTURE)
    with pytest.raises(CalibrationError, match="no such file"):
        load_calibration(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"gpu": "x"}))
    with pytest.raises(CalibrationError, match="malformed"):
        load_calibration(bad)


def test_heldout_error_uses_points_left_out_of_the_fit():
    cal = load_calibration(FIXTURE, allow_fixture=True)
    err = heldout_error(cal)
    held_batches = {r["batch"] for r in err.rows if r["phase"] == "decode"}
    assert held_batches == {2, 8, 24, 48, 96}
    assert err.n_decode_heldout == sum(p.batch in held_batches for p in cal.decode)
    assert 0 < err.decode_time_mape < 0.1  # the fixture is smooth; a broken fit is far off
    assert all(r["pred_time_s"] > 0 for r in err.rows)


def test_bad_runtime_values_name_the_key():
    with pytest.raises(ConfigError, match="runtime.selection.eval_seeds"):
        SelectionConfig(eval_seeds=3)
    with pytest.raises(ConfigError, match="runtime.actuator.nvml_opt_in"):
        ActuatorConfig(kind="nvml")
    with pytest.raises(ConfigError, match="runtime.workload.burst_factor"):
        WorkloadConfig(burst_factor=6.0, burst_fraction=0.2)
    with pytest.raises(ConfigError, match=r"runtime.actuator.concurrency_choices=\[\] is not allowed"):
        ActuatorConfig(concurrency_choices=[])
    with pytest.raises(ValueError, match="calibrated decode batch"):
        make_env(actuator=dict(concurrency_choices=[8, 256]))
    with pytest.raises(ConfigError, match="sla.ttft_p95_s"):
        SlaConfig(ttft_p95_s=100.0, e2e_p95_s=10.0)


def test_a_clock_independent_power_share_shrinks_the_modelled_clock_saving():
    cal = load_calibration(FIXTURE, allow_fixture=True)
    fit = fit_costs(cal.prefill, cal.decode, cal.idle_power_w)
    saving = {}
    for share in (0.0, 0.5, 1.0):
        cost = CostModel(fit, 1980.0, fixed_power_share=share)
        _, e_max = cost.decode_step(32, 32 * 600, 700.0, None)
        _, e_low = cost.decode_step(32, 32 * 600, 700.0, 1110)
        saving[share] = 1 - e_low / e_max
    assert saving[0.0] > saving[0.5] > 0 > saving[1.0]  # all power fixed: slower is only costlier


def test_the_reward_weights_of_the_run_weigh_the_energy_and_sla_terms():
    """reward.beta_energy and reward.gamma_sla reach the controller's reward (M4 is not deaf to them)."""
    cal = load_calibration(FIXTURE, allow_fixture=True)
    cfg = RuntimeConfig(allow_fixture_calibration=True, episode_steps=6)
    tight = SlaConfig(ttft_p95_s=0.001, e2e_p95_s=0.01)  # every request late

    def returns(**weights):
        env = ServingEnv(cfg, tight, hardware_profile("h200"), cal, **weights)
        _, rewards, result = run_episode(env, STATIC_MAX, seed=3)
        return rewards.sum(), result

    base, result = returns()
    assert result.sla_attainment < 1.0
    no_sla, _ = returns(sla_weight=0.0)
    assert no_sla > base  # the late requests no longer cost anything
    double_energy, _ = returns(energy_weight=2.0, sla_weight=0.0)
    assert double_energy == pytest.approx(2 * no_sla)  # the rest is the energy term, scaled


def test_the_runtime_reward_weights_come_from_the_reward_group():

    from warpk.__main__ import compose_config
    from warpk.runtime.serving.env import reward_weights

    m4 = compose_config(["model=m4", "hardware=cpu"], [])
    half = compose_config(["model=m4", "reward.gamma_sla=0.5"], [])
    assert reward_weights(m4) == {"energy_weight": 1.0, "sla_weight": 1.0}
    assert reward_weights(half) == {"energy_weight": 1.0, "sla_weight": 0.5}
    # a reward weighing neither is refused at preflight: tests/unit/test_config.py


def test_an_episodes_energy_is_the_sum_of_its_periods():
    # the last step serves its period, then drains with the last setting: the period's energy was
    # counted twice in the episode's (~2% of static max's J/request, found 2026-12-07)
    env = make_env(episode_steps=8)
    env.reset(seed=3)
    periods_j = []
    while True:
        _, _, _, truncated, _ = env.step(np.array([2, 1, 3]))
        periods_j.append(env.server.window.energy_j)  # what the step's reward charged
        if truncated:
            break
    assert env.result(3).energy_j == pytest.approx(sum(periods_j), rel=1e-12)
