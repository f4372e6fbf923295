"""M5 (stage=hrl): op classes, Amdahl scaling of the cost model, kernel deployment, the stage."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import hardware_profile, run_warpk
from warpk.config import RuntimeConfig, SlaConfig
from warpk.paths import REPO
from warpk.records import EvalRecord, faster, read_records
from warpk.runtime.arms import hrl
from warpk.runtime.serving.calibration import CostModel, PhaseScale, fit_costs, load_calibration
from warpk.runtime.serving.env import ServingEnv

FIXTURE = "tests/data/runtime_calibration_fixture.json"
NO_CAP_W = 1e9  # a cap that never binds: only the kernel multipliers change the cost


def record(task, status="ok", speedup=3.0, hardware="h200", source="nvml", energy_j=1.0, ref_energy_j=2.0):
    return EvalRecord(
        task_id=f"bundled/{task}",
        candidate="cand.py",
        candidate_sha="0" * 64,
        status=status,
        error=None if status == "ok" else "wrong output",
        hardware=hardware,
        speedup=speedup,
        energy_j=energy_j,
        ref_energy_j=ref_energy_j,
        energy_source=source,
    )


def make_env(scale=None):
    cal = load_calibration(FIXTURE, allow_fixture=True)
    cfg = RuntimeConfig(allow_fixture_calibration=True, episode_steps=12)
    return ServingEnv(cfg, SlaConfig(), hardware_profile("h200"), cal, kernel_scale=scale)


def episode(env, seed=7):
    obs, _ = env.reset(seed=seed)
    trajectory = [obs]
    while True:
        obs, reward, _, truncated, _ = env.step(np.array([1, 1, 2]))
        trajectory += [obs, np.array([reward])]
        if truncated:
            return np.concatenate(trajectory), env.result(seed)


def test_op_classes_map_served_ops_and_leave_others_out():
    assert hrl.op_class("bundled/09_matmul") == "matmul"
    assert hrl.op_class("bundled/17_causal_attention") == "attention"
    assert hrl.op_class("bundled/04_rms_norm") == "norm"
    assert hrl.op_class("bundled/23_geglu") == "activation"
    for other in ("11_cross_entropy", "13_causal_conv1d", "15_group_norm", "16_sum_reduction"):
        assert hrl.op_class(f"bundled/{other}") is None  # Qwen2.5-7B runs none of these
    problems = {p.stem for p in (REPO / "kernelbench" / "problems").glob("*.py")}
    assert set(hrl.TASK_CLASS) <= problems  # every mapped name is a real bundled task
    assert set(hrl.TASK_CLASS.values()) == set(hrl.OP_CLASSES)


def test_modelled_shares_are_fractions_and_matmul_dominates():
    shares = hrl.phase_shares(RuntimeConfig(), hardware_profile("h200"))
    for phase in ("prefill", "decode"):
        assert 0.0 < sum(shares[phase].values()) <= 1.0
        assert shares[phase]["matmul"] > 0.5
    assert shares["decode"]["attention"] > shares["prefill"]["attention"]  # KV-cache reads in decode


def test_amdahl_scales_step_time_by_exactly_one_over_1_minus_f_plus_f_over_s():
    f, s = 0.4, 2.5
    shares = {
        p: {"matmul": f, "attention": 0.0, "norm": 0.0, "activation": 0.0} for p in ("prefill", "decode")
    }
    kernels = hrl.choose_kernels({"test": [record("09_matmul", speedup=s, source="model")]})
    scale = hrl.kernel_scale(kernels, shares)
    cal = load_calibration(FIXTURE, allow_fixture=True)
    fit = fit_costs(cal.prefill, cal.decode, cal.idle_power_w)
    base, fast = CostModel(fit, 1980.0), CostModel(fit, 1980.0, scale=scale)
    t0, e0 = base.decode_step(32, 32 * 600, NO_CAP_W, None)
    t1, e1 = fast.decode_step(32, 32 * 600, NO_CAP_W, None)
    assert t0 / t1 == pytest.approx(1.0 / ((1 - f) + f / s), rel=1e-12)  # 1.3158
    assert e1 == pytest.approx(e0, rel=1e-12)  # modelled energy: speedup only, energy unchanged
    p0, _ = base.prefill(512, 512**2, NO_CAP_W, None)
    p1, _ = fast.prefill(512, 512**2, NO_CAP_W, None)
    assert p0 / p1 == pytest.approx(1.0 / ((1 - f) + f / s), rel=1e-12)


def test_measured_energy_ratio_scales_energy_by_amdahl():
    shares = {
        p: {"matmul": 0.0, "attention": 0.5, "norm": 0.0, "activation": 0.0} for p in ("prefill", "decode")
    }
    kernels = hrl.choose_kernels({"test": [record("18_rope_qk", energy_j=1.0, ref_energy_j=4.0)]})
    assert kernels["attention"].energy_note == "measured (nvml)"
    scale = hrl.kernel_scale(kernels, shares)
    assert scale.decode_energy == pytest.approx(0.5 + 0.5 * 0.25)
    assert scale.decode_time == pytest.approx(0.5 + 0.5 / 3.0)


def test_an_incorrect_or_slower_kernel_never_changes_the_cost_model():
    records = [
        record("09_matmul", status="incorrect", speedup=50.0),
        record("17_causal_attention", status="runtime_error", speedup=None),
        record("04_rms_norm", speedup=0.8),  # correct but slower: the reference stays
    ]
    kernels = hrl.choose_kernels({"policy": records})
    assert all(k.speedup == 1.0 and k.energy_ratio == 1.0 and not k.deployed for k in kernels.values())
    scale = hrl.kernel_scale(kernels, hrl.phase_shares(RuntimeConfig(), hardware_profile("h200")))
    assert hrl.is_identity(scale)


def test_with_no_correct_kernel_the_m5_env_equals_the_m4_env():
    kernels = hrl.choose_kernels({"policy": [record("09_matmul", status="incorrect", speedup=9.0)]})
    scale = hrl.kernel_scale(kernels, hrl.phase_shares(RuntimeConfig(), hardware_profile("h200")))
    m4_traj, m4 = episode(make_env())
    m5_traj, m5 = episode(make_env(scale))
    assert np.array_equal(m4_traj, m5_traj) and m4 == m5


def test_measured_records_on_the_served_gpu_make_the_env_faster(tmp_path):
    path = tmp_path / "records.jsonl"
    rows = [
        record("18_rope_qk"),
        record("09_matmul", speedup=1.5),
        record("04_rms_norm", hardware="cpu"),
    ]
    path.write_text("".join(r.to_json() + "\n" for r in rows))
    keep, notes = hrl.usable(read_records(path), "h200")
    assert len(keep) == 2 and notes == ["1 records measured on cpu, not the served h200: not used"]
    kernels = hrl.choose_kernels({"records file": keep})
    assert kernels["norm"].speedup == 1.0  # the cpu record did not count
    scale = hrl.kernel_scale(kernels, hrl.phase_shares(RuntimeConfig(), hardware_profile("h200")))
    m4_env, m5_env = make_env(), make_env(scale)
    t4, _ = m4_env.cost.decode_step(32, 32 * 600, 700.0, None)
    t5, _ = m5_env.cost.decode_step(32, 32 * 600, 700.0, None)
    assert t5 < 0.8 * t4
    _, r4 = episode(m4_env)
    _, r5 = episode(m5_env)
    assert r5.e2e_p95_s < r4.e2e_p95_s and r5.energy_per_request_j < r4.energy_per_request_j


def test_phase_scale_identity_leaves_cost_model_bit_identical():
    assert hrl.is_identity(PhaseScale()) and not hrl.is_identity(PhaseScale(decode_time=0.9))


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(x) for x in (run_dir / "runtime_results.jsonl").read_text().splitlines()]


SMALL = (
    "stage=hrl",
    "model=m5",
    "policy=tiny",
    "logger=disabled",
    f"runtime.calibration={FIXTURE}",
    "runtime.allow_fixture_calibration=true",
    "runtime.episode_steps=12",
    "runtime.hrl.rounds=1",
    "runtime.hrl.ppo_timesteps=480",
    "runtime.hrl.joint_timesteps=0",
)


@pytest.mark.slow
def test_stage_hrl_with_the_tiny_policy_reports_no_gain(tmp_path):
    result = run_warpk(*SMALL, "runtime.hrl.grpo_steps=1", f"hydra.run.dir={tmp_path}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "no correct kernel from the policy: cost model unchanged" in result.stdout
    assert "M5 (kernel-updated env) versus M4 alone" in result.stdout
    rows = [r for r in _rows(tmp_path) if not r.get("summary")]
    m4 = [r["energy_per_request_j"] for r in rows if r["policy"] == "M4 PPO"]
    m5 = [r["energy_per_request_j"] for r in rows if r["policy"] == "M5 PPO (kernel-updated env)"]
    assert len(m4) == 5 and m4 == m5  # identical env, identical training stream: exactly no gain
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["m5_energy_saving_vs_m4"] == 0.0 and summary["kernel_scale/decode_time"] == 1.0
    assert (tmp_path / "grpo" / "round1_records.jsonl").is_file()


@pytest.mark.slow
def test_stage_hrl_with_measured_records_changes_the_env_and_refuses_cpu_records(tmp_path):
    good = tmp_path / "h200.jsonl"
    good.write_text(record("09_matmul", source="model").to_json() + "\n")
    result = run_warpk(
        *SMALL, "runtime.hrl.grpo=false", f"runtime.hrl.kernel_records={good}",
        f"hydra.run.dir={tmp_path / 'a'}",
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "speedup only" in result.stdout and "kernels from: records file" in result.stdout
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert summary["kernel_scale/decode_time"] < 1.0 and summary["kernel_scale/decode_energy"] == 1.0
    static = {r["policy"]: r["e2e_p95_s"] for r in _rows(tmp_path / "a") if r.get("summary")}
    assert static["static max (kernel-updated env)"] < static["static max"]
    cpu = tmp_path / "cpu.jsonl"
    cpu.write_text(record("17_causal_attention", hardware="cpu").to_json() + "\n")
    refused = run_warpk(*SMALL, f"runtime.hrl.kernel_records={cpu}", f"hydra.run.dir={tmp_path / 'b'}")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert refused.stderr.strip().splitlines()[-1].startswith("warpk: runtime.hrl.kernel_records=")
    assert "none measured on the served GPU" in refused.stderr


def test_a_kernel_is_deployed_only_when_the_evaluator_calls_it_faster_and_never_over_a_served_fused_op():
    def deployed(*records):
        return {k.op_class for k in hrl.choose_kernels({"t": list(records)}).values() if k.deployed}

    # one rule, the evaluator's (records.faster): the interval's low end above 1 + SPEED_BIAS_MARGIN
    assert deployed(replace(record("09_matmul", speedup=1.5), speedup_low=0.98, speedup_high=2.0)) == set()
    copy = replace(record("09_matmul", speedup=1.09), speedup_low=1.08, speedup_high=1.10)
    assert deployed(copy) == set()  # a reference copy's interval reaches 1.08: not deployed
    clear = replace(record("09_matmul", speedup=1.3), speedup_low=1.12, speedup_high=1.5)
    assert deployed(clear) == {"matmul"}
    assert hrl.beats_reference(clear) == faster(clear)
    assert not hrl.beats_reference(replace(clear, status="incorrect", error="wrong output"))
    assert deployed(record("09_matmul", speedup=1.05)) == set()  # no interval: the point, same margin
    for fused in hrl.SERVED_FUSED:  # the served model runs these through SDPA already
        kernels = hrl.choose_kernels({"t": [record(fused, speedup=4.0)]})
        assert kernels["attention"].speedup == 1.0 and not kernels["attention"].deployed
        assert kernels["attention"].energy_note == "reference kept"
    assert deployed(record("18_rope_qk", speedup=4.0)) == {"attention"}  # RoPE is not inside SDPA
