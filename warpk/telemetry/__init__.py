"""Energy telemetry: measured (NVML, sampler) and modelled energy behind one small seam.

    meter.py           EnergyMeter, EnergyMeasurement, MeterSettings, the counter protocol
    windows.py         aligned energy windows on a coarse counter (the method, DESIGN.md 5)
    nvml.py            NvmlEnergyMeter: the device's NVML energy counter
    sampler_client.py  SamplerClient, SamplerEnergyMeter: the same through the sampler daemon
    replay.py          ReplayMeter: a recorded trace played back (tests)
    model.py           ModelMeter and modelled_energy: no GPU, energy_source="model"
    trace.py           EnergyTrace: readings and interpolated cumulative energy
    capture.py         EnergyCapture().capture(kernel_fn=...), measure_candidate(fn, ...)
    phases.py          attribute_prefill_decode(trace, token_timestamps)

Method and validation: docs/energy.md. Non-goals: no torch import (callers pass `sync`), no
hydra/omegaconf/wandb/trl; grpc is imported only by sampler_client (not re-exported here, so
the evaluator's workers stay light).
"""

from warpk.telemetry.capture import CandidateMeasurement, EnergyCapture, measure_candidate
from warpk.telemetry.meter import (
    CounterReading,
    EnergyMeasurement,
    EnergyMeter,
    EnergyWindow,
    MeterError,
    MeterSettings,
    no_sync,
)
from warpk.telemetry.model import ModelMeter, modelled_energy
from warpk.telemetry.nvml import NvmlEnergyMeter
from warpk.telemetry.phases import PhaseEnergy, attribute_prefill_decode
from warpk.telemetry.replay import ReplayMeter
from warpk.telemetry.trace import EnergyTrace, TraceSample, load_trace, write_trace

__all__ = [
    "CandidateMeasurement", "CounterReading", "EnergyCapture", "EnergyMeasurement", "EnergyMeter",
    "EnergyTrace", "EnergyWindow", "MeterError", "MeterSettings", "ModelMeter", "NvmlEnergyMeter",
    "PhaseEnergy", "ReplayMeter", "TraceSample", "attribute_prefill_decode", "load_trace",
    "measure_candidate", "modelled_energy", "no_sync", "write_trace",
]
