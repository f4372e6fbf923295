"""The seed's reusable entry points: `EnergyCapture` for any workload, `measure_candidate` for a kernel.

    trace = EnergyCapture().capture(kernel_fn=generate, sync=torch.cuda.synchronize)
    print(trace.total_joules, trace.avg_power_w, len(trace.samples))

    result = measure_candidate(fn, num_trials=25, warmup=5, sync=torch.cuda.synchronize,
                               meter=NvmlEnergyMeter(0))

`EnergyCapture` reads a counter in a background thread while the workload runs once, starting
after a counter update and stopping after the first update past the workload's end, so the
trace's knots enclose the workload; `total_joules` interpolates the cumulative energy at the
workload's start and end, with a bound (`energy_uncertainty_j`). For phase splits pass the trace
to warpk.telemetry.phases.attribute_prefill_decode.

Non-goals: no synthetic fallback (without a GPU, EnergyCapture() raises MeterError; pass a
replay counter explicitly); no repeated windows (that is what meters are for).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from warpk.telemetry.meter import EnergyCounter, EnergyMeasurement, EnergyMeter, MeterError, no_sync
from warpk.telemetry.trace import EnergyTrace, TraceSample


class EnergyCapture:
    """Records a counter trace around one run of a workload.

    Args:
        counter: the counter to read; None = NVML device `gpu` (MeterError without one).
        gpu: device index for the default counter, and the label of the samples.
        interval_s: seconds between counter reads in the background thread.
        clock: seconds, monotonic; must be the counter's clock.
        timeout_s: give up when the counter does not change for this long.
    """

    def __init__(self, counter: EnergyCounter | None = None, gpu: int = 0, interval_s: float = 0.005,
                 clock: Callable[[], float] = time.monotonic, timeout_s: float = 5.0):
        self._nvml = None
        if counter is None:
            import pynvml

            from warpk.telemetry.nvml import NvmlCounter, open_nvml_device

            counter = NvmlCounter(pynvml, open_nvml_device(pynvml, gpu), clock)
            self._nvml = pynvml
        self.counter, self.gpu, self.interval_s = counter, gpu, interval_s
        self.clock, self.timeout_s = clock, timeout_s

    def _wait(self, samples: list[TraceSample], after_s: float, stop: threading.Event) -> int:
        """Index of the first sample after `after_s` whose energy differs from its predecessor."""
        deadline = self.clock() + self.timeout_s
        checked = 1
        while not stop.is_set():
            for i in range(checked, len(samples)):
                if samples[i].timestamp_s >= after_s and samples[i].energy_j != samples[i - 1].energy_j:
                    return i
            checked = max(1, len(samples))
            if self.clock() > deadline:
                raise MeterError(f"energy counter did not change within {self.timeout_s} s")
            time.sleep(self.interval_s)
        raise MeterError("the sampling thread stopped")

    def capture(self, kernel_fn: Callable[[], object], sync: Callable[[], object] = no_sync) -> EnergyTrace:
        """Run `kernel_fn` once (then `sync`) and return the trace around it.

        Returns:
            An EnergyTrace whose start_s/end_s are the workload's; total_joules, avg_power_w.
        """
        samples: list[TraceSample] = []
        stop, failed = threading.Event(), []

        def sample_forever() -> None:
            try:
                while not stop.is_set():
                    r = self.counter.read()
                    samples.append(TraceSample(r.timestamp_s, r.energy_j, r.power_w, self.gpu))
                    stop.wait(self.interval_s)
            except Exception as e:  # surfaced to the caller below
                failed.append(e)
                stop.set()

        thread = threading.Thread(target=sample_forever, daemon=True, name="energy-capture")
        thread.start()
        try:
            first = self._wait(samples, float("-inf"), stop)
            start_s = self.clock()
            kernel_fn()
            sync()
            end_s = self.clock()
            self._wait(samples, end_s, stop)
        except MeterError as e:
            if failed:
                raise MeterError(f"reading the counter failed: {failed[0]!r}") from failed[0]
            raise e
        finally:
            stop.set()
            thread.join(timeout=5.0)
        return EnergyTrace(tuple(samples[first:]), start_s=start_s, end_s=end_s)

    def close(self) -> None:
        if self._nvml is not None:
            self._nvml.nvmlShutdown()
            self._nvml = None


@dataclass(frozen=True)
class CandidateMeasurement:
    """Runtime of a function over timed trials, and its energy when a meter was given.

    Attributes:
        runtime_ms: median wall time per call over the trials (each trial: call, sync).
        runtime_iqr_ms: interquartile range of the trials.
        num_trials: timed trials.
        energy: the meter's measurement; None when no meter was given (not measured).
    """

    runtime_ms: float
    runtime_iqr_ms: float
    num_trials: int
    energy: EnergyMeasurement | None

    @property
    def energy_j(self) -> float | None:
        return None if self.energy is None else self.energy.energy_j


def measure_candidate(fn: Callable[[], object], num_trials: int = 25, warmup: int = 5, *,
                      sync: Callable[[], object] = no_sync, meter: EnergyMeter | None = None,
                      clock: Callable[[], float] = time.perf_counter) -> CandidateMeasurement:
    """Warm up, time `num_trials` synchronized calls, then measure energy with `meter` if given.

    Args:
        fn: the candidate call.
        num_trials: timed trials (>= 1).
        warmup: untimed calls first.
        sync: waits for fn's device work (torch.cuda.synchronize on a GPU).
        meter: an EnergyMeter; None = energy not measured (energy is None).
        clock: seconds, high resolution.
    """
    if num_trials < 1:
        raise ValueError(f"num_trials={num_trials} must be >= 1")
    for _ in range(warmup):
        fn()
    sync()
    times_ms = []
    for _ in range(num_trials):
        t0 = clock()
        fn()
        sync()
        times_ms.append((clock() - t0) * 1000.0)
    quartiles = statistics.quantiles(times_ms, n=4) if num_trials > 1 else [times_ms[0]] * 3
    return CandidateMeasurement(
        runtime_ms=statistics.median(times_ms),
        runtime_iqr_ms=quartiles[2] - quartiles[0],
        num_trials=num_trials,
        energy=None if meter is None else meter.measure(fn, sync=sync),
    )
