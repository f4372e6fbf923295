"""A simulated GPU and an autospec'd pynvml around it, driven by a fake clock (no real sleeps).

`FakeGpu` integrates its power exactly as fake time advances: `run(s)` advances busy, `sleep(s)`
advances idle. Its NVML energy counter updates only at ticks (`phase_s + k * tick_s`), like the
H200's (~100 ms, FACTS.md). With `sensor_window_s` set, each update adds
`tick_s x mean power over the last sensor_window_s before the tick` instead of the true energy:
the "part-time" sensor of Yang et al. (25 ms seen of every 100 ms), for the square-wave test.
With `read_cost_s` set, each energy read takes that long with the device idle, like a real NVML
call (about a millisecond or more on the H200).

`fake_nvml(gpus)` is a namespace of pynvml's constants and error classes plus the functions the
meter and the sampler call, each `mock.create_autospec` of the real function wired to FakeGpus:
a call with a wrong signature fails as it would against the real module, and a function that
is not faked is missing (AttributeError), like one an old pynvml lacks.
"""

from __future__ import annotations

from types import SimpleNamespace
from unittest import mock

import pynvml


class FakeGpu:
    """Exact energy bookkeeping on a fake clock; the NVML handle of the fake is the FakeGpu itself."""

    def __init__(self, idle_w: float = 100.0, busy_w: float = 400.0, tick_s: float = 0.1,
                 phase_s: float = 0.0371, sensor_window_s: float | None = None, energy0_j: float = 5000.0,
                 pci_bus_id: str = "00000000:19:00.0", uuid: str = "GPU-00000000-fake",
                 read_cost_s: float = 0.0):
        assert 0 < phase_s <= tick_s
        self.pci_bus_id, self.uuid = pci_bus_id, uuid
        self.idle_w, self.busy_w, self.tick_s, self.phase_s = idle_w, busy_w, tick_s, phase_s
        self.sensor_window_s = sensor_window_s
        self.read_cost_s = read_cost_s  # an energy read takes this long, the device idle meanwhile
        self.now = 0.0
        self.true_energy_j = energy0_j
        self.counter_j = energy0_j
        self.last_power_w = idle_w
        self.busy_time_s = 0.0
        self._k = 0
        self._window_start_j: float | None = None

    # --- time ---------------------------------------------------------------------------
    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self._advance(seconds, self.idle_w)

    def run(self, seconds: float, power_w: float | None = None) -> None:
        """Busy for `seconds` at busy_w (or `power_w`)."""
        self.busy_time_s += seconds
        self._advance(seconds, self.busy_w if power_w is None else power_w)

    def _integrate_to(self, t: float, power_w: float) -> None:
        self.true_energy_j += power_w * (t - self.now)
        self.now = t

    def _advance(self, seconds: float, power_w: float) -> None:
        end = self.now + seconds
        while True:
            tick = self.phase_s + self._k * self.tick_s
            if self.sensor_window_s and self._window_start_j is None and tick - self.sensor_window_s <= end:
                self._integrate_to(max(self.now, tick - self.sensor_window_s), power_w)
                self._window_start_j = self.true_energy_j
                continue
            if tick > end:
                break
            self._integrate_to(tick, power_w)
            before = self.counter_j
            if self.sensor_window_s:
                seen_w = (self.true_energy_j - self._window_start_j) / self.sensor_window_s
                self.counter_j += self.tick_s * seen_w
                self._window_start_j = None
            else:
                self.counter_j = self.true_energy_j
            self.last_power_w = (self.counter_j - before) / self.tick_s
            self._k += 1
        self._integrate_to(end, power_w)

    # --- asynchronous work: launch queues it, sync (or a slow read) lets it run -------------
    def launch(self, seconds: float) -> None:
        """Queue `seconds` of busy work, like a CUDA kernel launch; it runs at sync or during reads."""
        self.pending_s = getattr(self, "pending_s", 0.0) + seconds

    def sync(self) -> None:
        pending, self.pending_s = getattr(self, "pending_s", 0.0), 0.0
        if pending:
            self.run(pending)

    def energy_mj(self) -> int:
        if self.read_cost_s:  # queued work keeps the device busy while the host waits on NVML
            overlap = min(getattr(self, "pending_s", 0.0), self.read_cost_s)
            if overlap:
                self.pending_s -= overlap
                self.run(overlap)
            self.sleep(self.read_cost_s - overlap)
        return int(round(self.counter_j * 1000))


def _not_supported(*_args):
    raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)


def fake_nvml(gpus: list[FakeGpu], fail: dict[str, int] | None = None, init_error: int | None = None):
    """A pynvml stand-in whose devices are `gpus`; each function is autospec'd from the real one.

    Args:
        gpus: the devices (index = position).
        fail: NVML function name -> NVML error code it raises (e.g. GPU_IS_LOST = 15).
        init_error: nvmlInit raises this NVML error code (e.g. LIBRARY_NOT_FOUND = 12).
    """
    behaviour = {
        "nvmlInit": lambda: None,
        "nvmlShutdown": lambda: None,
        "nvmlDeviceGetCount": lambda: len(gpus),
        "nvmlDeviceGetHandleByIndex": lambda i: gpus[i],
        "nvmlDeviceGetIndex": lambda h: gpus.index(h),
        "nvmlDeviceGetHandleByPciBusId": lambda bus: _find(gpus, lambda g: _pci(g.pci_bus_id) == _pci(bus)),
        "nvmlDeviceGetHandleByUUID": lambda uuid: _find(gpus, lambda g: g.uuid == uuid),
        "nvmlDeviceGetName": lambda h: "NVIDIA H200 (fake)",
        "nvmlDeviceGetTotalEnergyConsumption": lambda h: h.energy_mj(),
        "nvmlDeviceGetPowerUsage": lambda h: int(round(h.last_power_w * 1000)),
        "nvmlDeviceGetUtilizationRates": lambda h: SimpleNamespace(gpu=87, memory=41),
        "nvmlDeviceGetTemperature": lambda h, sensor: 45,
        "nvmlDeviceGetClockInfo": lambda h, kind: {pynvml.NVML_CLOCK_SM: 1980,
                                                   pynvml.NVML_CLOCK_MEM: 2619}[kind],
        "nvmlDeviceGetEnforcedPowerLimit": lambda h: 700_000,
        "nvmlDeviceGetMemoryInfo": lambda h: SimpleNamespace(used=3 * 2**30, total=141 * 2**30),
        "nvmlDeviceGetPcieThroughput": lambda h, counter: 1234 + counter,
        "nvmlDeviceGetCurrentClocksEventReasons": lambda h: 0x4,
        "nvmlDeviceGetFanSpeed": _not_supported,  # H200 SXM has no fan
        "nvmlDeviceGetFieldValues": lambda h, ids: [SimpleNamespace(  # POWER_INSTANT, unsigned int mW
            nvmlReturn=pynvml.NVML_SUCCESS, valueType=1,
            value=SimpleNamespace(uiVal=int(h.last_power_w * 1000)))],
    }
    if init_error is not None:
        behaviour["nvmlInit"] = _raiser(init_error)
    for name, code in (fail or {}).items():
        behaviour[name] = _raiser(code)
    constants = {k: getattr(pynvml, k) for k in dir(pynvml) if k.startswith(("NVML_", "NVMLError"))}
    nvml = SimpleNamespace(**constants)
    for name, fn in behaviour.items():
        setattr(nvml, name, mock.create_autospec(getattr(pynvml, name), side_effect=fn))
    return nvml


def _raiser(code: int):
    def raise_(*_args):
        raise pynvml.NVMLError(code)

    return raise_


def _pci(bus_id: str) -> tuple[int, ...]:
    """'domain:bus:device.function' (hex, any width, either case) as numbers; NVML accepts both
    the 8- and the 4-digit domain spellings."""
    try:
        domain, bus, rest = bus_id.split(":")
        device, function = rest.split(".")
        return tuple(int(x, 16) for x in (domain, bus, device, function))
    except ValueError:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT) from None


def _find(gpus: list[FakeGpu], match) -> FakeGpu:
    for gpu in gpus:
        if match(gpu):
            return gpu
    raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
