"""The kernel evaluator: candidate source in, `EvalRecord` out. The reward source of WARP-K.

`Evaluator.evaluate_many(items)` runs each (task, candidate) in its own sandboxed worker process
(warpk.evaluator.sandbox), one after another so timings never share the machine, and turns the
worker's report into a record. Energy: until the telemetry issue lands, every energy figure is
modelled from the hardware profile and labelled `energy_source="model"`.

Non-goals here: trl, peft, wandb or hydra (workers re-import this package in fresh processes).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from warpk.config import EvaluateConfig, HardwareConfig
from warpk.evaluator.sandbox import run_worker
from warpk.records import EvalRecord
from warpk.tasks import Task
from warpk.telemetry.model import modelled_energy


@dataclass(frozen=True)
class EvalItem:
    """One candidate for one task."""

    task: Task
    candidate_source: str
    candidate: str  # label shown in tables, e.g. the file name


def source_sha(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def resolve_shape(requested: str, hardware: HardwareConfig) -> str:
    """'auto' means CPU-sized shapes on a CPU and GPU-sized shapes on a GPU."""
    if requested != "auto":
        return requested
    return "cpu" if hardware.device == "cpu" else "gpu"


class Evaluator:
    """Evaluates candidates with one protocol on one hardware profile."""

    def __init__(self, protocol: EvaluateConfig, hardware: HardwareConfig, shape: str, seed: int = 0):
        self.protocol = protocol
        self.hardware = hardware
        self.shape = resolve_shape(shape, hardware)
        self.seed = seed

    def evaluate(self, item: EvalItem) -> EvalRecord:
        request = {
            "task_source": item.task.path.read_text(),
            "task_path": str(item.task.path),
            "candidate_source": item.candidate_source,
            "shape_overrides": item.task.shape_overrides(self.shape),
            "device": self.hardware.device,
            "seed": self.seed,
            "protocol": dataclasses.asdict(self.protocol),
        }
        outcome = run_worker(request, self.protocol.timeout_s, self.protocol.num_threads)
        base = dict(
            task_id=item.task.task_id,
            candidate=item.candidate,
            candidate_sha=source_sha(item.candidate_source),
            hardware=self.hardware.name,
            shape=self.shape if item.task.shapes.get(self.shape) else "default",
            wall_s=outcome.wall_s,
        )
        failure = outcome.failure()
        if failure is not None:
            return EvalRecord(status=failure[0], error=failure[1], **base)
        r = outcome.result
        fields = {k: r.get(k) for k in ("status", "error", "device", "max_abs_err", "max_rel_err",
                                        "runtime_ms", "runtime_iqr_ms", "ref_runtime_ms",
                                        "ref_runtime_iqr_ms", "compile_s", "correctness_s", "timing_s")}
        if r["status"] == "ok":
            threads = self.protocol.num_threads
            new = modelled_energy(self.hardware, r["runtime_ms"], threads)
            ref = modelled_energy(self.hardware, r["ref_runtime_ms"], threads)
            fields.update(
                speedup=r["ref_runtime_ms"] / r["runtime_ms"],
                energy_j=new.energy_j,
                ref_energy_j=ref.energy_j,
                avg_power_w=new.avg_power_w,
                ref_avg_power_w=ref.avg_power_w,
                energy_source="model",
            )
        return EvalRecord(**base, **fields)

    def evaluate_many(
        self, items: Iterable[EvalItem], on_record: Callable[[EvalRecord], None] | None = None
    ) -> list[EvalRecord]:
        """Records in the order of `items`; `on_record` sees each as soon as it exists."""
        records = []
        for item in items:
            record = self.evaluate(item)
            records.append(record)
            if on_record is not None:
                on_record(record)
        return records
