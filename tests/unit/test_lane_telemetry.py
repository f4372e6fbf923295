"""The lane's telemetry summary (warpk.telemetry.lane) and where its fields go."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

from warpk.evaluator.protocol import Measurement
from warpk.records import EvalRecord
from warpk.rewards.adapters import batch_rates
from warpk.telemetry.lane import LaneTelemetry, summarize_samples

NONE = dict(power_w=None, power_instant_w=None, sm_clock_mhz=None, temperature_c=None, throttle_reasons=None)


def sample(t: float, **metrics):
    return SimpleNamespace(monotonic_s=t, **{**NONE, **metrics})


def test_the_summary_prefers_instant_power_and_ors_the_throttle_masks():
    samples = [sample(10.0, power_w=300.0, power_instant_w=250.0, sm_clock_mhz=1980, temperature_c=50,
                      throttle_reasons=0x1),
               sample(10.5, power_w=300.0, power_instant_w=650.0, sm_clock_mhz=1700, temperature_c=58,
                      throttle_reasons=0x4)]
    t = summarize_samples(samples)
    assert (t.samples, t.span_s, t.power_source) == (2, 0.5, "power_instant_w")
    assert (t.power_mean_w, t.power_max_w) == (450.0, 650.0)
    assert (t.sm_clock_mean_mhz, t.sm_clock_min_mhz, t.temperature_max_c) == (1840.0, 1700, 58)
    assert t.throttle_reasons == 0x5


def test_averaged_power_is_used_and_labelled_when_there_is_no_instant_field():
    t = summarize_samples([sample(0.0, power_w=200.0), sample(0.1, power_w=220.0)])
    assert t.power_source == "power_w" and t.power_mean_w == 210.0
    assert t.sm_clock_mean_mhz is None and t.throttle_reasons is None  # not reported: None, never 0


def test_no_samples_is_no_summary():
    assert summarize_samples([]) is None


def test_every_summary_field_is_a_measurement_and_a_record_field():
    names = set(LaneTelemetry(1, 0.0, None, None, None, None, None, None, None).record_fields())
    assert names <= {f.name for f in dataclasses.fields(Measurement)}
    assert names <= {f.name for f in dataclasses.fields(EvalRecord)}


def test_the_batch_rates_logged_per_step_carry_the_lanes_means():
    base = dict(task_id="t", candidate="c", candidate_sha="0", hardware="h200", status="ok")
    records = [EvalRecord(**base, speedup=1.0, lane_power_mean_w=400.0, lane_temperature_max_c=60),
               EvalRecord(**base, speedup=1.0, lane_power_mean_w=500.0, lane_temperature_max_c=70),
               EvalRecord(**base, speedup=1.0)]
    rates = batch_rates(records)
    assert rates["lane_power_mean_w"] == 450.0 and rates["lane_temperature_max_c"] == 65.0
    assert "lane_sm_clock_mean_mhz" not in rates
    assert "lane_power_mean_w" not in batch_rates([EvalRecord(**base, speedup=1.0)])


def test_the_records_telemetry_is_only_what_fell_inside_the_candidates_spans():
    from warpk.telemetry.lane import lane_fields

    samples = [sample(t, power_w=w) for t, w in ((1.0, 100.0), (2.0, 600.0), (3.0, 200.0), (4.0, 700.0))]
    fields = lane_fields(samples, [(1.5, 2.5), (3.5, 4.5)])  # the reference ran at 1.0 and 3.0
    assert fields["lane_samples"] == 2 and fields["lane_power_mean_w"] == 650.0
    assert "lane_error" not in fields
    missed = lane_fields(samples, [(5.0, 5.004)])
    assert set(missed) == {"lane_error"} and "no telemetry sample fell inside" in missed["lane_error"]
