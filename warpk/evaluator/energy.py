"""Measured energy per call of the reference and the candidate, read by the trusted worker.

NVML's energy counter is device-wide, so the trusted worker reads it while the candidate's calls
run in the untrusted worker: the candidate never touches the meter. After correctness and
timing, on a CUDA device with `evaluate.energy=nvml`, the trusted worker opens an
`NvmlEnergyMeter` on its GPU and calls `measure_pair` with the reference's calls (its own) and a
`RemoteLoop` for the candidate's (one `Go(repeat=n)` message per batch of n calls over staged
inputs, so the counter is read while the batch runs over there):
  1. the idle power is observed first (device synchronised, nothing of ours running) and
     reported beside the energies, never subtracted;
  2. rounds; each round measures the reference and the candidate back to back with the same
     method (warmup, calibration, one aligned window spanning at least
     hardware.min_energy_window_s, warpk.telemetry.windows), alternating which goes first so
     drift in temperature or clocks cannot favour either. With a target (hardware.
     energy_rel_uncertainty) it stops after the first round, from the second on, in which both
     sides' stated uncertainty is within the target of their energy; else after `repeats`
     rounds (the cap; without a target, exactly `repeats`);
  3. each side's windows are summarised (mean energy per call, uncertainty = edge bound +
     standard error over windows, mean power, mean window length).

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

import time
from collections.abc import Callable

from warpk.telemetry.meter import MeterError, MeterSettings, summarize
from warpk.telemetry.nvml import NvmlEnergyMeter

IDLE_WINDOW_S = 0.3  # idle observed before the windows: about three counter updates on H200
ENERGY_WALL_SHARE = 0.5


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
        self.send_go(n)
        self.pending = (n, self.clock())

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


def open_cuda_meter(props, min_window_s: float, nvml=None, **kwargs) -> NvmlEnergyMeter:
    """An NvmlEnergyMeter (one window per measure) on the NVML device of CUDA device `props`."""
    if nvml is None:
        import pynvml as nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as err:
        raise MeterError(f"NVML unavailable ({err})") from err
    try:
        index = nvml_index_for_cuda(props, nvml)
    finally:
        nvml.nvmlShutdown()  # the meter holds its own init
    return NvmlEnergyMeter(index, MeterSettings(min_window_s=min_window_s, repeats=1), nvml=nvml, **kwargs)


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
        m = summary(name)
        fields[f"{prefix}energy_j"] = m.energy_j
        fields[f"{prefix}energy_uncertainty_j"] = m.energy_uncertainty_j
        fields[f"{prefix}avg_power_w"] = m.avg_power_w
        fields[f"{prefix}window_s"] = m.window_s
    return fields
