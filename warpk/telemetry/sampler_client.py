"""WARP-K's client of the sampler daemon (`python -m sampler serve`), and the meter built on it.

    with SamplerClient("127.0.0.1:50052") as client:
        print(client.health())
        for s in client.stream(gpus=[0], interval_ms=10, max_ticks=100):
            print(s.gpu, s.power_w, s.energy_j)

`SamplerEnergyMeter` runs the same aligned windows as NvmlEnergyMeter (warpk.telemetry.windows)
on the energy counter carried by a 5 ms stream. The daemon stamps each sample with the host's
CLOCK_MONOTONIC, which is `time.monotonic()` in this process too: the daemon must run on the
same host (it binds loopback by default).

Non-goals: no reconnection logic (a broken stream raises MeterError; make a new meter); the
daemon's proto stubs are imported from the `sampler` package, which never imports warpk.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import grpc

from sampler import sampler_pb2 as pb
from sampler import sampler_pb2_grpc as pb_grpc
from sampler.trace import METRICS
from warpk.telemetry.meter import CounterReading, EnergyMeasurement, EnergyMeter, MeterError, MeterSettings
from warpk.telemetry.windows import measure_with_counter, observe_idle


@dataclass(frozen=True)
class SamplerSample:
    """One GPU reading from the daemon; a metric the GPU does not support is None."""

    gpu: int
    seq: int
    monotonic_s: float
    unix_time_s: float
    power_w: float | None = None
    power_instant_w: float | None = None
    energy_j: float | None = None
    gpu_util_pct: int | None = None
    mem_util_pct: int | None = None
    temperature_c: int | None = None
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    power_limit_w: float | None = None
    memory_used_bytes: int | None = None
    pcie_tx_kb_s: int | None = None
    pcie_rx_kb_s: int | None = None
    throttle_reasons: int | None = None
    fan_speed_pct: int | None = None
    errors: tuple[tuple[str, int, str], ...] = ()  # (metric, NVML code, message)

    @classmethod
    def from_proto(cls, s: pb.Sample) -> SamplerSample:
        return cls(gpu=s.gpu, seq=s.seq, monotonic_s=s.monotonic_s, unix_time_s=s.unix_time_s,
                   errors=tuple((e.metric, e.code, e.message) for e in s.errors),
                   **{m: getattr(s, m) for m in METRICS if s.HasField(m)})


@dataclass(frozen=True)
class SamplerHealth:
    status: str
    backend: str
    gpus: tuple[int, ...]
    gpu_names: tuple[str, ...]
    default_interval_ms: int
    active_streams: int
    uptime_s: float
    metrics: tuple[str, ...]


class SamplerClient:
    """A channel to the sampler daemon.

    Args:
        addr: host:port of the daemon.
        timeout_s: deadline of Health.Check and of waiting for the channel to connect.
    """

    def __init__(self, addr: str = "127.0.0.1:50052", timeout_s: float = 5.0):
        self.addr, self.timeout_s = addr, timeout_s
        self.channel = grpc.insecure_channel(addr)
        self._sampler = pb_grpc.SamplerStub(self.channel)
        self._health = pb_grpc.HealthStub(self.channel)

    def health(self) -> SamplerHealth:
        r = self._health.Check(pb.HealthRequest(), timeout=self.timeout_s, wait_for_ready=True)
        return SamplerHealth(r.status, r.backend, tuple(r.gpus), tuple(r.gpu_names), r.default_interval_ms,
                             r.active_streams, r.uptime_s, tuple(r.metrics))

    def stream_batches(self, gpus=(), interval_ms: int | None = None, metrics=(), max_ticks: int = 0,
                       duration_s: float = 0.0, batch_ticks: int = 1, timeout_s: float | None = None):
        """The raw gRPC stream of SampleBatch messages (cancel() it to stop early).

        Raises grpc.RpcError (INVALID_ARGUMENT for interval 0, unknown GPU or metric).
        """
        request = pb.StreamRequest(gpus=list(gpus), metrics=list(metrics), max_ticks=max_ticks,
                                   duration_s=duration_s, batch_ticks=batch_ticks)
        if interval_ms is not None:
            request.interval_ms = interval_ms
        return self._sampler.StreamSamples(request, timeout=timeout_s, wait_for_ready=True)

    def stream(self, **kwargs) -> Iterator[SamplerSample]:
        """Samples one by one (arguments as stream_batches); bound it with max_ticks or duration_s."""
        for batch in self.stream_batches(**kwargs):
            yield from (SamplerSample.from_proto(s) for s in batch.samples)

    def close(self) -> None:
        self.channel.close()

    def __enter__(self) -> SamplerClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class SamplerCounter:
    """The latest energy reading of one GPU, kept current by a background stream.

    `read()` returns the newest sample's energy and its daemon timestamp (host monotonic).
    """

    def __init__(self, client: SamplerClient, gpu: int = 0, interval_ms: int = 5, timeout_s: float = 5.0):
        self._stream = client.stream_batches(gpus=[gpu], interval_ms=interval_ms, metrics=["energy_j"])
        self._latest: CounterReading | None = None
        self._error: BaseException | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._consume, daemon=True, name="sampler-counter")
        self._thread.start()
        if not self._ready.wait(timeout_s):
            self.close()
            raise MeterError(f"no sample from the sampler at {client.addr} within {timeout_s} s")
        if self._latest is None:
            self.close()
            raise MeterError(f"sampler stream failed: {self._error!r}")

    def _consume(self) -> None:
        try:
            for batch in self._stream:
                for s in batch.samples:
                    if not s.HasField("energy_j"):
                        errors = "; ".join(f"{e.metric}: {e.message}" for e in s.errors) or "not supported"
                        raise MeterError(f"GPU {s.gpu} reports no energy ({errors})")
                    self._latest = CounterReading(s.energy_j, s.monotonic_s)
                self._ready.set()
        except grpc.RpcError as e:
            if e.code() != grpc.StatusCode.CANCELLED:
                self._error = e
        except MeterError as e:
            self._error = e
        finally:
            self._ready.set()

    def read(self) -> CounterReading:
        if self._error is not None:
            raise MeterError(f"sampler stream failed: {self._error}")
        return self._latest

    def close(self) -> None:
        self._stream.cancel()
        self._thread.join(timeout=2.0)


class SamplerEnergyMeter(EnergyMeter):
    """Aligned energy windows on the counter streamed by the sampler daemon (same host).

    Args:
        addr: host:port of the daemon.
        gpu: NVML index of the device.
        settings: window settings.
        interval_ms: stream interval; it bounds how precisely a window edge is located.
        sleep: called between counter reads while idle.
    """

    source = "sampler"

    def __init__(self, addr: str = "127.0.0.1:50052", gpu: int = 0, settings: MeterSettings | None = None,
                 interval_ms: int = 5, sleep: Callable[[float], object] = time.sleep):
        self.client = SamplerClient(addr)
        try:
            self.counter = SamplerCounter(self.client, gpu, interval_ms)
        except BaseException:
            self.client.close()
            raise
        self.settings = settings or MeterSettings(poll_s=interval_ms / 2000.0)
        self.sleep = sleep

    def measure(self, fn: Callable[[], object], *, sync: Callable[[], object]) -> EnergyMeasurement:
        return measure_with_counter(fn, sync, self.counter, self.settings, self.source, time.monotonic,
                                    self.sleep)

    def observe_idle(self, seconds: float) -> tuple[float, float | None]:
        """(idle power in W, counter update period in s or None) over >= `seconds` of idle, as
        NvmlEnergyMeter.observe_idle, on the streamed counter."""
        settings = dataclasses.replace(self.settings, idle_window_s=seconds)
        return observe_idle(self.counter, settings, time.monotonic, self.sleep)

    def close(self) -> None:
        self.counter.close()
        self.client.close()
