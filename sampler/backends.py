"""Where samples come from: the GPU through NVML, or a recorded trace file (replay).

A backend answers `read(gpu, metrics) -> (values, errors)`: `values` maps metric names of
sampler.trace.METRICS to numbers in the unit of the name, holding only metrics that were read;
`errors` lists (metric, nvml_code, message) for metrics whose query failed. A metric the GPU does
not support (NVML_ERROR_NOT_SUPPORTED, or a function this pynvml lacks) is simply absent.

Non-goals: no setter of any kind (power limit, clocks, persistence, compute mode are only read);
no caching except of PCIe throughput, which NVML measures over 20 ms per call and so is refreshed
by a background thread while somebody asks for it.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from pathlib import Path

from sampler.trace import METRICS, read_rows

PCIE = ("pcie_tx_kb_s", "pcie_rx_kb_s")
_FIELD_VALUE_ATTR = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


class BackendError(RuntimeError):
    """The backend cannot start (no NVML, unknown GPU index, unreadable trace)."""


def _field_value(nvml, handle, field_id: int) -> float:
    value = nvml.nvmlDeviceGetFieldValues(handle, [field_id])[0]
    if value.nvmlReturn != nvml.NVML_SUCCESS:
        raise nvml.NVMLError(value.nvmlReturn)
    return float(getattr(value.value, _FIELD_VALUE_ATTR[value.valueType]))


def _throttle_reasons(nvml, handle) -> int:
    fn = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
    return int((fn or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)(handle))


def _utilization(nvml, handle) -> tuple[int, int]:
    rates = nvml.nvmlDeviceGetUtilizationRates(handle)
    return int(rates.gpu), int(rates.memory)


# (metrics read by one NVML query, function(nvml, handle) -> their values in that order).
# Unit conversions happen here and nowhere else: NVML reports mW, mJ and bytes.
_READERS: tuple[tuple[tuple[str, ...], Callable], ...] = (
    (("power_w",), lambda n, h: (n.nvmlDeviceGetPowerUsage(h) / 1000.0,)),
    (("power_instant_w",), lambda n, h: (_field_value(n, h, n.NVML_FI_DEV_POWER_INSTANT) / 1000.0,)),
    (("energy_j",), lambda n, h: (n.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0,)),
    (("gpu_util_pct", "mem_util_pct"), _utilization),
    (("temperature_c",), lambda n, h: (int(n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),)),
    (("sm_clock_mhz",), lambda n, h: (int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),)),
    (("mem_clock_mhz",), lambda n, h: (int(n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),)),
    (("power_limit_w",), lambda n, h: (n.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,)),
    (("memory_used_bytes",), lambda n, h: (int(n.nvmlDeviceGetMemoryInfo(h).used),)),
    (("pcie_tx_kb_s",), lambda n, h: (int(n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_TX_BYTES)),)),
    (("pcie_rx_kb_s",), lambda n, h: (int(n.nvmlDeviceGetPcieThroughput(h, n.NVML_PCIE_UTIL_RX_BYTES)),)),
    (("throttle_reasons",), lambda n, h: (_throttle_reasons(n, h),)),
    (("fan_speed_pct",), lambda n, h: (int(n.nvmlDeviceGetFanSpeed(h)),)),
)
assert {m for names, _ in _READERS for m in names} == set(METRICS)


class NvmlBackend:
    """Live readings through NVML.

    Args:
        nvml: the pynvml module (default) or a fake with the same functions (tests).
        gpus: device indices to serve; None = every device NVML reports.
        pcie_refresh_s: seconds between background PCIe throughput refreshes.
    """

    name = "nvml"

    def __init__(self, nvml=None, gpus: list[int] | None = None, pcie_refresh_s: float = 0.5):
        if nvml is None:
            import pynvml as nvml
        self.nvml = nvml
        try:
            nvml.nvmlInit()
            count = nvml.nvmlDeviceGetCount()
        except nvml.NVMLError as e:
            raise BackendError(f"NVML unavailable ({e}); use --backend replay --trace FILE") from e
        self.gpus = tuple(range(count)) if gpus is None else tuple(gpus)
        unknown = [g for g in self.gpus if not 0 <= g < count]
        if unknown:
            nvml.nvmlShutdown()
            raise BackendError(f"GPU index {unknown} unknown: NVML reports {count} device(s)")
        self._handles = {g: nvml.nvmlDeviceGetHandleByIndex(g) for g in self.gpus}
        self._pcie: dict[int, tuple[dict, list]] = {}
        self._pcie_wanted_s = float("-inf")
        self._pcie_refresh_s = pcie_refresh_s
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._pcie_thread = threading.Thread(target=self._refresh_pcie_forever, daemon=True,
                                             name="sampler-pcie")
        self._pcie_thread.start()

    def gpu_names(self) -> list[str]:
        names = []
        for g in self.gpus:
            try:
                name = self.nvml.nvmlDeviceGetName(self._handles[g])
                names.append(name.decode() if isinstance(name, bytes) else str(name))
            except self.nvml.NVMLError as e:
                names.append(f"unknown ({e})")
        return names

    def _query(self, gpu: int, readers) -> tuple[dict, list]:
        values, errors = {}, []
        handle = self._handles[gpu]
        for names, fn in readers:
            try:
                values.update(zip(names, fn(self.nvml, handle), strict=True))
            except AttributeError:
                continue  # this pynvml lacks the function or the constant: not supported
            except self.nvml.NVMLError as e:
                if e.value != self.nvml.NVML_ERROR_NOT_SUPPORTED:
                    errors.extend((name, int(e.value), str(e)) for name in names)
        return values, errors

    def read(self, gpu: int, metrics: frozenset[str]) -> tuple[dict, list]:
        """The requested metrics of one GPU now (PCIe: the latest background refresh)."""
        readers = [(n, fn) for n, fn in _READERS if set(n) & metrics and n[0] not in PCIE]
        values, errors = self._query(gpu, readers)
        if metrics & set(PCIE):
            self._pcie_wanted_s = time.monotonic()
            with self._lock:
                cached = self._pcie.get(gpu)
            if cached is None:
                cached = self._refresh_pcie(gpu)
            values.update((k, v) for k, v in cached[0].items() if k in metrics)
            errors.extend(e for e in cached[1] if e[0] in metrics)
        return values, errors

    def _refresh_pcie(self, gpu: int) -> tuple[dict, list]:
        result = self._query(gpu, [(n, fn) for n, fn in _READERS if n[0] in PCIE])
        with self._lock:
            self._pcie[gpu] = result
        return result

    def _refresh_pcie_forever(self) -> None:
        # Only while a stream asked for PCIe in the last few seconds: each query blocks 20 ms.
        while not self._closed.wait(self._pcie_refresh_s):
            if time.monotonic() - self._pcie_wanted_s < 5.0:
                for gpu in self.gpus:
                    self._refresh_pcie(gpu)

    def close(self) -> None:
        if not self._closed.is_set():
            self._closed.set()
            self._pcie_thread.join(timeout=2.0)
            self.nvml.nvmlShutdown()


class ReplayBackend:
    """Readings played back from a trace file (sampler.trace format) in real time, looping.

    At `t` seconds after start, GPU g reads the trace's latest line of g at or before
    `first + (t * speed) mod duration`. Each loop adds the trace's energy delta to `energy_j`, so
    the counter keeps increasing like a real one.

    Args:
        path: the trace file.
        gpus: indices to serve; None = every GPU in the trace.
        speed: playback speed (2.0 = twice as fast as recorded).
        clock: seconds, monotonic (tests may pass a fake).
    """

    name = "replay"

    def __init__(self, path: str | Path, gpus: list[int] | None = None, speed: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        try:
            rows = read_rows(path)
        except (OSError, ValueError) as e:
            raise BackendError(f"cannot replay {path}: {e}") from e
        by_gpu: dict[int, list[dict]] = {}
        for row in rows:
            by_gpu.setdefault(int(row["gpu"]), []).append(row)
        self.gpus = tuple(sorted(by_gpu)) if gpus is None else tuple(gpus)
        unknown = [g for g in self.gpus if g not in by_gpu]
        if unknown:
            raise BackendError(f"GPU index {unknown} not in trace {path} (has {sorted(by_gpu)})")
        self.path = Path(path)
        self._rows = by_gpu
        self._times = {g: [float(r["timestamp_s"]) for r in rs] for g, rs in by_gpu.items()}
        self._first = min(ts[0] for ts in self._times.values())
        self._duration = max(ts[-1] for ts in self._times.values()) - self._first
        self._speed = speed
        self._clock = clock
        self._start = clock()

    def gpu_names(self) -> list[str]:
        return [f"replay of {self.path.name}, gpu {g}" for g in self.gpus]

    def read(self, gpu: int, metrics: frozenset[str]) -> tuple[dict, list]:
        """The trace's reading of `gpu` at the current playback time."""
        elapsed = (self._clock() - self._start) * self._speed
        loops, offset = divmod(elapsed, self._duration) if self._duration > 0 else (0, 0.0)
        times, rows = self._times[gpu], self._rows[gpu]
        row = rows[max(0, bisect.bisect_right(times, self._first + offset) - 1)]
        values = {m: row[m] for m in metrics if row.get(m) is not None}
        if "energy_j" in values and loops:
            energies = [r["energy_j"] for r in rows if r.get("energy_j") is not None]
            values["energy_j"] += int(loops) * (energies[-1] - energies[0])
        errors = [(e["metric"], int(e["code"]), str(e["message"]))
                  for e in row.get("errors", ()) if e["metric"] in metrics]
        return values, errors

    def close(self) -> None:
        pass
