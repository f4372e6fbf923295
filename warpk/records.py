"""Evaluation records and the summary computed from them.

An `EvalRecord` is what the evaluator says about one candidate on one task: frozen, units in the
field names, `None` wherever something was not measured (never -1 or 0 as a stand-in). The
record schema does not change when measured energy arrives: `energy_source` says where each
energy figure came from (`nvml`, `sampler`, `model` or `none`).

A records file (`records.jsonl`, one record per line, in item order) has one home here:
`read_records` (strict: a line that is not a record names its file and line), `write_records`,
`OrderedSink` (records arriving in any order are written in item order, each line flushed, so an
interrupted run leaves a prefix) and `kept_prefix` (what a killed attempt wrote, for its resume).

Non-goals: no rewards (see warpk.rewards); no other file formats.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

STATUSES = (
    "ok",  # compiled, correct on every trial, timed
    "static_reject",  # refused before running (e.g. no ModelNew)
    "compile_error",  # syntax error, import error, build failure
    "runtime_error",  # raised while constructing or calling ModelNew
    "incorrect",  # ran, but an output differs from the reference (or shape/dtype/NaN)
    "timeout",  # the worker outran its wall-clock limit and was killed
    "crashed",  # the worker died (signal, os._exit, CUDA fault) before reporting
    "implausible",  # faster than the task's roofline floor allows
    "too_big",  # the reference's side ran out of device memory before the candidate ran any call
)
ENERGY_SOURCES = ("nvml", "sampler", "model", "none")
# Statuses that prove the candidate loaded. timeout and crashed do not: the worker may have died
# while compiling, so they count against the compile rate.
COMPILED = ("ok", "runtime_error", "incorrect", "implausible", "too_big")


@dataclass(frozen=True)
class EvalRecord:
    """One candidate evaluated on one task (DESIGN.md 4.2)."""

    task_id: str
    candidate: str  # a label for the candidate, e.g. its file name
    candidate_sha: str  # sha256 of the candidate source
    status: str
    error: str | None = None  # one-line reason for any status but ok
    hardware: str | None = None  # hardware profile name
    device: str | None = None  # the device the worker measured on, e.g. "cpu" or "NVIDIA H200"
    shape: str | None = None  # which task shape ran: cpu | gpu | default
    max_abs_err: float | None = None  # worst |out - ref| over all correctness trials
    max_rel_err: float | None = None  # worst max|out - ref| / max|ref| over the trials
    runtime_ms: float | None = None  # median time per call of the candidate
    runtime_iqr_ms: float | None = None
    ref_runtime_ms: float | None = None  # median time per call of the reference, same process
    ref_runtime_iqr_ms: float | None = None
    speedup: float | None = None  # median of ref/candidate time ratios of pairs of batches
    speedup_low: float | None = None  # its 95% interval over the batches; where the reference was
    speedup_high: float | None = None  # slowed, up to the interleaved ratio's too (interleaved_speedup);
    #                                    faster than alone, up to the ratio at the reference's alone speed
    energy_j: float | None = None  # energy per call of the candidate
    energy_uncertainty_j: float | None = None
    ref_energy_j: float | None = None
    avg_power_w: float | None = None
    ref_avg_power_w: float | None = None
    energy_source: str = "none"
    window_s: float | None = None  # length of the energy window (None when modelled)
    backend: str | None = None  # cuda | triton | torch, from the candidate's source
    flops: float | None = None  # of one reference call (torch's flop counter)
    min_bytes: float | None = None  # inputs + outputs + parameters, each moved once
    roofline_floor_ms: float | None = None  # shortest possible time on this hardware profile
    cached: bool = False  # True when this record was reused from the result cache or the batch
    compile_s: float | None = None  # phase timings inside the worker
    correctness_s: float | None = None
    timing_s: float | None = None
    wall_s: float | None = None  # whole worker, including process start and imports
    # Measured energy only (energy_source nvml/sampler), None otherwise:
    ref_energy_uncertainty_j: float | None = None
    ref_window_s: float | None = None
    idle_power_w: float | None = None  # observed before the windows; never subtracted from energy_j
    ref_energy_id: str | None = None  # which of its lane's reference measurements ref_energy_j is
    energy_error: str | None = None  # why a requested measurement gave no energy (source is then none)
    energy_s: float | None = None  # phase timing of the energy measurement inside the worker
    sample: int | None = None  # policy evaluation: which of the k completions of its task (0-based)
    sandbox: str | None = None  # how the candidate's process was isolated: bwrap | process
    # its resource limits (warpk.evaluator.resources): e.g. "cgroup2: memory, pids, cpuset" | none
    limits: str | None = None
    calls_per_batch: int | None = None  # timing: calls per timed batch (each on fresh inputs)
    timing_batches: int | None = None  # timed batches (after the warmup batches; an odd setting + 1)
    # How the candidate was kept still while the reference was timed (evaluator v3):
    # cgroup (cgroup v2 freezer) | sigstop (every process of its sandbox stopped) | none
    freeze: str | None = None
    # the reference's time per call alone, timed before any candidate code ran (the baseline),
    # and how much slower it was interleaved with the candidate (interleaved / alone)
    ref_alone_runtime_ms: float | None = None
    ref_contention: float | None = None
    # where that was over 1.05: the candidate's time per call back to back (the reference idle),
    # and which ratio the speedup is: `interleaved`, unless that lies above the whole interval of
    # `alone` (both sides alone); None where the candidate was not timed alone (outputs too big
    # to keep, or a huge task: the reference's batches then scaled down to alone x 1.05)
    new_alone_runtime_ms: float | None = None
    basis: str | None = None
    # a diagnostic beside those, deciding nothing: the reference timed alone again right after the
    # candidate's alone batches (the candidate frozen); far above ref_alone_runtime_ms, the machine
    # drifted between the baseline and the alone batches (a `basis` alone copy then comes out low)
    ref_alone_after_runtime_ms: float | None = None
    # where the reference was slowed (ref_contention > 1.05): the interleaved ratio itself, which the
    # speedup's interval reaches up to (warpk.evaluator.timing_phase.wider); a diagnostic
    interleaved_speedup: float | None = None
    # Evaluator v2 only (records before 2026-12-05): the share of the candidate's self-reported
    # time its wall clock confirmed. v3 uses no self-reported time; always None since.
    clock_confirmed: float | None = None
    # evaluate.energy=sampler: the lane's telemetry during the candidate's timing and energy
    # windows, from the sampler daemon's stream (warpk.telemetry.lane); None otherwise
    lane_samples: int | None = None
    lane_span_s: float | None = None
    lane_power_source: str | None = None  # power_instant_w | power_w (a 1 s average on Hopper)
    lane_power_mean_w: float | None = None
    lane_power_max_w: float | None = None
    lane_sm_clock_mean_mhz: float | None = None
    lane_sm_clock_min_mhz: int | None = None
    lane_temperature_max_c: int | None = None
    lane_throttle_reasons: int | None = None  # OR of nvmlClocksEventReason masks over the samples
    lane_error: str | None = None  # why a sampler run's record has no lane telemetry
    # Measured energy: windows per side, and whether they stopped at their cap (evaluate.energy_repeats)
    # with the stated uncertainty still above hardware.energy_rel_uncertainty (None: no target)
    energy_windows: int | None = None
    energy_at_cap: bool | None = None
    ref_energy_windows: int | None = None
    ref_energy_at_cap: bool | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status={self.status!r}; allowed: {', '.join(STATUSES)}")
        if self.energy_source not in ENERGY_SOURCES:
            raise ValueError(f"energy_source={self.energy_source!r}; allowed: {ENERGY_SOURCES}")
        if self.status != "ok" and not self.error:
            raise ValueError(f"a {self.status} record needs a one-line reason in `error`")

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=False)

    @classmethod
    def from_json(cls, line: str) -> EvalRecord:
        return cls(**json.loads(line))


def geometric_mean(values: list[float]) -> float | None:
    """Geometric mean of positive values; None for an empty list."""
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))


# The reference and the candidate are timed in two processes, which differ systematically, not
# only by noise: upstream KernelBench L1 references timed against themselves on the H200
# (2026-12-02, 77 problems, docs/benchmarks.md) had speedups from 0.88 to 1.09 and interval lower
# ends up to 1.066 (one outlier, 1.25, on 0.5 ms batches), so 40 of 77 copies were "faster" by
# the interval alone, 1 of 77 with this margin. Evaluator v3 on an H100 (2026-12-05, after the
# huge-task order fix): honest copies' lower ends at most 1.010 on L1 (100) and 0.995 on L2 1-30;
# on the 2-core CPU lane one softmax copy's lower end reached 1.11 (red team round 15). The margin stays at
# 10% for every device: the CPU's noise needs it. Faster therefore means the interval's lower end
# is above `than` x (1 + SPEED_BIAS_MARGIN).
SPEED_BIAS_MARGIN = 0.10


def faster(record: EvalRecord, than: float = 1.0) -> bool:
    """Faster than `than` x the reference beyond noise and the two processes' bias: the interval's
    lower end is above than x (1 + SPEED_BIAS_MARGIN) (records without an interval, from older
    runs, fall back to the point estimate)."""
    low = record.speedup_low if record.speedup_low is not None else record.speedup
    return low is not None and low > than * (1 + SPEED_BIAS_MARGIN)


def summarize(records: list[EvalRecord]) -> dict[str, float | None]:
    """Suite-level metrics, all fractions over every evaluated candidate.

    - compile_rate: candidates that got past loading/compiling (any status in COMPILED)
    - correct_rate: candidates with status ok
    - geomean_speedup: geometric mean of speedup over ok candidates (None if there are none)
    - fast_1: candidates that are ok AND faster than the reference beyond noise (the lower end
      of the speedup's 95% interval above 1 + SPEED_BIAS_MARGIN; KernelBench's fast_p, p=1,
      counts any speedup > 1, which makes ties coin flips)
    - energy_source: not a number; the caller labels energy figures with it
    """
    n = len(records)
    counts = Counter(r.status for r in records)
    ok = [r for r in records if r.status == "ok"]
    summary: dict[str, float | None] = {
        "n_candidates": float(n),
        "n_tasks": float(len({r.task_id for r in records})),
        "compile_rate": sum(counts[s] for s in COMPILED) / n if n else None,
        "correct_rate": len(ok) / n if n else None,
        "geomean_speedup": geometric_mean([r.speedup for r in ok if r.speedup]),
        "fast_1": sum(1 for r in ok if faster(r)) / n if n else None,
        "geomean_energy_ratio": geometric_mean(
            [r.ref_energy_j / r.energy_j for r in ok if r.energy_j and r.ref_energy_j]
        ),
    }
    for status in STATUSES:
        summary[f"n_{status}"] = float(counts[status])
    return summary


# --- records files -------------------------------------------------------------------------
def read_records(path: str | Path) -> list[EvalRecord]:
    """Every record of a records file, in file order: record i is line i + 1 (reports cite lines),
    so a blank line is refused like any other line that is not a record."""
    records = []
    for number, line in enumerate(Path(path).read_text().splitlines(), 1):
        try:
            records.append(EvalRecord.from_json(line))
        except (ValueError, TypeError) as err:
            raise ValueError(f"{path}:{number} is not an evaluation record ({err})") from err
    return records


def write_records(path: str | Path, records: Iterable[EvalRecord]) -> None:
    Path(path).write_text("".join(r.to_json() + "\n" for r in records))


def kept_prefix(path: Path, keys: list[tuple[str, str]], redo: tuple[str, ...]) -> list[EvalRecord]:
    """The records a killed attempt wrote for a prefix of the items `keys` ((task_id, candidate)
    each), up to the first that is torn, out of order, or has a status in `redo`."""
    if not Path(path).exists():
        return []
    done: list[EvalRecord] = []
    for line, key in zip(Path(path).read_text().splitlines(), keys, strict=False):
        try:
            record = EvalRecord.from_json(line)
        except Exception:  # noqa: BLE001 - killed mid-write: evaluate that item again
            break
        if (record.task_id, record.candidate) != key or record.status in redo:
            break
        done.append(record)
    return done


class OrderedSink:
    """Writes records to an open file in item order as they arrive in any order (lanes finish
    out of order), each line flushed; starts with the records kept from an earlier attempt."""

    def __init__(self, file, kept: list[EvalRecord]) -> None:
        self.file, self.records, self.pending = file, list(kept), {}
        for record in kept:
            file.write(record.to_json() + "\n")
        file.flush()

    def add(self, index: int, record: EvalRecord) -> None:
        """Record `index` (0-based, over all items, kept ones included) has arrived."""
        self.pending[index] = record
        while len(self.records) in self.pending:
            ready = self.pending.pop(len(self.records))
            self.file.write(ready.to_json() + "\n")
            self.records.append(ready)
        self.file.flush()

    @property
    def arrived(self) -> int:
        return len(self.records) + len(self.pending)
