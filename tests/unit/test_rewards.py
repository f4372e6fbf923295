"""Reward terms, the combiner and the trl adapters, on records built by hand (docs/rewards.md)."""

import ast
import dataclasses
import math
import pickle
from pathlib import Path

import pytest

from warpk.config import ConfigError, RewardConfig, SlaConfig
from warpk.records import STATUSES, EvalRecord
from warpk.rewards import (
    TIER_FIELD,
    SharedBatch,
    TermReward,
    correctness,
    energy,
    ipw,
    ok_floor,
    power,
    reward_functions,
    sla_violation,
    speedup,
    total_reward,
)

M1 = RewardConfig()  # conf/reward/kernel.yaml: alpha only
M2 = RewardConfig(name="energy", alpha_speedup=1.0, beta_energy=1.0, delta_power=0.1)
M3 = RewardConfig(name="ipw_blend", alpha_speedup=1.0, beta_energy=1.0, delta_power=0.1, ipw_blend=0.25)
LN2 = math.log(2.0)


def _ok(runtime=1.0, ref_runtime=2.0, power_w=100.0, ref_power_w=100.0, source="nvml", **kw):
    measured = source != "none"
    return EvalRecord(
        task_id=kw.pop("task_id", "t"),
        candidate="c.py",
        candidate_sha="x",
        status="ok",
        runtime_ms=runtime,
        ref_runtime_ms=ref_runtime,
        speedup=ref_runtime / runtime,
        energy_j=runtime * power_w / 1000 if measured else None,
        ref_energy_j=ref_runtime * ref_power_w / 1000 if measured else None,
        avg_power_w=power_w if measured else None,
        ref_avg_power_w=ref_power_w if measured else None,
        energy_source=source,
        **kw,
    )


def _failed(status, task_id="t"):
    return EvalRecord(task_id=task_id, candidate="c.py", candidate_sha="x", status=status, error="why")


# -- terms -------------------------------------------------------------------------------------


def test_speedup_is_log_ratio():
    assert speedup(_ok(1.0, 2.0)) == pytest.approx(LN2)
    assert speedup(_ok(2.0, 2.0)) == 0.0  # speedup 1 -> 0
    assert speedup(_ok(4.0, 2.0)) == pytest.approx(-LN2)
    assert speedup(_failed("incorrect")) is None


def test_energy_half_is_ln2_and_power_parity_is_zero():
    rec = _ok(runtime=1.0, ref_runtime=2.0)  # same power, half the time -> half the energy
    assert energy(rec) == pytest.approx(LN2)
    assert power(rec) == pytest.approx(0.0)
    lower_power = _ok(runtime=2.0, ref_runtime=2.0, power_w=50.0, ref_power_w=100.0)
    assert energy(lower_power) == pytest.approx(LN2)
    assert power(lower_power) == pytest.approx(0.5)
    assert speedup(lower_power) == 0.0


def test_modelled_energy_is_none_unless_allowed():
    rec = _ok(source="model")
    assert energy(rec) is None and power(rec) is None and ipw(rec) is None
    assert energy(rec, allow_modelled=True) == pytest.approx(LN2)


def test_missing_energy_on_cpu_is_none_and_total_is_speedup_only():
    for source in ("none", "model"):
        rec = _ok(runtime=1.0, ref_runtime=2.0, source=source)
        assert energy(rec) is None and power(rec) is None and ipw(rec) is None
        assert total_reward(rec, M2) == pytest.approx(total_reward(rec, M1)) == pytest.approx(LN2)
        assert total_reward(rec, M3) == pytest.approx(LN2)


def test_failed_measurement_is_imputed_no_better_than_parity():
    slow = _ok(runtime=4.0, ref_runtime=2.0, source="none", energy_error="window too short")
    fast = _ok(runtime=1.0, ref_runtime=2.0, source="none", energy_error="window too short")
    assert energy(slow) == pytest.approx(-LN2) and power(slow) is None
    assert energy(fast) == 0.0 and power(fast) is None
    # ipw: the power the energy imputation implies (reference's when slow, 2x when 2x faster)
    assert ipw(slow) == 0.0 and ipw(slow) <= ipw(_ok(runtime=4.0, ref_runtime=2.0, power_w=90.0))
    assert ipw(fast) == pytest.approx(math.log(0.75))  # step time 0.75, step energy 1: < 0
    measured_slow = _ok(runtime=4.0, ref_runtime=2.0)  # same power: energy term = -ln 2
    assert total_reward(slow, M2) <= total_reward(measured_slow, M2) + 1e-12


def _served(r_t, r_p, share=0.5):
    """ln(ref step power / step power) of a served step, written out (docs/rewards.md)."""
    step_time = 1 - share + share * r_t
    step_energy = 1 - share + share * r_t * r_p
    return math.log(step_time / step_energy)


def test_ipw_is_the_served_power_ratio_not_the_energy_term():
    faster_same_power = _ok(runtime=1.0, ref_runtime=2.0)  # 2x faster at the reference's power
    assert energy(faster_same_power) == pytest.approx(LN2) and ipw(faster_same_power) == 0.0
    # the same energy ratio (0.9), split differently between time and power: different IPW
    quick_hot = _ok(runtime=1.0, ref_runtime=2.0, power_w=180.0, ref_power_w=100.0)
    slow_cool = _ok(runtime=2.0, ref_runtime=2.0, power_w=90.0, ref_power_w=100.0)
    assert energy(quick_hot) == pytest.approx(energy(slow_cool))
    assert ipw(quick_hot) < 0 < ipw(slow_cool)
    rec = _ok(runtime=1.5, ref_runtime=2.0, power_w=120.0, ref_power_w=90.0)
    r_t, r_p = 0.75, 120.0 / 90.0
    assert ipw(rec) == pytest.approx(_served(r_t, r_p))
    w = 0.5 * r_t / (0.5 + 0.5 * r_t)  # the op's share of the new step's time
    assert ipw(rec) == pytest.approx(-math.log(1 - w * (1 - r_p)))
    # the ends of the op share: no share, no signal; the whole step, the kernel's own power ratio
    assert ipw(rec, op_share=0.0) == 0.0
    assert ipw(rec, op_share=1.0) == pytest.approx(math.log(90.0 / 120.0))
    assert ipw(rec, op_share=1.0) == pytest.approx(energy(rec) - speedup(rec))
    with pytest.raises(ValueError):
        ipw(rec, op_share=1.5)


def test_ipw_is_zero_at_parity_and_positive_for_lower_served_power():
    assert ipw(_ok(runtime=2.0, ref_runtime=2.0)) == 0.0
    cooler = _ok(runtime=2.0, ref_runtime=2.0, power_w=80.0)
    hotter = _ok(runtime=2.0, ref_runtime=2.0, power_w=125.0)
    assert ipw(cooler) == pytest.approx(_served(1.0, 0.8))
    assert ipw(cooler) > 0 > ipw(hotter)
    # the same power cut weighs more for a kernel that takes more of the served step
    cooler_and_faster = _ok(runtime=1.0, ref_runtime=2.0, power_w=80.0)
    assert 0 < ipw(cooler_and_faster) < ipw(cooler)


def test_ipw_is_none_unless_power_was_measured():
    for source in ("model", "none"):
        assert ipw(_ok(power_w=80.0, source=source)) is None
    assert ipw(_ok(power_w=80.0, source="sampler")) == pytest.approx(_served(0.5, 0.8))
    no_ref_power = dataclasses.replace(_ok(), ref_avg_power_w=None)
    no_runtime = dataclasses.replace(_ok(), runtime_ms=None)
    assert ipw(no_ref_power) is None and ipw(no_runtime) is None
    assert ipw(None) is None and ipw(_failed("incorrect")) is None
    # modelled power is the same for candidate and reference: allowed, it says nothing (0)
    assert ipw(_ok(source="model"), allow_modelled=True) == 0.0


def test_m2_and_m3_rank_a_pair_of_kernels_in_opposite_order():
    # one task (reference 2 ms at 400 W): A is 1.25x faster drawing 500 W (the same energy),
    # B is as fast as the reference drawing 340 W (15% less energy and power)
    a = _ok(runtime=1.6, ref_runtime=2.0, power_w=500.0, ref_power_w=400.0)
    b = _ok(runtime=2.0, ref_runtime=2.0, power_w=340.0, ref_power_w=400.0)
    assert total_reward(a, M2) > total_reward(b, M2)  # M2: the speedup wins
    assert total_reward(a, M3) < total_reward(b, M3)  # M3: the served step's lower power wins
    assert ipw(a) < 0 < ipw(b)


def test_m3_is_not_m2_with_more_weight_on_energy():
    # M2 + 0.25 x energy (what M3 was while ipw equalled the energy term) keeps M2's order of
    # this pair; M3 reverses it. Reference 2 ms at 300 W: A 1.2 ms at 600 W, B 2.5 ms at 180 W.
    a = _ok(runtime=1.2, ref_runtime=2.0, power_w=600.0, ref_power_w=300.0)
    b = _ok(runtime=2.5, ref_runtime=2.0, power_w=180.0, ref_power_w=300.0)
    energy_heavier = RewardConfig(name="energy", alpha_speedup=1.0, beta_energy=1.25, delta_power=0.1)
    assert total_reward(a, M2) > total_reward(b, M2)
    assert total_reward(a, energy_heavier) > total_reward(b, energy_heavier)
    assert total_reward(a, M3) < total_reward(b, M3)


@pytest.mark.parametrize("blend", [0.1, 0.25, 0.5])
def test_m3_never_pays_for_padding_time_at_the_same_energy(blend):
    floor = -20.0  # tiers far down, so the ok floor does not hide the slope
    cfg = dataclasses.replace(
        M3, ipw_blend=blend, reward_no_code=floor, reward_compile_error=floor, reward_incorrect=floor
    )
    # the same 0.2 J per call, stretched over longer runtimes at proportionally lower power
    padded = [_ok(runtime=t, ref_runtime=2.0, power_w=200.0 / t) for t in (1.0, 1.5, 2.0, 3.0, 5.0, 10.0)]
    totals = [total_reward(r, cfg) for r in padded]
    assert all(e == pytest.approx(energy(padded[0])) for e in map(energy, padded))
    assert totals == sorted(totals, reverse=True) and len(set(totals)) == len(totals)


def test_ipw_op_share_comes_from_the_reward_config():
    rec = _ok(runtime=1.0, ref_runtime=2.0, power_w=50.0, ref_power_w=100.0)
    no_share = dataclasses.replace(M3, ipw_op_share=0.0)
    assert total_reward(rec, no_share) == pytest.approx(total_reward(rec, M2))
    whole = dataclasses.replace(M3, ipw_op_share=1.0)
    assert total_reward(rec, whole) == pytest.approx(total_reward(rec, M2) + 0.25 * LN2)
    assert TermReward("ipw", RecordingSource(), whole).score(rec) == pytest.approx(LN2)
    with pytest.raises(ConfigError):
        RewardConfig(ipw_op_share=1.5)


def test_total_hand_computed_per_arm():
    rec = _ok(runtime=1.0, ref_runtime=2.0, power_w=50.0, ref_power_w=100.0)  # 2x faster, 4x less energy
    assert total_reward(rec, M1) == pytest.approx(LN2)
    assert total_reward(rec, M2) == pytest.approx(LN2 + math.log(4) + 0.1 * 0.5)
    served = math.log(0.75 / 0.625)  # step time 0.5 + 0.5 x 0.5, step energy 0.5 + 0.5 x 0.25
    assert total_reward(rec, M3) == pytest.approx(LN2 + math.log(4) + 0.05 + 0.25 * served)
    hrl = RewardConfig(name="hrl", gamma_sla=1.0)
    assert total_reward(rec, hrl, sla=0.25) == pytest.approx(LN2 - 0.25)


# -- tiers -------------------------------------------------------------------------------------


def test_every_failure_status_has_a_tier_and_tiers_are_ordered():
    assert set(TIER_FIELD) == set(STATUSES) - {"ok"}
    cfg = M1
    r = {s: total_reward(_failed(s), cfg) for s in TIER_FIELD}
    assert total_reward(None, cfg) == cfg.reward_no_code == r["static_reject"]
    assert r["static_reject"] < r["compile_error"] < r["incorrect"]
    assert r["incorrect"] == r["runtime_error"]
    assert r["timeout"] == r["crashed"] == r["compile_error"]
    very_slow = _ok(runtime=100.0, ref_runtime=1.0)
    assert total_reward(very_slow, cfg) == ok_floor(cfg) > r["incorrect"]
    assert correctness(_ok(), cfg) == 0.0


@pytest.mark.parametrize("cfg", [M1, M2, M3])
def test_implausible_is_never_rewarded(cfg):
    rec = EvalRecord(
        task_id="t", candidate="c.py", candidate_sha="x", status="implausible", error="below floor",
        runtime_ms=0.001, ref_runtime_ms=10.0, speedup=1e4, energy_j=1e-6, ref_energy_j=1.0,
        avg_power_w=1.0, ref_avg_power_w=100.0, energy_source="nvml",
    )
    assert total_reward(rec, cfg) == cfg.reward_no_code <= total_reward(_failed("incorrect"), cfg)
    assert total_reward(rec, cfg) <= 0
    assert all(f(rec) is None for f in (speedup, energy, power, ipw))


# -- SLA ---------------------------------------------------------------------------------------


def test_sla_violation_fraction():
    sla = SlaConfig(ttft_p95_s=1.0, e2e_p95_s=10.0)
    assert sla_violation([0.5, 2.0, 0.5, 0.5], [5.0, 5.0, 11.0, 5.0], sla) == pytest.approx(0.5)
    assert sla_violation([], [], sla) is None
    with pytest.raises(ValueError):
        sla_violation([0.1], [1.0, 2.0], sla)


# -- trl adapters ------------------------------------------------------------------------------


class RecordingSource:
    """Test double: a completion 'fast' is 2x faster on its task, 'wrong' is incorrect, '' has no code."""

    def __init__(self):
        self.calls = []

    def records_for(self, completions, task_ids):
        self.calls.append((list(completions), list(task_ids)))
        out = []
        for c, t in zip(completions, task_ids, strict=True):
            text = c if isinstance(c, str) else c[-1]["content"]
            if not text:
                out.append(None)
            elif text == "wrong":
                out.append(_failed("incorrect", task_id=t))
            else:
                out.append(_ok(1.0, 2.0 if text == "fast" else 1.0, task_id=t))
        return out


def test_adapter_one_value_per_completion_in_order_and_own_task_id():
    src = RecordingSource()
    fn = TermReward("total", src, M1)
    completions = ["fast", "wrong", "", "same", "fast"]
    tasks = ["a", "b", "c", "d", "e"]
    values = fn(prompts=["p"] * 5, completions=completions, task_id=tasks, trainer_state=None)
    assert values == pytest.approx([LN2, -0.5, -1.0, 0.0, LN2])
    assert src.calls == [(completions, tasks)]  # each completion requested for its own task


def test_adapter_records_carry_each_completions_task():
    class Echo(RecordingSource):
        def records_for(self, completions, task_ids):
            records = super().records_for(completions, task_ids)
            self.seen = [r.task_id for r in records if r is not None]
            return records

    src = Echo()
    TermReward("speedup", src, M1)([None] * 3, ["fast", "fast", "fast"], ["x", "y", "z"])
    assert src.seen == ["x", "y", "z"]


def test_adapter_conversational_completions_and_none_terms():
    src = RecordingSource()
    msgs = [[{"role": "assistant", "content": "fast"}], [{"role": "assistant", "content": "wrong"}]]
    assert TermReward("speedup", src, M1)(None, msgs, ["a", "b"]) == [pytest.approx(LN2), None]
    assert TermReward("correctness", src, M1)(None, msgs, ["a", "b"]) == [0.0, -0.5]


def test_the_correctness_adapter_logs_the_batchs_correct_and_compile_rates_through_trl():
    logged = []
    completions = ["fast", "wrong", "", "same"]  # ok 2x, incorrect (compiled), no code, ok 1x
    TermReward("correctness", RecordingSource(), M1)(
        None, completions, ["a", "b", "c", "d"], log_metric=lambda name, value: logged.append((name, value))
    )
    assert dict(logged) == pytest.approx(
        {
            "evaluator/correct_rate": 0.5,
            "evaluator/compile_rate": 0.75,
            "evaluator/ok_speedup_geomean": 2**0.5,
        }
    )
    logged.clear()
    total = TermReward("total", RecordingSource(), M1)
    total(None, completions, ["a"] * 4, log_metric=lambda *a: logged.append(a))
    assert logged == []  # once per batch, not once per term


def test_reward_functions_share_one_call_and_have_names_and_weights():
    src = RecordingSource()
    funcs, weights = reward_functions(src, M3)
    assert [f.__name__ for f in funcs] == ["total", "correctness", "speedup", "energy", "power", "ipw"]
    assert weights == [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for f in funcs:
        f(prompts=["p", "p"], completions=["fast", "wrong"], task_id=["a", "b"])
    assert len(src.calls) == 1
    m1_funcs, m1_weights = reward_functions(src, M1)
    assert [f.__name__ for f in m1_funcs] == ["total", "correctness", "speedup"] and len(m1_weights) == 3


def test_adapters_are_picklable_and_keep_their_name():
    funcs, _ = reward_functions(SharedBatch(RecordingSource()), M2)
    for f in funcs:
        g = pickle.loads(pickle.dumps(f))
        assert g.__name__ == f.__name__
        assert g(None, ["fast"], ["a"]) == f(None, ["fast"], ["a"])


def test_adapter_rejects_mismatched_task_ids_and_unknown_terms():
    with pytest.raises(ValueError):
        TermReward("total", RecordingSource(), M1)(None, ["a", "b"], ["t"])
    with pytest.raises(ValueError):
        TermReward("latency", RecordingSource(), M1)


def test_rewards_package_stays_light():
    heavy = {"trl", "peft", "wandb", "transformers", "hydra", "omegaconf", "datasets", "torch"}
    pkg = Path(__file__).resolve().parents[2] / "warpk" / "rewards"
    for path in pkg.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module.split(".")[0])
        assert not names & heavy, path.name


# --- energy arms without measured energy ---------------------------------------------------------
def test_an_energy_reward_without_measured_energy_says_it_trains_like_m1():
    from warpk.config import RewardConfig
    from warpk.rewards.terms import reads_energy, unmeasured_energy_note

    m1, m2 = RewardConfig(name="kernel"), RewardConfig(name="energy", beta_energy=1.0, delta_power=0.1)
    m3 = RewardConfig(name="ipw_blend", ipw_blend=0.25)
    assert not reads_energy(m1) and reads_energy(m2) and reads_energy(m3)
    assert unmeasured_energy_note(m1, "model") is None  # M1 never reads energy
    assert unmeasured_energy_note(m2, "nvml") is None
    for mode in ("model", "none"):
        assert "trains exactly like M1" in unmeasured_energy_note(m2, mode)


def test_the_report_marks_energy_arms_that_trained_without_energy(tmp_path):
    from warpk.config import ReportConfig
    from warpk.records import EvalRecord
    from warpk.report.analysis import analyse
    from warpk.report.energy import energy_policy
    from warpk.report.runs import Run

    def run(arm: str, seed: int, summary: dict) -> Run:
        record = EvalRecord(task_id="t", candidate="c", candidate_sha="s", status="ok", hardware="cpu",
                            speedup=1.0 + seed / 10, runtime_ms=1.0, ref_runtime_ms=1.0)
        return Run(tmp_path / f"{arm}{seed}", arm, seed, "train", {"model": {"name": arm}}, "x", None, "-",
                   (record,), summary, ())

    runs = [run(arm, seed, {"reward_energy_measured": False} if arm == "m2" else {})
            for arm in ("m1", "m2") for seed in (1, 2)]
    analysis = analyse(runs, energy_policy(runs, False), ReportConfig(bootstrap_samples=200), seed=0)
    notes = " ".join(n for table in analysis.tables for n in table.notes)
    assert "Arm m2 trained without measured energy" in notes  # and only m2: M1 reads no energy
    assert "Arms " not in notes
