"""What one candidate's measurement found, step by step: each step's frozen result, and the
Measurement's fields assembled from those there are (also after a step failed, for the record
of a verdict reached midway). session.Session fills a `Steps` as it goes.

Non-goals: no measuring (session, timing_phase, energy_phase), no records (assemble).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from warpk.evaluator.checks import flatten
from warpk.evaluator.energy_phase import EnergyResult, ReferenceResult
from warpk.evaluator.timing_phase import Timing


@dataclass(frozen=True)
class Correctness:
    """The correctness trials: the worst errors seen and the last trial's seed."""

    seed: int
    max_abs_err: float
    max_rel_err: float


@dataclass(frozen=True)
class Work:
    """One reference call: FLOPs (torch's flop counter), minimum bytes moved, inputs + outputs."""

    flops: float
    min_bytes: float
    io_bytes: float


def work_of(torch, model, run: Callable[[list], object], inputs: list) -> Work:
    """FLOPs (torch's flop counter) and minimum bytes moved of one call `run(inputs)` of `model`."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        out = run(inputs)
    outs = [o for o in flatten(out) if isinstance(o, torch.Tensor)]
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    io_bytes = sum(t.numel() * t.element_size() for t in tensors + outs)
    params = list(model.parameters()) + list(model.buffers())
    return Work(float(counter.get_total_flops()),
                float(io_bytes + sum(p.numel() * p.element_size() for p in params)), float(io_bytes))


@dataclass
class Steps:
    """The results so far; None (empty) = the step has not run."""

    device: str
    seconds: dict[str, float] = field(default_factory=dict)  # compile_s, correctness_s, timing_s
    correct: Correctness | None = None
    work: Work | None = None
    timed: Timing | None = None
    alone_ms: tuple[float, ...] = ()  # the reference timed once the candidate was gone
    ref_energy: ReferenceResult | None = None
    energy: EnergyResult | None = None
    lane: dict = field(default_factory=dict)  # lane_* fields (evaluate.energy=sampler)

    def fields(self) -> dict:
        out: dict = {"device": self.device, **self.seconds}
        if self.correct is not None:
            out.update(max_abs_err=self.correct.max_abs_err, max_rel_err=self.correct.max_rel_err)
        if self.work is not None:
            out.update(flops=self.work.flops, min_bytes=self.work.min_bytes, io_bytes=self.work.io_bytes)
        if self.timed is not None:
            out.update(self.timed.fields(self.alone_ms))
        if self.energy is not None:
            out.update(self.energy.record())
        elif self.ref_energy is not None and self.ref_energy.spent_s is not None:
            out["energy_s"] = self.ref_energy.spent_s  # measured on this candidate's turn
        return {**out, **self.lane}
