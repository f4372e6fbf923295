"""What a GPU lane did while a candidate was measured: power, clocks, temperature and throttling,
from the sampler daemon's stream (`python -m sampler serve`).

    with LaneRecorder("127.0.0.1:50052", gpu=0) as recorder:
        ...  # the candidate's timing and energy windows
    telemetry = recorder.summary()  # LaneTelemetry of all its samples, or None without any
    fields = lane_fields(recorder.samples, spans)  # only those inside the candidate's spans

The trusted worker records this around the candidate's measurement when energy comes from the
sampler (`evaluate.energy=sampler`); each record then carries it (`lane_*` fields), and the
trainers log its means per step. Power is the instantaneous field where the GPU has one
(`power_instant_w`), else the driver's averaged `power_w` (a 1 s average on Hopper, so its max
understates short peaks); `lane_power_source` says which.

Non-goals: no energy (that is the meters' job: warpk.telemetry.sampler_client), no reconnection
(a broken stream ends the recording; the summary covers what arrived and says how many samples).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass

from warpk.telemetry.meter import MeterError

BATCH_TICKS = 5
LANE_METRICS = ("power_w", "power_instant_w", "sm_clock_mhz", "temperature_c", "throttle_reasons")


@dataclass(frozen=True)
class LaneTelemetry:
    """A summary of one lane's samples over a measurement; None = the GPU did not report it."""

    samples: int
    span_s: float  # from the first sample to the last
    power_source: str | None  # power_instant_w | power_w
    power_mean_w: float | None
    power_max_w: float | None
    sm_clock_mean_mhz: float | None
    sm_clock_min_mhz: int | None
    temperature_max_c: int | None
    throttle_reasons: int | None  # bitwise OR of every sample's nvmlClocksEventReason mask

    def record_fields(self) -> dict:
        """The record's `lane_*` fields."""
        return {f"lane_{k}": v for k, v in self.__dict__.items()}


def _mean(values: list) -> float | None:
    return sum(values) / len(values) if values else None


def summarize_samples(samples: Iterable) -> LaneTelemetry | None:
    """LaneTelemetry of SamplerSample-like objects (attributes as in sampler.proto's Sample)."""
    samples = list(samples)
    if not samples:
        return None

    def present(name: str) -> list:
        return [getattr(s, name) for s in samples if getattr(s, name) is not None]

    instant, averaged = present("power_instant_w"), present("power_w")
    power, source = (instant, "power_instant_w") if instant else (averaged, "power_w" if averaged else None)
    clocks, temps, masks = present("sm_clock_mhz"), present("temperature_c"), present("throttle_reasons")
    throttle = None
    if masks:
        throttle = 0
        for m in masks:
            throttle |= int(m)
    stamps = [s.monotonic_s for s in samples]
    return LaneTelemetry(
        samples=len(samples),
        span_s=max(stamps) - min(stamps),
        power_source=source,
        power_mean_w=_mean(power),
        power_max_w=max(power) if power else None,
        sm_clock_mean_mhz=_mean(clocks),
        sm_clock_min_mhz=min(clocks) if clocks else None,
        temperature_max_c=max(temps) if temps else None,
        throttle_reasons=throttle,
    )


def lane_fields(samples: list, spans: list[tuple[float, float]]) -> dict:
    """The record's lane_* fields from the samples stamped inside `spans` (host-monotonic
    (start, end) pairs: the candidate's timed batches and energy windows, not the reference's)."""
    inside = [s for s in samples if any(start <= s.monotonic_s <= end for start, end in spans)]
    summary = summarize_samples(inside)
    if summary is not None:
        return summary.record_fields()
    total_ms = sum(end - start for start, end in spans) * 1e3
    return {"lane_error": f"no telemetry sample fell inside the candidate's {len(spans)} batches and "
                          f"windows ({total_ms:.0f} ms in all; {len(samples)} samples around them)"}


class LaneRecorder:
    """Keeps the samples of one GPU that the daemon streams between `start` and `stop`.

    Args:
        addr: host:port of the daemon (same host).
        gpu: NVML index of the lane's device.
        interval_ms: stream interval (the daemon reads as fast as NVML lets it: ~4 ms per read
            of every metric on the H200).
        timeout_s: how long `start` waits for the first sample.
    """

    def __init__(self, addr: str, gpu: int, interval_ms: int = 10, timeout_s: float = 5.0):
        from warpk.telemetry.sampler_client import SamplerClient, SamplerSample

        self.gpu, self.interval_ms, self.timeout_s = gpu, interval_ms, timeout_s
        self._from_proto = SamplerSample.from_proto
        self.client = SamplerClient(addr, timeout_s)
        self.samples: list = []
        self.error: BaseException | None = None
        self._stream = None
        self._thread: threading.Thread | None = None
        self._first = threading.Event()

    def start(self) -> LaneRecorder:
        try:
            # a few ticks per message: this thread shares the trusted worker's interpreter, so it
            # wakes 20 times a second, not 100
            self._stream = self.client.stream_batches(gpus=[self.gpu], interval_ms=self.interval_ms,
                                                      metrics=list(LANE_METRICS), batch_ticks=BATCH_TICKS)
            self._thread = threading.Thread(target=self._consume, daemon=True, name="lane-telemetry")
            self._thread.start()
            if not self._first.wait(self.timeout_s) or not self.samples:
                raise MeterError(f"no telemetry from the sampler at {self.client.addr} within "
                                 f"{self.timeout_s} s ({self.error!r})")
        except BaseException:
            self.stop()
            raise
        return self

    def _consume(self) -> None:
        import grpc

        try:
            for batch in self._stream:
                self.samples.extend(self._from_proto(s) for s in batch.samples)
                self._first.set()
        except grpc.RpcError as err:
            if err.code() != grpc.StatusCode.CANCELLED:
                self.error = err
        finally:
            self._first.set()

    def stop(self) -> None:
        if self._stream is not None:
            self._stream.cancel()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self.client.close()

    def summary(self) -> LaneTelemetry | None:
        return summarize_samples(self.samples)

    def __enter__(self) -> LaneRecorder:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
