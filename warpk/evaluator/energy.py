"""Measured energy per call of the reference and the candidate, read by the trusted worker.

NVML's energy counter is device-wide, so the trusted worker reads it while the candidate's calls
run in the untrusted worker: the candidate never touches the meter. On a CUDA device with
`evaluate.energy=nvml`, the trusted worker opens an `NvmlEnergyMeter` on its GPU and measures
the reference alone with `measure_one` before the candidate is loaded (kept per task for a while:
warpk.evaluator.trusted.ReferenceEnergies), then, after correctness and timing, the candidate
with `measure_one` over a `RemoteLoop` (one `Go(repeat=n)` message per batch of n calls over
staged inputs, so the counter is read while the batch runs over there). `measure_pair` measures
both interleaved (for benchmarks and the GPU tests). Both:
  1. the idle power is observed first (device synchronised, nothing of ours running) and
     reported beside the energies, never subtracted;
  2. rounds of one window per side (warmup, calibration, one aligned window spanning at least
     hardware.min_energy_window_s, warpk.telemetry.windows; measure_pair alternates which side
     goes first so drift cannot favour either). With a target (hardware.energy_rel_uncertainty)
     they stop after the first round, from the second on, in which every side's stated
     uncertainty is within the target of its energy; else after `repeats` rounds (the cap;
     without a target, exactly `repeats`);
  3. each side's windows are summarised (mean energy per call, uncertainty = edge bound +
     standard error over windows, mean power, mean window length, the windows' count, and
     `energy_at_cap`: whether they stopped at the cap short of the target).

With `evaluate.energy=sampler` the counter comes from the sampler daemon's stream instead of
this process's NVML reads (`open_meter`): the same windows, `energy_source="sampler"`.

The GPU index inside a worker started with CUDA_VISIBLE_DEVICES=<i> is CUDA device 0, but NVML
numbers every GPU of the node regardless: `nvml_index_for_cuda` maps the CUDA device to its NVML
index by PCI bus id (UUID as a fallback).

Each remote batch must last at least ENERGY_WALL_SHARE x its calls' time as the trusted clock
confirmed it during timing (else `implausible`: it skipped work), and its last call's output is
verified. Residual risk: the outputs of the other calls of a batch are not checked, so a
candidate that computes only each batch's last call and idles through the rest (taking as long)
would read as less energy per call.

Non-goals: no torch import (the caller passes the device properties and `sync`), pynvml imported
only when a meter is opened; no modelled fallback: a failed measurement is an error the record
states (energy_error).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable

from warpk.telemetry.meter import EnergyMeter, MeterError, MeterSettings, summarize
from warpk.telemetry.nvml import NvmlEnergyMeter

IDLE_WINDOW_S = 0.3  # idle observed before the windows: about three counter updates on H200
# A batch's calls cycle through 3 input sets that stay in the GPU's cache, where timed calls
# each had fresh inputs: on the H200 an honest softmax ran its energy loop at ~0.5x its timed
# per-call time (2026-12-04), so the floor against skipped work is a quarter.
ENERGY_WALL_SHARE = 0.25
SAMPLER_INTERVAL_MS = 5  # the energy stream's interval (the daemon reads as fast as NVML lets it)


# evaluate.energy=nvml: the reference's energy is measured once per (task, shape, window) per lane
# and reused, before the candidate is loaded (no candidate code runs anywhere on the lane then,
# so none can load the GPU under it). It is measured again once it is REF_ENERGY_MAX_AGE_S old or
# has served REF_ENERGY_MAX_USES candidates, so drift in temperature or clocks is picked up.
REF_ENERGY_MAX_AGE_S = 120.0
REF_ENERGY_MAX_USES = 16


@dataclasses.dataclass
class ReferenceEnergy:
    fields: dict  # ref_energy_j, ref_energy_uncertainty_j, ref_avg_power_w, ref_window_s, idle_power_w
    ident: str  # the record's ref_energy_id
    measured_at: float
    uses: int = 0


class ReferenceEnergies:
    """The reference energies one trusted worker (one lane) has measured in this run."""

    def __init__(self, clock=time.monotonic):
        self.clock, self.entries, self.measured = clock, {}, 0

    def fresh(self, key: tuple) -> ReferenceEnergy | None:
        entry = self.entries.get(key)
        if entry is None or entry.uses >= REF_ENERGY_MAX_USES:
            return None
        return entry if self.clock() - entry.measured_at < REF_ENERGY_MAX_AGE_S else None

    def store(self, key: tuple, fields: dict) -> ReferenceEnergy:
        """A new measurement; its id says how far it moved from the one it replaces."""
        self.measured += 1
        ident = f"{os.getpid()}-{self.measured}"
        old = self.entries.get(key)
        if old is not None and old.fields.get("ref_energy_j") and fields.get("ref_energy_j"):
            moved = fields["ref_energy_j"] / old.fields["ref_energy_j"] - 1
            ident += f" ({moved:+.2%} from {old.ident.split()[0]})"
        self.entries[key] = ReferenceEnergy(dict(fields), ident, self.clock())
        return self.entries[key]


class RemoteLoop:
    """The candidate's side of an energy window: `submit(n)` queues n calls in the untrusted
    worker (one message), `sync()` waits for them and checks what came back.

    Args:
        send_go: sends Go(repeat=n) to the untrusted worker.
        receive: waits for the Ran of a batch of n calls, receive(n); returns (Ran, memfd or None).
        check: called with (Ran, memfd, calls, wall_s) for each finished batch; raises Verdict.
    """

    def __init__(self, send_go: Callable[[int], None], receive: Callable[[], tuple], check: Callable):
        self.send_go, self.receive, self.check = send_go, receive, check
        self.pending: tuple[int, float] | None = None
        self.clock = time.perf_counter

    def submit(self, n: int) -> None:
        self.sync()
        # the clock runs from before the Go is sent: the worker starts as soon as it arrives, and
        # this thread may get the GIL back only milliseconds after the send (H100, 2026-12-05: an
        # honest softmax's 4 calls "took" 0.31 ms, under half of what the memory bus allows)
        start = self.clock()
        self.send_go(n)
        self.pending = (n, start)

    def __call__(self) -> None:
        self.submit(1)

    def sync(self) -> None:
        if self.pending is None:
            return
        n, start = self.pending
        self.pending = None
        ran, fd = self.receive(n)
        self.check(ran, fd, n, self.clock() - start)


def pci_bus_ids(props) -> list[str]:
    """NVML spellings of the PCI bus id in CUDA device properties (torch's or any with the same
    attributes): an int bus with pci_domain_id/pci_device_id, or a ready string."""
    bus = getattr(props, "pci_bus_id", None)
    if isinstance(bus, str):
        return [bus]
    if not isinstance(bus, int):
        return []
    domain = int(getattr(props, "pci_domain_id", 0) or 0)
    device = int(getattr(props, "pci_device_id", 0) or 0)
    return [f"{domain:08X}:{bus:02X}:{device:02X}.0", f"{domain:04X}:{bus:02X}:{device:02X}.0"]


def nvml_index_for_cuda(props, nvml) -> int:
    """The NVML index of the CUDA device described by `props` (NVML already initialised).

    Args:
        props: e.g. torch.cuda.get_device_properties(0).
        nvml: the pynvml module or a fake.

    Raises:
        MeterError: neither the PCI bus id nor the UUID names an NVML device.
    """
    tried = []
    for bus_id in pci_bus_ids(props):
        try:
            return nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByPciBusId(bus_id))
        except nvml.NVMLError as err:
            tried.append(f"PCI {bus_id}: {err}")
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        text = text if text.startswith(("GPU-", "MIG-")) else f"GPU-{text}"
        try:
            return nvml.nvmlDeviceGetIndex(nvml.nvmlDeviceGetHandleByUUID(text))
        except nvml.NVMLError as err:
            tried.append(f"UUID {text}: {err}")
    raise MeterError(
        "cannot map the CUDA device to an NVML device ("
        + ("; ".join(tried) or "its properties have neither pci_bus_id nor uuid")
        + ")"
    )


def nvml_index_of(props, nvml=None) -> int:
    """The NVML index of CUDA device `props` (NVML initialised and shut down here)."""
    if nvml is None:
        import pynvml as nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        raise MeterError(f"NVML unavailable ({err})") from err
    try:
        return nvml_index_for_cuda(props, nvml)
    finally:
        nvml.nvmlShutdown()  # a meter holds its own init


def open_cuda_meter(props, min_window_s: float, nvml=None, **kwargs) -> NvmlEnergyMeter:
    """An NvmlEnergyMeter (one window per measure) on the NVML device of CUDA device `props`."""
    if nvml is None:
        import pynvml as nvml
    index = nvml_index_of(props, nvml)
    return NvmlEnergyMeter(index, MeterSettings(min_window_s=min_window_s, repeats=1), nvml=nvml, **kwargs)


def open_meter(props, spec, nvml=None) -> EnergyMeter:
    """The meter an EnergySpec asks for on CUDA device `props`: the sampler daemon's streamed
    counter at spec.sampler_addr, or NVML read in this process."""
    if not spec.sampler_addr:
        return open_cuda_meter(props, spec.min_window_s, nvml)
    from warpk.telemetry.sampler_client import SamplerEnergyMeter

    settings = MeterSettings(min_window_s=spec.min_window_s, repeats=1, poll_s=SAMPLER_INTERVAL_MS / 2000.0)
    return SamplerEnergyMeter(spec.sampler_addr, nvml_index_of(props, nvml), settings, SAMPLER_INTERVAL_MS)


def measure_pair(meter: NvmlEnergyMeter, ref_fn: Callable[[], object], new_fn: Callable[[], object],
                 sync: Callable[[], object], repeats: int, idle_window_s: float = IDLE_WINDOW_S,
                 rel_uncertainty: float = 0.0) -> dict:
    """Energy per call of the reference and the candidate (see the module doc).

    Args:
        repeats: rounds at most (exactly, when rel_uncertainty is 0).
        rel_uncertainty: stop once both sides' stated uncertainty / energy is at most this.

    Returns:
        The record's fields: energy_j, energy_uncertainty_j, avg_power_w, window_s, the same with
        a ref_ prefix, and idle_power_w (None when idle_window_s is 0).
    """
    sync()
    idle_w, period_s = meter.observe_idle(idle_window_s) if idle_window_s > 0 else (None, None)
    fns = {"ref": ref_fn, "new": new_fn}
    windows: dict[str, list] = {"ref": [], "new": []}

    def summary(name: str):
        return summarize(windows[name], meter.source, meter.settings.aligned, idle_w, period_s)

    def precise_enough() -> bool:
        return all(m.energy_uncertainty_j <= rel_uncertainty * abs(m.energy_j)
                   for m in (summary("ref"), summary("new")))

    for round_ in range(repeats):
        for name in ("ref", "new") if round_ % 2 == 0 else ("new", "ref"):
            windows[name].extend(meter.measure(fns[name], sync=sync).windows)
        if rel_uncertainty > 0 and round_ >= 1 and precise_enough():  # a spread needs 2 windows
            break
    fields: dict = {"idle_power_w": idle_w}
    for name, prefix in (("new", ""), ("ref", "ref_")):
        fields.update(_fields(summary(name), prefix, rel_uncertainty))
    return fields


def measure_one(meter: NvmlEnergyMeter, fn: Callable[[], object], sync: Callable[[], object], repeats: int,
                idle_window_s: float = IDLE_WINDOW_S, rel_uncertainty: float = 0.0, prefix: str = "") -> dict:
    """Energy per call of one side alone, with the same method and stopping rule as
    `measure_pair` (windows checked from the second on): the fields with `prefix`, and
    idle_power_w when idle_window_s > 0."""
    sync()
    idle_w, period_s = meter.observe_idle(idle_window_s) if idle_window_s > 0 else (None, None)
    windows: list = []
    for n in range(repeats):
        windows.extend(meter.measure(fn, sync=sync).windows)
        m = summarize(windows, meter.source, meter.settings.aligned, idle_w, period_s)
        if rel_uncertainty > 0 and n >= 1 and m.energy_uncertainty_j <= rel_uncertainty * abs(m.energy_j):
            break
    fields = _fields(summarize(windows, meter.source, meter.settings.aligned, idle_w, period_s), prefix,
                     rel_uncertainty)
    return {**fields, "idle_power_w": idle_w} if idle_window_s > 0 else fields


def _fields(m, prefix: str, rel_uncertainty: float) -> dict:
    """The record's fields of one side. `energy_at_cap`: True when the windows ran to their cap
    with the stated uncertainty still above the target, False when the target was met, None
    without a target."""
    at_cap = None
    if rel_uncertainty > 0:
        at_cap = not m.energy_uncertainty_j <= rel_uncertainty * abs(m.energy_j)
    return {f"{prefix}energy_j": m.energy_j, f"{prefix}energy_uncertainty_j": m.energy_uncertainty_j,
            f"{prefix}avg_power_w": m.avg_power_w, f"{prefix}window_s": m.window_s,
            f"{prefix}energy_windows": m.repeats, f"{prefix}energy_at_cap": at_cap}
