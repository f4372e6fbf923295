"""Energy per call from NVML's cumulative energy counter (nvmlDeviceGetTotalEnergyConsumption).

`NvmlEnergyMeter(index).measure(fn, sync=torch.cuda.synchronize)` runs aligned windows (see
warpk.telemetry.windows) on the device's counter. NVML is injected (`nvml=` takes the pynvml
module or a fake), so tests run without a GPU. mJ -> J happens here and nowhere else.

Non-goals: never changes a device setting; no torch import; no power-polling fallback for
pre-Volta GPUs (they have no energy counter: the meter refuses them).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable

from warpk.telemetry.meter import CounterReading, EnergyMeasurement, EnergyMeter, MeterError, MeterSettings
from warpk.telemetry.windows import measure_with_counter, observe_idle


class NvmlCounter:
    """The energy counter of one device, read through NVML.

    Args:
        nvml: an initialised pynvml module (or fake).
        handle: the device handle.
        clock: seconds, monotonic; stamps each reading.
    """

    def __init__(self, nvml, handle, clock: Callable[[], float] = time.monotonic):
        self.nvml, self.handle, self.clock = nvml, handle, clock

    def read(self) -> CounterReading:
        energy_mj = self.nvml.nvmlDeviceGetTotalEnergyConsumption(self.handle)
        return CounterReading(energy_j=energy_mj / 1000.0, timestamp_s=self.clock())


def open_nvml_device(nvml, index: int):
    """nvmlInit, then the handle of device `index`; MeterError with what to do when impossible."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as e:
        raise MeterError(f"NVML unavailable ({e}): no NVIDIA driver or GPU here; use the model "
                         "meter (hardware=cpu) or a replayed trace") from e
    try:
        count = nvml.nvmlDeviceGetCount()
        if not 0 <= index < count:
            raise MeterError(f"GPU index {index} unknown: NVML reports {count} device(s)")
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except (nvml.NVMLError, MeterError) as e:
        nvml.nvmlShutdown()
        if isinstance(e, MeterError):
            raise
        raise MeterError(f"GPU {index} has no usable energy counter ({e}); Volta or newer needed") from e
    return handle


class NvmlEnergyMeter(EnergyMeter):
    """Aligned energy windows on one GPU's NVML energy counter.

    Args:
        index: NVML device index (not affected by CUDA_VISIBLE_DEVICES: map it yourself).
        settings: window settings; `MeterSettings.for_hardware(hardware)` takes the profile's
            minimum window.
        nvml: the pynvml module (default: imported here) or a fake.
        clock: seconds, monotonic.
        sleep: used between counter reads while idle.
    """

    source = "nvml"

    def __init__(self, index: int = 0, settings: MeterSettings | None = None, nvml=None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], object] = time.sleep):
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        self.index = index
        self.settings = settings or MeterSettings()
        self.clock, self.sleep = clock, sleep
        self.counter = NvmlCounter(nvml, open_nvml_device(nvml, index), clock)
        self._open = True

    def measure(self, fn: Callable[[], object], *, sync: Callable[[], object]) -> EnergyMeasurement:
        """Energy per call of `fn`; `sync` must wait for all of fn's device work."""
        if not self._open:
            raise MeterError("NvmlEnergyMeter is closed")
        return measure_with_counter(fn, sync, self.counter, self.settings, self.source, self.clock,
                                    self.sleep)

    def observe_idle(self, seconds: float) -> tuple[float, float | None]:
        """(idle power in W, counter update period in s or None) over >= `seconds` of idle.

        The caller makes sure nothing of its own runs on the device (sync first).
        """
        if not self._open:
            raise MeterError("NvmlEnergyMeter is closed")
        settings = dataclasses.replace(self.settings, idle_window_s=seconds)
        return observe_idle(self.counter, settings, self.clock, self.sleep)

    def close(self) -> None:
        if self._open:
            self._open = False
            self.nvml.nvmlShutdown()
