"""Energy telemetry: measured (NVML, sampler) and modelled energy behind one small seam.

The package exports the seam the run path uses, and importing it loads nothing else:
    meter.py           EnergyMeter, EnergyMeasurement, MeterSettings, the counter protocol
    windows.py         aligned energy windows on a coarse counter (the method, DESIGN.md 5)
    nvml.py            NvmlEnergyMeter: the device's NVML energy counter
    model.py           modelled_energy: no GPU, energy_source="model" (and ModelMeter)
    trace.py           EnergyTrace: readings and interpolated cumulative energy; trace files are
                       read and written by the sampler's one reader (sampler.trace)
Beside it, imported by name only where used (the evaluator's lanes, tests, benchmarks):
    sampler_client.py  SamplerClient, SamplerEnergyMeter: the seam through the sampler daemon
    lane.py            a lane's telemetry around a candidate's measurement
    replay.py          ReplayMeter: a recorded trace played back (tests)
    capture.py         EnergyCapture, measure_candidate: a trace around one kernel (benchmarks)
    phases.py          attribute_prefill_decode(trace, token_timestamps)

Method and validation: docs/energy.md. Non-goals: no torch import (callers pass `sync`), no
hydra/omegaconf/wandb/trl; grpc is imported only by sampler_client.
"""

from warpk.telemetry.meter import (
    CounterReading,
    EnergyMeasurement,
    EnergyMeter,
    EnergyWindow,
    MeterError,
    MeterSettings,
    no_sync,
)
from warpk.telemetry.model import modelled_energy
from warpk.telemetry.nvml import NvmlEnergyMeter
from warpk.telemetry.trace import EnergyTrace, TraceSample, load_trace, write_trace

__all__ = [
    "CounterReading", "EnergyMeasurement", "EnergyMeter", "EnergyTrace", "EnergyWindow", "MeterError",
    "MeterSettings", "NvmlEnergyMeter", "TraceSample", "load_trace", "modelled_energy", "no_sync",
    "write_trace",
]  # fmt: skip
